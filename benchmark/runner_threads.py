"""The benchmark runner's one-thread default, side by side: runs alone and two at a time, with one compute thread
per run (the default) and with torch's and JAX's own thread counts (`--no-one-thread`), on this machine.

    .venv/bin/python benchmark/runner_threads.py                                   # writes the table below
    .venv/bin/python benchmark/runner_threads.py --ppo-steps 20000 --dqn-jax-steps 10000 --out /tmp/t.md

Each case is one `python -m cleanrl_utils.benchmark` call (the README's form: `--workers W`, seeds 1 ... W of
CartPole-v1), started without OMP_NUM_THREADS in its environment, so the runner's default decides. Per case:
the runner's wall time, and each run's speed (`charts/SPS` at its end: env steps per second of the training
loop) and wall time from its start to its last logged point. Cases alternate script by script so that machine
noise falls on all alike. The table goes to benchmark/results/runner_threads.md.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from cleanrl_utils.report import read_scalars  # noqa: E402


@dataclass
class Args:
    ppo_steps: int = 40_000
    """steps of each cleanrl/ppo.py run (its default 4 envs x 128 steps)"""
    dqn_jax_steps: int = 15_000
    """steps of each cleanrl/dqn_jax.py run"""
    out: str = str(REPO / "benchmark" / "results" / "runner_threads.md")
    """where the markdown table goes"""


CASES = [  # (label, workers, runner flags)
    ("alone, one thread (default)", 1, []),
    ("alone, library threads", 1, ["--no-one-thread"]),
    ("2 at a time, one thread each (default)", 2, []),
    ("2 at a time, library threads", 2, ["--no-one-thread"]),
]


def run_case(script: str, steps: int, workers: int, flags: list[str]) -> dict:
    """One runner call of `workers` runs of `script`; its wall time and each run's SPS and training time (s)."""
    work = Path(tempfile.mkdtemp(prefix="runner-threads-"))
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")}
    env |= {"PYTHONPATH": str(REPO), "WANDB_MODE": "disabled"}
    command = f"{sys.executable} {REPO / 'cleanrl' / script} --total-timesteps {steps}"
    argv = [sys.executable, "-m", "cleanrl_utils.benchmark", "--env-ids", "CartPole-v1", "--command", command]
    argv += ["--num-seeds", str(workers), "--workers", str(workers), "--no-auto-tag", *flags]
    start = time.time()
    result = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    wall = time.time() - start
    if result.returncode != 0:
        sys.exit(f"runner_threads: {script} {flags} failed:\n{result.stdout}{result.stderr}")
    sps, train = [], []
    for run in sorted((work / "runs").iterdir()):
        steps_logged, values = read_scalars(str(run), "charts/SPS")
        sps.append(float(values[-1]))
        train.append(steps_logged[-1] / float(values[-1]))
    shutil.rmtree(work)
    return {"wall": wall, "sps": float(np.mean(sps)), "train": float(np.mean(train))}


def main(args: Args) -> None:
    cpus = len(os.sched_getaffinity(0))
    rows = []
    for script, steps in (("ppo.py", args.ppo_steps), ("dqn_jax.py", args.dqn_jax_steps)):
        results = {}
        for label, workers, flags in CASES:
            results[label] = run_case(script, steps, workers, flags)
            print(f"{script} {label}: {results[label]}", flush=True)
        alone = results[CASES[0][0]]["sps"]
        for label, workers, _ in CASES:
            r = results[label]
            rows.append(
                f"| `{script}` {steps // 1000}k | {label} | {r['sps']:.0f} | {r['sps'] / alone:.2f} | "
                f"{r['train']:.1f} | {r['wall']:.1f} | {workers * steps / r['wall']:.0f} |"
            )
    lines = [
        "# The benchmark runner's one-thread default",
        "",
        f"Made by `.venv/bin/python benchmark/runner_threads.py --ppo-steps {args.ppo_steps} "
        f"--dqn-jax-steps {args.dqn_jax_steps}` on {cpus} CPUs ({time.strftime('%Y-%m-%d')}). Each row is one "
        "`python -m cleanrl_utils.benchmark --env-ids CartPole-v1 --num-seeds W --workers W --command "
        '"python cleanrl/SCRIPT --total-timesteps N"` call started without OMP_NUM_THREADS; "library threads" adds '
        "`--no-one-thread` (torch's and JAX's own thread counts). SPS: env steps per second of a run's training "
        "loop (`charts/SPS` at its end, mean over the runs); train: a run's steps / SPS; wall: the runner's whole "
        "call, start-up included; steps/s overall: all runs' steps / wall.",
        "",
        "| script | runs | SPS per run | vs alone, one thread | train (s) | wall (s) | steps/s overall |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main(tyro.cli(Args))
