# QDagger: a DQN student (IMPALA CNN) learns from a DQN teacher (Nature CNN) on Atari. Papers: Agarwal et al. 2022,
# "Reincarnating Reinforcement Learning" (NeurIPS); Espeholt et al. 2018, "IMPALA" (ICML). CleanRL's defaults. Phases: score
# the teacher (saved by dqn_atari_jax.py --save-model, or CleanRL's on the Hub); it plays --teacher-steps ε-greedily into a new
# replay memory; the student trains --offline-steps on it with TD + distillation loss, then online with TD + λ_t distillation,
# λ_t = max(1 - G_student / G_teacher, 0) over the last --distill-window episodes. As CleanRL: the KL summed over the batch;
# the online ε schedule and learning_starts on a clock starting at --offline-steps. Deliberate differences from CleanRL:
# λ_t = 0 ends distillation for good (the paper's 1_{t < t0}); λ_t = (G_teacher - G_student) / |G_teacher|; online
# global_step from 0; offline evaluations; --num-envs > 1; dqn_atari.py's fixes. Evaluations act with ε = end-e.
# The JAX version of qdagger_dqn_atari_impalacnn.py; only the framework differs: Flax/Optax, jitted steps, Flax's init, a
# msgpack file; the IMPALA max-pool pads every side as torch's; non-finite losses are read at the logging cadence (and
# before a checkpoint, which so holds finite weights).
import functools
import glob
import importlib.util
import os
import random
import re
import shutil
import sys
import time
from collections import deque
from dataclasses import dataclass

import ale_py
import flax
import flax.linen as nn
import flax.traverse_util
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro
from flax.training.train_state import TrainState
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv, FireResetEnv, NoopResetEnv
from torch.utils.tensorboard import SummaryWriter

gym.register_envs(ale_py)
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no start-up banner before our one-line errors
SCRIPT = os.path.basename(__file__)
SLOT_BYTES = 84 * 84 + 18  # a replay slot: one uint8 frame, the action, reward and done, its age and a flag


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
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (check out `videos` folder)"""
    save_model: bool = False
    """whether to save the student into `runs/{run_name}` and evaluate it for 10 episodes"""
    upload_model: bool = False
    """whether to push the saved model, card, video, logs and script to the Hugging Face Hub (needs --save-model)"""
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

    teacher_model_path: str | None = None
    """a teacher saved by dqn_atari_jax.py --save-model (or a dqn_atari_jax Hub file); None: download it from the Hub"""
    teacher_policy_hf_repo: str | None = None
    """the Hugging Face Hub repo of the teacher (None: cleanrl/{env_id}-{teacher_model_exp_name}-seed1)"""
    teacher_model_exp_name: str = "dqn_atari_jax"
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
    checkpoint_every: int = 3000
    """write runs/{run_name}/checkpoint.pt every this many student gradient steps, at the end and at Ctrl-C; 0: never"""
    checkpoint_memory: bool = True
    """whether checkpoints hold the replay memory (without it, a resumed run refills it before learning again)"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def make_env(env_id, num_envs, capture_video, run_name):
    def thunk(idx):  # frameskip=1: v5 (and plain v4) ids skip frames inside ALE; here MaxAndSkip skips them once
        if capture_video and idx == 0:
            env = gym.make(env_id, frameskip=1, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, frameskip=1)
        env = NoopResetEnv(gym.wrappers.RecordEpisodeStatistics(env), noop_max=30)  # stats of the raw game: its score
        env = EpisodicLifeEnv(gym.wrappers.MaxAndSkipObservation(env, skip=4))
        env = ClipRewardEnv(FireResetEnv(env) if "FIRE" in env.unwrapped.get_action_meanings() else env)
        env = gym.wrappers.GrayscaleObservation(gym.wrappers.ResizeObservation(env, (84, 84)))
        return gym.wrappers.FrameStackObservation(env, 4)

    thunks = [functools.partial(thunk, i) for i in range(num_envs)]  # SAME_STEP: true last obs in info["final_obs"]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


class TeacherQNetwork(nn.Module):  # dqn_atari_jax.py's QNetwork (Nature CNN), layer for layer: its saved weights load as is
    n_actions: int

    @nn.compact
    def __call__(self, x):
        x = jnp.transpose(x, (0, 2, 3, 1)) / 255.0  # uint8 stacks (N, 4, 84, 84); Flax convolutions are channels-last
        x = nn.relu(nn.Conv(32, kernel_size=(8, 8), strides=(4, 4), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, kernel_size=(4, 4), strides=(2, 2), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, kernel_size=(3, 3), strides=(1, 1), padding="VALID")(x))
        x = nn.relu(nn.Dense(512)(x.reshape((x.shape[0], -1))))
        return nn.Dense(self.n_actions)(x)


