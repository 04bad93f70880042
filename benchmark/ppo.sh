#!/usr/bin/env bash
# PPO on classic control, CleanRL style: every env x every seed, then a table and curves.
#   bash benchmark/ppo.sh                      # 3 envs x 3 seeds x 500k steps, 2 runs at a time
#   SEEDS="1 2 3 4 5" WORKERS=4 bash benchmark/ppo.sh --track   # extra flags go to ppo.py
# Runs land in $OUT/runs (default benchmark/out/ppo); the generated table and curves in $RESULTS
# (default benchmark/results/) as ppo_classic_control_table.md and ppo_classic_control.png.
set -euo pipefail
envs=${ENVS:-"CartPole-v1 Acrobot-v1 MountainCar-v0"}
seeds=${SEEDS:-"1 2 3"}
steps=${STEPS:-500000}
workers=${WORKERS:-2}
source "$(dirname "$0")/common.sh" ppo

if ! for env_id in $envs; do
  for seed in $seeds; do
    echo "$env_id $seed"
  done
done | PY="$python" REPO="$repo" STEPS="$steps" EXTRA="$*" OMP_NUM_THREADS=1 xargs -P "$workers" -L 1 sh -c \
  '"$PY" "$REPO/cleanrl/ppo.py" --env-id "$0" --seed "$1" --total-timesteps "$STEPS" --no-cuda $EXTRA > "log-$0-$1.txt" 2>&1 && echo "done: $0 seed $1"'
then
  echo "ppo.sh: a run failed; the end of its log:" >&2
  grep -L -s "^global_step=" log-*.txt | head -n 1 | xargs tail -n 3 >&2
  exit 1
fi

"$python" -m cleanrl_utils.report --runs-dir "$out/runs" \
  --markdown "$results/ppo_classic_control_table.md" --plot "$results/ppo_classic_control.png"
