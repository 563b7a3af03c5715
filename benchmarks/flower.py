"""Wall time per slot and per round: a federation on Flower against the simulator.

Usage::

    python benchmarks/flower.py [--agents 10,100] [--horizon 30] [--engine-horizon 10] [--repeats 3] [--out flower.json]

FullSharingUCB (every agent uploads a sample and gets the pooled statistics back, every slot) on a
Bernoulli bandit with K = 10 arms, seed 0, played four ways:

* ``simulator/batched`` and ``simulator/pettingzoo``: :func:`fedbandit_envs.run.run` on its two paths;
* ``flower/local``: the Flower apps over :class:`fedbandit_envs.flower.LocalGrid` (every message through
  Flower's protobuf wire format, the clients in this process, no engine);
* ``flower/simulation``: Flower's simulation engine (Ray, one virtual SuperNode per agent, the default
  backend of :func:`fedbandit_envs.flower.run_flower`), timed without and with its start-up.

A *round* is one Flower message to every client and their replies (FullSharingUCB: one per slot, plus
the set-up round). Every case is timed end to end (construction included) ``--repeats`` times; the
median and the range are printed with the 1-minute load average. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from fedbandit_envs.flower import FederationSpec, run_flower, run_local
from fedbandit_envs.run import run


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def case(name: str, fn: Any, slots: int, repeats: int) -> dict[str, Any]:
    times, rounds = [], None
    for _ in range(repeats):
        seconds, out = timed(fn)
        times.append(seconds)
        rounds = getattr(out, "rounds", rounds)
    median = statistics.median(times)
    row = {
        "case": name,
        "slots": slots,
        "median_s": median,
        "min_s": min(times),
        "max_s": max(times),
        "ms_per_slot": 1000 * median / slots,
        "rounds": rounds,
        "ms_per_round": 1000 * median / rounds if rounds else None,
        "load": os.getloadavg()[0],
    }
    per_round = f"{row['ms_per_round']:9.1f}" if rounds else "        -"
    print(
        f"{name:34s} T={slots:4d} median {median:8.2f} s [{min(times):.2f}-{max(times):.2f}] "
        f"{row['ms_per_slot']:9.1f} ms/slot {per_round} ms/round  load {row['load']:.1f}",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="10,100", help="comma-separated numbers of agents N")
    parser.add_argument("--horizon", type=int, default=30, help="slots of the simulator and local-grid runs")
    parser.add_argument("--engine-horizon", type=int, default=10, help="slots of the simulation-engine runs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    args = parser.parse_args()
    rows = []
    for n in [int(x) for x in args.agents.split(",")]:
        env = {"num_agents": n, "num_arms": 10, "horizon": args.horizon}
        short = {**env, "horizon": args.engine_horizon}
        spec, engine_spec = FederationSpec("full_sharing_ucb", env, 0), FederationSpec("full_sharing_ucb", short, 0)
        rows.append(
            case(
                f"simulator/batched N={n}",
                lambda env=env: run("full_sharing_ucb", env, [0], 1, batched=True, reference=None),
                args.horizon,
                args.repeats,
            )
        )
        rows.append(
            case(
                f"simulator/pettingzoo N={n}",
                lambda env=env: run("full_sharing_ucb", env, [0], 1, batched=False, reference=None),
                args.horizon,
                args.repeats,
            )
        )
        rows.append(case(f"flower/local N={n}", lambda s=spec: run_local(s, 1)[0], args.horizon, args.repeats))
        rows.append(
            case(f"flower/simulation N={n}", lambda s=engine_spec: run_flower(s, 1), args.engine_horizon, args.repeats)
        )
        # the engine's start-up (Ray, SuperNodes, set-up round): a one-slot run
        one = FederationSpec("full_sharing_ucb", {**env, "horizon": 1}, 0)
        rows.append(case(f"flower/simulation T=1 N={n}", lambda s=one: run_flower(s, 1), 1, args.repeats))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
