"""Runs one training command for every env × seed, in a local pool of worker processes.

    python -m cleanrl_utils.benchmark --env-ids CartPole-v1 Acrobot-v1 \\
        --command "python cleanrl/ppo.py --no-cuda" --num-seeds 3 --start-seed 1 --workers 2

Each run is the command split with shell-word rules (`shlex.split`) plus `--env-id ENV --seed SEED`,
started without a shell, its stdout and stderr in `{log_dir}/{env}__{seed}.log`. Runs go seed by seed,
every env within a seed, as CleanRL's runner orders them. A run that fails does not stop the others;
at the end a summary names each failed run with its exit code, its log and the log's last lines, and
the runner exits 1 if any failed. `--workers 0` prints the commands and runs nothing. `--auto-tag` passes `WANDB_TAGS` (the
output of `git describe --tags --always --dirty` in the current folder, no network) to the runs.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class Args:
    env_ids: list[str] = field(default_factory=lambda: ["CartPole-v1"])
    """the ids of the environments to run (each gets every seed)"""
    command: str = "python cleanrl/ppo.py"
    """the command to run; `--env-id` and `--seed` are appended (split with shell-word rules, no shell)"""
    num_seeds: int = 3
    """the number of seeds per env"""
    start_seed: int = 1
    """the first seed; the runs use start_seed ... start_seed + num_seeds - 1"""
    workers: int = 0
    """how many runs at a time; 0 prints the commands instead of running them"""
    auto_tag: bool = True
    """set WANDB_TAGS for the runs from `git describe` of the current folder"""
    log_dir: str = "benchmark_logs"
    """where each run's output goes, one file per run"""
    progress_interval: float = 60.0
    """seconds between progress lines while no run ends"""


@dataclass(frozen=True)
class Run:
    """One env × seed: the argument vector to execute and the file its output goes to."""

    env_id: str
    seed: int
    argv: tuple[str, ...]
    log_path: str


def plan_runs(command: str, env_ids: list[str], seeds: range, log_dir: str) -> list[Run]:
    """Every env × seed run of `command`, seed-major. Raises ValueError if `command` does not split
    into words (e.g. an unclosed quote) or is empty."""
    words = shlex.split(command)
    if not words:
        raise ValueError("the command is empty")
    runs = []
    for seed in seeds:
        for env_id in env_ids:
            log_path = os.path.join(log_dir, f"{env_id.replace('/', '-')}__{seed}.log")
            runs.append(Run(env_id, seed, (*words, "--env-id", env_id, "--seed", str(seed)), log_path))
    return runs


def git_tag(cwd: str = ".") -> Optional[str]:
    """`git describe --tags --always --dirty` of `cwd` (a tag, or a short commit hash when there is
    no tag), or None outside a git checkout or without git."""
    try:
        result = subprocess.run(
            ["git", "describe", "--tags", "--always", "--dirty"], cwd=cwd, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    return result.stdout.strip() or None


def run_one(run: Run, env: dict[str, str], running: set[Run]) -> int:
    """Executes one run with its output in its log file, listed in `running` meanwhile; returns the exit
    code (127 when the program cannot be started)."""
    running.add(run)
    try:
        with open(run.log_path, "w") as log:
            try:
                process = subprocess.Popen(run.argv, stdout=log, stderr=subprocess.STDOUT, env=env)
            except OSError as e:
                log.write(f"cannot start {run.argv[0]!r}: {e}\n")
                return 127
            try:
                return process.wait()
            except BaseException:  # the runner is stopping (Ctrl-C): do not leave the run behind
                process.terminate()
                process.wait()
                raise
    finally:
        running.discard(run)


def run_pool(runs: list[Run], workers: int, env: dict[str, str], progress_interval: float = 60.0, out=sys.stdout):
    """Runs `runs` at most `workers` at a time. Prints a line as each ends, and every `progress_interval`
    seconds without one, which runs are going. Returns (run, exit code) for every run that failed, in
    the order they were planned."""
    failed: dict[Run, int] = {}
    running: set[Run] = set()
    start = time.time()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run_one, run, env, running): run for run in runs}
        pending, done = set(futures), 0
        while pending:
            finished, pending = wait(pending, timeout=progress_interval, return_when=FIRST_COMPLETED)
            elapsed = time.time() - start
            for future in finished:
                run, returncode = futures[future], future.result()
                done += 1
                if returncode != 0:
                    failed[run] = returncode
                state = "ok" if returncode == 0 else f"FAILED (exit {returncode})"
                print(f"[{done}/{len(runs)}, {elapsed:.0f} s] {run.env_id} seed {run.seed}: {state}", file=out, flush=True)
            if not finished:
                going = ", ".join(f"{r.env_id} seed {r.seed}" for r in runs if r in running)
                print(f"[{done}/{len(runs)}, {elapsed:.0f} s] running: {going}", file=out, flush=True)
    return [(run, failed[run]) for run in runs if run in failed]


def validation_error(args: Args) -> Optional[str]:
    """The first problem with the command-line values as one line, or None."""
    if not args.env_ids:
        return "--env-ids must name at least one environment"
    if args.num_seeds < 1:
        return f"--num-seeds must be at least 1, got {args.num_seeds}"
    if not args.progress_interval > 0:
        return f"--progress-interval must be a positive number of seconds, got {args.progress_interval}"
    if args.workers < 0:
        return f"--workers must be at least 0 (0 prints the commands), got {args.workers}"
    try:
        words = shlex.split(args.command)
    except ValueError as e:
        return f"--command {args.command!r} does not split into words ({e})"
    if not words:
        return "--command is empty"
    if args.workers > 0 and shutil.which(words[0]) is None:
        return f"--command: cannot find the program {words[0]!r}"
    return None


def main(args: Args) -> None:
    error = validation_error(args)
    if error is not None:
        print(f"benchmark: {error}", file=sys.stderr)
        sys.exit(2)
    seeds = range(args.start_seed, args.start_seed + args.num_seeds)
    runs = plan_runs(args.command, args.env_ids, seeds, args.log_dir)
    env = dict(os.environ)
    if args.auto_tag:
        tag = git_tag()
        if tag is not None:
            env["WANDB_TAGS"] = tag
    if args.workers == 0:
        for run in runs:
            print(shlex.join(run.argv))
        return
    os.makedirs(args.log_dir, exist_ok=True)
    print(f"{len(runs)} runs, {args.workers} at a time; logs in {args.log_dir}/", flush=True)
    failed = run_pool(runs, args.workers, env, args.progress_interval)
    if failed:
        print(f"{len(failed)} of {len(runs)} runs failed:", file=sys.stderr)
        for run, returncode in failed:
            print(f"  {run.env_id} seed {run.seed}: exit {returncode}, log {run.log_path}; it ends with:", file=sys.stderr)
            with open(run.log_path, errors="replace") as log:
                for line in log.read().splitlines()[-3:]:
                    print(f"    {line}", file=sys.stderr)
        sys.exit(1)
    print(f"all {len(runs)} runs finished")


if __name__ == "__main__":
    import tyro

    main(tyro.cli(Args))
