"""Data exchanged between the simulation core and algorithms (replica axis first, then agents)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, TypeVar, overload

import numpy as np

from fedbandit_envs.channel.channel import Channel
from fedbandit_envs.channel.messages import MessageBatch
from fedbandit_envs.channel.routing import apply_hooks, check_batches, deliver, prepare_outgoing
from fedbandit_envs.seeding import SeedLike, SeedStreams
from fedbandit_envs.topology import Topology
from fedbandit_envs.validation import check_memory

_ContextT = TypeVar("_ContextT", bound="AgentContext")


@dataclass(frozen=True)
class AgentContext:
    """The public facts of an episode that an algorithm may use when it resets.

    Attributes:
        num_agents: M, the number of agents.
        num_arms: K, the number of arms.
        horizon: T, the number of slots (known to the agents, as in the papers).
        topologies: the communication graph of each replica (agents may read their neighbours).
        reward_bounds: the support of the rewards, e.g. (0, 1).
        agent_seeds: one SeedSequence per replica for the algorithm's own randomness (the ``agents``
            stream); a per-agent sequence is ``agent_seeds[b].spawn`` or ``SeedStreams.agent_sequence``.
    """

    num_agents: int
    num_arms: int
    horizon: int
    topologies: tuple[Topology, ...]
    reward_bounds: tuple[float, float]
    agent_seeds: tuple[np.random.SeedSequence, ...]

    @property
    def num_replicas(self) -> int:
        """B, the number of independent runs simulated together."""
        return len(self.topologies)

    def agent_rngs(self) -> list[np.random.Generator]:
        """One fresh Generator per replica on the algorithm's stream."""
        return [np.random.default_rng(seq) for seq in self.agent_seeds]

    def of_replica(self: _ContextT, replica: int) -> _ContextT:
        """The context of replica ``replica`` alone (B = 1): its topology and its seed stream, the rest as it is."""
        return replace(self, topologies=(self.topologies[replica],), agent_seeds=(self.agent_seeds[replica],))


@dataclass(slots=True)
class Step:
    """What a population knows when it acts in a slot, for every replica (the act phase; read-only by contract).

    A plain slotted dataclass rather than a frozen one: the core builds one per slot, and a frozen
    dataclass's construction costs about three times as much.

    Attributes:
        slot: the slot about to be played (0-based).
        partners: (B, M) gossip partner of each agent in this slot, -1 for none (MAB families; None elsewhere).
        clients: (B, m) ids of the agents that act in this slot, or None when every agent acts.
        contexts: (B, m, K, d) the arm contexts the acting agents observe (linear families; None elsewhere).
    """

    slot: int
    partners: np.ndarray | None = None
    clients: np.ndarray | None = None
    contexts: np.ndarray | None = None

    def gossip_partners(self) -> np.ndarray:
        """``partners``; ValueError on a step that carries none (the MAB families' steps always do)."""
        if self.partners is None:
            raise ValueError("this step carries no gossip partners: the population runs on the MAB family only")
        return self.partners

    def client_ids(self) -> np.ndarray:
        """``clients``; ValueError on a step where every agent acts (the linear family's steps name them)."""
        if self.clients is None:
            raise ValueError("this step names no acting clients (every agent acts): it is not a linear-family step")
        return self.clients


@dataclass
class Action:
    """The joint action of one slot and the messages sent with it.

    Attributes:
        arms: what every acting agent plays, replica axis first: (B, M) arm indices when every agent acts,
            (B, m) arm indices of the acting clients (linear), or (B, n, m) units per producer (procurement).
        messages: the batches sent with the action (routed in the same step).
    """

    arms: np.ndarray
    messages: list[MessageBatch] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not isinstance(self.messages, (list, tuple)):
            raise TypeError(
                f"Action.messages must be a list of MessageBatch objects, got {type(self.messages).__name__}"
            )


#: The kinds of message-only phase: a hop at the boundary after a slot, and a report round of a slot.
PhaseKind = Literal["boundary", "report"]


