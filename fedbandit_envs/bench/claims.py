"""Reusable claim checks on tidy results (final-checkpoint means over seeds).

Each function returns a :class:`~fedbandit_envs.bench.scenarios.Claim` whose ``band`` states the tolerance
its check applies. Evidence quotes means over seeds. Results rows carry the
scenario's sweep values in columns named after the sweep key's keyword (``"env.horizon"`` -> ``horizon``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fedbandit_envs.bench.scenarios import Claim, ClaimVerdict
from fedbandit_envs.metrics import final_checkpoint
from fedbandit_envs.run import Results


def final_rows(
    rows: Iterable[Mapping[str, Any]], runs: Sequence[str] = ("algorithm", "seed")
) -> list[Mapping[str, Any]]:
    """The rows at each run's last checkpoint (largest ``slot``); a run is identified by the ``runs`` columns.

    The rows themselves, in their order (:func:`~fedbandit_envs.metrics.final_checkpoint` picks them).
    """
    rows = list(rows)
    if not rows:
        return []
    keys = pd.DataFrame([{column: row.get(column) for column in (*runs, "slot")} for row in rows])
    return [rows[i] for i in final_checkpoint(keys, runs).index]


def final_means(results: Results, metric: str, by: Sequence[str] = ("algorithm",)) -> dict[tuple, float]:
    """Mean of ``metric`` over seeds at each run's last checkpoint, grouped by the ``by`` columns."""
    groups: dict[tuple, list[float]] = {}
    for row in final_rows(results.curves, (*by, "seed")):
        groups.setdefault(tuple(row.get(k) for k in by), []).append(float(row[metric]))
    return {key: float(np.mean(values)) for key, values in groups.items()}


def ordering(name: str, description: str, algorithms: Sequence[str], metric: str = "group_regret") -> Claim:
    """Final ``metric`` strictly increases along ``algorithms`` (e.g. best first)."""

    def check(results: Results) -> ClaimVerdict:
        means = final_means(results, metric)
        values = {a: means.get((a,), float("nan")) for a in algorithms}
        ordered = all(values[a] < values[b] for a, b in zip(algorithms, algorithms[1:]))
        text = " < ".join(f"{a} ({values[a]:.4g})" for a in algorithms)
        return ClaimVerdict(bool(ordered), f"final {metric}, mean over runs: {text}", values)

    return Claim(name, description, check, band="strict: each mean below the next, no tolerance")


def monotone(
    name: str,
    description: str,
    parameter: str,
    direction: str,
    metric: str = "group_regret",
    algorithm: str | None = None,
    tolerance: float = 0.0,
) -> Claim:
    """Final ``metric`` is monotone in ``parameter`` (``direction``: "decreasing" or "increasing").

    ``tolerance`` allows each step to go the wrong way by that fraction of the previous value.
    """
    if direction not in ("decreasing", "increasing"):
        raise ValueError(f"direction must be 'decreasing' or 'increasing', got {direction!r}")
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be a fraction >= 0 of the previous mean, got {tolerance!r}")

    def check(results: Results) -> ClaimVerdict:
        means = final_means(results, metric, by=("algorithm", parameter))
        series: dict[Any, float] = {
            key[1]: value for key, value in means.items() if algorithm is None or key[0] == algorithm
        }
        points = sorted(series)
        values = [series[p] for p in points]
        sign = -1.0 if direction == "decreasing" else 1.0
        ok = all(sign * (b - a) >= -tolerance * abs(a) for a, b in zip(values, values[1:]))
        text = ", ".join(f"{parameter}={p}: {v:.4g}" for p, v in zip(points, values))
        return ClaimVerdict(
            bool(ok) and len(points) > 1,
            f"final {metric}, mean over runs, {direction} in {parameter}: {text}",
            dict(zip(map(str, points), values)),
        )

    wrong_way = "rise" if direction == "decreasing" else "fall"
    band = (
        f"each step may {wrong_way} by up to {tolerance * 100:g}% of the previous mean"
        if tolerance
        else f"no tolerance: no step may {wrong_way} (equal means pass)"
    )
    return Claim(name, description, check, band=band)
