"""The per-agent PettingZoo view of the batched core: spaces, observations and actions.

An agent's observation is a dict:

* ``"phase"``: 0 in an act step, 1 in a message-only step (see :mod:`fedbandit_envs.env_base`);
* ``"slot"``: the index of the slot the agent is about to play (0 after reset, T at the end);
* ``"arm"``: the arm it pulled in the previous slot (-1 before the first pull);
* ``"reward"``: the reward of that pull (a 0-d float64 array; 0 before the first pull);
* ``"partner"``: its gossip partner in the coming slot (-1 for none);
* ``"inbox"``: the tuple of :class:`~fedbandit_envs.channel.Message` delivered to it in the step (with the
  environment option ``inbox="batches"``: a tuple of :class:`~fedbandit_envs.channel.MessageBatch`).

An action is an arm index, or ``{"arm": k, "messages": [...]}`` where the messages are :class:`Message` or
:class:`MessageBatch` objects (see :mod:`fedbandit_envs.env_base`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from fedbandit_envs.channel.messages import (
    Message,
    MessageBatch,
    as_checked,
    batches_from_messages,
    copies_by_recipient,
)
from fedbandit_envs.core import Feedback
from fedbandit_envs.validation import check_choice, check_int

#: The forms an inbox is delivered in: :class:`Message` objects or :class:`MessageBatch` objects.
InboxForm = Literal["messages", "batches"]
INBOX_FORMS: tuple[str, ...] = ("messages", "batches")

#: What a :class:`MessageSequence` of each form holds.
_ITEM_TYPES: dict[str, tuple[type, ...]] = {
    "messages": (Message,),
    "batches": (MessageBatch,),
    "any": (Message, MessageBatch),
}


class MessageSequence(spaces.Space):
    """A variable-length tuple of messages (an inbox or an outbox). Samples are empty.

    Args:
        form: what the items are: ``"messages"`` (:class:`Message`, the default), ``"batches"``
            (:class:`MessageBatch`) or ``"any"`` (either; what an action's ``"messages"`` may hold).
    """

    def __init__(self, form: str = "messages", seed: int | None = None) -> None:
        self.form = check_choice("form", form, tuple(_ITEM_TYPES))
        self._types = _ITEM_TYPES[self.form]
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Messages have no fixed-size flat form."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> tuple[Message, ...]:
        """The empty sequence (random messages would be meaningless)."""
        return ()

    def contains(self, x: Any) -> bool:
        """A tuple or list of items of the space's form."""
        return isinstance(x, tuple | list) and all(isinstance(m, self._types) for m in x)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageSequence) and other.form == self.form

    def __repr__(self) -> str:
        return "MessageSequence()" if self.form == "messages" else f"MessageSequence({self.form!r})"


#: The action space entry of an agent's outgoing messages (Message or MessageBatch objects).
OUTBOX = MessageSequence("any")


def check_inbox_form(inbox: Any) -> InboxForm:
    """The environment option ``inbox``: ``"messages"`` or ``"batches"``; ValueError naming the choices otherwise."""
    return "batches" if check_choice("inbox", inbox, INBOX_FORMS) == "batches" else "messages"


def observation_space(
    num_agents: int,
    num_arms: int,
    horizon: int,
    reward_bounds: tuple[float, float],
    inbox: InboxForm = "messages",
) -> spaces.Dict:
    """The observation space of one agent (``inbox``: the form of its inbox)."""
    low, high = reward_bounds
    return spaces.Dict(
        {
            "phase": spaces.Discrete(2),
            "slot": spaces.Discrete(horizon + 1),
            "arm": spaces.Discrete(num_arms + 1, start=-1),
            "reward": spaces.Box(min(low, 0.0), max(high, 0.0), shape=(), dtype=np.float64),
            "partner": spaces.Discrete(num_agents + 1, start=-1),
            "inbox": MessageSequence(inbox),
        }
    )


def action_space(num_arms: int) -> spaces.Dict:
    """The action space of one agent (a bare arm index is accepted too)."""
    return spaces.Dict({"arm": spaces.Discrete(num_arms), "messages": OUTBOX})


def inboxes_by_agent(
    batches: Sequence[MessageBatch], num_agents: int, replica: int, form: InboxForm = "messages"
) -> list[list[Any]]:
    """The copies of ``replica`` delivered to each agent, in delivery order.

    :class:`Message` objects, or with ``form="batches"`` one :class:`MessageBatch` per delivered batch that
    holds rows for the agent (as replica 0). What an agent receives holds its own rows alone
    (:func:`~fedbandit_envs.channel.messages.copies_by_recipient`): nothing reachable from it leads to a copy
    delivered to another agent or replica.
    """
    inboxes: list[list[Any]] = [[] for _ in range(num_agents)]
    for batch in batches:
        for recipient, received in copies_by_recipient(batch, replica):
            if form == "batches":
                inboxes[recipient].append(received)
            else:
                inboxes[recipient].extend(received.messages())
    return inboxes


#: One agent's part of an observation that only a pull changes: (arm, reward, partner).
PullFields = tuple[int, np.ndarray, int]


