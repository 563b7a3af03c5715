"""The population protocol: the contract a learner implements to run on every family of fedbandit-envs.

A **population** acts for all agents of B replicas at once on numpy arrays (replica axis first). One
slot of any family is::

    action = population.act(step)          # Step: slot, gossip partners, acting clients, contexts
    feedback = core.play(action)           # pulls, and the messages sent with the action
    population.observe(feedback)           # the family's feedback (rewards, outcomes, inbox)
    phase = core.first_phase()             # message-only phases that follow the pulls, as data
    while phase is not None:
        batches = population.send(phase)
        if batches or phase.required:
            population.receive(phase, core.exchange(phase, batches))
        phase = core.next_phase(phase, sent=bool(batches))

The families differ only in the data: the :class:`~fedbandit_envs.core.Step` fields an agent sees
(gossip partners on the MAB family, acting clients and their contexts on the linear family), what an
action's ``arms`` hold (an arm per agent, an arm per acting client, units per producer) and the feedback
type (:class:`~fedbandit_envs.core.Feedback`, ``LinearFeedback``, ``ProcurementFeedback``). The
message-only phases are :class:`~fedbandit_envs.core.Phase` records: ``"boundary"`` hops after a MAB
slot (offered when the population sets :attr:`Population.boundary_hops`), ``"report"`` rounds after a
linear slot (one per acting client) and after a procurement round. The PettingZoo environments play
the same phases as ordinary ``step()`` calls whose observations say which phase it is.

A population may come with a :class:`Coordinator` (a server that pulls no arms). The environment
hosts it: after the clients' messages of a step are routed, it calls :meth:`Coordinator.step` with the
messages that reached the server, and delivers its replies (costed) in the same step.

Per-agent learners (MAB family) subclass :class:`Agent`: one object per agent gets the PettingZoo
observation of that agent and returns an arm, or ``{"arm": k, "messages": [...]}``; wrap a factory
with :class:`PerAgentPopulation` to run it as a population.

Randomness: an algorithm draws only from the generators it gets at reset (the episode's ``agents``
stream, one per replica), so runs are reproducible and never perturb the reward draws.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Generic, TypeVar

import numpy as np

from fedbandit_envs.algorithms import algorithm_name, make_algorithm, resolve_factory
from fedbandit_envs.channel.messages import Message, MessageBatch, batches_from_messages
from fedbandit_envs.core import Action, AgentContext, Feedback, Phase, Step
from fedbandit_envs.observations import InboxForm, agent_observations, check_inbox_form, check_senders, split_action
from fedbandit_envs.validation import INT64_MAX

__all__ = [
    "Action",
    "Agent",
    "AgentContext",
    "Coordinator",
    "Feedback",
    "PerAgentPopulation",
    "Phase",
    "Population",
    "Step",
    "check_population",
    "make_population",
]

#: The context type a population or coordinator resets with: :class:`AgentContext` or a family's subclass.
ContextT = TypeVar("ContextT", bound=AgentContext)


class Coordinator(ABC, Generic[ContextT]):
    """A server hosted by the environment. It never pulls arms; it receives and replies within a slot.

    Parameterise it with the family's context type, e.g. ``Coordinator[LinearContext]``.
    """

    @abstractmethod
    def reset(self, context: ContextT, rngs: list[np.random.Generator]) -> None:
        """Start an episode (one generator per replica, from the ``coordinator`` stream)."""

    @abstractmethod
    def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
        """Handle the copies that reached the server in ``slot``; return replies (sender ``SERVER``)."""


class Population(ABC, Generic[ContextT]):
    """A vectorised learner acting for all agents of all replicas, on any family (see the module docstring).

    Parameterise it with the family's context type, e.g. ``Population[ProcurementContext]``.
    """

    #: Whether the population can run B > 1 replicas at once (the runner's batched path).
    supports_batching: bool = True

    #: The families the population runs on (``"mab"``, ``"linear"``, ``"procurement"``, ...); empty when it
    #: does not say (it is then played on the environment ``env_kwargs`` names, by default the MAB family's).
    families: tuple[str, ...] = ()

    #: Whether the population sends message-only hops at the boundary after a slot (MAB family): the
    #: environment then offers a ``"boundary"`` phase after every slot but the last.
    boundary_hops: bool = False

    def make_coordinator(self) -> Coordinator | None:
        """The server this algorithm needs, or None (the default: no server)."""
        return None

    def memory_parts(self, context: ContextT) -> dict[str, float]:
        """Bytes of the large arrays :meth:`reset` allocates for ``context`` (name -> bytes; default: none).

        :func:`~fedbandit_envs.core.reset_population` checks them against the memory limit before the reset, as
        the environments check theirs (:func:`~fedbandit_envs.validation.check_memory`). Declare arrays that grow
        faster than agents x arms (those the environment's own check does not bound), e.g. agent x agent tables.
        """
        return {}

    @abstractmethod
    def reset(self, context: ContextT) -> None:
        """Start an episode; draw randomness only from ``context.agent_rngs()``.

        The context is the family's (:class:`AgentContext` or a subclass with the family's public facts).
        """

    @abstractmethod
    def act(self, step: Step) -> Action:
        """The joint action of ``step.slot`` and the messages sent with it."""

    @abstractmethod
    def observe(self, feedback: Any) -> None:
        """Learn from the step's feedback (the family's feedback type, with ``slot`` first)."""

    def send(self, phase: Phase) -> list[MessageBatch]:
        """The messages of a message-only ``phase`` (default: none).

        Called after :meth:`observe`, so they may use the slot's outcomes; no arm is pulled.
        """
        return []

    def receive(self, phase: Phase, inbox: list[MessageBatch]) -> None:  # noqa: B027 (optional hook)
        """Read the copies delivered in ``phase`` (called when the population sent or the phase is required)."""


class Agent(ABC):
    """A learner for one agent, driven by that agent's PettingZoo observation."""

    @abstractmethod
    def reset(self, agent_id: int, context: AgentContext, rng: np.random.Generator) -> None:
        """Start an episode as agent ``agent_id`` (the context is its own replica's: one topology, B = 1)."""

    @abstractmethod
    def act(self, observation: Mapping[str, Any]) -> int | Mapping[str, Any]:
        """Return an arm index, or ``{"arm": k, "messages": [...]}`` (:class:`Message` or :class:`MessageBatch`)."""


