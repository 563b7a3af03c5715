"""Wrappers around the environments: differential privacy on outgoing messages (:mod:`wrappers.dp`).

Fault wrappers (byzantine agents, drops, delays, budgets) build on the same message hooks.
"""

from wrappers.dp import GaussianMessageDP, LaplaceMessageDP, PrivacyBudgetExceeded, TreeMessageDP

__all__ = ["GaussianMessageDP", "LaplaceMessageDP", "PrivacyBudgetExceeded", "TreeMessageDP"]
