"""The Hugging Face Hub upload: one module, `cleanrl_utils/huggingface.py`, that every script imports only under
`--upload-model`. The Hub is a local stand-in (tests/hub_standin.py) reached through the real huggingface_hub client via
HF_ENDPOINT.

The module is tested directly (its push of a made-up run for a torch and a JAX script, its model card, retries and
refusals); each script is checked to call it with its algorithm's name, last, after its evaluation; the whole round
trip (train, upload, `cleanrl_utils.enjoy --hf-repository`) runs in CI for one torch and one JAX script (FAMILY), and for
every other script with `pytest -m hub_all`. A script copied alone refuses `--upload-model` in one line."""

import json
import re
import shutil
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from budgets import JAX_TINY, QDAGGER_TINY, TINY, VARIANT_TINY, VIDEO_ENV
from cleanrl_utils.enjoy import scripts_that_evaluate
from cleanrl_utils.report import read_scalars
from conftest import REPO, SCRIPTS, check_ok, check_refused, only_run_dir, read_checkpoint, run_script, script_env
from hub_standin import HubStandIn

UPLOAD = [*TINY["ppo.py"], "--save-model", "--upload-model"]
REPO_ID = "standin-user/CartPole-v1-ppo-seed1"  # the token's user (whoami), CleanRL's repository name
PUSHERS = sorted(p.name for p in SCRIPTS.glob("*.py") if "hub.push_to_hub(" in p.read_text())
QDAGGER = "qdagger_dqn_atari_impalacnn.py"
QDAGGER_JAX = "qdagger_dqn_atari_jax_impalacnn.py"
FAMILY = ["ppo.py", "dqn_jax.py"]  # the whole round trip in CI: a torch and a JAX checkpoint
# the name the model card gives each script's algorithm (its model-index name and title)
ALGORITHM = {
    "ppo.py": "PPO",
    "ppo_atari.py": "PPO",
    "ppo_continuous_action.py": "PPO",
    "ppo_continuous_action_playground.py": "PPO",
    "rpo_continuous_action.py": "RPO",
    "dqn.py": "DQN",
    "dqn_atari.py": "DQN",
    "c51.py": "C51",
    "c51_atari.py": "C51",
    "qr_dqn.py": "QR-DQN",
    "qr_dqn_atari.py": "QR-DQN",
    "pqn.py": "PQN",
    "qdagger_dqn_atari_impalacnn.py": "QDagger",
    "rainbow_atari.py": "Rainbow",
    "sac_continuous_action.py": "SAC",
    "td3_continuous_action.py": "TD3",
    "ddpg_continuous_action.py": "DDPG",
    "sac_atari.py": "SAC-discrete",
    "ppo_atari_lstm.py": "PPO-LSTM",
    "ppo_trxl.py": "PPO-TrXL",
    "ppo_rnd_envpool.py": "PPO-RND",
    "pqn_atari_envpool.py": "PQN",
    "pqn_atari_envpool_lstm.py": "PQN-LSTM",
    "ppo_procgen.py": "PPO",
    "ppg_procgen.py": "PPG",
    "ppo_atari_multigpu.py": "PPO",
    "ppo_atari_envpool.py": "PPO",
    "ppo_pettingzoo_ma_atari.py": "PPO self-play",
    "sac_continuous_action_jax.py": "SAC (JAX)",
    "dqn_jax.py": "DQN (JAX)",
    "c51_jax.py": "C51 (JAX)",
    "dqn_atari_jax.py": "DQN (JAX)",
    "c51_atari_jax.py": "C51 (JAX)",
    "td3_continuous_action_jax.py": "TD3 (JAX)",
    "ddpg_continuous_action_jax.py": "DDPG (JAX)",
    "ppo_atari_envpool_xla_jax.py": "PPO (JAX)",
    "ppo_atari_envpool_xla_jax_scan.py": "PPO (JAX)",
    "qdagger_dqn_atari_jax_impalacnn.py": "QDagger (JAX)",
}


