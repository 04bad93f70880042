"""ppo_procgen.py: its runs (default flags; upstream CleanRL's smoke command as written; a run without a gradient step,
which warns; the file copied alone with video, save, evaluation and offline W&B; refusals), and the envpool pieces it
shares in kind with ppg_procgen.py (each file has its own copy, so both copies are checked here): GAE and the
reset-step mask of envpool's NEXT_STEP autoreset, masked means and advantage normalisation, the script-side time
limit, env_error.

NEXT_STEP layout used by the hand-computed GAE cases: a game that ends at step t (done) hands back its true final
observation as obs[t + 1]; step t + 1 is then a reset step (action ignored, reward 0) that no loss sees.
"""

import numpy as np
import pytest
import torch

from cleanrl_utils.checkpoint import read
from cleanrl_utils.report import read_scalars
from conftest import (
    IN_CI,
    PPO_TAGS,
    check_checkpoint_and_resume,
    check_ok,
    check_refused,
    check_warns_and_runs,
    load_script,
    only_run_dir,
    procgen_missing,
    run_copied_alone,
    run_script,
)

# under CI (CI=true) they run anyway, and fail, where the Qt 5 runtime that .ci/run installs is missing
pytestmark = pytest.mark.skipif(procgen_missing() is not None and not IN_CI, reason=f"envpool Procgen: {procgen_missing()}")

SCRIPT = "ppo_procgen.py"
# two iterations of 2 envs x 16 steps; games cut at 10 steps, so several end (and the 10 evaluation games are short)
TINY = [
    "--total-timesteps", 64,
    "--num-envs", 2,
    "--num-steps", 16,
    "--num-minibatches", 2,
    "--update-epochs", 1,
    "--max-episode-steps", 10,
]  # fmt: skip
GAMMA, LAMBDA = 0.5, 0.5  # gamma * lambda = 0.25


@pytest.fixture(scope="module", params=["ppo_procgen", "ppg_procgen"])
def script(request):
    return load_script(request.param)


def column(values):
    return torch.tensor(values, dtype=torch.float32)[:, None]


