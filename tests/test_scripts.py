"""What every script must do (script contract §3, §5, §7), run as a user would: a subprocess.

Every script: the file copied alone into an empty folder runs with --capture-video, --save-model and --track
(offline) at a tiny budget, one run for all three paths. PPO scripts: their default flags and validation cases (the
value-based ones have theirs in test_value_based_scripts.py).
"""

import importlib.util
import time

import pytest

from budgets import PPO_TINY, TINY, VIDEO_ENV
from cleanrl_utils.report import read_scalars
from conftest import (
    PPO_TAGS,
    check_checkpoint_and_resume,
    check_ok,
    check_warns_and_runs,
    only_run_dir,
    run_copied_alone,
    run_script,
)

ALL = list(TINY)  # every script but qdagger, whose teacher tests/test_qdagger.py makes
PPO = list(PPO_TINY)
CONTINUOUS = ["ppo_continuous_action.py", "rpo_continuous_action.py"]


@pytest.mark.parametrize("script", PPO)
def test_default_flags_then_a_checkpoint_and_resume(script, workdir, fork_script):
    # two iterations with a checkpoint after each, then two more from the last one with --resume
    run_dir = check_checkpoint_and_resume(script, TINY[script], 1, workdir, run=fork_script)
    steps, _ = read_scalars(str(run_dir), "charts/SPS")
    batch = steps[0]
    assert list(steps) == [batch, 2 * batch, 3 * batch, 4 * batch]  # one point per iteration, each once
    for tag in PPO_TAGS:
        assert list(read_scalars(str(run_dir), tag)[0]) == list(steps), tag
    assert not (workdir / "videos").exists()


@pytest.mark.parametrize("script", ALL)
def test_copied_file_runs_every_output_path(script, tmp_path):
    run_copied_alone(script, *TINY[script], *VIDEO_ENV.get(script, []), tmp_path=tmp_path)


@pytest.mark.parametrize("script", ALL)
def test_track_without_a_wandb_login_exits_2_and_leaves_nothing(script, workdir, tmp_path_factory, fork_script):
    home = tmp_path_factory.mktemp("home")  # no ~/.netrc, no W&B settings
    env = {"WANDB_MODE": "online", "HOME": str(home)}
    result = fork_script(script, *TINY[script], "--track", cwd=workdir, env=env, unset=["WANDB_API_KEY"])
    assert result.returncode == 2, result.stderr
    # found before W&B could ask for a key at its login prompt (which waits forever at a terminal)
    assert f"{script}: --track could not start a W&B run (no API key)" in result.stderr and "wandb login" in result.stderr
    # MuJoCo itself logs HalfCheetah's deprecation warning to MUJOCO_LOG.TXT whenever the env is made
    assert sorted(p.name for p in workdir.iterdir() if p.name != "MUJOCO_LOG.TXT") == []


def test_runs_started_in_the_same_second_get_their_own_directories(workdir):
    # other runs already own this second and the next ones: the new run must not write into theirs
    now = int(time.time())
    taken = [workdir / "runs" / f"CartPole-v1__ppo__1__{t}" for t in range(now, now + 30)]
    for path in taken:
        path.mkdir(parents=True)
    check_ok(run_script("ppo.py", *TINY["ppo.py"], cwd=workdir))
    assert all(not any(path.iterdir()) for path in taken)
    (new,) = set((workdir / "runs").iterdir()) - set(taken)
    assert new.name.startswith("CartPole-v1__ppo__1__") and any(new.iterdir())


@pytest.mark.parametrize("script", PPO)
def test_a_run_without_a_gradient_step_runs_with_a_warning(script, workdir, fork_script):
    # CleanRL's smoke tests run budgets this small: below one batch the run ends before its first update
    result = fork_script(script, "--total-timesteps", 10, cwd=workdir, timeout=300)
    check_warns_and_runs(result, script, "--total-timesteps below one batch", cwd=workdir, loss_tag="losses/value_loss")


def test_non_finite_loss_stops_the_run_with_its_step(workdir, fork_script):
    # a value coefficient of 1e38 overflows float32 on CartPole's first update
    result = fork_script("ppo.py", *TINY["ppo.py"], "--vf-coef", 1e38, cwd=workdir)
    assert result.returncode == 1
    assert "ppo.py: non-finite loss at global_step 128; stopping" in result.stderr.splitlines()
    assert only_run_dir(workdir).exists()  # what was logged so far is kept


