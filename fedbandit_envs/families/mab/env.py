"""``FederatedMAB``: M agents pull arms of a K-armed bandit and talk over a costed channel."""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_envs.channel import ChannelConfig, CostModel, Message, MessageBatch, batches_from_messages
from fedbandit_envs.channel.ledger import LinkAccounting
from fedbandit_envs.channel.messages import batches_by_key
from fedbandit_envs.core import Action, Feedback, Step, check_arm_array
from fedbandit_envs.env_base import ProtocolParallelEnv, population_env_kwargs
from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.families.registry import Family, register_family
from fedbandit_envs.frozen import frozen
from fedbandit_envs.instances import BanditInstance
from fedbandit_envs.observations import (
    InboxForm,
    action_space,
    agent_observations,
    check_inbox_form,
    feedback_from_observations,
    observation_space,
    pull_fields,
    split_action,
)
from fedbandit_envs.seeding import EpisodeSeeds
from fedbandit_envs.topology import GossipActivation, Topology, TopologyName
from fedbandit_envs.validation import check_render_mode, keyword_checked


@keyword_checked
class FederatedMAB(ProtocolParallelEnv):
    """A federated multi-armed bandit as a PettingZoo ``ParallelEnv``.

    Every slot each agent pulls one arm and may send messages; the step returns each agent's reward
    and the messages delivered to it (see :mod:`fedbandit_envs.observations` for the observation and
    action formats; messages may be sent as arrays, see :mod:`fedbandit_envs.env_base`). With
    ``boundary_hops=True`` every slot but the last is followed by message-only steps (``obs["phase"] == 1``):
    agents send what they learnt from the slot's rewards before the next pull, one hop per step, until a
    step in which nobody sends. The horizon is a truncation. Pseudo-regret against the *global* best arm
    and the communication ledger are hidden from the agents and reported in ``infos`` and :meth:`state`.

    Args:
        num_agents, num_arms, horizon, instance, instance_params, reward_model, reward_params, topology,
            topology_params, reward_tape, instance_seed, topology_seed: the problem, documented (and checked)
            once in :class:`~fedbandit_envs.families.mab.core.MABConfig`.
        c1: cost of an agent-server link used in a slot; c2: of an agent-agent link.
        link_accounting: ``"used_links"`` or ``"graph_edges"`` (see :class:`CostModel`).
        free_server_downlink: the server's replies open no link (the papers' convention).
        price_per_message, price_per_byte: optional extra prices.
        latency, latency_jitter, drop_prob: channel imperfections (see :class:`ChannelConfig`).
        gossip: ``None``, ``"uniform_edge"`` or ``"node_then_neighbour"`` gossip-edge activation.
        record_messages: keep one ledger record per transmitted copy.
        coordinator: the server of the algorithm being played (see ``fedbandit_envs.protocol.Coordinator``).
        boundary_hops: offer message-only boundary steps after every slot but the last.
        inbox: the form of the ``"inbox"`` observations, ``"messages"`` or ``"batches"`` (see
            :mod:`fedbandit_envs.env_base`).
        render_mode: ``None`` or ``"ansi"``.
    """

    metadata: dict[str, Any] = {
        "name": "fedbandit/FederatedMAB-v0",
        "render_modes": ["ansi"],
        "is_parallelizable": True,
    }

    def __init__(
        self,
        num_agents: int = 5,
        num_arms: int = 10,
        horizon: int = 1000,
        *,
        instance: Any = "uniform",
        instance_params: Mapping[str, Any] | None = None,
        reward_model: Any = "bernoulli",
        reward_params: Mapping[str, Any] | None = None,
        topology: TopologyName | Topology | np.ndarray = "server",
        topology_params: Mapping[str, Any] | None = None,
        c1: float = 1.0,
        c2: float = 1.0,
        link_accounting: LinkAccounting = "used_links",
        free_server_downlink: bool = True,
        price_per_message: float = 0.0,
        price_per_byte: float = 0.0,
        latency: int | np.ndarray = 0,
        latency_jitter: int = 0,
        drop_prob: float = 0.0,
        gossip: GossipActivation | None = None,
        record_messages: bool = False,
        reward_tape: bool = False,
        instance_seed: int | None = None,
        topology_seed: int | None = None,
        coordinator: Any | None = None,
        boundary_hops: bool = False,
        inbox: InboxForm = "messages",
        render_mode: str | None = None,
    ) -> None:
        check_render_mode(render_mode, self.metadata["render_modes"])
        self.inbox_form = check_inbox_form(inbox)
        costs = CostModel(c1, c2, link_accounting, free_server_downlink, price_per_message, price_per_byte)
        channel = ChannelConfig(costs, latency, latency_jitter, drop_prob, gossip, record_messages)
        self.config = MABConfig(
            num_agents=num_agents,
            num_arms=num_arms,
            horizon=horizon,
            instance=instance,
            instance_params=instance_params,
            reward_model=reward_model,
            reward_params=reward_params,
            topology=topology,
            topology_params=topology_params,
            channel=channel,
            reward_tape=reward_tape,
            instance_seed=instance_seed,
            topology_seed=topology_seed,
        )
        self.core = FederatedMABCore(self.config, coordinator, boundary_hops)
        self.render_mode = render_mode
        num_agents, num_arms, horizon = self.config.num_agents, self.config.num_arms, self.config.horizon
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self._index = {name: i for i, name in enumerate(self.possible_agents)}
        bounds = self.core.reward_model.bounds
        self._observation_spaces = {
            a: observation_space(num_agents, num_arms, horizon, bounds, self.inbox_form) for a in self.possible_agents
        }
        self._action_spaces = {a: action_space(num_arms) for a in self.possible_agents}
        self.state_space = spaces.Box(-np.inf, np.inf, shape=(3 * num_agents,), dtype=np.float64)
        self._episode_seeds = EpisodeSeeds()
        self._feedback: Feedback | None = None
        self._communication: tuple[int, tuple[list, ...]] = (-1, ())

    # ------------------------------------------------------------------ spaces
    # ------------------------------------------------------------------ evaluator-only views
    @property
    def instance(self) -> BanditInstance:
        """The current instance (hidden from agents; for evaluation)."""
        return self.core.instances[0]

    @property
    def topology(self) -> Topology:
        """The current communication graph."""
        return self.core.topologies[0]

    @property
    def feedback(self) -> Feedback:
        """The array form of the last step (for vectorised learners driving this env).

        Its arms, rewards and partners are immutable copies: writing into the env's own arrays would rewrite
        :meth:`state` and what the coming steps read.
        """
        last = self._last_feedback()
        return Feedback(last.slot, frozen(last.arms), frozen(last.rewards), last.inbox, frozen(last.partners))

    def _last_feedback(self) -> Feedback:
        """The last step's feedback, the env's own arrays; RuntimeError before the first reset."""
        if self._feedback is None:
            raise RuntimeError("call reset() first")
        return self._feedback

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start an episode. ``seed`` fixes every random stream; ``None`` continues the seed sequence.

        ``options[MESSAGE_HOOKS]``: the episode's message hooks, handed down by a wrapper chain (none by default).
        """
        self._feedback = self.reset_core(seed, options)
        self._all_false = dict.fromkeys(self.agents, False)
        self._pulled = pull_fields(self._feedback)
        observations = agent_observations(self._feedback, 0, inbox=self.inbox_form, fields=self._pulled)
        return dict(zip(self.agents, observations)), self._infos()

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Play one slot with every live agent's action (an arm, or ``{"arm": k, "messages": [...]}``).

        In a message-only step (``obs["phase"] == 1``) the actions' messages are routed instead (see the
        class docstring); rewards are 0.
        """
        self.require_live(actions)
        if self.pending_phase is not None:
            return self._message_step(actions)
        arms = self._plain_arms(actions)
        if arms is not None:
            self._feedback = feedback = self.core.step(arms, arms_checked=True)
        else:
            arms, messages = self._parse_actions(actions)
            self._feedback = feedback = self.core.step(arms, batches_from_messages(messages))
        self.pending_phase = self.core.first_phase()
        self._pulled = pull_fields(feedback)
        observations = dict(zip(self.agents, self._observations(feedback)))
        rewards = dict(zip(self.agents, feedback.rewards[0].tolist()))
        truncated = self.core.done
        terminations = self._all_false.copy()
        truncations = dict.fromkeys(self.agents, True) if truncated else self._all_false.copy()
        infos = self._infos()
        if truncated:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def _message_step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Route the pending boundary hop; the observations show the last pull and the hop's inbox."""
        inbox = self.play_phase(actions)
        last = self._last_feedback()
        feedback = Feedback(last.slot, last.arms, last.rewards, inbox, last.partners)
        observations = dict(zip(self.agents, self._observations(feedback)))
        rewards = dict.fromkeys(self.agents, 0.0)
        return observations, rewards, self._all_false.copy(), self._all_false.copy(), self._infos()

    def _observations(self, feedback: Feedback) -> list[dict[str, Any]]:
        """Every agent's observation after ``feedback`` (the pull fields of the slot's act step), in agent order."""
        return agent_observations(feedback, self.core.slot, self.phase_flag, inbox=self.inbox_form, fields=self._pulled)

    def _plain_arms(self, actions: Mapping[str, Any]) -> np.ndarray | None:
        """The (1, M) arm array when every live agent gave a valid plain ``int`` (the fast path), else None."""
        if len(actions) != len(self.agents):
            return None
        try:
            values = list(map(actions.__getitem__, self.agents))
        except KeyError:
            return None
        if set(map(type, values)) != {int} or min(values) < 0 or max(values) >= self.config.num_arms:
            return None
        return np.array([values], np.int64)

    def _parse_actions(self, actions: Mapping[str, Any]) -> tuple[np.ndarray, list[Message | MessageBatch]]:
        """Validate every action (arm or dict with messages) with errors that say what is wrong."""
        self.check_action_agents(actions)
        arms = np.empty((1, len(self.possible_agents)), np.int64)
        messages: list[Message | MessageBatch] = []
        for agent, action in actions.items():
            arms[0, self._index[agent]], sent = split_action(action)
            messages.extend(self.own_messages(agent, sent))
        return arms, messages

    # ------------------------------------------------------------------ protocol translation
    def step_from(self, observations: Mapping[str, Mapping[str, Any]]) -> Step:
        """The act phase the observations describe: the slot and every agent's gossip partner."""
        first = observations[self.possible_agents[0]]
        seen = map(observations.__getitem__, self.possible_agents)
        partners = np.fromiter(map(itemgetter("partner"), seen), np.int64, len(self.possible_agents))
        return Step(int(first["slot"]), partners=partners[None, :])

    def actions_from(self, step: Step, action: Action) -> dict[str, Any]:
        """The action dict of a population's (B = 1) action: plain arms, or dicts when it sends messages.

        Each agent's messages go as array messages: per batch, the sub-batch of its rows. The arms are checked as on
        the batched path (shape, integer dtype and range), before the step checks each agent's arm again.
        """
        shape, num_arms = (1, len(self.possible_agents)), self.core.config.num_arms
        arms = check_arm_array(action.arms, shape, "replicas, agents", num_arms)[0].tolist()
        if not action.messages:
            return dict(zip(self.possible_agents, arms))
        outgoing = batches_by_key(action.messages, "sender")
        return {a: {"arm": arms[i], "messages": outgoing.get(i, [])} for i, a in enumerate(self.possible_agents)}

    def feedback_from(
        self, step: Step, action: Action, observations: Mapping[str, Mapping[str, Any]], rewards: Mapping[str, float]
    ) -> Feedback:
        """The (B = 1) feedback of an act step, rebuilt from the agents' observations."""
        return feedback_from_observations([observations[a] for a in self.possible_agents])

    def _infos(self) -> dict[str, dict[str, Any]]:
        ledger = self.ledger
        if self._communication[0] != ledger.version:  # the ledger's columns, derived again only when they changed
            per_node = (ledger.sent_messages[0].tolist(), ledger.sent_bytes[0].tolist(), ledger.node_cost[0].tolist())
            self._communication = ledger.version, per_node
        columns = zip(self.core.regret[0].tolist(), self.core.last_regret[0].tolist(), *self._communication[1])
        return {
            agent: {"pseudo_regret": r, "instant_regret": i, "messages_sent": m, "bytes_sent": b, "cost": c}
            for agent, (r, i, m, b, c) in zip(self.agents, columns)
        }

    def state(self) -> np.ndarray:
        """Global view: last arms, last rewards and cumulative pseudo-regret of every agent."""
        self.check_started()
        fb = self._last_feedback()
        return np.concatenate([fb.arms[0].astype(np.float64), fb.rewards[0], self.core.regret[0]])


def _build(env_kwargs: dict[str, Any], population: Any) -> FederatedMAB:
    """The MAB environment of ``env_kwargs`` hosting the population's coordinator and boundary hops."""
    return FederatedMAB(
        **population_env_kwargs(env_kwargs),
        coordinator=population.make_coordinator(),
        boundary_hops=bool(getattr(population, "boundary_hops", False)),
    )


FAMILY = register_family(Family(name="mab", envs={"mab": _build}, default_env="mab"))
