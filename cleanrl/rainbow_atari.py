# Rainbow for Atari games through ale-py: DQN with all six of its extensions at once.
# Paper: Hessel et al. 2018, "Rainbow: Combining Improvements in Deep Reinforcement Learning" (AAAI),
# combining prioritised replay (Schaul et al. 2016, ICLR), n-step returns, double Q-learning
# (van Hasselt et al. 2016, AAAI), dueling heads (Wang et al. 2016, ICML), the categorical return
# distribution of C51 (Bellemare et al. 2017, ICML) and noisy layers with factorised Gaussian noise
# (Fortunato et al. 2018, ICLR, "Noisy Networks for Exploration"), on the preprocessing of Mnih et
# al. 2015 (Nature) and Machado et al. 2018 (JAIR) for the v5 ids.
# Defaults are CleanRL's published ones (Adam lr 6.25e-5 with eps 1.5e-4, 1M replay frames, batch
# 32, hard target copy every 8000 steps, learning starts at 80k steps, a gradient step every 4 env
# steps, 3-step returns, priority exponent α 0.5, importance exponent β 0.4 → 1 over the run,
# 51 atoms on [-10, 10], noisy σ0 0.5). Exploration comes from the noisy layers alone (no ε-greedy);
# the noise of the online and the target network is resampled before every gradient step, and
# the agent acts with the online network's current sample in between (before learning starts, with
# its initial sample, as CleanRL's version does).
# Deliberate differences from the paper: learning starts at 80k agent steps (the paper: 80k frames);
# priorities are the per-sample cross-entropy rather than the KL divergence (they differ by the
# target's entropy); importance weights are normalised by the batch's largest one; an episode cut
# by a time limit is not terminal and an n-step window never reaches past its episode's end: a
# window of k < n steps that ends at a truncation bootstraps from the true final observation with
# γ^k, one that ends at a termination does not bootstrap; the logged episodic return is the game
# score; each 84x84 frame is stored once and stacks are rebuilt when sampled (about 7 GB for 1M
# frames); `ALE/*-v5` ids are made with frameskip=1 so frames are skipped once.
# Differences from CleanRL's version: the noise is factorised as in the NoisyNet paper (every bias σ
# starts at σ0/√fan-in too); n-step windows stop at truncations as well as terminations and discount
# the bootstrap by γ^k, not always γ^n; the loss is logged as `losses/loss` (C51's name) every 100
# gradient steps; the cross-entropy uses log-softmax instead of clamped probabilities; the unused ε
# flags are gone; vector envs are supported; --save-model saves and then evaluates.
# Evaluation acts greedily with the noise sample saved with the model (the last one of training).
import hashlib
import math
import os
import platform
import random
import re
import shlex
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
from torch.utils.tensorboard import SummaryWriter

gym.register_envs(ale_py)
# ALE's start-up banner would come before our one-line errors on stderr; its warnings and errors still show
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)


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
    """whether to push the saved model, its model card, videos, logs and this script to the Hugging Face Hub
    (needs --save-model and a token: `hf auth login` or HF_TOKEN; HF_ENDPOINT picks another Hub)"""
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


class NoopResetEnv(gym.Wrapper):
    """Starts every game with a random number (1 to `noop_max`) of NOOP actions."""

    def __init__(self, env, noop_max=30):
        super().__init__(env)
        self.noop_max = noop_max

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.unwrapped.np_random.integers(1, self.noop_max + 1)):
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset()
        return obs, info


class EpisodicLifeEnv(gym.Wrapper):
    """Makes each life loss terminal for the agent; the game is only reset when it is really over."""

    def __init__(self, env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            # a lost life: carry on from the current game state with one NOOP
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = self.unwrapped.ale.lives()
        return obs, info


class FireResetEnv(gym.Wrapper):
    """Presses FIRE after every reset, for games that wait for it before they start."""

    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            self.env.reset()
        obs, _, terminated, truncated, info = self.env.step(2)
        if terminated or truncated:
            obs, info = self.env.reset()
        return obs, info


def make_atari(env_id, render_mode=None):
    # v5 (and plain v4) ids skip frames inside ALE; here frames are skipped once, by MaxAndSkip
    return gym.make(env_id, frameskip=1, render_mode=render_mode)


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = make_atari(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = make_atari(env_id)
        # statistics of the raw game, before life loss and reward clipping change what an episode is;
        # the episode length it logs counts emulator frames (4 per agent step)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = NoopResetEnv(env, noop_max=30)
        env = gym.wrappers.MaxAndSkipObservation(env, skip=4)
        env = EpisodicLifeEnv(env)
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireResetEnv(env)
        env = gym.wrappers.TransformReward(env, lambda reward: float(np.sign(reward)))
        env = gym.wrappers.ResizeObservation(env, (84, 84))
        env = gym.wrappers.GrayscaleObservation(env)
        env = gym.wrappers.FrameStackObservation(env, 4)
        return env

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name):
    # SAME_STEP autoreset: a finished sub-env is reset inside the same `step` call, and its true last
    # observation comes back in `info["final_obs"]`, so every stored transition is a real one.
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


class NoisyLinear(nn.Module):
    """A linear layer whose weights are μ + σ ⊙ ε with learned μ and σ and factorised Gaussian noise:
    ε_w = f(ε_out) f(ε_in)ᵀ and ε_b = f(ε_out), with f(x) = sign(x) √|x| (Fortunato et al. 2018, §3).

    The noise stays fixed until `reset_noise`; it lives in buffers so that a saved model keeps the
    sample it was acting with. All-zero noise gives the plain linear layer with weights μ.
    """

    def __init__(self, in_features, out_features, std_init=0.5):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), std_init * bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), std_init * bound))
        self.register_buffer("epsilon_in", torch.zeros(in_features))
        self.register_buffer("epsilon_out", torch.zeros(out_features))
        self.reset_noise()

    @staticmethod
    def _scaled_noise(size, device):
        noise = torch.randn(size, device=device)
        return noise.sign() * noise.abs().sqrt()

    def reset_noise(self):
        self.epsilon_in.copy_(self._scaled_noise(self.in_features, self.epsilon_in.device))
        self.epsilon_out.copy_(self._scaled_noise(self.out_features, self.epsilon_out.device))

    def forward(self, x):
        # (μ_w + σ_w ⊙ ε_out ε_inᵀ) x = μ_w x + ε_out ⊙ (σ_w (ε_in ⊙ x)): two products, no noisy matrix built
        mean = F.linear(x, self.weight_mu, self.bias_mu + self.bias_sigma * self.epsilon_out)
        return mean + F.linear(x * self.epsilon_in, self.weight_sigma) * self.epsilon_out


