"""A moto server (the AWS API emulator) for the tests: started on 127.0.0.1 on a free port, stopped by PID.

moto 5 emulates Batch, IAM, EC2, ECR, CloudWatch Logs, Secrets Manager and SSM over HTTP; boto3 and Terraform's
AWS provider reach it through `AWS_ENDPOINT_URL`. AWS-managed IAM policies exist only with
`MOTO_IAM_LOAD_MANAGED_POLICIES=true` (the Terraform stack attaches two), which makes start-up slower (seconds).
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from conftest import stop_process

REGION = "us-east-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def moto_post(endpoint, path, body):
    """POST a JSON body to one of moto's own endpoints (e.g. `/moto-api/config`); returns the raw answer."""
    request = urllib.request.Request(
        endpoint + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def client_env(endpoint, base=None, **extra):
    """`base` (default: the caller's environment) without its AWS settings or W&B key, pointed at the emulator
    with fake credentials (and no config files), plus `extra`."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if not k.startswith("AWS_") and k != "WANDB_API_KEY"}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_CONFIG_FILE="/nonexistent",
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
    )
    env.update(extra)
    return env


@contextlib.contextmanager
def moto_server(config=None, startup_s=60, **server_env):
    """Run a moto server for the `with` block and yield its endpoint (`http://127.0.0.1:PORT`).

    config: a moto config posted once it answers (e.g. `{"batch": {"use_docker": False}}`); server_env: extra
    environment of the server process (e.g. `DOCKER_HOST`, `MOTO_DOCKER_NETWORK_MODE`). Raises RuntimeError when
    the server does not answer within `startup_s` seconds. The process is terminated (then killed) on exit.
    """
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ, MOTO_IAM_LOAD_MANAGED_POLICIES="true", **server_env)
    executable = Path(sys.executable).with_name("moto_server")
    command = [str(executable)] if executable.exists() else [sys.executable, "-m", "moto.server"]
    process = subprocess.Popen(
        [*command, "-H", "127.0.0.1", "-p", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                moto_post(endpoint, "/moto-api/config", config or {})
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"moto_server did not answer within {startup_s} s") from None
                time.sleep(0.2)
        yield endpoint
    finally:
        stop_process(process)
