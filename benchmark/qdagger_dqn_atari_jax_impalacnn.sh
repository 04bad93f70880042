#!/usr/bin/env bash
# A short qdagger_dqn_atari_jax_impalacnn.py run on BreakoutNoFrameskip-v4 that shows the student
# starting from its teacher: the teacher (TEACHER, a dqn_atari_jax.py --save-model checkpoint; unset:
# CleanRL's Hub file cleanrl/BreakoutNoFrameskip-v4-dqn_atari_jax-seed1, which needs the network) is
# scored, plays 100k steps into the replay memory, the student takes 100k offline gradient steps on it
# and then 300k online env steps (the published run: 500k, 500k and 10M). Peak memory from
# /usr/bin/time -v, the teacher's score, the offline evaluations, then the episodic-return curves and
# a table (report.md and BreakoutNoFrameskip-v4.png in $RESULTS/qdagger_dqn_atari_jax_impalacnn/,
# default benchmark/results/).
#   TEACHER=runs/BreakoutNoFrameskip-v4__dqn_atari_jax__1__1700000000/dqn_atari_jax.cleanrl_model \
#     bash benchmark/qdagger_dqn_atari_jax_impalacnn.sh
#   STEPS=10000000 TEACHER_STEPS=500000 OFFLINE_STEPS=500000 bash benchmark/qdagger_dqn_atari_jax_impalacnn.sh   # published
set -euo pipefail
steps=${STEPS:-300000}
teacher_steps=${TEACHER_STEPS:-100000}
offline_steps=${OFFLINE_STEPS:-100000}
teacher=${TEACHER:-}
if [ -n "$teacher" ]; then
  teacher=$(cd "$(dirname "$teacher")" && pwd)/$(basename "$teacher")  # the runs start in $out
fi
source "$(dirname "$0")/common.sh" qdagger_dqn_atari_jax_impalacnn
# through the runner (one env x one seed), its output in $out/logs/BreakoutNoFrameskip-v4__1.log
command=$(printf '%q ' /usr/bin/time -v "$python" "$repo/cleanrl/qdagger_dqn_atari_jax_impalacnn.py" \
  --total-timesteps "$steps" --teacher-steps "$teacher_steps" --offline-steps "$offline_steps" \
  ${teacher:+--teacher-model-path "$teacher"} --save-model "$@")
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark --env-ids BreakoutNoFrameskip-v4 \
  --command "$command" --num-seeds 1 --workers 1 --log-dir "$out/logs"
log="$out/logs/BreakoutNoFrameskip-v4__1.log"
grep -E "^teacher .*mean episodic return|student's mean episodic return" "$log"
grep "^global_step=" "$log" | tail -n 1
grep -E "^replay buffer:|^eval/|Maximum resident set size|Elapsed \(wall clock\)" "$log"
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 \
  --out "$results/qdagger_dqn_atari_jax_impalacnn"
