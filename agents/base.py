"""The protocol a learner implements to run in fedbandit-envs.

There are two ways to write a learner.

**Per agent** (simplest): subclass :class:`Agent`. One object per agent gets the PettingZoo
observation of that agent (last arm, last reward, slot, gossip partner, inbox of
:class:`~fedbandit_envs.channel.Message`) and returns an arm, or ``{"arm": k, "messages": [...]}``.
Wrap a factory with :class:`PerAgentPopulation` to run it with the runner.

**Population** (fast): subclass :class:`Population`. One object acts for all M agents of B
replicas at once on numpy arrays of shape (B, M), and sends
:class:`~fedbandit_envs.channel.MessageBatch` objects. The runner uses this form for batched
replicas; the PettingZoo environment is the case B = 1.

Either form may come with a :class:`Coordinator` (a server that pulls no arms). The environment
hosts it: after the clients' messages of a slot are routed, it calls :meth:`Coordinator.step` with
the messages that reached the server, and delivers its replies (costed) in the same step.

Randomness: an algorithm draws only from the generators it gets at reset (the episode's ``agents``
stream, one per replica), so runs are reproducible and never perturb the reward draws.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fedbandit_envs.channel.messages import Message, MessageBatch, batches_from_messages
from fedbandit_envs.core import Action, AgentContext, Feedback
from fedbandit_envs.observations import agent_observations, split_action

__all__ = ["Action", "Agent", "AgentContext", "Coordinator", "Feedback", "PerAgentPopulation", "Population"]


class Coordinator(ABC):
    """A server hosted by the environment. It never pulls arms; it receives and replies within a slot."""

    @abstractmethod
    def reset(self, context: AgentContext, rngs: list[np.random.Generator]) -> None:
        """Start an episode (one generator per replica, from the ``coordinator`` stream)."""

    @abstractmethod
    def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
        """Handle the copies that reached the server in ``slot``; return replies (sender ``SERVER``)."""


class Population(ABC):
    """A vectorised learner acting for all agents of all replicas."""

    #: Whether the population can run B > 1 replicas at once (the runner's batched path).
    supports_batching: bool = True

    def make_coordinator(self) -> Coordinator | None:
        """The server this algorithm needs, or None (the default: no server)."""
        return None

    @abstractmethod
    def reset(self, context: AgentContext) -> None:
        """Start an episode; draw randomness only from ``context.agent_rngs()``."""

    @abstractmethod
    def act(self, slot: int, partners: np.ndarray) -> Action:
        """Choose (B, M) arms for ``slot`` and the messages to send in it."""

    @abstractmethod
    def observe(self, feedback: Feedback) -> None:
        """Learn from the step's rewards and delivered messages."""

    def boundary(self, slot: int) -> list[MessageBatch]:
        """Messages of a message-only hop at the boundary after ``slot`` (default: none).

        Called after :meth:`observe`, so the messages may use the slot's rewards; no arm is pulled. The
        runner routes them (hooks, coordinator and ledger as for a step) and passes what was delivered to
        :meth:`observe_boundary`, then asks again, until this returns no message.
        """
        return []

    def observe_boundary(self, slot: int, inbox: list[MessageBatch]) -> None:
        """Read the copies delivered by a boundary hop after ``slot`` (called only after :meth:`boundary` sent).

        A population that overrides :meth:`boundary` must override this too.
        """
        raise NotImplementedError(f"{type(self).__name__} sends boundary messages but does not read their replies")


class Agent(ABC):
    """A learner for one agent, driven by that agent's PettingZoo observation."""

    @abstractmethod
    def reset(self, agent_id: int, context: AgentContext, rng: np.random.Generator) -> None:
        """Start an episode as agent ``agent_id`` (the context has replica 0's topology)."""

    @abstractmethod
    def act(self, observation: Mapping[str, Any]) -> int | Mapping[str, Any]:
        """Return an arm index, or ``{"arm": k, "messages": [Message, ...]}``."""


class PerAgentPopulation(Population):
    """Runs one :class:`Agent` object per agent and replica as a :class:`Population`.

    Args:
        factory: builds a fresh agent; called M times per replica at every reset.
        coordinator: an optional server shared by the agents.
    """

    def __init__(self, factory: Callable[[], Agent], coordinator: Coordinator | None = None) -> None:
        self.factory = factory
        self.coordinator = coordinator

    def make_coordinator(self) -> Coordinator | None:
        """The coordinator given at construction."""
        return self.coordinator

    def reset(self, context: AgentContext) -> None:
        """Build and reset M agents per replica, each on its own child of the replica's stream."""
        self.context = context
        self.agents = []
        for seed in context.agent_seeds:
            children = seed.spawn(context.num_agents)
            agents = [self.factory() for _ in range(context.num_agents)]
            for i, agent in enumerate(agents):
                agent.reset(i, context, np.random.default_rng(children[i]))
            self.agents.append(agents)
        b, m = context.num_replicas, context.num_agents
        self._last = Feedback(
            slot=-1,
            arms=np.full((b, m), -1, np.int64),
            rewards=np.zeros((b, m)),
            inbox=[],
            partners=np.full((b, m), -1, np.int64),
        )

    def act(self, slot: int, partners: np.ndarray) -> Action:
        """Ask every agent for its action given its observation."""
        feedback = Feedback(self._last.slot, self._last.arms, self._last.rewards, self._last.inbox, partners)
        arms = np.zeros(partners.shape, np.int64)
        messages: list[Message] = []
        batches: list[MessageBatch] = []
        for b, agents in enumerate(self.agents):
            observations = agent_observations(feedback, slot, replica=b)
            for i, agent in enumerate(agents):
                action = agent.act(observations[i])
                arm, sent = split_action(action)
                arms[b, i] = arm
                messages.extend(sent)
            batches.extend(batches_from_messages(messages, replica=b))
            messages.clear()
        return Action(arms, batches)

    def observe(self, feedback: Feedback) -> None:
        """Keep the feedback; agents see it in their next observation."""
        self._last = feedback
