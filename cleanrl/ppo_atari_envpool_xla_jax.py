# PPO (Schulman et al. 2017, arXiv:1707.06347; GAE: arXiv:1506.02438) on Atari games run by envpool (Weng et al. 2022,
# arXiv:2206.10558), which does Mnih et al. 2015's preprocessing (frame skip 4, up to 30 no-op starts, FIRE after resets,
# no sticky actions, 27000 agent steps per game): the JAX version of ppo_atari_envpool.py. Deliberate changes: envpool
# resets a finished env on the step after its done (NEXT_STEP autoreset), and that "reset step" is left out of every
# loss; truncations bootstrap from V(true final obs); the logged return is the whole game's unclipped score, ended by
# game over or the time limit, never by a life loss alone.
# JAX's own (Flax + Optax): each env step (action choice and envpool's step through its XLA interface, `envs.xla()`, or
# with --no-xla-env an ordered `io_callback` to `envs.step`) is one compiled call, and so is each minibatch update;
# --clip-vloss is honoured; the game statistics stay on the device in float32 (exact below 2**24); a non-finite loss is
# caught once per iteration (its minibatch leaves the weights as they were).
import difflib
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

import envpool
import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro
from flax.training.train_state import TrainState
from jax.experimental import io_callback
from torch.utils.tensorboard import SummaryWriter

SCRIPT = os.path.basename(__file__)


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
    """whether to save the model into `runs/{run_name}` and evaluate it for 10 episodes"""
    upload_model: bool = False
    """whether to push the saved model, card, video, logs and script to the Hugging Face Hub (needs --save-model)"""
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
    target_kl: float | None = None
    """the target KL divergence threshold (stops the epochs of an update early)"""
    checkpoint_every: int = 75
    """write runs/{run_name}/checkpoint.pt every this many iterations, at the end and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def make_vector_env(env_id, num_envs, seed, max_episode_steps, render=False):
    """envpool's Atari preprocessing (84x84 gray, 4 stacked frames); a lost life ends the agent's episode and rewards
    are clipped to their sign. NEXT_STEP autoreset: the step that ends an episode returns its true final observation,
    the next step of that env ignores its action and returns the new episode's first observation (a "reset step")."""
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


INFO_DTYPES = {"reward": np.float32, "terminated": np.int32, "elapsed_step": np.int32}  # the info entries read


def make_step_env(envs, xla=True):
    """The env step a compiled program calls, `step_env(handle, actions) -> (handle, (next_obs, reward, terminated,
    truncated, info))` with `info` cut to INFO_DTYPES: envpool's XLA interface, or (without `xla` or that interface) an
    ordered `io_callback` running `envs.step` on the host. Call after `envs.reset()`; returns (handle, step_env, words)."""
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

    num_envs, obs_space = envs.config["num_envs"], envs.single_observation_space
    shapes = (
        jax.ShapeDtypeStruct((num_envs,) + obs_space.shape, obs_space.dtype),
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
                lambda x: x.reshape((x.shape[0], -1)),  # (7, 7, 64) flattened HWC
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
    """GAE(γ, λ) advantages and returns of a NEXT_STEP rollout, and `valid`, all (T, N). Where an episode ended at step t
    (`dones`), obs[t+1] is its true final observation, so a truncation bootstraps from values[t+1] (`next_value` (N,) at
    t = T-1) and a termination (`terminations`) from nothing. The step after a done (`last_done` (N,) for t = 0) is a
    reset step, not a transition: `valid` is 0 there, and so is its advantage."""
    advantages, lastgaelam = jnp.zeros_like(rewards), jnp.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        nextvalues = next_value if t == len(rewards) - 1 else values[t + 1]
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages = advantages.at[t].set(lastgaelam)
    valid = 1.0 - jnp.concatenate([last_done[None], dones[:-1]])
    advantages = advantages * valid
    return advantages, advantages + values, valid


def masked_mean(x, mask):
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)  # 0 when the mask is empty


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
    """The PPO loss of one minibatch, all (B,) float32; `valid` is 0 at reset steps, which count in no mean.
    Returns (loss, (pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac))."""
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
    """Each env's game score from envpool's info, kept on the device: `reward` is unclipped, `terminated` is 1 only at
    game over (not at a life loss) and `elapsed_step` counts the game's agent steps. A game ends at game over or at the
    time limit. Start with `EpisodeStatistics(jnp.zeros(num_envs))`."""

    scores: jax.Array

    def update(self, truncations, infos):
        """Adds one vector step; returns the new statistics and (ended, scores, lengths), each (N,): whether env i's
        game ended on this step, and then its game score and length in agent steps."""
        scores = self.scores + infos["reward"]
        ended = infos["terminated"].astype(bool) | truncations
        return self.replace(scores=jnp.where(ended, 0.0, scores)), (ended, scores, infos["elapsed_step"])


