"""c51_atari_jax.py, the JAX version of c51_atari.py. Parity with the twin: the categorical projection (atoms
pushed past v_min / v_max, terminations, γ 0 and 1, atoms landing exactly on support points) and the ε schedule
give the same numbers, the Flax network gives the torch network's greedy actions and return distributions once
the torch weights are copied in, and the frame replay memory samples exactly what the twin's samples. Then, run
as a user would: a default run (checkpointed, then resumed) logs every tag at its cadence and gets its train state
back, the same run copied alone with every output path logs the same values and leaves a Flax checkpoint, and bad
input is refused before anything is made."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from budgets import VALUE_BASED_TINY
from cleanrl_utils.report import read_scalars
from conftest import check_checkpoint_and_resume, check_refused, check_warns_and_runs, load_script, run_copied_alone
from jax_parity import check_restored_jax_state, fill_both, nature_cnn_params

SCRIPT = "c51_atari_jax.py"
TINY = VALUE_BASED_TINY["c51_atari.py"]  # the twin's budget: 400 steps, an update per step from step 200
TAGS = ["losses/loss", "losses/q_values", "charts/epsilon", "charts/SPS"]
jax_c51 = load_script("c51_atari_jax")
torch_c51 = load_script("c51_atari")
jitted_projection = jax.jit(jax_c51.project_distribution)  # as the update uses it (and one compilation per shape)


def both_projections(next_pmfs, rewards, dones, gamma, atoms):
    """The twin's projection and ours of the same float32 inputs, as numpy arrays."""
    args = [np.asarray(next_pmfs, np.float32), np.asarray(rewards, np.float32), np.asarray(dones, np.float32)]
    atoms = np.asarray(atoms, np.float32)
    expected = torch_c51.project_distribution(*map(torch.tensor, args), gamma, torch.tensor(atoms)).numpy()
    got = np.asarray(jitted_projection(*map(jnp.asarray, args), gamma, jnp.asarray(atoms)))
    assert got.dtype == np.float32 and got.shape == expected.shape
    return got, expected


@pytest.mark.parametrize("gamma", [0.0, 0.5, 0.99, 1.0])
def test_projection_matches_the_twin(gamma):
    rng = np.random.default_rng(int(gamma * 100))
    batch = 64
    logits = rng.normal(0, 2, (batch, 51))
    next_pmfs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    # rewards up to ±15 push whole distributions beyond the support [-10, 10] at both ends
    rewards = rng.uniform(-15, 15, batch)
    dones = rng.random(batch) < 0.3  # terminations; truncated transitions have done 0
    atoms = torch.linspace(-10, 10, 51).numpy()  # the twin's support, given to both
    got, expected = both_projections(next_pmfs, rewards, dones, gamma, atoms)
    # XLA turns x / delta_z into x * (1 / delta_z), so an atom's position on the support can differ from torch's
    # by one float32 ulp (3.8e-6 near position 50), and as much of its mass moves to the other neighbour
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.sum(1), 1.0, rtol=1e-5)


def test_projection_matches_the_twin_where_atoms_land_on_support_points_and_beyond():
    # support [-2, -1, 0, 1, 2]: whole-number rewards with γ 1 put every shifted atom exactly on a support
    # point or past an end; γ 0 and terminations collapse the mass onto the reward
    atoms = [-2.0, -1.0, 0.0, 1.0, 2.0]
    uniform = np.full((1, 5), 0.2)
    for reward in (-5.0, -2.0, -1.0, 0.0, 1.0, 1.5, 2.0, 5.0):
        for gamma, done in ((1.0, 0.0), (0.0, 0.0), (1.0, 1.0), (0.5, 0.0)):
            got, expected = both_projections(uniform, [reward], [done], gamma, atoms)
            np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    got, _ = both_projections(uniform, [1.0], [0.0], 1.0, atoms)
    np.testing.assert_allclose(got[0], [0, 0.2, 0.2, 0.2, 0.4], atol=1e-7)


def test_epsilon_schedule_matches_the_twin():
    for start_e, end_e, duration in [(1.0, 0.01, 1_000_000.0), (1.0, 0.05, 1000), (0.0, 1.0, 4), (1.0, 0.01, 0.0)]:
        for t in (0, 1, 2, 500, 999, 1000, 10**6, 10**7):
            assert jax_c51.epsilon_schedule(start_e, end_e, duration, t) == torch_c51.epsilon_schedule(
                start_e, end_e, duration, t
            )


