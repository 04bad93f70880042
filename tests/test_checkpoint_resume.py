"""Long runs a researcher can trust (issues 22 and 31), run as a user would, one script of each family: a training
killed with SIGKILL and resumed with --resume (one run folder, every logged step once, the restored state equal to
the saved one leaf by leaf), Ctrl-C and SIGTERM ending a run in one line with a command that goes on as printed,
and the bad starts around them (an unreadable --resume, a read-only or full working folder, a --track at a terminal
without a W&B login). The checkpoint module's own cases are in tests/test_checkpoint.py."""

import os
import pty
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_checkpoint import assert_same

from cleanrl_utils.checkpoint import decode, read
from cleanrl_utils.report import read_scalars
from conftest import (
    PPO_TAGS,
    SCRIPTS,
    check_ok,
    check_refused,
    load_script,
    only_run_dir,
    run_script,
    script_env,
    start_script,
)

# 4 envs x 128 steps = 512 steps an iteration, 100 iterations: about 10 s of CartPole on one core
PPO_RUN = ["--total-timesteps", 51200, "--num-envs", 4, "--num-steps", 128]
# Breakout at 2 envs x 32 steps = 64 steps an iteration, 12 iterations
PPO_ATARI_RUN = ["--total-timesteps", 768, "--num-envs", 2, "--num-steps", 32, "--update-epochs", 1]
# envpool's Breakout at 4 envs x 32 steps = 128 steps an iteration, 16 iterations
ENVPOOL_RUN = ["--total-timesteps", 2048, "--num-envs", 4, "--num-steps", 32, "--update-epochs", 1]
# CartPole, a loss point every 1000 steps (100 updates of one per 10 steps) from step 2000
DQN_RUN = ["--total-timesteps", 20000, "--learning-starts", 1000]
# CartPole, a loss point every 1000 steps from step 2000: about 20 s on one core
C51_JAX_RUN = ["--total-timesteps", 30000, "--learning-starts", 1000]
# Pendulum, one update a step from step 200, a loss point every 100 steps: 1000 updates, about 12 s of one core
SAC_RUN = ["--env-id", "Pendulum-v1", "--total-timesteps", 1200, "--learning-starts", 200]
# the proof-of-memory task at 4 envs x 32 steps = 128 steps an iteration, 40 iterations, a small transformer
TRXL_RUN = [
    *["--total-timesteps", 5120, "--env-id", "ProofofMemory-v0", "--num-envs", 4, "--num-steps", 32],
    *["--num-minibatches", 2, "--trxl-num-layers", 1, "--trxl-dim", 32, "--trxl-num-heads", 2, "--trxl-memory-length", 8],
]
# its learning rate anneals over --anneal-steps, not over the run: the tags but that one, and its entropy coefficient
TRXL_TAGS = [tag for tag in PPO_TAGS if tag != "charts/learning_rate"] + ["charts/entropy_coefficient"]
SAC_TAGS = ["losses/qf1_values", "losses/qf1_loss", "losses/actor_loss", "losses/alpha", "losses/alpha_loss"]


def wait_for_checkpoint(cwd, process, script, at_least, timeout=300):
    """The checkpoint of the one run under `cwd` once its global_step reaches `at_least`. Each read is whole: the
    module renames a finished file into place, so an open one is never rewritten."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for path in Path(cwd).glob("runs/*/checkpoint.pt"):
            checkpoint = read(str(path), script)
            if checkpoint["global_step"] >= at_least:
                return path, checkpoint
        assert process.poll() is None, f"the run ended before step {at_least}: {process.communicate()}"
        time.sleep(0.02)
    raise AssertionError(f"no checkpoint at step {at_least} in {timeout} s")


def wait_for_progress(process):
    """Reads the run's stdout up to its first progress line (written after 10 s of training)."""
    for line in process.stdout:
        if line.startswith("global_step="):
            return line
    raise AssertionError(f"the run ended without a progress line: {process.communicate()}")


# one script of each family: its run, --checkpoint-every, the step to kill it after, the scalars to follow, their
# first step and spacing
KILLED = [
    ("ppo.py", PPO_RUN, 4, 4096, PPO_TAGS, 512, 512),
    ("ppo_atari.py", PPO_ATARI_RUN, 2, 256, PPO_TAGS, 64, 64),
    ("ppo_trxl.py", TRXL_RUN, 4, 2048, TRXL_TAGS, 128, 128),
    ("ppo_atari_envpool.py", ENVPOOL_RUN, 4, 1024, PPO_TAGS, 128, 128),
    ("dqn.py", DQN_RUN, 2000, 8000, ["losses/td_loss", "losses/q_values", "charts/epsilon"], 2000, 1000),
    ("sac_continuous_action.py", SAC_RUN, 300, 600, SAC_TAGS, 300, 100),
    ("c51_jax.py", C51_JAX_RUN, 2000, 8000, ["losses/loss", "losses/q_values", "charts/epsilon"], 2000, 1000),
]


