"""ppo_atari_envpool_xla_jax.py and ppo_atari_envpool_xla_jax_scan.py, the JAX versions of ppo_atari_envpool.py:
their pure pieces give the twin's numbers (masked GAE, masked mean, the PPO loss with and without the clipped value
loss, the Nature-CNN agent with the twin's weights, the game statistics), envpool's XLA step and the host fallback
step the same games, each script runs with either and logs the same values with both, checkpoints and resumes
(its train state and key back leaf by leaf), films games whose frames move, refuses bad input, and runs a run too
short for an update with a warning.
"""

import numpy as np
import pytest
import torch

from cleanrl_utils.report import read_scalars
from conftest import PPO_TAGS, check_checkpoint_and_resume, check_refused, check_warns_and_runs, load_script, run_copied_alone
from jax_parity import check_restored_jax_state

SCRIPTS = ["ppo_atari_envpool_xla_jax.py", "ppo_atari_envpool_xla_jax_scan.py"]
twin = load_script("ppo_atari_envpool")
jax_scripts = {script: load_script(script[:-3]) for script in SCRIPTS}

# Breakout, 2 envs x 16 steps, two updates of one epoch; 20-step games end inside the run and keep the 10
# evaluation games short
LIMIT = 20
TINY = ["--num-envs", 2, "--num-steps", 16, "--total-timesteps", 64, "--num-minibatches", 2, "--update-epochs", 1]
TINY += ["--max-episode-steps", LIMIT]


@pytest.fixture(params=SCRIPTS)
def script(request):
    return request.param


@pytest.fixture
def module(script):
    return jax_scripts[script]


def rollout_flags(rng, num_steps, num_envs):
    """dones/terminations of a (T, N) rollout with every edge case: terminations and truncations mid-rollout,
    a done on the last step, the previous rollout's last done carried into the first step."""
    dones = (rng.random((num_steps, num_envs)) < 0.3).astype(np.float32)
    terminations = dones * (rng.random((num_steps, num_envs)) < 0.5)
    dones[-1, 0], terminations[-1, 0] = 1.0, 1.0  # terminated at the last step
    dones[-1, 1], terminations[-1, 1] = 1.0, 0.0  # truncated at the last step
    last_done = (rng.random(num_envs) < 0.5).astype(np.float32)
    last_done[:2] = [1.0, 0.0]
    return dones, terminations.astype(np.float32), last_done


def test_compute_gae_matches_the_twin(module):
    rng = np.random.default_rng(0)
    for num_steps, num_envs in [(1, 3), (7, 4), (33, 3)]:
        rewards = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
        values = rng.normal(size=(num_steps, num_envs)).astype(np.float32)
        next_value = rng.normal(size=num_envs).astype(np.float32)
        dones, terminations, last_done = rollout_flags(rng, num_steps, num_envs)
        for gamma, gae_lambda in [(0.99, 0.95), (0.5, 0.5), (1.0, 1.0), (0.0, 0.0)]:
            inputs = (rewards, values, dones, terminations, last_done, next_value)
            expected = twin.compute_gae(*map(torch.as_tensor, inputs), gamma, gae_lambda)
            got = module.compute_gae(*inputs, gamma, gae_lambda)
            for e, g in zip(expected, got):
                np.testing.assert_allclose(np.asarray(g), e.numpy(), rtol=1e-5, atol=1e-5)


def test_masked_mean_matches_the_twin(module):
    rng = np.random.default_rng(1)
    x = rng.normal(size=50).astype(np.float32)
    for mask in [rng.random(50) < 0.5, np.ones(50), np.zeros(50)]:
        mask = mask.astype(np.float32)
        expected = twin.masked_mean(torch.as_tensor(x), torch.as_tensor(mask)).item()
        np.testing.assert_allclose(float(module.masked_mean(x, mask)), expected, rtol=1e-6, atol=1e-7)