#: A float64's native bytes, as numpy holds it.
_FLOAT64_BYTES = struct.Struct("=d")
_FLOAT64 = np.dtype(np.float64)


def pull_fields(feedback: Feedback, replica: int = 0) -> list[PullFields]:
    """Every agent's (arm, reward, partner) of ``replica`` after ``feedback``, in agent order.

    Each reward is an immutable 0-d array over a ``bytes`` object holding that reward alone: no agent can change
    another agent's observation through it, or read another agent's reward (``.base``). A message-only step repeats
    these fields with its own inbox.
    """
    pack = _FLOAT64_BYTES.pack
    rewards = [np.ndarray((), _FLOAT64, pack(reward)) for reward in feedback.rewards[replica].tolist()]
    return list(zip(feedback.arms[replica].tolist(), rewards, feedback.partners[replica].tolist()))


def agent_observations(
    feedback: Feedback,
    next_slot: int,
    phase: int = 0,
    replica: int = 0,
    inbox: InboxForm = "messages",
    fields: Sequence[PullFields] | None = None,
) -> list[dict[str, Any]]:
    """One observation dict per agent of ``replica`` after ``feedback`` (see the module docstring).

    ``inbox``: the form of the inboxes, :class:`Message` objects or :class:`MessageBatch` objects.
    ``fields``: the agents' :func:`pull_fields` of ``feedback`` when the caller holds them already.
    """
    if fields is None:
        fields = pull_fields(feedback, replica)
    if feedback.inbox:
        inboxes = [tuple(items) for items in inboxes_by_agent(feedback.inbox, len(fields), replica, inbox)]
    else:
        inboxes = [()] * len(fields)
    return [
        {"phase": phase, "slot": next_slot, "arm": arm, "reward": reward, "partner": partner, "inbox": received}
        for (arm, reward, partner), received in zip(fields, inboxes)
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


def split_action(action: int | Mapping[str, Any]) -> tuple[int, list[Message | MessageBatch]]:
    """Split an agent action (an arm, or ``{"arm": k, "messages": [...]}``) into arm and messages.

    The messages are :class:`Message` or :class:`MessageBatch` objects (checked here; their senders are
    checked by the environment, which knows the agent).
    """
    if isinstance(action, Mapping):
        unknown = set(action) - {"arm", "messages"}
        if unknown or "arm" not in action:
            raise ValueError(f"an action dict needs the key 'arm' and optionally 'messages'; got keys {sorted(action)}")
        return _as_arm(action["arm"]), outgoing_items(action.get("messages", ()))
    return _as_arm(action), []


def check_senders(agent: str, index: int, sent: list[Message | MessageBatch]) -> list[Message | MessageBatch]:
    """``sent`` once ``agent`` (agent ``index``) is the sender of every row; a batch's rows must be of replica 0.

    ValueError naming the agent, the message and the row otherwise: an agent may only send as itself.
    """
    for item in sent:
        if isinstance(item, Message):
            if item.sender != index:
                raise ValueError(
                    f"{agent} sent a message with sender={item.sender}; an agent may only send as itself ({index})"
                )
        elif len(item) == 1 and item.sender[0] == index and item.replica[0] == 0:
            continue  # the common sub-batch of one valid row, checked without array operations
        elif len(item):
            spoofed = item.sender != index
            if spoofed.any():
                row = int(spoofed.argmax())
                raise ValueError(
                    f"{agent} sent a MessageBatch({item.kind!r}) whose row {row} has sender={item.sender[row]}; "
                    f"an agent may only send as itself: every row's sender must be {index}"
                )
            if item.replica.any():
                row = int(item.replica.argmax())
                raise ValueError(
                    f"{agent} sent a MessageBatch({item.kind!r}) whose row {row} has replica={item.replica[row]}; "
                    "an agent's environment runs one replica: every row's replica must be 0"
                )
    return sent


def outgoing_items(messages: Any) -> list[Message | MessageBatch]:
    """An action's ``"messages"`` entry as a list; TypeError unless it holds Message and MessageBatch objects."""
    if isinstance(messages, Message | MessageBatch):
        raise TypeError(
            f"action['messages'] must be a list of messages, got one {type(messages).__name__}; wrap it in [...]"
        )
    if not isinstance(messages, list | tuple):
        raise TypeError(
            f"action['messages'] must be a list of Message (or MessageBatch) objects, got {type(messages).__name__}"
        )
    items = list(messages)
    for index, item in enumerate(items):
        if type(item) is Message or type(item) is MessageBatch:
            continue
        if not isinstance(item, Message | MessageBatch):
            raise TypeError(
                f"action['messages'] must hold Message objects (or MessageBatch objects), got {type(item).__name__}"
            )
        items[index] = as_checked(item)  # a subclass's instance: the base class's checked copy
    return items


def _as_arm(arm: Any) -> int:
    """An arm index as an int: Python or numpy integers (0-d arrays too) up to int64; never bool or float.

    The range is checked by the core, which knows K.
    """
    return check_int("an arm", arm)
