#!/bin/sh
# Entry point of the cleanrl image: headless rendering defaults, then the given command.
# Each default applies only where the caller did not set the variable (docker run -e NAME=VALUE wins).
set -eu

# MuJoCo renders through EGL: Mesa's software rasteriser here, the NVIDIA driver's EGL where the
# container runtime provides it (NVIDIA Container Toolkit with the graphics capability).
export MUJOCO_GL="${MUJOCO_GL:-egl}"
# pygame (classic-control rendering) needs no display with SDL's dummy video driver.
export SDL_VIDEODRIVER="${SDL_VIDEODRIVER:-dummy}"

if [ "$#" -eq 0 ]; then
    echo "cleanrl image: no command given; e.g. python cleanrl/ppo.py --total-timesteps 2048" >&2
    exit 2
fi
# exec, not a child: the command replaces this shell, so the SIGTERM that tini (PID 1) forwards on `docker stop`
# or an instance's shutdown reaches the script itself, and its exit code (143 or 130 after a clean stop by a
# signal) is the container's, which the job definition's retry strategy reads.
exec "$@"
