"""Refactors keep results: every reference algorithm's fingerprint equals the committed fixture bit for bit.

The cases are listed in ``tests/fingerprints/cases.py``; a fingerprint (``tests/fingerprints/record.py``)
holds regret at checkpoints and per agent, every ledger total, privacy spent, the family's extra columns,
the wrappers' hook state and digests of the whole trajectory. A failure names the case, seed and field
and shows both values. Regenerate the fixture only when an issue explicitly changes results (see
``cases.py``); never to make a refactor pass.
"""

from __future__ import annotations

import pytest
from fingerprints.cases import CASES
from fingerprints.record import Case, Difference, differences, fingerprint, load_fixture

FIXTURE = load_fixture()
PETTINGZOO = [case for case in CASES if case.check_pettingzoo]


def report(name: str, path: str, found: list[Difference]) -> str:
    """A failure message: the case, the path and the first differences (seed, field, both values)."""
    shown = "\n  ".join(str(d) for d in found[:25]) + (f"\n  ... and {len(found) - 25} more" if len(found) > 25 else "")
    return f"case {name!r} ({path} path) differs from tests/fingerprints/fingerprints.json:\n  {shown}"


def test_the_fixture_holds_exactly_the_listed_cases() -> None:
    assert sorted(FIXTURE) == sorted(case.name for case in CASES)
    changed = [case.name for case in CASES if FIXTURE[case.name]["spec"] != case.spec()]
    assert not changed, f"cases edited since the fixture was recorded (regenerate them): {changed}"


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_fingerprint(case: Case) -> None:
    found = differences(FIXTURE[case.name], fingerprint(case, "batched"))
    assert not found, report(case.name, "batched", found)


@pytest.mark.parametrize("case", PETTINGZOO, ids=[case.name for case in PETTINGZOO])
def test_pettingzoo_path_gives_the_same_fingerprint(case: Case) -> None:
    """Replica b of the batched run equals the single PettingZoo run of seed b (both equal the fixture)."""
    found = differences(FIXTURE[case.name], fingerprint(case, "pettingzoo"))
    assert not found, report(case.name, "pettingzoo", found)
