# PQN for classic control: Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning"; CleanRL's defaults. Deliberate
# change: a time-limit cut is not terminal (it bootstraps; no λ-return crosses episodes). Evaluation: ε = 0.05.
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

    env_id: str = "CartPole-v1"
    """the id of the environment"""
    total_timesteps: int = 500000
    """total environment steps of the experiment"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 4
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing (linearly to 0 over the run)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    q_lambda: float = 0.65
    """the lambda of the Q(lambda) returns"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the Q-network on each rollout"""
    max_grad_norm: float = 10.0
    """the maximum norm for the gradient clipping"""
    start_e: float = 1
    """the starting epsilon for exploration"""
    end_e: float = 0.05
    """the ending epsilon for exploration"""
    exploration_fraction: float = 0.5
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    checkpoint_every: int = 0
    """write runs/{run_name}/checkpoint.pt every this many iterations, at the end and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def make_env(env_id, num_envs, capture_video, run_name):
    def thunk(idx):
        if capture_video and idx == 0:
            env = gym.make(env_id, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    thunks = [functools.partial(thunk, i) for i in range(num_envs)]  # SAME_STEP: true last obs in info["final_obs"]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class QNetwork(nn.Module):
    def __init__(self, obs_dim, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 120)),
            nn.LayerNorm(120),
            nn.ReLU(),
            layer_init(nn.Linear(120, 84)),
            nn.LayerNorm(84),
            nn.ReLU(),
            layer_init(nn.Linear(84, n_actions)),
        )

    def forward(self, x):
        return self.network(x)


def epsilon_schedule(start_e, end_e, duration, t):
    """ε at env step `t`: linear from `start_e` to `end_e` over `duration` steps (0: `end_e` at once), then flat."""
    return end_e if duration <= 0 else start_e + (end_e - start_e) * min(t / duration, 1.0)


def compute_q_lambda_returns(rewards, q_max, dones, terminations, final_q_max, next_q_max, gamma, q_lambda):
    """Q(λ) returns, (T, N): G_t = r_t + γ [λ G_{t+1} + (1 - λ) max_a Q(s_{t+1}, a)], G_T = max_a Q(s_T, a) (`next_q_max`).
    A step that ends an episode (`dones`) bootstraps from its true final observation alone (G_t = r_t + γ `final_q_max[t]`),
    a terminal one (`terminations`) from nothing, so no return reaches into the next episode. `q_max[t]` = max_a Q(s_t, a)."""
    num_steps = rewards.shape[0]
    returns = torch.zeros_like(rewards)
    next_return = next_q_max
    for t in reversed(range(num_steps)):
        next_value = next_q_max if t == num_steps - 1 else q_max[t + 1]
        bootstrap = q_lambda * next_return + (1.0 - q_lambda) * next_value
        bootstrap = torch.where(dones[t].bool(), final_q_max[t], bootstrap)
        # `where`, not a product: whatever final_q_max holds at a terminal step is never read
        bootstrap = torch.where(terminations[t].bool(), torch.zeros_like(bootstrap), bootstrap)
        returns[t] = rewards[t] + gamma * bootstrap
        next_return = returns[t]
    return returns


def validation_error(args, env):
    """The first reason this command line cannot run on `env`, as one line, or None."""
    obs_shape = getattr(env.observation_space, "shape", None) or ()
    sizes = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs")
    checks = [
        (
            not isinstance(env.action_space, gym.spaces.Discrete),
            f"{args.env_id} has {env.action_space} actions; {SCRIPT} supports Discrete ones",
        ),
        (
            not isinstance(env.observation_space, gym.spaces.Box) or len(obs_shape) != 1,
            f"{args.env_id} has {env.observation_space} observations; {SCRIPT} supports 1-D Box ones",
        ),
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (
            args.num_envs * args.num_steps % max(args.num_minibatches, 1) != 0,
            f"the batch of {args.num_envs * args.num_steps} steps (--num-envs x --num-steps) does not split into "
            f"--num-minibatches {args.num_minibatches}; pick a divisor of {args.num_envs * args.num_steps}",
        ),
        (
            not all(0 <= getattr(args, k) <= 1 for k in ("gamma", "q_lambda", "start_e", "end_e", "exploration_fraction")),
            "--gamma, --q-lambda, --start-e, --end-e and --exploration-fraction must be in [0, 1]",
        ),
        (
            not 0 < args.learning_rate < 3.4e38,
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


def evaluate(model_path, eval_episodes, run_name, device, epsilon=0.05, capture_video=False):  # returns the returns
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    env_id, seed = checkpoint["args"]["env_id"], checkpoint["args"]["seed"] + 100_000
    envs = make_env(env_id, 1, capture_video, f"{run_name}-eval")
    envs.action_space.seed(seed)
    q_network = QNetwork(envs.single_observation_space.shape[0], envs.single_action_space.n).to(device)
    q_network.load_state_dict(checkpoint["model"])
    obs, _ = envs.reset(seed=seed)
    episodic_returns, steps = [], 0  # steps: of the episode under way
    while len(episodic_returns) < eval_episodes and steps < 100_000:  # without a time limit, one may never end
        steps += 1
        with torch.no_grad():
            q_values = q_network(torch.as_tensor(obs, dtype=torch.float32, device=device))
        actions = envs.action_space.sample() if random.random() < epsilon else torch.argmax(q_values, dim=1).cpu().numpy()
        obs, _, _, _, infos = envs.step(actions)
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
    args.num_iterations = args.total_timesteps // args.batch_size  # whole batches (rounded down)
    if args.num_iterations == 0:
        print(f"{SCRIPT}: warning: the run ends before its first gradient step (one batch is {args.batch_size} steps)")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rendering videos needs no display (and SDL then stays quiet)
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
    q_network = QNetwork(envs.single_observation_space.shape[0], envs.single_action_space.n).to(device)
    optimizer = torch.optim.RAdam(q_network.parameters(), lr=args.learning_rate)
    rollout = (args.num_steps, args.num_envs)
    obs = torch.zeros(rollout + envs.single_observation_space.shape).to(device)
    actions = torch.zeros(rollout, dtype=torch.long).to(device)
    rewards, dones, terminations, q_max, final_q_max = (torch.zeros(rollout).to(device) for _ in range(5))
    global_step, recent_returns = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "q_network optimizer global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    next_obs, _ = envs.reset(seed=args.seed + global_step)  # a resumed run starts new episodes
    next_obs = torch.as_tensor(next_obs, dtype=torch.float32, device=device)
    # ---- ALGO LOGIC: the training loop (ε-greedy rollout, Q(λ) returns, minibatch updates); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / args.num_iterations) * args.learning_rate

        for step in range(0, args.num_steps):
            epsilon = epsilon_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, global_step)
            global_step += args.num_envs
            obs[step] = next_obs

            with torch.no_grad():  # the greedy values are needed for the returns whether or not a sub-env explores
                step_q_max, greedy = q_network(next_obs).max(dim=1)
            q_max[step] = step_q_max
            explore = np.random.random(args.num_envs) < epsilon
            action = np.where(explore, envs.action_space.sample(), greedy.cpu().numpy())
            actions[step] = torch.as_tensor(action, device=device)

            next_obs, reward, termination, truncation, infos = envs.step(action)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            # dones[step]: the episode ended at this step (upstream's dones[step]: one began at it)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs, dtype=torch.float32, device=device)

            if "final_info" in infos:
                truncated = np.nonzero(truncation & ~termination)[0]
                if len(truncated) > 0:  # a truncated episode bootstraps from its true final observation
                    final_obs = torch.as_tensor(np.stack(infos["final_obs"][truncated]), dtype=torch.float32, device=device)
                    with torch.no_grad():
                        final_q_max[step, truncated] = q_network(final_obs).max(dim=1).values
                if "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                        recent_returns.append(float(episode["r"][i]))
                        writer.add_scalar("charts/episodic_return", episode["r"][i], global_step)
                        writer.add_scalar("charts/episodic_length", episode["l"][i], global_step)

        with torch.no_grad():
            next_q_max = q_network(next_obs).max(dim=1).values
            returns = compute_q_lambda_returns(
                rewards, q_max, dones, terminations, final_q_max, next_q_max, args.gamma, args.q_lambda
            )
        b_obs = obs.reshape((-1,) + envs.single_observation_space.shape)
        b_actions = actions.reshape(-1)
        b_returns = returns.reshape(-1)

        b_inds = np.arange(args.batch_size)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.batch_size, args.minibatch_size):
                mb_inds = b_inds[start : start + args.minibatch_size]
                old_val = q_network(b_obs[mb_inds]).gather(1, b_actions[mb_inds].unsqueeze(1)).squeeze(1)
                loss = F.mse_loss(old_val, b_returns[mb_inds])
                optimizer.zero_grad()
                loss.backward()
                grad_norm = nn.utils.clip_grad_norm_(q_network.parameters(), args.max_grad_norm)
                if not torch.isfinite(loss + grad_norm):  # a NaN loss or gradient stops the run before optimizer.step()
                    envs.close()  # now, not at exit: a renderer left to the exit prints EGL tracebacks
                    writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping")
                optimizer.step()

        sps = int((global_step - start_step) / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("charts/epsilon", epsilon, global_step)
        writer.add_scalar("losses/td_loss", loss.item(), global_step)
        writer.add_scalar("losses/q_values", old_val.mean().item(), global_step)
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
        torch.save({"model": q_network.state_dict(), "args": vars(args)}, model_path)
        print(f"model saved to {model_path}")
        episodic_returns = evaluate(model_path, 10, run_name, device, epsilon=0.05, capture_video=args.capture_video)
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
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PQN", "Parallelised Q-Network")
