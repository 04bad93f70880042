"""cleanrl_utils/checkpoint.py on its own: the file format and its atomic write, every refusal of --resume, the
restore of each kind of training state, the random generators, the cadence, the log's continuation and the
signals. The scripts' own checkpoint paths are tested in tests/test_checkpoint_resume.py and each script's tests."""

import collections
import os
import random
import signal
import sys
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.utils.tensorboard import SummaryWriter

from cleanrl_utils import checkpoint as ckpt_module
from cleanrl_utils.checkpoint import Checkpoint, CheckpointError, decode, encode, read, write
from cleanrl_utils.report import read_scalars


@dataclass
class Args:
    """A script's flags, as tyro sees them."""

    env_id: str = "CartPole-v1"
    seed: int = 1
    total_timesteps: int = 1000
    learning_rate: float = 1e-3
    learning_starts: int = 100
    hidden: int = 8
    checkpoint_every: int = 2
    checkpoint_memory: bool = True
    resume: str | None = None


class Memory:  # a replay memory of a script's own: arrays and counters as attributes
    def __init__(self, size):
        self.obs, self.pos, self.size = np.zeros((size, 3), np.float32), 0, 0
        self.rng = np.random.default_rng(0)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("WANDB_RUN_ID", "WANDB_RESUME", ckpt_module.STORE):
        monkeypatch.delenv(name, raising=False)
    signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield tmp_path
    for signum, handler in signals.items():  # a Checkpoint's handlers must not outlive its test
        signal.signal(signum, handler)


def parse(monkeypatch, *argv):
    import tyro

    monkeypatch.setattr(sys, "argv", ["toy.py", *map(str, argv)])
    return tyro.cli(Args)


def new_run(monkeypatch, *argv, name="CartPole-v1__toy__1__1"):
    """A run of the toy script as a script sets one up: flags, Checkpoint, writer, envs, training state."""
    args = parse(monkeypatch, *argv)
    ckpt = Checkpoint("toy.py", args)
    run_name = ckpt.run_name if args.resume else name
    writer = SummaryWriter(f"runs/{run_name}")
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")])
    envs.action_space.seed(args.seed)
    torch.manual_seed(args.seed)
    net = torch.nn.Linear(4, args.hidden)
    scope = {
        "net": net,
        "optimizer": torch.optim.Adam(net.parameters(), lr=args.learning_rate),
        "log_alpha": torch.zeros(1, requires_grad=True),
        "rb": Memory(16),
        "key": np.array([0, 1], np.uint32),
        "global_step": 0,
        "num_updates": 0,
    }
    return args, ckpt, writer, envs, scope


def train(scope, steps=4):  # a few updates, so that every entry differs from its initial value
    for _ in range(steps):
        loss = scope["net"](torch.randn(2, 4)).pow(2).mean()
        scope["optimizer"].zero_grad()
        loss.backward()
        scope["optimizer"].step()
        scope["rb"].obs[scope["rb"].pos] = np.random.random(3)
        scope["rb"].pos += 1
        scope["key"] = scope["key"] + 1
        scope["global_step"] += 10
        scope["num_updates"] += 1
    with torch.no_grad():
        scope["log_alpha"] += 0.5


NAMES = "net optimizer log_alpha rb key global_step num_updates"


def saved_run(monkeypatch, folder, *argv, steps=4):
    """A toy run that trained `steps` updates and wrote a checkpoint: (run folder, the state it saved)."""
    args, ckpt, writer, envs, scope = new_run(monkeypatch, *argv)
    ckpt.start(writer, envs, scope, NAMES)
    for i in range(steps):
        train(scope, 1)
        writer.add_scalar("losses/loss", float(i), scope["global_step"])
        ckpt.step(i + 1)
    ckpt.save()
    writer.close()
    return folder / "runs" / "CartPole-v1__toy__1__1", ckpt.snapshot()


# ---- the file: encoding, atomic write, reading ----


