"""td3_continuous_action_jax.py: its pure pieces and networks give the torch twin's numbers (asymmetric
per-dimension bounds, clamps, clipped smoothing noise, terminations), a tiny default run logs every tag at its
cadence (checkpointed, then resumed to twice the budget), the copied file runs every output path, a non-finite loss
stops the run with its step, bad input or a video that cannot render is refused before anything is made, and a run
too short for a gradient step runs with a warning."""

import jax
import numpy as np
import pytest
import torch

from budgets import JAX_TINY, VIDEO_ENV
from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_refused,
    check_video_refusals,
    check_warns_and_runs,
    load_script,
    run_copied_alone,
    run_script,
    script_env,
)
from jax_parity import both, dense_params

SCRIPT = "td3_continuous_action_jax.py"
TD3 = load_script("td3_continuous_action")
TD3_JAX = load_script("td3_continuous_action_jax")
TINY = JAX_TINY[SCRIPT]  # the twin's: 300 Hopper steps, learning from step 100
TAGS = [
    "losses/qf1_values",
    "losses/qf2_values",
    "losses/qf1_loss",
    "losses/qf2_loss",
    "losses/qf_loss",
    "losses/actor_loss",
    "charts/SPS",
]

# three dimensions with different, asymmetric ranges
LOW = np.array([-1.0, -0.5, 0.0], dtype=np.float32)
HIGH = np.array([1.0, 2.0, 0.1], dtype=np.float32)
SCALE = (HIGH - LOW) / 2.0
BIAS = (HIGH + LOW) / 2.0
TOL = {"rtol": 1e-6, "atol": 1e-6}


def test_rescale_action_matches_the_twin():
    rng = np.random.default_rng(0)
    squashed = rng.uniform(-1, 1, (64, 3)).astype(np.float32)
    squashed[:2] = [[-1, -1, -1], [1, 1, 1]]  # the bounds themselves
    (t_squashed, t_scale, t_bias), (j_squashed, j_scale, j_bias) = both(squashed, SCALE, BIAS)
    expected = TD3.rescale_action(t_squashed, t_scale, t_bias).numpy()
    np.testing.assert_allclose(TD3_JAX.rescale_action(j_squashed, j_scale, j_bias), expected, **TOL)
    np.testing.assert_allclose(expected[:2], [LOW, HIGH], **TOL)


def test_exploration_actions_match_the_twin_and_stay_in_bounds():
    rng = np.random.default_rng(1)
    actions = rng.uniform(LOW, HIGH, (64, 3)).astype(np.float32)
    noise = (rng.standard_normal((64, 3)) * 3).astype(np.float32)  # large draws: many hit the clamps
    t, j = both(actions, noise, SCALE, LOW, HIGH)
    expected = TD3.exploration_actions(t[0], t[1], 0.5, t[2], t[3], t[4]).numpy()
    result = np.asarray(TD3_JAX.exploration_actions(j[0], j[1], 0.5, j[2], j[3], j[4]))
    np.testing.assert_allclose(result, expected, **TOL)
    assert (result == LOW).any() and (result == HIGH).any() and (result >= LOW).all() and (result <= HIGH).all()


def test_smoothed_target_actions_match_the_twin():
    rng = np.random.default_rng(2)
    target_actions = rng.uniform(LOW, HIGH, (64, 3)).astype(np.float32)
    noise = (rng.standard_normal((64, 3)) * 4).astype(np.float32)  # beyond noise_clip / policy_noise = 2.5 often
    t, j = both(target_actions, noise, SCALE, LOW, HIGH)
    expected = TD3.smoothed_target_actions(t[0], t[1], 0.2, 0.5, t[2], t[3], t[4]).numpy()
    result = np.asarray(TD3_JAX.smoothed_target_actions(j[0], j[1], 0.2, 0.5, j[2], j[3], j[4]))
    np.testing.assert_allclose(result, expected, **TOL)
    assert (np.abs(noise * 0.2) > 0.5).any() and (result == LOW).any() and (result == HIGH).any()


def test_clipped_double_q_target_matches_the_twin_at_terminations():
    rng = np.random.default_rng(3)
    rewards = rng.standard_normal(64).astype(np.float32)
    dones = (rng.uniform(size=64) < 0.3).astype(np.float32)  # terminations; truncated rows are stored with done 0
    q1, q2 = (rng.standard_normal(64) * 10).astype(np.float32), (rng.standard_normal(64) * 10).astype(np.float32)
    t, j = both(rewards, dones, q1, q2)
    expected = TD3.clipped_double_q_target(t[0], t[1], 0.99, t[2], t[3]).numpy()
    result = np.asarray(TD3_JAX.clipped_double_q_target(j[0], j[1], 0.99, j[2], j[3]))
    np.testing.assert_allclose(result, expected, **TOL)
    np.testing.assert_array_equal(result[dones == 1], rewards[dones == 1])  # no bootstrap past a termination


