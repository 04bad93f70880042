"""The frame-level Atari replay memory: each frame stored once, stacks rebuilt exactly as the env
made them, no transition across an episode boundary, nothing sampled before its successor exists."""

import inspect

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import load_script

ATARI_SCRIPTS = ["dqn_atari", "c51_atari", "qdagger_dqn_atari_impalacnn", "sac_atari"]


def short_breakout():
    """Breakout with a short time limit (raw frames), so its episodes are truncated as well as terminated (life loss)."""
    env_id = "BreakoutShortNoFrameskip-v4"
    if env_id not in gym.registry:
        spec = gym.spec("BreakoutNoFrameskip-v4")
        gym.register(env_id, entry_point=spec.entry_point, kwargs=spec.kwargs, max_episode_steps=150)
    return env_id


def vector_env(module, env_id, num_envs):
    """The script's vector env: `make_env(env_id, num_envs, ...)` makes it whole; a thunk-style `make_env(env_id, idx,
    ...)` gives the sub-envs."""
    if "num_envs" in inspect.signature(module.make_env).parameters:
        return module.make_env(env_id, num_envs, False, "test")
    thunks = [module.make_env(env_id, i, False, "test") for i in range(num_envs)]
    return gym.vector.SyncVectorEnv(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def frames_of(values):
    """Observations (num_envs=1, stack 4, 1, 1) whose frames carry the given numbers."""
    return np.array(values, dtype=np.uint8).reshape(1, 4, 1, 1)


def test_hand_built_episodes_pad_with_the_first_frame_and_keep_the_final_frame():
    dqn_atari = load_script("dqn_atari")
    rb = dqn_atari.ReplayBuffer(20, 1, (1, 1), 4, torch.device("cpu"))
    rb.start(frames_of([1, 1, 1, 1]))
    # episode A: frames 1, 2, 3; truncated after the second action with final frame 3
    rb.add([0], [0.5], [False], [False], frames_of([1, 1, 1, 2]), None)
    rb.add([1], [1.0], [False], [True], frames_of([9, 9, 9, 9]), [frames_of([1, 1, 2, 3])[0]])
    # episode B starts at frame 9 and terminates after one action into frame 10
    rb.add([2], [-1.0], [True], [False], frames_of([20, 20, 20, 20]), [frames_of([9, 9, 9, 10])[0]])

    stack = lambda slot: rb.stacks(np.array([0]), np.array([slot]))[0].ravel().tolist()  # noqa: E731
    assert stack(0) == [1, 1, 1, 1]
    assert stack(1) == [1, 1, 1, 2]
    assert stack(2) == [1, 1, 2, 3]  # the true final observation of the truncated episode
    assert stack(3) == [9, 9, 9, 9]  # padded with episode B's first frame, never episode A's
    assert stack(4) == [9, 9, 9, 10]
    assert stack(5) == [20, 20, 20, 20]
    # transitions start at 0, 1 (truncated: done 0) and 3 (terminated: done 1); 2 and 4 are final
    # frames and 5 has no successor yet
    slots = np.arange(6)
    assert rb.sampleable(np.zeros(6, dtype=np.int64), slots).tolist() == [True, True, False, True, False, False]
    assert rb.dones[0, [0, 1, 3]].tolist() == [0.0, 0.0, 1.0]
    assert rb.rewards[0, [0, 1, 3]].tolist() == [0.5, 1.0, -1.0]
    assert rb.actions[0, [0, 1, 3]].tolist() == [0, 1, 2]

    np.random.seed(0)
    obs, actions, rewards, next_obs, dones = rb.sample(256)
    pairs = {(o.ravel().tolist()[-1], n.ravel().tolist()[-1], float(d)) for o, n, d in zip(obs, next_obs, dones)}
    assert pairs == {(1, 2, 0.0), (2, 3, 0.0), (9, 10, 1.0)}


def test_a_wrapped_buffer_never_samples_stacks_that_reach_into_newer_frames():
    dqn_atari = load_script("dqn_atari")
    rb = dqn_atari.ReplayBuffer(10, 1, (1, 1), 4, torch.device("cpu"))
    rb.start(frames_of([0, 0, 0, 0]))
    for t in range(1, 26):  # one long episode: frame t at slot t % 10
        rb.add([0], [0.0], [False], [False], frames_of([t] * 4), None)
    newest = rb.newest[0]
    assert newest == 25 % 10
    assert rb.age[0].max() == 3  # frames into the episode, counted up to the stack's reach only (int8 never overflows)
    ok = rb.sampleable(np.zeros(10, dtype=np.int64), np.arange(10))
    # the newest slot has no successor; the three after it hold the oldest frames, whose stacks
    # would need frames that were overwritten
    assert not ok[newest] and not ok[(newest + 1) % 10] and not ok[(newest + 2) % 10] and not ok[(newest + 3) % 10]
    assert ok.sum() == 6
    for slot in np.nonzero(ok)[0]:
        stack = rb.stacks(np.array([0]), np.array([slot]))[0].ravel()
        assert np.all(np.diff(stack.astype(int)) == 1), stack  # four consecutive frames of one time


@pytest.mark.parametrize("script", ATARI_SCRIPTS)
def test_rebuilt_stacks_equal_the_env_observations_on_a_real_game(script):
    module = load_script(script)
    num_envs, capacity, steps = 2, 120, 400
    envs = vector_env(module, short_breakout(), num_envs)  # truncations as well as life losses (terminations)
    envs.action_space.seed(0)
    rb = module.ReplayBuffer(num_envs * capacity, num_envs, (84, 84), 4, torch.device("cpu"))
    obs, _ = envs.reset(seed=0)
    rb.start(obs)
    truth = {}  # (env, slot) -> (obs, action, reward, true next obs, terminated)
    seen_truncation = seen_termination = False
    for _ in range(steps):
        actions = envs.action_space.sample()
        starts = rb.newest.copy()
        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        rb.add(actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
        for e in range(num_envs):
            ended = terminations[e] or truncations[e]
            # slots overwritten by this step's frames no longer hold what they held
            for k in range(1, 3 if ended else 2):
                truth.pop((e, (starts[e] + k) % capacity), None)
            real_next = infos["final_obs"][e] if ended else next_obs[e]
            truth[(e, starts[e])] = (obs[e], actions[e], rewards[e], real_next, terminations[e])
        seen_truncation |= bool((truncations & ~terminations).any())
        seen_termination |= bool(terminations.any())
        obs = next_obs
    envs.close()
    assert seen_truncation and seen_termination and (rb.filled == capacity).all()

    env_idx, slot_idx = np.meshgrid(np.arange(num_envs), np.arange(capacity), indexing="ij")
    env_idx, slot_idx = env_idx.ravel(), slot_idx.ravel()
    ok = rb.sampleable(env_idx, slot_idx)
    assert ok.sum() > 0.8 * capacity * num_envs
    for e, slot in zip(env_idx[ok], slot_idx[ok]):
        true_obs, action, reward, true_next, terminated = truth[(e, slot)]
        assert np.array_equal(rb.stacks(np.array([e]), np.array([slot]))[0], true_obs)
        assert np.array_equal(rb.stacks(np.array([e]), np.array([(slot + 1) % capacity]))[0], true_next)
        assert rb.actions[e, slot] == action and rb.rewards[e, slot] == reward and rb.dones[e, slot] == terminated

    np.random.seed(1)
    b_obs, b_actions, _, b_next_obs, _ = rb.sample(64)
    assert b_obs.shape == b_next_obs.shape == (64, 4, 84, 84) and b_obs.dtype == torch.uint8


@pytest.mark.parametrize("name", ["dqn_atari", "c51_atari"])
def test_memory_estimate_and_refusal(name):
    module = load_script(name)
    assert module.SLOT_BYTES == 84 * 84 + 18  # a uint8 frame, an int64 action, float32 reward and done, an int8 age, a flag
    rb = module.ReplayBuffer(1000, 1, (84, 84), 4, torch.device("cpu"))
    assert sum(a.nbytes for a in vars(rb).values() if isinstance(a, np.ndarray) and a.shape[:2] == (1, 1000)) == 1000 * 7074
    env = gym.make("BreakoutNoFrameskip-v4")
    error = module.validation_error(module.Args(), env)  # 1M frames: 6.6 GiB
    assert error is None or "more than this machine's memory; lower --buffer-size" in error
    error = module.validation_error(module.Args(buffer_size=10**12), env)  # 6.4 PiB
    assert error == "the replay buffer needs 6588175.9 GiB, more than this machine's memory; lower --buffer-size"
    env.close()
