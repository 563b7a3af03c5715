"""Results tables (CSV/Parquet round trips), claims on tidy results, and the leaderboard."""

import math

import numpy as np
import pytest

from fedbandit_envs.bench.claims import final_means, final_rows, monotone, ordering
from fedbandit_envs.bench.leaderboard import leaderboard, leaderboard_table
from fedbandit_envs.bench.report import evaluate_claims
from fedbandit_envs.bench.scenarios import Claim
from fedbandit_envs.bench.store import read_table, write_table
from fedbandit_envs.bench.tables import final_summary, mean_ci, number
from fedbandit_envs.run import Results

ROWS = [
    {"algorithm": "a", "seed": 0, "slot": 10, "epsilon": 1, "regret": 1.5, "flag": True, "topology": "ring", "x": None},
    {"algorithm": "b", "seed": 1, "slot": 20, "epsilon": 0.5, "regret": 2.0, "flag": False, "topology": [1, 2], "x": 3},
    {"algorithm": "c", "seed": 2, "slot": 30, "epsilon": math.inf, "regret": 0.1 + 0.2, "flag": True, "topology": "r"},
]
# numpy scalars count as Python numbers: int64 with float64 gives a float column.
NUMPY = [np.int64(3), np.float64(0.25), np.int64(-1)]
EXPECTED_COLUMNS = {
    "algorithm": ["a", "b", "c"],
    "seed": [0, 1, 2],
    "slot": [10, 20, 30],
    "epsilon": [1.0, 0.5, math.inf],
    "regret": [1.5, 2.0, 0.30000000000000004],
    "flag": [True, False, True],
    "topology": ["ring", "[1, 2]", "r"],
    "x": [None, 3, None],
    "z": [3.0, 0.25, -1.0],
}


@pytest.mark.parametrize("table_format", ["csv", "parquet"])
def test_table_round_trip_keeps_one_type_per_column(tmp_path, table_format):
    if table_format == "parquet":
        pytest.importorskip("pyarrow")
    rows = [{**row, "z": z} for row, z in zip(ROWS, NUMPY)]
    rows = read_table(write_table(rows, tmp_path / f"t.{table_format}", table_format))
    assert {column: [row[column] for row in rows] for column in rows[0]} == EXPECTED_COLUMNS
    assert [type(rows[0][k]) for k in ("seed", "epsilon", "flag", "topology", "z")] == [int, float, bool, str, float]
    assert [p.name for p in tmp_path.iterdir()] == [f"t.{table_format}"]


def results_from(finals):
    """Curves with two checkpoints per run; ``finals`` maps (algorithm, epsilon, seed) -> final regret."""
    curves = []
    for (algorithm, epsilon, seed), value in finals.items():
        for slot, regret in ((50, value / 2), (100, value)):
            row = {"algorithm": algorithm, "epsilon": epsilon, "seed": seed, "slot": slot, "group_regret": regret}
            curves.append({**row, "cost": 10.0 * (algorithm == "share") * slot / 100, "epsilon_max": epsilon})
    return Results(curves=curves)


SATISFIES = results_from(
    {
        **{
            ("share", e, s): r
            for e, rs in {0.5: (30, 34), 1.0: (20, 22), 2.0: (12, 10)}.items()
            for s, r in enumerate(rs)
        },
        **{
            ("solo", e, s): r
            for e, rs in {0.5: (40, 44), 1.0: (40, 44), 2.0: (40, 44)}.items()
            for s, r in enumerate(rs)
        },
    }
)
VIOLATES = results_from(
    {
        **{
            ("share", e, s): r
            for e, rs in {0.5: (30, 34), 1.0: (36, 38), 2.0: (12, 10)}.items()
            for s, r in enumerate(rs)
        },
        **{
            ("solo", e, s): r
            for e, rs in {0.5: (20, 24), 1.0: (20, 24), 2.0: (20, 24)}.items()
            for s, r in enumerate(rs)
        },
    }
)
CLAIMS = [
    ordering("sharing_helps", "sharing beats solo", ["share", "solo"]),
    monotone("privacy_costs", "regret decreases in epsilon", "epsilon", "decreasing", algorithm="share"),
]


