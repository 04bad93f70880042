"""Running at scale, end to end on this machine with no cloud account.

An AWS API emulator (moto) on 127.0.0.1; the Terraform stack in terraform/ applied to it; the repository's
Dockerfile built with podman from a local Python base; the emulator running AWS Batch jobs through podman's
Docker-API socket; a real tiny `ppo.py` training submitted with `python -m cleanrl_utils.submit`, followed with
`wait` until SUCCEEDED, its output read back with `logs`; then `terraform destroy` and every process stopped by PID.

Emulator limits (moto 5.2): it runs the job definition's image and command override but ignores `secrets`,
retries and resource overrides, and writes every job's output to the log group `/aws/batch/job` once the
container has exited.
"""

import json
import re
import shutil
import subprocess
import sys
import time

import pytest

import containers
from aws_emulator import REGION, client_env, moto_server
from conftest import REPO, stop_process
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
    """Why this machine cannot run the test, or None."""
    if shutil.which("terraform") is None:
        return "terraform is not installed (needs >= 1.11, see terraform/README.md)"
    if provider_mirror() is None:
        return f"no local filesystem mirror of {PROVIDER} 5.x in {', '.join(MIRROR_ROOTS)} (CLEANRL_TF_PLUGIN_MIRROR)"
    return containers.missing_tools()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    reason = missing_piece()
    if reason:
        pytest.skip(reason)
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


def test_apply_build_submit_succeed_destroy(workdir, podman_socket):
    timings = {}
    start = time.monotonic()
    image = containers.build_cleanrl_image()  # built once per session; reused when the image tests built it
    timings["image"] = time.monotonic() - start

    server_env = {"DOCKER_HOST": f"unix://{podman_socket}", "MOTO_DOCKER_NETWORK_MODE": "host"}
    with moto_server(**server_env) as endpoint:
        # what the stack takes as given: the account's network and the W&B key in Secrets Manager
        ec2, secrets, batch = aws(endpoint, "ec2"), aws(endpoint, "secretsmanager"), aws(endpoint, "batch")
        vpc = ec2.describe_vpcs(Filters=[{"Name": "isDefault", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
        subnets = ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]
        group = ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"][0]
        key_arn = secrets.create_secret(Name="cleanrl/wandb-api-key", SecretString="not-a-real-key")["ARN"]

        stack = copy_stack(workdir / "terraform")
        (stack / "e2e.auto.tfvars.json").write_text(
            json.dumps(
                {
                    "region": REGION,
                    "subnet_ids": [s["SubnetId"] for s in subnets[:2]],
                    "security_group_ids": [group["GroupId"]],
                    "wandb_api_key_arn": key_arn,
                    "image_tag": "first",
                }
            )
        )
        write_mirror_config(workdir, provider_mirror()[0])
        env = client_env(endpoint, base=terraform_env(workdir), PYTHONPATH=str(REPO))
        applied, tagged = False, None
        try:
            t = time.monotonic()
            run(["terraform", "init", "-no-color"], env, cwd=stack)
            run(["terraform", "apply", "-auto-approve", "-no-color"], env, cwd=stack)
            applied = True
            timings["terraform apply"] = time.monotonic() - t
            # a new build: the documented per-change step points the job definition at its tag (a new revision),
            # and touches nothing else that would need replacing
            t = time.monotonic()
            plan = run(["terraform", "plan", "-no-color", "-var", f"image_tag={IMAGE_TAG}"], env, cwd=stack).stdout
            replaced = re.findall(r"(aws_batch_(?:compute_environment|job_queue)\S+) must be replaced", plan)
            assert not replaced, plan[-3000:]
            run(["terraform", "apply", "-auto-approve", "-no-color", "-var", f"image_tag={IMAGE_TAG}"], env, cwd=stack)
            timings["terraform apply (new image tag)"] = time.monotonic() - t
            outputs = {
                k: v["value"] for k, v in json.loads(run(["terraform", "output", "-json"], env, cwd=stack).stdout).items()
            }

            # the job definition runs the stack's repository at IMAGE_TAG: give the local build that name
            assert outputs["image"] == f"{outputs['ecr_repository_url']}:{IMAGE_TAG}"
            assert outputs["job_definition_arn"].endswith(":2"), outputs["job_definition_arn"]
            containers.podman("tag", image, outputs["image"])
            tagged = outputs["image"]

            t = time.monotonic()
            manifest = workdir / "manifest.json"
            tool = [sys.executable, "-m", "cleanrl_utils.submit"]
            run(
                [
                    *tool, "submit", "--terraform-dir", stack, "--queue", "cpu_on_demand",
                    "--env-ids", "CartPole-v1", "--num-seeds", "1",
                    "--command", "python cleanrl/ppo.py --total-timesteps 2048 --num-envs 4 --num-steps 128",
                    "--vcpus", "2", "--memory-mib", "2048", "--timeout-seconds", "600", "--attempts", "1",
                    "--manifest", manifest,
                ],
                env,
            )  # fmt: skip
            (job,) = json.loads(manifest.read_text())["jobs"]
            described = batch.describe_jobs(jobs=[job["job_id"]])["jobs"][0]
            assert described["jobQueue"] == outputs["job_queues"]["cpu_on_demand"]["arn"]
            assert described["jobDefinition"].split(":job-definition/")[1].split(":")[0] == outputs["job_definition_name"]
            assert described["container"]["command"][-4:] == ["--env-id", "CartPole-v1", "--seed", "1"]

            waited = run([*tool, "wait", "--manifest", manifest, "--timeout", "600", "--poll-seconds", "2"], env, check=False)
            timings["job"] = time.monotonic() - t
            logs = run([*tool, "logs", "--manifest", manifest, "--log-group", MOTO_LOG_GROUP], env, check=False)
            report = f"wait: {waited.stdout}{waited.stderr}\nlogs: {logs.stdout[-4000:]}{logs.stderr}"
            assert waited.returncode == 0, report
            assert batch.describe_jobs(jobs=[job["job_id"]])["jobs"][0]["status"] == "SUCCEEDED", report
            # the training ran in the container: the script's last progress line and its rounding note
            assert logs.returncode == 0, report
            assert "global_step=2048," in logs.stdout, report
        finally:
            if tagged:
                containers.podman("untag", image, tagged, check=False)
            if applied:
                t = time.monotonic()
                run(["terraform", "destroy", "-auto-approve", "-no-color"], env, cwd=stack)
                timings["terraform destroy"] = time.monotonic() - t
    # moto removes the job's container; nothing of it is left
    leftover = containers.podman("ps", "--all", "--format", "{{.Names}}").stdout.split()
    assert not [name for name in leftover if name.startswith("ppo__CartPole-v1__1")], leftover
    print("phases (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()))