def gae(script, dones=(0, 0, 0, 0), terminations=(0, 0, 0, 0), rewards=(1, 2, 0, 3), values=(0.5, 1, 6, 2)):
    advantages, returns = script.compute_gae(
        rewards=column(rewards),
        values=column(values),
        dones=column(dones),
        terminations=column(terminations),
        next_value=torch.tensor([4.0]),
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    return advantages[:, 0].tolist(), returns[:, 0].tolist()


def test_gae_without_a_game_end(script):
    # deltas: 3 + 0.5*4 - 2 = 3, 0 + 0.5*2 - 6 = -5, 2 + 0.5*6 - 1 = 4, 1 + 0.5*1 - 0.5 = 1
    advantages, returns = gae(script)
    a2 = -5 + 0.25 * 3
    a1 = 4 + 0.25 * a2
    assert advantages == pytest.approx([1 + 0.25 * a1, a1, a2, 3])
    assert returns == pytest.approx([a + v for a, v in zip(advantages, [0.5, 1, 6, 2])])


def test_gae_truncation_bootstraps_from_the_final_observation_after_it(script):
    # the game is cut at step 1: obs[2] is its final observation (V = 6), step 2 the reset step
    advantages, _ = gae(script, dones=(0, 1, 0, 0))
    assert advantages[1] == pytest.approx(2 + 0.5 * 6 - 1)  # 4, and nothing from the reset step
    assert advantages[0] == pytest.approx(1 + 0.25 * 4)


def test_gae_termination_bootstraps_nothing(script):
    advantages, _ = gae(script, dones=(0, 1, 0, 0), terminations=(0, 1, 0, 0))
    assert advantages[:2] == pytest.approx([1 + 0.25 * 1, 1])


def test_gae_reset_step_never_reaches_the_ended_game(script):
    # whatever the reset step's reward (0 in envpool) and its own bootstrap are, the ended game's steps don't change
    base, _ = gae(script, dones=(0, 1, 0, 0))
    changed, _ = gae(script, dones=(0, 1, 0, 0), rewards=(1, 2, 50, 3), values=(0.5, 1, 6, -30))
    assert changed[:2] == pytest.approx(base[:2])


def test_gae_game_end_at_the_last_step(script):
    # next_value (4) is then the final observation's value: a truncation bootstraps it, a termination does not
    truncated, _ = gae(script, dones=(0, 0, 0, 1))
    terminated, _ = gae(script, dones=(0, 0, 0, 1), terminations=(0, 0, 0, 1))
    assert truncated[3] == pytest.approx(3 + 0.5 * 4 - 2)
    assert terminated[3] == pytest.approx(3 - 2)
    assert terminated[2] == pytest.approx(-5 + 0.25 * 1)


def test_gae_envs_are_independent(script):
    t = torch.tensor
    advantages, _ = script.compute_gae(
        rewards=t([[1.0, 1.0], [2.0, 2.0]]),
        values=t([[0.5, 0.5], [1.0, 1.0]]),
        dones=t([[0.0, 1.0], [0.0, 0.0]]),
        terminations=t([[0.0, 1.0], [0.0, 0.0]]),
        next_value=t([4.0, 4.0]),
        gamma=GAMMA,
        gae_lambda=LAMBDA,
    )
    # env 0: deltas 1 + 0.5 - 0.5 = 1 and 2 + 2 - 1 = 3; env 1 terminates at step 0: delta 1 - 0.5
    torch.testing.assert_close(advantages, t([[1 + 0.25 * 3, 0.5], [3.0, 3.0]]))


def test_reset_step_mask(script):
    dones = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    last_done = torch.tensor([1.0, 0.0, 0.0])  # env 0's game ended at the previous rollout's last step
    expected = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    torch.testing.assert_close(script.reset_step_mask(dones, last_done), expected)


def test_masked_mean_and_advantage_normalisation(script):
    valid = torch.tensor([1.0, 1.0, 0.0, 1.0])
    assert script.masked_mean(torch.tensor([1.0, 3.0, 100.0, 5.0]), valid).item() == pytest.approx(3.0)
    assert script.masked_mean(torch.tensor([7.0]), torch.tensor([0.0])).item() == 0.0
    # valid entries 1, 3, 5: mean 3, unbiased std 2
    normalized = script.normalize_advantages(torch.tensor([1.0, 3.0, 100.0, 5.0]), valid)
    assert normalized[[0, 1, 3]].tolist() == pytest.approx([-1.0, 0.0, 1.0], abs=1e-6)
    advantages = torch.tensor([0.3, -1.2, 2.5, 0.1])
    plain = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    torch.testing.assert_close(script.normalize_advantages(advantages, torch.ones(4)), plain)


def test_time_limit_cuts_games_in_next_step_style(script):
    envs = script.make_env("StarpilotEasy-v0", 3, 7, max_episode_steps=5)
    obs, info = envs.reset()
    first_levels = info["level_seed"].copy()
    for step in range(1, 6):
        final_obs, reward, terminated, truncated, info = envs.step(np.zeros(3, dtype=np.int32))
        assert list(info["elapsed_step"]) == [step] * 3 and np.array_equal(info["reward"], reward)
    assert truncated.all() and not terminated.any()  # cut at the limit (no Starpilot game dies in 5 NOOP steps)
    obs, reward, terminated, truncated, info = envs.step(np.ones(3, dtype=np.int32))  # the reset step
    assert not (terminated | truncated).any() and (reward == 0).all() and (info["elapsed_step"] == 0).all()
    assert (info["level_seed"] != first_levels).all() and not np.array_equal(obs, final_obs)
    _, _, _, truncated, info = envs.step(np.zeros(3, dtype=np.int32))
    assert not truncated.any() and (info["elapsed_step"] == 1).all()
    envs.close()


def test_game_ends_are_followed_by_a_reset_step(script):
    # the game's own ends (Starpilot under random actions dies within a few dozen steps), with the default limit
    envs = script.make_env("StarpilotEasy-v0", 4, 3)
    envs.reset()
    rng = np.random.default_rng(0)
    previous_done, ends = np.zeros(4, dtype=bool), 0
    for _ in range(300):
        _, reward, terminated, truncated, info = envs.step(rng.integers(0, 15, 4).astype(np.int32))
        assert (info["elapsed_step"][previous_done] == 0).all() and (reward[previous_done] == 0).all()
        assert not (terminated | truncated)[previous_done].any()
        previous_done = terminated | truncated
        ends += int(previous_done.sum())
    assert ends > 0 and (info["elapsed_step"] <= 1000).all()
    envs.close()


def test_env_error(script):
    assert script.env_error("StarpilotEasy-v0") is None and script.env_error("BigfishHard-v0") is None
    assert "Breakout-v5 is not an envpool Procgen game" in script.env_error("Breakout-v5")
    assert "did you mean StarpilotEasy-v0?" in script.env_error("StarpilotEasy-v1")
    assert "did you mean BigfishEasy-v0?" in script.env_error("bigfish")  # the procgen package's name
    assert script.env_error("CartPol-v1") == f"CartPol-v1 is not an envpool Procgen game; {script.SCRIPT} needs one"


def test_validation_messages(script):
    def error(**changes):
        args = script.Args()
        args.num_envs, args.num_steps = 8, 16  # PPG's auxiliary buffer at the defaults needs 6 GiB of free memory
        for key, value in changes.items():
            setattr(args, key, value)
        return script.env_error(args.env_id) or script.validation_error(args)  # as the script asks

    assert error() is None
    assert "--max-episode-steps must be in [1, 1000]" in error(max_episode_steps=1001)
    assert "--max-episode-steps must be in [1, 6000]" in error(env_id="BigfishEasy-v0", max_episode_steps=0)
    assert "--seed must be in [0, 2**31 - 8]" in error(seed=2**31 - 1)
    assert "is not an envpool Procgen game" in error(env_id="Pong-v5")


def test_default_flags_and_resume(workdir):
    results = []  # the run with a checkpoint after each iteration, then its resume for two more (64 more steps)

    def run(*args, cwd):
        results.append(run_script(*args, cwd=cwd))
        return results[-1]

    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 1, workdir, run=run)
    assert "global_step=" in results[0].stdout and "SPS=" in results[0].stdout
    assert "time limit 10 steps (the game's own: 1000)" in results[0].stdout
    for tag in PPO_TAGS:
        assert list(read_scalars(str(run_dir), tag)[0]) == [32, 64, 96, 128], tag
    # the reward scale's statistics went on through the resume: a sample per env and step of both parts but the reset
    # steps, more than the 64 steps of the resumed part alone
    kind, return_rms = read(str(run_dir / "checkpoint.pt"), SCRIPT)["state"]["return_rms"]
    assert kind == "attributes" and 64 < return_rms["count"] <= 128
    _, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    assert len(lengths) >= 4 and max(lengths) <= 10
    _, returns = read_scalars(str(run_dir), "charts/episodic_return")
    assert len(returns) == len(lengths) and all(r >= 0 and r == int(r) for r in returns)  # raw Starpilot scores
    assert not (workdir / "videos").exists()


