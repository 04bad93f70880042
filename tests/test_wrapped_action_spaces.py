"""Every continuous script and JAX twin drives an env whose registration wraps it in `RescaleAction` with the bounds of
the space its actions go to (issue 20): two dimensions with asymmetric bounds of different widths, [0, 0.5] and
[-1.5, 0.5], over an inner env that takes [-1, 1]. Every action the env receives, in training and in evaluation, lies in
the declared space (the env raises otherwise), and each dimension's actions reach both of its ends."""

import numpy as np
import pytest

from budgets import CONTINUOUS_SCRIPTS, JAX_TINY, TINY
from conftest import check_ok, run_script, script_env

LOW, HIGH = np.array([0.0, -1.5]), np.array([0.5, 0.5])
TEST_ENVS = f"""
import os

import gymnasium as gym
import numpy as np


class TwoJoints(gym.Env):  # takes [-1, 1] in both dimensions; rewards pushing the first up and the second down
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {{}}

    def step(self, action):
        obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return obs, float(action[0] - action[1]), False, False, {{}}


class LogActions(gym.Wrapper):  # raises on an action outside the space it declares; appends each action to a log
    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.float32)), f"action {{action}} outside {{self.action_space}}"
        with open(os.environ["ACTION_LOG"], "a") as log:
            log.write(" ".join(repr(float(a)) for a in np.asarray(action)) + "\\n")
        return super().step(action)


def wrapped_two_joints(**kwargs):
    low, high = np.array({LOW.tolist()}, np.float32), np.array({HIGH.tolist()}, np.float32)
    return LogActions(gym.wrappers.RescaleAction(TwoJoints(**kwargs), low, high))


gym.register("WrappedTwoJoints-v0", entry_point=wrapped_two_joints, max_episode_steps=50)
"""


@pytest.mark.parametrize("script", CONTINUOUS_SCRIPTS)
def test_actions_stay_in_the_registered_space_and_reach_both_ends(script, workdir):
    (workdir / "test_envs.py").write_text(TEST_ENVS)
    log = workdir / "actions.txt"
    env = script_env() | {"PYTHONPATH": str(workdir), "ACTION_LOG": str(log)}
    flags = [*(TINY | JAX_TINY)[script], "--env-id", "test_envs:WrappedTwoJoints-v0", "--save-model"]
    check_ok(run_script(script, *flags, cwd=workdir, env=env))
    actions = np.loadtxt(log)
    assert len(actions) >= 256 + 500  # the training's steps, then 10 evaluation episodes of 50
    assert (actions >= LOW).all() and (actions <= HIGH).all()
    # random actions before learning starts (off-policy) or clipped Gaussian samples (PPO, RPO) come within a tenth
    # of each dimension's width of both of its ends; the inner env's [-1, 1] would not get near [-1.5, 0.5]'s low end
    margin = (HIGH - LOW) / 10
    assert (actions.min(axis=0) <= LOW + margin).all() and (actions.max(axis=0) >= HIGH - margin).all()
