"""What every value-based script must do (script contract §3, §5, §7), run as a user would: a
subprocess. Per script: its default flags with a tiny budget and the validation cases; cadences that
fire at their configured rate whatever `--num-envs` is. (The --capture-video, --save-model, --track
and copy-alone paths of every script are in test_scripts.py.)"""

import pytest

from budgets import VALUE_BASED_TINY as TINY
from cleanrl_utils.report import read_scalars
from conftest import check_ok, check_refused, only_run_dir, run_script

ALL = list(TINY)
ATARI = [s for s in ALL if "atari" in s]
TAGS = {
    "dqn.py": ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "c51.py": ["losses/loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "pqn.py": ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/learning_rate", "charts/SPS"],
    "dqn_atari.py": ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "c51_atari.py": ["losses/loss", "losses/q_values", "charts/epsilon", "charts/SPS"],
    "rainbow_atari.py": ["losses/loss", "losses/q_values", "charts/beta", "charts/SPS"],
}


@pytest.mark.parametrize("script", ALL)
def test_default_flags(script, workdir, fork_script):
    result = fork_script(script, *TINY[script], cwd=workdir, timeout=600)
    check_ok(result)
    assert "global_step=" in result.stdout and "SPS=" in result.stdout
    run_dir = only_run_dir(workdir)
    for tag in TAGS[script]:
        assert len(read_scalars(str(run_dir), tag)[0]) >= 1, tag
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    assert not (workdir / "videos").exists()
    if script in ATARI:
        assert "replay buffer: 1000 frames " in result.stdout and "GiB when full" in result.stdout


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


def test_rounding_to_whole_vector_steps_says_so(workdir):
    result = run_script("dqn.py", *TINY["dqn.py"][2:], "--total-timesteps", 701, "--num-envs", 2, cwd=workdir)
    check_ok(result)
    assert "running 700 steps: --total-timesteps rounded down to whole vector steps" in result.stdout


def test_non_finite_loss_stops_the_run_with_its_step(workdir, fork_script):
    # the largest learning rate Adam accepts blows the weights, then the Q-values, past float32
    result = fork_script("dqn.py", *TINY["dqn.py"], "--learning-rate", 3e37, cwd=workdir)
    assert result.returncode == 1, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "non-finite loss" in x]
    assert line.startswith("dqn.py: non-finite loss at global_step ") and line.endswith("; stopping")
    assert only_run_dir(workdir).exists()


WRONG_SPACE = {
    "dqn.py": ("Pendulum-v1", "dqn.py supports Discrete action spaces; Pendulum-v1 has Box(-2.0, 2.0, (1,), float32)"),
    "c51.py": ("Pendulum-v1", "c51.py supports Discrete action spaces; Pendulum-v1 has Box(-2.0, 2.0, (1,), float32)"),
    "pqn.py": ("Pendulum-v1", "pqn.py supports Discrete action spaces; Pendulum-v1 has Box(-2.0, 2.0, (1,), float32)"),
}
WRONG_SPACE |= {s: ("CartPole-v1", "CartPole-v1 is not an ale-py Atari game") for s in ATARI}
UNKNOWN_ENV = {s: "BreakoutNoFrameskip-v9" if s in ATARI else "CartPol-v1" for s in ALL}
COMMON_BAD = [
    (["--gamma", 1.5], "--gamma must be in [0, 1]"),
    (["--learning-rate", 0], "--learning-rate must be positive and "),
    (["--learning-rate", "nan"], "--learning-rate must be positive and "),
    (["--num-envs", 0], "--num-envs must be at least 1, got 0"),
    (["--exp-name", "x" * 300], "more than a folder name can hold (255); shorten --exp-name"),
    (["--upload-model", "--no-save-model"], "--upload-model pushes the saved model and its evaluation; add --save-model"),
    (["--seed", -1], "--seed must be in [0, 2**32 - 1]"),
    (["--exp-name", "sweep/a"], "--exp-name 'sweep/a' must be non-empty, without '/' or '__'"),
    (["--env-id", "no_such_module:Foo-v0"], "cannot make 'no_such_module:Foo-v0': No module named 'no_such_module'"),
]
OFF_POLICY_BAD = [
    (["--buffer-size", 16, "--batch-size", 32], "--buffer-size 16 is smaller than one batch (--batch-size 32)"),
    (["--total-timesteps", 1000, "--learning-starts", 1000], "does not exceed --learning-starts 1000"),
    (["--train-frequency", 0], "--train-frequency must be at least 1"),
]
DISTRIBUTIONAL_BAD = [
    (["--n-atoms", 1], "--n-atoms must be at least 2"),
    (["--v-min", 10, "--v-max", -10], "--v-min"),
]
EPSILON_BAD = [  # every script but Rainbow, which explores with noisy layers
    (["--end-e", -0.1], "--end-e must be in [0, 1]"),
    (["--exploration-fraction", 2], "--exploration-fraction must be in [0, 1]"),
]
CASES = [(s, list(f), m) for s in ALL for f, m in COMMON_BAD]
CASES += [(s, list(f), m) for s in ALL if s != "rainbow_atari.py" for f, m in EPSILON_BAD]
CASES += [(s, list(f), m) for s in ALL if s != "pqn.py" for f, m in OFF_POLICY_BAD]
CASES += [(s, list(f), m) for s in ("c51.py", "c51_atari.py", "rainbow_atari.py") for f, m in DISTRIBUTIONAL_BAD]
CASES += [(s, ["--tau", 0], "--tau must be in (0, 1]") for s in ("dqn.py", "dqn_atari.py")]
# Adam's first step would overflow float32 (lr / 0.1)
CASES += [(s, ["--learning-rate", 1e38], "at most 3.4e+37 (Adam), got 1e+38") for s in ALL if s != "pqn.py"]
# 10001 steps with 2 envs run 10000, no more than learning_starts: not one gradient step
CASES += [
    (s, ["--total-timesteps", 10005, "--learning-starts", 10000, "--train-frequency", 10], "by a gradient step")
    for s in ALL
    if s != "pqn.py"
]
CASES += [("dqn.py", ["--total-timesteps", 10001, "--learning-starts", 10000, "--num-envs", 2], "by a gradient step")]
CASES += [(s, ["--env-id", env_id], m) for s, (env_id, m) in WRONG_SPACE.items()]
CASES += [(s, ["--env-id", env_id], "doesn't exist") for s, env_id in UNKNOWN_ENV.items()]
CASES += [(s, ["--buffer-size", 10**13], "lower --buffer-size") for s in ALL if s != "pqn.py"]
CASES += [
    ("pqn.py", ["--num-minibatches", 3], "does not split into --num-minibatches 3"),
    ("pqn.py", ["--total-timesteps", 10], "below one batch"),
    ("pqn.py", ["--q-lambda", 1.5], "--q-lambda must be in [0, 1]"),
]


@pytest.mark.parametrize("script,flags,message", CASES, ids=[f"{s}:{' '.join(map(str, f))}" for s, f, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(script, flags, message, workdir, fork_script):
    result = fork_script(script, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, script, message, workdir)
