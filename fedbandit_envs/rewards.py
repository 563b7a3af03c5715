"""Arm reward models: how an arm's mean and pre-drawn noise become a reward.

The environment draws reward **noise** in advance, independently of which arm is pulled, and a reward
model maps ``(mean, noise)`` to a reward with a vectorised transform. Drawing noise first gives common
random numbers (two algorithms that pull the same arm at the same slot see the same reward) and lets
many replicas run as arrays. A model declares the kind of noise it needs:

* ``"uniform"``: U[0, 1) draws from :meth:`numpy.random.Generator.random`;
* ``"normal"``: standard normal draws from :meth:`numpy.random.Generator.standard_normal`.

The environment owns the drawing (see :func:`draw_noise`); the model owns the transform. Noise is
simulation-grade: reproducible from a seed, not cryptographically secure.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import betaincinv, stdtrit

from fedbandit_envs.validation import check_keywords, did_you_mean

#: Slots of reward noise drawn at once per replica (fixed: it is part of the draw order).
NOISE_BLOCK = 256

NoiseKind = Literal["uniform", "normal"]

#: The noise kinds a reward model may declare.
NOISE_KINDS: tuple[str, ...] = ("uniform", "normal")

#: Signature of a vectorised quantile function ``q(means, u) -> rewards``.
QuantileFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def draw_noise(kind: NoiseKind, rng: np.random.Generator, size: int | tuple[int, ...]) -> np.ndarray:
    """Draw float64 noise of the given kind: U[0, 1) for ``"uniform"``, N(0, 1) for ``"normal"``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}; "
            "create one with numpy.random.default_rng(seed)"
        )
    if kind == "uniform":
        return rng.random(size)
    if kind == "normal":
        return rng.standard_normal(size)
    raise ValueError(f"noise kind must be one of {NOISE_KINDS}, got {kind!r}")


def _as_float_array(name: str, values: ArrayLike) -> np.ndarray:
    """Convert ``values`` to a float64 array, with a TypeError naming ``name`` if it is not numeric."""
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a numeric array, got {type(values).__name__}") from None


