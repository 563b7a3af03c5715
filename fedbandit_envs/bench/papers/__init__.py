"""The papers the catalogue reproduces, as data for their replication reports.

One module per paper (``dubey``, ``li_song``, ``li_wang``, ``solanki``, ``zhu``: the prefixes of its scenario
names) defines a :class:`Paper`: the citation, and for every figure and table of the paper that a scenario
reproduces a :class:`PaperItem` with the paper's reported numbers (:class:`PaperValue`) beside a function that
measures the same quantity, in the same units, on our results. Where the paper gives only a plot the value says
so (:data:`NOT_REPORTED`, or "read from Fig. X, approx. ..."). A value or claim that is known not to reproduce
carries the measured reason. :func:`~fedbandit_envs.bench.report.write_paper_report` renders a paper.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedbandit_envs.bench.claims import final_means
from fedbandit_envs.bench.tables import number
from fedbandit_envs.run import Results

#: The paper cell of a quantity the paper shows only as a plot, without numbers in its text.
NOT_REPORTED = "not reported in numbers"

#: The papers, by the prefix of their scenario names, in report order.
KEYS = ("dubey", "li_song", "li_wang", "solanki", "zhu")

#: A function measuring our value of a quantity on a scenario's results, as text (units as the quantity states).
Measure = Callable[[Results], str]


@dataclass(frozen=True)
class PaperValue:
    """A quantity the paper reports, with the paper's value beside ours.

    Attributes:
        quantity: what is compared, with its units (e.g. "regret per agent at T, P-FCB(eps=1) / FCB").
        paper: the paper's value as text, with where it stands ("2.36 (section 6.2 of the paper: +136%)"),
            "read from Fig. X, approx. ..." for values read off a plot, or :data:`NOT_REPORTED`.
        ours: measures our value on the scenario's results (see :func:`final_mean`, :func:`final_ratio`).
        reason: when our value does not reproduce the paper's, the measured reason ("" otherwise).
    """

    quantity: str
    paper: str
    ours: Measure
    reason: str = ""


@dataclass(frozen=True)
class PaperItem:
    """A figure or table of the paper that a registered scenario reproduces.

    Attributes:
        label: the paper's name for it ("Fig. 1(a)", "Table II").
        scenario: the registered scenario that reproduces it.
        shows: what the paper's figure or table shows, in a sentence.
        values: the quantities compared (at least one; a plot-only figure states :data:`NOT_REPORTED`).
    """

    label: str
    scenario: str
    shows: str
    values: tuple[PaperValue, ...]

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(
                f"{self.label} ({self.scenario}) needs at least one PaperValue; a plot-only figure "
                f"states paper={NOT_REPORTED!r}"
            )


@dataclass(frozen=True)
class Paper:
    """A paper's replication data.

    Attributes:
        key: the prefix of its scenario names ("dubey").
        citation: the full citation.
        items: the figures and tables a scenario reproduces, in the paper's order.
        reasons: ``"<scenario>:<claim>"`` -> the measured reason why that claim does not reproduce, for claims
            known to fail (the report shows it when the claim does not pass).
        codes: ``"<scenario>:<claim>"`` -> the spec code of the claim's decision entry, for claims whose statement
            cites none.
        notes: paragraphs shown under the citation (e.g. what the paper's text leaves out).
    """

    key: str
    citation: str
    items: tuple[PaperItem, ...]
    reasons: Mapping[str, str] = field(default_factory=dict)
    codes: Mapping[str, str] = field(default_factory=dict)
    notes: Sequence[str] = ()

    @property
    def scenarios(self) -> list[str]:
        """The scenarios of the items, each once, in order."""
        return list(dict.fromkeys(item.scenario for item in self.items))


def get_paper(key: str) -> Paper:
    """The :class:`Paper` of ``key`` (one of :data:`KEYS`)."""
    if key not in KEYS:
        raise ValueError(f"unknown paper {key!r}; choose from {list(KEYS)}")
    paper = importlib.import_module(f"{__name__}.{key}").PAPER
    assert isinstance(paper, Paper), f"{__name__}.{key}.PAPER must be a Paper"
    return paper


def paper_of(scenario: str) -> str:
    """The paper key of a scenario name (its prefix before the ``/``)."""
    return scenario.partition("/")[0]


def _select(where: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    return tuple(where), tuple(where.values())


def _mean(results: Results, metric: str, where: Mapping[str, Any]) -> float:
    by, key = _select(where)
    if not by:
        raise ValueError("name the rows to average with at least one column, e.g. algorithm='fcb'")
    means = final_means(results, metric, by)
    if key not in means:
        raise ValueError(f"no runs with {dict(where)} in the results (groups: {sorted(map(str, means))})")
    return means[key]


def final_mean(metric: str, digits: int = 4, **where: Any) -> Measure:
    """Our value: the mean over seeds of ``metric`` at the last checkpoint of the runs matching ``where``."""
    return lambda results: number(_mean(results, metric, where), digits)


def final_ratio(metric: str, numerator: Mapping[str, Any], denominator: Mapping[str, Any]) -> Measure:
    """Our value: the ratio of the final means of ``metric`` over the ``numerator`` and ``denominator`` runs."""
    return lambda results: f"{_mean(results, metric, numerator) / _mean(results, metric, denominator):.2f}"


def _natural(value: Any) -> list[Any]:
    """A sort key ordering the numbers inside text by value ("gamma=5" before "gamma=101")."""
    parts = re.split(r"(\d+(?:\.\d+)?)", str(value))
    return [float(part) if i % 2 else part for i, part in enumerate(parts)]


def _sorted(values: Mapping[Any, float]) -> list[Any]:
    """The keys in order: numbers by value, text with the numbers in it by value."""
    try:
        return sorted(values) if not any(isinstance(key, str) for key in values) else sorted(values, key=_natural)
    except TypeError:
        return sorted(values, key=str)


def final_by(metric: str, column: str, digits: int = 4, **where: Any) -> Measure:
    """Our values: the final mean of ``metric`` for each value of ``column`` among the runs matching ``where``.

    Values in order (numbers inside labels by value), each named ``column = value`` (algorithms by label alone).
    """

    def measure(results: Results) -> str:
        by = (*where, column)
        means = final_means(results, metric, by)
        chosen = {key[-1]: value for key, value in means.items() if key[:-1] == tuple(where.values())}
        if not chosen:
            raise ValueError(f"no runs with {dict(where)} in the results")
        named = "" if column == "algorithm" else f"{column} = "
        return "; ".join(f"{named}{k}: {number(chosen[k], digits)}" for k in _sorted(chosen))

    return measure


__all__ = [
    "KEYS",
    "NOT_REPORTED",
    "Measure",
    "Paper",
    "PaperItem",
    "PaperValue",
    "final_by",
    "final_mean",
    "final_ratio",
    "get_paper",
    "paper_of",
]
