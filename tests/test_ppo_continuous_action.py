"""ppo_continuous_action.py: action clipping per dimension, saved observation statistics, frozen evaluation."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import check_ok, load_script, only_run_dir, run_script

pca = load_script("ppo_continuous_action")


class PerDimensionBounds(gym.Env):
    """Records the actions it receives; each action dimension has its own bounds."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(np.array([-1.0, -3.0, 0.0], np.float32), np.array([2.0, 0.5, 0.1], np.float32))

    def __init__(self):
        self.received = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.received.append(np.array(action))
        return np.zeros(2, np.float32), 0.0, False, False, {}


gym.register("PerDimensionBounds-v0", entry_point=PerDimensionBounds)


def test_env_clips_each_dimension_to_its_own_bounds():
    env = pca.make_env("PerDimensionBounds-v0", 1, False, "test", 0.99).envs[0]
    env.reset(seed=0)
    env.step(np.array([5.0, -5.0, 0.05], dtype=np.float32))
    env.step(np.array([-5.0, 5.0, -1.0], dtype=np.float32))
    np.testing.assert_allclose(env.unwrapped.received, [[2.0, -3.0, 0.05], [-1.0, 0.5, 0.0]])


def test_agent_scores_the_unclipped_sample():
    agent = pca.Agent(3, 2)
    with torch.no_grad():
        agent.actor_logstd.fill_(2.0)  # std e^2: most samples fall outside [-1, 1]
        x = torch.zeros(1000, 3)
        action, logprob, _, _ = agent.get_action_and_value(x)
        assert (action.abs() > 1).any()
        _, rescored, _, _ = agent.get_action_and_value(x, action)
    torch.testing.assert_close(logprob, rescored)


def test_merge_obs_rms_pools_statistics():
    class Rms:
        def __init__(self, data):
            self.mean, self.var, self.count = data.mean(0), data.var(0), len(data)

    class Normalizer:
        def __init__(self, data):
            self.obs_rms = Rms(data)

    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (30, 3)), rng.normal(5, 2, (70, 3))
    mean, var, count = pca.merge_obs_rms([Normalizer(a), Normalizer(b)])
    both = np.concatenate([a, b])
    np.testing.assert_allclose(mean, both.mean(0))
    np.testing.assert_allclose(var, both.var(0))
    assert count == 100


def test_saved_model_carries_observation_statistics_used_frozen(workdir):
    check_ok(
        run_script(
            "ppo_continuous_action.py",
            "--env-id",
            "Hopper-v5",
            "--total-timesteps",
            2048,
            "--num-steps",
            1024,
            "--num-minibatches",
            4,
            "--update-epochs",
            1,
            "--save-model",
            cwd=workdir,
        )
    )
    model_path = only_run_dir(workdir) / "ppo_continuous_action.cleanrl_model"
    checkpoint = torch.load(model_path, map_location="cpu", weights_only=True)
    obs_rms = checkpoint["obs_rms"]
    assert obs_rms["mean"].shape == (11,) and obs_rms["var"].shape == (11,)
    assert obs_rms["count"] > 2048  # every observation, resets included
    assert (obs_rms["var"] > 0).all()

    normalizers = []
    original = pca.obs_normalizers
    pca.obs_normalizers = lambda envs: normalizers.extend(original(envs)) or normalizers
    try:
        returns = pca.evaluate(str(model_path), 2, "test-eval", "cpu")
    finally:
        pca.obs_normalizers = original
    assert len(returns) == 2
    (normalizer,) = normalizers
    assert normalizer.update_running_mean is False
    np.testing.assert_allclose(normalizer.obs_rms.mean, obs_rms["mean"].numpy())
    assert normalizer.obs_rms.count == pytest.approx(obs_rms["count"])
