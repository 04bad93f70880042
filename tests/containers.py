"""Container helpers for tests: a local Python 3.11 base image (debootstrap, no Docker Hub), the cleanrl image
built from the repository's Dockerfile with podman, and the arguments that run containers on these machines.

    from containers import build_cleanrl_image, podman_run_args, missing_tools
    reason = missing_tools()            # None when podman, runc and debootstrap are there
    image = build_cleanrl_image()       # cached: an unchanged tree reuses the image, else base, wheels, layers
    subprocess.run([*podman_run_args(), image, "python", "cleanrl/ppo.py", "--total-timesteps", "2048"])

The build is offline: every pinned wheel is made on the host (`pip wheel -r requirements.txt`, fast with the
host's pip caches; torch is the local CPU wheel) into a cache folder keyed by requirements.txt, and the image
installs from those alone (`--wheels-only`), through `python -m cleanrl_utils.image build`, which builds from
a temporary copy of the context, so no wheel ever lands in the repository tree.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE_IMAGE = "localhost/cleanrl-test-base:bookworm-py311"
IMAGE = "localhost/cleanrl-test:latest"
DEBIAN_MIRROR = os.environ.get("CLEANRL_TEST_DEBIAN_MIRROR", "http://deb.debian.org/debian")
WHEEL_CACHE = Path(os.environ.get("CLEANRL_TEST_WHEEL_CACHE", "/var/tmp/cleanrl-test-wheels"))
RUN_LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
# Measured durations of the last build steps (seconds), for reports.
DURATIONS: dict[str, float] = {}


def missing_tools() -> str | None:
    """Why images cannot be built and run here (a skip reason), or None when podman, runc and debootstrap are
    all on PATH and we run as root (debootstrap and podman's chroot isolation need it)."""
    missing = [tool for tool in ("podman", "runc", "debootstrap") if not shutil.which(tool)]
    if missing:
        return f"container tests need {', '.join(missing)} (Debian: apt-get install podman runc debootstrap)"
    if os.geteuid() != 0:
        return "container tests build a debootstrap base image, which needs root"
    return None


def engine_env() -> dict[str, str]:
    """The environment for podman builds on these machines (chroot isolation: no nested namespaces)."""
    return {**os.environ, "BUILDAH_ISOLATION": "chroot"}


def podman(*args: str, timeout: float = 600, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Runs `podman ARGS` (argument list, no shell), capturing text output; raises on failure when `check`."""
    result = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, env=engine_env(), check=False, **kwargs
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args[:3])} ... failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result


def image_exists(ref: str) -> bool:
    """Whether podman's local storage holds the image `ref`."""
    return podman("image", "exists", ref, check=False, timeout=60).returncode == 0


def podman_run_args(*extra: str) -> list[str]:
    """`podman run` with what these machines need (runc, bounded ulimits, no network bridge); append the
    image and command."""
    return ["podman", "run", "--rm", "--runtime", "runc", *RUN_LIMITS, "--network", "none", *extra]


def build_base_image(name: str = BASE_IMAGE) -> str:
    """A Debian 12 image with Python 3.11 and its venv module, imported from a debootstrap (minbase +
    python3, python3-venv, ca-certificates), kept in podman's storage as `name` and reused when present.
    Returns `name`. Takes a few minutes the first time (network: the Debian mirror)."""
    if image_exists(name):
        DURATIONS.setdefault("base image (cached)", 0.0)
        return name
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cleanrl-debootstrap-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,python3-venv,ca-certificates",
                "bookworm",
                str(rootfs),
                DEBIAN_MIRROR,
            ],
            check=True,
            capture_output=True,
            timeout=1200,
        )
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        try:
            podman("import", "--change", 'CMD ["/bin/bash"]', "-", name, stdin=tar.stdout, timeout=600)
        finally:
            tar.stdout.close()
            tar.wait(timeout=60)
    DURATIONS["base image"] = time.monotonic() - start
    return name


