"""Bandit instances (the per-agent arm means) and the generators that draw them.

A federated bandit instance is a mean matrix ``means[i, k]``: agent ``i``'s mean of arm ``k``. The
learning target is the **global** mean ``mu_k = mean_i means[i, k]`` (plain unweighted average over
agents), and regret is pseudo-regret against the global best arm (Li-Song §1.2-1.3, D14; Zhu et al.
§1.1-1.2, D17). Homogeneous instances have identical rows. These quantities are evaluation-only: the
environment keeps them hidden from agents.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from fedbandit_envs.frozen import frozen
from fedbandit_envs.validation import check_int, check_keywords, check_real_array, did_you_mean

#: Signature of a user instance generator: ``(rng, num_agents, num_arms) -> means``.
InstanceFn = Callable[[np.random.Generator, int, int], ArrayLike]


def _check_count(name: str, value: int, minimum: int, symbol: str) -> int:
    """Return ``value`` as an int after checking it is an integer >= ``minimum`` (``symbol``: its paper name)."""
    return check_int(name, value, minimum, hint=f" ({symbol} < {minimum}); pass {name}>={minimum}")


def _check_rng(rng: object) -> np.random.Generator:
    """Return ``rng`` after checking it is a numpy Generator."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}; "
            "create one with numpy.random.default_rng(seed)"
        )
    return rng


def _validated_means(means: ArrayLike) -> np.ndarray:
    """A read-only float64 copy of ``means`` after checking it is a finite (M, K) matrix of numbers, K >= 2.

    Bools, strings and objects are refused (:func:`~fedbandit_envs.validation.check_real_array`).
    """
    matrix = check_real_array("means", means)
    if matrix.ndim != 2:
        raise ValueError(
            f"means must be 2-D with shape (num_agents, num_arms), got shape {matrix.shape}; "
            "use from_means to tile a (K,) vector"
        )
    if matrix.shape[0] < 1:
        raise ValueError("means must have at least one row (M < 1); pass one row per agent")
    if matrix.shape[1] < 2:
        raise ValueError(f"means must have at least two columns (K < 2), got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)):
        i, k = np.argwhere(~np.isfinite(matrix))[0]
        raise ValueError(f"means must be finite, found {matrix[i, k]} at [{i}, {k}]; replace NaN/inf")
    return frozen(matrix)


@dataclass(frozen=True, eq=False)
class BanditInstance:
    """Arm means of a federated bandit: ``means[i, k]`` is agent ``i``'s mean of arm ``k``.

    ``means`` is stored as a read-only float64 copy; all derived quantities are computed once and are
    read-only too. Ties (best arm, local best arms) go to the lowest arm index. For a homogeneous
    instance the global means are the shared row exactly (no averaging round-off).
    """

    means: np.ndarray
    #: Number of agents M.
    num_agents: int = field(init=False, repr=False)
    #: Number of arms K.
    num_arms: int = field(init=False, repr=False)
    #: True when all rows are identical.
    is_homogeneous: bool = field(init=False, repr=False)
    #: (K,) global means ``mean_i means[i, k]``.
    global_means: np.ndarray = field(init=False, repr=False)
    #: Index of the global best arm (lowest index on ties).
    best_arm: int = field(init=False, repr=False)
    #: Global mean of the best arm.
    best_mean: float = field(init=False, repr=False)
    #: (K,) gaps ``best_mean - global_means`` (all >= 0, zero at the best arm).
    gaps: np.ndarray = field(init=False, repr=False)
    #: (M,) each agent's local best arm (argmax of its row, lowest index on ties).
    local_best_arms: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        means = _validated_means(self.means)
        homogeneous = bool(np.all(means == means[0]))
        global_means = frozen(means[0] if homogeneous else means.mean(axis=0))  # frozen copies
        best_arm = int(np.argmax(global_means))
        best_mean = float(global_means[best_arm])
        derived = {
            "means": means,
            "num_agents": means.shape[0],
            "num_arms": means.shape[1],
            "is_homogeneous": homogeneous,
            "global_means": global_means,
            "best_arm": best_arm,
            "best_mean": best_mean,
            "gaps": frozen(best_mean - global_means),
            "local_best_arms": frozen(np.argmax(means, axis=1)),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def shape(self) -> tuple[int, int]:
        """``(num_agents, num_arms)``."""
        return (self.num_agents, self.num_arms)

    @property
    def min_gap(self) -> float:
        """Smallest positive gap Delta (Li-Song §0). Raises ValueError if all arms tie globally."""
        positive = self.gaps[self.gaps > 0]
        if positive.size == 0:
            raise ValueError("min_gap is undefined: all arms have the same global mean; pass delta explicitly")
        return float(positive.min())

    def pseudo_regret(self, arms: ArrayLike) -> np.ndarray:
        """Per-pull regret ``gaps[arms]`` against the global best arm (same shape as ``arms``)."""
        indices = np.asarray(arms)
        if indices.dtype == bool or not np.issubdtype(indices.dtype, np.integer):
            raise TypeError(f"arms must be an integer array of arm indices, got dtype {indices.dtype}")
        if indices.size and (indices.min() < 0 or indices.max() >= self.num_arms):
            raise ValueError(
                f"arms must be arm indices in [0, {self.num_arms - 1}], "
                f"got values in [{indices.min()}, {indices.max()}]"
            )
        return self.gaps[indices]

    def __getstate__(self) -> dict[str, object]:
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, object]) -> None:
        for value in state.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        self.__dict__.update(state)


