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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbandit_envs.channel.messages import MessageBatch
from fedbandit_envs.topology import SERVER

LINK_ACCOUNTING_MODES = ("used_links", "graph_edges")
DIRECTIONS = ("up", "down", "peer")


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
    link_accounting: str = "used_links"
    free_server_downlink: bool = True
    price_per_message: float = 0.0
    price_per_byte: float = 0.0

    def __post_init__(self) -> None:
        for name in ("c1", "c2", "price_per_message", "price_per_byte"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.link_accounting not in LINK_ACCOUNTING_MODES:
            raise ValueError(f"link_accounting must be one of {LINK_ACCOUNTING_MODES}, got {self.link_accounting!r}")


def _add(target: np.ndarray, index: np.ndarray, weights: np.ndarray | None = None) -> None:
    """``target.flat[index] += weights``, summing repeated indices (``np.bincount``, faster than ``np.add.at``)."""
    sums = np.bincount(index, weights=weights, minlength=target.size).reshape(target.shape)
    target += sums.astype(target.dtype, copy=False) if target.dtype.kind == "i" else sums


def _tally(index: np.ndarray, size: int, count: np.ndarray, packed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Copies and logical messages per index value (the same arrays when nothing is packed)."""
    copies = np.bincount(index, minlength=size)
    return copies, (np.bincount(index, weights=count, minlength=size).astype(np.int64) if packed else copies)


class Ledger:
    """Totals of transmitted messages and their cost, per replica, agent, direction and kind.

    Node index ``num_agents`` stands for the server in per-node arrays. With ``record_messages`` the
    ledger also keeps one record per transmitted copy (see :meth:`records`).
    """

    def __init__(self, cost_model: CostModel, record_messages: bool = False) -> None:
        self.cost_model = cost_model
        self.record_messages = record_messages

    def reset(self, num_replicas: int, num_agents: int, component_of: np.ndarray, component_edges: np.ndarray) -> None:
        """Start empty totals. ``component_of`` is (B, M); ``component_edges`` (B, Q) edge counts."""
        b, n = num_replicas, num_agents + 1
        self._num_agents = num_agents
        self._component_of = component_of
        self._component_edges = component_edges
        self.messages = np.zeros(b, np.int64)
        self.copies = np.zeros(b, np.int64)
        self.scalars = np.zeros(b, np.int64)
        self.bytes = np.zeros(b, np.int64)
        self.links = np.zeros(b, np.int64)
        self.link_cost = np.zeros(b)
        self.cost = np.zeros(b)
        self.dropped = np.zeros(b, np.int64)
        self.sent_messages = np.zeros((b, n), np.int64)
        self.sent_bytes = np.zeros((b, n), np.int64)
        self.received_messages = np.zeros((b, n), np.int64)
        self.received_bytes = np.zeros((b, n), np.int64)
        self.node_cost = np.zeros((b, n))
        self.direction_messages = np.zeros((b, len(DIRECTIONS)), np.int64)
        self.direction_bytes = np.zeros((b, len(DIRECTIONS)), np.int64)
        self.kind_messages: dict[str, np.ndarray] = {}
        self.kind_bytes: dict[str, np.ndarray] = {}
        self._records: list[dict[str, np.ndarray]] = []
        self._record_link_cost: list[tuple[np.ndarray, np.ndarray]] = []
        self._num_records = 0
        self._slot_links: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    # ------------------------------------------------------------------ transmission
    def _node(self, ids: np.ndarray) -> np.ndarray:
        return np.where(ids == SERVER, self._num_agents, ids)

    def transmit(self, slot: int, batch: MessageBatch) -> None:
        """Count the copies of an expanded batch (explicit recipients) sent in ``slot``."""
        if len(batch) == 0:
            return
        b = batch.replica
        num_replicas, n = len(self.messages), self._num_agents + 1
        sender, recipient = self._node(batch.sender), self._node(batch.recipient)
        row_bytes = batch.bytes_per_row
        packed = bool(np.any(batch.count != 1))
        copies, logical = _tally(b, num_replicas, batch.count, packed)
        self.copies += copies
        self.messages += logical
        self.scalars += copies * batch.scalars_per_row
        self.bytes += copies * row_bytes
        sent_copies, sent_logical = _tally(b * n + sender, num_replicas * n, batch.count, packed)
        self.sent_messages += sent_logical.reshape(num_replicas, n)
        self.sent_bytes += (sent_copies * row_bytes).reshape(num_replicas, n)
        received_copies, received_logical = _tally(b * n + recipient, num_replicas * n, batch.count, packed)
        self.received_messages += received_logical.reshape(num_replicas, n)
        self.received_bytes += (received_copies * row_bytes).reshape(num_replicas, n)
        direction = np.where(batch.recipient == SERVER, 0, np.where(batch.sender == SERVER, 1, 2))
        shape = (num_replicas, len(DIRECTIONS))
        direction_copies, direction_logical = _tally(b * shape[1] + direction, shape[0] * shape[1], batch.count, packed)
        self.direction_messages += direction_logical.reshape(shape)
        self.direction_bytes += (direction_copies * row_bytes).reshape(shape)
        kind_messages = self.kind_messages.setdefault(batch.kind, np.zeros(num_replicas, np.int64))
        kind_bytes = self.kind_bytes.setdefault(batch.kind, np.zeros(num_replicas, np.int64))
        kind_messages += logical
        kind_bytes += copies * row_bytes
        model = self.cost_model
        if model.price_per_message or model.price_per_byte:
            price = model.price_per_message * batch.count + model.price_per_byte * row_bytes
            _add(self.cost, b, price)
            _add(self.node_cost, b * n + sender, price)
        opens_link = np.flatnonzero(~((batch.sender == SERVER) & model.free_server_downlink))
        first_row = self._num_records
        self._num_records += len(batch)
        self._slot_links.append((b[opens_link], sender[opens_link], recipient[opens_link], first_row + opens_link))
        if self.record_messages:
            self._records.append(
                {
                    "slot": np.full(len(batch), slot, np.int64),
                    "replica": b.copy(),
                    "sender": batch.sender.copy(),
                    "recipient": batch.recipient.copy(),
                    "kind": np.full(len(batch), batch.kind, dtype=object),
                    "messages": batch.count.copy(),
                    "scalars": np.full(len(batch), batch.scalars_per_row, np.int64),
                    "bytes": np.full(len(batch), row_bytes, np.int64),
                    "dropped": np.zeros(len(batch), bool),
                }
            )

    def mark_dropped(self, batch: MessageBatch, dropped: np.ndarray) -> None:
        """Count the copies of the batch just transmitted that the channel dropped (boolean mask)."""
        _add(self.dropped, batch.replica[dropped])
        if self.record_messages:
            self._records[-1]["dropped"] = dropped.copy()

    # ------------------------------------------------------------------ links, once per slot
    def close_slot(self) -> None:
        """Price the links used in the slot just played (each two-way link once) and start a new slot."""
        if not self._slot_links:
            return
        replica, a, b, row = (np.concatenate(parts) for parts in zip(*self._slot_links))
        self._slot_links.clear()
        if len(replica) == 0:
            return
        server_node = self._num_agents
        low, high = np.minimum(a, b), np.maximum(a, b)
        server_link = high == server_node
        self._charge_unique(
            replica[server_link],
            low[server_link],
            high[server_link],
            row[server_link],
            a[server_link],
            self.cost_model.c1,
            np.ones(int(server_link.sum()), np.int64),
        )
        peer = ~server_link
        if self.cost_model.link_accounting == "used_links":
            self._charge_unique(
                replica[peer],
                low[peer],
                high[peer],
                row[peer],
                a[peer],
                self.cost_model.c2,
                np.ones(int(peer.sum()), np.int64),
            )
        else:
            component = self._component_of[replica[peer], low[peer]]
            edges = self._component_edges[replica[peer], component]
            self._charge_unique(replica[peer], component, component, row[peer], a[peer], self.cost_model.c2, edges)

    def _charge_unique(self, replica, key_a, key_b, row, owner, unit_cost, units) -> None:
        """Charge ``unit_cost * units`` once per distinct (replica, key_a, key_b), to its first copy."""
        if len(replica) == 0:
            return
        n = self._num_agents + 1
        _, first = np.unique((replica * n + key_a) * n + key_b, return_index=True)
        cost = unit_cost * units[first]
        _add(self.links, replica[first], units[first])
        _add(self.link_cost, replica[first], cost)
        _add(self.cost, replica[first], cost)
        _add(self.node_cost, replica[first] * n + owner[first], cost)
        if self.record_messages:
            self._record_link_cost.append((row[first], cost))

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
        (the link price charged to this copy, when it was the first on its link in the slot).
        """
        if not self.record_messages:
            raise RuntimeError("message records are off; build the channel with record_messages=True")
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
