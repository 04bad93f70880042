# Parallelised Q-Network (PQN) with an LSTM for Atari games through envpool: single frames, memory instead of
# a frame stack. Paper: Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning" (arXiv:2407.04811).
# No replay buffer and no target network: many envs collect short rollouts in parallel, the current network
# turns them into Q(λ) returns, and Q(s, a) is regressed on them for a few epochs of minibatches; LayerNorm
# after every layer of the CNN and its dense layer keeps this stable. The recurrent Q-network follows
# Hausknecht & Stone 2015 ("Deep Recurrent Q-Learning for Partially Observable MDPs", arXiv:1507.06527): one
# 84x84 frame a step into a Nature CNN, then an LSTM; its memory is replayed from the rollout's first step for
# every update (minibatches are whole env sequences), with the LSTM details of Huang et al. 2022 ("The 37
# Implementation Details of Proximal Policy Optimization", ICLR blog track). The Atari preprocessing of Mnih
# et al. 2015 (Nature) runs inside envpool (Weng et al. 2022, "EnvPool"): up to 30 NOOPs at the start, FIRE on
# reset, 4-frame skip with max-pooling, 84x84 grayscale, no frame stack, a life loss ends the agent's episode
# (and its memory), rewards clipped by sign, no sticky actions.
# Defaults are CleanRL's published ones (128 envs x 32 steps, 32 minibatches x 2 epochs, RAdam with lr 2.5e-4
# annealed linearly to 0, γ 0.99, λ 0.65, grad-norm clipping 10, ε 1 → 0.01 over the first 10 %, MSE loss,
# a 128-unit LSTM).
# Deliberate differences from the paper's and CleanRL's code: an episode cut by the time limit bootstraps from
# max_a Q of its true final observation (envpool's NEXT_STEP autoreset returns it), computed with that
# episode's memory, and only a termination bootstraps nothing; no λ-return crosses into the next episode; the
# step after an episode's end, whose action envpool ignores while it resets, is not trained on; the memory is
# zeroed exactly before a new episode's first observation; the logged episodic return is the game score
# (unclipped, over all lives). Evaluation acts ε-greedily with ε = 0.05, as dqn_atari.py does.
import difflib
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
import torch.optim as optim
from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video
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

    env_id: str = "Breakout-v5"
    """the id of the environment (an envpool Atari id)"""
    total_timesteps: int = 10000000
    """total environment steps of the experiment"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 128
    """the number of parallel game environments"""
    num_steps: int = 32
    """the number of steps to run in each environment per rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing (linearly to 0 over the run)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    q_lambda: float = 0.65
    """the lambda of the Q(lambda) returns"""
    num_minibatches: int = 32
    """the number of mini-batches"""
    update_epochs: int = 2
    """the K epochs to update the Q-network on each rollout"""
    max_grad_norm: float = 10.0
    """the maximum norm for the gradient clipping"""
    start_e: float = 1
    """the starting epsilon for exploration"""
    end_e: float = 0.01
    """the ending epsilon for exploration"""
    exploration_fraction: float = 0.10
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    max_episode_steps: int = 27000
    """the time limit of a game in agent steps (envpool's default: 108k frames)"""


def make_env(env_id, num_envs, seed, max_episode_steps, capture_video=False):
    # envpool seeds sub-env i with seed + i when it is made (reset(seed=...) is ignored). Its autoreset is
    # NEXT_STEP: the step that ends an episode returns that episode's true final observation, and the next
    # step ignores its action, resets, and returns the new episode's first observation. One frame an
    # observation: the LSTM remembers the rest.
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        seed=seed,
        episodic_life=True,
        reward_clip=True,
        max_episode_steps=max_episode_steps,
        stack_num=1,
        render_mode="rgb_array" if capture_video else None,
    )


