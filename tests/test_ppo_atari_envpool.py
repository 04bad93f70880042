"""ppo_atari_envpool.py: the masked GAE of a NEXT_STEP rollout, game statistics that only a game over or the
time limit ends, unclipped scores, videos through envpool's rendering, the refusals, and its benchmarks.

GAE cases: a rollout of T = 3 steps, rewards r = [1, 2, 3], values V = [0.5, 1, 2], value of the observation
after the rollout 4, gamma = lambda = 0.5 (gamma * lambda = 0.25), as in test_gae.py. Where an episode ends at
step t, obs[t+1] is its true final observation, so values[t+1] (or the next value at t = T-1) is V(final obs).
"""

import subprocess
import sys

import numpy as np
import pytest
import torch

from cleanrl_utils.report import read_scalars
from conftest import (
    PPO_TAGS,
    REPO,
    check_checkpoint_and_resume,
    check_refused,
    check_warns_and_runs,
    load_script,
    only_run_dir,
    run_benchmark,
    run_copied_alone,
    run_script,
    script_env,
)

SCRIPT = "ppo_atari_envpool.py"
ppo_atari_envpool = load_script("ppo_atari_envpool")
GAMMA, LAMBDA = 0.5, 0.5

# Breakout, one env so that the logged steps pin down each game: two updates of 256 steps, a 150-step limit; resumed
# for two more
BREAKOUT_LIMIT, BREAKOUT_STEPS = 150, 512
BREAKOUT = ["--num-envs", 1, "--num-steps", 256, "--total-timesteps", BREAKOUT_STEPS, "--update-epochs", 1]
BREAKOUT += ["--max-episode-steps", BREAKOUT_LIMIT]
# Asterix scores 50 points per catch, so a game score beats the episode length, which no clipped sum can;
# 50-step games keep the 10 evaluation games short
ASTERIX_LIMIT = 50
ASTERIX = ["--env-id", "Asterix-v5", "--max-episode-steps", ASTERIX_LIMIT, "--num-envs", 2, "--num-steps", 64]
ASTERIX += ["--total-timesteps", 256, "--update-epochs", 1]


def column(values):
    return torch.tensor(values, dtype=torch.float32)[:, None]


