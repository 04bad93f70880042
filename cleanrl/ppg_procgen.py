# Phasic Policy Gradient (PPG; Cobbe et al. 2021, arXiv:2009.04416) on Procgen (Cobbe et al. 2020) with the IMPALA CNN:
# policy phases of N_π PPO iterations (Schulman et al. 2017) alternate with auxiliary phases of E_aux epochs over all
# their observations, which fit an auxiliary value head on the shared trunk (and the value head) to the phase's returns
# while a behaviour-cloning KL keeps the policy. CleanRL's published defaults: the PPG code's "detach" architecture (one
# network, the value head on detached features), normalised initialisation, advantages normalised over the whole batch.
# Deliberate changes: envpool's games (StarpilotEasy-v0 = procgen's starpilot, easy mode; procgen has no wheel for Python
# 3.11 with NumPy 2), levels from --seed; a truncated game bootstraps from V(true final obs); envpool's reset steps are in
# no loss of either phase; the logged return is the raw game score; gymnasium 1.x's NormalizeReward; --max-episode-steps
# can shorten a game; --anneal-lr anneals over the whole run; --v-value above 1 adds value-only epochs. Memory: the
# auxiliary buffer keeps n_iteration x num_envs x num_steps observations of 12 KiB in CPU memory, 6.0 GiB at the defaults.
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
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tyro
from torch.distributions.categorical import Categorical
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

    env_id: str = "StarpilotEasy-v0"
    """the id of the envpool Procgen game (e.g. BigfishEasy-v0, BossfightEasy-v0, StarpilotHard-v0)"""
    total_timesteps: int = 25000000
    """total environment steps of the experiment"""
    max_episode_steps: int | None = None
    """the time limit of a game in agent steps (None: the game's own, e.g. 1000 for Starpilot; it cannot be raised)"""
    learning_rate: float = 5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 64
    """the number of parallel game environments"""
    num_steps: int = 256
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = False
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.999
    """the discount factor gamma (also of the reward scaling's discounted return)"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 8
    """the number of mini-batches"""
    adv_norm_fullbatch: bool = True
    """toggles advantages normalization over the whole batch (the PPG code's; PPO normalises each minibatch)"""
    clip_coef: float = 0.2
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

    n_iteration: int = 32
    """N_π: the policy-phase iterations (rollout + update) between auxiliary phases (their observations stay in memory)"""
    e_policy: int = 1
    """E_π: the epochs of policy updates in each policy-phase iteration"""
    v_value: int = 1
    """E_V: the epochs of value updates in each policy-phase iteration"""
    e_auxiliary: int = 6
    """E_aux: the epochs over the auxiliary buffer in each auxiliary phase"""
    beta_clone: float = 1.0
    """β_clone: the weight of the behaviour-cloning KL in the auxiliary phase"""
    num_aux_rollouts: int = 4
    """the rollouts (one env's num_steps steps each) in an auxiliary minibatch"""
    n_aux_grad_accum: int = 1
    """the auxiliary minibatches whose gradients are summed into one optimizer step (the same step in less GPU memory)"""
    checkpoint_every: int = 1
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


class ProcgenTimeLimit(gym.vector.VectorWrapper):
    """A time limit (envpool's does not stop Procgen games) in envpool's NEXT_STEP style; info["reward"]: the raw reward."""

    def __init__(self, env, max_episode_steps):  # the envs are reset once, at the start, so no game is cut before
        super().__init__(env)
        self.max_episode_steps, self.cut = max_episode_steps, np.zeros(env.num_envs, dtype=bool)

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        if len(restart := np.nonzero(self.cut)[0]) > 0:  # envpool played on in each game cut at the last step: restart it
            obs[restart], first_info = self.env.reset(env_id=restart)
            for key in (k for k, v in first_info.items() if isinstance(v, np.ndarray) and k != "env_id"):
                info[key][restart] = first_info[key]  # elapsed_step 0, the new level's seed, ...
            reward[restart], terminated[restart], truncated[restart] = 0.0, False, False
        self.cut = (info["elapsed_step"] >= self.max_episode_steps) & ~terminated & ~truncated
        info["reward"] = reward.copy()
        return obs, reward, terminated, truncated | self.cut, info


def make_env(env_id, num_envs, seed, max_episode_steps=None, capture_video=False):  # sub-env i plays levels of seed + i
    video = {"render_mode": "rgb_array", "render_width": 256, "render_height": 256} if capture_video else {}
    envs = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=seed, **video)
    return ProcgenTimeLimit(envs, max_episode_steps or envs.spec.config.max_episode_steps)