class QNetwork(nn.Module):
    """Nature-CNN torso and a dueling head of noisy layers that outputs, for every action, a
    probability mass over `n_atoms` returns evenly spaced on [v_min, v_max]."""

    def __init__(self, n_actions, n_atoms=51, v_min=-10.0, v_max=10.0, std_init=0.5):
        super().__init__()
        self.n_actions = n_actions
        self.n_atoms = n_atoms
        # a buffer, not a parameter: it follows the module to the device and into the saved state_dict
        self.register_buffer("atoms", torch.linspace(v_min, v_max, steps=n_atoms))
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
        logits = value + advantage - advantage.mean(dim=1, keepdim=True)
        return F.log_softmax(logits, dim=2)

    def get_action(self, x):
        """The action with the highest expected return, (B,), and the expected returns, (B, n_actions)."""
        q_values = (self(x).exp() * self.atoms).sum(2)
        return torch.argmax(q_values, dim=1), q_values

    def reset_noise(self):
        for module in self.modules():
            if isinstance(module, NoisyLinear):
                module.reset_noise()


def n_step_return(rewards, terminations, truncations, gamma, n):
    """The n-step returns of a sequence of consecutive transitions of one env stream.

    For each start t the window covers transitions t, t+1, ... and stops after n of them, after the
    first one that ends an episode (terminated or truncated), or at the end of the sequence,
    whichever comes first: k steps. Returns (returns, steps, dones) as arrays of length T:
    Σ_{i<k} γ^i r_{t+i}, k, and whether the window's last transition terminated (no bootstrap then;
    otherwise the target adds γ^k times the value of the observation k steps after the start, which
    for a truncated episode is its true final observation). Rewards are never summed across an
    episode boundary. Only windows of n steps or ending an episode are complete; the caller passes
    just those.
    """
    length = len(rewards)
    returns = np.zeros(length, dtype=np.float32)
    steps = np.zeros(length, dtype=np.int64)
    dones = np.zeros(length, dtype=bool)
    for t in range(length):
        total = 0.0
        for i in range(min(n, length - t)):
            total += gamma**i * float(rewards[t + i])
            if terminations[t + i] or truncations[t + i]:
                break
        returns[t], steps[t], dones[t] = total, i + 1, bool(terminations[t + i])
    return returns, steps, dones


class SumTree:
    """Non-negative priorities of `size` items in a binary tree whose inner nodes hold the sums of
    their children, so that drawing item i with probability priority_i / total takes O(log size).

    Leaves sit at [capacity, 2 capacity) of one float64 array (root at 1, children of node j at 2j
    and 2j+1). Inner nodes are recomputed from their children on every update, never adjusted by
    differences, so sums do not drift and a zero subtree sums to exactly 0.
    """

    def __init__(self, size):
        self.size = size
        self.capacity = 1 << max(0, (size - 1).bit_length())
        self.depth = self.capacity.bit_length() - 1
        self.tree = np.zeros(2 * self.capacity, dtype=np.float64)

    @staticmethod
    def nbytes(size):
        return 2 * (1 << max(0, (size - 1).bit_length())) * 8

    def update(self, indices, priorities):
        """Sets the priorities of items `indices` (with repeats, one of the given values wins)."""
        nodes = np.asarray(indices, dtype=np.int64) + self.capacity
        self.tree[nodes] = priorities
        for _ in range(self.depth):
            # repeated parents get the same sum assigned twice: no need to deduplicate
            nodes = nodes // 2
            self.tree[nodes] = self.tree[2 * nodes] + self.tree[2 * nodes + 1]

    def get(self, indices):
        return self.tree[np.asarray(indices, dtype=np.int64) + self.capacity]

    def total(self):
        return self.tree[1]

    def find(self, values):
        """For each value in [0, total), the item i whose interval [Σ_{j<i} p_j, Σ_{j≤i} p_j) holds it."""
        values = np.array(values, dtype=np.float64)
        nodes = np.ones(len(values), dtype=np.int64)
        for _ in range(self.depth):
            left = 2 * nodes
            left_sum = self.tree[left]
            # never step into an empty subtree: rounding can leave a value at or just past a sum
            go_left = ((values < left_sum) & (left_sum > 0)) | (self.tree[left + 1] <= 0)
            values = np.where(go_left, values, values - left_sum)
            nodes = np.where(go_left, left, left + 1)
        return nodes - self.capacity


