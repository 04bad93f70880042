#!/bin/bash
# Slurm job-array template for `python -m cleanrl_utils.benchmark --slurm-template-path benchmark/slurm_template.sh`.
# The runner fills the {{...}} placeholders (listed in cleanrl_utils/benchmark.py's docstring); a line that
# holds only a placeholder rendering to nothing (no GPUs, no node count) is dropped. Array task i runs
# ENV_IDS[i] with SEEDS[i]; every value from the command line reaches bash as a quoted array word.
#SBATCH --job-name=cleanrl-benchmark
#SBATCH --array={{array}}
#SBATCH --ntasks={{ntasks}}
#SBATCH --cpus-per-task={{cpus_per_task}}
{{gpus_per_task_line}}
{{nodes_line}}
#SBATCH --output={{slurm_output}}
set -euo pipefail

COMMAND=({{command}})
ENV_IDS=({{env_ids}})
SEEDS=({{seeds}})
LOGS=({{log_paths}})

i=$SLURM_ARRAY_TASK_ID
echo "array task $i: ${ENV_IDS[$i]} seed ${SEEDS[$i]}, log ${LOGS[$i]}"
srun "${COMMAND[@]}" --env-id "${ENV_IDS[$i]}" --seed "${SEEDS[$i]}" >"${LOGS[$i]}" 2>&1