def _check_positive(name: str, value: float) -> float:
    """Return ``value`` as a float after checking it is a finite real number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise TypeError(f"{name} must be a positive real number, got {type(value).__name__}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value}; pass a positive number")
    return value


def _check_interval(name: str, interval: tuple[float, float]) -> tuple[float, float]:
    """Return ``interval`` as ``(lo, hi)`` floats after checking ``lo < hi`` (infinite ends allowed)."""
    try:
        lo, hi = (float(v) for v in interval)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (low, high) of numbers, got {interval!r}") from None
    if math.isnan(lo) or math.isnan(hi) or not lo < hi:
        raise ValueError(f"{name} must satisfy low < high (no NaN), got {interval!r}; pass e.g. (0.0, 1.0)")
    return lo, hi


class RewardModel(ABC):
    """Maps arm means and pre-drawn noise to rewards (vectorised, any array shape).

    Subclasses set the class attribute :attr:`noise_kind`, a short :attr:`name`, the reward support
    :attr:`bounds`, and implement :meth:`transform`. Means are checked once with :meth:`validate_means`
    (the environment does this when it builds an instance); :meth:`transform` is the hot path and does
    not re-check them.
    """

    #: Which noise the transform expects: ``"uniform"`` (U[0, 1)) or ``"normal"`` (N(0, 1)).
    noise_kind: ClassVar[NoiseKind]
    #: Short identifier, e.g. ``"bernoulli"``.
    name: str

    @property
    @abstractmethod
    def bounds(self) -> tuple[float, float]:
        """Support ``(low, high)`` of the reward, e.g. ``(0.0, 1.0)`` or ``(-inf, inf)``."""

    @property
    def mean_range(self) -> tuple[float, float]:
        """Closed interval of arm means the model supports (checked by :meth:`validate_means`)."""
        return (-math.inf, math.inf)

    @abstractmethod
    def transform(self, means: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Rewards for arms with ``means`` given ``noise`` of kind :attr:`noise_kind`.

        Elementwise; ``means`` and ``noise`` broadcast together (usually they have the same shape) and
        the result is a float64 array of the broadcast shape.
        """

    def validate_means(self, means: ArrayLike) -> None:
        """Raise ValueError if any mean is not finite or outside :attr:`mean_range`."""
        values = _as_float_array("means", means)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"means must be finite for the {self.name} reward model; found NaN or inf")
        lo, hi = self.mean_range
        if np.any(values < lo) or np.any(values > hi):
            bad = values[(values < lo) | (values > hi)].flat[0]
            raise ValueError(
                f"means must lie in [{lo}, {hi}] for the {self.name} reward model, found {bad}; "
                "rescale the means or choose another reward model"
            )

    def sample(self, means: ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Draw one reward per entry of ``means``: validate, draw noise with ``rng``, transform."""
        values = _as_float_array("means", means)
        self.validate_means(values)
        noise = draw_noise(self.noise_kind, rng, values.shape)
        return self.transform(values, noise)


class _UnitIntervalRewards(RewardModel):
    """Base of the [0, 1]-bounded models: rewards and means lie in [0, 1]."""

    @property
    def bounds(self) -> tuple[float, float]:
        """Rewards lie in [0, 1]."""
        return (0.0, 1.0)

    @property
    def mean_range(self) -> tuple[float, float]:
        """Means lie in [0, 1] (probabilities; a mean of 0 or 1 is a point mass)."""
        return (0.0, 1.0)


@dataclass(frozen=True)
class BernoulliRewards(_UnitIntervalRewards):
    """Bernoulli arms: reward ``1.0`` if ``u < mean`` else ``0.0`` for uniform noise ``u``.

    The reward has mean exactly ``mean``. Means must lie in [0, 1].
    """

    noise_kind: ClassVar[NoiseKind] = "uniform"
    name = "bernoulli"

    def transform(self, means: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``float(u < mean)`` elementwise."""
        return np.less(noise, means).astype(np.float64)


@dataclass(frozen=True)
class GaussianRewards(RewardModel):
    """Gaussian arms: reward ``mean + sigma * z`` for standard normal noise ``z``, optionally clipped.

    Without ``clip`` the reward has mean exactly ``mean`` and any finite mean is allowed. With
    ``clip=(low, high)`` the reward is clipped to that interval, so its mean is in general **not**
    ``mean`` any more (it is pulled towards the interval); regret is still computed from the nominal means.
    """

    sigma: float = 1.0
    clip: tuple[float, float] | None = None

    noise_kind: ClassVar[NoiseKind] = "normal"
    name = "gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", _check_positive("sigma", self.sigma))
        if self.clip is not None:
            object.__setattr__(self, "clip", _check_interval("clip", self.clip))

    @property
    def bounds(self) -> tuple[float, float]:
        """The clip interval if set, else ``(-inf, inf)``."""
        return self.clip if self.clip is not None else (-math.inf, math.inf)

    def transform(self, means: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``mean + sigma * z`` elementwise, clipped to ``clip`` when set."""
        rewards = np.add(means, self.sigma * np.asarray(noise, dtype=np.float64), dtype=np.float64)
        if self.clip is not None:
            np.clip(rewards, self.clip[0], self.clip[1], out=rewards)
        return rewards


@dataclass(frozen=True)
class BetaRewards(_UnitIntervalRewards):
    """General [0, 1]-bounded arms: ``Beta(c * mean, c * (1 - mean))`` with concentration ``c``.

    Sampled by the inverse CDF of uniform noise, so the reward has mean exactly ``mean`` and variance
    ``mean * (1 - mean) / (c + 1)``: small ``c`` approaches Bernoulli, large ``c`` concentrates at the
    mean. Means 0 and 1 give the point masses 0 and 1.
    """

    concentration: float = 2.0

    noise_kind: ClassVar[NoiseKind] = "uniform"
    name = "beta"

    def __post_init__(self) -> None:
        object.__setattr__(self, "concentration", _check_positive("concentration", self.concentration))

    def transform(self, means: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """Inverse Beta CDF of ``noise`` elementwise; exact 0 / 1 at means 0 / 1."""
        means, noise = np.broadcast_arrays(np.asarray(means, np.float64), np.asarray(noise, np.float64))
        rewards = np.array(means, dtype=np.float64)  # endpoints 0 and 1 are their own rewards
        inner = (means > 0.0) & (means < 1.0)
        if not np.all(inner):
            _check_endpoints(means[~inner])
        m = means[inner]
        c = self.concentration
        rewards[inner] = betaincinv(c * m, c * (1.0 - m), noise[inner])
        return rewards


def _check_endpoints(means: np.ndarray) -> None:
    """Raise ValueError unless every entry is exactly 0 or 1 (the Beta point masses)."""
    if not np.all((means == 0.0) | (means == 1.0)):
        raise ValueError(
            "means must lie in [0, 1] for the beta reward model (found NaN or a value outside); "
            "check them with validate_means before transforming"
        )


class QuantileRewards(RewardModel):
    """Any distribution given by a vectorised quantile function ``q(means, u) -> rewards``.

    ``quantile`` receives float64 arrays of means and U[0, 1) noise (broadcast to one shape) and must
    return rewards of that shape, finite and inside ``bounds``; :meth:`transform` checks this. For
    regret to be meaningful, ``q(mean, U)`` should have mean ``mean``. Means must lie in ``bounds``.
    Pickling the model needs a picklable ``quantile`` (a module-level function, not a lambda).
    """

    noise_kind: ClassVar[NoiseKind] = "uniform"

    def __init__(self, quantile: QuantileFn, bounds: tuple[float, float] = (0.0, 1.0), name: str = "quantile") -> None:
        if not callable(quantile):
            raise TypeError(f"quantile must be a callable q(means, u) -> rewards, got {type(quantile).__name__}")
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty str, got {name!r}")
        self.quantile = quantile
        self._bounds = _check_interval("bounds", bounds)
        self.name = name

    @property
    def bounds(self) -> tuple[float, float]:
        """The declared support ``(low, high)``."""
        return self._bounds

    @property
    def mean_range(self) -> tuple[float, float]:
        """A mean of a distribution supported on ``bounds`` lies in ``bounds``."""
        return self._bounds

    def transform(self, means: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``quantile(means, noise)``, checked to be finite, inside ``bounds`` and of the right shape."""
        means, noise = np.broadcast_arrays(np.asarray(means, np.float64), np.asarray(noise, np.float64))
        rewards = np.asarray(self.quantile(means, noise), dtype=np.float64)
        if rewards.shape != means.shape:
            raise ValueError(
                f"quantile returned shape {rewards.shape} for inputs of shape {means.shape}; "
                "it must be vectorised elementwise"
            )
        lo, hi = self._bounds
        if not np.all(np.isfinite(rewards)) or np.any(rewards < lo) or np.any(rewards > hi):
            raise ValueError(
                f"quantile returned rewards that are not finite or fall outside bounds=({lo}, {hi}); "
                "fix the quantile function or widen bounds"
            )
        return rewards

    def __repr__(self) -> str:
        return f"QuantileRewards(quantile={self.quantile!r}, bounds={self._bounds!r}, name={self.name!r})"

    def _key(self) -> tuple[object, ...]:
        return (self.quantile, self._bounds, self.name)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), *self._key()))


