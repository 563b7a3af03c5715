"""Statistical checks of Li and Wang's claims (spec sections 4.6-4.7) through the scenario catalogue.

Default runs use reduced grids at small scale (fixed seeds 0-2; the measured numbers are in each test).
``-m slow`` runs every scenario's CI twin in full and the paper-scale Fig. 2a/2b comparison.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from agents.li_wang import LiWangConfig, log_det_bound
from fedbandit_envs.bench.catalogue.li_wang import (
    FIG2A,
    FIG2A_FRONTIER,
    FIG2B,
    FIG2C,
    FIG3,
    FIG3_CLASSIFICATION,
    SYNTHETIC_LAM,
    TABLE2_GAMMAS,
    async_label,
    frontier_comparisons,
    grid_monotone,
    payload_dimension,
    reward_order,
    table2_algorithms,
    table2_pattern,
    table2_uploads,
    threshold_algorithms,
)
from fedbandit_envs.bench.claims import final_means
from fedbandit_envs.bench.jobs import execute, expand, resolve_scenario
from fedbandit_envs.run import Results

# Statistical tier: claims and distributions checked with fixed seeds on many samples.
pytestmark = pytest.mark.statistical

INF = float("inf")


def run_scenario(scenario) -> Results:
    """Every job of a resolved scenario, in process, through the benchmark harness."""
    results = Results()
    for job in expand(scenario):
        results.extend(execute(job).results)
    return results


def verdicts(scenario, results: Results, names=None) -> dict:
    return {claim.name: claim.check(results) for claim in scenario.claims if names is None or claim.name in names}


def test_threshold_sweep_directions_and_extremes():
    """S1 at N=30, T=1000, d=K=6, seeds 0-2. Measured means: Async gamma = 1.01, 2, 101, inf:
    C 21960, 731, 102, 0 and R 15.5, 17.0, 28.4, 77.7; Sync D = 0.1, 1000: C 5199, 60 and R 15.5, 77.1.
    (R(inf) / R(1.01) is only 5.0 at this scale: S2 is checked at the CI scale below.)"""
    algorithms = threshold_algorithms((1.01, 2.0, 101.0, INF), (0.1, 1000.0))
    tiny = {"num_clients": 30, "num_arms": 6, "dimension": 6, "horizon": 1000, "seeds": 3}
    scenario = resolve_scenario(replace(FIG2A, algorithms=algorithms), "ci", tiny)
    results = run_scenario(scenario)
    checks = verdicts(scenario, results, ["async_monotone", "sync_monotone"])
    assert checks["async_monotone"].passed, checks["async_monotone"].evidence
    assert checks["sync_monotone"].passed, checks["sync_monotone"].evidence


def test_never_communicating_costs_five_times_the_regret():
    """S2 with the spec's factor 5 at the CI scale (N=100, T=3000, d=K=10, seeds 0-2): measured
    R(inf) / R(1.01) = 435.1 / 46.1 = 9.4 (21 at the paper's scale, spec 4.7)."""
    scenario = resolve_scenario(replace(FIG2A, algorithms=threshold_algorithms((1.01, INF), ())), "ci")
    check = verdicts(scenario, run_scenario(scenario), ["extremes"])["extremes"]
    assert check.passed, check.evidence
    assert check.values["ratio"] >= 5.0  # the catalogue's factor is the spec's


def test_zipf_arrivals_favour_async_at_matched_communication():
    """S4 at the CI scale (N=100, T=3000, d=K=10, seeds 0-2). Measured: 5 of 5 comparisons favour Async,
    e.g. Async gamma=11 (C=1198, R=60.3) against the Sync frontier's 67.2, Sync D=1000 (C=495, R=116)
    against the Async frontier's 67.9."""
    algorithms = threshold_algorithms((2.0, 11.0, 101.0, 1001.0), (10.0, 100.0, 1000.0))
    scenario = resolve_scenario(replace(FIG2B, algorithms=algorithms), "ci")
    results = run_scenario(scenario)
    check = verdicts(scenario, results, ["async_frontier"])["async_frontier"]
    assert check.passed, check.evidence
    assert len(frontier_comparisons(results)) >= 4


def test_am_regret_falls_and_communication_grows_with_global_dimension():
    """S5 at N=50, T=1500, d=12, K=10 (measured means over seeds 0-2, d_g = 2, 6, 10:
    R 628 > 538 > 393, C 117 < 433 < 700)."""
    scenario = replace(FIG2C, sweep={"env.global_dimension": [2, 6, 10]})
    small = {"num_clients": 50, "horizon": 1500, "dimension": 12, "num_arms": 10}
    scenario = resolve_scenario(scenario, "ci", small)
    checks = verdicts(scenario, run_scenario(scenario))
    assert checks["regret_falls_with_dg"].passed, checks["regret_falls_with_dg"].evidence
    assert checks["communication_grows_with_dg"].passed, checks["communication_grows_with_dg"].evidence


def test_frontier_comparison_by_hand():
    """The S3/S4 procedure on made-up points: interpolation in log C, the 1.05 x best floor, the ranges."""
    rows = []
    for label, comm, regret in (
        ("async gamma=2", 1000, 50.0),
        ("async gamma=11", 100, 80.0),
        ("sync D=10", 1000, 40.0),  # the panel's best: 1.05 x 40 = 42 is the floor
        ("sync D=100", 10, 100.0),
    ):
        rows.append({"algorithm": label, "seed": 0, "slot": 5, "messages": comm, "group_regret": regret})
    comparisons = frontier_comparisons(Results(curves=rows))
    # async 2 at C=1000 vs sync 40 -> sync; async 11 at C=100: sync frontier halfway in log C = 70 -> sync;
    # sync 10 is the floor (excluded); sync 100 at C=10 lies outside the async range [100, 1000].
    assert [(c["point"], c["other"], c["favours"]) for c in comparisons] == [
        ("async 2", 40.0, "sync"),
        ("async 11", 70.0, "sync"),
    ]


def test_grid_monotone_by_hand():
    """S1's rule: uploads non-increasing (a saturated plateau is allowed) and falling overall; R_T within 10%."""

    def rows(points):
        return Results(
            curves=[
                {
                    "algorithm": f"sync D={d}",
                    "seed": 0,
                    "slot": 1,
                    "messages": 2 * up,
                    "up_messages": up,
                    "group_regret": r,
                }
                for d, up, r in points
            ]
        )

    claim = grid_monotone("s1", "sync")
    assert claim.check(rows([(1, 500, 10.0), (10, 200, 9.5), (100, 200, 30.0)])).passed  # 5% dip, plateau
    assert not claim.check(rows([(1, 500, 10.0), (10, 200, 8.0)])).passed  # regret fell by 20%
    assert not claim.check(rows([(1, 500, 10.0), (10, 600, 12.0)])).passed  # uploads rose
    assert not claim.check(rows([(1, 200, 10.0), (10, 200, 12.0)])).passed  # no fall at all
    with pytest.raises(ValueError, match="only Async-LinUCB"):
        grid_monotone("s1", "sync", lam=0.1)
    with pytest.raises(ValueError, match="family must be"):
        grid_monotone("s1", "both")


def test_async_grid_rule_is_uploads_and_the_e5_bound_not_falling_communication():
    """S1 for Async (decision P3): C_T may rise along the grid (downloads), uploads may not; C_T < M L_T / log gamma.

    Made-up runs with d = 2 (6 scalars a message), T = 100, lam = 0.1: L_T = 2 log(1 + 100 / 0.2) = 12.43,
    so with M = 3 registered clients the bound at gamma = e is 37.3 and at gamma = e^2 18.6.
    """
    gain = 2 * np.log1p(100 / 0.2)
    assert log_det_bound(2, 100, 0.1) == pytest.approx(gain)

    def results(points, arrivals=(5, 0, 7, 1)):
        curves = [
            {
                "algorithm": async_label(g),
                "seed": 0,
                "slot": 100,
                "messages": c,
                "scalars": 6 * c,
                "up_messages": up,
                "group_regret": r,
            }
            for g, c, up, r in points
        ]
        agents = [
            {"algorithm": async_label(g), "seed": 0, "slot": slot, "agent": i, "arrivals": a if slot == 100 else 9}
            for g, *_ in points
            for slot in (50, 100)
            for i, a in enumerate(arrivals)
        ]
        return Results(curves=curves, agents=agents)

    claim = grid_monotone("s1", "async", lam=0.1)
    rising = [(np.e, 20, 10, 5.0), (np.e**2, 18, 4, 6.0), (INF, 0, 0, 50.0)]
    verdict = claim.check(results(rising))
    assert verdict.passed, verdict.evidence
    assert [e["bound"] for e in verdict.values["bounds"]] == pytest.approx([3 * gain, 3 * gain / 2, 0.0])
    assert "in 3 of 3 runs" in verdict.evidence
    over = [(np.e, 20, 10, 5.0), (np.e**2, 19, 4, 6.0), (INF, 0, 0, 50.0)]  # 19 > 18.6 at gamma = e^2
    assert not claim.check(results(over)).passed
    assert not claim.check(results([(np.e, 20, 10, 5.0), (INF, 1, 0, 50.0)])).passed  # gamma = inf sent something
    assert not claim.check(results([(np.e, 20, 4, 5.0), (np.e**2, 18, 10, 6.0)])).passed  # uploads rose
    unreadable = Results(
        curves=[{**row, "scalars": 7 * row["messages"]} for row in results(rising).curves],
        agents=results(rising).agents,
    )
    verdict = claim.check(unreadable)
    assert not verdict.passed and "d unreadable from the ledger in 2" in verdict.evidence


def test_payload_dimension_reads_d_off_the_ledger():
    assert payload_dimension(25 * 110, 25) == 10  # d^2 + d = 110 scalars a message
    assert payload_dimension(650 * 3, 3) == 25
    assert payload_dimension(0, 0) is None
    assert payload_dimension(7 * 4, 4) is None  # no integer d has d^2 + d = 7
    assert payload_dimension(111, 2) is None  # not a whole number of scalars per message


def test_synthetic_lambda_is_the_agents_default():
    """The S1 bound uses the catalogue's lambda; the Fig. 2 algorithms leave lambda at the agents' default."""
    assert LiWangConfig().lam == SYNTHETIC_LAM
    assert all("lam" not in spec.kwargs for spec in FIG2A.algorithms.values())


def test_reward_order_counts_seeds_by_hand():
    """S6's rule: the order must hold seed by seed in at least 8 of 10 seeds (all 3 of 3), not only on means."""

    def rows(per_seed):
        return Results(
            curves=[
                {"algorithm": label, "seed": seed, "slot": 9, "normalised_reward": value}
                for seed, values in enumerate(per_seed)
                for label, value in zip(("a", "b"), values)
            ]
        )

    claim = reward_order("s6", "a below b", ["a", "b"])
    assert claim.check(rows([(1.0, 2.0)] * 8 + [(2.0, 1.0)] * 2)).passed  # 8 of 10
    assert not claim.check(rows([(1.0, 2.0)] * 7 + [(2.0, 1.9)] * 3)).passed  # 7 of 10, though the means order
    assert not claim.check(rows([(1.0, 2.0), (1.0, 2.0), (2.5, 1.0)])).passed  # 2 of 3
    verdict = claim.check(rows([(1.0, 2.0)] * 3))
    assert verdict.passed and verdict.values["ordered_seeds"] == 3 and "ordered in 3 of 3 seeds" in verdict.evidence


# ---------------------------------------------------------------------- Fig. 3 on real classification data
@pytest.mark.parametrize("scenario", list(FIG3_CLASSIFICATION.values()), ids=lambda s: s.name)
def test_real_classification_ci_twin_claims(scenario):
    """The CI twins of Fig. 3 on scikit-learn's digits and wine (seeds 0-2): every claim holds; C_T is 0 at
    gamma = inf and at most N T at gamma = 1 (spec E2: one upload and a download per other registered client)."""
    pytest.importorskip("sklearn")
    resolved = resolve_scenario(scenario, "ci")
    results = run_scenario(resolved)
    for name, verdict in verdicts(resolved, results).items():
        assert verdict.passed, f"{name}: {verdict.evidence}"
    comm = final_means(results, "messages")
    assert comm[(async_label(INF),)] == 0
    env = resolved.env_kwargs
    assert comm[(async_label(1.0),)] <= env["num_clients"] * env["horizon"]


def test_table2_pattern_by_hand():
    """S7's report: uploads per Table 2 group (events // 10, >= 100 apart), the high threshold nearest 1-2% of
    C_T(gamma = 3), the two most active groups' share and whether every group uploads at gamma = 3."""
    events = [5, 15, 25, 35, 45, 55, 65, 75, 85, 95, 250]  # one client per group 0-9, one heavy client
    uploads = {3.0: [1] * 10 + [4], 101.0: [0] * 8 + [3, 1] + [5], 1001.0: [0] * 11}
    comm = {3.0: 10000, 101.0: 160, 1001.0: 10}  # ratios 1.6% and 0.1%: gamma = 101 is nearest to [1%, 2%]
    curves, agents = [], []
    for gamma, sent in uploads.items():
        for seed in (0, 1):
            label = async_label(gamma)
            curves.append({"algorithm": label, "seed": seed, "slot": 400, "messages": comm[gamma]})
            for slot in (200, 400):  # only the last checkpoint counts
                for i, (n, m) in enumerate(zip(events, sent)):
                    agents.append(
                        {
                            "algorithm": label,
                            "seed": seed,
                            "slot": slot,
                            "agent": i,
                            "arrivals": n,
                            "messages_sent": m if slot == 400 else 99,
                        }
                    )
    results = Results(curves=curves, agents=agents)
    assert table2_uploads(results, async_label(101.0))[1] == {**dict.fromkeys(range(8), 0), 8: 3, 9: 1, 10: 5}
    pattern = table2_pattern(results)
    assert pattern["high"] == 101.0 and pattern["comm_ratio"] == pytest.approx(0.016)
    assert pattern["uploads_high"] == [0] * 8 + [6, 2] and pattern["top_share"] == 1.0  # the heavy client is outside
    assert pattern["every_group_uploads"] and pattern["uploads_low"] == [2] * 10
    silent = Results(
        curves=curves, agents=[{**row, "messages_sent": 0} if row["agent"] == 3 else row for row in agents]
    )
    assert not table2_pattern(silent)["every_group_uploads"]
    with pytest.raises(ValueError, match="gamma = 3.0 and higher"):
        table2_pattern(Results(curves=curves[2:], agents=agents))


# ---------------------------------------------------------------------- slow: CI twins and paper scale
@pytest.mark.slow
@pytest.mark.parametrize("scenario", [FIG2A, FIG2A_FRONTIER, FIG2B, FIG2C, *FIG3.values()], ids=lambda s: s.name)
def test_ci_twin_claims(scenario):
    resolved = resolve_scenario(scenario, "ci")
    results = run_scenario(resolved)
    checks = verdicts(resolved, results)
    for name, verdict in checks.items():
        print(f"{resolved.name} {name}: {verdict.passed} -- {verdict.evidence}")
    for verdict in checks.values():
        assert verdict.passed, verdict.evidence


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "winner"), [(FIG2A_FRONTIER, "sync"), (FIG2B, "async")], ids=["uniform", "zipf"])
def test_paper_scale_frontier(scenario, winner):
    """S3/S4 at N=1000, T=30000, d=K=25 (2 seeds, the coarse grid of spec section 4.7)."""
    algorithms = threshold_algorithms((2.0, 11.0, 101.0, 1001.0, INF), (10.0, 100.0, 1000.0))
    resolved = resolve_scenario(replace(scenario, algorithms=algorithms), "paper", seeds=2)
    results = run_scenario(resolved)
    for comparison in frontier_comparisons(results):
        print(comparison)
    regret = final_means(results, "group_regret")
    comm = final_means(results, "messages")
    for label in algorithms:
        print(label, comm[(label,)], regret[(label,)])
    check = verdicts(resolved, results, [f"{winner}_frontier"])[f"{winner}_frontier"]
    assert check.passed, check.evidence
    assert regret[(async_label(INF),)] >= 5 * regret[(async_label(2.0),)]
    assert np.isfinite(regret[(async_label(2.0),)])


