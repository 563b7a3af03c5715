"""TTL flooding: relay records over a graph for ``gamma`` hops, one hop per slot (dubey-pentland §2.0, §6 item 4).

A :class:`TTLFlooding` service lives on the agents' side, inside a vectorised population: it builds the
outgoing message batches of a slot and reads the copies that the channel delivers, so every point-to-point
copy travels through the channel (and its hooks: faults, adversaries) and is counted by the ledger.

Protocol (decision D5 of the Dubey-Pentland spec):

* a **record** has the header ``origin`` (creating agent), ``created`` (slot in which it was first sent) and
  ``ttl``, plus content fields; its id is ``(origin, created)``;
* in slot ``s`` each agent sends, to every neighbour, its own new record and every record it first received in
  slot ``s - 1`` whose ``ttl`` is still positive. The ``ttl`` of every outgoing copy is decremented first, so a
  copy received at hop distance ``h`` carries ``gamma - h`` and is forwarded iff ``h < gamma``; ``gamma = 0``
  sends nothing;
* a received copy whose id is already in the agent's ``seen`` set (including the agent's own records) is a
  duplicate and is dropped. Copies arriving in the same slot are taken in the order (origin, created, sender), so
  the first copy wins;
* timing: one hop per slot. A record created in slot ``s`` by agent ``o`` reaches agent ``m`` at distance
  ``d = d(o, m) <= gamma`` in the feedback of slot ``s + d - 1``, and ``m`` can use it when it acts in slot
  ``s + d``: it is usable ``d`` slots after its creation.

In steady state agent ``m`` transmits ``deg(m) * |B_{gamma-1}(m)|`` copies per slot (spec §2.6).

**Packing.** The ``n`` records an agent sends in a slot travel in one row per set bit of ``n`` (row sizes are
powers of two, largest first, e.g. 13 = 8 + 4 + 1), and ``MessageBatch.count`` of a row is its number of records:
the ledger counts logical records exactly while the channel routes at most ``log2(n) + 1`` rows per link, in at
most that many batches per slot. Each payload field has shape ``(rows, R, ...)`` for rows of ``R`` records, so the
ledger's scalar and byte counts are exact (no padding).

**Bounded memory.** ``seen`` is a ring buffer over creation slots of width ``max_age + 1``: a copy older than
``max_age`` slots on arrival is discarded and counted as ``expired``. On an ideal channel no copy is older than
``gamma - 1`` slots (the default); raise ``max_age`` when links add latency (channel latency or a delay wrapper).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from fedbandit_envs.channel.messages import NEIGHBOURS, MessageBatch
from fedbandit_envs.channel.privacy import PrivacySchema, Public

__all__ = ["HEADER_FIELDS", "FloodRecords", "TTLFlooding"]

#: Payload fields of the record header, present in every flooded batch.
HEADER_FIELDS: tuple[str, ...] = ("origin", "created", "ttl")


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


@dataclass(frozen=True)
class FloodRecords:
    """Records held by agents, as parallel arrays (one entry per record).

    Attributes:
        replica: (n,) replica index.
        holder: (n,) agent that received (or created) the record.
        sender: (n,) neighbour the copy came from.
        origin: (n,) agent that created the record.
        created: (n,) slot in which the record was created (first sent).
        ttl: (n,) hops the record may still travel after this holder (0: not forwarded).
        content: content field name -> (n, ...) array.
    """

    replica: np.ndarray
    holder: np.ndarray
    sender: np.ndarray
    origin: np.ndarray
    created: np.ndarray
    ttl: np.ndarray
    content: Mapping[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.origin)

    def take(self, rows: np.ndarray) -> FloodRecords:
        """The records at ``rows`` (indices or a boolean mask)."""
        rows = np.flatnonzero(rows) if rows.dtype == bool else rows
        # np.take: row gathers of multi-dimensional fields are an order of magnitude faster than fancy indexing
        return FloodRecords(
            *(np.take(getattr(self, name), rows) for name in ("replica", "holder", "sender", "origin", "created")),
            np.take(self.ttl, rows),
            {name: np.take(values, rows, axis=0) for name, values in self.content.items()},
        )

    @staticmethod
    def concatenate(parts: Sequence[FloodRecords]) -> FloodRecords:
        """One record set with the entries of ``parts`` in order (all parts share their content fields)."""
        names = parts[0].content.keys()
        return FloodRecords(
            *(np.concatenate([getattr(p, a) for p in parts]) for a in ("replica", "holder", "sender", "origin")),
            np.concatenate([p.created for p in parts]),
            np.concatenate([p.ttl for p in parts]),
            {name: np.concatenate([p.content[name] for p in parts]) for name in names},
        )


class TTLFlooding:
    """Agent-side TTL flooding of records for B replicas of M agents (see the module docstring).

    Typical use inside a population::

        flood = TTLFlooding(gamma=2, kind="sample")
        flood.reset(num_replicas, num_agents)
        batches = flood.send(slot, {"arm": arms, "reward": rewards})   # in act(): (B, M) content per agent
        new = flood.receive(slot, feedback.inbox)                      # in observe(): first copies only

    Args:
        gamma: time-to-live in hops (>= 0); 0 disables communication.
        kind: message kind of the flooded batches (other kinds in an inbox are ignored).
        max_age: oldest copy age (arrival slot - creation slot) that is still processed; default ``gamma - 1``.
        privacy: privacy declaration of the content fields (the header fields are declared ``Public`` when given).
    """

    def __init__(
        self, gamma: int, kind: str = "flood", max_age: int | None = None, privacy: PrivacySchema | None = None
    ) -> None:
        self.gamma = _check_int("gamma", gamma, 0)
        if not isinstance(kind, str) or not kind:
            raise TypeError(f"kind must be a non-empty str, got {kind!r}")
        self.kind = kind
        self.max_age = max(self.gamma - 1, 0) if max_age is None else _check_int("max_age", max_age, 0)
        if privacy is not None:
            privacy = {**{name: Public() for name in HEADER_FIELDS}, **privacy}
        self.privacy = privacy

    # ------------------------------------------------------------------ episode
    def reset(self, num_replicas: int, num_agents: int) -> None:
        """Forget every record; zero the statistics."""
        b = _check_int("num_replicas", num_replicas, 1)
        m = _check_int("num_agents", num_agents, 1)
        self.num_replicas, self.num_agents = b, m
        self._window = self.max_age + 1
        self._seen = np.full(b * m * m * self._window, -1, np.int64)
        self._queue: FloodRecords | None = None
        #: (B, M) records created by each agent.
        self.created = np.zeros((b, m), np.int64)
        #: (B, M) copies of flooded records delivered to each agent (records, not rows).
        self.received = np.zeros((b, m), np.int64)
        #: (B, M) first copies (new records) accepted by each agent.
        self.accepted = np.zeros((b, m), np.int64)
        #: (B, M) duplicate copies dropped by each agent.
        self.duplicates = np.zeros((b, m), np.int64)
        #: (B, M) copies discarded because they were older than ``max_age`` on arrival.
        self.expired = np.zeros((b, m), np.int64)
        #: (B, max_age + 1) first receipts by age (arrival slot - creation slot); age = hop distance - 1.
        self.ages = np.zeros((b, self._window), np.int64)

    # ------------------------------------------------------------------ sending
    def _own_records(self, slot: int, content: Mapping[str, np.ndarray]) -> FloodRecords:
        b, m = self.num_replicas, self.num_agents
        fields = {}
        for name, values in content.items():
            array = np.asarray(values)
            if array.shape[:2] != (b, m):
                raise ValueError(
                    f"content field {name!r} must have shape ({b}, {m}, ...) (replicas, agents), got {array.shape}"
                )
            fields[name] = array.reshape(b * m, *array.shape[2:])
        replica = np.repeat(np.arange(b), m)
        agent = np.tile(np.arange(m), b)
        created = np.full(b * m, slot, np.int64)
        self._seen[self._cells(replica, agent, agent, created)] = slot
        self.created += 1
        return FloodRecords(replica, agent, agent, agent, created, np.full(b * m, self.gamma, np.int64), fields)

    def send(self, slot: int, content: Mapping[str, np.ndarray] | None) -> list[MessageBatch]:
        """The batches of ``slot``: each agent's new record (if ``content`` is given) plus its forwards.

        Args:
            slot: the current slot (the creation slot of the new records).
            content: field name -> (B, M, ...) array, the new record of every agent; ``None``: create none.

        Returns one batch per row size (a power of two, see the module docstring), addressed to ``NEIGHBOURS``.
        """
        if self.gamma == 0:
            return []
        parts = [] if content is None else [self._own_records(slot, content)]
        if self._queue is not None and len(self._queue):
            parts.append(self._queue)
        self._queue = None
        if not parts:
            return []
        records = FloodRecords.concatenate(parts) if len(parts) > 1 else parts[0]
        forwarded = records.origin != records.holder
        # per sender: its own record first, then its forwards in (origin, created) order
        order = np.lexsort((records.created, records.origin, forwarded, records.holder, records.replica))
        key = (records.replica * self.num_agents + records.holder)[order]
        payload = {
            "origin": records.origin[order],
            "created": records.created[order],
            "ttl": records.ttl[order] - 1,
            **{name: np.take(values, order, axis=0) for name, values in records.content.items()},
        }
        senders, starts, counts = np.unique(key, return_index=True, return_counts=True)
        batches = []
        for bit in range(int(counts.max()).bit_length() - 1, -1, -1):
            rows = (counts >> bit) & 1 == 1  # senders whose record count has this bit set
            if not np.any(rows):
                continue
            size = 1 << bit
            first = starts[rows] + ((counts[rows] >> (bit + 1)) << (bit + 1))  # after the rows of the larger bits
            index = first[:, None] + np.arange(size)[None, :]
            batches.append(
                MessageBatch(
                    kind=self.kind,
                    replica=senders[rows] // self.num_agents,
                    sender=senders[rows] % self.num_agents,
                    recipient=np.full(int(rows.sum()), NEIGHBOURS),
                    payload={name: np.take(values, index, axis=0) for name, values in payload.items()},
                    count=np.full(int(rows.sum()), size),
                    privacy=self.privacy,
                )
            )
        return batches

    # ------------------------------------------------------------------ receiving
    def _cells(self, replica: np.ndarray, holder: np.ndarray, origin: np.ndarray, created: np.ndarray) -> np.ndarray:
        m = self.num_agents
        return ((replica * m + holder) * m + origin) * self._window + created % self._window

    def _flatten(self, inbox: Sequence[MessageBatch]) -> FloodRecords | None:
        parts = []
        for batch in inbox:
            if batch.kind != self.kind or len(batch) == 0:
                continue
            missing = [name for name in HEADER_FIELDS if name not in batch.payload]
            if missing:
                raise ValueError(f"flooded batch of kind {self.kind!r} lacks header fields {missing}")
            r = batch.payload["origin"].shape[1]
            rows = len(batch) * r
            parts.append(
                FloodRecords(
                    np.repeat(batch.replica, r),
                    np.repeat(batch.recipient, r),
                    np.repeat(batch.sender, r),
                    batch.payload["origin"].reshape(rows),
                    batch.payload["created"].reshape(rows),
                    batch.payload["ttl"].reshape(rows),
                    {
                        name: values.reshape(rows, *values.shape[2:])
                        for name, values in batch.payload.items()
                        if name not in HEADER_FIELDS
                    },
                )
            )
        if not parts:
            return None
        return FloodRecords.concatenate(parts) if len(parts) > 1 else parts[0]

    def receive(self, slot: int, inbox: Sequence[MessageBatch]) -> FloodRecords | None:
        """Process the copies delivered in ``slot``; return the new records (``None`` if nothing arrived).

        New records are the first copies of ids not seen before, sorted by (replica, holder, origin, created);
        those with ``ttl > 0`` are queued and forwarded by :meth:`send` in the next slot.
        """
        copies = self._flatten(inbox)
        if copies is None:
            return None
        b, m, w = self.num_replicas, self.num_agents, self._window
        if np.any((copies.origin < 0) | (copies.origin >= m)):
            raise ValueError(f"a flooded record has an origin outside [0, {m}); records must name their creator")
        holder_index = copies.replica * m + copies.holder
        per_holder = b * m
        self.received += np.bincount(holder_index, minlength=per_holder).reshape(b, m)
        age = slot - copies.created
        fresh = (age >= 0) & (age < w)
        all_fresh = bool(fresh.all())
        if not all_fresh:
            self.expired += np.bincount(holder_index[~fresh], minlength=per_holder).reshape(b, m)
        pair = holder_index * m + copies.origin
        cells = pair * w + copies.created % w if w > 1 else pair
        unseen = self._seen[cells] != copies.created
        candidate = np.flatnonzero(unseen if all_fresh else fresh & unseen)
        # one sort gives the canonical order (replica, holder, origin, created) and, within an id, the sender order
        record_key = pair * w + (w - 1 - age) if w > 1 else pair
        order = candidate[np.argsort(record_key[candidate] * (m + 1) + copies.sender[candidate])]
        record_key = record_key[order]
        first = np.ones(len(order), bool)
        first[1:] = record_key[1:] != record_key[:-1]
        winners = order[first]
        self._seen[cells[winners]] = copies.created[winners]
        accepted = np.bincount(holder_index[winners], minlength=per_holder).reshape(b, m)
        self.accepted += accepted
        fresh_copies = holder_index if all_fresh else holder_index[fresh]
        self.duplicates += np.bincount(fresh_copies, minlength=per_holder).reshape(b, m) - accepted
        self.ages += np.bincount(copies.replica[winners] * w + age[winners], minlength=b * w).reshape(b, w)
        new = copies.take(winners)
        forward = new.take(new.ttl > 0)
        if len(forward):
            self._queue = forward if self._queue is None else FloodRecords.concatenate([self._queue, forward])
        return new
