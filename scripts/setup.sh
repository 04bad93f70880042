#!/usr/bin/env bash
# One-command set-up: creates .venv at the repository root and installs the pinned, tested set
# (requirements.txt, torch pinned to 2.13.0), the docs site's tools (requirements-docs.txt) plus this project in
# editable mode.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "cleanrl needs Python >= 3.11, found " + sys.version.split()[0])'
# a .venv left half-made by an interrupted set-up (no pip in it) is made again
if ! { [ -x .venv/bin/python ] && .venv/bin/python -m pip --version >/dev/null 2>&1; }; then
    rm -rf .venv
    python3 -m venv .venv
fi
# torch first and pinned: an unpinned or ranged torch would pull a multi-GB CUDA build. From the plain package
# index, torch 2.13.0 on Linux x86_64 is the CUDA build; TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# takes the small CPU build instead (where a torch file is already at hand, pip takes that one)
.venv/bin/python -m pip install --quiet --disable-pip-version-check ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} \
    torch==2.13.0
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
# the documentation site's build tools (mkdocs + Material), kept out of the container image's set
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-docs.txt
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
.venv/bin/python -m pip check
echo "set-up done: activate with 'source .venv/bin/activate'"
