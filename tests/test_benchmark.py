"""The benchmark scripts run end to end at a tiny budget, writing only where they are told."""

import os
import subprocess
import sys

import pytest

from conftest import REPO, script_env


def run_benchmark(command, tmp_path, **env):
    result = subprocess.run(
        command,
        cwd=REPO,
        env=script_env() | {"OUT": str(tmp_path / "out"), "RESULTS": str(tmp_path)} | env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result


def test_ppo_sh_runs_envs_times_seeds_and_reports(tmp_path):
    result = run_benchmark(["bash", "benchmark/ppo.sh"], tmp_path, ENVS="CartPole-v1 Acrobot-v1", SEEDS="1 2", STEPS="2048")
    assert sorted(os.listdir(tmp_path / "out" / "runs"))[0].startswith("Acrobot-v1__ppo__1__")
    assert len(os.listdir(tmp_path / "out" / "runs")) == 4
    table = (tmp_path / "ppo_classic_control_table.md").read_text()
    assert "| ppo | Acrobot-v1 | 2 | 1, 2 |" in table and "| ppo | CartPole-v1 | 2 | 1, 2 |" in table
    assert (tmp_path / "ppo_classic_control.png").stat().st_size > 0
    assert table in result.stdout


def test_ppo_atari_breakout_sh_reports_memory_and_curve(tmp_path):
    result = run_benchmark(["bash", "benchmark/ppo_atari_breakout.sh", "--num-envs", "2"], tmp_path, STEPS="3072")
    assert "Maximum resident set size" in result.stdout
    assert "| ppo_atari | BreakoutNoFrameskip-v4 | 1 | 1 |" in (tmp_path / "ppo_atari_breakout_table.md").read_text()
    assert (tmp_path / "ppo_atari_breakout.png").stat().st_size > 0


def test_sb3_speed_comparison_writes_its_table(tmp_path):
    markdown = tmp_path / "speed.md"
    subprocess.run(
        [
            sys.executable,
            "benchmark/ppo_vs_sb3_speed.py",
            "--total-timesteps",
            "1024",
            "--rounds",
            "1",
            "--markdown",
            str(markdown),
        ],
        cwd=REPO,
        env=script_env(),
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert "SPS ratio cleanrl / SB3" in markdown.read_text()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--rounds", "0"], "--rounds must be at least 1"),
        (["--total-timesteps", "100"], "at least one batch"),
        (["--markdown", "/no/such/dir/s.md"], "its folder does not exist"),
    ],
)
def test_sb3_speed_comparison_bad_input_exits_2(args, message, tmp_path):
    result = subprocess.run([sys.executable, "benchmark/ppo_vs_sb3_speed.py", *args], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr


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
