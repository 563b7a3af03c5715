"""The cost ledger: counts every transmitted copy and prices the links it uses.

Costs follow Li and Song's model (spec D10): a slot is one hop; in each slot every two-way link
that is used costs once, ``c1`` for an agent-server link and ``c2`` for an agent-agent link.

* Server links: an agent that sends to the server in a slot pays ``c1`` once for that slot. The
  server's downlink (replies, broadcasts) is free when ``free_server_downlink`` (the papers'
  convention), otherwise it opens the link too (still ``c1`` once per link and slot).
* Agent-agent links, ``link_accounting="used_links"``: every undirected edge that carries at least one
  message in the slot costs ``c2`` once. ``"graph_edges"``: in a slot in which a connected component
  of the agent graph carries any message, *every* edge of that component costs ``c2``.

Optional prices per logical message and per payload byte are added on top. Costs are charged when a
copy is transmitted; a dropped copy has used its link. Totals keep a leading replica axis.

Per node (:attr:`Ledger.node_cost`), messages and bytes are charged to their sender, and a link used in a slot
(with ``"graph_edges"``: a component) to the lowest node among the senders of its copies in that slot (agents by
index, the server, node M, last). So the split does not depend on the order of the slot's batches or rows (the
PettingZoo path regroups them by sender), and a learner cannot choose which of its agents pays by ordering them.

The ledger tallies in bulk: :meth:`Ledger.transmit` queues each batch's header arrays and
:meth:`Ledger.close_slot` closes the slot's used links; the queues are tallied when a total is read (or once they
hold :attr:`Ledger.TALLY_ROWS` rows of header arrays not seen lately, or :attr:`Ledger.TALLY_BATCHES` batches).
Costs are kept as integer counts (link units, logical messages and payload bytes, per replica and per node) and
multiplied by their prices when read, so a cost does not depend on when it was tallied, nor on how the copies were
batched or ordered.
A header sent again and again (the channel reuses the read-only header arrays of a repeated header) is
tallied once and weighted by the times it was sent, and so is a slot that sent the same headers as
another. In the reference mode (:mod:`fedbandit_envs.reference`) every batch and every slot's links
are tallied at once, copy by copy, instead.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from fedbandit_envs.channel.messages import MessageBatch, shared_constant
from fedbandit_envs.frozen import frozen, is_frozen
from fedbandit_envs.reference import reference_active
from fedbandit_envs.topology import SERVER
from fedbandit_envs.validation import check_bool, check_choice, check_real

#: How agent-agent links are priced (see the module docstring).
LinkAccounting = Literal["used_links", "graph_edges"]
LINK_ACCOUNTING_MODES: tuple[str, ...] = get_args(LinkAccounting)
DIRECTIONS = ("up", "down", "peer")

#: Key spaces up to this size find distinct links with a scratch table instead of a sort.
SCRATCH_KEYS = 1 << 16


@dataclass(frozen=True)
class CostModel:
    """Prices of communication.

    Attributes:
        c1: cost of one agent-server two-way link used in one slot.
        c2: cost of one agent-agent two-way link used in one slot.
        link_accounting: ``"used_links"`` or ``"graph_edges"`` (see the module docstring).
        free_server_downlink: the server's messages to agents open no link (the papers' convention).
        price_per_message: added per logical message transmitted.
        price_per_byte: added per payload byte transmitted.
    """

    c1: float = 1.0
    c2: float = 1.0
    link_accounting: LinkAccounting = "used_links"
    free_server_downlink: bool = True
    price_per_message: float = 0.0
    price_per_byte: float = 0.0

    def __post_init__(self) -> None:
        for name in ("c1", "c2", "price_per_message", "price_per_byte"):
            object.__setattr__(self, name, check_real(name, getattr(self, name), 0.0))  # a float from here on
        check_choice("link_accounting", self.link_accounting, LINK_ACCOUNTING_MODES)
        check_bool("free_server_downlink", self.free_server_downlink)


def _add(target: np.ndarray, index: np.ndarray, weights: np.ndarray | None = None) -> None:
    """``target.flat[index] += weights``, summing repeated indices (``np.bincount``, faster than ``np.add.at``)."""
    sums = np.bincount(index, weights=weights, minlength=target.size).reshape(target.shape)
    target += sums.astype(target.dtype, copy=False) if target.dtype.kind == "i" else sums


def _int_counts(index: np.ndarray, size: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Sums of integer ``weights`` (exact in float64 below 2**53; 1 each without) per index value in ``[0, size)``."""
    counts = np.bincount(index, weights=weights, minlength=size)
    return counts if weights is None else counts.astype(np.int64)


