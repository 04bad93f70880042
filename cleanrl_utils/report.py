"""Tables and learning curves from local TensorBoard runs (`runs/{env_id}__{exp_name}__{seed}__{time}`).

    python -m cleanrl_utils.report --runs-dir runs --markdown table.md --plot curves.png

The summary statistic of a run is the mean episodic return of its last `last_episodes` episodes;
a table row gives the mean ± standard deviation of that statistic over the runs of one
(exp_name, env_id) pair, the seeds they used, and the mean of each run's last logged SPS. Only
run directories directly under the folder count; runs that logged no episode are named on stderr.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class Run:
    """One run directory, split into the parts of its CleanRL run name."""

    path: str
    env_id: str
    exp_name: str
    seed: int


def find_runs(runs_dir: str) -> list[Run]:
    """Every `{env_id}__{exp_name}__{seed}__{time}` directory directly under `runs_dir`, sorted.

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


def read_scalars(run_dir: str, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """All points of scalar `tag` in the TensorBoard event files of `run_dir`, in logged order.

    Returns (steps, values): two 1-D arrays of equal length (int64 global steps, float64 values),
    empty when the tag was never logged.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    accumulator.Reload()
    if tag not in accumulator.Tags()["scalars"]:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    events = accumulator.Scalars(tag)
    return np.array([e.step for e in events], dtype=np.int64), np.array([e.value for e in events], dtype=np.float64)


def summarize(runs: list[Run], last_episodes: int = 20) -> tuple[list[dict], list[Run]]:
    """One row per (exp_name, env_id) over its runs: run count, sorted seeds, mean and (population) std
    of the runs' final returns, mean SPS. Returns (rows, runs that logged no episode and were left out).

    A run's final return is the mean `charts/episodic_return` of its last `last_episodes` episodes.
    """
    groups: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    skipped = []
    for run in runs:
        _, returns = read_scalars(run.path, "charts/episodic_return")
        if len(returns) == 0:
            skipped.append(run)
            continue
        _, sps = read_scalars(run.path, "charts/SPS")
        final = float(np.mean(returns[-last_episodes:]))
        groups.setdefault((run.exp_name, run.env_id), []).append(
            (run.seed, final, float(sps[-1]) if len(sps) else float("nan"))
        )
    rows = []
    for (exp_name, env_id), values in sorted(groups.items()):
        finals = np.array([v[1] for v in values])
        rows.append(
            {
                "exp_name": exp_name,
                "env_id": env_id,
                "runs": len(values),
                "seeds": sorted(v[0] for v in values),
                "return_mean": float(finals.mean()),
                "return_std": float(finals.std()),
                "sps": float(np.mean([v[2] for v in values])),
            }
        )
    return rows, skipped


def markdown_table(rows: list[dict]) -> str:
    """The rows of `summarize` as a Markdown table."""
    lines = ["| exp_name | env_id | runs | seeds | return (mean ± std) | SPS |", "|---|---|---|---|---|---|"]
    for r in rows:
        ret = f"{r['return_mean']:.2f} ± {r['return_std']:.2f}"
        seeds = ", ".join(map(str, r["seeds"]))
        lines.append(f"| {r['exp_name']} | {r['env_id']} | {r['runs']} | {seeds} | {ret} | {r['sps']:.0f} |")
    return "\n".join(lines) + "\n"


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last `window` points (fewer at the start); same shape as `values`."""
    sums = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    return (sums[1:] - sums[np.arange(1, len(values) + 1) - counts]) / counts


def plot_curves(runs: list[Run], path: str, num_points: int = 100, window: int = 20) -> None:
    """Writes a PNG with one panel per env: for each exp_name, the mean over seeds of the episodic return
    (each run smoothed by a trailing mean over `window` episodes), shaded between the seeds' minimum and
    maximum. Curves are interpolated on a common step grid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env_ids = sorted({r.env_id for r in runs})
    fig, axes = plt.subplots(1, len(env_ids), figsize=(5 * len(env_ids), 3.6), squeeze=False)
    for ax, env_id in zip(axes[0], env_ids):
        for exp_name in sorted({r.exp_name for r in runs if r.env_id == env_id}):
            curves = [
                read_scalars(r.path, "charts/episodic_return") for r in runs if (r.env_id, r.exp_name) == (env_id, exp_name)
            ]
            curves = [c for c in curves if len(c[0]) > 0]
            if not curves:
                continue
            grid = np.linspace(0, min(c[0][-1] for c in curves), num_points)
            ys = np.stack([np.interp(grid, steps, smooth(values, window)) for steps, values in curves])
            ax.plot(grid, ys.mean(0), label=f"{exp_name} ({len(curves)} seed{'s' if len(curves) > 1 else ''})")
            ax.fill_between(grid, ys.min(0), ys.max(0), alpha=0.2)
        ax.set_title(env_id)
        ax.set_xlabel("global step")
        ax.set_ylabel("episodic return")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@dataclass
class Args:
    runs_dir: str = "runs"
    """the folder that holds the run directories"""
    last_episodes: int = 20
    """how many final episodes of each run make its final return (also the curves' smoothing window)"""
    markdown: Optional[str] = None
    """write the table to this Markdown file (it is always printed)"""
    plot: Optional[str] = None
    """write the learning curves to this PNG file"""


def args_error(args: Args) -> Optional[str]:
    """The first problem with the command-line values as one line, or None."""
    if not os.path.isdir(args.runs_dir):
        return f"no such folder {args.runs_dir!r}"
    if args.last_episodes < 1:
        return f"--last-episodes must be at least 1, got {args.last_episodes}"
    for flag, path in (("--markdown", args.markdown), ("--plot", args.plot)):
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not path or os.path.isdir(path):
            return f"{flag} {path!r} must name a file"
        if not os.path.isdir(folder):
            return f"{flag} {path!r}: its folder does not exist"
        if not os.access(folder, os.W_OK):
            return f"{flag} {path!r}: its folder is not writable"
    if args.plot is not None and not args.plot.endswith(".png"):
        return f"--plot {args.plot!r} must name a .png file"
    return None


def main(args: Args) -> None:
    import sys

    error = args_error(args)
    runs = find_runs(args.runs_dir) if error is None else []
    if error is None and not runs:
        error = f"no run directories ({{env_id}}__{{exp_name}}__{{seed}}__{{time}}) in {args.runs_dir!r}"
    rows, skipped = summarize(runs, args.last_episodes) if error is None else ([], [])
    if error is None and not rows:
        error = f"no run in {args.runs_dir!r} has logged charts/episodic_return yet"
    if error is not None:
        print(f"report: {error}", file=sys.stderr)
        sys.exit(2)
    for run in skipped:
        print(f"report: left out {run.path} (no finished episode)", file=sys.stderr)
    table = markdown_table(rows)
    print(table, end="")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table)
    if args.plot:
        plot_curves(runs, args.plot, window=args.last_episodes)


if __name__ == "__main__":
    import tyro

    main(tyro.cli(Args))
