# Proximal Policy Optimization (PPO) for Atari games run by envpool, with the Nature-CNN agent: the JAX (Flax,
# Optax) version of ppo_atari_envpool.py. Papers: Schulman et al. 2017, "Proximal Policy Optimization Algorithms"
# (arXiv:1707.06347), whose Atari setting this follows (clip 0.1, 8 envs x 128 steps) with CleanRL's 4 epochs x 4
# minibatches (the paper: 3 epochs, minibatches of 256); GAE, Schulman et al. 2016 (arXiv:1506.02438); the
# preprocessing of Mnih et al. 2015 (Nature, "Human-level control through deep reinforcement learning"), here
# done inside envpool (Weng et al. 2022, "EnvPool: A Highly Parallel Reinforcement Learning Environment Execution
# Engine", arXiv:2206.10558). Defaults are CleanRL's published ones.
# Deliberate differences from the paper's code and from CleanRL's earlier envpool script: envpool resets
# a finished env on the step after its done (NEXT_STEP autoreset), so that "reset step" is left out of
# every loss; an episode cut by the time limit bootstraps from the value of its true final observation;
# the logged episodic return is the whole game's unclipped score, ended by game over or the time limit,
# never by a life loss alone. envpool's own Atari settings are kept: frame skip 4 (max over the last two
# frames), up to 30 no-op starts, FIRE after resets, no sticky actions, 27000 agent steps per game.
# What differs from ppo_atari_envpool.py is the framework: each env step (action choice and envpool's step
# through its XLA interface, `envs.xla()`) is one compiled call, and so is each minibatch update; where envpool
# has no XLA interface, or with --no-xla-env, the compiled step calls `envs.step` on the host (an ordered
# `io_callback`). Unlike CleanRL's earlier XLA script, --clip-vloss is honoured. The game statistics are kept
# on the device in float32 (exact for scores below 2**24), a non-finite loss is caught once per iteration (a
# minibatch whose loss or gradient is non-finite leaves the weights as they were), and the minibatches are
# drawn with NumPy's generator as in the twin; the weight initialisation is the twin's scheme (orthogonal).
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
import flax
import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState
from jax.experimental import io_callback
from torch.utils.tensorboard import SummaryWriter


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

    env_id: str = "Breakout-v5"
    """the id of the environment (an envpool Atari id)"""
    total_timesteps: int = 10000000
    """total environment steps of the experiment"""
    max_episode_steps: int = 27000
    """the time limit of a game in agent steps (envpool's default: 27000, i.e. 108000 frames)"""
    xla_env: bool = True
    """step the envs inside the compiled program through envpool's XLA interface; --no-xla-env (or an envpool
    without it) steps them on the host, called from the compiled program"""
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


def make_vector_env(env_id, num_envs, seed, max_episode_steps, render=False):
    # envpool does the whole Atari preprocessing itself (84x84 gray, 4 stacked frames, skip 4, no-op starts,
    # FIRE reset); a life loss ends the agent's episode and rewards are clipped to their sign for learning.
    # NEXT_STEP autoreset: the step that ends an episode returns its true final observation, and the next
    # step of that env ignores its action and returns the new episode's first observation.
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        seed=seed,
        episodic_life=True,
        reward_clip=True,
        max_episode_steps=max_episode_steps,
        render_mode="rgb_array" if render else None,
    )


# the info entries the scripts read, with the dtypes envpool gives them
INFO_DTYPES = {"reward": np.float32, "terminated": np.int32, "elapsed_step": np.int32}


