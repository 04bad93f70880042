"""Learning tests for the value-based classic-control scripts: each must learn CartPole-v1, not only start.

Seeds are fixed and runs are deterministic on one machine, so the thresholds guard against regressions. Another
CPU rounds floats differently and sends a run down another path, much as another seed would (and so does any change
to a script's arithmetic): each threshold sits below what every seed measured reaches, and far above a random
policy's ~22. Budgets keep each run near a minute of one CPU core.
"""

import pytest

from conftest import check_ok, final_return, only_run_dir, run_script


@pytest.mark.learning
def test_dqn_learns_cartpole_within_150k_steps(workdir):
    # ε reaches 0.05 at 75k steps; by 150k seeds 1-3 average 425, 489, 390 over their last 10 episodes on CI's kind
    # of machine (2-core AMD EPYC; seed 3: ~35 s of one core), 244, 477, 342 on an earlier machine
    check_ok(run_script("dqn.py", "--env-id", "CartPole-v1", "--total-timesteps", 150_000, "--seed", 3, cwd=workdir))
    assert final_return(only_run_dir(workdir), last=10) >= 170


@pytest.mark.learning
def test_c51_learns_cartpole_within_120k_steps(workdir):
    # ε reaches 0.05 at 60k steps. On CI's kind of machine (2-core AMD EPYC) seeds 1-8 average 127, 255, 98, 462, 343,
    # 481, 278, 412 over their last 10 episodes by 120k steps (seed 4: ~45 s of one core, its last 10 all >= 404);
    # an earlier machine gave 151, 200, 312 for seeds 1-3. Some runs (4 of the 14 here) end on a plateau near 125
    # (seed 3's 98: three episodes of ~20 among seven of ~130), so the threshold sits below it.
    # Longer budgets are no steadier: with a 10k buffer some seeds forget and fall back to it (by 160k seeds 1-6
    # average 409, 322, 462, 129, 421, 140). Measured again on 2026-12-04 on this project's 2-core machine: seeds 1-8
    # average 151, 200, 313, 260, 414, 224, 362, 430 (their evaluations after training: 151 to 446). The threshold
    # sits below the lowest seed of all 22 runs (98), with margin, at 4.5x a random policy.
    check_ok(run_script("c51.py", "--env-id", "CartPole-v1", "--total-timesteps", 120_000, "--seed", 4, cwd=workdir))
    assert final_return(only_run_dir(workdir), last=10) >= 90


@pytest.mark.learning
def test_qr_dqn_learns_cartpole_within_150k_steps(workdir):
    # dqn.py's budget: ε reaches 0.05 at 75k steps. Calibrated 2026-12-07 on this project's 2-core machine: seeds 1-4
    # average 452, 500, 500, 129 over their last 10 episodes by 150k steps (seed 3: ~70 s of one core). Seed 4 sits on a
    # plateau near 125, as some C51 runs do; the threshold sits below it with margin, at 4.5x a random policy.
    check_ok(run_script("qr_dqn.py", "--env-id", "CartPole-v1", "--total-timesteps", 150_000, "--seed", 3, cwd=workdir))
    assert final_return(only_run_dir(workdir), last=10) >= 100


@pytest.mark.learning
def test_pqn_solves_cartpole_within_500k_steps(workdir):
    # the published budget (~55 s of one core on CI's kind of machine, a 2-core AMD EPYC, where seed 1 averages 500);
    # seeds 1-3 all ended holding the pole for the full 500 steps on an earlier machine
    check_ok(run_script("pqn.py", "--env-id", "CartPole-v1", "--total-timesteps", 500_000, "--seed", 1, cwd=workdir))
    assert final_return(only_run_dir(workdir), last=10) >= 250