#: Reward models available by name in :func:`make_reward_model`.
REWARD_MODELS: dict[str, type[RewardModel]] = {
    "bernoulli": BernoulliRewards,
    "gaussian": GaussianRewards,
    "beta": BetaRewards,
}


def make_reward_model(spec: str | RewardModel, **params: object) -> RewardModel:
    """Build a reward model from a name (``"bernoulli"``, ``"gaussian"``, ``"beta"``) or pass one through.

    ``params`` are forwarded to the named model's constructor, e.g.
    ``make_reward_model("gaussian", sigma=0.5, clip=(0.0, 1.0))``. An instance is returned as is.
    """
    if isinstance(spec, RewardModel):
        if params:
            raise TypeError(
                f"reward model parameters {sorted(params)} were given with a RewardModel instance; "
                "configure the instance itself or pass a model name"
            )
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"reward_model must be a model name or a RewardModel, got {type(spec).__name__}")
    cls = REWARD_MODELS.get(spec.lower())
    if cls is None:
        raise ValueError(
            f"unknown reward model {spec!r}{did_you_mean(spec.lower(), REWARD_MODELS)}; valid names: "
            f"{sorted(REWARD_MODELS)} (or pass a RewardModel instance)"
        )
    check_keywords(f"reward model {spec!r}", params, sorted(inspect.signature(cls).parameters))
    return cls(**params)


# ---------------------------------------------------------------------------------------------------------
# Heavy-tailed models with finite variance (Dubey & Pentland's byzantine setting, spec §1.1 and §6 item 8)
# ---------------------------------------------------------------------------------------------------------


