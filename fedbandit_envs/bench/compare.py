"""Benchmark your own learner against a scenario's reference agents (``fedbandit compare``).

Python equivalent of ``fedbandit compare --agent mypkg.module:MyAlgorithm --scenario suite/baselines``::

    from fedbandit_envs.bench.compare import compare

    comparison = compare("mypkg.module:MyAlgorithm", "suite/baselines", out="results/compare")
    print(comparison.markdown())

The learner is added to the scenario's algorithms and the scenario is swept as usual (same points,
seeds, checkpoints, cost model and wrappers), so every algorithm meets the same instances and
reward draws. The learner is played with one population per seed (:class:`OneSeedPerPopulation`), so it
cannot pool the seeds of a batched run. A learner is a population (vectorised: any class with ``reset``, ``act`` and
``observe``, and ``make_coordinator`` for the ``FederatedMAB`` runner, as ``fedbandit_envs.protocol.Population``)
or an ``fedbandit_envs.protocol.Agent`` (one object per agent, wrapped in ``PerAgentPopulation`` automatically),
given as ``"module:Class"`` or as the class.
Results of the reference agents already stored in ``out`` (e.g. by an earlier ``fedbandit sweep``
into the same directory) are reused.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from fedbandit_envs.algorithms import is_registered, load_object, resolve_factory, supported_families
from fedbandit_envs.bench.backends import Backend
from fedbandit_envs.bench.isolation import IsolatedAgent
from fedbandit_envs.bench.jobs import env_keys, resolve_scenario
from fedbandit_envs.bench.leaderboard import check_budgets, leaderboard, leaderboard_legend, leaderboard_table
from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario, get
from fedbandit_envs.bench.store import load_config, load_results
from fedbandit_envs.bench.sweep import SweepSummary, run_sweep
from fedbandit_envs.bench.tables import markdown_table
from fedbandit_envs.protocol import PROTOCOL_HELP, Agent, PerAgentPopulation, check_population, make_population
from fedbandit_envs.run import Results
from fedbandit_envs.run.loop import DEFAULT_FAMILY
from fedbandit_envs.seeding import SeedsLike


def per_agent(agent: str, **kwargs: Any) -> Any:
    """A ``PerAgentPopulation`` of ``agent`` (``"module:Class"`` of a protocol ``Agent``) built with ``kwargs``."""
    return PerAgentPopulation(partial(load_object(agent), **kwargs))


def isolated_agents(agent: str, **kwargs: Any) -> Any:
    """A ``PerAgentPopulation`` of ``agent`` whose every agent runs in a process of its own (:mod:`.isolation`)."""
    return PerAgentPopulation(partial(IsolatedAgent, agent, **kwargs))


def on_family(learner: str, family: str, **kwargs: Any) -> Any:
    """The learner (a registered name or ``"module:Class"``) built with ``kwargs``, to play ``family``.

    Its ``families`` become ``(family,)``, so a learner of several families is played on the environment of
    the scenario it is compared on (see :func:`play_on_scenario_family`).
    """
    population = resolve_factory(learner)(**kwargs)
    population.families = (family,)
    return population


def _played_family(spec: AlgorithmSpec) -> str:
    """The family an algorithm is played on when the environment keywords name no environment."""
    families = supported_families(spec.path, resolve_factory(spec.path)(**spec.kwargs))
    return families[0] if families else DEFAULT_FAMILY


def play_on_scenario_family(spec: AlgorithmSpec, scenario: Scenario) -> AlgorithmSpec:
    """The learner's spec, pinned to the family of the scenario's algorithms when the scenario names no environment.

    A scenario without an ``env`` keyword plays each algorithm on the default environment of its first family;
    a learner of several families (``families = ("mab", "linear", ...)``) would otherwise be played on its own
    first family, not the scenario's.

    Raises:
        ValueError: the learner declares families and the scenario's is not among them, or its keywords
            include ``learner`` or ``family`` (the names :func:`on_family` takes).
    """
    if "env" in env_keys(scenario):
        return spec  # the environment is named: the run plays it (and checks the learner's families)
    played = {_played_family(s) for s in scenario.algorithms.values()}
    if len(played) != 1:
        return spec
    (family,) = played
    declared = supported_families(spec.path, resolve_factory(spec.path)(**spec.kwargs))
    if declared and family not in declared:
        raise ValueError(
            f"the learner {spec.name} supports the families {list(declared)}, but the algorithms of "
            f"{scenario.name!r} play the {family!r} family; compare it on a scenario of a supported family"
        )
    if family == (declared[0] if declared else DEFAULT_FAMILY):
        return spec
    clash = sorted({"learner", "family"} & set(spec.kwargs))
    if clash:
        raise ValueError(
            f"the learner {spec.name} is played on the {family!r} family through {__name__}.on_family, whose "
            f"keywords {clash} its own keywords must not use; rename them"
        )
    kwargs = {"learner": spec.path, "family": family, **spec.kwargs}
    return AlgorithmSpec(f"{__name__}:on_family", kwargs, shown_as=spec.name)


class OneSeedPerPopulation:
    """The learner under test, played with one population per seed: never batched, so it cannot pool seeds.

    A batched population plays every seed of a run at once, as the replicas of one core, and sees all of them: a
    learner that pooled their rewards would learn several times as fast as it may (on a scenario's fixed instance,
    the same arms). :func:`compare` therefore plays the learner through the PettingZoo path, a fresh population per
    seed (each seed's results are those of the batched path, so the reference agents, played batched, meet it on
    equal terms). ``supports_batching`` is this wrapper's, whatever the learner declares; every other attribute
    is the learner's.
    """

    supports_batching = False

    def __init__(self, learner: Any) -> None:
        self.learner = learner

    def __getattr__(self, name: str) -> Any:
        if name == "learner":  # not set yet (a copy being built): no learner to ask
            raise AttributeError(name)
        return getattr(self.learner, name)


def played_alone(played: str, **kwargs: Any) -> OneSeedPerPopulation:
    """The population of ``played`` (a path, as :func:`resolve_agent` gives it) built with ``kwargs``, one per seed.

    See :class:`OneSeedPerPopulation`.
    """
    return OneSeedPerPopulation(make_population(played, **kwargs))


def one_seed_per_population(spec: AlgorithmSpec) -> AlgorithmSpec:
    """The learner's spec played through :func:`played_alone` (its keywords must not use the name ``played``)."""
    if "played" in spec.kwargs:
        raise ValueError(
            f"the learner {spec.name} is compared through {__name__}.played_alone, whose keyword "
            "'played' its own keywords must not use; rename it"
        )
    return AlgorithmSpec(f"{__name__}:played_alone", {"played": spec.path, **spec.kwargs}, shown_as=spec.name)


