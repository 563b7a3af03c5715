"""Paper-scale wall time of the Solanki et al. agents: n = 10 aggregators, m = 30 producers, T = 1e5 rounds.

Usage::

    python benchmarks/solanki.py [--quick] [--seeds 1] [--batched 20] [--out benchmarks/solanki.json]
    python benchmarks/solanki.py --profile solanki_pfcb [--horizon 20000]

Every row is ``fedbandit_envs.run.run(algorithm, env, seeds, checkpoints=1,
reference=None)`` end to end (construction, reset, the round loop and recording) on family U,
instance seed 0 (the paper's EXP1 setting), timed with ``time.perf_counter``:

* ``single``: one seed (B = 1), the target being <= 20 s per run at T = 1e5;
* ``batched``: ``--batched`` seeds as replicas of one batched core (reported per seed as well).

The oracle path is the vectorised one of the spec (§4.4): the greedy's fast path is one array operation
over all agents and replicas; only agents whose constraint binds run the per-row greedy. ``--quick`` uses
T = 2e4. FCBSync (messages every round, 9e6 per run) is timed at T = 2e4 only unless ``--full-sync``.
Each row also reports the mean regret per agent and the message count, so a timing is never of a
broken run. Benchmarks measure and report; nothing asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import os
import platform
import pstats
import time
from pathlib import Path

import numpy as np

from fedbandit_envs.run import run

ALGORITHMS = ("solanki_nf", "solanki_fcb", "solanki_pfcb", "solanki_fcb_sync")
ENV = {"num_agents": 10, "num_producers": 30, "instance": "uniform", "instance_seed": 0}


def measure(algorithm: str, horizon: int, seeds: list[int]) -> dict:
    """Time one ``run`` of ``algorithm`` over ``seeds`` (as replicas) and summarise its final row."""
    started = time.perf_counter()
    results = run(algorithm, {**ENV, "horizon": horizon}, seeds, checkpoints=1, reference=None)
    seconds = time.perf_counter() - started
    final = results.curves
    return {
        "algorithm": algorithm,
        "horizon": horizon,
        "replicas": len(seeds),
        "seconds": round(seconds, 2),
        "seconds_per_seed": round(seconds / len(seeds), 2),
        "us_per_round": round(1e6 * seconds / horizon, 1),
        "mean_regret_per_agent": round(float(np.mean([row["mean_regret"] for row in final])), 1),
        "messages": int(final[0]["messages"]),
    }


def profile(algorithm: str, horizon: int, top: int) -> None:
    """Print the cProfile of one run at ``horizon``."""
    profiler = cProfile.Profile()
    profiler.enable()
    run(algorithm, {**ENV, "horizon": horizon}, [0], checkpoints=1, reference=None)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="T = 2e4 instead of 1e5")
    parser.add_argument("--batched", type=int, default=0, help="also time this many seeds as one batched run")
    parser.add_argument("--full-sync", action="store_true", help="time FCBSync at the full horizon too")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "solanki.json")
    parser.add_argument("--profile", choices=ALGORITHMS, help="only profile one algorithm")
    parser.add_argument("--horizon", type=int, default=20_000, help="horizon of --profile")
    parser.add_argument("--top", type=int, default=25, help="rows of --profile")
    args = parser.parse_args(argv)
    if args.profile:
        profile(args.profile, args.horizon, args.top)
        return 0
    horizon = 20_000 if args.quick else 100_000
    rows = []
    for algorithm in ALGORITHMS:
        length = horizon if (algorithm != "solanki_fcb_sync" or args.full_sync) else 20_000
        rows.append({"row": "single", **measure(algorithm, length, [0])})
        print(rows[-1], flush=True)
        if args.batched and algorithm != "solanki_fcb_sync":
            rows.append({"row": "batched", **measure(algorithm, length, list(range(args.batched)))})
            print(rows[-1], flush=True)
    report = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "load_average": os.getloadavg(),
        "env": ENV,
        "rows": rows,
    }
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
