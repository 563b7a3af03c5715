"""Typed messages: one :class:`Message` per logical record, and :class:`MessageBatch` for many at once.

Agents acting through the PettingZoo API send :class:`Message` objects, :class:`MessageBatch` objects, or
both. Vectorised populations and the channel work with :class:`MessageBatch`, a struct of arrays holding
every message of one kind sent in a slot across replicas. The two forms convert losslessly
(:func:`batches_from_messages`, :meth:`MessageBatch.messages`, :func:`batches_by_key`), so every path
shares one routing and accounting implementation. Random draws per copy (the channel's drops and jitter, the fault
hooks) follow :func:`canonical_order`, so they do not depend on how a slot's rows were grouped into batches.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from fedbandit_envs.channel.privacy import PrivacySchema, check_schema
from fedbandit_envs.frozen import FrozenDict, frozen, is_frozen
from fedbandit_envs.reference import reference_active
from fedbandit_envs.topology import SERVER
from fedbandit_envs.validation import INT64_MAX, INT64_MIN, MAX_NAME_LENGTH, check_int, check_int_array, check_name

#: Recipient id meaning "every neighbour of the sender" (for the server: every linked agent).
NEIGHBOURS: int = -2

_RECIPIENT_NAMES = {SERVER: "SERVER", NEIGHBOURS: "NEIGHBOURS"}

#: Most payload fields one message may carry (each name at most
#: :data:`~fedbandit_envs.validation.MAX_NAME_LENGTH` characters).
MAX_FIELDS = 64
#: Most axes of one message's field (one row of a batch field), and the longest axis, even of a field with no
#: entries: like names, the shape of an empty field costs nothing.
MAX_ROW_AXES = 8
#: The one row shape of a field with no entries (its shape is metadata the ledger does not charge).
EMPTY_ROW: tuple[int, ...] = (0,)


def _distinct_entries(value: object, where: str, name: object) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """The entries of ``value`` to copy, and the shape to broadcast their copy to (None: use it as it is).

    A broadcast array (a zero stride, e.g. one row of ``np.broadcast_to`` sent to many recipients) is reduced
    to its entries along its other axes, so one row sent to N recipients costs one row, not N.
    """
    if isinstance(value, np.ndarray) and value.size and 0 in value.strides:
        distinct = value[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in value.strides)]
        return distinct, value.shape
    try:
        return np.asarray(value), None
    except ValueError as error:  # ragged nested sequences
        raise ValueError(f"{where}: payload field {name!r} is not a rectangular array of numbers ({error})") from None


def broadcast_row(row: np.ndarray, n: int) -> np.ndarray:
    """``np.broadcast_to(row, (n, *row.shape))``: ``row`` repeated ``n`` times through a zero stride, read-only.

    The same view (shape, strides, values, read-only; it shares ``row``'s memory) for a fraction of the call's cost
    when ``row`` is C-contiguous and not empty; else ``np.broadcast_to`` itself.
    """
    if row.size == 0 or not row.flags.c_contiguous:
        return np.broadcast_to(row, (n, *row.shape))
    view = np.ndarray((n, *row.shape), row.dtype, row, 0, (0, *row.strides))
    view.flags.writeable = False
    return view


def _all_finite(array: np.ndarray) -> bool:
    """Whether every entry of the float ``array`` is finite (a count of the finite entries: cheaper than ``all()``)."""
    return np.count_nonzero(np.isfinite(array)) == array.size


def _as_payload(payload: Mapping[str, object], where: str) -> FrozenDict:
    """Copy a payload into immutable numeric arrays, rejecting non-numeric or non-finite fields.

    The copies share no memory with the sender's arrays and can never be made writeable (:mod:`fedbandit_envs.frozen`),
    and the mapping cannot be changed, so nothing the sender does afterwards reaches the channel; a broadcast
    field stays a (read-only) broadcast of a copy of its distinct entries (:func:`_payload_field`).
    """
    if type(payload) is not dict and not isinstance(payload, Mapping):
        raise TypeError(f"{where}: payload must be a mapping of field name to numeric array, got {payload!r}")
    if len(payload) > MAX_FIELDS:
        raise ValueError(f"{where}: {len(payload)} payload fields; at most {MAX_FIELDS} are allowed")
    out: dict[str, np.ndarray] = {}
    for key, value in payload.items():
        fits = type(key) is str and 0 < len(key) <= MAX_NAME_LENGTH  # the common case, checked fast
        name = key if fits else check_name(f"{where}: a payload field name", key)
        out[name] = _payload_field(value, where, name)
    return FrozenDict(out)


def _payload_field(value: object, where: str, name: str) -> np.ndarray:
    """An immutable copy of one payload field (see :func:`_as_payload`); TypeError or ValueError if it is invalid."""
    if type(value) is np.ndarray and 0 not in value.strides:  # an array, no broadcast axis
        array, shape = value, None
    elif type(value) is np.ndarray and value.strides[0] == 0 and 0 not in value.strides[1:] and value.size:
        array, shape = value[:1], value.shape  # one row broadcast along the rows: its distinct entries are that row
    else:
        array, shape = _distinct_entries(value, where, name)
    kind = array.dtype.kind
    if kind not in "biuf":
        raise TypeError(f"{where}: payload field {name!r} must be numeric (bool, int or float), got {array.dtype}")
    if kind == "f" and not _all_finite(array):
        raise ValueError(f"{where}: payload field {name!r} contains NaN or inf; send finite values only")
    array = frozen(array)
    if shape is None:
        return array
    if array.shape[0] == 1 and array.shape[1:] == shape[1:]:  # one row broadcast along the rows (the common case)
        return broadcast_row(array[0], shape[0])
    return np.broadcast_to(array, shape)


@functools.lru_cache(maxsize=64)
def shared_constant(n: int, value: int) -> np.ndarray:
    """An immutable (n,) int64 array of ``value``, shared by all who ask (default ``count`` and ``slot``, unsent)."""
    return frozen(np.full(n, value, np.int64))


#: Most logical records one message may pack (its ``count``): the ledger's totals stay exact integers.
MAX_COUNT = 2**24
#: Most payload bytes one message (one row of a batch) may carry, counting every entry of a broadcast field: the
#: ledger's byte totals stay exact.
MAX_ROW_BYTES = 2**32

#: The integer fields of a :class:`Message` and their range (ids are checked against the topology on routing).
_MESSAGE_INTS = (
    ("sender", INT64_MIN, INT64_MAX),
    ("recipient", INT64_MIN, INT64_MAX),
    ("slot", -1, INT64_MAX),
    ("count", 1, MAX_COUNT),
)


def _checked_kind(kind: object, owner: str) -> str:
    """``kind`` as an exact ``str`` of at most :data:`~fedbandit_envs.validation.MAX_NAME_LENGTH` characters."""
    if type(kind) is str and 0 < len(kind) <= MAX_NAME_LENGTH:  # the common case, checked fast
        return kind
    return check_name(f"{owner}.kind", kind)


#: One message's fields: each one's name, dtype and row shape.
RowLayout = tuple[tuple[str, np.dtype, tuple[int, ...]], ...]


def _layout_key_of(kind: str, layout: RowLayout, privacy: Mapping | None) -> tuple:
    """The key shared by rows of ``kind`` with the fields ``layout`` and the declaration ``privacy``."""
    return kind, layout, None if privacy is None else tuple(privacy.items())


def _check_row_size(layout: RowLayout, where: str) -> None:
    """ValueError unless one message's fields (names, dtypes and row shapes) are within the limits.

    Each field's row has at most :data:`MAX_ROW_AXES` axes of at most :data:`MAX_ROW_BYTES` entries, a row with no
    entries has shape :data:`EMPTY_ROW`, and the fields hold at most :data:`MAX_ROW_BYTES` bytes together. The
    verdict of a layout is remembered (:func:`_row_size_error`); the reference mode (:mod:`fedbandit_envs.reference`)
    works it out every time.
    """
    error = _row_size_error.__wrapped__(layout) if reference_active() else _row_size_error(layout)
    if error is not None:
        raise ValueError(f"{where}: {error}")


@functools.lru_cache(maxsize=256)
def _row_size_error(layout: RowLayout) -> str | None:
    """Why the fields ``layout`` exceed the limits of one message (see :func:`_check_row_size`), or None."""
    size = 0
    for name, dtype, shape in layout:
        if len(shape) > MAX_ROW_AXES or (shape and max(shape) > MAX_ROW_BYTES):
            return (
                f"a field's row has shape {shape}; at most {MAX_ROW_AXES} axes of at most {MAX_ROW_BYTES} entries each "
                "are allowed"
            )
        if 0 in shape and shape != EMPTY_ROW:
            return (
                f"field {name!r} has rows of shape {shape}, with no entries; an empty field's row must have shape (0,) "
                "(the shape of an empty field is not charged, so it may not vary)"
            )
        size += math.prod(shape) * dtype.itemsize
    if size > MAX_ROW_BYTES:
        return f"one message carries {size} payload bytes; at most {MAX_ROW_BYTES} are allowed"
    return None


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
        object.__setattr__(self, "kind", _checked_kind(self.kind, "Message"))
        ints = self.sender, self.recipient, self.slot, self.count
        plain = type(ints[0]) is type(ints[1]) is type(ints[2]) is type(ints[3]) is int  # the common case, checked fast
        in_range = plain and INT64_MIN <= min(ints[:2]) and max(ints[:3]) <= INT64_MAX and ints[2] >= -1
        if not (in_range and 1 <= ints[3] <= MAX_COUNT):
            for name, minimum, maximum in _MESSAGE_INTS:
                object.__setattr__(self, name, check_int(f"Message.{name}", getattr(self, name), minimum, maximum))
        object.__setattr__(self, "payload", _as_payload(self.payload, f"Message(kind={self.kind!r})"))
        _check_row_size(tuple([(k, v.dtype, v.shape) for k, v in self.payload.items()]), f"Message(kind={self.kind!r})")
        object.__setattr__(self, "privacy", check_schema(self.privacy, self.payload, f"Message(kind={self.kind!r})"))

    @classmethod
    def _trusted(
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

    def __reduce__(self) -> tuple[type[Message], tuple]:
        """Copies and unpickled messages are built by the constructor: checked, and their payload immutable again."""
        fields = (self.sender, self.recipient, self.kind, dict(self.payload), self.slot, self.count, self.privacy)
        return Message, fields

    def __repr__(self) -> str:
        recipient = _RECIPIENT_NAMES.get(self.recipient, self.recipient)
        sender = _RECIPIENT_NAMES.get(self.sender, self.sender)
        fields = ", ".join(f"{k}={v.tolist()!r}" for k, v in self.payload.items())
        return f"Message({sender}->{recipient}, {self.kind!r}, slot={self.slot}, {fields})"


class GatheredPayload(Mapping[str, np.ndarray]):
    """The payload of routed copies: rows ``rows`` of the sender's fields, each gathered when first read.

    A broadcast becomes one copy per recipient, and most flooded copies are duplicates that nobody reads: the
    channel hands its copies this mapping instead of gathering every field for every copy. Reading a field gathers
    it once (``source[name].take(rows, axis=0)``, the values an eager gather gives, read-only); a reader that needs
    only some copies reads them from ``source`` through ``rows`` (see :meth:`is_gathered`). The reference mode
    (:mod:`fedbandit_envs.reference`) gathers every field at once instead.

    Attributes:
        source: field name -> (n, ...) array of the batch the copies come from (never a ``GatheredPayload``).
        rows: (copies,) int64 row of ``source`` under each copy.
    """

    __slots__ = ("_gathered", "rows", "source")

    def __init__(self, source: Mapping[str, np.ndarray], rows: np.ndarray) -> None:
        self.source = source
        self.rows = rows if is_frozen(rows) else frozen(rows)  # sibling copies share it: nobody may rewrite it
        self._gathered: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        field = self._gathered.get(name)
        if field is None:
            # immutable like every validated payload (sibling copies and the env may read it): ``source`` at ``rows``
            field = self._gathered[name] = frozen(self.source[name].take(self.rows, axis=0))
        return field

    def __iter__(self) -> Iterator[str]:
        return iter(self.source)

    def __contains__(self, name: object) -> bool:  # Mapping's default would gather the field to find it
        return name in self.source

    def __len__(self) -> int:
        return len(self.source)

    @classmethod
    def of(cls, payload: Mapping[str, np.ndarray], rows: np.ndarray | slice) -> GatheredPayload:
        """Rows ``rows`` of ``payload``: int64 indices (of a gathered payload, also a boolean mask or a slice)."""
        if type(payload) is not FrozenDict and isinstance(payload, GatheredPayload):  # (FrozenDict: no ABC check)
            return cls(payload.source, payload.rows[rows])
        if isinstance(rows, slice):
            raise TypeError("rows of a payload not yet gathered must be int64 indices, not a slice")
        return cls(payload, rows)

    def is_gathered(self, name: str) -> bool:
        """Whether field ``name`` has been read (and so gathered) already."""
        return name in self._gathered


def _payload_rows(payload: Mapping[str, np.ndarray], rows: np.ndarray | slice) -> Mapping[str, np.ndarray]:
    """The fields of ``payload`` at ``rows`` (indices, a boolean mask or a slice); a gathered payload stays lazy."""
    if isinstance(payload, GatheredPayload) and not reference_active():
        return GatheredPayload.of(payload, rows)
    if isinstance(rows, slice):  # views of immutable arrays
        return FrozenDict({k: v[rows] for k, v in payload.items()})
    return FrozenDict({k: frozen(v[rows]) for k, v in payload.items()})


def row_layout(payload: Mapping[str, np.ndarray]) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
    """Each field's name, dtype and row shape, read without gathering a :class:`GatheredPayload`."""
    arrays = payload.source if isinstance(payload, GatheredPayload) else payload
    return [(k, v.dtype, v.shape[1:]) for k, v in arrays.items()]


_INT64 = np.dtype(np.int64)


def _batch_payload(payload: Mapping[str, ArrayLike], n: int, kind: str) -> tuple[FrozenDict, RowLayout]:
    """The checked immutable payload of a batch of ``n`` rows of ``kind`` (:func:`_as_payload`), and its row layout.

    ValueError unless every field has one entry per row along its first axis and the rows are within the limits of
    one message (:func:`_check_row_size`).
    """
    where = f"MessageBatch(kind={kind!r})"
    fields = _as_payload(payload, where)
    layout = []
    for name, array in fields.items():
        shape = array.shape
        if not shape or shape[0] != n:
            raise ValueError(
                f"{where} field {name!r} has shape {shape}; its first axis must have one entry per row ({n})"
            )
        layout.append((name, array.dtype, shape[1:]))
    row_layout = tuple(layout)
    _check_row_size(row_layout, where)
    return fields, row_layout


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
    converted); payload fields are copied into read-only arrays (a broadcast field, such as one row sent to
    many recipients through ``np.broadcast_to``, is copied as its distinct entries and stays a broadcast). The
    default ``count`` and ``slot`` are shared read-only arrays.
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
        if not (  # 1-D int64 arrays are used as given (the common case: all three, checked at once)
            type(replica) is type(sender) is type(recipient) is np.ndarray
            and replica.dtype == sender.dtype == recipient.dtype == _INT64
            and replica.ndim == sender.ndim == recipient.ndim == 1
        ):
            replica, sender, recipient = (
                array if type(array) is np.ndarray and array.dtype == _INT64 and array.ndim == 1
                else check_int_array(f"MessageBatch.{name}", array, minimum)
                for (name, minimum), array in zip(_HEADER_MINIMA, (replica, sender, recipient))
            )  # fmt: skip
        n = len(sender)
        if count is None:
            counts = shared_constant(n, 1)
        else:
            counts = frozen(check_int_array("MessageBatch.count", count, 1, MAX_COUNT))
        slots = shared_constant(n, -1) if slot is None else frozen(check_int_array("MessageBatch.slot", slot, -1))
        given = count is not None or slot is not None  # (the default count and slot have n rows)
        if len(replica) != n or len(recipient) != n or (given and not len(counts) == len(slots) == n):
            columns = {"replica": replica, "recipient": recipient, "count": counts, "slot": slots}
            name, rows = next((name, len(array)) for name, array in columns.items() if len(array) != n)
            raise ValueError(f"MessageBatch.{name} has {rows} rows, sender has {n}; give one entry per row")
        kind = _checked_kind(kind, "MessageBatch")
        fields, layout = _batch_payload(payload, n, kind)
        if privacy is not None:
            privacy = check_schema(privacy, fields, f"MessageBatch(kind={kind!r})")
        self._hold(kind, replica, sender, recipient, fields, counts, slots, privacy)
        self.__dict__["_layout"] = _layout_key_of(kind, layout, privacy)  # every routed batch needs it

    def __len__(self) -> int:
        return len(self.sender)

    def __reduce__(self) -> tuple[type[MessageBatch], tuple]:
        """Copies and unpickled batches are built by the constructor: checked, and their payload immutable again."""
        headers = (self.replica, self.sender, self.recipient)
        return MessageBatch, (self.kind, *headers, dict(self.payload), self.count, self.slot, self.privacy)

    @property
    def scalars_per_row(self) -> int:
        """Numeric entries carried by one row (the same for every row)."""
        return sum(math.prod(shape) for _, _, shape in row_layout(self.payload))

    @property
    def bytes_per_row(self) -> int:
        """Payload bytes of one row (the same for every row)."""
        return sum(math.prod(shape) * dtype.itemsize for _, dtype, shape in row_layout(self.payload))

    def header_key(self) -> tuple[bytes, bytes, bytes]:
        """The replica, sender and recipient arrays as bytes: two batches have equal headers iff their keys are equal.

        (The arrays are 1-D int64, so equal bytes mean equal lengths and equal values.)
        """
        return self.replica.tobytes(), self.sender.tobytes(), self.recipient.tobytes()

    @classmethod
    def _trusted(cls, kind, replica, sender, recipient, payload, count, slot, privacy) -> MessageBatch:
        """Build a batch from arrays already validated by another batch (no copies, no checks)."""
        batch = object.__new__(cls)
        batch._hold(kind, replica, sender, recipient, payload, count, slot, privacy)
        return batch

    def _hold(self, kind, replica, sender, recipient, payload, count, slot, privacy) -> None:
        """Set the validated fields: the batch is frozen, so they are set once, here."""
        self.__dict__.update(
            kind=kind,
            replica=replica,
            sender=sender,
            recipient=recipient,
            payload=payload,
            count=count,
            slot=slot,
            privacy=privacy,
        )

    def _derived(self, **columns: Any) -> MessageBatch:
        """A batch of this one's kind, layout (and layout key, if computed) and privacy with ``columns`` replaced.

        Trusted: the new columns are neither checked nor copied.
        """
        batch = object.__new__(MessageBatch)
        batch.__dict__.update(self.__dict__, **columns)
        return batch

    def take(self, rows: np.ndarray | slice) -> MessageBatch:
        """The sub-batch of the given row indices, boolean mask, or slice (a slice shares the arrays: no copy)."""
        return self._derived(
            replica=self.replica[rows],
            sender=self.sender[rows],
            recipient=self.recipient[rows],
            payload=_payload_rows(self.payload, rows),
            count=self.count[rows],
            slot=self.slot[rows],
        )

    def split_rows(self) -> list[MessageBatch]:
        """One sub-batch per row, in order (views of this batch's arrays, no copy)."""
        n, names = len(self), list(self.payload)
        layout = self.layout_key()
        columns = [a.reshape(n, 1) for a in (self.replica, self.sender, self.recipient, self.count, self.slot)]
        fields = [self.payload[name].reshape(n, 1, *self.payload[name].shape[1:]) for name in names]
        batches = []
        for replica, sender, recipient, count, slot, *values in zip(*columns, *fields):
            batch = object.__new__(MessageBatch)
            batch.__dict__.update(
                kind=self.kind,
                replica=replica,
                sender=sender,
                recipient=recipient,
                payload=FrozenDict(zip(names, values)),
                count=count,
                slot=slot,
                privacy=self.privacy,
                _layout=layout,
            )
            batches.append(batch)
        return batches

    def with_rows(self, rows: np.ndarray, recipient: np.ndarray, slot: int) -> MessageBatch:
        """Rows ``rows`` (indices) re-addressed to ``recipient`` and stamped with the send ``slot``."""
        recipient = np.asarray(recipient, np.int64)
        if len(recipient) != len(rows):
            raise ValueError("with_rows needs one recipient per row")
        return self.regrouped(
            rows, self.replica.take(rows), self.sender.take(rows), recipient, np.full(len(rows), slot, np.int64)
        )

    def regrouped(
        self,
        rows: np.ndarray | None,
        replica: np.ndarray,
        sender: np.ndarray,
        recipient: np.ndarray,
        slot: np.ndarray,
    ) -> MessageBatch:
        """Rows ``rows`` (indices; payload and count follow them) under the given header and ``slot`` arrays.

        ``rows=None`` keeps every row in order and shares the payload (no copy). The arrays hold one int64 entry per
        row and are trusted: neither checked nor copied. The counts of the result are immutable copies (the shared
        default ones excepted): recipients read them and the ledger tallies them later.
        """
        if rows is None:
            payload, count = self.payload, self.count
            if count is not shared_constant(len(count), 1):
                count = frozen(count)
        else:
            payload = (
                FrozenDict({k: v.take(rows, axis=0) for k, v in self.payload.items()})
                if reference_active()
                else GatheredPayload.of(self.payload, rows)
            )
            if self.count is shared_constant(len(self.count), 1):  # the default: shared ones again
                count = shared_constant(len(rows), 1)
            else:
                count = frozen(self.count.take(rows))
        return self._derived(
            replica=replica, sender=sender, recipient=recipient, payload=payload, count=count, slot=slot
        )

    def stamped(self, slot: int) -> MessageBatch:
        """The same rows (payload shared, not copied) stamped with the send ``slot``."""
        slots = np.empty(len(self), np.int64)
        slots.fill(slot)  # np.full, without its Python-level overhead
        return self._derived(slot=slots)

    def with_payload(self, payload: Mapping[str, np.ndarray], privacy: PrivacySchema | None) -> MessageBatch:
        """The same rows with a new payload and privacy declaration (e.g. after a DP wrapper noised it)."""
        return MessageBatch(
            self.kind, self.replica, self.sender, self.recipient, payload, self.count, self.slot, privacy
        )

    def message(self, row: int) -> Message:
        """Row ``row`` as a :class:`Message` (replica index dropped)."""
        return Message._trusted(
            sender=int(self.sender[row]),
            recipient=int(self.recipient[row]),
            kind=self.kind,
            payload=FrozenDict({k: v[row] for k, v in self.payload.items()}),
            slot=int(self.slot[row]),
            count=int(self.count[row]),
            privacy=self.privacy,
        )

    def messages(self) -> list[Message]:
        """The rows as :class:`Message` objects (replica index dropped)."""
        return [self.message(r) for r in range(len(self))]

    def layout_key(self) -> tuple:
        """What rows must share to be one batch: the kind, each field's name, dtype and row shape, the privacy.

        Computed once per batch, by the constructor or when first asked (the batches derived from it share it).
        """
        key = self.__dict__.get("_layout")
        if key is None:
            key = self.__dict__["_layout"] = _layout_key_of(self.kind, tuple(row_layout(self.payload)), self.privacy)
        return key