class GameVideoRecorder:  # films sub-env 0's games 0, 1, 8, 27, ..., 1000, 2000, ... (make it after `envs.reset()`)
    def __init__(self, envs, video_folder):
        self.video = importlib.import_module("gymnasium.utils.save_video")  # needs moviepy: imported only to film
        self.envs, self.video_folder, self.game = envs, video_folder, 0
        self.frames = [envs.render()[0]] if self.video.capped_cubic_video_schedule(0) else []

    def step(self, game_over):
        if self.video.capped_cubic_video_schedule(self.game):
            self.frames.append(self.envs.render()[0])
        if game_over:
            if self.frames:  # 15 frames per second: real time
                self.video.save_video(self.frames, self.video_folder, episode_index=self.game, fps=15)
            self.frames, self.game = [], self.game + 1  # the next step is the reset step, which opens the next game


def layer_init_normed(layer, scale=1.0):  # the PPG code's: default weights rescaled to norm `scale` per output unit
    with torch.no_grad():
        dims = tuple(range(1, layer.weight.dim()))
        layer.weight.mul_(scale / torch.linalg.vector_norm(layer.weight, dim=dims, keepdim=True))
        layer.bias.zero_()
    return layer


class ResidualBlock(nn.Module):
    def __init__(self, channels, scale):
        super().__init__()
        self.conv0 = layer_init_normed(nn.Conv2d(channels, channels, kernel_size=3, padding=1), np.sqrt(scale))
        self.conv1 = layer_init_normed(nn.Conv2d(channels, channels, kernel_size=3, padding=1), np.sqrt(scale))

    def forward(self, x):
        return x + self.conv1(F.relu(self.conv0(F.relu(x))))


class ConvSequence(nn.Module):
    def __init__(self, in_channels, out_channels, scale):
        super().__init__()
        self.conv = layer_init_normed(nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1))
        self.res_block0 = ResidualBlock(out_channels, scale / np.sqrt(2))
        self.res_block1 = ResidualBlock(out_channels, scale / np.sqrt(2))

    def forward(self, x):
        return self.res_block1(self.res_block0(F.max_pool2d(self.conv(x), kernel_size=3, stride=2, padding=1)))


class Agent(nn.Module):
    """The value head reads the trunk's features detached: only the policy and the auxiliary value head shape the trunk."""

    def __init__(self, obs_shape, n_actions):
        super().__init__()
        scale = 1 / np.sqrt(3)  # the three stages share the trunk's norm; 64x64 frames end 8x8
        stages = [ConvSequence(obs_shape[0], 16, scale), ConvSequence(16, 32, scale), ConvSequence(32, 32, scale)]
        linear = layer_init_normed(nn.Linear(32 * 8 * 8, 256), 1.4)
        self.network = nn.Sequential(*stages, nn.Flatten(), nn.ReLU(), linear, nn.ReLU())
        self.actor = layer_init_normed(nn.Linear(256, n_actions), 0.1)
        self.critic = layer_init_normed(nn.Linear(256, 1), 0.1)
        self.aux_critic = layer_init_normed(nn.Linear(256, 1), 0.1)

    def get_value(self, x):
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        probs = Categorical(logits=self.actor(hidden), validate_args=False)  # a non-finite loss is caught anyway
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden.detach())

    def get_pi_logits(self, x):
        return self.actor(self.network(x / 255.0))

    def get_pi_value_and_aux_value(self, x):
        hidden = self.network(x / 255.0)
        return self.actor(hidden), self.critic(hidden.detach()), self.aux_critic(hidden)


def reset_step_mask(dones, last_done):  # (T, N): 0 at envpool's reset steps; last_done: the last rollout's dones[-1]
    return 1.0 - torch.cat([last_done[None], dones[:-1]])


