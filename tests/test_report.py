"""cleanrl_utils.report on run directories written here with TensorBoard's own writer, at explicit wall times."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tyro
from torch.utils.tensorboard import SummaryWriter

from cleanrl_utils.report import (
    Args,
    ReportError,
    aggregates,
    bootstrap_band,
    budget_of,
    build,
    common_grid,
    find_runs,
    finish_step,
    format_budget,
    format_duration,
    format_steps,
    in_budget_range,
    load_run,
    main,
    markdown_table,
    normalized_scores,
    read_hyperparameters,
    read_normalization,
    read_reference,
    read_scalars,
    reference_for,
    round_significant,
    select_runs,
    smooth,
    summarize,
)

PNG = b"\x89PNG\r\n\x1a\n"


def write_run(runs_dir, name, returns, sps=1000.0, start=1000.0, end=None, step=10, args=None):
    """Episode i ends at step `step` (i + 1), wall time start + 10 i; SPS is logged once, at `end`
    (default start + 100), which makes the run's runtime end - start. With `args` (a dict), the run also
    gets the "hyperparameters" text the scripts write: `|param|value|` table, a `|name|value|` row per arg."""
    writer = SummaryWriter(str(runs_dir / name))
    if args is not None:
        writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in args.items()))
    for i, r in enumerate(returns):
        writer.add_scalar("charts/episodic_return", r, step * (i + 1), walltime=start + 10 * i)
    if sps is not None:
        writer.add_scalar("charts/SPS", sps, step * len(returns), walltime=start + 100 if end is None else end)
    writer.close()


@pytest.fixture
def runs_dir(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "CartPole-v1__ppo__1__100", [0, 10, 20, 30], sps=1000, start=1000, end=1100)  # runtime 100 s
    write_run(runs, "CartPole-v1__ppo__2__101", [0, 10, 40, 50], sps=3000, start=5000, end=5200)  # runtime 200 s
    write_run(runs, "Acrobot-v1__ppo__1__102", [-500, -300, -70, -90], sps=500, start=0, end=3600)
    write_run(runs, "Acrobot-v1__ppo__2__103", [-500, -40, -60, 60], sps=700, start=0, end=7200)
    write_run(runs, "CartPole-v1__sweep___7__104", [5], sps=None, start=0, end=None)  # exp_name "sweep_", no SPS
    (runs / "not-a-run").mkdir()
    SummaryWriter(str(runs / "CartPole-v1__ppo__3__105")).close()  # started, no episode yet
    return runs


@pytest.fixture
def csvs(tmp_path):
    norm = tmp_path / "norm.csv"
    norm.write_text("env_id,min,max,note\nCartPole-v1,0,100,random and best\nAcrobot-v1,-100,0,\n")
    reference = tmp_path / "reference.csv"
    reference.write_text("env_id,exp_name,return,std\nCartPole-v1,ppo,490.04,6.12\nAcrobot-v1,,-86.36,\n")
    return norm, reference


def test_find_runs_parses_run_names(runs_dir):
    runs = find_runs(str(runs_dir))
    assert [(r.env_id, r.exp_name, r.seed) for r in runs] == [
        ("Acrobot-v1", "ppo", 1),
        ("Acrobot-v1", "ppo", 2),
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


def test_load_run_times_runtime_and_sps(runs_dir):
    run = next(r for r in find_runs(str(runs_dir)) if (r.env_id, r.exp_name, r.seed) == ("CartPole-v1", "ppo", 2))
    data = load_run(run)
    assert data.steps.tolist() == [10, 20, 30, 40] and data.returns.tolist() == [0, 10, 40, 50]
    assert data.times.tolist() == [0, 10, 20, 30]  # seconds since the first scalar
    assert data.runtime == 200 and data.sps == 3000
    empty = load_run(next(r for r in find_runs(str(runs_dir)) if r.seed == 3))
    assert len(empty.returns) == 0 and empty.runtime == 0 and np.isnan(empty.sps)


def rows_of(runs_dir, last_episodes):
    return summarize([load_run(r) for r in find_runs(str(runs_dir))], last_episodes)


def test_summarize_over_seeds(runs_dir):
    rows = rows_of(runs_dir, last_episodes=2)
    assert [(r["exp_name"], r["env_id"]) for r in rows] == [
        ("ppo", "Acrobot-v1"),
        ("ppo", "CartPole-v1"),
        ("sweep_", "CartPole-v1"),
    ]
    cartpole = rows[1]
    # seed 1: mean(20, 30) = 25; seed 2: mean(40, 50) = 45; seed 3 has no episode yet
    assert cartpole["runs"] == 2 and cartpole["seeds"] == [1, 2] and cartpole["finals"].tolist() == [25, 45]
    assert cartpole["return_mean"] == pytest.approx(35) and cartpole["return_std"] == pytest.approx(10)
    assert cartpole["runtime"] == pytest.approx(150) and cartpole["sps"] == pytest.approx(2000)
    # more episodes asked for than a run has: all of them
    assert rows[2]["finals"].tolist() == [5] and np.isnan(rows[2]["sps"]) and rows[2]["runtime"] == 0


def test_markdown_table_with_reference(runs_dir, csvs):
    rows = rows_of(runs_dir, last_episodes=2)
    table = markdown_table(rows, read_reference(str(csvs[1])))
    assert table.splitlines()[:2] == [
        "| exp_name | env_id | runs | seeds | return (mean ± std) | reference | runtime (h:mm:ss) | SPS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    # Acrobot: seed 1 mean(-70, -90) = -80, seed 2 mean(-60, 60) = 0 -> -40 ± 40; runtimes 1 h and 2 h
    assert "| ppo | Acrobot-v1 | 2 | 1, 2 | -40.00 ± 40.00 | -86.36 | 1:30:00 | 600 |" in table
    assert "| ppo | CartPole-v1 | 2 | 1, 2 | 35.00 ± 10.00 | 490.04 ± 6.12 | 0:02:30 | 2000 |" in table
    assert "| sweep_ | CartPole-v1 | 1 | 7 | 5.00 ± 0.00 | — | 0:00:00 | — |" in table  # reference names ppo only
    assert "reference" not in markdown_table(rows)


def test_a_reference_at_a_larger_budget_says_so(runs_dir, tmp_path):
    """The runs end at step 40 (CartPole) and 40 (Acrobot); a reference measured at 500k steps is marked with
    its budget, one measured at 44 steps (the runs are within 10% of it) is not."""
    reference = tmp_path / "budget.csv"
    reference.write_text("env_id,exp_name,return,std,steps\nCartPole-v1,ppo,490.04,6.12,500000\nAcrobot-v1,,-86.36,,44\n")
    table = markdown_table(rows_of(runs_dir, last_episodes=2), read_reference(str(reference)))
    assert "| ppo | CartPole-v1 | 2 | 1, 2 | 35.00 ± 10.00 | 490.04 ± 6.12 (at 500k steps) | 0:02:30 | 2000 |" in table
    assert "| ppo | Acrobot-v1 | 2 | 1, 2 | -40.00 ± 40.00 | -86.36 | 1:30:00 | 600 |" in table
    assert [format_steps(n) for n in (300, 1500, 500_000, 10_000_000)] == ["300", "1.5k", "500k", "10M"]


def test_reference_and_normalization_ids_match_run_folder_names(tmp_path):
    """Run folders write an env id's "/" as "-" (dm_control/cartpole-balance-v0 runs live in
    dm_control-cartpole-balance-v0__...): the CSVs take the real id and match those folders."""
    reference, normalization = tmp_path / "reference.csv", tmp_path / "normalization.csv"
    reference.write_text("env_id,exp_name,return\ndm_control/cartpole-balance-v0,ppo_continuous_action,855.47\n")
    normalization.write_text("env_id,min,max\ndm_control/cartpole-balance-v0,0,1000\n")
    found = reference_for(read_reference(str(reference)), "dm_control-cartpole-balance-v0", "ppo_continuous_action")
    assert found == (855.47, None, None)
    assert read_normalization(str(normalization)) == {"dm_control-cartpole-balance-v0": (0.0, 1000.0)}


def test_a_new_report_into_the_same_folder_leaves_no_stale_figure(runs_dir, csvs, tmp_path):
    out = tmp_path / "o"
    main(tyro.cli(Args, args=[str(runs_dir), "--out", str(out), "--normalization", str(csvs[0]), "--reps", "20"]))
    assert (out / "aggregates.png").is_file() and (out / "Acrobot-v1.png").is_file()
    (out / "notes.txt").write_text("mine")  # files the report did not write are kept
    only_cartpole = tmp_path / "cartpole"
    write_run(only_cartpole, "CartPole-v1__dqn__1__200", [7, 9])
    main(tyro.cli(Args, args=[str(only_cartpole), "--out", str(out), "--reps", "20"]))
    assert sorted(p.name for p in out.iterdir()) == ["CartPole-v1.png", "notes.txt", "report.md"]


def test_format_duration():
    assert [format_duration(s) for s in (0, 59.6, 3661, 36000)] == ["0:00:00", "0:01:00", "1:01:01", "10:00:00"]


def test_aggregates_by_hand():
    # pooled normalised scores 0.1, 0.2, 0.3, 1.5: IQM = mean of the middle two = 0.25,
    # optimality gap = mean(0.9, 0.8, 0.7, 0) = 0.6 (scores above 1 count as 1)
    scores = {"ppo": {"A": np.array([0.1, 0.2]), "B": np.array([0.3, 1.5])}, "dqn": {"A": np.array([0.4])}}
    state = np.random.get_state()
    result = aggregates(scores, reps=200, seed=3)
    assert np.random.get_state()[1].tolist() == state[1].tolist()  # global generator restored
    ppo = next(a for a in result if a["exp_name"] == "ppo")
    assert (ppo["envs"], ppo["runs"]) == (2, 4)
    assert ppo["iqm"] == pytest.approx(0.25) and ppo["gap"] == pytest.approx(0.6)
    assert ppo["iqm_ci"][0] <= 0.25 <= ppo["iqm_ci"][1] and ppo["iqm_ci"][0] < ppo["iqm_ci"][1]
    assert ppo["gap_ci"][0] <= 0.6 <= ppo["gap_ci"][1]
    dqn = next(a for a in result if a["exp_name"] == "dqn")
    assert dqn["iqm"] == pytest.approx(0.4) and dqn["iqm_ci"] == pytest.approx((0.4, 0.4))
    assert aggregates(scores, reps=200, seed=3) == result  # seeded


def test_normalized_scores(runs_dir):
    rows = rows_of(runs_dir, last_episodes=2)
    scores = normalized_scores(rows, {"CartPole-v1": (0, 100), "Acrobot-v1": (-100, 0)})
    assert scores["ppo"]["CartPole-v1"].tolist() == pytest.approx([0.25, 0.45])
    assert scores["ppo"]["Acrobot-v1"].tolist() == pytest.approx([0.2, 1.0])
    with pytest.raises(ReportError, match="no row for Acrobot-v1$"):
        normalized_scores(rows, {"CartPole-v1": (0, 100)})


def test_smooth_is_a_trailing_mean():
    assert smooth(np.array([2.0, 4.0, 6.0, 8.0]), 2).tolist() == [2.0, 3.0, 5.0, 7.0]


def test_common_grid_covers_where_every_run_has_data():
    grid, ys = common_grid([(np.array([0.0, 10.0]), np.array([0.0, 10.0])), (np.array([5.0, 20.0]), np.array([1.0, 1.0]))], 3)
    assert grid.tolist() == [5.0, 7.5, 10.0] and ys.tolist() == [[5.0, 7.5, 10.0], [1.0, 1.0, 1.0]]
    grid, _ = common_grid([(np.array([0.0, 1.0]), np.array([0.0, 0.0])), (np.array([2.0, 3.0]), np.array([0.0, 0.0]))])
    assert grid.tolist() == [1.0]  # no overlap: one point


def test_bootstrap_band_brackets_the_mean():
    values = np.array([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0]])
    low, high = bootstrap_band(values, 500, np.random.default_rng(0))
    assert low[0] < 2.0 < high[0] and 0.0 <= low[0] and high[0] <= 4.0
    assert low[1] == pytest.approx(1.0) and high[1] == pytest.approx(1.0)


def test_cli_writes_report_and_pngs(runs_dir, csvs, tmp_path):
    out = tmp_path / "report" / "nested"
    command = [sys.executable, "-m", "cleanrl_utils.report", str(runs_dir), "--out", str(out), "--last-episodes", "2"]
    command += ["--normalization", str(csvs[0]), "--reference", str(csvs[1]), "--reps", "50"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    report = (out / "report.md").read_text()
    assert report == result.stdout
    assert "| ppo | CartPole-v1 | 2 | 1, 2 | 35.00 ± 10.00 | 490.04 ± 6.12 | 0:02:30 | 2000 |" in report
    # normalised: ppo 0.25, 0.45 (CartPole), 0.2, 1.0 (Acrobot): IQM mean(0.25, 0.45) = 0.35,
    # gap mean(0.75, 0.55, 0.8, 0) = 0.525; sweep_ 0.05 alone
    ppo = next(line for line in report.splitlines() if line.startswith("| ppo | 2 | 4 | "))
    assert ppo.startswith("| ppo | 2 | 4 | 0.350 [") and "| 0.525 [" in ppo
    assert "| sweep_ | 1 | 1 | 0.050 [0.050, 0.050] | 0.950 [0.950, 0.950] |" in report
    assert sorted(p.name for p in out.iterdir()) == ["Acrobot-v1.png", "CartPole-v1.png", "aggregates.png", "report.md"]
    for name in ("Acrobot-v1.png", "CartPole-v1.png", "aggregates.png"):
        data = (out / name).read_bytes()
        assert data[:8] == PNG and len(data) > 1000
        assert f"({name})" in report
    assert "left out" in result.stderr and "CartPole-v1__ppo__3__105" in result.stderr


def test_several_runs_dirs_are_merged_once_each(runs_dir, tmp_path, capsys):
    more = tmp_path / "more"
    write_run(more, "CartPole-v1__dqn__1__200", [7, 9])
    main(tyro.cli(Args, args=[str(runs_dir), str(more), str(runs_dir), "--out", str(tmp_path / "o"), "--reps", "20"]))
    report = (tmp_path / "o" / "report.md").read_text()
    assert "| dqn | CartPole-v1 | 1 | 1 | 8.00 ± 0.00 | 0:01:40 | 1000 |" in report
    assert "| ppo | CartPole-v1 | 2 | 1, 2 |" in report  # runs_dir given twice, counted once
    assert "reference" not in report and "Aggregates" not in report
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["Acrobot-v1.png", "CartPole-v1.png", "report.md"]


def budget_args(total_timesteps, **more):
    """The args a script logs, as far as the report reads them."""
    return {"exp_name": "x", "seed": 1, "hf_entity": "", "total_timesteps": total_timesteps, **more}


def test_read_hyperparameters_as_the_scripts_write_them(tmp_path):
    write_run(tmp_path, "CartPole-v1__ppo__1__100", [1, 2], args=budget_args(2000, note="a|b", num_iterations=3))
    args = read_hyperparameters(str(tmp_path / "CartPole-v1__ppo__1__100"))
    assert args == budget_args("2000", seed="1", note="a|b", num_iterations="3")  # text; a value may hold "|"
    write_run(tmp_path, "CartPole-v1__ppo__2__100", [1, 2])
    assert read_hyperparameters(str(tmp_path / "CartPole-v1__ppo__2__100")) == {}


def test_budget_and_finish_step_rules():
    assert budget_of({"total_timesteps": "2000"}, 1536) == (2000, True)
    assert budget_of({}, 19968) == (20000, False)  # no args: the last logged step to 2 significant figures
    assert budget_of({"total_timesteps": "None"}, 0) == (0, False)
    assert [round_significant(n) for n in (0, 40, 1536, 19968, 499_712, 10_450)] == [0, 40, 1500, 20000, 500_000, 10_000]
    assert finish_step(100_000, {}) == 95_000  # the last 5% may go unlogged
    assert finish_step(1024, {}, 500) == 524  # or the last episode, for scripts that log only at episode ends
    # on-policy scripts end at whole iterations: 2000 steps in 512-step batches end at 3 x 512 = 1536
    assert finish_step(2000, {"num_iterations": "3", "batch_size": "512"}) == 1536
    assert finish_step(1_000_000, {"num_iterations": "1953", "batch_size": "512"}) == 950_000
    assert [format_budget(n) for n in (20_000, 1500, 20_480)] == ["20k", "1.5k", "20,480"]  # never two budgets alike
    assert format_budget(20_000, known=False) == "~20k"


def test_a_real_script_run_is_read_with_its_budget(tmp_path):
    """ppo.py with --total-timesteps 2000 runs 3 iterations of 512 steps: its last step is 1536, and it is finished."""
    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cleanrl", "ppo.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, script, "--total-timesteps", "2000"], cwd=tmp_path, capture_output=True, env=env)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    (run,) = find_runs(str(tmp_path / "runs"))
    data = load_run(run)
    assert (data.budget, data.budget_known, data.last_step, data.finished) == (2000, True, 1536, True)
    assert read_hyperparameters(run.path)["batch_size"] == "512"


@pytest.fixture
def budgets_dir(tmp_path):
    """ppo on CartPole at 20k steps (seeds 1, 2) and 30k steps (seed 1), each reaching its budget; dqn at 20k only."""
    runs = tmp_path / "budgets"
    write_run(runs, "CartPole-v1__ppo__1__100", [10, 20], step=10_000, args=budget_args(20_000))
    write_run(runs, "CartPole-v1__ppo__2__101", [30, 40], step=10_000, args=budget_args(20_000))
    write_run(runs, "CartPole-v1__ppo__1__102", [100, 200], step=15_000, args=budget_args(30_000))
    write_run(runs, "CartPole-v1__dqn__1__103", [7, 9], step=10_000, args=budget_args(20_000))
    write_run(runs, "Acrobot-v1__ppo__1__104", [-90, -80], step=10_000, args=budget_args(20_000))
    return runs


def report_of(*argv):
    """build() on command-line arguments: (report.md text, rows, notes); nothing is written."""
    text, _, rows, _, notes = build(tyro.cli(Args, args=[str(a) for a in argv]))
    return text, rows, notes


def test_runs_of_different_budgets_are_kept_apart(budgets_dir, tmp_path):
    rows = rows_of(budgets_dir, last_episodes=2)
    assert [(r["label"], r["env_id"], r["budget"], r["seeds"]) for r in rows] == [
        ("dqn", "CartPole-v1", 20_000, [1]),
        ("ppo", "Acrobot-v1", 20_000, [1]),  # one budget on Acrobot: the plain exp_name
        ("ppo (20k steps)", "CartPole-v1", 20_000, [1, 2]),
        ("ppo (30k steps)", "CartPole-v1", 30_000, [1]),
    ]
    scores = normalized_scores(rows, {"CartPole-v1": (0, 100), "Acrobot-v1": (-100, 0)})
    assert sorted(scores) == ["dqn", "ppo", "ppo (20k steps)", "ppo (30k steps)"]
    assert scores["ppo (30k steps)"]["CartPole-v1"].tolist() == [1.5]

    out = tmp_path / "o"
    main(tyro.cli(Args, args=[str(budgets_dir), "--out", str(out), "--last-episodes", "2", "--reps", "20"]))
    report = (out / "report.md").read_text()
    assert "| ppo (20k steps) | CartPole-v1 | 2 | 1, 2 | 25.00 ± 10.00 |" in report
    assert "| ppo (30k steps) | CartPole-v1 | 1 | 1 | 150.00 ± 0.00 |" in report
    assert "| ppo | Acrobot-v1 | 1 | 1 |" in report and "| dqn | CartPole-v1 | 1 | 1 |" in report
    lines = [line for line in report.splitlines() if "different budgets" in line]
    assert len(lines) == 1 and lines[0].endswith("are kept apart: ppo on CartPole-v1 (20k, 30k steps).")
    assert "Not finished" not in report and "more than once" not in report and "logged no `total_timesteps`" not in report
    assert (out / "CartPole-v1.png").read_bytes()[:8] == PNG


def test_runs_without_args_get_their_last_step_as_budget(tmp_path):
    runs = tmp_path / "runs"
    write_run(runs, "CartPole-v1__ppo__1__100", [1, 2], step=9_984)  # ends at 19,968: ~20k
    write_run(runs, "CartPole-v1__ppo__2__101", [3, 4], step=10_000)  # ends at 20,000: ~20k
    write_run(runs, "CartPole-v1__ppo__3__102", [5, 6], step=5_000)  # ends at 10,000: kept apart, not judged unfinished
    text, rows, _ = report_of(runs, "--out", tmp_path / "o", "--last-episodes", "1")
    assert [(r["label"], r["seeds"], r["budget_known"]) for r in rows] == [
        ("ppo (~10k steps)", [3], False),
        ("ppo (~20k steps)", [1, 2], False),
    ]
    assert "3 runs logged no `total_timesteps`" in text and "Not finished" not in text


def unfinished_dir(tmp_path):
    runs = tmp_path / "unfinished"
    write_run(runs, "CartPole-v1__ppo__1__100", [10, 20], step=10_000, args=budget_args(20_000))
    write_run(runs, "CartPole-v1__ppo__2__101", [30, 40], step=9_600, args=budget_args(20_000))  # 19,200: within 5%
    write_run(runs, "CartPole-v1__ppo__3__102", [500, 600], step=6_000, args=budget_args(20_000))  # 12,000: stopped
    # on-policy: 3 iterations of 6,144 steps end at 18,432, short of 95% but the whole iterations it planned
    write_run(runs, "CartPole-v1__ppo__4__103", [50], step=18_432, args=budget_args(20_000, num_iterations=3, batch_size=6144))
    # stopped at 4,000, but eval/ scalars (or a saved model) are written only after the training loop
    write_run(runs, "CartPole-v1__ppo__5__104", [60], step=4_000, args=budget_args(20_000))
    writer = SummaryWriter(str(runs / "CartPole-v1__ppo__5__104"))
    writer.add_scalar("eval/episodic_return", 70, 0)
    writer.close()
    write_run(runs, "CartPole-v1__ppo__6__105", [70], step=4_000, args=budget_args(20_000))
    (runs / "CartPole-v1__ppo__6__105" / "ppo.cleanrl_model").write_bytes(b"")
    return runs


def test_unfinished_runs_are_listed_and_left_out(tmp_path):
    runs = unfinished_dir(tmp_path)
    assert [load_run(r).finished for r in find_runs(str(runs))] == [True, True, False, True, True, True]
    text, rows, notes = report_of(runs, "--out", tmp_path / "o", "--last-episodes", "1")
    assert [(r["label"], r["seeds"]) for r in rows] == [("ppo", [1, 2, 4, 5, 6])]
    assert "## Not finished" in text and "left out of the table" in text
    assert "- `CartPole-v1__ppo__3__102`: step 12,000 of 20,000 (60%)" in text
    assert notes == ["left out 1 unfinished run (listed in report.md; --include-unfinished counts them)"]

    text, rows, notes = report_of(runs, "--out", tmp_path / "o", "--last-episodes", "1", "--include-unfinished")
    assert rows[0]["seeds"] == [1, 2, 3, 4, 5, 6] and rows[0]["finished"] == [True, True, False, True, True, True]
    assert "| ppo | CartPole-v1 | 6 | 1, 2, 3 (unfinished), 4, 5, 6 |" in text
    assert "- `CartPole-v1__ppo__3__102`: step 12,000 of 20,000 (60%)" in text and 'marked "(unfinished)"' in text
    assert notes == []


def test_a_seed_run_twice_is_reported_and_counted_once(budgets_dir, tmp_path):
    write_run(budgets_dir, "CartPole-v1__ppo__1__200", [90, 90], step=10_000, args=budget_args(20_000))  # a rerun of seed 1
    write_run(budgets_dir, "CartPole-v1__ppo__1__150", [80, 80], step=10_000, args=budget_args(20_000))  # and another
    text, rows, notes = report_of(budgets_dir, "--out", tmp_path / "o", "--last-episodes", "2")
    row = next(r for r in rows if r["label"] == "ppo (20k steps)")
    assert row["seeds"] == [1, 2] and row["names"] == ["CartPole-v1__ppo__1__200", "CartPole-v1__ppo__2__101"]
    assert row["finals"].tolist() == [90, 35]
    assert "## Seeds that ran more than once" in text
    assert (
        "- ppo on CartPole-v1 at 20k steps, seed 1: used `CartPole-v1__ppo__1__200`; "
        "left out `CartPole-v1__ppo__1__150`, `CartPole-v1__ppo__1__100`" in text
    )
    assert "30k" not in text.split("## Seeds that ran more than once")[1]  # seed 1 at 30k steps is another group
    assert notes == [
        "1 seed ran more than once in a group: counted the newest run of each "
        "(listed in report.md; --keep-duplicates counts all)"
    ]

    text, rows, notes = report_of(budgets_dir, "--out", tmp_path / "o", "--last-episodes", "2", "--keep-duplicates")
    row = next(r for r in rows if r["label"] == "ppo (20k steps)")
    assert row["seeds"] == [1, 1, 1, 2] and row["finals"].tolist() == [15, 80, 90, 35]
    assert "| ppo (20k steps) | CartPole-v1 | 4 | 1, 1, 1, 2 |" in text and "(`--keep-duplicates`)" in text
    assert "all counted, also `CartPole-v1__ppo__1__150`, `CartPole-v1__ppo__1__100`" in text and notes == []


def test_a_copy_in_a_second_runs_dir_is_a_duplicate(budgets_dir, tmp_path):
    copy = tmp_path / "copy"
    write_run(copy, "CartPole-v1__dqn__1__103", [7, 9], step=10_000, args=budget_args(20_000))
    data = [load_run(r) for r in find_runs(str(budgets_dir)) + find_runs(str(copy))]
    counted, unfinished, duplicates = select_runs(data)
    assert unfinished == [] and len(counted) == len(data) - 1
    ((newest, others),) = duplicates
    assert newest.run.path == str(copy / "CartPole-v1__dqn__1__103")  # same time suffix: the later path
    assert [d.run.path for d in others] == [str(budgets_dir / "CartPole-v1__dqn__1__103")]
    assert len(select_runs(data, keep_duplicates=True)[0]) == len(data)


def test_filters_by_name_and_budget(budgets_dir, tmp_path):
    out = tmp_path / "o"
    text, rows, _ = report_of(budgets_dir, "--out", out, "--filter", "__ppo__")
    assert {r["exp_name"] for r in rows} == {"ppo"} and "Only runs whose folder name matches `__ppo__`." in text
    text, rows, _ = report_of(budgets_dir, "--out", out, "--filter", "^CartPole-v1__", "--min-steps", "25000")
    assert [(r["label"], r["budget"]) for r in rows] == [("ppo", 30_000)]  # one budget left: no budget in the name
    assert "whose folder name matches `^CartPole-v1__` and whose budget is at least 25,000 steps" in text
    _, rows, _ = report_of(budgets_dir, "--out", out, "--max-steps", "20000")
    assert {r["budget"] for r in rows} == {20_000} and len(rows) == 3
    text, rows, _ = report_of(budgets_dir, "--out", out, "--min-steps", "20000", "--max-steps", "30000")
    assert len(rows) == 4 and "whose budget is 20,000 to 30,000 steps" in text
    assert in_budget_range(5, None, None) and in_budget_range(5, 5, 5) and not in_budget_range(5, 6, None)


REFUSALS = [
    (["missing", "--out", "o"], "no such folder 'missing'"),
    (["--out", "o"], "name at least one RUNS_DIR"),
    (["RUNS", "--out", "o", "--last-episodes", "0"], "--last-episodes must be at least 1, got 0"),
    (["RUNS", "--out", "o", "--reps", "-1"], "--reps must be at least 1, got -1"),
    (["RUNS", "--out", "afile"], "exists and is not a folder"),
    (["RUNS", "--out", "afile/sub"], "is not a folder"),
    (["RUNS", "--out", ""], "--out must name a folder"),
    (["empty", "--out", "o"], "no run directories"),
    (["started", "--out", "o"], "has logged charts/episodic_return yet"),
    (["RUNS", "--out", "o", "--normalization", "nope.csv"], "--normalization 'nope.csv' is not a file"),
    (["RUNS", "--out", "o", "--reference", "nope.csv"], "--reference 'nope.csv' is not a file"),
    (["RUNS", "--out", "o", "--filter", "(ppo"], "--filter '(ppo' is not a regular expression (missing ), unterminated"),
    (["RUNS", "--out", "o", "--min-steps", "50", "--max-steps", "10"], "--min-steps 50 is above --max-steps 10"),
    (["RUNS", "--out", "o", "--min-steps", "-1"], "--min-steps must not be negative, got -1"),
    (["RUNS", "--out", "o", "--max-steps", "-5"], "--max-steps must not be negative, got -5"),
    (["RUNS", "--out", "o", "--filter", "__dqn__"], "none of the 6 runs in"),
    (["RUNS", "--out", "o", "--min-steps", "1000"], "is one whose budget is at least 1,000 steps"),
    (["stopped", "--out", "o"], "no run has finished: 1 stopped short of their budget (e.g. CartPole-v1__ppo__1__100 at step"),
]
BAD_NORMALIZATION = [
    ("env_id,low,high\nCartPole-v1,0,1\n", "needs the header columns env_id,min,max; missing min, max"),
    ("env_id,min,max\n", "has no data row"),
    ("", "needs the header columns"),
    ("env_id,min,max\nCartPole-v1,0,abc\nAcrobot-v1,-100,0\n", "line 2: max must be a finite number, got 'abc'"),
    ("env_id,min,max\nCartPole-v1,0,nan\nAcrobot-v1,-100,0\n", "max must be a finite number"),
    ("env_id,min,max\nCartPole-v1,100,100\nAcrobot-v1,-100,0\n", "line 2: CartPole-v1 needs min < max, got min 100, max 100"),
    ("env_id,min,max\nCartPole-v1,0,100\nCartPole-v1,0,200\n", "line 3: CartPole-v1 appears twice"),
    ("env_id,min,max\n,0,100\n", "line 2: empty env_id"),
    ("env_id,min,max\nCartPole-v1,0,100,7\n", "line 2: more fields than header columns"),
    ("env_id,min,max\nCartPole-v1,0,100\nPong-v5,0,21\n", "--normalization has no row for Acrobot-v1"),
    (b"\xff\xfe\x00bad", "is not a readable CSV file"),
]
BAD_REFERENCE = [
    ("env_id,exp_name,std\nCartPole-v1,ppo,1\n", "needs the header columns env_id,return; missing return"),
    ("env_id,return\nCartPole-v1,high\n", "line 2: return must be a finite number, got 'high'"),
    ("env_id,return,std\nCartPole-v1,490,-1\n", "line 2: std must not be negative, got -1"),
    ("env_id,return,std\nCartPole-v1,490,x\n", "line 2: std must be a finite number"),
    ("env_id,return,steps\nCartPole-v1,490,0\n", "line 2: steps must be positive, got 0"),
    ("env_id,exp_name,return\nCartPole-v1,ppo,1\nCartPole-v1,ppo,2\n", "line 3: CartPole-v1 ppo appears twice"),
    ("env_id,return\nCartPole-v1,1\nCartPole-v1,2\n", "line 3: CartPole-v1 (any exp_name) appears twice"),
]


def refusal_cases():
    cases = [pytest.param(args, message, None, id=message) for args, message in REFUSALS]
    for flag, bad in (("--normalization", BAD_NORMALIZATION), ("--reference", BAD_REFERENCE)):
        for text, message in bad:
            cases.append(pytest.param(["RUNS", "--out", "o", flag, "bad.csv"], message, text, id=f"{flag} {message}"))
    return cases


@pytest.mark.parametrize("args,message,csv_text", refusal_cases())
def test_bad_input_exits_2_with_one_line_and_writes_nothing(args, message, csv_text, runs_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("")
    SummaryWriter(str(tmp_path / "started" / "CartPole-v1__ppo__1__100")).close()
    write_run(tmp_path / "stopped", "CartPole-v1__ppo__1__100", [1, 2], args={"total_timesteps": 1000})
    if csv_text is not None:
        (tmp_path / "bad.csv").write_bytes(csv_text if isinstance(csv_text, bytes) else csv_text.encode())
    args = [str(runs_dir) if a == "RUNS" else a for a in args]
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as exit_info:
        main(tyro.cli(Args, args=args))
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("report: ") and message in lines[0], captured.err
    assert captured.out == ""
    assert sorted(tmp_path.rglob("*")) == before


def test_bad_input_from_the_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "cleanrl_utils.report", "missing", "--out", "o"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 2 and result.stderr == "report: no such folder 'missing'\n" and result.stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_out_folder_that_cannot_be_made(runs_dir, capsys):
    # refused by the writability check, or (as root, who may write anywhere) when making the folder
    with pytest.raises(SystemExit) as exit_info:
        main(tyro.cli(Args, args=[str(runs_dir), "--out", "/proc/no-such/report"]))
    lines = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1 and "--out '/proc/no-such/report'" in lines[0]
    assert not os.path.exists("/proc/no-such")
