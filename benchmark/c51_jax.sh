#!/usr/bin/env bash
# cleanrl/c51_jax.py (the JAX version of c51.py) on classic control (CartPole-v1, Acrobot-v1, MountainCar-v0),
# 3 seeds x 500k steps, 2 runs at a time, then report.md and a PNG per env in benchmark/results/c51_jax_classic_control/.
#   bash benchmark/c51_jax.sh
#   ENVS=CartPole-v1 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/c51_jax RESULTS=/tmp bash benchmark/c51_jax.sh --track
# Extra flags go to c51_jax.py; see suite.sh for the settings.
exec bash "$(dirname "$0")/suite.sh" classic_control c51_jax "$@"