def compute_gae(rewards, values, dones, terminations, next_value, gamma, gae_lambda):
    """GAE advantages and λ-returns, (T, N). Under NEXT_STEP the observation after a done is the game's true final one:
    values[t + 1] (or `next_value`) bootstraps a truncation, a termination nothing; the λ-chain stops at every done."""
    advantages, lastgaelam = torch.zeros_like(rewards), torch.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        nextvalues = next_value if t == len(rewards) - 1 else values[t + 1]
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
    return advantages, advantages + values


def masked_mean(x, valid):  # the mean of `x` over the entries where `valid` is 1; 0 when none is
    return (x * valid).sum() / valid.sum().clamp(min=1.0)


def normalize_advantages(advantages, valid):  # (A - mean) / (std + 1e-8), over the valid entries only
    mean = masked_mean(advantages, valid)
    var = (((advantages - mean) ** 2) * valid).sum() / (valid.sum() - 1.0).clamp(min=1.0)
    return (advantages - mean) / (var.sqrt() + 1e-8)


def auxiliary_losses(old_logits, new_logits, values, aux_values, returns, valid):
    """(KL(π_old || π_new), 0.5 (V - return)^2, 0.5 (V_aux - return)^2), each a mean over the valid samples (B,)."""
    old_log_probs = F.log_softmax(old_logits, dim=-1)
    kl = (old_log_probs.exp() * (old_log_probs - F.log_softmax(new_logits, dim=-1))).sum(dim=-1)
    real_value_loss = 0.5 * masked_mean((values - returns) ** 2, valid)
    aux_value_loss = 0.5 * masked_mean((aux_values - returns) ** 2, valid)
    return masked_mean(kl, valid), real_value_loss, aux_value_loss


def aux_buffer_bytes(args, obs_shape=(3, 64, 64), n_actions=15):  # every Procgen game: 64x64 RGB frames, 15 actions
    """The auxiliary buffer's CPU memory: per observation, its uint8 frame, λ-return, mask and old logits (float32)."""
    return args.n_iteration * args.num_envs * args.num_steps * (int(np.prod(obs_shape)) + 4 + 4 + 4 * n_actions)


def available_memory():  # bytes a new allocation can use (MemAvailable, capped by a cgroup v2 limit); None: unknown
    try:
        with open("/proc/meminfo") as f:
            available = int(re.search(r"MemAvailable:\s+(\d+)", f.read())[1]) * 1024
    except (OSError, TypeError):
        return None
    try:
        limit, used = (open(f"/sys/fs/cgroup/memory.{name}").read().strip() for name in ("max", "current"))
        return available if limit == "max" else min(available, int(limit) - int(used))
    except (OSError, ValueError):
        return available


def env_error(env_id):  # why this script cannot run `env_id` (cleanrl_utils/enjoy.py asks too), as one line, or None
    games = [i for i, (module, *_) in envpool.registration.registry.specs.items() if module == "envpool.procgen"]
    close = sorted({f"{env_id.capitalize()}Easy-v0"} & set(games)) or difflib.get_close_matches(env_id, games, n=1)
    hint = f"did you mean {close[0]}? " if close else ""  # upstream's ids: bigfish -> BigfishEasy-v0
    return None if env_id in games else f"{env_id} is not an envpool Procgen game; {hint}{SCRIPT} needs one"


def validation_error(args):
    sizes = "total_timesteps num_envs num_steps num_minibatches n_iteration e_policy v_value e_auxiliary num_aux_rollouts"
    sizes += " n_aux_grad_accum"
    batch, mbs, available = args.num_envs * args.num_steps, max(args.num_minibatches, 1), available_memory() or float("inf")
    limit, needed, sizes = envpool.make_spec(args.env_id).config.max_episode_steps, aux_buffer_bytes(args), sizes.split()
    checks = [
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (not 0 <= args.seed <= 2**31 - args.num_envs, f"--seed must be in [0, 2**31 - {args.num_envs}], got {args.seed}"),
        (
            not re.fullmatch(r"[\w.-]{1,150}", args.exp_name) or "__" in args.exp_name,
            f"--exp-name {args.exp_name!r} must be a folder name: up to 150 letters, digits, '.', '-' and single '_'",
        ),
        (batch % mbs, f"the batch of {batch} steps does not split into --num-minibatches {args.num_minibatches}"),
        (not all(0 <= getattr(args, k) <= 1 for k in ("gamma", "gae_lambda")), "--gamma and --gae-lambda must be in [0, 1]"),
        (
            not 0 < args.learning_rate < 3.4e37,  # above, Adam's first step (lr / 0.1) overflows float32
            f"--learning-rate must be positive and finite in float32, got {args.learning_rate}",
        ),
        (
            args.max_episode_steps is not None and not 1 <= args.max_episode_steps <= limit,
            f"--max-episode-steps must be in [1, {limit}] ({args.env_id} ends every game after {limit} steps)",
        ),
        (
            needed + 2**30 > available,
            f"the auxiliary buffer needs {needed / 2**30:.1f} GiB (and 1 GiB for the rest) but only "
            f"{available / 2**30:.1f} GiB of memory is available; lower --n-iteration, --num-envs or --num-steps",
        ),
        (args.capture_video and not importlib.util.find_spec("moviepy"), "--capture-video needs moviepy: pip install moviepy"),
    ]
    return next((message for failed, message in checks if failed), None)


