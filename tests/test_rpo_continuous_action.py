"""rpo_continuous_action.py: the mean perturbation (update only), a tiny run with a checkpoint and a resume, alpha 0 is
PPO, validation."""

import math

import numpy as np
import pytest
import torch
from test_ppo_continuous_action import run_without_frames
from torch.distributions.normal import Normal

from cleanrl_utils.report import read_scalars
from conftest import PPO_TAGS, check_checkpoint_and_resume, check_ok, check_refused, load_script, only_run_dir

rpo = load_script("rpo_continuous_action")

TINY = ["--total-timesteps", 256, "--num-steps", 128, "--num-minibatches", 4]


def test_perturb_mean_keeps_shape_and_stays_within_alpha():
    mean = torch.randn(256, 6)
    perturbed = rpo.perturb_mean(mean, 0.5, generator=torch.Generator().manual_seed(0))
    assert perturbed.shape == mean.shape and perturbed.dtype == mean.dtype
    z = perturbed - mean
    assert (z.abs() <= 0.5 + 1e-6).all()
    # it uses the whole interval, centred on 0
    assert z.min() < -0.45 and z.max() > 0.45
    assert abs(z.mean().item()) < 0.05


def test_perturb_mean_draws_independently_per_row_and_dimension():
    mean = torch.zeros(64, 4)
    z = rpo.perturb_mean(mean, 1.0, generator=torch.Generator().manual_seed(0))
    assert z.unique().numel() == z.numel()  # one draw per element: no row or column shares a value
    assert not torch.equal(z[0], z[1]) and not torch.equal(z[:, 0], z[:, 1])
    # no correlation between dimensions beyond sampling noise (64 rows: |r| well below 0.5)
    corr = torch.corrcoef(z.T)
    assert (corr - torch.eye(4)).abs().max() < 0.5


def test_perturb_mean_is_reproducible_with_a_generator():
    mean = torch.randn(8, 3)
    first = rpo.perturb_mean(mean, 0.3, generator=torch.Generator().manual_seed(7))
    again = rpo.perturb_mean(mean, 0.3, generator=torch.Generator().manual_seed(7))
    other = rpo.perturb_mean(mean, 0.3, generator=torch.Generator().manual_seed(8))
    assert torch.equal(first, again) and not torch.equal(first, other)


def test_perturb_mean_with_alpha_0_is_the_mean_and_draws_nothing():
    mean = torch.randn(16, 3)
    state = torch.get_rng_state()
    assert torch.equal(rpo.perturb_mean(mean, 0.0), mean)
    assert torch.equal(torch.get_rng_state(), state)


def agents(alpha, obs_dim=5, action_dim=3):
    """An RPO agent with `alpha` and one with alpha 0 sharing its weights."""
    torch.manual_seed(0)
    agent = rpo.Agent(obs_dim, action_dim, alpha)
    plain = rpo.Agent(obs_dim, action_dim, 0.0)
    plain.load_state_dict(agent.state_dict())
    with torch.no_grad():
        agent.actor_logstd.fill_(-1.0)
        plain.actor_logstd.fill_(-1.0)
    return agent, plain


def test_update_scores_the_stored_action_under_a_perturbed_mean():
    agent, plain = agents(0.5)
    x, action = torch.randn(32, 5), torch.randn(32, 3)
    with torch.no_grad():
        _, logprob, entropy, value = agent.get_action_and_value(x, action)
        _, plain_logprob, plain_entropy, plain_value = plain.get_action_and_value(x, action)
        assert (logprob != plain_logprob).all()
        torch.testing.assert_close(entropy, plain_entropy)  # the std is not perturbed
        torch.testing.assert_close(value, plain_value)

        # exactly Normal(mean + z, std) with z the draw perturb_mean makes from the same random stream
        torch.manual_seed(3)
        _, logprob, _, _ = agent.get_action_and_value(x, action)
        torch.manual_seed(3)
        mean = rpo.perturb_mean(agent.actor_mean(x), 0.5)
        expected = Normal(mean, agent.actor_logstd.exp()).log_prob(action).sum(1)
    torch.testing.assert_close(logprob, expected)


def test_rollout_samples_from_the_unperturbed_policy():
    agent, _ = agents(10.0)  # a perturbation this wide would show in every log-prob
    x = torch.randn(32, 5)
    with torch.no_grad():
        torch.manual_seed(5)
        action, logprob, _, _ = agent.get_action_and_value(x)
        probs = Normal(agent.actor_mean(x), agent.actor_logstd.exp().expand(32, 3))
        torch.manual_seed(5)
        expected_action = probs.sample()
    torch.testing.assert_close(action, expected_action)
    torch.testing.assert_close(logprob, probs.log_prob(action).sum(1))


