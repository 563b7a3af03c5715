"""One validation layer for every input that enters the suite (constructors, ``make`` keywords, actions, messages).

Every check raises a ``ValueError`` or ``TypeError`` whose message names the bad argument and says how to
fix it, at construction or parse time, before any state changes:

* :func:`check_int`: integers are integers (Python or numpy integers; never ``bool``, ``float`` or ``str``),
  within ``[minimum, maximum]`` (the default maximum is the largest int64, so no later ``OverflowError``);
* :func:`check_real`: real numbers (not ``bool`` or ``str``), finite unless told otherwise, within bounds;
* :func:`check_bool`: flags are ``True`` or ``False`` (not ``1`` or ``"yes"``);
* :func:`check_choice`: a string option with a "did you mean" suggestion (:func:`did_you_mean`);
* :func:`check_keywords`: keyword names against the accepted ones, again with a suggestion;
  :func:`keyword_checked` applies it to a class's constructor; :func:`forwards_keywords` gives a function that
  passes ``**options`` on the signature of the keywords it accepts;
* :func:`check_int_array`: the vectorised integer check of a header array (message senders, recipients, counts);
* :func:`check_real_array`: a number or an array of numbers as a float64 array (no bools, strings or objects);
* :func:`check_memory`: a size limit derived from the memory a configuration needs (:class:`MemoryLimitError`);
* :class:`CheckedConfig`: the base of frozen configuration dataclasses whose fields are checked against their
  annotations (``int``, ``float``, ``bool``, ``str``, ``Literal[...]``, unions with ``None``, tuples, callables)
  and the bounds given with :func:`option` (:func:`check_fields`).

The memory limit is :data:`DEFAULT_MEMORY_LIMIT` bytes unless the environment variable
:data:`MEMORY_LIMIT_VARIABLE` gives another number of GiB (e.g. ``FEDBANDIT_MEMORY_LIMIT_GIB=64``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import functools
import inspect
import os
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Integral, Real
from typing import Any, Literal, TypedDict, TypeVar, get_args, get_origin

import gymnasium
import numpy as np
from typing_extensions import Unpack

__all__ = [
    "AGENT_OVERHEAD",
    "CheckedConfig",
    "DEFAULT_MEMORY_LIMIT",
    "INT64_MAX",
    "INT64_MIN",
    "MAX_NAME_LENGTH",
    "MEMORY_LIMIT_VARIABLE",
    "MemoryLimitError",
    "RealBounds",
    "check_bool",
    "check_fields",
    "check_choice",
    "check_int",
    "check_int_array",
    "check_keywords",
    "check_options",
    "check_memory",
    "check_name",
    "check_names",
    "check_real",
    "check_real_array",
    "check_render_mode",
    "check_seeds",
    "did_you_mean",
    "forwards_keywords",
    "keyword_checked",
    "memory_limit",
    "option",
    "population_memory",
]

#: The range of an integer argument unless told otherwise (every count and index is stored as int64).
INT64_MIN: int = int(np.iinfo(np.int64).min)
INT64_MAX: int = int(np.iinfo(np.int64).max)

#: Longest name a learner gives the env (a message kind, a payload field, a privacy account key), in characters.
#: Names are metadata the ledger does not charge, so they are kept short: a learner cannot carry data in them for
#: free beyond a few bytes.
MAX_NAME_LENGTH = 64

#: Bytes one environment (or batched core) may need at construction and reset unless raised (8 GiB).
DEFAULT_MEMORY_LIMIT: int = 8 * 2**30

#: The environment variable that sets the memory limit in GiB (a positive number).
MEMORY_LIMIT_VARIABLE = "FEDBANDIT_MEMORY_LIMIT_GIB"

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])


class MemoryLimitError(ValueError):
    """A configuration would need more memory than the limit (a ``ValueError`` naming the sizes and the fix)."""


def _describe(value: Any) -> str:
    """``value`` and its type for an error message (long reprs shortened)."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def check_name(what: str, value: object, maximum: int = MAX_NAME_LENGTH) -> str:
    """Return ``value`` as an exact ``str`` of 1 to ``maximum`` characters.

    A ``str`` subclass could compare equal to a public name while carrying other text, so it is read as a plain
    ``str``; anything else raises a ``TypeError``, a longer text a ``ValueError``.
    """
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} must be a non-empty string, got {_describe(value)}")
    if len(value) > maximum:
        raise ValueError(f"{what} has {len(value)} characters; at most {maximum} are allowed")
    return value if type(value) is str else str.__str__(value)


