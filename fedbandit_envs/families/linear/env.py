"""Federated linear contextual bandits with asynchronous client arrivals (Li and Wang, AAAI-22).

N clients share a server. In every slot an **arrival process** picks the active client ``i_t``; it
sees K arm contexts in R^d, pulls one arm and observes ``y_t = f_{i_t}(x_t) + eta_t``. Rewards are
linear: homogeneous (``f_i(x) = theta^T x`` for every client) or heterogeneous (a shared global part
of dimension ``d_g`` plus a client-specific part of dimension ``d_i``, spec Eq. 2). The noise is
sigma-sub-Gaussian (Gaussian, uniform on [-sigma, sigma], or Rademacher +-sigma).

**A slot has two phases** (spec section 1.1): in the *act* phase the active client chooses an arm
from the statistics it holds; in the *report* phase it updates itself and may send messages (any
client may, e.g. for a global synchronisation), the hosted coordinator (the server) answers, and its
replies are delivered before the next slot begins. Every message goes through the costed
:class:`~fedbandit_envs.channel.Channel` of a ``"server"`` topology, so the ledger counts uploads
(``up``) and downloads (``down``); the default price is one unit per message (``c1=0``,
``price_per_message=1``), which is the paper's communication cost C_T.

Multi-active extension (outside the paper's theory, its section 3.2 remark): with
``active_per_slot = m > 1`` the arrival process draws m distinct clients per slot; all of them
choose arms from their slot-start statistics, then they report **one at a time** (m report rounds,
each one complete with the server's replies) in a seeded random order from the ``arrivals`` stream.

Randomness (spec D30): arrivals, report orders and Dirichlet weights come from the ``arrivals``
stream, contexts from ``contexts``, noise from ``rewards`` and the hidden parameters (theta, a context
pool) from ``instance``. Everything is pre-drawn in blocks of :data:`BLOCK` slots independently of
the actions, so algorithms compared under one seed see the same stream.

:class:`LinearCore` simulates B replicas at once (arrays with a leading replica axis);
:class:`FederatedLinear` is its PettingZoo ``ParallelEnv`` (B = 1) with an active mask.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, TypedDict, get_args

import numpy as np
from gymnasium import spaces
from typing_extensions import Unpack

from fedbandit_envs.channel import Channel, ChannelConfig, CostModel, MessageBatch
from fedbandit_envs.core import (
    Action,
    AgentContext,
    ChannelCore,
    MessageHook,
    ObservedRecords,
    Phase,
    Step,
    check_arm_array,
    start_episode,
)
from fedbandit_envs.env_base import ProtocolParallelEnv
from fedbandit_envs.families.registry import CoreMetrics
from fedbandit_envs.frozen import frozen
from fedbandit_envs.observations import (
    OUTBOX,
    InboxForm,
    MessageSequence,
    check_inbox_form,
    inboxes_by_agent,
    split_action,
)
from fedbandit_envs.rewards import draw_noise
from fedbandit_envs.seeding import EpisodeSeeds, SeedLike, SeedStreams
from fedbandit_envs.topology import server
from fedbandit_envs.validation import (
    check_choice,
    check_int,
    check_memory,
    check_options,
    check_real,
    check_render_mode,
    forwards_keywords,
    keyword_checked,
    population_memory,
)

__all__ = [
    "ARRIVALS",
    "BLOCK",
    "CONTEXT_MODES",
    "MODES",
    "NOISE_KINDS",
    "ArrivalProcess",
    "FederatedLinear",
    "LinearConfig",
    "LinearChannelKeywords",
    "LinearContext",
    "LinearEnvKeywords",
    "LinearCore",
    "LinearFeedback",
    "ReplicaStream",
    "StreamBlock",
    "StreamSource",
    "SyntheticReplica",
    "linear_channel",
    "sample_unit_ball",
]

#: Slots drawn at once per replica (fixed: it is part of the draw order of every stream).
BLOCK = 256
ContextMode = Literal["ball", "pool"]
Arrival = Literal["uniform", "categorical", "zipf", "dirichlet", "round_robin", "trace"]
NoiseKind = Literal["gaussian", "uniform", "rademacher"]
Mode = Literal["homogeneous", "heterogeneous"]
CONTEXT_MODES: tuple[str, ...] = get_args(ContextMode)
ARRIVALS: tuple[str, ...] = get_args(Arrival)
NOISE_KINDS: tuple[str, ...] = get_args(NoiseKind)
MODES: tuple[str, ...] = get_args(Mode)
PHASES = ("act", "report")


# ---------------------------------------------------------------------- samplers
def sample_unit_ball(rng: np.random.Generator, shape: tuple[int, ...], dims: np.ndarray | int) -> np.ndarray:
    """Points uniform in the unit ball of R^k, zero-padded to the last axis of ``shape``.

    ``dims`` (an int, or an int array broadcastable to ``shape[:-1]``) is k, the number of leading
    coordinates used by each point. Draw order: ``shape`` standard normals (directions), then
    ``shape[:-1]`` uniforms (radius ``U^(1/k)``). The covariance of each point is ``I_k / (k + 2)``.
    """
    dims = np.asarray(dims)
    width = shape[-1]
    directions = rng.standard_normal(shape)
    if np.any(dims < width):
        directions *= np.arange(width) < dims[..., None]
    directions /= np.linalg.norm(directions, axis=-1, keepdims=True)
    radius = rng.random(shape[:-1]) ** (1.0 / np.maximum(dims, 1))
    return directions * radius[..., None]


def _unit_vector(rng: np.random.Generator, size: int) -> np.ndarray:
    """A standard Gaussian vector normalised to unit length (empty when ``size`` is 0)."""
    vector = rng.standard_normal(size)
    return vector / np.linalg.norm(vector) if size else vector


@dataclass(frozen=True)
class ArrivalProcess:
    """Which clients are active in each slot (spec section 6.3, D16).

    Attributes:
        kind: ``"uniform"``, ``"categorical"`` (``params["p"]``: one probability per client),
            ``"zipf"`` (``p_i`` proportional to ``1 / i**params.get("exponent", 1.0)``, i = 1..N),
            ``"dirichlet"`` (``p ~ Dirichlet(params.get("concentration", 1.0))`` drawn once per
            episode from the ``arrivals`` stream), ``"round_robin"`` (client ``(t m + j) mod N``) or
            ``"trace"`` (``params["trace"]``: a (T,) or (T, m) array of client ids, replayed).
        num_clients: N.
        active_per_slot: m distinct active clients per slot (1 in the paper).
        params: the parameters of ``kind`` (see above).
    """

    kind: str
    num_clients: int
    active_per_slot: int = 1
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_choice("arrival", self.kind, ARRIVALS)
        if self.active_per_slot > self.num_clients:
            raise ValueError(
                f"active_per_slot ({self.active_per_slot}) must not exceed num_clients ({self.num_clients})"
            )
        allowed = {"categorical": {"p"}, "zipf": {"exponent"}, "dirichlet": {"concentration"}, "trace": {"trace"}}
        unknown = set(self.params) - allowed.get(self.kind, set())
        if unknown:
            raise ValueError(f"unknown arrival_params {sorted(unknown)} for arrival={self.kind!r}")
        self._fixed_probabilities()
        if self.kind == "dirichlet" and not float(self.params.get("concentration", 1.0)) > 0:
            raise ValueError("arrival_params['concentration'] must be > 0")
        if self.kind == "trace":
            self.trace_array()

    def check_covers(self, horizon: int) -> ArrivalProcess:
        """Return self after checking that a replayed trace has a slot for each of the ``horizon`` slots.

        A shorter trace would fail only when a later block of slots is drawn, half way through an episode.
        """
        if self.kind == "trace" and len(self.trace_array()) < horizon:
            raise ValueError(
                f"arrival_params['trace'] has {len(self.trace_array())} slots, fewer than the horizon ({horizon}): "
                "give the active clients of every slot"
            )
        return self

    def _fixed_probabilities(self) -> np.ndarray | None:
        n = self.num_clients
        if self.kind == "categorical":
            if "p" not in self.params:
                raise ValueError("arrival='categorical' needs arrival_params={'p': [p_0, ..., p_{N-1}]}")
            p = np.asarray(self.params["p"], dtype=np.float64)
            if p.shape != (n,) or not np.all(np.isfinite(p)) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
                raise ValueError(f"arrival_params['p'] must be {n} non-negative probabilities summing to 1")
            if np.count_nonzero(p) < self.active_per_slot:
                raise ValueError("arrival_params['p'] needs at least active_per_slot clients with p > 0")
            return p / p.sum()
        if self.kind == "zipf":
            exponent = float(self.params.get("exponent", 1.0))
            if not np.isfinite(exponent) or exponent < 0:
                raise ValueError(f"arrival_params['exponent'] must be a finite number >= 0, got {exponent}")
            weights = 1.0 / np.arange(1, n + 1) ** exponent
            return weights / weights.sum()
        return None

    def trace_array(self) -> np.ndarray:
        """The replayed trace as a (T, m) int array (``kind="trace"`` only)."""
        if "trace" not in self.params:
            raise ValueError("arrival='trace' needs arrival_params={'trace': client ids per slot}")
        trace = np.asarray(self.params["trace"])
        if trace.dtype.kind not in "iu":
            raise TypeError(f"arrival_params['trace'] must hold integer client ids, got dtype {trace.dtype}")
        trace = trace.astype(np.int64).reshape(len(trace), -1)
        if trace.shape[1] != self.active_per_slot:
            raise ValueError(f"arrival_params['trace'] must have shape (T,) or (T, {self.active_per_slot})")
        if np.any((trace < 0) | (trace >= self.num_clients)):
            raise ValueError(f"arrival_params['trace'] holds ids outside [0, {self.num_clients})")
        if self.active_per_slot > 1 and np.any(np.diff(np.sort(trace, axis=1), axis=1) == 0):
            raise ValueError("arrival_params['trace'] repeats a client within a slot; active clients must be distinct")
        return trace

    def probabilities(self, rng: np.random.Generator) -> np.ndarray | None:
        """The arrival distribution of one episode (None for uniform, round-robin and trace arrivals)."""
        if self.kind == "dirichlet":
            return rng.dirichlet(np.full(self.num_clients, float(self.params.get("concentration", 1.0))))
        return self._fixed_probabilities()

    def draw(
        self, rng: np.random.Generator, probabilities: np.ndarray | None, start: int, length: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Active clients (length, m) of slots ``start ..`` and their report order (length, m).

        The order is a permutation of positions per slot (identity when m = 1, drawn otherwise).
        """
        n, m = self.num_clients, self.active_per_slot
        if self.kind == "round_robin":
            clients = (np.arange(start, start + length)[:, None] * m + np.arange(m)) % n
        elif self.kind == "trace":
            trace = self.trace_array()
            if start + length > len(trace):
                raise ValueError(f"arrival_params['trace'] has {len(trace)} slots; the horizon needs {start + length}")
            clients = trace[start : start + length]
        elif m == 1:
            if probabilities is None:
                clients = rng.integers(n, size=(length, 1))
            else:
                clients = rng.choice(n, size=(length, 1), p=probabilities)
        else:
            keys = rng.gumbel(size=(length, n))
            if probabilities is not None:
                with np.errstate(divide="ignore"):
                    keys = keys + np.log(probabilities)
            clients = np.argsort(-keys, axis=1, kind="stable")[:, :m]
        order = np.zeros((length, 1), np.int64) if m == 1 else np.argsort(rng.random((length, m)), axis=1)
        return clients.astype(np.int64), order.astype(np.int64)


