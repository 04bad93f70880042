# QDagger: a DQN student with the IMPALA CNN learns from a DQN teacher (Nature CNN) on Atari games.
# Papers: Agarwal et al. 2022, "Reincarnating Reinforcement Learning: Reusing Prior Computation to
# Accelerate Progress" (NeurIPS); Espeholt et al. 2018, "IMPALA" (ICML) for the student's network;
# Mnih et al. 2015 (Nature) for DQN and its Atari preprocessing. Defaults are CleanRL's published
# ones (dqn_atari.py's, plus 500k teacher steps, 500k offline steps, temperature 1).
# Phases: (1) load a teacher saved by dqn_atari.py --save-model (or CleanRL's Hub file); (2) score it
# over --teacher-eval-episodes games; (3) let it play --teacher-steps env steps into a replay memory
# (ε-greedy, ε from start-e to end-e over those steps) and train the student on that memory for
# --offline-steps gradient steps with TD + distillation loss; (4) train the student online on its own
# experience with TD + λ_t × distillation loss, λ_t = max(1 - G_student / G_teacher, 0) with G_student
# the mean return of the last --distill-window (10) training episodes (λ_t = 1 before they finish).
# As in CleanRL's published version (and so unlike the paper): the teacher fills a fresh replay
# memory instead of handing over its own (the paper's appendix A.5 ablation); the distillation loss,
# KL(softmax(teacher Q / T) || softmax(student Q / T)), is summed over the batch (the paper's code
# averages it: batch-size times less weight); the online phase reads its ε schedule and
# learning_starts on a clock that starts at --offline-steps, so with the defaults the student starts
# at ε ≈ 0.5 and learns from its first online step; evaluations act with ε = end-e.
# Deliberate differences from CleanRL's published version: once λ_t reaches 0 distillation stops for
# good (the paper's 1_{t < t0}; CleanRL recomputes it at every step); λ_t is computed as
# (G_teacher - G_student) / |G_teacher|, the same for a positive teacher return and still "how far
# the student is behind" for a negative one (a teacher return of exactly 0 gives 1 while the student
# scores below 0, else 0); the online global_step counts online env transitions from 0 (CleanRL's
# starts at offline_steps); the offline phase evaluates the student every --offline-eval-frequency
# gradient steps and at its end (CleanRL: after gradient steps 1, 100001, ..., 400001); --num-envs > 1
# works. The rest (wrapper chain, frame-level replay memory, time limits not terminal, game-score
# statistics, ALE v5 ids made with frameskip=1) is as in dqn_atari.py.
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
    """whether to save the student into `runs/{run_name}` and evaluate it for 10 episodes"""
    upload_model: bool = False
    """whether to push the saved model, its model card, videos, logs and this script to the Hugging Face Hub
    (needs --save-model and a token: `hf auth login` or HF_TOKEN; HF_ENDPOINT picks another Hub)"""
    hf_entity: str = ""
    """the user or org of the Hub repository `{hf_entity}/{env_id}-{exp_name}-seed{seed}` (default: the token's user)"""

    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of the environment"""
    total_timesteps: int = 10000000
    """total environment steps of the online phase"""
    learning_rate: float = 1e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    buffer_size: int = 1000000
    """the replay memory size (frames; each episode's final frame takes one, so it holds slightly fewer transitions)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    tau: float = 1.0
    """the target network update rate (1.0: a hard copy)"""
    target_network_frequency: int = 1000
    """the timesteps (offline: gradient steps) it takes to update the target network"""
    batch_size: int = 32
    """the batch size of sample from the replay memory"""
    start_e: float = 1
    """the starting epsilon for exploration"""
    end_e: float = 0.01
    """the ending epsilon for exploration (also the epsilon of every evaluation)"""
    exploration_fraction: float = 0.10
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    learning_starts: int = 80000
    """timestep to start learning (online clock, which starts at `offline-steps`)"""
    train_frequency: int = 4
    """the frequency of training (env steps per gradient step)"""

    teacher_model_path: Optional[str] = None
    """a teacher saved by dqn_atari.py --save-model (or a bare dqn_atari state_dict); None: download it from the Hub"""
    teacher_policy_hf_repo: Optional[str] = None
    """the Hugging Face Hub repo of the teacher (None: cleanrl/{env_id}-{teacher_model_exp_name}-seed1)"""
    teacher_model_exp_name: str = "dqn_atari"
    """the experiment name of the teacher; the Hub file is {teacher_model_exp_name}.cleanrl_model"""
    teacher_eval_episodes: int = 10
    """the number of games the teacher is scored on (its mean return sets the distillation coefficient)"""
    teacher_steps: int = 500000
    """the env steps the teacher plays to fill the replay memory of the offline phase"""
    offline_steps: int = 500000
    """the gradient steps the student takes on the teacher's replay memory before acting itself"""
    offline_eval_frequency: int = 100000
    """the offline gradient steps between two evaluations of the student (one more at the end)"""
    offline_eval_episodes: int = 10
    """the games of each offline evaluation (0: none)"""
    temperature: float = 1.0
    """the temperature of the softmax over Q-values in the distillation loss"""
    distill_window: int = 10
    """the recent training episodes whose mean return is compared with the teacher's"""


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


class TeacherQNetwork(nn.Module):
    """dqn_atari.py's QNetwork (the Nature CNN), layer for layer, so its saved weights load as they are."""

    def __init__(self, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(3136, 512),
            nn.ReLU(),
            nn.Linear(512, n_actions),
        )

    def forward(self, x):
        return self.network(x / 255.0)


class ResidualBlock(nn.Module):
    """IMPALA residual block: x + conv(relu(conv(relu(x)))), 3x3 convolutions that keep the shape."""

    def __init__(self, channels):
        super().__init__()
        self.conv0 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)

    def forward(self, x):
        return x + self.conv1(F.relu(self.conv0(F.relu(x))))