def make_step_env(envs, xla=True):
    """The env step a compiled program calls: `step_env(handle, actions) -> (handle, (next_obs, reward, terminated,
    truncated, info))` with the arrays envpool's step returns and `info` cut to the entries of INFO_DTYPES.
    With `xla`, envpool's XLA interface (`envs.xla()`) steps the envs inside the program; where envpool has no XLA
    interface, or without `xla`, an ordered `io_callback` runs `envs.step` on the host from the program, in program
    order (its handle is a dummy). Call after `envs.reset()`. Returns (handle, step_env, what is used, in words)."""
    reason = "--no-xla-env"
    if xla:
        try:
            handle, _, _, xla_step = envs.xla()
        except Exception as e:  # builds of envpool without its XLA ops (or a jax they do not fit) fail here
            reason = f"envpool's XLA interface is not available: {(str(e).splitlines() or [type(e).__name__])[0]}"
        else:

            def step_env(handle, actions):
                handle, (next_obs, reward, terminated, truncated, info) = xla_step(handle, actions)
                return handle, (next_obs, reward, terminated, truncated, {key: info[key] for key in INFO_DTYPES})

            return handle, step_env, "envpool's XLA interface (each env step runs inside the compiled program)"

    num_envs = envs.config["num_envs"]
    shapes = (
        jax.ShapeDtypeStruct((num_envs,) + envs.single_observation_space.shape, envs.single_observation_space.dtype),
        jax.ShapeDtypeStruct((num_envs,), np.float32),
        jax.ShapeDtypeStruct((num_envs,), np.bool_),
        jax.ShapeDtypeStruct((num_envs,), np.bool_),
        {key: jax.ShapeDtypeStruct((num_envs,), dtype) for key, dtype in INFO_DTYPES.items()},
    )

    def host_step(actions):
        next_obs, reward, terminated, truncated, info = envs.step(np.asarray(actions))
        info = {key: np.asarray(info[key], dtype) for key, dtype in INFO_DTYPES.items()}
        return next_obs, reward.astype(np.float32), terminated.astype(bool), truncated.astype(bool), info

    def step_env(handle, actions):
        return handle, io_callback(host_step, shapes, actions, ordered=True)

    return jnp.zeros((), jnp.int32), step_env, f"host stepping through an ordered io_callback ({reason})"


def layer_init(std=np.sqrt(2), bias_const=0.0):
    return dict(kernel_init=nn.initializers.orthogonal(std), bias_init=nn.initializers.constant(bias_const))


class Agent(nn.Module):
    n_actions: int

    def setup(self):
        self.network = nn.Sequential(
            [
                lambda x: jnp.transpose(x, (0, 2, 3, 1)),  # envpool's frames are channels-first, flax's Conv wants them last
                nn.Conv(32, (8, 8), strides=(4, 4), padding="VALID", **layer_init()),
                nn.relu,
                nn.Conv(64, (4, 4), strides=(2, 2), padding="VALID", **layer_init()),
                nn.relu,
                nn.Conv(64, (3, 3), strides=(1, 1), padding="VALID", **layer_init()),
                nn.relu,
                lambda x: x.reshape((x.shape[0], -1)),  # (7, 7, 64) flattened height, width, channel
                nn.Dense(512, **layer_init()),
                nn.relu,
            ]
        )
        self.actor = nn.Dense(self.n_actions, **layer_init(std=0.01))
        self.critic = nn.Dense(1, **layer_init(std=1))

    def get_value(self, x):
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None, key=None):
        """`key` samples the action when `action` is None."""
        hidden = self.network(x / 255.0)
        logits = jax.nn.log_softmax(self.actor(hidden))  # normalised, as torch's Categorical keeps them
        if action is None:
            action = jax.random.categorical(key, logits)
        logprob = jnp.take_along_axis(logits, action[:, None], axis=-1)[:, 0]
        entropy = -jnp.sum(jnp.exp(logits) * logits, axis=-1)
        return action, logprob, entropy, self.critic(hidden)


