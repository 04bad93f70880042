"""ppo_atari_lstm.py: where the LSTM state is reset under SAME_STEP autoreset (by hand), that a state carried
across a reset leaves no trace, that evaluation resets at episode starts too, and the script run as a user would.
(That the update's sequence replay gives back the rollout's log-probabilities and values is checked on the script's
own rollout, in tests/test_loop_wiring.py.)"""

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

SCRIPT = "ppo_atari_lstm.py"
# two iterations of 2 envs x 32 steps; games end by the 40-step time limit too, so truncations happen
TINY = ["--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--num-minibatches", 2, "--update-epochs", 1]
SHORT_GAMES = ["--max-episode-steps", 40]


@pytest.fixture(scope="module")
def lstm():
    return load_script("ppo_atari_lstm")


def table(rows):
    return torch.tensor(rows, dtype=torch.float32)


# ---------------------------------------------------------------- reset masks


def test_episode_starts_by_hand(lstm):
    # env 0: the previous rollout ended an episode, and step 1 ends one (a lost life or a game over);
    # env 1: steps 0 and 3 end episodes (the last one's start falls in the next rollout);
    # env 2: no episode ends
    dones = table([[0, 1, 0], [1, 0, 0], [0, 0, 0], [0, 1, 0]])
    last_done = torch.tensor([1.0, 0.0, 0.0])
    starts = lstm.episode_starts(dones, last_done)
    assert starts.tolist() == [[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 0]]


def test_episode_starts_on_consecutive_dones_and_a_one_step_rollout(lstm):
    # one-step episodes (done at every step): every observation is a first one
    assert lstm.episode_starts(torch.ones(3, 1), torch.ones(1)).tolist() == [[1], [1], [1]]
    assert lstm.episode_starts(torch.ones(1, 2), torch.tensor([0.0, 1.0])).tolist() == [[0, 1]]


# ---------------------------------------------------------------- unrolling with resets


def lstm_and_features(seed, steps=6, envs=3):
    torch.manual_seed(seed)
    return torch.nn.LSTM(5, 4), torch.randn(steps, envs, 5), (torch.randn(1, envs, 4), torch.randn(1, envs, 4))


def test_unroll_without_resets_is_the_plain_lstm(lstm):
    cell, features, state = lstm_and_features(0)
    outputs, (h, c) = lstm.unroll_lstm(cell, features, state, torch.zeros(6, 3))
    expected, (expected_h, expected_c) = cell(features, state)
    torch.testing.assert_close(outputs, expected)
    torch.testing.assert_close(h, expected_h)
    torch.testing.assert_close(c, expected_c)


def test_a_reset_starts_from_the_zero_state(lstm):
    cell, features, state = lstm_and_features(1)
    starts = torch.zeros(6, 3)
    starts[2, 0] = 1  # env 0: a new episode from step 2
    outputs, _ = lstm.unroll_lstm(cell, features, state, starts)
    fresh, _ = cell(features[2:, :1])  # nn.LSTM's default state is zero
    torch.testing.assert_close(outputs[2:, 0], fresh[:, 0])
    unreset, _ = cell(features, state)
    torch.testing.assert_close(outputs[:, 1:], unreset[:, 1:])  # other envs untouched
    torch.testing.assert_close(outputs[:2, 0], unreset[:2, 0])


def test_history_before_a_reset_has_no_influence_after_it(lstm):
    cell, features, state = lstm_and_features(2)
    starts = table([[1, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 1], [0, 0, 0]])
    outputs, _ = lstm.unroll_lstm(cell, features, state, starts)
    # another pre-reset history: other initial states (even non-finite ones) and other inputs before each reset
    other_features = features.clone()
    other_features[:2, 1] = torch.randn(2, 5) * 10
    other_features[:4, 2] = torch.randn(4, 5) * 10
    other_state = (torch.full((1, 3, 4), float("nan")), torch.full((1, 3, 4), float("inf")))
    other_outputs, _ = lstm.unroll_lstm(cell, other_features, other_state, starts)
    for env, reset_at in enumerate([0, 2, 4]):
        assert torch.equal(outputs[reset_at:, env], other_outputs[reset_at:, env])
        assert torch.isfinite(other_outputs[reset_at:, env]).all()
    assert not torch.equal(outputs[:2, 1], other_outputs[:2, 1])  # before its reset, env 1 did see its history


# ---------------------------------------------------------------- the agent and the replay


def test_agent_layout_and_initialisation(lstm):
    torch.manual_seed(0)
    agent = lstm.Agent(4)
    assert agent.network[0].in_channels == 1
    assert (agent.lstm.input_size, agent.lstm.hidden_size) == (512, 128)
    assert agent.actor.in_features == agent.critic.in_features == 128
    for name, param in agent.lstm.named_parameters():
        if name.startswith("bias"):
            assert not param.any(), name
        else:  # orthogonal with gain 1: (4 * 128) x 512 and (4 * 128) x 128 have orthonormal columns or rows
            gram = param @ param.T if param.shape[0] <= param.shape[1] else param.T @ param
            torch.testing.assert_close(gram, torch.eye(gram.shape[0]), atol=1e-4, rtol=0)
    h, c = agent.initial_state(3)
    assert h.shape == c.shape == (1, 3, 128) and not h.any() and not c.any()


