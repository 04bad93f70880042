"""ppo_rnd_envpool.py: the RND pieces against values worked out by hand (running statistics, the reward forward
filter, frame normalisation, reset-step masks, the extrinsic and intrinsic GAE), then the script run as a user
would: tiny default-flags run with every tag, upstream CleanRL's smoke command as written, a run without a gradient
step (it warns), the file copied alone with video, model and offline W&B, refusals."""

import pytest
import torch

from budgets import VARIANT_TINY
from cleanrl_utils.checkpoint import capture, decode, encode, read, restore
from cleanrl_utils.report import read_scalars
from conftest import (
    PPO_TAGS,
    check_checkpoint_and_resume,
    check_ok,
    check_refused,
    check_warns_and_runs,
    load_script,
    only_run_dir,
    run_copied_alone,
    run_script,
)

rnd = load_script("ppo_rnd_envpool")
SCRIPT = "ppo_rnd_envpool.py"
TINY = VARIANT_TINY[SCRIPT]  # games cut at 40 steps so that some end
RND_TAGS = [
    "losses/fwd_loss",
    "losses/ext_value_loss",
    "losses/int_value_loss",
    "losses/int_explained_variance",
    "charts/curiosity_reward",
    "charts/curiosity_reward_scale",
]


def t(values):
    return torch.tensor(values, dtype=torch.float32)


def column(values):
    return t(values)[:, None]


# --- running statistics -------------------------------------------------------------------------------------


def test_running_mean_std_merges_batches_exactly():
    rms = rnd.RunningMeanStd(())
    assert rms.count == 0 and float(rms.mean) == 0.0 and float(rms.var) == 1.0  # normalising before data: identity
    rms.update(t([1, 2, 3]))
    assert rms.count == 3 and float(rms.mean) == pytest.approx(2.0) and float(rms.var) == pytest.approx(2 / 3)
    rms.update(t([5, 7]))
    # all of 1, 2, 3, 5, 7: mean 18 / 5 = 3.6, variance (1 + 4 + 9 + 25 + 49) / 5 - 3.6^2 = 17.6 - 12.96 = 4.64
    assert rms.count == 5 and float(rms.mean) == pytest.approx(3.6) and float(rms.var) == pytest.approx(4.64)
    rms.update(t([]))  # nothing new (e.g. a rollout of reset steps only) changes nothing
    assert rms.count == 5 and float(rms.var) == pytest.approx(4.64)


def test_running_statistics_come_back_from_a_checkpoint_into_their_live_tensors():
    # copied into the tensors the run already has, so that a CUDA run's statistics stay on its GPU
    saved, live = rnd.RunningMeanStd((1, 2)), rnd.RunningMeanStd((1, 2))
    saved.update(torch.tensor([[[0, 10]], [[4, 10]]], dtype=torch.uint8))
    mean, var = live.mean, live.var
    restore("obs_rms", live, *decode(encode(capture(saved))))
    assert live.mean is mean and live.var is var and live.count == 2
    assert live.mean.tolist() == [[2.0, 10.0]] and live.var.tolist() == [[4.0, 0.0]]


def test_running_mean_std_is_per_pixel():
    rms = rnd.RunningMeanStd((1, 2))
    rms.update(torch.tensor([[[0, 10]], [[4, 10]]], dtype=torch.uint8))
    torch.testing.assert_close(rms.mean, torch.tensor([[2.0, 10.0]], dtype=torch.float64))
    torch.testing.assert_close(rms.var, torch.tensor([[4.0, 0.0]], dtype=torch.float64))
    state = rms.state_dict()
    assert set(state) == {"mean", "var", "count"} and all(isinstance(v, torch.Tensor) for v in state.values())


def test_normalize_frames_standardises_and_clips_to_five():
    rms = rnd.RunningMeanStd((1, 1, 3))
    rms.mean = torch.tensor([[[10.0, 10.0, 10.0]]], dtype=torch.float64)
    rms.var = torch.tensor([[[4.0, 0.0, 1.0]]], dtype=torch.float64)
    frames = torch.tensor([[[[14, 10, 100]]], [[[0, 10, 9]]]], dtype=torch.uint8)
    normalized = rnd.normalize_frames(frames, rms)
    assert normalized.dtype == torch.float32
    # (14 - 10) / 2 = 2; a pixel that never varied maps to 0; (100 - 10) / 1 clipped to 5; (0 - 10) / 2 clipped to -5
    torch.testing.assert_close(normalized, t([[[[2, 0, 5]]], [[[-5, 0, -1]]]]), atol=1e-4, rtol=0)


