"""qdagger_dqn_atari_impalacnn.py: the distillation loss and coefficient against hand-computed values,
the IMPALA CNN's shapes, the teacher checks, and every phase of a tiny run with a teacher made by
dqn_atari.py, with a checkpoint and a resume; a run stopped in the teacher's play or in the offline phase
goes on there (the teacher plays again where the checkpoint has no memory); the file copied alone; a
teacher that cannot be had stops the run before anything is created."""

import math

import gymnasium as gym
import pytest
import torch

from budgets import QDAGGER_TINY as TINY
from cleanrl_utils.checkpoint import read
from cleanrl_utils.report import read_scalars
from conftest import (
    check_checkpoint_and_resume,
    check_ok,
    load_script,
    only_run_dir,
    run_copied_alone,
    run_script,
    script_env,
    stopped_in_phase,
)

SCRIPT = "qdagger_dqn_atari_impalacnn.py"
qdagger = load_script("qdagger_dqn_atari_impalacnn")


# --- the distillation loss ---------------------------------------------------------------------


def test_distillation_loss_is_the_kl_divergence_of_the_student_from_the_teacher():
    ln3 = math.log(3.0)
    # row 0: teacher policy (3/4, 1/4) against a uniform student; row 1: (1/4, 3/4) against (3/4, 1/4)
    teacher_q = torch.tensor([[ln3, 0.0], [0.0, ln3]])
    student_q = torch.tensor([[5.0, 5.0], [ln3, 0.0]])  # a constant shift changes no policy
    loss = qdagger.distillation_loss(teacher_q, student_q, 1.0)
    row0 = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    row1 = 0.25 * math.log(0.25 / 0.75) + 0.75 * math.log(0.75 / 0.25)  # = ln(3) / 2
    assert loss.shape == (2,)
    assert loss.tolist() == pytest.approx([row0, row1], abs=1e-6)
    assert row1 == pytest.approx(ln3 / 2)
    # the same policies at temperature 2 need Q-values twice as far apart
    assert qdagger.distillation_loss(2 * teacher_q, 2 * student_q, 2.0).tolist() == pytest.approx([row0, row1], abs=1e-6)
    # agreeing policies: no loss
    assert qdagger.distillation_loss(teacher_q, teacher_q + 1.0, 1.0).tolist() == pytest.approx([0.0, 0.0], abs=1e-6)


def test_distillation_gradient_moves_the_student_toward_the_teacher():
    # d KL / d student_q = (softmax(student_q / T) - softmax(teacher_q / T)) / T
    teacher_q = torch.tensor([[math.log(3.0), 0.0, 0.0]])
    student_q = torch.zeros(1, 3, requires_grad=True)
    qdagger.distillation_loss(teacher_q, student_q, 2.0).sum().backward()
    teacher_policy = torch.softmax(teacher_q / 2.0, dim=1)
    expected = (torch.full((1, 3), 1 / 3) - teacher_policy) / 2.0
    assert student_q.grad.tolist()[0] == pytest.approx(expected.tolist()[0], abs=1e-6)
    # the teacher is a fixed target: no gradient flows into it
    teacher_q = teacher_q.clone().requires_grad_(True)
    qdagger.distillation_loss(teacher_q.detach(), torch.zeros(1, 3, requires_grad=True), 1.0).sum().backward()
    assert teacher_q.grad is None


# --- the distillation coefficient ----------------------------------------------------------------


def test_distill_coefficient_is_one_until_the_window_is_full():
    assert qdagger.distill_coefficient([], 10.0, 10) == 1.0
    assert qdagger.distill_coefficient([100.0] * 9, 10.0, 10) == 1.0  # even far above the teacher


