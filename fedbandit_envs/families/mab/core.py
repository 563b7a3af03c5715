"""The batched simulation core of the federated multi-armed bandit.

B independent replicas advance together: state is held in arrays of shape (B, M, ...), and every
replica has its own seed streams, so replica b of a batched run is identical, slot by slot, to a
single run with the same seed. The PettingZoo environment is the B = 1 view of this core.

Reward noise is drawn in blocks per replica from the ``rewards`` stream, independent of the arms
pulled (common random numbers across algorithms). With ``reward_tape=True`` the n-th pull of arm k by
agent i always gets the n-th draw of that (agent, arm) cell, whenever it happens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbandit_envs.channel import Channel, ChannelConfig, MessageBatch
from fedbandit_envs.channel.routing import apply_hooks, prepare_outgoing
from fedbandit_envs.core import (
    MAX_BOUNDARY_EXCHANGES,
    Action,
    AgentContext,
    ChannelCore,
    Feedback,
    MessageHook,
    ObservedRecords,
    Phase,
    Step,
    check_arm_array,
    start_episode,
)
from fedbandit_envs.instances import BanditInstance, InstanceName, check_instance, make_instance
from fedbandit_envs.reference import reference_active
from fedbandit_envs.rewards import NOISE_BLOCK, RewardModel, RewardModelName, draw_noise, make_reward_model
from fedbandit_envs.seeding import SeedLike, SeedStreams
from fedbandit_envs.topology import Topology, TopologyName, build_topology, check_topology
from fedbandit_envs.validation import check_bool, check_int, check_memory, check_options, population_memory


@dataclass(frozen=True)
class MABConfig:
    """Everything that defines a federated MAB problem (validated on construction).

    Attributes:
        num_agents: M >= 1.
        num_arms: K >= 2.
        horizon: T >= 1 slots (truncation).
        instance: ``"uniform"``, ``"heterogeneous"``, a mean vector or (M, K) matrix, a BanditInstance, or
            a callable ``(rng, M, K) -> means``.
        instance_params: keyword arguments of the instance generator (e.g. ``h_max``); None: none. Every
            ``*_params`` mapping is copied to a dict on construction.
        reward_model: ``"bernoulli"``, ``"gaussian"``, ``"beta"`` or a RewardModel.
        reward_params: keyword arguments of the reward model (e.g. ``sigma``).
        topology: a topology name (``"server"``, ``"complete"``, ``"ring"``, ...), a Topology, or an adjacency matrix.
        topology_params: keyword arguments of the topology builder (e.g. ``p`` for Erdos-Renyi).
        channel: the :class:`ChannelConfig` (costs, latency, drops, gossip).
        reward_tape: give the n-th pull of each (agent, arm) the n-th draw of that cell.
        instance_seed: fix the instance across resets (otherwise drawn from each reset's seed).
        topology_seed: fix a random topology across resets.
    """

    num_agents: int
    num_arms: int
    horizon: int
    instance: InstanceName | Any = "uniform"
    instance_params: Mapping[str, Any] | None = None
    reward_model: RewardModelName | RewardModel = "bernoulli"
    reward_params: Mapping[str, Any] | None = None
    topology: TopologyName | Topology | np.ndarray = "server"
    topology_params: Mapping[str, Any] | None = None
    channel: ChannelConfig = field(default_factory=ChannelConfig)
    reward_tape: bool = False
    instance_seed: int | None = None
    topology_seed: int | None = None

    def __post_init__(self) -> None:
        for name, minimum in (("num_agents", 1), ("num_arms", 2), ("horizon", 1)):
            object.__setattr__(self, name, check_int(name, getattr(self, name), minimum))
        if not isinstance(self.channel, ChannelConfig):
            raise TypeError(f"channel must be a ChannelConfig, got {type(self.channel).__name__}")
        self.channel.check_agents(self.num_agents)
        check_bool("reward_tape", self.reward_tape)
        for name in ("instance_seed", "topology_seed"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_int(name, getattr(self, name), 0))
        for name in ("instance_params", "reward_params", "topology_params"):
            object.__setattr__(self, name, check_options(name, getattr(self, name)))
        check_memory(f"FederatedMAB(num_agents={self.num_agents}, num_arms={self.num_arms})", self.memory_parts())
        reward_model = make_reward_model(self.reward_model, **(self.reward_params or {}))
        object.__setattr__(self, "reward_model", reward_model)
        fixed = check_instance(self.instance, self.num_agents, self.num_arms, **(self.instance_params or {}))
        if fixed is not None:
            reward_model.validate_means(fixed.means)
        topology = check_topology(self.topology, self.num_agents, **(self.topology_params or {}))
        if topology is not None:
            self.channel.check_gossip([topology])

    def memory_parts(self, replicas: int = 1) -> dict[str, float]:
        """Bytes of the largest arrays of ``replicas`` replicas (for :func:`~fedbandit_envs.validation.check_memory`).

        Measured with ``tracemalloc`` at reset: about 24 B per (agent + 1)^2 link pair for the graph matrices
        (adjacency, links, latency) and 4 B for the ledger's link index, 150 B more per agent pair for a complete
        graph's edge lists, and 2.5 kB per agent for its name and spaces. With ``reward_tape``, the tape's current
        block of every (agent, arm) cell (``NOISE_BLOCK`` float64 each; a cell's block is drawn at its first pull).
        """
        m, k = self.num_agents, self.num_arms
        dense = isinstance(self.topology, str) and self.topology == "complete"
        parts = population_memory(m, replicas, (m + 1) ** 2 * (28 + 150 * dense), m * k * 32 + m * NOISE_BLOCK * 8)
        if self.reward_tape:
            parts["reward tape blocks"] = replicas * m * k * (NOISE_BLOCK + 1) * 8
        return parts


class FederatedMABCore(ChannelCore):
    """B replicas of a federated MAB with a channel and an optional hosted coordinator.

    Args:
        config: the problem.
        coordinator: a server object with ``reset(context, rngs)`` and ``step(slot, inbox) -> replies``.
        boundary_hops: offer a ``"boundary"`` message phase after every slot but the last (for algorithms
            that send what they learnt from a slot's rewards before the next pull).
    """

    def __init__(self, config: MABConfig, coordinator: Any | None = None, boundary_hops: bool = False) -> None:
        self.config = config
        self.horizon = config.horizon
        self.coordinator = coordinator
        self.boundary_hops = check_bool("boundary_hops", boundary_hops)
        self.channel = Channel(config.channel)
        self.reward_model: RewardModel = config.reward_model  # type: ignore[assignment]

    # ------------------------------------------------------------------ episode
    def reset(self, seeds: Sequence[SeedLike], hooks: Sequence[MessageHook] = ()) -> Feedback:
        """Start B = len(seeds) replicas; returns the initial (empty) feedback with slot -1.

        ``hooks``: as in :func:`~fedbandit_envs.core.start_episode`.
        """
        cfg = self.config
        hooks, streams = start_episode(seeds, hooks, f"{cfg.num_agents} agents", cfg.memory_parts)
        with self.resetting():
            fixed_instance = SeedStreams.fixed(cfg.instance_seed)
            fixed_topology = SeedStreams.fixed(cfg.topology_seed)
            self.instances: list[BanditInstance] = [
                make_instance(
                    cfg.instance,
                    cfg.num_agents,
                    cfg.num_arms,
                    (fixed_instance or s).generator("instance"),
                    **(cfg.instance_params or {}),
                )
                for s in streams
            ]
            for instance in self.instances:
                self.reward_model.validate_means(instance.means)
            self.topologies: list[Topology] = [
                build_topology(
                    cfg.topology,
                    cfg.num_agents,
                    (fixed_topology or s).generator("topology"),
                    **(cfg.topology_params or {}),
                )
                for s in streams
            ]
            self.means = np.stack([inst.means for inst in self.instances])  # (B, M, K)
            self.gaps = np.stack([inst.gaps for inst in self.instances])  # (B, K)
            self._means_flat, self._gaps_flat = self.means.reshape(-1), self.gaps.reshape(-1)  # views, for flat gathers
            b, m = len(streams), cfg.num_agents
            self.num_replicas = b
            self._rows = np.arange(b)[:, None]
            self._cols = np.arange(m)[None, :]
            # flat offsets of (replica, agent, arm 0) in means and of (replica, arm 0) in gaps: one take per gather
            self._mean_cells = (np.arange(b * m) * cfg.num_arms).reshape(b, m)
            self._gap_cells = np.repeat(self._rows * cfg.num_arms, m, axis=1)  # (B, M): no broadcast in the gather
            self._arm_shape = (b, m)
            self._reward_rngs = [s.generator("rewards") for s in streams]
            self._noise = np.empty((0, b, m))
            self._pulls = np.zeros((b, m, cfg.num_arms), np.int64)
            self._tape_roots = [s.sequence("rewards") for s in streams]
            # the reward tape's current block of every (replica, agent, arm) cell, and which block it is (-1: none yet);
            # np.empty leaves the pages of cells never pulled untouched
            self._tape_pool = np.empty((b * m * cfg.num_arms, NOISE_BLOCK) if cfg.reward_tape else (0, NOISE_BLOCK))
            self._tape_blocks = np.full(b * m * cfg.num_arms if cfg.reward_tape else 0, -1, np.int64)
            context = AgentContext(
                num_agents=m,
                num_arms=cfg.num_arms,
                horizon=cfg.horizon,
                topologies=tuple(self.topologies),
                reward_bounds=self.reward_model.bounds,
                agent_seeds=tuple(s.sequence("agents") for s in streams),
            )
            self._observed = np.zeros((b, m, cfg.num_arms), np.int64)
            self._observed_total = np.zeros((b, m), np.int64)
            self.open_episode(context, streams, hooks, ObservedRecords(self._observed_total, self._observed))
            self.slot = 0
            self.regret = np.zeros((b, m))
            self.last_regret = np.zeros((b, m))
            self.partners = self.channel.sample_gossip_partners()
            return Feedback(-1, np.full((b, m), -1, np.int64), np.zeros((b, m)), [], self.partners)

    # ------------------------------------------------------------------ rewards
    def _reward_noise(self, arms: np.ndarray, cells: np.ndarray) -> np.ndarray:
        if self.config.reward_tape:
            return self._tape_noise(arms, cells)
        offset = self.slot % NOISE_BLOCK
        if offset == 0:  # slot-major, (NOISE_BLOCK, B, M): each slot's (B, M) noise is contiguous
            shape = (NOISE_BLOCK, self.config.num_agents)
            kind = self.reward_model.noise_kind
            self._noise = np.empty((NOISE_BLOCK, len(self._reward_rngs), shape[1]))
            for b, rng in enumerate(self._reward_rngs):  # (filled replica by replica: np.stack costs more)
                self._noise[:, b] = draw_noise(kind, rng, shape)
        return self._noise[offset]

    def _tape_noise(self, arms: np.ndarray, cells: np.ndarray) -> np.ndarray:
        """The tape's draw for each agent's pull: the n-th pull of a cell reads entry n of that cell's tape.

        The tape of cell (b, i, k) is drawn in blocks of ``NOISE_BLOCK`` from its own seed sequence (the
        replica's ``rewards`` root spawned with key (i, k, block)); only the cell's current block is kept, and a
        block is drawn when a pull first needs it. The reference mode draws every pull's block afresh. ``cells``:
        the pulled (replica, agent, arm) cells as flat indices into ``means`` and the pull counts.
        """
        blocks, offsets = np.divmod(self._pulls.reshape(-1).take(cells), NOISE_BLOCK)
        if reference_active():
            noise = np.empty(arms.shape)
            for b, i in np.ndindex(arms.shape):
                noise[b, i] = self._tape_block(b, i, int(arms[b, i]), int(blocks[b, i]))[offsets[b, i]]
            return noise
        stale = self._tape_blocks.take(cells) != blocks
        if stale.any():
            for b, i in zip(*np.nonzero(stale), strict=True):
                cell = cells[b, i]
                self._tape_pool[cell] = self._tape_block(int(b), int(i), int(arms[b, i]), int(blocks[b, i]))
                self._tape_blocks[cell] = blocks[b, i]
        return self._tape_pool[cells, offsets]

    def _tape_block(self, replica: int, agent: int, arm: int, block: int) -> np.ndarray:
        """Block ``block`` of the reward tape of (``replica``, ``agent``, ``arm``): ``NOISE_BLOCK`` draws."""
        root = self._tape_roots[replica]
        seq = np.random.SeedSequence(root.entropy, spawn_key=(*root.spawn_key, agent, arm, block))
        return draw_noise(self.reward_model.noise_kind, np.random.default_rng(seq), NOISE_BLOCK)

    # ------------------------------------------------------------------ step
    def check_arms(self, arms: np.ndarray) -> np.ndarray:
        """Validate a (B, M) integer arm array; returns the core's own int64 copy (see ``check_arm_array``)."""
        return check_arm_array(arms, self._arm_shape, "replicas, agents", self.config.num_arms)

    def step(self, arms: np.ndarray, messages: Sequence[MessageBatch] = (), *, arms_checked: bool = False) -> Feedback:
        """Play one slot: pull ``arms`` (B, M), route ``messages``, run the coordinator.

        Everything is validated before any state changes: a rejected step leaves the core, the
        ledger and the random streams as they were. ``arms_checked=True`` skips the arm check for a
        caller that has already validated a (B, M) int64 array.
        """
        self.check_running()
        if not arms_checked:
            arms = self.check_arms(arms)
        slot = self.slot
        prepared = prepare_outgoing(self.channel, messages, self.coordinator, slot)
        if self.message_hooks:
            prepared = apply_hooks(self.channel, self.message_hooks, slot, messages, prepared)
        cells = self._mean_cells + arms  # flat (replica, agent, arm) cells, the layout of means and pulls
        noise = self._reward_noise(arms, cells)
        means = self._means_flat.take(cells)
        rewards = self.reward_model.transform(means, noise)
        if self.config.reward_tape:
            self._pulls.reshape(-1)[cells] += 1  # one pull per (replica, agent): no repeated cell
        self.last_regret = self._gaps_flat.take(self._gap_cells + arms)
        self.regret += self.last_regret
        if self.message_hooks:  # only the hooks read the counts
            self._observed[self._rows, self._cols, arms] += 1
            self._observed_total += 1
        inbox = self.deliver(slot, prepared)
        self.slot += 1
        self.partners = self.channel.sample_gossip_partners() if not self.done else np.full_like(self.partners, -1)
        return Feedback(slot, arms, rewards, inbox, self.partners)

    # ------------------------------------------------------------------ the population protocol
    def current_step(self) -> Step:
        """The act phase of the current slot: its index and the gossip partners sampled for it."""
        return Step(self.slot, self.partners)

    def play(self, action: Action) -> Feedback:
        """Play the current slot with a population's action (arms and the messages sent with them)."""
        return self.step(action.arms, action.messages)

    def first_phase(self) -> Phase | None:
        """The boundary hop after the slot just played (with ``boundary_hops``, except after the last slot)."""
        if not self.boundary_hops or self.done:
            return None
        return Phase(self.slot - 1, "boundary")

    def next_phase(self, phase: Phase, sent: bool) -> Phase | None:
        """Another boundary hop while the population sends (a peer hop can be followed by a server round trip).

        The last hop a boundary offers is its ``MAX_BOUNDARY_EXCHANGES``-th; :meth:`exchange` refuses messages in it.
        """
        return Phase(phase.slot, "boundary", phase.round + 1) if sent else None

    def exchange(self, phase: Phase, messages: Sequence[MessageBatch]) -> list[MessageBatch]:
        """Route a message-only hop at the boundary after the slot just played; return the delivered copies.

        No arm is pulled and the slot does not advance: this is how a protocol sends what it learnt from
        the last slot's rewards before the next pull (Li and Song's free first hop, spec D9). The hop is
        validated first, passes the message hooks, reaches the coordinator (which replies within it) and
        is recorded in the ledger under the slot just played, priced as a hop of its own. Copies with a
        latency arrive with a later step. Raises ``RuntimeError`` before the first slot and after the last
        one (there is no boundary hop after the horizon, spec D8).
        """
        self.check_not_failed()
        if self.slot == 0:
            raise RuntimeError("exchange() routes the hop after a played slot; call step() first")
        if self.done:
            raise RuntimeError("the horizon is reached: there is no exchange after the final slot")
        if messages and phase.round + 1 >= MAX_BOUNDARY_EXCHANGES:  # refused before anything is routed
            raise RuntimeError(
                f"the population still sends messages in hop {phase.round + 1} of the boundary after slot "
                f"{phase.slot}, the last one a boundary offers ({MAX_BOUNDARY_EXCHANGES}); a boundary carries one hop "
                "and a server round trip, so a population that keeps sending loops (send nothing in this hop)"
            )
        return self.route(self.slot - 1, messages)
