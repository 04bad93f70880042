#!/usr/bin/env bash
# ppo_atari_lstm.py (the LSTM agent on one frame at a time) on BreakoutNoFrameskip-v4, with peak memory from
# /usr/bin/time -v, then the episodic-return curve and a table (report.md and BreakoutNoFrameskip-v4.png in
# $RESULTS/ppo_atari_lstm/, default benchmark/results/). At the published budget the table has a reference
# column from benchmark/published_returns.csv, where it holds a ppo_atari_lstm row.
#   bash benchmark/ppo_atari_lstm.sh                  # 500k steps, seed 1
#   STEPS=10000000 bash benchmark/ppo_atari_lstm.sh   # the published 10M-step run
# Extra flags go to the script; the runner sets --env-id and --seed.
set -euo pipefail
steps=${STEPS:-500000}
source "$(dirname "$0")/common.sh" ppo_atari_lstm
# through the runner (one env x one seed), its output in $out/logs/BreakoutNoFrameskip-v4__1.log
command=$(printf '%q ' /usr/bin/time -v "$python" "$repo/cleanrl/ppo_atari_lstm.py" --total-timesteps "$steps" --save-model "$@")
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids BreakoutNoFrameskip-v4 \
  --command "$command" --num-seeds 1 --workers 1 --log-dir "$out/logs"
log="$out/logs/BreakoutNoFrameskip-v4__1.log"
grep "^global_step=" "$log" | tail -n 1
grep -E "^eval/|Maximum resident set size|Elapsed \(wall clock\)" "$log"
reference=()
if [ "$steps" = 10000000 ]; then
  reference=(--reference "$repo/benchmark/published_returns.csv")
fi
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 \
  --out "$results/ppo_atari_lstm" ${reference[@]+"${reference[@]}"}
