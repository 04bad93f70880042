"""qdagger_dqn_atari_jax_impalacnn.py: its pure pieces and networks give the numbers of the torch twin
(qdagger_dqn_atari_impalacnn.py), its teacher checks accept dqn_atari_jax.py's checkpoint and CleanRL's
Hub forms and refuse the rest, and every phase of a tiny run (default flags, with a checkpoint and a resume;
copied alone with video, checkpoint and W&B) logs what the twin logs; a run stopped in the teacher's play or in
the offline phase goes on there (the teacher plays again where the checkpoint has no memory). The teacher is a
TeacherQNetwork's initial parameters in the file format of dqn_atari_jax.py --save-model."""

import functools
import inspect

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from budgets import QDAGGER_TINY as TINY
from cleanrl_utils.checkpoint import read
from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_ok,
    check_refused,
    load_script,
    only_run_dir,
    run_copied_alone,
    run_script,
    script_env,
    stopped_in_phase,
)
from jax_parity import check_restored_jax_state

SCRIPT = "qdagger_dqn_atari_jax_impalacnn.py"
ENV = "BreakoutNoFrameskip-v4"
qdagger = load_script("qdagger_dqn_atari_jax_impalacnn")
twin = load_script("qdagger_dqn_atari_impalacnn")
OBS = np.zeros((1, 4, 84, 84), dtype=np.uint8)


@functools.cache
def teacher_params(n_actions):
    """Random parameters of a TeacherQNetwork (kernels ~ N(0, 1/fan_in), zero biases: Flax's initialisation),
    made without compiling anything."""
    shapes = jax.eval_shape(qdagger.TeacherQNetwork(n_actions).init, jax.random.PRNGKey(0), OBS)
    rng = np.random.default_rng(n_actions)

    def draw(x):
        if len(x.shape) == 1:
            return np.zeros(x.shape, np.float32)
        return (rng.normal(size=x.shape) / np.sqrt(np.prod(x.shape[:-1]))).astype(np.float32)

    return jax.tree_util.tree_map(draw, shapes)


def student_params_of_zeros(n_actions):
    shapes = jax.eval_shape(qdagger.QNetwork(n_actions).init, jax.random.PRNGKey(0), OBS)
    return jax.tree_util.tree_map(lambda x: np.zeros(x.shape, x.dtype), shapes)


def write_teacher(path, params, env_id=ENV):
    """A checkpoint as dqn_atari_jax.py --save-model writes it: the parameters and the run's arguments."""
    checkpoint = {
        "model": flax.serialization.to_state_dict(params),
        "args": {"env_id": env_id, "seed": 1, "wandb_entity": None},
    }
    path.write_bytes(flax.serialization.msgpack_serialize(checkpoint))
    return path


@pytest.fixture(scope="module")
def jax_teacher_path(tmp_path_factory):
    return write_teacher(tmp_path_factory.mktemp("teacher") / "dqn_atari_jax.cleanrl_model", teacher_params(4))


# --- parity with the torch twin's pure functions ---------------------------------------------------


def test_td_target_matches_the_twin():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=64).astype(np.float32)
    next_q_max = rng.normal(scale=10.0, size=64).astype(np.float32)
    dones = (rng.random(64) < 0.3).astype(np.float32)  # terminations; truncations bootstrap like any step
    dones[:2] = [1.0, 0.0]
    for gamma in (0.0, 0.99, 1.0):
        expected = twin.td_target(torch.from_numpy(rewards), torch.from_numpy(next_q_max), torch.from_numpy(dones), gamma)
        got = qdagger.td_target(jnp.asarray(rewards), jnp.asarray(next_q_max), jnp.asarray(dones), gamma)
        np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=1e-6, atol=1e-6)
        assert got[0] == rewards[0]  # a termination does not bootstrap


