"""ppg_procgen.py: its runs (default flags through two policy phases and two auxiliary phases; upstream CleanRL's smoke
command as written, whose auxiliary minibatch is smaller than --num-aux-rollouts; a run without a gradient step,
which warns; the file copied alone with video, save, evaluation and offline W&B; refusals) and the pieces of PPG's
auxiliary phase: the masked behaviour-cloning KL and value losses on hand-computed logits, the detached value head,
the normalised initialisation, the auxiliary buffer's size. The envpool pieces it shares in kind with ppo_procgen.py
(GAE, reset-step mask, time limit, env_error) are checked for both files in test_ppo_procgen.py.
"""

import math
import time

import pytest
import torch
from torch.distributions import Categorical, kl_divergence

from cleanrl_utils.checkpoint import decode, read
from cleanrl_utils.report import read_scalars
from conftest import (
    IN_CI,
    PPO_TAGS,
    check_checkpoint_and_resume,
    check_ok,
    check_refused,
    check_warns_and_runs,
    load_script,
    only_run_dir,
    procgen_missing,
    run_copied_alone,
    run_script,
    start_script,
)

# under CI (CI=true) they run anyway, and fail, where the Qt 5 runtime that .ci/run installs is missing
pytestmark = pytest.mark.skipif(procgen_missing() is not None and not IN_CI, reason=f"envpool Procgen: {procgen_missing()}")

SCRIPT = "ppg_procgen.py"
# 2 envs x 16 steps per iteration, phases of 2 iterations (an auxiliary buffer of 4 rollouts, 2 per minibatch);
# games cut at 10 steps so several end and the 10 evaluation games are short
ONE_PHASE = [
    "--total-timesteps", 64,
    "--num-envs", 2,
    "--num-steps", 16,
    "--num-minibatches", 2,
    "--n-iteration", 2,
    "--num-aux-rollouts", 2,
    "--e-auxiliary", 2,
    "--max-episode-steps", 10,
]  # fmt: skip
AUX_TAGS = ["losses/aux/kl_loss", "losses/aux/aux_value_loss", "losses/aux/real_value_loss"]

ppg = load_script("ppg_procgen")


def test_auxiliary_losses_on_hand_computed_logits():
    # old policies (1/2, 1/2) and (3/4, 1/4); the new one is (3/4, 1/4) on both samples
    old_logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]])
    new_logits = torch.tensor([[math.log(3.0), 0.0], [math.log(3.0), 0.0]])
    kl_first = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(0.5 / 0.25)  # 0.5 log(4/3)
    values, aux_values, returns = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 4.0]), torch.tensor([1.0, 1.0])

    def losses(valid):
        return [
            x.item() for x in ppg.auxiliary_losses(old_logits, new_logits, values, aux_values, returns, torch.tensor(valid))
        ]

    assert losses([1.0, 1.0]) == pytest.approx([kl_first / 2, 0.5 * (0 + 1) / 2, 0.5 * (1 + 9) / 2])
    # a reset step (valid 0) counts in no mean
    assert losses([1.0, 0.0]) == pytest.approx([kl_first, 0.0, 0.5])
    assert losses([0.0, 1.0]) == pytest.approx([0.0, 0.5, 4.5])


def test_kl_loss_is_kl_from_the_old_policy_to_the_new():
    generator = torch.Generator().manual_seed(0)
    old_logits, new_logits = torch.randn(6, 15, generator=generator), torch.randn(6, 15, generator=generator)
    zeros, ones = torch.zeros(6), torch.ones(6)
    kl_loss, _, _ = ppg.auxiliary_losses(old_logits, new_logits, zeros, zeros, zeros, ones)
    expected = kl_divergence(Categorical(logits=old_logits), Categorical(logits=new_logits)).mean()
    assert kl_loss.item() == pytest.approx(expected.item(), rel=1e-5)
    same, _, _ = ppg.auxiliary_losses(old_logits, old_logits.clone(), zeros, zeros, zeros, ones)
    assert same.item() == pytest.approx(0.0, abs=1e-6)


