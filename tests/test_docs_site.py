"""The documentation site (mkdocs.yml, docs/) cannot silently fall behind the code: it builds with `--strict` (no
broken link or anchor, no page left out of the navigation), its generated blocks match their sources, and every
script in cleanrl/ has one section on an algorithm page that lists every flag of the script's own `--help` and
names every TensorBoard tag the script logs."""

import re
import subprocess
import sys

import pytest

from cleanrl_utils import docs_reference
from conftest import REPO, SCRIPTS, script_env

ALGORITHM_PAGES = sorted((REPO / "docs" / "algorithms").glob("*.md"))
SCRIPT_NAMES = sorted(p.name for p in SCRIPTS.glob("*.py") if p.name != "__init__.py")
HEADING = re.compile(r"^## `([\w.]+\.py)`\s*$", re.MULTILINE)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def script_sections():
    """{script name: [(page, the text of its section: from its `## ` heading to the next `## ` heading)]}."""
    found = {}
    for page in ALGORITHM_PAGES:
        text = page.read_text()
        for match in HEADING.finditer(text):
            end = text.find("\n## ", match.end())
            found.setdefault(match.group(1), []).append((page, text[match.start() : len(text) if end < 0 else end]))
    return found


SECTIONS = script_sections()


def without_generated(text):
    return docs_reference.BLOCK.sub("", text)


def test_site_builds_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env=script_env() | {"NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    for page in ("index.html", "algorithms/ppo/index.html", "get-started/installation/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    # the result reports' curves reach the site through docs/benchmark
    assert (tmp_path / "site" / "benchmark" / "results" / "ppo_classic_control" / "CartPole-v1.png").is_file()


def test_generated_blocks_are_current(capsys):
    assert docs_reference.main(["--check"]) == 0, capsys.readouterr().out


def test_every_script_has_one_section():
    assert sorted(SECTIONS) == SCRIPT_NAMES
    doubled = {name: [str(p.relative_to(REPO)) for p, _ in found] for name, found in SECTIONS.items() if len(found) > 1}
    assert doubled == {}, f"scripts with more than one section: {doubled}"


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_every_flag_of_the_help_is_in_the_section(script, fork_script, tmp_path):
    [(page, section)] = SECTIONS[script]
    assert ("flags", script) in [(k, a) for k, a, _ in docs_reference.blocks(section)], (
        f"{page.relative_to(REPO)}: the section of {script} has no generated flags block"
    )
    result = fork_script(script, "--help", cwd=tmp_path, env=script_env() | {"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr[-2000:]
    flags = set(FLAG.findall(result.stdout)) - {"--help"}
    assert len(flags) >= 10, result.stdout  # the shared flags alone are more
    missing = sorted(flags - set(FLAG.findall(section)))
    assert missing == [], f"{page.relative_to(REPO)}: flags of {script} --help missing from its section: {missing}"


@pytest.mark.parametrize("script", SCRIPT_NAMES)
def test_every_logged_tag_is_explained(script):
    [(page, _)] = SECTIONS[script]
    prose = without_generated(page.read_text())
    missing = [tag for tag in docs_reference.logged_tags(SCRIPTS / script) if tag not in prose]
    assert missing == [], f"{page.relative_to(REPO)}: tags {script} logs that the page does not explain: {missing}"


def test_docs_reference_flags_follow_tyro():
    """The generated table spells flags as tyro does: dashes for underscores, `--no-` for each bool."""
    flags = {f.name: f for f in docs_reference.script_flags(SCRIPTS / "dqn.py")}
    assert flags["exp_name"].default == "dqn"
    assert flags["learning_rate"].default == "2.5e-4"
    assert flags["capture_video"].flags == ["--capture-video", "--no-capture-video"]
    assert flags["env_id"].flags == ["--env-id"]
    assert flags["env_id"].help == "the id of the environment"
