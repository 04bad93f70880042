# Proximal Policy Optimization (PPO) for Procgen games through envpool, with the IMPALA CNN agent.
# Papers: Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (arXiv:1707.06347); GAE, Schulman
# et al. 2016 (arXiv:1506.02438); Cobbe et al. 2020, "Leveraging Procedural Generation to Benchmark
# Reinforcement Learning" (ICML), whose Procgen PPO setting this follows (64 envs x 256 steps, 3 epochs x 8
# minibatches, γ 0.999, λ 0.95, lr 5e-4, clip 0.2, entropy 0.01, rewards scaled by a running std of the
# discounted return); Espeholt et al. 2018, "IMPALA" (ICML) for the network (CleanRL's 16-32-32 channels and
# a 256-unit layer). Defaults are CleanRL's published ones (no learning-rate annealing, Adam ε 1e-5, the
# scaled rewards clipped to ±10).
# Deliberate differences from CleanRL's published ppo_procgen.py: the games come from envpool
# (`StarpilotEasy-v0` is procgen's starpilot in easy mode with unlimited levels) instead of the procgen
# package, which has no wheel for Python 3.11 with NumPy 2, and their levels follow --seed; a game cut by its
# time limit bootstraps from the value of its true final observation (upstream treats it as terminal); the
# step after a game ends is envpool's reset step (its action is ignored), which no loss or advantage
# normalisation sees; the logged episodic return is the raw game score; the reward scaling is gymnasium
# 1.x's NormalizeReward (its discounted-return accumulator skips the reset steps and restarts only at a
# termination); `--max-episode-steps` can shorten a game's time limit.
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

    env_id: str = "StarpilotEasy-v0"
    """the id of the envpool Procgen game (e.g. BigfishEasy-v0, BossfightEasy-v0, StarpilotHard-v0)"""
    total_timesteps: int = 25000000
    """total environment steps of the experiment"""
    max_episode_steps: Optional[int] = None
    """the time limit of a game in agent steps (None: the game's own, e.g. 1000 for Starpilot; it cannot be raised)"""
    learning_rate: float = 5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 64
    """the number of parallel game environments"""
    num_steps: int = 256
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = False
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.999
    """the discount factor gamma (also of the reward scaling's discounted return)"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 8
    """the number of mini-batches"""
    update_epochs: int = 3
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """toggles the clipped value loss (from OpenAI Baselines' PPO2; the PPO paper has none)"""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: Optional[float] = None
    """the target KL divergence threshold (stops the epochs of an update early)"""


class ProcgenTimeLimit(gym.vector.VectorWrapper):
    """An envpool Procgen vector env with a time limit of `max_episode_steps` agent steps, which puts each
    step's raw game reward in `info["reward"]` (wrappers above may scale the reward they return).

    envpool's own `max_episode_steps` does not stop a Procgen game: only the game's built-in limit does
    (1000 steps for Starpilot, 6000 for Bigfish, ...), and envpool calls a game truncated when it ends at or
    after its `max_episode_steps`. So the games are made with their built-in limit and a shorter one is
    applied here in envpool's NEXT_STEP style: the step that reaches it returns truncated=True with the
    game's true final observation, and the next step is a reset step (the env restarts, ignoring that
    step's action, and returns a new game's first observation with reward 0, not done).
    """

    def __init__(self, env, max_episode_steps):
        super().__init__(env)
        self.max_episode_steps = max_episode_steps
        self.cut = np.zeros(self.num_envs, dtype=bool)

    def reset(self, **kwargs):
        self.cut[:] = False
        return self.env.reset(**kwargs)

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        restart = np.nonzero(self.cut)[0]
        if len(restart) > 0:
            # envpool played one more step of each game cut at the last step; start new games instead
            obs[restart], first_info = self.env.reset(env_id=restart)
            for key, value in first_info.items():  # elapsed_step 0, the new level's seed, ...
                if isinstance(value, np.ndarray) and key != "env_id":
                    info[key][restart] = value
            reward[restart] = 0.0
            terminated[restart] = False
            truncated[restart] = False
        self.cut = (info["elapsed_step"] >= self.max_episode_steps) & ~terminated & ~truncated
        info["reward"] = reward.copy()
        return obs, reward, terminated, truncated | self.cut, info


def game_time_limit(env_id):
    """The built-in time limit (agent steps) of an envpool Procgen game."""
    return int(envpool.make_spec(env_id).config.max_episode_steps)


def make_env(env_id, num_envs, seed, max_episode_steps=None, capture_video=False):
    """`num_envs` copies of an envpool Procgen game (sub-env i seeded with `seed + i`) under ProcgenTimeLimit.
    With `capture_video`, `render()` returns sub-env 0's frame, upscaled to 256x256 from the 64x64 observation."""
    video = {"render_mode": "rgb_array", "render_width": 256, "render_height": 256} if capture_video else {}
    envs = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=seed, **video)
    return ProcgenTimeLimit(envs, max_episode_steps or game_time_limit(env_id))