def check_int(
    name: str, value: Any, minimum: int | None = INT64_MIN, maximum: int | None = INT64_MAX, *, hint: str = ""
) -> int:
    """Return ``value`` as a Python int after checking it is an integer in ``[minimum, maximum]``.

    Python and numpy integers (and 0-d integer arrays) are accepted; ``bool``, floats (even ``2.0``) and strings
    are refused with a ``TypeError``; a value out of range raises a ``ValueError``. The default range is that of
    int64 (so no later ``OverflowError``); ``None`` bounds are open. ``hint`` is appended to a range error.
    """
    if type(value) is int:  # the common case, without the checks below
        number = value
    else:
        if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
            value = value[()]
        if isinstance(value, bool | np.bool_) or not isinstance(value, Integral):
            raise TypeError(f"{name} must be an integer (Python or numpy int; not bool, float), got {_describe(value)}")
        number = int(value)
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {number}{hint}")
    if maximum is not None and number > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {number}{hint}")
    return number


def check_real(
    name: str,
    value: Any,
    minimum: float | None = None,
    maximum: float | None = None,
    *,
    finite: bool = True,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> float:
    """Return ``value`` as a float after checking it is a real number within the bounds.

    Python and numpy integers and floats are accepted; ``bool`` and strings raise a ``TypeError``. NaN always
    raises; infinities raise unless ``finite=False``. ``exclusive_minimum`` (``exclusive_maximum``) makes the
    lower (upper) bound strict.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if isinstance(value, bool | np.bool_) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}; pass e.g. {name}=0.5")
    number = float(value)
    if np.isnan(number) or (finite and not np.isfinite(number)):
        raise ValueError(f"{name} must be a finite number, got {number}")
    if minimum is not None and (number <= minimum if exclusive_minimum else number < minimum):
        raise ValueError(f"{name} must be {'>' if exclusive_minimum else '>='} {minimum}, got {number}")
    if maximum is not None and (number >= maximum if exclusive_maximum else number > maximum):
        raise ValueError(f"{name} must be {'<' if exclusive_maximum else '<='} {maximum}, got {number}")
    return number


def check_names(what: str, values: Any, example: str = "('sample',)") -> frozenset[str]:
    """Return ``values``, an iterable of names (e.g. message kinds), as a frozenset of names checked by check_name.

    A single string raises a ``TypeError`` rather than being read as the set of its letters, and so does anything
    that is not an iterable; ``example`` shows the expected form in the error.
    """
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise TypeError(f"{what} must be an iterable of names, e.g. {example}; got {_describe(values)}")
    return frozenset(check_name(f"each of {what}", value) for value in values)


def check_distinct(what: str, values: Sequence[Any], why: str) -> None:
    """Raise a ``ValueError`` naming the values that ``values`` holds more than once (``why`` says why they must not).

    The message reads ``"{what} must be distinct ({why}), got [...] more than once"``.
    """
    seen: set[Any] = set()
    repeated: set[Any] = set()
    for value in values:
        (repeated if value in seen else seen).add(value)
    if repeated:
        raise ValueError(f"{what} must be distinct ({why}), got {sorted(repeated)} more than once")


def check_bool(name: str, value: Any) -> bool:
    """Return ``value`` as a bool after checking it is one (``bool`` or ``numpy.bool_``; not 0/1 or a string)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {_describe(value)}")
    return bool(value)


def did_you_mean(value: Any, options: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest option to ``value`` (``difflib``), or ``""`` for none."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(o) for o in options], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_choice(name: str, value: Any, options: Sequence[str]) -> str:
    """Return ``value`` if it is one of the string ``options``, else raise naming ``name``.

    A string that is not an option raises a ``ValueError`` with a "did you mean"; any other value (a number,
    an array, None) raises a ``TypeError``.
    """
    if isinstance(value, str) and value in options:
        return str(value)
    listed = ", ".join(repr(o) for o in options)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be one of {listed}, got {_describe(value)}")
    raise ValueError(f"{name} must be one of {listed}, got {value!r}{did_you_mean(value, options)}")


def check_render_mode(render_mode: Any, modes: Sequence[str]) -> str | None:
    """Return ``render_mode``: None, one of ``modes`` (an environment's declared modes), or another name with a warning.

    As ``gymnasium.make`` does, a mode the environment does not declare is accepted with a warning that names the
    declared modes (and a close one, for a typo); ``render()`` then returns None. A mode that is not a string
    raises a ``TypeError``.
    """
    if render_mode is None or (isinstance(render_mode, str) and render_mode in modes):
        return render_mode
    if not isinstance(render_mode, str):
        raise TypeError(f"render_mode must be None or a string such as {modes[0]!r}, got {_describe(render_mode)}")
    gymnasium.logger.warn(
        f"render_mode={render_mode!r} is not one of this environment's render modes {list(modes)}"
        f"{did_you_mean(render_mode, modes)}; render() will return None"
    )
    return render_mode


def check_keywords(where: str, given: Iterable[str], accepted: Iterable[str]) -> None:
    """Raise a ``TypeError`` naming the first keyword of ``given`` not in ``accepted``, with a suggestion."""
    allowed = list(accepted)
    for keyword in given:
        if keyword not in allowed:
            accepted = f"accepted: {', '.join(allowed)}" if allowed else "it takes no keywords"
            raise TypeError(
                f"{where} got an unexpected keyword argument {keyword!r}{did_you_mean(keyword, allowed)}; {accepted}"
            )


def keyword_checked(cls: type[_T]) -> type[_T]:
    """Class decorator: an unknown constructor keyword raises a ``TypeError`` with a "did you mean".

    The constructor's signature is read once; it must not take ``**kwargs``, unless :func:`forwards_keywords`
    lists them in its signature. Known keywords cost one set difference per construction.
    """
    init = cls.__init__
    parameters = list(inspect.signature(init).parameters.values())[1:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        raise TypeError(f"keyword_checked needs a constructor without **kwargs; {cls.__name__} has one")
    names = [p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    known = frozenset(names)

    @functools.wraps(init)
    def checked_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if not known.issuperset(kwargs):
            check_keywords(cls.__name__, kwargs, names)
        init(self, *args, **kwargs)

    cls.__init__ = checked_init  # type: ignore[method-assign]  # wrapping the class's __init__ is the point
    return cls


def forwards_keywords(*targets: Callable[..., Any]) -> Callable[[_F], _F]:
    """Decorator: the function passes its ``**options`` on to ``targets``; its signature lists them.

    The decorated function's signature (what ``help()``, :func:`inspect.signature` and :func:`keyword_checked`
    read) becomes its own parameters without the ``**options`` entry, followed by each target's parameters that
    take a default (positional-or-keyword or keyword-only), as keyword-only parameters with those defaults: the
    keywords and defaults are written once, in the targets. Annotate ``**options`` with ``Unpack`` of a
    ``TypedDict`` of the same keywords for type checkers.
    """

    def decorate(function: _F) -> _F:
        own = [
            p for p in inspect.signature(function).parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        forwarded = [
            parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for target in targets
            for parameter in inspect.signature(target).parameters.values()
            if parameter.default is not inspect.Parameter.empty
            and parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        ]
        function.__signature__ = inspect.signature(function).replace(parameters=[*own, *forwarded])  # type: ignore[attr-defined]  # the documented way to give a callable its signature
        return function

    return decorate


def check_int_array(name: str, values: Any, minimum: int | None, maximum: int = INT64_MAX) -> np.ndarray:
    """Return ``values`` as a 1-D int64 array after a vectorised check of its dtype and range.

    Integer arrays (any width) and lists of Python or numpy integers are accepted; bool, float, string and
    object arrays (e.g. integers beyond int64) raise. An empty input gives an empty int64 array. A ``None``
    minimum is open (the caller checks ids against the topology).
    """
    if type(values) is np.ndarray and values.dtype == np.int64:
        array = values.reshape(-1)
    else:
        array = np.asarray(values)
        if array.size == 0:
            return np.zeros(0, np.int64)
        if array.dtype.kind == "O":
            for entry in array.reshape(-1):
                check_int(f"{name} (every row)", entry, minimum, maximum)
        if array.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, got dtype {array.dtype}; pass integers (numpy ints are fine)")
        if array.dtype.kind == "u" and int(array.max()) > maximum:
            raise ValueError(f"{name} must be <= {maximum} for every row, got {int(array.max())}")
        array = array.astype(np.int64, copy=False).reshape(-1)
    if minimum is not None and array.size and int(array.min()) < minimum:
        raise ValueError(f"{name} must be >= {minimum} for every row, got {int(array[array < minimum][0])}")
    if array.size and int(array.max()) > maximum:
        raise ValueError(f"{name} must be <= {maximum} for every row, got {int(array[array > maximum][0])}")
    return array


def check_real_array(name: str, values: Any) -> np.ndarray:
    """Return ``values`` (a number or a nested sequence of numbers) as a float64 array after checking its dtype.

    Integer and float arrays, numbers and lists of them are accepted; bool, string, object and ragged inputs
    raise a ``TypeError`` naming ``name`` (the caller checks shape and range).
    """
    try:
        array = np.asarray(values)
    except ValueError:
        raise TypeError(f"{name} must be a number or an array of numbers, got a ragged {_describe(values)}") from None
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a number or an array of numbers, got {_describe(values)}")
    return array.astype(np.float64)


def check_seeds(seeds: Any) -> list[int]:
    """Return ``seeds`` as a non-empty list of non-negative Python ints, else raise.

    A bare int is refused with the fix: ``seeds=range(3)`` for three runs, ``seeds=[3]`` for the run of seed 3.
    """
    if isinstance(seeds, Integral) or isinstance(seeds, str | bytes) or not isinstance(seeds, Iterable):
        raise TypeError(
            f"seeds must be a sequence of seeds (one run per seed), got {_describe(seeds)}; "
            f"pass seeds=range(n) for n runs or seeds=[s] for the run of seed s"
        )
    listed = list(seeds)
    if not listed:
        raise ValueError("seeds must not be empty; pass e.g. seeds=range(3)")
    return [check_int(f"seeds[{index}]", seed, 0) for index, seed in enumerate(listed)]


def check_options(name: str, value: Any) -> dict[str, Any]:
    """A dict copy of an options mapping such as ``instance_params`` (None gives ``{}``), keys checked to be str."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a dict of options or None, got {_describe(value)}; pass e.g. {name}={{}}")
    for key in value:
        if not isinstance(key, str):
            raise TypeError(f"{name} keys must be option names (str), got {_describe(key)}")
    return dict(value)


#: The ``dataclasses.field`` metadata key under which :func:`option` stores a field's bounds.
_LIMITS = "fedbandit_limits"


class RealBounds(TypedDict, total=False):
    """The bounds :func:`option` takes: the keywords of :func:`check_real` (its defaults apply)."""

    minimum: float | None
    maximum: float | None
    finite: bool
    exclusive_minimum: bool
    exclusive_maximum: bool


@forwards_keywords(check_real)
def option(
    default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING, **bounds: Unpack[RealBounds]
) -> Any:
    """A field of a :class:`CheckedConfig` with bounds on its numbers (``dataclasses.field`` with metadata).

    ``int`` fields use ``minimum`` and ``maximum`` (:func:`check_int`); ``float`` fields use all the bounds
    (:func:`check_real`; ``finite=False`` admits infinities). Annotations say the rest (type, ``Literal`` options).
    """
    check_keywords("option", bounds, RealBounds.__annotations__)
    return dataclasses.field(default=default, default_factory=default_factory, metadata={_LIMITS: bounds})


def _hint_text(hint: Any) -> str:
    """An annotation in words for an error message (``1.0``-style numbers, ``'a' or 'b'`` for literals)."""
    if hint is type(None):
        return "None"
    if get_origin(hint) is Literal:
        return " or ".join(repr(option) for option in get_args(hint))
    if get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_hint_text(member) for member in get_args(hint))
    if isinstance(hint, type):
        return {"int": "an integer", "float": "a real number", "bool": "True or False", "str": "a string"}.get(
            hint.__name__, f"a {hint.__name__}"
        )
    return str(hint)


def _literal_type(value: Any) -> type:
    """The Python type ``value`` stands for among ``Literal`` options: numpy bools and integers count as such."""
    if isinstance(value, np.bool_):
        return bool
    if isinstance(value, np.integer):
        return int
    return type(value)


def _check_literal(name: str, value: Any, options: tuple[Any, ...]) -> None:
    """``value`` is one of ``options`` (same type and value: ``1`` is not ``True``; ``numpy.False_`` is ``False``)."""
    if all(isinstance(o, str) for o in options):
        check_choice(name, value, options)
        return
    kind = _literal_type(value)
    if any(kind is type(o) and value == o for o in options):
        return
    listed = ", ".join(repr(o) for o in options)
    if not any(kind is type(o) for o in options):
        raise TypeError(f"{name} must be one of {listed}, got {_describe(value)}")
    raise ValueError(f"{name} must be one of {listed}, got {value!r}{did_you_mean(value, map(str, options))}")


def _check_union(name: str, value: Any, members: tuple[Any, ...], limits: Mapping[str, Any]) -> Any:
    """``value`` as checked by the first union member it fits; a value error of a fitting type wins over type errors."""
    if value is None and type(None) in members:
        return value
    errors: list[Exception] = []
    for member in members:
        if member is type(None):
            continue
        try:
            return _check_value(name, value, member, limits)
        except (TypeError, ValueError) as error:
            errors.append(error)
    for found in errors:
        if isinstance(found, ValueError):
            raise found
    if len(errors) == 1 and value is not None:
        raise errors[0]
    raise TypeError(f"{name} must be {' or '.join(map(_hint_text, members))}, got {_describe(value)}")


def _check_tuple(name: str, value: Any, items: tuple[Any, ...], limits: Mapping[str, Any]) -> None:
    """``value`` is a tuple (or list) whose entries fit ``items`` (``tuple[float, ...]``: any length)."""
    if not isinstance(value, tuple | list):
        raise TypeError(f"{name} must be a tuple, got {_describe(value)}")
    variable = len(items) == 2 and items[1] is Ellipsis
    if not variable and len(value) != len(items):
        raise ValueError(f"{name} must have {len(items)} entries, got {len(value)}: {value!r}")
    for index, entry in enumerate(value):
        _check_value(f"{name}[{index}]", entry, items[0] if variable else items[index], limits)


def _check_value(name: str, value: Any, hint: Any, limits: Mapping[str, Any]) -> Any:
    """Check ``value`` against the annotation ``hint`` and the bounds ``limits`` (see :func:`check_fields`).

    Returns the value to keep: an ``int`` field's Python int from :func:`check_int`, any other value as given.
    """
    origin = get_origin(hint)
    if hint is Any:
        return value
    if origin is Literal:
        _check_literal(name, value, get_args(hint))
    elif origin in (typing.Union, types.UnionType):
        return _check_union(name, value, get_args(hint), limits)
    elif hint is bool:
        check_bool(name, value)
    elif hint is int:
        low, high = limits.get("minimum"), limits.get("maximum")
        return check_int(name, value, INT64_MIN if low is None else int(low), INT64_MAX if high is None else int(high))
    elif hint is float:
        check_real(name, value, **limits)
    elif origin is tuple:
        _check_tuple(name, value, get_args(hint), limits)
    elif hint is collections.abc.Callable or origin is collections.abc.Callable:
        if not callable(value):
            raise TypeError(f"{name} must be callable, got {_describe(value)}")
    elif isinstance(origin or hint, type) and not isinstance(value, origin or hint):
        raise TypeError(f"{name} must be {_hint_text(origin or hint)}, got {_describe(value)}")
    return value


_HINTS: dict[type, dict[str, Any]] = {}


def _field_hints(cls: type) -> dict[str, Any]:
    """The evaluated annotations of a dataclass (read once per class)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def check_fields(config: Any) -> None:
    """Check every field of the dataclass instance ``config`` against its annotation and :func:`option` bounds.

    ``int`` (:func:`check_int`), ``float`` (:func:`check_real`), ``bool`` (:func:`check_bool`), ``str``,
    ``Literal[...]`` (:func:`check_choice`, with a "did you mean"), unions (``X | None``,
    ``float | Literal["oracle"]``), ``tuple[...]``, callables and classes are checked; ``Any`` and fields with
    ``init=False`` (derived on construction) are not. The first bad field raises a ``TypeError`` (wrong type)
    or ``ValueError`` (wrong value) that names it. An ``int`` field given a numpy integer is stored as the checked
    Python int, so sizes computed from it later cannot overflow the numpy type.
    """
    hints = _field_hints(type(config))
    for entry in dataclasses.fields(config):
        if not entry.init:
            continue  # derived on construction, not given
        value = getattr(config, entry.name)
        checked = _check_value(entry.name, value, hints[entry.name], entry.metadata.get(_LIMITS, {}))
        if checked is not value:
            object.__setattr__(config, entry.name, checked)


_C = TypeVar("_C", bound="CheckedConfig")


@dataclasses.dataclass(frozen=True)
class CheckedConfig:
    """Base of frozen configuration dataclasses: every field is checked on construction (:func:`check_fields`).

    Subclasses are ``@dataclass(frozen=True)``, document each field under ``Attributes:`` in their docstring,
    annotate string options as ``Literal`` and give bounds with :func:`option`; a subclass with checks across
    fields overrides ``__post_init__`` and calls ``super().__post_init__()`` first.
    """

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def from_options(cls: type[_C], where: str, options: Mapping[str, Any]) -> _C:
        """The config of the keyword ``options`` of ``where``; an unknown keyword gets a "did you mean"."""
        check_keywords(where, options, [entry.name for entry in dataclasses.fields(cls)])
        return cls(**options)


#: Bytes per agent outside the state arrays (its name, its spaces, its dict entries), measured with tracemalloc.
AGENT_OVERHEAD = 2560


def population_memory(num_agents: int, replicas: int, graph: float, tables: float) -> dict[str, float]:
    """The memory parts of a population: ``graph`` and ``tables`` bytes per replica, plus the per-agent objects."""
    return {
        "agent-graph matrices": replicas * graph,
        "per-agent state tables": replicas * tables,
        "agent names and spaces": num_agents * AGENT_OVERHEAD,
    }


def memory_limit() -> int:
    """The memory limit in bytes: :data:`MEMORY_LIMIT_VARIABLE` (GiB) if set, else :data:`DEFAULT_MEMORY_LIMIT`."""
    raw = os.environ.get(MEMORY_LIMIT_VARIABLE)
    if raw is None or raw.strip() == "":
        return DEFAULT_MEMORY_LIMIT
    try:
        gib = float(raw)
    except ValueError:
        raise ValueError(f"{MEMORY_LIMIT_VARIABLE} must be a number of GiB such as 16, got {raw!r}") from None
    if not (np.isfinite(gib) and gib > 0):
        raise ValueError(f"{MEMORY_LIMIT_VARIABLE} must be a positive number of GiB, got {raw!r}")
    return int(gib * 2**30)


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def check_memory(what: str, parts: dict[str, float]) -> None:
    """Raise :class:`MemoryLimitError` if the arrays ``parts`` (name -> bytes) of ``what`` exceed the limit.

    The message gives the total, the largest parts (the why) and how to raise the limit.
    """
    total = float(sum(parts.values()))
    limit = memory_limit()
    if total <= limit:
        return
    largest = sorted(parts.items(), key=lambda item: -item[1])[:3]
    why = ", ".join(f"{name} {_gib(size)}" for name, size in largest)
    raise MemoryLimitError(
        f"{what} would need about {_gib(total)} of memory ({why}), above the limit of {_gib(limit)}; "
        f"use smaller sizes, or raise the limit with the environment variable {MEMORY_LIMIT_VARIABLE}"
    )


def discrete_action(action: Any, num_arms: int) -> int:
    """An arm index from a Discrete(K) action (int, numpy integer or 0-d / size-1 int array)."""
    array = np.asarray(action)
    if isinstance(action, bool) or array.dtype.kind not in "iu" or array.size != 1:
        raise TypeError(f"action must be an integer arm index in 0..{num_arms - 1}, got {action!r}")
    arm = int(array.reshape(-1)[0])
    if not 0 <= arm < num_arms:
        raise ValueError(f"action {arm} is out of range: pass an arm index in 0..{num_arms - 1}")
    return arm