def test_default_flags_log_the_ppo_tags_then_a_checkpoint_and_resume(workdir, fork_script):
    # two iterations with a checkpoint after each, then two more from the last one with --resume
    run_dir = check_checkpoint_and_resume("rpo_continuous_action.py", TINY, 1, workdir, run=fork_script)
    assert run_dir.name.startswith("HalfCheetah-v5__rpo_continuous_action__1__")
    for tag in PPO_TAGS:
        assert list(read_scalars(str(run_dir), tag)[0]) == [128, 256, 384, 512], tag  # one point per iteration, once


def test_alpha_0_logs_exactly_what_ppo_continuous_action_logs(tmp_path, fork_script):
    logged = {}
    for script, flags in [("ppo_continuous_action.py", []), ("rpo_continuous_action.py", ["--rpo-alpha", 0])]:
        cwd = tmp_path / script
        cwd.mkdir()
        check_ok(fork_script(script, *TINY, "--env-id", "Hopper-v5", *flags, cwd=cwd, timeout=600))
        run_dir = only_run_dir(cwd)
        # every learning scalar, not the wall-clock speed
        tags = [tag for tag in PPO_TAGS if tag != "charts/SPS"] + ["charts/episodic_return"]
        logged[script] = {tag: read_scalars(str(run_dir), tag) for tag in tags}
    for tag, (steps, values) in logged["ppo_continuous_action.py"].items():
        assert len(steps) > 0, tag  # both updates, and Hopper ends episodes within 256 steps
        rpo_steps, rpo_values = logged["rpo_continuous_action.py"][tag]
        np.testing.assert_array_equal(rpo_steps, steps, err_msg=tag)
        np.testing.assert_array_equal(rpo_values, values, err_msg=tag)


def test_saved_model_keeps_rpo_alpha_and_evaluates(workdir, fork_script):
    flags = ["--env-id", "InvertedPendulum-v5", "--rpo-alpha", 0.25, "--save-model"]
    check_ok(fork_script("rpo_continuous_action.py", *TINY, *flags, cwd=workdir, timeout=600))
    run_dir = only_run_dir(workdir)
    model_path = run_dir / "rpo_continuous_action.cleanrl_model"
    checkpoint = torch.load(model_path, map_location="cpu", weights_only=True)
    assert checkpoint["args"]["rpo_alpha"] == 0.25
    assert len(read_scalars(str(run_dir), "eval/episodic_return")[0]) == 10
    returns = rpo.evaluate(str(model_path), 2, "test-eval", "cpu")
    assert len(returns) == 2 and all(math.isfinite(r) for r in returns)


CASES = [
    (["--rpo-alpha", -0.1], "--rpo-alpha must be a finite number >= 0, got -0.1"),
    (["--rpo-alpha", "nan"], "--rpo-alpha must be a finite number >= 0, got nan"),
    (["--rpo-alpha", "inf"], "--rpo-alpha must be a finite number >= 0, got inf"),
    (["--rpo-alpha", 1e39], "--rpo-alpha must be a finite number >= 0, got 1e+39"),  # inf in float32
    # carried over from ppo_continuous_action.py
    (["--env-id", "CartPole-v1"], "CartPole-v1 has Discrete(2) actions; rpo_continuous_action.py supports 1-D Box ones"),
    (["--env-id", "HalfCheetah-v99"], "doesn't exist"),
    (["--num-minibatches", 3], "does not split into --num-minibatches 3"),
    (["--total-timesteps", -5], "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs must be"),
    (["--gamma", 1.5], "--gamma and --gae-lambda must be in [0, 1]"),
    (["--learning-rate", 0], "--learning-rate must be positive and finite in float32, got 0.0"),
    (["--upload-model", "--no-save-model"], "--upload-model pushes the saved model and its evaluation; add --save-model"),
]


@pytest.mark.parametrize("flags,message", CASES, ids=[" ".join(map(str, f)) for f, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    script = "rpo_continuous_action.py"
    result = fork_script(script, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    assert result.returncode == 2, result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith(script)]
    assert len(error_lines) == 1 and message in error_lines[0], result.stderr
    # MuJoCo logs HalfCheetah's deprecation warning to MUJOCO_LOG.TXT whenever the env is made (to check its spaces)
    left = sorted(p.name for p in workdir.iterdir() if p.name != "MUJOCO_LOG.TXT")
    assert left == [], "a rejected run must leave nothing behind"


def test_capture_video_on_an_env_without_frames_is_refused_by_name(workdir, tmp_path_factory):
    result = run_without_frames("rpo_continuous_action.py", workdir, tmp_path_factory)
    check_refused(result, "rpo_continuous_action.py", "no_frames:NoFrames-v0 renders no video", workdir)
