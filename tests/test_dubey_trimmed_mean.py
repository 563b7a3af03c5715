"""The robust trimmed-mean estimator of Dubey and Pentland (spec §2.3, §5.3, D9, D10).

``trimmed_mean`` is the literal §2.3 procedure on one sample list; the population's histogram and sorted backends
(``_SampleSets``) must agree with it on every cell.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.dubey import _SampleSets, kept_count, trimmed_mean


def interleave(x, y):
    """Z with X at the even and Y at the odd positions (the D9 split)."""
    z = np.empty(len(x) + len(y))
    z[0::2], z[1::2] = x, y
    return z


# ---------------------------------------------------------------------------------------------------- exact
def test_kept_count_formula_spot_values():
    # §5.3: eps = 1e-3, delta = 1e-6: frac = -0.267 at N = 50 (c < 1: median fallback), 0.367 at N = 100,
    # 0.578 at N = 150 (c = 87), 0.937 at N = 1000. By hand, N = 100: alpha = ln(1e6)/100 = 0.138155,
    # L = ln(4e6) = 15.2018, frac = 1 - 0.276310 - sqrt(2 * 0.138155 * 15.2018 / 100) - 0.152018 = 0.36672
    assert [kept_count(n, 1e-3, 1e-6) for n in (50, 100, 150, 1000)] == [-13, 37, 87, 937]


def test_bernoulli_degeneracy_collapses_the_window_or_keeps_the_x_mean():
    # §5.3: N = 150, c = 87, X holds 90 zeros and 60 ones
    x = np.array([0.0] * 90 + [1.0] * 60)
    assert trimmed_mean(interleave(x, x), 1e-3, 1e-6) == 0.0  # Y: 90 zeros >= c: window [0, 0], only X zeros kept
    y = np.array([0.0] * 80 + [1.0] * 70)  # neither value reaches c = 87: window [0, 1]
    assert trimmed_mean(interleave(x, y), 1e-3, 1e-6) == 0.4


def test_estimate_is_immune_to_the_stated_outlier_fraction():
    # N = 1000, eps = 0.05, delta = 0.01: c = 870, so up to N - c = 130 outliers in Y are tolerated; put 5% (50) in
    # each half at distance > (b - a) from the clean range [a, b] = [0.2, 0.8]
    rng = np.random.default_rng(1)
    clean = rng.uniform(0.2, 0.8, 2000)
    where = rng.choice(2000, 100, replace=False)
    estimates = []
    for magnitude in (1e6, 1e12, -1e9):
        z = clean.copy()
        z[where] = magnitude
        estimates.append(trimmed_mean(z, 0.05, 0.01))
        assert abs(z.mean() - clean.mean()) > 1e3  # a plain mean is destroyed
    assert estimates[0] == estimates[1] == estimates[2]
    assert 0.2 <= estimates[0] <= 0.8 and abs(estimates[0] - 0.5) < 0.02


def test_small_samples_fall_back_to_the_median():
    assert trimmed_mean([], 0.0, 0.1) is None
    assert trimmed_mean([3.0], 0.0, 0.1) == 3.0  # N = 0
    assert trimmed_mean([1.0, 5.0, 2.0, 9.0], 0.0, 0.1) == 3.5  # N = 2: c < 1, median of all four


def test_bad_estimator_parameters():
    with pytest.raises(ValueError, match="eps must be < 0.5"):
        trimmed_mean([1.0, 2.0], 0.5, 0.1)
    with pytest.raises(ValueError, match="delta"):
        trimmed_mean([1.0, 2.0], 0.1, 0.0)
    with pytest.raises(ValueError, match="half must be >= 1"):
        kept_count(0, 0.1, 0.1)


# ---------------------------------------------------------------------------------------------------- backends
def fill(sets, cells, values):
    """Add samples in several chunks (as slots would), keeping each cell's insertion order."""
    for chunk in np.array_split(np.arange(len(cells)), 7):
        sets.add(cells[chunk], values[chunk])


