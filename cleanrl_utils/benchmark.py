"""Runs one training command for every env × seed, in a local pool of worker processes or as a Slurm job array.

    python -m cleanrl_utils.benchmark --env-ids CartPole-v1 Acrobot-v1 \\
        --command "python cleanrl/ppo.py --no-cuda" --num-seeds 3 --start-seed 1 --workers 2

Each run is the command split with shell-word rules (`shlex.split`) plus `--env-id ENV --seed SEED`,
started without a shell, its stdout and stderr in `{log_dir}/{env}__{seed}.log` (`log_file_name`: a `/` in
the env id becomes `-`, so `ALE/Breakout-v5` seed 1 writes `ALE-Breakout-v5__1.log`). Runs go seed by seed,
every env within a seed, as CleanRL's runner orders them. A run that fails does not stop the others;
at the end a summary names each failed run with its exit code, its log and the last lines of the log
that say what went wrong (`log_excerpt`: box-drawing decoration skipped, a final tyro error box reduced to
its message), and the runner exits 1 if any failed. Each run starts in a session of its own, stdin from
/dev/null. On SIGINT, SIGTERM or SIGHUP the runner starts no more runs, stops the running ones and what
they started (SIGTERM to each one's process group, SIGKILL after `STOP_GRACE` seconds to what is left),
prints what finished and what was stopped, with the logs, and exits 128 + the signal (130, 143, 129).
`--workers 0` prints the commands and runs nothing.
`--auto-tag` passes `WANDB_TAGS` (the output of `git describe --tags --always --dirty` in the current
folder, no network) to the runs.

Threads: by default each run computes on one thread (`one_thread_env`): `OMP_NUM_THREADS=1` and
`MKL_NUM_THREADS=1` for torch, XLA's single-thread CPU flags in `XLA_FLAGS` for JAX, and each running slot
of the pool pinned to one CPU of those the runner may use (slot k on CPU k mod their count), because JAX's
CPU runtime sizes its thread pool from the CPU affinity and ignores the variables. Runs that each take
every core fight over them: two `ppo.py` runs side by side took 5.5x the wall time that they take with one
thread each (benchmark/results/runner_threads.md). A variable you set yourself is kept, and then the runner
pins nothing; `--no-one-thread` leaves the libraries' defaults and pins nothing.

Slurm: `--slurm-template-path benchmark/slurm_template.sh` renders that job-array template and submits it
with `sbatch --parsable` (from the current folder, which is where the runs work; `sbatch` passes the
environment, `WANDB_TAGS` included, on to them), prints the job id and each array index's env and seed,
and keeps the rendered script as `{log_dir}/slurm_job.sh`. Array task i is run i of the same seed-major
plan as the local pool; it writes `{log_dir}/{env}__{seed}.log`, and Slurm's own output for it goes to
`{log_dir}/slurm-%A_%a.out` (job id, array index). `--workers W` is the array's concurrency limit
(`--array=0-{N-1}%W`); with `--workers 0` the script is printed, without a limit, and nothing is
submitted or created. Resources of each array task:
  - CPUs: `--slurm-total-cpus C` is the CPU budget of all tasks that run at once, so each task gets
    C // W CPUs (C // N with `--workers 0`); 0 (the default) gives each task 1 CPU;
  - GPUs: `--slurm-gpus-per-task G` (default 0: no GPU line);
  - `--slurm-ntasks T` (default 1) tasks per array task, all started by `srun`;
  - `--slurm-nodes K` (default 0: no node line, Slurm decides).
The program in `--command` is looked up on the compute node, not here.

Template placeholders, each written `{{name}}`; a line that holds something and renders to nothing is
dropped (so `#SBATCH` lines stay in one block):
  - `{{array}}`: `0-{N-1}%{W}` (`0-{N-1}` with `--workers 0`); `{{num_runs}}`: N; `{{workers}}`: W;
  - `{{cpus_per_task}}`, `{{gpus_per_task}}`, `{{ntasks}}`, `{{nodes}}`: the numbers above;
  - `{{gpus_per_task_line}}`, `{{nodes_line}}`: the whole `#SBATCH --gpus-per-task=G` /
    `#SBATCH --nodes=K` line, or nothing when the number is 0;
  - `{{slurm_output}}`: the double-quoted absolute path pattern `"{log_dir}/slurm-%A_%a.out"` (so the
    log dir may not hold a double quote, backslash, `%` or line break, which sbatch would read);
  - `{{command}}`, `{{env_ids}}`, `{{seeds}}`, `{{log_paths}}`: bash array words, each `shlex.quote`d
    (`COMMAND=({{command}})`; `ENV_IDS`, `SEEDS`, `LOGS` hold one word per array index, the logs as
    absolute paths), for the script to select with `"${ENV_IDS[$SLURM_ARRAY_TASK_ID]}"`; nothing
    from the command line is put into the script other than as such a quoted word or a number.

CleanRL's templates (e.g. its `benchmark/cleanrl_1gpu.slurm_template`) are rendered as CleanRL renders them:
a template that uses `{{len_seeds}}` or `{{cpus_per_gpu}}`, writes `{{env_ids}}` or `{{seeds}}` other than
inside `(...)`, or has `{{nodes}}` alone on a line is one (`is_cleanrl_template`), and in it the array index runs env-major
(index i is env i // num_seeds, seed i % num_seeds, as its `${env_ids[$SLURM_ARRAY_TASK_ID / {{len_seeds}}]}`
reads) and
  - `{{env_ids}}`, `{{seeds}}`: a bash array, parentheses included, of the distinct env ids / seeds
    (`(CartPole-v1 Acrobot-v1)`, `(1 2 3)`); `{{len_seeds}}`: the number of seeds;
  - `{{command}}`: the command's words, each quoted; `{{nodes}}`: the whole `#SBATCH --nodes=K` line, or nothing;
  - `{{cpus_per_gpu}}`: ceil(`--slurm-total-cpus` / (GPUs per task x `--slurm-ntasks`)), CleanRL's formula, so
    there `--slurm-total-cpus` is the CPUs of one array task;
  - `--slurm-gpus-per-task` and `--slurm-total-cpus` default to CleanRL's 1 and 50.
Before submitting, the folder of each `#SBATCH --output`/`--error` path is created (CleanRL's templates
write to `slurm/logs/`; sbatch does not create it, and a job whose output folder is missing fails unseen).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
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
    one_thread: bool = True
    """one compute thread per run (OMP_NUM_THREADS=1 and the JAX equivalent, each slot pinned to a CPU) unless
    you set OMP_NUM_THREADS yourself; --no-one-thread leaves torch's and JAX's defaults"""
    log_dir: str = "benchmark_logs"
    """where each run's output goes, one file per run"""
    progress_interval: float = 60.0
    """seconds between progress lines while no run ends"""
    slurm_template_path: Optional[str] = None
    """a Slurm job-array template (e.g. benchmark/slurm_template.sh): submit the runs with sbatch instead of
    running them here (with --workers 0: print the rendered script)"""
    slurm_gpus_per_task: Optional[int] = None
    """GPUs per Slurm array task (default 0: no GPU line; 1 with a CleanRL template)"""
    slurm_total_cpus: Optional[int] = None
    """CPUs of all Slurm array tasks that run at once, split evenly among --workers of them (default 0: 1 CPU
    per task); with a CleanRL template, the CPUs of one array task (default 50)"""
    slurm_ntasks: int = 1
    """Slurm tasks per array task (copies of the command that srun starts)"""
    slurm_nodes: int = 0
    """nodes per Slurm array task (0: no node line, Slurm decides)"""