class GameVideoRecorder:
    """Films sub-env 0 of an envpool Atari env: the games that `capped_cubic_video_schedule` picks (0, 1, 8,
    27, ..., 1000, 2000, ...), each from its first observation to its final one, one mp4 per game."""

    def __init__(self, envs, video_folder):
        self.envs = envs
        self.video_folder = video_folder
        self.fps = 60 / envs.spec.config.frame_skip  # the ALE runs at 60 frames per second
        self.game = 0
        self.frames = []

    def recording(self):
        return capped_cubic_video_schedule(self.game)

    def observe(self, game_over=False):
        """Call after reset and after every step; `game_over`: sub-env 0's game ended on this step."""
        if self.recording():
            self.frames.append(self.envs.render()[0])
            if game_over:
                save_video(
                    self.frames, self.video_folder, episode_trigger=lambda _: True, episode_index=self.game, fps=self.fps
                )
        if game_over:
            self.game += 1
            self.frames = []


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class QNetwork(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(1, 32, 8, stride=4)),
            nn.LayerNorm([32, 20, 20]),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.LayerNorm([64, 9, 9]),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.LayerNorm([64, 7, 7]),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.LayerNorm(512),
            nn.ReLU(),
        )
        self.lstm = nn.LSTM(512, 128)
        for name, param in self.lstm.named_parameters():
            if "bias" in name:
                nn.init.constant_(param, 0)
            elif "weight" in name:
                nn.init.orthogonal_(param, 1.0)
        self.q_head = layer_init(nn.Linear(128, n_actions))

    def initial_state(self, batch_size, device):
        """The empty memory (h, c) of `batch_size` envs, each (1, batch_size, 128)."""
        shape = (self.lstm.num_layers, batch_size, self.lstm.hidden_size)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def forward(self, x, lstm_state, firsts):
        """Q-values of a sequence of T steps from B envs, time-major.

        x: (T * B, 1, 84, 84) frames; lstm_state: (h, c), each (1, B, 128), the memory before the first step;
        firsts: (T * B,), 1 where x is a new episode's first observation, whose memory starts empty.
        Returns the Q-values (T * B, n_actions) and the memory after the last step.
        """
        hidden = self.network(x / 255.0)
        batch_size = lstm_state[0].shape[1]
        hidden = hidden.reshape((-1, batch_size, self.lstm.input_size))
        firsts = firsts.reshape((-1, batch_size))
        outputs = []
        for h, first in zip(hidden, firsts):
            keep = (1.0 - first).view(1, -1, 1)
            out, lstm_state = self.lstm(h.unsqueeze(0), (keep * lstm_state[0], keep * lstm_state[1]))
            outputs.append(out)
        return self.q_head(torch.cat(outputs).flatten(0, 1)), lstm_state


def epsilon_schedule(start_e, end_e, duration, t):
    """ε at env step `t`: linear from `start_e` to `end_e` over `duration` steps, then `end_e`.

    A zero duration (`--exploration-fraction 0`) means `end_e` from the first step.
    """
    if duration <= 0:
        return end_e
    return start_e + (end_e - start_e) * min(t / duration, 1.0)


def compute_q_lambda_returns(rewards, q_max, dones, terminations, next_q_max, gamma, q_lambda):
    """Q(λ) returns for a rollout of T steps from N envs run with envpool's NEXT_STEP autoreset.

    All inputs are (T, N) tensors except `next_q_max` (N,), max_a Q of the observation after the last step.
    `q_max[t]` is max_a Q(s_t, a) of the observation step t acted on; `dones[t]` marks a step that ended an
    episode (terminated or truncated), `terminations[t]` the ones that ended in a terminal state. With
    NEXT_STEP the observation after a done step is the episode's true final observation, so q_max[t + 1]
    (or next_q_max at the rollout's end) is exactly its truncation bootstrap. The recursion is
        G_t = r_t + γ [λ G_{t+1} + (1 - λ) max_a Q(s_{t+1}, a)],   G_T = max_a Q(s_T, a),
    except that a truncated step bootstraps from its final observation only (G_t = r_t + γ q_max[t + 1]) and a
    terminal step bootstraps nothing (G_t = r_t), so no return reaches into the next episode. The step after a
    done step is a reset step (its action was ignored): its return is meaningless and must be masked out of the
    loss (see `masked_mean`). Returns (T, N).
    """
    num_steps = rewards.shape[0]
    returns = torch.zeros_like(rewards)
    next_return = next_q_max
    for t in reversed(range(num_steps)):
        next_value = next_q_max if t == num_steps - 1 else q_max[t + 1]
        bootstrap = q_lambda * next_return + (1.0 - q_lambda) * next_value
        bootstrap = torch.where(dones[t].bool(), next_value, bootstrap)
        bootstrap = torch.where(terminations[t].bool(), torch.zeros_like(bootstrap), bootstrap)
        returns[t] = rewards[t] + gamma * bootstrap
        next_return = returns[t]
    return returns


def next_step_masks(done, valid):
    """(next_valid, next_first) for the observation an env step returned, under envpool's NEXT_STEP autoreset.

    done: the step ended an episode (terminated or truncated; with episodic life, a life loss too); valid: the
    step was a real one (0 for a reset step). Tensors of one shape, e.g. (N,). After a done step the returned
    observation is the episode's true final one: the next step is a reset step (next_valid = 0), its action is
    ignored and it is not trained on, but it still sees the final observation with the episode's memory, which
    gives the truncation bootstrap. After a reset step the returned observation is the first of a new episode:
    the memory is zeroed before it (next_first = 1). Neither flag is ever set by a real step that did not end
    an episode.
    """
    return 1.0 - done, 1.0 - valid


def masked_mean(x, valid):
    """Mean of `x` over the entries where `valid` is 1 (both the same shape); 0 when none is.

    `valid` is 0 on reset steps, whose action envpool ignored: they stay out of the loss and the logged values.
    """
    return torch.where(valid.bool(), x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1.0)


