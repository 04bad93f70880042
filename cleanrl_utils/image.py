"""Builds and pushes the cleanrl container image (the repository's Dockerfile) with docker or podman.

    python -m cleanrl_utils.image build --tag cleanrl:cpu --torch-index-url https://download.pytorch.org/whl/cpu
    python -m cleanrl_utils.image build --tag cleanrl:cpu --wheel-dir /opt/wheels --engine podman --dry-run
    python -m cleanrl_utils.image push --tag 123456789012.dkr.ecr.us-east-1.amazonaws.com/cleanrl:cpu \
        --source cleanrl:cpu --ecr

Every value given on the command line is checked first (image references by Docker's grammar, see
`cleanrl_utils.image_reference`; paths; URLs); a bad one is reported in one line on stderr with exit code 2,
and nothing is built or pushed. The engine is then run with argument lists, never through a shell, and
each command is echoed (shell-quoted) on stderr; `--dry-run` prints the commands on stdout and runs none.
`push --ecr` logs in with the password from ECR's GetAuthorizationToken (boto3; the usual AWS credential
chain, AWS_ENDPOINT_URL honoured), handed to `ENGINE login --password-stdin` on stdin, never in an argument.
See docs/tools/image.md.
"""

from __future__ import annotations

import argparse
import base64
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from cleanrl_utils.image_reference import ImageReference, parse_reference

REPO = Path(__file__).resolve().parents[1]
# What the Dockerfile reads from its build context; a temporary context (--wheel-dir) is made of these.
CONTEXT_ITEMS = ("Dockerfile", ".dockerignore", "docker", "requirements.txt", "pyproject.toml", "cleanrl", "cleanrl_utils")
ECR_DOMAIN_RE = re.compile(r"(?P<account>[0-9]{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?")
ENGINES = ("docker", "podman")
PIP_CA_SECRET = "pip_ca"


class UsageError(Exception):
    """Bad input: reported in one line, exit code 2, nothing run."""


@dataclass
class Step:
    """One engine command: its argv and, for `login`, the text fed to its stdin (never printed)."""

    argv: list[str]
    stdin: Optional[str] = None
    shown_stdin: Optional[str] = None


def ecr_registry(ref: ImageReference) -> Optional[tuple[str, str]]:
    """(account id, region) when `ref`'s domain is an Amazon ECR private registry
    (ACCOUNT.dkr.ecr[-fips].REGION.amazonaws.com[.cn]), else None."""
    match = ECR_DOMAIN_RE.fullmatch(ref.domain)
    return (match["account"], match["region"]) if match else None


def ecr_login_password(account: str, region: str) -> tuple[str, str]:
    """(user name, password) for `docker login` to the ECR registry of `account` in `region`, from
    ecr:GetAuthorizationToken (boto3's credential chain; AWS_ENDPOINT_URL honoured). The token is valid for
    12 hours. Raises botocore errors (no credentials, access denied) as they come."""
    import boto3

    response = boto3.client("ecr", region_name=region).get_authorization_token(registryIds=[account])
    token = response["authorizationData"][0]["authorizationToken"]
    user, _, password = base64.b64decode(token).decode().partition(":")
    return user, password


