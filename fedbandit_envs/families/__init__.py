"""The families of environments, one folder each; importing this package registers them.

* :mod:`~fedbandit_envs.families.mab`: plain multi-armed bandits (Li-Song, Zhu et al., Dubey-Pentland);
* :mod:`~fedbandit_envs.families.linear`: linear contextual bandits with asynchronous arrivals (Li-Wang);
* :mod:`~fedbandit_envs.families.procurement`: combinatorial procurement (Solanki et al.).

A family contributes its core, its PettingZoo environments, its single-agent views and oracles, and
one :class:`~fedbandit_envs.families.registry.Family` registration (see ``docs/adding-a-family.md``).
"""

from fedbandit_envs.families import linear, mab, procurement

__all__ = ["linear", "mab", "procurement"]
