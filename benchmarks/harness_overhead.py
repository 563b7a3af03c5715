"""Sweep overhead per job: harness time minus simulation time, per backend.

Usage::

    python benchmarks/harness_overhead.py [--points 10] [--horizon 200] [--seeds 3] [--backends inprocess,pool,ray]

A synthetic scenario (the ``suite/baselines`` algorithms on 10 agents x 20 arms, swept over ``points``
values of ``env.c2`` so that it has points x 3 jobs) is swept into a fresh directory with each backend.
For every sweep:

* ``sim`` is the sum over jobs of the time spent inside the runner (measured in the worker around the
  ``runner(...)`` call: building the env and population, the slot loop, recording);
* ``wall`` is the whole :func:`~fedbandit_envs.bench.sweep.run_sweep` call (expansion, backend start-up,
  pickling, storing each job's part file, rebuilding and writing the tables and ``config.json``);
* **overhead per job** = (``wall`` x ``workers`` - ``sim``) / jobs: the core-time the harness adds to each
  job (for the in-process backend, workers = 1, so it is simply (wall - sim) / jobs). For the pool and Ray
  it includes idle cores while the last jobs finish.

Also measured: a re-run of a finished sweep (every cell skipped: reading the part headers and rewriting
the tables), and the table format (CSV against the default, Parquet). Ray is initialised
before the timer starts (``ray.init(num_cpus=workers)``) and the reference agents are imported before
the first sweep; both one-off times are reported separately.
Nothing is asserted; the numbers are printed (and written as JSON with ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from fedbandit_envs.bench.backends import InProcessBackend, PoolBackend, RayBackend
from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario
from fedbandit_envs.bench.store import FORMATS
from fedbandit_envs.bench.sweep import run_sweep


def scenario(points: int, horizon: int, seeds: int) -> Scenario:
    """The synthetic scenario: three baselines, ``points`` values of ``env.c2``."""
    return Scenario(
        name="bench/overhead",
        paper="bench",
        description="harness overhead",
        env_kwargs={"num_agents": 10, "num_arms": 20, "horizon": horizon, "instance_seed": 0},
        algorithms={name: AlgorithmSpec(name) for name in ("random", "independent_ucb1", "full_sharing_ucb")},
        sweep={"env.c2": [1.0 + i for i in range(points)]},
        seeds=seeds,
        checkpoints=20,
    )


def measure(label: str, backend, workers: int, spec: Scenario, table_format: str, root: Path) -> dict:
    """Sweep ``spec`` with ``backend`` into a fresh directory, then re-run it; returns one row of numbers."""
    out = root / label
    start = time.perf_counter()
    summary = run_sweep(spec, out, backend=backend, table_format=table_format)
    wall = time.perf_counter() - start
    jobs = len(summary.jobs)
    start = time.perf_counter()
    rerun = run_sweep(spec, out, backend=backend, table_format=table_format)
    rerun_wall = time.perf_counter() - start
    assert rerun.jobs_run == []
    return {
        "backend": label,
        "workers": workers,
        "format": table_format,
        "jobs": jobs,
        "wall_s": wall,
        "sim_s": summary.sim_time,
        "overhead_ms_per_job": 1000 * (wall * workers - summary.sim_time) / jobs,
        "rerun_ms_per_job": 1000 * rerun_wall / jobs,
    }


def main() -> None:
    """Time every requested backend and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10, help="sweep points (jobs = points x 3 algorithms)")
    parser.add_argument("--horizon", type=int, default=200, help="slots per run")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per job (batched replicas)")
    parser.add_argument("--backends", default="inprocess,pool,ray", help="comma-separated backends to time")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    start = time.perf_counter()
    import agents  # noqa: F401  (one-off import of the reference agents, reported, not charged to the jobs)

    agents_import = time.perf_counter() - start
    spec = scenario(args.points, args.horizon, args.seeds)
    workers = os.cpu_count() or 1
    formats = sorted(FORMATS)  # csv, then parquet (the default, used for the pool and Ray)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for name in args.backends.split(","):
            if name == "inprocess":
                for table_format in formats:
                    rows.append(measure("inprocess", InProcessBackend(), 1, spec, table_format, root / table_format))
            elif name == "pool":
                rows.append(measure("pool", PoolBackend(workers), workers, spec, formats[-1], root))
            elif name == "ray":
                try:
                    import ray
                except ImportError:
                    print("ray is not installed: skipping the ray backend")
                    continue
                start = time.perf_counter()
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
                startup = time.perf_counter() - start
                try:
                    row = measure("ray", RayBackend(), workers, spec, formats[-1], root)
                finally:
                    ray.shutdown()
                rows.append({**row, "ray_init_s": startup})
    print(
        f"{platform.platform()}, python {platform.python_version()}, {workers} cores; "
        f"{args.points * 3} jobs of 10 agents x 20 arms x {args.horizon} slots x {args.seeds} seeds; "
        f"first import of agents {agents_import:.2f} s (not included)"
    )
    header = ("backend", "format", "jobs", "wall s", "sim s", "overhead ms/job", "re-run ms/job")
    print("{:10s} {:8s} {:>5s} {:>8s} {:>8s} {:>16s} {:>14s}".format(*header))
    for row in rows:
        print(
            f"{row['backend']:10s} {row['format']:8s} {row['jobs']:5d} {row['wall_s']:8.2f} {row['sim_s']:8.2f} "
            f"{row['overhead_ms_per_job']:16.1f} {row['rerun_ms_per_job']:14.1f}"
            + (f"   (ray.init {row['ray_init_s']:.1f} s, not included)" if "ray_init_s" in row else "")
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
