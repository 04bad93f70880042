# cleanrl: the scripts in cleanrl/ and the tools in cleanrl_utils/ with the repository's pinned Python set,
# headless rendering (MuJoCo through EGL, pygame through SDL's dummy driver) and a non-root user.
# How to build, run and push it, and why each hadolint exception exists: docs/tools/image.md.
#
#   docker build -t cleanrl .                                                          # CUDA build of torch
#   docker build -t cleanrl --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu .   # CPU only
#   docker run --rm cleanrl python cleanrl/ppo.py --total-timesteps 2048

# Any Debian 12 (bookworm) image with Python 3.11 and its venv module: python:3.11-slim-bookworm or a
# mirror of it, or a local one (the tests import a debootstrap of bookworm with python3 and python3-venv).
ARG BASE_IMAGE=python:3.11-slim-bookworm
# checkov (documented in docs/tools/image.md):
#checkov:skip=CKV_DOCKER_7:the base is a build argument whose default names a fixed tag (3.11-slim-bookworm); checkov cannot see through the variable
#checkov:skip=CKV_DOCKER_2:batch jobs run to completion and are watched by their exit code; a HEALTHCHECK serves long-running services

# ---------------------------------------------------------------------------------------------------------
# Stage 1 installs the Python set into a virtual environment. Only /opt/venv leaves this stage, so wheels,
# a CA bundle given as a build secret and pip's temporary files never reach a layer of the final image.
FROM ${BASE_IMAGE} AS python-deps

# Where torch==2.13.0 comes from. Empty: pip's index (PyPI), whose Linux x86_64 wheel is the CUDA build;
# it brings the CUDA runtime as nvidia-* wheels, so the image only needs the host's NVIDIA driver (it also
# runs on CPU, in an image several GB larger). https://download.pytorch.org/whl/cpu: the CPU-only build.
# https://download.pytorch.org/whl/cu126 (or another cuXYZ): a specific CUDA build.
ARG TORCH_INDEX_URL=""
# "1": install from the wheels in docker/wheels/ alone (an offline build); "0": wheels found there are
# preferred where they match, the rest comes from the index.
ARG WHEELS_ONLY=0

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

COPY docker/wheels/ /tmp/wheels/
COPY requirements.txt /tmp/requirements.txt

# Behind a TLS-intercepting proxy pip needs that proxy's CA: pass it as the build secret "pip_ca"
# (docker/podman build --secret id=pip_ca,src=/etc/ssl/certs/ca-certificates.crt). A secret is mounted
# for this one RUN and is stored in no layer and no history entry.
# torch goes first, from TORCH_INDEX_URL, so that the requirements' torch==2.13.0 is already met by it.
RUN --mount=type=secret,id=pip_ca \
    if [ -s /run/secrets/pip_ca ]; then export PIP_CERT=/run/secrets/pip_ca; fi \
    && if [ "${WHEELS_ONLY}" = 1 ]; then export PIP_NO_INDEX=1; fi \
    && export PIP_FIND_LINKS=/tmp/wheels \
    && python3 -m venv /opt/venv \
    && if [ -n "${TORCH_INDEX_URL}" ] && [ "${WHEELS_ONLY}" != 1 ]; then \
        /opt/venv/bin/pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" torch==2.13.0; \
    else \
        /opt/venv/bin/pip install --no-cache-dir torch==2.13.0; \
    fi \
    && /opt/venv/bin/pip install --no-cache-dir -r /tmp/requirements.txt \
    && /opt/venv/bin/pip check

# ---------------------------------------------------------------------------------------------------------
FROM ${BASE_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Runtime libraries for headless rendering: libglvnd's EGL/GL loaders with Mesa's EGL and its llvmpipe
# software rasteriser (MUJOCO_GL=egl without a GPU; on a GPU host the NVIDIA runtime adds its own EGL
# vendor library), and tini as PID 1 so that SIGTERM from `docker stop` or AWS Batch reaches the script
# and the subprocesses of async vector envs are reaped. ffmpeg for the videos ships inside imageio-ffmpeg.
# envpool's Procgen games (ppo_procgen.py, ppg_procgen.py) load the Qt 5 GUI runtime.
# Versions are not pinned: a pin names one Debian point release and breaks the build as soon as a
# security update replaces that version on the mirror; the base image tag fixes the release (DL3008).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        libegl1 \
        libegl-mesa0 \
        libgl1 \
        libgl1-mesa-dri \
        libgles2 \
        libopengl0 \
        libqt5gui5 \
        tini \
    && rm -rf /var/lib/apt/lists/*

# A numeric user, so that runtimes that require a non-root user (Kubernetes runAsNonRoot) can check it.
ARG USER_UID=1000
RUN groupadd --gid "${USER_UID}" cleanrl \
    && useradd --create-home --uid "${USER_UID}" --gid "${USER_UID}" --shell /bin/bash cleanrl \
    && install -d -o cleanrl -g cleanrl /workspace /workspace/runs /workspace/videos /workspace/models

COPY --from=python-deps /opt/venv /opt/venv

# On GPU hosts the NVIDIA Container Toolkit mounts the driver's libraries for these capabilities; "graphics"
# brings its EGL vendor library, so MuJoCo renders on the GPU there (Mesa's llvmpipe elsewhere).
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH} \
    PYTHONPATH=/workspace \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /workspace
# Code and pins belong to root (read-only for the user); the workspace itself and runs/, videos/, models/
# belong to the user, as do files a run writes beside them (wandb/, MUJOCO_LOG.TXT, tuner.db).
COPY requirements.txt pyproject.toml ./
COPY cleanrl/ cleanrl/
COPY cleanrl_utils/ cleanrl_utils/
COPY docker/entrypoint.sh /usr/local/bin/cleanrl-entrypoint

USER ${USER_UID}:${USER_UID}

ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/cleanrl-entrypoint"]
CMD ["python", "cleanrl/ppo.py", "--help"]
