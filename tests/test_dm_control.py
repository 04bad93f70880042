"""The DeepMind Control Suite through Shimmy in every continuous-action script: upstream CleanRL's own dm_control
commands run as written, the suite's Dict observations of float64 arrays reach the agent as one flat vector, its
1000-step episodes end by truncation (the time limit), which the scripts bootstrap, the off-policy scripts train
through a whole episode, and cleanrl_utils.enjoy evaluates a saved dm_control model."""

import gymnasium as gym
import numpy as np
import pytest
from test_enjoy import enjoy

from budgets import CONTINUOUS_SCRIPTS
from cleanrl_utils.report import read_scalars
from conftest import check_ok, final_return, load_script, only_run_dir, run_script

shimmy = pytest.importorskip("shimmy", reason="the dm_control extra is not installed")

PPO_FAMILY = ["ppo_continuous_action.py", "rpo_continuous_action.py"]
OFF_POLICY = [script for script in CONTINUOUS_SCRIPTS if script not in PPO_FAMILY]
UPSTREAM = ["--env-id", "dm_control/cartpole-balance-v0", "--num-envs", 1, "--num-steps", 64, "--total-timesteps", 128]


@pytest.mark.parametrize("script", PPO_FAMILY)
def test_upstream_dm_control_command_runs_as_written(script, workdir):
    result = run_script(script, *UPSTREAM, cwd=workdir)
    check_ok(result)
    assert "GLFW" not in result.stderr  # headless: MUJOCO_GL defaults to egl for dm_control ids
    steps, values = read_scalars(str(only_run_dir(workdir)), "losses/value_loss")
    assert list(steps) == [64, 128] and np.isfinite(values).all()


@pytest.mark.parametrize("script", OFF_POLICY)
def test_off_policy_scripts_train_through_a_whole_dm_control_episode(script, workdir):
    command = ["--env-id", "dm_control/cartpole-balance-v0", "--total-timesteps", 1100, "--learning-starts", 1000]
    result = run_script(script, *command, "--buffer-size", 2000, "--batch-size", 32, cwd=workdir)
    check_ok(result)
    assert "GLFW" not in result.stderr
    run = str(only_run_dir(workdir))
    assert list(read_scalars(run, "charts/episodic_length")[1]) == [1000]  # the time limit, not a termination
    steps, losses = read_scalars(run, "losses/qf1_loss")
    assert len(steps) > 0 and np.isfinite(losses).all()


@pytest.mark.parametrize("script", CONTINUOUS_SCRIPTS)
def test_dict_observations_are_flattened_and_the_time_limit_truncates(script, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    gym.register_envs(shimmy)  # the off-policy scripts register the suite in their main block, before their env check
    module = load_script(script[: -len(".py")])
    gamma = (0.99,) if script in PPO_FAMILY else ()  # the PPO family normalises rewards with it
    envs = module.make_env("dm_control/cartpole-balance-v0", 1, False, "test", *gamma)
    assert envs.single_observation_space.shape == (5,)  # position (3) and velocity (2), one vector
    obs, _ = envs.reset(seed=0)
    ended_at = None
    for step in range(1, 1001):
        obs, _, terminations, truncations, infos = envs.step(envs.action_space.sample())
        assert obs.shape == (1, 5) and np.isfinite(obs).all()
        if terminations[0] or truncations[0]:
            ended_at = step
            break
    assert ended_at == 1000 and truncations[0] and not terminations[0]
    assert infos["final_info"]["episode"]["l"][0] == 1000 and infos["final_obs"][0].shape == (5,)
    envs.close()


def test_enjoy_evaluates_a_saved_dm_control_model(workdir):
    check_ok(run_script("ppo_continuous_action.py", *UPSTREAM, "--save-model", cwd=workdir))
    model = only_run_dir(workdir) / "ppo_continuous_action.cleanrl_model"
    result = enjoy("--model-path", model, "--eval-episodes", 1, cwd=workdir)  # enjoy registers the suite too
    check_ok(result)
    assert "ppo_continuous_action on dm_control/cartpole-balance-v0" in result.stdout and "GLFW" not in result.stderr


@pytest.mark.learning
def test_ppo_learns_to_balance_the_dm_control_cartpole_within_200k_steps(workdir):
    # random play scores about 270 (the first episodes of any run); at 200k steps, seeds 1-3 average 968, 696 and 528
    # over their last 20 episodes on this project's 2-core machine (seed 1: about 150 s of a free core, at ~1300 SPS);
    # measured again on 2026-12-04: seeds 1-4 average 587, 641, 878, 559 (learning is uneven: seed 1 held 955-972
    # from 120k to 160k and fell back to 585). 2026-12-07, seeds 1-6: 968, 696, 528, 861, 907, 945 at 200k, but 359-443
    # at 100k (random play's first episodes: 277-340), so a shorter budget would not tell learning from the early
    # plateau. The threshold sits below the lowest of these 13 runs (528), with margin; the test's seed 1 gave 587-968.
    command = ["--env-id", "dm_control/cartpole-balance-v0", "--total-timesteps", 200_000, "--seed", 1]
    check_ok(run_script("ppo_continuous_action.py", *command, cwd=workdir))
    assert final_return(only_run_dir(workdir)) >= 475
