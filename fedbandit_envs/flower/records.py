"""Message batches on the wire: :class:`~fedbandit_envs.channel.MessageBatch` lists as Flower records.

A list of batches travels inside a Flower ``RecordDict`` as two records per batch: an ``ArrayRecord``
with the header arrays (``replica``, ``sender``, ``recipient``, ``count``, ``slot``) and every payload
field (prefixed ``p:``), and a ``ConfigRecord`` with the kind and the privacy declaration of each field
(as JSON). Arrays cross as Flower ``Array`` objects (numpy's own serialisation), so values, dtypes and
shapes come back bit for bit.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedbandit_envs.channel import MessageBatch
from fedbandit_envs.channel.privacy import Privatized, Public, Sensitive

__all__ = ["batches_from_records", "batches_to_records", "merge_batches", "rows_of"]

_HEADERS = ("replica", "sender", "recipient", "count", "slot")
_PAYLOAD = "p:"
_DECLARATIONS: dict[str, type] = {"Public": Public, "Privatized": Privatized, "Sensitive": Sensitive}


def _privacy_to_json(privacy: Any) -> str:
    """A privacy schema (field -> declaration, or None) as JSON text."""
    if privacy is None:
        return "null"
    return json.dumps(
        {name: {"type": type(d).__name__, **dataclasses.asdict(d)} for name, d in privacy.items()}, sort_keys=True
    )


def _privacy_from_json(text: str) -> dict[str, Any] | None:
    """The privacy schema written by :func:`_privacy_to_json`."""
    raw = json.loads(text)
    if raw is None:
        return None
    schema = {}
    for name, fields in raw.items():
        cls = _DECLARATIONS[fields.pop("type")]
        if fields.get("bounds") is not None:
            fields["bounds"] = tuple(fields["bounds"])
        schema[name] = cls(**fields)
    return schema


def batches_to_records(batches: Sequence[MessageBatch], prefix: str, content: RecordDict) -> None:
    """Store ``batches`` in ``content`` under ``prefix`` (records ``{prefix}{n}`` and ``{prefix}{n}.meta``)."""
    for n, batch in enumerate(batches):
        arrays = {name: Array(np.ascontiguousarray(getattr(batch, name))) for name in _HEADERS}
        arrays.update({_PAYLOAD + k: Array(np.ascontiguousarray(v)) for k, v in batch.payload.items()})
        content[f"{prefix}{n}"] = ArrayRecord(arrays)
        content[f"{prefix}{n}.meta"] = ConfigRecord({"kind": batch.kind, "privacy": _privacy_to_json(batch.privacy)})


def batches_from_records(content: RecordDict, prefix: str) -> list[MessageBatch]:
    """The batches :func:`batches_to_records` stored in ``content`` under ``prefix``, in order."""
    batches = []
    n = 0
    while f"{prefix}{n}" in content:
        arrays = {name: array.numpy() for name, array in content.array_records[f"{prefix}{n}"].items()}
        meta = content.config_records[f"{prefix}{n}.meta"]
        payload = {name[len(_PAYLOAD) :]: value for name, value in arrays.items() if name.startswith(_PAYLOAD)}
        batches.append(
            MessageBatch(
                str(meta["kind"]),
                arrays["replica"],
                arrays["sender"],
                arrays["recipient"],
                payload,
                count=arrays["count"],
                slot=arrays["slot"],
                privacy=_privacy_from_json(str(meta["privacy"])),
            )
        )
        n += 1
    return batches


def rows_of(batches: Sequence[MessageBatch], field: str, agent: int) -> list[MessageBatch]:
    """The rows of ``batches`` whose ``field`` (``"sender"`` or ``"recipient"``) is ``agent``; empty batches dropped."""
    out = []
    for batch in batches:
        mine = getattr(batch, field) == agent
        if mine.all():
            out.append(batch)
        elif mine.any():
            out.append(batch.take(mine))
    return out


def _layout(batch: MessageBatch) -> tuple:
    """What batches must share to be concatenated: kind, payload fields (dtype, row shape) and privacy."""
    fields = tuple((k, v.dtype.str, v.shape[1:]) for k, v in batch.payload.items())
    return batch.kind, fields, _privacy_to_json(batch.privacy)


def merge_batches(per_agent: Sequence[Sequence[MessageBatch]]) -> list[MessageBatch]:
    """One list of batches from every agent's own rows: rows of one layout concatenated in agent order.

    A vectorised population sends each kind of message as one batch whose rows follow the agents' order;
    the agents' own rows, concatenated in agent order, rebuild it (layouts first seen first).
    """
    groups: dict[tuple, list[MessageBatch]] = {}
    for batches in per_agent:
        for batch in batches:
            groups.setdefault(_layout(batch), []).append(batch)
    merged = []
    for parts in groups.values():
        if len(parts) == 1:
            merged.append(parts[0])
            continue
        first = parts[0]
        merged.append(
            MessageBatch(
                first.kind,
                np.concatenate([b.replica for b in parts]),
                np.concatenate([b.sender for b in parts]),
                np.concatenate([b.recipient for b in parts]),
                {k: np.concatenate([b.payload[k] for b in parts]) for k in first.payload},
                count=np.concatenate([b.count for b in parts]),
                slot=np.concatenate([b.slot for b in parts]),
                privacy=first.privacy,
            )
        )
    return merged
