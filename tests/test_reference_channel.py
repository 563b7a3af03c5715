"""The channel's and the ledger's caches against their plain reference versions, bit for bit, on random workloads.

With :func:`fedbandit_envs.reference.reference_mode` on, the ledger tallies every copy and every slot's links at
once, one by one; the channel checks and expands every batch from the links row by row (no kept header plans) and
draws every slot's gossip edges alone (no blocks). Each test plays one random workload (random topologies, batch
headers with broadcasts and repeated headers, immutable or not, kinds and layouts, drops, latency, gossip) with the
fast paths and again in the reference mode, and compares everything observable exactly. Hypothesis draws the
workload's seed; examples are bounded (``max_examples``) so the module stays within seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from property_settings import reproducible

from fedbandit_envs import NEIGHBOURS, SERVER, MessageBatch
from fedbandit_envs.channel import Channel, ChannelConfig, CostModel
from fedbandit_envs.channel.ledger import DIRECTIONS, Ledger
from fedbandit_envs.frozen import frozen
from fedbandit_envs.reference import reference_mode
from fedbandit_envs.topology import Topology

PROPERTY = reproducible(25)
SEEDS = st.integers(0, 2**32 - 1)

#: Every total the ledger reports (per replica, node, direction or kind).
LEDGER_TOTALS = (
    "messages", "copies", "scalars", "bytes", "links", "link_cost", "cost", "dropped", "sent_messages", "sent_bytes",
    "received_messages", "received_bytes", "node_cost", "direction_messages", "direction_bytes",
)  # fmt: skip


def random_topology(rng: np.random.Generator, num_agents: int, connected: bool) -> Topology:
    """A random graph (a ring under it when ``connected``) with random server links."""
    adjacency = np.triu(rng.random((num_agents, num_agents)) < 0.4, 1)
    if connected:
        adjacency[np.arange(num_agents - 1), np.arange(1, num_agents)] = True
    adjacency = adjacency | adjacency.T
    return Topology(adjacency, rng.random(num_agents) < 0.6, "random")


def random_config(rng: np.random.Generator, num_agents: int, gossip: bool) -> ChannelConfig:
    """Random prices, link accounting, latency (a number or a matrix), jitter, drops and gossip."""
    costs = CostModel(
        c1=float(rng.choice([0.0, 0.1, 1.0])),
        c2=float(rng.choice([0.3, 1.0])),
        link_accounting=str(rng.choice(["used_links", "graph_edges"])),  # type: ignore[arg-type]
        free_server_downlink=bool(rng.random() < 0.5),
        price_per_message=float(rng.choice([0.0, 0.25])),
        price_per_byte=float(rng.choice([0.0, 0.01])),
    )
    latency: Any = int(rng.integers(0, 2))
    if rng.random() < 0.3:
        latency = rng.integers(0, 3, (num_agents + 1, num_agents + 1))
    return ChannelConfig(
        costs=costs,
        latency=latency,
        latency_jitter=int(rng.integers(0, 2)),
        drop_prob=float(rng.choice([0.0, 0.3])),
        gossip=str(rng.choice(["uniform_edge", "node_then_neighbour"])) if gossip else None,  # type: ignore[arg-type]
        record_messages=bool(rng.random() < 0.7),
    )


def random_batch(rng: np.random.Generator, topologies: list[Topology], kind: str, width: int) -> MessageBatch:
    """Rows from linked nodes to a linked node or NEIGHBOURS (the server too), packed counts now and then."""
    m = topologies[0].num_agents
    rows = []
    for _ in range(int(rng.integers(1, 9))):
        b = int(rng.integers(len(topologies)))
        links = np.zeros((m + 1, m + 1), bool)
        links[:m, :m] = topologies[b].adjacency
        links[:m, m] = links[m, :m] = topologies[b].server_links
        senders = np.flatnonzero(links.any(axis=1))
        if len(senders) == 0:
            continue
        s = int(rng.choice(senders))
        to = NEIGHBOURS if rng.random() < 0.4 else int(rng.choice(np.flatnonzero(links[s])))
        rows.append((b, SERVER if s == m else s, SERVER if to == m else to))
    replica, sender, recipient = (np.array(column, np.int64) for column in zip(*rows)) if rows else ([], [], [])
    if rows and rng.random() < 0.5:  # immutable header arrays: the same header again is known by the arrays themselves
        replica, sender, recipient = frozen(replica), frozen(sender), frozen(recipient)
    n = len(replica)
    count = rng.integers(1, 4, n) if rng.random() < 0.3 else None
    payload = {"v": rng.normal(size=(n, width)), "k": rng.integers(0, 9, (n, 1)).astype(np.int32)}
    return MessageBatch(kind, replica, sender, recipient, payload, count=count)


def workload(seed: int, gossip: bool = False) -> tuple[list[Topology], ChannelConfig, list[list[MessageBatch]]]:
    """B replicas of M agents, a channel config and each slot's batches (kinds a-c; a kind repeats a header often,
    its last one or an older one)."""
    rng = np.random.default_rng(seed)
    num_replicas, num_agents = int(rng.integers(1, 4)), int(rng.integers(2, 6))
    topologies = [random_topology(rng, num_agents, gossip) for _ in range(num_replicas)]
    config = random_config(rng, num_agents, gossip)
    slots: list[list[MessageBatch]] = []
    sent: dict[str, list[MessageBatch]] = {}
    for _ in range(int(rng.integers(4, 14))):
        batches = []
        for kind, width in (("a", 1), ("b", 3), ("c", 2)):
            if rng.random() < 0.3:
                continue
            if kind in sent and rng.random() < 0.6:  # a header again (or its senders to NEIGHBOURS), a new payload
                old = sent[kind][-1] if rng.random() < 0.5 else sent[kind][int(rng.integers(len(sent[kind])))]
                payload = {"v": rng.normal(size=(len(old), width)), "k": old.payload["k"]}
                recipient = old.recipient if rng.random() < 0.7 else np.full(len(old), NEIGHBOURS)
                batch = MessageBatch(kind, old.replica, old.sender, recipient, payload)
            else:
                batch = random_batch(rng, topologies, kind, width)
            sent.setdefault(kind, []).append(batch)
            batches.append(batch)
        slots.append(batches)
    return topologies, config, slots


def play(
    topologies: list[Topology],
    config: ChannelConfig,
    slots: list[list[MessageBatch]],
    read_every: int,
    stamp_early: bool = False,
) -> dict:
    """Route every slot's batches through a fresh channel; everything it delivered and the ledger's totals.

    ``stamp_early``: prepare the batches for their slot (stamped at once with the channel's shared stamps).
    """
    channel = Channel(config)
    channel.reset(topologies, [np.random.default_rng([7, b]) for b in range(len(topologies))])
    delivered, partners = [], []
    for slot, batches in enumerate(slots):
        partners.append(channel.sample_gossip_partners().copy())
        prepared = channel.prepare(batches, slot=slot if stamp_early else None)
        arrived = channel.due(slot) + channel.transmit(slot, prepared)
        delivered.extend(arrived)
        channel.close_slot()
        if read_every and slot % read_every == 0:
            channel.ledger.totals(0)  # a read mid-episode tallies the queues
    return {"delivered": delivered, "partners": partners, "ledger": channel.ledger}


def assert_same_batches(fast: list[MessageBatch], plain: list[MessageBatch]) -> None:
    assert len(fast) == len(plain)
    for a, b in zip(fast, plain):
        assert a.kind == b.kind and a.privacy == b.privacy and a.payload.keys() == b.payload.keys()
        for name in ("replica", "sender", "recipient", "count", "slot"):
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        for name in a.payload:
            assert a.payload[name].dtype == b.payload[name].dtype
            np.testing.assert_array_equal(a.payload[name], b.payload[name])


def assert_same_ledger(fast: Ledger, plain: Ledger) -> None:
    for name in LEDGER_TOTALS:
        x, y = getattr(fast, name), getattr(plain, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name  # bit for bit, floats included
    assert fast.kind_messages.keys() == plain.kind_messages.keys()
    for kind in fast.kind_messages:
        assert np.array_equal(fast.kind_messages[kind], plain.kind_messages[kind])
        assert np.array_equal(fast.kind_bytes[kind], plain.kind_bytes[kind])
    if fast.record_messages:
        plain_records = plain.records()
        for column, values in fast.records().items():
            np.testing.assert_array_equal(values, plain_records[column])


@PROPERTY
@given(seed=SEEDS, read_every=st.sampled_from([0, 1, 3]))
def test_ledger_tallies_equal_the_reference(seed: int, read_every: int) -> None:
    """Bulk tallies (read at any time, or tallied after every batch) equal copy-by-copy tallies at once."""
    topologies, config, slots = workload(seed)
    fast = play(topologies, config, slots, read_every)
    with reference_mode():
        plain = play(topologies, config, slots, read_every)
    assert_same_ledger(fast["ledger"], plain["ledger"])
    totals = fast["ledger"].totals(0)
    assert set(totals) >= {f"{d}_messages" for d in DIRECTIONS}


@PROPERTY
@given(seed=SEEDS)
def test_expansion_plans_equal_the_reference(seed: int) -> None:
    """Kept header plans route every batch (repeated headers, broadcasts, drops, delays) as a fresh row-by-row
    expansion does: the same copies, in the same order, with the same payloads."""
    topologies, config, slots = workload(seed)
    fast = play(topologies, config, slots, 0)
    with reference_mode():
        plain = play(topologies, config, slots, 0)
    assert_same_batches(fast["delivered"], plain["delivered"])
    assert_same_ledger(fast["ledger"], plain["ledger"])


@PROPERTY
@given(seed=SEEDS, single=st.booleans())
def test_batches_stamped_when_prepared_equal_the_reference(seed: int, single: bool) -> None:
    """Batches prepared for their slot carry the channel's shared stamps (a row of a block of slots, one array per
    slot and length) and are sent as they are: delivered and tallied as the reference, which stamps each batch alone
    when it is transmitted (``single``: one batch a slot, the path of a batch known by its plan's source arrays)."""
    topologies, config, slots = workload(seed)
    if single:
        slots = [batches[:1] for batches in slots]
    fast = play(topologies, config, slots, 0, stamp_early=True)
    with reference_mode():
        plain = play(topologies, config, slots, 0, stamp_early=True)
    assert_same_batches(fast["delivered"], plain["delivered"])
    assert_same_ledger(fast["ledger"], plain["ledger"])
    late = play(topologies, config, slots, 0)  # stamped at transmission: the same again
    assert_same_batches(fast["delivered"], late["delivered"])


@PROPERTY
@given(seed=SEEDS, horizon=st.integers(1, 600))
def test_gossip_blocks_equal_the_reference(seed: int, horizon: int) -> None:
    """Gossip partners drawn in blocks are the partners drawn one slot at a time (blocks of 256 crossed)."""
    topologies, config, _ = workload(seed, gossip=True)
    fast = play(topologies, config, [[]] * horizon, 0)["partners"]
    with reference_mode():
        plain = play(topologies, config, [[]] * horizon, 0)["partners"]
    assert len(fast) == len(plain) == horizon
    for a, b in zip(fast, plain):
        assert np.array_equal(a, b)
    assert all((a >= 0).sum(axis=1).tolist() == [2] * len(topologies) for a in fast)  # one edge per replica


def play_gossip(topologies: list[Topology], config: ChannelConfig, seed: int) -> dict[str, Any]:
    """Each slot one batch over the slot's gossip edges (each agent on an edge to its partner, in flat order), its
    rows sometimes reordered, cut, broadcast, from an earlier slot or unlinked (an error); what was delivered."""
    rng = np.random.default_rng(seed)
    channel = Channel(config)
    channel.reset(topologies, [np.random.default_rng([7, b]) for b in range(len(topologies))])
    delivered: list[MessageBatch] = []
    errors: list[int] = []
    kept_plans = gossip_headers = 0
    previous = None
    for slot in range(int(rng.integers(4, 40))):
        partners = channel.sample_gossip_partners()
        flat = partners.reshape(-1)
        rows = np.flatnonzero(flat >= 0)
        header = gossip = [rows // partners.shape[1], rows % partners.shape[1], flat[rows].copy()]
        change = int(rng.integers(6))
        if change == 1:  # the same rows in another order: not the gossip header, checked and expanded
            header = [array[::-1].copy() for array in header]
        elif change == 2:
            header = [array[:-1].copy() for array in header]
        elif change == 3:
            header = [*header[:2], header[2].copy()]
            header[2][0] = NEIGHBOURS
        elif change == 4 and previous is not None:
            header = previous
        elif change == 5:  # a copy to itself: not linked
            header = [*header[:2], header[2].copy()]
            header[2][0] = header[1][0]
        previous = header
        batch = MessageBatch("theta", *header, {"theta": rng.normal(size=(len(header[0]), 2))})
        try:
            prepared = channel.prepare([batch], from_agents=True)
        except ValueError:
            errors.append(slot)
            continue
        plan = channel._gossip_plan
        kept_plans += plan is not None and prepared[0].recipient is plan[2].header[2]
        gossip_headers += all(len(a) == len(b) and np.array_equal(a, b) for a, b in zip(header, gossip))
        delivered.extend(channel.due(slot) + channel.transmit(slot, prepared))
        channel.close_slot()
    return {
        "delivered": delivered,
        "errors": errors,
        "ledger": channel.ledger,
        "kept": kept_plans,
        "gossip_headers": gossip_headers,
    }


@PROPERTY
@given(seed=SEEDS)
def test_gossip_headers_equal_the_reference(seed: int) -> None:
    """A batch with the slot's gossip header is routed with the channel's own header (no check) and delivered and
    tallied as the reference checks and expands it; near misses of that header are checked (and fail alike)."""
    topologies, config, _ = workload(seed, gossip=True)
    fast = play_gossip(topologies, config, seed)
    with reference_mode():
        plain = play_gossip(topologies, config, seed)
    assert fast["errors"] == plain["errors"]
    assert_same_batches(fast["delivered"], plain["delivered"])
    assert_same_ledger(fast["ledger"], plain["ledger"])
    assert plain["kept"] == 0 and fast["kept"] == fast["gossip_headers"] == plain["gossip_headers"]
