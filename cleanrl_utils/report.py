"""A report from local TensorBoard runs (`{env_id}__{exp_name}__{seed}__{time}` directories); no W&B needed.

    python -m cleanrl_utils.report runs --out report
    python -m cleanrl_utils.report runs/ppo runs/dqn --out report --last-episodes 20 \\
        --normalization norm.csv --reference benchmark/reference.csv
    python -m cleanrl_utils.report runs --out report --filter '__(ppo|dqn)__' --min-steps 100000 --max-steps 500000

Every RUNS_DIR holds run directories directly under it (as a script's `runs/` does); runs are grouped
by (exp_name, env_id, budget), so that seeds are pooled only with seeds of the same experiment, env and
budget (see "Which runs are pooled" below). `--out DIR` gets (created if needed; files of an earlier
report that this one does not write again are left alone):

  - `report.md`: the table below, the aggregates when `--normalization` is given, the runs that did not
    finish and the seeds that ran more than once (when there are any), links to the figures
    (the same text is printed on stdout; it names the RUNS_DIRs as given and the CSV files by file name
    only, so a committed report carries no local paths);
  - `{env_id}.png`, one per env: the learning curves, episodic return against global step (left) and
    against wall-clock time since the run's first logged scalar (right), one line per table row name;
  - `aggregates.png` with `--normalization`: IQM and optimality gap per exp_name (row name) with their CIs.

Which runs are pooled:
  - budget of a run: the `total_timesteps` among the arguments the script logged (the TensorBoard text
    summary "hyperparameters", a Markdown table with a `|name|value|` row per argument). A run without it
    (not written by a CleanRL script) gets its largest logged global step rounded to 2 significant
    figures instead, shown with "~" (19,968 -> ~20k), and counts as finished: nothing tells how far it meant
    to go. Decision: runs of one exp_name and env at different budgets are never averaged: each budget is
    its own row, named "ppo (20k steps)" where the same exp_name ran on the same env at several budgets (the
    plain exp_name otherwise, so a usual report reads as before), and the report says so in one line. The
    row names are also the curves' legend and the aggregates' exp_name column, so an aggregate pools one
    exp_name at one budget per env (different envs may have different budgets, as benchmarks do);
  - finished run: its largest logged global step (any scalar tag) reaches the smallest of ceil(95% of the
    budget), the budget less the env's registered time limit (a script that logs only at episode ends logs
    nothing in the last episode's steps: a 1,024-step CartPole-v1 run of dqn.py last logs at step 968)
    and, where the args hold `num_iterations` and `batch_size` (the on-policy scripts, which round
    the budget down to whole iterations: 2000 steps of 512-step batches end at 1536), num_iterations x
    batch_size; or it logged `eval/` scalars or holds a `*.cleanrl_model` file (--save-model writes both
    after the training loop). The 5% cover scripts that log only every few thousand steps or at episode
    ends. Unfinished runs are left out (their names, last step and budget listed in a "Not finished"
    section) unless `--include-unfinished`, which pools them and marks their seeds "(unfinished)";
  - a seed that ran more than once in one group (a rerun, a copy in a second RUNS_DIR) is pooled once: the
    newest run (largest time suffix of the name; the later path on a tie) is used, and a "Seeds that ran
    more than once" section names them all; `--keep-duplicates` pools every one of them;
  - `--filter REGEX` keeps the runs whose folder name matches the Python regular expression anywhere
    (re.search; the name holds env_id, exp_name, seed and time, so '__ppo__' picks an exp_name and
    '^CartPole-v1__' an env); `--min-steps N` / `--max-steps N` keep the runs whose budget is within the
    bounds (inclusive). The filters apply first; the report names them.

Definitions:
  - final return of a run: the mean `charts/episodic_return` of its last `--last-episodes` episodes
    (of all it has if fewer); a table row gives mean ± std (population std, ddof 0) of the final
    returns of its runs;
  - runtime of a run: wall time from its first to its last logged scalar event (any tag), so the
    start-up before the first logged value is not counted; a row shows the mean over its runs;
  - SPS of a run: its last logged `charts/SPS` (the scripts log steps / seconds since the start); a row
    shows the mean over the runs that logged it;
  - curve of a run: its episodic returns, each replaced by the trailing mean over `--last-episodes`
    episodes (so the last point is the final return); curves are interpolated on a common grid
    where every run of the group has data, the line is their mean over runs and the shaded band the
    95% percentile-bootstrap confidence interval of that mean (`--reps` resamples of the runs);
  - aggregates (Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of the Statistical
    Precipice", NeurIPS; computed with rliable): a final return R on an env is normalised to
    (R - min) / (max - min) with that env's row in `--normalization`; per exp_name (per row name where
    an exp_name has several budgets on an env), over every env it ran on and every run there, IQM = the
    mean of the middle 50% of the pooled normalised scores (25% trimmed mean) and optimality gap = the
    mean of max(0, 1 - score); 95% stratified-bootstrap percentile CIs (runs resampled within each env,
    `--reps` times, seeded by `--seed`).

CSV files (UTF-8, a header row, other columns ignored):
  - `--normalization`: `env_id,min,max` (e.g. random and reference scores), one row per env, min < max;
    every env of the counted runs needs a row;
  - `--reference`: `env_id,return` with optional `exp_name` and `std`; a row with an exp_name applies
    to that exp_name on that env, a row without one to every exp_name on that env.

Bad input (missing folder, no runs, no run left by the filters, no finished run without
--include-unfinished, a malformed CSV, an env without a normalization row, min >= max, a non-positive count,
a negative --min-steps/--max-steps or --min-steps > --max-steps, a --filter that is not a regular expression,
an unusable --out) stops with one line on stderr and exit code 2 before anything is
written. Runs that logged no episode yet are named on stderr and left out; the numbers of unfinished runs
left out and of seeds that ran twice are also noted on stderr. Figures are drawn headless
(matplotlib's Agg backend).
"""

from __future__ import annotations

import csv
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Annotated, Optional

import numpy as np
import tyro

RETURN_TAG = "charts/episodic_return"
SPS_TAG = "charts/SPS"
CONFIDENCE = 0.95


