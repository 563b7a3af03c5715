"""The per-agent PettingZoo view of the batched core: spaces, observations and actions.

An agent's observation is a dict:

* ``"phase"``: 0 in an act step, 1 in a message-only step (see :mod:`fedbandit_envs.env_base`);
* ``"slot"``: the index of the slot the agent is about to play (0 after reset, T at the end);
* ``"arm"``: the arm it pulled in the previous slot (-1 before the first pull);
* ``"reward"``: the reward of that pull (a 0-d float64 array; 0 before the first pull);
* ``"partner"``: its gossip partner in the coming slot (-1 for none);
* ``"inbox"``: the tuple of :class:`~fedbandit_envs.channel.Message` delivered to it in the step.

An action is an arm index, or ``{"arm": k, "messages": [Message, ...]}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_envs.channel.messages import Message, MessageBatch, batches_from_messages
from fedbandit_envs.core import Feedback
from fedbandit_envs.validation import check_int


class MessageSequence(spaces.Space):
    """A variable-length tuple of :class:`Message` (an inbox or an outbox). Samples are empty."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Messages have no fixed-size flat form."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> tuple[Message, ...]:
        """The empty sequence (random messages would be meaningless)."""
        return ()

    def contains(self, x: Any) -> bool:
        """A tuple or list of Message objects."""
        return isinstance(x, tuple | list) and all(isinstance(m, Message) for m in x)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageSequence)

    def __repr__(self) -> str:
        return "MessageSequence()"


def observation_space(num_agents: int, num_arms: int, horizon: int, reward_bounds: tuple[float, float]) -> spaces.Dict:
    """The observation space of one agent."""
    low, high = reward_bounds
    return spaces.Dict(
        {
            "phase": spaces.Discrete(2),
            "slot": spaces.Discrete(horizon + 1),
            "arm": spaces.Discrete(num_arms + 1, start=-1),
            "reward": spaces.Box(min(low, 0.0), max(high, 0.0), shape=(), dtype=np.float64),
            "partner": spaces.Discrete(num_agents + 1, start=-1),
            "inbox": MessageSequence(),
        }
    )


def action_space(num_arms: int) -> spaces.Dict:
    """The action space of one agent (a bare arm index is accepted too)."""
    return spaces.Dict({"arm": spaces.Discrete(num_arms), "messages": MessageSequence()})


def inboxes_by_agent(batches: Sequence[MessageBatch], num_agents: int, replica: int) -> list[list[Message]]:
    """The messages of ``replica`` delivered to each agent, as :class:`Message` lists in delivery order."""
    inboxes: list[list[Message]] = [[] for _ in range(num_agents)]
    for batch in batches:
        rows = np.flatnonzero(batch.replica == replica)
        for r in rows.tolist():
            inboxes[int(batch.recipient[r])].append(batch.message(r))
    return inboxes


def messages_by_sender(batches: Sequence[MessageBatch]) -> dict[int, list[Message]]:
    """The rows of batches (one replica) as :class:`Message` lists keyed by sender, in send order."""
    outgoing: dict[int, list[Message]] = {}
    for batch in batches:
        for message in batch.messages():
            outgoing.setdefault(message.sender, []).append(message)
    return outgoing


def agent_observations(feedback: Feedback, next_slot: int, phase: int = 0, replica: int = 0) -> list[dict[str, Any]]:
    """One observation dict per agent of ``replica`` after ``feedback`` (see the module docstring)."""
    arms = feedback.arms[replica].tolist()
    rewards = np.array(feedback.rewards[replica], dtype=np.float64)
    partners = feedback.partners[replica].tolist()
    if feedback.inbox:
        inboxes = [tuple(inbox) for inbox in inboxes_by_agent(feedback.inbox, len(arms), replica)]
    else:
        inboxes = [()] * len(arms)
    return [
        {"phase": phase, "slot": next_slot, "arm": arm, "reward": rewards[i, ...], "partner": partner, "inbox": inbox}
        for i, (arm, partner, inbox) in enumerate(zip(arms, partners, inboxes))
    ]


def feedback_from_observations(observations: Sequence[Mapping[str, Any]]) -> Feedback:
    """Rebuild the (B = 1) :class:`Feedback` of a step from the agents' observations, in agent order."""
    n = len(observations)
    arms = np.fromiter(map(itemgetter("arm"), observations), np.int64, n)[None, :]
    rewards = np.fromiter(map(itemgetter("reward"), observations), np.float64, n)[None, :]
    partners = np.fromiter(map(itemgetter("partner"), observations), np.int64, n)[None, :]
    messages = [m for o in observations for m in o["inbox"]]
    inbox = batches_from_messages(messages) if messages else []
    return Feedback(int(observations[0]["slot"]) - 1, arms, rewards, inbox, partners)


def split_action(action: int | Mapping[str, Any]) -> tuple[int, list[Message]]:
    """Split an agent action (an arm, or ``{"arm": k, "messages": [...]}``) into arm and messages."""
    if isinstance(action, Mapping):
        unknown = set(action) - {"arm", "messages"}
        if unknown or "arm" not in action:
            raise ValueError(f"an action dict needs the key 'arm' and optionally 'messages'; got keys {sorted(action)}")
        messages = list(action.get("messages", ()))
        for message in messages:
            if not isinstance(message, Message):
                raise TypeError(f"action['messages'] must hold Message objects, got {type(message).__name__}")
        return _as_arm(action["arm"]), messages
    return _as_arm(action), []


def _as_arm(arm: Any) -> int:
    """An arm index as an int: Python or numpy integers (0-d arrays too) up to int64; never bool or float.

    The range is checked by the core, which knows K.
    """
    return check_int("an arm", arm)