class ConvSequence(nn.Module):
    """One IMPALA stage: a 3x3 convolution, a 3x3 max-pool of stride 2 (halving H and W, rounding up)
    and two residual blocks."""

    def __init__(self, input_shape, out_channels):
        super().__init__()
        self.input_shape = input_shape
        self.out_channels = out_channels
        self.conv = nn.Conv2d(input_shape[0], out_channels, kernel_size=3, padding=1)
        self.res_block0 = ResidualBlock(out_channels)
        self.res_block1 = ResidualBlock(out_channels)

    def forward(self, x):
        x = F.max_pool2d(self.conv(x), kernel_size=3, stride=2, padding=1)
        return self.res_block1(self.res_block0(x))

    def get_output_shape(self):
        _, h, w = self.input_shape
        return (self.out_channels, (h + 1) // 2, (w + 1) // 2)


class QNetwork(nn.Module):
    """The student: the IMPALA CNN (stages of 16, 32 and 32 channels) with a 256-unit hidden layer."""

    def __init__(self, n_actions, obs_shape=(4, 84, 84)):
        super().__init__()
        shape = obs_shape
        layers = []
        for out_channels in (16, 32, 32):
            stage = ConvSequence(shape, out_channels)
            shape = stage.get_output_shape()
            layers.append(stage)
        layers += [
            nn.Flatten(),
            nn.ReLU(),
            nn.Linear(int(np.prod(shape)), 256),
            nn.ReLU(),
            nn.Linear(256, n_actions),
        ]
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x / 255.0)


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


def epsilon_schedule(start_e, end_e, duration, t):
    """ε at env step `t`: linear from `start_e` to `end_e` over `duration` steps, then `end_e`.

    A zero duration (`--exploration-fraction 0`) means `end_e` from the first step.
    """
    if duration <= 0:
        return end_e
    return start_e + (end_e - start_e) * min(t / duration, 1.0)


def td_target(rewards, next_q_max, dones, gamma):
    """One-step TD targets r + γ (1 - done) max_a' Q_target(s', a'), all (B,) tensors.

    `dones` marks terminal transitions only; a truncated transition bootstraps from its true final
    observation, whose target value is `next_q_max`.
    """
    return rewards + gamma * next_q_max * (1.0 - dones)


def steps_crossed(previous_step, step, every):
    """How many multiples of `every` lie in (previous_step, step]: the updates a cadence owes
    after a vector step took `global_step` from `previous_step` to `step`."""
    return step // every - previous_step // every


def distillation_loss(teacher_q_values, student_q_values, temperature):
    """Per-state KL(softmax(teacher Q / T) || softmax(student Q / T)), a (B,) tensor.

    Its gradient is that of the cross-entropy -Σ_a π_T(a|s) log π(a|s) (the teacher's entropy is a
    constant); being a KL divergence it is 0 when both policies agree."""
    teacher_log_policy = F.log_softmax(teacher_q_values / temperature, dim=-1)
    student_log_policy = F.log_softmax(student_q_values / temperature, dim=-1)
    return (teacher_log_policy.exp() * (teacher_log_policy - student_log_policy)).sum(dim=-1)


