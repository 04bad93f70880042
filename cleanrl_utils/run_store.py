"""Run folders that outlive their machine: a cloud job's `runs/{run_name}` kept in S3 across its attempts.

A job that AWS Batch retries after its instance went away (a spot reclaim) starts on a new machine with an empty
disk. With `CLEANRL_RUN_STORE=s3://BUCKET/PREFIX` in its environment (set by `cleanrl_utils/submit.py` from the
Terraform stack's `run_store` output), `cleanrl_utils/checkpoint.py` calls this module so that the new attempt goes
on from the last checkpoint, in the same run folder and log:

    s3://BUCKET/PREFIX/{job key}/{run_name}/checkpoint.pt, events.out.tfevents.*, {exp_name}.cleanrl_model, ...

The job key is `AWS_BATCH_JOB_ID`, which every attempt of a job shares (an array child's is `PARENT:INDEX`; where
only `AWS_BATCH_JOB_ARRAY_INDEX` says the index, it is appended).

- `pull(script)`: when an attempt starts (no `--resume` given), downloads the job's stored run folder into
  `runs/{run_name}` and returns that path, which `Checkpoint` then resumes as a `--resume` of it; None when the
  store holds no checkpoint of this job yet (its first attempt).
- `push(run_dir)`: after each checkpoint is written, uploads the run folder's new and changed files, the
  checkpoint last, so that a push cut short leaves the stored log at least as far as the stored checkpoint (a
  resumed run hides the log's steps after its checkpoint, as a local `--resume` does). Each object is replaced
  whole or not at all (a plain PUT, or a multipart upload that only appears when it completes).
- At the run's exit (`atexit`, registered by the first `pull` or `push`), the files written after training (the
  saved model, the evaluation's log) are pushed the same way. A signal during that last push stops it at once.

Failures are one line on stderr, never a traceback: at the start (`pull`: no credentials, no permission, no
network, a bad `CLEANRL_RUN_STORE`, no `AWS_BATCH_JOB_ID`) the run stops with exit code 2 before anything is
created, since a retried attempt would otherwise start again from step 0 under a new run name; in the run (`push`)
it warns and goes on: the checkpoint stays on the local disk and the next checkpoint's push tries again.

S3 access uses boto3 with the standard AWS configuration (the job role's credentials on Batch; `AWS_ENDPOINT_URL`
for an emulator such as moto), connections time out after 10 s and requests are retried 3 times.
"""

from __future__ import annotations

import atexit
import os
import re
import signal
import sys
import time

STORE = "CLEANRL_RUN_STORE"
CHECKPOINT = "checkpoint.pt"
PART = 64 * 2**20  # bytes: multipart uploads above this size, in parts of this size (a 6.6 GiB file: 106 PUTs)


class StoreError(Exception):
    """The run store cannot be used; its text is one line for the user."""


def location(url: str) -> tuple[str, str]:
    """(bucket, key prefix ending in "/" or empty) of an `s3://BUCKET[/PREFIX]` URL. Raises StoreError otherwise."""
    if not url.startswith("s3://") or not url[5:].split("/", 1)[0]:
        raise StoreError(f"{STORE}={url!r} is not an s3://BUCKET/PREFIX URL")
    bucket, _, prefix = url[5:].partition("/")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/" if prefix else ""


def job_key(environ) -> str:
    """This job's folder in the store: AWS_BATCH_JOB_ID (the same in every attempt), with `:INDEX` for an array
    child whose id lacks it. Raises StoreError outside AWS Batch (no AWS_BATCH_JOB_ID)."""
    job = environ.get("AWS_BATCH_JOB_ID", "")
    if not job:
        raise StoreError(f"{STORE} is set but AWS_BATCH_JOB_ID is not: the store keeps the run folders of AWS Batch jobs")
    index = environ.get("AWS_BATCH_JOB_ARRAY_INDEX")
    return f"{job}:{index}" if index and ":" not in job else job


