"""Running at scale, end to end on this machine with no cloud account.

An AWS API emulator (moto) on 127.0.0.1; the Terraform stack in terraform/ applied to it once for the module; the
repository's Dockerfile built with podman from a local Python base; the emulator running AWS Batch jobs through
podman's Docker-API socket. Two tests share that stack:

- a real tiny `ppo.py` training submitted with `python -m cleanrl_utils.submit`, followed with `wait` until
  SUCCEEDED, its output read back with `logs`;
- a spot reclaim: a checkpointing `ppo.py` job whose container gets SIGTERM mid-training (as an instance shutting
  down sends it), then its second attempt in a new, empty container, which goes on from the run store (the stack's
  S3 bucket) in the same run folder and log, to a log with every step once.

Then `terraform destroy` and every process stopped by PID.

Emulator limits (moto 5.2): it runs the job definition's image and command override but ignores `secrets`,
retries and resource overrides, and writes every job's output to the log group `/aws/batch/job` once the
container has exited. As it retries nothing, the test starts the second attempt as Batch would: the same image,
command and environment (the same AWS_BATCH_JOB_ID), AWS_BATCH_JOB_ATTEMPT=2, in a new container. Inside the
containers the job role's credentials are the emulator's fake ones, given through the stack's `job_environment`.
"""

import json
import re
import shutil
import subprocess
import sys
import time
import types

import pytest

import containers
from aws_emulator import REGION, client_env, moto_server
from conftest import REPO, missing_tool, stop_process
from test_terraform import MIRROR_ROOTS, PROVIDER, copy_stack, provider_mirror, terraform_env, write_mirror_config

pytestmark = pytest.mark.xdist_group("containers")

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")
pytest.importorskip("docker")  # moto's client for the container engine