@dataclass(frozen=True)
class Run:
    """One env × seed: the argument vector to execute and the file its output goes to."""

    env_id: str
    seed: int
    argv: tuple[str, ...]
    log_path: str


def log_file_name(env_id: str, seed: int) -> str:
    """The name of a run's log file: `{env_id}__{seed}.log`, a `/` in the env id written `-`
    (`ALE/Breakout-v5` seed 1 → `ALE-Breakout-v5__1.log`)."""
    return f"{env_id.replace('/', '-')}__{seed}.log"


def plan_runs(command: str, env_ids: list[str], seeds: range, log_dir: str) -> list[Run]:
    """Every env × seed run of `command`, seed-major. Raises ValueError if `command` does not split
    into words (e.g. an unclosed quote) or is empty."""
    words = shlex.split(command)
    if not words:
        raise ValueError("the command is empty")
    runs = []
    for seed in seeds:
        for env_id in env_ids:
            log_path = os.path.join(log_dir, log_file_name(env_id, seed))
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


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def one_thread_env(env: dict[str, str]) -> tuple[dict[str, str], bool]:
    """`env` for runs that compute on one thread each, and whether the runner should also pin each run to one
    CPU. OMP_NUM_THREADS and MKL_NUM_THREADS (torch's intra-op threads) become 1 and XLA_FLAGS gains
    `XLA_ONE_THREAD`, where `env` does not set them. When `env` already sets OMP_NUM_THREADS the user chose the
    thread count: `env` is returned as it is, without pinning."""
    if "OMP_NUM_THREADS" in env:
        return dict(env), False
    env = dict(env) | {name: env.get(name, "1") for name in THREAD_VARIABLES}
    if "xla_cpu_multi_thread_eigen" not in env.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {XLA_ONE_THREAD}".strip()
    return env, True


