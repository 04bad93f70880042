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

import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sb3_speed import REPO, compare, rounds_error  # noqa: E402

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


def args_error(args: Args):
    """The first problem with the command-line values as one line, or None."""
    if args.total_timesteps < 12_000:
        return f"--total-timesteps must be at least 12000 (learning starts at 10k), got {args.total_timesteps}"
    return rounds_error(args.rounds, args.markdown)


def main(args: Args):
    error = args_error(args)
    if error is not None:
        print(f"dqn_vs_sb3_speed.py: {error}", file=sys.stderr)
        sys.exit(2)
    compare("dqn_vs_sb3_speed.py", "dqn.py", "DQN", SB3_RUN, args.total_timesteps, args.rounds, args.markdown)


if __name__ == "__main__":
    main(tyro.cli(Args))
