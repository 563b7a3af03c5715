"""What every family's PettingZoo environment shares: message-only steps and the protocol translation.

A slot is an **act step** followed by the **message-only steps** the core schedules (boundary hops,
report rounds; see :class:`~fedbandit_envs.core.Phase`). Every observation has a ``"phase"`` field
(0: act step, 1: message-only step) and an ``"inbox"``; in a message-only step an agent's action is
``{"messages": [...]}`` (the family's action entry, :attr:`ProtocolParallelEnv.action_key`, or a bare
action is ignored) and agents with nothing to send may be left out. :attr:`ProtocolParallelEnv.pending_phase`
is the :class:`~fedbandit_envs.core.Phase` the next step plays (None: an act step).

**Array messages.** An agent's ``"messages"`` may hold :class:`~fedbandit_envs.channel.Message` objects,
:class:`~fedbandit_envs.channel.MessageBatch` objects (many messages as arrays; every row's sender must be
the agent and its replica 0), or both. The environment checks the senders, then groups the step's items by
kind and payload layout into batches in agent order (:func:`~fedbandit_envs.channel.batches_from_messages`),
so a batch and the same rows sent as single messages are routed, costed, delayed, dropped and privatized
identically. Payloads were checked when each message was built (numeric, finite, declared privacy fields);
recipients are checked against the topology when the step is routed.

**Inbox form.** Every family environment takes ``inbox="messages"`` (the default: the ``"inbox"`` observation
is a tuple of ``Message``) or ``inbox="batches"`` (a tuple of ``MessageBatch``: per delivered batch, the rows
addressed to the agent, in delivery order; replica 0). :attr:`ProtocolParallelEnv.inbox_form` holds it and
the observation space's ``"inbox"`` entry (a :class:`~fedbandit_envs.observations.MessageSequence`) says which.

Wrappers decorate: :meth:`ProtocolParallelEnv.message_hooks` is the wrapper chain's list of message hooks
(none here), and a wrapper hands its chain's hooks to the env in ``reset(options={MESSAGE_HOOKS: hooks})``.
The env gives them to its core for that episode only, so wrapping never changes the wrapped env.

The translation methods (``step_from``, ``actions_from``, ``feedback_from``, ``message_actions``,
``inbox_from``) convert between the observations and the population protocol's arrays, so the run loop
drives any family's environment through ``step()`` alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fedbandit_envs.channel import Ledger, Message, MessageBatch, batches_from_messages
from fedbandit_envs.channel.messages import batches_by_key
from fedbandit_envs.core import EPISODE_OVER, AgentContext, MessageHook, Phase, Step
from fedbandit_envs.observations import InboxForm, check_senders, outgoing_items
from fedbandit_envs.rendering import warn_no_render_mode
from fedbandit_envs.seeding import EpisodeSeeds

__all__ = ["ACT", "MESSAGE", "MESSAGE_HOOKS", "ProtocolParallelEnv", "population_env_kwargs"]

#: Values of an observation's ``"phase"`` field.
ACT, MESSAGE = 0, 1

#: The ``reset(options=...)`` key of the episode's message hooks (handed down by a wrapper chain).
MESSAGE_HOOKS = "message_hooks"


def population_env_kwargs(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords of an environment a population drives: ``inbox="batches"`` unless ``env_kwargs`` sets it.

    A population reads its inbox as batches, so the run loop's PettingZoo path asks for that form (a family's
    builder applies this).
    """
    return {"inbox": "batches", **env_kwargs}


