"""What the continuous off-policy scripts (sac, td3, ddpg) must do, run as a user would: a subprocess.
Per script: the default flags with a tiny budget, cadences that fire at their configured rate whatever
`--num-envs` is, a non-finite loss, refusing action spaces that cannot be squashed (before anything is
made) while reading bounds through wrappers, and the validation cases. (The --capture-video,
--save-model, --track and copy-alone paths are in test_scripts.py.)"""

import pytest

from budgets import CONTINUOUS_TINY
from cleanrl_utils.report import read_scalars
from conftest import check_ok, check_refused, only_run_dir, run_script, script_env

OFF_POLICY = ["sac_continuous_action.py", "td3_continuous_action.py", "ddpg_continuous_action.py"]
TINY = {s: CONTINUOUS_TINY[s] for s in OFF_POLICY}
TAGS = {
    "sac_continuous_action.py": [
        "losses/qf1_values",
        "losses/qf2_values",
        "losses/qf1_loss",
        "losses/qf2_loss",
        "losses/qf_loss",
        "losses/actor_loss",
        "losses/alpha",
        "losses/alpha_loss",
        "charts/SPS",
    ],
    "td3_continuous_action.py": [
        "losses/qf1_values",
        "losses/qf2_values",
        "losses/qf1_loss",
        "losses/qf2_loss",
        "losses/qf_loss",
        "losses/actor_loss",
        "charts/SPS",
    ],
    "ddpg_continuous_action.py": ["losses/qf1_values", "losses/qf1_loss", "losses/actor_loss", "charts/SPS"],
}

# A module the scripts can import through `--env-id module:Env-v0`: it registers a Pendulum whose action
# space is unbounded, one wrapped in ClipAction (whose space then reads (-inf, inf) although the env
# underneath is bounded), and one whose rewards overflow a squared error in float32.
TEST_ENVS = """
import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class UnboundedPendulum(PendulumEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)


def clipped_pendulum(**kwargs):
    return gym.wrappers.ClipAction(PendulumEnv(**kwargs))


def huge_reward_pendulum(**kwargs):
    return gym.wrappers.TransformReward(PendulumEnv(**kwargs), lambda r: -3e38)


gym.register("UnboundedPendulum-v0", entry_point=UnboundedPendulum, max_episode_steps=200)
gym.register("ClippedPendulum-v0", entry_point=clipped_pendulum, max_episode_steps=50)
gym.register("HugeRewardPendulum-v0", entry_point=huge_reward_pendulum, max_episode_steps=200)
"""


@pytest.mark.parametrize("script", OFF_POLICY)
def test_default_flags(script, workdir, fork_script):
    result = fork_script(script, *TINY[script], cwd=workdir, timeout=600)
    check_ok(result)
    assert "global_step=" in result.stdout and "SPS=" in result.stdout
    run_dir = only_run_dir(workdir)
    for tag in TAGS[script]:
        steps, _ = read_scalars(str(run_dir), tag)
        assert list(steps) == [200, 300], tag  # every 100 env steps past learning_starts 100
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    assert not (workdir / "videos").exists()


@pytest.mark.parametrize("script", ["sac_continuous_action.py", "td3_continuous_action.py"])
def test_cadences_do_not_depend_on_num_envs(script, workdir, fork_script):
    # 300 env steps past learning_starts, logged every 100 env steps, whether they come 1 or 4 at a time
    points = []
    for num_envs in (1, 4):
        run_dir = workdir / str(num_envs)
        run_dir.mkdir()
        flags = ["--env-id", "Pendulum-v1", "--total-timesteps", 400, "--num-envs", num_envs, "--learning-starts", 100]
        check_ok(fork_script(script, *flags, "--buffer-size", 1000, "--batch-size", 16, cwd=run_dir, timeout=600))
        steps, _ = read_scalars(str(only_run_dir(run_dir)), "losses/qf1_loss")
        points.append(list(steps))
    assert points == [[200, 300, 400]] * 2


def test_rounding_to_whole_vector_steps_says_so(workdir):
    result = run_script(
        "td3_continuous_action.py", *TINY["td3_continuous_action.py"], "--num-envs", 2, "--total-timesteps", 301, cwd=workdir
    )
    check_ok(result)
    assert "running 300 steps: --total-timesteps rounded down to whole vector steps" in result.stdout


@pytest.mark.parametrize("script", OFF_POLICY)
def test_non_finite_loss_stops_the_run_with_its_step(script, workdir):
    # rewards of -3e38 per step: the first critic loss, a squared error against them, overflows float32
    (workdir / "test_envs.py").write_text(TEST_ENVS)
    flags = ["--env-id", "test_envs:HugeRewardPendulum-v0", "--total-timesteps", 300, "--learning-starts", 100]
    result = run_script(script, *flags, "--batch-size", 32, cwd=workdir, env=script_env() | {"PYTHONPATH": str(workdir)})
    assert result.returncode == 1, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "non-finite loss" in x]
    assert line == f"{script}: non-finite loss at global_step 101; stopping"
    assert only_run_dir(workdir).exists()  # what was logged so far is kept


@pytest.mark.parametrize("script", OFF_POLICY)
def test_unbounded_actions_are_refused_and_clipped_envs_use_their_real_bounds(script, workdir):
    (workdir / "test_envs.py").write_text(TEST_ENVS)
    env = script_env() | {"PYTHONPATH": str(workdir)}
    result = run_script(
        script, *TINY[script], "--env-id", "test_envs:UnboundedPendulum-v0", "--save-model", cwd=workdir, env=env
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"{script}: {script} squashes actions into their bounds, which must be finite with high > low in every "
        "dimension; test_envs:UnboundedPendulum-v0 has low=[-inf] high=[inf]"
    )
    assert not (workdir / "runs").exists()
    # ClipAction reports (-inf, inf), but the env underneath is bounded to [-2, 2]: the script runs
    check_ok(
        run_script(script, *TINY[script], "--env-id", "test_envs:ClippedPendulum-v0", "--save-model", cwd=workdir, env=env)
    )
    assert len(read_scalars(str(only_run_dir(workdir)), "eval/episodic_return")[0]) == 10


