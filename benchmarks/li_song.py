"""Wall time of Li and Song's Fig. 4 scenario at full scale: CDP-MAB, M = 50, K = 100, T = 10^5, c1 = 25.

One run (seed 0) per epsilon in {0.1, 0.3, 0.5, 1} through :func:`agents.li_song.run` with the Laplace
DP wrapper (paper calibration, n_agg = 50), exactly as the scenario ``li_song/fig4_epsilon`` runs a seed.
Reports wall seconds and agent-slots per second (M T / wall) per run, the 20-seed batched run of one
epsilon (the scenario's paper scale), and with ``--profile`` where the time goes, by source area.

    python benchmarks/li_song.py                 # the four runs + the 20-seed batch
    python benchmarks/li_song.py --profile       # + cProfile of the epsilon = 0.1 run, by area and function
    python benchmarks/li_song.py --horizon 20000 # a quicker look

The target is <= 10 s per run on the reference machine (2 cores, shared). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import platform
import pstats
import time
from collections import defaultdict

import numpy as np

from agents.li_song import CDPMAB, run
from fedbandit_envs.bench import get
from wrappers.dp import LaplaceMessageDP

AREAS = {  # path fragment -> area of the code base
    "agents/li_song": "li_song agents (this issue)",
    "envs/mab_core": "core (mab_core.py)",
    "channel/ledger": "ledger",
    "channel/channel": "channel",
    "channel/messages": "messages",
    "fedbandit_envs/rewards": "rewards",
    "fedbandit_envs/runner": "runner",
    "wrappers/dp": "DP wrapper",
    "numpy": "numpy (called from everywhere)",
}


def fig4_env(horizon: int | None) -> dict:
    """The environment keywords of ``li_song/fig4_epsilon`` at paper scale (optionally another horizon)."""
    env = dict(get("li_song/fig4_epsilon").at_scale("paper").env_kwargs)
    if horizon is not None:
        env["horizon"] = horizon
    return env


def one_run(env: dict, epsilon: float, seeds: list[int]) -> tuple[float, dict]:
    """Wall seconds of one (batched) run and its final curve row."""
    wrapper = [lambda e: LaplaceMessageDP(e, epsilon=epsilon, calibration="paper", n_agg=env["num_agents"])]
    start = time.perf_counter()
    results = run(CDPMAB, env, seeds, checkpoints=1, wrappers=wrapper)
    return time.perf_counter() - start, results.curves[-1]


def profile(env: dict, epsilon: float, top: int) -> dict:
    """cProfile of one run: self time by area and the functions with the most self time."""
    profiler = cProfile.Profile()
    profiler.enable()
    one_run(env, epsilon, [0])
    profiler.disable()
    stats = pstats.Stats(profiler)
    by_area: dict[str, float] = defaultdict(float)
    functions = []
    for (path, line, name), (_, calls, self_time, cumulative, _) in stats.stats.items():
        area = next((label for fragment, label in AREAS.items() if fragment in path), "other (python, pettingzoo)")
        by_area[area] += self_time
        functions.append((self_time, cumulative, calls, f"{path.split('site-packages/')[-1]}:{line}({name})"))
    total = sum(by_area.values())
    functions.sort(reverse=True)
    return {
        "total_self_seconds": total,
        "by_area": {k: round(v, 3) for k, v in sorted(by_area.items(), key=lambda kv: -kv[1])},
        "top_functions": [
            {"self_s": round(s, 3), "cumulative_s": round(c, 3), "calls": n, "function": f}
            for s, c, n, f in functions[:top]
        ],
    }


def main() -> None:
    """Run the benchmark and print a JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=None, help="override T (default: the paper's 10^5)")
    parser.add_argument("--profile", action="store_true", help="also profile the epsilon = 0.1 run")
    parser.add_argument("--top", type=int, default=15, help="functions listed by the profile")
    parser.add_argument("--batch-seeds", type=int, default=20, help="seeds of the batched paper-scale run (0: skip)")
    args = parser.parse_args()
    env = fig4_env(args.horizon)
    agent_slots = env["num_agents"] * env["horizon"]
    report: dict = {
        "machine": {"python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()},
        "env": env,
        "runs": [],
    }
    for epsilon in (0.1, 0.3, 0.5, 1.0):
        wall, row = one_run(env, epsilon, [0])
        report["runs"].append(
            {
                "epsilon": epsilon,
                "wall_s": round(wall, 3),
                "agent_slots_per_s": round(agent_slots / wall),
                "rounds": row["rounds_done"],
                "group_regret": round(row["group_regret"], 1),
                "cost": row["cost"],
            }
        )
    if args.batch_seeds:
        seeds = list(range(args.batch_seeds))
        wall, _ = one_run(env, 1.0, seeds)
        report["batched"] = {
            "epsilon": 1.0,
            "seeds": len(seeds),
            "wall_s": round(wall, 3),
            "agent_slots_per_s": round(len(seeds) * agent_slots / wall),
        }
    if args.profile:
        report["profile_epsilon_0.1"] = profile(env, 0.1, args.top)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