@pytest.fixture
def hub(tmp_path_factory):
    hub = HubStandIn(tmp_path_factory.mktemp("hub"))
    yield hub
    hub.stop()


def hub_env(endpoint, hf_home, token="fake"):
    """The scripts' test env pointed at `endpoint`, with its own huggingface_hub home (no saved token, empty cache)."""
    env = {k: v for k, v in script_env().items() if not k.startswith(("HF_", "HUGGING_FACE_"))}
    env |= {"HF_ENDPOINT": endpoint, "HF_HOME": str(hf_home), "HF_HUB_DISABLE_TELEMETRY": "1"}
    if token is not None:
        env["HF_TOKEN"] = token
    return env


def closed_port_endpoint():
    """An endpoint on 127.0.0.1 where nothing listens (an unreachable Hub)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def enjoy(*args, cwd, env):
    command = [sys.executable, "-m", "cleanrl_utils.enjoy", *map(str, args)]
    return subprocess.run(command, cwd=cwd, env=env | {"PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600)


def test_every_script_that_evaluates_a_saved_model_can_push_it():
    assert len(PUSHERS) >= 15 and "ppo.py" in PUSHERS
    assert {f"{name}.py" for name in scripts_that_evaluate()} <= set(PUSHERS)
    assert set(ALGORITHM) == set(PUSHERS)


@pytest.mark.parametrize("script", [s if s in FAMILY else pytest.param(s, marks=pytest.mark.hub_all) for s in PUSHERS])
def test_upload_pushes_the_run_and_enjoy_evaluates_it_from_the_hub(script, hub, workdir, tmp_path, request):
    exp_name = script[: -len(".py")]
    env = hub_env(hub.endpoint, tmp_path / "hf_home")
    if script in (QDAGGER, QDAGGER_JAX):
        teacher = request.getfixturevalue("teacher_path" if script == QDAGGER else "saved_jax_teacher_path")
        budget = ["--teacher-model-path", teacher, *QDAGGER_TINY]
    else:
        budget = (TINY | VARIANT_TINY | JAX_TINY)[script]
    flags = [*budget, *VIDEO_ENV.get(script, []), "--save-model", "--upload-model", "--capture-video"]
    result = run_script(script, *flags, cwd=workdir, env=env)
    check_ok(result)
    run_dir = only_run_dir(workdir)
    checkpoint_name = f"{exp_name}.cleanrl_model"
    saved_args = read_checkpoint(run_dir / checkpoint_name)["args"]
    env_id = saved_args["env_id"]
    repo_id = f"standin-user/{env_id}-{exp_name}-seed1"
    assert f"model uploaded to {hub.endpoint}/{repo_id}" in result.stdout
    files = hub.files(repo_id)
    (events,) = run_dir.glob("events.out.tfevents.*")
    assert sorted(files) == sorted([checkpoint_name, "README.md", "replay.mp4", script, events.name])
    assert files[checkpoint_name] == (run_dir / checkpoint_name).read_bytes()
    assert files[script] == (SCRIPTS / script).read_bytes()
    assert files[events.name] == events.read_bytes()  # the writer was closed before the upload
    eval_videos = {p.read_bytes() for p in (workdir / "videos" / f"{run_dir.name}-eval").glob("*.mp4")}
    assert files["replay.mp4"] in eval_videos
    card = files["README.md"].decode()
    assert card == (run_dir / "README.md").read_text()  # the model card is kept with the run too
    _, returns = read_scalars(str(run_dir), "eval/episodic_return")
    assert len(returns) == 10
    assert f"{np.mean(returns):.2f} ± {np.std(returns):.2f}" in card
    algorithm = ALGORITHM[script]
    assert f"- name: {algorithm}\n" in card and f"# {algorithm} agent playing {env_id}\n" in card
    assert "library_name: cleanrl" in card and f"- {env_id}\n" in card
    assert f"python {script} " + " ".join(map(str, flags)) in card
    assert all(f"| {key} | {value} |" in card for key, value in saved_args.items())
    framework = "| jax | flax | optax | gymnasium |" if "_jax" in script else "| torch | gymnasium |"
    assert framework in card.replace("python | ", "")
    assert f"python -m cleanrl_utils.enjoy --exp-name {exp_name} --hf-repository {repo_id}" in card
    assert hub.commit_attempts == 1
    # no LFS/Xet: every file came inline in the commit (the stand-in refuses anything else)
    assert not any("lfs" in path or "xet" in path for _, path in hub.requests)

    result = enjoy("--exp-name", exp_name, "--hf-repository", repo_id, "--eval-episodes", 1, cwd=workdir, env=env)
    check_ok(result)
    assert f"{exp_name} on {env_id}: " in result.stdout and "over 1 episode" in result.stdout
    assert ("GET", f"/{repo_id}/resolve/main/{checkpoint_name}") in hub.requests


# Calls cleanrl_utils.huggingface.push_to_hub for a script on a made-up run: the script's default Args, a checkpoint,
# an events file and two evaluation videos of known bytes; prints the repository url and the args.
DIRECT_PUSH = textwrap.dedent(
    """
    import importlib.util, json, sys
    from cleanrl_utils.huggingface import push_to_hub
    path, run_name, algorithm = sys.argv[1], sys.argv[2], sys.argv[3]
    spec = importlib.util.spec_from_file_location("script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    args = script.Args()
    url = push_to_hub(args, run_name, [1.0, 2.0, 4.0], path, algorithm, "what it stands for")
    print(json.dumps({"url": url, "exp_name": args.exp_name, "env_id": args.env_id, "args": vars(args)}))
    """
)


def made_up_run(workdir, exp_name):
    run_name = f"Env__{exp_name}__1__100"
    run_dir = workdir / "runs" / run_name
    run_dir.mkdir(parents=True)
    (run_dir / f"{exp_name}.cleanrl_model").write_bytes(b"checkpoint bytes")
    (run_dir / "events.out.tfevents.100.host").write_bytes(b"event bytes")
    videos = workdir / "videos" / f"{run_name}-eval"
    videos.mkdir(parents=True)
    (videos / "rl-video-episode-1.mp4").write_bytes(b"episode 1")
    (videos / "rl-video-episode-8.mp4").write_bytes(b"episode 8")  # the last recorded one, by number
    return run_name, run_dir


@pytest.mark.parametrize("script", ["dqn.py", "sac_continuous_action_jax.py"])
def test_push_to_hub_pushes_a_run_in_one_commit_with_its_card(script, hub, workdir, tmp_path, fork_script):
    exp_name = script[: -len(".py")]
    run_name, run_dir = made_up_run(workdir, exp_name)
    env = hub_env(hub.endpoint, tmp_path / "hf_home")
    unset = [k for k in script_env() if k not in env]  # the HF_* settings of the shell running the tests
    direct_push = tmp_path / "direct_push.py"
    direct_push.write_text(DIRECT_PUSH)
    result = fork_script(direct_push, SCRIPTS / script, run_name, ALGORITHM[script], cwd=workdir, env=env, unset=unset)
    check_ok(result)
    assert result.stdout.splitlines()[0].startswith("model uploaded to http://127.0.0.1:")
    pushed = json.loads(result.stdout.strip().splitlines()[-1])
    env_id = pushed["env_id"]
    repo_id = f"standin-user/{env_id.replace('/', '-')}-{exp_name}-seed1"
    assert pushed["url"] == f"{hub.endpoint}/{repo_id}"
    files = hub.files(repo_id)
    assert sorted(files) == sorted(
        [f"{exp_name}.cleanrl_model", "README.md", "replay.mp4", script, "events.out.tfevents.100.host"]
    )
    assert files[f"{exp_name}.cleanrl_model"] == b"checkpoint bytes" and files["replay.mp4"] == b"episode 8"
    assert files[script] == (SCRIPTS / script).read_bytes()
    card = files["README.md"].decode()
    assert card == (run_dir / "README.md").read_text()
    algorithm = ALGORITHM[script]
    assert f"- name: {algorithm}\n" in card and f"# {algorithm} agent playing {env_id}\n" in card
    assert f"A {algorithm} (what it stands for) agent trained on `{env_id}`" in card
    assert "2.33 ± 1.25" in card and "value: 2.33 +/- 1.25" in card  # mean ± std of the returns given
    assert all(f"| {key} | {value} |" in card for key, value in pushed["args"].items())
    assert f"python -m cleanrl_utils.enjoy --exp-name {exp_name} --hf-repository {repo_id}" in card
    framework = "| jax | flax | optax | gymnasium |" if "_jax" in script else "| torch | gymnasium |"
    assert framework in card.replace("python | ", "")
    assert ("msgpack_restore" in card) == ("_jax" in script) and ("weights_only=True" in card) != ("_jax" in script)
    assert table_shapes_agree(card)
    assert hub.commit_attempts == 1


def table_shapes_agree(markdown):
    """Every Markdown table in `markdown` has as many cells in each row as in its header (else it is not drawn)."""
    tables, rows = [], []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            rows.append(line.strip().strip("|").count("|") + 1)
        elif rows:
            tables.append(rows)
            rows = []
    return tables != [] and all(len(set(t)) == 1 for t in tables)


def test_scripts_hold_no_hub_code_and_import_the_module_only_under_the_flag():
    for path in SCRIPTS.glob("*.py"):
        text = path.read_text()
        assert not re.search(r"def push_to_hub|def model_card|HfApi\(|CommitOperationAdd", text), path.name
        # never imported at the top: a copied script must run every other flag without cleanrl_utils
        assert not re.search(r"^(from|import) cleanrl_utils", text, re.M), path.name


@pytest.mark.parametrize("script", PUSHERS)
def test_each_script_uploads_last_with_its_evaluation_and_name(script):
    """The upload comes after the writer is closed and W&B finished, with the returns of the evaluation, and names
    the script's algorithm."""
    main = (SCRIPTS / script).read_text().split('\nif __name__ == "__main__":', 1)[1]
    closed, finished = main.rindex("writer.close()"), main.rindex("wandb.finish()")
    upload = main.index(f'hub.push_to_hub(args, run_name, episodic_returns, __file__, "{ALGORITHM[script]}", ')
    assert closed < finished < upload
    assert main.index("episodic_returns = evaluate(") < upload
    assert "if args.upload_model:  # last" in main
    # the start-up check comes before anything is made
    assert main.index("hub.upload_error(args)") < main.index("SummaryWriter(")


def test_a_copied_script_refuses_upload_model_naming_what_to_install(tmp_path):
    """Copied alone to a machine without the cleanrl repository, --upload-model stops at start: exit 2, one line."""
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(SCRIPTS / "dqn.py", alone / "dqn.py")
    hide = tmp_path / "hide"  # drops the editable install's finder, so cleanrl_utils cannot be found
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\nsys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]\n"
    )
    env = script_env() | {"PYTHONPATH": str(hide), "HF_TOKEN": "fake"}
    result = run_script(alone / "dqn.py", *TINY["dqn.py"], "--save-model", "--upload-model", cwd=alone, env=env)
    check_refused_in(result, "dqn.py", "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    assert sorted(p.name for p in alone.iterdir()) == ["dqn.py"]
    # the same copy runs its other flags there
    check_ok(run_script(alone / "dqn.py", *TINY["dqn.py"], cwd=alone, env=env))


def check_refused_in(result, script, message):
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0] == f"{script}: {message}", result.stderr


