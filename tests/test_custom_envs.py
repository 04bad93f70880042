"""A researcher's own env, given as `module:EnvId` (Gymnasium imports the module, which registers the id), in every
script that takes any Gymnasium env (classic-control style and continuous-action; the Atari, Procgen and PettingZoo
scripts make their own suites' envs): each either runs or stops with one clear line.

- A Dict observation: the continuous-action scripts flatten it into one vector (the DeepMind Control Suite's are Dicts;
  tests/test_dm_control.py trains on them); the discrete-action scripts refuse it.
- An image observation: ppo_continuous_action.py and rpo_continuous_action.py flatten it, as CleanRL's do; the rest
  refuse it.
- No time limit and episodes that never end: training runs; the evaluation of `--save-model` stops at an evaluation
  episode that has run 100,000 steps, with a warning, and so does cleanrl_utils.enjoy."""

import pytest
from test_enjoy import enjoy

from budgets import CONTINUOUS_SCRIPTS, JAX_TINY, TINY
from conftest import check_ok, check_refused, only_run_dir, run_script, script_env

DISCRETE_SCRIPTS = ["ppo.py", "dqn.py", "c51.py", "pqn.py", "dqn_jax.py", "c51_jax.py"]
FLATTEN_IMAGES = ["ppo_continuous_action.py", "rpo_continuous_action.py"]
CUSTOM_ENVS = """
import gymnasium as gym
import numpy as np

OBSERVATIONS = {
    "Box": gym.spaces.Box(-1.0, 1.0, (4,), np.float32),
    "Dict": gym.spaces.Dict({"position": gym.spaces.Box(-1, 1, (3,)), "velocity": gym.spaces.Box(-1, 1, (2,))}),
    "Image": gym.spaces.Box(0, 255, (16, 16, 3), np.uint8),
}


class Custom(gym.Env):  # episodes of 20 steps, or none that end (`endless`)
    def __init__(self, observation="Box", actions="Discrete", endless=False):
        self.observation_space = OBSERVATIONS[observation]
        self.action_space = gym.spaces.Discrete(2) if actions == "Discrete" else gym.spaces.Box(-1, 1, (2,), np.float32)
        self.endless, self.t = endless, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 1.0, not self.endless and self.t == 20, False, {}


for observation in OBSERVATIONS:
    for actions in ("Discrete", "Box"):
        kwargs = dict(observation=observation, actions=actions)
        gym.register(f"{observation}Obs{actions}Act-v0", entry_point=Custom, kwargs=kwargs)  # no max_episode_steps
        gym.register(f"Endless{observation}Obs{actions}Act-v0", entry_point=Custom, kwargs=kwargs | dict(endless=True))
"""


@pytest.fixture
def custom(tmp_path):
    """(the folder to run in, the folder of the `custom_envs` module, the scripts' environment that can import it)"""
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "custom_envs.py").write_text(CUSTOM_ENVS)
    (tmp_path / "run").mkdir()
    return tmp_path / "run", tmp_path / "modules", script_env() | {"PYTHONPATH": str(tmp_path / "modules")}


def env_id(script, observation, endless=False):
    actions = "Box" if script in CONTINUOUS_SCRIPTS else "Discrete"
    return f"custom_envs:{'Endless' if endless else ''}{observation}Obs{actions}Act-v0"


# Dict observations of the continuous scripts are flattened: tests/test_dm_control.py trains each of them on them
CASES = [(s, "Dict") for s in DISCRETE_SCRIPTS] + [(s, "Image") for s in DISCRETE_SCRIPTS + CONTINUOUS_SCRIPTS]


@pytest.mark.parametrize(("script", "observation"), CASES)
def test_dict_and_image_observations_run_or_stop_in_one_line(script, observation, custom):
    cwd, _, env = custom
    result = run_script(script, *(TINY | JAX_TINY)[script], "--env-id", env_id(script, observation), cwd=cwd, env=env)
    if observation == "Image" and script in FLATTEN_IMAGES:
        check_ok(result)
        assert only_run_dir(cwd).name.startswith(f"custom_envs:ImageObsBoxAct-v0__{script[:-3]}__1__")
    else:
        check_refused(result, script, f"{env_id(script, observation)} has {observation}(" if observation == "Dict"
                      else f"{env_id(script, observation)} has Box(0, 255, (16, 16, 3), uint8) observations", cwd)  # fmt: skip


@pytest.mark.parametrize("script", ["ppo.py", "dqn_jax.py", "sac_continuous_action.py"])
def test_an_env_without_a_time_limit_trains_and_its_evaluation_stops(script, custom):
    cwd, modules, env = custom
    endless = env_id(script, "Box", endless=True)
    result = run_script(script, *(TINY | JAX_TINY)[script], "--env-id", endless, "--save-model", cwd=cwd, env=env)
    check_ok(result)
    warning = f"{script}: warning: evaluation episode 1 did not end in 100,000 steps (does {endless} have a time limit?)"
    assert f"{warning}; 0 of 10 evaluated" in result.stdout.splitlines()
    assert "eval/episodic_return" not in result.stdout and "RuntimeWarning" not in result.stderr
    if script == "ppo.py":  # enjoy stops there too, and says it did not evaluate
        model = only_run_dir(cwd) / "ppo.cleanrl_model"
        again = enjoy("--model-path", model, "--eval-episodes", 1, cwd=cwd, pythonpath=[modules])
        assert again.returncode == 1 and "enjoy: warning: evaluation episode 1 did not end in 100,000 steps" in again.stdout