def test_distill_coefficient_follows_the_return_ratio_of_a_positive_teacher():
    coefficient = qdagger.distill_coefficient
    assert coefficient([4.0] * 10, 10.0, 10) == pytest.approx(0.6)
    assert coefficient([0.0, 8.0], 10.0, 2) == pytest.approx(0.6)  # the mean of the window
    assert coefficient([10.0] * 3, 10.0, 3) == 0.0  # as good as the teacher
    assert coefficient([12.0] * 3, 10.0, 3) == 0.0  # better: floored at 0
    # a student below 0 is more than the teacher's whole return behind (as upstream: no cap at 1)
    assert coefficient([-10.0] * 3, 20.0, 3) == pytest.approx(1.5)
    # only the last `window` episodes count
    assert coefficient([100.0, 100.0, 5.0, 5.0], 10.0, 2) == pytest.approx(0.5)


def test_distill_coefficient_with_a_negative_or_zero_teacher_return():
    coefficient = qdagger.distill_coefficient
    # a Pong teacher at -20: a student at -21 is 1/20 of the teacher's magnitude behind; at -10 ahead
    assert coefficient([-21.0] * 2, -20.0, 2) == pytest.approx(0.05)
    assert coefficient([-10.0] * 2, -20.0, 2) == 0.0
    assert coefficient([-20.0] * 2, -20.0, 2) == 0.0
    # a teacher scoring 0: full distillation while the student is below it, none once it is not
    assert coefficient([-1.0] * 2, 0.0, 2) == 1.0
    assert coefficient([0.0] * 2, 0.0, 2) == 0.0
    assert coefficient([3.0] * 2, 0.0, 2) == 0.0


# --- the networks --------------------------------------------------------------------------------


def test_impala_stages_halve_the_frame_rounding_up():
    stage = qdagger.ConvSequence((4, 84, 84), 16)
    assert stage.get_output_shape() == (16, 42, 42)
    assert stage(torch.zeros(2, 4, 84, 84)).shape == (2, 16, 42, 42)
    odd = qdagger.ConvSequence((32, 21, 21), 32)
    assert odd.get_output_shape() == (32, 11, 11)
    assert odd(torch.zeros(1, 32, 21, 21)).shape == (1, 32, 11, 11)
    block = qdagger.ResidualBlock(16)
    x = torch.randn(3, 16, 10, 10)
    assert block(x).shape == x.shape
    with torch.no_grad():  # a residual block with zeroed convolutions is the identity
        for p in block.parameters():
            p.zero_()
    assert torch.equal(block(x), x)


def test_impala_student_layout_and_output():
    q_network = qdagger.QNetwork(6)
    stages = [m for m in q_network.network if isinstance(m, qdagger.ConvSequence)]
    assert [s.out_channels for s in stages] == [16, 32, 32]
    assert [s.get_output_shape() for s in stages] == [(16, 42, 42), (32, 21, 21), (32, 11, 11)]
    linears = [m for m in q_network.network if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(32 * 11 * 11, 256), (256, 6)]
    assert sum(isinstance(m, torch.nn.Conv2d) for m in q_network.modules()) == 3 * 5
    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    assert q_network(obs).shape == (5, 6)


def test_teacher_network_loads_dqn_atari_weights():
    dqn_atari = load_script("dqn_atari")
    saved = dqn_atari.QNetwork(4).state_dict()
    teacher = qdagger.TeacherQNetwork(4)
    teacher.load_state_dict(saved)  # strict: the same names and shapes
    obs = torch.randint(0, 256, (2, 4, 84, 84), dtype=torch.uint8)
    reference = dqn_atari.QNetwork(4)
    reference.load_state_dict(saved)
    assert torch.equal(teacher(obs), reference(obs))


# --- the teacher checks --------------------------------------------------------------------------


def test_teacher_weights_accept_a_save_model_dict_and_a_bare_state_dict():
    state_dict = qdagger.TeacherQNetwork(4).state_dict()
    checkpoint = {"model": state_dict, "args": {"env_id": "BreakoutNoFrameskip-v4", "seed": 1}}
    for candidate in (checkpoint, state_dict, {"model": state_dict}):
        weights, error = qdagger.teacher_weights(candidate, 4, "BreakoutNoFrameskip-v4", "t.pt")
        assert error is None and weights is state_dict


