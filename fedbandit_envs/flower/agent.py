"""One agent of a federation: what a Flower client holds, and the scenario both sides build from.

A :class:`FederationSpec` names a run (algorithm, environment keywords, seed, wrappers). Every party
builds its local view of the scenario from it (:meth:`FederationSpec.world`), keeps what it is entitled
to, and drops the rest: the server keeps the environment as referee (channel, ledger, coordinator,
regret); a client keeps an :class:`AgentShard`.

An :class:`AgentShard` is the algorithm's own population (the reference code, unchanged) restricted to
one agent: it is fed only that agent's feedback (its arm, its reward, the copies addressed to it, the
slot's gossip edge) and only that agent's outgoing rows leave it. The reference populations are vectorised
over agents and none exposes a per-agent slice, so the shard keeps the population's arrays for every
agent but only its own row is live: the other rows see no rewards and their outputs are dropped. This is
exact for populations whose agents interact only through messages (each agent's row depends on its own
rewards and inbox); the Flower equivalence tests check it per algorithm. Between rounds the client keeps
the shard pickled in its ``context.state`` by a pickler that keeps numpy views views (Gossip_UCB and
Fed_UCB write their state through views of their arrays).

The agent's rewards come from its own column of the environment's reward stream (the ``rewards``
stream of the seed, drawn in the same blocks as the simulator's core), applied to its own row of arm
means: the rewards are those of the simulator, slot for slot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbandit_envs.algorithms import algorithm_name
from fedbandit_envs.channel import MessageBatch
from fedbandit_envs.core import Feedback, MessageHook, ObservedRecords, Phase, Step, reset_hooks
from fedbandit_envs.families.linear.env import LinearFeedback
from fedbandit_envs.families.procurement.env import ProcurementFeedback
from fedbandit_envs.families.registry import Family
from fedbandit_envs.flower.records import rows_of
from fedbandit_envs.protocol import make_population
from fedbandit_envs.rewards import NOISE_BLOCK, draw_noise
from fedbandit_envs.run import build_env, privacy_spent
from fedbandit_envs.seeding import SeedStreams
from fedbandit_envs.validation import check_int

__all__ = ["CLIENT_WRAPPER_KINDS", "NOT_SPLITTABLE", "SUPPORTED_FAMILIES", "AgentHooks", "AgentShard", "FederationSpec"]

#: The families a Flower federation runs on in this version.
SUPPORTED_FAMILIES = ("mab", "linear", "procurement")

#: Populations a client cannot run for its agent alone (by class name), and why. Found by running them
#: against the simulator; the reasons were read in their code.
NOT_SPLITTABLE = {
    "DDPMAB": (
        "its GIS hop is decided from every agent's lists at once: an agent's requests come from its neighbours' "
        "advertised lists in the same slot as their advertisements, its data from its neighbours' requests, the "
        "round ends on a free barrier when every agent's list is complete, and every agent aggregates the "
        "population's one copy of all M epoch vectors (a relayed vector is only checked against it); a client "
        "holds its own list and vector only"
    ),
}


#: The kinds of message wrappers whose hooks a client runs as the simulator does (``kind`` of a hook wrapper).
#: The DP wrappers draw their noise from one generator per (sender, kind); the fault wrappers draw their
#: faults from one stream across every agent's messages, which clients running them apart do not reproduce.
CLIENT_WRAPPER_KINDS = ("differential privacy",)


@dataclass(frozen=True)
class FederationSpec:
    """A run as a federation: what the server and every client build their local view from.

    Attributes:
        algorithm: a registered algorithm name (or ``"module:Class"``, or a population factory).
        env_kwargs: the environment's keyword arguments, as for :func:`fedbandit_envs.run.run`.
        seed: the run's seed (one federation is one seed).
        wrappers: message wrappers (``env -> wrapped env``, e.g. ``lambda env: LaplaceMessageDP(env, 1.0)``);
            their message hooks run on the clients, as a Flower client mod, on each agent's own rows.
        label: the ``algorithm`` column of the results (default: the algorithm's name).
    """

    algorithm: Any
    env_kwargs: Mapping[str, Any]
    seed: int
    wrappers: Sequence[Any] = ()
    label: str | None = None

    def __post_init__(self) -> None:
        check_int("seed", self.seed, 0)
        if not isinstance(self.env_kwargs, Mapping):
            raise TypeError(f"env_kwargs must be a dict of environment keywords, got {type(self.env_kwargs).__name__}")
        object.__setattr__(self, "env_kwargs", dict(self.env_kwargs))
        object.__setattr__(self, "wrappers", tuple(self.wrappers))
        for wrap in self.wrappers:
            if not callable(wrap):
                raise TypeError(
                    f"wrappers must be functions env -> wrapped env (e.g. lambda env: LaplaceMessageDP(env, 1.0)), "
                    f"got {type(wrap).__name__}"
                )

    @property
    def name(self) -> str:
        """The ``algorithm`` column of the results."""
        return self.label or algorithm_name(self.algorithm)

    def world(self, wrapped: bool) -> tuple[Any, Any, Family]:
        """A fresh population, the scenario's environment (wrapped when ``wrapped``) reset with the seed, its family.

        The core is reset without message hooks: on Flower they run on the clients
        (:class:`AgentHooks`), never on the server. Raises ``ValueError`` for a family Flower does not
        run yet, and (``wrapped``) for a wrapper whose kind is not in :data:`CLIENT_WRAPPER_KINDS`.
        """
        population = make_population(self.algorithm)
        reason = NOT_SPLITTABLE.get(type(population).__name__)
        if reason is not None:
            raise ValueError(f"{type(population).__name__} cannot run as a Flower federation: {reason}")
        env, family = build_env(self.algorithm, population, self.env_kwargs, self.wrappers if wrapped else ())
        layer = env
        while layer is not env.unwrapped:
            kind = getattr(layer, "kind", None)  # a hook wrapper's kind; other wrappers add no message hook
            if kind is not None and kind not in CLIENT_WRAPPER_KINDS:
                raise ValueError(
                    f"a {kind} wrapper cannot run on a Flower federation: its hook draws from one random stream "
                    "across every agent's messages, which clients running it apart would not reproduce; use the "
                    "environment's drop_prob and latency (the server's channel) instead"
                )
            layer = layer.env
        if family.name not in SUPPORTED_FAMILIES:
            raise ValueError(
                f"the Flower adapter runs the families {list(SUPPORTED_FAMILIES)}, not {family.name!r}; "
                "run this algorithm with fedbandit_envs.run.run instead"
            )
        core = env.unwrapped.core
        if getattr(getattr(core, "config", None), "reward_tape", False):
            raise ValueError("the Flower adapter draws rewards from the block stream; use reward_tape=False")
        core.reset([self.seed])
        return population, env, family

    def check_agent(self, agent: Any, num_agents: int) -> int:
        """``agent`` (a client's ``partition-id``) checked to be an agent index below ``num_agents``."""
        check_int("agent", agent, 0)
        if agent >= num_agents:
            raise ValueError(
                f"agent (the client's partition-id) must be below the number of agents {num_agents}, got {agent}"
            )
        return int(agent)


class AgentShard:
    """What the Flower client of agent ``agent`` holds: its learner and (MAB family) its arms' rewards.

    On the linear family the environment's stream decides who arrives and draws every active client's
    contexts and reward noise together, so the referee (the server) hands the acting client its contexts
    and its reward, as the PettingZoo environment hands them to an agent; the client keeps only its learner.
    On the procurement family the referee likewise hands each agent its own round (units, good units,
    utility), as the PettingZoo environment does.

    Args:
        spec: the run.
        agent: the agent's index (0..M-1), the client's ``partition-id``.
    """

    def __init__(self, spec: FederationSpec, agent: int) -> None:
        population, env, family = spec.world(wrapped=False)
        core = env.unwrapped.core
        self.context = core.context
        m = self.context.num_agents
        self.agent = spec.check_agent(agent, m)
        self.population = population
        self.family = family.name
        if self.family == "mab":  # the client draws its own rewards; elsewhere the referee hands them out
            self.means = core.means[0, self.agent].copy()
            self.reward_model = core.reward_model
            self._reward_rng = SeedStreams.from_seed(spec.seed).generator("rewards")
            self._noise = np.empty(0)
        self.observed = np.zeros((1, m, self.context.num_arms), np.int64)
        self.observed_total = np.zeros((1, m), np.int64)
        self._step = Step(-1)
        self._arms = np.zeros((1, m), np.int64)
        self._reward = 0.0
        #: the population synchronises on its reporting client's trigger (Sync-LinUCB): see :meth:`send`
        self.synchronised = callable(getattr(population, "synchronise", None))
        self.fired = np.zeros(1, bool)
        population.reset(self.context)

    def _draw_reward(self, slot: int, arm: int) -> float:
        """The agent's reward for ``arm`` in ``slot``: its column of the core's noise block, its own means."""
        offset = slot % NOISE_BLOCK
        if offset == 0:
            block = draw_noise(self.reward_model.noise_kind, self._reward_rng, (NOISE_BLOCK, self.context.num_agents))
            self._noise = block[:, self.agent].copy()
        means = self.means[arm].reshape(1, 1)
        return float(self.reward_model.transform(means, self._noise[offset].reshape(1, 1))[0, 0])

    def own_columns(self, step: Step) -> np.ndarray:
        """The columns of an action that are this agent's: its own (MAB) or its positions among the active clients."""
        if step.clients is None:
            return np.array([self.agent])
        return np.flatnonzero(step.clients[0] == self.agent)

    def act(self, step: Step) -> tuple[np.ndarray, float | None, list[MessageBatch]]:
        """The population's (1, n) arms for ``step``, the agent's reward, its own rows of the messages sent.

        Only the agent's own columns of the arms count (:meth:`own_columns`); the reward is None on the
        linear family (the referee hands it out).
        """
        action = self.population.act(step)
        self._step = step
        self._arms = np.asarray(action.arms, np.int64).copy()
        out = rows_of(action.messages, "sender", self.agent)
        if self.family != "mab":
            return self._arms[0], None, out
        self._reward = self._draw_reward(step.slot, int(self._arms[0, self.agent]))
        return self._arms[0], self._reward, out

    def observe(self, slot: int, inbox: list[MessageBatch], facts: dict[str, np.ndarray]) -> None:
        """Learn from the slot: the agent's own arms and rewards, the copies addressed to it, and ``facts``.

        ``facts`` are the referee's, masked to this agent: the gossip partners of the next slot (MAB
        family), the rewards of the agent's positions (linear family), or its units, good units and
        utility (procurement family).
        """
        own = self.own_columns(self._step)
        feedback: Any
        if self.family == "linear":
            feedback = LinearFeedback(slot, self._step.client_ids(), self._arms, facts["rewards"])
            self.observed_total[0, self.agent] += len(own)
        elif self.family == "procurement":
            feedback = ProcurementFeedback(slot, facts["units"], facts["successes"], facts["rewards"])
            self.observed_total[0, self.agent] += 1
        else:
            rewards = np.zeros((1, self.context.num_agents))
            rewards[0, self.agent] = self._reward
            feedback = Feedback(slot, self._arms, rewards, inbox, facts["partners"])
            self.observed[0, self.agent, self._arms[0, self.agent]] += 1
            self.observed_total[0, self.agent] += 1
        self.population.observe(feedback)

    def send(self, phase: Phase) -> list[MessageBatch]:
        """The agent's own rows of the population's messages in a message-only phase.

        A synchronised population (one with ``trigger`` and ``synchronise``, Sync-LinUCB) only runs its
        trigger here and sends nothing: the reporting client's :attr:`fired` tells the server whether the
        replica synchronises, and every client then sends its uploads in :meth:`synchronise`.
        """
        if self.synchronised:
            self.fired = np.asarray(self.population.trigger(phase), bool)
            return []
        return rows_of(self.population.send(phase), "sender", self.agent)

    def privacy_spent(self) -> tuple[float, float] | None:
        """The agent's (epsilon, delta) under its population's own accounting (e.g. P-FCB's noise), or None."""
        own = getattr(self.population, "epsilon_spent", None)
        epsilon = own() if own is not None else None
        if epsilon is None:
            return None
        return float(epsilon[0, self.agent]), float(self.population.delta_spent()[0, self.agent])

    def reports(self, phase: Phase) -> bool:
        """Whether this agent is the client that reports in ``phase`` (a report round of the linear family)."""
        return phase.positions is not None and int(phase.positions[0]) in self.own_columns(self._step)

    def synchronise(self, fire: bool) -> list[MessageBatch]:
        """The agent's own rows of a synchronised population's uploads, given the reporting client's trigger."""
        return rows_of(self.population.synchronise(np.array([fire])), "sender", self.agent)

    def receive(self, phase: Phase, inbox: list[MessageBatch]) -> None:
        """Read the copies addressed to the agent in a message-only phase."""
        self.population.receive(phase, inbox)


class AgentHooks:
    """The wrappers' message hooks of one agent, as its Flower client mod runs them (DP noise and accounting).

    The hooks are the wrapped environment's (:meth:`~fedbandit_envs.env_base.ProtocolParallelEnv.message_hooks`),
    reset with the run's streams; they see the agent's own outgoing rows and its own count of observed
    rewards (the client's records, kept by the client app, not by the learner). A hook's noise comes from
    one generator per (sender, kind), so the agent's rows get the noise they get on the simulator.

    Args:
        spec: the run.
        agent: the agent's index (the client's ``partition-id``).
    """

    def __init__(self, spec: FederationSpec, agent: int) -> None:
        _, env, _ = spec.world(wrapped=True)
        core = env.unwrapped.core
        context = core.context
        self.agent = spec.check_agent(agent, context.num_agents)
        # the records the family's core keeps: per arm (MAB), and the widths it vouches for (procurement)
        self.per_arm = core.records.has_arm_counts
        self.widths = core.records.record_widths(0)[None] if core.records.has_record_widths else None
        shape = (1, context.num_agents)
        records = self._records(np.zeros(shape, np.int64), np.zeros((*shape, context.num_arms), np.int64))
        streams = [SeedStreams.from_seed(spec.seed)]
        self.message_hooks: tuple[MessageHook, ...] = reset_hooks(tuple(env.message_hooks()), context, streams, records)

    def _records(self, agent_counts: np.ndarray, arm_counts: np.ndarray) -> ObservedRecords:
        """The client's records as its family's core keeps them."""
        return ObservedRecords(agent_counts, arm_counts if self.per_arm else None, self.widths)

    def privatize(
        self, slot: int, batches: list[MessageBatch], agent_counts: np.ndarray, arm_counts: np.ndarray
    ) -> list[MessageBatch]:
        """The agent's outgoing batches after the hooks, in order, given its (1, M) and (1, M, K) record counts."""
        for hook in self.message_hooks:
            attach = getattr(hook, "attach_records", None)
            if attach is not None:
                attach(self._records(agent_counts, arm_counts))
            batches = hook(slot, batches)
        return batches

    def privacy_spent(self) -> tuple[float, float] | None:
        """The agent's (epsilon, delta) spent under the accounting hooks, or None when none accounts."""
        epsilon, delta = privacy_spent(self)
        if epsilon is None or delta is None:
            return None
        return float(epsilon[0, self.agent]), float(delta[0, self.agent])