def exit_if(error):  # a message stops the run before anything is created (one line on stderr, exit code 2); None goes on
    if error:
        print(f"{SCRIPT}: {error}", file=sys.stderr)
        sys.exit(2)


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):  # the raw scores of new levels' games
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]  # envpool seeds sub-env 0 with an int32
    envs = make_env(saved["env_id"], 1, (saved["seed"] + 100_000) % 2**31, saved["max_episode_steps"], capture_video)
    agent = Agent(envs.single_observation_space.shape, envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    obs, recorder = envs.reset()[0], GameVideoRecorder(envs, f"videos/{run_name}-eval") if capture_video else None
    episodic_returns, score = [], 0.0
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions = agent.get_action_and_value(torch.as_tensor(obs, device=device))[0]
        obs, _, terminated, truncated, infos = envs.step(actions.cpu().numpy())
        score += float(infos["reward"][0])
        if recorder is not None:
            recorder.step(bool(terminated[0] or truncated[0]))
        if terminated[0] or truncated[0]:
            episodic_returns, score = episodic_returns + [score], 0.0
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    args = tyro.cli(Args)
    ckpt = None  # checkpoints, --resume and clean stops: cleanrl_utils/checkpoint.py, imported only when asked for
    if (args.checkpoint_every or args.resume) and importlib.util.find_spec("cleanrl_utils"):
        fixed = ("env_id", "num_envs", "num_steps", "n_iteration")  # the networks and the auxiliary buffer's rows fit them
        ckpt = importlib.import_module("cleanrl_utils.checkpoint").Checkpoint(SCRIPT, args, fixed)  # --resume: saved flags
    elif args.resume:
        exit_if("--resume needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    elif args.checkpoint_every:  # a script copied alone trains without them
        print(f"{SCRIPT}: checkpoints are off: they need cleanrl_utils (pip install -e . in a cleanrl clone)")
    exit_if(env_error(args.env_id) or validation_error(args))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_phases = args.total_timesteps // (args.n_iteration * args.batch_size)  # rounded down to whole phases
    args.num_iterations = args.num_phases * args.n_iteration
    args.aux_batch_rollouts = int(args.num_envs * args.n_iteration)
    if args.num_phases == 0:
        print(f"{SCRIPT}: warning: the run ends before its first gradient step (--total-timesteps below one phase)")
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
    uploaded_videos = set()  # W&B gets each finished video once (the videos are written by this script)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    env_seed = (args.seed + (ckpt.saved["global_step"] if args.resume else 0)) % 2**31  # a resumed run plays new levels
    envs = make_env(args.env_id, args.num_envs, env_seed, args.max_episode_steps, args.capture_video)  # levels: seed + i
    print(
        f"{args.env_id}: time limit {envs.max_episode_steps} steps (the game's own: {envs.spec.config.max_episode_steps}); "
        f"rewards divided by a running std of the discounted return (γ {args.gamma}) and clipped to ±10 for learning"
    )
    envs = gym.wrappers.vector.ClipReward(gym.wrappers.vector.NormalizeReward(envs, gamma=args.gamma), -10.0, 10.0)
    return_rms = envs.env.return_rms  # the reward scale: the running variance of NormalizeReward's discounted return
    envs.action_space.seed(args.seed)
    agent = Agent(envs.single_observation_space.shape, envs.single_action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-8)

    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, dtype=torch.long).to(device)
    logprobs, rewards, dones, terminations, values = torch.zeros((5, args.num_steps, args.num_envs)).to(device)
    # the auxiliary buffer, in CPU memory, one row per rollout (one env's num_steps steps of one iteration)
    obs_shape, n_actions = envs.single_observation_space.shape, envs.single_action_space.n
    aux_obs = torch.empty((args.aux_batch_rollouts, args.num_steps) + obs_shape, dtype=torch.uint8)
    aux_returns, aux_valid = torch.empty((2, args.aux_batch_rollouts, args.num_steps))
    aux_old_logits = torch.empty((args.aux_batch_rollouts, args.num_steps, n_actions))
    print(
        f"auxiliary buffer: --n-iteration {args.n_iteration} x --num-envs {args.num_envs} x --num-steps {args.num_steps} "
        f"= {args.aux_batch_rollouts * args.num_steps} observations, {aux_buffer_bytes(args) / 2**30:.2f} GiB of CPU memory"
    )
    global_step, recent_returns = 0, deque(maxlen=20)
    aux_rows = []  # the buffer's rows of the phase under way (NumPy views): what a checkpoint keeps of it
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "agent optimizer return_rms aux_rows global_step")
    for buffer, rows in zip((aux_obs, aux_returns, aux_valid), aux_rows):  # a resumed phase's rollouts so far
        buffer[: len(rows)] = torch.from_numpy(rows)
    start_time, start_step, last_print = time.time(), global_step, time.time()
    episode_scores = np.zeros(args.num_envs)
    next_obs = torch.as_tensor(envs.reset()[0], device=device)
    recorder = GameVideoRecorder(envs, f"videos/{run_name}") if args.capture_video else None
    last_done = torch.zeros(args.num_envs, device=device)  # the previous rollout's last row of `dones`
    # ---- ALGO LOGIC: the training loop (policy phases of PPO iterations, auxiliary phases); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
            done = termination | truncation
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            # dones[step]: the episode ended at this step (upstream's dones[step]: one began at it)
            dones[step] = torch.as_tensor(done, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, device=device)

            episode_scores += infos["reward"]  # the raw game score, before the reward scaling
            if recorder is not None:
                recorder.step(bool(done[0]))
            for i in np.nonzero(done)[0]:
                recent_returns.append(float(episode_scores[i]))
                writer.add_scalar("charts/episodic_return", episode_scores[i], global_step)
                writer.add_scalar("charts/episodic_length", infos["elapsed_step"][i], global_step)
                episode_scores[i] = 0.0

        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages, returns = compute_gae(rewards, values, dones, terminations, next_value, args.gamma, args.gae_lambda)
            valid = reset_step_mask(dones, last_done)
            last_done = dones[-1].clone()

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        b_valid = valid.reshape(-1)
        if args.adv_norm_fullbatch:
            b_advantages = normalize_advantages(b_advantages, b_valid)

        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for epoch in range(max(args.e_policy, args.v_value)):  # the first min(E_π, E_V) epochs train both
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[start : start + args.minibatch_size]
                mb_valid = b_valid[mb_inds]  # reset steps count in no loss

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():  # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = masked_mean(-logratio, mb_valid)
                    approx_kl = masked_mean((ratio - 1) - logratio, mb_valid)
                    clipfracs.append(masked_mean(((ratio - 1.0).abs() > args.clip_coef).float(), mb_valid))

                mb_advantages = b_advantages[mb_inds]
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = masked_mean(torch.max(pg_loss1, pg_loss2), mb_valid)

                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * masked_mean(torch.max(v_loss_unclipped, v_loss_clipped), mb_valid)
                else:
                    v_loss = 0.5 * masked_mean((newvalue - b_returns[mb_inds]) ** 2, mb_valid)

                entropy_loss = masked_mean(entropy, mb_valid)
                loss = (pg_loss - args.ent_coef * entropy_loss) * (epoch < args.e_policy)
                loss = loss + v_loss * args.vf_coef * (epoch < args.v_value)

                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                if not torch.isfinite(loss + grad_norm):  # a NaN loss or gradient stops the run before optimizer.step()
                    envs.close()  # now, not at exit: a renderer left to the exit prints EGL tracebacks
                    writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        trained = b_valid.bool().cpu().numpy()
        y_pred, y_true = b_values.cpu().numpy()[trained], b_returns.cpu().numpy()[trained]
        var_y = np.var(y_true) if len(y_true) > 0 else 0.0
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

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
            for path in sorted(set(glob.glob(f"videos/{run_name}/*.mp4")) - uploaded_videos) if args.track else []:
                uploaded_videos.add(path)
                wandb.log({"videos": wandb.Video(path, format="mp4")})

        update = (iteration - 1) % args.n_iteration  # the rollouts' rows in the auxiliary buffer
        rollouts = slice(args.num_envs * update, args.num_envs * (update + 1))
        aux_obs[rollouts] = obs.transpose(0, 1).cpu()
        aux_returns[rollouts] = returns.T.cpu()
        aux_valid[rollouts] = valid.T.cpu()
        if iteration % args.n_iteration == 0:  # else the policy phase goes on
            # the auxiliary phase, after every n_iteration iterations: whole rollouts, num_aux_rollouts at a time
            with torch.no_grad():  # the policy to hold on to while the value heads learn
                for start in range(0, args.aux_batch_rollouts, args.num_aux_rollouts):
                    rollouts = slice(start, start + args.num_aux_rollouts)
                    logits = agent.get_pi_logits(aux_obs[rollouts].to(device).flatten(0, 1))
                    aux_old_logits[rollouts] = logits.view(-1, args.num_steps, n_actions).cpu()
            aux_inds = np.arange(args.aux_batch_rollouts)
            optimizer.zero_grad()
            for _aux_epoch in range(args.e_auxiliary):
                np.random.shuffle(aux_inds)
                for i, start in enumerate(range(0, args.aux_batch_rollouts, args.num_aux_rollouts)):
                    mb_rollouts = torch.as_tensor(aux_inds[start : start + args.num_aux_rollouts])
                    new_logits, new_values, new_aux_values = agent.get_pi_value_and_aux_value(
                        aux_obs[mb_rollouts].to(device).flatten(0, 1)
                    )
                    kl_loss, real_value_loss, aux_value_loss = auxiliary_losses(
                        aux_old_logits[mb_rollouts].to(device).flatten(0, 1),
                        new_logits,
                        new_values.view(-1),
                        new_aux_values.view(-1),
                        aux_returns[mb_rollouts].to(device).flatten(),
                        aux_valid[mb_rollouts].to(device).flatten(),
                    )
                    # L_joint (auxiliary value + β_clone KL) for the trunk and policy, L_value for the value head
                    loss = aux_value_loss + args.beta_clone * kl_loss + real_value_loss
                    (loss / args.n_aux_grad_accum).backward()
                    if (i + 1) % args.n_aux_grad_accum == 0 or start + args.num_aux_rollouts >= args.aux_batch_rollouts:
                        grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                        if not torch.isfinite(loss + grad_norm):
                            writer.close()
                            sys.exit(f"{SCRIPT}: non-finite auxiliary loss at global_step {global_step}; stopping")
                        optimizer.step()
                        optimizer.zero_grad()
            writer.add_scalar("losses/aux/kl_loss", kl_loss.item(), global_step)
            writer.add_scalar("losses/aux/aux_value_loss", aux_value_loss.item(), global_step)
            writer.add_scalar("losses/aux/real_value_loss", real_value_loss.item(), global_step)
        filled = (iteration % args.n_iteration) * args.num_envs  # the phase's rollouts so far (none once it is spent)
        aux_rows = [buffer.numpy()[:filled] for buffer in (aux_obs, aux_returns, aux_valid)]  # views, not copies
        if ckpt:  # at its cadence, at the end, and after Ctrl-C or SIGTERM, which then ends the run here
            ckpt.step(iteration, last=iteration == args.num_iterations)
    envs.close()

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        # CPU tensors: the checkpoint loads on a machine without CUDA
        torch.save({"model": {k: v.cpu() for k, v in agent.state_dict().items()}, "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")

    writer.close()
    if args.track:  # the videos not sent yet: the training's last and the evaluation's
        for path in sorted(set(glob.glob(f"videos/{run_name}*/*.mp4")) - uploaded_videos):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPG", "Phasic Policy Gradient")
