"""A toy fourth family, "guess", added in one folder plus one registration (see ``docs/adding-a-family.md``).

* :mod:`toy_family.core`: the batched core (the core side of :mod:`fedbandit_envs.protocol`);
* :mod:`toy_family.env`: its PettingZoo environment with the protocol translation methods;
* this module: the family's result columns and its one :func:`register_family` call;
* :mod:`toy_family.algorithm`: a learner for the family, registered with ``register_algorithm``.
"""

from __future__ import annotations

from typing import Any

from fedbandit_envs.families.registry import CoreMetrics, Family, register_family, without_coordinator
from toy_family.core import GuessCore
from toy_family.env import GuessEnv


class GuessMetrics(CoreMetrics):
    """The family's extra columns: how many agents hit the hidden number in the last slot."""

    core: GuessCore

    def curve(self, replica: int, slot: int) -> dict[str, Any]:
        """``agents_found``: the agents whose last guess was the hidden number."""
        return {"agents_found": int(self.core.found[replica].sum())}

    def agents(self, replica: int) -> dict[str, list[Any]]:
        """``found``: whether each agent's last guess was the hidden number."""
        return {"found": self.core.found[replica].tolist()}


def build_guess_env(env_kwargs: dict[str, Any], population: Any) -> GuessEnv:
    """The guess environment of ``env_kwargs`` (it hosts no server)."""
    without_coordinator(population, "guess")
    return GuessEnv(**env_kwargs)


FAMILY = register_family(
    Family(name="guess", envs={"guess": build_guess_env}, default_env="guess", metrics=GuessMetrics)
)
