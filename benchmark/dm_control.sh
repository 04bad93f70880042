#!/usr/bin/env bash
# The DeepMind Control Suite through Shimmy: cleanrl/ppo_continuous_action.py on cartpole-balance, cartpole-swingup,
# ball_in_cup-catch and cheetah-run, then cleanrl/sac_continuous_action.py on cartpole-swingup and ball_in_cup-catch,
# 3 seeds each, 2 runs at a time; report.md (beside CleanRL's published PPO returns) and a PNG per task in
# benchmark/results/ppo_dm_control/ and benchmark/results/sac_dm_control/. Needs the extra: pip install -e '.[dm_control]'.
#   bash benchmark/dm_control.sh                                    # CleanRL's budget: 1M steps per run
#   PPO_STEPS=500000 SAC_STEPS=50000 bash  benchmark/dm_control.sh  # the budget of the tables in benchmark/results/
# SEEDS, WORKERS and RESULTS work as in suite.sh; leave OUT unset (each half writes benchmark/out/{ppo,sac}_dm_control/); extra flags go to both
# scripts.
# SAC runs on its two tasks whatever ENVS says; the SAC half runs even if the PPO half fails (exit 1 then).
set -uo pipefail
here=$(dirname "$0")
status=0
STEPS=${PPO_STEPS:-1000000} bash "$here/suite.sh" dm_control ppo "$@" || status=1
STEPS=${SAC_STEPS:-1000000} ENVS="dm_control/cartpole-swingup-v0 dm_control/ball_in_cup-catch-v0" \
  bash "$here/suite.sh" dm_control sac "$@" || status=1
exit $status
