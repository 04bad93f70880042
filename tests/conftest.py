"""Shared helpers: run a script as a user would (a subprocess), import a script's top-level pieces."""

import atexit
import importlib.util
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import pytest

# a job started in the background from a non-interactive shell (`bash .ci/run &`) inherits SIGINT ignored, and so would
# every script a test starts: the Ctrl-C tests would then wait for nothing. A Python handler here is reset to the
# default in each child at exec, as at a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "cleanrl"
# the scalars every PPO-family script logs once per iteration (script contract §5)
PPO_TAGS = [
    "charts/SPS",
    "charts/learning_rate",
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/old_approx_kl",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
]


# one compilation cache per test session (xdist workers inherit the controller's), removed when the process that made
# it exits, however its session ended; a folder given in CLEANRL_TEST_JAX_CACHE is the user's, and stays
if not os.environ.get("CLEANRL_TEST_JAX_CACHE"):
    os.environ["CLEANRL_TEST_JAX_CACHE"] = tempfile.mkdtemp(prefix="cleanrl-jax-cache-")
    atexit.register(shutil.rmtree, os.environ["CLEANRL_TEST_JAX_CACHE"], True)
JAX_CACHE = os.environ["CLEANRL_TEST_JAX_CACHE"]


def script_env():
    env = dict(os.environ)
    env.update(
        WANDB_MODE="disabled",
        OMP_NUM_THREADS="1",  # tests run two at a time on small machines
        SDL_VIDEODRIVER="dummy",
        PYTHONUNBUFFERED="1",
        # the JAX scripts: one XLA thread as OMP_NUM_THREADS=1 gives torch, and compiled programs kept on disk
        # for the session, so runs with the same network shapes compile once
        XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
        JAX_COMPILATION_CACHE_DIR=JAX_CACHE,
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1",
    )
    return env


# what the script server's imports (torch, JAX, Python itself) read from the environment as they load: a run that
# changes one of these gets a fresh interpreter (PYTHONPATH is honoured in a forked child too)
IMPORT_TIME_VARIABLES = ("OMP_", "MKL_", "OPENBLAS_", "JAX_", "XLA_", "TORCH", "PYTORCH_", "CUDA", "LD_", "PYTHON")


def run_script(script, *args, cwd, timeout=600, env=None):
    """Runs `cleanrl/<script>` (or a path) with `args` in `cwd`, as `python SCRIPT ARGS` would, in the environment
    `env` (`script_env()` by default). The run is a forked child of this process's script server (`script_forker`:
    torch, tyro, gymnasium and JAX imported once, the same code path without their seconds of imports), unless
    `env` changes a variable those imports read as they load (`needs_a_new_interpreter`): then a new interpreter.
    (Fresh interpreters run upstream's commands, the copied-alone runs and torchrun's ranks.) Returns an object
    with `returncode`, `stdout` and `stderr`, as `subprocess.run(..., text=True)` does; raises
    subprocess.TimeoutExpired after `timeout` seconds."""
    path, env = script if os.path.isabs(str(script)) else SCRIPTS / script, env or script_env()
    command = [sys.executable, str(path), *map(str, args)]
    if needs_a_new_interpreter(env):
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    forker = script_forker()
    result = forker.run(path, args, cwd, env=env, timeout=timeout, unset=[k for k in forker.env if k not in env])
    if result.returncode is None:
        raise subprocess.TimeoutExpired(command, timeout, result.stdout, result.stderr)
    return result


def start_script(script, *args, cwd, env=None):
    """Starts `cleanrl/<script>` (or a path) as `run_script` runs it, and leaves it running: for the tests that signal a
    run or watch it. Returns a `subprocess.Popen` (both outputs piped, text) or, forked, a `forked_scripts.ForkedProcess`
    that answers the same calls."""
    path, env = script if os.path.isabs(str(script)) else SCRIPTS / script, env or script_env()
    if needs_a_new_interpreter(env):
        command = [sys.executable, str(path), *map(str, args)]
        return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    forker = script_forker()
    return forker.start(path, args, cwd, env=env, unset=[k for k in forker.env if k not in env])


