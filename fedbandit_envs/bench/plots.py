"""Figures from tidy results (needs the ``plot`` extra: matplotlib).

* :func:`plot_regret`: group regret vs slot, mean over seeds with a min-max or 95% CI band.
* :func:`plot_figure`: any :class:`~fedbandit_envs.bench.scenarios.FigureSpec`: a metric vs slot, its final
  value vs a swept parameter (points with error bars per category for a categorical parameter), or a
  trade-off of two final values, one line per ``hue`` value and one panel per ``facet`` value (the
  per-scenario figures that mirror the papers').
* :func:`plot_regret_vs_cost` and :func:`plot_regret_vs_epsilon`: final regret against communication
  cost or privacy, with 95% confidence intervals on both axes.

Every figure stays legible at any number of lines: each line gets its own (colour, line style, marker)
(:func:`line_styles`), the legend sits outside the axes at the right of the figure (never over the
data or the title), axes go logarithmic when the data span decades (:func:`axis_scale`) and categorical
parameters (seeds, instance ids, names) are never drawn as a line over a numeric axis
(:func:`is_categorical`). Every function writes each path it is given (PNG, SVG or PDF by the suffix)
atomically and returns the paths.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedbandit_envs.bench.scenarios import FigureSpec
from fedbandit_envs.bench.store import atomic_write
from fedbandit_envs.bench.tables import UNITS, unit_heading
from fedbandit_envs.metrics import final_checkpoint, summarize
from fedbandit_envs.run import Results

PathLike = str | Path
BANDS = ("minmax", "ci95")
LABELS = {
    "slot": "slot t",
    "group_regret": "group pseudo-regret",
    "mean_regret": "pseudo-regret per agent",
    "cost": f"communication cost ({UNITS['cost'][0]})",
    "link_cost": f"link cost ({UNITS['cost'][0]})",
    "messages": unit_heading("messages"),
    "bytes": unit_heading("bytes"),
    "epsilon_max": "epsilon spent (max over agents)",
    "epsilon_mean": "epsilon spent (mean over agents)",
    "epsilon": "privacy budget epsilon",
    "frr": "FRR (federated / non-federated regret)",
    "normalised_reward": "reward / reward of random",
}
#: Ten well-separated colours; with :data:`LINESTYLES` and :data:`MARKERS` they give 80 distinct lines.
COLOURS = (
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:gray",
    "tab:olive",
    "tab:cyan",
)
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
#: Parameter names that identify things rather than measure them (see :func:`is_categorical`).
CATEGORICAL_NAMES = frozenset({"seed", "instance", "graph", "topology", "profile", "arrival", "mode", "homogeneous"})
#: Fonts for figures pasted into a paper at column width.
STYLE = {
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 8.5,
    "figure.titlesize": 11,
}
#: A linear parameter axis gets one tick per swept value up to this many values.
MAX_TICKS = 12
#: Legend entries per legend column before the legend gets another column.
LEGEND_ROWS = 26


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'fedbandit-envs[plot]'") from error
    return plt


def _as_paths(paths: PathLike | Sequence[PathLike]) -> list[Path]:
    return [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]


def save_figure(figure: Any, paths: PathLike | Sequence[PathLike], dpi: int = 150) -> list[Path]:
    """Write a matplotlib figure to every path (format from the suffix), atomically, then close it."""
    plt = _pyplot()
    written = []
    try:
        for path in _as_paths(paths):
            kind = path.suffix.lstrip(".").lower()
            if kind not in ("png", "svg", "pdf"):
                raise ValueError(f"figure paths must end in .png, .svg or .pdf, got {str(path)!r}")
            path.parent.mkdir(parents=True, exist_ok=True)
            metadata = {"Date": None} if kind in ("svg", "pdf") else {}
            written.append(atomic_write(path, partial(figure.savefig, format=kind, dpi=dpi, metadata=metadata)))
    finally:
        plt.close(figure)
    return written


def line_styles(count: int) -> list[dict[str, str]]:
    """``count`` distinct matplotlib styles (``color``, ``linestyle``, ``marker``), one per line.

    Line ``i`` gets colour ``i mod 10``, line style ``(i div 10) mod 4`` and marker ``(i div 10) mod 8``: the first 40
    lines differ in (colour, line style) and all 80 in (colour, marker), which tells single points apart too.
    """
    limit = len(COLOURS) * len(MARKERS)
    if count > limit:
        raise ValueError(f"at most {limit} lines can be told apart, got {count}: facet the figure or use fewer hues")
    return [
        {
            "color": COLOURS[i % len(COLOURS)],
            "linestyle": LINESTYLES[(i // len(COLOURS)) % len(LINESTYLES)],
            "marker": MARKERS[(i // len(COLOURS)) % len(MARKERS)],
        }
        for i in range(count)
    ]


def axis_scale(values: Iterable[Any], log: bool | None = None) -> tuple[str, dict[str, float]]:
    """The matplotlib scale and its keywords for an axis showing ``values`` (non-finite values are ignored).

    The rule with ``log=None``: a logarithmic axis when every value is >= 0 and the positive ones span more
    than two decades (largest / smallest > 100); ``"symlog"`` (linear up to the power of ten at or below the
    smallest positive value, logarithmic beyond, so that zeros stay visible) instead of ``"log"`` when some
    values are exactly 0; otherwise linear. ``log=True`` asks for the logarithmic axis whatever the span
    (still ``"symlog"`` with zeros, and linear if a value is negative: nothing is hidden), ``log=False`` for a
    linear one.
    """
    finite = np.array([float(v) for v in values], dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    positive = finite[finite > 0]
    if log is False or not positive.size or (finite < 0).any():
        return "linear", {}
    if log is None and positive.max() <= 100 * positive.min():
        return "linear", {}
    if (finite == 0).any():
        # The linear part ends at the power of ten below the smallest positive value: 0 sits one decade left of it.
        return "symlog", {"linthresh": float(10 ** math.floor(math.log10(positive.min())))}
    return "log", {}


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite number (not a boolean, None or NaN)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def is_categorical(column: str, values: Sequence[Any]) -> bool:
    """Whether a parameter is drawn as categories (points per category) rather than on a numeric axis.

    Categorical: values that are not all finite numbers (strings, booleans, graphs, None), and parameters
    that identify rather than measure, whatever their type: names in :data:`CATEGORICAL_NAMES` or ending in
    ``seed`` or ``_id`` (``instance_seed`` 0 and 1 are two instances, not two amounts).
    """
    return not all(is_number(v) for v in values) or column in CATEGORICAL_NAMES or column.endswith(("seed", "_id"))


def _curves(results: Results, columns: Sequence[str]) -> pd.DataFrame:
    """The curves table as a frame, checked to have rows and ``columns``."""
    if not results.curves:
        raise ValueError("no result rows to plot; run a sweep first")
    frame = results.to_frame()
    missing = [c for c in columns if c not in frame]
    if missing:
        raise ValueError(f"results have no column(s) {missing}; available: {sorted(frame.columns)}")
    return frame


def _groups(frame: pd.DataFrame, columns: Sequence[str]) -> list[tuple[tuple, pd.DataFrame]]:
    """(key tuple, sub-frame) per value of ``columns`` in order of first appearance; one group for no columns."""
    if not columns:
        return [((), frame)]
    grouped = frame.groupby(list(columns), sort=False, dropna=False)
    return [(key if isinstance(key, tuple) else (key,), rows) for key, rows in grouped]


def _label(column: str) -> str:
    return LABELS.get(column, column)


def _key_text(columns: Sequence[str], key: tuple, names: Mapping[str, str] | None = None) -> str:
    """A legend / panel text for the values ``key`` of ``columns``.

    ``names`` renames values (keyed by ``str(value)``) and columns (keyed by name).
    """
    names = names or {}
    parts = []
    for column, value in zip(columns, key):
        if str(value) in names:
            parts.append(names[str(value)])
        else:
            text = _value_text(value)
            parts.append(text if column in ("algorithm", "_series") else f"{names.get(column, column)}={text}")
    return ", ".join(parts)


def _value_text(value: Any) -> str:
    """A parameter value as text; an object recorded by its repr (``"Topology(name='ring', ...)"``) by its name."""
    text = str(value)
    named = re.match(r"""^"?\w+\(name='([^']*)'""", text)
    return named.group(1) if named else text