def twin_loss(newlogprob, entropy, newvalue, logprobs, advantages, returns, values, valid, clip_coef, clip_vloss, norm_adv):
    """ppo_atari_envpool.py's minibatch loss, line by line (it is inline in its training loop there)."""
    masked_mean = twin.masked_mean
    logratio = newlogprob - logprobs
    ratio = logratio.exp()
    old_approx_kl = masked_mean(-logratio, valid)
    approx_kl = masked_mean((ratio - 1) - logratio, valid)
    clipfrac = masked_mean(((ratio - 1.0).abs() > clip_coef).float(), valid)
    if norm_adv:
        mean = masked_mean(advantages, valid)
        variance = (((advantages - mean) ** 2) * valid).sum() / (valid.sum() - 1).clamp(min=1.0)
        advantages = (advantages - mean) / (variance.sqrt() + 1e-8)
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = masked_mean(torch.max(pg_loss1, pg_loss2), valid)
    if clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = values + torch.clamp(newvalue - values, -clip_coef, clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        v_loss = 0.5 * masked_mean(torch.max(v_loss_unclipped, v_loss_clipped), valid)
    else:
        v_loss = 0.5 * masked_mean((newvalue - returns) ** 2, valid)
    entropy_loss = masked_mean(entropy, valid)
    loss = pg_loss - 0.01 * entropy_loss + v_loss * 0.5
    return loss, (pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac)


@pytest.mark.parametrize("clip_vloss", [True, False])
@pytest.mark.parametrize("norm_adv", [True, False])
def test_ppo_loss_matches_the_twin(module, clip_vloss, norm_adv):
    rng = np.random.default_rng(2)
    size, clip_coef = 64, 0.1
    logprobs = rng.normal(-1.5, 0.3, size)
    inputs = dict(
        # ratios well outside [0.9, 1.1] on both sides, so that the clipped branches count
        newlogprob=logprobs + rng.normal(0, 0.3, size),
        entropy=rng.uniform(0.5, 1.4, size),
        newvalue=rng.normal(size=size),
        logprobs=logprobs,
        advantages=rng.normal(size=size),
        returns=rng.normal(size=size),
        values=rng.normal(size=size),
        valid=(rng.random(size) < 0.8).astype(np.float64),
    )
    inputs = {key: value.astype(np.float32) for key, value in inputs.items()}
    expected_loss, expected_terms = twin_loss(
        **{key: torch.as_tensor(value) for key, value in inputs.items()},
        clip_coef=clip_coef,
        clip_vloss=clip_vloss,
        norm_adv=norm_adv,
    )
    loss, terms = module.ppo_loss(
        **inputs, clip_coef=clip_coef, clip_vloss=clip_vloss, norm_adv=norm_adv, ent_coef=0.01, vf_coef=0.5
    )
    np.testing.assert_allclose(float(loss), expected_loss.item(), rtol=1e-5, atol=1e-6)
    for got, expected in zip(terms, expected_terms):
        np.testing.assert_allclose(float(got), expected.item(), rtol=1e-5, atol=1e-6)
    assert 0.1 < float(terms[5]) < 0.9  # some ratios were clipped, some not


def test_clip_vloss_is_honoured(module):
    # one valid step, return 0, old value 0, new value 1: the clipped value 0.1 is nearer the return, so the clipped
    # loss takes the larger unclipped error 1 either way; with the old value at 1 and the new value at 0 the clipped
    # value 0.9 is farther from the return and only the clipped loss counts it
    one = lambda v: np.array([v], np.float32)  # noqa: E731
    common = dict(newlogprob=one(0), entropy=one(0), logprobs=one(0), advantages=one(0), returns=one(0), valid=one(1))
    coefs = dict(clip_coef=0.1, norm_adv=False, ent_coef=0.0, vf_coef=1.0)
    _, terms = module.ppo_loss(newvalue=one(0), values=one(1), clip_vloss=True, **common, **coefs)
    assert float(terms[1]) == pytest.approx(0.5 * 0.9**2)
    _, terms = module.ppo_loss(newvalue=one(0), values=one(1), clip_vloss=False, **common, **coefs)
    assert float(terms[1]) == 0.0


def test_reset_steps_get_no_gradient(module):
    import jax

    rng = np.random.default_rng(3)
    inputs = {k: rng.normal(size=8).astype(np.float32) for k in ("entropy", "logprobs", "advantages", "returns", "values")}
    valid = np.array([1, 1, 0, 1, 0, 1, 1, 1], np.float32)

    def loss(newlogprob, newvalue):
        return module.ppo_loss(
            newlogprob, inputs["entropy"], newvalue, inputs["logprobs"], inputs["advantages"], inputs["returns"],
            inputs["values"], valid, 0.1, True, True, 0.01, 0.5,
        )[0]  # fmt: skip

    grads = jax.grad(loss, argnums=(0, 1))(inputs["logprobs"] + 0.05, rng.normal(size=8).astype(np.float32))
    for grad in grads:
        assert np.all(np.asarray(grad)[valid == 0] == 0) and np.any(np.asarray(grad)[valid == 1] != 0)


def test_agent_with_the_twins_weights_gives_its_outputs(module):
    import jax

    torch.manual_seed(0)
    n_actions = 6
    torch_agent = twin.Agent(n_actions)
    state = {key: value.detach().numpy() for key, value in torch_agent.state_dict().items()}
    conv = lambda w: np.transpose(w, (2, 3, 1, 0))  # noqa: E731  OIHW -> HWIO
    # torch flattens the (64, 7, 7) features channel-first, flax's (7, 7, 64) channel-last
    dense = state["network.7.weight"].reshape(512, 64, 7, 7).transpose(2, 3, 1, 0).reshape(64 * 7 * 7, 512)
    params = {
        "params": {
            "network": {
                "layers_1": {"kernel": conv(state["network.0.weight"]), "bias": state["network.0.bias"]},
                "layers_3": {"kernel": conv(state["network.2.weight"]), "bias": state["network.2.bias"]},
                "layers_5": {"kernel": conv(state["network.4.weight"]), "bias": state["network.4.bias"]},
                "layers_8": {"kernel": dense, "bias": state["network.7.bias"]},
            },
            "actor": {"kernel": state["actor.weight"].T, "bias": state["actor.bias"]},
            "critic": {"kernel": state["critic.weight"].T, "bias": state["critic.bias"]},
        }
    }
    agent = module.Agent(n_actions)
    template = agent.init(
        jax.random.PRNGKey(0), np.zeros((1, 4, 84, 84), np.uint8), np.zeros(1, np.int32), method=agent.get_action_and_value
    )
    assert jax.tree_util.tree_map(np.shape, template) == jax.tree_util.tree_map(np.shape, params)
    obs = np.random.default_rng(4).integers(0, 256, (3, 4, 84, 84), dtype=np.uint8)
    apply = jax.jit(agent.apply, static_argnames="method")  # compiled once per method: cheaper than op by op
    with torch.no_grad():
        expected_value = torch_agent.get_value(torch.as_tensor(obs)).numpy()
    np.testing.assert_allclose(
        np.asarray(apply(params, obs, method=module.Agent.get_value)), expected_value, rtol=1e-5, atol=1e-5
    )
    for action in range(n_actions):  # every action's log-probability: all the logits
        actions = np.full(3, action)
        with torch.no_grad():
            _, logprob, entropy, value = torch_agent.get_action_and_value(torch.as_tensor(obs), torch.as_tensor(actions))
        got = apply(params, obs, actions, method=module.Agent.get_action_and_value)
        for g, e in zip(got[1:], (logprob, entropy, value)):
            np.testing.assert_allclose(np.asarray(g), e.numpy(), rtol=1e-5, atol=1e-5)
    # sampling: valid actions, one per env
    actions = apply(params, obs, key=jax.random.PRNGKey(1), method=module.Agent.get_action_and_value)[0]
    assert actions.shape == (3,) and all(0 <= a < n_actions for a in np.asarray(actions))


def info(reward, terminated, elapsed):
    return {
        "reward": np.array(reward, dtype=np.float32),
        "terminated": np.array(terminated, dtype=np.int32),
        "elapsed_step": np.array(elapsed, dtype=np.int32),
    }


def test_episode_statistics_match_the_twin(module):
    import jax.numpy as jnp

    no = np.array([False, False])
    steps = [  # the twin's test: rewards accumulate, a life loss ends nothing, game over and the time limit end games
        (no, info([1, 10], [0, 0], [1, 1])),
        (no, info([0, 5], [0, 0], [2, 2])),
        (no, info([0, 0], [0, 0], [2, 3])),
        (no, info([4, 0], [0, 0], [3, 4])),
        (no, info([0, 0], [0, 1], [4, 5])),
        (np.array([True, False]), info([7, 0], [0, 0], [100, 0])),
        (no, info([0, 3], [0, 0], [0, 1])),
        (np.array([False, True]), info([50, 200], [1, 0], [1, 2])),
    ]
    expected, got = twin.EpisodeStatistics(2), module.EpisodeStatistics(jnp.zeros(2))
    for truncations, infos in steps:
        finished = expected.update(truncations, infos)
        got, (ended, scores, lengths) = got.update(truncations, infos)
        ended = np.asarray(ended)
        assert [(int(i), float(scores[i]), int(lengths[i])) for i in np.nonzero(ended)[0]] == finished


def test_xla_and_host_steps_play_the_same_games(module):
    import envpool
    import jax
    import jax.numpy as jnp

    trajectories = []
    for xla in (True, False):
        envs = module.make_vector_env("Breakout-v5", 2, 7, 12)
        first_obs, _ = envs.reset()
        handle, step_env, interface = module.make_step_env(envs, xla)
        assert interface.startswith("envpool's XLA interface" if xla else "host stepping")
        step_env = jax.jit(step_env)
        steps = [first_obs]
        for t in range(30):  # 12-step games with life losses, time limits and reset steps on the way
            handle, step = step_env(handle, jnp.array([t % 4, (t + 1) % 4], jnp.int32))
            steps.append(jax.device_get(step))
        envs.close()
        trajectories.append(steps)
    xla_steps, host_steps = trajectories
    assert any(step[3].any() for step in xla_steps[1:])  # the time limit was reached
    for a, b in zip(jax.tree_util.tree_leaves(xla_steps), jax.tree_util.tree_leaves(host_steps)):
        np.testing.assert_array_equal(a, b)

    class NoXla:
        def xla(self):
            raise RuntimeError("no XLA here")

        config = {"num_envs": 2}
        single_observation_space = envpool.make_spec("Breakout-v5").observation_space

    _, _, interface = module.make_step_env(NoXla())
    assert interface == "host stepping through an ordered io_callback (envpool's XLA interface is not available: no XLA here)"


def logged(run_dir):
    """Every scalar but the timing ones, tag -> (steps, values)."""
    tags = ["charts/episodic_return", "charts/episodic_length"] + PPO_TAGS
    return {tag: read_scalars(str(run_dir), tag) for tag in tags if tag != "charts/SPS"}


def run_both_ways(script, tmp_path, fork_script):
    """A default-flags run, checkpointed every iteration and resumed to twice its budget (conftest's
    check_checkpoint_and_resume), and the file copied alone (videos, checkpoint, evaluation, W&B offline), one of
    them stepping the envs through envpool's XLA interface and the other on the host (--no-xla-env)."""
    # the scan variant films through its XLA program's host callback, the other through the host stepping
    alone_flags = ["--no-xla-env"] if script == SCRIPTS[0] else []
    default_flags = [] if script == SCRIPTS[0] else ["--no-xla-env"]
    workdir = tmp_path / "default"
    workdir.mkdir()
    run_dir = check_checkpoint_and_resume(script, [*TINY, *default_flags], 1, workdir, run=fork_script)
    return run_dir, run_copied_alone(script, *TINY, *alone_flags, tmp_path=tmp_path)


def test_default_and_copied_alone_runs(script, tmp_path, fork_script):
    run_dir, (alone_dir, checkpoint, _) = run_both_ways(script, tmp_path, fork_script)

    # the default flags log each tag once per iteration: two, and two more resumed
    for tag in PPO_TAGS:
        assert len(read_scalars(str(run_dir), tag)[0]) == 4, tag
    _, lengths = read_scalars(str(run_dir), "charts/episodic_length")
    assert len(lengths) >= 2 and max(lengths) <= LIMIT
    assert not (run_dir.parent.parent / "videos").exists()

    # XLA and host stepping log the same values: the same seed and flags, the copied run (other interface, plus
    # videos, checkpoint and W&B) trains identically, as the default run did before its resume
    default, alone = logged(run_dir), logged(alone_dir)
    assert len(alone["charts/episodic_return"][0]) >= 2
    for tag in default:
        first = default[tag][0] <= 64
        np.testing.assert_array_equal(default[tag][0][first], alone[tag][0], err_msg=tag)
        np.testing.assert_allclose(default[tag][1][first], alone[tag][1], rtol=1e-6, err_msg=tag)
    # the resumed run took the agent's train state and its JAX key back as saved
    check_restored_jax_state(script, run_dir, 192, run_dir.parent.parent, "agent_state key")

    # the videos show moving frames
    from moviepy import VideoFileClip

    assert checkpoint["args"]["max_episode_steps"] == LIMIT and "kernel" in checkpoint["model"]["params"]["actor"]
    for folder in (alone_dir.name, f"{alone_dir.name}-eval"):
        with VideoFileClip(str(alone_dir.parent.parent / "videos" / folder / "rl-video-episode-0.mp4")) as clip:
            frames = [frame.tobytes() for frame in clip.iter_frames()]
        # a whole 20-step game: its first observation and 20 steps, most of them different pictures
        assert len(frames) >= LIMIT and len(set(frames)) > LIMIT // 2, (folder, len(frames), len(set(frames)))


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--env-id", "BreakoutNoFrameskip-v4"], "BreakoutNoFrameskip-v4 is not an envpool id (did you mean Breakout-v5?)"),
        (["--max-episode-steps", 0], "--max-episode-steps must be in [1, 2**31), got 0"),
        (["--seed", 2**31 - 1], "--seed must be in [0, 2**31 - --num-envs] (int32), got 2147483647"),
        (["--num-minibatches", 3], "does not split into --num-minibatches 3"),
        (["--total-timesteps", -1], "--total-timesteps, --num-envs, --num-steps, --num-minibatches, --update-epochs must be"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(script, flags, message, workdir, fork_script):
    result = fork_script(script, "--capture-video", "--track", "--save-model", *flags, cwd=workdir, timeout=120)
    check_refused(result, script, message, workdir)


def test_a_run_without_a_gradient_step_runs_with_a_warning(script, workdir, fork_script):
    result = fork_script(script, "--num-envs", 2, "--num-steps", 16, "--total-timesteps", 16, cwd=workdir, timeout=300)
    check_warns_and_runs(result, script, "--total-timesteps below one batch", cwd=workdir, loss_tag="losses/value_loss")
    assert "time limit 27000 agent steps" in result.stdout and "env stepping: envpool's XLA interface" in result.stdout