class GameVideoRecorder:
    """Films sub-env 0 of an env made by `make_env(..., capture_video=True)`: the games that gymnasium's
    capped_cubic_video_schedule picks (0, 1, 8, 27, ..., 1000, 2000, ...), each from its first observation to
    its final one, written to `video_folder` as rl-video-episode-{game}.mp4 when the game ends.
    Make it right after `envs.reset()` and call `step` after every `envs.step`."""

    def __init__(self, envs, video_folder, fps=15):
        from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video

        self.envs, self.video_folder, self.fps = envs, video_folder, fps
        self.schedule, self.save_video = capped_cubic_video_schedule, save_video
        self.game = 0
        self.frames = [envs.render()[0]] if self.schedule(0) else []

    def step(self, game_over):
        """Records the frame of this step if the current game is filmed; `game_over`: sub-env 0's game ended here."""
        if self.schedule(self.game):
            self.frames.append(self.envs.render()[0])
        if game_over:
            if self.frames:
                self.save_video(self.frames, self.video_folder, episode_index=self.game, fps=self.fps)
            self.frames = []
            self.game += 1  # the next step is the reset step, whose observation opens the next game


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


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """The IMPALA CNN (stages of 16, 32 and 32 channels, then 256 units) shared by a policy and a value head.
    The trunk keeps PyTorch's default initialisation; the heads are orthogonal with scales 0.01 and 1."""

    def __init__(self, obs_shape, n_actions):
        super().__init__()
        shape = obs_shape
        layers = []
        for out_channels in (16, 32, 32):
            stage = ConvSequence(shape, out_channels)
            shape = stage.get_output_shape()
            layers.append(stage)
        layers += [nn.Flatten(), nn.ReLU(), nn.Linear(int(np.prod(shape)), 256), nn.ReLU()]
        self.network = nn.Sequential(*layers)
        self.actor = layer_init(nn.Linear(256, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(256, 1), std=1)

    def get_value(self, x):
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        logits = self.actor(hidden)
        # argument checks off: a non-finite loss is caught in the update anyway
        probs = Categorical(logits=logits, validate_args=False)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def reset_step_mask(dones, last_done):
    """Which steps of a rollout are trained on: (T, N) of 1.0, and 0.0 at envpool's reset steps.

    `dones` (T, N) marks the steps where a game ended; `last_done` (N,) is the previous rollout's last row
    of `dones` (zeros before the first rollout). The step after a done is a reset step: its action was
    ignored, its observation is the ended game's final one, so valid[t] = 1 - dones[t - 1].
    """
    return 1.0 - torch.cat([last_done[None], dones[:-1]])


def compute_gae(rewards, values, dones, terminations, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns for a rollout of T steps from N envpool (NEXT_STEP) envs.

    All inputs are (T, N) tensors except `next_value` (N,), the value of the observation after the last
    step. `dones[t]` marks a game that ended at step t (terminated or truncated), `terminations[t]` the
    ones that ended in a terminal state. The observation after a done step is the game's true final one,
    so values[t + 1] (or `next_value`) is the bootstrap of a truncated game, and a terminal state
    bootstraps nothing: δ_t = r_t + γ (1 - terminations[t]) V(obs[t + 1]) - V(obs[t]). The λ-chain is cut at
    every done, so the reset step after it (see `reset_step_mask`) never flows into the ended game.
    Returns (advantages, returns), both (T, N); entries at reset steps are meaningless and must be masked.
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


def masked_mean(x, valid):
    """The mean of `x` over the entries where `valid` (same shape, 0.0 or 1.0) is 1; 0 when none is."""
    return (x * valid).sum() / valid.sum().clamp(min=1.0)


def normalize_advantages(advantages, valid):
    """(A - mean) / (std + 1e-8) with the mean and the (unbiased) std taken over the valid entries only.
    `advantages` and `valid` are (B,); invalid entries come out meaningless and must stay masked."""
    count = valid.sum()
    mean = (advantages * valid).sum() / count.clamp(min=1.0)
    var = (((advantages - mean) ** 2) * valid).sum() / (count - 1.0).clamp(min=1.0)
    return (advantages - mean) / (var.sqrt() + 1e-8)


def env_error(env_id):
    """Why this script cannot run `env_id`, as one line, or None when it is an envpool Procgen game."""
    script = os.path.basename(__file__)
    try:
        spec = envpool.make_spec(env_id)
    except KeyError:
        import difflib

        pattern = r"[A-Z][a-z]+(Easy|Hard|Extreme|Memory|Exploration)-v0"
        procgen_ids = [name for name in envpool.list_all_envs() if re.fullmatch(pattern, name)]
        easy = f"{re.sub(r'-v[0-9]+$', '', env_id).capitalize()}Easy-v0"  # procgen's own names, e.g. starpilot
        close = [easy] if easy in procgen_ids else difflib.get_close_matches(env_id, procgen_ids, n=1)
        hint = f"; did you mean {close[0]}?" if close else ", e.g. StarpilotEasy-v0 or BigfishHard-v0"
        return f"{env_id} is not an envpool env id; {script} needs an envpool Procgen game{hint}"
    except Exception as e:  # a module envpool cannot load (Procgen needs the Qt5 runtime)
        reason = (str(e).splitlines() or [""])[0] or type(e).__name__
        return f"cannot load envpool's {env_id} ({reason})"
    if type(spec).__name__ != "ProcgenEnvSpec":
        return f"{env_id} is not an envpool Procgen game; {script} needs one, e.g. StarpilotEasy-v0 or BigfishHard-v0"
    return None


def validation_error(args):
    """The first problem with the command-line values as one line, or None when all is well."""
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    if not 0 <= args.seed <= 2**31 - args.num_envs:
        return f"--seed must be in [0, 2**31 - {args.num_envs}] (envpool seeds sub-env i with int32 seed + i), got {args.seed}"
    if "/" in args.exp_name or "__" in args.exp_name or not args.exp_name:
        return f"--exp-name {args.exp_name!r} must be non-empty, without '/' or '__' (they split run names)"
    run_name_bytes = len(f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}".encode())
    if run_name_bytes > 255:
        return f"the run name would be {run_name_bytes} bytes, more than a folder name can hold (255); shorten --exp-name"
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
    for name in ("gamma", "gae_lambda"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    for name in ("learning_rate", "clip_coef", "max_grad_norm"):
        if not 0.0 < getattr(args, name) <= float32_max:
            return f"--{name.replace('_', '-')} must be positive and finite in float32, got {getattr(args, name)}"
    # Adam's first step divides the learning rate by 1 - β1 = 0.1, in float32
    if args.learning_rate > float32_max / 10:
        return f"--learning-rate must be positive and at most {float32_max / 10:.1e} (Adam), got {args.learning_rate}"
    for name in ("ent_coef", "vf_coef"):
        if not 0.0 <= getattr(args, name) <= float32_max:
            return f"--{name.replace('_', '-')} must be non-negative and finite in float32, got {getattr(args, name)}"
    if args.target_kl is not None and not 0.0 < args.target_kl <= float32_max:
        return f"--target-kl must be positive and finite in float32, got {args.target_kl}"
    error = env_error(args.env_id)
    if error is not None:
        return error
    limit = game_time_limit(args.env_id)
    if args.max_episode_steps is not None and not 1 <= args.max_episode_steps <= limit:
        return (
            f"--max-episode-steps must be in [1, {limit}] ({args.env_id} ends every game after {limit} steps), "
            f"got {args.max_episode_steps}"
        )
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
        np.__version__,
        envpool.__version__,
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
- name: PPO
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

# PPO agent playing {args.env_id}

A PPO (Proximal Policy Optimization) agent with the IMPALA CNN trained on the envpool Procgen game
`{args.env_id}` by CleanRL's single-file script [`{script}`]({script}), which is included in this repository
with the checkpoint `{args.exp_name}.cleanrl_model` and the TensorBoard logs of the run.

## Evaluation

Episodic return (raw game score) over {len(episodic_returns)} evaluation episodes: **{mean:.2f} ± {std:.2f}** (mean ± std).
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

| python | torch | gymnasium | numpy | envpool | huggingface_hub | {script} sha256 |
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
    """Runs the saved agent for `eval_episodes` games; returns their raw game scores."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    # other levels than training's: envpool seeds sub-env 0 with this int32 seed
    envs = make_env(saved["env_id"], 1, (saved["seed"] + 100_000) % 2**31, saved["max_episode_steps"], capture_video)
    agent = Agent(envs.single_observation_space.shape, envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    agent.eval()
    obs, _ = envs.reset()
    recorder = GameVideoRecorder(envs, f"videos/{run_name}-eval") if capture_video else None
    episodic_returns, score = [], 0.0
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(torch.as_tensor(obs, device=device))
        obs, _, terminated, truncated, infos = envs.step(actions.cpu().numpy())
        score += float(infos["reward"][0])
        game_over = bool(terminated[0] or truncated[0])
        if recorder is not None:
            recorder.step(game_over)
        if game_over:
            episodic_returns.append(score)
            score = 0.0
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    import tyro

    args = tyro.cli(Args)
    error = validation_error(args)
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
        # W&B gets each finished video once, explicitly (the videos are written by this script, not a wrapper)
        if args.track and os.path.isdir(video_dir):
            for name in sorted(os.listdir(video_dir)):
                path = os.path.join(video_dir, name)  # the eval videos reuse the training videos' names
                if name.endswith(".mp4") and path not in uploaded_videos:
                    uploaded_videos.add(path)
                    wandb.log({"videos": wandb.Video(path, format="mp4")})

    # envpool seeds the levels when the env is made (sub-env i gets seed + i); reset(seed=...) is ignored
    envs = make_env(args.env_id, args.num_envs, args.seed, args.max_episode_steps, args.capture_video)
    envs = gym.wrappers.vector.NormalizeReward(envs, gamma=args.gamma)
    envs = gym.wrappers.vector.ClipReward(envs, min_reward=-10.0, max_reward=10.0)
    envs.action_space.seed(args.seed)
    limit = game_time_limit(args.env_id)
    print(
        f"{args.env_id}: procgen's {envpool.make_spec(args.env_id).config.env_name} on unlimited levels, no frame skip, "
        f"no sticky actions; time limit {args.max_episode_steps or limit} steps (the game's own: {limit}); for "
        f"learning, rewards are divided by a running std of the discounted return (γ {args.gamma}) and clipped to ±10"
    )

    agent = Agent(envs.single_observation_space.shape, envs.single_action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # frames stay uint8 in the rollout buffer (4x smaller); the agent scales them by 1/255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    episode_scores = np.zeros(args.num_envs)
    next_obs, _ = envs.reset()
    recorder = GameVideoRecorder(envs, f"videos/{run_name}") if args.capture_video else None
    next_obs = torch.as_tensor(next_obs, device=device)
    last_done = torch.zeros(args.num_envs, device=device)  # the previous rollout's last row of `dones`

    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
            done = termination | truncation
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            dones[step] = torch.as_tensor(done, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, device=device)

            episode_scores += infos["reward"]
            if recorder is not None:
                recorder.step(bool(done[0]))
            for i in np.nonzero(done)[0]:
                recent_returns.append(float(episode_scores[i]))
                writer.add_scalar("charts/episodic_return", episode_scores[i], global_step)
                writer.add_scalar("charts/episodic_length", infos["elapsed_step"][i], global_step)
                episode_scores[i] = 0.0

        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages, returns = compute_gae(rewards, values, dones, terminations, next_value, args.gamma, args.gae_lambda)
            valid = reset_step_mask(dones, last_done)
            last_done = dones[-1].clone()

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        b_valid = valid.reshape(-1)

        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]
                mb_valid = b_valid[mb_inds]  # reset steps count in no loss

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
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

                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * masked_mean(torch.max(v_loss_unclipped, v_loss_clipped), mb_valid)
                else:
                    v_loss = 0.5 * masked_mean((newvalue - b_returns[mb_inds]) ** 2, mb_valid)

                entropy_loss = masked_mean(entropy, mb_valid)
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
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

        trained = b_valid.bool().cpu().numpy()
        y_pred, y_true = b_values.cpu().numpy()[trained], b_returns.cpu().numpy()[trained]
        var_y = np.var(y_true) if len(y_true) > 0 else 0.0
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 10 or iteration == args.num_iterations:
            last_print = time.time()
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            print(f"global_step={global_step}, episodic_return(last {len(recent_returns)})={recent}, SPS={sps}", flush=True)
        upload_new_videos(f"videos/{run_name}")
    envs.close()

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        # CPU tensors: the checkpoint loads on a machine without CUDA
        torch.save({"model": {k: v.cpu() for k, v in agent.state_dict().items()}, "args": vars(args)}, model_path)
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
