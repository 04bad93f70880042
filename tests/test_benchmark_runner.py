"""cleanrl_utils.benchmark: every env x seed in a pool, logs per run, failures summarised with their exit
codes, commands split with shell-word rules and run without a shell, --workers 0, --auto-tag."""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cleanrl_utils.benchmark import STOP_GRACE, log_excerpt, plan_runs
from conftest import REPO, check_ok, script_env

# a stand-in for a training script: prints its arguments and WANDB_TAGS, fails on the env "Fail-v0"
FAKE = (
    "import os, sys; print(sys.argv[1:]); print('tags', os.environ.get('WANDB_TAGS')); "
    "sys.exit(3 if 'Fail-v0' in sys.argv else 0)"
)


def runner(*args, cwd):
    command = [sys.executable, "-m", "cleanrl_utils.benchmark", *map(str, args)]
    env = script_env() | {"PYTHONPATH": str(REPO)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


# a stand-in for a long training: starts a child of its own, writes both pids, sleeps; "Quick-v0" ends at once,
# "Stubborn-v0" (and so its child) ignores SIGTERM
SLEEPER = """import os, signal, subprocess, sys, time
if "Quick-v0" in sys.argv:
    sys.exit(0)
if "Stubborn-v0" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("pids", os.getpid(), child.pid, flush=True)
time.sleep(60)
"""


def alive(pid):
    """Whether process `pid` exists and is not a zombie (an orphan may wait a moment for its reaper)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:  # no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state != "Z"


def test_plan_is_seed_major_with_env_and_seed_appended():
    runs = plan_runs("python train.py --note 'two words' --x=\"a b\"", ["A-v0", "ALE/B-v5"], range(1, 3), "logs")
    assert [(r.env_id, r.seed) for r in runs] == [("A-v0", 1), ("ALE/B-v5", 1), ("A-v0", 2), ("ALE/B-v5", 2)]
    assert runs[1].argv == ("python", "train.py", "--note", "two words", "--x=a b", "--env-id", "ALE/B-v5", "--seed", "1")
    assert runs[1].log_path == "logs/ALE-B-v5__1.log"  # a / in the env id is written -


def test_failures_do_not_stop_the_others_and_are_summarised(tmp_path):
    command = shlex.join([sys.executable, "-c", FAKE])
    flags = ["--command", command, "--num-seeds", 2, "--workers", 2, "--no-auto-tag"]
    result = runner("--env-ids", "A-v0", "Fail-v0", *flags, cwd=tmp_path)
    assert result.returncode == 1
    logs = sorted(p.name for p in (tmp_path / "benchmark_logs").iterdir())
    assert logs == ["A-v0__1.log", "A-v0__2.log", "Fail-v0__1.log", "Fail-v0__2.log"]
    assert "['--env-id', 'A-v0', '--seed', '2']" in (tmp_path / "benchmark_logs" / "A-v0__2.log").read_text()
    assert result.stdout.count("A-v0 seed") == 2 and "[4/4," in result.stdout
    assert "2 of 4 runs failed:" in result.stderr
    assert "  Fail-v0 seed 1: exit 3, log benchmark_logs/Fail-v0__1.log; it ends with:" in result.stderr
    assert "    tags None" in result.stderr  # the end of the failed run's log
    assert "  Fail-v0 seed 2: exit 3, log benchmark_logs/Fail-v0__2.log;" in result.stderr


def test_progress_names_the_running_runs_while_none_ends(tmp_path):
    command = shlex.join([sys.executable, "-c", "import time; time.sleep(2.5)"])
    flags = ["--command", command, "--num-seeds", 1, "--workers", 1, "--progress-interval", 1]
    result = runner("--env-ids", "A-v0", *flags, cwd=tmp_path)
    check_ok(result)
    assert "s] running: A-v0 seed 1" in result.stdout and "[1/1," in result.stdout
    assert result.stdout.startswith("1 run, 1 at a time, OMP_NUM_THREADS=1 as you set it;")
    assert result.stdout.endswith("\n1 run finished\n")


def test_no_shell_is_involved(tmp_path):
    # a shell would run `touch` and expand $HOME; run without one, they reach the program as words
    command = shlex.join([sys.executable, "-c", FAKE]) + " '; touch pwned' '$HOME'"
    check_ok(runner("--env-ids", "A-v0", "--command", command, "--num-seeds", 1, "--workers", 1, cwd=tmp_path))
    assert not (tmp_path / "pwned").exists()
    assert (
        "['; touch pwned', '$HOME', '--env-id', 'A-v0', '--seed', '1']"
        in (tmp_path / "benchmark_logs" / "A-v0__1.log").read_text()
    )


def test_workers_0_prints_the_commands_and_runs_nothing(tmp_path):
    result = runner("--env-ids", "A-v0", "B-v0", "--command", "python x.py --name 'a b'", "--start-seed", 5, cwd=tmp_path)
    check_ok(result)
    lines = result.stdout.splitlines()
    assert lines[0] == "python x.py --name 'a b' --env-id A-v0 --seed 5" and len(lines) == 6
    assert list(tmp_path.iterdir()) == []


def test_auto_tag_passes_git_describe_as_wandb_tags(tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], cwd=tmp_path, check=True)
    subprocess.run([*git, "tag", "v1.2.3"], cwd=tmp_path, check=True)
    command = shlex.join([sys.executable, "-c", FAKE])
    check_ok(runner("--env-ids", "A-v0", "--command", command, "--num-seeds", 1, "--workers", 1, cwd=tmp_path))
    assert "tags v1.2.3" in (tmp_path / "benchmark_logs" / "A-v0__1.log").read_text()
    check_ok(
        runner("--env-ids", "A-v0", "--command", command, "--num-seeds", 1, "--workers", 1, "--no-auto-tag", cwd=tmp_path)
    )
    assert "tags None" in (tmp_path / "benchmark_logs" / "A-v0__1.log").read_text()


def test_runs_real_trainings(tmp_path):
    command = f"{shlex.quote(sys.executable)} {REPO / 'cleanrl' / 'ppo.py'} --total-timesteps 256 --num-envs 2 --num-steps 64"
    result = runner(
        "--env-ids", "CartPole-v1", "Acrobot-v1", "--command", command, "--num-seeds", 1, "--workers", 2, cwd=tmp_path
    )
    check_ok(result)
    runs = sorted(p.name.split("__")[0] for p in (tmp_path / "runs").iterdir())
    assert runs == ["Acrobot-v1", "CartPole-v1"] and "all 2 runs finished" in result.stdout


def test_bad_input_exits_2_with_one_line(tmp_path):
    cases = [
        (["--command", "python 'unclosed"], "does not split into words"),
        (["--command", ""], "--command is empty"),
        (["--num-seeds", 0], "--num-seeds must be at least 1"),
        (["--workers", -1], "--workers must be at least 0"),
        (["--progress-interval", 0], "--progress-interval must be a positive number"),
        (["--workers", 1, "--command", "no-such-program-xyz --a"], "cannot find the program 'no-such-program-xyz'"),
    ]
    for flags, message in cases:
        result = runner("--env-ids", "A-v0", *flags, cwd=tmp_path)
        assert result.returncode == 2, (flags, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("benchmark: ") and message in lines[0], result.stderr
    assert list(tmp_path.iterdir()) == []


def test_bad_env_ids_and_log_dirs_exit_2_with_one_line_before_anything_runs(tmp_path):
    (tmp_path / "afile").write_text("")
    quick = ["--command", shlex.join([sys.executable, "-c", "open('ran', 'w')"]), "--workers", 1]
    cases = [
        (["--env-ids", "A-v0", "B-v0", "A-v0"], "--env-ids names 'A-v0' twice (its runs would share one log file)"),
        (["--env-ids", "ALE/B-v5", "ALE-B-v5"], "'ALE/B-v5' and 'ALE-B-v5' would share log files (ALE-B-v5__{seed}.log)"),
        (["--env-ids", "A-v0", ""], "--env-ids: an env id is empty"),
        (["--env-ids", " "], "--env-ids: an env id is empty"),
        (["--env-ids", "A-v0", "A-v0", "--workers", 0], "names 'A-v0' twice"),  # refused in a dry run too
        (["--env-ids", "A-v0", "--log-dir", "afile"], "--log-dir 'afile' is a file, not a folder"),
        (["--env-ids", "A-v0", "--log-dir", "afile/logs"], "--log-dir 'afile/logs': cannot create it or write in it"),
        (["--env-ids", "A-v0", "--log-dir", "/proc/no/logs"], "cannot create it or write in it"),
    ]
    for flags, message in cases:
        result = runner(*quick, *flags, cwd=tmp_path)
        assert result.returncode == 2, (flags, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("benchmark: ") and message in lines[0], result.stderr
        assert "Traceback" not in result.stderr and result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing ran, no log dir was made
    # --workers 0 writes no logs, so it does not need the log dir
    result = runner("--env-ids", "A-v0", "--log-dir", "/proc/no/logs", "--command", "x", "--num-seeds", 1, cwd=tmp_path)
    check_ok(result)
    assert result.stdout == "x --env-id A-v0 --seed 1\n"


def test_a_tyro_argument_error_is_what_the_summary_shows(tmp_path):
    # tyro prints its error in a box that ends with a rule, a --help hint and the bottom border
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(REPO / 'cleanrl' / 'ppo.py'))} --bogus-flag 3"
    result = runner("--env-ids", "CartPole-v1", "--command", command, "--num-seeds", 1, "--workers", 1, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    log = (tmp_path / "benchmark_logs" / "CartPole-v1__1.log").read_text()
    assert "╰" in log.splitlines()[-1] and "Unrecognized options: --bogus-flag, 3" in log  # the log is left whole
    summary = result.stderr.split("; it ends with:\n")[1].splitlines()
    assert summary == ["    Unrecognized options: --bogus-flag, 3"], result.stderr


def test_log_excerpt_leaves_out_gnu_time_s_report():
    log = "ppo_atari_lstm.py: --num-envs 3 does not split into --num-minibatches 2\n"
    log += 'Command exited with non-zero status 2\n\tCommand being timed: "python x.py"\n\tExit status: 2\n'
    assert log_excerpt(log) == ["ppo_atari_lstm.py: --num-envs 3 does not split into --num-minibatches 2"]


def test_log_excerpt_skips_decoration():
    value_error = """╭─ Value error ─────────────────────────────╮
│ Error parsing --learning-rate: bad 'abc'  │
│ ───────────────────────────────────────── │
│ Argument helptext:                        │
│     --learning-rate FLOAT                 │
│ ───────────────────────────────────────── │
│ For full helptext, see cleanrl/ppo.py --help │
╰───────────────────────────────────────────╯
"""
    assert log_excerpt("loading\n" + value_error) == ["Value error", "Error parsing --learning-rate: bad 'abc'"]
    unrecognized = "╭─ Unrecognized options ─╮\n│ Unrecognized options: --x │\n│ ──── │\n│ Perhaps you meant: │\n╰──────╯\n"
    assert log_excerpt(unrecognized) == ["Unrecognized options: --x"]  # not its title again
    traceback = "step 1\nTraceback (most recent call last):\n  File 'x.py', line 1\nValueError: nan loss\n\n\n"
    assert log_excerpt(traceback) == ["Traceback (most recent call last):", "  File 'x.py', line 1", "ValueError: nan loss"]
    rich_traceback = "╭─ Traceback ─╮\n│ x = 1 / 0 │\n╰─────────────╯\nZeroDivisionError: division by zero\n"
    assert log_excerpt(rich_traceback) == ["Traceback", "x = 1 / 0", "ZeroDivisionError: division by zero"]
    assert log_excerpt("a\nb\nc\nd\n──────\n   \n") == ["b", "c", "d"]
    assert log_excerpt("") == [] and log_excerpt("\n ─── \n") == []


def test_a_failed_run_with_an_empty_log(tmp_path):
    command = shlex.join([sys.executable, "-c", "raise SystemExit(4)"])
    result = runner("--env-ids", "A-v0", "--command", command, "--num-seeds", 1, "--workers", 1, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "1 of 1 run failed:",
        "  A-v0 seed 1: exit 4, log benchmark_logs/A-v0__1.log (empty)",
    ]


@pytest.mark.parametrize("signum, stubborn", [(signal.SIGINT, False), (signal.SIGTERM, True)])
def test_a_signal_stops_every_run_and_its_children(tmp_path, signum, stubborn):
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    command = shlex.join([sys.executable, "sleeper.py"])
    second = "Stubborn-v0" if stubborn else "B-v0"
    args = ["--env-ids", "Quick-v0", "A-v0", second, "Later-v0", "--command", command, "--num-seeds", "1"]
    argv = [sys.executable, "-m", "cleanrl_utils.benchmark", *args, "--workers", "2", "--no-auto-tag"]
    env = script_env() | {"PYTHONPATH": str(REPO)}
    process = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    logs = [tmp_path / "benchmark_logs" / name for name in ["A-v0__1.log", f"{second}__1.log"]]
    deadline = time.monotonic() + 120
    try:
        while not all(log.exists() and "pids" in log.read_text() for log in logs):
            assert time.monotonic() < deadline and process.poll() is None, "the runs did not start"
            time.sleep(0.2)
        pids = [int(pid) for log in logs for pid in log.read_text().split()[1:3]]
        assert all(alive(pid) for pid in pids)
        stopping = time.monotonic()
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
        took = time.monotonic() - stopping
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr and "Traceback" not in stdout
    assert stderr.splitlines() == [
        f"benchmark: stopped by {signal.Signals(signum).name}: 1 of 4 runs finished (0 failed), 2 stopped, 1 not started",
        "  stopped: A-v0 seed 1, log benchmark_logs/A-v0__1.log",
        f"  stopped: {second} seed 1, log benchmark_logs/{second}__1.log",
    ]
    assert "Quick-v0 seed 1: ok" in stdout and not (tmp_path / "benchmark_logs" / "Later-v0__1.log").exists()
    # the runs and the processes they started are gone (Stubborn-v0's two after the grace period, by SIGKILL)
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if alive(pid)]
    assert took >= STOP_GRACE if stubborn else took < STOP_GRACE  # no waiting when SIGTERM ends the runs


@pytest.mark.parametrize("case", ["default", "no-one-thread", "user-set"])
def test_each_run_gets_one_thread_and_a_cpu_of_its_own(tmp_path, case):
    # tests/fake_trainer.py prints the thread variables it got and the CPUs it may run on
    env = {k: v for k, v in script_env().items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")}
    env |= {"PYTHONPATH": str(REPO)} | ({"OMP_NUM_THREADS": "3"} if case == "user-set" else {})
    command = shlex.join([sys.executable, str(REPO / "tests" / "fake_trainer.py"), "--exp-name", "x"])
    args = ["--env-ids", "A-v0", "B-v0", "--command", command, "--num-seeds", 1, "--workers", 2]
    args += ["--no-one-thread"] if case == "no-one-thread" else []
    result = subprocess.run([sys.executable, "-m", "cleanrl_utils.benchmark", *map(str, args)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)  # fmt: skip
    check_ok(result)
    mine = sorted(os.sched_getaffinity(0))
    logs = [(tmp_path / "benchmark_logs" / f"{env_id}__1.log").read_text().splitlines() for env_id in ("A-v0", "B-v0")]
    cpus = [next(line for line in log if line.startswith("cpus=")) for log in logs]
    if case == "default":
        assert "2 runs, 2 at a time, one thread each;" in result.stdout
        assert all("OMP_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false" in "\n".join(log) for log in logs)
        # the two slots on two CPUs (one, where this process may use only one)
        assert sorted(cpus) == sorted(f"cpus={cpu}" for cpu in (mine[0], mine[1 % len(mine)]))
    else:
        expected = "OMP_NUM_THREADS=3 as you set it" if case == "user-set" else "the libraries' default threads"
        assert f"2 runs, 2 at a time, {expected};" in result.stdout
        assert all(f"OMP_NUM_THREADS={'3' if case == 'user-set' else None} XLA_FLAGS=None" in log for log in logs)
        assert cpus == [f"cpus={','.join(map(str, mine))}"] * 2


def test_more_workers_than_cpus_are_named_in_the_header(tmp_path):
    cpus = len(os.sched_getaffinity(0))
    env_ids = [f"E{i}-v0" for i in range(cpus + 1)]
    env = {k: v for k, v in script_env().items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")}
    command = shlex.join([sys.executable, "-c", FAKE])
    args = ["--env-ids", *env_ids, "--command", command, "--num-seeds", 1, "--workers", cpus + 1]
    result = subprocess.run([sys.executable, "-m", "cleanrl_utils.benchmark", *map(str, args)], cwd=tmp_path,
                            env=env | {"PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600)  # fmt: skip
    check_ok(result)
    assert f"one thread each (more than the {cpus} CPUs this process may use: runs share them)" in result.stdout
