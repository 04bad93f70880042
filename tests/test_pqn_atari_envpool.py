"""pqn_atari_envpool.py: Q(λ) returns under envpool's NEXT_STEP autoreset worked out by hand (for it and
pqn_atari_envpool_lstm.py, which has its own copy), the masked reset step, and the script run as a user would:
default flags, a run without a gradient step (it warns), the file alone with every output flag, and refused input.

Returns: rewards r, max_a Q(s_t, a) = q_max, max_a Q of the observation after the rollout 4, gamma = 0.5,
lambda = 0.5: G_t = r_t + gamma * (lambda * G_{t+1} + (1 - lambda) * q_max[t+1]), G_T = 4. With NEXT_STEP
the observation after a done step t is the episode's final one, so q_max[t+1] is its value; step t+1 is the
reset step (reward 0, action ignored) and is masked out of the loss.
"""

import numpy as np
import pytest
import torch

from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_refused,
    check_warns_and_runs,
    load_script,
    run_benchmark,
    run_copied_alone,
    run_script,
)

SCRIPT = "pqn_atari_envpool.py"
MAX_EPISODE_STEPS = 30
# 2 iterations of 4 envs x 24 steps: every env finishes exactly one game (cut by the 30-step limit)
TINY = ["--num-envs", 4, "--num-steps", 24, "--num-minibatches", 4, "--total-timesteps", 192]
TINY += ["--max-episode-steps", MAX_EPISODE_STEPS]
GAMMA, LAMBDA = 0.5, 0.5

pqn = load_script("pqn_atari_envpool")


@pytest.fixture(scope="module", params=["pqn_atari_envpool", "pqn_atari_envpool_lstm"])
def compute_returns(request):
    return load_script(request.param).compute_q_lambda_returns


def column(values):
    return torch.tensor(values, dtype=torch.float32)[:, None]


def q_lambda(compute_returns, rewards, q_max, dones, terminations, next_q_max=4.0, q_lambda=LAMBDA):
    returns = compute_returns(
        rewards=column(rewards),
        q_max=column(q_max),
        dones=column(dones),
        terminations=column(terminations),
        next_q_max=torch.tensor([next_q_max]),
        gamma=GAMMA,
        q_lambda=q_lambda,
    )
    assert returns.shape == (len(rewards), 1)
    return returns[:, 0].tolist()


def test_no_episode_end(compute_returns):
    # G_2 = 3 + 0.5*4 = 5; G_1 = 2 + 0.5*(0.5*5 + 0.5*2) = 3.75; G_0 = 1 + 0.5*(0.5*3.75 + 0.5*1) = 2.1875
    returns = q_lambda(compute_returns, [1, 2, 3], [0.5, 1, 2], dones=[0, 0, 0], terminations=[0, 0, 0])
    assert returns == pytest.approx([2.1875, 3.75, 5])


# step 1 ends an episode; obs 2 is its final observation (max Q 6); step 2 is the reset step (reward 0)
ENDS_AT_1 = dict(rewards=[1, 2, 0, 3], q_max=[0.5, 1, 6, 2], dones=[0, 1, 0, 0])


def test_truncation_bootstraps_from_the_final_observation_only(compute_returns):
    # G_3 = 3 + 0.5*4 = 5; G_2 (reset step) = 0 + 0.5*(0.5*5 + 0.5*2) = 1.75;
    # G_1 = 2 + 0.5*6 = 5 (nothing of G_2); G_0 = 1 + 0.5*(0.5*5 + 0.5*1) = 2.5
    returns = q_lambda(compute_returns, **ENDS_AT_1, terminations=[0, 0, 0, 0])
    assert returns == pytest.approx([2.5, 5, 1.75, 5])


def test_termination_bootstraps_nothing(compute_returns):
    # G_1 = 2; G_0 = 1 + 0.5*(0.5*2 + 0.5*1) = 1.75
    returns = q_lambda(compute_returns, **ENDS_AT_1, terminations=[0, 1, 0, 0])
    assert returns == pytest.approx([1.75, 2, 1.75, 5])


def test_the_next_episode_never_reaches_the_ended_one(compute_returns):
    # whatever the reset step and the next episode hold, the returns of steps 0 and 1 stay the same
    for terminations in ([0, 0, 0, 0], [0, 1, 0, 0]):
        before = q_lambda(compute_returns, **ENDS_AT_1, terminations=terminations)
        changed = dict(ENDS_AT_1, rewards=[1, 2, 50, -9], q_max=[0.5, 1, 6, 70])
        after = q_lambda(compute_returns, **changed, terminations=terminations, next_q_max=-100.0)
        assert after[:2] == pytest.approx(before[:2])


def test_truncation_at_the_last_step(compute_returns):
    # the observation after the rollout is the final one (worth 8): G_2 = 3 + 0.5*8 = 7;
    # G_1 = 2 + 0.5*(0.5*7 + 0.5*2) = 4.25; G_0 = 1 + 0.5*(0.5*4.25 + 0.5*1) = 2.3125
    returns = q_lambda(compute_returns, [1, 2, 3], [0.5, 1, 2], [0, 0, 1], [0, 0, 0], next_q_max=8.0)
    assert returns == pytest.approx([2.3125, 4.25, 7])


def test_termination_at_the_last_step(compute_returns):
    # G_2 = 3; G_1 = 2 + 0.5*(0.5*3 + 0.5*2) = 3.25; G_0 = 1 + 0.5*(0.5*3.25 + 0.5*1) = 2.0625
    returns = q_lambda(compute_returns, [1, 2, 3], [0.5, 1, 2], [0, 0, 1], [0, 0, 1], next_q_max=float("nan"))
    assert returns == pytest.approx([2.0625, 3.25, 3])