def _client():
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise StoreError("boto3 is not installed (pip install boto3)") from None
    config = Config(retries={"mode": "standard", "max_attempts": 4}, connect_timeout=10, read_timeout=60)
    return boto3.client("s3", config=config)


def _reason(e: BaseException) -> str:
    """An S3, connection or file error as one line (an S3 error: its code and message)."""
    error = (getattr(e, "response", None) or {}).get("Error") or {}
    text = f"{error.get('Code', '')}: {error.get('Message', '')}".strip(": ") if error else str(e)
    wrapped = re.search(r"An error occurred \((\w+)\) when calling the \w+ operation: (.*)", text)  # a failed upload
    return " ".join((f"{wrapped[1]}: {wrapped[2]}" if wrapped else text or type(e).__name__).split())


def _failures() -> tuple[type[BaseException], ...]:
    """The exceptions that mean the store failed (not a bug here): S3 and connection errors, file errors."""
    kinds: list[type[BaseException]] = [StoreError, OSError]
    try:
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError

        kinds += [BotoCoreError, ClientError, Boto3Error]
    except ImportError:
        pass
    return tuple(kinds)


def _local_files(run_dir: str) -> dict[str, tuple[int, int]]:
    """{path relative to run_dir, with "/": (size in bytes, mtime in ns)} of the run folder's files, without the
    `.tmp` files of writes under way."""
    files = {}
    for folder, _, names in os.walk(run_dir):
        for name in names:
            if name.endswith(".tmp"):
                continue
            path = os.path.join(folder, name)
            stat = os.stat(path)
            files[os.path.relpath(path, run_dir).replace(os.sep, "/")] = (stat.st_size, stat.st_mtime_ns)
    return files


