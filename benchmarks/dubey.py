"""Wall time of Dubey and Pentland at paper scale: one flooding trial, and Fig. 1(a)'s 100 trials.

Usage::

    python benchmarks/dubey.py trial [--gamma diameter] [--algorithm private|byzantine] [--seed 0] [--profile]
    python benchmarks/dubey.py fig1a [--trials 100]
    python benchmarks/dubey.py all --out benchmarks/dubey_results.json

``trial``: one paper-scale trial (M = 200, K = 5, ER(200, 0.1), T = 1000) of Private MA-UCB (dp_eps = 1) or
Byzantine-Proof MA-UCB (every agent byzantine, contam_eps = 1e-3, Q = point mass at 10), with ``gamma`` = the graph's
diameter (3 for these graphs) unless given. It reports the wall time of the slot loop, split into the population's
``act``, the core's ``step`` (channel, hooks, ledger) and the population's ``observe`` (flood receive and
aggregation), the logical copies the ledger counted (the spec's messages), the rows the channel routed, and copies
per second, in wall and in CPU seconds (CPU time does not depend on other processes sharing the machine).
``--profile`` adds the top functions of a cProfile run of the same loop.

``fig1a``: the scenario ``dubey/fig1a_private`` at paper scale (100 trials; gamma = 1, D20) through the scenario
runner, each algorithm's seeds as batched replicas; reports the wall and CPU time per algorithm and in total (the
target is under 2 minutes), the final group regret and the peak resident memory (``ru_maxrss``) of the process.

Benchmarks measure and report; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import resource
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.dubey import ByzantineProofUCB, PrivateMultiAgentUCB
from fedbandit_envs.bench.jobs import execute, expand, resolve_scenario
from fedbandit_envs.families.mab.env import FederatedMAB
from wrappers.faults import ByzantineAgents

PAPER = {"num_agents": 200, "num_arms": 5, "horizon": 1000, "topology": "erdos_renyi", "topology_params": {"p": 0.1}}


def _env(algorithm: str, seed: int) -> tuple[Any, Any]:
    """The wrapped environment of a trial and its core, reset with ``seed``."""
    env: Any = FederatedMAB(**PAPER)
    if algorithm == "byzantine":
        env = ByzantineAgents(env, contam_eps=1e-3, fraction=1.0)
    env.reset(seed=seed)
    return env, env.unwrapped.core


def trial(algorithm: str, gamma: int | None, seed: int, profile: bool) -> dict[str, Any]:
    """Time one paper-scale trial (see the module docstring)."""
    env, core = _env(algorithm, seed)
    diameter = core.topologies[0].diameter()
    gamma = diameter if gamma is None else gamma
    population = (
        PrivateMultiAgentUCB(gamma=gamma, dp_eps=1.0)
        if algorithm == "private"
        else ByzantineProofUCB(gamma=gamma, eps_alg=1e-3)
    )
    feedback = core.reset([seed], hooks=env.message_hooks())
    population.reset(core.context)
    phases = np.zeros(3)
    profiler = cProfile.Profile() if profile else None
    start, cpu = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    for _slot in range(core.config.horizon):
        t0 = time.perf_counter()
        action = population.act(core.current_step())
        t1 = time.perf_counter()
        feedback = core.play(action)
        t2 = time.perf_counter()
        population.observe(feedback)
        phases += (t1 - t0, t2 - t1, time.perf_counter() - t2)
    if profiler:
        profiler.disable()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    ledger = core.channel.ledger
    row = {
        "algorithm": algorithm,
        "gamma": gamma,
        "diameter": diameter,
        "seed": seed,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "act_s": round(float(phases[0]), 2),
        "step_s": round(float(phases[1]), 2),
        "observe_s": round(float(phases[2]), 2),
        "copies": int(ledger.messages[0]),
        "rows": int(ledger.copies[0]),
        "copies_per_s": round(float(ledger.messages[0]) / wall),
        "copies_per_cpu_s": round(float(ledger.messages[0]) / cpu),
        "group_regret": round(float(core.regret[0].sum()), 1),
        "load_average": round(os.getloadavg()[0], 2),
    }
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
        row["profile"] = text.getvalue()
    return row


def fig1a(trials: int) -> dict[str, Any]:
    """Time ``dubey/fig1a_private`` at paper scale with ``trials`` seeds (see the module docstring)."""
    scenario = resolve_scenario("dubey/fig1a_private", "paper", seeds=trials)
    rows, start, cpu_start = [], time.perf_counter(), time.process_time()
    for job in expand(scenario):
        cpu = time.process_time()
        outcome = execute(job)
        finals = [r["group_regret"] for r in outcome.results.curves if r["slot"] == scenario.env_kwargs["horizon"]]
        rows.append(
            {
                "algorithm": job.algorithm,
                "wall_s": round(outcome.sim_time, 1),
                "cpu_s": round(time.process_time() - cpu, 1),
                "mean_group_regret": round(float(np.mean(finals)), 1),
                "sd": round(float(np.std(finals)), 1),
            }
        )
        print(rows[-1], flush=True)
    total, total_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {
        "trials": trials,
        "total_s": round(total, 1),
        "total_cpu_s": round(total_cpu, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "load_average": round(os.getloadavg()[0], 2),
        "algorithms": rows,
    }


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("trial", "fig1a", "all"))
    parser.add_argument("--algorithm", choices=("private", "byzantine"), default=None)
    parser.add_argument("--gamma", default="diameter", help="an int, or 'diameter' (default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    gamma = None if args.gamma == "diameter" else int(args.gamma)
    report: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count(), "numpy": np.__version__}
    if args.what in ("trial", "all"):
        report["trials"] = []
        for algorithm in [args.algorithm] if args.algorithm else ["private", "byzantine"]:
            row = trial(algorithm, gamma, args.seed, args.profile)
            print(row.pop("profile", ""))
            print(row, flush=True)
            report["trials"].append(row)
    if args.what in ("fig1a", "all"):
        report["fig1a"] = fig1a(args.trials)
        fig = report["fig1a"]
        print(
            f"fig1a: {args.trials} trials in {fig['total_s']} s wall, {fig['total_cpu_s']} s CPU, peak RSS "
            f"{fig['peak_rss_mib']} MiB, load {fig['load_average']}",
            flush=True,
        )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
