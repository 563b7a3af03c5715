"""Dubey and Pentland (AAMAS 2020): private and byzantine-proof cooperative UCB, with their baselines.

Spec: ``dubey-pentland.md`` (section numbers and D-items below refer to it). Every class is a vectorised
:class:`~fedbandit_envs.protocol.Population` over (B, M) agents:

* :class:`PrivateMultiAgentUCB`: Algorithms 1 + 2. Each agent releases its running mean per arm with fresh Laplace
  noise only at own counts ``f, 2f, ...`` (the shared
  :class:`~fedbandit_envs.privacy.mechanisms.IntervalRelease`, applied to
  all agents at once; D1, D3, D17, D18),
  floods ``(rel_mean, rel_cnt)`` for ``gamma`` hops and plays UCB on the count-weighted pool (D2, D7, D22) after
  ``K f`` slots of round-robin exploration (D6).
* :class:`CooperativeUCB`: the same protocol without noise, releasing every pull, exploring ``K`` slots (§2.5).
* :class:`ByzantineProofUCB`: Algorithm 3. Each agent floods every ``(arm, reward)`` sample for ``gamma`` hops and
  plays UCB on the robust trimmed mean of all samples it holds (§2.3, §2.4, D9-D12).
* :class:`IndividualUCB1` and :class:`DPUCBInt`: the single-agent baselines of Fig. 1 (§2.5, D14).

**Timing in the suite.** A slot's reward arrives after the slot's messages are sent, so the record an agent
creates in slot ``s`` carries its data through slot ``s - 1``. Records are usable ``d`` slots after creation at hop
distance ``d`` (D4, :mod:`fedbandit_envs.channel.flooding`); remote data is therefore one slot older than in the
paper's round structure, while an agent's own data is always current (project decision P1).

Arms are 0-indexed; the paper's round ``t`` is slot ``t - 1``. Randomness (tie breaks and, for the private agents,
the Laplace noise they add to their own releases) comes only from the ``agents`` stream, one generator per replica.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, get_args

import numpy as np

from agents import dubey_config
from agents.configured import Configured
from fedbandit_envs.algorithms import register_algorithm
from fedbandit_envs.channel.flooding import FloodRecords, TTLFlooding
from fedbandit_envs.channel.privacy import Privatized, Public, declare_message_kinds
from fedbandit_envs.core import Action, AgentContext, Feedback, Step
from fedbandit_envs.privacy.accountant import LaplaceEvent, PrivacyAccountant
from fedbandit_envs.privacy.mechanisms import FixedInterval, IntervalRelease, laplace_noise
from fedbandit_envs.protocol import Population
from fedbandit_envs.reference import reference_active
from fedbandit_envs.validation import check_int, check_real

declare_message_kinds("dubey_release", "dubey_exact", "dubey_sample")  # public vocabulary under a DP wrapper

__all__ = [
    "ESTIMATORS",
    "ByzantineProofUCB",
    "CooperativeUCB",
    "DPUCBInt",
    "IndividualUCB1",
    "PrivateMultiAgentUCB",
    "kept_count",
    "trimmed_mean",
]

#: Robust estimators of :class:`ByzantineProofUCB` (D10): the paper's shortest-interval trimmed mean, or a plain
#: mean of all samples (an ablation: cooperative UCB without robustness).
ESTIMATORS: tuple[str, ...] = get_args(dubey_config.Estimator)


# ---------------------------------------------------------------------------------------------------- UCB helpers
def _argmax(index: np.ndarray, rngs: Sequence[np.random.Generator], tie_break: str) -> np.ndarray:
    """Argmax over the last axis of a (B, M, K) index; ties uniformly at random per replica (D8) or lowest arm."""
    if tie_break == "lowest":
        return index.argmax(axis=-1)
    ties = index == index.max(axis=-1, keepdims=True)
    draws = np.stack([rng.random(index.shape[1:]) for rng in rngs])
    return np.where(ties, draws, -1.0).argmax(axis=-1)


def _ucb_index(means: np.ndarray, counts: np.ndarray, t: int) -> np.ndarray:
    """The index ``means + sqrt(2 ln t / counts)`` of Algorithm 2 and UCB1 (paper round ``t``)."""
    return means + np.sqrt(2.0 * math.log(t) / counts)


# ---------------------------------------------------------------------------------------------------- memory
#: Bytes of a flooded copy besides its content: the record header (six int64) and its message row (four int64).
_HEADER_BYTES = 80


def _cells(context: AgentContext) -> int:
    """Replicas x agents x arms: the size of the (B, M, K) tables."""
    return context.num_replicas * context.num_agents * context.num_arms


def _max_degree(context: AgentContext) -> int:
    """The largest number of neighbours of an agent over the replicas' graphs."""
    return max(int(topology.degree().max(initial=0)) for topology in context.topologies)


def _reach(context: AgentContext, hops: int) -> int:
    """An upper bound on the other agents within ``hops`` hops of an agent (from the largest degree)."""
    degree, others = _max_degree(context), context.num_agents - 1
    reach, frontier = 0, degree
    # a hop adds at least one agent (degree >= 1) or none ever (degree 0): hops beyond M - 1 change nothing
    for _ in range(min(hops, others)):
        reach = min(others, reach + frontier)
        frontier *= max(degree - 1, 1)
        if reach == others:
            break
    return reach