def test_epsilon_schedule_and_cadences_match_the_twin():
    for start_e, end_e, duration in [(1.0, 0.01, 1000), (1.0, 0.01, 0.0), (0.5, 1.0, 7.5)]:
        for t in (0, 1, 3, 500, 999, 1000, 10**7):
            assert qdagger.epsilon_schedule(start_e, end_e, duration, t) == twin.epsilon_schedule(start_e, end_e, duration, t)
    for previous, step, every in [(0, 2, 4), (2, 4, 4), (96, 104, 100), (0, 1000, 7)]:
        assert qdagger.steps_crossed(previous, step, every) == twin.steps_crossed(previous, step, every)


@pytest.mark.parametrize("temperature", [1.0, 0.5, 3.7])
def test_distillation_loss_and_its_gradient_match_the_twin(temperature):
    rng = np.random.default_rng(1)
    teacher_q = rng.normal(scale=5.0, size=(16, 6)).astype(np.float32)
    student_q = rng.normal(scale=5.0, size=(16, 6)).astype(np.float32)
    student_q[0] = teacher_q[0] + 2.0  # the same policy: no loss
    student_q[1] = [40.0, -40.0, 0.0, 0.0, 0.0, 0.0]  # a nearly deterministic student
    student_torch = torch.from_numpy(student_q).requires_grad_(True)
    expected = twin.distillation_loss(torch.from_numpy(teacher_q), student_torch, temperature)
    expected.sum().backward()
    got = qdagger.distillation_loss(jnp.asarray(teacher_q), jnp.asarray(student_q), temperature)
    np.testing.assert_allclose(np.asarray(got), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert abs(float(got[0])) < 1e-5
    grad = jax.grad(lambda q: qdagger.distillation_loss(jnp.asarray(teacher_q), q, temperature).sum())(jnp.asarray(student_q))
    np.testing.assert_allclose(np.asarray(grad), student_torch.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "recent,teacher_return,window",
    [
        ([], 10.0, 10),  # the window not yet full: 1
        ([100.0] * 9, 10.0, 10),
        ([4.0] * 10, 10.0, 10),  # a positive teacher
        ([0.0, 8.0], 10.0, 2),
        ([12.0] * 3, 10.0, 3),
        ([-10.0] * 3, 20.0, 3),
        ([100.0, 100.0, 5.0, 5.0], 10.0, 2),
        ([-21.0] * 2, -20.0, 2),  # a negative teacher
        ([-10.0] * 2, -20.0, 2),
        ([-20.0] * 2, -20.0, 2),
        ([-1.0] * 2, 0.0, 2),  # a teacher at exactly 0
        ([0.0] * 2, 0.0, 2),
        ([3.0] * 2, 0.0, 2),
    ],
)
def test_distill_coefficient_matches_the_twin(recent, teacher_return, window):
    # (the 1_{t<t0} latch is the training loop's `if distill_coeff > 0`, the same line in both scripts)
    assert qdagger.distill_coefficient(recent, teacher_return, window) == twin.distill_coefficient(
        recent, teacher_return, window
    )


# --- the networks: the twin's, layer for layer ------------------------------------------------------


def conv(layer):
    return {"kernel": layer.weight.detach().numpy().transpose(2, 3, 1, 0), "bias": layer.bias.detach().numpy()}


def dense(layer, chw=None):
    weight = layer.weight.detach().numpy()
    if chw is not None:  # torch flattens (C, H, W), Flax (H, W, C)
        weight = weight.reshape(weight.shape[0], *chw).transpose(0, 2, 3, 1).reshape(weight.shape[0], -1)
    return {"kernel": weight.T, "bias": layer.bias.detach().numpy()}


def assert_same_tree(params, template):
    shapes = jax.tree_util.tree_map(lambda x: x.shape, params)
    assert shapes == jax.tree_util.tree_map(lambda x: x.shape, template)


def test_student_is_the_twins_impala_cnn():
    torch.manual_seed(0)
    reference = twin.QNetwork(6)
    stages = [m for m in reference.network if isinstance(m, twin.ConvSequence)]
    linears = [m for m in reference.network if isinstance(m, torch.nn.Linear)]
    params = {"params": {"Dense_0": dense(linears[0], chw=(32, 11, 11)), "Dense_1": dense(linears[1])}}
    for i, stage in enumerate(stages):
        params["params"][f"ConvSequence_{i}"] = {
            "Conv_0": conv(stage.conv),
            **{
                f"ResidualBlock_{j}": {"Conv_0": conv(block.conv0), "Conv_1": conv(block.conv1)}
                for j, block in enumerate([stage.res_block0, stage.res_block1])
            },
        }
    q_network = qdagger.QNetwork(6)
    assert_same_tree(params, jax.eval_shape(q_network.init, jax.random.PRNGKey(0), OBS))
    obs = np.random.default_rng(2).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    with torch.no_grad():
        expected = reference(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(np.asarray(jax.jit(q_network.apply)(params, obs)), expected, rtol=1e-4, atol=1e-5)


def test_teacher_is_the_twins_nature_cnn():
    torch.manual_seed(0)
    reference = twin.TeacherQNetwork(4)
    layers = reference.network
    params = {
        "params": {
            "Conv_0": conv(layers[0]),
            "Conv_1": conv(layers[2]),
            "Conv_2": conv(layers[4]),
            "Dense_0": dense(layers[7], chw=(64, 7, 7)),
            "Dense_1": dense(layers[9]),
        }
    }
    assert_same_tree(params, teacher_params(4))
    obs = np.random.default_rng(3).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    with torch.no_grad():
        expected = reference(torch.from_numpy(obs)).numpy()
    got = jax.jit(qdagger.TeacherQNetwork(4).apply)(params, obs)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-4, atol=1e-5)


# --- the teacher checks -----------------------------------------------------------------------------


def restored(tree):
    return flax.serialization.msgpack_restore(flax.serialization.to_bytes(tree))


def test_teacher_weights_accept_the_save_model_file_and_cleanrls_hub_forms():
    params = teacher_params(4)
    args = {"env_id": ENV, "seed": 1}
    forms = [
        {"model": flax.serialization.to_state_dict(params), "args": args},  # dqn_atari_jax.py --save-model
        {"model": flax.serialization.to_state_dict(params)},
        params,  # flax's to_bytes(params)
        [args, [params]],  # flax's to_bytes([vars(args), [params]])
    ]
    for form in forms:
        weights, error = qdagger.teacher_weights(restored(form), 4, ENV, "t.cleanrl_model")
        assert error is None, error
        assert jax.tree_util.tree_all(jax.tree_util.tree_map(np.array_equal, weights, params))


def test_teacher_weights_refuse_what_is_not_a_matching_dqn_atari_jax_teacher():
    params = teacher_params(4)
    student = student_params_of_zeros(4)
    wide = restored(params)
    wide["params"]["Dense_0"]["kernel"] = np.zeros((3136, 256), np.float32)
    cases = [
        (restored(np.zeros(3)), "holds a ndarray, not dqn_atari_jax.py parameters"),
        ({"model": {"w": 1.0}}, "holds a dict, not dqn_atari_jax.py parameters"),
        (restored(student), "is not a dqn_atari_jax.py QNetwork (parameters"),
        (
            restored({"model": params, "args": {"env_id": "PongNoFrameskip-v4"}}),
            f"was trained on PongNoFrameskip-v4, not {ENV}",
        ),
        (restored([{"env_id": "PongNoFrameskip-v4"}, [params]]), f"was trained on PongNoFrameskip-v4, not {ENV}"),
        (restored(teacher_params(6)), f"chooses among 6 actions but {ENV} has 4"),
        (wide, "params/Dense_0/kernel has shape (3136, 256)"),
    ]
    for checkpoint, message in cases:
        weights, error = qdagger.teacher_weights(checkpoint, 4, ENV, "t.cleanrl_model")
        assert weights is None and message in error, error
        assert error.startswith("the teacher t.cleanrl_model ") and "--teacher-model-path" in error and "\n" not in error


# --- refusals: exit 2, one line, nothing made ---------------------------------------------------------


@pytest.mark.parametrize(
    "case,message",
    [
        ("missing", "--teacher-model-path {path}: no such file"),
        ("text", "cannot read the teacher {path} as a flax msgpack checkpoint"),
        ("torch", "cannot read the teacher {path} as a flax msgpack checkpoint"),
        ("student", "is not a dqn_atari_jax.py QNetwork (parameters"),
        ("pong", f"was trained on PongNoFrameskip-v4, not {ENV}; use --env-id PongNoFrameskip-v4"),
        ("six_actions", f"chooses among 6 actions but {ENV} has 4"),
    ],
)
def test_a_teacher_that_cannot_be_had_is_refused(case, message, fork_script, tmp_path):
    workdir, files = tmp_path / "work", tmp_path / "files"
    workdir.mkdir()
    files.mkdir()
    path = files / f"{case}.cleanrl_model"
    if case == "text":
        path.write_text("not a flax file\n")
    elif case == "torch":  # dqn_atari.py's (torch) checkpoint
        torch.save({"model": twin.TeacherQNetwork(4).state_dict(), "args": {"env_id": ENV}}, path)
    elif case == "student":
        path.write_bytes(flax.serialization.to_bytes(student_params_of_zeros(4)))
    elif case in ("pong", "six_actions"):
        write_teacher(path, teacher_params(6 if case == "six_actions" else 4), "PongNoFrameskip-v4" if case == "pong" else ENV)
    result = fork_script(SCRIPT, "--teacher-model-path", path, "--capture-video", "--track", "--save-model", cwd=workdir)
    check_refused(result, SCRIPT, message.format(path=path), workdir)
    assert "--teacher-model-path" in result.stderr


def test_unreachable_hub_and_bad_values_are_refused(fork_script, tmp_path, jax_teacher_path):
    result = fork_script(SCRIPT, "--capture-video", cwd=tmp_path, env=script_env() | {"HF_HUB_OFFLINE": "1"})
    check_refused(
        result,
        SCRIPT,
        "cannot download the teacher cleanrl/BreakoutNoFrameskip-v4-dqn_atari_jax-seed1/dqn_atari_jax.cleanrl_model",
        tmp_path,
    )
    result = fork_script(SCRIPT, "--teacher-model-path", jax_teacher_path, "--temperature", 0, cwd=tmp_path)
    check_refused(result, SCRIPT, "--temperature must be positive and finite in float32, got 0.0", tmp_path)


def test_validation_and_defaults_are_the_twins():
    jax_fields = vars(qdagger.Args())
    twin_fields = vars(twin.Args())
    assert list(jax_fields) == [k for k in twin_fields if k not in ("torch_deterministic", "cuda")]
    differ = {k for k in jax_fields if k != "exp_name" and jax_fields[k] != twin_fields[k]}
    assert differ == {"teacher_model_exp_name"} and jax_fields["teacher_model_exp_name"] == "dqn_atari_jax"
    env = qdagger.gym.make(ENV)
    for changes in [{"distill_window": 0}, {"teacher_steps": 1, "num_envs": 2}, {"temperature": 0.0}, {"gamma": 2.0}]:
        got = qdagger.validation_error(qdagger.Args(**changes), env)
        assert got == twin.validation_error(twin.Args(**changes), env) is not None
    assert qdagger.validation_error(qdagger.Args(buffer_size=1000), env) is None
    # the enjoy tool passes `device` only to an evaluate that declares it
    assert list(inspect.signature(qdagger.evaluate).parameters) == [
        "model_path",
        "eval_episodes",
        "run_name",
        "epsilon",
        "capture_video",
    ]


# --- whole runs ----------------------------------------------------------------------------------------


ONLINE_TAGS = [
    "losses/loss",
    "losses/td_loss",
    "losses/distill_loss",
    "losses/q_values",
    "charts/distill_coeff",
    "charts/epsilon",
    "charts/SPS",
]


def test_every_phase_runs_logs_its_tags_and_resumes(jax_teacher_path, tmp_path):
    # a checkpoint every 20 student gradient steps (10 offline, then one per 16 env steps online), the last at step 600;
    # the resume goes on online to 1200 in the same log, whose points are those of one run to 1200
    flags = ["--teacher-model-path", jax_teacher_path, *TINY, "--num-envs", 2]
    run_dir = check_checkpoint_and_resume(SCRIPT, flags, 20, tmp_path)
    assert list(read_scalars(str(run_dir), "charts/teacher/avg_episodic_return")[0]) == [0]  # the resumed run has it
    for tag in ["charts/offline/loss", "charts/offline/q_loss", "charts/offline/distill_loss", "charts/offline/SPS"]:
        assert list(read_scalars(str(run_dir), tag)[0]) == [10], tag  # logged at the last offline step
    assert list(read_scalars(str(run_dir), "charts/offline/avg_episodic_return")[0]) == [10]  # evaluated at the end
    for tag in ONLINE_TAGS:
        # at the first update past each multiple of 100 env steps (updates every 16 steps), and at the last
        steps = [112, 208, 304, 400, 512, 608, 704, 800, 912, 1008, 1104, 1200]
        assert list(read_scalars(str(run_dir), tag)[0]) == steps, tag
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    assert set(read_scalars(str(run_dir), "charts/distill_coeff")[1]) == {1.0}  # fewer than 10 episodes finished
    assert all(np.isfinite(read_scalars(str(run_dir), "losses/loss")[1]))
    saved = read(str(run_dir / "checkpoint.pt"), SCRIPT)
    assert saved["count"] == 10 + 75 and saved["state"]["num_updates"][1] == 75  # 10 offline steps, 1200 / 16 online
    assert not (tmp_path / "videos").exists()
    # the student's TrainState (its target and Adam with it) comes back leaf by leaf, as device arrays
    check_restored_jax_state(SCRIPT, run_dir, 1800, tmp_path, "q_state")


def test_copied_alone_with_video_checkpoint_and_wandb(saved_jax_teacher_path, tmp_path):
    # the teacher is what dqn_atari_jax.py --save-model wrote (conftest); the offline evaluation is left to the run above
    flags = ["--teacher-model-path", saved_jax_teacher_path, *TINY, "--total-timesteps", 200, "--offline-eval-episodes", 0]
    run_dir, checkpoint, _ = run_copied_alone(SCRIPT, *flags, tmp_path=tmp_path)
    # the teacher's videos have a folder of their own
    assert list((tmp_path / "alone" / "videos" / f"{run_dir.name}-teacher").glob("*.mp4"))
    template = jax.eval_shape(qdagger.QNetwork(4).init, jax.random.PRNGKey(0), OBS)
    assert_same_tree(flax.serialization.from_state_dict(template, checkpoint["model"]), template)
    assert checkpoint["args"]["teacher_model_path"] == str(saved_jax_teacher_path)


def test_non_finite_loss_stops_the_run_at_its_first_step(jax_teacher_path, tmp_path, fork_script):
    # Q-values divided by a temperature of 1e-45 overflow float32: the distillation loss is NaN at once
    flags = ["--teacher-model-path", jax_teacher_path, *TINY, "--teacher-steps", 0, "--offline-steps", 0]
    result = fork_script(
        SCRIPT, *flags, "--train-frequency", 4, "--total-timesteps", 200, "--temperature", 1e-45, cwd=tmp_path, timeout=600
    )
    assert result.returncode == 1, result.stderr
    # found before the first step's checkpoint (checkpoints are on by default), named by the first update's step
    assert f"{SCRIPT}: non-finite loss at global_step 4; stopping" in result.stderr.splitlines()
    assert only_run_dir(tmp_path).exists()  # what was logged so far is kept


def test_a_run_without_an_online_gradient_step_runs_with_one_warning(jax_teacher_path, tmp_path, fork_script):
    # the online clock starts at --offline-steps: 0 here, so learning would start after the run's 16 steps
    flags = ["--teacher-steps", 0, "--offline-steps", 0, "--total-timesteps", 16, "--learning-starts", 16]
    result = fork_script(SCRIPT, "--teacher-model-path", jax_teacher_path, *TINY[:2], *flags, cwd=tmp_path, timeout=600)
    check_ok(result)
    warning = f"{SCRIPT}: warning: the run ends before its first online gradient step (its clock starts at --offline-steps)"
    assert [line for line in result.stdout.splitlines() if "warning" in line] == [warning]
    assert read_scalars(str(only_run_dir(tmp_path)), "losses/loss")[0].size == 0


@pytest.mark.parametrize(
    "phase,memory",
    [("teacher", "--checkpoint-memory"), ("offline", "--checkpoint-memory"), ("offline", "--no-checkpoint-memory")],
)
def test_a_run_stopped_in_a_phase_goes_on_there(phase, memory, jax_teacher_path, tmp_path):
    # the teacher plays 3000 steps (seconds) or the student takes 320 offline steps, a checkpoint every 110: offline,
    # checkpoints follow the loss checks of every 100th step, so the first is at step 200 and the stop at 300
    teacher_steps, offline_steps = (3000, 10) if phase == "teacher" else (64, 320)
    flags = ["--teacher-model-path", jax_teacher_path, *TINY, "--total-timesteps", 64, "--offline-eval-episodes", 0]
    flags += ["--teacher-steps", teacher_steps, "--offline-steps", offline_steps, "--checkpoint-every", 110, memory]
    workdir = tmp_path / "work"
    workdir.mkdir()
    saved = stopped_in_phase(SCRIPT, phase, flags, workdir)
    teacher_step, offline_step = saved["state"]["teacher_step"][1], saved["state"]["offline_step"][1]
    if phase == "teacher":
        assert 0 < teacher_step < teacher_steps and offline_step == 0 and saved["count"] == 0
    else:
        assert teacher_step == 64 and offline_step in (200, 300) and saved["count"] == offline_step
    assert saved["state"]["teacher_return"][0] == "value" and ("rb" in saved["state"]) == (memory == "--checkpoint-memory")
    run_dir = only_run_dir(workdir)
    result = run_script(SCRIPT, "--resume", run_dir, cwd=workdir, timeout=600)
    check_ok(result)
    assert "mean episodic return" not in result.stdout  # the teacher's score is in the checkpoint
    replayed = f"{SCRIPT}: the teacher plays its --teacher-steps 64 into the offline memory again"
    assert (replayed in result.stdout.splitlines()) == (memory == "--no-checkpoint-memory")
    assert (f"teacher_step={teacher_steps}," in result.stdout) == (phase == "teacher" or memory == "--no-checkpoint-memory")
    assert f"offline_step={offline_steps}, loss=" in result.stdout and "global_step=64, " in result.stdout
    assert list(read_scalars(str(run_dir), "charts/teacher/avg_episodic_return")[0]) == [0]
    # the offline phase goes on from its checkpoint: each point once, the earlier phases' points kept
    expected = [10] if phase == "teacher" else [100, 200, 300, 320]
    assert list(read_scalars(str(run_dir), "charts/offline/loss")[0]) == expected
    steps, _ = read_scalars(str(run_dir), "charts/teacher/episodic_return")
    if memory == "--checkpoint-memory":  # the teacher's play logged once (played again, it is logged again)
        assert list(steps) == sorted(steps) and len(steps) == len(set(steps))
    final = read(str(run_dir / "checkpoint.pt"), SCRIPT)
    assert final["finished"] and final["global_step"] == 64 and final["state"]["offline_step"][1] == offline_steps
