"""Tests of the ledger's bulk tallies: totals do not depend on when they are tallied, links are charged once per slot.

The ledger queues transmitted batches and closed slots and tallies them when a total is read (or when the queue is
full). These tests drive it directly with hand-built batches and through full runs, and compare against totals
worked out by hand or against a ledger that tallies after every batch.
"""

from __future__ import annotations

import numpy as np
import pytest

from agents.zhu import GossipUCB
from fedbandit_envs import SERVER, MessageBatch
from fedbandit_envs.channel.ledger import DIRECTIONS, CostModel, Ledger, lowest_entries
from fedbandit_envs.frozen import frozen
from fedbandit_envs.run import build_env


def batch(replica, sender, recipient, kind="x", width=2, count=None) -> MessageBatch:
    """A batch of float64 payload rows of ``width`` scalars."""
    n = len(sender)
    return MessageBatch(kind, replica, sender, recipient, {"v": np.zeros((n, width))}, count=count)


def fresh_ledger(cost_model: CostModel, num_replicas: int = 2, num_agents: int = 3, record: bool = False) -> Ledger:
    ledger = Ledger(cost_model, record_messages=record)
    component_of = np.zeros((num_replicas, num_agents), np.int64)  # one component holding every agent
    component_edges = np.full((num_replicas, 1), num_agents * (num_agents - 1) // 2, np.int64)
    ledger.reset(num_replicas, num_agents, component_of, component_edges)
    return ledger


@pytest.mark.parametrize("size, length", [(50, 400), (50, 3), (1 << 20, 500), (7, 1), (7, 0)])
def test_lowest_entries_equals_a_sort(size: int, length: int) -> None:
    """Both paths (scratch table for small key spaces, sort for large ones) give each key's entry of lowest rank."""
    rng = np.random.default_rng(size + length)
    keys, rank = rng.integers(0, size, length), rng.integers(0, 4, length)
    expected_values, expected_first = np.unique(keys, return_index=True)
    values, first = lowest_entries(keys, size, np.zeros(length, np.int64))  # no ranks: np.unique's first entries
    np.testing.assert_array_equal(values, expected_values)
    np.testing.assert_array_equal(first, expected_first)
    order = np.lexsort((np.arange(length), rank, keys))  # by key, then rank, then index
    expected_values, starts = np.unique(keys[order], return_index=True)
    values, lowest = lowest_entries(keys, size, rank)
    np.testing.assert_array_equal(values, expected_values)
    np.testing.assert_array_equal(lowest, order[starts])


def test_a_link_used_before_and_after_a_read_in_one_slot_is_charged_once() -> None:
    """Reading totals mid-slot tallies the copies but leaves the open slot's links for close_slot."""
    ledger = fresh_ledger(CostModel(c2=0.5))
    ledger.transmit(0, batch([0], [0], [1]))
    assert ledger.copies.tolist() == [1, 0] and ledger.links.tolist() == [0, 0]  # the slot is still open
    ledger.transmit(0, batch([0, 0], [1, 2], [0, 0]))  # 1 -> 0 uses the same two-way link as 0 -> 1
    ledger.close_slot()
    assert ledger.copies.tolist() == [3, 0]
    assert ledger.links.tolist() == [2, 0]  # links {0, 1} and {0, 2}
    assert ledger.link_cost.tolist() == [1.0, 0.0]
    assert ledger.node_cost[0].tolist() == [0.5, 0.0, 0.5, 0.0]  # a link is charged to its lowest sender
    ledger.transmit(1, batch([0], [1], [0]))
    ledger.close_slot()
    assert ledger.links.tolist() == [3, 0] and ledger.node_cost[0].tolist() == [0.5, 0.5, 0.5, 0.0]


def test_writes_to_a_sent_header_after_transmit_do_not_change_the_totals() -> None:
    """The queues hold writeable header arrays as copies: a sender reusing its buffers cannot rewrite history."""
    ledger = fresh_ledger(CostModel())
    sender, recipient = np.array([0, 1]), np.array([1, 2])
    ledger.transmit(0, batch([0, 0], sender, recipient))
    ledger.close_slot()
    sender[:], recipient[:] = SERVER, SERVER  # the caller reuses its arrays before the ledger tallies
    assert ledger.sent_messages[0].tolist() == [1, 1, 0, 0]
    assert ledger.received_messages[0].tolist() == [0, 1, 1, 0]
    assert ledger.links.tolist() == [2, 0] and ledger.direction_messages[0].tolist() == [0, 0, 2]


def test_costs_are_link_counts_times_prices() -> None:
    """Ten slots of one 0.1-priced link cost exactly 10 * 0.1 (a running float sum would give 0.9999999999999999)."""
    ledger = fresh_ledger(CostModel(c1=0.1, c2=0.1))
    for slot in range(10):
        ledger.transmit(slot, batch([1], [2], [SERVER]))
        ledger.close_slot()
    assert ledger.links.tolist() == [0, 10]
    assert ledger.link_cost[1] == ledger.cost[1] == 10 * 0.1 == 1.0
    assert ledger.node_cost[1].tolist() == [0.0, 0.0, 1.0, 0.0]


def test_totals_by_hand_for_packed_server_and_peer_copies() -> None:
    """Messages, copies, scalars, bytes, directions and kinds of three layouts in two slots, worked out by hand."""
    ledger = fresh_ledger(CostModel(c1=2.0, c2=1.0, free_server_downlink=False, price_per_message=0.25))
    ledger.transmit(0, batch([0, 0, 1], [0, 1, 2], [SERVER, SERVER, SERVER], kind="up", width=3))
    ledger.transmit(0, batch([0, 1], [SERVER, SERVER], [2, 0], kind="down", width=1))
    ledger.close_slot()
    ledger.transmit(1, batch([1, 1], [0, 1], [1, 0], kind="peer", width=2, count=[4, 1]))
    ledger.close_slot()
    assert ledger.copies.tolist() == [3, 4]
    assert ledger.messages.tolist() == [3, 7]  # the packed row counts 4 logical messages
    assert ledger.scalars.tolist() == [3 + 3 + 1, 3 + 1 + 2 + 2]
    assert ledger.bytes.tolist() == [8 * 7, 8 * 8]
    totals = ledger.totals(1)
    assert [totals[f"{d}_messages"] for d in DIRECTIONS] == [1, 1, 5]
    assert [totals[f"{d}_bytes"] for d in DIRECTIONS] == [24, 8, 32]
    assert ledger.kind_messages["peer"].tolist() == [0, 5] and ledger.kind_bytes["up"].tolist() == [48, 24]
    assert ledger.sent_messages.tolist() == [[1, 1, 0, 1], [4, 1, 1, 1]]
    assert ledger.received_messages.tolist() == [[0, 0, 1, 2], [2, 4, 0, 1]]
    # replica 0: two uplinks and the (2, server) downlink; replica 1: one uplink, one downlink (0, server), one peer
    assert ledger.links.tolist() == [3, 3]
    assert ledger.link_cost.tolist() == [6.0, 5.0]
    assert ledger.cost.tolist() == [6.0 + 0.25 * 3, 5.0 + 0.25 * 7]


def test_bulk_tallies_equal_tallies_after_every_batch() -> None:
    """A Gossip_UCB run with drops, latency and record keeping: every total is the same whenever it is tallied."""
    env_kwargs = dict(
        num_agents=5, num_arms=3, horizon=300, topology="ring", gossip="uniform_edge", drop_prob=0.1,
        latency_jitter=1, c2=0.3, price_per_byte=0.01, link_accounting="graph_edges", record_messages=True,
    )  # fmt: skip
    ledgers = []
    for tally_rows in (1, Ledger.TALLY_ROWS):  # after every batch, or in bulk
        population = GossipUCB()
        core = build_env(population, population, env_kwargs, ())[0].unwrapped.core
        core.channel.ledger.TALLY_ROWS = core.channel.ledger.TALLY_BATCHES = tally_rows
        feedback = core.reset([0, 1])
        population.reset(core.context)
        for _slot in range(core.config.horizon):
            feedback = core.play(population.act(core.current_step()))
            population.observe(feedback)
        ledgers.append(core.channel.ledger)
    every_batch, bulk = ledgers
    assert every_batch.totals(1) == bulk.totals(1) and bulk.totals(1)["dropped"] > 0
    for name in ("sent_bytes", "received_messages", "node_cost", "direction_bytes"):
        np.testing.assert_array_equal(getattr(every_batch, name), getattr(bulk, name))
    for column, values in every_batch.records().items():
        np.testing.assert_array_equal(values, bulk.records()[column])


def test_link_tallies_keyed_by_link_index_equal_the_node_pair_keys() -> None:
    """A ledger given the links keys each used link by its index among them: the same totals as by node pair."""
    rng = np.random.default_rng(5)
    num_replicas, num_agents = 3, 6
    links = np.zeros((num_replicas, num_agents + 1, num_agents + 1), bool)
    for b in range(num_replicas):
        upper = np.triu(rng.random((num_agents + 1, num_agents + 1)) < 0.5, 1)
        links[b] = upper | upper.T
    replica, low, high = np.nonzero(np.triu(links, 1))
    node = lambda ids: np.where(ids == num_agents, SERVER, ids)  # noqa: E731
    slots = []
    for _slot in range(4):
        pick, flip = rng.random(len(replica)) < 0.6, rng.random(len(replica)) < 0.5
        sender, recipient = node(np.where(flip, high, low)[pick]), node(np.where(flip, low, high)[pick])
        slots.append(batch(replica[pick], sender, recipient))
    totals = []
    for link_accounting in ("used_links", "graph_edges"):
        for given, limit in ((None, Ledger.LINK_INDEX_ENTRIES), (links, Ledger.LINK_INDEX_ENTRIES), (links, 0)):
            ledger = Ledger(CostModel(c1=0.5, c2=1.5, link_accounting=link_accounting, free_server_downlink=False))
            ledger.LINK_INDEX_ENTRIES = limit  # 0: too large a table, keyed by node pair after all
            component_of = np.zeros((num_replicas, num_agents), np.int64)
            component_edges = links[:, :num_agents, :num_agents].sum(axis=(1, 2))[:, None] // 2
            ledger.reset(num_replicas, num_agents, component_of, component_edges, given)
            for sent in slots:
                ledger.transmit(0, sent)
                ledger.close_slot()
            totals.append((ledger.links.tolist(), ledger.node_cost.tolist()))
    assert totals[0] == totals[1] == totals[2] and totals[3] == totals[4] == totals[5]
    assert totals[0] != totals[3]  # the accounting matters, so both key spaces were exercised


def test_a_copy_off_the_links_given_at_reset_is_refused() -> None:
    """Copies must follow the links a ledger was given (the channel's always do)."""
    ledger = Ledger(CostModel())
    links = np.zeros((1, 4, 4), bool)
    links[0, 0, 1] = links[0, 1, 0] = True
    ledger.reset(1, 3, np.zeros((1, 3), np.int64), np.ones((1, 1), np.int64), links)
    ledger.transmit(0, batch([0], [0], [2]))
    ledger.close_slot()
    with pytest.raises(RuntimeError, match="not given at reset"):
        ledger.totals(0)


def test_a_header_sent_again_with_other_packed_counts_sums_them() -> None:
    """The same read-only header arrays sent in several slots with different ``count`` arrays: one tally, exact sums."""
    header = [np.array(ids, np.int64) for ids in ([0, 0, 1], [0, 1, 2], [1, 2, 0])]
    for array in header:
        array.setflags(write=False)
    counts = [None, [1, 3, 2], [4, 1, 1], None]
    ledgers = []
    for tally_batches in (1, Ledger.TALLY_BATCHES):
        ledger = fresh_ledger(CostModel(price_per_message=0.25))
        ledger.TALLY_BATCHES = tally_batches
        for slot, count in enumerate(counts):
            sent = batch(*header, count=count)
            ledger.transmit(slot, MessageBatch._trusted("x", *header, sent.payload, sent.count, sent.slot, None))
            ledger.close_slot()
        ledgers.append(ledger)
    each, bulk = ledgers
    assert bulk.messages.tolist() == [(1 + 1) + (1 + 3) + (4 + 1) + (1 + 1), 1 + 2 + 1 + 1]
    assert bulk.copies.tolist() == [8, 4]
    for name in ("sent_messages", "received_messages", "direction_messages", "node_cost", "cost"):
        np.testing.assert_array_equal(getattr(each, name), getattr(bulk, name))


def test_prices_are_read_from_the_integer_tallies_whatever_the_batching() -> None:
    """Non-integer prices: the same copies batched and ordered two ways cost the same float, the exact formula's."""
    model = CostModel(c1=2.0, c2=3.0, price_per_message=0.25, price_per_byte=0.01)
    rng = np.random.default_rng(3)
    sent = [
        batch([0] * n, rng.integers(0, 3, n), [SERVER] * n, width=int(rng.integers(1, 6)), count=rng.integers(1, 5, n))
        for n in rng.integers(1, 6, 60)
    ]
    ledgers = []
    for order in (sent, sent[::-1]):
        ledger = fresh_ledger(model)
        for slot, item in enumerate(order):
            ledger.transmit(slot, item)
            ledger.close_slot()
        ledgers.append(ledger)
    forward, backward = ledgers
    exact = forward.link_cost + 0.25 * forward.messages + 0.01 * forward.bytes
    assert forward.cost.tolist() == backward.cost.tolist() == exact.tolist()
    links = np.array([[sum(i in item.sender for item in sent) for i in range(3)] + [0], [0] * 4])  # one slot each
    node_exact = 2.0 * links + 0.25 * forward.sent_messages + 0.01 * forward.sent_bytes
    assert forward.node_cost.tolist() == backward.node_cost.tolist() == node_exact.tolist()


@pytest.mark.parametrize("record", [False, True])
def test_a_shared_link_is_charged_to_its_lowest_sender_whatever_the_order(record: bool) -> None:
    """Both ends send on a link in a slot: the lower node pays, whichever batch or row came first.

    A kept first batch repeated over slots (priced once, weighted) hands a link's charge over to a later batch that
    used it from a lower node, in that slot only.
    """
    model = CostModel(c1=2.0, c2=3.0, link_accounting="used_links", free_server_downlink=False)
    kept = [frozen(np.array(ids, np.int64)) for ids in ([0, 0], [2, SERVER], [1, 1])]  # 2 -> 1, SERVER -> 1
    slots = [
        [batch(*kept), batch([0], [1], [2])],  # 1 -> 2 as well: agent 1 pays link {1, 2} (the server {1, SERVER})
        [batch(*kept)],  # agent 2 pays {1, 2}, the server {1, SERVER}
        [batch(*kept), batch([0, 0], [0, 1], [1, SERVER])],  # agent 2 pays {1, 2}, agent 1 {1, SERVER}, agent 0 {0, 1}
    ]
    costs = []
    for order in (1, -1):
        ledger = fresh_ledger(model, num_replicas=1, record=record)
        for slot, sent in enumerate(slots):
            for item in sent[::order]:
                ledger.transmit(slot, item)
            ledger.close_slot()
        costs.append((ledger.links.tolist(), ledger.node_cost.tolist()))
    assert costs[0] == costs[1] == ([7], [[3.0, 3.0 + 2.0, 3.0 + 3.0, 2.0 + 2.0]])
