"""The ``fedbandit`` command line.

* ``fedbandit list``: environment ids, algorithms and the scenario catalogue.
* ``fedbandit run``: run algorithms on an environment of any family; write CSV tables and a regret plot.
* ``fedbandit sweep SCENARIO``: run a scenario's sweep (process pool, in process, or Ray); restartable.
* ``fedbandit plot DIR`` / ``fedbandit report DIR``: figures and a Markdown + HTML report of a sweep.
* ``fedbandit report --replication``: the replication report across all paper scenarios.
* ``fedbandit replicate``: sweep every paper scenario, then write the replication report.
* ``fedbandit compare --agent module:Class --scenario NAME``: benchmark your learner; leaderboard.

Every subcommand has ``--help``. Errors in the input (arguments, settings, unreadable or damaged
files) print one line, ``fedbandit <command>: error: ...``, and exit with status 2, before anything is
written; unexpected errors keep their traceback. An interrupt (Ctrl-C) prints one line saying what was
kept and exits with status 130; a sweep's finished jobs stay stored, so the same command resumes it.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fedbandit_envs.algorithms import registered_algorithms
from fedbandit_envs.metrics import summarize
from fedbandit_envs.protocol import make_population
from fedbandit_envs.registration import pprint_registry
from fedbandit_envs.run import Results, build_env, checkpoint_slots, family_of, run
from fedbandit_envs.seeding import resolve_seeds
from fedbandit_envs.validation import check_distinct

DEFAULT_ALGORITHMS = ("random", "independent_ucb1", "full_sharing_ucb")
#: The help of every ``--seeds`` option.
SEEDS_HELP = "seeds: a count N (runs 0..N-1), a half-open range START:STOP (100:110 = 100..109) or a list 3,7,9"
#: Jobs listed by ``--dry-run`` before the list is cut short.
DRY_RUN_LISTED = 30
ALLOW_INCOMPLETE_HELP = "use tables that lack runs or changed since written (the report says so at the top)"
REPORT_DIR_HELP = "where the per-paper reports (<paper>.md / .html and their figures) go; default <root>/replication"


def _parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as JSON when it parses (``horizon=200``, ``topology=ring``)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. horizon=200), got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _json_object(text: str) -> dict[str, Any]:
    """A JSON object given on the command line (constructor keywords)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"c\": 2}}', got {text!r} ({error})"
        ) from error
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object such as '{{\"c\": 2}}', got {text!r}")
    return value


