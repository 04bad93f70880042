# Rainbow for Atari games through ale-py: DQN with its six extensions combined.
# Paper: Hessel et al. 2018, "Rainbow: Combining Improvements in Deep Reinforcement Learning" (AAAI): prioritised replay
# (Schaul et al. 2016), n-step returns, double Q-learning (van Hasselt et al. 2016), dueling heads (Wang et al. 2016),
# the categorical distribution of C51 (Bellemare et al. 2017) and noisy layers (Fortunato et al. 2018, "Noisy Networks
# for Exploration"); the Atari preprocessing of Mnih et al. 2015 (Nature). CleanRL's published defaults. Exploration
# comes from the noisy layers alone: both networks resample their noise before every gradient step.
# Deliberate differences from the paper: learning starts at 80k agent steps (not frames); priorities are the per-sample
# cross-entropy (the KL divergence plus the target's entropy); importance weights are divided by the batch's largest;
# a time limit is not terminal and an n-step window stops at its episode's end: k < n steps ending at a truncation
# bootstrap from the true final observation with γ^k, ending at a termination do not bootstrap; the logged return is
# the game score; each frame is stored once (about 7 GB for 1M frames); `ALE/*-v5` ids skip frames once (frameskip=1).
# Differences from CleanRL's version: factorised noise as in the NoisyNet paper; n-step windows stop at truncations too
# and discount by γ^k; the loss is logged as `losses/loss`; log-softmax instead of clamped probabilities; no unused ε
# flags; vector envs work. Evaluation acts greedily with the noise sample saved with the model (training's last).
import functools
import glob
import importlib.util
import math
import os
import random
import re
import shutil
import sys
import time
from collections import deque
from dataclasses import dataclass
from typing import Optional

import ale_py
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tyro
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, NoopResetEnv
from torch.utils.tensorboard import SummaryWriter