# ---------------------------------------------------------------------- streams
class StreamBlock(NamedTuple):
    """Pre-drawn data of ``L`` consecutive slots of one replica (m active clients per slot).

    Attributes:
        clients: (L, m) active client ids.
        order: (L, m) report order (a permutation of positions 0..m-1 per slot).
        contexts: (L, m, K, d) arm contexts of each active client.
        means: (L, m, K) expected reward of each arm for its client (hidden).
        noise: (L, m) reward noise, added to the mean of the pulled arm.
        baseline: (L, m) reward of a uniform-random policy on the same stream, or None.
    """

    clients: np.ndarray
    order: np.ndarray
    contexts: np.ndarray
    means: np.ndarray
    noise: np.ndarray
    baseline: np.ndarray | None = None


class ReplicaStream(ABC):
    """The stream of one replica: hidden parameters and pre-drawn blocks."""

    #: The hidden (N, d) parameter of every client (zero-padded), for evaluators; None for logged data.
    theta: np.ndarray | None = None

    @abstractmethod
    def block(self, start: int, length: int) -> StreamBlock:
        """The data of slots ``start .. start + length - 1`` (called once per block, in order)."""


class StreamSource(ABC):
    """A problem the :class:`LinearCore` can simulate (synthetic linear rewards or logged replay).

    Attributes:
        num_agents: N, the number of clients.
        num_arms: K.
        dimension: d, the (padded) width of a context.
        horizon: T slots.
        active_per_slot: m active clients per slot.
        global_dimension: d_g (= d for homogeneous problems).
        local_dimensions: d_i per client (0 for homogeneous problems).
        reward_bounds: the support of the rewards.
        context_bound: the largest absolute coordinate of a context (the observation Box bound).
    """

    num_agents: int
    num_arms: int
    dimension: int
    horizon: int
    active_per_slot: int
    global_dimension: int
    local_dimensions: tuple[int, ...]
    reward_bounds: tuple[float, float]
    context_bound: float
    instance_seed: int | None = None
    #: Whether the blocks carry a random policy's reward (``StreamBlock.baseline``), as replay does.
    has_baseline: bool = False

    @abstractmethod
    def replica(self, streams: SeedStreams, instance_streams: SeedStreams) -> ReplicaStream:
        """The stream of one replica (``instance_streams`` fixes the hidden instance)."""

    def memory_parts(self, replicas: int = 1) -> dict[str, float]:
        """Bytes of the largest arrays of ``replicas`` replicas (see :func:`~fedbandit_envs.validation.check_memory`).

        The server topology's matrices take about 24 B per (client + 1)^2 pair (as in the MAB core); a block
        holds the contexts and means of :data:`BLOCK` slots; theta is (N, d).
        """
        n, d = int(self.num_agents), int(self.dimension)
        active = min(int(self.active_per_slot), n)  # more than N active clients is refused on its own
        block = BLOCK * active * int(self.num_arms) * (d + 1) * 8
        return population_memory(n, replicas, (n + 1) ** 2 * 24, block + n * d * 8)


