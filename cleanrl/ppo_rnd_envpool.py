# PPO with Random Network Distillation (RND; Burda et al. 2019, "Exploration by Random Network Distillation", ICLR) for
# hard-exploration Atari through envpool (MontezumaRevenge-v5): the intrinsic reward is the error of a trained predictor
# at matching a fixed random target network on the next frame; two value heads (extrinsic γ 0.999, episodic; intrinsic
# γ 0.99, non-episodic); advantages 2 x extrinsic + 1 x intrinsic; observation statistics initialised by random play;
# the intrinsic reward divided by a running std of its discounted sum; the predictor trained on 25% of each minibatch.
# PPO, Schulman et al. 2017; sticky actions 0.25, Machado et al. 2018. CleanRL's published defaults (CleanRL's PPO
# machinery, envpool's preprocessing and 27000-step limit, a lost life ending the agent's episode). Deliberate
# differences from CleanRL's script: the predictor learns from the next frame of each step, the one its reward is
# computed on; a time limit bootstraps from the true final observation; envpool's reset step after an episode (action
# ignored) is left out of every loss, of the intrinsic returns and of the running statistics.
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

    env_id: str = "MontezumaRevenge-v5"
    """the id of the environment (an envpool Atari id)"""
    total_timesteps: int = 2000000000
    """total environment steps of the experiment (the random steps of observation-normalisation initialisation not counted)"""
    learning_rate: float = 1e-4
    """the learning rate of the optimizer"""
    num_envs: int = 128
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.999
    """the discount factor gamma of the extrinsic reward"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation (both reward streams)"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles advantages normalization"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """toggles the clipped extrinsic value loss (from OpenAI Baselines' PPO2; the intrinsic one is never clipped)"""
    ent_coef: float = 0.001
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function (the sum of the extrinsic and intrinsic value losses)"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold (stops the epochs of an update early)"""

    update_proportion: float = 0.25
    """the proportion of each minibatch the RND predictor is trained on"""
    int_coef: float = 1.0
    """coefficient of the intrinsic advantages"""
    ext_coef: float = 2.0
    """coefficient of the extrinsic advantages"""
    int_gamma: float = 0.99
    """the discount factor gamma of the intrinsic reward"""
    num_iterations_obs_norm_init: int = 50
    """rollouts (num_envs x num_steps steps each) of random actions that initialise the observation statistics"""
    max_episode_steps: int = 27000
    """the time limit of a game in agent steps (envpool's default; a cut game bootstraps, it is not terminal)"""
    episodic_life: bool = True
    """if toggled, a lost life ends the agent's (extrinsic) episode, as in CleanRL's published script (the paper: off)"""
    checkpoint_every: int = 5
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


STICKY_ACTION_PROBABILITY = 0.25  # of the v5 ids (Machado et al. 2018), which the paper also uses


def make_env(env_id, num_envs, seed, max_episode_steps, episodic_life, capture_video=False):  # sub-env i: seed + i
    # 84x84 gray frames, 4 stacked, 4 skipped, rewards clipped (info["reward"] keeps the game's). Autoreset is NEXT_STEP:
    # the step that ends a game returns its true final observation, the next one (a reset step) the new game's first
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        seed=seed,
        episodic_life=episodic_life,
        reward_clip=True,
        repeat_action_probability=STICKY_ACTION_PROBABILITY,
        max_episode_steps=max_episode_steps,
        render_mode="rgb_array" if capture_video else None,
    )


