"""Run a scenario's sweep: expand it into jobs, skip finished cells, run the rest on a backend, write the table.

Python equivalent of ``fedbandit sweep``::

    from fedbandit_envs.bench.sweep import run_sweep

    summary = run_sweep("suite/baselines", "results/baselines", scale="ci", backend="pool")
    print(summary.jobs_run, summary.tables)

The scenario is resolved at a scale (:func:`~fedbandit_envs.bench.jobs.resolve_scenario`), expanded
into jobs (:func:`~fedbandit_envs.bench.jobs.expand`: points x algorithms, all seeds of a job as
batched replicas), every cell's configuration is checked by building its environment
(:func:`~fedbandit_envs.bench.jobs.check_jobs`) before anything is written, the stored parts are
verified (damaged ones are moved aside and their runs run again), the (cell, seed) pairs already
stored in the output directory are skipped, each finished job is stored at once, and the tidy tables
are rebuilt from everything stored (:class:`~fedbandit_envs.bench.store.ResultStore`). A sweep holds
the directory's lock from its scan to its tables, so a second sweep into the same directory stops at once
(:class:`~fedbandit_envs.bench.store.DirectoryBusy`); ``--dry-run`` only reads and takes no lock.
:func:`repair_sweep` re-runs the sweep recorded in a directory's ``config.json``.
"""

from __future__ import annotations

import importlib.metadata
import platform
import time
import warnings
from collections.abc import Mapping
from contextlib import closing, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedbandit_envs.bench.backends import Backend, JobFailed, make_backend
from fedbandit_envs.bench.jobs import (
    Job,
    canonical_json,
    check_jobs,
    check_result,
    env_keys,
    expand,
    import_targets,
    param_columns,
    pending,
    resolve_scenario,
)
from fedbandit_envs.bench.scenarios import Scenario
from fedbandit_envs.bench.store import (
    DAMAGED,
    DEFAULT_FORMAT,
    DamagedPartWarning,
    ResultStore,
    load_config,
    recorded_format,
)
from fedbandit_envs.seeding import SeedsLike


@dataclass
class SweepSummary:
    """What a sweep did.

    Attributes:
        scenario: the resolved scenario.
        directory: the results directory.
        jobs: every job of the sweep (canonical order, all seeds).
        jobs_run: the jobs run now (finished seeds removed).
        cells_skipped: (cell, seed) pairs found already stored.
        sim_time: seconds spent inside the runner, summed over the jobs run.
        wall_time: seconds from start to the tables being written.
        tables: paths of the tables written (empty for a dry run).
        damaged: one line per damaged part found (moved to ``damaged/``, or left in place by a dry run).
        unchecksummed: stored parts written before part manifests (checked for completeness only).
        removed: the report and figures of earlier tables, removed because the sweep replaced those tables.
    """

    scenario: Scenario
    directory: Path
    jobs: list[Job]
    jobs_run: list[Job]
    cells_skipped: int
    sim_time: float = 0.0
    wall_time: float = 0.0
    tables: list[Path] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)
    unchecksummed: int = 0
    removed: list[Path] = field(default_factory=list)

    def describe(self) -> str:
        """A few lines for the terminal: job counts and where the results are."""
        runs = sum(len(job.seeds) for job in self.jobs)
        lines = [
            f"scenario {self.scenario.name}: {len(self.scenario.points())} point(s) x "
            f"{len(self.scenario.algorithms)} algorithm(s) x {len(self.scenario.seed_list())} seed(s) = {runs} runs in "
            f"{len(self.jobs)} job(s); {len(self.jobs_run)} job(s) to run, {self.cells_skipped} run(s) already stored",
            f"results directory: {self.directory}",
        ]
        lines += [f"damaged: {line}" for line in self.damaged]
        if self.unchecksummed:
            lines.append(
                f"{self.unchecksummed} stored part(s) predate part manifests: checked for completeness, "
                "not checksums (run with a fresh --out to rewrite them)"
            )
        if self.tables:
            lines.append(f"ran in {self.wall_time:.1f} s wall ({self.sim_time:.1f} s simulating)")
            lines += [f"wrote {path}" for path in self.tables]
        if self.removed:
            lines.append(
                f"removed the report of the earlier tables ({', '.join(path.name for path in self.removed)}); "
                f"`fedbandit report {self.directory}` writes one for these tables"
            )
        return "\n".join(lines)


