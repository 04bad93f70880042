# Proximal Policy Optimization (PPO) for Atari games through ale-py, with a recurrent agent: the Nature CNN
# sees one frame at a time and an LSTM (Hochreiter & Schmidhuber 1997, "Long Short-Term Memory") is its memory.
# Papers: Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (arXiv:1707.06347), whose Atari
# setting this follows (clip 0.1, 8 envs x 128 steps) with CleanRL's 4 epochs x 4 minibatches; GAE, Schulman
# et al. 2016 (arXiv:1506.02438); the preprocessing of Mnih et al. 2015 (Nature, "Human-level control through
# deep reinforcement learning"), but without the 4-frame stack, and Machado et al. 2018 (JAIR, "Revisiting
# the Arcade Learning Environment") for the v5 ids. Recurrent minibatches as in OpenAI Baselines' PPO2:
# each holds whole env sequences, replayed through the LSTM from the state the rollout started with.
# Defaults are CleanRL's published ones for ppo_atari_lstm.py.
# The LSTM state is per env and per episode, where a lost life ends the agent's episode (EpisodicLifeEnv).
# The vector env autoresets in SAME_STEP mode: the observation returned on a done step is already the next
# episode's first one (the true last one is in `info["final_obs"]`). So the state is zeroed right before
# that observation is processed, both while acting and in the update's replay, and every step is a real
# one: there is no ignored reset step to mask (the envpool variants, whose autoreset is NEXT_STEP, have one).
# Deliberate differences from the paper's code: an episode cut by a time limit bootstraps from the value of
# its true final observation, computed with the state of the episode it ends; the logged episodic return is
# the game score (recorded before life-loss and reward-clipping wrappers); `ALE/*-v5` ids are made with
# frameskip=1 so frames are skipped once (by MaxAndSkip), keeping v5's sticky actions (probability 0.25).
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
    total_timesteps: int = 10000000
    """total environment steps of the experiment"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 8
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches, each of whole env sequences (it must divide --num-envs)"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles advantages normalization"""
    clip_coef: float = 0.1
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
    max_episode_steps: int = 27000
    """a game is truncated after this many agent steps of 4 frames, its no-op start included (27000: ALE's own limit)"""


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


def make_atari(env_id, max_episode_steps, render_mode=None):
    # v5 (and plain v4) ids skip frames inside ALE; here frames are skipped once, by MaxAndSkip. ALE itself
    # truncates the game, so the statistics wrapper above it sees the truncation.
    return gym.make(env_id, frameskip=1, max_num_frames_per_episode=4 * max_episode_steps, render_mode=render_mode)


def make_env(env_id, idx, capture_video, run_name, max_episode_steps):
    def thunk():
        if capture_video and idx == 0:
            env = make_atari(env_id, max_episode_steps, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = make_atari(env_id, max_episode_steps)
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
        # one frame, as a (1, 84, 84) channel: the LSTM, not a frame stack, remembers the past
        env = gym.wrappers.FrameStackObservation(env, 1)
        return env

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name, max_episode_steps):
    # SAME_STEP autoreset: a finished sub-env is reset inside the same `step` call, and its true last
    # observation comes back in `info["final_obs"]`, so every stored transition is a real one.
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name, max_episode_steps) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def episode_starts(dones, last_done):
    """Which observations of a rollout are the first of an episode, under SAME_STEP autoreset.

    `dones` (T, N): 1 where env n's episode ended at step t (terminated, a lost life included, or truncated);
    `last_done` (N,): the same flag for the step just before the rollout (1 before the very first
    observation). The observation returned on a done step already belongs to the next episode, so obs[t]
    starts an episode exactly when step t - 1 was done. Returns a (T, N) float tensor of 0s and 1s.
    """
    return torch.cat([last_done.unsqueeze(0), dones[:-1]]).float()


def unroll_lstm(lstm, features, lstm_state, starts):
    """Runs `lstm` over T steps of N env sequences, one step at a time, zeroing env n's state just before
    a step that starts a new episode.

    `features` (T, N, lstm.input_size); `lstm_state` a pair (h, c), each (num_layers, N, hidden_size), the
    state before step 0; `starts` (T, N), 1 where the observation of step t is the first of an episode.
    The reset replaces the state (not a multiplication by 0), so nothing of the old episode, not even a
    non-finite value, reaches the new one. Returns (outputs (T, N, hidden_size), state after step T - 1).
    """
    h, c = lstm_state
    outputs = []
    for feature, start in zip(features, starts):
        reset = start.bool().view(1, -1, 1)
        output, (h, c) = lstm(feature.unsqueeze(0), (h.masked_fill(reset, 0.0), c.masked_fill(reset, 0.0)))
        outputs.append(output[0])
    return torch.stack(outputs), (h, c)


