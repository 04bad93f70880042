"""cleanrl_utils.submit_exp, upstream CleanRL's submitter: upstream's own test command, the docker run lines and the
file it writes, and that the W&B key is written nowhere; --provider aws, -b and a missing key refused."""

import os
import shlex
import subprocess
import sys

import pytest

from conftest import REPO

KEY = "x" * 41  # upstream's test passes 41 x's as --wandb-key
NETRC_KEY = "netrc-password-0123456789abcdef"


def run_exp(*args, cwd, home, extra_env=None):
    """Runs `python -m cleanrl_utils.submit_exp ARGS` in `cwd` with HOME=`home` (no netrc unless the test writes
    one) and no WANDB_API_KEY or NETRC in the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_API_KEY", "NETRC")}
    env.update(HOME=str(home), PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", **(extra_env or {}))
    command = [sys.executable, "-m", "cleanrl_utils.submit_exp", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def dirs(tmp_path):
    cwd, home = tmp_path / "work", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    return cwd, home


def expected_line(seed, index, command="poetry run python cleanrl/ppo.py", tag="vwxyzjn/cleanrl:latest"):
    core = index % (os.cpu_count() or 1)
    return f'docker run -d --cpuset-cpus="{core}" -e WANDB_API_KEY {tag} /bin/bash -c ' + shlex.quote(
        f"{command} --seed {seed}"
    )


def refused(result, cwd):
    """Exit 2, one line on stderr, nothing on stdout, nothing written."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("submit_exp: ")
    assert list(cwd.iterdir()) == []
    return result.stderr.strip()