def start_run(run: Run, env: dict[str, str], cpu: Optional[int] = None) -> Optional[subprocess.Popen]:
    """Starts one run with its output in its log file and no stdin, as the leader of a new session (so that
    stopping it can reach the processes it starts, and a terminal's Ctrl-C reaches only the runner, which
    stops the runs itself), pinned to CPU `cpu` if one is given. Returns None when the program cannot be
    started, after writing why to the log."""
    pin = None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))
    with open(run.log_path, "w") as log:
        try:
            return subprocess.Popen(
                run.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=pin,
            )
        except OSError as e:
            log.write(f"cannot start {run.argv[0]!r}: {e}\n")
            return None


def run_one(run: Run, env: dict[str, str], grace: float = 5.0) -> int:
    """Runs one run to its end (its output in its log file, as `start_run`) and returns its exit code, 127 when
    the program cannot be started. If waiting is interrupted (Ctrl-C raises KeyboardInterrupt in the caller),
    the run and everything it started are stopped (`stop_processes`) before the exception goes on. Used by
    callers that run one thing at a time, such as the tuner."""
    process = start_run(run, env)
    if process is None:
        return 127
    try:
        return process.wait()
    except BaseException:
        stop_processes([process], grace)
        raise


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    """Sends `signum` to the process group that `process` leads, if any of it is left."""
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):  # gone (PermissionError: a zombie leader on some systems)
        pass


def stop_processes(processes: list[subprocess.Popen], grace: float) -> None:
    """Stops `processes` and everything they started: SIGTERM to each one's process group, then, once all
    have ended or after `grace` seconds, SIGKILL to the groups, for what is left of them; waits for the
    processes."""
    for process in processes:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    for process in processes:
        _signal_group(process, signal.SIGKILL)
    for process in processes:
        process.wait()


BOX_DRAWING = "".join(map(chr, range(0x2500, 0x2580)))  # ─ │ ╭ ╮ ╰ ╯ ... (rich's panels, tyro's error boxes)


def _unboxed(line: str) -> str:
    """`line` without trailing spaces and, when it starts or ends with box drawing, without the borders and
    spaces at its ends (empty for a border or a rule)."""
    line = line.rstrip()
    if line.lstrip()[:1] in BOX_DRAWING or line[-1:] in BOX_DRAWING:  # "" is in every string
        return line.strip(BOX_DRAWING + " \t\f\v")
    return line


