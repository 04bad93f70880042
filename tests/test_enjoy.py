"""cleanrl_utils.enjoy: a model saved by a script's --save-model is evaluated with that script's own
networks and evaluation code, for one script of each family; bad input exits 2 with one line. Upstream CleanRL's
command lines (`python enjoy.py --exp-name dqn --env CartPole-v1` in cleanrl_utils/) download the model from the
repository the script's --upload-model names, here on the Hub stand-in (tests/hub_standin.py)."""

import os
import subprocess
import sys

import pytest
from test_hub_round_trip import hub_env

from budgets import JAX_TINY, TINY, VARIANT_TINY
from conftest import REPO, check_ok, only_run_dir, run_script, script_env
from hub_standin import HubStandIn

FAMILIES = {
    "ppo.py": [],
    "dqn.py": [],
    "ppo_atari.py": [],
    "sac_continuous_action.py": ["--env-id", "Pendulum-v1"],
    "ppo_atari_envpool.py": [],  # an envpool id: enjoy asks the script's env_error, not Gymnasium's registry
    "dqn_jax.py": [],  # a flax checkpoint; evaluate takes no torch device
}


def enjoy(*args, cwd, pythonpath=()):
    """Runs `python -m cleanrl_utils.enjoy ARGS` in `cwd`, with the repository and `pythonpath` folders on the path."""
    command = [sys.executable, "-m", "cleanrl_utils.enjoy", *map(str, args)]
    env = script_env() | {"PYTHONPATH": os.pathsep.join([str(REPO), *map(str, pythonpath)])}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def saved_model(script, workdir, *flags):
    check_ok(run_script(script, *(TINY | VARIANT_TINY | JAX_TINY)[script], *flags, "--save-model", cwd=workdir))
    return only_run_dir(workdir) / f"{script[:-3]}.cleanrl_model"


@pytest.mark.parametrize("script", list(FAMILIES))
def test_enjoy_evaluates_a_saved_model_with_the_scripts_code(script, workdir):
    model = saved_model(script, workdir, *FAMILIES[script])
    result = enjoy("--exp-name", script[:-3], "--model-path", model, "--eval-episodes", 2, cwd=workdir)
    check_ok(result)
    assert sum(line.startswith("episode ") for line in result.stdout.splitlines()) == 2
    assert f"{script[:-3]} on " in result.stdout and "over 2 episodes" in result.stdout
    if script in ("dqn.py", "ppo.py"):  # an ε-greedy coin, sampled actions: seeded, so a second call agrees
        again = enjoy("--exp-name", script[:-3], "--model-path", model, "--eval-episodes", 2, cwd=workdir)
        check_ok(again)
        assert again.stdout.splitlines()[-3:] == result.stdout.splitlines()[-3:]


def test_enjoy_records_video(workdir):
    model = saved_model("ppo.py", workdir)
    result = enjoy("--exp-name", "ppo", "--model-path", model, "--eval-episodes", 1, "--capture-video", cwd=workdir)
    check_ok(result)
    (video_dir,) = (workdir / "videos").iterdir()
    assert video_dir.name.startswith("CartPole-v1__ppo__enjoy__") and video_dir.name.endswith("-eval")
    assert list(video_dir.glob("*.mp4"))


