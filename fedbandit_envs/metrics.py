"""Aggregate tidy results across seeds (mean, spread and a 95% confidence interval), and pick final checkpoints."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

__all__ = ["SUMMARY_COLUMNS", "as_frame", "final_checkpoint", "summarize"]

#: The statistics :func:`summarize` adds to the group columns.
SUMMARY_COLUMNS = ("n", "mean", "std", "sem", "min", "max", "ci95_low", "ci95_high")

#: What the functions here take: a DataFrame, or rows (dicts).
Table: TypeAlias = "pd.DataFrame | Iterable[Mapping[str, Any]]"


def as_frame(data: Table) -> pd.DataFrame:
    """``data`` as a DataFrame: a frame as it is, rows (dicts) as one column per key."""
    return data if isinstance(data, pd.DataFrame) else pd.DataFrame(list(data))


def summarize(data: Table, value: str, by: Sequence[str] = ("algorithm", "slot")) -> pd.DataFrame:
    """Group ``data`` (a frame or rows) by the ``by`` columns and summarise ``value`` over each group (the seeds).

    Returns one row per group, in the order groups first appear, with the ``by`` columns and ``n`` (int64),
    ``mean``, ``std``, ``sem``, ``min``, ``max``, ``ci95_low`` and ``ci95_high`` (float64; a Student-t
    interval of the mean, equal to the mean for n = 1). A group with a NaN value has NaN statistics.
    """
    from scipy import stats  # here, not at the top: scipy.stats doubles the package's import time

    frame = as_frame(data)
    by = list(by)
    values = frame[value].astype(np.float64)
    keys = [frame[column] for column in by]
    summary = values.groupby(keys, sort=False, dropna=False).agg(["size", "mean", "std", "min", "max"])
    summary = summary.rename(columns={"size": "n"})
    with_nan = values.isna().groupby(keys, sort=False, dropna=False).any()
    summary.loc[with_nan, ["mean", "std", "min", "max"]] = np.nan
    n = summary["n"].to_numpy(np.int64)
    summary["std"] = summary["std"].where(n > 1, 0.0)
    summary["sem"] = summary["std"] / np.sqrt(n)
    half = np.where(n > 1, stats.t.ppf(0.975, np.maximum(n - 1, 1)) * summary["sem"], 0.0)
    summary["ci95_low"], summary["ci95_high"] = summary["mean"] - half, summary["mean"] + half
    summary["n"] = n
    return summary.reset_index()[[*by, *SUMMARY_COLUMNS]]


def final_checkpoint(data: Table, runs: Sequence[str] = ("algorithm", "seed")) -> pd.DataFrame:
    """The rows of ``data`` at each run's last checkpoint (largest ``slot``); a run is identified by ``runs``.

    Rows keep their order and index; a ``runs`` column the data lacks counts as missing (one value).
    """
    frame = as_frame(data)
    keys = [frame[column] if column in frame else pd.Series(None, index=frame.index, dtype=object) for column in runs]
    last = frame["slot"].groupby(keys, sort=False, dropna=False).transform("max")
    return frame[frame["slot"] == last]