@dataclass(frozen=True)
class LinearConfig(StreamSource):
    """A synthetic federated linear bandit (validated on construction; spec sections 1.2 and 4.1).

    Attributes:
        num_clients: N >= 1.
        num_arms: K >= 2.
        dimension: d >= 1, the context width (d_g + max d_i for heterogeneous problems).
        horizon: T >= 1 slots.
        mode: ``"homogeneous"`` (one unit-norm theta) or ``"heterogeneous"`` (unit-norm theta_g in
            R^{d_g} shared, unit-norm theta_i in R^{d_i} per client; a context is ``[x_g; x_l; 0...]``).
        global_dimension: d_g in [0, d] (heterogeneous only; default d // 2).
        local_dimensions: d_i, an int or one int per client (heterogeneous only; default d - d_g).
        noise: ``"gaussian"`` (N(0, sigma^2)), ``"uniform"`` (U[-sigma, sigma]) or ``"rademacher"`` (+-sigma).
        sigma: the sub-Gaussian noise scale (default 0.1, spec D7).
        context_mode: ``"ball"`` (K fresh points uniform in the unit ball of the client's dimension,
            spec D15) or ``"pool"`` (K distinct points of a fixed pool of unit vectors with variance
            (d - k) / d on coordinate k, the authors' code).
        pool_size: the size of the ``"pool"`` (default 1000).
        arrival: the arrival process (see :class:`ArrivalProcess`).
        arrival_params: its parameters.
        active_per_slot: m >= 1 active clients per slot (1 in the paper; see the module docstring).
        instance_seed: fix theta (and the pool) across resets (otherwise drawn from each reset's seed).
    """

    num_clients: int = 1000
    num_arms: int = 25
    dimension: int = 25
    horizon: int = 30000
    mode: Mode = "homogeneous"
    global_dimension: int | None = None  # type: ignore[assignment]
    local_dimensions: int | Sequence[int] | None = None  # type: ignore[assignment]
    noise: NoiseKind = "gaussian"
    sigma: float = 0.1
    context_mode: ContextMode = "ball"
    pool_size: int = 1000
    arrival: Arrival = "uniform"
    arrival_params: Mapping[str, Any] = field(default_factory=dict)
    active_per_slot: int = 1
    instance_seed: int | None = None

    def __post_init__(self) -> None:
        minimums = {"num_clients": 1, "num_arms": 2, "dimension": 1, "horizon": 1, "active_per_slot": 1, "pool_size": 2}
        for name, minimum in minimums.items():
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum))
        if self.instance_seed is not None:
            object.__setattr__(self, "instance_seed", check_int("instance_seed", self.instance_seed, 0))
        n, d = self.num_clients, self.dimension
        check_memory(
            f"LinearConfig(num_clients={n}, num_arms={self.num_arms}, dimension={d}, "
            f"active_per_slot={self.active_per_slot})",
            self.memory_parts(),
        )
        check_choice("mode", self.mode, MODES)
        check_choice("noise", self.noise, NOISE_KINDS)
        check_choice("context_mode", self.context_mode, CONTEXT_MODES)
        check_real("sigma", self.sigma, 0.0)
        if self.mode == "homogeneous":
            given = self.global_dimension, self.local_dimensions
            if not (given[0] is None or (np.ndim(given[0]) == 0 and given[0] == d)) or not (
                given[1] is None or (np.ndim(given[1]) == 0 and given[1] == 0)
            ):
                raise ValueError("global_dimension and local_dimensions are for mode='heterogeneous' only")
            d_g, local = d, np.zeros(n, np.int64)
        else:
            d_g = d // 2 if self.global_dimension is None else check_int("global_dimension", self.global_dimension, 0)
            local = np.asarray(d - d_g if self.local_dimensions is None else self.local_dimensions)
            if local.ndim > 1 or local.size not in (1, n):
                raise ValueError(f"local_dimensions must be an int or one int per client ({n}), got {local.shape}")
            local = np.broadcast_to(local, (n,))
            if d_g > d or local.dtype.kind not in "iu" or np.any(local < 0) or np.any(d_g + local > d):
                raise ValueError(
                    f"need 0 <= global_dimension <= dimension and 0 <= local_dimensions <= dimension - "
                    f"global_dimension (d={d}, d_g={d_g}, d_i={self.local_dimensions!r})"
                )
            if np.any(d_g + local < 1):
                raise ValueError("every client needs d_g + d_i >= 1 features")
            if d_g + int(local.max()) != d:
                raise ValueError(f"dimension must equal global_dimension + max(local_dimensions) = {d_g + local.max()}")
        if self.context_mode == "pool" and len(np.unique(local)) > 1:
            raise ValueError("context_mode='pool' needs the same local dimension for every client")
        object.__setattr__(self, "global_dimension", int(d_g))
        object.__setattr__(self, "local_dimensions", tuple(int(v) for v in local))
        object.__setattr__(self, "arrival_params", check_options("arrival_params", self.arrival_params))
        object.__setattr__(
            self,
            "_arrivals",
            ArrivalProcess(self.arrival, n, self.active_per_slot, self.arrival_params).check_covers(self.horizon),
        )

    # StreamSource attributes
    @property
    def num_agents(self) -> int:  # type: ignore[override]
        """N, the number of clients."""
        return self.num_clients

    @property
    def arrivals(self) -> ArrivalProcess:
        """The validated arrival process."""
        return self._arrivals  # type: ignore[attr-defined]

    @property
    def reward_bounds(self) -> tuple[float, float]:  # type: ignore[override]
        """Rewards are unbounded (sub-Gaussian noise) unless sigma = 0."""
        return (-np.inf, np.inf)

    @property
    def context_bound(self) -> float:  # type: ignore[override]
        """Contexts lie in the unit ball, so every coordinate is in [-1, 1]."""
        return 1.0

    @property
    def dimension_split(self) -> tuple[int, tuple[int, ...]]:
        """``(d_g, (d_1, ..., d_N))``: the global and each client's local dimension, as normalised at construction."""
        d_g, local = self.global_dimension, self.local_dimensions
        assert isinstance(d_g, int) and isinstance(local, tuple), "normalised by __post_init__"
        return d_g, local

    @property
    def client_dimensions(self) -> np.ndarray:
        """d_g + d_i per client (the number of leading context coordinates in use)."""
        d_g, local = self.dimension_split
        return d_g + np.asarray(local, np.int64)

    def context_covariance(self, client: int = 0) -> np.ndarray:
        """Sigma_c = E[x x^T] of ``"ball"`` contexts of ``client``: ``I_k / (k + 2)`` on its k coordinates.

        For ``"pool"`` contexts use :meth:`SyntheticReplica.pool_covariance` (the pool is random).
        """
        if self.context_mode != "ball":
            raise ValueError("context_covariance is closed-form for context_mode='ball' only; use the replica's pool")
        k = int(self.client_dimensions[client])
        diagonal = np.where(np.arange(self.dimension) < k, 1.0 / (k + 2), 0.0)
        return np.diag(diagonal)

    def lambda_c(self, client: int = 0) -> float:
        """The smallest eigenvalue of Sigma_c on the client's coordinates (Assumption 1), 1/(k+2) for balls."""
        return 1.0 / (int(self.client_dimensions[client]) + 2)

    def replica(self, streams: SeedStreams, instance_streams: SeedStreams) -> SyntheticReplica:
        """The stream of one replica."""
        return SyntheticReplica(self, streams, instance_streams)


