# PPO (Schulman et al. 2017, arXiv:1707.06347; GAE: arXiv:1506.02438) on Atari games run by envpool (Weng et al. 2022,
# arXiv:2206.10558), which does Mnih et al. 2015's preprocessing (frame skip 4, up to 30 no-op starts, FIRE after resets,
# no sticky actions, 27000 agent steps per game). Deliberate changes: envpool resets a finished env on the step after its
# done (NEXT_STEP autoreset), and that "reset step" is left out of every loss; truncations bootstrap from V(true final obs);
# the logged return is the whole game's unclipped score, ended by game over or the time limit, never by a life loss alone.
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

    env_id: str = "Breakout-v5"
    """the id of the environment (an envpool Atari id)"""
    total_timesteps: int = 10000000
    """total environment steps of the experiment"""
    max_episode_steps: int = 27000
    """the time limit of a game in agent steps (envpool's default: 27000, i.e. 108000 frames)"""
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
    checkpoint_every: int = 150
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
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


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
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
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def get_value(self, x):
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(x / 255.0)
        probs = Categorical(logits=self.actor(hidden), validate_args=False)  # no argument checks: they cost time
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def compute_gae(rewards, values, dones, terminations, last_done, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and returns of a NEXT_STEP rollout, and `valid`, all (T, N). Where an episode ended at step t
    (`dones`), obs[t+1] is its true final observation, so a truncation bootstraps from values[t+1] (`next_value` (N,) at
    t = T-1) and a termination (`terminations`) from nothing. The step after a done (`last_done` (N,) for t = 0) is a
    reset step, not a transition: `valid` is 0 there, and so is its advantage."""
    advantages, lastgaelam = torch.zeros_like(rewards), torch.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        nextvalues = next_value if t == len(rewards) - 1 else values[t + 1]
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
    valid = 1.0 - torch.cat([last_done[None], dones[:-1]])
    advantages = advantages * valid
    return advantages, advantages + values, valid


def masked_mean(x, mask):
    return (x * mask).sum() / mask.sum().clamp(min=1.0)  # 0 when the mask is empty


class EpisodeStatistics:
    """Each env's game score from envpool's info: `reward` is unclipped, `terminated` is 1 only at game over (not at a
    life loss) and `elapsed_step` counts the game's agent steps. A game ends at game over or at the time limit."""

    def __init__(self, num_envs):
        self.scores = np.zeros(num_envs, dtype=np.float64)

    def update(self, truncations, infos):
        """Adds one vector step; returns (env index, game score, length in agent steps) of each game that ended."""
        self.scores += infos["reward"]
        ended = np.nonzero(infos["terminated"].astype(bool) | truncations)[0]
        finished = [(int(i), float(self.scores[i]), int(infos["elapsed_step"][i])) for i in ended]
        self.scores[ended] = 0.0
        return finished


class GameRecorder:
    """Films the games of env 0 that `capped_cubic_video_schedule` picks (0, 1, 8, 27, ..., 1000, 2000, ...), first to
    final observation, as `video_folder/rl-video-episode-{game}.mp4`, rendering only then. Make it after `envs.reset()`
    and call `step(game_over)` after every `envs.step`."""

    def __init__(self, envs, video_folder, fps):
        from gymnasium.utils.save_video import capped_cubic_video_schedule, save_video  # moviepy: only when filming

        self.envs, self.video_folder, self.fps = envs, video_folder, fps
        self.schedule, self.save_video = capped_cubic_video_schedule, save_video
        self.game = 0
        self.frames = [envs.render()[0]] if self.schedule(0) else []  # the first game's first observation

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


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):
    """Plays `eval_episodes` games with the saved agent on its training env (seeds apart); returns their scores."""
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_vector_env(saved["env_id"], 1, (saved["seed"] + 100_000) % 2**31, saved["max_episode_steps"], capture_video)
    agent = Agent(envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    statistics = EpisodeStatistics(1)
    obs, _ = envs.reset()
    recorder = GameRecorder(envs, f"videos/{run_name}-eval", 60 / envs.config["frame_skip"]) if capture_video else None
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(torch.as_tensor(obs, device=device))
        obs, _, _, truncations, infos = envs.step(actions.cpu().numpy())
        finished = statistics.update(truncations, infos)
        if recorder:
            recorder.step(len(finished) > 0)
        episodic_returns += [score for _, score, _ in finished]
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
    uploaded_videos = set()  # W&B gets each finished video once (envpool has no W&B hook)

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    env_seed = (args.seed + (ckpt.saved["global_step"] if args.resume else 0)) % 2**31  # a resumed run plays new episodes
    envs = make_vector_env(args.env_id, args.num_envs, env_seed, args.max_episode_steps, args.capture_video)
    envs.action_space.seed(args.seed)
    config = envs.config  # the emulator runs at 60 frames per second; a video shows one frame per agent step
    print(
        f"{args.env_id} (envpool {envpool.__version__}): sticky-action probability {config['repeat_action_probability']:g}, "
        f"time limit {config['max_episode_steps']} agent steps"
    )

    agent = Agent(envs.single_action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, dtype=torch.long).to(device)
    logprobs, rewards, dones, terminations, values = torch.zeros((5, args.num_steps, args.num_envs)).to(device)

    global_step, recent_returns = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "agent optimizer global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    statistics = EpisodeStatistics(args.num_envs)
    next_obs = torch.as_tensor(envs.reset()[0], device=device)
    recorder = GameRecorder(envs, f"videos/{run_name}", 60 / config["frame_skip"]) if args.capture_video else None
    last_done = torch.zeros(args.num_envs).to(device)  # where set, the next rollout's first step is a reset step
    # ---- ALGO LOGIC: the training loop (rollout, masked GAE, clipped-surrogate update); the set-up ends here ----
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
            # a game over on the time limit's last step comes as truncated only; it is still a terminal state
            termination = termination | infos["terminated"].astype(bool)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            # dones[step]: the episode ended at this step (upstream's dones[step]: one began at it)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, device=device)

            finished = statistics.update(truncation, infos)
            if recorder:
                recorder.step(any(i == 0 for i, _, _ in finished))
            for _, score, length in finished:
                recent_returns.append(score)
                writer.add_scalar("charts/episodic_return", score, global_step)
                writer.add_scalar("charts/episodic_length", length, global_step)

        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages, returns, valid = compute_gae(
                rewards, values, dones, terminations, last_done, next_value, args.gamma, args.gae_lambda
            )
        last_done = dones[-1].clone()

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)
        b_valid = valid.reshape(-1)

        b_inds = np.arange(args.batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                end = start + args.minibatch_size
                mb_inds = b_inds[start:end]
                # reset steps stay in the minibatch but count nowhere: every mean below is over the valid steps
                mb_valid = b_valid[mb_inds]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = masked_mean(-logratio, mb_valid)
                    approx_kl = masked_mean((ratio - 1) - logratio, mb_valid)
                    clipfracs.append(masked_mean(((ratio - 1.0).abs() > args.clip_coef).float(), mb_valid))

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mean = masked_mean(mb_advantages, mb_valid)
                    # the unbiased variance of the valid steps, as torch.std gives when all are valid
                    variance = (((mb_advantages - mean) ** 2) * mb_valid).sum() / (mb_valid.sum() - 1).clamp(min=1.0)
                    mb_advantages = (mb_advantages - mean) / (variance.sqrt() + 1e-8)

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

        is_valid = b_valid.cpu().numpy() > 0
        y_pred, y_true = b_values.cpu().numpy()[is_valid], b_returns.cpu().numpy()[is_valid]
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
        print(f"eval/episodic_return over {len(episodic_returns)} episodes: {np.mean(episodic_returns):.2f}")

    writer.close()
    if args.track:  # the videos not sent yet: the training's last and the evaluation's
        for path in sorted(set(glob.glob(f"videos/{run_name}*/*.mp4")) - uploaded_videos):
            wandb.log({"videos": wandb.Video(path, format="mp4")})
        wandb.finish()
    if args.upload_model:  # last, so that a failed upload leaves every local result written
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPO", "Proximal Policy Optimization")
