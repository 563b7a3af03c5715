"""Tests for fedbandit_envs.rewards: exact transforms, statistics with fixed seeds, errors."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from fedbandit_envs.rewards import (
    BernoulliRewards,
    BetaRewards,
    GaussianRewards,
    QuantileRewards,
    RewardModel,
    draw_noise,
    make_reward_model,
)


def uniform_window(means: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Quantile of U[mean - 0.1, mean + 0.1]."""
    return means - 0.1 + 0.2 * u


def too_wide(means: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Quantile whose rewards leave [0, 1]."""
    return means - 2.0 + 4.0 * u


# ---------------------------------------------------------------------------------------- Bernoulli


def test_bernoulli_transform_is_u_less_than_mean() -> None:
    model = BernoulliRewards()
    means = np.array([[0.0, 0.3, 0.3, 1.0], [0.5, 0.5, 0.9, 0.2]])
    noise = np.array([[0.0, 0.29, 0.3, 0.999], [0.49, 0.51, 0.0, 0.2]])
    expected = np.array([[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 1.0, 0.0]])
    out = model.transform(means, noise)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, expected)
    assert model.bounds == (0.0, 1.0)
    assert model.noise_kind == "uniform"
    assert model.name == "bernoulli"


def test_bernoulli_sample_uses_uniform_noise_of_rng() -> None:
    model = BernoulliRewards()
    means = np.full((3, 4), 0.4)
    expected = (np.random.default_rng(7).random((3, 4)) < 0.4).astype(float)
    np.testing.assert_array_equal(model.sample(means, np.random.default_rng(7)), expected)


# ----------------------------------------------------------------------------------------- Gaussian


def test_gaussian_transform_is_mean_plus_sigma_z() -> None:
    model = GaussianRewards(sigma=0.5)
    means = np.array([0.1, 0.2, -3.0])
    z = np.array([1.0, -2.0, 0.25])
    np.testing.assert_array_equal(model.transform(means, z), means + 0.5 * z)
    assert model.bounds == (-math.inf, math.inf)
    assert model.noise_kind == "normal"


def test_gaussian_clip() -> None:
    model = GaussianRewards(sigma=1.0, clip=(0.0, 1.0))
    out = model.transform(np.array([0.5, 0.5, 0.5]), np.array([-3.0, 0.2, 3.0]))
    np.testing.assert_array_equal(out, [0.0, 0.7, 1.0])
    assert model.bounds == (0.0, 1.0)


def test_gaussian_sample_uses_standard_normal_noise() -> None:
    model = GaussianRewards(sigma=2.0)
    expected = 0.3 + 2.0 * np.random.default_rng(3).standard_normal(5)
    np.testing.assert_array_equal(model.sample(np.full(5, 0.3), np.random.default_rng(3)), expected)


@pytest.mark.parametrize("sigma", [0.0, -1.0, math.nan, math.inf])
def test_gaussian_rejects_bad_sigma(sigma: float) -> None:
    with pytest.raises(ValueError, match="sigma"):
        GaussianRewards(sigma=sigma)


def test_gaussian_rejects_bad_clip() -> None:
    with pytest.raises(ValueError, match="clip"):
        GaussianRewards(clip=(1.0, 0.0))
    with pytest.raises(TypeError, match="clip"):
        GaussianRewards(clip=(0.0,))  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------- Beta


@pytest.mark.parametrize("mean", [0.05, 0.3, 0.5, 0.8, 0.97])
@pytest.mark.parametrize("concentration", [0.5, 2.0, 20.0])
@pytest.mark.statistical
def test_beta_empirical_mean_within_four_standard_errors(mean: float, concentration: float) -> None:
    model = BetaRewards(concentration=concentration)
    n = 200_000
    rewards = model.sample(np.full(n, mean), np.random.default_rng(12345))
    std_error = math.sqrt(mean * (1 - mean) / (concentration + 1) / n)
    assert abs(rewards.mean() - mean) < 4 * std_error
    assert rewards.min() >= 0.0 and rewards.max() <= 1.0


def test_beta_endpoints_are_point_masses() -> None:
    model = BetaRewards()
    noise = np.random.default_rng(0).random(1000)
    np.testing.assert_array_equal(model.transform(np.zeros(1000), noise), np.zeros(1000))
    np.testing.assert_array_equal(model.transform(np.ones(1000), noise), np.ones(1000))
    mixed = model.transform(np.array([0.0, 0.5, 1.0]), np.array([0.9, 0.5, 0.1]))
    assert mixed[0] == 0.0 and mixed[2] == 1.0 and 0.0 < mixed[1] < 1.0
    assert not np.any(np.isnan(mixed))


def test_beta_output_in_unit_interval_for_extreme_means() -> None:
    model = BetaRewards(concentration=0.01)
    means = np.array([1e-12, 1e-6, 0.5, 1 - 1e-9])
    noise = np.random.default_rng(1).random((10_000, 4))
    out = model.transform(means, noise)
    assert out.shape == (10_000, 4)
    assert np.all(np.isfinite(out)) and out.min() >= 0.0 and out.max() <= 1.0


def test_beta_transform_rejects_mean_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match="means"):
        BetaRewards().transform(np.array([0.5, 1.5]), np.array([0.1, 0.2]))


def test_beta_rejects_bad_concentration() -> None:
    with pytest.raises(ValueError, match="concentration"):
        BetaRewards(concentration=0.0)


# ----------------------------------------------------------------------------------------- Quantile


def test_quantile_custom_uniform_window() -> None:
    model = QuantileRewards(uniform_window, bounds=(0.0, 1.0), name="window")
    means = np.array([0.2, 0.5, 0.8])
    u = np.array([0.0, 0.5, 0.75])
    np.testing.assert_allclose(model.transform(means, u), [0.1, 0.5, 0.85], rtol=0, atol=1e-15)
    rewards = model.sample(np.full(100_000, 0.5), np.random.default_rng(2))
    assert abs(rewards.mean() - 0.5) < 4 * 0.2 / math.sqrt(12) / math.sqrt(100_000)
    assert model.name == "window" and model.bounds == (0.0, 1.0) and model.noise_kind == "uniform"


def test_quantile_out_of_bounds_raises() -> None:
    model = QuantileRewards(too_wide)
    with pytest.raises(ValueError, match="quantile"):
        model.transform(np.array([0.5]), np.array([0.99]))


def test_quantile_non_finite_or_wrong_shape_raises() -> None:
    with pytest.raises(ValueError, match="quantile"):
        QuantileRewards(lambda m, u: m * np.nan).transform(np.array([0.5]), np.array([0.1]))
    with pytest.raises(ValueError, match="quantile"):
        QuantileRewards(lambda m, u: m.sum()).transform(np.array([0.5, 0.2]), np.array([0.1, 0.3]))


def test_quantile_constructor_errors() -> None:
    with pytest.raises(TypeError, match="quantile"):
        QuantileRewards(0.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bounds"):
        QuantileRewards(uniform_window, bounds=(1.0, 1.0))


def test_quantile_equality_and_pickle() -> None:
    a = QuantileRewards(uniform_window, bounds=(0.0, 1.0))
    assert a == QuantileRewards(uniform_window, bounds=(0, 1))
    assert a != QuantileRewards(uniform_window, bounds=(-1.0, 1.0))
    assert a != QuantileRewards(too_wide)
    assert hash(a) == hash(QuantileRewards(uniform_window))
    assert pickle.loads(pickle.dumps(a)) == a
    assert "uniform_window" in repr(a)


# ------------------------------------------------------------------------------------ validate_means


@pytest.mark.parametrize(
    "model", [BernoulliRewards(), GaussianRewards(), BetaRewards(), QuantileRewards(uniform_window)]
)
def test_validate_means_rejects_nan(model: RewardModel) -> None:
    with pytest.raises(ValueError, match="means"):
        model.validate_means(np.array([[0.5, np.nan]]))


@pytest.mark.parametrize("model", [BernoulliRewards(), BetaRewards()])
def test_validate_means_rejects_out_of_unit_interval(model: RewardModel) -> None:
    with pytest.raises(ValueError, match="means"):
        model.validate_means(np.array([0.2, 1.5]))
    with pytest.raises(ValueError, match="means"):
        model.validate_means(np.array([-0.1]))
    model.validate_means(np.array([0.0, 0.5, 1.0]))


def test_validate_means_gaussian_accepts_any_finite() -> None:
    GaussianRewards().validate_means(np.array([-10.0, 3.5, 1e6]))
    with pytest.raises(ValueError, match="means"):
        GaussianRewards().validate_means(np.array([np.inf]))


def test_sample_validates_means_and_rng() -> None:
    with pytest.raises(ValueError, match="means"):
        BernoulliRewards().sample(np.array([1.5]), np.random.default_rng(0))
    with pytest.raises(TypeError, match="rng"):
        BernoulliRewards().sample(np.array([0.5]), 0)  # type: ignore[arg-type]


def test_draw_noise_kinds() -> None:
    np.testing.assert_array_equal(
        draw_noise("uniform", np.random.default_rng(4), 3), np.random.default_rng(4).random(3)
    )
    np.testing.assert_array_equal(
        draw_noise("normal", np.random.default_rng(4), (2, 2)),
        np.random.default_rng(4).standard_normal((2, 2)),
    )
    with pytest.raises(ValueError, match="noise kind"):
        draw_noise("laplace", np.random.default_rng(0), 3)  # type: ignore[arg-type]


def test_transform_broadcasts_over_replicas() -> None:
    means = np.array([0.2, 0.7])
    noise = np.random.default_rng(5).random((4, 2))
    for model in (BernoulliRewards(), BetaRewards()):
        assert model.transform(means, noise).shape == (4, 2)


# ------------------------------------------------------------------------------- make_reward_model


def test_make_reward_model_by_name() -> None:
    assert make_reward_model("bernoulli") == BernoulliRewards()
    assert make_reward_model("gaussian", sigma=0.5, clip=(0.0, 1.0)) == GaussianRewards(0.5, (0.0, 1.0))
    assert make_reward_model("beta", concentration=5.0) == BetaRewards(5.0)
    assert make_reward_model("Beta") == BetaRewards()


def test_make_reward_model_passes_instances_through() -> None:
    model = QuantileRewards(uniform_window)
    assert make_reward_model(model) is model


def test_make_reward_model_errors() -> None:
    with pytest.raises(ValueError, match="bernoulli.*beta.*gaussian"):
        make_reward_model("poisson")
    with pytest.raises(TypeError, match="sigma"):
        make_reward_model("bernoulli", sigma=1.0)
    with pytest.raises(TypeError, match="RewardModel"):
        make_reward_model(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="instance"):
        make_reward_model(BernoulliRewards(), sigma=1.0)


def test_equality_repr_and_hash() -> None:
    assert GaussianRewards(1.0, (0.0, 1.0)) == GaussianRewards(sigma=1, clip=[0, 1])  # type: ignore[arg-type]
    assert GaussianRewards(1.0) != GaussianRewards(2.0)
    assert BernoulliRewards() != BetaRewards()
    assert BetaRewards(2.0) == BetaRewards(2.0) and hash(BetaRewards(2.0)) == hash(BetaRewards(2.0))
    assert repr(GaussianRewards(0.5, (0.0, 1.0))) == "GaussianRewards(sigma=0.5, clip=(0.0, 1.0))"
    assert repr(BetaRewards()) == "BetaRewards(concentration=2.0)"
    assert pickle.loads(pickle.dumps(GaussianRewards(0.5))) == GaussianRewards(0.5)