def env_error(env_id):
    """Why this script cannot run `env_id`, as one line, or None when it is an envpool Atari id."""
    script = os.path.basename(__file__)
    all_ids = envpool.list_all_envs()
    if env_id not in all_ids:
        close = difflib.get_close_matches(env_id, all_ids, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"{env_id!r} is not an envpool env id; {hint}{script} needs an envpool Atari id such as Breakout-v5"
    if not isinstance(envpool.make_spec(env_id), envpool.atari.AtariEnvSpec):
        return f"{env_id} is not an envpool Atari game; {script} needs one such as Breakout-v5 or Pong-v5"
    return None


def validation_error(args):
    """The first problem with the command-line values as one line, or None when all is well."""
    if not 0 <= args.seed <= 2**31 - 1 - 100_000:  # envpool takes int32 seeds; evaluation uses seed + 100000
        return f"--seed must be in [0, {2**31 - 1 - 100_000}] (envpool takes int32 seeds), got {args.seed}"
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
    batch_size = args.num_envs * args.num_steps
    if args.num_envs % args.num_minibatches != 0:
        return (
            f"--num-envs {args.num_envs} does not split into --num-minibatches {args.num_minibatches} "
            f"(a minibatch holds whole env sequences); pick a divisor of {args.num_envs}"
        )
    if args.total_timesteps < batch_size:
        return f"--total-timesteps {args.total_timesteps} is below one batch ({batch_size} steps), so no update would run"
    for name in ("gamma", "q_lambda", "start_e", "end_e", "exploration_fraction"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            return f"--{name.replace('_', '-')} must be in [0, 1], got {getattr(args, name)}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    for name in ("learning_rate", "max_grad_norm"):
        if not 0.0 < getattr(args, name) <= float32_max:
            return f"--{name.replace('_', '-')} must be positive and finite in float32, got {getattr(args, name)}"
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
        envpool.__version__,
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
- name: PQN-LSTM
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

# PQN-LSTM agent playing {args.env_id}

A PQN-LSTM (Parallelised Q-Network with an LSTM) agent trained on envpool's `{args.env_id}` by CleanRL's single-file script
[`{script}`]({script}), which is included in this repository with the checkpoint `{args.exp_name}.cleanrl_model`
and the TensorBoard logs of the run.

## Evaluation

Game score over {len(episodic_returns)} evaluation games: **{mean:.2f} ± {std:.2f}** (mean ± std).
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

| python | torch | envpool | gymnasium | numpy | huggingface_hub | {script} sha256 |
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
    """Plays the saved Q-network ε-greedily (ε = 0.05) for `eval_episodes` games; returns their game scores."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_env(saved["env_id"], 1, saved["seed"] + 100_000, saved["max_episode_steps"], capture_video)
    n_actions = envs.single_action_space.n
    q_network = QNetwork(n_actions).to(device)
    q_network.load_state_dict(checkpoint["model"])
    q_network.eval()
    rng = np.random.default_rng(saved["seed"] + 100_000)
    recorder = GameVideoRecorder(envs, f"videos/{run_name}-eval") if capture_video else None
    obs, _ = envs.reset()
    if recorder:
        recorder.observe()
    lstm_state = q_network.initial_state(1, device)
    valid, first = torch.ones(1, device=device), torch.ones(1, device=device)
    episodic_returns, game_score = [], 0.0
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():  # the memory follows every observation, also when the action is random
            q_values, lstm_state = q_network(torch.as_tensor(obs, device=device), lstm_state, first)
        if rng.random() < 0.05:
            action = rng.integers(n_actions, size=1)
        else:
            action = q_values.argmax(dim=1).cpu().numpy()
        obs, _, termination, truncation, infos = envs.step(action)
        valid, first = next_step_masks(torch.as_tensor(termination | truncation, dtype=torch.float32, device=device), valid)
        game_score += float(infos["reward"][0])  # the unclipped score; a life loss does not end the game
        game_over = bool(infos["terminated"][0] or truncation[0])
        if recorder:
            recorder.observe(game_over)
        if game_over:
            episodic_returns.append(game_score)
            game_score = 0.0
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

    envs = make_env(args.env_id, args.num_envs, args.seed, args.max_episode_steps, args.capture_video)
    config = envs.spec.config
    print(
        f"{args.env_id} (envpool): frame skip {config.frame_skip}, sticky-action probability "
        f"{config.repeat_action_probability:g}, episodic life (a life loss ends the agent's episode, not the game), "
        f"time limit {config.max_episode_steps} agent steps"
    )
    recorder = GameVideoRecorder(envs, f"videos/{run_name}") if args.capture_video else None
    n_actions = envs.single_action_space.n

    q_network = QNetwork(n_actions).to(device)
    optimizer = optim.RAdam(q_network.parameters(), lr=args.learning_rate)

    # frames stay uint8 in the rollout buffer (4x smaller); the network scales them by 1/255
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
    valid = torch.zeros((args.num_steps, args.num_envs)).to(device)
    firsts = torch.zeros((args.num_steps, args.num_envs)).to(device)
    q_max = torch.zeros((args.num_steps, args.num_envs)).to(device)
    exploration_steps = args.exploration_fraction * args.total_timesteps

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    game_scores = np.zeros(args.num_envs)
    next_obs, _ = envs.reset()
    if recorder:
        recorder.observe()
    next_obs = torch.as_tensor(next_obs, device=device)
    # carried across rollouts: 0 where the next step is a reset step (the previous one ended an episode);
    # 1 where next_obs is a new episode's first observation (the memory is zeroed before it)
    next_valid = torch.ones(args.num_envs, device=device)
    next_first = torch.ones(args.num_envs, device=device)
    next_lstm_state = q_network.initial_state(args.num_envs, device)

    for iteration in range(1, args.num_iterations + 1):
        # the update replays every env's memory from here
        initial_lstm_state = (next_lstm_state[0].clone(), next_lstm_state[1].clone())
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            epsilon = epsilon_schedule(args.start_e, args.end_e, exploration_steps, global_step)
            global_step += args.num_envs
            obs[step] = next_obs
            valid[step] = next_valid
            firsts[step] = next_first

            # the greedy values are needed for the returns whether or not a sub-env explores
            with torch.no_grad():
                q_values, next_lstm_state = q_network(next_obs, next_lstm_state, next_first)
                step_q_max, greedy = q_values.max(dim=1)
            q_max[step] = step_q_max
            explore = np.random.random(args.num_envs) < epsilon
            action = np.where(explore, np.random.randint(n_actions, size=args.num_envs), greedy.cpu().numpy())
            actions[step] = torch.as_tensor(action, device=device)

            next_obs, reward, termination, truncation, infos = envs.step(action)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_valid, next_first = next_step_masks(dones[step], valid[step])
            next_obs = torch.as_tensor(next_obs, device=device)

            # game statistics: the unclipped score over all lives, logged when the game (not a life) ends
            game_scores += infos["reward"]
            game_over = infos["terminated"].astype(bool) | truncation
            if recorder:
                recorder.observe(bool(game_over[0]))
            for i in np.nonzero(game_over)[0]:
                recent_returns.append(float(game_scores[i]))
                writer.add_scalar("charts/episodic_return", game_scores[i], global_step)
                writer.add_scalar("charts/episodic_length", infos["elapsed_step"][i], global_step)
                game_scores[i] = 0.0

        with torch.no_grad():  # a look ahead: the carried memory has not seen next_obs yet and stays as it is
            next_q_max = q_network(next_obs, next_lstm_state, next_first)[0].max(dim=1).values
            returns = compute_q_lambda_returns(rewards, q_max, dones, terminations, next_q_max, args.gamma, args.q_lambda)

        # a minibatch is a set of whole env sequences, so that their memory can be replayed from the start
        envs_per_minibatch = args.num_envs // args.num_minibatches
        env_inds = np.arange(args.num_envs)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(env_inds)
            for start in range(0, args.num_envs, envs_per_minibatch):
                mb_envs = torch.as_tensor(env_inds[start : start + envs_per_minibatch], device=device)
                mb_valid = valid[:, mb_envs].reshape(-1)

                q_values, _ = q_network(
                    obs[:, mb_envs].reshape((-1,) + envs.single_observation_space.shape),
                    (initial_lstm_state[0][:, mb_envs], initial_lstm_state[1][:, mb_envs]),
                    firsts[:, mb_envs].reshape(-1),
                )
                old_val = q_values.gather(1, actions[:, mb_envs].reshape(-1, 1)).squeeze(1)
                loss = masked_mean((old_val - returns[:, mb_envs].reshape(-1)) ** 2, mb_valid)

                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(q_network.parameters(), args.max_grad_norm)
                # one sync per minibatch: stop before a non-finite loss or gradient reaches the weights
                if not torch.isfinite(loss + grad_norm):
                    script = os.path.basename(__file__)
                    print(f"{script}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
                    writer.close()
                    envs.close()
                    sys.exit(1)
                optimizer.step()

        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("charts/epsilon", epsilon, global_step)
        writer.add_scalar("losses/td_loss", loss.item(), global_step)
        writer.add_scalar("losses/q_values", masked_mean(old_val, mb_valid).item(), global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 10 or iteration == args.num_iterations:
            last_print = time.time()
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            print(f"global_step={global_step}, episodic_return(last {len(recent_returns)})={recent}, SPS={sps}", flush=True)
        upload_new_videos(f"videos/{run_name}")
    envs.close()

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
