"""PettingZoo environments of the suite."""

from fedbandit_envs.envs.mab import FederatedMAB

__all__ = ["FederatedMAB"]
