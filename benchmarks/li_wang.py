"""Li and Wang at paper scale: time per slot at N = 100 and N = 1000 clients, peak memory, API overheads.

Usage::

    python benchmarks/li_wang.py [--horizon 30000] [--repeats 3] [--variants async_1,sync_match_regret]
                                 [--clients 100,1000] [--api] [--out benchmarks/li_wang.json]
    python benchmarks/li_wang.py --quick         # T = 3000, one repeat

Rows (every number is measured; nothing is asserted):

* ``<variant>`` at N = 100 and N = 1000 (d = K = 25, T = ``--horizon``, one seed, the batched runner):
  every run is ``fedbandit_envs.run.run`` end to end (construction, reset, every slot, one
  checkpoint) in a fresh child process, which reports its wall time, C_T, R_T and its peak resident
  memory (``resource.getrusage``, ``ru_maxrss``; ``rss_base`` is the same before the run, after the
  imports). The repeats of all rows are interleaved; each row reports the median wall time and
  process CPU time (``time.process_time``, less sensitive to other jobs on a shared machine), the
  load average (1 min, from ``os.getloadavg``) at the start of its runs, and ``ratio`` (``cpu_ratio``)
  = median wall (CPU) time per slot at N = 1000 over that at N = 100. Variants: Async-LinUCB at gamma = 1, 2, 5, 8, inf,
  Async-LinUCB-AM (gamma = 5, heterogeneous clients, d_g = 12) and Sync-LinUCB at the two matched
  thresholds (``match_regret``: D = T / (N d log T); ``match_comm``: D = T / (d log T)).
* ``--api``: the environment alone with a trivial policy (arm 0, no messages) for ``--api-slots``
  slots through the batched core (``loop/core``) and through the ``FederatedLinear`` ParallelEnv
  (``loop/parallel``), and ``run_pettingzoo`` against the batched runner for Async gamma = 2 on the
  same slots: the price of the PettingZoo API at N = 1000.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

PAPER = {"num_arms": 25, "dimension": 25}

#: name -> (algorithm, keyword arguments, extra environment keywords)
VARIANTS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "async_1": ("async_linucb", {"gamma": 1.0}, {}),
    "async_2": ("async_linucb", {"gamma": 2.0}, {}),
    "async_5": ("async_linucb", {"gamma": 5.0}, {}),
    "async_8": ("async_linucb", {"gamma": 8.0}, {}),
    "async_inf": ("async_linucb", {"gamma": float("inf")}, {}),
    "async_am_5": ("async_linucb_am", {"gamma": 5.0}, {"mode": "heterogeneous"}),
    "sync_match_regret": ("sync_linucb", {"threshold": "match_regret"}, {}),
    "sync_match_comm": ("sync_linucb", {"threshold": "match_comm"}, {}),
}


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One run in this process: wall seconds, C_T, R_T and peak RSS (MiB)."""
    from fedbandit_envs.algorithms import resolve_factory
    from fedbandit_envs.run import run

    name, kwargs, env_extra = VARIANTS[spec["variant"]]
    algorithm = resolve_factory(name)
    env = {**PAPER, **env_extra, "num_clients": spec["clients"], "horizon": spec["horizon"]}
    rss_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start, cpu = time.perf_counter(), time.process_time()
    results = run(lambda: algorithm(**kwargs), env, [spec["seed"]], checkpoints=1)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    final = results.curves[-1]
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "C_T": float(final["messages"]),
        "R_T": float(final["group_regret"]),
        "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_base_mib": rss_base,
    }


