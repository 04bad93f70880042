"""What every value-based script must do (script contract §3, §5, §7), run as a user would: a
subprocess. Per script: its default flags with a tiny budget, with a checkpoint mid-run and a resume,
and the validation cases; a resume from a checkpoint without its replay memory; cadences that fire at
their configured rate whatever `--num-envs` is. (The --capture-video, --save-model, --track and
copy-alone paths of every script are in test_scripts.py.)"""

import pytest

from budgets import VALUE_BASED_TINY as TINY
from cleanrl_utils.checkpoint import read
from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_ok,
    check_refused,
    check_warns_and_runs,
    only_run_dir,
    run_script,
    script_env,
)

ALL = list(TINY)
ATARI = [s for s in ALL if "atari" in s]
TAGS = {
    "dqn.py": ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "c51.py": ["losses/loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "qr_dqn.py": ["losses/loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "pqn.py": ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/learning_rate", "charts/SPS"],
    "dqn_atari.py": ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "c51_atari.py": ["losses/loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "qr_dqn_atari.py": ["losses/loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "rainbow_atari.py": ["losses/loss", "losses/q_values", "charts/beta", "charts/SPS"],
}


# --checkpoint-every: a checkpoint mid-run (env steps; pqn.py: iterations of 128 steps), then --resume to twice the
# budget; Rainbow's is in test_rainbow_atari.py, at its smoke command's budget (its gradient steps are 0.2 s each)
EVERY = {"dqn.py": 300, "c51.py": 300, "qr_dqn.py": 300, "pqn.py": 2, "dqn_atari.py": 150, "c51_atari.py": 150}
EVERY["qr_dqn_atari.py"] = 150


# the steps of every point of TAGS, exactly (each once). The DQN family logs at every 100th gradient step, and with
# --train-frequency 1 gradient step n comes at global_step learning_starts + n: 300, 400, ... to the resumed run's
# end at twice the budget (dqn, c51: 1400; the Atari ones: 800; Rainbow, not resumed here: 400). PQN logs once per
# iteration of 2 x 64 steps, to 1024.
LOGGED_AT = {
    "dqn.py": list(range(300, 1401, 100)),
    "c51.py": list(range(300, 1401, 100)),
    "qr_dqn.py": list(range(300, 1401, 100)),
    "pqn.py": list(range(128, 1025, 128)),
    "dqn_atari.py": list(range(300, 801, 100)),
    "c51_atari.py": list(range(300, 801, 100)),
    "qr_dqn_atari.py": list(range(300, 801, 100)),
    "rainbow_atari.py": [400],
}


@pytest.mark.parametrize("script", ALL)
def test_default_flags(script, workdir, fork_script):
    results = []

    def run(*args, **kwargs):
        results.append(fork_script(*args, timeout=600, **kwargs))
        return results[-1]

    if script in EVERY:
        run_dir = check_checkpoint_and_resume(script, TINY[script], EVERY[script], workdir, run=run)
    else:
        check_ok(run(script, *TINY[script], cwd=workdir))
        run_dir = only_run_dir(workdir)
    result = results[0]
    assert "global_step=" in result.stdout and "SPS=" in result.stdout
    for tag in TAGS[script]:
        assert list(read_scalars(str(run_dir), tag)[0]) == LOGGED_AT[script], tag
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    assert not (workdir / "videos").exists()
    if script in ATARI:
        assert "replay buffer: 1000 frames " in result.stdout and "GiB when full" in result.stdout


@pytest.mark.parametrize("script", ["dqn_atari.py", "rainbow_atari.py"])
def test_a_checkpoint_without_its_replay_memory_resumes_and_refills_it_before_learning(script, workdir, fork_script):
    # 60 steps, learning past step 20 with one update a step: 40 updates; the resume to 120 waits until step 80 (60 + 20)
    # while the memory refills: 40 more, where the memory kept would have given 60
    flags = ["--total-timesteps", 60, "--learning-starts", 20, "--train-frequency", 1, "--buffer-size", 100, "--batch-size", 4]
    check_ok(fork_script(script, *flags, "--checkpoint-every", 30, "--no-checkpoint-memory", cwd=workdir, timeout=600))
    run_dir = only_run_dir(workdir)
    saved = read(str(run_dir / "checkpoint.pt"), script)
    assert "rb" not in saved["state"] and saved["global_step"] == 60 and saved["state"]["num_updates"][1] == 40
    result = fork_script(script, "--resume", run_dir, "--total-timesteps", 120, cwd=workdir, timeout=600)
    check_ok(result)
    said = (
        f"{script}: the checkpoint holds no replay memory (written with --no-checkpoint-memory): it starts empty, "
        "and learning waits for 20 new steps, until global_step 80"
    )
    assert said in result.stdout.splitlines()
    saved = read(str(run_dir / "checkpoint.pt"), script)
    assert saved["global_step"] == 120 and saved["state"]["num_updates"][1] == 80


NO_FRAMES = """
import gymnasium as gym
import numpy as np


class NoFrames(gym.Env):  # no render modes: no video can be made of it
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)


gym.register("NoFrames-v0", entry_point=NoFrames)
"""


@pytest.mark.parametrize("script", ["dqn.py", "c51.py", "pqn.py"])
def test_capture_video_on_an_env_without_frames_is_refused(script, tmp_path):
    # a researcher's own env (Gymnasium imports `no_frames` for the id): a fresh interpreter, which reads PYTHONPATH
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "no_frames.py").write_text(NO_FRAMES)
    cwd, env = tmp_path / "run", script_env() | {"PYTHONPATH": str(tmp_path / "modules")}
    cwd.mkdir()
    result = run_script(script, "--env-id", "no_frames:NoFrames-v0", "--capture-video", cwd=cwd, env=env, timeout=120)
    check_refused(result, script, "no_frames:NoFrames-v0 renders no video", cwd)


@pytest.mark.parametrize("script", ["dqn.py", "c51.py"])
def test_cadences_do_not_depend_on_num_envs(script, workdir, fork_script):
    # 1800 env steps past learning_starts at one gradient step per 2 env steps: 900 updates, logged
    # every 100, whether the steps come one at a time or four at a time
    points = []
    for num_envs in (1, 4):
        run_dir = workdir / str(num_envs)
        run_dir.mkdir()
        flags = ["--total-timesteps", 2000, "--learning-starts", 200, "--train-frequency", 2, "--num-envs", num_envs]
        check_ok(fork_script(script, *flags, "--buffer-size", 1000, "--batch-size", 16, cwd=run_dir, timeout=600))
        steps, _ = read_scalars(str(only_run_dir(run_dir)), TAGS[script][0])
        points.append(len(steps))
    assert points == [9, 9]


def test_non_finite_loss_stops_the_run_with_its_step(workdir, fork_script):
    # the largest learning rate Adam accepts blows the weights, then the Q-values, past float32
    result = fork_script("dqn.py", *TINY["dqn.py"], "--learning-rate", 3e37, cwd=workdir)
    assert result.returncode == 1, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "non-finite loss" in x]
    assert line.startswith("dqn.py: non-finite loss at global_step ") and line.endswith("; stopping")
    assert only_run_dir(workdir).exists()


