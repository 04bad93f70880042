#!/usr/bin/env bash
# cleanrl/ppg_procgen.py on three envpool Procgen games in easy mode (StarpilotEasy-v0, BossfightEasy-v0,
# BigfishEasy-v0), 3 seeds x 25M steps (CleanRL's published budget; hours per run on a GPU), one run at a time:
# each run keeps a 6.0 GiB auxiliary buffer in CPU memory, and its log ends with the peak memory
# (/usr/bin/time -v). Then report.md and a PNG of curves per game in $RESULTS/ppg_procgen/ (default
# benchmark/results/), with CleanRL's published returns as reference column where
# benchmark/published_returns.csv has them.
#   bash benchmark/ppg_procgen.sh
#   ENVS=StarpilotEasy-v0 SEEDS="1" STEPS=2097152 bash benchmark/ppg_procgen.sh --track   # 4 phases
# ENVS, SEEDS (consecutive), STEPS and WORKERS override the defaults; extra flags go to ppg_procgen.py. Runs go
# through cleanrl_utils.benchmark (a log per run in $OUT/logs) into $OUT/runs (default benchmark/out/ppg_procgen).
set -euo pipefail
envs=${ENVS:-"StarpilotEasy-v0 BossfightEasy-v0 BigfishEasy-v0"}
seeds=${SEEDS:-"1 2 3"}
default_steps=25000000
steps=${STEPS:-$default_steps}
workers=${WORKERS:-1}
source "$(dirname "$0")/common.sh" ppg_procgen

# the runner takes a first seed and a count: SEEDS must be consecutive
read -r -a seed_list <<< "$seeds"
start_seed=${seed_list[0]}
num_seeds=${#seed_list[@]}
if [ "$seeds" != "$(seq -s ' ' "$start_seed" $((start_seed + num_seeds - 1)))" ]; then
  echo "$(basename "$0"): SEEDS must be consecutive numbers such as \"1 2 3\", got \"$seeds\"" >&2
  exit 2
fi
# one command string, each word quoted for the runner's shell-word split (no shell runs it)
command=$(printf '%q ' /usr/bin/time -v "$python" "$repo/cleanrl/ppg_procgen.py" --total-timesteps "$steps" "$@")
read -r -a env_list <<< "$envs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids "${env_list[@]}" \
  --command "$command" --start-seed "$start_seed" --num-seeds "$num_seeds" --workers "$workers" --log-dir "$out/logs"
grep -h -E "^auxiliary buffer:|Maximum resident set size" "$out"/logs/*.log || true

reference=()
if [ "$steps" = "$default_steps" ]; then
  reference=(--reference "$repo/benchmark/published_returns.csv")
fi
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --out "$results/ppg_procgen" \
  ${reference[@]+"${reference[@]}"}
