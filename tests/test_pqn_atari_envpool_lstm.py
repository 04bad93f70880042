"""pqn_atari_envpool_lstm.py: where the memory is reset under envpool's NEXT_STEP autoreset, worked out by
hand; that memory never crosses a reset and that replaying a rollout gives the Q-values the agent acted on;
the script run as a user would: default flags, a run without a gradient step (it warns), the file alone with every
output flag, and refused input.
Its Q(λ) returns are tested with pqn_atari_envpool.py's in test_pqn_atari_envpool.py.
"""

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

SCRIPT = "pqn_atari_envpool_lstm.py"
MAX_EPISODE_STEPS = 30
# 2 iterations of 4 envs x 24 steps in 2 minibatches of 2 envs: every env finishes exactly one game
TINY = ["--num-envs", 4, "--num-steps", 24, "--num-minibatches", 2, "--total-timesteps", 192]
TINY += ["--max-episode-steps", MAX_EPISODE_STEPS]

pqn_lstm = load_script("pqn_atari_envpool_lstm")


def masks_of(dones, rollout_length):
    """Runs next_step_masks over `dones` (T, N) as the script does, in rollouts of `rollout_length` steps
    whose flags carry over; the first observation starts a game. Returns (valid, firsts), each (T, N)."""
    num_envs = dones.shape[1]
    next_valid, next_first = torch.ones(num_envs), torch.ones(num_envs)
    valid, firsts = torch.zeros_like(dones), torch.zeros_like(dones)
    for start in range(0, dones.shape[0], rollout_length):
        for step in range(start, min(start + rollout_length, dones.shape[0])):
            valid[step], firsts[step] = next_valid, next_first
            next_valid, next_first = pqn_lstm.next_step_masks(dones[step], valid[step])
    return valid, firsts


@pytest.mark.parametrize("rollout_length", [8, 4, 3])
def test_reset_masks_by_hand(rollout_length):
    # env 0 ends episodes at steps 1 and 4 (a life loss counts: episodic life makes it terminated), env 1 at
    # step 3. A done step's next observation is its final one, still seen with the episode's memory; the step
    # after is the reset step (not trained on) and the one after that sees the new episode's first observation.
    dones = torch.tensor([[0, 0], [1, 0], [0, 0], [0, 1], [1, 0], [0, 0], [0, 0], [0, 0]], dtype=torch.float32)
    valid, firsts = masks_of(dones, rollout_length)
    assert valid[:, 0].tolist() == [1, 1, 0, 1, 1, 0, 1, 1]
    assert firsts[:, 0].tolist() == [1, 0, 0, 1, 0, 0, 1, 0]
    assert valid[:, 1].tolist() == [1, 1, 1, 1, 0, 1, 1, 1]
    assert firsts[:, 1].tolist() == [1, 0, 0, 0, 0, 1, 0, 0]


@pytest.fixture(scope="module")
def q_network():
    torch.manual_seed(0)
    return pqn_lstm.QNetwork(n_actions=4).eval()


def frames(seed, steps, envs):
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (steps * envs, 1, 84, 84), generator=generator, dtype=torch.uint8)


def test_memory_does_not_cross_a_reset(q_network):
    # env 0 starts a new episode at step 3 (its step 2 sees the old episode's final observation); env 1 does not
    firsts = torch.tensor([[0, 0], [0, 0], [0, 0], [1, 0], [0, 0]], dtype=torch.float32).reshape(-1)
    x = frames(1, 5, 2)
    other_past = x.clone().reshape(5, 2, 1, 84, 84)
    other_past[:3] = frames(2, 3, 2).reshape(3, 2, 1, 84, 84)
    other_past = other_past.reshape(-1, 1, 84, 84)
    initial_state = tuple(torch.randn(1, 2, 128) for _ in range(2))
    with torch.no_grad():
        q, _ = q_network(x, initial_state, firsts)
        q_other, _ = q_network(other_past, initial_state, firsts)
        env_0_from_step_3 = x.reshape(5, 2, 1, 84, 84)[3:, :1].reshape(-1, 1, 84, 84)
        fresh, _ = q_network(env_0_from_step_3, q_network.initial_state(1, "cpu"), torch.tensor([1.0, 0.0]))
    q, q_other = q.reshape(5, 2, -1), q_other.reshape(5, 2, -1)
    # env 0 after the reset: the same Q-values whatever came before, as if the memory started empty
    torch.testing.assert_close(q[3:, 0], q_other[3:, 0])
    torch.testing.assert_close(q[3:, 0], fresh)
    # env 0's final observation (step 2) and env 1 throughout still remember the past
    assert not torch.allclose(q[2, 0], q_other[2, 0])
    assert not torch.allclose(q[4, 1], q_other[4, 1])


