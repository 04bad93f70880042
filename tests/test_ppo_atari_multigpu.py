"""ppo_atari_multigpu.py: data-parallel PPO. As plain `python` (one rank) it is ppo_atari.py; under torchrun
the ranks start from rank 0's weights, see different games, average their gradients and so keep identical
weights, and only rank 0 writes anything, checkpoints included; a Ctrl-C to torchrun stops every rank after the
step under way with one checkpoint, and --resume goes on with as many ranks. The torchrun runs listen on 127.0.0.1
only (see `torchrun`)."""

import os
import re
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from cleanrl_utils.checkpoint import read
from cleanrl_utils.report import read_scalars
from conftest import (
    SCRIPTS,
    check_checkpoint_and_resume,
    check_ok,
    check_refused,
    check_warns_and_runs,
    load_script,
    only_run_dir,
    run_copied_alone,
    run_script,
    script_env,
)

SCRIPT = "ppo_atari_multigpu.py"
multigpu = load_script("ppo_atari_multigpu")
# two iterations of a small batch per rank
TINY = ["--total-timesteps", 128, "--local-num-envs", 2, "--num-steps", 32, "--update-epochs", 1]
LOSS_TAGS = [
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/old_approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
    "charts/learning_rate",
]

# torchrun's own rendezvous store (a TCPStore) listens on every interface; a TCPStore made first in the
# launching process on a socket bound to 127.0.0.1 is shared with it (multi-tenant: same port, one server),
# so nothing of the test listens beyond the loopback; gloo is kept on it by GLOO_SOCKET_IFNAME.
LAUNCHER = """\
import socket
import sys

import torch.distributed as dist
from torch.distributed.run import main

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
port = sock.getsockname()[1]
store = dist.TCPStore(
    "127.0.0.1", port, is_master=True, multi_tenant=True, master_listen_fd=sock.fileno(), wait_for_workers=False
)
main(["--nnodes", "1", "--master-addr", "127.0.0.1", "--master-port", str(port), *sys.argv[1:]])
"""
# runs the script as __main__ in its own folder (out/rank{RANK}), then writes what that rank ended with
RANK_WRAPPER = """\
import os
import runpy
import sys

import torch

script, out = sys.argv[1], sys.argv[2]
rank = os.environ["RANK"]
os.chdir(os.path.join(out, f"rank{rank}"))
sys.argv = [script, *sys.argv[3:]]
done = runpy.run_path(script, run_name="__main__")


def statistics(env):
    while type(env).__name__ != "RecordEpisodeStatistics":
        env = env.env
    return env


envs = done["envs"].envs
torch.save(
    {
        "model": {name: tensor.cpu() for name, tensor in done["agent"].state_dict().items()},
        "torch_seed": torch.initial_seed(),
        "env_seeds": [env.unwrapped.np_random_seed for env in envs],
        "returns": [float(r) for env in envs for r in statistics(env).return_queue],
        "obs": done["obs"].cpu(),
        "run_name": done["run_name"],
    },
    os.path.join(out, f"rank{rank}.pt"),
)
"""


def start_torchrun(tmp_path, nproc, *script_args, options=()):
    """Starts `script_args` (a script and its arguments) on `nproc` CPU ranks through torchrun (with its `options`)
    in tmp_path/cwd, everything on 127.0.0.1, in a session of its own (as a terminal's foreground job: its
    process group is torchrun's; torchrun starts each rank in a session of its own). Returns the Popen."""
    (tmp_path / "launch.py").write_text(LAUNCHER)
    env = script_env() | {"PYTHONFAULTHANDLER": "1"}  # a rank that aborts (SIGABRT, once in CI) prints its threads' stacks
    if os.path.isdir("/sys/class/net/lo"):
        env["GLOO_SOCKET_IFNAME"] = "lo"
    command = [
        sys.executable,
        str(tmp_path / "launch.py"),
        "--nproc-per-node",
        str(nproc),
        *map(str, [*options, *script_args]),
    ]
    return subprocess.Popen(
        command,
        cwd=tmp_path / "cwd",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def torchrun(tmp_path, nproc, *script_args, options=(), timeout=300):
    """Runs `script_args` on `nproc` CPU ranks (`start_torchrun`); kills the whole process group if it hangs.
    Returns (returncode, stdout, stderr)."""
    process = start_torchrun(tmp_path, nproc, *script_args, options=options)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"torchrun hung for {timeout} s\nstdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}")
    return process.returncode, stdout, stderr


