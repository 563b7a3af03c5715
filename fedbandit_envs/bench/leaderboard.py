"""Leaderboard: rank algorithms by final regret at matched cost and privacy.

Entries are only ranked against each other at the same sweep point (the same parameter values, so the
same privacy setting, topology, horizon, ...). Optional budgets make the match explicit: an entry whose
mean final communication cost exceeds ``max_cost``, or whose mean final epsilon spent exceeds
``max_epsilon``, is listed without a rank, with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedbandit_envs.bench.claims import final_rows
from fedbandit_envs.bench.tables import mean_ci, number
from fedbandit_envs.metrics import summarize
from fedbandit_envs.run import Results


def leaderboard(
    results: Results,
    params: Sequence[str] = (),
    metric: str = "group_regret",
    max_cost: float | None = None,
    max_epsilon: float | None = None,
    cost: str = "cost",
) -> list[dict[str, Any]]:
    """One entry per point and algorithm, best (lowest mean final ``metric``) first within each point.

    Args:
        results: tidy results (``curves`` rows).
        params: the swept parameter columns; entries are ranked within each combination of their values.
        metric: what is ranked (lower is better).
        max_cost: cost budget: entries above it get no rank.
        max_epsilon: privacy budget on the mean final ``epsilon_max``: entries above it (or without
            privacy accounting) get no rank.
        cost: the cost column compared with ``max_cost``.

    Returns:
        dicts with ``point`` (parameter column -> value), ``rank`` (None when over budget), ``algorithm``,
        ``n``, ``mean``, ``ci95`` (half-width), ``summary`` (``"mean ± ci95"`` text), ``cost``,
        ``epsilon_spent`` (None without accounting) and ``note`` (why an entry has no rank).
    """
    rows = results.curves
    if not rows:
        return []
    for column in (metric, *params):
        if column not in rows[0]:
            raise ValueError(f"results have no column {column!r}; available: {sorted(rows[0])}")
    groups = [*params, "algorithm"]
    final = final_rows(rows, [*groups, "seed"])

    def means(column: str) -> dict[tuple, dict[str, Any]]:
        if column not in rows[0]:
            return {}
        return {tuple(r[c] for c in groups): r for r in summarize(final, column, by=groups)}

    scores, costs, epsilons = means(metric), means(cost), means("epsilon_max")
    entries: list[dict[str, Any]] = []
    for point in dict.fromkeys(key[:-1] for key in scores):
        keys = sorted((k for k in scores if k[:-1] == point), key=lambda k: scores[k]["mean"])
        rank = 0
        for key in keys:
            spent = epsilons[key]["mean"] if key in epsilons else None
            paid = costs[key]["mean"] if key in costs else None
            notes = []
            if max_cost is not None and (paid is None or paid > max_cost):
                notes.append(f"cost {paid:.4g} > {max_cost:g}" if paid is not None else "no cost column")
            if max_epsilon is not None and (spent is None or spent > max_epsilon):
                notes.append(f"epsilon {spent:.4g} > {max_epsilon:g}" if spent is not None else "no privacy accounting")
            if not notes:
                rank += 1
            entries.append(
                {
                    "point": dict(zip(params, point)),
                    "rank": None if notes else rank,
                    "algorithm": key[-1],
                    "n": scores[key]["n"],
                    "mean": scores[key]["mean"],
                    "ci95": scores[key]["ci95_high"] - scores[key]["mean"],
                    "summary": mean_ci(scores[key]),
                    "cost": paid,
                    "epsilon_spent": spent,
                    "note": "; ".join(notes),
                }
            )
    return entries


def leaderboard_table(
    entries: Sequence[dict[str, Any]], params: Sequence[str] = (), metric: str = "group_regret"
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a leaderboard for :func:`~fedbandit_envs.bench.tables.markdown_table` / ``html_table``."""
    with_epsilon = any(e["epsilon_spent"] is not None for e in entries)
    header = [*params, "rank", "algorithm", f"final {metric} (mean ± 95% CI)", "cost"]
    header += ["epsilon spent"] if with_epsilon else []
    header += ["note"]
    body = []
    for e in entries:
        row = [*(str(e["point"][p]) for p in params), "-" if e["rank"] is None else str(e["rank"]), e["algorithm"]]
        row += [e["summary"], "-" if e["cost"] is None else number(e["cost"])]
        row += (["-" if e["epsilon_spent"] is None else number(e["epsilon_spent"])] if with_epsilon else []) + [
            e["note"]
        ]
        body.append(row)
    return header, body
