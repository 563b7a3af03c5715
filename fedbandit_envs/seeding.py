"""Named, independent random streams derived from one seed.

Every source of randomness in a simulation draws from its own stream, so that switching one
component on or off (DP noise, a byzantine agent, another learner) never changes the draws of the
others. A stream is a :class:`numpy.random.SeedSequence` child addressed by a fixed index, which keeps
the streams stable when new ones are appended to :data:`STREAM_NAMES`.

The streams handed to learner code (:data:`LEARNER_STREAMS`: the algorithm's own ``agents`` stream and a hosted
coordinator's ``coordinator`` stream) are derived one way: each is a fresh SeedSequence keyed by a BLAKE2b digest of
its child, so nothing a learner holds (a SeedSequence's ``entropy``, a Generator's ``bit_generator.seed_seq``) gives
it the run's seed, and with it the hidden instance, the reward noise or the DP noise of the other streams. This hides
the seed; it does not make an unknown seed out of a known one: a learner that knows which seeds a run uses (seeds
0 .. n-1, say) can derive their streams as the library does and recognise its own.

Noise drawn from these streams is simulation-grade: reproducible, not cryptographically secure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from fedbandit_envs.validation import check_distinct, check_int, check_seeds

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

#: The streams that learner code (populations, agents, hosted coordinators) receives: derived one way.
LEARNER_STREAMS: frozenset[str] = frozenset({"agents", "coordinator"})

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

    @classmethod
    def fixed(cls, seed: int | None) -> SeedStreams | None:
        """The streams of an optional fixed seed (``instance_seed``, ``topology_seed``): None when it is not set."""
        return None if seed is None else cls.from_seed(seed)

    def sequence(self, name: str) -> np.random.SeedSequence:
        """The SeedSequence of the named stream."""
        try:
            index = STREAM_NAMES.index(name)
        except ValueError:
            raise ValueError(f"unknown random stream {name!r}; known streams: {STREAM_NAMES}") from None
        child = np.random.SeedSequence(
            self.root.entropy, spawn_key=(*self.root.spawn_key, index), pool_size=self.root.pool_size
        )
        return _one_way(child) if name in LEARNER_STREAMS else child

    def generator(self, name: str) -> np.random.Generator:
        """A fresh Generator on the named stream (the same draws every time it is asked for)."""
        return np.random.default_rng(self.sequence(name))

    def agent_sequence(self, agent_index: int) -> np.random.SeedSequence:
        """The SeedSequence of one agent, a child of the ``agents`` stream."""
        parent = self.sequence("agents")
        return np.random.SeedSequence(
            parent.entropy, spawn_key=(*parent.spawn_key, int(agent_index)), pool_size=parent.pool_size
        )


def _one_way(sequence: np.random.SeedSequence) -> np.random.SeedSequence:
    """A root SeedSequence keyed by a BLAKE2b digest of ``sequence`` (its entropy, spawn key and pool size).

    The result's draws are as independent of ``sequence``'s as those of any other child, and its attributes reveal
    nothing of ``sequence``: its entropy is the 128-bit digest and its spawn key is empty.
    """
    entropy = sequence.entropy
    words = (int(entropy),) if isinstance(entropy, int | np.integer) else tuple(int(word) for word in entropy or ())
    material = repr((words, tuple(sequence.spawn_key), sequence.pool_size)).encode()
    digest = hashlib.blake2b(material, digest_size=16, person=b"fedbandit-stream").digest()
    return np.random.SeedSequence(int.from_bytes(digest, "little"), pool_size=sequence.pool_size)


class EpisodeSeeds:
    """The seeds of an environment's successive episodes.

    ``next(seed)`` with an int restarts the sequence from that seed (and returns it, so the episode is
    exactly the run of that seed); ``next(None)`` continues the sequence with a fresh child seed (the
    first call without any seed draws fresh entropy), as Gymnasium's ``reset(seed=None)`` does.
    """

    def __init__(self) -> None:
        self._master: np.random.SeedSequence | None = None

    def next(self, seed: int | None) -> SeedLike:
        """The seed of the next episode (``seed``: None, or an int in [0, 2**63 - 1] as ``run`` takes)."""
        if seed is not None:
            seed = check_int("seed", seed, 0)
            self._master = np.random.SeedSequence(seed)
            return seed
        if self._master is None:
            self._master = np.random.SeedSequence()
        return self._master.spawn(1)[0]


#: How a set of runs' seeds may be given: a count ``n`` (seeds ``0 .. n-1``), text (:func:`parse_seeds`) or the seeds.
SeedsLike = int | str | Sequence[int]


#: Most runs one sweep or ``run`` call takes (a larger count would fill memory building its seed list).
MAX_SEEDS = 10**6


def _check_run_count(count: int) -> None:
    if count > MAX_SEEDS:
        raise ValueError(f"at most {MAX_SEEDS} seeds per sweep or run, got {count}; split them over several sweeps")


def explicit_seeds(seeds: Iterable[int]) -> tuple[int, ...]:
    """The seeds as a tuple of Python ints, checked: a non-empty sequence of distinct non-negative integers.

    Any iterable of integers is accepted (a list, ``range(100, 110)``, a numpy array); a bare count or text
    is refused here (use :func:`resolve_seeds`), so ``seeds=5`` never silently means one run or five. The
    type and range of each seed are checked by :func:`~fedbandit_envs.validation.check_seeds`.
    """
    out = tuple(check_seeds(seeds))
    _check_run_count(len(out))
    check_distinct("seeds", out, "each names one run")
    return out


def parse_seeds(text: str) -> int | tuple[int, ...]:
    """Seeds written as text, as the command line takes them.

    * ``"5"``: a count, five runs with seeds ``0 .. 4`` (returned as the int 5, checked by :func:`resolve_seeds`);
    * ``"100:110"``: the half-open range ``100 .. 109`` (like Python's ``range(100, 110)``);
    * ``"3,7,9"``: exactly these seeds (``"7,"`` is the single seed 7).
    """
    text = text.strip()
    fix = "write a count (5 = seeds 0..4), a half-open range START:STOP (100:110 = seeds 100..109) or a list 3,7,9"
    try:
        if ":" in text:
            start, _, stop = text.partition(":")
            first, last = int(start), int(stop)
            if first < 0 or last <= first:
                raise ValueError(f"the range {text!r} is empty or negative; STOP must exceed START >= 0")
            _check_run_count(last - first)
            return tuple(range(first, last))
        if "," in text:
            parts = text.removesuffix(",").split(",")
            if not all(part.strip() for part in parts):
                raise ValueError("an entry of the list is empty")
            return explicit_seeds(int(part) for part in parts)
        return int(text)  # a count; resolve_seeds checks it is positive
    except ValueError as error:
        raise ValueError(f"cannot read seeds {text!r} ({error}); {fix}") from None


def resolve_seeds(seeds: SeedsLike) -> tuple[int, ...]:
    """The explicit seeds of a count (``n`` -> ``0 .. n-1``), a text (:func:`parse_seeds`) or a sequence."""
    if isinstance(seeds, str):
        seeds = parse_seeds(seeds)
    if isinstance(seeds, bool):
        raise TypeError(f"seeds must be a count, a text such as '100:110' or a sequence of seeds, got {seeds!r}")
    if isinstance(seeds, int | np.integer):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive number of runs (seeds 0..n-1) or a list of seeds, got {seeds}")
        _check_run_count(int(seeds))
        return tuple(range(int(seeds)))
    return explicit_seeds(seeds)
