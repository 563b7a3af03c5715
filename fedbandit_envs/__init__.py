"""fedbandit-envs: PettingZoo and Gymnasium environments for federated and multi-agent bandits.

Importing the package registers every environment id (see :func:`pprint_registry`).
"""

from fedbandit_envs import families  # noqa: F401 (registers the families)
from fedbandit_envs.channel import NEIGHBOURS, ChannelConfig, CostModel, Message, MessageBatch
from fedbandit_envs.core import Action, AgentContext, Feedback
from fedbandit_envs.families.mab import FederatedMAB
from fedbandit_envs.registration import pprint_registry, register_all
from fedbandit_envs.topology import SERVER

__version__ = "0.1.0"

register_all()

__all__ = [
    "NEIGHBOURS",
    "SERVER",
    "Action",
    "AgentContext",
    "ChannelConfig",
    "CostModel",
    "FederatedMAB",
    "Feedback",
    "Message",
    "MessageBatch",
    "__version__",
    "pprint_registry",
]
