# Soft Actor-Critic for discrete actions (SAC-Discrete) on Atari games through ale-py, with a Nature-CNN
# actor and two Nature-CNN soft Q-networks (each network has its own CNN: no shared encoder).
# Papers: Christodoulou 2019, "Soft Actor-Critic for Discrete Action Settings" (arXiv:1910.07207), the
# discrete form of Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications" (arXiv:1812.05905):
# with a finite action set the policy outputs every action's probability, so the soft state value, the
# actor loss and the temperature loss are exact expectations over actions instead of sampled estimates.
# Atari preprocessing as in Mnih et al. 2015 (Nature 518): no-op starts, frame skip 4 with max-pooling,
# life loss as terminal, reward clipping, 84x84 grayscale, stacks of 4; Machado et al. 2018 (JAIR) for
# the v5 ids.
# Defaults are CleanRL's published sac_atari.py ones: 1M replay buffer, batch 64, Adam (eps 1e-4) with
# lr 3e-4 for actor, critics and temperature, a gradient step every 4 env steps from step 20k on, a hard
# target copy (tau 1.0) every 8000 env steps, a temperature tuned automatically towards the target
# entropy 0.89 * log|A|, Kaiming-normal initial weights and zero biases.
# Deliberate differences and choices:
# - the actor and temperature losses average over the batch AND the actions (`.mean()` over B x |A|),
#   as CleanRL does, which is the per-state expectation over actions divided by |A|: a constant scale
#   of the gradients (Adam largely absorbs it) kept so results stay comparable with CleanRL's;
# - an episode cut by a time limit is not terminal (its transition bootstraps from the true final
#   observation); the logged episodic return is the game score;
# - the replay memory keeps each 84x84 frame once and rebuilds the 4-frame stacks when sampling (about
#   7 GB for 1M transitions instead of 56 GB); `ALE/*-v5` ids are made with frameskip=1 so frames are
#   skipped once;
# - evaluation (--save-model) acts greedily: the action with the largest actor logit.
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
from torch.distributions.categorical import Categorical
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
    total_timesteps: int = 5000000
    """total environment steps of the experiment"""
    num_envs: int = 1
    """the number of parallel game environments"""
    buffer_size: int = 1000000
    """the replay memory size (frames; each episode's final frame takes one, so it holds slightly fewer transitions)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    tau: float = 1.0
    """the target networks' update rate (1.0: a hard copy)"""
    batch_size: int = 64
    """the batch size of sample from the replay memory"""
    learning_starts: int = 20000
    """timestep to start learning"""
    policy_lr: float = 3e-4
    """the learning rate of the policy network optimizer"""
    q_lr: float = 3e-4
    """the learning rate of the Q-network optimizer (and of the temperature's when autotuned)"""
    update_frequency: int = 4
    """the frequency of training (env steps per gradient step)"""
    target_network_frequency: int = 8000
    """the timesteps it takes to update the target networks"""
    alpha: float = 0.2
    """entropy regularization coefficient (the temperature; its fixed value when --no-autotune)"""
    autotune: bool = True
    """automatic tuning of the entropy coefficient"""
    target_entropy_scale: float = 0.89
    """coefficient for scaling the autotune entropy target (a fraction of the uniform policy's entropy)"""


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


def layer_init(layer, bias_const=0.0):
    nn.init.kaiming_normal_(layer.weight)
    nn.init.constant_(layer.bias, bias_const)
    return layer


def nature_cnn():
    """The Nature-DQN torso: 4x84x84 frames in, 512 features out."""
    return nn.Sequential(
        layer_init(nn.Conv2d(4, 32, 8, stride=4)),
        nn.ReLU(),
        layer_init(nn.Conv2d(32, 64, 4, stride=2)),
        nn.ReLU(),
        layer_init(nn.Conv2d(64, 64, 3, stride=1)),
        nn.ReLU(),
        nn.Flatten(),
        layer_init(nn.Linear(3136, 512)),
        nn.ReLU(),
    )


class SoftQNetwork(nn.Module):
    """Soft Q-values of every action, (B, n_actions), from uint8 frame stacks."""

    def __init__(self, n_actions):
        super().__init__()
        self.conv = nature_cnn()
        self.fc_q = layer_init(nn.Linear(512, n_actions))

    def forward(self, x):
        return self.fc_q(self.conv(x / 255.0))