def _grid(plt: Any, panels: int, entries: int) -> tuple[Any, list[Any]]:
    """A figure of ``panels`` axes (at most 3 a row), tall enough for a legend of ``entries`` at its right."""
    columns = min(3, panels)
    rows = math.ceil(panels / columns)
    legend_height = 0.2 * min(entries, LEGEND_ROWS) + 1.2
    size = (5.2 if columns == 1 else 4.4 * columns, max(3.9 * rows, legend_height))
    figure, axes = plt.subplots(rows, columns, figsize=size, layout="constrained", squeeze=False)
    flat = list(axes.flat)
    for extra in flat[panels:]:
        extra.set_visible(False)
    return figure, flat[:panels]


def _set_scale(axes: Any, axis: str, scale: tuple[str, dict[str, float]]) -> None:
    """Set an axis scale; a symlog axis gets ticks at 0 and at the powers of ten from its linear threshold on."""
    from matplotlib.ticker import FixedLocator

    name, keywords = scale
    (axes.set_xscale if axis == "x" else axes.set_yscale)(name, **keywords)
    if name == "symlog":  # no ticks inside the linear part, where they would crowd the tick at 0
        first = round(math.log10(keywords["linthresh"]))
        ticks = [0.0, *(10.0**k for k in range(first, first + 40))]
        (axes.xaxis if axis == "x" else axes.yaxis).set_major_locator(FixedLocator(ticks))


