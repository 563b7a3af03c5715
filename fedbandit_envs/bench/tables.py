"""Summary tables of final results (mean and 95% CI over seeds), rendered as Markdown or HTML.

Every table says what it shows: a ``±`` is always the half-width of the 95% confidence interval of the
mean over the row's seeds (:data:`PLUS_MINUS`), and a ledger column carries its unit in its heading
(:data:`UNITS`, :func:`unit_heading`) with the full definition in a legend (:func:`units_legend`).
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fedbandit_envs.metrics import final_checkpoint, summarize
from fedbandit_envs.run import Results

#: Units of the ledger's columns (:class:`~fedbandit_envs.channel.ledger.Ledger`): column -> (short unit for a
#: heading, definition for a legend).
UNITS = {
    "cost": (
        "price units",
        "Cost is in price units of the run's CostModel: c1 per agent-server link and c2 per agent-agent link used "
        "in a slot (each two-way link once per slot; the server's downlink is free unless free_server_downlink is "
        "off; with link_accounting='graph_edges' every edge of a component that carries a message), plus "
        "price_per_message per logical message and price_per_byte per payload byte transmitted (dropped copies "
        "included), summed over the population from the start of the run",
    ),
    "messages": (
        "count",
        "Messages counts logical messages transmitted, one per recipient (records packed into one message count "
        "one each), summed over the population from the start of the run",
    ),
    "bytes": (
        "payload bytes",
        "Bytes counts payload bytes over every transmitted copy, summed over the population from the start of the run",
    ),
}

#: What every ``"mean ± x"`` of the tables means.
PLUS_MINUS = (
    "Mean ± x: x is the half-width of the 95% confidence interval of the mean (Student t over the row's seeds; "
    "no ± for one seed)"
)


@dataclass(frozen=True)
class Link:
    """A table cell linking to ``href`` (Markdown ``[text](href)``, an ``<a>`` in HTML)."""

    text: str
    href: str

    def __str__(self) -> str:
        return f"[{self.text}]({self.href})"


@dataclass(frozen=True)
class RichText:
    """A table cell of text pieces and :class:`Link` pieces (e.g. a claim statement with linked spec codes)."""

    parts: tuple[str | Link, ...]

    def __str__(self) -> str:
        return "".join(map(str, self.parts))


def number(value: float, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits, but never in exponent form below 1e12 (``19990``, ``170``)."""
    value = float(value)
    if math.isfinite(value) and abs(value) < 1e12 and (value.is_integer() or abs(value) >= 10**digits):
        return str(round(value))
    return f"{value:.{digits}g}"


def unit_heading(column: str, statistic: str = "") -> str:
    """A ledger column's heading with its unit (:data:`UNITS`), e.g. ``"cost (price units, mean)"``."""
    inside = ", ".join(part for part in (UNITS[column][0], statistic) if part)
    return f"{column} ({inside})"


def units_legend(columns: Sequence[str]) -> str:
    """The definitions of the units of those ``columns`` that have one (:data:`UNITS`), as sentences."""
    return " ".join(f"{UNITS[c][1]}." for c in columns if c in UNITS)


#: Final metrics shown in reports when the results have them: column -> heading.
FINAL_METRICS = {
    "group_regret": "group regret",
    **{column: unit_heading(column) for column in UNITS},
    "epsilon_max": "epsilon spent (max)",
    "delta_max": "delta spent (max)",
}


def mean_ci(summary: Mapping[str, Any]) -> str:
    """``"mean ± half-width"`` of a :func:`~fedbandit_envs.metrics.summarize` row (95% CI; no ± for n = 1).

    ``"-"`` where the row has no value (e.g. the epsilon spent of an algorithm without privacy accounting).
    """
    if math.isnan(summary["mean"]):
        return "-"
    half = summary["ci95_high"] - summary["mean"]
    return number(summary["mean"]) + (f" ± {number(half, 2)}" if summary["n"] > 1 else "")


