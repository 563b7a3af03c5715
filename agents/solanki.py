"""FCB and P-FCB: federated (and differentially private) combinatorial bandits with a quality constraint.

Solanki, Kanaparthy, Damle, Gujar, "Differentially Private Federated Combinatorial Bandits with
Constraints" (ECML PKDD 2022); the contract is the spec ``solanki-pfcb``. Every class is a vectorised
:class:`~fedbandit_envs.protocol.Population` acting on (B, n, m) arrays (B replicas, n
agents, m producers) in :class:`~fedbandit_envs.families.procurement.env.FedProcurementEnv`:

* :class:`NonFederated`: the single-agent baseline (Deva et al.), every agent alone (§2.1).
* :class:`FCBSync`: Algorithm 1, every agent broadcasts its round's units and good units every round (§2.2).
* :class:`PFCB`: Algorithm 2 (§2.3): exploration, UCB to the oracle, a fixed power-of-two communication
  schedule, Gaussian-noised window sums of units and good units, the acceptance rule ``CheckAndUpdate``
  with ``accept_width_mult`` (omega1) and ``comm_weight`` (omega2), the per-message budget ``eps_z``.
* :class:`FCBExp`: the experiments' "FCB", P-FCB without noise (D-21).
* :class:`NaivePrivate` (tests only): the leaky scheme of Claim 1; :class:`EveryRoundPrivate`: the §5.1
  ablation that communicates every round at a fixed epsilon.

Spec decisions (D-items) are the defaults; paper-literal readings are options, collected by D-item in
:data:`LITERAL_READINGS`.

P-FCB's noise is added either inside the agent (``noise=True``, from the agents' seed stream; the agent's
own :class:`~wrappers.dp.PrivacyAccountant` objects account it) or by the DP wrapper (``noise="wrapper"``):
the agent then sends raw window sums declared ``Sensitive(aggregate="sum", sensitivity_field="k")`` with the
per-entry sensitivity ``k[j, i]``, and ``GaussianMessageDP(env, epsilon=EpsilonSchedule(eps, T), delta=...)``
adds the same noise and charges its accountant. Both give the same distribution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, get_args

import numpy as np

from agents import solanki_config
from agents.configured import Configured
from fedbandit_envs.algorithms import register_algorithm
from fedbandit_envs.channel import NEIGHBOURS, MessageBatch
from fedbandit_envs.channel.privacy import FieldPrivacy, Privatized, Public, Sensitive, declare_message_kinds
from fedbandit_envs.core import Action, Phase, Step
from fedbandit_envs.families.procurement.env import ProcurementContext, ProcurementFeedback
from fedbandit_envs.families.procurement.oracles import make_oracle
from fedbandit_envs.privacy.accountant import PrivacyAccountant
from fedbandit_envs.privacy.mechanisms import GaussianMechanism, gaussian_delta
from fedbandit_envs.protocol import Population
from fedbandit_envs.validation import check_int, check_real

declare_message_kinds("fcb_sync", "pfcb", "naive")  # public vocabulary under a DP wrapper

__all__ = [
    "COMPOSITION_MODES",
    "LITERAL_READINGS",
    "PRESETS",
    "SCHEDULES",
    "EpsilonSchedule",
    "EveryRoundPrivate",
    "FCBExp",
    "FCBSync",
    "NaivePrivate",
    "NonFederated",
    "PFCB",
    "check_and_update",
    "communication_rounds",
    "explore_len",
    "pair_delta",
    "schedule_epsilons",
]

#: Oracle-input presets (D-07): which quality vector enters the constraint, and the margin gamma.
PRESETS: dict[str, dict[str, Any]] = {
    "default": {"v_mode": "mean", "gamma": 0.01},
    "paper_literal": {"v_mode": "ucb", "gamma": 0.0},
}

#: Communication schedules of P-FCB (D-17): ``"pow2"`` (default), ``"literal"`` (Alg. 2 line 9 read
#: literally: a burst at t_lo..t_lo+7, then the powers of two), ``"every_round"`` (the §5.1 ablation).
SCHEDULES: tuple[str, ...] = get_args(solanki_config.Schedule)

#: The three composition views of the accountant (§1.8): the paper's basic composition over messages,
#: the strict one counting the w and y fields as two releases (D-11), and parallel composition over the
#: disjoint windows.
COMPOSITION_MODES: tuple[str, ...] = get_args(solanki_config.Accounting)

#: Paper-literal readings as constructor keywords, keyed by the spec decision they concern.
LITERAL_READINGS: dict[str, dict[str, Any]] = {
    "D-07": {"preset": "paper_literal"},
    "D-10": {"eps_log": "ln"},
    "D-15": {"literal_width": True},  # FCBSync only
    "D-16": {"accept_width_mult": 10.0, "comm_weight": 0.1},  # the swapped omega reading
    "D-17": {"schedule": "literal"},
    "D-20": {"check_basis": "local"},
}


# ====================================================================================== helpers
def explore_len(num_agents: int, horizon: int, zeta: float = 1.0, y: float = 1.0) -> int:
    """Exploration rounds ``max(1, floor(min(3 ln(y T) / (2 n zeta^2), T)))`` (D-12, D-13).

    For T = 1e5 and zeta = 1: 17 rounds for n = 1, 2 for n = 8, 1 for n >= 10. Exploring longer than the horizon
    is exploring all of it, so the length is capped at T; a small zeta (whose square may underflow to 0) gives T.
    """
    if not (zeta > 0 and y > 0):
        raise ValueError(f"zeta and y must be > 0, got zeta={zeta!r}, y={y!r}")
    log_term = 3.0 * math.log(y * horizon)
    if log_term <= 0:
        return 1
    spread = 2.0 * num_agents * zeta**2
    value = log_term / spread if spread > 0 else math.inf
    return max(1, math.floor(min(value, horizon)))


def communication_rounds(horizon: int, t_lo: int = 200, t_hi: int = 40000, schedule: str = "pow2") -> np.ndarray:
    """The public, data-independent communication rounds (1-based) of P-FCB (§2.3 line 2, D-17).

    ``"pow2"``: every ``2^e`` with ``t_lo <= 2^e <= min(t_hi, T)`` (T = 1e5: 256, 512, ..., 32768).
    ``"literal"``: rounds ``t`` in ``[t_lo, min(t_hi, T)]`` with ``t >= tau``, tau starting at 1 and doubling at
    each message (T = 1e5: 200..207, then 256..32768, 16 rounds). ``"every_round"``: 1..T.
    An empty window (``t_hi < t_lo``) gives no rounds.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    last = min(int(t_hi), int(horizon))
    if schedule == "every_round":
        return np.arange(1, int(horizon) + 1)
    if schedule == "pow2":
        rounds = [2**e for e in range(max(last, 1).bit_length()) if t_lo <= 2**e <= last]
        return np.array(rounds, np.int64)
    rounds, tau = [], 1
    for t in range(max(int(t_lo), 1), last + 1):
        if t >= tau:
            rounds.append(t)
            tau *= 2
    return np.array(rounds, np.int64)


