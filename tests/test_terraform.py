"""terraform/ (the AWS Batch stack): formatted, valid, its own `terraform test` suite passes against a
mocked AWS provider, and checkov finds nothing beyond the documented exceptions.

Offline: `terraform init` installs hashicorp/aws from a local filesystem mirror through a CLI config
written to a temporary folder. Everything runs on copies of terraform/ in temporary folders, so no
.terraform/ or .terraform.lock.hcl lands in the repository. Skips (with the reason) only where the
terraform binary, a mirror of the provider or checkov is absent.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import missing_tool

REPO = Path(__file__).resolve().parents[1]
STACK = REPO / "terraform"
PROVIDER = "registry.terraform.io/hashicorp/aws"
# Where a filesystem mirror of providers usually lives; CLEANRL_TF_PLUGIN_MIRROR names another one.
MIRROR_ROOTS = [
    "/opt/tf-plugins",
    "~/.terraform.d/plugins",
    "~/.local/share/terraform/plugins",
    "/usr/local/share/terraform/plugins",
    "/usr/share/terraform/plugins",
]


def provider_mirror():
    """(mirror root, version) of a local mirror holding hashicorp/aws 5.x (>= 5.60, as versions.tf asks)
    for this platform, in the unpacked or the packed layout; None when there is none."""
    roots = [os.environ["CLEANRL_TF_PLUGIN_MIRROR"]] if os.environ.get("CLEANRL_TF_PLUGIN_MIRROR") else []
    roots += [r for pattern in MIRROR_ROOTS for r in sorted(glob.glob(os.path.expanduser(pattern)))]
    for root in roots:
        pattern = [f"{root}/{PROVIDER}/*/*_amd64/terraform-provider-aws*", f"{root}/{PROVIDER}/terraform-provider-aws_*.zip"]
        for hit in sorted({h for p in pattern for h in glob.glob(p)}, reverse=True):
            version = re.search(r"(\d+)\.(\d+)\.(\d+)", hit.removeprefix(f"{root}/{PROVIDER}/"))
            if version and int(version[1]) == 5 and int(version[2]) >= 60:
                return root, version[0]
    return None


def terraform_env(tmp):
    """The environment of every terraform call: none of the caller's TF_* settings, the CLI config
    pointing at the mirror, no update check over the network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    env.update(
        TF_CLI_CONFIG_FILE=str(tmp / "terraform.tfrc"),
        TF_DATA_DIR=str(tmp / "tf-data"),
        TF_IN_AUTOMATION="1",
        TF_INPUT="0",
        CHECKPOINT_DISABLE="1",
    )
    return env


def write_mirror_config(tmp, root):
    """The CLI config that terraform_env(tmp) names: install hashicorp/aws from the mirror at `root` only."""
    (tmp / "terraform.tfrc").write_text(
        f'provider_installation {{\n  filesystem_mirror {{\n    path    = "{root}"\n    include = ["{PROVIDER}"]\n  }}\n}}\n'
    )


def copy_stack(dest):
    # without a developer's own state or values (terraform.tfvars would change what the suite plans)
    ignore = shutil.ignore_patterns(".terraform", ".terraform.lock.hcl", "*.tfstate*", "*.tfvars", "*.tfvars.json")
    shutil.copytree(STACK, dest, ignore=ignore)
    return dest


def run(cmd, cwd, env, timeout=180):
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"{' '.join(map(str, cmd))}: exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )
    return result.stdout


@pytest.fixture(scope="module")
def terraform():
    path = shutil.which("terraform")
    if path is None:
        pytest.skip("terraform is not installed (needs >= 1.11, see terraform/README.md)")
    return path


@pytest.fixture
def mirror_env(terraform, tmp_path):
    found = provider_mirror()
    if found is None:
        pytest.skip(
            f"no local filesystem mirror of {PROVIDER} 5.x (>= 5.60) in {', '.join(MIRROR_ROOTS)}; "
            "set CLEANRL_TF_PLUGIN_MIRROR to the folder that holds registry.terraform.io/"
        )
    write_mirror_config(tmp_path, found[0])
    return terraform_env(tmp_path)


def test_fmt(terraform, tmp_path):
    stack = copy_stack(tmp_path / "terraform")
    run([terraform, "fmt", "-check", "-recursive", "-diff", "-no-color"], stack, terraform_env(tmp_path))


def test_init_validate_and_terraform_test(terraform, mirror_env, tmp_path):
    # one test for the three: init (which hashes the ~700 MB provider) is the slow part, done once
    stack = copy_stack(tmp_path / "terraform")
    run([terraform, "init", "-backend=false", "-no-color"], stack, mirror_env)
    assert "The configuration is valid" in run([terraform, "validate", "-no-color"], stack, mirror_env)
    out = run([terraform, "test", "-no-color"], stack, mirror_env)
    summary = re.search(r"Success! (\d+) passed, 0 failed", out)
    assert summary and int(summary[1]) >= 7, out[-3000:]
    for suite in ("tests/stack.tftest.hcl", "tests/validation.tftest.hcl"):
        assert f"{suite}... pass" in out, out[-3000:]


def checkov_command():
    """checkov from PATH, from beside this Python (a virtual environment's bin/), or CHECKOV=path."""
    for candidate in (os.environ.get("CHECKOV"), shutil.which("checkov"), str(Path(sys.executable).parent / "checkov")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def test_checkov(tmp_path):
    checkov = checkov_command()
    if checkov is None:
        missing_tool("checkov is not installed (pip install checkov, ideally in its own virtual environment; or set CHECKOV)")
    stack = copy_stack(tmp_path / "terraform")
    out = run([checkov, "-d", str(stack), "--skip-download", "--compact", "--quiet"], tmp_path, dict(os.environ))
    assert "Failed checks: 0" in out, out[-4000:]


def test_checkov_exceptions_are_documented():
    """Every `#checkov:skip=ID:reason` in terraform/ gives a reason and is listed in terraform/README.md."""
    readme = (STACK / "README.md").read_text()
    skips = [
        m
        for tf in sorted(STACK.rglob("*.tf"))
        if ".terraform" not in tf.parts
        for m in re.findall(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?", tf.read_text())
    ]
    assert skips, "expected the documented log-group exceptions"
    for check_id, reason in skips:
        assert reason and len(reason.strip()) > 20, f"{check_id} is skipped without a reason"
        assert check_id in readme, f"{check_id} is skipped in terraform/ but not listed in terraform/README.md"
