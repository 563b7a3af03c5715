"""Play procurement algorithms (solanki-pfcb) for several seeds and collect tidy results.

The procurement counterpart of :mod:`fedbandit_envs.runner`: same signature, same :class:`Results` tables
and column names, so the benchmark harness works unchanged. Two paths give identical trajectories for
the same seeds (a test checks it):

* **batched**: every seed is a replica of one :class:`ProcurementCore`; the population acts on (B, n, m)
  arrays;
* **pettingzoo**: one :class:`FedProcurementEnv` per seed, driven through ``step`` (procurement vectors)
  and ``communicate`` (:class:`Message` objects).

Each round: ``act -> step -> observe -> outgoing -> communicate (DP hooks, channel) -> receive``.

``curves`` rows (one per run and checkpoint) have the columns of the MAB runner (``algorithm``, ``seed``,
``slot``, ``group_regret``, ``mean_regret``, the ledger totals, ``up/down/peer_messages``, ``epsilon_max``,
``epsilon_mean``, ``delta_max`` and ``delta_mean`` (NaN unless a wrapper or the population accounts privacy,
so every row has the same columns), ``wall_time``) plus
``exact_group_regret`` (against the MILP optimum), ``violations`` (QC-violating (agent, round) pairs),
``violation_rate``, ``violations_after_explore`` / ``violation_rate_after_explore`` (rounds after the
population's exploration phase ``tau0``), and, with a reference algorithm (the non-federated baseline by
default), ``nf_group_regret`` and ``frr = group_regret / nf_group_regret`` (the federated regret ratio of the
cumulative regrets at that checkpoint, on the same instance and seeds). ``agents`` rows add ``regret``,
``exact_regret``, ``violations``, ``messages_sent``, ``bytes_sent``, ``cost``, ``epsilon_spent`` and ``delta_spent``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from fedbandit_envs.bench.scenarios import Scenario, split_point
from fedbandit_envs.channel import DIRECTIONS, Message, batches_from_messages
from fedbandit_envs.envs.procurement import FedProcurementEnv, ProcurementCore, ProcurementFeedback
from fedbandit_envs.runner import (
    LEDGER_COLUMNS,
    Results,
    algorithm_name,
    checkpoint_slots,
    load_object,
    make_algorithm,
    privacy_spent,
)
from fedbandit_envs.seeding import explicit_seeds

__all__ = ["REFERENCE", "clear_reference_cache", "run", "run_batched", "run_pettingzoo", "run_scenario"]

#: The FRR reference: the non-federated baseline (spec §1.5), by its name in ``runner.ALGORITHMS``.
REFERENCE = "solanki_nf"

Wrapper = Callable[[Any], Any]

_REFERENCE_CACHE: dict[tuple, dict[tuple[int, int], float]] = {}


def clear_reference_cache() -> None:
    """Forget the cached reference runs used for the FRR column."""
    _REFERENCE_CACHE.clear()


def build_env(env_kwargs: Mapping[str, Any], wrappers: Sequence[Wrapper]) -> Any:
    """``FedProcurementEnv(**env_kwargs)``, wrapped in order."""
    env = FedProcurementEnv(**env_kwargs)
    for wrap in wrappers:
        env = wrap(env)
    return env


def _privacy_spent(core: ProcurementCore, population: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(B, n) epsilon and delta spent: the accounting hooks on the core plus the population's own accountant."""
    hooks = privacy_spent(core)
    own = population.epsilon_spent() if hasattr(population, "epsilon_spent") else None
    if own is not None:
        own = own, population.delta_spent()
    if hooks[0] is None:
        return own
    return hooks if own is None else (hooks[0] + own[0], hooks[1] + own[1])