@dataclass(slots=True)
class Phase:
    """A message-only phase that follows a slot's pulls: no arm is pulled, messages are routed and costed.

    Read-only by contract (a slotted dataclass, cheap to build once per phase like :class:`Step`).

    The core decides which phases follow a slot (see :meth:`first_phase` and :meth:`next_phase` of the
    family cores); the population answers each with :meth:`~fedbandit_envs.protocol.Population.send` and
    reads the delivered copies in :meth:`~fedbandit_envs.protocol.Population.receive`.

    Attributes:
        slot: the slot whose pulls the phase follows (its messages are costed under it).
        kind: ``"boundary"`` (a hop at the boundary after the slot; more follow while the population sends)
            or ``"report"`` (a report round of the slot; their number is fixed by the family).
        round: 0-based index of the phase among those following ``slot``.
        positions: (B,) position among the slot's acting clients of the client that reports in this
            round (report rounds of families with acting clients), else None.
        required: the core routes the phase even when nothing is sent (a report round that closes the
            slot); otherwise a silent phase is skipped and ends the slot's message phases.
    """

    slot: int
    kind: PhaseKind
    round: int = 0
    positions: np.ndarray | None = None
    required: bool = False

    def copy(self) -> Phase:
        """A copy: the one a population gets, so what it does to it never reaches the env's own.

        Built directly, at a sixth of the cost of :func:`dataclasses.replace` (one copy per phase of every slot).
        """
        return Phase(self.slot, self.kind, self.round, self.positions, self.required)


@dataclass
class Feedback:
    """What the agents receive from one step, for every replica.

    Attributes:
        slot: the slot just played (0-based).
        arms: (B, M) arms pulled.
        rewards: (B, M) rewards observed.
        inbox: copies delivered to agents in this step (explicit recipients, sorted by send order).
        partners: (B, M) gossip partner of each agent in the *next* slot, -1 for none.
    """

    slot: int
    arms: np.ndarray
    rewards: np.ndarray
    inbox: list[MessageBatch]
    partners: np.ndarray


@overload
def _read_only(array: np.ndarray) -> np.ndarray: ...


@overload
def _read_only(array: None) -> None: ...


def _read_only(array: np.ndarray | None) -> np.ndarray | None:
    """A read-only view of ``array`` that follows its later in-place updates (None stays None)."""
    if array is None:
        return None
    view = array.view()
    view.setflags(write=False)
    return view


class ObservedRecords:
    """The env's own count of the records (observed rewards) each agent holds: facts a DP wrapper may trust.

    A read-only view over arrays the core updates in place, so it always shows the counts at the moment
    it is read (a message hook reads it while the slot's messages are privatized). Only the core writes
    them; nothing a learner sends changes them.

    Args:
        agent_counts: (B, M) rewards each agent has observed so far.
        arm_counts: (B, M, K) rewards each agent has observed per arm, or None where arms have no identity
            (linear contexts) or records are not per arm.
        record_widths: (B, M, K) width of the range of one record per (agent, entry) that the env can
            vouch for (procurement: a producer's capacity), or None.
    """

    def __init__(
        self,
        agent_counts: np.ndarray,
        arm_counts: np.ndarray | None = None,
        record_widths: np.ndarray | None = None,
    ) -> None:
        self._agent_counts = _read_only(agent_counts)
        self._arm_counts = _read_only(arm_counts)
        self._record_widths = _read_only(record_widths)

    @property
    def has_arm_counts(self) -> bool:
        """Whether this family counts records per arm."""
        return self._arm_counts is not None

    @property
    def has_record_widths(self) -> bool:
        """Whether this family knows the range of one record per entry."""
        return self._record_widths is not None

    def agent_counts(self, replica: int) -> np.ndarray:
        """(M,) rewards observed by each agent of ``replica`` so far (read-only)."""
        return self._agent_counts[replica]

    def arm_counts(self, replica: int) -> np.ndarray:
        """(M, K) rewards observed per agent and arm in ``replica`` (read-only); ValueError if not counted."""
        if self._arm_counts is None:
            raise ValueError("this environment does not count observed rewards per arm")
        return self._arm_counts[replica]

    def record_widths(self, replica: int) -> np.ndarray:
        """(M, K) width of one record's range per agent and entry (read-only); ValueError if not known."""
        if self._record_widths is None:
            raise ValueError("this environment does not know the range of one record per entry")
        return self._record_widths[replica]