def test_arrays_go_into_the_file_as_tensors_that_share_their_memory_and_come_back_as_they_were():
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "u8": np.arange(5, dtype=np.uint8),
        "bool": np.array([True, False]),
        "i64": np.array(7),  # 0-d
        "u32": np.array([1, 2**32 - 1], np.uint32),  # a JAX key's dtype
        "strided": np.arange(10.0)[::2],
    }
    value = {"arrays": arrays, "list": [arrays["f32"], 3], "tuple": (arrays["u8"], "x")}
    encoded = encode(value)
    assert np.shares_memory(encoded["arrays"]["f32"].tensor.numpy(), arrays["f32"])  # no copy on the way out
    decoded = decode(encoded)
    for key, array in arrays.items():
        assert decoded["arrays"][key].dtype == array.dtype and np.array_equal(decoded["arrays"][key], array), key
    assert isinstance(decoded["tuple"], tuple) and decoded["list"][1] == 3
    point = collections.namedtuple("Point", "x y")(np.zeros(2), 1)  # named tuples are kept as they are
    assert encode(point) is point


def test_jax_arrays_come_back_as_jax_arrays_of_their_dtype():
    jax = pytest.importorskip("jax")
    key = jax.random.PRNGKey(3)
    decoded = decode(encode({"key": key, "w": jax.numpy.ones((2, 2), jax.numpy.bfloat16)}))
    assert isinstance(decoded["key"], jax.Array) and decoded["key"].dtype == key.dtype
    assert np.array_equal(np.asarray(decoded["key"]), np.asarray(key))
    assert decoded["w"].dtype == jax.numpy.bfloat16  # a dtype torch lacks is pickled as it is


