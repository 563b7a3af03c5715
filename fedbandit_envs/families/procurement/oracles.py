"""Oracles of the procurement problem: the best procurement vector for given qualities (solanki-pfcb §1.6).

One agent, one round::

    Oracle(u, v, c, k, theta, rho):  maximise  sum_i l_i (rho u_i - c_i)
                                     s.t.      sum_i l_i (v_i - theta) >= 0,   l_i in {0, ..., k_i}

``u`` is the quality vector of the objective, ``v`` the one of the quality constraint and ``theta`` the
threshold (the agents pass ``u = q+``, ``v`` by their preset and ``theta = alpha + gamma``; the benchmark of
the regret passes ``u = v = q`` and ``theta = alpha``). The empty vector is always feasible, so the problem
always has a solution.

Every oracle is *batched*: ``u, v, c, k`` are arrays of shape ``(..., m)`` (broadcast together), ``theta`` a
scalar or an array of the leading shape ``(...)``, and the result is an ``int64`` array ``(..., m)``. A
single problem is the case of 1-D inputs.

* :class:`GreedyOracle` (the agents' default, spec D-08): deterministic, ties broken by producer index.
  Its fast path (``l_i = k_i`` iff ``rho u_i > c_i``, exactly optimal when it satisfies the constraint) is
  one vectorised array operation over all rows; only the rows where the constraint binds go through the
  LP-relaxation-and-rounding steps, one row at a time.
* :class:`ExactOracle`: ``scipy.optimize.milp`` with a zero relative gap (for tests and the exact regret).
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "ORACLES",
    "QC_TOLERANCE",
    "ExactOracle",
    "GreedyOracle",
    "Oracle",
    "check_oracle_inputs",
    "constraint_slack",
    "make_oracle",
]

#: Absolute float tolerance of the quality constraint ``sum_i l_i (v_i - theta) >= -QC_TOLERANCE`` (spec §1.4).
QC_TOLERANCE = 1e-12

#: Tolerance used when rounding fractional LP amounts to integers (guards ``ceil(2.0000000001) = 3``).
_ROUND_TOLERANCE = 1e-9


@runtime_checkable
class Oracle(Protocol):
    """The pluggable oracle: ``(u, v, c, k, theta, rho) -> int64 units`` over any leading batch shape."""

    def __call__(
        self, u: np.ndarray, v: np.ndarray, c: np.ndarray, k: np.ndarray, theta: float | np.ndarray, rho: float
    ) -> np.ndarray:
        """The procurement vector(s) maximising the objective under the quality constraint."""


def check_oracle_inputs(
    u: np.ndarray, v: np.ndarray, c: np.ndarray, k: np.ndarray, theta: float | np.ndarray, rho: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, tuple[int, ...]]:
    """Validate oracle inputs; returns ``(u, v, c, k, theta[..., None], rho, shape)`` with the broadcast shape.

    The arrays are not broadcast (arithmetic broadcasts them). Raises ``ValueError`` for non-finite values,
    negative or non-integer capacities, shapes that do not broadcast to ``(..., m)``, or ``rho <= 0``.
    """
    arrays = []
    for name, value in (("u", u), ("v", v), ("c", c), ("theta", theta)):
        array = np.asarray(value, dtype=np.float64)
        finite = math.isfinite(value) if isinstance(value, float) else np.isfinite(array).all()
        if not finite:
            raise ValueError(f"oracle input {name} contains NaN or inf; pass finite qualities, costs and threshold")
        arrays.append(array)
    u, v, c, theta = arrays
    k = np.asarray(k)
    if k.dtype.kind not in "iu":
        if k.dtype.kind != "f" or not np.all(np.isfinite(k)) or not np.all(k == np.round(k)):
            raise ValueError(f"capacities k must be integers, got dtype {k.dtype}")
        k = k.astype(np.int64)
    if k.size and k.min() < 0:
        raise ValueError(f"capacities k must be >= 0, got min {k.min()}")
    if isinstance(rho, bool) or not isinstance(rho, int | float | np.integer | np.floating) or not rho > 0:
        raise ValueError(f"rho (revenue per unit of quality) must be a number > 0, got {rho!r}")
    try:
        shape = np.broadcast(u, v, c, k).shape
        if len(shape) == 0:
            raise ValueError
        if theta.ndim and np.broadcast_shapes(theta.shape, shape[:-1]) != shape[:-1]:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"oracle inputs must broadcast to one shape (..., m); got u {u.shape}, v {v.shape}, c {c.shape}, "
            f"k {k.shape} and theta {theta.shape} (theta: a scalar or the leading shape)"
        ) from None
    return u, v, c, k, theta[..., None], float(rho), shape


def constraint_slack(units: np.ndarray, v: np.ndarray, theta: float | np.ndarray) -> np.ndarray:
    """``sum_i l_i (v_i - theta)`` over the last axis (``theta`` scalar or of the leading shape)."""
    theta = np.asarray(theta, dtype=np.float64)
    return (np.asarray(units) * (np.asarray(v) - theta[..., None])).sum(axis=-1)


def _fast_path(
    u: np.ndarray, v: np.ndarray, c: np.ndarray, k: np.ndarray, theta: float | np.ndarray, rho: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    """The checked problem and its optimum without the constraint, and where that optimum is infeasible.

    Returns ``(units, infeasible, r, d, k, shape)``: full capacity of every profitable producer
    (``r = rho u - c > 0``), the rows whose slack ``sum units * d`` (``d = v - theta``) is below
    ``-QC_TOLERANCE``, the revenues, slack rates, capacities and the output shape.
    """
    u, v, c, k, theta, rho, shape = check_oracle_inputs(u, v, c, k, theta, rho)
    r = rho * u - c
    d = v - theta
    units = np.where(r > 0, k, 0)
    infeasible = (units * d).sum(axis=-1) < -QC_TOLERANCE
    return units, infeasible, r, d, k, shape


class GreedyOracle:
    """The deterministic greedy of solanki-pfcb §1.6 (b), replacing the paper's undescribed Greedy SSA (D-08).

    1. Fast path: ``l_i = k_i`` if ``r_i = rho u_i - c_i > 0`` else 0; returned when feasible (then optimal).
    2. Otherwise partition: A = {r > 0, d >= 0} (take all), B = {r > 0, d < 0} (profitable, uses slack),
       C = {r <= 0, d > 0} (unprofitable, creates slack), with ``d_i = v_i - theta``.
    3. LP relaxation by a two-list merge: B by gain per unit of slack ``r/|d|`` descending, C by price per
       unit of slack ``|r|/d`` ascending; each b first spends free slack, then buys slack from the cheapest c
       while that price is below its gain.
    4. Rounding: C amounts up, B amounts down; if the slack is negative remove B units from the worst
       ratio; fill B units in ratio order while the slack allows; prune C units from the most expensive.

    The result is always feasible for ``(v, theta)`` and inside the box. Sorts are stable, so ties are
    broken by producer index.
    """

    def __call__(
        self, u: np.ndarray, v: np.ndarray, c: np.ndarray, k: np.ndarray, theta: float | np.ndarray, rho: float
    ) -> np.ndarray:
        """Solve every row (see the module docstring for shapes)."""
        units, binding, r, d, k, shape = _fast_path(u, v, c, k, theta, rho)
        if binding.any():
            units = _solve_rows(shape, units, binding, r, d, k, greedy_row)
        if units.shape != shape:
            units = np.broadcast_to(units, shape)
        return units.astype(np.int64, copy=False)


def _solve_rows(shape, units, rows, r, d, k, solve_row) -> np.ndarray:
    """``units`` broadcast to ``shape`` (..., m), each row flagged in ``rows`` replaced by ``solve_row(r, d, k)``."""
    m = shape[-1]
    flat = np.broadcast_to(units, shape).reshape(-1, m).copy()
    r2, d2, k2 = (np.broadcast_to(a, shape).reshape(-1, m) for a in (r, d, k))
    for row in np.flatnonzero(np.broadcast_to(rows, shape[:-1])):
        flat[row] = solve_row(r2[row], d2[row], k2[row])
    return flat.reshape(shape)


def greedy_row(r: np.ndarray, d: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Steps 2-5 of the greedy for one binding problem with revenues ``r``, slack rates ``d``, capacities ``k``."""
    r_list, d_list, k_list = r.tolist(), d.tolist(), k.tolist()
    amount = [float(kk) if (rr > 0 and dd >= 0) else 0.0 for rr, dd, kk in zip(r_list, d_list, k_list)]
    slack = sum(dd * a for dd, a in zip(d_list, amount))
    b_items = [i for i in range(len(r_list)) if r_list[i] > 0 and d_list[i] < 0]
    c_items = [i for i in range(len(r_list)) if r_list[i] <= 0 and d_list[i] > 0]
    b_items.sort(key=lambda i: -r_list[i] / -d_list[i])  # gain per unit of slack, descending (stable)
    c_items.sort(key=lambda i: -r_list[i] / d_list[i])  # price per unit of slack, ascending (stable)
    cursor = 0
    for b in b_items:
        rate = -d_list[b]
        free = min(k_list[b] - amount[b], max(slack, 0.0) / rate)
        amount[b] += free
        slack -= free * rate
        gain = r_list[b] / rate
        while k_list[b] - amount[b] > _ROUND_TOLERANCE and cursor < len(c_items):
            c = c_items[cursor]
            if -r_list[c] / d_list[c] >= gain:
                break
            needed = (k_list[b] - amount[b]) * rate
            available = (k_list[c] - amount[c]) * d_list[c]
            moved = min(needed, available)
            amount[c] += moved / d_list[c]
            amount[b] += moved / rate
            if moved >= available:
                cursor += 1
    units = [kk if (rr > 0 and dd >= 0) else 0 for rr, dd, kk in zip(r_list, d_list, k_list)]
    for c in c_items:
        units[c] = min(k_list[c], math.ceil(amount[c] - _ROUND_TOLERANCE))
    for b in b_items:
        units[b] = math.floor(amount[b] + _ROUND_TOLERANCE)
    slack = sum(dd * uu for dd, uu in zip(d_list, units))
    for b in reversed(b_items):  # remove B units from the worst ratio while the slack is negative
        if slack >= -QC_TOLERANCE:
            break
        removed = min(units[b], math.ceil(-slack / -d_list[b]))
        units[b] -= removed
        slack += removed * -d_list[b]
    for b in b_items:  # fill
        added = max(0, min(k_list[b] - units[b], math.floor(slack / -d_list[b])))
        units[b] += added
        slack -= added * -d_list[b]
    for c in reversed(c_items):  # prune the most expensive slack first
        removed = max(0, min(units[c], math.floor(slack / d_list[c])))
        units[c] -= removed
        slack -= removed * d_list[c]
    return np.array(units, np.int64)


