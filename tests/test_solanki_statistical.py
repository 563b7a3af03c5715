"""Statistical checks of FCB / P-FCB (solanki-pfcb §4.2 checks 13-18, §5.5).

Default run: a reduced configuration (n = 10, m = 30, T = 5000, one instance, 3-4 seeds) with fixed seeds; the
tolerances come from the spread measured over seeds (stated in each test). ``-m slow``: every catalogue
scenario at its ``"ci"`` scale (the spec's reduced config: T = 2e4, 2 instances x 3 seeds) must pass its
claims, and the Theorem-1 scaling of homogeneous FCBSync.
"""

import math

import numpy as np
import pytest

from agents.solanki import PFCB, check_and_update
from fedbandit_envs.bench import get, names
from fedbandit_envs.bench.scenarios import run_scenario
from fedbandit_envs.run import run

# Statistical tier: claims and distributions checked with fixed seeds on many samples.
pytestmark = pytest.mark.statistical

ENV = {"num_agents": 10, "num_producers": 30, "horizon": 5000, "instance_seed": 0}
SEEDS = [0, 1, 2, 3]


def final(results):
    return {key: np.array([row[key] for row in results.curves]) for key in results.curves[0]}


@pytest.fixture(scope="module")
def exp1():
    algorithms = {
        "nf": "solanki_nf",
        "fcb": "solanki_fcb",
        **{f"pfcb_{eps}": (lambda eps=eps: PFCB(epsilon=eps)) for eps in (0.2, 0.3, 0.5, 1.0, 2.0)},
    }
    return {label: final(run(alg, ENV, SEEDS, checkpoints=1)) for label, alg in algorithms.items()}


def test_exp1_ordering_at_reduced_scale(exp1):
    # measured mean regret per agent (sd over the 4 seeds): NF 3204 (28), FCB 1096 (54), P-FCB(1) 1432 (74),
    # P-FCB(0.3) 1626 (69): each gap is > 4 standard errors of the difference
    regret = {label: values["mean_regret"].mean() for label, values in exp1.items()}
    assert regret["fcb"] < regret["pfcb_1.0"] < regret["nf"]
    assert regret["pfcb_0.3"] >= 0.95 * regret["pfcb_1.0"]
    frr = {label: values["group_regret"].sum() / values["nf_group_regret"].sum() for label, values in exp1.items()}
    assert frr["nf"] == 1.0 and frr["fcb"] < frr["pfcb_1.0"] < 1


def test_frr_does_not_increase_with_epsilon(exp1):
    # measured FRR at eps 0.2, 0.3, 0.5, 1, 2: 0.532, 0.507, 0.486, 0.447, 0.412 (steps 0.02-0.04; the standard
    # error of one FRR over 4 seeds is about 0.01)
    series = [
        exp1[f"pfcb_{eps}"]["group_regret"].sum() / exp1[f"pfcb_{eps}"]["nf_group_regret"].sum()
        for eps in (0.2, 0.3, 0.5, 1.0, 2.0)
    ]
    assert all(b <= a for a, b in zip(series, series[1:])) and series[-1] < 1


def test_few_violations_after_exploration_in_the_paper_regime(exp1):
    # family U at alpha = 0.4: the constraint hardly ever binds (spec §4.5); measured 0 violations
    for values in exp1.values():
        assert values["violation_rate_after_explore"].max() <= 0.01


def test_per_agent_regret_falls_with_the_number_of_agents():
    # nested agents (pool of 20); measured mean regret per agent (sd over 3 seeds): n=5 1695 (41), n=10 1306 (135),
    # n=20 1071 (83): consecutive gaps are > 2.5 standard errors
    regret = []
    for n in (5, 10, 20):
        env = {**ENV, "num_agents": n, "agent_pool": 20}
        results = run(lambda: PFCB(epsilon=1.0), env, [0, 1, 2], checkpoints=1, reference=None)
        regret.append(final(results)["mean_regret"].mean())
    assert regret[0] > regret[1] > regret[2]


def test_few_violations_in_the_stress_family():
    # U at alpha = 0.7 (the constraint binds for most agents). Measured after exploration, T = 2000: about 0.1%
    # of (agent, round) pairs for NF and P-FCB (0.5% before, when the all-ones vector breaks QC)
    env = {**ENV, "instance": "stress", "horizon": 2000}
    for algorithm in ("solanki_nf", "solanki_pfcb"):
        values = final(run(algorithm, env, [0, 1], checkpoints=1, reference=None))
        assert values["violation_rate_after_explore"].max() <= 0.01