class Actor(nn.Module):
    """A categorical policy over the game's actions, from uint8 frame stacks."""

    def __init__(self, n_actions):
        super().__init__()
        self.conv = nature_cnn()
        self.fc_logits = layer_init(nn.Linear(512, n_actions))

    def forward(self, x):
        return self.fc_logits(self.conv(x / 255.0))

    def get_action(self, x):
        """A sampled action (B,), the log-probabilities (B, n_actions) and probabilities (B, n_actions)."""
        logits = self(x)
        policy_dist = Categorical(logits=logits)
        action = policy_dist.sample()
        # log_softmax stays finite where a probability underflows to 0, so probs * log_probs is 0, not nan
        log_probs = F.log_softmax(logits, dim=1)
        return action, log_probs, policy_dist.probs


class ReplayBuffer:
    """Replay memory that stores each frame once and rebuilds frame stacks when sampled.

    Each sub-env writes its own circular stream of `buffer_size // num_envs` slots. A slot holds
    one frame, the newest of an observation's stack, and, once the agent has acted on that
    observation, the action, the (clipped) reward and the termination flag of the transition. When
    an episode ends, its true final frame takes the next slot (the `next_obs` of the last transition,
    which is never itself a transition start), and the next episode's first frame the slot after,
    flagged `first`. A stack ending at slot j is frames j-3..j, with every frame from before the
    episode's start replaced by its first frame: the padding FrameStackObservation applies after
    a reset. Only slots whose successor frame is stored and whose stack is not partly overwritten
    are ever sampled, so no transition runs from one episode into the next.
    """

    def __init__(self, buffer_size, num_envs, frame_shape, stack_size, device):
        self.num_envs = num_envs
        self.capacity = buffer_size // num_envs
        self.stack_size = stack_size
        self.device = device
        self.frames = np.zeros((num_envs, self.capacity) + frame_shape, dtype=np.uint8)
        self.actions = np.zeros((num_envs, self.capacity), dtype=np.int64)
        self.rewards = np.zeros((num_envs, self.capacity), dtype=np.float32)
        self.dones = np.zeros((num_envs, self.capacity), dtype=np.float32)
        self.first = np.zeros((num_envs, self.capacity), dtype=bool)
        self.can_sample = np.zeros((num_envs, self.capacity), dtype=bool)
        self.newest = np.full(num_envs, -1)  # per sub-env, the slot written last
        self.filled = np.zeros(num_envs, dtype=np.int64)

    @staticmethod
    def bytes_per_slot(frame_shape):
        """Bytes one slot takes: the uint8 frame plus action, reward, done and two flags."""
        return int(np.prod(frame_shape)) + 8 + 4 + 4 + 1 + 1

    def _write_frame(self, env, frame, first):
        slot = (self.newest[env] + 1) % self.capacity
        self.frames[env, slot] = frame
        self.first[env, slot] = first
        self.can_sample[env, slot] = False  # whatever transition this slot held is gone
        self.newest[env] = slot
        self.filled[env] = min(self.filled[env] + 1, self.capacity)

    def start(self, obs):
        """Stores the first observations (num_envs, stack, H, W) returned by `envs.reset`."""
        for env in range(self.num_envs):
            self._write_frame(env, obs[env, -1], first=True)

    def add(self, actions, rewards, terminations, truncations, next_obs, final_obs):
        """Stores one vector step taken from the observations stored last.

        `next_obs` is what `envs.step` returned (a new episode's first observation where one
        ended); `final_obs[i]` is the true last observation of sub-env i where its episode ended.
        """
        for env in range(self.num_envs):
            slot = self.newest[env]
            self.actions[env, slot] = actions[env]
            self.rewards[env, slot] = rewards[env]
            self.dones[env, slot] = terminations[env]
            if terminations[env] or truncations[env]:
                self._write_frame(env, final_obs[env][-1], first=False)
                self.can_sample[env, slot] = True
                self._write_frame(env, next_obs[env, -1], first=True)
            else:
                self._write_frame(env, next_obs[env, -1], first=False)
                self.can_sample[env, slot] = True

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
        """Whether each (env, slot) starts a stored transition whose stacks are intact."""
        # once full, the slots just after the newest are the oldest; their stacks reach back into
        # the newest frames, which belong to another time
        age_gap = (slot - self.newest[env]) % self.capacity
        full = self.filled[env] == self.capacity
        return self.can_sample[env, slot] & ~(full & (age_gap >= 1) & (age_gap < self.stack_size))

    def sample(self, batch_size):
        """`batch_size` transitions drawn uniformly (with replacement) among the sampleable ones, as
        tensors: obs and next_obs (B, stack, H, W) uint8, actions (B,), rewards (B,), dones (B,)."""
        env = np.zeros(batch_size, dtype=np.int64)
        slot = np.zeros(batch_size, dtype=np.int64)
        todo = np.arange(batch_size)
        for _ in range(10_000):
            if len(todo) == 0:
                break
            env[todo] = np.random.randint(0, self.num_envs, size=len(todo))
            slot[todo] = np.random.randint(0, self.filled[env[todo]])
            todo = todo[~self.sampleable(env[todo], slot[todo])]
        else:
            raise RuntimeError("the replay buffer holds no complete transition to sample")
        return (
            torch.as_tensor(self.stacks(env, slot), device=self.device),
            torch.as_tensor(self.actions[env, slot], device=self.device),
            torch.as_tensor(self.rewards[env, slot], device=self.device),
            torch.as_tensor(self.stacks(env, (slot + 1) % self.capacity), device=self.device),
            torch.as_tensor(self.dones[env, slot], device=self.device),
        )


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
    needed = (args.buffer_size // args.num_envs) * args.num_envs * ReplayBuffer.bytes_per_slot(frame_shape)
    available = available_memory()
    if available is not None and needed + headroom > available:
        return (
            f"the replay buffer needs {needed / 2**30:.1f} GiB (--buffer-size {args.buffer_size}) plus "
            f"{headroom / 2**30:.0f} GiB for the rest, but only {available / 2**30:.1f} GiB of memory is available; "
            "lower --buffer-size"
        )
    return None


def soft_q_target(rewards, dones, gamma, next_action_probs, next_log_probs, qf1_next_target, qf2_next_target, alpha):
    """Soft TD targets r + γ (1 - done) Σ_a' π(a'|s') [min(Q1', Q2')(s', a') - α log π(a'|s')].

    `rewards` and `dones` are (B,); the policy's probabilities and log-probabilities at s' and both target
    critics' values at s' are (B, n_actions). The sum over a' is the exact soft state value V(s'), which the
    discrete action set allows. `dones` marks terminal transitions only: a truncated transition bootstraps
    from its true final observation.
    """
    min_qf_next_target = torch.min(qf1_next_target, qf2_next_target)
    next_value = (next_action_probs * (min_qf_next_target - alpha * next_log_probs)).sum(dim=1)
    return rewards + gamma * (1.0 - dones) * next_value


def actor_loss(action_probs, log_probs, qf1_values, qf2_values, alpha):
    """Mean over batch and actions of π(a|s) [α log π(a|s) - min(Q1, Q2)(s, a)], all (B, n_actions).

    The critics' values are treated as constants (pass them detached); the mean over the |A| actions
    instead of their sum is CleanRL's scale, kept on purpose.
    """
    min_qf_values = torch.min(qf1_values, qf2_values)
    return (action_probs * (alpha * log_probs - min_qf_values)).mean()


def alpha_loss(log_alpha, action_probs, log_probs, target_entropy):
    """Mean over batch and actions of π(a|s) (-exp(log_alpha) (log π(a|s) + target_entropy)).

    Only `log_alpha` gets a gradient. Its sign: the gradient is exp(log_alpha) (H(π) - target_entropy) / |A|
    per state, so gradient descent raises α while the policy's entropy is below the target and lowers it above.
    """
    action_probs, log_probs = action_probs.detach(), log_probs.detach()
    return (action_probs * (-log_alpha.exp() * (log_probs + target_entropy))).mean()


def target_entropy(n_actions, target_entropy_scale):
    """The entropy the temperature steers the policy to: -scale * log(1 / |A|), a fraction of the uniform
    policy's entropy log |A| (positive)."""
    return -target_entropy_scale * math.log(1.0 / n_actions)


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
    for name in ("num_envs", "buffer_size", "batch_size", "update_frequency", "target_network_frequency"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    if args.buffer_size < args.batch_size:
        return f"--buffer-size {args.buffer_size} is smaller than one batch (--batch-size {args.batch_size})"
    if args.buffer_size // args.num_envs < 10:
        return (
            f"--buffer-size {args.buffer_size} leaves {args.buffer_size // args.num_envs} frames to each of the "
            f"--num-envs {args.num_envs} sub-envs; each needs at least 10"
        )
    if args.learning_starts < 0:
        return f"--learning-starts must be at least 0, got {args.learning_starts}"
    run_steps = args.total_timesteps // args.num_envs * args.num_envs  # whole vector steps
    if run_steps // args.update_frequency <= args.learning_starts // args.update_frequency:
        return (
            f"--total-timesteps {args.total_timesteps} does not exceed --learning-starts {args.learning_starts} "
            f"by a gradient step (one every --update-frequency {args.update_frequency} env steps), so no update would run"
        )
    if not 0.0 <= args.gamma <= 1.0:
        return f"--gamma must be in [0, 1], got {args.gamma}"
    if not 0.0 < args.tau <= 1.0:
        return f"--tau must be in (0, 1], got {args.tau}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    # Adam's first step divides the learning rate by 1 - β1 = 0.1, in float32
    for name in ("policy_lr", "q_lr"):
        if not 0.0 < getattr(args, name) <= float32_max / 10:
            return (
                f"--{name.replace('_', '-')} must be positive and at most {float32_max / 10:.1e} (Adam), "
                f"got {getattr(args, name)}"
            )
    if not 0.0 <= args.alpha <= float32_max:
        return f"--alpha must be non-negative and finite in float32, got {args.alpha}"
    if not 0.0 < args.target_entropy_scale <= 1.0:
        return f"--target-entropy-scale must be in (0, 1], got {args.target_entropy_scale}"
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
- name: SAC-discrete
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

# SAC-discrete agent playing {args.env_id}

A SAC-discrete (Soft Actor-Critic for discrete actions) agent trained on `{args.env_id}` by CleanRL's single-file script
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
    """Runs the saved actor greedily (the action with the largest logit) for `eval_episodes` games;
    returns their scores."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval")
    actor = Actor(envs.single_action_space.n).to(device)
    actor.load_state_dict(checkpoint["model"])
    actor.eval()
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            logits = actor(torch.as_tensor(obs, device=device))
        actions = torch.argmax(logits, dim=1).cpu().numpy()
        obs, _, _, _, infos = envs.step(actions)
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
    n_actions = envs.single_action_space.n

    actor = Actor(n_actions).to(device)
    qf1 = SoftQNetwork(n_actions).to(device)
    qf2 = SoftQNetwork(n_actions).to(device)
    qf1_target = SoftQNetwork(n_actions).to(device)
    qf2_target = SoftQNetwork(n_actions).to(device)
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    # eps 1e-4 as CleanRL: Adam's default 1e-8 lets tiny second moments blow up the steps
    q_optimizer = optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=args.q_lr, eps=1e-4)
    actor_optimizer = optim.Adam(actor.parameters(), lr=args.policy_lr, eps=1e-4)

    if args.autotune:
        entropy_target = target_entropy(n_actions, args.target_entropy_scale)
        log_alpha = torch.zeros(1, requires_grad=True, device=device)
        alpha = log_alpha.exp().detach()  # a tensor, so the hot loop needs no .item()
        a_optimizer = optim.Adam([log_alpha], lr=args.q_lr, eps=1e-4)
    else:
        alpha = torch.tensor(args.alpha, device=device)

    stack_size, *frame_shape = envs.single_observation_space.shape
    rb = ReplayBuffer(args.buffer_size, args.num_envs, tuple(frame_shape), stack_size, device)
    buffer_bytes = rb.capacity * args.num_envs * ReplayBuffer.bytes_per_slot(frame_shape)
    available = available_memory()
    print(
        f"replay buffer: {rb.capacity * args.num_envs} frames x {ReplayBuffer.bytes_per_slot(frame_shape)} B = "
        f"{buffer_bytes / 2**30:.2f} GiB when full"
        + (f" ({available / 2**30:.1f} GiB available)" if available is not None else "")
    )

    global_step = 0
    num_updates = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    obs, _ = envs.reset(seed=args.seed)
    rb.start(obs)
    for iteration in range(num_iterations):
        if global_step < args.learning_starts:
            actions = envs.action_space.sample()
        else:
            with torch.no_grad():
                actions, _, _ = actor.get_action(torch.as_tensor(obs, device=device))
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
            for _ in range(steps_crossed(max(previous_step, args.learning_starts), global_step, args.update_frequency)):
                b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(args.batch_size)

                # critics
                with torch.no_grad():
                    _, next_log_probs, next_action_probs = actor.get_action(b_next_obs)
                    next_q_value = soft_q_target(
                        b_rewards,
                        b_dones,
                        args.gamma,
                        next_action_probs,
                        next_log_probs,
                        qf1_target(b_next_obs),
                        qf2_target(b_next_obs),
                        alpha,
                    )
                qf1_a_values = qf1(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze(1)
                qf2_a_values = qf2(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze(1)
                qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
                qf2_loss = F.mse_loss(qf2_a_values, next_q_value)
                qf_loss = qf1_loss + qf2_loss
                q_optimizer.zero_grad()
                qf_loss.backward()
                q_optimizer.step()

                # actor, against the critics just updated
                _, log_probs, action_probs = actor.get_action(b_obs)
                with torch.no_grad():
                    qf1_values = qf1(b_obs)
                    qf2_values = qf2(b_obs)
                loss_actor = actor_loss(action_probs, log_probs, qf1_values, qf2_values, alpha)
                losses = [qf_loss, loss_actor]
                if args.autotune:
                    loss_alpha = alpha_loss(log_alpha, action_probs, log_probs, entropy_target)
                    losses.append(loss_alpha)
                # one sync per gradient step, before the actor and α move: a non-finite critic loss has
                # already reached the critics' weights, but the run stops here and saves nothing
                if not torch.isfinite(torch.stack(losses)).all():
                    script = os.path.basename(__file__)
                    print(f"{script}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
                    writer.close()
                    envs.close()
                    sys.exit(1)
                actor_optimizer.zero_grad()
                loss_actor.backward()
                actor_optimizer.step()
                if args.autotune:
                    a_optimizer.zero_grad()
                    loss_alpha.backward()
                    a_optimizer.step()
                    alpha = log_alpha.exp().detach()
                num_updates += 1

                if num_updates % 100 == 0:
                    sps = int(global_step / (time.time() - start_time))
                    writer.add_scalar("losses/qf1_values", qf1_a_values.mean().item(), global_step)
                    writer.add_scalar("losses/qf2_values", qf2_a_values.mean().item(), global_step)
                    writer.add_scalar("losses/qf1_loss", qf1_loss.item(), global_step)
                    writer.add_scalar("losses/qf2_loss", qf2_loss.item(), global_step)
                    writer.add_scalar("losses/qf_loss", qf_loss.item() / 2.0, global_step)  # CleanRL's scale
                    writer.add_scalar("losses/actor_loss", loss_actor.item(), global_step)
                    writer.add_scalar("losses/alpha", alpha.item(), global_step)
                    if args.autotune:
                        writer.add_scalar("losses/alpha_loss", loss_alpha.item(), global_step)
                    writer.add_scalar("charts/SPS", sps, global_step)

            for _ in range(steps_crossed(previous_step, global_step, args.target_network_frequency)):
                for net, target in ((qf1, qf1_target), (qf2, qf2_target)):
                    for param, target_param in zip(net.parameters(), target.parameters()):
                        target_param.data.copy_(args.tau * param.data + (1.0 - args.tau) * target_param.data)

        if time.time() - last_print > 10 or iteration == num_iterations - 1:
            last_print = time.time()
            sps = int(global_step / (time.time() - start_time))
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            print(f"global_step={global_step}, episodic_return(last {len(recent_returns)})={recent}, SPS={sps}", flush=True)
            upload_new_videos(f"videos/{run_name}")
    # closing finishes the video of an episode still running, which then goes up too
    envs.close()
    upload_new_videos(f"videos/{run_name}")

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        # "model" is the actor, all that evaluation needs; the critics come along to resume or inspect
        torch.save(
            {"model": actor.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict(), "args": vars(args)},
            model_path,
        )
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
