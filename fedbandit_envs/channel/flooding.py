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
Given the horizon T, the width is at most T: no record created in the episode is T slots old, so a larger
``gamma`` or ``max_age`` changes nothing but the memory.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fedbandit_envs.channel.messages import NEIGHBOURS, GatheredPayload, MessageBatch, row_layout
from fedbandit_envs.channel.privacy import PrivacySchema, Public
from fedbandit_envs.reference import reference_active
from fedbandit_envs.validation import check_int

__all__ = ["HEADER_FIELDS", "FloodRecords", "TTLFlooding"]

#: Payload fields of the record header, present in every flooded batch.
HEADER_FIELDS: tuple[str, ...] = ("origin", "created", "ttl")
#: The per-record array fields of :class:`FloodRecords`, in order.
_RECORD_ARRAYS: tuple[str, ...] = ("replica", "holder", "sender", "origin", "created", "ttl")


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
            **{name: np.take(getattr(self, name), rows) for name in _RECORD_ARRAYS},
            content={name: np.take(values, rows, axis=0) for name, values in self.content.items()},
        )

    @staticmethod
    def concatenate(parts: Sequence[FloodRecords]) -> FloodRecords:
        """One record set with the entries of ``parts`` in order (all parts share their content fields)."""
        names = parts[0].content.keys()
        return FloodRecords(
            **{a: np.concatenate([getattr(p, a) for p in parts]) for a in _RECORD_ARRAYS},
            content={name: np.concatenate([p.content[name] for p in parts]) for name in names},
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
        self.gamma = check_int("gamma", gamma, 0)
        if not isinstance(kind, str) or not kind:
            raise TypeError(f"kind must be a non-empty str, got {kind!r}")
        self.kind = kind
        self.max_age = max(self.gamma - 1, 0) if max_age is None else check_int("max_age", max_age, 0)
        if privacy is not None:
            privacy = {**{name: Public() for name in HEADER_FIELDS}, **privacy}
        self.privacy = privacy

    # ------------------------------------------------------------------ episode
    def window(self, horizon: int | None = None) -> int:
        """Creation slots spanned by the ``seen`` ring buffer: ``max_age + 1``, at most ``horizon`` when given."""
        return self.max_age + 1 if horizon is None else min(self.max_age + 1, check_int("horizon", horizon, 1))

    def reset(self, num_replicas: int, num_agents: int, horizon: int | None = None) -> None:
        """Forget every record; zero the statistics.

        Args:
            num_replicas: B.
            num_agents: M.
            horizon: slots of the episode, if known; it caps the ``seen`` window (see :meth:`window`).
        """
        b = check_int("num_replicas", num_replicas, 1)
        m = check_int("num_agents", num_agents, 1)
        self.num_replicas, self.num_agents = b, m
        self._window = self.window(horizon)
        self._seen = np.full(b * m * m * self._window, -1, np.int64)
        self._queue: FloodRecords | None = None
        self._own_slot = -1  # the last slot with own records
        self._plan: _Plan | None = None
        # slots whose new records are not yet marked in ``_seen`` (only the last window matters: a record writes
        # every cell it ever writes again within any ``max_age + 1`` consecutive slots)
        self._deferred: deque[int] = deque(maxlen=self._window)
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
        #: (B, window) first receipts by age (arrival slot - creation slot); age = hop distance - 1.
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
        self._own_slot = slot
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
        if content is not None and len(parts) == 1:  # own records only: one per sender, in sender order
            order = np.arange(len(records))
            senders, starts, counts = order, order, np.ones(len(records), np.int64)
        else:
            forwarded = records.origin != records.holder
            # per sender: its own record first, then its forwards in (origin, created) order
            order = np.lexsort((records.created, records.origin, forwarded, records.holder, records.replica))
            key = (records.replica * self.num_agents + records.holder)[order]
            senders, starts, counts = np.unique(key, return_index=True, return_counts=True)
        payload = {
            "origin": records.origin[order],
            "created": records.created[order],
            "ttl": records.ttl[order] - 1,
            **{name: np.take(values, order, axis=0) for name, values in records.content.items()},
        }
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

    def _parts(self, inbox: Sequence[MessageBatch]) -> list[_Part]:
        """The non-empty batches of this service's kind, flattened to one entry per record (views, no copies)."""
        parts = []
        for batch in inbox:
            if batch.kind != self.kind or len(batch) == 0:
                continue
            missing = [name for name in HEADER_FIELDS if name not in batch.payload]
            if missing:
                raise ValueError(f"flooded batch of kind {self.kind!r} lacks header fields {missing}")
            r = next(shape[0] for name, _, shape in row_layout(batch.payload) if name == "origin")
            parts.append(_Part(batch, r, tuple(name for name in batch.payload if name not in HEADER_FIELDS)))
        return parts

    def receive(self, slot: int, inbox: Sequence[MessageBatch]) -> FloodRecords | None:
        """Process the copies delivered in ``slot``; return the new records (``None`` if nothing arrived).

        New records are the first copies of ids not seen before, sorted by (replica, holder, origin, created);
        those with ``ttl > 0`` are queued and forwarded by :meth:`send` in the next slot.

        **Routing plans.** The outcome of a slot (which copies are new, their order, the statistics) depends only
        on the copies' headers, on the own records created and on the ``seen`` sets. It is kept as a plan. When a
        slot's headers are those of the previous slot shifted by one slot (same batches, rows, origins, ttls and
        ages) and this has held for ``max_age + 1`` slots in a row, every ``seen`` lookup of the slot has the
        previous slot's answer (a lookup at age ``a`` depends only on the receipts of the last ``a`` slots), so
        the plan is reused without lookups; its ``seen`` writes are deferred until a slot differs. Otherwise the
        slot is routed from scratch, and the plan is still reused when the lookups give the previous answers.
        Copies whose payload is still the sender's rows (:class:`~fedbandit_envs.channel.messages.GatheredPayload`)
        are compared through those rows, without gathering each copy's header. The reference mode
        (:mod:`fedbandit_envs.reference`) routes every slot from scratch.
        """
        parts = self._parts(inbox)
        if not parts:
            return None
        own = self._own_slot == slot
        plan = None if reference_active() else self._plan  # the reference mode routes every slot afresh
        if plan is not None and not (slot == plan.slot + 1 and plan.own == own and plan.matches(parts, slot)):
            plan = None  # the previous plan does not carry over to these copies
        if plan is not None and plan.streak >= self._window:
            plan.slot, plan.streak = slot, plan.streak + 1
            self._deferred.append(slot)
            return self._apply(plan, parts, slot)
        self._write_deferred()
        b, m, w = self.num_replicas, self.num_agents, self._window
        holder_index = np.concatenate([np.repeat(p.batch.replica * m + p.batch.recipient, p.r) for p in parts])
        origin, created, ttl, sender = (
            np.concatenate([getattr(p, name) for p in parts]) for name in ("origin", "created", "ttl", "sender")
        )
        if np.any((origin < 0) | (origin >= m)):
            raise ValueError(f"a flooded record has an origin outside [0, {m}); records must name their creator")
        age = slot - created
        fresh = (age >= 0) & (age < w)
        all_fresh = bool(fresh.all())
        pair = holder_index * m + origin
        cells = pair * w + created % w if w > 1 else pair
        unseen = self._seen[cells] != created
        candidate = unseen if all_fresh else fresh & unseen
        if plan is not None and np.array_equal(candidate, plan.candidate):
            plan.slot, plan.streak = slot, plan.streak + 1
            self._write_seen(plan, slot)
            return self._apply(plan, parts, slot)
        candidate = np.flatnonzero(candidate)
        # one sort gives the canonical order (replica, holder, origin, created) and, within an id, the sender order
        record_key = pair * w + (w - 1 - age) if w > 1 else pair
        order = candidate[np.argsort(record_key[candidate] * (m + 1) + sender[candidate])]
        record_key = record_key[order]
        first = np.ones(len(order), bool)
        first[1:] = record_key[1:] != record_key[:-1]
        winners = order[first]
        per_holder = b * m
        received = np.bincount(holder_index, minlength=per_holder).reshape(b, m)
        expired = np.zeros((b, m), np.int64)
        if not all_fresh:
            expired = np.bincount(holder_index[~fresh], minlength=per_holder).reshape(b, m)
        accepted = np.bincount(holder_index[winners], minlength=per_holder).reshape(b, m)
        replica, holder = np.divmod(holder_index[winners], m)
        new_ttl = ttl[winners]
        self._plan = new_plan = _Plan(
            slot=slot,
            own=own,
            streak=0 if plan is None else plan.streak + 1,
            parts=[_Copies.of(p) for p in parts],
            candidate=unseen if all_fresh else fresh & unseen,
            gathers=_gathers(np.cumsum([0] + [p.records for p in parts]), winners),
            cells=pair[winners] * w if w > 1 else pair[winners],
            age=_frozen(age[winners]),
            forward=np.flatnonzero(new_ttl > 0),
            received=received,
            accepted=accepted,
            duplicates=received - expired - accepted,
            expired=expired,
            ages=np.bincount(replica * w + age[winners], minlength=b * w).reshape(b, w),
            header=tuple(_frozen(a) for a in (replica, holder, sender[winners], origin[winners], new_ttl)),
            # deferring the seen writes is exact unless a new record names its holder as origin (own-record ids)
            cacheable=all_fresh and not np.any(origin[winners] == holder),
        )
        self._write_seen(new_plan, slot)
        return self._apply(new_plan, parts, slot)

    def _write_seen(self, plan: _Plan, slot: int) -> None:
        """Mark the new records of ``plan`` as seen, for receipts in ``slot``."""
        created = slot - plan.age
        w = self._window
        self._seen[plan.cells + created % w if w > 1 else plan.cells] = created

    def _write_deferred(self) -> None:
        if not self._deferred:
            return
        plan = self._plan
        assert plan is not None, "deferred seen writes come from a cached plan, which stays until it is replaced"
        for slot in self._deferred:
            self._write_seen(plan, slot)
        self._deferred.clear()

    def _apply(self, plan: _Plan, parts: list[_Part], slot: int) -> FloodRecords:
        """Add the plan's statistics; return its new records (contents from ``parts``) and queue the forwards."""
        self.received += plan.received
        self.accepted += plan.accepted
        self.duplicates += plan.duplicates
        self.expired += plan.expired
        self.ages += plan.ages
        if not plan.cacheable:
            self._plan = None
        content = {name: _gather(parts, name, plan.gathers) for name in parts[0].content}
        replica, holder, sender, origin, ttl = plan.header
        new = FloodRecords(replica, holder, sender, origin, slot - plan.age, ttl, content)
        if len(plan.forward):
            forward = new if len(plan.forward) == len(new) else new.take(plan.forward)
            self._queue = forward if self._queue is None else FloodRecords.concatenate([self._queue, forward])
        return new


@dataclass(frozen=True)
class _Part:
    """The copies of one delivered batch, one entry per record.

    The header fields are read (and, for a lazily gathered payload, gathered) only when asked for; the content
    fields only for the records kept (:meth:`content_rows`).
    """

    batch: MessageBatch
    r: int
    content: tuple[str, ...]

    @property
    def records(self) -> int:
        """Records carried by the copies (rows times records per row)."""
        return len(self.batch) * self.r

    def header(self, name: str) -> np.ndarray:
        """(records,) header field ``name`` of every copy."""
        return self.batch.payload[name].reshape(self.records)

    @functools.cached_property
    def origin(self) -> np.ndarray:
        """(records,) the agent that created each record."""
        return self.header("origin")

    @functools.cached_property
    def created(self) -> np.ndarray:
        """(records,) the slot each record was created in."""
        return self.header("created")

    @functools.cached_property
    def ttl(self) -> np.ndarray:
        """(records,) the hops each copy may still travel."""
        return self.header("ttl")

    @property
    def sender(self) -> np.ndarray:
        """(records,) the neighbour each copy came from."""
        return np.repeat(self.batch.sender, self.r)

    def content_field(self, name: str) -> np.ndarray:
        """(records, ...) content field ``name`` of every copy (gathered if the payload is lazy)."""
        values = self.batch.payload[name]
        return values.reshape(len(values) * self.r, *values.shape[2:])

    def in_source(self, name: str) -> bool:
        """Whether field ``name`` is still only the sender's rows (a lazily gathered payload not yet read)."""
        payload = self.batch.payload
        return isinstance(payload, GatheredPayload) and not payload.is_gathered(name)

    def content_rows(self, name: str, records: np.ndarray) -> np.ndarray:
        """Content field ``name`` of the records at ``records`` (indices into :meth:`content_field`'s rows)."""
        if not self.in_source(name):
            return np.take(self.content_field(name), records, axis=0)
        payload = self.batch.payload
        assert isinstance(payload, GatheredPayload)
        source = payload.source[name]  # (sent rows, r, ...): read the kept records there, not every copy
        copies, record = np.divmod(records, self.r)
        flat = source.reshape(len(source) * self.r, *source.shape[2:])
        return np.take(flat, payload.rows[copies] * self.r + record, axis=0)


@dataclass
class _Copies:
    """What :meth:`_Plan.matches` compares of one part: the copies' message header and record headers.

    For copies of a lazily gathered payload the record headers are those of the sender's rows (``rows``: the sender's
    row under each copy), so a slot is matched without gathering every copy's header; otherwise they are the
    copies' own (``rows`` is None).
    """

    replica: np.ndarray
    sender: np.ndarray
    recipient: np.ndarray
    rows: np.ndarray | None
    origin: np.ndarray
    created: np.ndarray
    ttl: np.ndarray

    @staticmethod
    def of(part: _Part, from_source: bool = True) -> _Copies:
        """The headers of ``part``: the sender's rows where its payload is lazy and ``from_source``, else its own."""
        batch, payload = part.batch, part.batch.payload
        if from_source and isinstance(payload, GatheredPayload):
            fields = [payload.source[name] for name in HEADER_FIELDS]
            return _Copies(batch.replica, batch.sender, batch.recipient, payload.rows, *fields)
        return _Copies(batch.replica, batch.sender, batch.recipient, None, part.origin, part.created, part.ttl)

    def shifted(self, part: _Part, shift: int) -> _Copies | None:
        """``part``'s headers if it carries these copies with every creation slot ``shift`` later, else None."""
        batch, now = part.batch, _Copies.of(part)
        if (now.rows is None) != (self.rows is None):
            if self.rows is not None:  # kept from the sender's rows, now copies of their own: route afresh
                return None
            now = _Copies.of(part, from_source=False)
        same = (
            len(batch) == len(self.replica)
            and len(now.origin) == len(self.origin)
            and all(
                a is b or np.array_equal(a, b)
                for a, b in (
                    (now.replica, self.replica),
                    (now.sender, self.sender),
                    (now.recipient, self.recipient),
                )
            )
            and (
                now.rows is self.rows
                or (now.rows is not None and self.rows is not None and np.array_equal(now.rows, self.rows))
            )
            and np.array_equal(now.origin, self.origin)
            and np.array_equal(now.ttl, self.ttl)
            and np.array_equal(now.created - shift, self.created)
        )
        return now if same else None


@dataclass
class _Plan:
    """The routing outcome of one slot's copies, relative to the slot (see :meth:`TTLFlooding.receive`)."""

    slot: int  # the last slot routed with this plan
    own: bool  # whether own records were created in that slot
    streak: int  # consecutive slots before it whose copies had the same headers
    parts: list[_Copies]  # per delivered batch: the headers of its copies
    candidate: np.ndarray  # (copies,) fresh and not seen before
    gathers: list[_Gather]  # content gathers of the new records
    cells: np.ndarray  # (new,) seen-table cells of the new records, less created % window
    age: np.ndarray  # (new,) arrival slot - creation slot
    forward: np.ndarray  # indices of the new records that are forwarded
    received: np.ndarray
    accepted: np.ndarray
    duplicates: np.ndarray
    expired: np.ndarray
    ages: np.ndarray
    header: tuple[np.ndarray, ...]  # (new,) replica, holder, sender, origin, ttl
    cacheable: bool

    def matches(self, parts: list[_Part], slot: int) -> bool:
        """Whether ``parts`` carry the same copies as the plan's slot, one slot later (headers only)."""
        if len(parts) != len(self.parts):
            return False
        shift = slot - self.slot
        now = []
        for copies, part in zip(self.parts, parts):
            shifted = copies.shifted(part, shift)
            if shifted is None:
                return False
            now.append(shifted)
        self.parts = now  # compare against this slot from now on
        return True


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


#: Rows per block of a content gather (see :class:`_Gather`).
GATHER_BLOCK = 16384


class _Gather:
    """A fixed row gather from one part's content, in blocks.

    Each block's source rows usually span a narrow range (records arrive grouped by replica): the range is copied
    first, a sequential read, and the rows are then picked from the copy while it is in cache. On large inboxes
    this is about twice as fast as picking from the whole array; the result is the same.
    """

    def __init__(self, part: int, positions: np.ndarray | None, rows: np.ndarray) -> None:
        self.part, self.positions, self.rows, self.size = part, positions, rows, len(rows)
        self.blocks = []
        for start in range(0, len(rows), GATHER_BLOCK):
            block = rows[start : start + GATHER_BLOCK]
            low, high = int(block.min()), int(block.max()) + 1
            narrow = high - low <= 4 * len(block)
            self.blocks.append((low, high, block - low) if narrow else (0, None, block))

    def take_from(self, part: _Part, name: str) -> np.ndarray:
        """The rows of ``part``'s content field ``name`` (from the sender's rows when the copies' payload is lazy)."""
        if part.in_source(name):
            return part.content_rows(name, self.rows)
        return self.take(part.content_field(name))

    def take(self, source: np.ndarray) -> np.ndarray:
        """The rows of ``source``."""
        if len(self.blocks) == 1 and self.blocks[0][1] is None:
            return np.take(source, self.blocks[0][2], axis=0)
        out = np.empty((self.size, *source.shape[1:]), source.dtype)
        start = 0
        for low, high, block in self.blocks:
            window = source if high is None else source[low:high].copy()
            out[start : start + len(block)] = np.take(window, block, axis=0)
            start += len(block)
        return out


def _gathers(offsets: np.ndarray, index: np.ndarray) -> list[_Gather]:
    """Split ``index`` (into the concatenation of parts starting at ``offsets``) into per-part gathers.

    A gather's ``positions`` are its rows' positions in the result (``None``: all of them, in order).
    """
    if len(offsets) == 2:
        return [_Gather(0, None, index)]
    part = np.searchsorted(offsets, index, side="right") - 1
    out = []
    for p in range(len(offsets) - 1):
        positions = np.flatnonzero(part == p)
        if len(positions):
            out.append(_Gather(p, positions, index[positions] - offsets[p]))
    return out


def _gather(parts: list[_Part], name: str, gathers: list[_Gather]) -> np.ndarray:
    """Content field ``name`` of the records of ``parts`` picked by ``gathers`` (see :func:`_gathers`)."""
    if len(gathers) == 1 and gathers[0].positions is None:
        return gathers[0].take_from(parts[gathers[0].part], name)
    if not gathers:  # no record kept: an empty field of the record layout (a row holds (r, ...) records)
        dtype, row_shape = next((d, shape) for field, d, shape in row_layout(parts[0].batch.payload) if field == name)
        return np.empty((0, *row_shape[1:]), dtype)
    picked = [g.take_from(parts[g.part], name) for g in gathers]
    out = np.empty((sum(g.size for g in gathers), *picked[0].shape[1:]), picked[0].dtype)
    for g, values in zip(gathers, picked):
        out[g.positions] = values
    return out
