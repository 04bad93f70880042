"""cleanrl_utils.benchmark --slurm-template-path: the job-array script (array size, concurrency, resources,
index -> env/seed, every user-given word quoted), its submission with sbatch, refusals, and an end-to-end
run of real trainings on a single-node Slurm cluster that the test starts (skipped where Slurm is not
installed; .ci/run installs Debian's slurm-wlm)."""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cleanrl_utils.benchmark import plan_runs, render_slurm_script, slurm_cpus_per_task
from conftest import REPO, check_ok, missing_tool, script_env

TEMPLATE = REPO / "benchmark" / "slurm_template.sh"
# a stand-in for a training script: writes its arguments as JSON
ECHO_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"
HOSTILE = ["; touch pwned", "$HOME", "it's", 'say "hi"', "two  words", "$(touch pwned2)", "`touch pwned3`"]


# a template written for CleanRL's runner (its placeholders and its env-major indexing, as in CleanRL's
# benchmark/cleanrl_1gpu.slurm_template), without the site's partition and node lists
CLEANRL_TEMPLATE = """#!/bin/bash
#SBATCH --job-name=cleanrl-style
#SBATCH --gpus-per-task={{gpus_per_task}}
#SBATCH --cpus-per-gpu={{cpus_per_gpu}}
#SBATCH --ntasks={{ntasks}}
#SBATCH --output=slurm/logs/%x_%j.out
#SBATCH --array={{array}}
{{nodes}}

env_ids={{env_ids}}
seeds={{seeds}}
env_id=${env_ids[$SLURM_ARRAY_TASK_ID / {{len_seeds}}]}
seed=${seeds[$SLURM_ARRAY_TASK_ID % {{len_seeds}}]}

echo "task $SLURM_ARRAY_TASK_ID: $env_id seed $seed"

srun {{command}} --env-id $env_id --seed $seed
"""
CPU_ONLY_CLEANRL_TEMPLATE = "\n".join(line for line in CLEANRL_TEMPLATE.splitlines() if "gpu" not in line) + "\n"