gym.register_envs(ale_py)
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no start-up banner before our one-line errors
SCRIPT = os.path.basename(__file__)
SLOT_BYTES = 84 * 84 + 26  # a replay slot: one uint8 frame, the action, reward, n-step return, steps, done, two flags


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, cuda will be used when available"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: Optional[str] = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (check out `videos` folder)"""
    save_model: bool = False
    """whether to save the model into `runs/{run_name}` and evaluate it for 10 episodes"""
    upload_model: bool = False
    """whether to push the saved model, card, video, logs and script to the Hugging Face Hub (needs --save-model)"""
    hf_entity: str = ""
    """the user or org of the Hub repository `{hf_entity}/{env_id}-{exp_name}-seed{seed}` (default: the token's user)"""

    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of the environment"""
    total_timesteps: int = 10000000
    """total environment steps of the experiment"""
    learning_rate: float = 6.25e-5
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    buffer_size: int = 1000000
    """the replay memory size (frames; each episode's final frame takes one, so it holds slightly fewer transitions)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    tau: float = 1.0
    """the target network update rate (1.0: a hard copy)"""
    target_network_frequency: int = 8000
    """the timesteps it takes to update the target network"""
    batch_size: int = 32
    """the batch size of sample from the replay memory"""
    learning_starts: int = 80000
    """timestep to start learning"""
    train_frequency: int = 4
    """the frequency of training (env steps per gradient step)"""
    n_step: int = 3
    """the number of steps of the multi-step return"""
    prioritized_replay_alpha: float = 0.5
    """the priority exponent α of prioritised replay (0: uniform sampling)"""
    prioritized_replay_beta: float = 0.4
    """the initial importance-sampling exponent β, annealed linearly to 1 over the run"""
    prioritized_replay_eps: float = 1e-6
    """the constant added to every priority so that no stored transition becomes unreachable"""
    n_atoms: int = 51
    """the number of atoms of the return distribution"""
    v_min: float = -10
    """the lowest return of the support"""
    v_max: float = 10
    """the highest return of the support"""
    checkpoint_every: int = 40000
    """write runs/{run_name}/checkpoint.pt every this many env steps, at the end and at Ctrl-C; 0: never"""
    checkpoint_memory: bool = True
    """whether checkpoints hold the replay memory (without it, a resumed run refills it before learning again)"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def make_env(env_id, num_envs, capture_video, run_name):
    def thunk(idx):  # frameskip=1: v5 (and plain v4) ids skip frames inside ALE; here MaxAndSkip skips them once
        if capture_video and idx == 0:
            env = gym.make(env_id, frameskip=1, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, frameskip=1)
        env = NoopResetEnv(gym.wrappers.RecordEpisodeStatistics(env), noop_max=30)  # stats of the raw game: its score
        env = EpisodicLifeEnv(gym.wrappers.MaxAndSkipObservation(env, skip=4))
        env = ClipRewardEnv(FireResetEnv(env) if "FIRE" in env.unwrapped.get_action_meanings() else env)
        env = gym.wrappers.GrayscaleObservation(gym.wrappers.ResizeObservation(env, (84, 84)))
        return gym.wrappers.FrameStackObservation(env, 4)

    thunks = [functools.partial(thunk, i) for i in range(num_envs)]  # SAME_STEP: true last obs in info["final_obs"]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


class NoisyLinear(nn.Module):
    """A linear layer with weights μ + σ ⊙ ε, learned μ and σ and factorised Gaussian noise ε_w = f(ε_out) f(ε_in)ᵀ,
    ε_b = f(ε_out), f(x) = sign(x) √|x| (Fortunato et al. 2018, §3). The noise stays until `reset_noise`; it lives in
    buffers, so a saved model keeps the sample it acted with."""

    def __init__(self, in_features, out_features, std_init=0.5):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), std_init * bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), std_init * bound))
        self.register_buffer("epsilon_in", torch.zeros(in_features))
        self.register_buffer("epsilon_out", torch.zeros(out_features))
        self.reset_noise()

    def reset_noise(self):
        for epsilon in (self.epsilon_in, self.epsilon_out):
            noise = torch.randn(epsilon.shape[0], device=epsilon.device)
            epsilon.copy_(noise.sign() * noise.abs().sqrt())

    def forward(self, x):
        # (μ_w + σ_w ⊙ ε_out ε_inᵀ) x = μ_w x + ε_out ⊙ (σ_w (ε_in ⊙ x)): two products, no noisy matrix built
        mean = F.linear(x, self.weight_mu, self.bias_mu + self.bias_sigma * self.epsilon_out)
        return mean + F.linear(x * self.epsilon_in, self.weight_sigma) * self.epsilon_out


class QNetwork(nn.Module):
    """The Nature CNN and a dueling head of noisy layers: log-probabilities over `n_atoms` returns evenly spaced on
    [v_min, v_max] for every action."""

    def __init__(self, n_actions, n_atoms=51, v_min=-10.0, v_max=10.0, std_init=0.5):
        super().__init__()
        self.n_actions, self.n_atoms = n_actions, n_atoms
        self.register_buffer("atoms", torch.linspace(v_min, v_max, steps=n_atoms))  # saved with the weights
        self.network = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.value = nn.Sequential(NoisyLinear(3136, 512, std_init), nn.ReLU(), NoisyLinear(512, n_atoms, std_init))
        self.advantage = nn.Sequential(
            NoisyLinear(3136, 512, std_init), nn.ReLU(), NoisyLinear(512, n_actions * n_atoms, std_init)
        )

    def forward(self, x):
        """Log-probabilities (B, n_actions, n_atoms) of the return distribution of every action."""
        hidden = self.network(x / 255.0)
        value = self.value(hidden).view(-1, 1, self.n_atoms)
        advantage = self.advantage(hidden).view(-1, self.n_actions, self.n_atoms)
        # dueling combination per atom, on the logits (as the Rainbow paper does)
        return F.log_softmax(value + advantage - advantage.mean(dim=1, keepdim=True), dim=2)

    def get_action(self, x):
        """The action with the highest expected return, (B,), and the expected returns, (B, n_actions)."""
        q_values = (self(x).exp() * self.atoms).sum(2)
        return torch.argmax(q_values, dim=1), q_values

    def reset_noise(self):
        for module in self.modules():
            if isinstance(module, NoisyLinear):
                module.reset_noise()


def n_step_return(rewards, terminations, truncations, gamma, n):
    """The n-step returns of consecutive transitions of one env: each window starts at t and stops after n
    transitions, after the first that ends an episode, or at the end of the sequence: k steps. Returns arrays
    Σ_{i<k} γ^i r_{t+i}, k, and whether the window's last transition terminated (else the target adds γ^k times the
    value k steps on, for a truncation the true final observation). Rewards are never summed across episodes."""
    length = len(rewards)
    returns, steps, dones = np.zeros(length, dtype=np.float32), np.zeros(length, dtype=np.int64), np.zeros(length, dtype=bool)
    for t in range(length):
        total = 0.0
        for i in range(min(n, length - t)):
            total += gamma**i * float(rewards[t + i])
            if terminations[t + i] or truncations[t + i]:
                break
        returns[t], steps[t], dones[t] = total, i + 1, bool(terminations[t + i])
    return returns, steps, dones


class SumTree:
    """Non-negative priorities of `size` items in a binary tree whose inner nodes hold the sums of their children, so
    drawing item i with probability priority_i / total takes O(log size). Leaves sit at [capacity, 2 capacity) of one
    float64 array (root 1, children of j at 2j, 2j+1); inner nodes are recomputed from their children, never adjusted
    by differences, so sums do not drift and a zero subtree sums to exactly 0."""

    def __init__(self, size):
        self.size, self.capacity = size, 1 << max(0, (size - 1).bit_length())
        self.depth = self.capacity.bit_length() - 1
        self.tree = np.zeros(2 * self.capacity, dtype=np.float64)

    def update(self, indices, priorities):
        """Sets the priorities of items `indices` (with repeats, one of the given values wins)."""
        nodes = np.asarray(indices, dtype=np.int64) + self.capacity
        self.tree[nodes] = priorities
        for _ in range(self.depth):  # repeated parents get the same sum twice: no need to deduplicate
            nodes = nodes // 2
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]

    def get(self, indices):
        return self.tree[np.asarray(indices, dtype=np.int64) + self.capacity]

    def total(self):
        return self.tree[1]

    def find(self, values):
        """For each value in [0, total), the item i whose interval [Σ_{j<i} p_j, Σ_{j≤i} p_j) holds it."""
        values, nodes = np.array(values, dtype=np.float64), np.ones(len(values), dtype=np.int64)
        for _ in range(self.depth):
            left = 2 * nodes
            left_sum = self.tree[left]
            # never step into an empty subtree: rounding can leave a value at or just past a sum
            go_left = ((values < left_sum) & (left_sum > 0)) | (self.tree[left + 1] <= 0)
            values, nodes = np.where(go_left, values, values - left_sum), np.where(go_left, left, left + 1)
        return nodes - self.capacity


def importance_weights(probabilities, size, beta):
    """Prioritised replay's correction (N P(i))^(-β), divided by the batch's largest weight so updates only shrink."""
    weights = (size * np.asarray(probabilities, dtype=np.float64)) ** -beta
    return weights / weights.max()


def beta_schedule(beta_start, total_timesteps, t):
    """β at env step `t`: linear from `beta_start` at step 0 to 1 at the end of the run."""
    return beta_start + (1.0 - beta_start) * min(t / total_timesteps, 1.0)


class ReplayBuffer:
    """Prioritised memory of n-step transitions that stores each frame once and rebuilds frame stacks when sampled.

    Each sub-env writes a circular stream of `buffer_size // num_envs` slots, each holding the newest frame of an
    observation and, once the agent acted on it, the action and clipped reward. An episode's true final frame takes the
    next slot, the next episode's first frame (`first`) the one after; stacks are padded with an episode's first frame,
    as FrameStackObservation does. The transition starting at slot j is complete once n more frames of its episode are
    stored or the episode ended inside the window: then it gets its n-step return, its k steps, whether it terminated,
    and the maximal priority; it bootstraps from the stack at slot j+k. Exactly the complete transitions with intact
    frames have a non-zero priority in the sum tree (leaf env * slots + slot): an overwritten slot, or one whose stack
    reaches into the slot being overwritten, drops to 0 at once, so sampling never draws it.
    """

    def __init__(self, buffer_size, num_envs, frame_shape, stack_size, device, n_step, gamma, alpha):
        self.num_envs, self.capacity, self.stack_size, self.device = num_envs, buffer_size // num_envs, stack_size, device
        self.n_step, self.gamma, self.alpha = n_step, gamma, alpha
        shape = (num_envs, self.capacity)
        self.frames, self.actions = np.zeros(shape + frame_shape, dtype=np.uint8), np.zeros(shape, dtype=np.int64)
        self.rewards, self.returns = np.zeros(shape, dtype=np.float32), np.zeros(shape, dtype=np.float32)
        self.steps, self.dones = np.zeros(shape, dtype=np.int32), np.zeros(shape, dtype=np.float32)
        self.first, self.can_sample = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
        self.newest = np.full(num_envs, -1)  # per sub-env, the slot written last
        self.filled = np.zeros(num_envs, dtype=np.int64)
        self.pending = np.zeros(num_envs, dtype=np.int64)  # transition starts still waiting for their window
        self.tree = SumTree(num_envs * self.capacity)
        self.size, self.max_priority = 0, 1.0  # size: complete, intact transitions (non-zero priority)
        self._invalidated, self._completed = [], []

    def _write_frame(self, env, frame, first):
        slot = (self.newest[env] + 1) % self.capacity
        self.frames[env, slot], self.first[env, slot] = frame, first
        # the transition this slot held is gone, and so are those whose stacks reach back into it: the next ones
        gone = (slot + np.arange(self.stack_size)) % self.capacity
        gone = gone[self.can_sample[env, gone]]
        if len(gone):
            self.can_sample[env, gone] = False
            self.size -= len(gone)
            self._invalidated.append(env * self.capacity + gone)
        self.newest[env], self.filled[env] = slot, min(self.filled[env] + 1, self.capacity)

    def _complete(self, env, last, count, terminated=False, truncated=False):
        """Completes the oldest `count` pending starts of sub-env `env`, whose windows reach slot `last` at the latest;
        `terminated` and `truncated` are the flags of the transition at `last`."""
        pending = self.pending[env]
        window = (last - pending + 1 + np.arange(pending)) % self.capacity
        ends = np.zeros((2, pending), dtype=bool)
        ends[:, -1] = terminated, truncated
        returns, steps, dones = n_step_return(self.rewards[env, window], ends[0], ends[1], self.gamma, self.n_step)
        starts = window[:count]
        self.returns[env, starts], self.steps[env, starts] = returns[:count], steps[:count]
        self.dones[env, starts] = dones[:count]
        self.can_sample[env, starts] = True
        self.size, self.pending[env] = self.size + count, self.pending[env] - count
        self._completed.append(env * self.capacity + starts)

    def start(self, obs):
        """Stores the first observations (num_envs, stack, H, W) returned by `envs.reset`. In a memory restored by --resume,
        the windows still open end where the interrupted episodes stopped, as at a time limit: their bootstrap is the stored
        last frame; the new episodes start in the next slots."""
        for env in range(self.num_envs):
            if self.pending[env]:
                self._complete(env, (self.newest[env] - 1) % self.capacity, self.pending[env], truncated=True)
            self._write_frame(env, obs[env, -1], first=True)
        self._flush_priorities()

    def add(self, actions, rewards, terminations, truncations, next_obs, final_obs):
        """Stores one vector step; where sub-env i's episode ended, `final_obs[i]` is its true last observation."""
        for env in range(self.num_envs):
            slot = self.newest[env]
            self.actions[env, slot], self.rewards[env, slot] = actions[env], rewards[env]
            self.pending[env] += 1
            if terminations[env] or truncations[env]:
                self._write_frame(env, final_obs[env][-1], first=False)
                self._write_frame(env, next_obs[env, -1], first=True)
                self._complete(env, slot, self.pending[env], terminations[env], truncations[env])  # every open window ends
            else:
                self._write_frame(env, next_obs[env, -1], first=False)
                if self.pending[env] == self.n_step:
                    self._complete(env, slot, 1)
        self._flush_priorities()

    def _flush_priorities(self):
        # zeros first: were a slot overwritten and completed within one vector step, the completion is the newer fact
        if self._invalidated:
            invalidated = np.concatenate(self._invalidated)
            self.tree.update(invalidated, np.zeros(len(invalidated)))
        if self._completed:
            completed = np.concatenate(self._completed)
            self.tree.update(completed, np.full(len(completed), self.max_priority**self.alpha))
        self._invalidated, self._completed = [], []

    def stacks(self, env, slot):
        """The observations (B, stack, H, W) whose newest frames are at `slot` of sub-envs `env`."""
        idx = np.empty((len(slot), self.stack_size), dtype=np.int64)
        idx[:, -1] = slot
        for k in range(self.stack_size - 2, -1, -1):  # an episode's first frame repeats instead of the one before it
            idx[:, k] = np.where(self.first[env, idx[:, k + 1]], idx[:, k + 1], (idx[:, k + 1] - 1) % self.capacity)
        return self.frames[env[:, None], idx]

    def sampleable(self, env, slot):
        """Whether each (env, slot) starts a complete transition whose frames are all intact."""
        return self.can_sample[env, slot]

    def sample(self, batch_size, beta):
        """`batch_size` transitions drawn in proportion to their priorities, one from each of `batch_size` equal slices
        of the total. Returns tensors obs and next_obs (B, stack, H, W) uint8 (next_obs: k steps on), actions, n-step
        returns, dones, discounts γ^k and importance weights (B,), and the drawn tree leaves (NumPy)."""
        total = self.tree.total()
        if not total > 0:
            raise RuntimeError("the replay buffer holds no complete transition to sample")
        values = (np.arange(batch_size) + np.random.random(batch_size)) * (total / batch_size)
        leaves = self.tree.find(values)
        env, slot = np.divmod(leaves, self.capacity)
        weights = importance_weights(self.tree.get(leaves) / total, self.size, beta)
        steps = self.steps[env, slot]
        data = (self.stacks(env, slot), self.actions[env, slot], self.returns[env, slot])
        data += (self.stacks(env, (slot + steps) % self.capacity), self.dones[env, slot])
        data += ((self.gamma**steps).astype(np.float32), weights.astype(np.float32))
        return (*(torch.as_tensor(x, device=self.device) for x in data), leaves)

    def update_priorities(self, leaves, losses, eps):
        """Priorities (loss + eps)^α for the sampled `leaves`; the largest loss + eps so far is the new transitions'."""
        priorities = np.asarray(losses, dtype=np.float64) + eps
        self.max_priority = max(self.max_priority, float(priorities.max()))
        env, slot = np.divmod(leaves, self.capacity)
        intact = self.can_sample[env, slot]
        self.tree.update(leaves[intact], priorities[intact] ** self.alpha)


