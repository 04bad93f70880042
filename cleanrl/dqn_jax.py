# Deep Q-Network (DQN) for Discrete actions on vector observations (classic control): the JAX version of dqn.py.
# Paper: Mnih et al. 2015, "Human-level control through deep reinforcement learning" (Nature 518).
# Defaults are CleanRL's published ones (10k replay buffer, batch 128, Adam lr 2.5e-4, hard target
# copy every 500 steps, ε 1 → 0.05 over half the run, learning starts at 10k, a gradient step every
# 10 env steps, a 120-84 ReLU MLP, MSE TD loss).
# Deliberate differences from the paper: MSE instead of the clipped (Huber) error, Adam instead of
# RMSProp; an episode cut by a time limit is not terminal: its transition stores the true final
# observation as next_obs and bootstraps from it. Evaluation acts ε-greedily with ε = 0.05.
# Only the framework differs from dqn.py: Flax/Optax instead of PyTorch, each gradient step one jitted
# function. Flax's default initialisation (LeCun-normal weights, zero biases) replaces torch's uniform
# one. The checkpoint is a flax msgpack file, not a torch one.
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

    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 500000
    """total environment steps of the experiment"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    buffer_size: int = 10000
    """the replay memory buffer size (transitions)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    tau: float = 1.0
    """the target network update rate (1.0: a hard copy)"""
    target_network_frequency: int = 500
    """the timesteps it takes to update the target network"""
    batch_size: int = 128
    """the batch size of sample from the replay memory"""
    start_e: float = 1
    """the starting epsilon for exploration"""
    end_e: float = 0.05
    """the ending epsilon for exploration"""
    exploration_fraction: float = 0.5
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    learning_starts: int = 10000
    """timestep to start learning"""
    train_frequency: int = 10
    """the frequency of training (env steps per gradient step)"""


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


class QNetwork(nn.Module):
    n_actions: int

    def setup(self):
        # the input size comes from the observation `init` is given
        self.network = nn.Sequential(
            [
                nn.Dense(120),
                nn.relu,
                nn.Dense(84),
                nn.relu,
                nn.Dense(self.n_actions),
            ]
        )

    def __call__(self, x):
        return self.network(x)


class QNetworkState(TrainState):
    """The Q-network's parameters and optimiser state, with the target network's parameters alongside."""

    target_params: flax.core.FrozenDict


class ReplayBuffer:
    """A circular buffer of the last `buffer_size` transitions (obs, action, reward, next_obs, done).

    `next_obs` is the observation the action led to: at a time-limit truncation it is the episode's
    true final observation (not the next episode's first), and `done` is the termination flag only,
    so truncated transitions still bootstrap. Every stored slot is a whole transition, so any filled
    slot may be sampled.
    """

    def __init__(self, buffer_size, obs_shape):
        self.buffer_size = buffer_size
        self.obs = np.zeros((buffer_size,) + obs_shape, dtype=np.float32)
        self.next_obs = np.zeros((buffer_size,) + obs_shape, dtype=np.float32)
        self.actions = np.zeros(buffer_size, dtype=np.int64)
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
        """`batch_size` transitions drawn uniformly (with replacement) as NumPy arrays (the jitted update moves them)."""
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


def replay_memory_error(args, obs_shape, headroom=2**30):
    """Why the replay buffer cannot fit in memory as one line (None when it fits or memory is unknown).

    NumPy allocates the buffer lazily, so a buffer too large would only fail once it fills up;
    `headroom` (bytes) is left for the networks and envs."""
    obs_bytes = int(np.prod(obs_shape)) * 4  # float32
    needed = args.buffer_size * (2 * obs_bytes + 8 + 4 + 4)
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
    """One-step TD targets r + γ (1 - done) max_a' Q_target(s', a'), all (B,) float32 arrays.

    `dones` marks terminal transitions only; a truncated transition bootstraps from its true final
    observation, whose target value is `next_q_max`.
    """
    return rewards + gamma * next_q_max * (1.0 - dones)