def _band_text(band: str, counts: Iterable[int]) -> str:
    """What the band is and how many runs each point averages (a range when it varies)."""
    counts = sorted(set(int(n) for n in counts))
    runs = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    what = "min-max over runs" if band == "minmax" else "95% CI of the mean"
    return f"mean of {runs} run(s) per point; bands and error bars: {what}"


def _legend(axes: Any, entries: Mapping[str, Any]) -> None:
    """One legend for the whole figure, outside ``axes`` (the top-right panel) at its right (label -> handle).

    Attached to the axes, below the figure title: the constrained layout makes room for it, and the figure widens
    by the legend's estimated width so that the axes keep theirs.
    """
    if entries:
        columns = math.ceil(len(entries) / LEGEND_ROWS)
        figure = axes.get_figure()
        width, height = figure.get_size_inches()
        figure.set_size_inches(width + columns * (0.065 * max(map(len, entries)) + 0.6), height)
        axes.legend(
            list(entries.values()),
            list(entries),
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            ncols=columns,
        )


def _frame_for(results: Results, spec: FigureSpec, runs: Sequence[str]) -> pd.DataFrame:
    """The rows ``spec`` draws, with ``_series`` / ``_point`` / ``_order`` columns from its ``series`` pattern."""
    selected = [column for entry in spec.select for column in entry]
    extra = [*spec.hue, *spec.facet, *spec.reference, *selected, *([] if spec.kind == "tradeoff" else [spec.x])]
    frame = _curves(results, list(dict.fromkeys([spec.x, spec.y, "seed", "slot", *extra, *runs])))
    if spec.select:
        frame = frame[np.logical_or.reduce([_matching(frame, entry) for entry in spec.select])]
        if frame.empty:
            raise ValueError(f"figure {spec.name!r}: no result rows match its selection {list(spec.select)}")
    if not spec.series:
        return frame
    pattern = re.compile(spec.series)
    parsed = [pattern.fullmatch(str(label)) for label in frame["algorithm"]]
    unmatched = sorted({str(label) for label, match in zip(frame["algorithm"], parsed) if match is None})
    if unmatched:
        raise ValueError(f"series pattern {spec.series!r} does not match the algorithm label(s) {unmatched}")
    groups = [match.groupdict() for match in parsed if match is not None]
    return frame.assign(
        _series=[g.get("series") or "" for g in groups],
        _point=[g.get("point") or "" for g in groups],
        _order=[float(g["value"]) if g.get("value") else math.nan for g in groups],
    )


def _matching(frame: pd.DataFrame, values: Mapping[str, Any]) -> pd.Series:
    """The rows matching every ``{column: value}`` of ``values`` (none for an empty mapping)."""
    mask = pd.Series(bool(values), index=frame.index)
    for column, value in values.items():
        mask &= frame[column] == value
    return mask


@dataclass(frozen=True)
class _Drawing:
    """What every panel of a figure shares: the spec, the hue columns, the run columns, line styles, legend entries."""

    spec: FigureSpec
    hue: Sequence[str]
    run_columns: Sequence[str]
    styles: Mapping[tuple, dict[str, str]]
    entries: dict[str, Any]