#: What :func:`make_instance` builds an instance from: a generator name, an array of means, an instance or a callable.
InstanceSpec = str | ArrayLike | BanditInstance | InstanceFn


def homogeneous_uniform(num_agents: int, num_arms: int, rng: np.random.Generator) -> BanditInstance:
    """One row of U[0, 1) means shared by all agents (the homogeneous setting)."""
    num_agents = _check_count("num_agents", num_agents, 1, "M")
    num_arms = _check_count("num_arms", num_arms, 2, "K")
    row = _check_rng(rng).random(num_arms)
    return BanditInstance(np.tile(row, (num_agents, 1)))


def _centered_draw(num_agents: int, num_arms: int, rng: np.random.Generator, h_max: float) -> np.ndarray:
    """One draw of the Li-Song D15 centred perturbation (see :func:`heterogeneous_centered`)."""
    global_means = rng.uniform(0.0, 1.0, num_arms)
    u = rng.uniform(-1.0, 1.0, (num_agents, num_arms))
    u -= u.mean(axis=0)
    scale = np.max(np.abs(u), axis=0)
    scale[scale == 0.0] = 1.0  # a column of zeros stays zero
    half_width = np.minimum(np.minimum(global_means, 1.0 - global_means), h_max)
    return global_means + half_width * (u / scale)


def heterogeneous_centered(
    num_agents: int,
    num_arms: int,
    rng: np.random.Generator,
    h_max: float = 0.3,
    require_local_best_differs: bool = True,
    max_tries: int = 1000,
) -> BanditInstance:
    """Heterogeneous instance by centred perturbation (Li-Song decision D15).

    Draw global means ``mu_k ~ U[0, 1]`` and ``u[i, k] ~ U[-1, 1]``; centre ``u`` over agents; set
    ``h_k = min(mu_k, 1 - mu_k, h_max)`` and ``means[i, k] = mu_k + h_k * u[i, k] / max_i |u[i, k]|``.
    Then ``mean_i means[i, k] = mu_k`` up to float round-off and every mean lies in [0, 1]. With
    ``require_local_best_differs`` (needs ``num_agents >= 2`` and ``h_max > 0``) the draw is repeated,
    up to ``max_tries`` times, until some agent's local best arm differs from the global best arm.
    """
    num_agents = _check_count("num_agents", num_agents, 1, "M")
    num_arms = _check_count("num_arms", num_arms, 2, "K")
    max_tries = _check_count("max_tries", max_tries, 1, "max_tries")
    rng = _check_rng(rng)
    if isinstance(h_max, bool) or not isinstance(h_max, int | float | np.integer | np.floating):
        raise TypeError(f"h_max must be a real number, got {type(h_max).__name__}")
    if not (math.isfinite(h_max) and h_max >= 0):
        raise ValueError(f"h_max must be finite and >= 0, got {h_max}; the default is 0.3")
    if require_local_best_differs and (num_agents < 2 or h_max == 0):
        raise ValueError(
            "require_local_best_differs needs num_agents >= 2 and h_max > 0 "
            f"(got num_agents={num_agents}, h_max={h_max}); pass require_local_best_differs=False"
        )
    for _ in range(max_tries):
        instance = BanditInstance(_centered_draw(num_agents, num_arms, rng, float(h_max)))
        if not require_local_best_differs or np.any(instance.local_best_arms != instance.best_arm):
            return instance
    raise ValueError(
        f"no draw in max_tries={max_tries} had a local best arm that differs from the global best; "
        "increase h_max or max_tries"
    )


def from_means(means: ArrayLike, num_agents: int | None = None) -> BanditInstance:
    """Instance from given means: a (K,) vector is tiled to (num_agents, K); an (M, K) matrix is taken as is."""
    array = check_real_array("means", means)
    if array.ndim == 1:
        if num_agents is None:
            raise ValueError("num_agents is required when means is a (K,) vector; pass num_agents=M")
        num_agents = _check_count("num_agents", num_agents, 1, "M")
        return BanditInstance(np.tile(array, (num_agents, 1)))
    if array.ndim == 2 and num_agents is not None and array.shape[0] != num_agents:
        raise ValueError(f"means has {array.shape[0]} rows but num_agents={num_agents}; pass one row per agent")
    return BanditInstance(array)


#: A generator name accepted by :func:`make_instance` (any case).
InstanceName = Literal["uniform", "heterogeneous"]