class MessageHook(Protocol):
    """Transforms the agents' outgoing batches of a slot before the channel (DP noise, faults).

    A core gets an episode's hooks at reset (``core.reset(seeds, hooks=...)``; a wrapper chain hands its
    hooks down, see :meth:`fedbandit_envs.env_base.ProtocolParallelEnv.message_hooks`) and keeps them as
    ``core.message_hooks``. They run after the slot has been validated, in that order (the innermost
    wrapper's first); they may change payloads and remove rows, never add recipients. A batch is immutable:
    a hook returns new ones (``batch.with_payload(...)``, ``batch.take(rows)``).
    """

    def reset(self, context: AgentContext, streams: Sequence[SeedStreams]) -> None:
        """Start an episode (one SeedStreams per replica, e.g. for the ``dp`` stream)."""

    def __call__(self, slot: int, batches: list[MessageBatch]) -> list[MessageBatch]:
        """Return the batches to transmit."""

    # Optional: ``attach_records(records: ObservedRecords)``, called after ``reset`` with the env's
    # read-only count of each agent's observed rewards (see :func:`fedbandit_envs.core.reset_hooks`).
    # Optional: ``check(slot, batches)``: refuse (raise) what the hook would refuse in the batches as the learner
    # sent them, before any hook runs; called when hooks come before it (see apply_hooks).
    # Optional: ``check_replies(slot, replies)``: refuse (raise) what the hook would refuse in the hosted
    # coordinator's replies, which pass no hook (see :func:`fedbandit_envs.channel.routing.deliver`).
    # Optional: ``checkpoint() -> state`` and ``restore(state)``: a hook that keeps state across slots defines
    # both, so that when a later hook of the chain refuses the slot (raises), the hook's call is undone and the
    # refused step changes nothing (see :func:`fedbandit_envs.channel.routing.apply_hooks`). ``refuses_steps =
    # False`` (a class attribute) tells the chain that the hook never raises on the slot's messages, so hooks
    # before it need no checkpoint on its account; a hook without the attribute is assumed to refuse some.


def check_hooks(hooks: Sequence[Any]) -> tuple[MessageHook, ...]:
    """The ``hooks`` argument of a core's reset as a tuple; TypeError unless it is a sequence of message hooks."""
    if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Sequence):
        raise TypeError(f"hooks must be a list of message hooks (e.g. env.message_hooks()), got {hooks!r}")
    for hook in hooks:
        if not callable(hook) or not callable(getattr(hook, "reset", None)):
            raise TypeError(
                f"hooks must be message hooks (callable, with reset(context, streams)), got {type(hook).__name__}"
            )
    return tuple(hooks)


def start_episode(
    seeds: Sequence[SeedLike],
    hooks: Sequence[Any],
    what: str,
    memory_parts: Callable[[int], dict[str, float]] | None = None,
) -> tuple[tuple[MessageHook, ...], list[SeedStreams]]:
    """The checks every core's ``reset`` makes before any state changes, and one :class:`SeedStreams` per seed.

    Checks the hooks (:func:`check_hooks`), that there is a seed, and (with ``memory_parts(replicas)``)
    that ``len(seeds)`` replicas of ``what`` fit in memory; returns the hooks and the replicas' streams.

    ``hooks`` are the episode's message hooks (DP noise, faults) on the agents' outgoing messages, in order; a
    wrapped env's are ``env.message_hooks()``. The core keeps them as its ``message_hooks`` until the next reset.
    """
    hooks = check_hooks(hooks)
    if len(seeds) == 0:
        raise ValueError("reset needs at least one seed (one per replica)")
    if memory_parts is not None:
        check_memory(f"{len(seeds)} replicas of {what}", memory_parts(len(seeds)))
    return hooks, [SeedStreams.from_seed(s) for s in seeds]


def reset_hooks(
    hooks: tuple[MessageHook, ...], context: AgentContext, streams: Sequence[SeedStreams], records: ObservedRecords
) -> tuple[MessageHook, ...]:
    """Start an episode for each message hook, hand the hooks that ask for it the env's record counts; return them.

    ``hooks`` come from :func:`check_hooks`. A hook reads the counts through its optional
    ``attach_records(records)`` method (see :class:`ObservedRecords`); hooks without it are only reset.
    The tuple returned is the episode's ``message_hooks`` of the core.
    """
    for hook in hooks:
        hook.reset(context, streams)
        attach = getattr(hook, "attach_records", None)
        if attach is not None:
            attach(records)
    return hooks