def importance_weights(probabilities, size, beta):
    """Prioritised replay's correction (N P(i))^(-β) for a batch drawn with `probabilities` P(i)
    from `size` transitions, divided by the batch's largest weight so that updates only shrink."""
    weights = (size * np.asarray(probabilities, dtype=np.float64)) ** -beta
    return weights / weights.max()


def beta_schedule(beta_start, total_timesteps, t):
    """β at env step `t`: linear from `beta_start` at step 0 to 1 at the end of the run."""
    return beta_start + (1.0 - beta_start) * min(t / total_timesteps, 1.0)


class ReplayBuffer:
    """Prioritised replay memory of n-step transitions that stores each frame once and rebuilds frame
    stacks when sampled.

    Each sub-env writes its own circular stream of `buffer_size // num_envs` slots. A slot holds one
    frame, the newest of an observation's stack, and, once the agent has acted on that observation,
    the action and the (clipped) one-step reward. When an episode ends, its true final frame takes
    the next slot (never itself a transition start), and the next episode's first frame the slot
    after, flagged `first`. A stack ending at slot j is frames j-3..j, with every frame from before
    the episode's start replaced by its first frame: the padding FrameStackObservation applies after
    a reset.

    The transition starting at slot j becomes complete once its n-step window is known: n more
    frames of the same episode are stored, or the episode ended inside the window. Then the slot gets
    its n-step return, the number k of steps used, whether the window ended by termination, and the
    current maximal priority; its bootstrap observation is the stack at slot j+k. Exactly the
    complete transitions whose frames are all intact have a non-zero priority in the sum tree (leaf
    env * slots + slot): a slot that is overwritten, or whose stack would reach into the slot being
    overwritten, drops to priority 0 at once, so sampling never draws it.
    """

    def __init__(self, buffer_size, num_envs, frame_shape, stack_size, device, n_step, gamma, alpha):
        self.num_envs = num_envs
        self.capacity = buffer_size // num_envs
        self.stack_size = stack_size
        self.device = device
        self.n_step = n_step
        self.gamma = gamma
        self.alpha = alpha
        self.frames = np.zeros((num_envs, self.capacity) + frame_shape, dtype=np.uint8)
        self.actions = np.zeros((num_envs, self.capacity), dtype=np.int64)
        self.rewards = np.zeros((num_envs, self.capacity), dtype=np.float32)
        self.returns = np.zeros((num_envs, self.capacity), dtype=np.float32)
        self.steps = np.zeros((num_envs, self.capacity), dtype=np.int32)
        self.dones = np.zeros((num_envs, self.capacity), dtype=np.float32)
        self.first = np.zeros((num_envs, self.capacity), dtype=bool)
        self.can_sample = np.zeros((num_envs, self.capacity), dtype=bool)
        self.newest = np.full(num_envs, -1)  # per sub-env, the slot written last
        self.filled = np.zeros(num_envs, dtype=np.int64)
        self.pending = np.zeros(num_envs, dtype=np.int64)  # transition starts still waiting for their window
        self.tree = SumTree(num_envs * self.capacity)
        self.size = 0  # complete, intact transitions: those with a non-zero priority
        self.max_priority = 1.0
        self._invalidated = []
        self._completed = []

    @staticmethod
    def bytes_per_slot(frame_shape):
        """Bytes one slot takes: the uint8 frame, action, reward, n-step return, steps, done, two flags."""
        return int(np.prod(frame_shape)) + 8 + 4 + 4 + 4 + 4 + 1 + 1

    @staticmethod
    def bytes_needed(num_slots, frame_shape):
        """Bytes of the whole memory when full: the slots and the sum tree over them."""
        return num_slots * ReplayBuffer.bytes_per_slot(frame_shape) + SumTree.nbytes(num_slots)

    def _write_frame(self, env, frame, first):
        slot = (self.newest[env] + 1) % self.capacity
        self.frames[env, slot] = frame
        self.first[env, slot] = first
        # the transition this slot held is gone, and so are those whose stacks reach back into it:
        # the oldest ones, in the next stack_size - 1 slots
        gone = (slot + np.arange(self.stack_size)) % self.capacity
        gone = gone[self.can_sample[env, gone]]
        if len(gone):
            self.can_sample[env, gone] = False
            self.size -= len(gone)
            self._invalidated.append(env * self.capacity + gone)
        self.newest[env] = slot
        self.filled[env] = min(self.filled[env] + 1, self.capacity)

    def _complete(self, env, last, count, terminated=False, truncated=False):
        """Completes the oldest `count` pending starts of sub-env `env`, whose windows reach slot `last`
        at the latest; `terminated` and `truncated` are the flags of the transition at `last`."""
        pending = self.pending[env]
        window = (last - pending + 1 + np.arange(pending)) % self.capacity
        ends = np.zeros((2, pending), dtype=bool)
        ends[:, -1] = terminated, truncated
        returns, steps, dones = n_step_return(self.rewards[env, window], ends[0], ends[1], self.gamma, self.n_step)
        starts = window[:count]
        self.returns[env, starts] = returns[:count]
        self.steps[env, starts] = steps[:count]
        self.dones[env, starts] = dones[:count]
        self.can_sample[env, starts] = True
        self.size += count
        self.pending[env] -= count
        self._completed.append(env * self.capacity + starts)

    def start(self, obs):
        """Stores the first observations (num_envs, stack, H, W) returned by `envs.reset`."""
        for env in range(self.num_envs):
            self._write_frame(env, obs[env, -1], first=True)
        self._flush_priorities()

    def add(self, actions, rewards, terminations, truncations, next_obs, final_obs):
        """Stores one vector step taken from the observations stored last.

        `next_obs` is what `envs.step` returned (a new episode's first observation where one
        ended); `final_obs[i]` is the true last observation of sub-env i where its episode ended.
        """
        for env in range(self.num_envs):
            slot = self.newest[env]
            self.actions[env, slot] = actions[env]
            self.rewards[env, slot] = rewards[env]
            self.pending[env] += 1
            if terminations[env] or truncations[env]:
                self._write_frame(env, final_obs[env][-1], first=False)
                self._write_frame(env, next_obs[env, -1], first=True)
                # every window still open ends with this transition
                self._complete(env, slot, self.pending[env], terminations[env], truncations[env])
            else:
                self._write_frame(env, next_obs[env, -1], first=False)
                if self.pending[env] == self.n_step:
                    self._complete(env, slot, 1)
        self._flush_priorities()

    def _flush_priorities(self):
        # zeros first: were a slot both overwritten and completed within one vector step, the
        # completion would be the newer fact
        if self._invalidated:
            invalidated = np.concatenate(self._invalidated)
            self.tree.update(invalidated, np.zeros(len(invalidated)))
            self._invalidated = []
        if self._completed:
            completed = np.concatenate(self._completed)
            self.tree.update(completed, np.full(len(completed), self.max_priority**self.alpha))
            self._completed = []

    def stacks(self, env, slot):
        """The observations (B, stack, H, W) whose newest frames are at `slot` of sub-envs `env`."""
        idx = np.empty((len(slot), self.stack_size), dtype=np.int64)
        idx[:, -1] = slot
        for k in range(self.stack_size - 2, -1, -1):
            later = idx[:, k + 1]
            # at an episode's first frame, keep repeating it instead of reaching into the episode before
            idx[:, k] = np.where(self.first[env, later], later, (later - 1) % self.capacity)
        return self.frames[env[:, None], idx]

    def sampleable(self, env, slot):
        """Whether each (env, slot) starts a complete transition whose frames are all intact."""
        return self.can_sample[env, slot]

    def sample(self, batch_size, beta):
        """`batch_size` transitions drawn with probability proportional to their priorities, one from
        each of `batch_size` equal slices of the total priority. Returns tensors obs and next_obs
        (B, stack, H, W) uint8 (next_obs: the bootstrap observation k steps on), actions (B,),
        n-step returns, dones and discounts γ^k (B,) float32, importance weights (B,) float32, and
        the drawn tree leaves as a NumPy array for `update_priorities`."""
        total = self.tree.total()
        if not total > 0:
            raise RuntimeError("the replay buffer holds no complete transition to sample")
        values = (np.arange(batch_size) + np.random.random(batch_size)) * (total / batch_size)
        leaves = self.tree.find(values)
        env, slot = np.divmod(leaves, self.capacity)
        weights = importance_weights(self.tree.get(leaves) / total, self.size, beta)
        steps = self.steps[env, slot]
        return (
            torch.as_tensor(self.stacks(env, slot), device=self.device),
            torch.as_tensor(self.actions[env, slot], device=self.device),
            torch.as_tensor(self.returns[env, slot], device=self.device),
            torch.as_tensor(self.stacks(env, (slot + steps) % self.capacity), device=self.device),
            torch.as_tensor(self.dones[env, slot], device=self.device),
            torch.as_tensor((self.gamma**steps).astype(np.float32), device=self.device),
            torch.as_tensor(weights.astype(np.float32), device=self.device),
            leaves,
        )

    def update_priorities(self, leaves, losses, eps):
        """New priorities (loss + eps)^α for the sampled `leaves`; the largest loss + eps seen so far
        becomes the priority of transitions completed from now on."""
        priorities = np.asarray(losses, dtype=np.float64) + eps
        self.max_priority = max(self.max_priority, float(priorities.max()))
        env, slot = np.divmod(leaves, self.capacity)
        intact = self.can_sample[env, slot]
        self.tree.update(leaves[intact], priorities[intact] ** self.alpha)


