"""A stand-in training script for the tuner tests, quick to start (no torch, no env): it takes the command line
of the script contract (--env-id, --seed, --exp-name), writes `runs/{env}__{exp_name}__{seed}__{time}`, and
logs `charts/episodic_return` points that follow from its flags, so scores can be checked exactly:

    point i = 0 ... points - 1:  A-v0: 10 x + seed + i      B-v0: 20 x + 3 seed + i - 100

--crash exits 3 after printing "diverged" (no run folder); --points 0 logs no point. It prints the thread
variables it was given and the CPUs it may run on (the runner's and the tuner's one-thread default)."""

import argparse
import os
import sys
import time

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

parser = argparse.ArgumentParser()
parser.add_argument("--env-id", required=True)
parser.add_argument("--seed", type=int, required=True)
parser.add_argument("--exp-name", required=True)
parser.add_argument("--x", type=float, default=0.0)
parser.add_argument("--points", type=int, default=5)
parser.add_argument("--crash", action=argparse.BooleanOptionalAction, default=False)
args = parser.parse_args()
print(f"fake {args.env_id} seed {args.seed} x {args.x}", flush=True)
print(f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')} XLA_FLAGS={os.environ.get('XLA_FLAGS')}", flush=True)
print(f"cpus={','.join(map(str, sorted(os.sched_getaffinity(0))))}", flush=True)
if args.crash:
    print("diverged", file=sys.stderr)
    sys.exit(3)
offset = {"A-v0": 10 * args.x + args.seed, "B-v0": 20 * args.x + 3 * args.seed - 100}[args.env_id]
writer = EventFileWriter(os.path.join("runs", f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"))
for i in range(args.points):
    value = Summary.Value(tag="charts/episodic_return", simple_value=offset + i)
    writer.add_event(Event(wall_time=time.time(), step=i, summary=Summary(value=[value])))
writer.close()
