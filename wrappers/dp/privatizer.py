"""The message privatizer: clips, noises and accounts every outgoing message of a slot.

It is a :class:`fedbandit_envs.families.mab.core.MessageHook`: installed on the simulation core, it
serves the PettingZoo wrappers and the batched runner with one implementation. The sender is
untrusted (see the threat model in ``docs/privacy-and-wrappers.md``): whatever lowers the noise or
the charge is checked against facts the env holds (:class:`~fedbandit_envs.core.ObservedRecords`).
For every message:

1. metadata: under ``strict`` the kind must be public by construction (given to the wrapper or
   registered before the episode) and ``count`` must be 1;
2. each ``Sensitive`` declaration must be the one its sender first used for that kind and field in
   the episode (it sets the clipping and noise, so it must not follow the data); its record counts
   are checked against the env's count of the sender's observed rewards (per arm with
   ``arm_field``), an explicit ``sensitivity_field`` against the range of one record the env knows,
   and the field is clipped to the range its declaration allows, whatever its aggregate; a claim the
   env cannot back raises ``ValueError`` and nothing of the slot is sent or charged;
3. the release is priced: ``epsilon`` per message (or a schedule over the sender's release index),
   times ``n_agg`` under ``calibration="paper"`` (Li and Song: noise divided by the number of
   aggregated agents gives an ``n_agg * epsilon`` guarantee, which is what is charged), plus every
   ``Privatized(epsilon=...)`` declaration (each message, or once per episode for
   ``scope="episode"``); everything composes sequentially (a sender's partition labels cannot be
   verified), and the budget guard checks epsilon and delta (``on_exhausted``: raise, drop the
   message, or block the sender; delta never reaches 1);
4. noise is added and the field is re-declared ``Privatized``.

Noise comes from one generator per (sender, message kind) derived from the episode's ``dp`` stream
(:func:`dp_generator`), so a message gets the same noise whichever path (PettingZoo or batched)
sends it, and distinct kinds never share a generator. Noise is seeded: simulation-grade, not for
production privacy, unless ``NoiseSpec(secure=True)`` releases through OpenDP
(:mod:`fedbandit_envs.privacy.secure`).
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from fedbandit_envs.channel.messages import MessageBatch
from fedbandit_envs.channel.privacy import Privatized, Public, Sensitive, message_schemas, public_message_kinds
from fedbandit_envs.core import AgentContext, ObservedRecords
from fedbandit_envs.privacy.accountant import (
    DeclaredEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyAccountant,
    PrivacyBudgetExceeded,
)
from fedbandit_envs.privacy.mechanisms import (
    gaussian_noise,
    gaussian_sigma_analytic,
    gaussian_sigma_classical,
    laplace_noise,
    laplace_scale,
)
from fedbandit_envs.privacy.secure import require_opendp, secure_release
from fedbandit_envs.seeding import SeedStreams
from fedbandit_envs.validation import check_bool, check_int, check_names, check_real

ON_EXHAUSTED = ("raise", "drop", "block")
#: Noise draws stay within this many scales of zero: numpy's Laplace draws within 37 (a uniform draw is at least
#: 2**-53), its normal draws within 14; a release refuses a scale at which that reach would overflow a float.
NOISE_TAIL = 64.0
CALIBRATIONS = ("paper", "strict")
MECHANISMS = ("laplace", "gaussian")
GAUSSIAN_CALIBRATIONS = ("classical", "analytic")

EpsilonSpec = float | Callable[[int], float]
#: Pinned ``Sensitive`` declarations: (replica, sender, kind) -> {field: declaration} of the kind's first use.
Pins = dict[tuple[int, int, str], dict[str, Sensitive]]


def dp_generator(streams: SeedStreams, sender: int, kind: str, index: int = 0) -> np.random.Generator:
    """The noise generator of one sender's messages of one kind, derived from the episode's ``dp`` stream.

    The spawn key is ``(sender, crc32(kind))`` for the first kind of each (sender, crc32) pair the
    episode uses (``index=0``) and ``(sender, crc32(kind), index)`` for the ``index``-th later kind with
    the same CRC, so distinct kinds never share noise (:meth:`MessagePrivatizer.rng` assigns the index).
    """
    root = streams.sequence("dp")
    key = (*root.spawn_key, int(sender), zlib.crc32(kind.encode())) + ((int(index),) if index else ())
    return np.random.default_rng(np.random.SeedSequence(root.entropy, spawn_key=key, pool_size=root.pool_size))


def _count_is_record_axis(batch: MessageBatch) -> bool:
    """Whether each row's ``count`` is the number of records its payload packs (shape, not a free number).

    A packed row (flooded records, Dubey) carries ``count`` records along axis 1 of every payload field; such
    a count says nothing the payload's shape does not already show.
    """
    sizes = {values.shape[1] if values.ndim >= 2 else None for values in batch.payload.values()}
    return len(sizes) == 1 and None not in sizes and bool(np.all(batch.count == sizes.pop()))


def _broadcast(per_row: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Reshape (n,) or (n, ...) per-row data to broadcast against values of shape (n, ...)."""
    return per_row.reshape(per_row.shape + (1,) * (values.ndim - per_row.ndim))


