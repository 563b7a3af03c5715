"""The message privatizer: clips, noises and accounts every outgoing message of a slot.

It is a :class:`fedbandit_envs.envs.mab_core.MessageHook`: installed on the simulation core, it
serves the PettingZoo wrappers and the batched runner with one implementation. For every message:

1. each ``Sensitive`` field is clipped to its declared bounds and its per-entry sensitivity is
   computed from the declaration (never taken from the sender's word, except an explicit
   ``sensitivity_field``);
2. the release is priced: ``epsilon`` per message (or a schedule over the sender's release index),
   times ``n_agg`` under ``calibration="paper"`` (Li and Song: noise divided by the number of
   aggregated agents gives an ``n_agg * epsilon`` guarantee, which is what is charged), plus the
   first use of each ``Privatized(epsilon=...)`` declaration, and checked against the budget
   (``on_exhausted``: raise, drop the message, or block the sender);
3. noise is added and the field is re-declared ``Privatized``.

Partition keys: a ``Sensitive`` field with ``partition_field`` is charged under the key
``(partition_field, value)`` (releases with different values use disjoint records); everything else
under the accountant's default key, which composes sequentially with every partition.

Noise comes from one generator per (sender, message kind) derived from the episode's ``dp`` stream,
so a message gets the same noise whichever path (PettingZoo or batched) sends it. Noise is seeded:
simulation-grade, not for production privacy, unless ``NoiseSpec(secure=True)`` releases through OpenDP
(:mod:`wrappers.dp.secure`).
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fedbandit_envs.channel.messages import MessageBatch
from fedbandit_envs.channel.privacy import Privatized, Public, Sensitive
from fedbandit_envs.core import AgentContext
from fedbandit_envs.seeding import SeedStreams
from wrappers.dp.accountant import (
    DeclaredEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyAccountant,
    PrivacyBudgetExceeded,
)
from wrappers.dp.mechanisms import (
    gaussian_noise,
    gaussian_sigma_analytic,
    gaussian_sigma_classical,
    laplace_noise,
    laplace_scale,
)
from wrappers.dp.secure import require_opendp, secure_release

ON_EXHAUSTED = ("raise", "drop", "block")
CALIBRATIONS = ("paper", "strict")
MECHANISMS = ("laplace", "gaussian")
GAUSSIAN_CALIBRATIONS = ("classical", "analytic")

EpsilonSpec = float | Callable[[int], float]


def dp_generator(streams: SeedStreams, sender: int, kind: str) -> np.random.Generator:
    """The noise generator of one sender's messages of one kind, derived from the episode's ``dp`` stream."""
    root = streams.sequence("dp")
    key = (*root.spawn_key, int(sender), zlib.crc32(kind.encode()))
    return np.random.default_rng(np.random.SeedSequence(root.entropy, spawn_key=key, pool_size=root.pool_size))


def entry_sensitivity(declaration: Sensitive, payload: dict[str, np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Per-row sensitivity of a sensitive field (per entry when the records field is per entry)."""
    if declaration.sensitivity_field is not None:
        return np.asarray(payload[declaration.sensitivity_field][rows], np.float64)
    low, high = declaration.bounds  # type: ignore[misc]
    width = float(high - low)
    if declaration.aggregate == "mean":
        records = np.asarray(payload[declaration.records_field][rows], np.float64)  # type: ignore[index]
        if np.any(records < 1):
            raise ValueError(f"records field {declaration.records_field!r} must be >= 1 for a mean")
        return width / records
    return np.full(len(rows), width)


def clip_to_declaration(values: np.ndarray, declaration: Sensitive, payload: dict[str, np.ndarray], rows) -> np.ndarray:
    """Clip a sensitive field to the range its declaration allows (no-op with an explicit sensitivity).

    Means are clipped to the record bounds and sums of ``n`` records to ``n`` times them; a sum without a
    records field is not clipped. Clipping bounds an entry, not its records: the sensitivity holds only
    if every record the sender aggregated lies in the bounds (e.g. rewards clipped at the source).
    """
    if declaration.sensitivity_field is not None:
        return values
    low, high = declaration.bounds  # type: ignore[misc]
    if declaration.aggregate == "sum" and declaration.records_field is not None:
        records = _broadcast(np.asarray(payload[declaration.records_field][rows], np.float64), values)
        return np.clip(values, records * low, records * high)
    if declaration.aggregate == "sum":
        return values
    return np.clip(values, low, high)


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
            :func:`~wrappers.dp.mechanisms.gaussian_sigma_classical`).
        secure: release through OpenDP's floating-point-safe samplers (same scale, not reproducible; see
            :mod:`wrappers.dp.secure`) instead of the seeded numpy draws.
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
        if self.mechanism == "gaussian" and not 0.0 < self.delta < 1.0:
            raise ValueError(f"delta must be in (0, 1) for the Gaussian mechanism, got {self.delta}")
        if not isinstance(self.secure, bool):
            raise TypeError(f"secure must be a bool, got {type(self.secure).__name__}")
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

    def draw(self, rng: np.random.Generator, scale: np.ndarray) -> np.ndarray:
        """Noise of the given per-entry scale."""
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


