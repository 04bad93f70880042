#!/usr/bin/env bash
# CleanRL's fast Pong recipe on the CPU: ppo_atari_envpool.py on envpool's Pong-v5 with clip 0.2, 16 envs x 128
# steps, 8 minibatches x 3 epochs (the published claim, "Pong-v5 in about 5-10 minutes", is on a GPU node).
# Seed 1, peak memory from /usr/bin/time -v, then the episodic-return curve and a table (report.md and
# Pong-v5.png in $RESULTS/ppo_atari_envpool_pong_fast/, default benchmark/results/).
# The default budget is sized from measured CPU time, about 4.2 ms per agent step (update included) on one core
# of the project's machines: 614,400 steps are about 43 min on one core, less where torch and envpool get two.
#   bash benchmark/ppo_atari_envpool_pong_fast.sh               # 614,400 steps (300 updates of 16 x 128)
#   STEPS=4096000 bash benchmark/ppo_atari_envpool_pong_fast.sh  # longer; extra flags go to ppo_atari_envpool.py
set -euo pipefail
steps=${STEPS:-614400}
source "$(dirname "$0")/common.sh" ppo_atari_envpool_pong_fast
command=$(printf '%q ' /usr/bin/time -v "$python" "$repo/cleanrl/ppo_atari_envpool.py" --total-timesteps "$steps" \
  --clip-coef 0.2 --num-envs 16 --num-minibatches 8 --num-steps 128 --update-epochs 3 --save-model "$@")
# through the runner (one env x one seed), its output in $out/logs/Pong-v5__1.log
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids Pong-v5 \
  --command "$command" --num-seeds 1 --workers 1 --log-dir "$out/logs"
log="$out/logs/Pong-v5__1.log"
grep "^global_step=" "$log" | tail -n 1
grep -E "^eval/|Maximum resident set size|Elapsed \(wall clock\)" "$log"
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 --out "$results/ppo_atari_envpool_pong_fast"
