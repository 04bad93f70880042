#!/usr/bin/env bash
# Tunes cleanrl/ppo.py on CartPole-v1 + Acrobot-v1 with cleanrl_utils.tuner (Optuna: TPE sampler, median
# pruner after 5 trials). A trial trains on both envs for each of 3 seeds x 100k steps; its value is the mean
# over seeds of the average normalised return of the last 50 episodes (CartPole 0..500 and Acrobot -500..0
# both map to 0..1), and a trial whose mean so far falls below the median after a seed is pruned.
#   bash benchmark/tune_ppo_classic_control.sh                                  # 50 trials (300 runs at most)
#   TRIALS=4 SEEDS=1 STEPS=20000 STUDY=ppo-quick bash benchmark/tune_ppo_classic_control.sh   # a quick look
# The study is kept in $OUT/tuner.db (default benchmark/out/tune_ppo_classic_control) as $STUDY (default
# ppo-classic): running the script again adds TRIALS trials to it, and copies started at once work as
# parallel workers; other STEPS or SEEDS need another STUDY. Runs land in $OUT/runs (exp name
# {study}-trial{N}), logs in $OUT/tuner_logs. Extra flags go to the tuner (e.g. --sampler-seed 1).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
out=${OUT:-$repo/benchmark/out/tune_ppo_classic_control}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$out"
# one command string, each word quoted for the tuner's shell-word split (no shell runs it)
command=$(printf '%q ' "$python" "$repo/cleanrl/ppo.py" --no-cuda --total-timesteps "${STEPS:-100000}")
# num-steps x 4 envs (256 ... 2048) splits into each num-minibatches choice
OMP_NUM_THREADS=1 PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.tuner \
  --command "$command" \
  --target-scores CartPole-v1=0,500 Acrobot-v1=-500,0 \
  --params learning-rate=loguniform:0.0001,0.003 num-minibatches=categorical:1,2,4,8 update-epochs=int:1,10 \
  num-steps=categorical:64,128,256,512 ent-coef=float:0,0.03 \
  --num-trials "${TRIALS:-50}" --num-seeds "${SEEDS:-3}" \
  --storage "sqlite:///$out/tuner.db" --study-name "${STUDY:-ppo-classic}" --log-dir "$out/tuner_logs" "$@"