def test_reward_forward_filter_is_non_episodic_and_skips_reset_steps():
    rff = rnd.RewardForwardFilter(0.5, 2)
    torch.testing.assert_close(rff.update(t([1, 2]), t([1, 1])), t([1, 2]))
    # env 1 is on a reset step: its reward (8) is not added and its sum is not discounted
    torch.testing.assert_close(rff.update(t([4, 8]), t([1, 0])), t([0.5 * 1 + 4, 2]))
    torch.testing.assert_close(rff.update(t([2, 2]), t([1, 1])), t([0.5 * 4.5 + 2, 0.5 * 2 + 2]))


# --- masks ---------------------------------------------------------------------------------------------------


def test_reset_step_mask_follows_dones_across_rollouts():
    dones = t([[0, 1], [1, 0], [0, 0]])
    # env 0 ended the previous rollout on its last step, so this rollout starts with its reset step
    valid = rnd.reset_step_mask(dones, prev_done=t([1, 0]))
    torch.testing.assert_close(valid, t([[0, 1], [1, 0], [0, 1]]))


def test_masked_mean_and_advantage_normalisation_ignore_masked_entries():
    assert float(rnd.masked_mean(t([1, 2, 3, 4]), t([1, 0, 1, 0]))) == pytest.approx(2.0)
    assert float(rnd.masked_mean(t([1, 2]), t([0, 0]))) == 0.0
    # valid entries 1 and 3: mean 2, unbiased std sqrt(2); the masked 100 neither shifts nor scales them
    normalized = rnd.normalize_advantages(t([1, 100, 3]), t([1, 0, 1]))
    assert normalized[0].item() == pytest.approx(-(2**-0.5)) and normalized[2].item() == pytest.approx(2**-0.5)


# --- extrinsic GAE: T = 3, r = [1, 2, 3], V = [0.5, 1, 2], V(after the rollout) = 4, gamma = lambda = 0.5 -------


def ext_gae(dones=(0, 0, 0), terminations=(0, 0, 0)):
    advantages, returns = rnd.compute_gae(
        column([1, 2, 3]), column([0.5, 1, 2]), column(dones), column(terminations), t([4]), 0.5, 0.5
    )
    return advantages[:, 0].tolist(), returns[:, 0].tolist()


def test_extrinsic_gae_without_episode_end():
    # deltas 1 + 0.5 - 0.5 = 1, 2 + 1 - 1 = 2, 3 + 2 - 2 = 3; A_t = delta_t + 0.25 A_{t+1}
    advantages, returns = ext_gae()
    assert advantages == pytest.approx([1.6875, 2.75, 3])
    assert returns == pytest.approx([2.1875, 3.75, 5])


def test_extrinsic_gae_termination_zeroes_the_bootstrap():
    advantages, _ = ext_gae(dones=(0, 1, 0), terminations=(0, 1, 0))
    assert advantages[:2] == pytest.approx([1 + 0.25 * 1, 2 - 1])


def test_extrinsic_gae_truncation_bootstraps_from_the_true_final_observation():
    # step 1 hits the time limit; with NEXT_STEP the next stored observation (V = 2) is its true final one, and
    # step 2 (the reset step) does not flow back: delta_1 = 2 + 0.5 * 2 - 1 = 2
    advantages, _ = ext_gae(dones=(0, 1, 0))
    assert advantages[:2] == pytest.approx([1 + 0.25 * 2, 2])


def test_extrinsic_gae_episode_end_on_the_last_step():
    truncated, _ = ext_gae(dones=(0, 0, 1))  # next_value is the final observation's: 3 + 0.5 * 4 - 2 = 3
    assert truncated == pytest.approx([1.6875, 2.75, 3])
    terminated, _ = ext_gae(dones=(0, 0, 1), terminations=(0, 0, 1))  # 3 - 2 = 1
    assert terminated == pytest.approx([1 + 0.25 * 2.25, 2 + 0.25 * 1, 1])


# --- intrinsic GAE: T = 4, r = [1, 2, 3, 4], V = [0.5, 1, 2, 3], V(after the rollout) = 4, gamma = lambda = 0.5 --


def int_gae(valid=(1, 1, 1, 1), rewards=(1, 2, 3, 4), values=(0.5, 1, 2, 3)):
    advantages, returns = rnd.compute_intrinsic_gae(column(rewards), column(values), column(valid), t([4]), 0.5, 0.5)
    return advantages[:, 0].tolist(), returns[:, 0].tolist()