@pytest.mark.parametrize("script,flags,every,kill_at,tags,first,spacing", KILLED, ids=[k[0] for k in KILLED])
def test_a_run_killed_with_sigkill_resumes_where_its_checkpoint_left_it(
    script, flags, every, kill_at, tags, first, spacing, workdir
):
    process = start_script(script, *flags, "--checkpoint-every", every, cwd=workdir)
    path, saved = wait_for_checkpoint(workdir, process, script, kill_at)
    process.kill()  # SIGKILL: nothing of the script runs after it
    process.communicate()
    run_dir, total = path.parent, flags[flags.index("--total-timesteps") + 1]

    # the resumed run, stopped where its loop would start: every entry of the training state and every random
    # generator as saved (in a copy of the working folder, so that its log does not join the run's)
    aside = workdir.parent / f"{workdir.name}-aside"
    shutil.copytree(workdir / "runs", aside / "runs")
    restored_path = aside / "restored.pt"
    driver = workdir.parent / f"{workdir.name}-up_to_the_loop.py"
    driver.write_text(UP_TO_THE_LOOP)
    args = [SCRIPTS / script, restored_path, "--resume", path.relative_to(workdir)]
    result = run_script(driver, *args, cwd=aside, timeout=300)  # as `python driver.py ARGS`, forked
    assert result.returncode == 0, result.stderr[-3000:]
    restored = torch.load(restored_path, weights_only=False)
    assert sorted(restored["state"]) == sorted(saved["state"])
    for name, (kind, payload) in saved["state"].items():
        assert restored["state"][name][0] == kind, name
        assert_same(decode(restored["state"][name][1]), decode(payload), name)
    assert_same(decode(restored["rng"]), decode(saved["rng"]), "rng")
    assert (restored["global_step"], restored["count"]) == (saved["global_step"], saved["count"])
    shutil.rmtree(aside)

    resumed = run_script(script, "--resume", run_dir, cwd=workdir)
    check_ok(resumed)
    assert only_run_dir(workdir) == run_dir  # the same run folder, no new one
    assert f"global_step={total}, 100.0% of {total}," in resumed.stdout
    # the log goes on from the checkpoint: each point once, whatever the killed run had logged after it
    for tag in tags:
        steps, _ = read_scalars(str(run_dir), tag)
        assert list(steps) == list(range(first, total + 1, spacing)), tag
    if "charts/learning_rate" in tags:  # the schedule continues where it was: annealed over the whole run
        _, rates = read_scalars(str(run_dir), "charts/learning_rate")
        lr, iterations = saved["args"]["learning_rate"], total // spacing
        assert [round(r / lr, 5) for r in rates] == [round(1 - i / iterations, 5) for i in range(iterations)]
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # one log per part, in the same folder


UP_TO_THE_LOOP = """
import signal, sys
import torch
script, out, *args = sys.argv[1:]
sys.argv = [script, *args]


class AtTheLoop(Exception):
    pass


def set_handler(signum, handler):  # the module sets its handlers at the end of start(), after --resume's restore
    raise AtTheLoop


signal.signal = set_handler
run = {"__name__": "__main__", "__file__": script}
try:
    exec(compile(open(script).read(), script, "exec"), run)
except AtTheLoop:
    pass
torch.save(run["ckpt"].snapshot(), out)
"""