class ExactOracle:
    """The exact optimum by mixed-integer linear programming (``scipy.optimize.milp``, zero relative gap).

    The solution is rounded to integers and re-checked against the constraint with :data:`QC_TOLERANCE`;
    if HiGHS's feasibility tolerance let a slightly infeasible point through, the row is solved again with
    a small positive margin on the constraint. About 1.5 ms per binding row.

    Attributes:
        fast_path: return the unconstrained optimum without calling the solver when it is feasible (it is
            then optimal). ``False`` sends every row through ``milp`` (for testing the fast path).
    """

    def __init__(self, fast_path: bool = True) -> None:
        self.fast_path = bool(fast_path)

    def __call__(
        self, u: np.ndarray, v: np.ndarray, c: np.ndarray, k: np.ndarray, theta: float | np.ndarray, rho: float
    ) -> np.ndarray:
        """Solve every row (see the module docstring for shapes)."""
        units, solve, r, d, k, shape = _fast_path(u, v, c, k, theta, rho)
        if not self.fast_path:
            solve = np.ones(shape[:-1], bool)
        return _solve_rows(shape, units, solve, r, d, k, milp_row).astype(np.int64)


def milp_row(r: np.ndarray, d: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The exact optimum of one problem with revenues ``r``, slack rates ``d`` and capacities ``k``."""
    from scipy.optimize import Bounds, LinearConstraint, milp  # here: scipy.optimize is slow to import

    for margin in (0.0, 1e-7, 1e-5):
        result = milp(
            c=-r,
            constraints=LinearConstraint(d[None, :], lb=margin, ub=np.inf),
            integrality=np.ones(len(r)),
            bounds=Bounds(0, k),
            options={"mip_rel_gap": 0},
        )
        if result.x is None:
            continue
        units = np.clip(np.round(result.x), 0, k).astype(np.int64)
        if float(units @ d) >= -QC_TOLERANCE:
            return units
    raise RuntimeError("scipy.optimize.milp found no feasible integer point; the empty vector always is one")


#: Oracles known by name.
ORACLES: dict[str, type] = {"greedy": GreedyOracle, "exact": ExactOracle}


def make_oracle(oracle: str | Oracle) -> Oracle:
    """An oracle from a name in :data:`ORACLES` (``"greedy"``, ``"exact"``) or an :class:`Oracle` object."""
    if isinstance(oracle, str):
        if oracle not in ORACLES:
            raise ValueError(f"unknown oracle {oracle!r}; use one of {sorted(ORACLES)} or an Oracle object")
        return ORACLES[oracle]()
    if not callable(oracle):
        raise TypeError(f"oracle must be a name in {sorted(ORACLES)} or a callable (u, v, c, k, theta, rho) -> units")
    return oracle
