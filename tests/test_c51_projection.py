"""c51.project_distribution against projections worked out by hand.

Support of 5 atoms z = [-2, -1, 0, 1, 2] (delta_z = 1). A next-state distribution that is one-hot
on atom j moves all its mass to r + gamma * z_j, which the projection splits between the two
neighbouring support points in proportion to closeness.
"""

import pytest
import torch

from conftest import load_script

ATOMS = torch.tensor([-2.0, -1.0, 0.0, 1.0, 2.0])


@pytest.fixture(scope="module")
def project():
    return load_script("c51").project_distribution


def one_hot(j, n=5):
    pmf = torch.zeros(1, n)
    pmf[0, j] = 1.0
    return pmf


def projected(project, next_pmfs, reward, gamma, done=0.0, atoms=ATOMS):
    target = project(next_pmfs, torch.tensor([reward]), torch.tensor([done]), gamma, atoms)
    assert not torch.isnan(target).any()
    return target[0].tolist()


def test_atom_landing_on_a_support_point_keeps_all_its_mass(project):
    # 1 + 1 * z_2 = 1 + 0 = 1 = z_3 exactly: b = 3 is an integer, so floor(b) == ceil(b)
    assert projected(project, one_hot(2), reward=1.0, gamma=1.0) == pytest.approx([0, 0, 0, 1, 0])


def test_every_atom_on_a_support_point(project):
    # a uniform distribution shifted by one whole atom: each mass moves one point right, and the two
    # top atoms (1 + 1 and 1 + 2) both end at v_max
    uniform = torch.full((1, 5), 0.2)
    assert projected(project, uniform, reward=1.0, gamma=1.0) == pytest.approx([0, 0.2, 0.2, 0.2, 0.4])


def test_integer_positions_at_both_ends(project):
    # landing exactly on v_min (b = 0) and exactly on v_max (b = 4)
    assert projected(project, one_hot(0), reward=0.0, gamma=1.0) == pytest.approx([1, 0, 0, 0, 0])
    assert projected(project, one_hot(4), reward=0.0, gamma=1.0) == pytest.approx([0, 0, 0, 0, 1])


def test_fractional_split_between_neighbours(project):
    # 0.3 + 0.5 * z_4 = 0.3 + 1 = 1.3: 0.7 of the mass to z = 1, 0.3 to z = 2
    assert projected(project, one_hot(4), reward=0.3, gamma=0.5) == pytest.approx([0, 0, 0, 0.7, 0.3])


def test_fractional_split_of_a_mixed_distribution(project):
    # masses [0.1, 0.2, 0.3, 0.4, 0] on z; with r = 0.25, gamma = 0.5 they land on
    # -0.75, -0.25, 0.25, 0.75 (and 1.25 with no mass):
    #   -0.75 -> 0.75 of 0.1 to z=-1, 0.25 of 0.1 to z=0
    #   -0.25 -> 0.25 of 0.2 to z=-1, 0.75 of 0.2 to z=0
    #    0.25 -> 0.75 of 0.3 to z=0,  0.25 of 0.3 to z=1
    #    0.75 -> 0.25 of 0.4 to z=0,  0.75 of 0.4 to z=1
    next_pmfs = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.0]])
    expected = [0, 0.075 + 0.05, 0.025 + 0.15 + 0.225 + 0.1, 0.075 + 0.3, 0]
    assert projected(project, next_pmfs, reward=0.25, gamma=0.5) == pytest.approx(expected)


def test_clamping_at_v_max_and_v_min(project):
    # 5 + 1 * z_j >= 3 > v_max for every j: all mass at v_max; -5 + z_j <= -3 < v_min: all at v_min
    uniform = torch.full((1, 5), 0.2)
    assert projected(project, uniform, reward=5.0, gamma=1.0) == pytest.approx([0, 0, 0, 0, 1])
    assert projected(project, uniform, reward=-5.0, gamma=1.0) == pytest.approx([1, 0, 0, 0, 0])


def test_partial_clamping(project):
    # r = 1.5, gamma = 1: z + 1.5 = [-0.5, 0.5, 1.5, 2.5, 3.5]; the last two clamp to 2
    uniform = torch.full((1, 5), 0.2)
    expected = [0, 0.1, 0.1 + 0.1, 0.1 + 0.1, 0.1 + 0.2 + 0.2]
    assert projected(project, uniform, reward=1.5, gamma=1.0) == pytest.approx(expected)


def test_terminal_transition_puts_all_mass_at_the_reward(project):
    # done: every atom becomes r whatever the next distribution; r = 0.6 splits 0.4 / 0.6 between 0 and 1
    uniform = torch.full((1, 5), 0.2)
    assert projected(project, uniform, reward=0.6, gamma=0.99, done=1.0) == pytest.approx([0, 0, 0.4, 0.6, 0])
    assert projected(project, one_hot(4), reward=-1.0, gamma=0.99, done=1.0) == pytest.approx([0, 1, 0, 0, 0])


def test_terminal_reward_beyond_the_support_is_clamped(project):
    assert projected(project, one_hot(1), reward=10.0, gamma=0.99, done=1.0) == pytest.approx([0, 0, 0, 0, 1])


def test_batch_rows_are_independent_and_sum_to_one(project):
    torch.manual_seed(0)
    next_pmfs = torch.softmax(torch.randn(64, 11), dim=1)
    atoms = torch.linspace(-10, 10, 11)
    rewards = torch.randn(64) * 8
    dones = (torch.rand(64) < 0.3).float()
    target = project(next_pmfs, rewards, dones, 0.9, atoms)
    assert target.shape == (64, 11)
    assert (target >= 0).all()
    torch.testing.assert_close(target.sum(1), torch.ones(64))
    # each row equals the projection of that row alone
    for i in (0, 17, 63):
        row = project(next_pmfs[i : i + 1], rewards[i : i + 1], dones[i : i + 1], 0.9, atoms)
        torch.testing.assert_close(target[i : i + 1], row)
    # and the projection keeps the mean wherever nothing was clamped
    inside = ((rewards.unsqueeze(1) + 0.9 * (1 - dones.unsqueeze(1)) * atoms).abs() <= 10).all(1)
    expected_mean = rewards + 0.9 * (1 - dones) * (next_pmfs * atoms).sum(1)
    torch.testing.assert_close((target * atoms).sum(1)[inside], expected_mean[inside], rtol=1e-5, atol=1e-4)


def test_published_support_with_integer_landing_points(project):
    # the default support: 101 atoms on [-100, 100], delta_z = 2. r = 2, gamma = 1 shifts every atom
    # exactly one support point up; the top two both land on v_max
    atoms = torch.linspace(-100, 100, 101)
    next_pmfs = torch.full((1, 101), 1 / 101)
    target = project(next_pmfs, torch.tensor([2.0]), torch.tensor([0.0]), 1.0, atoms)[0]
    assert not torch.isnan(target).any()
    assert target[0].item() == 0
    torch.testing.assert_close(target[1:100], torch.full((99,), 1 / 101))
    assert target[100].item() == pytest.approx(2 / 101)
