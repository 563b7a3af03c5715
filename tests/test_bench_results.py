"""Results tables (CSV/Parquet round trips), claims on tidy results, and the leaderboard."""

import math
import warnings

import numpy as np
import pytest

from fedbandit_envs.bench.claims import final_means, final_rows, monotone, ordering
from fedbandit_envs.bench.leaderboard import (
    holm,
    leaderboard,
    leaderboard_legend,
    leaderboard_table,
    rank_text,
    welch_p,
)
from fedbandit_envs.bench.report import evaluate_claims
from fedbandit_envs.bench.scenarios import Claim
from fedbandit_envs.bench.store import read_table, write_table
from fedbandit_envs.bench.tables import final_legend, final_summary, mean_ci, nonfinite_note, number
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


def per_seed(algorithm, by_epsilon):
    """``results_from`` entries of ``algorithm``: ``by_epsilon`` maps epsilon -> final regret of seeds 0, 1, ..."""
    return {(algorithm, e, s): r for e, rs in by_epsilon.items() for s, r in enumerate(rs)}


SATISFIES = results_from(
    {
        **per_seed("share", {0.5: (30, 34), 1.0: (20, 22), 2.0: (12, 10)}),
        **per_seed("solo", {0.5: (40, 44), 1.0: (40, 44), 2.0: (40, 44)}),
    }
)
VIOLATES = results_from(
    {
        **per_seed("share", {0.5: (30, 34), 1.0: (36, 38), 2.0: (12, 10)}),
        **per_seed("solo", {0.5: (20, 24), 1.0: (20, 24), 2.0: (20, 24)}),
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
    assert outcomes[0].evidence == "final group_regret, mean over runs: share (21.33) < solo (42)"  # 128 / 6, 252 / 6
    assert (
        outcomes[1].evidence == "final group_regret, mean over runs, decreasing in epsilon: "
        "epsilon=0.5: 32, epsilon=1.0: 21, epsilon=2.0: 11"
    )
    assert [o.band for o in outcomes] == [
        "strict: each mean below the next, no tolerance",
        "no tolerance: no step may rise (equal means pass)",
    ]


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
    # epsilon 0.5: (30, 34) vs (40, 44): Welch p = 0.072 (see the next test) > 0.05, a tie; at 1.0 and 2.0 the
    # gaps (21 and 31 with standard errors 2.2 and 2.2) give p = 0.027 and 0.016: share is ahead
    assert [(e["point"]["epsilon"], e["rank"], e["tied"], e["algorithm"], e["unseparated"]) for e in entries] == [
        (0.5, 1, True, "share", ["solo"]),
        (0.5, 1, True, "solo", ["share"]),
        (1.0, 1, False, "share", []),
        (1.0, 2, False, "solo", []),
        (2.0, 1, False, "share", []),
        (2.0, 2, False, "solo", []),
    ]
    assert [rank_text(e) for e in entries] == ["=1", "=1", "1", "2", "1", "2"]
    assert entries[0]["mean"] == 32.0 and entries[0]["n"] == 2 and entries[0]["cost"] == 10.0
    # 95% CI half-width of (30, 34): t(0.975, 1) * std / sqrt(2) = 12.7062 * 2.8284 / 1.4142 = 25.41
    assert entries[0]["ci95"] == pytest.approx(25.4124, abs=1e-4)
    budget = leaderboard(SATISFIES, ["epsilon"], max_cost=5.0, max_epsilon=1.0)
    # ranked entries first, then those over budget
    assert [(e["algorithm"], e["rank"], e["note"]) for e in budget[:2]] == [
        ("solo", 1, ""),
        ("share", None, "cost 10 > 5"),
    ]
    assert [(e["rank"], e["note"]) for e in budget[4:]] == [
        (None, "cost 10 > 5; epsilon 2 > 1"),
        (None, "epsilon 2 > 1"),
    ]
    assert [rank_text(e) for e in budget] == ["1", "-", "1", "-", "-", "-"]
    header, rows = leaderboard_table(budget, ["epsilon"])
    assert header == [
        "epsilon",
        "rank",
        "algorithm",
        "seeds",
        "final group_regret (mean ± 95% CI)",
        "cost (price units, mean)",
        "epsilon spent (mean)",
        "not separated from",
        "note",
    ]
    assert rows[:2] == [
        ["0.5", "1", "solo", "2", "42 ± 25", "0", "0.5", "", ""],
        ["0.5", "-", "share", "2", "32 ± 25", "10", "0.5", "", "cost 10 > 5"],
    ]
    bare = Results(curves=[{k: v for k, v in r.items() if k not in ("cost", "epsilon_max")} for r in SATISFIES.curves])
    unranked = leaderboard(bare, ["epsilon"], max_cost=5.0, max_epsilon=1.0)
    assert {(e["rank"], e["note"]) for e in unranked} == {(None, "no cost column; no privacy accounting")}
    assert leaderboard_table(unranked, ["epsilon"])[1][0] == [
        "0.5",
        "-",
        "share",
        "2",
        "32 ± 25",
        "-",
        "",
        unranked[0]["note"],
    ]
    with pytest.raises(ValueError, match="no column 'nope'"):
        leaderboard(SATISFIES, ["nope"])


def test_an_algorithm_without_accounting_beside_others_is_not_ranked_under_that_budget():
    """Its epsilon (or cost) is NaN where the others' are numbers: unranked, not taken as within the budget."""
    mixed = Results(
        curves=[
            {**row, "epsilon_max": math.nan, "cost": math.nan} if row["algorithm"] == "solo" else row
            for row in SATISFIES.curves
        ]
    )
    entries = leaderboard(mixed, ["epsilon"], max_epsilon=5.0)
    assert [(e["algorithm"], e["rank"], e["note"]) for e in entries if e["point"]["epsilon"] == 0.5] == [
        ("share", 1, ""),
        ("solo", None, "no privacy accounting"),
    ]
    costed = leaderboard(mixed, ["epsilon"], max_cost=50.0)
    assert {e["note"] for e in costed if e["algorithm"] == "solo"} == {"no cost column"}
    header, rows = leaderboard_table(leaderboard(mixed, ["epsilon"]), ["epsilon"])
    solo = next(row for row in rows if row[2] == "solo")
    assert solo[header.index("epsilon spent (mean)")] == "-" and solo[header.index("cost (price units, mean)")] == "-"
    header, rows = final_summary(mixed, ["epsilon"], ["group_regret", "epsilon_max"])
    assert [row[header.index("epsilon spent (max): mean ± 95% CI")] for row in rows if row[1] == "solo"] == ["-"] * 3


def test_welch_p_and_holm_by_hand():
    # Welch on (30, 34) vs (40, 44): t = -10 / sqrt(4 + 4), df = 2, two-sided p = 1 - |t| / sqrt(2 + t^2)
    assert welch_p([30, 34], [40, 44]) == pytest.approx(1 - math.sqrt(12.5 / 14.5), rel=1e-12)
    assert welch_p([1, 1], [2, 2]) == 0.0 and welch_p([3, 3, 3], [3, 3]) == 1.0  # constant samples: exact
    assert math.isnan(welch_p([1], [2, 3]))  # one seed: no variance, no test
    # One constant sample (a deterministic learner): t = (4 - 3) / sqrt(0.5 / 2) = 2, df = 1, p = 1 - 2 atan(t) / pi
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # SciPy's warning about nearly identical data does not apply to exact ones
        expected = 1 - 2 * math.atan(2) / math.pi
        assert welch_p([3, 3, 3], [3.5, 4.5]) == pytest.approx(expected, rel=1e-12)
        assert welch_p([3.5, 4.5], [3, 3, 3]) == pytest.approx(expected, rel=1e-12)
    # Holm at 0.05: sorted p 0.01 <= 0.05 / 3, then 0.03 > 0.05 / 2 stops (0.04 is not tested)
    assert holm([0.01, 0.04, 0.03]) == [True, False, False]
    assert holm([0.04, 0.01, 0.02]) == [True, True, True]  # 0.01 <= 0.0167, 0.02 <= 0.025, 0.04 <= 0.05
    assert holm([0.001, float("nan"), 0.02]) == [True, False, True]  # NaN sorts last and is never rejected
    assert holm([0.03, 0.03], alpha=0.1) == [True, True] and holm([]) == []
    with pytest.raises(ValueError, match="alpha must be in"):
        holm([0.1], alpha=1.5)


def test_leaderboard_ties_need_the_multiple_comparison_correction():
    # a: (0, 1, 2), b: (2, 3, 4), c: (4, 5, 6): Welch p(a, b) = p(b, c) = 0.0705 (t = 2.449, df = 4), p(a, c) = 0.0080.
    # Holm over the 3 pairs: 0.0080 <= 0.05 / 3 is rejected, 0.0705 > 0.05 / 2 stops: a beats c only.
    runs = {("a", 0.5, s): v for s, v in enumerate((0, 1, 2))}
    runs |= {("b", 0.5, s): v for s, v in enumerate((2, 3, 4))}
    runs |= {("c", 0.5, s): v for s, v in enumerate((4, 5, 6))}
    entries = leaderboard(results_from(runs))
    assert [(e["algorithm"], rank_text(e), e["unseparated"]) for e in entries] == [
        ("a", "=1", ["b"]),
        ("b", "=1", ["a", "c"]),
        ("c", "2", ["b"]),
    ]
    # the overlap seen before ties were shown: 659 ± 97 was ranked above 732 ± 94 (3 seeds); Welch p = 0.081
    overlap = {("thompson", 0.5, s): 659 + d for s, d in enumerate((-39, 0, 39))}
    overlap |= {("full_sharing_ucb", 0.5, s): 732 + d for s, d in enumerate((-38, 0, 38))}
    entries = leaderboard(results_from(overlap))
    assert [(e["algorithm"], rank_text(e), e["summary"]) for e in entries] == [
        ("thompson", "=1", "659 ± 97"),
        ("full_sharing_ucb", "=1", "732 ± 94"),
    ]
    # one seed each: nothing can be separated, every entry ties
    single = leaderboard(results_from({("a", 0.5, 0): 1.0, ("b", 0.5, 0): 9.0}))
    assert [(e["algorithm"], rank_text(e), e["summary"]) for e in single] == [("a", "=1", "1"), ("b", "=1", "9")]


def test_leaderboard_orders_by_rank_when_a_wide_entry_is_not_separated():
    # a: tight low, b: tight high, w: mean between them but wide: only a vs b is separated, so w shares rank 1
    # and is listed before b (rank 2) although b's mean is lower than w's
    runs = {("a", 0.5, s): v for s, v in enumerate((10.0, 10.1, 9.9, 10.0))}
    runs |= {("b", 0.5, s): v for s, v in enumerate((20.0, 20.1, 19.9, 20.0))}
    runs |= {("w", 0.5, s): v for s, v in enumerate((0.0, 50.0, 0.0, 50.0))}
    entries = leaderboard(results_from(runs))
    assert [(e["algorithm"], rank_text(e), e["unseparated"]) for e in entries] == [
        ("a", "=1", ["w"]),
        ("w", "=1", ["a", "b"]),
        ("b", "2", ["w"]),
    ]


def test_leaderboard_legend_names_the_test_the_interval_and_the_cost_unit():
    legend = leaderboard_legend()
    assert (
        "Welch t-tests on the per-seed final values, every pair of the point, Holm-corrected at family-wise level 0.05"
        in legend
    )
    assert "marked '=' (e.g. '=2')" in legend
    assert "Mean ± x: x is the half-width of the 95% confidence interval of the mean" in legend
    assert (
        "Cost is in price units of the run's CostModel: c1 per agent-server link and c2 per agent-agent link" in legend
    )
    assert "price_per_message per logical message and price_per_byte per payload byte" in legend
    assert "level 0.01" in leaderboard_legend(alpha=0.01)


def test_final_summary_and_number_formatting():
    header, rows = final_summary(SATISFIES, ["epsilon"])
    assert header == [
        "epsilon",
        "algorithm",
        "seeds",
        "slot",
        "group regret: mean ± 95% CI",
        "cost (price units): mean ± 95% CI",
        "epsilon spent (max): mean ± 95% CI",
    ]
    legend = final_legend(SATISFIES)
    assert legend.startswith("Mean ± x: x is the half-width of the 95% confidence interval of the mean (Student t")
    assert "Cost is in price units" in legend and "Messages" not in legend  # only the units of the columns shown
    ledger = Results(curves=[{**row, "messages": 3, "bytes": 24} for row in SATISFIES.curves])
    assert final_summary(ledger)[0][5:7] == ["messages (count): mean ± 95% CI", "bytes (payload bytes): mean ± 95% CI"]
    assert "Messages counts logical messages transmitted, one per recipient" in final_legend(ledger)
    assert "Bytes counts payload bytes over every transmitted copy" in final_legend(ledger)
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


def test_non_finite_final_values_are_named_under_the_table_and_not_ranked():
    results = results_from(
        {
            **per_seed("share", {1.0: (20, math.nan, 22)}),
            **per_seed("solo", {1.0: (40, 44, -math.inf)}),
            **per_seed("plain", {1.0: (30, 31, 32)}),
        }
    )
    for row in results.curves:
        if row["algorithm"] == "plain":
            row["epsilon_max"] = math.nan  # no privacy accounting: no value, not a non-finite one
    header, rows = final_summary(results, ["epsilon"])
    assert [row[2] for row in rows] == ["3", "3", "3"] and [row[4] for row in rows][:2] == ["-", "-inf ± nan"]
    assert nonfinite_note(results, ["epsilon"]) == (
        "Not finite (NaN or ±inf) at the final checkpoint, so the mean shows '-' or inf: group regret of "
        "share [epsilon=1.0] (1 of 3 seeds), solo [epsilon=1.0] (1 of 3 seeds)."
    )
    assert nonfinite_note(SATISFIES, ["epsilon"]) == "" and nonfinite_note(Results()) == ""
    entries = leaderboard(results, ["epsilon"])
    assert [(e["algorithm"], e["rank"], e["note"]) for e in entries] == [
        ("plain", 1, ""),
        ("solo", None, "group_regret not finite in 1 of 3 seeds"),
        ("share", None, "group_regret not finite in 1 of 3 seeds"),
    ]
    assert "or a final group_regret that is not finite in some seed" in leaderboard_legend()