class PerAgentPopulation(Population[AgentContext]):
    """Runs one :class:`Agent` object per agent and replica as a :class:`Population`.

    Each agent sees its PettingZoo observation and may send :class:`Message` or :class:`MessageBatch` objects
    (as itself, replica 0: checked as the environment checks them); each replica's are grouped into batches.

    Args:
        factory: builds a fresh agent; called M times per replica at every reset.
        coordinator: an optional server shared by the agents.
        inbox: the form of the agents' ``"inbox"`` observations, ``"messages"`` (default) or ``"batches"``.
    """

    families = ("mab",)

    def __init__(
        self, factory: Callable[[], Agent], coordinator: Coordinator | None = None, inbox: InboxForm = "messages"
    ) -> None:
        self.factory = factory
        self.coordinator = coordinator
        self.inbox = check_inbox_form(inbox)

    def make_coordinator(self) -> Coordinator | None:
        """The coordinator given at construction."""
        return self.coordinator

    def reset(self, context: AgentContext) -> None:
        """Build and reset M agents per replica, each with its replica's context and its own child of its stream.

        An agent of replica b sees replica b's context alone (:meth:`AgentContext.of_replica`: its topology and
        stream), as the same agent on the PettingZoo path sees its environment's.
        """
        self.context = context
        self.agents = []
        for replica, seed in enumerate(context.agent_seeds):
            children = seed.spawn(context.num_agents)
            own = context.of_replica(replica)
            agents = [self.factory() for _ in range(context.num_agents)]
            for i, agent in enumerate(agents):
                agent.reset(i, own, np.random.default_rng(children[i]))
            self.agents.append(agents)
        b, m = context.num_replicas, context.num_agents
        self._last = Feedback(
            slot=-1,
            arms=np.full((b, m), -1, np.int64),
            rewards=np.zeros((b, m)),
            inbox=[],
            partners=np.full((b, m), -1, np.int64),
        )

    def act(self, step: Step) -> Action:
        """Ask every agent for its action given its observation."""
        partners = step.gossip_partners()
        feedback = Feedback(self._last.slot, self._last.arms, self._last.rewards, self._last.inbox, partners)
        arms = np.zeros(partners.shape, np.int64)
        messages: list[Message | MessageBatch] = []
        batches: list[MessageBatch] = []
        for b, agents in enumerate(self.agents):
            chosen = []
            observations = agent_observations(feedback, step.slot, replica=b, inbox=self.inbox)
            for agent, observation in zip(agents, observations):
                action = agent.act(observation)
                if type(action) is int and 0 <= action <= INT64_MAX:  # a bare arm, the common case
                    chosen.append(action)
                    continue
                arm, sent = split_action(action)
                chosen.append(arm)
                if sent:
                    i = len(chosen) - 1
                    messages.extend(check_senders(f"agent {i}", i, sent))
            arms[b] = chosen
            if messages:
                batches.extend(batches_from_messages(messages, replica=b))
                messages.clear()
        return Action(arms, batches)

    def observe(self, feedback: Feedback) -> None:
        """Keep the feedback; agents see it in their next observation."""
        self._last = feedback


#: The methods a population must have: those the run loop calls and :class:`Population` gives no default for.
POPULATION_METHODS = ("reset", "act", "observe", "make_coordinator")
#: What a learner implements, for the errors that say it does not.
PROTOCOL_HELP = (
    "implement fedbandit_envs.protocol.Population (vectorised: reset(context), act(step), observe(feedback), "
    "optionally send(phase) and receive(phase, inbox)) or fedbandit_envs.protocol.Agent "
    "(MAB, one object per agent: reset(agent_id, context, rng), act(observation))"
)


def check_population(population: Any, label: str) -> None:
    """Check that ``population`` has every method of :data:`POPULATION_METHODS`.

    TypeError naming the missing methods (and ``label``) and what to implement otherwise.
    """
    missing = [name for name in POPULATION_METHODS if not callable(getattr(population, name, None))]
    if missing:
        raise TypeError(f"{label} does not implement the protocol: no method(s) {missing}; {PROTOCOL_HELP}")


def make_population(algorithm: Any, **options: Any) -> Any:
    """A fresh population of ``algorithm`` (a registered name, ``"module:Class"``, a class or a factory).

    An :class:`Agent` class (one learner per agent, MAB family) is run as a :class:`PerAgentPopulation` of it
    built with ``options``; anything else is built by :func:`~fedbandit_envs.algorithms.make_algorithm` and
    checked by :func:`check_population`.
    """
    factory = resolve_factory(algorithm) if isinstance(algorithm, str) else algorithm
    if isinstance(factory, type) and issubclass(factory, Agent):
        return PerAgentPopulation(partial(factory, **options))
    population = make_algorithm(algorithm, **options)
    check_population(population, algorithm_name(algorithm))
    return population