def in_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Run :func:`child` in a fresh interpreter (so each peak RSS is that run's alone)."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def scaling(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The variant x N table: interleaved repeats, medians, ratios N_max / N_min per slot."""
    variants = args.variants.split(",") if args.variants else list(VARIANTS)
    clients = [int(n) for n in args.clients.split(",")]
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for repeat in range(args.repeats):
        for variant in variants:
            for n in clients:
                load = os.getloadavg()[0]
                out = in_child({"variant": variant, "clients": n, "horizon": args.horizon, "seed": 0})
                out["load"] = load
                runs.setdefault((variant, n), []).append(out)
                print(f"repeat {repeat} {variant} N={n}: {json.dumps(out)}", flush=True)
    rows = []
    for variant in variants:
        per_slot, cpu_per_slot = {}, {}
        for n in clients:
            done = runs[(variant, n)]
            wall = statistics.median(r["wall_s"] for r in done)
            cpu = statistics.median(r["cpu_s"] for r in done)
            per_slot[n], cpu_per_slot[n] = wall / args.horizon, cpu / args.horizon
            rows.append(
                {
                    "variant": variant,
                    "N": n,
                    "T": args.horizon,
                    "wall_s": round(wall, 2),
                    "walls": [round(r["wall_s"], 2) for r in done],
                    "us_per_slot": round(1e6 * per_slot[n], 1),
                    "cpu_s": round(cpu, 2),
                    "C_T": done[0]["C_T"],
                    "R_T": round(done[0]["R_T"], 1),
                    "peak_rss_mib": round(max(r["rss_mib"] for r in done)),
                    "rss_base_mib": round(min(r["rss_base_mib"] for r in done)),
                    "load": [round(min(r["load"] for r in done), 1), round(max(r["load"] for r in done), 1)],
                }
            )
        rows[-1]["ratio"] = round(per_slot[max(clients)] / per_slot[min(clients)], 2)
        rows[-1]["cpu_ratio"] = round(cpu_per_slot[max(clients)] / cpu_per_slot[min(clients)], 2)
        print(json.dumps(rows[-2:]), flush=True)
    return rows


def core_loop(slots: int) -> float:
    from fedbandit_envs.families.linear.env import LinearConfig, LinearCore

    core = LinearCore(LinearConfig(**PAPER, num_clients=1000, horizon=slots))
    core.reset([0])
    arm = np.zeros((1, 1), np.int64)
    start = time.perf_counter()
    while not core.done:
        core.pull(arm)
        core.communicate()
    return time.perf_counter() - start


def parallel_loop(slots: int) -> float:
    from fedbandit_envs.families.linear.env import FederatedLinear

    env = FederatedLinear(**PAPER, num_clients=1000, horizon=slots)
    observations, _ = env.reset(seed=0)
    start = time.perf_counter()
    while env.agents:
        active = [a for a, o in observations.items() if o["active"] and o["phase"] == 0]
        observations, *_ = env.step({a: 0 for a in active} if active else {})
    return time.perf_counter() - start


def api_rows(slots: int) -> list[dict[str, Any]]:
    """The environment loops and the PettingZoo runner against the batched one at N = 1000."""
    from agents.li_wang import AsyncLinUCB
    from fedbandit_envs.run import run, run_pettingzoo

    rows: list[dict[str, Any]] = []
    for name, loop in (("loop/core", core_loop), ("loop/parallel", parallel_loop)):
        load = os.getloadavg()[0]
        wall = loop(slots)
        rows.append({"row": name, "slots": slots, "wall_s": round(wall, 3), "load": round(load, 1)})
    env = {**PAPER, "num_clients": 1000, "horizon": slots}
    for name, runner in (("pettingzoo/async gamma=2", run_pettingzoo), ("batched/async gamma=2", run)):
        load = os.getloadavg()[0]
        start = time.perf_counter()
        runner(lambda: AsyncLinUCB(gamma=2.0), env, [0], checkpoints=1)
        rows.append(
            {"row": name, "slots": slots, "wall_s": round(time.perf_counter() - start, 2), "load": round(load, 1)}
        )
    for row in rows:
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--horizon", type=int, default=30000, help="T of every scaling run (default 30000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per row; the median is reported (default 3)")
    parser.add_argument("--variants", default="", help=f"comma-separated subset of {', '.join(VARIANTS)}")
    parser.add_argument("--clients", default="100,1000", help="the values of N (default 100,1000)")
    parser.add_argument("--quick", action="store_true", help="T = 3000 and one repeat")
    parser.add_argument("--api", action="store_true", help="also the API overhead rows")
    parser.add_argument("--api-slots", type=int, default=2000, help="slots of the API overhead rows")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/li_wang.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.quick:
        args.horizon, args.repeats = 3000, 1
    rows = scaling(args)
    api = api_rows(args.api_slots) if args.api else []
    meta = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
    }
    args.out.write_text(json.dumps({"meta": meta, "rows": rows, "api": api}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