def test_network_gives_the_twins_actions_and_distributions_with_its_weights():
    torch.manual_seed(0)
    torch_q = torch_c51.QNetwork(6, n_atoms=11, v_min=-5.0, v_max=5.0)
    flax_q = jax_c51.QNetwork(6, n_atoms=11, v_min=-5.0, v_max=5.0)
    np.testing.assert_allclose(np.asarray(flax_q.atoms), torch_q.atoms.numpy(), rtol=1e-6, atol=1e-6)
    obs = np.random.default_rng(0).integers(0, 256, (5, 4, 84, 84), dtype=np.uint8)
    params = nature_cnn_params(torch_q)
    template = jax.eval_shape(flax_q.init, jax.random.PRNGKey(0), obs)
    assert jax.tree_util.tree_map(lambda x: x.shape, template) == jax.tree_util.tree_map(np.shape, params)
    get_action = jax.jit(lambda params, obs, action: flax_q.apply(params, obs, action, method=jax_c51.QNetwork.get_action))
    chosen = np.array([0, 5, 2, 3, 1])
    with torch.no_grad():
        expected_greedy, expected_greedy_pmfs = torch_q.get_action(torch.as_tensor(obs))
        _, expected_pmfs = torch_q.get_action(torch.as_tensor(obs), torch.as_tensor(chosen))
    greedy, greedy_pmfs = get_action(params, obs, None)
    _, pmfs = get_action(params, obs, chosen)
    assert np.asarray(greedy).tolist() == expected_greedy.tolist()
    np.testing.assert_allclose(np.asarray(greedy_pmfs), expected_greedy_pmfs.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(pmfs), expected_pmfs.numpy(), rtol=1e-5, atol=1e-6)


def test_replay_memory_samples_what_the_twins_samples():
    twin = torch_c51.ReplayBuffer(100, 2, (3, 3), 4, torch.device("cpu"))
    rb = jax_c51.ReplayBuffer(100, 2, (3, 3), 4)
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
same_worker = pytest.mark.xdist_group("c51_atari_jax_default_run")


@same_worker
def test_default_flags_log_every_tag_at_its_cadence(default_run):
    # 200 updates (steps 201..400), logged every 100; resumed, an update a step to 800
    for tag in TAGS:
        assert list(read_scalars(str(default_run), tag)[0]) == [300, 400, 500, 600, 700, 800], tag
    assert len(read_scalars(str(default_run), "charts/episodic_return")[0]) >= 1


@same_worker
def test_copied_file_runs_every_output_path_and_logs_the_default_runs_values(default_run, tmp_path):
    run_dir, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    params = checkpoint["model"]["params"]
    assert sorted(params) == ["Conv_0", "Conv_1", "Conv_2", "Dense_0", "Dense_1"]
    assert params["Dense_1"]["kernel"].shape == (512, 4 * 51)  # Breakout's 4 actions x 51 atoms
    saved = checkpoint["args"]
    assert saved["exp_name"] == "c51_atari_jax" and (saved["n_atoms"], saved["v_min"], saved["v_max"]) == (51, -10, 10)
    # same seed on the CPU, same numbers: videos, W&B, saving and checkpoints change nothing in training
    for tag in ["losses/loss", "losses/q_values", "charts/episodic_return"]:
        got, default = read_scalars(str(run_dir), tag), read_scalars(str(default_run), tag)
        first = default[0] <= 400  # the default run's points before its resume
        np.testing.assert_array_equal(got[1], default[1][first], tag)


@same_worker
def test_a_resumed_run_gets_its_train_state_back_leaf_by_leaf(default_run):
    check_restored_jax_state(SCRIPT, default_run, 1200, default_run.parent.parent, "q_state")


BAD = [
    (["--env-id", "CartPole-v1"], "CartPole-v1 is not an ale-py Atari game"),
    (["--n-atoms", 1], "--n-atoms must be at least 2"),
    (["--v-min", 10, "--v-max", -10], "--n-atoms must be at least 2 and --v-min below --v-max"),
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
    check_warns_and_runs(result, SCRIPT, "--learning-starts 16", cwd=workdir, loss_tag="losses/loss", alone=True)
    assert "replay buffer: 100 frames " in result.stdout and "GiB when full" in result.stdout