class EpsilonSchedule:
    """The per-message budget ``eps_z = eps / (2 log T) + eps / 2^(z+1)`` of communication round z (§1.8).

    A picklable callable of the 1-based release index ``z``, usable as the ``epsilon`` of
    :class:`~wrappers.dp.GaussianMessageDP`. ``eps_z`` strictly decreases in z.

    Attributes:
        epsilon: the total budget eps > 0.
        horizon: T.
        log: ``"log2"`` (D-10, default) or ``"ln"`` for the ``log T`` term.
    """

    def __init__(self, epsilon: float, horizon: int, log: str = "log2") -> None:
        self.epsilon = check_real("epsilon", epsilon, 0.0, exclusive_minimum=True)
        if log not in ("log2", "ln"):
            raise ValueError(f"log must be 'log2' (D-10) or 'ln', got {log!r}")
        self.horizon = check_int("horizon", horizon, 2, hint=" (the log T term)")
        self.log = log

    def __call__(self, z: int) -> float:
        """``eps_z`` of the z-th message (z >= 1)."""
        if int(z) < 1:
            raise ValueError(f"the release index z starts at 1, got {z}")
        log_t = math.log2(self.horizon) if self.log == "log2" else math.log(self.horizon)
        return self.epsilon / (2.0 * log_t) + self.epsilon / 2.0 ** (int(z) + 1)

    def __repr__(self) -> str:
        return f"EpsilonSchedule(epsilon={self.epsilon!r}, horizon={self.horizon!r}, log={self.log!r})"


def schedule_epsilons(num_rounds: int, epsilon: float, horizon: int, log: str = "log2") -> np.ndarray:
    """``[eps_1, ..., eps_Z]`` of :class:`EpsilonSchedule` for Z = ``num_rounds``."""
    schedule = EpsilonSchedule(epsilon, horizon, log)
    return np.array([schedule(z) for z in range(1, int(num_rounds) + 1)])


