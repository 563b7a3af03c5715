"""Play an algorithm on the federated MAB for several seeds and collect tidy results.

Two paths give identical trajectories for the same seeds (a test checks it):

* **batched**: every seed is a replica of one :class:`FederatedMABCore`; the population acts on
  (B, M) arrays. Used when the algorithm supports batching.
* **pettingzoo**: one :class:`FederatedMAB` per seed, driven through the public ParallelEnv API
  (action dicts with :class:`Message` objects, observation dicts).

The result has two tidy tables: ``curves`` (one row per run and checkpoint) and ``agents`` (one row
per run, checkpoint and agent). Wrappers (e.g. ``lambda env: LaplaceMessageDP(env, epsilon=1.0)``)
apply on both paths; when they account privacy, the tables get epsilon columns.
"""

from __future__ import annotations

import csv
import functools
import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from fedbandit_envs.channel import DIRECTIONS, MessageBatch, batches_from_messages
from fedbandit_envs.core import Action, Feedback, exchange_at_boundary
from fedbandit_envs.envs.mab import FederatedMAB
from fedbandit_envs.envs.mab_core import FederatedMABCore
from fedbandit_envs.observations import feedback_from_observations, messages_by_sender
from fedbandit_envs.validation import check_seeds

#: Ledger totals reported per checkpoint (arrays of shape (B,) on the ledger).
LEDGER_COLUMNS = ("messages", "copies", "scalars", "bytes", "links", "link_cost", "cost", "dropped")

#: Algorithms known by name (resolved lazily: ``fedbandit_envs`` does not import ``agents`` on import).
ALGORITHMS: dict[str, str] = {
    "random": "agents.baselines:Random",
    "round_robin": "agents.baselines:RoundRobin",
    "independent_ucb1": "agents.baselines:IndependentUCB1",
    "full_sharing_ucb": "agents.baselines:FullSharingUCB",
    "cdp_mab": "agents.li_song:CDPMAB",
    "ddp_mab": "agents.li_song:DDPMAB",
    "hdp_mab": "agents.li_song:HDPMAB",
    "gossip_ucb": "agents.zhu:GossipUCB",
    "fed_ucb": "agents.zhu:FedUCB",
    "solanki_nf": "agents.solanki:NonFederated",
    "solanki_fcb_sync": "agents.solanki:FCBSync",
    "solanki_fcb": "agents.solanki:FCBExp",
    "solanki_pfcb": "agents.solanki:PFCB",
    "dubey_private_ucb": "agents.dubey:PrivateMultiAgentUCB",
    "dubey_cooperative_ucb": "agents.dubey:CooperativeUCB",
    "dubey_byzantine_ucb": "agents.dubey:ByzantineProofUCB",
    "dubey_ucb1": "agents.dubey:IndividualUCB1",
    "dubey_dp_ucb_int": "agents.dubey:DPUCBInt",
}


def load_object(path: str) -> Any:
    """Import ``"package.module:attribute"``."""
    module_name, _, attribute = path.partition(":")
    if not attribute:
        raise ValueError(f"expected 'package.module:Attribute', got {path!r}")
    return getattr(importlib.import_module(module_name), attribute)


def make_algorithm(algorithm: Any) -> Any:
    """A fresh population from a name in :data:`ALGORITHMS`, a ``"module:Class"`` path, a class or factory."""
    if isinstance(algorithm, str):
        if algorithm not in ALGORITHMS and ":" not in algorithm:
            raise ValueError(f"unknown algorithm {algorithm!r}; use one of {sorted(ALGORITHMS)} or 'module:Class'")
        return load_object(ALGORITHMS.get(algorithm, algorithm))()
    if callable(algorithm):
        return algorithm()
    raise TypeError(f"algorithm must be a name, a 'module:Class' path or a factory, got {algorithm!r}")


def algorithm_name(algorithm: Any) -> str:
    """A readable label for an algorithm spec."""
    if isinstance(algorithm, str):
        return algorithm
    return getattr(algorithm, "__name__", type(algorithm).__name__)


def checkpoint_slots(horizon: int, checkpoints: int | Sequence[int]) -> np.ndarray:
    """Slot counts at which results are recorded: ``n`` evenly spaced points ending at T, or a list."""
    if isinstance(checkpoints, int):
        if checkpoints < 1:
            raise ValueError(f"checkpoints must be >= 1, got {checkpoints}")
        slots = np.unique(np.ceil(np.linspace(horizon / checkpoints, horizon, checkpoints)).astype(np.int64))
    else:
        slots = np.unique(np.asarray(checkpoints, np.int64))
    if len(slots) == 0 or slots[0] < 1 or slots[-1] > horizon:
        raise ValueError(f"checkpoints must lie in [1, {horizon}], got {checkpoints!r}")
    return slots