def project_distribution(next_pmfs, returns, dones, discounts, atoms):
    """The categorical projection of G + γ^k (1 - done) Z' onto the evenly spaced `atoms` (C51, Algorithm 1).

    `next_pmfs` (B, n_atoms): the target network's distribution at the bootstrap observation for the online network's
    action there; `returns` G, `dones` (windows ended by termination) and `discounts` γ^k are (B,). Each shifted atom is
    clamped to [v_min, v_max] and its mass split between its two neighbours by closeness. Returns (B, n_atoms) pmfs.
    """
    n_atoms, v_min, v_max = atoms.shape[0], atoms[0], atoms[-1]
    delta_z = (v_max - v_min) / (n_atoms - 1)
    bootstrap = (discounts * (1.0 - dones)).unsqueeze(1)
    target_atoms = (returns.unsqueeze(1) + bootstrap * atoms.unsqueeze(0)).clamp(v_min, v_max)
    position = ((target_atoms - v_min) / delta_z).clamp(0, n_atoms - 1)
    # upper = lower + 1 (clamped at the top): a whole-number position gives all its mass to `lower`
    lower = position.floor().long()
    upper, upper_weight = (lower + 1).clamp(max=n_atoms - 1), position - lower
    target_pmfs = torch.zeros_like(next_pmfs)
    target_pmfs.scatter_add_(1, lower, next_pmfs * (1.0 - upper_weight))
    target_pmfs.scatter_add_(1, upper, next_pmfs * upper_weight)
    return target_pmfs