def project_distribution(next_pmfs, returns, dones, discounts, atoms):
    """The categorical projection of G + γ^k (1 - done) Z' onto the support `atoms` (C51, Algorithm 1).

    `next_pmfs` (B, n_atoms) is the target network's distribution at the bootstrap observation for
    the action the online network picked there; `returns` (n-step return G), `dones` and
    `discounts` (γ^k) are (B,); `atoms` (n_atoms,) is evenly spaced and increasing. `dones` marks
    windows that ended by termination (all mass then sits at the projection of G). Each shifted atom
    is clamped to [v_min, v_max] and its mass split between the two support points around it in
    proportion to closeness; one that lands exactly on a support point gives it all of its mass.
    Returns (B, n_atoms) pmfs.
    """
    n_atoms = atoms.shape[0]
    v_min, v_max = atoms[0], atoms[-1]
    delta_z = (v_max - v_min) / (n_atoms - 1)
    bootstrap = (discounts * (1.0 - dones)).unsqueeze(1)
    target_atoms = (returns.unsqueeze(1) + bootstrap * atoms.unsqueeze(0)).clamp(v_min, v_max)
    position = ((target_atoms - v_min) / delta_z).clamp(0, n_atoms - 1)
    # the upper neighbour is lower + 1 (clamped at the top), so a whole-number position gives weight 1
    # to `lower` rather than weight 0 to both neighbours
    lower = position.floor().long()
    upper = (lower + 1).clamp(max=n_atoms - 1)
    upper_weight = position - lower
    target_pmfs = torch.zeros_like(next_pmfs)
    target_pmfs.scatter_add_(1, lower, next_pmfs * (1.0 - upper_weight))
    target_pmfs.scatter_add_(1, upper, next_pmfs * upper_weight)
    return target_pmfs


