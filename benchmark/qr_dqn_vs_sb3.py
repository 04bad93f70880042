"""Side by side: cleanrl's QR-DQN against Stable-Baselines3-Contrib's QRDQN at identical settings and equal budgets;
returns and speed, written as one markdown table.

    .venv/bin/python benchmark/qr_dqn_vs_sb3.py                          # CartPole-v1, Acrobot-v1 x 3 seeds x 500k
    .venv/bin/python benchmark/qr_dqn_vs_sb3.py --env-ids CartPole-v1 --seeds 1 --total-timesteps 20000
    .venv/bin/python benchmark/qr_dqn_vs_sb3.py --env-ids BreakoutNoFrameskip-v4 --seeds 1 --total-timesteps 200000 \\
        --learning-starts 20000 --markdown benchmark/results/qr_dqn_atari_vs_sb3.md
    .venv/bin/python benchmark/qr_dqn_vs_sb3.py --table-only              # the table from the runs finished so far

Runs go one at a time (ours, then SB3-Contrib's, for each seed), each a subprocess with OMP_NUM_THREADS=1 on the CPU,
and resume as benchmark/continuous_vs_sb3.py's do (a JSON file per finished run in --out).

Settings shared by both sides are our scripts' defaults. Classic control (`qr_dqn.py`): 25 quantiles, a 120-84 ReLU
MLP, Adam at 2.5e-4 with epsilon 0.01/128, a 10,000-transition memory, batch 128, gamma 0.99, a hard target copy
every 500 env steps, epsilon from 1 to 0.05 over half the run, learning from step 10,000, a gradient step every 10
env steps, no gradient clipping. Atari (`qr_dqn_atari.py`, for ids ending in NoFrameskip-v4): 200 quantiles, the
Nature CNN, Adam at 5e-5 with epsilon 0.01/32, batch 32, a target copy every 10,000 steps, epsilon to 0.01 over the
first 10%, a gradient step every 4 env steps, SB3's AtariWrapper with 4 stacked frames against our wrappers (the same
preprocessing: no-op starts, frame skip 4 with max-pooling, a lost life ends a training episode, FIRE at reset,
84x84 grayscale, clipped rewards). --learning-starts and --buffer-size override the defaults on both sides (a CPU
budget on Atari cannot wait 80,000 steps to learn). Both take the target network's greedy action and sum the
quantile Huber loss (kappa 1) over the quantiles, averaging over the target samples and the batch, and both store
a time limit's transition as not done. On Atari both count whole games at their unclipped score (SB3's Monitor sits
under its AtariWrapper).

Return: mean of each run's last 10 training episodes (our `charts/episodic_return`, SB3's Monitor), then mean ± std
over seeds. SPS: env steps per second of the training loop: ours from its last `charts/SPS`, SB3's as total steps /
`learn()` wall time.
"""

import json
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import gymnasium as gym
import tyro

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmark"))
from continuous_vs_sb3 import LAST_EPISODES, exclude_sps_error, finished_run, run_logged, table  # noqa: E402

from cleanrl_utils.report import find_runs, read_scalars  # noqa: E402

SB3_RUN = r"""
import json, sys, time
import gymnasium as gym
from sb3_contrib import QRDQN
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecFrameStack

env_id, seed, total_timesteps, monitor_path = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
settings = json.loads(sys.argv[5])
atari = settings.pop("atari")
if atari:  # the Monitor sits under AtariWrapper: whole games, unclipped scores
    import ale_py
    gym.register_envs(ale_py)
    env = VecFrameStack(make_atari_env(env_id, n_envs=1, seed=seed, monitor_dir=monitor_path), n_stack=4)
    policy, net = "CnnPolicy", {}
else:
    env, policy, net = Monitor(gym.make(env_id)), "MlpPolicy", {"net_arch": [120, 84]}
batch_size = settings["batch_size"]
policy_kwargs = dict(n_quantiles=settings.pop("n_quantiles"), optimizer_kwargs={"eps": 0.01 / batch_size}, **net)
model = QRDQN(policy, env, tau=1.0, gamma=0.99, gradient_steps=1, exploration_initial_eps=1.0, max_grad_norm=None,
              policy_kwargs=policy_kwargs, device="cpu", seed=seed, verbose=0, **settings)
model.set_logger(Logger(folder=None, output_formats=[]))
start = time.time()
model.learn(total_timesteps=total_timesteps)
elapsed = time.time() - start
from stable_baselines3.common.monitor import load_results
returns = load_results(monitor_path)["r"].tolist() if atari else env.get_episode_rewards()
print(json.dumps({"sps": total_timesteps / elapsed, "returns": [float(r) for r in returns]}))
"""