@overload
def as_checked(item: MessageBatch) -> MessageBatch: ...
@overload
def as_checked(item: Message) -> Message: ...
def as_checked(item: Message | MessageBatch) -> Message | MessageBatch:
    """``item`` if it is exactly a :class:`Message` or :class:`MessageBatch`, else the base class's checked copy.

    The constructors check and copy (:class:`Message`, :class:`MessageBatch`), and the environment reads a message
    through the class's own methods. A subclass may change both (a constructor that checks nothing, a length, a
    layout or a payload of its own), so the environment routes, costs and delivers a copy built by the base class's
    constructor from one read of each field instead. TypeError when the fields cannot be read.
    """
    if type(item) is MessageBatch or type(item) is Message:
        return item
    try:
        if isinstance(item, MessageBatch):
            headers = item.replica, item.sender, item.recipient
            return MessageBatch(item.kind, *headers, dict(item.payload), item.count, item.slot, item.privacy)
        if isinstance(item, Message):
            fields = item.sender, item.recipient, item.kind, dict(item.payload), item.slot, item.count
            return Message(*fields, item.privacy)
    except AttributeError as error:
        raise TypeError(f"a {type(item).__name__} message lacks a field its base class has: {error}") from None
    raise TypeError(f"expected a Message or MessageBatch, got {type(item).__name__}")


