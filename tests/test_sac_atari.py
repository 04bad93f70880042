"""sac_atari.py: its pure pieces (soft Q target, actor and temperature losses, target entropy) against
values worked out by hand, then the script run as a user would: a subprocess with a tiny budget, with
--num-envs 2 and --no-autotune, a non-finite loss, every validation case (exit 2, one line, nothing
created), runs without a gradient step (a warning) and CleanRL's own smoke command, with a checkpoint and
a resume (the temperature's state too). The
--capture-video, --save-model, --track and copy-alone paths are shared with the other scripts in
test_scripts.py."""

import math

import pytest
import torch

from cleanrl_utils.checkpoint import read
from cleanrl_utils.report import read_scalars
from conftest import check_checkpoint_and_resume, check_ok, check_refused, check_warns_and_runs, load_script, only_run_dir

SCRIPT = "sac_atari.py"
# 300 random steps first: with seed 1 the first Breakout game ends at env step 291, so an episode is
# logged; then 100 gradient steps, one logging point
TINY = [
    "--total-timesteps", 400, "--learning-starts", 300, "--update-frequency", 1,
    "--buffer-size", 1000, "--batch-size", 8, "--target-network-frequency", 100,
]  # fmt: skip
LOSS_TAGS = [
    "losses/qf1_values",
    "losses/qf2_values",
    "losses/qf1_loss",
    "losses/qf2_loss",
    "losses/qf_loss",
    "losses/actor_loss",
    "losses/alpha",
    "charts/SPS",
]
LN2, LN4 = math.log(2.0), math.log(4.0)


@pytest.fixture(scope="module")
def sac():
    return load_script("sac_atari")


# ---------------------------------------------------------------- soft Q target


def test_soft_q_target_two_actions_by_hand(sac):
    # row 0: non-terminal; row 1: terminal, whose huge next values must not leak in
    rewards = torch.tensor([1.0, 0.5])
    dones = torch.tensor([0.0, 1.0])
    probs = torch.tensor([[0.25, 0.75], [0.5, 0.5]])
    q1 = torch.tensor([[2.0, 1.0], [1e6, 1e6]])
    q2 = torch.tensor([[1.5, 4.0], [1e6, 1e6]])
    target = sac.soft_q_target(rewards, dones, 0.9, probs, probs.log(), q1, q2, 0.5)
    # row 0: min Q = (1.5, 1.0); soft values 1.5 - 0.5 ln 0.25 = 2.1931472 and 1.0 - 0.5 ln 0.75 = 1.1438410;
    # V = 0.25 * 2.1931472 + 0.75 * 1.1438410 = 1.4061676; target = 1 + 0.9 * 1.4061676
    assert target.tolist() == pytest.approx([2.2655508, 0.5], abs=1e-5)


def test_soft_q_target_without_temperature_is_the_expected_min_q(sac):
    # a truncated transition is stored with done 0: it bootstraps like any non-terminal one
    probs = torch.tensor([[0.2, 0.8]])
    q1 = torch.tensor([[3.0, -1.0]])
    q2 = torch.tensor([[2.0, 5.0]])
    target = sac.soft_q_target(torch.tensor([0.0]), torch.tensor([0.0]), 1.0, probs, probs.log(), q1, q2, 0.0)
    assert target.tolist() == pytest.approx([0.2 * 2.0 + 0.8 * -1.0])


def test_soft_q_target_of_a_uniform_policy_adds_alpha_log_n(sac):
    # uniform over 2 actions: V = mean min Q + α ln 2
    probs = torch.full((1, 2), 0.5)
    q = torch.tensor([[1.0, 3.0]])
    target = sac.soft_q_target(torch.tensor([0.0]), torch.tensor([0.0]), 0.5, probs, probs.log(), q, q, 0.2)
    assert target.tolist() == pytest.approx([0.5 * (2.0 + 0.2 * LN2)])


# ---------------------------------------------------------------- actor loss


def test_actor_loss_by_hand_is_a_mean_over_batch_and_actions(sac):
    probs = torch.tensor([[0.5, 0.5]])
    q1 = torch.tensor([[1.0, 2.0]])
    q2 = torch.tensor([[3.0, 0.0]])
    loss = sac.actor_loss(probs, probs.log(), q1, q2, 0.2)
    # min Q = (1, 0); terms 0.5 (0.2 ln 0.5 - 1) = -0.5693147 and 0.5 (0.2 ln 0.5 - 0) = -0.0693147;
    # CleanRL's mean over the 2 actions: half of the per-state expectation -0.6386294
    assert loss.item() == pytest.approx(-0.3193147, abs=1e-6)