def steps_crossed(previous_step, step, every):
    """How many of the steps previous_step+1 .. step are multiples of `every`: the updates owed after one vector step."""
    return step // every - previous_step // every


def validation_error(args, env):
    """The first reason this command line cannot run on `env`, as one line, or None."""
    memory = args.buffer_size * (SLOT_BYTES + 32)  # and the sum tree: at most 4 float64 per slot
    sizes = "total_timesteps num_envs buffer_size batch_size train_frequency target_network_frequency n_step".split()
    checks = [
        (
            not isinstance(env.unwrapped, ale_py.AtariEnv),
            f"{args.env_id} is not an ale-py Atari game; {SCRIPT} needs one, e.g. BreakoutNoFrameskip-v4 or ALE/Breakout-v5",
        ),
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (args.n_atoms < 2 or not args.v_min < args.v_max, "--n-atoms must be at least 2 and --v-min below --v-max"),
        (
            memory > os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
            f"the replay buffer needs {memory / 2**30:.1f} GiB, more than this machine's memory; lower --buffer-size",
        ),
        (
            args.buffer_size < (args.n_step + 5) * args.num_envs,  # a window, the stacks around it, an episode change
            f"--buffer-size must hold --n-step + 5 = {args.n_step + 5} frames per sub-env (--num-envs {args.num_envs})",
        ),
        (
            args.learning_starts < args.n_step * args.num_envs,  # the first batch needs a complete n-step transition
            f"--learning-starts must be at least --n-step x --num-envs = {args.n_step * args.num_envs}",
        ),
        (
            not all(0 <= getattr(args, k) <= 1 for k in ("gamma", "prioritized_replay_beta")),
            "--gamma and --prioritized-replay-beta must be in [0, 1]",
        ),
        (
            not 0 < args.learning_rate < 3.4e37,  # above, Adam's first step (lr / 0.1) overflows float32
            f"--learning-rate must be positive and finite in float32, got {args.learning_rate}",
        ),
        (not 0 <= args.seed < 2**32, f"--seed must be in [0, 2**32 - 1], got {args.seed}"),
        (
            not re.fullmatch(r"[\w.-]{1,150}", args.exp_name) or "__" in args.exp_name,
            f"--exp-name {args.exp_name!r} must be a folder name: up to 150 letters, digits, '.', '-' and single '_'",
        ),
        (args.capture_video and not importlib.util.find_spec("moviepy"), "--capture-video needs moviepy: pip install moviepy"),
    ]
    return next((message for failed, message in checks if failed), None)