class GameRecorder:
    """Films the games of env 0 that `capped_cubic_video_schedule` picks (0, 1, 8, 27, ..., 1000, 2000, ...), first to
    final observation, as `video_folder/rl-video-episode-{game}.mp4`, rendering only then. Call `start()` after
    `envs.reset()` and `step(game_over)` after every `envs.step`."""

    def __init__(self, envs, video_folder, fps):
        from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video  # moviepy: only when filming

        self.envs, self.video_folder, self.fps = envs, video_folder, fps
        self.schedule, self.save_video = capped_cubic_video_schedule, save_video
        self.game, self.frames = 0, []

    def start(self):
        if self.schedule(self.game):
            self.frames.append(self.envs.render()[0])

    def step(self, game_over):
        if self.schedule(self.game):  # after a game's end, the reset step shows the next game's first observation
            self.frames.append(self.envs.render()[0])
        if game_over:
            if self.frames:
                self.save_video(self.frames, self.video_folder, episode_index=self.game, fps=self.fps)
            self.frames, self.game = [], self.game + 1


def env_error(env_id):  # why `env_id` is not an envpool Atari game, as one line, or None (cleanrl_utils.enjoy asks too)
    atari_ids = [i for i, (module, *_) in envpool.registration.registry.specs.items() if module == "envpool.atari"]
    game = re.sub(r"^ALE/|(NoFrameskip|Deterministic)?-v\d+$", "", env_id) + "-v5"  # Gymnasium's ids of the same games
    guesses = [game] if game in atari_ids else difflib.get_close_matches(env_id, atari_ids, n=1)
    kind = "an envpool env but not an Atari game" if env_id in envpool.registration.registry.specs else "not an envpool id"
    hint = "".join(f" (did you mean {g}?)" for g in guesses)
    return None if env_id in atari_ids else f"{env_id} is {kind}{hint}; {SCRIPT} needs an envpool Atari id, e.g. Breakout-v5"


