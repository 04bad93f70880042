#!/usr/bin/env bash
# The main job on real Atari: ppo_atari.py on BreakoutNoFrameskip-v4, with peak memory from
# /usr/bin/time -v, then the episodic-return curve and a table (ppo_atari_breakout.png and
# ppo_atari_breakout_table.md in $RESULTS, default benchmark/results/).
#   bash benchmark/ppo_atari_breakout.sh              # 500k steps, seed 1
#   STEPS=10000000 bash benchmark/ppo_atari_breakout.sh   # the published 10M-step run
set -euo pipefail
steps=${STEPS:-500000}
source "$(dirname "$0")/common.sh" ppo_atari
/usr/bin/time -v "$python" "$repo/cleanrl/ppo_atari.py" --env-id BreakoutNoFrameskip-v4 --total-timesteps "$steps" \
  --save-model "$@" 2>&1 | tee run.log
grep -E "Maximum resident set size|Elapsed \(wall clock\)" run.log
"$python" -m cleanrl_utils.report --runs-dir "$out/runs" --last-episodes 20 \
  --markdown "$results/ppo_atari_breakout_table.md" --plot "$results/ppo_atari_breakout.png"
