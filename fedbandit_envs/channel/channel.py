"""The communication channel: link checks, neighbour broadcast, drops, latency, gossip activation.

Timing (one hop per slot): a copy sent in slot ``t`` with latency ``L`` is delivered in the
observation returned by the step of slot ``t + L`` (``L = 0``: the same step), so the receiver can use
it when it acts in the next slot. Copies to the server reach the hosted coordinator in the slot they
arrive; its replies are transmitted in that same slot. Copies still in flight when the episode ends
are discarded.

All state carries a leading replica axis: a single environment is the case of one replica.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedbandit_envs.channel.layouts import EpisodeLayouts
from fedbandit_envs.channel.ledger import CostModel, Ledger
from fedbandit_envs.channel.messages import NEIGHBOURS, MessageBatch, draws_in_canonical_order, shared_constant
from fedbandit_envs.frozen import frozen, is_frozen
from fedbandit_envs.reference import reference_active
from fedbandit_envs.topology import GOSSIP_ACTIVATIONS, SERVER, GossipActivation, Topology
from fedbandit_envs.validation import check_bool, check_choice, check_int, check_int_array, check_real

#: The error of a batch from the agents with a SERVER sender.
AGENTS_AS_SERVER = "agents cannot send as SERVER; only the coordinator does"
#: The error of a coordinator's reply with a sender other than SERVER.
REPLY_NOT_FROM_SERVER = "coordinator replies must have sender SERVER"

#: Gossip edges drawn at once per replica from its channel stream (the draws are the same as one per slot).
GOSSIP_BLOCK = 256

#: The header plans a channel keeps hold at most this many routed rows in all; past it they are dropped (and
#: planned again when their headers come back).
PLAN_ROWS = 1 << 20

#: Entries of one block of slot stamps (see :meth:`Channel.stamp`): the stamps of a block's slots for one batch length.
STAMP_ENTRIES = 1 << 16


@dataclass(frozen=True)
class ChannelConfig:
    """Options of the channel (all optional; the defaults are the papers' ideal channel).

    Attributes:
        costs: the :class:`CostModel` (c1, c2, link accounting, prices).
        latency: extra slots before delivery: an int for every link, or an (M+1, M+1) int matrix per
            directed link, index M being the server.
        latency_jitter: an extra uniform random delay in {0, ..., latency_jitter} per copy (channel stream).
        drop_prob: probability that a copy is lost (channel stream). Lost copies have used their link.
            Drops and jitter are drawn per replica in a canonical order of a transmission's copies (see
            :meth:`Channel.transmit`), so they do not depend on how the copies were batched.
        gossip: ``None``, ``"uniform_edge"`` (one uniformly random edge per slot) or
            ``"node_then_neighbour"`` (a uniform agent, then a uniform neighbour of it).
        record_messages: keep one ledger record per transmitted copy.
    """

    costs: CostModel = CostModel()
    latency: int | np.ndarray = 0
    latency_jitter: int = 0
    drop_prob: float = 0.0
    gossip: GossipActivation | None = None
    record_messages: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.costs, CostModel):
            raise TypeError(f"costs must be a CostModel, got {type(self.costs).__name__}")
        if np.ndim(self.latency):  # a matrix per directed link
            check_int_array("latency", self.latency, 0)
        else:
            check_int("latency", self.latency, 0)
        check_int("latency_jitter", self.latency_jitter, 0)
        if check_real("drop_prob", self.drop_prob, 0.0) >= 1.0:
            raise ValueError(f"drop_prob must be in [0, 1) (the chance a copy is lost), got {self.drop_prob}")
        if self.gossip is not None:
            check_choice("gossip", self.gossip, GOSSIP_ACTIVATIONS)
        check_bool("record_messages", self.record_messages)

    def check_agents(self, num_agents: int) -> None:
        """Raise ``ValueError`` unless a latency matrix has shape (M+1, M+1) for ``num_agents`` = M."""
        shape = np.shape(self.latency)
        if shape and shape != (num_agents + 1, num_agents + 1):
            m1 = num_agents + 1
            raise ValueError(f"a latency matrix must have shape (M+1, M+1) = {(m1, m1)}, got {shape}")

    def check_gossip(self, topologies: Sequence[Topology]) -> None:
        """Raise ``ValueError`` if gossip is on and an agent graph of ``topologies`` is disconnected or edgeless."""
        if self.gossip is not None and not all(len(t.edges()) and t.is_connected() for t in topologies):
            raise ValueError(
                "gossip activation needs a connected agent graph with at least one edge; "
                "use a connected topology such as 'ring', 'complete' or 'erdos_renyi'"
            )

    @functools.cached_property
    def has_delays(self) -> bool:
        """Whether any copy can arrive after the slot it was sent in."""
        return bool(np.any(np.asarray(self.latency) > 0) or self.latency_jitter > 0)


def _sends_as_server(batch: MessageBatch) -> bool:
    """Whether a row of ``batch`` has the sender ``SERVER``."""
    return bool(batch.sender.min() <= SERVER and (batch.sender == SERVER).any())


def _sent_only_by_server(batch: MessageBatch) -> bool:
    """Whether every row of ``batch`` has the sender ``SERVER``."""
    return not np.count_nonzero(batch.sender != SERVER)


class _HeaderPlan:
    """A checked batch header of one kind, kept for the later batches of that kind with the same header.

    Holds immutable copies (:func:`~fedbandit_envs.frozen.frozen`) of the routed header arrays (the ``NEIGHBOURS``
    rows expanded to one row per linked node, the payload rows ``rows`` under them; ``rows`` is None when the header
    has no broadcast row), so a batch routed with it no longer aliases the sender's arrays, and neither a sender
    nor a recipient can change a header that the ledger tallies later or the next batches reuse. When the batch's
    own header arrays are immutable (:func:`~fedbandit_envs.frozen.is_frozen`), the plan holds them as ``sources``:
    a later batch with these very arrays has this header without comparing it.
    """

    def __init__(self, batch: MessageBatch, rows: np.ndarray | None, recipient: np.ndarray) -> None:
        sources = (batch.replica, batch.sender, batch.recipient)
        self.sources = sources if all(is_frozen(a) for a in sources) else None
        self.rows = None if rows is None else frozen(rows)
        self.server_sender = _sends_as_server(batch)
        self.server_senders_only = _sent_only_by_server(batch)
        if rows is None:
            self.header = (frozen(batch.replica), frozen(batch.sender), frozen(recipient))
        else:
            self.header = (frozen(batch.replica[rows]), frozen(batch.sender[rows]), frozen(recipient))
        self.copies = len(recipient)  # routed copies
        self.unsent = shared_constant(self.copies, -1)  # immutable, shared with every header of that length
        self.to_server = int(np.count_nonzero(recipient == SERVER))  # routed copies whose recipient is the server

    @classmethod
    def of_gossip_edges(cls, header: tuple[np.ndarray, np.ndarray, np.ndarray]) -> _HeaderPlan:
        """The plan of the channel's own gossip header (immutable, agents to linked agents: valid by construction)."""
        plan = object.__new__(cls)
        plan.sources, plan.rows, plan.header = None, None, header
        plan.server_sender = plan.server_senders_only = False  # every sender is an agent (and there is a row)
        plan.copies = len(header[0])
        plan.unsent = shared_constant(plan.copies, -1)
        plan.to_server = 0
        return plan

    def has_sources_of(self, batch: MessageBatch) -> bool:
        """Whether ``batch`` holds this plan's immutable source header arrays themselves (so it has its header)."""
        sources = self.sources
        return (
            sources is not None
            and batch.replica is sources[0]
            and batch.sender is sources[1]
            and batch.recipient is sources[2]
        )

    def apply(self, batch: MessageBatch, stamp: np.ndarray | None = None) -> MessageBatch:
        """``batch`` (whose header this is) under the plan's read-only header, unsent (slot -1) or stamped ``stamp``.

        ``stamp``: the immutable (copies,) slot array of the slot the batch is to be sent in (:meth:`Channel.stamp`).
        """
        return batch.regrouped(self.rows, *self.header, self.unsent if stamp is None else stamp)


