"""Tidy results of runs: the ``curves`` and ``agents`` tables, and the checkpoints they are recorded at.

A table is a list of rows (dicts) while runs record it, and a typed pandas DataFrame to analyse it
(:meth:`Results.to_frame`, :func:`frame_from_rows`). Column dtypes of a frame (:func:`typed_frame`):

* integers: ``int64`` (``Int64``, pandas' nullable integer, when some rows lack the column);
* numbers mixing integers and floats, and floats: ``float64`` (a missing cell is NaN);
* booleans: ``bool`` (``boolean`` when some rows lack the column);
* text (``algorithm``, ``scenario``, string parameters): pandas' ``string`` dtype;
* anything else (lists, dicts, or a mixture of kinds in one column): its JSON text, as ``string``;
* a column no row has a value in: ``object`` holding None.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedbandit_envs.validation import check_int, check_int_array

__all__ = [
    "LEDGER_COLUMNS",
    "TABLE_NAMES",
    "Results",
    "checkpoint_slots",
    "frame_from_columns",
    "frame_from_rows",
    "json_text",
    "typed_frame",
]

#: Ledger totals reported per checkpoint (arrays of shape (B,) on the ledger).
LEDGER_COLUMNS = ("messages", "copies", "scalars", "bytes", "links", "link_cost", "cost", "dropped")
#: The tables of a :class:`Results`.
TABLE_NAMES = ("curves", "agents")


def checkpoint_slots(horizon: int, checkpoints: int | Sequence[int]) -> np.ndarray:
    """Slot counts at which results are recorded: ``n`` evenly spaced points ending at T, or a list of slots.

    A count is a Python or numpy integer >= 1 (a count above T gives every slot); slots are any iterable of
    integers in [1, T] (a list, a range, an array, a set). Anything else (a float, a bool, a string, fractional
    slots) raises a ``TypeError``.
    """
    zero_d = isinstance(checkpoints, np.ndarray) and checkpoints.ndim == 0  # iterable in type, a number in fact
    if isinstance(checkpoints, Iterable) and not isinstance(checkpoints, str | bytes) and not zero_d:
        slots = np.unique(check_int_array("checkpoints", list(checkpoints), None))
    else:
        count = check_int("checkpoints", checkpoints, 1, hint=" (a count of evenly spaced checkpoints)")
        count = min(count, horizon)  # more points than slots: every slot, as the spacing would give
        slots = np.unique(np.ceil(np.linspace(horizon / count, horizon, count)).astype(np.int64))
    if len(slots) == 0 or slots[0] < 1 or slots[-1] > horizon:
        raise ValueError(f"checkpoints must lie in [1, {horizon}], got {checkpoints!r}")
    return slots


def json_text(value: Any) -> str:
    """A structured cell as JSON text (sorted keys; numpy values as numbers and lists, other objects by repr)."""

    def plain(item: Any) -> Any:
        return item.tolist() if isinstance(item, np.ndarray | np.generic) else repr(item)

    return json.dumps(value, sort_keys=True, default=plain)


def _kind(cell_type: type) -> type:
    """The table type of a cell type: bool, int, float, str (numpy scalar types included), else object."""
    for kind, types in ((bool, (bool, np.bool_)), (int, (int, np.integer)), (float, (float, np.floating)), (str, str)):
        if issubclass(cell_type, types):
            return kind
    return object


def _typed_column(values: Sequence[Any], text: Callable[[Any], str]) -> Any:
    """One column of Python cells (None where missing) as an array of the dtype the module docstring lists."""
    present = [value for value in values if value is not None]
    if not present:
        return np.array(values, dtype=object)
    kinds = {_kind(cell_type) for cell_type in set(map(type, present))}
    complete = len(present) == len(values)
    if kinds == {bool}:
        return np.array(values, dtype=bool) if complete else pd.array(values, dtype="boolean")
    if kinds == {int}:
        return np.array(values, dtype=np.int64) if complete else pd.array(values, dtype="Int64")
    if kinds <= {int, float}:
        return np.array([np.nan if value is None else value for value in values], dtype=np.float64)
    cells = values if kinds == {str} else [None if v is None else v if isinstance(v, str) else text(v) for v in values]
    return pd.array(cells, dtype="string")


def frame_from_columns(columns: Mapping[str, Sequence[Any]], text: Callable[[Any], str] = json_text) -> pd.DataFrame:
    """Columns of Python cells (None where missing) as a typed DataFrame (dtypes: the module docstring).

    ``text`` turns a structured or mixed cell into its text (default :func:`json_text`).
    """
    return pd.DataFrame({name: _typed_column(values, text) for name, values in columns.items()})


def frame_from_rows(rows: Iterable[Mapping[str, Any]], text: Callable[[Any], str] = json_text) -> pd.DataFrame:
    """Rows as a typed DataFrame: the union of their columns in first-seen order (see :func:`frame_from_columns`)."""
    rows = list(rows)
    names = list(dict.fromkeys(key for row in rows for key in row))
    return frame_from_columns({name: [row.get(name) for row in rows] for name in names}, text)


def typed_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the dtypes the module docstring lists (as read from Parquet or CSV, with any dtype backend).

    Integer and boolean columns without missing cells become ``int64`` and ``bool`` (nullable ``Int64`` and
    ``boolean`` otherwise), every float column ``float64``, text columns pandas' ``string`` dtype, and
    ``object`` columns are typed from their cells as :func:`frame_from_columns` does.
    """
    columns = {}
    for name, column in frame.items():
        dtype, missing = column.dtype, bool(column.isna().any())
        if pd.api.types.is_object_dtype(dtype):
            cells = column.astype(object).where(column.notna(), None).tolist()
            columns[name] = pd.Series(_typed_column(cells, json_text), index=frame.index, name=name)
        elif pd.api.types.is_bool_dtype(dtype):
            columns[name] = column.astype("boolean" if missing else bool)
        elif pd.api.types.is_integer_dtype(dtype):
            columns[name] = column.astype("Int64" if missing else np.int64)
        elif pd.api.types.is_float_dtype(dtype):
            columns[name] = pd.Series(column.to_numpy(np.float64, na_value=np.nan), index=column.index, name=name)
        else:  # text (pandas' str or string dtypes)
            columns[name] = column.astype("string")
    return pd.DataFrame(columns, index=frame.index)


@dataclass
class Results:
    """Tidy results: ``curves`` (run x checkpoint) and ``agents`` (run x checkpoint x agent) rows.

    The rows are dicts as recorded; :meth:`to_frame` gives either table as a typed pandas DataFrame.
    """

    curves: list[dict[str, Any]] = field(default_factory=list)
    agents: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_frames(cls, **frames: pd.DataFrame) -> Results:
        """Results holding the rows of the given frames (``curves=...``, ``agents=...``); NA cells become None."""
        unknown = sorted(set(frames) - set(TABLE_NAMES))
        if unknown:
            raise ValueError(f"tables must be among {TABLE_NAMES}, got {unknown}")
        return cls(**{table: frame.to_dict("records") for table, frame in frames.items()})

    def extend(self, other: Results) -> None:
        """Append another result's rows."""
        self.curves.extend(other.curves)
        self.agents.extend(other.agents)

    def to_frame(self, table: str = "curves") -> pd.DataFrame:
        """The ``table`` (``"curves"`` or ``"agents"``) as a typed DataFrame (dtypes: the module docstring)."""
        if table not in TABLE_NAMES:
            raise ValueError(f"table must be one of {TABLE_NAMES}, got {table!r}")
        return frame_from_rows(getattr(self, table))

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
