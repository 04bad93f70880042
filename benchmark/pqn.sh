#!/usr/bin/env bash
# cleanrl/pqn.py on classic control (CartPole-v1, Acrobot-v1, MountainCar-v0), 3 seeds x 500k steps,
# 2 runs at a time, then report.md and a PNG per env in benchmark/results/pqn_classic_control/.
#   bash benchmark/pqn.sh
#   ENVS=CartPole-v1 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/pqn RESULTS=/tmp bash benchmark/pqn.sh --track
# Extra flags go to pqn.py; see suite.sh for the settings.
exec bash "$(dirname "$0")/suite.sh" classic_control pqn "$@"
