"""The layouts of the messages of an episode: the metadata the ledger does not charge, bounded per episode.

A message's kind, its fields' names, dtypes and ranks, and its privacy declaration are metadata: the ledger charges
payload bytes, not these. So that they cannot carry data for free, an episode lets each replica use at most
:data:`MAX_KINDS` kinds, each with at most :data:`MAX_KIND_LAYOUTS` layouts (the first batches of a kind fix them);
a batch that would exceed either is refused with a ``ValueError``. The row shapes of the fields are not part of a
layout here: a field's entries are charged, and a field with no entries has the one row shape ``(0,)``
(:data:`~fedbandit_envs.channel.messages.EMPTY_ROW`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedbandit_envs.channel.messages import MessageBatch
from fedbandit_envs.reference import reference_active

__all__ = ["MAX_KINDS", "MAX_KIND_LAYOUTS", "EpisodeLayouts"]

#: Most message kinds one replica may use in an episode.
MAX_KINDS = 16
#: Most layouts (field names, dtypes and ranks, and privacy declaration) one kind may have in a replica's episode.
MAX_KIND_LAYOUTS = 2
#: Layout keys (which include row shapes) remembered as allowed for every replica; past it they are forgotten.
KNOWN_KEYS = 1 << 12


def _signature(key: tuple) -> tuple:
    """The layout of a :meth:`MessageBatch.layout_key`: the kind, each field's name, dtype and rank, the privacy."""
    kind, fields, privacy = key
    return kind, tuple([(name, dtype, len(shape)) for name, dtype, shape in fields]), privacy


class EpisodeLayouts:
    """The layouts each replica has used in the episode, and the limits on them (see the module docstring).

    A batch whose layout key is one every replica may already use passes at once (by identity or equality with the
    kind's last one, then by a set of such keys); the reference mode (:mod:`fedbandit_envs.reference`) works out
    every batch's layouts per replica.
    """

    def __init__(self, num_replicas: int) -> None:
        self._num_replicas = num_replicas
        self._used: dict[tuple, np.ndarray] = {}  # layout -> (B,) bool: the replicas that used it
        self._layouts: dict[str, np.ndarray] = {}  # kind -> (B,) int64: its layouts used per replica
        self._kinds = np.zeros(num_replicas, np.int64)  # kinds used per replica
        self._allowed: set[tuple] = set()  # layout keys whose layout every replica has used
        self._last: dict[str, tuple] = {}  # kind -> the allowed layout key it had last

    def check(self, batches: Sequence[MessageBatch]) -> None:
        """Register the layouts of ``batches`` (whose headers are valid); ValueError if one exceeds the limits.

        Nothing is registered when a batch is refused.
        """
        last = self._last
        for batch in batches:
            key = batch.layout_key()
            known = last.get(batch.kind)
            if (known is not key and known != key and key not in self._allowed) or reference_active():
                self._register(batches)
                return
            last[batch.kind] = key

    def _register(self, batches: Sequence[MessageBatch]) -> None:
        """:meth:`check` for batches of which one at least has a layout some replica has not used yet."""
        state: tuple[dict, dict, np.ndarray] = (dict(self._used), dict(self._layouts), self._kinds)  # working copies
        for batch in batches:
            state = self._with_layout(batch, batch.layout_key(), *state)
        self._used, self._layouts, self._kinds = state
        for batch in batches:
            key = batch.layout_key()
            used = self._used.get(_signature(key))
            if used is not None and used.all():  # every replica may send it from now on
                if len(self._allowed) >= KNOWN_KEYS:
                    self._allowed.clear()
                self._allowed.add(key)
                self._last[batch.kind] = key

    def _with_layout(
        self, batch: MessageBatch, key: tuple, used: dict, layouts: dict, kinds: np.ndarray
    ) -> tuple[dict, dict, np.ndarray]:
        """``used``, ``layouts`` and ``kinds`` with the layout of ``batch`` added for its rows' replicas (or a refusal).

        The dicts are updated in place (they are working copies); the arrays in them are replaced, never written.
        """
        layout = _signature(key)
        present = np.zeros(self._num_replicas, bool)
        present[batch.replica] = True
        before = used.get(layout)
        new = present if before is None else present & ~before
        if not new.any():
            return used, layouts, kinds
        counts = layouts.get(batch.kind, np.zeros(self._num_replicas, np.int64))
        kinds = kinds + (new & (counts == 0))
        counts = counts + new
        if counts.max() > MAX_KIND_LAYOUTS:
            fields = ", ".join(f"{name}: {dtype} of {rank} axes" for name, dtype, rank in layout[1])
            raise ValueError(
                f"MessageBatch(kind={batch.kind!r}): a kind may have at most {MAX_KIND_LAYOUTS} layouts (field names, "
                f"dtypes and ranks, and privacy declaration) in an episode, and this one ({fields}) is another; send "
                "it under another kind (names and layouts are not charged, so they are fixed)"
            )
        if kinds.max() > MAX_KINDS:
            raise ValueError(
                f"MessageBatch(kind={batch.kind!r}): at most {MAX_KINDS} message kinds may be used in an episode"
            )
        used[layout] = present if before is None else before | present
        layouts[batch.kind] = counts
        return used, layouts, kinds
