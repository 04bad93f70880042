"""Proof that the tests bite: plants each known bug class in a temporary copy of the repository, runs the tests that
should catch it there, and prints caught or missed for each.

    .venv/bin/python tests/mutations.py [NAME ...]      # all (about 10 minutes on one core), or the named ones
    .venv/bin/python tests/mutations.py --list          # their names

Run on demand, not in the default suite (pytest collects only test_*.py). A mutation is one textual change to one
file, checked to apply exactly once, so a refactor that moves the code makes the tool fail loudly instead of
planting nothing. Caught: one of the named tests fails on the copy. Before planting anything, the tests that the chosen
mutations name run once on an unchanged copy: if one fails there, a failure proves nothing, and the tool stops, naming it.
Exit status: 0 when every mutation is caught, 1 when one is missed, 2 for an unknown name or when the tests fail
unchanged, 3 when pytest cannot run them (the project's Python, with pytest-xdist, runs this tool).
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WIRING = "tests/test_loop_wiring.py"

# name: (file, the text as it stands, the bug planted in its place, the tests that must catch it)
MUTATIONS = {
    "truncation valued at the reset observation": (
        "cleanrl/ppo.py",
        'np.stack(infos["final_obs"][truncated])',
        "next_obs.numpy()[truncated]",
        [f"{WIRING}::test_on_policy_advantages_bootstrap_a_time_limit_from_the_true_final_observation[ppo.py]"],
    ),
    "truncation treated as termination": (
        "cleanrl/dqn.py",
        "self.dones[self.pos] = terminations[i]",
        "self.dones[self.pos] = terminations[i] or truncations[i]",
        [f"{WIRING}::test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination[dqn.py]"],
    ),
    "termination bootstrapped": (
        "cleanrl/sac_continuous_action.py",
        "return rewards + gamma * (1.0 - dones) * (torch.min(",
        "return rewards + gamma * (torch.min(",
        [
            "tests/test_continuous_pieces.py",
            f"{WIRING}::test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination[sac_continuous_action.py]",
        ],
    ),
    "the action clamp with dimension 0's bounds": (
        "cleanrl/td3_continuous_action.py",
        "noise * exploration_noise * action_scale, action_low, action_high)",
        "noise * exploration_noise * action_scale, action_low[0], action_high[0])",
        ["tests/test_continuous_pieces.py"],
    ),
    "the log-prob Jacobian's sign": (
        "cleanrl/sac_continuous_action.py",
        "return (gaussian - log_det).sum(dim=1)",
        "return (gaussian + log_det).sum(dim=1)",
        ["tests/test_continuous_pieces.py"],
    ),
    "the ε schedule ending early": (
        "cleanrl/dqn.py",
        "start_e + (end_e - start_e) * min(t / duration, 1.0)",
        "start_e + (end_e - start_e) * min(2 * t / duration, 1.0)",
        ["tests/test_dqn_pieces.py"],
    ),
    "the target network copied every step": (
        "cleanrl/dqn.py",
        "for _ in range(steps_crossed(previous_step, global_step, args.target_network_frequency)):",
        "for _ in range(1):",
        [f"{WIRING}::test_updates_move_the_q_network_and_the_target_network_only_at_its_cadence[dqn.py]"],
    ),
    "the C51 projection's neighbour weights swapped": (
        "cleanrl/c51.py",
        "next_pmfs * (1.0 - upper_weight))\n    return target_pmfs.scatter_add_(1, upper, next_pmfs * upper_weight)",
        "next_pmfs * upper_weight)\n    return target_pmfs.scatter_add_(1, upper, next_pmfs * (1.0 - upper_weight))",
        [
            "tests/test_c51_projection.py",
            f"{WIRING}::test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination[c51.py]",
        ],
    ),
    "the replay memory's next observation taken from the next episode": (
        "cleanrl/dqn.py",
        "final_obs[i] if terminations[i] or truncations[i] else next_obs[i]",
        "next_obs[i]",
        [f"{WIRING}::test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination[dqn.py]"],
    ),
    "truncation valued at the reset observation (Atari)": (
        "cleanrl/ppo_atari.py",
        'np.stack(infos["final_obs"][truncated])',
        "next_obs[truncated]",
        [f"{WIRING}::test_atari_advantages_bootstrap_a_time_limit_from_the_true_final_frames[ppo_atari.py]"],
    ),
    "the replay memory's next observation taken from the next episode (frame memory)": (
        "cleanrl/dqn_atari.py",
        "            if ended:\n                self._write_frame(e, final_obs[e][-1], first=False)",
        "            if False:\n                self._write_frame(e, final_obs[e][-1], first=False)",
        [f"{WIRING}::test_atari_off_policy_targets_bootstrap_a_time_limit_and_not_a_life_lost[dqn_atari.py]"],
    ),
    "the frame stack carried across an episode's end (frame memory)": (
        "cleanrl/c51_atari.py",
        "self._write_frame(e, next_obs[e, -1], first=ended)",
        "self._write_frame(e, next_obs[e, -1], first=False)",
        [f"{WIRING}::test_atari_off_policy_targets_bootstrap_a_time_limit_and_not_a_life_lost[c51_atari.py]"],
    ),
    "a game over on the time limit's last step bootstrapped (envpool)": (
        "cleanrl/ppo_atari_envpool.py",
        'termination = termination | infos["terminated"].astype(bool)',
        "termination = termination",
        [f"{WIRING}::test_envpool_advantages_mask_reset_steps_and_bootstrap_only_a_time_limit"],
    ),
    "the reset step after an episode's end taken as a transition (envpool)": (
        "cleanrl/ppo_atari_envpool.py",
        "    advantages = advantages * valid\n",
        "",
        [f"{WIRING}::test_envpool_advantages_mask_reset_steps_and_bootstrap_only_a_time_limit"],
    ),
    "a time limit's final observation valued from a fresh LSTM state": (
        "cleanrl/ppo_atari_lstm.py",
        "state = (next_lstm_state[0][:, truncated], next_lstm_state[1][:, truncated])",
        "state = (0 * next_lstm_state[0][:, truncated], 0 * next_lstm_state[1][:, truncated])",
        [f"{WIRING}::test_lstm_advantages_bootstrap_a_time_limit_from_the_ended_episodes_state"],
    ),
    "the memory zeroed before a true final observation (recurrent PQN, envpool)": (
        "cleanrl/pqn_atari_envpool_lstm.py",
        "    return 1.0 - done, 1.0 - valid\n",
        "    return 1.0 - done, done\n",
        [f"{WIRING}::test_envpool_q_lambda_returns_bootstrap_only_a_time_limit[pqn_atari_envpool_lstm.py]"],
    ),
    "the policy delay dropped: actor and target networks moved every step (TD3)": (
        "cleanrl/td3_continuous_action.py",
        "if step % args.policy_frequency == 0:  # delayed policy and target updates",
        "if True:",
        [f"{WIRING}::test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination[td3_continuous_action.py]"],
    ),
    "a window cut short by its episode's end discounted by γ^n, not γ^k (Rainbow)": (
        "cleanrl/rainbow_atari.py",
        "data += ((self.gamma**steps).astype(np.float32)",
        "data += ((self.gamma**self.n_step * np.ones_like(steps)).astype(np.float32)",
        [f"{WIRING}::test_rainbow_n_step_targets_stop_at_an_episodes_end_and_bootstrap_only_a_time_limit"],
    ),
    "the intrinsic stream bootstrapped from a reset step (RND, envpool)": (
        "cleanrl/ppo_rnd_envpool.py",
        "        nextvalues = torch.where(is_valid, values[t], nextvalues)",
        "        nextvalues = values[t]",
        [f"{WIRING}::test_rnd_extrinsic_advantages_end_at_episodes_and_intrinsic_ones_run_on"],
    ),
    "the script's own time limit reported as a termination (Procgen)": (
        "cleanrl/ppg_procgen.py",
        "return obs, reward, terminated, truncated | self.cut, info",
        "return obs, reward, terminated | self.cut, truncated, info",
        [f"{WIRING}::test_procgen_advantages_mask_reset_steps_and_bootstrap_the_scripts_time_limit[ppg_procgen.py]"],
    ),
    "the teacher's time limits stored as terminations (QDagger's offline memory)": (
        "cleanrl/qdagger_dqn_atari_impalacnn.py",
        "teacher_step += args.num_envs\n                rb.add(actions, rewards, terminations, truncations,",
        "teacher_step += args.num_envs\n                rb.add(actions, rewards, terminations | truncations, truncations,",
        [f"{WIRING}::test_qdagger_targets_bootstrap_a_time_limit_in_the_teachers_memory_and_the_students[offline]"],
    ),
    "a time limit's final observation valued with an empty memory (TrXL)": (
        "cleanrl/ppo_trxl.py",
        "final_obs, memory[truncated[:, None], final_indices], final_mask, final_indices",
        "final_obs, 0 * memory[truncated[:, None], final_indices], final_mask, final_indices",
        [f"{WIRING}::test_trxl_advantages_bootstrap_a_time_limit_from_the_final_observation_with_its_episodes_memory"],
    ),
    "the policy delay dropped: actor and target parameters moved every step (TD3, JAX)": (
        "cleanrl/td3_continuous_action_jax.py",
        "if step % args.policy_frequency == 0:  # delayed policy and target updates",
        "if True:",
        [
            f"{WIRING}::test_off_policy_memory_keeps_the_true_next_observation_and_termination_only[td3_continuous_action_jax.py]"
        ],
    ),
    "the target parameters copied at every gradient step (DQN, JAX)": (
        "cleanrl/dqn_jax.py",
        "for _ in range(steps_crossed(previous_step, global_step, args.target_network_frequency)):",
        "for _ in range(steps_crossed(previous_step, global_step, args.train_frequency)):",
        [f"{WIRING}::test_off_policy_memory_keeps_the_true_next_observation_and_termination_only[dqn_jax.py]"],
    ),
    "a game over on the time limit's last step bootstrapped (envpool, compiled rollout)": (
        "cleanrl/ppo_atari_envpool_xla_jax_scan.py",
        'termination = termination | infos["terminated"].astype(bool)',
        "termination = termination",
        [f"{WIRING}::test_xla_jax_scan_returns_mask_reset_steps_and_bootstrap_only_a_time_limit"],
    ),
    "each player's time limit valued at the next game's first frames (PettingZoo)": (
        "cleanrl/ppo_pettingzoo_ma_atari.py",
        'np.stack([infos[i]["terminal_observation"] for i in truncated])',
        "next_obs.cpu().numpy()[truncated]",
        [f"{WIRING}::test_pettingzoo_advantages_bootstrap_a_time_limit_from_each_players_true_final_frames"],
    ),
    "the true final observations of two envs ended at once swapped (PPO, continuous)": (
        "cleanrl/ppo_continuous_action.py",
        'np.stack(infos["final_obs"][truncated])',
        'np.stack(infos["final_obs"][truncated[::-1]])',
        [
            f"{WIRING}::test_on_policy_advantages_bootstrap_a_time_limit_from_the_true_final_observation[ppo_continuous_action.py]"
        ],
    ),
    "the true final observations of two envs ended at once swapped (replay memory)": (
        "cleanrl/sac_continuous_action.py",
        "final_obs[i] if terminations[i] or truncations[i] else next_obs[i]",
        "final_obs[::-1][i] if terminations[i] or truncations[i] else next_obs[i]",
        [f"{WIRING}::test_off_policy_memory_of_three_envs_keeps_each_envs_own_final_observation[sac_continuous_action.py]"],
    ),
    "truncation valued at the reset observation (Playground)": (
        "cleanrl/ppo_continuous_action_playground.py",
        "agent.get_value(obs_rms.normalize(jax_to_torch(final_obs)))",
        "agent.get_value(next_obs)",
        [f"{WIRING}::test_playground_advantages_bootstrap_a_time_limit_from_the_true_final_observation"],
    ),
    "truncation treated as termination (Playground)": (
        "cleanrl/ppo_continuous_action_playground.py",
        "terminations[step] = jax_to_torch(termination).float()",
        "terminations[step] = jax_to_torch(termination | truncation).float()",
        [f"{WIRING}::test_playground_advantages_bootstrap_a_time_limit_from_the_true_final_observation"],
    ),
    "an ended env goes on from its own ended state (Playground)": (
        "cleanrl/ppo_continuous_action_playground.py",
        "return jnp.where(ended.reshape((-1,) + (1,) * (now.ndim - 1)), first, now)",
        "return now",
        [f"{WIRING}::test_playground_advantages_bootstrap_a_time_limit_from_the_true_final_observation"],
    ),
    "observation statistics fed the true final observations (Playground)": (
        "cleanrl/ppo_continuous_action_playground.py",
        "    obs_rms.update(next_obs)\n            next_obs = obs_rms.normalize(next_obs)",
        "    obs_rms.update(jax_to_torch(final_obs))\n            next_obs = obs_rms.normalize(next_obs)",
        [f"{WIRING}::test_playground_advantages_bootstrap_a_time_limit_from_the_true_final_observation"],
    ),
    "the target network fed the batch's observations, not the next ones (DQN)": (
        "cleanrl/dqn.py",
        "target_max, _ = target_network(b_next_obs).max(dim=1)",
        "target_max, _ = target_network(b_obs).max(dim=1)",
        [f"{WIRING}::test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination[dqn.py]"],
    ),
    "the target actor fed the batch's observations, not the next ones (TD3)": (
        "cleanrl/td3_continuous_action.py",
        "target_actions = target_actor(b_next_obs)",
        "target_actions = target_actor(b_obs)",
        [f"{WIRING}::test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination[td3_continuous_action.py]"],
    ),
    "the next action sampled at the batch's observations, not the next ones (SAC)": (
        "cleanrl/sac_continuous_action.py",
        "next_state_actions, next_state_log_pi, _ = actor.get_action(b_next_obs)",
        "next_state_actions, next_state_log_pi, _ = actor.get_action(b_obs)",
        [f"{WIRING}::test_off_policy_targets_bootstrap_a_time_limit_and_not_a_termination[sac_continuous_action.py]"],
    ),
    "the reset-step mask not handed over between rollouts (envpool)": (
        "cleanrl/ppo_atari_envpool.py",
        "        last_done = dones[-1].clone()\n",
        "",
        [f"{WIRING}::test_envpool_reset_step_after_a_rollouts_last_step_is_masked_in_the_next_rollout"],
    ),
    "the first update skipped (PPO)": (
        "cleanrl/ppo.py",
        "        optimizer.step()\n",
        "        optimizer.zero_grad()\n",
        [f"{WIRING}::test_on_policy_advantages_bootstrap_a_time_limit_from_the_true_final_observation[ppo.py]"],
    ),
    "the quantile loss's weights swapped (QR-DQN)": (
        "cleanrl/qr_dqn.py",
        "(tau_hat.view(1, n, 1) - (u.detach() < 0).to(u.dtype)).abs()",
        "(tau_hat.view(1, n, 1) - (u.detach() > 0).to(u.dtype)).abs()",
        ["tests/test_quantile_huber_loss.py"],
    ),
    # a forked run once started from its server's random state, so a script that forgot to seed still repeated itself
    "torch's generator left unseeded (PPO)": (
        "cleanrl/ppo.py",
        "    torch.manual_seed(args.seed)\n",
        "",
        ["tests/test_learning.py::test_same_seed_same_logged_values[ppo.py]"],
    ),
}


def plant(copy, path, old, new):
    text = (copy / path).read_text()
    if text.count(old) != 1:
        sys.exit(f"mutations: {path} holds {text.count(old)} copies of the text to change, not 1; update MUTATIONS")
    (copy / path).write_text(text.replace(old, new))


def run_tests(tests, mutation=None):
    """Runs `tests` on a temporary copy of the repository, with `mutation` (file, old text, new text) planted when
    given. Returns (whether one of them failed, seconds taken, pytest's output)."""
    with tempfile.TemporaryDirectory(prefix="cleanrl-mutation-") as tmp:
        copy = Path(tmp) / "repo"
        ignore = shutil.ignore_patterns(".git", ".venv", "runs", "videos", "__pycache__", "site")
        shutil.copytree(REPO, copy, ignore=ignore)
        if mutation:
            plant(copy, *mutation)
        start = time.monotonic()
        # a session of its own, so that an interrupt here ends pytest's workers and their scripts too
        pytest = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", "-x", "-m", "not learning", *tests],
            cwd=copy,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ | {"PYTHONPATH": str(copy)},
            start_new_session=True,
        )
        try:
            stdout, stderr = pytest.communicate()
        except BaseException:
            os.killpg(pytest.pid, signal.SIGKILL)
            pytest.wait()
            raise
        done = subprocess.CompletedProcess(pytest.args, pytest.returncode, stdout, stderr)
        # with -x under xdist a failure ends as "interrupted" (2): read the summary line, not only the code
        failed = done.returncode != 0 and re.search(r"\b\d+ failed\b", done.stdout) is not None
        if done.returncode != 0 and not failed:
            output = done.stdout[-2000:] + done.stderr[-2000:]
            print(f"mutations: pytest could not run {' '.join(tests)}:\n{output}", file=sys.stderr)
            sys.exit(3)
        return failed, time.monotonic() - start, done.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("names", nargs="*", help="mutations to plant (default: all, about 10 minutes on one core)")
    parser.add_argument("--list", action="store_true", help="print the mutations' names and stop")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in MUTATIONS]
    if unknown:
        print(f"mutations: unknown {unknown[0]!r}; --list names them", file=sys.stderr)
        return 2
    names = list(dict.fromkeys(args.names)) or list(MUTATIONS)  # each once
    if args.list:
        print("\n".join(names))
        return 0
    tests = list(dict.fromkeys(test for name in names for test in MUTATIONS[name][3]))
    failed, seconds, output = run_tests(tests)
    if failed:
        print(f"mutations: the tests fail unchanged, so no failure counts as caught:\n{output[-3000:]}", file=sys.stderr)
        return 2
    print(f"the {len(tests)} test{'s pass' if len(tests) > 1 else ' passes'} unchanged ({seconds:.0f} s)", flush=True)
    missed = 0
    for name in names:
        path, old, new, tests = MUTATIONS[name]
        caught, seconds, _ = run_tests(tests, (path, old, new))
        missed += not caught
        print(f"{'caught' if caught else 'MISSED'}  {name}  ({seconds:.0f} s)", flush=True)
    print(f"{len(names) - missed} of {len(names)} caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