@pytest.mark.slow
def test_table2_upload_pattern_on_the_delicious_stand_in():
    """S7 (soft: reported, not gated) on the delicious stand-in's CI twin (200 users, seed 0), Async-LinUCB at gamma =
    3, 101, 1001, 6001. Gated: every upload is attributed to a Table 2 group or the heavy users. Measured (load 16):
    C_T 15034 (gamma = 3), 3895, 2310, 2006; uploads 258, 26, 18, 13; every group uploads at gamma = 3 (4 to 47
    times); the high threshold nearest 1-2% of C_T(3) is gamma = 6001 at 13%, where 1 of 11 Table 2 uploads come
    from the two most active groups (S7 expects >= 70%): the pattern does not reproduce on the stand-in at this
    size (its light users' few events in d = 25 cross log gamma before any download arrives)."""
    scenario = resolve_scenario(replace(FIG3["delicious"], algorithms=table2_algorithms(), claims=()), "ci", seeds=1)
    results = run_scenario(scenario)
    pattern = table2_pattern(results)
    print(pattern)
    uploads = {
        row["algorithm"]: row["up_messages"]
        for row in results.curves
        if row["slot"] == max(r["slot"] for r in results.curves)
    }
    for label, total in uploads.items():
        assert sum(table2_uploads(results, label)[0].values()) == total
    assert pattern["high"] in TABLE2_GAMMAS[1:]
