"""Leaderboard: rank algorithms by final regret at matched cost and privacy, with ties where the seeds cannot tell.

Entries are only ranked against each other at the same sweep point (the same parameter values, so the
same privacy setting, topology, horizon, ...). Optional budgets make the match explicit: an entry whose
mean final communication cost exceeds ``max_cost``, or whose mean final epsilon spent exceeds
``max_epsilon``, is listed without a rank, with the reason.

The order is decided by tests, not by the means alone. At each point every pair of ranked entries is
compared by Welch's t-test on the per-seed final values (unequal variances; no pairing is assumed), and
the p-values of the point are corrected for multiple comparisons by Holm's step-down method at the
family-wise level ``alpha`` (default 0.05). An entry's rank is one plus the number of entries that are
significantly better than it (competition ranking), so entries the seeds cannot separate share a rank,
shown as ``"=2"``. With fewer than two seeds per entry nothing can be separated and every ranked entry
ties. Two entries whose values are constant over at least two seeds each differ exactly when their
values differ.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from fedbandit_envs.bench.tables import PLUS_MINUS, mean_ci, number, unit_heading, units_legend
from fedbandit_envs.metrics import final_checkpoint, summarize
from fedbandit_envs.run import Results
from fedbandit_envs.validation import check_real

#: Family-wise error rate of the pairwise tests at one point.
ALPHA = 0.05


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test of equal means of ``a`` and ``b`` (NaN with fewer than 2 values each).

    Samples that are both constant give 0 when their values differ and 1 when they are equal. When one sample is
    constant (e.g. a deterministic learner's regret on every seed), its variance is exactly 0 and SciPy's warning
    about precision lost on nearly identical data does not apply: it is not shown.
    """
    x, y = np.asarray(a, float), np.asarray(b, float)
    if len(x) < 2 or len(y) < 2:
        return float("nan")
    constant = np.ptp(x) == 0, np.ptp(y) == 0
    if all(constant):
        return 0.0 if x[0] != y[0] else 1.0
    with warnings.catch_warnings():
        if any(constant):
            warnings.filterwarnings("ignore", "Precision loss occurred in moment calculation", RuntimeWarning)
        return float(stats.ttest_ind(x, y, equal_var=False).pvalue)


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> list[bool]:
    """Which hypotheses Holm's step-down method rejects at family-wise level ``alpha`` (NaN is never rejected)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    order = sorted(range(len(p_values)), key=lambda i: (np.isnan(p_values[i]), p_values[i]))
    rejected = [False] * len(p_values)
    for step, i in enumerate(order):
        if not p_values[i] <= alpha / (len(p_values) - step):  # also stops at the first NaN
            break
        rejected[i] = True
    return rejected


def separated(values: dict[Any, list[float]], alpha: float = ALPHA) -> set[frozenset]:
    """The pairs of keys of ``values`` (per-seed samples) that Holm-corrected Welch t-tests tell apart."""
    pairs = list(itertools.combinations(values, 2))
    rejected = holm([welch_p(values[a], values[b]) for a, b in pairs], alpha)
    return {frozenset(pair) for pair, reject in zip(pairs, rejected) if reject}


def check_budgets(max_cost: float | None, max_epsilon: float | None) -> None:
    """Refuse a negative or non-finite budget (no entry could be within it, so none would be ranked); None is none."""
    for name, budget in (("max_cost (--max-cost)", max_cost), ("max_epsilon (--max-epsilon)", max_epsilon)):
        if budget is not None:
            check_real(name, budget, minimum=0)


def leaderboard(
    results: Results,
    params: Sequence[str] = (),
    metric: str = "group_regret",
    max_cost: float | None = None,
    max_epsilon: float | None = None,
    cost: str = "cost",
    alpha: float = ALPHA,
) -> list[dict[str, Any]]:
    """One entry per point and algorithm: ranked entries best first (by rank, then mean), then those over budget.

    Args:
        results: tidy results (``curves`` rows).
        params: the swept parameter columns; entries are ranked within each combination of their values.
        metric: what is ranked (lower is better).
        max_cost: cost budget: entries above it get no rank.
        max_epsilon: privacy budget on the mean final ``epsilon_max``: entries above it (or without
            privacy accounting) get no rank.
        cost: the cost column compared with ``max_cost``.
        alpha: family-wise error rate of the pairwise tests at a point (see the module docstring).

    Raises:
        ValueError: a budget is negative or not finite (:func:`check_budgets`).

    Returns:
        dicts with ``point`` (parameter column -> value), ``rank`` (None when over budget), ``tied``
        (another ranked entry of the point has the same rank), ``algorithm``, ``n`` (seeds), ``mean``,
        ``ci95`` (half-width of the 95% confidence interval of the mean), ``summary`` (``"mean ± ci95"``
        text), ``cost``, ``epsilon_spent`` (None without accounting), ``unseparated`` (the ranked
        algorithms of the point the tests cannot tell it apart from) and ``note`` (why an entry has no rank: over
        a budget, or ``metric`` not finite in some seed).
    """
    check_budgets(max_cost, max_epsilon)
    if not results.curves:
        return []
    frame = results.to_frame()
    for column in (metric, *params):
        if column not in frame:
            raise ValueError(f"results have no column {column!r}; available: {sorted(frame.columns)}")
    groups = [*params, "algorithm"]
    final = final_checkpoint(frame, [*groups, "seed"])
    # One row per (point, algorithm), in the order groups first appear: the metric's summary, its per-seed
    # values, and the mean final cost and epsilon (None when the results lack the column); the added
    # columns start with "_" so that no parameter column is overwritten.
    table = summarize(final, metric, by=groups)
    table["_samples"] = final.groupby(groups, sort=False, dropna=False)[metric].agg(list).tolist()
    for name, column in (("_cost", cost), ("_epsilon", "epsilon_max")):
        table[name] = summarize(final, column, by=groups)["mean"].to_numpy() if column in frame else None
    points = table.groupby(list(params), sort=False, dropna=False) if params else [((), table)]
    entries: list[dict[str, Any]] = []
    for _, members in points:
        rows = members.sort_values("mean", kind="stable").to_dict("records")
        for row in rows:
            for key in ("_cost", "_epsilon"):  # an algorithm without accounting has NaN where others have values
                row[key] = None if row[key] is None or math.isnan(row[key]) else row[key]
            bad = sum(not math.isfinite(value) for value in row["_samples"])
            nonfinite = [f"{metric} not finite in {bad} of {row['n']} seeds"] if bad else []
            row["_note"] = "; ".join(nonfinite + _budget_notes(row["_cost"], row["_epsilon"], max_cost, max_epsilon))
        ranked = {row["algorithm"]: row for row in rows if not row["_note"]}
        apart = separated({name: row["_samples"] for name, row in ranked.items()}, alpha)
        ranks = {
            name: 1 + sum(other["mean"] < row["mean"] and frozenset((o, name)) in apart for o, other in ranked.items())
            for name, row in ranked.items()
        }
        shared = list(ranks.values())
        unseparated = {name: [o for o in ranks if o != name and frozenset((o, name)) not in apart] for name in ranks}
        for row in sorted(ranked.values(), key=lambda r: ranks[r["algorithm"]]) + [r for r in rows if r["_note"]]:
            name = row["algorithm"]
            entries.append(
                {
                    "point": {p: row[p] for p in params},
                    "rank": ranks.get(name),
                    "tied": name in ranks and shared.count(ranks[name]) > 1,
                    "algorithm": name,
                    "n": row["n"],
                    "mean": row["mean"],
                    "ci95": row["ci95_high"] - row["mean"],
                    "summary": mean_ci(row),
                    "cost": row["_cost"],
                    "epsilon_spent": row["_epsilon"],
                    "unseparated": unseparated.get(name, []),
                    "note": row["_note"],
                }
            )
    return entries


def _budget_notes(
    cost: float | None, epsilon: float | None, max_cost: float | None, max_epsilon: float | None
) -> list[str]:
    """Why an entry with these mean final cost and epsilon is over the budgets (empty when within them)."""
    notes = []
    for name, mean, budget, missing in (
        ("cost", cost, max_cost, "no cost column"),
        ("epsilon", epsilon, max_epsilon, "no privacy accounting"),
    ):
        if budget is not None and (mean is None or mean > budget):
            notes.append(f"{name} {mean:.4g} > {budget:g}" if mean is not None else missing)
    return notes


def rank_text(entry: dict[str, Any]) -> str:
    """The rank cell: ``"2"``, ``"=2"`` when tied with another entry of the point, ``"-"`` without a rank."""
    if entry["rank"] is None:
        return "-"
    return f"={entry['rank']}" if entry["tied"] else str(entry["rank"])


def leaderboard_table(
    entries: Sequence[dict[str, Any]], params: Sequence[str] = (), metric: str = "group_regret"
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a leaderboard for :func:`~fedbandit_envs.bench.tables.markdown_table` / ``html_table``.

    :func:`leaderboard_legend` says what the rank, the ± and the cost unit mean; show it with the table.
    """
    with_epsilon = any(e["epsilon_spent"] is not None for e in entries)
    header = [*params, "rank", "algorithm", "seeds", f"final {metric} (mean ± 95% CI)", unit_heading("cost", "mean")]
    header += ["epsilon spent (mean)"] if with_epsilon else []
    header += ["not separated from", "note"]
    body = []
    for e in entries:
        row = [*(str(e["point"][p]) for p in params), rank_text(e), e["algorithm"], str(e["n"]), e["summary"]]
        row += ["-" if e["cost"] is None else number(e["cost"])]
        row += ["-" if e["epsilon_spent"] is None else number(e["epsilon_spent"])] if with_epsilon else []
        row += [", ".join(e["unseparated"]), e["note"]]
        body.append(row)
    return header, body


def leaderboard_legend(metric: str = "group_regret", alpha: float = ALPHA) -> str:
    """What a leaderboard table shows: the ranking rule, the ± and the cost unit."""
    return (
        f"Lower final {metric} is better. Rank = 1 + the number of entries of the same point that are "
        f"significantly better: Welch t-tests on the per-seed final values, every pair of the point, Holm-corrected "
        f"at family-wise level {alpha:g}. Entries the tests cannot separate share a rank, marked '=' (e.g. '=2'); "
        f"'not separated from' lists them. Unranked ('-'): over the cost or privacy budget, or a final {metric} "
        f"that is not finite in some seed (NaN or ±inf; the note says in how many). {PLUS_MINUS}. "
        + units_legend(["cost"])
    )