def compute_gae(rewards, values, dones, terminations, last_done, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns for a NEXT_STEP rollout of T steps from N envs.

    `rewards`, `values` (V(obs[t])), `dones` (episode ended at step t: terminated or truncated) and
    `terminations` (ended in a terminal state) are (T, N) float32; `last_done` (N,) is the previous rollout's
    `dones[T-1]` (zeros for the first rollout) and `next_value` (N,) the value of the observation after the
    last step. Where `dones[t]` is set, obs[t+1] is the episode's true final observation, so values[t+1]
    (next_value at t = T-1) is what a truncated episode bootstraps from; a terminal state bootstraps
    nothing, and the λ-chain stops at every done. The step after a done is a reset step (its action was
    ignored, its reward is 0): it is not a real transition, so `valid` is 0 there and its advantage is 0
    (its return is its value). Returns (advantages, returns, valid), all (T, N).
    """
    num_steps = rewards.shape[0]
    advantages = jnp.zeros_like(rewards)
    lastgaelam = jnp.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        nextvalues = next_value if t == num_steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages = advantages.at[t].set(lastgaelam)
    valid = 1.0 - jnp.concatenate([last_done[None], dones[:-1]])
    advantages = advantages * valid
    return advantages, advantages + values, valid


def masked_mean(x, mask):
    """Mean of `x` over the entries where `mask` is 1 (0 when there are none); both of one shape."""
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)


def ppo_loss(
    newlogprob,
    entropy,
    newvalue,
    logprobs,
    advantages,
    returns,
    values,
    valid,
    clip_coef,
    clip_vloss,
    norm_adv,
    ent_coef,
    vf_coef,
):
    """The PPO loss of one minibatch of B steps: the new policy's log-probabilities of the taken actions, its
    entropies and values, the rollout's log-probabilities, advantages, returns and values, and `valid` (0 at reset
    steps, which count nowhere: every mean is over the valid steps), all (B,) float32; `clip_vloss` and
    `norm_adv` are Python bools. Returns (loss, (pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac)).
    """
    logratio = newlogprob - logprobs
    ratio = jnp.exp(logratio)
    # http://joschu.net/blog/kl-approx.html
    old_approx_kl = jax.lax.stop_gradient(masked_mean(-logratio, valid))
    approx_kl = jax.lax.stop_gradient(masked_mean((ratio - 1) - logratio, valid))
    clipfrac = jax.lax.stop_gradient(masked_mean((jnp.abs(ratio - 1.0) > clip_coef).astype(jnp.float32), valid))

    if norm_adv:
        mean = masked_mean(advantages, valid)
        # the unbiased variance of the valid steps, as torch.std gives when all are valid
        variance = (((advantages - mean) ** 2) * valid).sum() / jnp.maximum(valid.sum() - 1, 1.0)
        advantages = (advantages - mean) / (jnp.sqrt(variance) + 1e-8)

    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * jnp.clip(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = masked_mean(jnp.maximum(pg_loss1, pg_loss2), valid)

    if clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = values + jnp.clip(newvalue - values, -clip_coef, clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        v_loss = 0.5 * masked_mean(jnp.maximum(v_loss_unclipped, v_loss_clipped), valid)
    else:
        v_loss = 0.5 * masked_mean((newvalue - returns) ** 2, valid)

    entropy_loss = masked_mean(entropy, valid)
    loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
    return loss, (pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac)


def with_learning_rate(agent_state, learning_rate):
    """`agent_state` whose Adam (the optax.inject_hyperparams second link of its chain) steps with `learning_rate`."""
    clip_state, adam_state = agent_state.opt_state
    hyperparams = {**adam_state.hyperparams, "learning_rate": jnp.asarray(learning_rate, jnp.float32)}
    return agent_state.replace(opt_state=(clip_state, adam_state._replace(hyperparams=hyperparams)))


@flax.struct.dataclass
class EpisodeStatistics:
    """Score of each env's current game, kept on the device from envpool's Atari `info` of every step.

    `info["reward"]` is the unclipped reward, `info["terminated"]` is 1 only at game over (not at a life
    loss) and `info["elapsed_step"]` counts the game's agent steps (reset steps after a life loss do not
    count). A game ends at game over or when it is truncated by the time limit; a life loss alone ends
    nothing here. Start with `EpisodeStatistics(jnp.zeros(num_envs))`.
    """

    scores: jax.Array

    def update(self, truncations, infos):
        """Adds one vector step; returns the new statistics and (ended, scores, lengths), each (N,): whether env i's
        game ended on this step, and then its game score and length in agent steps."""
        scores = self.scores + infos["reward"]
        ended = infos["terminated"].astype(bool) | truncations
        return self.replace(scores=jnp.where(ended, 0.0, scores)), (ended, scores, infos["elapsed_step"])


class GameRecorder:
    """Films env 0's games that Gymnasium's `capped_cubic_video_schedule` picks (games 0, 1, 8, 27, ..., 1000,
    2000, ...), from their first observation to their final one, into `video_folder` as
    `rl-video-episode-{game}.mp4`. `envs` must be made with render_mode="rgb_array"; it renders only while
    filming. Call `start()` after `envs.reset()` and `step(game_over)` after every `envs.step`."""

    def __init__(self, envs, video_folder, fps):
        from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video  # moviepy: only when filming

        self.envs, self.video_folder, self.fps = envs, video_folder, fps
        self.schedule, self.save_video = capped_cubic_video_schedule, save_video
        self.game = 0
        self.frames = []

    def start(self):
        if self.schedule(self.game):
            self.frames.append(self.envs.render()[0])

    def step(self, game_over):
        """`game_over`: whether env 0's game ended on this step (game over or time limit)."""
        # the step after a game's end shows the next game's first observation: that game's frames start there
        if self.schedule(self.game):
            self.frames.append(self.envs.render()[0])
        if game_over:
            if self.frames:
                self.save_video(self.frames, self.video_folder, episode_index=self.game, fps=self.fps)
            self.frames = []
            self.game += 1


