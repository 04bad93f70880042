"""sac_continuous_action_jax.py, the JAX twin of sac_continuous_action.py: its pure pieces and its actor give
the torch script's numbers on the same inputs, and, run as a user would (a subprocess), it logs the twin's tags
at their cadence (checkpointed, then resumed to twice the budget), runs copied alone through every output path (with
the fixed α), stops at a non-finite loss with its step, refuses bad input or a video that cannot render before anything
is made, and runs a run too short for a gradient step with a warning."""

import math

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from budgets import CONTINUOUS_TINY, MUJOCO_VIDEO
from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_refused,
    check_video_refusals,
    check_warns_and_runs,
    load_script,
    only_run_dir,
    run_copied_alone,
    run_script,
    script_env,
)

SCRIPT = "sac_continuous_action_jax.py"
TORCH = load_script("sac_continuous_action")
JAX = load_script("sac_continuous_action_jax")
TINY = CONTINUOUS_TINY["sac_continuous_action.py"]  # the twin's: 300 Hopper steps, learning from step 100
TAGS = [
    "losses/qf1_values",
    "losses/qf2_values",
    "losses/qf1_loss",
    "losses/qf2_loss",
    "losses/qf_loss",
    "losses/actor_loss",
    "losses/alpha",
    "losses/alpha_loss",
    "charts/SPS",
]

# asymmetric bounds per dimension: [-1, 1] (scale 1, bias 0), [-0.5, 2] (1.25, 0.75), [0, 0.1] (0.05, 0.05)
LOW = np.array([-1.0, -0.5, 0.0], dtype=np.float32)
HIGH = np.array([1.0, 2.0, 0.1], dtype=np.float32)
SCALE = (HIGH - LOW) / 2.0
BIAS = (HIGH + LOW) / 2.0
TOL = {"rtol": 1e-5, "atol": 1e-5}


def close(jax_value, torch_value, **tol):
    np.testing.assert_allclose(np.asarray(jax_value), torch_value.detach().numpy(), **(TOL | tol))


def test_rescale_action_matches_the_twin():
    rng = np.random.default_rng(0)
    squashed = np.concatenate([rng.uniform(-1, 1, (64, 3)), [[-1, -1, -1], [1, 1, 1], [0, 0, 0]]]).astype(np.float32)
    expected = TORCH.rescale_action(torch.tensor(squashed), torch.tensor(SCALE), torch.tensor(BIAS))
    result = JAX.rescale_action(jnp.asarray(squashed), jnp.asarray(SCALE), jnp.asarray(BIAS))
    close(result, expected)
    np.testing.assert_allclose(np.asarray(result)[-3:], [LOW, HIGH, BIAS], atol=1e-7)


def test_squashed_gaussian_log_prob_matches_the_twin_also_where_tanh_saturates():
    rng = np.random.default_rng(1)
    mean = rng.normal(0, 2, (256, 3)).astype(np.float32)
    log_std = rng.uniform(TORCH.LOG_STD_MIN, TORCH.LOG_STD_MAX, (256, 3)).astype(np.float32)
    u = (mean + np.exp(log_std) * rng.normal(size=(256, 3))).astype(np.float32)
    u[:32] = rng.choice([-1, 1], (32, 3)) * rng.uniform(8, 40, (32, 3))  # tanh(u) rounds to ±1 in float32
    u[:32] = np.where(rng.random((32, 3)) < 0.5, u[:32], mean[:32])  # saturated u at its mean too
    mean[:8], u[:8] = 30.0, 30.0
    args = (u, mean, log_std, SCALE)
    expected = TORCH.squashed_gaussian_log_prob(*map(torch.tensor, args))
    result = JAX.squashed_gaussian_log_prob(*map(jnp.asarray, args))
    assert result.shape == (256,) and np.isfinite(np.asarray(result)).all()
    close(result, expected, atol=1e-4)  # values reach ±1e4 (u far from a small-std mean): float32 rounding
    assert np.isfinite(np.asarray(result[:32])).all()


