"""Heavy-tailed reward models with finite variance (Student-t, Pareto) for Dubey and Pentland's byzantine setting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from agents.dubey import ByzantineProofUCB
from fedbandit_envs.rewards import ParetoRewards, StudentTRewards, make_reward_model
from fedbandit_envs.run import run


def reference(model, mean):
    """The reward distribution as a scipy location-scale family (its mean and variance are exact formulas)."""
    if isinstance(model, StudentTRewards):
        return stats.t(model.nu, loc=mean, scale=model.sigma * math.sqrt((model.nu - 2) / model.nu))
    pareto = stats.pareto(model.alpha)
    scale = model.sigma / pareto.std()
    return stats.pareto(model.alpha, loc=mean - scale * pareto.mean(), scale=scale)


@pytest.mark.parametrize(
    "model",
    [
        StudentTRewards(nu=3.0, sigma=0.5),
        StudentTRewards(nu=6.0),
        ParetoRewards(alpha=3.0, sigma=0.5),
        ParetoRewards(4.5),
    ],
)
def test_rewards_are_the_quantiles_of_a_distribution_with_exact_mean_and_variance(model):
    u = np.linspace(0.001, 0.999, 999)
    for mean in (0.0, 0.3):
        law = reference(model, mean)
        np.testing.assert_allclose(model.transform(np.full(999, mean), u), law.ppf(u), rtol=1e-9, atol=1e-12)
        assert law.mean() == pytest.approx(mean, abs=1e-12) and law.var() == pytest.approx(model.sigma**2, rel=1e-12)


def test_sample_moments_agree():
    # 10^6 draws with finite fourth moments (nu = 6, alpha = 4.5): sd of the sample mean 0.001 x sigma
    rng = np.random.default_rng(0)
    for model in (StudentTRewards(nu=6.0, sigma=0.5), ParetoRewards(alpha=4.5, sigma=0.5)):
        draws = model.transform(np.full(10**6, 0.4), rng.random(10**6))
        assert abs(draws.mean() - 0.4) < 0.002 and abs(draws.std() - 0.5) < 0.01


def test_heavy_tails_and_the_pareto_floor():
    u = np.array([0.0, 1e-12, 0.5, 1 - 1e-12])
    t = StudentTRewards(nu=3.0).transform(np.zeros(4), u)
    assert np.all(np.isfinite(t)) and t[1] < -1e3 and t[3] > 1e3  # polynomial tails
    p = ParetoRewards(alpha=3.0, sigma=1.0).transform(np.zeros(4), u)
    assert p.min() == pytest.approx(-math.sqrt(1 / 3)) and p[3] > 1e3  # floor mean - sigma sqrt((a-2)/a)
    assert StudentTRewards().bounds == (-math.inf, math.inf) == ParetoRewards().bounds


def test_registered_by_name_with_clear_errors():
    assert make_reward_model("student_t", nu=4.0, sigma=2.0) == StudentTRewards(4.0, 2.0)
    assert make_reward_model("pareto", alpha=2.5) == ParetoRewards(2.5)
    with pytest.raises(ValueError, match="nu must be > 2"):
        make_reward_model("student_t", nu=2.0)
    with pytest.raises(ValueError, match="alpha must be > 2"):
        ParetoRewards(alpha=1.5)
    with pytest.raises(ValueError, match="sigma must be finite and > 0"):
        StudentTRewards(sigma=-1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument .nu.; accepted: alpha, sigma"):
        make_reward_model("pareto", nu=3.0)


def test_byzantine_ucb_runs_on_heavy_tailed_rewards_on_both_paths():
    # continuous rewards: the sample sets switch from the histogram to the sorted backend (D10)
    env = {
        "num_agents": 6,
        "num_arms": 3,
        "horizon": 60,
        "topology": "ring",
        "reward_model": "student_t",
        "reward_params": {"nu": 3.0, "sigma": 0.5},
    }
    make = lambda: ByzantineProofUCB(gamma=2, max_distinct=16)  # noqa: E731
    batched = run(make, env, [0, 1], checkpoints=60, batched=True)
    single = run(make, env, [1], checkpoints=60, batched=False)
    key = lambda r: [(row["slot"], row["group_regret"]) for row in r.curves if row["seed"] == 1]  # noqa: E731
    assert key(batched) == key(single)
