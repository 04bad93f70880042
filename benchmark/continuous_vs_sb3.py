"""Side by side: cleanrl's SAC, TD3 and DDPG against Stable-Baselines3's at identical settings and equal
budgets, on MuJoCo tasks; returns and speed, written as one markdown table.

    .venv/bin/python benchmark/continuous_vs_sb3.py                      # 3 algos x 2 envs x 3 seeds x 100k
    .venv/bin/python benchmark/continuous_vs_sb3.py --algos td3 --env-ids Hopper-v5 --seeds 1 --total-timesteps 30000
    .venv/bin/python benchmark/continuous_vs_sb3.py --table-only     # the table from the runs finished so far
    .venv/bin/python benchmark/continuous_vs_sb3.py --table-only --exclude-sps sac:HalfCheetah-v5:1   # its SPS left out

Runs go one at a time (ours, then SB3, for each seed) so machine noise hits both alike, each a
subprocess with OMP_NUM_THREADS=1 on the CPU. Every finished run leaves a JSON file in --out and is
skipped when the benchmark is started again, so an interrupted benchmark resumes where it stopped;
the table is rewritten from all finished runs after each one.

Settings shared by both sides (our scripts' defaults, CleanRL's published ones): 1 env, 1M replay
buffer, batch 256, γ 0.99, τ 0.005, 256-256 ReLU MLPs, one gradient step per env step.
SAC: learning starts at 5k, policy lr 3e-4, Q and α lr 1e-3 (SB3 has one learning rate, so its
critic and α optimizers are set to 1e-3 each update), α autotuned from 1.0 towards −dim(A).
TD3: learning starts at 25k, lr 3e-4, exploration noise 0.1 and smoothing noise 0.2 clipped at 0.5
(SB3 adds them in its [−1, 1] action space, the same as ours times the half range), delay 2.
DDPG: TD3's settings without twin critics and smoothing, actor and targets every 2 steps (SB3's DDPG
fixes its policy delay at 1; the benchmark sets it to 2).
What differs and cannot be set: SB3's SAC updates its actor once per step where ours updates it
twice every 2 steps, and bounds its log-std to [−20, 2] by clipping where ours squashes it into
[−5, 2]; SB3 adds 1e-6 inside log(1 − tanh²), ours uses the exact form.

Return: mean of each run's last 10 training episodes (the scripts' `charts/episodic_return`, SB3's
Monitor), then mean ± std over seeds. SPS: env steps per second of the training loop (start-up
excluded): ours from its last `charts/SPS`, SB3's as total steps / `learn()` wall time.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import tyro

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from cleanrl_utils.report import find_runs, read_scalars  # noqa: E402

LAST_EPISODES = 10

SB3_RUN = r"""
import json, sys, time
import gymnasium as gym
import numpy as np
from stable_baselines3 import DDPG, SAC, TD3
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.noise import NormalActionNoise

algo, env_id, seed, total_timesteps, monitor_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
env = Monitor(gym.make(env_id), monitor_path)
action_dim = env.action_space.shape[0]
common = dict(buffer_size=1_000_000, batch_size=256, tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1,
              policy_kwargs=dict(net_arch=[256, 256]), device="cpu", seed=seed, verbose=0)


class SACWithCleanRLLearningRates(SAC):
    # ours: policy lr 3e-4, Q and alpha lr 1e-3; SB3 resets every optimizer to its one schedule each update
    def _update_learning_rate(self, optimizers):
        super()._update_learning_rate(optimizers)
        for optimizer in (self.critic.optimizer, self.ent_coef_optimizer):
            for group in optimizer.param_groups:
                group["lr"] = 1e-3


noise = NormalActionNoise(np.zeros(action_dim), 0.1 * np.ones(action_dim))
if algo == "sac":
    model = SACWithCleanRLLearningRates("MlpPolicy", env, learning_rate=3e-4, learning_starts=5000,
                                        ent_coef="auto", target_update_interval=1, target_entropy="auto", **common)
elif algo == "td3":
    model = TD3("MlpPolicy", env, learning_rate=3e-4, learning_starts=25_000, action_noise=noise, policy_delay=2,
                target_policy_noise=0.2, target_noise_clip=0.5, **common)
else:
    model = DDPG("MlpPolicy", env, learning_rate=3e-4, learning_starts=25_000, action_noise=noise, **common)
    model.policy_delay = 2  # CleanRL's DDPG delays its actor like TD3; SB3's constructor fixes 1