def test_bad_input_exits_2_with_one_line(workdir):
    model = saved_model("dqn.py", workdir)
    (workdir / "junk.cleanrl_model").write_text("not a checkpoint")
    neither = "give the model to evaluate with --model-path, --hf-repository, or --exp-name and --env-id (the Hub repository"
    cases = [
        (["--exp-name", "nope", "--model-path", model], "--exp-name 'nope' is not a script that evaluates; choose from"),
        (["--exp-name", "dqn"], neither),
        (["--env", "CartPole-v1"], neither),
        (["--exp-name", "dqn", "--model-path", model, "--hf-repository", "a/b"], "exactly one of --model-path and --hf"),
        (["--exp-name", "dqn", "--model-path", workdir / "missing"], "cannot read --model-path"),
        (["--exp-name", "dqn", "--model-path", workdir / "junk.cleanrl_model"], "not a torch checkpoint"),
        (["--exp-name", "dqn", "--model-path", model, "--env-id", "Acrobot-v1"], "trained on CartPole-v1, not --env-id"),
        (["--exp-name", "dqn", "--model-path", model, "--env", "Acrobot-v1"], "trained on CartPole-v1, not --env-id"),
        (["--exp-name", "dqn", "--model-path", model, "--eval-episodes", 0], "--eval-episodes must be at least 1"),
        (["--exp-name", "c51", "--model-path", model], "the checkpoint was saved by dqn.py, not c51.py; use --exp-name dqn"),
        (["--hf-repository", "org/CartPole-v1-dqn-seed1"], "--hf-repository needs --exp-name"),
        (["--exp-name", "dqn", "--hf-repository", "not a repo"], "--hf-repository 'not a repo' is not a Hub repository id"),
        (
            ["--exp-name", "dqn", "--env", "CartPole-v1", "--hf-entity", "bad org"],
            "the repository 'bad org/CartPole-v1-dqn-seed1' (--hf-entity/{env_id}-{exp_name}-seed{seed}) is not a Hub",
        ),
    ]
    for flags, message in cases:
        result = enjoy(*flags, cwd=workdir)
        assert result.returncode == 2, (flags, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("enjoy: ") and message in lines[0], result.stderr
        assert "downloading" not in result.stdout


def test_without_exp_name_the_script_that_saved_the_checkpoint_evaluates_it(workdir):
    model = saved_model("dqn.py", workdir)
    result = enjoy("--model-path", model, "--eval-episodes", 1, cwd=workdir)
    check_ok(result)
    assert "dqn on CartPole-v1: " in result.stdout and "over 1 episode" in result.stdout


def test_a_checkpoint_under_a_custom_exp_name_is_tried_on_the_named_script(workdir):
    """A custom --exp-name names no script: without --exp-name enjoy cannot guess it, with the right script it
    evaluates, and with a script whose spaces differ (SAC on CartPole) it refuses with one line, no traceback."""
    check_ok(run_script("dqn.py", *TINY["dqn.py"], "--exp-name", "my_dqn", "--save-model", cwd=workdir))
    model = only_run_dir(workdir) / "my_dqn.cleanrl_model"
    result = enjoy("--model-path", model, cwd=workdir)
    assert result.returncode == 2 and "exp_name 'my_dqn' is not a script here; name the script" in result.stderr
    check_ok(enjoy("--exp-name", "dqn", "--model-path", model, "--eval-episodes", 1, cwd=workdir))
    for script in ("sac_continuous_action", "ppo_continuous_action", "dqn_atari"):
        result = enjoy("--exp-name", script, "--model-path", model, "--eval-episodes", 1, cwd=workdir)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"the checkpoint does not fit {script}.py's networks (" in lines[0], result.stderr
    # a torch file named to a JAX twin, and a flax file (what a JAX twin saves) named to a torch script
    result = enjoy("--exp-name", "dqn_jax", "--model-path", model, cwd=workdir)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "the checkpoint is a torch file but dqn_jax.py is not a torch script; name the script" in result.stderr
    import flax.serialization

    flax_file = workdir / "my_dqn_jax.cleanrl_model"
    flax_file.write_bytes(
        flax.serialization.msgpack_serialize({"model": {}, "args": {"env_id": "CartPole-v1", "exp_name": "x"}})
    )
    result = enjoy("--exp-name", "dqn", "--model-path", flax_file, cwd=workdir)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "the checkpoint is a flax (JAX) file but dqn.py is not a JAX twin; name the script that saved it" in result.stderr


def test_a_checkpoint_of_an_env_this_machine_lacks_exits_2(workdir):
    import torch

    model = saved_model("dqn.py", workdir)
    checkpoint = torch.load(model, weights_only=True)
    checkpoint["args"]["env_id"] = "NoSuchEnv-v0"
    torch.save(checkpoint, workdir / "other.cleanrl_model")
    result = enjoy("--model-path", workdir / "other.cleanrl_model", cwd=workdir)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "the checkpoint's env NoSuchEnv-v0 cannot be made here" in lines[0], result.stderr

    # a script with envs outside Gymnasium's registry answers for itself (envpool ids here)
    checkpoint["args"].update(env_id="NoSuchGame-v5", exp_name="ppo_atari_envpool")
    torch.save(checkpoint, workdir / "envpool.cleanrl_model")
    result = enjoy("--model-path", workdir / "envpool.cleanrl_model", cwd=workdir)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "the checkpoint's env NoSuchGame-v5 cannot be made here (" in lines[0], result.stderr


# upstream CleanRL's enjoy tests, as written, run in its cleanrl_utils/ folder: each downloads
# cleanrl/{env_id}-{exp_name}-seed1 from the Hub (--hf-entity cleanrl and --seed 1 by default)
UPSTREAM = [
    "python enjoy.py --exp-name dqn --env CartPole-v1 --eval-episodes 1",
    "python enjoy.py --exp-name dqn_atari --env BreakoutNoFrameskip-v4 --eval-episodes 1",
    "python enjoy.py --exp-name dqn_jax --env CartPole-v1 --eval-episodes 1",
]


@pytest.fixture
def hub(tmp_path_factory):
    hub = HubStandIn(tmp_path_factory.mktemp("hub"))
    yield hub
    hub.stop()


def run_enjoy(command, cwd, env):
    """Runs the command line `command` (a string, `python` being this Python) in `cwd` with `env` as is."""
    python, *args = command.split()
    assert python == "python"
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def upload(script, workdir, env, *flags):
    """Trains `script` with a tiny budget and pushes the run with its own --upload-model (`flags` name where)."""
    budget = (TINY | JAX_TINY)[script]
    check_ok(run_script(script, *budget, "--save-model", "--upload-model", *flags, cwd=workdir, env=env))


@pytest.mark.parametrize("command", UPSTREAM, ids=lambda c: c.split()[3])
def test_upstreams_command_lines_evaluate_the_model_pushed_to_the_default_repository(command, hub, workdir, tmp_path, request):
    words = command.split()
    exp_name, env_id = words[words.index("--exp-name") + 1], words[words.index("--env") + 1]
    repo_id = f"cleanrl/{env_id}-{exp_name}-seed1"
    env = hub_env(hub.endpoint, tmp_path / "hf_home")
    if exp_name == "dqn_atari":  # the session's dqn_atari.py --save-model run (QDagger's teacher), put there as is
        checkpoint = request.getfixturevalue("teacher_path").read_bytes()
        hub.repos[repo_id] = {"commit": "1" * 40, "files": {"dqn_atari.cleanrl_model": checkpoint}}
    else:  # the script's own --upload-model names the repository that enjoy reads
        upload(f"{exp_name}.py", workdir, env, "--hf-entity", "cleanrl")
        assert list(hub.repos) == [repo_id]
    result = run_enjoy(command, cwd=REPO / "cleanrl_utils", env=env)
    check_ok(result)
    assert f"downloading {exp_name}.cleanrl_model from {hub.endpoint}/{repo_id}\n" in result.stdout
    assert ("GET", f"/{repo_id}/resolve/main/{exp_name}.cleanrl_model") in hub.requests
    assert f"{exp_name} on {env_id}: " in result.stdout and "over 1 episode" in result.stdout


def test_the_default_repository_is_named_by_hf_entity_env_id_exp_name_and_seed(hub, workdir, tmp_path):
    env = hub_env(hub.endpoint, tmp_path / "hf_home")
    upload("dqn.py", workdir, env, "--hf-entity", "my-org", "--seed", 2)
    assert list(hub.repos) == ["my-org/CartPole-v1-dqn-seed2"]
    # upstream's module form, from the repository root, with its 10 episodes by default
    result = run_enjoy("python -m cleanrl_utils.enjoy --exp-name dqn --env-id CartPole-v1 --hf-entity my-org --seed 2",
                       cwd=REPO, env=env)  # fmt: skip
    check_ok(result)
    assert f"downloading dqn.cleanrl_model from {hub.endpoint}/my-org/CartPole-v1-dqn-seed2\n" in result.stdout
    assert "dqn on CartPole-v1: " in result.stdout and "over 10 episodes" in result.stdout
    # the file form from the repository root; offline, the cached copy is evaluated
    offline = env | {"HF_HUB_OFFLINE": "1"}
    command = "python cleanrl_utils/enjoy.py --exp-name dqn --env CartPole-v1 --hf-entity my-org --seed 2 --eval-episodes 1"
    check_ok(run_enjoy(command, cwd=REPO, env=offline))
    # a download that cannot be made stops with one line naming the repository: --hf-entity cleanrl and --seed 1
    # by default, a '/' in the env id written as '-' (as --upload-model names it), offline without a cached copy
    cases = [
        ("--exp-name dqn --env CartPole-v1", env, f"no model repository cleanrl/CartPole-v1-dqn-seed1 on {hub.endpoint}"),
        (
            "--exp-name sac_continuous_action --env-id dm_control/cartpole-swingup-v0",
            env,
            "no model repository cleanrl/dm_control-cartpole-swingup-v0-sac_continuous_action-seed1 on",
        ),
        (
            "--exp-name dqn --env CartPole-v1 --hf-entity my-org --seed 3",
            offline,
            "HF_HUB_OFFLINE is set and my-org/CartPole-v1-dqn-seed3/dqn.cleanrl_model is not in the huggingface_hub cache",
        ),
    ]
    for flags, case_env, message in cases:
        result = run_enjoy(f"python enjoy.py {flags}", cwd=REPO / "cleanrl_utils", env=case_env)
        assert result.returncode == 2, (flags, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("enjoy: ") and message in lines[0], result.stderr
