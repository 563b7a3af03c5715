"""BinaryTreeBank: many binary-tree mechanisms as arrays, identical to one BinaryTreeMechanism per stream.

The bank is what Fed_UCB (agents/zhu.py) uses; these tests pin it to the per-tree mechanism of
tests/test_dp_mechanisms.py bit for bit (same draws, same order, same sums) and check the tree properties of
zhu-gossip-ucb §5.1 T8 and the per-node Laplace scale of S6 on the bank itself.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedbandit_envs.privacy.mechanisms import BinaryTreeBank, BinaryTreeMechanism, dyadic_blocks


def play(
    num_trees: int,
    num_streams: int,
    positions: int,
    seed: int,
    **params,
) -> tuple[BinaryTreeBank, list[BinaryTreeMechanism], list[np.ndarray]]:
    """Feed the same random schedule to a bank and to one mechanism per tree (shared generators, same seeds).

    At every position a random subset of the trees (in random order, several per generator allowed) records a value;
    returns the bank, the mechanisms and the bank's return values minus the mechanisms' (all must be exactly 0).
    """
    schedule = np.random.default_rng(seed)
    stream_of_tree = np.arange(num_trees) % num_streams
    noisy = not math.isinf(params["epsilon"])
    bank_rngs = [np.random.default_rng([seed, s]) for s in range(num_streams)] if noisy else None
    tree_rngs = [np.random.default_rng([seed, s]) for s in range(num_streams)] if noisy else [None] * num_streams
    bank = BinaryTreeBank(num_trees, rngs=bank_rngs, stream_of_tree=stream_of_tree, **params)
    trees = [BinaryTreeMechanism(**params, rng=tree_rngs[s]) for s in stream_of_tree]
    differences = []
    for position in range(positions):
        listed = schedule.permutation(num_trees)[: schedule.integers(0, num_trees + 1)]
        values = schedule.uniform(-1.0, 1.0, len(listed))
        expected = []
        for r, value in zip(listed.tolist(), values.tolist()):
            trees[r].skip(position - trees[r].count)
            expected.append(trees[r].add(value))
        differences.append(bank.add(listed, position, values) - np.array(expected))
    return bank, trees, differences


@pytest.mark.parametrize(
    "params",
    [
        {"epsilon": 1.0, "stream_length": 3000},
        {"epsilon": 0.5, "stream_length": 3000, "noise_on_empty": True},
        {"epsilon": 2.0, "stream_length": 2999, "split": "ln_T", "horizon": 2998, "sensitivity": 6.0},
        {"epsilon": math.inf, "stream_length": 3000},
    ],
    ids=["strict", "noise_on_empty", "ln_T", "infinite_epsilon"],
)
@pytest.mark.parametrize("num_streams", [3, 12], ids=["shared_generators", "one_generator_per_tree"])
def test_bank_equals_one_mechanism_per_tree_bit_for_bit(params: dict, num_streams: int) -> None:
    # 12 trees over 2500 positions: each generator refills its look-ahead buffer several times (DRAW_BLOCK = 1024)
    bank, trees, differences = play(12, num_streams, 2500, seed=7, **params)
    assert all(not d.any() for d in differences)  # exact equality of every returned sum
    np.testing.assert_array_equal(bank.counts, [t.count for t in trees])
    np.testing.assert_array_equal(bank.exact_sums, [t.exact_sum for t in trees])
    np.testing.assert_array_equal(bank.noisy_sums, [t.noisy_sum for t in trees])
    np.testing.assert_array_equal(bank.noise_draws, [t.noise_draws for t in trees])
    assert all(bank.node_noises(r) == t.node_noises() for r, t in enumerate(trees))
    assert (bank.levels, bank.eps_prime, bank.scale, bank.epsilon_guaranteed) == (
        trees[0].levels,
        trees[0].eps_prime,
        trees[0].scale,
        trees[0].epsilon_guaranteed,
    )
    assert bank.event() == trees[0].event()
    if math.isinf(params["epsilon"]):
        assert not bank.noise_draws.any() and bank.scale == 0.0
    else:
        per_generator = np.bincount(np.arange(12) % num_streams, weights=bank.noise_draws)
        assert np.all(per_generator > BinaryTreeBank.DRAW_BLOCK)  # every look-ahead buffer was refilled


def test_bank_noise_is_laplace_per_node_on_the_dyadic_decomposition() -> None:
    # T8 and S6 on the bank: after records at stream indices 1..13, every tree's noisy - exact sum is the sum of
    # the noises of the 3 blocks of 13 = (1..8), (9..12), (13..13); each node noise is Lap(b) with b = 1 / eps';
    # a block's noise is reused by later prefixes.
    num_trees, epsilon = 20_000, 2.0
    rngs = [np.random.default_rng([3, s]) for s in range(100)]
    bank = BinaryTreeBank(num_trees, epsilon, 1000, rngs=rngs, stream_of_tree=np.arange(num_trees) % 100)
    scale = 1.0 / (epsilon / bank.levels)  # 10 levels: eps' = eps / 10, sensitivity 1
    assert bank.levels == 10 and bank.scale == pytest.approx(scale, rel=1e-15)
    values = np.random.default_rng(4).uniform(0.0, 1.0, (13, num_trees))
    everyone = np.arange(num_trees)
    for position in range(13):
        noisy = bank.add(everyone, position, values[position])
    blocks = dyadic_blocks(13)
    nodes = {block: np.array([bank.node_noises(r)[block] for r in range(num_trees)]) for block in blocks}
    assert all(set(bank.node_noises(r)) == set(blocks) for r in range(0, num_trees, 997))
    np.testing.assert_allclose(noisy - values.sum(axis=0), sum(nodes.values()), rtol=0, atol=1e-9)
    for noise in nodes.values():
        assert stats.kstest(noise, "laplace", args=(0.0, scale)).pvalue > 0.01
    # the three blocks are independent: the variance of their sum is 3 * 2b^2 (relative SE sqrt(3 / n) = 1.2 %)
    assert np.var(noisy - values.sum(axis=0)) == pytest.approx(3 * 2 * scale**2, rel=0.05)
    assert np.all(bank.noise_draws == 13)  # every record completes exactly one block: the one ending at it
    before = {block: nodes[block].copy() for block in blocks[:2]}
    bank.add(everyone, 13, np.zeros(num_trees))  # prefix 14 = (1..8), (9..12), (13..14): the first two are reused
    for block in blocks[:2]:
        np.testing.assert_array_equal(
            [bank.node_noises(r)[block] for r in range(0, num_trees, 97)], before[block][::97]
        )
    assert np.all(bank.noise_draws == 14)  # only (13..14) is new


def test_bank_rejects_bad_input() -> None:
    rngs = [np.random.default_rng(0)]
    bank = BinaryTreeBank(4, 1.0, 8, rngs=rngs, stream_of_tree=np.zeros(4, np.int64))
    bank.add(np.array([0, 1]), 3, np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="more than position"):
        bank.add(np.array([1]), 2, np.array([0.5]))  # tree 1 already holds 4 records
    with pytest.raises(ValueError, match="stream_length"):
        bank.add(np.array([2]), 8, np.array([0.5]))
    with pytest.raises(ValueError, match="finite"):
        bank.add(np.array([2]), 4, np.array([math.inf]))
    with pytest.raises(ValueError, match="one value per tree"):
        bank.add(np.array([2, 3]), 4, np.array([0.5]))
    with pytest.raises(ValueError, match="position"):
        bank.add(np.array([2]), -1, np.array([0.5]))
    with pytest.raises(TypeError, match="rngs"):
        BinaryTreeBank(4, 1.0, 8)
    with pytest.raises(ValueError, match="stream_of_tree"):
        BinaryTreeBank(4, 1.0, 8, rngs=rngs, stream_of_tree=np.array([0, 0, 1, 0]))
    with pytest.raises(ValueError, match="one entry per tree"):
        BinaryTreeBank(4, 1.0, 8, rngs=rngs, stream_of_tree=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="epsilon"):
        BinaryTreeBank(4, 0.0, 8, rngs=rngs)
    exact = BinaryTreeBank(2, math.inf, 8)  # no generator needed without noise
    np.testing.assert_array_equal(exact.add(np.array([1, 0]), 5, np.array([0.25, -2.0])), [0.25, -2.0])
    assert exact.node_noises(0) == {} and not exact.noise_draws.any()


@pytest.mark.parametrize("noise_on_empty", [False, True], ids=["strict", "noise_on_empty"])
def test_bank_with_one_listed_tree_per_generator_equals_one_mechanism_per_tree(noise_on_empty: bool) -> None:
    # Fed_UCB's pattern: generator g feeds trees 4g .. 4g+3 (one agent's arms) and every add lists one tree per
    # generator, in random order; positions advance by random gaps, so a tree often skips many records and several
    # of its nodes (up to level 16) are completed between two of its own records.
    num_streams, arms, seed = 5, 4, 11
    params = {"epsilon": 1.0, "stream_length": 200_000, "noise_on_empty": noise_on_empty}
    stream_of_tree = np.repeat(np.arange(num_streams), arms)
    bank_rngs = [np.random.default_rng([seed, s]) for s in range(num_streams)]
    tree_rngs = [np.random.default_rng([seed, s]) for s in range(num_streams)]
    bank = BinaryTreeBank(num_streams * arms, rngs=bank_rngs, stream_of_tree=stream_of_tree, **params)
    trees = [BinaryTreeMechanism(**params, rng=tree_rngs[s]) for s in stream_of_tree]
    schedule = np.random.default_rng(seed)
    position = 0
    for _ in range(1500):
        listed = schedule.permutation(np.arange(num_streams) * arms + schedule.integers(0, arms, num_streams))
        values = schedule.uniform(0.0, 1.0, num_streams)
        expected = []
        for r, value in zip(listed.tolist(), values.tolist()):
            trees[r].skip(position - trees[r].count)
            expected.append(trees[r].add(value))
        np.testing.assert_array_equal(bank.add(listed, position, values), expected)  # exact equality
        position += int(schedule.integers(1, 100))
    assert bank.counts.max() > 2**16
    np.testing.assert_array_equal(bank.noisy_sums, [t.noisy_sum for t in trees])
    np.testing.assert_array_equal(bank.noise_draws, [t.noise_draws for t in trees])
    assert all(bank.node_noises(r) == t.node_noises() for r, t in enumerate(trees))
    per_generator = np.bincount(stream_of_tree, weights=bank.noise_draws)
    assert np.all(per_generator > BinaryTreeBank.DRAW_BLOCK)  # every look-ahead buffer was refilled
