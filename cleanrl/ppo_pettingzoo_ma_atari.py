# PPO (Schulman et al. 2017, arXiv:1707.06347; GAE: arXiv:1506.02438) by self-play on PettingZoo Atari (Terry et al. 2021):
# one CNN agent plays every player, each a sub-env told apart by indicator planes. Deliberate changes: a game cut by
# --max-cycles bootstraps from V(true final obs); the logged returns are each player's game score; the planes are scaled too.
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
import numpy as np
import supersuit as ss
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from pettingzoo.atari.all_modules import atari_environments
from pettingzoo.utils.wrappers import BaseParallelWrapper
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

SCRIPT = os.path.basename(__file__)
ROMS = os.path.join(os.path.dirname(ale_py.__file__), "roms")  # the ROMs that ship inside ale-py (no AutoROM download)
# not the games that can put a player out before the end: SuperSuit's vector env needs every player until the end
ELIMINATING = {"joust_v3", "mario_bros_v3", "maze_craze_v3", "warlords_v3", "wizard_of_wor_v3"}
GAMES = sorted(name.split("/")[1] for name in atari_environments if name.split("/")[1] not in ELIMINATING)


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
    """whether to capture videos of the first game (check out `videos` folder)"""
    save_model: bool = False
    """whether to save the model into `runs/{run_name}` and evaluate it for 10 games against itself"""
    upload_model: bool = False
    """whether to push the saved model, card, video, logs and script to the Hugging Face Hub (needs --save-model)"""
    hf_entity: str = ""
    """the user or org of the Hub repository `{hf_entity}/{env_id}-{exp_name}-seed{seed}` (default: the token's user)"""

    env_id: str = "pong_v3"
    """the PettingZoo Atari game, by its module name in `pettingzoo.atari` (pong_v3, surround_v2, tennis_v3, ...)"""
    total_timesteps: int = 20000000
    """total environment steps of the experiment (one per player per agent step)"""
    max_cycles: int = 100000
    """the time limit of a game in emulator frames, 4 per agent step (PettingZoo's `max_cycles`)"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 16
    """the number of parallel sub-envs: players x games (16 = 8 two-player games)"""
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
    checkpoint_every: int = 64
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


class RecordGame(BaseParallelWrapper):  # at a game's end: info["episode"] = {"r": {player: score}, "l": agent steps}
    def __init__(self, env, video_folder=None):  # with a folder, films the games RecordVideo would: 0, 1, 8, ..., 1000, ...
        super().__init__(env)
        self.video_folder, self.game = video_folder, -1
        self.video = video_folder and importlib.import_module("gymnasium.utils.save_video")  # moviepy: only when filming

    def reset(self, seed=None, options=None):
        self.returns, self.length, self.game = dict.fromkeys(self.env.possible_agents, 0.0), 0, self.game + 1
        result = self.env.reset(seed=seed, options=options)
        self.frames = [self.env.render()] if self.video and self.video.capped_cubic_video_schedule(self.game) else []
        return result

    def step(self, actions):
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        for agent, reward in rewards.items():
            self.returns[agent] += float(reward)
        self.length += 1
        if self.frames:
            self.frames.append(self.env.render())
        if all(terminations[agent] or truncations[agent] for agent in terminations):
            for agent in infos:
                infos[agent]["episode"] = {"r": dict(self.returns), "l": self.length}
            if self.frames:  # first to final observation; 15 per second (of 60 frames, 4 per agent step): real time
                self.video.save_video(self.frames, self.video_folder, episode_index=self.game, fps=15)
        return observations, rewards, terminations, truncations, infos


def make_vector_env(env_id, num_games, capture_video, run_name, max_cycles):  # sub-env g * players + p: game g, player p
    def thunk(idx):
        film = capture_video and idx == 0
        env = importlib.import_module(f"pettingzoo.atari.{env_id}").parallel_env(
            max_cycles=max_cycles, render_mode="rgb_array" if film else None, auto_rom_install_path=ROMS
        )
        env = ss.frame_skip_v0(ss.max_observation_v0(env, 2), 4)
        # the raw game's statistics, before reward clipping; lengths count agent steps, as CleanRL publishes them
        env = RecordGame(env, f"videos/{run_name}" if film else None)
        env = ss.clip_reward_v0(env, lower_bound=-1, upper_bound=1)
        env = ss.resize_v1(ss.color_reduction_v0(env, mode="B"), x_size=84, y_size=84)
        env = ss.agent_indicator_v0(ss.frame_stack_v1(env, 4), type_only=False)
        return ss.pettingzoo_env_to_vec_env_v1(env)

    # made one by one (concat_vec_envs_v1 would clone game 0 by pickling it), so that game 0 alone is filmed
    return ss.vector.ConcatVecEnv([functools.partial(thunk, g) for g in range(num_games)])


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, in_channels, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(in_channels, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor, self.critic = layer_init(nn.Linear(512, n_actions), std=0.01), layer_init(nn.Linear(512, 1), std=1)

    # x: (B, 84, 84, 4 frames + 1 plane per player) uint8, channels last; the planes are 0 or 255, scaled like the frames
    def get_value(self, x):
        return self.critic(self.network(x.permute(0, 3, 1, 2) / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x.permute(0, 3, 1, 2) / 255.0)
        probs = Categorical(logits=self.actor(hidden), validate_args=False)  # no argument checks: they cost time
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def compute_gae(rewards, values, dones, terminations, final_values, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns, (T, N): terminal steps bootstrap 0, truncated ones V(true final obs)."""
    advantages, lastgaelam = torch.zeros_like(rewards), torch.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        nextvalues = next_value if t == len(rewards) - 1 else values[t + 1]
        nextvalues = torch.where(dones[t].bool(), final_values[t], nextvalues)
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
    return advantages, advantages + values


