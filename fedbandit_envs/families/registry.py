"""The family registry: what a family contributes to the one run loop.

A family is a kind of problem (plain arms, linear contexts, procurement). It contributes its batched
core (which implements the core side of :mod:`fedbandit_envs.protocol`), its PettingZoo environments,
and the columns its results add; the run loop, the recorder, the CLI and the harness are shared. A
family registers once::

    register_family(Family(name="toy", envs={"toy": build_toy_env}, default_env="toy"))

and its environments are then played by ``fedbandit_envs.run.run(..., {"env": "toy", ...})``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "CoreMetrics",
    "Family",
    "FamilyMetrics",
    "Reference",
    "family_of_env",
    "find_family",
    "register_family",
    "without_coordinator",
]


class FamilyMetrics(Protocol):
    """The columns a family adds to the results of a run (built per run by :attr:`Family.metrics`)."""

    def after_slot(self, slot: int) -> None:
        """Called after every slot (``slot`` slots played), checkpoint or not."""

    def curve(self, replica: int, slot: int) -> dict[str, Any]:
        """Extra ``curves`` columns of ``replica`` at checkpoint ``slot``."""

    def agents(self, replica: int) -> dict[str, list[Any]]:
        """Extra ``agents`` columns of ``replica``: one value per agent for each column."""


class CoreMetrics:
    """A :class:`FamilyMetrics` base reading the run's core; it keeps nothing between checkpoints unless overridden.

    Args:
        core: the core of the run.
        population: the population of the run (unused here; subclasses may read its parameters).
    """

    def __init__(self, core: Any, population: Any) -> None:
        self.core = core

    def after_slot(self, slot: int) -> None:
        """Nothing to keep between checkpoints."""


def without_coordinator(population: Any, env_name: str) -> None:
    """Refuse a population that brings a coordinator to an environment that hosts no server."""
    if population.make_coordinator() is not None:
        raise ValueError(f"the {env_name} environment hosts no server; the algorithm must not bring a coordinator")


@dataclass(frozen=True)
class Reference:
    """A reference algorithm whose group regret every run of the family is compared with.

    Attributes:
        algorithm: the registered name of the reference, run on the same environment and seeds.
        column: the column of the reference's group regret.
        ratio: the column of ``group_regret / reference`` (NaN when the reference's regret is 0).
    """

    algorithm: str
    column: str
    ratio: str


@dataclass(frozen=True)
class Family:
    """One family of environments.

    Attributes:
        name: the family's name (algorithms register the families they support by it).
        envs: builders by environment name: ``build(env_kwargs, population) -> env``, where the env is a
            PettingZoo ``ParallelEnv`` whose ``core`` implements the protocol's core side and which hosts
            the population's coordinator if it has one.
        default_env: the environment played when ``env_kwargs`` has no ``"env"`` key.
        metrics: builds the family's extra result columns for a run: ``metrics(core, population)``.
        privacy_columns: give every row the privacy columns (NaN when nothing is accounted); otherwise
            they appear only when a wrapper or the population accounts privacy.
        reference: the algorithm whose regret each run is compared with (a ratio column), or None.
    """

    name: str
    envs: Mapping[str, Callable[[dict[str, Any], Any], Any]]
    default_env: str
    metrics: Callable[[Any, Any], FamilyMetrics] | None = None
    privacy_columns: bool = False
    reference: Reference | None = None

    def __post_init__(self) -> None:
        if self.default_env not in self.envs:
            raise ValueError(f"family {self.name!r}: default_env {self.default_env!r} is not in {sorted(self.envs)}")


_FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Register ``family``; its environment names must not clash with another family's."""
    if not isinstance(family, Family):
        raise TypeError(f"register_family takes a Family, got {type(family).__name__}")
    known = _FAMILIES.get(family.name)
    if known is not None and known is not family:
        raise ValueError(f"the family {family.name!r} is already registered")
    for other in _FAMILIES.values():
        clash = set(other.envs) & set(family.envs) if other.name != family.name else set()
        if clash:
            raise ValueError(f"family {family.name!r}: environment names {sorted(clash)} belong to {other.name!r}")
    _FAMILIES[family.name] = family
    return family


def find_family(name: str) -> Family:
    """The registered family ``name``; a ValueError lists the known ones."""
    if name not in _FAMILIES:
        raise ValueError(f"unknown family {name!r}; registered families are {sorted(_FAMILIES)}")
    return _FAMILIES[name]


def family_of_env(env_name: str) -> Family:
    """The family whose environments include ``env_name``; a ValueError lists every environment name."""
    for family in _FAMILIES.values():
        if env_name in family.envs:
            return family
    names = sorted(name for family in _FAMILIES.values() for name in family.envs)
    raise ValueError(f"env_kwargs['env'] must be one of {names}, got {env_name!r}")