class ResidualBlock(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x):
        y = nn.Conv(self.channels, kernel_size=(3, 3), padding=1)(nn.relu(x))
        y = nn.Conv(self.channels, kernel_size=(3, 3), padding=1)(nn.relu(y))
        return x + y


class ConvSequence(nn.Module):  # an IMPALA stage: a 3x3 conv, a 3x3 max-pool of stride 2 (H, W halved, rounding up), 2 blocks
    out_channels: int

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(self.out_channels, kernel_size=(3, 3), padding=1)(x)
        x = nn.max_pool(x, window_shape=(3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))  # as torch's padding=1
        x = ResidualBlock(self.out_channels)(x)
        return ResidualBlock(self.out_channels)(x)


class QNetwork(nn.Module):  # the student: the IMPALA CNN (stages of 16, 32 and 32 channels) with a 256-unit hidden layer
    n_actions: int

    @nn.compact
    def __call__(self, x):
        x = jnp.transpose(x, (0, 2, 3, 1)) / 255.0
        for out_channels in (16, 32, 32):
            x = ConvSequence(out_channels)(x)
        x = nn.relu(nn.Dense(256)(nn.relu(x.reshape((x.shape[0], -1)))))
        return nn.Dense(self.n_actions)(x)


class QNetworkState(TrainState):
    target_params: flax.core.FrozenDict


class ReplayBuffer:
    """Each frame stored once, stacks rebuilt when sampled: sub-env e writes a ring of `buffer_size // num_envs` slots, each
    an observation's newest frame and the action, clipped reward and termination taken from it (final frames get one too)."""

    def __init__(self, buffer_size, num_envs, frame_shape, stack_size):
        self.num_envs, self.capacity, self.stack_size = num_envs, buffer_size // num_envs, stack_size
        shape = (num_envs, self.capacity)
        self.frames, self.actions = np.zeros(shape + frame_shape, dtype=np.uint8), np.zeros(shape, dtype=np.int64)
        self.rewards, self.dones = np.zeros(shape, dtype=np.float32), np.zeros(shape, dtype=np.float32)
        self.age, self.can_sample = np.zeros(shape, dtype=np.int8), np.zeros(shape, dtype=bool)  # age: frames into the episode
        self.newest, self.filled = np.full(num_envs, -1), np.zeros(num_envs, dtype=np.int64)  # last slot written, slots used

    def _write_frame(self, env, frame, first):  # into the oldest slot: the transition it held is gone
        previous, slot = self.newest[env], (self.newest[env] + 1) % self.capacity
        self.age[env, slot] = 0 if first else min(self.age[env, previous] + 1, self.stack_size - 1)
        self.frames[env, slot], self.can_sample[env, slot], self.newest[env] = frame, False, slot
        self.filled[env] = min(self.filled[env] + 1, self.capacity)

    def start(self, obs):  # the first observations (num_envs, stack, H, W), from `envs.reset`
        for env in range(self.num_envs):
            self._write_frame(env, obs[env, -1], first=True)

    def add(self, actions, rewards, terminations, truncations, next_obs, final_obs):
        for e in range(self.num_envs):
            slot, ended = self.newest[e], terminations[e] or truncations[e]
            self.actions[e, slot], self.rewards[e, slot], self.dones[e, slot] = actions[e], rewards[e], terminations[e]
            if ended:
                self._write_frame(e, final_obs[e][-1], first=False)
            self.can_sample[e, slot] = True
            self._write_frame(e, next_obs[e, -1], first=ended)

    def stacks(self, env, slot):  # the observations (B, stack, H, W) whose newest frames are at `slot` of sub-envs `env`
        # no further back than the episode's first frame, which repeats as FrameStackObservation pads
        back = np.minimum(np.arange(self.stack_size - 1, -1, -1), self.age[env, slot][:, None])
        return self.frames[env[:, None], (slot[:, None] - back) % self.capacity]

    def sampleable(self, env, slot):  # a stored transition with whole stacks (once full, the oldest slots' stacks are not)
        gap = (slot - self.newest[env]) % self.capacity
        return self.can_sample[env, slot] & ~((self.filled[env] == self.capacity) & (gap >= 1) & (gap < self.stack_size))

    def sample(self, batch_size):  # uniformly, with replacement, among the sampleable slots
        env, slot, todo = np.zeros(batch_size, dtype=np.int64), np.zeros(batch_size, dtype=np.int64), np.arange(batch_size)
        while len(todo) > 0:  # draws that hit a slot that cannot be sampled are drawn again
            env[todo] = np.random.randint(0, self.num_envs, size=len(todo))
            slot[todo] = np.random.randint(0, self.filled[env[todo]])
            todo = todo[~self.sampleable(env[todo], slot[todo])]
        next_slot = (slot + 1) % self.capacity
        data = (self.stacks(env, slot), self.actions[env, slot], self.rewards[env, slot], self.stacks(env, next_slot))
        return (*data, self.dones[env, slot])


