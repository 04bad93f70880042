"""Upstream CleanRL's own test commands, run as written against our scripts and tools.

tests/upstream_test_commands.tsv lists the command lines of upstream's tests/test_*.py (its master of 2026-04),
with their tiny budgets. Each runs here as a user would type it: from a folder where `cleanrl/` is this
repository's scripts (or from inside `cleanrl_utils/` for the `enjoy.py` lines), `python` being the project's
Python and `torchrun` the one beside it. A command passes when it exits 0 without a traceback, as upstream's
tests require (`subprocess.run(..., check=True)`). Two things differ from upstream's machines, both outside the
command line:
  - the Hugging Face Hub is a local stand-in (tests/hub_standin.py, reached through HF_ENDPOINT) serving, under
    the repository names upstream's commands ask for (`cleanrl/{env}-{script}-seed1`), models that tiny runs of
    the same scripts saved: enjoy's three lines and QDagger's teachers download through the real client;
  - `uv run` (upstream's environment manager) is left out: the project's virtual environment is the environment.
The Procgen lines skip, saying why, where envpool's Procgen games cannot load (no Qt 5 runtime; CI installs it).
"""

import hashlib
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, check_ok, missing_tool, procgen_missing, run_script, script_env
from hub_standin import HubStandIn

TSV = Path(__file__).with_name("upstream_test_commands.tsv")
COMMANDS = [tuple(line.split("\t")) for line in TSV.read_text().splitlines() if line and not line.startswith("#")]
BIN = Path(sys.executable).parent
# the models upstream's Hub-reading commands download: (repository, file) <- the script that saves it, and its flags
CARTPOLE_SAVE = ["--save-model", "--total-timesteps", "205"]
TINY_SAVE = ["--save-model", "--learning-starts", "10", "--total-timesteps", "16", "--buffer-size", "10", "--batch-size", "4"]
HUB_MODELS = {
    ("cleanrl/CartPole-v1-dqn-seed1", "dqn.cleanrl_model"): ("dqn.py", CARTPOLE_SAVE),
    ("cleanrl/CartPole-v1-dqn_jax-seed1", "dqn_jax.cleanrl_model"): ("dqn_jax.py", CARTPOLE_SAVE),
    ("cleanrl/BreakoutNoFrameskip-v4-dqn_atari-seed1", "dqn_atari.cleanrl_model"): ("dqn_atari.py", TINY_SAVE),
    ("cleanrl/BreakoutNoFrameskip-v4-dqn_atari_jax-seed1", "dqn_atari_jax.cleanrl_model"): ("dqn_atari_jax.py", TINY_SAVE),
}  # fmt: skip
NEEDS_HUB = ("enjoy.py", "qdagger_")


def command_id(index, entry):
    """`NN-script[-save]`: the line's place in the list and what it runs."""
    words = shlex.split(entry[1])
    name = next((Path(w).stem for w in words if w.endswith(".py")), words[-1])
    name = "submit_exp" if "cleanrl_utils.submit_exp" in words else name
    return f"{index:02d}-{name}{'-save' if '--save-model' in words else ''}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A folder laid out as upstream's checkout is for its commands: cleanrl/ (this repository's scripts) and
    cleanrl_utils/enjoy.py; what the runs write (runs/, videos/) stays in it."""
    work = tmp_path_factory.mktemp("upstream")
    (work / "cleanrl").symlink_to(REPO / "cleanrl")
    (work / "cleanrl_utils").mkdir()
    (work / "cleanrl_utils" / "enjoy.py").symlink_to(REPO / "cleanrl_utils" / "enjoy.py")
    return work


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The Hub stand-in, serving the models of HUB_MODELS, each saved by a tiny run of its script."""
    hub = HubStandIn(tmp_path_factory.mktemp("hub"))
    makers = tmp_path_factory.mktemp("hub-models")
    for (repo_id, filename), (script, flags) in HUB_MODELS.items():
        check_ok(run_script(script, *flags, cwd=makers))  # what the stand-in serves, not a command under test
        (model,) = makers.glob(f"runs/*__{script[:-3]}__*/{filename}")
        content = model.read_bytes()
        commit = hashlib.sha1(f"{repo_id}{len(content)}".encode()).hexdigest()
        hub.repos[repo_id] = {"commit": commit, "files": {filename: content}}
    yield hub
    hub.stop()


def hub_env(hub, home):
    env = {k: v for k, v in script_env().items() if not k.startswith(("HF_", "HUGGING_FACE_"))}
    return env | {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1"}


PARAMS = [  # the Hub's users on one test worker, so that the stand-in and its models are made once
    pytest.param(c, id=command_id(i, c), marks=[pytest.mark.xdist_group("upstream_hub")] * any(p in c[1] for p in NEEDS_HUB))
    for i, c in enumerate(COMMANDS, 1)
]


@pytest.mark.parametrize("entry", PARAMS)
def test_upstream_command_runs_as_written(entry, workdir, request, tmp_path):
    test_file, command = entry
    words = shlex.split(command)
    if test_file == "test_procgen.py" and procgen_missing() is not None:
        missing_tool(f"envpool Procgen: {procgen_missing()}")
    if words[:2] == ["uv", "run"]:
        words = words[2:]  # upstream's environment manager; the project's virtual environment is ours
    program = {"python": sys.executable, "torchrun": str(BIN / "torchrun")}[words[0]]
    env = script_env() | {"PYTHONPATH": str(REPO), "HOME": str(tmp_path)}  # HOME: no ~/.netrc, no saved logins
    if any(part in command for part in NEEDS_HUB):
        env = hub_env(request.getfixturevalue("hub"), tmp_path / "hf")
    cwd = workdir / "cleanrl_utils" if words[1] == "enjoy.py" else workdir
    result = subprocess.run([program, *words[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    output = f"$ {command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, output
    assert "Traceback" not in result.stderr, output
    if "--save-model" in words and "cleanrl/" in command:
        script = Path(next(w for w in words if w.endswith(".py"))).stem
        assert list(workdir.glob(f"runs/*__{script}__*/{script}.cleanrl_model")), output


def test_the_list_is_upstream_s_as_the_shared_copy_has_it():
    shared = REPO.parent / "shared" / "upstream-test-commands.tsv"  # the project's shared notes, where present
    if shared.exists():
        assert TSV.read_text() == shared.read_text()
    assert len(COMMANDS) == 48 and len({c[0] for c in COMMANDS}) == 13
