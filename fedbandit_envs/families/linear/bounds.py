"""Li and Wang's communication bound for event-triggered linear UCB (spec ``li-wang-async-linucb.md``, E5).

Every message of Async-LinUCB multiplies ``det(W_i + lam I)`` of its client by more than
``min(gamma_U, gamma_D)``, and ``W_i`` stays below the Gram matrix ``S_T`` of all data, so
``C_T < M L_T / log min(gamma_U, gamma_D)`` for M registered clients, where
``L_T = ld(lam I + S_T) - d log lam <= d log(1 + T max|x|^2 / (d lam))``. The agents
(``agents.li_wang``) and the scenario catalogue's claims both use these functions.
"""

from __future__ import annotations

import numpy as np

__all__ = ["communication_bound", "log_det_bound"]


def log_det_bound(dimension: int, horizon: int, lam: float, context_norm: float = 1.0) -> float:
    """``L_T <= d log(1 + T max|x|^2 / (d lam))``, the bound on ``ld(lam I + S_T) - d log lam`` (spec E5)."""
    return float(dimension * np.log1p(horizon * context_norm**2 / (dimension * lam)))


def communication_bound(num_clients: int, log_det_gain: float, gamma_u: float, gamma_d: float) -> float:
    """Spec E5: ``C_T < M L_T / log min(gamma_U, gamma_D)`` for M registered clients (inf at gamma = 1)."""
    gamma_min = min(float(gamma_u), float(gamma_d))
    if gamma_min <= 1.0:
        return float("inf")
    return float(num_clients * log_det_gain / np.log(gamma_min))
