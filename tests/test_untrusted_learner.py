"""The learner under test is untrusted: what it does to the objects it shares with the env changes no measurement.

:func:`untrusted` turns a reference algorithm into a learner that plays exactly the same decisions (it works on
private deep copies of everything the env hands it, and hands the env deep copies of what it returns), and then,
at each later call, vandalises every object it was given or gave: it lifts numpy's read-only flag wherever
numpy allows it (through ``.base`` too) and overwrites the arrays, and empties the lists and dicts, following
public attributes (a private one, such as a topology's cached graph, is no part of what is shared). A learner
that does this to a shared array could rewrite a context the env reads again, a capacity it checks, a message
count or a routed header the ledger tallies later, a payload in flight. Every such object the env keeps must
be its own or immutable (:mod:`fedbandit_envs.frozen`), so the regret, the ledger, the privacy spent and the
hooks' state must equal the committed fingerprint (``tests/fingerprints``) bit for bit, on both run paths.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from fingerprints.cases import CASES
from fingerprints.record import Case, differences, fingerprint, load_fixture

from fedbandit_envs import MessageBatch

FIXTURE = load_fixture()
PETTINGZOO = [case for case in CASES if case.check_pettingzoo]

#: Leaves the vandal leaves alone: immutable values, and the random streams the env hands over on purpose.
_LEAVES = (str, bytes, int, float, complex, bool, type(None), np.random.SeedSequence, np.random.Generator, type)


def _overwrite(array: np.ndarray) -> bool:
    """Make ``array`` writeable if numpy allows it (its bases first), then fill it with garbage; whether it could."""
    chain = [array]
    while isinstance(chain[-1].base, np.ndarray):
        chain.append(chain[-1].base)
    try:
        for item in reversed(chain):
            item.setflags(write=True)
    except ValueError:  # an immutable array (or a view of one): nobody can write to it
        return False
    if array.size and array.dtype.kind in "biuf":
        array[...] = True if array.dtype.kind == "b" else -7
    return True


def vandalise(obj: Any, seen: set[int] | None = None) -> int:
    """Overwrite every array reachable from ``obj`` and empty its lists and dicts; the number of arrays written."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, _LEAVES):
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return int(_overwrite(obj))
    if isinstance(obj, list | tuple | set | frozenset):
        written = sum(vandalise(item, seen) for item in obj)
        if isinstance(obj, list):
            obj.clear()
        return written
    if isinstance(obj, dict):
        written = sum(vandalise(item, seen) for item in obj.values())
        if type(obj) is dict:  # a FrozenDict refuses, as it should
            obj.clear()
        return written
    if hasattr(obj, "source") and hasattr(obj, "rows"):  # a lazily gathered payload: its source and row map
        return vandalise(obj.source, seen) + vandalise(obj.rows, seen)
    slots = [name for cls in type(obj).__mro__ for name in getattr(cls, "__slots__", ())]
    names = [name for name in (*getattr(obj, "__dict__", {}), *slots) if not name.startswith("_")]  # public only
    return sum(vandalise(getattr(obj, name, None), seen) for name in names)


class _Vandal:
    """The objects an untrusted learner (or its server) was given or gave, vandalised at its next call."""

    #: Arrays overwritten by every vandal so far (each one a write the env must not have noticed).
    written_in_all = 0

    def __init__(self) -> None:
        self.held: list[Any] = []

    def call(self, method: Any, *args: Any, keep: tuple[Any, ...] = ()) -> Any:
        """``method`` on private copies of ``args`` (``keep`` passed as they are); its result copied for the env."""
        for obj in self.held:
            _Vandal.written_in_all += vandalise(obj)
        self.held = list(args)
        result = copy.deepcopy(method(*copy.deepcopy(args), *keep))
        self.held.append(result)
        return result


def untrusted(cls: type) -> type:
    """A subclass of the population ``cls`` (and of its coordinator) that vandalises what it shares (module doc)."""

    class UntrustedCoordinator:
        def __init__(self, inner: Any, vandal: _Vandal) -> None:
            self.inner, self.vandal = inner, vandal

        def reset(self, context: Any, rngs: list[np.random.Generator]) -> None:
            self.vandal.call(self.inner.reset, context, keep=(rngs,))  # the streams are the env's on purpose

        def step(self, slot: int, inbox: list[MessageBatch]) -> list[MessageBatch]:
            return self.vandal.call(self.inner.step, slot, inbox)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    class Untrusted(cls):  # type: ignore[valid-type, misc]
        def make_coordinator(self) -> Any:
            inner = super().make_coordinator()
            return None if inner is None else UntrustedCoordinator(inner, self._vandal())

        def _vandal(self) -> _Vandal:
            if "_vandal_state" not in self.__dict__:
                self.__dict__["_vandal_state"] = _Vandal()
            return self.__dict__["_vandal_state"]

        def reset(self, context: Any) -> None:
            return self._vandal().call(super().reset, context)

        def act(self, step: Any) -> Any:
            return self._vandal().call(super().act, step)

        def observe(self, feedback: Any) -> None:
            return self._vandal().call(super().observe, feedback)

        def send(self, phase: Any) -> list[MessageBatch]:
            return self._vandal().call(super().send, phase)

        def receive(self, phase: Any, inbox: list[MessageBatch]) -> None:
            return self._vandal().call(super().receive, phase, inbox)

    Untrusted.__name__ = Untrusted.__qualname__ = f"Untrusted{cls.__name__}"
    return Untrusted


def test_the_vandal_writes_through_read_only_flags_but_not_into_immutable_arrays() -> None:
    """The check can fail: a read-only array that owns its memory, and a view of one, are overwritten."""
    owned = np.arange(3.0)
    owned.setflags(write=False)
    view = np.arange(3.0)[1:]
    view.base.setflags(write=False)
    view.setflags(write=False)
    batch = MessageBatch("x", [0], [0], [1], {"v": [1.0]}, count=[2])
    shared = [owned, view, {"key": np.ones(2)}]
    assert vandalise(shared) == 3
    assert (owned == -7).all() and (view == -7).all() and shared == []
    assert vandalise(batch) == 3  # the caller's header arrays, held as given; the count and payload are immutable
    assert batch.count.tolist() == [2] and batch.payload["v"].tolist() == [1.0]


#: Every case on the batched path, and the cases that check it on the PettingZoo path too.
PATHS = [(case, "batched") for case in CASES] + [(case, "pettingzoo") for case in PETTINGZOO]


@pytest.mark.parametrize(("case", "path"), PATHS, ids=[f"{case.name}-{path}" for case, path in PATHS])
def test_a_vandalising_learner_leaves_the_fingerprint_unchanged(case: Case, path: str) -> None:
    before = _Vandal.written_in_all
    found = differences(FIXTURE[case.name], fingerprint(case, path, untrusted))
    assert not found, "\n".join(str(d) for d in found[:10])
    assert _Vandal.written_in_all > before, "the learner overwrote nothing: the test checks nothing"