def package_versions() -> dict[str, str]:
    """Versions of fedbandit-envs, Python and numpy, recorded in every ``config.json``."""
    try:
        version = importlib.metadata.version("fedbandit-envs")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
        version = "unknown"
    return {"fedbandit-envs": version, "python": platform.python_version(), "numpy": np.__version__}


def sweep_config(
    scenario: Scenario, scale: str, overrides: Mapping[str, Any] | None, backend: str, table_format: str
) -> dict[str, Any]:
    """The record written to ``config.json``: the resolved scenario and how the sweep ran."""
    return {
        "scenario": scenario.name,
        "paper": scenario.paper,
        "description": scenario.description,
        "scale": scale,
        "overrides": dict(overrides or {}),
        "env_kwargs": dict(scenario.env_kwargs),
        "algorithms": dict(scenario.algorithms),
        "sweep": {key: list(values) for key, values in scenario.sweep.items()},
        "exclude": [dict(entry) for entry in scenario.exclude],
        "parameters": param_columns(scenario),
        "wrappers": list(scenario.wrappers),
        "seeds": list(scenario.seed_list()),
        "checkpoints": scenario.checkpoints,
        "runner": scenario.runner,
        "claims": [claim.name for claim in scenario.claims],
        "backend": backend,
        "format": table_format,
        "versions": package_versions(),
    }


def run_sweep(
    scenario: Scenario | str,
    out: str | Path,
    scale: str = "ci",
    overrides: Mapping[str, Any] | None = None,
    seeds: SeedsLike | None = None,
    backend: str | Backend = "pool",
    workers: int | None = None,
    address: str | None = None,
    seeds_per_job: int | None = None,
    table_format: str = DEFAULT_FORMAT,
    progress: bool = False,
    dry_run: bool = False,
    overwrite: bool = False,
) -> SweepSummary:
    """Run (or resume) a scenario's sweep into the directory ``out``.

    Args:
        scenario: a :class:`Scenario` or a registered name (``fedbandit list``).
        out: the results directory (created; reused to resume).
        scale: ``"ci"`` or ``"paper"``.
        overrides: environment keywords and/or ``seeds``/``checkpoints``/``sweep`` on top of the scale.
        seeds: the seeds, overriding the scenario's: a count ``n`` (runs ``0 .. n-1``), explicit seeds
            (``[100, 101]``, ``range(100, 110)``) or text (``"100:110"``, ``"3,7,9"``).
        backend: ``"inprocess"``, ``"pool"`` (default: all cores), ``"ray"``, or a :class:`Backend`.
        workers: pool size (pool backend).
        address: Ray cluster address (ray backend).
        seeds_per_job: split each cell's seeds into jobs of this many (default: one job per cell).
        table_format: ``"parquet"`` (default) or ``"csv"``: the format of the results tables (see
            :mod:`fedbandit_envs.bench.store`).
        progress: show the backend's bar of jobs done / total with elapsed time and time left (and per-job
            bars in process; see :mod:`fedbandit_envs.bench.backends`).
        dry_run: expand and count the jobs only; nothing is run or written.
        overwrite: sweep into a directory that holds a sweep of another scenario, replacing its ``config.json``,
            tables and report (its stored runs stay in ``parts/``); without it that is an error.

    Re-running into a directory whose tables the sweep then changes (other settings, more seeds, another format)
    removes the report and figures made from the earlier tables (:attr:`SweepSummary.removed`).
    """
    start = time.perf_counter()
    defined = env_keys(resolve_scenario(scenario, scale, None, seeds)) if overrides else set()
    scenario = resolve_scenario(scenario, scale, overrides, seeds)
    import_targets(scenario)
    runner = backend if isinstance(backend, Backend) else make_backend(backend, workers, address)
    store = ResultStore(out, table_format)
    jobs = expand(scenario, seeds_per_job)
    check_jobs(jobs, scenario, overrides, defined)
    if not dry_run:
        store.check_writable()  # the lock file goes in the directory
    with nullcontext() if dry_run else store.lock(f"a sweep of {scenario.name}"):
        _check_same_scenario(store.directory, scenario.name, overwrite)
        damaged = store.scan()
        todo = pending(jobs, store.finished())
        skipped = sum(len(job.seeds) for job in jobs) - sum(len(job.seeds) for job in todo)
        summary = SweepSummary(scenario, store.directory, jobs, todo, skipped, unchecksummed=store.unchecksummed())
        if dry_run:
            summary.damaged = [f"{error} (a run without --dry-run moves it to {DAMAGED}/)" for error in damaged]
            _warn(summary.damaged)
            return summary
        moved = store.move_aside()
        summary.damaged = [f"{error}; moved to {path}, its runs run again" for error, path in zip(damaged, moved)]
        _warn(summary.damaged)
        earlier = store.table_checksums()
        store.write_config(sweep_config(scenario, scale, overrides, runner.name, store.format))
        store.mark_tables_stale(
            f"a sweep of {scenario.name} into {str(store.directory)!r} started at {time.strftime('%Y-%m-%d %H:%M:%S')} "
            "and did not finish, so these tables (from an earlier sweep) may lack runs of config.json; run the same "
            f"sweep again or `fedbandit sweep --repair --out {store.directory}`"
        )
        with closing(runner.run(todo, progress=progress, label=scenario.name)) as results:  # interrupted: stop now
            for result in results:
                try:
                    check_result(result)  # a part never lacks a seed
                except ValueError as error:
                    raise JobFailed(result.job, error) from error
                store.save_part(result)
                summary.sim_time += result.sim_time
        summary.tables = store.write_tables(store.collect(jobs))
        if store.table_checksums() != earlier:
            summary.removed = store.remove_report()
    summary.wall_time = time.perf_counter() - start
    return summary


