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
