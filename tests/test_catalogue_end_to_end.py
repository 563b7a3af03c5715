"""Every registered scenario, end to end: ``fedbandit sweep NAME --scale ci --report`` and every claim passes.

This runs the catalogue the way a user does (job expansion, the result store, the report), so a scenario whose
cells return no rows, whose report cannot be drawn or whose claims fail at the CI scale is caught. It is the slow
tier (``-m slow``): the whole catalogue at the CI scale takes tens of CPU minutes.
"""

from __future__ import annotations

import pytest

from fedbandit_envs.bench.report import evaluate_claims
from fedbandit_envs.bench.scenarios import get, names
from fedbandit_envs.bench.store import load_results
from fedbandit_envs.cli import main


@pytest.mark.slow
@pytest.mark.parametrize("name", names())
def test_scenario_sweeps_and_reports_with_every_claim_passing(name, tmp_path):
    pytest.importorskip("matplotlib")
    argv = ["sweep", name, "--scale", "ci", "--report", "--backend", "inprocess", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    report = (tmp_path / "report.md").read_text()
    claims = get(name).claims
    outcomes = evaluate_claims(claims, load_results(tmp_path))
    failed = [f"{o.name} {o.status}: {o.evidence}" for o in outcomes if o.status != "PASS"]
    assert not failed, failed
    if claims:
        assert f"{len(claims)} of {len(claims)} claim(s) pass." in report
