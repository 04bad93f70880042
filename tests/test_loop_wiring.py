"""Truncation and termination through each script's own loop (issue 32).

Each script runs itself on a stand-in env (tests/standin_envs.py: episodes that terminate or hit a time limit at
known steps, observations that say their step), driven by tests/loop_probe.py: classic control and MuJoCo-style
scripts on a 5-step time limit, the Atari scripts on an ale-py game behind their real wrappers, the envpool scripts
(Atari, Procgen, and the XLA ones that step inside jit) on pools with NEXT_STEP reset steps, the PettingZoo
script on a two-player game behind SuperSuit's wrappers, and the Playground script on a JAX env whose calls of its
jitted step are recorded. Every script in cleanrl/ has a check here. The checks:
- on-policy: the first rollout's advantages and returns, against GAE computed here by hand from what the env gave
  the loop and the critic's values. A truncated step must bootstrap from V(its true final observation), a
  terminated one from 0, and neither carries the next episode's advantage back;
- off-policy: transitions drawn from the replay memory at the end of a short run. `next_obs` must be the step after
  `obs` in the same episode (at a time limit, the true final observation), `done` the termination only, and the
  reward the one the env gave for that step The targets are computed here from V(s') evaluated again from the
  target networks on the batch's `next_obs`, so a target network fed anything else shows;
- the networks (or JAX parameter trees) fixed through a rollout and moved by the first update (on-policy), and
  each network and target network moved exactly at its cadence (off-policy).
"""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from standin_envs import (
    ATARI_TIME_LIMIT,
    GAME_OVER_AT,
    LIFE_LOST_AT,
    PROCGEN_ENDS,
    PZ_GAME_OVER_AT,
    PZ_MAX_CYCLES,
    TERMINATE_AT,
    TIME_LIMIT,
    decode,
    decode_atari,
    decode_playground,
    decode_procgen,
    reward,
    terminates,
)

from conftest import run_script

REPO = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).with_name("loop_probe.py")
GAMMA, LAMBDA = 0.99, 0.95


CHECKSUM = "float(sum(p.double().abs().sum() for p in {}.parameters()))"


def probe(
    tmp_path,
    script,
    args,
    stop_at=None,
    keep=(),
    value=None,
    sample=None,
    watch=None,
    envpool=False,
    values_by=None,
    moves=None,
    go_on=False,
    keep_at_end=(),
    checksum=CHECKSUM,
    pettingzoo=False,
    playground=False,
):
    """Runs tests/loop_probe.py on `script`. With `moves` (a network of an on-policy script), the run goes on past
    `stop_at` (the first rollout's end) and the network must stay fixed through each rollout and change at the
    update between the first two (`checksum`: its expression, of a torch module or, JAX_CHECKSUM, a pytree). With
    `go_on` or `keep_at_end`, the run goes on past `stop_at` too ("all_steps": the whole run)."""
    watch = (watch or {}) | ({"moves": checksum.format(moves)} if moves else {})
    request = {"script": str(REPO / "cleanrl" / script), "args": args, "stop_at": stop_at, "keep": list(keep)}
    request |= {"value": value, "sample": sample, "watch": watch, "envpool": envpool, "values_by": values_by}
    request |= {"go_on": go_on or moves is not None or bool(keep_at_end), "keep_at_end": list(keep_at_end)}
    request |= {"pettingzoo": pettingzoo, "playground": playground}
    (tmp_path / "request.json").write_text(json.dumps(request))
    done = run_script(PROBE, "request.json", "out.pkl", cwd=tmp_path)  # as `python tests/loop_probe.py ...` would
    assert done.returncode == 0, done.stderr[-3000:]
    result = pickle.loads((tmp_path / "out.pkl").read_bytes())
    if moves:
        rollout, series = len(result["steps"]), [s["watch"]["moves"] for s in result["all_steps"]]
        assert len(series) >= 2 * rollout, "the run ended before a second rollout"
        assert len(set(series[:rollout])) == 1 and len(set(series[rollout : 2 * rollout])) == 1
        assert series[rollout] != series[0], f"the first update left {moves} as it was"
    return result


def check_episodes(result):
    """The stand-in played its pattern: each step's termination and truncation where its episode says, and the
    loop went on with the next episode's first step. Read from the stand-in's own info (what a script's wrappers
    may normalise, the observations and rewards, is what the loop used and what the checks below compare)."""
    ids = [result["reset_ids"]] + [s["ids"] for s in result["steps"]]
    for k, s in enumerate(result["steps"]):
        episode, t = ids[k][:, 0].astype(int), ids[k][:, 1].astype(int)
        for i in range(len(episode)):
            assert s["terminations"][i] == terminates(episode[i], t[i] + 1)
            assert s["truncations"][i] == (not s["terminations"][i] and t[i] + 1 == TIME_LIMIT)
            if s["terminations"][i] or s["truncations"][i]:
                final = s["final_ids"][i]
                assert (final[0], final[1], final[2]) == (episode[i], t[i] + 1, pytest.approx(reward(t[i])))
                assert tuple(ids[k + 1][i, :2]) == (episode[i] + 1, 0)  # the loop goes on with the next episode
            else:
                assert (ids[k + 1][i, 0], ids[k + 1][i, 1]) == (episode[i], t[i] + 1)
                assert ids[k + 1][i, 2] == pytest.approx(reward(t[i]))
    assert any(s["terminations"].any() for s in result["steps"]) and any(s["truncations"].any() for s in result["steps"])
    if len(ids[0]) >= 3:  # sub-envs 0 and 2 play in step: a final observation paired with the wrong env shows
        assert any(s["truncations"].sum() >= 2 for s in result["steps"]), "no step truncated two episodes at once"


def gae_by_hand(result, gamma=GAMMA, lam=LAMBDA):
    """Advantages (T, N) by the definition (Schulman et al. 2016, eq. 16), episode by episode: δ_t = r_t + γ V(s_t+1)
    - V(s_t) with V(s_t+1) = 0 past a termination and V(true final observation) past a time limit; A_t sums
    (γλ)^l δ_t+l up to the end of the episode or of the rollout (there V of the next observation bootstraps)."""
    steps, values = result["steps"], result["values"]["obs"]
    T, N = len(steps), values.shape[1]
    advantages = np.zeros((T, N))
    for i in range(N):
        after = 0.0
        for k in reversed(range(T)):
            s = steps[k]
            if s["terminations"][i]:
                next_value, after = 0.0, 0.0
            elif s["truncations"][i]:
                next_value, after = result["values"]["final"][(k, i)], 0.0
            else:
                next_value = values[k + 1, i]
            delta = s["rewards"][i] + gamma * next_value - values[k, i]
            advantages[k, i] = after = delta + gamma * lam * after
    return advantages, advantages + values[:T]


def check_by_hand(result, valid=None, kept="kept", rtol=1e-4, atol=1e-5, **by_hand):
    """Each `result[kept][name]` (T, N) against its hand computation in `by_hand`, where `valid` (T, N) holds. A
    mismatch names the last (step, env) that differs (earlier steps inherit a difference), how that step ended,
    and, on the stand-ins that report it, the (episode, t) of the observation it acted on."""
    ids = [result["reset_ids"]] + [s.get("ids", []) for s in result["steps"]]
    for name, expected in by_hand.items():
        actual = np.asarray(result[kept][name]).reshape(np.shape(expected))
        bad = ~np.isclose(actual, expected, rtol=rtol, atol=atol) & (True if valid is None else valid)
        if bad.any():
            k, i = np.argwhere(bad)[-1]
            s = result["steps"][k]
            how = "terminated" if s["terminations"][i] else "was truncated" if s["truncations"][i] else "went on"
            at = f" (episode {ids[k][i][0]:.0f}, t {ids[k][i][1]:.0f})" if np.size(ids[k]) else ""
            raise AssertionError(
                f"{name}[step {k}, env {i}]{at}, a step that {how}: {actual[k, i]:.6g}, by hand {expected[k, i]:.6g}"
                f" ({bad.sum()} of {bad.size} differ)"
            )