def log_excerpt(text: str, count: int = 3) -> list[str]:
    """At most `count` lines of a failed run's log that say what went wrong, for the summary: its last lines
    that hold more than box-drawing characters and spaces, those borders stripped. When the log ends with
    a box (tyro's argument errors: a titled box whose message comes first, then a rule, suggestions and
    a `--help` hint) the box's title and message instead, its lines before the first rule inside it. The
    resource report of GNU `time -v` (which the benchmark scripts wrap runs in) is not part of what went wrong."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Command exited with non-zero status") or line.strip().startswith("Command being timed:"):
            lines = lines[:i]
            break
    while lines and not lines[-1].strip():
        lines.pop()
    tops = [i for i, line in enumerate(lines) if line.lstrip().startswith("╭")]
    if lines and lines[-1].lstrip().startswith("╰") and tops:
        message = []
        for line in lines[tops[-1] : -1]:
            inner = _unboxed(line)
            if inner:
                message.append(inner)
            elif message:  # the rule after the message
                break
        if len(message) > 1 and message[1].startswith(message[0]):  # "Unrecognized options: --x" under its title
            message = message[1:]
        if message:
            return message[:count]
    return [inner for inner in map(_unboxed, lines) if inner][-count:]


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_GRACE = 5.0
"""seconds that the runs get to end after SIGTERM when the runner is stopped, before SIGKILL"""


def plural(count: int, noun: str) -> str:
    """`1 run`, `2 runs`."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@dataclass
class PoolResult:
    """How a pool of runs ended: the exit code of each run that ended (negative: killed by that signal), in
    the order they ended; the runs stopped because the runner received `signal`, in the planned order (both
    empty or None when every run ended on its own); how many runs were not started."""

    returncodes: dict[Run, int]
    stopped: list[Run] = field(default_factory=list)
    signal: Optional[int] = None
    not_started: int = 0

    def failed(self, runs: list[Run]) -> list[tuple[Run, int]]:
        """(run, exit code) of every run that ended and failed, in the order of `runs`."""
        return [(run, self.returncodes[run]) for run in runs if self.returncodes.get(run, 0) != 0]


def run_pool(
    runs: list[Run],
    workers: int,
    env: dict[str, str],
    progress_interval: float = 60.0,
    out=sys.stdout,
    grace: float = STOP_GRACE,
    poll_interval: float = 0.1,
    pin: bool = False,
) -> PoolResult:
    """Runs `runs` at most `workers` at a time, in their order. Prints a line as each ends, and every
    `progress_interval` seconds without one, which runs are going. With `pin`, the run in slot k (0 ...
    workers - 1) is pinned to the k-th CPU (mod their count) of those this process may use. On SIGINT,
    SIGTERM or SIGHUP (those not ignored when it starts; caught only in the main thread) it starts no more
    runs and stops the running ones with `stop_processes`, and returns."""
    returncodes: dict[Run, int] = {}
    running: dict[Run, subprocess.Popen] = {}
    slots: dict[Run, int] = {}
    cpus = sorted(os.sched_getaffinity(0))
    received: list[int] = []
    start = last_line = time.monotonic()

    def ended(run: Run, returncode: int) -> None:
        nonlocal last_line
        returncodes[run] = returncode
        last_line = time.monotonic()
        state = "ok" if returncode == 0 else f"FAILED (exit {returncode})"
        print(
            f"[{len(returncodes)}/{len(runs)}, {last_line - start:.0f} s] {run.env_id} seed {run.seed}: {state}",
            file=out,
            flush=True,
        )

    def reap() -> None:
        for run, process in list(running.items()):
            returncode = process.poll()
            if returncode is not None:
                del running[run], slots[run]
                ended(run, returncode)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:  # e.g. SIGHUP under nohup stays ignored
                previous[signum] = signal.signal(signum, lambda signum, frame: received.append(signum))
    try:
        next_run = 0
        while not received and (next_run < len(runs) or running):
            reap()
            while not received and next_run < len(runs) and len(running) < workers:
                run = runs[next_run]
                next_run += 1
                slot = min(set(range(workers)) - set(slots.values()))
                process = start_run(run, env, cpus[slot % len(cpus)] if pin else None)
                if process is None:
                    ended(run, 127)
                else:
                    running[run], slots[run] = process, slot
            if time.monotonic() - last_line >= progress_interval:
                last_line = time.monotonic()
                going = ", ".join(f"{r.env_id} seed {r.seed}" for r in running)
                print(f"[{len(returncodes)}/{len(runs)}, {last_line - start:.0f} s] running: {going}", file=out, flush=True)
            if running:
                time.sleep(poll_interval)
        if not received:
            return PoolResult(returncodes)
        reap()  # the runs that ended by themselves meanwhile
        stopped = list(running)
        stop_processes(list(running.values()), grace)
        return PoolResult(returncodes, stopped, received[0], len(runs) - next_run)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


