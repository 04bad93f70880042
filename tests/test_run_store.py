"""cleanrl_utils/run_store.py against a local moto server (S3 emulated on 127.0.0.1): where a job's run folder is
kept, what a push sends (changed files only, the checkpoint last), what a pull restores, the end-of-run push, and
the failures: one line, exit 2 at the start, a warning mid-run. The whole reclaim (SIGTERM in a container, a new
container that resumes) is tests/test_batch_end_to_end.py's."""

import types

import pytest

from aws_emulator import REGION, client_env, moto_server
from cleanrl_utils import run_store
from conftest import REPO, run_script, script_env

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

BUCKET = "cleanrl-runs-test"


@pytest.fixture(scope="module")
def s3():
    with moto_server() as endpoint:
        env = client_env(endpoint, PYTHONPATH=str(REPO))
        client = boto3.client(
            "s3", region_name=REGION, endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        client.create_bucket(Bucket=BUCKET)
        yield types.SimpleNamespace(endpoint=endpoint, env=env, client=client)


@pytest.fixture
def store(s3, monkeypatch, tmp_path):
    """This process as attempt 1 of Batch job `job`, in an empty working folder, with a fresh module state and no
    exit hook (the pushes at exit are checked in a script run)."""
    for name, value in s3.env.items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    job = f"job-{tmp_path.name}"
    monkeypatch.setenv("CLEANRL_RUN_STORE", f"s3://{BUCKET}/runs")
    monkeypatch.setenv("AWS_BATCH_JOB_ID", job)
    monkeypatch.delenv("AWS_BATCH_JOB_ARRAY_INDEX", raising=False)
    monkeypatch.setattr(run_store, "_store", None)
    monkeypatch.setattr(run_store, "atexit", types.SimpleNamespace(register=lambda f: None))
    monkeypatch.chdir(tmp_path)
    return types.SimpleNamespace(job=job, prefix=f"runs/{job}/")


def stored(s3, prefix):
    """{key below prefix: size} of what the store holds."""
    pages = s3.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {item["Key"][len(prefix) :]: item["Size"] for page in pages for item in page.get("Contents", [])}


def test_location_and_job_key():
    assert run_store.location("s3://bucket/runs") == ("bucket", "runs/")
    assert run_store.location("s3://bucket/a/b/") == ("bucket", "a/b/")
    assert run_store.location("s3://bucket") == ("bucket", "")
    for bad in ("bucket/runs", "s3:///runs", "https://bucket.s3.amazonaws.com/runs"):
        with pytest.raises(run_store.StoreError, match="is not an s3://BUCKET/PREFIX URL"):
            run_store.location(bad)
    assert run_store.job_key({"AWS_BATCH_JOB_ID": "abc"}) == "abc"
    # an array child: its id carries the index, or the index is added
    assert run_store.job_key({"AWS_BATCH_JOB_ID": "abc:3", "AWS_BATCH_JOB_ARRAY_INDEX": "3"}) == "abc:3"
    assert run_store.job_key({"AWS_BATCH_JOB_ID": "abc", "AWS_BATCH_JOB_ARRAY_INDEX": "3"}) == "abc:3"
    with pytest.raises(run_store.StoreError, match="AWS_BATCH_JOB_ID is not"):
        run_store.job_key({})


def test_push_sends_what_changed_the_checkpoint_last(s3, store, tmp_path, monkeypatch):
    run_dir = tmp_path / "runs" / "CartPole-v1__ppo__1__1"
    (run_dir / "videos").mkdir(parents=True)
    (run_dir / "events.out.tfevents.1").write_bytes(b"log" * 100)
    (run_dir / "checkpoint.pt").write_bytes(b"c" * 1000)
    (run_dir / "checkpoint.pt.tmp").write_bytes(b"half")  # a write under way: never sent
    (run_dir / "videos" / "a.mp4").write_bytes(b"v")
    sent = []
    real = run_store._open("ppo.py").client.upload_file

    def upload_file(path, bucket, key, **kwargs):
        sent.append(key.rsplit("/", 1)[-1] if "videos" not in key else "videos/" + key.rsplit("/", 1)[-1])
        return real(path, bucket, key, **kwargs)

    monkeypatch.setattr(run_store._store.client, "upload_file", upload_file)
    assert run_store.push(str(run_dir))
    assert sent == ["events.out.tfevents.1", "videos/a.mp4", "checkpoint.pt"]
    name = "CartPole-v1__ppo__1__1/"
    assert stored(s3, store.prefix) == {
        name + "events.out.tfevents.1": 300,
        name + "checkpoint.pt": 1000,
        name + "videos/a.mp4": 1,
    }
    # the next checkpoint: the log grew, the checkpoint was rewritten, the video did not change
    sent.clear()
    with open(run_dir / "events.out.tfevents.1", "ab") as f:
        f.write(b"more")
    (run_dir / "checkpoint.pt").write_bytes(b"d" * 2000)
    assert run_store.push(str(run_dir))
    assert sent == ["events.out.tfevents.1", "checkpoint.pt"]
    assert stored(s3, store.prefix)[name + "checkpoint.pt"] == 2000
    sent.clear()
    assert run_store.push(str(run_dir)) and sent == []  # nothing new: no request


def test_pull_restores_the_checkpointed_folder(s3, store, tmp_path, capsys):
    assert run_store.pull("ppo.py") is None  # attempt 1: nothing stored yet
    assert capsys.readouterr().out == "" and not (tmp_path / "runs").exists()
    # a folder whose first push was cut short before its checkpoint, and one with a checkpoint
    s3.client.put_object(Bucket=BUCKET, Key=store.prefix + "CartPole-v1__ppo__1__1/events.out.tfevents.1", Body=b"x")
    assert run_store.pull("ppo.py") is None
    assert "holds no checkpoint of job" in capsys.readouterr().out
    for key, body in [("events.out.tfevents.2", b"log"), ("checkpoint.pt", b"ckpt"), ("sub/model.cleanrl_model", b"m")]:
        s3.client.put_object(Bucket=BUCKET, Key=store.prefix + "CartPole-v1__ppo__1__2/" + key, Body=body)
    run_store._store = None
    home = run_store.pull("ppo.py")
    assert home == "runs/CartPole-v1__ppo__1__2"
    run_dir = tmp_path / home
    assert sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()) == [
        "checkpoint.pt",
        "events.out.tfevents.2",
        "sub/model.cleanrl_model",
    ]
    assert (run_dir / "checkpoint.pt").read_bytes() == b"ckpt"
    line = capsys.readouterr().out
    assert line.startswith(f"ppo.py: attempt ? of job {store.job} goes on from the run store: s3://{BUCKET}/{store.prefix}")
    assert len(line.splitlines()) == 1
    # what was pulled is not sent back; what the resumed run writes is
    sent = []
    run_store._store.client.upload_file = lambda path, bucket, key, **kwargs: sent.append(key.rsplit("/", 1)[-1])
    (run_dir / "events.out.tfevents.3").write_bytes(b"new log")
    assert run_store.push(home) and sent == ["events.out.tfevents.3"]