TORCH_VALUE = "lambda o: agent.get_value(torch.as_tensor(o, dtype=torch.float32)).flatten()"
ON_POLICY = {
    "ppo.py": ("StandinDiscrete-v0", []),
    "ppo_continuous_action.py": ("StandinContinuous-v0", ["--num-minibatches", "4"]),
    "rpo_continuous_action.py": ("StandinContinuous-v0", ["--num-minibatches", "4"]),
}
# three sub-envs, so that some steps end two episodes at once (see check_episodes); two rollouts
ON_POLICY_FLAGS = ["--num-envs", "3", "--num-steps", "16", "--total-timesteps", "96"]


@pytest.mark.parametrize("script", ON_POLICY)
def test_on_policy_advantages_bootstrap_a_time_limit_from_the_true_final_observation(script, tmp_path):
    env_id, extra = ON_POLICY[script]
    args = ["--env-id", env_id, *ON_POLICY_FLAGS, *extra]
    result = probe(tmp_path, script, args, stop_at="returns", keep=["advantages", "returns"], value=TORCH_VALUE, moves="agent")
    check_episodes(result)
    advantages, returns = gae_by_hand(result)
    check_by_hand(result, advantages=advantages, returns=returns)


def q_lambda_by_hand(result, gamma=GAMMA, lam=0.65):
    """Q(λ) returns (T, N) by the recursion (Peng and Williams 1996; PQN, Gallici et al. 2024):
    G_t = r_t + γ [λ G_t+1 + (1 − λ) max Q(s_t+1)], with G_t = r_t past a termination, r_t + γ max Q(true final
    observation) past a time limit, and r_t + γ max Q(s_T) at the rollout's last step."""
    steps, values = result["steps"], result["values"]["obs"]
    T, N = len(steps), values.shape[1]
    returns = np.zeros((T, N))
    for i in range(N):
        for k in reversed(range(T)):
            s = steps[k]
            if s["terminations"][i]:
                bootstrap = 0.0
            elif s["truncations"][i]:
                bootstrap = result["values"]["final"][(k, i)]
            elif k == T - 1:
                bootstrap = values[T, i]
            else:
                bootstrap = lam * returns[k + 1, i] + (1 - lam) * values[k + 1, i]
            returns[k, i] = s["rewards"][i] + gamma * bootstrap
    return returns


def test_pqn_q_lambda_returns_bootstrap_a_time_limit_from_the_true_final_observation(tmp_path):
    args = ["--env-id", "StandinDiscrete-v0", *ON_POLICY_FLAGS]
    value = "lambda o: q_network(torch.as_tensor(o, dtype=torch.float32)).max(dim=1).values"
    result = probe(
        tmp_path,
        "pqn.py",
        [*args, "--num-minibatches", "4"],
        stop_at="returns",
        keep=["returns"],
        value=value,
        moves="q_network",
    )
    check_episodes(result)
    check_by_hand(result, returns=q_lambda_by_hand(result))


BATCH = ["b_obs", "b_rewards", "b_next_obs", "b_dones"]
# per script: the env, its flags, the global its first target is bound to, and V(s') of the batch's next
# observations (before the (1 - done) bootstrap) evaluated here from the script's target networks on `b_next_obs`,
# so that a target network fed anything else shows. TD3's smoothing noise and SAC's sampled a' are the loop's; SAC's
# log π(a'|s') is recomputed from a' (u = atanh of the unscaled action, in float64) under the actor at s'.
TD3_ACTIONS = (
    "smoothed_target_actions(target_actor(b_next_obs), noise, args.policy_noise, args.noise_clip,"
    " target_actor.action_scale, low, high)"
)
SAC_LOG_PI = (
    "(lambda m: squashed_gaussian_log_prob(torch.atanh(((next_state_actions - actor.action_bias) / actor.action_scale)"
    ".double()), m[0].double(), m[1].double(), actor.action_scale.double()))(actor(b_next_obs))"
)
NEXT_VALUE = {
    "dqn.py": "target_network(b_next_obs).max(dim=1).values",
    "c51.py": "target_network.get_action(b_next_obs)[1]",  # the next observations' distributions
    # the quantiles of the action whose mean the target network ranks highest, (B, N)
    "qr_dqn.py": "(lambda q: q[torch.arange(len(q)), q.mean(2).argmax(1)])(target_network(b_next_obs))",
    "sac_continuous_action.py": "torch.min(qf1_target(b_next_obs, next_state_actions), qf2_target(b_next_obs,"
    f" next_state_actions)).flatten() - alpha * {SAC_LOG_PI}",
    "td3_continuous_action.py": f"torch.min(qf1_target(b_next_obs, {TD3_ACTIONS}), qf2_target(b_next_obs, {TD3_ACTIONS}))",
    "ddpg_continuous_action.py": "qf1_target(b_next_obs, target_actor(b_next_obs))",
}
OFF_POLICY = {
    "dqn.py": ("StandinDiscrete-v0", [], "td_targets", []),
    "c51.py": ("StandinDiscrete-v0", [], "target_pmfs", ["target_network.atoms"]),
    "qr_dqn.py": ("StandinDiscrete-v0", [], "target_quantiles", []),
    "sac_continuous_action.py": ("StandinContinuous-v0", [], "next_q_value", []),
    "td3_continuous_action.py": ("StandinContinuous-v0", [], "next_q_value", []),
    "ddpg_continuous_action.py": ("StandinContinuous-v0", [], "next_q_value", []),
}
# the JAX scripts compute their targets inside a jitted update: their memories are checked, drawn after the run
OFF_POLICY_MEMORY = {
    "dqn_jax.py": "StandinDiscrete-v0",
    "c51_jax.py": "StandinDiscrete-v0",
    "sac_continuous_action_jax.py": "StandinContinuous-v0",
    "td3_continuous_action_jax.py": "StandinContinuous-v0",
    "ddpg_continuous_action_jax.py": "StandinContinuous-v0",
}
OFF_POLICY_FLAGS = ["--total-timesteps", "60", "--learning-starts", "40", "--buffer-size", "1000", "--batch-size", "64"]


def check_memory(obs, rewards, next_obs, dones):
    """Transitions from a replay memory: `next_obs` is the step after `obs` in the same episode (at a time limit,
    the true final observation), `done` the termination only, the reward the one the env gave for that step.
    Returns the hand-made (rewards, terminations)."""
    (episode, t), (next_episode, next_t) = decode(obs), decode(next_obs)
    np.testing.assert_array_equal(next_episode, episode, err_msg="a stored next_obs is of another episode than its obs")
    np.testing.assert_array_equal(next_t, t + 1, err_msg="a stored next_obs is not the step after its obs")
    terminated = np.array([terminates(e, n) for e, n in zip(episode, next_t)], dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(dones).reshape(-1), terminated, err_msg="done is not the termination")
    np.testing.assert_allclose(np.asarray(rewards).reshape(-1), reward(t), rtol=1e-6, err_msg="not the step's reward")
    assert (next_t == TIME_LIMIT).any() and (next_t == TERMINATE_AT).any()  # both kinds of ending were drawn
    return reward(t), terminated


def c51_target_by_hand(rewards, terminated, next_pmfs, atoms, discounts=None):
    """The categorical projection (Bellemare et al. 2017, Algorithm 1) of r + γ (1 − done) z onto the atoms; with
    `discounts` (B,), r + discount (1 − done) z (an n-step return and γ^k)."""
    dz, discounts = atoms[1] - atoms[0], np.full(len(rewards), GAMMA) if discounts is None else discounts
    target = np.zeros_like(next_pmfs)
    for b in range(len(rewards)):
        for j, z in enumerate(atoms):
            tz = np.clip(rewards[b] + discounts[b] * (1 - terminated[b]) * z, atoms[0], atoms[-1])
            pos = min((tz - atoms[0]) / dz, len(atoms) - 1)  # v_max itself can land a rounding past the last atom
            low, up = int(np.floor(pos)), int(np.ceil(pos))
            if low == up:
                target[b, low] += next_pmfs[b, j]
            else:
                target[b, low] += next_pmfs[b, j] * (up - pos)
                target[b, up] += next_pmfs[b, j] * (pos - low)
    return target


