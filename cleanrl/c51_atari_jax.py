# Categorical DQN (C51) for Atari games through ale-py, with the Nature-CNN torso: the JAX version of
# c51_atari.py. Only the framework differs (Flax network, Optax Adam, jitted acting and updates); the
# env set-up, frame-level replay memory, validation, logging and outputs are c51_atari.py's. The
# layers start from Flax's default initialisation (LeCun-normal weights, zero biases) where torch's
# draw weights and biases uniformly in ±1/√fan_in; the checkpoint is a Flax msgpack file.
# Paper: Bellemare, Dabney & Munos 2017, "A Distributional Perspective on Reinforcement Learning"
# (ICML, arXiv:1707.06887): for every action a probability mass over 51 fixed returns evenly spaced
# on [-10, 10]; the target r + γ Z(s', a*) is projected back onto that support and learned by
# cross-entropy. Preprocessing of Mnih et al. 2015 (Nature) and, for v5 ids, Machado et al. 2018
# (JAIR). Defaults are CleanRL's published ones (1M replay buffer, batch 32, Adam lr 2.5e-4 with
# eps 0.01 / batch, hard target copy every 10k steps, ε 1 → 0.01 over the first 10% of the run,
# learning starts at 80k, a gradient step every 4 env steps).
# Deliberate differences from the paper: an episode cut by a time limit is not terminal (its
# transition bootstraps from the true final observation); the logged episodic return is the game
# score; the replay memory keeps each 84x84 frame once and rebuilds the 4-frame stacks when
# sampling (about 7 GB for 1M transitions instead of 56 GB); `ALE/*-v5` ids are made with
# frameskip=1 so frames are skipped once. Evaluation acts ε-greedily with ε = 0.05.
import hashlib
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
import flax
import flax.linen as nn
import flax.serialization
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training import train_state
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
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    n_atoms: int = 51
    """the number of atoms (support points) of each return distribution"""
    v_min: float = -10
    """the lowest return of the support"""
    v_max: float = 10
    """the highest return of the support"""
    buffer_size: int = 1000000
    """the replay memory size (frames; each episode's final frame takes one, so it holds slightly fewer transitions)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    target_network_frequency: int = 10000
    """the timesteps it takes to copy the Q-network into the target network"""
    batch_size: int = 32
    """the batch size of sample from the replay memory"""
    start_e: float = 1
    """the starting epsilon for exploration"""
    end_e: float = 0.01
    """the ending epsilon for exploration"""
    exploration_fraction: float = 0.10
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    learning_starts: int = 80000
    """timestep to start learning"""
    train_frequency: int = 4
    """the frequency of training (env steps per gradient step)"""


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


class QNetwork(nn.Module):
    action_dim: int
    n_atoms: int = 51
    v_min: float = -10.0
    v_max: float = 10.0

    @property
    def atoms(self):
        """The support (n_atoms,): returns evenly spaced on [v_min, v_max], a constant, not a parameter."""
        # spaced in float64, then rounded once to float32
        return jnp.asarray(np.linspace(self.v_min, self.v_max, self.n_atoms), dtype=jnp.float32)

    @nn.compact
    def __call__(self, x):
        """The logits (N, action_dim, n_atoms) of uint8 stacks `x` (N, 4, 84, 84)."""
        # Flax convolutions take channels last
        x = jnp.transpose(x, (0, 2, 3, 1)) / 255.0
        x = nn.relu(nn.Conv(32, (8, 8), (4, 4), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, (4, 4), (2, 2), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, (3, 3), (1, 1), padding="VALID")(x))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(512)(x))
        x = nn.Dense(self.action_dim * self.n_atoms)(x)
        return x.reshape((x.shape[0], self.action_dim, self.n_atoms))

    def get_action(self, x, action=None):
        """The greedy action (or `action` when given) and its return distribution, (B,) and (B, n_atoms)."""
        pmfs = jax.nn.softmax(self(x), axis=2)
        if action is None:
            q_values = (pmfs * self.atoms).sum(2)
            action = jnp.argmax(q_values, axis=1)
        return action, pmfs[jnp.arange(len(x)), action]


class TrainState(train_state.TrainState):
    """The Q-network's parameters and Adam state, with the target network's parameters alongside."""

    target_params: dict


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

    def __init__(self, buffer_size, num_envs, frame_shape, stack_size):
        self.num_envs = num_envs
        self.capacity = buffer_size // num_envs
        self.stack_size = stack_size
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
        numpy arrays: obs and next_obs (B, stack, H, W) uint8, actions (B,), rewards (B,), dones (B,)."""
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
            self.stacks(env, slot),
            self.actions[env, slot],
            self.rewards[env, slot],
            self.stacks(env, (slot + 1) % self.capacity),
            self.dones[env, slot],
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


def epsilon_schedule(start_e, end_e, duration, t):
    """ε at env step `t`: linear from `start_e` to `end_e` over `duration` steps, then `end_e`.

    A zero duration (`--exploration-fraction 0`) means `end_e` from the first step.
    """
    if duration <= 0:
        return end_e
    return start_e + (end_e - start_e) * min(t / duration, 1.0)


