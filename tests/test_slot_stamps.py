"""The fast paths of a batched slot against an untrusted learner and against their reference versions.

A batch prepared for its slot carries the channel's shared stamp of that slot (an immutable row of a block of
stamps), a lone batch known by its kind's kept plan skips the header checks but not the sender checks, the ledger
remembers the free-downlink verdict of a header it holds, the core copies an int64 arm array after one reduction and
a batch copies its plain array fields at once. Each is checked here against a learner that writes into what it was
given, re-sends old batches or forges headers, and against the reference mode (:mod:`fedbandit_envs.reference`).
A copied IndependentUCB1 keeps its flat views (its statistics' fast path) on its own arrays.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from property_settings import reproducible

from agents.baselines import FullSharingUCB
from fedbandit_envs import NEIGHBOURS, SERVER, MessageBatch
from fedbandit_envs.channel import Channel, ChannelConfig, CostModel
from fedbandit_envs.channel.channel import AGENTS_AS_SERVER, REPLY_NOT_FROM_SERVER, STAMP_ENTRIES
from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.frozen import frozen, is_frozen
from fedbandit_envs.reference import reference_mode
from fedbandit_envs.topology import Topology

PROPERTY = reproducible(40)


def server_channel(num_agents: int = 3, replicas: int = 2) -> Channel:
    """A channel over star topologies (every agent linked to the server only)."""
    channel = Channel(ChannelConfig())
    star = Topology(np.zeros((num_agents, num_agents), bool), np.ones(num_agents, bool), "star")
    channel.reset([star] * replicas, [np.random.default_rng(b) for b in range(replicas)])
    return channel


def uploads(num_agents: int = 3, replicas: int = 2) -> MessageBatch:
    """Every agent of every replica sends one row to the server, on immutable header arrays."""
    n = num_agents * replicas
    replica = frozen(np.repeat(np.arange(replicas), num_agents))
    sender = frozen(np.tile(np.arange(num_agents), replicas))
    return MessageBatch("up", replica, sender, frozen(np.full(n, SERVER)), {"x": np.arange(n, dtype=np.float64)})


def replies(replicas: int = 2) -> MessageBatch:
    """The server broadcasts one row per replica to its neighbours, on immutable header arrays."""
    header = frozen(np.arange(replicas)), frozen(np.full(replicas, SERVER)), frozen(np.full(replicas, NEIGHBOURS))
    return MessageBatch("down", *header, {"y": np.ones((replicas, 2))})


def test_stamps_are_immutable_and_shared_within_a_slot() -> None:
    channel = server_channel()
    sent = channel.prepare([uploads()], from_agents=True, slot=5)
    back = channel.prepare([replies()], from_server=True, slot=5)
    assert sent[0].slot is back[0].slot  # one array per slot and length (6 rows each)
    arrived = channel.transmit(5, sent + back)
    assert [b.slot.tolist() for b in arrived] == [[5] * 6, [5] * 6]
    stamp = arrived[0].slot
    assert is_frozen(stamp)
    chain = [stamp]
    while isinstance(chain[-1].base, np.ndarray):
        chain.append(chain[-1].base)
    for array in chain:  # neither the stamp nor its block can be made writeable
        with pytest.raises(ValueError):
            array.setflags(write=True)
    later = channel.prepare([uploads()], from_agents=True, slot=6)[0].slot
    assert later.tolist() == [6] * 6 and stamp.tolist() == [5] * 6


def test_a_batch_prepared_for_another_slot_is_stamped_anew() -> None:
    channel = server_channel()
    prepared = channel.prepare([uploads()], from_agents=True, slot=3)
    assert [b.slot.tolist() for b in channel.transmit(4, prepared)] == [[4] * 6]


def test_a_delivered_batch_sent_again_gets_the_new_slot() -> None:
    channel = server_channel()
    delivered = channel.transmit(2, channel.prepare([uploads()], from_agents=True, slot=2))[0]
    again = channel.prepare([delivered], slot=7)  # it holds the stamp of slot 2
    assert again[0].slot.tolist() == [7] * 6
    assert channel.transmit(7, again)[0].slot.tolist() == [7] * 6


def test_a_batch_built_from_a_stamp_holds_a_copy_of_it() -> None:
    channel = server_channel()
    stamp = channel.stamp(4, 6)
    forged = MessageBatch(
        "up", *(uploads().replica, uploads().sender, np.full(6, SERVER)), {"x": np.zeros(6)}, slot=stamp
    )
    assert forged.slot is not stamp
    prepared = channel.prepare([forged], from_agents=True)  # unsent: stamped when transmitted
    assert channel.transmit(9, prepared)[0].slot.tolist() == [9] * 6


@pytest.mark.parametrize("rows", [1, 6, STAMP_ENTRIES + 3])
def test_stamp_blocks_grow_for_a_length_sent_every_slot(rows: int) -> None:
    channel = server_channel()
    blocks = set()
    for slot in range(300):
        stamp = channel.stamp(slot, rows)
        assert stamp.shape == (rows,) and stamp.dtype == np.int64 and (stamp == slot).all() and is_frozen(stamp)
        assert channel.stamp(slot, rows) is stamp
        blocks.add(len(channel._stamps[rows][3]))
    cap = max(1, STAMP_ENTRIES // rows)
    assert max(blocks) == min(cap, 256) and min(blocks) == 1
    channel.stamp(1000, rows)  # a gap: a block of one slot again
    assert len(channel._stamps[rows][3]) == 1


def test_a_copied_channel_makes_its_own_immutable_stamps() -> None:
    channel = server_channel()
    channel.stamp(0, 6)
    for clone in (pickle.loads(pickle.dumps(channel)), copy.deepcopy(channel)):
        assert clone._stamps == {}
        assert is_frozen(clone.stamp(1, 6)) and clone.stamp(1, 6).tolist() == [1] * 6


def test_agents_cannot_send_on_the_servers_known_header() -> None:
    """The server's kept plan is known by its immutable arrays; agents sending them are still refused."""
    channel = server_channel()
    server = replies()
    channel.prepare([server], from_server=True, slot=0)
    forged = MessageBatch("down", server.replica, server.sender, server.recipient, {"y": np.zeros((2, 2))})
    assert channel._last_plans["down"].has_sources_of(forged)
    with pytest.raises(ValueError, match=AGENTS_AS_SERVER):
        channel.prepare([forged], from_agents=True, slot=1)


