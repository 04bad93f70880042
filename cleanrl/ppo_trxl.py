# PPO (Schulman et al. 2017, arXiv:1707.06347) whose agent remembers its episode with Transformer-XL (Dai et al. 2019,
# arXiv:1901.02860): each layer attends over the cached hidden states of the last steps, as in PPO-TrXL of Memory Gym
# (Pleines et al. 2023, arXiv:2309.17207), with upstream CleanRL's defaults and flags (pre-layer norm, heads sharing
# their projections, lr and entropy coefficient annealed linearly to a floor, optional observation reconstruction).
# Deliberate changes: a time limit is not terminal (a truncated episode bootstraps from V(true final obs), seen with the
# episode's memory); the first step of an episode, which has no cached state to attend to, gets a zero attention output
# when acting and when updating alike (upstream averages over unwritten memory slots, which differ between the two); the
# bootstrap value at the end of a rollout sees the same window as acting would; ProofofMemory-v0 draws from its seed.
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
from types import SimpleNamespace
from typing import Literal

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
MEMORY_GYM = re.compile(r"(Endless-)?(MortarMayhem|MortarMayhemB|MysteryPath|SearingSpotlights)(-Grid)?-v\d+")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")  # Memory Gym's pygame would look for a sound card
for registrar in ("minigrid", "memory_gym"):  # optional; each registers its tasks on import (also for enjoy and tests)
    if importlib.util.find_spec(registrar):
        importlib.import_module(registrar)


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

    env_id: str = "MortarMayhem-Grid-v0"
    """the id of the environment (ProofofMemory-v0 ships in this file; MiniGrid-Memory*; Memory Gym's tasks)"""
    total_timesteps: int = 200000000
    """total environment steps of the experiment"""
    init_lr: float = 2.75e-4
    """the initial learning rate of the optimizer"""
    final_lr: float = 1.0e-5
    """the final learning rate of the optimizer after linearly annealing"""
    num_envs: int = 32
    """the number of parallel game environments"""
    num_steps: int = 512
    """the number of steps to run in each environment per policy rollout"""
    anneal_steps: int = 32 * 512 * 10000
    """the number of steps to linearly anneal the learning rate and entropy coefficient from initial to final"""
    gamma: float = 0.995
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 8
    """the number of mini-batches"""
    update_epochs: int = 3
    """the K epochs to update the policy"""
    norm_adv: bool = False
    """toggles advantages normalization"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """toggles the clipped value loss (from OpenAI Baselines' PPO2; the PPO paper has none)"""
    init_ent_coef: float = 0.0001
    """initial coefficient of the entropy bonus"""
    final_ent_coef: float = 0.000001
    """final coefficient of the entropy bonus after linearly annealing"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.25
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold (stops the epochs of an update early)"""
    trxl_num_layers: int = 3
    """the number of transformer layers"""
    trxl_num_heads: int = 4
    """the number of heads used in multi-head attention"""
    trxl_dim: int = 384
    """the dimension of the transformer"""
    trxl_memory_length: int = 119
    """the length of TrXL's sliding memory window: a step sees the L - 1 steps before it (cut to the time limit)"""
    trxl_positional_encoding: Literal["absolute", "learned", "none", ""] = "absolute"
    """the positional encoding of the cached states: sinusoids, learned, or none ("" is none too)"""
    reconstruction_coef: float = 0.0
    """the coefficient of the observation reconstruction loss (image observations); 0: not used"""
    checkpoint_every: int = 2
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


class ProofOfMemory(gym.Env):
    """Upstream's proof-of-memory task: on a line of 11 cells the agent starts in one of the middle 5 and steps left or
    right (Discrete(2)) to one of the two ends. One end pays +1.6 and ends the episode, the other -1.6; each other step
    costs 0.1. Which end pays is shown (observation [left, position, right], ends +1 or -1) at reset and after each of the
    first 2 steps, during which the agent cannot move; then both ends read 0. Drawn from `reset(seed=...)` (upstream
    uses NumPy's global RNG)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

    def _obs(self):
        shown = self.steps <= 2
        return np.array([self.goals[0] * shown, self.position / 5, self.goals[1] * shown], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position, self.steps = int(self.np_random.integers(-2, 3)), 0  # in cells; the ends are -5 and +5
        self.goals = self.np_random.permutation([-1.0, 1.0])
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        if self.steps <= 2:  # frozen while the goals are shown
            return self._obs(), 0.0, False, False, {}
        self.position += 1 if action == 1 else -1
        if abs(self.position) == 5:
            return self._obs(), 1.6 * float(self.goals[int(self.position > 0)]), True, False, {}
        return self._obs(), -0.1, False, False, {}

    def render(self):  # 11 cells of 40x40 pixels: the agent blue, the ends green/red while shown, then grey
        colours = {1.0: (0, 200, 0), -1.0: (220, 0, 0), 0.0: (160, 160, 160)}
        cells = np.full((11, 3), 255, np.uint8)
        cells[[0, 10]] = [colours[g * (self.steps <= 2)] for g in self.goals]
        cells[self.position + 5] = (0, 0, 255)
        return np.repeat(np.repeat(cells[None], 40, axis=0), 40, axis=1)


gym.register("ProofofMemory-v0", entry_point=ProofOfMemory, max_episode_steps=16)


def make_one(env_id, render_mode=None):
    """One env as the agent sees it, always behind a time limit: the limit sizes the episodic memory."""
    if env_id.startswith("MiniGrid"):  # as upstream: a 3x3 view drawn as an 84x84 RGB image, 96 steps
        from minigrid.wrappers import ImgObsWrapper, RGBImgPartialObsWrapper

        env = gym.make(env_id, agent_view_size=3, tile_size=28, max_episode_steps=96, render_mode=render_mode)
        return ImgObsWrapper(RGBImgPartialObsWrapper(env, tile_size=28))
    env = gym.make(env_id, render_mode=render_mode)
    if env.spec.max_episode_steps is None:  # Memory Gym's tasks know their limit after a reset; endless ones have none
        env.reset()
        env = gym.wrappers.TimeLimit(env, max(getattr(env.unwrapped, "max_episode_steps", 0), 0) or 1024)
    return env


def make_env(env_id, num_envs, capture_video, run_name):
    def thunk(idx):
        if capture_video and idx == 0:
            env = gym.wrappers.RecordVideo(make_one(env_id, render_mode="rgb_array"), f"videos/{run_name}")
        else:
            env = make_one(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    envs = [functools.partial(thunk, i) for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def layer_init(layer, std=np.sqrt(2)):  # upstream keeps PyTorch's default biases here
    torch.nn.init.orthogonal_(layer.weight, std)
    return layer


def memory_window(episode_step, memory_length):
    """The memory window of steps at `episode_step` (N,) of their episodes: the episode steps (N, L) whose cached hidden
    states fill the window, and the mask (N, L) of those the step attends to: the min(t, L - 1) steps before step t.
    The window ends at step t itself (t >= L - 1) or starts at step 0; positions at or after t are masked."""
    start = (episode_step - memory_length + 1).clamp(min=0)
    indices = start[:, None] + torch.arange(memory_length, device=episode_step.device)
    return indices, indices < episode_step[:, None]


class MultiHeadAttention(nn.Module):
    """Attention of one query per env over its memory window; the heads share their projections (as upstream)."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.dim, self.num_heads, self.head_size = dim, num_heads, dim // num_heads
        self.values = nn.Linear(self.head_size, self.head_size, bias=False)
        self.keys = nn.Linear(self.head_size, self.head_size, bias=False)
        self.queries = nn.Linear(self.head_size, self.head_size, bias=False)
        self.fc_out = nn.Linear(dim, dim)

    def forward(self, memories, query, mask):  # (N, L, dim), (N, dim), (N, L) bool -> (N, dim)
        heads = (memories.shape[0], -1, self.num_heads, self.head_size)
        values, keys = self.values(memories.reshape(heads)), self.keys(memories.reshape(heads))
        queries = self.queries(query.reshape(heads))
        energy = torch.einsum("nqhd,nkhd->nhqk", queries, keys).masked_fill(~mask[:, None, None], -1e20)
        attention = torch.softmax(energy / self.dim**0.5, dim=3) * mask[:, None, None]  # nothing to see: output 0
        return self.fc_out(torch.einsum("nhqk,nkhd->nqhd", attention, values).reshape(-1, self.dim))


class TransformerLayer(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.attention = MultiHeadAttention(dim, num_heads)
        self.layer_norm_q = nn.LayerNorm(dim)
        self.norm_kv = nn.LayerNorm(dim)
        self.layer_norm_attn = nn.LayerNorm(dim)
        self.fc_projection = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())

    def forward(self, memories, x, mask):  # pre-layer normalisation, a skip connection around each half
        x = x + self.attention(self.norm_kv(memories), self.layer_norm_q(x), mask)
        return x + self.fc_projection(self.layer_norm_attn(x))


class TransformerXL(nn.Module):
    def __init__(self, num_layers, dim, num_heads, max_episode_steps, positional_encoding):
        super().__init__()
        self.positional_encoding = positional_encoding
        positions = max_episode_steps + 1  # + 1: a truncated episode's final observation is valued too
        if positional_encoding == "absolute":  # sinusoids of Vaswani et al. (2017), counted down as upstream does
            angles = torch.arange(positions - 1, -1, -1.0)[:, None] * 1e4 ** (-torch.arange(0, dim, 2.0) / dim)
            self.register_buffer("pos_embedding", torch.cat((angles.sin(), angles.cos()), 1)[:, :dim], persistent=False)
        elif positional_encoding == "learned":
            self.pos_embedding = nn.Parameter(torch.randn(positions, dim))
        self.layers = nn.ModuleList(TransformerLayer(dim, num_heads) for _ in range(num_layers))

    def forward(self, x, memories, mask, indices):
        """x (N, dim): the step's input; memories (N, L, layers, dim): the cached inputs of each layer in the window;
        returns the output (N, dim) and the step's own layer inputs (N, layers, dim), to cache for the later steps."""
        if self.positional_encoding in ("absolute", "learned"):
            memories = memories + self.pos_embedding[indices].unsqueeze(2)
        cached = []
        for i, layer in enumerate(self.layers):
            cached.append(x.detach())
            x = layer(memories[:, :, i], x, mask)
        return x, torch.stack(cached, dim=1)


class Agent(nn.Module):
    def __init__(self, args, obs_shape, nvec, max_episode_steps):
        super().__init__()
        dim = args.trxl_dim
        if len(obs_shape) == 3:  # 84x84 RGB images: the Nature-DQN encoder
            self.encoder = nn.Sequential(
                layer_init(nn.Conv2d(3, 32, 8, stride=4)),
                nn.ReLU(),
                layer_init(nn.Conv2d(32, 64, 4, stride=2)),
                nn.ReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=1)),
                nn.ReLU(),
                nn.Flatten(),
                layer_init(nn.Linear(64 * 7 * 7, dim)),
                nn.ReLU(),
            )
        else:
            self.encoder = layer_init(nn.Linear(obs_shape[0], dim))
        self.transformer = TransformerXL(
            args.trxl_num_layers, dim, args.trxl_num_heads, max_episode_steps, args.trxl_positional_encoding
        )
        self.hidden_post_trxl = nn.Sequential(layer_init(nn.Linear(dim, dim)), nn.ReLU())
        self.actor_branches = nn.ModuleList(layer_init(nn.Linear(dim, n), np.sqrt(0.01)) for n in nvec)  # MultiDiscrete
        self.critic = layer_init(nn.Linear(dim, 1), 1)
        if args.reconstruction_coef > 0:  # decodes the hidden state back to the observation, an auxiliary loss
            self.transposed_cnn = nn.Sequential(
                layer_init(nn.Linear(dim, 64 * 7 * 7)),
                nn.ReLU(),
                nn.Unflatten(1, (64, 7, 7)),
                layer_init(nn.ConvTranspose2d(64, 64, 3, stride=1)),
                nn.ReLU(),
                layer_init(nn.ConvTranspose2d(64, 32, 4, stride=2)),
                nn.ReLU(),
                layer_init(nn.ConvTranspose2d(32, 3, 8, stride=4)),
                nn.Sigmoid(),
            )

    def get_hidden(self, x, memory, mask, indices):
        x = self.encoder(x.permute(0, 3, 1, 2) / 255.0 if x.dim() == 4 else x)
        x, memory = self.transformer(x, memory, mask, indices)
        return self.hidden_post_trxl(x), memory

    def get_value(self, x, memory, mask, indices):
        return self.critic(self.get_hidden(x, memory, mask, indices)[0]).flatten()

    def get_action_and_value(self, x, memory, mask, indices, action=None):
        hidden, memory = self.get_hidden(x, memory, mask, indices)
        probs = [Categorical(logits=branch(hidden), validate_args=False) for branch in self.actor_branches]
        if action is None:
            action = torch.stack([dist.sample() for dist in probs], dim=1)
        logprob = torch.stack([dist.log_prob(a) for dist, a in zip(probs, action.T)], dim=1)  # (N, branches)
        entropy = torch.stack([dist.entropy() for dist in probs], dim=1).sum(1)
        return action, logprob, entropy, self.critic(hidden).flatten(), memory, hidden

    def reconstruct_observation(self, hidden):
        return self.transposed_cnn(hidden).permute(0, 2, 3, 1)


