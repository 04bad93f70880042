#!/usr/bin/env bash
# cleanrl/td3_continuous_action.py on MuJoCo (HalfCheetah-v5, Walker2d-v5, Hopper-v5), 3 seeds x 1M steps (the published
# budget), 2 runs at a time, then report.md and a PNG per env in benchmark/results/td3_mujoco/.
#   bash benchmark/td3.sh
#   ENVS=Hopper-v5 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/td3 RESULTS=/tmp bash benchmark/td3.sh --track
# Extra flags go to the script; see suite.sh for the settings. Side by side with Stable-Baselines3 at
# identical settings: benchmark/continuous_vs_sb3.py.
exec bash "$(dirname "$0")/suite.sh" mujoco td3 "$@"
