"""Upstream CleanRL's experiment submitter, `python -m cleanrl_utils.submit_exp`, with the W&B key kept out of
every file and job.

    python -m cleanrl_utils.submit_exp --docker-tag vwxyzjn/cleanrl:latest --wandb-key KEY --num-seed 3 \\
        --command "python cleanrl/ppo.py --env-id CartPole-v1"

takes upstream's flags with upstream's spellings and defaults (argparse, as upstream; the bool flags `-b`/`--build`
and `-p`/`--push` accept `-b`, `--build`, `--build True`, `--build no` ...). For seeds 1..`--num-seed` it forms
`{command} --seed {seed}` and prints one line per run,

    docker run -d --cpuset-cpus="{core}" -e WANDB_API_KEY {docker_tag} /bin/bash -c '{command} --seed {seed}'

(cores round-robin over this machine's CPU count; the `bash -c` argument shell-quoted, so bash in the container
reads the command as upstream's did), and writes the same lines to `{exp_script}.docker.sh` (default
`debug.sh.docker.sh`), after one `#` comment line.

The deliberate difference: upstream writes `-e WANDB_API_KEY=<the key>` into the printed lines and the file (and,
with `--provider aws`, into each job's environment). Here the key is never written anywhere: the lines say
`-e WANDB_API_KEY`, so docker takes the value from the environment of whoever runs them, and a note on stderr says
to export it first. As upstream, a key must exist (`--wandb-key`, or a password for api.wandb.ai in the netrc file
that `wandb login` writes: `$NETRC`, `~/.netrc` or `~/_netrc`; here an exported `WANDB_API_KEY` counts too) or
nothing is written; the value itself is only checked for being non-empty, never printed or stored.

What upstream does that this entry point refuses (one line on stderr, exit 2, nothing written):

- `--provider aws` would put the key in the jobs' environment in plain text. The line gives the equivalent
  `python -m cleanrl_utils.submit submit ...` command, whose jobs get the key by reference (`--wandb-key-ref ARN`):
  `--job-queue` → `--queue-name`, `--num-seed` → `--num-seeds`, `--num-vcpu` → `--vcpus`, `--num-memory` →
  `--memory-mib`, `--num-gpu` → `--gpus` (when above 0), `--num-hours` → `--timeout-seconds` (hours × 3600),
  `--aws-num-retries` → `--attempts`, `--command` → `--command` without a leading `poetry run`/`uv run` (this
  project's image has neither; the submit tool runs the words without a shell) and with an `--env-id X` moved to
  `--env-ids X` (the submit tool appends `--env-id` and `--seed` itself). Those jobs run the job definition's image;
  `--docker-tag` maps to `--image` of the submit tool's `--dry-run` (the `docker run` preview).
- `-b`/`--build` runs no build here: the line gives upstream's `docker buildx build --output=type=docker|registry
  --platform {archs} -t {docker_tag} .` (`registry` with `-p`) to run first, then this command again without `-b`.
  `-p` alone does nothing, as upstream.

Other bad input (exit 2, one line, nothing written): `--num-seed` below 1, a `--docker-tag` that is not an image
reference, an empty `--command` or one that does not split into shell words, a `--command` that sets
`WANDB_API_KEY=`, and a `{exp_script}.docker.sh` that cannot be written. Exit 0 otherwise.
"""

from __future__ import annotations

import argparse
import netrc
import os
import shlex
import sys
from typing import NoReturn, Optional

from cleanrl_utils.image_reference import parse_reference

PROG = "submit_exp"
WANDB_KEY = "WANDB_API_KEY"
WANDB_HOST = "api.wandb.ai"
RUNNERS = (("poetry", "run"), ("uv", "run"))
"""environment managers upstream's commands start with; dropped in the `--provider aws` translation"""
TRUE_WORDS = ("y", "yes", "t", "true", "on", "1")
FALSE_WORDS = ("n", "no", "f", "false", "off", "0")


class UsageError(Exception):
    """Bad input: one line on stderr, exit 2, nothing written."""


class OneLineParser(argparse.ArgumentParser):
    """argparse reporting a bad command line as one line (`submit_exp: error: ...`), exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see --help)\n")


def str_to_bool(text: str) -> bool:
    """Upstream's `strtobool` words (y, yes, t, true, on, 1 / n, no, f, false, off, 0), any case."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise argparse.ArgumentTypeError(f"not a truth value: {text!r} (true/false, yes/no, 1/0, on/off)")