def steps_crossed(previous_step, step, every):
    """How many multiples of `every` lie in (previous_step, step]: the updates a cadence owes
    after a vector step took `global_step` from `previous_step` to `step`."""
    return step // every - previous_step // every


def space_error(args, observation_space, action_space):
    """What the script cannot handle about the env's spaces, as one line, or None."""
    script = os.path.basename(__file__)
    if not isinstance(action_space, gym.spaces.Discrete):
        return f"{script} supports Discrete action spaces; {args.env_id} has {action_space}"
    if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
        return f"{script} supports 1-D Box observations; {args.env_id} has {observation_space}"
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
    if args.buffer_size < args.batch_size:
        return f"--buffer-size {args.buffer_size} is smaller than one batch (--batch-size {args.batch_size})"
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
    if not 0.0 < args.tau <= 1.0:
        return f"--tau must be in (0, 1], got {args.tau}"
    float32_max = float(np.finfo(np.float32).max)  # the update computes in float32
    # Adam's first step divides the learning rate by 1 - β1 = 0.1, in float32
    if not 0.0 < args.learning_rate <= float32_max / 10:
        return f"--learning-rate must be positive and at most {float32_max / 10:.1e} (Adam), got {args.learning_rate}"
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
    versions = [platform.python_version(), jax.__version__, flax.__version__, optax.__version__, gym.__version__]
    versions += [np.__version__, huggingface_hub.__version__]
    return f"""---
tags:
- {args.env_id}
- deep-reinforcement-learning
- reinforcement-learning
- custom-implementation
library_name: cleanrl
model-index:
- name: DQN (JAX)
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

# DQN (JAX) agent playing {args.env_id}

A DQN (Deep Q-Network) agent trained on `{args.env_id}` by CleanRL's single-file JAX script
[`{script}`]({script}), which is included in this repository with the checkpoint `{args.exp_name}.cleanrl_model`
and the TensorBoard logs of the run.

## Evaluation

Episodic return over {len(episodic_returns)} evaluation episodes: **{mean:.2f} ± {std:.2f}** (mean ± std).
{"The video `" + video + "` shows an evaluation episode." if video else ""}

## Use

```
python -m cleanrl_utils.enjoy --exp-name {args.exp_name} --hf-repository {repo_id}
```

The checkpoint is a flax msgpack file holding the Q-network's parameters and the run's args; to load it in Python:

```python
import flax.serialization
import gymnasium as gym
import jax
import numpy as np

from {os.path.splitext(script)[0]} import QNetwork  # the script in this repository

with open("{args.exp_name}.cleanrl_model", "rb") as f:
    checkpoint = flax.serialization.msgpack_restore(f.read())
env = gym.make(checkpoint["args"]["env_id"])
q_network = QNetwork(env.action_space.n)
template = q_network.init(jax.random.PRNGKey(0), np.zeros((1,) + env.observation_space.shape, np.float32))
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
    """Runs the saved Q-network ε-greedily for `eval_episodes` episodes; returns their episodic returns."""
    with open(model_path, "rb") as f:
        checkpoint = flax.serialization.msgpack_restore(f.read())
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval")
    envs.action_space.seed(saved["seed"] + 100_000)
    q_network = QNetwork(envs.single_action_space.n)
    template = jax.eval_shape(
        q_network.init, jax.random.PRNGKey(0), np.zeros((1,) + envs.single_observation_space.shape, np.float32)
    )
    params = flax.serialization.from_state_dict(template, checkpoint["model"])
    greedy_actions = jax.jit(lambda params, obs: jnp.argmax(q_network.apply(params, obs), axis=1))
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        if random.random() < epsilon:
            actions = envs.action_space.sample()
        else:
            actions = np.asarray(greedy_actions(params, obs))
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
            error = space_error(args, probe_env.observation_space, probe_env.action_space)
            if error is None:
                error = replay_memory_error(args, probe_env.observation_space.shape)
            probe_env.close()
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

    q_network = QNetwork(envs.single_action_space.n)
    # jitted: one compilation instead of one per operation of the initialisers
    q_params = jax.jit(q_network.init)(q_key, np.zeros((1,) + envs.single_observation_space.shape, np.float32))
    # the target network starts as a copy of the Q-network (JAX arrays are immutable: sharing them is a copy)
    q_state = QNetworkState.create(
        apply_fn=q_network.apply,
        params=q_params,
        target_params=q_params,
        tx=optax.adam(learning_rate=args.learning_rate),
    )

    @jax.jit
    def greedy_actions(params, obs):
        return jnp.argmax(q_network.apply(params, obs), axis=1)

    @jax.jit
    def update(q_state, obs, actions, rewards, next_obs, dones):
        """One gradient step on a sampled batch; returns the new state, the loss and the mean Q(s, a)."""
        target_max = q_network.apply(q_state.target_params, next_obs).max(axis=1)
        td_targets = td_target(rewards, target_max, dones, args.gamma)

        def mse_loss(params):
            old_val = q_network.apply(params, obs)[jnp.arange(len(actions)), actions]
            return ((td_targets - old_val) ** 2).mean(), old_val

        (loss, old_val), grads = jax.value_and_grad(mse_loss, has_aux=True)(q_state.params)
        return q_state.apply_gradients(grads=grads), loss, old_val.mean()

    @jax.jit
    def update_target(q_state):
        return q_state.replace(target_params=optax.incremental_update(q_state.params, q_state.target_params, args.tau))

    rb = ReplayBuffer(args.buffer_size, envs.single_observation_space.shape)
    exploration_steps = args.exploration_fraction * args.total_timesteps

    global_step = 0
    num_updates = 0
    start_time = time.time()
    last_print = start_time
    recent_returns = deque(maxlen=20)
    obs, _ = envs.reset(seed=args.seed)
    for iteration in range(num_iterations):
        epsilon = epsilon_schedule(args.start_e, args.end_e, exploration_steps, global_step)
        # ε-greedy per sub-env; the network is only asked when some sub-env acts greedily
        explore = np.random.random(args.num_envs) < epsilon
        actions = envs.action_space.sample()
        if not explore.all():
            actions = np.where(explore, actions, np.asarray(greedy_actions(q_state.params, obs)))

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

        if global_step > args.learning_starts:
            # updates owed for the env steps past learning_starts that this vector step covered
            for _ in range(steps_crossed(max(previous_step, args.learning_starts), global_step, args.train_frequency)):
                new_state, loss, q_mean = update(q_state, *rb.sample(args.batch_size))
                # one sync per gradient step (acting waits for the update anyway): stop before the step's
                # weights, made from a non-finite loss, are used
                if not np.isfinite(loss):
                    script = os.path.basename(__file__)
                    print(f"{script}: non-finite loss at global_step {global_step}; stopping", file=sys.stderr)
                    writer.close()
                    envs.close()
                    sys.exit(1)
                q_state = new_state
                num_updates += 1

                if num_updates % 100 == 0:
                    sps = int(global_step / (time.time() - start_time))
                    writer.add_scalar("losses/td_loss", float(loss), global_step)
                    writer.add_scalar("losses/q_values", float(q_mean), global_step)
                    writer.add_scalar("charts/epsilon", epsilon, global_step)
                    writer.add_scalar("charts/SPS", sps, global_step)

            for _ in range(steps_crossed(previous_step, global_step, args.target_network_frequency)):
                q_state = update_target(q_state)

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
        with open(model_path, "wb") as f:
            f.write(
                flax.serialization.msgpack_serialize(
                    {"model": flax.serialization.to_state_dict(q_state.params), "args": vars(args)}
                )
            )
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
