"""Figures from tidy results (needs the ``plot`` extra: matplotlib).

* :func:`plot_regret`: group regret vs slot, mean over seeds with a min-max or 95% CI band.
* :func:`plot_figure`: any :class:`~fedbandit_envs.bench.scenarios.FigureSpec`: a metric vs slot, or
  its final value vs a swept parameter, one line per ``hue`` value and one panel per ``facet`` value
  (the per-scenario figures that mirror the papers').
* :func:`plot_regret_vs_cost` and :func:`plot_regret_vs_epsilon`: final regret against communication
  cost or privacy, with 95% confidence intervals on both axes.

Every function writes each path it is given (PNG, SVG or PDF by the suffix) atomically and returns
the paths.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from fedbandit_envs.bench.claims import final_rows
from fedbandit_envs.bench.scenarios import FigureSpec
from fedbandit_envs.bench.store import atomic_write
from fedbandit_envs.bench.tables import UNITS, unit_heading
from fedbandit_envs.metrics import summarize
from fedbandit_envs.run import Results

PathLike = str | Path
BANDS = ("minmax", "ci95")
LABELS = {
    "slot": "slot",
    "group_regret": "group pseudo-regret",
    "mean_regret": "mean pseudo-regret per agent",
    "cost": f"communication cost ({UNITS['cost'][0]})",
    "link_cost": f"link cost ({UNITS['cost'][0]})",
    "messages": unit_heading("messages"),
    "bytes": unit_heading("bytes"),
    "epsilon_max": "epsilon spent (max over agents)",
    "epsilon_mean": "epsilon spent (mean over agents)",
}


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


def save_figure(figure: Any, paths: PathLike | Sequence[PathLike], dpi: int = 120) -> list[Path]:
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


def _check_columns(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> None:
    if not rows:
        raise ValueError("no result rows to plot; run a sweep first")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise ValueError(f"results have no column(s) {missing}; available: {sorted(rows[0])}")


def _label(column: str) -> str:
    return LABELS.get(column, column)


def _key_text(columns: Sequence[str], key: tuple) -> str:
    if list(columns) == ["algorithm"]:
        return str(key[0])
    return ", ".join(f"{c}={v}" if c != "algorithm" else str(v) for c, v in zip(columns, key))


def _grid(plt: Any, panels: int) -> tuple[Any, list[Any]]:
    columns = min(3, panels)
    rows = math.ceil(panels / columns)
    size = (6.4 if columns == 1 else 4.6 * columns, 4.2 * rows)
    figure, axes = plt.subplots(rows, columns, figsize=size, layout="constrained", squeeze=False)
    flat = list(axes.flat)
    for extra in flat[panels:]:
        extra.set_visible(False)
    return figure, flat[:panels]


def _numeric(values: Sequence[Any]) -> bool:
    """Whether the values can go on a numeric axis (finite numbers); otherwise they are categories."""
    return all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)


def plot_figure(
    results: Results, spec: FigureSpec, paths: PathLike | Sequence[PathLike], runs: Sequence[str] = ()
) -> list[Path]:
    """Draw a :class:`FigureSpec`: mean of ``spec.y`` with a band, per ``hue`` value, one panel per ``facet`` value.

    With ``spec.x == "slot"`` the lines are curves over the checkpoints; otherwise each run's final
    value (last checkpoint) is plotted against the parameter column ``spec.x``.

    Args:
        results: tidy results (``curves`` rows).
        spec: what to draw.
        paths: output file(s); the suffix picks the format.
        runs: further columns identifying a run besides hue, facet, x and seed (e.g. other swept parameters).
    """
    if spec.band not in BANDS:
        raise ValueError(f"band must be one of {BANDS}, got {spec.band!r}")
    rows = results.curves
    hue, facet = list(spec.hue), list(spec.facet)
    _check_columns(rows, [spec.x, spec.y, "seed", "slot", *hue, *facet])
    plt = _pyplot()
    panels = list(dict.fromkeys(tuple(r[c] for c in facet) for r in rows))
    figure, axes_list = _grid(plt, len(panels))
    low, high = ("min", "max") if spec.band == "minmax" else ("ci95_low", "ci95_high")
    for axes, panel in zip(axes_list, panels):
        subset: list[Mapping[str, Any]] = [r for r in rows if tuple(r[c] for c in facet) == panel]
        if spec.x != "slot":
            subset = final_rows(subset, list(dict.fromkeys([*hue, *facet, spec.x, *runs, "seed"])))
        summary = summarize(subset, spec.y, by=(*hue, spec.x))
        categories = list(dict.fromkeys(r[spec.x] for r in summary))
        numeric = _numeric(categories)
        for key in dict.fromkeys(tuple(r[c] for c in hue) for r in summary):
            points = [r for r in summary if tuple(r[c] for c in hue) == key]
            points.sort(key=lambda r: r[spec.x] if numeric else categories.index(r[spec.x]))
            xs = [r[spec.x] if numeric else categories.index(r[spec.x]) for r in points]
            label = f"{_key_text(hue, key)} (n={points[0]['n']})"
            line = axes.plot(xs, [r["mean"] for r in points], marker=None if spec.x == "slot" else "o", label=label)[0]
            axes.fill_between(
                xs, [r[low] for r in points], [r[high] for r in points], alpha=0.2, color=line.get_color()
            )
        axes.set_xscale("log" if spec.logx and numeric else "linear")
        if not numeric:
            axes.set_xticks(range(len(categories)), [str(c) for c in categories])
        axes.set_yscale("log" if spec.logy else "linear")
        axes.set_xlabel(_label(spec.x))
        axes.set_ylabel(_label(spec.y) if spec.x == "slot" else f"final {_label(spec.y)}")
        if facet:
            axes.set_title(_key_text(facet, panel), fontsize=10)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    band = "min-max over seeds" if spec.band == "minmax" else "95% CI of the mean"
    figure.suptitle(f"{spec.title or _label(spec.y)} (band: {band})", fontsize=11)
    return save_figure(figure, paths)


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
    logx: bool = False,
) -> list[Path]:
    """Final ``y`` against final ``x`` (both measured), one point per hue value and run group, 95% CI error bars.

    Args:
        results: tidy results.
        paths: output file(s).
        x: the measured column on the x axis (e.g. ``"cost"``, ``"epsilon_max"``).
        y: the measured column on the y axis.
        hue: columns giving one colour per value.
        runs: further columns identifying a run (e.g. swept parameters): one point per value, annotated.
        title: the figure title.
        logx: logarithmic x axis.
    """
    rows = results.curves
    _check_columns(rows, [x, y, "seed", "slot", *hue, *runs])
    plt = _pyplot()
    groups = list(dict.fromkeys([*hue, *runs]))
    final = final_rows(rows, [*groups, "seed"])
    xs = {tuple(r[c] for c in groups): r for r in summarize(final, x, by=groups)}
    ys = {tuple(r[c] for c in groups): r for r in summarize(final, y, by=groups)}
    figure, axes = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    for key in dict.fromkeys(k[: len(hue)] for k in ys):
        members = [k for k in ys if k[: len(hue)] == key]
        mx = [xs[k]["mean"] for k in members]
        my = [ys[k]["mean"] for k in members]
        ex = [xs[k]["mean"] - xs[k]["ci95_low"] for k in members]
        ey = [ys[k]["mean"] - ys[k]["ci95_low"] for k in members]
        label = f"{_key_text(hue, key)} (n={ys[members[0]]['n']})"
        axes.errorbar(mx, my, xerr=ex, yerr=ey, fmt="o", capsize=3, label=label)
        for k, px, py in zip(members, mx, my):
            if len(groups) > len(hue):
                axes.annotate(
                    _key_text(groups[len(hue) :], k[len(hue) :]),
                    (px, py),
                    fontsize=7,
                    xytext=(4, 4),
                    textcoords="offset points",
                )
    axes.set_xscale("log" if logx and all(r["mean"] > 0 for r in xs.values()) else "linear")
    axes.set_xlabel(f"final {_label(x)}")
    axes.set_ylabel(f"final {_label(y)}")
    axes.set_title(title or f"{_label(y)} vs {_label(x)} (95% CI)", fontsize=11)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    return save_figure(figure, paths)


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
    columns; otherwise against the measured ``epsilon_max`` (the largest per-agent epsilon spent).
    """
    rows = results.curves
    title = title or "Regret vs privacy (smaller epsilon = more private)"
    if rows and epsilon in rows[0]:
        facet = [c for c in runs if c != epsilon]
        return plot_figure(results, FigureSpec("epsilon", x=epsilon, facet=facet, title=title, logx=True), paths)
    if rows and "epsilon_max" in rows[0]:
        return plot_tradeoff(results, paths, x="epsilon_max", runs=runs, title=title, logx=True)
    raise ValueError(
        f"results have neither an {epsilon!r} parameter column nor 'epsilon_max': run the scenario with a DP wrapper"
    )
