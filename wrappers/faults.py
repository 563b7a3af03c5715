"""Fault injection: byzantine agents that corrupt what they send, message drops and extra delays.

Each fault is a :class:`~fedbandit_envs.core.MessageHook` that a PettingZoo wrapper hands to the environment's
simulation core for every episode (see :mod:`wrappers.chain`: the wrapped env itself is never changed), so it applies
on the PettingZoo path and on the runner's batched path alike (the same pattern as the DP wrappers). Wrappers of
different kinds compose in order, the innermost first (``MessageDrops(ByzantineAgents(env))`` corrupts each record
once, then loses copies of it); a chain holds one wrapper of each kind, since two would share a random stream.
``ByzantineAgents`` refuses to wrap ``MessageDrops`` or ``MessageDelays`` (a ``ValueError`` naming the order above):
they split each broadcast into copies, and delays release copies after their records' creation slot, so a byzantine
wrapper outside them would corrupt each copy on a draw of its own, or never corrupt a delayed flooded record.

Agents never see the hooks' state: which agents are byzantine and which records were
corrupted are hidden ground truth for evaluation.

Randomness comes from the episode's ``adversary`` stream: each hook kind draws from its own child of that stream
(byzantine: 0, drops: 1, delays: 2), so adding a fault never changes rewards, agents' choices or another fault's
stream. Within a kind, one stream serves every sender: a slot's draws are assigned in a canonical order of the
affected records (byzantine: replica, sender, then origin, creation slot, recipient, kind) or copies (drops, delays:
replica, sender, recipient, kind), so they do not depend on how the messages of a slot were batched nor on the order
in which a sender listed its messages (records tied on every key keep that order). Which copy gets which draw does
depend on the copies in play: a fault inside another that removes or adds copies, or one more message from any agent,
shifts the draws of every later copy of every sender.

* :class:`ByzantineAgents` / :class:`ByzantineAdversary` (dubey-pentland §1.4, §6 item 6, D12, D13): Huber
  contamination. ``mode="source"``: each record a byzantine agent creates has its target fields replaced, with
  probability ``contam_eps``, by a draw from ``Q``; every copy of it is then identical. ``mode="relay"``: in
  addition, every byzantine agent re-corrupts each record it forwards, with probability ``contam_eps``, and sends
  the same corrupted copy to all its neighbours. Records are recognised by the TTL-flooding header (``origin``,
  ``created``); a message without that header counts as created by its sender in the current slot. Batches without
  a target field pass unchanged. ``Q`` is :class:`PointMass` (default 10.0, D13), :class:`Uniform`,
  :class:`Normal` or any callable ``q(field, arm, true_value, rng) -> values`` on arrays.
* :class:`MessageDrops`: each point-to-point copy is lost with probability ``prob`` (optionally only some kinds or
  senders). A lost copy is never transmitted, so it costs nothing (a copy lost to the channel's ``drop_prob`` has
  used its link and is charged), and the results' ``dropped`` column, the channel's drops, does not count it.
* :class:`MessageDelays`: each point-to-point copy is held back for ``delay`` (+ uniform jitter) slots before it
  is transmitted, and charged in the slot it is transmitted; copies still held when the episode ends are lost,
  never transmitted nor charged. Receivers that deduplicate by age (TTL
  flooding) need a matching ``max_age``; Sync-LinUCB, which assumes instant synchronisation, fails under it (as
  under the channel's ``latency``) with an error that names both.

Hooks that act per copy expand ``NEIGHBOURS`` broadcasts into one row per neighbour (never adding a recipient).
Drops and delays act on the messages the agents send (to peers and to the server), never on a hosted server's
replies, which go to the channel after the hooks have run.

**A fault never silently does nothing.** Each hook counts the records (byzantine) or copies (drops, delays) it had to
act on: those of its target kinds, senders and fields. If that count is zero over an episode played to its last slot
(say ``fields=("reward",)`` on an algorithm that sends ``rel_mean``), the hook emits a :class:`FaultInactiveWarning`
naming the wrapper, what it looked for and the kinds and fields the messages actually had (``on_inactive="raise"``:
a :class:`FaultInactiveError`; ``"ignore"``: nothing). A fault with nothing to act on changes no trajectory, so the
check never alters a run. :data:`ATTACK_FIELDS` lists the fields to corrupt for each reference algorithm.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from fedbandit_envs.channel.flooding import HEADER_FIELDS
from fedbandit_envs.channel.messages import NEIGHBOURS, MessageBatch, draws_in_canonical_order
from fedbandit_envs.core import AgentContext
from fedbandit_envs.seeding import SeedStreams
from fedbandit_envs.topology import SERVER
from fedbandit_envs.validation import check_names
from wrappers.chain import HookClassWrapper, refuse_to_wrap

__all__ = [
    "ATTACK_FIELDS",
    "MODES",
    "ON_INACTIVE",
    "ByzantineAdversary",
    "ByzantineAgents",
    "DelayHook",
    "DropHook",
    "FaultInactiveError",
    "FaultInactiveWarning",
    "MessageDelays",
    "MessageDrops",
    "Normal",
    "PointMass",
    "Uniform",
]

#: Where a byzantine agent corrupts records.
MODES: tuple[str, ...] = ("source", "relay")

#: What a fault does when it had nothing to act on over an episode.
ON_INACTIVE: tuple[str, ...] = ("warn", "raise", "ignore")

#: The reward-derived payload fields each reference algorithm sends, by message kind: the ``fields`` (and ``kinds``)
#: a :class:`ByzantineAgents` should corrupt to attack it. Keys are names in ``fedbandit_envs.runner.ALGORITHMS``, or
#: ``module:Class`` for the other families. Algorithms that send no message (random, round_robin, independent_ucb1,
#: dubey_ucb1, dubey_dp_ucb_int, solanki_nf) cannot be attacked through their messages.
ATTACK_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "full_sharing_ucb": {"sample": ("reward",)},
    "cdp_mab": {"upload": ("mean",)},
    "ddp_mab": {"data": ("mean",)},
    "hdp_mab": {"forward": ("mean",), "sink_upload": ("own", "relayed")},
    "gossip_ucb": {"counts": ("counts",), "theta": ("theta",)},
    "fed_ucb": {"counts": ("counts",), "theta": ("theta",)},
    "dubey_private_ucb": {"dubey_release": ("rel_mean",)},
    "dubey_cooperative_ucb": {"dubey_exact": ("rel_mean",)},
    "dubey_byzantine_ucb": {"dubey_sample": ("reward",)},
    "solanki_fcb_sync": {"fcb_sync": ("l", "x")},
    "solanki_fcb": {"pfcb": ("wy",)},  # ("w", "y") with accounting="basic_strict"
    "solanki_pfcb": {"pfcb": ("wy",)},  # ("w", "y") with accounting="basic_strict"
    "agents.li_wang:AsyncLinUCB": {"upload": ("dV", "db")},  # and OneLinUCB, NLinUCB, AsyncLinUCBAM
    "agents.li_wang:SyncLinUCB": {"sync_upload": ("dV", "db")},
}


class FaultInactiveWarning(UserWarning):
    """A fault wrapper had no record or copy to act on over a whole episode.

    It was configured for messages the algorithm never sent (wrong ``fields``, ``kinds`` or ``senders``), so the run
    is the same as without it.
    """


class FaultInactiveError(RuntimeError):
    """Raised instead of :class:`FaultInactiveWarning` by a fault built with ``on_inactive="raise"``."""


#: Child index of each hook kind in the ``adversary`` stream.
_STREAM_CHILD = {"byzantine": 0, "drop": 1, "delay": 2}

Corruption = Callable[[str, np.ndarray, np.ndarray, np.random.Generator], np.ndarray]


def _probability(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number in [0, 1], got {type(value).__name__} {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return float(value)


#: Delays and jitters stay below this (so ``delay + jitter`` counts in int64); any delay of at least the episode's
#: remaining slots already delivers nothing.
_MAX_DELAY = 2**62


def _delay(name: str, value: Any) -> int:
    """``value`` as a delay in slots: an int in ``[0, _MAX_DELAY)`` (``ValueError`` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if int(value) >= _MAX_DELAY:
        raise ValueError(
            f"{name} must be an int in [0, 2**62), got {value!r}; a copy held for at least the slots left in the "
            "episode is never delivered, so a delay of the horizon already loses every copy"
        )
    return int(value)


def _real(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    return float(value)


def _stream(streams: SeedStreams, kind: str) -> np.random.Generator:
    parent = streams.sequence("adversary")
    child = np.random.SeedSequence(parent.entropy, spawn_key=(*parent.spawn_key, _STREAM_CHILD[kind]))
    return np.random.default_rng(child)


def _agent_ids(name: str, ids: Any, num_agents: int | None = None) -> np.ndarray:
    try:
        array = np.array(ids).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of agent indices, got {ids!r}") from None
    if array.size and (array.dtype.kind not in "iu" or np.any(array < 0)):
        raise ValueError(f"{name} must hold agent indices >= 0, got {ids!r}")
    if len(np.unique(array)) != len(array):
        raise ValueError(f"{name} must not repeat an agent, got {ids!r}")
    if num_agents is not None and np.any(array >= num_agents):
        bad = array[array >= num_agents].tolist()
        raise ValueError(f"{name} {bad} are not in the population: agents are 0..{num_agents - 1}")
    return array.astype(np.int64)


# ---------------------------------------------------------------------------------------------------- distributions Q
@dataclass(frozen=True)
class PointMass:
    """Q = a point mass at ``value`` (D13's default is 10.0, an outlier outside [0, 1]).

    Attributes:
        value: the corrupted value.
    """

    value: float = 10.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _real("value", self.value))

    def __call__(self, field: str, arm: np.ndarray, true_value: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``value`` for every record (draws nothing)."""
        return np.full(np.shape(true_value), self.value)


@dataclass(frozen=True)
class Uniform:
    """Q = U[low, high).

    Attributes:
        low: lower end.
        high: upper end (> low, with a finite width ``high - low``).
    """

    low: float = 0.0
    high: float = 1.0

    def __post_init__(self) -> None:
        if not _real("low", self.low) < _real("high", self.high):
            raise ValueError(f"Uniform needs low < high, got low={self.low}, high={self.high}")
        if not math.isfinite(self.high - self.low):
            raise ValueError(f"Uniform needs a finite width high - low, got low={self.low}, high={self.high}")

    def __call__(self, field: str, arm: np.ndarray, true_value: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One uniform draw per entry of ``true_value``."""
        return rng.uniform(self.low, self.high, np.shape(true_value))


#: Standard deviations a normal draw never exceeds (numpy's generator stays within about 14).
_NORMAL_REACH = 40


@dataclass(frozen=True)
class Normal:
    """Q = N(mean, std^2).

    Attributes:
        mean: the mean.
        std: the standard deviation (> 0, with ``mean +- 40 std`` finite, so that every draw is).
    """

    mean: float = 0.0
    std: float = 1.0

    def __post_init__(self) -> None:
        _real("mean", self.mean)
        if not _real("std", self.std) > 0:
            raise ValueError(f"std must be > 0, got {self.std}")
        if not math.isfinite(abs(self.mean) + _NORMAL_REACH * self.std):
            raise ValueError(
                f"std must leave mean +- {_NORMAL_REACH} std finite (a draw would overflow to inf), got "
                f"mean={self.mean}, std={self.std}"
            )

    def __call__(self, field: str, arm: np.ndarray, true_value: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One normal draw per entry of ``true_value``."""
        return rng.normal(self.mean, self.std, np.shape(true_value))


# ---------------------------------------------------------------------------------------------------- helpers
def _records(batch: MessageBatch, slot: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per record of a batch (rows x records per row): row index, origin, creation slot, records per row."""
    if all(name in batch.payload for name in HEADER_FIELDS):
        origin = batch.payload["origin"].reshape(len(batch), -1)
        created = batch.payload["created"].reshape(len(batch), -1)
    else:
        origin = np.repeat(batch.sender[:, None], 1, axis=1)
        created = np.full((len(batch), 1), slot, np.int64)
    per_row = origin.shape[1]
    return np.repeat(np.arange(len(batch)), per_row), origin.reshape(-1), created.reshape(-1), per_row


def _expand(batch: MessageBatch, context: AgentContext) -> MessageBatch:
    """One row per recipient: ``NEIGHBOURS`` rows become one row per neighbour (the server too, if linked)."""
    broadcast = batch.recipient == NEIGHBOURS
    if not np.any(broadcast):
        return batch
    rows, recipients = [np.flatnonzero(~broadcast)], [batch.recipient[~broadcast]]
    for r in np.flatnonzero(broadcast):
        topology = context.topologies[int(batch.replica[r])]
        sender = int(batch.sender[r])
        neighbours = topology.neighbours(sender)
        if topology.server_links[sender]:
            neighbours = np.append(neighbours, SERVER)
        rows.append(np.full(len(neighbours), r))
        recipients.append(neighbours)
    row, recipient = np.concatenate(rows), np.concatenate(recipients)
    order = np.argsort(row, kind="stable")
    return batch.with_rows(row[order], recipient[order], -1)


class _Hook:
    """Base of the fault hooks: the context, one generator per replica on its stream, and the inactivity check.

    Subclasses transform a slot's batches in :meth:`_apply` and count in :attr:`exposed` the records or copies they
    had to act on; :meth:`__call__` reports an episode in which that count stayed zero (see the module docstring).
    """

    stream_kind = "byzantine"
    wrapper = "ByzantineAgents"
    #: A fault acts on what is sent and never refuses it (an inactive fault is reported at the episode's end).
    refuses_steps = False

    def __init__(self, on_inactive: str) -> None:
        if on_inactive not in ON_INACTIVE:
            raise ValueError(f"on_inactive must be one of {ON_INACTIVE}, got {on_inactive!r}")
        self.on_inactive = on_inactive

    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Start an episode: one generator per replica on this hook's child of the ``adversary`` stream."""
        self.context = context
        self.rngs = [_stream(s, self.stream_kind) for s in streams]
        #: (B,) records (byzantine) or copies (drops, delays) the fault had to act on so far.
        self.exposed = np.zeros(context.num_replicas, np.int64)
        self._sent: dict[str, set[str]] = {}
        self._final_calls = 0

    def __call__(self, slot: int, batches: list[MessageBatch]) -> list[MessageBatch]:
        """Apply the fault to the slot's batches; at the episode's last call, report a fault that did nothing."""
        for batch in batches:
            self._sent.setdefault(batch.kind, set()).update(batch.payload)
        out = self._apply(slot, batches)
        if slot == self.context.horizon - 1:
            self._final_calls += 1
            if self._final_calls == getattr(self.context, "active_per_slot", 1) and not self.exposed.any():
                self._report_inactive()
        return out

    def checkpoint(self) -> dict[str, Any]:
        """The episode state a call changes (generators, counts), for :meth:`restore` when a later hook refuses."""
        return {
            "rngs": [rng.bit_generator.state for rng in self.rngs],
            "exposed": self.exposed.copy(),
            "sent": {kind: set(fields) for kind, fields in self._sent.items()},
            "final_calls": self._final_calls,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Put back the state :meth:`checkpoint` returned (the slot it was taken before was refused)."""
        for rng, rng_state in zip(self.rngs, state["rngs"]):
            rng.bit_generator.state = rng_state
        self.exposed, self._sent, self._final_calls = state["exposed"], state["sent"], state["final_calls"]

    def check_population(self, num_agents: int) -> None:
        """Raise ``ValueError`` unless the agents the fault names are among ``num_agents`` agents."""
        raise NotImplementedError

    def _apply(self, slot: int, batches: list[MessageBatch]) -> list[MessageBatch]:
        raise NotImplementedError

    def _target(self) -> str:
        """What the fault looks for, in words."""
        raise NotImplementedError

    def _hint(self) -> str:
        """How to point the fault at the messages actually sent."""
        raise NotImplementedError

    def _inactive_reason(self) -> str:
        """Why the fault acted on nothing, and what to change: what it looked for, against what was sent."""
        sent = "; ".join(f"{kind!r}: {sorted(fields)}" for kind, fields in sorted(self._sent.items()))
        return (
            f"it looks for {self._target()}, but the messages sent had (kind: fields) "
            f"{sent or 'none (no message was sent)'}. {self._hint()}"
        )

    def _report_inactive(self) -> None:
        if self.on_inactive == "ignore":
            return
        reason = self._inactive_reason()
        text = f"{self.wrapper} acted on nothing in this episode: {reason}, or pass on_inactive='ignore'"
        if self.on_inactive == "raise":
            raise FaultInactiveError(text)
        warnings.warn(text, FaultInactiveWarning, stacklevel=2)


class _PerCopyHook(_Hook):
    """A hook that decides per point-to-point copy of selected kinds and senders."""

    def __init__(self, kinds: Sequence[str] | None, senders: Sequence[int] | None, on_inactive: str) -> None:
        super().__init__(on_inactive)
        self.kinds = None if kinds is None else check_names("kinds", kinds)
        self.senders = None if senders is None else _agent_ids("senders", senders)

    def check_population(self, num_agents: int) -> None:
        """Raise ``ValueError`` unless every selected sender is one of ``num_agents`` agents."""
        if self.senders is not None:
            _agent_ids("senders", self.senders, num_agents)

    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Check the senders against the population and start the episode."""
        self.check_population(context.num_agents)
        super().reset(context, streams)

    def _split(self, batches: list[MessageBatch]) -> tuple[list[MessageBatch], list[MessageBatch]]:
        """The affected batches (expanded per copy, rows of selected senders) and the untouched rest."""
        affected, rest = [], []
        for batch in batches:
            if self.kinds is not None and batch.kind not in self.kinds:
                rest.append(batch)
                continue
            selected = np.ones(len(batch), bool) if self.senders is None else np.isin(batch.sender, self.senders)
            if np.any(~selected):
                rest.append(batch.take(~selected))
            if np.any(selected):
                affected.append(_expand(batch.take(selected), self.context))
                self.exposed += np.bincount(affected[-1].replica, minlength=len(self.exposed))
        return affected, rest

    def _target(self) -> str:
        kinds = "any kind" if self.kinds is None else f"kinds {sorted(self.kinds)}"
        senders = "any sender" if self.senders is None else f"senders {self.senders.tolist()}"
        return f"copies of {kinds} from {senders}"

    def _hint(self) -> str:
        return "Check kinds and senders against the kinds above"

    def _draws(
        self, batches: list[MessageBatch], draw: Callable[[np.random.Generator, int], np.ndarray]
    ) -> list[np.ndarray]:
        """One value per row of every batch, drawn per replica in the canonical row order (``canonical_order``)."""
        return draws_in_canonical_order(batches, self.rngs, draw)


# ---------------------------------------------------------------------------------------------------- byzantine
class ByzantineAdversary(_Hook):
    """Message hook corrupting the records of byzantine agents (see the module docstring).

    Args:
        contam_eps: probability that a record is corrupted at each corruption point, in [0, 1].
        byzantine: explicit byzantine agent ids (the same in every replica; checked against the population), or
            ``None``.
        fraction: with ``byzantine=None``, the fraction of agents chosen byzantine per replica (``round(f M)``
            agents, Python's rounding, uniformly, from the adversary stream); default 1.0 (D13: every agent, the
            paper's setting). A fraction above 0 must select at least one agent (``ValueError`` otherwise);
            ``fraction=0``, like ``byzantine=[]``, selects none on purpose, and the episode then warns that no agent
            is byzantine (``on_inactive``).
        mode: ``"source"`` (corrupt at creation, D13) or ``"relay"`` (also at every byzantine forwarder).
        q: the corruption distribution Q: :class:`PointMass`, :class:`Uniform`, :class:`Normal` or a callable
            ``q(field, arm, true_value, rng) -> values`` (arrays; ``arm`` is -1 when the payload has no ``arm``). Its
            values must be finite and fit the field's dtype (whole numbers for integer fields): a ``ValueError``
            naming ``q`` is raised in the slot it returns others.
        fields: payload fields replaced by Q (default ``("reward",)``; :data:`ATTACK_FIELDS` lists those of each
            reference algorithm).
        kinds: message kinds to corrupt (default: every kind carrying a target field).
        on_inactive: ``"warn"`` (:class:`FaultInactiveWarning`), ``"raise"`` (:class:`FaultInactiveError`) or
            ``"ignore"`` when no record was exposed to corruption over an episode.
    """

    stream_kind = "byzantine"
    wrapper = "ByzantineAgents"

    def __init__(
        self,
        contam_eps: float,
        byzantine: Sequence[int] | None = None,
        fraction: float | None = None,
        mode: str = "source",
        q: Corruption | None = None,
        fields: Sequence[str] = ("reward",),
        kinds: Sequence[str] | None = None,
        on_inactive: str = "warn",
    ) -> None:
        super().__init__(on_inactive)
        self.contam_eps = _probability("contam_eps", contam_eps)
        if byzantine is not None and fraction is not None:
            raise ValueError("give either byzantine (agent ids) or fraction, not both")
        self.ids = None if byzantine is None else _agent_ids("byzantine", byzantine)
        self.fraction = _probability("fraction", 1.0 if fraction is None else fraction)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.q = PointMass() if q is None else q
        if not callable(self.q):
            raise TypeError(
                f"q must be PointMass, Uniform, Normal or a callable q(field, arm, true_value, rng), got {q!r}"
            )
        if isinstance(fields, Iterator):  # read once: checked and kept from the same list
            fields = list(fields)
        if not check_names("fields", fields, "('reward',)"):
            raise TypeError(f"fields must be a non-empty sequence of payload field names, got {fields!r}")
        # corruption draws follow this order: a set's iteration order is its strings' hashes', so it is sorted
        self.fields = tuple(sorted(fields)) if isinstance(fields, set | frozenset) else tuple(fields)
        self.kinds = None if kinds is None else check_names("kinds", kinds)

    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Choose the byzantine agents of every replica; clear the hidden log."""
        super().reset(context, streams)
        b, m = context.num_replicas, context.num_agents
        self.check_population(m)
        #: (B, M) hidden ground truth: which agents are byzantine.
        self.byzantine = np.zeros((b, m), bool)
        if self.ids is not None:
            self.byzantine[:, self.ids] = True
        else:
            for r, rng in enumerate(self.rngs):
                self.byzantine[r, rng.permutation(m)[: self._count(m)]] = True
        #: (B,) corruptions applied (``exposed``: the records exposed to corruption, i.e. created, or relayed in
        #: relay mode, by byzantine agents in messages carrying a target field).
        self.corrupted = np.zeros(b, np.int64)
        self._log: list[dict[str, np.ndarray]] = []

    def checkpoint(self) -> dict[str, Any]:
        """The base state, the corruption counts and the length of the hidden log."""
        return {**super().checkpoint(), "corrupted": self.corrupted.copy(), "logged": len(self._log)}

    def restore(self, state: dict[str, Any]) -> None:
        """Put back the counts and drop the log entries of the refused slot."""
        super().restore(state)
        self.corrupted = state["corrupted"]
        del self._log[state["logged"] :]

    def check_population(self, num_agents: int) -> None:
        """Raise ``ValueError`` unless the byzantine agents are among ``num_agents`` agents and not none by accident.

        Every explicit id must be one of the agents, and a ``fraction`` above 0 must select at least one of them
        (``fraction=0`` and ``byzantine=[]`` select none on purpose).
        """
        if self.ids is not None:
            _agent_ids("byzantine", self.ids, num_agents)
        elif self.fraction > 0 and self._count(num_agents) == 0:
            selects = f"round({self.fraction:g} * {num_agents}) = 0"
            raise ValueError(
                f"fraction={self.fraction:g} of {num_agents} agents selects {selects} byzantine agents; pass a "
                f"fraction above {0.5 / num_agents:g} to select at least one (or byzantine=[...]), or fraction=0 for "
                "none on purpose"
            )

    def _count(self, num_agents: int) -> int:
        """How many of ``num_agents`` agents ``fraction`` selects: ``round(fraction * num_agents)``."""
        return int(round(self.fraction * num_agents))

    def _targeted(self, batch: MessageBatch) -> bool:
        return (self.kinds is None or batch.kind in self.kinds) and any(f in batch.payload for f in self.fields)

    def _target(self) -> str:
        kinds = "any kind" if self.kinds is None else f"kinds {sorted(self.kinds)}"
        return f"fields {list(self.fields)} in messages of {kinds} sent by its byzantine agents"

    def _hint(self) -> str:
        carried = any(
            (self.kinds is None or kind in self.kinds) and not fields.isdisjoint(self.fields)
            for kind, fields in self._sent.items()
        )
        if carried:
            relayed = " or forwarded" if self.mode == "relay" else ""
            return (
                f"Messages carried those fields, but none was a record its byzantine agents created{relayed}: "
                "make agents that send such records byzantine (byzantine=[...])"
            )
        return "Pass fields=... (wrappers.faults.ATTACK_FIELDS lists them for every reference algorithm)"

    def _inactive_reason(self) -> str:
        if not self.byzantine.any():
            chosen = "byzantine=[]" if self.ids is not None else f"fraction={self.fraction:g}"
            return (
                f"no agent is byzantine ({chosen}), so no record was exposed to corruption. Name byzantine agents "
                "(byzantine=[...] or a fraction above 0) to corrupt records"
            )
        return super()._inactive_reason()

    def _apply(self, slot: int, batches: list[MessageBatch]) -> list[MessageBatch]:
        """Corrupt the target fields of exposed records; other messages pass unchanged."""
        columns: list[list[np.ndarray]] = [[] for _ in range(10)]
        kinds = sorted({batch.kind for batch in batches})
        per_row: dict[int, int] = {}
        for i, batch in enumerate(batches):
            if not self._targeted(batch):
                continue
            row, origin, created, per_row[i] = _records(batch, slot)
            sender, replica = batch.sender[row], batch.replica[row]
            created_here = (origin == sender) & (created == slot)
            exposed = np.flatnonzero(self.byzantine[replica, sender] & (created_here | (self.mode == "relay")))
            stage = np.where(created_here[exposed], 0, 1)
            found = (np.full(len(exposed), i), exposed, replica[exposed], sender[exposed], origin[exposed])
            rank = np.full(len(exposed), kinds.index(batch.kind))
            recipient = batch.recipient[row[exposed]]
            for column, values in zip(
                columns, (*found, created[exposed], stage, np.full(len(exposed), slot), rank, recipient)
            ):
                column.append(values)
        if not per_row:
            return batches
        batch_id, record, replica, sender, origin, created, stage, slots, kind, recipient = (
            np.concatenate(c) for c in columns
        )
        # the canonical order of the module docstring (kind last): draws do not depend on how messages were listed
        order = np.lexsort((kind, recipient, created, origin, sender, replica))
        payloads: dict[int, dict[str, np.ndarray]] = {}
        for b in np.unique(replica):
            rows = order[replica[order] == b]
            rng = self.rngs[int(b)]
            hit = rows[rng.random(len(rows)) < self.contam_eps]
            self.exposed[b] += len(rows)
            self.corrupted[b] += len(hit)
            for field in self.fields:
                chosen = hit[[field in batches[i].payload for i in batch_id[hit]]]
                if len(chosen) == 0:
                    continue
                views = {
                    i: self._writable(i, batches[i], payloads, field, per_row[i]) for i in np.unique(batch_id[chosen])
                }
                true_value = np.stack([views[i][r] for i, r in zip(batch_id[chosen], record[chosen])])
                arm = np.array(
                    [
                        batches[i].payload["arm"].reshape(-1)[r] if "arm" in batches[i].payload else -1
                        for i, r in zip(batch_id[chosen], record[chosen])
                    ],
                    np.int64,
                )
                value = np.asarray(self.q(field, arm, true_value, rng), np.float64)
                if value.shape != true_value.shape:
                    raise ValueError(f"q returned shape {value.shape} for {field!r} values of shape {true_value.shape}")
                if not np.isfinite(value).all():
                    raise ValueError(
                        f"q of ByzantineAgents returned a non-finite value (NaN or inf) for field {field!r}: "
                        f"q={getattr(self.q, '__qualname__', None) or self.q!r} must return finite values (a message "
                        "carries finite values only)"
                    )
                for i, r, v in zip(batch_id[chosen], record[chosen], value):
                    views[i][r] = self._cast(field, v, views[i].dtype)
                self._log.append(
                    {
                        "slot": slots[chosen],
                        "replica": replica[chosen],
                        "sender": sender[chosen],
                        "origin": origin[chosen],
                        "created": created[chosen],
                        "stage": stage[chosen],
                        "field": np.full(len(chosen), field, dtype=object),
                        "true_value": true_value.reshape(len(chosen), -1)[:, 0].astype(np.float64),
                        "value": value.reshape(len(chosen), -1)[:, 0],
                    }
                )
        return [
            batch.with_payload({**batch.payload, **payloads[i]}, batch.privacy) if i in payloads else batch
            for i, batch in enumerate(batches)
        ]

    @staticmethod
    def _writable(i: int, batch: MessageBatch, payloads: dict, field: str, per_row: int) -> np.ndarray:
        """A writable copy of batch ``i``'s field (kept in ``payloads``), viewed with one entry per record."""
        fields = payloads.setdefault(i, {})
        if field not in fields:
            fields[field] = np.array(batch.payload[field])
        array = fields[field]
        leading = 2 if all(name in batch.payload for name in HEADER_FIELDS) else 1
        return array.reshape(len(batch) * per_row, *array.shape[leading:])

    @staticmethod
    def _cast(field: str, value: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Q's (finite) ``value`` in the field's ``dtype``; ValueError unless it is whole (integer fields) and fits."""
        if dtype.kind in "iu" and not np.all(value == np.round(value)):
            raise ValueError(f"q must return whole numbers for the integer field {field!r}, got {value!r}")
        info = np.iinfo(dtype) if dtype.kind in "iu" else np.finfo(dtype) if dtype.kind == "f" else None
        if info is not None and not np.all((value >= info.min) & (value <= info.max)):
            raise ValueError(f"q returned {value!r} for the field {field!r}, beyond the range of its dtype {dtype}")
        return np.asarray(value).astype(dtype)

    def corruptions(self) -> dict[str, np.ndarray]:
        """Hidden log: one entry per corrupted record and field.

        Columns: slot, replica, sender (the corrupting agent), origin, created, stage (0 at creation, 1 at a
        relay), field, true_value and value (first entry of vector fields). ``value`` is Q's: a DP wrapper outside
        (``LaplaceMessageDP(ByzantineAgents(env))``) then clips it to the field's declared bounds and adds noise, so
        receivers get another value.
        """
        names = ("slot", "replica", "sender", "origin", "created", "stage", "field", "true_value", "value")
        if not self._log:
            return {n: np.zeros(0, object if n == "field" else np.float64 if "value" in n else np.int64) for n in names}
        return {n: np.concatenate([entry[n] for entry in self._log]) for n in names}

    def corrupted_ids(self, replica: int = 0) -> set[tuple[int, int]]:
        """Ids ``(origin, created)`` of the records of ``replica`` corrupted at least once."""
        log = self.corruptions()
        mine = log["replica"] == replica
        return set(zip(log["origin"][mine].tolist(), log["created"][mine].tolist()))


# ---------------------------------------------------------------------------------------------------- drops and delays
class DropHook(_PerCopyHook):
    """Message hook losing each point-to-point copy an agent sends with probability ``prob``.

    A hosted server's replies are not affected (see the module docstring); a lost copy is never transmitted, so the
    ledger does not charge it.

    Args:
        prob: loss probability per copy, in [0, 1].
        kinds: message kinds affected (default: all).
        senders: sending agents affected (default: all agents; never the server).
        on_inactive: ``"warn"`` (default), ``"raise"`` or ``"ignore"`` when no copy was subject to loss over an
            episode (see :class:`FaultInactiveWarning`).
    """

    stream_kind = "drop"
    wrapper = "MessageDrops"

    def __init__(
        self,
        prob: float,
        kinds: Sequence[str] | None = None,
        senders: Sequence[int] | None = None,
        on_inactive: str = "warn",
    ) -> None:
        super().__init__(kinds, senders, on_inactive)
        self.prob = _probability("prob", prob)

    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Start an episode with no copy dropped."""
        super().reset(context, streams)
        #: (B,) copies dropped so far.
        self.dropped = np.zeros(context.num_replicas, np.int64)

    def checkpoint(self) -> dict[str, Any]:
        """The base state and the drop counts."""
        return {**super().checkpoint(), "dropped": self.dropped.copy()}

    def restore(self, state: dict[str, Any]) -> None:
        """Put back the counts."""
        super().restore(state)
        self.dropped = state["dropped"]

    def _apply(self, slot: int, batches: list[MessageBatch]) -> list[MessageBatch]:
        """The batches without the lost copies."""
        affected, rest = self._split(batches)
        draws = self._draws(affected, lambda rng, n: rng.random(n))
        for batch, draw in zip(affected, draws):
            lost = draw < self.prob
            np.add.at(self.dropped, batch.replica[lost], 1)
            rest.append(batch.take(~lost))
        return [batch for batch in rest if len(batch)]


class DelayHook(_PerCopyHook):
    """Message hook holding each point-to-point copy an agent sends back for ``delay + U{0..jitter}`` slots.

    A held copy goes out with the messages of its due slot, and is charged then: every family routes every slot
    (every report round) while the episode has a message hook, silent ones included, so nothing held is left behind
    mid-episode. A hosted server's replies are not affected (see the module docstring).

    Args:
        delay: extra slots before a copy is transmitted, in ``[0, 2**62)``; a copy held beyond the episode's last slot
            is never delivered (so a delay of at least the horizon loses every copy, at no cost).
        jitter: an extra uniform delay in ``{0, ..., jitter}`` per copy (adversary stream), in ``[0, 2**62)``.
        kinds, senders, on_inactive: the copies affected and what an episode without any does, as in
            :class:`DropHook`.
    """

    stream_kind = "delay"
    wrapper = "MessageDelays"

    def __init__(
        self,
        delay: int,
        jitter: int = 0,
        kinds: Sequence[str] | None = None,
        senders: Sequence[int] | None = None,
        on_inactive: str = "warn",
    ) -> None:
        super().__init__(kinds, senders, on_inactive)
        self.delay = _delay("delay", delay)
        self.jitter = _delay("jitter", jitter)

    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Start an episode with nothing held back."""
        super().reset(context, streams)
        self._held: dict[int, list[MessageBatch]] = {}

    def checkpoint(self) -> dict[str, Any]:
        """The base state and the copies held back (batches are immutable: the lists are copied)."""
        return {**super().checkpoint(), "held": {due: list(batches) for due, batches in self._held.items()}}

    def restore(self, state: dict[str, Any]) -> None:
        """Put back what was held."""
        super().restore(state)
        self._held = state["held"]

    def _apply(self, slot: int, batches: list[MessageBatch]) -> list[MessageBatch]:
        """Undelayed copies, plus the held copies due in this slot; hold the others."""
        affected, out = self._split(batches)
        if self.jitter:
            extras = self._draws(affected, lambda rng, n: rng.integers(0, self.jitter + 1, n))
        else:
            extras = [np.zeros(len(batch)) for batch in affected]
        for batch, extra in zip(affected, extras):
            delays = self.delay + extra.astype(np.int64)
            for d in np.unique(delays):
                part = batch.take(delays == d)
                if d == 0:
                    out.append(part)
                else:
                    self._held.setdefault(slot + int(d), []).append(part)
        out.extend(self._held.pop(slot, []))
        return [batch for batch in out if len(batch)]


# ---------------------------------------------------------------------------------------------------- wrappers
class _FaultWrapper(HookClassWrapper):
    """A wrapper handing the environment one fault hook, built from the wrapper's arguments after ``env``.

    The agents the hook names are checked against the environment's population.
    """

    hook: _Hook

    def __init__(self, env: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(env, *args, **kwargs)
        self.hook.check_population(len(env.possible_agents))


#: The layers ByzantineAgents refuses to wrap (attribute of the layer, why): it corrupts once per record (D13).
_PER_RECORD_REFUSALS = (
    (
        "holds_copies",
        "a copy it holds back would reach ByzantineAgents only when released, after the slot its record was created "
        "in, so a flooded record would never be corrupted (and a message without a header would be corrupted per "
        "copy, as if created when released)",
    ),
    (
        "splits_broadcasts",
        "it splits every NEIGHBOURS broadcast into one row per recipient, so each copy of a record would get a "
        "corruption draw of its own instead of one draw per record (every copy identical)",
    ),
)


class ByzantineAgents(_FaultWrapper):
    """Makes some agents byzantine: what they send is corrupted by :class:`ByzantineAdversary` (honest code untouched).

    One per wrapper chain; with other kinds it composes in order, the innermost first (see :mod:`wrappers.chain`).
    It refuses to wrap :class:`MessageDrops` or :class:`MessageDelays` (``ValueError``): corruption is drawn once per
    record, before its copies are split, so those go outside it (``MessageDrops(ByzantineAgents(env, ...), ...)``).

    Example::

        env = ByzantineAgents(FederatedMAB(...), contam_eps=1e-3, fraction=1.0, q=PointMass(10.0))

    Args:
        env: a fedbandit environment.
        contam_eps, byzantine, fraction, mode, q, fields, kinds, on_inactive: as in :class:`ByzantineAdversary`.
    """

    kind = "byzantine agents"
    combine = "pass every byzantine agent to one ByzantineAgents (byzantine=[...] or fraction=...)"
    hook_class = ByzantineAdversary
    hook: ByzantineAdversary

    def __init__(self, env: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(env, *args, **kwargs)  # a second ByzantineAgents is refused first
        for attribute, why in _PER_RECORD_REFUSALS:
            refuse_to_wrap(
                "ByzantineAgents",
                env,
                attribute,
                why,
                "each record is corrupted once, as its byzantine agent sends it, and its copies are then lost or "
                "delayed alike",
            )

    @property
    def adversary(self) -> ByzantineAdversary:
        """The wrapper's hook (hidden ground truth: ``byzantine``, ``corruptions()``, ``corrupted_ids()``)."""
        return self.hook


class MessageDrops(_FaultWrapper):
    """Loses each point-to-point copy with probability ``prob`` (see :class:`DropHook`).

    One per wrapper chain; with other kinds it composes in order, the innermost first (see :mod:`wrappers.chain`).

    Args:
        env: a fedbandit environment.
        prob, kinds, senders, on_inactive: as in :class:`DropHook`.
    """

    kind = "message drops"
    splits_broadcasts = True
    combine = "use one MessageDrops with prob = 1 - (1 - p1) * (1 - p2)"
    hook_class = DropHook


class MessageDelays(_FaultWrapper):
    """Holds each point-to-point copy back for ``delay + U{0..jitter}`` slots (see :class:`DelayHook`).

    One per wrapper chain; with other kinds it composes in order, the innermost first (see :mod:`wrappers.chain`).

    Args:
        env: a fedbandit environment.
        delay, jitter, kinds, senders, on_inactive: as in :class:`DelayHook`.
    """

    kind = "message delays"
    splits_broadcasts = True
    combine = (
        "use one MessageDelays with the delays added (a jitter of j1 + j2 spans the two jitters' range, but spreads "
        "copies uniformly over it, where two stacked jitters do not)"
    )
    holds_copies = True
    hook_class = DelayHook
