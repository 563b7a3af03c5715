"""CPU time per round of the procurement family (Solanki et al.) in two source trees, measured alternately.

Usage::

    python benchmarks/procurement.py --base /path/to/other/tree [--horizon 4000] [--repeats 3] [--block-instances 1]
    python benchmarks/procurement.py --profile solanki_pfcb [--agents 40] [--horizon 4000]

Every row is one ``fedbandit_envs.run.run(algorithm, env, [0], checkpoints=1, reference=None)`` (construction,
reset, the round loop and recording; no non-federated baseline) of NF, FCB and P-FCB (epsilon 1) at n = 10 and 40
agents, m = 30 producers, family U, ``agent_pool = 40``, instance seed 11, timed with ``time.process_time`` (CPU
time, so other people's load inflates it less than wall time). With ``--block-instances k`` each pass also
executes the jobs of ``solanki/exp3_uniform`` at the CI scale (``fedbandit_envs.bench.jobs.execute``, the
non-federated baseline included) for the first k of its 12 instance seeds, and extrapolates the whole block's CPU
time by 12 / k.

Each pass runs in a fresh subprocess whose ``PYTHONPATH`` is one tree (this file's tree, then ``--base``), the
passes alternating tree by tree ``--repeats`` times; the report gives the median of each row per tree, their
ratio and the load average before every pass. ``--profile`` prints the cProfile (CPU-time timer) of one run of
this tree instead. Benchmarks measure and report; nothing asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ALGORITHMS = {"nf": ("solanki_nf", {}), "fcb": ("solanki_fcb", {}), "pfcb": ("solanki_pfcb", {"epsilon": 1.0})}
AGENTS = (10, 40)
BLOCK = "solanki/exp3_uniform"
TREE = Path(__file__).resolve().parent.parent


def env_kwargs(num_agents: int, horizon: int) -> dict[str, Any]:
    """The benchmark's problem: family U, m = 30, nested agents from a pool of 40 (instance seed 11)."""
    return {
        "env": "procurement",
        "num_agents": num_agents,
        "num_producers": 30,
        "horizon": horizon,
        "instance": "uniform",
        "agent_pool": 40,
        "instance_seed": 11,
    }


def run_once(name: str, num_agents: int, horizon: int) -> float:
    """CPU seconds of one run of the algorithm ``name`` (a key of :data:`ALGORITHMS`)."""
    from fedbandit_envs.algorithms import make_algorithm
    from fedbandit_envs.run import run

    algorithm, kwargs = ALGORITHMS[name]
    started = time.process_time()
    run(
        lambda: make_algorithm(algorithm, **kwargs), env_kwargs(num_agents, horizon), [0], checkpoints=1, reference=None
    )
    return time.process_time() - started


def block_seconds(instances: int) -> float:
    """CPU seconds of the CI block of :data:`BLOCK` restricted to its first ``instances`` instance seeds."""
    from fedbandit_envs.bench.jobs import execute, expand, resolve_scenario

    jobs = [job for job in expand(resolve_scenario(BLOCK, "ci")) if job.point["env.instance_seed"] < instances]
    started = time.process_time()
    for job in jobs:
        execute(job)
    return time.process_time() - started


def worker(horizon: int, instances: int) -> dict[str, float]:
    """One pass in this process: microseconds per round of every row, and the block's CPU seconds."""
    for name in ALGORITHMS:
        run_once(name, AGENTS[0], 10)  # imports and first-call costs (scipy) out of the timed runs
    row = {}
    for name in ALGORITHMS:
        for n in AGENTS:
            row[f"{name} n={n}"] = 1e6 * run_once(name, n, horizon) / horizon
    if instances:
        row[f"{BLOCK} ci, {instances}/12 instances (s)"] = block_seconds(instances)
    return row


def one_pass(tree: Path, horizon: int, instances: int) -> dict[str, float]:
    """A :func:`worker` pass in a subprocess importing ``tree``."""
    command = [sys.executable, __file__, "--worker", "--horizon", str(horizon), "--block-instances", str(instances)]
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    output = subprocess.run(command, env=environment, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def profile(name: str, num_agents: int, horizon: int, top: int) -> None:
    """Print the cProfile (CPU-time timer) of one run of ``name``."""
    from fedbandit_envs.algorithms import make_algorithm
    from fedbandit_envs.run import run

    algorithm, kwargs = ALGORITHMS[name]
    factory = lambda: make_algorithm(algorithm, **kwargs)  # noqa: E731
    run(factory, env_kwargs(num_agents, 10), [0], reference=None)  # imports and first-call costs out of the profile
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    run(factory, env_kwargs(num_agents, horizon), [0], checkpoints=1, reference=None)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the other source tree (e.g. a checkout of main)")
    parser.add_argument("--horizon", type=int, default=4000, help="rounds per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="passes per tree")
    parser.add_argument("--block-instances", type=int, default=0, help=f"instances of {BLOCK} per pass (0: none)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "procurement.json")
    parser.add_argument("--profile", choices=sorted(ALGORITHMS), help="only profile one algorithm in this tree")
    parser.add_argument("--agents", type=int, default=40, help="agents of --profile")
    parser.add_argument("--top", type=int, default=25, help="rows of --profile")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 0 <= args.block_instances <= 12:
        parser.error(f"--block-instances must be in 0..12, got {args.block_instances}")
    if args.worker:
        print(json.dumps(worker(args.horizon, args.block_instances)))
        return 0
    if args.profile:
        profile(args.profile, args.agents, args.horizon, args.top)
        return 0
    if args.base is None:
        parser.error("--base is required to compare two trees (or use --profile)")
    trees = {"this": TREE, "base": args.base.resolve()}
    passes: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
    loads = []
    for repeat in range(args.repeats):
        for label, tree in trees.items():
            loads.append(os.getloadavg()[0])
            passes[label].append(one_pass(tree, args.horizon, args.block_instances))
            print(f"pass {repeat + 1} {label} (load {loads[-1]:.2f}): {passes[label][-1]}", flush=True)
    rows = []
    for key in passes["this"][0]:
        medians = {label: statistics.median(p[key] for p in runs) for label, runs in passes.items()}
        rows.append({"row": key, **medians, "base / this": medians["base"] / medians["this"]})
    machine = {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version()}
    report = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine,
        "trees": {label: str(tree) for label, tree in trees.items()},
        "horizon": args.horizon,
        "load_average_before_passes": loads,
        "rows": rows,
        "passes": passes,
    }
    args.out.write_text(json.dumps(report, indent=2))
    for row in rows:
        print(f"{row['row']:45s} base {row['base']:10.1f}  this {row['this']:10.1f}  ratio {row['base / this']:.2f}")
    print(f"medians of {args.repeats} passes per tree written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