def env_error(env_id):  # why this script cannot play `env_id`, as one line, or None (cleanrl_utils.enjoy asks too)
    reason = "can put a player out before the game ends" if env_id in ELIMINATING else "is not a PettingZoo Atari game"
    return None if env_id in GAMES else f"{env_id!r} {reason}; {SCRIPT} plays one of: {', '.join(GAMES)}"


def validation_error(args, players):  # the first reason this command line cannot run, as one line, or None
    batch_size, minibatches = args.num_envs * args.num_steps, max(args.num_minibatches, 1)  # 1 if 0: all rows are evaluated
    sizes = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "max_cycles")
    checks = [
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (args.num_envs % players != 0, f"--num-envs must hold whole games: {args.env_id} has {players} players"),
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


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):  # self-play; the first player's scores
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, capture_video, f"{run_name}-eval", saved["max_cycles"])
    agent = Agent(envs.observation_space.shape[-1], envs.action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(torch.as_tensor(obs, device=device))
        obs, _, _, _, infos = envs.step(actions.cpu().numpy())
        if "episode" in infos[0]:
            episodic_returns.append(infos[0]["episode"]["r"][envs.vec_envs[0].par_env.possible_agents[0]])
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
    exit_if(env_error(args.env_id))
    game = importlib.import_module(f"pettingzoo.atari.{args.env_id}").parallel_env(auto_rom_install_path=ROMS)
    agent_names, players = game.possible_agents, len(game.possible_agents)  # the ROMs ship in ale-py: a known id plays
    exit_if(validation_error(args, players))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size  # rounded down to whole batches
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
    uploaded_videos = set()  # W&B gets each finished video once (no W&B hook sees RecordGame's videos)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    envs = make_vector_env(args.env_id, args.num_envs // players, args.capture_video, run_name, args.max_cycles)
    envs.action_space.seed(args.seed)
    print(f"{args.env_id}: {args.num_envs // players} game(s) of {players} players; time limit {args.max_cycles} frames")
    agent = Agent(envs.observation_space.shape[-1], envs.action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.action_space.shape, dtype=torch.long).to(device)
    logprobs, rewards, dones, terminations, values, final_values = torch.zeros((6, args.num_steps, args.num_envs)).to(device)
    global_step, recent_lengths = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "agent optimizer global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    next_obs = torch.as_tensor(envs.reset(seed=args.seed + global_step)[0], device=device)  # a resumed run starts new games
    # ---- ALGO LOGIC: the training loop (self-play rollout, GAE, clipped-surrogate update); the set-up ends here ----
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
            termination, truncation = termination.astype(bool), truncation.astype(bool)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            # dones[step]: the episode ended at this step (upstream's dones[step]: one began at it)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, device=device)

            truncated = np.nonzero(truncation & ~termination)[0]
            if len(truncated) > 0:  # a time limit is not terminal: keep V of the true final observation
                final_obs = torch.as_tensor(np.stack([infos[i]["terminal_observation"] for i in truncated]), device=device)
                with torch.no_grad():
                    final_values[step, truncated] = agent.get_value(final_obs).flatten()
            # every player of a finished game carries the game's statistics: read them from its first player
            for first in range(0, args.num_envs, players):
                if "episode" in infos[first]:
                    episode = infos[first]["episode"]
                    recent_lengths.append(episode["l"])
                    writer.add_scalar("charts/episodic_return", episode["r"][agent_names[0]], global_step)
                    writer.add_scalar("charts/episodic_length", episode["l"], global_step)
                    for name, score in episode["r"].items():
                        writer.add_scalar(f"charts/episodic_return/{name}", score, global_step)
                        writer.add_scalar(f"charts/episodic_length/{name}", episode["l"], global_step)

        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages, returns = compute_gae(
                rewards, values, dones, terminations, final_values, next_value, args.gamma, args.gae_lambda
            )

        b_obs = obs.reshape((-1,) + envs.observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
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
                    envs.close()  # now, not at exit: a renderer left to the exit prints EGL tracebacks
                    writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
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
            recent = f"{np.mean(recent_lengths):.1f}" if recent_lengths else "n/a"
            left = (args.num_iterations - iteration) * args.batch_size / max(sps, 1)  # seconds, at the current speed
            print(
                f"global_step={global_step}, {global_step / args.total_timesteps:.1%} of {args.total_timesteps}, "
                f"episodic_length(last {len(recent_lengths)})={recent}, SPS={sps}, "
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
        torch.save({"model": agent.state_dict(), "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, capture_video=args.capture_video)
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)
        print(
            f"eval/episodic_return (first player, against itself) over {len(episodic_returns)} games: "
            f"{np.mean(episodic_returns):.2f}"
        )

    writer.close()
    if args.track:  # the videos not sent yet: the evaluation's (RecordGame films whole games only)
        for path in sorted(set(glob.glob(f"videos/{run_name}*/*.mp4")) - uploaded_videos):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPO self-play", "Proximal Policy Optimization")
