"""cleanrl_utils.submit against a local moto server (AWS Batch, IAM, EC2, Logs, Secrets Manager emulated on
127.0.0.1): per-job and array submissions, dry run, status, wait, cancel, logs, refusals before any submission,
AWS errors as one line, and the W&B key never written anywhere."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aws_emulator import REGION, client_env, free_port, moto_post, moto_server
from cleanrl_utils import submit as tool
from conftest import REPO

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cleanrl:abc123"
SECRET_VALUE = "sekrit-wandb-key-0123456789"  # the caller's WANDB_API_KEY in these tests: must never show up


class Moto:
    """A moto server with the Batch stack of these tests: names of what was made and a boto3 client factory."""

    def __init__(self, endpoint, env):
        self.endpoint = endpoint
        self.env = env

    def client(self, service):
        return boto3.client(
            service,
            region_name=REGION,
            endpoint_url=self.endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


@pytest.fixture(scope="module")
def moto():
    # no container engine: with use_docker off, jobs SUCCEED without running (a test switches it on to make one fail)
    with moto_server({"batch": {"use_docker": False}}, DOCKER_HOST="unix:///nonexistent/docker.sock") as endpoint:
        m = Moto(endpoint, client_env(endpoint, PYTHONPATH=str(REPO)))
        make_stack(m)
        yield m


def make_stack(m):
    """A compute environment (service role, default VPC's subnets and security group), the queue `cleanrl-cpu-spot`,
    the job definitions `cleanrl` (W&B secret) and `nosecret`, a Secrets Manager secret."""
    iam, ec2, batch, secrets = m.client("iam"), m.client("ec2"), m.client("batch"), m.client("secretsmanager")
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "batch.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    role = iam.create_role(RoleName="batch-service", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    execution = iam.create_role(RoleName="job-execution", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.create_instance_profile(InstanceProfileName="ecs-instance")
    profile = iam.get_instance_profile(InstanceProfileName="ecs-instance")["InstanceProfile"]["Arn"]
    vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    subnets = [s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]]
    groups = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"]
    environment = batch.create_compute_environment(
        computeEnvironmentName="cleanrl-cpu-spot",
        type="MANAGED",
        state="ENABLED",
        serviceRole=role,
        computeResources={
            "type": "EC2",
            "minvCpus": 0,
            "maxvCpus": 8,
            "instanceTypes": ["c5.large"],
            "subnets": subnets[:1],
            "securityGroupIds": [groups[0]["GroupId"]],
            "instanceRole": profile,
        },
    )["computeEnvironmentArn"]
    batch.create_job_queue(
        jobQueueName="cleanrl-cpu-spot",
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
    )
    m.secret_arn = secrets.create_secret(Name="cleanrl/wandb-api-key", SecretString=SECRET_VALUE)["ARN"]
    container = {
        "image": IMAGE,
        "command": ["python", "cleanrl/ppo.py", "--help"],
        "executionRoleArn": execution,
        "resourceRequirements": [{"type": "VCPU", "value": "2"}, {"type": "MEMORY", "value": "3072"}],
        "environment": [{"name": "FROM_DEFINITION", "value": "1"}],
    }
    batch.register_job_definition(
        jobDefinitionName="cleanrl",
        type="container",
        containerProperties=container | {"secrets": [{"name": "WANDB_API_KEY", "valueFrom": m.secret_arn}]},
    )
    batch.register_job_definition(jobDefinitionName="nosecret", type="container", containerProperties=container)


def cli(m, *args, cwd, env=None):
    command = [sys.executable, "-m", "cleanrl_utils.submit", *map(str, args)]
    return subprocess.run(command, cwd=cwd, env=env or m.env, capture_output=True, text=True, timeout=120)


def in_process(m, monkeypatch, capsys, *args, cwd):
    """Runs the tool's main in this process (faster than a subprocess) with the moto environment; returns
    (exit code, stdout, stderr)."""
    for name in list(os.environ):
        if name.startswith("AWS_") or name == "WANDB_API_KEY":
            monkeypatch.delenv(name)
    for name, value in m.env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    monkeypatch.chdir(cwd)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        tool.main([str(a) for a in args])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def ok(result):
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result


SUBMIT = ["submit", "--queue-name", "cleanrl-cpu-spot", "--job-definition", "cleanrl"]
SMALL = [
    "--env-ids",
    "CartPole-v1",
    "Acrobot-v1",
    "--num-seeds",
    2,
    "--command",
    "python cleanrl/ppo.py --total-timesteps 500",
]


def job_ids_in(manifest_path):
    return [job["job_id"] for job in json.loads(Path(manifest_path).read_text())["jobs"]]


def test_submit_per_job_names_command_environment_and_manifest(moto, tmp_path):
    result = ok(cli(moto, *SUBMIT, *SMALL, "--env", "FOO=a b", "--exp-name", "ppo/test", "--manifest", "m.json", cwd=tmp_path))
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert [(j["env_id"], j["seed"]) for j in manifest["jobs"]] == [
        ("CartPole-v1", 1),
        ("Acrobot-v1", 1),
        ("CartPole-v1", 2),
        ("Acrobot-v1", 2),
    ]
    assert manifest["queue"] == "cleanrl-cpu-spot" and manifest["region"] == REGION and not manifest["array"]
    assert manifest["command"] == ["python", "cleanrl/ppo.py", "--total-timesteps", "500"]
    for job in manifest["jobs"]:
        assert job["job_id"] in result.stdout and job["submitted_at"].endswith("Z")
    jobs = {j["jobId"]: j for j in moto.client("batch").describe_jobs(jobs=job_ids_in(tmp_path / "m.json"))["jobs"]}
    described = [jobs[i] for i in job_ids_in(tmp_path / "m.json")]
    assert [j["jobName"] for j in described] == [
        "ppo-test__CartPole-v1__1",
        "ppo-test__Acrobot-v1__1",
        "ppo-test__CartPole-v1__2",
        "ppo-test__Acrobot-v1__2",
    ]
    queue_arn = moto.client("batch").describe_job_queues(jobQueues=["cleanrl-cpu-spot"])["jobQueues"][0]["jobQueueArn"]
    assert {j["jobQueue"] for j in described} == {queue_arn}
    assert described[1]["container"]["command"] == [
        *["python", "cleanrl/ppo.py", "--total-timesteps", "500"],
        *["--env-id", "Acrobot-v1", "--seed", "1"],
    ]
    environment = {e["name"]: e["value"] for e in described[0]["container"]["environment"]}
    assert environment["FOO"] == "a b" and environment["FROM_DEFINITION"] == "1"
    assert "submitted 4 jobs to cleanrl-cpu-spot; manifest m.json" in result.stdout


def test_submit_job_kwargs_resources_timeout_attempts():
    kwargs = tool.submit_job_kwargs(
        "n",
        "q",
        "jd",
        ["python", "x.py"],
        {"B": "2", "A": "1"},
        vcpus=4,
        memory_mib=8192,
        gpus=1,
        timeout_seconds=600,
        attempts=3,
    )
    assert kwargs == {
        "jobName": "n",
        "jobQueue": "q",
        "jobDefinition": "jd",
        "containerOverrides": {
            "command": ["python", "x.py"],
            "environment": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "resourceRequirements": [
                {"type": "VCPU", "value": "4"},
                {"type": "MEMORY", "value": "8192"},
                {"type": "GPU", "value": "1"},
            ],
        },
        "timeout": {"attemptDurationSeconds": 600},
        "retryStrategy": {"attempts": 3},
    }
    bare = tool.submit_job_kwargs("n", "q", "jd", ["x"], {})
    assert bare["containerOverrides"] == {"command": ["x"]} and "timeout" not in bare and "retryStrategy" not in bare


def test_job_names_follow_batch_rules():
    assert tool.job_name("ppo", "__ALE/Breakout-v5__1") == "ppo__ALE-Breakout-v5__1"
    long = tool.job_name("x" * 200, "__CartPole-v1__7")
    assert len(long) == 128 and long.endswith("__CartPole-v1__7")
    assert tool.job_name("my run:1", "") == "my-run-1"
    with pytest.raises(ValueError):
        tool.job_name("_x", "")
    assert tool.default_exp_name(["python", "cleanrl/dqn_atari.py"]) == "dqn_atari"


def test_array_job_size_and_child_mapping(moto, tmp_path):
    ok(cli(moto, *SUBMIT, *SMALL, "--array", "--manifest", "a.json", cwd=tmp_path))
    manifest = json.loads((tmp_path / "a.json").read_text())
    (job,) = manifest["jobs"]
    assert job["array_size"] == 4 and job["job_name"] == "ppo__4runs"
    assert [(c["env_id"], c["seed"]) for c in job["array_children"]] == [
        ("CartPole-v1", 1),
        ("Acrobot-v1", 1),
        ("CartPole-v1", 2),
        ("Acrobot-v1", 2),
    ]
    (described,) = moto.client("batch").describe_jobs(jobs=[job["job_id"]])["jobs"]
    assert described["arrayProperties"]["size"] == 4
    command = described["container"]["command"]
    assert command == [*tool.CHILD_ENTRY, "python", "cleanrl/ppo.py", "--total-timesteps", "500"]
    environment = {e["name"]: e["value"] for e in described["container"]["environment"]}
    assert json.loads(environment[tool.ARRAY_ENV_IDS]) == ["CartPole-v1", "Acrobot-v1"]
    assert environment[tool.ARRAY_SEEDS] == "1:2"
    # what child 3 runs in the container: the entry with the job's environment and a fake index
    fake = tmp_path / "fake_script.py"
    fake.write_text("import sys; print(sys.argv[1:])\n")
    child_env = dict(moto.env, **environment, AWS_BATCH_JOB_ARRAY_INDEX="3")
    child = [sys.executable, "-m", "cleanrl_utils.submit", "run-array-child", sys.executable, str(fake), "--x", "a b"]
    result = ok(subprocess.run(child, cwd=tmp_path, env=child_env, capture_output=True, text=True, timeout=60))
    assert result.stdout.strip() == str(["--x", "a b", "--env-id", "Acrobot-v1", "--seed", "2"])
    # moto sets only AWS_BATCH_JOB_ID (PARENT:INDEX) in its array children; the entry falls back to it
    del child_env["AWS_BATCH_JOB_ARRAY_INDEX"]
    child_env["AWS_BATCH_JOB_ID"] = f"{job['job_id']}:2"
    result = ok(subprocess.run(child, cwd=tmp_path, env=child_env, capture_output=True, text=True, timeout=60))
    assert result.stdout.strip() == str(["--x", "a b", "--env-id", "CartPole-v1", "--seed", "2"])
    child_env["AWS_BATCH_JOB_ARRAY_INDEX"] = "4"
    result = subprocess.run(child, cwd=tmp_path, env=child_env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stderr.strip() == "submit run-array-child: array index '4' is not one of 0..3"


def test_array_child_argv_unit():
    environ = {tool.ARRAY_ENV_IDS: '["A-v0", "B-v0", "C-v0"]', tool.ARRAY_SEEDS: "5:2", "AWS_BATCH_JOB_ARRAY_INDEX": "4"}
    assert tool.array_child_argv(["run"], environ) == ["run", "--env-id", "B-v0", "--seed", "6"]
    with pytest.raises(ValueError, match="not set"):
        tool.array_child_argv(["run"], {k: v for k, v in environ.items() if k.startswith("CLEANRL")})
    with pytest.raises(ValueError, match="no array plan"):
        tool.array_child_argv(["run"], {"AWS_BATCH_JOB_ARRAY_INDEX": "0"})


def test_dry_run_prints_docker_run_lines_and_calls_no_aws(moto, tmp_path):
    env = dict(moto.env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}", WANDB_API_KEY=SECRET_VALUE)
    args = [*SUBMIT, "--dry-run", "--image", IMAGE, "--vcpus", 2, "--memory-mib", 4096, "--gpus", 1, "--track"]
    result = ok(
        cli(
            moto,
            *args,
            "--env",
            "FOO=a b",
            "--env-ids",
            "CartPole-v1",
            "ALE/Breakout-v5",
            "--num-seeds",
            1,
            cwd=tmp_path,
            env=env,
        )
    )
    commands = [shlex.split(line) for line in result.stdout.splitlines() if not line.startswith("#")]
    head = ["docker", "run", "--rm", "--cpus", "2", "--memory", "4096m", "--gpus", "1", "-e", "WANDB_API_KEY", "-e", "FOO=a b"]
    assert commands == [
        [*head, IMAGE, "python", "cleanrl/ppo.py", "--track", "--env-id", "CartPole-v1", "--seed", "1"],
        [*head, IMAGE, "python", "cleanrl/ppo.py", "--track", "--env-id", "ALE/Breakout-v5", "--seed", "1"],
    ]
    requests = [json.loads(line.split(" ", 2)[2]) for line in result.stdout.splitlines() if line.startswith("# submit_job ")]
    assert [r["jobName"] for r in requests] == ["ppo__CartPole-v1__1", "ppo__ALE-Breakout-v5__1"]
    assert requests[0]["containerOverrides"]["resourceRequirements"][2] == {"type": "GPU", "value": "1"}
    assert SECRET_VALUE not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []  # no manifest
    # array: one line per child, each with its index
    result = ok(cli(moto, *SUBMIT, "--dry-run", "--image", IMAGE, "--array", *SMALL, cwd=tmp_path, env=env))
    commands = [shlex.split(line) for line in result.stdout.splitlines() if not line.startswith("#")]
    assert [c[c.index("-e") + 1] for c in commands][:1] == ["AWS_BATCH_JOB_ARRAY_INDEX=0"]
    assert [c for c in commands[3] if c.startswith("AWS_BATCH_JOB_ARRAY_INDEX=")] == ["AWS_BATCH_JOB_ARRAY_INDEX=3"]
    assert commands[3][commands[3].index(IMAGE) + 1 :][:4] == list(tool.CHILD_ENTRY)


def test_wait_status_and_logs(moto, tmp_path, monkeypatch, capsys):
    run = lambda *args: in_process(moto, monkeypatch, capsys, *args, cwd=tmp_path)  # noqa: E731
    ok(cli(moto, *SUBMIT, *SMALL, "--manifest", "m.json", cwd=tmp_path))
    result = ok(cli(moto, "wait", "--manifest", "m.json", "--poll-seconds", 0.2, "--timeout", 30, cwd=tmp_path))
    assert "all 4 jobs succeeded" in result.stdout
    assert "ppo__Acrobot-v1__2 (Acrobot-v1 seed 2): SUCCEEDED" in result.stdout
    code, out, _ = run("status", "--manifest", "m.json")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == [
        "JOB",
        "NAME",
        "ENV",
        "SEED",
        "STATUS",
        "REASON",
        "STARTED",
        "(UTC)",
        "STOPPED",
        "(UTC)",
        "ATTEMPTS",
    ]
    assert len(lines) == 5 and lines[2].split()[:5] == ["ppo__Acrobot-v1__1", "Acrobot-v1", "1", "SUCCEEDED", "-"]
    assert lines[2].split()[-1] == "1"
    # by job id, without a manifest: env and seed come from the job's command
    first = job_ids_in(tmp_path / "m.json")[0]
    code, out, _ = run("status", first)
    assert code == 0 and out.splitlines()[1].split()[:4] == ["ppo__CartPole-v1__1", "CartPole-v1", "1", "SUCCEEDED"]
    # logs: the stream the job names, in a log group made here (moto's jobs without a container write none)
    (job,) = moto.client("batch").describe_jobs(jobs=[first])["jobs"]
    stream = job["container"]["logStreamName"]
    logs = moto.client("logs")
    logs.create_log_group(logGroupName="/test/jobs")
    logs.create_log_stream(logGroupName="/test/jobs", logStreamName=stream)
    now = int(time.time() * 1000)
    events = [{"timestamp": now + i, "message": f"line {i}"} for i in range(5)]
    logs.put_log_events(logGroupName="/test/jobs", logStreamName=stream, logEvents=events)
    result = ok(cli(moto, "logs", first, "--log-group", "/test/jobs", cwd=tmp_path))
    assert result.stdout.splitlines() == [f"line {i}" for i in range(5)]
    assert run("logs", first, "--log-group", "/test/jobs", "--tail", 2)[:2] == (0, "line 3\nline 4\n")
    code, _, err = run("logs", "no-such-job")
    assert code == 1 and err == "submit: job no-such-job not found\n"


def test_wait_on_an_array_job_and_its_status_counts(moto, tmp_path):
    ok(cli(moto, *SUBMIT, *SMALL, "--array", "--manifest", "a.json", cwd=tmp_path))
    result = ok(cli(moto, "wait", "--manifest", "a.json", "--poll-seconds", 0.2, "--timeout", 30, cwd=tmp_path))
    assert "1 job succeeded" in result.stdout
    result = ok(cli(moto, "status", "--manifest", "a.json", cwd=tmp_path))
    row = result.stdout.splitlines()[1]
    assert row.split()[:5] == ["ppo__4runs", "(array)", "4", "runs", "SUCCEEDED"] and "children: SUCCEEDED 4" in row


def test_wait_failed_and_timeout_with_docker_backend(moto, tmp_path):
    """moto's container backend with no reachable engine fails each job; with its state manager holding jobs in
    SUBMITTED, wait times out (124) and cancel cancels."""
    moto_post(moto.endpoint, "/moto-api/config", {"batch": {"use_docker": True}})
    try:
        ok(cli(moto, *SUBMIT, *SMALL[:2], "--num-seeds", 1, "--command", "python x.py", "--manifest", "f.json", cwd=tmp_path))
        result = cli(moto, "wait", "--manifest", "f.json", "--poll-seconds", 0.5, "--timeout", 60, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert "1 failed:" in result.stderr and "x__CartPole-v1__1 (CartPole-v1 seed 1): FAILED:" in result.stderr
        assert "; log stream " in result.stderr
        transition = {"model_name": "batch::job", "transition": {"progression": "manual", "times": 10**9}}
        moto_post(moto.endpoint, "/moto-api/state-manager/set-transition", transition)
        ok(cli(moto, *SUBMIT, *SMALL[:2], "--num-seeds", 1, "--command", "python x.py", "--manifest", "q.json", cwd=tmp_path))
        start = time.monotonic()
        result = cli(moto, "wait", "--manifest", "q.json", "--poll-seconds", 0.5, "--timeout", 2, cwd=tmp_path)
        assert result.returncode == tool.TIMEOUT_EXIT and time.monotonic() - start < 30
        assert result.stderr.strip().endswith("not ended: x__CartPole-v1__1")
        result = ok(cli(moto, "cancel", "--manifest", "q.json", "--reason", "no longer needed", cwd=tmp_path))
        assert result.stdout.strip() == "x__CartPole-v1__1: SUBMITTED: cancelled (cancel_job)"
        (job,) = moto.client("batch").describe_jobs(jobs=job_ids_in(tmp_path / "q.json"))["jobs"]
        assert job["statusReason"] == "no longer needed"
    finally:
        moto_post(moto.endpoint, "/moto-api/state-manager/unset-transition", {"model_name": "batch::job"})
        moto_post(moto.endpoint, "/moto-api/config", {"batch": {"use_docker": False}})


def test_cancel_actions_by_state(moto, tmp_path):
    assert [
        tool.cancel_action(s) for s in ["SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"]
    ] == [
        *["cancel_job"] * 3,
        *["terminate_job"] * 2,
        None,
        None,
    ]
    ok(cli(moto, *SUBMIT, *SMALL, "--num-seeds", 1, "--manifest", "m.json", cwd=tmp_path))
    result = ok(cli(moto, "cancel", "--manifest", "m.json", cwd=tmp_path))
    assert result.stdout.splitlines() == [
        "ppo__CartPole-v1__1: SUCCEEDED already, nothing to do",
        "ppo__Acrobot-v1__1: SUCCEEDED already, nothing to do",
    ]


REFUSALS = [
    (["--env-ids", "CartPole-v1", "CartPole-v1"], "names 'CartPole-v1' twice"),
    (["--env-ids", ""], "an env id is empty"),
    (["--num-seeds", 0], "--num-seeds must be at least 1, got 0"),
    (["--vcpus", 0], "--vcpus must be at least 1, got 0"),
    (["--timeout-seconds", 30], "--timeout-seconds must be at least 60, got 30"),
    (["--attempts", 11], "--attempts must be from 1 to 10, got 11"),
    (["--wandb-key-ref", "arn:aws:secretsmanager:us-east-1:12345:secret:x"], "--wandb-key-ref must be the ARN"),
    (["--wandb-key-ref", SECRET_VALUE], "--wandb-key-ref must be the ARN"),
    (["--env", "WANDB_API_KEY=" + SECRET_VALUE], "the W&B key goes by reference only"),
    (["--env", "NOEQUALS"], "is not KEY=VALUE"),
    (["--env", "AWS_BATCH_X=1"], "reserved by Batch"),
    (["--array", "--env-ids", "CartPole-v1", "--num-seeds", 1], "--array needs 2 to 10000 runs"),
    (["--command", "python 'unclosed"], "does not split into words"),
    (["--dry-run", "--image", "cleanrl:x;touch /tmp/pwned"], "--image: invalid image reference"),
    (["--command", "python cleanrl/ppo.py --seed 7"], "--command sets --seed"),
    (["--command", "python cleanrl/ppo.py --env-id=Acrobot-v1"], "--command sets --env-id"),
    (["--env", "HF_TOKEN=hf_secret"], "stored in plain text"),
    (["--env-ids", "A-v0", "B-v0", "--num-seeds", 3, "--max-jobs", 5], "6 jobs is more than --max-jobs 5"),
    (["--manifest", "/proc/cleanrl-manifest.json"], "cannot write it"),
    (["--dry-run", "--image", "Cleanrl/Image:1"], "must be lower-case"),
    (["--track", "--job-definition", "nosecret"], "job definition 'nosecret' has no WANDB_API_KEY secret"),
    (["--queue-name", "no-such-queue"], "unknown job queue 'no-such-queue'"),
    (["--job-definition", "no-such-definition"], "unknown job definition 'no-such-definition'"),
]


@pytest.mark.parametrize("extra,message", REFUSALS, ids=[r[1][:40] for r in REFUSALS])
def test_refusals_submit_nothing_and_write_no_manifest(moto, tmp_path, monkeypatch, capsys, extra, message):
    before = len(moto.client("batch").list_jobs(jobQueue="cleanrl-cpu-spot")["jobSummaryList"])
    code, out, err = in_process(moto, monkeypatch, capsys, *SUBMIT, *extra, cwd=tmp_path)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("submit: ") and message in lines[0], err
    assert SECRET_VALUE not in out + err
    assert list(tmp_path.iterdir()) == []
    assert len(moto.client("batch").list_jobs(jobQueue="cleanrl-cpu-spot")["jobSummaryList"]) == before


def test_aws_errors_are_one_line_exit_1(moto, tmp_path):
    env = dict(moto.env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{free_port()}")
    start = time.monotonic()
    for args in ([*SUBMIT], ["status", "some-job-id"]):
        result = cli(moto, *args, cwd=tmp_path, env=env)
        assert result.returncode == 1, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("submit: AWS error: ") and "Traceback" not in result.stderr
    assert time.monotonic() - start < 60
    assert list(tmp_path.iterdir()) == []
    env = {k: v for k, v in moto.env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    result = cli(moto, *SUBMIT, cwd=tmp_path, env=env)
    assert result.returncode == 1 and result.stderr.strip() == "submit: AWS error: Unable to locate credentials"


def break_submission(moto, monkeypatch, tmp_path, at_call, fail):
    """Runs the tool in-process against moto (in tmp_path) with its `submit_job` calling `fail(batch)` instead of
    submitting on call number `at_call`."""
    for name, value in moto.env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    real_clients = tool.clients

    def broken_clients(region):
        batch, logs = real_clients(region)
        real_submit, calls = batch.submit_job, []

        def submit_job(**kwargs):
            calls.append(kwargs)
            return fail(batch) if len(calls) == at_call else real_submit(**kwargs)

        batch.submit_job = submit_job
        return batch, logs

    monkeypatch.setattr(tool, "clients", broken_clients)
    monkeypatch.chdir(tmp_path)


def test_partial_failure_keeps_the_submitted_job_ids(moto, tmp_path, monkeypatch, capsys):
    """A submission that fails after others succeeded: the manifest keeps those, the message says so."""
    # botocore refuses the parameter: an AWS-side error on the third submission
    break_submission(moto, monkeypatch, tmp_path, 3, lambda batch: batch.describe_job_queues(jobQueues=[123]))
    args = tool.Submit(queue_name="cleanrl-cpu-spot", job_definition="cleanrl", env_ids=["A-v0", "B-v0"], num_seeds=2)
    args.manifest = "p.json"
    with pytest.raises(tool.SubmitError, match=r"^2 of 4 submitted \(recorded in p.json\), then: "):
        tool.run_submit(args)
    manifest = json.loads((tmp_path / "p.json").read_text())
    assert len(manifest["jobs"]) == 2 and manifest["incomplete"].endswith("after 2 of 4 submissions")


def test_interrupt_writes_the_manifest_and_exits_130(moto, tmp_path, monkeypatch):
    def interrupt(batch):
        raise KeyboardInterrupt

    break_submission(moto, monkeypatch, tmp_path, 2, interrupt)
    args = tool.Submit(queue_name="cleanrl-cpu-spot", job_definition="cleanrl", env_ids=["A-v0", "B-v0"], num_seeds=1)
    args.manifest = "i.json"
    assert tool.run_submit(args) == tool.INTERRUPT_EXIT
    assert len(json.loads((tmp_path / "i.json").read_text())["jobs"]) == 1


def test_wandb_key_never_written_anywhere(moto, tmp_path):
    env = dict(moto.env, WANDB_API_KEY=SECRET_VALUE)
    outputs = []
    result = ok(cli(moto, *SUBMIT, *SMALL, "--track", "--manifest", "t.json", cwd=tmp_path, env=env))
    outputs.append(result.stdout + result.stderr)
    ref = ["--job-definition", "nosecret", "--wandb-key-ref", moto.secret_arn, "--track", "--manifest", "r.json"]
    result = ok(cli(moto, "submit", "--queue-name", "cleanrl-cpu-spot", *ref, *SMALL, cwd=tmp_path, env=env))
    outputs.append(result.stdout + result.stderr)
    assert "job definition revision with the W&B key reference: " in result.stdout
    manifest = json.loads((tmp_path / "r.json").read_text())
    registered = manifest["job_definition"]
    (definition,) = moto.client("batch").describe_job_definitions(jobDefinitions=[registered])["jobDefinitions"]
    assert definition["jobDefinitionName"] == "nosecret" and definition["revision"] >= 2
    assert definition["containerProperties"]["secrets"] == [{"name": "WANDB_API_KEY", "valueFrom": moto.secret_arn}]
    jobs = moto.client("batch").describe_jobs(jobs=job_ids_in(tmp_path / "r.json"))["jobs"]
    assert all("--track" in j["container"]["command"] for j in jobs)
    for args in (["status"], ["wait", "--poll-seconds", 0.2, "--timeout", 30], ["cancel"]):
        result = ok(cli(moto, *args, "--manifest", "r.json", cwd=tmp_path, env=env))
        outputs.append(result.stdout + result.stderr)
    everything = [*outputs, (tmp_path / "t.json").read_text(), (tmp_path / "r.json").read_text()]
    everything.append(json.dumps(moto.client("batch").describe_job_definitions()["jobDefinitions"]))
    everything.append(
        json.dumps(moto.client("batch").describe_jobs(jobs=job_ids_in(tmp_path / "t.json"))["jobs"], default=str)
    )
    assert not [text for text in everything if SECRET_VALUE in text]


def test_terraform_outputs_give_queue_definition_region_and_image(moto, tmp_path):
    """--terraform-dir with a stand-in terraform on PATH that prints the stack's outputs."""
    outputs = {
        "region": {"value": REGION},
        "job_queue_names": {"value": {"cpu_spot": "cleanrl-cpu-spot", "gpu_spot": "cleanrl-gpu-spot"}},
        "job_definition_name": {"value": "cleanrl"},
        "log_group_name": {"value": "/aws/batch/cleanrl"},
        "image": {"value": IMAGE},
        "run_store": {"value": "s3://cleanrl-runs-0123/runs"},
    }
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "terraform"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(outputs)}\nEOF\n")
    fake.chmod(0o755)
    (tmp_path / "tf").mkdir()
    env = dict(moto.env, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env.pop("AWS_DEFAULT_REGION")
    result = ok(
        cli(moto, "submit", "--terraform-dir", "tf", "--queue", "cpu_spot", "--dry-run", *SMALL, cwd=tmp_path, env=env)
    )
    assert f"queue cleanrl-cpu-spot, job definition cleanrl, image {IMAGE}" in result.stdout
    # the run store is named, and left out of the docker run lines (it keys run folders by Batch job ids)
    assert "# run store s3://cleanrl-runs-0123/runs (CLEANRL_RUN_STORE)" in result.stdout
    docker_lines = [line for line in result.stdout.splitlines() if line.startswith("docker run")]
    assert len(docker_lines) == 4 and not [line for line in docker_lines if "CLEANRL_RUN_STORE" in line]
    result = ok(
        cli(
            moto,
            "submit",
            "--terraform-dir",
            "tf",
            "--queue",
            "cpu_spot",
            *SMALL,
            "--manifest",
            "m.json",
            cwd=tmp_path,
            env=env,
        )
    )
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert (
        manifest["queue"] == "cleanrl-cpu-spot"
        and manifest["region"] == REGION
        and manifest["log_group"] == "/aws/batch/cleanrl"
        and manifest["run_store"] == "s3://cleanrl-runs-0123/runs"
    )
    batch = moto.client("batch")
    for job in batch.describe_jobs(jobs=job_ids_in(tmp_path / "m.json"))["jobs"]:
        assert {"name": "CLEANRL_RUN_STORE", "value": "s3://cleanrl-runs-0123/runs"} in job["container"]["environment"]
    ok(
        cli(
            moto,
            "submit",
            "--terraform-dir",
            "tf",
            "--queue",
            "cpu_spot",
            *SMALL,
            "--no-run-store",
            "--manifest",
            "n.json",
            cwd=tmp_path,
            env=env,
        )
    )
    assert json.loads((tmp_path / "n.json").read_text())["run_store"] is None
    for job in batch.describe_jobs(jobs=job_ids_in(tmp_path / "n.json"))["jobs"]:
        assert "CLEANRL_RUN_STORE" not in {e["name"] for e in job["container"].get("environment", [])}
    result = cli(moto, "submit", "--terraform-dir", "tf", "--queue", "gpu_on_demand", *SMALL, cwd=tmp_path, env=env)
    assert (
        result.returncode == 2
        and "--queue gpu_on_demand: not among terraform's job_queue_names (cpu_spot, gpu_spot)" in result.stderr
    )


def test_a_refusal_through_the_command_line(moto, tmp_path):
    """The same contract as above through a real process: one line, exit 2, nothing left behind."""
    result = cli(moto, *SUBMIT, "--vcpus", 0, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr == "submit: --vcpus must be at least 1, got 0\n"
    assert list(tmp_path.iterdir()) == []


def test_follow_commands_use_the_manifests_region(moto, tmp_path):
    manifest = tmp_path / "m.json"
    ok(cli(moto, *SUBMIT, *SMALL, "--manifest", manifest, cwd=tmp_path))
    elsewhere = dict(moto.env, AWS_DEFAULT_REGION="eu-west-1")
    result = cli(moto, "status", "--manifest", manifest, cwd=tmp_path, env=elsewhere)
    assert result.returncode == 0 and "NOT FOUND" not in result.stdout, result.stdout + result.stderr


def test_gpu_queue_checks():
    outputs = {"job_queues": {"cpu_spot": {"name": "q-cpu", "gpu": False}, "gpu_spot": {"name": "q-gpu", "gpu": True}}}
    assert tool.queue_is_gpu("q-cpu", outputs) is False and tool.queue_is_gpu("q-gpu", outputs) is True
    assert tool.queue_is_gpu("other", outputs) is None and tool.queue_is_gpu("q-cpu", {}) is None
    definition = {
        "containerProperties": {"resourceRequirements": [{"type": "VCPU", "value": "2"}, {"type": "GPU", "value": "1"}]}
    }
    assert tool.definition_gpus(definition) == 1 and tool.definition_gpus({"containerProperties": {}}) == 0


def test_checkpoint_warning(tmp_path, monkeypatch):
    """A run store helps only runs that checkpoint: the commands that would start again from step 0 are named."""
    monkeypatch.chdir(REPO)
    warning = tool.checkpoint_warning(shlex.split("python cleanrl/ppo.py --total-timesteps 500000"))
    assert warning.startswith("ppo.py checkpoints only with --checkpoint-every N (the command gives none)")
    for command in ("--checkpoint-every 10", "--checkpoint-every=10", "--checkpoint_every 10"):
        assert tool.checkpoint_warning(["python", "cleanrl/ppo.py", *shlex.split(command)]) is None, command
    assert "gives none" in tool.checkpoint_warning(["python", "cleanrl/ppo.py", "--checkpoint-every", "0"])
    (tmp_path / "on.py").write_text("class Args:\n    checkpoint_every: int = 150\n")
    (tmp_path / "never.py").write_text("class Args:\n    total_timesteps: int = 1000\n")
    assert tool.checkpoint_warning(["python", str(tmp_path / "on.py")]) is None  # on by default
    assert tool.checkpoint_warning(["python", str(tmp_path / "never.py")]) == (
        "never.py does not checkpoint: a retried attempt starts again from step 0"
    )
    assert tool.checkpoint_warning(["python", "missing/elsewhere.py"]) is None  # not here to read: no claim
    assert tool.checkpoint_warning(["python", "-m", "cleanrl_utils.benchmark"]) is None


def test_submit_warns_about_a_command_that_does_not_checkpoint(moto, tmp_path):
    """One line on stderr, and the jobs are still submitted (with the run store)."""
    (tmp_path / "cleanrl").mkdir()
    shutil.copy(REPO / "cleanrl" / "ppo.py", tmp_path / "cleanrl" / "ppo.py")
    store = ["--env", "CLEANRL_RUN_STORE=s3://bucket/runs"]
    result = ok(cli(moto, *SUBMIT, *SMALL, *store, "--manifest", "m.json", cwd=tmp_path))
    assert result.stderr.count("submit: warning: ppo.py checkpoints only with --checkpoint-every N") == 1, result.stderr
    assert len(result.stderr.splitlines()) == 1 and len(job_ids_in(tmp_path / "m.json")) == 4
    small = [*SMALL[:-1], SMALL[-1] + " --checkpoint-every 2"]
    assert ok(cli(moto, *SUBMIT, *small, *store, "--manifest", "n.json", cwd=tmp_path)).stderr == ""
    assert ok(cli(moto, *SUBMIT, *SMALL, "--manifest", "o.json", cwd=tmp_path)).stderr == ""  # no store, no warning