def compute_gae(rewards, values, dones, terminations, final_values, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns, (T, N): terminal steps bootstrap 0, truncated ones V(true final obs)."""
    advantages, lastgaelam = torch.zeros_like(rewards), torch.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        nextvalues = next_value if t == len(rewards) - 1 else values[t + 1]
        nextvalues = torch.where(dones[t].bool(), final_values[t], nextvalues)
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
    return advantages, advantages + values


def validation_error(args, env):
    """The first reason this command line cannot run on `env`, as one line, or None."""
    batch_size, minibatches = args.num_envs * args.num_steps, max(args.num_minibatches, 1)  # 1 if 0: all rows are evaluated
    sizes = "total_timesteps num_envs num_steps num_minibatches update_epochs"
    sizes += " trxl_num_layers trxl_num_heads trxl_dim trxl_memory_length"
    obs_space, image = env.observation_space, env.observation_space.shape == (84, 84, 3)
    checks = [
        (
            not isinstance(env.action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)),
            f"{args.env_id} has {env.action_space} actions; {SCRIPT} supports Discrete and MultiDiscrete ones",
        ),
        (
            not isinstance(obs_space, gym.spaces.Box)
            or not (len(obs_space.shape) == 1 or image and obs_space.dtype == np.uint8),
            f"{args.env_id} has {obs_space} observations; {SCRIPT} supports 1-D Box ones and 84x84 RGB uint8 images",
        ),
        (min(getattr(args, k) for k in sizes.split()) < 1, f"--{sizes.replace(' ', ', --')} must be >= 1".replace("_", "-")),
        (args.trxl_dim % max(args.trxl_num_heads, 1), "--trxl-dim must split into --trxl-num-heads heads of equal size"),
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
        (not (0 < args.init_lr < 1e30 and 0 <= args.final_lr < 1e30), "--init-lr must be positive and --final-lr at least 0"),
        (args.reconstruction_coef > 0 and not image, f"--reconstruction-coef needs image observations, not {obs_space}"),
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


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    args = SimpleNamespace(**checkpoint["args"])
    envs = make_env(args.env_id, 1, capture_video, f"{run_name}-eval")
    max_episode_steps = envs.envs[0].spec.max_episode_steps
    space = envs.single_action_space
    nvec = np.atleast_1d(space.nvec if isinstance(space, gym.spaces.MultiDiscrete) else space.n)
    agent = Agent(args, envs.single_observation_space.shape, nvec, max_episode_steps).to(device)
    agent.load_state_dict(checkpoint["model"])
    memory = torch.zeros((1, max_episode_steps + 1, args.trxl_num_layers, args.trxl_dim), device=device)
    episode_step = torch.zeros(1, dtype=torch.long, device=device)
    obs, _ = envs.reset(seed=args.seed + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:  # every env here has a time limit
        indices, mask = memory_window(episode_step, args.trxl_memory_length)
        with torch.no_grad():
            x = torch.as_tensor(obs, device=device)
            actions, _, _, _, memory[0, episode_step], _ = agent.get_action_and_value(
                x if x.dtype == torch.uint8 else x.float(), memory[0, indices], mask, indices
            )
        obs, _, terminations, truncations, infos = envs.step(actions.cpu().numpy().reshape(envs.action_space.shape))
        episode_step += 1
        if terminations[0] or truncations[0]:
            memory[:], episode_step[:] = 0, 0
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
    envs.close()
    return episodic_returns


if __name__ == "__main__":
    args = tyro.cli(Args)
    ckpt = None  # checkpoints, --resume and clean stops: cleanrl_utils/checkpoint.py, imported only when asked for
    if (args.checkpoint_every or args.resume) and importlib.util.find_spec("cleanrl_utils"):
        # --resume: the saved flags; the saved networks fit these (the reconstruction decoder's presence is checked on load)
        fixed = ("env_id", "trxl_num_layers", "trxl_num_heads", "trxl_dim", "trxl_positional_encoding")
        ckpt = importlib.import_module("cleanrl_utils.checkpoint").Checkpoint(SCRIPT, args, fixed=fixed)
    elif args.resume:
        exit_if("--resume needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    elif args.checkpoint_every:  # a script copied alone trains without them
        print(f"{SCRIPT}: checkpoints are off: they need cleanrl_utils (pip install -e . in a cleanrl clone)")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array rendering needs no display (and SDL then stays quiet)
    if MEMORY_GYM.fullmatch(args.env_id) and not importlib.util.find_spec("memory_gym"):
        exit_if(
            f"{args.env_id} is a Memory Gym task, and memory-gym 1.0.2 pins gymnasium==0.29.0 and pygame==2.4.0, so it "
            "does not install beside Gymnasium 1.x; `pip install --no-deps memory-gym==1.0.2` runs it, or try --env-id "
            "ProofofMemory-v0"
        )
    try:  # unknown ids, missing modules or extras all mean this env cannot be made
        env = make_one(args.env_id)
    except Exception as e:
        exit_if(f"cannot make {args.env_id!r}: {e}")
    exit_if(validation_error(args, env))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size  # rounded down to whole batches
    max_episode_steps = env.spec.max_episode_steps
    args.trxl_memory_length = min(args.trxl_memory_length, max_episode_steps)  # a longer window would see nothing more
    if args.num_iterations == 0:
        print(f"{SCRIPT}: warning: the run ends before its first gradient step (--total-timesteps below one batch)")
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
    obs_shape, space = envs.single_observation_space.shape, envs.single_action_space
    nvec = np.atleast_1d(space.nvec if isinstance(space, gym.spaces.MultiDiscrete) else space.n)  # one branch per action
    agent = Agent(args, obs_shape, nvec, max_episode_steps).to(device)
    optimizer = optim.AdamW(agent.parameters(), lr=args.init_lr)
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape, dtype=torch.uint8 if len(obs_shape) == 3 else torch.float)
    obs = obs.to(device)
    actions = torch.zeros((args.num_steps, args.num_envs, len(nvec)), dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs, len(nvec))).to(device)
    rewards, dones, terminations, values, final_values = torch.zeros((5, args.num_steps, args.num_envs)).to(device)
    # each step's episode (an index into the rollout's list of episode memories) and its step in that episode
    episode_ids, episode_steps = torch.zeros((2, args.num_steps, args.num_envs), dtype=torch.long).to(device)
    # TrXL's episodic memory: per env, the input of every layer at every step of the episode under way
    memory = torch.zeros((args.num_envs, max_episode_steps + 1, args.trxl_num_layers, args.trxl_dim)).to(device)
    env_ids = torch.arange(args.num_envs, device=device)

    global_step, recent_returns = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "agent optimizer global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    # a resumed run starts new episodes, and with them an empty episodic memory
    next_obs = torch.as_tensor(envs.reset(seed=args.seed + global_step)[0], dtype=obs.dtype, device=device)
    episode_step = torch.zeros(args.num_envs, dtype=torch.long, device=device)
    # ---- ALGO LOGIC: the training loop (TrXL-memory rollout, GAE, clipped-surrogate update); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        frac = max(1.0 - global_step / args.anneal_steps, 0.0) if args.anneal_steps > 0 else 0.0
        lr = args.final_lr + frac * (args.init_lr - args.final_lr)
        optimizer.param_groups[0]["lr"] = lr
        ent_coef = args.final_ent_coef + frac * (args.init_ent_coef - args.final_ent_coef)
        # the memories of the episodes in this rollout, filled when each ends or the rollout does; first those under way
        episodes, episode_id = [None] * args.num_envs, env_ids.clone()

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step], episode_ids[step], episode_steps[step] = next_obs, episode_id, episode_step

            indices, mask = memory_window(episode_step, args.trxl_memory_length)
            with torch.no_grad():
                action, logprob, _, value, memory[env_ids, episode_step], _ = agent.get_action_and_value(
                    next_obs, memory[env_ids[:, None], indices], mask, indices
                )
            actions[step], logprobs[step], values[step] = action, logprob, value

            next_obs, reward, termination, truncation, infos = envs.step(action.cpu().numpy().reshape(envs.action_space.shape))
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)  # ended at this step
            next_obs = torch.as_tensor(next_obs, dtype=obs.dtype, device=device)

            if "final_info" in infos:
                truncated = np.nonzero(truncation & ~termination)[0]
                if len(truncated) > 0:  # a time limit is not terminal: V(true final obs), seen with the episode's memory
                    final_obs = torch.as_tensor(np.stack(infos["final_obs"][truncated]), dtype=obs.dtype, device=device)
                    truncated = torch.as_tensor(truncated, device=device)
                    final_indices, final_mask = memory_window(episode_step[truncated] + 1, args.trxl_memory_length)
                    with torch.no_grad():
                        final_values[step, truncated] = agent.get_value(
                            final_obs, memory[truncated[:, None], final_indices], final_mask, final_indices
                        )
                if "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                        recent_returns.append(float(episode["r"][i]))
                        writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)
            for i in np.nonzero(termination | truncation)[0]:  # the ended episode's memory stays for the update
                episodes[episode_id[i]] = memory[i, : episode_step[i] + 1].clone()
                memory[i], episode_id[i] = 0, len(episodes)
                episodes.append(None)
            episode_step = torch.where(dones[step].bool(), 0, episode_step + 1)

        with torch.no_grad():
            indices, mask = memory_window(episode_step, args.trxl_memory_length)
            next_value = agent.get_value(next_obs, memory[env_ids[:, None], indices], mask, indices)
            advantages, returns = compute_gae(
                rewards, values, dones, terminations, final_values, next_value, args.gamma, args.gae_lambda
            )
        for i in range(args.num_envs):  # the episodes still under way, as far as they went
            episodes[episode_id[i]] = memory[i, : episode_step[i]].clone()
        # (episodes, the longest one or the window, layers, dim), zero-padded: only the steps an episode took are kept
        b_memories = torch.zeros((len(episodes), max(args.trxl_memory_length, *map(len, episodes))) + memory.shape[2:])
        for j, episode in enumerate(episodes):
            b_memories[j, : len(episode)] = episode
        b_memories = b_memories.to(device)

        b_obs = obs.reshape((-1,) + obs_shape)
        b_logprobs = logprobs.reshape(-1, len(nvec))
        b_actions = actions.reshape(-1, len(nvec))
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        b_episode_ids, b_episode_steps = episode_ids.reshape(-1), episode_steps.reshape(-1)

        clipfracs = []
        for _epoch in range(args.update_epochs):
            b_inds = torch.randperm(args.batch_size, device=device)
            for start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[start : start + args.minibatch_size]
                # each step sees the window it acted with: the same cached states, taken from its episode's memory
                indices, mask = memory_window(b_episode_steps[mb_inds], args.trxl_memory_length)
                _, newlogprob, entropy, newvalue, _, hidden = agent.get_action_and_value(
                    b_obs[mb_inds], b_memories[b_episode_ids[mb_inds, None], indices], mask, indices, b_actions[mb_inds]
                )
                logratio = newlogprob - b_logprobs[mb_inds]  # (minibatch, branches): each action branch is clipped alone
                ratio = logratio.exp()

                with torch.no_grad():  # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                mb_advantages = mb_advantages[:, None]

                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                if args.clip_vloss:  # upstream's TrXL value loss has no factor 0.5
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef)
                    v_loss = torch.max(v_loss_unclipped, (v_clipped - b_returns[mb_inds]) ** 2).mean()
                else:
                    v_loss = ((newvalue - b_returns[mb_inds]) ** 2).mean()

                entropy_loss = entropy.mean()
                loss = pg_loss - ent_coef * entropy_loss + v_loss * args.vf_coef
                if args.reconstruction_coef > 0:
                    r_loss = F.binary_cross_entropy(agent.reconstruct_observation(hidden), b_obs[mb_inds] / 255.0)
                    loss = loss + args.reconstruction_coef * r_loss

                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                if not torch.isfinite(loss + grad_norm):  # a NaN loss or gradient stops the run before optimizer.step()
                    envs.close()
                    writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y

        sps = int((global_step - start_step) / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", lr, global_step)
        writer.add_scalar("charts/entropy_coefficient", ent_coef, global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/loss", loss.item(), global_step)
        if args.reconstruction_coef > 0:
            writer.add_scalar("losses/reconstruction_loss", r_loss.item(), global_step)
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
        if ckpt:  # at its cadence, at the end, and after Ctrl-C or SIGTERM, which then ends the run here
            ckpt.step(iteration, last=iteration == args.num_iterations)
    envs.close()  # RecordVideo writes the video of an episode still running when it closes

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanrl_model"
        torch.save({"model": agent.state_dict(), "args": vars(args)}, model_path)
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
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPO-TrXL", "PPO with Transformer-XL memory")