class GameVideoRecorder:  # films sub-env 0's games 0, 1, 8, 27, ..., 1000, 2000, ... (make it after `envs.reset()`)
    def __init__(self, envs, video_folder):
        self.video = importlib.import_module("gymnasium.utils.save_video")  # needs moviepy: imported only to film
        self.envs, self.video_folder, self.game = envs, video_folder, 0
        self.frames = [envs.render()[0]] if self.video.capped_cubic_video_schedule(0) else []

    def step(self, game_over):
        if self.video.capped_cubic_video_schedule(self.game):
            self.frames.append(self.envs.render()[0])
        if game_over:
            if self.frames:  # 15 frames per second (60 / 4 skipped): real time
                self.video.save_video(self.frames, self.video_folder, episode_index=self.game, fps=15)
            self.frames, self.game = [], self.game + 1  # the next step is the reset step, which opens the next game


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):  # the paper's: a Nature-CNN trunk, a policy head and two value heads (extrinsic, intrinsic)
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
            layer_init(nn.Linear(64 * 7 * 7, 256)),
            nn.ReLU(),
            layer_init(nn.Linear(256, 448)),
            nn.ReLU(),
        )
        self.extra_layer = nn.Sequential(layer_init(nn.Linear(448, 448), std=0.1), nn.ReLU())
        self.actor = nn.Sequential(
            layer_init(nn.Linear(448, 448), std=0.01),
            nn.ReLU(),
            layer_init(nn.Linear(448, n_actions), std=0.01),
        )
        self.critic_ext = layer_init(nn.Linear(448, 1), std=0.01)
        self.critic_int = layer_init(nn.Linear(448, 1), std=0.01)

    def value_heads(self, hidden):  # the trunk's features plus one more (residual) layer
        features = self.extra_layer(hidden) + hidden
        return self.critic_ext(features).flatten(), self.critic_int(features).flatten()

    def get_value(self, x):  # (extrinsic, intrinsic) values, each (B,)
        return self.value_heads(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        probs = Categorical(logits=self.actor(hidden), validate_args=False)  # a non-finite loss is caught anyway
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), *self.value_heads(hidden)


class RNDModel(nn.Module):  # a fixed random target and a deeper predictor trained to match it, on one normalised frame
    def __init__(self):
        super().__init__()

        def conv_trunk():
            return [
                layer_init(nn.Conv2d(1, 32, 8, stride=4)),
                nn.LeakyReLU(),
                layer_init(nn.Conv2d(32, 64, 4, stride=2)),
                nn.LeakyReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=1)),
                nn.LeakyReLU(),
                nn.Flatten(),
            ]

        self.predictor = nn.Sequential(
            *conv_trunk(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
            layer_init(nn.Linear(512, 512)),
            nn.ReLU(),
            layer_init(nn.Linear(512, 512)),
        )
        self.target = nn.Sequential(*conv_trunk(), layer_init(nn.Linear(64 * 7 * 7, 512)))
        self.target.requires_grad_(False)

    def intrinsic_reward(self, frames):  # the novelty of each frame: half the predictor's squared error, (B,)
        return (self.predictor(frames) - self.target(frames)).pow(2).sum(1) / 2

    def predictor_loss(self, frames):  # the predictor's mean squared error per frame, (B,)
        return F.mse_loss(self.predictor(frames), self.target(frames), reduction="none").mean(1)


class RunningMeanStd:
    """Mean and population variance of all samples so far (float64, Chan et al.'s parallel merge of each batch
    (B, *shape)); before any, the mean is 0 and the variance 1."""

    def __init__(self, shape=(), device=None):
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = 0

    def update(self, x):
        if len(x) == 0:
            return
        batch_var, batch_mean = torch.var_mean(x.to(torch.float32), dim=0, correction=0)
        batch_count = len(x)
        total = self.count + batch_count
        delta = batch_mean.double() - self.mean
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var.double() * batch_count + delta**2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total

    def state_dict(self):
        return {"mean": self.mean, "var": self.var, "count": torch.tensor(self.count, dtype=torch.float64)}


class RewardForwardFilter:
    """Per env, the discounted sum of intrinsic rewards so far, never reset (the intrinsic stream is non-episodic), whose
    running std scales the intrinsic reward. Reset steps (`valid` 0) are skipped: the sum passes through unchanged."""

    def __init__(self, gamma, num_envs, device=None):
        self.gamma = gamma
        self.rewems = torch.zeros(num_envs, device=device)

    def update(self, rewards, valid):  # one step of every env, (N,) each
        self.rewems = torch.where(valid.bool(), self.rewems * self.gamma + rewards, self.rewems)
        return self.rewems


def normalize_frames(frames, obs_rms):
    """The RND networks' input: uint8 frames standardised per pixel and clipped to [-5, 5] (a constant pixel maps to 0)."""
    mean, std = obs_rms.mean.float(), torch.sqrt(obs_rms.var + 1e-8).float()
    return ((frames - mean) / std).clamp(-5.0, 5.0)


def reset_step_mask(dones, prev_done):  # (T, N): 0 at envpool's reset steps; prev_done: the last rollout's dones[-1]
    return 1.0 - torch.cat([prev_done[None], dones[:-1]])


def compute_gae(rewards, values, dones, terminations, next_value, gamma, gae_lambda):
    """Extrinsic GAE advantages and λ-returns, (T, N). Under NEXT_STEP the observation after a done is the episode's true
    final one: values[t + 1] (or `next_value`) bootstraps a truncation, a termination nothing; the λ-chain stops there."""
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value)
    for t in reversed(range(num_steps)):
        nextvalues = next_value if t == num_steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