def validation_error(args):  # the first reason this command line cannot run, as one line, or None
    batch_size, minibatches = args.num_envs * args.num_steps, max(args.num_minibatches, 1)  # 1 if 0: all rows are evaluated
    sizes = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs")
    checks = [  # no check of minibatches of 1 step: the masked advantage normalisation below keeps them finite
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (not 1 <= args.max_episode_steps < 2**31, f"--max-episode-steps must be in [1, 2**31), got {args.max_episode_steps}"),
        (
            batch_size % minibatches != 0,
            f"the batch of {batch_size} steps (--num-envs {args.num_envs} x --num-steps "
            f"{args.num_steps}) does not split into --num-minibatches {minibatches}; pick a divisor of {batch_size}",
        ),
        (not (0 <= args.gamma <= 1 and 0 <= args.gae_lambda <= 1), "--gamma and --gae-lambda must be in [0, 1]"),
        (
            not 0 < args.learning_rate < 3.4e37,  # above, Adam's first step (lr / 0.1) overflows float32
            f"--learning-rate must be positive and finite in float32, got {args.learning_rate}",
        ),
        (not 0 <= args.seed <= 2**31 - args.num_envs, f"--seed must be in [0, 2**31 - --num-envs] (int32), got {args.seed}"),
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


def evaluate(model_path, eval_episodes, run_name, capture_video=False):
    """Plays `eval_episodes` games with the saved agent on its training env (seeds apart); returns their scores."""
    with open(model_path, "rb") as f:
        checkpoint = flax.serialization.msgpack_restore(f.read())
    saved = checkpoint["args"]
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
        obs, _, _, truncations, infos = envs.step(np.asarray(get_action(params, obs, action_key)))
        statistics, (ended, scores, _) = statistics.update(truncations, infos)
        if recorder:
            recorder.step(bool(ended[0]))
        episodic_returns += [float(score) for score in np.asarray(scores)[np.asarray(ended)]]
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    args = tyro.cli(Args)
    ckpt = None  # checkpoints, --resume and clean stops: cleanrl_utils/checkpoint.py, imported only when asked for
    if (args.checkpoint_every or args.resume) and importlib.util.find_spec("cleanrl_utils"):
        ckpt = importlib.import_module("cleanrl_utils.checkpoint").Checkpoint(SCRIPT, args)  # --resume: the saved flags
    elif args.resume:
        exit_if("--resume needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    elif args.checkpoint_every:  # a script copied alone trains without them
        print(f"{SCRIPT}: checkpoints are off: they need cleanrl_utils (pip install -e . in a cleanrl clone)")
    exit_if(validation_error(args) or env_error(args.env_id))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    if args.num_iterations == 0:
        print(f"{SCRIPT}: warning: the run ends before its first gradient step (--total-timesteps below one batch)")
    elif args.total_timesteps % args.batch_size != 0:
        print(f"running {args.num_iterations * args.batch_size} steps: --total-timesteps rounded down to whole batches")
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
    uploaded_videos = set()  # W&B gets each finished video once (envpool has no W&B hook)
    random.seed(args.seed)
    np.random.seed(args.seed)
    key = jax.random.PRNGKey(args.seed)
    key, agent_key = jax.random.split(key)
    spec = envpool.make_spec(args.env_id)  # the envs' spaces; envpool seeds the envs as it makes them, below
    agent = Agent(spec.action_space.n)
    obs_example = np.zeros((1,) + spec.observation_space.shape, np.uint8)
    params = agent.init(agent_key, obs_example, np.zeros(1, np.int32), method=Agent.get_action_and_value)
    # the learning rate is set before each update (annealing); Adam's eps as in the twin's torch Adam
    adam = optax.inject_hyperparams(optax.adam)(learning_rate=args.learning_rate, eps=1e-5)
    tx = optax.chain(optax.clip_by_global_norm(args.max_grad_norm), adam)
    agent_state = TrainState.create(apply_fn=agent.apply, params=params, tx=tx)

    global_step, recent_returns = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, None, globals(), "agent_state key global_step")
    env_seed = (args.seed + global_step) % 2**31  # envpool's seeds are int32; a resumed run plays new games
    envs = make_vector_env(args.env_id, args.num_envs, env_seed, args.max_episode_steps, args.capture_video)
    envs.action_space.seed(args.seed)
    config = envs.config  # the emulator runs at 60 frames per second; a video shows one frame per agent step
    print(
        f"{args.env_id} (envpool {envpool.__version__}): sticky-action probability {config['repeat_action_probability']:g}, "
        f"time limit {config['max_episode_steps']} agent steps"
    )
    recorder = GameRecorder(envs, f"videos/{run_name}", 60 / config["frame_skip"]) if args.capture_video else None
    start_time, start_step, last_print = time.time(), global_step, time.time()
    statistics = EpisodeStatistics(jnp.zeros(args.num_envs))
    next_obs, _ = envs.reset()
    handle, step_env, interface = make_step_env(envs, args.xla_env)
    print(f"env stepping: {interface}; JAX backend: {jax.default_backend()}")
    last_done = jnp.zeros(args.num_envs)  # the first step of the next rollout is a reset step where set
    if recorder:
        recorder.start()

    @jax.jit
    def rollout_step(agent_state, handle, obs, statistics, key):
        """One vector step: the agent acts on `obs`, the envs step; returns the step's transition."""
        key, action_key = jax.random.split(key)
        action, logprob, _, value = agent.apply(agent_state.params, obs, key=action_key, method=Agent.get_action_and_value)
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
        """One gradient step on the minibatch `mb_inds` of `batch`, not applied where the loss or gradient is not
        finite. Returns (agent_state, the loss terms, whether the loss and gradient were finite)."""
        mb = jax.tree_util.tree_map(lambda x: x[mb_inds], batch)  # reset steps stay in it but count in no mean

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

    # ---- ALGO LOGIC: the training loop (rollout, GAE, clipped-surrogate update); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
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
            envs.close()  # now, not at exit: a renderer left to the exit prints EGL tracebacks
            writer.close()
            sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")

        is_valid = np.asarray(batch["valid"]) > 0
        y_pred, y_true = np.asarray(batch["values"])[is_valid], np.asarray(batch["returns"])[is_valid]
        var_y = np.var(y_true) if len(y_true) > 0 else 0.0
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        sps = int((global_step - start_step) / (time.time() - start_time))
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
            left = (args.num_iterations - iteration) * args.batch_size / max(sps, 1)  # seconds, at the current speed
            print(
                f"global_step={global_step}, {global_step / args.total_timesteps:.1%} of {args.total_timesteps}, "
                f"episodic_return(last {len(recent_returns)})={recent}, SPS={sps}, "
                f"{left // 3600:.0f}:{time.strftime('%M:%S', time.gmtime(left))} left",
                flush=True,
            )
        for path in sorted(set(glob.glob(f"videos/{run_name}/*.mp4")) - uploaded_videos) if args.track else []:
            uploaded_videos.add(path)
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        if ckpt:  # at its cadence, at the end, and after Ctrl-C or SIGTERM, which then ends the run here
            ckpt.step(iteration, last=iteration == args.num_iterations)
    envs.close()

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        checkpoint = {"model": flax.serialization.to_state_dict(agent_state.params), "args": vars(args)}
        with open(model_path, "wb") as f:
            f.write(flax.serialization.msgpack_serialize(checkpoint))
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")

    writer.close()
    if args.track:  # the videos not sent yet: the training's last and the evaluation's
        for path in sorted(set(glob.glob(f"videos/{run_name}*/*.mp4")) - uploaded_videos):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPO (JAX)", "Proximal Policy Optimization")