def _add_sweep_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by sweep, compare and replicate: scale, overrides, backend."""
    parser.add_argument("--scale", choices=("ci", "paper"), default="ci", help="ci: minutes (default); paper: full")
    parser.add_argument("--seeds", default=None, help=f"{SEEDS_HELP}; default: the scale's")
    parser.add_argument(
        "--set",
        dest="overrides",
        type=_parse_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an environment keyword, seeds, checkpoints or the sweep (repeatable; VALUE is JSON or text, "
        'e.g. seeds=[100,101], seeds=100:110 or sweep={"alg.epsilon":[1,2]}; algorithm keywords are checked '
        "before anything is written)",
    )
    parser.add_argument(
        "--backend",
        choices=("inprocess", "pool", "ray"),
        default="pool",
        help="pool: local processes on all cores (default); inprocess: this process; ray: a Ray cluster",
    )
    parser.add_argument("--workers", type=int, default=None, help="pool size (default: all cores)")
    parser.add_argument("--address", default=None, help="Ray cluster address (auto, ray://head:10001); ray only")
    parser.add_argument("--cpus-per-job", type=float, default=1.0, help="CPUs each Ray task declares")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _add_env_settings(parser: argparse.ArgumentParser, example: str = "") -> None:
    """The ``--set KEY=VALUE`` option of an environment keyword (``args.settings``), shared by run and flower."""
    parser.add_argument(
        "--set",
        dest="settings",
        type=_parse_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"an environment keyword (repeatable; VALUE is JSON or text){example}",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fedbandit", description="Federated multi-armed bandit environments.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="list environment ids, algorithms and scenarios")
    run_parser = commands.add_parser(
        "run",
        help="run algorithms on an environment of any family; write CSV tables and a regret plot",
        description="Play registered algorithms (or module:Class paths) on one environment. The MAB options "
        "(--agents, --arms, --topology, --instance, --c1, --c2) set the mab family's keywords; any family's "
        "keywords are set with --set KEY=VALUE (e.g. --env procurement --set num_producers=10).",
    )
    run_parser.add_argument(
        "--algorithms",
        nargs="+",
        default=list(DEFAULT_ALGORITHMS),
        help="registered names (see fedbandit list) or module:Class paths (searched in the working directory too)",
    )
    run_parser.add_argument(
        "--env",
        default=None,
        help="environment name: mab, linear, replay, replay_log, procurement (default: the first algorithm's family)",
    )
    _add_env_settings(run_parser)
    run_parser.add_argument("--agents", type=int, default=None, help="mab: number of agents M (default 10)")
    run_parser.add_argument("--arms", type=int, default=None, help="mab: number of arms K (default 20)")
    run_parser.add_argument("--horizon", type=int, default=None, help="number of slots T (mab default 2000)")
    run_parser.add_argument("--seeds", default="5", help=f"{SEEDS_HELP} (default 5)")
    run_parser.add_argument("--topology", default=None, help="mab: server, complete, ring, grid, erdos_renyi, ...")
    run_parser.add_argument("--instance", default=None, help="mab: uniform or heterogeneous")
    run_parser.add_argument("--instance-seed", type=int, default=None, help="fix the instance across seeds")
    run_parser.add_argument("--c1", type=float, default=None, help="mab: cost of an agent-server link per slot")
    run_parser.add_argument("--c2", type=float, default=None, help="mab: cost of an agent-agent link per slot")
    run_parser.add_argument("--checkpoints", type=int, default=20, help="number of checkpoints per run")
    run_parser.add_argument("--out", type=Path, default=Path("results"), help="output directory")
    run_parser.add_argument("--no-plot", action="store_true", help="skip the PNG (no matplotlib needed)")
    run_parser.add_argument("--no-progress", action="store_true", help="hide progress bars")

    flower = commands.add_parser(
        "flower",
        help="run one algorithm as a Flower federation, one client per agent (needs the flower extra)",
        description="Run a server-based algorithm as a Flower federation: a ServerApp referees and drives the "
        "slots, one ClientApp per agent (see docs/deploying-with-flower.md). Prints the final regret and costs.",
    )
    flower.add_argument("algorithm", help="a registered name (see fedbandit list) or module:Class path")
    flower.add_argument(
        "--env", default=None, help="environment name: mab, linear or procurement (default: the algorithm's)"
    )
    _add_env_settings(flower, ", e.g. num_agents=10")
    flower.add_argument(
        "--wrappers",
        default="",
        help="message wrappers (DP) run as a client mod, as in a deployed run config: "
        "'laplace:epsilon=1.0,calibration=paper,n_agg=6' (several separated by ';'; names: laplace, gaussian, tree)",
    )
    flower.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    flower.add_argument(
        "--engine",
        choices=("simulation", "local"),
        default="simulation",
        help="simulation: Flower's simulation engine (Ray; default); local: every client in this process",
    )
    flower.add_argument("--checkpoints", type=int, default=20, help="number of checkpoints of the tables")
    flower.add_argument("--out", type=Path, default=None, help="write the result tables (CSV) to this directory")

    sweep = commands.add_parser(
        "sweep",
        help="run a scenario's sweep; restartable (finished runs are skipped)",
        description="Run every (point, algorithm) job of a scenario over its seeds and write a tidy results table. "
        "Re-running the same command resumes an interrupted sweep.",
    )
    sweep.add_argument("scenario", nargs="?", help="scenario name (fedbandit list); omitted with --repair")
    sweep.add_argument("--out", type=Path, default=None, help="results directory (default: results/<scenario>)")
    _add_sweep_options(sweep)
    sweep.add_argument("--seeds-per-job", type=int, default=None, help="split each cell's seeds into jobs of this size")
    sweep.add_argument(
        "--format", choices=("parquet", "csv"), default="parquet", help="format of the results tables (default parquet)"
    )
    sweep.add_argument("--dry-run", action="store_true", help="show the jobs and their count; run nothing")
    sweep.add_argument("--report", action="store_true", help="also write the figures and report")
    sweep.add_argument(
        "--overwrite",
        action="store_true",
        help="sweep into an --out that holds a sweep of another scenario, replacing its config, tables and report",
    )
    sweep.add_argument(
        "--repair",
        action="store_true",
        help="re-run the sweep recorded in --out DIR/config.json: verify every part, move damaged ones to "
        "DIR/damaged/, run what is missing and rebuild the tables",
    )

    plot = commands.add_parser("plot", help="draw a sweep's figures (PNG and SVG) into DIR/figures")
    plot.add_argument("directory", type=Path, help="a sweep's results directory")
    plot.add_argument("--allow-incomplete", action="store_true", help=ALLOW_INCOMPLETE_HELP)

    report = commands.add_parser("report", help="write report.md and report.html for a sweep (or --replication)")
    report.add_argument("directory", type=Path, nargs="?", help="a sweep's results directory")
    report.add_argument("--replication", action="store_true", help="replication report over all paper scenarios")
    report.add_argument("--root", type=Path, default=Path("results"), help="root of per-scenario results directories")
    report.add_argument("--report-dir", type=Path, default=None, help=f"with --replication: {REPORT_DIR_HELP}")
    report.add_argument("--allow-incomplete", action="store_true", help=ALLOW_INCOMPLETE_HELP)

    replicate = commands.add_parser(
        "replicate", help="sweep the paper scenarios, then write the per-paper and combined replication reports"
    )
    replicate.add_argument(
        "papers",
        nargs="*",
        metavar="PAPER",
        help="papers to replicate, named as the prefixes of their scenarios (`fedbandit list`); none: all",
    )
    replicate.add_argument("--root", type=Path, default=Path("results"), help="writes <root>/<scenario name>/")
    replicate.add_argument("--report-dir", type=Path, default=None, help=REPORT_DIR_HELP)
    _add_sweep_options(replicate)
    replicate.add_argument("--dry-run", action="store_true", help="count the jobs of every paper scenario; run nothing")

    compare = commands.add_parser("compare", help="benchmark your learner against a scenario's reference agents")
    compare.add_argument("--agent", required=True, help="module:Class of a Population or Agent subclass")
    compare.add_argument("--scenario", required=True, help="scenario name (fedbandit list)")
    compare.add_argument("--label", default=None, help="name of your learner in tables (default: the class name)")
    compare.add_argument("--agent-kwargs", type=_json_object, default={}, help='constructor keywords as JSON: {"c": 2}')
    compare.add_argument(
        "--out", type=Path, default=None, help="results directory (default: results/compare/<scenario>)"
    )
    compare.add_argument("--max-cost", type=float, default=None, help="leaderboard: rank only entries within this cost")
    compare.add_argument("--max-epsilon", type=float, default=None, help="leaderboard: rank only within this epsilon")
    compare.add_argument("--no-report", action="store_true", help="skip the figures and report")
    compare.add_argument(
        "--isolate-agents",
        action="store_true",
        help="run each agent of a per-agent learner in a process of its own, so they share only the channel",
    )
    compare.add_argument(
        "--path",
        type=Path,
        action="append",
        default=[],
        help="a directory to import the learner from (repeatable); the working directory is always searched",
    )
    _add_sweep_options(compare)
    return parser


#: The ``fedbandit run`` defaults of the mab family's keywords (other families use their environment's defaults).
MAB_RUN_DEFAULTS = {"num_agents": 10, "num_arms": 20, "horizon": 2000, "topology": "server", "instance": "uniform"}

#: ``fedbandit run`` options that set a keyword of the mab family only.
MAB_RUN_OPTIONS = {"agents": "num_agents", "arms": "num_arms", "topology": "topology", "instance": "instance"}
MAB_RUN_OPTIONS |= {"c1": "c1", "c2": "c2"}


#: ``fedbandit run`` options (argparse destinations) of environment keywords any family may take.
RUN_OPTIONS = {"env": "env", "horizon": "horizon", "instance_seed": "instance_seed"}


def _check_settings(args: argparse.Namespace, options: Mapping[str, str]) -> None:
    """Refuse ``--set KEY=VALUE`` of a keyword that a dedicated option (``options``: destination -> KEY) also sets.

    Either would be ignored silently; the error names both.
    """
    given = {key: option for option, key in options.items() if getattr(args, option) is not None}
    for key, value in args.settings:
        if key in given:
            option = given[key]
            shown = f"--{option.replace('_', '-')} {getattr(args, option)}"
            text = value if isinstance(value, str) else json.dumps(value)
            raise ValueError(f"{shown} and --set {key}={text} both set {key}; give only one of them")


def _run_env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The environment keywords of ``fedbandit run``: the mab options (mab family only), --horizon and --set."""
    _check_settings(args, {**MAB_RUN_OPTIONS, **RUN_OPTIONS})
    kwargs: dict[str, Any] = {"env": args.env} if args.env is not None else {}
    families = {
        algorithm: family_of(algorithm, make_population(algorithm), kwargs).name for algorithm in args.algorithms
    }
    if len(set(families.values())) > 1:
        listed = ", ".join(f"{algorithm}: {family}" for algorithm, family in families.items())
        raise ValueError(f"the algorithms play different families ({listed}); run each family separately")
    family = families[args.algorithms[0]]
    given = {key: getattr(args, option) for option, key in MAB_RUN_OPTIONS.items() if getattr(args, option) is not None}
    if family == "mab":
        kwargs |= {**MAB_RUN_DEFAULTS, **given}
    elif given:
        options = ", ".join(f"--{option}" for option, key in MAB_RUN_OPTIONS.items() if key in given)
        raise ValueError(
            f"{options} set(s) keywords of the mab family, but the environment is of the {family!r} family; "
            f"set its keywords with --set KEY=VALUE"
        )
    if args.horizon is not None:
        kwargs["horizon"] = args.horizon
    if args.instance_seed is not None:
        kwargs["instance_seed"] = args.instance_seed
    return kwargs | dict(args.settings)