def add_import_paths(directories: Sequence[str | Path]) -> list[str]:
    """Make modules in ``directories`` importable here and in worker processes, as ``python -m`` does for cwd.

    Each directory goes to the front of ``sys.path`` (once) and of ``PYTHONPATH``, so that pool workers
    and local Ray workers started afterwards import the same learner.

    Returns:
        The absolute directories added, in order.

    Raises:
        ValueError: a directory does not exist.
    """
    added = []
    for directory in directories:
        resolved = Path(directory).expanduser().resolve()
        if not resolved.is_dir():
            raise ValueError(f"import path {str(directory)!r} is not a directory; pass an existing folder to --path")
        added.append(str(resolved))
    for entry in reversed(added):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    inherited = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    os.environ["PYTHONPATH"] = os.pathsep.join([*added, *(entry for entry in inherited if entry not in added)])
    return added


def resolve_agent(
    agent: Any,
    kwargs: Mapping[str, Any] | None = None,
    isolate_agents: bool = False,
) -> AlgorithmSpec:
    """An :class:`AlgorithmSpec` for a learner given as a name, ``"module:Class"`` or a class; checks the protocol.

    Args:
        agent: a registered algorithm name, ``"module:Class"``, or a module-level class.
        kwargs: constructor keywords.
        isolate_agents: play each agent of a per-agent learner in a process of its own (:func:`isolated_agents`).

    Raises:
        ValueError: the path does not resolve, the constructor rejects ``kwargs``, or ``isolate_agents`` is asked of
            a population (one object acting for every agent cannot be split into processes).
        TypeError: the object is not a population or per-agent learner.
    """
    kwargs = dict(kwargs or {})
    if isinstance(agent, str):
        path = agent
        target = resolve_factory(agent) if is_registered(agent) else load_object(path)
    elif isinstance(agent, type):
        if "<locals>" in agent.__qualname__:
            raise ValueError(f"define {agent.__qualname__} at module level so it can be imported by path")
        path = f"{agent.__module__}:{agent.__qualname__}"
        target = agent
    else:
        raise TypeError(f"agent must be 'module:Class' or a class, got {agent!r}")
    try:
        instance = target(**kwargs)
    except TypeError as error:
        if "abstract" in str(error):
            raise TypeError(f"{path} does not implement the protocol ({error}); {PROTOCOL_HELP}") from error
        raise ValueError(f"cannot build {path} with keywords {kwargs}: {error}") from error
    if isinstance(instance, Agent):
        factory = "isolated_agents" if isolate_agents else "per_agent"
        return AlgorithmSpec(f"{__name__}:{factory}", {"agent": path, **kwargs}, shown_as=path)
    check_population(instance, path)
    if isolate_agents:
        raise ValueError(
            f"{path} is a population: one object acts for every agent, so its agents cannot be put in processes of "
            "their own; write the learner as a per-agent Agent (fedbandit_envs.protocol.Agent) to isolate its agents"
        )
    return AlgorithmSpec(path, kwargs)