def test_replaying_a_rollout_gives_the_q_values_acted_on(q_network):
    firsts = torch.tensor([[1, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0]], dtype=torch.float32)
    x = frames(3, 4, 3).reshape(4, 3, 1, 84, 84)
    state = initial_state = tuple(torch.randn(1, 3, 128) for _ in range(2))
    acted = []
    with torch.no_grad():
        for step in range(4):
            q, state = q_network(x[step], state, firsts[step])
            acted.append(q)
        replayed, final_state = q_network(x.reshape(-1, 1, 84, 84), initial_state, firsts.reshape(-1))
    torch.testing.assert_close(replayed, torch.cat(acted))
    torch.testing.assert_close(final_state[0], state[0])


def test_default_flags_log_every_tag_once_per_iteration_and_resume(workdir):
    results = []  # the run with a checkpoint after each iteration, then its resume for two more (192 more steps)

    def run(*args, cwd):
        results.append(run_script(*args, cwd=cwd))
        return results[-1]

    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 1, workdir, run=run)
    assert "frame skip 4, sticky-action probability 0, episodic life" in results[0].stdout
    assert "global_step=" in results[0].stdout and "SPS=" in results[0].stdout
    for tag in ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/SPS", "charts/learning_rate"]:
        steps, _ = read_scalars(str(run_dir), tag)
        assert list(steps) == [96, 192, 288, 384], tag
    # one game per env in each part: the resumed run starts new games (with an empty memory)
    steps, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    assert list(lengths) == [MAX_EPISODE_STEPS] * 8 and sum(steps <= 192) == 4
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[1]) == 8
    assert not (workdir / "videos").exists()


def test_a_run_without_a_gradient_step_warns_and_runs(workdir, fork_script):
    result = fork_script(SCRIPT, *TINY, "--total-timesteps", 95, cwd=workdir, timeout=300)  # below one batch of 96 steps
    check_warns_and_runs(
        result, SCRIPT, "--total-timesteps below one batch", cwd=workdir, loss_tag="losses/td_loss", alone=True
    )


def test_copied_file_films_saves_evaluates_and_tracks(tmp_path):
    _, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    assert checkpoint["args"]["env_id"] == "Breakout-v5"
    assert checkpoint["model"]["network.0.weight"].shape[1] == 1  # one frame an observation


REFUSED = [
    (["--env-id", "Pong-v4"], "Pong-v4 is not an envpool Atari game; did you mean Pong-v5?"),
    (["--env-id", "StarpilotEasy-v0"], "StarpilotEasy-v0 is not an envpool Atari game"),
    (["--num-envs", 4, "--num-minibatches", 3], "--num-envs 4 does not split into --num-minibatches 3"),
    (["--q-lambda", 1.5], "--gamma, --q-lambda, --start-e, --end-e and --exploration-fraction must be in [0, 1]"),
    (
        ["--total-timesteps", -5],
        "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs, --max-episode",
    ),
]


@pytest.mark.parametrize("flags,message", REFUSED, ids=[" ".join(map(str, f)) for f, _ in REFUSED])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


def test_benchmark_script_runs_and_reports(tmp_path):
    command = ["bash", "benchmark/pqn_atari_envpool_lstm.sh", *map(str, TINY[:6]), "--max-episode-steps", "20"]
    run_benchmark(command, tmp_path, ENVS="Pong-v5", SEEDS="2", STEPS="96")
    report = (tmp_path / "pqn_atari_envpool_lstm" / "report.md").read_text()
    assert "| pqn_atari_envpool_lstm | Pong-v5 | 1 | 2 |" in report
