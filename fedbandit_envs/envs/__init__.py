"""PettingZoo environments of the suite; importing it registers the mab, linear and procurement families."""

from fedbandit_envs.envs import procurement, replay
from fedbandit_envs.envs.mab import FederatedMAB

__all__ = ["FederatedMAB", "procurement", "replay"]
