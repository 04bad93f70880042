"""The scripts' shape as the contract measures it (script contract §1): `../shared/tools/script_shape.py --check`
on the scripts as `ruff format` lays them out, and no formatter opt-out standing in any of them."""

import re
import subprocess
import sys

import pytest

from conftest import REPO, SCRIPTS

TOOL = REPO.parent / "shared" / "tools" / "script_shape.py"


def test_no_script_opts_out_of_the_formatter_and_each_is_formatted():
    for path in sorted(SCRIPTS.glob("*.py")):
        assert not re.search(r"#\s*fmt:\s*(skip|off|on)\b", path.read_text()), path.name
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--line-length", "127", str(SCRIPTS)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(not TOOL.exists(), reason=f"{TOOL} is not here (it lives beside the repository, in ../shared)")
def test_every_script_meets_the_contracts_size_targets():
    done = subprocess.run([sys.executable, str(TOOL), "--check"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "all targets met" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