def env_error(env_id):
    """Why this script cannot run `env_id`, as one line, or None when it is an envpool Atari game."""
    script = os.path.basename(__file__)
    # envpool's registry: id -> (module, spec class, settings); its Atari games come from envpool.atari
    atari_ids = [i for i, (module, *_) in envpool.registration.registry.specs.items() if module == "envpool.atari"]
    if env_id in atari_ids:
        return None
    if env_id in envpool.registration.registry.specs:
        return f"{env_id} is an envpool env but not an Atari game; {script} needs one, e.g. Breakout-v5 or Pong-v5"
    # Gymnasium's ids name the same games: ALE/Breakout-v5 and BreakoutNoFrameskip-v4 are envpool's Breakout-v5
    game = re.sub(r"^ALE/|(NoFrameskip|Deterministic)?-v\d+$", "", env_id)
    guesses = [f"{game}-v5"] if f"{game}-v5" in atari_ids else difflib.get_close_matches(env_id, atari_ids, n=1)
    hint = f" (did you mean {guesses[0]}?)" if guesses else ""
    return f"{env_id} is not an envpool id{hint}; {script} needs an envpool Atari id, e.g. Breakout-v5 or Pong-v5"


def validation_error(args):
    """The first problem with the command-line values as one line, or None when all is well."""
    if not 0 <= args.seed < 2**31:  # envpool takes int32 seeds
        return f"--seed must be in [0, 2**31 - 1], got {args.seed}"
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
        jax.__version__,
        flax.__version__,
        optax.__version__,
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
- name: PPO (JAX)
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

# PPO (JAX) agent playing {args.env_id}

A PPO (Proximal Policy Optimization) agent, in JAX (Flax and Optax), trained on envpool's `{args.env_id}` by
CleanRL's single-file script [`{script}`]({script}), which is included in this repository with the checkpoint
`{args.exp_name}.cleanrl_model` (a flax msgpack file) and the TensorBoard logs of the run.

## Evaluation

Game score (unclipped, whole games of up to {args.max_episode_steps} agent steps) over {len(episodic_returns)} evaluation
episodes: **{mean:.2f} ± {std:.2f}** (mean ± std).
{"The video `" + video + "` shows an evaluation episode." if video else ""}

## Use

```
python -m cleanrl_utils.enjoy --exp-name {args.exp_name} --hf-repository {repo_id}
```

or load the checkpoint (a flax msgpack file) yourself, with `{script}` on your path:

