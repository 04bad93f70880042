"""The benchmark scripts run end to end at a tiny budget, writing only where they are told."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, run_benchmark, script_env


def test_ppo_sh_runs_envs_times_seeds_and_reports(tmp_path):
    result = run_benchmark(["bash", "benchmark/ppo.sh"], tmp_path, ENVS="CartPole-v1 Acrobot-v1", SEEDS="1 2", STEPS="2048")
    assert sorted(os.listdir(tmp_path / "out" / "runs"))[0].startswith("Acrobot-v1__ppo__1__")
    assert len(os.listdir(tmp_path / "out" / "runs")) == 4
    report = (tmp_path / "ppo_classic_control" / "report.md").read_text()
    assert "| ppo | Acrobot-v1 | 2 | 1, 2 |" in report and "| ppo | CartPole-v1 | 2 | 1, 2 |" in report
    assert "reference" not in report  # 2048 steps is not the published budget, so no published column
    for env_id in ("Acrobot-v1", "CartPole-v1"):
        assert (tmp_path / "ppo_classic_control" / f"{env_id}.png").stat().st_size > 0
    assert report in result.stdout


def test_ppo_atari_breakout_sh_reports_memory_and_curve(tmp_path):
    result = run_benchmark(["bash", "benchmark/ppo_atari_breakout.sh", "--num-envs", "2"], tmp_path, STEPS="3072")
    assert "Maximum resident set size" in result.stdout
    assert "| ppo_atari | BreakoutNoFrameskip-v4 | 1 | 1 |" in (tmp_path / "ppo_atari_breakout" / "report.md").read_text()
    assert (tmp_path / "ppo_atari_breakout" / "BreakoutNoFrameskip-v4.png").stat().st_size > 0


@pytest.mark.parametrize("script,steps", [("ppo_vs_sb3_speed.py", "1024"), ("dqn_vs_sb3_speed.py", "12000")])
def test_sb3_speed_comparison_writes_its_table(script, steps, tmp_path):
    markdown = tmp_path / "speed.md"
    command = [sys.executable, f"benchmark/{script}", "--total-timesteps", steps, "--rounds", "1", "--markdown", str(markdown)]
    subprocess.run(command, cwd=REPO, env=script_env(), check=True, capture_output=True, timeout=600)
    assert "SPS ratio cleanrl / SB3" in markdown.read_text()


def test_torch_vs_jax_speed_writes_its_ratio_table(tmp_path):
    markdown = tmp_path / "speed.md"
    command = [sys.executable, "benchmark/torch_vs_jax_speed.py", "--only", "dqn", "--rounds", "1", "--dqn-steps", "11000"]
    subprocess.run(
        command + ["--markdown", str(markdown)], cwd=REPO, env=script_env(), check=True, capture_output=True, timeout=600
    )
    table = markdown.read_text()
    assert "| round | dqn.py SPS | dqn_jax.py SPS |" in table and "- **dqn_jax.py / dqn.py: " in table
    assert "--only dqn --rounds 1 --dqn-steps 11000 --threads 1`" in table


def test_gpu_speed_writes_its_table_beside_leanrls(tmp_path):
    # two of its five runs at --tiny (each run the same code path; the Playground script's runs are tested in its own
    # file): a row each with a steady-state SPS, no GPU memory on a machine without nvidia-smi, and LeanRL's figures
    markdown = tmp_path / "speed.md"
    command = [sys.executable, "benchmark/gpu_speed.py", "--tiny", "--markdown", str(markdown)]
    command += ["--scripts", "ppo_atari_envpool.py", "td3_continuous_action.py"]
    subprocess.run(command, cwd=REPO, env=script_env(), check=True, capture_output=True, timeout=600)
    table = markdown.read_text()
    assert "(--tiny: a check of the tool, not a measurement)" in table
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == ["| `ppo_atari_envpool.py`", "| `td3_continuous_action.py`"]
    for row, (cleanrl, leanrl) in zip(rows, [("1,022", "6,809"), ("272", "936")]):
        cells = row[2:-1].split(" | ")
        assert float(cells[2].replace(",", "")) > 0 and cells[4:6] == [cleanrl, leanrl] and cells[7].strip() == "", row
        assert cells[3] == ("n/a" if shutil.which("nvidia-smi") is None else cells[3])


@pytest.mark.parametrize(
    "script,args,message",
    [
        ("torch_vs_jax_speed.py", ["--only", "ppo"], "--only takes one or more of dqn, td3, ppo_envpool, got ppo"),
        ("torch_vs_jax_speed.py", ["--ppo-steps", "1000"], "--ppo-steps must be a positive multiple of one batch"),
        ("torch_vs_jax_speed.py", ["--td3-steps", "5000"], "--td3-steps must be at least 5,100"),
        ("ppo_vs_sb3_speed.py", ["--rounds", "0"], "--rounds must be at least 1"),
        ("ppo_vs_sb3_speed.py", ["--total-timesteps", "100"], "at least one batch"),
        ("ppo_vs_sb3_speed.py", ["--markdown", "/no/such/dir/s.md"], "its folder does not exist"),
        ("dqn_vs_sb3_speed.py", ["--rounds", "0"], "--rounds must be at least 1"),
        ("dqn_vs_sb3_speed.py", ["--total-timesteps", "100"], "at least 12000"),
        ("atari_replay_memory.py", ["--script", "nope"], "no cleanrl/nope.py"),
        ("continuous_vs_sb3.py", ["--algos", "ppo"], "--algos must name some of sac, td3, ddpg"),
        ("continuous_vs_sb3.py", ["--algos", "td3", "--total-timesteps", "25050"], "must be at least 25100"),
        ("continuous_vs_sb3.py", ["--seeds", "-1"], "--seeds must be in [0, 2**32 - 1]"),
        ("continuous_vs_sb3.py", ["--env-ids", "NoSuchEnv-v0"], "cannot make 'NoSuchEnv-v0'"),
        ("continuous_vs_sb3.py", ["--env-ids", "CartPole-v1"], "CartPole-v1 has Discrete(2) actions"),
        ("continuous_vs_sb3.py", ["--markdown", "/no/such/dir/s.md"], "its folder does not exist"),
        ("continuous_vs_sb3.py", ["--exclude-sps", "sac:Hopper-v5"], "--exclude-sps takes ALGO:ENV_ID:SEED"),
        ("qr_dqn_vs_sb3.py", ["--env-ids", "Pendulum-v1"], "Pendulum-v1 has Box(-2.0, 2.0, (1,), float32) actions"),
        ("qr_dqn_vs_sb3.py", ["--total-timesteps", "10999"], "must be at least 11000 on CartPole-v1"),
        ("qr_dqn_vs_sb3.py", ["--exclude-sps", "dqn:CartPole-v1:1"], "--exclude-sps takes qr_dqn:ENV_ID:SEED"),
        ("atari_replay_memory.py", ["--buffer-size", "10"], "--buffer-size must be at least 1000"),
        ("gpu_speed.py", ["--scripts", "ppo.py"], "--scripts takes some of ppo_atari_envpool.py, "),
        ("gpu_speed.py", ["--markdown", "/no/such/dir/s.md"], "its folder does not exist"),
        ("gpu_speed.py", ["--wheels", "/no/such/wheels"], "--wheels /no/such/wheels is not a folder"),
    ],
)
def test_benchmark_tools_bad_input_exits_2(script, args, message, tmp_path):
    result = subprocess.run([sys.executable, f"benchmark/{script}", *args], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr


@pytest.mark.parametrize("script", ["dqn_atari", "c51_atari", "rainbow_atari", "qdagger_dqn_atari_impalacnn"])
def test_atari_replay_memory_reports_bytes_per_transition(script, tmp_path):
    markdown = tmp_path / "memory.md"
    command = [sys.executable, "benchmark/atari_replay_memory.py", "--script", script, "--buffer-size", "3000"]
    subprocess.run(command + ["--markdown", str(markdown)], cwd=REPO, env=script_env(), check=True, timeout=600)
    table = markdown.read_text()
    assert "| frames held | 3,000 |" in table and "bytes per stored transition" in table


@pytest.mark.parametrize(
    "name,flags",
    [
        ("dqn", ["--learning-starts", "500"]),
        ("c51", ["--learning-starts", "500"]),
        ("pqn", []),
        ("dqn_jax", ["--learning-starts", "500"]),
    ],
)
def test_value_based_classic_control_benchmarks_run_and_report(name, flags, tmp_path):
    run_benchmark(["bash", f"benchmark/{name}.sh", *flags], tmp_path, ENVS="CartPole-v1", SEEDS="1", STEPS="1024")
    table = (tmp_path / f"{name}_classic_control" / "report.md").read_text()
    assert f"| {name} | CartPole-v1 | 1 | 1 |" in table


@pytest.mark.parametrize(
    "name,flags",
    [
        ("sac", ["--learning-starts", "100", "--buffer-size", "500", "--batch-size", "32"]),
        ("td3", ["--learning-starts", "100", "--buffer-size", "500", "--batch-size", "32"]),
        ("ddpg", ["--learning-starts", "100", "--buffer-size", "500", "--batch-size", "32"]),
        ("rpo", ["--num-steps", "128", "--num-minibatches", "4"]),
        # a JAX twin through the same suite (no --no-cuda; one XLA thread); the other *_jax.sh are the same one line
        ("sac_jax", ["--learning-starts", "100", "--buffer-size", "500", "--batch-size", "32"]),
    ],
)
def test_mujoco_benchmarks_run_and_report(name, flags, tmp_path):
    run_benchmark(["bash", f"benchmark/{name}.sh", *flags], tmp_path, ENVS="InvertedPendulum-v5", SEEDS="1", STEPS="256")
    table = (tmp_path / f"{name}_mujoco" / "report.md").read_text()
    script = name.removesuffix("_jax") + "_continuous_action" + ("_jax" if name.endswith("_jax") else "")
    assert f"| {script} | InvertedPendulum-v5 | 1 | 1 |" in table


def test_continuous_vs_sb3_writes_its_table_and_resumes(tmp_path):
    markdown = tmp_path / "side_by_side.md"
    command = [sys.executable, "benchmark/continuous_vs_sb3.py", "--algos", "sac", "--env-ids", "Pendulum-v1"]
    command += ["--seeds", "1", "--total-timesteps", "5300", "--out", str(tmp_path / "out"), "--markdown", str(markdown)]
    first = subprocess.run(command, cwd=REPO, env=script_env(), check=True, capture_output=True, text=True, timeout=600)
    assert "running cleanrl sac Pendulum-v1 seed 1" in first.stdout and "running sb3 sac" in first.stdout
    row = [line for line in markdown.read_text().splitlines() if line.startswith("| sac | Pendulum-v1 |")]
    assert len(row) == 1 and row[0].endswith("| 1 (1 timed) |")
    # finished runs are kept: a second start only rewrites the table
    again = subprocess.run(command, cwd=REPO, env=script_env(), check=True, capture_output=True, text=True, timeout=60)
    assert "running" not in again.stdout and row[0] in markdown.read_text()
    # a pair whose speed was disturbed keeps its returns but leaves the SPS columns, and the table says so
    untimed = [*command, "--table-only", "--exclude-sps", "sac:Pendulum-v1:1"]
    subprocess.run(untimed, cwd=REPO, env=script_env(), check=True, capture_output=True, text=True, timeout=60)
    table = markdown.read_text()
    assert "| — | — | — | 1 (0 timed) |" in table and row[0].split("|")[3] in table
    assert "Not timed (other work shared the core, so their SPS is not comparable): sac:Pendulum-v1:1." in table
    # an unfinished run (no result file) is run again from a clean folder, not mixed with what it left
    (tmp_path / "out" / "cleanrl_sac_Pendulum-v1_1_5300.json").unlink()
    third = subprocess.run(command, cwd=REPO, env=script_env(), check=True, capture_output=True, text=True, timeout=600)
    assert "running cleanrl sac" in third.stdout and "running sb3" not in third.stdout


def test_qr_dqn_vs_sb3_contrib_writes_its_table(tmp_path):
    markdown = tmp_path / "side_by_side.md"
    command = [sys.executable, "benchmark/qr_dqn_vs_sb3.py", "--env-ids", "CartPole-v1", "--seeds", "1"]
    command += ["--total-timesteps", "1200", "--learning-starts", "200", "--out", str(tmp_path / "out")]
    result = subprocess.run(
        [*command, "--markdown", str(markdown)], cwd=REPO, env=script_env(), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "running cleanrl qr_dqn CartPole-v1 seed 1" in result.stdout and "running sb3 qr_dqn" in result.stdout
    row = [line for line in markdown.read_text().splitlines() if line.startswith("| qr_dqn | CartPole-v1 |")]
    assert len(row) == 1 and row[0].endswith("| 1 (1 timed) |")


def test_dqn_atari_breakout_sh_reports_memory_and_curve(tmp_path):
    flags = ["--learning-starts", "200", "--buffer-size", "1000", "--batch-size", "8"]
    result = run_benchmark(["bash", "benchmark/dqn_atari_breakout.sh", *flags], tmp_path, STEPS="600")
    assert "Maximum resident set size" in result.stdout and "replay buffer: 1000 frames" in result.stdout
    assert "| dqn_atari | BreakoutNoFrameskip-v4 | 1 | 1 |" in (tmp_path / "dqn_atari_breakout" / "report.md").read_text()


def test_ppo_sh_refuses_an_out_folder_that_already_holds_runs(tmp_path):
    (tmp_path / "out" / "runs" / "CartPole-v1__ppo__1__100").mkdir(parents=True)
    result = subprocess.run(
        ["bash", "benchmark/ppo.sh"],
        cwd=REPO,
        env=script_env() | {"OUT": str(tmp_path / "out")},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "already holds runs" in result.stderr
