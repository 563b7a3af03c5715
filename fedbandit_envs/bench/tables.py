"""Summary tables of final results (mean and 95% CI over seeds), rendered as Markdown or HTML."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fedbandit_envs.bench.claims import final_rows
from fedbandit_envs.metrics import summarize
from fedbandit_envs.run import Results

#: Final metrics shown in reports when the results have them: column -> heading.
FINAL_METRICS = {
    "group_regret": "group regret",
    "cost": "cost",
    "messages": "messages",
    "bytes": "bytes",
    "epsilon_max": "epsilon spent (max)",
    "delta_max": "delta spent (max)",
}


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


def mean_ci(summary: Mapping[str, Any]) -> str:
    """``"mean ± half-width"`` of a :func:`~fedbandit_envs.metrics.summarize` row (95% CI; no ± for n = 1)."""
    half = summary["ci95_high"] - summary["mean"]
    return number(summary["mean"]) + (f" ± {number(half, 2)}" if summary["n"] > 1 else "")


def final_summary(
    results: Results, params: Sequence[str] = (), metrics: Sequence[str] | None = None
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the final-checkpoint table: one row per parameter point and algorithm.

    Args:
        results: tidy results.
        params: the swept parameter columns (identify a point).
        metrics: metric columns to show (default: those of :data:`FINAL_METRICS` present in the results).
    """
    rows = results.curves
    if not rows:
        return ["algorithm"], []
    metrics = [m for m in (metrics or FINAL_METRICS) if m in rows[0]]
    groups = [*params, "algorithm"]
    final = final_rows(rows, [*groups, "seed"])
    stats = {m: {tuple(r[c] for c in groups): r for r in summarize(final, m, by=groups)} for m in metrics}
    keys = list(dict.fromkeys(tuple(r[c] for c in groups) for r in final))
    slots = {tuple(r[c] for c in groups): r["slot"] for r in final}
    header = [*params, "algorithm", "n", "slot", *(FINAL_METRICS.get(m, m) for m in metrics)]
    body = [
        [*map(str, key), str(stats[metrics[0]][key]["n"]) if metrics else "", str(slots[key])]
        + [mean_ci(stats[m][key]) for m in metrics]
        for key in keys
    ]
    return header, body


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table (``|`` in cells escaped, newlines turned into spaces)."""

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


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
