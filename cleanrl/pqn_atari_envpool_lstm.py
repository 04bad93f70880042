# Parallelised Q-Network (PQN; Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning", arXiv:2407.04811)
# with an LSTM, for Atari through envpool: no replay buffer and no target network; many envs collect short rollouts, the
# current network turns them into Q(λ) returns and is regressed on them. One 84x84 frame a step goes into a LayerNorm
# Nature CNN, then an LSTM (Hausknecht & Stone 2015, "Deep Recurrent Q-Learning", arXiv:1507.06527) whose memory is
# replayed from the rollout's first step for every update (minibatches are whole env sequences). envpool's Atari
# preprocessing is Mnih et al. 2015's without the frame stack (a life loss ends the agent's episode and its memory;
# rewards clipped; no sticky actions). CleanRL's published defaults. Deliberate differences: a time limit bootstraps
# from max_a Q of the true final observation with that episode's memory; no λ-return crosses into the next episode;
# envpool's reset step after an episode (action ignored) is not trained on; the memory is zeroed exactly before a new
# episode's first observation; the logged return is the game score (unclipped, all lives). Evaluation: ε = 0.05.
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
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 128
    """the number of parallel game environments"""
    num_steps: int = 32
    """the number of steps to run in each environment per rollout"""
    anneal_lr: bool = True
    """toggle learning rate annealing (linearly to 0 over the run)"""
    gamma: float = 0.99
    """the discount factor gamma"""
    q_lambda: float = 0.65
    """the lambda of the Q(lambda) returns"""
    num_minibatches: int = 32
    """the number of mini-batches"""
    update_epochs: int = 2
    """the K epochs to update the Q-network on each rollout"""
    max_grad_norm: float = 10.0
    """the maximum norm for the gradient clipping"""
    start_e: float = 1
    """the starting epsilon for exploration"""
    end_e: float = 0.01
    """the ending epsilon for exploration"""
    exploration_fraction: float = 0.10
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    max_episode_steps: int = 27000
    """the time limit of a game in agent steps (envpool's default: 108k frames)"""
    checkpoint_every: int = 64
    """write runs/{run_name}/checkpoint.pt every this many iterations (num_envs x num_steps steps) and at Ctrl-C; 0: never"""
    resume: str | None = None
    """continue the run saved in this run folder (or its checkpoint.pt), with its flags; flags given here override them"""


def make_env(env_id, num_envs, seed, max_episode_steps, capture_video=False):  # sub-env i is seeded with seed + i
    # envpool's autoreset is NEXT_STEP: the step that ends an episode returns its true final observation, and the next
    # step (a reset step) ignores its action and returns the new episode's first observation. One frame, no stack.
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        seed=seed,
        episodic_life=True,
        reward_clip=True,
        stack_num=1,
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


class QNetwork(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(1, 32, 8, stride=4)),
            nn.LayerNorm([32, 20, 20]),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.LayerNorm([64, 9, 9]),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.LayerNorm([64, 7, 7]),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.LayerNorm(512),
            nn.ReLU(),
        )
        self.lstm = nn.LSTM(512, 128)
        for name, param in self.lstm.named_parameters():
            if "bias" in name:
                nn.init.constant_(param, 0)
            elif "weight" in name:
                nn.init.orthogonal_(param, 1.0)
        self.q_head = layer_init(nn.Linear(128, n_actions))

    def initial_state(self, batch_size, device):  # the empty memory (h, c), each (1, batch_size, 128)
        shape = (self.lstm.num_layers, batch_size, self.lstm.hidden_size)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def forward(self, x, lstm_state, firsts):
        """Q-values (T * B, n_actions) of T time-major steps of B envs, x (T * B, 1, 84, 84), from the memory
        `lstm_state` before the first step, and the memory after the last; it is zeroed before a step where `firsts`."""
        hidden = self.network(x / 255.0)
        batch_size = lstm_state[0].shape[1]
        hidden = hidden.reshape((-1, batch_size, self.lstm.input_size))
        firsts = firsts.reshape((-1, batch_size))
        outputs = []
        for h, first in zip(hidden, firsts):
            keep = (1.0 - first).view(1, -1, 1)
            out, lstm_state = self.lstm(h.unsqueeze(0), (keep * lstm_state[0], keep * lstm_state[1]))
            outputs.append(out)
        return self.q_head(torch.cat(outputs).flatten(0, 1)), lstm_state