PLACEHOLDER = re.compile(r"\{\{(\w*)\}\}")
CLEANRL_PLACEHOLDERS = frozenset({"len_seeds", "cpus_per_gpu"})  # only CleanRL's templates have these
SLURM_PLACEHOLDERS = frozenset(
    {"array", "num_runs", "workers", "cpus_per_task", "gpus_per_task", "ntasks", "nodes", "gpus_per_task_line"}
    | {"nodes_line", "slurm_output", "command", "env_ids", "seeds", "log_paths"}
    | CLEANRL_PLACEHOLDERS
)
CLEANRL_DEFAULTS = {"gpus_per_task": 1, "total_cpus": 50}  # CleanRL's --slurm-gpus-per-task, --slurm-total-cpus
OUR_DEFAULTS = {"gpus_per_task": 0, "total_cpus": 0}  # no GPU line; 1 CPU per task
SLURM_OUTPUT_UNSAFE = '"\\%\n\r'  # characters that sbatch would read in a double-quoted #SBATCH value


def unknown_placeholders(template: str) -> list[str]:
    """The `{{name}}` placeholders in `template` that the renderer does not know, in order of appearance."""
    names = PLACEHOLDER.findall(template)
    return [name for i, name in enumerate(names) if name not in SLURM_PLACEHOLDERS and name not in names[:i]]


def is_cleanrl_template(template: str) -> bool:
    """Whether `template` is written for CleanRL's runner: it uses `{{len_seeds}}` or `{{cpus_per_gpu}}`, has
    `{{env_ids}}` or `{{seeds}}` outside bash-array parentheses (CleanRL's render brings its own), or a line
    that is `{{nodes}}` alone (CleanRL's whole `#SBATCH --nodes` line)."""
    return bool(
        CLEANRL_PLACEHOLDERS & set(PLACEHOLDER.findall(template))
        or re.search(r"(?<!\()\{\{(env_ids|seeds)\}\}", template)
        or re.search(r"^\s*\{\{nodes\}\}\s*$", template, re.MULTILINE)
    )


def env_major(runs: list[Run]) -> list[Run]:
    """`runs` ordered as a CleanRL template's array indexes them: env by env (in first-seen order), each env's
    seeds in order."""
    envs = list(dict.fromkeys(run.env_id for run in runs))
    return sorted(runs, key=lambda run: (envs.index(run.env_id), run.seed))


def slurm_cpus_per_gpu(total_cpus: int, gpus_per_task: int, ntasks: int) -> int:
    """CleanRL's `{{cpus_per_gpu}}`: ceil(total_cpus / (gpus_per_task x ntasks)). Raises ValueError without GPUs."""
    if gpus_per_task < 1:
        raise ValueError(
            "the template's {{cpus_per_gpu}} needs GPUs: give --slurm-gpus-per-task 1 or more, or for CPU-only "
            "tasks write #SBATCH --cpus-per-task={{cpus_per_task}} in its place"
        )
    return max(1, math.ceil(total_cpus / (gpus_per_task * ntasks)))


def slurm_output_dirs(script: str) -> list[str]:
    """The folders of the `#SBATCH --output`/`--error` (`-o`/`-e`) paths in a rendered script that hold no `%`
    pattern, to create before sbatch (which does not create them)."""
    dirs = []
    for match in re.finditer(r"^#SBATCH\s+(?:--output=|--error=|-o\s*|-e\s*)(\S+)", script, re.MULTILINE):
        folder = os.path.dirname(match.group(1).strip("\"'"))
        if folder and "%" not in folder:
            dirs.append(folder)
    return dirs