def _run(args: argparse.Namespace) -> int:
    from fedbandit_envs.bench.compare import add_import_paths
    from fedbandit_envs.bench.store import ResultStore, check_writable

    add_import_paths([Path.cwd()])  # module:Class paths are found in the working directory, as with python -m
    check_distinct("--algorithms", args.algorithms, "each is run once over all the seeds; give each name once")
    env_kwargs = _run_env_kwargs(args)
    seeds = list(resolve_seeds(args.seeds))
    for algorithm in args.algorithms:  # every check of the settings, before anything runs or is written
        env, _ = build_env(algorithm, make_population(algorithm), env_kwargs)
        env.reset(seed=0)
    horizon = env.unwrapped.core.horizon
    checkpoint_slots(horizon, args.checkpoints)
    check_writable(args.out)
    results = Results()
    for algorithm in args.algorithms:
        results.extend(run(algorithm, env_kwargs, seeds, args.checkpoints, progress=not args.no_progress))
    paths = ResultStore(args.out, "csv").write_tables(results)  # with tables.json, as a sweep writes them
    description = f"fedbandit run of {', '.join(args.algorithms)} (no scenario, so no claims)"
    config = {"description": description, "env": env_kwargs, "algorithms": args.algorithms, "seeds": seeds}
    (args.out / "config.json").write_text(
        json.dumps({**config, "scale": "as given", "checkpoints": args.checkpoints}, indent=2, default=str)
    )
    curves = results.to_frame()
    final = curves[curves["slot"] == horizon]
    regret, cost = summarize(final, "group_regret"), summarize(final, "cost")
    print(f"{'algorithm':28s} {'group regret (mean +- sem)':>28s} {'cost (price units)':>18s}")
    for row, row_cost in zip(regret.to_dict("records"), cost["mean"]):
        sem = f"{row['sem']:6.1f}" if len(seeds) > 1 else "     -"  # no spread from one seed
        print(f"{row['algorithm']:28s} {row['mean']:18.1f} +- {sem} {row_cost:18.1f}")
    for path in paths:
        print(f"wrote {path}")
    if not args.no_plot:
        from fedbandit_envs.bench.plots import plot_regret

        print(f"wrote {plot_regret(results, args.out / 'regret.png')}")
    return 0


