"""The successive-elimination engine shared by Li and Song's populations (spec section 2.0).

A *federation* is a group of agents that shares one active set: a whole replica for CDP-, DDP- and
HDP-MAB, a single agent for Single-MAB. Per federation the engine runs the public schedule:

1. **explore** epoch r: n_r cycles of round-robin over sorted I_{r-1} (D3), the same arm for every member;
2. at the epoch's end every member computes its epoch means x^ (and, with agent-drawn noise, y^);
3. **communicate**: the subclass's protocol runs one hop per boundary; the first hop goes at the
   boundary right after the epoch (free, ``first_hop_free``), each further hop costs one slot in which
   every member pulls its local empirical best arm (D11); exploitation rewards update nothing;
4. the round's outcome (the survivors I_r, or a commit arm) starts the next epoch in the next slot,
   or the **commit** phase (one arm to the horizon), or the **cycle** phase (``after_cap="round_robin"``).

Time model (spec D9). A hop's messages travel with a slot's pulls and arrive in that step, so they
can only use earlier rewards. The first hop of a round needs the epoch's last reward: with
``first_hop_free=True`` (the default) it is sent at the boundary after that slot, through the core's
message-only :meth:`~fedbandit_envs.families.mab.core.FederatedMABCore.exchange` (the population's
:meth:`boundary` hook), so it costs no pull; every further hop costs one exploitation slot. A round
of h hops therefore delays the next epoch by h - 1 slots: CDP 0, GIS d_G - 1, SAC
max_q ecc_q(SA_q) - 1 (at least 0; a sink uploads in the boundary in which its component is complete,
and the server replies in it). ``first_hop_free=False`` sends the first hop with the next slot's pull
instead, so every hop costs a slot (CDP 1, GIS d_G, SAC max_q ecc_q(SA_q), at least 1). Each round's
``hops`` and ``delay`` (exploitation slots) are logged in :attr:`LiSongPopulation.round_log`.

Randomness: agent-drawn Laplace noise comes from the replica's ``agents`` stream, one (members, #I)
block per federation and epoch in epoch order, so algorithms that differ only in topology or delay
draw identical noise (common random numbers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal, cast, get_args

import numpy as np

from agents.configured import Configured
from agents.li_song.schedules import (
    CALIBRATIONS,
    Calibration,
    EpochPlan,
    algorithm_epsilon,
    eliminate,
    epoch_plan,
    target_accuracy,
)
from fedbandit_envs.channel import MessageBatch
from fedbandit_envs.channel.privacy import Privatized, Public, Sensitive
from fedbandit_envs.core import Action, AgentContext, Feedback, Phase, Step
from fedbandit_envs.protocol import Coordinator, Population
from fedbandit_envs.reference import reference_active
from fedbandit_envs.topology import Topology
from fedbandit_envs.validation import CheckedConfig, option

__all__ = [
    "LiSongServer",
    "AFTER_CAP",
    "AGGREGATES",
    "EXPLOIT_SOURCES",
    "HYBRID_AGGREGATIONS",
    "NOISE_SOURCES",
    "EliminationState",
    "aggregate_values",
    "LiSongConfig",
    "LiSongPopulation",
    "epoch_mean_privacy",
]

#: D7: what happens when the round cap R is reached with more than one active arm.
AfterCap = Literal["commit", "round_robin"]
AFTER_CAP = get_args(AfterCap)
#: D11: the arm pulled during communication slots (the agent's non-private mean, or the last aggregate).
ExploitSource = Literal["local", "last_global"]
EXPLOIT_SOURCES = get_args(ExploitSource)
#: D4: what the elimination averages (historical means, or the epoch-only means as an ablation).
Aggregate = Literal["ybar", "yhat"]
AGGREGATES = get_args(Aggregate)
#: D5: how the HDP server combines its components.
HybridAggregation = Literal["weighted", "unweighted"]
HYBRID_AGGREGATIONS = get_args(HybridAggregation)
#: Who adds the Laplace noise: the DP wrapper (``Sensitive`` fields) or the agent itself (``Privatized``).
NoiseSource = Literal["wrapper", "agent"]
NOISE_SOURCES = get_args(NoiseSource)

#: Phases of a federation.
EXPLORE, COMMUNICATE, COMMIT, CYCLE = 0, 1, 2, 3

#: The accountant key of the agents' own Laplace mechanism (charged once: epochs compose in parallel).
ACCOUNT_KEY = "li_song_epoch_means"


@dataclass(frozen=True)
class LiSongConfig(CheckedConfig):
    """Hyper-parameters of a Li-Song population and its server (each class documents the ones it uses).

    Every field is checked on construction against its annotation and bounds
    (:class:`~fedbandit_envs.validation.CheckedConfig`).

    Attributes:
        epsilon: the privacy parameter epsilon, finite and > 0 (None: non-private, no privacy term in S(r)
            and C(r)).
        privacy_calibration: ``"paper"`` or ``"strict"`` (D13, see :data:`CALIBRATIONS`).
        participation: p in (0, 1]; N = ceil(p M) agents upload per round (D12).
        rounds: the round cap R >= 1 (None: the standard 2^-r schedule without a cap).
        delta_schedule_base: Delta of the Delta^(r/R) schedule: a float in (0, 1) or ``"oracle"`` (D6).
        after_cap: ``"commit"`` or ``"round_robin"`` (D7).
        exploit_source: ``"local"`` or ``"last_global"`` (D11).
        noise: ``"wrapper"`` or ``"agent"`` (see :data:`NOISE_SOURCES`).
        aggregate: ``"ybar"`` or ``"yhat"`` (D4).
        hybrid_aggregation: ``"weighted"`` or ``"unweighted"`` (D5, HDP only).
        first_hop_free: send a round's first hop at the boundary after the epoch, without a pull (D9).
    """

    epsilon: float | None = option(1.0, minimum=0.0, exclusive_minimum=True)
    privacy_calibration: Calibration = "paper"
    participation: float = option(1.0, minimum=0.0, maximum=1.0, exclusive_minimum=True)
    rounds: int | None = option(None, minimum=1)
    delta_schedule_base: float | Literal["oracle"] = option(
        "oracle", minimum=0.0, maximum=1.0, exclusive_minimum=True, exclusive_maximum=True
    )
    after_cap: AfterCap = "commit"
    exploit_source: ExploitSource = "local"
    noise: NoiseSource = "wrapper"
    aggregate: Aggregate = "ybar"
    hybrid_aggregation: HybridAggregation = "weighted"
    first_hop_free: bool = True

    def gap_base(self) -> float | None:
        """Delta of the capped schedule (None without a cap); raises if ``"oracle"`` was never resolved."""
        if self.rounds is None:
            return None
        if self.delta_schedule_base == "oracle":
            raise ValueError(
                f"rounds={self.rounds} needs the gap base of the capped schedule, and delta_schedule_base='oracle' "
                "(D6) is resolved from the instance by agents.li_song.run only (the instance must be fixed with "
                "instance_seed); otherwise pass delta_schedule_base as a float in (0, 1)"
            )
        return float(self.delta_schedule_base)


class EliminationState:
    """The public elimination state of one federation: active set, completed rounds and S(r).

    Agents and the server each keep one and advance it with the same outcomes, so they agree on every
    schedule value.

    Args:
        num_arms: K.
        horizon: T.
        n_agg: agents averaged per round.
        epsilon: the algorithm's epsilon (after calibration), or None.
        rounds: the round cap R, or None.
        delta: the gap base of the capped schedule (needed when ``rounds`` is set).
        after_cap: D7 behaviour when the cap is reached with several arms.
    """

    def __init__(
        self,
        num_arms: int,
        horizon: int,
        n_agg: int,
        epsilon: float | None,
        rounds: int | None,
        delta: float | None,
        after_cap: str,
    ) -> None:
        self.num_arms, self.horizon, self.n_agg, self.epsilon = num_arms, horizon, n_agg, epsilon
        self.rounds, self.delta, self.after_cap = rounds, delta, after_cap
        self.active = np.ones(num_arms, bool)
        self.completed = 0
        self.samples = 0
        self.plan: EpochPlan | None = None
        self.commit = -1
        self.values: np.ndarray | None = None

    @property
    def exploring(self) -> bool:
        """Whether another epoch follows (several active arms and the cap not reached)."""
        capped = self.rounds is not None and self.completed >= self.rounds
        return self.active.sum() > 1 and not capped

    def current_plan(self) -> EpochPlan:
        """The plan of the epoch in progress; RuntimeError when none has begun (or it was closed)."""
        if self.plan is None:
            raise RuntimeError("no epoch in progress: call begin_epoch() while exploring")
        return self.plan

    def begin_epoch(self) -> EpochPlan:
        """The plan of the next epoch (call only while :attr:`exploring`)."""
        r = self.completed + 1
        accuracy = target_accuracy(r, self.rounds, self.delta)
        self.plan = epoch_plan(
            r, self.n_agg, self.num_arms, self.horizon, self.epsilon, int(self.active.sum()), accuracy, self.samples
        )
        return self.plan

    def decide(self, values: np.ndarray) -> tuple[np.ndarray, int]:
        """Survivors (K,) and commit arm (-1: none) of the current round from the (K,) aggregate ``values``."""
        arms = np.flatnonzero(self.active)
        survivors = np.zeros(self.num_arms, bool)
        survivors[arms[eliminate(values[arms], self.current_plan().radius)]] = True
        commit = -1
        if survivors.sum() == 1:
            commit = int(np.flatnonzero(survivors)[0])
        elif self.rounds is not None and self.completed + 1 >= self.rounds and self.after_cap == "commit":
            kept = np.flatnonzero(survivors)
            commit = int(kept[np.argmax(values[kept])])
        return survivors, commit

    def advance(self, survivors: np.ndarray, commit: int, values: np.ndarray) -> None:
        """Close the current round with its outcome."""
        self.completed += 1
        self.samples = self.current_plan().samples
        self.active = np.asarray(survivors, bool).copy()
        self.commit = int(commit)
        self.values = np.asarray(values, np.float64).copy()


def aggregate_values(
    totals: np.ndarray,
    latest: np.ndarray,
    samples: int,
    n_agg: int,
    aggregate: str = "ybar",
    sizes: np.ndarray | None = None,
) -> np.ndarray:
    """The elimination values over the active arms from per-source sums (spec 2.1-2.4).

    Args:
        totals: (sources, #I) cumulative sums sum_j n_j y^(j) of each source (an agent or a component).
        latest: (sources, #I) the current epoch's y^ of each source (summed over a component's agents).
        samples: S(r).
        n_agg: agents represented by all sources together (M or N).
        aggregate: ``"ybar"`` (historical means, D4) or ``"yhat"`` (epoch means, ablation).
        sizes: agents per source for the paper-literal unweighted mean of component means (D5); None
            gives the sample-weighted mean sum / n_agg.
    """
    source = totals if aggregate == "ybar" else latest
    per_sample = samples if aggregate == "ybar" else 1
    if sizes is None:
        return source.sum(axis=0) / (n_agg * per_sample)
    return (source / sizes[:, None]).sum(axis=0) / (len(sizes) * per_sample)


def epoch_mean_privacy(noised: bool, epsilon: float | None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The declaration of an epoch-mean message: ``mean`` with ``n`` (records) and ``epoch`` (partition).

    Without agent noise the mean is ``Sensitive`` (sensitivity 1/n_r; a DP wrapper noises it once and
    accounts it under the epoch's partition key). With agent noise it is ``Privatized`` with the agent's
    guarantee ``epsilon`` (n_agg epsilon under the paper calibration), charged once for the whole run.
    """
    if noised:
        # each epoch's mean uses that epoch's records only: the agent's epsilon covers the whole run
        mean: Any = Privatized(
            epsilon=epsilon, account_key=ACCOUNT_KEY, description="Laplace noise of the agent", scope="episode"
        )
    else:
        mean = Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n", partition_field="epoch")
    return {"mean": mean, "n": Public(), "epoch": Public(), **(extra or {})}


class LiSongServer(Coordinator):
    """Base class of the Li-Song servers: they compute the same public schedule as the agents from the config.

    Args:
        config: the population's hyper-parameters.
    """

    def __init__(self, config: LiSongConfig) -> None:
        self.config = config

    def start_rounds(self, context: AgentContext, n_agg: int, uploaders: int) -> None:
        """Round 1 of every replica, and empty upload tables for ``uploaders`` senders per replica.

        Sets :attr:`states` (one :class:`EliminationState` per replica, its first epoch begun, with ``n_agg``
        agents averaged), ``totals`` / ``latest`` / ``received`` (B, uploaders, ...), ``counts`` / ``sums``
        (B, K) and ``selected`` (B, M; every agent).
        """
        cfg = self.config
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        epsilon = algorithm_epsilon(cfg.epsilon, cfg.privacy_calibration, n_agg)
        self.states = [
            EliminationState(k, context.horizon, n_agg, epsilon, cfg.rounds, cfg.gap_base(), cfg.after_cap)
            for _ in range(b)
        ]
        for state in self.states:
            state.begin_epoch()
        self.totals = np.zeros((b, uploaders, k))
        self.latest = np.zeros((b, uploaders, k))
        self.received = np.zeros((b, uploaders), bool)
        self.counts = np.zeros((b, k), np.int64)
        self.sums = np.zeros((b, k))
        self.selected = np.ones((b, m), bool)


class LiSongPopulation(Configured, Population):
    """Base class of the Li-Song populations (see the module docstring for the phases).

    Subclasses define the federations, n_agg, the topology check and the round protocol
    (:meth:`_epoch_done`, :meth:`_messages`, :meth:`_receive`), and finish a round with :meth:`_finish`.

    Attributes:
        config: the hyper-parameters.
    """

    families = ("mab",)

    #: Rounds send their first hop (D9) and HDP's sink uploads at the boundary after a slot.
    boundary_hops = True

    config_class = LiSongConfig
    config: LiSongConfig

    @classmethod
    def from_config(cls, config: LiSongConfig) -> LiSongPopulation:
        """A population of this class with the given hyper-parameters."""
        population = cls.__new__(cls)
        population.config = config
        return population

    def completed(self, replica: int, slots: int) -> tuple[int, int]:
        """(rounds, delay slots) that replica ``replica`` completed within its first ``slots`` slots.

        Delay slots are the exploitation slots of the rounds' communication (t_delay summed over rounds).
        With one federation per agent (Single-MAB) the rounds are the most any agent completed.
        """
        rounds, delay = 0, 0
        for f in np.flatnonzero(self.fed_replica == replica).tolist():
            done = [log for log in self.round_log[f] if log.get("end_slot", slots) < slots]
            rounds, delay = max(rounds, len(done)), max(delay, sum(log["delay"] for log in done))
        return rounds, delay

    # ------------------------------------------------------------------ subclass interface
    def n_agg(self, num_agents: int) -> int:
        """Agents whose data each elimination averages."""
        return num_agents

    def check_topology(self, topology: Topology) -> None:
        """Raise ValueError if the protocol cannot run on ``topology``."""

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The per (agent, arm) sums, one schedule state per federation and the federations' round logs.

        Measured with ``tracemalloc``: about 1.4 kB per federation plus 9 B per arm at reset; a round log entry
        takes about 1 kB, and a federation runs at most about ``log2(horizon)`` rounds. The subclasses add their
        protocol's tables.
        """
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        federations = self._num_federations(b, m)
        return {
            "epoch and exploration sums (replicas x agents x arms x 8 B, 2 tables)": 16.0 * b * m * k,
            "federation states (federations x (1.4 kB + arms x 9 B))": federations * (1400.0 + 9.0 * k),
            "round logs (federations x log2(horizon) rounds x 1 kB)": federations
            * 1000.0
            * math.log2(context.horizon + 1),
        }

    def _federation_of(self, num_replicas: int, num_agents: int) -> np.ndarray:
        """(B, M) federation index of every agent (default: one federation per replica)."""
        return np.repeat(np.arange(num_replicas), num_agents).reshape(num_replicas, num_agents)

    def _num_federations(self, num_replicas: int, num_agents: int) -> int:
        """The number of federations :meth:`_federation_of` forms (default: one per replica)."""
        return num_replicas

    def _epoch_done(self, f: int, slot: int, means: np.ndarray) -> None:
        """Start the round of federation ``f`` after its epoch ended in ``slot``; ``means`` is (members, #I)."""
        raise NotImplementedError

    def _messages(self, slot: int, feds: np.ndarray) -> list[MessageBatch]:
        """The messages of ``slot`` of the communicating federations ``feds``: their :meth:`_hop` messages in order."""
        return [batch for b in feds.tolist() for batch in self._hop(b)]

    def _hop(self, b: int) -> list[MessageBatch]:
        """The messages of federation ``b``'s current hop (none by default)."""
        return []

    def _receive(self, slot: int, inbox: list[MessageBatch], feds: np.ndarray) -> None:
        """Read the inbox of a step or a boundary hop after ``slot``; ``feds`` sent a hop in it."""

    # ------------------------------------------------------------------ binding (agents.li_song.run)
    def bind(
        self,
        num_agents: int,
        epsilon: Any = None,
        calibration: str | None = None,
        n_agg: int | None = None,
        delta: float | None = None,
    ) -> None:
        """Take epsilon and the calibration from a DP wrapper, and Delta from the instance (D6).

        Args:
            num_agents: M of the environment.
            epsilon: the wrapper's epsilon (ignored unless ``noise="wrapper"``).
            calibration: the wrapper's calibration.
            n_agg: the wrapper's n_agg (must match under the paper calibration).
            delta: the instance's minimum gap, used when ``delta_schedule_base="oracle"``.
        """
        config = self.config
        if epsilon is not None and config.noise == "wrapper":
            if callable(epsilon):
                raise TypeError("Li-Song agents need a constant epsilon in the DP wrapper, not a schedule")
            if calibration is None:
                raise ValueError(f"bind needs the DP wrapper's calibration with its epsilon: one of {CALIBRATIONS}")
            expected = self.n_agg(num_agents)
            if calibration == "paper" and n_agg != expected:
                raise ValueError(
                    f"the DP wrapper's n_agg={n_agg} must equal the agents averaged per round ({expected}): "
                    f"pass n_agg={expected} to the wrapper"
                )
            config = replace(config, epsilon=float(epsilon), privacy_calibration=cast(Calibration, calibration))
        if delta is not None and config.rounds is not None and config.delta_schedule_base == "oracle":
            config = replace(config, delta_schedule_base=float(delta))
        self.config = config

    # ------------------------------------------------------------------ episode
    def reset(self, context: AgentContext) -> None:
        """Start every federation's first epoch."""
        low, high = context.reward_bounds
        if low < 0.0 or high > 1.0:
            raise ValueError(
                f"Li-Song's algorithms need rewards in [0, 1] (sensitivity 1/n_r), got bounds {context.reward_bounds}; "
                "use reward_model='bernoulli' or 'beta'"
            )
        for topology in context.topologies:
            self.check_topology(topology)
        cfg = self.config
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self.context = context
        self.num_agg = self.n_agg(m)
        self.epsilon = algorithm_epsilon(cfg.epsilon, cfg.privacy_calibration, self.num_agg)
        self.message_epsilon = None if self.epsilon is None else self.epsilon * self.num_agg
        self.agent_noise = self.epsilon is not None and cfg.noise == "agent"
        delta = cfg.gap_base()
        self.fed_of = self._federation_of(b, m)
        num_feds = int(self.fed_of.max()) + 1
        self.fed_replica = np.zeros(num_feds, np.int64)
        self.fed_members: list[np.ndarray] = [np.zeros(0, np.int64)] * num_feds
        for replica in range(b):
            for f in np.unique(self.fed_of[replica]):
                self.fed_replica[f] = replica
                self.fed_members[f] = np.flatnonzero(self.fed_of[replica] == f)
        self.states = [
            EliminationState(k, context.horizon, self.num_agg, self.epsilon, cfg.rounds, delta, cfg.after_cap)
            for _ in range(num_feds)
        ]
        self.phase = np.full(num_feds, EXPLORE, np.int64)
        self.start = np.zeros(num_feds, np.int64)
        self.end = np.zeros(num_feds, np.int64)
        self.size = np.ones(num_feds, np.int64)
        self.order = np.zeros((num_feds, k), np.int64)
        self.commit = np.zeros(num_feds, np.int64)
        self._feds = np.arange(num_feds)
        #: Hops sent in the current round of every federation.
        self.round_hops = np.zeros(num_feds, np.int64)
        self._first_hops: list[int] = []
        self._boundary_feds = np.zeros(0, np.int64)
        self.epoch_sums = np.zeros((b, m, k))
        self.explore_sums = np.zeros((b, m, k))
        self.exploit = np.zeros((b, m), np.int64)
        self._rows, self._cols = np.arange(b)[:, None], np.arange(m)[None, :]
        self.noise_rngs = context.agent_rngs()
        #: Per federation, one dict per round: schedule values and the slots it used (diagnostics).
        self.round_log: list[list[dict[str, Any]]] = [[] for _ in range(num_feds)]
        self._static: np.ndarray | None = None
        for f in range(num_feds):
            self._begin(f, 0)

    def _begin(self, f: int, slot: int) -> None:
        """Start federation ``f``'s next epoch (or its commit / cycle phase) at ``slot``."""
        state = self.states[f]
        if state.exploring:
            plan = state.begin_epoch()
            self.phase[f], self.end[f] = EXPLORE, slot + plan.epoch_length - 1
            self.round_log[f].append(
                {
                    "round": plan.round,
                    "num_active": plan.num_active,
                    "pulls": plan.pulls,
                    "samples": plan.samples,
                    "radius": plan.radius,
                    "noise_scale": plan.noise_scale,
                    "explore_start": slot,
                    "explore_end": int(self.end[f]),
                }
            )
        elif state.commit >= 0:
            self.phase[f], self.commit[f] = COMMIT, state.commit
        else:
            self.phase[f] = CYCLE
        arms = np.flatnonzero(state.active)
        self.order[f, : len(arms)], self.size[f], self.start[f] = arms, len(arms), slot
        self._refresh()

    def _refresh(self) -> None:
        """Cache the per-slot views of the phases (they change only at epoch and round ends).

        The reference mode (:mod:`fedbandit_envs.reference`) recomputes them at every :meth:`act` and :meth:`observe`.
        """
        exploring = self.phase == EXPLORE
        self._exploring = exploring
        self._exploring_agents = exploring[self.fed_of]
        self._all_exploring = bool(exploring.all())
        self._next_end = int(self.end[exploring].min()) if exploring.any() else -1
        self._communicating = np.flatnonzero(self.phase == COMMUNICATE)
        self._committing = bool((self.phase == COMMIT).any())
        if np.all(self.phase == COMMIT):
            self._static = self.commit[self.fed_of]

    def _on_epoch_end(self, f: int, slot: int) -> None:
        """Epoch means of the members, their exploitation arm (D11), agent noise; then the protocol."""
        replica, members, state = self.fed_replica[f], self.fed_members[f], self.states[f]
        plan, arms = state.current_plan(), np.flatnonzero(state.active)
        sums = self.epoch_sums[replica, members]
        self.explore_sums[replica, members] += sums
        self.epoch_sums[replica, members] = 0.0
        means = sums[:, arms] / plan.pulls
        if self.config.exploit_source == "local" or state.values is None:
            scores = self.explore_sums[replica, members][:, arms]
        else:
            scores = np.broadcast_to(state.values[arms], means.shape)
        self.exploit[replica, members] = arms[np.argmax(scores, axis=1)]
        if self.agent_noise:
            means = means + self.noise_rngs[replica].laplace(0.0, plan.noise_scale, means.shape)
        self.phase[f] = COMMUNICATE
        self.round_hops[f] = 0
        self._refresh()
        self._epoch_done(f, slot, means)
        if self.config.first_hop_free and self.phase[f] == COMMUNICATE:
            self._first_hops.append(f)

    def _finish(self, f: int, slot: int, survivors: np.ndarray, commit: int, values: np.ndarray) -> None:
        """Close federation ``f``'s round in ``slot`` with its outcome and start what follows in ``slot + 1``."""
        self.states[f].advance(survivors, commit, values)
        log = self.round_log[f][-1]
        log.update(
            end_slot=slot,
            hops=int(self.round_hops[f]),
            delay=slot - log["explore_end"],
            survivors=int(np.sum(survivors)),
        )
        self._begin(f, slot + 1)

    # ------------------------------------------------------------------ slots
    def act(self, step: Step) -> Action:
        """Exploration arm, exploitation arm (communicating) or commit arm of every agent; hop messages."""
        slot = step.slot
        self._first_hops = []  # a loop without boundary hops sends them with this slot's pull instead
        if reference_active():
            self._refresh()
        if self._static is not None:
            return Action(self._static)
        fed_arms = self.order[self._feds, (slot - self.start) % self.size]
        if self._committing:
            fed_arms = np.where(self.phase == COMMIT, self.commit, fed_arms)
        arms = fed_arms[self.fed_of]
        if not len(self._communicating):
            return Action(arms)
        communicating = self.phase == COMMUNICATE
        arms = np.where(communicating[self.fed_of], self.exploit, arms)
        self.round_hops[self._communicating] += 1
        return Action(arms, _in_sender_order(self._messages(slot, self._communicating)))

    def send(self, phase: Phase) -> list[MessageBatch]:
        """The free first hop of the rounds whose epoch ended in ``phase.slot`` (``first_hop_free``, D9)."""
        slot = phase.slot
        if not self._first_hops:
            return []
        feds = np.array([f for f in self._first_hops if self.phase[f] == COMMUNICATE], np.int64)
        self._first_hops = []
        self._boundary_feds = feds
        if not len(feds):
            return []
        self.round_hops[feds] += 1
        return _in_sender_order(self._messages(slot, feds))

    def receive(self, phase: Phase, inbox: list[MessageBatch]) -> None:
        """Run the protocol on the inbox of the boundary hop."""
        self._receive(phase.slot, inbox, self._boundary_feds)

    def observe(self, feedback: Feedback) -> None:
        """Accumulate exploration rewards, end epochs, and run the protocol on the inbox."""
        if reference_active():
            self._refresh()
        if self._static is not None:
            return
        slot = feedback.slot
        exploring, agents, everyone, next_end = (
            self._exploring,
            self._exploring_agents,
            self._all_exploring,
            self._next_end,
        )
        if feedback.inbox or len(self._communicating):
            self._receive(slot, feedback.inbox, self._communicating)
        if next_end < 0:
            return
        rewards = feedback.rewards if everyone else np.where(agents, feedback.rewards, 0.0)
        self.epoch_sums[self._rows, self._cols, feedback.arms] += rewards
        if slot >= next_end:
            for f in np.flatnonzero(exploring & (self.end == slot)):
                self._on_epoch_end(int(f), slot)


def _in_sender_order(batches: list[MessageBatch]) -> list[MessageBatch]:
    """Batches sorted by their lowest sender (the order in which the PettingZoo path groups them)."""
    return sorted(batches, key=lambda batch: int(batch.sender.min()))
