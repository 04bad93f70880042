#!/usr/bin/env bash
# One classic-control script, CleanRL style: every env x every seed, then a table and curves.
#   bash benchmark/classic_control.sh dqn            # cleanrl/dqn.py: 3 envs x 3 seeds x 500k steps, 2 at a time
#   SEEDS="1 2 3 4 5" WORKERS=4 bash benchmark/classic_control.sh c51 --track   # extra flags go to the script
# Runs land in $OUT/runs (default benchmark/out/NAME); the generated table and curves in $RESULTS
# (default benchmark/results/) as NAME_classic_control_table.md and NAME_classic_control.png.
# ppo.sh, dqn.sh, c51.sh and pqn.sh call this with their script's name.
set -euo pipefail
name=${1:?usage: classic_control.sh SCRIPT_NAME [extra flags]}
shift
envs=${ENVS:-"CartPole-v1 Acrobot-v1 MountainCar-v0"}
seeds=${SEEDS:-"1 2 3"}
steps=${STEPS:-500000}
workers=${WORKERS:-2}
source "$(dirname "$0")/common.sh" "$name"

if ! for env_id in $envs; do
  for seed in $seeds; do
    echo "$env_id $seed"
  done
done | PY="$python" SCRIPT="$repo/cleanrl/$name.py" STEPS="$steps" EXTRA="$*" OMP_NUM_THREADS=1 xargs -P "$workers" -L 1 sh -c \
  '"$PY" "$SCRIPT" --env-id "$0" --seed "$1" --total-timesteps "$STEPS" --no-cuda $EXTRA > "log-$0-$1.txt" 2>&1 && echo "done: $0 seed $1"'
then
  echo "$name: a run failed; the end of its log:" >&2
  grep -L -s "^global_step=" log-*.txt | head -n 1 | xargs tail -n 3 >&2
  exit 1
fi

"$python" -m cleanrl_utils.report --runs-dir "$out/runs" \
  --markdown "$results/${name}_classic_control_table.md" --plot "$results/${name}_classic_control.png"
