"""compute_gae of every PPO script against advantages worked out by hand.

Rollout of T = 3 steps, rewards r = [1, 2, 3], values V = [0.5, 1, 2], bootstrap value of the
observation after the rollout 4, gamma = 0.5, lambda = 0.5 (so gamma * lambda = 0.25).
delta_t = r_t + gamma * (1 - term_t) * V_next - V_t; A_t = delta_t + 0.25 * (1 - done_t) * A_{t+1}.
"""

import pytest
import torch

from conftest import load_script

SCRIPTS = ["ppo", "ppo_atari", "ppo_continuous_action", "rpo_continuous_action"]
GAMMA, LAMBDA = 0.5, 0.5


@pytest.fixture(scope="module", params=SCRIPTS)
def compute_gae(request):
    return load_script(request.param).compute_gae


def column(values):
    return torch.tensor(values, dtype=torch.float32)[:, None]


def gae(compute_gae, dones=(0, 0, 0), terminations=(0, 0, 0), final_values=(0, 0, 0)):
    advantages, returns = compute_gae(
        rewards=column([1, 2, 3]),
        values=column([0.5, 1, 2]),
        dones=column(dones),
        terminations=column(terminations),
        final_values=column(final_values),
        next_value=torch.tensor([4.0]),
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    return advantages[:, 0].tolist(), returns[:, 0].tolist()


def test_no_episode_end(compute_gae):
    # deltas: 3 + 0.5*4 - 2 = 3, 2 + 0.5*2 - 1 = 2, 1 + 0.5*1 - 0.5 = 1
    advantages, returns = gae(compute_gae)
    assert advantages == pytest.approx([1 + 0.25 * 2.75, 2 + 0.25 * 3, 3])
    assert returns == pytest.approx([1.6875 + 0.5, 2.75 + 1, 3 + 2])


def test_termination_mid_rollout(compute_gae):
    # step 1 ends in a terminal state: delta_1 = 2 - 1 = 1 and nothing flows back from step 2
    advantages, _ = gae(compute_gae, dones=(0, 1, 0), terminations=(0, 1, 0), final_values=(0, 123.0, 0))
    assert advantages == pytest.approx([1 + 0.25 * 1, 1, 3])


def test_truncation_mid_rollout_bootstraps_from_final_observation(compute_gae):
    # step 1 hits a time limit; its final observation is worth 6: delta_1 = 2 + 0.5*6 - 1 = 4,
    # and step 2 (the next episode's first step) does not flow back into step 1
    advantages, _ = gae(compute_gae, dones=(0, 1, 0), final_values=(0, 6.0, 0))
    assert advantages == pytest.approx([1 + 0.25 * 4, 4, 3])


def test_truncation_at_last_step_ignores_next_episode_value(compute_gae):
    # the final observation (worth 8) is bootstrapped, not the next episode's start (worth 4)
    advantages, _ = gae(compute_gae, dones=(0, 0, 1), final_values=(0, 0, 8.0))
    assert advantages == pytest.approx([1 + 0.25 * 3.25, 2 + 0.25 * 5, 3 + 0.5 * 8 - 2])


def test_termination_at_last_step(compute_gae):
    advantages, _ = gae(compute_gae, dones=(0, 0, 1), terminations=(0, 0, 1), final_values=(0, 0, 8.0))
    assert advantages == pytest.approx([1 + 0.25 * 2.25, 2 + 0.25 * 1, 1])


def test_termination_wins_over_truncation_on_the_same_step(compute_gae):
    terminated, _ = gae(compute_gae, dones=(0, 1, 0), terminations=(0, 1, 0), final_values=(0, 6.0, 0))
    assert terminated == pytest.approx([1.25, 1, 3])


def test_final_values_ignored_where_no_episode_ended(compute_gae):
    advantages, _ = gae(compute_gae, final_values=(float("nan"), 99.0, -7.0))
    assert advantages == pytest.approx([1.6875, 2.75, 3])


def test_several_envs_are_independent(compute_gae):
    # four envs side by side: no end, termination at 1, truncation at 1 (worth 6), truncation at 2 (worth 8)
    t = torch.tensor
    advantages, returns = compute_gae(
        rewards=t([[1.0] * 4, [2.0] * 4, [3.0] * 4]),
        values=t([[0.5] * 4, [1.0] * 4, [2.0] * 4]),
        dones=t([[0.0, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]),
        terminations=t([[0.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0]]),
        final_values=t([[0.0, 0, 0, 0], [0, 0, 6, 0], [0, 0, 0, 8]]),
        next_value=t([4.0, 4, 4, 4]),
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    expected = t(
        [
            [1.6875, 1.25, 2.0, 1 + 0.25 * 3.25],
            [2.75, 1.0, 4.0, 3.25],
            [3.0, 3.0, 3.0, 5.0],
        ]
    )
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns, expected + t([[0.5], [1.0], [2.0]]))


def test_gamma_one_lambda_one_is_monte_carlo(compute_gae):
    # with gamma = lambda = 1 and a terminal last step, returns are plain reward-to-go
    _, returns = compute_gae(
        column([1, 2, 3]),
        column([0.5, 1, 2]),
        column([0, 0, 1]),
        column([0, 0, 1]),
        column([0, 0, 0]),
        torch.tensor([4.0]),
        1.0,
        1.0,
    )
    assert returns[:, 0].tolist() == pytest.approx([6, 5, 3])
