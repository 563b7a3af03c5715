"""Differential-privacy mechanisms shared by the DP wrappers and the reference agents.

One implementation serves both sides, so a wrapper that privatises outgoing messages and an agent that privatises
its own statistics draw noise the same way:

* calibration: :func:`laplace_scale`, :func:`gaussian_sigma_classical`, :func:`gaussian_sigma_analytic`,
  :func:`gaussian_delta`;
* one-shot releases: :class:`LaplaceMechanism` (li-song-fmab §1.5), :class:`GaussianMechanism` (solanki-pfcb §1.8);
* continual release of a running sum: :class:`BinaryTreeMechanism` (zhu-gossip-ucb §1.4, §2.4, D10, D13);
* interval releases of a running mean: :class:`IntervalRelease` with the schedules :class:`FixedInterval` and
  :class:`LemmaSeries` (dubey-pentland §2.1, D1, D3, D17, D18).

Sensitivities refer to the *replace one record* neighbouring relation used by all four specs. Every mechanism
reports its release as an event of :mod:`fedbandit_envs.privacy.accountant`.

**Simulation grade.** All noise is drawn from a :class:`numpy.random.Generator` passed in by the caller (normally the
run's ``"dp"`` seed stream), so experiments are reproducible. Floating-point Laplace / Gaussian sampling of this
kind is not a secure DP implementation (Mironov 2012); do not use it to protect real data. The DP wrappers'
``secure=True`` mode (:mod:`fedbandit_envs.privacy.secure`) releases through OpenDP's floating-point-safe
samplers instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from numbers import Integral
from typing import Any

import numpy as np
from scipy.special import log_ndtr

from fedbandit_envs.privacy.accountant import GaussianEvent, LaplaceEvent, TreeEvent, real_number
from fedbandit_envs.reference import reference_active

__all__ = [
    "BinaryTreeBank",
    "BinaryTreeMechanism",
    "FixedInterval",
    "GaussianMechanism",
    "IntervalRelease",
    "LaplaceMechanism",
    "LemmaSeries",
    "dyadic_blocks",
    "gaussian_delta",
    "gaussian_sigma_analytic",
    "gaussian_sigma_classical",
    "laplace_scale",
]

Shape = int | tuple[int, ...] | None


# ---------------------------------------------------------------------------------------------------- validation
def _positive_finite(name: str, value: Any) -> float:
    value = real_number(name, value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be finite and > 0, got {value}")
    return value


def _epsilon(value: Any, *, allow_inf: bool = False) -> float:
    value = real_number("epsilon", value)
    if allow_inf and value == math.inf:
        return value
    if not (value > 0 and math.isfinite(value)):
        hint = " (or math.inf for no noise)" if allow_inf else ""
        raise ValueError(f"epsilon must be finite and > 0{hint}, got {value}")
    return value


def _delta(value: Any) -> float:
    value = real_number("delta", value)
    if not 0 < value < 1:
        raise ValueError(f"delta must lie in (0, 1), e.g. 1e-5; got {value}")
    return value


def _generator(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")
    return rng


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


# ---------------------------------------------------------------------------------------------------- calibration
def laplace_scale(l1_sensitivity: float, epsilon: float) -> float:
    """Scale ``b = l1_sensitivity / epsilon`` of the Laplace mechanism (pure ``epsilon``-DP)."""
    return _positive_finite("l1_sensitivity", l1_sensitivity) / _epsilon(epsilon)


def gaussian_sigma_classical(
    l2_sensitivity: float, epsilon: float, delta: float, *, allow_large_epsilon: bool = False
) -> float:
    """Classical Gaussian-mechanism noise ``sigma = l2_sensitivity * sqrt(2 ln(1.25 / delta)) / epsilon``.

    The classical bound (Dwork & Roth 2014, Thm A.1) is proven for ``epsilon < 1`` only, so larger values raise
    ``ValueError`` unless ``allow_large_epsilon=True``. solanki-pfcb §1.8 / D-11 use this formula (natural log, D-09)
    for every message epsilon ``eps_z``: all ``eps_z`` are < 1 in the paper's grid (``eps <= 1.1``), but larger
    budgets (the spec's check at ``eps = 5``) give ``eps_z >= 1``. Pass ``allow_large_epsilon=True`` there and
    certify the release with :func:`gaussian_delta` (the spec's analytic check), which holds for any epsilon.
    """
    l2_sensitivity = _positive_finite("l2_sensitivity", l2_sensitivity)
    epsilon = _epsilon(epsilon)
    delta = _delta(delta)
    if epsilon >= 1 and not allow_large_epsilon:
        raise ValueError(
            f"epsilon must be < 1 for the classical Gaussian bound, got {epsilon}; use calibration='analytic' "
            "(gaussian_sigma_analytic) or pass allow_large_epsilon=True and check the result with gaussian_delta"
        )
    return l2_sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def gaussian_delta(l2_sensitivity: float, sigma: float, epsilon: float) -> float:
    """Exact ``delta(epsilon)`` of a Gaussian mechanism with noise ``sigma`` (Balle & Wang 2018, Thm 8).

    ``delta = Phi(D/(2 sigma) - epsilon sigma/D) - exp(epsilon) Phi(-D/(2 sigma) - epsilon sigma/D)`` with
    ``D = l2_sensitivity``; equivalently solanki-pfcb §1.8's ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``
    with ``mu = D / sigma``. Evaluated in log space, so it stays accurate for tiny deltas and large epsilons.
    """
    l2_sensitivity = _positive_finite("l2_sensitivity", l2_sensitivity)
    sigma = _positive_finite("sigma", sigma)
    epsilon = _epsilon(epsilon)
    return _gaussian_delta_normalised(sigma / l2_sensitivity, epsilon)


def _gaussian_delta_normalised(noise_multiplier: float, epsilon: float) -> float:
    mu = 1.0 / noise_multiplier
    log_first = float(log_ndtr(mu / 2 - epsilon / mu))
    log_second = float(log_ndtr(-mu / 2 - epsilon / mu))
    exponent = epsilon + log_second - log_first
    if exponent >= 0.0:  # the second term is at least the first: no delta (and no overflow of expm1 at huge epsilon)
        return 0.0
    return math.exp(log_first) * -math.expm1(exponent)


def gaussian_sigma_analytic(l2_sensitivity: float, epsilon: float, delta: float) -> float:
    """Analytic Gaussian mechanism (Balle & Wang 2018): the smallest sigma with ``gaussian_delta(sigma) <= delta``.

    Solved for ``sigma / l2_sensitivity`` with :func:`scipy.optimize.brentq` to a relative tolerance of 1e-12, then
    nudged up if needed so the returned sigma satisfies the inequality. Valid for every epsilon > 0.
    """
    from scipy.optimize import brentq  # here, not at the top: scipy.optimize takes 0.1 s to import

    l2_sensitivity = _positive_finite("l2_sensitivity", l2_sensitivity)
    epsilon = _epsilon(epsilon)
    delta = _delta(delta)

    def excess(multiplier: float) -> float:
        return _gaussian_delta_normalised(multiplier, epsilon) - delta

    high = math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon
    while excess(high) > 0:
        high *= 2.0
    low = high
    while excess(low) <= 0:
        low /= 2.0
    multiplier = brentq(excess, low, high, xtol=1e-15 * low, rtol=1e-12)
    while excess(multiplier) > 0:
        multiplier *= 1.0 + 1e-12
    return l2_sensitivity * multiplier


# ---------------------------------------------------------------------------------------------------- noise draws
def laplace_noise(scale: float | np.ndarray, rng: np.random.Generator, size: Shape = None) -> np.ndarray | float:
    """Laplace noise of scale ``scale`` (a number, or an array giving one scale per entry)."""
    return _generator(rng).laplace(0.0, scale, size=size)


def gaussian_noise(sigma: float | np.ndarray, rng: np.random.Generator, size: Shape = None) -> np.ndarray | float:
    """Gaussian noise of standard deviation ``sigma`` (a number, or an array giving one per entry)."""
    return _generator(rng).normal(0.0, sigma, size=size)


# ---------------------------------------------------------------------------------------------------- one-shot releases
class _AdditiveMechanism:
    """Shared sampling of the one-shot additive mechanisms (subclasses set ``_epsilon`` and define :meth:`_noise`)."""

    _epsilon: float

    @property
    def epsilon(self) -> float:
        """Epsilon of one release."""
        return self._epsilon

    def _noise(self, rng: np.random.Generator, size: Shape) -> np.ndarray | float:
        raise NotImplementedError

    def sample(self, shape: Shape, rng: np.random.Generator) -> np.ndarray | float:
        """Draw noise of the given shape (``None``: one float) from ``rng``."""
        noise = self._noise(rng, shape)
        return float(noise) if shape is None else noise

    def privatize(self, values: Any, rng: np.random.Generator) -> np.ndarray:
        """Return ``values + noise`` as float64, one independent draw per entry."""
        values = np.asarray(values, dtype=np.float64)
        return values + self._noise(rng, values.shape)


class LaplaceMechanism(_AdditiveMechanism):
    """Additive Laplace noise of scale ``l1_sensitivity / epsilon``: pure ``epsilon``-DP per release.

    Li & Song's epoch means (li-song-fmab §1.5) use ``l1_sensitivity = 1/n_r`` and ``epsilon = M * eps``, which gives
    their scale ``b_r = 1/(M eps n_r)``; the event then reports the true level ``M * eps`` (D13).

    Args:
        l1_sensitivity: L1 sensitivity of the whole released vector under replace-one, finite and > 0.
        epsilon: privacy parameter of one release, finite and > 0.
    """

    def __init__(self, l1_sensitivity: float, epsilon: float):
        self._sensitivity = _positive_finite("l1_sensitivity", l1_sensitivity)
        self._epsilon = _epsilon(epsilon)
        self._scale = self._sensitivity / self._epsilon

    @property
    def l1_sensitivity(self) -> float:
        """L1 sensitivity the mechanism was calibrated for."""
        return self._sensitivity

    @property
    def delta(self) -> float:
        """Always 0.0: the Laplace mechanism is pure DP."""
        return 0.0

    @property
    def scale(self) -> float:
        """Laplace scale ``b`` (standard deviation ``sqrt(2) b``)."""
        return self._scale

    def _noise(self, rng: np.random.Generator, size: Shape) -> np.ndarray | float:
        return laplace_noise(self._scale, rng, size)

    def event(self) -> LaplaceEvent:
        """The accountant event of one release."""
        return LaplaceEvent(self._epsilon)

    def __repr__(self) -> str:
        return f"LaplaceMechanism(l1_sensitivity={self._sensitivity!r}, epsilon={self._epsilon!r})"


class GaussianMechanism(_AdditiveMechanism):
    """Additive Gaussian noise calibrated to ``(epsilon, delta)``-DP per release.

    Args:
        l2_sensitivity: L2 sensitivity of the whole released vector under replace-one, finite and > 0.
        epsilon: privacy parameter of one release, finite and > 0.
        delta: privacy parameter of one release, in (0, 1).
        calibration: ``"classical"`` (``sqrt(2 ln(1.25/delta))``; solanki-pfcb §1.8) or ``"analytic"`` (Balle & Wang).
        allow_large_epsilon: permit ``epsilon >= 1`` with the classical calibration (see
            :func:`gaussian_sigma_classical`).
    """

    CALIBRATIONS = ("classical", "analytic")

    def __init__(
        self,
        l2_sensitivity: float,
        epsilon: float,
        delta: float,
        calibration: str = "classical",
        *,
        allow_large_epsilon: bool = False,
    ):
        if calibration not in self.CALIBRATIONS:
            raise ValueError(f"calibration must be one of {self.CALIBRATIONS}, got {calibration!r}")
        self._sensitivity = _positive_finite("l2_sensitivity", l2_sensitivity)
        self._epsilon = _epsilon(epsilon)
        self._delta = _delta(delta)
        self._calibration = calibration
        if calibration == "classical":
            self._sigma = gaussian_sigma_classical(
                self._sensitivity, self._epsilon, self._delta, allow_large_epsilon=allow_large_epsilon
            )
        else:
            self._sigma = gaussian_sigma_analytic(self._sensitivity, self._epsilon, self._delta)

    @property
    def l2_sensitivity(self) -> float:
        """L2 sensitivity the mechanism was calibrated for."""
        return self._sensitivity

    @property
    def delta(self) -> float:
        """Delta of one release."""
        return self._delta

    @property
    def calibration(self) -> str:
        """``"classical"`` or ``"analytic"``."""
        return self._calibration

    @property
    def sigma(self) -> float:
        """Standard deviation of the noise."""
        return self._sigma

    @property
    def noise_multiplier(self) -> float:
        """``sigma / l2_sensitivity``."""
        return self._sigma / self._sensitivity

    def _noise(self, rng: np.random.Generator, size: Shape) -> np.ndarray | float:
        return gaussian_noise(self._sigma, rng, size)

    def event(self) -> GaussianEvent:
        """The accountant event of one release."""
        return GaussianEvent(self._epsilon, self._delta, self.noise_multiplier)

    def __repr__(self) -> str:
        return (
            f"GaussianMechanism(l2_sensitivity={self._sensitivity!r}, epsilon={self._epsilon!r}, "
            f"delta={self._delta!r}, calibration={self._calibration!r})"
        )


# ---------------------------------------------------------------------------------------------------- binary tree
def dyadic_blocks(n: int) -> list[tuple[int, int]]:
    """The dyadic blocks tiling the prefix ``[1..n]``, as inclusive ``(first, last)`` pairs, largest first.

    One block per set bit of ``n`` (zhu-gossip-ucb §2.4, Algorithm 2): e.g. ``13 -> [(1, 8), (9, 12), (13, 13)]``.
    A block ``(first, last)`` has length ``lowbit(last)`` and ``first - 1`` is a multiple of twice that length.
    """
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    levels, ends = _prefix_nodes(int(n))
    return [(end - (1 << level) + 1, end) for level, end in zip(levels[::-1], ends[::-1])]


def _prefix_nodes(n: int) -> tuple[list[int], list[int]]:
    """Levels and last indices of the dyadic blocks tiling ``[1..n]``, smallest block first (``n``'s set bits)."""
    levels, ends = [], []
    while n:
        lowest = n & -n
        levels.append(lowest.bit_length() - 1)
        ends.append(n)
        n ^= lowest
    return levels, ends


class _TreeParameters:
    """Validated parameters of :class:`BinaryTreeMechanism` and :class:`BinaryTreeBank` (levels, epsilon split)."""

    SPLITS = ("levels", "ln_T")

    def __init__(
        self,
        epsilon: float,
        stream_length: int,
        sensitivity: float,
        split: str,
        noise_on_empty: bool,
        horizon: int | None,
    ):
        self._epsilon = _epsilon(epsilon, allow_inf=True)
        self._stream_length = _positive_int("stream_length", stream_length)
        self._sensitivity = _positive_finite("sensitivity", sensitivity)
        if split not in self.SPLITS:
            raise ValueError(f"split must be one of {self.SPLITS}, got {split!r}")
        if not isinstance(noise_on_empty, bool):
            raise TypeError(f"noise_on_empty must be a bool, got {type(noise_on_empty).__name__}")
        self._split = split
        self._noise_on_empty = noise_on_empty
        self._levels = self._stream_length.bit_length()
        self._eps_prime = self._split_epsilon(horizon)
        self._scale = 0.0 if math.isinf(self._eps_prime) else self._sensitivity / self._eps_prime

    def _split_epsilon(self, horizon: int | None) -> float:
        if self._split == "levels":
            if horizon is not None:
                raise ValueError("horizon is only used with split='ln_T'; drop it or set split='ln_T'")
            return self._epsilon / self._levels
        horizon = self._stream_length if horizon is None else _positive_int("horizon", horizon)
        if horizon < 2:
            raise ValueError(f"horizon must be >= 2 for split='ln_T' (ln T > 0), got {horizon}")
        return self._epsilon / math.log(horizon)

    # -------------------------------------------------------------- parameters
    @property
    def epsilon(self) -> float:
        """The epsilon the tree was built with."""
        return self._epsilon

    @property
    def stream_length(self) -> int:
        """Maximum number of records."""
        return self._stream_length

    @property
    def sensitivity(self) -> float:
        """L1 sensitivity of one record."""
        return self._sensitivity

    @property
    def split(self) -> str:
        """``"levels"`` or ``"ln_T"``."""
        return self._split

    @property
    def noise_on_empty(self) -> bool:
        """Whether nodes without an observed record are noised."""
        return self._noise_on_empty

    @property
    def levels(self) -> int:
        """Number of tree levels ``L = floor(log2(stream_length)) + 1``."""
        return self._levels

    @property
    def eps_prime(self) -> float:
        """Epsilon of one node's Laplace noise."""
        return self._eps_prime

    @property
    def scale(self) -> float:
        """Laplace scale of one node, ``sensitivity / eps_prime`` (0.0 when ``epsilon`` is infinite)."""
        return self._scale

    @property
    def epsilon_guaranteed(self) -> float:
        """The guarantee over the whole stream, ``levels * eps_prime`` (equals ``epsilon`` for ``split="levels"``)."""
        return self._levels * self._eps_prime

    def event(self) -> TreeEvent:
        """The accountant event of the whole stream: ``TreeEvent(epsilon_guaranteed, levels)``."""
        return TreeEvent(self.epsilon_guaranteed, self._levels)


class BinaryTreeMechanism(_TreeParameters):
    """Continual release of a running sum with the binary-tree mechanism (Chan, Shi & Song 2011).

    Implements zhu-gossip-ucb §2.4 with decisions D10 and D13. The prefix ``[1..n]`` is split into its dyadic blocks
    (:func:`dyadic_blocks`); each block (tree node) gets one Laplace draw of scale ``b = sensitivity / eps_prime``,
    drawn the first time a prefix needs it and reused for every later prefix containing it (never re-noised).

    * Levels: ``L = floor(log2(stream_length)) + 1 = stream_length.bit_length()``. Blocks have lengths ``2**j`` for
      ``j = 0 .. L - 1`` and each record lies in exactly one block per level, hence in at most ``L`` noised nodes.
    * ``split="levels"`` (default, D10): ``eps_prime = epsilon / L``, so the stream is ``epsilon``-DP exactly.
      ``split="ln_T"`` (paper-literal): ``eps_prime = epsilon / ln(horizon)``, which guarantees only
      ``L * eps_prime`` (about ``1.44 epsilon``); :attr:`epsilon_guaranteed` and :meth:`event` report that value.
    * ``noise_on_empty=False`` (default, D13): a node whose block holds no observed record (only :meth:`skip`-ped
      zeros) gets no noise; ``True`` noises every node.
    * ``epsilon=math.inf``: exact sums and no draws at all (zhu-gossip-ucb §2.5, T11).

    Memory is O(L): at time ``n`` the node used at level ``j`` is the last completed level-``j`` block, so one slot per
    level holds everything a future prefix can reuse. Draws happen in the order of zhu-gossip-ucb §2.4 (smallest block
    first). For a record the caller must ensure its value lies in a range of width ``sensitivity`` (e.g. rewards
    clipped to ``[lo, hi]`` with ``sensitivity = hi - lo``, D18). One instance serves one stream; agents keep one
    per arm.

    Args:
        epsilon: privacy budget of the whole stream, finite and > 0, or ``math.inf`` for no noise.
        stream_length: number of records the guarantee covers (zhu-gossip-ucb: ``T + 1`` with the init sample, D11).
        sensitivity: L1 sensitivity of one record (the width of its value range).
        split: ``"levels"`` or ``"ln_T"``; how ``epsilon`` is split across the levels.
        noise_on_empty: whether nodes without an observed record are noised too.
        rng: generator of the Laplace draws; required unless ``epsilon`` is ``math.inf``.
        horizon: the ``T`` of ``split="ln_T"`` (``eps_prime = epsilon / ln T``); defaults to ``stream_length``.
    """

    def __init__(
        self,
        epsilon: float,
        stream_length: int,
        sensitivity: float = 1.0,
        split: str = "levels",
        noise_on_empty: bool = False,
        rng: np.random.Generator | None = None,
        *,
        horizon: int | None = None,
    ):
        super().__init__(epsilon, stream_length, sensitivity, split, noise_on_empty, horizon)
        self._rng = None if self._scale == 0.0 and rng is None else _generator(rng)
        self._count = 0
        self._exact_sum = 0.0
        self._last_observed = 0
        self._noise_draws = 0
        self._node_end = [0] * self._levels  # end of the last completed block at each level (0: none yet)
        self._node_has_obs = [False] * self._levels
        self._node_noise: list[float | None] = [None] * self._levels

    # -------------------------------------------------------------- state
    @property
    def count(self) -> int:
        """Number of records appended so far (observed or skipped)."""
        return self._count

    @property
    def exact_sum(self) -> float:
        """The exact (non-private) running sum; for tests and diagnostics only."""
        return self._exact_sum

    @property
    def noise_draws(self) -> int:
        """Number of Laplace draws made so far."""
        return self._noise_draws

    @property
    def noisy_sum(self) -> float:
        """The private running sum: exact sum plus the noises of the current prefix's nodes.

        Draws (once) the noises of nodes needed for the first time; later reads reuse them.
        """
        return self._exact_sum + sum(self._current_noises().values())

    def add(self, value: float) -> float:
        """Append one observed record and return the noisy prefix sum over ``[1..count]``."""
        value = real_number("value", value)
        if math.isinf(value):
            raise ValueError("value must be finite; clip records to a range of width `sensitivity` first")
        self._check_room(1)
        self._count += 1
        self._exact_sum += value
        self._last_observed = self._count
        self._close_blocks()
        return self.noisy_sum

    def skip(self, n: int = 1) -> None:
        """Append ``n`` unobserved zero records (e.g. rounds in which this arm was not pulled), without releasing."""
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 0:
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        self._check_room(int(n))
        self._count += int(n)
        self._close_blocks()

    def _check_room(self, n: int) -> None:
        if self._count + n > self._stream_length:
            raise ValueError(
                f"stream_length={self._stream_length} exceeded (count {self._count} + {n}); "
                "build the mechanism with a larger stream_length"
            )

    def _close_blocks(self) -> None:
        """Move each level's slot to the last block completed at the current count."""
        for level in range(self._levels):
            end = (self._count >> level) << level
            if end == self._node_end[level]:
                break  # no new block at this level, hence none at higher levels
            self._node_end[level] = end
            self._node_has_obs[level] = self._last_observed > end - (1 << level)
            self._node_noise[level] = None

    def _current_noises(self) -> dict[tuple[int, int], float]:
        """Noises of the current prefix's nodes, drawing the missing ones (smallest block first)."""
        noises = {}
        for level in range(self._levels):
            if not (self._count >> level) & 1:
                continue
            end = self._node_end[level]
            noise = self._node_noise[level]
            if noise is None:
                if self._scale == 0.0 or not (self._node_has_obs[level] or self._noise_on_empty):
                    continue
                assert self._rng is not None, "a tree with a positive noise scale has a generator"
                noise = self._node_noise[level] = float(laplace_noise(self._scale, self._rng))
                self._noise_draws += 1
            noises[(end - (1 << level) + 1, end)] = noise
        return noises

    def node_noises(self) -> dict[tuple[int, int], float]:
        """Noise of each noised node of the current prefix, keyed by its inclusive block ``(first, last)``.

        ``noisy_sum - exact_sum`` equals the sum of these values (zhu-gossip-ucb §5.1 T8).
        """
        noises = self._current_noises()
        return {block: noises[block] for block in sorted(noises)}

    @staticmethod
    def prefix_blocks(n: int) -> list[tuple[int, int]]:
        """The dyadic blocks covering ``[1..n]`` (see :func:`dyadic_blocks`)."""
        return dyadic_blocks(n)

    def __repr__(self) -> str:
        return (
            f"BinaryTreeMechanism(epsilon={self._epsilon!r}, stream_length={self._stream_length}, "
            f"sensitivity={self._sensitivity!r}, split={self._split!r}, noise_on_empty={self._noise_on_empty})"
        )


class BinaryTreeBank(_TreeParameters):
    """Many independent :class:`BinaryTreeMechanism` streams on one global clock, held as arrays.

    Tree ``r`` of the bank behaves exactly like its own :class:`BinaryTreeMechanism` with the same parameters whose
    records are appended only by :meth:`add`: ``bank.add(trees, position, values)`` does, for every listed tree,
    ``tree.skip(position - tree.count)`` then ``tree.add(value)`` (zeros up to stream index ``position``, then the
    observed record at index ``position + 1``) and returns the noisy prefix sums. Levels, ``eps_prime``, the Laplace
    scale of a node, the D13 rule and the decomposition of a prefix into its dyadic blocks are those of
    :class:`BinaryTreeMechanism`, and so are the draws: tree ``r`` takes its noise from ``rngs[stream_of_tree[r]]``
    (trees may share a generator), node by node, smallest block first, trees in the order they are listed, and a
    prefix's node noises are added smallest block first. A bank and per-tree mechanisms built on generators in the
    same state therefore return bit-identical sums. Noise is drawn ahead in blocks per generator (the same values,
    fewer calls), so a generator given to a bank must not be used for anything else.

    State per tree: its record count, its exact sum, and per level the noise of the level's node (the last completed
    block of that level, all a later prefix can reuse; see :class:`BinaryTreeMechanism`) with a flag telling whether
    the node was noised. Only the levels of the count's set bits (its prefix nodes) are kept up to date: a level whose
    bit is clear is never read, and its node is replaced before that bit is set again.

    A bank built while the reference mode is on (:mod:`fedbandit_envs.reference`) is, for its whole life, the plain
    version: one :class:`BinaryTreeMechanism` per tree, fed record by record in the order above. The switch is read
    when the bank is built because the two representations cannot hand over a generator mid-stream (the arrays draw
    ahead).

    Args:
        num_trees: number of streams.
        epsilon, stream_length, sensitivity, split, noise_on_empty, horizon: as in :class:`BinaryTreeMechanism`,
            shared by every tree.
        rngs: generators of the Laplace draws; required unless ``epsilon`` is ``math.inf``.
        stream_of_tree: ``(num_trees,)`` index into ``rngs`` of each tree's generator; default: tree ``r`` uses
            ``rngs[r]``.
    """

    #: Minimum number of Laplace values drawn ahead per generator.
    DRAW_BLOCK = 1024

    def __init__(
        self,
        num_trees: int,
        epsilon: float,
        stream_length: int,
        sensitivity: float = 1.0,
        split: str = "levels",
        noise_on_empty: bool = False,
        rngs: Sequence[np.random.Generator] | None = None,
        stream_of_tree: np.ndarray | None = None,
        *,
        horizon: int | None = None,
    ):
        super().__init__(epsilon, stream_length, sensitivity, split, noise_on_empty, horizon)
        self._num_trees = _positive_int("num_trees", num_trees)
        self._counts = np.zeros(self._num_trees, np.int64)
        self._exact_sums = np.zeros(self._num_trees)
        self._noise_draws = np.zeros(self._num_trees, np.int64)
        # [level, tree]: the noise of the level's node (0.0 when not noised) and whether it was noised; the flat views
        # are indexed by level * num_trees + tree
        self._noise = np.zeros((self._levels, self._num_trees))
        self._noised = np.zeros((self._levels, self._num_trees), bool)
        self._noise_flat = self._noise.reshape(-1)
        self._noised_flat = self._noised.reshape(-1)
        self._level_cells = np.arange(self._levels) * self._num_trees
        self._rngs = [] if self._scale == 0.0 and rngs is None else [_generator(rng) for rng in rngs or ()]
        if self._scale > 0.0 and not self._rngs:
            raise TypeError("rngs must be a non-empty sequence of numpy.random.Generator unless epsilon is math.inf")
        if stream_of_tree is None:
            stream_of_tree = np.arange(self._num_trees) if self._rngs else np.zeros(self._num_trees, np.int64)
        self._stream_of_tree = np.asarray(stream_of_tree, np.int64).reshape(-1)
        if len(self._stream_of_tree) != self._num_trees:
            raise ValueError(f"stream_of_tree needs one entry per tree ({self._num_trees}), got {len(stream_of_tree)}")
        if self._rngs and not np.all((self._stream_of_tree >= 0) & (self._stream_of_tree < len(self._rngs))):
            raise ValueError(f"stream_of_tree entries must index rngs (0..{len(self._rngs) - 1})")
        # Laplace values drawn ahead: generator s's next values are _ahead_flat[_next[s]:_row_end[s]] (flat indices
        # into its row s). A generator feeds at most (its number of trees) * levels nodes per add, so a full buffer
        # always has room for one add.
        most_trees = int(np.bincount(self._stream_of_tree).max())
        self._ahead = np.empty((len(self._rngs), max(self.DRAW_BLOCK, most_trees * self._levels)))
        self._ahead_flat = self._ahead.reshape(-1)
        self._row_end = (np.arange(len(self._rngs)) + 1) * self._ahead.shape[1]
        self._next = self._row_end.copy()
        self._index = np.arange(self._num_trees * self._levels)
        self._plain: list[BinaryTreeMechanism] | None = None
        if reference_active():
            self._plain = [
                BinaryTreeMechanism(
                    epsilon,
                    stream_length,
                    sensitivity,
                    split,
                    noise_on_empty,
                    self._rngs[stream] if self._rngs else None,
                    horizon=horizon,
                )
                for stream in self._stream_of_tree.tolist()
            ]

    # -------------------------------------------------------------- state
    @property
    def num_trees(self) -> int:
        """Number of streams."""
        return self._num_trees

    def _per_tree(self, plain_attribute: str, array: np.ndarray) -> np.ndarray:
        """A copy of the per-tree ``array``; for a plain bank, each plain tree's ``plain_attribute`` instead."""
        if self._plain is not None:
            return np.array([getattr(tree, plain_attribute) for tree in self._plain], array.dtype)
        return array.copy()

    @property
    def counts(self) -> np.ndarray:
        """Records appended so far to each tree (a copy)."""
        return self._per_tree("count", self._counts)

    @property
    def exact_sums(self) -> np.ndarray:
        """The exact (non-private) running sum of each tree (a copy); for tests and diagnostics only."""
        return self._per_tree("exact_sum", self._exact_sums)

    @property
    def noise_draws(self) -> np.ndarray:
        """Laplace draws made so far by each tree (a copy)."""
        return self._per_tree("noise_draws", self._noise_draws)

    @property
    def noisy_sums(self) -> np.ndarray:
        """The private running sum of each tree (what its last :meth:`add` returned; 0.0 before any)."""
        if self._plain is not None:
            return np.array([tree.noisy_sum for tree in self._plain])
        trees = np.arange(self._num_trees)
        noisy = self._exact_sums.copy()
        for count in np.unique(self._counts):
            rows = trees[self._counts == count]
            noisy[rows] += self._prefix_noise(rows, self._level_cells.take(_prefix_nodes(int(count))[0]))
        return noisy

    def node_noises(self, tree: int) -> dict[tuple[int, int], float]:
        """Noise of each noised node of ``tree``'s current prefix, keyed by its inclusive block ``(first, last)``.

        The same as :meth:`BinaryTreeMechanism.node_noises`; the tree's noisy sum minus its exact sum is their sum.
        """
        if self._plain is not None:
            return self._plain[tree].node_noises()
        noises = {}
        for first, last in dyadic_blocks(int(self._counts[tree])):
            level = (last - first + 1).bit_length() - 1
            if self._noised[level, tree]:
                noises[(first, last)] = float(self._noise[level, tree])
        return noises

    # -------------------------------------------------------------- records
    def add(self, trees: np.ndarray, position: int, values: np.ndarray) -> np.ndarray:
        """Append to each of the distinct ``trees`` the zeros up to ``position`` and then its observed record.

        Args:
            trees: ``(R,)`` distinct tree indices, each holding at most ``position`` records.
            position: records before the new one (the new record is stream index ``position + 1``).
            values: ``(R,)`` finite records.

        Returns:
            ``(R,)`` noisy prefix sums over stream indices ``1 .. position + 1``.
        """
        trees = np.asarray(trees, np.int64).reshape(-1)
        values = np.asarray(values, np.float64).reshape(-1)
        if len(values) != len(trees):
            raise ValueError(f"add needs one value per tree, got {len(values)} values for {len(trees)} trees")
        if not np.isfinite(values).all():
            raise ValueError("values must be finite; clip records to a range of width `sensitivity` first")
        if (
            type(position) is not int
            and (isinstance(position, bool) or not isinstance(position, Integral))
            or position < 0
        ):
            raise ValueError(f"position must be an int >= 0, got {position!r}")
        count = int(position) + 1
        if count > self._stream_length:
            raise ValueError(
                f"stream_length={self._stream_length} exceeded (record {count}); "
                "build the bank with a larger stream_length"
            )
        if self._plain is not None:
            return self._plain_add(trees, int(position), values)
        before = self._counts[trees]
        if before.max(initial=0) > position:
            raise ValueError(f"a tree already holds more than position={position} records")
        self._counts[trees] = count
        exact = self._exact_sums[trees] + values
        self._exact_sums[trees] = exact
        if self._scale == 0.0 or not len(trees):
            return exact
        return exact + self._record_noise(trees, before, count)

    def _plain_add(self, trees: np.ndarray, position: int, values: np.ndarray) -> np.ndarray:
        """The reference path of :meth:`add`: each listed tree's own mechanism skips to ``position``, then adds."""
        assert self._plain is not None, "only a bank built in the reference mode has per-tree mechanisms"
        noisy = np.empty(len(trees))
        for n, (tree, value) in enumerate(zip(trees.tolist(), values.tolist())):
            mechanism = self._plain[tree]
            if mechanism.count > position:
                raise ValueError(f"a tree already holds more than position={position} records")
            mechanism.skip(position - mechanism.count)
            noisy[n] = mechanism.add(value)
        return noisy

    def _record_noise(self, trees: np.ndarray, before: np.ndarray, count: int) -> np.ndarray:
        """Replace the prefix nodes completed since each tree's last record, drawing those that need noise.

        Returns the trees' prefix noises (see :meth:`_prefix_noise`). Array methods rather than ``np.`` functions
        throughout: this runs once per round on a few hundred trees, where call overhead is most of the cost.
        """
        # Prefix node i of ``count`` (i = 0, 1, ...: smallest block first) is the level-levels[i] block ending at
        # ends[i] (ends decrease with i). It is new since the tree's last record (stream index ``before``) iff
        # before < ends[i], i.e. for i < new[r]; every tree has node 0, the one ending at ``count``.
        levels, ends = _prefix_nodes(count)
        level_cells = self._level_cells.take(levels)
        new = len(ends) - np.array(ends[::-1]).searchsorted(before, "right")
        rows = self._index[: len(trees)].repeat(new)  # (tree, node) pairs, tree by tree, smallest block first
        node = self._index[: len(rows)] - (new.cumsum() - new).repeat(new)
        cells = level_cells.take(node) + trees.take(rows)
        rank: np.ndarray  # of each draw among its tree's draws in this add (as bools 0/1 when a tree draws <= 2)
        if self._noise_on_empty:
            self._noised_flat[cells] = True
            draws, rank = new, node  # rank: position of each draw among its tree's draws in this add
        else:
            # D13: a new node holds an observation iff it holds the new record (node 0) or the previous one, i.e.
            # before > start[i] where start[i] = ends[i + 1] (0 for the last node). As ends decrease, only node 0
            # and the tree's last new node can hold one, so a tree draws once or twice.
            start = np.array(([-1] + ends[2:] + [0])[: len(ends)])
            need = before.take(rows) > start.take(node)
            self._noise_flat[cells] = 0.0
            self._noised_flat[cells] = need
            picked = need.nonzero()[0]
            rows, cells, rank = rows.take(picked), cells.take(picked), node.take(picked) > 0
            draws = np.bincount(rows, minlength=len(trees))
        self._noise_draws[trees] += draws
        tree_stream = self._stream_of_tree.take(trees)
        stream = tree_stream.take(rows)
        per_stream = np.bincount(stream, minlength=len(self._rngs))
        if np.count_nonzero(per_stream) < len(trees):  # a generator feeds several of the trees (each draws >= 1)
            rank = rank + self._earlier_draws(tree_stream, draws, per_stream).take(rows)
        width = self._ahead.shape[1]
        for s in (self._next + per_stream > self._row_end).nonzero()[0]:
            kept = self._row_end[s] - self._next[s]
            self._ahead[s, :kept] = self._ahead[s, width - kept :]
            self._ahead[s, kept:] = laplace_noise(self._scale, self._rngs[s], width - kept)
            self._next[s] = self._row_end[s] - width
        self._noise_flat[cells] = self._ahead_flat.take(self._next.take(stream) + rank)
        self._next += per_stream
        return self._prefix_noise(trees, level_cells)

    @staticmethod
    def _earlier_draws(tree_stream: np.ndarray, draws: np.ndarray, per_stream: np.ndarray) -> np.ndarray:
        """For each listed tree, the draws of the trees listed before it on the same generator."""
        order = tree_stream.argsort(kind="stable")
        in_order = draws.take(order)
        earlier = np.empty(len(draws), np.int64)
        earlier[order] = in_order.cumsum() - in_order - (per_stream.cumsum() - per_stream).take(tree_stream.take(order))
        return earlier

    def _prefix_noise(self, trees: np.ndarray, level_cells: np.ndarray) -> np.ndarray:
        """Sum of the noises of each tree's nodes at its prefix levels, smallest block first.

        ``level_cells`` holds ``level * num_trees`` for the prefix levels, ascending.
        """
        if not len(level_cells):
            return np.zeros(len(trees))
        noises = self._noise_flat.take(level_cells[:, None] + trees)  # 0.0 for a node without noise
        if len(trees) > 1:
            # a reduction over the leading axis of a C-contiguous (levels, trees) array adds the rows one after the
            # other, in order (numpy's pairwise summation only runs along a contiguous reduction axis)
            return np.add.reduce(noises, axis=0)
        total = noises[0]
        for level_noise in noises[1:]:
            total += level_noise
        return total

    def __repr__(self) -> str:
        return (
            f"BinaryTreeBank(num_trees={self._num_trees}, epsilon={self._epsilon!r}, "
            f"stream_length={self._stream_length}, sensitivity={self._sensitivity!r}, split={self._split!r}, "
            f"noise_on_empty={self._noise_on_empty})"
        )


# ---------------------------------------------------------------------------------------------------- interval release
class FixedInterval:
    """Release schedule at own counts ``f, 2f, 3f, ...`` (dubey-pentland §2.1 default, D1).

    Args:
        interval: the interval ``f``, an int >= 1.
    """

    def __init__(self, interval: int):
        self._interval = _positive_int("interval", interval)

    @classmethod
    def from_epsilon(cls, dp_eps: float) -> FixedInterval:
        """The spec's default ``f = ceil(1 / dp_eps)`` (rounded to 9 decimals first, so 1/0.1 gives 10)."""
        dp_eps = _positive_finite("dp_eps", dp_eps)
        return cls(max(1, math.ceil(round(1.0 / dp_eps, 9))))

    @property
    def interval(self) -> int:
        """The interval ``f``."""
        return self._interval

    def __call__(self, count: int) -> bool:
        """Whether own count ``count`` is a release point."""
        return count > 0 and count % self._interval == 0

    def __repr__(self) -> str:
        return f"FixedInterval({self._interval})"


class LemmaSeries:
    """Experimental schedule from the garbled "Private release of means" lemma (dubey-pentland D1).

    Release points ``W_1 < W_2 < ...`` with ``W_0 = 0`` and ``W_{i+1}`` the smallest ``x > W_i`` such that
    ``sum(k ** (-v/2) for k in W_i+1 .. x) >= 1 / dp_eps`` (the undefined ``y'`` dropped). Not used in reproduction.

    Args:
        dp_eps: the paper's epsilon parameter, finite and > 0.
        v: the exponent ``v`` of the interval mechanism.
    """

    def __init__(self, dp_eps: float, v: float = 1.1):
        self._threshold = 1.0 / _positive_finite("dp_eps", dp_eps)
        self._v = _positive_finite("v", v)
        self._points: set[int] = set()
        self._last = 0

    def _extend_to(self, count: int) -> None:
        while self._last < count:
            total, x = 0.0, self._last
            while total < self._threshold:
                x += 1
                total += x ** (-self._v / 2)
            self._points.add(x)
            self._last = x

    def __call__(self, count: int) -> bool:
        """Whether own count ``count`` is a release point."""
        self._extend_to(count)
        return count in self._points


class IntervalRelease:
    """Running mean of one stream of rewards, re-released with fresh Laplace noise at sparse schedule points.

    dubey-pentland §2.1 (Algorithm 1, phase 2) with D1, D3, D17 and D18:

    * each value is clipped to ``[0, 1]`` (D17) and added to the running sum and count;
    * when ``is_release(count)`` holds, the release is ``sum / count + Laplace(scale)`` with
      ``scale = count ** (v/2 - 1)``. The mean has sensitivity ``1 / count``, so the release is
      ``epsilon_j = (1/count) / scale = count ** (-v/2)``-DP (D18, §5.2);
    * between release points the last release is held unchanged and no noise is drawn (D3). Noisy means are not
      clipped (D17).

    Counts are treated as public (D16). Record :meth:`event` with the accountant after each release.

    Args:
        dp_eps: the paper's privacy parameter (its range is (0, 1]); sets the default schedule.
        rng: generator of the Laplace draws.
        v: exponent of the noise scale, in (0, 2); the paper uses (1, 1.5), default 1.1.
        schedule: callable ``is_release(count) -> bool``; default :meth:`FixedInterval.from_epsilon` (``dp_eps``).
    """

    def __init__(
        self,
        dp_eps: float,
        rng: np.random.Generator,
        v: float = 1.1,
        schedule: Callable[[int], bool] | None = None,
    ):
        self._dp_eps = _positive_finite("dp_eps", dp_eps)
        self._rng = _generator(rng)
        self._v = real_number("v", v)
        if not 0 < self._v < 2:
            raise ValueError(f"v must lie in (0, 2) (the paper uses 1 < v < 1.5, default 1.1), got {self._v}")
        if schedule is None:
            schedule = FixedInterval.from_epsilon(self._dp_eps)
        elif not callable(schedule):
            raise TypeError(f"schedule must be a callable is_release(count) -> bool, got {type(schedule).__name__}")
        self._schedule = schedule
        self._count = 0
        self._sum = 0.0
        self._released_mean = math.nan
        self._released_count = 0
        self._num_releases = 0

    @property
    def dp_eps(self) -> float:
        """The paper's privacy parameter."""
        return self._dp_eps

    @property
    def v(self) -> float:
        """Exponent of the noise scale."""
        return self._v

    @property
    def schedule(self) -> Callable[[int], bool]:
        """The release schedule ``is_release(count) -> bool``."""
        return self._schedule

    @property
    def count(self) -> int:
        """Own count of values seen."""
        return self._count

    @property
    def exact_mean(self) -> float:
        """Exact mean of the clipped values (NaN before the first value); never leaves the agent."""
        return self._sum / self._count if self._count else math.nan

    @property
    def released_mean(self) -> float:
        """The last noisy release (NaN before the first release)."""
        return self._released_mean

    @property
    def released_count(self) -> int:
        """Own count at the last release (0 before the first release)."""
        return self._released_count

    @property
    def num_releases(self) -> int:
        """Number of releases (= number of Laplace draws)."""
        return self._num_releases

    def scale_at(self, count: int) -> float:
        """Laplace scale of a release at own count ``count``: ``count ** (v/2 - 1)``."""
        return _positive_int("count", count) ** (self._v / 2 - 1)

    def epsilon_at(self, count: int) -> float:
        """Epsilon of a release at own count ``count``: ``count ** (-v/2)``."""
        return _positive_int("count", count) ** (-self._v / 2)

    @property
    def release_epsilon(self) -> float | None:
        """Epsilon of the last release (``None`` before the first release)."""
        return self.epsilon_at(self._released_count) if self._released_count else None

    def update(self, value: float) -> bool:
        """Add one value (clipped to [0, 1]); release if the new count is a schedule point. Returns whether it did."""
        value = real_number("value", value)
        self._count += 1
        self._sum += min(1.0, max(0.0, value))
        if not self._schedule(self._count):
            return False
        noise = float(laplace_noise(self.scale_at(self._count), self._rng))
        self._released_mean = self._sum / self._count + noise
        self._released_count = self._count
        self._num_releases += 1
        return True

    def event(self) -> LaplaceEvent:
        """The accountant event of the last release, ``LaplaceEvent(count ** (-v/2))``."""
        if not self._released_count:
            raise ValueError("no release yet: call event() after update() returned True")
        return LaplaceEvent(self.epsilon_at(self._released_count))

    def __repr__(self) -> str:
        return f"IntervalRelease(dp_eps={self._dp_eps!r}, v={self._v!r}, schedule={self._schedule!r})"
