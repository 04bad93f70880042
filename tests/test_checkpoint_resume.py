"""Long runs a researcher can trust (issue 22), run as a user would: a training killed with SIGKILL and resumed with
--resume, Ctrl-C and SIGTERM ending a run in one line, the restored state equal to the saved one, a progress line
with the time left, and the bad starts around them (an unreadable --resume, a read-only or full working folder, a
--track at a terminal without a W&B login)."""

import os
import pickle
import pty
import select
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from cleanrl_utils.report import read_scalars
from conftest import PPO_TAGS, SCRIPTS, check_ok, check_refused, load_script, only_run_dir, run_script, script_env

# 4 envs x 128 steps = 512 steps an iteration, 100 iterations: about 10 s of CartPole on one core
PPO_RUN = ["--total-timesteps", 51200, "--num-envs", 4, "--num-steps", 128]
# Breakout at 2 envs x 32 steps = 64 steps an iteration, 12 iterations
PPO_ATARI_RUN = ["--total-timesteps", 768, "--num-envs", 2, "--num-steps", 32, "--update-epochs", 1]
# CartPole, a loss point every 1000 steps from step 2000: about 40 s on one core
C51_JAX_RUN = ["--total-timesteps", 60000, "--learning-starts", 1000]
# the proof-of-memory task at 4 envs x 32 steps = 128 steps an iteration, 40 iterations, a small transformer
TRXL_RUN = [
    "--total-timesteps", 5120, "--env-id", "ProofofMemory-v0", "--num-envs", 4, "--num-steps", 32, "--num-minibatches", 2,
    "--trxl-num-layers", 1, "--trxl-dim", 32, "--trxl-num-heads", 2, "--trxl-memory-length", 8,
]  # fmt: skip
# its learning rate anneals over --anneal-steps, not over the run: the tags but that one, and its entropy coefficient
TRXL_TAGS = [tag for tag in PPO_TAGS if tag != "charts/learning_rate"] + ["charts/entropy_coefficient"]