def compute_intrinsic_gae(rewards, values, valid, next_value, gamma, gae_lambda):
    """Intrinsic GAE advantages and λ-returns, (T, N): the stream runs on across episode ends, as in the paper, but
    steps over each reset step (its reward is the novelty of a first frame no action earned): an episode's last step
    bootstraps from the new episode's first observation, one discount away, as if the game had restarted within the
    step (where the rollout ends first, `next_value` stands in). Advantages at reset steps are 0."""
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value)
    nextvalues = next_value
    for t in reversed(range(num_steps)):
        is_valid = valid[t].bool()
        delta = rewards[t] + gamma * nextvalues - values[t]
        gae = delta + gamma * gae_lambda * lastgaelam
        advantages[t] = torch.where(is_valid, gae, 0.0)
        lastgaelam = torch.where(is_valid, gae, lastgaelam)
        nextvalues = torch.where(is_valid, values[t], nextvalues)
    return advantages, advantages + values


def masked_mean(x, mask):  # the mean of x over the entries where mask is 1 (0 when there are none)
    return (x * mask).sum() / mask.sum().clamp(min=1)


def normalize_advantages(advantages, mask):  # standardised with the mean and unbiased std where mask is 1
    mean = masked_mean(advantages, mask)
    var = (((advantages - mean) ** 2) * mask).sum() / (mask.sum() - 1).clamp(min=1)
    return (advantages - mean) / (var.sqrt() + 1e-8)


def explained_variance(values, returns, mask):
    """1 - Var(returns - values) / Var(returns) where mask is 1 (NaN when the returns do not vary)."""
    y_pred, y_true = values[mask.bool()].cpu().numpy(), returns[mask.bool()].cpu().numpy()
    var_y = np.var(y_true)
    return np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y