def test_a_transient_commit_failure_is_retried(hub, workdir, tmp_path):
    hub.fail_commits = 1  # the first commit answers 503
    env = hub_env(hub.endpoint, tmp_path / "hf_home")
    result = run_script("ppo.py", *UPLOAD, "--hf-entity", "my-org", cwd=workdir, env=env)
    check_ok(result)
    assert hub.commit_attempts == 2
    assert "model uploaded to" in result.stdout and "could not push" not in result.stderr
    files = hub.files("my-org/CartPole-v1-ppo-seed1")
    assert {"ppo.cleanrl_model", "README.md", "ppo.py"} <= set(files) and "replay.mp4" not in files


@pytest.mark.parametrize("failure", ["hub-keeps-answering-503", "hub-unreachable"])
def test_an_upload_that_keeps_failing_exits_1_and_keeps_the_run(failure, hub, workdir, tmp_path):
    hub.fail_commits = 1000
    endpoint = hub.endpoint if failure == "hub-keeps-answering-503" else closed_port_endpoint()
    result = run_script("ppo.py", *UPLOAD, cwd=workdir, env=hub_env(endpoint, tmp_path / "hf_home"))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ppo.py: --upload-model could not push the run to the Hub"), result.stderr
    run_dir = only_run_dir(workdir)
    assert f"everything is kept in runs/{run_dir.name}" in lines[0]
    assert (run_dir / "ppo.cleanrl_model").stat().st_size > 0
    assert len(read_scalars(str(run_dir), "eval/episodic_return")[1]) == 10
    if failure == "hub-keeps-answering-503":
        assert "503" in lines[0]
        assert hub.commit_attempts == 3  # bounded retries
        assert (run_dir / "README.md").is_file()
        assert hub.files(REPO_ID) == {}