def test_the_server_cannot_reply_on_the_agents_known_header() -> None:
    channel = server_channel()
    agents = uploads()
    channel.prepare([agents], from_agents=True, slot=0)
    forged = MessageBatch("up", agents.replica, agents.sender, agents.recipient, {"x": np.zeros(6)})
    assert channel._last_plans["up"].has_sources_of(forged)
    with pytest.raises(ValueError, match=REPLY_NOT_FROM_SERVER):
        channel.prepare([forged], from_server=True, slot=1)


ARM_DTYPES = st.sampled_from([np.int64, np.int32, np.uint8, np.uint64, np.float64, np.bool_])


@PROPERTY
@given(
    dtype=ARM_DTYPES,
    shape=st.sampled_from([(2, 3), (3, 2), (2, 3, 1), (6,)]),
    values=st.lists(st.integers(-3, 7), min_size=6, max_size=6),
    strided=st.booleans(),
)
def test_arm_checks_copy_valid_arms_and_refuse_the_rest(
    dtype: type, shape: tuple[int, ...], values: list[int], strided: bool
) -> None:
    """The core keeps its own int64 copy of a valid (B, M) integer arm array and refuses anything else, saying why."""
    core = FederatedMABCore(MABConfig(3, 4, 5))
    core.reset([0, 1])
    arms = np.array(values).astype(dtype).reshape(shape)
    if strided and shape == (2, 3):
        arms = np.asfortranarray(arms)
    if arms.shape != (2, 3):
        with pytest.raises(ValueError, match=r"shape \(replicas, agents\) = \(2, 3\)"):
            core.check_arms(arms)
    elif arms.dtype.kind not in "iu":
        with pytest.raises(TypeError, match="arms must be integers"):
            core.check_arms(arms)
    elif not ((arms >= 0) & (arms < 5)).all():
        with pytest.raises(ValueError, match="out of range"):
            core.check_arms(arms)
    else:
        checked = core.check_arms(arms)
        assert checked is not arms and not np.shares_memory(checked, arms)
        assert checked.dtype == np.int64 and checked.tolist() == arms.tolist()


