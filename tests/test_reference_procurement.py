"""The procurement core's fast paths against their plain reference versions, bit for bit, on random workloads.

With :func:`fedbandit_envs.reference.reference_mode` on, :class:`BinomialInverse` draws every good-unit count by
one ``searchsorted`` on the whole inverse-CDF grid instead of its guide table; the step's rewards, revenues
and quality constraints are checked against the plain per-table sums too. Hypothesis draws the workload's
seed (qualities with exact 0, 1 and near-degenerate values, capacities, units, uniforms on the guide's bin edges,
1 and below half an ulp of the row index); examples are bounded so the module stays within seconds.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from property_settings import reproducible

from fedbandit_envs.families.procurement.env import GUIDE_BINS, BinomialInverse, ProcurementCore, ProcurementInstance
from fedbandit_envs.families.procurement.oracles import QC_TOLERANCE
from fedbandit_envs.reference import reference_mode

PROPERTY = reproducible(40)
SEEDS = st.integers(0, 2**32 - 1)


def random_qualities(rng: np.random.Generator, m: int) -> np.ndarray:
    """Qualities in [0, 1], a fifth of them 0, 1 or within 1e-9 of either."""
    quality = rng.random(m)
    special = rng.random(m) < 0.2
    quality[special] = rng.choice([0.0, 1.0, 1e-9, 1.0 - 1e-9], special.sum())
    return quality


def random_uniforms(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniforms in (0, 1] as the core draws them, mixed with bin edges, their neighbours, 1 and tiny powers of 2."""
    uniforms = 1.0 - rng.random(shape)
    edges = rng.integers(1, GUIDE_BINS + 1, shape) / GUIDE_BINS
    kind = rng.integers(0, 8, shape)
    uniforms = np.where(kind == 1, edges, uniforms)
    uniforms = np.where(kind == 2, np.nextafter(edges, 0.0), uniforms)
    uniforms = np.where(kind == 3, np.minimum(np.nextafter(edges, 2.0), 1.0), uniforms)
    uniforms = np.where(kind == 4, 1.0, uniforms)
    return np.where(kind == 5, 2.0 ** -rng.integers(1, 60, shape).astype(np.float64), uniforms)


@PROPERTY
@given(SEEDS)
def test_binomial_guide_equals_the_whole_grid_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, max_units = int(rng.integers(1, 12)), int(rng.integers(1, 140))
    inverse = BinomialInverse(random_qualities(rng, m), max_units)
    assert np.all(np.diff(inverse.grid) >= 0)  # the guide's counts rely on a sorted grid
    units = rng.integers(0, max_units + 1, (int(rng.integers(1, 4)), int(rng.integers(1, 9)), m))
    units[rng.random(units.shape) < 0.3] = max_units
    uniforms = random_uniforms(rng, units.shape)
    fast = inverse(units, uniforms)
    with reference_mode():
        plain = inverse(units, uniforms)
    assert fast.dtype == plain.dtype == np.int64
    np.testing.assert_array_equal(fast, plain)
    assert np.all((fast >= 0) & (fast <= units))


def test_a_uniform_below_half_an_ulp_of_the_row_draws_no_good_unit() -> None:
    # K = 2, row 4 (producer 1, l = 1): 4 + 2^-60 rounds to 4, and the whole-grid search then lands at the start of
    # row 3 (producer 1, l = 0), whose entries are all 3 + 1 = 4: a count of -3 before the clip, 0 after it
    inverse = BinomialInverse(np.array([0.5, 0.5]), 2)
    units, uniforms = np.array([1]), np.array([2.0**-60])
    rows = inverse.row_offset[1] + units
    assert rows[0] + uniforms[0] == rows[0]
    assert np.searchsorted(inverse.grid, rows + uniforms)[0] - rows[0] * inverse.width == -3
    for reference in (False, True):
        with reference_mode(reference):
            assert inverse(np.array([[0, 1]]), np.array([[0.5, 2.0**-60]])).tolist() == [[0, 0]]


@PROPERTY
@given(SEEDS)
def test_core_steps_equal_their_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m, replicas = int(rng.integers(1, 6)), int(rng.integers(1, 9)), int(rng.integers(1, 3))
    capacities = rng.integers(1, 30, (n, m))
    instance = ProcurementInstance(random_qualities(rng, m), rng.random((n, m)), capacities, float(rng.random()))
    cores = [ProcurementCore(instance, 6) for _ in range(2)]
    for reference, core in zip((False, True), cores):
        with reference_mode(reference):
            core.reset([seed + r for r in range(replicas)])
    for _ in range(6):
        units = rng.integers(0, capacities + 1, (replicas, n, m))
        feedback = []
        for reference, core in zip((False, True), cores):
            with reference_mode(reference):
                feedback.append(core.step(units))
        fast, plain = feedback
        for name in ("units", "successes", "rewards"):
            np.testing.assert_array_equal(getattr(fast, name), getattr(plain, name))
        for name in ("regret", "exact_regret", "violations", "last_regret", "last_revenue", "last_qc"):
            np.testing.assert_array_equal(getattr(cores[0], name), getattr(cores[1], name))
        # the step sums the three per-unit tables at once: the same products and sums as one table at a time
        spend = (instance.costs * units).sum(axis=-1)
        np.testing.assert_array_equal(fast.rewards, instance.rho * fast.successes.sum(axis=-1) - spend)
        np.testing.assert_array_equal(cores[0].last_revenue, (units * instance.unit_revenue).sum(axis=-1))
        slack = (units * (instance.quality - instance.alpha)).sum(axis=-1)
        np.testing.assert_array_equal(cores[0].last_qc, slack >= -QC_TOLERANCE)
