"""dqn_atari_jax.py, the JAX version of dqn_atari.py. Parity with the twin: the TD target and ε schedule give
the same numbers, the Flax Q-network gives the torch Q-network's Q-values once the torch weights are copied in
(so the architecture is the twin's, layer for layer), and the frame replay memory samples exactly what the
twin's samples. Then, run as a user would: a default run (checkpointed, then resumed) logs every tag at its
cadence and gets its train state back, the same run copied alone with every output path logs the same values
(same seed, same numbers) and leaves a Flax checkpoint with the layer names QDagger's JAX teacher loader reads,
and bad input is refused before anything is made."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from budgets import VALUE_BASED_TINY
from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_refused,
    check_warns_and_runs,
    load_script,
    run_copied_alone,
)
from jax_parity import check_restored_jax_state, fill_both, nature_cnn_params

SCRIPT = "dqn_atari_jax.py"
TINY = VALUE_BASED_TINY["dqn_atari.py"]  # the twin's budget: 400 steps, an update per step from step 200
TAGS = ["losses/td_loss", "losses/q_values", "charts/epsilon", "charts/SPS"]
jax_dqn = load_script("dqn_atari_jax")
torch_dqn = load_script("dqn_atari")


def test_td_target_matches_the_twin():
    rng = np.random.default_rng(0)
    rewards = rng.uniform(-1, 1, 64).astype(np.float32)
    next_q_max = rng.normal(0, 10, 64).astype(np.float32)
    # terminations zero the bootstrap; truncated and ordinary transitions (done 0) keep it
    dones = (rng.random(64) < 0.3).astype(np.float32)
    for gamma in (0.0, 0.5, 0.99, 1.0):
        expected = torch_dqn.td_target(torch.tensor(rewards), torch.tensor(next_q_max), torch.tensor(dones), gamma)
        got = jax_dqn.td_target(jnp.asarray(rewards), jnp.asarray(next_q_max), jnp.asarray(dones), gamma)
        np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=1e-6, atol=1e-6)
    assert np.asarray(jax_dqn.td_target(rewards, next_q_max, np.ones(64, np.float32), 0.99)).tolist() == rewards.tolist()


def test_epsilon_schedule_matches_the_twin():
    for start_e, end_e, duration in [(1.0, 0.01, 1_000_000.0), (1.0, 0.05, 1000), (0.0, 1.0, 4), (1.0, 0.01, 0.0)]:
        for t in (0, 1, 2, 500, 999, 1000, 10**6, 10**7):
            assert jax_dqn.epsilon_schedule(start_e, end_e, duration, t) == torch_dqn.epsilon_schedule(
                start_e, end_e, duration, t
            )


def test_q_network_gives_the_twins_q_values_with_its_weights():
    torch.manual_seed(0)
    torch_q = torch_dqn.QNetwork(6)
    flax_q = jax_dqn.QNetwork(action_dim=6)
    obs = np.random.default_rng(0).integers(0, 256, (5, 4, 84, 84), dtype=np.uint8)
    params = nature_cnn_params(torch_q)
    # the copied weights fill Flax's own layers exactly: same names, same shapes
    template = jax.eval_shape(flax_q.init, jax.random.PRNGKey(0), obs)
    assert jax.tree_util.tree_map(lambda x: x.shape, template) == jax.tree_util.tree_map(np.shape, params)
    assert params["params"]["Dense_1"]["kernel"].shape == (512, 6)
    with torch.no_grad():
        expected = torch_q(torch.as_tensor(obs)).numpy()
    got = np.asarray(jax.jit(flax_q.apply)(params, obs))
    assert got.dtype == np.float32 and got.shape == (5, 6)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert (got.argmax(1) == expected.argmax(1)).all()


def test_replay_memory_samples_what_the_twins_samples():
    twin = torch_dqn.ReplayBuffer(100, 2, (3, 3), 4, torch.device("cpu"))
    rb = jax_dqn.ReplayBuffer(100, 2, (3, 3), 4)
    fill_both([twin, rb])
    np.random.seed(3)
    expected = twin.sample(64)
    np.random.seed(3)
    got = rb.sample(64)
    for g, e in zip(got, expected):
        assert isinstance(g, np.ndarray) and g.dtype == e.numpy().dtype
        np.testing.assert_array_equal(g, e.numpy())


@pytest.fixture(scope="module")
def default_run(tmp_path_factory, fork_script):
    """A tiny run with the default flags, checkpointed every 200 steps, then resumed to twice its budget (conftest's
    check_checkpoint_and_resume): its run folder."""
    folder = tmp_path_factory.mktemp("default")
    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 200, folder, run=fork_script)
    assert not (folder / "videos").exists()
    return run_dir


# the two tests that share the default run, on one xdist worker so that it runs once
same_worker = pytest.mark.xdist_group("dqn_atari_jax_default_run")


@same_worker
def test_default_flags_log_every_tag_at_its_cadence(default_run):
    # 200 updates (steps 201..400), logged every 100; resumed, an update a step to 800
    for tag in TAGS:
        assert list(read_scalars(str(default_run), tag)[0]) == [300, 400, 500, 600, 700, 800], tag
    assert len(read_scalars(str(default_run), "charts/episodic_return")[0]) >= 1


@same_worker
def test_copied_file_runs_every_output_path_and_logs_the_default_runs_values(default_run, tmp_path):
    run_dir, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    # the layout QDagger's JAX teacher loader reads
    params = checkpoint["model"]["params"]
    assert sorted(params) == ["Conv_0", "Conv_1", "Conv_2", "Dense_0", "Dense_1"]
    assert params["Conv_0"]["kernel"].shape == (8, 8, 4, 32) and params["Dense_0"]["kernel"].shape == (3136, 512)
    assert params["Dense_1"]["kernel"].shape == (512, 4)  # Breakout's 4 actions
    assert checkpoint["args"]["exp_name"] == "dqn_atari_jax" and checkpoint["args"]["gamma"] == 0.99
    # same seed on the CPU, same numbers: videos, W&B, saving and checkpoints change nothing in training
    for tag in ["losses/td_loss", "losses/q_values", "charts/episodic_return"]:
        got, default = read_scalars(str(run_dir), tag), read_scalars(str(default_run), tag)
        first = default[0] <= 400  # the default run's points before its resume
        np.testing.assert_array_equal(got[1], default[1][first], tag)


@same_worker
def test_a_resumed_run_gets_its_train_state_back_leaf_by_leaf(default_run):
    check_restored_jax_state(SCRIPT, default_run, 1200, default_run.parent.parent, "q_state")


def test_non_finite_loss_stops_the_run_with_its_step(workdir, fork_script):
    # the largest learning rate Adam accepts throws the weights, then the Q-values, past float32
    flags = ["--total-timesteps", 40, "--learning-starts", 8, "--train-frequency", 1, "--buffer-size", 100]
    result = fork_script(SCRIPT, *flags, "--batch-size", 4, "--learning-rate", 3e37, cwd=workdir, timeout=600)
    assert result.returncode == 1, result.stderr
    (line,) = [x for x in result.stderr.splitlines() if "non-finite loss" in x]
    assert line.startswith(f"{SCRIPT}: non-finite loss at global_step ") and line.endswith("; stopping")


BAD = [
    (["--env-id", "CartPole-v1"], "CartPole-v1 is not an ale-py Atari game"),
    (["--learning-rate", 1e38], "--learning-rate must be positive and finite in float32, got 1e+38"),
    (["--buffer-size", 20, "--num-envs", 4], "--buffer-size 20 leaves a sub-env fewer than 10 frames"),
    (["--buffer-size", 10**13], "more than this machine's memory; lower --buffer-size"),
    (["--total-timesteps", -1], "--total-timesteps, --num-envs, --buffer-size, --batch-size, --train-frequency"),
]


@pytest.mark.parametrize("flags,message", BAD, ids=[" ".join(map(str, f)) for f, _ in BAD])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir)
    check_refused(result, SCRIPT, message, workdir)


def test_a_run_without_a_gradient_step_runs_with_one_warning(workdir, fork_script):
    flags = ["--total-timesteps", 16, "--learning-starts", 16, "--buffer-size", 100]
    result = fork_script(SCRIPT, *flags, cwd=workdir, timeout=600)
    check_warns_and_runs(result, SCRIPT, "--learning-starts 16", cwd=workdir, loss_tag="losses/td_loss", alone=True)
    assert "replay buffer: 100 frames " in result.stdout and "GiB when full" in result.stdout
