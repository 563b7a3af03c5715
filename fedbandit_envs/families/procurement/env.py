"""Federated combinatorial procurement (Solanki et al., solanki-pfcb §1 and §6).

n aggregators (agents) buy units from m producers. Producer ``i`` has a hidden quality ``q_i``: each unit it
delivers is good with probability ``q_i``. Agent ``j`` pays ``c[j, i]`` per unit and may buy at most
``k[j, i]`` units per round; both are known to it. A round's action is the procurement vector (the
super-arm) ``l[j] in {0..k[j, i]}^m``; the agent observes, per producer, the units it procured and the good
units among them (semi-bandit feedback), and earns ``sum_i (rho x_i - c_i l_i)``.

Hidden from the agents (reported to evaluators): the expected revenue ``r(l) = sum_i l_i (rho q_i - c_i)``,
the quality constraint ``QC: sum_i l_i (q_i - alpha) >= 0`` (D-04), and the per-round regret (D-05/D-06)
``r* - r(l)`` if QC holds, else the penalty ``L = r* - sum_i k_i min(0, rho q_i - c_i)``, where ``r*`` is the
revenue of the benchmark oracle's vector on the true qualities. The regret against the MILP optimum is
logged too (``exact_regret``).

Array layout: agents first, producers last (``(B, n, m)`` with B replicas), i.e. ``c[j, i]`` is the
transpose of the paper's ``c_ij``. The instance is fixed when the environment is built (from
``instance_seed``), because the action spaces ``MultiDiscrete(k[j] + 1)`` depend on it; the seed of
``reset`` drives the unit outcomes (the ``rewards`` stream).

Unit outcomes use common random numbers: one uniform ``u`` per (round, agent, producer), and
``x = F^{-1}_{Bin(l, q_i)}(u)``, so ``x`` grows with ``l`` for fixed ``u`` and two algorithms see the same
draws wherever their actions agree.

Communication is a separate phase (spec §6 ``CommChannel``): after ``step`` of round t, agents may call
``communicate`` once; messages go through the message hooks (DP wrappers) and the costed channel (complete
graph by default) and are delivered at once, to be used before the decisions of round t + 1.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from fedbandit_envs.channel import (
    Channel,
    ChannelConfig,
    CostModel,
    MessageBatch,
)
from fedbandit_envs.channel.ledger import LinkAccounting
from fedbandit_envs.channel.routing import check_batches
from fedbandit_envs.core import (
    Action,
    AgentContext,
    ChannelCore,
    MessageHook,
    ObservedRecords,
    Phase,
    Step,
    check_arm_shape,
    start_episode,
)
from fedbandit_envs.env_base import ProtocolParallelEnv, population_env_kwargs
from fedbandit_envs.families.procurement.oracles import QC_TOLERANCE, ExactOracle, Oracle, make_oracle
from fedbandit_envs.families.registry import CoreMetrics, Family, Reference, register_family, without_coordinator
from fedbandit_envs.frozen import frozen
from fedbandit_envs.observations import OUTBOX, InboxForm, MessageSequence, check_inbox_form, inboxes_by_agent
from fedbandit_envs.reference import reference_active
from fedbandit_envs.rewards import NOISE_BLOCK
from fedbandit_envs.seeding import EpisodeSeeds, SeedLike, SeedStreams
from fedbandit_envs.topology import SERVER, Topology, build_topology, check_topology
from fedbandit_envs.validation import (
    check_bool,
    check_choice,
    check_int,
    check_int_array,
    check_keywords,
    check_memory,
    check_options,
    check_real,
    check_render_mode,
    keyword_checked,
    population_memory,
)

__all__ = [
    "INSTANCE_FAMILIES",
    "FedProcurementEnv",
    "ProcurementConfig",
    "ProcurementContext",
    "ProcurementCore",
    "ProcurementFeedback",
    "ProcurementInstance",
    "build_instance",
    "normal_instance",
    "stress_instance",
    "uniform_instance",
]


# ====================================================================================== instances


@dataclass(frozen=True, eq=False)
class ProcurementInstance:
    """One procurement problem (validated on construction; arrays become read-only).

    Attributes:
        quality: (m,) hidden qualities ``q_i`` in [0, 1].
        costs: (n, m) cost per unit ``c[j, i] >= 0`` that agent j pays producer i.
        capacities: (n, m) integer capacities ``k[j, i] >= 1`` (units per round).
        alpha: the quality threshold, in [0, 1].
        rho: revenue per unit of quality, > 0 (D-02: 1 by default).
        homogeneous: costs and capacities are the same for every agent (checked).
    """

    quality: np.ndarray
    costs: np.ndarray
    capacities: np.ndarray
    alpha: float
    rho: float = 1.0
    homogeneous: bool = False

    def __post_init__(self) -> None:
        q = np.asarray(self.quality, dtype=np.float64)
        if q.ndim != 1 or len(q) < 1:
            raise ValueError(f"quality must be a 1-D array with one entry per producer, got shape {q.shape}")
        if not np.all(np.isfinite(q)) or np.any((q < 0) | (q > 1)):
            raise ValueError("quality must lie in [0, 1] for every producer (it is a probability)")
        c = np.asarray(self.costs, dtype=np.float64)
        k = np.asarray(self.capacities)
        if c.ndim != 2 or c.shape[1] != len(q) or k.shape != c.shape:
            raise ValueError(
                f"costs and capacities must both have shape (num_agents, num_producers) = (n, {len(q)}); "
                f"got {c.shape} and {k.shape}"
            )
        if not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ValueError("costs must be finite and >= 0")
        if k.dtype.kind not in "iu" and not (k.dtype.kind == "f" and np.all(k == np.round(k))):
            raise ValueError(f"capacities must be integers, got dtype {k.dtype}")
        if np.any(k < 1):
            raise ValueError(
                f"capacities must be integers >= 1 (units per round), got min {k.min()}; a negative or zero capacity "
                "leaves the agent nothing to buy from that producer"
            )
        alpha = check_real("alpha (quality threshold)", self.alpha, 0.0, 1.0)
        rho = check_real("rho (revenue per unit of quality)", self.rho, 0.0, MAX_RHO, exclusive_minimum=True)
        if check_bool("homogeneous", self.homogeneous) and not (np.all(c == c[:1]) and np.all(k == k[:1])):
            raise ValueError("homogeneous=True needs the same costs and capacities for every agent")
        object.__setattr__(self, "quality", frozen(q))
        object.__setattr__(self, "costs", frozen(c))
        object.__setattr__(self, "capacities", frozen(k.astype(np.int64)))
        object.__setattr__(self, "alpha", float(alpha))
        object.__setattr__(self, "rho", float(rho))
        object.__setattr__(self, "homogeneous", bool(self.homogeneous))

    @property
    def num_agents(self) -> int:
        """n, the number of agents (aggregators)."""
        return self.costs.shape[0]

    @property
    def num_producers(self) -> int:
        """m, the number of producers."""
        return self.costs.shape[1]

    @property
    def unit_revenue(self) -> np.ndarray:
        """(n, m) expected revenue of one unit, ``r[j, i] = rho q_i - c[j, i]``."""
        return self.rho * self.quality - self.costs

    def expected_revenue(self, units: np.ndarray) -> np.ndarray:
        """``r(l) = sum_i l_i r[j, i]`` for units of shape (..., n, m); returns (..., n)."""
        return (np.asarray(units) * self.unit_revenue).sum(axis=-1)

    def qc_slack(self, units: np.ndarray) -> np.ndarray:
        """``sum_i l_i (q_i - alpha)`` for units of shape (..., m); QC holds when it is ``>= -1e-12``."""
        return (np.asarray(units) * (self.quality - self.alpha)).sum(axis=-1)

    def qc_satisfied(self, units: np.ndarray) -> np.ndarray:
        """Whether the true quality constraint holds (judged with the true q and the plain alpha)."""
        return self.qc_slack(units) >= -QC_TOLERANCE

    def penalty(self, r_star: np.ndarray) -> np.ndarray:
        """The violation penalty ``L_j = r*_j - sum_i k[j, i] min(0, r[j, i])`` (D-06), shape (n,)."""
        return np.asarray(r_star) - (self.capacities * np.minimum(0.0, self.unit_revenue)).sum(axis=-1)

    def first_agents(self, num_agents: int) -> ProcurementInstance:
        """The instance restricted to agents ``0 .. num_agents - 1`` (nested agent sets, D-23)."""
        if not 1 <= num_agents <= self.num_agents:
            raise ValueError(f"num_agents must be in [1, {self.num_agents}], got {num_agents}")
        return ProcurementInstance(
            self.quality,
            self.costs[:num_agents],
            self.capacities[:num_agents],
            self.alpha,
            self.rho,
            self.homogeneous,
        )


#: The largest revenue per unit of quality: costs lie in [0, 1], and far larger ratios (about 1e20 measured) leave
#: the exact oracle's MILP without a feasible point within its tolerances.
MAX_RHO = 1e12


def procurement_memory(num_agents: int, num_producers: int, max_capacity: int, replicas: int = 1) -> dict[str, float]:
    """Bytes of the largest arrays of a procurement core (see :func:`~fedbandit_envs.validation.check_memory`).

    A complete graph takes about 174 B per (agent + 1)^2 pair (matrices and edge lists, as in the MAB core);
    the noise block and the instance tables are (n, m) per slot of the block; the binomial search grid of the
    oracles is m x (max capacity + 1)^2 floats, three times over while it is built, and its guide table is built from
    m x (max capacity + 1) x (GUIDE_BINS + 1) counts, queries and flags.
    """
    n, m, k = int(num_agents), int(num_producers), int(max_capacity)
    parts = population_memory(n, replicas, (n + 1) ** 2 * 174, (NOISE_BLOCK + 4) * n * m * 8)
    parts["binomial search grid"] = m * (k + 1) ** 2 * 24
    parts["binomial guide table"] = m * (k + 1) * (GUIDE_BINS + 1) * 32
    return parts


def _draw_instance(
    rng: np.random.Generator,
    num_agents: int,
    num_producers: int,
    draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray],
    alpha: float,
    rho: float,
    homogeneous: bool,
    max_capacity: int,
    agent_pool: int | None,
) -> ProcurementInstance:
    """Draw q, then c, then k (for ``agent_pool`` agents, of which the first ``num_agents`` are kept)."""
    num_agents = check_int("num_agents", num_agents, 1)
    m = check_int("num_producers", num_producers, 1)
    max_capacity = check_int("max_capacity", max_capacity, 1, hint=" (capacities are drawn from 1..max_capacity)")
    pool = num_agents if agent_pool is None else check_int("agent_pool", agent_pool, num_agents, hint=" (num_agents)")
    check_bool("homogeneous", homogeneous)
    check_memory(
        f"a procurement instance (num_agents={num_agents}, agent_pool={pool}, num_producers={m}, "
        f"max_capacity={max_capacity})",
        procurement_memory(pool, m, max_capacity),
    )
    quality = draw(rng, (m,))
    if homogeneous:
        costs = np.broadcast_to(draw(rng, (m,)), (num_agents, m))
        capacities = np.broadcast_to(rng.integers(1, max_capacity + 1, m), (num_agents, m))
    else:
        costs = draw(rng, (pool, m))[:num_agents]
        capacities = rng.integers(1, max_capacity + 1, (pool, m))[:num_agents]
    return ProcurementInstance(quality, costs, capacities, alpha, rho, homogeneous)


def uniform_instance(
    num_agents: int,
    num_producers: int,
    rng: np.random.Generator,
    *,
    alpha: float = 0.4,
    rho: float = 1.0,
    homogeneous: bool = False,
    max_capacity: int = 50,
    agent_pool: int | None = None,
) -> ProcurementInstance:
    """Family U (§4.1, D-22): ``q_i, c[j, i] ~ U[0, 1]``, ``k[j, i] ~ UniformInt{1..max_capacity}``.

    Homogeneous: c and k drawn once per producer and shared. ``agent_pool``: draw c and k for that many
    agents and keep the first ``num_agents`` (nested agent sets across n, D-23).
    """
    return _draw_instance(
        rng, num_agents, num_producers, lambda g, s: g.random(s), alpha, rho, homogeneous, max_capacity, agent_pool
    )


def normal_instance(
    num_agents: int,
    num_producers: int,
    rng: np.random.Generator,
    *,
    alpha: float = 0.4,
    mean: float | None = None,
    std: float = 0.2,
    rho: float = 1.0,
    homogeneous: bool = False,
    max_capacity: int = 50,
    agent_pool: int | None = None,
) -> ProcurementInstance:
    """Family N (§4.1, D-22): ``q_i, c[j, i] ~ N(mean, std)`` clipped to [0, 1] (mean defaults to alpha).

    Figs 3-5 use ``std = 0.2``, Fig 2 ``std = 0.1``. Other arguments as in :func:`uniform_instance`.
    """
    centre = check_real("alpha", alpha) if mean is None else check_real("mean", mean)
    std = check_real("std", std, 0.0)
    return _draw_instance(
        rng,
        num_agents,
        num_producers,
        lambda g, s: np.clip(g.normal(centre, std, s), 0.0, 1.0),
        alpha,
        rho,
        homogeneous,
        max_capacity,
        agent_pool,
    )


#: The stress family (§4.2 check 18): family U at ``alpha = 0.7``, where the constraint binds for most agents.
stress_instance = functools.partial(uniform_instance, alpha=0.7)


#: An instance family accepted by name in :func:`build_instance` (the keys of :data:`INSTANCE_FAMILIES`).
InstanceFamily = Literal["uniform", "normal", "stress"]

#: Instance families by name: ``(num_agents, num_producers, rng, **params) -> ProcurementInstance``.
INSTANCE_FAMILIES: dict[str, Callable[..., ProcurementInstance]] = {
    "uniform": uniform_instance,
    "normal": normal_instance,
    "stress": stress_instance,
}


def build_instance(
    instance: ProcurementInstance | str,
    num_agents: int,
    num_producers: int,
    instance_seed: SeedLike,
    **params: Any,
) -> ProcurementInstance:
    """A ready instance, or one drawn from a family name with the ``instance`` stream of ``instance_seed``.

    ``params`` set to None are left to the family's defaults.
    """
    params = {k: v for k, v in params.items() if v is not None}
    if not isinstance(instance_seed, np.random.SeedSequence):
        check_int("instance_seed", instance_seed, 0)
    if isinstance(instance, ProcurementInstance):
        if params:
            raise ValueError(f"instance parameters {sorted(params)} are only for a family name, not a ready instance")
        return instance
    if not isinstance(instance, str):
        raise TypeError(
            f"instance must be a family name ({', '.join(sorted(INSTANCE_FAMILIES))}) or a ProcurementInstance, "
            f"got {type(instance).__name__}"
        )
    family = INSTANCE_FAMILIES[check_choice("instance", instance, sorted(INSTANCE_FAMILIES))]
    check_keywords(
        f"bad parameters for the {instance!r} family:", params, list(inspect.signature(family).parameters)[3:]
    )
    rng = SeedStreams.from_seed(instance_seed).generator("instance")
    return family(num_agents, num_producers, rng, **params)


@dataclass(frozen=True)
class ProcurementConfig:
    """Everything that defines a procurement problem (validated on construction, where the instance is drawn).

    Attributes:
        num_agents: n >= 1 aggregators (ignored when ``instance`` is a ProcurementInstance).
        num_producers: m >= 1 producers (idem).
        horizon: T >= 1 rounds.
        instance: a family name (``"uniform"``, ``"normal"``, ``"stress"``) or a ProcurementInstance.
        instance_params: options of the family (e.g. ``{"std": 0.1}``, ``{"max_capacity": 5}``).
        alpha: quality threshold (default: the family's, 0.4; 0.7 for ``"stress"``).
        rho: revenue per unit of quality (default: the family's, 1).
        homogeneous: the same costs and capacities for every agent (default: the family's, False).
        agent_pool: draw costs and capacities for this many agents and keep the first n (D-23).
        instance_seed: the seed of the instance (fixed across resets).
        problem: the instance (drawn from ``instance_seed`` for a family name, or the given one).
    """

    num_agents: int = 10
    num_producers: int = 30
    horizon: int = 1000
    instance: InstanceFamily | ProcurementInstance = "uniform"
    instance_params: Mapping[str, Any] | None = None
    alpha: float | None = None
    rho: float | None = None
    homogeneous: bool | None = None
    agent_pool: int | None = None
    instance_seed: int = 0
    problem: ProcurementInstance = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "horizon", check_int("horizon", self.horizon, 1))
        instance_params = check_options("instance_params", self.instance_params)
        object.__setattr__(self, "instance_params", instance_params)
        params = {"alpha": self.alpha, "rho": self.rho, "homogeneous": self.homogeneous, "agent_pool": self.agent_pool}
        given = {name: value for name, value in params.items() if value is not None}
        twice = sorted(set(given) & set(instance_params))
        if twice:
            raise ValueError(
                f"{twice} given both as keywords and in instance_params; give each once "
                f"(e.g. {twice[0]}=... or instance_params={{{twice[0]!r}: ...}})"
            )
        problem = build_instance(
            self.instance, self.num_agents, self.num_producers, self.instance_seed, **instance_params, **given
        )
        object.__setattr__(self, "problem", problem)


# ====================================================================================== protocol
@dataclass(frozen=True)
class ProcurementContext(AgentContext):
    """The public facts of a procurement episode: an :class:`AgentContext` plus the agents' known parameters.

    ``num_arms`` is m, the number of producers.

    Attributes:
        costs: (n, m) per-unit costs (agent j knows row j).
        capacities: (n, m) capacities (agent j knows row j).
        alpha: the quality threshold.
        rho: revenue per unit of quality.
    """

    costs: np.ndarray
    capacities: np.ndarray
    alpha: float
    rho: float


@dataclass
class ProcurementFeedback:
    """What the agents receive from one round, for every replica.

    Attributes:
        slot: the round just played (0-based; the spec's round ``t = slot + 1``; -1 after reset).
        units: (B, n, m) units procured.
        successes: (B, n, m) good units among them.
        rewards: (B, n) realised utilities ``sum_i (rho x_i - c_i l_i)``.
    """

    slot: int
    units: np.ndarray
    successes: np.ndarray
    rewards: np.ndarray


# ====================================================================================== core
def binomial_search_grid(quality: np.ndarray, max_units: int) -> np.ndarray:
    """The flat inverse-CDF grid of ``Binomial(l, q_i)`` for ``l, x in 0..K``: ``row + F_row(x)``.

    Row ``i (K + 1) + l`` holds ``F(x) = P(Bin(l, q_i) <= x)`` (1 for ``x >= l``) plus the row index, so the
    whole grid is sorted and ``x = searchsorted(grid, row + u) - row (K + 1)`` inverts the CDF at ``u in (0, 1]``.
    """
    from scipy import stats  # here, not at the top: scipy.stats doubles the package's import time

    size = max_units + 1
    units = np.arange(size)
    cdf = stats.binom.cdf(units[None, None, :], units[None, :, None], np.asarray(quality)[:, None, None])
    cdf = np.where(units[None, None, :] >= units[None, :, None], 1.0, np.minimum(cdf, 1.0))
    rows = np.arange(len(quality) * size, dtype=np.float64).reshape(len(quality), size, 1)
    return (rows + cdf).reshape(-1)


#: Bins of the uniform in :class:`BinomialInverse`'s guide table (a power of two, so ``u * GUIDE_BINS`` is exact).
GUIDE_BINS = 128


class BinomialInverse:
    """Binomial draws ``x = F^{-1}_{Bin(l, q_i)}(u)`` by the inverse CDF on :func:`binomial_search_grid`.

    The plain version (:meth:`reference`, used in the reference mode of :mod:`fedbandit_envs.reference`) is one
    ``searchsorted`` of ``row + u`` on the whole grid, minus the row's start. The fast version searches only the
    row: a guide table gives, for the row and the bin ``floor(u G)`` of ``u`` (``G =`` :data:`GUIDE_BINS`), the count
    at the bin's start; where the bin spans at most one more grid entry a single comparison with that entry finishes
    the count, elsewhere (the bins of a CDF's flat tails, about 0.5 % of the draws at m = 30, K = 50) the plain
    search runs. Both give the count of the row's entries below ``row + u`` (the grid is sorted: row ``r`` holds
    ``r + F(x)``, non-decreasing in x and within [r, r + 1]), so they agree bit for bit (tested).

    Args:
        quality: (m,) qualities ``q_i``.
        max_units: K, the largest ``l``.
    """

    def __init__(self, quality: np.ndarray, max_units: int) -> None:
        self.grid = binomial_search_grid(quality, max_units)
        self.width = max_units + 1
        self.row_offset = np.arange(len(quality)) * self.width
        rows = np.arange(len(quality) * self.width)[:, None]
        starts = self.reference(rows, rows + np.arange(GUIDE_BINS + 1) / GUIDE_BINS)
        dtype = np.result_type(np.min_scalar_type(-1), np.min_scalar_type(max_units))
        narrow = np.diff(starts, axis=1) <= 1
        # The last column is u == 1 exactly (one point, no search needed); -1 marks a bin left to the plain search.
        guide = np.where(np.append(narrow, np.ones_like(narrow[:, :1]), axis=1), starts, -1).astype(dtype)
        self.guide = guide.reshape(-1)

    def reference(self, rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
        """The count of row ``rows``' grid entries below ``queries`` (``rows + u``) by one search on the whole grid.

        The search lands in the previous row when ``rows + u`` rounds down to ``rows`` (u below half an ulp of the
        row index); the count is 0 there (clipped).
        """
        return np.maximum(self.grid.searchsorted(queries) - rows * self.width, 0)

    def __call__(self, units: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        """Good units of ``units`` (an (..., m) int array in 0..K) at ``uniforms`` in (0, 1] of the same shape."""
        rows = self.row_offset + units
        queries = rows + uniforms
        if reference_active():
            return self.reference(rows, queries)
        start = self.guide.take(rows * (GUIDE_BINS + 1) + (uniforms * GUIDE_BINS).astype(np.intp)).astype(np.int64)
        wide = np.flatnonzero(start < 0)
        if wide.size:
            start.put(wide, 0)
        counts = start + (self.grid.take(rows * self.width + start) < queries)
        if wide.size:
            counts.put(wide, self.reference(rows.take(wide), queries.take(wide)))
        return counts


class ProcurementCore(ChannelCore):
    """B replicas of the procurement problem on one fixed instance, with a costed channel and message hooks.

    Args:
        instance: the problem.
        horizon: T >= 1 rounds.
        channel: channel options (costs, drops, message records).
        topology: the communication graph (a name of :func:`build_topology`, a Topology or an adjacency matrix).
        oracle: the benchmark oracle of the regret (D-05: the agents' oracle, ``"greedy"`` by default).
    """

    messages_go_in = "the report round"

    def __init__(
        self,
        instance: ProcurementInstance,
        horizon: int,
        channel: ChannelConfig | None = None,
        topology: str | Topology | np.ndarray = "complete",
        oracle: str | Oracle = "greedy",
    ) -> None:
        if not isinstance(instance, ProcurementInstance):
            raise TypeError(f"instance must be a ProcurementInstance, got {type(instance).__name__}")
        self.horizon = check_int("horizon", horizon, 1)
        check_memory(f"a procurement core of {instance.num_agents} agents", self._memory_parts(instance, 1))
        self.instance = instance
        self.channel = Channel(channel or ChannelConfig())
        check_topology(topology, instance.num_agents)
        self.topology = build_topology(topology, instance.num_agents)
        self.oracle = make_oracle(oracle)
        q, c, k, alpha, rho = instance.quality, instance.costs, instance.capacities, instance.alpha, instance.rho
        self.benchmark_units = self.oracle(q, q, c, k, alpha, rho)
        self.r_star = instance.expected_revenue(self.benchmark_units)
        self.penalty = instance.penalty(self.r_star)
        self.exact_r_star = instance.expected_revenue(ExactOracle()(q, q, c, k, alpha, rho))
        self.exact_penalty = instance.penalty(self.exact_r_star)
        # Per unit: the cost, the expected revenue and the quality constraint's slack rate, summed in one step.
        self._unit_values = np.stack([c, instance.unit_revenue, np.broadcast_to(q - alpha, c.shape)])
        self._binomial = BinomialInverse(q, int(k.max()))
        self.slot = 0

    @staticmethod
    def _memory_parts(instance: ProcurementInstance, replicas: int) -> dict[str, float]:
        """The memory parts of ``replicas`` replicas on ``instance`` (:func:`procurement_memory`)."""
        return procurement_memory(instance.num_agents, instance.num_producers, instance.capacities.max(), replicas)

    # ------------------------------------------------------------------ episode
    def reset(self, seeds: Sequence[SeedLike], hooks: Sequence[MessageHook] = ()) -> ProcurementFeedback:
        """Start B = len(seeds) replicas; returns the empty feedback of slot -1.

        ``hooks``: as in :func:`~fedbandit_envs.core.start_episode`.
        """
        inst = self.instance
        hooks, streams = start_episode(
            seeds, hooks, "a procurement core", lambda replicas: self._memory_parts(inst, replicas)
        )
        with self.resetting():
            b, n, m = len(streams), inst.num_agents, inst.num_producers
            self.num_replicas = b
            self._rngs = [s.generator("rewards") for s in streams]
            self._uniforms = np.empty((b, NOISE_BLOCK, n, m))
            max_spend = (inst.capacities * inst.costs).sum(axis=1).max()
            context = ProcurementContext(
                num_agents=n,
                num_arms=m,
                horizon=self.horizon,
                topologies=(self.topology,) * b,
                reward_bounds=(-float(max_spend), float(inst.rho * inst.capacities.sum(axis=1).max())),
                agent_seeds=tuple(s.sequence("agents") for s in streams),
                costs=inst.costs,
                capacities=inst.capacities,
                alpha=inst.alpha,
                rho=inst.rho,
            )
            self._observed = np.zeros((b, n), np.int64)
            widths = np.broadcast_to(inst.capacities.astype(np.float64), (b, n, m))
            self.open_episode(context, streams, hooks, ObservedRecords(self._observed, record_widths=widths))
            self.slot = 0
            self._communicated = -1
            self.regret = np.zeros((b, n))
            self.exact_regret = np.zeros((b, n))
            self.violations = np.zeros((b, n), np.int64)
            self.last_regret = np.zeros((b, n))
            self.last_revenue = np.zeros((b, n))
            self.last_qc = np.ones((b, n), bool)
            zeros = np.zeros((b, n, m), np.int64)
            self.last = ProcurementFeedback(-1, zeros, zeros.copy(), np.zeros((b, n)))
            return self.last

    # ------------------------------------------------------------------ step
    def check_unit_shape(self, units: Any) -> np.ndarray:
        """``units`` as an array, checked to have the shape (B, n, m); its values are not read."""
        expected = (self.num_replicas, self.instance.num_agents, self.instance.num_producers)
        return check_arm_shape(units, expected, "replicas, agents, producers", "units")

    def check_units(self, units: Any) -> np.ndarray:
        """Validate a (B, n, m) integer units array against the capacities."""
        units = self.check_unit_shape(units)
        if units.dtype.kind not in "iu":
            raise TypeError(f"units must be integers (units per producer), got dtype {units.dtype}")
        capacities = self.instance.capacities
        if (units > capacities).any() or units.min() < 0:
            bad = (units < 0) | (units > capacities)
            b, j, i = (int(x) for x in np.argwhere(bad)[0])
            raise ValueError(
                f"agent {j} asks for {units[b, j, i]} units from producer {i}; "
                f"its action must lie in [0, {capacities[j, i]}] (the capacity k[{j}, {i}])"
            )
        return units.astype(np.int64, copy=False)

    def _next_uniforms(self) -> np.ndarray:
        """The round's (B, n, m) uniforms in (0, 1]: ``1 - U[0, 1)`` of each replica's stream, drawn by blocks.

        A block is drawn into the same buffer each time (a fresh one per block cost more than the draws).
        """
        offset = self.slot % NOISE_BLOCK
        if offset == 0:
            for block, rng in zip(self._uniforms, self._rngs):
                rng.random(out=block)
            np.subtract(1.0, self._uniforms, out=self._uniforms)
        return self._uniforms[:, offset]

    def step(self, units: Any) -> ProcurementFeedback:
        """Play one round with (B, n, m) ``units``; validated before any state changes."""
        self.check_running()
        units = self.check_units(units)
        inst = self.instance
        successes = self._binomial(units, self._next_uniforms())
        spend, revenue, slack = (units[:, None] * self._unit_values).sum(axis=-1).transpose(1, 0, 2)
        rewards = inst.rho * successes.sum(axis=-1) - spend
        qc = slack >= -QC_TOLERANCE
        self.last_regret = np.where(qc, self.r_star - revenue, self.penalty)
        self.regret += self.last_regret
        self.exact_regret += np.where(qc, self.exact_r_star - revenue, self.exact_penalty)
        self.violations += ~qc
        self.last_revenue, self.last_qc = revenue, qc
        # the round's feedback keeps a copy: the learner may write into its own array after the step
        self.last = ProcurementFeedback(self.slot, units.copy(), successes, rewards)
        self._observed += 1
        self.slot += 1
        return self.last

    # ------------------------------------------------------------------ the population protocol
    def current_step(self) -> Step:
        """The act phase of the current round (every agent acts; it knows its own parameters)."""
        return Step(self.slot)

    def play(self, action: Action) -> ProcurementFeedback:
        """Play the current round with a population's (B, n, m) units (messages go in the report round)."""
        self.check_no_messages(action)
        return self.step(action.arms)

    def first_phase(self) -> Phase:
        """The report round after the round just played.

        Skipped when nobody sends, unless the episode has message hooks: a hook may hold copies back (message
        delays) and release them in a later round, so every round is routed for it, as on the other families.
        """
        return Phase(self.slot - 1, "report", required=bool(self.message_hooks))

    def next_phase(self, phase: Phase, sent: bool) -> None:
        """A round has one report round."""
        return None

    def exchange(self, phase: Phase, messages: Sequence[MessageBatch]) -> list[MessageBatch]:
        """Route the report round (see :meth:`communicate`)."""
        return self.communicate(messages)

    # ------------------------------------------------------------------ communication
    def communicate(self, messages: Sequence[MessageBatch]) -> list[MessageBatch]:
        """Send the messages of the round just played and return the copies delivered now.

        Call it at most once per round, after :meth:`step`. Messages are validated, transformed by the
        hooks (e.g. DP noise), routed and costed; with no latency every copy arrives in this call.
        """
        self.check_not_failed()
        slot = self.slot - 1
        if slot < 0:
            raise RuntimeError("communicate() follows step(): the messages of a round are sent after its outcomes")
        if self._communicated == slot:
            raise RuntimeError(f"communicate() was already called for round {slot}; send all messages in one call")
        messages = check_batches(messages)
        for batch in messages:
            if np.any(batch.sender == SERVER) or np.any(batch.recipient == SERVER):
                raise ValueError("the procurement environment has no server: send to agents or NEIGHBOURS only")
        inbox = self.route(slot, messages)
        self._communicated = slot
        return inbox


# ====================================================================================== PettingZoo
@keyword_checked
class FedProcurementEnv(ProtocolParallelEnv):
    """Federated combinatorial procurement as a PettingZoo ``ParallelEnv`` (solanki-pfcb §6).

    A round is two steps. In the **act step** (``obs["phase"] == 0``) each aggregator submits its
    procurement vector (``MultiDiscrete(k[j] + 1)``, bare or as ``{"units": ..., "messages": []}``) and
    observes ``{"procured", "successes", "t"}``. In the **report step** that follows (``obs["phase"] == 1``)
    the aggregators send the round's messages (``{"messages": [...]}``, :class:`Message` or :class:`MessageBatch`
    objects, recipients an agent index or ``NEIGHBOURS``; agents with nothing to send may be left out),
    delivered in the returned ``"inbox"`` (see :mod:`fedbandit_envs.env_base`). The horizon is a truncation,
    after the last round's report step.

    ``infos[agent]`` at reset holds the agent's known parameters (``costs``, ``capacities``, ``alpha``,
    ``rho``, ``T``). With ``evaluation=True`` every step adds the hidden evaluation values
    ``expected_revenue``, ``qc_satisfied``, ``regret`` (of the round), ``L``, ``r_star``,
    ``cumulative_regret``, ``exact_regret`` (cumulative, against the MILP optimum) and ``violations``
    (cumulative QC violations), plus the agent's ``messages_sent``, ``bytes_sent`` and ``cost``.
    Agents must not read them.

    Args:
        num_agents, num_producers, horizon, instance, instance_params, alpha, rho, homogeneous, agent_pool,
            instance_seed: the problem (see :class:`ProcurementConfig`; kept as :attr:`config`).
        oracle: the benchmark oracle (D-05): ``"greedy"`` (default) or ``"exact"``.
        topology: the communication graph (default ``"complete"``: peer-to-peer broadcast, §1.7).
        c2: cost of an agent-agent link used in a round; link_accounting, price_per_message,
            price_per_byte: see :class:`CostModel`.
        drop_prob: probability that a message copy is lost.
        record_messages: keep one ledger record per transmitted copy.
        evaluation: report the hidden evaluation values in ``infos``.
        inbox: the form of the ``"inbox"`` observations, ``"messages"`` or ``"batches"``.
        render_mode: ``None`` or ``"ansi"``.
    """

    metadata: dict[str, Any] = {"name": "fedbandit/Procurement-v0", "render_modes": ["ansi"], "is_parallelizable": True}
    action_key = "units"
    summary_clock = "round"
    summary_regret = "group regret"

    def __init__(
        self,
        num_agents: int = 10,
        num_producers: int = 30,
        horizon: int = 1000,
        *,
        instance: ProcurementInstance | InstanceFamily = "uniform",
        instance_params: Mapping[str, Any] | None = None,
        alpha: float | None = None,
        rho: float | None = None,
        homogeneous: bool | None = None,
        agent_pool: int | None = None,
        instance_seed: int = 0,
        oracle: str | Oracle = "greedy",
        topology: str | Topology | np.ndarray = "complete",
        c2: float = 1.0,
        link_accounting: LinkAccounting = "used_links",
        price_per_message: float = 0.0,
        price_per_byte: float = 0.0,
        drop_prob: float = 0.0,
        record_messages: bool = False,
        evaluation: bool = True,
        inbox: InboxForm = "messages",
        render_mode: str | None = None,
    ) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        self.inbox_form = check_inbox_form(inbox)
        self.config = ProcurementConfig(
            num_agents,
            num_producers,
            horizon,
            instance,
            instance_params,
            alpha,
            rho,
            homogeneous,
            agent_pool,
            instance_seed,
        )
        self.problem = self.config.problem
        costs = CostModel(
            c2=c2, link_accounting=link_accounting, price_per_message=price_per_message, price_per_byte=price_per_byte
        )
        channel = ChannelConfig(costs, drop_prob=drop_prob, record_messages=record_messages)
        self.core = ProcurementCore(self.problem, self.config.horizon, channel, topology, oracle)
        self.horizon = self.core.horizon
        self.evaluation = check_bool("evaluation", evaluation)
        self.render_mode = render_mode
        n, m = self.problem.num_agents, self.problem.num_producers
        self.possible_agents = [f"aggregator_{j}" for j in range(n)]
        self.agents: list[str] = []
        self._index = {name: j for j, name in enumerate(self.possible_agents)}
        self._action_spaces = {
            a: spaces.Dict({"units": spaces.MultiDiscrete(self.problem.capacities[j] + 1), "messages": OUTBOX})
            for j, a in enumerate(self.possible_agents)
        }
        self._observation_spaces = {
            a: spaces.Dict(
                {
                    "phase": spaces.Discrete(2),
                    "procured": spaces.MultiDiscrete(self.problem.capacities[j] + 1),
                    "successes": spaces.MultiDiscrete(self.problem.capacities[j] + 1),
                    "t": spaces.Discrete(self.horizon + 1),
                    "inbox": MessageSequence(self.inbox_form),
                }
            )
            for j, a in enumerate(self.possible_agents)
        }
        self.state_space = spaces.Box(-np.inf, np.inf, shape=(2 * n * m + n,), dtype=np.float64)
        self._episode_seeds = EpisodeSeeds()

    # ------------------------------------------------------------------ spaces and known parameters
    def agent_params(self, agent: str) -> dict[str, Any]:
        """The parameters ``agent`` knows: its costs and capacities, alpha, rho and the horizon T."""
        j = self._agent_index(agent)
        inst = self.problem
        return {
            "costs": inst.costs[j].copy(),
            "capacities": inst.capacities[j].copy(),
            "alpha": inst.alpha,
            "rho": inst.rho,
            "T": self.horizon,
        }

    def _agent_index(self, agent: str) -> int:
        if agent not in self._index:
            raise ValueError(f"unknown agent {agent!r}; agents are {self.possible_agents[:3]}...")
        return self._index[agent]

    # ------------------------------------------------------------------ evaluator-only views
    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start an episode. ``seed`` fixes the outcome streams; ``None`` continues the seed sequence.

        ``options[MESSAGE_HOOKS]``: the episode's message hooks, handed down by a wrapper chain (none by default).
        """
        self.reset_core(seed, options)
        infos = {a: self.agent_params(a) for a in self.agents}
        return self._observations(), infos

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Play an act step (every live agent's procurement vector) or the round's report step (messages)."""
        self.require_live(actions)
        if self.pending_phase is not None:
            inbox = self.play_phase(actions)
            return self._finish_step(dict.fromkeys(self.agents, 0.0), inbox)
        self.check_action_agents(actions)
        self.refuse_act_messages(actions)
        units = np.zeros((1, self.problem.num_agents, self.problem.num_producers), np.int64)
        for agent, action in actions.items():
            given = self._units_of(agent, action)
            try:
                vector = np.asarray(given)
            except ValueError:  # ragged nested sequences
                raise ValueError(f"the action of {agent} is not a flat vector of unit counts: {given!r}") from None
            if vector.shape != (self.problem.num_producers,):
                raise ValueError(
                    f"the action of {agent} must be a vector of {self.problem.num_producers} unit counts, "
                    f"got shape {vector.shape}"
                )
            units[0, self._index[agent]] = check_int_array(f"the action of {agent} (units per producer)", vector, None)
        feedback = self.core.step(units)
        self.pending_phase = self.core.first_phase()
        return self._finish_step(dict(zip(self.agents, feedback.rewards[0].tolist())), [])

    def _units_of(self, agent: str, action: Any) -> Any:
        """The units vector of an act-step action (bare, or ``{"units": ..., "messages": []}``)."""
        if not isinstance(action, Mapping):
            return action
        if "units" not in action:
            raise ValueError(
                f"the action of {agent} needs 'units' and optionally 'messages'; got keys {sorted(action)}"
            )
        return action["units"]

    def _finish_step(self, rewards: dict[str, float], inbox: list[MessageBatch]) -> tuple[dict, dict, dict, dict, dict]:
        """The step's return; the episode ends after the last round's report step."""
        truncated = self.core.done and self.pending_phase is None
        return self.step_result(self._observations(inbox), rewards, self._infos(), truncated)

    def _observations(self, inbox: Sequence[MessageBatch] = ()) -> dict[str, dict[str, Any]]:
        last = self.core.last
        inboxes = inboxes_by_agent(inbox, self.problem.num_agents, 0, self.inbox_form)
        return {
            a: {
                "phase": self.phase_flag,
                "procured": last.units[0, j].copy(),
                "successes": last.successes[0, j].copy(),
                "t": self.core.slot,
                "inbox": tuple(inboxes[j]),
            }
            for j, a in enumerate(self.possible_agents)
        }

    # ------------------------------------------------------------------ protocol translation
    def step_from(self, observations: Mapping[str, Mapping[str, Any]]) -> Step:
        """The act phase the observations describe (the round index)."""
        return Step(int(observations[self.possible_agents[0]]["t"]))

    def actions_from(self, step: Step, action: Action) -> dict[str, Any]:
        """The act step's action dict: every agent's units of a (B = 1) action.

        The shape is checked as on the batched path (each agent's units are checked by the step), and messages
        attached to the action are refused as there.
        """
        self.core.check_no_messages(action)
        units = self.core.check_unit_shape(action.arms)
        return {a: units[0, j] for j, a in enumerate(self.possible_agents)}

    def feedback_from(
        self, step: Step, action: Action, observations: Mapping[str, Mapping[str, Any]], rewards: Mapping[str, float]
    ) -> ProcurementFeedback:
        """The round's feedback, rebuilt from the observations (units, good units) and the rewards."""
        units, successes = self.agent_rows(observations, "procured"), self.agent_rows(observations, "successes")
        return ProcurementFeedback(step.slot, units, successes, self.agent_rows(rewards))

    def _infos(self) -> dict[str, dict[str, Any]]:
        """Each agent's communication totals and, with ``evaluation``, the hidden evaluation values."""
        ledger, core = self.ledger, self.core
        columns = {
            "messages_sent": ledger.sent_messages[0].tolist(),
            "bytes_sent": ledger.sent_bytes[0].tolist(),
            "cost": ledger.node_cost[0].tolist(),
        }
        if self.evaluation:
            columns.update(
                expected_revenue=core.last_revenue[0].tolist(),
                qc_satisfied=core.last_qc[0].tolist(),
                regret=core.last_regret[0].tolist(),
                L=core.penalty.tolist(),
                r_star=core.r_star.tolist(),
                cumulative_regret=core.regret[0].tolist(),
                exact_regret=core.exact_regret[0].tolist(),
                violations=core.violations[0].tolist(),
            )
        return {a: {name: values[j] for name, values in columns.items()} for j, a in enumerate(self.agents)}

    def state(self) -> np.ndarray:
        """Global view: last units and good units of every agent, and every agent's cumulative regret."""
        self.check_started()
        last = self.core.last
        return np.concatenate(
            [
                last.units[0].ravel().astype(np.float64),
                last.successes[0].ravel().astype(np.float64),
                self.core.regret[0],
            ]
        )

    def summary_extras(self) -> tuple[str, ...]:
        """The quality-constraint violations so far."""
        return (f"QC violations {int(self.core.violations[0].sum())}",)


class ProcurementMetrics(CoreMetrics):
    """The procurement columns of a run: exact regret, QC violations (also after the exploration phase ``tau0``)."""

    core: ProcurementCore

    def __init__(self, core: ProcurementCore, population: Any) -> None:
        super().__init__(core, population)
        self.tau0 = int(getattr(population, "tau0", 0))
        self.explored = np.zeros_like(core.violations)

    def after_slot(self, slot: int) -> None:
        """Keep the violations at the end of the exploration phase."""
        if slot == self.tau0:
            self.explored = self.core.violations.copy()

    def curve(self, replica: int, slot: int) -> dict[str, Any]:
        """Exact group regret, violations and their rates (overall and after exploration)."""
        core, tau0 = self.core, self.tau0
        n = core.instance.num_agents
        violations = core.violations[replica]
        after = int((violations - self.explored[replica]).sum()) if slot > tau0 else 0
        return {
            "exact_group_regret": float(core.exact_regret[replica].sum()),
            "violations": int(violations.sum()),
            "violation_rate": float(violations.sum() / (n * slot)),
            "violations_after_explore": after,
            "violation_rate_after_explore": after / (n * (slot - tau0)) if slot > tau0 else 0.0,
        }

    def agents(self, replica: int) -> dict[str, list[Any]]:
        """Exact regret and violations per agent."""
        return {
            "exact_regret": self.core.exact_regret[replica].tolist(),
            "violations": self.core.violations[replica].tolist(),
        }


def _build(env_kwargs: dict[str, Any], population: Any) -> FedProcurementEnv:
    """The procurement environment of ``env_kwargs`` (it hosts no server)."""
    without_coordinator(population, "procurement")
    return FedProcurementEnv(**population_env_kwargs(env_kwargs))


FAMILY = register_family(
    Family(
        name="procurement",
        envs={"procurement": _build},
        default_env="procurement",
        metrics=ProcurementMetrics,
        privacy_columns=True,
        reference=Reference("solanki_nf", "nf_group_regret", "frr"),
    )
)