@dataclass(frozen=True)
class NoiseSpec:
    """How a privatizer calibrates noise.

    Attributes:
        mechanism: ``"laplace"`` or ``"gaussian"``.
        delta: delta of one Gaussian release, in (0, 1) (unused for Laplace).
        gaussian_calibration: ``"classical"`` or ``"analytic"``.
        allow_large_epsilon: permit epsilon >= 1 with the classical calibration (outside its proof; see
            :func:`~fedbandit_envs.privacy.mechanisms.gaussian_sigma_classical`).
        secure: release through OpenDP's floating-point-safe samplers (same scale, not reproducible; see
            :mod:`fedbandit_envs.privacy.secure`) instead of the seeded numpy draws.
    """

    mechanism: str
    delta: float = 0.0
    gaussian_calibration: str = "classical"
    allow_large_epsilon: bool = False
    secure: bool = False

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {MECHANISMS}, got {self.mechanism!r}")
        if self.gaussian_calibration not in GAUSSIAN_CALIBRATIONS:
            raise ValueError(
                f"gaussian_calibration must be one of {GAUSSIAN_CALIBRATIONS}, got {self.gaussian_calibration!r}"
            )
        if self.mechanism == "gaussian" and not 0.0 < check_real("delta", self.delta) < 1.0:
            raise ValueError(f"delta must be in (0, 1) for the Gaussian mechanism, got {self.delta}")
        check_bool("secure", self.secure)
        check_bool("allow_large_epsilon", self.allow_large_epsilon)
        if self.secure:
            require_opendp()

    def scale(self, sensitivity: np.ndarray, epsilon: float) -> np.ndarray:
        """Noise scale (Laplace b or Gaussian sigma) per entry."""
        if self.mechanism == "laplace":
            return sensitivity * laplace_scale(1.0, epsilon)
        if self.gaussian_calibration == "analytic":
            return sensitivity * gaussian_sigma_analytic(1.0, epsilon, self.delta)
        sigma = gaussian_sigma_classical(1.0, epsilon, self.delta, allow_large_epsilon=self.allow_large_epsilon)
        return sensitivity * sigma

    def draw(self, rng: np.random.Generator, scale: np.ndarray) -> np.ndarray | float:
        """Noise of the given per-entry scale (a float for a 0-d scale, as numpy draws it)."""
        if self.mechanism == "laplace":
            return laplace_noise(scale, rng)
        return gaussian_noise(scale, rng)

    def release(self, values: np.ndarray, rng: np.random.Generator, scale: np.ndarray) -> np.ndarray:
        """``values`` plus noise of the given per-entry scale (secure: through OpenDP, ``rng`` unused)."""
        if self.secure:
            return secure_release(self.mechanism, values, scale)
        return values + self.draw(rng, scale)

    def event(self, epsilon: float) -> LaplaceEvent | GaussianEvent:
        """The accountant event of one release at ``epsilon``."""
        if self.mechanism == "laplace":
            return LaplaceEvent(epsilon)
        return GaussianEvent(epsilon, self.delta, float(self.scale(np.float64(1.0), epsilon)))


class PrivatizerOptions(TypedDict, total=False):
    """The budget and vocabulary keywords a DP wrapper passes to its :class:`MessagePrivatizer` unchanged.

    ``budget``, ``on_exhausted``, ``strict``, ``budget_delta`` and ``kinds``: see :class:`MessagePrivatizer`
    (their defaults are its own).
    """

    budget: float | None
    on_exhausted: str
    strict: bool
    budget_delta: float | None
    kinds: Iterable[str]


class CalibratedOptions(PrivatizerOptions, total=False):
    """:class:`PrivatizerOptions` and the calibration keywords ``calibration`` and ``n_agg`` (Laplace, Gaussian)."""

    calibration: str
    n_agg: int


@dataclass
class _SlotPlan:
    """What the privatizer decided for one slot, committed only once every batch is decided."""

    pending: dict[tuple[int, int], list] = field(default_factory=dict)
    releases: dict[tuple[int, int, str], int] = field(default_factory=dict)
    declared: dict[tuple[int, int, str], tuple[float, float]] = field(default_factory=dict)
    blocks: set[tuple[int, int]] = field(default_factory=set)
    pinned: Pins = field(default_factory=dict)


