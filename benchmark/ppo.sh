#!/usr/bin/env bash
# cleanrl/ppo.py on classic control (CartPole-v1, Acrobot-v1, MountainCar-v0), 3 seeds x 500k steps,
# 2 runs at a time, then report.md and a PNG per env in benchmark/results/ppo_classic_control/.
#   bash benchmark/ppo.sh
#   ENVS=CartPole-v1 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/ppo RESULTS=/tmp bash benchmark/ppo.sh --track
# Extra flags go to ppo.py; see suite.sh for the settings.
exec bash "$(dirname "$0")/suite.sh" classic_control ppo "$@"