@pytest.mark.parametrize("backend", ["histogram", "sorted"])
def test_backends_equal_the_literal_estimator_on_discrete_samples(backend):
    rng = np.random.default_rng(7)
    cells = rng.integers(0, 40, 6000)
    values = np.where(rng.random(6000) < 0.05, 10.0, (rng.random(6000) < rng.random(40)[cells]).astype(float))
    sets = _SampleSets(40, backend, max_distinct=8)
    fill(sets, cells, values)
    for eps, delta, estimator in (
        (0.0, 0.05, "prasad_shortest_interval"),
        (0.05, 1e-4, "prasad_shortest_interval"),
        (0.01, 1e-6, "mean"),
    ):
        got = sets.estimate(eps, delta, estimator)
        for cell in range(40):
            z = values[cells == cell]
            expected = z.mean() if estimator == "mean" else trimmed_mean(z, eps, delta)
            assert got[cell] == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert np.isnan(_SampleSets(3, backend, 8).estimate(0.0, 0.1, "prasad_shortest_interval")).all()


def test_auto_backend_switches_to_sorted_arrays_for_continuous_samples():
    rng = np.random.default_rng(3)
    cells = rng.integers(0, 12, 3000)
    values = np.round(rng.normal(0.5, 0.2, 3000), 1)  # about 15 distinct values first, then continuous ones
    values[1500:] = rng.standard_t(3, 1500)
    sets = _SampleSets(12, "auto", max_distinct=32)
    fill(sets, cells[:1500], values[:1500])
    assert sets.backend == "histogram"
    fill(sets, cells[1500:], values[1500:])
    assert sets.backend == "sorted"
    got = sets.estimate(0.01, 1e-3, "prasad_shortest_interval")
    for cell in range(12):
        assert got[cell] == pytest.approx(trimmed_mean(values[cells == cell], 0.01, 1e-3), rel=1e-12)
    with pytest.raises(ValueError, match="backend='sorted'"):
        _SampleSets(2, "histogram", max_distinct=4).add(np.zeros(5, np.int64), np.arange(5.0))


# ---------------------------------------------------------------------------------------------------- coverage
def violation_rates(constant, distribution, n, delta, eps, outlier, repetitions, seed):
    """Fraction of repetitions with |mu_R - mu| > constant * (sigma sqrt(eps) + sigma sqrt(ln(1/delta) / N))."""
    rng = np.random.default_rng(seed)
    bound = constant * (math.sqrt(eps) + math.sqrt(math.log(1 / delta) / n))
    misses = 0
    for _ in range(repetitions):
        z = rng.standard_normal(2 * n) if distribution == "normal" else rng.standard_t(3, 2 * n) / math.sqrt(3.0)
        z[rng.random(2 * n) < eps] = outlier
        misses += abs(trimmed_mean(z, eps, delta)) > bound
    return misses / repetitions


@pytest.mark.parametrize(
    ("distribution", "n", "delta", "eps", "outlier"),
    [
        ("normal", 200, 0.05, 0.0, 50.0),
        ("normal", 1000, 0.01, 0.05, 50.0),
        ("student_t", 200, 0.05, 0.01, 1.5),
        ("student_t", 1000, 0.01, 0.05, 1.5),
    ],
)
@pytest.mark.statistical
def test_confidence_bound_covers_with_the_constant_two(distribution, n, delta, eps, outlier):
    # §5.3: |mu_R - mu| <= 2 (sigma sqrt(eps) + sigma sqrt(ln(1/delta)/N)) fails with probability <= delta.
    # Measured (1000 repetitions each, seed 0): 0.001, 0.000, 0.000, 0.000 (the prototype saw <= 0.002).
    assert violation_rates(2.0, distribution, n, delta, eps, outlier, 1000, seed=0) <= delta


def test_the_theorem_constant_one_is_not_enough():
    # with constant 1 and no contamination the violation rate exceeds delta = 0.05 (the spec's prototype: about
    # 0.10); measured 0.161 over 1000 repetitions (binomial sd 0.012)
    assert violation_rates(1.0, "normal", 200, 0.05, 0.0, 50.0, 1000, seed=0) > 0.1


@pytest.mark.slow
@pytest.mark.parametrize("distribution", ["normal", "student_t"])
@pytest.mark.parametrize("eps", [0.0, 0.01, 0.05])
@pytest.mark.parametrize("outlier", [50.0, 1.5])
@pytest.mark.parametrize("n", [200, 1000, 5000])
@pytest.mark.parametrize("delta", [0.05, 0.01])
def test_confidence_bound_full_grid(distribution, eps, outlier, n, delta):
    assert violation_rates(2.0, distribution, n, delta, eps, outlier, 1000, seed=1) <= delta