class _Store:
    """The store of this process's job: where its run folder goes, and what of it is there already."""

    def __init__(self, script: str):
        self.script = script
        self.url = os.environ.get(STORE, "")
        self.bucket, self.prefix = location(self.url)
        self.key = job_key(os.environ)
        self.client = _client()
        self.sent: dict[str, tuple[int, int]] = {}  # what the store holds, as the local files were when sent
        self.run_dir: str | None = None
        self.abandoned = False  # a push cut short by a second signal: the exit does not push again
        atexit.register(self._at_exit)

    def folder(self, run_name: str = "") -> str:
        """The key prefix of a run folder of this job (of all of them without `run_name`)."""
        return f"{self.prefix}{self.key}/{run_name}/" if run_name else f"{self.prefix}{self.key}/"

    def stored_runs(self) -> dict[str, dict[str, dict]]:
        """{run_name: {relative path: S3 object summary}} of this job's stored run folders."""
        runs: dict[str, dict[str, dict]] = {}
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self.folder())
        for page in pages:
            for item in page.get("Contents", []):
                run_name, _, relative = item["Key"][len(self.folder()) :].partition("/")
                if relative:
                    runs.setdefault(run_name, {})[relative] = item
        return runs

    def pull(self) -> str | None:
        runs = self.stored_runs()
        found = {name: files for name, files in runs.items() if CHECKPOINT in files}
        if not found:
            if runs:
                print(f"{self.script}: the run store holds no checkpoint of job {self.key} ({', '.join(runs)}): starting anew")
            return None
        run_name = max(found, key=lambda name: found[name][CHECKPOINT]["LastModified"])  # the latest, if several
        home = os.path.join("runs", run_name)
        start, size = time.monotonic(), 0
        for relative in sorted(found[run_name], key=lambda r: r == CHECKPOINT):
            path = os.path.join(home, *relative.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self.client.download_file(self.bucket, self.folder(run_name) + relative, path)  # into a temporary name
            size += found[run_name][relative]["Size"]
        self.run_dir, self.sent = home, _local_files(home)
        attempt = os.environ.get("AWS_BATCH_JOB_ATTEMPT", "?")
        print(
            f"{self.script}: attempt {attempt} of job {self.key} goes on from the run store: "
            f"s3://{self.bucket}/{self.folder(run_name)} ({len(found[run_name])} files, {size / 2**20:.1f} MiB "
            f"in {time.monotonic() - start:.1f} s)",
            flush=True,
        )
        return home

    def push(self, run_dir: str, threads: bool = True) -> int:
        """Uploads what changed in `run_dir` since it was last sent, the checkpoint last; returns the file count.
        `threads` False: one connection (at the interpreter's exit, which takes no new threads)."""
        from boto3.s3.transfer import TransferConfig

        if self.run_dir is not None and os.path.realpath(run_dir) != os.path.realpath(self.run_dir):
            self.sent = {}  # another run folder (not the one pulled): everything of it is new to the store
        self.run_dir = run_dir
        files = _local_files(run_dir)
        changed = sorted((r for r in files if self.sent.get(r) != files[r]), key=lambda r: (r == CHECKPOINT, r))
        config = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, use_threads=threads)
        folder = self.folder(os.path.basename(os.path.normpath(run_dir)))
        for relative in changed:
            try:
                self.client.upload_file(os.path.join(run_dir, relative), self.bucket, folder + relative, Config=config)
            except (KeyboardInterrupt, SystemExit):
                self.abandoned = True
                raise
            self.sent[relative] = files[relative]
        return len(changed)

    def _at_exit(self):
        if self.run_dir is None or self.abandoned or not os.path.isdir(self.run_dir):
            return
        for signum in (signal.SIGINT, signal.SIGTERM):  # a signal now stops the last push (and the run) at once
            signal.signal(signum, signal.SIG_DFL)
        try:
            count = self.push(self.run_dir, threads=False)
        except Exception as e:  # noqa: BLE001 - at the exit, whatever went wrong is one line, not a traceback
            print(
                f"{self.script}: warning: the run store did not get the last files of {self.run_dir} ({_reason(e)})",
                file=sys.stderr,
            )
            return
        if count:
            where = f"s3://{self.bucket}/{self.folder(os.path.basename(os.path.normpath(self.run_dir)))}"
            print(f"{self.script}: {self.run_dir} is kept in the run store: {where}", flush=True)


_store: _Store | None = None


def _open(script: str) -> _Store:
    global _store
    if _store is None:
        _store = _Store(script)
    return _store


def pull(script: str) -> str | None:
    """The run folder of this Batch job's earlier attempt, downloaded from `CLEANRL_RUN_STORE` into
    `runs/{run_name}` (relative to the working folder), or None when the store holds no checkpoint of this job.
    Prints one line saying what it downloaded. `script` is the script's file name, for messages.

    Stops the run (exit code 2, one line on stderr) when the store cannot be read: a bad URL, no AWS_BATCH_JOB_ID,
    no credentials, no permission, no network, or a download that fails."""
    try:
        return _open(script).pull()
    except _failures() as e:
        print(f"{script}: cannot use the run store {os.environ.get(STORE)!r}: {_reason(e)}", file=sys.stderr)
        sys.exit(2)


def push(run_dir: str) -> bool:
    """Uploads the new and changed files of `run_dir` (a run folder, `runs/{run_name}`) to this job's folder in
    `CLEANRL_RUN_STORE`, `checkpoint.pt` last. Returns whether everything was sent; a failure (no permission, no
    network) prints one warning line on stderr and the run goes on (the next push sends what is still missing)."""
    script = os.path.basename(sys.argv[0]) or "run_store"
    try:
        _open(script).push(run_dir)
        return True
    except _failures() as e:
        print(
            f"{script}: warning: could not copy {run_dir} to the run store ({_reason(e)}); the checkpoint stays on this "
            "machine only, and the next one tries again",
            file=sys.stderr,
            flush=True,
        )
        return False
