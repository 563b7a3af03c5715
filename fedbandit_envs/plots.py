"""Figures from tidy results (needs the ``plot`` extra: matplotlib)."""

from __future__ import annotations

from pathlib import Path

from fedbandit_envs.metrics import summarize
from fedbandit_envs.runner import Results


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install 'fedbandit-envs[plot]'") from error
    return plt


def plot_regret(results: Results, path: str | Path, band: str = "minmax", title: str | None = None) -> Path:
    """Group pseudo-regret vs slot: the mean over seeds per algorithm, with a min-max or 95% CI band.

    Writes ``path`` (PNG or SVG by its suffix) and returns it.
    """
    if band not in ("minmax", "ci95"):
        raise ValueError(f"band must be 'minmax' or 'ci95', got {band!r}")
    plt = _pyplot()
    summary = summarize(results.curves, "group_regret")
    figure, axes = plt.subplots(figsize=(6.4, 4.2))
    for algorithm in dict.fromkeys(row["algorithm"] for row in summary):
        rows = sorted((r for r in summary if r["algorithm"] == algorithm), key=lambda r: r["slot"])
        slots = [r["slot"] for r in rows]
        low, high = ("min", "max") if band == "minmax" else ("ci95_low", "ci95_high")
        line = axes.plot(slots, [r["mean"] for r in rows], label=f"{algorithm} (n={rows[0]['n']})")[0]
        axes.fill_between(slots, [r[low] for r in rows], [r[high] for r in rows], alpha=0.2, color=line.get_color())
    axes.set_xlabel("slot")
    axes.set_ylabel("group pseudo-regret")
    axes.set_title(title or "Group pseudo-regret (mean over seeds, band: " + band + ")")
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