class SyntheticReplica(ReplicaStream):
    """One replica of a :class:`LinearConfig`: hidden theta, optional pool, and block draws."""

    theta: np.ndarray  # always drawn: synthetic problems have a hidden parameter

    def __init__(self, config: LinearConfig, streams: SeedStreams, instance_streams: SeedStreams) -> None:
        self.config = config
        instance = instance_streams.generator("instance")
        n, d = config.num_clients, config.dimension
        d_g, local_dimensions = config.dimension_split
        theta = np.zeros((n, d))
        theta[:, :d_g] = _unit_vector(instance, d_g)
        if config.mode == "heterogeneous":
            for i, d_i in enumerate(local_dimensions):
                theta[i, d_g : d_g + d_i] = _unit_vector(instance, d_i)
        self.theta = theta
        self.pool = None
        if config.context_mode == "pool":
            k = int(config.client_dimensions[0])
            scale = np.sqrt(np.arange(k, 0, -1) / k)
            pool = np.zeros((config.pool_size, d))
            pool[:, :k] = instance.standard_normal((config.pool_size, k)) * scale
            self.pool = pool / np.linalg.norm(pool, axis=1, keepdims=True)
        self._arrival_rng = streams.generator("arrivals")
        self._probabilities = config.arrivals.probabilities(self._arrival_rng)
        self._context_rng = streams.generator("contexts")
        self._noise_rng = streams.generator("rewards")
        self._dims = config.client_dimensions

    def pool_covariance(self) -> np.ndarray:
        """E[x x^T] of ``"pool"`` contexts (the pool's second moment)."""
        if self.pool is None:
            raise ValueError("this replica has no pool (context_mode='ball')")
        return self.pool.T @ self.pool / len(self.pool)

    def block(self, start: int, length: int) -> StreamBlock:
        """Arrivals, contexts, means and noise of ``length`` slots."""
        cfg = self.config
        clients, order = cfg.arrivals.draw(self._arrival_rng, self._probabilities, start, length)
        shape = (length, cfg.active_per_slot, cfg.num_arms, cfg.dimension)
        if self.pool is None:
            contexts = sample_unit_ball(self._context_rng, shape, self._dims[clients][..., None])
        else:
            keys = self._context_rng.random((length, cfg.active_per_slot, len(self.pool)))
            contexts = self.pool[np.argsort(keys, axis=-1)[..., : cfg.num_arms]]
        means = np.einsum("lmkd,lmd->lmk", contexts, self.theta[clients])
        raw = draw_noise("uniform" if cfg.noise != "gaussian" else "normal", self._noise_rng, clients.shape)
        if cfg.noise == "uniform":
            raw = 2.0 * raw - 1.0
        elif cfg.noise == "rademacher":
            raw = np.where(raw < 0.5, -1.0, 1.0)
        return StreamBlock(clients, order, contexts, means, cfg.sigma * raw)


