#!/usr/bin/env bash
# cleanrl/dqn.py on classic control (CartPole-v1, Acrobot-v1, MountainCar-v0), 3 seeds x 500k steps,
# 2 runs at a time, then report.md and a PNG per env in benchmark/results/dqn_classic_control/.
#   bash benchmark/dqn.sh
#   ENVS=CartPole-v1 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/dqn RESULTS=/tmp bash benchmark/dqn.sh --track
# Extra flags go to dqn.py; see suite.sh for the settings.
exec bash "$(dirname "$0")/suite.sh" classic_control dqn "$@"