def _flower(args: argparse.Namespace) -> int:
    _check_settings(args, {"env": "env"})
    from fedbandit_envs.bench.store import ResultStore
    from fedbandit_envs.flower import FederationSpec, run_flower, run_local
    from fedbandit_envs.flower.deploy import wrappers_from_config

    env_kwargs = ({"env": args.env} if args.env else {}) | dict(args.settings)
    spec = FederationSpec(args.algorithm, env_kwargs, args.seed, wrappers_from_config(args.wrappers))
    done = run_local(spec, args.checkpoints)[0] if args.engine == "local" else run_flower(spec, args.checkpoints)
    last = done.results.curves[-1]
    print(
        f"{spec.name} on Flower ({args.engine}), seed {args.seed}: group regret {last['group_regret']:.1f}, "
        f"{last['messages']} messages, cost {last['cost']:.1f}"
    )
    for path in ResultStore(args.out, "csv").write_tables(done.results) if args.out is not None else []:
        print(f"wrote {path}")
    return 0


def _list() -> int:
    from fedbandit_envs.bench.jobs import resolve_scenario
    from fedbandit_envs.bench.scenarios import get, names

    pprint_registry()
    print("Algorithms (fedbandit run --algorithms ...):")
    for name, spec in registered_algorithms().items():
        factory = f"{spec.factory.__module__}:{spec.factory.__qualname__}"
        print(f"  {name:24s} {', '.join(spec.families):12s} {factory}")
    print("Scenarios (fedbandit sweep NAME; jobs x seeds at the ci scale):")
    for name in names():
        try:
            ci = resolve_scenario(get(name), "ci")
        except ValueError as error:  # list the rest of the catalogue even if one entry is broken
            print(f"  {name:34s} {'invalid':>8s}  {error}")
            continue
        size = f"{len(ci.points()) * len(ci.algorithms)} x {len(ci.seed_list())}"
        print(f"  {name:34s} {size:>8s}  {ci.description}")
    return 0