def test_lambda_one_and_zero(compute_returns):
    # λ = 1: discounted rewards plus the bootstrap, here cut by the truncation at step 1: G_0 = 1 + 0.5*2 + 0.25*6
    returns = q_lambda(compute_returns, **ENDS_AT_1, terminations=[0, 0, 0, 0], q_lambda=1.0)
    assert returns[:2] == pytest.approx([3.5, 5])
    # λ = 0: one-step targets r_t + gamma * q_max[t+1]
    returns = q_lambda(compute_returns, **ENDS_AT_1, terminations=[0, 0, 0, 0], q_lambda=0.0)
    assert returns == pytest.approx([1.5, 5, 1, 5])


def test_the_reset_step_is_masked_out_of_the_loss():
    # step 2 is the reset step: its squared error (here 1e6, or even nan) does not count
    squared_errors = torch.tensor([1.0, 4.0, 1e6, 7.0])
    valid = torch.tensor([1.0, 1.0, 0.0, 1.0])
    assert pqn.masked_mean(squared_errors, valid).item() == pytest.approx(4.0)
    assert pqn.masked_mean(torch.tensor([1.0, 4.0, float("nan"), 7.0]), valid).item() == pytest.approx(4.0)
    assert pqn.masked_mean(squared_errors, torch.zeros(4)).item() == 0.0


def test_envpool_autoreset_is_next_step():
    # what the rollout assumes: the step that ends an episode returns its final observation, the next one
    # (the reset step) brings reward 0, no end, and a new game whose elapsed steps start again
    envs = pqn.make_env("Breakout-v5", 1, 1, max_episode_steps=5)
    assert envs.metadata["autoreset_mode"].name == "NEXT_STEP"
    envs.reset()
    for _ in range(4):
        envs.step(np.zeros(1, dtype=np.int64))
    _, _, termination, truncation, infos = envs.step(np.zeros(1, dtype=np.int64))
    assert truncation[0] and not termination[0] and infos["elapsed_step"][0] == 5
    _, reward, termination, truncation, infos = envs.step(np.zeros(1, dtype=np.int64))
    assert reward[0] == 0 and not termination[0] and not truncation[0] and infos["elapsed_step"][0] == 0
    envs.close()


def test_default_flags_log_every_tag_once_per_iteration_and_resume(workdir):
    results = []  # the run with a checkpoint after each iteration, then its resume for two more (192 more steps)

    def run(*args, cwd):
        results.append(run_script(*args, cwd=cwd))
        return results[-1]

    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 1, workdir, run=run)
    assert "frame skip 4, sticky-action probability 0, episodic life" in results[0].stdout
    assert f"time limit {MAX_EPISODE_STEPS} agent steps" in results[0].stdout
    assert "global_step=" in results[0].stdout and "SPS=" in results[0].stdout
    for tag in ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/SPS", "charts/learning_rate"]:
        steps, _ = read_scalars(str(run_dir), tag)
        assert list(steps) == [96, 192, 288, 384], tag
    # one game per env in each part (the resumed one starts new games), each cut by the time limit: its life losses
    # neither logged nor ended it
    steps, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    _, returns = read_scalars(str(run_dir), "charts/episodic_return")
    assert list(lengths) == [MAX_EPISODE_STEPS] * 8 and len(returns) == 8 and all(r >= 0 for r in returns)
    assert sum(steps <= 192) == 4
    assert not (workdir / "videos").exists()


def test_a_run_without_a_gradient_step_warns_and_runs(workdir, fork_script):
    result = fork_script(SCRIPT, *TINY, "--total-timesteps", 95, cwd=workdir, timeout=300)  # below one batch of 96 steps
    check_warns_and_runs(
        result, SCRIPT, "--total-timesteps below one batch", cwd=workdir, loss_tag="losses/td_loss", alone=True
    )


def test_copied_file_films_saves_evaluates_and_tracks(tmp_path):
    _, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    assert checkpoint["args"]["env_id"] == "Breakout-v5" and checkpoint["args"]["max_episode_steps"] == MAX_EPISODE_STEPS


REFUSED = [
    (["--env-id", "Breakout-v4"], "Breakout-v4 is not an envpool Atari game; did you mean Breakout-v5?"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 is not an envpool Atari game"),
    (["--num-minibatches", 3], "does not split into --num-minibatches 3"),
    (["--max-episode-steps", 0], "--update-epochs, --max-episode-steps must be at least 1"),
    (
        ["--total-timesteps", 0],
        "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs, --max-episode",
    ),
    (["--seed", 2**31], "--seed must be in [0, 2**31 - 128], got 2147483648"),
    (["--exploration-fraction", 2], "--gamma, --q-lambda, --start-e, --end-e and --exploration-fraction must be in [0, 1]"),
]


@pytest.mark.parametrize("flags,message", REFUSED, ids=[" ".join(map(str, f)) for f, _ in REFUSED])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


def test_env_error_accepts_envpool_atari_ids():
    assert pqn.env_error("Pong-v5") is None
    assert "not an envpool Atari game" in pqn.env_error("StarpilotEasy-v0")


def test_benchmark_script_runs_and_reports(tmp_path):
    command = ["bash", "benchmark/pqn_atari_envpool.sh", *map(str, TINY[:6]), "--max-episode-steps", "20"]
    run_benchmark(command, tmp_path, ENVS="Breakout-v5", SEEDS="1", STEPS="96")
    assert "| pqn_atari_envpool | Breakout-v5 | 1 | 1 |" in (tmp_path / "pqn_atari_envpool" / "report.md").read_text()