def test_actor_loss_pushes_probability_towards_the_better_action(sac):
    logits = torch.zeros(1, 2, requires_grad=True)
    q = torch.tensor([[0.0, 1.0]])
    loss = sac.actor_loss(torch.softmax(logits, 1), torch.log_softmax(logits, 1), q, q, 0.1)
    loss.backward()
    assert logits.grad[0, 1] < 0 < logits.grad[0, 0]


# ---------------------------------------------------------------- temperature


def test_target_entropy_for_four_actions(sac):
    assert sac.target_entropy(4, 0.89) == pytest.approx(0.89 * LN4)
    assert sac.target_entropy(4, 0.89) == pytest.approx(1.2338020, abs=1e-6)
    assert sac.target_entropy(4, 1.0) == pytest.approx(LN4)  # the uniform policy's entropy


def test_alpha_grows_when_the_entropy_is_below_the_target(sac):
    log_alpha = torch.zeros(1, requires_grad=True)
    probs = torch.tensor([[0.97, 0.01, 0.01, 0.01]])
    loss = sac.alpha_loss(log_alpha, probs, probs.log(), sac.target_entropy(4, 0.89))
    # entropy H = -(0.97 ln 0.97 + 3 * 0.01 ln 0.01) = 0.1677006; loss = α (H - 1.2338020) / 4 at α = 1
    assert loss.item() == pytest.approx(-0.2665254, abs=1e-5)
    loss.backward()
    assert log_alpha.grad.item() == pytest.approx(-0.2665254, abs=1e-5)  # d/d log α of α(...) is the loss
    with torch.no_grad():
        log_alpha -= 0.1 * log_alpha.grad  # a gradient-descent step raises α
    assert log_alpha.item() > 0


def test_alpha_shrinks_when_the_entropy_is_above_the_target(sac):
    log_alpha = torch.full((1,), math.log(0.5), requires_grad=True)
    probs = torch.full((1, 4), 0.25)  # entropy ln 4 above 0.89 ln 4
    loss = sac.alpha_loss(log_alpha, probs, probs.log(), sac.target_entropy(4, 0.89))
    # α (H - target) / |A| = 0.5 * 0.11 ln 4 / 4
    assert loss.item() == pytest.approx(0.5 * 0.11 * LN4 / 4, abs=1e-6)
    loss.backward()
    assert log_alpha.grad.item() > 0


def test_alpha_loss_moves_only_log_alpha(sac):
    logits = torch.tensor([[1.0, -1.0, 0.5]], requires_grad=True)
    log_alpha = torch.zeros(1, requires_grad=True)
    sac.alpha_loss(log_alpha, torch.softmax(logits, 1), torch.log_softmax(logits, 1), 1.0).backward()
    assert logits.grad is None and log_alpha.grad is not None


def test_steps_crossed_counts_cadences_whatever_the_vector_step(sac):
    assert sac.steps_crossed(7999, 8000, 8000) == 1
    assert sac.steps_crossed(7998, 8002, 8000) == 1
    assert sac.steps_crossed(0, 8, 4) == 2


# ---------------------------------------------------------------- the script as a user runs it


def test_default_flags(workdir, fork_script):
    result = fork_script(SCRIPT, *TINY, cwd=workdir, timeout=600)
    check_ok(result)
    assert "global_step=400, " in result.stdout and "SPS=" in result.stdout
    assert "replay buffer: 1000 frames " in result.stdout and "GiB when full" in result.stdout
    run_dir = only_run_dir(workdir)
    for tag in [*LOSS_TAGS, "losses/alpha_loss"]:
        steps, _ = read_scalars(str(run_dir), tag)
        assert list(steps) == [400], tag  # update 100 of 100, at the last env step
    _, alphas = read_scalars(str(run_dir), "losses/alpha")
    assert 0 < alphas[0] < 1  # log α starts at 0 and is tuned
    for tag in ("charts/episodic_return", "charts/episodic_length"):
        assert len(read_scalars(str(run_dir), tag)[0]) >= 1, tag
    assert not (workdir / "videos").exists()


def test_two_envs_and_a_fixed_temperature(workdir, fork_script):
    # 100 env steps past learning_starts, two at a time: still 100 updates, one logging point
    result = fork_script(SCRIPT, *TINY, "--num-envs", 2, "--no-autotune", "--alpha", 0.1, cwd=workdir, timeout=600)
    check_ok(result)
    run_dir = only_run_dir(workdir)
    for tag in LOSS_TAGS:
        steps, _ = read_scalars(str(run_dir), tag)
        assert list(steps) == [400], tag
    _, alphas = read_scalars(str(run_dir), "losses/alpha")
    assert alphas[0] == pytest.approx(0.1)
    assert len(read_scalars(str(run_dir), "losses/alpha_loss")[0]) == 0
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    # the default cadence writes a checkpoint at the end; a fixed temperature is --alpha's, not training state
    saved = read(str(run_dir / "checkpoint.pt"), SCRIPT)
    assert saved["finished"] and not {"log_alpha", "alpha", "a_optimizer"} & set(saved["state"])