#: Instance generators available by name in :func:`make_instance`.
INSTANCE_GENERATORS: dict[str, Callable[..., BanditInstance]] = {
    "uniform": homogeneous_uniform,
    "heterogeneous": heterogeneous_centered,
}


def _check_params(spec: str, generator: Callable[..., BanditInstance], params: Mapping[str, object]) -> None:
    """Raise TypeError (with a "did you mean") if ``params`` holds a name the generator does not accept."""
    check_keywords(f"instance {spec!r}", params, list(inspect.signature(generator).parameters)[3:])


def _check_shape(instance: BanditInstance, num_agents: int, num_arms: int) -> BanditInstance:
    """Return ``instance`` after checking it has shape (num_agents, num_arms)."""
    if instance.shape != (num_agents, num_arms):
        raise ValueError(
            f"means has shape {instance.shape} but num_agents={num_agents}, num_arms={num_arms}; "
            f"pass a ({num_agents}, {num_arms}) matrix or a ({num_arms},) vector"
        )
    return instance


def _from_array(means: ArrayLike, num_agents: int, num_arms: int) -> BanditInstance:
    """Instance from a (K,) vector or an (M, K) matrix, checked against the expected shape (numbers, not bools)."""
    try:
        array = np.asarray(means)
    except ValueError:  # ragged
        array = None
    if array is None or array.ndim == 0 or array.dtype.kind not in "biuf":
        raise TypeError(
            "the instance spec must be a generator name, an array of means, a BanditInstance or a "
            f"callable (rng, num_agents, num_arms) -> means; got {type(means).__name__}"
        )
    array = check_real_array("instance", means)
    if array.shape not in ((num_agents, num_arms), (num_arms,)):
        raise ValueError(
            f"the instance means have shape {array.shape} but num_agents={num_agents}, num_arms={num_arms}; "
            f"pass a ({num_agents}, {num_arms}) matrix or a ({num_arms},) vector"
        )
    return from_means(array, num_agents)


def _named_generator(spec: str, params: Mapping[str, object]) -> Callable[..., BanditInstance]:
    """The generator of a name (any case) after checking the name and its parameters."""
    generator = INSTANCE_GENERATORS.get(spec.lower())
    if generator is None:
        raise ValueError(
            f"unknown instance {spec!r}{did_you_mean(spec.lower(), INSTANCE_GENERATORS)}; valid names: "
            f"{sorted(INSTANCE_GENERATORS)} (or pass means, a BanditInstance or a callable (rng, num_agents, "
            "num_arms) -> means)"
        )
    _check_params(spec, generator, params)
    return generator


def _check_no_params(params: Mapping[str, object]) -> None:
    """Raise TypeError if parameters were given with a spec that is not a generator name."""
    if params:
        raise TypeError(
            f"instance parameters {sorted(params)} are only accepted with a generator name "
            f"{sorted(INSTANCE_GENERATORS)}"
        )


def check_instance(spec: InstanceSpec, num_agents: int, num_arms: int, **params: object) -> BanditInstance | None:
    """Validate an instance spec at construction: a name with its parameters, an array's shape, an instance.

    A name is checked by one throwaway draw (its own generator, no episode stream is touched); a callable is
    checked when it is called (at reset). See :func:`make_instance` for the specs. Returns the instance of a
    spec that fixes the means (an array or a BanditInstance), for checks of the means themselves, else None.
    """
    if isinstance(spec, str):
        _named_generator(spec, params)(num_agents, num_arms, np.random.default_rng(0), **params)
    elif not callable(spec) or isinstance(spec, BanditInstance):
        return make_instance(spec, num_agents, num_arms, None, **params)
    else:
        _check_no_params(params)
    return None


def make_instance(
    spec: InstanceSpec,
    num_agents: int,
    num_arms: int,
    rng: np.random.Generator | None = None,
    **params: object,
) -> BanditInstance:
    """Build a (num_agents, num_arms) instance from a spec.

    ``spec`` is ``"uniform"`` (:func:`homogeneous_uniform`), ``"heterogeneous"``
    (:func:`heterogeneous_centered`, ``params`` forwarded), an array of means ((M, K) or a (K,) vector
    shared by all agents), a :class:`BanditInstance`, or a callable ``(rng, num_agents, num_arms) ->
    means``. ``rng`` is needed only by the generators and callables.
    """
    num_agents = _check_count("num_agents", num_agents, 1, "M")
    num_arms = _check_count("num_arms", num_arms, 2, "K")
    if isinstance(spec, str):
        generator = _named_generator(spec, params)
        return generator(num_agents, num_arms, _check_rng(rng), **params)
    _check_no_params(params)
    if isinstance(spec, BanditInstance):
        return _check_shape(spec, num_agents, num_arms)
    if callable(spec):
        return _from_array(spec(_check_rng(rng), num_agents, num_arms), num_agents, num_arms)
    return _from_array(spec, num_agents, num_arms)