class Agent(nn.Module):
    """Nature CNN on one frame -> 512 -> LSTM(512 -> 128) -> actor and critic heads.

    Its methods take sequences: observations (T, N, 1, 84, 84) uint8, an LSTM state (h, c) each
    (1, N, 128) from before step 0, and episode starts (T, N); acting is the case T = 1.
    """

    def __init__(self, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(1, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.lstm = nn.LSTM(512, 128)
        for name, param in self.lstm.named_parameters():
            if name.startswith("bias"):
                nn.init.constant_(param, 0.0)
            else:
                nn.init.orthogonal_(param, 1.0)
        self.actor = layer_init(nn.Linear(128, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(128, 1), std=1)

    def initial_state(self, num_envs):
        """The zero LSTM state (h, c) of `num_envs` envs."""
        zeros = torch.zeros(self.lstm.num_layers, num_envs, self.lstm.hidden_size, device=self.critic.weight.device)
        return zeros, zeros.clone()

    def get_states(self, x, lstm_state, starts):
        """LSTM outputs (T, N, 128) of the observation sequences `x`, and the state after the last step."""
        num_steps, num_envs = starts.shape
        features = self.network(x.reshape((num_steps * num_envs,) + x.shape[2:]) / 255.0)
        return unroll_lstm(self.lstm, features.view(num_steps, num_envs, -1), lstm_state, starts)

    def get_value(self, x, lstm_state, starts):
        hidden, _ = self.get_states(x, lstm_state, starts)
        return self.critic(hidden).squeeze(-1)

    def get_action_and_value(self, x, lstm_state, starts, action=None):
        hidden, lstm_state = self.get_states(x, lstm_state, starts)
        logits = self.actor(hidden)
        # argument checks off: a non-finite loss is caught in the update anyway
        probs = Categorical(logits=logits, validate_args=False)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden).squeeze(-1), lstm_state


def compute_gae(rewards, values, dones, terminations, final_values, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns for a rollout of T steps from N envs.

    All inputs are (T, N) tensors except `next_value` (N,), the value of the observation after the
    last step. `dones[t]` marks an episode that ended at step t (terminated or truncated),
    `terminations[t]` the ones that ended in a terminal state, and `final_values[t]` holds V of the
    true final observation wherever `dones[t]` is set. A terminal state bootstraps nothing; a
    truncated episode bootstraps from its final observation, never from the next episode's start.
    Returns (advantages, returns), both (T, N).
    """
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        nextvalues = next_value if t == num_steps - 1 else values[t + 1]
        nextvalues = torch.where(dones[t].bool(), final_values[t], nextvalues)
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


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
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "max_episode_steps"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    if 4 * args.max_episode_steps >= 2**31:  # ALE counts the frames of a game in an int
        return f"--max-episode-steps must be below 2**29 (its frames are counted in 32 bits), got {args.max_episode_steps}"
    if args.num_envs % args.num_minibatches != 0:
        return (
            f"--num-envs {args.num_envs} does not split into --num-minibatches {args.num_minibatches} "
            f"(a minibatch holds whole env sequences for the LSTM); pick a divisor of {args.num_envs}"
        )
    batch_size = args.num_envs * args.num_steps
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
- name: PPO-LSTM
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

# PPO-LSTM agent playing {args.env_id}

A PPO-LSTM agent (Proximal Policy Optimization with an LSTM memory) trained on `{args.env_id}` by CleanRL's single-file script
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
    """Runs the saved agent for `eval_episodes` episodes; returns their episodic returns."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval", saved["max_episode_steps"])
    agent = Agent(envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    agent.eval()
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    lstm_state = agent.initial_state(1)
    # as in training: the state is zeroed before the first observation of every episode, a lost life included
    done = torch.ones(1, device=device)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            obs = torch.as_tensor(obs, device=device).unsqueeze(0)
            actions, _, _, _, lstm_state = agent.get_action_and_value(obs, lstm_state, done.unsqueeze(0))
        obs, _, termination, truncation, infos = envs.step(actions[0].cpu().numpy())
        done = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    import tyro

    args = tyro.cli(Args)
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
        # W&B gets each finished video once, explicitly (gym's RecordVideo has no W&B hook).
        if args.track and os.path.isdir(video_dir):
            for name in sorted(os.listdir(video_dir)):
                path = os.path.join(video_dir, name)  # the eval videos reuse the training videos' names
                if name.endswith(".mp4") and path not in uploaded_videos:
                    uploaded_videos.add(path)
                    wandb.log({"videos": wandb.Video(path, format="mp4")})

    envs = make_vector_env(args.env_id, args.num_envs, args.capture_video, run_name, args.max_episode_steps)
    envs.action_space.seed(args.seed)
    game = envs.envs[0].unwrapped
    print(
        f"{args.env_id}: frame skip 4 (MaxAndSkip), sticky-action probability "
        f"{game.ale.getFloat('repeat_action_probability'):g}, FIRE on reset: {'FIRE' in game.get_action_meanings()}, "
        f"time limit {args.max_episode_steps} agent steps; the LSTM state is reset at every episode start and lost life"
    )

    agent = Agent(envs.single_action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # frames stay uint8 in the rollout buffer (4x smaller); the agent scales them by 1/255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    final_values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs, device=device)
    # `next_done` says whether the step that returned `next_obs` ended an episode, i.e. whether `next_obs`
    # starts one; the first observations do
    next_done = torch.ones(args.num_envs, device=device)
    next_lstm_state = agent.initial_state(args.num_envs)

    for iteration in range(1, args.num_iterations + 1):
        # the update replays each env's sequence from here
        initial_lstm_state = (next_lstm_state[0].clone(), next_lstm_state[1].clone())
        initial_done = next_done.clone()
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():
                action, logprob, _, value, next_lstm_state = agent.get_action_and_value(
                    next_obs.unsqueeze(0), next_lstm_state, next_done.unsqueeze(0)
                )
            values[step] = value[0]
            actions[step] = action[0]
            logprobs[step] = logprob[0]

            next_obs, reward, termination, truncation, infos = envs.step(action[0].cpu().numpy())
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            next_done = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            dones[step] = next_done
            next_obs = torch.as_tensor(next_obs, device=device)

            if "final_info" in infos:
                truncated = np.nonzero(truncation & ~termination)[0]
                if len(truncated) > 0:
                    # the final observation continues the episode it ends: its value uses that episode's
                    # state (after this step), and the state it yields is dropped as the next episode starts
                    final_obs = torch.as_tensor(np.stack(infos["final_obs"][truncated]), device=device)
                    state = (next_lstm_state[0][:, truncated], next_lstm_state[1][:, truncated])
                    with torch.no_grad():
                        final_values[step, truncated] = agent.get_value(
                            final_obs.unsqueeze(0), state, torch.zeros((1, len(truncated)), device=device)
                        )[0]
                if "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                        recent_returns.append(float(episode["r"][i]))
                        writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)

        with torch.no_grad():
            next_value = agent.get_value(next_obs.unsqueeze(0), next_lstm_state, next_done.unsqueeze(0))[0]
            advantages, returns = compute_gae(
                rewards, values, dones, terminations, final_values, next_value, args.gamma, args.gae_lambda
            )
        starts = episode_starts(dones, initial_done)

        # minibatches of whole env sequences (T = num_steps each), each replayed from its initial state
        envs_per_minibatch = args.num_envs // args.num_minibatches
        env_inds = np.arange(args.num_envs)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(env_inds)
            for start in range(0, args.num_envs, envs_per_minibatch):
                mb_envs = torch.as_tensor(env_inds[start : start + envs_per_minibatch], device=device)

                _, newlogprob, entropy, newvalue, _ = agent.get_action_and_value(
                    obs[:, mb_envs],
                    (initial_lstm_state[0][:, mb_envs], initial_lstm_state[1][:, mb_envs]),
                    starts[:, mb_envs],
                    actions[:, mb_envs],
                )
                logratio = newlogprob - logprobs[:, mb_envs]
                ratio = logratio.exp()

                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                mb_advantages = advantages[:, mb_envs]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                mb_returns, mb_values = returns[:, mb_envs], values[:, mb_envs]
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - mb_returns) ** 2
                    v_clipped = mb_values + torch.clamp(newvalue - mb_values, -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - mb_returns) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - mb_returns) ** 2).mean()

                entropy_loss = entropy.mean()
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

        y_pred, y_true = values.cpu().numpy(), returns.cpu().numpy()
        var_y = np.var(y_true)
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
    envs.close()  # RecordVideo writes the video of an episode still running when it closes
    upload_new_videos(f"videos/{run_name}")

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save({"model": agent.state_dict(), "args": vars(args)}, model_path)
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
