#!/usr/bin/env bash
# ppo_atari_envpool_xla_jax_scan.py, the JAX version of ppo_atari_envpool.py whose rollout and update run under
# jax.lax.scan, on envpool's Breakout-v5 (ENV_ID for another game), seed 1, with peak memory from
# /usr/bin/time -v, then the episodic-return curves and a table (report.md and Breakout-v5.png in
# $RESULTS/ppo_atari_envpool_xla_jax_scan/, default benchmark/results/). Same budget and defaults as
# ppo_atari_envpool.sh, so the two reports (and their SPS) compare directly. On a GPU machine JAX needs its CUDA
# build; the CPU build runs everything on the CPU.
#   bash benchmark/ppo_atari_envpool_xla_jax_scan.sh                          # 500k steps, seed 1
#   STEPS=10000000 bash benchmark/ppo_atari_envpool_xla_jax_scan.sh           # the published 10M-step run, with its reference column
#   ENV_ID=Pong-v5 bash benchmark/ppo_atari_envpool_xla_jax_scan.sh --num-envs 16   # extra flags go to ppo_atari_envpool_xla_jax_scan.py
set -euo pipefail
steps=${STEPS:-500000}
env_id=${ENV_ID:-Breakout-v5}
source "$(dirname "$0")/common.sh" ppo_atari_envpool_xla_jax_scan
# through the runner (one env x one seed), its output in $out/logs/${env_id}__1.log
command=$(printf '%q ' /usr/bin/time -v "$python" "$repo/cleanrl/ppo_atari_envpool_xla_jax_scan.py" --total-timesteps "$steps" --save-model "$@")
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids "$env_id" \
  --command "$command" --num-seeds 1 --workers 1 --log-dir "$out/logs"
log="$out/logs/${env_id}__1.log"
grep "^global_step=" "$log" | tail -n 1
grep -E "^eval/|Maximum resident set size|Elapsed \(wall clock\)" "$log"
# the published 10M-step returns (benchmark/published_returns.csv) only beside a 10M-step run
reference=()
if [ "$steps" = 10000000 ]; then
  reference=(--reference "$repo/benchmark/published_returns.csv")
fi
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 --out "$results/ppo_atari_envpool_xla_jax_scan" \
  ${reference[@]+"${reference[@]}"}