@pytest.mark.parametrize("autotune", [False, True], ids=["fixed_alpha", "autotuned_alpha"])
def test_soft_q_target_matches_the_twin_at_terminations(autotune):
    rng = np.random.default_rng(2)
    rewards, q1, q2 = (rng.normal(0, 5, 128).astype(np.float32) for _ in range(3))
    next_log_pi = rng.normal(-2, 3, 128).astype(np.float32)
    dones = (rng.random(128) < 0.3).astype(np.float32)  # terminations; truncations are stored with done 0
    if autotune:  # the JAX script keeps exp(log α) on the device; the twin reads it back as a float
        jax_alpha = jnp.exp(jnp.float32(-1.3))
        torch_alpha = float(np.exp(np.float32(-1.3)))
    else:
        jax_alpha = torch_alpha = 0.2
    r, d, q1_t, q2_t, log_pi_t = map(torch.tensor, (rewards, dones, q1, q2, next_log_pi))
    expected = TORCH.soft_q_target(r, d, 0.99, q1_t, q2_t, log_pi_t, torch_alpha)
    r, d, q1_j, q2_j, log_pi_j = map(jnp.asarray, (rewards, dones, q1, q2, next_log_pi))
    result = JAX.soft_q_target(r, d, 0.99, q1_j, q2_j, log_pi_j, jax_alpha)
    close(result, expected)
    np.testing.assert_array_equal(np.asarray(result)[dones == 1], rewards[dones == 1])


def test_soft_update_matches_the_twin():
    torch.manual_seed(0)
    source, target = TORCH.SoftQNetwork(5, 3), TORCH.SoftQNetwork(5, 3)
    jax_source = {k: jnp.asarray(v.numpy()) for k, v in source.state_dict().items()}
    jax_target = {k: jnp.asarray(v.numpy()) for k, v in target.state_dict().items()}
    TORCH.soft_update(target, source, 0.005)
    result = JAX.soft_update(jax_target, jax_source, 0.005)
    for name, value in target.state_dict().items():
        close(result[name], value, rtol=1e-6, atol=1e-7)


def test_action_bounds_match_the_twin_through_wrappers():
    # the bounds of the space the actions go to (RescaleAction's [0, 0.5]), never env.unwrapped's [-2, 2]
    env = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(0.0), np.float32(0.5))
    (low, high), (torch_low, torch_high) = JAX.action_bounds(env), TORCH.action_bounds(env)
    assert low.dtype == high.dtype == np.float32
    assert low.tolist() == torch_low.tolist() == [0.0] and high.tolist() == torch_high.tolist() == [0.5]


def actor_params_from_torch(actor):
    """The twin's Actor weights as the JAX Actor's params (a Dense kernel is the transposed Linear weight)."""
    state = {k: v.numpy() for k, v in actor.state_dict().items()}
    layers = {}
    for name in ["fc1", "fc2", "fc_mean", "fc_logstd"]:
        layers[name] = {"kernel": jnp.asarray(state[f"{name}.weight"].T), "bias": jnp.asarray(state[f"{name}.bias"])}
    return {"params": layers}


def test_actor_with_the_twins_weights_gives_its_outputs_sample_and_log_prob(monkeypatch):
    torch.manual_seed(3)
    torch_actor = TORCH.Actor(4, LOW, HIGH)
    with torch.no_grad():  # a wide log-std head, so that both of its clamps and tanh's saturation are reached
        torch_actor.fc_logstd.weight.mul_(20.0)
    actor = JAX.Actor(LOW, HIGH)
    params = actor_params_from_torch(torch_actor)
    x = np.random.default_rng(4).normal(0, 3, (64, 4)).astype(np.float32)
    template = jax.jit(actor.init)(jax.random.PRNGKey(0), x)
    assert jax.tree_util.tree_structure(template) == jax.tree_util.tree_structure(params)
    assert jax.tree_util.tree_map(jnp.shape, template) == jax.tree_util.tree_map(jnp.shape, params)

    mean, log_std = jax.jit(actor.apply)(params, x)
    torch_mean, torch_log_std = torch_actor(torch.tensor(x))
    close(mean, torch_mean)
    close(log_std, torch_log_std)
    assert np.asarray(log_std).min() < -4.9 and np.asarray(log_std).max() > 1.9

    key = jax.random.PRNGKey(5)
    noise = np.asarray(jax.random.normal(key, (64, 3)))  # the draw get_action makes with `key`
    monkeypatch.setattr(torch, "randn_like", lambda t: torch.tensor(noise))
    get_action = jax.jit(lambda params, x, key: actor.apply(params, x, key, method=JAX.Actor.get_action))
    action, log_prob, deterministic = get_action(params, x, key)
    with torch.no_grad():
        torch_action, torch_log_prob, torch_deterministic = torch_actor.get_action(torch.tensor(x))
    close(action, torch_action)
    close(deterministic, torch_deterministic)
    close(log_prob, torch_log_prob, atol=1e-4)
    assert (np.asarray(action) >= LOW).all() and (np.asarray(action) <= HIGH).all()


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
        assert list(steps) == [200, 300, 400, 500, 600] and all(math.isfinite(v) for v in values), tag  # every 100 past 100
    _, alphas = read_scalars(str(run_dir), "losses/alpha")
    # log α starts at 0 and is tuned down, on from where it was after the resume (not from α = 1 again)
    assert 0.5 < alphas[0] < 1.0 and all(later < earlier for earlier, later in zip(alphas, alphas[1:])), alphas
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    assert not (workdir / "videos").exists()


