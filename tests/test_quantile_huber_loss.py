"""qr_dqn.quantile_huber_loss (Dabney et al. 2018, eq. 10) against values worked out by hand.

With N = 2 quantiles the midpoints are τ̂ = (1/4, 3/4). For u = target - quantile, the Huber loss of width κ = 1 is
u²/2 where |u| <= 1 and |u| - 1/2 beyond; quantile i weighs it τ̂_i where the target lies above (u >= 0) and 1 - τ̂_i
where it lies below. The loss sums over the quantiles and averages over the target's samples and the batch.
"""

import pytest
import torch

from conftest import load_script


@pytest.fixture(scope="module")
def loss_fn():
    return load_script("qr_dqn").quantile_huber_loss


def test_a_small_case_by_hand(loss_fn):
    # quantiles (0, 1), target samples (0.5, 3):
    #   i = 0 (τ̂ 1/4): u = 0.5, 3 -> 1/4 * 0.125 and 1/4 * 2.5, averaged over j: 0.328125
    #   i = 1 (τ̂ 3/4): u = -0.5, 2 -> (1 - 3/4) * 0.125 and 3/4 * 1.5, averaged over j: 0.578125
    loss = loss_fn(torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 3.0]]))
    assert loss.item() == pytest.approx(0.90625)
    # a batch averages its rows; quantiles that all sit on the one sample lose nothing
    batch = loss_fn(torch.tensor([[0.0, 1.0], [0.0, 1.0]]), torch.tensor([[0.5, 3.0], [0.5, 3.0]]))
    assert batch.item() == pytest.approx(0.90625)
    assert loss_fn(torch.tensor([[2.0, 2.0]]), torch.tensor([[2.0]])).item() == 0.0


def test_the_loss_is_asymmetric_in_each_quantile(loss_fn):
    # both quantiles at 0: a target 0.5 above pulls the upper quantile (τ̂ 3/4) up three times as hard as the lower;
    # a target 0.5 below pulls the lower one down three times as hard (gradients: -τ̂ u and (1 - τ̂) |u| per quantile)
    for target, expected in ((0.5, [-0.125, -0.375]), (-0.5, [0.375, 0.125])):
        quantiles = torch.zeros(1, 2, requires_grad=True)
        loss_fn(quantiles, torch.tensor([[target]])).backward()
        assert quantiles.grad[0].tolist() == pytest.approx(expected)


def test_beyond_kappa_the_pull_is_bounded(loss_fn):
    # a target 3 above lies past κ = 1 and κ = 2, in the Huber loss's linear part: each quantile is pulled by its weight
    # τ̂ alone, whatever the distance; with κ = 4 it lies inside, in the quadratic part, pulled by τ̂ u / κ
    for kappa, expected in ((1.0, [-0.25, -0.75]), (2.0, [-0.25, -0.75]), (4.0, [-0.1875, -0.5625])):
        quantiles = torch.zeros(1, 2, requires_grad=True)
        loss_fn(quantiles, torch.tensor([[3.0]]), kappa=kappa).backward()
        assert quantiles.grad[0].tolist() == pytest.approx(expected), kappa


def test_minimising_it_finds_the_quantiles_at_the_midpoints(loss_fn):
    # with a small κ the loss is the quantile regression loss: gradient descent on 4 free quantiles, against 1,000 samples
    # spread evenly over [0, 1], ends at the 1/8, 3/8, 5/8 and 7/8 quantiles
    samples = (torch.arange(1000, dtype=torch.float32) + 0.5).div(1000).unsqueeze(0)
    quantiles = torch.zeros(1, 4, requires_grad=True)
    optimizer = torch.optim.SGD([quantiles], lr=0.05)
    for _ in range(3000):
        optimizer.zero_grad()
        loss_fn(quantiles, samples, kappa=0.01).backward()
        optimizer.step()
    assert quantiles[0].tolist() == pytest.approx([0.125, 0.375, 0.625, 0.875], abs=0.01)


def test_the_atari_script_has_the_same_loss(loss_fn):
    atari = load_script("qr_dqn_atari").quantile_huber_loss
    generator = torch.Generator().manual_seed(0)
    quantiles, targets = torch.randn(8, 200, generator=generator), torch.randn(8, 200, generator=generator) * 3
    assert atari(quantiles, targets).item() == pytest.approx(loss_fn(quantiles, targets).item(), rel=1e-6)
