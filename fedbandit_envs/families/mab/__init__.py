"""The MAB family: M agents pull arms of a K-armed bandit (core, PettingZoo env, single-agent views)."""

from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.families.mab.env import FAMILY, FederatedMAB

__all__ = ["FAMILY", "FederatedMAB", "FederatedMABCore", "MABConfig"]