def available_memory():
    """Bytes of memory a new allocation can use (Linux MemAvailable, capped by a cgroup v2 memory
    limit when the process runs in a container), or None where neither can be read."""
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except OSError:
        return None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read())
        if limit != "max" and available is not None:
            available = min(available, int(limit) - used)
    except (OSError, ValueError):
        pass
    return available


def replay_memory_error(args, frame_shape=(84, 84), headroom=2**30):
    """Why the replay buffer cannot fit in memory as one line (None when it fits or memory is unknown).

    The buffer's arrays are allocated lazily and fill up over hours; refusing at start-up is kinder
    than running out of memory half-way. `headroom` (bytes) is left for the networks and envs."""
    needed = ReplayBuffer.bytes_needed((args.buffer_size // args.num_envs) * args.num_envs, frame_shape)
    available = available_memory()
    if available is not None and needed + headroom > available:
        return (
            f"the replay buffer needs {needed / 2**30:.1f} GiB (--buffer-size {args.buffer_size}) plus "
            f"{headroom / 2**30:.0f} GiB for the rest, but only {available / 2**30:.1f} GiB of memory is available; "
            "lower --buffer-size"
        )
    return None


def steps_crossed(previous_step, step, every):
    """How many multiples of `every` lie in (previous_step, step]: the updates a cadence owes
    after a vector step took `global_step` from `previous_step` to `step`."""
    return step // every - previous_step // every


def space_error(args, unwrapped_env):
    """What the script cannot handle about the (unwrapped) env, as one line, or None."""
    script = os.path.basename(__file__)
    if not isinstance(unwrapped_env, ale_py.AtariEnv):
        return f"{args.env_id} is not an ale-py Atari game; {script} needs one, e.g. BreakoutNoFrameskip-v4 or ALE/Breakout-v5"
    return None


def validation_error(args):
    """The first problem with the command-line values as one line, or None when all is well."""
    if not 0 <= args.seed < 2**32:
        return f"--seed must be in [0, 2**32 - 1], got {args.seed}"
    if "/" in args.exp_name or "__" in args.exp_name or not args.exp_name:
        return f"--exp-name {args.exp_name!r} must be non-empty, without '/' or '__' (they split run names)"
    run_name_bytes = len(f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}".encode())
    if run_name_bytes > 255:
        return f"the run name would be {run_name_bytes} bytes, more than a folder name can hold (255); shorten --exp-name"
    for name in ("num_envs", "buffer_size", "batch_size", "train_frequency", "target_network_frequency", "n_step"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    if args.n_atoms < 2:
        return f"--n-atoms must be at least 2 (a support needs two ends), got {args.n_atoms}"
    if args.buffer_size < args.batch_size:
        return f"--buffer-size {args.buffer_size} is smaller than one batch (--batch-size {args.batch_size})"
    # room for an n-step window, its stacks and an episode change behind the oldest frames
    min_frames = args.n_step + 10
    if args.buffer_size // args.num_envs < min_frames:
        return (
            f"--buffer-size {args.buffer_size} leaves {args.buffer_size // args.num_envs} frames to each of the "
            f"--num-envs {args.num_envs} sub-envs; with --n-step {args.n_step} each needs at least {min_frames}"
        )
    if args.learning_starts < args.n_step * args.num_envs:
        return (
            f"--learning-starts {args.learning_starts} is below --n-step x --num-envs ({args.n_step * args.num_envs}): "
            "the first batch would find no complete n-step transition"
        )
    run_steps = args.total_timesteps // args.num_envs * args.num_envs  # whole vector steps
    if run_steps // args.train_frequency <= args.learning_starts // args.train_frequency:
        return (
            f"--total-timesteps {args.total_timesteps} does not exceed --learning-starts {args.learning_starts} "
            f"by a gradient step (one every --train-frequency {args.train_frequency} env steps), so no update would run"
        )
    for name in ("gamma", "prioritized_replay_beta"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}"
    if not 0.0 < args.tau <= 1.0:
        return f"--tau must be in (0, 1], got {args.tau}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    # Adam's first step divides the learning rate by 1 - β1 = 0.1, in float32
    if not 0.0 < args.learning_rate <= float32_max / 10:
        return f"--learning-rate must be positive and at most {float32_max / 10:.1e} (Adam), got {args.learning_rate}"
    if not 0.0 <= args.prioritized_replay_alpha < math.inf:
        return f"--prioritized-replay-alpha must be at least 0 and finite, got {args.prioritized_replay_alpha}"
    if not 0.0 < args.prioritized_replay_eps < math.inf:
        return f"--prioritized-replay-eps must be positive and finite, got {args.prioritized_replay_eps}"
    for name in ("v_min", "v_max"):
        if not -float32_max <= getattr(args, name) <= float32_max:
            return f"--{name.replace('_', '-')} must be finite in float32, got {getattr(args, name)}"
    if not np.float32(args.v_min) < np.float32(args.v_max):  # distinct in float32, so atoms are spaced apart
        return f"--v-min {args.v_min} must be below --v-max {args.v_max}"
    if args.v_max - args.v_min > float32_max:
        return f"the support [--v-min {args.v_min}, --v-max {args.v_max}] is wider than float32 can hold"
    if args.upload_model:
        error = upload_error(args)
        if error is not None:
            return error
    if args.capture_video:
        try:
            import moviepy  # noqa: F401
        except ImportError:
            return "--capture-video needs moviepy (pip install moviepy)"
    return None


def hf_repo_id(args, entity):
    """The Hub repository a run is pushed to, CleanRL's naming: `{entity}/{env_id}-{exp_name}-seed{seed}`."""
    return f"{entity}/{args.env_id.replace('/', '-')}-{args.exp_name}-seed{args.seed}"


def upload_error(args):
    """What stops --upload-model before the run starts, as one line, or None. No network call: the token
    is only looked up where huggingface_hub keeps it (HF_TOKEN, then the file `hf auth login` writes)."""
    if not args.save_model:
        return "--upload-model pushes the saved model and its evaluation; add --save-model"
    try:
        from huggingface_hub import get_token
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:
        return "--upload-model needs huggingface_hub (pip install huggingface-hub)"
    repo_id = hf_repo_id(args, args.hf_entity or "user")
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return (
            f"{repo_id!r} is not a valid Hub repository id: a name of letters, digits, -, _ and . (no '--' or '..', "
            "no - or . at either end), 96 characters at most; change --hf-entity or --exp-name"
        )
    if get_token() is None:
        return (
            "--upload-model needs a Hugging Face token: run `hf auth login` "
            "(older huggingface_hub: `huggingface-cli login`) or set HF_TOKEN"
        )
    return None


def model_card(args, repo_id, episodic_returns, video):
    """The README.md of the Hub repository: metadata for the Hub, the evaluation, how to use and reproduce."""
    import huggingface_hub

    script = os.path.basename(__file__)
    with open(__file__, "rb") as f:
        script_sha256 = hashlib.sha256(f.read()).hexdigest()
    mean, std = float(np.mean(episodic_returns)), float(np.std(episodic_returns))
    command = shlex.join(["python", script, *sys.argv[1:]])
    hyperparameters = "\n".join(f"| {key} | {value} |" for key, value in vars(args).items())
    versions = [platform.python_version(), torch.__version__, gym.__version__, np.__version__, huggingface_hub.__version__]
    return f"""---
tags:
- {args.env_id}
- deep-reinforcement-learning
- reinforcement-learning
- custom-implementation
library_name: cleanrl
model-index:
- name: Rainbow
  results:
  - task:
      type: reinforcement-learning
      name: reinforcement-learning
    dataset:
      name: {args.env_id}
      type: {args.env_id}
    metrics:
    - type: mean_reward
      value: {mean:.2f} +/- {std:.2f}
      name: mean_reward
      verified: false
---

# Rainbow agent playing {args.env_id}

A Rainbow (DQN with six extensions combined) agent trained on `{args.env_id}` by CleanRL's single-file script
[`{script}`]({script}), which is included in this repository with the checkpoint `{args.exp_name}.cleanrl_model`
and the TensorBoard logs of the run.

## Evaluation

Episodic return over {len(episodic_returns)} evaluation episodes: **{mean:.2f} ± {std:.2f}** (mean ± std).
{"The video `" + video + "` shows an evaluation episode." if video else ""}

## Use

```
python -m cleanrl_utils.enjoy --exp-name {args.exp_name} --hf-repository {repo_id}
```

## Reproduce

```
{command}
```

## Hyperparameters

| param | value |
|-|-|
{hyperparameters}

## Versions

| python | torch | gymnasium | numpy | huggingface_hub | {script} sha256 |
|-|-|-|-|-|-|
| {" | ".join(versions)} | {script_sha256} |
"""


def push_to_hub(args, run_name, episodic_returns, attempts=3):
    """Pushes the run to the Hub in one commit: checkpoint, model card (also written to runs/{run_name}/README.md),
    the last evaluation video as replay.mp4, the TensorBoard events and this script. Commits are not retried by
    huggingface_hub, so network errors, 5xx and 429 are retried here (`attempts` in all, waiting 1 s, 2 s, ...);
    other client errors (401, 403, 404) are raised at once. Returns the repository's url."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi()  # the endpoint (HF_ENDPOINT) and the token (HF_TOKEN or the saved one) come from huggingface_hub
    run_dir = f"runs/{run_name}"
    video_dir = f"videos/{run_name}-eval"
    videos = sorted(
        (name for name in os.listdir(video_dir) if name.endswith(".mp4")) if os.path.isdir(video_dir) else [],
        key=lambda name: [int(n) for n in re.findall(r"\d+", name)],
    )
    files = {f"{args.exp_name}.cleanrl_model": f"{run_dir}/{args.exp_name}.cleanrl_model"}
    files |= {name: f"{run_dir}/{name}" for name in sorted(os.listdir(run_dir)) if name.startswith("events.out.tfevents")}
    files[os.path.basename(__file__)] = __file__
    if videos:
        files["replay.mp4"] = f"{video_dir}/{videos[-1]}"
    for attempt in range(1, attempts + 1):
        try:
            repo_id = hf_repo_id(args, args.hf_entity or api.whoami()["name"])
            card_path = f"{run_dir}/README.md"
            with open(card_path, "w") as f:
                f.write(model_card(args, repo_id, episodic_returns, "replay.mp4" if videos else None))
            repo_url = api.create_repo(repo_id, exist_ok=True)
            operations = [CommitOperationAdd(path_in_repo, local) for path_in_repo, local in files.items()]
            operations.append(CommitOperationAdd("README.md", card_path))
            api.create_commit(repo_id, operations, commit_message=f"{args.exp_name} on {args.env_id}: run {run_name}")
            return str(repo_url)
        except Exception as e:
            status = getattr(getattr(e, "response", None), "status_code", None)
            if attempt == attempts or (status is not None and status < 500 and status != 429):
                raise
            time.sleep(2 ** (attempt - 1))


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):
    """Runs the saved Q-network greedily, with the noise sample saved in it, for `eval_episodes`
    games; returns their scores."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval")
    q_network = QNetwork(envs.single_action_space.n, n_atoms=saved["n_atoms"], v_min=saved["v_min"], v_max=saved["v_max"]).to(
        device
    )
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
    import tyro

    args = tyro.cli(Args)
    if args.capture_video:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array rendering needs no display
    # command-line values first, then the env (making it can already write files, e.g. MuJoCo's log)
    error = validation_error(args)
    if error is None:
        try:
            probe_env = gym.make(args.env_id)
        except Exception as e:  # unknown ids, missing modules or extras: all mean this env cannot be made
            error = f"cannot make {args.env_id!r}: {e}"
        else:
            error = space_error(args, probe_env.unwrapped)
            probe_env.close()
    if error is None:
        error = replay_memory_error(args)
    if error is not None:
        print(f"{os.path.basename(__file__)}: {error}", file=sys.stderr)
        sys.exit(2)
    num_iterations = args.total_timesteps // args.num_envs
    if args.total_timesteps % args.num_envs != 0:
        print(f"running {num_iterations * args.num_envs} steps: --total-timesteps rounded down to whole vector steps")

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    run_time = int(time.time())
    while True:  # another run that started in the same second already owns that name: take the next second
        run_name = f"{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{run_time}"
        try:
            os.makedirs(f"runs/{run_name}")
            break
        except FileExistsError:
            run_time += 1
    if args.track:
        import wandb

        try:
            wandb.init(
                project=args.wandb_project_name,
                entity=args.wandb_entity,
                sync_tensorboard=True,
                config=vars(args),
                name=run_name,
                save_code=True,
            )
        except Exception as e:  # not logged in, no network, unknown entity: stop before anything is written
            os.rmdir(f"runs/{run_name}")
            if not os.listdir("runs"):
                os.rmdir("runs")
            reason = (str(e).splitlines() or [type(e).__name__])[0]
            print(
                f"{os.path.basename(__file__)}: --track could not start a W&B run ({reason}); "
                "run `wandb login` or set WANDB_MODE=offline",
                file=sys.stderr,
            )
            sys.exit(2)
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in vars(args).items()),
    )
    uploaded_videos = set()

    def upload_new_videos(video_dir):
        # W&B gets each finished video once, explicitly (gym's RecordVideo has no W&B hook).
        if args.track and os.path.isdir(video_dir):
            for name in sorted(os.listdir(video_dir)):
                path = os.path.join(video_dir, name)  # the eval videos reuse the training videos' names
                if name.endswith(".mp4") and path not in uploaded_videos:
                    uploaded_videos.add(path)
                    wandb.log({"videos": wandb.Video(path, format="mp4")})

    envs = make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name)
    envs.action_space.seed(args.seed)
    game = envs.envs[0].unwrapped
    print(
        f"{args.env_id}: frame skip 4 (MaxAndSkip), sticky-action probability "
        f"{game.ale.getFloat('repeat_action_probability'):g}, FIRE on reset: {'FIRE' in game.get_action_meanings()}"
    )

    network_shape = dict(n_actions=envs.single_action_space.n, n_atoms=args.n_atoms, v_min=args.v_min, v_max=args.v_max)
    q_network = QNetwork(**network_shape).to(device)
    # the Rainbow paper's Adam epsilon
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate, eps=1.5e-4)
    target_network = QNetwork(**network_shape).to(device)
    target_network.load_state_dict(q_network.state_dict())

    stack_size, *frame_shape = envs.single_observation_space.shape
    rb = ReplayBuffer(
        args.buffer_size,
        args.num_envs,
        tuple(frame_shape),
        stack_size,
        device,
        args.n_step,
        args.gamma,
        args.prioritized_replay_alpha,
    )
    buffer_bytes = ReplayBuffer.bytes_needed(rb.capacity * args.num_envs, frame_shape)
    available = available_memory()
    print(
        f"replay buffer: {rb.capacity * args.num_envs} frames and their sum tree = "
        f"{buffer_bytes / 2**30:.2f} GiB when full"
        + (f" ({available / 2**30:.1f} GiB available)" if available is not None else "")
    )

    global_step = 0
    num_updates = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    batch_index = torch.arange(args.batch_size, device=device)
    obs, _ = envs.reset(seed=args.seed)
    rb.start(obs)
    for iteration in range(num_iterations):
        # no ε-greedy: the online network's noise does the exploring
        with torch.no_grad():
            actions, _ = q_network.get_action(torch.as_tensor(obs, device=device))
        actions = actions.cpu().numpy()

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        previous_step, global_step = global_step, global_step + args.num_envs

        # where an episode ended, next_obs already starts the next one; the buffer takes the true last
        # frame from final_obs
        rb.add(actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
        if "final_info" in infos and "episode" in infos["final_info"]:
            episode = infos["final_info"]["episode"]
            for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                recent_returns.append(float(episode["r"][i]))
                writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
        obs = next_obs

        if global_step > args.learning_starts:
            # updates owed for the env steps past learning_starts that this vector step covered
            for _ in range(steps_crossed(max(previous_step, args.learning_starts), global_step, args.train_frequency)):
                q_network.reset_noise()
                target_network.reset_noise()
                beta = beta_schedule(args.prioritized_replay_beta, args.total_timesteps, global_step)
                b_obs, b_actions, b_returns, b_next_obs, b_dones, b_discounts, b_weights, leaves = rb.sample(
                    args.batch_size, beta
                )
                with torch.no_grad():
                    # double Q: the online network picks the bootstrap action, the target network values it
                    next_actions, _ = q_network.get_action(b_next_obs)
                    next_pmfs = target_network(b_next_obs)[batch_index, next_actions].exp()
                    target_pmfs = project_distribution(next_pmfs, b_returns, b_dones, b_discounts, target_network.atoms)
                log_pmfs = q_network(b_obs)[batch_index, b_actions]
                sample_losses = -(target_pmfs * log_pmfs).sum(1)
                loss = (b_weights * sample_losses).mean()
                # one sync per gradient step, needed for the priorities anyway: stop before a
                # non-finite loss reaches the weights or the sum tree
                losses = sample_losses.detach().cpu().numpy()
                if not np.isfinite(losses).all():
                    script = os.path.basename(__file__)
                    print(f"{script}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
                    writer.close()
                    envs.close()
                    sys.exit(1)
                rb.update_priorities(leaves, losses, args.prioritized_replay_eps)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                num_updates += 1

                if num_updates % 100 == 0:
                    sps = int(global_step / (time.time() - start_time))
                    old_val = (log_pmfs.detach().exp() * q_network.atoms).sum(1)
                    writer.add_scalar("losses/loss", loss.item(), global_step)
                    writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
                    writer.add_scalar("charts/beta", beta, global_step)
                    writer.add_scalar("charts/SPS", sps, global_step)

            for _ in range(steps_crossed(previous_step, global_step, args.target_network_frequency)):
                for target_param, q_param in zip(target_network.parameters(), q_network.parameters()):
                    target_param.data.copy_(args.tau * q_param.data + (1.0 - args.tau) * target_param.data)

        if time.time() - last_print > 10 or iteration == num_iterations - 1:
            last_print = time.time()
            sps = int(global_step / (time.time() - start_time))
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            print(f"global_step={global_step}, episodic_return(last {len(recent_returns)})={recent}, SPS={sps}", flush=True)
            upload_new_videos(f"videos/{run_name}")
    envs.close()  # RecordVideo writes the video of an episode still running when it closes
    upload_new_videos(f"videos/{run_name}")

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save({"model": q_network.state_dict(), "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")
        upload_new_videos(f"videos/{run_name}-eval")

    writer.close()
    if args.track:
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        try:
            repo_url = push_to_hub(args, run_name, episodic_returns)
        except Exception as e:
            reason = (str(e).splitlines() or [""])[0] or type(e).__name__
            print(
                f"{os.path.basename(__file__)}: --upload-model could not push the run to the Hub ({reason}); "
                f"everything is kept in runs/{run_name}",
                file=sys.stderr,
            )
            sys.exit(1)
        print(f"model uploaded to {repo_url}")
