"""Restartable results of a sweep: one directory per sweep, written so that no file is ever half-written.

Layout of a results directory::

    config.json             the resolved scenario, scale, overrides, seeds, backend, package versions
    parts/<cell>-<h>.jsonl.gz  one file per finished job: a header line (the job's cell and seeds and a
                            manifest: rows and sha256 of each table), then one line per table
    results.parquet         the tidy table (one row per run and checkpoint); results.csv with table_format="csv"
    results_agents.parquet  one row per run, checkpoint and agent (results_agents.csv with "csv")
    tables.json             whether the tables are complete, their row counts and sha256 checksums
    damaged/                part files that failed verification, moved aside (their jobs run again)
    .sweep.lock             held by the one sweep writing into the directory (:meth:`ResultStore.lock`);
    .sweep.owner            that sweep's scenario, process and start time, named to a second sweep

Every file is written to a temporary file in the same directory and renamed into place
(:func:`atomic_write`), so an interrupted sweep leaves complete part files only. A re-run reads and
verifies every part (:func:`read_part`: gzip and JSON intact, every table present with the rows and
checksum its manifest records, rows for every seed), moves a damaged or stray file to ``damaged/``
with a warning naming it, skips the (cell, seed) pairs held by good parts and rebuilds the tables from
all parts, in the canonical job order, so the tables equal those of an uninterrupted run (``wall_time``
aside). :meth:`ResultStore.collect` refuses (:class:`IncompleteResults`) when any job lacks a seed.
Parts written before manifests existed still load: every table must be present with rows for every
seed, but there is no checksum to compare. One sweep writes into a directory at a time: a second one
started while the first runs stops at once with :class:`DirectoryBusy` (two sweeps into one directory
would overwrite each other's ``config.json`` and tables). The lock is an OS file lock, so a sweep that
crashes or is killed releases it.

The tables are Parquet (:data:`DEFAULT_FORMAT`) unless a sweep asks for CSV; both read back into the same
typed DataFrame (:func:`read_frame`, :func:`load_frame`; dtypes: :mod:`fedbandit_envs.run.results`), and
a Parquet table reads with one line of pandas, ``pandas.read_parquet("results.parquet")``. CSV keeps no
types, so its reader types each column from its cells (int, float, bool, else text); text that looks like a
number comes back as one, which only Parquet avoids.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from filelock import FileLock, Timeout

from fedbandit_envs.bench.jobs import Job, JobResult, canonical_json, missing_seeds, to_json
from fedbandit_envs.run import Results
from fedbandit_envs.run.results import frame_from_columns, frame_from_rows, typed_frame

#: The table formats, the default first: Parquet keeps every column's dtype; CSV is plain text.
FORMATS = ("parquet", "csv")
DEFAULT_FORMAT = FORMATS[0]
#: File suffix of each format.
SUFFIXES = {"parquet": ".parquet", "csv": ".csv"}
TABLES = {"curves": "results", "agents": "results_agents"}
PART_SUFFIX = ".jsonl.gz"
#: Version of the part file layout written now (parts without a ``format`` key predate manifests).
PART_FORMAT = 2
#: Where damaged part files are moved, inside the results directory.
DAMAGED = "damaged"
#: The status of the tables (complete or not, rows, checksums), inside the results directory.
STATUS = "tables.json"
#: What ``fedbandit report`` and ``fedbandit plot`` write into a results directory: the report's stem (``.md``,
#: ``.html``) and the folder of figures; removed by a sweep that replaces the tables they were made from.
REPORT, FIGURES = "report", "figures"
#: The lock file held by the sweep writing into a results directory, and the file naming that sweep.
LOCK, OWNER = ".sweep.lock", ".sweep.owner"
#: Exceptions of reading a damaged compressed file or its text.
READ_ERRORS = (OSError, EOFError, zlib.error, UnicodeDecodeError)


class IncompleteResults(ValueError):
    """Stored results lack some runs of the sweep they belong to; the message names them and the fix."""


class DirectoryBusy(ValueError):
    """Another sweep is writing into the results directory; the message names it and what to do."""


class DamagedPartWarning(UserWarning):
    """A file in ``parts/`` failed verification: it is moved to ``damaged/`` and its runs are run again."""


class DamagedPartError(ValueError):
    """A part file cannot be read or does not hold what its manifest records."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def check_format(table_format: str) -> str:
    """``table_format`` if it is one of :data:`FORMATS`, else a ValueError naming the choices."""
    if table_format not in FORMATS:
        hint = " ('auto' was removed: tables are Parquet unless you ask for CSV)" if table_format == "auto" else ""
        raise ValueError(f"table_format must be one of {FORMATS}, got {table_format!r}{hint}")
    return table_format


