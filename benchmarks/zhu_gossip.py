"""Wall time of Zhu et al.'s S-A experiment at paper scale through the batched runner, and where the time goes.

S-A (spec zhu-gossip-ucb §4.2): N = 3 agents, M = 5 arms, K3, Gaussian observations, the fixed instance of the
``zhu/sa_epsilon`` scenario, Fed_UCB at ε in {1, 2, 5} and ε = ∞, 100 trials, T = 10⁶ main rounds (+ 5 warm-up
slots). Every ε is one :func:`fedbandit_envs.run.run_batched` call with the 100 trials as replicas. ε = ∞ is played
by Gossip_UCB (Fed_UCB at ε = ∞ is the same trajectory bit for bit, tests/test_zhu.py) unless ``--inf-as-fed``.
With ``--workers W`` the epsilons run in W processes (each ε is still one batched run of all trials, so every result
is the one a single process gives); the reported total is the wall time of the whole set.

Usage (from the repository root)::

    python benchmarks/zhu_gossip.py --workers 2              # full scale: T = 1e6, 100 trials, 4 epsilons, 2 cores
    python benchmarks/zhu_gossip.py --horizon 100000         # a fraction; wall times are extrapolated linearly to 1e6
    python benchmarks/zhu_gossip.py --timers --profile-slots 5000    # wall time per component (B = 100)
    python benchmarks/zhu_gossip.py --timers --trials 400 --profile-slots 2000    # the same at B = 400
    python benchmarks/zhu_gossip.py --profile --profile-slots 2000   # cProfile own time per source file (B = 100)

Each row also gives the peak resident memory (``ru_maxrss``) of the process that ran it (cumulative over the
epsilons a pool worker ran). Nothing here asserts a time; results are printed and written as JSON (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import json
import math
import os
import platform
import pstats
import resource
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from agents.zhu import FedUCB, GossipUCB
from fedbandit_envs.bench.catalogue.zhu import SCENARIOS, zhu_checkpoints
from fedbandit_envs.channel.channel import Channel
from fedbandit_envs.channel.ledger import Ledger
from fedbandit_envs.families.mab.core import FederatedMABCore
from fedbandit_envs.run import run_batched

PAPER_HORIZON = 1_000_000

#: Source files grouped into the components reported by ``--profile`` (first match wins).
COMPONENTS = (
    ("agent: agents/zhu.py", "agents/zhu.py"),
    ("DP: BinaryTreeBank (fedbandit_envs/privacy/mechanisms.py)", "fedbandit_envs/privacy/mechanisms.py"),
    ("DP: accountant helpers (fedbandit_envs/privacy/accountant.py)", "fedbandit_envs/privacy/accountant.py"),
    ("channel: channel.py (expand, gossip sampling)", "fedbandit_envs/channel/channel.py"),
    ("channel: ledger.py", "fedbandit_envs/channel/ledger.py"),
    ("channel: messages.py (MessageBatch)", "fedbandit_envs/channel/messages.py"),
    ("core: envs/mab_core.py", "fedbandit_envs/families/mab/core.py"),
    ("runner / recorder", "fedbandit_envs/run/loop.py"),
    ("rewards", "fedbandit_envs/rewards.py"),
    ("numpy (python-level wrappers)", "numpy"),
)


def env_kwargs(horizon: int) -> dict:
    """The S-A environment of the ``zhu/sa_epsilon`` scenario at paper scale, with ``horizon`` main rounds."""
    scenario = SCENARIOS["zhu/sa_epsilon"].at_scale("paper")
    return {**scenario.env_kwargs, "horizon": horizon + scenario.env_kwargs["num_arms"]}


def factory(epsilon: float, inf_as_fed: bool):
    """The population of one epsilon."""
    if math.isinf(epsilon) and not inf_as_fed:
        return GossipUCB
    return lambda: FedUCB(epsilon=epsilon)


def time_epsilon(epsilon: float, horizon: int, trials: int, inf_as_fed: bool, progress: bool) -> dict:
    """Run one epsilon over all trials; wall time and the final regret summary."""
    env = env_kwargs(horizon)
    num_arms = env["num_arms"]
    label = f"eps={epsilon:g}"
    start, cpu_start = time.perf_counter(), time.process_time()
    results = run_batched(
        factory(epsilon, inf_as_fed),
        env,
        list(range(trials)),
        checkpoints=zhu_checkpoints(horizon, num_arms, count=10),
        progress=progress,
        label=label,
    )
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    warmup = {r["seed"]: r["mean_regret"] for r in results.curves if r["slot"] == num_arms}
    final = np.array([r["mean_regret"] - warmup[r["seed"]] for r in results.curves if r["slot"] == env["horizon"]])
    half = env["horizon"] - horizon // 2
    mid = {r["seed"]: r["mean_regret"] - warmup[r["seed"]] for r in results.curves if r["slot"] == half}
    return {
        "epsilon": epsilon,
        "algorithm": "GossipUCB" if math.isinf(epsilon) and not inf_as_fed else "FedUCB",
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "us_per_slot": 1e6 * seconds / env["horizon"],
        "regret_mean": float(final.mean()),
        "regret_min": float(final.min()),
        "regret_max": float(final.max()),
        "ratio_T_over_half": float(np.mean([f / mid[s] for s, f in zip(sorted(warmup), final)])),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def profile(epsilon: float, slots: int, trials: int, inf_as_fed: bool) -> list[tuple[str, float]]:
    """cProfile of ``slots`` slots with ``trials`` replicas; seconds of own time per component."""
    env = env_kwargs(slots)
    profiler = cProfile.Profile()
    profiler.enable()
    run_batched(factory(epsilon, inf_as_fed), env, list(range(trials)), checkpoints=1)
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    totals: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, tottime, _, _) in stats.items():
        name = next((label for label, key in COMPONENTS if key in filename.replace(os.sep, "/")), None)
        totals[name or ("numpy C / builtins" if filename == "~" else "other python")] += tottime
    return sorted(totals.items(), key=lambda kv: -kv[1])


#: Methods timed by ``--timers`` (inclusive wall time; indentation shows nesting).
TIMED = (
    ("population.act (decision + MessageBatch construction)", GossipUCB, "act"),
    ("  GossipUCB._messages (2 MessageBatch per slot)", GossipUCB, "_messages"),
    ("population.observe", GossipUCB, "observe"),
    ("  GossipUCB._read_inbox", GossipUCB, "_read_inbox"),
    ("  FedUCB._pulled_means (one BinaryTreeBank.add of B*N trees)", FedUCB, "_pulled_means"),
    ("core.step (total)", FederatedMABCore, "step"),
    ("  channel.prepare (validate, expand NEIGHBOURS)", Channel, "prepare"),
    ("  channel.transmit", Channel, "transmit"),
    ("    ledger.transmit (queues; the bulk tallies run inside it)", Ledger, "transmit"),
    ("  channel.close_slot -> ledger.close_slot (queues the slot's links)", Ledger, "close_slot"),
    ("  channel.sample_gossip_partners", Channel, "sample_gossip_partners"),
)


@contextlib.contextmanager
def timers(totals: dict[str, float]):
    """Patch the methods of :data:`TIMED` to add their inclusive wall time to ``totals``."""
    originals = []
    for label, owner, name in TIMED:
        original = owner.__dict__[name]

        def timed(*args, _original=original, _label=label, **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                totals[_label] += time.perf_counter() - start

        functools.update_wrapper(timed, original)
        originals.append((owner, name, original))
        setattr(owner, name, timed)
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def time_components(epsilon: float, slots: int, trials: int, inf_as_fed: bool) -> tuple[float, dict[str, float]]:
    """Wall time of a ``slots``-slot run with ``trials`` replicas, and the inclusive time of each timed method."""
    totals: dict[str, float] = defaultdict(float)
    with timers(totals):
        start = time.perf_counter()
        run_batched(factory(epsilon, inf_as_fed), env_kwargs(slots), list(range(trials)), checkpoints=1)
        wall = time.perf_counter() - start
    return wall, dict(totals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=PAPER_HORIZON, help="main rounds T (paper: 1e6)")
    parser.add_argument("--trials", type=int, default=100, help="replicas per epsilon (paper: 100)")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0, 5.0, math.inf])
    parser.add_argument("--inf-as-fed", action="store_true", help="play epsilon = inf with FedUCB (tree path)")
    parser.add_argument("--profile", action="store_true", help="profile instead of timing")
    parser.add_argument("--timers", action="store_true", help="wall time per component instead of timing")
    parser.add_argument("--profile-slots", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=1, help="processes the epsilons are spread over")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="write the measurements as JSON")
    args = parser.parse_args()
    machine = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()}
    if args.timers:
        report = {}
        for epsilon in args.epsilons:
            wall, totals = time_components(epsilon, args.profile_slots, args.trials, args.inf_as_fed)
            print(
                f"\neps={epsilon:g}: {args.profile_slots} slots x {args.trials} replicas: {wall:.2f} s wall, "
                f"{1e6 * wall / args.profile_slots:.0f} us/slot"
            )
            for label, _, _ in TIMED:
                if label in totals:
                    seconds = totals[label]
                    print(
                        f"  {label:70s} {1e6 * seconds / args.profile_slots:8.1f} us/slot {100 * seconds / wall:5.1f} %"
                    )
            report[str(epsilon)] = {"wall": wall, "components": totals}
        if args.out:
            args.out.write_text(json.dumps({"machine": machine, "timers": report}, indent=2))
        return
    if args.profile:
        report = {}
        for epsilon in args.epsilons:
            parts = profile(epsilon, args.profile_slots, args.trials, args.inf_as_fed)
            total = sum(s for _, s in parts)
            print(f"\neps={epsilon:g}: {args.profile_slots} slots x {args.trials} replicas, {total:.2f} s profiled")
            for name, seconds in parts:
                per_slot = 1e6 * seconds / args.profile_slots
                print(f"  {name:55s} {seconds:7.2f} s {100 * seconds / total:5.1f} %  {per_slot:8.1f} us/slot")
            report[str(epsilon)] = parts
        if args.out:
            args.out.write_text(json.dumps({"machine": machine, "profile": report}, indent=2))
        return
    progress = not args.no_progress and args.workers == 1  # progress bars of parallel workers would interleave
    jobs = [(epsilon, args.horizon, args.trials, args.inf_as_fed, progress) for epsilon in args.epsilons]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) if args.workers > 1 else contextlib.nullcontext() as pool:
        results = pool.map(time_epsilon, *zip(*jobs)) if pool is not None else (time_epsilon(*job) for job in jobs)
        rows = []
        for epsilon, row in zip(args.epsilons, results):
            row["seconds_at_1e6"] = row["seconds"] * PAPER_HORIZON / args.horizon
            row["cpu_seconds_at_1e6"] = row["cpu_seconds"] * PAPER_HORIZON / args.horizon
            rows.append(row)
            print(
                f"eps={epsilon:>4g} {row['algorithm']:9s} {row['seconds']:9.1f} s ({row['us_per_slot']:.0f} us/slot; "
                f"{row['seconds_at_1e6']:.0f} s at T=1e6; CPU {row['cpu_seconds']:.1f} s, "
                f"{row['cpu_seconds_at_1e6']:.0f} s at T=1e6)  "
                f"R(T) mean {row['regret_mean']:.1f} "
                f"[{row['regret_min']:.1f}, {row['regret_max']:.1f}]  R(T)/R(T/2) {row['ratio_T_over_half']:.3f}  "
                f"peak RSS of its process {row['peak_rss_mib']:.0f} MiB",
                flush=True,
            )
    wall = time.perf_counter() - start
    scaled = wall * PAPER_HORIZON / args.horizon
    note = "" if args.horizon == PAPER_HORIZON else f" (measured at T={args.horizon}, extrapolated linearly)"
    print(
        f"wall {wall:.1f} s for {len(rows)} epsilons x {args.trials} trials in {args.workers} process(es) "
        f"(sum of the per-epsilon times {sum(r['seconds'] for r in rows):.1f} s); at T=1e6: {scaled:.0f} s = "
        f"{scaled / 60:.1f} min{note}; load average at the end {os.getloadavg()[0]:.2f}"
    )
    loads = [0.0] * args.workers
    for row in rows:  # the pool hands the epsilons, in the order given, each to the first worker that is free
        loads[loads.index(min(loads))] += row["cpu_seconds_at_1e6"]
    print(
        f"CPU at T=1e6: {sum(loads):.0f} s in total; on {args.workers} otherwise idle core(s) the set would take about "
        f"{max(loads):.0f} s = {max(loads) / 60:.1f} min (the busiest worker's CPU time)"
    )
    if args.out:
        payload = {
            "machine": machine,
            "horizon": args.horizon,
            "trials": args.trials,
            "workers": args.workers,
            "wall_seconds": wall,
            "rows": rows,
        }
        args.out.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
