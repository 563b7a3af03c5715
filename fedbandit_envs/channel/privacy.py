"""Privacy declarations of message payload fields.

A sender declares, per payload field, what the field is derived from:

* :class:`Public`: nothing private (arm indices of a public schedule, record counts, round numbers).
* :class:`Sensitive`: values computed from the sender's private rewards. A DP wrapper clips them to
  the declared bounds, computes the sensitivity from the declaration, adds calibrated noise and
  charges the sender's privacy accountant.
* :class:`Privatized`: values that are already differentially private (post-processing of noised
  values, relayed private values, or an input stream the agent privatises itself). A DP wrapper
  passes them unchanged and charges the declared ``epsilon`` (if any): with every message
  (``scope="message"``), or once per episode for a mechanism that covers the whole episode
  (``scope="episode"``, e.g. a binary tree over the agent's input stream), so nothing is noised twice.

Adjacency is event level: neighbouring histories differ in one record (one reward).
Under a DP wrapper in strict mode, an undeclared field is an error: raw reward-derived values never
leave an agent silently. Message kinds are metadata and must be public by construction: a wrapper in
strict mode accepts only the kinds it was given (``kinds=``) and those registered with
:func:`declare_message_kinds` before the episode starts. A ``Sensitive`` declaration sets its field's clipping
and noise: a wrapper fixes each sender's at its first use in the episode, or, for a kind registered with
:func:`declare_message_schema`, before the episode starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedbandit_envs.frozen import FrozenDict
from fedbandit_envs.validation import check_name, check_real

_PUBLIC_KINDS: set[str] = set()
_SCHEMAS: dict[str, FrozenDict] = {}

#: Longest :attr:`Privatized.description`: a declaration travels with its message, uncharged.
MAX_DESCRIPTION_LENGTH = 200


def declare_message_kinds(*kinds: str) -> None:
    """Register message kinds as public vocabulary (call at import time, as the reference agents do).

    A DP wrapper in strict mode reads the registry at each reset, before any reward of the episode
    exists, so a kind cannot carry data of that episode. Kinds are plain labels: never build one from
    data.
    """
    for kind in kinds:
        if not isinstance(kind, str) or not kind:
            raise TypeError(f"message kinds must be non-empty strings, got {kind!r}")
    _PUBLIC_KINDS.update(kinds)


def public_message_kinds() -> frozenset[str]:
    """The message kinds registered with :func:`declare_message_kinds` so far."""
    return frozenset(_PUBLIC_KINDS)


def declare_message_schema(kind: str, privacy: PrivacySchema) -> None:
    """Register ``kind`` as public vocabulary together with the privacy declaration its messages always carry.

    Call it at import time with constant declarations, as :func:`declare_message_kinds`. A DP wrapper reads the
    registry at each reset, before any reward of the episode exists, and refuses a message of ``kind`` whose
    ``privacy`` is not exactly ``privacy``: its ``Sensitive`` bounds cannot follow the episode's data, not even in
    its first message. Registering a kind again with another declaration raises ``ValueError``.
    """
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"message kinds must be non-empty strings, got {kind!r}")
    if not isinstance(privacy, Mapping):
        raise TypeError(f"privacy must map field names to Public(), Sensitive(...) or Privatized(...), got {privacy!r}")
    schema = check_schema(privacy, {name: np.zeros(0) for name in privacy}, f"declare_message_schema({kind!r})")
    assert schema is not None
    known = _SCHEMAS.get(kind)
    if known is not None and known != schema:
        raise ValueError(f"message kind {kind!r} is registered with the declaration {dict(known)}; got {privacy}")
    declare_message_kinds(kind)
    _SCHEMAS[kind] = schema


def message_schemas() -> FrozenDict:
    """The declarations registered with :func:`declare_message_schema` so far (kind -> field -> declaration)."""
    return FrozenDict(_SCHEMAS)


@dataclass(frozen=True)
class Public:
    """The field carries no private information."""


@dataclass(frozen=True)
class Privatized:
    """The field is already differentially private.

    Attributes:
        epsilon: the privacy cost of the agent's own mechanism (``None``: post-processing or relaying,
            no charge).
        delta: the matching delta.
        account_key: identifies the agent's mechanism (e.g. ``"input_stream"``).
        description: what produced the values (shown in privacy reports).
        scope: ``"message"`` (default): ``epsilon`` is the cost of each message, charged with every
            message that carries the declaration (several fields of one message with the same
            declaration are one release). ``"episode"``: ``epsilon`` is the total cost over the episode
            of the mechanism ``account_key`` (e.g. a binary tree over the input stream), charged at its
            first use; a later declaration under that key with another (epsilon, delta) is refused.
    """

    epsilon: float | None = None
    delta: float = 0.0
    account_key: str = "declared"
    description: str = ""
    scope: Literal["message", "episode"] = "message"

    def __post_init__(self) -> None:
        object.__setattr__(self, "account_key", check_name("Privatized.account_key", self.account_key))
        if not isinstance(self.description, str) or len(self.description) > MAX_DESCRIPTION_LENGTH:
            raise ValueError(f"Privatized.description must be a string of at most {MAX_DESCRIPTION_LENGTH} characters")
        object.__setattr__(self, "description", str.__str__(self.description))
        if self.scope not in ("message", "episode"):
            raise ValueError(f"Privatized.scope must be 'message' or 'episode', got {self.scope!r}")
        if self.epsilon is not None and not self.epsilon > 0:
            raise ValueError(f"Privatized.epsilon must be > 0 (or None for post-processing), got {self.epsilon}")
        if not 0.0 <= self.delta < 1.0:
            raise ValueError(f"Privatized.delta must be in [0, 1), got {self.delta}")


def _checked_bounds(bounds: object) -> tuple[float, float]:
    """``bounds`` as a pair of floats ``low < high`` whose width ``high - low`` is finite (it scales the noise)."""
    if isinstance(bounds, str | bytes) or not isinstance(bounds, Sequence | np.ndarray) or len(bounds) != 2:
        raise TypeError(f"Sensitive.bounds must be a pair (low, high) of numbers, got {bounds!r}")
    low, high = (check_real(f"Sensitive.bounds[{i}]", value) for i, value in enumerate(bounds))
    if not (low < high and math.isfinite(high - low)):
        raise ValueError(f"Sensitive.bounds must have low < high and a finite width high - low, got {bounds!r}")
    return low, high


@dataclass(frozen=True)
class Sensitive:
    """The field is computed from private records; a DP wrapper must noise it.

    Each entry of the field aggregates records whose values lie in ``bounds``.

    Attributes:
        bounds: (low, high) range of one record's value, e.g. (0, 1) for Bernoulli rewards. Entries are
            clipped to it (means) or to ``n * bounds`` (sums of ``n`` records). ``None`` only together
            with ``sensitivity_field``.
        aggregate: ``"mean"`` (an entry is the mean of ``n`` records: sensitivity (high - low) / n),
            ``"sum"`` (sum of ``n`` records: sensitivity high - low) or ``"value"`` (one record).
        records_field: name of a public payload field holding ``n`` per entry (or one ``n`` for all
            entries). Required for ``"mean"``; optional for ``"sum"`` (a sum is then clipped to the
            records the agent has observed). A DP wrapper checks every ``n`` against its own count of
            the sender's observed rewards (of the named arm with ``arm_field``).
        sensitivity_field: name of a public payload field holding an explicit per-entry sensitivity;
            overrides the one computed from bounds and records. A DP wrapper accepts it only where the
            env knows the range of one record per entry and the declared value covers it, and clips
            the entry to the records observed times that sensitivity.
        arm_field: name of a public payload field holding the arm of each entry (or one arm per row);
            record counts are then checked per arm.
        affects: ``"one"`` if changing one record changes at most one entry of the field (one arm's
            statistic), ``"all"`` if it can change every entry.
        partition_field: name of a public scalar payload field naming the disjoint block of records
            the release uses (e.g. its epoch). A DP wrapper cannot verify which records a learner's
            value depends on, so it composes such releases sequentially all the same (the label only
            documents the intent; an agent's own accountant may use it).
    """

    bounds: tuple[float, float] | None = (0.0, 1.0)
    aggregate: Literal["mean", "sum", "value"] = "mean"
    records_field: str | None = None
    sensitivity_field: str | None = None
    affects: Literal["one", "all"] = "one"
    partition_field: str | None = None
    arm_field: str | None = None

    def __post_init__(self) -> None:
        if self.aggregate not in ("mean", "sum", "value"):
            raise ValueError(f"Sensitive.aggregate must be 'mean', 'sum' or 'value', got {self.aggregate!r}")
        if self.affects not in ("one", "all"):
            raise ValueError(f"Sensitive.affects must be 'one' or 'all', got {self.affects!r}")
        if self.bounds is not None:
            object.__setattr__(self, "bounds", _checked_bounds(self.bounds))
        if self.sensitivity_field is None:
            if self.bounds is None:
                raise ValueError("Sensitive needs bounds=(low, high) or an explicit sensitivity_field")
            if self.aggregate == "mean" and self.records_field is None:
                raise ValueError("Sensitive(aggregate='mean') needs records_field: the payload field with n per entry")

    def referenced_fields(self) -> tuple[str, ...]:
        """The public payload fields this declaration reads."""
        fields = (self.records_field, self.sensitivity_field, self.partition_field, self.arm_field)
        return tuple(f for f in fields if f)


FieldPrivacy = Public | Privatized | Sensitive
PrivacySchema = Mapping[str, FieldPrivacy]


def check_schema(schema: PrivacySchema | None, fields: Mapping[str, np.ndarray], where: str) -> FrozenDict | None:
    """A frozen dict copy of a declaration, validated against the payload fields.

    The names must exist and fields a declaration refers to must be public. The sender's mapping is read once,
    here, and each declaration must be exactly a Public, Privatized or Sensitive (a subclass, or a mapping of its
    own, could run the sender's code while the env reads it).
    """
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise TypeError(f"{where}: privacy must map field names to Public(), Sensitive(...) or Privatized(...)")
    schema = FrozenDict(schema.items())
    for name, declaration in schema.items():
        if name not in fields:
            raise ValueError(f"{where}: privacy declares field {name!r}, which is not in the payload {sorted(fields)}")
        if type(declaration) not in (Public, Privatized, Sensitive):
            raise TypeError(f"{where}: privacy of {name!r} must be Public(), Sensitive(...) or Privatized(...)")
        if isinstance(declaration, Sensitive):
            for ref in declaration.referenced_fields():
                if ref not in fields:
                    raise ValueError(f"{where}: Sensitive field {name!r} refers to missing payload field {ref!r}")
                if not isinstance(schema.get(ref), Public):
                    raise ValueError(f"{where}: field {ref!r} used by the declaration of {name!r} must be Public()")
    return schema