def recorded_format(config: Mapping[str, Any]) -> str:
    """The table format a sweep's ``config.json`` records; :data:`DEFAULT_FORMAT` for the old ``"auto"`` or none."""
    table_format = config.get("format", DEFAULT_FORMAT)
    return DEFAULT_FORMAT if table_format == "auto" else table_format


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
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


def write_table(rows: Sequence[Mapping[str, Any]] | pd.DataFrame, path: Path, table_format: str) -> Path:
    """Write ``rows`` (or a frame) atomically as Parquet or CSV (``table_format``) at ``path``.

    Rows are typed first (:func:`~fedbandit_envs.run.results.frame_from_rows`, structured cells as
    canonical JSON text). In CSV a NaN is written ``nan`` and a missing cell left empty.
    """
    check_format(table_format)
    frame = rows if isinstance(rows, pd.DataFrame) else frame_from_rows(rows, text=canonical_json)

    def write_csv(temporary: Path) -> None:
        # A float column as it is (NaN is written "nan"), any other missing cell as None (an empty cell).
        cells = [
            c.tolist() if c.dtype == np.float64 else c.astype(object).where(c.notna(), None).tolist()
            for _, c in frame.items()
        ]
        with temporary.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(frame.columns)
            writer.writerows(zip(*cells))

    def write_parquet(temporary: Path) -> None:
        frame.to_parquet(temporary, index=False)

    return atomic_write(path, write_parquet if table_format == "parquet" else write_csv)


def read_frame(path: str | Path) -> pd.DataFrame:
    """A table written by :func:`write_table` (or by an older version) as a typed DataFrame.

    Parquet keeps its types (older files without pandas metadata are typed the same way); CSV cells are
    typed per column (int, float or bool when every non-empty cell parses, else text).
    """
    path = Path(path)
    if path.suffix == ".parquet":
        return typed_frame(pd.read_parquet(path, dtype_backend="numpy_nullable"))
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        raw = list(reader)
    return frame_from_columns({name: _parse_column([row[i] for row in raw]) for i, name in enumerate(header)})