def plot_figure(
    results: Results, spec: FigureSpec, paths: PathLike | Sequence[PathLike], runs: Sequence[str] = ()
) -> list[Path]:
    """Draw a :class:`FigureSpec` (:func:`draw_figure`) and write it to ``paths`` (the suffix picks the format).

    Args:
        results: tidy results (``curves`` rows).
        spec: what to draw.
        paths: output file(s).
        runs: further columns identifying a run besides hue, facet, x and seed (e.g. other swept parameters).
    """
    plt = _pyplot()
    with plt.rc_context(STYLE):
        return save_figure(draw_figure(results, spec, runs), paths)


def draw_figure(results: Results, spec: FigureSpec, runs: Sequence[str] = ()) -> Any:
    """The matplotlib figure of a :class:`FigureSpec`: mean of ``spec.y`` with a band per ``hue`` value, by ``facet``.

    Close the figure with ``matplotlib.pyplot.close`` or write it with :func:`save_figure`. With
    ``spec.x == "slot"`` the lines are curves over the checkpoints; with a numeric parameter ``spec.x`` each
    run's final value (last checkpoint) is plotted against it; a categorical parameter
    (:func:`is_categorical`) gets one point with error bars per category and hue value, side by side, no
    line. ``kind="tradeoff"`` plots final ``y`` against final ``x`` (see :class:`FigureSpec`). Axis scales
    follow :func:`axis_scale` unless ``spec.logx`` / ``spec.logy`` say otherwise.

    Args:
        results: tidy results (``curves`` rows).
        spec: what to draw.
        runs: further columns identifying a run besides hue, facet, x and seed (e.g. other swept parameters).
    """
    if spec.band not in BANDS:
        raise ValueError(f"band must be one of {BANDS}, got {spec.band!r}")
    frame = _frame_for(results, spec, runs)
    hue = ["_series"] if spec.series else list(spec.hue)
    run_columns = list(dict.fromkeys([*spec.hue, *spec.facet, *([] if spec.kind == "tradeoff" else [spec.x]), *runs]))
    reference = _matching(frame, spec.reference)
    keys = [key for key, _ in _groups(frame[~reference], hue)]
    styles = dict(zip(keys, line_styles(len(keys))))
    plt = _pyplot()
    with plt.rc_context(STYLE):
        panels = list(_groups(frame, spec.facet))
        lines = len(keys) * (2 if spec.reference else 1)
        figure, axes_list = _grid(plt, len(panels), lines)
        drawing = _Drawing(spec, hue, run_columns, styles, {})
        counts: list[int] = []
        for axes, (panel, subset) in zip(axes_list, panels):
            if spec.x != "slot":
                subset = final_checkpoint(subset, [*run_columns, "seed"])
            drawer = _tradeoff_panel if spec.kind == "tradeoff" else _line_panel
            counts += drawer(axes, subset, drawing)
            if spec.facet:
                axes.set_title(_key_text(spec.facet, panel, spec.names))
            axes.grid(alpha=0.3)
        _legend(axes_list[min(2, len(axes_list) - 1)], drawing.entries)
        title = spec.title or _label(spec.y)
        band = spec.band if spec.kind == "line" else "ci95"
        # About 13 characters per inch at the title's 11 points: long titles wrap instead of running off the figure.
        wrapped = textwrap.fill(title, width=int(figure.get_size_inches()[0] * 13))
        figure.suptitle(f"{wrapped}\n{_band_text(band, counts)}")
    return figure


