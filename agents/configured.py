"""Algorithms whose keywords are fields of a config dataclass, each documented once there.

A class declares ``config_class`` (a dataclass that checks its values), the field names it takes as
keywords (``options``; ``class A(Configured, config=AConfig)`` sets both, taking every field), its own
defaults for some of them (``defaults``) and the values it fixes (``fixed``). Its signature is derived
from these (keyword-only), so ``inspect.signature(cls)`` lists exactly the keywords it accepts, with their
defaults. Direct construction and :func:`~fedbandit_envs.algorithms.make_algorithm` check the keywords the
same way (:meth:`Configured.make_config`).

The config modules of the reference agents (:mod:`agents.dubey_config`, :mod:`agents.solanki_config`) hold
one frozen :class:`~fedbandit_envs.validation.CheckedConfig` per algorithm: each field is a keyword,
documented once in the class that declares it and checked on construction; the registry checks the keywords
of ``make_algorithm`` and of the scenarios through them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from inspect import Parameter, Signature
from types import MappingProxyType
from typing import Any, ClassVar

from fedbandit_envs.validation import check_keywords

__all__ = ["Configured", "option_names"]


def option_names(config_class: type, *excluded: str) -> tuple[str, ...]:
    """Every field name of the dataclass ``config_class`` but ``excluded``, in declaration order.

    The usual :attr:`Configured.options` of an algorithm that takes all (or all but a few) of its config's fields.
    """
    return tuple(f.name for f in fields(config_class) if f.name not in excluded)


class Configured:
    """Mixin: build ``self.config`` from keyword options, a class's own defaults and its fixed values."""

    #: The dataclass holding (and checking) the hyper-parameters.
    config_class: ClassVar[type]

    #: The ``config_class`` fields this algorithm takes as keywords (each is documented there once).
    options: ClassVar[tuple[str, ...]] = ()

    #: This algorithm's own defaults for some of its options (the others default as in ``config_class``).
    defaults: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    #: The ``config_class`` values this algorithm fixes.
    fixed: ClassVar[Mapping[str, Any]] = MappingProxyType({})

    def __init_subclass__(cls, config: type | None = None, **kwargs: Any) -> None:
        """Give each algorithm the signature of its options (keyword-only, with its defaults).

        ``class A(Base, config=AConfig)`` sets ``config_class = AConfig`` and takes every field as an option.
        """
        super().__init_subclass__(**kwargs)
        if config is not None:
            cls.config_class = config
            cls.options = option_names(config)
        defaults = {f.name: f.default for f in fields(cls.config_class)} | dict(cls.defaults)
        parameters = [Parameter(name, Parameter.KEYWORD_ONLY, default=defaults[name]) for name in cls.options]
        cls.__signature__ = Signature(parameters)  # type: ignore[attr-defined]  # read by inspect.signature

    def __init__(self, **options: Any) -> None:
        self.config = self.make_config(**options)

    @classmethod
    def make_config(cls, **options: Any) -> Any:
        """The config of the keyword ``options`` with this algorithm's defaults and fixed values (checked).

        An unknown keyword raises a ``TypeError`` with a "did you mean"; the config checks the values.
        """
        check_keywords(cls.__name__, options, cls.options)
        return cls.config_class(**{**cls.defaults, **options, **cls.fixed})
