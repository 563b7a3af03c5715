"""One switch for the plain reference path of every cache in the simulator.

Some parts of the simulator keep caches to go fast (the ledger's bulk tallies, the channel's expansion
plans, gossip blocks and their gossip headers, lazily gathered copies, TTL flooding's routing plans, the agents'
flooding layouts, the reward tape's blocks, the tree-aggregation banks). Each has a plain, obviously
correct version beside it. With the reference mode on, every cache runs its plain version instead, so
a test can play the same workload both ways and check the results are equal bit for bit.

The switch is read where a cache is used, so it applies to objects built before it was turned on.
It is on from the start when the environment variable ``FEDBANDIT_REFERENCE`` is set to anything but
``""`` or ``"0"``.

Example:
    >>> from fedbandit_envs.reference import reference_mode, reference_active
    >>> with reference_mode():
    ...     reference_active()
    True
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["reference_active", "reference_mode"]

_active = os.environ.get("FEDBANDIT_REFERENCE", "") not in ("", "0")


def reference_active() -> bool:
    """Whether the caches run their plain reference versions now."""
    return _active


@contextmanager
def reference_mode(active: bool = True) -> Iterator[None]:
    """Run the block with the reference mode on (or off, with ``active=False``), then restore it."""
    global _active
    if not isinstance(active, bool):
        raise TypeError(f"active must be True or False, got {active!r}")
    previous, _active = _active, active
    try:
        yield
    finally:
        _active = previous
