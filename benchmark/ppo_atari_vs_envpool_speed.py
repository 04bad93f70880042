"""Side-by-side speed of cleanrl/ppo_atari.py (Gymnasium + ale-py wrappers, BreakoutNoFrameskip-v4) and
cleanrl/ppo_atari_envpool.py (envpool, Breakout-v5) at identical PPO settings.

    .venv/bin/python benchmark/ppo_atari_vs_envpool_speed.py               # 3 rounds x 51,200 steps each
    .venv/bin/python benchmark/ppo_atari_vs_envpool_speed.py --rounds 1 --total-timesteps 10240 --threads 2

Settings shared by both: --num-envs x --num-steps (default 8 x 128), --update-epochs x --num-minibatches
(default 4 x 4), the same total steps, seed = round number, CPU (--no-cuda), and every other flag at the scripts'
(shared) defaults: Nature CNN, lr 2.5e-4 annealed, clip 0.1, GAE 0.99 / 0.95. Both games are preprocessed
alike (frame skip 4 with a max over the last two frames, up to 30 no-op starts, no sticky actions, a life loss
ends the agent's episode, FIRE after resets, rewards clipped to their sign, 84x84 gray, 4 stacked frames;
envpool also plays random no-ops after a lost life): ppo_atari.py with Gymnasium wrappers on one synchronous
vector env in the Python process, ppo_atari_envpool.py inside envpool's C++ thread pool. Threads: each run
gets OMP_NUM_THREADS=MKL_NUM_THREADS=--threads, which sets torch's intra-op threads; envpool's worker threads
are its own (its default), and they are what the comparison measures. The two alternate round by round so
machine noise hits both alike. SPS is environment steps per second of the training loop (start-up excluded),
the last `charts/SPS` each script logged.
"""

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from cleanrl_utils.report import find_runs, read_scalars  # noqa: E402

SCRIPTS = [("ppo_atari.py", "BreakoutNoFrameskip-v4"), ("ppo_atari_envpool.py", "Breakout-v5")]


@dataclass
class Args:
    total_timesteps: int = 51_200
    """environment steps per run (the default: 50 updates of 8 x 128)"""
    rounds: int = 3
    """how many times each script runs (alternating)"""
    num_envs: int = 8
    """--num-envs of both scripts"""
    num_steps: int = 128
    """--num-steps of both scripts"""
    num_minibatches: int = 4
    """--num-minibatches of both scripts"""
    update_epochs: int = 4
    """--update-epochs of both scripts"""
    threads: int = 1
    """OMP_NUM_THREADS and MKL_NUM_THREADS of both runs (torch's intra-op threads)"""
    markdown: str = str(REPO / "benchmark" / "results" / "ppo_atari_vs_envpool_speed.md")
    """where the result table goes"""


def args_error(args: Args):
    """The first problem with the command-line values as one line, or None."""
    if args.rounds < 1:
        return f"--rounds must be at least 1, got {args.rounds}"
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "threads"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    batch = args.num_envs * args.num_steps
    if batch % args.num_minibatches != 0 or batch // args.num_minibatches < 2:
        return f"a batch of {batch} steps must split into --num-minibatches {args.num_minibatches} of at least 2 steps"
    if args.total_timesteps < batch:
        return f"--total-timesteps must be at least one batch ({args.num_envs} envs x {args.num_steps} steps = {batch})"
    if not args.markdown or os.path.isdir(args.markdown):
        return f"--markdown {args.markdown!r} must name a file"
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.markdown))):
        return f"--markdown {args.markdown!r}: its folder does not exist"
    return None


def run_sps(script, env_id, seed, args):
    """Runs cleanrl/{script} in a temporary folder; returns the last SPS it logged, or stops the benchmark."""
    flags = ["--env-id", env_id, "--seed", str(seed), "--no-cuda", "--total-timesteps", str(args.total_timesteps)]
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs"):
        flags += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    threads = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, WANDB_MODE="disabled")
    with tempfile.TemporaryDirectory() as cwd:
        command = [sys.executable, str(REPO / "cleanrl" / script), *flags]
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"failed: {' '.join(command)}\n{result.stderr[-2000:]}")
        (run,) = find_runs(os.path.join(cwd, "runs"))
        return float(read_scalars(run.path, "charts/SPS")[1][-1])


def main(args: Args):
    error = args_error(args)
    if error is not None:
        print(f"ppo_atari_vs_envpool_speed.py: {error}", file=sys.stderr)
        sys.exit(2)
    sps = {script: [] for script, _ in SCRIPTS}
    for round_ in range(1, args.rounds + 1):
        for script, env_id in SCRIPTS:
            sps[script].append(run_sps(script, env_id, round_, args))
        print("round " + ", ".join(f"{round_}: {s} {sps[s][-1]:.0f} SPS" for s, _ in SCRIPTS), flush=True)

    import envpool
    import gymnasium
    import torch

    gym_sps, envpool_sps = sps["ppo_atari.py"], sps["ppo_atari_envpool.py"]
    ratio = np.mean(envpool_sps) / np.mean(gym_sps)
    command = (
        f".venv/bin/python benchmark/ppo_atari_vs_envpool_speed.py --total-timesteps {args.total_timesteps} "
        f"--rounds {args.rounds} --num-envs {args.num_envs} --num-steps {args.num_steps} "
        f"--num-minibatches {args.num_minibatches} --update-epochs {args.update_epochs} --threads {args.threads}"
    )
    table = (
        "# cleanrl ppo_atari.py (Gymnasium, BreakoutNoFrameskip-v4) vs ppo_atari_envpool.py (envpool, Breakout-v5)\n\n"
        f"Command: `{command}`\n\n"
        f"torch {torch.__version__} on the CPU with OMP_NUM_THREADS={args.threads} (torch intra-op threads: "
        f"{args.threads}), gymnasium {gymnasium.__version__}, envpool {envpool.__version__} (its own worker threads), "
        f"{len(os.sched_getaffinity(0))} CPU cores available. Identical settings: see the docstring of "
        "benchmark/ppo_atari_vs_envpool_speed.py.\n\n"
        "| round | ppo_atari.py SPS | ppo_atari_envpool.py SPS |\n|---|---|---|\n"
        + "".join(f"| {i + 1} | {a:.0f} | {b:.0f} |\n" for i, (a, b) in enumerate(zip(gym_sps, envpool_sps)))
        + f"| mean | {np.mean(gym_sps):.0f} | {np.mean(envpool_sps):.0f} |\n\n"
        f"**SPS ratio envpool / Gymnasium: {ratio:.2f}**\n"
    )
    print(table)
    Path(args.markdown).write_text(table)


if __name__ == "__main__":
    main(tyro.cli(Args))
