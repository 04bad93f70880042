#!/usr/bin/env bash
# One script on one suite of envs, CleanRL style: every env x every seed, then a table and curves.
#   bash benchmark/suite.sh classic_control dqn     # cleanrl/dqn.py: 3 envs x 3 seeds x 500k steps, 2 at a time
#   bash benchmark/suite.sh mujoco sac               # cleanrl/sac_continuous_action.py: 3 MuJoCo envs x 3 seeds x 1M
#   SEEDS="1 2 3 4 5" WORKERS=4 bash benchmark/suite.sh classic_control c51 --track   # extra flags go to the script
# Suites: classic_control (CartPole-v1 Acrobot-v1 MountainCar-v0, 500k steps; NAME is cleanrl/NAME.py) and
# mujoco (HalfCheetah-v5 Walker2d-v5 Hopper-v5, 1M steps; NAME is cleanrl/NAME_continuous_action.py).
# ENVS, SEEDS, STEPS and WORKERS override the defaults. Runs land in $OUT/runs (default
# benchmark/out/NAME_SUITE); the table and curves in $RESULTS (default benchmark/results/) as
# NAME_SUITE_table.md and NAME_SUITE.png. The per-algorithm scripts (ppo.sh, sac.sh, ...) call this.
set -euo pipefail
suite=${1:?usage: suite.sh classic_control|mujoco SCRIPT_NAME [extra flags]}
name=${2:?usage: suite.sh classic_control|mujoco SCRIPT_NAME [extra flags]}
shift 2
case "$suite" in
  classic_control) default_envs="CartPole-v1 Acrobot-v1 MountainCar-v0" default_steps=500000 script=$name.py ;;
  mujoco) default_envs="HalfCheetah-v5 Walker2d-v5 Hopper-v5" default_steps=1000000 script=${name}_continuous_action.py ;;
  *) echo "suite.sh: unknown suite '$suite'; use classic_control or mujoco" >&2; exit 2 ;;
esac
envs=${ENVS:-$default_envs}
seeds=${SEEDS:-"1 2 3"}
steps=${STEPS:-$default_steps}
workers=${WORKERS:-2}
source "$(dirname "$0")/common.sh" "${name}_$suite"

if ! for env_id in $envs; do
  for seed in $seeds; do
    echo "$env_id $seed"
  done
done | PY="$python" SCRIPT="$repo/cleanrl/$script" STEPS="$steps" EXTRA="$*" OMP_NUM_THREADS=1 xargs -P "$workers" -L 1 sh -c \
  'if "$PY" "$SCRIPT" --env-id "$0" --seed "$1" --total-timesteps "$STEPS" --no-cuda $EXTRA > "log-$0-$1.txt" 2>&1; then
     echo "done: $0 seed $1"
   else
     echo "failed: $0 seed $1; the end of $PWD/log-$0-$1.txt:" >&2; tail -n 3 "log-$0-$1.txt" >&2; exit 1
   fi'
then
  # xargs runs the others to the end, then reports the failure (each failed run printed its log's end)
  echo "$name: a run failed; no table written" >&2
  exit 1
fi

"$python" -m cleanrl_utils.report --runs-dir "$out/runs" \
  --markdown "$results/${name}_${suite}_table.md" --plot "$results/${name}_${suite}.png"
