"""Side-by-side speed of cleanrl/ppo.py and Stable-Baselines3 PPO on CartPole-v1 at identical settings.

    .venv/bin/python benchmark/ppo_vs_sb3_speed.py                # 3 rounds x 200k steps each
    .venv/bin/python benchmark/ppo_vs_sb3_speed.py --rounds 1 --total-timesteps 50000

Settings shared by both: 4 envs (synchronous, in-process) x 128 steps, 4 epochs x 4 minibatches
(128 samples), lr 2.5e-4 annealed linearly to 0, gamma 0.99, lambda 0.95, clip 0.2 (value clipping
too), entropy 0.01, value 0.5, grad-norm 0.5, Adam eps 1e-5, separate 64-64 tanh actor and critic
with orthogonal init, CPU, OMP_NUM_THREADS=1, TensorBoard logging on. The two alternate round by
round so machine noise hits both alike. SPS is environment steps per second of the training loop
(start-up excluded): ours from its `charts/SPS`, SB3's as total steps / `learn()` wall time.
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
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env

total_timesteps, seed, tensorboard_log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
env = make_vec_env("CartPole-v1", n_envs=4, seed=seed)
model = PPO(
    "MlpPolicy", env, learning_rate=lambda progress_remaining: 2.5e-4 * progress_remaining,
    n_steps=128, batch_size=128, n_epochs=4, gamma=0.99, gae_lambda=0.95, clip_range=0.2,
    clip_range_vf=0.2, normalize_advantage=True, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5,
    policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=nn.Tanh, ortho_init=True),
    tensorboard_log=tensorboard_log, device="cpu", seed=seed, verbose=0,
)
start = time.time()
model.learn(total_timesteps=total_timesteps)
print(f"SPS {total_timesteps / (time.time() - start):.1f}")
"""


@dataclass
class Args:
    total_timesteps: int = 200_000
    """environment steps per run"""
    rounds: int = 3
    """how many times each library runs (alternating)"""
    markdown: str = str(REPO / "benchmark" / "results" / "ppo_vs_sb3_speed.md")
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
    if args.total_timesteps < 512:
        return f"--total-timesteps must be at least one batch (4 envs x 128 steps = 512), got {args.total_timesteps}"
    if not args.markdown or os.path.isdir(args.markdown):
        return f"--markdown {args.markdown!r} must name a file"
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.markdown))):
        return f"--markdown {args.markdown!r}: its folder does not exist"
    return None


def main(args: Args):
    error = args_error(args)
    if error is not None:
        print(f"ppo_vs_sb3_speed.py: {error}", file=sys.stderr)
        sys.exit(2)
    ours, sb3 = [], []
    for round_ in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as cwd:
            run(
                [
                    sys.executable,
                    str(REPO / "cleanrl" / "ppo.py"),
                    "--env-id",
                    "CartPole-v1",
                    "--no-cuda",
                    "--total-timesteps",
                    str(args.total_timesteps),
                    "--seed",
                    str(round_),
                ],
                cwd,
            )
            (cleanrl_run,) = find_runs(os.path.join(cwd, "runs"))
            ours.append(float(read_scalars(cleanrl_run.path, "charts/SPS")[1][-1]))
        with tempfile.TemporaryDirectory() as cwd:
            out = run([sys.executable, "-c", SB3_RUN, str(args.total_timesteps), str(round_), cwd], cwd)
            sb3.append(float(out.split("SPS")[-1]))
        print(f"round {round_}: cleanrl ppo.py {ours[-1]:.0f} SPS, SB3 PPO {sb3[-1]:.0f} SPS", flush=True)

    import stable_baselines3
    import torch

    ratio = np.mean(ours) / np.mean(sb3)
    table = (
        f"# cleanrl ppo.py vs Stable-Baselines3 {stable_baselines3.__version__} PPO, CartPole-v1\n\n"
        f"Command: `.venv/bin/python benchmark/ppo_vs_sb3_speed.py --total-timesteps {args.total_timesteps} "
        f"--rounds {args.rounds}` (torch {torch.__version__}, CPU, OMP_NUM_THREADS=1).\n"
        "Identical settings: see the docstring of benchmark/ppo_vs_sb3_speed.py.\n\n"
        "| round | cleanrl SPS | SB3 SPS |\n|---|---|---|\n"
        + "".join(f"| {i + 1} | {a:.0f} | {b:.0f} |\n" for i, (a, b) in enumerate(zip(ours, sb3)))
        + f"| mean | {np.mean(ours):.0f} | {np.mean(sb3):.0f} |\n\n"
        f"**SPS ratio cleanrl / SB3: {ratio:.2f}**\n"
    )
    print(table)
    Path(args.markdown).write_text(table)


if __name__ == "__main__":
    main(tyro.cli(Args))