@dataclass
class _SlotPlan:
    """What the privatizer decided for one slot, committed only once every batch is decided."""

    pending: dict[tuple[int, int], list] = field(default_factory=dict)
    releases: dict[tuple[int, int, str], int] = field(default_factory=dict)
    declared: set[tuple[int, int, str]] = field(default_factory=set)
    blocks: set[tuple[int, int]] = field(default_factory=set)


class MessagePrivatizer:
    """Enforces DP on the agents' outgoing messages (a message hook of the simulation core).

    Args:
        noise: the mechanism (:class:`NoiseSpec`).
        epsilon: per-message epsilon, or a function of the sender's 1-based release index (per kind).
        calibration: ``"paper"`` (noise for ``n_agg * epsilon``, charged as such) or ``"strict"``.
        n_agg: number of agents whose messages are averaged (paper calibration only).
        budget: per-agent epsilon budget (basic composition), or None.
        on_exhausted: ``"raise"`` (PrivacyBudgetExceeded), ``"drop"`` (drop that message) or
            ``"block"`` (drop it and every later message of that sender, of any kind).
        strict: undeclared payload fields raise; otherwise they pass with a warning.
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
    ) -> None:
        if calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
        if on_exhausted not in ON_EXHAUSTED:
            raise ValueError(f"on_exhausted must be one of {ON_EXHAUSTED}, got {on_exhausted!r}")
        if int(n_agg) < 1:
            raise ValueError(f"n_agg must be >= 1, got {n_agg}")
        if budget is not None and not budget > 0:
            raise ValueError(f"budget must be > 0 (or None), got {budget}")
        self.noise = noise
        self.epsilon = epsilon
        self.calibration = calibration
        self.n_agg = int(n_agg)
        self.budget = budget
        self.on_exhausted = on_exhausted
        self.strict = strict
        if not callable(epsilon):
            noise.scale(np.float64(1.0), self.message_epsilon(1))  # fail now if it cannot be calibrated
        self._warned: set[tuple[str, str]] = set()
        self._ready = False

    # ------------------------------------------------------------------ episode
    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Fresh accountants and DP noise streams for every replica."""
        m = context.num_agents
        self.streams = list(streams)
        self.accountants = [PrivacyAccountant(m, budget_epsilon=self.budget) for _ in streams]
        self.blocked = np.zeros((len(streams), m), bool)
        self._rngs: dict[tuple[int, int, str], np.random.Generator] = {}
        self._releases: dict[tuple[int, int, str], int] = {}
        self._declared: set[tuple[int, int, str]] = set()
        self._ready = True

    def rng(self, replica: int, sender: int, kind: str) -> np.random.Generator:
        """The noise generator of ``sender``'s messages of ``kind`` in ``replica`` (see :func:`dp_generator`)."""
        key = (replica, sender, kind)
        if key not in self._rngs:
            self._rngs[key] = dp_generator(self.streams[replica], sender, kind)
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
        raise in the first phase (bad declaration, exhausted budget) leaves accountants, blocks and noise
        streams untouched.
        """
        if not self._ready:
            raise RuntimeError("the DP wrapper was added after the last reset; call env.reset() before stepping")
        plan = _SlotPlan()
        decided = [self._decide(batch, plan) for batch in batches]
        self._commit(plan)
        out = [self._apply(*decision) for decision in decided]
        return [batch for batch in out if len(batch)]

    def _schema(self, batch: MessageBatch) -> dict:
        """The batch's declarations; undeclared fields raise (strict) or pass as public with one warning."""
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
        sensitive = [name for name, d in schema.items() if isinstance(d, Sensitive)]
        rows = np.arange(len(batch))
        sensitivities = {name: entry_sensitivity(schema[name], batch.payload, rows) for name in sensitive}
        keep, epsilons = self._guard(batch, schema, sensitive, plan)
        return batch, schema, sensitive, sensitivities, keep, epsilons

    def _commit(self, plan: _SlotPlan) -> None:
        """Record the slot's charges, release counts, declarations and blocks."""
        for (b, sender), events in plan.pending.items():
            for event, partition in events:
                self.accountants[b].record(sender, event, partition)
        self._releases.update(plan.releases)
        self._declared.update(plan.declared)
        for b, sender in plan.blocks:
            self.blocked[b, sender] = True

    def _apply(self, batch, schema, sensitive, sensitivities, keep, epsilons) -> MessageBatch:
        """Drop refused rows and noise the sensitive fields of the others."""
        kept = batch if keep.all() else batch.take(keep)
        if not sensitive:
            return kept.with_payload(kept.payload, schema)
        payload = dict(kept.payload)
        for name in sensitive:
            payload[name] = self._noised(kept, name, schema[name], sensitivities[name][keep], epsilons[keep])
            schema[name] = Privatized(description=f"{self.noise.mechanism} noise added by the DP wrapper")
        return kept.with_payload(payload, schema)

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
            new_declarations = self._new_declarations(schema, b, sender, plan.declared)
            events = [(event, None) for _, event in new_declarations]
            if sensitive:
                events += self._events(batch, schema, sensitive, row, epsilon)
            charged = plan.pending.get((b, sender), [])
            if events and self.accountants[b].would_exceed_all(sender, charged + events):
                if self.on_exhausted == "raise":
                    projected, _ = self.accountants[b].projected(sender, charged + events)
                    raise PrivacyBudgetExceeded(sender, projected, float(self.budget))
                keep[row] = False
                if self.on_exhausted == "block":
                    plan.blocks.add((b, sender))
                continue
            plan.pending[(b, sender)] = charged + events
            plan.declared.update((b, sender, account_key) for account_key, _ in new_declarations)
            if sensitive:
                plan.releases[key] = index
                epsilons[row] = epsilon
        return keep, epsilons

    def _new_declarations(self, schema: dict, b: int, sender: int, declared: set) -> list[tuple[str, DeclaredEvent]]:
        """``Privatized(epsilon=...)`` costs of this sender not charged yet (once per account key)."""
        out = []
        for declaration in schema.values():
            if isinstance(declaration, Privatized) and declaration.epsilon is not None:
                key = (b, sender, declaration.account_key)
                if key not in self._declared and key not in declared and all(k != key[2] for k, _ in out):
                    event = DeclaredEvent(declaration.epsilon, declaration.delta, declaration.description)
                    out.append((declaration.account_key, event))
        return out

    def _events(self, batch: MessageBatch, schema: dict, sensitive: list[str], row: int, epsilon: float) -> list:
        """The (event, partition) pairs one row costs: one release per sensitive field."""
        return [(self.noise.event(epsilon), self._partition(batch, schema[name], row)) for name in sensitive]

    @staticmethod
    def _partition(batch: MessageBatch, declaration: Sensitive, row: int):
        if declaration.partition_field is None:
            return None
        value = np.asarray(batch.payload[declaration.partition_field][row]).item()
        return (declaration.partition_field, value)

    def _noised(
        self, batch: MessageBatch, name: str, declaration: Sensitive, sensitivity: np.ndarray, epsilons: np.ndarray
    ) -> np.ndarray:
        values = np.asarray(batch.payload[name], np.float64)
        values = clip_to_declaration(values, declaration, batch.payload, np.arange(len(batch)))
        sensitivity = np.broadcast_to(_broadcast(sensitivity, values), values.shape)
        if declaration.affects == "all":
            flat = sensitivity.reshape(len(batch), -1)
            total = flat.sum(axis=1) if self.noise.mechanism == "laplace" else np.sqrt((flat**2).sum(axis=1))
            sensitivity = np.broadcast_to(_broadcast(total, values), values.shape)
        noised = values.copy()
        for row in range(len(batch)):
            rng = self.rng(int(batch.replica[row]), int(batch.sender[row]), batch.kind)
            scale = self.noise.scale(np.asarray(sensitivity[row]), float(epsilons[row]))
            noised[row] = self.noise.release(values[row], rng, scale)
        return noised


def _check_epsilon(epsilon: float) -> None:
    if isinstance(epsilon, bool) or not isinstance(epsilon, int | float | np.floating) or not epsilon > 0:
        raise ValueError(f"epsilon must be a number > 0, got {epsilon!r}")
    if not np.isfinite(epsilon):
        raise ValueError("epsilon must be finite under a DP wrapper; remove the wrapper for no privacy")
