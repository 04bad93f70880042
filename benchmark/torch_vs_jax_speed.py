"""Side-by-side speed of the torch scripts and their JAX twins at identical settings (issue 8's ratios).

    .venv/bin/python benchmark/torch_vs_jax_speed.py                      # every comparison, 3 rounds
    .venv/bin/python benchmark/torch_vs_jax_speed.py --only dqn --rounds 1 --dqn-steps 12000

Comparisons (every flag not listed is the scripts' shared default, the same in both files of a pair):
- dqn: dqn.py vs dqn_jax.py on CartPole-v1, --dqn-steps env steps (default 50,000: 10,000 random steps,
  then one gradient step of 128 every 10 env steps and an ε-greedy forward pass on every step).
- td3: td3_continuous_action.py vs td3_continuous_action_jax.py on Hopper-v5 (MuJoCo), --td3-steps env steps
  with --learning-starts 5000 (default 15,000: 10,000 gradient steps of 256 after 5,000 random steps).
- ppo_envpool: ppo_atari_envpool.py vs ppo_atari_envpool_xla_jax.py and ppo_atari_envpool_xla_jax_scan.py on
  envpool's Breakout-v5, 8 envs x 128 steps, 4 epochs x 4 minibatches, --ppo-steps env steps (default 20,480:
  20 updates).

Each run is a subprocess in a temporary folder with seed = round number; the scripts of a comparison
alternate round by round so machine noise hits them alike. On the CPU (the default) torch gets --no-cuda and
OMP_NUM_THREADS=MKL_NUM_THREADS=--threads; JAX gets JAX_PLATFORMS=cpu and XLA_FLAGS giving XLA's CPU backend
--threads intra-op threads. With --cuda both use the GPU instead (torch --cuda, JAX's default platform). SPS is
the last `charts/SPS` each script logged: environment steps per second of the whole training loop, JAX's
compilation included (it is paid once per run; longer runs dilute it). The ratio is JAX / torch (above 1: JAX
is faster).
"""

import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sb3_speed import REPO, rounds_error  # noqa: E402

sys.path.insert(0, str(REPO))
from cleanrl_utils.report import find_runs, read_scalars  # noqa: E402

# name -> (what, env id, the torch script and its JAX twins, flags shared by all, the Args field with the steps)
COMPARISONS = {
    "dqn": ("DQN", "CartPole-v1", ["dqn.py", "dqn_jax.py"], [], "dqn_steps"),
    "td3": (
        "TD3",
        "Hopper-v5",
        ["td3_continuous_action.py", "td3_continuous_action_jax.py"],
        ["--learning-starts", "5000"],
        "td3_steps",
    ),
    "ppo_envpool": (
        "PPO, envpool Atari",
        "Breakout-v5",
        ["ppo_atari_envpool.py", "ppo_atari_envpool_xla_jax.py", "ppo_atari_envpool_xla_jax_scan.py"],
        ["--num-envs", "8", "--num-steps", "128", "--num-minibatches", "4", "--update-epochs", "4"],
        "ppo_steps",
    ),
}


@dataclass
class Args:
    only: tuple[str, ...] = tuple(COMPARISONS)
    """the comparisons to run: dqn, td3, ppo_envpool"""
    rounds: int = 3
    """how many times each script runs (alternating)"""
    dqn_steps: int = 50_000
    """--total-timesteps of the dqn comparison (its learning starts at 10,000)"""
    td3_steps: int = 15_000
    """--total-timesteps of the td3 comparison (its learning starts at 5,000)"""
    ppo_steps: int = 20_480
    """--total-timesteps of the ppo_envpool comparison (a multiple of 1,024 = 8 envs x 128 steps)"""
    threads: int = 1
    """CPU threads of each run's numerics: torch's OMP/MKL threads, XLA's intra-op threads"""
    cuda: bool = False
    """run both frameworks on the GPU instead of the CPU"""
    markdown: str = str(REPO / "benchmark" / "results" / "torch_vs_jax_speed.md")
    """where the result tables go"""


