# Proximal Policy Optimization with Random Network Distillation (PPO-RND) for hard-exploration Atari
# games, with envpool's vectorised Atari (MontezumaRevenge-v5 by default).
# Papers: Burda et al. 2019, "Exploration by Random Network Distillation" (ICLR, arXiv:1810.12894):
# an intrinsic reward equal to the error of a trained predictor network at matching the output of a fixed,
# randomly initialised target network on the next observation, two value heads (extrinsic, episodic,
# gamma 0.999; intrinsic, non-episodic, gamma 0.99), advantages combined as 2 x extrinsic + 1 x intrinsic,
# observation statistics initialised by a random agent, the intrinsic reward divided by a running
# standard deviation of its discounted sum, the predictor trained on 25% of each minibatch; PPO,
# Schulman et al. 2017 (arXiv:1707.06347); GAE, Schulman et al. 2016 (arXiv:1506.02438); sticky actions
# (probability 0.25), Machado et al. 2018 (JAIR, "Revisiting the Arcade Learning Environment"); EnvPool,
# Weng et al. 2022 (arXiv:2206.10558). Defaults are CleanRL's published ones (a lost life ends the agent's
# episode, as there; --no-episodic-life plays whole games as in the paper).
# Deliberate differences from the paper: CleanRL's PPO machinery (learning-rate annealing, per-minibatch
# advantage normalisation, a clipped extrinsic value loss, gradient clipping at norm 0.5); envpool's
# standard Atari preprocessing (up to 30 no-op starts, FIRE on reset) and time limit of 27000 agent steps
# (the paper: 18000 frames, 4500 agent steps), a lost life ending the agent's episode. Deliberate
# differences from CleanRL's published script: the predictor learns from the next observation of each
# step, the one its intrinsic reward is computed on (CleanRL's script: the current one); an episode cut by
# the time limit bootstraps from the value of its true final observation; the step after an episode's end,
# where envpool resets the game and ignores the action, is left out of every loss, of the intrinsic
# returns and of the running statistics.
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

