# PPO (Schulman et al. 2017, arXiv:1707.06347; GAE: arXiv:1506.02438) on MuJoCo Playground (Zakka et al. 2025,
# arXiv:2502.08844): thousands of envs stepped at once by JAX on the accelerator, in the role and with the defaults of
# upstream CleanRL's Isaac Gym script (4,096 envs, 16-step rollouts, 2 minibatches, lr 0.0026, 3x256 tanh networks).
# The rollout stays on the device: observations go from JAX to torch and actions back by DLPack, without copies.
# Deliberate changes: truncations (Playground's episodes end at a step limit) bootstrap from V(true final obs);
# observations are normalised by running statistics, which the saved model keeps; an ended env restarts from a reset
# state drawn fresh for each rollout (Brax's auto-reset reuses each env's first one).
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

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX would take 75% of the GPU at start; torch shares it
os.environ.setdefault("MUJOCO_GL", "egl")  # headless video; mujoco reads it when imported
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.distributions.normal import Normal
from torch.utils.tensorboard import SummaryWriter

SCRIPT = os.path.basename(__file__)


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, cuda will be used when available (JAX too: with --no-cuda both run on the CPU)"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of env 0's episodes 0, 1, 8, 27, ..., 1000, 2000, ... (check out `videos` folder)"""
    save_model: bool = False
    """whether to save the model into `runs/{run_name}` and evaluate it for 10 episodes"""
    upload_model: bool = False
    """whether to push the saved model, card, video, logs and script to the Hugging Face Hub (needs --save-model)"""
    hf_entity: str = ""
    """the user or org of the Hub repository `{hf_entity}/{env_id}-{exp_name}-seed{seed}` (default: the token's user)"""

    env_id: str = "CartpoleBalance"
    """the id of a MuJoCo Playground environment (its DeepMind Control Suite ports ship their models)"""
    total_timesteps: int = 30000000
    """total environment steps of the experiment"""
    learning_rate: float = 0.0026
    """the learning rate of the optimizer"""
    num_envs: int = 4096
    """the number of parallel environments, stepped at once on the device"""
    num_steps: int = 16
    """the number of steps to run in each environment per policy rollout"""
    episode_length: int = 1000
    """the time limit in env steps (Playground's for its tasks); reaching it truncates the episode"""
    anneal_lr: bool = False
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 2
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = False
    """toggles the clipped value loss (from OpenAI Baselines' PPO2; the PPO paper has none)"""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 2.0
    """coefficient of the value function"""
    max_grad_norm: float = 1.0
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold (stops the epochs of an update early)"""
    checkpoint_every: int = 50
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def jax_to_torch(x):
    """A torch tensor on the same memory as the JAX array `x` (DLPack: no copy), same shape and dtype."""
    return torch.from_dlpack(x)


def torch_to_jax(x):
    """A JAX array on the same memory as the torch tensor `x` (DLPack: no copy for a contiguous one)."""
    return jax.dlpack.from_dlpack(x.contiguous())


def make_env(env_id, num_envs, episode_length):
    """The Playground env `env_id` and two jitted functions over `num_envs` copies of it: `reset(key)` gives their
    states, and `step(state, t, action, fresh)` steps them all (`t`: each one's steps into its episode). An episode
    ends by termination (the env's done) or at `episode_length` steps (truncation); an ended copy goes on from its
    state in `fresh`, reset states drawn for the rollout. `step` gives the next (state, t), and per copy the true
    final observation (the next one where the episode goes on), the reward, termination and truncation."""
    warp = importlib.import_module("warp")  # MuJoCo Warp's kernels: no banner, no line for each one loaded
    warp.config.quiet, warp.config.log_level = True, warp.LOG_WARNING
    env = importlib.import_module("mujoco_playground").registry.load(env_id)
    if hasattr(env.mjx_model.opt._impl, "warn_overflow"):  # tasks that cap the solver's iterations (as Cartpole's at 1)
        env._mjx_model = env.mjx_model.tree_replace({"opt._impl.warn_overflow": 0})  # would print for each env and step

    def reset(key):
        return jax.vmap(env.reset)(jax.random.split(key, num_envs))

    def step(state, t, action, fresh):
        state = jax.vmap(env.step)(state, action)
        t = t + 1
        terminated = state.done > 0
        truncated = (t >= episode_length) & ~terminated
        ended = terminated | truncated

        def restart(first, now):  # leaves without a per-env axis (MuJoCo Warp's shared buffers) stay as they are
            if now.ndim == 0 or now.shape[0] != num_envs:
                return now
            return jnp.where(ended.reshape((-1,) + (1,) * (now.ndim - 1)), first, now)

        return jax.tree.map(restart, fresh, state), jnp.where(ended, 0, t), state.obs, state.reward, terminated, truncated

    return env, jax.jit(reset), jax.jit(step)


class RunningMeanStd:
    """Running mean and variance of observations on the device, merged batch by batch (Chan et al. 1979)."""

    def __init__(self, shape, device):
        self.mean, self.var, self.count = torch.zeros(shape, device=device), torch.ones(shape, device=device), 1e-4

    def update(self, x):
        batch_mean, batch_var, batch_count = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta, total = batch_mean - self.mean, self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        self.var = (self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total) / total
        self.count = total

    def normalize(self, x):  # clipped as gymnasium's NormalizeObservation is in ppo_continuous_action.py
        return torch.clamp((x - self.mean) / torch.sqrt(self.var + 1e-8), -10, 10)


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, 256)),
            nn.Tanh(),
            layer_init(nn.Linear(256, action_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        action_mean = self.actor_mean(x)
        probs = Normal(action_mean, self.actor_logstd.expand_as(action_mean).exp(), validate_args=False)  # unchecked: faster
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


def compute_gae(rewards, values, dones, terminations, final_values, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns, (T, N): terminal steps bootstrap 0, truncated ones V(true final obs)."""
    advantages, lastgaelam = torch.zeros_like(rewards), torch.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        nextvalues = next_value if t == len(rewards) - 1 else values[t + 1]
        nextvalues = torch.where(dones[t].bool(), final_values[t], nextvalues)
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
    return advantages, advantages + values


def video_episode(episode):  # gymnasium's RecordVideo schedule: episodes 0, 1, 8, 27, ..., 729, 1000, 2000, ...
    return round(episode ** (1 / 3)) ** 3 == episode if episode < 1000 else episode % 1000 == 0


def render(env, positions, height=240, width=320):
    """Frames (height, width, 3) of `env`'s model at each of `positions` (joint positions, qpos), rendered headless."""
    renderer, data = mujoco.Renderer(env.mj_model, height, width), mujoco.MjData(env.mj_model)
    frames = []
    for qpos in positions:
        data.qpos = np.asarray(qpos)
        mujoco.mj_forward(env.mj_model, data)
        renderer.update_scene(data)
        frames.append(renderer.render())
    renderer.close()
    return frames


def write_video(env, positions, path):
    from moviepy import ImageSequenceClip

    os.makedirs(os.path.dirname(path), exist_ok=True)
    ImageSequenceClip(render(env, positions), fps=round(1 / env.dt)).write_videofile(path, logger=None)


def validation_error(args):
    """The first reason this command line cannot run, as one line, or None (checked before the env is made: a CPU-only
    machine's MuJoCo Warp warns on stderr as it starts)."""
    batch_size, minibatches = args.num_envs * args.num_steps, max(args.num_minibatches, 1)  # 1 if 0: all rows are evaluated
    sizes = ("total_timesteps", "num_envs", "num_steps", "episode_length", "num_minibatches", "update_epochs")
    checks = [
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (
            batch_size % minibatches != 0,
            f"the batch of {batch_size} steps (--num-envs {args.num_envs} x --num-steps "
            f"{args.num_steps}) does not split into --num-minibatches {minibatches}; pick a divisor of {batch_size}",
        ),
        (
            args.norm_adv and batch_size // minibatches < 2,
            "minibatches of 1 step cannot normalise advantages; use fewer --num-minibatches or --no-norm-adv",
        ),
        (not (0 <= args.gamma <= 1 and 0 <= args.gae_lambda <= 1), "--gamma and --gae-lambda must be in [0, 1]"),
        (
            not 0 < args.learning_rate < 3.4e37,  # above, Adam's first step (lr / 0.1) overflows float32
            f"--learning-rate must be positive and finite in float32, got {args.learning_rate}",
        ),
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


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):
    """Plays `eval_episodes` episodes at once, one per env, with the saved policy and its frozen statistics."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved, stats = checkpoint["args"], checkpoint["obs_rms"]
    env, env_reset, env_step = make_env(saved["env_id"], eval_episodes, saved["episode_length"])
    obs_rms = RunningMeanStd(env.observation_size, device)
    obs_rms.mean, obs_rms.var = stats["mean"].to(device), stats["var"].to(device)
    agent = Agent(env.observation_size, env.action_size).to(device)
    agent.load_state_dict(checkpoint["model"])
    state = env_reset(jax.random.PRNGKey(saved["seed"] + 100_000))
    t, total, filmed = jnp.zeros(eval_episodes, jnp.int32), torch.zeros(eval_episodes, device=device), []
    episodic_returns = torch.full((eval_episodes,), float("nan"), device=device)
    for _ in range(saved["episode_length"]):  # every episode ends by then
        with torch.no_grad():
            action, _, _, _ = agent.get_action_and_value(obs_rms.normalize(jax_to_torch(state.obs)))
        if capture_video and episodic_returns[0].isnan():  # env 0's episode is filmed
            filmed.append(state.data.qpos[0])
        state, t, _, reward, terminated, truncated = env_step(state, t, torch_to_jax(action.clamp(-1, 1)), state)
        total += jax_to_torch(reward)
        ended = jax_to_torch(terminated | truncated) & episodic_returns.isnan()
        episodic_returns = torch.where(ended, total, episodic_returns)
        if not episodic_returns.isnan().any():
            break
    if capture_video:
        write_video(env, filmed, f"videos/{run_name}-eval/rl-video-episode-0.mp4")
    return episodic_returns.tolist()


if __name__ == "__main__":
    args = tyro.cli(Args)
    ckpt = None  # checkpoints, --resume and clean stops: cleanrl_utils/checkpoint.py, imported only when asked for
    if (args.checkpoint_every or args.resume) and importlib.util.find_spec("cleanrl_utils"):
        ckpt = importlib.import_module("cleanrl_utils.checkpoint").Checkpoint(SCRIPT, args)  # --resume: the saved flags
    elif args.resume:
        exit_if("--resume needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    elif args.checkpoint_every:  # a script copied alone trains without them
        print(f"{SCRIPT}: checkpoints are off: they need cleanrl_utils (pip install -e . in a cleanrl clone)")
    if not (args.cuda and torch.cuda.is_available()):
        jax.config.update("jax_platforms", "cpu")  # torch on the CPU: JAX there too, so DLPack hands over in place
    if not importlib.util.find_spec("mujoco_playground"):
        exit_if("needs MuJoCo Playground: pip install playground")
    exit_if(validation_error(args))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    try:
        env, env_reset, env_step = make_env(args.env_id, args.num_envs, args.episode_length)
    except Exception as e:  # an unknown id, or a task whose robot models are fetched at first use (offline: fails)
        exit_if(f"cannot make {args.env_id!r}: {(str(e).splitlines() or [type(e).__name__])[0]}")
    if not isinstance(env.observation_size, int):
        exit_if(f"{args.env_id} gives observations {env.observation_size}; {SCRIPT} takes flat ones (as the Control Suite's)")
    if args.capture_video:  # a video renders its first frame now, not after the training
        try:
            render(env, env_reset(jax.random.PRNGKey(0)).data.qpos[:1])
        except Exception as e:
            exit_if(f"cannot render {args.env_id} with MUJOCO_GL={os.environ['MUJOCO_GL']} (headless machines need egl): {e}")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size  # rounded down to whole batches
    if args.num_iterations == 0:
        print(f"{SCRIPT}: warning: the run ends before its first gradient step (--total-timesteps below one batch)")
    run_time = int(time.time())  # a run that started in the same second owns that name; a resumed run keeps its own
    while os.path.exists(f"runs/{args.env_id}__{args.exp_name}__{args.seed}__{run_time}"):
        run_time += 1
    run_name = ckpt.run_name if args.resume else f"{args.env_id}__{args.exp_name}__{args.seed}__{run_time}"
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
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if jax.default_backend() == "gpu" else "cpu")  # where JAX's arrays are: DLPack shares them
    if args.cuda and torch.cuda.is_available() and device.type == "cpu":
        print(f"{SCRIPT}: JAX has no GPU here (pip install 'jax[cuda12]'), so torch runs on the CPU too")
    key = jax.random.PRNGKey(args.seed)

    agent = Agent(env.observation_size, env.action_size).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs_rms = RunningMeanStd(env.observation_size, device)
    obs = torch.zeros((args.num_steps, args.num_envs, env.observation_size), device=device)
    actions = torch.zeros((args.num_steps, args.num_envs, env.action_size), device=device)
    logprobs, rewards, dones, terminations, values, final_values = torch.zeros(
        (6, args.num_steps, args.num_envs), device=device
    )
    ended_returns, ended_lengths = torch.zeros((2, args.num_steps, args.num_envs), device=device)

    global_step, recent_returns, filmed, film_episode = 0, deque(maxlen=20), [], 0  # filmed: env 0's states to render
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, None, globals(), "agent optimizer obs_rms key global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    key, reset_key = jax.random.split(key)
    state, t = env_reset(reset_key), jnp.zeros(args.num_envs, jnp.int32)
    next_obs = jax_to_torch(state.obs)
    obs_rms.update(next_obs)
    next_obs = obs_rms.normalize(next_obs)
    episode_return, episode_length = torch.zeros((2, args.num_envs), device=device)
    # ---- ALGO LOGIC: the training loop (rollout, GAE, clipped-surrogate update); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate
        key, reset_key = jax.random.split(key)
        fresh = env_reset(reset_key)  # where an episode ends in this rollout, its env starts again from these

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            if args.capture_video:
                filmed.append(state.data.qpos[0])  # env 0's joint positions: all a frame needs
            # Playground's actions are in [-1, 1]; the rollout keeps the unclipped sample for its log-probability
            state, t, final_obs, reward, termination, truncation = env_step(state, t, torch_to_jax(action.clamp(-1, 1)), fresh)
            rewards[step] = jax_to_torch(reward)
            terminations[step] = jax_to_torch(termination).float()
            dones[step] = jax_to_torch(termination | truncation).float()  # the episode ended at this step
            next_obs = jax_to_torch(state.obs)
            obs_rms.update(next_obs)
            next_obs = obs_rms.normalize(next_obs)
            with torch.no_grad():  # GAE uses it where a time limit cut the episode: not terminal
                final_values[step] = agent.get_value(obs_rms.normalize(jax_to_torch(final_obs))).flatten()

            episode_return += rewards[step]
            episode_length += 1
            ended_returns[step], ended_lengths[step] = episode_return, episode_length
            episode_return *= 1 - dones[step]
            episode_length *= 1 - dones[step]

        ended = dones.bool().cpu()  # the rollout's one wait for the device: its finished episodes, logged now
        for k, i in ended.nonzero().tolist():
            ended_at = global_step - (args.num_steps - 1 - k) * args.num_envs
            recent_returns.append(float(ended_returns[k, i]))
            writer.add_scalar("charts/episodic_return", recent_returns[-1], ended_at)
            writer.add_scalar("charts/episodic_length", float(ended_lengths[k, i]), ended_at)
        for k in ended[:, 0].nonzero().flatten().tolist() if args.capture_video else []:  # env 0's episodes that ended
            cut = len(filmed) - (args.num_steps - 1 - k)  # its positions up to step k
            if video_episode(film_episode):
                write_video(env, filmed[:cut], f"videos/{run_name}/rl-video-episode-{film_episode}.mp4")
            filmed, film_episode = filmed[cut:], film_episode + 1

        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages, returns = compute_gae(
                rewards, values, dones, terminations, final_values, next_value, args.gamma, args.gae_lambda
            )

        b_obs = obs.reshape((-1, env.observation_size))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1, env.action_size))
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        clipfracs = []
        for _epoch in range(args.update_epochs):
            b_inds = torch.randperm(args.batch_size, device=device)  # drawn on the device: no index copy per epoch
            for start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[start : start + args.minibatch_size]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():  # http://joschu.net/blog/kl-approx.html
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
                if not torch.isfinite(loss + grad_norm):  # a NaN loss or gradient stops the run before optimizer.step()
                    writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        var_y = b_returns.var(unbiased=False)
        explained_var = float("nan") if var_y == 0 else float(1 - (b_returns - b_values).var(unbiased=False) / var_y)

        sps = int((global_step - start_step) / (time.time() - start_time))
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
            left = (args.num_iterations - iteration) * args.batch_size / max(sps, 1)  # seconds, at the current speed
            print(
                f"global_step={global_step}, {global_step / args.total_timesteps:.1%} of {args.total_timesteps}, "
                f"episodic_return(last {len(recent_returns)})={recent}, SPS={sps}, "
                f"{left // 3600:.0f}:{time.strftime('%M:%S', time.gmtime(left))} left",
                flush=True,
            )
        if ckpt:  # at its cadence, at the end, and after Ctrl-C or SIGTERM, which then ends the run here
            ckpt.step(iteration, last=iteration == args.num_iterations)

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        stats = {"mean": obs_rms.mean.cpu(), "var": obs_rms.var.cpu(), "count": float(obs_rms.count)}
        torch.save({"model": agent.state_dict(), "obs_rms": stats, "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")

    writer.close()
    if args.track:  # videos are written as their episodes end, so all of them go to W&B at the end
        for path in sorted(glob.glob(f"videos/{run_name}*/*.mp4")):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPO", "Proximal Policy Optimization")
