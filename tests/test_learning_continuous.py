"""Learning tests for the continuous off-policy scripts: SAC, TD3 and DDPG must learn Pendulum-v1, not only start.

Pendulum's episodes are 200 steps; a random policy scores about -1200 per episode. With learning from
step 1000 both agents swing the pendulum up within a few thousand steps. Seeds are fixed and runs are
deterministic on one machine, so the thresholds guard against regressions. Another CPU rounds floats
differently and sends a run down another path, much as another seed would: each threshold sits below what
every seed measured reaches, and far from the random score.
"""

import pytest

from conftest import check_ok, final_return, only_run_dir, run_script

PENDULUM_8K = ["--env-id", "Pendulum-v1", "--total-timesteps", 8000, "--learning-starts", 1000, "--seed", 1]
PENDULUM_6K = ["--env-id", "Pendulum-v1", "--total-timesteps", 6000, "--learning-starts", 1000, "--seed", 1]


@pytest.mark.learning
def test_sac_learns_pendulum_within_6k_steps(workdir):
    # on this project's 2-core machine seeds 1-3 average -226, -161, -249 over their last 10 episodes at 6k steps
    # (2026-12-07; seed 1: ~85 s with the other core busy); at 8k they gave -131, -147, -190 (~105 s of one core)
    check_ok(run_script("sac_continuous_action.py", *PENDULUM_6K, cwd=workdir))
    assert final_return(only_run_dir(workdir), last=10) >= -400


@pytest.mark.learning
def test_td3_learns_pendulum_within_8k_steps(workdir):
    # on CI's kind of machine (2-core AMD EPYC) seeds 1-5 average -167, -215, -414, -355, -223 over their last 10
    # episodes (seed 1: ~65 s of one core; -194 on an earlier machine); seed 3 is still improving at 8k (last: -131)
    check_ok(run_script("td3_continuous_action.py", *PENDULUM_8K, cwd=workdir))
    assert final_return(only_run_dir(workdir), last=10) >= -500


@pytest.mark.learning
def test_ddpg_learns_pendulum_within_8k_steps(workdir):
    # on this project's 2-core machine seeds 1-5 average -208, -179, -388, -355, -196 over their last 10 episodes
    # (2026-12-04; seed 1: ~35 s of one core); random play scores about -1200
    check_ok(run_script("ddpg_continuous_action.py", *PENDULUM_8K, cwd=workdir))
    assert final_return(only_run_dir(workdir), last=10) >= -500