# per script: each network and the expression of its update period in env steps (one env): it changes exactly in the
# loop iterations k (global_step k -> k + 1) where k + 1 is past --learning-starts and a multiple of the period
CADENCES = {
    "sac_continuous_action.py": {"qf1": "1", "qf2": "1", "actor": "args.policy_frequency"}
    | {"qf1_target": "args.target_network_frequency", "qf2_target": "args.target_network_frequency"},
    "td3_continuous_action.py": {"qf1": "1", "qf2": "1", "actor": "args.policy_frequency"}
    | {"target_actor": "args.policy_frequency", "qf1_target": "args.policy_frequency", "qf2_target": "args.policy_frequency"},
    "ddpg_continuous_action.py": {"qf1": "1", "actor": "args.policy_frequency"}
    | {"target_actor": "args.policy_frequency", "qf1_target": "args.policy_frequency"},
    "dqn_atari.py": {"q_network": "args.train_frequency", "target_network": "args.target_network_frequency"},
    "c51_atari.py": {"q_network": "args.train_frequency", "target_network": "args.target_network_frequency"},
    "qr_dqn_atari.py": {"q_network": "args.train_frequency", "target_network": "args.target_network_frequency"},
    "rainbow_atari.py": {"q_network": "args.train_frequency", "target_network": "args.target_network_frequency"},
    "sac_atari.py": {"qf1": "args.update_frequency", "qf2": "args.update_frequency", "actor": "args.update_frequency"}
    | {"qf1_target": "args.target_network_frequency", "qf2_target": "args.target_network_frequency"},
}


def check_cadences(result, cadences):
    """Each network of `cadences` changed exactly at its updates, from the first gradient step on, over the whole run."""
    learning_starts, steps = int(result["kept"]["args.learning_starts"]), result["all_steps"]
    for name, period in cadences.items():
        period = int(result["kept"][period]) if period in result["kept"] else int(period)
        series = [s["watch"][name] for s in steps]
        moved = [k for k in range(len(series) - 1) if series[k + 1] != series[k]]
        expected = [k for k in range(len(series) - 1) if k + 1 > learning_starts and (k + 1) % period == 0]
        assert moved == expected and expected, (name, moved, expected)


def target_by_hand(script, kept, rewards, terminated):
    """r + γ (1 − termination) V(s'), V(s') as NEXT_VALUE gives it; for C51 the projection of its distributions, for
    QR-DQN every quantile of the next state's greedy action so moved."""
    if script in ("c51.py", "c51_atari.py"):
        return c51_target_by_hand(rewards, terminated, kept[NEXT_VALUE[script]], kept["target_network.atoms"])
    if script in ("qr_dqn.py", "qr_dqn_atari.py"):
        return rewards[:, None] + GAMMA * (1 - terminated[:, None]) * np.asarray(kept[NEXT_VALUE[script]])
    return rewards + GAMMA * (1 - terminated) * np.asarray(kept[NEXT_VALUE[script]]).reshape(-1)


@pytest.mark.parametrize("script", OFF_POLICY)
def test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination(script, tmp_path):
    env_id, extra, target, keep = OFF_POLICY[script]
    args = ["--env-id", env_id, *OFF_POLICY_FLAGS, *extra]
    cadences = CADENCES.get(script, {})
    watch = {name: CHECKSUM.format(name) for name in cadences}
    keep = [*BATCH, target, NEXT_VALUE[script], *keep, *cadences.values(), "args.learning_starts"]
    result = probe(tmp_path, script, args, stop_at=target, keep=keep, watch=watch, go_on=bool(cadences))
    check_episodes(result)
    check_cadences(result, cadences)
    kept = result["kept"]
    rewards, terminated = check_memory(*(kept[name] for name in BATCH))
    expected = target_by_hand(script, kept, rewards, terminated)
    np.testing.assert_allclose(np.asarray(kept[target]).reshape(expected.shape), expected, 1e-5, 1e-5, err_msg=target)


@pytest.mark.parametrize("script", ["dqn.py", "c51.py", "qr_dqn.py"])
def test_updates_move_the_q_network_and_the_target_network_only_at_its_cadence(script, tmp_path):
    """With one env, the loop's iteration k (global_step k -> k + 1) takes a gradient step where k + 1 passes
    --learning-starts and is a multiple of --train-frequency, and copies the Q-network into the target network
    where k + 1 is a multiple of --target-network-frequency past --learning-starts."""
    learning_starts, train_frequency, target_frequency = 10, 2, 8
    args = ["--env-id", "StandinDiscrete-v0", "--total-timesteps", "41", "--buffer-size", "100", "--batch-size", "8"]
    args += ["--learning-starts", str(learning_starts), "--train-frequency", str(train_frequency)]
    args += ["--target-network-frequency", str(target_frequency)]
    watch = {"q": CHECKSUM.format("q_network"), "target": CHECKSUM.format("target_network")}
    result = probe(tmp_path, script, args, watch=watch)
    series = {name: [s["watch"][name] for s in result["steps"]] for name in watch}
    moved = {name: [k for k in range(len(v) - 1) if v[k + 1] != v[k]] for name, v in series.items()}
    steps = range(len(result["steps"]) - 1)
    assert moved["q"] == [k for k in steps if k + 1 > learning_starts and (k + 1) % train_frequency == 0]
    assert moved["target"] == [k for k in steps if k + 1 > learning_starts and (k + 1) % target_frequency == 0]
    assert len(moved["target"]) >= 3


JAX_CHECKSUM = "float(sum(np.abs(np.asarray(x, np.float64)).sum() for x in jax.tree_util.tree_leaves({})))"
# per JAX script: its parameters (pytrees of its train states) and their update periods as in CADENCES, and the flags
# that bring a target network's copy within the run
JAX_CADENCES = {
    "dqn_jax.py": ({"q_state.params": "args.train_frequency", "q_state.target_params": "args.target_network_frequency"}, 1),
    "c51_jax.py": ({"q_state.params": "args.train_frequency", "q_state.target_params": "args.target_network_frequency"}, 1),
    "sac_continuous_action_jax.py": (
        {"qf_state.params": "1", "actor_state.params": "args.policy_frequency"}
        | {"qf_state.target_params": "args.target_network_frequency"},
        0,
    ),
    "td3_continuous_action_jax.py": (
        {"qf_state.params": "1", "actor_state.params": "args.policy_frequency"}
        | {"qf_state.target_params": "args.policy_frequency", "actor_state.target_params": "args.policy_frequency"},
        0,
    ),
    "ddpg_continuous_action_jax.py": (
        {"qf1_state.params": "1", "actor_state.params": "args.policy_frequency"}
        | {"qf1_state.target_params": "args.policy_frequency", "actor_state.target_params": "args.policy_frequency"},
        0,
    ),
}


@pytest.mark.parametrize("script", OFF_POLICY_MEMORY)
def test_off_policy_memory_keeps_the_true_next_observation_and_termination_only(script, tmp_path):
    """The JAX scripts' memories, and their parameters moved exactly at their cadences (the updates run in jit)."""
    cadences, value_based = JAX_CADENCES[script]
    watch = {name: JAX_CHECKSUM.format(name) for name in cadences}
    extra = ["--train-frequency", "2", "--target-network-frequency", "8"] if value_based else []
    args = ["--env-id", OFF_POLICY_MEMORY[script], *OFF_POLICY_FLAGS, *extra]
    keep = [*(p for p in cadences.values() if p.startswith("args.")), "args.learning_starts"]
    result = probe(tmp_path, script, args, sample=256, watch=watch, keep=keep)
    check_episodes(result)
    check_cadences(result, cadences)
    obs, _, rewards, next_obs, dones = result["sample"]
    check_memory(obs, rewards, next_obs, dones)


@pytest.mark.parametrize("script", ["dqn.py", "sac_continuous_action.py"])
def test_off_policy_memory_of_three_envs_keeps_each_envs_own_final_observation(script, tmp_path):
    """Three sub-envs, so that some steps end two episodes at once (see check_episodes): each stored transition
    still ends with its own env's true final observation."""
    args = ["--env-id", OFF_POLICY[script][0], *OFF_POLICY_FLAGS, "--num-envs", "3"]
    result = probe(tmp_path, script, args, sample=256)
    check_episodes(result)
    obs, _, rewards, next_obs, dones = result["sample"]
    check_memory(obs, rewards, next_obs, dones)


