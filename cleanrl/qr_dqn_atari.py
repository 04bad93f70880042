# QR-DQN for Atari: Dabney et al. 2018, "Distributional Reinforcement Learning with Quantile Regression" (AAAI). The
# paper's Atari settings: N = 200 quantiles, quantile Huber loss (kappa = 1), Adam at 5e-5 with epsilon 0.01 / 32. The rest
# as c51_atari.py (CleanRL's: a target copy every 10,000 steps, epsilon to 0.01 over the first 10%). Game scores logged;
# frames stored once.
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
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
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

    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of the environment"""
    total_timesteps: int = 10000000
    """total environment steps of the experiment"""
    learning_rate: float = 5e-5
    """the learning rate of the optimizer"""
    n_quantiles: int = 200
    """the number of quantiles (N) of each return distribution"""
    num_envs: int = 1
    """the number of parallel game environments"""
    buffer_size: int = 1000000
    """the replay memory size (frames; each episode's final frame takes one, so it holds slightly fewer transitions)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    target_network_frequency: int = 10000
    """the timesteps it takes to copy the Q-network into the target network"""
    batch_size: int = 32
    """the batch size of sample from the replay memory"""
    start_e: float = 1
    """the starting epsilon for exploration"""
    end_e: float = 0.01
    """the ending epsilon for exploration"""
    exploration_fraction: float = 0.10
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    learning_starts: int = 80000
    """timestep to start learning"""
    train_frequency: int = 4
    """the frequency of training (env steps per gradient step)"""
    checkpoint_every: int = 100000
    """write runs/{run_name}/checkpoint.pt every this many env steps, at the end and at Ctrl-C; 0: never"""
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


class QNetwork(nn.Module):
    def __init__(self, n_actions, n_quantiles=200):
        super().__init__()
        self.n_actions, self.n_quantiles = n_actions, n_quantiles
        self.network = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(3136, 512),
            nn.ReLU(),
            nn.Linear(512, n_actions * n_quantiles),
        )

    def forward(self, x):  # the quantiles of each action's return, (B, n_actions, n_quantiles); Q: their mean
        return self.network(x / 255.0).view(len(x), self.n_actions, self.n_quantiles)


class ReplayBuffer:
    """Each frame stored once, stacks rebuilt when sampled: sub-env e writes a ring of `buffer_size // num_envs` slots, each
    an observation's newest frame and the action, clipped reward and termination taken from it (final frames get one too)."""

    def __init__(self, buffer_size, num_envs, frame_shape, stack_size, device):
        self.num_envs, self.capacity, self.stack_size, self.device = num_envs, buffer_size // num_envs, stack_size, device
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
        return tuple(torch.as_tensor(x, device=self.device) for x in (*data, self.dones[env, slot]))


def epsilon_schedule(start_e, end_e, duration, t):  # linear from start_e to end_e over `duration` steps, then flat
    return end_e if duration <= 0 else start_e + (end_e - start_e) * min(t / duration, 1.0)


def quantile_huber_loss(quantiles, target_quantiles, kappa=1.0):
    """The paper's loss (eq. 10): each of the N `quantiles` (B, N), at the midpoints τ̂_i = (2i + 1) / 2N, regressed on
    every sample of `target_quantiles` (B, N') with the Huber loss of width `kappa` (> 0), weighted |τ̂_i - 1{u < 0}| for
    u = target - quantile: summed over i, averaged over the samples and the batch. A scalar."""
    n = quantiles.shape[1]
    tau_hat = (2 * torch.arange(n, device=quantiles.device, dtype=quantiles.dtype) + 1) / (2 * n)
    u = target_quantiles.unsqueeze(1) - quantiles.unsqueeze(2)  # (B, N, N'): every sample minus every quantile
    huber = torch.where(u.abs() <= kappa, 0.5 * u**2, kappa * (u.abs() - 0.5 * kappa))
    weight = (tau_hat.view(1, n, 1) - (u.detach() < 0).to(u.dtype)).abs()  # under-estimates weigh τ̂, over-estimates 1 - τ̂
    return (weight * huber / kappa).sum(1).mean()


def steps_crossed(previous_step, step, every):  # how many of the steps previous_step+1 .. step are multiples of `every`
    return step // every - previous_step // every


def validation_error(args, env):  # the first reason this command line cannot run on `env`, as one line, or None
    memory = args.buffer_size * SLOT_BYTES
    sizes = ("total_timesteps", "num_envs", "buffer_size", "batch_size", "n_quantiles", "train_frequency")
    sizes += ("target_network_frequency",)
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
            not all(0 <= getattr(args, k) <= 1 for k in ("gamma", "start_e", "end_e", "exploration_fraction")),
            "--gamma, --start-e, --end-e and --exploration-fraction must be in [0, 1]",
        ),
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