# ---------------------------------------------------------------------- what algorithms see
@dataclass(frozen=True)
class LinearContext(AgentContext):
    """The public facts of a linear episode (an :class:`AgentContext` plus the feature layout).

    Attributes:
        dimension: d, the context width.
        global_dimension: d_g (= d for homogeneous problems).
        local_dimensions: d_i per client (0 for homogeneous problems); client i's context is
            ``[x_g (d_g); x_l (d_i); zeros]``.
        active_per_slot: m active clients per slot.
        context_bound: the largest absolute context coordinate.
    """

    dimension: int
    global_dimension: int
    local_dimensions: tuple[int, ...]
    active_per_slot: int
    context_bound: float


@dataclass(frozen=True)
class LinearFeedback:
    """The outcome of the act phase: the arms pulled and the rewards observed, for every replica.

    Attributes:
        slot: the slot index t.
        clients: (B, m) active client ids.
        arms: (B, m) arms pulled.
        rewards: (B, m) observed rewards.
    """

    slot: int
    clients: np.ndarray
    arms: np.ndarray
    rewards: np.ndarray


# ---------------------------------------------------------------------- batched core
class LinearCore(ChannelCore):
    """B replicas of a federated linear bandit with a channel and an optional hosted server.

    It implements the core side of the population protocol (:func:`fedbandit_envs.core.play_slot`): per slot
    ``core.play(action)`` pulls the active clients' arms (:meth:`current_step` says who is active), then
    ``core.active_per_slot`` report rounds follow (:meth:`first_phase`, :meth:`next_phase`), each routed by
    :meth:`exchange` (``communicate``; the reporting position of each replica is :meth:`reporters`); the
    last round moves to the next slot. The coordinator (``reset(context, rngs)``, ``step(slot, inbox) -> replies``) may
    also define ``observe_arrivals(slot, clients)``: the core calls it when a slot starts, so the
    server knows who is active (the paper's free registration of new clients). A server that fails there, as in
    ``step``, ends the episode (see :meth:`~fedbandit_envs.core.ChannelCore.fail_slot`).

    Args:
        source: the problem (:class:`LinearConfig` or a replay source).
        channel: the channel options (default: one unit per message, nothing else).
        coordinator: the server of the algorithm being played.
    """

    messages_go_in = "the report rounds"

    def __init__(self, source: StreamSource, channel: ChannelConfig | None = None, coordinator: Any = None) -> None:
        if not isinstance(source, StreamSource):
            raise TypeError(f"source must be a StreamSource such as LinearConfig, got {type(source).__name__}")
        self.config = source
        self.horizon = source.horizon
        self.channel = Channel(channel or linear_channel())
        self.channel.config.check_agents(source.num_agents)
        self.coordinator = coordinator
        self._topology = server(source.num_agents)

    # ------------------------------------------------------------------ episode
    def reset(self, seeds: Sequence[SeedLike], hooks: Sequence[MessageHook] = ()) -> Step:
        """Start B = len(seeds) replicas with the message hooks on client messages; returns the act phase of slot 0.

        ``hooks``: as in :func:`~fedbandit_envs.core.start_episode`.
        """
        src = self.config
        hooks, streams = start_episode(seeds, hooks, f"{src.num_agents} clients", src.memory_parts)
        with self.resetting():
            fixed = SeedStreams.fixed(src.instance_seed)
            self.replicas = [src.replica(s, fixed or s) for s in streams]
            b, n, m = len(streams), src.num_agents, src.active_per_slot
            self.num_replicas = b
            context = LinearContext(
                num_agents=n,
                num_arms=src.num_arms,
                horizon=src.horizon,
                topologies=(self._topology,) * b,
                reward_bounds=src.reward_bounds,
                agent_seeds=tuple(s.sequence("agents") for s in streams),
                dimension=src.dimension,
                global_dimension=src.global_dimension,
                local_dimensions=tuple(src.local_dimensions),
                active_per_slot=m,
                context_bound=src.context_bound,
            )
            self._observed = np.zeros((b, n), np.int64)
            self.open_episode(context, streams, hooks, ObservedRecords(self._observed))
            self.regret = np.zeros((b, n))
            self.last_regret = np.zeros((b, m))
            self.arrivals = np.zeros((b, n), np.int64)
            self.reward = np.zeros(b)
            self.baseline_reward = np.zeros(b) if src.has_baseline else None
            self.slot = 0
            self._rows = np.arange(b)[:, None]
            self._positions = np.arange(m)[None, :]
            self._replica_of = np.broadcast_to(self._rows, (b, m))  # the replica of each active client (B, m)
            self._start_slot()
            return self.current_step()

    def _load_block(self) -> None:
        length = min(BLOCK, self.config.horizon - self.slot)
        blocks = [r.block(self.slot, length) for r in self.replicas]
        # the core's own: a slot hands the learner frozen copies of its part (a view would reach the later slots)
        self._block = StreamBlock._make(None if f[0] is None else np.stack(f) for f in zip(*blocks))
        self._block_start = self.slot

    def _start_slot(self) -> None:
        if self.slot % BLOCK == 0:
            self._load_block()
        k = self.slot - self._block_start
        blk = self._block
        # immutable copies of the slot alone: the learner gets them (and their ``.base``), and the env reads them on
        self.clients = frozen(blk.clients[:, k])
        self.contexts = frozen(blk.contexts[:, k])
        self.means = blk.means[:, k]
        self._noise = blk.noise[:, k]
        self._order = blk.order[:, k]
        self._baseline = None if blk.baseline is None else blk.baseline[:, k]
        self.phase = "act"
        self.round = 0
        np.add.at(self.arrivals, (self._replica_of, self.clients), 1)
        observe = getattr(self.coordinator, "observe_arrivals", None)
        if observe is not None:  # a failure leaves the slot started without its server: as a server failing in step()
            self.host(self.slot, observe, self.slot, self.clients)

    def current_step(self) -> Step:
        """The act phase of the current slot: the active clients and their arm contexts."""
        return Step(self.slot, clients=self.clients, contexts=self.contexts)

    def play(self, action: Action) -> LinearFeedback:
        """Pull the active clients' arms of a population's action (messages go in the report rounds)."""
        self.check_no_messages(action)
        return self.pull(action.arms)

    def first_phase(self) -> Phase:
        """The first report round of the slot just pulled."""
        return Phase(self.slot, "report", 0, self.reporters(), required=True)

    def next_phase(self, phase: Phase, sent: bool) -> Phase | None:
        """The next report round of the slot (one per active client), or None after the last one."""
        if phase.round + 1 >= self.config.active_per_slot:
            return None
        return Phase(phase.slot, "report", phase.round + 1, self.reporters(), required=True)

    def exchange(self, phase: Phase, messages: Sequence[MessageBatch]) -> list[MessageBatch]:
        """Route one report round (see :meth:`communicate`)."""
        return self.communicate(messages)

    def reporters(self) -> np.ndarray:
        """(B,) position (index into the slot's active clients) that reports in the current round.

        An immutable copy of this round's positions alone: a view would show the later rounds' reporters.
        """
        return frozen(self._order[:, self.round])

    # ------------------------------------------------------------------ act phase
    def check_arms(self, arms: Any) -> np.ndarray:
        """Validate a (B, m) integer arm array."""
        return check_arm_array(arms, self.clients.shape, "replicas, active clients", self.config.num_arms)

    def pull(self, arms: Any) -> LinearFeedback:
        """Pull the active clients' arms (B, m); returns their rewards and opens the report phase."""
        self.check_running()
        if self.phase != "act":
            raise RuntimeError("this slot's arms are already pulled; finish its report rounds with communicate()")
        arms = self.check_arms(arms)
        chosen = self.means[self._rows, self._positions, arms]  # np.take_along_axis's gather, without its overhead
        rewards = chosen + self._noise
        self.last_regret = self.means.max(axis=-1) - chosen
        np.add.at(self.regret, (self._replica_of, self.clients), self.last_regret)
        if self.message_hooks:  # only the hooks read the counts
            np.add.at(self._observed, (self._replica_of, self.clients), 1)
        self.reward += rewards.sum(axis=1)
        if self.baseline_reward is not None and self._baseline is not None:  # both set iff the source has one
            self.baseline_reward += self._baseline.sum(axis=1)
        self.last_arms, self.last_rewards = arms, rewards
        self.phase = "report"
        return LinearFeedback(self.slot, self.clients, arms, rewards)

    # ------------------------------------------------------------------ report phase
    def communicate(self, messages: Sequence[MessageBatch] = ()) -> list[MessageBatch]:
        """One report round: route the clients' messages, run the server, deliver its replies.

        Returns the copies delivered to clients in this round. The last round of a slot closes it
        and starts the next one. Everything is validated before any state changes.
        """
        self.check_not_failed()
        if self.phase != "report":
            raise RuntimeError("communicate() follows pull(): pull the active clients' arms first")
        last = self.round + 1 == self.config.active_per_slot
        inbox = self.route(self.slot, messages, collect_due=self.round == 0, close=last)
        self.round += 1
        if last:
            self.slot += 1
            if not self.done:
                self._start_slot()
        return inbox

    # ------------------------------------------------------------------ evaluator views
    def extra_metrics(self, replica: int) -> dict[str, float]:
        """Cumulative realised reward (and the random policy's, with the normalised reward, for replay)."""
        metrics = {"reward": float(self.reward[replica])}
        if self.baseline_reward is not None:
            random = float(self.baseline_reward[replica])
            metrics.update(random_reward=random, normalised_reward=metrics["reward"] / (random + 1.0))
        return metrics