class ProtocolParallelEnv(ParallelEnv):
    """A ParallelEnv whose slots are an act step and the message-only steps its core schedules.

    A family's environment sets ``core`` (its batched core, B = 1), ``render_mode``, ``_index`` (agent name ->
    index), ``_episode_seeds`` (an :class:`~fedbandit_envs.seeding.EpisodeSeeds`), and the spaces of every
    agent in ``_observation_spaces`` and ``_action_spaces``, and defines :meth:`summary`.
    """

    #: The message-only phase the next step plays; None when the next step is an act step.
    pending_phase: Phase | None = None

    #: The key of an action dict that holds what an agent plays (ignored in message-only steps).
    action_key: str = "arm"

    #: The form of the ``"inbox"`` observations: ``"messages"`` or ``"batches"`` (the ``inbox`` option).
    inbox_form: InboxForm = "messages"

    core: Any
    render_mode: str | None
    _index: dict[str, int]
    _episode_seeds: EpisodeSeeds
    _observation_spaces: dict[str, spaces.Space]
    _action_spaces: dict[str, spaces.Space]

    def observation_space(self, agent: str) -> spaces.Space:
        """The observation space of ``agent`` (the same object on every call)."""
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        """The action space of ``agent`` (the same object on every call)."""
        return self._action_spaces[agent]

    @property
    def ledger(self) -> Ledger:
        """The communication ledger of the current episode (hidden from the agents; for evaluation)."""
        return self.core.channel.ledger

    @property
    def context(self) -> AgentContext:
        """The public facts an algorithm gets at reset (the family's context)."""
        return self.core.context

    #: How :meth:`summary` names the clock ("slot", or "round" where a family's papers speak of rounds).
    summary_clock = "slot"
    #: How :meth:`summary` names the summed regret of the agents.
    summary_regret = "group pseudo-regret"

    def summary(self) -> str:
        """A one-line text summary of the episode (what ``render()`` shows in ``"ansi"`` mode).

        The clock, the agents' summed regret, the family's own figures (:meth:`summary_extras`), then the messages
        and the cost the ledger has recorded.
        """
        self.check_started()
        core, totals = self.core, self.ledger.totals()
        return "  ".join(
            (
                f"{self.summary_clock} {core.slot}/{core.horizon}",
                f"{self.summary_regret} {core.regret[0].sum():.2f}",
                *self.summary_extras(),
                f"messages {totals['messages']}",
                f"cost {totals['cost']:.2f}",
            )
        )

    def summary_extras(self) -> tuple[str, ...]:
        """The family's own figures in :meth:`summary` (none by default)."""
        return ()

    def check_started(self) -> None:
        """RuntimeError before the first ``reset()`` or after one that failed half way (no episode to show)."""
        if not self.core.started:
            raise RuntimeError(self.core.failed or "call reset() first")

    def render(self) -> str | None:
        """The one-line summary (``render_mode="ansi"``); None in any other mode (without one, with a warning)."""
        if self.render_mode is None:
            warn_no_render_mode(type(self).__name__)
        return self.summary() if self.render_mode == "ansi" else None

    def close(self) -> None:
        """Nothing to release."""

    def message_hooks(self) -> list[MessageHook]:
        """The message hooks of the wrapper chain that ends here: none for an unwrapped environment.

        A wrapper returns its env's hooks followed by its own (the innermost runs first) and passes them
        to ``reset`` in ``options[MESSAGE_HOOKS]``; the batched run path resets the core with them.
        """
        return []

    @staticmethod
    def hooks_from(options: Mapping[str, Any] | None) -> Sequence[MessageHook]:
        """The message hooks of an episode, from ``reset``'s ``options`` (none unless a wrapper passed them)."""
        if options is None:
            return ()
        if not isinstance(options, Mapping):
            raise TypeError(f"options must be a dict or None, got {type(options).__name__}")
        return options.get(MESSAGE_HOOKS, ())

    def reset_core(self, seed: int | None, options: Mapping[str, Any] | None) -> Any:
        """Start the core's episode (B = 1) and make every agent live with an act step pending.

        ``seed`` fixes every random stream (None continues the seed sequence); the message hooks come from
        ``options`` (:meth:`hooks_from`). Returns what the core's ``reset`` returns. A reset made from inside a step
        or reset of this env (by the learner's code it runs) is refused before anything changes, the seed sequence
        too (see :class:`~fedbandit_envs.core.ChannelCore`).
        """
        self.core.check_not_reentered()
        start = self.core.reset([self._episode_seeds.next(seed)], hooks=self.hooks_from(options))
        self.agents = list(self.possible_agents)
        self.pending_phase = None
        return start

    def require_live(self, actions: Any) -> None:
        """Check a step may be played: RuntimeError outside an episode, TypeError unless ``actions`` is a mapping.

        An episode runs from ``reset`` to the horizon, unless a slot fails half played or a reset fails half way
        (the core's ``failed``: its RuntimeError names the failure); a step made from inside a step or reset of this
        env is refused too (the core's ``check_not_failed``). ``actions`` maps agent names to actions, as a
        ParallelEnv's ``step`` takes.
        """
        self.core.check_not_failed()
        if not self.agents:
            raise RuntimeError(EPISODE_OVER)
        if not isinstance(actions, Mapping):
            raise TypeError(
                f"step() takes a dict of agent name to action (e.g. {{{self.agents[0]!r}: ...}}), "
                f"got {type(actions).__name__}"
            )

    def check_action_agents(self, actions: Mapping[str, Any]) -> None:
        """ValueError unless ``actions`` of an act step has one entry per live agent and no other."""
        missing = [a for a in self.agents if a not in actions]
        unknown = [a for a in actions if a not in self._index]
        if missing or unknown:
            raise ValueError(
                f"actions must have one entry per live agent; missing {missing[:5]}, unknown {unknown[:5]}"
            )

    def step_result(
        self, observations: dict, rewards: dict, infos: dict, truncated: bool
    ) -> tuple[dict, dict, dict, dict, dict]:
        """The return of ``step`` (nothing terminates; the horizon truncates, and then no agent is left live)."""
        terminations = dict.fromkeys(self.agents, False)
        truncations = dict.fromkeys(self.agents, truncated)
        if truncated:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    @property
    def phase_flag(self) -> int:
        """The ``"phase"`` observation field of the next step: :data:`ACT` or :data:`MESSAGE`."""
        return ACT if self.pending_phase is None else MESSAGE

    def own_messages(self, agent: str, sent: list[Message | MessageBatch]) -> list[Message | MessageBatch]:
        """``sent`` (from :func:`~fedbandit_envs.observations.outgoing_items`), checked: ``agent`` sends every row.

        See :func:`~fedbandit_envs.observations.check_senders`.
        """
        return check_senders(agent, self._index[agent], sent)

    def check_action_keys(self, agent: str, action: Mapping[str, Any], expected: str) -> None:
        """ValueError if the action dict of ``agent`` has keys other than :attr:`action_key` and ``"messages"``.

        ``expected`` ends the error: the form the step takes.
        """
        extra = set(action) - {self.action_key, "messages"}
        if extra:
            raise ValueError(f"the action of {agent} has unknown keys {sorted(extra)}; {expected}")

    def refuse_act_messages(self, actions: Mapping[str, Any]) -> None:
        """Check an act step that carries no messages (linear, procurement): no action sends any, whoever gives it.

        Every action dict, an idle agent's too, may only hold :attr:`action_key` and an empty ``"messages"`` list
        (ValueError otherwise, TypeError for a ``"messages"`` entry that is not a list of messages); messages go in
        the report step that follows. Call it before the step changes anything.
        """
        for agent, action in actions.items():
            if not isinstance(action, Mapping):
                continue
            self.check_action_keys(agent, action, f"an act step takes {{{self.action_key!r}: ..., 'messages': []}}")
            if outgoing_items(action.get("messages", ())):
                raise ValueError(
                    f"{agent} sent messages in the act step; send them in the report step that follows "
                    "(obs['phase'] == 1)"
                )

    def phase_messages(self, actions: Mapping[str, Any]) -> list[MessageBatch]:
        """The batches of a message-only step: every agent's ``"messages"`` (anything else is ignored)."""
        unknown = [a for a in actions if a not in self._index]
        if unknown:
            raise ValueError(f"unknown agents in actions: {unknown[:5]}; use the names in env.agents")
        messages: list[Message | MessageBatch] = []
        for agent, action in actions.items():
            if not isinstance(action, Mapping):
                continue  # a bare arm or units vector: nothing to send
            self.check_action_keys(agent, action, "send {'messages': [...]}")
            messages.extend(self.own_messages(agent, outgoing_items(action.get("messages", ()))))
        return batches_from_messages(messages) if messages else []

    def play_phase(self, actions: Mapping[str, Any]) -> list[MessageBatch]:
        """Play the pending message-only phase with ``actions``; returns the delivered copies."""
        phase = self.pending_phase
        if phase is None:
            raise RuntimeError("no message-only phase is pending (obs['phase'] is 0): play an act step")
        batches = self.phase_messages(actions)
        inbox = self.core.exchange(phase, batches) if batches or phase.required else []
        self.pending_phase = self.core.next_phase(phase, bool(batches))
        return inbox

    # ------------------------------------------------------------------ protocol translation
    def phase_from(self, step: Step, observations: Mapping[str, Mapping[str, Any]]) -> Phase | None:
        """The pending message-only phase as the population sees it after acting in ``step`` (None: act).

        A copy: the env goes on reading its own ``pending_phase``, whatever the population does to this one.
        """
        return None if self.pending_phase is None else self.pending_phase.copy()

    def agent_rows(self, values: Mapping[str, Any], key: str | None = None) -> np.ndarray:
        """A (1, M, ...) array of every agent's entry of ``values`` (or of its ``key`` field), in agent order.

        For ``feedback_from``: e.g. ``agent_rows(rewards)`` or ``agent_rows(observations, "arm")``.
        """
        return np.stack([values[a] if key is None else values[a][key] for a in self.possible_agents])[None]

    def message_actions(self, batches: Sequence[MessageBatch]) -> dict[str, Any]:
        """The action dict of a message-only step sending ``batches`` (replica 0), in agent order.

        Each sender's rows go as array messages: per batch, the sub-batch of its rows (slices when the batch's
        senders are sorted, no copy).
        """
        names = self.possible_agents
        return {names[sender]: {"messages": sent} for sender, sent in batches_by_key(batches, "sender").items()}

    def inbox_from(self, observations: Mapping[str, Mapping[str, Any]]) -> list[MessageBatch]:
        """Every copy delivered in a step, as batches (agents in order; either inbox form)."""
        delivered = [m for a in self.possible_agents if a in observations for m in observations[a]["inbox"]]
        return batches_from_messages(delivered) if delivered else []