class MessagePrivatizer:
    """Enforces DP on the agents' outgoing messages (a message hook of the simulation core).

    Args:
        noise: the mechanism (:class:`NoiseSpec`).
        epsilon: per-message epsilon, or a function of the sender's 1-based release index (per kind).
        calibration: ``"paper"`` (noise for ``n_agg * epsilon``, charged as such) or ``"strict"``.
        n_agg: number of agents whose messages are averaged (paper calibration only).
        budget: per-agent epsilon budget (basic composition), or None.
        on_exhausted: ``"raise"`` (PrivacyBudgetExceeded), ``"drop"`` (drop that message) or
            ``"block"`` (drop it and every later message of that sender, of any kind). Applies to
            the epsilon budget, the delta budget and the delta ceiling alike.
        strict: undeclared payload fields, kinds outside the public vocabulary and ``count`` other
            than 1 raise; otherwise they pass with a warning.
        budget_delta: per-agent delta budget (basic composition), in (0, 1), or None. Whatever it is,
            a release that would bring an agent's delta to 1 or more (a void guarantee) is refused.
        kinds: the message kinds the senders may use (public by construction), in addition to those
            registered with :func:`~fedbandit_envs.channel.privacy.declare_message_kinds`.
    """

    def __init__(
        self,
        noise: NoiseSpec,
        epsilon: EpsilonSpec,
        calibration: str = "strict",
        n_agg: int = 1,
        budget: float | None = None,
        on_exhausted: str = "raise",
        strict: bool = True,
        budget_delta: float | None = None,
        kinds: Iterable[str] = (),
    ) -> None:
        if calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
        if on_exhausted not in ON_EXHAUSTED:
            raise ValueError(f"on_exhausted must be one of {ON_EXHAUSTED}, got {on_exhausted!r}")
        n_agg = check_int("n_agg", n_agg, 1)
        if budget is not None and not check_real("budget", budget, finite=False) > 0:
            raise ValueError(f"budget must be > 0 (or None), got {budget}")
        if budget_delta is not None and not 0.0 < check_real("budget_delta", budget_delta) < 1.0:
            raise ValueError(f"budget_delta must be in (0, 1) (or None), got {budget_delta}")
        vocabulary = check_names("kinds", kinds, "('theta', 'counts')")
        self.noise = noise
        self.epsilon = epsilon
        self.calibration = calibration
        self.n_agg = n_agg
        self.budget = budget
        self.budget_delta = budget_delta
        self.on_exhausted = on_exhausted
        self.strict = check_bool("strict", strict)
        self.kinds = vocabulary
        if not callable(epsilon):
            noise.scale(np.float64(1.0), self.message_epsilon(1))  # fail now if it cannot be calibrated
        self._warned: set[tuple[str, str]] = set()
        self.records: ObservedRecords | None = None

    # ------------------------------------------------------------------ episode
    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Fresh accountants and DP noise streams for every replica; the kind vocabulary and schemas are fixed here."""
        m = context.num_agents
        self.streams = list(streams)
        self.accountants = [
            PrivacyAccountant(m, budget_epsilon=self.budget, budget_delta=self.budget_delta) for _ in streams
        ]
        self.blocked = np.zeros((len(streams), m), bool)
        self.vocabulary = self.kinds | public_message_kinds()
        self.schemas = message_schemas()
        self._rngs: dict[tuple[int, int, str], np.random.Generator] = {}
        self._crc_kinds: dict[tuple[int, int, int], list[str]] = {}
        self._releases: dict[tuple[int, int, str], int] = {}
        self._declared: dict[tuple[int, int, str], tuple[float, float]] = {}
        self._pinned: Pins = {}
        self.records = None

    def attach_records(self, records: ObservedRecords) -> None:
        """Receive the env's read-only count of each agent's observed rewards (called by the core after reset)."""
        self.records = records

    def rng(self, replica: int, sender: int, kind: str) -> np.random.Generator:
        """The noise generator of ``sender``'s messages of ``kind`` in ``replica`` (see :func:`dp_generator`).

        Kinds whose crc32 collides get distinct generators, indexed in the order the sender first uses them.
        """
        key = (replica, sender, kind)
        if key not in self._rngs:
            same_crc = self._crc_kinds.setdefault((replica, sender, zlib.crc32(kind.encode())), [])
            self._rngs[key] = dp_generator(self.streams[replica], sender, kind, len(same_crc))
            same_crc.append(kind)
        return self._rngs[key]

    def epsilon_spent(self) -> np.ndarray:
        """(B, M) epsilon spent per replica and agent (basic composition)."""
        return np.stack([accountant.totals() for accountant in self.accountants])

    def delta_spent(self) -> np.ndarray:
        """(B, M) delta spent per replica and agent (basic composition)."""
        return np.stack([accountant.delta_totals() for accountant in self.accountants])

    def message_epsilon(self, release_index: int) -> float:
        """The charged epsilon of a sender's ``release_index``-th message (1-based)."""
        epsilon = self.epsilon(release_index) if callable(self.epsilon) else self.epsilon
        _check_epsilon(epsilon)
        return float(epsilon) * (self.n_agg if self.calibration == "paper" else 1)

    # ------------------------------------------------------------------ hook
    def __call__(self, slot: int, batches: list[MessageBatch]) -> list[MessageBatch]:
        """Privatize every batch of the slot, atomically.

        Three phases: every batch is checked and priced against the charges already made plus those
        decided earlier in the slot; then the charges and blocks are committed; then noise is drawn. A
        raise in the first phase (bad declaration, a claim the env cannot back, exhausted budget) leaves
        accountants, blocks and noise streams untouched. New noise streams of the slot are opened in
        (replica, sender, kind) order, so the batches' order does not matter.
        """
        plan = _SlotPlan()
        decided = [self._decide(batch, plan) for batch in batches]
        self._commit(plan)
        opened = {
            (int(b), int(sender), batch.kind)
            for batch, _, sensitive, _, keep, _ in decided
            if sensitive
            for b, sender in zip(batch.replica[keep], batch.sender[keep])
        }
        for key in sorted(opened):
            self.rng(*key)
        out = [self._apply(*decision) for decision in decided]
        return [batch for batch in out if len(batch)]

    def check(self, slot: int, batches: list[MessageBatch]) -> None:
        """Refuse the declarations and record claims the env cannot back in ``batches`` as the learner sent them.

        Called by the hook chain when fault hooks come before this one, so that a message a drop loses is checked
        all the same (nothing is charged or drawn here; :meth:`__call__` prices what reaches it).
        """
        pins: Pins = {}
        for batch in batches:
            schema = self._schema(batch)
            self._pin(batch, schema, pins)
            for name, declaration in schema.items():
                if isinstance(declaration, Sensitive):
                    self._field_range(batch, name, declaration)

    def check_replies(self, slot: int, replies: Sequence[MessageBatch]) -> None:
        """Check the hosted coordinator's replies as the agents' messages are checked, without noise or charge.

        A reply's kind must be in the public vocabulary, its ``count`` 1 and every field declared (under ``strict``;
        otherwise with a warning). Replies are not privatized: a server computes them from what reached it, which
        this wrapper privatized already (or which was declared private), so its values are post-processing and
        must be declared ``Public()`` or ``Privatized()``; a ``Sensitive`` field is refused, as nothing would
        noise it, and a ``Privatized(epsilon=...)`` is charged to no agent.
        """
        for batch in replies:
            self._check_registered(batch)
            sensitive = [name for name, d in self._schema(batch).items() if isinstance(d, Sensitive)]
            if sensitive:
                raise ValueError(
                    f"the server's reply {batch.kind!r} declares {sensitive} Sensitive; a DP wrapper does not noise a "
                    "server's replies (they are computed from messages it privatized already): declare such values "
                    "Privatized() and public ones Public()"
                )

    def _unvouched(self, what: str) -> None:
        """Refuse (strict) or warn once about metadata that is not public by construction."""
        if self.strict:
            raise ValueError(
                f"{what}; under a DP wrapper message metadata must be public by construction: pass the kinds a "
                "learner sends to the wrapper (kinds=(...)) or register them with declare_message_kinds() before "
                "reset, send count=1 (or pass strict=False)"
            )
        if (what, "") not in self._warned:
            warnings.warn(f"DP wrapper (strict=False): {what}; sent as is", stacklevel=4)
            self._warned.add((what, ""))

    def _schema(self, batch: MessageBatch) -> dict:
        """The batch's declarations; undeclared fields raise (strict) or pass as public with one warning."""
        if batch.kind not in self.vocabulary:
            self._unvouched(f"message kind {batch.kind!r} is not in the wrapper's public vocabulary")
        if np.any(batch.count != 1) and not _count_is_record_axis(batch):
            self._unvouched(
                f"message kind {batch.kind!r} has count {batch.count.max()} (a sender-chosen count: a packed "
                "message's count must equal the length of every payload field's record axis, axis 1 of the batch)"
            )
        schema = dict(batch.privacy or {})
        undeclared = [name for name in batch.payload if name not in schema]
        if undeclared and self.strict:
            raise ValueError(
                f"message kind {batch.kind!r} has undeclared payload fields {undeclared}; under a DP wrapper "
                "declare each field Public(), Sensitive(...) or Privatized(...) (or pass strict=False)"
            )
        for name in undeclared:
            if (batch.kind, name) not in self._warned:
                warnings.warn(
                    f"DP wrapper (strict=False): field {name!r} of {batch.kind!r} is undeclared and sent as is",
                    stacklevel=4,
                )
                self._warned.add((batch.kind, name))
            schema[name] = Public()
        return schema

    def _decide(self, batch: MessageBatch, plan: _SlotPlan) -> tuple:
        """Check and price one batch into ``plan`` (nothing is recorded yet)."""
        schema = self._schema(batch)
        self._pin(batch, schema, plan.pinned)
        sensitive = [name for name, d in schema.items() if isinstance(d, Sensitive)]
        ranges = {name: self._field_range(batch, name, schema[name]) for name in sensitive}
        keep, epsilons = self._guard(batch, schema, sensitive, plan)
        if keep.any():
            for name in sensitive:
                self._check_representable(batch, name, schema[name], ranges[name], keep, epsilons)
        return batch, schema, sensitive, ranges, keep, epsilons

    def _pin(self, batch: MessageBatch, schema: dict, pins: Pins) -> None:
        """Refuse ``Sensitive`` declarations that differ from those the sender first used for the kind in the episode.

        A ``Sensitive`` declaration sets its field's clipping and noise, so it must not depend on the episode's data:
        the ``Sensitive`` fields (names and declarations) of a sender's kind are pinned by its first message of that
        kind that has any, and a later message may declare ``Sensitive`` only those fields, each exactly as then (a
        new field name would be a new first use). ``Public`` and ``Privatized`` declarations set no noise and are
        not pinned. ``pins`` collects the pins the call adds (the slot's plan, or a scratch dict for :meth:`check`).
        A kind registered with :func:`~fedbandit_envs.channel.privacy.declare_message_schema` before the episode
        must carry exactly its registered declaration instead.
        """
        if self._check_registered(batch):
            return
        sensitive = {name: d for name, d in schema.items() if isinstance(d, Sensitive)}
        if not sensitive:
            return
        for b, sender in dict.fromkeys(zip(batch.replica.tolist(), batch.sender.tolist())):
            key = (b, sender, batch.kind)
            pinned = self._pinned.get(key) or pins.get(key)
            if pinned is None:
                pins[key] = sensitive
                continue
            for name, declaration in sensitive.items():
                if pinned.get(name) != declaration:
                    first = repr(pinned[name]) if name in pinned else f"only {sorted(pinned)} Sensitive"
                    raise ValueError(
                        f"field {name!r} of {batch.kind!r} from agent {sender} is declared {declaration!r}, but the "
                        f"sender's first {batch.kind!r} message with Sensitive fields declared it {first}; a Sensitive "
                        "declaration sets its field's clipping and noise, so it is fixed for the episode at its first "
                        "use: declare the same fields the same way in every message (bounds that follow the data "
                        "would release the data)"
                    )

    def _check_registered(self, batch: MessageBatch) -> bool:
        """Whether ``batch``'s kind has a declaration registered before the episode (ValueError if it differs)."""
        registered = self.schemas.get(batch.kind)
        if registered is None:
            return False
        if dict(batch.privacy or {}) != registered:
            raise ValueError(
                f"message kind {batch.kind!r} is registered with the declaration {dict(registered)} "
                f"(declare_message_schema), but a message declares {dict(batch.privacy or {})}; a kind registered "
                "with a declaration must always carry exactly it"
            )
        return True

    def _check_representable(
        self, batch: MessageBatch, name: str, declaration: Sensitive, ranges: tuple, keep: np.ndarray, epsilons
    ) -> None:
        """Refuse, before anything is charged or drawn, a release whose noised values could overflow a float.

        The largest noise scale (the smallest epsilon of the kept rows, the largest sensitivity of any row) times
        ``NOISE_TAIL`` plus the largest clipped value of any row must be a finite float (a bound: rows not kept only
        make it larger).
        """
        low, high, sensitivity = ranges
        if declaration.affects == "all":
            sensitivity = self._total_sensitivity(sensitivity.reshape(len(batch), -1))
        epsilon, widest = float(epsilons[keep].min()), float(sensitivity.max())
        with np.errstate(over="ignore"):
            largest = float(self.noise.scale(np.float64(widest), epsilon))
        reach = max(-float(low.min()), float(high.max())) + NOISE_TAIL * largest
        if not math.isfinite(reach):
            raise ValueError(
                f"field {name!r} of {batch.kind!r}: the noise scale ({largest:g}, from epsilon {epsilon:g} and "
                f"sensitivity {widest:g}) is too large to release a finite value; use a larger epsilon or narrower "
                "bounds"
            )

    def _total_sensitivity(self, per_entry: np.ndarray) -> np.ndarray:
        """(n,) sensitivity of a whole row of ``affects="all"`` entries: their sum (Laplace) or l2 norm (Gaussian)."""
        return per_entry.sum(axis=1) if self.noise.mechanism == "laplace" else np.sqrt((per_entry**2).sum(axis=1))

    # ------------------------------------------------------------------ facts
    def _facts(self, name: str, claim: str) -> ObservedRecords:
        """The env's record counts, or a refusal naming the field whose claim needs them."""
        if self.records is None:
            raise ValueError(
                f"field {name!r}: {claim} needs the env's count of observed rewards, which this privatizer was not "
                "given (it is attached by the env's core at reset; call attach_records() when driving it by hand)"
            )
        return self.records

    def _agent_totals(self, batch: MessageBatch, name: str, claim: str) -> np.ndarray:
        """(n,) rewards each row's sender has observed, as the env counts them."""
        facts = self._facts(name, claim)
        counts = [facts.agent_counts(int(b))[int(s)] for b, s in zip(batch.replica, batch.sender)]
        return np.array(counts, np.int64).reshape(len(batch))

    def _available(self, batch: MessageBatch, name: str, declaration: Sensitive, entries: int) -> np.ndarray:
        """(n, entries) records the env has seen that each entry may draw on (per arm with ``arm_field``)."""
        if declaration.arm_field is None:
            totals = self._agent_totals(batch, name, "a record count or a sum")
            return np.broadcast_to(totals.reshape(-1, 1), (len(batch), entries))
        facts = self._facts(name, "a record count per arm")
        rows = np.arange(len(batch))
        if not facts.has_arm_counts:
            raise ValueError(
                f"field {name!r} names arms ({declaration.arm_field!r}), but this environment does not count observed "
                "rewards per arm; drop arm_field (records are then checked against the agent's total)"
            )
        arms = np.asarray(batch.payload[declaration.arm_field]).reshape(len(batch), -1)
        if arms.dtype.kind not in "iu" or arms.shape[1] not in (1, entries):
            raise ValueError(
                f"arm field {declaration.arm_field!r} of {name!r} must hold one integer arm per row or per entry"
            )
        counts = [facts.arm_counts(int(b))[int(s)] for b, s in zip(batch.replica, batch.sender)]
        if arms.min(initial=0) < 0 or arms.max(initial=0) >= counts[0].shape[0]:
            raise ValueError(f"arm field {declaration.arm_field!r} of {name!r} holds an arm out of range")
        return np.broadcast_to(np.stack([counts[r][arms[r]] for r in rows]), (len(batch), entries))

    def _check_records(
        self, batch: MessageBatch, name: str, declaration: Sensitive, records: np.ndarray, before_any: bool = False
    ) -> None:
        """Refuse record counts the env cannot back: more records than the sender observed.

        ``records`` is (n, entries). Entries of a field with ``affects="one"`` use disjoint records, so
        together they claim the sum of their counts: of the sender's total, or per arm with ``arm_field``.
        ``before_any``: a claim of a sender with no observed reward at all passes, as nothing private exists yet
        (value entries sent before the first reward depend on no record). Once the sender has observed a reward, an
        entry labelled with an arm it never pulled is refused like any other claim beyond the count: the env cannot
        tell which record such an entry repeats.
        """
        if declaration.aggregate == "mean" and np.any(records < 1):
            raise ValueError(f"records field {declaration.records_field!r} must be >= 1 for a mean")
        if np.any(records < 0):
            raise ValueError(f"records field {declaration.records_field!r} must be >= 0")
        available = self._available(batch, name, declaration, records.shape[1])
        arms = None
        if declaration.arm_field is not None:
            arms = np.broadcast_to(
                np.asarray(batch.payload[declaration.arm_field]).reshape(len(batch), -1), records.shape
            )
        claimed = records
        if declaration.affects == "one" and arms is None:
            claimed = np.broadcast_to(records.sum(axis=1, keepdims=True), records.shape)
        elif declaration.affects == "one" and arms is not None:
            claimed = np.stack([np.bincount(a, weights=r)[a] for a, r in zip(arms, records)])
        if before_any:  # only a sender with no observed reward at all has nothing private to repeat
            nothing_yet = self._agent_totals(batch, name, "a record count").reshape(-1, 1) == 0
            over = np.argwhere((claimed > available) & ~nothing_yet)
        else:
            over = np.argwhere(claimed > available)
        if len(over):
            row, entry = over[0]
            arm = "" if arms is None else f" of arm {int(arms[row, entry])}"
            claim = (
                f"claims {int(claimed[row, entry])} records in {declaration.records_field!r}"
                if declaration.records_field is not None
                else f"holds {int(claimed[row, entry])} entries of one record each (aggregate='value', affects='one')"
            )
            raise ValueError(
                f"field {name!r} of {batch.kind!r} {claim}, but agent {int(batch.sender[row])} has observed "
                f"{int(available[row, entry])} rewards{arm}; a record count must not exceed the env's own count "
                "of the sender's observed rewards"
            )

    def _field_range(self, batch: MessageBatch, name: str, declaration: Sensitive) -> tuple:
        """Clip range (low, high) and sensitivity of each entry, from the declaration checked against the env's facts.

        Returns three arrays of the field's shape (n, ...). Means of ``n`` records are clipped to the record
        bounds (sensitivity width / n), sums of ``n`` records to ``n`` times them (sensitivity width), sums
        without a records field to the records the sender observed, values to the bounds; an explicit
        sensitivity must cover the env's range of one record and the entry is clipped to the records
        observed times it.
        """
        values = np.asarray(batch.payload[name], np.float64)
        n = len(batch)
        if not n:
            return values, values, values
        entries = values.reshape(n, -1).shape[1]
        if declaration.sensitivity_field is not None:
            facts = self._facts(name, f"sensitivity_field {declaration.sensitivity_field!r}")
            sensitivity = _broadcast(np.asarray(batch.payload[declaration.sensitivity_field], np.float64), values)
            if not facts.has_record_widths:
                raise ValueError(
                    f"field {name!r}: sensitivity_field {declaration.sensitivity_field!r} is the sender's word and "
                    "this environment knows no range of one record to check it against; "
                    "declare bounds=(low, high) instead"
                )
            widths = np.stack([facts.record_widths(int(b))[int(s)] for b, s in zip(batch.replica, batch.sender)])
            try:
                short = np.broadcast_to(sensitivity, values.shape) < np.broadcast_to(
                    _broadcast(widths, values), values.shape
                )
            except ValueError:
                raise ValueError(
                    f"field {name!r}: sensitivity_field {declaration.sensitivity_field!r} has no entry layout the env "
                    f"can match to its per-record ranges of shape {widths.shape[1:]}"
                ) from None
            if np.any(short):
                raise ValueError(
                    f"field {name!r}: sensitivity_field {declaration.sensitivity_field!r} declares less than "
                    "the range of one record the env knows for that entry (e.g. a producer's capacity); "
                    "declare at least that"
                )
            totals = self._agent_totals(batch, name, f"sensitivity_field {declaration.sensitivity_field!r}")
            observed = _broadcast(totals.astype(np.float64), values)
            limit = np.broadcast_to(observed * sensitivity, values.shape)
            return -limit, limit, np.broadcast_to(sensitivity, values.shape)
        assert declaration.bounds is not None, "Sensitive requires bounds without a sensitivity_field"
        low, high = declaration.bounds
        width = float(high - low)
        if declaration.aggregate == "value":
            if declaration.affects == "one" and entries > 1:  # one record per entry: no more than were observed
                self._check_records(batch, name, declaration, np.ones((n, entries), np.int64), before_any=True)
            return np.full(values.shape, low), np.full(values.shape, high), np.full(values.shape, width)
        if declaration.records_field is None:  # a sum of at most the records observed
            observed = self._available(batch, name, declaration, entries).astype(np.float64).reshape(values.shape)
            return (
                np.minimum(0.0, observed * low),
                np.maximum(0.0, observed * high),
                np.full(values.shape, width),
            )
        raw = np.asarray(batch.payload[declaration.records_field], np.float64)
        if not np.array_equal(raw, np.round(raw)):
            raise ValueError(f"records field {declaration.records_field!r} must hold whole numbers (counts of records)")
        try:
            records = np.broadcast_to(_broadcast(raw, values), values.shape)
        except ValueError:
            raise ValueError(
                f"field {name!r}: records field {declaration.records_field!r} of shape {raw.shape} matches no entry "
                f"layout of {name!r} (shape {values.shape}): give one count per row or one per entry"
            ) from None
        self._check_records(batch, name, declaration, records.reshape(n, -1))
        if declaration.aggregate == "mean":
            return np.full(values.shape, low), np.full(values.shape, high), width / records
        return records * low, records * high, np.full(values.shape, width)

    # ------------------------------------------------------------------ accounting
    def _commit(self, plan: _SlotPlan) -> None:
        """Record the slot's charges, release counts, declarations and blocks."""
        for (b, sender), events in plan.pending.items():
            for event in events:
                self.accountants[b].record(sender, event)
        self._releases.update(plan.releases)
        self._declared.update(plan.declared)
        self._pinned.update(plan.pinned)
        for b, sender in plan.blocks:
            self.blocked[b, sender] = True

    def _apply(self, batch, schema, sensitive, ranges, keep, epsilons) -> MessageBatch:
        """Drop refused rows and noise the sensitive fields of the others."""
        kept = batch if keep.all() else batch.take(keep)
        if not sensitive:
            return kept.with_payload(kept.payload, schema)
        payload = dict(kept.payload)
        for name in sensitive:
            low, high, sensitivity = (array[keep] for array in ranges[name])
            payload[name] = self._noised(kept, name, schema[name], (low, high, sensitivity), epsilons[keep])
            schema[name] = Privatized(description=f"{self.noise.mechanism} noise added by the DP wrapper")
        return kept.with_payload(payload, schema)

    def _exceeds(self, b: int, sender: int, events: list) -> tuple[float, float] | None:
        """The projected (epsilon, delta) if ``events`` would break the epsilon or delta budget (or reach delta 1)."""
        accountant, releases = self.accountants[b], [(event, None) for event in events]
        epsilon, delta = accountant.projected(sender, releases)
        return (epsilon, delta) if accountant.would_exceed_all(sender, releases) or delta >= 1.0 else None

    def _guard(
        self, batch: MessageBatch, schema: dict, sensitive: list[str], plan: _SlotPlan
    ) -> tuple[np.ndarray, np.ndarray]:
        """Price each row and apply the budget guard against the plan; returns kept rows and their epsilons."""
        keep = np.ones(len(batch), bool)
        epsilons = np.zeros(len(batch))
        for row in range(len(batch)):
            b, sender = int(batch.replica[row]), int(batch.sender[row])
            if self.blocked[b, sender] or (b, sender) in plan.blocks:
                keep[row] = False
                continue
            key = (b, sender, batch.kind)
            index = plan.releases.get(key, self._releases.get(key, 0)) + 1
            epsilon = self.message_epsilon(index) if sensitive else 0.0
            declared, episode = self._declarations(schema, b, sender, plan.declared)
            events = declared + (self._events(batch, schema, sensitive, row, epsilon) if sensitive else [])
            charged = plan.pending.get((b, sender), [])
            projected = self._exceeds(b, sender, charged + events) if events else None
            if projected is not None:
                if self.on_exhausted == "raise":
                    budget_delta = 1.0 if self.budget_delta is None else self.budget_delta  # delta < 1 always
                    raise PrivacyBudgetExceeded(sender, projected[0], self.budget, projected[1], budget_delta)
                keep[row] = False
                if self.on_exhausted == "block":
                    plan.blocks.add((b, sender))
                continue
            plan.pending[(b, sender)] = charged + events
            plan.declared.update(episode)
            if sensitive:
                plan.releases[key] = index
                epsilons[row] = epsilon
        return keep, epsilons

    def _declarations(self, schema: dict, b: int, sender: int, planned: dict) -> tuple[list, dict]:
        """The charges of one row's ``Privatized(epsilon=...)`` declarations, and the episode keys they open.

        Per-message declarations are charged every time (one event per distinct declaration of the
        message); an episode declaration is charged at the first use of its ``account_key`` and must
        then always declare the same (epsilon, delta).
        """
        events: list[DeclaredEvent] = []
        opened: dict[tuple[int, int, str], tuple[float, float]] = {}
        seen: list[Privatized] = []
        for name, declaration in schema.items():
            if not isinstance(declaration, Privatized) or declaration.epsilon is None or declaration in seen:
                continue
            seen.append(declaration)
            cost = (float(declaration.epsilon), float(declaration.delta))
            if declaration.scope == "episode":
                key = (b, sender, declaration.account_key)
                known = opened.get(key) or planned.get(key) or self._declared.get(key)
                if known is not None:
                    if known != cost:
                        raise ValueError(
                            f"field {name!r}: account_key {declaration.account_key!r} of agent {sender} was declared "
                            f"with (epsilon, delta) = {known} for the episode; a declaration of {cost} under the same "
                            "key is refused (one key names one mechanism; use another account_key for another one)"
                        )
                    continue
                opened[key] = cost
            events.append(DeclaredEvent(declaration.epsilon, declaration.delta, declaration.description))
        return events, opened

    def _events(self, batch: MessageBatch, schema: dict, sensitive: list[str], row: int, epsilon: float) -> list:
        """The events one row costs: one release per sensitive field (sequential composition)."""
        return [self.noise.event(epsilon) for _ in sensitive]

    def _noised(
        self, batch: MessageBatch, name: str, declaration: Sensitive, ranges: tuple, epsilons: np.ndarray
    ) -> np.ndarray:
        low, high, sensitivity = ranges
        values = np.clip(np.asarray(batch.payload[name], np.float64), low, high)
        if declaration.affects == "all":
            total = self._total_sensitivity(sensitivity.reshape(len(batch), -1))
            sensitivity = np.broadcast_to(_broadcast(total, values), values.shape)
        noised = values.copy()
        for row in range(len(batch)):
            rng = self.rng(int(batch.replica[row]), int(batch.sender[row]), batch.kind)
            scale = self.noise.scale(np.asarray(sensitivity[row]), float(epsilons[row]))
            noised[row] = self.noise.release(values[row], rng, scale)
        return noised


def _check_epsilon(epsilon: float) -> None:
    """Refuse an epsilon that is not a finite real number > 0 (Python or numpy; not bool, not a string)."""
    if not check_real("epsilon", epsilon, finite=False) > 0:  # (a TypeError for what is not a real number)
        raise ValueError(f"epsilon must be a number > 0, got {epsilon!r}")
    if not np.isfinite(epsilon):
        raise ValueError("epsilon must be finite under a DP wrapper; remove the wrapper for no privacy")