def test_upstream_smoke_command_runs_as_written(workdir, fork_script):
    # upstream CleanRL's tests/test_procgen.py (../shared/upstream-test-commands.tsv): 4 batches of 64 steps
    result = fork_script(SCRIPT, "--num-envs", 1, "--num-steps", 64, "--total-timesteps", 256, "--num-minibatches", 2,
                         cwd=workdir, timeout=600)  # fmt: skip
    check_ok(result)
    assert "warning" not in result.stdout and "global_step=256" in result.stdout
    assert list(read_scalars(str(only_run_dir(workdir)), "losses/value_loss")[0]) == [64, 128, 192, 256]


def test_a_run_without_a_gradient_step_warns_and_runs(workdir, fork_script):
    result = fork_script(SCRIPT, *TINY, "--total-timesteps", 31, cwd=workdir, timeout=300)  # below one batch of 32 steps
    check_warns_and_runs(
        result, SCRIPT, "--total-timesteps below one batch", cwd=workdir, loss_tag="losses/value_loss", alone=True
    )


def test_copied_file_with_video_save_evaluation_and_offline_tracking(tmp_path):
    _, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    assert checkpoint["args"]["env_id"] == "StarpilotEasy-v0" and checkpoint["args"]["max_episode_steps"] == 10


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--env-id", "Breakout-v5"], "Breakout-v5 is not an envpool Procgen game; ppo_procgen.py needs one"),
        (["--max-episode-steps", 5000], "--max-episode-steps must be in [1, 1000] (StarpilotEasy-v0 ends every game"),
        (["--num-minibatches", 3], "does not split into --num-minibatches 3"),
        (["--total-timesteps", 0], "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs must be"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)