def make_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=f"python -m cleanrl_utils.{PROG}",
        description="CleanRL Experiment Submission (upstream-compatible; the W&B key is never written anywhere)",
    )
    add = parser.add_argument
    add("--exp-script", type=str, default="debug.sh", help="the file name of this experiment")
    add("--command", type=str, default="poetry run python cleanrl/ppo.py", help="the docker command")
    add(
        "--wandb-key",
        type=str,
        default="",
        help="the wandb key; if not provided, read from the netrc file (`wandb login`); only checked, never written",
    )
    add("--num-seed", type=int, default=1, help="number of random seeds for experiments")
    add("--job-queue", type=str, default="m6gd-medium", help="the name of the job queue")
    add("--docker-tag", type=str, default="vwxyzjn/cleanrl:latest", help="the name of the docker tag")
    add("--num-vcpu", type=int, default=1, help="number of vcpu per experiment")
    add("--num-memory", type=int, default=2000, help="number of memory (MB) per experiment")
    add("--num-gpu", type=int, default=0, help="number of gpu per experiment")
    add("--num-hours", type=float, default=16.0, help="number of hours allocated experiment")
    add(
        "-b",
        "--build",
        type=str_to_bool,
        default=False,
        nargs="?",
        const=True,
        help="refused here: prints the `docker buildx build` command to run instead",
    )
    add("--archs", type=str, default="linux/amd64", help="the archs to build the docker container for")
    add(
        "-p",
        "--push",
        type=str_to_bool,
        default=False,
        nargs="?",
        const=True,
        help="with -b: the build command pushes to the registry",
    )
    add(
        "--provider",
        type=str,
        default="",
        choices=["aws"],
        help="refused here: prints the equivalent `python -m cleanrl_utils.submit submit` command",
    )
    add("--aws-num-retries", type=int, default=1, help='the number of job retries for `provider=="aws"`')
    return parser


# ---------------------------------------------------------------- checks


def command_words(command: str) -> list[str]:
    """The command's shell words. Raises UsageError when it is empty, does not split, or sets the W&B key."""
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise UsageError(f"--command {command!r} does not split into shell words ({e})") from e
    if not words:
        raise UsageError("--command is empty")
    if any(WANDB_KEY + "=" in word for word in words):
        raise UsageError(f"--command sets {WANDB_KEY}: the W&B key is never written into a command")
    return words


def validate(args: argparse.Namespace) -> list[str]:
    """Checks every value used in any mode; returns the command's words."""
    if args.num_seed < 1:
        raise UsageError(f"--num-seed must be at least 1, got {args.num_seed}")
    try:
        parse_reference(args.docker_tag)
    except ValueError as e:
        raise UsageError(f"--docker-tag: {e}") from e
    return command_words(args.command)


def netrc_has_key(environ: dict[str, str]) -> bool:
    """Whether the netrc file (`$NETRC`, else `~/.netrc` or `~/_netrc`, the first that exists, as requests looks)
    holds a password for api.wandb.ai. The password is not kept."""
    candidates = [environ["NETRC"]] if environ.get("NETRC") else [os.path.expanduser(f"~/{n}") for n in (".netrc", "_netrc")]
    for path in candidates:
        if os.path.isfile(path):
            try:
                entry = netrc.netrc(path).authenticators(WANDB_HOST)
            except (OSError, netrc.NetrcParseError):
                return False
            return bool(entry and entry[2])
    return False


def check_key(args: argparse.Namespace, environ: dict[str, str]) -> None:
    if args.wandb_key or environ.get(WANDB_KEY) or netrc_has_key(environ):
        return
    raise UsageError(f"no W&B key: give --wandb-key, run `wandb login` (netrc entry for {WANDB_HOST}) or export {WANDB_KEY}")


# ---------------------------------------------------------------- refusals


def build_refusal(args: argparse.Namespace) -> str:
    output = "--output=type=registry" if args.push else "--output=type=docker"
    build = shlex.join(["docker", "buildx", "build", output, "--platform", args.archs, "-t", args.docker_tag, "."])
    return f"-b/--build is not run by this tool: build with `{build}`, then run this command again without -b"