```
import flax.serialization, jax, numpy as np
from {script[:-3]} import Agent, make_vector_env

with open("{args.exp_name}.cleanrl_model", "rb") as f:
    checkpoint = flax.serialization.msgpack_restore(f.read())
envs = make_vector_env("{args.env_id}", 1, 0, {args.max_episode_steps})
agent = Agent(envs.single_action_space.n)
template = agent.init(jax.random.PRNGKey(0), np.zeros((1, 4, 84, 84), np.uint8), np.zeros(1, np.int32),
                      method=Agent.get_action_and_value)
params = flax.serialization.from_state_dict(template, checkpoint["model"])
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

| python | jax | flax | optax | envpool | gymnasium | numpy | huggingface_hub | {script} sha256 |
|-|-|-|-|-|-|-|-|-|
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


def evaluate(model_path, eval_episodes, run_name, capture_video=False):
    """Runs the saved agent for `eval_episodes` games on the env it was trained on (same preprocessing and
    time limit, seeds apart from training's); returns their game scores."""
    with open(model_path, "rb") as f:
        checkpoint = flax.serialization.msgpack_restore(f.read())
    saved = checkpoint["args"]
    # envpool takes int32 seeds
    envs = make_vector_env(saved["env_id"], 1, (saved["seed"] + 100_000) % 2**31, saved["max_episode_steps"], capture_video)
    agent = Agent(envs.single_action_space.n)
    key = jax.random.PRNGKey(saved["seed"] + 100_000)
    dummy_obs = np.zeros((1,) + envs.single_observation_space.shape, np.uint8)
    template = agent.init(key, dummy_obs, np.zeros(1, np.int32), method=Agent.get_action_and_value)
    params = flax.serialization.from_state_dict(template, checkpoint["model"])
    get_action = jax.jit(lambda params, obs, key: agent.apply(params, obs, key=key, method=Agent.get_action_and_value)[0])
    statistics = EpisodeStatistics(jnp.zeros(1))
    recorder = GameRecorder(envs, f"videos/{run_name}-eval", 60 / envs.config["frame_skip"]) if capture_video else None
    obs, _ = envs.reset()
    if recorder:
        recorder.start()
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        key, action_key = jax.random.split(key)
        actions = get_action(params, obs, action_key)
        obs, _, _, truncations, infos = envs.step(np.asarray(actions))
        statistics, (ended, scores, _) = statistics.update(truncations, infos)
        if recorder:
            recorder.step(bool(ended[0]))
        episodic_returns += [float(score) for score in np.asarray(scores)[np.asarray(ended)]]
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
    key = jax.random.PRNGKey(args.seed)
    key, agent_key = jax.random.split(key)

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
        # W&B gets each finished video once, explicitly (envpool has no W&B hook).
        if args.track and os.path.isdir(video_dir):
            for name in sorted(os.listdir(video_dir)):
                path = os.path.join(video_dir, name)  # the eval videos reuse the training videos' names
                if name.endswith(".mp4") and path not in uploaded_videos:
                    uploaded_videos.add(path)
                    wandb.log({"videos": wandb.Video(path, format="mp4")})

    envs = make_vector_env(args.env_id, args.num_envs, args.seed, args.max_episode_steps, args.capture_video)
    envs.action_space.seed(args.seed)
    config = envs.config
    print(
        f"{args.env_id} (envpool {envpool.__version__}): frame skip {config['frame_skip']}, sticky-action probability "
        f"{config['repeat_action_probability']:g}, up to {config['noop_max']} no-op starts, FIRE after resets "
        f"(in games that have it), episodic life (a life loss ends the agent's episode, not the logged game), "
        f"rewards clipped to their sign for learning, time limit {config['max_episode_steps']} agent steps"
    )
    # the emulator runs at 60 frames per second; a video shows one frame per agent step
    recorder = GameRecorder(envs, f"videos/{run_name}", 60 / config["frame_skip"]) if args.capture_video else None

    agent = Agent(envs.single_action_space.n)
    agent_state = TrainState.create(
        apply_fn=agent.apply,
        params=agent.init(
            agent_key,
            np.zeros((1,) + envs.single_observation_space.shape, np.uint8),
            np.zeros(1, np.int32),
            method=Agent.get_action_and_value,
        ),
        # the learning rate is set before each update (annealing); Adam's eps as in the twin's torch Adam
        tx=optax.chain(
            optax.clip_by_global_norm(args.max_grad_norm),
            optax.inject_hyperparams(optax.adam)(learning_rate=args.learning_rate, eps=1e-5),
        ),
    )

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    statistics = EpisodeStatistics(jnp.zeros(args.num_envs))
    next_obs, _ = envs.reset()
    handle, step_env, interface = make_step_env(envs, args.xla_env)
    print(f"env stepping: {interface}; JAX backend: {jax.default_backend()}")
    last_done = jnp.zeros(args.num_envs)  # the first step of the next rollout is a reset step where set
    if recorder:
        recorder.start()

    @jax.jit
    def rollout_step(agent_state, handle, next_obs, statistics, key):
        """One vector step: the agent acts on `next_obs`, the envs step; returns the step's transition."""
        key, action_key = jax.random.split(key)
        action, logprob, _, value = agent.apply(
            agent_state.params, next_obs, key=action_key, method=Agent.get_action_and_value
        )
        handle, (next_obs, reward, termination, truncation, infos) = step_env(handle, action)
        # a game over on the time limit's last step comes as truncated only; it is still a terminal state
        termination = termination | infos["terminated"].astype(bool)
        statistics, finished = statistics.update(truncation, infos)
        done = (termination | truncation).astype(jnp.float32)
        transition = (action, logprob, value[:, 0], reward, termination.astype(jnp.float32), done)
        return handle, next_obs, statistics, key, transition, finished

    @jax.jit
    def get_value(params, next_obs):
        return agent.apply(params, next_obs, method=Agent.get_value)[:, 0]

    @jax.jit
    def update_minibatch(agent_state, batch, mb_inds):
        """One gradient step on the minibatch `mb_inds` of `batch`; a step whose loss or gradient is non-finite
        is not applied. Returns (agent_state, the loss terms, whether the loss and gradient were finite)."""
        # reset steps stay in the minibatch but count nowhere: every mean in ppo_loss is over the valid steps
        mb = jax.tree_util.tree_map(lambda x: x[mb_inds], batch)

        def loss_fn(params):
            _, newlogprob, entropy, newvalue = agent.apply(params, mb["obs"], mb["actions"], method=Agent.get_action_and_value)
            return ppo_loss(
                newlogprob,
                entropy,
                newvalue[:, 0],
                mb["logprobs"],
                mb["advantages"],
                mb["returns"],
                mb["values"],
                mb["valid"],
                args.clip_coef,
                args.clip_vloss,
                args.norm_adv,
                args.ent_coef,
                args.vf_coef,
            )

        (loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(agent_state.params)
        finite = jnp.isfinite(loss + optax.global_norm(grads))
        updated = agent_state.apply_gradients(grads=grads)
        # keep the weights (and Adam's moments) when the loss or the gradient is not finite
        agent_state = jax.tree_util.tree_map(lambda new, old: jnp.where(finite, new, old), updated, agent_state)
        return agent_state, metrics, finite

    for iteration in range(1, args.num_iterations + 1):
        frac = 1.0 - (iteration - 1.0) / args.num_iterations if args.anneal_lr else 1.0
        agent_state = with_learning_rate(agent_state, frac * args.learning_rate)

        obs, transitions, finished_games = [], [], []
        for _step in range(0, args.num_steps):
            global_step += args.num_envs
            obs.append(next_obs)
            handle, next_obs, statistics, key, transition, finished = rollout_step(
                agent_state, handle, next_obs, statistics, key
            )
            transitions.append(transition)
            finished_games.append(finished)
            if recorder:  # env 0 has stepped once the flag is read: its frame is the step's
                recorder.step(bool(finished[0][0]))

        # the games that ended in the rollout, read from the device once: (T, N) flags, scores and lengths
        ended, scores, lengths = jax.device_get(jax.tree_util.tree_map(lambda *x: jnp.stack(x), *finished_games))
        for step, env in zip(*np.nonzero(ended)):
            step_global = global_step - (args.num_steps - 1 - step) * args.num_envs
            recent_returns.append(float(scores[step, env]))
            writer.add_scalar("charts/episodic_return", scores[step, env], step_global)
            writer.add_scalar("charts/episodic_length", lengths[step, env], step_global)

        actions, logprobs, values, rewards, terminations, dones = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *transitions)
        obs = jnp.stack(obs)
        next_value = get_value(agent_state.params, next_obs)
        advantages, returns, valid = jax.jit(compute_gae)(
            rewards, values, dones, terminations, last_done, next_value, args.gamma, args.gae_lambda
        )
        last_done = dones[-1]

        batch = {
            "obs": obs.reshape((-1,) + envs.single_observation_space.shape),
            "logprobs": logprobs.reshape(-1),
            "actions": actions.reshape((-1,) + envs.single_action_space.shape),
            "advantages": advantages.reshape(-1),
            "returns": returns.reshape(-1),
            "values": values.reshape(-1),
            "valid": valid.reshape(-1),
        }

        b_inds = np.arange(args.batch_size)
        clipfracs, finite = [], []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]
                agent_state, metrics, mb_finite = update_minibatch(agent_state, batch, mb_inds)
                pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac = metrics
                clipfracs.append(clipfrac)
                finite.append(mb_finite)

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        # one sync per iteration: stop once a non-finite loss or gradient appeared (the weights never took it)
        if not all(jax.device_get(finite)):
            print(f"{os.path.basename(__file__)}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
            writer.close()
            envs.close()
            sys.exit(1)

        is_valid = np.asarray(batch["valid"]) > 0
        y_pred, y_true = np.asarray(batch["values"])[is_valid], np.asarray(batch["returns"])[is_valid]
        var_y = np.var(y_true) if len(y_true) > 0 else 0.0
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        sps = int(global_step / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", frac * args.learning_rate, global_step)
        writer.add_scalar("losses/value_loss", float(v_loss), global_step)
        writer.add_scalar("losses/policy_loss", float(pg_loss), global_step)
        writer.add_scalar("losses/entropy", float(entropy_loss), global_step)
        writer.add_scalar("losses/old_approx_kl", float(old_approx_kl), global_step)
        writer.add_scalar("losses/approx_kl", float(approx_kl), global_step)
        writer.add_scalar("losses/clipfrac", float(np.mean(jax.device_get(clipfracs))), global_step)
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
        with open(model_path, "wb") as f:
            f.write(
                flax.serialization.msgpack_serialize(
                    {"model": flax.serialization.to_state_dict(agent_state.params), "args": vars(args)}
                )
            )
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, capture_video=args.capture_video)
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
