"""Communication channel with cost accounting: messages, routing, latency, drops, gossip, ledger."""

from fedbandit_envs.channel.channel import GOSSIP_ACTIVATIONS, Channel, ChannelConfig
from fedbandit_envs.channel.ledger import DIRECTIONS, LINK_ACCOUNTING_MODES, CostModel, Ledger
from fedbandit_envs.channel.messages import NEIGHBOURS, Message, MessageBatch, batches_from_messages

__all__ = [
    "DIRECTIONS",
    "GOSSIP_ACTIVATIONS",
    "LINK_ACCOUNTING_MODES",
    "NEIGHBOURS",
    "Channel",
    "ChannelConfig",
    "CostModel",
    "Ledger",
    "Message",
    "MessageBatch",
    "batches_from_messages",
]
