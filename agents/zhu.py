"""Gossip_UCB and Fed_UCB (Zhu, Zhu, Liu & Liu, "Federated Bandit: A Gossiping Approach", SIGMETRICS 2021).

Implements ``shared/specs/zhu-gossip-ucb.md``: Algorithm 1 (Gossip_UCB, §2.2 with the confidence bound of eq. (11),
§2.3) and Algorithm 4 (Fed_UCB, §2.5: the binary-tree mechanism of §2.4 on every agent's reward stream, with the
bound of eq. (12)), as vectorised populations over B replicas, N agents and M arms (the paper's letters: N agents,
M arms). The decisions of spec §3 are the defaults (``profile="strict"``); ``profile="paper_literal"`` switches the
four DP readings of D10, D11, D12 and D13 to the paper's text.

Time line (D20). The first M environment slots are the warm-up: every agent pulls arm k in slot k and nothing is
sent. The T = horizon - M slots after it are the main rounds t = 1..T (round t is slot M + t - 1). In round t every
agent

1. (``act``) reads the estimates ñ_j(t) its neighbours sent in round t - 1 (ñ_j(1) = 1, D5), computes
   ñ_i(t+1) = max(n⁻_i(t), ñ_j(t) : j in N_i), pulls a uniform arm of A = {k : n⁻_k < ñ_k(t) - N} (D15, D29) or,
   if A is empty, the argmax of ϑ(t-1) + C with uniform tie-breaking (D14); it sends ``counts`` = ñ_i(t+1) to every
   neighbour (D6) and, if the channel announced a gossip partner, ``theta`` = ϑ_i(t-1) to it;
2. (``observe``) adds its reward to n and S (increment first, then average: D2, D3), and updates
   ϑ = (ϑ + ϑ_partner)/2 + (X̃_new - X̃) on the gossip edge, ϑ = ϑ + (X̃_new - X̃) elsewhere, so that
   sum_i ϑ_i = sum_i X̃_i holds exactly at every round (spec §5.1 T3).

The channel samples the gossip edge (``FederatedMAB(gossip="uniform_edge")``, D7, or ``"node_then_neighbour"``) and
charges every message: per main round 2 ``theta`` messages (2M float64) and 2|E| ``counts`` messages (2|E|M int64),
spec §2.6. A ``counts`` message that is lost keeps the last value received (stale); a ``theta`` that does not arrive
in its own slot is ignored and the agent makes the local update (sum preservation then no longer holds exactly).

Randomness: every replica's ``agents`` stream is split into a policy child (argmax ties, the pick from A) and one DP
child per agent (Fed_UCB's Laplace draws), spec §2.7; switching DP on never changes the policy draws.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, get_args

import numpy as np

from agents.configured import Configured
from fedbandit_envs.algorithms import register_algorithm
from fedbandit_envs.channel import NEIGHBOURS, MessageBatch
from fedbandit_envs.channel.privacy import Privatized, declare_message_kinds
from fedbandit_envs.core import Action, AgentContext, Feedback, Step
from fedbandit_envs.frozen import frozen
from fedbandit_envs.privacy.mechanisms import BinaryTreeBank
from fedbandit_envs.protocol import Population
from fedbandit_envs.validation import CheckedConfig, option

declare_message_kinds("counts", "theta")  # public vocabulary under a DP wrapper

__all__ = [
    "COUNT_SYNC_MODES",
    "PROFILES",
    "CountSync",
    "DPInit",
    "EpsilonSplit",
    "FedUCBConfig",
    "GossipUCBConfig",
    "Profile",
    "ProfileName",
    "FedUCB",
    "GossipUCB",
    "default_alpha1",
    "dp_bonus",
    "gossip_bonus",
]

#: ``count_sync`` modes (D6): ñ to every neighbour every round (the paper's box), or only over the gossip edge.
CountSync = Literal["neighbours", "gossip_edge_only"]
COUNT_SYNC_MODES = get_args(CountSync)
#: Fed_UCB's split of epsilon over the tree levels (D10), a key of ``BinaryTreeMechanism.SPLITS``.
EpsilonSplit = Literal["levels", "ln_T"]
#: Fed_UCB's init sample (D11): noised as stream index 1, or the paper's raw X(0).
DPInit = Literal["noised", "raw"]
#: The names of :data:`PROFILES`.
ProfileName = Literal["strict", "paper_literal"]


class Profile(TypedDict):
    """The Fed_UCB options a profile fixes (each may be overridden by its keyword)."""

    eps_split: EpsilonSplit
    dp_init: DPInit
    log_n_floor: bool
    noise_on_empty: bool


#: Fed_UCB profiles: the spec's decisions (D10, D11, D12, D13) and the paper-literal readings.
PROFILES: dict[str, Profile] = {
    "strict": {"eps_split": "levels", "dp_init": "noised", "log_n_floor": True, "noise_on_empty": False},
    "paper_literal": {"eps_split": "ln_T", "dp_init": "raw", "log_n_floor": False, "noise_on_empty": False},
}


@dataclass(frozen=True)
class GossipUCBConfig(CheckedConfig):
    """Keywords of :class:`GossipUCB`, checked on construction.

    Attributes:
        alpha1: α₁ of eq. (11) (D8), a finite number; ``None`` gives ``64 / N**17``. Only reported in
            :meth:`GossipUCB.indices`.
        count_sync: ``"neighbours"`` (default, D6: ñ to every neighbour every round) or ``"gossip_edge_only"``
            (non-paper variant: ñ only over the active gossip edge; voids Lemmas 1-3).
    """

    alpha1: float | None = None
    count_sync: CountSync = "neighbours"


@dataclass(frozen=True)
class FedUCBConfig(GossipUCBConfig):
    """Keywords of :class:`FedUCB`, checked on construction (``None`` knobs take the profile's value).

    Attributes:
        epsilon: total privacy level ε of each agent's stream, > 0 (``math.inf``: no noise).
        profile: ``"strict"`` (spec decisions) or ``"paper_literal"``; sets the defaults of the next four knobs.
        eps_split: ``"levels"`` (D10: ε′ = ε / (floor(log2(T+1)) + 1), a guaranteed ε) or ``"ln_T"`` (ε′ = ε / ln T).
        dp_init: ``"noised"`` (D11: the init sample is stream index 1 and is noised) or ``"raw"`` (paper: X̃(0) = X(0)
            un-noised, the trees cover rounds 1..T only).
        log_n_floor: D12: ``l(n) = max(ln n, 1)`` in eq. (12) (True) or the literal ``ln n`` (False).
        noise_on_empty: D13: noise tree nodes without an observation too (False: the text's reading).
        dp_bonus_scale: multiplier of the 128-term of eq. (12), finite and >= 0; 1.0 is the paper. Smaller values
            are a labelled CI-scale device only (spec §2.5, §4.2; project decision P2).
        clip_for_dp: ``(lo, hi)`` with finite lo < hi: clip observations before they enter S and the trees;
            sensitivity ``hi - lo`` (D18). ``None``: sensitivity 1, a nominal epsilon unless the rewards lie in a
            range of width <= 1.
    """

    epsilon: float = option(1.0, minimum=0.0, exclusive_minimum=True, finite=False)
    profile: ProfileName = "strict"
    eps_split: EpsilonSplit | None = None
    dp_init: DPInit | None = None
    log_n_floor: bool | None = None
    noise_on_empty: bool | None = None
    dp_bonus_scale: float = option(1.0, minimum=0.0)
    clip_for_dp: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.clip_for_dp is not None and not self.clip_for_dp[0] < self.clip_for_dp[1]:
            raise ValueError(f"clip_for_dp must be (lo, hi) with finite lo < hi, got {self.clip_for_dp!r}")


#: Policy uniforms are drawn per replica in blocks of this many main rounds (part of the draw order).
POLICY_BLOCK = 256

#: Index of the policy child of a replica's ``agents`` seed; agent i's DP child is ``(DP_CHILD, i)``.
POLICY_CHILD, DP_CHILD = 0, 1


def default_alpha1(num_agents: int) -> float:
    """The constant α₁ = 64 / N^17 of eq. (11) under the reading of D8 (behaviourally irrelevant)."""
    return 64.0 / float(num_agents) ** 17


def gossip_bonus(num_agents: int, log_t: float, counts: np.ndarray) -> np.ndarray:
    """Eq. (11) without α₁: ``sqrt(2 N ln t / n)`` for pre-pull counts ``n`` (D4, D9); N multiplies, as written."""
    return np.sqrt(2.0 * num_agents * log_t / counts)


def dp_bonus(
    num_agents: int,
    log_t: float,
    counts: np.ndarray,
    eps_prime: float,
    log_n_floor: bool = True,
    scale: float = 1.0,
) -> np.ndarray:
    """Eq. (12) without α₁ (spec §2.5): ``sqrt(2N (128 N s ln t l(n) / (n² ε′²) + 1/n) ln t)``.

    ``eps_prime`` is the per-node epsilon the tree actually uses (``log²T / ε²`` of the paper is ``1/ε′²``);
    ``l(n) = max(ln n, 1)`` with ``log_n_floor`` (D12), ``ln n`` without; ``s = scale`` is ``dp_bonus_scale``.
    """
    log_n = np.log(counts)
    if log_n_floor:
        log_n = np.maximum(log_n, 1.0)
    dp_term = 128.0 * num_agents * scale * log_t * log_n / (counts**2 * eps_prime**2)
    return np.sqrt(2.0 * num_agents * (dp_term + 1.0 / counts) * log_t)


def _opaque_rows(array: np.ndarray) -> np.ndarray:
    """A 1-D view of a C-contiguous array with one opaque item per last-axis row (whole-row indexing is faster)."""
    return array.view(np.dtype((np.void, array.shape[-1] * array.itemsize))).reshape(-1)


def _child(seed: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """The child ``key`` of ``seed`` without spawning (the context's sequences are shared, never mutated)."""
    return np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, *key), pool_size=seed.pool_size)


class GossipUCB(Configured, Population, config=GossipUCBConfig):
    """Gossip_UCB (Algorithm 1): UCB on gossiped estimates ϑ of the global means, with max-count consistency.

    Needs N >= 3 agents (the paper excludes N = 2; P1), a connected agent graph with at least one edge, a horizon
    longer than the M warm-up slots, and the channel's gossip activation (``gossip="uniform_edge"``). The decision
    takes the argmax over ϑ + bonus *without* α₁ (α₁ is arm-independent; adding it could flip floating-point
    near-ties, spec §2.3), so trajectories do not depend on ``alpha1``.

    Keyword arguments: the fields of :class:`GossipUCBConfig` (``alpha1``, ``count_sync``), checked there.

    Attributes:
        config: the checked keywords.
    """

    families = ("mab",)

    supports_batching = True

    config: GossipUCBConfig

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.alpha1 = self.config.alpha1
        self.count_sync = self.config.count_sync

    def memory_parts(self, context: AgentContext) -> dict[str, float]:
        """The agent x agent table of received counts and the per-(agent, arm) statistics :meth:`reset` allocates."""
        b, n, m = context.num_replicas, context.num_agents, context.num_arms
        return {
            "received counts (agents x replicas x agents x arms x 8 B)": 8.0 * n * b * n * m,
            "statistics (replicas x agents x arms x 8 B, 6 tables)": 48.0 * b * n * m,
        }

    # ------------------------------------------------------------------ episode
    def reset(self, context: AgentContext) -> None:
        """Check the setting and zero the statistics (the warm-up slots fill them)."""
        _check_context(context, type(self).__name__)
        b, n, m = context.num_replicas, context.num_agents, context.num_arms
        self.num_agents, self.num_arms = n, m
        self._alpha1 = default_alpha1(n) if self.alpha1 is None else float(self.alpha1)
        self.counts = np.zeros((b, n, m))  # n[i, k], exact integers held as float64
        self.sums = np.zeros((b, n, m))  # S[i, k]: exact sum of the (clipped) observations
        self.means = np.zeros((b, n, m))  # X̃[i, k]: local (Fed_UCB: noisy) sample mean
        self.theta = np.zeros((b, n, m))  # ϑ[i, k]: gossiped estimate of the global mean
        self.max_counts = np.ones((b, n, m))  # ñ_i: the value computed in the previous round (ñ(1) = 1, D5)
        self._received = np.ones((n, b, n, m))  # [j, b, i]: last ñ_j received by i (1 until a message arrives)
        self._received_rows = self._received.reshape(-1, m)  # row (j * B + b) * N + i
        self._received_items, self._theta_items = _opaque_rows(self._received_rows), _opaque_rows(self.theta)
        self._row_item = self._theta_items.dtype  # one row of M float64 as an opaque item
        self._inbox_header: tuple[bytes, ...] = ()  # header of the last counts batch read, and its rows
        self._inbox_rows = np.zeros(0, np.int64)
        self._inbox_arrays: tuple[np.ndarray, ...] = ()  # the header arrays of that batch when they are read-only
        self._cell = (np.arange(b * n) * m).reshape(b, n)  # flat index of (b, i, arm 0)
        # message headers of agent (b, i) at row b * N + i, immutable: the batches hold them without a copy, and the
        # channel knows the counts header by these very arrays (no header key to compute every round)
        self._replica = frozen(np.repeat(np.arange(b), n))
        self._sender = frozen(np.tile(np.arange(n), b))
        self._neighbours = frozen(np.full(b * n, NEIGHBOURS, np.int64))
        self._policy_rngs = [np.random.default_rng(_child(seed, POLICY_CHILD)) for seed in context.agent_seeds]
        self._keys = np.empty((b, POLICY_BLOCK, n, m))
        privacy = self._message_privacy()
        self._privacy = {kind: None if privacy is None else {kind: privacy[kind]} for kind in ("counts", "theta")}

    def _message_privacy(self) -> dict[str, Privatized] | None:
        """Declaration of the ``theta`` / ``counts`` payloads; Gossip_UCB sends raw statistics (undeclared)."""
        return None

    # ------------------------------------------------------------------ decision
    def _bonus(self, log_t: float) -> np.ndarray:
        """The exploration bonus of the index (without α₁)."""
        return gossip_bonus(self.num_agents, log_t, self.counts)

    def indices(self, t: int) -> np.ndarray:
        """The (B, N, M) indices ϑ + C, α₁ included, that main round ``t`` >= 1 would use (for reports)."""
        if t < 1:
            raise ValueError(f"t is a main round (1 = the first slot after the warm-up), got {t}")
        return self.theta + self._bonus(math.log(t)) + self._alpha1

    def _policy_keys(self, t: int) -> np.ndarray:
        """(B, N, M) uniforms of main round t (ties and the pick from A choose the largest key)."""
        offset = (t - 1) % POLICY_BLOCK
        if offset == 0:
            shape = (POLICY_BLOCK, self.num_agents, self.num_arms)
            for b, rng in enumerate(self._policy_rngs):
                self._keys[b] = rng.random(shape)
        return self._keys[:, offset]

    def act(self, step: Step) -> Action:
        """Warm-up pull, or Algorithm 1 steps 1-9 plus the round's ``counts`` and ``theta`` messages."""
        slot, partners = step.slot, step.gossip_partners()
        b, n = partners.shape
        if slot < self.num_arms:
            return Action(np.full((b, n), slot, np.int64))
        t = slot - self.num_arms + 1
        if t == 1 and not np.any(partners >= 0):
            raise ValueError(
                f"{type(self).__name__} needs the channel to announce a gossip edge every round; build the env "
                "with gossip='uniform_edge' (or 'node_then_neighbour')"
            )
        new_max = np.maximum(self.counts, self._received.max(axis=0))  # ñ(t+1), from the pre-pull n⁻(t)
        behind = self.counts < self.max_counts - self.num_agents  # A, tested against ñ(t) (D29)
        index = self.theta + self._bonus(math.log(t))
        # max over arms: a reduction over the leading axis of an arm-major copy (max or argmax over the short last
        # axis is slower, argmax the more so as its branches follow the data)
        best = np.maximum.reduce(index.reshape(-1, self.num_arms).T.copy()).reshape(b, n)
        candidates = index == best[..., None]
        if behind.any():  # an agent whose A is not empty picks from A
            any_behind = behind.reshape(-1)[self._cell + behind.argmax(axis=-1)]
            candidates = np.where(any_behind[..., None], behind, candidates)
        keys = self._policy_keys(t)  # drawn every round, whether or not a tie needs them
        picks = np.flatnonzero(candidates)
        if len(picks) == self._cell.size:  # one candidate per agent (in row order): no tie to break
            arms = picks.reshape(b, n) - self._cell
        else:
            arms = np.where(candidates, keys, -1.0).argmax(axis=-1)
        self.max_counts = new_max
        return Action(arms, self._messages(partners))

    def _messages(self, partners: np.ndarray) -> list[MessageBatch]:
        """``counts`` (ñ(t+1), int64) to the neighbours and ``theta`` (ϑ(t-1), float64) to the gossip partner."""
        m = self.num_arms
        flat_partners = partners.reshape(-1)
        gossip = (flat_partners >= 0).nonzero()[0]  # the rows b * N + i of the agents on a gossip edge
        edge = self._replica.take(gossip), self._sender.take(gossip), flat_partners.take(gossip)
        max_counts = self.max_counts.reshape(-1, m).astype(np.int64)
        if self.count_sync == "neighbours":
            counts_header, counts = (self._replica, self._sender, self._neighbours), max_counts
        else:
            counts_header, counts = edge, max_counts.take(gossip, axis=0)
        theta = self.theta.reshape(-1, m).take(gossip, axis=0)
        return [
            MessageBatch("counts", *counts_header, {"counts": counts}, privacy=self._privacy["counts"]),
            MessageBatch("theta", *edge, {"theta": theta}, privacy=self._privacy["theta"]),
        ]

    # ------------------------------------------------------------------ learning
    def observe(self, feedback: Feedback) -> None:
        """Warm-up initialisation, or Algorithm 1 steps 10-18 with the messages delivered in this slot."""
        slot = feedback.slot
        if slot < self.num_arms:
            self._initialise_arm(slot, self._observation(feedback.rewards))
            return
        partners, partner_theta = self._read_inbox(feedback)
        cells = (self._cell + feedback.arms).reshape(-1)
        values = self._observation(feedback.rewards).reshape(-1)
        counts, sums, means = self.counts.reshape(-1), self.sums.reshape(-1), self.means.reshape(-1)
        counts[cells] += 1.0
        sums[cells] += values
        new_means = self._pulled_means(cells, values, slot - self.num_arms + 1)
        increments = new_means - means[cells]
        means[cells] = new_means
        theta = self.theta.reshape(-1, self.num_arms)
        averaged = theta.take(partners, axis=0)  # ϑ = (ϑ + ϑ_partner) / 2 on the gossip edge, rows written whole
        averaged += partner_theta
        averaged /= 2
        self._theta_items[partners] = averaged.view(self._row_item).reshape(-1)
        self.theta.reshape(-1)[cells] += increments

    def _observation(self, rewards: np.ndarray) -> np.ndarray:
        """The value an observation contributes to S (Fed_UCB clips it for DP)."""
        return rewards

    def _initialise_arm(self, arm: int, values: np.ndarray) -> None:
        """Warm-up slot ``arm``: n = 1, S = X̃ = ϑ = the first observation of ``arm``."""
        self.counts[..., arm] = 1.0
        self.sums[..., arm] = values
        self.means[..., arm] = self._initial_means(arm, values)
        self.theta[..., arm] = self.means[..., arm]

    def _initial_means(self, arm: int, values: np.ndarray) -> np.ndarray:
        """X̃(0) of ``arm`` from its first observations (B, N)."""
        return values

    def _pulled_means(self, cells: np.ndarray, values: np.ndarray, t: int) -> np.ndarray:
        """New X̃ of the pulled (replica, agent, arm) cells after S and n were updated (D2, D3)."""
        return self.sums.reshape(-1)[cells] / self.counts.reshape(-1)[cells]

    def _read_inbox(self, feedback: Feedback) -> tuple[np.ndarray, np.ndarray]:
        """Store the neighbours' ñ; returns the agents (flat index b * N + i) given a ϑ in this slot, and that ϑ."""
        agents, thetas = [], []
        n = self.num_agents
        for batch in feedback.inbox:
            if batch.kind == "counts":
                rows = self._received_rows_of(batch)
                # ñ_j never decreases, so the maximum is the latest value even if copies arrive out of order
                latest = self._received_rows.take(rows, axis=0)
                np.maximum(latest, batch.payload["counts"], out=latest)
                self._received_items[rows] = latest.view(self._row_item).reshape(-1)
            elif batch.kind == "theta":
                rows, theta = batch.replica * n + batch.recipient, batch.payload["theta"]
                fresh = batch.slot == feedback.slot  # a ϑ of an earlier round is ignored
                if not fresh.all():
                    rows, theta = rows[fresh], theta[fresh]
                agents.append(rows)
                thetas.append(theta)
        if len(agents) == 1:
            return agents[0], thetas[0]
        return np.concatenate([np.zeros(0, np.int64), *agents]), np.concatenate([np.zeros((0, self.num_arms)), *thetas])

    def _received_rows_of(self, batch: MessageBatch) -> np.ndarray:
        """Rows (j * B + b) * N + i of ``_received_rows`` for the copies of a ``counts`` batch (j sent to agent (b, i)).

        Kept while the header repeats (every slot when ñ goes to the neighbours and no copy is lost or delayed).
        """
        arrays = batch.replica, batch.sender, batch.recipient
        if self._inbox_arrays and all(map(operator.is_, arrays, self._inbox_arrays)):
            return self._inbox_rows  # the channel's read-only header arrays of the last batch, again
        header = batch.header_key()
        if header != self._inbox_header:
            self._inbox_header = header
            self._inbox_rows = (batch.sender * len(self.counts) + batch.replica) * self.num_agents + batch.recipient
        # the same arrays again mean the same header only while no one can write to them
        self._inbox_arrays = arrays if not any(a.flags.writeable for a in arrays) else ()
        return self._inbox_rows

    def estimates(self) -> dict[str, np.ndarray]:
        """Copies of ϑ (``"theta"``), X̃ (``"means"``), n (``"counts"``) and ñ (``"max_counts"``), each (B, N, M)."""
        return {
            "theta": self.theta.copy(),
            "means": self.means.copy(),
            "counts": self.counts.copy(),
            "max_counts": self.max_counts.copy(),
        }


class FedUCB(GossipUCB, config=FedUCBConfig):
    """Fed_UCB (Algorithm 4): Gossip_UCB on noisy local means from a binary-tree mechanism per (agent, arm).

    Each agent privatises its **input stream** (spec §1.4): arm k's stream holds the agent's observation of k at
    stream index s = t + 1 (the init sample at s = 1, D11) and zeros elsewhere (global time, D26); one
    binary-tree mechanism per arm releases its noisy prefix sum, and X̃ = noisy sum / n. The trees of all
    (replica, agent, arm) cells form one :class:`~fedbandit_envs.privacy.mechanisms.BinaryTreeBank`; agent
    i's arms share the agent's DP generator, so the draws are those of one
    :class:`~fedbandit_envs.privacy.mechanisms.BinaryTreeMechanism` per arm. The index uses eq. (12)
    (:func:`dp_bonus`). Messages are post-processing and carry
    ``Privatized(epsilon=..., account_key="fed_ucb_input_stream", scope="episode")`` declarations, so a DP
    wrapper charges the declared epsilon once per agent and adds no noise. With ``epsilon=math.inf`` there are no
    draws, the bound is eq. (11), and the trajectory equals Gossip_UCB's bit for bit under the strict profile (T11).

    Keyword arguments: the fields of :class:`FedUCBConfig` (``epsilon``, ``profile``, the four knobs a profile
    sets, ``dp_bonus_scale``, ``clip_for_dp``) and of :class:`GossipUCBConfig`, checked there.

    Attributes:
        config: the checked keywords (the profile's knobs as given; the resolved ones are attributes).
    """

    #: Account key of the agents' own mechanism in a DP wrapper's accountant.
    ACCOUNT_KEY = "fed_ucb_input_stream"

    config: FedUCBConfig

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        c = self.config
        defaults = PROFILES[c.profile]
        self.epsilon = float(c.epsilon)
        self.profile = c.profile
        self.eps_split: EpsilonSplit = defaults["eps_split"] if c.eps_split is None else c.eps_split
        self.dp_init: DPInit = defaults["dp_init"] if c.dp_init is None else c.dp_init
        self.log_n_floor = defaults["log_n_floor"] if c.log_n_floor is None else c.log_n_floor
        self.noise_on_empty = defaults["noise_on_empty"] if c.noise_on_empty is None else c.noise_on_empty
        self.dp_bonus_scale = float(c.dp_bonus_scale)
        clip = c.clip_for_dp
        self.clip_for_dp = None if clip is None else (float(clip[0]), float(clip[1]))

    # ------------------------------------------------------------------ episode
    def reset(self, context: AgentContext) -> None:
        """Gossip_UCB's reset plus one binary tree per (replica, agent, arm), held in a bank."""
        _check_context(context, type(self).__name__)
        self._stream_offset = 0 if self.dp_init == "noised" else 1  # stream index s = t + 1 - offset
        horizon = context.horizon - context.num_arms
        b, n, m = context.num_replicas, context.num_agents, context.num_arms
        rngs = None
        if not math.isinf(self.epsilon):
            rngs = [np.random.default_rng(_child(seed, DP_CHILD, i)) for seed in context.agent_seeds for i in range(n)]
        # tree (b, i, k) is flat cell (b * N + i) * M + k and draws from the generator of agent (b, i)
        self._trees = BinaryTreeBank(
            b * n * m,
            epsilon=self.epsilon,
            stream_length=horizon + 1 - self._stream_offset,
            sensitivity=1.0 if self.clip_for_dp is None else self.clip_for_dp[1] - self.clip_for_dp[0],
            split=self.eps_split,
            noise_on_empty=self.noise_on_empty,
            horizon=horizon if self.eps_split == "ln_T" else None,
            rngs=rngs,
            stream_of_tree=np.repeat(np.arange(b * n), m),
        )
        self._eps_prime = self._trees.eps_prime
        self._reward_bounds = context.reward_bounds
        super().reset(context)
        self._initial = np.zeros_like(self.sums)  # X(0), kept for dp_init="raw"

    @property
    def eps_prime(self) -> float:
        """ε′, the epsilon of one tree node (after reset)."""
        return self._mechanism().eps_prime

    def _mechanism(self) -> BinaryTreeBank:
        if not hasattr(self, "_trees"):
            raise RuntimeError("call reset() first: the tree depends on the horizon")
        return self._trees

    def privacy_report(self) -> dict[str, Any]:
        """The agent's privacy declaration (spec §6), the same for every agent.

        Keys: ``mechanism``, ``epsilon`` (requested), ``epsilon_guaranteed`` (``levels * eps_prime``; about 1.44 ε
        with ``eps_split="ln_T"``), ``eps_prime``, ``levels``, ``unit``, ``clip``, ``valid``. ``valid`` is True when
        every record lies in a range of width <= the sensitivity (``clip_for_dp`` set, or bounded rewards of width
        <= 1) and the init sample is noised; otherwise the epsilon is nominal (D11, D18).
        """
        tree = self._mechanism()
        lo, hi = self._reward_bounds
        bounded = self.clip_for_dp is not None or (math.isfinite(lo) and math.isfinite(hi) and hi - lo <= 1.0)
        return {
            "mechanism": "binary_tree_laplace",
            "epsilon": self.epsilon,
            "epsilon_guaranteed": tree.epsilon_guaranteed,
            "eps_prime": tree.eps_prime,
            "levels": tree.levels,
            "unit": "one observation of this agent",
            "clip": self.clip_for_dp,
            "valid": bool(bounded and self.dp_init == "noised" and not math.isinf(self.epsilon)),
        }

    def _message_privacy(self) -> dict[str, Privatized] | None:
        """``Privatized`` declarations of both payloads (post-processing of the private input stream)."""
        if math.isinf(self.epsilon):
            return None
        report = self.privacy_report()
        description = f"Fed_UCB binary-tree input perturbation, eps_prime={report['eps_prime']:.6g}"
        if not report["valid"]:
            description += " (nominal epsilon: unbounded rewards or raw init sample, spec D11/D18)"
        declared = Privatized(
            epsilon=report["epsilon_guaranteed"],
            account_key=self.ACCOUNT_KEY,
            description=description,
            scope="episode",  # one tree per arm over the whole input stream: epsilon covers the episode
        )
        return {"theta": declared, "counts": declared}

    # ------------------------------------------------------------------ decision and learning
    def _bonus(self, log_t: float) -> np.ndarray:
        """Eq. (12) with the tree's ε′ (eq. (11) when ε is infinite)."""
        if math.isinf(self.epsilon):
            return super()._bonus(log_t)
        return dp_bonus(self.num_agents, log_t, self.counts, self._eps_prime, self.log_n_floor, self.dp_bonus_scale)

    def _observation(self, rewards: np.ndarray) -> np.ndarray:
        """Observations clipped to ``clip_for_dp`` (D18), unchanged without it."""
        if self.clip_for_dp is None:
            return rewards
        return np.clip(rewards, *self.clip_for_dp)

    def _initial_means(self, arm: int, values: np.ndarray) -> np.ndarray:
        """X̃(0): the noisy stream sum at s = 1 (D11), or the raw sample (``dp_init="raw"``)."""
        self._initial[..., arm] = values
        if self.dp_init == "raw":
            return values
        return self._trees.add((self._cell + arm).reshape(-1), 0, values.reshape(-1)).reshape(values.shape)

    def _pulled_means(self, cells: np.ndarray, values: np.ndarray, t: int) -> np.ndarray:
        """Algorithm 3: each pulled arm's tree appends the zeros since its last pull, then this observation."""
        noisy = self._trees.add(cells, t - self._stream_offset, values)  # t - offset records before this one
        if self.dp_init == "raw":
            noisy = self._initial.reshape(-1)[cells] + noisy
        return noisy / self.counts.reshape(-1)[cells]


def _check_context(context: AgentContext, algorithm: str) -> None:
    """N >= 3, a horizon beyond the warm-up, and a connected agent graph with an edge in every replica."""
    n, m = context.num_agents, context.num_arms
    if n < 3:
        raise ValueError(
            f"{algorithm} needs num_agents >= 3 (the paper excludes N = 2, which is equivalent to centralised "
            f"learning); got num_agents={n}"
        )
    if context.horizon <= m:
        raise ValueError(
            f"{algorithm} needs horizon > num_arms: the first num_arms={m} slots are the warm-up (D20); "
            f"got horizon={context.horizon}; pass horizon = T + num_arms"
        )
    for topology in context.topologies:
        if topology.num_edges == 0 or not topology.is_connected():
            raise ValueError(
                f"{algorithm} needs a connected agent graph with at least one edge, got topology "
                f"{topology.name!r}; use e.g. topology='complete' or 'ring' with gossip='uniform_edge'"
            )


register_algorithm("gossip_ucb", GossipUCB, config=GossipUCBConfig)
register_algorithm("fed_ucb", FedUCB, config=FedUCBConfig)