def test_copied_file_runs_every_output_path_with_a_fixed_alpha(tmp_path):
    run_dir, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, *MUJOCO_VIDEO, "--no-autotune", "--alpha", 0.1, tmp_path=tmp_path)
    assert sorted(checkpoint) == ["args", "model", "qf1", "qf2"] and checkpoint["args"]["alpha"] == 0.1
    assert sorted(checkpoint["model"]["params"]) == ["fc1", "fc2", "fc_logstd", "fc_mean"]
    _, alphas = read_scalars(str(run_dir), "losses/alpha")
    assert list(alphas) == pytest.approx([0.1, 0.1])
    assert len(read_scalars(str(run_dir), "losses/actor_loss")[0]) == 2
    assert len(read_scalars(str(run_dir), "losses/alpha_loss")[0]) == 0  # no α loss without --autotune


TEST_ENVS = """
import gymnasium as gym
from gymnasium.envs.classic_control.pendulum import PendulumEnv

def huge_reward_pendulum(**kwargs):
    return gym.wrappers.TransformReward(PendulumEnv(**kwargs), lambda r: -3e38)

gym.register("HugeRewardPendulum-v0", entry_point=huge_reward_pendulum, max_episode_steps=200)
"""


def test_non_finite_loss_stops_the_run_with_its_step(workdir):
    # rewards of -3e38 per step: the first critic loss, a squared error against them, overflows float32
    (workdir / "test_envs.py").write_text(TEST_ENVS)
    flags = ["--env-id", "test_envs:HugeRewardPendulum-v0", "--total-timesteps", 300, "--learning-starts", 100]
    result = run_script(SCRIPT, *flags, "--batch-size", 32, cwd=workdir, env=script_env() | {"PYTHONPATH": str(workdir)})
    assert result.returncode == 1, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "non-finite loss" in x]
    assert line == f"{SCRIPT}: non-finite loss at global_step 101; stopping"
    assert only_run_dir(workdir).exists()


BAD = [
    (["--total-timesteps", 0], "--total-timesteps, --num-envs, --buffer-size, --batch-size, --policy-frequency"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 has Discrete(2) actions; sac_continuous_action_jax.py supports 1-D Box ones"),
    (["--q-lr", "nan"], "--policy-lr and --q-lr must be positive and finite in float32, got 0.0003 and nan"),
    (["--target-network-frequency", 0], "--target-network-frequency must be at least 1"),
    (["--buffer-size", 10**13], "lower --buffer-size"),
]


@pytest.mark.parametrize("flags,message", BAD, ids=[" ".join(map(str, f)) for f, _ in BAD])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


def test_a_run_without_a_gradient_step_runs_with_a_warning(workdir, fork_script):
    # CleanRL's own smoke test of the twin: --batch-size 128 --total-timesteps 135, learning from step 5000
    result = fork_script(SCRIPT, "--batch-size", 128, "--total-timesteps", 135, cwd=workdir, timeout=300)
    check_warns_and_runs(result, SCRIPT, "--learning-starts 5000", cwd=workdir, loss_tag="losses/qf_loss")


def test_video_that_cannot_render_is_refused_at_start(workdir, fork_script):
    check_video_refusals(SCRIPT, workdir, fork_script)
