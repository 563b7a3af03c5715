"""Real-data bandit instances: the UCI diabetes data of Zhu et al. (a loader and a synthetic stand-in).

:mod:`fedbandit_envs.data.classification` (scikit-learn's bundled classification datasets as contextual bandits)
is imported by its own name; its names are not re-exported here.
"""

from fedbandit_envs.data import diabetes
from fedbandit_envs.data.diabetes import *  # noqa: F403  (the package's public names are the module's)

__all__ = list(diabetes.__all__)
