"""Memory of the frame-level Atari replay buffer at its default size, filled to the brim.

    .venv/bin/python benchmark/atari_replay_memory.py                      # dqn_atari.py, 1M frames
    .venv/bin/python benchmark/atari_replay_memory.py --script rainbow_atari --buffer-size 200000

Fills the script's own `ReplayBuffer` (imported from the file, as the tests do) with synthetic
84x84 frames in episodes of `--episode-length` steps (about a Breakout life under DQN's wrappers),
samples batches from it, and reports the bytes per stored transition (buffer arrays / transitions it
can sample) and the peak resident memory of the process (`ru_maxrss`), against what a buffer storing
both 4-frame stacks of every transition would take. The buffer's arrays are allocated lazily, so
peak RSS shows what the full buffer really costs.
"""

import importlib.util
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import tyro

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Args:
    script: str = "dqn_atari"
    """which Atari script's buffer to measure (dqn_atari, c51_atari, rainbow_atari, qdagger_dqn_atari_impalacnn)"""
    buffer_size: int = 1_000_000
    """frames in the buffer (the scripts' default)"""
    episode_length: int = 100
    """agent steps per episode of the synthetic stream"""
    markdown: str = ""
    """where to write the result table (printed only when empty)"""


def load(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "cleanrl" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(args: Args):
    if not (REPO / "cleanrl" / f"{args.script}.py").exists():
        print(f"atari_replay_memory.py: no cleanrl/{args.script}.py", file=sys.stderr)
        sys.exit(2)
    if args.buffer_size < 1000 or args.episode_length < 1:
        print("atari_replay_memory.py: --buffer-size must be at least 1000 and --episode-length at least 1", file=sys.stderr)
        sys.exit(2)
    module = load(args.script)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # Rainbow's buffer also takes the n-step and priority settings (its defaults here)
    extra = dict(n_step=3, gamma=0.99, alpha=0.5) if args.script == "rainbow_atari" else {}
    rb = module.ReplayBuffer(args.buffer_size, 1, (84, 84), 4, torch.device("cpu"), **extra)
    frame = lambda t: np.full((1, 4, 84, 84), t % 251, dtype=np.uint8)  # noqa: E731
    start = time.time()
    rb.start(frame(0))
    t = 0
    # one more lap than the capacity, so the buffer has wrapped
    while t < args.buffer_size + args.buffer_size // 10:
        t += 1
        ended = t % args.episode_length == 0
        rb.add([t % 4], [1.0], [ended], [False], frame(t + 1 if ended else t), [frame(t)[0]] if ended else None)
    fill_seconds = time.time() - start
    for _ in range(100):
        batch = rb.sample(32, 0.4) if args.script == "rainbow_atari" else rb.sample(32)
    sample_shape = tuple(batch[0].shape)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # the buffer's arrays, and those of objects it holds (Rainbow's sum tree)
    parts = list(vars(rb).values())
    parts += [v for part in parts if hasattr(part, "__dict__") for v in vars(part).values()]
    buffer_bytes = sum(part.nbytes for part in parts if isinstance(part, np.ndarray))
    transitions = int(rb.sampleable(np.zeros(rb.capacity, dtype=np.int64), np.arange(rb.capacity)).sum())
    stacked = 2 * 4 * 84 * 84 + 8 + 4 + 4  # obs and next_obs stacks, action, reward, done
    table = (
        f"# Replay memory of {args.script}.py at --buffer-size {args.buffer_size}\n\n"
        f"Command: `.venv/bin/python benchmark/atari_replay_memory.py --script {args.script} "
        f"--buffer-size {args.buffer_size} --episode-length {args.episode_length}` "
        f"(synthetic 84x84 frames, episodes of {args.episode_length} steps, filled past capacity in {fill_seconds:.0f} s).\n\n"
        "| what | value |\n|---|---|\n"
        f"| frames held | {rb.capacity:,} |\n"
        f"| transitions that can be sampled | {transitions:,} |\n"
        f"| buffer arrays | {buffer_bytes / 2**30:.2f} GiB |\n"
        f"| bytes per stored transition | {buffer_bytes / transitions:,.0f} |\n"
        f"| the same with both 4-frame stacks stored per transition | {stacked:,} "
        f"({stacked / (buffer_bytes / transitions):.1f}x) |\n"
        f"| peak RSS of the process (before the buffer: {before / 2**30:.2f} GiB) | {peak / 2**30:.2f} GiB |\n"
        f"| sampled batch | {sample_shape} uint8 |\n"
    )
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table)


if __name__ == "__main__":
    main(tyro.cli(Args))