def test_final_rows_and_means_by_hand():
    final = final_rows(SATISFIES.curves, ("algorithm", "epsilon", "seed"))
    assert len(final) == 12 and {r["slot"] for r in final} == {100}
    means = final_means(SATISFIES, "group_regret", by=("algorithm", "epsilon"))
    assert means[("share", 0.5)] == 32.0 and means[("share", 1.0)] == 21.0 and means[("share", 2.0)] == 11.0
    assert final_means(SATISFIES, "group_regret")[("solo",)] == 42.0  # (40 + 44) x 3 points / 6


def test_claims_pass_on_data_that_satisfies_them():
    outcomes = evaluate_claims(CLAIMS, SATISFIES)
    assert [o.status for o in outcomes] == ["PASS", "PASS"]
    assert outcomes[0].evidence == "final group_regret: share (21.33) < solo (42)"  # 128 / 6, 252 / 6
    assert (
        outcomes[1].evidence
        == "final group_regret decreasing in epsilon: epsilon=0.5: 32, epsilon=1.0: 21, epsilon=2.0: 11"
    )


def test_claims_fail_on_data_that_violates_them():
    outcomes = evaluate_claims(CLAIMS, VIOLATES)
    assert [o.status for o in outcomes] == ["FAIL", "FAIL"]
    assert "share (26.67) < solo (22)" in outcomes[0].evidence  # (30 + 34 + 36 + 38 + 12 + 10) / 6
    assert "epsilon=1.0: 37" in outcomes[1].evidence


def test_a_claim_that_raises_is_an_error_not_a_crash():
    broken = Claim("broken", "needs a column", lambda results: results.column("missing"))
    outcome = evaluate_claims([broken, CLAIMS[0]], SATISFIES)
    assert [o.status for o in outcome] == ["ERROR", "PASS"]
    assert outcome[0].evidence.startswith("KeyError")


def test_leaderboard_ranks_within_each_point_under_budgets():
    entries = leaderboard(SATISFIES, ["epsilon"])
    assert [(e["point"]["epsilon"], e["rank"], e["algorithm"]) for e in entries] == [
        (0.5, 1, "share"),
        (0.5, 2, "solo"),
        (1.0, 1, "share"),
        (1.0, 2, "solo"),
        (2.0, 1, "share"),
        (2.0, 2, "solo"),
    ]
    assert entries[0]["mean"] == 32.0 and entries[0]["n"] == 2 and entries[0]["cost"] == 10.0
    # 95% CI half-width of (30, 34): t(0.975, 1) * std / sqrt(2) = 12.7062 * 2.8284 / 1.4142 = 25.41
    assert entries[0]["ci95"] == pytest.approx(25.4124, abs=1e-4)
    budget = leaderboard(SATISFIES, ["epsilon"], max_cost=5.0, max_epsilon=1.0)
    assert [(e["rank"], e["note"]) for e in budget[:2]] == [(None, "cost 10 > 5"), (1, "")]
    assert [(e["rank"], e["note"]) for e in budget[4:]] == [
        (None, "cost 10 > 5; epsilon 2 > 1"),
        (None, "epsilon 2 > 1"),
    ]
    header, rows = leaderboard_table(budget, ["epsilon"])
    assert header == [
        "epsilon",
        "rank",
        "algorithm",
        "final group_regret (mean ± 95% CI)",
        "cost",
        "epsilon spent",
        "note",
    ]
    assert rows[0] == ["0.5", "-", "share", "32 ± 25", "10", "0.5", "cost 10 > 5"]
    with pytest.raises(ValueError, match="no column 'nope'"):
        leaderboard(SATISFIES, ["nope"])


def test_final_summary_and_number_formatting():
    header, rows = final_summary(SATISFIES, ["epsilon"])
    assert header == ["epsilon", "algorithm", "n", "slot", "group regret", "cost", "epsilon spent (max)"]
    assert rows[0] == ["0.5", "share", "2", "100", "32 ± 25", "10 ± 0", "0.5 ± 0"]
    assert rows[3] == ["0.5", "solo", "2", "100", "42 ± 25", "0 ± 0", "0.5 ± 0"]
    assert [number(19990.0), number(3.36e6), number(732.25), number(170.3, 2), number(0.1234, 2)] == [
        "19990",
        "3360000",
        "732.2",
        "170",
        "0.12",
    ]
    assert mean_ci({"mean": 5.0, "n": 1, "ci95_high": 5.0}) == "5"
