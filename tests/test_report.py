"""cleanrl_utils.report on run directories written here with TensorBoard's own writer."""

import subprocess
import sys

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

from cleanrl_utils.report import find_runs, markdown_table, plot_curves, read_scalars, smooth, summarize


def write_run(runs_dir, name, returns, sps=1000):
    writer = SummaryWriter(str(runs_dir / name))
    for i, r in enumerate(returns):
        writer.add_scalar("charts/episodic_return", r, 10 * (i + 1))
    writer.add_scalar("charts/SPS", sps, 10 * len(returns))
    writer.close()


@pytest.fixture
def runs_dir(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "CartPole-v1__ppo__1__100", [0, 10, 20, 30], sps=1000)
    write_run(runs, "CartPole-v1__ppo__2__101", [0, 10, 40, 50], sps=3000)
    write_run(runs, "ALE-Breakout-v5__ppo_atari__1__102", [1, 2, 3])
    write_run(runs, "CartPole-v1__sweep___7__104", [5])  # exp_name "sweep_"
    (runs / "not-a-run").mkdir()
    SummaryWriter(str(runs / "CartPole-v1__ppo__3__103")).close()  # started, no episode yet
    return runs


def test_find_runs_parses_run_names(runs_dir):
    runs = find_runs(str(runs_dir))
    assert [(r.env_id, r.exp_name, r.seed) for r in runs] == [
        ("ALE-Breakout-v5", "ppo_atari", 1),
        ("CartPole-v1", "ppo", 1),
        ("CartPole-v1", "ppo", 2),
        ("CartPole-v1", "ppo", 3),
        ("CartPole-v1", "sweep_", 7),
    ]


def test_read_scalars(runs_dir):
    steps, values = read_scalars(str(runs_dir / "CartPole-v1__ppo__1__100"), "charts/episodic_return")
    assert steps.tolist() == [10, 20, 30, 40] and values.tolist() == [0, 10, 20, 30]
    steps, values = read_scalars(str(runs_dir / "CartPole-v1__ppo__1__100"), "no/such_tag")
    assert len(steps) == len(values) == 0


def test_summarize_over_seeds(runs_dir):
    rows, skipped = summarize(find_runs(str(runs_dir)), last_episodes=2)
    cartpole = next(r for r in rows if r["env_id"] == "CartPole-v1")
    # seed 1: mean(20, 30) = 25; seed 2: mean(40, 50) = 45; seed 3 has no episode yet
    assert cartpole["runs"] == 2 and cartpole["seeds"] == [1, 2]
    assert cartpole["return_mean"] == pytest.approx(35) and cartpole["return_std"] == pytest.approx(10)
    assert cartpole["sps"] == pytest.approx(2000)
    assert [r.seed for r in skipped] == [3]
    assert "| ppo | CartPole-v1 | 2 | 1, 2 | 35.00 ± 10.00 | 2000 |" in markdown_table(rows)


def test_smooth_is_a_trailing_mean():
    assert smooth(np.array([2.0, 4.0, 6.0, 8.0]), 2).tolist() == [2.0, 3.0, 5.0, 7.0]


def test_plot_curves_writes_png(runs_dir, tmp_path):
    path = tmp_path / "curves.png"
    plot_curves(find_runs(str(runs_dir)), str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args,message",
    [
        (["--runs-dir", "missing"], "no such folder"),
        (["--last-episodes", "0"], "at least 1"),
        (["--markdown", "no/such/dir/t.md"], "its folder does not exist"),
        (["--plot", "no/such/dir/c.png"], "its folder does not exist"),
        (["--plot", "curves.txt"], "must name a .png file"),
        (["--markdown", "empty"], "must name a file"),
        (["--markdown", ""], "must name a file"),
        (["--runs-dir", "empty"], "no run directories"),
        (["--runs-dir", "started"], "has logged charts/episodic_return yet"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line_and_writes_nothing(args, message, runs_dir, tmp_path):
    (tmp_path / "empty").mkdir()
    SummaryWriter(str(tmp_path / "started" / "CartPole-v1__ppo__1__100")).close()
    if "--runs-dir" not in args:
        args = ["--runs-dir", str(runs_dir), *args]
    before = sorted(tmp_path.rglob("*"))
    result = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.report", *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("report: ") and message in lines[0]
    assert sorted(tmp_path.rglob("*")) == before


def test_cli_writes_table(runs_dir, tmp_path):
    table = tmp_path / "t.md"
    result = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.report", "--runs-dir", str(runs_dir), "--markdown", str(table)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert table.read_text() == result.stdout
    assert "left out" in result.stderr and "CartPole-v1__ppo__3__103" in result.stderr