class _UCBPopulation(Configured, Population, config=dubey_config.IndividualUCB1Config):
    """Shared parts: the agents' generators and their own pull counts and reward sums, (B, M, K) arrays.

    Every constructor keyword is a field of the class's :attr:`config_class` (:mod:`agents.dubey_config`), checked
    there: direct construction and :func:`~fedbandit_envs.algorithms.make_algorithm` take one validation path.
    """

    families = ("mab",)

    config: dubey_config.IndividualUCB1Config

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.tie_break = self.config.tie_break

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The own statistics (replicas x agents x arms) :meth:`reset` allocates (see the subclasses for more)."""
        return {"own statistics (replicas x agents x arms x 8 B, 2 tables)": 16.0 * _cells(context)}

    def reset(self, context: AgentContext) -> None:
        """Zero the own statistics; take one generator per replica from the ``agents`` stream."""
        self.context = context
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self.num_replicas, self.num_agents, self.num_arms = b, m, k
        self.rngs = context.agent_rngs()
        self.own_counts = np.zeros((b, m, k), np.int64)
        self.own_sums = np.zeros((b, m, k))
        self._rows = np.arange(b)[:, None]
        self._cols = np.arange(m)[None, :]

    #: Round-robin passes over the arms before the index is used (the interval ``f`` of the private agents).
    interval = 1

    @property
    def exploration_slots(self) -> int:
        """Slots of round-robin exploration, ``K f`` (known after reset)."""
        return self.num_arms * self.interval

    def _index(self, t: int) -> np.ndarray:
        """(B, M, K) the index every agent maximises at paper round ``t`` after the exploration."""
        raise NotImplementedError

    def _arms(self, slot: int) -> np.ndarray:
        """Arm ``slot mod K`` for the first :attr:`exploration_slots` slots, then the argmax of :meth:`_index`."""
        t = slot + 1
        if t <= self.exploration_slots:
            return np.full((self.num_replicas, self.num_agents), slot % self.num_arms, np.int64)
        return _argmax(self._index(t), self.rngs, self.tie_break)

    def _add_own(self, feedback: Feedback, clip: bool) -> None:
        rewards = np.clip(feedback.rewards, 0.0, 1.0) if clip else feedback.rewards
        self.own_counts[self._rows, self._cols, feedback.arms] += 1
        self.own_sums[self._rows, self._cols, feedback.arms] += rewards


class _FloodingUCB(_UCBPopulation):
    """A UCB population whose agents flood records of kind :attr:`kind` for ``gamma`` hops (:class:`TTLFlooding`)."""

    #: Message kind of the flooded records.
    kind: str

    config: dubey_config.CooperativeUCBConfig

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.flood = TTLFlooding(self.config.gamma, self.kind, self.config.max_age, self._privacy())
        self.gamma = self.flood.gamma

    def _privacy(self) -> dict[str, Any] | None:
        """The privacy declaration of the flooded content fields (None: none)."""
        return None

    def _record_bytes(self, context: AgentContext) -> float:
        """Bytes of one flooded record's content."""
        raise NotImplementedError

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The flooding's agent x agent table of seen records and the copies one slot delivers, besides the rest."""
        b, m = context.num_replicas, context.num_agents
        window = self.flood.window(context.horizon)
        forwarded = 1 + _reach(context, self.gamma - 1)  # the records an agent sends in a slot: its own and forwards
        copies = b * m * _max_degree(context) * forwarded if self.gamma else 0
        return {
            **super().memory_parts(context),
            "flood seen table (replicas x agents x agents x window x 8 B; window: min(max_age + 1, T))": 8.0
            * b
            * m
            * m
            * window,
            "flooded copies of one slot, delivered and gathered (replicas x agents x degree x records x 2)": 2.0
            * copies
            * (_HEADER_BYTES + self._record_bytes(context)),
        }

    def reset(self, context: AgentContext) -> None:
        """Zero the own statistics; start the flooding (refused on a topology that links agents to a server)."""
        if self.gamma:
            for topology in context.topologies:
                if topology.server_links.any():
                    raise ValueError(
                        f"{type(self).__name__} floods records to the neighbours of each agent on the agent graph "
                        f"and hosts no server, but topology {topology.name!r} links agents to a server; use an agent "
                        "graph such as topology='complete', 'ring' or 'erdos_renyi'"
                    )
        super().reset(context)
        self.flood.reset(self.num_replicas, self.num_agents, context.horizon)


# ---------------------------------------------------------------------------------------------------- interval releases
class _IntervalReleases:
    """Algorithm 1's interval releases (§2.1) for every (replica, agent, arm), vectorised.

    One :class:`IntervalRelease` defines the mechanism: its release schedule, its noise scale ``scale_at(n)``
    (``n ** (v/2 - 1)``) and its per-release epsilon ``epsilon_at(n)`` (``n ** (-v/2)``) are tabulated for own
    counts ``1..T``. The agents' own clipped counts and sums are the population's; at a release point of the pulled
    arm the held mean becomes ``sum / count + Laplace(scale)``, drawn from the replica's generator in agent order,
    and it is held until the next release (D3). This reproduces one ``IntervalRelease`` per (agent, arm) fed in
    that order, bit for bit (a test checks it).
    """

    def __init__(
        self,
        shape: tuple[int, int, int],
        dp_eps: float,
        v: float,
        schedule: Callable[[int], bool] | None,
        rngs: Sequence[np.random.Generator],
        horizon: int,
    ) -> None:
        self.mechanism = IntervalRelease(dp_eps, rngs[0], v, schedule)
        counts = range(1, horizon + 1)
        self._is_release = np.array([False, *(bool(self.mechanism.schedule(n)) for n in counts)])
        self._scale = np.array([np.nan, *(self.mechanism.scale_at(n) for n in counts)])
        self.rngs = rngs
        #: (B, M, K) last noisy release (0.0 before the first release of an arm).
        self.means = np.zeros(shape)
        #: (B, M, K) own count at the last release (0 before the first release).
        self.counts = np.zeros(shape, np.int64)
        #: (B, M, K) number of releases, i.e. of Laplace draws.
        self.releases = np.zeros(shape, np.int64)

    def update(self, arms: np.ndarray, own_counts: np.ndarray, own_sums: np.ndarray) -> None:
        """Release the pulled arms whose new own count is a schedule point (own statistics already updated)."""
        b, m = arms.shape
        cells = np.arange(b * m) * own_counts.shape[2] + arms.reshape(-1)  # flat (replica, agent, pulled arm)
        counts = own_counts.reshape(-1)[cells]
        release = self._is_release[counts]
        if not release.any():
            return
        cells, n = cells[release], counts[release]
        scale = self._scale[n]
        sizes = release.reshape(b, m).sum(axis=1).tolist()
        ends = np.cumsum(sizes).tolist()
        # one draw per releasing agent from its replica's generator, in agent order
        noise = np.concatenate(
            [laplace_noise(scale[e - n_r : e], self.rngs[r]) for r, (n_r, e) in enumerate(zip(sizes, ends)) if n_r]
        )
        self.means.reshape(-1)[cells] = own_sums.reshape(-1)[cells] / n + noise
        self.counts.reshape(-1)[cells] = n
        self.releases.reshape(-1)[cells] += 1

    def accountant(self, replica: int, own_counts: np.ndarray) -> PrivacyAccountant:
        """A privacy accountant holding every release of ``replica`` so far (agent; partition key = arm).

        Release ``j`` of an arm at own count ``n_j`` is ``epsilon_at(n_j) = n_j ** (-v/2)``-DP (D18); arms compose
        in parallel. ``own_counts`` is the population's (B, M, K) own counts.
        """
        agents = own_counts.shape[1]
        accountant = PrivacyAccountant(agents)
        points = np.flatnonzero(self._is_release)
        for i in range(agents):
            for k, count in enumerate(own_counts[replica, i].tolist()):
                for n in points[points <= count].tolist():
                    accountant.record(i, LaplaceEvent(self.mechanism.epsilon_at(n)), partition=k)
        return accountant


