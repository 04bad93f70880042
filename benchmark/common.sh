# Sourced by the benchmark scripts: paths and the output folders they share.
#   source "$(dirname "$0")/common.sh" NAME   # NAME: the default folder under benchmark/out/
# Sets repo, python ($PYTHON or .venv's), out ($OUT or benchmark/out/NAME) and results ($RESULTS or
# benchmark/results/), both made absolute, and enters $out. Refuses (exit 2) an $out/runs that already
# holds runs, since they would mix into the new table.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
out=${OUT:-$repo/benchmark/out/$1}
results=${RESULTS:-$repo/benchmark/results}
if [ -n "$(ls -A "$out/runs" 2>/dev/null)" ]; then
  echo "$(basename "$0"): $out/runs already holds runs, which would mix into this table; set OUT to a new folder" >&2
  exit 2
fi
mkdir -p "$out" "$results"
out=$(cd "$out" && pwd)
results=$(cd "$results" && pwd)
cd "$out"