FIELDS = st.sampled_from(
    ["int", "float", "bool", "nan", "inf", "broadcast", "strided", "scalar", "complex", "2d", "list"]
)


def payload_field(name: str, n: int) -> object:
    """A payload field of ``n`` rows (or an invalid one) of the given sort."""
    rng = np.random.default_rng(n)
    values = rng.normal(size=(n, 2))
    return {
        "int": rng.integers(0, 9, n),
        "float": values[:, 0].copy(),
        "bool": values[:, 0] > 0,
        "nan": np.where(values[:, 0] > 0, np.nan, 1.0),
        "inf": np.full(n, np.inf),
        "broadcast": np.broadcast_to(np.ones(2), (n, 2)),
        "strided": values[:, 1],
        "scalar": np.float64(1.0),
        "complex": values[:, 0] * 1j,
        "2d": values.astype(np.float32),
        "list": values[:, 0].tolist(),
    }[name]


@PROPERTY
@given(sorts=st.lists(FIELDS, min_size=1, max_size=4), n=st.integers(0, 5))
def test_payload_copies_equal_the_reference(sorts: list[str], n: int) -> None:
    """Plain array fields copied at once give the fields (values, dtypes, shapes, immutability) or the errors that the
    field-by-field path of the reference mode gives."""
    payload = {f"f{i}": payload_field(sort, n) for i, sort in enumerate(sorts)}
    header = np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, SERVER)

    def outcome() -> object:
        try:
            batch = MessageBatch("k", *header, payload)
        except (TypeError, ValueError) as error:
            return type(error), str(error)
        for name, value in payload.items():
            if isinstance(value, np.ndarray) and value.size and value.ndim:
                assert not np.shares_memory(batch.payload[name], value)
        fields = [(k, v.dtype, v.shape, v.tolist(), is_frozen(v), v.flags.writeable) for k, v in batch.payload.items()]
        return fields, batch.layout_key()

    fast = outcome()
    with reference_mode():
        assert outcome() == fast


@PROPERTY
@given(seed=st.integers(0, 2**16), free=st.booleans(), c1=st.sampled_from([0.0, 1.0]), prices=st.booleans())
def test_full_sharing_ledger_equals_the_reference(seed: int, free: bool, c1: float, prices: bool) -> None:
    """Full sharing on the core (stamps at preparation, kept plans, the ledger's remembered verdicts) plays and costs
    what the reference mode plays and costs, bit for bit."""
    costs = CostModel(c1=c1, free_server_downlink=free, price_per_message=0.25 * prices, price_per_byte=0.01 * prices)
    config = MABConfig(3, 4, 40, channel=ChannelConfig(costs=costs), reward_model="gaussian")

    def run() -> tuple:
        population = FullSharingUCB()
        core = FederatedMABCore(config, coordinator=population.make_coordinator())
        core.reset([seed, seed + 1])
        population.reset(core.context)
        for _ in range(config.horizon):
            population.observe(core.play(population.act(core.current_step())))
        ledger = core.channel.ledger
        totals = [ledger.totals(b) for b in range(2)]
        return core.regret.tolist(), totals, ledger.node_cost.tolist(), ledger.sent_bytes.tolist()

    fast = run()
    with reference_mode():
        assert run() == fast


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda p: pickle.loads(pickle.dumps(p))])
def test_a_copied_independent_ucb1_plays_on_as_the_original(clone) -> None:
    """IndependentUCB1 updates its statistics through flat views of them: a copy's views are its own statistics."""
    from agents.baselines import IndependentUCB1

    core = FederatedMABCore(MABConfig(2, 3, 30))
    core.reset([0, 1])
    population = IndependentUCB1()
    population.reset(core.context)
    for _ in range(5):
        population.observe(core.play(population.act(core.current_step())))
    twin = clone(population)
    assert np.shares_memory(twin.counts, twin._counts_flat) and np.shares_memory(twin.sums, twin._sums_flat)
    for _ in range(10):
        step = core.current_step()
        action = population.act(step)
        assert np.array_equal(twin.act(step).arms, action.arms)
        feedback = core.play(action)
        population.observe(feedback)
        twin.observe(feedback)
    assert np.array_equal(twin.counts, population.counts) and np.array_equal(twin.sums, population.sums)
