# Data-parallel PPO on Atari: ppo_atari.py run by several processes (ranks), e.g. `torchrun --standalone --nproc-per-node 2
# cleanrl/ppo_atari_multigpu.py` (plain `python` is one rank), as in Li et al. 2020 (PyTorch Distributed, VLDB). Each rank
# steps its own envs and updates on minibatches of its own batch; one all-reduce averages the ranks' gradients before
# clipping and the Adam step, so the weights, all starting from rank 0's, stay identical. --total-timesteps and global_step
# count all ranks. Deliberate changes: ppo_atari.py's, and from CleanRL's version: all sub-envs get distinct seeds; rank 0
# logs every rank's games; the logged losses and the --target-kl stop are the ranks' means; nccl on GPUs, else gloo.
import functools
import glob
import importlib.util
import os
import random
import re
import shlex
import shutil
import sys
import time
from collections import deque
from dataclasses import dataclass

import ale_py
import gymnasium as gym
import numpy as np
import torch
import torch.distributed as dist
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
    """if toggled, cuda will be used when available (rank r on `cuda:{LOCAL_RANK}`, with the nccl backend)"""
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
    """total environment steps of the experiment, all ranks together"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    local_num_envs: int = 8
    """the number of parallel game environments of each rank"""
    num_envs: int | None = None
    """the number of parallel game environments of all ranks together, split evenly (default: --local-num-envs each)"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches (of each rank's batch)"""
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


