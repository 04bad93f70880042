"""Steady-state speed and GPU memory of five scripts at LeanRL's settings, beside LeanRL's H100 table (issue 33).

    python benchmark/gpu_speed.py                                   # on a GPU machine: about 6 minutes on an H100/H200
    python benchmark/gpu_speed.py --wheels wheels/                  # first installs what is missing, offline, from wheels/
    python benchmark/gpu_speed.py --tiny --markdown /tmp/speed.md   # a CPU check of the tool itself (its test)

Each script runs once, as a subprocess in a temporary folder, at its own defaults, which are LeanRL's and CleanRL's
settings (ppo_atari_envpool.py on envpool's Breakout-v5 with 8 envs; the continuous scripts on HalfCheetah-v5, where
LeanRL used -v4), for a fixed number of steps; SAC and TD3 learn from step 5,000 rather than 25,000 so that most of
their steps take gradient steps. The Playground script runs its defaults: 4,096 envs of CartpoleBalance.

Steady-state SPS: env steps per second between the middle and the last `charts/SPS` point, from the points' wall
times in the run's TensorBoard events: start-up, compilation and SAC's and TD3's random phase fall before the middle.
GPU memory: the largest memory `nvidia-smi` reports for the script's process while it runs (n/a without one).
LeanRL's figures (https://github.com/pytorch-labs/LeanRL, README, H100) are env steps per second of CleanRL and of
LeanRL's compiled, CUDA-graph versions. The table goes to --markdown (benchmark/results/gpu_speed.md by default).

The device machines have PyTorch and JAX but no package index: --wheels DIR installs the rest with
`pip install --no-index --find-links DIR`, pinned as in requirements.txt. Make the folder on a connected machine
with `pip download --only-binary :all: -d DIR` and the pins of `PACKAGES` below. This tool itself needs only the
standard library (argparse, not tyro), so it runs there before anything is installed. A run that crashes or is
stopped before its first SPS point gets a row that says so; the other rows are kept.
"""

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# what the five scripts import beyond torch and JAX (their dependencies come from the wheel folder too)
PACKAGES = ["gymnasium", "mujoco", "envpool", "tyro", "tensorboard", "moviepy", "playground"]
FIVE_THOUSAND = ["--learning-starts", "5000"]
# script -> (env, its flags, steps on a GPU, flags and steps of --tiny, CleanRL's and LeanRL's SPS on an H100)
RUNS = {
    "ppo_atari_envpool.py": ("Breakout-v5", [], 102_400, ["--num-envs", "4", "--num-steps", "32"], 512, 1022, 6809),
    "ppo_continuous_action.py": ("HalfCheetah-v5", [], 40_960, ["--num-steps", "128"], 512, 652, 1774),
    "sac_continuous_action.py": ("HalfCheetah-v5", FIVE_THOUSAND, 10_000, ["--learning-starts", "100"], 400, 127, 725),
    "td3_continuous_action.py": ("HalfCheetah-v5", FIVE_THOUSAND, 15_000, ["--learning-starts", "100"], 400, 272, 936),
    "ppo_continuous_action_playground.py": (
        "CartpoleBalance",
        [],
        2_621_440,  # 40 iterations of 4,096 envs x 16 steps
        ["--num-envs", "8", "--num-steps", "8", "--episode-length", "10"],
        256,
        None,
        None,
    ),
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scripts", nargs="+", default=list(RUNS), help="which of the five scripts to run")
    parser.add_argument(
        "--tiny", action="store_true", help="a few hundred steps each, on whatever device there is: a check of this tool"
    )
    parser.add_argument("--wheels", help="a folder of wheels to install the missing packages from, offline, before the runs")
    parser.add_argument(
        "--markdown", default=str(REPO / "benchmark" / "results" / "gpu_speed.md"), help="where the table goes"
    )
    parser.add_argument(
        "--timeout", type=int, default=150, help="seconds each run may take before it is stopped (its row says so)"
    )
    return parser.parse_args()


def fail(message):
    print(f"gpu_speed.py: {message}", file=sys.stderr)
    sys.exit(2)


def pins(names):
    """`name==version` from requirements.txt for each of `names`."""
    found = dict(line.split("==", 1) for line in (REPO / "requirements.txt").read_text().splitlines() if "==" in line)
    return [f"{name}=={found[name]}" for name in names]


def gpu_memory_of(pid):
    """MiB of GPU memory `nvidia-smi` reports for process `pid` now, or None."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    used = [int(m) for p, m in re.findall(r"(\d+),\s*(\d+)", out) if int(p) == pid]
    return max(used) if used else None


def steady_sps(run_dir):
    """Env steps per second between the middle and the last `charts/SPS` point of a run, from their wall times."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0}).Reload()
    if "charts/SPS" not in accumulator.Tags()["scalars"]:  # stopped or crashed before its first iteration ended
        return None
    events = accumulator.Scalars("charts/SPS")
    if len(events) < 2:
        return None
    middle, last = events[(len(events) - 1) // 2], events[-1]
    return (last.step - middle.step) / (last.wall_time - middle.wall_time)


def run(script, args):
    """Runs `script` once; returns (steady SPS or None, peak GPU MiB or None, a note)."""
    env_id, flags, steps, tiny_flags, tiny_steps, _, _ = RUNS[script]
    flags = [*flags, *tiny_flags] if args.tiny else flags
    command = [sys.executable, str(REPO / "cleanrl" / script), "--env-id", env_id, *flags]
    command += ["--total-timesteps", str(tiny_steps if args.tiny else steps), "--checkpoint-every", "0"]
    folder = Path(tempfile.mkdtemp(prefix="gpu-speed-"))
    env = dict(os.environ, WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
    peak = []
    with open(folder / "out.log", "w") as log:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)

        def watch():  # the largest GPU memory of the run, sampled twice a second
            while process.poll() is None:
                used = gpu_memory_of(process.pid)
                if used is not None:
                    peak.append(used)
                time.sleep(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            code = process.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            code = f"stopped after {args.timeout} s"
        watcher.join()
    try:
        runs = list((folder / "runs").glob("*")) if (folder / "runs").exists() else []
        sps = steady_sps(runs[0]) if runs else None
        last_line = " ".join((folder / "out.log").read_text().splitlines()[-1:])[:200]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    note = "" if code == 0 else f"{code if isinstance(code, str) else f'exit code {code}'}: {last_line}"
    return sps, max(peak) if peak else None, note


def installed(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def device_name():
    try:
        name = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        name = ""
    return name or f"no GPU: CPU {platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def main():
    args = parse_args()
    unknown = [s for s in args.scripts if s not in RUNS]
    if unknown:
        fail(f"--scripts takes some of {', '.join(RUNS)}, got {', '.join(unknown)}")
    if not Path(args.markdown).parent.is_dir():
        fail(f"--markdown {args.markdown}: its folder does not exist")
    if args.wheels is not None and not Path(args.wheels).is_dir():
        fail(f"--wheels {args.wheels} is not a folder")
    if args.wheels:
        command = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", args.wheels, *pins(PACKAGES)]
        if subprocess.run(command).returncode != 0:
            fail(f"pip could not install {', '.join(PACKAGES)} from {args.wheels}")
    rows = []
    for script in args.scripts:
        print(f"gpu_speed.py: running {script} ...", flush=True)
        sps, memory, note = run(script, args)
        env_id, *_, cleanrl_sps, leanrl_sps = RUNS[script]
        ratio = f"{sps / cleanrl_sps:.2f}" if sps and cleanrl_sps and not args.tiny else "-"  # --tiny: CPU vs H100
        rows.append(
            f"| `{script}` | {env_id} | {f'{sps:,.0f}' if sps else 'n/a'} | {memory if memory is not None else 'n/a'} "
            f"| {f'{cleanrl_sps:,}' if cleanrl_sps else '-'} | {f'{leanrl_sps:,}' if leanrl_sps else '-'} | {ratio} "
            f"| {note} |"
        )
    header = [
        f"# Speed on {device_name()}" + (" (--tiny: a check of the tool, not a measurement)" if args.tiny else ""),
        "",
        f"`python benchmark/gpu_speed.py {' '.join(sys.argv[1:])}`, {time.strftime('%Y-%m-%d')}, torch "
        f"{installed('torch')}, JAX {installed('jax')}, MuJoCo {installed('mujoco')}, envpool {installed('envpool')}.",
        "SPS: env steps per second, steady state (the second half of each run). CleanRL and LeanRL: LeanRL's README,",
        "on an H100 (-v4 MuJoCo tasks). GPU memory: the most `nvidia-smi` reported for the script's process.",
        "",
        "| script | env | SPS | GPU memory (MiB) | CleanRL, H100 | LeanRL, H100 | SPS / CleanRL's | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    table = "\n".join(header + rows) + "\n"
    Path(args.markdown).write_text(table)
    print(table)


if __name__ == "__main__":
    main()
