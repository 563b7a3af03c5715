"""Li and Wang at paper scale: wall time of one run (N = 1000, T = 30000, d = K = 25) and API overheads.

Usage::

    python benchmarks/li_wang.py [--quick] [--out benchmarks/li_wang.json]

Rows (every number is measured in this process; nothing is asserted):

* ``batched/<alg>``: ``fedbandit_envs.linear_runner.run`` end to end (construction, reset, every slot,
  one checkpoint) for one seed, and with B = 2 seeds as batched replicas (``B2``). Reports wall
  seconds, slots per second (B x T / wall), C_T (messages) and R_T (pseudo-regret).
* ``loop/core`` and ``loop/parallel``: the environment alone with a trivial policy (arm 0, no
  messages) for ``--api-slots`` slots: the batched core's act/report loop (what an AEC-native
  environment would have to do per turn, without any dict) against the ``FederatedLinear`` ParallelEnv
  with its active mask (an observation, reward, termination, truncation and info entry per client
  and step, two steps per slot). Their difference is the price of the parallel API at N = 1000.
* ``pettingzoo/async gamma=2``: ``run_pettingzoo`` (the public API path) for ``--api-slots`` slots.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

from agents.li_wang import AsyncLinUCB, SyncLinUCB
from fedbandit_envs.envs.linear import FederatedLinear, LinearConfig, LinearCore
from fedbandit_envs.linear_runner import run, run_pettingzoo

PAPER = {"num_clients": 1000, "num_arms": 25, "dimension": 25, "horizon": 30000}


def timed_run(name: str, factory, env: dict, seeds: list[int]) -> dict:
    start = time.perf_counter()
    results = run(factory, env, seeds, checkpoints=1)
    wall = time.perf_counter() - start
    rows = results.curves
    return {
        "row": name,
        "B": len(seeds),
        "slots": env["horizon"],
        "wall_s": round(wall, 2),
        "slots_per_s": round(len(seeds) * env["horizon"] / wall),
        "C_T": float(np.mean([r["messages"] for r in rows])),
        "R_T": round(float(np.mean([r["group_regret"] for r in rows])), 1),
    }


def core_loop(slots: int) -> float:
    core = LinearCore(LinearConfig(**{**PAPER, "horizon": slots}))
    core.reset([0])
    arm = np.zeros((1, 1), np.int64)
    start = time.perf_counter()
    while not core.done:
        core.pull(arm)
        core.communicate()
    return time.perf_counter() - start


def parallel_loop(slots: int) -> float:
    env = FederatedLinear(**{**PAPER, "horizon": slots})
    observations, _ = env.reset(seed=0)
    start = time.perf_counter()
    while env.agents:
        active = [a for a, o in observations.items() if o["active"] and o["phase"] == 0]
        observations, *_ = env.step({a: 0 for a in active} if active else {})
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="T = 3000 instead of 30000")
    parser.add_argument("--api-slots", type=int, default=2000, help="slots of the API overhead rows")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/li_wang.json"))
    args = parser.parse_args()
    env = {**PAPER, "horizon": 3000 if args.quick else PAPER["horizon"]}
    rows = []
    for name, factory in (
        ("batched/async gamma=2", lambda: AsyncLinUCB(gamma=2.0)),
        ("batched/async gamma=11", lambda: AsyncLinUCB(gamma=11.0)),
        ("batched/async gamma=1.1", lambda: AsyncLinUCB(gamma=1.1)),
        ("batched/sync D=10", lambda: SyncLinUCB(threshold=10.0)),
    ):
        rows.append(timed_run(name, factory, env, [0]))
        print(rows[-1], flush=True)
    rows.append(timed_run("batched/async gamma=2 B2", lambda: AsyncLinUCB(gamma=2.0), env, [0, 1]))
    print(rows[-1], flush=True)
    slots = args.api_slots
    for name, loop in (("loop/core", core_loop), ("loop/parallel", parallel_loop)):
        wall = loop(slots)
        rows.append({"row": name, "B": 1, "slots": slots, "wall_s": round(wall, 3), "slots_per_s": round(slots / wall)})
        print(rows[-1], flush=True)
    api_env = {**PAPER, "horizon": slots}
    start = time.perf_counter()
    api = run_pettingzoo(lambda: AsyncLinUCB(gamma=2.0), api_env, [0], checkpoints=1)
    wall = time.perf_counter() - start
    rows.append(
        {
            "row": "pettingzoo/async gamma=2",
            "B": 1,
            "slots": slots,
            "wall_s": round(wall, 2),
            "slots_per_s": round(slots / wall),
            "C_T": api.curves[-1]["messages"],
        }
    )
    print(rows[-1], flush=True)
    batched = timed_run("batched/async gamma=2 (same slots)", lambda: AsyncLinUCB(gamma=2.0), api_env, [0])
    rows.append(batched)
    print(rows[-1], flush=True)
    meta = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": __import__("os").cpu_count(),
    }
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
