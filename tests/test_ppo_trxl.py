"""ppo_trxl.py: the memory window and its mask against cases worked out by hand (which cached states a step may attend
to, episode starts inside a window), attention that ignores what the mask hides, the positional encodings, the
proof-of-memory task drawn from its seed, the update seeing each step as the rollout did (through the script itself),
MiniGrid's images with the reconstruction loss, Memory Gym where it can be installed, the refusals, and upstream's
documented ProofofMemory-v0 command learning the task."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from budgets import VARIANT_TINY
from cleanrl_utils.report import read_scalars
from conftest import (
    PPO_TAGS,
    check_checkpoint_and_resume,
    check_ok,
    check_refused,
    check_warns_and_runs,
    final_return,
    load_script,
    only_run_dir,
    run_benchmark,
    run_copied_alone,
    run_script,
    script_env,
)

SCRIPT = "ppo_trxl.py"
TINY = VARIANT_TINY[SCRIPT]
TAGS = PPO_TAGS + ["charts/entropy_coefficient", "losses/loss"]
# upstream's documented ProofofMemory-v0 command (docs/rl-algorithms/ppo-trxl.md)
UPSTREAM_POM = [
    "--env_id", "ProofofMemory-v0", "--total_timesteps", 25000, "--num_envs", 16, "--num_steps", 128,
    "--num_minibatches", 8, "--update_epochs", 4, "--trxl_num_layers", 4, "--trxl_num_heads", 1, "--trxl_dim", 64,
    "--trxl_memory_length", 16, "--trxl_positional_encoding", "none", "--vf_coef", 0.1, "--max_grad_norm", 0.5,
    "--init_lr", 3.0e-4, "--init_ent_coef", 0.001, "--clip_coef", 0.2,
]  # fmt: skip


@pytest.fixture(scope="module")
def trxl():
    return load_script("ppo_trxl")


def window(trxl, steps, memory_length):
    indices, mask = trxl.memory_window(torch.tensor(steps), memory_length)
    return indices.tolist(), mask.int().tolist()


# ---------------------------------------------------------------- the memory window and its mask


def test_memory_window_by_hand(trxl):
    # a window of 4: step t attends to the min(t, 3) steps before it; the window starts at step 0 until it ends at t
    indices, mask = window(trxl, [0, 1, 3, 4, 6], 4)
    assert indices == [[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3], [1, 2, 3, 4], [3, 4, 5, 6]]
    assert mask == [[0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0]]
    # a window of 1 sees nothing; a window as long as the episode sees every earlier step
    assert window(trxl, [0, 5], 1) == ([[0], [5]], [[0], [0]])
    assert window(trxl, [2], 3) == ([[0, 1, 2]], [[1, 1, 0]])


def test_an_episode_start_inside_a_window_hides_the_previous_episode(trxl):
    # one env's steps across an episode end (episode steps 5, 6, then a new episode 0, 1, 2): the window is indexed
    # by the step in the episode, so the new episode's steps see only its own earlier steps, never steps 5 and 6
    indices, mask = window(trxl, [5, 6, 0, 1, 2], 4)
    assert indices == [[2, 3, 4, 5], [3, 4, 5, 6], [0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]]
    assert mask == [[1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0], [1, 1, 0, 0]]
    # the final observation of an episode cut at its limit (step 16 of a 16-step limit) sees the last steps
    assert window(trxl, [16], 4) == ([[13, 14, 15, 16]], [[1, 1, 1, 0]])


def test_attention_ignores_what_the_mask_hides(trxl):
    torch.manual_seed(0)
    transformer = trxl.TransformerXL(2, 8, 2, max_episode_steps=10, positional_encoding="absolute")
    x, memories = torch.randn(3, 8), torch.randn(3, 4, 2, 8)
    indices, mask = trxl.memory_window(torch.tensor([0, 2, 7]), 4)
    out, cached = transformer(x, memories, mask, indices)
    other = memories + 100 * torch.randn(3, 4, 2, 8) * ~mask[:, :, None, None]  # only hidden slots change
    torch.testing.assert_close(transformer(x, other, mask, indices)[0], out)
    assert not torch.equal(transformer(x, memories + 1, mask, indices)[0][1:], out[1:])  # seen slots do matter
    # a first step sees nothing: its output does not depend on the memory at all
    torch.testing.assert_close(transformer(x[:1], torch.randn(1, 4, 2, 8), mask[:1], indices[:1])[0], out[:1])
    # what is cached for later steps is each layer's input: the step's own input for layer 0
    assert cached.shape == (3, 2, 8) and torch.equal(cached[:, 0], x)


def test_absolute_positions_are_sinusoids_counted_down(trxl):
    transformer = trxl.TransformerXL(1, 4, 1, max_episode_steps=2, positional_encoding="absolute")
    # 3 positions (the limit + 1), frequencies 1 and 1e4 ** (-2 / 4) = 0.01; position i's angle uses 2 - i
    angles = [[2.0, 0.02], [1.0, 0.01], [0.0, 0.0]]
    expected = [[np.sin(a), np.sin(b), np.cos(a), np.cos(b)] for a, b in angles]
    torch.testing.assert_close(transformer.pos_embedding, torch.tensor(expected, dtype=torch.float32))
    assert transformer.pos_embedding.shape == (3, 4)
    learned = trxl.TransformerXL(1, 4, 1, max_episode_steps=2, positional_encoding="learned")
    assert [name for name, _ in learned.named_parameters()][0] == "pos_embedding"
    assert not hasattr(trxl.TransformerXL(1, 4, 1, 2, positional_encoding="none"), "pos_embedding")


# ---------------------------------------------------------------- the proof-of-memory task


def play(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    seen, rewards = [obs], []
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        seen.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return seen, rewards, terminated, truncated
    return seen, rewards, False, False


def test_proof_of_memory_shows_the_goal_while_the_agent_is_frozen_then_hides_it(trxl):
    import gymnasium as gym

    env = gym.make("ProofofMemory-v0")
    seen, _, _, _ = play(env, 3, [0, 0, 1])
    left, position, right = seen[0]
    assert sorted([left, right]) == [-1.0, 1.0] and position in (-0.4, -0.2, 0.0, 0.2, 0.4)
    assert np.array_equal(seen[1], seen[0]) and np.array_equal(seen[2], seen[0])  # 2 steps frozen, the goal shown
    assert seen[3][0] == seen[3][2] == 0.0 and seen[3][1] == pytest.approx(position + 0.2)  # moved; hidden from now
    # walking to the paying end: 2 frozen steps (0 each), -0.1 a step, +1.6 at the end
    toward = int(right == 1.0)
    cells = round((1.0 - abs(position)) / 0.2) if (position >= 0) == bool(toward) else round((1.0 + abs(position)) / 0.2)
    _, rewards, terminated, _ = play(env, 3, [toward] * 20)
    assert terminated and len(rewards) == 2 + cells
    assert rewards[:2] == [0.0, 0.0] and rewards[-1] == pytest.approx(1.6)
    assert rewards[2:-1] == [pytest.approx(-0.1)] * (cells - 1)
    _, rewards, terminated, _ = play(env, 3, [1 - toward] * 20)  # the other end
    assert terminated and rewards[-1] == pytest.approx(-1.6)
    _, rewards, terminated, truncated = play(env, 3, [0, 1] * 10)  # dithering: cut by the 16-step limit
    assert truncated and not terminated and len(rewards) == 16


def test_proof_of_memory_is_drawn_from_its_seed(trxl):
    import gymnasium as gym

    starts = [[tuple(gym.make("ProofofMemory-v0").reset(seed=s)[0]) for s in range(20)] for _ in range(2)]
    assert starts[0] == starts[1]  # the same seeds, the same tasks
    assert len(set(starts[0])) > 5  # and seeds draw different goal sides and positions
    frame = trxl.ProofOfMemory()
    frame.reset(seed=0)
    assert frame.render().shape == (40, 440, 3)


# ---------------------------------------------------------------- the script, run as a user would


@pytest.mark.parametrize("encoding", ["none", "absolute", "learned"])
def test_the_update_sees_each_step_as_the_rollout_did(encoding, workdir):
    # one minibatch and one epoch: the logged ratios are those of the first gradient step, taken before it. A window of
    # 3 slides inside the 16-step episodes; 2 iterations carry episodes across rollouts; a random policy's episodes
    # end by termination and by truncation inside the rollouts
    flags = ["--env-id", "ProofofMemory-v0", "--total-timesteps", 512, "--num-envs", 4, "--num-steps", 64,
             "--num-minibatches", 1, "--update-epochs", 1, "--clip-coef", 1e-4, "--trxl-memory-length", 3,
             "--trxl-num-layers", 2, "--trxl-dim", 16, "--trxl-num-heads", 2,
             "--trxl-positional-encoding", encoding]  # fmt: skip
    check_ok(run_script(SCRIPT, *flags, cwd=workdir))
    run_dir = only_run_dir(workdir)
    _, kl = read_scalars(str(run_dir), "losses/old_approx_kl")
    _, clipfrac = read_scalars(str(run_dir), "losses/clipfrac")
    assert len(kl) == 2 and max(abs(k) for k in kl) < 1e-6, kl
    assert list(clipfrac) == [0.0, 0.0]  # every ratio within 1e-4 of 1
    _, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    assert 16 in lengths and min(lengths) < 16  # truncated and terminated episodes both happened


def test_default_flags_log_each_tag_once_per_iteration_then_a_checkpoint_and_resume(workdir):
    # two iterations with a checkpoint after each, then two more from the last one with --resume (new episodes, an
    # empty episodic memory)
    run_dir = check_checkpoint_and_resume(SCRIPT, TINY, 1, workdir)
    for tag in TAGS:
        assert list(read_scalars(str(run_dir), tag)[0]) == [128, 256, 384, 512], tag  # one point per iteration, once
    assert len(read_scalars(str(run_dir), "losses/reconstruction_loss")[0]) == 0  # off by default
    assert not (workdir / "videos").exists()


def test_copied_file_records_saves_evaluates_and_tracks(tmp_path):
    _, checkpoint, _ = run_copied_alone(SCRIPT, *TINY, tmp_path=tmp_path)
    assert checkpoint["args"]["trxl_memory_length"] == 8


def test_minigrid_images_with_the_reconstruction_loss(workdir, fork_script):
    flags = ["--env-id", "MiniGrid-MemoryS9-v0", "--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32,
             "--num-minibatches", 2, "--update-epochs", 1, "--trxl-num-layers", 1, "--trxl-dim", 32,
             "--trxl-memory-length", 8, "--reconstruction-coef", 0.1, "--save-model", "--checkpoint-every", 1]  # fmt: skip
    result = run_script(SCRIPT, *flags, cwd=workdir)
    check_ok(result)
    run_dir = only_run_dir(workdir)
    steps, losses = read_scalars(str(run_dir), "losses/reconstruction_loss")
    assert list(steps) == [64, 128] and all(0 < loss < 1 for loss in losses)  # binary cross-entropy of pixels in [0, 1]
    _, returns = read_scalars(str(run_dir), "eval/episodic_return")
    assert len(returns) == 10  # MiniGrid's episodes are cut at 96 steps, so evaluation ends
    # enjoy plays the saved model: importing the script registers MiniGrid's ids
    model = run_dir / "ppo_trxl.cleanrl_model"
    command = [sys.executable, "-m", "cleanrl_utils.enjoy", "--exp-name", "ppo_trxl", "--model-path", str(model),
               "--eval-episodes", "2"]  # fmt: skip
    result = subprocess.run(command, cwd=workdir, env=script_env(), capture_output=True, text=True, timeout=300)
    check_ok(result)
    assert "ppo_trxl on MiniGrid-MemoryS9-v0" in result.stdout and "over 2 episodes" in result.stdout
    # a resume without the reconstruction loss has no decoder for the saved one: refused as the checkpoint is loaded
    before = sorted(p.name for p in run_dir.iterdir())
    flags = ["--resume", run_dir, "--total-timesteps", 256, "--reconstruction-coef", 0]
    result = fork_script(SCRIPT, *flags, cwd=workdir)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"{SCRIPT}: the saved agent does not fit the flags given now"), result.stderr
    assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing written into the run


@pytest.fixture(scope="module")
def memory_gym_path(tmp_path_factory):
    """memory-gym 1.0.2 installed with --no-deps into a folder of its own (its pins, gymnasium==0.29.0 and
    pygame==2.4.0, would replace Gymnasium 1.x and pygame-ce); skips where the package index cannot be reached."""
    target = tmp_path_factory.mktemp("memory_gym")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), "memory-gym==1.0.2"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        pytest.skip(f"cannot install memory-gym 1.0.2: {result.stderr.strip().splitlines()[-1:]}")
    return target


# Discrete actions, filmed, saved and evaluated; MultiDiscrete actions and no time limit of its own
MEMORY_GYM_RUNS = [("MortarMayhem-Grid-v0", ["--capture-video", "--save-model"]), ("Endless-MortarMayhem-v0", [])]


@pytest.mark.parametrize("env_id,extra", MEMORY_GYM_RUNS, ids=[env_id for env_id, _ in MEMORY_GYM_RUNS])
def test_memory_gym_tasks_run_once_installed(env_id, extra, memory_gym_path, workdir):
    flags = ["--env-id", env_id, "--total-timesteps", 128, "--num-envs", 2, "--num-steps", 32, "--num-minibatches", 2,
             "--update-epochs", 1, "--trxl-num-layers", 1, "--trxl-dim", 32, "--trxl-memory-length", 8, *extra]  # fmt: skip
    check_ok(run_script(SCRIPT, *flags, cwd=workdir, env=script_env() | {"PYTHONPATH": str(memory_gym_path)}))
    run_dir = only_run_dir(workdir)
    assert len(read_scalars(str(run_dir), "losses/policy_loss")[0]) == 2
    if extra:
        assert list((workdir / "videos" / run_dir.name).glob("*.mp4"))
        assert len(read_scalars(str(run_dir), "eval/episodic_return")[0]) == 10


CASES = [
    ([], "MortarMayhem-Grid-v0 is a Memory Gym task, and memory-gym 1.0.2 pins gymnasium==0.29.0"),
    (["--env-id", "Pendulum-v1"], "supports Discrete and MultiDiscrete ones"),
    (["--env-id", "ProofofMemory-v0", "--trxl-dim", 30, "--trxl-num-heads", 4], "--trxl-dim must split into"),
    (["--env-id", "ProofofMemory-v0", "--reconstruction-coef", 0.1], "--reconstruction-coef needs image observations"),
    (["--env-id", "ProofofMemory-v0", "--trxl-memory-length", 0], "--trxl-memory-length must be >= 1"),
    (["--env-id", "ProofofMemory-v0", "--num-envs", 3, "--num-steps", 5], "does not split into --num-minibatches 8"),
    (["--env-id", "ProofofMemory-v0", "--init-lr", 0], "--init-lr must be positive"),
    (["--env-id", "ProofofMemory-v0", "--total-timesteps", -5], "--total-timesteps, --num-envs, --num-steps, "),
    (["--env-id", "ProofofMemory-v0", "--trxl-positional-encoding", "rotary"], ""),  # tyro: not one of the choices
]


@pytest.mark.parametrize("flags,message", CASES, ids=[" ".join(map(str, f)) or "default" for f, _ in CASES])
def test_bad_input_exits_2_with_one_line_and_creates_nothing(flags, message, workdir, fork_script):
    result = fork_script(SCRIPT, "--capture-video", "--save-model", *flags, cwd=workdir)
    if message:
        check_refused(result, SCRIPT, message, workdir)
    else:
        assert result.returncode == 2 and list(workdir.iterdir()) == [], result.stderr


def test_resume_refuses_flags_the_saved_networks_do_not_fit(workdir, fork_script):
    check_ok(run_script(SCRIPT, *TINY, "--checkpoint-every", 100, cwd=workdir))  # a checkpoint at its end
    run_dir = only_run_dir(workdir)
    before = sorted(p.name for p in run_dir.iterdir())
    for flags, message in [
        (["--trxl-dim", 16], "--trxl-dim cannot change on --resume (the run has 32): the saved networks fit it"),
        (["--trxl-positional-encoding", "none"], "--trxl-positional-encoding cannot change on --resume"),  # no weights
        (["--trxl-num-layers", 2], "--trxl-num-layers cannot change on --resume"),
        (["--trxl-num-heads", 4], "--trxl-num-heads cannot change on --resume"),
    ]:
        result = fork_script(SCRIPT, "--resume", run_dir, "--total-timesteps", 512, *flags, cwd=workdir)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"{SCRIPT}: {message}"), result.stderr
        assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing written into the run
    # a longer budget with another window length goes on: the networks do not depend on it
    check_ok(run_script(SCRIPT, "--resume", run_dir, "--total-timesteps", 384, "--trxl-memory-length", 4, cwd=workdir))


def test_track_without_a_wandb_login_exits_2_and_leaves_nothing(workdir, tmp_path_factory, fork_script):
    env = {"WANDB_MODE": "online", "HOME": str(tmp_path_factory.mktemp("home"))}
    result = fork_script(SCRIPT, *TINY, "--track", cwd=workdir, env=env, unset=["WANDB_API_KEY"])
    check_refused(result, SCRIPT, "--track could not start a W&B run (no API key)", workdir)


def test_a_run_without_a_gradient_step_warns_and_runs(workdir):
    result = run_script(SCRIPT, "--env-id", "ProofofMemory-v0", "--total-timesteps", 10, cwd=workdir)
    check_warns_and_runs(result, SCRIPT, "--total-timesteps below one batch", cwd=workdir, loss_tag="losses/value_loss")


def test_compute_gae_is_ppo_s(trxl):
    ppo = load_script("ppo")
    torch.manual_seed(0)
    rewards, values, final_values = torch.randn(3, 5, 2)
    dones = torch.tensor([[0, 1], [1, 0], [0, 0], [0, 1], [0, 0]], dtype=torch.float32)
    terminations = torch.tensor([[0, 1], [0, 0], [0, 0], [0, 0], [0, 0]], dtype=torch.float32)  # (1, 0) truncated
    args = (rewards, values, dones, terminations, final_values, torch.randn(2), 0.995, 0.95)
    for mine, theirs in zip(trxl.compute_gae(*args), ppo.compute_gae(*args)):
        torch.testing.assert_close(mine, theirs)


def test_benchmark_script_runs_both_published_commands_and_reports(tmp_path):
    # the published flags, cut to 2 iterations of 2 envs x 64 steps by the extra flags (the last of a flag wins)
    tiny = ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256"]
    envs = "ProofofMemory-v0 MiniGrid-MemoryS9-v0"
    result = run_benchmark(["bash", "benchmark/ppo_trxl.sh", *tiny], tmp_path, ENVS=envs, SEEDS="1", WORKERS="1")
    assert "Maximum resident set size" in result.stdout and result.stdout.count("eval/episodic_return over 10") == 2
    report = (tmp_path / "ppo_trxl" / "report.md").read_text()
    assert "ProofofMemory-v0" in report and "MiniGrid-MemoryS9-v0" in report
    assert (tmp_path / "ppo_trxl" / "MiniGrid-MemoryS9-v0.png").is_file()


@pytest.mark.learning
def test_upstream_proof_of_memory_command_learns_the_task(workdir):
    # the goal side is seen for 2 steps only, before the agent can move: a memoryless policy picks the paying end half
    # the time (about -0.4 on average), the best one always (1.2 on average); upstream's documented run gets there
    check_ok(run_script(SCRIPT, *UPSTREAM_POM, "--seed", 1, cwd=workdir))
    assert final_return(only_run_dir(workdir)) >= 0.8