def submit_command(args: argparse.Namespace, words: list[str]) -> list[str]:
    """The `python -m cleanrl_utils.submit submit` argument vector equivalent to upstream's `--provider aws`, the
    key by reference (`--wandb-key-ref ARN`, a placeholder the user replaces)."""
    vcpus, memory, gpus, retries = args.num_vcpu, args.num_memory, args.num_gpu, args.aws_num_retries
    timeout = int(args.num_hours * 3600)
    for flag, value, least, most in [
        ("--num-vcpu", vcpus, 1, None),
        ("--num-memory", memory, 4, None),
        ("--num-gpu", gpus, 0, None),
        ("--aws-num-retries", retries, 1, 10),
    ]:
        if value < least or (most is not None and value > most):
            bounds = f"from {least} to {most}" if most is not None else f"at least {least}"
            raise UsageError(f"{flag} must be {bounds}, got {value}")
    if timeout < 60:
        raise UsageError(f"--num-hours must give at least 60 seconds (AWS Batch's minimum timeout), got {args.num_hours}")
    words = list(words)
    for runner in RUNNERS:
        if tuple(words[: len(runner)]) == runner and len(words) > len(runner):
            words = words[len(runner) :]
            break
    env_id: Optional[str] = None  # the last --env-id wins, as when the script parses it
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("--env-id", "--env_id") and i + 1 < len(words):
            env_id = words[i + 1]
            i += 2
            continue
        if word.startswith(("--env-id=", "--env_id=")):
            env_id = word.split("=", 1)[1]
        else:
            kept.append(word)
        i += 1
    if not kept:
        raise UsageError("--command holds nothing to run besides --env-id")
    if any(word == "--seed" or word.startswith("--seed=") for word in kept):
        raise UsageError("--command sets --seed: each run gets --seed from --num-seed")
    argv = ["python", "-m", "cleanrl_utils.submit", "submit", "--terraform-dir", "terraform", "--queue-name", args.job_queue]
    if env_id is not None:
        argv += ["--env-ids", env_id]
    argv += ["--command", shlex.join(kept), "--num-seeds", str(args.num_seed), "--vcpus", str(vcpus)]
    argv += ["--memory-mib", str(memory)]
    if gpus > 0:
        argv += ["--gpus", str(gpus)]
    argv += ["--timeout-seconds", str(timeout), "--attempts", str(retries), "--wandb-key-ref", "ARN"]
    return argv


def provider_refusal(args: argparse.Namespace, words: list[str]) -> str:
    line = shlex.join(submit_command(args, words))
    return (
        f"--provider aws would put the W&B key in the jobs' environment in plain text; run instead: {line} "
        f"(ARN: the Secrets Manager secret or SSM parameter holding the key; the jobs run the job definition's image, "
        f"add --dry-run --image {shlex.quote(args.docker_tag)} to preview them as docker run lines)"
    )


# ---------------------------------------------------------------- docker run lines


def docker_run_lines(args: argparse.Namespace, cores: int) -> list[str]:
    """One `docker run -d` line per seed 1..num_seed, cores round-robin, the key taken from the caller's
    environment (`-e WANDB_API_KEY`, no value)."""
    image = shlex.quote(args.docker_tag)
    lines = []
    for index, seed in enumerate(range(1, args.num_seed + 1)):
        command = f"{args.command} --seed {seed}"
        lines.append(
            f'docker run -d --cpuset-cpus="{index % cores}" -e {WANDB_KEY} {image} /bin/bash -c {shlex.quote(command)}'
        )
    return lines


def run(argv: Optional[list[str]] = None, environ: Optional[dict[str, str]] = None) -> int:
    """Parses, checks, writes `{exp_script}.docker.sh` and prints its lines; returns the exit code. Raises
    UsageError (one line) on bad input, before anything is written."""
    args = make_parser().parse_args(argv)
    environ = dict(os.environ) if environ is None else environ
    words = validate(args)
    if args.build:
        raise UsageError(build_refusal(args))
    if args.provider == "aws":
        raise UsageError(provider_refusal(args, words))
    check_key(args, environ)
    lines = docker_run_lines(args, os.cpu_count() or 1)
    path = f"{args.exp_script}.docker.sh"
    header = f"# docker takes {WANDB_KEY} from the environment of whoever runs this file: export it first\n"
    try:
        with open(path, "w") as f:
            f.write(header + "".join(line + "\n" for line in lines))
    except OSError as e:
        raise UsageError(f"--exp-script: cannot write {path!r} ({e.strerror or e})") from e
    for line in lines:
        print(line)
    print(
        f"{PROG}: wrote {path}; the W&B key is not in it: export {WANDB_KEY} before running it "
        f"(docker run -e {WANDB_KEY} takes the value from your environment)",
        file=sys.stderr,
    )
    return 0


def main(argv: Optional[list[str]] = None) -> None:
    try:
        code = run(argv)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code)


if __name__ == "__main__":
    main()
