"""TTL flooding (fedbandit_envs.channel.flooding): reach, timing, forwarding and exact copy counts (dubey §2.0, §5.1).

A flood is driven through the real simulation core, so every copy goes through the channel and its ledger. Agents
create one record per slot from slot 1 on (as the Dubey populations do), so the spec's transmission formula
``tx_m(r) = deg(m) * |{o : d(m, o) <= gamma - 1, r - d(m, o) >= 1}|`` applies verbatim to slot ``r``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from property_settings import reproducible

from fedbandit_envs import topology as topo
from fedbandit_envs.channel import flooding
from fedbandit_envs.channel.flooding import FloodRecords, TTLFlooding
from fedbandit_envs.channel.messages import GatheredPayload, MessageBatch
from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.reference import reference_mode
from wrappers.faults import MessageDelays, MessageDrops

WATTS_STROGATZ = topo.from_adjacency(
    nx.to_numpy_array(nx.connected_watts_strogatz_graph(30, 4, 0.2, seed=3), dtype=bool), name="ws30"
)
GRAPHS = {"path6": topo.path(6), "ring7": topo.ring(7), "ws30": WATTS_STROGATZ}


def flood(topology, gamma, slots, env=None, max_age=None):
    """Run a flood on ``topology`` (on the core of ``env`` with its wrappers' hooks, if given); return the records
    received, the per-slot sent counts and the flood."""
    m = topology.num_agents
    if env is None:
        core = FederatedMABCore(MABConfig(num_agents=m, num_arms=2, horizon=slots, topology=topology))
        core.reset([0])
    else:
        core = env.unwrapped.core
        core.reset([0], hooks=env.message_hooks())
    service = TTLFlooding(gamma, "probe", max_age=max_age)
    service.reset(1, m)
    received: list[FloodRecords] = []
    received_slot: list[np.ndarray] = []
    sent = []
    before = core.channel.ledger.sent_messages[0, :m].copy()
    for t in range(slots):
        content = {"value": np.full((1, m), 0.5 + t)} if t >= 1 else None
        feedback = core.step(np.zeros((1, m), np.int64), service.send(t, content))
        after = core.channel.ledger.sent_messages[0, :m].copy()
        sent.append(after - before)
        before = after
        new = service.receive(t, feedback.inbox)
        if new is not None:
            received.append(new)
            received_slot.append(np.full(len(new), t))
    records = FloodRecords.concatenate(received)
    return records, np.concatenate(received_slot), np.array(sent), service, core


def expected_receipts(topology, gamma, slots):
    """(slot received, holder, origin, created, ttl) of every first receipt, from distances alone."""
    dist = topology.distances()
    rows = set()
    for origin in range(topology.num_agents):
        for holder in range(topology.num_agents):
            d = dist[origin, holder]
            if not 1 <= d <= gamma:
                continue
            for created in range(1, slots):
                if created + d - 1 <= slots - 1:
                    rows.add((created + d - 1, holder, origin, created, gamma - d))
    return rows


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_reach_timing_ttl_and_uniqueness(graph, gamma):
    topology = GRAPHS[graph]
    records, slot, _, service, _ = flood(topology, gamma, 12)
    got = list(
        zip(
            slot.tolist(),
            records.holder.tolist(),
            records.origin.tolist(),
            records.created.tolist(),
            records.ttl.tolist(),
        )
    )
    assert len(got) == len(set(got))  # every id reaches a holder once: duplicates are dropped
    assert set(got) == expected_receipts(topology, gamma, 12)  # reach B_gamma, arrival created + d - 1, ttl gamma - d
    assert np.all(records.content["value"] == 0.5 + records.created)  # contents travel unchanged
    assert service.expired.sum() == 0


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("gamma", [1, 2, 3])
def test_ledger_counts_the_spec_transmission_formula_every_slot(graph, gamma):
    topology = GRAPHS[graph]
    _, _, sent, _, core = flood(topology, gamma, 10)
    dist, degree = topology.distances(), topology.degree()
    for r in range(10):
        expected = [degree[m] * np.sum((dist[m] <= gamma - 1) & (r - dist[m] >= 1)) for m in range(topology.num_agents)]
        assert sent[r].tolist() == expected
    # steady state (r >= gamma): deg(m) * |B_{gamma-1}(m)|
    steady = [degree[m] * len(topology.ball(m, gamma - 1)) for m in range(topology.num_agents)]
    assert sent[-1].tolist() == steady
    # a record is 3 header int64 + one float64: 32 bytes and 4 scalars per logical copy
    ledger = core.channel.ledger
    assert ledger.bytes[0] == 32 * ledger.messages[0] and ledger.scalars[0] == 4 * ledger.messages[0]


def test_first_receipts_and_duplicates_per_slot_in_steady_state():
    topology, gamma, slots = WATTS_STROGATZ, 2, 10
    _, slot, sent, service, _ = flood(topology, gamma, slots)
    balls = np.array([len(topology.ball(m, gamma)) - 1 for m in range(topology.num_agents)])
    # accepted over the whole run: every record of every origin within gamma hops that had time to arrive
    dist = topology.distances()
    expected = [sum(slots - d for d in dist[m] if 1 <= d <= gamma) for m in range(topology.num_agents)]
    assert service.accepted[0].tolist() == expected
    # in steady state each agent accepts |B_gamma(m)| - 1 new records per slot
    assert np.bincount(slot, minlength=slots)[-1] == balls.sum()
    # every copy delivered is either accepted or a duplicate; copies sent = copies received (no loss)
    assert (service.received == service.accepted + service.duplicates).all()
    assert service.received.sum() == sent.sum()
    # first receipts by age: age = hop distance - 1
    by_distance = [sum(slots - d for m in range(30) for d in dist[m] if d == h) for h in (1, 2)]
    assert service.ages[0].tolist() == by_distance


def test_packing_one_row_per_set_bit_and_exact_bytes():
    topology = topo.complete(14)  # gamma = 2: each agent forwards 13 records + its own = 14 = 8 + 4 + 2
    service = TTLFlooding(2, "probe")
    service.reset(1, 14)
    service.send(0, None)
    core = FederatedMABCore(MABConfig(num_agents=14, num_arms=2, horizon=3, topology=topology))
    core.reset([0])
    feedback = core.step(np.zeros((1, 14), np.int64), service.send(1, {"value": np.ones((1, 14))}))
    service.receive(1, feedback.inbox)
    batches = service.send(2, {"value": np.ones((1, 14))})
    assert [int(b.count[0]) for b in batches] == [8, 4, 2]
    assert all(len(b) == 14 for b in batches)
    assert [b.payload["origin"].shape for b in batches] == [(14, 8), (14, 4), (14, 2)]
    origins = np.concatenate([b.payload["origin"] for b in batches], axis=1)
    assert (origins[:, 0] == np.arange(14)).all()  # own record first ...
    assert (np.sort(origins[:, 1:], axis=1) == origins[:, 1:]).all()  # ... then forwards by origin
    for b in batches:  # ttl is decremented on the outgoing copy: own gamma - 1, forwards 0
        assert (b.payload["ttl"] == np.where(b.payload["origin"] == b.sender[:, None], 1, 0)).all()


def test_gamma_zero_is_silent_and_bad_gamma_is_rejected():
    records_sent = TTLFlooding(0)
    records_sent.reset(1, 3)
    assert records_sent.send(1, {"value": np.ones((1, 3))}) == []
    with pytest.raises(ValueError, match="gamma must be >= 0"):
        TTLFlooding(-1)
    with pytest.raises(TypeError, match="gamma must be an int"):
        TTLFlooding(1.5)
    with pytest.raises(ValueError, match="max_age must be >= 0"):
        TTLFlooding(2, max_age=-1)
    service = TTLFlooding(1)
    service.reset(2, 3)
    with pytest.raises(ValueError, match="shape"):
        service.send(1, {"value": np.ones((1, 3))})


def test_drops_never_cause_double_acceptance_and_delays_need_max_age():
    topology = WATTS_STROGATZ
    env = MessageDrops(FederatedMAB(num_agents=30, num_arms=2, horizon=15, topology=topology), prob=0.3)
    records, slot, _, service, _ = flood(topology, 3, 15, env=env)
    ids = list(zip(records.holder.tolist(), records.origin.tolist(), records.created.tolist()))
    assert len(ids) == len(set(ids)) and env.hook.dropped[0] > 0
    assert len(ids) < len(expected_receipts(topology, 3, 15))  # drops lost some records ...
    dist = topology.distances()
    assert np.all(slot - records.created >= dist[records.origin, records.holder] - 1)  # ... and delayed others

    delayed = MessageDelays(FederatedMAB(num_agents=6, num_arms=2, horizon=12, topology=topo.path(6)), delay=1)
    records, _, _, strict, _ = flood(topo.path(6), 2, 12, env=delayed)
    # a copy now takes two slots per hop: age 2d - 1; the default max_age = gamma - 1 = 1 keeps distance 1 only
    assert (topo.path(6).distances()[records.origin, records.holder] == 1).all() and strict.expired.sum() > 0
    records, slot, _, tolerant, _ = flood(topo.path(6), 2, 12, env=delayed, max_age=3)
    assert tolerant.expired.sum() == 0
    d = topo.path(6).distances()[records.origin, records.holder]
    assert np.all(slot - records.created == 2 * d - 1)  # one extra slot per hop


def test_a_replayed_inbox_after_a_steady_run_is_all_duplicates():
    """Steady slots reuse the routing plan and defer their seen marks; a slot that differs must still see them."""
    topology, gamma, slots = WATTS_STROGATZ, 3, 14
    m = topology.num_agents
    core = FederatedMABCore(MABConfig(num_agents=m, num_arms=2, horizon=slots + 1, topology=topology))
    core.reset([0])
    service = TTLFlooding(gamma, "probe")
    service.reset(1, m)
    ids, previous = set(), []
    for t in range(slots + 1):
        feedback = core.step(np.zeros((1, m), np.int64), service.send(t, {"value": np.full((1, m), float(t))}))
        replay = previous if t == slots else []  # the last slot also gets the previous slot's copies again
        before = service.duplicates.sum()
        new = service.receive(t, feedback.inbox + replay)
        got = set(zip(new.holder.tolist(), new.origin.tolist(), new.created.tolist()))
        assert not got & ids  # no record is accepted twice
        ids |= got
        previous = feedback.inbox
    replayed = sum(b.payload["origin"].size for b in replay)
    stale = sum(int(np.sum(slots - b.payload["created"] >= gamma)) for b in replay)  # older than max_age: expired
    assert service.expired.sum() == stale > 0
    # the slot's own copies add the steady-state duplicates; the replayed fresh copies are duplicates too
    steady = sum(b.payload["origin"].size for b in feedback.inbox) - len(new)
    assert service.duplicates.sum() - before == steady + replayed - stale
    assert len(new) == sum(len(topology.ball(h, gamma)) - 1 for h in range(m))  # the usual new records, no more


def test_blocked_content_gathers_equal_a_plain_take(monkeypatch):
    monkeypatch.setattr(flooding, "GATHER_BLOCK", 4)
    rng = np.random.default_rng(0)
    source = rng.random((40, 3))
    narrow = np.concatenate([rng.permutation(10) + 10 * i for i in range(4)])  # blocks of rows close together
    wide = rng.permutation(40)[:23]  # blocks spanning most of the source
    for rows in (narrow, wide, np.arange(0)):
        gathered = flooding._Gather(0, None, rows).take(source)
        assert np.array_equal(gathered, np.take(source, rows, axis=0))
    index = rng.permutation(40)[:30]
    for lazy in (False, True):
        parts = [_content_part(source[:25], lazy), _content_part(source[25:], lazy)]
        gathers = flooding._gathers(np.array([0, 25, 40]), index)
        assert np.array_equal(flooding._gather(parts, "x", gathers), source[index])


def _content_part(content: np.ndarray, lazy: bool, r: int = 1) -> flooding._Part:
    """A delivered part whose records carry ``content`` as field ``"x"`` (rows of ``r`` records).

    ``lazy``: the copies' payload is a :class:`GatheredPayload` over a source with the rows in reverse order.
    """
    n = len(content) // r
    header = {name: np.zeros((n, r), np.int64) for name in flooding.HEADER_FIELDS}
    payload = {**header, "x": content.reshape(n, r, *content.shape[1:])}
    if lazy:
        reverse = np.arange(n)[::-1].copy()
        payload = GatheredPayload({k: v[reverse] for k, v in payload.items()}, reverse)
    batch = MessageBatch._trusted("flood", *(np.zeros(n, np.int64),) * 3, payload, np.full(n, r), np.full(n, -1), None)
    return flooding._Part(batch, r, ("x",))


def test_lazily_gathered_copies_give_the_records_an_eager_gather_gives():
    """Kept records are read from the sender's rows; every copy's content equals the eager reading."""
    rng = np.random.default_rng(1)
    content = rng.random((24, 2))
    for r in (1, 4):
        eager, lazy = _content_part(content, False, r), _content_part(content, True, r)
        records = rng.permutation(24)[:9]
        assert np.array_equal(lazy.content_rows("x", records), content[records])
        assert np.array_equal(eager.content_rows("x", records), content[records])
        assert not lazy.batch.payload.is_gathered("x")  # only the kept records were read
        assert np.array_equal(lazy.content_field("x"), content)
        assert lazy.batch.payload.is_gathered("x")
        assert np.array_equal(lazy.content_rows("x", records), content[records])  # from the gathered field now
    empty = flooding._gather([_content_part(content, True, 4)], "x", [])
    assert empty.shape == (0, 2) and empty.dtype == content.dtype


@reproducible(25)
@given(
    seed=st.integers(0, 2**16),
    gamma=st.integers(1, 3),
    drop=st.sampled_from([0.0, 0.2]),
    switch=st.sampled_from([None, 4, 9]),
)
def test_routing_plans_and_lazy_copies_equal_the_reference(seed, gamma, drop, switch):
    """Reused routing plans, deferred seen marks and copies matched through the sender's rows give, slot by slot,
    the records and counts of routing every slot afresh (the reference mode), also when the mode changes mid-run."""
    rng = np.random.default_rng(seed)
    m, slots = int(rng.integers(4, 16)), 16
    graph = nx.gnp_random_graph(m, float(rng.uniform(0.25, 0.7)), seed=seed)
    topology = topo.from_adjacency(nx.to_numpy_array(graph, dtype=bool), name="random")
    silent = set(rng.choice(slots, size=3, replace=False).tolist())  # slots without new records

    def play(reference_from):
        env = FederatedMAB(num_agents=m, num_arms=2, horizon=slots, topology=topology)
        env = MessageDrops(env, prob=drop) if drop else env
        core = env.unwrapped.core
        core.reset([seed], hooks=env.message_hooks() if drop else ())
        service = TTLFlooding(gamma, "probe", max_age=gamma + 1)
        service.reset(1, m)
        seen = []
        for t in range(slots):
            with reference_mode(reference_from is not None and t >= reference_from):
                content = None if t in silent else {"value": rng_values[t], "arm": np.full((1, m, 2), t)}
                feedback = core.step(np.zeros((1, m), np.int64), service.send(t, content))
                new = service.receive(t, feedback.inbox)
            seen.append(None if new is None else (new, service.received.copy(), service.duplicates.copy()))
        return seen, service

    rng_values = rng.random((slots, 1, m))
    fast, fast_service = play(switch)
    plain, plain_service = play(0)
    for a, b in zip(fast, plain):
        assert (a is None) == (b is None)
        if a is None:
            continue
        for x, y in zip(a[1:], b[1:]):
            assert np.array_equal(x, y)
        for name in ("replica", "holder", "sender", "origin", "created", "ttl"):
            assert np.array_equal(getattr(a[0], name), getattr(b[0], name)), name
        for name in a[0].content:
            assert np.array_equal(a[0].content[name], b[0].content[name]), name
    for name in ("created", "received", "accepted", "duplicates", "expired", "ages"):
        assert np.array_equal(getattr(fast_service, name), getattr(plain_service, name)), name


def test_copies_match_a_later_slot_only_when_every_record_header_shifts():
    """The plan's comparison of copies: through the sender's rows when lazy, copy by copy otherwise."""
    rows = np.array([1, 0, 1, 1])
    header = {
        "origin": np.array([[3, 4], [5, 6]]),
        "created": np.array([[7, 7], [8, 6]]),
        "ttl": np.array([[2, 1]] * 2),
    }

    def part(lazy=True, rows=rows, **changes):
        source = {**header, **changes, "x": np.zeros((2, 2))}
        payload = GatheredPayload(source, rows) if lazy else {k: v[rows] for k, v in source.items()}
        batch = MessageBatch._trusted(
            "flood", *(np.zeros(4, np.int64),) * 3, payload, np.full(4, 2), np.full(4, -1), None
        )
        return flooding._Part(batch, 2, ("x",))

    first = part()
    copies = flooding._Copies.of(first)
    assert copies.rows is first.batch.payload.rows and copies.rows.tolist() == rows.tolist()
    assert copies.origin is header["origin"]  # the sender's rows: nothing gathered
    later = {"created": header["created"] + 1}
    assert copies.shifted(part(**later), 1) is not None
    assert copies.shifted(part(created=header["created"] + 2), 1) is None
    assert copies.shifted(part(**later, origin=header["origin"][::-1].copy()), 1) is None
    assert copies.shifted(part(**later, ttl=header["ttl"] - 1), 1) is None
    assert copies.shifted(part(**later, rows=rows[::-1].copy()), 1) is None
    assert copies.shifted(part(False, **later), 1) is None  # copies with a payload of their own: route afresh
    eager = flooding._Copies.of(part(False))
    assert eager.rows is None and eager.origin.tolist() == [5, 6, 3, 4, 5, 6, 5, 6]
    assert eager.shifted(part(**later), 1) is not None  # lazy copies compared copy by copy against gathered ones
    assert eager.shifted(part(**later, origin=header["origin"] + 1), 1) is None
