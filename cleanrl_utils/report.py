"""A report from local TensorBoard runs (`{env_id}__{exp_name}__{seed}__{time}` directories); no W&B needed.

    python -m cleanrl_utils.report runs --out report
    python -m cleanrl_utils.report runs/ppo runs/dqn --out report --last-episodes 20 \\
        --normalization norm.csv --reference benchmark/reference.csv

Every RUNS_DIR holds run directories directly under it (as a script's `runs/` does); runs are grouped
by (exp_name, env_id). `--out DIR` gets (created if needed; files of an earlier report that this one
does not write again are left alone):

  - `report.md`: the table below, the aggregates when `--normalization` is given, links to the figures
    (the same text is printed on stdout; it names the RUNS_DIRs as given and the CSV files by file name
    only, so a committed report carries no local paths);
  - `{env_id}.png`, one per env: the learning curves, episodic return against global step (left) and
    against wall-clock time since the run's first logged scalar (right), one line per exp_name;
  - `aggregates.png` with `--normalization`: IQM and optimality gap per exp_name with their CIs.

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
    (R - min) / (max - min) with that env's row in `--normalization`; per exp_name, over every env it
    ran on and every run there, IQM = the mean of the middle 50% of the pooled normalised scores
    (25% trimmed mean) and optimality gap = the mean of max(0, 1 - score); 95% stratified-bootstrap
    percentile CIs (runs resampled within each env, `--reps` times, seeded by `--seed`).

CSV files (UTF-8, a header row, other columns ignored):
  - `--normalization`: `env_id,min,max` (e.g. random and reference scores), one row per env, min < max;
    every env of the counted runs needs a row;
  - `--reference`: `env_id,return` with optional `exp_name` and `std`; a row with an exp_name applies
    to that exp_name on that env, a row without one to every exp_name on that env.

Bad input (missing folder, no runs, a malformed CSV, an env without a normalization row, min >= max,
a non-positive count, an unusable --out) stops with one line on stderr and exit code 2 before anything is
written. Runs that logged no episode yet are named on stderr and left out. Figures are drawn headless
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
    """One run directory, split into the parts of its CleanRL run name."""

    path: str
    env_id: str
    exp_name: str
    seed: int


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
        runs.append(Run(os.path.join(runs_dir, name), env_id, exp_name, int(seed)))
    return runs


def _accumulator(run_dir: str):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0})
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


@dataclass
class RunData:
    """What the report needs from one run's event files.

    `steps` (int64 global steps), `times` (float64 seconds since the run's first logged scalar) and
    `returns` (float64) are 1-D arrays of equal length, one entry per finished episode, in logged
    order. `runtime` is seconds from the first to the last logged scalar of any tag; `sps` is the
    last logged `charts/SPS`, NaN if there is none.
    """

    run: Run
    steps: np.ndarray
    times: np.ndarray
    returns: np.ndarray
    runtime: float
    sps: float


def load_run(run: Run) -> RunData:
    """Reads `run`'s event files once (see RunData for the fields and their units)."""
    accumulator = _accumulator(run.path)
    tags = accumulator.Tags()["scalars"]
    wall_times = [e.wall_time for tag in tags for e in accumulator.Scalars(tag)]
    start, end = (min(wall_times), max(wall_times)) if wall_times else (0.0, 0.0)
    episodes = accumulator.Scalars(RETURN_TAG) if RETURN_TAG in tags else []
    sps = accumulator.Scalars(SPS_TAG)[-1].value if SPS_TAG in tags else float("nan")
    return RunData(
        run=run,
        steps=np.array([e.step for e in episodes], dtype=np.int64),
        times=np.array([e.wall_time - start for e in episodes], dtype=np.float64),
        returns=np.array([e.value for e in episodes], dtype=np.float64),
        runtime=float(end - start),
        sps=float(sps),
    )


def final_return(returns: np.ndarray, last_episodes: int) -> float:
    """The mean of the last `last_episodes` entries of the 1-D array `returns` (of all, if fewer)."""
    return float(np.mean(returns[-last_episodes:]))


def summarize(data: list[RunData], last_episodes: int = 20) -> list[dict]:
    """One row per (exp_name, env_id), sorted by exp_name then env_id, over the runs in `data` that
    logged at least one episode.

    Each row holds: `exp_name`, `env_id`, `runs` (count), `seeds` (sorted list), `finals` (1-D array
    of the runs' final returns, in seed order), `return_mean` and `return_std` (mean and population
    std of `finals`), `runtime` (mean runtime in seconds), `sps` (mean of the last logged SPS over the
    runs that logged it; NaN if none did), `steps` (mean over the runs of the global step of their last
    episode).
    """
    groups: dict[tuple[str, str], list[RunData]] = {}
    for d in data:
        if len(d.returns):
            groups.setdefault((d.run.exp_name, d.run.env_id), []).append(d)
    rows = []
    for (exp_name, env_id), group in sorted(groups.items()):
        group = sorted(group, key=lambda d: (d.run.seed, d.run.path))
        finals = np.array([final_return(d.returns, last_episodes) for d in group])
        sps = [d.sps for d in group if not math.isnan(d.sps)]
        rows.append(
            {
                "exp_name": exp_name,
                "env_id": env_id,
                "runs": len(group),
                "seeds": [d.run.seed for d in group],
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
    """{exp_name: {env_id: 1-D array of (final return - min) / (max - min), one per run}} from the rows
    of `summarize`. Raises ReportError naming every env of `rows` that `normalization` lacks."""
    missing = sorted({r["env_id"] for r in rows} - set(normalization))
    if missing:
        raise ReportError(f"--normalization has no row for {', '.join(missing)}")
    scores: dict[str, dict[str, np.ndarray]] = {}
    for r in rows:
        low, high = normalization[r["env_id"]]
        scores.setdefault(r["exp_name"], {})[r["env_id"]] = (r["finals"] - low) / (high - low)
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
    """The rows of `summarize` as a Markdown table; with `reference` (from `read_reference`) a
    `reference` column, "—" where the reference has no row for that exp_name and env. A reference measured
    at a budget (`steps`) that the row's runs fell more than 10% short of says so: "490.04 (at 500k steps)"."""
    header = ["exp_name", "env_id", "runs", "seeds", "return (mean ± std)"]
    header += ["reference"] if reference is not None else []
    header += ["runtime (h:mm:ss)", "SPS"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [r["exp_name"], r["env_id"], str(r["runs"]), ", ".join(map(str, r["seeds"]))]
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
    and against wall-clock time since each run's first logged scalar (right), one line per exp_name:
    the mean over its runs of each run's trailing mean over `window` episodes, shaded with the 95%
    bootstrap CI of that mean (`bootstrap_band`, `reps` resamples; no band for a single run)."""
    plt = _pyplot()
    rng = np.random.default_rng(seed)
    longest = max(d.runtime for d in data)
    unit, scale = ("s", 1.0) if longest < 120 else ("min", 60.0) if longest < 7200 else ("h", 3600.0)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for exp_name in sorted({d.run.exp_name for d in data}):
        group = [d for d in data if d.run.exp_name == exp_name and len(d.returns)]
        label = f"{exp_name} ({len(group)} run{'s' if len(group) > 1 else ''})"
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


def env_file_name(env_id: str) -> str:
    """The PNG file name of an env's curves (path separators replaced by '-')."""
    return env_id.replace("/", "-").replace(os.sep, "-") + ".png"


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
    data = [load_run(run) for run in runs]
    notes = [f"left out {d.run.path} (no finished episode)" for d in data if not len(d.returns)]
    data = [d for d in data if len(d.returns)]
    if not data:
        raise ReportError(f"no run in {', '.join(args.runs_dirs)} has logged {RETURN_TAG} yet")
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
    text += ["", markdown_table(rows, reference)]
    if aggs is not None:
        text += ["## Aggregates", ""]
        text.append(
            f"Final returns normalised with `{os.path.basename(args.normalization)}` as (return − min) / (max − min); "
            "per exp_name, pooled "
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