def distill_coefficient(recent_returns, teacher_return, window):
    """λ_t, the weight of the online distillation loss: how far the student's mean return over its
    last `window` training episodes is behind the teacher's mean evaluation return, as a fraction of
    the teacher's, floored at 0; 1 until `window` episodes have finished.

    (G_teacher - G_student) / |G_teacher| is the paper's 1 - G_student / G_teacher for a positive
    teacher return and keeps its meaning (the student is behind: positive) for a negative one. A
    teacher return of exactly 0 gives 1 while the student scores below 0 and 0 otherwise."""
    if len(recent_returns) < window:
        return 1.0
    student_return = float(np.mean(list(recent_returns)[-window:]))
    if teacher_return == 0:
        return 1.0 if student_return < 0 else 0.0
    return max((teacher_return - student_return) / abs(teacher_return), 0.0)


def teacher_weights(checkpoint, n_actions, env_id, source):
    """The teacher's state_dict in a loaded checkpoint and None, or None and one line saying what is
    wrong with it and how to fix it (`source` names the file in that line).

    Accepted: the dict dqn_atari.py --save-model writes ({"model": state_dict, "args": {...}}, whose
    env_id must be `env_id`), or a bare state_dict (CleanRL's Hub files), for `n_actions` actions."""
    fix = f"pass a checkpoint saved by dqn_atari.py --save-model on {env_id} with --teacher-model-path"
    saved_args = None
    if isinstance(checkpoint, dict) and "model" in checkpoint:
        state_dict, saved_args = checkpoint["model"], checkpoint.get("args")
    else:
        state_dict = checkpoint
    if not isinstance(state_dict, dict) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        return None, f"the teacher {source} holds a {type(state_dict).__name__}, not dqn_atari.py weights; {fix}"
    with torch.device("meta"):  # shapes only: nothing is allocated
        expected = TeacherQNetwork(n_actions).state_dict()
    if set(state_dict) != set(expected):
        differ = ", ".join(sorted(set(state_dict) ^ set(expected))[:3])
        return None, f"the teacher {source} is not a dqn_atari.py QNetwork (parameters {differ} differ); {fix}"
    if isinstance(saved_args, dict) and saved_args.get("env_id") not in (None, env_id):
        return None, (
            f"the teacher {source} was trained on {saved_args['env_id']}, not {env_id}; "
            f"use --env-id {saved_args['env_id']}, or {fix}"
        )
    teacher_actions = state_dict["network.9.weight"].shape[0]
    if teacher_actions != n_actions:
        return None, f"the teacher {source} chooses among {teacher_actions} actions but {env_id} has {n_actions}; {fix}"
    for name, tensor in state_dict.items():
        if tensor.shape != expected[name].shape:
            return None, f"the teacher {source} is not a dqn_atari.py QNetwork ({name} has shape {tuple(tensor.shape)}); {fix}"
    return state_dict, None


def first_sentence(error):
    """An exception as one short line: its type and the first sentence of its message."""
    line = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {line.split('. ')[0][:300]}"


