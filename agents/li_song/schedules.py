"""Public schedules of Li and Song's elimination algorithms (spec section 2.0).

Every quantity here depends only on public values (the round r, the number of active arms, M or N,
K, T, epsilon, the gap base Delta and the round cap R), so agents and the server compute them
identically and the server only has to broadcast the active set.

* :func:`participants`: N = ceil(p M), computed robustly (D12).
* :func:`target_accuracy`: the accuracy 2^-r of epoch r, or Delta^(r/R) under a round cap.
* :func:`algorithm_epsilon`: the epsilon used in S(r), C(r) and the noise (D13 calibration).
* :func:`epoch_plan`: S(r), n_r, C(r) and the Laplace scale b_r (D1: natural log; D2: integer S).
* :func:`eliminate`: the simultaneous elimination rule of every round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

__all__ = [
    "CALIBRATIONS",
    "Calibration",
    "EpochPlan",
    "algorithm_epsilon",
    "check_epsilon",
    "check_participation",
    "eliminate",
    "epoch_plan",
    "participants",
    "target_accuracy",
]

#: Privacy calibrations (D13): ``"paper"`` uses the user's epsilon in the algorithm (the messages are then
#: (n_agg * epsilon)-DP); ``"strict"`` makes epsilon the end-to-end guarantee (epsilon / n_agg inside).
Calibration = Literal["paper", "strict"]
CALIBRATIONS = get_args(Calibration)


def check_participation(p: float) -> float:
    """Return the participation rate ``p`` as a float after checking 0 < p <= 1."""
    if isinstance(p, bool) or not isinstance(p, int | float | np.integer | np.floating):
        raise TypeError(f"participation must be a number in (0, 1], got {p!r}")
    if not 0.0 < float(p) <= 1.0:
        raise ValueError(f"participation must lie in (0, 1] (the share of agents uploading per round), got {p}")
    return float(p)


def check_epsilon(epsilon: float | None) -> float | None:
    """Return epsilon as a float (None: non-private) after checking it is finite and > 0."""
    if epsilon is None:
        return None
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float | np.integer | np.floating):
        raise TypeError(f"epsilon must be a number > 0 or None (non-private), got {epsilon!r}")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon}; use epsilon=None for the non-private run")
    return float(epsilon)


def participants(p: float, num_agents: int) -> int:
    """N = ceil(p M), rounded to 9 decimals first so that e.g. 0.7 * 10 gives 7, not 8 (D12)."""
    return max(1, math.ceil(round(check_participation(p) * num_agents, 9)))


def target_accuracy(r: int, rounds: int | None = None, delta: float | None = None) -> float:
    """The target accuracy of epoch ``r``: 2^-r, or Delta^(r/R) with a round cap (then Delta~_R = Delta)."""
    if rounds is None:
        return 2.0 ** (-r)
    if delta is None or not 0.0 < delta < 1.0:
        raise ValueError(f"the Delta^(r/R) schedule needs a gap base delta in (0, 1), got {delta!r} (D6)")
    return float(delta) if r == rounds else float(delta ** (r / rounds))


def algorithm_epsilon(epsilon: float | None, calibration: str, n_agg: int) -> float | None:
    """The epsilon used in S(r), C(r) and the noise: epsilon (``"paper"``) or epsilon / n_agg (``"strict"``)."""
    if calibration not in CALIBRATIONS:
        raise ValueError(f"privacy_calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    epsilon = check_epsilon(epsilon)
    if epsilon is None:
        return None
    if calibration == "paper":
        return epsilon
    if epsilon / n_agg == 0.0:
        raise ValueError(f"epsilon {epsilon!r} divided among {n_agg} agents (privacy_calibration='strict') is 0.0")
    return epsilon / n_agg


@dataclass(frozen=True)
class EpochPlan:
    """The public schedule of one epoch.

    Attributes:
        round: r (1-based).
        num_active: the number of active arms #I_{r-1} explored in the epoch.
        accuracy: the target accuracy Delta~_r.
        term1: the Hoeffding argument 8 L1 / (n_agg Delta~^2) of the max in S*(r).
        term2: the privacy argument 8 r sqrt(2 L2) / (n_agg^1.5 epsilon Delta~) (0 when non-private).
        samples: S(r), cumulative pulls of each active arm per agent after the epoch (at most S(r-1) + T).
        pulls: n_r = S(r) - S(r-1) in [1, T], pulls of each active arm per agent in the epoch.
        radius: C(r), the confidence radius of the elimination.
        noise_scale: b_r = 1 / (n_agg epsilon n_r), the Laplace scale of an epoch mean (0 when non-private).
    """

    round: int
    num_active: int
    accuracy: float
    term1: float
    term2: float
    samples: int
    pulls: int
    radius: float
    noise_scale: float

    @property
    def epoch_length(self) -> int:
        """Slots of the epoch: #I_{r-1} * n_r."""
        return self.num_active * self.pulls


def epoch_plan(
    r: int,
    n_agg: int,
    num_arms: int,
    horizon: int,
    epsilon: float | None,
    num_active: int,
    accuracy: float,
    previous_samples: int,
) -> EpochPlan:
    """S(r), n_r, C(r) and b_r of round ``r`` (spec section 2.0, D1 natural log, D2 integer S, D8 n_r <= T).

    Args:
        r: the round (1-based).
        n_agg: agents averaged by the elimination (M, or N under partial participation; 1 for Single-MAB).
        num_arms: K (the privacy term's logarithm uses K, not the active count).
        horizon: T.
        epsilon: the algorithm's epsilon (see :func:`algorithm_epsilon`), or None for no privacy term.
        num_active: #I_{r-1}.
        accuracy: Delta~_r (see :func:`target_accuracy`).
        previous_samples: S(r-1) (0 for r = 1).
    """
    log1 = math.log(8.0 * num_active * r * r * horizon)
    log2 = math.log(8.0 * num_arms * r * r * horizon)
    term1 = 8.0 * log1 / (n_agg * accuracy * accuracy)
    term2 = 0.0 if epsilon is None else 8.0 * r * math.sqrt(2.0 * log2) / (n_agg**1.5 * epsilon * accuracy)
    # D8 truncates an epoch at T, so an epoch of more than T pulls per arm runs the same as one of T; the cap keeps
    # the slot counts finite (and within int64) for a tiny epsilon
    samples = max(math.ceil(min(max(term1, term2), float(previous_samples + horizon))), previous_samples + 1)
    pulls = samples - previous_samples
    radius = math.sqrt(log1 / (2.0 * n_agg * samples))
    if epsilon is not None:
        radius += r * math.sqrt(8.0 * log2) / (n_agg**1.5 * epsilon * samples)
    scale = 0.0 if epsilon is None else 1.0 / (n_agg * epsilon * pulls)
    return EpochPlan(r, num_active, accuracy, term1, term2, samples, pulls, radius, scale)


def eliminate(values: np.ndarray, radius: float) -> np.ndarray:
    """Survivors of a round: ``max(values) - values < 2 C`` (simultaneous; the argmax always survives)."""
    values = np.asarray(values, dtype=np.float64)
    return values.max() - values < 2.0 * radius