def slurm_cpus_per_task(total_cpus: int, workers: int, num_runs: int) -> int:
    """CPUs per array task: the `total_cpus` budget shared by the tasks that run at once (`workers`, or all
    `num_runs` when `workers` is 0), rounded down; 1 when `total_cpus` is 0. Raises ValueError when the
    budget gives a task no CPU."""
    if total_cpus == 0:
        return 1
    at_once = workers if workers > 0 else num_runs
    if total_cpus < at_once:
        raise ValueError(f"--slurm-total-cpus {total_cpus} leaves no CPU for each of {at_once} array tasks at once")
    return total_cpus // at_once


def render_slurm_script(
    template: str,
    command_words: list[str],
    runs: list[Run],
    workers: int,
    cpus_per_task: int,
    gpus_per_task: int = 0,
    ntasks: int = 1,
    nodes: int = 0,
    log_dir: str = "benchmark_logs",
    total_cpus: int = 0,
) -> str:
    """`template` with its `{{...}}` placeholders filled (the module docstring lists them) for a job array
    whose index i is `runs[i]` (in a CleanRL template, `env_major(runs)[i]`); a non-empty template line that
    renders to nothing is dropped. Log paths are made absolute against the current folder. `total_cpus` is
    used only by CleanRL's `{{cpus_per_gpu}}`. Raises ValueError for an unknown placeholder, a `log_dir` that
    holds a character sbatch would read in `{{slurm_output}}`, or `{{cpus_per_gpu}}` without GPUs."""
    unknown = unknown_placeholders(template)
    if unknown:
        raise ValueError(f"unknown placeholder {{{{{unknown[0]}}}}} (known: {', '.join(sorted(SLURM_PLACEHOLDERS))})")
    log_dir = os.path.abspath(log_dir)
    if any(c in log_dir for c in SLURM_OUTPUT_UNSAFE):
        raise ValueError(f"the log dir {log_dir!r} holds a double quote, backslash, % or line break")

    def words(items) -> str:
        return " ".join(shlex.quote(str(item)) for item in items)

    last = len(runs) - 1
    values = {
        "array": f"0-{last}%{workers}" if workers > 0 else f"0-{last}",
        "num_runs": str(len(runs)),
        "workers": str(workers),
        "cpus_per_task": str(cpus_per_task),
        "gpus_per_task": str(gpus_per_task),
        "ntasks": str(ntasks),
        "nodes": str(nodes),
        "gpus_per_task_line": f"#SBATCH --gpus-per-task={gpus_per_task}" if gpus_per_task > 0 else "",
        "nodes_line": f"#SBATCH --nodes={nodes}" if nodes > 0 else "",
        "slurm_output": f'"{os.path.join(log_dir, "slurm-%A_%a.out")}"',
        "command": words(command_words),
        "env_ids": words(run.env_id for run in runs),
        "seeds": words(run.seed for run in runs),
        "log_paths": words(os.path.abspath(run.log_path) for run in runs),
    }
    if is_cleanrl_template(template):
        seeds = list(dict.fromkeys(run.seed for run in runs))
        values |= {
            "env_ids": f"({words(dict.fromkeys(run.env_id for run in runs))})",
            "seeds": f"({words(seeds)})",
            "len_seeds": str(len(seeds)),
            "nodes": values["nodes_line"],
        }
        if "{{cpus_per_gpu}}" in template:
            values["cpus_per_gpu"] = str(slurm_cpus_per_gpu(total_cpus, gpus_per_task, ntasks))
    lines = []
    for line in template.splitlines():
        rendered = PLACEHOLDER.sub(lambda match: values[match.group(1)], line)
        if rendered.strip() or not line.strip():
            lines.append(rendered)
    return "\n".join(lines) + "\n"


def submit_slurm(script: str, script_path: str, env: dict[str, str]) -> str:
    """Writes `script` to `script_path` and submits it with `sbatch --parsable` (no shell) in the current
    folder with environment `env`; returns the job id. Raises RuntimeError with sbatch's last error line
    when it fails or does not answer within 120 s."""
    with open(script_path, "w") as f:
        f.write(script)
    try:
        result = subprocess.run(["sbatch", "--parsable", script_path], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"sbatch failed: {e}") from e
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"sbatch failed (exit {result.returncode}): {last}")
    job_id = result.stdout.strip().split(";")[0]
    if not job_id:
        raise RuntimeError("sbatch printed no job id")
    return job_id