class Channel:
    """Routes message batches over per-replica topologies and records them in a :class:`Ledger`."""

    def __init__(self, config: ChannelConfig | None = None) -> None:
        self.config = config or ChannelConfig()
        self.ledger = Ledger(self.config.costs, self.config.record_messages)

    # ------------------------------------------------------------------ episode
    def reset(self, topologies: Sequence[Topology], rngs: Sequence[np.random.Generator]) -> None:
        """Start an episode: one topology and one channel Generator per replica."""
        if len(topologies) != len(rngs):
            raise ValueError("reset needs one topology and one rng per replica")
        self.num_replicas = len(topologies)
        self.num_agents = topologies[0].num_agents
        if any(t.num_agents != self.num_agents for t in topologies):
            raise ValueError("every replica's topology must have the same number of agents")
        m = self.num_agents
        links = np.zeros((self.num_replicas, m + 1, m + 1), bool)
        for b, topology in enumerate(topologies):
            links[b, :m, :m] = topology.adjacency
            links[b, :m, m] = links[b, m, :m] = topology.server_links
        self._links = links
        #: Whether any replica links an agent to the server (otherwise no prepared copy can reach SERVER).
        self.server_linked = bool(links[:, :m, m].any())
        self._topologies = list(topologies)
        self._rngs = list(rngs)
        self._latency = self._latency_matrix(m)
        components = [t.component_of() for t in topologies]
        num_components = max(int(c.max()) + 1 for c in components)
        edges = np.zeros((self.num_replicas, num_components), np.int64)
        for b, topology in enumerate(topologies):
            np.add.at(edges[b], components[b][topology.edges()[:, 0]], 1)
        self.ledger.reset(self.num_replicas, m, np.stack(components), edges, links)
        self._episode_layouts = EpisodeLayouts(self.num_replicas)
        self._in_flight: dict[int, list[MessageBatch]] = {}
        self._plans: dict[tuple[str, tuple], _HeaderPlan] = {}  # by kind and header key
        self._last_plans: dict[str, _HeaderPlan] = {}  # the plan each kind used last (known by its source arrays)
        self._plan_rows = 0
        # by batch length: (slot, its stamp, the block's first slot, the block) of the last stamp made (see stamp)
        self._stamps: dict[int, tuple[int, np.ndarray, int, np.ndarray]] = {}
        self.no_partners = frozen(np.full((self.num_replicas, m), -1, np.int64))
        self._edges = [t.edges() for t in topologies]
        self.config.check_gossip(topologies)
        # NEIGHBOURS expansion: the linked nodes of flat node (replica b, node s) = b * (M + 1) + s are
        # _neighbour_ids[_neighbour_ptr[f]:_neighbour_ptr[f + 1]], ascending, the server (node M) as SERVER.
        _, nodes = np.nonzero(links.reshape(-1, m + 1))
        self._neighbour_ids = np.where(nodes == m, SERVER, nodes)
        self._neighbour_ptr = np.concatenate([[0], np.cumsum(links.sum(axis=2).reshape(-1))])
        # Gossip edges are drawn GOSSIP_BLOCK slots at a time per replica (the same draws, one call per block) when
        # the channel stream has no other use; drops and jitter draw from it too, so then one slot at a time.
        self._gossip_block = GOSSIP_BLOCK if self.config.drop_prob == 0.0 and self.config.latency_jitter == 0 else 1
        self._gossip_partners = np.zeros((0, self.num_replicas, m), np.int64)
        self._gossip_offset = 0
        # the gossip header of each slot of the block (see _draw_gossip_headers), and the plan of the last slot's
        self._gossip_headers = tuple(np.zeros(0, np.int64) for _ in range(3))
        self._gossip_bounds = np.zeros(1, np.int64)
        self._gossip_slot = -1  # the block's slot sampled last (-1: none)
        self._gossip_serial = 0  # counts the slots sampled from blocks
        self._gossip_plan: tuple[int, tuple, _HeaderPlan] | None = None  # (serial, header key, plan) of one slot

    def __getstate__(self) -> dict[str, object]:
        """The channel's state for a copy (pickle, deepcopy), without the slot stamps (:meth:`stamp`).

        A copy's arrays are made anew and are writeable, and a stamp's block holds the stamps of later slots: the copy
        makes its own blocks (immutable) as it stamps.
        """
        state = dict(self.__dict__)
        if "_stamps" in state:
            state["_stamps"] = {}
        return state

    def _latency_matrix(self, m: int) -> np.ndarray:
        self.config.check_agents(m)
        latency = np.asarray(self.config.latency, np.int64)
        return np.full((m + 1, m + 1), int(latency), np.int64) if latency.ndim == 0 else latency

    # ------------------------------------------------------------------ gossip
    def sample_gossip_partners(self) -> np.ndarray:
        """Draw the gossip edge of the next slot per replica; (B, M) partner index, -1 for none (read-only).

        Edges are drawn a block of slots at a time (see ``reset``); in the reference mode
        (:mod:`fedbandit_envs.reference`) each slot's edges are drawn alone by :meth:`_plain_gossip_partners`, the
        same draws (a block already drawn is used up first).
        """
        if self.config.gossip is None:
            return self.no_partners
        if self._gossip_offset == len(self._gossip_partners):
            if reference_active():
                self._gossip_slot = -1
                return self._plain_gossip_partners()
            size = self._gossip_block
            pairs = np.empty((self.num_replicas, size, 2), np.int64)
            for b, rng in enumerate(self._rngs):
                if self.config.gossip == "uniform_edge":
                    pairs[b] = self._edges[b][rng.integers(len(self._edges[b]), size=size)]
                    continue
                for r in range(size):
                    pairs[b, r] = self._node_then_neighbour(b)
            self._gossip_offset = 0
            # partners of every slot of the block at once: [r, b] is slot r's (B, M) partner array
            partners = np.full((size, self.num_replicas, self.num_agents), -1, np.int64)
            slots, replicas = np.arange(size)[:, None], np.arange(self.num_replicas)[None, :]
            first, second = pairs[..., 0].T, pairs[..., 1].T
            partners[slots, replicas, first] = second
            partners[slots, replicas, second] = first
            self._gossip_partners = partners  # the channel's own: a slot hands out a copy of its rows
            self._draw_gossip_headers(first, second)
        partners = frozen(self._gossip_partners[self._gossip_offset])  # this slot's alone: a view would show the block
        self._gossip_slot = self._gossip_offset
        self._gossip_serial += 1
        self._gossip_offset += 1
        return partners

    def _draw_gossip_headers(self, first: np.ndarray, second: np.ndarray) -> None:
        """Keep the gossip header of each slot of a block: slot r's edge of replica b is ``first[r, b], second[r, b]``.

        Slot r's header (rows ``_gossip_bounds[r]:_gossip_bounds[r + 1]``) has one row per agent on a gossip edge,
        in the order of the flat index b * M + i, from the agent to its partner: the header of a batch that each
        such agent sends to its partner (e.g. Zhu's ``theta``). Gossip edges are edges of the topology, so a batch
        with this header needs no check (:meth:`_kept_plan`). The channel's own arrays (a slot's plan holds
        immutable copies of its rows, :meth:`_gossip_plan_of`); none if an edge were a loop.
        """
        size, b = first.shape
        if (first == second).any():  # never (a topology has no loops), but then the headers would not be these
            self._gossip_bounds = np.zeros(size + 1, np.int64)
            return
        low, high = np.minimum(first, second), np.maximum(first, second)
        replica = self._gossip_headers[0]
        if len(replica) != 2 * b * size:  # the same for every block of this size
            replica = frozen(np.broadcast_to(np.arange(b)[:, None], (size, b, 2)).reshape(-1))
        self._gossip_headers = (
            replica,
            np.stack([low, high], axis=2).reshape(-1),
            np.stack([high, low], axis=2).reshape(-1),
        )
        self._gossip_bounds = np.arange(size + 1) * (2 * b)

    def _gossip_plan_of(self, key: tuple) -> _HeaderPlan | None:
        """The plan of the gossip header of the slot sampled last, if ``key`` is that header's key (else None).

        The plan holds immutable copies of the slot's rows of the block's header arrays and is built once per slot.
        """
        if self._gossip_slot < 0:  # no gossip, or the last slot's edges were drawn alone (reference mode)
            return None
        kept = self._gossip_plan
        if kept is None or kept[0] != self._gossip_serial:
            lo, hi = self._gossip_bounds[self._gossip_slot], self._gossip_bounds[self._gossip_slot + 1]
            # copies of this slot's rows alone: delivered batches carry them, and a view would show the block's edges
            replica, sender, recipient = (frozen(array[lo:hi]) for array in self._gossip_headers)
            header = replica, sender, recipient
            keys = tuple(array.tobytes() for array in header)
            kept = self._gossip_plan = (self._gossip_serial, keys, _HeaderPlan.of_gossip_edges(header))
        return kept[2] if key == kept[1] else None

    def _node_then_neighbour(self, replica: int) -> tuple[int, int]:
        """A uniform agent of ``replica``, then a uniform neighbour of it (no agent is isolated under gossip)."""
        rng = self._rngs[replica]
        i = int(rng.integers(self.num_agents))
        neighbours = self._topologies[replica].neighbours(i)
        return i, int(neighbours[rng.integers(len(neighbours))])

    def _plain_gossip_partners(self) -> np.ndarray:
        """The reference version of a block of gossip edges: one slot, one edge per replica, set pair by pair."""
        partners = np.full((self.num_replicas, self.num_agents), -1, np.int64)
        for b, rng in enumerate(self._rngs):
            if self.config.gossip == "uniform_edge":
                i, j = self._edges[b][rng.integers(len(self._edges[b]))].tolist()
            else:
                i, j = self._node_then_neighbour(b)
            partners[b, i], partners[b, j] = j, i
        return frozen(partners)

    # ------------------------------------------------------------------ routing
    def _kept_plan(self, batch: MessageBatch) -> tuple[_HeaderPlan | None, tuple]:
        """The plan kept for the kind of ``batch`` and its header (else None), and the header key it was looked up by.

        The header is the plan's if the batch holds the plan's immutable source arrays (then no key is computed:
        ``()``), or else if its header key is the plan's. A batch whose header is the gossip header of the slot
        sampled last (each agent on a gossip edge to its partner, in flat order) gets that header's plan. Always None
        in the reference mode (:mod:`fedbandit_envs.reference`), which keeps nothing (and needs no key).
        """
        if reference_active():
            return None, ()
        last = self._last_plans.get(batch.kind)
        if last is not None and last.has_sources_of(batch):
            return last, ()
        key = batch.header_key()
        plan = self._gossip_plan_of(key)  # compared first: a new header (the gossip edges') is not hashed
        if plan is None:
            plan = self._plans.get((batch.kind, key))
        if plan is not None:
            self._last_plans[batch.kind] = plan
        return plan, key

    def _new_plan(self, batch: MessageBatch, key: tuple) -> _HeaderPlan:
        """Check ``batch`` and plan its routing; the plan is kept under its kind and header ``key`` (links are fixed).

        Every kept plan is dropped first when they would hold more than :data:`PLAN_ROWS` rows in all.
        In the reference mode nothing is kept and every batch is checked and expanded by :meth:`_plain_plan`.
        """
        if reference_active():
            return self._plain_plan(batch)
        plan = self._plan(batch, self._check(batch))
        rows = len(plan.header[0])
        if self._plan_rows + rows > PLAN_ROWS:
            self._plans.clear()
            self._last_plans.clear()
            self._plan_rows = 0
        self._plans[(batch.kind, key)] = self._last_plans[batch.kind] = plan
        self._plan_rows += rows
        return plan

    def _check(self, batch: MessageBatch) -> np.ndarray | None:
        """Raise ``ValueError`` for an unknown id or a missing link.

        Returns the mask of the ``NEIGHBOURS`` rows, or None when the batch has none.
        """
        m = self.num_agents
        sender, recipient, replica = batch.sender, batch.recipient, batch.replica
        if replica.min() < 0 or replica.max() >= self.num_replicas:
            bad = replica[(replica < 0) | (replica >= self.num_replicas)][0]
            raise ValueError(f"message replica {bad} is not a replica index in [0, {self.num_replicas})")
        ids = np.concatenate((sender, recipient))
        lowest = ids.min()
        # negative ids index nodes from the end: SERVER = -1 is node M (NEIGHBOURS rows are not link-checked)
        if lowest >= SERVER and ids.max() < m:  # agents and SERVER only: no broadcast row, no unknown id
            self._check_links(batch, self._links[batch.replica, sender, recipient])
            return None
        if sender.min() < SERVER or sender.max() >= m:
            bad = sender[(sender < SERVER) | (sender >= m)][0]
            raise ValueError(f"message sender {bad} is not an agent index in [0, {m}) or SERVER")
        # explicit recipients must be known and linked (broadcast copies follow links by construction)
        broadcast = recipient == NEIGHBOURS
        valid_id = ((recipient >= SERVER) & (recipient < m)) | broadcast
        if not valid_id.all():
            bad = recipient[~valid_id][0]
            raise ValueError(
                f"message recipient {bad} is unknown: use an agent index in [0, {m}), SERVER or NEIGHBOURS"
            )
        self._check_links(batch, self._links[batch.replica, sender, recipient] | broadcast)
        return broadcast

    @staticmethod
    def _check_links(batch: MessageBatch, linked: np.ndarray) -> None:
        """Raise ``ValueError`` naming the first row of ``batch`` whose ``linked`` entry is False."""
        if linked.all():
            return
        r = int(np.flatnonzero(~linked)[0])
        who = lambda i: "the server" if i == SERVER else f"agent {i}"  # noqa: E731
        raise ValueError(
            f"{who(batch.sender[r])} cannot send {batch.kind!r} to {who(batch.recipient[r])}: "
            f"they are not linked in the topology; send only to neighbours (or NEIGHBOURS)"
        )

    def _plan(self, batch: MessageBatch, broadcast: np.ndarray | None) -> _HeaderPlan:
        """The plan of a checked header: one row per linked node of a broadcast row, in row order.

        Linked nodes ascend, the server last; ``broadcast`` is the mask of the broadcast rows, or None if there is none.
        """
        if broadcast is None:
            return _HeaderPlan(batch, None, batch.recipient)
        m = self.num_agents
        flat = batch.replica * (m + 1) + np.where(batch.sender == SERVER, m, batch.sender)
        start = self._neighbour_ptr[flat]
        copies = np.where(broadcast, self._neighbour_ptr[flat + 1] - start, 1)
        rows = np.repeat(np.arange(len(batch)), copies)
        position = np.repeat(start - (np.cumsum(copies) - copies), copies) + np.arange(len(rows))
        copied = broadcast[rows]
        expanded = batch.recipient[rows]
        expanded[copied] = self._neighbour_ids[position[copied]]
        return _HeaderPlan(batch, rows, expanded)

    def _plain_plan(self, batch: MessageBatch) -> _HeaderPlan:
        """The reference version of :meth:`_plan`: check the batch, then expand it row by row from the links."""
        self._check(batch)
        m = self.num_agents
        rows, recipients = [], []
        for row, (b, sender, recipient) in enumerate(
            zip(*(a.tolist() for a in (batch.replica, batch.sender, batch.recipient)))
        ):
            if recipient != NEIGHBOURS:
                rows.append(row)
                recipients.append(recipient)
                continue
            for node in np.flatnonzero(self._links[b, m if sender == SERVER else sender]).tolist():
                rows.append(row)
                recipients.append(SERVER if node == m else node)
        return _HeaderPlan(batch, np.array(rows, np.int64), np.array(recipients, np.int64))

    def prepare(
        self,
        batches: Sequence[MessageBatch],
        *,
        from_agents: bool = False,
        from_server: bool = False,
        slot: int | None = None,
    ) -> list[MessageBatch]:
        """Validate batches and expand ``NEIGHBOURS`` recipients, without any side effect on the episode.

        Raises ``ValueError`` for an unknown sender or recipient or a missing link, so that a caller
        can validate a whole slot before changing any state. With ``from_agents`` (the agents' own batches),
        a SERVER sender in any batch raises, and with ``from_server`` (the coordinator's replies) any other sender
        does; that error is reported before any other of the slot (a kept plan knows its header's senders). Those
        batches are what the learner sent, so their layouts are registered for the episode last, and one beyond the
        limits of :mod:`~fedbandit_envs.channel.layouts` (a kind's layouts, the kinds) raises ``ValueError`` and
        registers none; the registered layouts are the one thing a step refused later (by a hook) leaves behind.

        The batches returned hold read-only copies of the header arrays, never the caller's arrays, so a sender
        that writes into its arrays later cannot change what was routed. A header is checked, expanded and copied
        once per kind and kept for every later batch of the kind that repeats it (see :meth:`_kept_plan`).

        ``slot``: the slot the batches are to be sent in; they come stamped with it (the channel's shared stamps,
        :meth:`stamp`), so :meth:`transmit` in that slot sends them as they are. Without it, and in the reference mode
        (:mod:`fedbandit_envs.reference`), they come unsent (slot -1) and :meth:`transmit` stamps them.
        """
        if len(batches) == 1:  # the common case: one batch, known by the source arrays of its kind's last plan
            batch = batches[0]
            plan = self._last_plans.get(batch.kind)
            if plan is not None and plan.has_sources_of(batch) and not reference_active():
                self._check_senders(plan, batch, from_agents, from_server)
                if from_agents or from_server:
                    self._episode_layouts.check(batches)
                return [plan.apply(batch, self._stamp_for(slot, plan.copies))]
        batches = [batch for batch in batches if len(batch.sender)]
        kept = [self._kept_plan(batch) for batch in batches]
        if from_agents:  # every batch's senders first, then the links of the batches not planned yet
            for batch, (plan, _) in zip(batches, kept):
                self._check_senders(plan, batch, True, False)
        if from_server:
            for batch, (plan, _) in zip(batches, kept):
                self._check_senders(plan, batch, False, True)
        plans = [plan or self._new_plan(batch, key) for batch, (plan, key) in zip(batches, kept)]
        if from_agents or from_server:  # what the learner sent (not what the hooks made of it): layouts bounded
            self._episode_layouts.check(batches)
        return [plan.apply(batch, self._stamp_for(slot, plan.copies)) for batch, plan in zip(batches, plans)]

    @staticmethod
    def _check_senders(plan: _HeaderPlan | None, batch: MessageBatch, from_agents: bool, from_server: bool) -> None:
        """Raise ``ValueError`` for a SERVER sender ``from_agents``, or for another sender ``from_server``.

        ``plan``: the batch's kept plan (which knows its header's senders), or None.
        """
        if from_agents and (plan.server_sender if plan is not None else _sends_as_server(batch)):
            raise ValueError(AGENTS_AS_SERVER)
        if from_server and not (plan.server_senders_only if plan is not None else _sent_only_by_server(batch)):
            raise ValueError(REPLY_NOT_FROM_SERVER)

    def _stamp_for(self, slot: int | None, rows: int) -> np.ndarray | None:
        """The stamp of ``rows`` copies sent in ``slot``; None without a slot or in the reference mode."""
        if slot is None or reference_active():
            return None
        return self.stamp(slot, rows)

    def stamp(self, slot: int, rows: int) -> np.ndarray:
        """An immutable (rows,) int64 array of ``slot``: the slot column of a batch of ``rows`` copies sent in ``slot``.

        One array per slot and length, shared by the batches stamped with it: a row of a block of the stamps of
        consecutive slots. A length's first block holds one slot; a block used up by the next slot is followed by one
        twice as long (up to :data:`STAMP_ENTRIES` entries), so a length sent every slot costs a row view per slot and
        a length sent now and then a block of one row. The reference mode (:mod:`fedbandit_envs.reference`) makes each
        batch's column alone (:meth:`MessageBatch.stamped`).
        """
        kept = self._stamps.get(rows)
        if kept is not None and kept[0] == slot:
            return kept[1]
        if kept is not None and 0 <= slot - kept[2] < len(kept[3]):
            kept = (slot, kept[3][slot - kept[2]], kept[2], kept[3])
        else:
            size = 1
            if kept is not None and slot == kept[2] + len(kept[3]):  # the last block was used up: a longer one
                size = min(2 * len(kept[3]), max(1, STAMP_ENTRIES // max(rows, 1)))
            if len(self._stamps) >= 64:
                self._stamps.clear()
            block = frozen(np.repeat(np.arange(slot, slot + size, dtype=np.int64), rows).reshape(size, rows))
            kept = (slot, block[0], slot, block)
        self._stamps[rows] = kept
        return kept[1]

    def transmit(self, slot: int, prepared: Sequence[MessageBatch]) -> list[MessageBatch]:
        """Send prepared batches in ``slot``: record them in the ledger, then drop and delay copies.

        Returns the copies that arrive in this same slot (explicit recipients, stamped with ``slot``). A batch prepared
        for ``slot`` holds the channel's stamp of that slot already (:meth:`stamp`) and is sent as it is (except in the
        reference mode, :mod:`fedbandit_envs.reference`, which stamps every batch here).

        Drops, then the jitter of the copies kept, are drawn per replica for all the copies of the call at once, in
        the canonical order of :func:`~fedbandit_envs.channel.messages.canonical_order`: which copy is lost or late
        does not depend on how the rows were grouped into batches or ordered across senders (the PettingZoo path
        regroups them by sender), so every runner path loses and delays the same copies.
        """
        ledger, has_delays = self.ledger, self.config.has_delays
        stamps = None if reference_active() else self._stamps
        sent = []
        for batch in prepared:
            made = None if stamps is None else stamps.get(len(batch.slot))  # (slot, its stamp, ...) (see stamp)
            sent.append(
                batch if made is not None and made[0] == slot and batch.slot is made[1] else batch.stamped(slot)
            )
        if self.config.drop_prob == 0.0:
            for batch in sent:
                ledger.transmit(slot, batch)
            kept = sent
        else:
            kept = []
            for batch, dropped in zip(sent, self._drops(sent)):
                ledger.transmit(slot, batch)
                ledger.mark_dropped(batch, dropped)
                kept.append(batch.take(~dropped))
        if not has_delays:
            return kept
        arriving = []
        for batch, delay in zip(kept, self._delays(kept)):
            if np.any(delay == 0):
                arriving.append(batch.take(delay == 0))
            for d in np.unique(delay[delay > 0]):
                self._in_flight.setdefault(slot + int(d), []).append(batch.take(delay == d))
        return arriving

    def _drops(self, batches: list[MessageBatch]) -> list[np.ndarray]:
        """Per batch, the mask of its copies lost (drawn in the canonical order)."""
        draws = draws_in_canonical_order(batches, self._rngs, lambda rng, n: rng.random(n))
        return [draw < self.config.drop_prob for draw in draws]

    def _delays(self, batches: list[MessageBatch]) -> list[np.ndarray]:
        """Per batch, the delay of each copy: the link's latency plus its jitter (drawn in the canonical order)."""
        m = self.num_agents
        jitter = self.config.latency_jitter
        if jitter > 0:
            extras = draws_in_canonical_order(
                batches, self._rngs, lambda rng, n: rng.integers(0, jitter + 1, n), np.int64
            )
        else:
            extras = [np.zeros(len(batch), np.int64) for batch in batches]
        delays = []
        for batch, extra in zip(batches, extras):
            sender = np.where(batch.sender == SERVER, m, batch.sender)
            recipient = np.where(batch.recipient == SERVER, m, batch.recipient)
            delays.append(self._latency[sender, recipient] + extra)
        return delays

    def copies_to_server(self, batch: MessageBatch) -> int:
        """How many rows of a transmitted ``batch`` go to the server.

        Read from the kind's kept plan when the batch holds the plan's routed recipient array (every copy of a kept
        header went on); else, and in the reference mode (:mod:`fedbandit_envs.reference`), counted.
        """
        plan = self._last_plans.get(batch.kind)
        if plan is not None and batch.recipient is plan.header[2] and not reference_active():
            return plan.to_server
        return int(np.count_nonzero(batch.recipient == SERVER))

    @property
    def in_flight(self) -> bool:
        """Whether some delayed copies are still to be delivered."""
        return bool(self._in_flight)

    def due(self, slot: int) -> list[MessageBatch]:
        """Delayed copies whose delivery slot is ``slot`` (removed from the in-flight queue)."""
        return self._in_flight.pop(slot, [])

    def close_slot(self) -> None:
        """Finish the slot: price the links it used."""
        self.ledger.close_slot()
