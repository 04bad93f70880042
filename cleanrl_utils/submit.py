"""Submits the benchmark runner's env × seed grid as AWS Batch jobs, and follows, cancels and reads them.

    python -m cleanrl_utils.submit submit --terraform-dir terraform --queue cpu_spot \\
        --env-ids CartPole-v1 Acrobot-v1 --num-seeds 3 --command "python cleanrl/ppo.py --total-timesteps 50000"
    python -m cleanrl_utils.submit wait --manifest runs/batch/ppo-20250101-120000.json
    python -m cleanrl_utils.submit logs --manifest runs/batch/ppo-20250101-120000.json --tail 20

Subcommands: `submit` (one job per env × seed, or `--array` for one array job; `--dry-run` prints the
equivalent `docker run` commands and calls no AWS API), `status`, `wait`, `cancel`, `logs`, and
`run-array-child` (what an array job's children execute in the container).

The runs are `cleanrl_utils.benchmark`'s plan: the command split with shell-word rules plus
`--env-id ENV --seed SEED`, seed-major. Each job runs that argument vector through the image's entrypoint
(no shell). The queue, job definition, region, log group and image come from `terraform output -json` of
`--terraform-dir` (outputs `job_queue_names`, `job_definition_name`, `region`, `log_group_name`, `image`) or
from the explicit flags, which win.

Each job keeps its run folder in the stack's S3 run store (terraform's `run_store` output, as
`CLEANRL_RUN_STORE`; `--no-run-store` turns it off), so that an attempt Batch retries after a spot reclaim goes on
from the last checkpoint (cleanrl_utils/run_store.py). Only runs that checkpoint take part: a command whose script
checkpoints only with `--checkpoint-every N` and that gives none is submitted with a one-line warning.

The W&B key only ever travels by reference: `--track` needs a `WANDB_API_KEY` entry in the job definition's
`secrets`, or `--wandb-key-ref ARN` (a Secrets Manager secret or SSM parameter), which registers a job
definition revision naming that ARN. `--env WANDB_API_KEY=...` is refused; the tool never reads the key.

Exit codes: 0 done; 1 an AWS error (one line), a job that failed (`wait`) or a job not found; 2 bad input
(one line, nothing submitted, no manifest); 124 `wait` timed out; 130 interrupted (Ctrl-C), after writing the
manifest of what was submitted.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Optional, TextIO

import tyro

from cleanrl_utils.benchmark import env_ids_error, plan_runs, plural
from cleanrl_utils.image_reference import parse_reference

PROG = "submit"
TIMEOUT_EXIT = 124
"""exit code of `wait` when its timeout passes first (as coreutils' `timeout`)"""
INTERRUPT_EXIT = 130
DEFAULT_LOG_GROUP = "/aws/batch/job"
"""Batch's log group for jobs whose job definition names none"""
WANDB_KEY = "WANDB_API_KEY"
ARRAY_ENV_IDS = "CLEANRL_ARRAY_ENV_IDS"
"""array jobs: JSON list of the env ids, in the order of `--env-ids`"""
ARRAY_SEEDS = "CLEANRL_ARRAY_SEEDS"
"""array jobs: `START:COUNT` of the seeds"""
CHILD_ENTRY = ("python", "-m", "cleanrl_utils.submit", "run-array-child")
QUEUED = ("SUBMITTED", "PENDING", "RUNNABLE")
RUNNING = ("STARTING", "RUNNING")
DONE = ("SUCCEEDED", "FAILED")
JOB_NAME_MAX = 128
JOB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_ARN_RE = re.compile(r"^arn:aws(-[a-z]+)*:secretsmanager:[a-z]{2}(-[a-z]+)+-\d:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$")
PARAMETER_ARN_RE = re.compile(r"^arn:aws(-[a-z]+)*:ssm:[a-z]{2}(-[a-z]+)+-\d:\d{12}:parameter/[A-Za-z0-9/_.-]+$")
PLAIN_TEXT_REFUSED = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
DESCRIBE_CHUNK = 100  # describe_jobs takes at most 100 ids
RUN_STORE = "CLEANRL_RUN_STORE"
"""where the jobs keep their run folders (cleanrl_utils/run_store.py)"""
CHECKPOINT_FLAGS = ("--checkpoint-every", "--checkpoint_every")


class UsageError(Exception):
    """Bad input: reported as one line, exit 2, before anything is submitted."""


class SubmitError(Exception):
    """An AWS error after some jobs were submitted; the message says what was kept."""


# ---------------------------------------------------------------- command line


@dataclass
class Location:
    terraform_dir: Optional[str] = None
    """a Terraform folder of this project's stack: the queue names, job definition, region, log group and image
    are read from `terraform output -json` there"""
    region: Optional[str] = None
    """AWS region (unset: terraform's `region` output, else the AWS configuration)"""


@dataclass
class Submit(Location):
    """Submit one AWS Batch job per env × seed (or one array job)."""

    env_ids: list[str] = field(default_factory=lambda: ["CartPole-v1"])
    """the ids of the environments to run (each gets every seed)"""
    command: str = "python cleanrl/ppo.py"
    """the command each job runs in the image; `--env-id` and `--seed` are appended (shell-word rules, no shell)"""
    num_seeds: int = 3
    """the number of seeds per env"""
    start_seed: int = 1
    """the first seed"""
    exp_name: Optional[str] = None
    """prefix of the job names (unset: the script's name without `.py`, e.g. `ppo`)"""
    queue: Optional[str] = None
    """the queue: a key of terraform's `job_queue_names` (cpu_on_demand, cpu_spot, gpu_on_demand, gpu_spot) or a
    queue name"""
    queue_name: Optional[str] = None
    """the queue's name (instead of --queue)"""
    job_definition: Optional[str] = None
    """job definition name, name:revision or ARN (unset: terraform's `job_definition_name`)"""
    vcpus: Optional[int] = None
    """vCPUs per job (unset: the job definition's)"""
    memory_mib: Optional[int] = None
    """memory per job in MiB (unset: the job definition's)"""
    gpus: Optional[int] = None
    """GPUs per job (unset: the job definition's)"""
    timeout_seconds: Optional[int] = None
    """each attempt is stopped after this many seconds (at least 60; unset: the job definition's)"""
    attempts: Optional[int] = None
    """attempts per job, 1 to 10 (unset: the job definition's retry strategy)"""
    env: Annotated[list[str], tyro.conf.UseAppendAction] = field(default_factory=list)
    """extra environment variable KEY=VALUE of every job (repeat the flag for more; never WANDB_API_KEY)"""
    track: bool = False
    """append `--track` to the command; needs the W&B key as a secret of the job definition or --wandb-key-ref"""
    wandb_key_ref: Optional[str] = None
    """ARN of the Secrets Manager secret or SSM parameter holding the W&B key: registers a job definition
    revision that names it in `secrets`"""
    array: bool = False
    """submit one array job whose children pick their env and seed from AWS_BATCH_JOB_ARRAY_INDEX"""
    run_store: bool = True
    """keep each job's run folder in the stack's S3 run store (terraform's `run_store` output): a retried attempt
    goes on from its last checkpoint (the command must checkpoint: --checkpoint-every N)"""
    max_jobs: int = 1000
    """refuse to submit more separate jobs than this (a guard against a typo in --num-seeds; --array is one job)"""
    manifest: Optional[str] = None
    """where to write the manifest JSON (unset: runs/batch/{exp_name}-{time}.json; never overwritten)"""
    dry_run: bool = False
    """submit nothing, call no AWS API: print the equivalent `docker run` commands and the submissions"""
    image: Optional[str] = None
    """dry run: the image for `docker run` (unset: terraform's `image` output)"""


@dataclass
class Jobs(Location):
    job_ids: Annotated[tyro.conf.Positional[list[str]], tyro.conf.arg(metavar="[JOB_ID ...]")] = field(default_factory=list)
    """job ids (or give --manifest)"""
    manifest: Optional[str] = None
    """a manifest written by `submit`: its jobs"""


@dataclass
class Status(Jobs):
    """Print a table of the jobs' states."""


@dataclass
class Wait(Jobs):
    """Wait until every job has ended: exit 0 if all succeeded, 1 if any failed, 124 on timeout."""

    timeout: float = 86400.0
    """give up after this many seconds (exit 124)"""
    poll_seconds: float = 30.0
    """seconds between polls"""


@dataclass
class Cancel(Jobs):
    """Cancel queued jobs and terminate running ones."""

    reason: str = "cancelled with cleanrl_utils.submit"
    """the reason Batch records"""


@dataclass
class Logs(Jobs):
    """Print the jobs' CloudWatch log streams."""

    tail: int = 0
    """print only the last N lines of each job (0: all)"""
    log_group: Optional[str] = None
    """the log group (unset: the job's log configuration, terraform's `log_group_name`, else /aws/batch/job)"""


# ---------------------------------------------------------------- configuration


def terraform_outputs(terraform_dir: str) -> dict[str, Any]:
    """The values of `terraform -chdir=DIR output -json` ({name: value}). Raises UsageError (one line) when
    terraform is missing, fails or prints something that is not the JSON of outputs."""
    terraform = shutil.which("terraform")
    if terraform is None:
        raise UsageError("--terraform-dir: cannot find terraform on PATH")
    if not os.path.isdir(terraform_dir):
        raise UsageError(f"--terraform-dir {terraform_dir!r} is not a folder")
    try:
        result = subprocess.run(
            [terraform, f"-chdir={terraform_dir}", "output", "-json"], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UsageError(f"--terraform-dir: terraform output failed: {e}") from e
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1].strip()
        raise UsageError(f"--terraform-dir: terraform output failed (exit {result.returncode}): {last}")
    try:
        outputs = json.loads(result.stdout or "{}")
        return {name: output["value"] for name, output in outputs.items()}
    except (ValueError, TypeError, KeyError) as e:
        raise UsageError(f"--terraform-dir: cannot read terraform's outputs ({e})") from e


def outputs_of(location: Location) -> dict[str, Any]:
    """Terraform's outputs when `--terraform-dir` is given, else {}; for `status`, `wait`, `cancel` and `logs`
    with `--manifest`, the region and log group recorded there fill in what terraform does not give."""
    outputs = terraform_outputs(location.terraform_dir) if location.terraform_dir else {}
    manifest_path = getattr(location, "manifest", None)
    if manifest_path and not isinstance(location, Submit):
        manifest = read_manifest(manifest_path)
        recorded = {"region": manifest.get("region"), "log_group_name": manifest.get("log_group")}
        outputs = {k: v for k, v in recorded.items() if v} | outputs
    return outputs


def resolve_region(location: Location, outputs: dict[str, Any]) -> str:
    """`--region`, else terraform's `region`, else the AWS configuration's (environment, profile). Raises
    UsageError when there is none. Reads local configuration only."""
    region = location.region or outputs.get("region")
    if not region:
        import boto3

        region = boto3.session.Session().region_name
    if not region:
        raise UsageError("no AWS region: give --region or --terraform-dir, or set AWS_DEFAULT_REGION")
    return region


def clients(region: str):
    """boto3 Batch and CloudWatch Logs clients for `region` with bounded standard-mode retries (throttling and
    connection errors are retried 3 times with backoff). Endpoints follow boto3's configuration
    (`AWS_ENDPOINT_URL` included)."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=10, read_timeout=60)
    return boto3.client("batch", region_name=region, config=config), boto3.client("logs", region_name=region, config=config)


# ---------------------------------------------------------------- planning submissions


def sanitize_job_name(text: str) -> str:
    """`text` as a Batch job name part: every character other than a letter, digit, `-` or `_` becomes `-`
    (`ALE/Breakout-v5` → `ALE-Breakout-v5`)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", text)


def job_name(prefix: str, suffix: str = "") -> str:
    """A Batch job name (letters, digits, `-`, `_`; first a letter or digit; at most 128): `prefix` and `suffix`
    sanitized, the prefix cut so that the suffix (env and seed) survives. Raises ValueError when nothing of the
    prefix is left or it does not start with a letter or digit."""
    prefix, suffix = sanitize_job_name(prefix), sanitize_job_name(suffix)
    name = (prefix[: max(0, JOB_NAME_MAX - len(suffix))] + suffix)[:JOB_NAME_MAX]
    if not JOB_NAME_RE.match(name):
        raise ValueError(f"job name {name!r} does not start with a letter or digit")
    return name


def default_exp_name(words: list[str]) -> str:
    """The job-name prefix for a command: its first word ending in `.py` without the folder and `.py`
    (`python cleanrl/ppo.py` → `ppo`), else its program's name."""
    for word in words:
        if word.endswith(".py"):
            return os.path.basename(word)[: -len(".py")]
    words = [w for w in words if w != "-m"]
    return os.path.basename(words[-1] if words[0].startswith("python") and len(words) > 1 else words[0])


def resource_requirements(vcpus: Optional[int], memory_mib: Optional[int], gpus: Optional[int]) -> list[dict[str, str]]:
    """containerOverrides.resourceRequirements for the given numbers (None: keep the job definition's):
    `[{"type": "VCPU", "value": "2"}, {"type": "MEMORY", "value": "4096"}, {"type": "GPU", "value": "1"}]`."""
    requirements = []
    for kind, value in (("VCPU", vcpus), ("MEMORY", memory_mib), ("GPU", gpus)):
        if value is not None:
            requirements.append({"type": kind, "value": str(value)})
    return requirements


def submit_job_kwargs(
    name: str,
    queue: str,
    job_definition: str,
    command: list[str],
    environment: dict[str, str],
    vcpus: Optional[int] = None,
    memory_mib: Optional[int] = None,
    gpus: Optional[int] = None,
    timeout_seconds: Optional[int] = None,
    attempts: Optional[int] = None,
    array_size: Optional[int] = None,
) -> dict[str, Any]:
    """The keyword arguments of one `batch.submit_job` call: `containerOverrides` with the command (list of
    words), the environment (sorted by name) and the resource requirements (vCPUs, MiB, GPUs); `timeout`
    (`attemptDurationSeconds`), `retryStrategy` (`attempts`) and `arrayProperties` (`size`) only when given."""
    overrides: dict[str, Any] = {"command": list(command)}
    if environment:
        overrides["environment"] = [{"name": k, "value": environment[k]} for k in sorted(environment)]
    requirements = resource_requirements(vcpus, memory_mib, gpus)
    if requirements:
        overrides["resourceRequirements"] = requirements
    kwargs: dict[str, Any] = {"jobName": name, "jobQueue": queue, "jobDefinition": job_definition}
    kwargs["containerOverrides"] = overrides
    if timeout_seconds is not None:
        kwargs["timeout"] = {"attemptDurationSeconds": timeout_seconds}
    if attempts is not None:
        kwargs["retryStrategy"] = {"attempts": attempts}
    if array_size is not None:
        kwargs["arrayProperties"] = {"size": array_size}
    return kwargs


@dataclass
class Plan:
    """What `submit` will do: the `submit_job` kwargs of each submission and, per submission, the runs it
    holds as (env id, seed) in array-index order."""

    submissions: list[dict[str, Any]]
    runs: list[list[tuple[str, int]]]
    command: list[str]
    environment: dict[str, str]


def command_words(args: Submit) -> list[str]:
    """The command's words, `--track` appended when asked for and not there yet."""
    words = shlex.split(args.command)
    if args.track and "--track" not in words:
        words.append("--track")
    return words


def tracks(args: Submit) -> bool:
    """Whether the runs log to W&B (`--track`, or `--track` in the command)."""
    return args.track or "--track" in shlex.split(args.command)


def parse_env(pairs: list[str]) -> dict[str, str]:
    """`--env KEY=VALUE` pairs as a dict. Raises UsageError for a malformed pair, an invalid or repeated name, a
    name Batch reserves (`AWS_BATCH*`) or WANDB_API_KEY (whose value is never shown in the message)."""
    environment: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if name == WANDB_KEY:
            raise UsageError(
                f"--env {WANDB_KEY}=...: the W&B key goes by reference only "
                "(a secret of the job definition, or --wandb-key-ref ARN)"
            )
        if name in PLAIN_TEXT_REFUSED:
            raise UsageError(
                f"--env {name}=...: a token would be stored in plain text in the job and the manifest; "
                "put it in the job definition's secrets instead"
            )
        if not sep:
            raise UsageError(f"--env {pair!r} is not KEY=VALUE")
        if not ENV_NAME_RE.match(name):
            raise UsageError(f"--env: {name!r} is not an environment variable name")
        if name.startswith("AWS_BATCH"):
            raise UsageError(f"--env: names starting with AWS_BATCH are reserved by Batch ({name})")
        if name in (ARRAY_ENV_IDS, ARRAY_SEEDS):
            raise UsageError(f"--env: {name} is set by this tool for array jobs")
        if name in environment:
            raise UsageError(f"--env names {name} twice")
        environment[name] = value
    return environment


def arn_error(arn: str) -> Optional[str]:
    """Why `arn` is not the ARN of a Secrets Manager secret or an SSM parameter, as one line (never quoting
    it: a pasted key must not be echoed), or None."""
    if SECRET_ARN_RE.match(arn) or PARAMETER_ARN_RE.match(arn):
        return None
    return (
        "--wandb-key-ref must be the ARN of a Secrets Manager secret (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME) "
        "or an SSM parameter (arn:aws:ssm:REGION:ACCOUNT:parameter/NAME)"
    )


def image_error(image: str) -> Optional[str]:
    """Why `image` is not a Docker image reference (Docker's reference grammar, see
    cleanrl_utils.image_reference), as one line, or None."""
    try:
        parse_reference(image)
    except ValueError as e:
        return f"--image: {e}"
    return None


def validate_submit(args: Submit) -> None:
    """Local checks of `submit`'s values (no file written, no AWS call). Raises UsageError with the first
    problem."""
    error = env_ids_error(args.env_ids)
    if error is not None:
        raise UsageError(error)
    if args.num_seeds < 1:
        raise UsageError(f"--num-seeds must be at least 1, got {args.num_seeds}")
    if args.start_seed < 0:
        raise UsageError(f"--start-seed must be at least 0, got {args.start_seed}")
    try:
        words = shlex.split(args.command)
    except ValueError as e:
        raise UsageError(f"--command {args.command!r} does not split into words ({e})") from e
    if not words:
        raise UsageError("--command is empty")
    for flag in ("--env-id", "--env_id", "--seed"):
        if any(word == flag or word.startswith(flag + "=") for word in words):
            raise UsageError(f"--command sets {flag}: each job gets --env-id and --seed from --env-ids and the seeds")
    if any(WANDB_KEY + "=" in word for word in words):
        raise UsageError(f"--command sets {WANDB_KEY}: the W&B key goes by reference only (--wandb-key-ref ARN)")
    for flag, value, least, most in [
        ("--vcpus", args.vcpus, 1, None),
        ("--memory-mib", args.memory_mib, 4, None),
        ("--gpus", args.gpus, 0, None),
        ("--timeout-seconds", args.timeout_seconds, 60, None),
        ("--attempts", args.attempts, 1, 10),
    ]:
        if value is not None and (value < least or (most is not None and value > most)):
            bounds = f"from {least} to {most}" if most is not None else f"at least {least}"
            raise UsageError(f"{flag} must be {bounds}, got {value}")
    parse_env(args.env)
    if args.wandb_key_ref is not None:
        error = arn_error(args.wandb_key_ref)
        if error:
            raise UsageError(error)
    if args.queue and args.queue_name:
        raise UsageError("give --queue or --queue-name, not both")
    if not (args.queue or args.queue_name):
        raise UsageError("--queue (cpu_on_demand, cpu_spot, gpu_on_demand, gpu_spot or a queue name) is required")
    runs = len(args.env_ids) * args.num_seeds
    if args.array and not 2 <= runs <= 10000:
        raise UsageError(f"--array needs 2 to 10000 runs (Batch's array sizes), got {runs}")
    if not args.array and runs > args.max_jobs:
        raise UsageError(f"{runs} jobs is more than --max-jobs {args.max_jobs} (raise it, or use --array for one array job)")
    try:
        job_name(args.exp_name if args.exp_name is not None else default_exp_name(words), "__x")
    except ValueError as e:
        raise UsageError(f"--exp-name: {e}") from e
    if args.image is not None:
        error = image_error(args.image)
        if error:
            raise UsageError(error)
    if args.manifest is not None:
        manifest_path_error(args.manifest)


def manifest_path_error(path: str) -> None:
    """Raises UsageError when a manifest cannot be written at `path` (it exists, or its nearest existing folder
    is not a writable folder). Creates nothing."""
    if os.path.exists(path):
        raise UsageError(f"--manifest {path!r} exists already (manifests are never overwritten)")
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--manifest {path!r}: cannot create it ({folder!r} is not a writable folder)")


def resolve_queue(args: Submit, outputs: dict[str, Any]) -> str:
    """The queue name: `--queue-name`, or `--queue` looked up in terraform's `job_queue_names` (a key such as
    `cpu_spot`), else taken as a name. Raises UsageError for a key that needs terraform's outputs."""
    if args.queue_name:
        return args.queue_name
    names = outputs.get("job_queue_names") or {}
    if args.queue in names:
        return names[args.queue]
    if args.queue in ("cpu_on_demand", "cpu_spot", "gpu_on_demand", "gpu_spot"):
        if names:
            raise UsageError(f"--queue {args.queue}: not among terraform's job_queue_names ({', '.join(sorted(names))})")
        raise UsageError(f"--queue {args.queue}: a queue key needs --terraform-dir (or give the queue's name)")
    return args.queue


def queue_is_gpu(queue: str, outputs: dict[str, Any]) -> Optional[bool]:
    """Whether terraform's `job_queues` output marks `queue` (a name) as a GPU queue; None when unknown."""
    for entry in (outputs.get("job_queues") or {}).values():
        if isinstance(entry, dict) and entry.get("name") == queue and "gpu" in entry:
            return bool(entry["gpu"])
    return None


def definition_gpus(definition: dict[str, Any]) -> int:
    """GPUs a job definition asks for (its `resourceRequirements`), 0 when none."""
    requirements = (definition.get("containerProperties") or {}).get("resourceRequirements") or []
    return sum(int(r.get("value", 0)) for r in requirements if r.get("type") == "GPU")


def checkpoint_warning(words: list[str]) -> Optional[str]:
    """Why the runs of a command would start again from step 0 when retried, or None (also when its script, the
    first word ending in `.py`, is not a file here): the script has no --checkpoint-every, or the command gives
    it as 0, or gives none where the script's default is 0."""
    script = next((word for word in words if word.endswith(".py")), "")
    if not os.path.isfile(script):
        return None
    given = [w.split("=", 1)[-1] if "=" in w else flag_value(words, w) for w in words if w.split("=")[0] in CHECKPOINT_FLAGS]
    with open(script) as f:
        default = re.search(r"^\s+checkpoint_every: int = (\d+)", f.read(), re.MULTILINE)
    if default is None:
        return f"{os.path.basename(script)} does not checkpoint: a retried attempt starts again from step 0"
    if "0" in given or (not given and default[1] == "0"):
        return (
            f"{os.path.basename(script)} checkpoints only with --checkpoint-every N (the command gives none): a "
            "retried attempt starts again from step 0, and the run store keeps nothing of it"
        )
    return None


def plan_submit(args: Submit, queue: str, job_definition: str) -> Plan:
    """The submissions of a validated `submit`: one per run (name `{exp}__{env}__{seed}`), or with `--array`
    one array job (name `{exp}__{N}runs`) whose children run `run-array-child` with the plan in the
    environment (`CLEANRL_ARRAY_ENV_IDS`, `CLEANRL_ARRAY_SEEDS`)."""
    words = command_words(args)
    exp = args.exp_name if args.exp_name is not None else default_exp_name(words)
    environment = parse_env(args.env)
    seeds = range(args.start_seed, args.start_seed + args.num_seeds)
    runs = plan_runs(shlex.join(words), args.env_ids, seeds, "")
    resources = dict(
        vcpus=args.vcpus,
        memory_mib=args.memory_mib,
        gpus=args.gpus,
        timeout_seconds=args.timeout_seconds,
        attempts=args.attempts,
    )
    if args.array:
        array_env = environment | {ARRAY_ENV_IDS: json.dumps(args.env_ids), ARRAY_SEEDS: f"{args.start_seed}:{args.num_seeds}"}
        kwargs = submit_job_kwargs(
            job_name(exp, f"__{len(runs)}runs"),
            queue,
            job_definition,
            [*CHILD_ENTRY, *words],
            array_env,
            array_size=len(runs),
            **resources,
        )
        return Plan([kwargs], [[(run.env_id, run.seed) for run in runs]], words, environment)
    submissions = [
        submit_job_kwargs(
            job_name(exp, f"__{run.env_id}__{run.seed}"), queue, job_definition, list(run.argv), environment, **resources
        )
        for run in runs
    ]
    return Plan(submissions, [[(run.env_id, run.seed)] for run in runs], words, environment)


def docker_run_command(
    image: str,
    command: list[str],
    environment: dict[str, str],
    vcpus: Optional[int] = None,
    memory_mib: Optional[int] = None,
    gpus: Optional[int] = None,
    wandb_key: bool = False,
) -> list[str]:
    """The `docker run` argument vector that runs `command` as a Batch job would: `--cpus`, `--memory {MiB}m`,
    `--gpus` for the resources given, `-e NAME=VALUE` per variable, and `-e WANDB_API_KEY` without a value
    (docker takes it from the caller's environment) when the job gets the W&B key."""
    argv = ["docker", "run", "--rm"]
    if vcpus is not None:
        argv += ["--cpus", str(vcpus)]
    if memory_mib is not None:
        argv += ["--memory", f"{memory_mib}m"]
    if gpus:
        argv += ["--gpus", str(gpus)]
    if wandb_key:
        argv += ["-e", WANDB_KEY]
    for name in sorted(environment):
        argv += ["-e", f"{name}={environment[name]}"]
    return [*argv, image, *command]


# ---------------------------------------------------------------- AWS checks


def describe_queue(batch, queue: str) -> dict[str, Any]:
    """The queue's description. Raises UsageError when it does not exist or is not ENABLED."""
    queues = batch.describe_job_queues(jobQueues=[queue]).get("jobQueues", [])
    if not queues:
        raise UsageError(f"unknown job queue {queue!r} (no such queue in this account and region)")
    if queues[0].get("state") != "ENABLED":
        raise UsageError(f"job queue {queue!r} is {queues[0].get('state')}, not ENABLED")
    return queues[0]


def describe_job_definition(batch, job_definition: str) -> dict[str, Any]:
    """The job definition's ACTIVE revision that a submission by `job_definition` uses: the named revision
    (`name:revision`, ARN) or the latest ACTIVE one of a name. Raises UsageError when there is none."""
    paginator = batch.get_paginator("describe_job_definitions")
    if ":" in job_definition:
        pages = paginator.paginate(jobDefinitions=[job_definition])
    else:
        pages = paginator.paginate(jobDefinitionName=job_definition, status="ACTIVE")
    found = [d for page in pages for d in page.get("jobDefinitions", []) if d.get("status", "ACTIVE") == "ACTIVE"]
    if not found:
        raise UsageError(f"unknown job definition {job_definition!r} (no ACTIVE revision)")
    return max(found, key=lambda d: d.get("revision", 0))


def wandb_secret(definition: dict[str, Any]) -> Optional[str]:
    """The `valueFrom` of the job definition's WANDB_API_KEY secret, or None."""
    for secret in (definition.get("containerProperties") or {}).get("secrets") or []:
        if secret.get("name") == WANDB_KEY:
            return secret.get("valueFrom")
    return None


REGISTER_KEYS = (
    "parameters",
    "schedulingPriority",
    "retryStrategy",
    "propagateTags",
    "timeout",
    "tags",
    "platformCapabilities",
)


def register_with_secret(batch, definition: dict[str, Any], arn: str) -> str:
    """Registers a revision of `definition` whose `secrets` name `arn` as WANDB_API_KEY (the other settings
    kept) and returns its ARN; returns the definition's own ARN when it names `arn` already."""
    if wandb_secret(definition) == arn:
        return definition["jobDefinitionArn"]
    container = dict(definition["containerProperties"])
    others = [s for s in container.get("secrets") or [] if s.get("name") != WANDB_KEY]
    container["secrets"] = [*others, {"name": WANDB_KEY, "valueFrom": arn}]
    kwargs = {k: definition[k] for k in REGISTER_KEYS if definition.get(k) not in (None, {}, [])}
    response = batch.register_job_definition(
        jobDefinitionName=definition["jobDefinitionName"],
        type=definition.get("type", "container"),
        containerProperties=container,
        **kwargs,
    )
    return response["jobDefinitionArn"]


# ---------------------------------------------------------------- manifests


def utc_now() -> str:
    """The current time as ISO 8601 UTC with seconds (`2025-01-01T12:00:00Z`)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_manifest_path(prefix: str) -> str:
    """`runs/batch/{prefix}-{YYYYmmdd-HHMMSS}.json`, with `-2`, `-3`, ... added when that exists."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = os.path.join("runs", "batch", f"{prefix}-{stamp}.json")
    count = 2
    while os.path.exists(path):
        path = os.path.join("runs", "batch", f"{prefix}-{stamp}-{count}.json")
        count += 1
    return path


def write_manifest(path: str, manifest: dict[str, Any]) -> None:
    """Writes `manifest` as JSON to `path` (folders created), through a temporary file so that a reader never
    sees half of it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def save_manifest(path: str, manifest: dict[str, Any]) -> None:
    """write_manifest once jobs exist: a write that fails raises SubmitError naming every submitted job id, so
    none is lost."""
    try:
        write_manifest(path, manifest)
    except OSError as e:
        ids = " ".join(job["job_id"] for job in manifest["jobs"]) or "none"
        raise SubmitError(f"could not write the manifest {path} ({e.strerror or e}); submitted job ids: {ids}") from e


def read_manifest(path: str) -> dict[str, Any]:
    """A manifest written by `submit`. Raises UsageError when it cannot be read or has no jobs list."""
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise UsageError(f"--manifest {path!r}: cannot read it ({getattr(e, 'strerror', None) or e})") from e
    if not isinstance(manifest, dict) or not isinstance(manifest.get("jobs"), list):
        raise UsageError(f"--manifest {path!r} is not a manifest of this tool (no jobs list)")
    return manifest


@dataclass
class Target:
    """A job to follow: its id, a label (env and seed when known) and, for an array job, its children's
    (index, env id, seed)."""

    job_id: str
    name: str = ""
    env_id: str = ""
    seed: Optional[int] = None
    children: list[tuple[int, str, int]] = field(default_factory=list)


def targets_of(args: Jobs) -> list[Target]:
    """The jobs named by `job_ids` and/or `--manifest`. Raises UsageError when there are none."""
    targets = [Target(job_id) for job_id in args.job_ids]
    if args.manifest:
        for job in read_manifest(args.manifest)["jobs"]:
            children = [(c["index"], c["env_id"], c["seed"]) for c in job.get("array_children", [])]
            targets.append(Target(job["job_id"], job.get("job_name", ""), job.get("env_id", ""), job.get("seed"), children))
    if not targets:
        raise UsageError("name the jobs: job ids or --manifest")
    return targets


# ---------------------------------------------------------------- submit


def run_submit(args: Submit, out: Optional[TextIO] = None) -> int:
    """`submit`: validates everything (locally, then the queue and job definition on AWS), submits, writes the
    manifest and prints the job ids; `--dry-run` prints instead and calls no AWS API. Returns the exit code."""
    out = out or sys.stdout
    validate_submit(args)
    outputs = outputs_of(args)
    queue = resolve_queue(args, outputs)
    gpu_queue = queue_is_gpu(queue, outputs)
    if gpu_queue is False and (args.gpus or 0) > 0:
        raise UsageError(f"--gpus {args.gpus}: queue {queue} has no GPU instances (use a gpu_* queue)")
    job_definition = args.job_definition or outputs.get("job_definition_name")
    if not job_definition:
        raise UsageError("no job definition: give --job-definition or --terraform-dir")
    words = command_words(args)
    exp = args.exp_name if args.exp_name is not None else default_exp_name(words)
    if args.run_store and outputs.get("run_store") and RUN_STORE not in parse_env(args.env):
        args.env = [*args.env, f"{RUN_STORE}={outputs['run_store']}"]  # the jobs keep their run folders there
    store = parse_env(args.env).get(RUN_STORE)
    if store and checkpoint_warning(words):
        print(f"{PROG}: warning: {checkpoint_warning(words)}", file=sys.stderr)
    if args.dry_run:
        return dry_run(args, outputs, queue, job_definition, out)
    region = resolve_region(args, outputs)
    manifest_path = args.manifest or default_manifest_path(sanitize_job_name(exp))
    manifest_path_error(manifest_path)  # the default one too: refused before anything is submitted
    batch, _ = clients(region)
    describe_queue(batch, queue)
    definition = describe_job_definition(batch, job_definition)
    if gpu_queue and (args.gpus if args.gpus is not None else definition_gpus(definition)) == 0:
        raise UsageError(f"queue {queue} runs GPU instances but the jobs ask for no GPU: give --gpus N (at least 1)")
    if tracks(args) and args.wandb_key_ref is None and wandb_secret(definition) is None:
        raise UsageError(
            f"--track: job definition {job_definition!r} has no {WANDB_KEY} secret "
            "(give --wandb-key-ref ARN, or apply the terraform stack)"
        )
    if args.wandb_key_ref is not None:
        if not (definition.get("containerProperties") or {}).get("executionRoleArn"):
            raise UsageError(
                f"--wandb-key-ref: job definition {job_definition!r} has no executionRoleArn to read the secret with"
            )
        job_definition = register_with_secret(batch, definition, args.wandb_key_ref)
        print(f"job definition revision with the W&B key reference: {job_definition}", file=out)
    plan = plan_submit(args, queue, job_definition)
    manifest: dict[str, Any] = {
        "submitted_at": utc_now(),
        "region": region,
        "queue": queue,
        "job_definition": job_definition,
        "command": plan.command,
        "environment": plan.environment,
        "array": args.array,
        "log_group": outputs.get("log_group_name"),
        "run_store": store,
        "jobs": [],
    }
    try:  # written before the first submission: a path that cannot be written is found before anything runs
        write_manifest(manifest_path, manifest)
    except OSError as e:
        raise UsageError(f"--manifest {manifest_path!r}: cannot write it ({e.strerror or e})") from e
    done = 0
    try:
        for kwargs, runs in zip(plan.submissions, plan.runs):
            response = batch.submit_job(**kwargs)
            job: dict[str, Any] = {"job_id": response["jobId"], "job_name": response.get("jobName", kwargs["jobName"])}
            if args.array:
                job["array_size"] = len(runs)
                job["array_children"] = [{"index": i, "env_id": e, "seed": s} for i, (e, s) in enumerate(runs)]
            else:
                job["env_id"], job["seed"] = runs[0]
            job["command"] = kwargs["containerOverrides"]["command"]
            job["submitted_at"] = utc_now()
            manifest["jobs"].append(job)
            done += 1
            save_manifest(manifest_path, manifest)  # after each job: a killed submission still leaves its ids
            print(f"{job['job_id']}  {job['job_name']}", file=out, flush=True)
    except KeyboardInterrupt:
        manifest["incomplete"] = f"interrupted after {done} of {len(plan.submissions)} submissions"
        save_manifest(manifest_path, manifest)
        print(
            f"{PROG}: interrupted: {done} of {len(plan.submissions)} submitted, recorded in {manifest_path}", file=sys.stderr
        )
        return INTERRUPT_EXIT
    except Exception as e:
        if done == 0 or not aws_error(e):
            raise
        manifest["incomplete"] = f"{one_line(e)} after {done} of {len(plan.submissions)} submissions"
        save_manifest(manifest_path, manifest)
        raise SubmitError(
            f"{done} of {len(plan.submissions)} submitted (recorded in {manifest_path}), then: {one_line(e)}"
        ) from e
    save_manifest(manifest_path, manifest)
    what = f"array job of {len(plan.runs[0])} runs" if args.array else plural(done, "job")
    print(f"submitted {what} to {queue}; manifest {manifest_path}", file=out)
    return 0


def dry_run(args: Submit, outputs: dict[str, Any], queue: str, job_definition: str, out: Optional[TextIO] = None) -> int:
    """Prints, for each job (each array child), a `# ` comment with the `submit_job` request and the equivalent
    `docker run` command line (shlex-quoted; without the run store, which keys folders by Batch job ids). Calls no
    AWS API."""
    out = out or sys.stdout
    image = args.image or outputs.get("image")
    if not image:
        raise UsageError("--dry-run needs --image or --terraform-dir (its image output)")
    error = image_error(image)
    if error:
        raise UsageError(error)
    plan = plan_submit(args, queue, job_definition)
    wandb = tracks(args) or args.wandb_key_ref is not None
    print(f"# dry run: nothing is submitted; queue {queue}, job definition {job_definition}, image {image}", file=out)
    if args.wandb_key_ref is not None:
        print(f"# would register a revision of {job_definition} with secret {WANDB_KEY} from {args.wandb_key_ref}", file=out)
    elif wandb:
        print(f"# --track: the job definition's {WANDB_KEY} secret is not checked in a dry run", file=out)
    if RUN_STORE in plan.environment:
        print(f"# run store {plan.environment[RUN_STORE]} ({RUN_STORE}): in the jobs, not in these docker run lines", file=out)
    for kwargs, runs in zip(plan.submissions, plan.runs):
        print(f"# submit_job {json.dumps(kwargs)}", file=out)
        env = {e["name"]: e["value"] for e in kwargs["containerOverrides"].get("environment", []) if e["name"] != RUN_STORE}
        resources = dict(vcpus=args.vcpus, memory_mib=args.memory_mib, gpus=args.gpus, wandb_key=wandb)
        command = kwargs["containerOverrides"]["command"]
        for index, (env_id, seed) in enumerate(runs):
            child_env = env | {"AWS_BATCH_JOB_ARRAY_INDEX": str(index)} if args.array else env
            label = f"array index {index}: " if args.array else ""
            print(f"# {label}{env_id} seed {seed}", file=out)
            print(shlex.join(docker_run_command(image, command, child_env, **resources)), file=out)
    return 0


# ---------------------------------------------------------------- array children


def array_child_argv(words: list[str], environ: dict[str, str]) -> list[str]:
    """The argument vector an array child runs: `words` plus `--env-id ENV --seed SEED` of run i of the plan in
    `environ` (CLEANRL_ARRAY_ENV_IDS, CLEANRL_ARRAY_SEEDS `START:COUNT`; seed-major, as `plan_runs`), i from
    AWS_BATCH_JOB_ARRAY_INDEX, else from the `:i` suffix of AWS_BATCH_JOB_ID (an array child's id is
    `PARENT:i`). Raises ValueError (one line) when the plan or the index is missing or bad."""
    if not words:
        raise ValueError("no command given")
    try:
        env_ids = json.loads(environ[ARRAY_ENV_IDS])
        start, count = (int(x) for x in environ[ARRAY_SEEDS].split(":"))
    except (KeyError, ValueError) as e:
        raise ValueError(f"no array plan in the environment ({ARRAY_ENV_IDS}, {ARRAY_SEEDS}): {e}") from e
    if not isinstance(env_ids, list) or not env_ids or not all(isinstance(e, str) for e in env_ids) or count < 1:
        raise ValueError(
            f"bad array plan: {ARRAY_ENV_IDS} must be a non-empty JSON list of strings, {ARRAY_SEEDS} START:COUNT"
        )
    index_text = environ.get("AWS_BATCH_JOB_ARRAY_INDEX")
    if index_text is None and ":" in environ.get("AWS_BATCH_JOB_ID", ""):
        index_text = environ["AWS_BATCH_JOB_ID"].rsplit(":", 1)[1]
    if index_text is None:
        raise ValueError("AWS_BATCH_JOB_ARRAY_INDEX is not set (not an array child)")
    runs = plan_runs(shlex.join(words), env_ids, range(start, start + count), "")
    if not index_text.isdigit() or int(index_text) >= len(runs):
        raise ValueError(f"array index {index_text!r} is not one of 0..{len(runs) - 1}")
    return list(runs[int(index_text)].argv)


def run_array_child(words: list[str]) -> None:
    """`run-array-child CMD...`: replaces this process with the array child's run (no shell); one line on
    stderr and exit 2 when it cannot."""
    try:
        argv = array_child_argv(words, dict(os.environ))
    except ValueError as e:
        print(f"{PROG} run-array-child: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"{PROG} run-array-child: {shlex.join(argv)}", file=sys.stderr, flush=True)
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"{PROG} run-array-child: cannot start {argv[0]!r}: {e.strerror or e}", file=sys.stderr)
        sys.exit(127)


# ---------------------------------------------------------------- status, wait, cancel, logs


def describe_jobs(batch, job_ids: list[str]) -> dict[str, dict[str, Any]]:
    """{job id: description} of the jobs that exist among `job_ids` (asked 100 at a time)."""
    found: dict[str, dict[str, Any]] = {}
    for i in range(0, len(job_ids), DESCRIBE_CHUNK):
        for job in batch.describe_jobs(jobs=job_ids[i : i + DESCRIBE_CHUNK]).get("jobs", []):
            found[job["jobId"]] = job
    return found


def flag_value(command: list[str], flag: str) -> str:
    """The word after the last `flag` in `command`, or ""."""
    positions = [i for i, word in enumerate(command) if word == flag]
    return command[positions[-1] + 1] if positions and positions[-1] + 1 < len(command) else ""


def label(target: Target, job: Optional[dict[str, Any]]) -> tuple[str, str, str]:
    """(name, env id, seed) of a job: from the manifest, else from its description's command."""
    command = ((job or {}).get("container") or {}).get("command") or []
    name = target.name or (job or {}).get("jobName", "")
    env_id = target.env_id or flag_value(command, "--env-id")
    seed = str(target.seed) if target.seed is not None else flag_value(command, "--seed")
    if target.children or (job or {}).get("arrayProperties", {}).get("size"):
        env_id, seed = (
            env_id or "(array)",
            seed or f"{(job or {}).get('arrayProperties', {}).get('size', len(target.children))} runs",
        )
    return name, env_id, seed


def millis(value: Optional[int]) -> str:
    """Batch's epoch milliseconds as `YYYY-mm-dd HH:MM:SS` UTC, `-` when absent."""
    if not value:
        return "-"
    return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def child_summary(job: dict[str, Any]) -> str:
    """An array job's children by state (`SUCCEEDED 5, FAILED 1`), states with none left out."""
    summary = (job.get("arrayProperties") or {}).get("statusSummary") or {}
    return ", ".join(f"{state} {count}" for state, count in summary.items() if count)


def log_stream(job: dict[str, Any]) -> Optional[str]:
    """The job's (latest attempt's) CloudWatch log stream name, or None."""
    stream = (job.get("container") or {}).get("logStreamName")
    if not stream:
        for attempt in reversed(job.get("attempts") or []):
            stream = (attempt.get("container") or {}).get("logStreamName")
            if stream:
                break
    return stream or None


def status_rows(targets: list[Target], jobs: dict[str, dict[str, Any]]) -> list[list[str]]:
    """The rows of the status table (see `run_status`), one per target; `NOT FOUND` for an unknown id."""
    rows = []
    for target in targets:
        job = jobs.get(target.job_id)
        name, env_id, seed = label(target, job)
        if job is None:
            rows.append([name or target.job_id, env_id or "-", seed or "-", "NOT FOUND", "-", "-", "-", "-"])
            continue
        reason = job.get("statusReason") or (job.get("container") or {}).get("reason") or ""
        summary = child_summary(job)
        if summary:
            reason = f"children: {summary}" + (f"; {reason}" if reason else "")
        rows.append(
            [
                name,
                env_id or "-",
                seed or "-",
                job.get("status", "?"),
                reason or "-",
                millis(job.get("startedAt")),
                millis(job.get("stoppedAt")),
                str(len(job.get("attempts") or [])),
            ]
        )
    return rows


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows])


