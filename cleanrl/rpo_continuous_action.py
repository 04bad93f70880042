# RPO (Rahman & Xue 2022, arXiv:2212.07536): ppo_continuous_action.py whose update scores each stored action under the
# Gaussian mean shifted by z ~ U(-rpo_alpha, rpo_alpha) per element, which keeps the entropy from collapsing (rollouts
# sample the unshifted policy); its defaults (8M steps) and changes; evaluation plays the mean action, not a sample.
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

    env_id: str = "HalfCheetah-v5"
    """the id of the environment"""
    total_timesteps: int = 8000000
    """total environment steps of the experiment"""
    learning_rate: float = 3e-4
    """the learning rate of the optimizer"""
    num_envs: int = 1
    """the number of parallel game environments"""
    num_steps: int = 2048
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 32
    """the number of mini-batches"""
    update_epochs: int = 10
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """toggles the clipped value loss (from OpenAI Baselines' PPO2; the PPO paper has none)"""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold (stops the epochs of an update early)"""
    rpo_alpha: float = 0.5
    """the half-width of the uniform noise added to the policy mean in the update (0 gives PPO)"""
    checkpoint_every: int = 500
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def make_env(env_id, num_envs, capture_video, run_name, gamma):
    if env_id.startswith("dm_control/"):  # the DeepMind Control Suite's ids, which Shimmy registers (the dm_control extra)
        gym.register_envs(importlib.import_module("shimmy"))

    def thunk(idx):
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        env = gym.wrappers.FlattenObservation(env)
        env = gym.wrappers.RecordEpisodeStatistics(env)  # statistics of the raw task, before reward normalisation
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        return gym.wrappers.TransformReward(env, lambda reward: float(np.clip(reward, -10, 10)))

    envs = [functools.partial(thunk, i) for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def merge_obs_rms(obs_rms):
    """(mean, var, count) of the observations all sub-envs saw, from their running statistics (Chan et al. 1979)."""
    counts = np.array([rms.count for rms in obs_rms])
    means = np.stack([rms.mean for rms in obs_rms])
    variances = np.stack([rms.var for rms in obs_rms])
    mean = (counts[:, None] * means).sum(0) / counts.sum()
    var = (counts[:, None] * (variances + (means - mean) ** 2)).sum(0) / counts.sum()
    return mean, var, float(counts.sum())


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def perturb_mean(action_mean, rpo_alpha, generator=None):  # RPO: action_mean + z, z ~ U(-rpo_alpha, rpo_alpha) per element
    if rpo_alpha == 0:  # PPO: no draw
        return action_mean
    return action_mean + torch.empty_like(action_mean).uniform_(-rpo_alpha, rpo_alpha, generator=generator)


class Agent(nn.Module):
    def __init__(self, obs_dim, action_dim, rpo_alpha):
        super().__init__()
        self.rpo_alpha = rpo_alpha
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, action_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, action_dim))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        action_mean = self.actor_mean(x)
        action_mean = action_mean if action is None else perturb_mean(action_mean, self.rpo_alpha)  # the update's shift
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


def validation_error(args, env):
    """The first reason this command line cannot run on `env`, as one line, or None."""
    batch_size, minibatches = args.num_envs * args.num_steps, max(args.num_minibatches, 1)  # 1 if 0: all rows are evaluated
    sizes = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs")
    checks = [
        (
            not isinstance(env.action_space, gym.spaces.Box) or len(env.action_space.shape) != 1,
            f"{args.env_id} has {env.action_space} actions; {SCRIPT} supports 1-D Box ones (for Discrete ones use ppo.py)",
        ),
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
        (not 0 <= args.rpo_alpha <= 3.4e38, f"--rpo-alpha must be a finite number >= 0, got {args.rpo_alpha}"),
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
    envs = make_env(saved["env_id"], 1, capture_video, f"{run_name}-eval", saved["gamma"])
    normalizer, obs_rms = envs.envs[0], checkpoint["obs_rms"]
    while not isinstance(normalizer, gym.wrappers.NormalizeObservation):
        normalizer = normalizer.env
    normalizer.obs_rms.mean, normalizer.obs_rms.var = obs_rms["mean"].double().numpy(), obs_rms["var"].double().numpy()
    normalizer.obs_rms.count, normalizer.update_running_mean = obs_rms["count"], False  # frozen
    agent = Agent(envs.single_observation_space.shape[0], envs.single_action_space.shape[0], saved["rpo_alpha"]).to(device)
    agent.load_state_dict(checkpoint["model"])
    obs, _ = envs.reset(seed=saved["seed"] + 100_000)
    episodic_returns, steps = [], 0  # steps: of the episode under way
    while len(episodic_returns) < eval_episodes and steps < 100_000:  # without a time limit, one may never end
        steps += 1
        with torch.no_grad():
            actions = agent.actor_mean(torch.as_tensor(obs, dtype=torch.float32, device=device))  # the mean action
        obs, _, _, _, infos = envs.step(actions.cpu().numpy())
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
    envs = make_env(args.env_id, args.num_envs, args.capture_video, run_name, args.gamma)
    envs.action_space.seed(args.seed)

    agent = Agent(envs.single_observation_space.shape[0], envs.single_action_space.shape[0], args.rpo_alpha).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs) + envs.single_action_space.shape).to(device)
    logprobs, rewards, dones, terminations, values, final_values = torch.zeros((6, args.num_steps, args.num_envs)).to(device)

    global_step, recent_returns = 0, deque(maxlen=20)
    obs_rms, return_rms = envs.get_attr("obs_rms"), envs.get_attr("return_rms")  # each sub-env's normalisation statistics
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "agent optimizer obs_rms return_rms global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    next_obs = torch.as_tensor(envs.reset(seed=args.seed + global_step)[0], dtype=torch.float32, device=device)
    # ---- ALGO LOGIC: the training loop (rollout, GAE, clipped-surrogate update); the set-up ends here ----
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
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            # dones[step]: the episode ended at this step (upstream's dones[step]: one began at it)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, dtype=torch.float32, device=device)

            if "final_info" in infos:
                truncated = np.nonzero(truncation & ~termination)[0]
                if len(truncated) > 0:  # a time limit is not terminal: keep V of the true final observation
                    final_obs = torch.as_tensor(np.stack(infos["final_obs"][truncated]), dtype=torch.float32, device=device)
                    with torch.no_grad():
                        final_values[step, truncated] = agent.get_value(final_obs).flatten()
                if "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                        recent_returns.append(float(episode["r"][i]))
                        writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)

        with torch.no_grad():
            next_value = agent.get_value(next_obs).flatten()
            advantages, returns = compute_gae(
                rewards, values, dones, terminations, final_values, next_value, args.gamma, args.gae_lambda
            )

        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1,) + envs.single_action_space.shape)
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
        mean, var, count = merge_obs_rms(obs_rms)
        merged = {"mean": torch.as_tensor(mean), "var": torch.as_tensor(var), "count": count}
        torch.save({"model": agent.state_dict(), "obs_rms": merged, "args": vars(args)}, model_path)
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
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "RPO", "Robust Policy Optimization")
