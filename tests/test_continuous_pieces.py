"""The pure pieces of the continuous off-policy scripts (sac, td3, ddpg), checked against hand-computed
values: per-dimension action rescaling with asymmetric bounds, the squashed Gaussian log-prob with a
scale other than 1, exploration and target-smoothing noise scaled and clamped per dimension, the TD
targets at termination and truncation, where the action bounds are read from, and which spaces the checks refuse."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import load_script

SAC = load_script("sac_continuous_action")
TD3 = load_script("td3_continuous_action")
DDPG = load_script("ddpg_continuous_action")
ALL = [SAC, TD3, DDPG]

# two dimensions with different, asymmetric ranges: [-1, 3] (scale 2, bias 1) and [0, 0.5] (scale 0.25, bias 0.25)
LOW = np.array([-1.0, 0.0], dtype=np.float32)
HIGH = np.array([3.0, 0.5], dtype=np.float32)
SCALE = torch.tensor([2.0, 0.25])
BIAS = torch.tensor([1.0, 0.25])


SQUASHED = torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0], [0.5, -0.5]])
RESCALED = torch.tensor([[-1.0, 0.0], [3.0, 0.5], [1.0, 0.25], [2.0, 0.125]])


@pytest.mark.parametrize("module", [SAC, TD3], ids=lambda m: m.__name__)
def test_rescale_action_maps_minus_one_one_to_each_dimensions_bounds(module):
    assert torch.allclose(module.rescale_action(SQUASHED, SCALE, BIAS), RESCALED)


def test_ddpg_actor_maps_minus_one_one_to_each_dimensions_bounds():
    # DDPG's actor rescales inline, as upstream's does: drive its tanh to each squashed row through fc_mu's bias
    actor = DDPG.Actor(3, LOW, HIGH)
    with torch.no_grad():
        actor.fc_mu.weight.zero_()
        for squashed, expected in zip(SQUASHED, RESCALED):
            actor.fc_mu.bias.copy_(torch.atanh(squashed.clamp(-1 + 1e-7, 1 - 1e-7)).clamp(-20, 20))
            assert torch.allclose(actor(torch.randn(1, 3)), expected[None], atol=1e-5)


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.__name__)
def test_actor_holds_per_dimension_scale_and_bias_and_stays_in_bounds(module):
    actor = module.Actor(3, LOW, HIGH)
    assert torch.equal(actor.action_scale, SCALE) and torch.equal(actor.action_bias, BIAS)
    x = torch.randn(512, 3) * 100  # large inputs saturate tanh: actions reach the bounds, never past them
    actions = actor(x) if module is not SAC else actor.get_action(x)[0]
    assert (actions >= torch.tensor(LOW)).all() and (actions <= torch.tensor(HIGH)).all()


def test_squashed_log_prob_by_hand_at_zero():
    # u = 0, N(0, 1): log N(0) = -log(2π)/2; tanh'(0) = 1, so the Jacobian term is log(scale) per dimension
    u = torch.zeros(1, 2)
    log_prob = SAC.squashed_gaussian_log_prob(u, torch.zeros(1, 2), torch.zeros(1, 2), SCALE)
    expected = 2 * (-0.5 * math.log(2 * math.pi)) - math.log(2.0) - math.log(0.25)
    assert log_prob.shape == (1,) and log_prob.item() == pytest.approx(expected, abs=1e-6)


def test_squashed_log_prob_by_hand_off_centre():
    # one dimension, scale 2: u = 1, mean 0.5, log_std log(0.5): z = (1 - 0.5) / 0.5 = 1
    u, mean, log_std = torch.tensor([[1.0]]), torch.tensor([[0.5]]), torch.tensor([[math.log(0.5)]])
    gaussian = -0.5 - math.log(0.5) - 0.5 * math.log(2 * math.pi)
    jacobian = math.log(2.0) + math.log(1 - math.tanh(1.0) ** 2)
    log_prob = SAC.squashed_gaussian_log_prob(u, mean, log_std, torch.tensor([2.0]))
    assert log_prob.item() == pytest.approx(gaussian - jacobian, abs=1e-6)


def test_squashed_log_prob_equals_the_transformed_distribution_and_integrates_to_one():
    torch.manual_seed(0)
    mean, log_std = torch.randn(64, 2), torch.randn(64, 2).clamp(-2, 1)
    u = mean + log_std.exp() * torch.randn(64, 2)
    transforms = [torch.distributions.TanhTransform(), torch.distributions.AffineTransform(BIAS, SCALE)]
    reference = torch.distributions.TransformedDistribution(torch.distributions.Normal(mean, log_std.exp()), transforms)
    actions = torch.tanh(u) * SCALE + BIAS
    expected = reference.log_prob(actions).sum(1)
    assert torch.allclose(SAC.squashed_gaussian_log_prob(u, mean, log_std, SCALE), expected, atol=1e-3)
    # the density over a = tanh(u) * 2 + 1 on [-1, 3] integrates to 1 (trapezoid over u, a's Jacobian included)
    grid = torch.linspace(-12, 12, 200_001).unsqueeze(1)
    density = SAC.squashed_gaussian_log_prob(
        grid, torch.full_like(grid, 0.3), torch.full_like(grid, -0.2), torch.tensor([2.0])
    ).exp()
    da_du = 2.0 * (1 - torch.tanh(grid.squeeze(1)) ** 2)
    assert torch.trapezoid(density * da_du, grid.squeeze(1)).item() == pytest.approx(1.0, abs=1e-4)


def test_squashed_log_prob_stays_finite_where_tanh_saturates():
    # u = 20: tanh(u) rounds to 1 in float32 and log(1 - tanh²) would be -inf; the softplus form is exact
    u = torch.tensor([[20.0]])
    log_prob = SAC.squashed_gaussian_log_prob(u, torch.tensor([[20.0]]), torch.zeros(1, 1), torch.tensor([1.0]))
    expected = -0.5 * math.log(2 * math.pi) - (2 * (math.log(2) - 20 - math.log1p(math.exp(-40))))
    assert torch.isfinite(log_prob).all() and log_prob.item() == pytest.approx(expected, rel=1e-5)


def test_sac_actor_log_prob_is_the_sampled_actions():
    torch.manual_seed(3)
    actor = SAC.Actor(4, LOW, HIGH)
    x = torch.randn(8, 4)
    torch.manual_seed(5)
    actions, log_prob, deterministic = actor.get_action(x)
    mean, log_std = actor(x)
    torch.manual_seed(5)
    u = mean + log_std.exp() * torch.randn_like(mean)
    assert torch.allclose(actions, torch.tanh(u) * SCALE + BIAS)
    assert torch.allclose(log_prob, SAC.squashed_gaussian_log_prob(u, mean, log_std, SCALE))
    assert torch.allclose(deterministic, torch.tanh(mean) * SCALE + BIAS)


@pytest.mark.parametrize("module", [TD3, DDPG], ids=lambda m: m.__name__)
def test_exploration_noise_is_scaled_and_clamped_per_dimension(module):
    actions = torch.tensor([[1.0, 0.25], [2.9, 0.45], [1.0, 0.25]])
    noise = torch.tensor([[1.0, 1.0], [1.0, 1.0], [-3.0, -20.0]])  # one standard-normal draw per env and dimension
    low, high = torch.tensor(LOW), torch.tensor(HIGH)
    result = module.exploration_actions(actions, noise, 0.1, SCALE, low, high)
    # std 0.1 x scale: 0.2 in dimension 0, 0.025 in dimension 1; clamped to [-1, 3] and [0, 0.5]
    expected = torch.tensor([[1.2, 0.275], [3.0, 0.475], [0.4, 0.0]])
    assert torch.allclose(result, expected)


def test_target_smoothing_noise_is_clipped_then_scaled_then_clamped_per_dimension():
    target_actions = torch.tensor([[1.0, 0.25], [1.0, 0.25], [2.8, 0.5]])
    noise = torch.tensor([[1.0, -1.0], [5.0, -5.0], [1.0, 0.5]])  # one draw per batch row and dimension
    low, high = torch.tensor(LOW), torch.tensor(HIGH)
    result = TD3.smoothed_target_actions(target_actions, noise, 0.2, 0.5, SCALE, low, high)
    # noise x 0.2, clipped to ±0.5, then x scale (2, 0.25): row 0 (+0.4, -0.05), row 1 clipped (+1.0, -0.125),
    # row 2 (+0.4, +0.025) then clamped to the upper bounds 3 and 0.5
    expected = torch.tensor([[1.4, 0.2], [2.0, 0.125], [3.0, 0.5]])
    assert torch.allclose(result, expected)


def test_targets_bootstrap_at_truncation_and_not_at_termination():
    rewards, dones = torch.tensor([1.0, 1.0]), torch.tensor([0.0, 1.0])  # a truncated row (done 0), a terminal row
    q1, q2 = torch.tensor([10.0, 10.0]), torch.tensor([8.0, 8.0])
    assert torch.allclose(TD3.clipped_double_q_target(rewards, dones, 0.5, q1, q2), torch.tensor([5.0, 1.0]))
    assert torch.allclose(DDPG.q_target(rewards, dones, 0.5, q1), torch.tensor([6.0, 1.0]))
    # soft target: min(Q) - α log π = 8 - 0.2 x (-5) = 9
    log_pi = torch.tensor([-5.0, -5.0])
    assert torch.allclose(SAC.soft_q_target(rewards, dones, 0.5, q1, q2, log_pi, 0.2), torch.tensor([5.5, 1.0]))


def test_soft_update_moves_targets_by_tau():
    source, target = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)
    with torch.no_grad():
        source.weight.fill_(1.0), source.bias.fill_(1.0), target.weight.fill_(0.0), target.bias.fill_(2.0)
    TD3.soft_update(target, source, 0.25)
    assert torch.allclose(target.weight, torch.full((1, 2), 0.25)) and torch.allclose(target.bias, torch.tensor([1.75]))


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.__name__)
def test_bounds_come_from_the_space_the_actions_go_to(module):
    # Pendulum takes [-2, 2]; behind RescaleAction the env the script steps takes [0, 0.5]: the bounds are the
    # wrapper's, never env.unwrapped's
    env = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(0.0), np.float32(0.5))
    low, high = module.action_bounds(env)
    assert low.tolist() == [0.0] and high.tolist() == [0.5] and low.dtype == high.dtype == np.float32
    env.action_space = gym.spaces.Box(LOW, HIGH)  # whatever the outermost space declares, per dimension
    assert [b.tolist() for b in module.action_bounds(env)] == [LOW.tolist(), HIGH.tolist()]


class _Env:
    def __init__(self, action_space, observation_space=gym.spaces.Box(-1, 1, (3,))):
        self.action_space, self.observation_space = action_space, observation_space


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.__name__)
@pytest.mark.parametrize(
    "space,observations,message",
    [
        (gym.spaces.Discrete(3), None, "Test-v0 has Discrete(3) actions; {script} supports 1-D Box ones"),
        (gym.spaces.Box(-1, 1, (2, 2)), None, "has Box(-1.0, 1.0, (2, 2), float32) actions; {script} supports 1-D Box ones"),
        (gym.spaces.Box(-np.inf, np.inf, (2,)), None, "must be finite with high > low in every dimension"),
        (gym.spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, np.inf])), None, "high=[1.0, inf]"),
        (gym.spaces.Box(np.array([-1.0, 0.5]), np.array([1.0, 0.5])), None, "low=[-1.0, 0.5] high=[1.0, 0.5]"),
        (gym.spaces.Box(LOW, HIGH), gym.spaces.Box(0, 255, (8, 8, 3), np.uint8), "observations; {script} supports 1-D Box"),
        (gym.spaces.Box(LOW, HIGH), gym.spaces.Discrete(4), "Test-v0 has Discrete(4) observations"),
    ],
)
def test_validation_refuses_spaces_that_cannot_be_squashed_or_fed(module, space, observations, message):
    args = module.Args(env_id="Test-v0")
    script = f"{module.__name__.removeprefix('script_')}.py"
    env = _Env(space) if observations is None else _Env(space, observations)
    error = module.validation_error(args, env)
    assert error is not None and message.format(script=script) in error
    assert module.validation_error(args, _Env(gym.spaces.Box(LOW, HIGH))) is None


@pytest.mark.parametrize("module", ALL, ids=lambda m: m.__name__)
def test_a_replay_memory_from_a_checkpoint_of_another_device_samples_onto_this_runs(module):
    # a run checkpointed on a GPU machine and resumed on a CPU one (or the other way): the transitions come back, the
    # device stays this run's ("meta" stands in for the other machine's)
    from cleanrl_utils.checkpoint import capture, decode, encode, restore

    saved = module.ReplayBuffer(8, (3,), 2, torch.device("meta"))
    saved.add(np.ones((1, 3)), np.ones((1, 2)), np.ones(1), np.zeros(1), np.zeros(1), np.ones((1, 3)), None)
    live = module.ReplayBuffer(8, (3,), 2, torch.device("cpu"))
    kind, payload = capture(saved)
    restore("rb", live, kind, decode(encode(payload)))
    assert live.device == torch.device("cpu") and (live.pos, live.size) == (1, 1)
    b_obs, *_ = live.sample(4)
    assert b_obs.device == torch.device("cpu") and (b_obs == 1).all()
