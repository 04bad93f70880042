# TD3 (Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic Methods", arXiv:1802.09477): clipped
# double-Q, delayed policy and target updates, target smoothing; CleanRL's defaults (exploration noise 0.1, smoothing 0.2
# clipped at 0.5, in half ranges). Changed from CleanRL: target actions clamped per dimension (CleanRL: by dimension 0's
# bounds).
import functools
import glob
import importlib.util
import os
import random
import re
import shutil
import sys
import time
import warnings
from collections import deque
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import tyro
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
    """if toggled, cuda will be used when available"""
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

    env_id: str = "Hopper-v5"
    """the id of the environment"""
    total_timesteps: int = 1000000
    """total environment steps of the experiment"""
    learning_rate: float = 3e-4
    """the learning rate of the optimizers (actor and critics)"""
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
    policy_noise: float = 0.2
    """the standard deviation of the target policy smoothing noise, in units of each dimension's half range"""
    exploration_noise: float = 0.1
    """the standard deviation of the exploration noise, in units of each dimension's half range"""
    learning_starts: int = 25000
    """timestep to start learning"""
    policy_frequency: int = 2
    """the frequency of training the policy and updating the targets (delayed), in env steps"""
    noise_clip: float = 0.5
    """the clip of the target policy smoothing noise, in units of each dimension's half range"""
    checkpoint_every: int = 100_000
    """write runs/{run_name}/checkpoint.pt every this many env steps, at the end and at Ctrl-C; 0: never"""
    checkpoint_memory: bool = True
    """whether checkpoints hold the replay memory (without it, a resumed run refills it before learning again)"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def make_env(env_id, num_envs, capture_video, run_name):
    def thunk(idx):
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        env = gym.wrappers.FlattenObservation(env) if isinstance(env.observation_space, gym.spaces.Dict) else env
        return gym.wrappers.RecordEpisodeStatistics(env)

    envs = [functools.partial(thunk, i) for i in range(num_envs)]  # SAME_STEP: true last obs in info["final_obs"]
    return gym.vector.SyncVectorEnv(envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def action_bounds(env):  # per dimension, from the space of the env the actions go to (not env.unwrapped's)
    return env.action_space.low.astype(np.float32), env.action_space.high.astype(np.float32)


def rescale_action(squashed, action_scale, action_bias):
    return squashed * action_scale + action_bias


def exploration_actions(actions, noise, exploration_noise, action_scale, action_low, action_high):
    return torch.clamp(actions + noise * exploration_noise * action_scale, action_low, action_high)


def smoothed_target_actions(target_actions, noise, policy_noise, noise_clip, action_scale, action_low, action_high):
    clipped_noise = torch.clamp(noise * policy_noise, -noise_clip, noise_clip) * action_scale
    return torch.clamp(target_actions + clipped_noise, action_low, action_high)


def clipped_double_q_target(rewards, dones, gamma, qf1_next_target, qf2_next_target):  # `dones`: termination only
    return rewards + gamma * (1.0 - dones) * torch.min(qf1_next_target, qf2_next_target)


def soft_update(target, source, tau):
    with torch.no_grad():
        for target_param, param in zip(target.parameters(), source.parameters()):
            target_param.mul_(1.0 - tau).add_(param, alpha=tau)


class QNetwork(nn.Module):
    def __init__(self, obs_dim, action_dim):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim + action_dim, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 1)

    def forward(self, x, a):
        x = F.relu(self.fc1(torch.cat([x, a], 1)))
        x = F.relu(self.fc2(x))
        return self.fc3(x).squeeze(1)


class Actor(nn.Module):
    def __init__(self, obs_dim, action_low, action_high):
        super().__init__()
        self.fc1 = nn.Linear(obs_dim, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc_mu = nn.Linear(256, len(action_low))
        self.register_buffer("action_scale", torch.as_tensor((action_high - action_low) / 2.0, dtype=torch.float32))
        self.register_buffer("action_bias", torch.as_tensor((action_high + action_low) / 2.0, dtype=torch.float32))

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return rescale_action(torch.tanh(self.fc_mu(x)), self.action_scale, self.action_bias)


class ReplayBuffer:  # the last `buffer_size` transitions; `done` is termination only, so truncations bootstrap
    def __init__(self, buffer_size, obs_shape, action_dim, device):
        self.buffer_size, self.device, self.pos, self.size = buffer_size, device, 0, 0
        self.obs = np.zeros((buffer_size,) + obs_shape, dtype=np.float32)
        self.next_obs = np.zeros((buffer_size,) + obs_shape, dtype=np.float32)
        self.actions = np.zeros((buffer_size, action_dim), dtype=np.float32)
        self.rewards, self.dones = np.zeros(buffer_size, dtype=np.float32), np.zeros(buffer_size, dtype=np.float32)

    def add(self, obs, actions, rewards, terminations, truncations, next_obs, final_obs):
        # SAME_STEP autoreset: where an episode ended, next_obs starts the next one; store its true last observation
        for i in range(len(actions)):
            self.next_obs[self.pos] = final_obs[i] if terminations[i] or truncations[i] else next_obs[i]
            self.obs[self.pos], self.actions[self.pos], self.rewards[self.pos] = obs[i], actions[i], rewards[i]
            self.dones[self.pos] = terminations[i]  # not truncations: those still bootstrap
            self.pos = (self.pos + 1) % self.buffer_size
            self.size = min(self.size + 1, self.buffer_size)

    def sample(self, batch_size):
        idx = np.random.randint(0, self.size, size=batch_size)  # uniform, with replacement
        data = (self.obs, self.actions, self.rewards, self.next_obs, self.dones)
        return tuple(torch.as_tensor(x[idx], device=self.device) for x in data)


def validation_error(args, env):  # the first reason this command line cannot run on `env`, or None
    space, obs_shape = env.action_space, env.observation_space.shape or ()
    low, high = (np.asarray(getattr(space, bound, np.nan)) for bound in ("low", "high"))
    memory = args.buffer_size * (8 * int(np.prod(obs_shape)) + 4 * low.size + 8)  # obs, next_obs, action, reward, done
    sizes = ("total_timesteps", "num_envs", "buffer_size", "batch_size", "policy_frequency")
    checks = [
        (
            not isinstance(space, gym.spaces.Box) or len(space.shape) != 1,
            f"{args.env_id} has {space} actions; {SCRIPT} supports 1-D Box ones",
        ),
        (
            not (np.isfinite([low, high]).all() and (high > low).all()),
            f"{SCRIPT} squashes actions into their bounds, which "
            f"must be finite with high > low in every dimension; {args.env_id} has low={low.tolist()} high={high.tolist()}",
        ),
        (
            not isinstance(env.observation_space, gym.spaces.Box) or len(obs_shape) != 1,
            f"{args.env_id} has {env.observation_space} observations; {SCRIPT} supports 1-D Box ones",
        ),
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (
            memory > os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"),
            f"the replay buffer needs {memory / 2**30:.1f} GiB, more than this machine's memory; lower --buffer-size",
        ),
        (not all(0 <= getattr(args, k) <= 1 for k in ("gamma", "tau")), "--gamma and --tau must be in [0, 1]"),
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
        (args.capture_video and "rgb_array" not in env.metadata.get("render_modes", ()), f"{args.env_id} renders no video"),
    ]
    return next((message for failed, message in checks if failed), None)


def exit_if(error):  # a message stops the run before anything is created (one line on stderr, exit code 2); None goes on
    if error:
        print(f"{SCRIPT}: {error}", file=sys.stderr)
        sys.exit(2)


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):  # the saved actor, without exploration noise
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    envs = make_env(checkpoint["args"]["env_id"], 1, capture_video, f"{run_name}-eval")
    actor = Actor(envs.single_observation_space.shape[0], *action_bounds(envs.envs[0])).to(device)
    actor.load_state_dict(checkpoint["model"])
    obs, _ = envs.reset(seed=checkpoint["args"]["seed"] + 100_000)
    episodic_returns, steps = [], 0  # steps: of the episode under way
    while len(episodic_returns) < eval_episodes and steps < 100_000:  # without a time limit, one may never end
        steps += 1
        with torch.no_grad():
            obs, _, _, _, infos = envs.step(actor(torch.as_tensor(obs, dtype=torch.float32, device=device)).cpu().numpy())
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
            steps = 0
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
    mujoco_gl = os.environ.setdefault("MUJOCO_GL", "egl") if args.capture_video or "dm_control/" in args.env_id else None
    try:  # unknown ids, missing modules or extras all mean this env cannot be made
        if args.env_id.startswith("dm_control/"):  # the DeepMind Control Suite: Shimmy registers it (the dm_control extra)
            gym.register_envs(importlib.import_module("shimmy"))
        env = gym.make(args.env_id)  # without frames: an env that renders none is refused by name, below
        env = gym.wrappers.FlattenObservation(env) if isinstance(env.observation_space, gym.spaces.Dict) else env
    except Exception as e:
        exit_if(f"cannot make {args.env_id!r}: {e}" + (f" (with MUJOCO_GL={mujoco_gl})" if args.capture_video else ""))
    exit_if(validation_error(args, env))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.capture_video:  # a video renders its first frame now, not after the training
        with warnings.catch_warnings(action="ignore"):  # GL back-ends warn on the way to their errors: one line
            try:
                env = gym.make(args.env_id, render_mode="rgb_array")
                env.reset(seed=0)
                env.render()
            except Exception as e:
                exit_if(f"cannot render {args.env_id} with MUJOCO_GL={mujoco_gl} (headless machines need egl): {e}")
        env.close()  # its GL context goes now: left to the exit, it outlives EGL and prints tracebacks
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    num_iterations = args.total_timesteps // args.num_envs  # rounded down to whole vector steps
    if num_iterations * args.num_envs <= args.learning_starts:
        print(f"{SCRIPT}: warning: the run ends before its first gradient step (--learning-starts {args.learning_starts})")
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
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    envs = make_env(args.env_id, args.num_envs, args.capture_video, run_name)
    envs.action_space.seed(args.seed)
    obs_dim, action_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    low, high = (torch.as_tensor(bound, device=device) for bound in action_bounds(envs.envs[0]))  # per dimension
    actor = Actor(obs_dim, low, high).to(device)
    qf1 = QNetwork(obs_dim, action_dim).to(device)
    qf2 = QNetwork(obs_dim, action_dim).to(device)
    qf1_target = QNetwork(obs_dim, action_dim).to(device)
    qf2_target = QNetwork(obs_dim, action_dim).to(device)
    target_actor = Actor(obs_dim, low, high).to(device)
    target_actor.load_state_dict(actor.state_dict())
    qf1_target.load_state_dict(qf1.state_dict())
    qf2_target.load_state_dict(qf2.state_dict())
    q_optimizer = torch.optim.Adam(list(qf1.parameters()) + list(qf2.parameters()), lr=args.learning_rate)
    actor_optimizer = torch.optim.Adam(list(actor.parameters()), lr=args.learning_rate)
    rb = ReplayBuffer(args.buffer_size, envs.single_observation_space.shape, action_dim, device)
    global_step, actor_loss, recent_returns = 0, None, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        names = "actor target_actor qf1 qf2 qf1_target qf2_target q_optimizer actor_optimizer rb global_step"
        ckpt.start(writer, envs, globals(), names)
    start_time, start_step, last_print = time.time(), global_step, time.time()
    obs, _ = envs.reset(seed=args.seed + global_step)  # a resumed run starts new episodes
    # ---- ALGO LOGIC: the training loop (noisy acting, replay, critic and delayed actor updates); the set-up ends here ----
    for iteration in range(global_step // args.num_envs, num_iterations):
        if global_step < args.learning_starts:
            actions = envs.action_space.sample()
        else:
            with torch.no_grad():
                actions = actor(torch.as_tensor(obs, dtype=torch.float32, device=device))
                noise = torch.randn_like(actions)  # one draw per env and per dimension
                actions = exploration_actions(actions, noise, args.exploration_noise, actor.action_scale, low, high)
            actions = actions.cpu().numpy()

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        previous_step, global_step = global_step, global_step + args.num_envs

        rb.add(obs, actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
        if "final_info" in infos and "episode" in infos["final_info"]:
            episode = infos["final_info"]["episode"]
            for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                recent_returns.append(float(episode["r"][i]))
                writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
        obs = next_obs

        # one gradient step per env step past learning_starts, `step` counting env steps from 1 (upstream's global_step
        # from 0), so that `step % f == 0` below keeps upstream's rates whatever --num-envs is
        for step in range(max(previous_step, args.learning_starts) + 1, global_step + 1):
            b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(args.batch_size)
            with torch.no_grad():
                target_actions = target_actor(b_next_obs)
                noise = torch.randn_like(target_actions)  # one draw per batch row and per dimension
                next_state_actions = smoothed_target_actions(
                    target_actions, noise, args.policy_noise, args.noise_clip, target_actor.action_scale, low, high
                )
                qf1_next_target = qf1_target(b_next_obs, next_state_actions)
                qf2_next_target = qf2_target(b_next_obs, next_state_actions)
                next_q_value = clipped_double_q_target(b_rewards, b_dones, args.gamma, qf1_next_target, qf2_next_target)
            qf1_a_values = qf1(b_obs, b_actions)
            qf2_a_values = qf2(b_obs, b_actions)
            qf1_loss = F.mse_loss(qf1_a_values, next_q_value)
            qf2_loss = F.mse_loss(qf2_a_values, next_q_value)
            qf_loss = qf1_loss + qf2_loss
            if not torch.isfinite(qf_loss):  # one sync per gradient step: stop before NaN reaches the weights
                envs.close()  # now, not at exit: a renderer left to the exit prints EGL tracebacks
                writer.close()
                sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
            q_optimizer.zero_grad()
            qf_loss.backward()
            q_optimizer.step()

            if step % args.policy_frequency == 0:  # delayed policy and target updates
                actor_loss = -qf1(b_obs, actor(b_obs)).mean()
                actor_optimizer.zero_grad()
                actor_loss.backward()
                actor_optimizer.step()
                soft_update(target_actor, actor, args.tau)
                soft_update(qf1_target, qf1, args.tau)
                soft_update(qf2_target, qf2, args.tau)

            if step % 100 == 0:
                writer.add_scalar("losses/qf1_values", qf1_a_values.mean().item(), global_step)
                writer.add_scalar("losses/qf2_values", qf2_a_values.mean().item(), global_step)
                writer.add_scalar("losses/qf1_loss", qf1_loss.item(), global_step)
                writer.add_scalar("losses/qf2_loss", qf2_loss.item(), global_step)
                writer.add_scalar("losses/qf_loss", qf_loss.item() / 2.0, global_step)
                if actor_loss is not None:
                    writer.add_scalar("losses/actor_loss", actor_loss.item(), global_step)
                writer.add_scalar("charts/SPS", int((global_step - start_step) / (time.time() - start_time)), global_step)

        if time.time() - last_print > 10 or iteration == num_iterations - 1:
            last_print = time.time()
            recent = f"{np.mean(recent_returns):.2f}" if recent_returns else "n/a"
            sps = int((global_step - start_step) / (time.time() - start_time))
            left = (num_iterations - 1 - iteration) * args.num_envs / max(sps, 1)  # seconds, at the current speed
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
            ckpt.step(global_step, last=iteration == num_iterations - 1)
    envs.close()  # RecordVideo writes the video of an episode still running when it closes

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        models = {"model": actor.state_dict(), "qf1": qf1.state_dict(), "qf2": qf2.state_dict()}
        torch.save(models | {"args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        if len(episodic_returns) < 10:  # evaluate() stops at an episode that has run 100,000 steps
            print(
                f"{SCRIPT}: warning: evaluation episode {len(episodic_returns) + 1} did not end in 100,000 steps "
                f"(does {args.env_id} have a time limit?); {len(episodic_returns)} of 10 evaluated"
            )
        if episodic_returns:
            print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")

    writer.close()
    if args.track:  # the videos not sent yet: the training's last and the evaluation's
        for path in sorted(set(glob.glob(f"videos/{run_name}*/*.mp4")) - uploaded_videos):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "TD3", "Twin Delayed DDPG")
