# Data-parallel Proximal Policy Optimization (PPO) for Atari games through ale-py, with the Nature-CNN agent:
# ppo_atari.py run by several processes (ranks) at once, launched with torchrun, e.g.
#   torchrun --standalone --nproc-per-node 2 cleanrl/ppo_atari_multigpu.py --local-num-envs 4
# (plain `python` runs one rank, which is ppo_atari.py). Each rank steps its own --local-num-envs envs and
# updates on minibatches of its own batch (so advantages are normalised per rank's minibatch); the ranks'
# gradients are averaged (one all-reduce) before clipping and the Adam step, so the weights, which all
# start from rank 0's, stay identical. --total-timesteps, global_step and every cadence count the env
# steps of all ranks.
# Papers: Schulman et al. 2017 (arXiv:1707.06347), whose Atari setting this follows (clip 0.1, 8 envs x
# 128 steps) with CleanRL's 4 epochs x 4 minibatches (the paper: 3 epochs, minibatches of 256); GAE,
# Schulman et al. 2016 (arXiv:1506.02438); the preprocessing of Mnih et al. 2015 (Nature) and Machado
# et al. 2018 (JAIR) for the v5 ids; synchronous data parallelism as in Li et al. 2020 ("PyTorch
# Distributed: Experiences on Accelerating Data Parallel Training", VLDB). Defaults are CleanRL's
# published ones.
# Deliberate differences: those of ppo_atari.py (a time limit bootstraps from the true final observation;
# the logged return is the game score; v5 ids skip frames once and keep sticky actions 0.25); and, from
# CleanRL's published version of this script: rank 0's initial weights are broadcast; the sub-envs of all
# ranks get distinct seeds; every rank's games are logged (by rank 0); the logged losses and the
# --target-kl stop are the ranks' means, so all ranks stop together; nccl when every rank has its own GPU,
# gloo otherwise (no --backend or --device-ids flags: CUDA_VISIBLE_DEVICES picks the GPUs).
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
import torch.distributed as dist
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
    """if toggled, cuda will be used when available (rank r on `cuda:{LOCAL_RANK}`, with the nccl backend)"""
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
    """total environment steps of the experiment, all ranks together"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    local_num_envs: int = 8
    """the number of parallel game environments of each rank (all ranks: `num_envs`)"""
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


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
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
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

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


def average_gradients(parameters, world_size, *scalars):
    """Averages the gradients of `parameters` over the `world_size` ranks of the default process group:
    one all-reduce (sum) of all gradients and of the 0-d tensors `scalars` in a single flat buffer, then a
    division by `world_size`. Afterwards every rank holds the same mean gradient in each `p.grad`; returns
    the ranks' means of `scalars` (detached), the same on every rank, so that decisions taken from them
    (stop on a non-finite loss, stop at --target-kl) agree. With `world_size` 1 nothing is sent and
    `scalars` come back as they are."""
    if world_size == 1:
        return list(scalars)
    grads = [p.grad for p in parameters]
    extra = [torch.stack([s.detach().to(grads[0].dtype) for s in scalars])] if scalars else []
    flat = torch.cat([g.reshape(-1) for g in grads] + extra)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= world_size
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
    return list(flat[offset:].clone())  # not views that would keep the whole buffer alive


def space_error(args, unwrapped_env):
    """What the script cannot handle about the (unwrapped) env, as one line, or None."""
    script = os.path.basename(__file__)
    if not isinstance(unwrapped_env, ale_py.AtariEnv):
        return f"{args.env_id} is not an ale-py Atari game; {script} needs one, e.g. BreakoutNoFrameskip-v4 or ALE/Breakout-v5"
    return None


def validation_error(args, world_size=1, local_world_size=1):
    """The first problem with the command-line values as one line, or None when all is well. `world_size`
    ranks in all, `local_world_size` of them on this machine; every rank finds the same problem."""
    if not 0 <= args.seed <= 2**32 - world_size:
        return f"--seed must be in [0, 2**32 - {world_size}] (rank r seeds with seed + r), got {args.seed}"
    if "/" in args.exp_name or "__" in args.exp_name or not args.exp_name:
        return f"--exp-name {args.exp_name!r} must be non-empty, without '/' or '__' (they split run names)"
    run_name_bytes = len(f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}".encode())
    if run_name_bytes > 255:
        return f"the run name would be {run_name_bytes} bytes, more than a folder name can hold (255); shorten --exp-name"
    for name in ("local_num_envs", "num_steps", "num_minibatches", "update_epochs"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    local_batch_size = args.local_num_envs * args.num_steps
    if local_batch_size % args.num_minibatches != 0:
        return (
            f"each rank's batch of {local_batch_size} steps (--local-num-envs {args.local_num_envs} x --num-steps "
            f"{args.num_steps}) does not split into --num-minibatches {args.num_minibatches}; "
            f"pick a divisor of {local_batch_size}"
        )
    if args.norm_adv and local_batch_size // args.num_minibatches < 2:
        return "minibatches of 1 step cannot normalise advantages; use fewer --num-minibatches or --no-norm-adv"
    batch_size = local_batch_size * world_size
    if args.total_timesteps < batch_size:
        return (
            f"--total-timesteps {args.total_timesteps} is below one batch ({batch_size} steps: {world_size} rank(s) x "
            f"{local_batch_size}), so no update would run"
        )
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
    if args.cuda and torch.cuda.is_available() and torch.cuda.device_count() < local_world_size:
        return (
            f"--cuda gives each rank its own GPU, but this machine runs {local_world_size} ranks and has "
            f"{torch.cuda.device_count()} GPU(s); start fewer (torchrun --nproc-per-node) or add --no-cuda"
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
    world_size = getattr(args, "world_size", 1)  # __main__ records it in the args; an Args() made elsewhere lacks it
    launcher = ["python"] if world_size == 1 else ["torchrun", "--standalone", f"--nproc-per-node={world_size}"]
    command = shlex.join([*launcher, script, *sys.argv[1:]])
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

A PPO (Proximal Policy Optimization) agent trained on `{args.env_id}` by CleanRL's single-file script
[`{script}`]({script}), data-parallel over {world_size} process(es) with {args.local_num_envs} envs each, which is
included in this repository with the checkpoint `{args.exp_name}.cleanrl_model` and the TensorBoard logs of the run.

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
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval")
    agent = Agent(envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    agent.eval()
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(torch.as_tensor(obs, device=device))
        obs, _, _, _, infos = envs.step(actions.cpu().numpy())
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    import tyro

    args = tyro.cli(Args)
    # torchrun describes each process (rank) in its environment; plain `python` is one rank alone
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    # every rank checks the same things and refuses alike, before any of them waits for the others;
    # command-line values first, then the env (making it can already write files, e.g. MuJoCo's log)
    error = validation_error(args, world_size, local_world_size)
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
    args.world_size = world_size
    args.num_envs = args.local_num_envs * world_size
    args.local_batch_size = int(args.local_num_envs * args.num_steps)
    args.local_minibatch_size = int(args.local_batch_size // args.num_minibatches)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    if rank == 0 and args.total_timesteps % args.batch_size != 0:
        print(f"running {args.num_iterations * args.batch_size} steps: --total-timesteps rounded down to whole batches")

    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() and args.cuda else "cpu")
    backend = "nccl" if device.type == "cuda" else "gloo"
    if world_size > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)

    # each rank samples actions and shuffles minibatches with its own seed (its envs get their own seeds below)
    rank_seed = args.seed + rank
    random.seed(rank_seed)
    np.random.seed(rank_seed)
    torch.manual_seed(rank_seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    # rank 0 names the run, writes it and starts W&B; the others take its name (-1: W&B could not start)
    run_time = int(time.time())
    if rank == 0:
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
                run_time = -1
    if world_size > 1:
        shared_run_time = torch.tensor([run_time], dtype=torch.int64, device=device)
        dist.broadcast(shared_run_time, src=0)
        run_time = int(shared_run_time.item())
    if run_time < 0:
        if world_size > 1:
            dist.destroy_process_group()
        sys.exit(2)
    run_name = f"{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{run_time}"
    if rank == 0:
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

    envs = make_vector_env(args.env_id, args.local_num_envs, args.capture_video and rank == 0, run_name)
    envs.action_space.seed(rank_seed)
    if rank == 0:
        game = envs.envs[0].unwrapped
        print(
            f"{args.env_id}: frame skip 4 (MaxAndSkip), sticky-action probability "
            f"{game.ale.getFloat('repeat_action_probability'):g}, FIRE on reset: {'FIRE' in game.get_action_meanings()}"
        )
        print(
            f"{world_size} rank(s) x {args.local_num_envs} envs = {args.num_envs} envs; rank 0 on {device}"
            + (f", {backend} backend" if world_size > 1 else "")
        )

    agent = Agent(envs.single_action_space.n).to(device)
    if world_size > 1:
        # the ranks' seeds differ, and so would their initial weights: all start from rank 0's
        for tensor in agent.state_dict().values():
            dist.broadcast(tensor, src=0)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # frames stay uint8 in the rollout buffer (4x smaller); the agent scales them by 1/255
    obs = torch.zeros(
        (args.num_steps, args.local_num_envs) + envs.single_observation_space.shape, dtype=torch.uint8, device=device
    )
    actions = torch.zeros((args.num_steps, args.local_num_envs) + envs.single_action_space.shape, dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, args.local_num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.local_num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.local_num_envs)).to(device)
    terminations = torch.zeros((args.num_steps, args.local_num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.local_num_envs)).to(device)
    final_values = torch.zeros((args.num_steps, args.local_num_envs)).to(device)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    # sub-env i of rank r gets seed + r * local_num_envs + i: no two envs of the run share a seed
    next_obs, _ = envs.reset(seed=args.seed + rank * args.local_num_envs)
    next_obs = torch.as_tensor(next_obs, device=device)

    for iteration in range(1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        finished_episodes = []  # (global_step, episodic return, episodic length) of this rank's games
        for step in range(0, args.num_steps):
            # the ranks step in lockstep: one vector step of every rank is num_envs env steps
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, device=device)

            if "final_info" in infos:
                truncated = np.nonzero(truncation & ~termination)[0]
                if len(truncated) > 0:
                    final_obs = np.stack(infos["final_obs"][truncated])
                    with torch.no_grad():
                        final_obs = torch.as_tensor(final_obs, device=device)
                        final_values[step, truncated] = agent.get_value(final_obs).flatten()
                if "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                        finished_episodes.append((global_step, float(episode["r"][i]), int(episode["l"][i])))

        # rank 0 logs the games of all ranks, once per rollout
        if world_size > 1:
            all_finished = [None] * world_size if rank == 0 else None
            dist.gather_object(finished_episodes, all_finished, dst=0)
            if rank == 0:
                finished_episodes = [episode for rank_episodes in all_finished for episode in rank_episodes]
        if rank == 0:
            for episode_step, episodic_return, episodic_length in sorted(finished_episodes):
                recent_returns.append(episodic_return)
                writer.add_scalar("charts/episodic_return", episodic_return, episode_step)
                writer.add_scalar("charts/episodic_length", episodic_length, episode_step)

        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages, returns = compute_gae(
                rewards, values, dones, terminations, final_values, next_value, args.gamma, args.gae_lambda
            )

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # each rank takes its minibatches from its own batch; together they make the minibatch of minibatch_size
        b_inds = np.arange(args.local_batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.local_batch_size, args.local_minibatch_size):
                end = start + args.local_minibatch_size
                mb_inds = b_inds[start:end]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfrac = ((ratio - 1.0).abs() > args.clip_coef).float().mean()

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
                # from here on the gradients, and the losses logged and checked, are the ranks' means
                loss, pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac = average_gradients(
                    agent.parameters(), world_size, loss, pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac
                )
                clipfracs.append(clipfrac)
                grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                # one sync per minibatch: stop before a non-finite loss or gradient reaches the weights (all ranks agree)
                if not torch.isfinite(loss + grad_norm):
                    if rank == 0:
                        script = os.path.basename(__file__)
                        print(f"{script}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
                        writer.close()
                    envs.close()
                    if world_size > 1:
                        dist.destroy_process_group()
                    sys.exit(1)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        if rank == 0:
            # of rank 0's own batch
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
                recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
                print(
                    f"global_step={global_step}, episodic_return(last {len(recent_returns)})={recent}, SPS={sps}", flush=True
                )
            upload_new_videos(f"videos/{run_name}")
    envs.close()  # RecordVideo writes the video of an episode still running when it closes
    if world_size > 1:
        dist.destroy_process_group()  # training is over: rank 0 alone saves, evaluates and uploads

    if rank == 0:
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