ATARI_SMALL = ["--buffer-size", 100]


@pytest.mark.parametrize(
    "script,flags,reason",
    [  # CleanRL's own smoke commands, then one that ends exactly at learning_starts, and one below PQN's first batch
        ("dqn.py", ["--learning-starts", 200, "--total-timesteps", 205], "--learning-starts 200"),
        ("c51.py", ["--save-model", "--learning-starts", 200, "--total-timesteps", 205], "--learning-starts 200"),
        (
            "dqn.py",
            ["--total-timesteps", 201, "--learning-starts", 200, "--train-frequency", 1, "--num-envs", 2],
            "--learning-starts 200",
        ),
        *[(s, ["--total-timesteps", 40, "--learning-starts", 40, *ATARI_SMALL], "--learning-starts 40") for s in ATARI],
        ("pqn.py", ["--total-timesteps", 10], "one batch is 512 steps"),
    ],  # fmt: skip
)
def test_a_run_without_a_gradient_step_runs_with_one_warning(script, flags, reason, workdir, fork_script):
    result = fork_script(script, *flags, cwd=workdir, timeout=300)
    run_dir = check_warns_and_runs(result, script, reason, cwd=workdir, loss_tag=TAGS[script][0], alone=True)
    if "--save-model" in flags:  # the untrained network is still saved and evaluated
        assert len(read_scalars(str(run_dir), "eval/episodic_return")[0]) == 10