def test_resume_refuses_what_it_cannot_continue_and_extends_a_finished_run(workdir, fork_script):
    check_ok(run_script("ppo.py", "--total-timesteps", 1024, "--checkpoint-every", 5, cwd=workdir))
    run_dir = only_run_dir(workdir)
    checkpoint = read(str(run_dir / "checkpoint.pt"), "ppo.py")
    assert checkpoint["count"] == 2 and checkpoint["finished"]  # written at the end too, not only every 5 iterations
    logs = sorted(run_dir.glob("events.out.tfevents.*"))
    # nothing left to train at its own budget; another game for the saved networks; a copy of the run elsewhere;
    # a checkpoint of another script
    result = fork_script("ppo.py", "--resume", run_dir, cwd=workdir)
    assert (
        result.returncode == 2 and "ppo.py: nothing left: " in result.stderr and "give more --total-timesteps" in result.stderr
    )
    result = fork_script("ppo.py", "--resume", run_dir, "--env-id", "Acrobot-v1", "--total-timesteps", 2048, cwd=workdir)
    assert result.returncode == 2 and "ppo.py: --env-id cannot change on --resume" in result.stderr, result.stderr
    copy = workdir / "elsewhere" / run_dir.name
    copy.parent.mkdir()
    copy.mkdir()
    (copy / "checkpoint.pt").write_bytes((run_dir / "checkpoint.pt").read_bytes())
    result = fork_script("ppo.py", "--resume", copy, "--total-timesteps", 2048, cwd=workdir)
    assert result.returncode == 2 and f"resume runs/{run_dir.name} from the folder that holds it" in result.stderr
    result = fork_script("dqn.py", "--resume", run_dir, cwd=workdir)
    assert result.returncode == 2 and "was written by ppo.py, not dqn.py: resume it with ppo.py" in result.stderr
    for refused in (result,):
        assert len(refused.stderr.strip().splitlines()) == 1
    assert sorted(run_dir.glob("events.out.tfevents.*")) == logs  # a refused resume wrote nothing
    # a larger budget goes on from the end
    check_ok(run_script("ppo.py", "--resume", run_dir, "--total-timesteps", 2048, cwd=workdir))
    steps, _ = read_scalars(str(run_dir), "charts/SPS")
    assert list(steps) == [512, 1024, 1536, 2048]


SIGNALLED = [("ppo.py", signal.SIGINT), ("ppo.py", signal.SIGTERM), ("dqn.py", signal.SIGTERM), ("c51_jax.py", signal.SIGINT)]


@pytest.mark.parametrize("script,signum", SIGNALLED, ids=[f"{s}-{signal.Signals(n).name}" for s, n in SIGNALLED])
def test_ctrl_c_or_sigterm_saves_a_checkpoint_says_so_and_goes_on_as_printed(script, signum, workdir):
    long_run = ["--total-timesteps", 10**7]  # stopped long before its end; only the signal writes a checkpoint
    process = start_script(script, *long_run, "--checkpoint-every", 10**6, cwd=workdir)
    wait_for_progress(process)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    name, again = signal.Signals(signum).name, "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    first, line = stderr.strip().splitlines()[-2:]
    assert first.startswith(f"{script}: {name}: stopping after the step under way, with a checkpoint; a second {again} ")
    assert "steps of this run" in first  # no checkpoint yet: a second signal would lose them all
    run_dir = only_run_dir(workdir)
    checkpoint = read(str(run_dir / "checkpoint.pt"), script)
    prefix = f"{script}: stopped by {name} at global_step {checkpoint['global_step']}; saved in runs/{run_dir.name}/"
    assert line.startswith(prefix + "checkpoint.pt; go on with: "), line
    steps, _ = read_scalars(str(run_dir), "charts/SPS")
    assert steps[-1] <= checkpoint["global_step"]  # the writer was closed: the log reaches the stop
    # the printed command works as printed, with no virtual environment on PATH
    command = shlex.split(line.split("go on with: ")[1]) + ["--total-timesteps", str(checkpoint["global_step"] + 2048)]
    assert command[0] == sys.executable
    env = script_env() | {"PATH": "/usr/bin:/bin"}
    env.pop("VIRTUAL_ENV", None)
    resumed = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    check_ok(resumed)
    assert only_run_dir(workdir) == run_dir
    assert read(str(run_dir / "checkpoint.pt"), script)["finished"]


def test_the_first_ctrl_c_says_at_once_what_happens_and_a_second_stops_at_once(workdir):
    # Breakout iterations of 8 envs x 128 steps take seconds: the first press must answer before the one under way ends
    flags = ["--total-timesteps", 10**7, "--num-envs", 8, "--num-steps", 128, "--checkpoint-every", 2]
    process = start_script("ppo_atari.py", *flags, cwd=workdir)
    wait_for_checkpoint(workdir, process, "ppo_atari.py", 2048)
    process.send_signal(signal.SIGINT)
    sent, first = time.time(), process.stderr.readline()
    assert time.time() - sent < 2.0, "the first Ctrl-C must be answered at once"
    assert first.startswith("ppo_atari.py: SIGINT: stopping after the step under way, with a checkpoint; a second Ctrl-C")
    assert "steps since the checkpoint at global_step " in first
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=60)
    assert process.returncode == 130 and rest.strip() == "ppo_atari.py: stopped at once by SIGINT; files written before stay"


