#!/usr/bin/env bash
# cleanrl/ppo_atari_multigpu.py launched by torchrun on this machine: NPROC ranks (default 2) x --local-num-envs 4,
# ppo_atari.py's 8 envs, as in CleanRL's published runs. Each env x seed runs in turn (a log per run in
# $OUT/logs/, default benchmark/out/ppo_atari_multigpu/), then the episodic-return curves and a table
# (report.md and a PNG per env in $RESULTS/ppo_atari_multigpu/, default benchmark/results/).
#   bash benchmark/ppo_atari_multigpu.sh           # BreakoutNoFrameskip-v4, seed 1, 500k steps
#   STEPS=10000000 SEEDS="1 2 3" ENVS="PongNoFrameskip-v4 BeamRiderNoFrameskip-v4 BreakoutNoFrameskip-v4" \
#     bash benchmark/ppo_atari_multigpu.sh --track --capture-video   # the published runs
#   NPROC=4 bash benchmark/ppo_atari_multigpu.sh --local-num-envs 2  # extra flags go to the script
# Each rank takes its own GPU when the machine has one per rank (nccl); without CUDA all ranks share the
# CPU (gloo); --no-cuda forces that.
set -euo pipefail
steps=${STEPS:-500000}
envs=${ENVS:-BreakoutNoFrameskip-v4}
seeds=${SEEDS:-1}
nproc=${NPROC:-2}
source "$(dirname "$0")/common.sh" ppo_atari_multigpu
mkdir -p "$out/logs"
for env_id in $envs; do
  for seed in $seeds; do
    log="$out/logs/${env_id//\//-}__$seed.log"
    echo "$env_id, seed $seed, $nproc ranks: log in $log"
    status=0
    # --standalone: a rendezvous of this machine's ranks on a free port
    "$python" -m torch.distributed.run --standalone --nnodes 1 --nproc-per-node "$nproc" \
      "$repo/cleanrl/ppo_atari_multigpu.py" --env-id "$env_id" --seed "$seed" --total-timesteps "$steps" \
      --local-num-envs 4 --save-model "$@" >"$log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
      echo "ppo_atari_multigpu: the run of $env_id seed $seed failed (exit $status), see $log; no table written" >&2
      exit 1
    fi
    grep "^global_step=" "$log" | tail -n 1
    grep "^eval/" "$log" || true
  done
done

reference=()
if [ "$steps" = 10000000 ]; then
  reference=(--reference "$repo/benchmark/published_returns.csv")
fi
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 \
  --out "$results/ppo_atari_multigpu" ${reference[@]+"${reference[@]}"}