@dataclass
class Results:
    """Tidy results: ``curves`` (run x checkpoint) and ``agents`` (run x checkpoint x agent) rows."""

    curves: list[dict[str, Any]] = field(default_factory=list)
    agents: list[dict[str, Any]] = field(default_factory=list)

    def extend(self, other: Results) -> None:
        """Append another result's rows."""
        self.curves.extend(other.curves)
        self.agents.extend(other.agents)

    def column(self, name: str, table: str = "curves") -> np.ndarray:
        """One column as an array."""
        return np.array([row[name] for row in getattr(self, table)])

    def save(self, directory: str | Path, stem: str = "results") -> list[Path]:
        """Write ``<stem>.csv`` and ``<stem>_agents.csv``; returns the paths."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        for suffix, rows in (("", self.curves), ("_agents", self.agents)):
            path = directory / f"{stem}{suffix}.csv"
            with path.open("w", newline="") as handle:
                if rows:
                    columns = list(dict.fromkeys(name for row in rows for name in row))  # union, in first-seen order
                    writer = csv.DictWriter(handle, fieldnames=columns)
                    writer.writeheader()
                    writer.writerows(rows)
            paths.append(path)
        return paths


class Recorder:
    """Collects the tidy checkpoint rows (curves and per-agent) of a run from a core's arrays.

    Other runners (linear, procurement) subclass it to add columns; see :meth:`record`.
    """

    def __init__(self, label: str, seeds: Sequence[int], slots: np.ndarray) -> None:
        self.label, self.seeds, self.slots = label, list(seeds), set(slots.tolist())
        self.results = Results()
        self.start = time.perf_counter()

    def record(self, slot: int, core: FederatedMABCore, replica_offset: int = 0) -> None:
        """Append the rows of every replica when ``slot`` is a checkpoint."""
        if slot not in self.slots:
            return
        ledger = core.channel.ledger
        elapsed = time.perf_counter() - self.start
        epsilon, delta = privacy_spent(core)
        for b in range(core.num_replicas):
            seed = self.seeds[replica_offset + b]
            regret = core.regret[b]
            row = {
                "algorithm": self.label,
                "seed": seed,
                "slot": slot,
                "group_regret": float(regret.sum()),
                "mean_regret": float(regret.mean()),
            }
            row.update({name: getattr(ledger, name)[b].item() for name in LEDGER_COLUMNS})
            row.update({f"{d}_messages": int(ledger.direction_messages[b, i]) for i, d in enumerate(DIRECTIONS)})
            if epsilon is not None:
                row["epsilon_max"] = float(epsilon[b].max())
                row["epsilon_mean"] = float(epsilon[b].mean())
                row["delta_max"] = float(delta[b].max())
            row["wall_time"] = elapsed
            self.results.curves.append(row)
            for i in range(core.config.num_agents):
                agent_row = {
                    "algorithm": self.label,
                    "seed": seed,
                    "slot": slot,
                    "agent": i,
                    "regret": float(regret[i]),
                    "messages_sent": int(ledger.sent_messages[b, i]),
                    "bytes_sent": int(ledger.sent_bytes[b, i]),
                    "cost": float(ledger.node_cost[b, i]),
                }
                if epsilon is not None:
                    agent_row["epsilon_spent"] = float(epsilon[b, i])
                    agent_row["delta_spent"] = float(delta[b, i])
                self.results.agents.append(agent_row)


def privacy_spent(core: FederatedMABCore) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """(B, M) epsilon and delta spent, summed over the privacy-accounting hooks on the core (None without any)."""
    hooks = [hook for hook in core.message_hooks if hasattr(hook, "epsilon_spent")]
    if not hooks:
        return None, None
    return np.sum([h.epsilon_spent() for h in hooks], axis=0), np.sum([h.delta_spent() for h in hooks], axis=0)


Wrapper = Callable[[Any], Any]


def build_env(population: Any, env_kwargs: Mapping[str, Any], wrappers: Sequence[Wrapper]) -> Any:
    """``FederatedMAB(**env_kwargs)`` hosting the population's coordinator, wrapped in order."""
    env = FederatedMAB(**env_kwargs, coordinator=population.make_coordinator())
    for wrap in wrappers:
        env = wrap(env)
    return env


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
    core = build_env(population, env_kwargs, wrappers).unwrapped.core
    slots = checkpoint_slots(core.config.horizon, checkpoints)
    recorder = Recorder(label or algorithm_name(algorithm), seeds, slots)
    feedback = core.reset(list(seeds))
    population.reset(core.context)
    for t in tqdm(range(core.config.horizon), disable=not progress, desc=recorder.label, mininterval=0.5):
        action: Action = population.act(t, feedback.partners)
        feedback = core.step(action.arms, action.messages)
        population.observe(feedback)
        if not core.done:
            exchange_at_boundary(population, core.exchange, t)
        recorder.record(t + 1, core)
    return recorder.results