class _Recorder:
    """Collects checkpoint rows from a procurement core and the population."""

    def __init__(self, label: str, seeds: Sequence[int], slots: np.ndarray) -> None:
        self.label, self.seeds, self.slots = label, list(seeds), set(slots.tolist())
        self.results = Results()
        self.start = time.perf_counter()
        self._explored: np.ndarray | None = None

    def record(self, slot: int, core: ProcurementCore, population: Any, replica_offset: int = 0) -> None:
        tau0 = int(getattr(population, "tau0", 0))
        if slot == tau0:
            self._explored = core.violations.copy()
        if slot not in self.slots:
            return
        ledger = core.channel.ledger
        elapsed = time.perf_counter() - self.start
        spent = _privacy_spent(core, population)
        epsilon, delta = spent if spent is not None else (None, None)
        n = core.instance.num_agents
        explored = self._explored if self._explored is not None else np.zeros_like(core.violations)
        for b in range(core.num_replicas):
            seed = self.seeds[replica_offset + b]
            after = int((core.violations[b] - explored[b]).sum()) if slot > tau0 else 0
            row = {
                "algorithm": self.label,
                "seed": seed,
                "slot": slot,
                "group_regret": float(core.regret[b].sum()),
                "mean_regret": float(core.regret[b].mean()),
                "exact_group_regret": float(core.exact_regret[b].sum()),
                "violations": int(core.violations[b].sum()),
                "violation_rate": float(core.violations[b].sum() / (n * slot)),
                "violations_after_explore": after,
                "violation_rate_after_explore": after / (n * (slot - tau0)) if slot > tau0 else 0.0,
            }
            row.update({name: getattr(ledger, name)[b].item() for name in LEDGER_COLUMNS})
            row.update({f"{d}_messages": int(ledger.direction_messages[b, i]) for i, d in enumerate(DIRECTIONS)})
            row["epsilon_max"] = float(epsilon[b].max()) if epsilon is not None else float("nan")
            row["epsilon_mean"] = float(epsilon[b].mean()) if epsilon is not None else float("nan")
            row["delta_max"] = float(delta[b].max()) if delta is not None else float("nan")
            row["delta_mean"] = float(delta[b].mean()) if delta is not None else float("nan")
            row["wall_time"] = elapsed
            self.results.curves.append(row)
            for j in range(n):
                agent_row = {
                    "algorithm": self.label,
                    "seed": seed,
                    "slot": slot,
                    "agent": j,
                    "regret": float(core.regret[b, j]),
                    "exact_regret": float(core.exact_regret[b, j]),
                    "violations": int(core.violations[b, j]),
                    "messages_sent": int(ledger.sent_messages[b, j]),
                    "bytes_sent": int(ledger.sent_bytes[b, j]),
                    "cost": float(ledger.node_cost[b, j]),
                }
                agent_row["epsilon_spent"] = float(epsilon[b, j]) if epsilon is not None else float("nan")
                agent_row["delta_spent"] = float(delta[b, j]) if delta is not None else float("nan")
                self.results.agents.append(agent_row)


def run_batched(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = 20,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
) -> Results:
    """Run all ``seeds`` as replicas of one batched core."""
    population = make_algorithm(algorithm)
    core: ProcurementCore = build_env(env_kwargs, wrappers).unwrapped.core
    slots = checkpoint_slots(core.horizon, checkpoints)
    recorder = _Recorder(label or algorithm_name(algorithm), seeds, slots)
    core.reset(list(seeds))
    population.reset(core.context)
    for t in tqdm(range(core.horizon), disable=not progress, desc=recorder.label, mininterval=0.5):
        feedback = core.step(population.act(t))
        population.observe(feedback)
        outgoing = population.outgoing(t)
        if outgoing:
            population.receive(t, core.communicate(outgoing))
        recorder.record(t + 1, core, population)
    return recorder.results


def _messages_by_agent(env: Any, batches: Sequence[Any]) -> dict[str, list[Message]]:
    outgoing: dict[str, list[Message]] = {a: [] for a in env.possible_agents}
    for batch in batches:
        for message in batch.messages():
            outgoing[env.possible_agents[message.sender]].append(message)
    return outgoing


def run_pettingzoo(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = 20,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
) -> Results:
    """Run each seed through the public PettingZoo API (``step`` and ``communicate``) of the env."""
    results = Results()
    for index, seed in enumerate(seeds):
        population = make_algorithm(algorithm)
        env = build_env(env_kwargs, wrappers)
        core: ProcurementCore = env.unwrapped.core
        recorder = _Recorder(label or algorithm_name(algorithm), seeds, checkpoint_slots(core.horizon, checkpoints))
        env.reset(seed=seed)
        population.reset(env.unwrapped.context)
        for t in tqdm(range(core.horizon), disable=not progress, desc=f"seed {seed}", mininterval=0.5):
            agents = list(env.agents)
            units = population.act(t)
            observations, rewards, *_ = env.step({a: units[0, j] for j, a in enumerate(agents)})
            population.observe(
                ProcurementFeedback(
                    t,
                    np.stack([observations[a]["procured"] for a in agents])[None],
                    np.stack([observations[a]["successes"] for a in agents])[None],
                    np.array([[rewards[a] for a in agents]]),
                )
            )
            outgoing = population.outgoing(t)
            if outgoing:
                inboxes = env.communicate(_messages_by_agent(env, outgoing))
                delivered = [m for a in env.possible_agents for m in inboxes[a]]
                population.receive(t, batches_from_messages(delivered))
            recorder.record(t + 1, core, population, replica_offset=index)
        results.extend(recorder.results)
    return results


