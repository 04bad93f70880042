#!/usr/bin/env bash
# cleanrl/dqn_jax.py (the JAX version of dqn.py) on classic control (CartPole-v1, Acrobot-v1, MountainCar-v0),
# 3 seeds x 500k steps, 2 runs at a time, then report.md and a PNG per env in benchmark/results/dqn_jax_classic_control/.
#   bash benchmark/dqn_jax.sh
#   ENVS=CartPole-v1 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/dqn_jax RESULTS=/tmp bash benchmark/dqn_jax.sh --track
# Extra flags go to dqn_jax.py; see suite.sh for the settings.
exec bash "$(dirname "$0")/suite.sh" classic_control dqn_jax "$@"