def read_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a table written by :func:`write_table` (see :func:`read_frame`; NA cells are None)."""
    return read_frame(path).to_dict("records")


def table_paths(directory: str | Path) -> dict[str, Path]:
    """The results tables present in ``directory`` (table name -> path), Parquet preferred."""
    directory = Path(directory)
    found = {}
    for table, stem in TABLES.items():
        for suffix in SUFFIXES.values():
            path = directory / f"{stem}{suffix}"
            if path.exists():
                found[table] = path
                break
    return found


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _repair_hint(directory: str | Path) -> str:
    return f"rebuild them with `fedbandit sweep --repair --out {directory}`"


def table_status(directory: str | Path) -> tuple[bool, str]:
    """Whether the tables of ``directory`` are complete and unchanged, and a sentence saying why not.

    Returns ``(True, "")`` for tables written whole by a finished sweep whose checksums still match;
    ``(False, reason)`` when a later sweep into the directory did not finish or a table no longer
    matches its checksum; ``(True, note)`` for tables written before ``tables.json`` existed (nothing
    to verify them against).
    """
    directory = Path(directory)
    path = directory / STATUS
    if not path.exists():
        return True, (
            f"the tables in {str(directory)!r} were written by an older version of fedbandit-envs without "
            "tables.json, so their completeness and checksums cannot be verified"
        )
    try:
        status = json.loads(path.read_text())
        complete, files = bool(status["complete"]), dict(status.get("sha256", {}))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as error:
        return False, f"{path} cannot be read ({error}); {_repair_hint(directory)}"
    if not complete:
        return False, str(status.get("reason", "the tables are marked incomplete"))
    for name, digest in files.items():
        table = directory / name
        try:
            actual = _sha256(table.read_bytes())
        except OSError as error:
            return False, f"table {str(table)!r} cannot be read ({error.strerror or error}); {_repair_hint(directory)}"
        if actual != digest:
            changed = f"table {str(table)!r} changed after it was written (checksum mismatch)"
            return False, f"{changed}; {_repair_hint(directory)}"
    return True, ""


def read_frames(directory: str | Path, allow_incomplete: bool = False) -> tuple[dict[str, pd.DataFrame], str]:
    """The results tables of a sweep directory as typed DataFrames (table name -> frame) and a completeness note.

    The note is "" when the tables are verified complete. Raises :class:`IncompleteResults` when they are
    incomplete or changed (see :func:`table_status`) unless ``allow_incomplete``; then the note says what
    is wrong, for the top of a report.
    """
    paths = table_paths(directory)
    if "curves" not in paths:
        raise ValueError(
            f"no results table in {str(directory)!r}; run `fedbandit sweep SCENARIO --out {directory}` first "
            "(or point at the directory given to --out)"
        )
    complete, note = table_status(directory)
    if not complete and not allow_incomplete:
        raise IncompleteResults(f"incomplete results: {note} (or pass --allow-incomplete to use them anyway)")
    frames = {}
    for table, path in paths.items():
        try:
            frames[table] = read_frame(path)
        except Exception as error:  # any reader error of a damaged file; the message names the file
            raise ValueError(
                f"cannot read table {str(path)!r} ({type(error).__name__}: {error}); {_repair_hint(directory)}"
            ) from error
    return frames, note


def read_results(directory: str | Path, allow_incomplete: bool = False) -> tuple[Results, str]:
    """The results tables of a sweep directory as rows, and a note on their completeness (see :func:`read_frames`)."""
    frames, note = read_frames(directory, allow_incomplete)
    return Results.from_frames(**frames), note


def _warn_note(note: str) -> None:
    if note:
        warnings.warn(note, stacklevel=3)


def load_results(directory: str | Path, allow_incomplete: bool = False) -> Results:
    """The results tables of a sweep directory as :class:`~fedbandit_envs.run.Results` (see :func:`read_results`).

    A note on unverifiable or (with ``allow_incomplete``) incomplete tables is issued as a warning.
    """
    results, note = read_results(directory, allow_incomplete)
    _warn_note(note)
    return results


def load_frame(directory: str | Path, table: str = "curves", allow_incomplete: bool = False) -> pd.DataFrame:
    """One results table (``"curves"`` or ``"agents"``) of a sweep directory as a typed DataFrame.

    Checked and warned about as :func:`load_results` does. For a Parquet table this equals
    ``pandas.read_parquet(directory / "results.parquet")`` (``results_agents.parquet`` for the agents).
    """
    if table not in TABLES:
        raise ValueError(f"table must be one of {tuple(TABLES)}, got {table!r}")
    frames, note = read_frames(directory, allow_incomplete)
    _warn_note(note)
    if table not in frames:
        raise ValueError(f"no {table} table in {str(directory)!r}; its sweep's runner returned none")
    return frames[table]


def load_config(directory: str | Path) -> dict[str, Any]:
    """The ``config.json`` of a sweep directory ({} when absent); ValueError naming the file when unreadable."""
    path = Path(directory) / "config.json"
    if not path.exists():
        return {}
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"cannot read {str(path)!r} ({error}); run the sweep again to rewrite it") from error
    if not isinstance(config, dict):
        raise ValueError(f"{str(path)!r} does not hold a JSON object; run the sweep again to rewrite it")
    return config


@dataclass(frozen=True)
class StoredPart:
    """A part file that passed verification.

    Attributes:
        path: the file.
        cell: the cell id of the job it holds.
        seeds: the job's seeds (every table has rows for each of them, or none for a table the runner omits).
        results: its tables.
        checksummed: the file has a manifest (rows and sha256 per table) and matched it; False for parts
            written before manifests existed (only completeness was checked).
    """

    path: Path
    cell: str
    seeds: tuple[int, ...]
    results: Results
    checksummed: bool


def part_text(result: JobResult) -> str:
    """The text of a job's part file: header (job and manifest) line, then one line per table."""
    job = result.job
    lines = {table: json.dumps({table: getattr(result.results, table)}, default=to_json) for table in TABLES}
    manifest = {
        table: {"rows": len(getattr(result.results, table)), "sha256": _sha256(line.encode())}
        for table, line in lines.items()
    }
    header = {
        "format": PART_FORMAT,
        "cell": job.cell,
        "seeds": list(job.seeds),
        "algorithm": job.algorithm,
        "point": dict(job.point),
        "sim_time": result.sim_time,
        "tables": manifest,
    }
    return "".join(line + "\n" for line in (json.dumps(header, default=to_json), *lines.values()))


