#!/usr/bin/env bash
# ppo_rnd_envpool.py on MontezumaRevenge-v5 (CleanRL's published RND benchmark: one env, one seed), with peak
# memory from /usr/bin/time -v, then the episodic-return curve and a table (report.md and MontezumaRevenge-v5.png
# in $RESULTS/ppo_rnd_envpool/, default benchmark/results/). Meant for a GPU machine with many cores: the
# defaults step 128 envs, and the 50 rollouts of random play that initialise the observation statistics
# (819,200 steps) run before training and are not counted in STEPS.
#   bash benchmark/ppo_rnd_envpool.sh                       # 10M steps, seed 1
#   STEPS=2000000000 bash benchmark/ppo_rnd_envpool.sh --track   # the published budget; extra flags go to the script
set -euo pipefail
steps=${STEPS:-10000000}
source "$(dirname "$0")/common.sh" ppo_rnd_envpool
# through the runner (one env x one seed), its output in $out/logs/MontezumaRevenge-v5__1.log
command=$(printf '%q ' /usr/bin/time -v "$python" "$repo/cleanrl/ppo_rnd_envpool.py" --total-timesteps "$steps" --save-model "$@")
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids MontezumaRevenge-v5 \
  --command "$command" --num-seeds 1 --workers 1 --log-dir "$out/logs"
log="$out/logs/MontezumaRevenge-v5__1.log"
grep "^global_step=" "$log" | tail -n 1
grep -E "^eval/|Maximum resident set size|Elapsed \(wall clock\)" "$log"
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 --out "$results/ppo_rnd_envpool"