def _reference_key(env_kwargs: Mapping[str, Any], seeds: Sequence[int], slots: np.ndarray) -> tuple | None:
    """A cache key for plain-valued env kwargs (None when a value has no faithful repr, e.g. an instance)."""
    plain = (int, float, str, bool, type(None))

    def is_plain(value: Any) -> bool:
        if isinstance(value, Mapping):
            return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
        if isinstance(value, tuple | list):
            return all(is_plain(v) for v in value)
        return isinstance(value, plain)

    if not is_plain(dict(env_kwargs)):
        return None
    return repr(sorted(env_kwargs.items())), tuple(int(s) for s in seeds), tuple(slots.tolist())


def _reference_regret(
    reference: str, env_kwargs: Mapping[str, Any], seeds: Sequence[int], checkpoints: int | Sequence[int]
) -> dict[tuple[int, int], float]:
    """Group regret of the reference algorithm per (seed, slot), cached per env point, seeds and checkpoints."""
    horizon = int(env_kwargs.get("horizon", 1000))
    key = _reference_key(env_kwargs, seeds, checkpoint_slots(horizon, checkpoints))
    if key is not None and (reference, *key) in _REFERENCE_CACHE:
        return _REFERENCE_CACHE[(reference, *key)]
    results = run(reference, env_kwargs, seeds, checkpoints, frr_reference=None)
    regret = {(row["seed"], row["slot"]): row["group_regret"] for row in results.curves}
    if key is not None:
        _REFERENCE_CACHE[(reference, *key)] = regret
    return regret


def run(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = 20,
    batched: bool | None = None,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
    *,
    frr_reference: str | None = REFERENCE,
) -> Results:
    """Play ``algorithm`` on ``FedProcurementEnv(**env_kwargs)`` for every seed.

    Args:
        algorithm: a name in ``runner.ALGORITHMS`` (e.g. ``"solanki_pfcb"``), ``"module:Class"``, or a
            population class/factory (a :class:`~fedbandit_envs.envs.procurement.ProcurementPopulation`).
        env_kwargs: keyword arguments of :class:`FedProcurementEnv`.
        seeds: one run per seed (the outcome streams); run ``b`` is identical whichever path is taken.
        checkpoints: number of evenly spaced checkpoints, or explicit round counts.
        batched: force the batched (True) or PettingZoo (False) path; default: batched when supported.
        progress: show a progress bar.
        label: the ``algorithm`` column (default: the algorithm's name).
        wrappers: functions ``env -> wrapped env`` applied in order (e.g. a DP wrapper).
        frr_reference: the algorithm of the FRR denominator, run on the same env and seeds without wrappers
            (cached); ``None`` for no FRR columns.
    """
    seeds = explicit_seeds(seeds)
    if batched is None:
        batched = bool(getattr(make_algorithm(algorithm), "supports_batching", False))
    runner: Callable[..., Results] = run_batched if batched else run_pettingzoo
    results = runner(algorithm, env_kwargs, seeds, checkpoints, progress, label, wrappers)
    if frr_reference is not None:
        reference = _reference_regret(frr_reference, env_kwargs, seeds, checkpoints)
        for row in results.curves:
            denominator = reference[(row["seed"], row["slot"])]
            row["nf_group_regret"] = denominator
            row["frr"] = row["group_regret"] / denominator if denominator > 0 else float("nan")
    return results


def run_scenario(scenario: Scenario, scale: str = "ci", progress: bool = False) -> Results:
    """Run every sweep point and algorithm of a scenario at ``scale`` with the scenario's runner.

    Rows get one column per sweep key, named after its keyword (``"alg.epsilon"`` -> ``epsilon``), as
    :mod:`fedbandit_envs.bench.claims` expects; the seeds are the scenario's (:meth:`Scenario.seed_list`).
    """
    scenario = scenario.at_scale(scale)
    runner = load_object(scenario.runner)
    results = Results()
    for point in scenario.points():
        parts = split_point(point)
        env_kwargs = {**scenario.env_kwargs, **parts["env"]}
        wrappers = [spec.factory(parts["wrapper"]) for spec in scenario.wrappers]
        columns = {key.partition(".")[2]: value for key, value in point.items()}
        for label, spec in scenario.algorithms.items():
            part = runner(
                spec.factory(parts["alg"]),
                env_kwargs,
                scenario.seed_list(),
                scenario.checkpoints,
                progress=progress,
                label=label,
                wrappers=wrappers,
            )
            for row in part.curves + part.agents:
                row.update(columns)
            results.extend(part)
    return results