def _json_line(path: Path, line: str, number: int) -> Any:
    try:
        return json.loads(line)
    except ValueError as error:
        raise DamagedPartError(path, f"line {number} is not valid JSON ({error})") from error


def _header(path: Path, line: str) -> tuple[str, tuple[int, ...], Mapping[str, Any] | None]:
    """Cell, seeds and manifest (None for a part written before manifests) of a header line."""
    header = _json_line(path, line, 1)
    if not isinstance(header, dict):
        raise DamagedPartError(path, "the first line is not a part header (a JSON object)")
    cell, seeds, manifest = header.get("cell"), header.get("seeds"), header.get("tables")
    if not isinstance(cell, str) or not isinstance(seeds, list) or not seeds:
        raise DamagedPartError(path, "the header lacks the job's cell id or seeds")
    if any(isinstance(seed, bool) or not isinstance(seed, int) for seed in seeds):
        raise DamagedPartError(path, f"the header's seeds are not integers: {seeds!r}")
    if "format" in header and not isinstance(manifest, dict):
        raise DamagedPartError(path, "the header's table manifest is missing")
    return cell, tuple(seeds), manifest


def read_part(path: str | Path) -> StoredPart:
    """Read and verify one part file; :class:`DamagedPartError` (naming the file and the fault) otherwise.

    Checked: the gzip stream and its text are complete; the header names a cell and integer seeds; each
    table is one JSON line holding a list of rows whose ``seed`` is one of the header's; with a manifest,
    every table's row count and sha256 match it; the curves table has rows for every seed and every
    other table for every seed or none (:func:`~fedbandit_envs.bench.jobs.missing_seeds`).
    """
    path = Path(path)
    if not path.is_file():
        raise DamagedPartError(path, "not a part file (a directory or special file)")
    if not path.name.endswith(PART_SUFFIX):
        raise DamagedPartError(path, f"not a part file (its name does not end in {PART_SUFFIX})")
    try:
        with gzip.open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
    except READ_ERRORS as error:
        raise DamagedPartError(path, f"not a complete gzip text file ({type(error).__name__}: {error})") from error
    if not text:
        raise DamagedPartError(path, "empty")
    if not text.endswith("\n"):
        raise DamagedPartError(path, "cut short (the last line has no end)")
    header_line, *table_lines = text[:-1].split("\n")
    cell, seeds, manifest = _header(path, header_line)
    lines: dict[str, str] = {}
    tables: dict[str, list[dict[str, Any]]] = {}
    for number, line in enumerate(table_lines, 2):
        entry = _json_line(path, line, number)
        if not isinstance(entry, dict) or len(entry) != 1 or next(iter(entry)) not in TABLES:
            raise DamagedPartError(path, f"line {number} is not one of the tables {sorted(TABLES)}")
        ((table, rows),) = entry.items()
        if table in tables:
            raise DamagedPartError(path, f"table {table!r} appears twice")
        if not isinstance(rows, list) or any(not isinstance(row, dict) or row.get("seed") not in seeds for row in rows):
            raise DamagedPartError(path, f"table {table!r} holds rows that are not rows of seeds {list(seeds)}")
        lines[table], tables[table] = line, rows
    for table in TABLES:
        if table not in tables:
            raise DamagedPartError(path, f"the {table} table is missing")
        if manifest is None:
            continue
        expected = manifest.get(table)
        if not isinstance(expected, dict):
            raise DamagedPartError(path, f"the manifest does not record the {table} table")
        if expected.get("rows") != len(tables[table]):
            counts = f"{len(tables[table])} rows, its manifest records {expected.get('rows')}"
            raise DamagedPartError(path, f"the {table} table has {counts}")
        if expected.get("sha256") != _sha256(lines[table].encode()):
            raise DamagedPartError(path, f"the {table} table does not match its sha256 checksum")
    results = Results(**tables)
    lacking = missing_seeds(results, seeds)
    if lacking:
        raise DamagedPartError(path, "; ".join(f"the {t} table has no rows for seeds {s}" for t, s in lacking.items()))
    return StoredPart(path, cell, seeds, results, manifest is not None)