def runner(*args, cwd, env=None):
    command = [sys.executable, "-m", "cleanrl_utils.benchmark", *map(str, args)]
    env = (env or script_env()) | {"PYTHONPATH": str(REPO)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def render(env_ids, num_seeds=1, workers=2, cpus=1, log_dir="logs", command=("python", "train.py"), **kw):
    runs = plan_runs(shlex.join(command), env_ids, range(1, 1 + num_seeds), log_dir)
    return runs, render_slurm_script(TEMPLATE.read_text(), list(command), runs, workers, cpus, log_dir=log_dir, **kw)


def sbatch_lines(script):
    return [line for line in script.splitlines() if line.startswith("#SBATCH")]


def test_array_size_concurrency_and_resources():
    _, script = render(["A-v0", "B-v0"], num_seeds=3, workers=2, cpus=4)
    lines = sbatch_lines(script)
    assert "#SBATCH --array=0-5%2" in lines and "#SBATCH --cpus-per-task=4" in lines and "#SBATCH --ntasks=1" in lines
    assert not any("gpus" in line or "nodes" in line for line in lines)
    assert f'#SBATCH --output="{Path("logs").resolve()}/slurm-%A_%a.out"' in lines
    assert "\n\n#SBATCH" not in script  # the dropped placeholder lines leave no gap in the #SBATCH block
    _, script = render(["A-v0"], workers=0, gpus_per_task=2, nodes=3, ntasks=4)
    lines = sbatch_lines(script)
    assert "#SBATCH --array=0-0" in lines and "#SBATCH --gpus-per-task=2" in lines
    assert "#SBATCH --nodes=3" in lines and "#SBATCH --ntasks=4" in lines
    assert script.startswith("#!/bin/bash\n") and "{{" not in script.replace("{{...}}", "")


def test_cpus_per_task_shares_the_total_among_the_tasks_at_once():
    assert slurm_cpus_per_task(0, 4, 10) == 1
    assert slurm_cpus_per_task(10, 4, 10) == 2
    assert slurm_cpus_per_task(10, 0, 5) == 2  # no limit: every run at once
    with pytest.raises(ValueError, match="leaves no CPU"):
        slurm_cpus_per_task(3, 4, 10)


def test_unknown_placeholder_and_unsafe_log_dir_are_refused():
    runs = plan_runs("python x.py", ["A-v0"], range(1, 2), "logs")
    with pytest.raises(ValueError, match="unknown placeholder {{gpus}}"):
        render_slurm_script("#SBATCH --gpus={{gpus}}\n", ["python"], runs, 1, 1)
    for log_dir in ['a"b', "a%b", "a\nb", "a\\b"]:
        with pytest.raises(ValueError, match="double quote, backslash"):
            render_slurm_script(TEMPLATE.read_text(), ["python"], runs, 1, 1, log_dir=log_dir)


def fake_srun_path(tmp_path):
    """A PATH whose `srun` runs its arguments, so the rendered script can run without a cluster."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/sh\nexec "$@"\n')
    (bin_dir / "srun").chmod(0o755)
    return f"{bin_dir}:{os.environ['PATH']}"


def test_each_index_runs_its_env_and_seed_with_every_word_literal(tmp_path):
    # hostile words in the command and the env ids: a shell that re-read them would run `touch` or
    # expand $HOME; through the script's quoted bash arrays they reach the program as they were given
    work = tmp_path / "work"
    work.mkdir()
    command = [sys.executable, "-c", ECHO_ARGV, *HOSTILE]
    env_ids = ["A-v0", *HOSTILE[:4]]
    runs, script = render(env_ids, num_seeds=2, workers=3, log_dir=str(tmp_path / "logs"), command=command)
    assert "#SBATCH --array=0-9%3" in sbatch_lines(script)
    (tmp_path / "logs").mkdir()
    (tmp_path / "job.sh").write_text(script)
    env = script_env() | {"PATH": fake_srun_path(tmp_path)}
    for index, run in enumerate(runs):
        result = subprocess.run(
            ["bash", str(tmp_path / "job.sh")],
            cwd=work,
            env=env | {"SLURM_ARRAY_TASK_ID": str(index)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        check_ok(result)
        assert result.stdout == f"array task {index}: {run.env_id} seed {run.seed}, log {run.log_path}\n"
        argv = json.loads(Path(run.log_path).read_text())
        assert argv == [*HOSTILE, "--env-id", run.env_id, "--seed", str(run.seed)]
        assert list(run.argv[3:]) == argv  # the same run as the local pool's
    assert [(r.env_id, r.seed) for r in runs[:6]] == [(e, 1) for e in env_ids] + [("A-v0", 2)]  # seed-major
    assert sorted(p.name for p in work.iterdir()) == [] and not list(tmp_path.glob("pwned*"))


def test_workers_0_prints_the_script_and_creates_nothing(tmp_path):
    flags = ["--slurm-template-path", TEMPLATE, "--slurm-total-cpus", 6, "--num-seeds", 3]
    result = runner("--env-ids", "A-v0", "; touch pwned", "--command", "python x.py", *flags, cwd=tmp_path)
    check_ok(result)
    assert "#SBATCH --array=0-5\n" in result.stdout and "#SBATCH --cpus-per-task=1\n" in result.stdout
    assert "ENV_IDS=(A-v0 '; touch pwned' A-v0 '; touch pwned' A-v0 '; touch pwned')" in result.stdout
    assert "SEEDS=(1 1 2 2 3 3)" in result.stdout and "COMMAND=(python x.py)" in result.stdout
    assert list(tmp_path.iterdir()) == []


def fake_sbatch(tmp_path, body):
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\necho "$@" > "{bin_dir}/args"\n{body}\n')
    (bin_dir / "sbatch").chmod(0o755)
    return bin_dir, script_env() | {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_submits_with_sbatch_and_keeps_the_script(tmp_path):
    bin_dir, env = fake_sbatch(tmp_path, 'echo "4242;cluster"')
    work = tmp_path / "work"
    work.mkdir()
    flags = ["--slurm-template-path", TEMPLATE, "--workers", 2, "--slurm-total-cpus", 4, "--num-seeds", 1]
    result = runner("--env-ids", "A-v0", "B-v0", "--command", "python x.py", *flags, cwd=work, env=env)
    check_ok(result)
    assert result.stdout.startswith("submitted Slurm job array 4242: 2 runs, 2 at a time, 2 CPU(s) each\n")
    assert "  array task 1: B-v0 seed 1" in result.stdout
    script = (work / "benchmark_logs" / "slurm_job.sh").read_text()
    assert "#SBATCH --array=0-1%2" in script and "#SBATCH --cpus-per-task=2" in script
    assert (bin_dir / "args").read_text() == "--parsable benchmark_logs/slurm_job.sh\n"
    result = runner("--env-ids", "A-v0", "--command", "python x.py", *flags, cwd=work, env=env)
    check_ok(result)
    assert result.stdout.startswith("submitted Slurm job array 4242: 1 run, 2 at a time, 2 CPU(s) each\n")


def test_a_failed_sbatch_exits_1_with_its_error(tmp_path):
    _, env = fake_sbatch(tmp_path, 'echo "sbatch: error: Invalid partition name specified" >&2; exit 1')
    flags = ["--slurm-template-path", TEMPLATE, "--workers", 1, "--command", "python x.py"]
    result = runner("--env-ids", "A-v0", *flags, cwd=tmp_path, env=env)
    assert result.returncode == 1
    assert result.stderr.strip() == "benchmark: sbatch failed (exit 1): sbatch: error: Invalid partition name specified"


def test_a_log_dir_that_cannot_be_made_is_refused_before_sbatch(tmp_path):
    bin_dir, env = fake_sbatch(tmp_path, 'echo "4242"')
    (tmp_path / "afile").write_text("")
    flags = ["--slurm-template-path", TEMPLATE, "--workers", 1, "--command", "python x.py"]
    for log_dir, message in [("afile", "is a file, not a folder"), ("afile/logs", "cannot create it or write in it")]:
        result = runner("--env-ids", "A-v0", *flags, "--log-dir", log_dir, cwd=tmp_path, env=env)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"benchmark: --log-dir {log_dir!r}") and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    assert not (bin_dir / "args").exists()  # sbatch was not called


def test_bad_slurm_input_exits_2_with_one_line(tmp_path):
    bad_template = tmp_path.parent / f"{tmp_path.name}_bad.sh"
    bad_template.write_text("#SBATCH --array={{array}}\n#SBATCH --mem={{mem}}\n")
    no_sbatch = script_env() | {"PATH": str(Path(sys.executable).parent)}
    t = ["--slurm-template-path", TEMPLATE]
    cases = [
        (["--slurm-template-path", "no/such/template.sh"], "cannot read it", None),
        (["--slurm-template-path", bad_template], "unknown placeholder {{mem}}", None),
        ([*t, "--workers", 1], "cannot find sbatch on PATH", no_sbatch),
        ([*t, "--slurm-gpus-per-task", -1], "--slurm-gpus-per-task must be at least 0", None),
        ([*t, "--slurm-total-cpus", -2], "--slurm-total-cpus must be at least 0", None),
        ([*t, "--slurm-ntasks", 0], "--slurm-ntasks must be at least 1", None),
        ([*t, "--slurm-nodes", -1], "--slurm-nodes must be at least 0", None),
        ([*t, "--slurm-total-cpus", 3, "--num-seeds", 2, "--workers", 4], "leaves no CPU", None),
        ([*t, "--log-dir", "a%b"], "Slurm cannot take", None),
    ]
    for flags, message, env in cases:
        result = runner("--env-ids", "A-v0", "--command", "python x.py", *flags, cwd=tmp_path, env=env)
        assert result.returncode == 2, (flags, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("benchmark: ") and message in lines[0], result.stderr
    assert list(tmp_path.iterdir()) == []
    # --workers 0 only prints, so it needs no sbatch
    check_ok(runner("--env-ids", "A-v0", *t, cwd=tmp_path, env=no_sbatch))


SLURM_PROGRAMS = ["slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scancel", "srun"]
SBIN_PATH = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, seconds, step=0.5):
    """Calls `predicate` until it returns something true or `seconds` pass; returns its last value."""
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


@pytest.fixture
def slurm_cluster():
    """A single-node Slurm cluster (slurmctld + slurmd, auth/none) on 127.0.0.1, all its files in a temp
    dir; yields the environment (SLURM_CONF) its clients need. Stops the daemons by PID afterwards."""
    missing = [p for p in SLURM_PROGRAMS if shutil.which(p, path=SBIN_PATH) is None]
    if missing:
        missing_tool(f"Slurm is not installed (no {', '.join(missing)}; Debian: apt-get install slurm-wlm)")
    if os.geteuid() != 0:
        missing_tool("the test cluster's slurmd runs jobs as root and must be started as root")
    # a short folder: slurmd puts unix sockets in its spool dir, whose paths have a 108-byte limit
    base = Path(tempfile.mkdtemp(prefix="slurm-", dir="/tmp"))
    node = socket.gethostname().split(".")[0]
    conf = base / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "ClusterName=cleanrltest",
                f"SlurmctldHost={node}(127.0.0.1)",
                f"SlurmctldPort={free_port()}",
                f"SlurmdPort={free_port()}",
                "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",  # listen on 127.0.0.1 only
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/none",
                "CredType=cred/none",
                f"StateSaveLocation={base}/state",
                f"SlurmdSpoolDir={base}/spool",
                f"SlurmctldPidFile={base}/slurmctld.pid",
                f"SlurmdPidFile={base}/slurmd.pid",
                f"SlurmctldLogFile={base}/slurmctld.log",
                f"SlurmdLogFile={base}/slurmd.log",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_CPU",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "MpiDefault=none",
                "MailProg=/bin/true",
                "ReturnToService=2",
                f"NodeName={node} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN",
                f"PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    (base / "state").mkdir()
    (base / "spool").mkdir()
    env = script_env() | {"SLURM_CONF": str(conf), "PATH": SBIN_PATH}
    daemons = []

    def logs():
        return "\n".join(
            f"--- {p.name}:\n" + p.read_text(errors="replace")[-2000:]
            for p in sorted(base.glob("*.out")) + sorted(base.glob("*.log"))
        )

    try:
        for name, argv in [("slurmctld", ["slurmctld", "-D", "-i"]), ("slurmd", ["slurmd", "-D", "-N", node])]:
            with open(base / f"{name}.out", "w") as out:
                daemons.append(subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT))

        def node_idle():
            result = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True, timeout=30)
            return result.returncode == 0 and result.stdout.strip() == "idle"

        if not wait_for(node_idle, 60):
            pytest.fail(f"the test Slurm cluster did not come up within 60 s\n{logs()}")
        yield env
    finally:
        if daemons and daemons[0].poll() is None:  # cancel what is left so no job outlives the cluster
            subprocess.run(["scancel", "--quiet", "--user=root"], env=env, capture_output=True, timeout=30)
            squeue = ["squeue", "-h", "-o", "%i"]
            wait_for(lambda: not subprocess.run(squeue, env=env, capture_output=True, text=True).stdout.strip(), 20)
        for daemon in reversed(daemons):
            daemon.terminate()
        for daemon in reversed(daemons):
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait(timeout=15)
        shutil.rmtree(base, ignore_errors=True)


def test_real_trainings_run_as_a_job_array_on_a_slurm_cluster(slurm_cluster, tmp_path):
    command = f"{shlex.quote(sys.executable)} {REPO / 'cleanrl' / 'ppo.py'} --total-timesteps 256 --num-envs 2 --num-steps 64"
    flags = ["--command", command, "--num-seeds", 1, "--workers", 2, "--slurm-total-cpus", 2]
    env_ids = ["CartPole-v1", "Acrobot-v1"]
    result = runner("--env-ids", *env_ids, *flags, "--slurm-template-path", TEMPLATE, cwd=tmp_path, env=slurm_cluster)
    check_ok(result)
    job_id = re.match(r"submitted Slurm job array (\d+): 2 runs, 2 at a time, 1 CPU\(s\) each\n", result.stdout).group(1)

    squeue = ["squeue", "-h", "-r", "-t", "all", "-j", job_id, "-o", "%i %T"]

    def states():
        out = subprocess.run(squeue, env=slurm_cluster, capture_output=True, text=True, timeout=30).stdout.split()
        found = dict(zip(out[::2], out[1::2]))
        done = len(found) == 2 and all(s not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING") for s in found.values())
        return found if done else None

    final = wait_for(states, 180, step=1)
    logs = tmp_path / "benchmark_logs"
    tails = {p.name: p.read_text(errors="replace")[-1500:] for p in logs.iterdir()} if logs.exists() else {}
    assert final == {f"{job_id}_0": "COMPLETED", f"{job_id}_1": "COMPLETED"}, (final, tails)
    for index, env_id in enumerate(env_ids):
        assert f"array task {index}: {env_id} seed 1" in (logs / f"slurm-{job_id}_{index}.out").read_text()
        assert (logs / f"{env_id}__1.log").exists()
        runs = list((tmp_path / "runs").glob(f"{env_id}__ppo__1__*"))
        assert len(runs) == 1 and list(runs[0].glob("events.out.tfevents.*")), (runs, tails)


def test_a_cleanrl_template_renders_as_cleanrl_s_runner_renders_it(tmp_path):
    template = tmp_path / "cleanrl.slurm_template"
    template.write_text(CLEANRL_TEMPLATE)
    flags = ["--slurm-template-path", template, "--num-seeds", 3, "--command", "python cleanrl/ppo.py --x 'a b'"]
    flags += ["--slurm-total-cpus", 10, "--slurm-nodes", 2]
    result = runner("--env-ids", "CartPole-v1", "; touch pwned", *flags, cwd=tmp_path)
    check_ok(result)
    lines = sbatch_lines(result.stdout)
    assert "#SBATCH --gpus-per-task=1" in lines and "#SBATCH --cpus-per-gpu=10" in lines  # CleanRL's default GPU
    assert "#SBATCH --array=0-5" in lines and "#SBATCH --nodes=2" in lines and "#SBATCH --ntasks=1" in lines
    assert "env_ids=(CartPole-v1 '; touch pwned')\nseeds=(1 2 3)\n" in result.stdout
    assert "/ 3]}" in result.stdout and "% 3]}" in result.stdout
    assert "srun python cleanrl/ppo.py --x 'a b' --env-id $env_id" in result.stdout
    # CleanRL's defaults: 1 GPU per task, 50 CPUs in all; ceil(50 / (2 GPUs x 3 tasks)) = 9 CPUs per GPU
    result = runner("--slurm-template-path", template, "--slurm-gpus-per-task", 2, "--slurm-ntasks", 3, cwd=tmp_path)
    check_ok(result)
    assert "#SBATCH --cpus-per-gpu=9" in sbatch_lines(result.stdout) and "{{" not in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cleanrl.slurm_template"]


def test_a_cleanrl_template_without_gpus_says_what_to_write(tmp_path):
    template = tmp_path / "cleanrl.slurm_template"
    template.write_text(CLEANRL_TEMPLATE)
    result = runner("--slurm-template-path", template, "--slurm-gpus-per-task", 0, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == "" and len(result.stderr.splitlines()) == 1
    assert "{{cpus_per_gpu}} needs GPUs" in result.stderr and "--cpus-per-task={{cpus_per_task}}" in result.stderr


def test_a_cleanrl_template_indexes_env_major(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    template = tmp_path / "cleanrl.slurm_template"
    template.write_text(CPU_ONLY_CLEANRL_TEMPLATE)
    env_ids = ["A-v0", "$HOME", "it's", ";x"]  # the template expands $env_id unquoted: ids without blanks
    command = shlex.join([sys.executable, "-c", ECHO_ARGV, *HOSTILE])
    result = runner("--env-ids", *env_ids, "--num-seeds", 2, "--command", command, "--slurm-template-path", template,
                    cwd=tmp_path)  # fmt: skip
    check_ok(result)
    (tmp_path / "job.sh").write_text(result.stdout)
    env = script_env() | {"PATH": fake_srun_path(tmp_path)}
    for index in range(8):
        job = subprocess.run(["bash", str(tmp_path / "job.sh")], cwd=work, env=env | {"SLURM_ARRAY_TASK_ID": str(index)},
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        check_ok(job)
        env_id, seed = env_ids[index // 2], 1 + index % 2
        assert job.stdout.splitlines()[0] == f"task {index}: {env_id} seed {seed}"
        assert json.loads(job.stdout.splitlines()[1]) == [*HOSTILE, "--env-id", env_id, "--seed", str(seed)]
    assert list(work.iterdir()) == [] and not list(tmp_path.glob("pwned*"))


def test_a_cleanrl_template_runs_real_trainings_on_a_slurm_cluster(slurm_cluster, tmp_path):
    # its output goes to slurm/logs/, which the runner creates (sbatch does not; the job would fail unseen)
    template = tmp_path / "cleanrl.slurm_template"
    template.write_text(CPU_ONLY_CLEANRL_TEMPLATE)
    command = f"{shlex.quote(sys.executable)} {REPO / 'cleanrl' / 'ppo.py'} --total-timesteps 128 --num-envs 1 --num-steps 64"
    flags = ["--command", command, "--num-seeds", 2, "--workers", 2, "--slurm-template-path", template]
    result = runner("--env-ids", "CartPole-v1", *flags, cwd=tmp_path, env=slurm_cluster)
    check_ok(result)
    job_id = re.match(r"submitted Slurm job array (\d+): 2 runs, 2 at a time\n", result.stdout).group(1)
    assert "  array task 0: CartPole-v1 seed 1\n  array task 1: CartPole-v1 seed 2\n" in result.stdout

    def finished():
        runs = list((tmp_path / "runs").glob("CartPole-v1__ppo__*__*/events.out.tfevents.*"))
        squeue = ["squeue", "-h", "-j", job_id]
        going = subprocess.run(squeue, env=slurm_cluster, capture_output=True, text=True, timeout=30).stdout.strip()
        return runs if len(runs) == 2 and not going else None

    wait_for(finished, 180, step=1)
    outs = sorted((tmp_path / "slurm" / "logs").glob("cleanrl-style_*.out"))
    assert len(outs) == 2, outs
    assert {out.read_text().splitlines()[0] for out in outs} == {"task 0: CartPole-v1 seed 1", "task 1: CartPole-v1 seed 2"}
    assert sorted(p.name.split("__")[2] for p in (tmp_path / "runs").iterdir()) == ["1", "2"]


def test_a_template_with_cleanrl_s_arrays_but_no_len_seeds_is_rendered_as_cleanrl_s(tmp_path):
    # `env_ids={{env_ids}}` (CleanRL's render brings the parentheses) and a `{{nodes}}` line, indexing hard-coded
    template = tmp_path / "mine.slurm_template"
    template.write_text(
        "#!/bin/bash\n#SBATCH --array={{array}}\n{{nodes}}\nenv_ids={{env_ids}}\nseeds={{seeds}}\n"
        "env_id=${env_ids[$SLURM_ARRAY_TASK_ID / 3]}\nseed=${seeds[$SLURM_ARRAY_TASK_ID % 3]}\n"
        "srun {{command}} --env-id $env_id --seed $seed\n"
    )
    result = runner("--env-ids", "A-v0", "B-v0", "--num-seeds", 3, "--slurm-nodes", 1, "--command", "python x.py",
                    "--slurm-template-path", template, cwd=tmp_path)  # fmt: skip
    check_ok(result)
    assert "#SBATCH --array=0-5\n#SBATCH --nodes=1\nenv_ids=(A-v0 B-v0)\nseeds=(1 2 3)\n" in result.stdout