def start(script, *args, cwd):
    return subprocess.Popen(
        [sys.executable, str(SCRIPTS / script), *map(str, args)],
        cwd=cwd,
        env=script_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_checkpoint(path):
    """A checkpoint as the scripts write it: torch.save's zip file (torch scripts) or a pickle (JAX scripts)."""
    if zipfile.is_zipfile(path):
        return torch.load(path, map_location="cpu", weights_only=False)
    with open(path, "rb") as f:
        return pickle.load(f)


def wait_for_checkpoint(cwd, process, at_least, timeout=300):
    """The checkpoint of the one run under `cwd` once its global_step reaches `at_least`. Each read is whole: the
    script renames a finished file into place, so an open one is never rewritten."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for path in Path(cwd).glob("runs/*/checkpoint.pt"):
            checkpoint = read_checkpoint(path)
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


# script, its run, --checkpoint-every, the step to kill it after, the scalars to follow, their first step and spacing
KILLED = [
    ("ppo.py", PPO_RUN, 4, 4096, PPO_TAGS, 512, 512),
    ("ppo_atari.py", PPO_ATARI_RUN, 2, 256, PPO_TAGS, 64, 64),
    ("c51_jax.py", C51_JAX_RUN, 2000, 8000, ["losses/loss", "losses/q_values", "charts/epsilon"], 2000, 1000),
    ("ppo_trxl.py", TRXL_RUN, 4, 2048, TRXL_TAGS, 128, 128),
]


@pytest.mark.parametrize("script,flags,every,kill_at,tags,first,spacing", KILLED, ids=[k[0] for k in KILLED])
def test_a_run_killed_with_sigkill_resumes_where_its_checkpoint_left_it(
    script, flags, every, kill_at, tags, first, spacing, workdir
):
    process = start(script, *flags, "--checkpoint-every", every, cwd=workdir)
    path, checkpoint = wait_for_checkpoint(workdir, process, kill_at)
    process.kill()  # SIGKILL: nothing of the script runs after it
    process.communicate()
    run_dir, total = path.parent, flags[1]

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
        lr, iterations = checkpoint["args"]["learning_rate"], total // spacing
        assert [round(r / lr, 5) for r in rates] == [round(1 - i / iterations, 5) for i in range(iterations)]
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # one log per part, in the same folder


UP_TO_THE_LOOP = """
import pickle, signal, sys
import numpy as np
script, out, *args = sys.argv[1:]
sys.argv = [script, *args]
handlers = []


class AtTheLoop(Exception):
    pass


def set_handler(signum, handler):  # the scripts set their handlers right before the loop, after --resume's restore
    handlers.append(handler)
    raise AtTheLoop


signal.signal = set_handler
run = {"__name__": "__main__", "__file__": script}
try:
    exec(compile(open(script).read(), script, "exec"), run)
except AtTheLoop:
    pass
state = {"global_step": run["global_step"]}
if "agent" in run:  # a torch PPO script
    import torch
    state |= {"agent": run["agent"].state_dict(), "optimizer": run["optimizer"].state_dict(),
              "rng": (np.random.get_state(), torch.get_rng_state(), torch.cuda.get_rng_state_all())}
else:  # a JAX Q-learning script
    import flax.serialization
    state |= {"q_state": flax.serialization.to_state_dict(run["q_state"]), "rb": vars(run["rb"]),
              "num_updates": run["num_updates"],
              "rng": (np.random.get_state(), run["envs"].action_space.np_random.bit_generator.state)}
with open(out, "wb") as f:
    pickle.dump(state, f)
# the handler: in training, the first signal is noted and the run goes on; a second one stops it at once
handlers[0](signal.SIGINT, None)
assert run["stop"] == [signal.SIGINT]
handlers[0](signal.SIGTERM, None)  # exits with 143 and its line
"""


def assert_same(restored, saved, where="checkpoint"):
    """Nested dicts, lists and tuples of arrays, tensors and plain values, equal leaf by leaf."""
    if isinstance(saved, dict):
        assert sorted(restored) == sorted(saved), where
        for key in saved:
            assert_same(restored[key], saved[key], f"{where}[{key!r}]")
    elif isinstance(saved, list | tuple):
        assert len(restored) == len(saved), where
        for i, (r, s) in enumerate(zip(restored, saved, strict=True)):
            assert_same(r, s, f"{where}[{i}]")
    elif isinstance(saved, torch.Tensor):
        assert torch.equal(restored, saved), where
    elif hasattr(saved, "shape"):  # NumPy or JAX arrays
        assert np.array_equal(np.asarray(restored), np.asarray(saved)), where
    else:
        assert restored == saved, where


RESTORED = [("ppo.py", PPO_RUN, 3, 1536), ("c51_jax.py", C51_JAX_RUN, 2000, 4000), ("ppo_trxl.py", TRXL_RUN, 3, 1536)]


@pytest.mark.parametrize("script,flags,every,kill_at", RESTORED, ids=[r[0] for r in RESTORED])
def test_resume_restores_the_saved_state_exactly(script, flags, every, kill_at, workdir):
    process = start(script, *flags, "--checkpoint-every", every, cwd=workdir)
    path, saved = wait_for_checkpoint(workdir, process, kill_at)
    process.kill()
    process.communicate()
    # the resumed run, stopped where its loop would start: the weights, the optimizer's state and learning rate,
    # the replay memory, the counters and every random generator are the saved ones
    restored_path = workdir / "restored.pkl"
    driver = [sys.executable, "-c", UP_TO_THE_LOOP, str(SCRIPTS / script), str(restored_path), "--resume", str(path)]
    result = subprocess.run(driver, cwd=workdir, env=script_env(), capture_output=True, text=True, timeout=300)
    with open(restored_path, "rb") as f:
        restored = pickle.load(f)
    assert_same(restored, {key: saved[key] for key in restored})
    # and a second signal in training stops the run at once, in one line
    assert result.returncode == 143 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"{script}: stopped at once by SIGTERM; files written before stay"


def test_resume_refuses_what_it_cannot_continue_and_extends_a_finished_run(workdir, fork_script):
    check_ok(run_script("ppo.py", "--total-timesteps", 1024, "--checkpoint-every", 5, cwd=workdir))
    run_dir = only_run_dir(workdir)
    checkpoint = read_checkpoint(run_dir / "checkpoint.pt")
    assert checkpoint["iteration"] == 2  # written at the end of training too, not only every 5 iterations
    logs = sorted(run_dir.glob("events.out.tfevents.*"))
    # nothing left to train at its own budget; another game for the saved networks; a copy of the run elsewhere
    result = fork_script("ppo.py", "--resume", run_dir, cwd=workdir)
    assert result.returncode == 2 and "ppo.py: nothing left: give more --total-timesteps" in result.stderr, result.stderr
    result = fork_script("ppo.py", "--resume", run_dir, "--env-id", "Acrobot-v1", "--total-timesteps", 2048, cwd=workdir)
    assert result.returncode == 2 and "ppo.py: --env-id cannot change on --resume" in result.stderr, result.stderr
    copy = workdir / "elsewhere" / run_dir.name
    shutil.copytree(run_dir, copy)
    result = fork_script("ppo.py", "--resume", copy, "--total-timesteps", 2048, cwd=workdir)
    assert result.returncode == 2 and f"resume runs/{run_dir.name} from the folder that holds it" in result.stderr
    assert sorted(run_dir.glob("events.out.tfevents.*")) == logs  # a refused resume wrote nothing
    # a larger budget goes on from the end
    check_ok(run_script("ppo.py", "--resume", run_dir, "--total-timesteps", 2048, cwd=workdir))
    steps, _ = read_scalars(str(run_dir), "charts/SPS")
    assert list(steps) == [512, 1024, 1536, 2048]


SIGNALLED = [("ppo.py", signal.SIGINT), ("ppo.py", signal.SIGTERM), ("c51_jax.py", signal.SIGTERM)]


@pytest.mark.parametrize("script,signum", SIGNALLED, ids=[f"{s}-{signal.Signals(n).name}" for s, n in SIGNALLED])
def test_ctrl_c_or_sigterm_saves_a_checkpoint_and_says_so_in_one_line(script, signum, workdir):
    long_run = ["--total-timesteps", 10**7]  # stopped long before its end; only the signal writes a checkpoint
    process = start(script, *long_run, "--checkpoint-every", 10**6, cwd=workdir)
    wait_for_progress(process)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    (line,) = [line for line in stderr.splitlines() if "stopped" in line]
    name = signal.Signals(signum).name
    run_dir = only_run_dir(workdir)
    assert line.startswith(f"{script}: stopped by {name} at global_step ") and line.endswith(f"--resume runs/{run_dir.name}")
    checkpoint = read_checkpoint(run_dir / "checkpoint.pt")
    assert line.split("global_step ")[1].startswith(f"{checkpoint['global_step']};")
    if script != "ppo.py":
        return
    steps, _ = read_scalars(str(run_dir), "charts/SPS")
    assert steps[-1] == checkpoint["global_step"]  # the writer was closed: the log reaches the stop
    resumed = run_script(script, "--resume", run_dir, "--total-timesteps", checkpoint["global_step"] + 1024, cwd=workdir)
    check_ok(resumed)
    steps, _ = read_scalars(str(run_dir), "charts/SPS")
    assert list(steps[-3:]) == [checkpoint["global_step"] + 512 * k for k in range(3)]  # from the step it stopped at


def test_a_signal_without_checkpoints_still_ends_in_one_line(workdir):
    process = start("ppo.py", "--total-timesteps", 10**7, cwd=workdir)
    wait_for_progress(process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if "stopped" in line]
    assert line.startswith("ppo.py: stopped by SIGINT at global_step ") and line.endswith("; not saved")
    assert not (only_run_dir(workdir) / "checkpoint.pt").exists()


def test_the_progress_line_gives_the_share_done_and_the_time_left(workdir):
    result = run_script("ppo.py", "--total-timesteps", 2048, cwd=workdir)
    check_ok(result)
    last = [line for line in result.stdout.splitlines() if line.startswith("global_step=")][-1]
    assert last.startswith("global_step=2048, 100.0% of 2048, episodic_return(last ") and last.endswith(", 0:00:00 left")


@pytest.mark.parametrize("script", ["ppo.py", "ppo_atari.py", "c51_jax.py"])
def test_an_unreadable_resume_path_exits_2_in_one_line(script, workdir, fork_script):
    what = f"(a run folder of {script} or its checkpoint.pt): "
    result = fork_script(script, "--resume", "runs/nothing-here", cwd=workdir)
    check_refused(result, script, f"cannot resume from runs/nothing-here {what}[Errno 2] No such file", workdir)
    (workdir / "not-a-checkpoint").write_text("hello")
    result = fork_script(script, "--resume", "not-a-checkpoint", cwd=workdir)
    assert result.returncode == 2 and f"cannot resume from not-a-checkpoint {what}" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


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
    command = [sys.executable, "-c", FULL_DISK, str(SCRIPTS / script), "--total-timesteps", "256"]
    result = subprocess.run(command, cwd=workdir, env=script_env(), capture_output=True, text=True, timeout=300)
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


def test_checkpoints_are_off_for_short_runs_and_on_for_the_main_job():
    assert load_script("ppo").Args().checkpoint_every == 0  # CartPole: a few minutes
    assert load_script("c51_jax").Args().checkpoint_every == 0
    assert load_script("ppo_atari").Args().checkpoint_every > 0  # Breakout, 10M steps: hours
    assert load_script("ppo_trxl").Args().checkpoint_every > 0  # Memory Gym, 200M steps: days
