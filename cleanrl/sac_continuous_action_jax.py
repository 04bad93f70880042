# Soft Actor-Critic (SAC) for continuous (Box) actions, e.g. the MuJoCo tasks, in JAX (Flax + Optax): the JAX
# version of sac_continuous_action.py, with the same algorithm, defaults, flags, outputs and checks.
# Papers: Haarnoja et al. 2018, "Soft Actor-Critic: Off-Policy Maximum Entropy Deep Reinforcement
# Learning with a Stochastic Actor" (ICML, arXiv:1801.01290), and Haarnoja et al. 2018, "Soft
# Actor-Critic Algorithms and Applications" (arXiv:1812.05905) for the automatically tuned
# temperature α with target entropy −dim(A) and twin Q-networks without a value network.
# Defaults are CleanRL's published ones: 256-256 ReLU MLPs, 1M replay buffer, batch 256, Adam with
# policy lr 3e-4 and Q / α lr 1e-3, τ 0.005, learning starts at 5k env steps (uniform random actions
# before), the actor and α updated twice every 2 env steps (TD3's delay, same number of updates),
# log-std squashed into [−5, 2].
# Deliberate differences from older implementations: each action dimension is rescaled to its own
# bounds [low, high] (tanh · (high − low)/2 + (high + low)/2, bounds read from the unwrapped env) and
# the log-prob carries the log-scale of that rescaling; log(1 − tanh²) is computed in its exact,
# stable softplus form instead of adding 1e-6; an episode cut by a time limit is not terminal (its
# transition stores the true final observation and bootstraps from it); with several envs every env
# step past learning_starts gets one gradient step, so the update-to-data ratio stays 1.
# Evaluation acts deterministically with the mean action tanh(μ) rescaled to the bounds.
# What the framework changes: layers start from Flax's default initialisation (LeCun-normal weights, zero
# biases) rather than torch's uniform ±1/√fan_in; random numbers come from JAX's PRNG (one key split
# explicitly), so a seed gives other samples than in the torch script, though the same values run after run;
# both Q-networks sit in one TrainState (params {"qf1", "qf2"}) with one Adam, as the torch script has one
# optimiser over both; the checkpoint is a Flax msgpack file; there is no --cuda or --torch-deterministic
# (JAX uses the accelerator it was installed for). The critic loss is read back every gradient step, as the
# torch script does, so a non-finite loss stops the run at its step (the actions are read back every step anyway).
import hashlib
import math
import os
import platform
import random
import re
import shlex
import sys
import time
import warnings
from collections import deque
from dataclasses import dataclass
from typing import Optional