def test_the_write_is_atomic_a_failed_one_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    path = str(tmp_path / "checkpoint.pt")
    write(path, {"n": 1})
    real_save = torch.save

    def failing_save(obj, f):  # half the file written, then the disk is full
        real_save(obj, f)
        f.truncate(10)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError):
        write(path, {"n": 2})
    assert torch.load(path, weights_only=False) == {"n": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


def test_unreadable_resume_paths_say_why_in_one_line(folder, monkeypatch):
    run_dir, _ = saved_run(monkeypatch, folder)
    path = run_dir / "checkpoint.pt"
    cases = {}
    cases["runs/nothing"] = "cannot resume from runs/nothing: no such run folder or checkpoint file"
    (folder / "empty").mkdir()
    cases["empty"] = "cannot resume from empty: it holds no checkpoint.pt (was the run started with --checkpoint-every"
    (folder / "text").write_text("hello")
    cases["text"] = "cannot resume from text: not a checkpoint of a cleanrl script"
    whole = path.read_bytes()
    (folder / "half.pt").write_bytes(whole[: len(whole) // 2])  # a copy or a write cut short
    cases["half.pt"] = "cannot resume from half.pt: the file is damaged or was not written to the end"
    damaged = bytearray(whole)  # bytes of the pickled part overwritten, the zip's directory intact
    start = whole.index(b"cleanrl checkpoint") - 16
    damaged[start : start + 64] = b"\xff" * 64
    (folder / "damaged.pt").write_bytes(bytes(damaged))
    cases["damaged.pt"] = "cannot resume from damaged.pt: the file is damaged ("
    torch.save({"model": {}, "args": {}}, folder / "model.cleanrl_model")
    cases["model.cleanrl_model"] = "it is a model saved by --save-model, not a checkpoint"
    for given, message in cases.items():
        with pytest.raises(CheckpointError) as error:
            read(ckpt_module.checkpoint_path(given), "toy.py")
        assert message in str(error.value) and "\n" not in str(error.value), (given, str(error.value))
    with pytest.raises(CheckpointError, match=r"was written by toy.py, not dqn.py: resume it with toy.py"):
        read(str(path), "dqn.py")


def test_a_refused_resume_exits_2_with_one_line_and_writes_nothing(folder, monkeypatch, capsys):
    run_dir, _ = saved_run(monkeypatch, folder)
    before = sorted(p.name for p in run_dir.iterdir())
    cases = [
        (["--env-id", "Acrobot-v1"], "--env-id cannot change on --resume (the run has 'CartPole-v1')"),
        # saved at step 40 of 1000, not finished: a budget at or below its step leaves nothing to train
        (["--total-timesteps", 40], "nothing left: runs/CartPole-v1__toy__1__1 is at global_step 40 of 40"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit) as stopped:
            new_run(monkeypatch, "--resume", run_dir, *argv)
        assert stopped.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("toy.py: ") and message in err[0], err
    copy = folder / "elsewhere" / run_dir.name
    copy.parent.mkdir()
    copy.mkdir()
    (copy / "checkpoint.pt").write_bytes((run_dir / "checkpoint.pt").read_bytes())
    with pytest.raises(SystemExit):
        new_run(monkeypatch, "--resume", copy)
    assert "resume runs/CartPole-v1__toy__1__1 from the folder that holds it" in capsys.readouterr().err
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_a_finished_run_is_refused_at_its_own_budget_and_goes_on_with_a_larger_one(folder, monkeypatch, capsys):
    args, ckpt, writer, envs, scope = new_run(monkeypatch, "--total-timesteps", 40)
    ckpt.start(writer, envs, scope, NAMES)
    for i in range(4):
        train(scope, 1)
        ckpt.step(i + 1, last=i == 3)
    writer.close()
    run_dir = "runs/CartPole-v1__toy__1__1"
    assert read(f"{run_dir}/checkpoint.pt", "toy.py")["finished"]
    with pytest.raises(SystemExit):
        new_run(monkeypatch, "--resume", run_dir, "--total-timesteps", 40)
    assert "nothing left" in capsys.readouterr().err
    args, ckpt, *_ = new_run(monkeypatch, "--resume", run_dir, "--total-timesteps", 80)
    assert args.total_timesteps == 80


# ---- resuming: flags, state, random generators, the log ----


def test_resume_takes_the_saved_flags_with_those_given_now_on_top(folder, monkeypatch):
    run_dir, _ = saved_run(monkeypatch, folder, "--learning-rate", 0.5, "--seed", 7)
    args, ckpt, *_ = new_run(monkeypatch, "--resume", run_dir, "--learning-rate", 0.25)
    assert (args.seed, args.learning_rate, args.resume) == (7, 0.25, str(run_dir))
    assert ckpt.run_name == run_dir.name


def test_the_restored_state_equals_the_saved_one_entry_by_entry(folder, monkeypatch):
    run_dir, saved = saved_run(monkeypatch, folder)
    expected_draws = (random.random(), np.random.random(), torch.rand(1).item())
    args, ckpt, writer, envs, scope = new_run(monkeypatch, "--resume", run_dir)
    net, optimizer, log_alpha, rb = scope["net"], scope["optimizer"], scope["log_alpha"], scope["rb"]
    random.random(), np.random.random()  # draws a resumed run must not see
    ckpt.start(writer, envs, scope, NAMES)
    restored = ckpt.snapshot()
    for name, (kind, payload) in saved["state"].items():
        assert restored["state"][name][0] == kind, name
        assert_same(decode(restored["state"][name][1]), decode(payload), name)
    assert_same(decode(restored["rng"]), decode(saved["rng"]), "rng")
    # in place where the script's references must stay valid; rebound where the value is immutable
    assert scope["net"] is net and scope["optimizer"] is optimizer and scope["log_alpha"] is log_alpha
    assert scope["rb"] is rb and rb.pos == 4 and optimizer.param_groups[0]["params"][0] is net.weight
    assert (scope["global_step"], scope["num_updates"]) == (40, 4) and scope["key"].tolist() == [4, 5]
    assert (random.random(), np.random.random(), torch.rand(1).item()) == expected_draws
    writer.close()


def assert_same(restored, saved, where):
    if isinstance(saved, dict):
        assert sorted(restored) == sorted(saved), where
        for key in saved:
            assert_same(restored[key], saved[key], f"{where}[{key!r}]")
    elif isinstance(saved, list | tuple):
        assert len(restored) == len(saved), where
        for i, (r, s) in enumerate(zip(restored, saved)):
            assert_same(r, s, f"{where}[{i}]")
    elif isinstance(saved, torch.Tensor):
        assert torch.equal(restored, saved), where
    elif isinstance(saved, np.ndarray) or type(saved).__module__.startswith("jax"):
        assert np.array_equal(np.asarray(restored), np.asarray(saved)), where
    elif isinstance(saved, np.random.Generator):
        assert restored.bit_generator.state == saved.bit_generator.state, where
    else:
        assert restored == saved, where


def test_a_resume_whose_networks_do_not_fit_is_refused_and_the_run_folder_stays_as_it_was(folder, monkeypatch, capsys):
    run_dir, _ = saved_run(monkeypatch, folder)
    before = sorted(p.name for p in run_dir.iterdir())
    args, ckpt, writer, envs, scope = new_run(monkeypatch, "--resume", run_dir, "--hidden", 16)
    with pytest.raises(SystemExit) as stopped:
        ckpt.start(writer, envs, scope, NAMES)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the saved net does not fit the flags given now (" in err[0], err
    assert sorted(p.name for p in run_dir.iterdir()) == before  # the new events file is gone


def test_the_log_goes_on_from_the_checkpoint_each_step_once(folder, monkeypatch):
    args, ckpt, writer, envs, scope = new_run(monkeypatch)
    ckpt.start(writer, envs, scope, NAMES)
    for step in (10, 20, 30, 40):
        writer.add_scalar("losses/loss", step / 10, step)
    scope["global_step"] = 40
    ckpt.save()
    writer.add_scalar("losses/loss", 99.0, 50)  # logged after the checkpoint by a run killed then
    writer.close()
    run_dir = folder / "runs" / "CartPole-v1__toy__1__1"
    args, ckpt, writer, envs, scope = new_run(monkeypatch, "--resume", run_dir)
    ckpt.start(writer, envs, scope, NAMES)
    writer.add_scalar("losses/loss", 4.0, 50)
    writer.close()
    steps, values = read_scalars(str(run_dir), "losses/loss")
    assert list(steps) == [10, 20, 30, 40, 50] and values[-1] == 4.0


def test_a_tracked_run_goes_on_in_the_same_wandb_run(folder, monkeypatch):
    run_dir, _ = saved_run(monkeypatch, folder)
    saved = read(str(run_dir / "checkpoint.pt"), "toy.py")
    saved["wandb_id"] = "abc123"
    write(str(run_dir / "checkpoint.pt"), saved)
    new_run(monkeypatch, "--resume", run_dir)
    assert os.environ["WANDB_RUN_ID"] == "abc123" and os.environ["WANDB_RESUME"] == "allow"


def test_without_the_replay_memory_a_resumed_run_says_so_and_refills_it_before_learning(folder, monkeypatch, capsys):
    run_dir, saved = saved_run(monkeypatch, folder, "--no-checkpoint-memory")
    assert "rb" not in saved["state"] and "rb" not in read(str(run_dir / "checkpoint.pt"), "toy.py")["state"]
    args, ckpt, writer, envs, scope = new_run(monkeypatch, "--resume", run_dir)
    ckpt.start(writer, envs, scope, NAMES)
    assert scope["rb"].pos == 0 and args.learning_starts == 40 + 100
    assert (
        "toy.py: the checkpoint holds no replay memory (written with --no-checkpoint-memory): it starts empty, and "
        "learning waits for 100 new steps, until global_step 140" in capsys.readouterr().out
    )
    writer.close()


# ---- the cadence and the signals ----


def test_a_checkpoint_is_written_when_the_count_crosses_a_multiple_of_the_cadence(folder, monkeypatch):
    args, ckpt, writer, envs, scope = new_run(monkeypatch, "--checkpoint-every", 10)
    written = []
    monkeypatch.setattr(ckpt, "save", lambda finished=False: written.append((scope["global_step"], finished)) or True)
    ckpt.start(writer, envs, scope, NAMES)
    for step in range(3, 40, 3):  # 3 envs: the count jumps by 3 and rarely lands on a multiple of 10
        scope["global_step"] = step
        ckpt.step(step, last=step == 39)
    assert written == [(12, False), (21, False), (30, False), (39, True)]
    writer.close()


def test_the_first_signal_says_what_happens_the_step_saves_and_exits_with_the_command_to_go_on(folder, monkeypatch, capsys):
    args, ckpt, writer, envs, scope = new_run(monkeypatch, "--checkpoint-every", 100)
    ckpt.start(writer, envs, scope, NAMES)
    scope["global_step"] = 30
    ckpt.step(1)
    signal.getsignal(signal.SIGINT)(signal.SIGINT, None)  # Ctrl-C in the middle of a step
    first = capsys.readouterr().err.strip().splitlines()
    assert first == [
        "toy.py: SIGINT: stopping after the step under way, with a checkpoint; a second Ctrl-C stops at once and loses "
        "the 30 steps of this run"
    ]
    scope["global_step"] = 40
    with pytest.raises(SystemExit) as stopped:
        ckpt.step(2)
    assert stopped.value.code == 130
    (line,) = capsys.readouterr().err.strip().splitlines()
    run_dir = "runs/CartPole-v1__toy__1__1"
    assert line == (
        f"toy.py: stopped by SIGINT at global_step 40; saved in {run_dir}/checkpoint.pt; go on with: "
        f"{sys.executable} {sys.argv[0]} --resume {run_dir}"
    )
    assert read(f"{run_dir}/checkpoint.pt", "toy.py")["global_step"] == 40


def test_a_second_signal_or_one_after_training_stops_at_once(folder, monkeypatch, capsys):
    args, ckpt, writer, envs, scope = new_run(monkeypatch)
    ckpt.start(writer, envs, scope, NAMES)
    handler = signal.getsignal(signal.SIGTERM)
    handler(signal.SIGTERM, None)
    assert "a second SIGTERM stops at once" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        handler(signal.SIGTERM, None)
    assert stopped.value.code == 143
    assert capsys.readouterr().err.strip() == "toy.py: stopped at once by SIGTERM; files written before stay"
    ckpt.stop, ckpt.training = None, False  # training over: a signal in the evaluation stops at once
    with pytest.raises(SystemExit) as stopped:
        handler(signal.SIGINT, None)
    assert stopped.value.code == 130
    writer.close()


def test_a_checkpoint_that_cannot_be_written_keeps_the_last_one_and_the_run_goes_on(folder, monkeypatch, capsys):
    args, ckpt, writer, envs, scope = new_run(monkeypatch, "--checkpoint-every", 1)
    ckpt.start(writer, envs, scope, NAMES)
    scope["global_step"] = 10
    ckpt.step(1)

    def full(path, payload):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ckpt_module, "write", full)
    scope["global_step"] = 20
    ckpt.step(2)
    assert (
        "toy.py: warning: could not write runs/CartPole-v1__toy__1__1/checkpoint.pt (No space left on device); "
        "the last one stays" in capsys.readouterr().err
    )
    assert read("runs/CartPole-v1__toy__1__1/checkpoint.pt", "toy.py")["global_step"] == 10
    writer.close()


def test_a_list_of_live_objects_is_restored_item_by_item_in_place_and_another_count_is_refused():
    from cleanrl_utils.checkpoint import capture, restore

    statistics = [Memory(4), Memory(4)]  # e.g. every sub-env's normalisation statistics
    statistics[1].pos = 3
    kind, payload = capture(statistics)
    assert kind == "items" and capture([1, 2.0, "x"])[0] == "value"  # plain values stay one value
    live = [Memory(4), Memory(4)]
    restored = restore("obs_rms", live, kind, decode(encode(payload)))
    assert restored[0] is live[0] and restored[1] is live[1] and live[1].pos == 3
    with pytest.raises(CheckpointError, match=r"the saved obs_rms does not fit the flags given now \(2 items in the "):
        restore("obs_rms", [Memory(4)], kind, payload)


def test_a_resumed_run_keeps_the_videos_of_the_run_so_far(folder, monkeypatch):
    run_dir, _ = saved_run(monkeypatch, folder)
    videos = folder / "videos" / run_dir.name
    videos.mkdir(parents=True)
    (videos / "rl-video-episode-0.mp4").write_bytes(b"first part")
    new_run(monkeypatch, "--resume", run_dir)
    assert (videos / "until-global_step-40" / "rl-video-episode-0.mp4").read_bytes() == b"first part"
    assert not (videos / "rl-video-episode-0.mp4").exists()  # free for the resumed run's episode 0