IMAGE_TAG = "e2e"
MOTO_LOG_GROUP = "/aws/batch/job"  # where moto writes job output, whatever the job definition says
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
"""


def missing_piece():
    """Skips the test where a piece that comes with the machine (terraform, its provider mirror) is missing;
    returns why the container tools, which .ci/run installs, are missing, or None."""
    if shutil.which("terraform") is None:
        pytest.skip("terraform is not installed (needs >= 1.11, see terraform/README.md)")
    if provider_mirror() is None:
        pytest.skip(f"no local filesystem mirror of {PROVIDER} 5.x in {', '.join(MIRROR_ROOTS)} (CLEANRL_TF_PLUGIN_MIRROR)")
    return containers.missing_tools()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    reason = missing_piece()
    if reason:
        missing_tool(reason)
    return tmp_path_factory.mktemp("batch-e2e")


@pytest.fixture(scope="module")
def podman_socket(workdir):
    """`podman system service` on a Unix socket in `workdir` (no TCP at all), runc and the ulimits runs need set
    in its containers.conf; stopped by PID."""
    conf = workdir / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    socket_path = workdir / "podman.sock"
    log = open(workdir / "podman-service.log", "w")
    process = subprocess.Popen(
        ["podman", "system", "service", "--time=0", f"unix://{socket_path}"],
        env=dict(containers.engine_env(), CONTAINERS_CONF=str(conf)),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        import docker

        deadline = time.monotonic() + 30
        while True:
            try:
                if socket_path.exists() and docker.DockerClient(base_url=f"unix://{socket_path}").ping():
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(
                    f"podman system service did not answer within 30 s: {(workdir / 'podman-service.log').read_text()[-2000:]}"
                )
            time.sleep(0.2)
        yield socket_path
    finally:
        stop_process(process, timeout=15)
        log.close()


def run(cmd, env, cwd=REPO, timeout=600, check=True):
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, (
            f"{' '.join(map(str, cmd))}: exit {result.returncode}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def aws(endpoint, service):
    return boto3.client(
        service, region_name=REGION, endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
    )


@pytest.fixture(scope="module")
def stack(workdir, podman_socket):
    """The stack applied to a moto server that runs jobs through podman, with the image built and tagged as the
    job definition names it (image_tag=IMAGE_TAG, a second apply). Destroyed at the end of the module."""
    timings = {}
    start = time.monotonic()
    image = containers.build_cleanrl_image()  # built once per session; reused when the image tests built it
    timings["image"] = time.monotonic() - start

    server_env = {"DOCKER_HOST": f"unix://{podman_socket}", "MOTO_DOCKER_NETWORK_MODE": "host"}
    with moto_server(**server_env) as endpoint:
        # what the stack takes as given: the account's network and the W&B key in Secrets Manager
        ec2, secrets = aws(endpoint, "ec2"), aws(endpoint, "secretsmanager")
        vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
        group = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"][0]
        key_arn = secrets.create_secret(Name="cleanrl/wandb-api-key", SecretString="not-a-real-key")["ARN"]

        stack_dir = copy_stack(workdir / "terraform")
        (stack_dir / "e2e.auto.tfvars.json").write_text(
            json.dumps(
                {
                    "region": REGION,
                    "subnet_ids": [s["SubnetId"] for s in subnets[:2]],
                    "security_group_ids": [group["GroupId"]],
                    "wandb_api_key_arn": key_arn,
                    "image_tag": "first",
                    # the job role's credentials, as the emulator's job containers can get them
                    "job_environment": {
                        "AWS_ENDPOINT_URL": endpoint,
                        "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing",
                    },
                    "run_store_force_destroy": True,
                }
            )
        )
        write_mirror_config(workdir, provider_mirror()[0])
        env = client_env(endpoint, base=terraform_env(workdir), PYTHONPATH=str(REPO))
        applied, tagged = False, None
        try:
            t = time.monotonic()
            run(["terraform", "init", "-no-color"], env, cwd=stack_dir)
            run(["terraform", "apply", "-auto-approve", "-no-color"], env, cwd=stack_dir)
            applied = True
            timings["terraform apply"] = time.monotonic() - t
            # a new build: the documented per-change step points the job definition at its tag (a new revision),
            # and touches nothing else that would need replacing
            t = time.monotonic()
            plan = run(["terraform", "plan", "-no-color", "-var", f"image_tag={IMAGE_TAG}"], env, cwd=stack_dir).stdout
            replaced = re.findall(r"(aws_batch_(?:compute_environment|job_queue)\S+) must be replaced", plan)
            assert not replaced, plan[-3000:]
            run(["terraform", "apply", "-auto-approve", "-no-color", "-var", f"image_tag={IMAGE_TAG}"], env, cwd=stack_dir)
            timings["terraform apply (new image tag)"] = time.monotonic() - t
            outputs = {
                k: v["value"] for k, v in json.loads(run(["terraform", "output", "-json"], env, cwd=stack_dir).stdout).items()
            }
            # the job definition runs the stack's repository at IMAGE_TAG: give the local build that name
            assert outputs["image"] == f"{outputs['ecr_repository_url']}:{IMAGE_TAG}"
            assert outputs["job_definition_arn"].endswith(":2"), outputs["job_definition_arn"]
            containers.podman("tag", image, outputs["image"])
            tagged = outputs["image"]
            # moto applies a bucket policy's Deny without evaluating its condition, so the run store's TLS-only
            # statement (aws:SecureTransport false) would refuse the emulator's plain-HTTP uploads: the policy is
            # checked to be there, then removed (real S3 is reached over HTTPS, where it denies nothing)
            s3 = aws(endpoint, "s3")
            assert "aws:SecureTransport" in s3.get_bucket_policy(Bucket=outputs["run_store_bucket"])["Policy"]
            s3.delete_bucket_policy(Bucket=outputs["run_store_bucket"])
            yield types.SimpleNamespace(
                endpoint=endpoint, env=env, dir=stack_dir, outputs=outputs, image=image, timings=timings
            )
        finally:
            if tagged:
                containers.podman("untag", image, tagged, check=False)
            if applied:
                t = time.monotonic()
                run(["terraform", "destroy", "-auto-approve", "-no-color"], env, cwd=stack_dir)
                timings["terraform destroy"] = time.monotonic() - t
            print("phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))


TOOL = [sys.executable, "-m", "cleanrl_utils.submit"]


def test_apply_build_submit_succeed(stack, workdir):
    batch, outputs = aws(stack.endpoint, "batch"), stack.outputs
    t = time.monotonic()
    manifest = workdir / "manifest.json"
    submitted = run(
        [
            *TOOL, "submit", "--terraform-dir", stack.dir, "--queue", "cpu_on_demand",
            "--env-ids", "CartPole-v1", "--num-seeds", "1",
            "--command", "python cleanrl/ppo.py --total-timesteps 2048 --num-envs 4 --num-steps 128",
            "--vcpus", "2", "--memory-mib", "2048", "--timeout-seconds", "600", "--attempts", "1",
            "--manifest", manifest,
        ],
        stack.env,
    )  # fmt: skip
    # the stack has a run store, and this command does not checkpoint: one line says what that means
    assert "submit: warning: ppo.py checkpoints only with --checkpoint-every N" in submitted.stderr, submitted.stderr
    (job,) = json.loads(manifest.read_text())["jobs"]
    described = batch.describe_jobs(jobs=[job["job_id"]])["jobs"][0]
    assert described["jobQueue"] == outputs["job_queues"]["cpu_on_demand"]["arn"]
    assert described["jobDefinition"].split(":job-definition/")[1].split(":")[0] == outputs["job_definition_name"]
    assert described["container"]["command"][-4:] == ["--env-id", "CartPole-v1", "--seed", "1"]

    waited = run([*TOOL, "wait", "--manifest", manifest, "--timeout", "600", "--poll-seconds", "2"], stack.env, check=False)
    stack.timings["job"] = time.monotonic() - t
    logs = run([*TOOL, "logs", "--manifest", manifest, "--log-group", MOTO_LOG_GROUP], stack.env, check=False)
    report = f"wait: {waited.stdout}{waited.stderr}\nlogs: {logs.stdout[-4000:]}{logs.stderr}"
    assert waited.returncode == 0, report
    assert batch.describe_jobs(jobs=[job["job_id"]])["jobs"][0]["status"] == "SUCCEEDED", report
    # the training ran in the container: the script's last progress line and its rounding note
    assert logs.returncode == 0, report
    assert "global_step=2048," in logs.stdout, report
    # moto removes the job's container; nothing of it is left
    leftover = containers.podman("ps", "--all", "--format", "{{.Names}}").stdout.split()
    assert not [name for name in leftover if name.startswith("ppo__CartPole-v1__1")], leftover


def store_folder(s3, bucket, prefix):
    """{key below prefix: size} of what the run store holds there."""
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {item["Key"][len(prefix) :]: item["Size"] for page in pages for item in page.get("Contents", [])}


def test_spot_reclaim_goes_on_from_the_run_store(stack, workdir):
    """SIGTERM to a job's container mid-training, then its second attempt in a new container: the same run name
    and log, every step once, nothing lost (the stop writes and pushes a checkpoint at the step it reached)."""
    from cleanrl_utils.checkpoint import read
    from cleanrl_utils.report import _accumulator

    batch, s3 = aws(stack.endpoint, "batch"), aws(stack.endpoint, "s3")
    bucket, prefix = stack.outputs["run_store_bucket"], stack.outputs["run_store"].split("/", 3)[3] + "/"
    assert stack.outputs["run_store"] == f"s3://{bucket}/runs"
    # the image's entrypoint passes a signal's exit code on (tini is PID 1 and forwards SIGTERM to the command)
    for command, code in (["sh", "-c", "exit 130"], 130), (["sh", "-c", "kill -TERM $$"], 143):
        result = subprocess.run([*containers.podman_run_args(), stack.image, *command], capture_output=True, timeout=120)
        assert result.returncode == code, (command, result.returncode, result.stderr[-2000:])

    t = time.monotonic()
    total, batch_steps = 16384, 4 * 128  # 32 iterations, a checkpoint every 2
    command = f"python cleanrl/ppo.py --total-timesteps {total} --num-envs 4 --num-steps 128 --checkpoint-every 2 --save-model"
    manifest = workdir / "reclaim.json"
    run(
        [
            *TOOL, "submit", "--terraform-dir", stack.dir, "--queue", "cpu_spot", "--exp-name", "reclaim",
            "--env-ids", "CartPole-v1", "--num-seeds", "1", "--command", command, "--env", "OMP_NUM_THREADS=1",
            "--vcpus", "2", "--memory-mib", "2048", "--timeout-seconds", "600", "--attempts", "2",
            "--manifest", manifest,
        ],
        stack.env,
    )  # fmt: skip
    (job,) = json.loads(manifest.read_text())["jobs"]
    job_id, job_prefix = job["job_id"], f"{prefix}{job['job_id']}/"
    described = batch.describe_jobs(jobs=[job_id])["jobs"][0]
    container_name = f"{job['job_name']}-{job_id}"  # moto's name for the job's container
    try:
        # attempt 1: once its first checkpoint is in the store, the instance "shuts down": SIGTERM to the container
        deadline = time.monotonic() + 300
        while not [key for key in store_folder(s3, bucket, job_prefix) if key.endswith("/checkpoint.pt")]:
            status = batch.describe_jobs(jobs=[job_id])["jobs"][0]["status"]
            assert status not in ("SUCCEEDED", "FAILED") and time.monotonic() < deadline, f"{status} before a checkpoint"
            time.sleep(0.5)
        containers.podman("kill", "--signal", "TERM", container_name)
        waited = run(
            [*TOOL, "wait", "--manifest", manifest, "--timeout", "300", "--poll-seconds", "1"], stack.env, check=False
        )
    finally:  # a failure above leaves no container running after the emulator is gone
        containers.podman("rm", "--force", "--time", "0", container_name, check=False)
    (first,) = batch.list_jobs(jobQueue=described["jobQueue"], filters=[{"name": "JOB_NAME", "values": [job["job_name"]]}])[
        "jobSummaryList"
    ]
    logs = run([*TOOL, "logs", "--manifest", manifest, "--log-group", MOTO_LOG_GROUP], stack.env, check=False).stdout
    report = f"wait: {waited.stdout}{waited.stderr}\nlogs: {logs[-4000:]}"
    assert waited.returncode == 1 and first["status"] == "FAILED", report
    assert first["container"]["exitCode"] == 143, report  # what the retry strategy retries (terraform/batch.tf)
    stopped = re.search(r"ppo\.py: stopped by SIGTERM at global_step (\d+); saved in runs/(\S+)/checkpoint\.pt", logs)
    assert stopped, report
    step, run_name = int(stopped[1]), stopped[2]
    assert 0 < step < total and step % batch_steps == 0, report
    (run_folder,) = {key.split("/", 1)[0] for key in store_folder(s3, bucket, job_prefix)}
    assert run_folder == run_name
    saved = workdir / "first-checkpoint.pt"
    s3.download_file(bucket, f"{job_prefix}{run_name}/checkpoint.pt", str(saved))
    assert read(str(saved), "ppo.py")["global_step"] == step  # the store got the checkpoint of the stop itself
    stack.timings["attempt 1"] = time.monotonic() - t

    # attempt 2, as Batch would start it on a new instance: the job's image, command and environment, a new container
    t = time.monotonic()
    environment = {e["name"]: e["value"] for e in described["container"]["environment"]}
    assert environment["AWS_BATCH_JOB_ID"] == job_id and environment["CLEANRL_RUN_STORE"] == stack.outputs["run_store"]
    env_flags = [flag for name, value in sorted(environment.items()) for flag in ("-e", f"{name}={value}")]
    second = subprocess.run(
        [
            "podman", "run", "--rm", "--runtime", "runc", *containers.RUN_LIMITS, "--network", "host",
            *env_flags, "-e", "AWS_BATCH_JOB_ATTEMPT=2",
            stack.outputs["image"], *described["container"]["command"],
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    output = second.stdout + second.stderr
    stack.timings["attempt 2"] = time.monotonic() - t
    assert second.returncode == 0, output[-4000:]
    assert f"ppo.py: attempt 2 of job {job_id} goes on from the run store: s3://{bucket}/{job_prefix}{run_name}/" in output
    assert f"runs/{run_name} is kept in the run store" in output, output[-3000:]

    # the store: one run folder, the same name, both attempts' logs, the finished checkpoint, the saved model
    files = store_folder(s3, bucket, f"{job_prefix}{run_name}/")
    assert set(store_folder(s3, bucket, job_prefix)) == {f"{run_name}/{name}" for name in files}
    assert {"checkpoint.pt", "ppo.cleanrl_model"} <= set(files), files
    assert len([name for name in files if name.startswith("events.out.tfevents.")]) == 2, files
    local = workdir / "fetched" / "runs" / run_name
    local.mkdir(parents=True)
    for name in files:
        s3.download_file(bucket, f"{job_prefix}{run_name}/{name}", str(local / name))
    final = read(str(local / "checkpoint.pt"), "ppo.py")
    assert final["finished"] and final["global_step"] == total and final["run_name"] == run_name
    # the log: every iteration's step once, across the two attempts
    accumulator = _accumulator(str(local))
    for tag in ("losses/value_loss", "charts/SPS"):
        steps = [event.step for event in accumulator.Scalars(tag)]
        assert steps == list(range(batch_steps, total + 1, batch_steps)), (tag, steps)
