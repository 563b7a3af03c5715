"""The configurations of Solanki et al.'s algorithms (:mod:`agents.solanki`): one frozen dataclass each.

How the fields are documented and checked: :mod:`agents.configured`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from fedbandit_envs.validation import CheckedConfig, option

__all__ = [
    "Accounting",
    "CheckBasis",
    "EpsilonLog",
    "FCBExpConfig",
    "FCBSyncConfig",
    "NonFederatedConfig",
    "OracleName",
    "PFCBConfig",
    "Preset",
    "Schedule",
    "VMode",
]

#: The presets of the constraint vector and margin (D-07).
Preset = Literal["default", "paper_literal"]
#: The constraint vector of the oracle.
VMode = Literal["ucb", "mean", "lcb"]
#: The oracles by name (D-08).
OracleName = Literal["greedy", "exact"]
#: P-FCB's communication schedules (D-17).
Schedule = Literal["pow2", "literal", "every_round"]
#: How P-FCB checks received sums (D-20).
CheckBasis = Literal["effective", "local"]
#: The composition views of the accountant (§1.8, D-11).
Accounting = Literal["basic", "basic_strict", "disjoint"]
#: The log of the ``log T`` term of ``eps_z`` (D-10).
EpsilonLog = Literal["log2", "ln"]


@dataclass(frozen=True)
class NonFederatedConfig(CheckedConfig):
    """Keywords of :class:`agents.solanki.NonFederated` (every agent learns alone), shared by the federated ones.

    Attributes:
        preset: ``"default"`` (v = the clipped mean, gamma = 0.01) or ``"paper_literal"`` (v = q+, gamma = 0)
            (D-07).
        v_mode: override of the preset's constraint vector: ``"ucb"``, ``"mean"`` or ``"lcb"`` (lcb deadlocks).
        gamma: override of the preset's margin on alpha, finite and >= 0.
        oracle: ``"greedy"`` (default, D-08), ``"exact"``, or an
            :class:`~fedbandit_envs.families.procurement.oracles.Oracle` (any callable
            ``(u, v, c, k, theta, rho) -> units``).
        zeta: exploration accuracy of ``explore_len`` (D-13: 1.0), > 0.
        y: the ``y`` of ``explore_len`` (D-13: 1.0), > 0.
        explore_rounds: force tau0 (e.g. to compare algorithms with equal exploration), >= 1.
    """

    preset: Preset = "default"
    v_mode: VMode | None = None
    gamma: float | None = option(None, minimum=0.0)
    oracle: OracleName | Callable[..., Any] = "greedy"
    zeta: float = option(1.0, minimum=0.0, exclusive_minimum=True)
    y: float = option(1.0, minimum=0.0, exclusive_minimum=True)
    explore_rounds: int | None = option(None, minimum=1)


@dataclass(frozen=True)
class FCBSyncConfig(NonFederatedConfig):
    """Keywords of :class:`agents.solanki.FCBSync` (Algorithm 1: every round broadcast).

    Attributes:
        literal_width: use Alg. 1 line 15's ``sqrt(3 ln(nt) / (2 n W))`` (D-15) instead.
    """

    literal_width: bool = False


@dataclass(frozen=True)
class PFCBConfig(NonFederatedConfig):
    """Keywords of :class:`agents.solanki.PFCB` (P-FCB: private window sums on a sparse schedule).

    Attributes:
        epsilon: the total budget eps, finite and > 0 (the schedule asserts ``sum_z eps_z <= eps``).
        delta: delta of every message, in (0, 1).
        t_lo: first round of the communication window (200), >= 1.
        t_hi: last round of the communication window (40000), >= 1.
        accept_width_mult: omega1, the multiplier of the acceptance interval (D-16: 0.1), >= 0.
        comm_weight: omega2, the weight of accepted data (D-16: 10), >= 0.
        schedule: ``"pow2"`` (D-17), ``"literal"`` or ``"every_round"``.
        noise: ``True`` (in-agent Gaussian noise, accounted by the agent), ``False`` (exact sums: FCBExp), or
            ``"wrapper"`` (raw sums declared ``Sensitive``; a DP wrapper must add the noise).
        check_basis: ``"effective"`` (Procedure 1, D-20) or ``"local"`` (the §5.4 text rule).
        accounting: how the release is declared and accounted: ``"basic"`` (the paper's, default),
            ``"basic_strict"`` (w and y as two releases, D-11) or ``"disjoint"`` (parallel over windows).
        strict: multiply sigma by sqrt(2) (calibration for the pair's L2 sensitivity sqrt(2) k, D-11).
        eps_log: the log of ``eps_z``'s ``log T`` term: ``"log2"`` (D-10) or ``"ln"``.
        message_epsilon: a fixed epsilon per message, finite and > 0, instead of the ``eps_z`` schedule (the
            §5.1 ablation; the ``sum <= eps`` check and the budget are then off).
    """

    epsilon: float = option(1.0, minimum=0.0, exclusive_minimum=True)
    delta: float = option(0.01, minimum=0.0, maximum=1.0, exclusive_minimum=True, exclusive_maximum=True)
    t_lo: int = option(200, minimum=1)
    t_hi: int = option(40000, minimum=1)
    accept_width_mult: float = option(0.1, minimum=0.0)
    comm_weight: float = option(10.0, minimum=0.0)
    schedule: Schedule = "pow2"
    noise: bool | Literal["wrapper"] = True
    check_basis: CheckBasis = "effective"
    accounting: Accounting = "basic"
    strict: bool = False
    eps_log: EpsilonLog = "log2"
    message_epsilon: float | None = option(None, minimum=0.0, exclusive_minimum=True)


@dataclass(frozen=True)
class FCBExpConfig(PFCBConfig):
    """Keywords of :class:`agents.solanki.FCBExp` (the experiments' FCB: P-FCB with exact window sums, D-21).

    Attributes:
        noise: fixed to False (exact sums; a DP wrapper turns FCBExp into P-FCB in wrapper mode).
    """

    noise: Literal[False] = False

    def __post_init__(self) -> None:
        if self.noise is True:  # a clearer message than the field check's
            raise ValueError("noise must be one of False: FCBExp never adds noise; use PFCB (solanki_pfcb) for noise")
        super().__post_init__()