class ResultStore:
    """The results directory of one sweep (see the module docstring).

    Args:
        directory: where config, parts and tables go (created if needed).
        table_format: ``"parquet"`` (the default) or ``"csv"`` (see :data:`FORMATS`).
    """

    def __init__(self, directory: str | Path, table_format: str = DEFAULT_FORMAT) -> None:
        self.format = check_format(table_format)
        self.directory = Path(directory)
        self.parts = self.directory / "parts"
        self._verified: dict[Path, StoredPart] | None = None  # read by scan(), plus parts saved since
        self.damaged: list[DamagedPartError] = []

    def check_writable(self) -> None:
        """Create the directory and its ``parts`` folder, or raise ValueError saying how to fix it."""
        check_writable(self.directory)
        check_writable(self.parts)

    def scan(self) -> list[DamagedPartError]:
        """Read and verify every entry of ``parts/`` (:func:`read_part`); returns the damaged ones (left in place).

        Hidden files (temporary files of writes in progress) are skipped.
        """
        verified: dict[Path, StoredPart] = {}
        damaged = []
        entries = sorted(self.parts.iterdir()) if self.parts.is_dir() else []
        for path in entries:
            if path.name.startswith("."):
                continue
            try:
                verified[path] = read_part(path)
            except DamagedPartError as error:
                damaged.append(error)
        self._verified, self.damaged = verified, damaged
        return damaged

    def stored(self) -> dict[Path, StoredPart]:
        """The verified parts (path -> part), scanning ``parts/`` on first use."""
        if self._verified is None:
            self.scan()
        assert self._verified is not None
        return self._verified

    def unchecksummed(self) -> int:
        """How many verified parts predate manifests (completeness checked, no checksum to compare)."""
        return sum(not part.checksummed for part in self.stored().values())

    def move_aside(self) -> list[Path]:
        """Move the damaged entries found by :meth:`scan` to ``damaged/`` (a clash gets a counter); new paths."""
        if not self.damaged:
            return []
        target = check_writable(self.directory / DAMAGED)
        moved = []
        for error in self.damaged:
            destination, counter = target / error.path.name, 1
            while destination.exists():
                destination, counter = target / f"{error.path.name}.{counter}", counter + 1
            moved.append(Path(shutil.move(error.path, destination)))
        self.damaged = []
        return moved

    def finished(self) -> dict[str, set[int]]:
        """Cell id -> seeds whose results are stored in verified parts."""
        done: dict[str, set[int]] = {}
        for part in self.stored().values():
            done.setdefault(part.cell, set()).update(part.seeds)
        return done

    def save_part(self, result: JobResult) -> Path:
        """Store one finished job atomically (with its manifest); returns the part's path."""
        job = result.job
        tag = hashlib.sha256(json.dumps(list(job.seeds)).encode()).hexdigest()[:8]
        text = part_text(result)

        def write(temporary: Path) -> None:
            with gzip.open(temporary, "wt", compresslevel=1) as handle:
                handle.write(text)

        path = atomic_write(self.parts / f"{job.cell}-{tag}{PART_SUFFIX}", write)
        self.stored()[path] = StoredPart(path, job.cell, tuple(job.seeds), result.results, True)
        return path

    def collect(self, jobs: Sequence[Job]) -> Results:
        """The stored rows of ``jobs`` (all seeds of each cell) in canonical order: job order, seed, slot, agent.

        Every (cell, seed) of ``jobs`` must be held by a verified part, which supplies all its tables;
        otherwise :class:`IncompleteResults` names the missing jobs and seeds.
        """
        seeds: dict[str, list[int]] = {}
        names: dict[str, Job] = {}
        for job in jobs:
            seeds.setdefault(job.cell, []).extend(job.seeds)
            names.setdefault(job.cell, job)
        holder: dict[tuple[str, int], StoredPart] = {}
        for part in self.stored().values():
            for seed in part.seeds:
                holder.setdefault((part.cell, seed), part)
        missing = {cell: [s for s in cell_seeds if (cell, s) not in holder] for cell, cell_seeds in seeds.items()}
        missing = {cell: lacking for cell, lacking in missing.items() if lacking}
        if missing:
            described = "; ".join(
                f"{names[cell].algorithm} {dict(names[cell].point)} seeds {absent}" for cell, absent in missing.items()
            )
            raise IncompleteResults(
                f"results in {str(self.directory)!r} lack {sum(map(len, missing.values()))} run(s) ({described}); "
                f"run the same sweep again (or `fedbandit sweep --repair --out {self.directory}`) to run them"
            )
        merged = Results()
        for cell, cell_seeds in seeds.items():
            order = list(dict.fromkeys(cell_seeds))
            for table in TABLES:
                rows = [
                    row
                    for seed in order
                    for row in sorted(
                        (row for row in getattr(holder[cell, seed].results, table) if row["seed"] == seed),
                        key=lambda row: row["slot"],
                    )
                ]
                getattr(merged, table).extend(rows)
        return merged

    def table_checksums(self) -> dict[str, str]:
        """Table file -> sha256 as ``tables.json`` records them complete ({} when there are none, or not complete)."""
        try:
            status = json.loads((self.directory / STATUS).read_text())
            return dict(status["sha256"]) if status.get("complete") is True else {}
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def remove_report(self) -> list[Path]:
        """Remove the report (``report.md``, ``report.html``) and the figures (PNG, SVG) in ``figures/``.

        Returns the paths removed (the folder too when nothing else is left in it).
        """
        folder = self.directory / FIGURES
        reports = [self.directory / f"{REPORT}{suffix}" for suffix in (".md", ".html")]
        figures = sorted([*folder.glob("*.png"), *folder.glob("*.svg")]) if folder.is_dir() else []
        removed = [path for path in (*reports, *figures) if path.exists()]
        for path in removed:
            path.unlink()
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            removed.append(folder)
        return removed

    def mark_tables_stale(self, reason: str) -> None:
        """Record in ``tables.json`` that the tables present (if any) may not match the sweep now under way."""
        if table_paths(self.directory):
            self._write_status({"complete": False, "reason": reason})

    def _write_status(self, status: Mapping[str, Any]) -> Path:
        text = json.dumps(status, indent=2)
        return atomic_write(self.directory / STATUS, lambda temporary: temporary.write_text(text + "\n"))

    def write_tables(self, results: Results) -> list[Path]:
        """Write the curves and agents tables atomically (removing a stale table of another format).

        Then ``tables.json`` records them complete, with their row counts and sha256 checksums.
        """
        paths = []
        for table, stem in TABLES.items():
            path = self.directory / f"{stem}{SUFFIXES[self.format]}"
            paths.append(write_table(getattr(results, table), path, self.format))
            for other in set(SUFFIXES.values()) - {SUFFIXES[self.format]}:
                (self.directory / f"{stem}{other}").unlink(missing_ok=True)
        self._write_status(
            {
                "complete": True,
                "rows": {table: len(getattr(results, table)) for table in TABLES},
                "sha256": {path.name: _sha256(path.read_bytes()) for path in paths},
            }
        )
        return paths

    @contextmanager
    def lock(self, holder: str) -> Iterator[None]:
        """Hold the directory's writer lock for the block; :class:`DirectoryBusy` at once if another sweep holds it.

        Args:
            holder: what is writing (for example the scenario's name), named to a sweep that finds the lock held.
        """
        lock = FileLock(self.directory / LOCK)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            try:
                owner = (self.directory / OWNER).read_text().strip()
            except OSError:
                owner = "another process"
            raise DirectoryBusy(
                f"another sweep is writing into {str(self.directory)!r} ({owner}); wait for it to finish, or "
                "choose another --out (two sweeps into one directory would overwrite each other's config and tables)"
            ) from None
        try:
            started = time.strftime("%Y-%m-%d %H:%M:%S")
            text = f"{holder}, process {os.getpid()}, started {started}"
            atomic_write(self.directory / OWNER, lambda temporary: temporary.write_text(text + "\n"))
            yield
        finally:
            lock.release()

    def write_config(self, config: Mapping[str, Any]) -> Path:
        """Write ``config.json`` atomically."""
        text = json.dumps(config, indent=2, default=to_json)
        return atomic_write(self.directory / "config.json", lambda temporary: temporary.write_text(text + "\n"))
