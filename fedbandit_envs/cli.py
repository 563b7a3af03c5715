"""The ``fedbandit`` command line: list what is available, run algorithms and write results and a plot."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from fedbandit_envs.metrics import summarize
from fedbandit_envs.registration import pprint_registry
from fedbandit_envs.runner import ALGORITHMS, Results, run

DEFAULT_ALGORITHMS = ("random", "independent_ucb1", "full_sharing_ucb")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fedbandit", description="Federated multi-armed bandit environments.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list environment ids and algorithms")
    run_parser = commands.add_parser("run", help="run algorithms on FederatedMAB; write CSV tables and a regret plot")
    run_parser.add_argument(
        "--algorithms",
        nargs="+",
        default=list(DEFAULT_ALGORITHMS),
        help=f"names ({', '.join(sorted(ALGORITHMS))}) or module:Class paths",
    )
    run_parser.add_argument("--agents", type=int, default=10, help="number of agents M")
    run_parser.add_argument("--arms", type=int, default=20, help="number of arms K")
    run_parser.add_argument("--horizon", type=int, default=2000, help="number of slots T")
    run_parser.add_argument("--seeds", type=int, default=5, help="number of runs (seeds 0..n-1)")
    run_parser.add_argument("--topology", default="server", help="server, complete, ring, path, grid, erdos_renyi, ...")
    run_parser.add_argument("--instance", default="uniform", help="uniform or heterogeneous")
    run_parser.add_argument("--instance-seed", type=int, default=None, help="fix the instance across seeds")
    run_parser.add_argument("--c1", type=float, default=1.0, help="cost of an agent-server link per slot")
    run_parser.add_argument("--c2", type=float, default=1.0, help="cost of an agent-agent link per slot")
    run_parser.add_argument("--checkpoints", type=int, default=20, help="number of checkpoints per run")
    run_parser.add_argument("--out", type=Path, default=Path("results"), help="output directory")
    run_parser.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib needed)")
    run_parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def _run(args: argparse.Namespace) -> int:
    env_kwargs = {
        "num_agents": args.agents,
        "num_arms": args.arms,
        "horizon": args.horizon,
        "topology": args.topology,
        "instance": args.instance,
        "instance_seed": args.instance_seed,
        "c1": args.c1,
        "c2": args.c2,
    }
    seeds = list(range(args.seeds))
    results = Results()
    for algorithm in args.algorithms:
        results.extend(run(algorithm, env_kwargs, seeds, args.checkpoints, progress=not args.no_progress))
    paths = results.save(args.out)
    (args.out / "config.json").write_text(
        json.dumps({"env": env_kwargs, "algorithms": args.algorithms, "seeds": seeds}, indent=2)
    )
    final = [r for r in summarize(results.curves, "group_regret") if r["slot"] == args.horizon]
    costs = {r["algorithm"]: r["mean"] for r in summarize(results.curves, "cost") if r["slot"] == args.horizon}
    print(f"{'algorithm':28s} {'group regret (mean +- sem)':>28s} {'comm. cost':>12s}")
    for row in final:
        print(f"{row['algorithm']:28s} {row['mean']:18.1f} +- {row['sem']:6.1f} {costs[row['algorithm']]:12.1f}")
    for path in paths:
        print(f"wrote {path}")
    if not args.no_plot:
        from fedbandit_envs.plots import plot_regret

        print(f"wrote {plot_regret(results, args.out / 'regret.png')}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fedbandit`` command."""
    args = _parser().parse_args(argv)
    if args.command == "list":
        pprint_registry()
        print("Algorithms (fedbandit run --algorithms ...):")
        for name, path in ALGORITHMS.items():
            print(f"  {name:42s} {path}")
        return 0
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