def test_env_gives_one_frame(lstm):
    envs = lstm.make_env("BreakoutNoFrameskip-v4", 2, False, "test", 27000)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, 1, 84, 84) and obs.dtype == np.uint8
    envs.close()


def test_evaluation_resets_the_state_at_every_episode_start(lstm, monkeypatch, workdir):
    torch.manual_seed(0)
    agent = lstm.Agent(4)
    model_path = workdir / "agent.cleanrl_model"
    saved_args = {"env_id": "BreakoutNoFrameskip-v4", "seed": 1, "max_episode_steps": 25}
    torch.save({"model": agent.state_dict(), "args": saved_args}, model_path)
    seen_starts, seen_dones = [], []

    class RecordingAgent(lstm.Agent):
        def get_action_and_value(self, x, lstm_state, starts, action=None):
            seen_starts.append(float(starts[0, 0]))
            return super().get_action_and_value(x, lstm_state, starts, action)

    make_env = lstm.make_env

    def recording_vector_env(*args):
        envs = make_env(*args)
        step = envs.step

        def recording_step(actions):
            result = step(actions)
            seen_dones.append(float(result[2][0] or result[3][0]))
            return result

        envs.step = recording_step
        return envs

    monkeypatch.setattr(lstm, "Agent", RecordingAgent)
    monkeypatch.setattr(lstm, "make_env", recording_vector_env)
    returns = lstm.evaluate(str(model_path), 2, "test", torch.device("cpu"))
    assert len(returns) == 2
    assert seen_starts == [1.0] + seen_dones[:-1]
    assert sum(seen_dones) >= 2


# ---------------------------------------------------------------- the script run as a user would


def test_default_flags_log_each_tag_once_per_iteration_then_a_checkpoint_and_resume(workdir):
    # two iterations with a checkpoint after each, then two more from the last one with --resume (new episodes, a
    # zero LSTM state)
    results = []

    def run(*args, **kwargs):
        results.append(run_script(*args, **kwargs))
        return results[-1]

    run_dir = check_checkpoint_and_resume(SCRIPT, [*TINY, *SHORT_GAMES], 1, workdir, run=run)
    assert "BreakoutNoFrameskip-v4: frame skip 4 (MaxAndSkip), sticky-action probability 0," in results[0].stdout
    assert "SPS=" in results[0].stdout
    for tag in PPO_TAGS:
        assert list(read_scalars(str(run_dir), tag)[0]) == [64, 128, 192, 256], tag  # one point per iteration, once
    # games were truncated at 40 agent steps (160 frames) and logged as whole games
    _, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    assert len(lengths) >= 2 and max(lengths) <= 160
    assert not (workdir / "videos").exists()


def test_copied_file_records_saves_evaluates_and_tracks(tmp_path):
    _, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, "--max-episode-steps", 25, tmp_path=tmp_path)
    assert checkpoint["args"]["max_episode_steps"] == 25
    assert "lstm.weight_hh_l0" in checkpoint["model"]


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--num-envs", 6], "--num-envs 6 does not split into --num-minibatches 4 (a minibatch holds whole env sequences"),
        (["--num-minibatches", 3], "--num-envs 8 does not split into --num-minibatches 3"),
        (["--num-envs", 2, "--num-steps", 1, "--num-minibatches", 2], "minibatches of 1 step cannot normalise advantages"),
        (["--max-episode-steps", 0], "--update-epochs, --max-episode-steps must be at least 1"),
        (["--env-id", "CartPole-v1"], "CartPole-v1 is not an ale-py Atari game"),
        (["--total-timesteps", -5], "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs, --max"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


def test_a_run_without_a_gradient_step_warns_and_runs(workdir):
    # CleanRL's smoke tests run budgets below one batch: a warning, not a refusal
    result = run_script(SCRIPT, "--total-timesteps", 32, *TINY[2:], *SHORT_GAMES, cwd=workdir)
    run_dir = check_warns_and_runs(result, SCRIPT, "--total-timesteps below one batch", cwd=workdir)
    assert run_dir.name.startswith("BreakoutNoFrameskip-v4__ppo_atari_lstm__1__")


def test_compute_gae_is_ppo_atari_s(lstm):
    torch.manual_seed(0)
    inputs = [torch.randn(5, 3) for _ in range(2)] + [(torch.rand(5, 3) < 0.3).float() for _ in range(2)]
    inputs += [torch.randn(5, 3), torch.randn(3)]
    inputs[3] = inputs[3] * inputs[2]  # terminations are dones
    expected = load_script("ppo_atari").compute_gae(*inputs, 0.99, 0.95)
    for got, want in zip(lstm.compute_gae(*inputs, 0.99, 0.95), expected):
        assert torch.equal(got, want)
