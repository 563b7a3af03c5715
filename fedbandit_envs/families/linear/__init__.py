"""The linear family: federated linear contextual bandits with asynchronous arrivals (synthetic, replayed or real)."""

from fedbandit_envs.families.linear.classification import ClassificationBandit
from fedbandit_envs.families.linear.env import FederatedLinear, LinearConfig, LinearCore
from fedbandit_envs.families.linear.replay import FAMILY, ReplayLogEnv, ReplayStandIn

__all__ = [
    "FAMILY",
    "ClassificationBandit",
    "FederatedLinear",
    "LinearConfig",
    "LinearCore",
    "ReplayLogEnv",
    "ReplayStandIn",
]