def test_intrinsic_gae_without_reset_steps_is_plain_gae():
    # deltas 1, 2, 2.5, 3 (r + 0.5 V_next - V); no episode end stops the intrinsic stream
    advantages, returns = int_gae()
    assert advantages == pytest.approx([1.703125, 2.8125, 3.25, 3])
    assert returns == pytest.approx([2.203125, 3.8125, 5.25, 6])


def test_intrinsic_gae_steps_over_a_reset_step():
    # step 1 ended an episode (terminated or truncated alike), step 2 is the reset step: its reward (the novelty of
    # the new first frame, here 1000) and value (99) are not used; step 1 bootstraps from step 3's value and its
    # chain continues there: delta_1 = 2 + 0.5 * 3 - 1 = 2.5, A_1 = 2.5 + 0.25 * A_3 = 3.25
    advantages, returns = int_gae(valid=(1, 1, 0, 1), rewards=(1, 2, 1000, 4), values=(0.5, 1, 99, 3))
    assert advantages == pytest.approx([1 + 0.25 * 3.25, 3.25, 0, 3])
    assert returns == pytest.approx([2.3125, 4.25, 99, 6])


def test_intrinsic_gae_reset_step_at_the_rollout_edges():
    # first step is a reset step (the previous rollout ended an episode): it gets 0, the others are unchanged
    advantages, _ = int_gae(valid=(0, 1, 1, 1), rewards=(1000, 2, 3, 4))
    assert advantages == pytest.approx([0, 2.8125, 3.25, 3])
    # last step is a reset step: step 2 bootstraps from next_value, the new episode's first observation
    advantages, _ = int_gae(valid=(1, 1, 1, 0), rewards=(1, 2, 3, 1000))
    assert advantages == pytest.approx([1 + 0.25 * 2.75, 2 + 0.25 * 3, 3 + 0.5 * 4 - 2, 0])


def test_intrinsic_gae_several_envs_are_independent():
    # env 0 has no reset step, env 1 has one at step 2; the results equal the single-env cases above
    valid = t([[1, 1], [1, 1], [1, 0], [1, 1]])
    rewards = t([[1, 1], [2, 2], [3, 1000], [4, 4]])
    values = t([[0.5, 0.5], [1, 1], [2, 99], [3, 3]])
    advantages, _ = rnd.compute_intrinsic_gae(rewards, values, valid, t([4, 4]), 0.5, 0.5)
    torch.testing.assert_close(advantages, t([[1.703125, 1.8125], [2.8125, 3.25], [3.25, 0], [3, 3]]))


# --- networks and envs --------------------------------------------------------------------------------------


def test_rnd_target_stays_fixed_and_reward_is_half_the_squared_error():
    torch.manual_seed(0)
    model = rnd.RNDModel()
    frames = torch.randn(3, 1, 84, 84)
    model.predictor_loss(frames).mean().backward()
    assert all(p.grad is None and not p.requires_grad for p in model.target.parameters())
    assert all(p.grad is not None for p in model.predictor.parameters())
    with torch.no_grad():
        error = model.predictor(frames) - model.target(frames)
        torch.testing.assert_close(model.intrinsic_reward(frames), (error**2).sum(1) / 2)
        torch.testing.assert_close(model.predictor_loss(frames), (error**2).mean(1))


def test_agent_has_two_value_heads():
    agent = rnd.Agent(18)
    x = torch.zeros((5, 4, 84, 84), dtype=torch.uint8)
    action, logprob, entropy, ext_value, int_value = agent.get_action_and_value(x)
    assert action.shape == logprob.shape == entropy.shape == ext_value.shape == int_value.shape == (5,)
    ext_again, int_again = agent.get_value(x)
    torch.testing.assert_close(ext_again, ext_value)
    torch.testing.assert_close(int_again, int_value)


def test_env_error_accepts_only_envpool_atari_ids():
    assert rnd.env_error("MontezumaRevenge-v5") is None
    assert "CartPole-v1 is not an envpool Atari game" in rnd.env_error("CartPole-v1")
    message = rnd.env_error("ALE/MontezumaRevenge-v5")
    assert message.startswith("ALE/MontezumaRevenge-v5 is not an envpool Atari game; did you mean MontezumaRevenge-v5?")


