"""Stand-in envs whose episodes end at known steps and whose observations say which step they are.

Every sub-env plays the same fixed pattern, whatever the actions: its episodes alternate between one that
terminates after `TERMINATE_AT` steps and one that a time limit truncates after `TIME_LIMIT` steps (gymnasium's
`TimeLimit`, from `max_episode_steps` in the registration). An observation is `[episode, t, 1, ...]` scaled by 1/10
(episode: the sub-env's episode count, from n for the n-th stand-in made; t: steps into it), so a test reads off
which step of which episode any stored observation is, and a true final observation (t = its length) differs
from the next episode's first (t = 0). The reward of the step from t is 1 + t / 10. Every info also carries
`standin`: [episode, t, the raw reward], so a test can read the pattern where a script's wrappers normalise
observations and rewards.

Registered on import: `StandinDiscrete-v0` (Discrete(3) actions) and `StandinContinuous-v0` (Box actions with
different bounds per dimension).
"""

import itertools

import gymnasium as gym
import numpy as np

TERMINATE_AT, TIME_LIMIT, OBS_DIM = 3, 5, 4
MADE = itertools.count()  # the n-th stand-in made in this process starts at episode n, so sub-envs are out of step


def decode(obs):
    """(episode, t) integer arrays from observations (..., OBS_DIM) as the stand-ins make them."""
    obs = np.asarray(obs, dtype=np.float64)
    return np.rint(obs[..., 0] * 10).astype(int), np.rint(obs[..., 1] * 10).astype(int)


def reward(t):
    return 1.0 + t / 10


def terminates(episode, t):
    """Whether the step that leads to step t of `episode` ends it by termination (odd episodes never do)."""
    return episode % 2 == 0 and t == TERMINATE_AT


class Standin(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, action_space):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS_DIM,), np.float32)
        self.action_space = action_space
        self.episode, self.t = next(MADE) - 1, 0

    def _obs(self):
        return np.array([self.episode, self.t, 1] + [0] * (OBS_DIM - 3), dtype=np.float32) / 10

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        return self._obs(), {"standin": np.array([self.episode, 0, 0.0])}

    def step(self, action):
        r = reward(self.t)
        self.t += 1
        info = {"standin": np.array([self.episode, self.t, r])}
        return self._obs(), r, terminates(self.episode, self.t), False, info


gym.register("StandinDiscrete-v0", lambda: Standin(gym.spaces.Discrete(3)), max_episode_steps=TIME_LIMIT)
gym.register(
    "StandinContinuous-v0",
    lambda: Standin(gym.spaces.Box(np.array([-1.0, -2.0]), np.array([1.0, 2.0]), dtype=np.float32)),
    max_episode_steps=TIME_LIMIT,
)
