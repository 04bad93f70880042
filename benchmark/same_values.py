"""Do two versions of the scripts compute the same thing? Runs every script in a folder for a short, fixed-seed
CPU run (the tests' tiny budgets, plus --save-model so the evaluation runs too) and records every scalar it logs
except the timing ones (`charts/SPS`, `charts/offline/SPS`); `compare` then lists, per script, the tags and points that moved.

    python benchmark/same_values.py record --scripts-dir /tmp/before/cleanrl --out before.json
    python benchmark/same_values.py record --scripts-dir cleanrl --out after.json --teachers DIR
    python benchmark/same_values.py compare before.json after.json [--markdown FILE]

The QDagger scripts need a teacher: `record` trains one with the folder's dqn_atari.py / dqn_atari_jax.py into
`--teachers` unless one is already there, so pass the same folder to both records (the teacher must not differ).
Runs go one per core (`--workers`, default 2) with OMP_NUM_THREADS=1; values are compared exactly.
"""

import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from budgets import JAX_TINY, QDAGGER_TINY, TINY, VARIANT_TINY  # noqa: E402

TEACHERS = {"qdagger_dqn_atari_impalacnn.py": "dqn_atari.py", "qdagger_dqn_atari_jax_impalacnn.py": "dqn_atari_jax.py"}
TEACHER_FLAGS = ["--total-timesteps", "600", "--learning-starts", "300", "--buffer-size", "1000", "--save-model"]
SKIPPED_TAGS = ("SPS",)  # wall-clock rates (charts/SPS, charts/offline/SPS) differ run to run


def env():
    return dict(
        os.environ,
        WANDB_MODE="disabled",
        OMP_NUM_THREADS="1",
        SDL_VIDEODRIVER="dummy",
        XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
        PYTHONPATH=str(REPO),
    )


def scalars(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: [[e.step, e.value] for e in accumulator.Scalars(tag)]
        for tag in sorted(accumulator.Tags()["scalars"])
        if not tag.endswith(SKIPPED_TAGS)
    }


def run(script_path, flags):
    """Runs one script in a fresh folder; returns {"returncode", "stderr" (tail), "scalars"}."""
    with tempfile.TemporaryDirectory() as cwd:
        command = [sys.executable, str(script_path), *map(str, flags)]
        done = subprocess.run(command, cwd=cwd, env=env(), capture_output=True, text=True, timeout=1800)
        runs = list((Path(cwd) / "runs").glob("*")) if (Path(cwd) / "runs").exists() else []
        values = scalars(runs[0]) if len(runs) == 1 else {}
        return {"returncode": done.returncode, "stderr": done.stderr[-2000:], "scalars": values}


def teacher(scripts_dir, teachers_dir, name):
    folder = Path(teachers_dir) / name[:-3]
    found = list(folder.glob(f"runs/*/{name[:-3]}.cleanrl_model"))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, str(Path(scripts_dir) / name), *TEACHER_FLAGS],
            cwd=folder,
            env=env(),
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.exit(f"same_values: the teacher run of {name} failed:\n{done.stderr[-2000:]}")
        found = list(folder.glob(f"runs/*/{name[:-3]}.cleanrl_model"))
    return str(found[0].resolve())


def record(args):
    budgets = TINY | VARIANT_TINY | JAX_TINY
    names = args.only or sorted(p.name for p in Path(args.scripts_dir).glob("*.py") if p.name != "__init__.py")
    plan = {}
    for name in names:
        if name in TEACHERS:
            path = teacher(Path(args.scripts_dir).resolve(), args.teachers, TEACHERS[name])
            plan[name] = ["--teacher-model-path", path, *QDAGGER_TINY, "--save-model"]
        elif name in budgets:
            plan[name] = [*budgets[name], "--save-model"]
        else:
            print(f"same_values: no budget for {name}; skipped", file=sys.stderr)
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
        futures = {pool.submit(run, Path(args.scripts_dir).resolve() / name, flags): name for name, flags in plan.items()}
        for future in concurrent.futures.as_completed(futures):
            name = futures[future]
            results[name] = future.result() | {"flags": plan[name]}
            points = sum(len(v) for v in results[name]["scalars"].values())
            print(
                f"{name}: exit {results[name]['returncode']}, {len(results[name]['scalars'])} tags, {points} points",
                flush=True,
            )
    Path(args.out).write_text(json.dumps(dict(sorted(results.items())), indent=1))


def same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def same_points(before, after):
    return len(before) == len(after) and all(sb == sa and same(vb, va) for (sb, vb), (sa, va) in zip(before, after))


def compare(args):
    before, after = json.loads(Path(args.before).read_text()), json.loads(Path(args.after).read_text())
    rows, moved = [], 0
    for name in sorted(after if args.recorded_only else set(before) | set(after)):
        if name not in before or name not in after:
            rows.append((name, "-", "-", f"only in {'after' if name in after else 'before'}"))
            moved += 1
            continue
        b, a = before[name], after[name]
        if b["returncode"] != 0 or a["returncode"] != 0:
            rows.append((name, "-", "-", f"exit {b['returncode']} before, {a['returncode']} after"))
            moved += 1
            continue
        tags = sorted(t for t in set(b["scalars"]) | set(a["scalars"]) if not t.endswith(SKIPPED_TAGS))
        differ = [t for t in tags if not same_points(b["scalars"].get(t, []), a["scalars"].get(t, []))]
        points = sum(len(b["scalars"].get(t, [])) for t in tags)
        rows.append((name, str(len(tags)), str(points), "identical" if not differ else "moved: " + ", ".join(differ)))
        moved += bool(differ)
    table = ["| script | tags | points | result |", "|---|---|---|---|", *(f"| {' | '.join(r)} |" for r in rows)]
    print("\n".join(table))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(table) + "\n")
    print(f"{len(rows) - moved} of {len(rows)} scripts log identical values")
    sys.exit(1 if moved else 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="run every script of a folder and record its scalars")
    rec.add_argument("--scripts-dir", default=str(REPO / "cleanrl"))
    rec.add_argument("--out", required=True)
    rec.add_argument("--teachers", default=str(Path(tempfile.gettempdir()) / "same_values_teachers"))
    rec.add_argument("--workers", type=int, default=2)
    rec.add_argument("--only", nargs="*", help="script file names (default: all)")
    cmp = commands.add_parser("compare", help="list the scripts whose scalars differ")
    cmp.add_argument("before")
    cmp.add_argument("after")
    cmp.add_argument("--markdown")
    cmp.add_argument("--recorded-only", action="store_true", help="compare only the scripts recorded in AFTER")
    args = parser.parse_args()
    record(args) if args.command == "record" else compare(args)


if __name__ == "__main__":
    main()
