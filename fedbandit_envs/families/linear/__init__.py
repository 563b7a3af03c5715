"""The linear family: federated linear contextual bandits with asynchronous arrivals (synthetic and replayed)."""

from fedbandit_envs.families.linear.env import FederatedLinear, LinearConfig, LinearCore
from fedbandit_envs.families.linear.replay import FAMILY, ReplayLogEnv, ReplayStandIn

__all__ = ["FAMILY", "FederatedLinear", "LinearConfig", "LinearCore", "ReplayLogEnv", "ReplayStandIn"]
