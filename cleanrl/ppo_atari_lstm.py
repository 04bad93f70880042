# PPO (Schulman et al. 2017, arXiv:1707.06347; GAE: arXiv:1506.02438) on Atari with a recurrent agent: Mnih et al. 2015's
# preprocessing and CNN on one frame, then an LSTM (Hochreiter & Schmidhuber 1997); minibatches of whole env sequences,
# replayed from the rollout's initial state as in OpenAI Baselines' PPO2. Deliberate changes: the LSTM state is zeroed before
# each episode's first observation (a lost life included), acting and replaying; truncations bootstrap from V(true final
# obs) with their own episode's state; the logged return is the game score; ALE/*-v5 ids skip frames only once.
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
import torch.optim as optim
import tyro
from stable_baselines3.common.atari_wrappers import EpisodicLifeEnv, FireResetEnv, NoopResetEnv
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter

SCRIPT = os.path.basename(__file__)
gym.register_envs(ale_py)
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no start-up banner before our one-line errors


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
    """the number of mini-batches, each of whole env sequences (it must divide --num-envs)"""
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
    max_episode_steps: int = 27000
    """a game is truncated after this many agent steps of 4 frames, its no-op start included (27000: ALE's own limit)"""
    checkpoint_every: int = 100
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def make_env(env_id, num_envs, capture_video, run_name, max_episode_steps):
    def thunk(idx):
        max_frames = 4 * max_episode_steps  # ALE itself truncates a game at the time limit
        if capture_video and idx == 0:
            env = gym.make(env_id, frameskip=1, max_num_frames_per_episode=max_frames, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, frameskip=1, max_num_frames_per_episode=max_frames)
        # statistics of the raw game, before life loss and reward clipping; its lengths count frames (4 per step)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = NoopResetEnv(env, noop_max=30)
        env = gym.wrappers.MaxAndSkipObservation(env, skip=4)  # the only frame skip: ALE's own is off (frameskip=1)
        env = EpisodicLifeEnv(env)
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireResetEnv(env)
        env = gym.wrappers.TransformReward(env, lambda reward: float(np.sign(reward)))
        env = gym.wrappers.ResizeObservation(env, (84, 84))
        env = gym.wrappers.GrayscaleObservation(env)
        return gym.wrappers.FrameStackObservation(env, 1)  # one (1, 84, 84) frame: the LSTM remembers the past

    envs = [functools.partial(thunk, i) for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def episode_starts(dones, last_done):
    """(T, N): 1 where obs[t] starts an episode, i.e. (SAME_STEP autoreset) step t - 1 was done (`last_done` for t = 0)."""
    return torch.cat([last_done.unsqueeze(0), dones[:-1]]).float()


def unroll_lstm(lstm, features, lstm_state, starts):
    """Runs `lstm` over `features` (T, N, input) from `lstm_state` (h, c), replacing env n's state by zeros right before a
    step where `starts` (T, N) is 1 (nothing of the old episode leaks). Returns (outputs (T, N, hidden), last state)."""
    (h, c), outputs = lstm_state, []
    for feature, start in zip(features, starts):
        reset = start.bool().view(1, -1, 1)
        output, (h, c) = lstm(feature.unsqueeze(0), (h.masked_fill(reset, 0.0), c.masked_fill(reset, 0.0)))
        outputs.append(output[0])
    return torch.stack(outputs), (h, c)


class Agent(nn.Module):
    """CNN -> LSTM -> actor, critic on sequences: obs (T, N, 1, 84, 84), the state (h, c) before step 0, starts (T, N)."""

    def __init__(self, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(1, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.lstm = nn.LSTM(512, 128)
        for name, param in self.lstm.named_parameters():
            nn.init.constant_(param, 0.0) if name.startswith("bias") else nn.init.orthogonal_(param, 1.0)
        self.actor = layer_init(nn.Linear(128, n_actions), std=0.01)
        self.critic = layer_init(nn.Linear(128, 1), std=1)

    def initial_state(self, num_envs):  # the zero (h, c)
        return tuple(torch.zeros(1, num_envs, self.lstm.hidden_size, device=self.critic.weight.device) for _ in range(2))

    def get_states(self, x, lstm_state, starts):
        num_steps, num_envs = starts.shape
        features = self.network(x.reshape((num_steps * num_envs,) + x.shape[2:]) / 255.0)
        return unroll_lstm(self.lstm, features.view(num_steps, num_envs, -1), lstm_state, starts)

    def get_value(self, x, lstm_state, starts):
        return self.critic(self.get_states(x, lstm_state, starts)[0]).squeeze(-1)

    def get_action_and_value(self, x, lstm_state, starts, action=None):
        hidden, lstm_state = self.get_states(x, lstm_state, starts)
        probs = Categorical(logits=self.actor(hidden), validate_args=False)  # no argument checks: they cost time
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden).squeeze(-1), lstm_state


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
    sizes = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "max_episode_steps")
    checks = [
        (not isinstance(env.unwrapped, ale_py.AtariEnv), f"{args.env_id} is not an ale-py Atari game; {SCRIPT} needs one"),
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (
            args.num_envs % max(args.num_minibatches, 1) != 0,
            f"--num-envs {args.num_envs} does not split into "
            f"--num-minibatches {args.num_minibatches} (a minibatch holds whole env sequences); pick a divisor",
        ),
        (
            args.norm_adv and args.num_envs // max(args.num_minibatches, 1) * args.num_steps < 2,
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
        (args.capture_video and "rgb_array" not in env.metadata.get("render_modes", ()), f"{args.env_id} renders no video"),
    ]
    return next((message for failed, message in checks if failed), None)


def exit_if(error):  # a message stops the run before anything is created (one line on stderr, exit code 2); None goes on
    if error:
        print(f"{SCRIPT}: {error}", file=sys.stderr)
        sys.exit(2)


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]
    envs = make_env(saved["env_id"], 1, capture_video, f"{run_name}-eval", saved["max_episode_steps"])
    agent = Agent(envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    lstm_state, done = agent.initial_state(1), torch.ones(1, device=device)  # a zero state before each episode, as in training
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            obs = torch.as_tensor(obs, device=device).unsqueeze(0)
            actions, _, _, _, lstm_state = agent.get_action_and_value(obs, lstm_state, done.unsqueeze(0))
        obs, _, termination, truncation, infos = envs.step(actions[0].cpu().numpy())
        done = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
        if "final_info" in infos and "episode" in infos["final_info"]:
            episodic_returns.append(float(infos["final_info"]["episode"]["r"][0]))
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
    uploaded_videos = set()  # W&B gets each finished video once (RecordVideo has no W&B hook)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    envs = make_env(args.env_id, args.num_envs, args.capture_video, run_name, args.max_episode_steps)
    envs.action_space.seed(args.seed)
    game = envs.envs[0].unwrapped  # say how the game is played: ALE/*-v5 ids keep their sticky actions
    sticky, fire = game.ale.getFloat("repeat_action_probability"), "FIRE" in game.get_action_meanings()
    print(f"{args.env_id}: frame skip 4 (MaxAndSkip), sticky-action probability {sticky:g}, FIRE on reset: {fire}")

    agent = Agent(envs.single_action_space.n).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape, dtype=torch.long).to(device)
    logprobs, rewards, dones, terminations, values, final_values = torch.zeros((6, args.num_steps, args.num_envs)).to(device)

    global_step, recent_returns = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "agent optimizer global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    next_obs = torch.as_tensor(envs.reset(seed=args.seed + global_step)[0], device=device)  # a resumed run starts new episodes
    next_done = torch.ones(args.num_envs, device=device)  # whether next_obs starts an episode: the first ones do
    next_lstm_state = agent.initial_state(args.num_envs)
    # ---- ALGO LOGIC: the training loop (rollout, GAE, sequence-replay clipped-surrogate update); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        # the update replays each env's sequence from here
        initial_lstm_state = (next_lstm_state[0].clone(), next_lstm_state[1].clone())
        initial_done = next_done.clone()
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():
                action, logprob, _, value, next_lstm_state = agent.get_action_and_value(
                    next_obs.unsqueeze(0), next_lstm_state, next_done.unsqueeze(0)
                )
            values[step] = value[0]
            actions[step] = action[0]
            logprobs[step] = logprob[0]

            next_obs, reward, termination, truncation, infos = envs.step(action[0].cpu().numpy())
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            next_done = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            dones[step] = next_done
            next_obs = torch.as_tensor(next_obs, device=device)

            if "final_info" in infos:
                truncated = np.nonzero(truncation & ~termination)[0]
                if len(truncated) > 0:  # a time limit is not terminal: keep V of the true final observation,
                    # which continues the episode it ends: its value uses that episode's state
                    final_obs = torch.as_tensor(np.stack(infos["final_obs"][truncated]), device=device)
                    state = (next_lstm_state[0][:, truncated], next_lstm_state[1][:, truncated])
                    with torch.no_grad():
                        final_values[step, truncated] = agent.get_value(
                            final_obs.unsqueeze(0), state, torch.zeros((1, len(truncated)), device=device)
                        )[0]
                if "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                        recent_returns.append(float(episode["r"][i]))
                        writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)

        with torch.no_grad():
            next_value = agent.get_value(next_obs.unsqueeze(0), next_lstm_state, next_done.unsqueeze(0))[0]
            advantages, returns = compute_gae(
                rewards, values, dones, terminations, final_values, next_value, args.gamma, args.gae_lambda
            )
        starts = episode_starts(dones, initial_done)

        # minibatches of whole env sequences, each replayed from its initial state
        envs_per_minibatch = args.num_envs // args.num_minibatches
        env_inds = np.arange(args.num_envs)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(env_inds)
            for start in range(0, args.num_envs, envs_per_minibatch):
                mb_envs = torch.as_tensor(env_inds[start : start + envs_per_minibatch], device=device)

                _, newlogprob, entropy, newvalue, _ = agent.get_action_and_value(
                    obs[:, mb_envs],
                    (initial_lstm_state[0][:, mb_envs], initial_lstm_state[1][:, mb_envs]),
                    starts[:, mb_envs],
                    actions[:, mb_envs],
                )
                logratio = newlogprob - logprobs[:, mb_envs]
                ratio = logratio.exp()

                with torch.no_grad():  # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean())

                mb_advantages = advantages[:, mb_envs]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                mb_returns, mb_values = returns[:, mb_envs], values[:, mb_envs]
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - mb_returns) ** 2
                    v_clipped = mb_values + torch.clamp(newvalue - mb_values, -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - mb_returns) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - mb_returns) ** 2).mean()

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

        y_pred, y_true = values.cpu().numpy(), returns.cpu().numpy()
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
        description = "Proximal Policy Optimization with an LSTM memory"
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPO-LSTM", description)