def test_value_head_is_detached_from_the_trunk_and_the_aux_head_is_not():
    agent = ppg.Agent((3, 64, 64), 15)
    x = torch.randint(0, 256, (2, 3, 64, 64), dtype=torch.uint8)
    trunk = list(agent.network.parameters())

    def grads_after(output):
        agent.zero_grad(set_to_none=True)
        output.sum().backward()
        return [p.grad is not None and p.grad.abs().sum() > 0 for p in trunk], agent.critic.weight.grad

    trunk_grads, critic_grad = grads_after(agent.get_action_and_value(x)[3])
    assert not any(trunk_grads) and critic_grad.abs().sum() > 0
    _, value, aux_value = agent.get_pi_value_and_aux_value(x)
    assert not any(grads_after(value)[0])
    assert all(grads_after(aux_value)[0])
    assert all(grads_after(agent.get_pi_logits(x))[0])


def test_normalised_initialisation():
    agent = ppg.Agent((3, 64, 64), 15)

    def unit_norms(layer):
        return torch.linalg.vector_norm(layer.weight, dim=tuple(range(1, layer.weight.dim())))

    for head in (agent.actor, agent.critic, agent.aux_critic):
        torch.testing.assert_close(unit_norms(head), torch.full((head.out_features,), 0.1))
        assert (head.bias == 0).all()
    torch.testing.assert_close(unit_norms(agent.network[5]), torch.full((256,), 1.4))
    stage = agent.network[0]
    torch.testing.assert_close(unit_norms(stage.conv), torch.ones(16))
    # 3 stages of 2 blocks: each block's two convolutions have norm sqrt(1 / sqrt(3) / sqrt(2))
    torch.testing.assert_close(unit_norms(stage.res_block1.conv0), torch.full((16,), (1 / math.sqrt(6)) ** 0.5))


def test_auxiliary_buffer_size_and_memory_check(monkeypatch):
    assert ppg.available_memory() is None or ppg.available_memory() > 2**20  # MemAvailable, capped by a cgroup limit
    args = ppg.Args()
    # 32 iterations x 64 envs x 256 steps of a 3x64x64 frame (+ return, mask and 15 logits)
    assert ppg.aux_buffer_bytes(args) == 32 * 64 * 256 * (3 * 64 * 64 + 4 + 4 + 60)
    assert ppg.aux_buffer_bytes(args) / 2**30 == pytest.approx(6.03, abs=0.01)
    monkeypatch.setattr(ppg, "available_memory", lambda: 4 * 2**30)
    error = ppg.validation_error(args)
    assert error.startswith("the auxiliary buffer needs 6.0 GiB (and 1 GiB for the rest) but only 4.0 GiB of memory")
    assert error.endswith("is available; lower --n-iteration, --num-envs or --num-steps")
    args.n_iteration = 8
    assert ppg.validation_error(args) is None  # 1.5 GiB + 1 GiB headroom
    monkeypatch.setattr(ppg, "available_memory", lambda: None)  # unknown: no refusal
    assert ppg.validation_error(ppg.Args()) is None


def test_default_flags_run_two_phases(workdir):
    results = []  # one phase with a checkpoint after each iteration, then resumed at its end for a second phase

    def run(*args, cwd):
        results.append(run_script(*args, cwd=cwd))
        return results[-1]

    run_dir = check_checkpoint_and_resume(SCRIPT, ONE_PHASE, 1, workdir, run=run)
    assert "global_step=" in results[0].stdout and "SPS=" in results[0].stdout
    assert "auxiliary buffer: --n-iteration 2 x --num-envs 2 x --num-steps 16 = 64 observations" in results[0].stdout
    # a phase's end spends the auxiliary buffer: its checkpoint keeps none of it
    assert [len(rows) for rows in decode(read(str(run_dir / "checkpoint.pt"), SCRIPT)["state"]["aux_rows"][1])] == [0] * 3
    for tag in PPO_TAGS:
        assert list(read_scalars(str(run_dir), tag)[0]) == [32, 64, 96, 128], tag
    for tag in AUX_TAGS:  # once per auxiliary phase, at the end of its policy phase
        steps, values = read_scalars(str(run_dir), tag)
        assert list(steps) == [64, 128] and all(math.isfinite(v) and v >= 0 for v in values), tag
    _, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    assert len(lengths) >= 8 and max(lengths) <= 10
    assert not (workdir / "videos").exists()


