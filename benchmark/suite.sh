#!/usr/bin/env bash
# One script on one suite of envs, CleanRL style: every env x every seed, then a table and curves.
#   bash benchmark/suite.sh classic_control dqn     # cleanrl/dqn.py: 3 envs x 3 seeds x 500k steps, 2 at a time
#   bash benchmark/suite.sh mujoco sac               # cleanrl/sac_continuous_action.py: 3 MuJoCo envs x 3 seeds x 1M
#   SEEDS="1 2 3 4 5" WORKERS=4 bash benchmark/suite.sh classic_control c51 --track   # extra flags go to the script
# Suites: classic_control (CartPole-v1 Acrobot-v1 MountainCar-v0, 500k steps; NAME is cleanrl/NAME.py),
# mujoco (HalfCheetah-v5 Walker2d-v5 Hopper-v5, 1M steps; NAME is cleanrl/NAME_continuous_action.py) and
# dm_control (cartpole-balance, cartpole-swingup, ball_in_cup-catch, cheetah-run through Shimmy, 1M steps,
# the budget of CleanRL's dm_control table; needs the dm_control extra; NAME as for mujoco). A NAME
# ending in _jax is the JAX twin (dqn_jax: cleanrl/dqn_jax.py; sac_jax: cleanrl/sac_continuous_action_jax.py): it
# gets no --no-cuda (JAX has no such flag), one XLA CPU thread per run as a torch run gets one OpenMP thread, and on a
# GPU allocates memory as it needs it instead of JAX's default 75 %, so that WORKERS runs share the card.
# ENVS, SEEDS (consecutive), STEPS and WORKERS override the defaults; the runs go through
# cleanrl_utils.benchmark (a log per run in $OUT/logs). Runs land in $OUT/runs (default
# benchmark/out/NAME_SUITE); the report (cleanrl_utils.report) in $RESULTS/NAME_SUITE/ (default
# benchmark/results/): report.md with the table and a PNG of curves per env. At the default STEPS (the
# published budget) the table has a reference column from benchmark/published_returns.csv (CleanRL's
# published returns; the MuJoCo ones are on -v4 envs, so -v5 rows show none); the dm_control suite has it
# at any STEPS, marked with the budget it was measured at where ours is shorter.
# The per-algorithm scripts (ppo.sh, sac.sh, ...) call this.
set -euo pipefail
suite=${1:?usage: suite.sh classic_control|mujoco|dm_control SCRIPT_NAME [extra flags]}
name=${2:?usage: suite.sh classic_control|mujoco|dm_control SCRIPT_NAME [extra flags]}
shift 2
case "$suite" in
  classic_control) default_envs="CartPole-v1 Acrobot-v1 MountainCar-v0" default_steps=500000 script=$name.py ;;
  mujoco) default_envs="HalfCheetah-v5 Walker2d-v5 Hopper-v5" default_steps=1000000
    script=${name%_jax}_continuous_action${name#"${name%_jax}"}.py ;;
  dm_control) default_envs="dm_control/cartpole-balance-v0 dm_control/cartpole-swingup-v0"
    default_envs+=" dm_control/ball_in_cup-catch-v0 dm_control/cheetah-run-v0" default_steps=1000000
    script=${name%_jax}_continuous_action${name#"${name%_jax}"}.py
    export MUJOCO_GL=${MUJOCO_GL:-egl} ;;
  *) echo "suite.sh: unknown suite '$suite'; use classic_control, mujoco or dm_control" >&2; exit 2 ;;
esac
envs=${ENVS:-$default_envs}
seeds=${SEEDS:-"1 2 3"}
steps=${STEPS:-$default_steps}
workers=${WORKERS:-2}
source "$(dirname "$0")/common.sh" "${name}_$suite"

# the runner takes a first seed and a count: SEEDS must be consecutive
read -r -a seed_list <<< "$seeds"
start_seed=${seed_list[0]}
num_seeds=${#seed_list[@]}
if [ "$seeds" != "$(seq -s ' ' "$start_seed" $((start_seed + num_seeds - 1)))" ]; then
  echo "$(basename "$0"): SEEDS must be consecutive numbers such as \"1 2 3\", got \"$seeds\"" >&2
  exit 2
fi
# one command string, each word quoted for the runner's shell-word split (no shell runs it)
device=(--no-cuda)
if [[ $name == *_jax ]]; then
  device=()
  export XLA_FLAGS="${XLA_FLAGS:---xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1}"
  export XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}"
fi
command=$(printf '%q ' "$python" "$repo/cleanrl/$script" --total-timesteps "$steps" ${device[@]+"${device[@]}"} "$@")
read -r -a env_list <<< "$envs"
status=0
OMP_NUM_THREADS=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark \
  --env-ids "${env_list[@]}" --command "$command" --start-seed "$start_seed" --num-seeds "$num_seeds" \
  --workers "$workers" --log-dir "$out/logs" || status=$?
if [ "$status" -ne 0 ]; then
  case $status in
    129|130|143) echo "$name: stopped before the runs finished; no table written" >&2; exit "$status" ;;
    *) echo "$name: a run failed; no table written" >&2; exit 1 ;;
  esac
fi

reference=()
if [ "$steps" = "$default_steps" ] || [ "$suite" = dm_control ]; then
  reference=(--reference "$repo/benchmark/published_returns.csv")
fi
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --out "$results/${name}_${suite}" \
  ${reference[@]+"${reference[@]}"}