class ChannelCore:
    """What every family's batched core shares: the horizon, the episode's channel side, and the route of a phase.

    A core sets ``channel`` (its :class:`~fedbandit_envs.channel.Channel`), ``horizon`` (T, the number of
    slots), ``slot`` (the next slot to play) and, when it hosts the population's server, ``coordinator``.
    Its ``reset`` checks its arguments (:func:`start_episode`), then builds the episode inside :meth:`resetting`
    (so that a reset that fails half way leaves the core refusing every step) and hands the episode's context and
    records to :meth:`open_episode`; its ``exchange`` routes a message-only phase with :meth:`route`.

    **No re-entry.** The learner's code runs inside the core's calls (the hosted server's ``reset`` in a reset, its
    ``step`` and ``observe_arrivals`` in a step, run through :meth:`resetting` and :meth:`host`); a step or reset it
    makes of the same core (or of the environment around it) would play a slot inside another. It is refused with a
    RuntimeError before it changes anything (:meth:`check_not_reentered`); the call it interrupts either goes on as
    usual (the learner's code caught the error) or fails as any failing server does (the error reaches it).
    """

    channel: Channel
    horizon: int
    slot: int
    #: The hosted server (``reset(context, rngs)``, ``step(slot, inbox) -> replies``), or None.
    coordinator: Any = None
    #: Why the episode cannot go on (a slot failed half played, or the last reset failed half way), or None.
    failed: str | None = None
    #: Whether an episode has been opened (``reset`` called at least once).
    started: bool = False
    #: Whether a reset, or the learner's code inside a step, is running (a step or reset now would re-enter the core).
    _busy: bool = False
    #: Where a family that takes no messages in its act phase takes them (e.g. ``"the report rounds"``), or None.
    messages_go_in: str | None = None

    def check_no_messages(self, action: Action) -> None:
        """Refuse messages attached to an act-phase action where the family takes them elsewhere (both run paths)."""
        if action.messages and self.messages_go_in is not None:
            raise ValueError(
                f"{type(self).__name__}: actions carry no messages in the act phase; send them in {self.messages_go_in}"
            )

    @property
    def done(self) -> bool:
        """Whether the horizon has been reached."""
        return self.slot >= self.horizon

    def check_not_reentered(self) -> None:
        """RuntimeError if the core is inside a reset, or inside the learner's code of a step (see the class doc)."""
        if self._busy:
            raise RuntimeError(REENTERED)

    def check_not_failed(self) -> None:
        """RuntimeError if a slot of the episode failed half played (until the next reset), or on a re-entrant step."""
        self.check_not_reentered()
        if self.failed is not None:
            raise RuntimeError(self.failed)

    def check_running(self) -> None:
        """RuntimeError unless a slot may be played: the horizon is not reached and no slot failed half played."""
        self.check_not_failed()
        if self.done:
            raise RuntimeError(HORIZON_REACHED)

    @contextmanager
    def resetting(self) -> Iterator[None]:
        """The part of a ``reset`` that replaces the episode's state: if it raises, the core refuses every step.

        A reset replaces the channel, the instances, the coordinator's and the hooks' state one after the other, so
        one that fails half way (the learner's server failing in its ``reset``, say) leaves an episode that is
        neither the old one nor the new one. Every step then raises a RuntimeError naming the failure until a reset
        succeeds (:meth:`open_episode` clears it), and so do the env's ``state`` and ``render`` (``started`` is
        False). A reset's checks (:func:`start_episode`) come before: a reset they refuse changes nothing, and so does
        one made from inside a step or reset of the core (a RuntimeError, see :meth:`check_not_reentered`); while this
        part runs, the core refuses any step or reset the same way.
        """
        self.check_not_reentered()
        self._busy = True
        try:
            yield
        except Exception as error:
            self.failed = f"the last reset failed: {type(error).__name__}: {error}; reset again to start an episode"
            self.started = False  # no episode to show either (the env's state and render refuse)
            raise
        finally:
            self._busy = False

    def host(self, slot: int, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``call(*args, **kwargs)``: the learner's code (the hosted server), run once ``slot`` has changed the episode.

        While it runs the core refuses any step or reset (:meth:`check_not_reentered`); if it raises, ``slot`` is
        left half played (:meth:`fail_slot`) and the error propagates.
        """
        busy, self._busy = self._busy, True  # busy already inside a reset (a linear server observing slot 0)
        try:
            return call(*args, **kwargs)
        except Exception as error:
            self.fail_slot(slot, error)
            raise
        finally:
            self._busy = busy

    def fail_slot(self, slot: int, error: Exception) -> None:
        """End the episode: the hosted server failed with ``error`` in ``slot``, which is left half played.

        What the slot did is already counted, so a retry would count it twice: every later step is refused (with
        :meth:`check_not_failed`'s RuntimeError) until the next reset. The caller re-raises ``error``.
        """
        self.failed = (
            f"slot {slot} failed half played ({type(error).__name__}: {error}); what it did is already counted, "
            "so this episode cannot go on: call reset() to start a new one"
        )

    def open_episode(
        self,
        context: AgentContext,
        streams: Sequence[SeedStreams],
        hooks: tuple[MessageHook, ...],
        records: ObservedRecords,
    ) -> None:
        """Reset the channel on the context's graphs, the hosted coordinator and the episode's message hooks.

        ``hooks`` come from :func:`start_episode`; they keep ``records`` (see :func:`reset_hooks`). Sets
        ``context``, ``records`` and ``message_hooks``, and clears ``failed`` (call it inside :meth:`resetting`).
        """
        self.channel.reset(context.topologies, [s.generator("channel") for s in streams])
        self.context = context
        self.failed = None
        self.started = True
        if self.coordinator is not None:
            self.coordinator.reset(context, [s.generator("coordinator") for s in streams])
        self.records = records
        self.message_hooks = reset_hooks(hooks, context, streams, records)

    def route(
        self, slot: int, messages: Sequence[MessageBatch], *, collect_due: bool = True, close: bool = True
    ) -> list[MessageBatch]:
        """Route the agents' batches of a phase costed under ``slot``; return the copies delivered to agents.

        Validates them, passes them through the message hooks, transmits them and runs the hosted coordinator
        (:mod:`fedbandit_envs.channel.routing`; ``collect_due`` and ``close`` as in its ``deliver``).
        """
        self.check_not_failed()
        prepared = prepare_outgoing(self.channel, messages, self.coordinator)
        prepared = apply_hooks(self.channel, self.message_hooks, slot, messages, prepared)
        return self.deliver(slot, prepared, collect_due=collect_due, close=close)

    def deliver(
        self, slot: int, prepared: list[MessageBatch], *, collect_due: bool = True, close: bool = True
    ) -> list[MessageBatch]:
        """:func:`~fedbandit_envs.channel.routing.deliver` on this core's channel and coordinator.

        Transmitting changes the episode, and the hosted coordinator (the learner's server) runs after that, so a
        failure here leaves the slot half played: the core then refuses every step until the next reset. This is
        :meth:`host` written out (every slot of every family comes here, and the call through it costs a tenth of a
        step on the MAB core's fast path).
        """
        busy, self._busy = self._busy, True
        try:
            return deliver(
                self.channel,
                self.coordinator,
                slot,
                prepared,
                collect_due=collect_due,
                close=close,
                hooks=self.message_hooks,
            )
        except Exception as error:
            self.fail_slot(slot, error)
            raise
        finally:
            self._busy = busy


def check_arm_array(arms: Any, shape: tuple[int, ...], axes: str, num_arms: int) -> np.ndarray:
    """A new int64 copy of ``arms``, checked to have ``shape`` (its ``axes`` named in the error) and arms in 0..K-1.

    Always the env's own array: the learner's server (a coordinator) runs inside the step and the feedback reports
    the arms pulled, so nothing the learner does to its array afterwards may reach them.
    """
    arms = check_arm_shape(arms, shape, axes)
    dtype = arms.dtype
    if dtype.kind not in "iu":
        raise TypeError(f"arms must be integers, got dtype {arms.dtype}")
    # int64 (the common case): one reduction, negatives seen as huge unsigned values
    if np.maximum.reduce(arms.view(_UINT64), None) >= num_arms if dtype == _INT64 else _outside(arms, num_arms):
        bad = arms[(arms < 0) | (arms >= num_arms)][0]
        raise ValueError(f"arm {bad} is out of range: arms are 0..{num_arms - 1}")
    return arms.astype(_INT64)


def check_arm_shape(arms: Any, shape: tuple[int, ...], axes: str, name: str = "arms") -> np.ndarray:
    """``arms`` as an array, checked to have ``shape`` (its ``axes`` and ``name`` in the error); values not read."""
    arms = np.asarray(arms)
    if arms.shape != shape:
        raise ValueError(f"{name} must have shape ({axes}) = {shape}, got {arms.shape}")
    return arms


def _outside(arms: np.ndarray, num_arms: int) -> bool:
    """Whether an integer array holds an arm outside ``0..num_arms - 1``."""
    return bool(arms.min() < 0 or arms.max() >= num_arms)


_INT64, _UINT64 = np.dtype(np.int64), np.dtype(np.uint64)


_T = TypeVar("_T")

#: The error of a step or reset made from inside a step or reset of the same environment (by the learner's code).
REENTERED = (
    "step() or reset() was called from inside a step or reset of the same environment (by the learner's code it "
    "runs, e.g. its hosted server): an environment plays one call at a time; return from the running one first"
)

#: Error texts of a step after the last slot: of an environment (its agents are gone) and of a core.
EPISODE_OVER = "the episode is over (or reset() was not called); call reset() first"
HORIZON_REACHED = "the horizon is reached; call reset() to start a new episode"

#: Exchanges one boundary may take (a peer hop and a server round trip need two; more means a loop).
MAX_BOUNDARY_EXCHANGES = 8


def checked_action(population: Any, action: Any) -> Action:
    """``action`` if ``population.act`` returned an :class:`Action`, else a TypeError that says so."""
    if not isinstance(action, Action):
        raise TypeError(
            f"{type(population).__name__}.act() must return fedbandit_envs.core.Action(arms, messages), "
            f"got {type(action).__name__}"
        )
    return action


def checked_batches(population: Any, phase: Phase, batches: Any) -> list[MessageBatch]:
    """The batches ``population.send(phase)`` returned, checked to be a list of :class:`MessageBatch`."""
    if not isinstance(batches, list | tuple) or not all(isinstance(b, MessageBatch) for b in batches):
        raise TypeError(
            f"{type(population).__name__}.send() must return a list of MessageBatch (empty when silent) "
            f"in the {phase.kind} phase after slot {phase.slot}, got {batches!r:.80}"
        )
    return list(check_batches(batches))  # a subclass's instance becomes the base class's checked copy


def message_phases(core: Any, population: Any, on_inbox: Callable[[list[MessageBatch]], None] | None = None) -> None:
    """Play the message-only phases that follow a slot's pulls (see :mod:`fedbandit_envs.protocol`).

    ``on_inbox`` (optional) sees every inbox delivered, e.g. a single-agent view reading its learner's mail.
    """
    phase = core.first_phase()
    while phase is not None:
        shown = phase.copy()  # the population's copy: what it does to it never reaches the core's
        batches = checked_batches(population, shown, population.send(shown))
        if batches or phase.required:
            inbox = core.exchange(phase, batches)
            if on_inbox is not None:
                on_inbox(inbox)
            population.receive(shown, inbox)
        phase = core.next_phase(phase, bool(batches))


def play_slot(core: Any, population: Any) -> None:
    """One slot on a batched core: act, play, observe, then the message-only phases.

    A core that may not play (:meth:`ChannelCore.check_running`: the horizon reached, a slot failed half played, the
    last reset failed) refuses before the population acts on a step of no episode.
    """
    core.check_running()
    feedback = core.play(checked_action(population, population.act(core.current_step())))
    population.observe(feedback)
    message_phases(core, population)


def reset_population(population: Any, context: AgentContext) -> None:
    """``population.reset(context)`` after checking the memory its ``memory_parts(context)`` declares.

    Raises :class:`~fedbandit_envs.validation.MemoryLimitError` (naming the population, the sizes and the fix)
    before anything is allocated. A population without ``memory_parts`` is reset unchecked.
    """
    declared = getattr(population, "memory_parts", None)
    if declared is not None:
        what = f"{type(population).__name__} ({context.num_replicas} replica(s) of {context.num_agents} agents)"
        check_memory(what, declared(context))
    population.reset(context)