# ---------------------------------------------------------------------- PettingZoo view
def linear_channel(
    c1: float = 0.0,
    price_per_message: float = 1.0,
    price_per_byte: float = 0.0,
    free_server_downlink: bool = True,
    latency: int = 0,
    latency_jitter: int = 0,
    drop_prob: float = 0.0,
    record_messages: bool = False,
) -> ChannelConfig:
    """The channel of the linear environments: a star around the server, one unit per message by default.

    Every linear environment passes its channel keywords here; :class:`FederatedLinear` documents them.
    """
    costs = CostModel(c1, 0.0, "used_links", free_server_downlink, price_per_message, price_per_byte)
    return ChannelConfig(costs, latency, latency_jitter, drop_prob, None, record_messages)


class LinearChannelKeywords(TypedDict, total=False):
    """The channel keywords of every linear environment: those of :func:`linear_channel` (its defaults apply)."""

    c1: float
    price_per_message: float
    price_per_byte: float
    free_server_downlink: bool
    latency: int
    latency_jitter: int
    drop_prob: float
    record_messages: bool


class LinearEnvKeywords(LinearChannelKeywords, total=False):
    """The keywords every linear environment passes on: the channel's, the server, the inbox form, the render mode.

    See :class:`FederatedLinear` (its defaults apply).
    """

    coordinator: Any | None
    inbox: InboxForm
    render_mode: str | None