def args_error(args: Args):
    """The first problem with the command-line values as one line, or None."""
    unknown = [name for name in args.only if name not in COMPARISONS]
    if unknown or not args.only:
        return f"--only takes one or more of {', '.join(COMPARISONS)}, got {' '.join(args.only) or 'nothing'}"
    if args.threads < 1:
        return f"--threads must be at least 1, got {args.threads}"
    # the scripts log SPS with their losses: dqn every 100 gradient steps (1,000 env steps) after its learning start
    # at 10,000, td3 every 100 env steps after the comparison's learning start at 5,000
    if args.dqn_steps < 11_000:
        return f"--dqn-steps must be at least 11,000 (dqn logs its first SPS there), got {args.dqn_steps}"
    if args.td3_steps < 5_100:
        return f"--td3-steps must be at least 5,100 (td3 logs its first SPS there), got {args.td3_steps}"
    if args.ppo_steps < 1024 or args.ppo_steps % 1024:
        return f"--ppo-steps must be a positive multiple of one batch (8 envs x 128 steps = 1,024), got {args.ppo_steps}"
    return rounds_error(args.rounds, args.markdown)


def run_sps(script, env_id, flags, seed, args):
    """Runs cleanrl/{script} in a temporary folder; returns the last SPS it logged, or stops the benchmark."""
    command = [sys.executable, str(REPO / "cleanrl" / script), "--env-id", env_id, "--seed", str(seed), *flags]
    threads = str(args.threads)
    env = dict(os.environ, WANDB_MODE="disabled", OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
    if "_jax" in script:
        env["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen={'true' if args.threads > 1 else 'false'} " + (
            f"intra_op_parallelism_threads={threads}"
        )
        if not args.cuda:
            env["JAX_PLATFORMS"] = "cpu"
    else:
        command.append("--cuda" if args.cuda else "--no-cuda")
    with tempfile.TemporaryDirectory() as cwd:
        result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"failed: {' '.join(command)}\n{result.stderr[-2000:]}")
        (run,) = find_runs(os.path.join(cwd, "runs"))
        return float(read_scalars(run.path, "charts/SPS")[1][-1])


def compare(name, args):
    """Runs one comparison; returns its markdown section."""
    what, env_id, scripts, flags, steps_field = COMPARISONS[name]
    steps = getattr(args, steps_field)
    flags = [*flags, "--total-timesteps", str(steps)]
    sps = {script: [] for script in scripts}
    for round_ in range(1, args.rounds + 1):
        for script in scripts:
            sps[script].append(run_sps(script, env_id, flags, round_, args))
        print(f"{name} round {round_}: " + ", ".join(f"{s} {sps[s][-1]:.0f} SPS" for s in scripts), flush=True)
    torch_script, jax_scripts = scripts[0], scripts[1:]
    header = "| round | " + " | ".join(f"{s} SPS" for s in scripts) + " |\n" + "|---" * (len(scripts) + 1) + "|\n"
    rows = "".join(f"| {i + 1} | " + " | ".join(f"{sps[s][i]:.0f}" for s in scripts) + " |\n" for i in range(args.rounds))
    mean = "| mean | " + " | ".join(f"{np.mean(sps[s]):.0f}" for s in scripts) + " |\n"
    ratios = "".join(f"- **{s} / {torch_script}: {np.mean(sps[s]) / np.mean(sps[torch_script]):.2f}**\n" for s in jax_scripts)
    title = f"## {what}: {env_id}, {steps:,} steps, flags `{' '.join(flags)}`"
    return f"{title}\n\n{header}{rows}{mean}\nSPS ratio JAX / torch:\n{ratios}"


def main(args: Args):
    error = args_error(args)
    if error is not None:
        print(f"torch_vs_jax_speed.py: {error}", file=sys.stderr)
        sys.exit(2)
    sections = [compare(name, args) for name in args.only]

    import jax
    import torch

    steps = " ".join(f"--{COMPARISONS[name][4].replace('_', '-')} {getattr(args, COMPARISONS[name][4])}" for name in args.only)
    command = (
        f".venv/bin/python benchmark/torch_vs_jax_speed.py --only {' '.join(args.only)} --rounds {args.rounds} {steps} "
        f"--threads {args.threads}" + (" --cuda" if args.cuda else "")
    )
    device = "the GPU" if args.cuda else f"the CPU ({platform.processor() or platform.machine()})"
    table = (
        "# cleanrl torch scripts vs their JAX twins: training speed at identical settings\n\n"
        f"Command: `{command}`\n\n"
        f"torch {torch.__version__}, jax {jax.__version__}, on {device} with {args.threads} numeric thread(s) per run, "
        f"{len(os.sched_getaffinity(0))} CPU core(s) available to the benchmark. Settings and method: the docstring "
        "of benchmark/torch_vs_jax_speed.py.\n\n" + "\n".join(sections)
    )
    print(table)
    Path(args.markdown).write_text(table)


if __name__ == "__main__":
    main(tyro.cli(Args))