model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default logger makes a /tmp/SB3-* folder per run
start = time.time()
model.learn(total_timesteps=total_timesteps)
elapsed = time.time() - start
print(json.dumps({"sps": total_timesteps / elapsed, "returns": [float(r) for r in env.get_episode_rewards()]}))
"""


@dataclass
class Args:
    algos: list[str] = field(default_factory=lambda: ["sac", "td3", "ddpg"])
    """which algorithms (sac, td3, ddpg)"""
    env_ids: list[str] = field(default_factory=lambda: ["Hopper-v5", "HalfCheetah-v5"])
    """the MuJoCo tasks"""
    seeds: list[int] = field(default_factory=lambda: [1, 2, 3])
    """the seeds, run for both libraries"""
    total_timesteps: int = 100_000
    """environment steps per run"""
    out: str = str(REPO / "benchmark" / "out" / "continuous_vs_sb3")
    """where runs and their result files go (finished runs there are not run again)"""
    markdown: str = str(REPO / "benchmark" / "results" / "continuous_vs_sb3.md")
    """where the result table goes"""
    table_only: bool = False
    """run nothing: write the table from the runs finished in --out (a row counts the seeds that both sides finished)"""
    exclude_sps: list[str] = field(default_factory=list)
    """pairs whose speed was disturbed (other work shared the core), as ALGO:ENV_ID:SEED: their returns count,
    their SPS and ratio do not; the table lists them"""


def run_env():
    return dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="disabled", PYTHONUNBUFFERED="1")


class RunFailed(Exception):
    pass


def run_logged(command, folder):
    """Runs `command` in a fresh `folder` (what an interrupted earlier attempt left there is removed),
    its output in `folder/log.txt`; returns that output, or raises RunFailed naming the log."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    log = folder / "log.txt"
    with open(log, "w") as f:
        returncode = subprocess.run(command, cwd=folder, env=run_env(), stdout=f, stderr=subprocess.STDOUT).returncode
    if returncode != 0:
        raise RunFailed(f"exit {returncode}; see {log}")
    return log.read_text()


def run_ours(algo, env_id, seed, total_timesteps, folder):
    script = REPO / "cleanrl" / f"{algo}_continuous_action.py"
    command = [sys.executable, str(script), "--env-id", env_id, "--seed", str(seed)]
    command += ["--total-timesteps", str(total_timesteps), "--no-cuda"]
    start = time.time()
    run_logged(command, folder)
    (run,) = find_runs(str(folder / "runs"))
    _, returns = read_scalars(run.path, "charts/episodic_return")
    _, sps = read_scalars(run.path, "charts/SPS")  # logged every 100 gradient steps; validation ensures one
    return {"sps": float(sps[-1]), "returns": [float(r) for r in returns], "wall_s": time.time() - start}


def run_sb3(algo, env_id, seed, total_timesteps, folder):
    command = [sys.executable, "-c", SB3_RUN, algo, env_id, str(seed), str(total_timesteps), str(folder / "monitor")]
    start = time.time()
    output = run_logged(command, folder)
    return json.loads(output.strip().splitlines()[-1]) | {"wall_s": time.time() - start}