def _layout_key(item: Message | MessageBatch) -> tuple:
    """The :meth:`MessageBatch.layout_key` of the batch ``item`` is, or would be a row of."""
    if isinstance(item, MessageBatch):
        return item.layout_key()
    return _layout_key_of(item.kind, tuple([(k, v.dtype, v.shape) for k, v in item.payload.items()]), item.privacy)


def batches_from_messages(messages: Iterable[Message | MessageBatch], replica: int = 0) -> list[MessageBatch]:
    """Group messages and batches by kind and payload layout into batches of ``replica``, keeping their order.

    Items of one layout become one batch whose rows follow the items (a batch contributes its rows in order).
    The items were validated when they were built, so nothing is checked again; a lone batch already of
    ``replica`` is returned as it is (no copy).
    """
    groups: dict[tuple, list[Message | MessageBatch]] = {}
    for item in messages:
        groups.setdefault(_layout_key(item), []).append(item)
    return [_merged(group, key, replica) for key, group in groups.items()]


def _merged(group: Sequence[Message | MessageBatch], key: tuple, replica: int) -> MessageBatch:
    """One batch of ``replica`` holding the rows of ``group`` (items of one layout ``key``) in order."""
    kind, layout, privacy = key
    names = [name for name, _, _ in layout]
    first = group[0]
    if isinstance(first, MessageBatch) and len(group) == 1 and (first.replica == replica).all():
        return first
    if all(isinstance(item, Message) for item in group):
        n = len(group)
        sender = np.array([m.sender for m in group], np.int64)
        recipient = np.array([m.recipient for m in group], np.int64)
        counts = np.array([m.count for m in group], np.int64)
        slots = np.array([m.slot for m in group], np.int64)
        payload = FrozenDict({name: frozen(np.stack([m.payload[name] for m in group])) for name in names})
    else:
        rows = [item if isinstance(item, MessageBatch) else _one_row(item) for item in group]
        sender = np.concatenate([b.sender for b in rows])
        recipient = np.concatenate([b.recipient for b in rows])
        n = len(sender)
        counts = np.concatenate([b.count for b in rows])
        slots = np.concatenate([b.slot for b in rows])
        payload = FrozenDict({name: frozen(np.concatenate([b.payload[name] for b in rows])) for name in names})
    replicas = np.empty(n, np.int64)
    replicas.fill(replica)
    return MessageBatch._trusted(
        kind, replicas, sender, recipient, payload, counts, slots, None if privacy is None else FrozenDict(privacy)
    )


