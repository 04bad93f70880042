"""What a checkpoint costs, script by script, at the script's default settings: its size on disk, the seconds to
write it (the module's atomic write: torch.save, fsync, rename) and to read it back, and the lines the script
spends on checkpoints.

    OMP_NUM_THREADS=1 python benchmark/checkpoint_cost.py [--scripts a.py b.py ...] [--fill] [--teachers DIR]
        [--out FILE.md]

Each script runs with its default flags (plus --checkpoint-every 1, so that the module is in use) up to the moment
its training loop would start: everything it would checkpoint then exists at its default size (networks, optimizers,
a replay memory of the default --buffer-size; a torch optimizer takes one step with zero gradients first, which
moves no weight but allocates its state, as a running job has it). The driver then writes the checkpoint 3 times
through the module (`Checkpoint.save`) and reads it 3 times (`cleanrl_utils.checkpoint.read`); medians are reported.
A replay memory is written whole, filled or not (its arrays are allocated at start); `--fill` first writes into
every page, so the memory is resident as in a long run (it takes that much RAM). Reads follow writes, so they come
from the page cache: what a resume on the same machine takes, not a cold read from a network disk.

Lines spent: the formatted lines of the script (`ruff format --line-length 127`) that mention `ckpt`, the
`checkpoint_every`/`checkpoint_memory`/`resume` fields and their docstrings, and the copied-alone branch.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (REPO / "cleanrl").glob("*.py") if p.name != "__init__.py")
# the QDagger scripts load a DQN teacher before their loop: `--teachers` is a folder of trained ones, laid out as
# benchmark/same_values.py leaves them (DIR/dqn_atari/runs/*/dqn_atari.cleanrl_model)
# ppo_trxl.py's default task (Memory Gym) does not install beside Gymnasium 1.x: its other task family stands in
FLAGS = {"ppo_trxl.py": ["--env-id", "ProofofMemory-v0"]}
TEACHERS = {"qdagger_dqn_atari_impalacnn.py": "dqn_atari", "qdagger_dqn_atari_jax_impalacnn.py": "dqn_atari_jax"}

DRIVER = r"""
import json, statistics, sys, time
import numpy as np
import torch
import cleanrl_utils.checkpoint as module
script, fill, *args = sys.argv[1:]
sys.argv = [script, *args]


class AtTheLoop(Exception):
    pass


start = module.Checkpoint.start


def start_then_stop(self, *a, **k):
    start(self, *a, **k)
    raise AtTheLoop


module.Checkpoint.start = start_then_stop
run = {"__name__": "__main__", "__file__": script}
try:
    exec(compile(open(script).read(), script, "exec"), run)
except AtTheLoop:
    pass
ckpt = run["ckpt"]
# torch optimizers allocate their state (Adam's two moments per weight) at their first step: take one with zero
# gradients, which moves no weight, so the state is there at its full size as in a running job
for name in ckpt.names:
    if isinstance(run[name], torch.optim.Optimizer):
        for group in run[name].param_groups:
            for p in group["params"]:
                p.grad = torch.zeros_like(p)
        run[name].step()
if fill == "1" and "rb" in ckpt.names:
    for value in vars(run["rb"]).values():
        if isinstance(value, np.ndarray) and value.size > 1_000_000:
            value.reshape(-1)[:] = 1
writes, reads = [], []
for _ in range(3):
    begin = time.perf_counter()
    assert ckpt.save()
    writes.append(time.perf_counter() - begin)
    begin = time.perf_counter()
    module.read(f"{ckpt.run_dir}/checkpoint.pt", ckpt.script)
    reads.append(time.perf_counter() - begin)
size = __import__("os").path.getsize(f"{ckpt.run_dir}/checkpoint.pt")
print(json.dumps({"size": size, "write": statistics.median(writes), "read": statistics.median(reads),
                  "names": ckpt.names}))
"""

SPENT = re.compile(r"ckpt|checkpoint_every|checkpoint_memory|args\.resume|\bresume:|--resume needs|checkpoints are off")


def lines_spent(path):
    text = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--line-length", "127", "-"],
        input=path.read_text(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    spent = 0
    for i, line in enumerate(text):
        after_field = i > 0 and re.match(r"\s+(checkpoint_every|checkpoint_memory|resume):", text[i - 1])
        if SPENT.search(line) or after_field:
            spent += 1
    return spent


def measure(script, fill, teachers):
    with tempfile.TemporaryDirectory() as cwd:
        command = [sys.executable, "-c", DRIVER, str(REPO / "cleanrl" / script), "1" if fill else "0"]
        command += ["--checkpoint-every", "1", *FLAGS.get(script, [])]
        if script in TEACHERS and teachers:
            found = sorted(Path(teachers).glob(f"{TEACHERS[script]}/runs/*/{TEACHERS[script]}.cleanrl_model"))
            command += ["--teacher-model-path", str(found[0].resolve())] if found else []
        env = os.environ | {"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "SDL_VIDEODRIVER": "dummy"}
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
        return json.loads(done.stdout.strip().splitlines()[-1])


def mib(n):
    return f"{n / 2**20:,.1f} MiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scripts", nargs="*", default=SCRIPTS, help="script file names (default: all)")
    parser.add_argument("--teachers", help="a folder of trained DQN teachers for the QDagger scripts (see TEACHERS)")
    parser.add_argument("--fill", action="store_true", help="write into every page of the replay memories first")
    parser.add_argument("--out", help="also write the table to this Markdown file")
    args = parser.parse_args()
    rows = ["| script | training state | size | write | read | lines spent |", "|---|---|---|---|---|---|"]
    for script in args.scripts:
        result = measure(script, args.fill, args.teachers)
        spent = lines_spent(REPO / "cleanrl" / script)
        if "error" in result:
            rows.append(f"| {script} | {result['error']} | - | - | - | {spent} |")
        else:
            names = " ".join(f"`{n}`" for n in result["names"])
            write, read = f"{result['write']:.2f} s", f"{result['read']:.2f} s"
            rows.append(f"| {script} | {names} | {mib(result['size'])} | {write} | {read} | {spent} |")
        print(rows[-1], flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