def _check_same_scenario(directory: Path, name: str, overwrite: bool) -> None:
    """Raise ValueError if ``directory`` holds a sweep of another scenario than ``name`` (unless ``overwrite``)."""
    recorded = load_config(directory).get("scenario")
    if recorded is not None and recorded != name and not overwrite:
        raise ValueError(
            f"{str(directory)!r} holds a sweep of {recorded!r} (its config.json), not of {name!r}; sweep into "
            "another directory (--out), or pass --overwrite (Python: overwrite=True) to replace that sweep's "
            "config, tables and report (its stored runs stay in parts/)"
        )


def _warn(lines: list[str]) -> None:
    for line in lines:
        warnings.warn(f"damaged part: {line}", DamagedPartWarning, stacklevel=3)


def repair_sweep(
    out: str | Path,
    backend: str | Backend = "pool",
    workers: int | None = None,
    address: str | None = None,
    seeds_per_job: int | None = None,
    progress: bool = False,
    dry_run: bool = False,
) -> SweepSummary:
    """Repair the sweep in ``out``: verify every part, move damaged ones aside, run what is missing, rebuild tables.

    The scenario, scale, overrides, seeds and table format come from ``out/config.json``; the registered
    scenario must still match the recorded one (algorithms, environment keywords and sweep), so the
    repair re-runs exactly the sweep that was recorded. Arguments as in :func:`run_sweep`.
    """
    config = load_config(out)
    if not config:
        raise ValueError(f"no config.json in {str(out)!r}; --repair needs the directory of an earlier sweep (--out)")
    try:
        name, scale, overrides, seeds = config["scenario"], config["scale"], config["overrides"], config["seeds"]
    except KeyError as error:
        raise ValueError(f"config.json in {str(out)!r} lacks {error}; run the sweep command again instead") from error
    if "seeds" in overrides:  # given with --set seeds=...: the overrides bring them
        seeds = None
    scenario = resolve_scenario(name, scale, overrides, seeds)
    recorded = sweep_config(scenario, scale, overrides, "", recorded_format(config))
    for key in ("algorithms", "env_kwargs", "sweep", "seeds", "checkpoints", "wrappers"):
        if canonical_json(recorded[key]) != canonical_json(config.get(key)):
            raise ValueError(
                f"the {key} of scenario {name!r} registered now differ from those recorded in {out}/config.json "
                "(a changed catalogue, or a directory written by `fedbandit compare`); run the original command "
                "again instead of --repair"
            )
    return run_sweep(
        name,
        out,
        scale,
        overrides,
        seeds,
        backend=backend,
        workers=workers,
        address=address,
        seeds_per_job=seeds_per_job,
        table_format=recorded_format(config),
        progress=progress,
        dry_run=dry_run,
    )