WRONG_SPACE = {
    s: ("Pendulum-v1", f"Pendulum-v1 has Box(-2.0, 2.0, (1,), float32) actions; {s} supports Discrete ones")
    for s in ("dqn.py", "c51.py", "qr_dqn.py", "pqn.py")
}
WRONG_SPACE |= {s: ("CartPole-v1", "CartPole-v1 is not an ale-py Atari game") for s in ATARI}
UNKNOWN_ENV = {s: "BreakoutNoFrameskip-v9" if s in ATARI else "CartPol-v1" for s in ALL}
RANGES = {s: "--gamma, --start-e, --end-e and --exploration-fraction must be in [0, 1]" for s in ALL}
RANGES |= {"pqn.py": "--gamma, --q-lambda, --start-e, --end-e and --exploration-fraction must be in [0, 1]"}
RANGES |= {"rainbow_atari.py": "must be in [0, 1]"}  # Rainbow explores with noisy layers: no ε
OFF_POLICY_SIZES = "--num-envs, --buffer-size, --batch-size, --train-frequency, --target-network-frequency"
SIZES = {s: f"{OFF_POLICY_SIZES} must be at least 1" for s in ALL}
SIZES |= {"pqn.py": "--num-envs, --num-steps, --num-minibatches, --update-epochs must be at least 1"}
SIZES |= {"rainbow_atari.py": f"{OFF_POLICY_SIZES}, --n-step must be at least 1"}
QR_SIZES = "--num-envs, --buffer-size, --batch-size, --n-quantiles, --train-frequency, --target-network-frequency"
SIZES |= {s: f"{QR_SIZES} must be at least 1" for s in ("qr_dqn.py", "qr_dqn_atari.py")}
FOLDER_NAME = "must be a folder name: up to 150 letters, digits, '.', '-' and single '_'"
COMMON_BAD = [
    (["--gamma", 1.5], RANGES),
    (["--learning-rate", 0], "--learning-rate must be positive and finite in float32, got 0.0"),
    (["--learning-rate", "nan"], "--learning-rate must be positive and finite in float32, got nan"),
    (["--num-envs", 0], SIZES),
    (["--exp-name", "x" * 300], FOLDER_NAME),
    (["--exp-name", "sweep/a"], f"--exp-name 'sweep/a' {FOLDER_NAME}"),
    (["--upload-model", "--no-save-model"], "--upload-model pushes the saved model and its evaluation; add --save-model"),
    (["--seed", -1], "--seed must be in [0, 2**32 - 1], got -1"),
    (["--env-id", "no_such_module:Foo-v0"], "cannot make 'no_such_module:Foo-v0': No module named 'no_such_module'"),
    (["--total-timesteps", 0], {s: f"--total-timesteps, {SIZES[s]}" for s in ALL}),
    (["--total-timesteps", -5], {s: f"--total-timesteps, {SIZES[s]}" for s in ALL}),
]
CASES = [(s, list(f), m if isinstance(m, str) else m[s]) for s in ALL for f, m in COMMON_BAD]
EPSILON_BAD = [["--end-e", -0.1], ["--exploration-fraction", 2]]  # every script but Rainbow, which has no ε
CASES += [(s, flags, RANGES[s]) for s in ALL if s != "rainbow_atari.py" for flags in EPSILON_BAD]
CASES += [(s, ["--train-frequency", 0], SIZES[s]) for s in ALL if s != "pqn.py"]
CASES += [(s, ["--n-atoms", 1], "--n-atoms must be at least 2") for s in ("c51.py", "c51_atari.py", "rainbow_atari.py")]
CASES += [(s, ["--v-min", 10, "--v-max", -10], "--v-min") for s in ("c51.py", "c51_atari.py", "rainbow_atari.py")]
CASES += [(s, ["--n-quantiles", 0], SIZES[s]) for s in ("qr_dqn.py", "qr_dqn_atari.py")]
# Adam's first step divides the learning rate by 0.1: past 3.4e37 it overflows float32
ADAM_OVERFLOW = "--learning-rate must be positive and finite in float32, got 1e+38"
CASES += [(s, ["--learning-rate", 1e38], ADAM_OVERFLOW) for s in ALL if s != "pqn.py"]
CASES += [(s, ["--env-id", env_id], m) for s, (env_id, m) in WRONG_SPACE.items()]
CASES += [(s, ["--env-id", env_id], "doesn't exist") for s, env_id in UNKNOWN_ENV.items()]
CASES += [(s, ["--buffer-size", 10**13], "more than this machine's memory; lower --buffer-size") for s in ALL if s != "pqn.py"]
FEW_FRAMES = "--buffer-size 18 leaves a sub-env fewer than 10 frames"
CASES += [(s, ["--buffer-size", 18, "--num-envs", 2], FEW_FRAMES) for s in ("dqn_atari.py", "c51_atari.py", "qr_dqn_atari.py")]
CASES += [
    ("pqn.py", ["--num-minibatches", 3], "the batch of 512 steps (--num-envs x --num-steps) does not split into --num-mini"),
    ("pqn.py", ["--q-lambda", 1.5], RANGES["pqn.py"]),
    ("pqn.py", ["--num-minibatches", 0], SIZES["pqn.py"]),
]  # fmt: skip


@pytest.mark.parametrize("script,flags,message", CASES, ids=[f"{s}:{' '.join(map(str, f))}" for s, f, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(script, flags, message, workdir, fork_script):
    result = fork_script(script, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, script, message, workdir)