def _line_panel(axes: Any, subset: pd.DataFrame, drawing: _Drawing) -> list[int]:
    """``spec.y`` against ``spec.x`` (slot or parameter) on ``axes``; returns the run counts of the points."""
    spec, hue, styles, entries = drawing.spec, drawing.hue, drawing.styles, drawing.entries
    low, high = ("min", "max") if spec.band == "minmax" else ("ci95_low", "ci95_high")
    reference = _matching(subset, spec.reference)
    summary = summarize(subset[~reference], spec.y, by=(*hue, spec.x))
    categories = list(dict.fromkeys(summary[spec.x].tolist()))
    categorical = spec.x != "slot" and is_categorical(spec.x, categories)
    lines = list(_groups(summary, hue))
    for index, (key, points) in enumerate(lines):
        style, label = styles[key], _key_text(hue, key, spec.names) if hue else spec.y
        if categorical:
            offset = (index - (len(lines) - 1) / 2) * 0.7 / max(len(lines), 1)
            where = points[spec.x].map({c: i for i, c in enumerate(categories)}) + offset
            errors = [points["mean"] - points[low], points[high] - points["mean"]]
            handle = axes.errorbar(
                where, points["mean"], yerr=errors, fmt=style["marker"], color=style["color"], capsize=3
            )
        else:
            points = points.sort_values(spec.x, kind="stable")
            every = max(1, len(points) // 8) if spec.x == "slot" else 1
            (handle,) = axes.plot(points[spec.x], points["mean"], markevery=every, markersize=5, **style)
            axes.fill_between(points[spec.x], points[low], points[high], alpha=0.15, color=style["color"])
        entries.setdefault(label, handle)
    if reference.any():
        _reference_lines(axes, subset[reference], drawing)
    if categorical:
        labels = [str(c) for c in categories]
        axes.set_xticks(range(len(categories)), labels, rotation=30 if sum(map(len, labels)) > 40 else 0)
        axes.set_xlim(-0.6, len(categories) - 0.4)
    elif spec.x == "slot":
        _set_scale(axes, "x", ("linear", {}))
    else:
        scale = axis_scale(categories, spec.logx)
        _set_scale(axes, "x", scale)
        if scale[0] == "linear" and len(categories) <= MAX_TICKS:
            axes.set_xticks(sorted(categories))  # a tick at every swept value (gamma 1, 2, 3; not 1.25)
    # The y scale is decided from the values the lines end at (curves over slot all start near 0).
    finals = summary[summary[spec.x] == summary[spec.x].max()] if spec.x == "slot" else summary
    _set_scale(axes, "y", axis_scale(finals["mean"], spec.logy))
    axes.set_xlabel(spec.xlabel or _label(spec.x))
    axes.set_ylabel(spec.ylabel or (_label(spec.y) if spec.x == "slot" else f"final {_label(spec.y)}"))
    return summary["n"].tolist()


def _reference_lines(axes: Any, rows: pd.DataFrame, drawing: _Drawing) -> None:
    """One horizontal dashed line per hue value at the final mean of the reference ``rows``."""
    spec, hue = drawing.spec, drawing.hue
    finals = final_checkpoint(rows, [*hue, *spec.reference, "seed"])
    for key, points in _groups(finals, hue):
        colour = drawing.styles.get(key, {"color": "black"})["color"]
        handle = axes.axhline(points[spec.y].mean(), color=colour, linestyle=(0, (6, 3)), linewidth=1.2, alpha=0.8)
        drawing.entries.setdefault(f"{_key_text(hue, key, spec.names)}: {spec.reference_label}", handle)


def _tradeoff_panel(axes: Any, final: pd.DataFrame, drawing: _Drawing) -> list[int]:
    """Final ``spec.y`` against final ``spec.x`` with 95% CIs on both; a line's points joined in order of a quantity.

    The order is the ``series`` pattern's value, else the first other parameter if it is not categorical; points
    that differ only in categories (instance seeds, names) are drawn unjoined.
    """
    spec, hue, run_columns = drawing.spec, drawing.hue, drawing.run_columns
    series_columns = ["algorithm", "_point", "_order"] if spec.series else []
    point_columns = list(dict.fromkeys([*hue, *series_columns, *run_columns]))
    xs = summarize(final, spec.x, by=point_columns)
    table = summarize(final, spec.y, by=point_columns).assign(_x=xs["mean"], _x_error=xs["mean"] - xs["ci95_low"])
    labelled = [c for c in run_columns if c not in hue and c not in series_columns and c != "algorithm"]
    # Points are joined only in the order of a quantity: the series' values, or a numeric first parameter.
    ordered = bool(spec.series) or (bool(labelled) and not is_categorical(labelled[0], table[labelled[0]].tolist()))
    for index, (key, members) in enumerate(_groups(table, hue)):
        style = {**drawing.styles[key], **({} if ordered else {"linestyle": "None"})}
        if spec.series:
            members = members.sort_values("_order", kind="stable")
            texts = [_short(text) for text in members["_point"]]
        else:
            if ordered:
                members = members.sort_values(labelled[0], kind="stable")
            rows = members[labelled].itertuples(index=False)
            texts = [_key_text(labelled, tuple(row), spec.names) for row in rows]
        errors = {"xerr": members["_x_error"], "yerr": members["mean"] - members["ci95_low"]}
        handle = axes.errorbar(
            members["_x"], members["mean"], **errors, capsize=2, elinewidth=0.8, markersize=5, **style
        )
        drawing.entries.setdefault(_key_text(hue, key, spec.names), handle)
        if len(members) > 1:
            # Alternate lines label above-right and below-right of their dots, so that lines close together stay apart.
            offset = (4, 3) if index % 2 == 0 else (4, -10)
            for text, x, y in zip(texts, members["_x"], members["mean"]):
                axes.annotate(text, (x, y), fontsize=7, xytext=offset, textcoords="offset points", color=style["color"])
    _set_scale(axes, "x", axis_scale(table["_x"], spec.logx))
    _set_scale(axes, "y", axis_scale(table["mean"], spec.logy))
    axes.set_xlabel(spec.xlabel or f"final {_label(spec.x)}")
    axes.set_ylabel(spec.ylabel or f"final {_label(spec.y)}")
    return table["n"].tolist()


def _short(text: str) -> str:
    """A point label: a number to 3 significant digits (``"317.228"`` -> ``"317"``, ``"1001"`` -> ``"1001"``)."""
    try:
        value = float(text)
    except ValueError:
        return text
    short = f"{value:.3g}"
    return f"{value:.0f}" if "e" in short else short


def plot_regret(results: Results, path: str | Path, band: str = "minmax", title: str | None = None) -> Path:
    """Group pseudo-regret vs slot: the mean over seeds per algorithm, with a min-max or 95% CI band.

    Writes ``path`` (PNG or SVG by its suffix) and returns it.
    """
    spec = FigureSpec("regret", band=band, title=title or "Group pseudo-regret (mean over seeds)")
    return plot_figure(results, spec, path)[0]


def plot_tradeoff(
    results: Results,
    paths: PathLike | Sequence[PathLike],
    x: str,
    y: str = "group_regret",
    hue: Sequence[str] = ("algorithm",),
    runs: Sequence[str] = (),
    title: str | None = None,
    logx: bool | None = None,
) -> list[Path]:
    """Final ``y`` against final ``x`` (both measured), one point per hue value and run group, 95% CI error bars.

    Args:
        results: tidy results.
        paths: output file(s).
        x: the measured column on the x axis (e.g. ``"cost"``, ``"epsilon_max"``).
        y: the measured column on the y axis.
        hue: columns giving one line (style) per value.
        runs: further columns identifying a run (e.g. swept parameters): one point per value, annotated and
            joined in order of the first.
        title: the figure title.
        logx: logarithmic x axis (``None``: decided from the data, :func:`axis_scale`).
    """
    spec = FigureSpec(
        "tradeoff", x=x, y=y, hue=hue, title=title or f"{_label(y)} vs {_label(x)}", logx=logx, kind="tradeoff"
    )
    return plot_figure(results, spec, paths, runs=[r for r in runs if r not in hue])


def plot_regret_vs_cost(
    results: Results,
    paths: PathLike | Sequence[PathLike],
    runs: Sequence[str] = (),
    cost: str = "cost",
    title: str | None = None,
) -> list[Path]:
    """Final group regret against final communication ``cost`` (or ``"link_cost"``, ``"messages"``, ``"bytes"``)."""
    return plot_tradeoff(results, paths, x=cost, runs=runs, title=title or "Regret vs communication cost")


def plot_regret_vs_epsilon(
    results: Results,
    paths: PathLike | Sequence[PathLike],
    epsilon: str = "epsilon",
    runs: Sequence[str] = (),
    title: str | None = None,
) -> list[Path]:
    """Final group regret against privacy.

    If the results have the column ``epsilon`` (a swept privacy setting, e.g. ``"wrapper.epsilon"``),
    final regret is drawn against it on a log axis, one panel per value of the other ``runs``
    columns; otherwise against the measured ``epsilon_max`` (the largest per-agent epsilon spent), which some
    run must have measured.
    """
    rows = results.curves
    title = title or "Regret vs privacy (smaller epsilon = more private)"
    if rows and epsilon in rows[0]:
        facet = [c for c in runs if c != epsilon]
        return plot_figure(results, FigureSpec("epsilon", x=epsilon, facet=facet, title=title, logx=True), paths)
    if any(is_number(row.get("epsilon_max")) for row in rows):
        return plot_tradeoff(results, paths, x="epsilon_max", runs=runs, title=title, logx=True)
    raise ValueError(
        f"results have neither an {epsilon!r} parameter column nor a measured 'epsilon_max': "
        "run the scenario with a DP wrapper"
    )