def _sweep_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "scale": args.scale,
        "overrides": dict(args.overrides),
        "seeds": args.seeds,
        "backend": _backend(args),
        "progress": not args.no_progress,
    }


def _backend(args: argparse.Namespace) -> Any:
    from fedbandit_envs.bench.backends import make_backend

    return make_backend(args.backend, args.workers, args.address, args.cpus_per_job)


def _print_jobs(summary: Any) -> None:
    for job in summary.jobs_run[:DRY_RUN_LISTED]:
        print(f"  {job.describe()}")
    if len(summary.jobs_run) > DRY_RUN_LISTED:
        print(f"  ... and {len(summary.jobs_run) - DRY_RUN_LISTED} more")


def _sweep(args: argparse.Namespace) -> int:
    from fedbandit_envs.bench.report import write_report
    from fedbandit_envs.bench.sweep import repair_sweep, run_sweep

    if args.repair:
        if args.out is None or args.scenario is not None or args.overrides or args.seeds is not None or args.overwrite:
            raise ValueError(
                "--repair takes the scenario, settings and seeds from the directory's config.json: "
                "give only --out DIR (and backend options), e.g. `fedbandit sweep --repair --out results/x`"
            )
        out = args.out
        kwargs = _sweep_kwargs(args)
        summary = repair_sweep(
            out, kwargs["backend"], seeds_per_job=args.seeds_per_job, progress=kwargs["progress"], dry_run=args.dry_run
        )
    elif args.scenario is None:
        raise ValueError("give a SCENARIO (`fedbandit list` shows them), or --repair --out DIR")
    else:
        out = args.out or Path("results") / args.scenario
        summary = run_sweep(
            args.scenario,
            out,
            seeds_per_job=args.seeds_per_job,
            table_format=args.format,
            dry_run=args.dry_run,
            overwrite=args.overwrite,
            **_sweep_kwargs(args),
        )
    print(summary.describe())
    if args.dry_run:
        _print_jobs(summary)
    elif args.report:
        for path in write_report(out):
            print(f"wrote {path}")
    return 0


