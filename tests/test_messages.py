"""Construction and row operations of MessageBatch: what is held, copied, defaulted and rejected."""

from __future__ import annotations

import copy
import pickle
import re
import warnings

import numpy as np
import pytest

from fedbandit_envs import NEIGHBOURS, SERVER, Message, MessageBatch
from fedbandit_envs.channel.messages import GatheredPayload, broadcast_row
from fedbandit_envs.channel.privacy import Privatized
from fedbandit_envs.frozen import FrozenDict, is_frozen
from fedbandit_envs.reference import reference_mode


def headers(n: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.zeros(n, np.int64), np.arange(n, dtype=np.int64), np.full(n, NEIGHBOURS, np.int64)


def test_int64_headers_are_held_and_others_converted() -> None:
    replica, sender, recipient = headers()
    batch = MessageBatch("k", replica, sender, recipient, {"v": np.ones((3, 2))})
    assert batch.replica is replica and batch.sender is sender and batch.recipient is recipient
    converted = MessageBatch("k", [0, 0, 0], sender.astype(np.int32), recipient.reshape(3, 1), {"v": np.ones((3, 2))})
    for name, expected in (("replica", [0, 0, 0]), ("sender", [0, 1, 2]), ("recipient", [NEIGHBOURS] * 3)):
        array = getattr(converted, name)
        assert array.dtype == np.int64 and array.shape == (3,) and array.tolist() == expected
    assert converted.sender is not sender


def test_default_count_and_slot_are_read_only_ones_and_minus_ones() -> None:
    batch = MessageBatch("k", *headers(4), {"v": np.ones(4)})
    assert batch.count.tolist() == [1] * 4 and batch.slot.tolist() == [-1] * 4
    assert batch.count.dtype == batch.slot.dtype == np.int64
    assert not batch.count.flags.writeable and not batch.slot.flags.writeable
    other = MessageBatch("k", *headers(2), {"v": np.ones(2)})
    assert other.count.tolist() == [1, 1] and other.slot.tolist() == [-1, -1]


def test_given_count_and_slot_are_converted_and_checked() -> None:
    batch = MessageBatch("k", *headers(), {"v": np.ones(3)}, count=[1, 2, 3], slot=np.array([[4], [5], [6]]))
    assert batch.count.tolist() == [1, 2, 3] and batch.slot.tolist() == [4, 5, 6]
    with pytest.raises(ValueError, match=r"^MessageBatch\.count must be >= 1 for every row, got 0$"):
        MessageBatch("k", *headers(), {"v": np.ones(3)}, count=[1, 0, 1])
    with pytest.raises(ValueError, match=r"^MessageBatch\.count has 2 rows, sender has 3; give one entry per row$"):
        MessageBatch("k", *headers(), {"v": np.ones(3)}, count=[1, 1])
    with pytest.raises(ValueError, match=r"^MessageBatch\.slot has 4 rows, sender has 3; give one entry per row$"):
        MessageBatch("k", *headers(), {"v": np.ones(3)}, slot=[0, 0, 0, 0])


@pytest.mark.parametrize("name", ["replica", "recipient"])
def test_header_lengths_must_match(name: str) -> None:
    fields = dict(zip(("replica", "sender", "recipient"), headers()))
    fields[name] = fields[name][:2]
    message = f"MessageBatch.{name} has 2 rows, sender has 3; give one entry per row"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MessageBatch("k", payload={"v": np.ones(3)}, **fields)


def test_payload_is_copied_read_only_and_validated() -> None:
    values = np.arange(6.0).reshape(3, 2)
    batch = MessageBatch("k", *headers(), {"v": values, "flag": np.array([True, False, True])})
    values[0, 0] = 99.0
    assert batch.payload["v"][0, 0] == 0.0 and not batch.payload["v"].flags.writeable
    assert batch.payload["flag"].dtype == bool
    for bad in (np.nan, np.inf, -np.inf):
        payload = np.ones((3, 2))
        payload[2, 1] = bad
        with pytest.raises(ValueError, match=r"^MessageBatch\(kind='k'\): payload field 'v' contains NaN or inf"):
            MessageBatch("k", *headers(), {"v": payload})
    with pytest.raises(TypeError, match=r"^MessageBatch\(kind='k'\): payload field 'v' must be numeric"):
        MessageBatch("k", *headers(), {"v": np.array(["a", "b", "c"])})
    with warnings.catch_warnings():  # finite values whose sum overflows are finite: accepted, without a warning
        warnings.simplefilter("error")
        huge = MessageBatch("k", *headers(), {"v": np.full(3, np.finfo(np.float64).max), "h": np.float16([6e4] * 3)})
    assert np.isfinite(huge.payload["v"]).all() and np.isfinite(huge.payload["h"]).all()
    with pytest.raises(TypeError, match=r"^MessageBatch\(kind='k'\): payload must be a mapping"):
        MessageBatch("k", *headers(), [np.ones(3)])  # type: ignore[arg-type]
    message = "MessageBatch(kind='k') field 'v' has shape (2, 2); its first axis must have one entry per row (3)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MessageBatch("k", *headers(), {"v": np.ones((2, 2))})
    with pytest.raises(ValueError, match=r"privacy declares field 'w', which is not in the payload"):
        MessageBatch("k", *headers(), {"v": np.ones(3)}, privacy={"w": Privatized(epsilon=1.0)})


def test_broadcast_payload_copies_its_distinct_entries_once() -> None:
    """One row sent to many recipients stays one row: copied once (not per recipient), checked, and still private."""
    row = np.arange(4.0).reshape(2, 2)
    shared = np.broadcast_to(row, (3, 2, 2))
    column = np.broadcast_to(np.array([[1.0], [2.0], [3.0]]), (3, 5))  # zero stride on the last axis
    batch = MessageBatch("k", *headers(), {"v": shared, "c": column})
    for name, sent in (("v", shared), ("c", column)):
        held = batch.payload[name]
        np.testing.assert_array_equal(held, sent)
        assert held.shape == sent.shape and not held.flags.writeable
        assert 0 in held.strides  # still a broadcast: the distinct entries were copied, not every row
        assert not np.shares_memory(held, sent)
    row[0, 0] = 99.0  # the sender changes its array after sending: the batch keeps what was sent
    assert batch.payload["v"][2, 0, 0] == 0.0
    poisoned = np.ones((2, 2))
    poisoned[1, 1] = np.nan
    with pytest.raises(ValueError, match=r"^MessageBatch\(kind='k'\): payload field 'v' contains NaN or inf"):
        MessageBatch("k", *headers(), {"v": np.broadcast_to(poisoned, (3, 2, 2))})
    with pytest.raises(ValueError, match="its first axis must have one entry per row"):
        MessageBatch("k", *headers(), {"v": np.broadcast_to(row, (2, 2, 2))})


def test_broadcast_row_is_the_view_np_broadcast_to_gives() -> None:
    """The same shape, strides, values and memory, read-only; the other cases go to ``np.broadcast_to`` itself."""
    for row in (
        np.arange(6.0).reshape(2, 3),
        np.arange(6.0).reshape(2, 3).T,
        np.zeros((0, 2)),
        np.int64(7),
        np.ones(()),
    ):
        view, expected = broadcast_row(row, 4), np.broadcast_to(row, (4, *np.shape(row)))
        assert view.shape == expected.shape and view.strides == expected.strides and view.dtype == expected.dtype
        np.testing.assert_array_equal(view, expected)
        assert not view.flags.writeable
        assert isinstance(row, np.generic) or np.shares_memory(view, row) or row.size == 0
    held = MessageBatch("k", *headers(), {"v": np.broadcast_to(np.ones(2), (3, 2))}).payload["v"]
    assert is_frozen(held) and held.strides[0] == 0  # a broadcast of the batch's own immutable copy


def test_batches_are_frozen() -> None:
    batch = MessageBatch("k", *headers(), {"v": np.ones(3)})
    with pytest.raises(AttributeError):
        batch.kind = "other"  # type: ignore[misc]


def test_regrouped_copies_gather_their_payload_when_read() -> None:
    """Copies share the sender's rows until a field is read; sizes, layouts and sub-batches need no gather."""
    values = {"v": np.arange(12.0).reshape(3, 2, 2), "n": np.array([[1], [2], [3]])}
    batch = MessageBatch("k", [0, 0, 0], [0, 1, 2], [NEIGHBOURS] * 3, values)
    rows = np.array([2, 0, 0, 1, 2])
    header = (np.zeros(5, np.int64),) * 3 + (np.full(5, -1),)
    copies = batch.regrouped(rows, *header)
    payload = copies.payload
    assert isinstance(payload, GatheredPayload) and payload.source is batch.payload
    assert (copies.scalars_per_row, copies.bytes_per_row) == (batch.scalars_per_row, batch.bytes_per_row)
    assert copies.layout_key() == batch.layout_key()
    later = copies.take(np.array([True, False, True, True, False])).take(slice(1, 3))
    assert isinstance(later.payload, GatheredPayload) and later.payload.rows.tolist() == [0, 1]
    assert not any(payload.is_gathered(name) or later.payload.is_gathered(name) for name in values)
    for name, source in values.items():
        np.testing.assert_array_equal(later.payload[name], source[[0, 1]])
        np.testing.assert_array_equal(payload[name], source[rows])
        assert payload.is_gathered(name) and payload[name] is payload[name]  # gathered once
        assert is_frozen(payload[name])  # like every validated payload
    with reference_mode():
        plain = batch.regrouped(rows, *header)
        assert type(plain.payload) is FrozenDict and type(copies.take(slice(0, 2)).payload) is FrozenDict
    np.testing.assert_array_equal(plain.payload["v"], values["v"][rows])


def test_with_rows_and_regrouped_follow_the_rows() -> None:
    replica, sender, recipient = np.array([0, 1, 1]), np.array([2, SERVER, 0]), np.array([1, 0, NEIGHBOURS])
    privacy = {"v": Privatized(epsilon=2.0)}
    batch = MessageBatch("k", replica, sender, recipient, {"v": np.arange(6.0).reshape(3, 2)}, count=[1, 2, 3])
    batch = batch.with_payload(batch.payload, privacy)
    rows = np.array([2, 2, 0])
    moved = batch.with_rows(rows, [1, 2, 0], 7)
    assert (moved.kind, moved.privacy) == ("k", privacy)
    assert moved.replica.tolist() == [1, 1, 0] and moved.sender.tolist() == [0, 0, 2]
    assert moved.recipient.tolist() == [1, 2, 0] and moved.recipient.dtype == np.int64
    assert moved.count.tolist() == [3, 3, 1] and moved.slot.tolist() == [7, 7, 7]
    np.testing.assert_array_equal(moved.payload["v"], [[4.0, 5.0], [4.0, 5.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"^with_rows needs one recipient per row$"):
        batch.with_rows(rows, [1, 2], 7)
    header = np.array([5, 6, 7]), np.array([0, 0, 0]), np.array([1, 1, 1]), np.array([-1, -1, -1])
    regrouped = batch.regrouped(rows, *header)
    held = (regrouped.replica, regrouped.sender, regrouped.recipient, regrouped.slot)
    assert all(a is b for a, b in zip(held, header))  # trusted: the given arrays, not copies
    assert regrouped.count.tolist() == [3, 3, 1]
    np.testing.assert_array_equal(regrouped.payload["v"], moved.payload["v"])


def test_a_sender_cannot_change_a_batch_after_building_it() -> None:
    """Count, slot and payload are immutable copies; the payload mapping refuses changes (the learner is untrusted)."""
    count, values = np.ones(2, np.int64), np.array([1.0, 2.0])
    batch = MessageBatch("k", [0, 0], [0, 0], [1, 2], {"v": values}, count=count)
    other = MessageBatch("k", [0], [1], [0], {"v": [3.0]})  # the default count: shared between batches
    count[0], values[0] = -1_000_000, np.nan
    assert batch.count.tolist() == [1, 1] and batch.payload["v"].tolist() == [1.0, 2.0]
    for array in (batch.count, batch.slot, batch.payload["v"], other.count, other.slot):
        holders = [array]
        while isinstance(holders[-1].base, np.ndarray):  # a view leads to its base: neither may become writeable
            holders.append(holders[-1].base)
        for holder in holders:
            with pytest.raises(ValueError, match="WRITEABLE"):
                holder.setflags(write=True)
    with pytest.raises(TypeError, match="frozen"):
        batch.payload["v"] = np.array([np.nan, np.nan])
    with pytest.raises(TypeError, match="frozen"):
        batch.payload.update(w=np.zeros(2))
    message = Message(0, 1, "k", {"v": [1.0]})
    with pytest.raises(TypeError, match="frozen"):
        message.payload["v"] = np.array([np.nan])
    assert is_frozen(message.payload["v"])


def test_copies_and_pickles_of_messages_are_checked_and_immutable_again() -> None:
    """A deep copy or an unpickled batch goes through the constructor: no writeable array slips past the checks."""
    batch = MessageBatch("k", [0], [0], [1], {"v": [[1.0, 2.0]]}, count=[3])
    message = Message(0, 1, "k", {"v": [1.0]}, count=2)
    for copied in (copy.copy(batch), copy.deepcopy(batch), pickle.loads(pickle.dumps(batch))):
        assert copied.count.tolist() == [3] and copied.payload["v"].tolist() == [[1.0, 2.0]]
        assert type(copied.payload) is FrozenDict and is_frozen(copied.payload["v"]) and is_frozen(copied.count)
    for copied in (copy.deepcopy(message), pickle.loads(pickle.dumps(message))):
        assert copied == message and is_frozen(copied.payload["v"])


def test_a_ragged_payload_field_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match=r"payload field 'v' is not a rectangular array"):
        Message(0, 1, "k", {"v": [[1.0], [1.0, 2.0]]})
    with pytest.raises(ValueError, match=r"payload field 'w' is not a rectangular array"):
        MessageBatch("k", [0, 0], [0, 0], [1, 2], {"w": [[1.0], [1.0, 2.0]]})