def table(results, args):
    lines = [
        "| algo | env | cleanrl return | SB3 return | cleanrl SPS | SB3 SPS | SPS ratio (ours / SB3) | seeds (timed) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for algo in args.algos:
        for env_id in args.env_ids:
            found = [(results.get(("cleanrl", algo, env_id, s)), results.get(("sb3", algo, env_id, s)), s) for s in args.seeds]
            pairs = [(a, b) for a, b, _ in found if a and b]
            seeds = [s for a, b, s in found if a and b]
            if not pairs:
                continue
            cells = []
            for side in (0, 1):
                finals = [np.mean(p[side]["returns"][-LAST_EPISODES:]) for p in pairs]
                cells.append(f"{np.mean(finals):.2f} ± {np.std(finals):.2f}")
            timed = [p for p, seed in zip(pairs, seeds) if f"{algo}:{env_id}:{seed}" not in args.exclude_sps]
            sps = [[p[side]["sps"] for p in timed] for side in (0, 1)]
            ratios = [a / b for a, b in zip(*sps)]
            if ratios:
                spread = f"(min {min(ratios):.2f}, max {max(ratios):.2f})"
                speed = f"{np.mean(sps[0]):.0f} | {np.mean(sps[1]):.0f} | {np.mean(ratios):.2f} {spread}"
            else:
                speed = "— | — | —"
            lines.append(f"| {algo} | {env_id} | {cells[0]} | {cells[1]} | {speed} | {len(pairs)} ({len(timed)} timed) |")
    if args.exclude_sps:
        lines.append(
            f"\nNot timed (other work shared the core, so their SPS is not comparable): {', '.join(args.exclude_sps)}."
        )
    return "\n".join(lines)


LEARNING_STARTS = {"sac": 5000, "td3": 25_000, "ddpg": 25_000}  # the scripts' defaults, which SB3 is given too


def validation_error(args):
    """The first problem with the command-line values as one line, or None."""
    unknown = [a for a in args.algos if a not in LEARNING_STARTS]
    if unknown or not args.algos:
        return f"--algos must name some of sac, td3, ddpg; got {args.algos}"
    if not args.env_ids or not args.seeds:
        return "--env-ids and --seeds must each name at least one"
    # our scripts log SPS every 100 gradient steps (one per env step past the learning start)
    needed = max(LEARNING_STARTS[a] for a in args.algos) + 100
    if args.total_timesteps < needed:
        algos = ", ".join(args.algos)
        return (
            f"--total-timesteps must be at least {needed} (the learning start of {algos} plus 100 gradient steps), "
            f"got {args.total_timesteps}"
        )
    error = exclude_sps_error(args.exclude_sps, LEARNING_STARTS, "ALGO:ENV_ID:SEED (e.g. sac:Hopper-v5:1)")
    if error:
        return error
    if any(not 0 <= seed < 2**32 for seed in args.seeds):
        return f"--seeds must be in [0, 2**32 - 1], got {args.seeds}"
    if not Path(args.markdown).resolve().parent.is_dir():
        return f"--markdown {args.markdown}: its folder does not exist"
    for env_id in args.env_ids:
        try:
            env = gym.make(env_id)
        except Exception as e:  # unknown ids, missing extras
            return f"cannot make {env_id!r}: {e}"
        action_space = env.action_space
        env.close()
        if not isinstance(action_space, gym.spaces.Box):
            return f"{env_id} has {action_space} actions; SAC, TD3 and DDPG need Box ones"
    return None


def exclude_sps_error(keys, algos, form):
    """The first --exclude-sps entry that is not ALGO:ENV_ID:SEED with ALGO among `algos`, as one line, or None."""
    for key in keys:
        algo, _, rest = key.partition(":")
        env_id, _, seed = rest.rpartition(":")
        if algo not in algos or not env_id or not seed.isdigit():
            return f"--exclude-sps takes {form}, got {key!r}"
    return None


def main(args):
    error = validation_error(args)
    if error is not None:
        print(f"continuous_vs_sb3.py: {error}", file=sys.stderr)
        sys.exit(2)
    results = {}
    for env_id in args.env_ids:
        for seed in args.seeds:  # every algorithm at one seed before the next seed: partial tables stay useful
            for algo in args.algos:
                for side, runner in (("cleanrl", run_ours), ("sb3", run_sb3)):
                    run = partial(runner, algo, env_id, seed, args.total_timesteps)
                    result = finished_run(side, algo, env_id, seed, args, run, "continuous_vs_sb3.py")
                    if result is not None:
                        results[(side, algo, env_id, seed)] = result
                        write_markdown(results, args)


def finished_run(side, algo, env_id, seed, args, run, program):
    """One run's result: read from --out, where a finished run left its JSON file, or else made by `run(folder)` and
    saved there (with --table-only: None). A failed run stops the benchmark, exit 1, `program` naming it."""
    out = Path(args.out)
    path = out / f"{side}_{algo}_{env_id}_{seed}_{args.total_timesteps}.json"
    if not path.exists():
        if args.table_only:
            return None
        print(f"running {side} {algo} {env_id} seed {seed} ({args.total_timesteps} steps)", flush=True)
        try:
            result = run(out / path.stem)
        except RunFailed as e:
            print(f"{program}: {side} {algo} {env_id} seed {seed} failed ({e})", file=sys.stderr)
            sys.exit(1)
        path.write_text(json.dumps(result))
    return json.loads(path.read_text())


def write_markdown(results, args):
    # the command that makes these runs: --table-only only rewrites the table
    command = " ".join(["benchmark/continuous_vs_sb3.py", *(a for a in sys.argv[1:] if a != "--table-only")])
    Path(args.markdown).write_text(
        f"# cleanrl vs Stable-Baselines3: SAC, TD3, DDPG on MuJoCo ({args.total_timesteps} steps)\n\n"
        f"Command: `.venv/bin/python {command}` (settings and method in the script's docstring).\n"
        f"Return: mean of the last {LAST_EPISODES} training episodes per run, mean ± std over seeds. SPS: env steps "
        "per second of the training loop, one run at a time, OMP_NUM_THREADS=1, CPU.\n\n" + table(results, args) + "\n"
    )


if __name__ == "__main__":
    main(tyro.cli(Args))