def test_soft_update_matches_the_twin():
    torch.manual_seed(0)
    source, target = TD3.QNetwork(5, 3), TD3.QNetwork(5, 3)
    j_source, j_target = dense_params(source), dense_params(target)
    TD3.soft_update(target, source, 0.005)
    result = TD3_JAX.soft_update(j_target, j_source, 0.005)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), result, dense_params(target))


def test_networks_with_the_twins_weights_give_its_outputs():
    torch.manual_seed(1)
    actor, qf = TD3.Actor(5, LOW, HIGH), TD3.QNetwork(5, 3)
    obs = torch.randn(32, 5) * 3
    actions = torch.as_tensor(np.random.default_rng(4).uniform(LOW, HIGH, (32, 3)).astype(np.float32))
    with torch.no_grad():
        expected_actions, expected_q = actor(obs).numpy(), qf(obs, actions).numpy()
    np.testing.assert_allclose(TD3_JAX.Actor(LOW, HIGH).action_scale, actor.action_scale.numpy(), **TOL)
    np.testing.assert_allclose(TD3_JAX.Actor(LOW, HIGH).action_bias, actor.action_bias.numpy(), **TOL)
    j_actions = TD3_JAX.Actor(LOW, HIGH).apply(dense_params(actor), obs.numpy())
    j_q = TD3_JAX.QNetwork().apply(dense_params(qf), obs.numpy(), actions.numpy())
    np.testing.assert_allclose(j_actions, expected_actions, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(j_q, expected_q, rtol=1e-5, atol=1e-5)


def test_default_flags(workdir, fork_script):
    results = []

    def run(*args, **kwargs):
        results.append(fork_script(*args, **kwargs, timeout=600))
        return results[-1]

    # a checkpoint at step 150 and at the end (300), then --resume to 600 in the same folder and log
    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 150, workdir, run=run)
    assert all("global_step=" in result.stdout and "SPS=" in result.stdout for result in results)
    for tag in TAGS:
        steps, values = read_scalars(str(run_dir), tag)
        assert list(steps) == [200, 300, 400, 500, 600] and np.isfinite(values).all(), (
            tag
        )  # every 100 env steps past learning_starts
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    assert not (workdir / "videos").exists()


def test_copied_file_runs_every_output_path(tmp_path):
    _, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, *VIDEO_ENV[SCRIPT], tmp_path=tmp_path)
    assert set(checkpoint) == {"model", "qf1", "qf2", "args"}
    assert set(checkpoint["model"]["params"]) == {"fc1", "fc2", "fc_mu"}
    assert set(checkpoint["qf2"]["params"]) == {"fc1", "fc2", "fc3"}


HUGE_REWARD = """
import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv

gym.register(
    "HugeRewardPendulum-v0",
    entry_point=lambda **kwargs: gym.wrappers.TransformReward(PendulumEnv(**kwargs), lambda r: -3e38),
    max_episode_steps=200,
)
"""


def test_non_finite_loss_stops_the_run_with_its_step(workdir):
    # rewards of -3e38 per step: the first critic loss, a squared error against them, overflows float32
    (workdir / "test_envs.py").write_text(HUGE_REWARD)
    flags = ["--env-id", "test_envs:HugeRewardPendulum-v0", "--total-timesteps", 300, "--learning-starts", 100]
    result = run_script(SCRIPT, *flags, "--batch-size", 32, cwd=workdir, env=script_env() | {"PYTHONPATH": str(workdir)})
    assert result.returncode == 1, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "non-finite loss" in x]
    assert line == f"{SCRIPT}: non-finite loss at global_step 101; stopping"


BAD = [
    (["--total-timesteps", 0], "--total-timesteps, --num-envs, --buffer-size, --batch-size, --policy-frequency"),
    (["--learning-rate", "nan"], "--learning-rate must be positive and finite in float32, got nan"),
    (["--gamma", 1.5], "--gamma and --tau must be in [0, 1]"),
    (["--num-envs", 0], "--num-envs, --buffer-size, --batch-size, --policy-frequency must be at least 1"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 has Discrete(2) actions; td3_continuous_action_jax.py supports 1-D Box ones"),
]


@pytest.mark.parametrize("flags,message", BAD, ids=[" ".join(map(str, f)) for f, _ in BAD])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


def test_a_run_without_a_gradient_step_runs_with_a_warning(workdir, fork_script):
    result = fork_script(SCRIPT, "--total-timesteps", 100, "--learning-starts", 100, cwd=workdir, timeout=300)
    check_warns_and_runs(result, SCRIPT, "--learning-starts 100", cwd=workdir, loss_tag="losses/qf_loss")


def test_video_that_cannot_render_is_refused_at_start(workdir, fork_script):
    check_video_refusals(SCRIPT, workdir, fork_script)