@keyword_checked
class FederatedLinear(ProtocolParallelEnv):
    """A federated linear contextual bandit with asynchronous arrivals as a PettingZoo ``ParallelEnv``.

    Agents ``client_0 .. client_{N-1}`` stay live for the whole episode; each slot takes
    ``1 + active_per_slot`` environment steps (see the module docstring):

    * **act step** (``obs["phase"] == 0``): the active clients (``obs["active"] == 1``) see their
      (K, d) ``contexts`` and their action's ``"arm"`` is pulled; the step returns their rewards.
      Other agents may be left out; an action given for one is checked as an active client's (an arm in
      0..K-1, or an action dict, which may leave ``"arm"`` out) and not played. Messages are not allowed here,
      from any client.
    * **report step** (``obs["phase"] == 1``): the reporting client sees the ``arm`` it pulled, its
      ``reward`` and its ``contexts`` again; any client may send messages (the server is ``SERVER``).
      The server's replies arrive in the ``inbox`` of the returned observations.

    Observation (a dict per agent): ``phase`` (0 act, 1 report), ``slot``, ``active`` (0/1),
    ``contexts`` (K, d) (zeros unless active), ``arm`` (-1 unless reporting), ``reward`` (0-d),
    ``inbox`` (tuple of :class:`~fedbandit_envs.channel.Message`, or of
    :class:`~fedbandit_envs.channel.MessageBatch` with ``inbox="batches"``). Action: an arm index or
    ``{"arm": k, "messages": [...]}`` (Message or MessageBatch objects; see :mod:`fedbandit_envs.env_base`).

    Hidden from agents: theta (:attr:`theta`), the expected rewards and pseudo-regret (``infos`` of
    the active clients in the act step: ``expected_rewards``, ``instant_regret``, ``pseudo_regret``)
    and the ledger (:attr:`ledger`). The horizon is a truncation.

    Args:
        num_clients, num_arms, dimension, horizon, mode, global_dimension, local_dimensions, noise,
            sigma, context_mode, pool_size, arrival, arrival_params, active_per_slot, instance_seed:
            the problem (see :class:`LinearConfig`).
        c1: cost of a client-server link used in a slot (default 0: the paper counts messages only).
        price_per_message: cost per message (default 1: the cost is the paper's C_T).
        price_per_byte: cost per payload byte.
        free_server_downlink: the server's replies open no link.
        latency, latency_jitter, drop_prob: channel imperfections (outside the paper).
        record_messages: keep one ledger record per message.
        coordinator: the server of the algorithm being played.
        inbox: the form of the ``"inbox"`` observations, ``"messages"`` or ``"batches"``.
        render_mode: None or ``"ansi"``.

    Every linear environment takes the keywords from ``c1`` on (:class:`LinearEnvKeywords`); :func:`linear_channel`
    builds the channel from those up to ``record_messages``.
    """

    metadata: dict[str, Any] = {
        "name": "fedbandit/FederatedLinear-v0",
        "render_modes": ["ansi"],
        "is_parallelizable": True,
    }

    def _setup(
        self,
        source: StreamSource,
        *,
        coordinator: Any | None = None,
        inbox: InboxForm = "messages",
        render_mode: str | None = None,
        **channel: Unpack[LinearChannelKeywords],
    ) -> None:
        """Build the core and the spaces of ``source`` (every linear environment's constructor ends here)."""
        channel_config = linear_channel(**channel)
        check_render_mode(render_mode, self.metadata["render_modes"])
        self.inbox_form = check_inbox_form(inbox)
        self.render_mode = render_mode
        self.config = source
        self.core = LinearCore(source, channel_config, coordinator)
        n, k, d = source.num_agents, source.num_arms, source.dimension
        self.possible_agents = [f"client_{i}" for i in range(n)]
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        bound = float(source.context_bound)
        low, high = source.reward_bounds
        observation = spaces.Dict(
            {
                "phase": spaces.Discrete(2),
                "slot": spaces.Discrete(source.horizon + 1),
                "active": spaces.Discrete(2),
                "contexts": spaces.Box(-bound, bound, shape=(k, d), dtype=np.float64),
                "arm": spaces.Discrete(k + 1, start=-1),
                "reward": spaces.Box(min(low, 0.0), max(high, 0.0), shape=(), dtype=np.float64),
                "inbox": MessageSequence(self.inbox_form),
            }
        )
        self._observation_spaces = dict.fromkeys(self.possible_agents, observation)
        self._action_spaces = {
            a: spaces.Dict({"arm": spaces.Discrete(k), "messages": OUTBOX}) for a in self.possible_agents
        }
        self.state_space = spaces.Box(-np.inf, np.inf, shape=(n + 2,), dtype=np.float64)
        self._zero_contexts = frozen(np.zeros((k, d)))
        self._zero_reward = frozen(np.zeros(()))
        self._episode_seeds = EpisodeSeeds()

    @forwards_keywords(linear_channel, _setup)
    def __init__(
        self,
        num_clients: int = 1000,
        num_arms: int = 25,
        dimension: int = 25,
        horizon: int = 30000,
        *,
        mode: Mode = "homogeneous",
        global_dimension: int | None = None,
        local_dimensions: int | Sequence[int] | None = None,
        noise: NoiseKind = "gaussian",
        sigma: float = 0.1,
        context_mode: ContextMode = "ball",
        pool_size: int = 1000,
        arrival: Arrival = "uniform",
        arrival_params: Mapping[str, Any] | None = None,
        active_per_slot: int = 1,
        instance_seed: int | None = None,
        **options: Unpack[LinearEnvKeywords],
    ) -> None:
        source = LinearConfig(
            num_clients=num_clients,
            num_arms=num_arms,
            dimension=dimension,
            horizon=horizon,
            mode=mode,
            global_dimension=global_dimension,
            local_dimensions=local_dimensions,
            noise=noise,
            sigma=sigma,
            context_mode=context_mode,
            pool_size=pool_size,
            arrival=arrival,
            arrival_params=check_options("arrival_params", arrival_params),
            active_per_slot=active_per_slot,
            instance_seed=instance_seed,
        )
        self._setup(source, **options)

    # ------------------------------------------------------------------ spaces
    # ------------------------------------------------------------------ evaluator-only views
    @property
    def theta(self) -> np.ndarray | None:
        """The hidden (N, d) reward parameters of the current episode (None for logged data)."""
        return self.core.replicas[0].theta

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start an episode. ``seed`` fixes every random stream; ``None`` continues the seed sequence.

        ``options[MESSAGE_HOOKS]``: the episode's message hooks, handed down by a wrapper chain (none by default).
        """
        self.reset_core(seed, options)
        return self._observations([]), {a: {} for a in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Play one phase: the act phase pulls the active clients' arms, a report step routes messages."""
        self.require_live(actions)
        unknown = [a for a in actions if a not in self._index]
        if unknown:
            raise ValueError(f"unknown agents in actions: {unknown[:5]}; agents are 'client_0' .. 'client_{{N-1}}'")
        core = self.core
        rewards = dict.fromkeys(self.agents, 0.0)
        infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        if self.pending_phase is None:
            inbox: list[MessageBatch] = []
            self._act(actions, rewards, infos)
            self.pending_phase = core.first_phase()
        else:
            inbox = self.play_phase(actions)
        return self.step_result(self._observations(inbox), rewards, infos, core.done)

    def _act(self, actions: Mapping[str, Any], rewards: dict, infos: dict) -> None:
        core = self.core
        active = [self.possible_agents[i] for i in core.clients[0].tolist()]
        missing = [a for a in active if a not in actions]
        if missing:
            raise ValueError(f"the active clients {missing} must act in this step (obs['active'] == 1)")
        self.refuse_act_messages(actions)
        arms = np.empty((1, len(active)), np.int64)
        for j, agent in enumerate(active):
            arms[0, j] = split_action(actions[agent])[0]
        acting = set(active)
        idle = [
            split_action(action)[0]
            for agent, action in actions.items()
            if agent not in acting and not (isinstance(action, Mapping) and self.action_key not in action)
        ]
        if idle:  # checked as the active clients' arms are (by the core), then not played
            check_arm_array([idle], (1, len(idle)), "replica, idle clients", self.config.num_arms)
        means = core.means[0]
        feedback = core.pull(arms)
        for j, agent in enumerate(active):
            i = self._index[agent]
            rewards[agent] = float(feedback.rewards[0, j])
            infos[agent] = {
                "slot": feedback.slot,
                "expected_rewards": means[j].copy(),
                "instant_regret": float(core.last_regret[0, j]),
                "pseudo_regret": float(core.regret[0, i]),
            }

    def _observations(self, inbox: list[MessageBatch]) -> dict[str, dict[str, Any]]:
        core = self.core
        phase = 0 if core.phase == "act" else 1
        idle = {
            "phase": phase,
            "slot": core.slot,
            "active": 0,
            "contexts": self._zero_contexts,
            "arm": -1,
            "reward": self._zero_reward,
            "inbox": (),
        }
        observations = {a: dict(idle) for a in self.agents}
        if not self.agents:
            return observations
        if inbox:
            for i, received in enumerate(inboxes_by_agent(inbox, len(self.possible_agents), 0, self.inbox_form)):
                if received:
                    observations[self.possible_agents[i]]["inbox"] = tuple(received)
        if core.done:
            return observations
        # each client's own frozen contexts: a view of the slot's would show the other active clients' through .base
        if phase == 0:
            for j, i in enumerate(core.clients[0].tolist()):
                observations[self.possible_agents[i]].update(active=1, contexts=frozen(core.contexts[0, j]))
        else:
            j = int(core.reporters()[0])
            i = int(core.clients[0, j])
            observations[self.possible_agents[i]].update(
                active=1,
                contexts=frozen(core.contexts[0, j]),
                arm=int(core.last_arms[0, j]),
                reward=np.array(core.last_rewards[0, j]),
            )
        return observations

    # ------------------------------------------------------------------ protocol translation
    def step_from(self, observations: Mapping[str, Mapping[str, Any]]) -> Step:
        """The act phase the observations describe: the active clients, in the order they arrived, and their contexts.

        The observations mark which clients are active; the order of their arrival (the positions of the batched
        path's step, which a learner may read) is the core's, so both paths hand a learner the same step.
        """
        clients = self.core.clients  # (1, m), immutable
        names = [self.possible_agents[i] for i in clients[0].tolist()]
        if not all(observations[name]["active"] for name in names):
            raise ValueError("the observations are not those of the current act step (an arrived client is inactive)")
        contexts = np.stack([observations[name]["contexts"] for name in names])[None]
        return Step(int(observations[names[0]]["slot"]), clients=clients, contexts=contexts)

    def phase_from(self, step: Step, observations: Mapping[str, Mapping[str, Any]]) -> Phase | None:
        """The pending report round, its reporter given as a position in ``step.clients`` (read from ``active``)."""
        phase = self.pending_phase
        if phase is None:
            return None
        reporter = next(self._index[a] for a in self.agents if observations[a]["active"])
        position = step.client_ids()[0].tolist().index(reporter)
        return replace(phase, positions=np.array([position]))

    def actions_from(self, step: Step, action: Action) -> dict[str, Any]:
        """The act step's action dict: the arm of every active client of ``step`` in a (B = 1) action.

        The arms are checked as on the batched path (shape, integer dtype and range), before the step checks each
        client's arm again; messages attached to the action are refused as there.
        """
        self.core.check_no_messages(action)
        names, clients = self.possible_agents, step.client_ids()[0].tolist()
        shape, num_arms = (1, len(clients)), self.config.num_arms
        arms = check_arm_array(action.arms, shape, "replicas, active clients", num_arms)[0].tolist()
        return {names[i]: arm for i, arm in zip(clients, arms)}

    def feedback_from(
        self, step: Step, action: Action, observations: Mapping[str, Mapping[str, Any]], rewards: Mapping[str, float]
    ) -> LinearFeedback:
        """The act step's feedback: the arms the active clients pulled and their rewards.

        The arms are a new int64 copy of those the core pulled, as on the batched path: never the learner's own
        ``action.arms`` (its buffer, of its dtype), so both paths hand a learner the same feedback.
        """
        names = self.possible_agents
        observed = np.array([[rewards[names[i]] for i in step.client_ids()[0].tolist()]])
        return LinearFeedback(step.slot, step.client_ids(), self.core.last_arms.copy(), observed)

    def state(self) -> np.ndarray:
        """Global view: each client's cumulative pseudo-regret, then the slot and the phase."""
        self.check_started()
        phase = 0.0 if self.core.phase == "act" else 1.0
        return np.concatenate([self.core.regret[0], [float(self.core.slot), phase]])

    def summary_extras(self) -> tuple[str, ...]:
        """The phase the next step plays (``act`` or ``report``)."""
        return (f"phase {self.core.phase}",)


class LinearMetrics(CoreMetrics):
    """The linear columns of a run: realised reward (and the replay baseline), and arrivals per client."""

    core: LinearCore

    def curve(self, replica: int, slot: int) -> dict[str, float]:
        """``reward`` (and ``random_reward`` and ``normalised_reward`` on replay data)."""
        return self.core.extra_metrics(replica)

    def agents(self, replica: int) -> dict[str, list[int]]:
        """``arrivals``: each client's interactions so far."""
        return {"arrivals": self.core.arrivals[replica].tolist()}
