"""ppo_pettingzoo_ma_atari.py: self-play on PettingZoo Atari through SuperSuit — one sub-env per player, games
reset in the same step with their true final observation in the info, statistics of the raw game (scores before
reward clipping, one point per finished game), truncation bootstrapping, videos, saving and evaluation."""

import numpy as np
import pytest
import torch

from cleanrl_utils.report import read_scalars
from conftest import (
    PPO_TAGS,
    check_checkpoint_and_resume,
    check_refused,
    check_warns_and_runs,
    load_script,
    run_copied_alone,
    run_script,
)

SCRIPT = "ppo_pettingzoo_ma_atari.py"
pz = load_script("ppo_pettingzoo_ma_atari")
# one Pong game (2 players) for two iterations of 32 steps; a game is cut after 128 frames = 32 agent steps
TINY = ["--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--update-epochs", 1, "--max-cycles", 128]
PLAYERS = ["first_0", "second_0"]


def play_one_game(env_id, seed, max_cycles):
    """Random actions in one game until it ends; returns the learner's per-step rewards (steps, players), the
    game's statistics from the info, and the last step's (obs, terminations, truncations, infos)."""
    envs = pz.make_vector_env(env_id, 1, False, "test", max_cycles)
    envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rewards = []
    while True:
        obs, reward, termination, truncation, infos = envs.step(rng.integers(envs.action_space.n, size=envs.num_envs))
        rewards.append(reward)
        if "episode" in infos[0]:
            envs.close()
            return np.array(rewards), infos[0]["episode"], (obs, termination, truncation, infos)


def test_pong_scores_are_the_raw_game_per_player():
    rewards, episode, _ = play_one_game("pong_v3", seed=1, max_cycles=1200)
    assert np.abs(rewards).max() <= 1  # the learner's rewards are clipped
    assert episode["l"] == 300 == len(rewards)  # agent steps: 1200 frames / 4
    scores = episode["r"]
    assert list(scores) == PLAYERS
    # Pong is zero-sum here (no missed serve): one player's points are the other's losses, and a game score
    # is not bounded by a step's clipped reward
    assert scores["first_0"] == -scores["second_0"] and abs(scores["first_0"]) > 1
    assert list(rewards.sum(0)) == [scores["first_0"], scores["second_0"]]


def test_scores_are_recorded_before_reward_clipping():
    # Space Invaders pays 5 to 200 points per alien: the recorded scores are those points, not clipped ones
    rewards, episode, _ = play_one_game("space_invaders_v2", seed=1, max_cycles=400)
    clipped = rewards.sum(0)
    scores = np.array([episode["r"][p] for p in PLAYERS])
    assert np.all(scores % 5 == 0) and scores.max() > 1
    assert np.all(scores >= clipped) and np.any(scores > clipped)


def test_truncated_game_resets_in_the_same_step_with_its_final_observation():
    _, episode, (obs, termination, truncation, infos) = play_one_game("pong_v3", seed=1, max_cycles=128)
    assert episode["l"] == 32
    assert list(truncation) == [1, 1] and list(termination) == [0, 0]
    envs = pz.make_vector_env("pong_v3", 1, False, "test", 128)
    first_obs, _ = envs.reset(seed=1)
    envs.close()
    # the returned observation is the next game's first one; the true last one is in the info
    np.testing.assert_array_equal(obs, first_obs)
    for player in range(2):
        final = infos[player]["terminal_observation"]
        assert final.shape == (84, 84, 6) and not np.array_equal(final, obs[player])


def test_sub_envs_are_the_players_told_apart_by_indicator_planes():
    envs = pz.make_vector_env("pong_v3", 2, False, "test", 128)
    obs, _ = envs.reset(seed=1)
    envs.close()
    assert obs.shape == (4, 84, 84, 6) and obs.dtype == np.uint8
    # game g's player k is sub-env 2g + k; its plane 4 + k is full (255), the other player's is empty
    for i in range(4):
        assert np.all(obs[i, :, :, 4 + i % 2] == 255) and np.all(obs[i, :, :, 4 + (1 - i % 2)] == 0)
    # the agent sees the indicator planes scaled like the frames, as 0 or 1
    agent = pz.Agent(6, 6)
    agent.network, agent.critic = torch.nn.Identity(), torch.nn.Identity()
    scaled = agent.get_value(torch.as_tensor(obs[:1]))
    assert scaled.shape == (1, 6, 84, 84) and scaled.max() == 1.0
    assert torch.all(scaled[0, 4] == 1) and torch.all(scaled[0, 5] == 0)