import envpool
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter


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

    env_id: str = "MontezumaRevenge-v5"
    """the id of the environment (an envpool Atari id)"""
    total_timesteps: int = 2000000000
    """total environment steps of the experiment (the random steps of observation-normalisation initialisation not counted)"""
    learning_rate: float = 1e-4
    """the learning rate of the optimizer"""
    num_envs: int = 128
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.999
    """the discount factor gamma of the extrinsic reward"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation (both reward streams)"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles advantages normalization"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """toggles the clipped extrinsic value loss (from OpenAI Baselines' PPO2; the intrinsic one is never clipped)"""
    ent_coef: float = 0.001
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function (the sum of the extrinsic and intrinsic value losses)"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: Optional[float] = None
    """the target KL divergence threshold (stops the epochs of an update early)"""

    update_proportion: float = 0.25
    """the proportion of each minibatch the RND predictor is trained on"""
    int_coef: float = 1.0
    """coefficient of the intrinsic advantages"""
    ext_coef: float = 2.0
    """coefficient of the extrinsic advantages"""
    int_gamma: float = 0.99
    """the discount factor gamma of the intrinsic reward"""
    num_iterations_obs_norm_init: int = 50
    """rollouts (num_envs x num_steps steps each) of random actions that initialise the observation statistics"""
    max_episode_steps: int = 27000
    """the time limit of a game in agent steps (envpool's default; a cut game bootstraps, it is not terminal)"""
    episodic_life: bool = True
    """if toggled, a lost life ends the agent's (extrinsic) episode, as in CleanRL's published script (the paper: off)"""


# the sticky-action probability of the v5 ids (Machado et al. 2018), which the paper also uses
STICKY_ACTION_PROBABILITY = 0.25


def env_error(env_id):
    """Why this script cannot run `env_id`, as one line, or None when it is an envpool Atari id."""
    script = os.path.basename(__file__)
    known = envpool.list_all_envs()
    if env_id not in known:
        import difflib

        close = difflib.get_close_matches(env_id.removeprefix("ALE/").replace("NoFrameskip-v4", "-v5"), known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{env_id} is not an envpool id; {hint}{script} needs an envpool Atari id, e.g. MontezumaRevenge-v5"
    if type(envpool.make_spec(env_id)).__name__ != "AtariEnvSpec":
        return f"{env_id} is not an envpool Atari game; {script} needs one, e.g. MontezumaRevenge-v5 or Pitfall-v5"
    return None


def make_env(env_id, num_envs, seed, max_episode_steps, episodic_life, capture_video=False):
    """The envpool Atari games: 84x84 gray frames, 4 stacked, 4 frames skipped, sticky actions, rewards
    clipped to their sign (info["reward"] keeps the game's own). Autoreset is NEXT_STEP: the step that ends
    a game returns its true final observation and the next step, whose action is ignored, the new game's
    first one (a "reset step")."""
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        seed=seed,
        episodic_life=episodic_life,
        reward_clip=True,
        repeat_action_probability=STICKY_ACTION_PROBABILITY,
        max_episode_steps=max_episode_steps,
        render_mode="rgb_array" if capture_video else None,
    )


class GameRecorder:
    """Films the games of env 0 that `capped_cubic_video_schedule` picks (games 0, 1, 8, 27, ..., 1000, 2000, ...),
    each from its first observation to its final one, into `video_dir`. Call `step` after every `envs.step`."""

    def __init__(self, envs, video_dir):
        self.envs = envs
        self.video_dir = video_dir
        self.game = 0
        self.frames = [envs.render()[0]] if capped_cubic_video_schedule(0) else None

    def step(self, game_over):
        """`game_over`: env 0's game ended on this step (its next step is the reset step that starts the next game)."""
        if self.frames is not None:
            self.frames.append(self.envs.render()[0])
        if game_over:
            if self.frames is not None:
                # 60 Hz Atari frames, every 4th one kept: 15 frames per second is real time
                save_video(self.frames, self.video_dir, episode_index=self.game, fps=15)
            self.game += 1
            self.frames = [] if capped_cubic_video_schedule(self.game) else None


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """The paper's policy network: a Nature-CNN trunk, a policy head and two value heads (extrinsic, intrinsic)."""

    def __init__(self, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 256)),
            nn.ReLU(),
            layer_init(nn.Linear(256, 448)),
            nn.ReLU(),
        )
        self.extra_layer = nn.Sequential(layer_init(nn.Linear(448, 448), std=0.1), nn.ReLU())
        self.actor = nn.Sequential(
            layer_init(nn.Linear(448, 448), std=0.01),
            nn.ReLU(),
            layer_init(nn.Linear(448, n_actions), std=0.01),
        )
        self.critic_ext = layer_init(nn.Linear(448, 1), std=0.01)
        self.critic_int = layer_init(nn.Linear(448, 1), std=0.01)

    def value_heads(self, hidden):
        # the value heads see the trunk's features plus one more (residual) layer
        features = self.extra_layer(hidden) + hidden
        return self.critic_ext(features).flatten(), self.critic_int(features).flatten()

    def get_value(self, x):
        """(extrinsic, intrinsic) values, each (B,), of a batch of stacked frames (B, 4, 84, 84) uint8."""
        return self.value_heads(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        # argument checks off: a non-finite loss is caught in the update anyway
        probs = Categorical(logits=self.actor(hidden), validate_args=False)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), *self.value_heads(hidden)


