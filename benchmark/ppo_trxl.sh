#!/usr/bin/env bash
# ppo_trxl.py with upstream CleanRL's two documented commands: ProofofMemory-v0 (25k steps, shipped in the script)
# and MiniGrid-MemoryS9-v0 (2,048,000 steps, 84x84 images), $SEEDS seeds each, $WORKERS runs at a time, with peak
# memory from /usr/bin/time -v; then the episodic-return curves and a table (report.md and one PNG per env in
# $RESULTS/ppo_trxl/, default benchmark/results/).
#   bash benchmark/ppo_trxl.sh                                   # both tasks, 3 seeds, 2 at a time
#   ENVS=ProofofMemory-v0 bash benchmark/ppo_trxl.sh             # the quick one (about 30 s a seed on one core)
#   MINIGRID_STEPS=200000 bash benchmark/ppo_trxl.sh             # a shorter MiniGrid run (CPU: about 100 steps/s)
# Extra flags go to the script; the runner sets --env-id and --seed.
set -euo pipefail
envs=${ENVS:-ProofofMemory-v0 MiniGrid-MemoryS9-v0}
seeds=${SEEDS:-3}
workers=${WORKERS:-2}
minigrid_steps=${MINIGRID_STEPS:-2048000}
source "$(dirname "$0")/common.sh" ppo_trxl
script="$repo/cleanrl/ppo_trxl.py"
for env in $envs; do
  case $env in
    ProofofMemory-v0)
      flags=(--total-timesteps 25000 --num-envs 16 --num-steps 128 --num-minibatches 8 --update-epochs 4
             --trxl-num-layers 4 --trxl-num-heads 1 --trxl-dim 64 --trxl-memory-length 16
             --trxl-positional-encoding none --vf-coef 0.1 --max-grad-norm 0.5 --init-lr 3.0e-4
             --init-ent-coef 0.001 --clip-coef 0.2) ;;
    MiniGrid-MemoryS9-v0)
      flags=(--total-timesteps "$minigrid_steps" --num-envs 16 --num-steps 256 --trxl-num-layers 2
             --trxl-num-heads 4 --trxl-dim 256 --trxl-memory-length 64 --max-grad-norm 0.25 --anneal-steps 4096000
             --clip-coef 0.2) ;;
    *) echo "ppo_trxl.sh: no published command for $env (ENVS: ProofofMemory-v0 MiniGrid-MemoryS9-v0)" >&2; exit 2 ;;
  esac
  command=$(printf '%q ' /usr/bin/time -v "$python" "$script" "${flags[@]}" --save-model "$@")
  PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids "$env" \
    --command "$command" --num-seeds "$seeds" --workers "$workers" --log-dir "$out/logs"
  for log in "$out/logs/$env"__*.log; do
    echo "$(basename "$log"): $(grep "^global_step=" "$log" | tail -n 1)"
    grep -E "^eval/|Maximum resident set size|Elapsed \(wall clock\)" "$log"
  done
done
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 \
  --out "$results/ppo_trxl"