def recorded_transitions(result):
    """What the env gave the loop, by the observation the loop acted on: {obs bytes: [(reward, next_obs, termination,
    truncation), ...]}, where next_obs is the true final observation if the step ended its episode."""
    table, before = {}, [result["reset"]] + [s["obs"] for s in result["steps"][:-1]]
    for previous, s in zip(before, result["steps"]):
        for i, obs in enumerate(previous):
            after = (s["rewards"][i], s["final_obs"].get(i, s["obs"][i]), s["terminations"][i], s["truncations"][i])
            table.setdefault(obs.tobytes(), []).append(after)
    return table


def check_memory_against_the_loop(result, obs, rewards, next_obs, dones):
    """Transitions from a replay memory, each one the env gave the loop: `next_obs` what followed `obs` (at an
    episode's end, its true final observation, not the next episode's first), `done` the termination only, and the
    reward the loop received. Returns the recorded (rewards, terminations)."""
    table, dtype = recorded_transitions(result), result["reset"].dtype
    expected, kinds = [], set()
    for o, r, n, d in zip(obs, np.asarray(rewards).reshape(-1), next_obs, np.asarray(dones).reshape(-1)):
        after = [a for a in table[np.asarray(o, dtype).tobytes()] if np.array_equal(np.asarray(n, dtype), a[1])]
        assert after, "a stored next_obs is not what the env gave after its obs"
        reward, _, termination, truncation = after[0]
        assert (float(d), float(r)) == (float(termination), pytest.approx(float(reward))), (termination, truncation)
        expected.append((reward, float(termination)))
        kinds |= {"termination"} if termination else {"truncation"} if truncation else set()
    assert kinds == {"termination", "truncation"}  # both kinds of ending were drawn
    return tuple(np.array(column) for column in zip(*expected))


def near(frame, ended_at):
    return ended_at - 8 < frame < ended_at + 4


def check_atari_episodes(result):
    """The Atari stand-in played its pattern through the scripts' wrappers: a life lost or a game over terminates,
    the time limit truncates, and an ended step's true final frame is of the game the loop was playing. (Where an
    episode ends within the first frames of a 4-frame skip, gymnasium's MaxAndSkipObservation returns the max of
    the frames it kept before; a life lost is seen at the end of a skip: hence "near" the frame that ended it.)"""
    before = [result["reset"]] + [s["obs"] for s in result["steps"][:-1]]
    for previous, s in zip(before, result["steps"]):
        for i, final in s["final_obs"].items():
            (instance, game, frame), (last_instance, last_game, last_frame) = (
                decode_atari(final[-1]),
                decode_atari(previous[i][-1]),
            )
            assert (instance, game) == (last_instance, last_game) and frame >= last_frame
            if s["truncations"][i]:
                assert not s["terminations"][i] and game % 2 == 1 and near(frame, ATARI_TIME_LIMIT)
            else:
                assert near(frame, LIFE_LOST_AT) or (game % 2 == 0 and near(frame, GAME_OVER_AT))
            assert not np.array_equal(final, s["obs"][i])
    assert any(s["terminations"].any() for s in result["steps"]) and any(s["truncations"].any() for s in result["steps"])


ATARI_ON_POLICY = ["ppo_atari.py", "ppo_atari_multigpu.py"]


@pytest.mark.parametrize("script", ATARI_ON_POLICY)
def test_atari_advantages_bootstrap_a_time_limit_from_the_true_final_frames(script, tmp_path):
    args = ["--env-id", "StandinAtari-v0", "--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256"]
    result = probe(tmp_path, script, args, stop_at="returns", keep=["advantages", "returns"], value=TORCH_VALUE, moves="agent")
    check_atari_episodes(result)
    advantages, returns = gae_by_hand(result)
    check_by_hand(result, advantages=advantages, returns=returns)


ATARI_FLAGS = ["--env-id", "StandinAtari-v0", "--total-timesteps", "300", "--buffer-size", "1000", "--batch-size", "64"]
ATARI_OFF_POLICY = {"dqn_atari.py": "td_targets", "c51_atari.py": "target_pmfs", "sac_atari.py": "next_q_value"}
ATARI_OFF_POLICY["qr_dqn_atari.py"] = "target_quantiles"
SAC_ATARI_POLICY = "actor.get_action(b_next_obs)"  # its log-probabilities and probabilities of every action
NEXT_VALUE |= {
    "dqn_atari.py": NEXT_VALUE["dqn.py"],
    "qdagger_dqn_atari_impalacnn.py": NEXT_VALUE["dqn.py"],
    "c51_atari.py": NEXT_VALUE["c51.py"],
    "qr_dqn_atari.py": NEXT_VALUE["qr_dqn.py"],
    "sac_atari.py": f"({SAC_ATARI_POLICY}[2] * (torch.min(qf1_target(b_next_obs), qf2_target(b_next_obs))"
    f" - alpha * {SAC_ATARI_POLICY}[1])).sum(dim=1)",
}


@pytest.mark.parametrize("script", ATARI_OFF_POLICY)
def test_atari_off_policy_targets_bootstrap_a_time_limit_and_not_a_life_lost(script, tmp_path):
    target = ATARI_OFF_POLICY[script]
    cadences, watch = CADENCES[script], {name: CHECKSUM.format(name) for name in CADENCES[script]}
    atoms = ["target_network.atoms"] if script == "c51_atari.py" else []
    keep = [*BATCH, target, NEXT_VALUE[script], *atoms, *cadences.values(), "args.learning_starts"]
    # a target network copied every 16 steps, so its cadence shows within the run
    args = [*ATARI_FLAGS, "--learning-starts", "250", "--target-network-frequency", "16"]
    result = probe(tmp_path, script, args, stop_at=target, keep=keep, watch=watch, go_on=True)
    check_atari_episodes(result)
    check_cadences(result, cadences)
    kept = result["kept"]
    rewards, terminated = check_memory_against_the_loop(result, *(kept[name] for name in BATCH))
    expected = target_by_hand(script, kept, rewards, terminated)
    # atol: a position within float32's rounding of an atom can give a few 1e-5 of mass to the other neighbour
    np.testing.assert_allclose(np.asarray(kept[target]).reshape(expected.shape), expected, 1e-5, 1e-4, err_msg=target)


def check_n_step_memory_against_the_loop(result, obs, returns, next_obs, dones, discounts, n, gamma=GAMMA):
    """n-step transitions from a replay memory, each one walked here through what the env gave the loop: from the
    step that acted on `obs`, k = n steps on, or fewer where the episode ended first (a termination or a time limit:
    then `next_obs` is its true final observation, not the next episode's first). The return is Σ_{i<k} γ^i r_{t+i},
    `done` whether the window ended by termination, the discount γ^k. Returns the walked (returns, terminations)."""
    before = [result["reset"]] + [s["obs"] for s in result["steps"][:-1]]
    where = {o.tobytes(): (k, i) for k, b in enumerate(before) for i, o in enumerate(b)}
    expected, kinds = [], set()
    for o, g, nx, d, discount in zip(obs, returns, next_obs, dones, discounts):
        k, i = where[np.asarray(o, result["reset"].dtype).tobytes()]
        total, taken = 0.0, 0
        while True:
            s = result["steps"][k + taken]
            total, taken = total + gamma**taken * s["rewards"][i], taken + 1
            ended = s["terminations"][i] or s["truncations"][i]
            if ended or taken == n:
                break
        np.testing.assert_array_equal(nx, s["final_obs"][i] if ended else s["obs"][i])
        assert (float(d), float(g), float(discount)) == (
            float(s["terminations"][i]),
            pytest.approx(total, rel=1e-5),
            pytest.approx(gamma**taken, rel=1e-5),
        )
        expected.append((total, float(s["terminations"][i])))
        kinds |= {"termination"} if s["terminations"][i] else {"truncation"} if s["truncations"][i] else set()
    assert kinds == {"termination", "truncation"}  # windows ended by both kinds of ending were drawn
    return tuple(np.array(column) for column in zip(*expected))