def test_teacher_weights_refuse_what_is_not_a_matching_dqn_atari_teacher():
    state_dict = qdagger.TeacherQNetwork(4).state_dict()
    env = "BreakoutNoFrameskip-v4"
    not_it = "is not a dqn_atari.py QNetwork for 4 actions"
    cases = [
        (torch.zeros(3), f"{not_it} (Expected state_dict to be dict-like"),
        ({"model": {"w": 1.0}}, f"{not_it} (Missing key(s) in state_dict"),
        (qdagger.QNetwork(4).state_dict(), f"{not_it} (Missing key(s) in state_dict"),  # the student's layers
        ({"model": state_dict, "args": {"env_id": "PongNoFrameskip-v4"}}, "was trained on PongNoFrameskip-v4, not " + env),
        (qdagger.TeacherQNetwork(6).state_dict(), f"{not_it} (size mismatch for network.9.weight"),
        ({**state_dict, "network.7.weight": torch.zeros(512, 10)}, f"{not_it} (size mismatch for network.7.weight"),
    ]
    for checkpoint, message in cases:
        weights, error = qdagger.teacher_weights(checkpoint, 4, env, "t.pt")
        assert weights is None and message in error, error
        assert error.startswith("the teacher t.pt ") and "--teacher-model-path" in error and "\n" not in error


# --- validation ----------------------------------------------------------------------------------

SIZES = (
    "--total-timesteps, --num-envs, --buffer-size, --batch-size, --train-frequency, --target-network-frequency, "
    "--teacher-eval-episodes, --offline-eval-frequency, --distill-window must be at least 1"
)


@pytest.fixture(scope="module")
def breakout():
    env = gym.make("BreakoutNoFrameskip-v4")
    yield env
    env.close()


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"temperature": 0.0}, "--temperature must be positive and finite in float32, got 0.0"),
        ({"temperature": float("inf")}, "--temperature must be positive and finite in float32"),
        ({"teacher_eval_episodes": 0}, SIZES),
        ({"total_timesteps": 0}, SIZES),
        ({"offline_eval_frequency": 0}, SIZES),
        ({"distill_window": 0}, SIZES),
        ({"buffer_size": 19, "num_envs": 2}, "--buffer-size 19 leaves a sub-env fewer than 10 frames"),
        ({"teacher_steps": 1, "num_envs": 2}, "--offline-steps 500000 needs the teacher's data: raise --teacher-steps"),
        ({"teacher_steps": -1}, "--offline-steps 500000 needs the teacher's data"),
        ({"end_e": 1.5}, "--gamma, --start-e, --end-e and --exploration-fraction must be in [0, 1]"),
        ({"learning_rate": 0.0}, "--learning-rate must be positive and finite in float32, got 0.0"),
    ],
)
def test_validation_errors(changes, message, breakout):
    error = qdagger.validation_error(qdagger.Args(**changes), breakout)
    assert error is not None and message in error, error


def test_defaults_are_cleanrl_published_ones_and_valid(breakout):
    args = qdagger.Args()
    assert qdagger.validation_error(args, breakout) is None
    assert qdagger.validation_error(qdagger.Args(teacher_steps=0, offline_steps=0), breakout) is None  # no offline phase
    assert (args.teacher_steps, args.offline_steps, args.teacher_eval_episodes, args.temperature) == (500000, 500000, 10, 1.0)
    assert (args.learning_rate, args.buffer_size, args.batch_size, args.target_network_frequency) == (1e-4, 1000000, 32, 1000)
    assert (args.start_e, args.end_e, args.exploration_fraction, args.learning_starts, args.train_frequency) == (
        1,
        0.01,
        0.10,
        80000,
        4,
    )
    assert args.teacher_policy_hf_repo is None and args.teacher_model_exp_name == "dqn_atari"
    # the online phase continues the schedules where the offline phase left them: learning from step 1
    assert qdagger.epsilon_schedule(args.start_e, args.end_e, 0.1 * args.total_timesteps, args.offline_steps) == pytest.approx(
        0.505
    )