def test_one_rank_logs_what_ppo_atari_logs_then_a_checkpoint_and_resume(tmp_path):
    # plain python is one rank, no process group: the same run as ppo_atari.py with as many envs; two iterations
    # with a checkpoint after each, then two more from the last one with --resume
    workdir = tmp_path
    (workdir / "multigpu").mkdir()
    (workdir / "base").mkdir()
    results = []

    def run(*args, **kwargs):
        results.append(run_script(*args, **kwargs))
        return results[-1]

    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 1, workdir / "multigpu", run=run)
    assert "1 rank(s) x 2 envs = 2 envs; rank 0 on cpu" in results[0].stdout and "global_step=128," in results[0].stdout
    assert run_dir.name.startswith("BreakoutNoFrameskip-v4__ppo_atari_multigpu__1__")
    assert not (workdir / "multigpu" / "videos").exists()
    base = ["--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--update-epochs", 1]
    check_ok(run_script("ppo_atari.py", *base, cwd=workdir / "base"))
    base_dir = only_run_dir(workdir / "base")
    for tag in LOSS_TAGS + ["charts/SPS"]:
        steps, values = read_scalars(str(run_dir), tag)
        assert list(steps) == [64, 128, 192, 256], tag  # one point per iteration, once
        if tag != "charts/SPS":  # the first part is ppo_atari.py's run
            base_steps, base_values = read_scalars(str(base_dir), tag)
            assert list(base_steps) == list(steps[:2])
            np.testing.assert_array_equal(values[:2], base_values, err_msg=tag)


def test_copied_file_captures_video_saves_evaluates_and_tracks(tmp_path):
    _, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    assert checkpoint["args"]["world_size"] == 1 and checkpoint["args"]["num_envs"] == 2


REFUSALS = [
    (["--num-minibatches", 3], "does not split into --num-minibatches 3"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 is not an ale-py Atari game"),
    (["--local-num-envs", 0], "--local-num-envs, --num-steps, --num-minibatches, --update-epochs must be at least 1"),
    (["--num-envs", 0], "--local-num-envs, --num-steps, --num-minibatches, --update-epochs must be at least 1"),
    (["--total-timesteps", -5], "--total-timesteps, --local-num-envs, --num-steps, --num-minibatches, --update-epochs"),
    (["--upload-model", "--no-save-model"], "--upload-model pushes the saved model and its evaluation; add --save-model"),
]


@pytest.mark.parametrize("flags,message", REFUSALS, ids=[" ".join(map(str, f)) for f, _ in REFUSALS])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, tmp_path, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=tmp_path, timeout=120)
    check_refused(result, SCRIPT, message, tmp_path)


@pytest.fixture(scope="module")
def breakout():
    return multigpu.gym.make("BreakoutNoFrameskip-v4")