def test_upload_refusals_exit_2_before_any_network_call(hub, workdir, tmp_path):
    env = hub_env(hub.endpoint, tmp_path / "hf_home")
    cases = [
        (["--upload-model"], env, "--upload-model pushes the saved model and its evaluation; add --save-model"),
        (UPLOAD, hub_env(hub.endpoint, tmp_path / "hf_home", token=None), "needs a Hugging Face token: run `hf auth login`"),
        ([*UPLOAD, "--hf-entity", "bad entity"], env, "'bad entity/CartPole-v1-ppo-seed1' is not a valid Hub repository id"),
        ([*UPLOAD, "--exp-name", "a--b"], env, "is not a valid Hub repository id"),
    ]
    for flags, case_env, message in cases:
        result = run_script("ppo.py", *flags, cwd=workdir, env=case_env, timeout=120)
        check_refused(result, "ppo.py", message, workdir)
        assert "HF_TOKEN" in result.stderr or "token" not in message
    assert hub.requests == []


def test_enjoy_hf_repository_refusals_exit_2_with_one_line(hub, workdir, tmp_path):
    hub.repos["standin-user/empty"] = {"commit": "1" * 40, "files": {"README.md": b"# nothing here\n"}}
    env = hub_env(hub.endpoint, tmp_path / "hf_home")
    unreachable = hub_env(closed_port_endpoint(), tmp_path / "hf_home")
    (workdir / "model.cleanrl_model").write_bytes(b"")
    cases = [
        (["--hf-repository", "standin-user/nope"], env, "no model repository standin-user/nope on http://127.0.0.1:"),
        (["--hf-repository", "standin-user/empty"], env, "standin-user/empty has no ppo.cleanrl_model"),
        (["--hf-repository", REPO_ID], unreachable, "cannot reach the Hub at http://127.0.0.1:"),
        (["--hf-repository", "a/b/c"], env, "--hf-repository 'a/b/c' is not a Hub repository id"),
        (
            ["--hf-repository", REPO_ID, "--model-path", workdir / "model.cleanrl_model"],
            env,
            "exactly one of --model-path and --hf-repository",
        ),
    ]
    for flags, case_env, message in cases:
        result = enjoy("--exp-name", "ppo", *flags, cwd=workdir, env=case_env)
        assert result.returncode == 2, (flags, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("enjoy: ") and message in lines[0], result.stderr