def env_ids_error(env_ids: list[str]) -> Optional[str]:
    """The first problem with the env ids as one line, or None: none given, an empty one, or two whose runs
    would write the same log file (the same id twice, or ids that differ only in `/` against `-`)."""
    if not env_ids:
        return "--env-ids must name at least one environment"
    seen: dict[str, str] = {}
    for env_id in env_ids:
        if not env_id.strip():
            return f"--env-ids: an env id is empty ({env_id!r})"
        name = log_file_name(env_id, 0)
        if name in seen:
            if seen[name] == env_id:
                return f"--env-ids names {env_id!r} twice (its runs would share one log file)"
            return f"--env-ids {seen[name]!r} and {env_id!r} would share log files ({name.replace('__0.log', '__{seed}.log')})"
        seen[name] = env_id
    return None


def log_dir_error(log_dir: str) -> Optional[str]:
    """Creates `log_dir` (and its parents) and writes a scratch file in it; what went wrong as one line, or
    None when the runs can write their logs there."""
    if os.path.exists(log_dir) and not os.path.isdir(log_dir):
        return f"--log-dir {log_dir!r} is a file, not a folder"
    try:
        os.makedirs(log_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=log_dir):
            pass
    except OSError as e:
        return f"--log-dir {log_dir!r}: cannot create it or write in it ({e.strerror or e})"
    return None


def validation_error(args: Args) -> Optional[str]:
    """The first problem with the command-line values as one line, or None. When the runs will write logs
    (`--workers` above 0), the last check creates the log dir, so that one that cannot be made or written
    is refused before anything runs."""
    error = env_ids_error(args.env_ids)
    if error is not None:
        return error
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
    for flag, value, least in [
        ("--slurm-gpus-per-task", args.slurm_gpus_per_task or 0, 0),
        ("--slurm-total-cpus", args.slurm_total_cpus or 0, 0),
        ("--slurm-ntasks", args.slurm_ntasks, 1),
        ("--slurm-nodes", args.slurm_nodes, 0),
    ]:
        if value < least:
            return f"{flag} must be at least {least}, got {value}"
    if args.slurm_template_path is None:
        if args.workers > 0 and shutil.which(words[0]) is None:
            return f"--command: cannot find the program {words[0]!r}"
        return log_dir_error(args.log_dir) if args.workers > 0 else None
    path = args.slurm_template_path
    try:
        with open(path) as f:
            template = f.read()
    except OSError as e:
        return f"--slurm-template-path {path!r}: cannot read it ({e.strerror or e})"
    unknown = unknown_placeholders(template)
    if unknown:
        return f"--slurm-template-path {path!r}: unknown placeholder {{{{{unknown[0]}}}}}"
    log_dir = os.path.abspath(args.log_dir)
    if any(c in log_dir for c in SLURM_OUTPUT_UNSAFE):
        return f"--log-dir {log_dir!r}: Slurm cannot take a double quote, backslash, % or line break in it"
    gpus, total_cpus = slurm_resources(args, template)
    try:
        if "{{cpus_per_task}}" in template:
            slurm_cpus_per_task(total_cpus, args.workers, len(args.env_ids) * args.num_seeds)
        if "{{cpus_per_gpu}}" in template:
            slurm_cpus_per_gpu(total_cpus, gpus, args.slurm_ntasks)
    except ValueError as e:
        return str(e)
    if args.workers > 0 and shutil.which("sbatch") is None:
        return "--slurm-template-path: cannot find sbatch on PATH (--workers 0 prints the script instead)"
    return log_dir_error(args.log_dir) if args.workers > 0 else None