UNKNOWN_ENV = "Hopper-v99"
COMMON_BAD = [
    (["--gamma", 1.5], "--gamma must be in [0, 1], got 1.5"),
    (["--tau", 0], "--tau must be in (0, 1], got 0.0"),
    (["--num-envs", 0], "--num-envs must be at least 1, got 0"),
    (["--batch-size", 0], "--batch-size must be at least 1, got 0"),
    (["--policy-frequency", 0], "--policy-frequency must be at least 1, got 0"),
    (["--buffer-size", 16, "--batch-size", 32], "--buffer-size 16 is smaller than one batch (--batch-size 32)"),
    (["--learning-starts", -1], "--learning-starts must be at least 0, got -1"),
    (["--total-timesteps", 5000, "--learning-starts", 5000], "does not exceed --learning-starts 5000 by a gradient step"),
    # 5001 steps with 2 envs run 5000, no more than learning_starts
    (["--total-timesteps", 5001, "--learning-starts", 5000, "--num-envs", 2], "does not exceed --learning-starts 5000"),
    (["--buffer-size", 10**13], "lower --buffer-size"),
    (["--exp-name", "x" * 300], "more than a folder name can hold (255); shorten --exp-name"),
    (["--upload-model", "--no-save-model"], "--upload-model pushes the saved model and its evaluation; add --save-model"),
    (["--seed", -1], "--seed must be in [0, 2**32 - 1]"),
    (["--exp-name", "sweep/a"], "--exp-name 'sweep/a' must be non-empty, without '/' or '__'"),
    (["--env-id", "no_such_module:Foo-v0"], "cannot make 'no_such_module:Foo-v0': No module named 'no_such_module'"),
    (["--env-id", UNKNOWN_ENV], "doesn't exist"),
    (["--env-id", "CartPole-v1"], "supports 1-D Box action spaces; CartPole-v1 has Discrete(2)"),
]
SAC_BAD = [
    (["--policy-lr", 0], "--policy-lr must be positive and at most 3.4e+37 (Adam), got 0.0"),
    (["--q-lr", "nan"], "--q-lr must be positive and at most 3.4e+37 (Adam), got nan"),
    (["--q-lr", 1e38], "--q-lr must be positive and at most 3.4e+37 (Adam), got 1e+38"),
    (["--alpha", -0.1, "--no-autotune"], "--alpha must be non-negative and finite in float32, got -0.1"),
    (["--target-network-frequency", 0], "--target-network-frequency must be at least 1, got 0"),
]
DETERMINISTIC_BAD = [
    (["--learning-rate", 0], "--learning-rate must be positive and at most 3.4e+37 (Adam), got 0.0"),
    (["--learning-rate", 1e38], "--learning-rate must be positive and at most 3.4e+37 (Adam), got 1e+38"),
    (["--exploration-noise", -0.1], "--exploration-noise must be non-negative and finite in float32, got -0.1"),
    (["--exploration-noise", "inf"], "--exploration-noise must be non-negative and finite in float32, got inf"),
]
TD3_BAD = [
    (["--policy-noise", "nan"], "--policy-noise must be non-negative and finite in float32, got nan"),
    (["--noise-clip", -1], "--noise-clip must be non-negative and finite in float32, got -1.0"),
]
CASES = [(s, list(f), m) for s in OFF_POLICY for f, m in COMMON_BAD]
CASES += [("sac_continuous_action.py", list(f), m) for f, m in SAC_BAD]
CASES += [(s, list(f), m) for s in OFF_POLICY[1:] for f, m in DETERMINISTIC_BAD]
CASES += [("td3_continuous_action.py", list(f), m) for f, m in TD3_BAD]


@pytest.mark.parametrize("script,flags,message", CASES, ids=[f"{s}:{' '.join(map(str, f))}" for s, f, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(script, flags, message, workdir, fork_script):
    result = fork_script(script, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, script, message, workdir)


MUJOCO_SCRIPTS = [*OFF_POLICY, "ppo_continuous_action.py", "rpo_continuous_action.py"]


@pytest.mark.parametrize("script", MUJOCO_SCRIPTS)
def test_video_that_cannot_render_is_refused_at_start(script, workdir, fork_script):
    # GLFW needs a display; without one a frame cannot be rendered, which must show before training
    env = {"MUJOCO_GL": "glfw"}
    result = fork_script(script, "--env-id", "InvertedPendulum-v5", "--capture-video", cwd=workdir, env=env, unset=["DISPLAY"])
    check_refused(result, script, "--capture-video cannot render InvertedPendulum-v5 with MUJOCO_GL=glfw", workdir)
    assert "headless machines need MUJOCO_GL=egl" in result.stderr
    # a GL back-end that fails as the env is made says which one was asked for
    env["MUJOCO_GL"] = "osmesa"
    result = fork_script(script, "--env-id", "InvertedPendulum-v5", "--capture-video", cwd=workdir, env=env, unset=["DISPLAY"])
    check_refused(result, script, "cannot make 'InvertedPendulum-v5'", workdir)
    assert "(with MUJOCO_GL=osmesa; headless machines need egl" in result.stderr