def test_rainbow_n_step_targets_stop_at_an_episodes_end_and_bootstrap_only_a_time_limit(tmp_path):
    batch = ["b_obs", "b_returns", "b_next_obs", "b_dones", "b_discounts"]
    cadences = CADENCES["rainbow_atari.py"]
    keep = [*batch, "target_pmfs", "next_pmfs", "target_network.atoms", "args.n_step", *cadences.values()]
    keep += ["args.learning_starts"]
    watch = {name: CHECKSUM.format(name) for name in cadences}
    args = [*ATARI_FLAGS, "--learning-starts", "250", "--target-network-frequency", "16", "--batch-size", "128"]
    result = probe(tmp_path, "rainbow_atari.py", args, stop_at="target_pmfs", keep=keep, watch=watch, go_on=True)
    check_atari_episodes(result)
    check_cadences(result, cadences)
    kept = result["kept"]
    n, memory = int(kept["args.n_step"]), (kept[name] for name in batch)
    returns, terminated = check_n_step_memory_against_the_loop(result, *memory, n=n)
    expected = c51_target_by_hand(returns, terminated, kept["next_pmfs"], kept["target_network.atoms"], kept["b_discounts"])
    np.testing.assert_allclose(kept["target_pmfs"], expected, rtol=1e-5, atol=1e-4, err_msg="target_pmfs")


@pytest.mark.parametrize("script", ["dqn_atari_jax.py", "c51_atari_jax.py"])
def test_atari_jax_memory_keeps_the_true_final_frames_and_termination_only(script, tmp_path):
    # --learning-starts at the budget: the memory fills and no update is compiled
    result = probe(tmp_path, script, [*ATARI_FLAGS, "--learning-starts", "300"], sample=256)
    check_atari_episodes(result)
    obs, _, rewards, next_obs, dones = result["sample"]
    check_memory_against_the_loop(result, obs, rewards, next_obs, dones)


def next_step_gae_by_hand(result, gamma=GAMMA, lam=LAMBDA):
    """Advantages (T, N) of a NEXT_STEP rollout (envpool), by the definition: step k acts on obs_k. Where step k ends
    an episode, obs_k+1 is its true final observation, and step k+1 is a reset step: not a transition, so its
    advantage is 0 and nothing is carried across it. A termination (a lost life, a game over, and a game over on
    the time limit's last step, which envpool reports as truncated only) bootstraps 0; a truncation V(obs_k+1)."""
    steps, values = result["steps"], result["values"]["obs"]
    T, N = len(steps), values.shape[1]
    advantages = np.zeros((T, N))
    for i in range(N):
        after = 0.0
        for k in reversed(range(T)):
            s, previous = steps[k], steps[k - 1] if k > 0 else None
            if previous is not None and (previous["terminations"][i] or previous["truncations"][i]):
                advantages[k, i] = after = 0.0  # a reset step
                continue
            terminal = s["terminations"][i] or s["game_over"][i]
            if s["terminations"][i] or s["truncations"][i]:
                after = 0.0
            delta = s["rewards"][i] + gamma * (0.0 if terminal else values[k + 1, i]) - values[k, i]
            advantages[k, i] = after = delta + gamma * lam * after
    return advantages, advantages + values[:T]


def check_reset_steps_masked(valid, steps):
    """`valid` (T, N): a step is a transition unless the step before ended its episode (then it is a reset step)."""
    np.testing.assert_array_equal(valid[1:], ~np.stack([s["terminations"] | s["truncations"] for s in steps[:-1]]))
    assert valid[0].all()


def check_envpool_episodes(result):
    """The envpool stand-in played its pattern, and the rollout saw every kind of ending."""
    kinds = set()
    for s in result["steps"]:
        kinds |= {"life lost"} if (s["terminations"] & ~s["game_over"]).any() else set()
        kinds |= {"game over"} if (s["terminations"] & s["game_over"]).any() else set()
        kinds |= {"time limit"} if (s["truncations"] & ~s["game_over"]).any() else set()
        kinds |= {"game over at the time limit"} if (s["truncations"] & s["game_over"]).any() else set()
    assert kinds == {"life lost", "game over", "time limit", "game over at the time limit"}


