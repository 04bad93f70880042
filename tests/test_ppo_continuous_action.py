"""ppo_continuous_action.py: action clipping per dimension, saved observation statistics, frozen evaluation, the
normalisation statistics of every sub-env in the checkpoint and back in their wrappers on --resume, an env without
frames refused by name."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from cleanrl_utils.checkpoint import decode, read
from conftest import SCRIPTS, check_ok, check_refused, load_script, only_run_dir, run_script, script_env

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

    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (30, 3)), rng.normal(5, 2, (70, 3))
    mean, var, count = pca.merge_obs_rms([Rms(a), Rms(b)])
    both = np.concatenate([a, b])
    np.testing.assert_allclose(mean, both.mean(0))
    np.testing.assert_allclose(var, both.var(0))
    assert count == 100


def wrapper_of(env, wrapper):
    while not isinstance(env, wrapper):
        env = env.env
    return env


def test_saved_model_carries_observation_statistics_used_frozen(workdir):
    # 2 sub-envs x 1024 steps: one iteration, with a checkpoint that holds both sub-envs' statistics
    flags = ["--env-id", "Hopper-v5", "--total-timesteps", 2048, "--num-envs", 2, "--num-steps", 1024]
    flags += ["--num-minibatches", 4, "--update-epochs", 1, "--save-model", "--checkpoint-every", 1]
    check_ok(run_script("ppo_continuous_action.py", *flags, cwd=workdir))
    run_dir = only_run_dir(workdir)
    model_path = run_dir / "ppo_continuous_action.cleanrl_model"
    checkpoint = torch.load(model_path, map_location="cpu", weights_only=True)
    obs_rms = checkpoint["obs_rms"]
    assert obs_rms["mean"].shape == (11,) and obs_rms["var"].shape == (11,)
    assert obs_rms["count"] > 2048  # every observation of both sub-envs, resets included
    assert (obs_rms["var"] > 0).all()
    saved = read(str(run_dir / "checkpoint.pt"), "ppo_continuous_action.py")["state"]
    counts = [payload["count"] for _, payload in decode(saved["obs_rms"][1])]
    assert len(counts) == 2 and sum(counts) == pytest.approx(obs_rms["count"])  # each sub-env's own, pooled when saved
    assert [kind for kind, _ in saved["return_rms"][1]] == ["attributes", "attributes"]

    made = []
    original = pca.make_env
    pca.make_env = lambda *args: made.append(original(*args)) or made[-1]
    try:
        returns = pca.evaluate(str(model_path), 2, "test-eval", "cpu")
    finally:
        pca.make_env = original
    assert len(returns) == 2
    normalizer = wrapper_of(made[0].envs[0], gym.wrappers.NormalizeObservation)
    assert normalizer.update_running_mean is False
    np.testing.assert_allclose(normalizer.obs_rms.mean, obs_rms["mean"].numpy())
    assert normalizer.obs_rms.count == pytest.approx(obs_rms["count"])

    # --resume, stopped where the loop would start: each sub-env's wrappers hold the saved statistics, in place
    held = workdir / "held.pt"
    driver = [sys.executable, "-c", UP_TO_THE_LOOP, str(SCRIPTS / "ppo_continuous_action.py"), str(held), "--resume", run_dir]
    result = subprocess.run(list(map(str, driver)), cwd=workdir, env=script_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    held = torch.load(held, weights_only=False)
    for name in ("obs_rms", "return_rms"):
        for (_, saved_rms), rms in zip(decode(saved[name][1]), held[name], strict=True):
            assert sorted(saved_rms) == ["count", "mean", "var"], saved_rms
            for key, value in saved_rms.items():
                np.testing.assert_array_equal(rms[key], value, err_msg=f"{name}.{key}")


# runs the script with `sys.argv[3:]` up to its training loop (the module sets its signal handlers at the end of
# start(), after --resume's restore) and saves the statistics each sub-env's normalisation wrappers hold
UP_TO_THE_LOOP = """
import signal, sys
import gymnasium as gym
import torch
script, out, *args = sys.argv[1:]
sys.argv = [script, *args, "--total-timesteps", "4096"]


class AtTheLoop(Exception):
    pass


def set_handler(signum, handler):
    raise AtTheLoop


signal.signal = set_handler
run = {"__name__": "__main__", "__file__": script}
try:
    exec(compile(open(script).read(), script, "exec"), run)
except AtTheLoop:
    pass
held = {}
for wrapper, name in ((gym.wrappers.NormalizeObservation, "obs_rms"), (gym.wrappers.NormalizeReward, "return_rms")):
    held[name] = []
    for i, env in enumerate(run["envs"].envs):
        while not isinstance(env, wrapper):
            env = env.env
        assert getattr(env, name) is run[name][i]  # the script's entry is the wrapper's own object
        held[name].append(dict(vars(getattr(env, name))))
torch.save(held, out)
"""

NO_FRAMES = """
import gymnasium as gym
import numpy as np


class NoFrames(gym.Env):  # Box actions, and no render modes
    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}


gym.register("NoFrames-v0", entry_point=NoFrames, max_episode_steps=20)
"""


def run_without_frames(script, workdir, tmp_path_factory):
    """`script --capture-video` on a registered env that renders no frames (`module:EnvId`, so a fresh process)."""
    modules = tmp_path_factory.mktemp("modules")
    (modules / "no_frames.py").write_text(NO_FRAMES)
    flags = ["--env-id", "no_frames:NoFrames-v0", "--capture-video", "--total-timesteps", 256, "--num-steps", 128]
    return run_script(script, *flags, cwd=workdir, env=script_env() | {"PYTHONPATH": str(modules)})


def test_capture_video_on_an_env_without_frames_is_refused_by_name(workdir, tmp_path_factory):
    result = run_without_frames("ppo_continuous_action.py", workdir, tmp_path_factory)
    # the env is blamed, not MUJOCO_GL: and no Gymnasium warning about the render mode before the line
    check_refused(result, "ppo_continuous_action.py", "no_frames:NoFrames-v0 renders no video", workdir)
