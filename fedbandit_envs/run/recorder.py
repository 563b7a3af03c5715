"""The one recorder: the tidy checkpoint rows of a run, read from any family's core."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedbandit_envs.channel import DIRECTIONS
from fedbandit_envs.families.registry import Family
from fedbandit_envs.run.results import LEDGER_COLUMNS, Results

__all__ = ["Recorder", "privacy_spent"]

NAN = float("nan")


def privacy_spent(core: Any, population: Any = None) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """(B, M) epsilon and delta spent: the accounting message hooks on the core plus the population's own.

    A population accounts its own privacy through optional ``epsilon_spent()`` and ``delta_spent()``
    methods returning (B, M) arrays (or None). Returns ``(None, None)`` when nothing is accounted. The
    population's figures can only add to the hooks' (the learner is untrusted): ValueError unless they are
    (B, M) arrays of finite numbers >= 0, with deltas below 1.
    """
    parts = [(h.epsilon_spent(), h.delta_spent()) for h in core.message_hooks if hasattr(h, "epsilon_spent")]
    own = population.epsilon_spent() if hasattr(population, "epsilon_spent") else None
    if own is not None:
        shape = (core.context.num_replicas, core.context.num_agents)
        parts.append(
            (
                _own_spent(population, "epsilon_spent", own, shape),
                _own_spent(population, "delta_spent", population.delta_spent(), shape),
            )
        )
    if not parts:
        return None, None
    return np.sum([e for e, _ in parts], axis=0), np.sum([d for _, d in parts], axis=0)


def _own_spent(population: Any, method: str, value: Any, shape: tuple[int, int]) -> np.ndarray:
    """A population's own ``epsilon_spent()`` / ``delta_spent()`` as a (B, M) float array, checked."""
    try:
        spent = np.array(value, np.float64)
    except (TypeError, ValueError):
        spent = np.full(shape, np.nan)
    upper = 1.0 if method == "delta_spent" else np.inf
    if spent.shape != shape or not np.all((spent >= 0) & (spent < upper)):
        raise ValueError(
            f"{type(population).__name__}.{method}() must return a {shape} array (replicas, agents) of finite "
            f"numbers >= 0{' below 1' if upper == 1.0 else ''}: what a learner accounts itself adds to the DP "
            f"wrapper's figure, got {value!r}"
        )
    return spent


class Recorder:
    """Collects the tidy checkpoint rows (curves and per-agent) of a run.

    ``curves`` rows: ``algorithm``, ``seed``, ``slot``, ``group_regret``, ``mean_regret``, the family's
    columns, the ledger totals (:data:`LEDGER_COLUMNS`), ``up/down/peer_messages``, the privacy columns
    (``epsilon_max``, ``epsilon_mean``, ``delta_max``, ``delta_mean``) and ``wall_time``. ``agents`` rows:
    ``algorithm``, ``seed``, ``slot``, ``agent``, ``regret``, the family's columns, ``messages_sent``,
    ``bytes_sent``, ``cost`` and ``epsilon_spent`` / ``delta_spent``.

    Args:
        family: the family played (its metrics and whether privacy columns are always present).
        label: the ``algorithm`` column.
        seeds: the seed of every run; replica ``b`` at offset ``o`` is run ``o + b``.
        slots: the checkpoints (slot counts).
    """

    def __init__(self, family: Family, label: str, seeds: Sequence[int], slots: np.ndarray) -> None:
        self.family, self.label, self.seeds, self.slots = family, label, list(seeds), set(slots.tolist())
        self.results = Results()
        self.start = time.perf_counter()
        self.metrics: Any = None

    def attach(self, core: Any, population: Any) -> None:
        """Start recording a run of ``population`` on ``core`` (after both were reset)."""
        self.core, self.population = core, population
        self.metrics = self.family.metrics(core, population) if self.family.metrics is not None else None

    def record(self, slot: int, replica_offset: int = 0) -> None:
        """After ``slot`` slots: update the family's metrics, and append every replica's rows at a checkpoint."""
        if self.metrics is not None:
            self.metrics.after_slot(slot)
        if slot not in self.slots:
            return
        core = self.core
        ledger = core.channel.ledger
        elapsed = time.perf_counter() - self.start
        epsilon, delta = privacy_spent(core, self.population)
        privacy = epsilon is not None or self.family.privacy_columns
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
            if self.metrics is not None:
                row.update(self.metrics.curve(b, slot))
            row.update({name: getattr(ledger, name)[b].item() for name in LEDGER_COLUMNS})
            row.update({f"{d}_messages": int(ledger.direction_messages[b, i]) for i, d in enumerate(DIRECTIONS)})
            if privacy:
                row["epsilon_max"] = float(epsilon[b].max()) if epsilon is not None else NAN
                row["epsilon_mean"] = float(epsilon[b].mean()) if epsilon is not None else NAN
                row["delta_max"] = float(delta[b].max()) if delta is not None else NAN
                row["delta_mean"] = float(delta[b].mean()) if delta is not None else NAN
            row["wall_time"] = elapsed
            self.results.curves.append(row)
            self._record_agents(b, seed, slot, epsilon, delta, privacy)

    def _record_agents(
        self, b: int, seed: int, slot: int, epsilon: np.ndarray | None, delta: np.ndarray | None, privacy: bool
    ) -> None:
        ledger = self.core.channel.ledger
        regret = self.core.regret[b]
        extra = self.metrics.agents(b) if self.metrics is not None else {}
        for i in range(len(regret)):
            row = {"algorithm": self.label, "seed": seed, "slot": slot, "agent": i, "regret": float(regret[i])}
            row.update({name: values[i] for name, values in extra.items()})
            row["messages_sent"] = int(ledger.sent_messages[b, i])
            row["bytes_sent"] = int(ledger.sent_bytes[b, i])
            row["cost"] = float(ledger.node_cost[b, i])
            if privacy:
                row["epsilon_spent"] = float(epsilon[b, i]) if epsilon is not None else NAN
                row["delta_spent"] = float(delta[b, i]) if delta is not None else NAN
            self.results.agents.append(row)