def epsilon_schedule(start_e, end_e, duration, t):  # linear from start_e to end_e over `duration` steps, then flat
    return end_e if duration <= 0 else start_e + (end_e - start_e) * min(t / duration, 1.0)


def td_target(rewards, next_q_max, dones, gamma):  # `dones` is termination only, so truncations bootstrap
    return rewards + gamma * next_q_max * (1.0 - dones)


def steps_crossed(previous_step, step, every):  # how many of the steps previous_step+1 .. step are multiples of `every`
    return step // every - previous_step // every


def distillation_loss(teacher_q_values, student_q_values, temperature):
    """Per-state KL(softmax(teacher Q / T) || softmax(student Q / T)), (B,): 0 when both policies agree."""
    teacher_log_policy = jax.nn.log_softmax(teacher_q_values / temperature, axis=-1)
    student_log_policy = jax.nn.log_softmax(student_q_values / temperature, axis=-1)
    return (jnp.exp(teacher_log_policy) * (teacher_log_policy - student_log_policy)).sum(axis=-1)


def distill_coefficient(recent_returns, teacher_return, window):
    """λ_t: how far the mean return of the last `window` episodes is behind the teacher's, as a fraction of |G_teacher|,
    floored at 0; 1 until `window` episodes finished. A teacher return of 0 gives 1 while the student scores below 0."""
    if len(recent_returns) < window:
        return 1.0
    student_return = float(np.mean(list(recent_returns)[-window:]))
    if teacher_return == 0:
        return 1.0 if student_return < 0 else 0.0
    return max((teacher_return - student_return) / abs(teacher_return), 0.0)


def teacher_weights(checkpoint, n_actions, env_id, source):
    """(params, None) for a dqn_atari_jax.py checkpoint or CleanRL's Hub files (bare params, or to_bytes([args, [params]])
    restored as {"0": args, "1": {"0": params}}), or (None, what is wrong, the fix)."""
    fix = f"pass a checkpoint saved by dqn_atari_jax.py --save-model on {env_id} with --teacher-model-path"
    params, saved_args = checkpoint, None
    if isinstance(checkpoint, dict) and "model" in checkpoint:
        params, saved_args = checkpoint["model"], checkpoint.get("args")
    elif isinstance(checkpoint, dict) and set(checkpoint) == {"0", "1"} and isinstance(checkpoint["1"], dict):
        params, saved_args = checkpoint["1"].get("0"), checkpoint["0"]
    flat = flax.traverse_util.flatten_dict(params, sep="/") if isinstance(params, dict) else None
    if flat is None or not all(isinstance(v, np.ndarray) for v in flat.values()):
        return None, f"the teacher {source} holds a {type(params).__name__}, not dqn_atari_jax.py parameters; {fix}"
    template = jax.eval_shape(TeacherQNetwork(n_actions).init, jax.random.PRNGKey(0), np.zeros((1, 4, 84, 84), np.uint8))
    expected = flax.traverse_util.flatten_dict(template, sep="/")
    if set(flat) != set(expected):
        differ = ", ".join(sorted(set(flat) ^ set(expected))[:3])
        return None, f"the teacher {source} is not a dqn_atari_jax.py QNetwork (parameters {differ} differ); {fix}"
    trained_on = saved_args.get("env_id") if isinstance(saved_args, dict) else None
    if trained_on not in (None, env_id):
        return None, f"the teacher {source} was trained on {trained_on}, not {env_id}; use --env-id {trained_on}, or {fix}"
    if (teacher_actions := flat["params/Dense_1/kernel"].shape[-1]) != n_actions:
        return None, f"the teacher {source} chooses among {teacher_actions} actions but {env_id} has {n_actions}; {fix}"
    for name, array in flat.items():
        if array.shape != expected[name].shape:
            return None, f"the teacher {source} is not a dqn_atari_jax.py QNetwork ({name} has shape {array.shape}); {fix}"
    return flax.serialization.from_state_dict(template, params), None


