# Proximal Policy Optimization (PPO) by self-play on PettingZoo's multi-player Atari games (default pong_v3), with
# SuperSuit's preprocessing and the Nature-CNN agent. One agent plays every player: each player of each game is a
# sub-env of the batch, and agent-indicator planes added to the observation tell the agent which player it is.
# Papers: Schulman et al. 2017, "Proximal Policy Optimization Algorithms" (arXiv:1707.06347), whose Atari setting
# this follows (clip 0.1, 128 steps) with CleanRL's 4 epochs x 4 minibatches; GAE, Schulman et al. 2016
# (arXiv:1506.02438); the preprocessing of Mnih et al. 2015 (Nature, "Human-level control through deep
# reinforcement learning"); the games from Terry et al. 2021, "PettingZoo: Gym for Multi-Agent Reinforcement
# Learning" (NeurIPS). Defaults are CleanRL's published ones (16 sub-envs = 8 two-player games, 20M steps).
# As in CleanRL's script and unlike ppo_atari.py: no noop starts, no life-loss or FIRE-on-reset wrappers (SuperSuit
# has none; players serve themselves), and no sticky actions (PettingZoo's Atari games set none).
# Deliberate differences from CleanRL's script: a game cut by the time limit (--max-cycles) bootstraps from the
# value of its true final observation; the logged returns are each player's game score (recorded before reward
# clipping); the indicator planes, which SuperSuit 3.11 fills with 255, are scaled by 1/255 with the frames, so the
# network sees 0/1 as in the published runs.
import hashlib
import importlib
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
from difflib import get_close_matches
from typing import Optional

import ale_py
import numpy as np
import pettingzoo
import supersuit as ss
import torch
import torch.nn as nn
import torch.optim as optim
from pettingzoo.atari.all_modules import atari_environments
from pettingzoo.utils.wrappers import BaseParallelWrapper
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

# PettingZoo's Atari games read the ROMs that ship inside ale-py (no AutoROM download)
ROMS = os.path.join(os.path.dirname(ale_py.__file__), "roms")
# games that can put a player out before the game ends (seen in random play): SuperSuit's vector env needs every
# player in every step of a game, so they cannot be played here
ELIMINATING = {"joust_v3", "mario_bros_v3", "maze_craze_v3", "warlords_v3", "wizard_of_wor_v3"}
GAMES = sorted(name.split("/")[1] for name in atari_environments if name.split("/")[1] not in ELIMINATING)
FRAME_SKIP = 4


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
    """whether to capture videos of the first game (check out `videos` folder)"""
    save_model: bool = False
    """whether to save the model into `runs/{run_name}` and evaluate it for 10 games against itself"""
    upload_model: bool = False
    """whether to push the saved model, its model card, videos, logs and this script to the Hugging Face Hub
    (needs --save-model and a token: `hf auth login` or HF_TOKEN; HF_ENDPOINT picks another Hub)"""
    hf_entity: str = ""
    """the user or org of the Hub repository `{hf_entity}/{env_id}-{exp_name}-seed{seed}` (default: the token's user)"""

    env_id: str = "pong_v3"
    """the PettingZoo Atari game, by its module name in `pettingzoo.atari` (pong_v3, surround_v2, tennis_v3, ...)"""
    total_timesteps: int = 20000000
    """total environment steps of the experiment (one per player per agent step)"""
    max_cycles: int = 100000
    """the time limit of a game in emulator frames, 4 per agent step (PettingZoo's `max_cycles`)"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 16
    """the number of parallel sub-envs: players x games (16 = 8 two-player games)"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
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


