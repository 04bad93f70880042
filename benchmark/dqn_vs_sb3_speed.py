"""Side-by-side speed of cleanrl/dqn.py and Stable-Baselines3 DQN on CartPole-v1 at identical settings.

    .venv/bin/python benchmark/dqn_vs_sb3_speed.py                # 3 rounds x 100k steps each
    .venv/bin/python benchmark/dqn_vs_sb3_speed.py --rounds 1 --total-timesteps 20000

Settings shared by both (dqn.py's defaults): 1 env, replay buffer 10k, batch 128, Adam lr 2.5e-4,
gamma 0.99, hard target copy every 500 env steps, ε 1 → 0.05 over half the run, learning starts at
10k, one gradient step every 10 env steps, a 120-84 ReLU MLP, CPU, OMP_NUM_THREADS=1, TensorBoard
logging on. What SB3 does not let us set without subclassing: its loss is the Huber (smooth L1) loss
with gradients clipped to norm 10, ours MSE without clipping (the same cost to a few microseconds).
The two alternate round by round so machine noise hits both alike. SPS is environment steps per
second of the training loop (start-up excluded): ours from its last `charts/SPS`, SB3's as total
steps / `learn()` wall time.
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

SB3_RUN = r"""
import sys, time
import torch.nn as nn
from stable_baselines3 import DQN
from stable_baselines3.common.env_util import make_vec_env

total_timesteps, seed, tensorboard_log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
env = make_vec_env("CartPole-v1", n_envs=1, seed=seed)
model = DQN(
    "MlpPolicy", env, learning_rate=2.5e-4, buffer_size=10_000, learning_starts=10_000, batch_size=128,
    tau=1.0, gamma=0.99, train_freq=10, gradient_steps=1, target_update_interval=500,
    exploration_fraction=0.5, exploration_initial_eps=1.0, exploration_final_eps=0.05,
    policy_kwargs=dict(net_arch=[120, 84], activation_fn=nn.ReLU),
    tensorboard_log=tensorboard_log, device="cpu", seed=seed, verbose=0,
)
start = time.time()
model.learn(total_timesteps=total_timesteps)
print(f"SPS {total_timesteps / (time.time() - start):.1f}")
"""


@dataclass
class Args:
    total_timesteps: int = 100_000
    """environment steps per run"""
    rounds: int = 3
    """how many times each library runs (alternating)"""
    markdown: str = str(REPO / "benchmark" / "results" / "dqn_vs_sb3_speed.md")
    """where the result table goes"""


def run(command, cwd):
    env = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="disabled")
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stderr[-2000:]}")
    return result.stdout


def args_error(args: Args):
    """The first problem with the command-line values as one line, or None."""
    if args.rounds < 1:
        return f"--rounds must be at least 1, got {args.rounds}"
    if args.total_timesteps < 12_000:
        return f"--total-timesteps must be at least 12000 (learning starts at 10k), got {args.total_timesteps}"
    if not args.markdown or os.path.isdir(args.markdown):
        return f"--markdown {args.markdown!r} must name a file"
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.markdown))):
        return f"--markdown {args.markdown!r}: its folder does not exist"
    return None


def main(args: Args):
    error = args_error(args)
    if error is not None:
        print(f"dqn_vs_sb3_speed.py: {error}", file=sys.stderr)
        sys.exit(2)
    ours, sb3 = [], []
    for round_ in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as cwd:
            command = [sys.executable, str(REPO / "cleanrl" / "dqn.py"), "--env-id", "CartPole-v1", "--no-cuda"]
            run(command + ["--total-timesteps", str(args.total_timesteps), "--seed", str(round_)], cwd)
            (cleanrl_run,) = find_runs(os.path.join(cwd, "runs"))
            ours.append(float(read_scalars(cleanrl_run.path, "charts/SPS")[1][-1]))
        with tempfile.TemporaryDirectory() as cwd:
            out = run([sys.executable, "-c", SB3_RUN, str(args.total_timesteps), str(round_), cwd], cwd)
            sb3.append(float(out.split("SPS")[-1]))
        print(f"round {round_}: cleanrl dqn.py {ours[-1]:.0f} SPS, SB3 DQN {sb3[-1]:.0f} SPS", flush=True)

    import stable_baselines3
    import torch

    ratio = np.mean(ours) / np.mean(sb3)
    table = (
        f"# cleanrl dqn.py vs Stable-Baselines3 {stable_baselines3.__version__} DQN, CartPole-v1\n\n"
        f"Command: `.venv/bin/python benchmark/dqn_vs_sb3_speed.py --total-timesteps {args.total_timesteps} "
        f"--rounds {args.rounds}` (torch {torch.__version__}, CPU, OMP_NUM_THREADS=1).\n"
        "Identical settings: see the docstring of benchmark/dqn_vs_sb3_speed.py.\n\n"
        "| round | cleanrl SPS | SB3 SPS |\n|---|---|---|\n"
        + "".join(f"| {i + 1} | {a:.0f} | {b:.0f} |\n" for i, (a, b) in enumerate(zip(ours, sb3)))
        + f"| mean | {np.mean(ours):.0f} | {np.mean(sb3):.0f} |\n\n"
        f"**SPS ratio cleanrl / SB3: {ratio:.2f}**\n"
    )
    print(table)
    Path(args.markdown).write_text(table)


if __name__ == "__main__":
    main(tyro.cli(Args))