def test_a_run_killed_mid_phase_resumes_with_the_rollouts_of_its_phase(workdir):
    # the checkpoint of iteration 3, the first of the second phase, is kept as the killed run left it (whatever the
    # run wrote after it): the resumed run's auxiliary phase trains on that iteration's rollouts and its own
    flags = [*ONE_PHASE, "--total-timesteps", 128, "--checkpoint-every", 1]
    process = start_script(SCRIPT, *flags, cwd=workdir)
    seen, mid_phase, deadline = workdir / "seen.pt", None, time.time() + 600
    while mid_phase is None and process.poll() is None and time.time() < deadline:
        for path in workdir.glob("runs/*/checkpoint.pt"):
            seen.write_bytes(path.read_bytes())  # whole: the module renames each checkpoint into place
            if read(str(seen), SCRIPT)["global_step"] == 96:
                mid_phase = path, seen.read_bytes()
        time.sleep(0.01)
    process.kill()
    assert mid_phase is not None, f"no checkpoint seen at step 96: {process.communicate()[1][-2000:]}"
    process.communicate()
    path, data = mid_phase
    path.write_bytes(data)
    kind, rows = read(str(path), SCRIPT)["state"]["aux_rows"]
    obs_rows, return_rows, valid_rows = decode(rows)  # the phase's 2 rollouts so far, one per env
    assert kind == "value" and obs_rows.shape == (2, 16, 3, 64, 64) and return_rows.shape == valid_rows.shape == (2, 16)
    assert obs_rows.any() and valid_rows.any()
    # the buffer's rows are laid out by --num-envs: a phase cannot go on with another
    refused = run_script(SCRIPT, "--resume", path.parent, "--num-envs", 4, cwd=workdir)
    assert refused.returncode == 2 and "--num-envs cannot change on --resume" in refused.stderr, refused.stderr
    check_ok(run_script(SCRIPT, "--resume", path.parent, cwd=workdir))
    for tag in PPO_TAGS:
        assert list(read_scalars(str(path.parent), tag)[0]) == [32, 64, 96, 128], tag
    for tag in AUX_TAGS:
        steps, values = read_scalars(str(path.parent), tag)
        assert list(steps) == [64, 128] and all(math.isfinite(v) for v in values), tag


def test_upstream_smoke_command_runs_as_written(workdir, fork_script):
    # upstream CleanRL's tests/test_procgen.py (../shared/upstream-test-commands.tsv): phases of one 64-step iteration,
    # whose auxiliary buffer of 1 rollout is one minibatch smaller than --num-aux-rollouts 4 (as upstream slices it)
    flags = ["--num-envs", 1, "--num-steps", 64, "--total-timesteps", 256, "--num-minibatches", 2, "--n-iteration", 1]
    result = fork_script(SCRIPT, *flags, cwd=workdir, timeout=600)
    check_ok(result)
    assert "warning" not in result.stdout and "global_step=256" in result.stdout
    for tag in AUX_TAGS:
        steps, values = read_scalars(str(only_run_dir(workdir)), tag)
        assert list(steps) == [64, 128, 192, 256] and all(math.isfinite(v) for v in values), tag


def test_a_run_without_a_gradient_step_warns_and_runs(workdir, fork_script):
    result = fork_script(SCRIPT, *ONE_PHASE, "--total-timesteps", 63, cwd=workdir, timeout=300)  # below one phase of 64
    check_warns_and_runs(
        result, SCRIPT, "--total-timesteps below one phase", cwd=workdir, loss_tag="losses/aux/kl_loss", alone=True
    )


def test_copied_file_with_video_save_evaluation_and_offline_tracking(tmp_path):
    run_dir, checkpoint, _ = run_copied_alone(SCRIPT, *ONE_PHASE, tmp_path=tmp_path)
    assert checkpoint["args"]["env_id"] == "StarpilotEasy-v0" and checkpoint["args"]["n_iteration"] == 2
    assert "aux_critic.weight" in checkpoint["model"]
    assert len(read_scalars(str(run_dir), "losses/aux/kl_loss")[0]) == 1


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--n-iteration", 100000, "--total-timesteps", 10**15], "the auxiliary buffer needs 18853.8 GiB (and 1 GiB for"),
        (["--num-aux-rollouts", 0], "--n-iteration, --e-policy, --v-value, --e-auxiliary, --num-aux-rollouts, --n-aux-grad"),
        (["--total-timesteps", 0], "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --n-iteration, --e-policy"),
        (["--env-id", "starpilot"], "starpilot is not an envpool Procgen game; did you mean StarpilotEasy-v0? ppg_procgen.py"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, SCRIPT, message, workdir)