ENVPOOL_FLAGS = ["--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "40", "--max-episode-steps", "10"]


def test_envpool_advantages_mask_reset_steps_and_bootstrap_only_a_time_limit(tmp_path):
    args = [*ENVPOOL_FLAGS, "--total-timesteps", "160"]
    keep = ["advantages", "returns"]
    result = probe(
        tmp_path, "ppo_atari_envpool.py", args, stop_at="b_obs", keep=keep, value=TORCH_VALUE, envpool=True, moves="agent"
    )
    check_envpool_episodes(result)
    advantages, returns = next_step_gae_by_hand(result)
    check_by_hand(result, advantages=advantages, returns=returns)


def test_envpool_reset_step_after_a_rollouts_last_step_is_masked_in_the_next_rollout(tmp_path):
    """A life lost on the first rollout's last step (4-step rollouts: the stand-in's first life ends at t = 4) makes
    the second rollout's first step a reset step: the script hands `last_done` over between rollouts."""
    args = ["--env-id", "Breakout-v5", "--num-envs", "2", "--num-steps", "4", "--max-episode-steps", "10"]
    args += ["--total-timesteps", "16", "--num-minibatches", "2"]
    result = probe(tmp_path, "ppo_atari_envpool.py", args, stop_at="b_obs", envpool=True, keep_at_end=["valid"])
    steps, T = result["all_steps"], len(result["steps"])
    assert len(steps) == 2 * T and (steps[T - 1]["terminations"] | steps[T - 1]["truncations"]).any()
    ended = np.stack([s["terminations"] | s["truncations"] for s in steps])
    np.testing.assert_array_equal(result["kept_at_end"]["valid"].astype(bool), ~ended[T - 1 : 2 * T - 1])


def next_step_q_lambda_by_hand(result, gamma=GAMMA, lam=0.65):
    """Q(λ) returns (T, N) of a NEXT_STEP rollout, by the recursion of `q_lambda_by_hand`: past a termination (a game
    over on the time limit's last step included) G_t = r_t; past a truncation r_t + γ max Q(obs_t+1), its true final
    observation; a reset step's return is not used (the script masks it), so it is not compared (NaN here)."""
    steps, values = result["steps"], result["values"]["obs"]
    T, N = len(steps), values.shape[1]
    returns = np.full((T, N), np.nan)
    for i in range(N):
        for k in reversed(range(T)):
            s, previous = steps[k], steps[k - 1] if k > 0 else None
            if previous is not None and (previous["terminations"][i] or previous["truncations"][i]):
                continue  # a reset step
            if s["terminations"][i] or s["game_over"][i]:
                bootstrap = 0.0
            elif s["truncations"][i] or k == T - 1:
                bootstrap = values[k + 1, i]
            else:
                bootstrap = lam * returns[k + 1, i] + (1 - lam) * values[k + 1, i]
            returns[k, i] = s["rewards"][i] + gamma * bootstrap
    return returns


Q_VALUE = "lambda o: q_network(torch.as_tensor(o)).max(dim=1).values"


def lstm_values(run, recorded):
    """V of every recorded observation and true final observation for the LSTM agents, unrolled here step by step from
    the rollout's first state (`initial_lstm_state`): the state is zeroed where an episode starts, and a true final
    observation is valued from the state of the episode it ends. Called in the probe (tests/loop_probe.py)."""
    torch, agent = run["torch"], run["agent"]
    (h, c), starts = run["initial_lstm_state"], run["initial_done"].bool()
    observations, finals, values = [recorded["reset"]] + [s["obs"] for s in recorded["steps"]], {}, []
    with torch.no_grad():
        for k, obs in enumerate(observations):
            features = agent.network(torch.as_tensor(obs, dtype=torch.float32) / 255.0)
            keep = (~starts).float().view(1, -1, 1)
            out, (h, c) = agent.lstm(features[None], (h * keep, c * keep))
            values.append(agent.critic(out[0]).flatten().numpy())
            if k == len(recorded["steps"]):
                break
            s = recorded["steps"][k]
            for i, final in s["final_obs"].items():
                features = agent.network(torch.as_tensor(final[None], dtype=torch.float32) / 255.0)
                final_out, _ = agent.lstm(features[None], (h[:, i : i + 1], c[:, i : i + 1]))
                finals[(k, i)] = float(agent.critic(final_out[0]).flatten()[0])
            starts = torch.as_tensor(s["terminations"] | s["truncations"])
    return {"obs": np.stack(values), "final": finals}


def test_lstm_advantages_bootstrap_a_time_limit_from_the_ended_episodes_state(tmp_path):
    args = [
        "--env-id",
        "StandinAtari-v0",
        "--num-envs",
        "2",
        "--num-steps",
        "64",
        "--total-timesteps",
        "256",
        "--num-minibatches",
        "2",
    ]
    # the update replays whole env sequences from the rollout's initial state, resetting where episodes start: it
    # gives back the rollout's log-probabilities and values (to float32 rounding: the CNN sees other batch sizes);
    # a reset one step off (at the done step, not the one after) is far outside that rounding
    replay = "agent.get_action_and_value(obs, initial_lstm_state, starts, actions)"
    keep = ["advantages", "returns", "logprobs", "values", "dones", f"{replay}[1]", f"{replay}[3]"]
    keep += ["agent.get_value(obs, initial_lstm_state, dones)"]
    result = probe(
        tmp_path,
        "ppo_atari_lstm.py",
        args,
        stop_at="starts",  # bound after the advantages, before the update
        keep=keep,
        values_by="test_loop_wiring:lstm_values",
        moves="agent",
    )
    check_atari_episodes(result)
    kept = result["kept"]
    advantages, returns = gae_by_hand(result)
    check_by_hand(result, advantages=advantages, returns=returns)
    np.testing.assert_allclose(kept[f"{replay}[1]"], kept["logprobs"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(kept[f"{replay}[3]"].reshape(kept["values"].shape), kept["values"], rtol=0, atol=1e-5)
    shifted = kept["agent.get_value(obs, initial_lstm_state, dones)"].reshape(kept["values"].shape)
    assert kept["dones"].any() and np.abs(shifted - kept["values"]).max() > 1e-3


def next_step_lstm_q_max(run, recorded):
    """max Q of every recorded observation for the recurrent PQN under NEXT_STEP, unrolled here from an empty memory:
    it is zeroed before a new episode's first observation (the one a reset step returns), not before the reset
    step's, which is the true final observation and is valued with its episode's memory. Called in the probe."""
    torch, q_network = run["torch"], run["q_network"]
    observations, steps, values = [recorded["reset"]] + [s["obs"] for s in recorded["steps"]], recorded["steps"], []
    state = q_network.initial_state(len(observations[0]), "cpu")
    ended = [s["terminations"] | s["truncations"] for s in steps]
    with torch.no_grad():
        for k, obs in enumerate(observations):
            first = np.ones(len(obs)) if k == 0 else ended[k - 2] if k >= 2 else np.zeros(len(obs))
            q, state = q_network(torch.as_tensor(obs), state, torch.as_tensor(first, dtype=torch.float32))
            values.append(q.max(dim=1).values.numpy())
    return {"obs": np.stack(values)}


# per script: its --num-minibatches and how the probe gets max Q of the recorded observations
PQN_ENVPOOL = {
    "pqn_atari_envpool.py": ("4", {"value": Q_VALUE}),
    "pqn_atari_envpool_lstm.py": ("2", {"values_by": "test_loop_wiring:next_step_lstm_q_max"}),  # its memory, by hand
}


@pytest.mark.parametrize("script", PQN_ENVPOOL)
def test_envpool_q_lambda_returns_bootstrap_only_a_time_limit(script, tmp_path):
    minibatches, values = PQN_ENVPOOL[script]
    args = [*ENVPOOL_FLAGS, "--total-timesteps", "160", "--num-minibatches", minibatches]
    keep = ["returns", "valid"]
    result = probe(tmp_path, script, args, stop_at="returns", keep=keep, envpool=True, moves="q_network", **values)
    check_envpool_episodes(result)
    expected, valid = next_step_q_lambda_by_hand(result), result["kept"]["valid"].astype(bool)
    np.testing.assert_array_equal(valid, ~np.isnan(expected))
    check_by_hand(result, valid, returns=expected)


def rnd_values(run, recorded):
    """The extrinsic and intrinsic values of every recorded observation (T + 1, N) each, for ppo_rnd_envpool's two
    value heads. Called in the probe (tests/loop_probe.py)."""
    torch, agent = run["torch"], run["agent"]
    observations = np.concatenate([recorded["reset"]] + [s["obs"] for s in recorded["steps"]])
    with torch.no_grad():
        extrinsic, intrinsic = agent.get_value(torch.as_tensor(observations))
    shape = (len(recorded["steps"]) + 1, -1)
    return {"obs": extrinsic.numpy().reshape(shape), "int": intrinsic.numpy().reshape(shape)}


def intrinsic_gae_by_hand(int_rewards, int_values, valid, gamma, lam=LAMBDA):
    """Intrinsic advantages (T, N) of a NEXT_STEP rollout by the definition, the stream running on across episodes
    (Burda et al. 2018, section 2.3): over each env's transitions (not its reset steps) in order, δ = r + γ V(s') − V(s)
    where s' is the observation of the next transition, the next episode's first past an episode's end (V of the
    rollout's next observation past the last); A sums (γλ)^l δ over the rest of the rollout. Reset steps get 0."""
    T, N = valid.shape
    advantages = np.zeros((T, N))
    for i in range(N):
        transitions = [k for k in range(T) if valid[k, i]]
        next_value, after = int_values[T, i], 0.0
        for k in reversed(transitions):
            delta = int_rewards[k, i] + gamma * next_value - int_values[k, i]
            advantages[k, i] = after = delta + gamma * lam * after
            next_value = int_values[k, i]
    return advantages


def test_rnd_extrinsic_advantages_end_at_episodes_and_intrinsic_ones_run_on(tmp_path):
    args = [*ENVPOOL_FLAGS, "--total-timesteps", "160", "--num-iterations-obs-norm-init", "0"]
    keep = ["ext_advantages", "ext_returns", "int_advantages", "int_returns", "int_rewards", "valid", "next_frames"]
    keep += ["args.gamma", "args.int_gamma"]
    values = "test_loop_wiring:rnd_values"
    result = probe(
        tmp_path, "ppo_rnd_envpool.py", args, stop_at="b_obs", keep=keep, values_by=values, envpool=True, moves="agent"
    )
    check_envpool_episodes(result)
    kept, steps = result["kept"], result["steps"]
    # the novelty is of each step's next frame: at an episode's end its true final frame
    np.testing.assert_array_equal(kept["next_frames"][:, :, 0], np.stack([s["obs"][:, -1] for s in steps]))
    advantages, returns = next_step_gae_by_hand(result, gamma=float(kept["args.gamma"]))
    valid = kept["valid"].astype(bool)
    check_reset_steps_masked(valid, steps)
    check_by_hand(result, valid, ext_advantages=advantages, ext_returns=returns)
    int_values = result["values"]["int"]
    int_advantages = intrinsic_gae_by_hand(kept["int_rewards"], int_values, valid, float(kept["args.int_gamma"]))
    check_by_hand(result, int_advantages=int_advantages)
    check_by_hand(result, valid, int_returns=int_advantages + int_values[:-1])


PROCGEN_TIME_LIMIT = 10  # the scripts' --max-episode-steps in these tests
PROCGEN_FLAGS = ["--env-id", "StarpilotEasy-v0", "--num-envs", "2", "--num-steps", "40"]
PROCGEN_FLAGS += ["--max-episode-steps", str(PROCGEN_TIME_LIMIT)]
PROCGEN = {
    "ppo_procgen.py": ["--total-timesteps", "160"],
    "ppg_procgen.py": ["--total-timesteps", "160", "--n-iteration", "2"],
}


def check_procgen_episodes(result):
    """The Procgen stand-in's games, through the script's own time limit and wrappers, as the loop received them:
    each game's steps in order; a termination where its game says; a truncation at the time limit only where the
    game does not terminate there; and after each end a reset step, the next game's first observation."""
    steps, kinds = result["steps"], set()
    observations = [result["reset"]] + [s["obs"] for s in steps]
    for k, s in enumerate(steps):
        (_, game, t), (_, next_game, next_t) = decode_procgen(observations[k]), decode_procgen(observations[k + 1])
        reset_step = k > 0 and steps[k - 1]["terminations"] | steps[k - 1]["truncations"]
        for i in range(len(game)):
            if k > 0 and reset_step[i]:
                assert (next_game[i], next_t[i]) == (game[i] + 1, 0)
                assert not (s["terminations"][i] or s["truncations"][i])
                continue
            assert (next_game[i], next_t[i]) == (game[i], t[i] + 1)
            assert s["terminations"][i] == (next_t[i] == PROCGEN_ENDS[game[i] % 3])
            assert s["truncations"][i] == (next_t[i] == PROCGEN_TIME_LIMIT and not s["terminations"][i])
            if s["terminations"][i]:
                kinds |= {"termination at the time limit" if next_t[i] == PROCGEN_TIME_LIMIT else "termination"}
            kinds |= {"time limit"} if s["truncations"][i] else set()
    assert kinds == {"termination", "time limit", "termination at the time limit"}


@pytest.mark.parametrize("script", PROCGEN)
def test_procgen_advantages_mask_reset_steps_and_bootstrap_the_scripts_time_limit(script, tmp_path):
    args, keep = [*PROCGEN_FLAGS, *PROCGEN[script]], ["advantages", "returns", "valid", "args.gamma", "args.gae_lambda"]
    result = probe(tmp_path, script, args, stop_at="b_obs", keep=keep, value=TORCH_VALUE, envpool="procgen", moves="agent")
    check_procgen_episodes(result)
    kept, steps = result["kept"], result["steps"]
    valid = kept["valid"].astype(bool)
    check_reset_steps_masked(valid, steps)
    advantages, returns = next_step_gae_by_hand(result, float(kept["args.gamma"]), float(kept["args.gae_lambda"]))
    check_by_hand(result, valid, advantages=advantages, returns=returns)


def bare_teacher(checkpoint, folder):
    """The tests' Breakout teacher (saved by dqn_atari.py or dqn_atari_jax.py --save-model) as bare weights, which name
    no env: the Atari stand-in has Breakout's 4 actions, so the QDagger scripts take it as a teacher for it."""
    out = folder / "teacher.cleanrl_model"
    if checkpoint.name == "dqn_atari.cleanrl_model":
        import torch

        torch.save(torch.load(checkpoint, weights_only=False)["model"], out)
    else:
        import flax.serialization

        out.write_bytes(
            flax.serialization.msgpack_serialize(flax.serialization.msgpack_restore(checkpoint.read_bytes())["model"])
        )
    return str(out)


QDAGGER_FLAGS = [*ATARI_FLAGS, "--teacher-eval-episodes", "1", "--learning-starts", "250", "--target-network-frequency", "16"]
CADENCES["qdagger_dqn_atari_impalacnn.py"] = CADENCES["dqn_atari.py"]


@pytest.mark.parametrize("phase", ["offline", "online"])
def test_qdagger_targets_bootstrap_a_time_limit_in_the_teachers_memory_and_the_students(phase, teacher_path, tmp_path):
    """Offline, the first targets are of the memory the teacher played (its env reset last before them); online
    (--offline-steps 0), of the student's own, whose networks must also move at their cadences."""
    script, teacher = "qdagger_dqn_atari_impalacnn.py", bare_teacher(teacher_path, tmp_path)
    steps = ["--teacher-steps", "300", "--offline-steps", "8"] if phase == "offline" else ["--offline-steps", "0"]
    cadences = CADENCES[script] if phase == "online" else {}
    keep = [*BATCH, "td_targets", NEXT_VALUE[script], *cadences.values(), "args.learning_starts"]
    watch = {name: CHECKSUM.format(name) for name in cadences}
    args = [*QDAGGER_FLAGS, "--teacher-model-path", teacher, *steps]
    result = probe(tmp_path, script, args, stop_at="td_targets", keep=keep, watch=watch, go_on=bool(cadences))
    check_atari_episodes(result)
    check_cadences(result, cadences)
    kept = result["kept"]
    rewards, terminated = check_memory_against_the_loop(result, *(kept[name] for name in BATCH))
    expected = target_by_hand(script, kept, rewards, terminated)
    np.testing.assert_allclose(kept["td_targets"], expected, rtol=1e-5, atol=1e-5, err_msg="td_targets")


def test_qdagger_jax_memory_keeps_the_true_final_frames_and_termination_only(saved_jax_teacher_path, tmp_path):
    teacher = bare_teacher(saved_jax_teacher_path, tmp_path)
    args = [*QDAGGER_FLAGS, "--teacher-model-path", teacher, "--offline-steps", "0", "--learning-starts", "300"]
    result = probe(tmp_path, "qdagger_dqn_atari_jax_impalacnn.py", args, sample=256)  # no update is compiled
    check_atari_episodes(result)
    obs, _, rewards, next_obs, dones = result["sample"]
    check_memory_against_the_loop(result, obs, rewards, next_obs, dones)


def trxl_values(run, recorded):
    """V of every recorded observation and true final observation for ppo_trxl, each seen with its own episode's memory:
    at step t of an episode, the window of episode steps t − L + 1 .. t (from 0 while t < L − 1; L:
    --trxl-memory-length) of which the steps before t are attended to, their cached layer inputs; unrolled here from
    the rollout's start, each episode's cache begun empty. Called in the probe (tests/loop_probe.py)."""
    torch, agent, args = run["torch"], run["agent"], run["args"]
    L, shape = int(args.trxl_memory_length), (int(args.trxl_num_layers), int(args.trxl_dim))
    observations = [recorded["reset"]] + [s["obs"] for s in recorded["steps"]]
    caches, values, finals = [[] for _ in observations[0]], [], {}

    def value(obs, cache):  # V(obs) at step len(cache) of its episode, and the step's own layer inputs
        t = len(cache)
        start = max(t - L + 1, 0)
        indices = torch.arange(start, start + L)[None]
        memory = torch.zeros((1, L, *shape))
        for j in range(t - start):
            memory[0, j] = cache[start + j]
        hidden, cached = agent.get_hidden(torch.as_tensor(obs[None]), memory, indices < t, indices)
        return float(agent.critic(hidden).flatten()[0]), cached[0]

    with torch.no_grad():
        for k, obs in enumerate(observations):
            row = [value(o, caches[i]) for i, o in enumerate(obs)]
            values.append([v for v, _ in row])
            if k == len(recorded["steps"]):
                break
            s = recorded["steps"][k]
            for i, (_, cached) in enumerate(row):
                caches[i].append(cached)
                if s["truncations"][i] and not s["terminations"][i]:
                    finals[(k, i)] = value(s["final_obs"][i], caches[i])[0]
                if s["terminations"][i] or s["truncations"][i]:
                    caches[i] = []
    return {"obs": np.array(values), "final": finals}


def test_trxl_advantages_bootstrap_a_time_limit_from_the_final_observation_with_its_episodes_memory(tmp_path):
    args = ["--env-id", "StandinDiscrete-v0", *ON_POLICY_FLAGS]
    args += ["--num-minibatches", "4", "--trxl-memory-length", "3", "--trxl-dim", "32", "--trxl-num-layers", "2"]
    keep, values = ["advantages", "returns", "args.gamma"], "test_loop_wiring:trxl_values"
    result = probe(tmp_path, "ppo_trxl.py", args, stop_at="returns", keep=keep, values_by=values, moves="agent")
    check_episodes(result)
    advantages, returns = gae_by_hand(result, gamma=float(result["kept"]["args.gamma"]))
    check_by_hand(result, advantages=advantages, returns=returns)


XLA_FLAGS = [*ENVPOOL_FLAGS, "--no-xla-env"]  # envpool's steps as a host callback: the stand-in has no XLA interface


def test_xla_jax_advantages_mask_reset_steps_and_bootstrap_only_a_time_limit(tmp_path):
    args = [*XLA_FLAGS, "--total-timesteps", "160"]
    result = probe(
        tmp_path,
        "ppo_atari_envpool_xla_jax.py",
        args,
        stop_at="batch",
        keep=["advantages", "returns", "valid"],
        value="lambda o: get_value(agent_state.params, o)",
        envpool=True,
        moves="agent_state.params",
        checksum=JAX_CHECKSUM,
    )
    check_envpool_episodes(result)
    advantages, returns = next_step_gae_by_hand(result)
    valid = result["kept"]["valid"].astype(bool)
    check_reset_steps_masked(valid, result["steps"])
    check_by_hand(result, advantages=advantages, returns=returns)


def test_xla_jax_scan_returns_mask_reset_steps_and_bootstrap_only_a_time_limit(tmp_path):
    """The rollout, GAE and update are compiled calls: the values are taken between the rollout and the update (the
    first line binding `ended`), the returns and reset-step flags the update gives back when the one-rollout run ends."""
    args = [*XLA_FLAGS, "--total-timesteps", "80"]
    result = probe(
        tmp_path,
        "ppo_atari_envpool_xla_jax_scan.py",
        args,
        stop_at="ended",
        value="lambda o: agent.apply(agent_state.params, o, method=Agent.get_value)[:, 0]",
        envpool=True,
        keep_at_end=["returns", "valid"],
    )
    check_envpool_episodes(result)
    advantages, returns = next_step_gae_by_hand(result)
    valid = result["kept_at_end"]["valid"].reshape(advantages.shape).astype(bool)
    check_reset_steps_masked(valid, result["steps"])
    check_by_hand(result, valid, kept="kept_at_end", returns=returns)


def check_pettingzoo_episodes(result):
    """The PettingZoo stand-in's games through the script's SuperSuit wrappers (a 4-frame skip, grayscale, resizing,
    a 4-frame stack and a plane per player), as the loop received them: sub-env 2g + p is player p of game g and both
    players see their game's frames; a game over terminates every player and --max-cycles truncates them (both
    flags on a game over at the limit); the true final frames are of the game that ended, and the loop goes on with
    the next game's first frame."""
    observations, kinds = [result["reset"]] + [s["obs"] for s in result["steps"]], set()
    for k, s in enumerate(result["steps"]):
        (instance, game, frame), after = decode_atari(observations[k][..., 3]), decode_atari(s["obs"][..., 3])
        players = np.tile(255 * np.eye(2, dtype=np.uint8), (len(game) // 2, 1))
        np.testing.assert_array_equal(observations[k][:, 0, 0, 4:], players)
        assert (instance[0::2] == instance[1::2]).all() and (frame[0::2] == frame[1::2]).all()
        for i, ends_at in enumerate(frame + 4):
            over_at = {0: PZ_GAME_OVER_AT, 1: None, 2: PZ_MAX_CYCLES}[game[i] % 3]
            assert s["terminations"][i] == (ends_at == over_at) and s["truncations"][i] == (ends_at == PZ_MAX_CYCLES)
            if s["terminations"][i] or s["truncations"][i]:
                final = decode_atari(s["final_obs"][i][..., 3])
                assert (final[0], final[1], final[2]) == (instance[i], game[i], ends_at)
                assert (after[0][i], after[1][i], after[2][i]) == (instance[i], game[i] + 1, 0)
                kinds |= {("game over" if s["terminations"][i] else "") + (" time limit" if s["truncations"][i] else "")}
            else:
                assert (after[0][i], after[1][i], after[2][i]) == (instance[i], game[i], ends_at)
    assert kinds == {"game over", " time limit", "game over time limit"}


def test_pettingzoo_advantages_bootstrap_a_time_limit_from_each_players_true_final_frames(tmp_path):
    args = ["--env-id", "standin_v0", "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "256"]
    args += ["--max-cycles", str(PZ_MAX_CYCLES)]
    keep = ["advantages", "returns"]
    script = "ppo_pettingzoo_ma_atari.py"
    result = probe(tmp_path, script, args, stop_at="returns", keep=keep, value=TORCH_VALUE, moves="agent", pettingzoo=True)
    check_pettingzoo_episodes(result)
    advantages, returns = gae_by_hand(result)
    check_by_hand(result, advantages=advantages, returns=returns)


def playground_values(run, recorded):
    """V of each observation the Playground script's loop acted on (T + 1, N) and of each true final observation,
    normalised here with the running statistics the loop held when it used them: the observation of step k with
    those of step k's call (already updated with it), the true final observation of step k with those after step k
    (the next call's, or at the stop the script's `obs_rms`). The statistics themselves must be those of every
    observation the loop went on from, the first reset's included: no true final observation among them."""
    import torch

    steps, rms = recorded["steps"], run["obs_rms"]
    stats = [s["stats"] for s in steps] + [(rms.mean.cpu().numpy(), rms.var.cpu().numpy())]
    observations = [recorded["reset"]] + [s["obs"] for s in steps]
    for k, (mean, var) in enumerate(stats):
        seen = np.concatenate(observations[: k + 1]).astype(np.float64)
        prior, total = 1e-4, len(seen) + 1e-4  # RunningMeanStd's start: a pseudo-count of 1e-4 at mean 0, variance 1
        pooled_mean = seen.sum(0) / total
        pooled_var = (prior * (1 + pooled_mean**2) + ((seen - pooled_mean) ** 2).sum(0)) / total
        np.testing.assert_allclose(mean, pooled_mean, rtol=1e-4, atol=1e-6, err_msg=f"mean at step {k}")
        np.testing.assert_allclose(var, pooled_var, rtol=1e-3, atol=1e-6, err_msg=f"variance at step {k}")

    def value(obs, k):
        mean, var = stats[k]
        x = np.clip((obs - mean) / np.sqrt(var + 1e-8), -10, 10)
        with torch.no_grad():
            return run["agent"].get_value(torch.as_tensor(x, dtype=torch.float32)).flatten().numpy()

    finals = {(k, i): float(value(o[None], k + 1)[0]) for k, s in enumerate(steps) for i, o in s["final_obs"].items()}
    return {"obs": np.stack([value(o, k) for k, o in enumerate(observations)]), "final": finals}


def check_playground_episodes(result):
    """The Playground stand-in's episodes as the loop received them from the script's `env_step`: a termination
    where the reset's number r is even and t reaches TERMINATE_AT, a truncation at the script's --episode-length
    (TIME_LIMIT) otherwise; an ended episode's true final observation is its own last one and the env goes on from
    a reset state (t = 0); the others from their next step, with the reward of the step they took."""
    ids = [result["reset_ids"]] + [s["ids"] for s in result["steps"]]
    for k, s in enumerate(result["steps"]):
        r, t = ids[k][:, 0].astype(int), ids[k][:, 1].astype(int)
        assert (np.stack(decode_playground(s["obs"]), 1) == ids[k + 1][:, :2]).all()
        np.testing.assert_allclose(s["rewards"], [reward(x) for x in t], rtol=1e-6)
        for i in range(len(r)):
            assert s["terminations"][i] == (r[i] % 2 == 0 and t[i] + 1 == TERMINATE_AT)
            assert s["truncations"][i] == (not s["terminations"][i] and t[i] + 1 == TIME_LIMIT)
            if s["terminations"][i] or s["truncations"][i]:
                assert tuple(map(int, decode_playground(s["final_obs"][i]))) == (r[i], t[i] + 1)
                assert ids[k + 1][i, 1] == 0  # the next episode's first step
            else:
                assert tuple(ids[k + 1][i, :2]) == (r[i], t[i] + 1)
    assert any(s["terminations"].any() for s in result["steps"]) and any(s["truncations"].any() for s in result["steps"])
    assert any(s["truncations"].sum() >= 2 for s in result["steps"]), "no step truncated two episodes at once"


def test_playground_advantages_bootstrap_a_time_limit_from_the_true_final_observation(tmp_path):
    script = "ppo_continuous_action_playground.py"
    args = [*ON_POLICY_FLAGS, "--episode-length", str(TIME_LIMIT)]
    result = probe(
        tmp_path,
        script,
        args,
        stop_at="returns",
        keep=["advantages", "returns"],
        values_by="test_loop_wiring:playground_values",
        moves="agent",
        playground=True,
    )
    check_playground_episodes(result)
    advantages, returns = gae_by_hand(result)
    check_by_hand(result, advantages=advantages, returns=returns)


def test_every_script_has_a_check_here():
    """A new script in cleanrl/ needs its loop checked here too (docs/contributing.md)."""
    this_file = Path(__file__).read_text()
    unchecked = [
        p.name for p in sorted((REPO / "cleanrl").glob("*.py")) if p.name != "__init__.py" and f'"{p.name}"' not in this_file
    ]
    assert not unchecked, f"no loop-wiring check for {', '.join(unchecked)}"