def _one_row(message: Message) -> MessageBatch:
    """``message`` as a one-row batch of replica 0 (its validated payload shared, not checked again)."""
    return MessageBatch._trusted(
        message.kind,
        np.zeros(1, np.int64),
        np.array([message.sender], np.int64),
        np.array([message.recipient], np.int64),
        FrozenDict({k: v[None] for k, v in message.payload.items()}),
        np.array([message.count], np.int64),
        np.array([message.slot], np.int64),
        message.privacy,
    )


def batches_by_key(batches: Iterable[MessageBatch], column: str) -> dict[int, list[MessageBatch]]:
    """The rows of ``batches`` grouped by their ``column`` value (``"sender"`` or ``"recipient"``), as sub-batches.

    Keys ascend; each key's list follows the batches' order and each sub-batch keeps its rows' order.
    Sub-batches of a batch whose column is already sorted share its arrays (slices, no copy).
    """
    grouped: dict[int, list[MessageBatch]] = {}
    for batch in batches:
        keys = getattr(batch, column)
        if len(keys) == 0:
            continue
        order, bounds = _runs(keys)
        if order is not None:
            batch, keys = batch.take(order), keys[order]
        if len(bounds) == len(keys) + 1:  # one row per key: row views, without slicing
            for value, row in zip(keys.tolist(), batch.split_rows()):
                grouped.setdefault(value, []).append(row)
            continue
        for value, start, stop in zip(keys[bounds[:-1]].tolist(), bounds[:-1], bounds[1:]):
            grouped.setdefault(value, []).append(batch.take(slice(start, stop)))
    return dict(sorted(grouped.items()))