def _interval_options(
    config: dubey_config.DPUCBIntConfig | dubey_config.PrivateMultiAgentUCBConfig,
) -> tuple[float, float, Callable[[int], bool] | None, int]:
    """``dp_eps``, ``v`` and ``schedule`` of a checked config, and the exploration interval ``f = ceil(1/dp_eps)``."""
    return config.dp_eps, config.v, config.schedule, FixedInterval.from_epsilon(config.dp_eps).interval


def _release_memory(context: AgentContext) -> dict[str, float]:
    """The bytes of :class:`_IntervalReleases`: its tables per own count ``1..T`` and its three (B, M, K) tables."""
    return {
        "release schedule (horizon x 9 B)": 9.0 * (context.horizon + 1),
        "released statistics (replicas x agents x arms x 8 B, 3 tables)": 24.0 * _cells(context),
    }


# ---------------------------------------------------------------------------------------------------- baselines
class IndividualUCB1(_UCBPopulation):
    """UCB1 run by every agent on its own rewards, without communication (§2.5).

    Slots ``0..K-1`` play arms ``0..K-1``; afterwards ``argmax mean_k + sqrt(2 ln t / n_k)`` with the paper's round
    ``t = slot + 1``. Not :class:`agents.baselines.IndependentUCB1`: that one rotates each agent's first pulls,
    uses ``ln(t - 1)`` and breaks ties to the lowest arm, while the spec (and RC-10's seed-for-seed identity with
    :class:`CooperativeUCB` at ``gamma = 0``) needs this exploration order, ``ln t`` and random ties (D8).

    Keyword arguments: the fields of :class:`agents.dubey_config.IndividualUCB1Config` (``tie_break``), checked
    there.
    """

    def _index(self, t: int) -> np.ndarray:
        return _ucb_index(self.own_sums / self.own_counts, self.own_counts, t)

    def act(self, step: Step) -> Action:
        """Round-robin for the first K slots, then the UCB1 index."""
        return Action(self._arms(step.slot))

    def observe(self, feedback: Feedback) -> None:
        """Add each agent's reward to its own statistics."""
        self._add_own(feedback, clip=False)


class DPUCBInt(_UCBPopulation, config=dubey_config.DPUCBIntConfig):
    """DP-UCB-INT (Tossou and Dimitrakakis 2016) run by every agent alone (§2.5, D14).

    Round-robin for ``K f`` slots (``f = ceil(1/dp_eps)``); afterwards ``argmax rel_mean_k + sqrt(2 ln t / n_k)``,
    where ``rel_mean_k`` is the agent's last interval release (:class:`IntervalRelease`, held between releases)
    and ``n_k`` its current count.

    Keyword arguments: the fields of :class:`agents.dubey_config.DPUCBIntConfig` (``dp_eps``, ``v``, ``schedule``,
    ``tie_break``, ``frozen_index``: D14's optional reading, the whole index held between releases), checked there.
    """

    config: dubey_config.DPUCBIntConfig

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.dp_eps, self.v, self.schedule, self.interval = _interval_options(self.config)
        self.frozen_index = self.config.frozen_index

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The release tables (per horizon slot and per cell) and the frozen index, besides the own statistics."""
        return {**super().memory_parts(context), **_release_memory(context), "frozen index": 8.0 * _cells(context)}

    def reset(self, context: AgentContext) -> None:
        """Fresh mechanisms for every (agent, arm)."""
        super().reset(context)
        shape = (self.num_replicas, self.num_agents, self.num_arms)
        self.releases = _IntervalReleases(shape, self.dp_eps, self.v, self.schedule, self.rngs, context.horizon)
        self._frozen = np.full(shape, np.inf)

    def _index(self, t: int) -> np.ndarray:
        return self._frozen if self.frozen_index else _ucb_index(self.releases.means, self.own_counts, t)

    def act(self, step: Step) -> Action:
        """Round-robin for ``K f`` slots, then the index on the held noisy means."""
        return Action(self._arms(step.slot))

    def observe(self, feedback: Feedback) -> None:
        """Count the pull and feed the reward to the arm's interval mechanism."""
        self._add_own(feedback, clip=True)
        before = self.releases.releases.copy() if self.frozen_index else None
        self.releases.update(feedback.arms, self.own_counts, self.own_sums)
        if before is not None:
            released = self.releases.releases != before
            index = _ucb_index(self.releases.means, np.maximum(self.own_counts, 1), feedback.slot + 1)
            self._frozen[released] = index[released]

    def accountant(self, replica: int = 0) -> PrivacyAccountant:
        """The privacy accountant of ``replica`` (every release so far)."""
        return self.releases.accountant(replica, self.own_counts)


