"""The configurations of Dubey and Pentland's algorithms (:mod:`agents.dubey`): one frozen dataclass each.

How the fields are documented and checked: :mod:`agents.configured`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from fedbandit_envs.validation import CheckedConfig, option

__all__ = [
    "BonusForm",
    "ByzantineProofUCBConfig",
    "CooperativeUCBConfig",
    "CountField",
    "DPUCBIntConfig",
    "Estimator",
    "IndividualUCB1Config",
    "PrivateMultiAgentUCBConfig",
    "SampleBackend",
    "TieBreak",
]

#: How ties of the UCB index break (D8): uniformly at random per replica, or to the lowest arm.
TieBreak = Literal["random", "lowest"]
#: The count a private agent reports with its released mean (D2).
CountField = Literal["released", "current"]
#: The robust mean of the Byzantine-proof agents (D10).
Estimator = Literal["prasad_shortest_interval", "mean"]
#: The exploration bonus of the Byzantine-proof index (D11).
BonusForm = Literal["corrected", "literal"]
#: How the Byzantine-proof agents hold their sample sets.
SampleBackend = Literal["auto", "histogram", "sorted"]


@dataclass(frozen=True)
class IndividualUCB1Config(CheckedConfig):
    """Keywords of :class:`agents.dubey.IndividualUCB1` (UCB1 per agent, no communication).

    Attributes:
        tie_break: ``"random"`` (D8, ties uniformly at random per replica) or ``"lowest"`` (lowest arm).
    """

    tie_break: TieBreak = "random"


@dataclass(frozen=True)
class CooperativeUCBConfig(IndividualUCB1Config):
    """Keywords of :class:`agents.dubey.CooperativeUCB` (exact means flooded for ``gamma`` hops).

    Attributes:
        gamma: time-to-live of the flooded records in hops (>= 0; 0 disables communication).
        max_age: the oldest copy age (arrival slot - creation slot) still processed, >= 0 (None: ``gamma - 1``).
    """

    gamma: int = option(1, minimum=0)
    max_age: int | None = option(None, minimum=0)


@dataclass(frozen=True)
class _IntervalConfig(CheckedConfig):
    """The interval-release keywords of the private algorithms (Algorithm 1, §2.1).

    Attributes:
        dp_eps: the interval parameter, in (0, 1] (not the final privacy level).
        v: the noise-scale exponent of the interval mechanism, in (0, 2) (default 1.1).
        schedule: release schedule ``is_release(count)`` (None: ``FixedInterval(ceil(1/dp_eps))``, D1).
    """

    dp_eps: float = option(1.0, minimum=0.0, maximum=1.0, exclusive_minimum=True)
    v: float = option(1.1, minimum=0.0, maximum=2.0, exclusive_minimum=True, exclusive_maximum=True)
    schedule: Callable[[int], bool] | None = None


@dataclass(frozen=True)
class DPUCBIntConfig(_IntervalConfig, IndividualUCB1Config):
    """Keywords of :class:`agents.dubey.DPUCBInt` (DP-UCB-INT run by every agent alone, §2.5, D14).

    Attributes:
        frozen_index: D14's optional reading: an arm's whole index is computed at its release and held until
            the next one (instead of the held mean plus the current bonus).
    """

    frozen_index: bool = False


@dataclass(frozen=True)
class PrivateMultiAgentUCBConfig(_IntervalConfig, CooperativeUCBConfig):
    """Keywords of :class:`agents.dubey.PrivateMultiAgentUCB` (interval releases flooded for ``gamma`` hops).

    Attributes:
        count_field: the count sent with a released mean: ``"released"`` (D2: the count at the last release) or
            ``"current"`` (the paper-literal current count).
        strict_dp: use the agent's own release instead of its exact statistics (D16 extension).
    """

    count_field: CountField = "released"
    strict_dp: bool = False


@dataclass(frozen=True)
class ByzantineProofUCBConfig(CooperativeUCBConfig):
    """Keywords of :class:`agents.dubey.ByzantineProofUCB` (robust means of flooded samples, §2.3).

    Attributes:
        eps_alg: the contamination level the algorithm assumes, in [0, 1/2) (D12: the byzantine fraction).
        sigma: the standard-deviation bound of the clean rewards, > 0 (default 0.5, any [0, 1] reward).
        estimator: ``"prasad_shortest_interval"`` (D10, the paper's shortest-interval trimmed mean) or ``"mean"``
            (a plain mean of all samples, an ablation).
        bonus_form: ``"corrected"`` (D11) or ``"literal"`` (the printed ``sqrt(sigma ln(1/delta) / |S|)``).
        backend: sample storage: ``"auto"``, ``"histogram"`` (discrete rewards, D10) or ``"sorted"`` (continuous).
        max_distinct: distinct reward values the histogram backend accepts (``"auto"`` then switches to
            sorted), >= 2.
    """

    eps_alg: float = option(0.0, minimum=0.0, maximum=0.5, exclusive_maximum=True)
    sigma: float = option(0.5, minimum=0.0, exclusive_minimum=True, finite=False)
    estimator: Estimator = "prasad_shortest_interval"
    bonus_form: BonusForm = "corrected"
    backend: SampleBackend = "auto"
    max_distinct: int = option(64, minimum=2)
