"""ppo_atari.py: the wrapper chain — game-score statistics under life loss, FIRE only where the game has
it, ALE v5 ids skipped once with their sticky actions."""

import gymnasium as gym
import numpy as np
import pytest

from conftest import check_ok, load_script, only_run_dir, run_script

ppo_atari = load_script("ppo_atari")


def wrapper_types(env):
    types = []
    while hasattr(env, "env"):
        types.append(type(env).__name__)
        env = env.env
    return types


def test_episode_statistics_are_game_scores_across_lives():
    envs = ppo_atari.make_env("BreakoutNoFrameskip-v4", 1, False, "test")
    envs.reset(seed=1)
    envs.action_space.seed(1)
    life_ends, episode = 0, None
    for _ in range(20_000):
        _, reward, termination, truncation, infos = envs.step(envs.action_space.sample())
        assert reward[0] in (0.0, 1.0)  # clipped by sign for learning
        if termination[0] or truncation[0]:
            life_ends += 1
            if "episode" in infos["final_info"]:
                episode = infos["final_info"]["episode"]
                break
    envs.close()
    # Breakout has 5 lives: the agent sees 5 terminal steps, the statistics one whole game
    assert life_ends == 5
    assert episode["r"][0] >= 0 and episode["l"][0] > 0


def test_fire_reset_only_for_games_with_fire():
    breakout = ppo_atari.make_env("BreakoutNoFrameskip-v4", 1, False, "test").envs[0]
    freeway = ppo_atari.make_env("FreewayNoFrameskip-v4", 1, False, "test").envs[0]
    assert "FireResetEnv" in wrapper_types(breakout)
    assert "FIRE" not in freeway.unwrapped.get_action_meanings()
    assert "FireResetEnv" not in wrapper_types(freeway)


def test_wrapper_order_statistics_before_life_loss_and_clipping():
    types = wrapper_types(ppo_atari.make_env("BreakoutNoFrameskip-v4", 1, False, "test").envs[0])
    assert types.index("RecordEpisodeStatistics") > types.index("EpisodicLifeEnv") > types.index("TransformReward")


@pytest.mark.parametrize("env_id,sticky", [("ALE/Breakout-v5", 0.25), ("BreakoutNoFrameskip-v4", 0.0), ("Breakout-v4", 0.0)])
def test_frames_are_skipped_once(env_id, sticky):
    env = ppo_atari.make_env(env_id, 1, False, "test").envs[0]
    assert env.unwrapped._frameskip == 1  # ALE itself does not skip; MaxAndSkip does, 4 frames
    assert "MaxAndSkipObservation" in wrapper_types(env)
    assert env.unwrapped.ale.getFloat("repeat_action_probability") == pytest.approx(sticky)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8


def test_noop_reset_starts_at_a_random_point():
    env = ppo_atari.NoopResetEnv(gym.make("PongNoFrameskip-v4"), noop_max=30)
    starts = {env.reset(seed=seed)[0].tobytes() for seed in range(6)}
    assert len(starts) > 1


def test_v5_id_runs_and_gets_one_run_directory(workdir):
    result = run_script(
        "ppo_atari.py",
        "--env-id",
        "ALE/Pong-v5",
        "--total-timesteps",
        64,
        "--num-envs",
        1,
        "--num-steps",
        64,
        "--update-epochs",
        1,
        cwd=workdir,
    )
    check_ok(result)
    assert "sticky-action probability 0.25" in result.stdout
    assert only_run_dir(workdir).name.startswith("ALE-Pong-v5__ppo_atari__1__")