# ---------------------------------------------------------------------------------------------- slow
# EXP3 on family U: per-agent regret R(n) over nested agent sets is dominated by which agents an instance adds
# (a few agents with a producer of |rho q - c| ~ 0.002 and capacity ~45 keep ~2000-4000 regret whatever n), not
# by the seed, and about 870 of it is incurred in the 256 rounds before the first message, whatever n. Measured
# at T = 2e4 (n = 10..40): 2 instances x 3 seeds (the reduced config) 1748, 1490, 1287, 1302, 1242, 1365, 1329,
# Spearman -0.43; instances 0-5 x 3 seeds -0.54, instances 6-11 x 3 seeds -0.96. A longer horizon does not
# help (instance 0, 3 seeds: Spearman -0.86 at T = 2e4, -0.86 at 5e4, -0.96 at 1e5; instances 0-1 x 3 seeds
# at 1e5: -0.71). The ci twin is therefore 12 instances (0-11) x 1 seed at T = 2e4: seed 0 gives 1635, 1505,
# 1443, 1418, 1347, 1340, 1292 (standard errors over instances 56-84; Spearman -1.0); seeds 1 and 2 on the same
# instances give -0.96 and -0.89, and seed 0 on instances 12-23 and 24-35 gives -0.96 and -0.93 (6 instances x
# 1 seed: 5 of 6 disjoint sets pass, the worst -0.75). R(40) < R(10) in every set.
SOLANKI_SCENARIOS = [name for name in names() if name.startswith("solanki/")]


@pytest.mark.slow
@pytest.mark.parametrize("name", SOLANKI_SCENARIOS)
def test_catalogue_claims_hold_at_ci_scale(name):
    scenario = get(name)
    results = run_scenario(scenario, "ci")
    for claim in scenario.claims:
        verdict = claim.check(results)
        assert verdict.passed, f"{name}: {claim.name}: {verdict.evidence}"


@pytest.mark.slow
def test_fcb_sync_theorem_1_scaling():
    # §5.5 (a): homogeneous FCBSync per-agent regret over the non-federated one is about (1/n) ln(nT) / ln T;
    # hard check: in [0.04, 0.25] at n = 10, and falling over n in {1, 2, 5, 10, 20}. Measured (3 seeds): NF 3539;
    # ratios 1.0 (n = 1 is NF exactly), 0.535, 0.211, 0.117, 0.085
    env = {"num_producers": 30, "horizon": 20_000, "homogeneous": True, "instance_seed": 0, "agent_pool": 20}
    nf = final(run("solanki_nf", {**env, "num_agents": 1}, [0, 1, 2], checkpoints=1, reference=None))
    ratios = []
    for n in (1, 2, 5, 10, 20):
        sync = final(run("solanki_fcb_sync", {**env, "num_agents": n}, [0, 1, 2], checkpoints=1, reference=None))
        ratios.append(sync["mean_regret"].mean() / nf["mean_regret"].mean())
    assert all(b < a for a, b in zip(ratios, ratios[1:]))
    assert 0.04 <= ratios[3] <= 0.25


@pytest.mark.parametrize("pooled", [True, False], ids=["procedure1", "single_agent"])
@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
def test_hoeffding_width_of_the_acceptance_test(q, pooled):
    """§5.5 item 1: with N = 100 Bernoulli(q) samples, P(|q^ - q| >= sqrt(3 ln(nt) / (2N))) <= 2 (nt)^-3.

    Measured through Procedure 1: a message whose ratio is the true q is rejected exactly when |q^ - q| exceeds
    the width (``width_mult = 1``). 10^5 replications at nt = 10 (the pooled form, ``<=`` acceptance) and t = 10
    (the single-agent form on the local basis, strict ``<``); the rejection rate must be <= 0.002 + 3 SE.
    """
    reps, samples, log_arg = 100_000, 100, 10.0
    good = np.random.default_rng(int(q * 10) + 7 * pooled).binomial(samples, q, reps).astype(np.float64)
    count = np.full(reps, float(samples))
    w_tilde, y_tilde = np.full(reps, 1.0), np.full(reps, q)
    if pooled:
        _, _, accepted = check_and_update(count, good, w_tilde, y_tilde, log_arg=log_arg, width_mult=1.0)
    else:
        zeros = np.zeros(reps)
        _, _, accepted = check_and_update(
            zeros, zeros, w_tilde, y_tilde, log_arg=log_arg, width_mult=1.0, basis=(count, good), strict=True
        )
    bound = 2.0 * log_arg**-3
    rate = 1.0 - accepted.mean()
    assert rate <= bound + 3.0 * math.sqrt(bound * (1.0 - bound) / reps)
    # the width is what makes the test pass: a quarter of it rejects far more often than the bound
    _, _, narrow = check_and_update(count, good, w_tilde, y_tilde, log_arg=log_arg, width_mult=0.25)
    assert 1.0 - narrow.mean() > 10 * bound