# our scripts' defaults, in SB3's names (target_update_interval and train_freq count env steps on both sides)
CLASSIC = dict(n_quantiles=25, learning_rate=2.5e-4, buffer_size=10_000, batch_size=128, learning_starts=10_000)
CLASSIC |= dict(target_update_interval=500, train_freq=10, exploration_fraction=0.5, exploration_final_eps=0.05)
ATARI = dict(n_quantiles=200, learning_rate=5e-5, buffer_size=1_000_000, batch_size=32, learning_starts=80_000)
ATARI |= dict(target_update_interval=10_000, train_freq=4, exploration_fraction=0.1, exploration_final_eps=0.01)


@dataclass
class Args:
    env_ids: list[str] = field(default_factory=lambda: ["CartPole-v1", "Acrobot-v1"])
    """the tasks: classic control, or Atari ids ending in NoFrameskip-v4"""
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    """the seeds, run for both libraries"""
    total_timesteps: int = 500_000
    """environment steps per run"""
    learning_starts: int | None = None
    """the step learning starts at, on both sides (default: the script's)"""
    buffer_size: int | None = None
    """the replay memory size, on both sides (default: the script's)"""
    out: str = str(REPO / "benchmark" / "out" / "qr_dqn_vs_sb3")
    """where runs and their result files go (finished runs there are not run again)"""
    markdown: str = str(REPO / "benchmark" / "results" / "qr_dqn_vs_sb3.md")
    """where the result table goes"""
    table_only: bool = False
    """run nothing: write the table from the runs finished in --out (a row counts the seeds that both sides finished)"""
    exclude_sps: list[str] = field(default_factory=list)
    """pairs whose speed was disturbed (other work shared the core), as qr_dqn:ENV_ID:SEED: their returns count,
    their SPS and ratio do not; the table lists them"""


def is_atari(env_id):
    return env_id.endswith("NoFrameskip-v4")


def settings(env_id, args):
    chosen = dict(ATARI if is_atari(env_id) else CLASSIC)
    for key in ("learning_starts", "buffer_size"):
        if getattr(args, key) is not None:
            chosen[key] = getattr(args, key)
    return chosen


def run_ours(env_id, seed, args, folder):
    script = REPO / "cleanrl" / ("qr_dqn_atari.py" if is_atari(env_id) else "qr_dqn.py")
    command = [sys.executable, str(script), "--env-id", env_id, "--seed", str(seed), "--no-cuda"]
    command += ["--total-timesteps", str(args.total_timesteps), "--checkpoint-every", "0"]
    chosen = settings(env_id, args)
    command += ["--learning-starts", str(chosen["learning_starts"]), "--buffer-size", str(chosen["buffer_size"])]
    start = time.time()
    run_logged(command, folder)
    (run,) = find_runs(str(folder / "runs"))
    _, returns = read_scalars(run.path, "charts/episodic_return")
    _, sps = read_scalars(run.path, "charts/SPS")  # logged every 100 gradient steps; validation ensures one
    return {"sps": float(sps[-1]), "returns": [float(r) for r in returns], "wall_s": time.time() - start}