def needs_a_new_interpreter(env):
    """Whether a script run in `env` must start a new interpreter rather than fork from the script server: where the
    test asks to change a variable the server's imports read as they load, or a $PYTHONPATH folder holds a
    sitecustomize (it runs only at start-up)."""
    base = script_env()
    # what the test asks to change; what this process's own libraries set since (cv2's LD_LIBRARY_PATH, for its
    # children) goes to the child as it would to a new interpreter, and reads the same there
    asked = {k for k in base.keys() | env.keys() if base.get(k) != env.get(k)} - {"PYTHONPATH"}
    # a folder of $PYTHONPATH joins sys.path in a forked child too
    folders = [Path(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    at_startup = any((f / name).exists() for f in folders for name in ("sitecustomize.py", "usercustomize.py"))
    return at_startup or any(k.startswith(IMPORT_TIME_VARIABLES) for k in asked)


_FORKERS = {}


def script_forker(python=sys.executable):
    """This process's `forked_scripts.ScriptForker` whose server is `python` (one per test worker and Python, started
    in `script_env()` at first use, closed at exit)."""
    if python not in _FORKERS:
        from forked_scripts import ScriptForker

        _FORKERS[python] = ScriptForker(script_env(), python=python)
        atexit.register(_FORKERS[python].close)
    return _FORKERS[python]


@pytest.fixture(scope="session")
def fork_script():
    """`run_script` for the many refusal tests, always forked (`script_forker`); `unset` names variables to remove."""

    def run(script, *args, cwd, timeout=120, env=None, unset=()):
        path = script if os.path.isabs(str(script)) else SCRIPTS / script
        return script_forker().run(path, args, cwd, env=env, timeout=timeout, unset=unset)

    return run


def run_benchmark(command, tmp_path, **env):
    """Runs a benchmark script (`command`, from the repository root) writing under `tmp_path` ($OUT, $RESULTS)
    with this Python ($PYTHON) and the extra environment `env`; checks it succeeded and returns the result."""
    result = subprocess.run(
        command,
        cwd=REPO,
        env=script_env() | {"OUT": str(tmp_path / "out"), "RESULTS": str(tmp_path), "PYTHON": sys.executable} | env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result


def check_ok(result):
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    )


def check_refused(result, script, message, cwd):
    """A refused start (script contract §3): exit code 2, exactly one stderr line that names the script
    and contains `message`, and nothing left in `cwd`."""
    assert result.returncode == 2, result.stderr
    error_lines = result.stderr.strip().splitlines()
    assert len(error_lines) == 1 and error_lines[0].startswith(script) and message in error_lines[0], result.stderr
    assert sorted(p.name for p in Path(cwd).iterdir()) == [], "a rejected run must leave nothing behind"


def only_run_dir(cwd):
    """The single run directory a script made under `cwd/runs`."""
    runs = list((Path(cwd) / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


GRADIENT_STEP_WARNING = "{script}: warning: the run ends before its first gradient step"


def check_warns_and_runs(result, script, reason=None, cwd=None, loss_tag=None, alone=False):
    """A run too short for a gradient step: not a refusal but a run (exit code 0) that says so on stdout.
    With `reason`, the exact line `<script>: warning: the run ends before its first gradient step (<reason>)` is one of
    stdout's lines; without one, that text up to the reason stands somewhere in stdout. With `alone`, that line is
    also the only stdout line that mentions "warning". With `cwd`, the script made a single run directory there (which
    is returned); with `loss_tag` as well, that tag has no point in it."""
    check_ok(result)
    warning = GRADIENT_STEP_WARNING.format(script=script)
    if reason is None:
        assert warning in result.stdout, result.stdout[-3000:]
    else:
        warning += f" ({reason})"
        assert warning in result.stdout.splitlines(), result.stdout[-3000:]
    if alone:
        assert [line for line in result.stdout.splitlines() if "warning" in line] == [warning], result.stdout[-3000:]
    if cwd is None:
        assert loss_tag is None, "a loss tag is read from the run directory under `cwd`"
        return None
    run_dir = only_run_dir(cwd)
    if loss_tag is not None:
        from cleanrl_utils.report import read_scalars

        assert len(read_scalars(str(run_dir), loss_tag)[0]) == 0, loss_tag
    return run_dir


def check_video_refusals(script, cwd, fork_script):
    """A MuJoCo script asked for --capture-video on InvertedPendulum-v5 where no frame can be rendered is refused
    at start (`check_refused`: exit code 2, one stderr line, nothing left in `cwd`): with MUJOCO_GL=glfw and no
    DISPLAY, the line says it "cannot render InvertedPendulum-v5 with MUJOCO_GL=glfw" and stderr says what headless
    machines need (egl); with MUJOCO_GL=osmesa (which fails as the env is made), it "cannot make 'InvertedPendulum-v5'"
    and stderr names MUJOCO_GL=osmesa. `fork_script` is conftest's fixture of that name."""
    # GLFW needs a display; without one a frame cannot be rendered, which must show before training
    env = {"MUJOCO_GL": "glfw"}
    result = fork_script(script, "--env-id", "InvertedPendulum-v5", "--capture-video", cwd=cwd, env=env, unset=["DISPLAY"])
    check_refused(result, script, "cannot render InvertedPendulum-v5 with MUJOCO_GL=glfw", cwd)
    assert "headless machines need" in result.stderr and "egl" in result.stderr
    # a GL back-end that fails as the env is made says which one was asked for
    env["MUJOCO_GL"] = "osmesa"
    result = fork_script(script, "--env-id", "InvertedPendulum-v5", "--capture-video", cwd=cwd, env=env, unset=["DISPLAY"])
    check_refused(result, script, "cannot make 'InvertedPendulum-v5'", cwd)
    assert "MUJOCO_GL=osmesa" in result.stderr


PROGRESS_LINE = re.compile(
    r"global_step=\d+, \d+\.\d% of \d+, episodic_(return|length)\(last \d+\)=(-?[\d.]+|n/a), "
    r"(distill_coeff=[\d.]+, )?SPS=\d+, \d+:\d\d:\d\d left"
)


_BARE_PYTHON = []


def bare_python():
    """A Python that has the project's dependencies but not the project (script contract §1, §7): a venv without pip
    whose `deps.pth` holds the path of this Python's site-packages. A path line adds the folder to `sys.path`
    without running the `.pth` files in it, so torch, gymnasium and the rest import and the editable install's
    finder (which makes `cleanrl_utils` importable from any folder) does not load. Made once per process."""
    if not _BARE_PYTHON:
        import sysconfig

        folder = Path(tempfile.mkdtemp(prefix="cleanrl-bare-python-"))
        atexit.register(shutil.rmtree, folder, True)  # after the bare forker's server, which closes first (registered later)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        (folder / "lib" / version / "site-packages" / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        python = folder / "bin" / "python"
        probe = "import importlib.util, torch, gymnasium; assert importlib.util.find_spec('cleanrl_utils') is None"
        subprocess.run([str(python), "-c", probe], check=True, cwd=folder)
        _BARE_PYTHON.append(python)
    return _BARE_PYTHON[0]


def bare_forker():
    """A `forked_scripts.ScriptForker` whose server is `bare_python()`: refusals of copied-alone scripts in forked
    children, without paying the imports each time."""
    return script_forker(str(bare_python()))


def run_copied_alone(script, *args, tmp_path):
    """Copies cleanrl/<script> alone into an empty folder (a researcher's copy-and-edit) and runs it there, with a
    Python that has the dependencies but not this project (`bare_python`), with `args` and --capture-video,
    --save-model and --track (W&B offline): every output path in one run. Checks what such a run must leave:
    progress lines in the standard form (`PROGRESS_LINE`), training and evaluation videos, a checkpoint of tensors
    and plain values that loads with weights_only=True (a JAX script's: a flax msgpack file of arrays and plain
    values), 10 `eval/episodic_return` points, an offline W&B run that got every video; a checkpoint cadence that
    is on by default says in one line that it is off, and `--resume` and `--upload-model` stop at start-up with
    exit code 2 and one line naming cleanrl_utils. Returns (run_dir, checkpoint, eval_returns).
    """
    from cleanrl_utils.report import read_scalars

    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(SCRIPTS / script, alone / script)
    env = script_env() | {"WANDB_MODE": "offline"}
    python, refused_in = str(bare_python()), tmp_path / "refused"
    refused_in.mkdir()
    for flag in (["--resume", "runs"], ["--upload-model", "--save-model"]):  # forked from a server of that Python
        refused = bare_forker().run(alone / script, [*args, *flag], refused_in, env=env, timeout=300)
        check_refused(refused, script, f"{flag[0]} needs cleanrl_utils (pip install -e . in a cleanrl clone)", refused_in)
    command = [python, str(alone / script), *map(str, args), "--capture-video", "--save-model", "--track"]
    result = subprocess.run(command, cwd=alone, env=env, capture_output=True, text=True, timeout=600)
    check_ok(result)
    off = f"{script}: checkpoints are off: they need cleanrl_utils (pip install -e . in a cleanrl clone)"
    default_on = bool(re.search(r"^    checkpoint_every: int = [1-9]", (SCRIPTS / script).read_text(), re.M))
    assert (off in result.stdout.splitlines()) == default_on, result.stdout[-2000:]
    # the progress line: the step, the share of the budget done, the recent score, the speed and the time left
    progress = [line for line in result.stdout.splitlines() if line.startswith("global_step=")]
    assert progress and all(PROGRESS_LINE.fullmatch(line) for line in progress), progress
    run_dir = only_run_dir(alone)
    for folder in (run_dir.name, f"{run_dir.name}-eval"):
        videos = list((alone / "videos" / folder).glob("*.mp4"))
        assert videos and all(v.stat().st_size > 0 for v in videos), folder
    checkpoint = read_checkpoint(run_dir / f"{script[:-3]}.cleanrl_model")
    assert checkpoint["args"]["env_id"] and checkpoint["args"]["seed"] == 1
    steps, returns = read_scalars(str(run_dir), "eval/episodic_return")
    assert list(steps) == list(range(10)) and all(math.isfinite(r) for r in returns)
    (offline_run,) = (alone / "wandb").glob("offline-run-*")
    assert list(offline_run.glob("*.wandb"))
    # the training and the evaluation videos share file names in different folders: both go up
    made = list((alone / "videos").glob("*/*.mp4"))
    assert len(list(offline_run.glob("files/media/videos/*.mp4"))) == len(made)
    return run_dir, checkpoint, returns


def check_checkpoint_and_resume(script, flags, every, cwd, run=None):
    """A script's checkpoint and --resume path at a tiny budget (script contract §5): `flags` (which hold
    --total-timesteps T) with --checkpoint-every `every` run to the end and leave one run folder whose checkpoint.pt
    is this script's, finished at the run's last step; --resume with --total-timesteps 2T goes on in the same folder
    and log (a second events file), to a later step, with each point of the `losses/` tags logged once and every
    tag's steps in order. `run` runs a command line (conftest's `run_script` by default, or the `fork_script`
    fixture). Returns the run folder."""
    from cleanrl_utils.checkpoint import read
    from cleanrl_utils.report import _accumulator

    run = run or run_script
    flags = [str(f) for f in flags]
    total = int(flags[flags.index("--total-timesteps") + 1])
    check_ok(run(script, *flags, "--checkpoint-every", every, cwd=cwd))
    run_dir = only_run_dir(cwd)
    first = read(str(run_dir / "checkpoint.pt"), Path(script).name)
    assert first["finished"] and 0 < first["global_step"] <= total, {k: first[k] for k in ("finished", "global_step")}
    resumed = run(script, "--resume", run_dir, "--total-timesteps", 2 * total, cwd=cwd)  # the saved flags, a larger budget
    check_ok(resumed)
    assert f"from its checkpoint at global_step {first['global_step']}" in resumed.stdout  # the resume says where from
    assert only_run_dir(cwd) == run_dir and len(list(run_dir.glob("events.out.tfevents.*"))) == 2
    second = read(str(run_dir / "checkpoint.pt"), Path(script).name)
    assert second["finished"] and first["global_step"] < second["global_step"] <= 2 * total
    accumulator = _accumulator(str(run_dir))
    for tag in accumulator.Tags()["scalars"]:
        steps = [e.step for e in accumulator.Scalars(tag)]
        assert steps == sorted(steps), tag
        if tag.startswith("losses/"):
            assert len(steps) == len(set(steps)), tag
    return run_dir


def stopped_in_phase(script, phase, flags, cwd):
    """Runs a QDagger script with `flags` in `cwd` and stops it with SIGTERM in `phase`: "teacher" once the teacher's
    score is printed (it then plays), "offline" once the first checkpoint is written (at an offline gradient step).
    Returns the run's checkpoint, written at the stop, as `checkpoint.read` gives it."""
    import signal
    import time

    from cleanrl_utils.checkpoint import read

    process = start_script(script, *flags, cwd=cwd)
    if phase == "teacher":
        for line in process.stdout:  # until the score's line, or the run's end
            if "mean episodic return" in line:
                break
    deadline = time.time() + 300
    while phase == "offline" and process.poll() is None and time.time() < deadline:
        if list(Path(cwd).glob("runs/*/checkpoint.pt")):
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 143 and "stopped by SIGTERM at global_step 0; saved in " in stderr, stderr[-2000:]
    return read(str(only_run_dir(cwd) / "checkpoint.pt"), script)


def read_checkpoint(path):
    """A checkpoint written by --save-model: a torch script's loads with weights_only=True and holds tensors under
    "model"; a JAX script's (`*_jax*.py`) is a flax msgpack file whose "model" leaves are all numpy arrays."""
    if "_jax" in Path(path).parent.name or "_jax" in Path(path).name:
        import flax.serialization
        import jax
        import numpy as np

        checkpoint = flax.serialization.msgpack_restore(Path(path).read_bytes())
        leaves = jax.tree_util.tree_leaves(checkpoint["model"])
        assert leaves and all(isinstance(v, np.ndarray) for v in leaves)
        return checkpoint
    import torch

    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in checkpoint["model"].values())
    return checkpoint


def final_return(run_dir, last=20):
    """Mean episodic return of a run's last `last` episodes, read from its TensorBoard events."""
    from cleanrl_utils.report import read_scalars

    _, returns = read_scalars(str(run_dir), "charts/episodic_return")
    assert len(returns) >= last
    return float(sum(returns[-last:]) / last)


def procgen_missing():
    """Why envpool's Procgen games cannot be made here (they need the Qt 5 runtime, Debian's libqt5gui5), or None."""
    import envpool

    try:
        envpool.make_spec("StarpilotEasy-v0")
    except ImportError as e:
        return (str(e).splitlines() or ["cannot load envpool's Procgen games"])[0]
    return None


IN_CI = os.environ.get("CI") == "true"


def missing_tool(reason):
    """A test that needs a tool this machine lacks skips, saying `reason`. Under CI (`CI=true`), where `.ci/run`
    installs the tool, it fails instead: a CI run that tested less than it should is not green."""
    if IN_CI:
        pytest.fail(f"CI=true: {reason}; .ci/run installs it, so this run tested less than CI must", pytrace=False)
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]  # -rs gives every skip this line: name the test
    pytest.skip(f"{test}: {reason}" if test else reason)


def load_script(name):
    """Imports `cleanrl/<name>.py` as a module (its `__main__` block does not run)."""
    spec = importlib.util.spec_from_file_location(f"script_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def made_once(tmp_path_factory, name, make):
    """The folder `name` that `make(folder)` filled once per test session, whichever xdist worker asked first; the
    others wait for it (a file lock) and share it. Returns the folder."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root  # the workers' common folder
    folder = root / f"shared-{name}"
    with FileLock(str(root / f"shared-{name}.lock")):
        if not (folder / ".made").exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed attempt left
            folder.mkdir()
            make(folder)
            (folder / ".made").touch()
    return folder


TEACHER_FLAGS = ["--total-timesteps", 600, "--learning-starts", 300, "--buffer-size", 1000, "--save-model"]


def run_saved(script, flags, folder):
    """Runs `script` with `flags` in `folder` and checks it succeeded (a `made_once` maker)."""
    check_ok(run_script(script, *flags, cwd=folder))


@pytest.fixture(scope="session")
def teacher_path(tmp_path_factory):
    """A (barely trained) Breakout teacher for qdagger_dqn_atari_impalacnn.py, saved by dqn_atari.py --save-model."""
    make = partial(run_saved, "dqn_atari.py", TEACHER_FLAGS)
    return only_run_dir(made_once(tmp_path_factory, "teacher", make)) / "dqn_atari.cleanrl_model"


@pytest.fixture(scope="session")
def saved_jax_teacher_path(tmp_path_factory):
    """A (barely trained) Breakout teacher for qdagger_dqn_atari_jax_impalacnn.py, saved by dqn_atari_jax.py --save-model."""
    make = partial(run_saved, "dqn_atari_jax.py", TEACHER_FLAGS)
    return only_run_dir(made_once(tmp_path_factory, "jax_teacher", make)) / "dqn_atari_jax.cleanrl_model"


def stop_process(process, timeout=10):
    """Stops a server the tests started, by its PID: SIGTERM, then SIGKILL after `timeout` seconds."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)
