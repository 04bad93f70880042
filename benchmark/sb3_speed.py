"""What the speed comparisons against Stable-Baselines3 (ppo_vs_sb3_speed.py, dqn_vs_sb3_speed.py) share:
alternating rounds of one of our scripts and an SB3 program at identical settings, and the table.

SPS is environment steps per second of the training loop (start-up excluded): ours from the last
`charts/SPS` the script logged, SB3's from the `SPS <number>` line its program prints (total steps /
`learn()` wall time). Each run is a subprocess with OMP_NUM_THREADS=1 on the CPU, in its own
temporary folder.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from cleanrl_utils.report import find_runs, read_scalars  # noqa: E402


def run(command, cwd):
    """Runs `command` in `cwd`; returns its stdout, or stops the benchmark with its stderr's end."""
    env = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="disabled")
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr[-2000:]}")
    return result.stdout


def rounds_error(rounds, markdown):
    """The problem with `--rounds` or `--markdown` as one line, or None."""
    if rounds < 1:
        return f"--rounds must be at least 1, got {rounds}"
    if not markdown or os.path.isdir(markdown):
        return f"--markdown {markdown!r} must name a file"
    if not os.path.isdir(os.path.dirname(os.path.abspath(markdown))):
        return f"--markdown {markdown!r}: its folder does not exist"
    return None


def compare(tool, script, algo, sb3_program, total_timesteps, rounds, markdown):
    """Runs `cleanrl/{script}` on CartPole-v1 and `sb3_program` (Python source taking total steps, seed and
    a TensorBoard folder as arguments) `rounds` times each, alternating, with seeds 1..rounds; writes the
    table to `markdown` and prints it."""
    ours, sb3 = [], []
    for round_ in range(1, rounds + 1):
        with tempfile.TemporaryDirectory() as cwd:
            command = [sys.executable, str(REPO / "cleanrl" / script), "--env-id", "CartPole-v1", "--no-cuda"]
            run(command + ["--total-timesteps", str(total_timesteps), "--seed", str(round_)], cwd)
            (cleanrl_run,) = find_runs(os.path.join(cwd, "runs"))
            ours.append(float(read_scalars(cleanrl_run.path, "charts/SPS")[1][-1]))
        with tempfile.TemporaryDirectory() as cwd:
            out = run([sys.executable, "-c", sb3_program, str(total_timesteps), str(round_), cwd], cwd)
            sb3.append(float(out.split("SPS")[-1]))
        print(f"round {round_}: cleanrl {script} {ours[-1]:.0f} SPS, SB3 {algo} {sb3[-1]:.0f} SPS", flush=True)

    import stable_baselines3
    import torch

    ratio = np.mean(ours) / np.mean(sb3)
    table = (
        f"# cleanrl {script} vs Stable-Baselines3 {stable_baselines3.__version__} {algo}, CartPole-v1\n\n"
        f"Command: `.venv/bin/python benchmark/{tool} --total-timesteps {total_timesteps} "
        f"--rounds {rounds}` (torch {torch.__version__}, CPU, OMP_NUM_THREADS=1).\n"
        f"Identical settings: see the docstring of benchmark/{tool}.\n\n"
        "| round | cleanrl SPS | SB3 SPS |\n|---|---|---|\n"
        + "".join(f"| {i + 1} | {a:.0f} | {b:.0f} |\n" for i, (a, b) in enumerate(zip(ours, sb3)))
        + f"| mean | {np.mean(ours):.0f} | {np.mean(sb3):.0f} |\n\n"
        f"**SPS ratio cleanrl / SB3: {ratio:.2f}**\n"
    )
    print(table)
    Path(markdown).write_text(table)
