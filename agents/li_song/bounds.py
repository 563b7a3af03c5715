"""The shapes of Li and Song's Theorems 1-4 (spec section 5 item 16): for plotting, never for assertions.

The theorems are O(.) statements, so each function returns the expression inside the O(.) with every unstated
constant set to 1 (natural logarithms). The functions are vectorised over ``horizon`` and ``epsilon`` (numpy
broadcasting), so a bound's shape can be drawn against T or epsilon next to measured regret or cost, e.g.::

    T = np.logspace(3, 6, 50)
    plt.loglog(T, cdp_regret_shape(gaps, T, num_agents=50, epsilon=1.0))

``gaps`` are the arms' gaps Delta_k; arms with Delta_k = 0 (the best arm) are left out of the sums.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ArrayLike = float | np.ndarray


def _positive_gaps(gaps: Sequence[float]) -> np.ndarray:
    values = np.asarray(gaps, np.float64)
    if values.ndim != 1 or np.any(values < 0) or not np.any(values > 0):
        raise ValueError(f"gaps must be a 1-D sequence of Delta_k >= 0 with at least one positive, got {gaps!r}")
    return values[values > 0]


def cdp_regret_shape(gaps: Sequence[float], horizon: ArrayLike, num_agents: int, epsilon: ArrayLike) -> np.ndarray:
    """Theorem 1 (Eq. 7): ``max{sum_k log(K T log T) / Delta_k, K log T sqrt(log(K T log T)) / (sqrt(M) eps)}``."""
    positive, k = _positive_gaps(gaps), len(gaps)
    t = np.asarray(horizon, np.float64)
    log_ktt = np.log(k * t * np.log(t))
    gap_term = log_ktt * float(np.sum(1.0 / positive))
    privacy_term = k * np.log(t) * np.sqrt(log_ktt) / (np.sqrt(num_agents) * np.asarray(epsilon, np.float64))
    return np.maximum(gap_term, privacy_term)


def constrained_cdp_regret_shape(
    gaps: Sequence[float], horizon: ArrayLike, num_agents: int, epsilon: ArrayLike, participation: float, rounds: int
) -> np.ndarray:
    """Theorem 2 (Eq. 8), R rounds at participation p.

    ``min{M, T^(2/R) / p^(3/2)} max{sum_k log(R^2 K T) / Delta_k, R sqrt(log(R^2 K T)) / (sqrt(M) eps)}``.
    """
    if not 0 < participation <= 1 or rounds < 1:
        raise ValueError(f"participation must be in (0, 1] and rounds >= 1, got {participation} and {rounds}")
    positive, k = _positive_gaps(gaps), len(gaps)
    t = np.asarray(horizon, np.float64)
    log_rkt = np.log(rounds**2 * k * t)
    gap_term = log_rkt * float(np.sum(1.0 / positive))
    privacy_term = rounds * np.sqrt(log_rkt) / (np.sqrt(num_agents) * np.asarray(epsilon, np.float64))
    factor = np.minimum(num_agents, t ** (2.0 / rounds) / participation**1.5)
    return factor * np.maximum(gap_term, privacy_term)


def ddp_regret_shape(
    gaps: Sequence[float], horizon: ArrayLike, num_agents: int, epsilon: ArrayLike, diameter: int
) -> np.ndarray:
    """Theorem 3 (Eq. 9): Theorem 1's shape plus the delay term ``M (d_G - 1)``."""
    return cdp_regret_shape(gaps, horizon, num_agents, epsilon) + num_agents * (diameter - 1)


def hdp_regret_shape(
    gaps: Sequence[float], horizon: ArrayLike, num_agents: int, epsilon: ArrayLike, component_diameters: Sequence[int]
) -> np.ndarray:
    """Theorem 4 (Eq. 10): Theorem 1's shape plus ``M max_q (d_G^q - 1)`` over the components."""
    return cdp_regret_shape(gaps, horizon, num_agents, epsilon) + num_agents * (max(component_diameters) - 1)


def cost_shapes(
    horizon: ArrayLike,
    num_agents: int,
    c1: float,
    c2: float,
    diameter: int,
    degrees: Sequence[int],
    component_diameters: Sequence[int],
    num_components: int,
) -> dict[str, np.ndarray]:
    """The communication costs of Theorems 1, 3 and 4 (Theorem 2's is exact: ``c1 ceil(p M) R``).

    ``c1 M log T`` (CDP), ``c2 d_G log T sum_i d_i / 2`` (DDP), ``(c2 M max_q d_G^q + c1 Q) log T`` (HDP).
    """
    log_t = np.log(np.asarray(horizon, np.float64))
    return {
        "cdp": c1 * num_agents * log_t,
        "ddp": c2 * diameter * log_t * float(np.sum(degrees)) / 2.0,
        "hdp": (c2 * num_agents * max(component_diameters) + c1 * num_components) * log_t,
    }