def gae(dones=(0, 0, 0), terminations=(0, 0, 0), last_done=0.0, rewards=(1, 2, 3), next_value=4.0):
    advantages, returns, valid = ppo_atari_envpool.compute_gae(
        rewards=column(rewards),
        values=column([0.5, 1, 2]),
        dones=column(dones),
        terminations=column(terminations),
        last_done=torch.tensor([last_done]),
        next_value=torch.tensor([next_value]),
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    return advantages[:, 0].tolist(), returns[:, 0].tolist(), valid[:, 0].tolist()


def test_gae_without_episode_end():
    # deltas: 1 + 0.5*1 - 0.5 = 1, 2 + 0.5*2 - 1 = 2, 3 + 0.5*4 - 2 = 3
    advantages, returns, valid = gae()
    assert advantages == pytest.approx([1 + 0.25 * 2.75, 2 + 0.25 * 3, 3])
    assert returns == pytest.approx([1.6875 + 0.5, 2.75 + 1, 3 + 2])
    assert valid == [1, 1, 1]


def test_gae_termination_mid_rollout_masks_the_reset_step():
    # step 1 ends in a terminal state: delta_1 = 2 - 1 = 1; step 2 is the reset step: masked, advantage 0,
    # return = its value, and nothing of it flows back into step 1
    advantages, returns, valid = gae(dones=(0, 1, 0), terminations=(0, 1, 0))
    assert valid == [1, 1, 0]
    assert advantages == pytest.approx([1 + 0.25 * 1, 1, 0])
    assert returns == pytest.approx([1.75, 2, 2])


def test_gae_truncation_mid_rollout_bootstraps_from_the_final_observation():
    # step 1 hits the time limit; obs[2] is its final observation, worth values[2] = 2: delta_1 = 2 + 0.5*2 - 1 = 2
    advantages, _, valid = gae(dones=(0, 1, 0))
    assert valid == [1, 1, 0]
    assert advantages == pytest.approx([1 + 0.25 * 2, 2, 0])


def test_gae_reset_step_does_not_leak_into_the_previous_advantage():
    # whatever the reset step and the next episode bring (reward, next value), the ended episode's advantages
    # stay those of test_gae_truncation_mid_rollout_bootstraps_from_the_final_observation
    for rewards, next_value in [((1, 2, 100), 4.0), ((1, 2, -50), 1000.0)]:
        advantages, _, _ = gae(dones=(0, 1, 0), rewards=rewards, next_value=next_value)
        assert advantages == pytest.approx([1.5, 2, 0])


def test_gae_truncation_at_the_last_step_bootstraps_from_next_value():
    # the final observation is the one after the rollout, worth 4: delta_2 = 3 + 0.5*4 - 2 = 3 (as if no end)
    advantages, _, valid = gae(dones=(0, 0, 1), next_value=4.0)
    assert valid == [1, 1, 1]
    assert advantages == pytest.approx([1 + 0.25 * 2.75, 2 + 0.25 * 3, 3])
    # a different final value changes only what bootstraps from it
    advantages, _, _ = gae(dones=(0, 0, 1), next_value=8.0)
    assert advantages == pytest.approx([1 + 0.25 * (2 + 0.25 * 5), 2 + 0.25 * 5, 5])


def test_gae_termination_at_the_last_step():
    advantages, _, _ = gae(dones=(0, 0, 1), terminations=(0, 0, 1), next_value=8.0)
    assert advantages == pytest.approx([1 + 0.25 * 2.25, 2 + 0.25 * 1, 1])


def test_gae_done_at_the_previous_rollouts_last_step_masks_the_first_step():
    advantages, returns, valid = gae(last_done=1.0)
    assert valid == [0, 1, 1]
    assert advantages == pytest.approx([0, 2.75, 3])
    assert returns[0] == pytest.approx(0.5)


def test_gae_envs_are_independent_columns():
    two = lambda a, b: torch.tensor([a, b], dtype=torch.float32).T  # noqa: E731
    advantages, _, valid = ppo_atari_envpool.compute_gae(
        rewards=two([1, 2, 3], [1, 2, 3]),
        values=two([0.5, 1, 2], [0.5, 1, 2]),
        dones=two([0, 1, 0], [0, 0, 0]),
        terminations=two([0, 1, 0], [0, 0, 0]),
        last_done=torch.tensor([0.0, 0.0]),
        next_value=torch.tensor([4.0, 4.0]),
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    assert advantages[:, 0].tolist() == pytest.approx([1.25, 1, 0])
    assert advantages[:, 1].tolist() == pytest.approx([1.6875, 2.75, 3])
    assert valid[:, 1].tolist() == [1, 1, 1]


def test_masked_mean():
    assert ppo_atari_envpool.masked_mean(torch.tensor([1.0, 5.0, 3.0]), torch.tensor([1.0, 0.0, 1.0])) == 2.0
    assert ppo_atari_envpool.masked_mean(torch.tensor([1.0, 5.0]), torch.tensor([0.0, 0.0])) == 0.0


def info(reward, terminated, elapsed):
    return {
        "reward": np.array(reward, dtype=np.float32),
        "terminated": np.array(terminated, dtype=np.int32),
        "elapsed_step": np.array(elapsed, dtype=np.int32),
    }


def test_episode_statistics_end_games_only_at_game_over_or_time_limit():
    statistics = ppo_atari_envpool.EpisodeStatistics(2)
    no = np.array([False, False])
    # unclipped rewards accumulate
    assert statistics.update(no, info([1, 10], [0, 0], [1, 1])) == []
    # env 0 loses a life (envpool: terminated=True, info["terminated"] 0), then its reset step: nothing ends
    assert statistics.update(no, info([0, 5], [0, 0], [2, 2])) == []
    assert statistics.update(no, info([0, 0], [0, 0], [2, 3])) == []
    assert statistics.update(no, info([4, 0], [0, 0], [3, 4])) == []
    # env 1's game is over: its score (15) and its length in agent steps
    assert statistics.update(no, info([0, 0], [0, 1], [4, 5])) == [(1, 15.0, 5)]
    # env 0 hits the time limit (truncated) on the step env 1 resets
    assert statistics.update(np.array([True, False]), info([7, 0], [0, 0], [100, 0])) == [(0, 12.0, 100)]
    # both start from zero again; two games may end on one step
    assert statistics.update(no, info([0, 3], [0, 0], [0, 1])) == []
    assert statistics.update(np.array([False, True]), info([50, 200], [1, 0], [1, 2])) == [(0, 50.0, 1), (1, 203.0, 2)]


class FakeRenderEnvs:
    """Stands in for envpool: render() returns a frame numbered by how often it was called."""

    def __init__(self):
        self.renders = 0

    def render(self):
        self.renders += 1
        return np.full((1, 2, 2, 3), self.renders, dtype=np.uint8)


def test_game_recorder_films_scheduled_games_from_first_to_final_frame():
    envs = FakeRenderEnvs()
    recorder = ppo_atari_envpool.GameRecorder(envs, "unused", fps=15)
    saved = []
    recorder.save_video = lambda frames, folder, episode_index, fps: saved.append(
        (episode_index, [int(f[0, 0, 0]) for f in frames])
    )
    assert envs.renders == 1  # made after the reset: game 0's first observation is frame 1
    for game_over in [False, True]:  # game 0: two steps, frames 2 and 3
        recorder.step(game_over)
    for game_over in [True]:  # game 1: its first observation (the reset step) is also its end
        recorder.step(game_over)
    assert saved == [(0, [1, 2, 3]), (1, [4])]
    for _ in range(6):  # games 2-7 are not filmed and not rendered
        recorder.step(False)
        recorder.step(True)
    assert envs.renders == 4
    recorder.step(False)  # game 8 is filmed
    recorder.step(True)
    assert saved[-1] == (8, [5, 6])


@pytest.mark.parametrize(
    "env_id,message",
    [
        ("Breakout-v5", None),
        ("BreakoutNoFrameskip-v4", "is not an envpool id (did you mean Breakout-v5?)"),
        ("ALE/Pong-v5", "is not an envpool id (did you mean Pong-v5?)"),
        ("CartPole-v1", "CartPole-v1 is an envpool env but not an Atari game; ppo_atari_envpool.py needs an envpool Atari id"),
    ],
)
def test_env_error(env_id, message):
    error = ppo_atari_envpool.env_error(env_id)
    assert error is None if message is None else message in error


@pytest.fixture(scope="module")
def breakout_run(tmp_path_factory):
    """Default flags on Breakout-v5 with one env, two updates and a 150-step time limit, a checkpoint after each, then
    resumed for two more updates (conftest's check_checkpoint_and_resume); the folder and both runs' results."""
    workdir, results = tmp_path_factory.mktemp("breakout"), []

    def run(*args, cwd):
        results.append(run_script(*args, cwd=cwd))
        return results[-1]

    check_checkpoint_and_resume(SCRIPT, BREAKOUT, 1, workdir, run=run)
    return workdir, results


@pytest.fixture(scope="module")
def asterix_run(tmp_path_factory):
    """The file copied alone into an empty folder, run by a Python without the project (conftest's run_copied_alone),
    on Asterix-v5 with every output on and W&B offline; the folder it ran in."""
    run_dir, _, _ = run_copied_alone(SCRIPT, *ASTERIX, tmp_path=tmp_path_factory.mktemp("asterix"))
    return run_dir.parent.parent


def episodes(run_dir):
    steps, returns = read_scalars(str(run_dir), "charts/episodic_return")
    length_steps, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    assert list(steps) == list(length_steps)
    return list(steps), list(returns), [int(length) for length in lengths]


@pytest.mark.xdist_group("ppo_atari_envpool_breakout")
def test_default_flags_log_each_tag_once_per_iteration(breakout_run):
    workdir, (result, resumed) = breakout_run
    assert "global_step=" in result.stdout and "SPS=" in result.stdout
    assert "Breakout-v5 (envpool 1.2" in result.stdout and "sticky-action probability 0," in result.stdout
    assert "time limit 150 agent steps" in result.stdout
    assert f"global_step={2 * BREAKOUT_STEPS}, 100.0% of {2 * BREAKOUT_STEPS}," in resumed.stdout
    run_dir = only_run_dir(workdir)
    for tag in PPO_TAGS:  # two updates, and two more after the resume
        assert read_scalars(str(run_dir), tag)[0].tolist() == [256, 512, 768, 1024], tag
    assert not (workdir / "videos").exists()


@pytest.mark.xdist_group("ppo_atari_envpool_breakout")
def test_logged_lengths_respect_the_time_limit(breakout_run):
    _, _, lengths = episodes(only_run_dir(breakout_run[0]))
    # games truncated by the limit after life losses: a length that counted the reset steps would exceed it
    assert lengths and max(lengths) == BREAKOUT_LIMIT and min(lengths) < BREAKOUT_LIMIT


@pytest.mark.xdist_group("ppo_atari_envpool_breakout")
def test_a_life_loss_never_ends_a_logged_game(breakout_run):
    # One env: game k ends (is logged) at vector step g_k. Between g_{k-1} and g_k lie the game's reset step (none
    # before the first game, or the first after the resume at step 512, which starts new games), its `length` agent
    # steps and one reset step per life it lost before its end. A game over in Breakout's 5-life game means exactly 4
    # such reset steps; a truncated game lost 0 to 4 lives.
    steps, _, lengths = episodes(only_run_dir(breakout_run[0]))
    previous, whole_games = -1, 0
    for step, length in zip(steps, lengths):
        if previous < BREAKOUT_STEPS < step:  # the game under way at the checkpoint was not finished
            previous = BREAKOUT_STEPS - 1
        lives_lost_before_end = step - length - (previous + 1)
        if length < BREAKOUT_LIMIT:
            assert lives_lost_before_end == 4, (steps, lengths)
            whole_games += 1
        else:
            assert 0 <= lives_lost_before_end <= 4, (steps, lengths)
        previous = step
    assert whole_games >= 1


def test_logged_returns_are_unclipped_game_scores(asterix_run):
    steps, returns, lengths = episodes(only_run_dir(asterix_run))
    assert steps and max(lengths) <= ASTERIX_LIMIT
    # a sum of rewards clipped to [-1, 1] is at most the number of agent steps
    assert any(score > length for score, length in zip(returns, lengths)), (returns, lengths)
    _, eval_returns = read_scalars(str(only_run_dir(asterix_run)), "eval/episodic_return")
    assert max(eval_returns) > ASTERIX_LIMIT


def test_copied_file_films_saves_evaluates_and_tracks(asterix_run):
    # run_copied_alone checked the videos (and that W&B got each), the saved model and the 10 evaluation games
    run_dir = only_run_dir(asterix_run)
    for folder in (run_dir.name, f"{run_dir.name}-eval"):
        videos = sorted(p.name for p in (asterix_run / "videos" / folder).glob("*.mp4"))
        assert "rl-video-episode-0.mp4" in videos and "rl-video-episode-1.mp4" in videos, videos
    assert (asterix_run / "videos" / f"{run_dir.name}-eval" / "rl-video-episode-8.mp4").exists()
    checkpoint = torch.load(run_dir / "ppo_atari_envpool.cleanrl_model", map_location="cpu", weights_only=True)
    assert checkpoint["args"]["env_id"] == "Asterix-v5" and checkpoint["args"]["max_episode_steps"] == ASTERIX_LIMIT


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--env-id", "BreakoutNoFrameskip-v4"], "BreakoutNoFrameskip-v4 is not an envpool id (did you mean Breakout-v5?)"),
        (["--env-id", "CartPole-v1"], "CartPole-v1 is an envpool env but not an Atari game"),
        (["--max-episode-steps", 0], "--max-episode-steps must be in [1, 2**31), got 0"),
        (["--max-episode-steps", 2**31], "--max-episode-steps must be in [1, 2**31), got 2147483648"),
        (["--seed", 2**31 - 4], "--seed must be in [0, 2**31 - --num-envs] (int32), got 2147483644"),
        (["--seed", 2**31], "--seed must be in [0, 2**31 - --num-envs] (int32)"),
        (
            ["--num-steps", 0],
            "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs must be at least 1",
        ),
        (["--total-timesteps", -1], "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs must be"),
        (["--num-minibatches", 3], "does not split into --num-minibatches 3"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


def test_a_run_without_a_gradient_step_warns_and_runs(workdir):
    # CleanRL's smoke tests run budgets below one batch: a warning, not a refusal
    result = run_script(SCRIPT, "--total-timesteps", 100, "--num-envs", 2, "--num-steps", 64, cwd=workdir)
    run_dir = check_warns_and_runs(result, SCRIPT, "--total-timesteps below one batch", cwd=workdir)
    assert run_dir.name.startswith("Breakout-v5__ppo_atari_envpool__1__")


def test_benchmark_sh_reports_memory_and_curve(tmp_path):
    flags = ["--num-envs", "2", "--num-steps", "64", "--update-epochs", "1", "--max-episode-steps", "30"]
    result = run_benchmark(["bash", "benchmark/ppo_atari_envpool.sh", *flags], tmp_path, STEPS="128")
    assert "Maximum resident set size" in result.stdout and "eval/episodic_return" in result.stdout
    assert "| ppo_atari_envpool | Breakout-v5 | 1 | 1 |" in (tmp_path / "ppo_atari_envpool" / "report.md").read_text()
    assert (tmp_path / "ppo_atari_envpool" / "Breakout-v5.png").stat().st_size > 0


def test_pong_fast_sh_runs_the_recipe_and_reports(tmp_path):
    # one update of the recipe (16 envs x 128 steps, 8 minibatches x 3 epochs) with 64-step games
    run_benchmark(["bash", "benchmark/ppo_atari_envpool_pong_fast.sh", "--max-episode-steps", "64"], tmp_path, STEPS="2048")
    (model_path,) = (tmp_path / "out" / "runs").glob("Pong-v5__ppo_atari_envpool__1__*/ppo_atari_envpool.cleanrl_model")
    saved = torch.load(model_path, weights_only=True)["args"]
    recipe = {"clip_coef": 0.2, "num_envs": 16, "num_minibatches": 8, "num_steps": 128, "update_epochs": 3}
    assert {key: saved[key] for key in recipe} == recipe
    assert "| ppo_atari_envpool | Pong-v5 | 1 | 1 |" in (tmp_path / "ppo_atari_envpool_pong_fast" / "report.md").read_text()
    assert (tmp_path / "ppo_atari_envpool_pong_fast" / "Pong-v5.png").stat().st_size > 0


def test_speed_comparison_writes_its_table(tmp_path):
    markdown = tmp_path / "speed.md"
    command = [sys.executable, "benchmark/ppo_atari_vs_envpool_speed.py", "--rounds", "1", "--total-timesteps", "128"]
    command += ["--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--update-epochs", "1"]
    subprocess.run([*command, "--markdown", str(markdown)], cwd=REPO, env=script_env(), check=True, capture_output=True)
    table = markdown.read_text()
    assert "| 1 | " in table and "SPS ratio envpool / Gymnasium" in table and "OMP_NUM_THREADS=1" in table


@pytest.mark.parametrize(
    "args,message",
    [
        (["--rounds", "0"], "--rounds must be at least 1"),
        (["--total-timesteps", "100"], "at least one batch (8 envs x 128 steps = 1024)"),
        (["--num-minibatches", "3"], "must split into --num-minibatches 3"),
        (["--markdown", "/no/such/dir/s.md"], "its folder does not exist"),
    ],
)
def test_speed_comparison_bad_input_exits_2(args, message):
    command = [sys.executable, "benchmark/ppo_atari_vs_envpool_speed.py", *args]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr
