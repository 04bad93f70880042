"""What the JAX twins' parity tests share: the same inputs for both frameworks, and a torch network's weights
as the Flax parameters of its JAX twin, so that both networks can be fed the same observations."""

import jax.numpy as jnp
import numpy as np
import torch


def both(*arrays):
    """The same float32 inputs as torch tensors and as JAX arrays."""
    return [torch.as_tensor(a) for a in arrays], [jnp.asarray(a) for a in arrays]


def dense_params(module):
    """A torch module's nn.Linear children as the Flax parameters of the same layer names (kernel = weight.T)."""
    return {
        "params": {
            name: {"kernel": jnp.asarray(layer.weight.detach().numpy().T), "bias": jnp.asarray(layer.bias.detach().numpy())}
            for name, layer in module.named_children()
        }
    }


def nature_cnn_params(q_network):
    """The Flax params (Conv_0..2, Dense_0, Dense_1) of a JAX Atari Q-network holding the weights of its torch twin,
    whose `network` is the Nature CNN as an nn.Sequential (dqn_atari.py, c51_atari.py)."""
    convs = [m for m in q_network.network if isinstance(m, torch.nn.Conv2d)]
    dense = [m for m in q_network.network if isinstance(m, torch.nn.Linear)]

    def weight(m):
        return m.weight.detach().numpy()

    def bias(m):
        return m.bias.detach().numpy()

    # convolutions: torch (out, in, h, w) -> Flax (h, w, in, out)
    params = {f"Conv_{i}": {"kernel": weight(c).transpose(2, 3, 1, 0), "bias": bias(c)} for i, c in enumerate(convs)}
    # the first dense layer reads the flattened 64x7x7 maps: torch flattens them (C, H, W), Flax (H, W, C)
    out_features = dense[0].out_features
    chw_kernel = weight(dense[0]).reshape(out_features, 64, 7, 7)
    params["Dense_0"] = {"kernel": chw_kernel.transpose(2, 3, 1, 0).reshape(-1, out_features), "bias": bias(dense[0])}
    params["Dense_1"] = {"kernel": weight(dense[1]).T, "bias": bias(dense[1])}
    return {"params": params}


def fill_both(buffers, steps=300, num_envs=2, seed=0):
    """Feeds the same made-up frames, actions, rewards, terminations and truncations to every buffer."""
    rng = np.random.default_rng(seed)
    frame = lambda: rng.integers(0, 256, (num_envs, 4, 3, 3), dtype=np.uint8)  # noqa: E731
    obs = frame()
    for rb in buffers:
        rb.start(obs)
    for _ in range(steps):
        actions, rewards = rng.integers(0, 4, num_envs), rng.normal(size=num_envs).astype(np.float32)
        terminations, truncations = rng.random(num_envs) < 0.05, rng.random(num_envs) < 0.05
        next_obs, final_obs = frame(), frame()
        for rb in buffers:
            rb.add(actions, rewards, terminations, truncations, next_obs, final_obs)


# --resume in a JAX script, run up to its training loop: the state the script made (`fresh`) and the state the module
# put in its place (`restored`), compared with the checkpoint leaf by leaf, for every entry that holds JAX arrays
RESTORED_JAX_STATE = """
import sys
import flax.serialization, jax, numpy as np
from cleanrl_utils import checkpoint

script, *args = sys.argv[1:]
sys.argv = [script, *args]
start = checkpoint.Checkpoint.start


class AtTheLoop(Exception):
    pass


def start_and_stop(self, writer, envs, scope, names, **kwargs):
    fresh = {name: scope[name] for name in names.split()}
    start(self, writer, envs, scope, names, **kwargs)
    raise AtTheLoop(self, fresh, {name: scope[name] for name in names.split()})


checkpoint.Checkpoint.start = start_and_stop
try:
    exec(compile(open(script).read(), script, "exec"), {"__name__": "__main__", "__file__": script})
    sys.exit("the script ended without reaching its training loop")
except AtTheLoop as stop:
    ckpt, fresh, restored = stop.args
saved = checkpoint.read(checkpoint.checkpoint_path(ckpt.args.resume), ckpt.script)


def leaves(value, kind):
    return jax.tree_util.tree_flatten_with_path(flax.serialization.to_state_dict(value) if kind == "flax" else value)[0]


checked = []
for name, (kind, payload) in saved["state"].items():
    if kind != "flax" and not isinstance(fresh[name], jax.Array):
        continue
    was, now, kept = leaves(fresh[name], kind), leaves(restored[name], kind), leaves(checkpoint.decode(payload), "value")
    assert [p for p, _ in now] == [p for p, _ in was] == [p for p, _ in kept], name
    for (path, new), (_, old), (_, value) in zip(now, was, kept):
        where = name + jax.tree_util.keystr(path)
        assert np.array_equal(np.asarray(new), np.asarray(value)), where
        if isinstance(old, jax.Array):  # a device array of the dtype and shape the jitted functions were traced with
            assert isinstance(new, jax.Array) and (new.dtype, new.shape) == (old.dtype, old.shape), (where, new, old)
    checked.append(name)
print("restored:", " ".join(checked))
"""


def check_restored_jax_state(script, run_dir, total_timesteps, cwd, names):
    """Runs `script --resume run_dir --total-timesteps total_timesteps` up to its training loop and checks that every
    entry of `names` (the script's flax structs and JAX keys) came back from the checkpoint leaf by leaf, each a
    device array of the dtype and shape of the one the script made (so the jitted functions take it as they took
    that one). The resumed run that check_checkpoint_and_resume runs to its end shows that they train on from it.
    The run folder gets the resumed start's (empty) events file: call it last on a run folder."""
    import subprocess
    import sys

    from conftest import SCRIPTS, script_env

    command = [sys.executable, "-c", RESTORED_JAX_STATE, str(SCRIPTS / script), "--resume", str(run_dir)]
    command += ["--total-timesteps", str(total_timesteps)]
    result = subprocess.run(command, cwd=cwd, env=script_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == f"restored: {names}", result.stdout[-2000:]


# a Gymnasium env that renders no frames (CartPole's dynamics, no render modes): --capture-video on it is refused
NO_FRAMES = """
import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class NoFrames(CartPoleEnv):
    metadata = {"render_modes": [], "render_fps": 50}


gym.register("NoFrames-v0", entry_point=NoFrames, max_episode_steps=500)
"""


def no_frames_env(folder):
    """(the env id `no_frames:NoFrames-v0`, a script environment that can import its module, written into `folder`)."""
    import os

    from conftest import script_env

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "no_frames.py").write_text(NO_FRAMES)
    return "no_frames:NoFrames-v0", script_env() | {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    }
