"""Wall time of ``run`` per family and path, optionally against another revision of the code in one run.

Every case is one ``run(algorithm, env_kwargs, seeds, checkpoints=1, batched=...)`` call in a fresh
Python process (so import caches and allocator state never favour one tree), timed around the call
only, twice: the first (cold) call includes what is imported and built once per process (the agents,
SciPy's modules), the second (warm) is the simulation alone; the ratio is of the warm times, the cold
ratio beside it. With ``--compare-with DIR`` (a checkout of another revision, e.g. ``git worktree add /tmp/old
<rev>``) every case alternates between that tree and this one, ``--repeats`` times each, and the table
gives the median of each and their ratio (this / other), with the load average beside it. Older
revisions had one runner per family (``fedbandit_envs.runner``, ``linear_runner``, ``procurement_runner``);
the worker calls whichever the tree has.

Usage::

    python benchmarks/family_speed.py --repeats 5 [--compare-with /tmp/old] [--out benchmarks/results/family_speed.csv]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

MAB = {"num_agents": 20, "num_arms": 10, "horizon": 5000}
MAB_SMALL = {"num_agents": 10, "num_arms": 10, "horizon": 2000}
LINEAR = {"num_clients": 100, "num_arms": 10, "dimension": 10, "horizon": 5000}
PROCUREMENT = {"num_agents": 10, "num_producers": 10, "horizon": 2000}

#: (case name, family, algorithm, env kwargs, seeds, batched).
CASES: list[tuple[str, str, str, dict, list[int], bool]] = [
    ("mab/independent_ucb1/batched", "mab", "independent_ucb1", MAB, list(range(8)), True),
    ("mab/full_sharing_ucb/batched", "mab", "full_sharing_ucb", MAB, list(range(8)), True),
    (
        "mab/gossip_ucb/batched",
        "mab",
        "gossip_ucb",
        {**MAB, "topology": "ring", "gossip": "uniform_edge"},
        list(range(8)),
        True,
    ),
    ("mab/cdp_mab/batched", "mab", "cdp_mab", {**MAB, "instance_seed": 0}, list(range(8)), True),
    ("mab/full_sharing_ucb/pettingzoo", "mab", "full_sharing_ucb", MAB_SMALL, [0], False),
    ("mab/cdp_mab/pettingzoo", "mab", "cdp_mab", {**MAB_SMALL, "instance_seed": 0}, [0], False),
    ("linear/async_linucb/batched", "linear", "async_linucb", LINEAR, list(range(4)), True),
    ("linear/sync_linucb/batched", "linear", "sync_linucb", LINEAR, list(range(4)), True),
    (
        "linear/async_linucb/pettingzoo",
        "linear",
        "async_linucb",
        {**LINEAR, "num_clients": 20, "horizon": 1000},
        [0],
        False,
    ),
    ("procurement/solanki_pfcb/batched", "procurement", "solanki_pfcb", PROCUREMENT, list(range(4)), True),
    ("procurement/solanki_pfcb/pettingzoo", "procurement", "solanki_pfcb", {**PROCUREMENT, "horizon": 500}, [0], False),
]

WORKER = r"""
import json, sys, time
family, algorithm, env, seeds, batched = json.loads(sys.argv[1])
try:
    from fedbandit_envs.run import run
    extra = {"reference": None} if family == "procurement" else {}
except ImportError:  # a revision with one runner module per family
    from importlib import import_module
    module = {"mab": "runner", "linear": "linear_runner", "procurement": "procurement_runner"}[family]
    run = import_module(f"fedbandit_envs.{module}").run
    extra = {"frr_reference": None} if family == "procurement" else {}
walls = []
for _ in range(2):  # cold: the first call, with what it imports and builds once; warm: the same call again
    start = time.perf_counter()
    results = run(algorithm, env, seeds, checkpoints=1, batched=batched, **extra)
    walls.append(time.perf_counter() - start)
cold, warm = walls
print(json.dumps({"cold": cold, "wall": warm, "regret": sorted(row["group_regret"] for row in results.curves)}))
"""


def measure(tree: Path, case: tuple) -> dict:
    """One timed call of ``case`` in a fresh process importing ``tree``."""
    _, family, algorithm, env, seeds, batched = case
    done = subprocess.run(
        [sys.executable, "-c", WORKER, json.dumps([family, algorithm, env, seeds, batched])],
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tree,  # ``python -c`` puts its working directory first on sys.path: the tree, not the caller's
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run every case, alternating trees, and print (and optionally write) the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--compare-with", type=Path, help="a checkout of another revision")
    parser.add_argument("--only", help="run only cases whose name contains this text")
    parser.add_argument("--out", type=Path, help="write the table as CSV")
    args = parser.parse_args()
    trees = {"this": HERE} | ({"other": args.compare_with.resolve()} if args.compare_with else {})
    rows = []
    for case in CASES:
        if args.only and args.only not in case[0]:
            continue
        walls: dict[str, list[float]] = {name: [] for name in trees}
        colds: dict[str, list[float]] = {name: [] for name in trees}
        regret: dict[str, list[float]] = {}
        loads = []
        for _ in range(args.repeats):
            for name, tree in trees.items():
                result = measure(tree, case)
                walls[name].append(result["wall"])
                colds[name].append(result["cold"])
                regret[name] = result["regret"]
                loads.append(os.getloadavg()[0])
        row = {"case": case[0], "this_s": round(statistics.median(walls["this"]), 3)}
        row["this_cold_s"] = round(statistics.median(colds["this"]), 3)
        if "other" in trees:
            row["other_s"] = round(statistics.median(walls["other"]), 3)
            row["other_cold_s"] = round(statistics.median(colds["other"]), 3)
            row["ratio"] = round(row["this_s"] / row["other_s"], 3)
            row["cold_ratio"] = round(row["this_cold_s"] / row["other_cold_s"], 3)
            row["same_regret"] = regret["this"] == regret["other"]
        row["load_median"] = round(statistics.median(loads), 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
