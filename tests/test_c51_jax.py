"""c51_jax.py, the JAX version of c51.py: a tiny run with its default flags (checkpointed and resumed) and every
output path, validation refusals, and its categorical projection and network against c51.py's on the same inputs
(issue 8's parity)."""

import numpy as np
import pytest
import torch

from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_refused,
    check_warns_and_runs,
    load_script,
    run_copied_alone,
    run_script,
)
from jax_parity import check_restored_jax_state, no_frames_env

SCRIPT = "c51_jax.py"
# c51.py's tiny budget (tests/budgets.py): 500 gradient steps, one per env step past step 200
TINY = ["--total-timesteps", 700, "--learning-starts", 200, "--train-frequency", 1, "--buffer-size", 500, "--batch-size", 32]
TAGS = ["losses/loss", "losses/q_values", "charts/epsilon", "charts/SPS"]


@pytest.fixture(scope="module")
def jax_c51():
    return load_script("c51_jax")


@pytest.fixture(scope="module")
def torch_c51():
    return load_script("c51")


# the two tests that share the default run, on one xdist worker so that it runs once
same_worker = pytest.mark.xdist_group("c51_jax_default_run")


@pytest.fixture(scope="module")
def default_run(tmp_path_factory, fork_script):
    """The run directory of a tiny run with the default flags, checkpointed every 300 steps, then resumed to twice its
    budget (conftest's check_checkpoint_and_resume)."""
    workdir = tmp_path_factory.mktemp("default")
    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 300, workdir, run=fork_script)
    assert not (workdir / "videos").exists()
    return run_dir


@same_worker
def test_default_flags_log_every_tag_at_its_cadence(default_run):
    # 500 gradient steps logged every 100 updates: after steps 300, 400, ..., 700; resumed, 700 more to 1400
    for tag in TAGS:
        assert list(read_scalars(str(default_run), tag)[0]) == list(range(300, 1401, 100)), tag
    assert len(read_scalars(str(default_run), "charts/episodic_return")[0]) >= 1


@same_worker
def test_copied_file_runs_every_output_path_with_the_same_values(default_run, tmp_path):
    run_dir, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    # 2 actions x 101 atoms; the support is rebuilt from the saved args
    assert checkpoint["model"]["params"]["network"]["layers_4"]["kernel"].shape == (84, 202)
    assert (checkpoint["args"]["n_atoms"], checkpoint["args"]["v_min"], checkpoint["args"]["v_max"]) == (101, -100, 100)
    # same seed on the CPU: videos, W&B, saving and checkpoints change none of the training's numbers
    _, expected = read_scalars(str(default_run), "losses/loss")
    _, got = read_scalars(str(run_dir), "losses/loss")
    assert len(got) == 5 and list(got) == list(expected)[:5]


@same_worker
def test_a_resume_keeps_the_networks_shape_and_gets_the_train_state_back_leaf_by_leaf(default_run, fork_script):
    # the saved networks have 101 atoms: another number is refused in one line, before anything is written
    logs = sorted(default_run.glob("events.out.tfevents.*"))
    result = fork_script(
        SCRIPT, "--resume", default_run, "--n-atoms", 51, "--total-timesteps", 2100, cwd=default_run.parent.parent
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"{SCRIPT}: --n-atoms cannot change on --resume (the run has 101): the saved networks fit it"
    ], result.stderr
    assert sorted(default_run.glob("events.out.tfevents.*")) == logs
    check_restored_jax_state(SCRIPT, default_run, 2100, default_run.parent.parent, "q_state")


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--env-id", "Pendulum-v1"], "Pendulum-v1 has Box(-2.0, 2.0, (1,), float32) actions; c51_jax.py supports Discrete"),
        (["--n-atoms", 1], "--n-atoms must be at least 2"),
        (["--v-min", 10, "--v-max", -10], "--n-atoms must be at least 2 and --v-min below --v-max"),
        (["--gamma", 1.5], "--gamma, --start-e, --end-e and --exploration-fraction must be in [0, 1]"),
        (["--total-timesteps", -1], "--total-timesteps, --num-envs, --buffer-size, --batch-size, --train-frequency"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)


def test_capture_video_on_an_env_without_frames_is_refused(tmp_path):
    env_id, env = no_frames_env(tmp_path / "modules")
    (tmp_path / "work").mkdir()
    result = run_script(SCRIPT, "--env-id", env_id, "--capture-video", cwd=tmp_path / "work", env=env, timeout=300)
    check_refused(result, SCRIPT, f"{env_id} renders no video", tmp_path / "work")


def test_a_run_without_a_gradient_step_saves_and_evaluates_with_one_warning(workdir, fork_script):
    # CleanRL's own smoke command: 205 steps, learning from step 200, a gradient step every 10 steps
    flags = ["--save-model", "--learning-starts", 200, "--total-timesteps", 205]
    result = fork_script(SCRIPT, *flags, cwd=workdir, timeout=300)
    run_dir = check_warns_and_runs(result, SCRIPT, "--learning-starts 200", cwd=workdir, loss_tag="losses/loss", alone=True)
    assert len(read_scalars(str(run_dir), "eval/episodic_return")[0]) == 10