STATUS_HEADER = ["JOB NAME", "ENV", "SEED", "STATUS", "REASON", "STARTED (UTC)", "STOPPED (UTC)", "ATTEMPTS"]


def run_status(args: Status, out: Optional[TextIO] = None) -> int:
    """`status`: prints one table row per job (array jobs with their children's state counts). Returns 1 when
    a job id is unknown, else 0."""
    out = out or sys.stdout
    targets = targets_of(args)
    batch, _ = clients(resolve_region(args, outputs_of(args)))
    jobs = describe_jobs(batch, [t.job_id for t in targets])
    print(format_table(STATUS_HEADER, status_rows(targets, jobs)), file=out)
    missing = [t.job_id for t in targets if t.job_id not in jobs]
    if missing:
        print(f"{PROG}: not found: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


def failed_children(batch, parent_id: str) -> list[dict[str, Any]]:
    """Descriptions of an array job's FAILED children (listed with the list_jobs paginator)."""
    pages = batch.get_paginator("list_jobs").paginate(arrayJobId=parent_id, jobStatus="FAILED")
    ids = [summary["jobId"] for page in pages for summary in page.get("jobSummaryList", [])]
    return list(describe_jobs(batch, ids).values())


def failure_line(name: str, env_id: str, seed: str, job: dict[str, Any]) -> str:
    """`NAME (ENV seed SEED): FAILED: REASON (exit N); log stream STREAM`."""
    container = job.get("container") or {}
    reason = job.get("statusReason") or container.get("reason") or "no reason given"
    exit_code = container.get("exitCode")
    line = f"{name} ({env_id} seed {seed}): FAILED: {reason}"
    if exit_code is not None:
        line += f" (exit {exit_code})"
    return line + f"; log stream {log_stream(job) or '(none)'}"


def run_wait(args: Wait, out: Optional[TextIO] = None, clock=time.monotonic, sleep=time.sleep) -> int:
    """`wait`: polls every `--poll-seconds` until every job has ended or `--timeout` seconds have passed,
    printing each state change. Returns 0 when all SUCCEEDED, 1 when any FAILED (each named with its reason and
    log stream) or an id is unknown, 124 on timeout."""
    out = out or sys.stdout
    if not args.poll_seconds > 0 or not args.timeout > 0:
        raise UsageError("--timeout and --poll-seconds must be positive numbers of seconds")
    targets = targets_of(args)
    batch, _ = clients(resolve_region(args, outputs_of(args)))
    start = clock()
    seen: dict[str, str] = {}
    while True:
        jobs = describe_jobs(batch, [t.job_id for t in targets])
        missing = [t.job_id for t in targets if t.job_id not in jobs]
        if missing:
            print(f"{PROG}: not found: {', '.join(missing)}", file=sys.stderr)
            return 1
        for target in targets:
            job = jobs[target.job_id]
            state = job["status"] + (f" ({child_summary(job)})" if child_summary(job) else "")
            if seen.get(target.job_id) != state:
                before = seen.get(target.job_id)
                name, env_id, seed = label(target, job)
                change = f"{before} -> {state}" if before else state
                print(f"[{clock() - start:.0f} s] {name} ({env_id} seed {seed}): {change}", file=out, flush=True)
                seen[target.job_id] = state
        if all(jobs[t.job_id]["status"] in DONE for t in targets):
            break
        if clock() - start + args.poll_seconds > args.timeout:
            waiting = [label(t, jobs[t.job_id])[0] for t in targets if jobs[t.job_id]["status"] not in DONE]
            print(f"{PROG}: timed out after {args.timeout:g} s; not ended: {', '.join(waiting)}", file=sys.stderr)
            return TIMEOUT_EXIT
        sleep(args.poll_seconds)
    failures = []
    for target in targets:
        job = jobs[target.job_id]
        if job["status"] != "FAILED":
            continue
        name, env_id, seed = label(target, job)
        children = failed_children(batch, target.job_id) if (job.get("arrayProperties") or {}).get("size") else []
        by_index = {i: (e, str(s)) for i, e, s in target.children}
        for child in children:
            index = (child.get("arrayProperties") or {}).get("index", child["jobId"].rsplit(":", 1)[-1])
            child_env, child_seed = by_index.get(int(index), ("?", "?")) if str(index).isdigit() else ("?", "?")
            failures.append(failure_line(f"{name}[{index}]", child_env, child_seed, child))
        if not children:
            failures.append(failure_line(name, env_id, seed, job))
    if failures:
        print(f"{len(failures)} failed:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
        return 1
    print("1 job succeeded" if len(targets) == 1 else f"all {len(targets)} jobs succeeded", file=out)
    return 0


def cancel_action(status: str) -> Optional[str]:
    """What `cancel` does to a job in `status`: `cancel_job` while it is queued (SUBMITTED, PENDING, RUNNABLE),
    `terminate_job` once it is STARTING or RUNNING, None when it has ended."""
    if status in QUEUED:
        return "cancel_job"
    if status in RUNNING:
        return "terminate_job"
    return None


def run_cancel(args: Cancel, out: Optional[TextIO] = None) -> int:
    """`cancel`: cancels queued jobs and terminates running ones with `--reason` (an array job: its children
    with it), prints what it did to each. Returns 1 when a job id is unknown, else 0."""
    out = out or sys.stdout
    if not args.reason.strip():
        raise UsageError("--reason must not be empty")
    targets = targets_of(args)
    batch, _ = clients(resolve_region(args, outputs_of(args)))
    jobs = describe_jobs(batch, [t.job_id for t in targets])
    missing = []
    for target in targets:
        job = jobs.get(target.job_id)
        if job is None:
            missing.append(target.job_id)
            continue
        name = label(target, job)[0]
        action = cancel_action(job["status"])
        if action is None:
            print(f"{name}: {job['status']} already, nothing to do", file=out)
            continue
        getattr(batch, action)(jobId=target.job_id, reason=args.reason)
        print(f"{name}: {job['status']}: {'cancelled' if action == 'cancel_job' else 'terminated'} ({action})", file=out)
    if missing:
        print(f"{PROG}: not found: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


def log_lines(logs, group: str, stream: str, tail: int = 0) -> list[str]:
    """The messages of a CloudWatch log stream in order (the filter_log_events paginator); the last `tail`
    of them when `tail` > 0."""
    pages = logs.get_paginator("filter_log_events").paginate(logGroupName=group, logStreamNames=[stream])
    lines: deque[str] = deque(maxlen=tail if tail > 0 else None)
    for page in pages:
        for event in page.get("events", []):
            lines.append(event["message"].rstrip("\n"))
    return list(lines)


def log_group_of(job: dict[str, Any], explicit: Optional[str], outputs: dict[str, Any]) -> str:
    """The log group of a job: `--log-group`, else the job's awslogs configuration, else terraform's
    `log_group_name`, else /aws/batch/job."""
    options = ((job.get("container") or {}).get("logConfiguration") or {}).get("options") or {}
    return explicit or options.get("awslogs-group") or outputs.get("log_group_name") or DEFAULT_LOG_GROUP


def run_logs(args: Logs, out: Optional[TextIO] = None) -> int:
    """`logs`: prints each job's log stream (an array job: each child's), under a `==> name <==` header when
    there are several. Returns 1 when a job is unknown or has no log stream yet, else 0."""
    out = out or sys.stdout
    if args.tail < 0:
        raise UsageError(f"--tail must be at least 0, got {args.tail}")
    targets = targets_of(args)
    outputs = outputs_of(args)
    batch, logs = clients(resolve_region(args, outputs))
    expanded: list[Target] = []
    for target in targets:
        children = target.children
        if not children and target.job_id in (parents := describe_jobs(batch, [target.job_id])):
            size = (parents[target.job_id].get("arrayProperties") or {}).get("size")
            children = [(i, "", None) for i in range(size)] if size else []  # type: ignore[misc]
        if children:
            expanded += [Target(f"{target.job_id}:{i}", f"{target.name or target.job_id}[{i}]", e, s) for i, e, s in children]
        else:
            expanded.append(target)
    jobs = describe_jobs(batch, [t.job_id for t in expanded])
    problems = 0
    for target in expanded:
        job = jobs.get(target.job_id)
        if job is None:
            print(f"{PROG}: job {target.job_id} not found", file=sys.stderr)
            problems += 1
            continue
        name, env_id, seed = label(target, job)
        stream = log_stream(job)
        if stream is None:
            when = "" if job.get("status") in DONE else " yet"
            print(f"{PROG}: {name}: no log stream{when} ({job.get('status')})", file=sys.stderr)
            problems += 1
            continue
        group = log_group_of(job, args.log_group, outputs)
        if len(expanded) > 1:
            print(f"==> {name} ({env_id} seed {seed}) {group} {stream} <==", file=out)
        try:
            for line in log_lines(logs, group, stream, args.tail):
                print(line, file=out)
        except Exception as e:
            if not aws_error(e):
                raise
            print(f"{PROG}: {name}: cannot read {group} {stream}: {one_line(e)}", file=sys.stderr)
            problems += 1  # the other jobs' logs are still printed
    return 1 if problems else 0


# ---------------------------------------------------------------- entry point


def aws_error(e: BaseException) -> bool:
    """Whether `e` is an error of boto3/botocore (client errors, no credentials, endpoint unreachable)."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return False
    return isinstance(e, (BotoCoreError, ClientError))


def one_line(e: BaseException) -> str:
    """`e`'s message on one line."""
    return " ".join(str(e).split()) or type(e).__name__


COMMANDS = {"submit": Submit, "status": Status, "wait": Wait, "cancel": Cancel, "logs": Logs}
RUNNERS = {Submit: run_submit, Status: run_status, Wait: run_wait, Cancel: run_cancel, Logs: run_logs}


def main(argv: Optional[list[str]] = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run-array-child"]:
        run_array_child(argv[1:])
        return
    args = tyro.extras.subcommand_cli_from_dict(COMMANDS, args=argv, prog=f"python -m cleanrl_utils.{PROG}")
    try:
        code = RUNNERS[type(args)](args)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(2)
    except SubmitError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        sys.exit(INTERRUPT_EXIT)
    except Exception as e:
        if not aws_error(e):
            raise
        print(f"{PROG}: AWS error: {one_line(e)}", file=sys.stderr)
        sys.exit(1)
    sys.exit(code)


if __name__ == "__main__":
    main()