def load_teacher(args, n_actions):
    """(params, source, None) of the teacher at --teacher-model-path, else CleanRL's on the Hub; or (None, source, why)."""
    fix = "pass a checkpoint saved by dqn_atari_jax.py --save-model with --teacher-model-path"
    repo = args.teacher_policy_hf_repo or f"cleanrl/{args.env_id}-{args.teacher_model_exp_name}-seed1"
    path = source = args.teacher_model_path or f"{repo}/{args.teacher_model_exp_name}.cleanrl_model"
    reason = lambda e: f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0].split('. ')[0][:200]}"  # noqa: E731
    if args.teacher_model_path is None:
        try:
            from huggingface_hub import hf_hub_download, logging

            logging.set_verbosity_error()  # an unreachable Hub is retried for ~30 s, a log line per try
            path = hf_hub_download(repo_id=repo, filename=f"{args.teacher_model_exp_name}.cleanrl_model")
        except Exception as e:  # no network, no such repository or file, an invalid id, no huggingface_hub
            return None, source, f"cannot download the teacher {source} from the Hugging Face Hub ({reason(e)}); {fix}"
    elif not os.path.isfile(path):
        return None, source, f"--teacher-model-path {path}: no such file; {fix}"
    try:
        with open(path, "rb") as f:
            checkpoint = flax.serialization.msgpack_restore(f.read())
    except Exception as e:  # not a msgpack file (a torch checkpoint, text, a truncated download)
        return None, source, f"cannot read the teacher {source} as a flax msgpack checkpoint ({reason(e)}); {fix}"
    params, error = teacher_weights(checkpoint, n_actions, args.env_id, source)
    return params, source, error


def validation_error(args, env):  # the first reason this command line cannot run on `env`, as one line, or None
    memory = args.buffer_size * SLOT_BYTES
    sizes = ("total_timesteps", "num_envs", "buffer_size", "batch_size", "train_frequency", "target_network_frequency")
    sizes += ("teacher_eval_episodes", "offline_eval_frequency", "distill_window")
    checks = [
        (
            not isinstance(env.unwrapped, ale_py.AtariEnv),
            f"{args.env_id} is not an ale-py Atari game; {SCRIPT} needs one, e.g. BreakoutNoFrameskip-v4 or ALE/Breakout-v5",
        ),
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (args.buffer_size < 10 * args.num_envs, f"--buffer-size {args.buffer_size} leaves a sub-env fewer than 10 frames"),
        (
            memory > os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
            f"the replay buffer needs {memory / 2**30:.1f} GiB, more than this machine's memory; lower --buffer-size",
        ),
        (
            args.offline_steps > 0 and args.teacher_steps < args.num_envs,
            f"--offline-steps {args.offline_steps} needs the teacher's data: raise --teacher-steps or pass --offline-steps 0",
        ),
        (
            not all(0 <= getattr(args, k) <= 1 for k in ("gamma", "start_e", "end_e", "exploration_fraction")),
            "--gamma, --start-e, --end-e and --exploration-fraction must be in [0, 1]",
        ),
        (
            not 0 < args.learning_rate < 3.4e37,  # above, Adam's first step (lr / 0.1) overflows float32
            f"--learning-rate must be positive and finite in float32, got {args.learning_rate}",
        ),
        (not 0 < args.temperature < 3.4e38, f"--temperature must be positive and finite in float32, got {args.temperature}"),
        (not 0 <= args.seed < 2**32, f"--seed must be in [0, 2**32 - 1], got {args.seed}"),
        (
            not re.fullmatch(r"[\w.-]{1,150}", args.exp_name) or "__" in args.exp_name,
            f"--exp-name {args.exp_name!r} must be a folder name: up to 150 letters, digits, '.', '-' and single '_'",
        ),
        (args.capture_video and not importlib.util.find_spec("moviepy"), "--capture-video needs moviepy: pip install moviepy"),
    ]
    return next((message for failed, message in checks if failed), None)


def exit_if(error):  # a message stops the run before anything is created (one line on stderr, exit code 2); None goes on
    if error:
        print(f"{SCRIPT}: {error}", file=sys.stderr)
        sys.exit(2)