class RNDModel(nn.Module):
    """A fixed, randomly initialised target network and the predictor trained to match it, both on one
    normalised frame (B, 1, 84, 84); the predictor is deeper than the target, as in the paper."""

    def __init__(self):
        super().__init__()

        def conv_trunk():
            return [
                layer_init(nn.Conv2d(1, 32, 8, stride=4)),
                nn.LeakyReLU(),
                layer_init(nn.Conv2d(32, 64, 4, stride=2)),
                nn.LeakyReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=1)),
                nn.LeakyReLU(),
                nn.Flatten(),
            ]

        self.predictor = nn.Sequential(
            *conv_trunk(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
            layer_init(nn.Linear(512, 512)),
            nn.ReLU(),
            layer_init(nn.Linear(512, 512)),
        )
        self.target = nn.Sequential(*conv_trunk(), layer_init(nn.Linear(64 * 7 * 7, 512)))
        self.target.requires_grad_(False)

    def intrinsic_reward(self, frames):
        """The novelty of each normalised frame (B, 1, 84, 84): half the squared error of the predictor, (B,)."""
        return (self.predictor(frames) - self.target(frames)).pow(2).sum(1) / 2

    def predictor_loss(self, frames):
        """The predictor's mean squared error per frame, (B,)."""
        return F.mse_loss(self.predictor(frames), self.target(frames), reduction="none").mean(1)


class RunningMeanStd:
    """Mean and (population) variance of every sample seen so far, kept in float64 and merged batch by batch
    (Chan et al.'s parallel update). `shape` is one sample's shape; `update` takes a batch (B, *shape). Before
    any update the count is 0, the mean 0 and the variance 1."""

    def __init__(self, shape=(), device=None):
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = 0

    def update(self, x):
        if len(x) == 0:
            return
        batch_var, batch_mean = torch.var_mean(x.to(torch.float32), dim=0, correction=0)
        batch_count = len(x)
        total = self.count + batch_count
        delta = batch_mean.double() - self.mean
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var.double() * batch_count + delta**2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total

    def state_dict(self):
        return {"mean": self.mean, "var": self.var, "count": torch.tensor(self.count, dtype=torch.float64)}


class RewardForwardFilter:
    """Per env, the discounted sum of intrinsic rewards so far, r_t + gamma * r_{t-1} + gamma^2 * r_{t-2} + ...,
    never reset at episode ends (the intrinsic stream is non-episodic). Its running standard deviation scales the
    intrinsic reward. Reset steps (`valid` 0) are skipped: the sum passes through them unchanged."""

    def __init__(self, gamma, num_envs, device=None):
        self.gamma = gamma
        self.rewems = torch.zeros(num_envs, device=device)

    def update(self, rewards, valid):
        """rewards, valid: (N,) for one step of every env; returns the updated sums, (N,)."""
        self.rewems = torch.where(valid.bool(), self.rewems * self.gamma + rewards, self.rewems)
        return self.rewems


def normalize_frames(frames, obs_rms):
    """The RND networks' input: frames (B, 1, 84, 84) uint8 standardised per pixel with `obs_rms` and clipped to
    [-5, 5], float32. The variance floor 1e-8 maps pixels that never changed to 0."""
    mean, std = obs_rms.mean.float(), torch.sqrt(obs_rms.var + 1e-8).float()
    return ((frames - mean) / std).clamp(-5.0, 5.0)


def reset_step_mask(dones, prev_done):
    """valid[t] = 1 - dones[t-1]: 0 on the reset step after an episode's end, where envpool ignores the action
    and returns the next episode's first observation. dones: (T, N); prev_done: (N,), the previous rollout's
    last dones (zeros for the first rollout). Returns (T, N)."""
    return 1.0 - torch.cat([prev_done[None], dones[:-1]])


def compute_gae(rewards, values, dones, terminations, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns of the extrinsic (episodic) stream for a rollout of T steps from N envs.

    rewards, values, dones, terminations: (T, N); next_value: (N,), the value of the observation after the last
    step. With NEXT_STEP autoreset the observation after a done step t is that episode's true final one, so
    values[t + 1] (or next_value) is the truncation bootstrap: termination zeroes it, truncation keeps it, and
    the λ-chain stops at every episode end. The values at reset steps are garbage the losses mask out.
    Returns (advantages, returns), both (T, N).
    """
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        nextvalues = next_value if t == num_steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


def compute_intrinsic_gae(rewards, values, valid, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns of the intrinsic (non-episodic) stream for a rollout of T steps from N envs.

    rewards, values, valid: (T, N), valid from `reset_step_mask`; next_value: (N,), the intrinsic value of the
    observation after the last step. The intrinsic stream runs on across episode ends and time limits, as in the
    paper, but it steps over the reset step: that step's action is ignored and its reward is the novelty of the
    new game's first frame, which no action earned, so it adds neither reward nor value; the episode's last step
    (whose reward is the novelty of the true final frame) bootstraps from the value of the new episode's first
    observation and its λ-chain continues there, one discount away, as if the game had restarted within that step
    (which is what the paper's environments did). If the rollout ends on an episode's last step, the new first
    observation is not known yet and next_value (of the final observation) stands in. Advantages at reset steps
    are 0. Returns (advantages, returns), both (T, N).
    """
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value)
    nextvalues = next_value
    for t in reversed(range(num_steps)):
        is_valid = valid[t].bool()
        delta = rewards[t] + gamma * nextvalues - values[t]
        gae = delta + gamma * gae_lambda * lastgaelam
        advantages[t] = torch.where(is_valid, gae, 0.0)
        lastgaelam = torch.where(is_valid, gae, lastgaelam)
        nextvalues = torch.where(is_valid, values[t], nextvalues)
    return advantages, advantages + values


def masked_mean(x, mask):
    """The mean of x over the entries where mask is 1 (0 when there are none)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


def normalize_advantages(advantages, mask):
    """Advantages standardised with the mean and (unbiased) std of the entries where mask is 1."""
    mean = masked_mean(advantages, mask)
    var = (((advantages - mean) ** 2) * mask).sum() / (mask.sum() - 1).clamp(min=1)
    return (advantages - mean) / (var.sqrt() + 1e-8)


def explained_variance(values, returns, mask):
    """1 - Var(returns - values) / Var(returns) over the entries where mask is 1 (NaN when the returns do not vary)."""
    y_pred, y_true = values[mask.bool()].cpu().numpy(), returns[mask.bool()].cpu().numpy()
    var_y = np.var(y_true)
    return np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y


def validation_error(args):
    """The first problem with the command-line values as one line, or None when all is well."""
    if not 0 <= args.seed < 2**31:
        return f"--seed must be in [0, 2**31 - 1] (envpool seeds are int32), got {args.seed}"
    if "/" in args.exp_name or "__" in args.exp_name or not args.exp_name:
        return f"--exp-name {args.exp_name!r} must be non-empty, without '/' or '__' (they split run names)"
    run_name_bytes = len(f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}".encode())
    if run_name_bytes > 255:
        return f"the run name would be {run_name_bytes} bytes, more than a folder name can hold (255); shorten --exp-name"
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "max_episode_steps"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    if args.max_episode_steps >= 2**31:  # envpool takes an int32 time limit
        return f"--max-episode-steps must be below 2**31, got {args.max_episode_steps}"
    if args.seed + args.num_envs > 2**31:  # envpool seeds sub-env i with seed + i, an int32
        return f"--seed + --num-envs must be at most 2**31 (sub-env i gets seed + i), got {args.seed + args.num_envs}"
    if args.num_iterations_obs_norm_init < 0:
        return f"--num-iterations-obs-norm-init must be at least 0, got {args.num_iterations_obs_norm_init}"
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches != 0:
        return (
            f"the batch of {batch_size} steps (--num-envs {args.num_envs} x --num-steps {args.num_steps}) "
            f"does not split into --num-minibatches {args.num_minibatches}; pick a divisor of {batch_size}"
        )
    if args.norm_adv and batch_size // args.num_minibatches < 2:
        return "minibatches of 1 step cannot normalise advantages; use fewer --num-minibatches or --no-norm-adv"
    if args.total_timesteps < batch_size:
        return f"--total-timesteps {args.total_timesteps} is below one batch ({batch_size} steps), so no update would run"
    for name in ("gamma", "int_gamma", "gae_lambda", "update_proportion"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    for name in ("learning_rate", "clip_coef", "max_grad_norm"):
        if not 0.0 < getattr(args, name) <= float32_max:
            return f"--{name.replace('_', '-')} must be positive and finite in float32, got {getattr(args, name)}"
    # Adam's first step divides the learning rate by 1 - β1 = 0.1, in float32
    if args.learning_rate > float32_max / 10:
        return f"--learning-rate must be positive and at most {float32_max / 10:.1e} (Adam), got {args.learning_rate}"
    for name in ("ent_coef", "vf_coef", "int_coef", "ext_coef"):
        if not 0.0 <= getattr(args, name) <= float32_max:
            return f"--{name.replace('_', '-')} must be non-negative and finite in float32, got {getattr(args, name)}"
    if args.target_kl is not None and not 0.0 < args.target_kl <= float32_max:
        return f"--target-kl must be positive and finite in float32, got {args.target_kl}"
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
        torch.__version__,
        gym.__version__,
        envpool.__version__,
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
- name: PPO-RND
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

# PPO-RND agent playing {args.env_id}

A PPO agent with Random Network Distillation (RND) exploration bonuses, trained on envpool's `{args.env_id}` by
CleanRL's single-file script [`{script}`]({script}), which is included in this repository with the checkpoint
`{args.exp_name}.cleanrl_model` and the TensorBoard logs of the run. The checkpoint holds the agent (`model`), the
RND target and predictor networks (`rnd_model`) and the running statistics that scale their inputs and output
(`obs_rms`, `reward_rms`); playing needs only the agent.

## Evaluation

Episodic return (game score) over {len(episodic_returns)} evaluation games: **{mean:.2f} ± {std:.2f}** (mean ± std).
{"The video `" + video + "` shows an evaluation game." if video else ""}

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

| python | torch | gymnasium | envpool | numpy | huggingface_hub | {script} sha256 |
|-|-|-|-|-|-|-|
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
    """Plays the saved policy (no intrinsic rewards needed) for `eval_episodes` games on the training settings;
    returns their scores."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_env(
        saved["env_id"],
        1,
        (saved["seed"] + 100_000) % 2**31,
        saved["max_episode_steps"],
        saved["episodic_life"],
        capture_video,
    )
    agent = Agent(envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    agent.eval()
    obs, _ = envs.reset()
    recorder = GameRecorder(envs, f"videos/{run_name}-eval") if capture_video else None
    episodic_returns = []
    game_return = 0.0
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            action = agent.get_action_and_value(torch.as_tensor(obs, device=device))[0]
        obs, _, _, truncation, infos = envs.step(action.cpu().numpy())
        game_return += float(infos["reward"][0])
        game_over = bool(infos["terminated"][0] or truncation[0])
        if recorder is not None:
            recorder.step(game_over)
        if game_over:
            episodic_returns.append(game_return)
            game_return = 0.0
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    import tyro

    args = tyro.cli(Args)
    error = validation_error(args) or env_error(args.env_id)
    if error is not None:
        print(f"{os.path.basename(__file__)}: {error}", file=sys.stderr)
        sys.exit(2)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    if args.total_timesteps % args.batch_size != 0:
        print(f"running {args.num_iterations * args.batch_size} steps: --total-timesteps rounded down to whole batches")

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
        # W&B gets each finished video once, explicitly
        if args.track and os.path.isdir(video_dir):
            for name in sorted(os.listdir(video_dir)):
                path = os.path.join(video_dir, name)  # the eval videos reuse the training videos' names
                if name.endswith(".mp4") and path not in uploaded_videos:
                    uploaded_videos.add(path)
                    wandb.log({"videos": wandb.Video(path, format="mp4")})

    # envpool seeds its envs from --seed when it makes them (its reset takes no seed)
    envs = make_env(args.env_id, args.num_envs, args.seed, args.max_episode_steps, args.episodic_life, args.capture_video)
    n_actions = envs.single_action_space.n
    print(
        f"{args.env_id} (envpool): frame skip 4, sticky-action probability {STICKY_ACTION_PROBABILITY:g}, "
        f"episodic life {'on' if args.episodic_life else 'off'}, time limit {args.max_episode_steps} agent steps, "
        "envpool's no-op (up to 30) and FIRE resets, rewards clipped to their sign for learning"
    )

    agent = Agent(n_actions).to(device)
    rnd_model = RNDModel().to(device)
    # one optimizer and one gradient clip for the agent and the predictor (the target stays as initialised)
    combined_parameters = list(agent.parameters()) + list(rnd_model.predictor.parameters())
    optimizer = optim.Adam(combined_parameters, lr=args.learning_rate, eps=1e-5)
    frame_shape = (1,) + envs.single_observation_space.shape[1:]  # RND sees the newest frame only
    obs_rms = RunningMeanStd(frame_shape, device=device)
    reward_rms = RunningMeanStd((), device=device)
    reward_filter = RewardForwardFilter(args.int_gamma, args.num_envs, device=device)

    # Observation statistics from random play. Like everywhere else, the RND networks' inputs are the next frames
    # of steps that are not reset steps, so those are the frames the statistics describe.
    init_steps = args.num_iterations_obs_norm_init * args.num_steps
    print(
        f"initialising the observation statistics with {init_steps * args.num_envs} random-action steps "
        "(not counted in global_step)",
        flush=True,
    )
    envs.reset()
    next_done = np.zeros(args.num_envs, dtype=bool)
    for _ in range(init_steps):
        next_obs, _, termination, truncation, _ = envs.step(np.random.randint(0, n_actions, size=args.num_envs))
        obs_rms.update(torch.as_tensor(next_obs[~next_done, -1:], device=device))
        next_done = termination | truncation

    # frames stay uint8 in the rollout buffer (4x smaller); the agent scales them by 1/255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    next_frames = torch.zeros((args.num_steps, args.num_envs) + frame_shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
    ext_values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    int_values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    game_returns = np.zeros(args.num_envs)  # the game score so far (info["reward"], unclipped) of each env
    # training starts from fresh games, so that logged scores and videos hold no random play
    next_obs, _ = envs.reset()
    next_obs = torch.as_tensor(next_obs, device=device)
    prev_done = torch.zeros(args.num_envs, device=device)
    recorder = GameRecorder(envs, f"videos/{run_name}") if args.capture_video else None

    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():
                action, logprob, _, ext_value, int_value = agent.get_action_and_value(next_obs)
            ext_values[step] = ext_value
            int_values[step] = int_value
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, device=device)
            next_frames[step] = next_obs[:, -1:]

            # a game ends at game over or at the time limit; a lost life alone (--episodic-life) does not end it
            game_returns += infos["reward"]
            game_over = (infos["terminated"] != 0) | truncation
            for i in np.nonzero(game_over)[0]:
                recent_returns.append(float(game_returns[i]))
                writer.add_scalar("charts/episodic_return", game_returns[i], global_step)
                writer.add_scalar("charts/episodic_length", infos["elapsed_step"][i], global_step)
                game_returns[i] = 0.0
            if recorder is not None:
                recorder.step(bool(game_over[0]))

        valid = reset_step_mask(dones, prev_done)
        prev_done = dones[-1].clone()
        with torch.no_grad():
            # novelty of each step's next frame under the statistics and predictor the rollout was collected with
            flat_frames = next_frames.reshape((-1,) + frame_shape)
            int_rewards = torch.cat(
                [
                    rnd_model.intrinsic_reward(normalize_frames(flat_frames[start : start + args.minibatch_size], obs_rms))
                    for start in range(0, args.batch_size, args.minibatch_size)
                ]
            ).view(args.num_steps, args.num_envs)
            # reset steps' rewards (the novelty of a first frame no action led to) enter neither the scale nor the returns
            int_returns_so_far = torch.stack([reward_filter.update(int_rewards[t], valid[t]) for t in range(args.num_steps)])
            reward_rms.update(int_returns_so_far[valid.bool()])
            int_rewards = int_rewards / torch.sqrt(reward_rms.var + 1e-8).float()

            next_ext_value, next_int_value = agent.get_value(next_obs)
            ext_advantages, ext_returns = compute_gae(
                rewards, ext_values, dones, terminations, next_ext_value, args.gamma, args.gae_lambda
            )
            int_advantages, int_returns = compute_intrinsic_gae(
                int_rewards, int_values, valid, next_int_value, args.int_gamma, args.gae_lambda
            )
        obs_rms.update(next_frames[valid.bool()])

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_next_frames = next_frames.reshape((-1,) + frame_shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = (args.ext_coef * ext_advantages + args.int_coef * int_advantages).reshape(-1)
        b_ext_returns = ext_returns.reshape(-1)
        b_int_returns = int_returns.reshape(-1)
        b_ext_values = ext_values.reshape(-1)
        b_valid = valid.reshape(-1)

        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]
                mb_valid = b_valid[mb_inds]

                fwd_loss = rnd_model.predictor_loss(normalize_frames(b_next_frames[mb_inds], obs_rms))
                # the predictor learns from a random part of the minibatch, so that it does not outpace the policy
                fwd_mask = mb_valid * (torch.rand(len(mb_inds), device=device) < args.update_proportion)
                fwd_loss = masked_mean(fwd_loss, fwd_mask)

                _, newlogprob, entropy, new_ext_value, new_int_value = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = masked_mean(-logratio, mb_valid)
                    approx_kl = masked_mean((ratio - 1) - logratio, mb_valid)
                    clipfracs.append(masked_mean(((ratio - 1.0).abs() > args.clip_coef).float(), mb_valid))

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = normalize_advantages(mb_advantages, mb_valid)

                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = masked_mean(torch.max(pg_loss1, pg_loss2), mb_valid)

                if args.clip_vloss:
                    ext_v_loss_unclipped = (new_ext_value - b_ext_returns[mb_inds]) ** 2
                    ext_v_clipped = b_ext_values[mb_inds] + torch.clamp(
                        new_ext_value - b_ext_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    ext_v_loss_clipped = (ext_v_clipped - b_ext_returns[mb_inds]) ** 2
                    ext_v_loss = 0.5 * masked_mean(torch.max(ext_v_loss_unclipped, ext_v_loss_clipped), mb_valid)
                else:
                    ext_v_loss = 0.5 * masked_mean((new_ext_value - b_ext_returns[mb_inds]) ** 2, mb_valid)
                int_v_loss = 0.5 * masked_mean((new_int_value - b_int_returns[mb_inds]) ** 2, mb_valid)
                v_loss = ext_v_loss + int_v_loss

                entropy_loss = masked_mean(entropy, mb_valid)
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef + fwd_loss

                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(combined_parameters, args.max_grad_norm)
                # one sync per minibatch: stop before a non-finite loss or gradient reaches the weights
                if not torch.isfinite(loss + grad_norm):
                    script = os.path.basename(__file__)
                    print(f"{script}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
                    writer.close()
                    envs.close()
                    sys.exit(1)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/ext_value_loss", ext_v_loss.item(), global_step)
        writer.add_scalar("losses/int_value_loss", int_v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_variance(ext_values, ext_returns, valid), global_step)
        writer.add_scalar("losses/int_explained_variance", explained_variance(int_values, int_returns, valid), global_step)
        writer.add_scalar("losses/fwd_loss", fwd_loss.item(), global_step)
        # the intrinsic reward the agent was given (normalised) and the scale it was divided by
        writer.add_scalar("charts/curiosity_reward", masked_mean(int_rewards, valid).item(), global_step)
        writer.add_scalar("charts/curiosity_reward_scale", torch.sqrt(reward_rms.var).item(), global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 10 or iteration == args.num_iterations:
            last_print = time.time()
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            print(f"global_step={global_step}, episodic_return(last {len(recent_returns)})={recent}, SPS={sps}", flush=True)
        upload_new_videos(f"videos/{run_name}")
    envs.close()

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        # playing needs only the agent; the RND networks and statistics are kept to compute the intrinsic rewards.
        # CPU copies, so that a machine without CUDA loads the file as it is
        states = {"model": agent, "rnd_model": rnd_model, "obs_rms": obs_rms, "reward_rms": reward_rms}
        checkpoint = {key: {k: v.cpu() for k, v in part.state_dict().items()} for key, part in states.items()}
        torch.save(checkpoint | {"args": vars(args)}, model_path)
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