def _add_by_id(totals: np.ndarray, by_id: np.ndarray) -> None:
    """``totals += by_id`` for per-node integer totals (agents, then the server) of a table by id + 1 (server first)."""
    totals[..., :-1] += by_id[..., 1:]
    totals[..., -1] += by_id[..., 0]


def _server_only(sender: np.ndarray) -> bool:
    """Whether every copy of a batch (at least one) has the sender ``SERVER`` (under a free downlink: no link used)."""
    return sender[0] == SERVER and not np.count_nonzero(sender != SERVER)  # (an agent's first copy: no pass)


def _held(array: np.ndarray) -> np.ndarray:
    """``array`` if it is immutable, else an immutable copy (for arrays kept after the call that received them)."""
    return array if is_frozen(array) else frozen(array)


def lowest_entries(keys: np.ndarray, size: int, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``keys`` (ints in ``[0, size)``), ascending, and the index of each one's lowest entry.

    An entry is lower than another of its key if its ``rank`` (ints >= 0) is, or if it comes first at equal rank.
    With ``rank`` all 0, the same as ``np.unique(keys, return_index=True)``. Without a sort when ``size`` is small
    next to ``len(keys)``: a scratch table of ``size`` entries keeps the smallest ``rank * len(keys) + index`` per key.
    """
    length = len(keys)
    if size > max(SCRATCH_KEYS, 8 * length):
        order = np.lexsort((rank, keys))  # stable: equal ranks keep their order
        ordered = keys[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1]))) if length else order
        return ordered[starts], order[starts]
    missing = (int(rank.max(initial=0)) + 1) * length
    best = np.full(size, missing)
    np.minimum.at(best, keys, rank * length + np.arange(length))
    values = np.flatnonzero(best < missing)
    return values, best[values] % max(length, 1)


def _looked_up(keys: np.ndarray, values: np.ndarray, queries: np.ndarray, size: int, missing: int) -> np.ndarray:
    """The value of each of ``queries`` at its place among the distinct ascending ``keys`` (ints in ``[0, size)``).

    ``missing`` for a query that is not among them.
    """
    if not len(keys):
        return np.full(len(queries), missing)
    if size > max(SCRATCH_KEYS, 8 * len(queries)):
        at = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
        return np.where(keys[at] == queries, values[at], missing)
    table = np.full(size, missing)
    table[keys] = values
    return table[queries]


#: Version stamps of ledgers: every reset, transmission and closed slot with links takes a fresh one.
_VERSIONS = itertools.count()


class _Tallied:
    """A ledger total that is brought up to date (queued copies and closed slots tallied) when it is read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.private = "_" + name

    def __get__(self, ledger: Ledger | None, owner: type | None = None) -> Any:
        if ledger is None:
            return self
        ledger._tally()
        return getattr(ledger, self.private)


class Ledger:
    """Totals of transmitted messages and their cost, per replica, agent, direction and kind.

    Node index ``num_agents`` stands for the server in per-node arrays. With ``record_messages`` the
    ledger also keeps one record per transmitted copy (see :meth:`records`).

    Attributes (after :meth:`reset`; B replicas, M agents, node M the server):
        messages, copies, scalars, bytes: (B,) logical messages, transmitted copies, payload scalars and bytes.
        links: (B,) link units charged (server links plus agent-agent link units).
        link_cost, cost: (B,) price of the links, and of everything (links, messages, bytes).
        dropped: (B,) copies lost by the channel.
        sent_messages, sent_bytes, received_messages, received_bytes: (B, M + 1) per node.
        node_cost: (B, M + 1) cost charged to each node (a link used in a slot is charged to the lowest node among the
            senders of its copies in that slot, the server last).
        direction_messages, direction_bytes: (B, 3) per direction of :data:`DIRECTIONS`.
        kind_messages, kind_bytes: message kind -> (B,) totals.
        version: a stamp that changes whenever the totals may have changed (a reset, a transmission, a slot
            closed with links), unique across ledgers and episodes: a reader may cache what it derived.
    """

    #: Queued copy rows beyond which :meth:`transmit` tallies at once (bounds the queue and keeps a tally in cache).
    #: A header seen lately (the same arrays: a kept expansion) adds no rows: the queue holds it, it is tallied, once.
    TALLY_ROWS = 1 << 14
    #: Queued batches beyond which :meth:`transmit` tallies at once (bounds the queue of a header sent again and again).
    TALLY_BATCHES = 1 << 12
    #: Header arrays remembered as seen lately (the memory is dropped when it holds more).
    KNOWN_HEADERS = 64
    #: Largest (replica, node, node) table of link indices built at reset (4 bytes an entry); beyond it links are keyed
    #: by their node pair.
    LINK_INDEX_ENTRIES = 1 << 24

    messages = _Tallied()
    copies = _Tallied()
    scalars = _Tallied()
    bytes = _Tallied()
    links = _Tallied()
    sent_messages = _Tallied()
    sent_bytes = _Tallied()
    received_messages = _Tallied()
    received_bytes = _Tallied()
    direction_messages = _Tallied()
    direction_bytes = _Tallied()
    kind_messages = _Tallied()
    kind_bytes = _Tallied()

    #: Whether :meth:`reset` has given the ledger an episode's shape (its totals exist only from then on).
    _opened = False

    def __init__(self, cost_model: CostModel, record_messages: bool = False) -> None:
        self.cost_model = cost_model
        self.record_messages = record_messages

    def reset(
        self,
        num_replicas: int,
        num_agents: int,
        component_of: np.ndarray,
        component_edges: np.ndarray,
        links: np.ndarray | None = None,
    ) -> None:
        """Start empty totals. ``component_of`` is (B, M); ``component_edges`` (B, Q) edge counts.

        ``links`` (optional, (B, M + 1, M + 1) bool, node M the server): the two-way links copies can use. Given (and
        within :attr:`LINK_INDEX_ENTRIES`), the link tallies key each used link by its index among its replica's links
        instead of by its node pair, a key space smaller by about the graph's density (every copy must then follow a
        link, as the channel's do).
        """
        b, n = num_replicas, num_agents + 1
        self._opened = True
        self.version = next(_VERSIONS)
        self._num_replicas = b
        self._num_agents = num_agents
        self._component_of = component_of
        self._component_edges = component_edges
        self._link_index: np.ndarray | None = None
        if links is not None and b * n * n <= self.LINK_INDEX_ENTRIES:
            # (replica, low, high) -> the link's index among its replica's links (low < high), or, on the diagonal,
            # num_links + node (the key of a component under "graph_edges", keyed by (component, component))
            index = np.full((b, n, n), -1, np.int32)  # a compact table: fewer cache misses
            num_links = 0
            for replica in range(b):
                low, high = np.nonzero(np.triu(links[replica], 1))
                index[replica, low, high] = np.arange(len(low))
                num_links = max(num_links, len(low))
            index[:, np.arange(n), np.arange(n)] = num_links + np.arange(n)
            self._link_index = index.reshape(-1)
            self._link_keys = num_links + n
        self._messages = np.zeros(b, np.int64)
        self._copies = np.zeros(b, np.int64)
        self._scalars = np.zeros(b, np.int64)
        self._bytes = np.zeros(b, np.int64)
        self._links = np.zeros(b, np.int64)
        self.dropped = np.zeros(b, np.int64)
        self._sent_messages = np.zeros((b, n), np.int64)
        self._sent_bytes = np.zeros((b, n), np.int64)
        self._received_messages = np.zeros((b, n), np.int64)
        self._received_bytes = np.zeros((b, n), np.int64)
        self._direction_messages = np.zeros((b, len(DIRECTIONS)), np.int64)
        self._direction_bytes = np.zeros((b, len(DIRECTIONS)), np.int64)
        self._kind_messages: dict[str, np.ndarray] = {}
        self._kind_bytes: dict[str, np.ndarray] = {}
        # link units charged to each node: server links (priced c1) and agent-agent link units (priced c2)
        self._server_links = np.zeros((b, n), np.int64)
        self._peer_links = np.zeros((b, n), np.int64)
        self._node_cost: tuple[int, np.ndarray] = (-1, np.zeros((b, n)))  # (version, node_cost) of the last read
        self._records: list[dict[str, np.ndarray]] = []
        self._record_link_cost: list[tuple[np.ndarray, np.ndarray]] = []
        self._num_records = 0
        # layouts seen: layout key -> index, and per index the (kind, scalars per row, bytes per row) of a row
        self._layouts: dict[tuple, int] = {}
        self._layout_sizes: list[tuple[str, int, int]] = []
        # queued copies: per distinct transmitted header (layout and arrays, held read-only) a list [layout, replica,
        # sender, recipient, count, times sent, sum of the count arrays or None while every batch had the first one's]
        self._queued_copies: list[list[Any]] = []
        self._queued_index: dict[tuple[int, int, int, int], int] = {}  # (layout, array ids) -> index in the queue
        self._queued_batches = 0
        self._queued_rows = 0
        self._last_held: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]] = {}  # by layout
        self._known_headers: dict[int, np.ndarray] = {}  # replica arrays seen lately, by id (held, so ids stay unique)
        # links of the open slot, and of the closed slots not yet tallied; each entry is a transmitted batch's header
        # arrays and the index of its first record. Closed slots are kept by signature (see close_slot): the entries
        # of the first slot with it (each with the slot's serial number first) and the times it was closed.
        self._slot_links: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []
        self._closed_links: dict[tuple, list[Any]] = {}
        self._closed_slots = 0

    # ------------------------------------------------------------------ costs, derived when read
    @property
    def link_cost(self) -> np.ndarray:
        """(B,) price of the links charged: ``c1`` per server link plus ``c2`` per agent-agent link unit."""
        self._tally()
        return self.cost_model.c1 * self._server_links.sum(axis=1) + self.cost_model.c2 * self._peer_links.sum(axis=1)

    @property
    def node_cost(self) -> np.ndarray:
        """(B, M + 1) cost charged to each node: its links' prices plus its messages' and bytes' prices (read-only).

        Derived from the integer tallies, as :attr:`cost` is. Kept until the totals change (:attr:`version`), since a
        recorder reads it once per agent; the reference mode (:mod:`fedbandit_envs.reference`) computes it at every
        read.
        """
        self._tally()
        version, cost = self._node_cost
        if version != self.version or reference_active():
            model = self.cost_model
            cost = model.c1 * self._server_links + model.c2 * self._peer_links
            cost += model.price_per_message * self._sent_messages + model.price_per_byte * self._sent_bytes
            cost.setflags(write=False)
            self._node_cost = self.version, cost
        return cost

    @property
    def cost(self) -> np.ndarray:
        """(B,) total cost: links plus the prices per message and per byte.

        Derived when read from the integer tallies (links, logical messages, payload bytes), so it is the same
        float however the copies were batched or ordered: ``link_cost + price_per_message * messages +
        price_per_byte * bytes``.
        """
        model = self.cost_model
        return self.link_cost + model.price_per_message * self._messages + model.price_per_byte * self._bytes

    # ------------------------------------------------------------------ transmission
    def _node(self, ids: np.ndarray) -> np.ndarray:
        """Agent ids as node indices: ``SERVER`` (-1) becomes ``num_agents`` (by a sign-bit mask, not a modulo)."""
        if ids.min(initial=0) >= 0:  # no SERVER id
            return ids
        return ids + ((ids >> 63) & (self._num_agents + 1))

    def _layout(self, batch: MessageBatch) -> int:
        """The index of the layout of ``batch`` (kind, scalars and bytes per row), registered on first sight."""
        key = batch.layout_key()
        index = self._layouts.get(key)
        if index is None:
            index = self._layouts[key] = len(self._layouts)
            self._layout_sizes.append((batch.kind, batch.scalars_per_row, batch.bytes_per_row))
            for totals in (self._kind_messages, self._kind_bytes):
                totals.setdefault(batch.kind, np.zeros(self._num_replicas, np.int64))
        return index

    def _held_header(
        self, layout: int, batch: MessageBatch, reference: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
        """The replica, sender, recipient and count arrays of ``batch``, each immutable (:func:`_held`), and a verdict.

        The verdict: whether every copy is the server's under a free server downlink (then they open no link). The last
        arrays of each layout that were all immutable already are remembered with their verdict: a batch holding those
        very arrays (a kept header sent again) needs neither check. In the ``reference`` mode
        (:mod:`fedbandit_envs.reference`) every array is checked.
        """
        replica, sender, recipient, count = batch.replica, batch.sender, batch.recipient, batch.count
        last = self._last_held.get(layout)
        if (
            last is not None
            and last[0] is replica
            and last[1] is sender
            and last[2] is recipient
            and last[3] is count
            and not reference
        ):
            return last
        held = _held(replica), _held(sender), _held(recipient), _held(count)
        free = self.cost_model.free_server_downlink and _server_only(held[1])
        if held[0] is replica and held[1] is sender and held[2] is recipient and held[3] is count:
            self._last_held[layout] = (*held, free)
        return (*held, free)

    def transmit(self, slot: int, batch: MessageBatch) -> None:
        """Count the copies of an expanded batch (explicit recipients) sent in ``slot``.

        The batch's header arrays are queued (a writeable one is copied, so that a later write by its owner cannot
        change what was sent) and tallied in bulk later; in the reference mode (:mod:`fedbandit_envs.reference`)
        they are tallied at once, row by row (:meth:`_plain_copies`). A batch sent by the server alone under a free
        server downlink opens no link, so it is left out of the slot's links (the reference mode prices every batch's
        links, and skips those copies one by one).
        """
        rows = len(batch)
        if rows == 0:
            return
        reference = reference_active()
        self.version = next(_VERSIONS)
        layout = self._layout(batch)
        replica, sender, recipient, count, free = self._held_header(layout, batch, reference)
        first_record, self._num_records = self._num_records, self._num_records + rows
        if reference or not free:
            self._slot_links.append((replica, sender, recipient, first_record))  # (the server's free copies open none)
        if self.record_messages:
            self._records.append(
                {
                    "slot": np.full(rows, slot, np.int64),
                    "replica": replica.copy(),
                    "sender": sender.copy(),
                    "recipient": recipient.copy(),
                    "kind": np.full(rows, batch.kind, dtype=object),
                    "messages": count.copy(),
                    "scalars": np.full(rows, batch.scalars_per_row, np.int64),
                    "bytes": np.full(rows, batch.bytes_per_row, np.int64),
                    "dropped": np.zeros(rows, bool),
                }
            )
        if reference:
            self._plain_copies(layout, replica, sender, recipient, count)
            return
        self._queue(layout, replica, sender, recipient, count)
        if self._queued_rows >= self.TALLY_ROWS or self._queued_batches >= self.TALLY_BATCHES:
            self._tally()

    def _queue(
        self, layout: int, replica: np.ndarray, sender: np.ndarray, recipient: np.ndarray, count: np.ndarray
    ) -> None:
        """Queue a batch's copies: a header already queued (the same arrays) is counted once more, its counts summed."""
        self._queued_batches += 1
        key = (layout, id(replica), id(sender), id(recipient))
        index = self._queued_index.get(key)
        if index is None:
            self._queued_index[key] = len(self._queued_copies)
            self._queued_copies.append([layout, replica, sender, recipient, count, 1, None])
            if id(replica) not in self._known_headers:  # rows that add to the memory and the work of a tally
                if len(self._known_headers) >= self.KNOWN_HEADERS:
                    self._known_headers.clear()
                self._known_headers[id(replica)] = replica
                self._queued_rows += len(replica)
            return
        queued = self._queued_copies[index]
        if queued[6] is None and count is not queued[4]:
            queued[6] = queued[4] * queued[5]  # a new array: the sum is kept in place from here on
        queued[5] += 1
        if queued[6] is not None:
            queued[6] += count

    def mark_dropped(self, batch: MessageBatch, dropped: np.ndarray) -> None:
        """Count the copies of the batch just transmitted that the channel dropped (boolean mask)."""
        _add(self.dropped, batch.replica[dropped])
        if self.record_messages:
            self._records[-1]["dropped"] = dropped.copy()

    def close_slot(self) -> None:
        """Close the slot just played: its used links are priced (each two-way link once) at the next tally.

        Slots that sent the same header arrays in the same order used the same links: a slot is kept under the ids
        of its arrays (the first slot with them holds them, so the ids name no other array meanwhile), and a slot
        that repeats them adds one to its times. With records, which are kept per copy, every slot is kept apart.
        In the reference mode they are priced at once, copy by copy (:meth:`_plain_links`).
        """
        links = self._slot_links
        if not links:
            return
        self.version = next(_VERSIONS)
        if reference_active():
            self._plain_links(links)
        else:
            serial = self._closed_slots
            ids = [id(array) for entry in links for array in entry[:3]]
            key = tuple([serial, *ids] if self.record_messages else ids)
            kept = self._closed_links.get(key)
            if kept is None:
                self._closed_links[key] = [[(serial, *entry) for entry in links], 1]
            else:
                kept[1] += 1
        self._slot_links = []
        self._closed_slots += 1

    # ------------------------------------------------------------------ tallies
    def _tally(self) -> None:
        """Add the queued copies and the links of the closed slots to the totals (RuntimeError before any reset)."""
        if not self._opened:
            raise RuntimeError("the ledger holds an episode's totals: reset the environment first")
        if self._queued_copies:
            self._tally_copies()
        if self._closed_links:
            self._tally_links()

    def _tally_copies(self) -> None:
        """Copies, messages, scalars and bytes per replica, node, direction and kind of the queued batches.

        A header sent again and again (the same read-only arrays, e.g. a kept expansion) is tallied once, weighted by
        the times it was sent, its rows' logical messages summed over those times.
        """
        entries = self._queued_copies
        self._queued_copies, self._queued_index, self._queued_batches, self._queued_rows = [], {}, 0, 0
        times = np.array([entry[5] for entry in entries], np.int64)
        lengths = [len(entry[1]) for entry in entries]
        repeats = None if times.max() == 1 else np.repeat(times, lengths)  # the times each row was sent
        if all(entry[6] is None for entry in entries):  # every header's batches had one count array each
            if all(entry[4] is shared_constant(len(entry[4]), 1) for entry in entries):  # (the default counts)
                logical_weights = repeats
            else:
                count = np.concatenate([entry[4] for entry in entries])
                logical_weights = repeats if count.max() == 1 else count if repeats is None else count * repeats
        else:
            logical_weights = np.concatenate(
                [entry[4] * entry[5] if entry[6] is None else entry[6] for entry in entries]
            )
        # tables per (layout, replica, id + 1); a layout fixes the kind, the scalars and the bytes of a row. A row's
        # index is its (layout, replica) block's start plus its id + 1 (SERVER = -1 is 0, agent k is k + 1: no pass
        # to map the ids to nodes); the per-node totals (the server last) take them through _add_by_id.
        num_layouts, num_replicas, n = len(self._layout_sizes), self._num_replicas, self._num_agents + 1
        shape, size = (num_layouts, num_replicas, n), num_layouts * num_replicas * n
        base = np.repeat([entry[0] * num_replicas * n + 1 for entry in entries], lengths)
        if num_replicas > 1:
            base += np.concatenate([entry[1] for entry in entries]) * n
        sender, recipient = (base + np.concatenate([entry[i] for entry in entries]) for i in (2, 3))

        def table(index: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
            return _int_counts(index, size, weights).reshape(shape)

        sent_copies, received_copies = table(sender, repeats), table(recipient, repeats)
        if logical_weights is not repeats:
            sent_logical, received_logical = table(sender, logical_weights), table(recipient, logical_weights)
        else:
            sent_logical, received_logical = sent_copies, received_copies
        kinds, scalars_per_row, bytes_per_row = zip(*self._layout_sizes)
        row_bytes = np.array(bytes_per_row, np.int64)[:, None, None]
        copies, logical = sent_copies.sum(axis=2), sent_logical.sum(axis=2)  # (layouts, B)
        sent_bytes, received_bytes = (sent_copies * row_bytes).sum(axis=0), (received_copies * row_bytes).sum(axis=0)
        self._copies += copies.sum(axis=0)
        self._messages += logical.sum(axis=0)
        self._scalars += (copies * np.array(scalars_per_row, np.int64)[:, None]).sum(axis=0)
        self._bytes += sent_bytes.sum(axis=1)
        _add_by_id(self._sent_messages, sent_logical.sum(axis=0))
        _add_by_id(self._sent_bytes, sent_bytes)
        _add_by_id(self._received_messages, received_logical.sum(axis=0))
        _add_by_id(self._received_bytes, received_bytes)
        # up: to the server; down: from the server; peer: the rest (the channel never routes server to server); the
        # server's entry of a table by id + 1 is the first
        up, down = received_logical[:, :, 0].sum(axis=0), sent_logical[:, :, 0].sum(axis=0)
        self._direction_messages += np.stack([up, down, logical.sum(axis=0) - up - down], axis=1)
        up, down = received_bytes[:, 0], sent_bytes[:, 0]
        self._direction_bytes += np.stack([up, down, sent_bytes.sum(axis=1) - up - down], axis=1)
        for index, kind in enumerate(kinds):
            self._kind_messages[kind] += logical[index]
            self._kind_bytes[kind] += copies[index] * bytes_per_row[index]

    def _tally_links(self) -> None:
        """Charge each distinct two-way link of each closed slot once, to the lowest node that sent a copy on it.

        Slots that sent the same header arrays in the same order (e.g. kept expansions) used the same links: one of
        them is priced, weighted by their number. Without records (which are kept per copy), the first batch of a
        slot is priced on its own too: a first batch that several slots sent (a kept expansion followed by batches
        with new headers) is priced once, weighted, and the later batches of each slot charge the links the first one
        left unused, and take over from it the charge of a link that they sent on from a lower node.
        """
        closed = list(self._closed_links.values())
        self._closed_links = {}
        record = self.record_messages
        slots: list[list[tuple[int, np.ndarray, np.ndarray, np.ndarray, int]]] = [entries for entries, _ in closed]
        times = np.array([count for _, count in closed], np.int64)
        # groups of entries priced together (a key space each), their weights, and the first-batch group (or -1) whose
        # links a group leaves to it
        groups, after = slots, np.full(len(slots), -1)
        num_firsts = 0
        if not record and any(len(entries) > 1 for entries in slots):
            firsts: dict[tuple, int] = {}
            heads: list[list[tuple[int, np.ndarray, np.ndarray, np.ndarray, int]]] = []
            first_of = []
            for entries in slots:
                j = firsts.setdefault(tuple(map(id, entries[0][1:4])), len(heads))
                if j == len(heads):
                    heads.append(entries[:1])
                first_of.append(j)
            num_firsts = len(heads)
            groups = heads + [entries[1:] for entries in slots]
            times = np.concatenate([_int_counts(np.array(first_of), num_firsts, times), times])
            after = np.concatenate([np.full(num_firsts, -1), first_of])
        entries = [entry for entries in groups for entry in entries]
        lengths = np.array([len(entry[1]) for entry in entries])
        n = self._num_agents + 1
        group = np.repeat([j for j, entries in enumerate(groups) for _ in entries], lengths)
        replica, sender, recipient = (np.concatenate([entry[i] for entry in entries]) for i in range(1, 4))
        row = None
        if record:  # the record index of each copy
            starts = np.array([entry[4] for entry in entries]) - (np.cumsum(lengths) - lengths)
            row = np.repeat(starts, lengths) + np.arange(len(replica))
        if self.cost_model.free_server_downlink and sender.min() == SERVER:  # the server's copies open no link
            opens = np.flatnonzero(sender != SERVER)
            group, replica, sender, recipient = group[opens], replica[opens], sender[opens], recipient[opens]
            row = None if row is None else row[opens]
        if len(replica) == 0:  # only the server's free downlink was used
            return
        a, b = self._node(sender), self._node(recipient)
        low, high = np.minimum(a, b), np.maximum(a, b)
        server_link = high == self._num_agents
        used_links = self.cost_model.link_accounting == "used_links"
        if not used_links:
            # a used peer link stands for its whole component: key it by (component, component)
            component = self._component_of[replica, low]
            low, high = np.where(server_link, low, component), np.where(server_link, high, component)
        link = (replica * n + low) * n + high
        group_size = self._num_replicas * n * n
        if self._link_index is not None:  # the link's index among its replica's links (see reset)
            link = self._link_index.take(link)
            if link.min(initial=0) < 0:
                raise RuntimeError("a copy used a link that the ledger was not given at reset")
            link = replica * self._link_keys + link
            group_size = self._num_replicas * self._link_keys
        previous = after.take(group)
        later = np.flatnonzero(previous >= 0)
        displaced = None  # per copy, the node charged for its link by the slot's first batch (n: none)
        if len(later):  # keep a later batch's copy unless the first batch used its link from a node as low
            first_rows = np.flatnonzero(previous < 0)
            first_keys = group[first_rows] * group_size + link[first_rows]
            used, lowest = lowest_entries(first_keys, num_firsts * group_size, a[first_rows])
            queries = previous[later] * group_size + link[later]
            held = _looked_up(used, a[first_rows[lowest]], queries, num_firsts * group_size, n)
            takes = a[later] < held
            kept = np.concatenate([first_rows, later[takes]])
            displaced = np.concatenate([np.full(len(first_rows), n), held[takes]])
            group, replica, a, link, server_link = (x[kept] for x in (group, replica, a, link, server_link))
            low = low[kept]
        _, first = lowest_entries(group * group_size + link, len(groups) * group_size, a)
        to_server = server_link[first]
        server_first, peer_first = first[to_server], first[~to_server]
        units = None if used_links else self._component_edges[replica[peer_first], low[peer_first]]
        server_weights = None if times.max() == 1 else times[group[server_first]]
        peer_weights = None if times.max() == 1 else times[group[peer_first]]
        if units is not None:
            peer_weights = units if peer_weights is None else units * peer_weights
        size = self._num_replicas * n
        for table, rows, weights in (
            (self._server_links, server_first, server_weights),
            (self._peer_links, peer_first, peer_weights),
        ):
            table += _int_counts(replica[rows] * n + a[rows], size, weights).reshape(-1, n)
            self._links += _int_counts(replica[rows], self._num_replicas, weights)
            if displaced is not None:  # a link whose charge a later batch took over: off the first batch's node
                taken = np.flatnonzero(displaced[rows] < n)
                moved = None if weights is None else weights[taken]
                rows = rows[taken]
                table -= _int_counts(replica[rows] * n + displaced[rows], size, moved).reshape(-1, n)
                self._links -= _int_counts(replica[rows], self._num_replicas, moved)  # (counted by the first batch)
        if row is not None:
            c1, c2 = self.cost_model.c1, self.cost_model.c2
            self._record_link_cost.append((row[server_first], np.full(len(server_first), c1)))
            self._record_link_cost.append(
                (row[peer_first], c2 * (np.ones(len(peer_first)) if units is None else units))
            )

    # ------------------------------------------------------------------ the reference versions of the tallies
    def _plain_copies(
        self, layout: int, replica: np.ndarray, sender: np.ndarray, recipient: np.ndarray, count: np.ndarray
    ) -> None:
        """The reference version of :meth:`_tally_copies` for one batch: add its copies to the totals one by one."""
        kind, scalars, row_bytes = self._layout_sizes[layout]
        server = self._num_agents
        for b, s, r, c in zip(replica.tolist(), sender.tolist(), recipient.tolist(), count.tolist()):
            s, r = server if s == SERVER else s, server if r == SERVER else r
            direction = 0 if r == server else 1 if s == server else 2  # up, down, peer
            self._copies[b] += 1
            self._messages[b] += c
            self._scalars[b] += scalars
            self._bytes[b] += row_bytes
            self._sent_messages[b, s] += c
            self._sent_bytes[b, s] += row_bytes
            self._received_messages[b, r] += c
            self._received_bytes[b, r] += row_bytes
            self._direction_messages[b, direction] += c
            self._direction_bytes[b, direction] += row_bytes
            self._kind_messages[kind][b] += c
            self._kind_bytes[kind][b] += row_bytes

    def _plain_links(self, slot_links: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]) -> None:
        """The reference version of :meth:`_tally_links` for one slot, copy by copy.

        Each two-way link (with ``"graph_edges"``: each component) is charged once, to the lowest node among the
        senders of its copies (the record of that node's first copy on it carries the price).
        """
        server, model = self._num_agents, self.cost_model
        charged: dict[tuple, tuple[int, int, int, int, float]] = {}  # link -> (node, record, replica, units, price)
        link: tuple
        for replica, sender, recipient, first_record in slot_links:
            for row, (b, s, r) in enumerate(zip(replica.tolist(), sender.tolist(), recipient.tolist())):
                if s == SERVER and model.free_server_downlink:
                    continue
                s, r = server if s == SERVER else s, server if r == SERVER else r
                if server in (s, r):
                    link, units, price = ("server", b, min(s, r)), 1, model.c1
                elif model.link_accounting == "used_links":
                    link, units, price = ("peer", b, min(s, r), max(s, r)), 1, model.c2
                else:
                    component = int(self._component_of[b, min(s, r)])
                    units = int(self._component_edges[b, component])
                    link, price = ("component", b, component), model.c2 * units
                if link not in charged or s < charged[link][0]:
                    charged[link] = (s, first_record + row, b, units, price)
        for link, (s, record, b, units, price) in charged.items():
            self._links[b] += units
            (self._server_links if link[0] == "server" else self._peer_links)[b, s] += units
            if self.record_messages:
                self._record_link_cost.append((np.array([record]), np.array([price])))

    # ------------------------------------------------------------------ reports
    def totals(self, replica: int = 0) -> dict[str, float]:
        """Scalar totals of one replica (messages, copies, scalars, bytes, links, link_cost, cost, dropped)."""
        return {
            "messages": int(self.messages[replica]),
            "copies": int(self.copies[replica]),
            "scalars": int(self.scalars[replica]),
            "bytes": int(self.bytes[replica]),
            "links": int(self.links[replica]),
            "link_cost": float(self.link_cost[replica]),
            "cost": float(self.cost[replica]),
            "dropped": int(self.dropped[replica]),
            **{f"{d}_messages": int(self.direction_messages[replica, i]) for i, d in enumerate(DIRECTIONS)},
            **{f"{d}_bytes": int(self.direction_bytes[replica, i]) for i, d in enumerate(DIRECTIONS)},
        }

    def records(self) -> dict[str, np.ndarray]:
        """One row per transmitted copy (requires ``record_messages=True``).

        Columns: slot, replica, sender, recipient, kind, messages, scalars, bytes, dropped, and link_cost
        (the link price charged to this copy: the first copy on its link in the slot from the node charged for it).
        """
        if not self.record_messages:
            raise RuntimeError("message records are off; build the channel with record_messages=True")
        self._tally()
        names = ("slot", "replica", "sender", "recipient", "kind", "messages", "scalars", "bytes", "dropped")
        if not self._records:
            table = {name: np.zeros(0, object if name == "kind" else np.int64) for name in names}
        else:
            table = {name: np.concatenate([chunk[name] for chunk in self._records]) for name in names}
        link_cost = np.zeros(len(table["slot"]))
        for rows, cost in self._record_link_cost:
            np.add.at(link_cost, rows, cost)
        table["link_cost"] = link_cost
        return table