def _open_uniform(noise: np.ndarray) -> np.ndarray:
    """U[0, 1) noise clipped to [2^-54, 1 - 2^-54] (only an exact 0 moves), so quantiles stay finite."""
    return np.clip(np.asarray(noise, dtype=np.float64), 2.0**-54, 1.0 - 2.0**-54)


class _FiniteVarianceTails(RewardModel):
    """Base of the heavy-tailed models: ``mean`` plus a deviation of standard deviation ``sigma``.

    The deviation is drawn by the inverse CDF of uniform noise; the tail parameter (the field named
    :attr:`tail`) must exceed 2 for a finite variance. Subclasses are frozen dataclasses declaring the tail
    field, then ``sigma``, and implement :meth:`_deviation`.
    """

    #: The name of the tail parameter field (> 2 for a finite variance).
    tail: ClassVar[str]
    sigma: float

    noise_kind: ClassVar[NoiseKind] = "uniform"

    def __post_init__(self) -> None:
        value = _check_positive(self.tail, getattr(self, self.tail))
        if value <= 2.0:
            raise ValueError(f"{self.tail} must be > 2 for a finite variance, got {value}; pass e.g. {self.tail}=3")
        object.__setattr__(self, self.tail, value)
        object.__setattr__(self, "sigma", _check_positive("sigma", self.sigma))

    @property
    def bounds(self) -> tuple[float, float]:
        """Unbounded rewards (a model may be bounded on one side for each mean, but has no global bounds)."""
        return (-math.inf, math.inf)

    def transform(self, means: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """``mean + deviation(noise)`` elementwise."""
        return np.add(means, self._deviation(_open_uniform(noise)), dtype=np.float64)

    @abstractmethod
    def _deviation(self, uniform: np.ndarray) -> np.ndarray:
        """The deviation from the mean for noise in the open unit interval."""


@dataclass(frozen=True)
class StudentTRewards(_FiniteVarianceTails):
    """Student-t arms: ``mean + sigma * sqrt((nu - 2) / nu) * T_nu``, by the inverse CDF of uniform noise.

    ``T_nu`` has ``nu > 2`` degrees of freedom, so the reward has mean exactly ``mean`` and standard deviation
    exactly ``sigma`` (finite variance, polynomial tails: moments of order ``>= nu`` are infinite).
    """

    nu: float = 3.0
    sigma: float = 1.0

    tail: ClassVar[str] = "nu"
    name = "student_t"

    def _deviation(self, uniform: np.ndarray) -> np.ndarray:
        """``sigma * sqrt((nu-2)/nu) * t_nu^{-1}(u)``."""
        scale = self.sigma * math.sqrt((self.nu - 2.0) / self.nu)
        return scale * stdtrit(self.nu, uniform)


@dataclass(frozen=True)
class ParetoRewards(_FiniteVarianceTails):
    """Pareto arms, centred and scaled: ``mean + sigma * (P - E P) / sd(P)`` with ``P ~ Pareto(alpha, 1)``.

    ``P = (1 - u) ** (-1 / alpha)`` by the inverse CDF of uniform noise. With ``alpha > 2`` the reward has mean
    exactly ``mean`` and standard deviation exactly ``sigma``; its right tail is heavy, its left tail bounded
    (``reward >= mean - sigma * sqrt((alpha - 2) / alpha)``).
    """

    alpha: float = 3.0
    sigma: float = 1.0

    tail: ClassVar[str] = "alpha"
    name = "pareto"

    def _deviation(self, uniform: np.ndarray) -> np.ndarray:
        """The centred, scaled Pareto quantile ``sigma * (P - E P) / sd(P)``."""
        a = self.alpha
        mean_p = a / (a - 1.0)
        sd_p = math.sqrt(a / ((a - 1.0) ** 2 * (a - 2.0)))
        pareto = np.power(1.0 - uniform, -1.0 / a)
        return self.sigma * (pareto - mean_p) / sd_p


REWARD_MODELS.update({"student_t": StudentTRewards, "pareto": ParetoRewards})

#: A reward model accepted by name in :func:`make_reward_model` (any case): the keys of :data:`REWARD_MODELS`.
RewardModelName = Literal["bernoulli", "gaussian", "beta", "student_t", "pareto"]