def final_summary(
    results: Results, params: Sequence[str] = (), metrics: Sequence[str] | None = None
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the final-checkpoint table: one row per parameter point and algorithm.

    Show :func:`final_legend` with it (what the ± and the units mean).

    Args:
        results: tidy results.
        params: the swept parameter columns (identify a point).
        metrics: metric columns to show (default: those of :data:`FINAL_METRICS` present in the results).
    """
    if not results.curves:
        return ["algorithm"], []
    metrics = [m for m in (metrics or FINAL_METRICS) if m in results.curves[0]]
    groups = [*params, "algorithm"]
    final = final_checkpoint(results.to_frame(), [*groups, "seed"])
    # Every summary lists the groups as the groupby of the slots does: in the order they first appear.
    summaries = {m: summarize(final, m, by=groups) for m in metrics}
    table = final.groupby(groups, sort=False, dropna=False)["slot"].last().reset_index()
    table = table[groups].assign(
        seeds=summaries[metrics[0]]["n"] if metrics else "",
        slot=table["slot"],
        **{f"metric {m}": [mean_ci(row) for row in summaries[m].to_dict("records")] for m in metrics},
    )
    header = [*params, "algorithm", "seeds", "slot", *(f"{FINAL_METRICS.get(m, m)}: mean ± 95% CI" for m in metrics)]
    return header, [list(map(str, row.values())) for row in table.to_dict("records")]


def nonfinite_note(results: Results, params: Sequence[str] = (), metrics: Sequence[str] | None = None) -> str:
    """A sentence naming the rows and columns of :func:`final_summary` with final values that are not finite.

    A NaN makes a row's mean ``-`` and an infinity makes it infinite, while its ``seeds`` counts every run: the
    sentence says which rows and how many of their seeds ("" when none). A column empty in every seed of a row
    (e.g. the epsilon spent of an algorithm without privacy accounting) is no value, not a non-finite one.
    """
    if not results.curves:
        return ""
    groups = [*params, "algorithm"]
    final = final_checkpoint(results.to_frame(), [*groups, "seed"])
    found = []
    for metric in [m for m in (metrics or FINAL_METRICS) if m in final]:
        values = final[metric].astype(float)
        flags = pd.DataFrame({"bad": ~np.isfinite(values), "nan": values.isna()})
        counts = flags.groupby([final[g] for g in groups], sort=False, dropna=False).agg(
            bad=("bad", "sum"), seeds=("bad", "size"), empty=("nan", "all")
        )
        rows = []
        for key, row in counts[(counts["bad"] > 0) & ~counts["empty"]].iterrows():
            *point, algorithm = key if isinstance(key, tuple) else (key,)
            where = f" [{', '.join(f'{p}={v}' for p, v in zip(params, point, strict=True))}]" if params else ""
            rows.append(f"{algorithm}{where} ({row['bad']} of {row['seeds']} seeds)")
        if rows:
            found.append(f"{FINAL_METRICS.get(metric, metric)} of {', '.join(rows)}")
    if not found:
        return ""
    return f"Not finite (NaN or ±inf) at the final checkpoint, so the mean shows '-' or inf: {'; '.join(found)}."


def final_legend(results: Results, metrics: Sequence[str] | None = None) -> str:
    """What :func:`final_summary` of ``results`` shows: the ± and the units of its ledger columns."""
    columns = results.curves[0] if results.curves else {}
    shown = [m for m in (metrics or FINAL_METRICS) if m in columns]
    return " ".join(filter(None, (f"{PLUS_MINUS}.", units_legend(shown))))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (``|`` and plain-text brackets in cells escaped, newlines made spaces)."""

    def cell(value: Any) -> str:
        return _markdown_text(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def _markdown_text(value: Any) -> str:
    """A cell's Markdown: links as ``[text](href)``, brackets of plain text escaped (never read as links)."""
    if isinstance(value, Link):
        return str(value)
    if isinstance(value, RichText):
        return "".join(map(_markdown_text, value.parts))
    return str(value).replace("[", "\\[").replace("]", "\\]")


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], row_classes: Sequence[str] = ()) -> str:
    """An HTML table with escaped cells; ``row_classes`` gives each body row a CSS class."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        css = f' class="{row_classes[i]}"' if i < len(row_classes) and row_classes[i] else ""
        body.append(f"<tr{css}>" + "".join(f"<td>{html_cell(v)}</td>" for v in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html_cell(value: Any) -> str:
    """One cell (or paragraph) as escaped HTML; :class:`Link` and :class:`RichText` pieces become links."""
    if isinstance(value, Link):
        return f'<a href="{html.escape(value.href)}">{html.escape(value.text)}</a>'
    if isinstance(value, RichText):
        return "".join(map(html_cell, value.parts))
    return html.escape(str(value))
