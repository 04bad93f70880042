"""What the continuous off-policy scripts (sac, td3, ddpg) must do, run as a user would: a subprocess.
Per script: the default flags with a tiny budget (checkpointed mid-run, then resumed to twice the budget),
upstream CleanRL's own smoke commands as written, a run that ends
before its first gradient step (it warns and runs), cadences that fire at their configured rate whatever `--num-envs`
is, a non-finite loss, refusing action spaces that cannot be squashed (before anything is made) while driving an env
within the bounds of the space its actions go to, the validation cases, and a --capture-video on an env without frames
(the JAX twins too). (The --capture-video, --save-model,
--track and copy-alone paths are in test_scripts.py.)"""

import pytest

from budgets import CONTINUOUS_TINY
from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_ok,
    check_refused,
    check_video_refusals,
    check_warns_and_runs,
    only_run_dir,
    run_script,
    script_env,
)

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
# space is unbounded, one wrapped in ClipAction (whose space then reads (-inf, inf): the script steps that space, so
# it cannot squash into it), one registered behind RescaleAction to [0, 0.5] (the env underneath takes [-2, 2]) that
# fails on any action outside its declared space, and one whose rewards overflow a squared error in float32.
TEST_ENVS = """
import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class UnboundedPendulum(PendulumEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)


class InSpaceOnly(gym.Wrapper):
    def step(self, action):
        assert self.action_space.contains(np.asarray(action, dtype=np.float32)), f"action {action} outside the space"
        return super().step(action)


def clipped_pendulum(**kwargs):
    return gym.wrappers.ClipAction(PendulumEnv(**kwargs))


def rescaled_pendulum(**kwargs):
    return InSpaceOnly(gym.wrappers.RescaleAction(PendulumEnv(**kwargs), 0.0, 0.5))


def huge_reward_pendulum(**kwargs):
    return gym.wrappers.TransformReward(PendulumEnv(**kwargs), lambda r: -3e38)


gym.register("UnboundedPendulum-v0", entry_point=UnboundedPendulum, max_episode_steps=200)
gym.register("ClippedPendulum-v0", entry_point=clipped_pendulum, max_episode_steps=50)
gym.register("RescaledPendulum-v0", entry_point=rescaled_pendulum, max_episode_steps=50)
gym.register("HugeRewardPendulum-v0", entry_point=huge_reward_pendulum, max_episode_steps=200)
"""


@pytest.mark.parametrize("script", OFF_POLICY)
def test_default_flags(script, workdir, fork_script):
    results = []

    def run(*args, **kwargs):
        results.append(fork_script(*args, **kwargs, timeout=600))
        return results[-1]

    # a checkpoint at step 150 and at the end (300), then --resume to 600 in the same folder and log
    run_dir = check_checkpoint_and_resume(script, TINY[script], 150, workdir, run=run)
    assert all("global_step=" in result.stdout and "SPS=" in result.stdout for result in results)
    for tag in TAGS[script]:
        steps, _ = read_scalars(str(run_dir), tag)
        assert list(steps) == [200, 300, 400, 500, 600], tag  # every 100 env steps past learning_starts 100, once
    if script == "sac_continuous_action.py":  # log α goes on from where it was, not from α = 1 again
        _, alphas = read_scalars(str(run_dir), "losses/alpha")
        assert all(later < earlier for earlier, later in zip(alphas, alphas[1:])), alphas
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    assert not (workdir / "videos").exists()


# upstream CleanRL's tests/test_mujoco.py, as written (../shared/upstream-test-commands.tsv): Hopper-v4 still exists
UPSTREAM_SMOKE = {
    "sac_continuous_action.py": ["--env-id", "Hopper-v4", "--batch-size", 128, "--total-timesteps", 135],
    "td3_continuous_action.py": ["--env-id", "Hopper-v4", "--learning-starts", 100, "--batch-size", 32,
                                 "--total-timesteps", 105],
    "ddpg_continuous_action.py": ["--save-model", "--env-id", "Hopper-v4", "--learning-starts", 100, "--batch-size", 32,
                                  "--total-timesteps", 105],
}  # fmt: skip