def test_failures_at_the_start_stop_the_run(s3, store, monkeypatch, capsys):
    monkeypatch.setenv("CLEANRL_RUN_STORE", "s3://no-such-bucket-here/runs")
    with pytest.raises(SystemExit) as stop:
        run_store.pull("ppo.py")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err == (
        "ppo.py: cannot use the run store 's3://no-such-bucket-here/runs': NoSuchBucket: The specified bucket does not exist\n"
    )
    monkeypatch.setattr(run_store, "_store", None)
    monkeypatch.delenv("AWS_BATCH_JOB_ID")
    with pytest.raises(SystemExit) as stop:
        run_store.pull("ppo.py")
    assert stop.value.code == 2 and "AWS_BATCH_JOB_ID is not" in capsys.readouterr().err
    monkeypatch.setenv("AWS_BATCH_JOB_ID", store.job)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there: no network
    monkeypatch.setattr(run_store, "_client", lambda: _unreachable())
    with pytest.raises(SystemExit) as stop:
        run_store.pull("ppo.py")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Could not connect to the endpoint URL" in err and len(err.splitlines()) == 1


def _unreachable():
    from botocore.config import Config

    return boto3.client("s3", config=Config(retries={"max_attempts": 1}, connect_timeout=1))


def test_a_failing_push_warns_and_the_run_goes_on(s3, store, tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "runs" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "checkpoint.pt").write_bytes(b"c")
    monkeypatch.setenv("CLEANRL_RUN_STORE", "s3://no-such-bucket-here/runs")  # e.g. deleted while the job ran
    assert run_store.push(str(run_dir)) is False
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"warning: could not copy {run_dir} to the run store (NoSuchBucket" in err, err
    # the store answers again: the next push sends what is missing
    monkeypatch.setenv("CLEANRL_RUN_STORE", f"s3://{BUCKET}/runs")
    monkeypatch.setattr(run_store, "_store", None)
    assert run_store.push(str(run_dir)) and stored(s3, store.prefix) == {"r/checkpoint.pt": 1}


def test_a_run_keeps_its_folder_in_the_store_to_its_end(s3, tmp_path):
    """ppo.py as a cloud job would run it: the checkpoint at the end, then the model and the evaluation written
    after training, pushed at the exit."""
    env = script_env() | s3.env | {"CLEANRL_RUN_STORE": f"s3://{BUCKET}/runs", "AWS_BATCH_JOB_ID": "job-end"}
    flags = ["--total-timesteps", "1024", "--num-envs", "2", "--num-steps", "128", "--checkpoint-every", "100"]
    result = run_script("ppo.py", *flags, "--save-model", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    keys = stored(s3, f"runs/job-end/{run_dir.name}/")
    local = {str(p.relative_to(run_dir)): p.stat().st_size for p in run_dir.rglob("*") if p.is_file()}
    assert keys == local and {"checkpoint.pt", "ppo.cleanrl_model"} <= set(keys), (keys, local)
    assert f"ppo.py: runs/{run_dir.name} is kept in the run store: s3://{BUCKET}/runs/job-end/{run_dir.name}/" in result.stdout