def epsilon_schedule(start_e, end_e, duration, t):
    """ε at env step `t`: linear from `start_e` to `end_e` over `duration` steps (0: `end_e` at once), then flat."""
    return end_e if duration <= 0 else start_e + (end_e - start_e) * min(t / duration, 1.0)


def compute_q_lambda_returns(rewards, q_max, dones, terminations, next_q_max, gamma, q_lambda):
    """Q(λ) returns, (T, N): G_t = r_t + γ [λ G_{t+1} + (1 - λ) max_a Q(s_{t+1}, a)], G_T = max_a Q(s_T, a) (`next_q_max`).
    Under NEXT_STEP the observation after a done step is the episode's true final one: a truncated step bootstraps from
    it alone (G_t = r_t + γ q_max[t + 1]), a terminal one from nothing, so no return reaches into the next episode."""
    num_steps = rewards.shape[0]
    returns = torch.zeros_like(rewards)
    next_return = next_q_max
    for t in reversed(range(num_steps)):
        next_value = next_q_max if t == num_steps - 1 else q_max[t + 1]
        bootstrap = q_lambda * next_return + (1.0 - q_lambda) * next_value
        bootstrap = torch.where(dones[t].bool(), next_value, bootstrap)
        bootstrap = torch.where(terminations[t].bool(), torch.zeros_like(bootstrap), bootstrap)
        returns[t] = rewards[t] + gamma * bootstrap
        next_return = returns[t]
    return returns


def next_step_masks(done, valid):
    """(next_valid, next_first) of the observation a step returned, under NEXT_STEP: after a done step comes a reset
    step (not trained on, but it sees the final observation with the episode's memory, the truncation bootstrap); after
    a reset step, a new episode's first observation, before which the memory is zeroed."""
    return 1.0 - done, 1.0 - valid


def masked_mean(x, valid):  # the mean of `x` where `valid` is 1 (0 at reset steps, even where x is nan); 0 if none is
    return torch.where(valid.bool(), x, torch.zeros_like(x)).sum() / valid.sum().clamp(min=1.0)