class ReportError(Exception):
    """A problem with the input, as one line for the user."""


@dataclass(frozen=True)
class Run:
    """One run directory, split into the parts of its CleanRL run name; `time` is the name's time suffix
    (the script's start, Unix seconds), 0 when not given."""

    path: str
    env_id: str
    exp_name: str
    seed: int
    time: int = 0


def find_runs(runs_dir: str) -> list[Run]:
    """Every `{env_id}__{exp_name}__{seed}__{time}` directory directly under `runs_dir`, sorted by name.

    Directories whose names do not have that form are skipped. Raises FileNotFoundError if
    `runs_dir` does not exist.
    """
    runs = []
    for name in sorted(os.listdir(runs_dir)):
        # seed and time from the right, so an exp_name ending in "_" still parses
        head, _, tail = name.rpartition("__")
        head, _, seed = head.rpartition("__")
        env_id, _, exp_name = head.partition("__")
        if not (env_id and exp_name and seed.isdigit() and tail.isdigit()) or not os.path.isdir(os.path.join(runs_dir, name)):
            continue
        runs.append(Run(os.path.join(runs_dir, name), env_id, exp_name, int(seed), int(tail)))
    return runs


def _accumulator(run_dir: str):
    import logging

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    # a resumed run (--resume) logs a restart marker, and the accumulator warns as it drops the points the
    # interrupted run wrote after its checkpoint: that is the intended purge, not a problem to report
    logging.getLogger("tensorboard").setLevel(logging.ERROR)
    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def read_scalars(run_dir: str, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """All points of scalar `tag` in the TensorBoard event files of `run_dir`, in logged order.

    Returns (steps, values): two 1-D arrays of equal length (int64 global steps, float64 values),
    empty when the tag was never logged.
    """
    accumulator = _accumulator(run_dir)
    if tag not in accumulator.Tags()["scalars"]:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    events = accumulator.Scalars(tag)
    return np.array([e.step for e in events], dtype=np.int64), np.array([e.value for e in events], dtype=np.float64)


HYPERPARAMETERS_TAG = "hyperparameters/text_summary"  # what SummaryWriter.add_text("hyperparameters", ...) stores
FINISH_FRACTION = 0.95  # a run that logged a step at 95% of its budget or beyond counts as finished
MODEL_SUFFIX = ".cleanrl_model"  # written by --save-model after the training loop, as are the eval/ scalars


def _hyperparameters(accumulator) -> dict[str, str]:
    if HYPERPARAMETERS_TAG not in accumulator.Tags().get("tensors", []):
        return {}
    args = {}
    for event in accumulator.Tensors(HYPERPARAMETERS_TAG):
        for text in event.tensor_proto.string_val:
            for line in text.decode("utf-8", "replace").splitlines():
                # "|key|value|" rows of the "|param|value|" table; a value may itself hold "|"
                match = re.fullmatch(r"\|([^|]+)\|(.*)\|", line.strip())
                if match and match.group(1).strip() not in ("param", "-"):
                    args[match.group(1).strip()] = match.group(2).strip()
    return args


def read_hyperparameters(run_dir: str) -> dict[str, str]:
    """The arguments a CleanRL script logged for the run in `run_dir` (its TensorBoard text summary
    "hyperparameters", a Markdown table `|param|value|` with one `|name|value|` row per argument):
    {name: value as text}. Empty when the run logged no such text (e.g. it was not written by a CleanRL script)."""
    return _hyperparameters(_accumulator(run_dir))


def _integer(text: Optional[str]) -> Optional[int]:
    try:
        value = float(text) if text is not None else float("nan")
    except ValueError:
        return None
    return int(value) if math.isfinite(value) and value == int(value) else None


def round_significant(steps: int, digits: int = 2) -> int:
    """`steps` rounded half up to `digits` significant figures: 19968 -> 20000, 1536 -> 1500, 0 -> 0."""
    if steps <= 0:
        return 0
    factor = 10 ** max(len(str(int(steps))) - digits, 0)
    return int(steps / factor + 0.5) * factor


def budget_of(args: dict[str, str], last_step: int) -> tuple[int, bool]:
    """A run's budget in environment steps and whether it is known: (`total_timesteps` of its logged args, True),
    or, without that argument, (its largest logged global step `last_step` rounded to 2 significant figures
    with `round_significant`, False), so that seeds stopping a few vector steps apart share a budget."""
    total = _integer(args.get("total_timesteps"))
    if total is not None and total > 0:
        return total, True
    return round_significant(last_step), False


def episode_limit(env_id: str) -> int:
    """The env's registered time limit in steps (`max_episode_steps` of its Gymnasium spec), or 0 when the id
    is not registered in this process (Atari ids, whose plugin is not imported here) or has none."""
    import gymnasium as gym

    try:
        return int(gym.spec(env_id).max_episode_steps or 0)
    except Exception:  # gymnasium raises several kinds for unknown, namespaced or deprecated ids
        return 0


def finish_step(budget: int, args: dict[str, str], episode_steps: int = 0) -> int:
    """The global step a run of `budget` steps must have logged to count as finished: the smallest of
    ceil(95% of the budget), budget - `episode_steps` (the env's time limit: a script that logs only at the
    ends of episodes may log nothing in its last episode's steps) and, when the args hold `num_iterations` and
    `batch_size` (the on-policy scripts, which round the budget down to whole iterations of `batch_size`
    steps), num_iterations x batch_size. The 5% allow for scripts that log every few thousand steps."""
    threshold = min(math.ceil(FINISH_FRACTION * budget), budget - episode_steps)
    iterations, batch = _integer(args.get("num_iterations")), _integer(args.get("batch_size"))
    if iterations is not None and batch is not None and iterations >= 0 and batch > 0:
        threshold = min(threshold, iterations * batch)
    return threshold


@dataclass
class RunData:
    """What the report needs from one run's event files.

    `steps` (int64 global steps), `times` (float64 seconds since the run's first logged scalar) and
    `returns` (float64) are 1-D arrays of equal length, one entry per finished episode, in logged
    order. `runtime` is seconds from the first to the last logged scalar of any tag; `sps` is the
    last logged `charts/SPS`, NaN if there is none. `last_step` is the largest global step of any logged
    scalar (0 if none); `budget` (steps) and `budget_known` come from `budget_of`; `finished` is whether
    the run reached its budget (see `load_run`).
    """

    run: Run
    steps: np.ndarray
    times: np.ndarray
    returns: np.ndarray
    runtime: float
    sps: float
    last_step: int = 0
    budget: int = 0
    budget_known: bool = False
    finished: bool = True


def load_run(run: Run) -> RunData:
    """Reads `run`'s event files once (see RunData for the fields and their units).

    The run is finished when its budget is not known (no `total_timesteps` logged: nothing to compare
    with), when it logged `eval/` scalars or holds a `*.cleanrl_model` file (both written after the training
    loop, by --save-model), or when `last_step` reaches `finish_step(budget, args)`."""
    accumulator = _accumulator(run.path)
    tags = accumulator.Tags()["scalars"]
    scalars = {tag: accumulator.Scalars(tag) for tag in tags}
    wall_times = [e.wall_time for events in scalars.values() for e in events]
    start, end = (min(wall_times), max(wall_times)) if wall_times else (0.0, 0.0)
    last_step = max((e.step for events in scalars.values() for e in events), default=0)
    episodes = scalars.get(RETURN_TAG, [])
    sps = scalars[SPS_TAG][-1].value if SPS_TAG in scalars else float("nan")
    args = _hyperparameters(accumulator)
    budget, known = budget_of(args, last_step)
    saved = any(name.endswith(MODEL_SUFFIX) for name in os.listdir(run.path))
    threshold = finish_step(budget, args, episode_limit(run.env_id)) if known else 0
    finished = not known or saved or any(tag.startswith("eval/") for tag in tags) or last_step >= threshold
    return RunData(
        run=run,
        steps=np.array([e.step for e in episodes], dtype=np.int64),
        times=np.array([e.wall_time - start for e in episodes], dtype=np.float64),
        returns=np.array([e.value for e in episodes], dtype=np.float64),
        runtime=float(end - start),
        sps=float(sps),
        last_step=int(last_step),
        budget=budget,
        budget_known=known,
        finished=finished,
    )


def final_return(returns: np.ndarray, last_episodes: int) -> float:
    """The mean of the last `last_episodes` entries of the 1-D array `returns` (of all, if fewer)."""
    return float(np.mean(returns[-last_episodes:]))


def group_key(d: RunData) -> tuple[str, str, int]:
    """The (exp_name, env_id, budget) that runs are pooled by: seeds of one experiment on one env at one budget."""
    return d.run.exp_name, d.run.env_id, d.budget


def format_budget(steps: int, known: bool = True) -> str:
    """A budget for a label: `format_steps` where that is exact (20000 -> "20k", 1500 -> "1.5k"), else the
    number with thousands separators (20480 -> "20,480"), so that two budgets never read the same;
    "~" in front when the budget was inferred from the last logged step (`known` False)."""
    text = format_steps(steps)
    scale = {"k": 1e3, "M": 1e6}.get(text[-1], 1.0)
    try:
        exact = round(float(text.rstrip("kM")) * scale) == steps
    except ValueError:
        exact = False
    return ("" if known else "~") + (text if exact else f"{steps:,}")


def group_labels(data: list[RunData]) -> dict[tuple[str, str, int], str]:
    """{(exp_name, env_id, budget): label} for the groups in `data`: the label is the exp_name, followed by
    the budget ("ppo (20k steps)", "ppo (~20k steps)" for an inferred one) when the same exp_name ran on the
    same env_id at more than one budget in `data`."""
    budgets: dict[tuple[str, str], set[int]] = {}
    known: dict[tuple[str, str, int], bool] = {}
    for d in data:
        budgets.setdefault((d.run.exp_name, d.run.env_id), set()).add(d.budget)
        known[group_key(d)] = known.get(group_key(d), False) or d.budget_known
    return {
        (exp, env, budget): exp if len(budgets[(exp, env)]) == 1 else f"{exp} ({format_budget(budget, is_known)} steps)"
        for (exp, env, budget), is_known in known.items()
    }


def select_runs(
    data: list[RunData], include_unfinished: bool = False, keep_duplicates: bool = False
) -> tuple[list[RunData], list[RunData], list[tuple[RunData, list[RunData]]]]:
    """Which runs of `data` to pool. Returns (counted, unfinished, duplicates):

    - unfinished: the runs with `finished` False, in the order of `data`; left out of `counted` unless
      `include_unfinished`;
    - duplicates: for every (exp_name, env_id, budget, seed) held by more than one of the remaining runs,
      (the newest run, the others newest first); "newest" is the largest time suffix of the run name (the
      later path on a tie). Unless `keep_duplicates`, only the newest of each is counted;
    - counted: the remaining runs, in the order of `data`.
    """
    unfinished = [d for d in data if not d.finished]
    pool = data if include_unfinished else [d for d in data if d.finished]
    by_seed: dict[tuple, list[RunData]] = {}
    for d in pool:
        by_seed.setdefault(group_key(d) + (d.run.seed,), []).append(d)
    duplicates, dropped = [], set()
    for key in sorted(k for k, runs in by_seed.items() if len(runs) > 1):
        runs = sorted(by_seed[key], key=lambda d: (d.run.time, d.run.path), reverse=True)
        duplicates.append((runs[0], runs[1:]))
        if not keep_duplicates:
            dropped.update(id(d) for d in runs[1:])
    return [d for d in pool if id(d) not in dropped], unfinished, duplicates


def summarize(data: list[RunData], last_episodes: int = 20) -> list[dict]:
    """One row per (exp_name, env_id, budget) (see `group_key`), sorted by exp_name, env_id, then budget, over
    the runs in `data` that logged at least one episode. Every run given is pooled: leave out unfinished
    runs and repeated seeds first (`select_runs`).

    Each row holds: `exp_name`, `env_id`, `budget` (steps), `budget_known` (whether any of its runs logged
    `total_timesteps`), `label` (from `group_labels`), `runs` (count), `seeds` (sorted list; a seed repeats
    when its runs were kept), `names` (the run folder names, in seed order), `finished` (one bool per run, in
    seed order: see `load_run`), `finals` (1-D array of the runs' final returns, in seed order), `return_mean` and
    `return_std` (mean and population std of `finals`), `runtime` (mean runtime in seconds), `sps` (mean of
    the last logged SPS over the runs that logged it; NaN if none did), `steps` (mean over the runs of the
    global step of their last episode).
    """
    data = [d for d in data if len(d.returns)]
    labels = group_labels(data)
    groups: dict[tuple[str, str, int], list[RunData]] = {}
    for d in data:
        groups.setdefault(group_key(d), []).append(d)
    rows = []
    for (exp_name, env_id, budget), group in sorted(groups.items()):
        group = sorted(group, key=lambda d: (d.run.seed, d.run.time, d.run.path))
        finals = np.array([final_return(d.returns, last_episodes) for d in group])
        sps = [d.sps for d in group if not math.isnan(d.sps)]
        rows.append(
            {
                "exp_name": exp_name,
                "env_id": env_id,
                "budget": budget,
                "budget_known": any(d.budget_known for d in group),
                "label": labels[(exp_name, env_id, budget)],
                "runs": len(group),
                "seeds": [d.run.seed for d in group],
                "names": [os.path.basename(d.run.path) for d in group],
                "finished": [d.finished for d in group],
                "finals": finals,
                "return_mean": float(finals.mean()),
                "return_std": float(finals.std()),
                "runtime": float(np.mean([d.runtime for d in group])),
                "sps": float(np.mean(sps)) if sps else float("nan"),
                "steps": float(np.mean([d.steps[-1] for d in group])),
            }
        )
    return rows


def _read_csv(path: str, flag: str, required: list[str]) -> list[tuple[int, dict]]:
    """The rows of a CSV file as (line number, {column: stripped text}); ReportError if it cannot be read,
    lacks a required column, or has no row."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            columns = [c.strip() for c in reader.fieldnames or []]
            missing = [c for c in required if c not in columns]
            if missing:
                raise ReportError(
                    f"{flag} {path!r} needs the header columns {','.join(required)}; missing {', '.join(missing)}"
                )
            rows = []
            for row in reader:
                if None in row:
                    raise ReportError(f"{flag} {path!r} line {reader.line_num}: more fields than header columns")
                rows.append((reader.line_num, {k.strip(): (v or "").strip() for k, v in row.items()}))
    except OSError as e:
        raise ReportError(f"{flag} {path!r}: {e.strerror or e}") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise ReportError(f"{flag} {path!r} is not a readable CSV file ({e})") from None
    if not rows:
        raise ReportError(f"{flag} {path!r} has no data row")
    return rows


def _number(text: str, flag: str, path: str, line: int, column: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value):
        raise ReportError(f"{flag} {path!r} line {line}: {column} must be a finite number, got {text!r}")
    return value


def read_normalization(path: str) -> dict[str, tuple[float, float]]:
    """Reads an `env_id,min,max` CSV: {env_id: (min, max)}. A "/" in an env_id is read as "-", the way
    run directory names write it (`dm_control/cartpole-balance-v0` matches `dm_control-cartpole-balance-v0`).

    Raises ReportError on an unreadable file, a missing column, no row, an empty env_id, a value
    that is not a finite number, a repeated env_id, or min >= max.
    """
    table = {}
    for line, row in _read_csv(path, "--normalization", ["env_id", "min", "max"]):
        env_id = row["env_id"].replace("/", "-")
        if not env_id:
            raise ReportError(f"--normalization {path!r} line {line}: empty env_id")
        if env_id in table:
            raise ReportError(f"--normalization {path!r} line {line}: {env_id} appears twice")
        low = _number(row["min"], "--normalization", path, line, "min")
        high = _number(row["max"], "--normalization", path, line, "max")
        if low >= high:
            raise ReportError(f"--normalization {path!r} line {line}: {env_id} needs min < max, got min {low:g}, max {high:g}")
        table[env_id] = (low, high)
    return table


def read_reference(path: str) -> dict[tuple[str, Optional[str]], tuple[float, Optional[float], Optional[float]]]:
    """Reads an `env_id,return` CSV with optional `exp_name`, `std` and `steps` (the budget the reference
    return was measured at) columns: {(env_id, exp_name or None): (return, std or None, steps or None)}, with
    "/" in an env_id read as "-" as in `read_normalization`.

    Raises ReportError on an unreadable file, a missing column, no row, an empty env_id, a return
    (or a given std or steps) that is not a finite number, a negative std, non-positive steps, or a
    repeated (env_id, exp_name).
    """
    table = {}
    for line, row in _read_csv(path, "--reference", ["env_id", "return"]):
        env_id, exp_name = row["env_id"].replace("/", "-"), row.get("exp_name") or None
        if not env_id:
            raise ReportError(f"--reference {path!r} line {line}: empty env_id")
        if (env_id, exp_name) in table:
            raise ReportError(f"--reference {path!r} line {line}: {env_id} {exp_name or '(any exp_name)'} appears twice")
        value = _number(row["return"], "--reference", path, line, "return")
        std = _number(row["std"], "--reference", path, line, "std") if row.get("std") else None
        if std is not None and std < 0:
            raise ReportError(f"--reference {path!r} line {line}: std must not be negative, got {std:g}")
        steps = _number(row["steps"], "--reference", path, line, "steps") if row.get("steps") else None
        if steps is not None and steps <= 0:
            raise ReportError(f"--reference {path!r} line {line}: steps must be positive, got {steps:g}")
        table[(env_id, exp_name)] = (value, std, steps)
    return table


def reference_for(reference: dict, env_id: str, exp_name: str) -> Optional[tuple[float, Optional[float], Optional[float]]]:
    """The reference (return, std or None, steps or None) for `exp_name` on `env_id`: the row naming that exp_name,
    else the env's row without an exp_name, else None."""
    return reference.get((env_id, exp_name), reference.get((env_id, None)))


def normalized_scores(rows: list[dict], normalization: dict[str, tuple[float, float]]) -> dict[str, dict[str, np.ndarray]]:
    """{label: {env_id: 1-D array of (final return - min) / (max - min), one per run}} from the rows
    of `summarize`; a row's label is its exp_name, with its budget when that exp_name ran on that env at
    several budgets (`group_labels`). Raises ReportError naming every env of `rows` that `normalization` lacks."""
    missing = sorted({r["env_id"] for r in rows} - set(normalization))
    if missing:
        raise ReportError(f"--normalization has no row for {', '.join(missing)}")
    scores: dict[str, dict[str, np.ndarray]] = {}
    for r in rows:
        low, high = normalization[r["env_id"]]
        scores.setdefault(r.get("label", r["exp_name"]), {})[r["env_id"]] = (r["finals"] - low) / (high - low)
    return scores


def aggregates(scores: dict[str, dict[str, np.ndarray]], reps: int = 2000, seed: int = 0) -> list[dict]:
    """IQM and optimality gap per exp_name with 95% stratified-bootstrap CIs, computed with rliable
    (Agarwal et al. 2021, "Deep Reinforcement Learning at the Edge of the Statistical Precipice", NeurIPS).

    `scores` is {exp_name: {env_id: 1-D array of normalised scores, one per run}}; an env may have any
    number of runs. Over the scores pooled across the envs and runs of an exp_name, IQM is the mean
    of the middle 50% (`rliable.metrics.aggregate_iqm`, a 25% trimmed mean) and the optimality gap the
    mean of max(0, 1 - score) (`rliable.metrics.aggregate_optimality_gap`). The CIs come from
    `rliable.library.get_interval_estimates` (percentile method, `reps` resamples, runs resampled with
    replacement within each env); rliable draws from NumPy's global generator, so it is seeded with
    `seed` for the call and restored afterwards.

    Returns one dict per exp_name, sorted: `exp_name`, `envs`, `runs`, `iqm`, `iqm_ci` and `gap`,
    `gap_ci` (each CI a (low, high) pair).
    """
    from rliable import library, metrics

    def iqm_and_gap(*per_env: np.ndarray) -> np.ndarray:
        pooled = np.concatenate([s.ravel() for s in per_env])
        return np.array([metrics.aggregate_iqm(pooled), metrics.aggregate_optimality_gap(pooled)])

    # a list per exp_name (one (runs, 1) array per env) lets envs have different numbers of runs
    score_dict = {exp: [s[env].reshape(-1, 1) for env in sorted(s)] for exp, s in sorted(scores.items())}
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        points, intervals = library.get_interval_estimates(
            score_dict, iqm_and_gap, method="percentile", reps=reps, confidence_interval_size=CONFIDENCE
        )
    finally:
        np.random.set_state(state)
    return [
        {
            "exp_name": exp,
            "envs": len(per_env),
            "runs": sum(len(s) for s in per_env),
            "iqm": float(points[exp][0]),
            "iqm_ci": (float(intervals[exp][0, 0]), float(intervals[exp][1, 0])),
            "gap": float(points[exp][1]),
            "gap_ci": (float(intervals[exp][0, 1]), float(intervals[exp][1, 1])),
        }
        for exp, per_env in score_dict.items()
    ]


def format_duration(seconds: float) -> str:
    """`h:mm:ss`, rounded to the second."""
    total = int(round(seconds))
    return f"{total // 3600}:{total % 3600 // 60:02d}:{total % 60:02d}"


def markdown_table(rows: list[dict], reference: Optional[dict] = None) -> str:
    """The rows of `summarize` as a Markdown table, one line per row, named by the row's `label` (its exp_name,
    with the budget where one exp_name ran on one env at several); a seed whose run did not finish reads
    "3 (unfinished)". With `reference` (from `read_reference`) a
    `reference` column, "—" where the reference has no row for that exp_name and env. A reference measured
    at a budget (`steps`) that the row's runs fell more than 10% short of says so: "490.04 (at 500k steps)"."""
    header = ["exp_name", "env_id", "runs", "seeds", "return (mean ± std)"]
    header += ["reference"] if reference is not None else []
    header += ["runtime (h:mm:ss)", "SPS"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        finished = r.get("finished", [True] * len(r["seeds"]))
        seeds = ", ".join(f"{seed}" + ("" if done else " (unfinished)") for seed, done in zip(r["seeds"], finished))
        cells = [r.get("label", r["exp_name"]), r["env_id"], str(r["runs"]), seeds]
        cells.append(f"{r['return_mean']:.2f} ± {r['return_std']:.2f}")
        if reference is not None:
            ref = reference_for(reference, r["env_id"], r["exp_name"])
            if ref is None:
                cells.append("—")
            else:
                budget = "" if ref[2] is None or r["steps"] >= 0.9 * ref[2] else f" (at {format_steps(ref[2])} steps)"
                cells.append(f"{ref[0]:.2f}" + ("" if ref[1] is None else f" ± {ref[1]:.2f}") + budget)
        cells.append(format_duration(r["runtime"]))
        cells.append("—" if math.isnan(r["sps"]) else f"{r['sps']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_steps(steps: float) -> str:
    """A step count for people: 500000 -> "500k", 10000000 -> "10M", 1500 -> "1.5k", 300 -> "300"."""
    for size, unit in ((1e6, "M"), (1e3, "k")):
        if steps >= size:
            return f"{steps / size:.3g}{unit}"
    return f"{steps:.0f}"


def aggregates_table(aggs: list[dict]) -> str:
    """The dicts of `aggregates` as a Markdown table (point estimate [95% CI])."""
    lines = ["| exp_name | envs | runs | IQM [95% CI] | optimality gap [95% CI] |", "|---|---|---|---|---|"]
    for a in aggs:
        iqm = f"{a['iqm']:.3f} [{a['iqm_ci'][0]:.3f}, {a['iqm_ci'][1]:.3f}]"
        gap = f"{a['gap']:.3f} [{a['gap_ci'][0]:.3f}, {a['gap_ci'][1]:.3f}]"
        lines.append(f"| {a['exp_name']} | {a['envs']} | {a['runs']} | {iqm} | {gap} |")
    return "\n".join(lines) + "\n"


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last `window` points (fewer at the start); same shape as `values`."""
    sums = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    return (sums[1:] - sums[np.arange(1, len(values) + 1) - counts]) / counts


def common_grid(curves: list[tuple[np.ndarray, np.ndarray]], num_points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Interpolates curves [(x, y), ...] (x increasing) on one grid from the largest first x to the
    smallest last x, where every curve has data (a single point if they do not overlap).
    Returns (grid of shape (P,), values of shape (len(curves), P))."""
    low, high = max(x[0] for x, _ in curves), min(x[-1] for x, _ in curves)
    grid = np.linspace(low, high, num_points) if low < high else np.array([float(high)])
    return grid, np.stack([np.interp(grid, x, y) for x, y in curves])


def bootstrap_band(values: np.ndarray, reps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """95% percentile-bootstrap CI of the mean over the rows (runs) of `values` (shape (runs, P)):
    rows resampled with replacement `reps` times. Returns (low, high), each of shape (P,)."""
    # each resample as how often it draws each run: (reps, runs) weights, so memory stays reps x P
    weights = rng.multinomial(len(values), np.full(len(values), 1 / len(values)), size=reps) / len(values)
    means = weights @ values
    tail = (1 - CONFIDENCE) / 2 * 100
    return np.percentile(means, tail, axis=0), np.percentile(means, 100 - tail, axis=0)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_env(env_id: str, data: list[RunData], path: str, window: int, reps: int, seed: int = 0) -> None:
    """Writes the PNG of one env's learning curves to `path`: episodic return against global step (left)
    and against wall-clock time since each run's first logged scalar (right), one line per group of runs
    (exp_name, and budget where that exp_name has several on this env: `group_labels`), sorted by exp_name then budget:
    the mean over its runs of each run's trailing mean over `window` episodes, shaded with the 95%
    bootstrap CI of that mean (`bootstrap_band`, `reps` resamples; no band for a single run). The legend gives
    each line's number of runs and of unfinished ones among them."""
    plt = _pyplot()
    rng = np.random.default_rng(seed)
    longest = max(d.runtime for d in data)
    unit, scale = ("s", 1.0) if longest < 120 else ("min", 60.0) if longest < 7200 else ("h", 3600.0)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    data = [d for d in data if len(d.returns)]
    labels = group_labels(data)
    for key in sorted(labels):
        name, group = labels[key], [d for d in data if group_key(d) == key]
        late = sum(not d.finished for d in group)
        label = f"{name} ({len(group)} run{'s' if len(group) > 1 else ''}{f', {late} unfinished' if late else ''})"
        color = None
        for ax, xs in ((axes[0], [d.steps.astype(np.float64) for d in group]), (axes[1], [d.times / scale for d in group])):
            grid, ys = common_grid([(x, smooth(d.returns, window)) for x, d in zip(xs, group)])
            (line,) = ax.plot(grid, ys.mean(0), label=label, color=color, marker="o" if len(grid) == 1 else None)
            color = line.get_color()
            if len(group) > 1:
                low, high = bootstrap_band(ys, reps, rng)
                ax.fill_between(grid, low, high, color=color, alpha=0.2, linewidth=0)
    axes[0].set_xlabel("global step")
    axes[1].set_xlabel(f"wall-clock time ({unit})")
    axes[0].set_ylabel(f"episodic return (trailing mean of {window})")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{env_id}: mean over runs; shaded: 95% bootstrap CI of the mean", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_aggregates(aggs: list[dict], path: str) -> None:
    """Writes a PNG to `path` with two panels, IQM and optimality gap of normalised scores: per exp_name
    the point estimate and its 95% stratified-bootstrap CI (the dicts of `aggregates`)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 0.5 * len(aggs) + 1.6), sharey=True)
    ys = np.arange(len(aggs))
    for ax, key, title in ((axes[0], "iqm", "IQM"), (axes[1], "gap", "optimality gap")):
        points = np.array([a[key] for a in aggs])
        cis = np.array([a[f"{key}_ci"] for a in aggs])
        ax.errorbar(points, ys, xerr=[points - cis[:, 0], cis[:, 1] - points], fmt="o", capsize=4)
        ax.set_title(title)
        ax.set_xlabel("normalised score")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(ys, [a["exp_name"] for a in aggs])
    axes[0].invert_yaxis()
    fig.suptitle("95% stratified-bootstrap CIs (rliable)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@dataclass
class Args:
    runs_dirs: Annotated[tyro.conf.Positional[list[str]], tyro.conf.arg(metavar="RUNS_DIR [RUNS_DIR ...]")]
    """folders that hold run directories ({env_id}__{exp_name}__{seed}__{time}) directly under them"""
    out: Annotated[str, tyro.conf.arg(metavar="DIR")]
    """folder to write report.md and the PNGs to (created if needed)"""
    last_episodes: int = 20
    """how many final episodes of a run make its final return (also the curves' smoothing window)"""
    normalization: Optional[str] = None
    """CSV env_id,min,max: normalise final returns and add rliable aggregates (IQM, optimality gap)"""
    reference: Optional[str] = None
    """CSV env_id,return[,exp_name][,std]: add a reference column (e.g. published results)"""
    reps: int = 2000
    """bootstrap resamples for the confidence intervals (curve bands and aggregates)"""
    seed: int = 0
    """seed of the bootstrap resampling"""
    filter: Annotated[Optional[str], tyro.conf.arg(metavar="REGEX")] = None
    """only the runs whose folder name ({env_id}__{exp_name}__{seed}__{time}) matches this Python regular
    expression somewhere (re.search), e.g. '__(ppo|dqn)__' or '^CartPole-v1__'"""
    min_steps: Annotated[Optional[int], tyro.conf.arg(metavar="N")] = None
    """only the runs whose budget (total_timesteps) is at least N steps"""
    max_steps: Annotated[Optional[int], tyro.conf.arg(metavar="N")] = None
    """only the runs whose budget (total_timesteps) is at most N steps"""
    include_unfinished: bool = False
    """pool the runs that stopped short of their budget too (marked "(unfinished)"); by default they are only listed"""
    keep_duplicates: bool = False
    """pool every run of a seed that ran more than once in a group; by default only the newest (largest time suffix)"""


def check_args(args: Args) -> None:
    """Raises ReportError for the first problem with the command-line values (files are not read)."""
    if not args.runs_dirs:
        raise ReportError("name at least one RUNS_DIR (a folder that holds run directories)")
    for runs_dir in args.runs_dirs:
        if not os.path.isdir(runs_dir):
            raise ReportError(f"no such folder {runs_dir!r}")
    for flag, value in (("--last-episodes", args.last_episodes), ("--reps", args.reps)):
        if value < 1:
            raise ReportError(f"{flag} must be at least 1, got {value}")
    if not args.out:
        raise ReportError("--out must name a folder")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ReportError(f"--out {args.out!r} exists and is not a folder")
    existing = os.path.abspath(args.out)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ReportError(f"--out {args.out!r}: {existing!r} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ReportError(f"--out {args.out!r}: {existing!r} is not writable")
    for flag, path in (("--normalization", args.normalization), ("--reference", args.reference)):
        if path is not None and not os.path.isfile(path):
            raise ReportError(f"{flag} {path!r} is not a file")
    for flag, value in (("--min-steps", args.min_steps), ("--max-steps", args.max_steps)):
        if value is not None and value < 0:
            raise ReportError(f"{flag} must not be negative, got {value}")
    if args.min_steps is not None and args.max_steps is not None and args.min_steps > args.max_steps:
        raise ReportError(f"--min-steps {args.min_steps} is above --max-steps {args.max_steps}: no budget fits")
    if args.filter is not None:
        try:
            re.compile(args.filter)
        except re.error as e:
            raise ReportError(f"--filter {args.filter!r} is not a regular expression ({e})") from None


def env_file_name(env_id: str) -> str:
    """The PNG file name of an env's curves (path separators replaced by '-')."""
    return env_id.replace("/", "-").replace(os.sep, "-") + ".png"


def in_budget_range(budget: int, min_steps: Optional[int] = None, max_steps: Optional[int] = None) -> bool:
    """Whether a budget (steps) lies within [min_steps, max_steps], both inclusive; None is no bound."""
    return (min_steps is None or budget >= min_steps) and (max_steps is None or budget <= max_steps)


def describe_filters(args: Args) -> str:
    """The run filters of `args` in words ("whose folder name matches `__ppo__` and whose budget is at least
    10,000 steps"), "" when there are none."""
    parts = [f"whose folder name matches `{args.filter}`"] if args.filter is not None else []
    if args.min_steps is not None and args.max_steps is not None:
        parts.append(f"whose budget is {args.min_steps:,} to {args.max_steps:,} steps")
    elif args.min_steps is not None:
        parts.append(f"whose budget is at least {args.min_steps:,} steps")
    elif args.max_steps is not None:
        parts.append(f"whose budget is at most {args.max_steps:,} steps")
    return " and ".join(parts)


def build(args: Args) -> tuple[str, list[RunData], list[dict], Optional[list[dict]], list[str]]:
    """Reads and checks everything, writes nothing. Returns (report.md text, the counted runs' data,
    the rows of `summarize`, the aggregates or None, notes for stderr). Raises ReportError."""
    check_args(args)
    normalization = read_normalization(args.normalization) if args.normalization else None
    reference = read_reference(args.reference) if args.reference else None
    if normalization is not None:
        try:
            import rliable  # noqa: F401
        except ImportError:
            raise ReportError("--normalization needs rliable: pip install 'cleanrl[report]'") from None
    seen, runs = set(), []
    for runs_dir in args.runs_dirs:
        for run in find_runs(runs_dir):
            if os.path.realpath(run.path) not in seen:
                seen.add(os.path.realpath(run.path))
                runs.append(run)
    if not runs:
        raise ReportError(f"no run directories ({{env_id}}__{{exp_name}}__{{seed}}__{{time}}) in {', '.join(args.runs_dirs)}")
    pattern = re.compile(args.filter) if args.filter is not None else None
    data = [load_run(run) for run in runs if pattern is None or pattern.search(os.path.basename(run.path))]
    data = [d for d in data if in_budget_range(d.budget, args.min_steps, args.max_steps)]
    filters = describe_filters(args)
    if not data:
        raise ReportError(f"none of the {len(runs)} runs in {', '.join(args.runs_dirs)} is one {filters}")
    notes = [f"left out {d.run.path} (no finished episode)" for d in data if not len(d.returns)]
    data = [d for d in data if len(d.returns)]
    if not data:
        raise ReportError(f"no run in {', '.join(args.runs_dirs)} has logged {RETURN_TAG} yet")
    counted, unfinished, duplicates = select_runs(data, args.include_unfinished, args.keep_duplicates)
    if not counted:
        first = unfinished[0]
        raise ReportError(
            f"no run has finished: {len(unfinished)} stopped short of their budget (e.g. {os.path.basename(first.run.path)} "
            f"at step {first.last_step:,} of {first.budget:,}); --include-unfinished counts them"
        )
    if unfinished and not args.include_unfinished:
        notes.append(
            f"left out {len(unfinished)} unfinished run{'s' if len(unfinished) > 1 else ''} "
            "(listed in report.md; --include-unfinished counts them)"
        )
    if duplicates and not args.keep_duplicates:
        notes.append(
            f"{len(duplicates)} seed{'s' if len(duplicates) > 1 else ''} ran more than once in a group: counted the newest "
            "run of each (listed in report.md; --keep-duplicates counts all)"
        )
    data = counted
    rows = summarize(data, args.last_episodes)
    aggs = aggregates(normalized_scores(rows, normalization), args.reps, args.seed) if normalization is not None else None

    episodes = f"{args.last_episodes} episode{'s' if args.last_episodes > 1 else ''}"
    text = ["# Report", ""]
    text.append(
        f"{len(data)} run{'s' if len(data) > 1 else ''} from {', '.join(f'`{d}`' for d in args.runs_dirs)}. "
        f"Return of a run: mean `{RETURN_TAG}` "
        f"of its last {episodes}; a row gives mean ± std (population) over its runs. Runtime: first to last "
        f"logged scalar, mean over runs. SPS: last logged `{SPS_TAG}`, mean over runs."
        + (f" Reference: `{os.path.basename(args.reference)}`." if reference is not None else "")
    )
    remarks = []
    if filters:
        remarks.append(f"Only runs {filters}.")
    split: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        split.setdefault((r["exp_name"], r["env_id"]), []).append(r)
    split = {key: group for key, group in split.items() if len(group) > 1}
    if split:
        which = "; ".join(
            f"{exp} on {env} ({', '.join(format_budget(r['budget'], r['budget_known']) for r in group)} steps)"
            for (exp, env), group in sorted(split.items())
        )
        remarks.append(f"Runs of one exp_name on one env at different budgets (`total_timesteps`) are kept apart: {which}.")
    inferred = sum(not d.budget_known for d in data)
    if inferred:
        remarks.append(
            f'{inferred} run{"s" if inferred > 1 else ""} logged no `total_timesteps` (no "hyperparameters" text): '
            "budget taken as the last logged step to 2 significant figures (shown with ~), counted as finished."
        )
    if remarks:
        text += ["", " ".join(remarks)]
    text += ["", markdown_table(rows, reference)]
    if unfinished:
        text += ["## Not finished", ""]
        text.append(
            "Runs whose last logged step falls short of their budget: a run is finished when it logged a step at "
            f"{FINISH_FRACTION:.0%} of its `total_timesteps`, within one episode time limit of it, or at the end of "
            "its last whole iteration "
            "(`num_iterations` × `batch_size`), or wrote `eval/` scalars or a saved model. "
            + (
                'They are counted above, their seeds marked "(unfinished)" (`--include-unfinished`).'
                if args.include_unfinished
                else "They are left out of the table, the aggregates and the curves; `--include-unfinished` counts them."
            )
        )
        text.append("")
        for d in unfinished:
            share = f" ({d.last_step / d.budget:.0%})" if d.budget else ""
            text.append(f"- `{os.path.basename(d.run.path)}`: step {d.last_step:,} of {d.budget:,}{share}")
        text.append("")
    if duplicates:
        text += ["## Seeds that ran more than once", ""]
        text.append(
            "Runs of one exp_name, env and budget with the same seed (a rerun, or a copy in another RUNS_DIR): "
            + (
                "all of them are counted (`--keep-duplicates`)."
                if args.keep_duplicates
                else "only the newest (largest time suffix of the name) is counted; `--keep-duplicates` counts all."
            )
        )
        text.append("")
        for newest, others in duplicates:
            budget = format_budget(newest.budget, newest.budget_known)
            where = f"{newest.run.exp_name} on {newest.run.env_id} at {budget} steps"
            names = ", ".join(f"`{os.path.basename(d.run.path)}`" for d in others)
            verdict = f"all counted, also {names}" if args.keep_duplicates else f"left out {names}"
            text.append(f"- {where}, seed {newest.run.seed}: used `{os.path.basename(newest.run.path)}`; {verdict}")
        text.append("")
    if aggs is not None:
        text += ["## Aggregates", ""]
        text.append(
            f"Final returns normalised with `{os.path.basename(args.normalization)}` as (return − min) / (max − min); "
            f"per {'row name (exp_name, with its budget where it has several on an env)' if split else 'exp_name'}, pooled "
            "over its envs and runs: IQM (mean of the middle 50%) and optimality gap (mean of max(0, 1 − score)), "
            f"95% stratified-bootstrap CIs ({args.reps} resamples), computed with rliable (Agarwal et al. 2021, "
            '"Deep Reinforcement Learning at the Edge of the Statistical Precipice", NeurIPS). Compare exp_names '
            "over the same envs only."
        )
        text += ["", aggregates_table(aggs), "![aggregates](aggregates.png)", ""]
    text += ["## Learning curves", ""]
    text.append(
        f"Each run's episodic return as a trailing mean over {episodes}, against global step and against "
        "wall-clock time; line: mean over runs, shaded: its 95% bootstrap CI."
    )
    text.append("")
    for env_id in sorted({r["env_id"] for r in rows}):
        text += [f"![{env_id}]({env_file_name(env_id)})", ""]
    return "\n".join(text), data, rows, aggs, notes


def previous_figures(out: str) -> list[str]:
    """The PNG files that an earlier report in `out` wrote (the images its report.md shows), so that a new
    report into the same folder leaves no stale figure (an env no longer reported, aggregates no longer
    asked for). Other files in `out` are never touched. Returns paths; [] if there is no earlier report."""
    try:
        with open(os.path.join(out, "report.md"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    names = re.findall(r"!\[[^\]]*\]\(([^)/\\]+\.png)\)", text)
    return [os.path.join(out, name) for name in names if os.path.isfile(os.path.join(out, name))]


def main(args: Args) -> None:
    try:
        report, data, rows, aggs, notes = build(args)
    except ReportError as e:
        print(f"report: {e}", file=sys.stderr)
        sys.exit(2)
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        print(f"report: cannot create --out {args.out!r}: {e.strerror or e}", file=sys.stderr)
        sys.exit(2)
    for note in notes:
        print(f"report: {note}", file=sys.stderr)
    for path in previous_figures(args.out):
        os.remove(path)
    with open(os.path.join(args.out, "report.md"), "w", encoding="utf-8") as f:
        f.write(report)
    env_ids = sorted({r["env_id"] for r in rows})
    for env_id in env_ids:
        plot_env(
            env_id,
            [d for d in data if d.run.env_id == env_id],
            os.path.join(args.out, env_file_name(env_id)),
            args.last_episodes,
            args.reps,
            args.seed,
        )
    if aggs is not None:
        plot_aggregates(aggs, os.path.join(args.out, "aggregates.png"))
    print(report, end="")
    figures = len(env_ids) + (aggs is not None)
    print(
        f"report: wrote {os.path.join(args.out, 'report.md')} and {figures} PNG file{'s' if figures > 1 else ''}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main(tyro.cli(Args))
