#!/usr/bin/env bash
# PPO on classic control, CleanRL style: every env x every seed, then a table and curves.
#   bash benchmark/ppo.sh                      # 3 envs x 3 seeds x 500k steps, 2 runs at a time
#   SEEDS="1 2 3 4 5" WORKERS=4 bash benchmark/ppo.sh --track   # extra flags go to ppo.py
# Runs land in $OUT/runs (default benchmark/out/ppo); the table and PNG in benchmark/results/.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
out=${OUT:-$repo/benchmark/out/ppo}
envs=${ENVS:-"CartPole-v1 Acrobot-v1 MountainCar-v0"}
seeds=${SEEDS:-"1 2 3"}
workers=${WORKERS:-2}
mkdir -p "$out"
cd "$out"

for env_id in $envs; do
  for seed in $seeds; do
    echo "$env_id $seed"
  done
done | PY="$python" REPO="$repo" EXTRA="$*" OMP_NUM_THREADS=1 xargs -P "$workers" -L 1 sh -c \
  '"$PY" "$REPO/cleanrl/ppo.py" --env-id "$0" --seed "$1" --total-timesteps 500000 --no-cuda $EXTRA > "log-$0-$1.txt" 2>&1 && echo "done: $0 seed $1"'

"$python" -m cleanrl_utils.report --runs-dir "$out/runs" \
  --markdown "$repo/benchmark/results/ppo_classic_control.md" --plot "$repo/benchmark/results/ppo_classic_control.png"