def load_teacher(args, n_actions, device):
    """(state_dict, source, None) for the teacher, or (None, source, one line saying why it cannot be
    had and how to fix it); `source` names the file.

    --teacher-model-path is read as it is; without it the file is downloaded from the Hugging Face Hub."""
    fix = "pass a checkpoint saved by dqn_atari.py --save-model with --teacher-model-path"
    if args.teacher_model_path is not None:
        path = source = args.teacher_model_path
        if not os.path.isfile(path):
            return None, source, f"--teacher-model-path {path}: no such file; {fix}"
    else:
        repo = args.teacher_policy_hf_repo or f"cleanrl/{args.env_id}-{args.teacher_model_exp_name}-seed1"
        filename = f"{args.teacher_model_exp_name}.cleanrl_model"
        source = f"{repo}/{filename}"
        try:
            from huggingface_hub import hf_hub_download
            from huggingface_hub.utils import logging as hf_logging

            # an unreachable Hub is retried for about 30 s with a log line per try; the outcome is our one line
            hf_logging.set_verbosity_error()

            path = hf_hub_download(repo_id=repo, filename=filename)
        except Exception as e:  # no network, no such repo or file, an invalid repo id, no huggingface_hub
            return None, source, f"cannot download the teacher {source} from the Hugging Face Hub ({first_sentence(e)}); {fix}"
    try:
        checkpoint = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # not a torch file, or one that needs more than tensors and plain types
        return (
            None,
            source,
            f"cannot read the teacher {source} as a weights-only torch checkpoint ({first_sentence(e)}); {fix}",
        )
    state_dict, error = teacher_weights(checkpoint, n_actions, args.env_id, source)
    return state_dict, source, error


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
    for name in (
        "num_envs",
        "buffer_size",
        "batch_size",
        "train_frequency",
        "target_network_frequency",
        "teacher_eval_episodes",
        "offline_eval_frequency",
        "distill_window",
    ):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    for name in ("learning_starts", "teacher_steps", "offline_steps", "offline_eval_episodes"):
        if getattr(args, name) < 0:
            return f"--{name.replace('_', '-')} must be at least 0, got {getattr(args, name)}"
    if args.buffer_size < args.batch_size:
        return f"--buffer-size {args.buffer_size} is smaller than one batch (--batch-size {args.batch_size})"
    if args.buffer_size // args.num_envs < 10:
        return (
            f"--buffer-size {args.buffer_size} leaves {args.buffer_size // args.num_envs} frames to each of the "
            f"--num-envs {args.num_envs} sub-envs; each needs at least 10"
        )
    if args.total_timesteps < args.num_envs:
        return f"--total-timesteps {args.total_timesteps} is less than one step of the --num-envs {args.num_envs} envs"
    if args.offline_steps > 0 and args.teacher_steps < args.num_envs:
        return (
            f"--offline-steps {args.offline_steps} needs the teacher's data, but --teacher-steps {args.teacher_steps} is "
            f"less than one step of the --num-envs {args.num_envs} envs; raise --teacher-steps or pass --offline-steps 0"
        )
    run_steps = args.total_timesteps // args.num_envs * args.num_envs  # whole vector steps
    online_learning_starts = max(args.learning_starts - args.offline_steps, 0)  # the online clock starts at 0
    if run_steps // args.train_frequency <= online_learning_starts // args.train_frequency:
        return (
            f"--offline-steps {args.offline_steps} plus --total-timesteps {args.total_timesteps} does not exceed "
            f"--learning-starts {args.learning_starts} by a gradient step (one every --train-frequency "
            f"{args.train_frequency} env steps; the online clock starts at --offline-steps), so no online update would run"
        )
    for name in ("gamma", "start_e", "end_e", "exploration_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}"
    if not 0.0 < args.tau <= 1.0:
        return f"--tau must be in (0, 1], got {args.tau}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    # Adam's first step divides the learning rate by 1 - β1 = 0.1, in float32
    if not 0.0 < args.learning_rate <= float32_max / 10:
        return f"--learning-rate must be positive and at most {float32_max / 10:.1e} (Adam), got {args.learning_rate}"
    if not 0.0 < args.temperature <= float32_max:
        return f"--temperature must be positive and finite in float32, got {args.temperature}"
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
- name: QDagger
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

# QDagger agent playing {args.env_id}

A QDagger (a DQN student distilled from a DQN teacher) agent trained on `{args.env_id}` by CleanRL's single-file script
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


def play(q_network, envs, eval_episodes, epsilon, device, seed):
    """Scores of `eval_episodes` games played ε-greedily by `q_network` on the one-env vector env `envs`."""
    envs.action_space.seed(seed)
    obs, _ = envs.reset(seed=seed)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        if random.random() < epsilon:
            actions = envs.action_space.sample()
        else:
            with torch.no_grad():
                q_values = q_network(torch.as_tensor(obs, device=device))
            actions = torch.argmax(q_values, dim=1).cpu().numpy()
        obs, _, _, _, infos = envs.step(actions)
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
    return episodic_returns


def evaluate(model_path, eval_episodes, run_name, device, epsilon=0.01, capture_video=False):
    """Runs the saved student ε-greedily for `eval_episodes` games; returns their scores."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval")
    q_network = QNetwork(envs.single_action_space.n).to(device)
    q_network.load_state_dict(checkpoint["model"])
    episodic_returns = play(q_network, envs, eval_episodes, epsilon, device, saved["seed"] + 100_000)
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    import tyro

    args = tyro.cli(Args)
    script = os.path.basename(__file__)
    if args.capture_video:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array rendering needs no display
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    # command-line values, the env, the memory, and last the teacher (maybe a download): all checked
    # before anything is created
    error = validation_error(args)
    if error is None:
        try:
            probe_env = gym.make(args.env_id)
        except Exception as e:  # unknown ids, missing modules or extras: all mean this env cannot be made
            error = f"cannot make {args.env_id!r}: {e}"
        else:
            error = space_error(args, probe_env.unwrapped)
            n_actions = int(probe_env.action_space.n) if error is None else None
            probe_env.close()
    if error is None:
        error = replay_memory_error(args)
    if error is None:
        teacher_state_dict, teacher_source, error = load_teacher(args, n_actions, device)
    if error is not None:
        print(f"{script}: {error}", file=sys.stderr)
        sys.exit(2)
    teacher_iterations = args.teacher_steps // args.num_envs if args.offline_steps > 0 else 0
    if args.offline_steps == 0 and args.teacher_steps > 0:
        print("the teacher does not play: --offline-steps 0 leaves no use for its data")
    elif args.teacher_steps % args.num_envs != 0:
        print(
            f"the teacher plays {teacher_iterations * args.num_envs} steps: --teacher-steps rounded down to whole vector steps"
        )
    num_iterations = args.total_timesteps // args.num_envs
    if args.total_timesteps % args.num_envs != 0:
        print(f"running {num_iterations * args.num_envs} steps: --total-timesteps rounded down to whole vector steps")

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

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
                path = os.path.join(video_dir, name)  # the phases' folders reuse the same file names
                if name.endswith(".mp4") and path not in uploaded_videos:
                    uploaded_videos.add(path)
                    wandb.log({"videos": wandb.Video(path, format="mp4")})

    def stop_on_non_finite(loss, where):
        # one sync per gradient step: stop before a non-finite loss reaches the weights
        if not torch.isfinite(loss):
            print(f"{script}: non-finite loss at {where}; stopping", file=sys.stderr)
            writer.close()
            sys.exit(1)

    teacher = TeacherQNetwork(n_actions).to(device)
    teacher.load_state_dict(teacher_state_dict)
    q_network = QNetwork(n_actions).to(device)
    optimizer = optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(n_actions).to(device)
    target_network.load_state_dict(q_network.state_dict())

    # phase 1: the teacher's score, the bar the student's training returns are measured against
    eval_envs = make_vector_env(args.env_id, 1, False, run_name)
    game = eval_envs.envs[0].unwrapped
    print(
        f"{args.env_id}: frame skip 4 (MaxAndSkip), sticky-action probability "
        f"{game.ale.getFloat('repeat_action_probability'):g}, FIRE on reset: {'FIRE' in game.get_action_meanings()}"
    )
    phase_start = time.time()
    teacher_episodic_returns = play(teacher, eval_envs, args.teacher_eval_episodes, args.end_e, device, args.seed + 100_000)
    eval_envs.close()
    teacher_return = float(np.mean(teacher_episodic_returns))
    writer.add_scalar("charts/teacher/avg_episodic_return", teacher_return, 0)
    print(
        f"teacher {teacher_source}: mean episodic return {teacher_return:.2f} over {len(teacher_episodic_returns)} games "
        f"(ε={args.end_e}, {time.time() - phase_start:.0f}s)",
        flush=True,
    )

    buffer_bytes = (args.buffer_size // args.num_envs) * args.num_envs * ReplayBuffer.bytes_per_slot((84, 84))
    available = available_memory()
    print(
        f"replay buffer: {(args.buffer_size // args.num_envs) * args.num_envs} frames x "
        f"{ReplayBuffer.bytes_per_slot((84, 84))} B = {buffer_bytes / 2**30:.2f} GiB when full, one at a time "
        "(the teacher's, then the student's)" + (f" ({available / 2**30:.1f} GiB available)" if available is not None else "")
    )
    if args.offline_steps > 0:
        # phase 2: the teacher plays, ε-greedily with ε from start-e to end-e, into the offline replay memory
        teacher_envs = make_vector_env(args.env_id, args.num_envs, args.capture_video, f"{run_name}-teacher")
        teacher_envs.action_space.seed(args.seed)
        stack_size, *frame_shape = teacher_envs.single_observation_space.shape
        teacher_rb = ReplayBuffer(args.buffer_size, args.num_envs, tuple(frame_shape), stack_size, device)
        teacher_step = 0
        teacher_returns = deque(maxlen=20)
        phase_start = last_print = time.time()
        obs, _ = teacher_envs.reset(seed=args.seed)
        teacher_rb.start(obs)
        for iteration in range(teacher_iterations):
            epsilon = epsilon_schedule(args.start_e, args.end_e, args.teacher_steps, teacher_step)
            explore = np.random.random(args.num_envs) < epsilon
            actions = teacher_envs.action_space.sample()
            if not explore.all():
                with torch.no_grad():
                    q_values = teacher(torch.as_tensor(obs, device=device))
                actions = np.where(explore, actions, torch.argmax(q_values, dim=1).cpu().numpy())
            next_obs, rewards, terminations, truncations, infos = teacher_envs.step(actions)
            teacher_step += args.num_envs
            teacher_rb.add(actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
            if "final_info" in infos and "episode" in infos["final_info"]:
                episode = infos["final_info"]["episode"]
                for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                    teacher_returns.append(float(episode["r"][i]))
                    writer.add_scalar("charts/teacher/episodic_return", episode["r"][i], teacher_step)
                    writer.add_scalar("charts/teacher/episodic_length", episode["l"][i], teacher_step)
            obs = next_obs
            if time.time() - last_print > 10 or iteration == teacher_iterations - 1:
                last_print = time.time()
                sps = int(teacher_step / (time.time() - phase_start))
                recent = f"{np.mean(teacher_returns):.2f}" if teacher_returns else "n/a"
                print(
                    f"teacher_step={teacher_step}, episodic_return(last {len(teacher_returns)})={recent}, "
                    f"epsilon={epsilon:.3f}, SPS={sps}",
                    flush=True,
                )
        teacher_envs.close()
        upload_new_videos(f"videos/{run_name}-teacher")

        # phase 3: the student learns offline from the teacher's replay memory, with full distillation
        phase_start = last_print = time.time()
        eval_time = 0.0
        for offline_step in range(1, args.offline_steps + 1):
            b_obs, b_actions, b_rewards, b_next_obs, b_dones = teacher_rb.sample(args.batch_size)
            with torch.no_grad():
                target_max, _ = target_network(b_next_obs).max(dim=1)
                td_targets = td_target(b_rewards, target_max, b_dones, args.gamma)
                teacher_q_values = teacher(b_obs)
            student_q_values = q_network(b_obs)
            old_val = student_q_values.gather(1, b_actions.unsqueeze(1)).squeeze(1)
            td_loss = F.mse_loss(td_targets, old_val)
            # summed over the batch, as in CleanRL's published runs (see the header)
            distill_loss = distillation_loss(teacher_q_values, student_q_values, args.temperature).sum()
            loss = td_loss + distill_loss
            stop_on_non_finite(loss, f"offline step {offline_step}")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            if offline_step % args.target_network_frequency == 0:
                for target_param, q_param in zip(target_network.parameters(), q_network.parameters()):
                    target_param.data.copy_(args.tau * q_param.data + (1.0 - args.tau) * target_param.data)

            if offline_step % 100 == 0 or offline_step == args.offline_steps:
                # gradient steps per second, fractional: a CPU manages only a few
                sps = offline_step / (time.time() - phase_start - eval_time)
                writer.add_scalar("charts/offline/loss", loss.item(), offline_step)
                writer.add_scalar("charts/offline/q_loss", td_loss.item(), offline_step)
                writer.add_scalar("charts/offline/distill_loss", distill_loss.item(), offline_step)
                writer.add_scalar("charts/offline/SPS", sps, offline_step)
            if time.time() - last_print > 10 or offline_step == args.offline_steps:
                last_print = time.time()
                sps = offline_step / (time.time() - phase_start - eval_time)
                print(f"offline_step={offline_step}, loss={loss.item():.4f}, gradient steps per second={sps:.1f}", flush=True)

            due = offline_step % args.offline_eval_frequency == 0 or offline_step == args.offline_steps
            if due and args.offline_eval_episodes > 0:
                eval_start = time.time()
                eval_envs = make_vector_env(args.env_id, 1, False, run_name)
                episodic_returns = play(
                    q_network, eval_envs, args.offline_eval_episodes, args.end_e, device, args.seed + 100_000
                )
                eval_envs.close()
                writer.add_scalar("charts/offline/avg_episodic_return", np.mean(episodic_returns), offline_step)
                print(
                    f"offline_step={offline_step}, student's mean episodic return {np.mean(episodic_returns):.2f}", flush=True
                )
                eval_time += time.time() - eval_start
        del teacher_rb  # the online phase starts a replay memory of its own

    # phase 4: the student acts and learns online, distilling while it is behind the teacher
    envs = make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name)
    envs.action_space.seed(args.seed)
    stack_size, *frame_shape = envs.single_observation_space.shape
    rb = ReplayBuffer(args.buffer_size, args.num_envs, tuple(frame_shape), stack_size, device)
    exploration_steps = args.exploration_fraction * args.total_timesteps
    # the ε schedule and learning_starts read a clock that starts at offline_steps (see the header)
    online_learning_starts = args.learning_starts - args.offline_steps

    global_step = 0
    num_updates = 0
    distill_coeff = 1.0
    recent_returns = deque(maxlen=args.distill_window)
    log_due = False
    phase_start = last_print = time.time()
    obs, _ = envs.reset(seed=args.seed)
    rb.start(obs)
    for iteration in range(num_iterations):
        epsilon = epsilon_schedule(args.start_e, args.end_e, exploration_steps, args.offline_steps + global_step)
        # ε-greedy per sub-env; the network is only asked when some sub-env acts greedily
        explore = np.random.random(args.num_envs) < epsilon
        actions = envs.action_space.sample()
        if not explore.all():
            with torch.no_grad():
                q_values = q_network(torch.as_tensor(obs, device=device))
            actions = np.where(explore, actions, torch.argmax(q_values, dim=1).cpu().numpy())

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
            if distill_coeff > 0:  # once it has reached 0, distillation is over for good
                distill_coeff = distill_coefficient(recent_returns, teacher_return, args.distill_window)
        obs = next_obs
        log_due = log_due or steps_crossed(previous_step, global_step, 100) > 0 or iteration == num_iterations - 1

        if global_step > online_learning_starts:
            # updates owed for the env steps past learning_starts that this vector step covered
            num_owed = steps_crossed(max(previous_step, online_learning_starts), global_step, args.train_frequency)
            for _ in range(num_owed):
                b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(args.batch_size)
                with torch.no_grad():
                    target_max, _ = target_network(b_next_obs).max(dim=1)
                    td_targets = td_target(b_rewards, target_max, b_dones, args.gamma)
                student_q_values = q_network(b_obs)
                old_val = student_q_values.gather(1, b_actions.unsqueeze(1)).squeeze(1)
                td_loss = F.mse_loss(td_targets, old_val)
                loss = td_loss
                if distill_coeff > 0:
                    with torch.no_grad():
                        teacher_q_values = teacher(b_obs)
                    distill_loss = distillation_loss(teacher_q_values, student_q_values, args.temperature).sum()
                    loss = td_loss + distill_coeff * distill_loss
                stop_on_non_finite(loss, f"global_step {global_step}")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                num_updates += 1

            if log_due and num_owed > 0:
                log_due = False
                sps = int(global_step / (time.time() - phase_start))
                writer.add_scalar("losses/loss", loss.item(), global_step)
                writer.add_scalar("losses/td_loss", td_loss.item(), global_step)
                if distill_coeff > 0:
                    writer.add_scalar("losses/distill_loss", distill_loss.item(), global_step)
                writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
                writer.add_scalar("charts/distill_coeff", distill_coeff, global_step)
                writer.add_scalar("charts/epsilon", epsilon, global_step)
                writer.add_scalar("charts/SPS", sps, global_step)

            for _ in range(steps_crossed(previous_step, global_step, args.target_network_frequency)):
                for target_param, q_param in zip(target_network.parameters(), q_network.parameters()):
                    target_param.data.copy_(args.tau * q_param.data + (1.0 - args.tau) * target_param.data)

        if time.time() - last_print > 10 or iteration == num_iterations - 1:
            last_print = time.time()
            sps = int(global_step / (time.time() - phase_start))
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            print(
                f"global_step={global_step}, episodic_return(last {len(recent_returns)})={recent}, "
                f"distill_coeff={distill_coeff:.3f}, SPS={sps}",
                flush=True,
            )
            upload_new_videos(f"videos/{run_name}")
    envs.close()  # RecordVideo writes the video of an episode still running when it closes
    upload_new_videos(f"videos/{run_name}")

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save({"model": q_network.state_dict(), "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, epsilon=args.end_e, capture_video=args.capture_video)
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