def test_non_finite_loss_stops_the_run_with_its_step(workdir, fork_script):
    # the largest learning rate Adam accepts blows the critics' weights, then their values, past float32
    result = fork_script(SCRIPT, *TINY, "--q-lr", 3e37, cwd=workdir, timeout=600)
    assert result.returncode == 1, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "non-finite loss" in x]
    assert line.startswith("sac_atari.py: non-finite loss at global_step ") and line.endswith("; stopping")
    assert only_run_dir(workdir).exists()


SIZES = "--num-envs, --buffer-size, --batch-size, --update-frequency, --target-network-frequency must be at least 1"
BAD = [
    (["--total-timesteps", 0], f"--total-timesteps, {SIZES}"),
    (["--total-timesteps", -5], f"--total-timesteps, {SIZES}"),
    (["--seed", -1], "--seed must be in [0, 2**32 - 1], got -1"),
    (["--exp-name", "sweep/a"], "--exp-name 'sweep/a' must be a folder name"),
    (["--exp-name", "x" * 300], "must be a folder name: up to 150 letters"),
    (["--num-envs", 0], SIZES),
    (["--buffer-size", 0], SIZES),
    (["--batch-size", 0], SIZES),
    (["--update-frequency", 0], SIZES),
    (["--target-network-frequency", 0], SIZES),
    (["--buffer-size", 19, "--num-envs", 2], "--buffer-size 19 leaves a sub-env fewer than 10 frames"),
    (["--gamma", 1.5], "--gamma must be in [0, 1]"),
    (["--policy-lr", 0], "--policy-lr and --q-lr must be positive and finite in float32, got 0.0 and 0.0003"),
    (["--policy-lr", "nan"], "--policy-lr and --q-lr must be positive and finite in float32"),
    (["--q-lr", -1e-4], "--policy-lr and --q-lr must be positive and finite in float32"),
    (["--q-lr", 1e38], "--policy-lr and --q-lr must be positive and finite in float32, got 0.0003 and 1e+38"),
    (["--env-id", "CartPole-v1"], "CartPole-v1 is not an ale-py Atari game"),
    (["--env-id", "BreakoutNoFrameskip-v9"], "doesn't exist"),
    (["--env-id", "no_such_module:Foo-v0"], "cannot make 'no_such_module:Foo-v0': No module named 'no_such_module'"),
    (["--buffer-size", 10**13], "more than this machine's memory; lower --buffer-size"),
]


@pytest.mark.parametrize("flags,message", BAD, ids=[" ".join(map(str, f))[:60] for f, _ in BAD])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


@pytest.mark.parametrize(
    "flags",
    [
        ["--total-timesteps", 20, "--learning-starts", 20],
        # 23 steps run: past --learning-starts 20, but gradient steps come at multiples of 8 (the next at 24)
        ["--total-timesteps", 23, "--learning-starts", 20, "--update-frequency", 8],
        ["--total-timesteps", 21, "--learning-starts", 20, "--num-envs", 2],  # 20 steps run (whole vector steps)
    ],
)
def test_a_run_without_a_gradient_step_runs_and_warns(flags, workdir, fork_script):
    result = fork_script(SCRIPT, *flags, "--buffer-size", 100, cwd=workdir, timeout=600)
    check_warns_and_runs(result, SCRIPT, "--learning-starts 20", cwd=workdir, loss_tag="losses/qf_loss")


def test_cleanrls_own_smoke_command_runs_checkpoints_and_resumes(workdir, fork_script):
    # as upstream's tests/test_atari_gymnasium.py runs it (a gradient step costs ~0.4 s), with a checkpoint at step 8 and
    # at the end, and a resume to step 32: log α, α and their Adam state go on where they were
    flags = ["--learning-starts", 10, "--total-timesteps", 16, "--buffer-size", 10, "--batch-size", 4]
    run = lambda *args, **kwargs: fork_script(*args, timeout=600, **kwargs)  # noqa: E731
    run_dir = check_checkpoint_and_resume(SCRIPT, flags, 8, workdir, run=run)
    saved = read(str(run_dir / "checkpoint.pt"), SCRIPT)
    (kind, log_alpha), (_, alpha) = saved["state"]["log_alpha"], saved["state"]["alpha"]
    assert kind == "tensor" and float(alpha) == pytest.approx(math.exp(float(log_alpha))) and float(log_alpha) != 0
    assert saved["state"]["num_updates"][1] == 6  # every 4 steps past 10: at 12 and 16, then 20, 24, 28 and 32