class RecordGameStatistics(BaseParallelWrapper):
    """Adds a finished game's statistics to every player's info on its last step:
    `info["episode"] = {"r": {player: score}, "l": agent steps}`. Placed before reward clipping, so the scores are
    the game's own."""

    def __init__(self, env):
        super().__init__(env)
        self.returns = {}
        self.length = 0

    def reset(self, seed=None, options=None):
        self.returns = dict.fromkeys(self.env.possible_agents, 0.0)
        self.length = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        for agent, reward in rewards.items():
            self.returns[agent] += float(reward)
        self.length += 1
        if all(terminations[agent] or truncations[agent] for agent in terminations):
            for agent in infos:
                infos[agent]["episode"] = {"r": dict(self.returns), "l": self.length}
        return observations, rewards, terminations, truncations, infos


class RecordGameVideo(BaseParallelWrapper):
    """Films the games that `capped_cubic_video_schedule` selects (0, 1, 8, 27, ..., 1000, 2000, ...), one rgb_array
    frame per agent step from the first observation to the final one, into `video_folder`; a game still running
    at `close` is written as far as it got."""

    def __init__(self, env, video_folder):
        super().__init__(env)
        from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video  # needs moviepy: only when filming

        self.schedule, self.save_video = capped_cubic_video_schedule, save_video
        self.video_folder = video_folder
        self.game = -1
        self.frames = None

    def reset(self, seed=None, options=None):
        result = self.env.reset(seed=seed, options=options)
        self.game += 1
        self.frames = [self.env.render()] if self.schedule(self.game) else None
        return result

    def step(self, actions):
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        if self.frames is not None:
            self.frames.append(self.env.render())
            if all(terminations[agent] or truncations[agent] for agent in terminations):
                self.write_video()
        return observations, rewards, terminations, truncations, infos

    def write_video(self):
        fps = self.env.metadata["render_fps"] / FRAME_SKIP
        self.save_video(self.frames, self.video_folder, episode_index=self.game, fps=fps)
        self.frames = None

    def close(self):
        if self.frames is not None and len(self.frames) > 1:
            self.write_video()
        self.env.close()


def make_game(env_id, max_cycles, render_mode=None):
    """The raw PettingZoo parallel env of the game `env_id`."""
    module = importlib.import_module(f"pettingzoo.atari.{env_id}")
    return module.parallel_env(max_cycles=max_cycles, render_mode=render_mode, auto_rom_install_path=ROMS)


def make_env(env_id, idx, capture_video, run_name, max_cycles):
    def thunk():
        film = capture_video and idx == 0
        env = make_game(env_id, max_cycles, render_mode="rgb_array" if film else None)
        env = ss.max_observation_v0(env, 2)
        env = ss.frame_skip_v0(env, FRAME_SKIP)
        # statistics of the raw game, before reward clipping; lengths count agent steps, as CleanRL publishes them
        env = RecordGameStatistics(env)
        if film:
            env = RecordGameVideo(env, f"videos/{run_name}")
        env = ss.clip_reward_v0(env, lower_bound=-1, upper_bound=1)
        env = ss.color_reduction_v0(env, mode="B")
        env = ss.resize_v1(env, x_size=84, y_size=84)
        env = ss.frame_stack_v1(env, 4)
        env = ss.agent_indicator_v0(env, type_only=False)
        # one sub-env per player; a finished game is reset inside the same `step` call (SB3 style): the returned
        # observations are the next game's first ones and the true final ones are in info["terminal_observation"]
        return ss.pettingzoo_env_to_vec_env_v1(env)

    return thunk


def make_vector_env(env_id, num_games, capture_video, run_name, max_cycles):
    # the games are made one by one (concat_vec_envs_v1 would clone one by pickling), so only game 0 is filmed;
    # the sub-envs of game g are players 0, 1, ... at indices g * players + 0, 1, ...
    return ss.vector.ConcatVecEnv([make_env(env_id, g, capture_video, run_name, max_cycles) for g in range(num_games)])


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, in_channels, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def hidden(self, x):
        # (B, 84, 84, 4 frames + 1 plane per player) uint8, channels last; the indicator planes are 0 or 255
        return self.network(x.permute(0, 3, 1, 2) / 255.0)

    def get_value(self, x):
        return self.critic(self.hidden(x))

    def get_action_and_value(self, x, action=None):
        hidden = self.hidden(x)
        logits = self.actor(hidden)
        # argument checks off: a non-finite loss is caught in the update anyway
        probs = Categorical(logits=logits, validate_args=False)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


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


