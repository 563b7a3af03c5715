"""Continual release of running sums through binary-tree mechanisms (one tree per stream entry).

Used by :class:`~wrappers.dp.wrappers.TreeMessageDP`. A ``Sensitive(aggregate="sum")`` field is read as
a running sum of records: each message's increment over the sender's previous message of that kind
enters the tree of that (sender, kind, field, entry) stream, and the tree's noisy prefix sum is sent
instead. Increments are clipped to the declared bounds (which must contain 0: a slot without a record
adds 0), so one record changes one increment by at most ``high - low``, the width the stream's noise is
calibrated on: a stream's declaration is that of its first release, as every ``Sensitive`` declaration is
fixed for the episode at its first use. The next increment is taken over the value actually sent
before, so a clipped jump is not carried into later records. A stream is released at most once per
slot (send it to ``NEIGHBOURS`` for several recipients) and costs its tree's guarantee once, charged
at its first release under the default key (it covers every record).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from typing_extensions import Unpack

from fedbandit_envs.channel.messages import MessageBatch
from fedbandit_envs.channel.privacy import Sensitive
from fedbandit_envs.core import AgentContext
from fedbandit_envs.privacy.accountant import TreeEvent
from fedbandit_envs.privacy.mechanisms import BinaryTreeMechanism, _TreeParameters
from fedbandit_envs.privacy.secure import SecureTreeSums
from fedbandit_envs.seeding import SeedStreams
from wrappers.dp.privatizer import NOISE_TAIL, MessagePrivatizer, NoiseSpec, PrivatizerOptions


class _SeededTrees:
    """One seeded :class:`BinaryTreeMechanism` per entry of a stream (the default mode), as a vector of sums."""

    def __init__(self, entries: int, parameters: _TreeParameters, rng: np.random.Generator) -> None:
        epsilon, length, width = parameters.epsilon, parameters.stream_length, parameters.sensitivity
        self.trees = [BinaryTreeMechanism(epsilon, length, width, rng=rng) for _ in range(entries)]

    @property
    def count(self) -> int:
        """Records appended so far."""
        return self.trees[0].count

    def add(self, records: np.ndarray) -> np.ndarray:
        """Append one record per entry; returns the private running sums."""
        return np.array([tree.add(x) for tree, x in zip(self.trees, records)])


class TreePrivatizer(MessagePrivatizer):
    """A message hook that replaces running sums by binary-tree noisy prefix sums.

    Args:
        epsilon: total epsilon of each stream (the tree splits it over its levels).
        secure: release every tree node through OpenDP (:class:`~fedbandit_envs.privacy.secure.SecureTreeSums`;
            same scale and charge, not reproducible) instead of the seeded
            :class:`~fedbandit_envs.privacy.mechanisms.BinaryTreeMechanism`.

    The keywords ``budget``, ``on_exhausted``, ``strict``, ``budget_delta`` and ``kinds`` are as in
    :class:`~wrappers.dp.privatizer.MessagePrivatizer`.
    """

    def __init__(self, epsilon: float, secure: bool = False, **options: Unpack[PrivatizerOptions]) -> None:
        super().__init__(NoiseSpec("laplace", secure=secure), epsilon, "strict", 1, **options)

    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Fresh trees; the stream length is the horizon (at most one message per slot per stream)."""
        super().reset(context, streams)
        self.horizon = context.horizon
        self._trees: dict[tuple, _SeededTrees | SecureTreeSums] = {}
        self._last: dict[tuple, np.ndarray] = {}
        self._released_slot = -1
        self._released: set[tuple] = set()  # streams released in slot _released_slot
        self._released_this_slot: set[tuple] = set()  # the same, with the releases of the call under way

    def __call__(self, slot: int, batches: list[MessageBatch]) -> list[MessageBatch]:
        """Privatize the slot's batches; each stream may be released once per slot.

        The step of a slot and the boundary hop after it (:meth:`FederatedMAB.exchange`) share the slot number, so a
        stream released in both raises. A call that raises releases nothing.
        """
        if slot != self._released_slot:
            self._released_slot, self._released = slot, set()
        self._released_this_slot = set(self._released)
        privatized = super().__call__(slot, batches)
        self._released = self._released_this_slot
        return privatized

    def _stream_key(self, batch: MessageBatch, name: str, row: int) -> tuple:
        return (int(batch.replica[row]), int(batch.sender[row]), batch.kind, name)

    def _events(self, batch: MessageBatch, schema: dict, sensitive: list[str], row: int, epsilon: float) -> list:
        """A stream's tree is charged once, at its first release."""
        events = []
        for name in sensitive:
            declaration = schema[name]
            if (
                declaration.aggregate != "sum"
                or declaration.bounds is None
                or not (declaration.bounds[0] <= 0.0 <= declaration.bounds[1])
            ):
                raise ValueError(
                    f"TreeMessageDP releases running sums: declare {name!r} as Sensitive(aggregate='sum', "
                    "bounds=(low, high)) with low <= 0 <= high"
                )
            key = self._stream_key(batch, name, row)
            if key in self._released_this_slot:
                raise ValueError(
                    f"agent {key[1]} released the running sum {name!r} of {batch.kind!r} twice in one slot; "
                    "send it once, to NEIGHBOURS, for several recipients"
                )
            self._released_this_slot.add(key)
            entries = int(np.prod(np.shape(batch.payload[name])[1:], dtype=np.int64))
            if key in self._trees:
                self._check_stream(key, name, entries)
                continue
            if entries == 0:
                raise ValueError(f"running sum {name!r} of {batch.kind!r} has no entries; send at least one")
            levels = self.horizon.bit_length()
            copies = entries if declaration.affects == "all" else 1
            events += [TreeEvent(epsilon, levels)] * copies
        return events

    def _check_representable(
        self, batch: MessageBatch, name: str, declaration: Sensitive, ranges: tuple, keep: np.ndarray, epsilons
    ) -> None:
        """Refuse, before anything is charged or drawn, streams whose noisy sums could overflow a float.

        A prefix sum adds at most ``horizon`` clipped increments and the noise of one node per level, each of
        scale ``(high - low) * levels / epsilon``.
        """
        low, high = declaration.bounds  # type: ignore[misc]
        levels = self.horizon.bit_length()
        with np.errstate(over="ignore"):
            scale = np.float64(high - low) * levels / float(epsilons[keep].min())
            reach = self.horizon * max(abs(low), abs(high)) + levels * NOISE_TAIL * scale
        if not np.isfinite(reach):
            raise ValueError(
                f"field {name!r} of {batch.kind!r}: running sums over {self.horizon} slots with bounds {(low, high)} "
                f"and epsilon {float(epsilons[keep].min()):g} could exceed the largest float; use narrower bounds"
            )

    def _check_stream(self, key: tuple, name: str, entries: int) -> None:
        """Refuse, before anything is charged, a release its open stream cannot take: other entries, or past T."""
        if entries != len(self._last[key]):
            raise ValueError(
                f"running sum {name!r} of {key[2]!r} from agent {key[1]} has {entries} entries, but its stream "
                f"opened with {len(self._last[key])}: a running sum keeps its entries for the whole episode"
            )
        if self._trees[key].count >= self.horizon:
            raise ValueError(f"stream {key} sent more than horizon={self.horizon} running sums")

    def _noised(
        self, batch: MessageBatch, name: str, declaration: Sensitive, ranges: tuple, epsilons: np.ndarray
    ) -> np.ndarray:
        """Each row's clipped increments enter its stream's trees; the noisy prefix sums are sent."""
        values = np.asarray(batch.payload[name], np.float64)
        low, high = declaration.bounds  # type: ignore[misc]
        noised = np.empty_like(values)
        for row in range(len(batch)):
            key = self._stream_key(batch, name, row)
            flat = values[row].reshape(-1)
            if key not in self._trees:
                parameters = _TreeParameters(float(epsilons[row]), self.horizon, high - low, "levels", False, None)
                if self.noise.secure:
                    self._trees[key] = SecureTreeSums(len(flat), parameters)
                else:
                    self._trees[key] = _SeededTrees(len(flat), parameters, self.rng(key[0], key[1], batch.kind))
                self._last[key] = np.zeros_like(flat)
            trees = self._trees[key]
            increments = np.clip(flat - self._last[key], low, high)
            self._last[key] = flat.copy()
            noised[row] = trees.add(increments).reshape(values[row].shape)
        return noised