def evaluate(model_path, eval_episodes, run_name, device, epsilon=0.05, capture_video=False):  # returns the scores
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    env_id, seed = checkpoint["args"]["env_id"], checkpoint["args"]["seed"] + 100_000
    envs = make_env(env_id, 1, capture_video, f"{run_name}-eval")
    envs.action_space.seed(seed)
    q_network = QNetwork(envs.single_action_space.n, checkpoint["args"]["n_quantiles"]).to(device)
    q_network.load_state_dict(checkpoint["model"])
    obs, _ = envs.reset(seed=seed)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            q_values = q_network(torch.as_tensor(obs, device=device)).mean(2)
        actions = envs.action_space.sample() if random.random() < epsilon else torch.argmax(q_values, dim=1).cpu().numpy()
        obs, _, _, _, infos = envs.step(actions)
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    args = tyro.cli(Args)
    ckpt = None  # checkpoints, --resume and clean stops: cleanrl_utils/checkpoint.py, imported only when asked for
    if (args.checkpoint_every or args.resume) and importlib.util.find_spec("cleanrl_utils"):
        fixed = ("env_id", "n_quantiles")  # what the saved networks fit
        ckpt = importlib.import_module("cleanrl_utils.checkpoint").Checkpoint(SCRIPT, args, fixed)  # --resume: the saved flags
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
    num_iterations = args.total_timesteps // args.num_envs  # whole vector steps: rounds down
    if num_iterations * args.num_envs // args.train_frequency <= args.learning_starts // args.train_frequency:
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
    q_network = QNetwork(envs.single_action_space.n, args.n_quantiles).to(device)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=args.learning_rate, eps=0.01 / args.batch_size)  # the paper's ε
    target_network = QNetwork(envs.single_action_space.n, args.n_quantiles).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(args.buffer_size, args.num_envs, (84, 84), 4, device)
    frames, ale = rb.capacity * args.num_envs, envs.envs[0].unwrapped.ale
    print(f"replay buffer: {frames} frames x {SLOT_BYTES} B = {frames * SLOT_BYTES / 2**30:.2f} GiB when full")
    print(f"{args.env_id}: frame skip 4, sticky-action probability {ale.getFloat('repeat_action_probability'):g}")
    global_step, num_updates, recent_returns = 0, 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "q_network target_network optimizer rb global_step num_updates")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    obs, _ = envs.reset(seed=args.seed + global_step)  # a resumed run starts new episodes
    rb.start(obs)
    # ---- ALGO LOGIC: the training loop (ε-greedy acting, replay, quantile regression updates); the set-up ends here ----
    for iteration in range(global_step // args.num_envs, num_iterations):
        epsilon = epsilon_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
        # ε-greedy per sub-env; the network is only asked when some sub-env acts greedily
        explore = np.random.random(args.num_envs) < epsilon
        actions = envs.action_space.sample()
        if not explore.all():
            with torch.no_grad():
                q_values = q_network(torch.as_tensor(obs, device=device)).mean(2)
            actions = np.where(explore, actions, torch.argmax(q_values, dim=1).cpu().numpy())

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        previous_step, global_step = global_step, global_step + args.num_envs

        rb.add(actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
        if "final_info" in infos and "episode" in infos["final_info"]:
            episode = infos["final_info"]["episode"]
            for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                recent_returns.append(float(episode["r"][i]))
                writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
        obs = next_obs

        if global_step > args.learning_starts:
            # one update per `train_frequency` env steps past learning_starts that this vector step covered: with
            # --num-envs 1, upstream's rate (`global_step % args.train_frequency == 0`, its global_step counting from 0)
            for _ in range(steps_crossed(max(previous_step, args.learning_starts), global_step, args.train_frequency)):
                b_obs, b_actions, b_rewards, b_next_obs, b_dones = rb.sample(args.batch_size)
                with torch.no_grad():
                    next_quantiles = target_network(b_next_obs)  # (B, n_actions, N)
                    next_actions = next_quantiles.mean(2).argmax(1)  # greedy by the target network's Q
                    next_quantiles = next_quantiles[torch.arange(args.batch_size, device=device), next_actions]
                    # r + γ (1 - done) θ_j(s', a*) for every quantile j; done is termination only
                    target_quantiles = b_rewards.unsqueeze(1) + args.gamma * (1.0 - b_dones.unsqueeze(1)) * next_quantiles
                quantiles = q_network(b_obs)[torch.arange(args.batch_size, device=device), b_actions]  # (B, N)
                loss = quantile_huber_loss(quantiles, target_quantiles)
                if not torch.isfinite(loss):  # one sync per gradient step: stop before NaN reaches the weights
                    envs.close()  # now, not at exit: a renderer left to the exit prints EGL tracebacks
                    writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                num_updates += 1

                if num_updates % 100 == 0:
                    writer.add_scalar("losses/loss", loss.item(), global_step)
                    writer.add_scalar("losses/q_values", quantiles.detach().mean().item(), global_step)
                    writer.add_scalar("charts/epsilon", epsilon, global_step)
                    writer.add_scalar("charts/SPS", int((global_step - start_step) / (time.time() - start_time)), global_step)

            if steps_crossed(previous_step, global_step, args.target_network_frequency) > 0:  # owed copies are one copy
                target_network.load_state_dict(q_network.state_dict())

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
        torch.save({"model": q_network.state_dict(), "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, epsilon=0.05, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")

    writer.close()
    if args.track:  # the videos not sent yet: the training's last and the evaluation's
        for path in sorted(set(glob.glob(f"videos/{run_name}*/*.mp4")) - uploaded_videos):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "QR-DQN", "quantile regression DQN")
