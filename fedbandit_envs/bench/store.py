"""Restartable results of a sweep: one directory per sweep, written so that no file is ever half-written.

Layout of a results directory::

    config.json             the resolved scenario, scale, overrides, seeds, backend, package versions
    parts/<cell>-<h>.jsonl.gz  one file per finished job (header line, then its curves and agents rows)
    results.parquet         the tidy table (one row per run and checkpoint), Parquet when pyarrow is
    results_agents.parquet  importable, else results.csv / results_agents.csv (one row per run, checkpoint, agent)

Every file is written to a temporary file in the same directory and renamed into place
(:func:`atomic_write`), so an interrupted sweep leaves complete part files only. A re-run reads the
part headers, skips the (cell, seed) pairs already done and rebuilds the tables from all parts, in the
canonical job order, so the tables equal those of an uninterrupted run (``wall_time`` aside).
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.util
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedbandit_envs.bench.jobs import Job, JobResult, canonical_json, to_json
from fedbandit_envs.runner import Results

FORMATS = ("auto", "csv", "parquet")
TABLES = {"curves": "results", "agents": "results_agents"}
PART_SUFFIX = ".jsonl.gz"


def has_pyarrow() -> bool:
    """Whether pyarrow is importable (then tables are written as Parquet by default)."""
    return importlib.util.find_spec("pyarrow") is not None


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(temporary path)`` and rename the result to ``path``; on error nothing is left behind."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def check_writable(directory: str | Path) -> Path:
    """Create ``directory`` if needed and check a file can be written there; ValueError naming the fix otherwise."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=".write-test.", dir=directory)
        os.close(handle)
        os.unlink(name)
    except OSError as error:
        raise ValueError(
            f"cannot write results to {str(directory)!r} ({error.strerror or error}); choose a writable directory "
            "with --out (Python: out=...)"
        ) from error
    return directory


def _kind(value: Any) -> type:
    """The table type of a cell value: bool, int, float, str (numpy scalars included), else object."""
    for kind, types in ((bool, (bool, np.bool_)), (int, (int, np.integer)), (float, (float, np.floating)), (str, str)):
        if isinstance(value, types):
            return kind
    return object


def _as_text(value: Any) -> str:
    """A cell of a mixed or structured column: strings as they are, anything else as canonical JSON."""
    return value if isinstance(value, str) else canonical_json(value)


