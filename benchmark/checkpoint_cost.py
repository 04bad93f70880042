"""What a checkpoint costs: its size on disk and the seconds to write (save, then rename) and to read it.

    OMP_NUM_THREADS=1 python benchmark/checkpoint_cost.py [--out benchmark/results/checkpoint_cost.md]

1. ppo_atari.py, measured on the real thing: a Breakout run of 4 iterations with --checkpoint-every 1 writes
   runs/*/checkpoint.pt; the file is then written again the way the script writes it (torch.save to a temporary
   name, os.replace) and read back with torch.load, 5 times each, and the medians reported.
2. dqn_atari.py's replay memory, the part that dominates an off-policy checkpoint: the script's own ReplayBuffer at
   its default 1,000,000 frames, every page touched, with the Q-network, its target and Adam's state, written as a
   checkpoint would hold them (the memory's arrays as tensors that share their storage, so torch.save copies
   nothing first) and read back; 3 times each. dqn_atari.py does not write checkpoints yet (see issue 22).

Reads come right after writes, so they are served from the page cache: they are what a resume on the same machine
takes, not a cold read from a network disk.
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def timed(fn, repeats):
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def save_like_the_scripts(state, path):
    torch.save(state, f"{path}.tmp")
    os.replace(f"{path}.tmp", path)


def ppo_atari(workdir):
    command = [sys.executable, str(REPO / "cleanrl" / "ppo_atari.py"), "--total-timesteps", "4096", "--checkpoint-every", "1"]
    subprocess.run(command, cwd=workdir, check=True, capture_output=True, env=os.environ | {"OMP_NUM_THREADS": "1"})
    (path,) = Path(workdir).glob("runs/*/checkpoint.pt")
    state = torch.load(path, map_location="cpu", weights_only=False)
    copy = Path(workdir) / "again.pt"
    write = timed(lambda: save_like_the_scripts(state, copy), 5)
    read = timed(lambda: torch.load(copy, map_location="cpu", weights_only=False), 5)
    return path.stat().st_size, write, read


def dqn_atari_memory(workdir):
    spec = importlib.util.spec_from_file_location("dqn_atari", REPO / "cleanrl" / "dqn_atari.py")
    dqn_atari = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dqn_atari)
    q_network, target_network = dqn_atari.QNetwork(4), dqn_atari.QNetwork(4)
    optimizer = torch.optim.Adam(q_network.parameters())
    q_network(torch.zeros((1, 4, 84, 84), dtype=torch.uint8)).sum().backward()
    optimizer.step()  # Adam's moments exist, as in a run past learning_starts
    rb = dqn_atari.ReplayBuffer(1_000_000, 1, (84, 84), 4, "cpu")
    for array in vars(rb).values():
        if isinstance(array, np.ndarray):
            array.fill(1)  # every page touched: a full memory
    memory = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in vars(rb).items() if k != "device"}
    state = {"q_network": q_network.state_dict(), "target_network": target_network.state_dict(),
             "optimizer": optimizer.state_dict(), "rb": memory}  # fmt: skip
    path = Path(workdir) / "dqn_atari.pt"
    write = timed(lambda: save_like_the_scripts(state, path), 3)
    read = timed(lambda: torch.load(path, map_location="cpu", weights_only=False), 3)
    return path.stat().st_size, write, read


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the table as Markdown here too")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=REPO) as workdir:  # on the disk the runs/ folder would be on
        size, write, read = ppo_atari(workdir)
        rows.append(("ppo_atari.py: agent + Adam + counters + RNG states (measured on a real run)", size, write, read))
        size, write, read = dqn_atari_memory(workdir)
        rows.append(("dqn_atari.py: Q-network, target, Adam + a full 1M-frame replay memory", size, write, read))
    lines = ["| checkpoint | size | write (save + rename) | read |", "|---|---|---|---|"]
    for name, size, write, read in rows:
        lines.append(f"| {name} | {size / 2**20:,.1f} MiB | {write:.2f} s | {read:.2f} s |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")


if __name__ == "__main__":
    main()