def project_distribution(next_pmfs, rewards, dones, gamma, atoms):
    """The categorical projection of r + γ (1 - done) Z' onto the support `atoms` (Algorithm 1 of the paper).

    `next_pmfs` (B, n_atoms) is the target distribution of the next state's greedy action, `rewards`
    and `dones` are (B,), `atoms` (n_atoms,) is evenly spaced and increasing, all float32 arrays. `dones` marks terminal
    transitions only (all mass then sits at the projection of the reward); a truncated transition
    bootstraps from its true final observation. Each shifted atom is clamped to [v_min, v_max] and
    its mass split between the two support points around it in proportion to closeness; an atom
    that lands exactly on a support point gives it all of its mass. Returns (B, n_atoms) pmfs.
    """
    n_atoms = atoms.shape[0]
    v_min, v_max = atoms[0], atoms[-1]
    delta_z = (v_max - v_min) / (n_atoms - 1)
    target_atoms = rewards[:, None] + gamma * (1.0 - dones[:, None]) * atoms[None, :]
    # position on the support in units of delta_z, in [0, n_atoms - 1]
    b = jnp.clip((jnp.clip(target_atoms, v_min, v_max) - v_min) / delta_z, 0, n_atoms - 1)
    # the upper neighbour is always lower + 1 (clamped at the top), so an integer b puts weight 1 on
    # `lower` instead of weight 0 on both neighbours
    lower = jnp.floor(b).astype(jnp.int32)
    upper = jnp.minimum(lower + 1, n_atoms - 1)
    upper_weight = b - lower
    rows = jnp.arange(next_pmfs.shape[0])[:, None]
    target_pmfs = jnp.zeros_like(next_pmfs)
    target_pmfs = target_pmfs.at[rows, lower].add(next_pmfs * (1.0 - upper_weight))
    target_pmfs = target_pmfs.at[rows, upper].add(next_pmfs * upper_weight)
    return target_pmfs


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
    for name in ("num_envs", "buffer_size", "batch_size", "train_frequency", "target_network_frequency"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    if args.n_atoms < 2:
        return f"--n-atoms must be at least 2 (a support needs two ends), got {args.n_atoms}"
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
    if run_steps // args.train_frequency <= args.learning_starts // args.train_frequency:
        return (
            f"--total-timesteps {args.total_timesteps} does not exceed --learning-starts {args.learning_starts} "
            f"by a gradient step (one every --train-frequency {args.train_frequency} env steps), so no update would run"
        )
    for name in ("gamma", "start_e", "end_e", "exploration_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    # Adam's first step divides the learning rate by 1 - β1 = 0.1, in float32
    if not 0.0 < args.learning_rate <= float32_max / 10:
        return f"--learning-rate must be positive and at most {float32_max / 10:.1e} (Adam), got {args.learning_rate}"
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
    versions = [
        platform.python_version(),
        jax.__version__,
        flax.__version__,
        optax.__version__,
        gym.__version__,
        np.__version__,
        huggingface_hub.__version__,
    ]
    return f"""---
tags:
- {args.env_id}
- deep-reinforcement-learning
- reinforcement-learning
- custom-implementation
library_name: cleanrl
model-index:
- name: C51 (JAX)
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

# C51 (JAX) agent playing {args.env_id}

A C51 (categorical DQN) agent trained on `{args.env_id}` by CleanRL's single-file JAX script
[`{script}`]({script}), which is included in this repository with the checkpoint `{args.exp_name}.cleanrl_model`
and the TensorBoard logs of the run.

## Evaluation

Episodic return over {len(episodic_returns)} evaluation episodes: **{mean:.2f} ± {std:.2f}** (mean ± std).
{"The video `" + video + "` shows an evaluation episode." if video else ""}

## Use

```
python -m cleanrl_utils.enjoy --exp-name {args.exp_name} --hf-repository {repo_id}
```

The checkpoint is a Flax msgpack file: `checkpoint["model"]` holds the `QNetwork` parameters of `{script}`,
`checkpoint["args"]` the run's settings.

```python
import flax.serialization
from huggingface_hub import hf_hub_download

with open(hf_hub_download("{repo_id}", "{args.exp_name}.cleanrl_model"), "rb") as f:
    checkpoint = flax.serialization.msgpack_restore(f.read())
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

| python | jax | flax | optax | gymnasium | numpy | huggingface_hub | {script} sha256 |
|-|-|-|-|-|-|-|-|
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


def evaluate(model_path, eval_episodes, run_name, epsilon=0.05, capture_video=False):
    """Runs the saved Q-network ε-greedily for `eval_episodes` games; returns their scores."""
    with open(model_path, "rb") as f:
        checkpoint = flax.serialization.msgpack_restore(f.read())
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval")
    envs.action_space.seed(saved["seed"] + 100_000)
    q_network = QNetwork(envs.single_action_space.n, saved["n_atoms"], saved["v_min"], saved["v_max"])
    template = q_network.init(jax.random.PRNGKey(0), np.zeros((1, *envs.single_observation_space.shape), np.uint8))
    params = flax.serialization.from_state_dict(template, checkpoint["model"])
    get_action = jax.jit(lambda params, obs: q_network.apply(params, obs, method=QNetwork.get_action))
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        if random.random() < epsilon:
            actions = envs.action_space.sample()
        else:
            actions, _ = get_action(params, obs)
            actions = np.asarray(actions)
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
    key = jax.random.PRNGKey(args.seed)
    key, q_key = jax.random.split(key)

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

    q_network = QNetwork(envs.single_action_space.n, args.n_atoms, args.v_min, args.v_max)
    q_params = q_network.init(q_key, np.zeros((1, *envs.single_observation_space.shape), np.uint8))
    # the target network starts as a copy of the Q-network; the paper's Adam epsilon, scaled to the batch (0.01 / 32)
    q_state = TrainState.create(
        apply_fn=q_network.apply,
        params=q_params,
        target_params=q_params,
        tx=optax.adam(args.learning_rate, eps=0.01 / args.batch_size),
    )

    @jax.jit
    def get_action(params, obs):
        """The greedy action (N,) of each observation in `obs` (N, stack, H, W) and its return distribution."""
        return q_network.apply(params, obs, method=QNetwork.get_action)

    @jax.jit
    def update(q_state, obs, actions, rewards, next_obs, dones):
        """One gradient step on a sampled batch; returns the new state, the loss and the mean Q-value taken."""
        _, next_pmfs = q_network.apply(q_state.target_params, next_obs, method=QNetwork.get_action)
        target_pmfs = project_distribution(next_pmfs, rewards, dones, args.gamma, q_network.atoms)

        def cross_entropy(params):
            _, old_pmfs = q_network.apply(params, obs, actions, method=QNetwork.get_action)
            # the clip keeps log() finite where the network puts (almost) no mass
            return -(target_pmfs * jnp.log(jnp.clip(old_pmfs, 1e-5, 1 - 1e-5))).sum(-1).mean(), old_pmfs

        (loss, old_pmfs), grads = jax.value_and_grad(cross_entropy, has_aux=True)(q_state.params)
        old_val = (old_pmfs * q_network.atoms).sum(1)
        return q_state.apply_gradients(grads=grads), loss, old_val.mean()

    stack_size, *frame_shape = envs.single_observation_space.shape
    rb = ReplayBuffer(args.buffer_size, args.num_envs, tuple(frame_shape), stack_size)
    buffer_bytes = rb.capacity * args.num_envs * ReplayBuffer.bytes_per_slot(frame_shape)
    available = available_memory()
    print(
        f"replay buffer: {rb.capacity * args.num_envs} frames x {ReplayBuffer.bytes_per_slot(frame_shape)} B = "
        f"{buffer_bytes / 2**30:.2f} GiB when full"
        + (f" ({available / 2**30:.1f} GiB available)" if available is not None else "")
    )
    exploration_steps = args.exploration_fraction * args.total_timesteps

    global_step = 0
    num_updates = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    obs, _ = envs.reset(seed=args.seed)
    rb.start(obs)
    for iteration in range(num_iterations):
        epsilon = epsilon_schedule(args.start_e, args.end_e, exploration_steps, global_step)
        # ε-greedy per sub-env; the network is only asked when some sub-env acts greedily
        explore = np.random.random(args.num_envs) < epsilon
        actions = envs.action_space.sample()
        if not explore.all():
            greedy, _ = get_action(q_state.params, obs)
            actions = np.where(explore, actions, np.asarray(greedy))

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
                b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(args.batch_size)
                q_state, loss, q_values = update(q_state, b_obs, b_actions, b_rewards, b_next_obs, b_dones)
                # one read per gradient step, as in c51_atari.py (the next greedy action waits for these
                # weights anyway): a non-finite loss stops the run before the weights are used or saved
                if not np.isfinite(loss):
                    script = os.path.basename(__file__)
                    print(f"{script}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
                    writer.close()
                    envs.close()
                    sys.exit(1)
                num_updates += 1

                if num_updates % 100 == 0:
                    sps = int(global_step / (time.time() - start_time))
                    writer.add_scalar("losses/loss", float(loss), global_step)
                    writer.add_scalar("losses/q_values", float(q_values), global_step)
                    writer.add_scalar("charts/epsilon", epsilon, global_step)
                    writer.add_scalar("charts/SPS", sps, global_step)

            # a hard copy: several owed copies in one vector step are the same single copy
            if steps_crossed(previous_step, global_step, args.target_network_frequency) > 0:
                q_state = q_state.replace(target_params=q_state.params)

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
        checkpoint = {"model": flax.serialization.to_state_dict(q_state.params), "args": vars(args)}
        with open(model_path, "wb") as f:
            f.write(flax.serialization.msgpack_serialize(checkpoint))
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, epsilon=0.05, capture_video=args.capture_video)
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