import flax
import flax.linen as nn
import flax.serialization
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState
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

    env_id: str = "Hopper-v5"
    """the id of the environment"""
    total_timesteps: int = 1000000
    """total environment steps of the experiment"""
    num_envs: int = 1
    """the number of parallel game environments"""
    buffer_size: int = 1000000
    """the replay memory buffer size (transitions)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    tau: float = 0.005
    """target smoothing coefficient"""
    batch_size: int = 256
    """the batch size of sample from the replay memory"""
    learning_starts: int = 5000
    """timestep to start learning"""
    policy_lr: float = 3e-4
    """the learning rate of the policy network optimizer"""
    q_lr: float = 1e-3
    """the learning rate of the Q network optimizer (and of α's)"""
    policy_frequency: int = 2
    """the frequency of training the policy (delayed); it is then trained this many times"""
    target_network_frequency: int = 1
    """the frequency of updates for the target networks (env steps)"""
    alpha: float = 0.2
    """entropy regularization coefficient (the fixed one, without --autotune)"""
    autotune: bool = True
    """automatic tuning of the entropy coefficient"""


def make_env(env_id, idx, capture_video, run_name):
    def thunk():
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        return env

    return thunk


def make_vector_env(env_id, num_envs, capture_video, run_name):
    # SAME_STEP autoreset: a finished sub-env is reset inside the same `step` call, and its true last
    # observation comes back in `info["final_obs"]`, so every stored transition is a real one.
    return gym.vector.SyncVectorEnv(
        [make_env(env_id, i, capture_video, run_name) for i in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def action_bounds(env):
    """The env's per-dimension action bounds (low, high) as float32 arrays, read from the unwrapped env:
    wrappers such as ClipAction report (−inf, inf) although the env itself is bounded."""
    space = env.unwrapped.action_space
    return space.low.astype(np.float32), space.high.astype(np.float32)


def rescale_action(squashed, action_scale, action_bias):
    """Maps tanh outputs in [−1, 1] to the env's bounds, per dimension: y · scale + bias, with
    scale = (high − low) / 2 and bias = (high + low) / 2 ((B, A) squashed, (A,) scale and bias)."""
    return squashed * action_scale + action_bias


def squashed_gaussian_log_prob(u, mean, log_std, action_scale):
    """log π(a|s) of a = tanh(u) · scale + bias with u ~ N(mean, exp(log_std)), summed over the
    action dimensions; (B, A) inputs, (B,) output.

    Change of variables (SAC paper, appendix C): log N(u) − Σ log(scale · (1 − tanh(u)²)), with
    log(1 − tanh(u)²) = 2 (log 2 − u − softplus(−2u)), exact and finite for any u.
    """
    std = jnp.exp(log_std)
    gaussian = -((u - mean) ** 2) / (2.0 * std**2) - jnp.log(std) - 0.5 * math.log(2.0 * math.pi)
    log_det = jnp.log(action_scale) + 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return (gaussian - log_det).sum(axis=1)


def soft_update(target, source, tau):
    """Polyak averaging of parameters: target ← τ · source + (1 − τ) · target; returns the new target
    parameters (pytrees of the same structure)."""
    return optax.incremental_update(source, target, tau)


def soft_q_target(rewards, dones, gamma, qf1_next_target, qf2_next_target, next_log_pi, alpha):
    """Soft TD targets r + γ (1 − done) (min(Q1', Q2')(s', a') − α log π(a'|s')), a' ~ π(s'); (B,) arrays.

    `dones` marks terminal transitions only: a truncated transition bootstraps from its true final
    observation.
    """
    return rewards + gamma * (1.0 - dones) * (jnp.minimum(qf1_next_target, qf2_next_target) - alpha * next_log_pi)


LOG_STD_MAX = 2
LOG_STD_MIN = -5


class SoftQNetwork(nn.Module):
    @nn.compact
    def __call__(self, x, a):
        x = jnp.concatenate([x, a], -1)
        x = nn.relu(nn.Dense(256, name="fc1")(x))
        x = nn.relu(nn.Dense(256, name="fc2")(x))
        return nn.Dense(1, name="fc3")(x).squeeze(-1)


class Actor(nn.Module):
    action_low: np.ndarray
    action_high: np.ndarray

    @property
    def action_scale(self):
        return jnp.asarray((self.action_high - self.action_low) / 2.0, dtype=jnp.float32)

    @property
    def action_bias(self):
        return jnp.asarray((self.action_high + self.action_low) / 2.0, dtype=jnp.float32)

    @nn.compact
    def __call__(self, x):
        action_dim = len(self.action_low)
        x = nn.relu(nn.Dense(256, name="fc1")(x))
        x = nn.relu(nn.Dense(256, name="fc2")(x))
        mean = nn.Dense(action_dim, name="fc_mean")(x)
        log_std = jnp.tanh(nn.Dense(action_dim, name="fc_logstd")(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)  # into [LOG_STD_MIN, LOG_STD_MAX]
        return mean, log_std

    def get_action(self, x, key):
        """A reparameterised sample a ~ π(·|x) drawn with `key`, its log-prob (B,), and the deterministic action."""
        mean, log_std = self(x)
        u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        action = rescale_action(jnp.tanh(u), self.action_scale, self.action_bias)
        log_prob = squashed_gaussian_log_prob(u, mean, log_std, self.action_scale)
        return action, log_prob, rescale_action(jnp.tanh(mean), self.action_scale, self.action_bias)


class TrainState(TrainState):
    target_params: flax.core.FrozenDict = None  # the Q-networks' targets (None for the actor and α)


class ReplayBuffer:
    """A circular buffer of the last `buffer_size` transitions (obs, action, reward, next_obs, done).

    `next_obs` is the observation the action led to: at a time-limit truncation it is the episode's
    true final observation (not the next episode's first), and `done` is the termination flag only,
    so truncated transitions still bootstrap. Every stored slot is a whole transition, so any filled
    slot may be sampled.
    """

    def __init__(self, buffer_size, obs_shape, action_dim):
        self.buffer_size = buffer_size
        self.obs = np.zeros((buffer_size,) + obs_shape, dtype=np.float32)
        self.next_obs = np.zeros((buffer_size,) + obs_shape, dtype=np.float32)
        self.actions = np.zeros((buffer_size, action_dim), dtype=np.float32)
        self.rewards = np.zeros(buffer_size, dtype=np.float32)
        self.dones = np.zeros(buffer_size, dtype=np.float32)
        self.pos = 0
        self.size = 0

    def add(self, obs, actions, rewards, terminations, truncations, next_obs, final_obs):
        """Stores one vector step (arrays with a leading num_envs axis) taken from `obs`.

        `next_obs` is what `envs.step` returned: where an episode ended it already starts the next
        episode, so the true last observation `final_obs[i]` is stored instead.
        """
        for i in range(len(actions)):
            ended = terminations[i] or truncations[i]
            self.obs[self.pos] = obs[i]
            self.next_obs[self.pos] = final_obs[i] if ended else next_obs[i]
            self.actions[self.pos] = actions[i]
            self.rewards[self.pos] = rewards[i]
            self.dones[self.pos] = terminations[i]
            self.pos = (self.pos + 1) % self.buffer_size
            self.size = min(self.size + 1, self.buffer_size)

    def sample(self, batch_size):
        """`batch_size` transitions drawn uniformly (with replacement) as NumPy arrays (jit moves them to the device)."""
        idx = np.random.randint(0, self.size, size=batch_size)
        return self.obs[idx], self.actions[idx], self.rewards[idx], self.next_obs[idx], self.dones[idx]


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


def replay_memory_error(args, obs_shape, action_dim, headroom=2**30):
    """Why the replay buffer cannot fit in memory as one line (None when it fits or memory is unknown).

    NumPy allocates the buffer lazily, so a buffer too large would only fail once it fills up;
    `headroom` (bytes) is left for the networks and envs."""
    obs_bytes = int(np.prod(obs_shape)) * 4  # float32
    needed = args.buffer_size * (2 * obs_bytes + 4 * action_dim + 4 + 4)
    available = available_memory()
    if available is not None and needed + headroom > available:
        return (
            f"the replay buffer needs {needed / 2**30:.1f} GiB (--buffer-size {args.buffer_size}) plus "
            f"{headroom / 2**30:.0f} GiB for the rest, but only {available / 2**30:.1f} GiB of memory is available; "
            "lower --buffer-size"
        )
    return None


def space_error(args, env):
    """What the script cannot handle about the env's spaces, as one line, or None."""
    script = os.path.basename(__file__)
    action_space = env.unwrapped.action_space
    if not isinstance(action_space, gym.spaces.Box) or len(action_space.shape) != 1:
        return f"{script} supports 1-D Box action spaces; {args.env_id} has {action_space}"
    low, high = action_space.low, action_space.high
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
        return (
            f"{script} squashes actions into their bounds, which must be finite with high > low in every "
            f"dimension; {args.env_id} has low={low.tolist()} high={high.tolist()}"
        )
    observation_space = env.observation_space
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
        return f"{script} supports 1-D Box observations; {args.env_id} has {observation_space}"
    return None


def video_error(env_id):
    """Why `--capture-video` cannot film `env_id` here, as one line, or None. One frame is rendered at
    start-up, so a missing display or OpenGL back-end shows now rather than after the training."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GL back-ends warn on the way to their error: keep to one line
        try:
            env = gym.make(env_id, render_mode="rgb_array")
            env.reset(seed=0)
            env.render()
            env.close()
        except Exception as e:
            reason = (str(e).splitlines() or [""])[0]
            return (
                f"--capture-video cannot render {env_id} with MUJOCO_GL={os.environ.get('MUJOCO_GL')} "
                f"({type(e).__name__}: {reason}); headless machines need MUJOCO_GL=egl, the default when unset"
            )
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
    for name in ("num_envs", "buffer_size", "batch_size", "policy_frequency", "target_network_frequency"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}"
    if args.buffer_size < args.batch_size:
        return f"--buffer-size {args.buffer_size} is smaller than one batch (--batch-size {args.batch_size})"
    if args.learning_starts < 0:
        return f"--learning-starts must be at least 0, got {args.learning_starts}"
    run_steps = args.total_timesteps // args.num_envs * args.num_envs  # whole vector steps
    if run_steps <= args.learning_starts:
        return (
            f"--total-timesteps {args.total_timesteps} does not exceed --learning-starts {args.learning_starts} "
            "by a gradient step (one every env step), so no update would run"
        )
    if not 0.0 <= args.gamma <= 1.0:
        return f"--gamma must be in [0, 1], got {args.gamma}"
    if not 0.0 < args.tau <= 1.0:
        return f"--tau must be in (0, 1], got {args.tau}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    for name in ("policy_lr", "q_lr"):
        # Adam's first step divides the learning rate by 1 - β1 = 0.1, in float32
        if not 0.0 < getattr(args, name) <= float32_max / 10:
            flag = f"--{name.replace('_', '-')}"
            return f"{flag} must be positive and at most {float32_max / 10:.1e} (Adam), got {getattr(args, name)}"
    if not 0.0 <= args.alpha <= float32_max:
        return f"--alpha must be non-negative and finite in float32, got {args.alpha}"
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
- name: SAC (JAX)
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

# SAC (JAX) agent playing {args.env_id}

A SAC (Soft Actor-Critic) agent in JAX (Flax + Optax) trained on `{args.env_id}` by CleanRL's single-file script
[`{script}`]({script}), which is included in this repository with the checkpoint `{args.exp_name}.cleanrl_model`
and the TensorBoard logs of the run.

## Evaluation

Episodic return over {len(episodic_returns)} evaluation episodes: **{mean:.2f} ± {std:.2f}** (mean ± std).
{"The video `" + video + "` shows an evaluation episode." if video else ""}

## Use

```
python -m cleanrl_utils.enjoy --exp-name {args.exp_name} --hf-repository {repo_id}
```

The checkpoint is a Flax msgpack file: the actor's parameters under "model" (the Q-networks' under "qf1" and
"qf2"), the run's arguments under "args".

```python
import flax.serialization

with open("{args.exp_name}.cleanrl_model", "rb") as f:
    checkpoint = flax.serialization.msgpack_restore(f.read())
# params = flax.serialization.from_state_dict(actor.init(key, obs), checkpoint["model"]), actor = Actor(low, high) of {script}
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


def evaluate(model_path, eval_episodes, run_name, capture_video=False):
    """Runs the saved actor with its deterministic (mean) action for `eval_episodes` episodes;
    returns their episodic returns."""
    with open(model_path, "rb") as f:
        checkpoint = flax.serialization.msgpack_restore(f.read())
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval")
    actor = Actor(*action_bounds(envs.envs[0]))
    key = jax.random.PRNGKey(saved["seed"])  # unused by the deterministic action, which get_action also returns
    template = actor.init(key, np.zeros((1,) + envs.single_observation_space.shape, dtype=np.float32))
    actor_params = flax.serialization.from_state_dict(template, checkpoint["model"])
    deterministic_action = jax.jit(lambda params, obs: actor.apply(params, obs, key, method=Actor.get_action)[2])
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        actions = deterministic_action(actor_params, obs.astype(np.float32))
        obs, _, _, _, infos = envs.step(np.asarray(actions))
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    import tyro

    args = tyro.cli(Args)
    user_gl = os.environ.get("MUJOCO_GL")
    if args.capture_video:
        os.environ.setdefault("MUJOCO_GL", "egl")  # headless MuJoCo rendering
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array rendering needs no display
    # command-line values first, then the env (making it can already write files, e.g. MuJoCo's log)
    error = validation_error(args)
    if error is None:
        try:
            probe_env = gym.make(args.env_id)
        except Exception as e:  # unknown ids, missing modules or extras: all mean this env cannot be made
            error = f"cannot make {args.env_id!r}: {e}"
            if user_gl is not None and args.capture_video:  # MuJoCo reads MUJOCO_GL when the env is made
                error += f" (with MUJOCO_GL={user_gl}; headless machines need egl, the default when unset)"
        else:
            error = space_error(args, probe_env)
            if error is None:
                error = replay_memory_error(args, probe_env.observation_space.shape, probe_env.action_space.shape[0])
            probe_env.close()
            if error is None and args.capture_video:
                error = video_error(args.env_id)
    if error is not None:
        print(f"{os.path.basename(__file__)}: {error}", file=sys.stderr)
        sys.exit(2)
    num_iterations = args.total_timesteps // args.num_envs
    if args.total_timesteps % args.num_envs != 0:
        print(f"running {num_iterations * args.num_envs} steps: --total-timesteps rounded down to whole vector steps")

    random.seed(args.seed)
    np.random.seed(args.seed)
    key = jax.random.PRNGKey(args.seed)
    key, actor_key, qf1_key, qf2_key = jax.random.split(key, 4)

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
    obs_dim = envs.single_observation_space.shape[0]
    action_low, action_high = action_bounds(envs.envs[0])
    action_dim = len(action_low)

    actor = Actor(action_low, action_high)
    qf = SoftQNetwork()
    obs_example = np.zeros((1, obs_dim), dtype=np.float32)
    action_example = np.zeros((1, action_dim), dtype=np.float32)
    actor_state = TrainState.create(
        apply_fn=actor.apply,
        params=actor.init(actor_key, obs_example),
        tx=optax.adam(learning_rate=args.policy_lr),
    )
    qf_params = {
        "qf1": qf.init(qf1_key, obs_example, action_example),
        "qf2": qf.init(qf2_key, obs_example, action_example),
    }
    qf_state = TrainState.create(
        apply_fn=qf.apply,
        params=qf_params,
        target_params=qf_params,
        tx=optax.adam(learning_rate=args.q_lr),
    )

    if args.autotune:
        target_entropy = -float(action_dim)  # −dim(A), the SAC-v2 heuristic
        alpha_state = TrainState.create(
            apply_fn=None, params={"log_alpha": jnp.zeros((), dtype=jnp.float32)}, tx=optax.adam(learning_rate=args.q_lr)
        )
        alpha = jnp.exp(alpha_state.params["log_alpha"])
    else:
        alpha_state = None
        alpha = jnp.float32(args.alpha)

    @jax.jit
    def sample_action(actor_params, obs, key):
        key, action_key = jax.random.split(key)
        actions, _, _ = actor.apply(actor_params, obs, action_key, method=Actor.get_action)
        return actions, key

    @jax.jit
    def update_critic(actor_state, qf_state, alpha, b_obs, b_actions, b_rewards, b_next_obs, b_dones, key):
        key, next_key = jax.random.split(key)
        next_state_actions, next_state_log_pi, _ = actor.apply(
            actor_state.params, b_next_obs, next_key, method=Actor.get_action
        )
        qf1_next_target = qf.apply(qf_state.target_params["qf1"], b_next_obs, next_state_actions)
        qf2_next_target = qf.apply(qf_state.target_params["qf2"], b_next_obs, next_state_actions)
        next_q_value = soft_q_target(
            b_rewards, b_dones, args.gamma, qf1_next_target, qf2_next_target, next_state_log_pi, alpha
        )

        def loss_fn(params):
            qf1_a_values = qf.apply(params["qf1"], b_obs, b_actions)
            qf2_a_values = qf.apply(params["qf2"], b_obs, b_actions)
            qf1_loss = ((qf1_a_values - next_q_value) ** 2).mean()
            qf2_loss = ((qf2_a_values - next_q_value) ** 2).mean()
            metrics = {
                "qf1_values": qf1_a_values.mean(),
                "qf2_values": qf2_a_values.mean(),
                "qf1_loss": qf1_loss,
                "qf2_loss": qf2_loss,
            }
            return qf1_loss + qf2_loss, metrics

        (qf_loss, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(qf_state.params)
        metrics["qf_loss"] = qf_loss
        return qf_state.apply_gradients(grads=grads), metrics, key

    @jax.jit
    def update_actor(actor_state, qf_state, alpha_state, alpha, b_obs, key):
        """`policy_frequency` actor (and α) updates on one batch: TD3's delay, compensated."""

        def actor_loss_fn(params, alpha, key):
            pi, log_pi, _ = actor.apply(params, b_obs, key, method=Actor.get_action)
            qf1_pi = qf.apply(qf_state.params["qf1"], b_obs, pi)
            qf2_pi = qf.apply(qf_state.params["qf2"], b_obs, pi)
            return (alpha * log_pi - jnp.minimum(qf1_pi, qf2_pi)).mean()

        def one_update(_, carry):
            actor_state, alpha_state, alpha, key, _, alpha_loss = carry
            key, actor_key, alpha_key = jax.random.split(key, 3)
            actor_loss, grads = jax.value_and_grad(actor_loss_fn)(actor_state.params, alpha, actor_key)
            actor_state = actor_state.apply_gradients(grads=grads)
            if args.autotune:
                _, log_pi, _ = actor.apply(actor_state.params, b_obs, alpha_key, method=Actor.get_action)

                def alpha_loss_fn(params):
                    return (-jnp.exp(params["log_alpha"]) * (log_pi + target_entropy)).mean()

                alpha_loss, grads = jax.value_and_grad(alpha_loss_fn)(alpha_state.params)
                alpha_state = alpha_state.apply_gradients(grads=grads)
                alpha = jnp.exp(alpha_state.params["log_alpha"])
            return actor_state, alpha_state, alpha, key, actor_loss, alpha_loss

        zero = jnp.zeros((), dtype=jnp.float32)
        carry = (actor_state, alpha_state, alpha, key, zero, zero)
        actor_state, alpha_state, alpha, key, actor_loss, alpha_loss = jax.lax.fori_loop(
            0, args.policy_frequency, one_update, carry
        )
        return actor_state, alpha_state, alpha, {"actor_loss": actor_loss, "alpha_loss": alpha_loss}, key

    @jax.jit
    def update_target(qf_state):
        return qf_state.replace(target_params=soft_update(qf_state.target_params, qf_state.params, args.tau))

    rb = ReplayBuffer(args.buffer_size, envs.single_observation_space.shape, action_dim)

    global_step = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    actor_metrics = None
    obs, _ = envs.reset(seed=args.seed)
    for iteration in range(num_iterations):
        if global_step < args.learning_starts:
            actions = envs.action_space.sample()
        else:
            actions, key = sample_action(actor_state.params, obs.astype(np.float32), key)
            actions = np.asarray(actions)

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        previous_step, global_step = global_step, global_step + args.num_envs

        # where an episode ended, next_obs already starts the next one; the buffer takes the true last
        # observation from final_obs
        rb.add(obs, actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
        if "final_info" in infos and "episode" in infos["final_info"]:
            episode = infos["final_info"]["episode"]
            for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                recent_returns.append(float(episode["r"][i]))
                writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
        obs = next_obs

        # one gradient step for every env step past learning_starts that this vector step covered;
        # `step` numbers them so that the policy, target and logging cadences fire at their rates
        for step in range(max(previous_step, args.learning_starts) + 1, global_step + 1):
            b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(args.batch_size)
            qf_state, qf_metrics, key = update_critic(
                actor_state, qf_state, alpha, b_obs, b_actions, b_rewards, b_next_obs, b_dones, key
            )
            # one sync per gradient step: stop at the step whose loss is non-finite (nothing is saved)
            if not np.isfinite(float(qf_metrics["qf_loss"])):
                script = os.path.basename(__file__)
                print(f"{script}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
                writer.close()
                envs.close()
                sys.exit(1)

            if step % args.policy_frequency == 0:  # TD3's delayed update, compensated with as many updates
                actor_state, alpha_state, alpha, actor_metrics, key = update_actor(
                    actor_state, qf_state, alpha_state, alpha, b_obs, key
                )

            if step % args.target_network_frequency == 0:
                qf_state = update_target(qf_state)

            if step % 100 == 0:
                writer.add_scalar("losses/qf1_values", float(qf_metrics["qf1_values"]), global_step)
                writer.add_scalar("losses/qf2_values", float(qf_metrics["qf2_values"]), global_step)
                writer.add_scalar("losses/qf1_loss", float(qf_metrics["qf1_loss"]), global_step)
                writer.add_scalar("losses/qf2_loss", float(qf_metrics["qf2_loss"]), global_step)
                writer.add_scalar("losses/qf_loss", float(qf_metrics["qf_loss"]) / 2.0, global_step)
                if actor_metrics is not None:
                    writer.add_scalar("losses/actor_loss", float(actor_metrics["actor_loss"]), global_step)
                writer.add_scalar("losses/alpha", float(alpha), global_step)
                if actor_metrics is not None and args.autotune:
                    writer.add_scalar("losses/alpha_loss", float(actor_metrics["alpha_loss"]), global_step)
                writer.add_scalar("charts/SPS", int(global_step / (time.time() - start_time)), global_step)

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
        checkpoint = {
            "model": flax.serialization.to_state_dict(actor_state.params),
            "qf1": flax.serialization.to_state_dict(qf_state.params["qf1"]),
            "qf2": flax.serialization.to_state_dict(qf_state.params["qf2"]),
            "args": vars(args),
        }
        with open(model_path, "wb") as f:
            f.write(flax.serialization.msgpack_serialize(checkpoint))
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