def env_error(env_id):
    """Why this script cannot run `env_id`, as one line, or None when it is a PettingZoo Atari game it can play."""
    if env_id in GAMES:
        return None
    if env_id in ELIMINATING:
        return (
            f"{env_id} can put a player out before the game ends, and {os.path.basename(__file__)} plays through "
            f"SuperSuit's vector env, which needs every player until the end; use another game, e.g. pong_v3"
        )
    close = get_close_matches(env_id.lower(), GAMES, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return (
        f"{env_id!r} is not a PettingZoo Atari game; {os.path.basename(__file__)} takes a module name of "
        f"pettingzoo.atari, e.g. pong_v3 ({hint}playable here: {', '.join(GAMES)})"
    )


def players_error(args, players):
    """What stops `args.num_envs` sub-envs from holding whole games of `players` players, as one line, or None."""
    if args.num_envs % players != 0:
        return (
            f"--num-envs {args.num_envs} does not hold whole games: {args.env_id} has {players} players, "
            f"so use a multiple of {players}"
        )
    return None


def validation_error(args):
    """The first problem with the command-line values as one line, or None when all is well."""
    if not 0 <= args.seed < 2**32:
        return f"--seed must be in [0, 2**32 - 1], got {args.seed}"
    if "/" in args.exp_name or "__" in args.exp_name or not args.exp_name:
        return f"--exp-name {args.exp_name!r} must be non-empty, without '/' or '__' (they split run names)"
    error = env_error(args.env_id)
    if error is not None:
        return error
    run_name_bytes = len(f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}".encode())
    if run_name_bytes > 255:
        return f"the run name would be {run_name_bytes} bytes, more than a folder name can hold (255); shorten --exp-name"
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "max_cycles"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
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
        pettingzoo.__version__,
        ss.__version__,
        np.__version__,
        huggingface_hub.__version__,
    ]
    return f"""---
tags:
- {args.env_id}
- pettingzoo
- self-play
- multi-agent-reinforcement-learning
- deep-reinforcement-learning
- reinforcement-learning
- custom-implementation
library_name: cleanrl
model-index:
- name: PPO self-play
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

# PPO self-play agent playing {args.env_id}

A PPO (Proximal Policy Optimization) agent trained by self-play on PettingZoo's multi-player Atari game
`{args.env_id}`: one network plays every player, told which one by agent-indicator planes in its observation.
It was trained by CleanRL's single-file script [`{script}`]({script}), which is included in this repository with
the checkpoint `{args.exp_name}.cleanrl_model` and the TensorBoard logs of the run.

## Evaluation

The agent played {len(episodic_returns)} games against itself. The first player's score: **{mean:.2f} ± {std:.2f}**
(mean ± std). In self-play of a zero-sum game it tends to 0 however well the agent plays; the game lengths in the logs
(`charts/episodic_length`) say more about its skill.
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

| python | torch | pettingzoo | supersuit | numpy | huggingface_hub | {script} sha256 |
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
    """Plays the saved agent against itself (it controls every player) for `eval_episodes` games, with the
    checkpoint's game and time limit; returns the first player's episodic returns (its game scores)."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval", saved["max_cycles"])
    first_player = envs.vec_envs[0].par_env.possible_agents[0]
    agent = Agent(envs.observation_space.shape[-1], envs.action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    agent.eval()
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(torch.as_tensor(obs, device=device))
        obs, _, _, _, infos = envs.step(actions.cpu().numpy())
        if "episode" in infos[0]:
            episodic_returns.append(infos[0]["episode"]["r"][first_player])
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    import tyro

    args = tyro.cli(Args)
    # command-line values first, then the game (its ROM and its number of players)
    error = validation_error(args)
    if error is None:
        try:
            probe_game = make_game(args.env_id, args.max_cycles)
        except Exception as e:  # a missing ROM or module: this game cannot be made here
            error = f"cannot make {args.env_id!r}: {e}"
        else:
            players = len(probe_game.possible_agents)
            probe_game.close()
            error = players_error(args, players)
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
        # W&B gets each finished video once, explicitly (no W&B hook sees the videos written by RecordGameVideo)
        if args.track and os.path.isdir(video_dir):
            for name in sorted(os.listdir(video_dir)):
                path = os.path.join(video_dir, name)  # the eval videos reuse the training videos' names
                if name.endswith(".mp4") and path not in uploaded_videos:
                    uploaded_videos.add(path)
                    wandb.log({"videos": wandb.Video(path, format="mp4")})

    num_games = args.num_envs // players
    envs = make_vector_env(args.env_id, num_games, args.capture_video, run_name, args.max_cycles)
    envs.action_space.seed(args.seed)
    agent_names = envs.vec_envs[0].par_env.possible_agents
    game = envs.vec_envs[0].par_env.unwrapped
    print(
        f"{args.env_id}: {num_games} {'game' if num_games == 1 else 'games'} of {players} players "
        f"({', '.join(agent_names)}), one agent for all; "
        f"frame skip {FRAME_SKIP} (max over the last 2 frames), sticky-action probability "
        f"{game.ale.getFloat('repeat_action_probability'):g}, no noop starts; time limit {args.max_cycles} frames "
        f"({math.ceil(args.max_cycles / FRAME_SKIP)} agent steps)"
    )

    agent = Agent(envs.observation_space.shape[-1], envs.action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # frames stay uint8 in the rollout buffer (4x smaller); the agent scales them by 1/255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.action_space.shape, dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    final_values = torch.zeros((args.num_steps, args.num_envs)).to(device)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_lengths = deque(maxlen=20)
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs, device=device)

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
            termination, truncation = termination.astype(bool), truncation.astype(bool)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, device=device)

            if (termination | truncation).any():
                truncated = np.nonzero(truncation & ~termination)[0]
                if len(truncated) > 0:
                    final_obs = np.stack([infos[i]["terminal_observation"] for i in truncated])
                    with torch.no_grad():
                        final_obs = torch.as_tensor(final_obs, device=device)
                        final_values[step, truncated] = agent.get_value(final_obs).flatten()
                # every player of a finished game carries the game's statistics: read them from its first player
                for first in range(0, args.num_envs, players):
                    if "episode" in infos[first]:
                        episode = infos[first]["episode"]
                        recent_lengths.append(episode["l"])
                        writer.add_scalar("charts/episodic_return", episode["r"][agent_names[0]], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"], global_step)
                        for name, score in episode["r"].items():
                            writer.add_scalar(f"charts/episodic_return/{name}", score, global_step)
                            writer.add_scalar(f"charts/episodic_length/{name}", episode["l"], global_step)

        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages, returns = compute_gae(
                rewards, values, dones, terminations, final_values, next_value, args.gamma, args.gae_lambda
            )

        b_obs = obs.reshape((-1,) + envs.observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

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

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
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
            recent = f"{np.mean(recent_lengths):.1f}" if recent_lengths else "n/a"
            print(f"global_step={global_step}, episodic_length(last {len(recent_lengths)})={recent}, SPS={sps}", flush=True)
        upload_new_videos(f"videos/{run_name}")
    envs.close()  # RecordGameVideo writes the video of a game still running when it closes
    upload_new_videos(f"videos/{run_name}")

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save({"model": agent.state_dict(), "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(
            f"eval/episodic_return (first player, against itself) over {len(episodic_returns)} games: "
            f"{np.mean(episodic_returns):.2f}"
        )
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