def slurm_resources(args: Args, template: str) -> tuple[int, int]:
    """(GPUs per task, total CPUs) of the command line, unset ones at the template's kind's defaults."""
    defaults = CLEANRL_DEFAULTS if is_cleanrl_template(template) else OUR_DEFAULTS
    gpus, total = args.slurm_gpus_per_task, args.slurm_total_cpus
    return (defaults["gpus_per_task"] if gpus is None else gpus), (defaults["total_cpus"] if total is None else total)


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
    if args.slurm_template_path is not None:
        main_slurm(args, runs, env)
        return
    if args.workers == 0:
        for run in runs:
            print(shlex.join(run.argv))
        return
    pin = False
    threads = "the libraries' default threads"
    if args.one_thread:
        env, pin = one_thread_env(env)
        threads = "one thread each" if pin else f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']} as you set it"
        cpus = len(os.sched_getaffinity(0))
        if pin and min(args.workers, len(runs)) > cpus:
            threads += f" (more than the {cpus} CPUs this process may use: runs share them)"
    print(f"{plural(len(runs), 'run')}, {args.workers} at a time, {threads}; logs in {args.log_dir}/", flush=True)
    result = run_pool(runs, args.workers, env, args.progress_interval, pin=pin)
    failed = result.failed(runs)
    if failed:
        print(f"{len(failed)} of {plural(len(runs), 'run')} failed:", file=sys.stderr)
        for run, returncode in failed:
            with open(run.log_path, errors="replace") as log:
                excerpt = log_excerpt(log.read())
            end = "; it ends with:" if excerpt else " (empty)"
            print(f"  {run.env_id} seed {run.seed}: exit {returncode}, log {run.log_path}{end}", file=sys.stderr)
            for line in excerpt:
                print(f"    {line}", file=sys.stderr)
    if result.signal is not None:
        name = signal.Signals(result.signal).name
        parts = [f"{len(result.returncodes)} of {plural(len(runs), 'run')} finished ({len(failed)} failed)"]
        parts += [f"{len(result.stopped)} stopped", f"{result.not_started} not started"]
        print(f"benchmark: stopped by {name}: {', '.join(parts)}", file=sys.stderr)
        for run in result.stopped:
            print(f"  stopped: {run.env_id} seed {run.seed}, log {run.log_path}", file=sys.stderr)
        sys.exit(128 + result.signal)
    if failed:
        sys.exit(1)
    print("1 run finished" if len(runs) == 1 else f"all {len(runs)} runs finished")


def main_slurm(args: Args, runs: list[Run], env: dict[str, str]) -> None:
    """Renders the validated template for `runs` and prints it (`--workers 0`) or submits it (exit 1 with
    one line when sbatch fails)."""
    with open(args.slurm_template_path) as f:
        template = f.read()
    gpus, total_cpus = slurm_resources(args, template)
    cpus = slurm_cpus_per_task(total_cpus, args.workers, len(runs)) if "{{cpus_per_task}}" in template else 1
    if is_cleanrl_template(template):
        runs = env_major(runs)
    words = shlex.split(args.command)
    script = render_slurm_script(
        template, words, runs, args.workers, cpus, gpus, args.slurm_ntasks, args.slurm_nodes, args.log_dir, total_cpus
    )
    if args.workers == 0:
        print(script, end="")
        return
    script_path = os.path.join(args.log_dir, "slurm_job.sh")
    try:
        for folder in slurm_output_dirs(script):
            os.makedirs(folder, exist_ok=True)
        job_id = submit_slurm(script, script_path, env)
    except RuntimeError as e:
        print(f"benchmark: {e}", file=sys.stderr)
        sys.exit(1)
    each = f", {cpus} CPU(s) each" if "{{cpus_per_task}}" in template else ""
    if "{{cpus_per_gpu}}" in template:
        each = f", {gpus} GPU(s) each with {slurm_cpus_per_gpu(total_cpus, gpus, args.slurm_ntasks)} CPU(s) per GPU"
    print(f"submitted Slurm job array {job_id}: {plural(len(runs), 'run')}, {args.workers} at a time{each}", flush=True)
    print(f"script {script_path}; logs in {args.log_dir}/ ({{env}}__{{seed}}.log, slurm-{job_id}_{{index}}.out)")
    for index, run in enumerate(runs):
        print(f"  array task {index}: {run.env_id} seed {run.seed}")


if __name__ == "__main__":
    import tyro

    main(tyro.cli(Args))