def test_make_env_settings():
    envs = rnd.make_env("Pong-v5", 1, 3, 100, episodic_life=True)
    config = envs.config
    envs.close()
    assert config["episodic_life"] and config["reward_clip"] and config["max_episode_steps"] == 100
    assert config["repeat_action_probability"] == pytest.approx(0.25) and config["frame_skip"] == 4


# --- the script ----------------------------------------------------------------------------------------------


def test_default_flags_log_every_tag_once_per_iteration_and_resume(workdir):
    results = []  # the run with a checkpoint after each iteration, then its resume for two more (128 more steps)

    def run(*args, cwd):
        results.append(run_script(*args, cwd=cwd))
        return results[-1]

    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 1, workdir, run=run)
    result, resumed = results
    assert "global_step=" in result.stdout and "SPS=" in result.stdout
    assert "sticky-action probability 0.25, episodic life on, time limit 40 agent steps" in result.stdout
    for tag in PPO_TAGS + RND_TAGS:
        steps, values = read_scalars(str(run_dir), tag)
        assert list(steps) == [64, 128, 192, 256], tag
    # both envs' first games are cut at 40 steps, at global step 80 plus 2 for each reset step after a lost life
    # (those do not count as game steps); the resumed run starts new games, cut 80 to 90 steps after its start at 128;
    # the score is the game's own
    steps, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    assert list(lengths) == [40] * 4 and all(step % 2 == 0 for step in steps), list(steps)
    assert all(80 <= step <= 90 for step in steps[:2]) and all(208 <= step <= 218 for step in steps[2:]), list(steps)
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) == 4
    assert not (workdir / "videos").exists()
    # the observation statistics come from the checkpoint, not from more random play; they go on counting frames
    assert "initialising the observation statistics" in result.stdout
    assert "initialising the observation statistics" not in resumed.stdout
    state = read(str(run_dir / "checkpoint.pt"), SCRIPT)["state"]
    assert {"agent", "rnd_model", "optimizer", "obs_rms", "reward_rms", "reward_filter"} <= set(state)
    assert state["obs_rms"][1]["count"] > 256  # the first run's init and rollouts (about 190) and the resumed part's


def test_upstream_smoke_command_runs_as_written(workdir, fork_script):
    # upstream CleanRL's tests/test_envpool.py (../shared/upstream-test-commands.tsv): one batch of 8 envs x 32 steps
    flags = ["--num-envs", 8, "--num-steps", 32, "--num-iterations-obs-norm-init", 1, "--total-timesteps", 256]
    result = fork_script(SCRIPT, *flags, cwd=workdir, timeout=600)
    check_ok(result)
    assert "warning" not in result.stdout and "global_step=256" in result.stdout
    assert list(read_scalars(str(only_run_dir(workdir)), "losses/fwd_loss")[0]) == [256]


def test_a_run_without_a_gradient_step_warns_and_runs(workdir, fork_script):
    result = fork_script(SCRIPT, *TINY, "--total-timesteps", 63, cwd=workdir, timeout=300)  # below one batch of 64 steps
    check_warns_and_runs(
        result, SCRIPT, "--total-timesteps below one batch", cwd=workdir, loss_tag="losses/fwd_loss", alone=True
    )


def test_copied_file_films_saves_evaluates_and_tracks(tmp_path):
    _, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    assert set(checkpoint) == {"model", "args", "rnd_model", "obs_rms", "reward_rms"}
    assert checkpoint["args"]["env_id"] == "MontezumaRevenge-v5"
    assert checkpoint["obs_rms"]["mean"].shape == (1, 84, 84)


IN_0_1 = "--gamma, --int-gamma, --gae-lambda and --update-proportion must be in [0, 1]"
REFUSED = [
    (["--env-id", "CartPole-v1"], "CartPole-v1 is not an envpool Atari game"),
    (["--env-id", "MontezumaRevengeNoFrameskip-v4"], "did you mean MontezumaRevenge-v5?"),
    (["--update-proportion", 1.5], IN_0_1),
    (["--int-gamma", -0.1], IN_0_1),
    (["--max-episode-steps", 0], "--update-epochs, --max-episode-steps must be at least 1"),
    (
        ["--total-timesteps", 0],
        "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs, --max-episode",
    ),
    (["--num-minibatches", 3], "the batch of 16384 steps does not split into --num-minibatches 3"),
]


@pytest.mark.parametrize("flags,message", REFUSED, ids=[" ".join(map(str, f)) for f, _ in REFUSED])
def test_bad_input_is_refused(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)
