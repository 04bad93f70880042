"""pqn.compute_q_lambda_returns against returns worked out by hand.

Rollout of T = 3 steps, rewards r = [1, 2, 3], max_a Q(s_t, a) = [0.5, 1, 2], max_a Q of the
observation after the rollout 4, gamma = 0.5, lambda = 0.5:
G_2 = r_2 + gamma * 4, G_t = r_t + gamma * (lambda * G_{t+1} + (1 - lambda) * maxQ_{t+1}).
"""

import pytest
import torch

from conftest import load_script

GAMMA, LAMBDA = 0.5, 0.5


@pytest.fixture(scope="module")
def compute_returns():
    return load_script("pqn").compute_q_lambda_returns


def column(values):
    return torch.tensor(values, dtype=torch.float32)[:, None]


def q_lambda(compute_returns, dones=(0, 0, 0), terminations=(0, 0, 0), final_q_max=(0, 0, 0), q_lambda=LAMBDA):
    returns = compute_returns(
        rewards=column([1, 2, 3]),
        q_max=column([0.5, 1, 2]),
        dones=column(dones),
        terminations=column(terminations),
        final_q_max=column(final_q_max),
        next_q_max=torch.tensor([4.0]),
        gamma=GAMMA,
        q_lambda=q_lambda,
    )
    assert returns.shape == (3, 1)
    return returns[:, 0].tolist()


def test_no_episode_end(compute_returns):
    # G_2 = 3 + 0.5*4 = 5; G_1 = 2 + 0.5*(0.5*5 + 0.5*2) = 3.75; G_0 = 1 + 0.5*(0.5*3.75 + 0.5*1) = 2.1875
    assert q_lambda(compute_returns) == pytest.approx([2.1875, 3.75, 5])


def test_termination_mid_rollout(compute_returns):
    # step 1 is terminal: G_1 = r_1 = 2 (its final-obs value, 123, is never read), and G_2 does not
    # flow back into it; G_0 = 1 + 0.5*(0.5*2 + 0.5*1) = 1.75
    returns = q_lambda(compute_returns, dones=(0, 1, 0), terminations=(0, 1, 0), final_q_max=(0, 123.0, 0))
    assert returns == pytest.approx([1.75, 2, 5])


def test_termination_ignores_a_non_finite_final_value(compute_returns):
    returns = q_lambda(compute_returns, dones=(0, 1, 0), terminations=(0, 1, 0), final_q_max=(0, float("nan"), 0))
    assert returns == pytest.approx([1.75, 2, 5])


def test_truncation_mid_rollout_bootstraps_from_final_observation(compute_returns):
    # step 1 hits a time limit with max_a Q(final obs) = 6: G_1 = 2 + 0.5*6 = 5, nothing from step 2
    # (the next episode's first step); G_0 = 1 + 0.5*(0.5*5 + 0.5*1) = 2.5
    returns = q_lambda(compute_returns, dones=(0, 1, 0), final_q_max=(0, 6.0, 0))
    assert returns == pytest.approx([2.5, 5, 5])


def test_truncation_at_last_step_ignores_next_episode_value(compute_returns):
    # the final observation (worth 8) is bootstrapped, not the next episode's start (worth 4):
    # G_2 = 3 + 0.5*8 = 7; G_1 = 2 + 0.5*(0.5*7 + 0.5*2) = 4.25; G_0 = 1 + 0.5*(0.5*4.25 + 0.5*1) = 2.3125
    returns = q_lambda(compute_returns, dones=(0, 0, 1), final_q_max=(0, 0, 8.0))
    assert returns == pytest.approx([2.3125, 4.25, 7])


def test_termination_at_last_step(compute_returns):
    # G_2 = 3; G_1 = 2 + 0.5*(0.5*3 + 0.5*2) = 3.25; G_0 = 1 + 0.5*(0.5*3.25 + 0.5*1) = 2.0625
    returns = q_lambda(compute_returns, dones=(0, 0, 1), terminations=(0, 0, 1), final_q_max=(0, 0, 8.0))
    assert returns == pytest.approx([2.0625, 3.25, 3])


def test_final_values_ignored_where_no_episode_ended(compute_returns):
    returns = q_lambda(compute_returns, final_q_max=(float("nan"), 99.0, -7.0))
    assert returns == pytest.approx([2.1875, 3.75, 5])


def test_lambda_one_is_discounted_monte_carlo_plus_bootstrap(compute_returns):
    # G_0 = 1 + 0.5*2 + 0.25*3 + 0.125*4 = 3.25, G_1 = 2 + 0.5*3 + 0.25*4 = 4.5, G_2 = 3 + 0.5*4 = 5
    assert q_lambda(compute_returns, q_lambda=1.0) == pytest.approx([3.25, 4.5, 5])
    # with a truncation at step 1 (final obs worth 6) the sum stops there: G_0 = 1 + 0.5*2 + 0.25*6
    returns = q_lambda(compute_returns, dones=(0, 1, 0), final_q_max=(0, 6.0, 0), q_lambda=1.0)
    assert returns == pytest.approx([3.5, 5, 5])


def test_lambda_zero_is_one_step_q_learning(compute_returns):
    # G_t = r_t + gamma * maxQ_{t+1}: [1 + 0.5*1, 2 + 0.5*2, 3 + 0.5*4]
    assert q_lambda(compute_returns, q_lambda=0.0) == pytest.approx([1.5, 3, 5])
    returns = q_lambda(compute_returns, dones=(0, 1, 0), terminations=(0, 1, 0), q_lambda=0.0)
    assert returns == pytest.approx([1.5, 2, 5])


def test_several_envs_are_independent(compute_returns):
    # four envs side by side: no end, termination at 1, truncation at 1 (worth 6), truncation at 2 (worth 8)
    t = torch.tensor
    returns = compute_returns(
        rewards=t([[1.0] * 4, [2.0] * 4, [3.0] * 4]),
        q_max=t([[0.5] * 4, [1.0] * 4, [2.0] * 4]),
        dones=t([[0.0, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]),
        terminations=t([[0.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]),
        final_q_max=t([[0.0, 0, 0, 0], [0, 0, 6, 0], [0, 0, 0, 8]]),
        next_q_max=t([4.0, 4, 4, 4]),
        gamma=GAMMA,
        q_lambda=LAMBDA,
    )
    expected = t([[2.1875, 1.75, 2.5, 2.3125], [3.75, 2.0, 5.0, 4.25], [5.0, 5.0, 5.0, 7.0]])
    torch.testing.assert_close(returns, expected)