def test_upstreams_command_runs_and_writes_no_key(dirs):
    cwd, home = dirs
    result = run_exp("--docker-tag", "vwxyzjn/cleanrl:latest", "--wandb-key", KEY, cwd=cwd, home=home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [expected_line(1, 0)]
    note = result.stderr.splitlines()
    assert len(note) == 1 and "export WANDB_API_KEY" in note[0] and "debug.sh.docker.sh" in note[0]
    written = (cwd / "debug.sh.docker.sh").read_text()
    assert written.splitlines()[0].startswith("# ")  # the comment saying to export the key
    assert written.splitlines()[1:] == [expected_line(1, 0)]
    assert [p.name for p in cwd.iterdir()] == ["debug.sh.docker.sh"]
    for text in (result.stdout, result.stderr, written):
        assert KEY not in text
        assert "WANDB_API_KEY=" not in text


def test_seeds_cores_and_quoting(dirs):
    cwd, home = dirs
    command = 'python cleanrl/ppo.py --env-id CartPole-v1 --exp-name "it\'s mine"'
    result = run_exp("--num-seed", "3", "--command", command, "--exp-script", "ppo.sh", "--wandb-key", KEY, cwd=cwd, home=home)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines == [expected_line(seed, seed - 1, command) for seed in (1, 2, 3)]
    assert (cwd / "ppo.sh.docker.sh").read_text().splitlines()[1:] == lines
    for seed, line in zip((1, 2, 3), lines):
        words = shlex.split(line)  # the host shell's view: bash -c gets the command and the seed as one word
        assert words[-3:] == ["/bin/bash", "-c", f"{command} --seed {seed}"]
        core = (seed - 1) % (os.cpu_count() or 1)
        assert words[:6] == ["docker", "run", "-d", f"--cpuset-cpus={core}", "-e", "WANDB_API_KEY"]


def test_key_from_netrc_or_environment(dirs):
    cwd, home = dirs
    (home / ".netrc").write_text(f"machine api.wandb.ai\n  login user\n  password {NETRC_KEY}\n")
    result = run_exp(cwd=cwd, home=home)
    assert result.returncode == 0, result.stderr
    assert NETRC_KEY not in result.stdout + result.stderr + (cwd / "debug.sh.docker.sh").read_text()
    (home / ".netrc").unlink()
    (cwd / "debug.sh.docker.sh").unlink()
    result = run_exp(cwd=cwd, home=home, extra_env={"WANDB_API_KEY": KEY})
    assert result.returncode == 0, result.stderr
    assert KEY not in result.stdout + result.stderr + (cwd / "debug.sh.docker.sh").read_text()


def test_missing_key_refused(dirs):
    cwd, home = dirs
    message = refused(run_exp("--docker-tag", "vwxyzjn/cleanrl:latest", cwd=cwd, home=home), cwd)
    assert "no W&B key" in message and "--wandb-key" in message


def test_provider_aws_refused_with_the_submit_command(dirs):
    cwd, home = dirs
    command = "poetry run python cleanrl/ppo.py --env-id Acrobot-v1 --total-timesteps 5000 --track"
    args = ["--provider", "aws", "--wandb-key", KEY, "--command", command, "--num-seed", "2", "--job-queue", "q1"]
    args += ["--num-vcpu", "2", "--num-memory", "4096", "--num-gpu", "1", "--num-hours", "2", "--aws-num-retries", "3"]
    message = refused(run_exp(*args, cwd=cwd, home=home), cwd)
    assert KEY not in message
    assert "plain text" in message and "python -m cleanrl_utils.submit submit" in message
    suggested = shlex.split(message.split("run instead: ", 1)[1].split(" (ARN: ", 1)[0])
    assert suggested[:4] == ["python", "-m", "cleanrl_utils.submit", "submit"]
    flags = dict(zip(suggested[4::2], suggested[5::2]))
    assert flags == {
        "--terraform-dir": "terraform",
        "--queue-name": "q1",
        "--env-ids": "Acrobot-v1",
        "--command": "python cleanrl/ppo.py --total-timesteps 5000 --track",
        "--num-seeds": "2",
        "--vcpus": "2",
        "--memory-mib": "4096",
        "--gpus": "1",
        "--timeout-seconds": "7200",
        "--attempts": "3",
        "--wandb-key-ref": "ARN",
    }
    # the suggestion is a valid command of the submit tool: its dry run (no AWS call) with a job definition and an
    # ARN in place of terraform's outputs and the placeholder
    flags.pop("--terraform-dir")
    flags["--wandb-key-ref"] = "arn:aws:secretsmanager:us-east-1:123456789012:secret:wandb"
    argv = [sys.executable, *suggested[1:4]] + [w for kv in flags.items() for w in kv]
    argv += ["--job-definition", "cleanrl", "--dry-run", "--image", "vwxyzjn/cleanrl:latest"]
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", AWS_DEFAULT_REGION="us-east-1")
    dry = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("\ndocker run ") == 2 and "--gpus 1" in dry.stdout


@pytest.mark.parametrize("flags", [["-b"], ["--build"], ["--build", "True"], ["-b", "-p", "--archs", "linux/arm64"]])
def test_build_refused_with_the_buildx_command(dirs, flags):
    cwd, home = dirs
    message = refused(run_exp(*flags, "--wandb-key", KEY, cwd=cwd, home=home), cwd)
    output = "registry" if "-p" in flags else "docker"
    archs = "linux/arm64" if "--archs" in flags else "linux/amd64"
    assert f"docker buildx build --output=type={output} --platform {archs} -t vwxyzjn/cleanrl:latest ." in message


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--num-seed", "0"], "--num-seed"),
        (["--docker-tag", "bad tag"], "--docker-tag"),
        (["--command", ""], "--command"),
        (["--command", "python 'x.py"], "--command"),
        (["--command", "WANDB_API_KEY=abc python cleanrl/ppo.py"], "WANDB_API_KEY"),
        (["--build", "maybe"], "--build"),
        (["--provider", "gcp"], "--provider"),
        (["--provider", "aws", "--num-hours", "0"], "--num-hours"),
        (["--exp-script", "no/such/dir/x.sh"], "--exp-script"),
    ],
)
def test_bad_input_one_line_nothing_written(dirs, args, needle):
    cwd, home = dirs
    message = refused(run_exp(*args, "--wandb-key", KEY, cwd=cwd, home=home), cwd)
    assert needle in message and KEY not in message


def test_build_false_runs(dirs):
    cwd, home = dirs
    result = run_exp("--build", "False", "-p", "--wandb-key", KEY, cwd=cwd, home=home)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [expected_line(1, 0)]