@pytest.mark.parametrize("script", OFF_POLICY)
def test_upstream_smoke_commands_run_as_written(script, workdir, fork_script):
    result = fork_script(script, *UPSTREAM_SMOKE[script], cwd=workdir, timeout=600)
    if script == "sac_continuous_action.py":
        # SAC's 135 steps end before its default --learning-starts 5000: it runs, saying so in one line
        check_warns_and_runs(result, script, "--learning-starts 5000", alone=True)
    else:
        check_ok(result)
        assert [line for line in result.stdout.splitlines() if "warning" in line] == []
    assert "global_step=135" in result.stdout if script == "sac_continuous_action.py" else "global_step=105" in result.stdout
    if script == "ddpg_continuous_action.py":
        assert len(read_scalars(str(only_run_dir(workdir)), "eval/episodic_return")[0]) == 10


@pytest.mark.parametrize("script", OFF_POLICY)
def test_a_run_without_a_gradient_step_warns_and_runs(script, workdir, fork_script):
    # 101 steps with 2 envs run 100, no more than --learning-starts 100: no update, but the run is a valid smoke test
    flags = ["--env-id", "Pendulum-v1", "--total-timesteps", 101, "--num-envs", 2, "--learning-starts", 100]
    result = fork_script(script, *flags, "--buffer-size", 200, "--batch-size", 16, cwd=workdir, timeout=600)
    check_warns_and_runs(result, script, "--learning-starts 100", cwd=workdir, loss_tag="losses/qf1_loss")
    assert "global_step=100," in result.stdout  # rounded down to whole vector steps


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


def test_non_finite_stop_while_filming_says_one_line(workdir):
    # --learning-rate 1e8 blows the critic up within a few gradient steps; the MuJoCo renderer must be closed before
    # the exit (where EGL is already gone and its context's __del__ prints tracebacks), and the videos so far kept
    flags = ["--env-id", "InvertedPendulum-v5", "--learning-rate", 1e8, "--learning-starts", 100, "--total-timesteps", 1500]
    result = run_script("ddpg_continuous_action.py", *flags, "--capture-video", cwd=workdir)
    assert result.returncode == 1, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("ddpg_continuous_action.py: non-finite loss at global_step ") and line.endswith("; stopping")
    assert list((workdir / "videos" / only_run_dir(workdir).name).glob("*.mp4"))


@pytest.mark.parametrize("script", OFF_POLICY)
def test_unbounded_actions_are_refused_and_bounds_come_from_the_space_the_actions_go_to(script, workdir):
    (workdir / "test_envs.py").write_text(TEST_ENVS)
    env = script_env() | {"PYTHONPATH": str(workdir)}
    # ClipAction's space reads (-inf, inf): the env the script steps is unbounded, whatever lies underneath
    for env_id in ("test_envs:UnboundedPendulum-v0", "test_envs:ClippedPendulum-v0"):
        result = run_script(script, *TINY[script], "--env-id", env_id, "--save-model", cwd=workdir, env=env)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (
            f"{script}: {script} squashes actions into their bounds, which must be finite with high > low in every "
            f"dimension; {env_id} has low=[-inf] high=[inf]"
        )
        assert not (workdir / "runs").exists()
    # registered behind RescaleAction to [0, 0.5]: every action the env receives, in training and evaluation, lies in
    # [0, 0.5] (the env fails otherwise), not in the [-2, 2] of the env underneath
    flags = [*TINY[script], "--env-id", "test_envs:RescaledPendulum-v0", "--save-model"]
    check_ok(run_script(script, *flags, cwd=workdir, env=env))
    assert len(read_scalars(str(only_run_dir(workdir)), "eval/episodic_return")[0]) == 10


