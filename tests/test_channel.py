"""Tests of the costed channel and its ledger, driven through the public FederatedMAB API.

Every expected total is worked out by hand from the cost model (Li & Song D10, Zhu et al. §2.6):
agent-server links cost ``c1`` once per link and slot, agent-agent links cost ``c2`` once per used
edge and slot (``used_links``) or once per edge of every communicating component (``graph_edges``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import numpy as np
import pytest

from fedbandit_envs import NEIGHBOURS, SERVER, FederatedMAB, Message, MessageBatch
from fedbandit_envs import topology as topo
from fedbandit_envs.channel import ChannelConfig, CostModel
from fedbandit_envs.channel import channel as channel_module
from fedbandit_envs.channel.channel import GOSSIP_BLOCK, Channel
from fedbandit_envs.channel.messages import canonical_order
from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.protocol import Action, Population
from fedbandit_envs.run import run

# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------


class BroadcastCoordinator:
    """Replies to every slot with exactly one broadcast (SERVER -> NEIGHBOURS) and logs what it received."""

    def reset(self, context, rngs) -> None:
        self.received: list[tuple[int, list[tuple[int, int, str]]]] = []

    def step(self, slot, inbox):
        rows = [(int(s), int(t), b.kind) for b in inbox for s, t in zip(b.sender, b.slot)]
        self.received.append((slot, rows))
        return [
            MessageBatch(
                kind="reply",
                replica=[0],
                sender=[SERVER],
                recipient=[NEIGHBOURS],
                payload={"v": np.zeros((1, 2))},
            )
        ]


class SilentCoordinator:
    """Accepts uploads and never replies."""

    def reset(self, context, rngs) -> None:
        self.received: list[tuple[int, list[tuple[int, int]]]] = []

    def step(self, slot, inbox):
        self.received.append((slot, [(int(s), int(t)) for b in inbox for s, t in zip(b.sender, b.slot)]))
        return []


def up(i: int, kind: str = "up") -> Message:
    return Message(sender=i, recipient=SERVER, kind=kind, payload={"x": 1.0})


def msg(i: int, j: int, kind: str = "x", size: int = 3) -> Message:
    return Message(sender=i, recipient=j, kind=kind, payload={"v": np.zeros(size)})


def act(env: FederatedMAB, messages: dict[int, list[Message]] | None = None, arm: int = 0) -> dict:
    """Arm ``arm`` for every live agent, plus the given messages per agent index."""
    messages = messages or {}
    return {a: {"arm": arm, "messages": messages.get(i, [])} for i, a in enumerate(env.agents)}


def delivered(observations: dict) -> list[Message]:
    return [m for o in observations.values() for m in o["inbox"]]


# ---------------------------------------------------------------------------------------------------------
# Server (master-worker) links
# ---------------------------------------------------------------------------------------------------------


def test_server_uploads_cost_c1_per_agent_and_slot() -> None:
    m, s, c1 = 4, 6, 2.5
    env = FederatedMAB(num_agents=m, num_arms=3, horizon=s, topology="server", c1=c1, coordinator=SilentCoordinator())
    env.reset(seed=0)
    for _ in range(s):
        env.step(act(env, {i: [up(i)] for i in range(m)}))
    totals = env.ledger.totals()
    assert totals["link_cost"] == c1 * m * s == 60.0
    assert totals["cost"] == 60.0
    assert totals["messages"] == totals["copies"] == m * s == 24
    assert totals["up_messages"] == 24
    assert totals["down_messages"] == 0
    assert totals["peer_messages"] == 0
    assert totals["links"] == 24
    assert totals["scalars"] == 24
    assert totals["bytes"] == 24 * 8
    np.testing.assert_array_equal(env.ledger.sent_messages[0], [6, 6, 6, 6, 0])
    np.testing.assert_array_equal(env.ledger.received_messages[0], [0, 0, 0, 0, 24])
    np.testing.assert_array_equal(env.ledger.node_cost[0], [15.0, 15.0, 15.0, 15.0, 0.0])


def test_two_uploads_by_one_agent_in_one_slot_open_one_link() -> None:
    env = FederatedMAB(num_agents=2, num_arms=3, horizon=1, topology="server", c1=3.0, coordinator=SilentCoordinator())
    env.reset(seed=0)
    env.step(act(env, {0: [up(0, "a"), up(0, "b"), up(0, "a")]}))
    totals = env.ledger.totals()
    assert totals["messages"] == 3
    assert totals["link_cost"] == 3.0
    assert totals["links"] == 1


def broadcast_star(
    m: int, arms: int, slots: int, c1: float, free: bool, coordinator: Any = None, **channel: Any
) -> FederatedMAB:
    """A server star of ``m`` agents whose coordinator (default: a fresh one) replies to every agent each slot.

    ``free``: the server's downlink is free on links the slot's uploads opened; ``channel``: more keywords.
    """
    coordinator = BroadcastCoordinator() if coordinator is None else coordinator
    return FederatedMAB(
        m, arms, slots, topology="server", c1=c1, free_server_downlink=free, coordinator=coordinator, **channel
    )


@pytest.mark.parametrize("free", [True, False])
def test_broadcast_reply_to_uploaders_adds_no_cost(free: bool) -> None:
    m, s, c1 = 4, 5, 2.5
    coordinator = BroadcastCoordinator()
    env = broadcast_star(m, 3, s, c1, free, coordinator)
    env.reset(seed=0)
    for t in range(s):
        obs, *_ = env.step(act(env, {i: [up(i)] for i in range(m)}))
        for i, a in enumerate(env.possible_agents):
            assert [(x.sender, x.recipient, x.kind, x.slot) for x in obs[a]["inbox"]] == [(SERVER, i, "reply", t)]
    totals = env.ledger.totals()
    assert totals["up_messages"] == m * s == 20
    assert totals["down_messages"] == m * s == 20
    assert totals["messages"] == 40
    # the same two-way link is used once per slot whichever way the reply goes
    assert totals["link_cost"] == c1 * m * s == 50.0
    assert totals["links"] == 20
    assert totals["down_bytes"] == 20 * 16
    # the coordinator saw every upload in the slot it was sent
    assert coordinator.received == [(t, [(i, t, "up") for i in range(m)]) for t in range(s)]


@pytest.mark.parametrize(("free", "expected_cost"), [(True, 2.5 * 3 * 5), (False, 2.5 * 4 * 5)])
def test_reply_to_an_agent_that_did_not_upload(free: bool, expected_cost: float) -> None:
    m, s, c1 = 4, 5, 2.5
    env = broadcast_star(m, 3, s, c1, free)
    env.reset(seed=0)
    for _ in range(s):
        # agent 0 stays silent but still receives the broadcast
        obs, _, _, _, infos = env.step(act(env, {i: [up(i)] for i in range(1, m)}))
        assert len(obs["agent_0"]["inbox"]) == 1
    totals = env.ledger.totals()
    assert totals["up_messages"] == 15
    assert totals["down_messages"] == 20
    assert totals["link_cost"] == expected_cost
    assert totals["cost"] == expected_cost
    assert totals["links"] == (15 if free else 20)
    assert infos["agent_0"]["cost"] == 0.0
    assert infos["agent_1"]["cost"] == 12.5
    # the extra link opened by the server's reply is charged to the server node (index M)
    assert env.ledger.node_cost[0, m] == (0.0 if free else 12.5)


# ---------------------------------------------------------------------------------------------------------
# Agent-agent links: used_links vs graph_edges
# ---------------------------------------------------------------------------------------------------------

GRAPHS = [("complete", 10), ("ring", 5)]


@pytest.mark.parametrize("mode", ["used_links", "graph_edges"])
@pytest.mark.parametrize(("kind", "num_edges"), GRAPHS)
def test_everyone_broadcasts_once(kind: str, num_edges: int, mode: str) -> None:
    env = FederatedMAB(num_agents=5, num_arms=3, horizon=3, topology=kind, c2=0.75, link_accounting=mode)
    env.reset(seed=0)
    obs, *_ = env.step(act(env, {i: [Message(i, NEIGHBOURS, "b", {"v": np.zeros(2)})] for i in range(5)}))
    totals = env.ledger.totals()
    assert totals["copies"] == totals["messages"] == 2 * num_edges
    assert totals["peer_messages"] == 2 * num_edges
    assert totals["link_cost"] == 0.75 * num_edges
    assert totals["links"] == num_edges
    # every agent hears each neighbour exactly once
    degree = 4 if kind == "complete" else 2
    for i, a in enumerate(env.possible_agents):
        senders = sorted(x.sender for x in obs[a]["inbox"])
        expected = [j for j in range(5) if j != i] if kind == "complete" else sorted([(i - 1) % 5, (i + 1) % 5])
        assert senders == expected
        assert len(senders) == degree
        assert all(x.recipient == i for x in obs[a]["inbox"])
    # a second slot costs the same again
    env.step(act(env, {i: [Message(i, NEIGHBOURS, "b", {"v": np.zeros(2)})] for i in range(5)}))
    assert env.ledger.totals()["link_cost"] == 1.5 * num_edges


@pytest.mark.parametrize("mode", ["used_links", "graph_edges"])
@pytest.mark.parametrize(("kind", "num_edges"), GRAPHS)
def test_a_single_message(kind: str, num_edges: int, mode: str) -> None:
    env = FederatedMAB(num_agents=5, num_arms=3, horizon=3, topology=kind, c2=2.0, link_accounting=mode)
    env.reset(seed=0)
    env.step(act(env, {1: [msg(1, 2)]}))
    totals = env.ledger.totals()
    assert totals["copies"] == 1
    links = 1 if mode == "used_links" else num_edges  # graph_edges charges the whole component
    expected = 2.0 * links
    assert totals["link_cost"] == expected
    assert totals["links"] == links
    # a silent slot costs nothing
    env.step(act(env))
    assert env.ledger.totals()["link_cost"] == expected


@pytest.mark.parametrize("mode", ["used_links", "graph_edges"])
@pytest.mark.parametrize(("kind", "num_edges"), GRAPHS)
def test_both_directions_of_one_edge_charge_once(kind: str, num_edges: int, mode: str) -> None:
    env = FederatedMAB(num_agents=5, num_arms=3, horizon=3, topology=kind, c2=2.0, link_accounting=mode)
    env.reset(seed=0)
    env.step(act(env, {3: [msg(3, 4), msg(3, 4, "y")], 4: [msg(4, 3)]}))
    totals = env.ledger.totals()
    assert totals["copies"] == 3
    assert totals["link_cost"] == (2.0 if mode == "used_links" else 2.0 * num_edges)


@pytest.mark.parametrize(
    ("messages", "used", "graph"),
    [
        ({1: [msg(1, 2)]}, 1, 3),  # inside component 0 (K3, 3 edges)
        ({4: [msg(4, 5)]}, 1, 4),  # inside component 1 (C4, 4 edges)
        ({1: [msg(1, 2)], 4: [msg(4, 5)], 5: [msg(5, 6)]}, 3, 7),  # both components
    ],
)
def test_hybrid_graph_edges_charges_only_the_communicating_component(messages, used: int, graph: int) -> None:
    hybrid = topo.hybrid([topo.complete(3), topo.ring(4)])
    for mode, expected in (("used_links", used), ("graph_edges", graph)):
        env = FederatedMAB(num_agents=7, num_arms=3, horizon=2, topology=hybrid, c1=100.0, c2=0.5, link_accounting=mode)
        env.reset(seed=0)
        env.step(act(env, messages))
        totals = env.ledger.totals()
        assert totals["link_cost"] == 0.5 * expected
        assert totals["links"] == expected


def test_hybrid_sink_upload_costs_c1_and_no_edges() -> None:
    hybrid = topo.hybrid([topo.complete(3), topo.ring(4)])
    np.testing.assert_array_equal(hybrid.sinks, [0, 3])
    env = FederatedMAB(
        num_agents=7,
        num_arms=3,
        horizon=2,
        topology=hybrid,
        c1=100.0,
        c2=0.5,
        link_accounting="graph_edges",
        coordinator=SilentCoordinator(),
    )
    env.reset(seed=0)
    env.step(act(env, {0: [up(0)], 3: [up(3)]}))
    assert env.ledger.totals()["link_cost"] == 200.0
    # a non-sink agent has no server link
    with pytest.raises(ValueError, match="not linked"):
        env.step(act(env, {1: [up(1)]}))


# ---------------------------------------------------------------------------------------------------------
# Prices per message and per byte, payload sizes, logical counts
# ---------------------------------------------------------------------------------------------------------


def priced_ring(num_agents: int, c2: float, per_message: float, per_byte: float) -> FederatedMAB:
    """A reset ring (3 arms, 2 slots) with the given link, per-message and per-byte prices."""
    env = FederatedMAB(num_agents, 3, 2, topology="ring", c2=c2, price_per_message=per_message, price_per_byte=per_byte)
    env.reset(seed=0)
    return env


def test_prices_sizes_and_logical_counts() -> None:
    env = priced_ring(3, c2=1.5, per_message=2.0, per_byte=0.25)
    payload = {
        "a": np.zeros(4),  # float64: 4 scalars, 32 B
        "b": np.arange(2, dtype=np.int64),  # int64: 2 scalars, 16 B
        "c": 2.5,  # a scalar float: 1 scalar, 8 B
        "d": np.zeros(3, np.int32),  # int32: 3 scalars, 12 B
        "e": np.array([True, False]),  # bool: 2 scalars, 2 B
    }
    m = Message(sender=0, recipient=1, kind="packed", payload=payload, count=3)
    *_, infos = env.step(act(env, {0: [m]}))
    totals = env.ledger.totals()
    assert totals["copies"] == 1
    assert totals["messages"] == 3
    assert totals["scalars"] == 12
    assert totals["bytes"] == 70
    assert totals["link_cost"] == 1.5
    # 1.5 (link) + 2.0 * 3 (logical messages) + 0.25 * 70 (bytes)
    assert totals["cost"] == 25.0
    assert env.ledger.kind_messages["packed"][0] == 3
    assert env.ledger.kind_bytes["packed"][0] == 70
    assert infos["agent_0"]["messages_sent"] == 3
    assert infos["agent_0"]["bytes_sent"] == 70
    assert infos["agent_0"]["cost"] == 25.0
    assert infos["agent_1"]["cost"] == 0.0
    np.testing.assert_array_equal(env.ledger.received_messages[0], [0, 3, 0, 0])
    np.testing.assert_array_equal(env.ledger.received_bytes[0], [0, 70, 0, 0])


def test_prices_apply_per_copy_of_a_broadcast() -> None:
    env = priced_ring(4, c2=1.0, per_message=0.5, per_byte=0.125)
    env.step(act(env, {2: [Message(2, NEIGHBOURS, "b", {"v": np.zeros(2)}, count=2)]}))
    totals = env.ledger.totals()
    # two copies (to agents 1 and 3), each 2 logical messages and 16 B
    assert totals["copies"] == 2
    assert totals["messages"] == 4
    assert totals["bytes"] == 32
    assert totals["link_cost"] == 2.0
    assert totals["cost"] == 2.0 + 0.5 * 4 + 0.125 * 32 == 8.0


def test_scalar_payloads_are_counted_exactly() -> None:
    env = FederatedMAB(num_agents=3, num_arms=3, horizon=1, topology="complete")
    env.reset(seed=0)
    env.step(act(env, {0: [Message(0, 1, "s", {"x": 1.0, "y": 7})]}))
    totals = env.ledger.totals()
    assert totals["scalars"] == 2
    assert totals["bytes"] == 16


def test_message_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="count"):
        Message(sender=0, recipient=1, kind="x", count=0)


# ---------------------------------------------------------------------------------------------------------
# Zhu et al. §2.6: counts to every neighbour, theta over the gossip edge
# ---------------------------------------------------------------------------------------------------------


def test_zhu_message_totals_per_round() -> None:
    n, k, slots, num_edges = 5, 4, 40, 5
    env = FederatedMAB(num_agents=n, num_arms=k, horizon=slots, topology="ring", gossip="uniform_edge", c2=1.0)
    obs, _ = env.reset(seed=11)
    ledger = env.ledger
    previous = {"counts": 0, "theta": 0, "scalars": 0, "bytes": 0, "cost": 0.0}
    for _ in range(slots):
        messages: dict[int, list[Message]] = {}
        for i, a in enumerate(env.agents):
            out = [Message(i, NEIGHBOURS, "counts", {"n": np.zeros(k, np.int64)})]
            if obs[a]["partner"] >= 0:
                out.append(Message(i, obs[a]["partner"], "theta", {"theta": np.zeros(k)}))
            messages[i] = out
        obs, *_ = env.step(act(env, messages))
        totals = ledger.totals()
        current = {
            "counts": int(ledger.kind_messages["counts"][0]),
            "theta": int(ledger.kind_messages["theta"][0]),
            "scalars": totals["scalars"],
            "bytes": totals["bytes"],
            "cost": totals["link_cost"],
        }
        assert current["counts"] - previous["counts"] == 2 * num_edges
        assert current["theta"] - previous["theta"] == 2
        assert current["scalars"] - previous["scalars"] == 2 * k + 2 * num_edges * k
        assert current["bytes"] - previous["bytes"] == 8 * (2 * k + 2 * num_edges * k)
        # every edge carries counts, so the theta edge costs nothing extra
        assert current["cost"] - previous["cost"] == num_edges * 1.0
        previous = current
    assert int(ledger.kind_messages["counts"][0]) == 2 * num_edges * slots
    assert int(ledger.kind_messages["theta"][0]) == 2 * slots
    assert int(ledger.kind_bytes["counts"][0]) == 2 * num_edges * k * slots * 8
    assert int(ledger.kind_bytes["theta"][0]) == 2 * k * slots * 8


# ---------------------------------------------------------------------------------------------------------
# Gossip edge activation
# ---------------------------------------------------------------------------------------------------------


def gossip_pairs(env: FederatedMAB, seed: int, slots: int) -> list[tuple[int, int]]:
    """Run ``slots`` silent slots and return the announced pair of every slot (checking its shape)."""
    obs, _ = env.reset(seed=seed)
    pairs = []
    for t in range(slots):
        partners = [obs[a]["partner"] for a in env.possible_agents]
        active = [i for i, p in enumerate(partners) if p >= 0]
        assert len(active) == 2, (t, partners)
        i, j = active
        assert partners[i] == j and partners[j] == i
        assert all(p == -1 for q, p in enumerate(partners) if q not in (i, j))
        assert env.topology.adjacency[i, j]
        pairs.append((i, j))
        obs, *_ = env.step(act(env))
    # no partner is announced after the last slot
    assert all(obs[a]["partner"] == -1 for a in env.possible_agents)
    return pairs


def test_uniform_edge_gossip_partners() -> None:
    slots = 600
    env = FederatedMAB(num_agents=6, num_arms=2, horizon=slots, topology="ring", gossip="uniform_edge")
    pairs = gossip_pairs(env, seed=5, slots=slots)
    counts = Counter(pairs)
    assert set(counts) == {(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (0, 5)}
    sd = math.sqrt(slots * (1 / 6) * (5 / 6))
    for c in counts.values():
        assert abs(c - slots / 6) < 4 * sd
    # deterministic for a seed, different for another
    assert gossip_pairs(env, seed=5, slots=slots) == pairs
    assert gossip_pairs(env, seed=6, slots=slots) != pairs


@pytest.mark.parametrize(("activation", "p_middle"), [("uniform_edge", 1 / 3), ("node_then_neighbour", 1 / 4)])
def test_gossip_edge_distribution_on_a_path(activation: str, p_middle: float) -> None:
    # path 0-1-2-3: node-then-neighbour picks (1, 2) w.p. 1/4 * 1/2 + 1/4 * 1/2 = 1/4; uniform edge: 1/3
    slots = 2000
    env = FederatedMAB(num_agents=4, num_arms=2, horizon=slots, topology="path", gossip=activation)
    counts = Counter(gossip_pairs(env, seed=1, slots=slots))
    assert set(counts) == {(0, 1), (1, 2), (2, 3)}
    sd = math.sqrt(slots * p_middle * (1 - p_middle))
    assert abs(counts[(1, 2)] - slots * p_middle) < 4 * sd


def test_no_gossip_means_no_partner() -> None:
    env = FederatedMAB(num_agents=4, num_arms=2, horizon=3, topology="ring")
    obs, _ = env.reset(seed=0)
    for _ in range(3):
        assert all(o["partner"] == -1 for o in obs.values())
        obs, *_ = env.step(act(env))


# ---------------------------------------------------------------------------------------------------------
# Latency
# ---------------------------------------------------------------------------------------------------------


def test_latency_delays_delivery_by_whole_slots() -> None:
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=6, topology="ring", latency=2)
    env.reset(seed=0)
    inboxes = []
    for t in range(6):
        obs, *_ = env.step(act(env, {0: [msg(0, 1, f"m{t}")]} if t < 2 else {}))
        inboxes.append([(x.sender, x.kind, x.slot) for x in obs["agent_1"]["inbox"]])
    assert inboxes == [[], [], [(0, "m0", 0)], [(0, "m1", 1)], [], []]


def test_zero_latency_delivers_in_the_same_step() -> None:
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=2, topology="ring")
    env.reset(seed=0)
    obs, *_ = env.step(act(env, {2: [msg(2, 0, "now")]}))
    assert [(x.sender, x.recipient, x.kind, x.slot) for x in obs["agent_0"]["inbox"]] == [(2, 0, "now", 0)]


def test_per_link_latency_matrix() -> None:
    m = 3
    latency = np.zeros((m + 1, m + 1), np.int64)
    latency[0, 1] = 1
    latency[1, 0] = 3
    latency[2, m] = 2  # agent 2 -> server
    latency[m, 0] = 1  # server -> agent 0
    coordinator = BroadcastCoordinator()
    env = FederatedMAB(
        num_agents=m,
        num_arms=2,
        horizon=6,
        topology=topo.from_adjacency(np.ones((m, m)) - np.eye(m), server_links=np.ones(m)),
        latency=latency,
        coordinator=coordinator,
    )
    env.reset(seed=0)
    log = []
    for t in range(6):
        sent = {0: [msg(0, 1, "a")], 1: [msg(1, 0, "b")], 2: [up(2)]} if t == 0 else {}
        obs, *_ = env.step(act(env, sent))
        log.append({a: [(x.sender, x.kind, x.slot) for x in o["inbox"]] for a, o in obs.items()})
    # agent 1 gets "a" one slot late, agent 0 gets "b" three slots late
    assert [x for x in log[1]["agent_1"] if x[1] == "a"] == [(0, "a", 0)]
    assert [x for x in log[3]["agent_0"] if x[1] == "b"] == [(1, "b", 0)]
    for t in range(6):
        assert [x for x in log[t]["agent_1"] if x[1] == "a"] == ([(0, "a", 0)] if t == 1 else [])
        assert [x for x in log[t]["agent_0"] if x[1] == "b"] == ([(1, "b", 0)] if t == 3 else [])
    # the upload reaches the server in slot 2
    assert [(slot, rows) for slot, rows in coordinator.received if rows] == [(2, [(2, 0, "up")])]
    # server replies reach agents 1 and 2 at once, agent 0 one slot later
    for t in range(6):
        assert [x for x in log[t]["agent_1"] if x[1] == "reply"] == [(SERVER, "reply", t)]
        assert [x for x in log[t]["agent_0"] if x[1] == "reply"] == ([(SERVER, "reply", t - 1)] if t >= 1 else [])


def test_latency_matrix_of_wrong_shape_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"latency matrix must have shape \(M\+1, M\+1\) = \(4, 4\), got \(3, 3\)"):
        FederatedMAB(num_agents=3, num_arms=2, horizon=2, topology="ring", latency=np.zeros((3, 3), np.int64))


def test_negative_latency_is_rejected() -> None:
    with pytest.raises(ValueError, match="latency"):
        FederatedMAB(num_agents=3, topology="ring", latency=-1)
    with pytest.raises(ValueError, match="latency_jitter"):
        FederatedMAB(num_agents=3, topology="ring", latency_jitter=-1)


def test_latency_jitter_stays_within_bounds() -> None:
    slots = 80
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=slots, topology="ring", latency=1, latency_jitter=2)
    env.reset(seed=4)
    delays = []
    for t in range(slots):
        obs, *_ = env.step(act(env, {0: [msg(0, 1)]} if t < slots - 3 else {}))
        delays += [t - x.slot for x in obs["agent_1"]["inbox"]]
    assert len(delays) == slots - 3
    assert set(delays) == {1, 2, 3}


def test_messages_in_flight_at_the_horizon_are_discarded() -> None:
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=3, topology="ring", latency=2)
    for seed in (0, 1):
        env.reset(seed=seed)
        received = []
        for t in range(3):
            obs, _, _, truncations, _ = env.step(act(env, {0: [msg(0, 1, f"m{t}")], 2: [msg(2, 1, f"n{t}")]}))
            received.append(sorted((x.sender, x.kind, x.slot) for x in delivered(obs)))
        # only the copies of slot 0 arrive (in slot 2); those of slots 1 and 2 are dropped silently
        assert received == [[], [], [(0, "m0", 0), (2, "n0", 0)]]
        assert all(truncations.values())
        totals = env.ledger.totals()
        assert totals["copies"] == 6
        assert totals["dropped"] == 0
        assert totals["link_cost"] == 2.0 * 3


# ---------------------------------------------------------------------------------------------------------
# Drops
# ---------------------------------------------------------------------------------------------------------


def run_broadcasts(drop_prob: float, seed: int, slots: int = 200) -> tuple[FederatedMAB, list, list]:
    env = FederatedMAB(num_agents=5, num_arms=3, horizon=slots, topology="ring", drop_prob=drop_prob, c2=1.0)
    env.reset(seed=seed)
    rewards, received = [], []
    for t in range(slots):
        arm = (t * 7) % 3
        obs, rew, *_ = env.step(act(env, {i: [Message(i, NEIGHBOURS, "b", {"t": t})] for i in range(5)}, arm=arm))
        rewards.append([rew[a] for a in env.possible_agents])
        received.append(sorted((x.sender, x.recipient, x.slot) for x in delivered(obs)))
    return env, rewards, received


def test_drops_rate_accounting_and_determinism() -> None:
    slots = 200
    env, rewards, received = run_broadcasts(0.3, seed=21, slots=slots)
    copies = 10 * slots
    got = sum(len(r) for r in received)
    totals = env.ledger.totals()
    assert totals["copies"] == copies
    assert totals["dropped"] == copies - got
    sd = math.sqrt(copies * 0.3 * 0.7)
    assert abs(got - 0.7 * copies) < 4 * sd
    assert 0 < totals["dropped"] < copies
    # dropped copies have used their links: every edge is charged in every slot
    assert totals["link_cost"] == 5.0 * slots
    # same seed, same drops
    env2, rewards2, received2 = run_broadcasts(0.3, seed=21, slots=slots)
    assert received2 == received
    assert env2.ledger.totals() == totals
    # another seed, other drops
    _, _, received3 = run_broadcasts(0.3, seed=22, slots=slots)
    assert received3 != received
    # drops never perturb the reward draws
    _, rewards0, received0 = run_broadcasts(0.0, seed=21, slots=slots)
    assert rewards0 == rewards
    assert sum(len(r) for r in received0) == copies


def test_a_dropped_lone_message_still_costs_its_link() -> None:
    slots = 300
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=slots, topology="ring", drop_prob=0.5, c2=0.5)
    env.reset(seed=8)
    got = 0
    for _ in range(slots):
        obs, *_ = env.step(act(env, {0: [msg(0, 1)]}))
        got += len(obs["agent_1"]["inbox"])
    totals = env.ledger.totals()
    assert totals["dropped"] == slots - got
    assert totals["dropped"] > 0
    assert totals["link_cost"] == 0.5 * slots


def test_drop_prob_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="drop_prob"):
        FederatedMAB(num_agents=3, topology="ring", drop_prob=1.0)
    with pytest.raises(ValueError, match="drop_prob"):
        FederatedMAB(num_agents=3, topology="ring", drop_prob=-0.1)


def slot_batches(slot: int, shuffled: bool) -> list[MessageBatch]:
    """Every agent of two replicas sends a ``"pull"`` to NEIGHBOURS and an ``"ack"`` to agent ``s + 1``.

    Sorted: one batch per kind, rows by (replica, sender). Shuffled: the same rows in a random order, split into
    two batches per kind, the kinds interleaved (as another population, or the PettingZoo regrouping, may list them).
    """
    replica, sender = np.repeat([0, 1], 5), np.tile(np.arange(5), 2)
    rows = {
        "pull": (np.full(10, NEIGHBOURS), 1000 * slot + np.arange(10)),
        "ack": ((sender + 1) % 5, 1000 * slot + 100 + np.arange(10)),
    }
    if not shuffled:
        return [MessageBatch(kind, replica, sender, to, {"id": ids}) for kind, (to, ids) in rows.items()]
    order = np.random.default_rng(slot).permutation(10)
    halves = [order[:4], order[4:]]
    return [
        MessageBatch(kind, replica[part], sender[part], rows[kind][0][part], {"id": rows[kind][1][part]})
        for part in halves
        for kind in ("ack", "pull")
    ]


def channel_outcome(shuffled: bool, slots: int = 12) -> tuple[list, list]:
    """Per slot, the copies delivered (replica, sender, recipient, kind, id); and the copies dropped per replica."""
    channel = Channel(ChannelConfig(drop_prob=0.3, latency_jitter=2))
    channel.reset([topo.ring(5), topo.complete(5)], [np.random.default_rng(b) for b in (7, 8)])
    delivered = []
    for slot in range(slots + 2):  # two more slots deliver the last jittered copies
        sent = channel.prepare(slot_batches(slot, shuffled)) if slot < slots else []
        arrived = channel.due(slot) + channel.transmit(slot, sent)
        copies = [
            (r, s, t, batch.kind, i)
            for batch in arrived
            for r, s, t, i in zip(batch.replica, batch.sender, batch.recipient, batch.payload["id"])
        ]
        delivered.append(sorted(copies))
        channel.close_slot()
    return delivered, channel.ledger.dropped.tolist()


@pytest.mark.parametrize("wide_ids", [False, True])
def test_canonical_order_is_the_lexicographic_order_of_the_five_keys(wide_ids: bool) -> None:
    """Equal to ``np.lexsort`` (stable) whether the rows fit one int64 key or not, sorted already or not."""
    rng = np.random.default_rng(4)
    batches = []
    for kind in ("b", "a", "b", "c"):
        n = int(rng.integers(1, 30))
        count = rng.integers(1, 3, n)
        sender, recipient = rng.integers(-1, 4, n), rng.integers(-1, 4, n)
        if wide_ids:  # (ids no single int64 key can hold with the other keys: the lexsort fallback)
            sender, recipient = sender * 2**60, recipient * 2**60
        batches.append(MessageBatch(kind, rng.integers(0, 3, n), sender, recipient, {"v": np.zeros(n)}, count=count))
    kinds = np.concatenate([np.full(len(b), "abc".index(b.kind)) for b in batches])
    columns = [np.concatenate([getattr(b, name) for b in batches]) for name in ("replica", "sender", "recipient")]
    count = np.concatenate([b.count for b in batches])
    expected = np.lexsort((count, kinds, columns[2], columns[1], columns[0]))
    replica, order = canonical_order(batches)
    np.testing.assert_array_equal(replica, columns[0])
    np.testing.assert_array_equal(order, expected)
    in_order = [
        batches[0].take(np.lexsort((batches[0].count, batches[0].recipient, batches[0].sender, batches[0].replica)))
    ]
    np.testing.assert_array_equal(canonical_order(in_order)[1], np.arange(len(in_order[0])))


def test_drops_and_jitter_do_not_depend_on_how_a_slot_is_batched() -> None:
    sorted_rows, shuffled_rows = channel_outcome(False), channel_outcome(True)
    assert 0 < sum(shuffled_rows[1]) < 12 * 40  # some of the 40 copies of each of the 12 slots are lost, not all
    assert len({len(copies) for copies in shuffled_rows[0]}) > 1  # jitter and drops vary the arrivals
    assert shuffled_rows == sorted_rows


class DescendingSharing(Population):
    """Greedy agents that share every pull with their neighbours, listing the senders in descending order.

    Each agent ``s`` sends a ``"pull"`` (arm, reward) to NEIGHBOURS and a ``"tally"`` of its pulls to agent ``s + 1``
    (read by nobody: a second kind, with explicit recipients), and adds the pulls it hears to its own sums: what the
    channel loses or delays steers the next choices.
    """

    def reset(self, context: Any) -> None:
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self.counts, self.sums = np.zeros((b, m, k)), np.zeros((b, m, k))
        self.pending: list[MessageBatch] = []

    def act(self, step: Any) -> Action:
        means = np.where(self.counts > 0, self.sums / np.maximum(self.counts, 1), np.inf)
        return Action(means.argmax(axis=-1), self.pending)

    def observe(self, feedback: Any) -> None:
        b, m = feedback.arms.shape
        replica, agent = np.repeat(np.arange(b), m), np.tile(np.arange(m)[::-1], b)  # senders descending
        arms, rewards = feedback.arms[replica, agent], feedback.rewards[replica, agent]
        np.add.at(self.counts, (replica, agent, arms), 1)
        np.add.at(self.sums, (replica, agent, arms), rewards)
        pull = {"arm": arms, "reward": rewards}
        tally = {"pulls": self.counts[replica, agent].sum(axis=-1)}
        self.pending = [
            MessageBatch("pull", replica, agent, np.full(b * m, NEIGHBOURS), pull),
            MessageBatch("tally", replica, agent, (agent + 1) % m, tally),
        ]
        for batch in feedback.inbox:
            if batch.kind == "pull":
                where = (batch.replica, batch.recipient, batch.payload["arm"])
                np.add.at(self.counts, where, 1)
                np.add.at(self.sums, where, batch.payload["reward"])


def test_both_run_paths_lose_and_delay_the_same_copies() -> None:
    """The PettingZoo path regroups the rows by sender; the batched path sends them as listed (descending)."""
    env = {"num_agents": 5, "num_arms": 4, "horizon": 60, "topology": "ring", "drop_prob": 0.3, "latency_jitter": 2}
    batched = run(DescendingSharing, env, [3, 7], checkpoints=4, batched=True, reference=None)
    pettingzoo = run(DescendingSharing, env, [3, 7], checkpoints=4, batched=False, reference=None)

    def by_run(rows: list[dict]) -> list[dict]:
        return sorted(({k: v for k, v in r.items() if k != "wall_time"} for r in rows), key=lambda r: r["slot"])

    for seed in (3, 7):
        got = by_run([r for r in pettingzoo.curves if r["seed"] == seed])
        expected = by_run([r for r in batched.curves if r["seed"] == seed])
        assert 0 < expected[-1]["dropped"] < expected[-1]["copies"]
        assert got == expected


# ---------------------------------------------------------------------------------------------------------
# Message records
# ---------------------------------------------------------------------------------------------------------


def test_records_match_totals() -> None:
    slots = 30
    env = broadcast_star(4, 2, slots, 3.0, False, drop_prob=0.2, record_messages=True)
    env.reset(seed=2)
    for t in range(slots):
        env.step(act(env, {i: [up(i)] for i in range(4) if (i + t) % 3 != 0}))
    records = env.ledger.records()
    totals = env.ledger.totals()
    assert len(records["slot"]) == totals["copies"]
    for column in records.values():
        assert len(column) == totals["copies"]
    assert math.isclose(records["link_cost"].sum(), totals["link_cost"], rel_tol=0, abs_tol=1e-9)
    assert int(records["dropped"].sum()) == totals["dropped"]
    assert int(records["messages"].sum()) == totals["messages"]
    assert int(records["bytes"].sum()) == totals["bytes"]
    # every agent-server link is used in every slot (upload or reply), so the cost is c1 * M * slots
    assert totals["link_cost"] == 3.0 * 4 * slots
    # link prices sit on one copy per link and slot
    charged = records["link_cost"] > 0
    assert int(charged.sum()) == 4 * slots
    np.testing.assert_array_equal(np.bincount(records["slot"][charged], minlength=slots), np.full(slots, 4))
    assert set(records["kind"].tolist()) == {"up", "reply"}


def test_records_exact_rows() -> None:
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=2, topology="ring", c2=2.0, record_messages=True)
    env.reset(seed=0)
    env.step(act(env, {0: [msg(0, 1, "a"), Message(0, NEIGHBOURS, "b", {"v": np.zeros(2)}, count=2)]}))
    env.step(act(env, {1: [msg(1, 0, "c")]}))
    r = env.ledger.records()
    assert r["slot"].tolist() == [0, 0, 0, 1]
    assert r["sender"].tolist() == [0, 0, 0, 1]
    assert r["recipient"].tolist() == [1, 1, 2, 0]
    assert r["kind"].tolist() == ["a", "b", "b", "c"]
    assert r["messages"].tolist() == [1, 2, 2, 1]
    assert r["scalars"].tolist() == [3, 2, 2, 3]
    assert r["bytes"].tolist() == [24, 16, 16, 24]
    assert r["dropped"].tolist() == [False] * 4
    assert r["link_cost"].tolist() == [2.0, 0.0, 2.0, 2.0]


def test_records_require_recording() -> None:
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=2, topology="ring")
    env.reset(seed=0)
    env.step(act(env, {0: [msg(0, 1)]}))
    with pytest.raises(RuntimeError, match="record_messages"):
        env.ledger.records()


def test_empty_records_have_all_columns() -> None:
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=2, topology="ring", record_messages=True)
    env.reset(seed=0)
    records = env.ledger.records()
    assert set(records) == {
        "slot",
        "replica",
        "sender",
        "recipient",
        "kind",
        "messages",
        "scalars",
        "bytes",
        "dropped",
        "link_cost",
    }
    assert all(len(v) == 0 for v in records.values())


# ---------------------------------------------------------------------------------------------------------
# Channel and cost model used directly
# ---------------------------------------------------------------------------------------------------------


def test_cost_model_rejects_bad_prices() -> None:
    for name in ("c1", "c2", "price_per_message", "price_per_byte"):
        with pytest.raises(ValueError, match=name):
            CostModel(**{name: -1.0})
        with pytest.raises(ValueError, match=name):
            CostModel(**{name: math.inf})
    with pytest.raises(ValueError, match="link_accounting"):
        CostModel(link_accounting="all_edges")


def test_channel_rejects_gossip_without_edges() -> None:
    channel = Channel(ChannelConfig(gossip="uniform_edge"))
    with pytest.raises(ValueError, match="edge"):
        channel.reset([topo.server(3)], [np.random.default_rng(0)])


def test_ledger_resets_between_episodes() -> None:
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=2, topology="ring", record_messages=True)
    env.reset(seed=0)
    env.step(act(env, {0: [msg(0, 1)]}))
    assert env.ledger.totals()["copies"] == 1
    env.reset(seed=0)
    assert env.ledger.totals()["copies"] == 0
    assert env.ledger.totals()["link_cost"] == 0.0
    assert len(env.ledger.records()["slot"]) == 0


def test_a_rejected_step_leaves_the_ledger_untouched() -> None:
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=3, topology="path")
    env.reset(seed=0)
    # the first message is valid, the second (0 -> 2 on the path 0-1-2) is not
    with pytest.raises(ValueError, match="not linked"):
        env.step(act(env, {0: [msg(0, 1, "ok"), msg(0, 2, "bad", size=2)]}))
    assert env.ledger.totals()["copies"] == 0
    env.step(act(env))  # a silent slot
    assert env.ledger.totals()["link_cost"] == 0.0


def test_inbox_is_in_send_order_when_latencies_differ() -> None:
    # core.Feedback documents the inbox as "sorted by send order"
    latency = np.zeros((4, 4), np.int64)
    latency[0, 1] = 1
    env = FederatedMAB(num_agents=3, num_arms=2, horizon=3, topology="complete", latency=latency)
    env.reset(seed=0)
    env.step(act(env, {0: [msg(0, 1, "early")]}))
    obs, *_ = env.step(act(env, {2: [msg(2, 1, "late")]}))
    assert [(x.kind, x.slot) for x in obs["agent_1"]["inbox"]] == [("early", 0), ("late", 1)]


# ---------------------------------------------------------------------------------------------------------
# Preparation: NEIGHBOURS expansion (kept while a batch header repeats) and validation
# ---------------------------------------------------------------------------------------------------------

#: Replica 0: ring 0-1-2-3 with server links at agents 0 and 2; replica 1: complete graph, no server.
PREPARE_TOPOLOGIES = (topo.from_adjacency(topo.ring(4).adjacency, server_links=[1, 0, 1, 0]), topo.complete(4))


def prepared_channel(topologies=PREPARE_TOPOLOGIES) -> Channel:
    channel = Channel()
    channel.reset(list(topologies), [np.random.default_rng(b) for b in range(len(topologies))])
    return channel


def expected_copies(topologies, batch: MessageBatch) -> list[tuple[int, int, int, int]]:
    """(row, replica, sender, recipient) of every copy, by the definition: ascending neighbours, the server last."""
    copies = []
    for row, (b, s, t) in enumerate(zip(batch.replica.tolist(), batch.sender.tolist(), batch.recipient.tolist())):
        topology = topologies[b]
        if t != NEIGHBOURS:
            recipients = [t]
        elif s == SERVER:
            recipients = np.flatnonzero(topology.server_links).tolist()
        else:
            recipients = topology.neighbours(s).tolist() + ([SERVER] if topology.server_links[s] else [])
        copies += [(row, b, s, r) for r in recipients]
    return copies


def assert_expansion(prepared: MessageBatch, batch: MessageBatch, topologies=PREPARE_TOPOLOGIES) -> None:
    copies = expected_copies(topologies, batch)
    rows = [c[0] for c in copies]
    assert prepared.kind == batch.kind and prepared.privacy == batch.privacy
    assert prepared.replica.tolist() == [c[1] for c in copies]
    assert prepared.sender.tolist() == [c[2] for c in copies]
    assert prepared.recipient.tolist() == [c[3] for c in copies]
    assert prepared.count.tolist() == batch.count[rows].tolist()
    assert prepared.slot.tolist() == [-1] * len(copies)
    assert prepared.payload.keys() == batch.payload.keys()
    for name, values in batch.payload.items():
        assert prepared.payload[name].dtype == values.dtype
        np.testing.assert_array_equal(prepared.payload[name], values[rows])


def broadcast_batch(payload_seed: int, rows: slice = slice(None), count=None) -> MessageBatch:
    """Every agent of both replicas to NEIGHBOURS, the server of replica 0 to NEIGHBOURS, and two explicit rows."""
    replica = np.array([0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1])[rows]
    sender = np.array([0, 1, 2, 3, 0, 1, 2, 3, SERVER, 1, 3])[rows]
    recipient = np.array([NEIGHBOURS] * 9 + [2, 0])[rows]
    payload = {"n": np.random.default_rng(payload_seed).integers(0, 9, (11, 2))[rows]}
    return MessageBatch("counts", replica, sender, recipient, payload, count=count)


def test_prepare_expands_a_repeated_header_exactly_each_time() -> None:
    channel = prepared_channel()
    headers = [slice(None), slice(None), slice(1, None), slice(None), slice(0, 8)]
    for seed, rows in enumerate(headers):
        batch = broadcast_batch(seed, rows, count=np.arange(1, 12)[rows] if seed == 1 else None)
        (prepared,) = channel.prepare([batch])
        assert_expansion(prepared, batch)
        # the expanded header arrays are shared by the batches of a repeated header: none can be written
        assert not any(a.flags.writeable for a in (prepared.replica, prepared.sender, prepared.recipient))
        assert np.array_equal(batch.payload["n"], broadcast_batch(seed, rows).payload["n"])  # input untouched


def test_prepare_of_explicit_recipients_shares_the_payload_under_a_read_only_header() -> None:
    channel = prepared_channel()
    batch = MessageBatch("x", [0, 0, 1], [0, SERVER, 2], [SERVER, 2, 3], {"v": np.ones((3, 1))})
    (prepared,) = channel.prepare([batch, MessageBatch("x", [], [], [], {"v": np.ones((0, 1))})])
    assert prepared.payload is batch.payload and prepared.kind == batch.kind
    for name in ("replica", "sender", "recipient", "count", "slot"):
        array, given = getattr(prepared, name), getattr(batch, name)
        assert np.array_equal(array, given) and not array.flags.writeable
        assert name in ("count", "slot") or not np.shares_memory(array, given)  # count and slot: shared read-only


def not_linked(sender: int, recipient: int, kind: str = "counts") -> str:
    who = lambda i: "the server" if i == SERVER else f"agent {i}"  # noqa: E731
    return re.escape(
        f"{who(sender)} cannot send {kind!r} to {who(recipient)}: they are not linked in the topology; "
        "send only to neighbours (or NEIGHBOURS)"
    )


def unknown_recipient(value: int) -> str:
    return re.escape(f"message recipient {value} is unknown: use an agent index in [0, 4), SERVER or NEIGHBOURS")


@pytest.mark.parametrize(
    ("field", "row", "value", "message"),
    [
        ("sender", 0, 4, re.escape("message sender 4 is not an agent index in [0, 4) or SERVER")),
        ("sender", 3, -3, re.escape("message sender -3 is not an agent index in [0, 4) or SERVER")),
        ("recipient", 2, -5, unknown_recipient(-5)),
        ("recipient", 10, 4, unknown_recipient(4)),
        ("recipient", 9, 3, not_linked(1, 3)),  # agents 1 and 3 of the ring are not neighbours
        ("recipient", 10, SERVER, not_linked(3, SERVER)),  # replica 1 has no server
        ("recipient", 1, SERVER, not_linked(1, SERVER)),  # agent 1 of replica 0 has no server link
        ("recipient", 8, 1, not_linked(SERVER, 1)),
    ],
)
def test_a_header_changed_in_place_is_validated_again(field: str, row: int, value: int, message: str) -> None:
    channel = prepared_channel()
    batch = broadcast_batch(0)
    channel.prepare([batch])
    # int64 header arrays are held without a copy: changing the caller's array changes the next batch's header
    header = getattr(batch, field)
    header[row] = value
    changed = MessageBatch("counts", batch.replica, batch.sender, batch.recipient, batch.payload)
    assert getattr(changed, field) is header
    with pytest.raises(ValueError, match=f"^{message}$"):
        channel.prepare([changed])
    (again,) = channel.prepare([broadcast_batch(1)])  # the valid header is still expanded exactly
    assert_expansion(again, broadcast_batch(1))


def test_a_server_broadcast_without_server_links_has_no_copies() -> None:
    channel = prepared_channel()
    channel.prepare([broadcast_batch(0)])
    batch = broadcast_batch(0)
    batch.replica[8] = 1  # the server row moves to replica 1, which has no server
    (prepared,) = channel.prepare([MessageBatch("counts", batch.replica, batch.sender, batch.recipient, batch.payload)])
    assert_expansion(prepared, batch)
    assert 8 not in [row for row, *_ in expected_copies(PREPARE_TOPOLOGIES, batch)]


def test_expansions_do_not_outlive_an_episode() -> None:
    channel = prepared_channel()
    batch = broadcast_batch(0)
    (first,) = channel.prepare([batch])
    assert_expansion(first, batch)
    other = (topo.complete(4), topo.from_adjacency(topo.ring(4).adjacency, server_links=[0, 1, 0, 1]))
    channel.reset(list(other), [np.random.default_rng(0), np.random.default_rng(1)])
    (second,) = channel.prepare([batch])
    assert_expansion(second, batch, other)
    with pytest.raises(ValueError, match=f"^{not_linked(SERVER, 0)}$"):  # the server of replica 0 is gone
        channel.prepare([MessageBatch("counts", [0], [SERVER], [0], {"n": np.zeros((1, 2))})])


def test_server_linked_reports_any_agent_server_link() -> None:
    assert prepared_channel().server_linked
    assert not prepared_channel((topo.ring(4), topo.complete(4))).server_linked


@pytest.mark.parametrize("activation", ["uniform_edge", "node_then_neighbour"])
def test_gossip_partners_drawn_in_blocks_equal_slot_by_slot_draws(activation: str) -> None:
    # drops make the channel draw one slot at a time; without transmissions the draws are the same
    topologies = [topo.ring(5), topo.path(5), topo.complete(5)]
    blocked, single = (
        Channel(ChannelConfig(gossip=activation)),
        Channel(ChannelConfig(gossip=activation, drop_prob=0.5)),
    )
    for channel in (blocked, single):
        channel.reset(topologies, [np.random.default_rng(10 + b) for b in range(3)])
    for _ in range(2 * GOSSIP_BLOCK + 3):
        partners = blocked.sample_gossip_partners()
        np.testing.assert_array_equal(partners, single.sample_gossip_partners())
        assert not partners.flags.writeable
        for b, row in enumerate(partners):
            (i, j) = np.flatnonzero(row >= 0)
            assert row[i] == j and row[j] == i and topologies[b].adjacency[i, j]


AGENTS_AS_SERVER = re.escape("agents cannot send as SERVER; only the coordinator does")


def test_a_server_sender_from_the_agents_is_refused_before_any_other_error() -> None:
    channel = prepared_channel()
    server_row = broadcast_batch(0)  # row 8 is a broadcast by the server of replica 0
    assert channel.prepare([server_row]) and channel.prepare([server_row])  # the coordinator may (expansion kept)
    with pytest.raises(ValueError, match=f"^{AGENTS_AS_SERVER}$"):
        channel.prepare([server_row], from_agents=True)  # the kept expansion knows its sender
    unlinked = MessageBatch("x", [0], [1], [3], {"v": np.zeros(1)})
    unknown = MessageBatch("y", [0], [1], [7], {"v": np.zeros(1)})
    explicit = MessageBatch("z", [0, 0], [2, SERVER], [SERVER, 0], {"v": np.zeros(2)})
    for batches in ([unlinked, explicit], [unknown, explicit], [explicit, unlinked], [unlinked, server_row]):
        with pytest.raises(ValueError, match=f"^{AGENTS_AS_SERVER}$"):
            channel.prepare(batches, from_agents=True)
    with pytest.raises(ValueError, match=f"^{not_linked(1, 3, 'x')}$"):
        channel.prepare([unlinked, explicit])
    (prepared,) = channel.prepare([explicit])
    assert prepared.recipient.tolist() == [SERVER, 0] and prepared.payload is explicit.payload


def test_a_reply_not_from_the_server_is_refused_before_any_other_error() -> None:
    channel = prepared_channel()
    server_row = broadcast_batch(0)  # row 8 is a broadcast by the server of replica 0
    for _ in range(2):  # a new header, then the kept plan (which knows that not every sender is the server)
        with pytest.raises(ValueError, match="^coordinator replies must have sender SERVER$"):
            channel.prepare([server_row], from_server=True)
    replies = [MessageBatch("down", [0, 1], [SERVER, SERVER], [0, NEIGHBOURS], {"v": np.zeros(2)}) for _ in range(2)]
    assert [len(b) for b in channel.prepare(replies, from_server=True)] == [len(b) for b in channel.prepare(replies)]
    unlinked = MessageBatch("x", [0], [1], [3], {"v": np.zeros(1)})
    with pytest.raises(ValueError, match="^coordinator replies must have sender SERVER$"):
        channel.prepare([*replies, unlinked], from_server=True)


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        ("server", re.escape("a message was sent to SERVER but no coordinator is hosted; pass coordinator=...")),
        ("ring", not_linked(0, SERVER, "up")),
    ],
)
def test_agents_sending_to_an_unhosted_server(topology: str, message: str) -> None:
    core = FederatedMABCore(MABConfig(num_agents=3, num_arms=2, horizon=3, topology=topology))
    core.reset([0, 1])
    arms = np.zeros((2, 3), np.int64)
    up = MessageBatch("up", [0, 1], [0, 0], [SERVER, SERVER], {"v": np.zeros(2)})
    with pytest.raises(ValueError, match=f"^{message}$"):
        core.step(arms, [up])
    with pytest.raises(ValueError, match=f"^{AGENTS_AS_SERVER}$"):
        core.step(arms, [up, MessageBatch("down", [1], [SERVER], [NEIGHBOURS], {"v": np.zeros(1)})])
    assert core.slot == 0 and core.channel.ledger.totals()["messages"] == 0


def test_kept_header_plans_are_reused_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A header seen before (not only the last of its kind) reuses its plan; the plans kept stay within PLAN_ROWS."""
    monkeypatch.setattr(channel_module, "PLAN_ROWS", 5)
    channel = Channel(ChannelConfig())
    channel.reset([topo.server(4)], [np.random.default_rng(0)])
    headers = [np.array([0, 1]), np.array([2, 3]), np.array([0, 1]), np.array([1, 2, 3]), np.array([2, 3])]
    routed = []
    for recipients in headers:
        n = len(recipients)
        batch = MessageBatch("d", np.zeros(n, np.int64), np.full(n, SERVER), recipients, {"x": np.ones((n, 1))})
        routed.append(channel.prepare([batch])[0])
        assert channel._plan_rows <= 5
    assert routed[2].recipient is routed[0].recipient  # the first header's plan, kept past the second one
    assert routed[4].recipient is not routed[1].recipient  # dropped when the third header would pass the bound
    np.testing.assert_array_equal(routed[4].recipient, [2, 3])
