#!/usr/bin/env bash
# A short c51_atari_jax.py run on BreakoutNoFrameskip-v4 that shows learning has begun, with the settings
# of dqn_atari_breakout.sh: 300k steps with ε annealed over the first half of the run (the default 10% of
# 10M ends ε-greedy exploration at 1M steps; 10% of 300k would end it before learning starts at 80k).
# Peak memory from /usr/bin/time -v, then the episodic-return curves and a table (report.md and
# BreakoutNoFrameskip-v4.png in $RESULTS/c51_atari_jax/, default benchmark/results/). To compare with
# the torch twin, run cleanrl/c51_atari.py with the flags of the command below.
#   bash benchmark/c51_atari_jax.sh
#   STEPS=10000000 bash benchmark/c51_atari_jax.sh --exploration-fraction 0.1   # the published run
set -euo pipefail
steps=${STEPS:-300000}
source "$(dirname "$0")/common.sh" c51_atari_jax
# through the runner (one env x one seed), its output in $out/logs/BreakoutNoFrameskip-v4__1.log
command=$(printf '%q ' /usr/bin/time -v "$python" "$repo/cleanrl/c51_atari_jax.py" --total-timesteps "$steps" --exploration-fraction 0.5 --save-model "$@")
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids BreakoutNoFrameskip-v4 \
  --command "$command" --num-seeds 1 --workers 1 --log-dir "$out/logs"
log="$out/logs/BreakoutNoFrameskip-v4__1.log"
grep "^global_step=" "$log" | tail -n 1
grep -E "^replay buffer:|^eval/|Maximum resident set size|Elapsed \(wall clock\)" "$log"
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 --out "$results/c51_atari_jax"
