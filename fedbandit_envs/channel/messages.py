"""Typed messages: one :class:`Message` per logical record, and :class:`MessageBatch` for many at once.

Agents acting through the PettingZoo API send :class:`Message` objects. Vectorised populations and the
channel work with :class:`MessageBatch`, a struct of arrays holding every message of one kind sent in a
slot across replicas. The two forms convert losslessly, so both paths share one routing and
accounting implementation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from fedbandit_envs.channel.privacy import PrivacySchema, check_schema
from fedbandit_envs.topology import SERVER
from fedbandit_envs.validation import INT64_MAX, INT64_MIN, check_int, check_int_array

#: Recipient id meaning "every neighbour of the sender" (for the server: every linked agent).
NEIGHBOURS: int = -2

_RECIPIENT_NAMES = {SERVER: "SERVER", NEIGHBOURS: "NEIGHBOURS"}


def _as_payload(payload: Mapping[str, object], where: str) -> dict[str, np.ndarray]:
    """Copy a payload into read-only numeric arrays, rejecting non-numeric or non-finite fields."""
    if not isinstance(payload, Mapping):
        raise TypeError(f"{where}: payload must be a mapping of field name to numeric array, got {payload!r}")
    out: dict[str, np.ndarray] = {}
    for name, value in payload.items():
        array = np.array(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{where}: payload field {name!r} must be numeric (bool, int or float), got {array.dtype}")
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise ValueError(f"{where}: payload field {name!r} contains NaN or inf; send finite values only")
        array.setflags(write=False)
        out[str(name)] = array
    return out


@functools.lru_cache(maxsize=64)
def _constant(n: int, value: int) -> np.ndarray:
    """A read-only (n,) int64 array of ``value``, shared by the batches that take the default ``count`` or ``slot``."""
    array = np.full(n, value, np.int64)
    array.setflags(write=False)
    return array


#: The integer fields of a :class:`Message` and their smallest value (ids are checked against the topology on routing).
_MESSAGE_INTS = (("sender", INT64_MIN), ("recipient", INT64_MIN), ("slot", -1), ("count", 1))


@dataclass(frozen=True, eq=False)
class Message:
    """One logical message from ``sender`` to ``recipient``.

    Attributes:
        sender: index of the sending agent, or ``SERVER``. The environment checks it is the acting agent.
        recipient: an agent index, ``SERVER``, or ``NEIGHBOURS`` (a copy to every neighbour).
        kind: a short label such as ``"sample"`` or ``"theta"``; the ledger keeps totals per kind.
        payload: numeric fields (converted to read-only numpy arrays; NaN and inf are rejected).
        slot: the slot in which the message was sent; set by the channel on delivery (-1 before).
        count: how many logical records this message packs (batching of flooded records); the ledger
            counts ``count`` logical messages for it.
        privacy: optional declaration per payload field (see :mod:`fedbandit_envs.channel.privacy`);
            DP wrappers noise ``Sensitive`` fields and refuse undeclared ones in strict mode.
    """

    sender: int
    recipient: int
    kind: str
    payload: Mapping[str, np.ndarray] = field(default_factory=dict)
    slot: int = -1
    count: int = 1
    privacy: PrivacySchema | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise TypeError(f"Message.kind must be a non-empty string, got {self.kind!r}")
        ints = self.sender, self.recipient, self.slot, self.count
        plain = type(ints[0]) is type(ints[1]) is type(ints[2]) is type(ints[3]) is int  # the common case, checked fast
        if not (plain and INT64_MIN <= min(ints[:2]) and max(ints) <= INT64_MAX and ints[2] >= -1 and ints[3] >= 1):
            for name, minimum in _MESSAGE_INTS:
                object.__setattr__(self, name, check_int(f"Message.{name}", getattr(self, name), minimum))
        object.__setattr__(self, "payload", _as_payload(self.payload, f"Message(kind={self.kind!r})"))
        check_schema(self.privacy, self.payload, f"Message(kind={self.kind!r})")

    @classmethod
    def trusted(
        cls,
        sender: int,
        recipient: int,
        kind: str,
        payload: dict[str, np.ndarray],
        slot: int,
        count: int,
        privacy: PrivacySchema | None,
    ) -> Message:
        """Build a message from fields the channel already validated (no copy, no checks)."""
        message = object.__new__(cls)
        for name, value in (
            ("sender", sender),
            ("recipient", recipient),
            ("kind", kind),
            ("payload", payload),
            ("slot", slot),
            ("count", count),
            ("privacy", privacy),
        ):
            object.__setattr__(message, name, value)
        return message

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (
            (self.sender, self.recipient, self.kind, self.slot, self.count, self.privacy)
            == (other.sender, other.recipient, other.kind, other.slot, other.count, other.privacy)
            and self.payload.keys() == other.payload.keys()
            and all(
                self.payload[k].dtype == other.payload[k].dtype and np.array_equal(self.payload[k], other.payload[k])
                for k in self.payload
            )
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        recipient = _RECIPIENT_NAMES.get(self.recipient, self.recipient)
        sender = _RECIPIENT_NAMES.get(self.sender, self.sender)
        fields = ", ".join(f"{k}={v.tolist()!r}" for k, v in self.payload.items())
        return f"Message({sender}->{recipient}, {self.kind!r}, slot={self.slot}, {fields})"


#: The header arrays of a :class:`MessageBatch` and their smallest entry (checked unless given as 1-D int64; ids are
#: checked against the topology on routing).
_HEADER_MINIMA = (("replica", 0), ("sender", None), ("recipient", None))


@dataclass(frozen=True, eq=False, init=False)
class MessageBatch:
    """Messages of one kind and one payload layout, as parallel arrays (one row per message).

    Attributes:
        kind: the label shared by every row.
        replica: (n,) replica index of each row (all 0 in a single environment).
        sender: (n,) sender index (``SERVER`` for the coordinator).
        recipient: (n,) agent index, ``SERVER`` or ``NEIGHBOURS``.
        payload: field name -> array of shape (n, ...); every row has the same field shapes.
        count: (n,) logical records per row (1 unless records are packed).
        slot: (n,) slot in which each row was sent (-1 until the channel stamps it).
        privacy: optional declaration per payload field, shared by every row.

    1-D int64 arrays given for ``replica``, ``sender`` and ``recipient`` are held as given (other input is
    converted); payload fields are copied into read-only arrays. The default ``count`` and ``slot`` are shared
    read-only arrays.
    """

    kind: str
    replica: np.ndarray
    sender: np.ndarray
    recipient: np.ndarray
    payload: Mapping[str, np.ndarray]
    count: np.ndarray  # __init__ fills in the defaults (shared read-only arrays)
    slot: np.ndarray
    privacy: PrivacySchema | None = None

    def __init__(
        self,
        kind: str,
        replica: ArrayLike,
        sender: ArrayLike,
        recipient: ArrayLike,
        payload: Mapping[str, ArrayLike],
        count: ArrayLike | None = None,
        slot: ArrayLike | None = None,
        privacy: PrivacySchema | None = None,
    ) -> None:
        headers: dict[str, np.ndarray] = {}
        for (name, minimum), array in zip(_HEADER_MINIMA, (replica, sender, recipient)):
            if type(array) is np.ndarray and array.dtype == np.int64 and array.ndim == 1:
                headers[name] = array  # used as given
            else:
                headers[name] = check_int_array(f"MessageBatch.{name}", array, minimum)
        n = len(headers["sender"])
        counts = _constant(n, 1) if count is None else check_int_array("MessageBatch.count", count, 1)
        slots = _constant(n, -1) if slot is None else check_int_array("MessageBatch.slot", slot, -1)
        for name, array in (*headers.items(), ("count", counts), ("slot", slots)):
            if len(array) != n:
                raise ValueError(f"MessageBatch.{name} has {len(array)} rows, sender has {n}; give one entry per row")
        where = f"MessageBatch(kind={kind!r})"
        fields = _as_payload(payload, where)
        for name, array in fields.items():
            if array.ndim == 0 or array.shape[0] != n:
                raise ValueError(
                    f"{where} field {name!r} has shape {array.shape}; its first axis must have one entry per row ({n})"
                )
        check_schema(privacy, fields, where)
        # frozen: the validated values are set once, here
        self.__dict__.update(kind=kind, payload=fields, count=counts, slot=slots, privacy=privacy, **headers)

    def __len__(self) -> int:
        return len(self.sender)

    @property
    def scalars_per_row(self) -> int:
        """Numeric entries carried by one row (the same for every row)."""
        return sum(math.prod(a.shape[1:]) for a in self.payload.values())

    @property
    def bytes_per_row(self) -> int:
        """Payload bytes of one row (the same for every row)."""
        return sum(math.prod(a.shape[1:]) * a.itemsize for a in self.payload.values())

    def header_key(self) -> tuple[bytes, bytes, bytes]:
        """The replica, sender and recipient arrays as bytes: two batches have equal headers iff their keys are equal.

        (The arrays are 1-D int64, so equal bytes mean equal lengths and equal values.)
        """
        return self.replica.tobytes(), self.sender.tobytes(), self.recipient.tobytes()

    @classmethod
    def _trusted(cls, kind, replica, sender, recipient, payload, count, slot, privacy) -> MessageBatch:
        """Build a batch from arrays already validated by another batch (no copies, no checks)."""
        batch = object.__new__(cls)
        batch.__dict__.update(
            kind=kind,
            replica=replica,
            sender=sender,
            recipient=recipient,
            payload=payload,
            count=count,
            slot=slot,
            privacy=privacy,
        )
        return batch

    def take(self, rows: np.ndarray) -> MessageBatch:
        """The sub-batch of the given row indices (or boolean mask)."""
        return MessageBatch._trusted(
            self.kind,
            self.replica[rows],
            self.sender[rows],
            self.recipient[rows],
            {k: v[rows] for k, v in self.payload.items()},
            self.count[rows],
            self.slot[rows],
            self.privacy,
        )

    def with_rows(self, rows: np.ndarray, recipient: np.ndarray, slot: int) -> MessageBatch:
        """Rows ``rows`` (indices) re-addressed to ``recipient`` and stamped with the send ``slot``."""
        recipient = np.asarray(recipient, np.int64)
        if len(recipient) != len(rows):
            raise ValueError("with_rows needs one recipient per row")
        return self.regrouped(
            rows, self.replica.take(rows), self.sender.take(rows), recipient, np.full(len(rows), slot, np.int64)
        )

    def regrouped(
        self, rows: np.ndarray, replica: np.ndarray, sender: np.ndarray, recipient: np.ndarray, slot: np.ndarray
    ) -> MessageBatch:
        """Rows ``rows`` (indices; payload and count follow them) under the given header and ``slot`` arrays.

        The arrays hold one int64 entry per row and are trusted: neither checked nor copied.
        """
        return MessageBatch._trusted(
            self.kind,
            replica,
            sender,
            recipient,
            {k: v.take(rows, axis=0) for k, v in self.payload.items()},
            self.count.take(rows),
            slot,
            self.privacy,
        )

    def stamped(self, slot: int) -> MessageBatch:
        """The same rows (payload shared, not copied) stamped with the send ``slot``."""
        slots = np.empty(len(self), np.int64)
        slots.fill(slot)  # np.full, without its Python-level overhead
        return MessageBatch._trusted(
            self.kind, self.replica, self.sender, self.recipient, self.payload, self.count, slots, self.privacy
        )

    def with_payload(self, payload: Mapping[str, np.ndarray], privacy: PrivacySchema | None) -> MessageBatch:
        """The same rows with a new payload and privacy declaration (e.g. after a DP wrapper noised it)."""
        return MessageBatch(
            self.kind, self.replica, self.sender, self.recipient, payload, self.count, self.slot, privacy
        )

    def messages(self) -> list[Message]:
        """The rows as :class:`Message` objects (replica index dropped)."""
        return [
            Message.trusted(
                sender=int(self.sender[r]),
                recipient=int(self.recipient[r]),
                kind=self.kind,
                payload={k: v[r] for k, v in self.payload.items()},
                slot=int(self.slot[r]),
                count=int(self.count[r]),
                privacy=self.privacy,
            )
            for r in range(len(self))
        ]


def _layout_key(message: Message) -> tuple:
    privacy = None if message.privacy is None else tuple(message.privacy.items())
    return (message.kind, tuple((k, v.dtype.str, v.shape) for k, v in message.payload.items()), privacy)


def batches_from_messages(messages: Iterable[Message], replica: int = 0) -> list[MessageBatch]:
    """Group messages by kind and payload layout into batches, keeping their order within a group."""
    groups: dict[tuple, list[Message]] = {}
    for message in messages:
        groups.setdefault(_layout_key(message), []).append(message)
    batches = []
    for (kind, layout, privacy), group in groups.items():
        batches.append(
            MessageBatch(
                kind=kind,
                replica=np.full(len(group), replica, np.int64),
                sender=np.array([m.sender for m in group], np.int64),
                recipient=np.array([m.recipient for m in group], np.int64),
                payload={name: np.stack([m.payload[name] for m in group]) for name, _, _ in layout},
                count=np.array([m.count for m in group], np.int64),
                slot=np.array([m.slot for m in group], np.int64),
                privacy=None if privacy is None else dict(privacy),
            )
        )
    return batches