# ---------------------------------------------------------------------------------------------------- Algorithms 1 + 2
class PrivateMultiAgentUCB(_FloodingUCB, config=dubey_config.PrivateMultiAgentUCBConfig):
    """Private Multi-Agent UCB: Algorithm 1 (private message passing) + Algorithm 2 (UCB), spec §2.1-2.2.

    Each agent keeps exact own counts and sums (clipped to [0, 1], D17) and an :class:`IntervalRelease` per arm.
    In every slot it floods one record ``(rel_mean[K], rel_cnt[K])`` for ``gamma`` hops (the released mean and
    the own count at that release, D2) and keeps, per origin, the most recent record received. Its group
    statistics are ``N = n + sum_o rel_cnt_o`` and ``S = s + sum_o rel_cnt_o * rel_mean_o`` (count-weighted, D22;
    its own data exact). It plays arm ``slot mod K`` for the first ``K f`` slots (D6), then
    ``argmax S/N + sqrt(2 ln t / N)`` (D7).

    Keyword arguments: the fields of :class:`agents.dubey_config.PrivateMultiAgentUCBConfig` (``gamma``, ``dp_eps``,
    which sets ``f = ceil(1/dp_eps)``, ``v``, ``schedule`` (D1; ``LemmaSeries`` is the experimental literal reading),
    ``count_field`` (D2), ``strict_dp`` (D16 extension), ``tie_break`` (D8), ``max_age``), checked there.
    """

    kind = "dubey_release"

    config: dubey_config.PrivateMultiAgentUCBConfig

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._configure_releases()

    def _configure_releases(self) -> None:
        """The interval-release options of the config (see :class:`CooperativeUCB` for the exact releases)."""
        self.dp_eps, self.v, self.schedule, self.interval = _interval_options(self.config)
        self.count_field, self.strict_dp = self.config.count_field, self.config.strict_dp

    def _record_bytes(self, context: AgentContext) -> float:
        return 16.0 * context.num_arms  # rel_mean and rel_cnt per arm

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The pooled statistics, the table of the newest record per (holder, origin) pair and the releases.

        The pair table holds one row (K counts and sums, 16 B each, plus 16 B of keys) per agent and origin within
        ``gamma`` hops: up to agents x agents per replica on a complete graph.
        """
        b, m = context.num_replicas, context.num_agents
        pairs = b * m * _reach(context, self.gamma)
        return {
            **super().memory_parts(context),
            **self._release_memory(context),
            "pooled statistics (replicas x agents x arms x 8 B, 2 tables)": 16.0 * _cells(context),
            "newest record per agent pair (replicas x agents x agents in reach x (arms + 1) x 16 B)": 16.0
            * pairs
            * (context.num_arms + 1),
        }

    def _release_memory(self, context: AgentContext) -> dict[str, float]:
        return _release_memory(context)

    def _privacy(self) -> dict[str, Any] | None:
        return {"rel_mean": Privatized(description="Dubey-Pentland interval release"), "rel_cnt": Public()}

    def reset(self, context: AgentContext) -> None:
        """Zero the own, released and pooled statistics; start the flooding."""
        super().reset(context)
        b, m, k = self.num_replicas, self.num_agents, self.num_arms
        self._start_releases()
        #: (B, M, K) sums over origins of the latest received ``rel_cnt`` (and of ``rel_cnt * rel_mean``).
        self.pooled_counts = np.zeros((b, m, k), np.int64)
        self.pooled_sums = np.zeros((b, m, k))
        # the latest record of every (replica, holder, origin) pair heard so far, sorted by pair key
        self._pairs = np.zeros(0, np.int64)
        self._pair_created = np.zeros(0, np.int64)
        self._pair_counts = np.zeros((0, k), np.int64)
        self._pair_sums = np.zeros((0, k))
        # header arrays of the last records folded, with their layout (see _fold_layout)
        self._layout: tuple[tuple[np.ndarray, ...], tuple[np.ndarray | None, np.ndarray | None]] | None = None

    def _start_releases(self) -> None:
        shape = (self.num_replicas, self.num_agents, self.num_arms)
        self.releases = _IntervalReleases(shape, self.dp_eps, self.v, self.schedule, self.rngs, self.context.horizon)

    @property
    def release_means(self) -> np.ndarray:
        """(B, M, K) the mean each agent currently sends (0 before an arm's first release)."""
        return self.releases.means

    @property
    def release_counts(self) -> np.ndarray:
        """(B, M, K) the own count at each agent's last release (0 before the first)."""
        return self.releases.counts

    def group_statistics(self) -> tuple[np.ndarray, np.ndarray]:
        """(B, M, K) group counts ``N`` and sums ``S`` of Algorithm 1's aggregation (used at the next slot)."""
        if self.strict_dp:
            own_counts, own_sums = self.release_counts, self.release_counts * self.release_means
        else:
            own_counts, own_sums = self.own_counts, self.own_sums
        return own_counts + self.pooled_counts, own_sums + self.pooled_sums

    def _index(self, t: int) -> np.ndarray:
        counts, sums = self.group_statistics()
        return _ucb_index(sums / counts, counts, t)

    def act(self, step: Step) -> Action:
        """Round-robin for ``K f`` slots, then UCB on the group statistics; flood the own record and forwards."""
        slot = step.slot
        return Action(self._arms(slot), self.flood.send(slot, self._own_record() if slot >= 1 else None))

    def _own_record(self) -> dict[str, np.ndarray]:
        counts = self.release_counts
        if self.count_field == "current":
            counts = np.where(counts > 0, self.own_counts, 0)
        return {"rel_mean": self.release_means, "rel_cnt": counts}

    def observe(self, feedback: Feedback) -> None:
        """Update the own statistics and releases; fold the newly received records into the pool."""
        self._add_own(feedback, clip=True)
        self._release(feedback)
        new = self.flood.receive(feedback.slot, feedback.inbox)
        if new is not None and len(new):
            self._fold(new)

    def _release(self, feedback: Feedback) -> None:
        self.releases.update(feedback.arms, self.own_counts, self.own_sums)

    def _fold(self, new: FloodRecords) -> None:
        """Keep each origin's newest record and recompute the pooled sums (in a fixed order, so they are exact)."""
        k = self.num_arms
        keep, at = self._fold_layout(new)
        created = new.created if keep is None else new.created[keep]
        counts, means = new.content["rel_cnt"], new.content["rel_mean"]
        if not reference_active() and keep is None and at is None and bool((created > self._pair_created).all()):
            # the usual case: every known origin sent its next record, so the records (in pair order) are the table;
            # the table takes the records' arrays (nothing else writes to them: the flood only reads its records);
            # the reference mode takes the general path below instead
            self._pair_created = created
            self._pair_counts = np.asarray(counts, np.int64)
            self._pair_sums = self._pair_counts * means  # a mean sent with count 0 is 0
        else:
            keep = np.arange(len(new)) if keep is None else keep
            at = np.arange(len(self._pairs)) if at is None else at
            newer = created > self._pair_created[at]
            at, keep = at[newer], keep[newer]
            counts = np.take(counts, keep, axis=0).astype(np.int64)
            self._pair_created[at] = created[newer]
            self._pair_counts[at] = counts
            self._pair_sums[at] = counts * np.take(means, keep, axis=0)
        holders, starts = self._holder_runs
        self.pooled_counts.reshape(-1, k)[holders] = np.add.reduceat(self._pair_counts, starts, axis=0)
        self.pooled_sums.reshape(-1, k)[holders] = np.add.reduceat(self._pair_sums, starts, axis=0)

    def _fold_layout(self, new: FloodRecords) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Which records are their pair's newest (``None``: all) and their rows in the pair table (``None``: row i).

        Records sorted by (pair, created); unknown pairs are added to the table. The answer is kept for the next
        slot when the flood hands over the same read-only header arrays (its routing plan repeated), except in the
        reference mode (:mod:`fedbandit_envs.reference`), which finds the layout afresh every slot.
        """
        headers = (new.replica, new.holder, new.origin)
        if reference_active():
            self._layout = None
        elif self._layout is not None and all(a is b for a, b in zip(self._layout[0], headers)):
            return self._layout[1]
        m = self.num_agents
        pair = (new.replica * m + new.holder) * m + new.origin
        newest = np.ones(len(pair), bool)
        newest[:-1] = pair[:-1] != pair[1:]
        keep = np.flatnonzero(newest)
        pair = pair[keep]
        at = None
        if not (len(pair) == len(self._pairs) and np.array_equal(pair, self._pairs)):
            at = np.searchsorted(self._pairs, pair)
            unknown = self._pairs[np.minimum(at, len(self._pairs) - 1)] != pair if len(self._pairs) else pair >= 0
            if np.any(unknown):
                self._add_pairs(pair[unknown])
                at = np.searchsorted(self._pairs, pair)
            if len(pair) == len(self._pairs) and np.array_equal(at, np.arange(len(pair))):
                at = None
        layout = (None if len(keep) == len(new) else keep, at)
        if not reference_active() and not any(h.flags.writeable for h in headers):
            self._layout = (headers, layout)
        return layout

    def _add_pairs(self, pairs: np.ndarray) -> None:
        merged = np.concatenate([self._pairs, pairs])
        order = np.argsort(merged)
        grown = len(pairs), self.num_arms
        self._pairs = merged[order]
        self._pair_created = np.concatenate([self._pair_created, np.full(len(pairs), -1, np.int64)])[order]
        self._pair_counts = np.concatenate([self._pair_counts, np.zeros(grown, np.int64)])[order]
        self._pair_sums = np.concatenate([self._pair_sums, np.zeros(grown)])[order]
        self._layout = None  # table rows moved
        holders = self._pairs // self.num_agents
        starts = np.flatnonzero(np.diff(holders, prepend=-1))
        self._holder_runs = holders[starts], starts  # the table's holders and where their pairs start

    def accountant(self, replica: int = 0) -> PrivacyAccountant:
        """The privacy accountant of ``replica``: every release so far (agent; partition key = arm)."""
        return self.releases.accountant(replica, self.own_counts)


class CooperativeUCB(PrivateMultiAgentUCB, config=dubey_config.CooperativeUCBConfig):
    """The non-private version of Fig. 1(a): Algorithms 1 + 2 without noise, releasing every pull (§2.5).

    Records carry each agent's exact mean and count per arm; forced exploration lasts ``K`` slots. With
    ``gamma = 0`` it is :class:`IndividualUCB1`, seed for seed (RC-10).

    Keyword arguments: the fields of :class:`agents.dubey_config.CooperativeUCBConfig` (``gamma``, ``tie_break``,
    ``max_age``), checked there.
    """

    kind = "dubey_exact"

    config: dubey_config.CooperativeUCBConfig  # type: ignore[assignment]

    def _configure_releases(self) -> None:
        """Exact releases at every pull: the exploration lasts ``K`` slots and each record carries the own count."""
        self.interval, self.count_field, self.strict_dp = 1, "released", False

    def _privacy(self) -> dict[str, Any] | None:
        return None  # exact means: a DP wrapper in strict mode refuses them, as it should

    def _release_memory(self, context: AgentContext) -> dict[str, float]:
        return {"exact means (replicas x agents x arms x 8 B)": 8.0 * _cells(context)}

    def _start_releases(self) -> None:
        shape = (self.num_replicas, self.num_agents, self.num_arms)
        self._means = np.zeros(shape)

    @property
    def release_means(self) -> np.ndarray:
        """(B, M, K) each agent's exact mean (0 for an arm never pulled)."""
        return self._means

    @property
    def release_counts(self) -> np.ndarray:
        """(B, M, K) each agent's own counts."""
        return self.own_counts

    def _release(self, feedback: Feedback) -> None:
        index = (self._rows, self._cols, feedback.arms)
        self._means[index] = self.own_sums[index] / self.own_counts[index]

    def accountant(self, replica: int = 0) -> PrivacyAccountant:
        """No privacy: the cooperative baseline releases exact means."""
        raise TypeError("CooperativeUCB releases exact means; it has no privacy accountant")


# ---------------------------------------------------------------------------------------------------- trimmed mean
def _check_eps_delta(eps: Any, delta: Any) -> tuple[float, float]:
    eps = check_real("eps", eps, 0.0, 0.5, exclusive_maximum=True)
    delta = check_real("delta", delta, 0.0, 1.0, exclusive_minimum=True, exclusive_maximum=True)
    return eps, delta


def _kept_counts(half: np.ndarray, eps: float, delta: float) -> np.ndarray:
    """``c = ceil(N * frac)`` of §2.3 for an array of half-sizes ``N`` (entries with ``N = 0`` are meaningless)."""
    n = np.maximum(half, 1).astype(np.float64)
    log4, log1 = math.log(4.0 / delta), math.log(1.0 / delta)
    alpha = np.maximum(eps, log1 / n)
    frac = 1.0 - 2.0 * alpha - np.sqrt(2.0 * alpha * log4 / n) - log4 / n
    return np.ceil(n * frac).astype(np.int64)


def kept_count(half: int, eps: float, delta: float) -> int:
    """The number ``c`` of Y points the trimming interval must contain, for ``N = half`` (§2.3, D10; may be < 1)."""
    eps, delta = _check_eps_delta(eps, delta)
    return int(_kept_counts(np.array([check_int("half", half, 1)]), eps, delta)[0])


def trimmed_mean(samples: Sequence[float] | np.ndarray, eps: float, delta: float) -> float | None:
    """The robust trimmed estimator ``mu_R(Z, eps, delta)`` of §2.3 (Prasad et al. 2019), literally.

    ``Z`` is split by insertion parity (D9): ``X = Z[0::2][:N]``, ``Y = Z[1::2][:N]`` with ``N = |Z| // 2``. The
    shortest interval of sorted ``Y`` holding ``c = ceil(N * frac)`` points is found (ties: the one holding the
    most ``Y`` points, then the leftmost, D10), and the mean of the ``X`` points inside it is returned. Falls
    back to the median of ``Z`` when ``N = 0``, ``c < 1`` or no ``X`` point is kept; returns ``None`` for empty ``Z``.

    Args:
        samples: ``Z`` in insertion order.
        eps: contamination level assumed, in [0, 1/2).
        delta: failure probability, in (0, 1).
    """
    eps, delta = _check_eps_delta(eps, delta)
    z = np.asarray(samples, np.float64).reshape(-1)
    half = len(z) // 2
    if half == 0:
        return float(np.median(z)) if len(z) else None
    c = int(_kept_counts(np.array([half]), eps, delta)[0])
    return _trimmed_from_halves(np.sort(z[0::2][:half]), np.sort(z[1::2][:half]), z, c)


def _trimmed_from_halves(xs: np.ndarray, ys: np.ndarray, everything: np.ndarray, c: int) -> float:
    """Steps 3-4 of §2.3 on sorted halves ``xs`` and ``ys`` (``everything``: all samples, for the median)."""
    if c < 1:
        return float(np.median(everything))
    widths = ys[c - 1 :] - ys[: len(ys) - c + 1]
    candidates = np.flatnonzero(widths == widths.min())
    lows, highs = ys[candidates], ys[candidates + c - 1]
    contained = np.searchsorted(ys, highs, side="right") - np.searchsorted(ys, lows, side="left")
    j = int(candidates[np.argmax(contained)])
    low, high = ys[j], ys[j + c - 1]
    kept = xs[(xs >= low) & (xs <= high)]
    return float(kept.mean()) if len(kept) else float(np.median(everything))


def _histogram_median(vocab: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of each row's multiset given as counts over the sorted ``vocab`` (NaN for an empty row)."""
    total = counts.sum(axis=1)
    cumulative = np.cumsum(counts, axis=1)
    lower = (cumulative <= ((total - 1) // 2)[:, None]).sum(axis=1)
    upper = (cumulative <= (total // 2)[:, None]).sum(axis=1)
    top = len(vocab) - 1
    median = (vocab[np.minimum(lower, top)] + vocab[np.minimum(upper, top)]) / 2
    return np.where(total > 0, median, np.nan)


def _histogram_trimmed(
    vocab: np.ndarray, x_counts: np.ndarray, y_counts: np.ndarray, all_counts: np.ndarray, eps: float, delta: float
) -> np.ndarray:
    """The §2.3 estimator for many multisets at once, each given as counts over the sorted ``vocab`` (D10).

    ``x_counts`` and ``y_counts`` hold the two halves (``N`` points each), ``all_counts`` every sample (median
    fallback). Within a run of equal ``Y`` values the window starting at the run's first point is the shortest
    and leftmost, so one candidate window per distinct value suffices. Returns NaN for empty multisets.
    """
    half = y_counts.sum(axis=1)
    c = _kept_counts(half, eps, delta)
    cumulative = np.cumsum(y_counts, axis=1)
    start = cumulative - y_counts  # index in sorted Y of the first point of each value's run
    right = start + (c - 1)[:, None]  # index of the window's last point
    feasible = (y_counts > 0) & (start <= (half - c)[:, None]) & (c >= 1)[:, None]
    end = (cumulative[:, None, :] <= right[:, :, None]).sum(axis=2)  # value holding the last point
    end = np.minimum(end, len(vocab) - 1)
    width = np.where(feasible, vocab[end] - vocab[None, :], np.inf)
    contained = cumulative[np.arange(len(end))[:, None], end] - start
    best = feasible & (width == width.min(axis=1, keepdims=True))
    contained = np.where(best, contained, -1)
    best &= contained == contained.max(axis=1, keepdims=True)
    first = best.argmax(axis=1)
    last = end[np.arange(len(end)), first]
    values = np.arange(len(vocab))[None, :]
    inside = (values >= first[:, None]) & (values <= last[:, None])
    kept = np.where(inside, x_counts, 0)
    kept_count_ = kept.sum(axis=1)
    estimate = (kept * vocab[None, :]).sum(axis=1) / np.maximum(kept_count_, 1)
    usable = best.any(axis=1) & (kept_count_ > 0)
    return np.where(usable, estimate, _histogram_median(vocab, all_counts))


class _SampleSets:
    """Multisets of samples per (replica, agent, arm) cell, split into X and Y by insertion parity (D9).

    Discrete samples are held as counts over a vocabulary of distinct values (D10): exact, and vectorised
    over all cells. The ``"sorted"`` backend keeps each cell's values in arrays (continuous rewards; slower).
    ``"auto"`` starts with counts and switches to arrays once more than ``max_distinct`` distinct values occur.
    """

    def __init__(self, num_cells: int, backend: str, max_distinct: int) -> None:
        self.num_cells = num_cells
        self.backend = "sorted" if backend == "sorted" else "histogram"
        self.auto = backend == "auto"
        self.max_distinct = max_distinct
        #: (cells,) number of samples of each cell.
        self.sizes = np.zeros(num_cells, np.int64)
        self.x_last = np.zeros(num_cells)  # value of each cell's last X sample (unpaired while the size is odd)
        self.vocab = np.zeros(0)
        self.x_counts = np.zeros((num_cells, 0), np.int64)  # every X sample, the unpaired one included
        self.y_counts = np.zeros((num_cells, 0), np.int64)
        self.x_values: list[list[float]] = [[] for _ in range(num_cells)] if self.backend == "sorted" else []
        self.y_values: list[list[float]] = [[] for _ in range(num_cells)] if self.backend == "sorted" else []

    def add(self, cells: np.ndarray, values: np.ndarray) -> None:
        """Append ``values`` to their ``cells``, in the given order within each cell."""
        if len(cells) == 0:
            return
        order = np.argsort(cells, kind="stable")
        cells, values = cells[order], values[order]
        new_run = np.ones(len(cells), bool)
        new_run[1:] = cells[1:] != cells[:-1]
        run_start = np.maximum.accumulate(np.where(new_run, np.arange(len(cells)), 0))
        is_x = (self.sizes[cells] + np.arange(len(cells)) - run_start) % 2 == 0
        if self.backend == "histogram":
            self._grow_vocab(values)
        if self.backend == "histogram":
            ids, v = np.searchsorted(self.vocab, values), len(self.vocab)
            for name, side in (("x_counts", is_x), ("y_counts", ~is_x)):
                flat = cells[side] * v + ids[side]
                getattr(self, name)[...] += np.bincount(flat, minlength=self.num_cells * v).reshape(-1, v)
        else:
            for cell, value, x in zip(cells.tolist(), values.tolist(), is_x.tolist()):
                (self.x_values if x else self.y_values)[cell].append(value)
        x_cells = cells[is_x]
        last_x = np.ones(len(x_cells), bool)
        last_x[:-1] = x_cells[:-1] != x_cells[1:]
        self.x_last[x_cells[last_x]] = values[is_x][last_x]
        self.sizes += np.bincount(cells, minlength=self.num_cells)

    def _grow_vocab(self, values: np.ndarray) -> None:
        distinct = np.unique(values)
        missing = distinct[~np.isin(distinct, self.vocab)]
        if len(missing) == 0:
            return
        vocab = np.union1d(self.vocab, missing)
        if len(vocab) > self.max_distinct:
            if not self.auto:
                raise ValueError(
                    f"more than max_distinct={self.max_distinct} distinct reward values: the histogram backend is "
                    "for discrete rewards; use backend='sorted' (or 'auto') for continuous rewards"
                )
            self._to_sorted()
            return
        columns = np.searchsorted(vocab, self.vocab)
        for name in ("x_counts", "y_counts"):
            grown = np.zeros((self.num_cells, len(vocab)), np.int64)
            grown[:, columns] = getattr(self, name)
            setattr(self, name, grown)
        self.vocab = vocab

    def _to_sorted(self) -> None:
        """Switch to per-cell value lists (the X list ends with the unpaired sample when a size is odd)."""
        odd = self.sizes % 2 == 1
        paired = self.x_counts.copy()
        if len(self.vocab):
            paired[np.flatnonzero(odd), np.searchsorted(self.vocab, self.x_last[odd])] -= 1
        self.x_values = [np.repeat(self.vocab, row).tolist() for row in paired]
        for cell in np.flatnonzero(odd):
            self.x_values[cell].append(float(self.x_last[cell]))
        self.y_values = [np.repeat(self.vocab, row).tolist() for row in self.y_counts]
        self.backend = "sorted"
        self.x_counts = self.y_counts = np.zeros((self.num_cells, 0), np.int64)

    def estimate(self, eps: float, delta: float, estimator: str) -> np.ndarray:
        """(cells,) estimate of every cell (NaN for an empty cell)."""
        if self.backend == "sorted":
            return self._estimate_sorted(eps, delta, estimator)
        if len(self.vocab) == 0:
            return np.full(self.num_cells, np.nan)
        everything = self.x_counts + self.y_counts
        if estimator == "mean":
            return (everything * self.vocab[None, :]).sum(axis=1) / np.where(self.sizes > 0, self.sizes, np.nan)
        paired = self.x_counts.copy()
        odd = np.flatnonzero(self.sizes % 2 == 1)
        paired[odd, np.searchsorted(self.vocab, self.x_last[odd])] -= 1
        return _histogram_trimmed(self.vocab, paired, self.y_counts, everything, eps, delta)

    def _estimate_sorted(self, eps: float, delta: float, estimator: str) -> np.ndarray:
        out = np.full(self.num_cells, np.nan)
        half = self.sizes // 2
        kept = _kept_counts(half, eps, delta)
        for cell in np.flatnonzero(self.sizes):
            everything = np.array(self.x_values[cell] + self.y_values[cell])
            if estimator == "mean":
                out[cell] = everything.mean()
            elif half[cell] == 0:
                out[cell] = np.median(everything)
            else:
                xs = np.sort(np.array(self.x_values[cell][: half[cell]]))
                ys = np.sort(np.array(self.y_values[cell]))
                out[cell] = _trimmed_from_halves(xs, ys, everything, int(kept[cell]))
        return out


# ---------------------------------------------------------------------------------------------------- Algorithm 3
class ByzantineProofUCB(_FloodingUCB, config=dubey_config.ByzantineProofUCBConfig):
    """Byzantine-Proof Multi-Agent UCB: Algorithm 3 of the paper, spec §2.3-2.4.

    Each agent floods every own sample ``(arm, reward)`` for ``gamma`` hops and keeps, per arm, every sample it
    holds (own first, then new records by (origin, created), D9). Slots ``0..K-1`` play arms ``0..K-1``; then, with
    ``delta = 1/t^2`` (D11), it plays ``argmax mu_R(S_k) + sigma sqrt(eps_alg) + sigma sqrt(ln(1/delta) / |S_k|)``.
    The agent never corrupts anything: the environment's adversary does (``wrappers.faults.ByzantineAdversary``).
    Records naming an arm outside ``0..K-1`` are ignored.

    Keyword arguments: the fields of :class:`agents.dubey_config.ByzantineProofUCBConfig` (``gamma``, ``eps_alg``,
    which D12 sets to the byzantine fraction times the environment's contamination probability, ``sigma``,
    ``estimator`` (D10), ``bonus_form`` (D11), ``tie_break`` (D8), ``backend``, ``max_distinct``, ``max_age``),
    checked there.
    """

    kind = "dubey_sample"

    config: dubey_config.ByzantineProofUCBConfig

    def _record_bytes(self, context: AgentContext) -> float:
        return 16.0  # the arm (int64) and the reward (float64)

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The sample sets besides the flooding: per (agent, arm) counts over up to ``max_distinct`` reward values.

        The ``"sorted"`` backend keeps every sample instead: up to ``horizon`` samples per agent and agent in reach,
        about 32 B each (a float in a list). ``"auto"`` starts as a histogram (and switches to lists only for
        rewards of more than ``max_distinct`` values).
        """
        if self.config.backend == "sorted":
            holders = context.num_replicas * context.num_agents * (1 + _reach(context, self.gamma))
            name, size = "samples held (replicas x agents x agents in reach x horizon x 32 B)", 32.0 * holders
            size *= context.horizon
        else:
            name = "sample histograms (replicas x agents x arms x max_distinct x 16 B)"
            size = 16.0 * _cells(context) * self.config.max_distinct
        return {**super().memory_parts(context), name: size}

    def reset(self, context: AgentContext) -> None:
        """Empty every sample set; start the flooding."""
        super().reset(context)
        b, m, k = self.num_replicas, self.num_agents, self.num_arms
        self.samples = _SampleSets(b * m * k, self.config.backend, self.config.max_distinct)
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        self._own_cells = (np.arange(b * m) * k).reshape(b, m)

    def sample_counts(self) -> np.ndarray:
        """(B, M, K) the number of samples ``|S_k|`` each agent holds."""
        return self.samples.sizes.reshape(self.num_replicas, self.num_agents, self.num_arms)

    def estimates(self, t: int) -> np.ndarray:
        """(B, M, K) the robust estimates at paper round ``t`` (``delta = 1/t^2``; NaN for an empty set)."""
        delta = 1.0 / t**2
        estimate = self.samples.estimate(self.config.eps_alg, delta, self.config.estimator)
        return estimate.reshape(self.num_replicas, self.num_agents, self.num_arms)

    def bonus(self, t: int) -> np.ndarray:
        """(B, M, K) the confidence bonus at paper round ``t`` (D11; +inf for an empty set)."""
        log_inv_delta = 2.0 * math.log(t)
        sizes = self.sample_counts().astype(np.float64)
        with np.errstate(divide="ignore"):
            if self.config.bonus_form == "corrected":
                width = self.config.sigma * np.sqrt(log_inv_delta / sizes)
            else:
                width = np.sqrt(self.config.sigma * log_inv_delta / sizes)
        return self.config.sigma * math.sqrt(self.config.eps_alg) + width

    def _index(self, t: int) -> np.ndarray:
        return np.where(self.sample_counts() > 0, self.estimates(t) + self.bonus(t), np.inf)

    def act(self, step: Step) -> Action:
        """Each arm once, then the robust UCB index; flood the previous slot's sample and the forwards."""
        content = None if self._last is None else {"arm": self._last[0], "reward": self._last[1]}
        return Action(self._arms(step.slot), self.flood.send(step.slot, content))

    def observe(self, feedback: Feedback) -> None:
        """Append the own sample (its true value), then every new record's sample."""
        self._add_own(feedback, clip=False)
        self._last = (feedback.arms, feedback.rewards)
        cells = [(self._own_cells + feedback.arms).reshape(-1)]
        values = [feedback.rewards.reshape(-1)]
        new = self.flood.receive(feedback.slot, feedback.inbox)
        if new is not None and len(new):
            arm = new.content["arm"]
            valid = (arm >= 0) & (arm < self.num_arms)
            holder = new.replica[valid] * self.num_agents + new.holder[valid]
            cells.append(holder * self.num_arms + arm[valid])
            values.append(new.content["reward"][valid].astype(np.float64))
        self.samples.add(np.concatenate(cells), np.concatenate(values))


register_algorithm("dubey_private_ucb", PrivateMultiAgentUCB, config=dubey_config.PrivateMultiAgentUCBConfig)
register_algorithm("dubey_cooperative_ucb", CooperativeUCB, config=dubey_config.CooperativeUCBConfig)
register_algorithm("dubey_byzantine_ucb", ByzantineProofUCB, config=dubey_config.ByzantineProofUCBConfig)
register_algorithm("dubey_ucb1", IndividualUCB1, config=dubey_config.IndividualUCB1Config)
register_algorithm("dubey_dp_ucb_int", DPUCBInt, config=dubey_config.DPUCBIntConfig)