def _pettingzoo_actions(env: FederatedMAB, action: Action) -> dict[str, Any]:
    arms = action.arms[0].tolist()
    if not action.messages:
        return dict(zip(env.agents, arms))
    outgoing = messages_by_sender(action.messages)
    return {a: {"arm": arms[i], "messages": outgoing.get(i, [])} for i, a in enumerate(env.agents)}


def _pettingzoo_exchange(env: FederatedMAB, batches: list[MessageBatch]) -> list[MessageBatch]:
    """A population's boundary hop through :meth:`FederatedMAB.exchange` (B = 1), as batches again."""
    outgoing = messages_by_sender(batches)
    inboxes = env.exchange({a: outgoing.get(i, []) for i, a in enumerate(env.agents)})
    delivered = [message for inbox in inboxes.values() for message in inbox]
    return batches_from_messages(delivered) if delivered else []


def run_pettingzoo(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = 20,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
) -> Results:
    """Run each seed through the public PettingZoo API of :class:`FederatedMAB`."""
    results = Results()
    for index, seed in enumerate(seeds):
        population = make_algorithm(algorithm)
        env = build_env(population, env_kwargs, wrappers)
        slots = checkpoint_slots(env.config.horizon, checkpoints)
        recorder = Recorder(label or algorithm_name(algorithm), seeds, slots)
        observations, _ = env.reset(seed=seed)
        population.reset(env.context)
        partners = np.array([[observations[a]["partner"] for a in env.agents]], np.int64)
        for t in tqdm(range(env.config.horizon), disable=not progress, desc=f"seed {seed}", mininterval=0.5):
            agents = list(env.agents)
            observations, *_ = env.step(_pettingzoo_actions(env, population.act(t, partners)))
            feedback: Feedback = feedback_from_observations([observations[a] for a in agents])
            partners = feedback.partners
            population.observe(feedback)
            if env.agents:
                exchange_at_boundary(population, functools.partial(_pettingzoo_exchange, env), t)
            recorder.record(t + 1, env.unwrapped.core, replica_offset=index)
        results.extend(recorder.results)
    return results


def run(
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int] = 20,
    batched: bool | None = None,
    progress: bool = False,
    label: str | None = None,
    wrappers: Sequence[Wrapper] = (),
) -> Results:
    """Play ``algorithm`` on ``FederatedMAB(**env_kwargs)`` for every seed.

    Args:
        algorithm: a name in :data:`ALGORITHMS`, ``"module:Class"``, or a population class/factory.
        env_kwargs: keyword arguments of :class:`FederatedMAB` (without ``coordinator``).
        seeds: one run per seed; run ``b`` is identical whichever path is taken.
        checkpoints: number of evenly spaced checkpoints, or explicit slot counts.
        batched: force the batched (True) or PettingZoo (False) path; default: batched when supported.
        progress: show a progress bar.
        label: the ``algorithm`` column (default: the algorithm's name).
        wrappers: functions ``env -> wrapped env`` applied in order (DP, faults).
    """
    if "coordinator" in env_kwargs:
        raise ValueError("env_kwargs must not contain 'coordinator': the algorithm provides its own")
    paths = (run_batched, run_pettingzoo)
    return dispatch(
        make_algorithm, paths, algorithm, env_kwargs, seeds, checkpoints, batched, progress, label, wrappers
    )


def dispatch(
    make: Callable[[Any], Any],
    paths: tuple[Callable[..., Results], Callable[..., Results]],
    algorithm: Any,
    env_kwargs: Mapping[str, Any],
    seeds: Sequence[int],
    checkpoints: int | Sequence[int],
    batched: bool | None,
    progress: bool,
    label: str | None,
    wrappers: Sequence[Wrapper],
) -> Results:
    """The shared front of every family's ``run``: check the seeds and take the batched path when supported.

    ``make`` builds the family's population from an algorithm spec; ``paths`` is ``(run_batched,
    run_pettingzoo)``; the other arguments are those of :func:`run`.
    """
    seeds = check_seeds(seeds)
    if batched is None:
        batched = bool(getattr(make(algorithm), "supports_batching", False))
    runner = paths[0] if batched else paths[1]
    return runner(algorithm, env_kwargs, seeds, checkpoints, progress, label, wrappers)