def prepare_context(destination: Path, wheel_dirs: Sequence[Path] = (), source: Path = REPO) -> Path:
    """Copies the build context (CONTEXT_ITEMS of `source`, without __pycache__) to `destination`, an empty
    or absent folder, and the *.whl files of each of `wheel_dirs` into its docker/wheels/ (hard links where
    the file system allows, else copies). Returns `destination`. Raises FileNotFoundError for a missing item."""
    destination.mkdir(parents=True, exist_ok=True)
    for item in CONTEXT_ITEMS:
        path = source / item
        if path.is_dir():
            shutil.copytree(path, destination / item, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.whl"))
        elif path.is_file():
            shutil.copy2(path, destination / item)
        else:
            raise FileNotFoundError(f"{path} is missing from the build context")
    wheels = destination / "docker" / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for folder in wheel_dirs:
        for wheel in sorted(Path(folder).glob("*.whl")):
            try:
                (wheels / wheel.name).hardlink_to(wheel)
            except OSError:
                shutil.copy2(wheel, wheels / wheel.name)
    return destination


def _reference(value: str, what: str, digest_allowed: bool) -> ImageReference:
    try:
        ref = parse_reference(value)
    except ValueError as error:
        raise UsageError(f"{what}: {error}") from None
    if ref.digest and not digest_allowed:
        raise UsageError(f"{what}: {value!r} has a digest; give a tag (a digest is what a registry computes)")
    return ref


def _index_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname or any(c.isspace() for c in value):
        raise UsageError(f"--torch-index-url: {value!r} is not an http(s) URL")
    if parts.username or parts.password:
        # build arguments are recorded in the image's history
        raise UsageError(
            "--torch-index-url: no credentials in the URL (they would stay in the image history); use pip's config"
        )
    return value


def _existing_dir(value: str, what: str) -> Path:
    path = Path(value)
    if not path.is_dir():
        raise UsageError(f"{what}: {value!r} is not a folder")
    return path.resolve()


def _engine(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise UsageError(f"--engine {name}: {name} is not on PATH; install it or choose --engine {'/'.join(ENGINES)}")
    return name


def build_steps(args: argparse.Namespace, context: str) -> list[Step]:
    """The engine command that builds the image for parsed `build` arguments, with `context` as build context."""
    tag = _reference(args.tag, "--tag", digest_allowed=False)
    argv = [args.engine, "build", "--tag", str(tag)]
    if args.engine == "podman":
        argv += ["--format", "docker"]  # the OCI format drops SHELL and HEALTHCHECK
    if args.base_image:
        argv += ["--build-arg", f"BASE_IMAGE={_reference(args.base_image, '--base-image', digest_allowed=True)}"]
    if args.torch_index_url:
        argv += ["--build-arg", f"TORCH_INDEX_URL={_index_url(args.torch_index_url)}"]
    if args.wheels_only:
        argv += ["--build-arg", "WHEELS_ONLY=1"]
    if args.ca_bundle:
        argv += ["--secret", f"id={PIP_CA_SECRET},src={args.ca_bundle}"]
    if args.network:
        argv += ["--network", args.network]
    argv.append(context)
    return [Step(argv)]


def push_steps(args: argparse.Namespace, login: bool = True) -> list[Step]:
    """The engine commands that push the image for parsed `push` arguments: optional `login` (ECR, only when
    `login` is true; the password is fetched then), optional `tag SOURCE TAG`, and `push TAG`."""
    tag = _reference(args.tag, "--tag", digest_allowed=False)
    tls = ["--tls-verify=false"] if args.insecure_registry else []
    steps = []
    if args.ecr:
        registry = ecr_registry(tag)
        if registry is None:
            raise UsageError(f"--ecr: {tag.domain!r} is not an ECR registry (ACCOUNT.dkr.ecr.REGION.amazonaws.com)")
        shown = "<password from ecr:GetAuthorizationToken>"
        user, password = ecr_login_password(*registry) if login else ("AWS", None)
        steps.append(Step([args.engine, "login", *tls, "--username", user, "--password-stdin", tag.domain], password, shown))
    if args.source:
        source = _reference(args.source, "--source", digest_allowed=True)
        steps.append(Step([args.engine, "tag", str(source), str(tag)]))
    steps.append(Step([args.engine, "push", *tls, str(tag)]))
    return steps


def _parser() -> argparse.ArgumentParser:
    class OneLineParser(argparse.ArgumentParser):
        def error(self, message: str) -> None:
            raise UsageError(message)

    parser = OneLineParser(prog="python -m cleanrl_utils.image", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    build = commands.add_parser("build", help="build the image from the repository's Dockerfile")
    build.add_argument("--tag", required=True, help="image reference to tag the build with, e.g. cleanrl:cpu")
    build.add_argument("--base-image", help="BASE_IMAGE build argument (default: the Dockerfile's python:3.11-slim-bookworm)")
    build.add_argument(
        "--torch-index-url",
        help="TORCH_INDEX_URL build argument: where torch==2.13.0 comes from (default PyPI, the CUDA build; "
        "https://download.pytorch.org/whl/cpu for the CPU build)",
    )
    build.add_argument(
        "--wheel-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="folder of wheels (e.g. the CPU torch wheel) to build with; the build then runs on a temporary copy "
        "of the context with these wheels in docker/wheels/ (repeatable)",
    )
    build.add_argument("--wheels-only", action="store_true", help="install from the wheels alone (WHEELS_ONLY=1, no index)")
    build.add_argument(
        "--ca-bundle",
        metavar="FILE",
        help="CA bundle for pip inside the build (TLS-intercepting proxies), passed as a build secret, kept in no layer",
    )
    build.add_argument("--network", choices=("host", "none"), help="network of the build's RUN steps")
    build.add_argument("--context", default=str(REPO), help="build context holding the Dockerfile (default: this repository)")
    build.add_argument("--engine", choices=ENGINES, default="docker")
    build.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")

    push = commands.add_parser("push", help="push the image to a registry")
    push.add_argument("--tag", required=True, help="image reference to push, e.g. ghcr.io/org/cleanrl:cpu")
    push.add_argument("--source", help="a local image to tag as --tag first (e.g. the tag it was built with)")
    push.add_argument("--ecr", action="store_true", help="log in to the ECR registry of --tag first (boto3)")
    push.add_argument(
        "--insecure-registry",
        action="store_true",
        help="podman only: talk to the registry without TLS verification (--tls-verify=false), e.g. a local test registry",
    )
    push.add_argument("--engine", choices=ENGINES, default="docker")
    push.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    return parser


def _run(steps: list[Step]) -> int:
    for step in steps:
        print("+ " + shlex.join(step.argv), file=sys.stderr, flush=True)
        result = subprocess.run(step.argv, input=step.stdin, text=True if step.stdin is not None else None, check=False)
        if result.returncode != 0:
            print(f"image: {step.argv[0]} {step.argv[1]} failed with exit code {result.returncode}", file=sys.stderr)
            return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (see the module docstring). Returns the exit code: 0 done, 1 an engine command or
    the ECR login failed, 2 bad input (nothing run)."""
    try:
        args = _parser().parse_args(argv)
        if not args.dry_run:
            _engine(args.engine)
        if args.command == "build":
            context = _existing_dir(args.context, "--context")
            if not (context / "Dockerfile").is_file():
                raise UsageError(f"--context: {args.context!r} has no Dockerfile")
            wheel_dirs = [_existing_dir(d, "--wheel-dir") for d in args.wheel_dir]
            for folder in wheel_dirs:
                if not any(folder.glob("*.whl")):
                    raise UsageError(f"--wheel-dir: {str(folder)!r} holds no *.whl files")
            if args.ca_bundle and not Path(args.ca_bundle).is_file():
                raise UsageError(f"--ca-bundle: {args.ca_bundle!r} is not a file")
            if args.ca_bundle:
                args.ca_bundle = str(Path(args.ca_bundle).resolve())
                if "," in args.ca_bundle:  # --secret takes comma-separated options
                    raise UsageError(f"--ca-bundle: {args.ca_bundle!r} has a comma; copy the bundle to a path without one")
            if args.wheels_only and not wheel_dirs and not any((context / "docker" / "wheels").glob("*.whl")):
                raise UsageError("--wheels-only: no wheels in docker/wheels/ and no --wheel-dir")
            # with --wheel-dir the context is a temporary copy, made only once every value has been checked
            steps = build_steps(args, "<temporary copy of the context with the wheels>" if wheel_dirs else str(context))
        else:
            if args.insecure_registry and args.engine != "podman":
                raise UsageError(
                    "--insecure-registry: docker has no per-command switch; list the registry in the daemon's "
                    "insecure-registries (localhost is already trusted)"
                )
            steps = push_steps(args, login=not args.dry_run)
    except UsageError as error:
        print(f"image: error: {error}", file=sys.stderr)
        return 2

    if args.dry_run:
        for step in steps:
            print(shlex.join(step.argv) + (f" <<< {step.shown_stdin}" if step.shown_stdin else ""))
        return 0
    if args.command == "build" and wheel_dirs:
        with tempfile.TemporaryDirectory(prefix="cleanrl-image-context-") as tmp:
            context_copy = prepare_context(Path(tmp) / "context", wheel_dirs, source=context)
            return _run(build_steps(args, str(context_copy)))
    return _run(steps)


if __name__ == "__main__":
    sys.exit(main())
