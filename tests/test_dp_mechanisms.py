"""DP mechanisms: exact calibrations, noise distributions, the binary tree and interval releases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedbandit_envs.privacy.accountant import GaussianEvent, LaplaceEvent, TreeEvent
from fedbandit_envs.privacy.mechanisms import (
    BinaryTreeMechanism,
    FixedInterval,
    GaussianMechanism,
    IntervalRelease,
    LaplaceMechanism,
    LemmaSeries,
    dyadic_blocks,
    gaussian_delta,
    gaussian_sigma_analytic,
    gaussian_sigma_classical,
    laplace_scale,
)

# ------------------------------------------------------------------------------------------------ calibration


def test_laplace_scale_exact():
    assert laplace_scale(1 / 50, 0.5) == pytest.approx(0.04, rel=1e-15)
    assert laplace_scale(1.0, 0.25) == 4.0
    # li-song-fmab §1.5: sensitivity 1/n_r at epsilon M*eps gives b_r = 1/(M eps n_r); M=50, eps=0.1, n_r=4 -> 0.05
    mech = LaplaceMechanism(1 / 4, 50 * 0.1)
    assert mech.scale == pytest.approx(0.05, rel=1e-14)
    assert mech.delta == 0.0
    assert mech.event() == LaplaceEvent(5.0)


def test_gaussian_sigma_classical_exact():
    # sqrt(2 ln(1.25 / 1e-5)) / 0.5 = sqrt(2 ln 125000) / 0.5
    assert gaussian_sigma_classical(1.0, 0.5, 1e-5) == pytest.approx(math.sqrt(2 * math.log(125000)) / 0.5, rel=1e-15)
    assert gaussian_sigma_classical(1.0, 0.5, 1e-5) == pytest.approx(9.689610525210778, rel=1e-12)
    # solanki-pfcb §4.2 check 3: sigma_z / k = sqrt(2 ln 125) / eps_z = 3.107511 / eps_z (delta = 0.01)
    eps_1 = 1 / (2 * math.log2(1e5)) + 1 / 4
    assert eps_1 == pytest.approx(0.280103, abs=1e-6)
    assert gaussian_sigma_classical(7.0, eps_1, 0.01) / 7.0 == pytest.approx(3.107511 / eps_1, rel=1e-6)
    assert gaussian_sigma_classical(7.0, eps_1, 0.01) / 7.0 == pytest.approx(11.094, abs=1e-3)


def test_gaussian_sigma_classical_large_epsilon_needs_opt_in():
    with pytest.raises(ValueError, match="epsilon must be < 1"):
        gaussian_sigma_classical(1.0, 1.0, 1e-5)
    with pytest.raises(ValueError, match="allow_large_epsilon"):
        GaussianMechanism(1.0, 1.4, 0.01)
    sigma = gaussian_sigma_classical(1.0, 2.0, 1e-5, allow_large_epsilon=True)
    assert sigma == pytest.approx(math.sqrt(2 * math.log(125000)) / 2.0, rel=1e-15)
    assert GaussianMechanism(1.0, 1.4, 0.01, allow_large_epsilon=True).sigma == pytest.approx(
        math.sqrt(2 * math.log(125)) / 1.4, rel=1e-15
    )


def test_gaussian_analytic_is_tighter_and_exact():
    classical = gaussian_sigma_classical(1.0, 0.5, 1e-5)
    analytic = gaussian_sigma_analytic(1.0, 0.5, 1e-5)
    assert analytic < classical
    assert gaussian_delta(1.0, analytic, 0.5) == pytest.approx(1e-5, rel=1e-9)
    assert gaussian_delta(1.0, analytic, 0.5) <= 1e-5
    assert gaussian_delta(1.0, analytic * (1 - 1e-9), 0.5) > 1e-5  # smallest such sigma
    # scales linearly in the sensitivity; works for epsilon >= 1
    assert gaussian_sigma_analytic(3.0, 0.5, 1e-5) == pytest.approx(3 * analytic, rel=1e-10)
    for eps, delta in [(1.0, 1e-6), (5.0, 1e-3), (20.0, 1e-10)]:
        sigma = gaussian_sigma_analytic(2.0, eps, delta)
        assert gaussian_delta(2.0, sigma, eps) == pytest.approx(delta, rel=1e-9)
    mech = GaussianMechanism(1.0, 0.5, 1e-5, calibration="analytic")
    assert mech.sigma == analytic
    assert mech.event() == GaussianEvent(0.5, 1e-5, analytic)


def test_gaussian_delta_matches_direct_formula_and_solanki_pair_check():
    sens, sigma, eps = 1.5, 2.0, 0.7
    phi = stats.norm.cdf
    a, b = sens / (2 * sigma), eps * sigma / sens
    direct = phi(a - b) - math.exp(eps) * phi(-a - b)
    assert gaussian_delta(sens, sigma, eps) == pytest.approx(direct, rel=1e-12)
    assert gaussian_delta(1.0, 1.0, 0.5) > gaussian_delta(1.0, 2.0, 0.5) > gaussian_delta(1.0, 4.0, 0.5)
    # solanki-pfcb §1.8 item 4 / §4.2 check 4: the pair (w~, y~), L2 sensitivity sqrt(2) k, is (eps_1, delta)-DP
    eps_1 = 1 / (2 * math.log2(1e5)) + 1 / 4
    k = 13.0
    sigma = gaussian_sigma_classical(k, eps_1, 0.01)
    pair_delta = gaussian_delta(math.sqrt(2) * k, sigma, eps_1)
    assert pair_delta == pytest.approx(7.2e-4, abs=0.05e-4)
    assert pair_delta <= 0.01


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: laplace_scale(1.0, 0.0), ValueError),
        (lambda: laplace_scale(1.0, -1.0), ValueError),
        (lambda: laplace_scale(1.0, math.inf), ValueError),
        (lambda: laplace_scale(1.0, math.nan), ValueError),
        (lambda: laplace_scale(0.0, 1.0), ValueError),
        (lambda: laplace_scale(math.inf, 1.0), ValueError),
        (lambda: laplace_scale("1", 1.0), TypeError),
        (lambda: gaussian_sigma_classical(1.0, 0.5, 0.0), ValueError),
        (lambda: gaussian_sigma_classical(1.0, 0.5, 1.0), ValueError),
        (lambda: gaussian_sigma_analytic(1.0, 0.5, 1.5), ValueError),
        (lambda: gaussian_sigma_analytic(-1.0, 0.5, 0.1), ValueError),
        (lambda: gaussian_delta(1.0, 0.0, 0.5), ValueError),
        (lambda: GaussianMechanism(1.0, 0.5, 1e-5, calibration="exact"), ValueError),
        (lambda: LaplaceMechanism(1.0, 0.5).sample(3, rng=np.random.RandomState(0)), TypeError),
    ],
)
def test_calibration_rejects_bad_input(call, error):
    with pytest.raises(error):
        call()


# ------------------------------------------------------------------------------------------------ sampling


@pytest.mark.statistical
def test_laplace_noise_distribution():
    mech = LaplaceMechanism(1 / 50, 0.5)
    noise = mech.sample(20000, np.random.default_rng(2024))
    assert noise.shape == (20000,)
    assert stats.kstest(noise, stats.laplace(scale=0.04).cdf).pvalue > 0.01
    assert isinstance(mech.sample(None, np.random.default_rng(0)), float)


@pytest.mark.statistical
def test_gaussian_noise_distribution():
    mech = GaussianMechanism(1.0, 0.5, 1e-5)
    noise = mech.sample((100, 200), np.random.default_rng(7))
    assert noise.shape == (100, 200)
    assert stats.kstest(noise.ravel(), stats.norm(scale=mech.sigma).cdf).pvalue > 0.01


@pytest.mark.parametrize("mech", [LaplaceMechanism(0.5, 1.0), GaussianMechanism(2.0, 0.3, 1e-6, "analytic")])
def test_privatize_adds_sampled_noise(mech):
    values = np.arange(12).reshape(3, 4)
    out = mech.privatize(values, np.random.default_rng(5))
    assert out.dtype == np.float64 and out.shape == (3, 4)
    np.testing.assert_allclose(out - values, mech.sample((3, 4), np.random.default_rng(5)), rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------------------------ binary tree

EXPECTED_BLOCKS = {
    1: [(1, 1)],
    2: [(1, 2)],
    3: [(1, 2), (3, 3)],
    4: [(1, 4)],
    5: [(1, 4), (5, 5)],
    6: [(1, 4), (5, 6)],
    7: [(1, 4), (5, 6), (7, 7)],
    8: [(1, 8)],
    9: [(1, 8), (9, 9)],
    10: [(1, 8), (9, 10)],
    11: [(1, 8), (9, 10), (11, 11)],
    12: [(1, 8), (9, 12)],
    13: [(1, 8), (9, 12), (13, 13)],
    14: [(1, 8), (9, 12), (13, 14)],
    15: [(1, 8), (9, 12), (13, 14), (15, 15)],
    16: [(1, 16)],
}


@pytest.mark.parametrize("n", range(1, 17))
def test_prefix_blocks_exact(n):
    assert BinaryTreeMechanism.prefix_blocks(n) == EXPECTED_BLOCKS[n]
    assert dyadic_blocks(n) == EXPECTED_BLOCKS[n]


def test_prefix_blocks_properties():
    assert dyadic_blocks(0) == []
    for n in range(1, 600):
        blocks = dyadic_blocks(n)
        assert len(blocks) == bin(n).count("1") <= int(math.log2(n)) + 1
        covered = [i for first, last in blocks for i in range(first, last + 1)]
        assert covered == list(range(1, n + 1))
        for first, last in blocks:
            length = last - first + 1
            assert length == last & -last  # lowbit
            assert (first - 1) % (2 * length) == 0
    with pytest.raises(ValueError, match="n must be"):
        dyadic_blocks(-1)


def test_tree_levels_and_scales():
    assert BinaryTreeMechanism(1.0, 16, rng=np.random.default_rng(0)).levels == 5
    assert BinaryTreeMechanism(1.0, 15, rng=np.random.default_rng(0)).levels == 4
    assert BinaryTreeMechanism(1.0, 1, rng=np.random.default_rng(0)).levels == 1
    tree = BinaryTreeMechanism(2.0, 10001, sensitivity=3.0, rng=np.random.default_rng(0))
    assert tree.levels == 14  # zhu-gossip-ucb §2.5: eps' = eps / 14 at T = 10^4 (T_s = T + 1)
    assert tree.eps_prime == 2.0 / 14
    assert tree.scale == pytest.approx(3.0 * 14 / 2.0, rel=1e-15)
    assert tree.epsilon_guaranteed == pytest.approx(2.0, rel=1e-15)
    assert tree.event() == TreeEvent(tree.epsilon_guaranteed, 14)
    literal = BinaryTreeMechanism(1.0, 10001, split="ln_T", rng=np.random.default_rng(0), horizon=10000)
    assert literal.eps_prime == pytest.approx(1 / math.log(10000), rel=1e-15)
    assert literal.epsilon_guaranteed == pytest.approx(14 / math.log(10000), rel=1e-15)  # ~1.52 eps (D10)
    assert BinaryTreeMechanism(1.0, 100, split="ln_T", rng=np.random.default_rng(0)).eps_prime == pytest.approx(
        1 / math.log(100)
    )


def test_tree_noise_is_drawn_once_and_reused():
    tree = BinaryTreeMechanism(1.0, 16, noise_on_empty=True, rng=np.random.default_rng(3))
    seen: dict[tuple[int, int], float] = {}
    history = {}
    for n in range(1, 17):
        released = tree.add(0.5)
        noises = history[n] = tree.node_noises()
        assert list(noises) == EXPECTED_BLOCKS[n]
        assert released == pytest.approx(tree.exact_sum + sum(noises.values()), abs=1e-12)
        assert tree.noisy_sum == released  # reading again draws nothing new
        for block, value in noises.items():
            assert seen.setdefault(block, value) == value
    assert tree.exact_sum == 8.0
    assert tree.noise_draws == len(seen)
    # the same node noise appears in consecutive prefix sums
    assert len({history[n][(1, 8)] for n in range(8, 16)}) == 1
    assert len({history[n][(9, 12)] for n in range(12, 16)}) == 1
    assert len(set(seen.values())) == len(seen)  # independent draws


def test_tree_record_lies_in_at_most_levels_nodes():
    length = 100
    tree = BinaryTreeMechanism(1.0, length, noise_on_empty=True, rng=np.random.default_rng(11))
    nodes: set[tuple[int, int]] = set()
    for _ in range(length):
        tree.add(1.0)
        nodes.update(tree.node_noises())
    membership = [sum(first <= i <= last for first, last in nodes) for i in range(1, length + 1)]
    assert tree.levels == 7
    assert max(membership) == tree.levels  # record 1 is in (1,1), (1,2), ..., (1,64)
    assert min(membership) >= 1


def test_tree_node_noise_scale():
    tree = BinaryTreeMechanism(3.0, 2**13, sensitivity=2.0, noise_on_empty=True, rng=np.random.default_rng(17))
    nodes: dict[tuple[int, int], float] = {}
    for _ in range(2**13):
        tree.add(0.0)
        nodes.update(tree.node_noises())
    assert tree.scale == pytest.approx(2.0 * 14 / 3.0, rel=1e-15)
    assert len(nodes) == 2**13  # one node per prefix end n: the block (n - lowbit(n), n]
    assert stats.kstest(list(nodes.values()), stats.laplace(scale=tree.scale).cdf).pvalue > 0.01


def test_tree_infinite_epsilon_gives_exact_sums_without_draws():
    tree = BinaryTreeMechanism(math.inf, 50, noise_on_empty=True)
    values = np.random.default_rng(0).random(50)
    released = [tree.add(v) for v in values]
    np.testing.assert_allclose(released, np.cumsum(values), rtol=1e-12)
    assert tree.noise_draws == 0 and tree.node_noises() == {} and tree.scale == 0.0


def test_tree_is_reproducible_from_seed():
    def run(seed):
        tree = BinaryTreeMechanism(1.0, 64, rng=np.random.default_rng(seed))
        out = []
        for i in range(40):
            if i % 3:
                tree.skip()
            else:
                out.append(tree.add(1.0))
        return out

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_tree_no_noise_on_empty_blocks():
    for noise_on_empty, expected in [(False, [(5, 5)]), (True, [(1, 4), (5, 5)])]:
        tree = BinaryTreeMechanism(1.0, 16, noise_on_empty=noise_on_empty, rng=np.random.default_rng(0))
        tree.skip(4)
        tree.add(1.0)
        assert list(tree.node_noises()) == expected
    tree = BinaryTreeMechanism(1.0, 16, rng=np.random.default_rng(0))
    tree.add(1.0)
    tree.skip(3)  # (1, 4) holds the observation at 1: noised when next needed
    tree.add(0.0)
    assert list(tree.node_noises()) == [(1, 4), (5, 5)]
    assert tree.count == 5 and tree.exact_sum == 1.0


def test_tree_rejects_bad_input():
    with pytest.raises(TypeError, match="rng"):
        BinaryTreeMechanism(1.0, 10)
    with pytest.raises(ValueError, match="epsilon"):
        BinaryTreeMechanism(0.0, 10, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="stream_length"):
        BinaryTreeMechanism(1.0, 0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="split"):
        BinaryTreeMechanism(1.0, 10, split="log2", rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="horizon"):
        BinaryTreeMechanism(1.0, 10, rng=np.random.default_rng(0), horizon=10)
    tree = BinaryTreeMechanism(1.0, 3, rng=np.random.default_rng(0))
    tree.add(1.0)
    tree.skip(2)
    with pytest.raises(ValueError, match="stream_length=3 exceeded"):
        tree.add(1.0)
    with pytest.raises(ValueError, match="finite"):
        BinaryTreeMechanism(1.0, 3, rng=np.random.default_rng(0)).add(math.inf)


# ------------------------------------------------------------------------------------------------ interval release


def test_fixed_interval_schedule():
    assert FixedInterval.from_epsilon(0.1).interval == 10
    assert FixedInterval.from_epsilon(0.3).interval == 4
    assert FixedInterval.from_epsilon(1.0).interval == 1
    schedule = FixedInterval(4)
    assert [c for c in range(13) if schedule(c)] == [4, 8, 12]
    with pytest.raises(ValueError, match="interval"):
        FixedInterval(0)


def test_lemma_series_schedule():
    # W_0 = 0, threshold 1 / dp_eps = 1, v = 1.1: 1^-.55 = 1 -> 1; 2^-.55 + 3^-.55 = 1.23 -> 3;
    # 4..6 sum to 1.25 -> 6; 7..10 sum to 1.24 -> 10
    schedule = LemmaSeries(1.0, v=1.1)
    assert [c for c in range(1, 11) if schedule(c)] == [1, 3, 6, 10]


def test_interval_release_holds_between_schedule_points():
    release = IntervalRelease(0.1, np.random.default_rng(0))
    assert math.isnan(release.released_mean) and release.released_count == 0
    assert release.release_epsilon is None
    held = None
    for n in range(1, 36):
        released = release.update(0.3)
        assert released == (n % 10 == 0)
        assert release.num_releases == n // 10
        if released:
            held = release.released_mean
            assert release.released_count == n
            assert release.release_epsilon == n**-0.55
            assert release.event() == LaplaceEvent(n**-0.55)
        elif n > 10:
            assert release.released_mean == held and release.released_count == 10 * (n // 10)
    assert release.count == 35 and release.exact_mean == pytest.approx(0.3)


def test_interval_release_scale_and_epsilon_exact():
    release = IntervalRelease(0.1, np.random.default_rng(0), v=1.1)
    assert release.scale_at(100) == pytest.approx(10**-0.9, rel=1e-14)  # 100^(1.1/2 - 1)
    assert release.scale_at(100) == pytest.approx(0.12589254117941673, rel=1e-14)
    assert release.epsilon_at(100) == pytest.approx(10**-1.1, rel=1e-14)  # 100^(-1.1/2)
    # epsilon = sensitivity / scale = (1/n) / n^(v/2-1) (dubey-pentland D18)
    assert release.epsilon_at(37) == pytest.approx((1 / 37) / release.scale_at(37), rel=1e-14)


@pytest.mark.statistical
def test_interval_release_noise_distribution():
    rng = np.random.default_rng(99)
    noises = []
    for _ in range(10000):
        release = IntervalRelease(0.1, rng)
        for _ in range(10):
            release.update(0.5)
        noises.append(release.released_mean - 0.5)
    scale = 10 ** (1.1 / 2 - 1)
    assert stats.kstest(noises, stats.laplace(scale=scale).cdf).pvalue > 0.01
    assert np.var(noises) == pytest.approx(2 * 10 ** (1.1 - 2), rel=0.05)  # dubey-pentland §5.2


def test_interval_release_clips_and_uses_custom_schedule():
    release = IntervalRelease(0.5, np.random.default_rng(4), schedule=lambda count: count == 3)
    assert not release.update(2.0)
    assert not release.update(-1.0)
    assert release.exact_mean == 0.5
    assert release.update(0.5)
    expected_noise = np.random.default_rng(4).laplace(0.0, 3 ** (1.1 / 2 - 1))
    assert release.released_mean == pytest.approx(0.5 + expected_noise, rel=1e-14)
    assert not release.update(1.0)
    assert release.released_count == 3


def test_interval_release_rejects_bad_input():
    with pytest.raises(ValueError, match="event"):
        IntervalRelease(0.1, np.random.default_rng(0)).event()
    with pytest.raises(ValueError, match="v must"):
        IntervalRelease(0.1, np.random.default_rng(0), v=2.0)
    with pytest.raises(ValueError, match="dp_eps"):
        IntervalRelease(0.0, np.random.default_rng(0))
    with pytest.raises(TypeError, match="schedule"):
        IntervalRelease(0.1, np.random.default_rng(0), schedule=5)
    with pytest.raises(TypeError, match="rng"):
        IntervalRelease(0.1, None)
    with pytest.raises(ValueError, match="NaN"):
        IntervalRelease(0.1, np.random.default_rng(0)).update(math.nan)
