"""The route of a step's messages, shared by every family's core: validate, hooks, channel, coordinator.

A core routes the agents' batches of a step (or of a message-only phase) in three calls, so that
everything is validated before any state changes:

1. :func:`prepare_outgoing` checks the batches (types, senders, links; a message to ``SERVER`` needs a
   hosted coordinator) and expands ``NEIGHBOURS``;
2. :func:`apply_hooks` passes them through the episode's message hooks (DP noise, faults) and validates
   what the hooks return;
3. :func:`deliver` transmits them (ledger, drops, delays), hands the copies that reached the server to the
   coordinator, transmits its replies, and returns the copies delivered to agents.

The coordinator's replies pass no message hook (they are not noised, charged, dropped or delayed by a wrapper); a
hook with a ``check_replies(slot, replies)`` method (a DP wrapper's) checks them before they are sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedbandit_envs.channel.channel import Channel
from fedbandit_envs.channel.messages import MessageBatch, as_checked
from fedbandit_envs.topology import SERVER

__all__ = ["UNHOSTED_SERVER", "apply_hooks", "check_batches", "deliver", "prepare_outgoing"]

#: The error of a message to ``SERVER`` when no coordinator is hosted.
UNHOSTED_SERVER = "a message was sent to SERVER but no coordinator is hosted; pass coordinator=..."


def check_batches(messages: Sequence[Any]) -> Sequence[MessageBatch]:
    """``messages`` as exact :class:`MessageBatch` objects, else a TypeError that says how to convert.

    An instance of a subclass is replaced by the base class's checked copy (:func:`as_checked`); ``messages`` is
    returned as it is when every item is exactly a :class:`MessageBatch` (the common case).
    """
    for batch in messages:
        if type(batch) is not MessageBatch:
            break
    else:
        return messages
    for batch in messages:
        if not isinstance(batch, MessageBatch):
            raise TypeError(
                f"messages must be MessageBatch objects, got {type(batch).__name__}; convert Message objects "
                "with fedbandit_envs.channel.batches_from_messages"
            )
    return [as_checked(batch) for batch in messages]


def prepare_outgoing(
    channel: Channel, messages: Sequence[Any], coordinator: Any, slot: int | None = None
) -> list[MessageBatch]:
    """The agents' batches validated and expanded; nothing changes state (see the module docstring).

    ``slot``: the slot they are to be sent in, if known (they come stamped with it: see :meth:`Channel.prepare`).
    """
    messages = check_batches(messages)
    if not messages:
        return []
    prepared = channel.prepare(messages, from_agents=True, slot=slot)  # a SERVER sender is refused first
    # prepared copies follow links, so only a server with links can be a recipient (SERVER: the only negative id)
    if coordinator is None and channel.server_linked and any(b.recipient.min() == SERVER for b in prepared):
        raise ValueError(UNHOSTED_SERVER)
    return prepared


def apply_hooks(
    channel: Channel,
    hooks: Sequence[Any],
    slot: int,
    messages: Sequence[MessageBatch],
    prepared: list[MessageBatch],
) -> list[MessageBatch]:
    """The prepared batches after the episode's message hooks, in order (validated again: hooks may remove rows).

    Atomic: when a hook refuses the slot (raises), every hook before it that can (``checkpoint`` and ``restore``,
    see :class:`~fedbandit_envs.core.MessageHook`) is put back as it was, so a refused step changes nothing. Only
    hooks followed by one that may refuse (``refuses_steps``, True unless a hook says otherwise) are checkpointed.
    A hook after the first with a ``check(slot, batches)`` method (a DP wrapper's) first checks the batches as the
    learner sent them, so that a fault before it (a drop) cannot let an invalid message through at random.
    """
    if not hooks:
        return prepared
    outgoing = [b for b in messages if len(b)]
    for hook in hooks[1:]:  # what a learner sent is checked as sent, whatever the hooks before it do to it
        check = getattr(hook, "check", None)
        if check is not None:
            check(slot, outgoing)
    last_refusing = max((i for i, hook in enumerate(hooks) if getattr(hook, "refuses_steps", True)), default=0)
    saved = [(hook, hook.checkpoint()) for hook in hooks[:last_refusing] if hasattr(hook, "checkpoint")]
    try:
        for hook in hooks:
            outgoing = hook(slot, outgoing)
        return channel.prepare(outgoing) if outgoing else []
    except BaseException:
        for hook, state in saved:
            hook.restore(state)
        raise


def deliver(
    channel: Channel,
    coordinator: Any,
    slot: int,
    prepared: list[MessageBatch],
    *,
    collect_due: bool = True,
    close: bool = True,
    hooks: Sequence[Any] = (),
) -> list[MessageBatch]:
    """Transmit ``prepared`` in ``slot``, run the coordinator on what reached the server, return the agents' copies.

    Args:
        channel: the core's channel.
        coordinator: the hosted server (``step(slot, inbox) -> replies``), or None.
        slot: the slot the messages are costed under.
        prepared: the batches from :func:`apply_hooks`.
        collect_due: also deliver the copies that were delayed until ``slot`` (once per slot).
        close: close the slot in the ledger (the last routing of the slot).
        hooks: the episode's message hooks; those with a ``check_replies(slot, replies)`` method check the
            coordinator's replies before they are sent (nothing else of a hook runs on them).
    """
    if not prepared and coordinator is None and not channel.in_flight:  # nothing sent, nothing due, no server
        if close:
            channel.close_slot()
        return []
    arrived = channel.transmit(slot, prepared)
    if collect_due and channel.in_flight:  # (transmitting delays copies to later slots only)
        arrived = channel.due(slot) + arrived
    to_server, inbox = [], []
    for batch in arrived:
        to_server_rows = channel.copies_to_server(batch)
        if to_server_rows == len(batch.sender):
            to_server.append(batch)
        elif to_server_rows == 0:
            inbox.append(batch)
        else:
            server_rows = batch.recipient == SERVER
            to_server.append(batch.take(server_rows))
            inbox.append(batch.take(~server_rows))
    if coordinator is not None:
        replies = coordinator.step(slot, [b for b in to_server if len(b.sender)])
        if not isinstance(replies, (list, tuple)):
            raise TypeError(
                f"{type(coordinator).__name__}.step must return a list of MessageBatch replies (sender SERVER), "
                f"got {type(replies).__name__}"
            )
        replies = check_batches(replies)
        for hook in hooks:
            check_replies = getattr(hook, "check_replies", None)
            if check_replies is not None:
                check_replies(slot, replies)
        inbox += channel.transmit(slot, channel.prepare(replies, from_server=True, slot=slot))
    if close:
        channel.close_slot()
    return [b for b in inbox if len(b.sender)]
