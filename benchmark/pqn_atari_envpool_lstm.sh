#!/usr/bin/env bash
# cleanrl/pqn_atari_envpool_lstm.py on CleanRL's published games (Breakout-v5, Pong-v5, BeamRider-v5), 3 seeds x
# 10M steps, one run at a time, then report.md and a PNG of curves per game in $RESULTS/pqn_atari_envpool_lstm/.
#   bash benchmark/pqn_atari_envpool_lstm.sh
#   ENVS=Pong-v5 SEEDS="1" STEPS=2000000 bash benchmark/pqn_atari_envpool_lstm.sh --track
# ENVS, SEEDS, STEPS, WORKERS, OUT and RESULTS as in pqn_atari_envpool.sh, which runs it.
SCRIPT=pqn_atari_envpool_lstm exec bash "$(dirname "$0")/pqn_atari_envpool.sh" "$@"
