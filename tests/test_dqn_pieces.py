"""The pure pieces of the DQN scripts, against hand-computed values: the ε schedule, TD targets at
termination vs truncation, cadences with several envs, and the classic replay buffer's final obs."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import load_script

SCRIPTS = ["dqn", "dqn_atari"]


@pytest.fixture(params=SCRIPTS)
def script(request):
    return load_script(request.param)


def test_epsilon_schedule_is_linear_then_flat(script):
    eps = script.epsilon_schedule
    assert eps(1.0, 0.05, 1000, 0) == 1.0
    assert eps(1.0, 0.05, 1000, 500) == pytest.approx(0.525)
    assert eps(1.0, 0.05, 1000, 1000) == pytest.approx(0.05)
    assert eps(1.0, 0.05, 1000, 10**6) == pytest.approx(0.05)
    # an increasing schedule works the same way
    assert eps(0.0, 1.0, 4, 1) == pytest.approx(0.25)


def test_epsilon_schedule_with_zero_exploration_fraction_is_end_e_from_the_start(script):
    for t in (0, 1, 10**6):
        assert script.epsilon_schedule(1.0, 0.01, 0.0, t) == 0.01


def test_epsilon_schedule_that_ends_before_learning_starts(script):
    # 10% of a 300k run anneals by 30k; learning starts at 80k with ε already at its floor
    duration, learning_starts = 0.1 * 300_000, 80_000
    assert script.epsilon_schedule(1.0, 0.01, duration, 15_000) == pytest.approx(0.505)
    assert script.epsilon_schedule(1.0, 0.01, duration, learning_starts) == pytest.approx(0.01)


def test_td_target_bootstraps_at_truncation_but_not_at_termination(script):
    rewards = torch.tensor([1.0, 1.0, 0.5])
    next_q_max = torch.tensor([10.0, 10.0, -2.0])
    # row 0: an ordinary or truncated transition (done = terminated = 0); row 1: terminal
    dones = torch.tensor([0.0, 1.0, 0.0])
    targets = script.td_target(rewards, next_q_max, dones, 0.9)
    assert targets.tolist() == pytest.approx([1.0 + 0.9 * 10.0, 1.0, 0.5 - 0.9 * 2.0])


def test_steps_crossed_counts_every_multiple_once(script):
    crossed = script.steps_crossed
    assert crossed(0, 1, 10) == 0 and crossed(9, 10, 10) == 1 and crossed(10, 11, 10) == 0
    # with 4 envs the step goes 0, 4, 8, ...: multiples of 10 fire exactly once each
    fired = [crossed(s, s + 4, 10) for s in range(0, 400, 4)]
    assert sum(fired) == 40
    # a cadence finer than num_envs owes several updates in one vector step
    assert crossed(16, 24, 2) == 4


def test_classic_buffer_stores_the_true_final_observation_with_done_as_terminated():
    dqn = load_script("dqn")
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.TimeLimit(gym.make("CartPole-v1"), 5) for _ in range(2)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    rb = dqn.ReplayBuffer(100, envs.single_observation_space.shape, torch.device("cpu"))
    obs, _ = envs.reset(seed=3)
    expected = []
    for _ in range(12):
        actions = np.array([0, 0])  # pushing left ends CartPole by termination in ~10 steps
        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        rb.add(obs, actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
        for i in range(2):
            ended = terminations[i] or truncations[i]
            expected.append((obs[i], infos["final_obs"][i] if ended else next_obs[i], float(terminations[i]), ended))
        obs = next_obs
    envs.close()
    assert rb.size == 24
    truncated_rows = [k for k, e in enumerate(expected) if e[3] and e[2] == 0.0]
    assert truncated_rows, "the 5-step time limit must have cut some episode"
    for k, (o, n, done, _) in enumerate(expected):
        assert np.array_equal(rb.obs[k], o) and np.array_equal(rb.next_obs[k], n) and rb.dones[k] == done
    for k in truncated_rows:
        # the stored next_obs continues the episode (CartPole moves a little per step), never a reset state
        assert np.abs(rb.next_obs[k] - rb.obs[k]).max() < 0.5
        assert rb.dones[k] == 0.0
