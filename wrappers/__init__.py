"""Wrappers around the environments: differential privacy and fault injection.

:mod:`wrappers.dp` noises outgoing messages and accounts privacy; :mod:`wrappers.faults` injects
byzantine agents, drops and delays. All install message hooks on the core, so they apply on the
PettingZoo and the batched paths alike.
"""

from wrappers.dp import GaussianMessageDP, LaplaceMessageDP, PrivacyBudgetExceeded, TreeMessageDP
from wrappers.faults import ByzantineAgents, FaultInactiveWarning, MessageDelays, MessageDrops

__all__ = [
    "ByzantineAgents",
    "FaultInactiveWarning",
    "GaussianMessageDP",
    "LaplaceMessageDP",
    "MessageDelays",
    "MessageDrops",
    "PrivacyBudgetExceeded",
    "TreeMessageDP",
]