def _plot(args: argparse.Namespace) -> int:
    from fedbandit_envs.bench.report import plot_directory

    for figure in plot_directory(args.directory, allow_incomplete=args.allow_incomplete):
        print(f"wrote {figure.png}\nwrote {figure.svg}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from fedbandit_envs.bench.report import write_replication_report, write_report

    if args.replication == (args.directory is not None):
        raise ValueError("give either a results DIRECTORY or --replication [--root ROOT], not both or neither")
    if args.report_dir is not None and not args.replication:
        raise ValueError("--report-dir names where --replication writes the per-paper reports; add --replication")
    if args.replication:
        paths = write_replication_report(args.root, allow_incomplete=args.allow_incomplete, papers_dir=args.report_dir)
    else:
        paths = write_report(args.directory, allow_incomplete=args.allow_incomplete)
    for path in paths:
        print(f"wrote {path}")
    return 0


def _replicate(args: argparse.Namespace) -> int:
    from fedbandit_envs.bench.report import paper_scenarios, write_replication_report
    from fedbandit_envs.bench.store import DamagedPartWarning
    from fedbandit_envs.bench.sweep import run_sweep

    chosen = paper_scenarios(args.papers)
    if not chosen:
        print("no paper scenarios are registered yet; `fedbandit list` shows the catalogue")
    if not args.dry_run:  # every scenario's settings are checked before the first one writes anything
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DamagedPartWarning)  # the real run names them
            for name in chosen:
                run_sweep(name, args.root / name, dry_run=True, **_sweep_kwargs(args))
    for name in chosen:
        summary = run_sweep(name, args.root / name, dry_run=args.dry_run, **_sweep_kwargs(args))
        print(summary.describe())
    if not args.dry_run:
        for path in write_replication_report(args.root, chosen, papers_dir=args.report_dir):
            print(f"wrote {path}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from fedbandit_envs.bench.compare import add_import_paths, compare
    from fedbandit_envs.bench.report import write_report

    add_import_paths([Path.cwd(), *args.path])
    out = args.out or Path("results") / "compare" / args.scenario
    comparison = compare(
        args.agent,
        args.scenario,
        label=args.label,
        agent_kwargs=args.agent_kwargs,
        out=out,
        max_cost=args.max_cost,
        max_epsilon=args.max_epsilon,
        isolate_agents=args.isolate_agents,
        **_sweep_kwargs(args),
    )
    print(comparison.summary.describe())
    print(comparison.markdown())
    if not args.no_report:
        for path in write_report(out, budgets={"max_cost": args.max_cost, "max_epsilon": args.max_epsilon}):
            print(f"wrote {path}")
    return 0


#: What ``fedbandit <command>`` keeps when interrupted (other commands: nothing to resume).
_RESUMES = "the runs of finished jobs are stored: run the same command again to run only the rest"
INTERRUPTED = {
    "sweep": _RESUMES,
    "compare": _RESUMES,
    "replicate": _RESUMES,
    "run": "nothing was written (fedbandit run writes its tables when every run has finished)",
}
#: The exit status of an interrupted command (128 + SIGINT, as shells report it).
INTERRUPTED_STATUS = 130

COMMANDS = {
    "sweep": _sweep,
    "plot": _plot,
    "report": _report,
    "replicate": _replicate,
    "compare": _compare,
    "flower": _flower,
}


def _show_warning(message: Warning | str, *_: Any, **__: Any) -> None:
    """Print a warning as one line, ``fedbandit: warning: ...``, on stderr."""
    print(f"fedbandit: warning: {' '.join(str(message).split())}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fedbandit`` command.

    Errors in the input (``ValueError``, ``TypeError``, ``ImportError``, ``OSError`` such as an output
    path that is a file, ``OverflowError`` and ``MemoryError`` from sizes too large, and failed jobs)
    print one line on stderr and return 2; argparse errors exit
    with status 2 as usual; anything else keeps its traceback. Warnings print one line each. An interrupt
    (Ctrl-C) prints one line saying what was kept (:data:`INTERRUPTED`) and returns 130.
    """
    from fedbandit_envs.bench.backends import JobFailed

    args = _parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            if args.command == "list":
                return _list()
            if args.command == "run":
                return _run(args)
            return COMMANDS[args.command](args)
        except (ValueError, TypeError, ImportError, OSError, OverflowError, JobFailed) as error:
            text = " ".join(str(error).split())
            if isinstance(error, TypeError) and "required positional argument" in text:  # e.g. a replay env's files
                text += " (give them with --set NAME=VALUE)"
            print(f"fedbandit {args.command}: error: {text}", file=sys.stderr)
            return 2
        except MemoryError as error:  # sizes given on the command line that do not fit in memory
            print(f"fedbandit {args.command}: error: out of memory ({error}); give smaller sizes", file=sys.stderr)
            return 2
        except KeyboardInterrupt:  # the backends have ended their workers; stored parts stay
            kept = INTERRUPTED.get(args.command)
            print(f"fedbandit {args.command}: interrupted" + (f"; {kept}" if kept else ""), file=sys.stderr)
            return INTERRUPTED_STATUS


if __name__ == "__main__":
    sys.exit(main())