def _columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Column name (first-seen order) -> values, with one type per column: bool, int, float, str or JSON text.

    Missing cells are None. Integers mixed with floats become floats; numpy scalars Python numbers; any
    other mixture, and lists or dicts, JSON text.
    """
    names = list(dict.fromkeys(key for row in rows for key in row))
    table: dict[str, list[Any]] = {}
    for name in names:
        values = [row.get(name) for row in rows]
        types = {type(value) for value in values if value is not None}
        if any(types <= {python} for python in (bool, int, float, str)):
            table[name] = values  # already one plain Python type
            continue
        kinds = {_kind(value) for value in values if value is not None}
        convert: Callable[[Any], Any] = next((kind for kind in (bool, int, str) if kinds <= {kind}), _as_text)
        if convert is _as_text and kinds <= {int, float}:
            convert = float
        table[name] = [None if value is None else convert(value) for value in values]
    return table


def _parse_column(values: list[str]) -> list[Any]:
    """Typed values of one CSV column: int, float or bool when every non-empty cell parses, else str."""
    present = [value for value in values if value != ""]
    for parse in (int, float, _parse_bool):
        try:
            parsed = {value: parse(value) for value in set(present)}
        except ValueError:
            continue
        return [parsed[value] if value != "" else None for value in values]
    return [value if value != "" else None for value in values]


def _parse_bool(text: str) -> bool:
    if text not in ("True", "False"):
        raise ValueError(text)
    return text == "True"


def write_table(rows: Sequence[Mapping[str, Any]], path: Path, table_format: str) -> Path:
    """Write ``rows`` atomically as CSV or Parquet (``table_format``) at ``path``."""
    table = _columns(rows)

    def write_csv(temporary: Path) -> None:
        with temporary.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(table)
            writer.writerows(zip(*table.values()))

    def write_parquet(temporary: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table(table), temporary)

    return atomic_write(path, write_parquet if table_format == "parquet" else write_csv)


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a table written by :func:`write_table` (CSV cells typed per column)."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        raw = list(reader)
    columns = [_parse_column([row[i] for row in raw]) for i in range(len(header))]
    return [dict(zip(header, values)) for values in zip(*columns)] if raw else []


def table_paths(directory: str | Path) -> dict[str, Path]:
    """The results tables present in ``directory`` (table name -> path), Parquet preferred."""
    directory = Path(directory)
    found = {}
    for table, stem in TABLES.items():
        for suffix in (".parquet", ".csv"):
            path = directory / f"{stem}{suffix}"
            if path.exists() and (suffix == ".csv" or has_pyarrow()):
                found[table] = path
                break
    return found


def load_results(directory: str | Path) -> Results:
    """The results tables of a sweep directory as :class:`~fedbandit_envs.runner.Results`."""
    paths = table_paths(directory)
    if "curves" not in paths:
        raise ValueError(
            f"no results table in {str(directory)!r}; run `fedbandit sweep SCENARIO --out {directory}` first "
            "(or point at the directory given to --out)"
        )
    return Results(**{table: read_table(path) for table, path in paths.items()})


def load_config(directory: str | Path) -> dict[str, Any]:
    """The ``config.json`` of a sweep directory ({} when absent)."""
    path = Path(directory) / "config.json"
    return json.loads(path.read_text()) if path.exists() else {}


class ResultStore:
    """The results directory of one sweep (see the module docstring).

    Args:
        directory: where config, parts and tables go (created if needed).
        table_format: ``"auto"`` (Parquet when pyarrow is importable, else CSV), ``"csv"`` or ``"parquet"``.
    """

    def __init__(self, directory: str | Path, table_format: str = "auto") -> None:
        if table_format not in FORMATS:
            raise ValueError(f"table_format must be one of {FORMATS}, got {table_format!r}")
        if table_format == "parquet" and not has_pyarrow():
            raise ValueError("table_format='parquet' needs pyarrow: pip install pyarrow (or use 'csv')")
        self.directory = Path(directory)
        self.parts = self.directory / "parts"
        self.format = "parquet" if table_format == "parquet" or (table_format == "auto" and has_pyarrow()) else "csv"
        self._saved: dict[Path, tuple[str, Results]] = {}  # parts written by this object: not read back

    def check_writable(self) -> None:
        """Create the directory and its ``parts`` folder, or raise ValueError saying how to fix it."""
        check_writable(self.directory)
        check_writable(self.parts)

    def _part_files(self) -> list[Path]:
        return sorted(self.parts.glob(f"*{PART_SUFFIX}")) if self.parts.is_dir() else []

    @staticmethod
    def _header(path: Path) -> dict[str, Any]:
        with gzip.open(path, "rt") as handle:
            return json.loads(handle.readline())

    def finished(self) -> dict[str, set[int]]:
        """Cell id -> seeds whose results are stored."""
        done: dict[str, set[int]] = {}
        for path in self._part_files():
            header = self._header(path)
            done.setdefault(header["cell"], set()).update(header["seeds"])
        return done

    def save_part(self, result: JobResult) -> Path:
        """Store one finished job atomically; returns the part's path."""
        job = result.job
        tag = hashlib.sha256(json.dumps(list(job.seeds)).encode()).hexdigest()[:8]
        header = {
            "cell": job.cell,
            "seeds": list(job.seeds),
            "algorithm": job.algorithm,
            "point": dict(job.point),
            "sim_time": result.sim_time,
        }

        def write(temporary: Path) -> None:
            with gzip.open(temporary, "wt", compresslevel=1) as handle:
                for line in (header, {"curves": result.results.curves}, {"agents": result.results.agents}):
                    handle.write(json.dumps(line, default=to_json) + "\n")

        path = atomic_write(self.parts / f"{job.cell}-{tag}{PART_SUFFIX}", write)
        self._saved[path] = (job.cell, result.results)
        return path

    def _read_parts(self, cells: Iterable[str]) -> dict[str, list[Results]]:
        wanted = set(cells)
        found: dict[str, list[Results]] = {}
        for path in self._part_files():
            if path in self._saved:
                cell, results = self._saved[path]
                if cell in wanted:
                    found.setdefault(cell, []).append(results)
                continue
            with gzip.open(path, "rt") as handle:
                header = json.loads(handle.readline())
                if header["cell"] not in wanted:
                    continue
                tables = {key: value for line in handle for key, value in json.loads(line).items()}
            found.setdefault(header["cell"], []).append(Results(**tables))
        return found

    def collect(self, jobs: Sequence[Job]) -> Results:
        """The stored rows of ``jobs`` (all seeds of each cell) in canonical order: job order, seed, slot, agent."""
        seeds = {job.cell: [] for job in jobs}
        for job in jobs:
            seeds[job.cell].extend(job.seeds)
        parts = self._read_parts(seeds)
        merged = Results()
        for cell, cell_seeds in seeds.items():
            rank = {seed: i for i, seed in enumerate(dict.fromkeys(cell_seeds))}
            for table in TABLES:
                chosen: dict[int, list[dict[str, Any]]] = {}
                for part in parts.get(cell, []):
                    by_seed: dict[int, list[dict[str, Any]]] = {}
                    for row in getattr(part, table):
                        if row["seed"] in rank:
                            by_seed.setdefault(row["seed"], []).append(row)
                    for seed, rows in by_seed.items():
                        chosen.setdefault(seed, rows)
                missing = set(rank) - set(chosen) if table == "curves" else set()
                if missing:
                    raise ValueError(f"results of cell {cell} lack seeds {sorted(missing)}; run the sweep again")
                rows = [row for seed_rows in chosen.values() for row in seed_rows]
                getattr(merged, table).extend(sorted(rows, key=lambda row: (rank[row["seed"]], row["slot"])))
        return merged

    def write_tables(self, results: Results) -> list[Path]:
        """Write the curves and agents tables atomically (removing a stale table of the other format)."""
        paths = []
        suffix = ".parquet" if self.format == "parquet" else ".csv"
        for table, stem in TABLES.items():
            paths.append(write_table(getattr(results, table), self.directory / f"{stem}{suffix}", self.format))
            (self.directory / f"{stem}{'.csv' if suffix == '.parquet' else '.parquet'}").unlink(missing_ok=True)
        return paths

    def write_config(self, config: Mapping[str, Any]) -> Path:
        """Write ``config.json`` atomically."""
        text = json.dumps(config, indent=2, default=to_json)
        return atomic_write(self.directory / "config.json", lambda temporary: temporary.write_text(text + "\n"))
