"""rainbow_atari.py's pieces against values worked out by hand: n-step returns across episode ends,
the sum tree, importance weights, the categorical projection with per-sample discounts, noisy
layers, and the prioritised n-step frame memory, on hand-built episodes and on a real game."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cleanrl_utils.checkpoint import read
from conftest import check_checkpoint_and_resume, check_warns_and_runs, load_script, run_script


@pytest.fixture(scope="module")
def rainbow():
    return load_script("rainbow_atari")


# ---------------------------------------------------------------- n-step returns


def test_n_step_returns_stop_at_a_termination_and_a_truncation(rainbow):
    # transitions 0-2 form an episode that terminates at 2; 3-4 one truncated at 4; 5 starts another
    rewards = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    terminations = [False, False, True, False, False, False]
    truncations = [False, False, False, False, True, False]
    returns, steps, dones = rainbow.n_step_return(rewards, terminations, truncations, 0.5, 3)
    # t=0: 1 + .5*2 + .25*3 (the termination is the window's third step); t=1: 2 + .5*3; t=2: 3
    # t=3: 4 + .5*5 (truncated: k=2, no termination); t=4: 5; t=5: 6 (only one step known yet)
    assert returns.tolist() == pytest.approx([2.75, 3.5, 3.0, 6.5, 5.0, 6.0])
    assert steps.tolist() == [3, 2, 1, 2, 1, 1]
    assert dones.tolist() == [True, True, True, False, False, False]


def test_n_step_returns_of_full_windows_and_of_one_step(rainbow):
    returns, steps, dones = rainbow.n_step_return([1.0, 1.0, 1.0, 1.0], [False] * 4, [False] * 4, 0.9, 3)
    assert returns[:2].tolist() == pytest.approx([2.71, 2.71])  # 1 + 0.9 + 0.81
    assert steps.tolist() == [3, 3, 2, 1]
    assert not dones.any()
    returns, steps, dones = rainbow.n_step_return([1.0, -1.0, 0.5], [False, True, False], [False] * 3, 0.99, 1)
    assert returns.tolist() == [1.0, -1.0, 0.5] and steps.tolist() == [1, 1, 1]
    assert dones.tolist() == [False, True, False]


# ---------------------------------------------------------------- sum tree


def test_sum_tree_totals_and_prefix_sums(rainbow):
    tree = rainbow.SumTree(5)  # 8 leaves, the last three never used
    tree.update([0, 1, 2, 3, 4], [1.0, 0.0, 3.0, 0.0, 6.0])
    assert tree.total() == 10.0
    # item i covers [sum of the ones before, that + p_i); zero items cover nothing
    values = [0.0, 0.999, 1.0, 3.999, 4.0, 9.999]
    assert tree.find(values).tolist() == [0, 0, 2, 2, 4, 4]
    # a value at (or, by rounding, past) the total still ends on a non-zero item
    assert tree.find([10.0, 10.5]).tolist() == [4, 4]
    tree.update([4], [0.0])
    assert tree.total() == 4.0 and tree.find([4.0, 3.5, 0.5]).tolist() == [2, 2, 0]
    assert tree.get([0, 2, 4]).tolist() == [1.0, 3.0, 0.0]


def test_sum_tree_inner_nodes_stay_exact_sums(rainbow):
    rng = np.random.default_rng(0)
    tree = rainbow.SumTree(1000)
    for _ in range(200):
        idx = rng.integers(0, 1000, size=rng.integers(1, 40))
        tree.update(idx, rng.random(len(idx)) * (rng.random(len(idx)) < 0.7))
    inner = np.arange(1, tree.capacity)
    assert np.array_equal(tree.tree[inner], tree.tree[2 * inner] + tree.tree[2 * inner + 1])
    assert tree.total() == pytest.approx(tree.tree[tree.capacity :].sum(), rel=1e-12)


def test_sum_tree_never_draws_zero_priorities_and_draws_in_proportion(rainbow):
    tree = rainbow.SumTree(6)
    tree.update(np.arange(6), [1.0, 2.0, 0.0, 7.0, 0.0, 0.0])
    rng = np.random.default_rng(1)
    drawn = tree.find(rng.random(100_000) * tree.total())
    counts = np.bincount(drawn, minlength=8) / len(drawn)
    assert counts[[2, 4, 5, 6, 7]].sum() == 0
    assert counts[:4] == pytest.approx([0.1, 0.2, 0.0, 0.7], abs=0.01)
    # tiny priorities next to huge ones are still reachable, and zeros still are not
    tree.update([0, 1, 3], [1e-12, 1e12, 0.0])
    drawn = tree.find(np.linspace(0, tree.total(), 1001))
    assert set(drawn.tolist()) <= {0, 1}


def test_importance_weights_and_beta_schedule(rainbow):
    # (4 p)^-β / max: p = [.5, .25, .125] gives 4p = [2, 1, .5]
    assert rainbow.importance_weights([0.5, 0.25, 0.125], 4, 0.5) == pytest.approx([2**-0.5 / 2**0.5, 1 / 2**0.5, 1.0])
    assert rainbow.importance_weights([0.5, 0.25, 0.125], 4, 1.0) == pytest.approx([0.25, 0.5, 1.0])
    assert rainbow.importance_weights([0.5, 0.25, 0.125], 4, 0.0) == pytest.approx([1.0, 1.0, 1.0])
    assert [rainbow.beta_schedule(0.4, 100, t) for t in (0, 50, 100, 150)] == pytest.approx([0.4, 0.7, 1.0, 1.0])


# ---------------------------------------------------------------- categorical projection

ATOMS = torch.tensor([-2.0, -1.0, 0.0, 1.0, 2.0])


def one_hot(j, n=5):
    pmf = torch.zeros(1, n)
    pmf[0, j] = 1.0
    return pmf


def projected(rainbow, next_pmfs, ret, discount, done=0.0):
    target = rainbow.project_distribution(
        next_pmfs, torch.tensor([ret]), torch.tensor([done]), torch.tensor([discount]), ATOMS
    )
    return target[0].tolist()


def test_projection_exact_landing_and_ends(rainbow):
    # 1 + 1 * 0 = 1 lands on z_3; 0 + 1 * 2 lands on v_max and 0 + 1 * -2 on v_min
    assert projected(rainbow, one_hot(2), 1.0, 1.0) == pytest.approx([0, 0, 0, 1, 0])
    assert projected(rainbow, one_hot(4), 0.0, 1.0) == pytest.approx([0, 0, 0, 0, 1])
    assert projected(rainbow, one_hot(0), 0.0, 1.0) == pytest.approx([1, 0, 0, 0, 0])
    # a uniform pmf shifted one atom right: the top two atoms both end on v_max
    assert projected(rainbow, torch.full((1, 5), 0.2), 1.0, 1.0) == pytest.approx([0, 0.2, 0.2, 0.2, 0.4])


def test_projection_uses_the_per_sample_discount(rainbow):
    # γ^k = 0.25: 0.3 + 0.25 * 2 = 0.8 -> 0.2 to z=0, 0.8 to z=1; 0.3 + 0.25 * -2 = -0.2 -> 0.2 to -1, 0.8 to 0
    assert projected(rainbow, one_hot(4), 0.3, 0.25) == pytest.approx([0, 0, 0.2, 0.8, 0])
    assert projected(rainbow, one_hot(0), 0.3, 0.25) == pytest.approx([0, 0.2, 0.8, 0, 0])
    # two rows with different discounts in one batch
    target = rainbow.project_distribution(
        torch.cat([one_hot(4), one_hot(4)]),
        torch.tensor([0.0, 0.0]),
        torch.tensor([0.0, 0.0]),
        torch.tensor([1.0, 0.5]),
        ATOMS,
    )
    assert target.tolist() == [pytest.approx([0, 0, 0, 0, 1]), pytest.approx([0, 0, 0, 1, 0])]


def test_projection_clamps_outside_the_support(rainbow):
    uniform = torch.full((1, 5), 0.2)
    assert projected(rainbow, uniform, 5.0, 0.9) == pytest.approx([0, 0, 0, 0, 1])
    assert projected(rainbow, uniform, -5.0, 0.9) == pytest.approx([1, 0, 0, 0, 0])
    # 1.5 + z: [-0.5, 0.5, 1.5, 2.5, 3.5], the last two clamp to 2
    assert projected(rainbow, uniform, 1.5, 1.0) == pytest.approx([0, 0.1, 0.2, 0.2, 0.5])


def test_terminal_rows_ignore_the_next_distribution(rainbow):
    for next_pmfs in (one_hot(0), one_hot(4), torch.full((1, 5), 0.2)):
        assert projected(rainbow, next_pmfs, 0.5, 0.99, done=1.0) == pytest.approx([0, 0, 0.5, 0.5, 0])
        assert projected(rainbow, next_pmfs, 1.0, 0.99, done=1.0) == pytest.approx([0, 0, 0, 1, 0])
        assert projected(rainbow, next_pmfs, 9.0, 0.99, done=1.0) == pytest.approx([0, 0, 0, 0, 1])


def test_projected_rows_sum_to_one(rainbow):
    torch.manual_seed(0)
    atoms = torch.linspace(-10, 10, 51)
    next_pmfs = torch.softmax(torch.randn(256, 51) * 3, dim=1)
    returns = torch.randn(256) * 8
    returns[:10] = torch.arange(-5, 5).float()  # whole numbers: positions exactly on atoms
    dones = (torch.rand(256) < 0.3).float()
    discounts = 0.99 ** torch.randint(1, 4, (256,)).float()
    target = rainbow.project_distribution(next_pmfs, returns, dones, discounts, atoms)
    assert (target >= 0).all()
    assert target.sum(1) == pytest.approx(torch.ones(256), abs=1e-5)
    # the projection keeps the mean wherever nothing was clamped
    inside = (returns.abs() + discounts * 10 * (1 - dones)) <= 10
    assert ((target * atoms).sum(1)[inside]).tolist() == pytest.approx(
        (returns + discounts * (1 - dones) * (next_pmfs * atoms).sum(1))[inside].tolist(), abs=1e-4
    )


# ---------------------------------------------------------------- noisy layers and the network


def test_noisy_linear_zero_noise_is_the_mean_layer(rainbow):
    torch.manual_seed(0)
    layer = rainbow.NoisyLinear(16, 8, std_init=0.5)
    bound = 1 / math.sqrt(16)
    assert layer.weight_mu.abs().max() <= bound and layer.bias_mu.abs().max() <= bound
    assert torch.all(layer.weight_sigma == 0.5 * bound) and torch.all(layer.bias_sigma == 0.5 * bound)
    x = torch.randn(5, 16)
    layer.epsilon_in.zero_()
    layer.epsilon_out.zero_()
    assert torch.allclose(layer(x), F.linear(x, layer.weight_mu, layer.bias_mu))


def test_noisy_linear_factorised_noise(rainbow):
    torch.manual_seed(0)
    layer = rainbow.NoisyLinear(16, 8)
    x = torch.randn(5, 16)
    with torch.no_grad():
        before = layer(x)
        assert torch.equal(layer(x), before)  # fixed until reset
        layer.reset_noise()
        after = layer(x)
    assert not torch.allclose(before, after)
    # the noise buffers hold f(ε) = sign(ε)√|ε| of one vector per side: ε_w = ε_out ε_inᵀ, ε_b = ε_out
    weight = layer.weight_mu + layer.weight_sigma * torch.outer(layer.epsilon_out, layer.epsilon_in)
    bias = layer.bias_mu + layer.bias_sigma * layer.epsilon_out
    assert torch.allclose(after, F.linear(x, weight, bias), atol=1e-6)
    assert layer.epsilon_in.shape == (16,) and layer.epsilon_out.shape == (8,)
    # the scaled noise has E|f(ε)|² = E|ε| = √(2/π)
    big = rainbow.NoisyLinear(100_000, 1)
    assert (big.epsilon_in**2).mean().item() == pytest.approx(math.sqrt(2 / math.pi), abs=0.01)


def test_q_network_outputs_and_noise(rainbow):
    torch.manual_seed(0)
    q_network = rainbow.QNetwork(4, n_atoms=11, v_min=-5, v_max=5)
    obs = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        log_pmfs = q_network(obs)
        assert log_pmfs.shape == (3, 4, 11)
        assert log_pmfs.exp().sum(2) == pytest.approx(torch.ones(3, 4), abs=1e-5)
        actions, q_values = q_network.get_action(obs)
        assert torch.allclose(q_values, (log_pmfs.exp() * torch.linspace(-5, 5, 11)).sum(2), atol=1e-5)
        assert torch.equal(actions, q_values.argmax(1))
        q_network.reset_noise()
        assert not torch.allclose(q_network(obs), log_pmfs)
    # the noise sample is part of what a saved model holds
    assert {"value.0.epsilon_in", "advantage.2.epsilon_out", "atoms"} <= set(q_network.state_dict())


# ---------------------------------------------------------------- the prioritised n-step memory


def frames_of(values):
    """Observations (num_envs=1, stack 4, 1, 1) whose frames carry the given numbers."""
    return np.array(values, dtype=np.uint8).reshape(1, 4, 1, 1)


def small_buffer(rainbow, size=30, n_step=3, gamma=0.5, alpha=0.5):
    return rainbow.ReplayBuffer(size, 1, (1, 1), 4, torch.device("cpu"), n_step, gamma, alpha)


def test_hand_built_episodes_give_n_step_transitions(rainbow):
    rb = small_buffer(rainbow)
    stack = lambda slot: rb.stacks(np.array([0]), np.array([slot]))[0].ravel().tolist()  # noqa: E731
    ok = lambda: rb.sampleable(np.zeros(9, dtype=np.int64), np.arange(9)).tolist()  # noqa: E731
    rb.start(frames_of([1, 1, 1, 1]))
    # episode A: frames 1..4, then truncated after the fourth action with final frame 5
    rb.add([0], [1.0], [False], [False], frames_of([1, 1, 1, 2]), None)
    rb.add([1], [2.0], [False], [False], frames_of([1, 1, 2, 3]), None)
    assert not any(ok()) and rb.tree.total() == 0  # no window of 3 known yet
    rb.add([2], [4.0], [False], [False], frames_of([1, 2, 3, 4]), None)
    assert ok() == [True] + [False] * 8
    rb.add([3], [8.0], [False], [True], frames_of([20] * 4), [frames_of([2, 3, 4, 5])[0]])
    # episode B starts at frame 20 and terminates after its second action, final frame 22
    rb.add([0], [1.0], [False], [False], frames_of([20, 20, 20, 21]), None)
    rb.add([1], [1.0], [True], [False], frames_of([30] * 4), [frames_of([20, 20, 21, 22])[0]])

    # slots: 0-3 starts of A, 4 its final frame, 5-6 starts of B, 7 its final frame, 8 C's first frame
    assert ok() == [True, True, True, True, False, True, True, False, False]
    sampleable = [0, 1, 2, 3, 5, 6]
    # 0: 1 + .5*2 + .25*4; 1: 2 + .5*4 + .25*8; 2: 4 + .5*8 (k=2, truncated); 3: 8; 5: 1 + .5*1; 6: 1
    assert rb.returns[0, sampleable].tolist() == [3.0, 6.0, 8.0, 8.0, 1.5, 1.0]
    assert rb.steps[0, sampleable].tolist() == [3, 3, 2, 1, 2, 1]
    assert rb.dones[0, sampleable].tolist() == [0, 0, 0, 0, 1, 1]
    assert [stack(s + rb.steps[0, s]) for s in sampleable] == [
        [1, 2, 3, 4],
        [2, 3, 4, 5],  # the truncated episode's true final observation
        [2, 3, 4, 5],
        [2, 3, 4, 5],
        [20, 20, 21, 22],
        [20, 20, 21, 22],
    ]
    assert stack(5) == [20, 20, 20, 20]  # padded with B's first frame, never A's frames
    # complete transitions enter at the maximal priority (1 at first, to the power α), others at 0
    assert rb.tree.get(np.arange(9)).tolist() == [1, 1, 1, 1, 0, 1, 1, 0, 0]
    assert rb.size == 6

    np.random.seed(0)
    obs, actions, returns, next_obs, dones, discounts, weights, leaves = rb.sample(600, 0.4)
    assert set(leaves.tolist()) == set(sampleable)
    for o, a, g, n, d, disc, leaf in zip(obs, actions, returns, next_obs, dones, discounts, leaves):
        assert o.ravel().tolist() == stack(leaf) and n.ravel().tolist() == stack(leaf + rb.steps[0, leaf])
        assert (a.item(), g.item(), d.item()) == (rb.actions[0, leaf], rb.returns[0, leaf], rb.dones[0, leaf])
        assert disc.item() == pytest.approx(0.5 ** rb.steps[0, leaf])
    assert torch.all(weights == 1.0)  # equal priorities: equal weights


def test_a_resumed_memory_ends_its_open_windows_as_at_a_time_limit(rainbow):
    # --resume puts the saved memory back and the envs start new episodes: the windows still open end where the run
    # stopped, bootstrapping from the last frame stored, and none reaches into the new episode
    rb = small_buffer(rainbow)
    stack = lambda slot: rb.stacks(np.array([0]), np.array([slot]))[0].ravel().tolist()  # noqa: E731
    ok = lambda: rb.sampleable(np.zeros(8, dtype=np.int64), np.arange(8)).tolist()  # noqa: E731
    rb.start(frames_of([1, 1, 1, 1]))
    for t, reward in enumerate([1.0, 2.0, 4.0, 8.0]):  # frames 1..5 in slots 0..4
        rb.add([t], [reward], [False], [False], frames_of([max(1, t + 2 - k) for k in (3, 2, 1, 0)]), None)
    assert ok() == [True, True, False, False, False, False, False, False] and rb.pending[0] == 2
    rb.start(frames_of([20] * 4))  # what the resumed run does after its envs.reset
    assert ok() == [True, True, True, True, False, False, False, False] and rb.pending[0] == 0 and rb.size == 4
    # 0: 1 + .5*2 + .25*4, 1: 2 + .5*4 + .25*8; then 2: 4 + .5*8 over k=2 steps and 3: 8 over one, which bootstrap
    # from slot 4 (frame 5, the last one stored) with γ^k
    assert rb.returns[0, :4].tolist() == [3.0, 6.0, 8.0, 8.0] and rb.steps[0, :4].tolist() == [3, 3, 2, 1]
    assert rb.dones[0, :4].tolist() == [0, 0, 0, 0] and stack(4) == [2, 3, 4, 5]
    assert rb.tree.get(np.arange(6)).tolist() == [1, 1, 1, 1, 0, 0]
    assert stack(5) == [20, 20, 20, 20]  # the new episode's first frame, padded with itself
    rb.add([0], [1.0], [False], [False], frames_of([20, 20, 20, 21]), None)
    rb.add([0], [1.0], [True], [False], frames_of([30] * 4), [frames_of([20, 20, 21, 22])[0]])
    assert ok() == [True, True, True, True, False, True, True, False]  # its windows start at slot 5
    assert rb.returns[0, 5:7].tolist() == [1.5, 1.0] and rb.dones[0, 5:7].tolist() == [1, 1]


def test_priorities_update_and_new_transitions_get_the_maximum(rainbow):
    rb = small_buffer(rainbow, alpha=0.5)
    rb.start(frames_of([0] * 4))
    for t in range(1, 7):
        rb.add([0], [0.0], [False], [False], frames_of([t] * 4), None)
    assert rb.sampleable(np.zeros(4, dtype=np.int64), np.arange(4)).tolist() == [True, True, True, True]
    rb.update_priorities(np.array([0, 1, 2, 3]), np.array([3.0, 0.0, 0.25, 1.0]), 1e-6)
    expected = np.sqrt([3.0 + 1e-6, 1e-6, 0.25 + 1e-6, 1.0 + 1e-6])
    assert rb.tree.get(np.arange(4)) == pytest.approx(expected)
    assert rb.max_priority == pytest.approx(3.0 + 1e-6)
    rb.add([0], [0.0], [False], [False], frames_of([7] * 4), None)  # completes slot 4
    assert rb.tree.get([4])[0] == pytest.approx(math.sqrt(3.0 + 1e-6))

    # drawn in proportion to priority, weighted by (N P)^-β / max
    np.random.seed(0)
    drawn = np.concatenate([rb.sample(32, 1.0)[-1] for _ in range(2000)])
    p = rb.tree.get(np.arange(5)) / rb.tree.total()
    assert np.bincount(drawn, minlength=5) / len(drawn) == pytest.approx(p, abs=0.01)
    *_, weights, leaves = rb.sample(32, 0.5)
    expected = (5 * rb.tree.get(leaves) / rb.tree.total()) ** -0.5
    assert weights.numpy() == pytest.approx(expected / expected.max(), rel=1e-5)


def test_a_wrapped_buffer_zeroes_the_priorities_of_overwritten_and_guarded_slots(rainbow):
    rb = small_buffer(rainbow, size=14, n_step=3)
    rb.start(frames_of([0] * 4))
    for t in range(1, 41):  # one long episode: frame t at slot t % 14
        rb.add([0], [1.0], [False], [False], frames_of([t] * 4), None)
        rb.update_priorities(np.array([t % 14]), np.array([float(t)]), 1e-6)  # on some, maybe gone, slot
    newest = rb.newest[0]
    ok = rb.sampleable(np.zeros(14, dtype=np.int64), np.arange(14))
    # not sampleable: the newest (no action yet), the two before it (windows still open), and the
    # three after it (the oldest, whose stacks would reach into the newest frames)
    not_ok = {(newest + d) % 14 for d in (-2, -1, 0, 1, 2, 3)}
    assert {int(s) for s in np.nonzero(~ok)[0]} == not_ok
    assert ((rb.tree.get(np.arange(14)) > 0) == ok).all() and rb.size == ok.sum() == 8
    np.random.seed(0)
    obs, _, returns, next_obs, _, _, _, leaves = rb.sample(500, 1.0)
    assert set(leaves.tolist()) <= set(np.nonzero(ok)[0].tolist())
    for o, n in zip(obs.reshape(500, 4).int(), next_obs.reshape(500, 4).int()):
        assert torch.all(o.diff() == 1) and torch.all(n - o == 3)  # one time, three steps on
    assert torch.all(returns == 1.75)


def test_prioritised_n_step_memory_matches_a_real_game(rainbow):
    num_envs, capacity, steps, n, gamma = 2, 120, 400, 3, 0.9
    # a short time limit (150 frames, 37 agent steps) adds truncations to Breakout's life losses (terminations)
    if "BreakoutShortNoFrameskip-v4" not in gym.registry:
        spec = gym.spec("BreakoutNoFrameskip-v4")
        gym.register("BreakoutShortNoFrameskip-v4", entry_point=spec.entry_point, kwargs=spec.kwargs, max_episode_steps=150)
    envs = rainbow.make_env("BreakoutShortNoFrameskip-v4", num_envs, False, "test")
    envs.action_space.seed(0)
    rb = rainbow.ReplayBuffer(num_envs * capacity, num_envs, (84, 84), 4, torch.device("cpu"), n, gamma, 0.5)
    obs, _ = envs.reset(seed=0)
    rb.start(obs)
    history = [[] for _ in range(num_envs)]  # per sub-env: (obs, action, reward, terminated, ended, true next obs)
    where = {}  # (env, slot) -> index into history of the transition that starts there now
    for _ in range(steps):
        actions = envs.action_space.sample()
        starts = rb.newest.copy()
        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        rb.add(actions, rewards, terminations, truncations, next_obs, infos.get("final_obs"))
        for e in range(num_envs):
            ended = bool(terminations[e] or truncations[e])
            for k in range(1, 3 if ended else 2):  # slots this step's frames overwrote
                where.pop((e, (starts[e] + k) % capacity), None)
            real_next = infos["final_obs"][e] if ended else next_obs[e]
            where[(e, starts[e])] = len(history[e])
            history[e].append((obs[e], actions[e], rewards[e], bool(terminations[e]), ended, real_next))
        obs = next_obs
    envs.close()

    env_idx, slot_idx = np.meshgrid(np.arange(num_envs), np.arange(capacity), indexing="ij")
    env_idx, slot_idx = env_idx.ravel(), slot_idx.ravel()
    ok = rb.sampleable(env_idx, slot_idx)
    assert ok.sum() > 0.75 * capacity * num_envs
    assert ((rb.tree.get(env_idx * capacity + slot_idx) > 0) == ok).all() and rb.size == ok.sum()
    kinds = set()
    for e, slot in zip(env_idx[ok], slot_idx[ok]):
        t = where[(e, slot)]
        true_return, k = 0.0, 0
        for i in range(n):  # the window, by hand from the env's own transitions
            _, _, reward, terminated, ended, real_next = history[e][t + i]
            true_return += gamma**i * reward
            k = i + 1
            if ended:
                break
        assert np.array_equal(rb.stacks(np.array([e]), np.array([slot]))[0], history[e][t][0])
        assert rb.actions[e, slot] == history[e][t][1]
        assert rb.returns[e, slot] == pytest.approx(true_return, abs=1e-6)
        assert rb.steps[e, slot] == k and rb.dones[e, slot] == terminated
        assert np.array_equal(rb.stacks(np.array([e]), np.array([(slot + k) % capacity]))[0], real_next)
        kinds.add((k < n, bool(terminated), ended))
    # windows cut short by a termination and by a truncation, and full ones, all checked
    assert {(True, True, True), (True, False, True), (False, False, False)} <= kinds

    np.random.seed(1)
    b_obs, _, _, b_next_obs, _, _, b_weights, leaves = rb.sample(64, 0.4)
    assert b_obs.shape == b_next_obs.shape == (64, 4, 84, 84) and b_obs.dtype == torch.uint8
    assert ok[leaves].all() and b_weights.max() == 1.0


@pytest.mark.parametrize("n_step", [1, 3, 5])
def test_the_smallest_memory_allowed_samples_only_intact_transitions(rainbow, n_step):
    # --n-step + 5 frames per sub-env (the validation's floor): random episodes of a few steps, every sampleable
    # slot checked against the true stacks, n-step return and bootstrap observation after every step
    rng, capacity, gamma = np.random.default_rng(0), n_step + 5, 0.5
    rb = small_buffer(rainbow, size=capacity, n_step=n_step, gamma=gamma)
    stack = lambda episode: ([episode[0]] * 4 + episode)[-4:]  # noqa: E731
    episode, frame, history = [1], 2, []  # history: (slot, obs, reward, terminated, ended, true next obs)
    rb.start(frames_of(stack(episode)))
    for _ in range(300):
        slot, obs, reward = rb.newest[0], stack(episode), float(rng.integers(0, 3))
        ended = rng.random() < 0.2
        terminated = ended and rng.random() < 0.5
        episode, frame = episode + [frame], frame % 255 + 1  # frame numbers fit in uint8 and repeat far apart
        final = stack(episode)
        if ended:
            episode, frame = [frame], frame % 255 + 1
        rb.add([0], [reward], [terminated], [ended and not terminated], frames_of(stack(episode)), [frames_of(final)[0]])
        history.append((slot, obs, reward, terminated, ended, final))
        latest = {h[0]: t for t, h in enumerate(history)}
        ok = rb.sampleable(np.zeros(capacity, dtype=np.int64), np.arange(capacity))
        for slot in np.nonzero(ok)[0]:
            t = latest[slot]
            assert rb.stacks(np.array([0]), np.array([slot]))[0].ravel().tolist() == history[t][1]
            true_return, k = 0.0, 0
            while k < n_step:
                _, _, reward, terminated, ended, final = history[t + k]
                true_return, k = true_return + gamma**k * reward, k + 1
                if ended:
                    break
            assert (rb.returns[0, slot], rb.steps[0, slot], rb.dones[0, slot]) == (true_return, k, terminated)
            bootstrap = final if ended else history[t + k][1] if t + k < len(history) else None
            if bootstrap is not None:
                assert rb.stacks(np.array([0]), np.array([(slot + k) % capacity]))[0].ravel().tolist() == bootstrap
        assert ((rb.tree.get(np.arange(capacity)) > 0) == ok).all()


# ---------------------------------------------------------------- validation and memory


class Args:
    def __init__(self, **changes):
        defaults = {name: field.default for name, field in load_script("rainbow_atari").Args.__dataclass_fields__.items()}
        self.__dict__.update(defaults | {"capture_video": False} | changes)


@pytest.fixture(scope="module")
def breakout():
    env = gym.make("BreakoutNoFrameskip-v4")
    yield env
    env.close()


SIZES = (
    "--total-timesteps, --num-envs, --buffer-size, --batch-size, --train-frequency, --target-network-frequency, --n-step "
    "must be at least 1"
)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"n_step": 0}, SIZES),
        ({"num_envs": 0}, SIZES),
        ({"n_atoms": 1}, "--n-atoms must be at least 2 and --v-min below --v-max"),
        ({"v_min": 10.0, "v_max": 10.0}, "--n-atoms must be at least 2 and --v-min below --v-max"),
        ({"prioritized_replay_beta": 1.5}, "--gamma and --prioritized-replay-beta must be in [0, 1]"),
        ({"learning_starts": 5, "num_envs": 2}, "--learning-starts must be at least --n-step x --num-envs = 6"),
        # 7 frames per sub-env cannot hold a 3-step window, the stacks around it and an episode change
        ({"buffer_size": 14, "num_envs": 2, "batch_size": 8}, "--buffer-size must hold --n-step + 5 = 8 frames per sub-env"),
        ({"buffer_size": 10**12}, "more than this machine's memory; lower --buffer-size"),
    ],
)
def test_validation_messages(rainbow, breakout, changes, message):
    assert message in rainbow.validation_error(Args(**changes), breakout)


def test_defaults_validate(rainbow, breakout):
    assert rainbow.validation_error(Args(), breakout) is None
    # the smallest memory the checks let through still holds every complete transition intact: CleanRL's smoke test
    assert rainbow.validation_error(Args(buffer_size=10, learning_starts=10), breakout) is None


def test_bad_input_exits_2_before_anything_is_made(workdir):
    result = run_script("rainbow_atari.py", "--n-step", "0", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"rainbow_atari.py: {SIZES}"]
    assert not (workdir / "runs").exists()


def test_a_run_without_a_gradient_step_runs_and_warns(workdir):
    flags = ["--total-timesteps", 20, "--learning-starts", 20, "--buffer-size", 100]
    result = run_script("rainbow_atari.py", *flags, cwd=workdir)
    check_warns_and_runs(result, "rainbow_atari.py", "--learning-starts 20")


@pytest.mark.parametrize("save_model", [[], ["--save-model"]])
def test_cleanrls_own_smoke_commands_run(save_model, workdir):
    # as upstream's tests/test_atari_gymnasium.py runs them: a 10-frame memory, learning from step 11
    flags = ["--learning-starts", 10, "--total-timesteps", 16, "--buffer-size", 10, "--batch-size", 4]
    result = run_script("rainbow_atari.py", *save_model, *flags, cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "global_step=16" in result.stdout


def test_a_checkpoint_and_a_resume(workdir):
    # the smoke command's budget (a gradient step costs ~0.2 s): a checkpoint at step 8 and at the end (step 16), whose
    # memory, with its n-step windows still open, goes on to step 32
    flags = ["--learning-starts", 10, "--total-timesteps", 16, "--buffer-size", 10, "--batch-size", 4]
    run_dir = check_checkpoint_and_resume("rainbow_atari.py", flags, 8, workdir)
    saved = read(str(run_dir / "checkpoint.pt"), "rainbow_atari.py")
    assert saved["global_step"] == 32 and saved["state"]["num_updates"][1] == 6  # every 4 steps past 10: 2, then 4