def both_projections(jax_c51, torch_c51, next_pmfs, rewards, dones, gamma, atoms):
    """c51_jax.project_distribution and c51.project_distribution of the same float32 inputs, as arrays."""
    args = [np.asarray(x, dtype=np.float32) for x in (next_pmfs, rewards, dones)]
    got = jax_c51.project_distribution(*args, gamma, np.asarray(atoms, dtype=np.float32))
    expected = torch_c51.project_distribution(*map(torch.from_numpy, args), gamma, torch.as_tensor(atoms, dtype=torch.float32))
    return np.asarray(got), expected.numpy()


@pytest.mark.parametrize("gamma", [0.0, 0.99, 1.0])
@pytest.mark.parametrize("n_atoms,v_min,v_max", [(101, -100.0, 100.0), (51, -10.0, 10.0), (5, -2.0, 2.0)])
def test_project_distribution_matches_c51(jax_c51, torch_c51, gamma, n_atoms, v_min, v_max):
    rng = np.random.default_rng(n_atoms)
    logits = rng.normal(0, 2, (256, n_atoms))
    next_pmfs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    # rewards up to twice the support's half-width: many shifted atoms land beyond v_min or v_max
    rewards = rng.uniform(2 * v_min, 2 * v_max, 256)
    rewards[:32] = np.round(rewards[:32])  # whole rewards put atoms exactly on support points (floor == ceil)
    dones = (rng.random(256) < 0.3).astype(np.float32)  # terminations; truncations are stored with done = 0
    atoms = torch.linspace(v_min, v_max, n_atoms).numpy()  # the support c51.py's QNetwork holds
    got, expected = both_projections(jax_c51, torch_c51, next_pmfs, rewards, dones, gamma, atoms)
    # float32 tolerance of the split: a position b near atom k is known to an ulp of k (7.6e-6 at k = 100),
    # and that much of a mass can move to the neighbouring atom
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.sum(1), 1.0, rtol=1e-5)


def test_project_distribution_matches_c51_at_the_edges(jax_c51, torch_c51):
    atoms = np.array([-2.0, -1.0, 0.0, 1.0, 2.0], dtype=np.float32)
    uniform = np.full((6, 5), 0.2)
    rewards = [5.0, -5.0, 1.0, 1.5, 0.6, 10.0]  # all beyond v_max / v_min, whole shifts, partial clamping
    dones = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    for gamma in (0.0, 0.5, 1.0):
        got, expected = both_projections(jax_c51, torch_c51, uniform, rewards, dones, gamma, atoms)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)
    # hand-computed (tests/test_c51_projection.py): all mass at v_max, at v_min, shifted one point
    np.testing.assert_allclose(got[:3], [[0, 0, 0, 0, 1], [1, 0, 0, 0, 0], [0, 0.2, 0.2, 0.2, 0.4]], atol=1e-7)


def test_q_network_matches_c51_with_the_same_weights(jax_c51, torch_c51):
    # the checkpoint layout: flax's (in, out) kernels are torch's (out, in) weights transposed
    torch_q = torch_c51.QNetwork(4, 3, n_atoms=11, v_min=-5.0, v_max=5.0)
    layers = {
        f"layers_{i}": {
            "kernel": torch_q.network[i].weight.detach().numpy().T,
            "bias": torch_q.network[i].bias.detach().numpy(),
        }
        for i in (0, 2, 4)
    }
    params = {"params": {"network": layers}}
    jax_q = jax_c51.QNetwork(3, n_atoms=11, v_min=-5.0, v_max=5.0)
    np.testing.assert_allclose(np.asarray(jax_q.atoms), torch_q.atoms.numpy(), rtol=1e-6)
    obs = np.random.default_rng(2).normal(size=(16, 4)).astype(np.float32)
    actions = np.arange(16) % 3
    with torch.no_grad():
        greedy, greedy_pmfs = torch_q.get_action(torch.from_numpy(obs))
        _, taken_pmfs = torch_q.get_action(torch.from_numpy(obs), torch.from_numpy(actions))
    got_greedy, got_greedy_pmfs = jax_q.apply(params, obs, method=jax_c51.QNetwork.get_action)
    _, got_taken_pmfs = jax_q.apply(params, obs, actions, method=jax_c51.QNetwork.get_action)
    np.testing.assert_array_equal(np.asarray(got_greedy), greedy.numpy())
    np.testing.assert_allclose(np.asarray(got_greedy_pmfs), greedy_pmfs.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_taken_pmfs), taken_pmfs.numpy(), rtol=1e-5, atol=1e-6)