def test_without_checkpoints_a_short_run_stops_at_ctrl_c_as_python_does(workdir):
    # the module (and its handlers) come only with --checkpoint-every or --resume: here Ctrl-C is Python's own
    process = start_script("ppo.py", "--total-timesteps", 10**7, cwd=workdir)
    wait_for_progress(process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode != 0 and "KeyboardInterrupt" in stderr
    assert not (only_run_dir(workdir) / "checkpoint.pt").exists()


def test_the_progress_line_gives_the_share_done_and_the_time_left(workdir):
    result = run_script("ppo.py", "--total-timesteps", 2048, cwd=workdir)
    check_ok(result)
    last = [line for line in result.stdout.splitlines() if line.startswith("global_step=")][-1]
    assert last.startswith("global_step=2048, 100.0% of 2048, episodic_return(last ") and last.endswith(", 0:00:00 left")


@pytest.mark.parametrize("script", ["ppo.py", "dqn.py", "c51_jax.py", "sac_continuous_action.py"])
def test_an_unreadable_resume_path_exits_2_in_one_line(script, workdir, fork_script):
    result = fork_script(script, "--resume", "runs/nothing-here", cwd=workdir)
    check_refused(result, script, "cannot resume from runs/nothing-here: no such run folder or checkpoint file", workdir)
    (workdir / "not-a-checkpoint").write_text("hello")
    result = fork_script(script, "--resume", "not-a-checkpoint", cwd=workdir)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"{script}: cannot resume from not-a-checkpoint: not a checkpoint of a cleanrl script"


def test_a_read_only_working_folder_exits_2_in_one_line(workdir):
    # root writes anywhere with CAP_DAC_OVERRIDE: the run goes without it, so the folder's mode bits hold for it too
    bound = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-dac_override,-dac_read_search"]
    command = [*(bound if os.geteuid() == 0 else []), sys.executable, str(SCRIPTS / "ppo.py"), "--total-timesteps", "256"]
    workdir.chmod(0o555)
    try:
        result = subprocess.run(command, cwd=workdir, env=script_env(), capture_output=True, text=True, timeout=300)
    finally:
        workdir.chmod(0o755)
    check_refused(result, "ppo.py", f"cannot write runs/ in {workdir}", workdir)


FULL_DISK = """
import runpy, shutil, sys
shutil.disk_usage = lambda path: shutil._ntuple_diskusage(2**40, 2**40 - 2**20, 2**20)  # 1 MiB free
script = sys.argv[1]
sys.argv = [script, *sys.argv[2:]]
runpy.run_path(script, run_name="__main__")
"""


@pytest.mark.parametrize("script", ["ppo.py", "dqn.py", "c51_jax.py", "sac_continuous_action.py"])
def test_a_full_disk_is_refused_at_start(script, workdir):
    driver = workdir.parent / f"{workdir.name}-full_disk.py"
    driver.write_text(FULL_DISK)
    result = run_script(driver, SCRIPTS / script, "--total-timesteps", 256, cwd=workdir, timeout=300)
    check_refused(result, script, f"cannot write runs/ in {workdir}", workdir)


@pytest.mark.parametrize("script", ["ppo.py", "c51_jax.py"])
def test_track_at_a_terminal_without_a_wandb_login_does_not_wait_for_input(script, workdir, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")  # no ~/.netrc, no W&B settings
    env = {k: v for k, v in script_env().items() if k != "WANDB_API_KEY"} | {"WANDB_MODE": "online", "HOME": str(home)}
    controller, terminal = pty.openpty()  # stdin, stdout and stderr a terminal, as when a user types the command
    command = [sys.executable, str(SCRIPTS / script), "--total-timesteps", "256", "--track"]
    process = subprocess.Popen(command, cwd=workdir, env=env, stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    output, deadline = b"", time.time() + 120
    while process.poll() is None and time.time() < deadline:
        if select.select([controller], [], [], 0.5)[0]:
            try:
                output += os.read(controller, 4096)
            except OSError:
                break
    try:
        returncode = process.wait(timeout=max(1.0, deadline - time.time()))
    finally:
        process.kill()
        os.close(controller)
    text = output.decode(errors="replace")
    assert returncode == 2, text
    assert f"{script}: --track could not start a W&B run (no API key)" in text and "wandb login" in text
    assert sorted(p.name for p in workdir.iterdir()) == []


def test_every_script_checkpoints_and_resumes_and_is_on_by_default_only_for_long_runs():
    # CartPole, and HalfCheetah at PPO's 1M steps: minutes on one core
    short = {"ppo.py", "dqn.py", "c51.py", "qr_dqn.py", "pqn.py", "dqn_jax.py", "c51_jax.py", "ppo_continuous_action.py"}
    for path in sorted(SCRIPTS.glob("*.py")):
        if path.name == "__init__.py":
            continue
        args = load_script(path.stem).Args()
        assert hasattr(args, "resume") and hasattr(args, "checkpoint_every"), path.name
        assert (args.checkpoint_every > 0) == (path.name not in short), path.name  # hours or days by default