def env_error(env_id):  # why this script cannot run `env_id` (cleanrl_utils/enjoy.py asks too), as one line, or None
    games = [i for i, (module, *_) in envpool.registration.registry.specs.items() if module == "envpool.atari"]
    game = re.sub(r"^ALE/|(NoFrameskip|Deterministic)?-v\d+$", "", env_id)  # Gymnasium's ids of envpool's games
    close = sorted({f"{game}-v5"} & set(games)) or difflib.get_close_matches(env_id, games, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return None if env_id in games else f"{env_id} is not an envpool Atari game; {hint}{SCRIPT} needs one, e.g. Pitfall-v5"


def validation_error(args):
    batch, mbs = args.num_envs * args.num_steps, max(args.num_minibatches, 1)
    sizes = "total_timesteps num_envs num_steps num_minibatches update_epochs max_episode_steps".split()
    checks = [
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (not 0 <= args.seed <= 2**31 - args.num_envs, f"--seed must be in [0, 2**31 - {args.num_envs}], got {args.seed}"),
        (
            not re.fullmatch(r"[\w.-]{1,150}", args.exp_name) or "__" in args.exp_name,
            f"--exp-name {args.exp_name!r} must be a folder name: up to 150 letters, digits, '.', '-' and single '_'",
        ),
        (batch % mbs, f"the batch of {batch} steps does not split into --num-minibatches {args.num_minibatches}"),
        (
            args.norm_adv and batch // mbs < 2,
            "minibatches of 1 step cannot normalise advantages; use fewer --num-minibatches or --no-norm-adv",
        ),
        (
            not all(0 <= getattr(args, k) <= 1 for k in ("gamma", "int_gamma", "gae_lambda", "update_proportion")),
            "--gamma, --int-gamma, --gae-lambda and --update-proportion must be in [0, 1]",
        ),
        (
            not 0 < args.learning_rate < 3.4e37,  # above, Adam's first step (lr / 0.1) overflows float32
            f"--learning-rate must be positive and finite in float32, got {args.learning_rate}",
        ),
        (args.capture_video and not importlib.util.find_spec("moviepy"), "--capture-video needs moviepy: pip install moviepy"),
    ]
    return next((message for failed, message in checks if failed), None)


def exit_if(error):  # a message stops the run before anything is created (one line on stderr, exit code 2); None goes on
    if error:
        print(f"{SCRIPT}: {error}", file=sys.stderr)
        sys.exit(2)


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):  # scores of games on training's settings
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)  # playing needs no intrinsic reward
    saved = checkpoint["args"]  # envpool seeds are int32
    envs = make_env(
        saved["env_id"],
        1,
        (saved["seed"] + 100_000) % 2**31,
        saved["max_episode_steps"],
        saved["episodic_life"],
        capture_video,
    )
    agent = Agent(envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    obs, recorder = envs.reset()[0], GameVideoRecorder(envs, f"videos/{run_name}-eval") if capture_video else None
    episodic_returns, game_return = [], 0.0
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            action = agent.get_action_and_value(torch.as_tensor(obs, device=device))[0]
        obs, _, _, truncation, infos = envs.step(action.cpu().numpy())
        game_return += float(infos["reward"][0])
        if recorder is not None:
            recorder.step(bool(infos["terminated"][0] or truncation[0]))
        if infos["terminated"][0] or truncation[0]:
            episodic_returns, game_return = episodic_returns + [game_return], 0.0
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
    exit_if(env_error(args.env_id) or validation_error(args))
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
    uploaded_videos = set()  # W&B gets each finished video once (the videos are written by this script)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    env_seed = (args.seed + (ckpt.saved["global_step"] if args.resume else 0)) % 2**31  # a resumed run plays new episodes
    envs = make_env(args.env_id, args.num_envs, env_seed, args.max_episode_steps, args.episodic_life, args.capture_video)
    n_actions = envs.single_action_space.n
    print(
        f"{args.env_id} (envpool): frame skip 4, sticky-action probability {STICKY_ACTION_PROBABILITY:g}, episodic life "
        f"{'on' if args.episodic_life else 'off'}, time limit {args.max_episode_steps} agent steps, rewards clipped"
    )
    agent = Agent(n_actions).to(device)
    rnd_model = RNDModel().to(device)
    # one optimizer and one gradient clip for the agent and the predictor (the target stays as initialised)
    combined_parameters = list(agent.parameters()) + list(rnd_model.predictor.parameters())
    optimizer = optim.Adam(combined_parameters, lr=args.learning_rate, eps=1e-5)
    frame_shape = (1,) + envs.single_observation_space.shape[1:]  # RND sees the newest frame only
    obs_rms = RunningMeanStd(frame_shape, device=device)
    reward_rms = RunningMeanStd((), device=device)
    reward_filter = RewardForwardFilter(args.int_gamma, args.num_envs, device=device)

    # observation statistics from random play, of the RND networks' inputs: the next frames of steps not reset steps
    init_steps = 0 if args.resume else args.num_iterations_obs_norm_init * args.num_steps  # a resumed run has its own
    if init_steps:
        print(f"initialising the observation statistics with {init_steps * args.num_envs} random steps (not in global_step)")
    envs.reset()
    next_done = np.zeros(args.num_envs, dtype=bool)
    for _ in range(init_steps):
        next_obs, _, termination, truncation, _ = envs.step(np.random.randint(0, n_actions, size=args.num_envs))
        obs_rms.update(torch.as_tensor(next_obs[~next_done, -1:], device=device))
        next_done = termination | truncation

    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    next_frames = torch.zeros((args.num_steps, args.num_envs) + frame_shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long).to(device)
    logprobs, rewards, dones, terminations, ext_values, int_values = torch.zeros((6, args.num_steps, args.num_envs)).to(device)
    global_step, recent_returns = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "agent rnd_model optimizer obs_rms reward_rms reward_filter global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    game_returns = np.zeros(args.num_envs)  # the game score so far (info["reward"], unclipped) of each env
    next_obs = torch.as_tensor(envs.reset()[0], device=device)  # fresh games: no random play in scores and videos
    prev_done = torch.zeros(args.num_envs, device=device)
    recorder = GameVideoRecorder(envs, f"videos/{run_name}") if args.capture_video else None
    # ---- ALGO LOGIC: the training loop (rollout, novelty, two-stream GAE, PPO and RND updates); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():
                action, logprob, _, ext_value, int_value = agent.get_action_and_value(next_obs)
            ext_values[step] = ext_value
            int_values[step] = int_value
            actions[step] = action
            logprobs[step] = logprob

            next_obs, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
            # a game over on the time limit's last step comes as truncated only; it is still a terminal state
            termination = termination | infos["terminated"].astype(bool)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            # dones[step]: the episode ended at this step (upstream's dones[step]: one began at it)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, device=device)
            next_frames[step] = next_obs[:, -1:]

            # a game ends at game over or at the time limit; a lost life alone (--episodic-life) does not end it
            game_returns += infos["reward"]
            game_over = (infos["terminated"] != 0) | truncation
            for i in np.nonzero(game_over)[0]:
                recent_returns.append(float(game_returns[i]))
                writer.add_scalar("charts/episodic_return", game_returns[i], global_step)
                writer.add_scalar("charts/episodic_length", infos["elapsed_step"][i], global_step)
                game_returns[i] = 0.0
            if recorder is not None:
                recorder.step(bool(game_over[0]))

        valid = reset_step_mask(dones, prev_done)
        prev_done = dones[-1].clone()
        with torch.no_grad():
            # novelty of each step's next frame under the statistics and predictor the rollout was collected with
            flat_frames = next_frames.reshape((-1,) + frame_shape)
            int_rewards = torch.cat(
                [
                    rnd_model.intrinsic_reward(normalize_frames(flat_frames[start : start + args.minibatch_size], obs_rms))
                    for start in range(0, args.batch_size, args.minibatch_size)
                ]
            ).view(args.num_steps, args.num_envs)
            # reset steps' rewards (the novelty of a first frame no action led to) enter neither the scale nor the returns
            int_returns_so_far = torch.stack([reward_filter.update(int_rewards[t], valid[t]) for t in range(args.num_steps)])
            reward_rms.update(int_returns_so_far[valid.bool()])
            int_rewards = int_rewards / torch.sqrt(reward_rms.var + 1e-8).float()

            next_ext_value, next_int_value = agent.get_value(next_obs)
            ext_advantages, ext_returns = compute_gae(
                rewards, ext_values, dones, terminations, next_ext_value, args.gamma, args.gae_lambda
            )
            int_advantages, int_returns = compute_intrinsic_gae(
                int_rewards, int_values, valid, next_int_value, args.int_gamma, args.gae_lambda
            )
        obs_rms.update(next_frames[valid.bool()])

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_next_frames = next_frames.reshape((-1,) + frame_shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = (args.ext_coef * ext_advantages + args.int_coef * int_advantages).reshape(-1)
        b_ext_returns = ext_returns.reshape(-1)
        b_int_returns = int_returns.reshape(-1)
        b_ext_values = ext_values.reshape(-1)
        b_valid = valid.reshape(-1)

        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]
                mb_valid = b_valid[mb_inds]

                fwd_loss = rnd_model.predictor_loss(normalize_frames(b_next_frames[mb_inds], obs_rms))
                # the predictor learns from a random part of the minibatch, so that it does not outpace the policy
                fwd_mask = mb_valid * (torch.rand(len(mb_inds), device=device) < args.update_proportion)
                fwd_loss = masked_mean(fwd_loss, fwd_mask)

                _, newlogprob, entropy, new_ext_value, new_int_value = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = masked_mean(-logratio, mb_valid)
                    approx_kl = masked_mean((ratio - 1) - logratio, mb_valid)
                    clipfracs.append(masked_mean(((ratio - 1.0).abs() > args.clip_coef).float(), mb_valid))

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = normalize_advantages(mb_advantages, mb_valid)

                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = masked_mean(torch.max(pg_loss1, pg_loss2), mb_valid)

                if args.clip_vloss:
                    ext_v_loss_unclipped = (new_ext_value - b_ext_returns[mb_inds]) ** 2
                    ext_v_clipped = b_ext_values[mb_inds] + torch.clamp(
                        new_ext_value - b_ext_values[mb_inds], -args.clip_coef, args.clip_coef
                    )
                    ext_v_loss_clipped = (ext_v_clipped - b_ext_returns[mb_inds]) ** 2
                    ext_v_loss = 0.5 * masked_mean(torch.max(ext_v_loss_unclipped, ext_v_loss_clipped), mb_valid)
                else:
                    ext_v_loss = 0.5 * masked_mean((new_ext_value - b_ext_returns[mb_inds]) ** 2, mb_valid)
                int_v_loss = 0.5 * masked_mean((new_int_value - b_int_returns[mb_inds]) ** 2, mb_valid)
                v_loss = ext_v_loss + int_v_loss

                entropy_loss = masked_mean(entropy, mb_valid)
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef + fwd_loss

                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(combined_parameters, args.max_grad_norm)
                if not torch.isfinite(loss + grad_norm):  # a NaN loss or gradient stops the run before optimizer.step()
                    envs.close()  # now, not at exit: a renderer left to the exit prints EGL tracebacks
                    writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        sps = int((global_step - start_step) / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/ext_value_loss", ext_v_loss.item(), global_step)
        writer.add_scalar("losses/int_value_loss", int_v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", torch.stack(clipfracs).mean().item(), global_step)
        writer.add_scalar("losses/explained_variance", explained_variance(ext_values, ext_returns, valid), global_step)
        writer.add_scalar("losses/int_explained_variance", explained_variance(int_values, int_returns, valid), global_step)
        writer.add_scalar("losses/fwd_loss", fwd_loss.item(), global_step)
        # the intrinsic reward the agent was given (normalised) and the scale it was divided by
        writer.add_scalar("charts/curiosity_reward", masked_mean(int_rewards, valid).item(), global_step)
        writer.add_scalar("charts/curiosity_reward_scale", torch.sqrt(reward_rms.var).item(), global_step)
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
        # playing needs only the agent; the RND networks and statistics are kept to compute the intrinsic rewards.
        # CPU copies, so that a machine without CUDA loads the file as it is
        states = {"model": agent, "rnd_model": rnd_model, "obs_rms": obs_rms, "reward_rms": reward_rms}
        checkpoint = {key: {k: v.cpu() for k, v in part.state_dict().items()} for key, part in states.items()}
        torch.save(checkpoint | {"args": vars(args)}, model_path)
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
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPO-RND", "PPO with Random Network Distillation")
