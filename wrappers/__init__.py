"""Wrappers around the environments: differential privacy and fault injection.

:mod:`wrappers.dp` noises outgoing messages and accounts privacy; :mod:`wrappers.faults` injects
byzantine agents, drops and delays. All are :class:`~wrappers.chain.HookWrapper` s: they hand a message hook to
the core for each episode (never changing the wrapped env), so they apply on the PettingZoo and the batched paths
alike; wrappers of different kinds compose in order, the innermost first.
"""

from wrappers.chain import HookWrapper
from wrappers.dp import GaussianMessageDP, LaplaceMessageDP, PrivacyBudgetExceeded, TreeMessageDP
from wrappers.faults import ByzantineAgents, FaultInactiveWarning, MessageDelays, MessageDrops

__all__ = [
    "ByzantineAgents",
    "FaultInactiveWarning",
    "GaussianMessageDP",
    "HookWrapper",
    "LaplaceMessageDP",
    "MessageDelays",
    "MessageDrops",
    "PrivacyBudgetExceeded",
    "TreeMessageDP",
]
