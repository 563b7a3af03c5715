"""Tidy results of runs: the ``curves`` and ``agents`` tables, and the checkpoints they are recorded at."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LEDGER_COLUMNS", "Results", "checkpoint_slots"]

#: Ledger totals reported per checkpoint (arrays of shape (B,) on the ledger).
LEDGER_COLUMNS = ("messages", "copies", "scalars", "bytes", "links", "link_cost", "cost", "dropped")


def checkpoint_slots(horizon: int, checkpoints: int | Sequence[int]) -> np.ndarray:
    """Slot counts at which results are recorded: ``n`` evenly spaced points ending at T, or a list."""
    if isinstance(checkpoints, int):
        if checkpoints < 1:
            raise ValueError(f"checkpoints must be >= 1, got {checkpoints}")
        slots = np.unique(np.ceil(np.linspace(horizon / checkpoints, horizon, checkpoints)).astype(np.int64))
    else:
        slots = np.unique(np.asarray(checkpoints, np.int64))
    if len(slots) == 0 or slots[0] < 1 or slots[-1] > horizon:
        raise ValueError(f"checkpoints must lie in [1, {horizon}], got {checkpoints!r}")
    return slots


@dataclass
class Results:
    """Tidy results: ``curves`` (run x checkpoint) and ``agents`` (run x checkpoint x agent) rows."""

    curves: list[dict[str, Any]] = field(default_factory=list)
    agents: list[dict[str, Any]] = field(default_factory=list)

    def extend(self, other: Results) -> None:
        """Append another result's rows."""
        self.curves.extend(other.curves)
        self.agents.extend(other.agents)

    def column(self, name: str, table: str = "curves") -> np.ndarray:
        """One column as an array."""
        return np.array([row[name] for row in getattr(self, table)])

    def save(self, directory: str | Path, stem: str = "results") -> list[Path]:
        """Write ``<stem>.csv`` and ``<stem>_agents.csv``; returns the paths."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for suffix, rows in (("", self.curves), ("_agents", self.agents)):
            path = directory / f"{stem}{suffix}.csv"
            with path.open("w", newline="") as handle:
                if rows:
                    columns = list(dict.fromkeys(name for row in rows for name in row))  # union, in first-seen order
                    writer = csv.DictWriter(handle, fieldnames=columns)
                    writer.writeheader()
                    writer.writerows(rows)
            paths.append(path)
        return paths
