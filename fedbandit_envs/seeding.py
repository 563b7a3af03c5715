"""Named, independent random streams derived from one seed.

Every source of randomness in a simulation draws from its own stream, so that switching one
component on or off (DP noise, a byzantine agent, another learner) never changes the draws of the
others. A stream is a :class:`numpy.random.SeedSequence` child addressed by a fixed index, which keeps
the streams stable when new ones are appended to :data:`STREAM_NAMES`.

Noise drawn from these streams is simulation-grade: reproducible, not cryptographically secure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The named streams, in a fixed order. Append new names at the end only: the index is the key.
STREAM_NAMES: tuple[str, ...] = (
    "instance",
    "rewards",
    "contexts",
    "topology",
    "channel",
    "dp",
    "adversary",
    "agents",
    "coordinator",
    "arrivals",
)

SeedLike = int | np.random.SeedSequence | None


def _as_seed_sequence(seed: SeedLike) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise TypeError(f"seed must be a non-negative int or None, got {seed!r}")
    return np.random.SeedSequence(int(seed))


@dataclass(frozen=True)
class SeedStreams:
    """The independent random streams of one simulation run (one replica).

    Create it with :meth:`from_seed`; ask for a stream by name with :meth:`generator` or
    :meth:`sequence`. Agent streams are further split per agent with :meth:`agent_sequence`.
    """

    root: np.random.SeedSequence

    @classmethod
    def from_seed(cls, seed: SeedLike) -> SeedStreams:
        """Build the streams of a run from an int seed (or a SeedSequence, or None for fresh entropy)."""
        return cls(_as_seed_sequence(seed))

    def sequence(self, name: str) -> np.random.SeedSequence:
        """The SeedSequence of the named stream."""
        try:
            index = STREAM_NAMES.index(name)
        except ValueError:
            raise ValueError(f"unknown random stream {name!r}; known streams: {STREAM_NAMES}") from None
        return np.random.SeedSequence(
            self.root.entropy, spawn_key=(*self.root.spawn_key, index), pool_size=self.root.pool_size
        )

    def generator(self, name: str) -> np.random.Generator:
        """A fresh Generator on the named stream (the same draws every time it is asked for)."""
        return np.random.default_rng(self.sequence(name))

    def agent_sequence(self, agent_index: int) -> np.random.SeedSequence:
        """The SeedSequence of one agent, a child of the ``agents`` stream."""
        parent = self.sequence("agents")
        return np.random.SeedSequence(
            parent.entropy, spawn_key=(*parent.spawn_key, int(agent_index)), pool_size=parent.pool_size
        )


class EpisodeSeeds:
    """The seeds of an environment's successive episodes.

    ``next(seed)`` with an int restarts the sequence from that seed (and returns it, so the episode is
    exactly the run of that seed); ``next(None)`` continues the sequence with a fresh child seed (the
    first call without any seed draws fresh entropy), as Gymnasium's ``reset(seed=None)`` does.
    """

    def __init__(self) -> None:
        self._master: np.random.SeedSequence | None = None

    def next(self, seed: int | None) -> SeedLike:
        """The seed of the next episode."""
        if seed is not None:
            self._master = np.random.SeedSequence(int(seed))
            return int(seed)
        if self._master is None:
            self._master = np.random.SeedSequence()
        return self._master.spawn(1)[0]