def _runs(keys: np.ndarray) -> tuple[np.ndarray | None, list[int]]:
    """The stable order sorting the non-empty ``keys`` (None if they ascend already), and the bounds of their runs.

    The runs are those of equal keys in that order: ``bounds[j]:bounds[j + 1]`` is the ``j``-th.
    """
    order = None
    if len(keys) > 1 and (keys[1:] < keys[:-1]).any():
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
    return order, [0, *(np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist(), len(keys)]


def copies_by_recipient(batch: MessageBatch, replica: int) -> list[tuple[int, MessageBatch]]:
    """The rows of ``replica`` in ``batch`` as one batch of replica 0 per recipient: (recipient, batch), ascending.

    What the environment of one agent (it runs one replica) hands that agent. A recipient's batch keeps its rows'
    order and holds immutable copies of those rows alone: no array reachable from it (through ``.base``, or its
    payload's attributes, as a view of the routed batch or a gathered payload's ``source`` would lead) holds a row
    delivered to another recipient or replica. Each column is gathered once for all recipients (see
    :func:`_own_rows`).
    """
    rows = np.flatnonzero(batch.replica == replica)
    if not len(rows):
        return []
    keys = batch.recipient[rows]
    order, bounds = _runs(keys)
    if order is not None:
        rows, keys = rows[order], keys[order]
    payload = batch.payload
    source, at = (payload.source, payload.rows[rows]) if type(payload) is GatheredPayload else (payload, rows)
    headers = np.zeros(len(rows), np.int64), batch.sender[rows], keys, batch.count[rows], batch.slot[rows]
    replicas, senders, recipients, counts, slots = (_own_rows(column, bounds) for column in headers)
    fields = {name: _own_rows(field.take(at, axis=0), bounds) for name, field in source.items()}
    batch.layout_key()  # computed once, for every copy
    return [
        (
            key,
            batch._derived(
                replica=replicas[j],
                sender=senders[j],
                recipient=recipients[j],
                payload=FrozenDict({name: field[j] for name, field in fields.items()}),
                count=counts[j],
                slot=slots[j],
            ),
        )
        for j, key in enumerate(keys[bounds[:-1]].tolist())
    ]


def _own_rows(array: np.ndarray, bounds: Sequence[int]) -> list[np.ndarray]:
    """``array[start:stop]`` for consecutive ``bounds``, each an immutable array over bytes of those rows alone.

    A column holding one value throughout tells no recipient anything of another's rows: recipients with as many rows
    share one immutable array of it (the common count, slot or replica; one array fewer to build per recipient).
    """
    sizes = [stop - start for start, stop in zip(bounds[:-1], bounds[1:])]
    if array.ndim == 1 and array[0] == array[-1] and np.count_nonzero(array != array[0]) == 0:
        shared = {size: frozen(array[:size]) for size in set(sizes)}
        return [shared[size] for size in sizes]
    data, shape, dtype = array.tobytes(), array.shape[1:], array.dtype
    row = dtype.itemsize * math.prod(shape)
    return [
        np.ndarray((size, *shape), dtype, data[start * row : (start + size) * row])
        for start, size in zip(bounds, sizes)
    ]


def canonical_order(batches: Sequence[MessageBatch]) -> tuple[np.ndarray, np.ndarray]:
    """Replica of each row of the concatenated batches, and their order by (replica, sender, recipient, kind, count).

    Kinds sort by name. The order does not depend on how the rows were grouped into batches, in which order the
    batches come or in which order the senders' rows are listed: rows tied on all five keys keep their relative
    order, which is a sender's own message order on every runner path (the PettingZoo path regroups a slot's rows
    by sender and payload layout, keeping each sender's order).
    """
    kinds = sorted({b.kind for b in batches})
    names = ("replica", "sender", "recipient", "count")
    if len(batches) == 1:
        replica, sender, recipient, count = (getattr(batches[0], name) for name in names)
    else:
        replica, sender, recipient, count = (np.concatenate([getattr(b, name) for b in batches]) for name in names)
    columns: tuple[np.ndarray, ...] = (replica, sender, recipient, count)
    if len(kinds) > 1:  # (one kind ties every row on it)
        kind = np.concatenate([np.full(len(b), kinds.index(b.kind)) for b in batches])
        columns = (replica, sender, recipient, kind, count)
    key = _mixed_radix(columns)
    if key is None:
        return replica, np.lexsort(columns[::-1])
    if len(key) < 2 or (key[1:] >= key[:-1]).all():  # already in order (one sorted batch per kind, say)
        return replica, np.arange(len(key))
    return replica, np.argsort(key, kind="stable")


def _mixed_radix(columns: Sequence[np.ndarray]) -> np.ndarray | None:
    """One int64 key per row ordering the rows as the ``columns`` do lexicographically (the first one first).

    Each column is a digit of base its range; None when the key would not fit in an int64.
    """
    key = np.zeros(len(columns[0]), np.int64)
    if not len(key):
        return key
    span = 1
    for column in columns:
        low, high = int(column.min()), int(column.max())
        span *= high - low + 1
        if span > INT64_MAX:
            return None
        key = key * (high - low + 1) + (column - low)
    return key


def draws_in_canonical_order(
    batches: Sequence[MessageBatch],
    rngs: Sequence[np.random.Generator],
    draw: Callable[[np.random.Generator, int], np.ndarray],
    dtype: DTypeLike = float,
) -> list[np.ndarray]:
    """One value per row of every batch, split per batch: ``draw(rngs[b], n)`` gives replica ``b``'s ``n`` rows.

    Replica ``b`` draws once, for all its rows of all the batches, and hands the values out in
    :func:`canonical_order`; so the values a copy gets do not depend on how the rows were batched.
    """
    if not batches:
        return []
    replica, order = canonical_order(batches)
    values: np.ndarray = np.zeros(len(replica), dtype)
    ordered = replica[order]
    bounds = [0, *(np.flatnonzero(ordered[1:] != ordered[:-1]) + 1).tolist(), len(ordered)]
    for start, stop in zip(bounds[:-1], bounds[1:]):  # (the replicas ascend along the order)
        if stop > start:
            values[order[start:stop]] = draw(rngs[int(ordered[start])], stop - start)
    return [values] if len(batches) == 1 else np.split(values, np.cumsum([len(b) for b in batches])[:-1])
