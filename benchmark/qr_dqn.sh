#!/usr/bin/env bash
# cleanrl/qr_dqn.py on classic control (CartPole-v1, Acrobot-v1, MountainCar-v0), 3 seeds x 500k steps,
# 2 runs at a time, then report.md and a PNG per env in benchmark/results/qr_dqn_classic_control/.
#   bash benchmark/qr_dqn.sh
#   ENVS=CartPole-v1 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/qr_dqn RESULTS=/tmp bash benchmark/qr_dqn.sh --track
# Extra flags go to qr_dqn.py; see suite.sh for the settings.
exec bash "$(dirname "$0")/suite.sh" classic_control qr_dqn "$@"