def wheelhouse() -> Path:
    """A folder holding a wheel for every pin in requirements.txt, made on the host with `pip wheel` (the host's
    pip config and caches; torch==2.13.0 resolves to the local CPU wheel) and cached under WHEEL_CACHE by the
    hash of requirements.txt and the Python version. Raises CalledProcessError when pip fails."""
    requirements = REPO / "requirements.txt"
    key = hashlib.sha256(requirements.read_bytes() + sys.version.encode()).hexdigest()[:16]
    folder = WHEEL_CACHE / key
    if (folder / ".complete").is_file():
        return folder
    start = time.monotonic()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "-r", str(requirements), "-w", str(folder)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        errors = "\n".join(line for line in result.stderr.splitlines() if not line.startswith("WARNING: Location"))
        raise RuntimeError(f"pip wheel -r requirements.txt failed:\n{errors[-4000:]}")
    (folder / ".complete").write_text(key)
    DURATIONS["wheels"] = time.monotonic() - start
    return folder


def context_fingerprint(base: str, wheels: Path) -> str:
    """A hash of what the image is built from: the build context's files (cleanrl_utils.image.CONTEXT_ITEMS,
    without caches and wheels), the base image's ID and the wheelhouse's key."""
    from cleanrl_utils.image import CONTEXT_ITEMS

    digest = hashlib.sha256()
    for item in CONTEXT_ITEMS:
        path = REPO / item
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if "__pycache__" in file.parts or file.suffix in (".pyc", ".whl"):
                continue
            digest.update(str(file.relative_to(REPO)).encode() + b"\0" + file.read_bytes() + b"\0")
    base_id = podman("image", "inspect", "--format", "{{.Id}}", base, timeout=60).stdout.strip()
    digest.update(base_id.encode() + wheels.name.encode())
    return digest.hexdigest()[:16]


def build_cleanrl_image(tag: str = IMAGE, ca_bundle: str | None = "/etc/ssl/certs/ca-certificates.crt") -> str:
    """Builds the repository's Dockerfile with podman into `tag` on the debootstrap base, offline from the
    wheelhouse, through `python -m cleanrl_utils.image build` (so the helper's real path is what builds).
    `ca_bundle`, when the file exists, is passed as the pip CA build secret, as a user behind a TLS proxy
    would (the image must keep no trace of it). An image already built from the same inputs
    (`context_fingerprint`) is reused without a build; otherwise podman's layer cache keeps unchanged stages.
    Returns `tag`; raises RuntimeError with the build's output tail on failure."""
    base = build_base_image()
    wheels = wheelhouse()
    # podman's layer cache still re-hashes the context (about 2 minutes here); an image built from the same
    # inputs is reused outright through a tag that names their fingerprint
    built = f"{tag.rsplit(':', 1)[0]}:inputs-{context_fingerprint(base, wheels)}"
    if image_exists(built):
        podman("tag", built, tag, timeout=60)
        DURATIONS["image build (reused)"] = 0.0
        return tag
    argv = [
        sys.executable,
        "-m",
        "cleanrl_utils.image",
        "build",
        "--engine",
        "podman",
        "--tag",
        tag,
        "--base-image",
        base,
        "--wheel-dir",
        str(wheels),
        "--wheels-only",
        "--network",
        "host",
    ]
    if ca_bundle and os.path.isfile(ca_bundle):
        argv += ["--ca-bundle", ca_bundle]
    start = time.monotonic()
    env = {**engine_env(), "PYTHONPATH": str(REPO)}
    result = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"image build failed ({result.returncode}):\n{(result.stdout + result.stderr)[-6000:]}")
    DURATIONS["image build"] = time.monotonic() - start
    podman("tag", tag, built, timeout=60)
    return tag


def image_size(ref: str) -> int:
    """The image's size in bytes, as podman reports it."""
    return int(podman("image", "inspect", "--format", "{{.Size}}", ref, timeout=60).stdout.strip())