def test_gae_bootstraps_each_player_from_its_own_final_observation():
    # 2 steps, both players of one game: the game is truncated at step 0 (final values 10 and -10), the next game
    # runs at step 1; gamma = lambda = 0.5, rewards r, values V, next_value after the rollout 4
    advantages, _ = pz.compute_gae(
        rewards=torch.tensor([[1.0, -1.0], [0.0, 0.0]]),
        values=torch.tensor([[2.0, 2.0], [1.0, 1.0]]),
        dones=torch.tensor([[1.0, 1.0], [0.0, 0.0]]),
        terminations=torch.zeros(2, 2),
        final_values=torch.tensor([[10.0, -10.0], [0.0, 0.0]]),
        next_value=torch.tensor([4.0, 4.0]),
        gamma=0.5,
        gae_lambda=0.5,
    )
    # step 1: 0 + 0.5*4 - 1 = 1; step 0: r + 0.5*final - 2, nothing from the next game
    torch.testing.assert_close(advantages, torch.tensor([[4.0, -8.0], [1.0, 1.0]]))
    terminated, _ = pz.compute_gae(
        rewards=torch.tensor([[1.0, -1.0]]),
        values=torch.tensor([[2.0, 2.0]]),
        dones=torch.ones(1, 2),
        terminations=torch.ones(1, 2),
        final_values=torch.tensor([[10.0, -10.0]]),
        next_value=torch.tensor([4.0, 4.0]),
        gamma=0.5,
        gae_lambda=0.5,
    )
    torch.testing.assert_close(terminated, torch.tensor([[-1.0, -3.0]]))


def test_env_error_names_the_game_ids():
    assert pz.env_error("pong_v3") is None and pz.env_error("surround_v2") is None
    message = pz.env_error("pong_v2")
    assert "'pong_v2' is not a PettingZoo Atari game" in message and "plays one of: " in message and "pong_v3" in message
    assert SCRIPT in pz.env_error("PongNoFrameskip-v4") and "\n" not in message
    # a player out before the game ends breaks SuperSuit's one-sub-env-per-player vector env
    message = pz.env_error("warlords_v3")
    assert "'warlords_v3' can put a player out before the game ends" in message and "warlords_v3," not in message


def test_default_flags_log_every_game_once(workdir):
    results = []  # the run with a checkpoint after each iteration, then its resume for two more (128 more steps)

    def run(*args, cwd):
        results.append(run_script(*args, cwd=cwd))
        return results[-1]

    run_dir = str(check_checkpoint_and_resume(SCRIPT, TINY, 1, workdir, run=run))
    assert "pong_v3: 1 game(s) of 2 players; time limit 128 frames" in results[0].stdout
    assert "global_step=128, 100.0% of 128, episodic_length(last 2)=32.0, SPS=" in results[0].stdout
    for tag in PPO_TAGS:
        assert list(read_scalars(run_dir, tag)[0]) == [64, 128, 192, 256], tag
    # each game is cut at 32 agent steps (64 global steps for its 2 players): one point per game, not per player; the
    # resumed run starts a new game
    for tag in ["charts/episodic_length", "charts/episodic_length/first_0", "charts/episodic_length/second_0"]:
        steps, lengths = read_scalars(run_dir, tag)
        assert list(steps) == [64, 128, 192, 256] and list(lengths) == [32] * 4, tag
    first = read_scalars(run_dir, "charts/episodic_return/first_0")
    second = read_scalars(run_dir, "charts/episodic_return/second_0")
    plain = read_scalars(run_dir, "charts/episodic_return")
    assert list(first[0]) == list(second[0]) == list(plain[0]) == [64, 128, 192, 256]
    np.testing.assert_array_equal(plain[1], first[1])  # the plain tag is the first player's score
    np.testing.assert_array_equal(first[1], -second[1])
    assert not (workdir / "videos").exists()


def test_copied_file_films_tracks_saves_and_evaluates(tmp_path):
    _, checkpoint, returns = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    assert checkpoint["args"]["env_id"] == "pong_v3" and checkpoint["args"]["max_cycles"] == 128
    assert np.all(np.abs(returns) <= 32)


REFUSALS = [
    (["--env-id", "pong_v2"], "'pong_v2' is not a PettingZoo Atari game"),
    (["--env-id", "quadrapong_v4", "--num-envs", 6], "--num-envs must hold whole games: quadrapong_v4 has 4 players"),
    (["--max-cycles", 0], "--update-epochs, --max-cycles must be at least 1"),
    (
        ["--total-timesteps", 0],
        "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs, --max-cycles must",
    ),
    (["--num-minibatches", 3], "does not split into --num-minibatches 3"),
    (["--upload-model", "--no-save-model"], "--upload-model pushes the saved model and its evaluation; add --save-model"),
]


@pytest.mark.parametrize("flags,message", REFUSALS, ids=[" ".join(map(str, f)) for f, _ in REFUSALS])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


def test_a_run_without_a_gradient_step_warns_and_runs(workdir):
    # CleanRL's smoke tests run budgets below one batch: a warning, not a refusal
    result = run_script(SCRIPT, "--total-timesteps", 32, *TINY[2:], cwd=workdir)
    run_dir = check_warns_and_runs(result, SCRIPT, "--total-timesteps below one batch", cwd=workdir)
    assert run_dir.name.startswith("pong_v3__ppo_pettingzoo_ma_atari__1__")
