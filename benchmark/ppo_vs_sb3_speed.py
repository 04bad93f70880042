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

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sb3_speed import REPO, compare, rounds_error  # noqa: E402

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


def args_error(args: Args):
    """The first problem with the command-line values as one line, or None."""
    if args.total_timesteps < 512:
        return f"--total-timesteps must be at least one batch (4 envs x 128 steps = 512), got {args.total_timesteps}"
    return rounds_error(args.rounds, args.markdown)


def main(args: Args):
    error = args_error(args)
    if error is not None:
        print(f"ppo_vs_sb3_speed.py: {error}", file=sys.stderr)
        sys.exit(2)
    compare("ppo_vs_sb3_speed.py", "ppo.py", "PPO", SB3_RUN, args.total_timesteps, args.rounds, args.markdown)


if __name__ == "__main__":
    main(tyro.cli(Args))
