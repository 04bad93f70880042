#!/usr/bin/env bash
# The main job on real Atari: ppo_atari.py on BreakoutNoFrameskip-v4, with peak memory from
# /usr/bin/time -v, then the episodic-return curves and a table (report.md and
# BreakoutNoFrameskip-v4.png in $RESULTS/ppo_atari_breakout/, default benchmark/results/).
#   bash benchmark/ppo_atari_breakout.sh              # 500k steps, seed 1
#   STEPS=10000000 bash benchmark/ppo_atari_breakout.sh   # the published 10M-step run
set -euo pipefail
steps=${STEPS:-500000}
source "$(dirname "$0")/common.sh" ppo_atari
# through the runner (one env x one seed), its output in $out/logs/BreakoutNoFrameskip-v4__1.log
command=$(printf '%q ' /usr/bin/time -v "$python" "$repo/cleanrl/ppo_atari.py" --total-timesteps "$steps" --save-model "$@")
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids BreakoutNoFrameskip-v4 \
  --command "$command" --num-seeds 1 --workers 1 --log-dir "$out/logs"
log="$out/logs/BreakoutNoFrameskip-v4__1.log"
grep "^global_step=" "$log" | tail -n 1
grep -E "^replay buffer:|^eval/|Maximum resident set size|Elapsed \(wall clock\)" "$log"
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 --out "$results/ppo_atari_breakout"
