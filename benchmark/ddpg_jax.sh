#!/usr/bin/env bash
# cleanrl/ddpg_continuous_action_jax.py on MuJoCo (HalfCheetah-v5, Walker2d-v5, Hopper-v5), 3 seeds x 1M steps (the
# published budget), 2 runs at a time, then report.md and a PNG per env in benchmark/results/ddpg_jax_mujoco/: the
# suite of ddpg.sh, so the JAX script's report sits beside its torch twin's (benchmark/results/ddpg_mujoco/).
#   bash benchmark/ddpg_jax.sh
#   ENVS=Hopper-v5 SEEDS="1 2" STEPS=100000 WORKERS=1 OUT=/tmp/ddpg_jax RESULTS=/tmp bash benchmark/ddpg_jax.sh --track
# Extra flags go to the script; see suite.sh for the settings (one XLA CPU thread per run).
exec bash "$(dirname "$0")/suite.sh" mujoco ddpg_jax "$@"