def exit_if(error):  # a message stops the run before anything is created (one line on stderr, exit code 2); None goes on
    if error:
        print(f"{SCRIPT}: {error}", file=sys.stderr)
        sys.exit(2)


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):
    """Runs the saved Q-network greedily, with the noise sample saved in it, for `eval_episodes` games; returns their
    scores."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_env(saved["env_id"], 1, capture_video, f"{run_name}-eval")
    q_network = QNetwork(envs.single_action_space.n, saved["n_atoms"], saved["v_min"], saved["v_max"]).to(device)
    q_network.load_state_dict(checkpoint["model"])
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _ = q_network.get_action(torch.as_tensor(obs, device=device))
        obs, _, _, _, infos = envs.step(actions.cpu().numpy())
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    args = tyro.cli(Args)
    ckpt = None  # checkpoints, --resume and clean stops: cleanrl_utils/checkpoint.py, imported only when asked for
    if (args.checkpoint_every or args.resume) and importlib.util.find_spec("cleanrl_utils"):
        fixed = ("env_id", "n_atoms", "v_min", "v_max")  # what the saved networks fit (v_min, v_max: their atoms)
        ckpt = importlib.import_module("cleanrl_utils.checkpoint").Checkpoint(SCRIPT, args, fixed)  # --resume: the saved flags
    elif args.resume:
        exit_if("--resume needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    elif args.checkpoint_every:  # a script copied alone trains without them
        print(f"{SCRIPT}: checkpoints are off: they need cleanrl_utils (pip install -e . in a cleanrl clone)")
    try:  # unknown ids, missing modules or extras all mean this env cannot be made
        env = gym.make(args.env_id)
    except Exception as e:
        exit_if(f"cannot make {args.env_id!r}: {e}")
    exit_if(validation_error(args, env))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    num_iterations = args.total_timesteps // args.num_envs  # whole vector steps: rounds down
    if num_iterations * args.num_envs // args.train_frequency <= args.learning_starts // args.train_frequency:
        print(f"{SCRIPT}: warning: the run ends before its first gradient step (--learning-starts {args.learning_starts})")
    run_time = int(time.time())  # a run that started in the same second owns that name; a resumed run keeps its own
    while os.path.exists(f"runs/{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{run_time}"):
        run_time += 1
    run_name = ckpt.run_name if args.resume else f"{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{run_time}"
    if args.track:
        import wandb

        try:  # with no API key, W&B would wait at a login prompt
            if wandb.setup().settings.mode in ("online", "run", "shared") and not wandb.login(prompt=False):
                raise RuntimeError("no API key")
            wandb.init(
                project=args.wandb_project_name,
                entity=args.wandb_entity,
                name=run_name,
                config=vars(args),
                sync_tensorboard=True,
                save_code=True,
            )
        except Exception as e:  # not logged in, no network, unknown entity: stop before anything is written
            reason = (str(e).splitlines() or [type(e).__name__])[0]
            exit_if(f"--track could not start a W&B run ({reason}); run `wandb login` or set WANDB_MODE=offline")
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in vars(args).items()))
    uploaded_videos = set()  # W&B gets each finished video once (RecordVideo has no W&B hook)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    envs = make_env(args.env_id, args.num_envs, args.capture_video, run_name)
    envs.action_space.seed(args.seed)
    ale = envs.envs[0].unwrapped.ale
    print(f"{args.env_id}: frame skip 4, sticky-action probability {ale.getFloat('repeat_action_probability'):g}")
    q_network = QNetwork(envs.single_action_space.n, args.n_atoms, args.v_min, args.v_max).to(device)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate, eps=1.5e-4)  # the Rainbow paper's Adam ε
    target_network = QNetwork(envs.single_action_space.n, args.n_atoms, args.v_min, args.v_max).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(
        args.buffer_size, args.num_envs, (84, 84), 4, device, args.n_step, args.gamma, args.prioritized_replay_alpha
    )
    frames = rb.capacity * args.num_envs
    memory = frames * SLOT_BYTES + rb.tree.tree.nbytes
    print(f"replay buffer: {frames} frames x {SLOT_BYTES} B and a sum tree = {memory / 2**30:.2f} GiB when full")
    global_step, num_updates, recent_returns = 0, 0, deque(maxlen=20)
    batch_index = torch.arange(args.batch_size, device=device)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "q_network target_network optimizer rb global_step num_updates")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    obs, _ = envs.reset(seed=args.seed + global_step)  # a resumed run starts new episodes
    rb.start(obs)
    # ---- ALGO LOGIC: the training loop (noisy-net acting, prioritised n-step replay, C51 updates); the set-up ends here ----
    for iteration in range(global_step // args.num_envs, num_iterations):
        # no ε-greedy: the online network's noise does the exploring
        with torch.no_grad():
            actions, _ = q_network.get_action(torch.as_tensor(obs, device=device))
        actions = actions.cpu().numpy()

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        previous_step, global_step = global_step, global_step + args.num_envs

        rb.add(actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
        if "final_info" in infos and "episode" in infos["final_info"]:
            episode = infos["final_info"]["episode"]
            for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                recent_returns.append(float(episode["r"][i]))
                writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
        obs = next_obs

        if global_step > args.learning_starts:
            # one update per `train_frequency` env steps past learning_starts that this vector step covered: with
            # --num-envs 1, upstream's rate (`global_step % args.train_frequency == 0`, its global_step counting from 0)
            for _ in range(steps_crossed(max(previous_step, args.learning_starts), global_step, args.train_frequency)):
                q_network.reset_noise()
                target_network.reset_noise()
                beta = beta_schedule(args.prioritized_replay_beta, args.total_timesteps, global_step)
                batch = rb.sample(args.batch_size, beta)
                b_obs, b_actions, b_returns, b_next_obs, b_dones, b_discounts, b_weights, leaves = batch
                with torch.no_grad():
                    # double Q: the online network picks the bootstrap action, the target network values it
                    next_actions, _ = q_network.get_action(b_next_obs)
                    next_pmfs = target_network(b_next_obs)[batch_index, next_actions].exp()
                    target_pmfs = project_distribution(next_pmfs, b_returns, b_dones, b_discounts, target_network.atoms)
                log_pmfs = q_network(b_obs)[batch_index, b_actions]
                sample_losses = -(target_pmfs * log_pmfs).sum(1)
                loss = (b_weights * sample_losses).mean()
                losses = sample_losses.detach().cpu().numpy()  # one sync per gradient step, the priorities need it
                if not np.isfinite(losses).all():  # stop before it reaches the weights or the sum tree
                    envs.close()  # now, not at exit: a renderer left to the exit prints EGL tracebacks
                    writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
                rb.update_priorities(leaves, losses, args.prioritized_replay_eps)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                num_updates += 1

                if num_updates % 100 == 0:
                    old_val = (log_pmfs.detach().exp() * q_network.atoms).sum(1)
                    writer.add_scalar("losses/loss", loss.item(), global_step)
                    writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
                    writer.add_scalar("charts/beta", beta, global_step)
                    writer.add_scalar("charts/SPS", int((global_step - start_step) / (time.time() - start_time)), global_step)

            for _ in range(steps_crossed(previous_step, global_step, args.target_network_frequency)):
                for target_param, q_param in zip(target_network.parameters(), q_network.parameters()):
                    target_param.data.copy_(args.tau * q_param.data + (1.0 - args.tau) * target_param.data)

        if time.time() - last_print > 10 or iteration == num_iterations - 1:
            last_print = time.time()
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            sps = int((global_step - start_step) / (time.time() - start_time))
            left = (num_iterations - 1 - iteration) * args.num_envs / max(sps, 1)  # seconds, at the current speed
            print(
                f"global_step={global_step}, {global_step / args.total_timesteps:.1%} of {args.total_timesteps}, "
                f"episodic_return(last {len(recent_returns)})={recent}, SPS={sps}, "
                f"{left // 3600:.0f}:{time.strftime('%M:%S', time.gmtime(left))} left",
                flush=True,
            )
            for path in sorted(set(glob.glob(f"videos/{run_name}/*.mp4")) - uploaded_videos) if args.track else []:
                uploaded_videos.add(path)
                wandb.log({"videos": wandb.Video(path, format="mp4")})
        if ckpt:  # at its cadence, at the end, and after Ctrl-C or SIGTERM, which then ends the run here
            ckpt.step(global_step, last=iteration == num_iterations - 1)
    envs.close()  # RecordVideo writes the video of an episode still running when it closes

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save({"model": q_network.state_dict(), "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")

    writer.close()
    if args.track:  # the videos not sent yet: the training's last and the evaluation's
        for path in sorted(set(glob.glob(f"videos/{run_name}*/*.mp4")) - uploaded_videos):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "Rainbow", "DQN with six extensions combined")