@functools.partial(jax.jit, static_argnums=0)
def greedy_actions(network, params, obs):
    return jnp.argmax(network.apply(params, obs), axis=1)


def play(q_network, params, envs, eval_episodes, epsilon, seed):
    """Scores of `eval_episodes` games played ε-greedily by `q_network` with `params` on the one-env vector env `envs`."""
    envs.action_space.seed(seed)
    obs, _ = envs.reset(seed=seed)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        if random.random() < epsilon:
            actions = envs.action_space.sample()
        else:
            actions = np.asarray(greedy_actions(q_network, params, obs))
        obs, _, _, _, infos = envs.step(actions)
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
    envs.close()
    return episodic_returns


def evaluate(model_path, eval_episodes, run_name, epsilon=0.01, capture_video=False):
    """Runs the saved student ε-greedily for `eval_episodes` games; returns their scores."""
    with open(model_path, "rb") as f:
        checkpoint = flax.serialization.msgpack_restore(f.read())
    envs = make_env(checkpoint["args"]["env_id"], 1, capture_video, f"{run_name}-eval")
    q_network = QNetwork(int(envs.single_action_space.n))
    return play(q_network, checkpoint["model"], envs, eval_episodes, epsilon, checkpoint["args"]["seed"] + 100_000)


if __name__ == "__main__":
    args = tyro.cli(Args)
    ckpt = None  # checkpoints, --resume and clean stops: cleanrl_utils/checkpoint.py, imported only when asked for
    if (args.checkpoint_every or args.resume) and importlib.util.find_spec("cleanrl_utils"):
        ckpt = importlib.import_module("cleanrl_utils.checkpoint").Checkpoint(SCRIPT, args)  # --resume: the saved flags
    elif args.resume:
        exit_if("--resume needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    elif args.checkpoint_every:  # a script copied alone trains without them
        print(f"{SCRIPT}: checkpoints are off: they need cleanrl_utils (pip install -e . in a cleanrl clone)")
    try:  # unknown ids, missing modules or extras all mean this env cannot be made
        env = gym.make(args.env_id)
    except Exception as e:
        exit_if(f"cannot make {args.env_id!r}: {e}")
    exit_if(validation_error(args, env))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    n_actions = int(env.action_space.n)
    teacher_params, teacher_source, error = load_teacher(args, n_actions)  # last: it may download
    if error:
        exit_if(error)
    teacher_iterations = args.teacher_steps // args.num_envs if args.offline_steps > 0 else 0
    num_iterations = args.total_timesteps // args.num_envs
    if args.total_timesteps % args.num_envs != 0:
        print(f"running {num_iterations * args.num_envs} steps: --total-timesteps rounded down to whole vector steps")
    online_learning_starts = args.learning_starts - args.offline_steps  # the online clock starts at offline_steps
    if num_iterations * args.num_envs // args.train_frequency <= max(online_learning_starts, 0) // args.train_frequency:
        print(f"{SCRIPT}: warning: the run ends before its first online gradient step (its clock starts at --offline-steps)")
    run_time = int(time.time())  # a run that started in the same second owns that name; a resumed run keeps its own
    while os.path.exists(f"runs/{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{run_time}"):
        run_time += 1
    run_name = ckpt.run_name if args.resume else f"{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{run_time}"
    if args.track:
        import wandb

        try:  # with no API key, W&B would wait at a login prompt
            if wandb.setup().settings.mode in ("online", "run", "shared") and not wandb.login(prompt=False):
                raise RuntimeError("no API key")
            wandb.init(
                project=args.wandb_project_name,
                entity=args.wandb_entity,
                name=run_name,
                config=vars(args),
                sync_tensorboard=True,
                save_code=True,
            )
        except Exception as e:  # not logged in, no network, unknown entity: stop before anything is written
            reason = (str(e).splitlines() or [type(e).__name__])[0]
            exit_if(f"--track could not start a W&B run ({reason}); run `wandb login` or set WANDB_MODE=offline")
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in vars(args).items()))
    uploaded_videos = set()  # W&B gets each finished video once (RecordVideo has no W&B hook)

    unchecked = []  # (finite flag on the device, where) of the updates since the last check

    def stop_on_non_finite():  # one sync per check; names the first update whose loss was non-finite
        for finite, where in zip(jax.device_get([finite for finite, _ in unchecked]), [where for _, where in unchecked]):
            if not finite:
                writer.close()
                sys.exit(f"{SCRIPT}: non-finite loss at {where}; stopping")
        unchecked.clear()

    random.seed(args.seed)
    np.random.seed(args.seed)
    q_key = jax.random.split(jax.random.PRNGKey(args.seed))[1]
    eval_seed = args.seed + 100_000  # evaluations play other games than training

    teacher, teacher_params = TeacherQNetwork(n_actions), jax.device_put(teacher_params)
    q_network = QNetwork(n_actions)
    q_params = jax.jit(q_network.init)(q_key, np.zeros((1, 4, 84, 84), dtype=np.uint8))
    tx = optax.adam(learning_rate=args.learning_rate)
    q_state = QNetworkState.create(apply_fn=q_network.apply, params=q_params, target_params=q_params, tx=tx)

    @functools.partial(jax.jit, static_argnames="distill")
    def update(q_state, teacher_params, obs, actions, rewards, next_obs, dones, distill_coeff, distill):
        """One gradient step on TD + distill_coeff × distillation loss (TD alone when `distill` is False)."""
        td_targets = td_target(rewards, q_network.apply(q_state.target_params, next_obs).max(axis=1), dones, args.gamma)
        teacher_q_values = teacher.apply(teacher_params, obs) if distill else None

        def loss_fn(params):
            student_q_values = q_network.apply(params, obs)
            old_val = jnp.take_along_axis(student_q_values, actions[:, None], axis=1)[:, 0]
            td_loss = ((td_targets - old_val) ** 2).mean()
            if not distill:
                return td_loss, (td_loss, jnp.zeros(()), old_val)
            distill_loss = distillation_loss(teacher_q_values, student_q_values, args.temperature).sum()  # see the header
            return td_loss + distill_coeff * distill_loss, (td_loss, distill_loss, old_val)

        (loss, (td_loss, distill_loss, old_val)), grads = jax.value_and_grad(loss_fn, has_aux=True)(q_state.params)
        metrics = dict(loss=loss, td_loss=td_loss, distill_loss=distill_loss, q_values=old_val.mean())
        metrics["finite"] = jnp.isfinite(loss)
        return q_state.apply_gradients(grads=grads), metrics

    update_target = jax.jit(lambda s: s.replace(target_params=optax.incremental_update(s.params, s.target_params, args.tau)))

    envs = make_env(args.env_id, args.num_envs, args.capture_video, run_name)  # the student's, online
    envs.action_space.seed(args.seed)
    rb = ReplayBuffer(args.buffer_size, args.num_envs, (84, 84), 4)  # one at a time: the teacher's, the student's
    frames, ale = rb.capacity * args.num_envs, envs.envs[0].unwrapped.ale
    print(f"replay buffer: {frames} frames x {SLOT_BYTES} B = {frames * SLOT_BYTES / 2**30:.2f} GiB when full")
    print(f"{args.env_id}: frame skip 4, sticky-action probability {ale.getFloat('repeat_action_probability'):g}")
    teacher_return, teacher_step, offline_step = None, 0, 0  # where the phases are: a resumed run goes on from there
    global_step, num_updates, distill_coeff, log_due, recent_returns = 0, 0, 1.0, False, deque(maxlen=args.distill_window)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        names = "teacher_return rb teacher_step offline_step q_state global_step num_updates distill_coeff log_due"
        # purge=False: the phases log on step axes of their own, which a log restart at global_step would cut
        ckpt.start(writer, envs, globals(), names + " recent_returns", purge=False)
    online_learning_starts = args.learning_starts - args.offline_steps  # as moved on by a resume without the memory
    # ---- ALGO LOGIC: the training phases (teacher score and play, offline and online distillation); the set-up ends here ----
    if teacher_return is None:  # phase 1: the teacher's score, the bar the student's training returns are measured against
        eval_envs = make_env(args.env_id, 1, False, run_name)
        teacher_scores = play(teacher, teacher_params, eval_envs, args.teacher_eval_episodes, args.end_e, eval_seed)
        teacher_return = float(np.mean(teacher_scores))
        writer.add_scalar("charts/teacher/avg_episodic_return", teacher_return, 0)
        print(f"teacher {teacher_source}: mean episodic return {teacher_return:.2f} over {args.teacher_eval_episodes} games")
    if global_step == 0 and offline_step < args.offline_steps:  # phases 2 and 3, unless a resumed run is past them
        if teacher_step and not rb.filled.any():  # resumed from a checkpoint without the teacher's memory
            print(f"{SCRIPT}: the teacher plays its --teacher-steps {args.teacher_steps} into the offline memory again")
            teacher_step = 0
        if teacher_step < teacher_iterations * args.num_envs:
            # phase 2: the teacher plays, ε-greedily with ε from start-e to end-e, into the offline replay memory
            teacher_envs = make_env(args.env_id, args.num_envs, args.capture_video, f"{run_name}-teacher")
            teacher_envs.action_space.seed(args.seed + teacher_step)
            teacher_returns, last_print = deque(maxlen=20), time.time()
            obs, _ = teacher_envs.reset(seed=args.seed + teacher_step)  # a resumed run starts new episodes
            rb.start(obs)
            for iteration in range(teacher_step // args.num_envs, teacher_iterations):
                epsilon = epsilon_schedule(args.start_e, args.end_e, args.teacher_steps, teacher_step)
                explore = np.random.random(args.num_envs) < epsilon
                actions = teacher_envs.action_space.sample()
                if not explore.all():
                    actions = np.where(explore, actions, np.asarray(greedy_actions(teacher, teacher_params, obs)))
                next_obs, rewards, terminations, truncations, infos = teacher_envs.step(actions)
                teacher_step += args.num_envs
                rb.add(actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
                if "final_info" in infos and "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                        teacher_returns.append(float(episode["r"][i]))
                        writer.add_scalar("charts/teacher/episodic_return", episode["r"][i], teacher_step)
                        writer.add_scalar("charts/teacher/episodic_length", episode["l"][i], teacher_step)
                obs = next_obs
                if time.time() - last_print > 10 or iteration == teacher_iterations - 1:
                    last_print = time.time()
                    recent = f"{np.mean(teacher_returns):.2f}" if teacher_returns else "n/a"
                    print(f"teacher_step={teacher_step}, episodic_return(last {len(teacher_returns)})={recent}", flush=True)
                if ckpt:  # no gradient step to count: only Ctrl-C or SIGTERM writes one here
                    ckpt.step(offline_step + num_updates)
            teacher_envs.close()

        # phase 3: the student learns offline from the teacher's replay memory, with full distillation
        phase_start, phase_step, last_print, eval_time = time.time(), offline_step, time.time(), 0.0
        for offline_step in range(phase_step + 1, args.offline_steps + 1):
            q_state, metrics = update(q_state, teacher_params, *rb.sample(args.batch_size), 1.0, distill=True)
            unchecked.append((metrics["finite"], f"offline step {offline_step}"))
            if offline_step % args.target_network_frequency == 0:
                q_state = update_target(q_state)

            due = offline_step % args.offline_eval_frequency == 0 or offline_step == args.offline_steps
            checked = offline_step % 100 == 0 or offline_step == args.offline_steps or due
            if checked:
                stop_on_non_finite()
            if offline_step % 100 == 0 or offline_step == args.offline_steps:
                metrics = jax.device_get(metrics)
                writer.add_scalar("charts/offline/loss", metrics["loss"], offline_step)
                writer.add_scalar("charts/offline/q_loss", metrics["td_loss"], offline_step)
                writer.add_scalar("charts/offline/distill_loss", metrics["distill_loss"], offline_step)
                # gradient steps per second, evaluations left out; fractional: a CPU manages only a few
                sps = (offline_step - phase_step) / (time.time() - phase_start - eval_time)
                writer.add_scalar("charts/offline/SPS", sps, offline_step)
            if time.time() - last_print > 10 or offline_step == args.offline_steps:
                last_print = time.time()
                print(f"offline_step={offline_step}, loss={float(metrics['loss']):.4f}", flush=True)
            if due and args.offline_eval_episodes > 0:
                eval_start, eval_envs = time.time(), make_env(args.env_id, 1, False, run_name)
                returns = play(q_network, q_state.params, eval_envs, args.offline_eval_episodes, args.end_e, eval_seed)
                student_return = np.mean(returns)
                writer.add_scalar("charts/offline/avg_episodic_return", student_return, offline_step)
                print(f"offline_step={offline_step}, the student's mean episodic return {student_return:.2f}", flush=True)
                eval_time += time.time() - eval_start
            if ckpt and checked:  # at its cadence (after a check: the weights are finite), and after Ctrl-C or SIGTERM
                ckpt.step(offline_step + num_updates)

    # phase 4: the student acts and learns online, distilling while it is behind the teacher
    if global_step == 0:  # the online phase starts a replay memory of its own (a resumed one has its memory back)
        rb = ReplayBuffer(args.buffer_size, args.num_envs, (84, 84), 4)
    exploration_steps = args.exploration_fraction * args.total_timesteps
    start_time, start_step, last_print = time.time(), global_step, time.time()
    obs, _ = envs.reset(seed=args.seed + global_step)  # a resumed run starts new episodes
    rb.start(obs)
    for iteration in range(global_step // args.num_envs, num_iterations):
        epsilon = epsilon_schedule(args.start_e, args.end_e, exploration_steps, args.offline_steps + global_step)
        # ε-greedy per sub-env; the network is only asked when some sub-env acts greedily
        explore = np.random.random(args.num_envs) < epsilon
        actions = envs.action_space.sample()
        if not explore.all():
            actions = np.where(explore, actions, np.asarray(greedy_actions(q_network, q_state.params, obs)))

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        previous_step, global_step = global_step, global_step + args.num_envs

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
            # one update per `train_frequency` env steps past learning_starts that this vector step covered: with
            # --num-envs 1, upstream's rate (`global_step % args.train_frequency == 0`, its global_step counting from 0)
            num_owed = steps_crossed(max(previous_step, online_learning_starts), global_step, args.train_frequency)
            for _ in range(num_owed):  # once distillation is over, the teacher is not even asked
                batch = rb.sample(args.batch_size)
                q_state, metrics = update(q_state, teacher_params, *batch, distill_coeff, distill=distill_coeff > 0)
                unchecked.append((metrics["finite"], f"global_step {global_step}"))
                num_updates += 1

            if log_due and num_owed > 0:  # at the first update past each multiple of 100 env steps
                log_due = False
                stop_on_non_finite()
                metrics = jax.device_get(metrics)
                writer.add_scalar("losses/loss", metrics["loss"], global_step)
                writer.add_scalar("losses/td_loss", metrics["td_loss"], global_step)
                if distill_coeff > 0:
                    writer.add_scalar("losses/distill_loss", metrics["distill_loss"], global_step)
                writer.add_scalar("losses/q_values", metrics["q_values"], global_step)
                writer.add_scalar("charts/distill_coeff", distill_coeff, global_step)
                writer.add_scalar("charts/epsilon", epsilon, global_step)
                writer.add_scalar("charts/SPS", int((global_step - start_step) / (time.time() - start_time)), global_step)

            for _ in range(steps_crossed(previous_step, global_step, args.target_network_frequency)):
                q_state = update_target(q_state)

        if time.time() - last_print > 10 or iteration == num_iterations - 1:
            last_print = time.time()
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            sps = int((global_step - start_step) / (time.time() - start_time))
            left = (num_iterations - 1 - iteration) * args.num_envs / max(sps, 1)  # seconds, at the current speed
            print(
                f"global_step={global_step}, {global_step / args.total_timesteps:.1%} of {args.total_timesteps}, "
                f"episodic_return(last {len(recent_returns)})={recent}, distill_coeff={distill_coeff:.3f}, SPS={sps}, "
                f"{left // 3600:.0f}:{time.strftime('%M:%S', time.gmtime(left))} left",
                flush=True,
            )
            for path in sorted(set(glob.glob(f"videos/{run_name}/*.mp4")) - uploaded_videos) if args.track else []:
                uploaded_videos.add(path)
                wandb.log({"videos": wandb.Video(path, format="mp4")})
        if ckpt:  # at its cadence, at the end, and after Ctrl-C or SIGTERM, which then ends the run here
            stop_on_non_finite()  # a checkpoint holds finite weights (acting has synced with the updates already)
            ckpt.step(offline_step + num_updates, last=iteration == num_iterations - 1)
    envs.close()  # RecordVideo writes the video of an episode still running when it closes
    stop_on_non_finite()  # the updates since the last logged step

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        checkpoint = {"model": flax.serialization.to_state_dict(jax.device_get(q_state.params)), "args": vars(args)}
        with open(model_path, "wb") as f:
            f.write(flax.serialization.msgpack_serialize(checkpoint))
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, epsilon=args.end_e, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")

    writer.close()
    if args.track:  # the videos not sent yet: the teacher's, the training's last and the evaluation's
        for path in sorted(set(glob.glob(f"videos/{run_name}*/*.mp4")) - uploaded_videos):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "QDagger (JAX)", "a DQN student distilled from a teacher")