def pair_delta(eps_z: float, delta: float) -> float:
    """Exact delta at ``eps_z`` of the pair (w~, y~) released with the classical sigma (§1.8 item 4).

    The pair has L2 sensitivity ``sqrt(2) k`` and each entry noise ``sigma = k sqrt(2 ln(1.25/delta)) / eps_z``;
    Balle and Wang's formula gives the delta (about 7.2e-4 for eps = 1, z = 1, delta = 0.01).
    """
    unit_sigma = GaussianMechanism(1.0, eps_z, delta, allow_large_epsilon=True).sigma
    return gaussian_delta(math.sqrt(2.0), unit_sigma, eps_z)


def check_and_update(
    W: np.ndarray,  # noqa: N803 (the paper's names)
    Y: np.ndarray,  # noqa: N803
    w_tilde: np.ndarray,
    y_tilde: np.ndarray,
    *,
    log_arg: float,
    width_mult: float = 0.1,
    weight: float = 10.0,
    basis: tuple[np.ndarray, np.ndarray] | None = None,
    strict: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Procedure 1 ("what to learn") on arrays, entry by entry (§2.4); returns ``(W, Y, accepted)``.

    A message entry is accepted when ``w~ > 0`` (D-19), the receiver's basis count is > 0, and
    ``q^ - h <= y~ / w~ <= q^ + h`` with ``q^ = good / count`` and ``h = width_mult sqrt(3 ln(log_arg) / (2 count))``;
    then ``(W, Y) += weight (w~, y~)``. The basis is ``(W, Y)`` (Procedure 1, ``log_arg = n t``) unless
    ``basis = (N, Yloc)`` (the §5.4 variant, ``log_arg = t``, with ``strict`` inequalities, D-20).
    """
    count, good = (W, Y) if basis is None else basis
    positive = count > 0
    safe = np.where(positive, count, 1.0)
    estimate = good / safe
    half = width_mult * np.sqrt(3.0 * math.log(log_arg) / (2.0 * safe))
    ratio = y_tilde / np.where(w_tilde > 0, w_tilde, 1.0)
    if strict:
        inside = (estimate - half < ratio) & (ratio < estimate + half)
    else:
        inside = (estimate - half <= ratio) & (ratio <= estimate + half)
    accepted = positive & (w_tilde > 0) & inside
    return np.where(accepted, W + weight * w_tilde, W), np.where(accepted, Y + weight * y_tilde, Y), accepted


# ====================================================================================== learners
class NonFederated(Configured, Population[ProcurementContext], config=solanki_config.NonFederatedConfig):
    """Every agent learns alone (Deva et al.'s single-agent algorithm; §2.1). No messages.

    For ``t <= tau0 = explore_len(1)`` an agent buys one unit from every producer; afterwards it plays
    ``Oracle(q+, v, c_j, k_j, alpha + gamma, rho)`` with ``q+ = clip(Y/W, 0, 1) + sqrt(3 ln t / (2 W))`` (D-14).

    Keyword arguments: the fields of :class:`agents.solanki_config.NonFederatedConfig`, documented and checked
    there (direct construction and :func:`~fedbandit_envs.algorithms.make_algorithm` take the same path).
    """

    families = ("procurement",)

    config: solanki_config.NonFederatedConfig

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        c = self.config
        self.preset = c.preset
        self.v_mode = PRESETS[c.preset]["v_mode"] if c.v_mode is None else c.v_mode
        self.gamma = float(PRESETS[c.preset]["gamma"] if c.gamma is None else c.gamma)
        self.oracle = make_oracle(c.oracle)
        self.zeta, self.y, self.explore_rounds = float(c.zeta), float(c.y), c.explore_rounds

    def memory_parts(self, context: ProcurementContext) -> dict[str, float]:
        """The per (agent, producer) statistics :meth:`reset` allocates (see the subclasses for more)."""
        cells = context.num_replicas * context.num_agents * context.num_arms
        return {"statistics (replicas x agents x producers x 8 B, 5 tables)": 40.0 * cells}

    # ------------------------------------------------------------------ hooks for the subclasses
    def _explore_agents(self, num_agents: int) -> int:
        """The n of ``explore_len`` (1 for the non-federated baseline)."""
        return 1

    def _ucb_width(self, t: int, count: np.ndarray) -> np.ndarray:
        """The UCB width ``sqrt(3 ln t / (2 W))`` (D-14)."""
        return np.sqrt(3.0 * math.log(t) / (2.0 * count))

    # ------------------------------------------------------------------ protocol
    def reset(self, context: ProcurementContext) -> None:
        """Zero the statistics; compute tau0 and the threshold ``alpha + gamma``."""
        self.context = context
        b, n, m = context.num_replicas, context.num_agents, context.num_arms
        self.costs, self.capacities = context.costs, context.capacities
        self.rho, self.theta = context.rho, context.alpha + self.gamma
        self.rngs = context.agent_rngs()
        self.W = np.zeros((b, n, m))
        self.Y = np.zeros((b, n, m))
        self.N = np.zeros((b, n, m), np.int64)
        self.Yloc = np.zeros((b, n, m), np.int64)
        if self.explore_rounds is not None:
            self.tau0 = int(self.explore_rounds)
        else:
            self.tau0 = explore_len(self._explore_agents(n), context.horizon, self.zeta, self.y)
        self._ones = np.ones((b, n, m), np.int64)

    def act(self, step: Step) -> Action:
        """All-ones during exploration, then the oracle on the UCB indices."""
        t = step.slot + 1
        if t <= self.tau0:
            return Action(self._ones)
        count = np.maximum(self.W, 1.0)  # W >= tau0 >= 1 after exploration; guards agents driven from outside
        mean = np.clip(self.Y / count, 0.0, 1.0)
        width = self._ucb_width(t, count)
        ucb = mean + width
        v = ucb if self.v_mode == "ucb" else mean if self.v_mode == "mean" else mean - width
        return Action(self.oracle(ucb, v, self.costs, self.capacities, self.theta, self.rho))

    def observe(self, feedback: ProcurementFeedback) -> None:
        """Add the round's own units and good units (Eq. 9)."""
        self.W += feedback.units
        self.Y += feedback.successes
        self.N += feedback.units
        self.Yloc += feedback.successes

    def state_dict(self, replica: int = 0) -> dict[str, Any]:
        """Copies of one replica's statistics (W, Y, N, Yloc as (n, m)) and tau0, for tests and diagnostics."""
        return {
            "W": self.W[replica].copy(),
            "Y": self.Y[replica].copy(),
            "N": self.N[replica].copy(),
            "Yloc": self.Yloc[replica].copy(),
            "tau0": self.tau0,
        }


class FCBSync(NonFederated, config=solanki_config.FCBSyncConfig):
    """Algorithm 1: every agent broadcasts its units and good units of every round (§2.2).

    Each agent keeps the pooled totals ``W_i`` (units bought from i by all agents) and ``Y_i``; its UCB is
    ``clip(Y/W) + sqrt(3 ln(n t) / (2 W))`` (D-15) and tau0 = ``explore_len(n)``. In the homogeneous
    setting every agent picks the same vector each round. Messages are not private (kind ``"fcb_sync"``,
    payload ``l`` and ``x`` as integers, no privacy declaration).

    Keyword arguments: the fields of :class:`agents.solanki_config.FCBSyncConfig` (``literal_width`` and
    those of :class:`NonFederated`).
    """

    message_kind = "fcb_sync"

    config: solanki_config.FCBSyncConfig

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.literal_width = self.config.literal_width

    def memory_parts(self, context: ProcurementContext) -> dict[str, float]:
        """The statistics and one round's broadcast as delivered: ``l`` and ``x`` from every agent to every other."""
        b, n, m = context.num_replicas, context.num_agents, context.num_arms
        delivered = "delivered rounds of one slot (replicas x agents x agents x producers x 16 B)"
        return {**super().memory_parts(context), delivered: 16.0 * b * n * n * m}

    def _explore_agents(self, num_agents: int) -> int:
        return num_agents

    def _ucb_width(self, t: int, count: np.ndarray) -> np.ndarray:
        n = self.context.num_agents
        scale = n if self.literal_width else 1
        return np.sqrt(3.0 * math.log(n * t) / (2.0 * scale * count))

    def reset(self, context: ProcurementContext) -> None:
        """Zero the pooled statistics; prepare the broadcast rows (one per replica and agent)."""
        super().reset(context)
        b, n = context.num_replicas, context.num_agents
        self._replica = np.repeat(np.arange(b), n)
        self._sender = np.tile(np.arange(n), b)
        self._last: ProcurementFeedback | None = None

    def observe(self, feedback: ProcurementFeedback) -> None:
        """Add the own round to the pooled totals and keep it for the broadcast."""
        super().observe(feedback)
        self._last = feedback

    def send(self, phase: Phase) -> list[MessageBatch]:
        """Every agent's ``(l, x)`` of the round, to every neighbour."""
        last = self._last
        if last is None:
            raise RuntimeError("send() follows observe(): no round has been observed yet")
        b, n, m = self.W.shape
        return [
            MessageBatch(
                kind=self.message_kind,
                replica=self._replica,
                sender=self._sender,
                recipient=np.full(b * n, NEIGHBOURS),
                payload={
                    "l": last.units.reshape(b * n, m),
                    "x": last.successes.reshape(b * n, m),
                },
            )
        ]

    def receive(self, phase: Phase, inbox: list[MessageBatch]) -> None:
        """Add every received ``(l, x)`` to the pooled totals."""
        for batch in inbox:
            if batch.kind == self.message_kind:
                np.add.at(self.W, (batch.replica, batch.recipient), batch.payload["l"])
                np.add.at(self.Y, (batch.replica, batch.recipient), batch.payload["x"])


class PFCB(NonFederated, config=solanki_config.PFCBConfig):
    """Algorithm 2, P-FCB: private federated combinatorial bandit with a quality constraint (§2.3).

    Per agent and producer it keeps the effective totals ``W, Y`` (own data plus ``comm_weight``-weighted
    accepted messages; they drive the UCB ``clip(Y/W) + sqrt(3 ln t / (2 W))``), the window sums ``w, y`` of
    own data not yet sent, and the own-only totals ``N, Yloc``. In every round ``t`` of the public schedule
    (see :func:`communication_rounds`) the z-th message of each agent carries, for every producer,
    ``w~ = w + sigma xi`` and ``y~ = y + sigma xi'`` with ``sigma = k sqrt(2 ln(1.25/delta)) / eps_z``; every
    receiver runs :func:`check_and_update` on each sender's entries in ascending sender order (D-18); every
    sender then clears its window.

    Message (kind ``"pfcb"``, broadcast to all neighbours): ``"k"`` (the per-entry sensitivity, public),
    ``"z"`` (public), and the window sums: one field ``"wy"`` of shape (m, 2) for ``accounting="basic"`` or
    ``"disjoint"`` (one release per message), or two fields ``"w"`` and ``"y"`` for ``"basic_strict"`` (two
    releases). ``"disjoint"`` also declares ``z`` as the partition (each window holds disjoint rounds).

    Keyword arguments: the fields of :class:`agents.solanki_config.PFCBConfig` (the budget, the window, the
    omegas, the schedule, the noise and accounting modes, and those of :class:`NonFederated`).
    """

    message_kind = "pfcb"

    config: solanki_config.PFCBConfig

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        c = self.config
        self.epsilon, self.delta, self.t_lo, self.t_hi = float(c.epsilon), float(c.delta), int(c.t_lo), int(c.t_hi)
        self.accept_width_mult, self.comm_weight = float(c.accept_width_mult), float(c.comm_weight)
        self.noise = c.noise if isinstance(c.noise, str) else bool(c.noise)  # numpy's True is True here
        self.schedule, self.check_basis = c.schedule, c.check_basis
        self.accounting, self.strict, self.eps_log = c.accounting, bool(c.strict), c.eps_log
        self.message_epsilon = c.message_epsilon

    def memory_parts(self, context: ProcurementContext) -> dict[str, float]:
        """The windows, the agent x agent acceptance counts and the dense inbox of a communication round.

        A communication round delivers every agent's window sums and sensitivities to every other (24 B per sender,
        receiver and producer) and reads them into two dense (replicas x receivers x senders x producers) float64
        tables (:meth:`_received`).
        """
        b, n, m = context.num_replicas, context.num_agents, context.num_arms
        return {
            **super().memory_parts(context),
            "windows (replicas x agents x producers x 8 B, 2 tables)": 16.0 * b * n * m,
            "acceptance counts (replicas x agents x agents x 8 B, 2 tables)": 16.0 * b * n * n,
            "received messages and their dense tables (replicas x agents x agents x producers x 40 B)": 40.0
            * b
            * n
            * n
            * m,
        }

    def _explore_agents(self, num_agents: int) -> int:
        return num_agents

    # ------------------------------------------------------------------ schedule and budget
    def message_epsilons(self, horizon: int) -> np.ndarray:
        """``eps_z`` of every message of an episode of length ``horizon`` (checked against the budget)."""
        rounds = communication_rounds(horizon, self.t_lo, self.t_hi, self.schedule)
        if self.message_epsilon is not None:
            return np.full(len(rounds), float(self.message_epsilon))
        if len(rounds) == 0:
            return np.zeros(0)
        epsilons = schedule_epsilons(len(rounds), self.epsilon, horizon, self.eps_log)
        if epsilons.sum() > self.epsilon * (1 + 1e-12):
            raise ValueError(
                f"the schedule {self.schedule!r} has {len(rounds)} messages whose eps_z sum to {epsilons.sum():.6g} > "
                f"epsilon = {self.epsilon}; use schedule='pow2', eps_log='log2' or a narrower [t_lo, t_hi]"
            )
        return epsilons

    def reset(self, context: ProcurementContext) -> None:
        """Zero the statistics and windows; fix the schedule and the per-message budgets; fresh accountants."""
        super().reset(context)
        b, n, m = context.num_replicas, context.num_agents, context.num_arms
        self.rounds = communication_rounds(context.horizon, self.t_lo, self.t_hi, self.schedule)
        self._round_set = set(self.rounds.tolist())
        self.epsilons = self.message_epsilons(context.horizon)
        self.w = np.zeros((b, n, m), np.int64)
        self.y_window = np.zeros((b, n, m), np.int64)
        self.z = 0
        self.accepted = np.zeros((b, n, n), np.int64)
        self.offered = np.zeros((b, n, n), np.int64)
        budget = self.epsilon if self.message_epsilon is None else None
        self.accountants = [
            {mode: PrivacyAccountant(n, budget if mode == "basic" else None) for mode in COMPOSITION_MODES}
            for _ in range(b)
        ]
        self._replica = np.repeat(np.arange(b), n)
        self._sender = np.tile(np.arange(n), b)
        self._sensitivity = np.broadcast_to(
            self.capacities * (math.sqrt(2.0) if self.strict else 1.0), (b, n, m)
        ).reshape(b * n, m)

    def observe(self, feedback: ProcurementFeedback) -> None:
        """Add the round's own data to the effective totals, the own totals and the window (Eq. 9)."""
        super().observe(feedback)
        self.w += feedback.units
        self.y_window += feedback.successes

    # ------------------------------------------------------------------ sending
    def send(self, phase: Phase) -> list[MessageBatch]:
        """In a communication round: every agent's noisy window sums, then the windows are cleared."""
        slot = phase.slot
        if slot + 1 not in self._round_set:
            return []
        z = self.z + 1
        batch = self._message(z, float(self.epsilons[z - 1]))  # raises before any change if over budget
        self.z = z
        self.w[...] = 0
        self.y_window[...] = 0
        return [batch]

    def _message(self, z: int, eps_z: float) -> MessageBatch:
        """The z-th message of every agent (noised and accounted in-agent when ``noise=True``)."""
        b, n, m = self.w.shape
        w = self.w.reshape(b * n, m).astype(np.float64)
        y = self.y_window.reshape(b * n, m).astype(np.float64)
        if self.noise is True:
            w, y = self._add_noise(w, y, z, eps_z)
        payload: dict[str, np.ndarray] = {"k": self._sensitivity, "z": np.full(b * n, z, np.int64)}
        if self.noise is True:
            data: Privatized | Sensitive = Privatized(description="P-FCB Gaussian noise added by the agent")
        else:
            partition = "z" if self.accounting == "disjoint" else None
            data = Sensitive(bounds=None, aggregate="sum", sensitivity_field="k", partition_field=partition)
        if self.accounting == "basic_strict":
            payload.update(w=w, y=y)
            privacy: dict[str, FieldPrivacy] = {"w": data, "y": data}
        else:
            payload["wy"] = np.stack([w, y], axis=-1)
            privacy = {"wy": data}
        privacy.update(k=Public(), z=Public())
        return MessageBatch(
            kind=self.message_kind,
            replica=self._replica,
            sender=self._sender,
            recipient=np.full(b * n, NEIGHBOURS),
            payload=payload,
            privacy=privacy,
        )

    def _add_noise(self, w: np.ndarray, y: np.ndarray, z: int, eps_z: float) -> tuple[np.ndarray, np.ndarray]:
        """In-agent Gaussian noise per entry (sigma = sensitivity x unit sigma) and the accountants' charge."""
        b, n, m = self.w.shape
        mechanism = GaussianMechanism(1.0, eps_z, self.delta, allow_large_epsilon=True)
        self._charge(mechanism, z)
        noise = np.concatenate([rng.standard_normal((n, m, 2)) for rng in self.rngs]).reshape(b * n, m, 2)
        sigma = self._sensitivity * mechanism.sigma
        return w + sigma * noise[..., 0], y + sigma * noise[..., 1]

    def _charge(self, mechanism: GaussianMechanism, z: int) -> None:
        """Record the z-th message of every agent in the three composition views.

        Every message releases every producer's entry with the same ``(eps_z, delta)`` event, and one changed
        record (one ``l[j, i]`` of one round) moves one producer's entry only, so the accounts of all
        (sender, producer) pairs of a sender are identical: one key stands for all producers. Keys:
        ``basic`` one event per message under ``"producer"``; ``basic_strict`` two (the w and y fields) under
        it; ``disjoint`` one under ``("producer", z)`` (each window holds different rounds). The budget of
        ``basic`` is checked for every agent first, so an over-budget message raises
        :class:`~wrappers.dp.PrivacyBudgetExceeded` before anything is recorded.
        """
        event = mechanism.event()
        n = self.w.shape[1]
        for accountants in self.accountants:
            for j in range(n):
                if accountants["basic"].would_exceed(j, event, "producer"):
                    accountants["basic"].charge(j, event, "producer")  # raises PrivacyBudgetExceeded
        for accountants in self.accountants:
            for j in range(n):
                accountants["basic"].record(j, event, "producer")
                accountants["basic_strict"].record(j, event, "producer")
                accountants["basic_strict"].record(j, event, "producer")
                accountants["disjoint"].record(j, event, ("producer", z))

    # ------------------------------------------------------------------ receiving
    @staticmethod
    def _window_sums(payload: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        if "wy" in payload:
            return payload["wy"][..., 0], payload["wy"][..., 1]
        return payload["w"], payload["y"]

    def _received(self, inbox: Sequence[MessageBatch]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Dense (B, receiver, sender, m) window sums of this kind and the (B, receiver, sender) mask."""
        b, n, m = self.W.shape
        w_in, y_in = np.zeros((b, n, n, m)), np.zeros((b, n, n, m))
        present = np.zeros((b, n, n), bool)
        for batch in inbox:
            if batch.kind != self.message_kind:
                continue
            w, y = self._window_sums(batch.payload)
            index = (batch.replica, batch.recipient, batch.sender)
            w_in[index], y_in[index], present[index] = w, y, True
        return w_in, y_in, present

    def receive(self, phase: Phase, inbox: list[MessageBatch]) -> None:
        """CheckAndUpdate every received entry, senders in ascending order (D-18)."""
        slot = phase.slot
        w_in, y_in, present = self._received(inbox)
        if not present.any():
            return
        t, n = slot + 1, self.context.num_agents
        local = self.check_basis == "local"
        basis = (self.N, self.Yloc) if local else None
        for sender in range(n):
            rows = present[:, :, sender]
            if not rows.any():
                continue
            W, Y, accepted = check_and_update(  # noqa: N806 (the paper's names)
                self.W,
                self.Y,
                w_in[:, :, sender],
                y_in[:, :, sender],
                log_arg=t if local else n * t,
                width_mult=self.accept_width_mult,
                weight=self.comm_weight,
                basis=basis,
                strict=local,
            )
            mask = rows[..., None]
            self.W, self.Y = np.where(mask, W, self.W), np.where(mask, Y, self.Y)
            self.accepted[:, :, sender] += (accepted & mask).sum(axis=-1)
            self.offered[:, :, sender] += rows * self.W.shape[-1]

    # ------------------------------------------------------------------ reports
    def epsilon_spent(self) -> np.ndarray | None:
        """(B, n) epsilon spent per agent under the paper's basic composition (None unless ``noise=True``)."""
        if self.noise is not True:
            return None
        return np.stack([accountants["basic"].totals() for accountants in self.accountants])

    def delta_spent(self) -> np.ndarray | None:
        """(B, n) delta spent per agent under the paper's basic composition (None unless ``noise=True``)."""
        if self.noise is not True:
            return None
        return np.stack([accountants["basic"].delta_totals() for accountants in self.accountants])

    def privacy_report(self, replica: int = 0) -> dict[str, Any]:
        """The three composition views (max over agents of epsilon and delta) and the analytic pair check.

        Keys: ``"basic"``, ``"basic_strict"``, ``"disjoint"`` (each ``{"epsilon", "delta"}``), ``"pair_delta"``
        (the largest exact delta of a message's (w~, y~) pair at its eps_z), ``"messages"`` (z so far) and
        ``"eps_z"`` (the budgets used). Only the in-agent mode (``noise=True``) charges the agent's
        accountants; with ``noise="wrapper"`` read the wrapper's accountant instead.
        """
        accountants = self.accountants[replica]
        n = self.context.num_agents
        report: dict[str, Any] = {
            mode: {
                "epsilon": max(accountants[mode].epsilon(j) for j in range(n)),
                "delta": max(accountants[mode].delta(j) for j in range(n)),
            }
            for mode in COMPOSITION_MODES
        }
        used = self.epsilons[: self.z]
        report["pair_delta"] = max((pair_delta(float(e), self.delta) for e in used), default=0.0)
        report["messages"] = self.z
        report["eps_z"] = used.tolist()
        return report

    def state_dict(self, replica: int = 0) -> dict[str, Any]:
        """Statistics of one replica (W, Y, N, Yloc, window w and y), tau0, z and the acceptance counts."""
        state = super().state_dict(replica)
        state.update(
            w=self.w[replica].copy(),
            y=self.y_window[replica].copy(),
            z=self.z,
            accepted=self.accepted[replica].copy(),
            offered=self.offered[replica].copy(),
        )
        return state


class FCBExp(PFCB, config=solanki_config.FCBExpConfig):
    """The experiments' "FCB" (§6.1, D-21): P-FCB whose messages carry the exact window sums.

    Same schedule, CheckAndUpdate and omegas as :class:`PFCB`; ``noise`` is fixed to False. The window
    sums are still declared ``Sensitive``, so wrapping the environment in a DP wrapper turns FCBExp into
    P-FCB in wrapper mode.
    """

    config: solanki_config.FCBExpConfig


class NaivePrivate(PFCB):
    """For tests only: the leaky scheme of Claim 1 (§2.6).

    At each communication round an agent sends its exact own estimate ``q^ = Yloc / N`` (``"q"``) and a
    noisy own count ``N~ = N + sigma xi`` (``"count"``). If the agent bought nothing from a producer since
    the last message, ``q^`` is unchanged whatever the noise, which rules out the adjacent history where it
    did: the privacy loss is unbounded. Receivers treat ``(N~, q^ N~)`` as a window sum (so they count
    data repeatedly; this class exists to demonstrate the leak, not to learn).
    """

    message_kind = "naive"

    def _message(self, z: int, eps_z: float) -> MessageBatch:
        b, n, m = self.N.shape
        count = self.N.reshape(b * n, m).astype(np.float64)
        estimate = self.Yloc.reshape(b * n, m) / np.maximum(count, 1.0)
        mechanism = GaussianMechanism(1.0, eps_z, self.delta, allow_large_epsilon=True)
        noise = np.concatenate([rng.standard_normal((n, m)) for rng in self.rngs]).reshape(b * n, m)
        noisy = count + self._sensitivity * mechanism.sigma * noise
        return MessageBatch(
            kind=self.message_kind,
            replica=self._replica,
            sender=self._sender,
            recipient=np.full(b * n, NEIGHBOURS),
            payload={"q": estimate, "count": noisy},
        )

    @staticmethod
    def _window_sums(payload: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return payload["count"], payload["q"] * payload["count"]


class EveryRoundPrivate(PFCB):
    """The §5.1 ablation: noisy window sums sent every round at a fixed ``message_epsilon`` (default 0.01).

    Basic composition over T messages gives ``T * message_epsilon`` (1e4 for T = 1e6 at 1e-2): the reason
    P-FCB communicates only on a sparse schedule. No budget is enforced.
    """

    defaults = MappingProxyType({"message_epsilon": 0.01, "schedule": "every_round"})


register_algorithm("solanki_nf", NonFederated, config=solanki_config.NonFederatedConfig)
register_algorithm("solanki_fcb_sync", FCBSync, config=solanki_config.FCBSyncConfig)
register_algorithm("solanki_fcb", FCBExp, config=solanki_config.FCBExpConfig)
register_algorithm("solanki_pfcb", PFCB, config=solanki_config.PFCBConfig)