WRONG_SPACE = {
    "ppo.py": [
        ("--env-id", "Pendulum-v1", "Pendulum-v1 has Box(-2.0, 2.0, (1,), float32) actions; ppo.py supports Discrete ones")
    ],
    "ppo_atari.py": [
        ("--env-id", "CartPole-v1", "CartPole-v1 is not an ale-py Atari game"),
    ],
    "ppo_continuous_action.py": [
        ("--env-id", "CartPole-v1", "CartPole-v1 has Discrete(2) actions; ppo_continuous_action.py supports 1-D Box ones")
    ],
}
UNKNOWN_ENV = {"ppo.py": "CartPol-v1", "ppo_atari.py": "BreakoutNoFrameskip-v9", "ppo_continuous_action.py": "HalfCheetah-v99"}
SIZES = "--num-steps, --num-minibatches, --update-epochs must be at least 1"  # after --total-timesteps, --num-envs
COMMON_BAD = [
    (["--num-minibatches", 3], "does not split into --num-minibatches 3"),
    (["--num-envs", 1, "--num-steps", 4, "--num-minibatches", 4], "cannot normalise advantages"),
    (["--num-steps", 0], SIZES),
    (["--num-minibatches", 0], SIZES),
    (["--total-timesteps", -5], SIZES),  # once ran silently and saved an untrained model
    (["--gamma", 1.5], "--gamma and --gae-lambda must be in [0, 1]"),
    (["--gae-lambda", -0.1], "--gamma and --gae-lambda must be in [0, 1]"),
    (["--learning-rate", 0], "--learning-rate must be positive and finite in float32, got 0.0"),
    (["--learning-rate", "inf"], "--learning-rate must be positive and finite in float32, got inf"),
    (["--learning-rate", 1e38], "--learning-rate must be positive and finite in float32, got 1e+38"),  # Adam: lr / 0.1
    (["--exp-name", "x" * 300], "must be a folder name: up to 150 letters"),
    (["--seed", -1], "--seed must be in [0, 2**32 - 1]"),
    (["--exp-name", "sweep/a"], "--exp-name 'sweep/a' must be a folder name"),
    (["--env-id", "no_such_module:Foo-v0"], "cannot make 'no_such_module:Foo-v0': No module named 'no_such_module'"),
]
CASES = [(s, list(flags), message) for s in PPO for flags, message in COMMON_BAD]
# ppo.py's --upload-model refusals (no --save-model, no token, bad repository id) are in test_hub_round_trip.py
UPLOAD_WITHOUT_SAVE = "--upload-model pushes the saved model and its evaluation; add --save-model"
CASES += [(s, ["--upload-model", "--no-save-model"], UPLOAD_WITHOUT_SAVE) for s in PPO if s != "ppo.py"]
CASES += [(s, [flag, env_id], message) for s, cases in WRONG_SPACE.items() for flag, env_id, message in cases]
CASES += [(s, ["--env-id", env_id], "doesn't exist") for s, env_id in UNKNOWN_ENV.items()]
if importlib.util.find_spec("shimmy") is None:  # CleanRL's own smoke test runs a dm_control id: say what is missing
    NO_SHIMMY = "cannot make 'dm_control/cartpole-balance-v0': No module named 'shimmy'"
    CASES += [(s, ["--env-id", "dm_control/cartpole-balance-v0"], NO_SHIMMY) for s in CONTINUOUS]


@pytest.mark.parametrize("script,flags,message", CASES, ids=[f"{s}:{' '.join(map(str, f))}" for s, f, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(script, flags, message, workdir, fork_script):
    result = fork_script(script, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    assert result.returncode == 2, result.stderr
    error_lines = [line for line in result.stderr.splitlines() if line.startswith(script)]
    assert len(error_lines) == 1 and message in error_lines[0], result.stderr
    # the spaces are checked on the env made from --env-id, and MuJoCo logs HalfCheetah's deprecation warning to
    # MUJOCO_LOG.TXT whenever that env is made; the run itself leaves nothing
    left = sorted(p.name for p in workdir.iterdir() if p.name != "MUJOCO_LOG.TXT")
    assert left == [], "a rejected run must leave nothing behind"
