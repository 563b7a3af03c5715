"""Arrays and mappings that no holder can change: what the environment shares with an untrusted learner.

numpy lets whoever holds a read-only array that owns its memory make it writeable again
(``array.setflags(write=True)``), and a read-only view leads to such an array through ``view.base``. So a
read-only flag alone does not stop a learner from rewriting an array the environment still reads (an arm's
context, a capacity, a message's count or a routed header the ledger tallies later). The arrays here are
backed by an immutable ``bytes`` object instead: neither they nor any view of them can be made writeable.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["FrozenDict", "frozen", "is_frozen"]


def frozen(array: ArrayLike) -> np.ndarray:
    """An immutable copy of ``array`` (same dtype and shape): read-only for every holder, for good."""
    array = np.asarray(array)
    flat = np.frombuffer(array.tobytes(), array.dtype)
    return flat if array.ndim == 1 else flat.reshape(array.shape)


def is_frozen(array: np.ndarray) -> bool:
    """Whether ``array`` is read-only and its memory belongs to an immutable ``bytes`` object (so it stays so)."""
    if array.flags.writeable:
        return False
    base = array
    while isinstance(base.base, np.ndarray):
        base = base.base
    return isinstance(base.base, bytes)


class FrozenDict(dict):
    """A ``dict`` whose items cannot be set, replaced or removed after construction (a message payload).

    Reads are those of a plain ``dict``; every mutating method raises ``TypeError``. It pickles and copies
    as a ``FrozenDict`` of the same items.
    """

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("this mapping is frozen: build a new message (or a new dict) instead of changing it")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[Any, Any]]]:
        return FrozenDict, (dict(self),)