def make_env(env_id, num_envs, capture_video, run_name):
    def thunk(idx):
        if capture_video and idx == 0:
            env = gym.make(env_id, frameskip=1, render_mode="rgb_array")
            env = gym.wrappers.RecordVideo(env, f"videos/{run_name}")
        else:
            env = gym.make(env_id, frameskip=1)
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
        return gym.wrappers.FrameStackObservation(env, 4)

    envs = [functools.partial(thunk, i) for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


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


def compute_gae(rewards, values, dones, terminations, final_values, next_value, gamma, gae_lambda):
    """GAE(γ, λ) advantages and λ-returns, (T, N): terminal steps bootstrap 0, truncated ones V(true final obs)."""
    advantages, lastgaelam = torch.zeros_like(rewards), torch.zeros_like(next_value)
    for t in reversed(range(len(rewards))):
        nextvalues = next_value if t == len(rewards) - 1 else values[t + 1]
        nextvalues = torch.where(dones[t].bool(), final_values[t], nextvalues)
        delta = rewards[t] + gamma * (1.0 - terminations[t]) * nextvalues - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
    return advantages, advantages + values


def average_gradients(parameters, world_size, *scalars):
    """Averages the gradients of `parameters` over the `world_size` ranks in one all-reduce, the 0-d tensors `scalars` in
    the same buffer; returns their means (detached), so that decisions taken from them agree on every rank."""
    if world_size == 1:
        return list(scalars)
    grads = [p.grad for p in parameters]
    extra = [torch.stack([s.detach().to(grads[0].dtype) for s in scalars])] if scalars else []
    flat = torch.cat([g.reshape(-1) for g in grads] + extra)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= world_size
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
    return list(flat[offset:].clone())  # not views that would keep the whole buffer alive


def validation_error(args, env, world_size=1, local_world_size=1):
    """The first reason this command line cannot run on `env` with `world_size` ranks, as one line, or None."""
    local_batch_size, minibatches = args.local_num_envs * args.num_steps, max(args.num_minibatches, 1)
    sizes = ("total_timesteps", "local_num_envs", "num_steps", "num_minibatches", "update_epochs")
    checks = [  # every rank finds the same; `local_world_size` of the ranks run on this machine
        (not isinstance(env.unwrapped, ale_py.AtariEnv), f"{args.env_id} is not an ale-py Atari game; {SCRIPT} needs one"),
        (args.num_envs not in (None, args.local_num_envs * world_size), f"--num-envs does not split over {world_size} ranks"),
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (
            local_batch_size % minibatches != 0,
            f"each rank's batch of {local_batch_size} steps (--local-num-envs x "
            f"--num-steps) does not split into --num-minibatches {minibatches}; pick a divisor of {local_batch_size}",
        ),
        (
            args.norm_adv and local_batch_size // minibatches < 2,
            "minibatches of 1 step cannot normalise advantages; use fewer --num-minibatches or --no-norm-adv",
        ),
        (not (0 <= args.gamma <= 1 and 0 <= args.gae_lambda <= 1), "--gamma and --gae-lambda must be in [0, 1]"),
        (
            not 0 < args.learning_rate < 3.4e37,  # above, Adam's first step (lr / 0.1) overflows float32
            f"--learning-rate must be positive and finite in float32, got {args.learning_rate}",
        ),
        (
            not 0 <= args.seed <= 2**32 - world_size,
            f"--seed must be in [0, 2**32 - {world_size}] (rank r seeds with seed + r), got {args.seed}",
        ),
        (
            not re.fullmatch(r"[\w.-]{1,150}", args.exp_name) or "__" in args.exp_name,
            f"--exp-name {args.exp_name!r} must be a folder name: up to 150 letters, digits, '.', '-' and single '_'",
        ),
        (
            args.cuda and torch.cuda.is_available() and torch.cuda.device_count() < local_world_size,
            f"--cuda gives each rank a GPU, but this machine runs {local_world_size} ranks "
            f"and has {torch.cuda.device_count()} GPU(s); add --no-cuda",
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
    envs = make_env(checkpoint["args"]["env_id"], 1, capture_video, f"{run_name}-eval")
    agent = Agent(envs.single_action_space.n).to(device)
    agent.load_state_dict(checkpoint["model"])
    obs, _ = envs.reset(seed=checkpoint["args"]["seed"] + 100_000)
    episodic_returns = []
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():
            actions, _, _, _ = agent.get_action_and_value(torch.as_tensor(obs, device=device))
        obs, _, _, _, infos = envs.step(actions.cpu().numpy())
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
    # torchrun describes each process (rank) in its environment; plain `python` is one rank alone
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", str(world_size)))
    if args.num_envs is not None:  # CleanRL's flag: the envs of all ranks together
        args.local_num_envs = args.num_envs // world_size
    try:  # every rank checks the same things and refuses alike, before any of them waits for the others
        env = gym.make(args.env_id)
    except Exception as e:
        exit_if(f"cannot make {args.env_id!r}: {e}")
    exit_if(validation_error(args, env, world_size, local_world_size))
    if not os.access(".", os.W_OK) or shutil.disk_usage(".").free < 2**26:
        exit_if(f"cannot write runs/ in {os.getcwd()}")
    if args.upload_model:  # the Hub upload is shared plumbing, in cleanrl_utils/huggingface.py
        hub = importlib.import_module("cleanrl_utils.huggingface") if importlib.util.find_spec("cleanrl_utils") else None
        exit_if(hub.upload_error(args) if hub else "--upload-model needs cleanrl_utils (pip install -e . in a cleanrl clone)")
    args.world_size = world_size
    args.num_envs = args.local_num_envs * world_size
    args.local_batch_size = int(args.local_num_envs * args.num_steps)
    args.local_minibatch_size = int(args.local_batch_size // args.num_minibatches)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size  # rounded down to whole batches
    if rank == 0 and args.num_iterations == 0:
        print(f"{SCRIPT}: warning: the run ends before its first gradient step (--total-timesteps below one batch)")
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() and args.cuda else "cpu")
    backend = "nccl" if device.type == "cuda" else "gloo"
    if world_size > 1:
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)

    # rank 0 names the run and starts W&B; the others take its name (None: W&B could not start, and every rank stops)
    run_time = int(time.time())  # a run that started in the same second owns that name; a resumed run keeps its own
    while rank == 0 and os.path.exists(f"runs/{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{run_time}"):
        run_time += 1
    run_name = ckpt.run_name if args.resume else f"{args.env_id.replace('/', '-')}__{args.exp_name}__{args.seed}__{run_time}"
    if rank == 0 and args.track:
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
            print(
                f"{SCRIPT}: --track could not start a W&B run ({reason}); run `wandb login` or set WANDB_MODE=offline",
                file=sys.stderr,
            )
            run_name = None
    if world_size > 1:
        shared = [run_name]
        dist.broadcast_object_list(shared, src=0)
        run_name = shared[0]
    if run_name is None:
        sys.exit(2)
    writer = SummaryWriter(f"runs/{run_name}") if rank == 0 else None
    if rank == 0:
        writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in vars(args).items()))
    uploaded_videos = set()  # W&B (on rank 0) gets each finished video once (RecordVideo has no W&B hook)

    rank_seed = args.seed + rank  # each rank samples actions and shuffles minibatches with its own seed
    random.seed(rank_seed)
    np.random.seed(rank_seed)
    torch.manual_seed(rank_seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    envs = make_env(args.env_id, args.local_num_envs, args.capture_video and rank == 0, run_name)
    envs.action_space.seed(rank_seed)
    if rank == 0:
        backend_used = f", {backend} backend" if world_size > 1 else ""
        print(f"{world_size} rank(s) x {args.local_num_envs} envs = {args.num_envs} envs; rank 0 on {device}{backend_used}")

    agent = Agent(envs.single_action_space.n).to(device)
    for tensor in agent.state_dict().values() if world_size > 1 else []:
        dist.broadcast(tensor, src=0)  # the ranks' seeds differ, and so would their initial weights: all take rank 0's
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs = torch.zeros((args.num_steps,) + envs.observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps,) + envs.action_space.shape, dtype=torch.long).to(device)
    logprobs, rewards, dones, terminations, values, final_values = torch.zeros((6,) + actions.shape).to(device)

    global_step, recent_returns = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every rank's random generators; --resume loads them back here
        ckpt.start(writer, envs, globals(), "agent optimizer global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    # sub-env i of rank r gets seed + r * local_num_envs + i: no two envs of the run share a seed (a resumed run: new games)
    next_obs = torch.as_tensor(envs.reset(seed=args.seed + global_step + rank * args.local_num_envs)[0], device=device)
    # ---- ALGO LOGIC: the training loop (rollouts, GAE, all-reduced clipped-surrogate update); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        finished_episodes = []  # (global_step, episodic return, episodic length) of this rank's games
        for step in range(0, args.num_steps):
            global_step += args.num_envs  # the ranks step in lockstep: one vector step of every rank
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
            next_obs = torch.as_tensor(next_obs, device=device)

            if "final_info" in infos:
                truncated = np.nonzero(truncation & ~termination)[0]
                if len(truncated) > 0:  # a time limit is not terminal: keep V of the true final observation
                    final_obs = torch.as_tensor(np.stack(infos["final_obs"][truncated]), device=device)
                    with torch.no_grad():
                        final_values[step, truncated] = agent.get_value(final_obs).flatten()
                if "episode" in infos["final_info"]:
                    episode = infos["final_info"]["episode"]
                    for i in np.nonzero(infos["final_info"]["_episode"])[0]:
                        finished_episodes.append((global_step, float(episode["r"][i]), int(episode["l"][i])))

        if world_size > 1:  # rank 0 logs the games of all ranks, once per rollout
            all_finished = [None] * world_size if rank == 0 else None
            dist.gather_object(finished_episodes, all_finished, dst=0)
            finished_episodes = [episode for episodes in all_finished for episode in episodes] if rank == 0 else []
        for episode_step, episodic_return, episodic_length in sorted(finished_episodes):
            recent_returns.append(episodic_return)
            writer.add_scalar("charts/episodic_return", episodic_return, episode_step)
            writer.add_scalar("charts/episodic_length", episodic_length, episode_step)

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

        # each rank takes its minibatches from its own batch; together they make the minibatch of minibatch_size
        b_inds = np.arange(args.local_batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, args.local_batch_size, args.local_minibatch_size):
                mb_inds = b_inds[start : start + args.local_minibatch_size]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():  # http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfrac = ((ratio - 1.0).abs() > args.clip_coef).float().mean()

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
                # from here on the gradients, and the losses logged and checked, are the ranks' means
                loss, pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac = average_gradients(
                    agent.parameters(), world_size, loss, pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac
                )
                clipfracs.append(clipfrac)
                grad_norm = nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                if not torch.isfinite(loss + grad_norm):  # a NaN loss or gradient stops the run before optimizer.step()
                    envs.close()  # now, not at exit: RecordVideo writes the episode it is filming
                    if rank == 0:  # the ranks' mean loss: every rank stops here
                        writer.close()
                    sys.exit(f"{SCRIPT}: non-finite loss at global_step {global_step}; stopping" if rank == 0 else 1)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        if rank == 0:  # rank 0 alone logs, the explained variance of its own batch
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
        if ckpt:  # every rank: at its cadence, at the end, and after Ctrl-C or SIGTERM, which then ends the run here
            ckpt.step(iteration, last=iteration == args.num_iterations)
    envs.close()  # RecordVideo writes the video of an episode still running when it closes
    if world_size > 1:
        dist.destroy_process_group()  # training is over: rank 0 alone saves, evaluates and uploads

    if rank == 0:
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
            launch = ["python"] if world_size == 1 else ["torchrun", "--standalone", f"--nproc-per-node={world_size}"]
            command = shlex.join([*launch, SCRIPT, *sys.argv[1:]])  # the card's command line
            hub.push_to_hub(args, run_name, episodic_returns, __file__, "PPO", "Proximal Policy Optimization", command=command)