# --- whole runs ----------------------------------------------------------------------------------


def test_every_phase_runs_logs_its_tags_and_resumes(teacher_path, workdir):
    # a checkpoint every 20 student gradient steps (10 offline, then one per 16 env steps online), the last at step 600;
    # the resume goes on online to 1200 in the same log, whose points are those of one run to 1200
    flags = ["--teacher-model-path", teacher_path, *TINY, "--num-envs", 2]
    run_dir = check_checkpoint_and_resume(SCRIPT, flags, 20, workdir)
    steps, _ = read_scalars(str(run_dir), "charts/teacher/avg_episodic_return")
    assert list(steps) == [0]  # the teacher is scored once: the resumed run has its score
    for tag in ["charts/offline/loss", "charts/offline/q_loss", "charts/offline/distill_loss", "charts/offline/SPS"]:
        assert list(read_scalars(str(run_dir), tag)[0]) == [10], tag  # logged at the last offline step
    assert list(read_scalars(str(run_dir), "charts/offline/avg_episodic_return")[0]) == [10]  # evaluated at the end
    for tag in [
        "losses/loss",
        "losses/td_loss",
        "losses/distill_loss",
        "losses/q_values",
        "charts/distill_coeff",
        "charts/epsilon",
        "charts/SPS",
    ]:
        steps, _ = read_scalars(str(run_dir), tag)
        # at the first update past each multiple of 100 env steps (updates every 16 steps), and at the last
        assert list(steps) == [112, 208, 304, 400, 512, 608, 704, 800, 912, 1008, 1104, 1200], tag
    assert len(read_scalars(str(run_dir), "charts/episodic_return")[0]) >= 1
    _, coefficients = read_scalars(str(run_dir), "charts/distill_coeff")
    assert set(coefficients) == {1.0}  # fewer than 10 episodes finished: full distillation
    saved = read(str(run_dir / "checkpoint.pt"), SCRIPT)
    assert saved["count"] == 10 + 75 and saved["state"]["num_updates"][1] == 75  # 10 offline steps, 1200 / 16 online
    assert not (workdir / "videos").exists()


def test_copied_file_runs_every_output_path(teacher_path, tmp_path):
    # alone in a folder, run by a Python without the project: videos of the teacher, the student and the evaluation
    _, checkpoint, _ = run_copied_alone(SCRIPT, "--teacher-model-path", teacher_path, *TINY, tmp_path=tmp_path)
    qdagger.QNetwork(4).load_state_dict(checkpoint["model"])  # the student is what was saved
    assert list((tmp_path / "alone" / "videos").glob("*-teacher/*.mp4"))


@pytest.mark.parametrize(
    "phase,memory",
    [("teacher", "--checkpoint-memory"), ("offline", "--checkpoint-memory"), ("offline", "--no-checkpoint-memory")],
)
def test_a_run_stopped_in_a_phase_goes_on_there(phase, memory, teacher_path, workdir, tmp_path):
    # the teacher plays 3000 steps (a few seconds) or the student takes 220 offline steps, a checkpoint every 110
    teacher_steps, offline_steps = (3000, 10) if phase == "teacher" else (64, 220)
    flags = ["--teacher-model-path", teacher_path, *TINY, "--total-timesteps", 64, "--offline-eval-episodes", 0]
    flags += ["--teacher-steps", teacher_steps, "--offline-steps", offline_steps, "--checkpoint-every", 110, memory]
    saved = stopped_in_phase(SCRIPT, phase, flags, workdir)
    teacher_step, offline_step = saved["state"]["teacher_step"][1], saved["state"]["offline_step"][1]
    if phase == "teacher":
        assert 0 < teacher_step < teacher_steps and offline_step == 0 and saved["count"] == 0
    else:
        assert teacher_step == 64 and 110 <= offline_step < offline_steps and saved["count"] == offline_step
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
    expected = [10] if phase == "teacher" else [100, 200, 220]
    assert list(read_scalars(str(run_dir), "charts/offline/loss")[0]) == expected
    steps, _ = read_scalars(str(run_dir), "charts/teacher/episodic_return")
    if memory == "--checkpoint-memory":  # the teacher's play logged once (played again, it is logged again)
        assert list(steps) == sorted(steps) and len(steps) == len(set(steps))
    final = read(str(run_dir / "checkpoint.pt"), SCRIPT)
    assert final["finished"] and final["global_step"] == 64 and final["state"]["offline_step"][1] == offline_steps


