#!/usr/bin/env bash
# cleanrl/pqn_atari_envpool.py on CleanRL's published games (Breakout-v5, Pong-v5, BeamRider-v5), 3 seeds x 10M
# steps, one run at a time (each steps 128 envs on envpool's threads and uses the GPU when there is one), then
# report.md and a PNG of curves per game in $RESULTS/pqn_atari_envpool/ (default benchmark/results/).
#   bash benchmark/pqn_atari_envpool.sh
#   ENVS=Breakout-v5 SEEDS="1 2" STEPS=1000000 WORKERS=2 OUT=/tmp/pqn RESULTS=/tmp bash benchmark/pqn_atari_envpool.sh --track
# ENVS, SEEDS (consecutive), STEPS and WORKERS override the defaults; extra flags go to the script; the runs go
# through cleanrl_utils.benchmark (a log per run in $OUT/logs, default benchmark/out/pqn_atari_envpool). At the
# default STEPS the table has a reference column from benchmark/published_returns.csv. SCRIPT picks the script
# (benchmark/pqn_atari_envpool_lstm.sh sets it to pqn_atari_envpool_lstm).
set -euo pipefail
name=${SCRIPT:-pqn_atari_envpool}
envs=${ENVS:-"Breakout-v5 Pong-v5 BeamRider-v5"}
seeds=${SEEDS:-"1 2 3"}
default_steps=10000000
steps=${STEPS:-$default_steps}
workers=${WORKERS:-1}
source "$(dirname "$0")/common.sh" "$name"

# the runner takes a first seed and a count: SEEDS must be consecutive
read -r -a seed_list <<< "$seeds"
start_seed=${seed_list[0]}
num_seeds=${#seed_list[@]}
if [ "$seeds" != "$(seq -s ' ' "$start_seed" $((start_seed + num_seeds - 1)))" ]; then
  echo "$(basename "$0"): SEEDS must be consecutive numbers such as \"1 2 3\", got \"$seeds\"" >&2
  exit 2
fi
# one command string, each word quoted for the runner's shell-word split (no shell runs it)
command=$(printf '%q ' "$python" "$repo/cleanrl/$name.py" --total-timesteps "$steps" "$@")
read -r -a env_list <<< "$envs"
status=0
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids "${env_list[@]}" \
  --command "$command" --start-seed "$start_seed" --num-seeds "$num_seeds" --workers "$workers" --log-dir "$out/logs" \
  || status=$?
if [ "$status" -ne 0 ]; then
  case $status in
    129|130|143) echo "$name: stopped before the runs finished; no table written" >&2; exit "$status" ;;
    *) echo "$name: a run failed; no table written" >&2; exit 1 ;;
  esac
fi

reference=()
if [ "$steps" = "$default_steps" ]; then
  reference=(--reference "$repo/benchmark/published_returns.csv")
fi
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 --out "$results/$name" \
  ${reference[@]+"${reference[@]}"}
