#!/usr/bin/env bash
# ppo_pettingzoo_ma_atari.py (self-play) on PettingZoo Atari games, every env x seed through the runner, then a table
# of episodic LENGTHS (lengths.md) and the report of the first player's returns with curves (report.md and a PNG per
# env), both in $RESULTS/ppo_pettingzoo_ma_atari/ (default benchmark/results/). CleanRL publishes lengths for this
# script, not returns: in self-play a zero-sum score tends to 0 while better play makes longer games (agent steps).
#   bash benchmark/ppo_pettingzoo_ma_atari.sh                  # pong_v3, seed 1, 1M steps
#   ENVS="pong_v3 surround_v2 tennis_v3" SEEDS="1 2 3" STEPS=20000000 bash benchmark/ppo_pettingzoo_ma_atari.sh
# The second line is the published setting; the table then has a published column (CleanRL's docs, 20M steps, mean
# and std over the runs of the last games' lengths): pong_v3 4153.60 ± 190.80, surround_v2 3055.33 ± 223.68,
# tennis_v3 14538.02 ± 7005.54. ENVS, SEEDS (consecutive), STEPS and WORKERS (runs at once, default 1) override the
# defaults; the runs go through cleanrl_utils.benchmark (a log per run in $OUT/logs, runs in $OUT/runs, default
# benchmark/out/ppo_pettingzoo_ma_atari). Extra flags go to the script (e.g. --no-cuda, --track).
set -euo pipefail
envs=${ENVS:-pong_v3}
seeds=${SEEDS:-1}
steps=${STEPS:-1000000}
workers=${WORKERS:-1}
source "$(dirname "$0")/common.sh" ppo_pettingzoo_ma_atari

# the runner takes a first seed and a count: SEEDS must be consecutive
read -r -a seed_list <<< "$seeds"
start_seed=${seed_list[0]}
num_seeds=${#seed_list[@]}
if [ "$seeds" != "$(seq -s ' ' "$start_seed" $((start_seed + num_seeds - 1)))" ]; then
  echo "$(basename "$0"): SEEDS must be consecutive numbers such as \"1 2 3\", got \"$seeds\"" >&2
  exit 2
fi
# one command string, each word quoted for the runner's shell-word split (no shell runs it)
command=$(printf '%q ' "$python" "$repo/cleanrl/ppo_pettingzoo_ma_atari.py" --total-timesteps "$steps" "$@")
read -r -a env_list <<< "$envs"
status=0
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.benchmark \
  --env-ids "${env_list[@]}" --command "$command" --start-seed "$start_seed" --num-seeds "$num_seeds" \
  --workers "$workers" --log-dir "$out/logs" || status=$?
if [ "$status" -ne 0 ]; then
  case $status in
    129|130|143) echo "ppo_pettingzoo_ma_atari: stopped before the runs finished; no table written" >&2; exit "$status" ;;
    *) echo "ppo_pettingzoo_ma_atari: a run failed; no table written" >&2; exit 1 ;;
  esac
fi

mkdir -p "$results/ppo_pettingzoo_ma_atari"
# the length table: per run the mean length of its last 20 games, per env the mean ± std (ddof 0) over its runs
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" - runs "$steps" "$results/ppo_pettingzoo_ma_atari/lengths.md" <<'EOF'
import sys

import numpy as np

from cleanrl_utils.report import find_runs, read_scalars

runs_dir, steps, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
published = {"pong_v3": "4153.60 ± 190.80", "surround_v2": "3055.33 ± 223.68", "tennis_v3": "14538.02 ± 7005.54"}
finals = {}
for run in find_runs(runs_dir):
    _, lengths = read_scalars(run.path, "charts/episodic_length")
    if len(lengths) == 0:
        print(f"{run.path}: no finished game yet, left out", file=sys.stderr)
        continue
    finals.setdefault(run.env_id, []).append(float(np.mean(lengths[-20:])))
header = "| env | runs | episodic length, last 20 games (mean ± std over runs) |"
lines = [header + (" published (20M steps) |" if steps == 20_000_000 else ""), "|-|-|-|" + ("-|" if steps == 20_000_000 else "")]
for env_id, values in sorted(finals.items()):
    row = f"| {env_id} | {len(values)} | {np.mean(values):.2f} ± {np.std(values):.2f} |"
    lines.append(row + (f" {published.get(env_id, '—')} |" if steps == 20_000_000 else ""))
table = "\n".join(lines) + "\n"
with open(path, "w") as f:
    f.write(table)
print(table)
EOF
# from $out, so the report names its runs folder "runs"
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$python" -m cleanrl_utils.report runs --last-episodes 20 \
  --out "$results/ppo_pettingzoo_ma_atari"
