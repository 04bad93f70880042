#!/usr/bin/env bash
# cleanrl/rpo_continuous_action.py on MuJoCo (HalfCheetah-v5, Walker2d-v5, Hopper-v5), 3 seeds x 8M steps (the
# script's default and CleanRL's published RPO budget), 2 runs at a time, then report.md and a PNG per
# env in benchmark/results/rpo_mujoco/.
#   bash benchmark/rpo.sh
#   ENVS=Hopper-v5 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/rpo RESULTS=/tmp bash benchmark/rpo.sh --track
# Extra flags go to the script; see suite.sh for the settings.
export STEPS=${STEPS:-8000000}
exec bash "$(dirname "$0")/suite.sh" mujoco rpo "$@"