UNKNOWN_ENV = "Hopper-v99"
SIZES = "--total-timesteps, --num-envs, --buffer-size, --batch-size, --policy-frequency"  # SAC adds --target-network-frequency
COMMON_BAD = [
    (["--total-timesteps", 0], f"{SIZES}"),
    (["--gamma", 1.5], "--gamma and --tau must be in [0, 1]"),
    (["--tau", -0.1], "--gamma and --tau must be in [0, 1]"),
    (["--num-envs", 0], f"{SIZES}"),
    (["--batch-size", 0], f"{SIZES}"),
    (["--policy-frequency", 0], f"{SIZES}"),
    (["--buffer-size", 10**13], "more than this machine's memory; lower --buffer-size"),
    (["--exp-name", "x" * 300], "--exp-name 'xxx"),
    (["--upload-model", "--no-save-model"], "--upload-model pushes the saved model and its evaluation; add --save-model"),
    (["--seed", -1], "--seed must be in [0, 2**32 - 1], got -1"),
    (["--exp-name", "sweep/a"], "--exp-name 'sweep/a' must be a folder name: up to 150 letters, digits, '.', '-' and single"),
    (["--exp-name", "a__b"], "--exp-name 'a__b' must be a folder name"),
    (["--env-id", "no_such_module:Foo-v0"], "cannot make 'no_such_module:Foo-v0': No module named 'no_such_module'"),
    (["--env-id", UNKNOWN_ENV], "doesn't exist"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 has Discrete(2) actions; "),
]
SAC_BAD = [
    (["--policy-lr", 0], "--policy-lr and --q-lr must be positive and finite in float32, got 0.0 and 0.001"),
    (["--q-lr", "nan"], "--policy-lr and --q-lr must be positive and finite in float32, got 0.0003 and nan"),
    (["--q-lr", 1e38], "--policy-lr and --q-lr must be positive and finite in float32, got 0.0003 and 1e+38"),
    (["--target-network-frequency", 0], f"{SIZES}, --target-network-frequency must be at least 1"),
]
DETERMINISTIC_BAD = [
    (["--learning-rate", 0], "--learning-rate must be positive and finite in float32, got 0.0"),
    (["--learning-rate", 1e38], "--learning-rate must be positive and finite in float32, got 1e+38"),
    (["--num-envs", 0], f"{SIZES} must be at least 1"),
]
CASES = [(s, list(f), m) for s in OFF_POLICY for f, m in COMMON_BAD]
CASES += [("sac_continuous_action.py", list(f), m) for f, m in SAC_BAD]
CASES += [(s, list(f), m) for s in OFF_POLICY[1:] for f, m in DETERMINISTIC_BAD]


@pytest.mark.parametrize("script,flags,message", CASES, ids=[f"{s}:{' '.join(map(str, f))}" for s, f, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(script, flags, message, workdir, fork_script):
    result = fork_script(script, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, script, message, workdir)


MUJOCO_SCRIPTS = [*OFF_POLICY, "ppo_continuous_action.py", "rpo_continuous_action.py"]


@pytest.mark.parametrize("script", MUJOCO_SCRIPTS)
def test_video_that_cannot_render_is_refused_at_start(script, workdir, fork_script):
    check_video_refusals(script, workdir, fork_script)


# an env that has no frames to film: no rgb_array render mode, and (as older envs) no render_mode argument at all
NO_FRAMES = """
import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv


class NoFramesPendulum(PendulumEnv):
    metadata = {"render_modes": []}

    def __init__(self):
        super().__init__()


gym.register("NoFramesPendulum-v0", entry_point=NoFramesPendulum, max_episode_steps=50)
"""
JAX_TWINS = ["sac_continuous_action_jax.py", "td3_continuous_action_jax.py", "ddpg_continuous_action_jax.py"]


@pytest.mark.parametrize("script", [*OFF_POLICY, *JAX_TWINS])
def test_video_of_an_env_without_frames_is_refused_naming_the_env(script, tmp_path):
    # the env is to blame, not MUJOCO_GL: one line, exit code 2, nothing made
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "no_frames.py").write_text(NO_FRAMES)
    (tmp_path / "run").mkdir()
    env = script_env() | {"PYTHONPATH": str(tmp_path / "envs")}
    result = run_script(script, "--env-id", "no_frames:NoFramesPendulum-v0", "--capture-video", cwd=tmp_path / "run", env=env)
    check_refused(result, script, "no_frames:NoFramesPendulum-v0 renders no video", tmp_path / "run")
    assert "MUJOCO_GL" not in result.stderr