def env_error(env_id):  # why this script cannot run `env_id` (cleanrl_utils/enjoy.py asks too), as one line, or None
    games = [i for i, (module, *_) in envpool.registration.registry.specs.items() if module == "envpool.atari"]
    game = re.sub(r"^ALE/|(NoFrameskip|Deterministic)?-v\d+$", "", env_id)  # Gymnasium's ids of envpool's games
    close = sorted({f"{game}-v5"} & set(games)) or difflib.get_close_matches(env_id, games, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return None if env_id in games else f"{env_id} is not an envpool Atari game; {hint}{SCRIPT} needs one, e.g. Breakout-v5"


def validation_error(args):
    mbs = max(args.num_minibatches, 1)
    sizes = "total_timesteps num_envs num_steps num_minibatches update_epochs max_episode_steps".split()
    checks = [
        (min(getattr(args, k) for k in sizes) < 1, f"--{', --'.join(k.replace('_', '-') for k in sizes)} must be at least 1"),
        (not 0 <= args.seed <= 2**31 - args.num_envs, f"--seed must be in [0, 2**31 - {args.num_envs}], got {args.seed}"),
        (
            not re.fullmatch(r"[\w.-]{1,150}", args.exp_name) or "__" in args.exp_name,
            f"--exp-name {args.exp_name!r} must be a folder name: up to 150 letters, digits, '.', '-' and single '_'",
        ),
        (
            args.num_envs % mbs,
            f"--num-envs {args.num_envs} does not split into --num-minibatches {args.num_minibatches} "
            "(a minibatch holds whole env sequences)",
        ),
        (
            not all(0 <= getattr(args, k) <= 1 for k in ("gamma", "q_lambda", "start_e", "end_e", "exploration_fraction")),
            "--gamma, --q-lambda, --start-e, --end-e and --exploration-fraction must be in [0, 1]",
        ),
        (
            not 0 < args.learning_rate < 3.4e37,  # RAdam's first steps divide it by 0.1 in float32
            f"--learning-rate must be positive and finite in float32, got {args.learning_rate}",
        ),
        (args.capture_video and not importlib.util.find_spec("moviepy"), "--capture-video needs moviepy: pip install moviepy"),
    ]
    return next((message for failed, message in checks if failed), None)


def exit_if(error):  # a message stops the run before anything is created (one line on stderr, exit code 2); None goes on
    if error:
        print(f"{SCRIPT}: {error}", file=sys.stderr)
        sys.exit(2)


def evaluate(model_path, eval_episodes, run_name, device, capture_video=False):  # ε-greedy (0.05) games' scores
    checkpoint = torch.load(model_path, map_location=device, weights_only=True)
    saved = checkpoint["args"]  # envpool seeds are int32
    envs = make_env(saved["env_id"], 1, (saved["seed"] + 100_000) % 2**31, saved["max_episode_steps"], capture_video)
    n_actions = envs.single_action_space.n
    q_network = QNetwork(n_actions).to(device)
    q_network.load_state_dict(checkpoint["model"])
    rng = np.random.default_rng(saved["seed"] + 100_000)
    obs, recorder = envs.reset()[0], GameVideoRecorder(envs, f"videos/{run_name}-eval") if capture_video else None
    lstm_state = q_network.initial_state(1, device)
    valid, first = torch.ones(1, device=device), torch.ones(1, device=device)
    episodic_returns, game_score = [], 0.0
    while len(episodic_returns) < eval_episodes:
        with torch.no_grad():  # the memory follows every observation, also when the action is random
            q_values, lstm_state = q_network(torch.as_tensor(obs, device=device), lstm_state, first)
        if rng.random() < 0.05:
            action = rng.integers(n_actions, size=1)
        else:
            action = q_values.argmax(dim=1).cpu().numpy()
        obs, _, termination, truncation, infos = envs.step(action)
        valid, first = next_step_masks(torch.as_tensor(termination | truncation, dtype=torch.float32, device=device), valid)
        game_score += float(infos["reward"][0])  # the unclipped score; a life loss does not end the game
        if recorder is not None:
            recorder.step(bool(infos["terminated"][0] or truncation[0]))
        if infos["terminated"][0] or truncation[0]:
            episodic_returns, game_score = episodic_returns + [game_score], 0.0
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
    envs = make_env(args.env_id, args.num_envs, env_seed, args.max_episode_steps, args.capture_video)
    config = envs.spec.config
    print(
        f"{args.env_id} (envpool): frame skip {config.frame_skip}, sticky-action probability "
        f"{config.repeat_action_probability:g}, episodic life, time limit {config.max_episode_steps} agent steps"
    )
    n_actions = envs.single_action_space.n
    q_network = QNetwork(n_actions).to(device)
    optimizer = optim.RAdam(q_network.parameters(), lr=args.learning_rate)

    obs = torch.zeros((args.num_steps, args.num_envs) + envs.single_observation_space.shape, dtype=torch.uint8).to(device)
    actions = torch.zeros((args.num_steps, args.num_envs), dtype=torch.long).to(device)
    rewards, dones, terminations, valid, q_max, firsts = torch.zeros((6, args.num_steps, args.num_envs)).to(device)
    exploration_steps = args.exploration_fraction * args.total_timesteps
    global_step, recent_returns = 0, deque(maxlen=20)
    if ckpt:  # a checkpoint holds these and every random generator; --resume loads them back here
        ckpt.start(writer, envs, globals(), "q_network optimizer global_step")
    start_time, start_step, last_print = time.time(), global_step, time.time()
    game_scores = np.zeros(args.num_envs)
    next_obs = torch.as_tensor(envs.reset()[0], device=device)
    recorder = GameVideoRecorder(envs, f"videos/{run_name}") if args.capture_video else None
    # carried across rollouts: 0 where the next step is a reset step; 1 where next_obs starts an episode (empty memory)
    next_valid, next_first = torch.ones(args.num_envs, device=device), torch.ones(args.num_envs, device=device)
    next_lstm_state = q_network.initial_state(args.num_envs, device)  # a resumed run starts new episodes: an empty memory
    # ---- ALGO LOGIC: the training loop (ε-greedy rollout with memory, Q(λ) returns, regression); the set-up ends here ----
    for iteration in range(global_step // args.batch_size + 1, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate
        initial_lstm_state = (next_lstm_state[0].clone(), next_lstm_state[1].clone())  # the update replays from here

        for step in range(0, args.num_steps):
            epsilon = epsilon_schedule(args.start_e, args.end_e, exploration_steps, global_step)
            global_step += args.num_envs
            obs[step] = next_obs
            valid[step] = next_valid
            firsts[step] = next_first

            # the greedy values are needed for the returns whether or not a sub-env explores
            with torch.no_grad():
                q_values, next_lstm_state = q_network(next_obs, next_lstm_state, next_first)
                step_q_max, greedy = q_values.max(dim=1)
            q_max[step] = step_q_max
            explore = np.random.random(args.num_envs) < epsilon
            action = np.where(explore, np.random.randint(n_actions, size=args.num_envs), greedy.cpu().numpy())
            actions[step] = torch.as_tensor(action, device=device)

            next_obs, reward, termination, truncation, infos = envs.step(action)
            # a game over on the time limit's last step comes as truncated only; it is still a terminal state
            termination = termination | infos["terminated"].astype(bool)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminations[step] = torch.as_tensor(termination, dtype=torch.float32, device=device)
            # dones[step]: the episode ended at this step (upstream's dones[step]: one began at it)
            dones[step] = torch.as_tensor(termination | truncation, dtype=torch.float32, device=device)
            next_valid, next_first = next_step_masks(dones[step], valid[step])
            next_obs = torch.as_tensor(next_obs, device=device)

            # game statistics: the unclipped score over all lives, logged when the game (not a life) ends
            game_scores += infos["reward"]
            game_over = infos["terminated"].astype(bool) | truncation
            if recorder is not None:
                recorder.step(bool(game_over[0]))
            for i in np.nonzero(game_over)[0]:
                recent_returns.append(float(game_scores[i]))
                writer.add_scalar("charts/episodic_return", game_scores[i], global_step)
                writer.add_scalar("charts/episodic_length", infos["elapsed_step"][i], global_step)
                game_scores[i] = 0.0

        with torch.no_grad():  # a look ahead: the carried memory has not seen next_obs yet and stays as it is
            next_q_max = q_network(next_obs, next_lstm_state, next_first)[0].max(dim=1).values
            returns = compute_q_lambda_returns(rewards, q_max, dones, terminations, next_q_max, args.gamma, args.q_lambda)

        # a minibatch is a set of whole env sequences, so that their memory can be replayed from the start
        envs_per_minibatch = args.num_envs // args.num_minibatches
        env_inds = np.arange(args.num_envs)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(env_inds)
            for start in range(0, args.num_envs, envs_per_minibatch):
                mb_envs = torch.as_tensor(env_inds[start : start + envs_per_minibatch], device=device)
                mb_valid = valid[:, mb_envs].reshape(-1)

                q_values, _ = q_network(
                    obs[:, mb_envs].reshape((-1,) + envs.single_observation_space.shape),
                    (initial_lstm_state[0][:, mb_envs], initial_lstm_state[1][:, mb_envs]),
                    firsts[:, mb_envs].reshape(-1),
                )
                old_val = q_values.gather(1, actions[:, mb_envs].reshape(-1, 1)).squeeze(1)
                loss = masked_mean((old_val - returns[:, mb_envs].reshape(-1)) ** 2, mb_valid)

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
        writer.add_scalar("losses/q_values", masked_mean(old_val, mb_valid).item(), global_step)
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
        torch.save({"model": q_network.state_dict(), "args": vars(args)}, model_path)
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
        hub.push_to_hub(args, run_name, episodic_returns, __file__, "PQN-LSTM", "Parallelised Q-Network with an LSTM")