@pytest.mark.parametrize(
    "phase_flags,where",
    [
        (["--teacher-steps", 64, "--offline-steps", 10], "offline step 1"),
        (["--teacher-steps", 0, "--offline-steps", 0, "--train-frequency", 4], "global_step 4"),
    ],
)
def test_non_finite_loss_stops_the_run_with_its_step(teacher_path, phase_flags, where, workdir, fork_script):
    # Q-values divided by a temperature of 1e-45 overflow float32: the distillation loss is NaN at once
    flags = ["--teacher-model-path", teacher_path, *TINY, *phase_flags, "--temperature", 1e-45]
    result = fork_script(SCRIPT, *flags, cwd=workdir, timeout=600)
    assert result.returncode == 1, result.stderr
    assert f"{SCRIPT}: non-finite loss at {where}; stopping" in result.stderr.splitlines()
    assert only_run_dir(workdir).exists()  # what was logged so far is kept


def refused(workdir, *flags, env=None):
    result = run_script(SCRIPT, *flags, "--capture-video", "--track", "--save-model", cwd=workdir, env=env, timeout=120)
    assert result.returncode == 2, result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith(SCRIPT)]
    assert len(error_lines) == 1, result.stderr
    assert sorted(p.name for p in workdir.iterdir()) == [], "a rejected run must leave nothing behind"
    return error_lines[0]


def test_missing_teacher_file_is_refused(workdir):
    line = refused(workdir, "--teacher-model-path", "no_such_teacher.cleanrl_model")
    assert "--teacher-model-path no_such_teacher.cleanrl_model: no such file" in line


def test_unreachable_hub_is_refused_with_the_fix(workdir):
    # offline mode fails at once where the network would be tried (and retried) first
    line = refused(workdir, env=script_env() | {"HF_HUB_OFFLINE": "1"})
    assert "cannot download the teacher cleanrl/BreakoutNoFrameskip-v4-dqn_atari-seed1/dqn_atari.cleanrl_model" in line
    assert line.endswith("pass a checkpoint saved by dqn_atari.py --save-model with --teacher-model-path")


def test_a_file_that_is_not_a_checkpoint_is_refused(workdir, tmp_path_factory):
    not_a_model = tmp_path_factory.mktemp("elsewhere") / "notes.cleanrl_model"
    not_a_model.write_text("not a torch file\n")
    line = refused(workdir, "--teacher-model-path", not_a_model)
    assert f"cannot read the teacher {not_a_model} as a weights-only torch checkpoint" in line
    assert "--teacher-model-path" in line


def test_a_teacher_for_another_game_is_refused(teacher_path, workdir):
    line = refused(workdir, "--teacher-model-path", teacher_path, "--env-id", "PongNoFrameskip-v4")
    assert "was trained on BreakoutNoFrameskip-v4, not PongNoFrameskip-v4; use --env-id BreakoutNoFrameskip-v4" in line


def test_a_run_without_an_online_gradient_step_runs_and_warns(teacher_path, workdir, fork_script):
    # learning_starts 1000 on the online clock that starts at --offline-steps 0: 64 steps never reach it
    flags = ["--teacher-model-path", teacher_path, *TINY, "--teacher-steps", 0, "--offline-steps", 0]
    result = fork_script(SCRIPT, *flags, "--total-timesteps", 64, "--learning-starts", 1000, cwd=workdir, timeout=600)
    check_ok(result)
    assert f"{SCRIPT}: warning: the run ends before its first online gradient step" in result.stdout
    assert len(read_scalars(str(only_run_dir(workdir)), "losses/loss")[0]) == 0