def run_sb3(env_id, seed, args, folder):
    chosen = settings(env_id, args) | {"atari": is_atari(env_id)}
    monitor = folder / "monitor"
    command = [sys.executable, "-c", SB3_RUN, env_id, str(seed), str(args.total_timesteps), str(monitor), json.dumps(chosen)]
    start = time.time()
    if is_atari(env_id):
        monitor.mkdir(parents=True, exist_ok=True)
    output = run_logged(command, folder)
    return json.loads(output.strip().splitlines()[-1]) | {"wall_s": time.time() - start}


def validation_error(args):
    """The first problem with the command-line values as one line, or None."""
    if not args.env_ids or not args.seeds:
        return "--env-ids and --seeds must each name at least one"
    if any(not 0 <= seed < 2**32 for seed in args.seeds):
        return f"--seeds must be in [0, 2**32 - 1], got {args.seeds}"
    for env_id in args.env_ids:
        chosen = settings(env_id, args)
        # our scripts log SPS every 100 gradient steps, one per train_freq env steps past the learning start
        needed = chosen["learning_starts"] + 100 * chosen["train_freq"]
        if args.total_timesteps < needed:
            return f"--total-timesteps must be at least {needed} on {env_id} (the learning start plus 100 gradient steps)"
        try:
            if is_atari(env_id):
                import ale_py

                gym.register_envs(ale_py)
            env = gym.make(env_id)
        except Exception as e:  # unknown ids, missing extras
            return f"cannot make {env_id!r}: {e}"
        action_space = env.action_space
        env.close()
        if not isinstance(action_space, gym.spaces.Discrete):
            return f"{env_id} has {action_space} actions; QR-DQN needs Discrete ones"
    error = exclude_sps_error(args.exclude_sps, ["qr_dqn"], "qr_dqn:ENV_ID:SEED (e.g. qr_dqn:CartPole-v1:1)")
    if error:
        return error
    if not Path(args.markdown).resolve().parent.is_dir():
        return f"--markdown {args.markdown}: its folder does not exist"
    try:
        import sb3_contrib  # noqa: F401
    except ImportError:
        return "SB3-Contrib is not installed: pip install sb3-contrib"
    return None


def main(args):
    error = validation_error(args)
    if error is not None:
        print(f"qr_dqn_vs_sb3.py: {error}", file=sys.stderr)
        sys.exit(2)
    args.algos = ["qr_dqn"]  # the table's row key, as continuous_vs_sb3's
    results = {}
    for env_id in args.env_ids:
        for seed in args.seeds:
            for side, runner in (("cleanrl", run_ours), ("sb3", run_sb3)):
                result = finished_run(
                    side, "qr_dqn", env_id, seed, args, partial(runner, env_id, seed, args), "qr_dqn_vs_sb3.py"
                )
                if result is not None:
                    results[(side, "qr_dqn", env_id, seed)] = result
                    write_markdown(results, args)


def write_markdown(results, args):
    command = " ".join(["benchmark/qr_dqn_vs_sb3.py", *(a for a in sys.argv[1:] if a != "--table-only")])
    atari = any(is_atari(e) for e in args.env_ids)
    Path(args.markdown).write_text(
        f"# cleanrl vs Stable-Baselines3-Contrib: QR-DQN ({args.total_timesteps} steps)\n\n"
        f"Command: `.venv/bin/python {command}` (settings and method in the script's docstring).\n"
        f"Return: mean of the last {LAST_EPISODES} training episodes per run, mean ± std over seeds. SPS: env steps "
        "per second of the training loop, OMP_NUM_THREADS=1, CPU; an invocation runs one at a time (two invocations, "
        "one per env, may share the machine: see where the table is quoted)."
        + (" Atari returns are whole games' unclipped scores on both sides." if atari else "")
        + "\n\n"
        + table(results, args)
        + "\n"
    )


if __name__ == "__main__":
    main(tyro.cli(Args))