@pytest.mark.parametrize(
    "changes,world_size,message",
    [
        # CleanRL's --num-envs counts the envs of all ranks: __main__ gives each rank num_envs // world_size
        ({"num_envs": 6, "local_num_envs": 6 // 4}, 4, "--num-envs does not split over 4 ranks"),
        ({"seed": 2**32 - 2}, 4, "--seed must be in [0, 2**32 - 4] (rank r seeds with seed + r)"),
        ({"seed": 2**32}, 1, "--seed must be in [0, 2**32 - 1]"),
    ],
)
def test_validation_counts_all_ranks(changes, world_size, message, breakout):
    args = multigpu.Args(**changes)
    assert message in multigpu.validation_error(args, breakout, world_size, world_size)
    assert multigpu.validation_error(multigpu.Args(), breakout, world_size, world_size) is None
    assert multigpu.validation_error(multigpu.Args(num_envs=8, local_num_envs=2), breakout, 4, 4) is None


def test_cuda_needs_one_gpu_per_rank_on_a_machine(monkeypatch, breakout):
    monkeypatch.setattr(multigpu.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(multigpu.torch.cuda, "device_count", lambda: 1)
    assert multigpu.validation_error(multigpu.Args(), breakout, 2, 1) is None  # two machines, one rank each
    message = multigpu.validation_error(multigpu.Args(), breakout, 2, 2)
    assert "this machine runs 2 ranks and has 1 GPU(s)" in message and "--no-cuda" in message
    assert multigpu.validation_error(multigpu.Args(cuda=False), breakout, 2, 2) is None


def test_a_run_without_a_gradient_step_warns_and_runs(workdir):
    # CleanRL's smoke tests run budgets below one batch (here 8 envs x 128 steps): a warning, not a refusal
    result = run_script(SCRIPT, "--total-timesteps", 10, cwd=workdir)
    run_dir = check_warns_and_runs(result, SCRIPT, "--total-timesteps below one batch", cwd=workdir)
    assert run_dir.name.startswith("BreakoutNoFrameskip-v4__ppo_atari_multigpu__1__")


def _average_on_rank(rank, init_file, out_dir):
    """One of two gloo ranks (no network: the group meets through a file): rank r's gradients are r + 1 and
    3 (r + 1), its scalars r and 10 r."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    params = [torch.nn.Parameter(torch.zeros(2, 3)), torch.nn.Parameter(torch.zeros(4))]
    params[0].grad = torch.full((2, 3), rank + 1.0)
    params[1].grad = torch.full((4,), 3.0 * (rank + 1))
    scalars = multigpu.average_gradients(params, 2, torch.tensor(float(rank)), torch.tensor(10.0 * rank))
    torch.save({"grads": [p.grad for p in params], "scalars": scalars}, os.path.join(out_dir, f"{rank}.pt"))
    dist.destroy_process_group()


def test_average_gradients_gives_every_rank_the_mean(tmp_path, monkeypatch):
    if os.path.isdir("/sys/class/net/lo"):
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # inherited by the spawned ranks
    torch.multiprocessing.spawn(_average_on_rank, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    for rank in range(2):
        result = torch.load(tmp_path / f"{rank}.pt", weights_only=True)
        assert torch.equal(result["grads"][0], torch.full((2, 3), 1.5))
        assert torch.equal(result["grads"][1], torch.full((4,), 4.5))
        assert [float(s) for s in result["scalars"]] == [0.5, 5.0]


def test_average_gradients_of_one_rank_sends_nothing():
    param = torch.nn.Parameter(torch.zeros(3))
    param.grad = torch.tensor([1.0, 2.0, 3.0])
    loss = torch.tensor(2.0)
    assert multigpu.average_gradients([param], 1, loss) == [loss]  # no process group needed
    assert torch.equal(param.grad, torch.tensor([1.0, 2.0, 3.0]))


def test_torchrun_every_rank_refuses_alike(tmp_path):
    (tmp_path / "cwd").mkdir()
    # each rank's stderr in its own file (in one pipe, unbuffered lines of two ranks can interleave)
    options = ["--log-dir", tmp_path / "logs", "--redirects", 2]
    returncode, _, stderr = torchrun(tmp_path, 2, SCRIPTS / SCRIPT, "--num-minibatches", 3, options=options, timeout=120)
    assert returncode != 0
    assert set(re.findall(r"exitcode\s*:\s*(\d+)", stderr)) == {"2"}, stderr  # torchrun's report of the ranks' exits
    rank_stderr = [path.read_text().splitlines() for path in sorted((tmp_path / "logs").rglob("stderr.log"))]
    assert len(rank_stderr) == 2 and rank_stderr[0] == rank_stderr[1], rank_stderr
    (line,) = rank_stderr[0]
    assert line.startswith(f"{SCRIPT}: ") and "does not split into --num-minibatches 3" in line
    assert list((tmp_path / "cwd").iterdir()) == []


def test_torchrun_two_ranks_train_identical_weights_on_different_games(tmp_path):
    (tmp_path / "cwd").mkdir()
    (tmp_path / "rank0").mkdir()
    (tmp_path / "rank1").mkdir()
    (tmp_path / "wrapper.py").write_text(RANK_WRAPPER)
    # 2 ranks x 2 envs x 128 steps, 2 iterations of 2 epochs x 4 minibatches: 16 updates; each rank finishes games.
    # --num-envs as CleanRL spells it: the envs of all ranks together
    flags = ["--num-envs", 4, "--num-steps", 128, "--total-timesteps", 1024, "--update-epochs", 2, "--capture-video"]
    returncode, stdout, stderr = torchrun(tmp_path, 2, tmp_path / "wrapper.py", SCRIPTS / SCRIPT, tmp_path, *flags)
    assert returncode == 0, f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}"
    assert "2 rank(s) x 2 envs = 4 envs; rank 0 on cpu, gloo backend" in stdout
    rank0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    rank1 = torch.load(tmp_path / "rank1.pt", weights_only=True)

    # identical weights after training, and not the initial ones (rank 0's: its torch seed is 1)
    assert rank0["model"].keys() == rank1["model"].keys()
    for name in rank0["model"]:
        assert torch.equal(rank0["model"][name], rank1["model"][name]), name
    torch.manual_seed(1)
    initial = multigpu.Agent(4).state_dict()
    for name in rank0["model"]:
        assert not torch.equal(rank0["model"][name], initial[name]), name

    # each rank had its own seeds, envs and games; without the broadcast it would also have had its own weights
    assert (rank0["torch_seed"], rank1["torch_seed"]) == (1, 2)
    assert (rank0["env_seeds"], rank1["env_seeds"]) == ([1, 2], [3, 4])
    assert not torch.equal(rank0["obs"], rank1["obs"])
    assert rank0["returns"] and rank1["returns"]

    # one run name; only rank 0 wrote, and it logged the games of both ranks at global steps
    assert rank0["run_name"] == rank1["run_name"]
    assert list((tmp_path / "rank1").iterdir()) == [] and list((tmp_path / "cwd").iterdir()) == []
    run_dir = only_run_dir(tmp_path / "rank0")
    assert run_dir.name == rank0["run_name"]
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 1
    assert list((tmp_path / "rank0" / "videos" / run_dir.name).glob("*.mp4"))
    steps, _ = read_scalars(str(run_dir), "charts/SPS")
    assert list(steps) == [512, 1024]  # global_step counts the env steps of both ranks
    for tag in LOSS_TAGS:
        assert len(read_scalars(str(run_dir), tag)[0]) == 2, tag
    _, logged = read_scalars(str(run_dir), "charts/episodic_return")
    assert sorted(logged) == sorted(rank0["returns"] + rank1["returns"])


def test_torchrun_ctrl_c_stops_every_rank_with_one_checkpoint_and_resume_goes_on_with_as_many(tmp_path):
    (tmp_path / "cwd").mkdir()
    # 2 ranks x 2 envs x 32 steps = 128 steps an iteration, a checkpoint every 2; stopped long before its end
    flags = ["--total-timesteps", 10**7, "--local-num-envs", 2, "--num-steps", 32, "--update-epochs", 1]
    process = start_torchrun(tmp_path, 2, SCRIPTS / SCRIPT, *flags, "--checkpoint-every", 2)
    deadline = time.time() + 300
    while not list((tmp_path / "cwd").glob("runs/*/checkpoint.pt")):
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C: torchrun passes it on to each rank once
    _, stderr = process.communicate(timeout=120)
    # torchrun itself logs the signal and ends in its own traceback; the ranks say what happens in one line each
    lines = [line for line in stderr.splitlines() if line.startswith(SCRIPT)]
    assert len(lines) == 2, stderr[-3000:]
    assert lines[0].startswith(f"{SCRIPT}: SIGINT: stopping after the step under way, with a checkpoint; a second Ctrl-C")
    run_dir = only_run_dir(tmp_path / "cwd")
    saved = read(str(run_dir / "checkpoint.pt"), SCRIPT)
    assert len(saved["rng"]["ranks"]) == 2 and not saved["finished"]  # every rank's random generators
    prefix = f"{SCRIPT}: stopped by SIGINT at global_step {saved['global_step']}; saved in runs/{run_dir.name}/checkpoint.pt"
    assert lines[1].startswith(prefix + "; go on with: "), lines[1]
    command = shlex.split(lines[1].split("go on with: ")[1])
    assert command[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    assert command[5:] == [str(SCRIPTS / SCRIPT), "--resume", f"runs/{run_dir.name}"]
    assert list((tmp_path / "cwd").iterdir()) == [tmp_path / "cwd" / "runs"]  # only rank 0 wrote, in its run folder

    # one process cannot go on with two processes' random generators: refused before anything is made
    total = saved["global_step"] + 256
    result = run_script(SCRIPT, "--resume", f"runs/{run_dir.name}", "--total-timesteps", total, cwd=tmp_path / "cwd")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"{SCRIPT}: the checkpoint holds the random generators of 2 process(es), this run has 1: resume it with "
        "torchrun --nproc-per-node 2"
    ], result.stderr
    # the printed command's arguments, through this file's launcher (which keeps everything on 127.0.0.1)
    returncode, stdout, stderr = torchrun(tmp_path, 2, *command[5:], "--total-timesteps", total)
    assert returncode == 0, f"stdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}"
    assert only_run_dir(tmp_path / "cwd") == run_dir and len(list(run_dir.glob("events.out.tfevents.*"))) == 2
    assert read(str(run_dir / "checkpoint.pt"), SCRIPT)["finished"]
    for tag in LOSS_TAGS + ["charts/SPS"]:  # every iteration once, the stopped one included
        assert list(read_scalars(str(run_dir), tag)[0]) == list(range(128, total + 1, 128)), tag
