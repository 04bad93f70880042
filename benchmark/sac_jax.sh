#!/usr/bin/env bash
# cleanrl/sac_continuous_action_jax.py on MuJoCo (HalfCheetah-v5, Walker2d-v5, Hopper-v5), 3 seeds x 1M steps (the
# published budget), 2 runs at a time, then report.md and a PNG per env in benchmark/results/sac_jax_mujoco/: the
# suite of sac.sh, so the JAX script's report sits beside its torch twin's (benchmark/results/sac_mujoco/).
#   bash benchmark/sac_jax.sh
#   ENVS=Hopper-v5 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/sac_jax RESULTS=/tmp bash benchmark/sac_jax.sh --track
# Extra flags go to the script. suite.sh runs the torch scripts (it passes --no-cuda, which a JAX script does not
# have), so its steps are repeated here. Each run gets one XLA CPU thread, as suite.sh gives each torch run one
# OpenMP thread, and on a GPU allocates memory as it needs it instead of JAX's default 75%, so that WORKERS runs share
# the card.
set -euo pipefail
envs=${ENVS:-"HalfCheetah-v5 Walker2d-v5 Hopper-v5"}
seeds=${SEEDS:-"1 2 3"}
default_steps=1000000
steps=${STEPS:-$default_steps}
workers=${WORKERS:-2}
source "$(dirname "$0")/common.sh" sac_jax_mujoco

# the runner takes a first seed and a count: SEEDS must be consecutive
read -r -a seed_list <<< "$seeds"
start_seed=${seed_list[0]}
num_seeds=${#seed_list[@]}
if [ "$seeds" != "$(seq -s ' ' "$start_seed" $((start_seed + num_seeds - 1)))" ]; then
  echo "$(basename "$0"): SEEDS must be consecutive numbers such as \"1 2 3\", got \"$seeds\"" >&2
  exit 2
fi
# one command string, each word quoted for the runner's shell-word split (no shell runs it)
command=$(printf '%q ' "$python" "$repo/cleanrl/sac_continuous_action_jax.py" --total-timesteps "$steps" "$@")
read -r -a env_list <<< "$envs"
status=0
OMP_NUM_THREADS=1 XLA_FLAGS="${XLA_FLAGS:---xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1}" \
  XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}" \
  PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark \
  --env-ids "${env_list[@]}" --command "$command" --start-seed "$start_seed" --num-seeds "$num_seeds" \
  --workers "$workers" --log-dir "$out/logs" || status=$?
if [ "$status" -ne 0 ]; then
  case $status in
    129|130|143) echo "sac_jax: stopped before the runs finished; no table written" >&2; exit "$status" ;;
    *) echo "sac_jax: a run failed; no table written" >&2; exit 1 ;;
  esac
fi

# published_returns.csv has rows for the torch script only: at the published budget the column shows "—" for this one
reference=()
if [ "$steps" = "$default_steps" ]; then
  reference=(--reference "$repo/benchmark/published_returns.csv")
fi
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --out "$results/sac_jax_mujoco" \
  ${reference[@]+"${reference[@]}"}