@dataclass
class Comparison:
    """The outcome of :func:`compare`.

    Attributes:
        label: the learner's name in the tables.
        results: the tidy results of every algorithm (reference agents and the learner).
        params: the swept parameter columns.
        entries: the leaderboard (see :func:`~fedbandit_envs.bench.leaderboard.leaderboard`).
        summary: what the sweep ran and skipped.
    """

    label: str
    results: Results
    params: list[str]
    entries: list[dict[str, Any]]
    summary: SweepSummary

    def markdown(self) -> str:
        """The leaderboard as a Markdown table, followed by its legend (ranking rule, ±, cost unit)."""
        return markdown_table(*leaderboard_table(self.entries, self.params)) + "\n\n" + leaderboard_legend()


def compare(
    agent: Any,
    scenario: Scenario | str,
    label: str | None = None,
    agent_kwargs: Mapping[str, Any] | None = None,
    out: str | Path | None = None,
    scale: str = "ci",
    overrides: Mapping[str, Any] | None = None,
    seeds: SeedsLike | None = None,
    backend: str | Backend = "inprocess",
    workers: int | None = None,
    address: str | None = None,
    max_cost: float | None = None,
    max_epsilon: float | None = None,
    progress: bool = False,
    isolate_agents: bool = False,
) -> Comparison:
    """Sweep ``scenario`` with ``agent`` added to its algorithms and rank everything on a leaderboard.

    Args:
        agent: the learner: ``"module:Class"`` or a module-level class (Population or Agent subclass).
        scenario: a :class:`Scenario` or a registered name.
        label: its name in the tables (default: the class name); must differ from the scenario's algorithms.
        agent_kwargs: constructor keywords of the learner.
        out: results directory (default: a temporary directory, removed afterwards).
        scale: ``"ci"`` or ``"paper"``.
        overrides: environment keywords and/or ``seeds``/``checkpoints``/``sweep`` on top of the scale.
        seeds: the seeds: a count ``n`` (runs ``0 .. n-1``), explicit seeds (``range(100, 110)``) or text
            (``"100:110"``, ``"3,7,9"``).
        backend: ``"inprocess"`` (default here: classes defined in a script need no import path),
            ``"pool"``, ``"ray"``, or a :class:`~fedbandit_envs.bench.backends.Backend`.
        workers: pool size.
        address: Ray cluster address.
        max_cost: leaderboard cost budget (see :func:`~fedbandit_envs.bench.leaderboard.leaderboard`).
        max_epsilon: leaderboard privacy budget.
        progress: show progress bars.
        isolate_agents: play each agent of a per-agent learner in a process of its own, so that its agents share
            only what crosses the channel (costed and, under a DP wrapper, privatized); without it, agents of one
            process can share state unseen, and the learner's cost and epsilon count only what it chose to send.
    """
    check_budgets(max_cost, max_epsilon)  # before the sweep, which writes
    base = get(scenario) if isinstance(scenario, str) else scenario
    spec = resolve_agent(agent, agent_kwargs, isolate_agents)
    label = label or (agent.__name__ if isinstance(agent, type) else agent.rpartition(":")[2])
    if label in base.algorithms:
        raise ValueError(f"label {label!r} is already an algorithm of {base.name!r}; pass another label")
    spec = one_seed_per_population(play_on_scenario_family(spec, resolve_scenario(base, scale, overrides, seeds)))
    extended = replace(base, algorithms={**base.algorithms, label: spec})
    resolve_scenario(extended, scale, overrides, seeds)  # validate before creating any directory
    with tempfile.TemporaryDirectory(prefix="fedbandit-compare-") as scratch:
        directory = Path(out) if out is not None else Path(scratch)
        summary = run_sweep(extended, directory, scale, overrides, seeds, backend, workers, address, progress=progress)
        results = load_results(directory)
        params = list(load_config(directory).get("parameters", {}).values())
    entries = leaderboard(results, params, max_cost=max_cost, max_epsilon=max_epsilon)
    return Comparison(label, results, params, entries, summary)
