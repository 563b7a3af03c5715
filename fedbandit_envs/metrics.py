"""Aggregate tidy result rows across seeds: mean, spread and a 95% confidence interval."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np


def summarize(
    rows: Iterable[Mapping[str, Any]], value: str, by: Sequence[str] = ("algorithm", "slot")
) -> list[dict[str, Any]]:
    """Group rows by the ``by`` columns and summarise ``value`` over the group (usually the seeds).

    Returns one dict per group with the ``by`` columns and ``n``, ``mean``, ``std``, ``sem``, ``min``,
    ``max``, ``ci95_low`` and ``ci95_high`` (Student-t interval of the mean; equal to the mean for n = 1).
    """
    from scipy import stats  # here, not at the top: scipy.stats doubles the package's import time

    groups: dict[tuple, list[float]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in by), []).append(float(row[value]))
    summary = []
    for key, values in groups.items():
        data = np.asarray(values)
        n = len(data)
        std = float(data.std(ddof=1)) if n > 1 else 0.0
        sem = std / np.sqrt(n)
        half = float(stats.t.ppf(0.975, n - 1) * sem) if n > 1 else 0.0
        mean = float(data.mean())
        summary.append(
            {
                **dict(zip(by, key)),
                "n": n,
                "mean": mean,
                "std": std,
                "sem": sem,
                "min": float(data.min()),
                "max": float(data.max()),
                "ci95_low": mean - half,
                "ci95_high": mean + half,
            }
        )
    return summary
