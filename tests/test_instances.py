"""Tests for fedbandit_envs.instances: derived quantities, generators (Li-Song D15), errors."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from fedbandit_envs.instances import (
    BanditInstance,
    from_means,
    heterogeneous_centered,
    homogeneous_uniform,
    make_instance,
)

HAND_MADE = np.array([[0.9, 0.5, 0.1], [0.1, 0.7, 0.3]])  # global means (0.5, 0.6, 0.2)


# --------------------------------------------------------------------------------- BanditInstance


def test_derived_quantities_on_hand_made_instance() -> None:
    inst = BanditInstance(HAND_MADE)
    assert (inst.num_agents, inst.num_arms) == (2, 3) and inst.shape == (2, 3)
    np.testing.assert_allclose(inst.global_means, [0.5, 0.6, 0.2], rtol=0, atol=1e-15)
    assert inst.best_arm == 1
    assert inst.best_mean == pytest.approx(0.6, abs=1e-15)
    np.testing.assert_allclose(inst.gaps, [0.1, 0.0, 0.4], rtol=0, atol=1e-15)
    assert inst.gaps[inst.best_arm] == 0.0
    assert inst.min_gap == pytest.approx(0.1, abs=1e-15)
    np.testing.assert_array_equal(inst.local_best_arms, [0, 1])
    assert not inst.is_homogeneous
    arms = np.array([[0, 1, 2], [2, 2, 1]])
    np.testing.assert_allclose(inst.pseudo_regret(arms), [[0.1, 0.0, 0.4], [0.4, 0.4, 0.0]], atol=1e-15)
    assert inst.pseudo_regret(arms).shape == (2, 3)


def test_means_are_a_read_only_copy() -> None:
    source = HAND_MADE.copy()
    inst = BanditInstance(source)
    source[0, 0] = 0.0
    assert inst.means[0, 0] == 0.9
    for array in (inst.means, inst.global_means, inst.gaps, inst.local_best_arms):
        with pytest.raises(ValueError):
            array[0] = 1.0
    assert inst.means.dtype == np.float64


def test_ties_go_to_lowest_index() -> None:
    inst = BanditInstance(np.array([[0.2, 0.8, 0.8], [0.8, 0.8, 0.2]]))
    np.testing.assert_array_equal(inst.local_best_arms, [1, 0])
    assert inst.best_arm == 1  # global means (0.5, 0.8, 0.5)


def test_min_gap_raises_when_all_arms_tie() -> None:
    inst = BanditInstance(np.array([[0.4, 0.6], [0.6, 0.4]]))
    with pytest.raises(ValueError, match="pass delta explicitly"):
        _ = inst.min_gap


def test_pseudo_regret_errors() -> None:
    inst = BanditInstance(HAND_MADE)
    with pytest.raises(ValueError, match="arms"):
        inst.pseudo_regret(np.array([0, 3]))
    with pytest.raises(ValueError, match="arms"):
        inst.pseudo_regret(np.array([-1]))
    with pytest.raises(TypeError, match="arms"):
        inst.pseudo_regret(np.array([0.5]))


@pytest.mark.parametrize(
    ("means", "match"),
    [
        (np.array([0.1, 0.2]), "2-D"),
        (np.zeros((0, 3)), "M < 1"),
        (np.zeros((2, 1)), "K < 2"),
        (np.array([[0.1, np.nan]]), "finite"),
        (np.array([[0.1, np.inf]]), "finite"),
    ],
)
def test_bandit_instance_validation(means: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BanditInstance(means)


def test_pickle_round_trip_keeps_read_only() -> None:
    inst = pickle.loads(pickle.dumps(BanditInstance(HAND_MADE)))
    np.testing.assert_array_equal(inst.means, HAND_MADE)
    assert inst.best_arm == 1
    assert not inst.means.flags.writeable and not inst.gaps.flags.writeable


# -------------------------------------------------------------------------------------- generators


def test_homogeneous_uniform_rows_identical() -> None:
    inst = homogeneous_uniform(4, 6, np.random.default_rng(0))
    assert inst.shape == (4, 6)
    assert inst.is_homogeneous
    np.testing.assert_array_equal(inst.means, np.tile(inst.means[0], (4, 1)))
    np.testing.assert_array_equal(inst.means[0], np.random.default_rng(0).random(6))
    np.testing.assert_array_equal(inst.global_means, inst.means[0])  # exact, no averaging round-off
    assert np.all((inst.means >= 0) & (inst.means < 1))
    np.testing.assert_array_equal(inst.local_best_arms, np.full(4, inst.best_arm))


@pytest.mark.parametrize(("num_agents", "num_arms", "seed"), [(5, 10, 0), (100, 100, 1), (2, 2, 2), (50, 3, 3)])
def test_heterogeneous_centered_invariants(num_agents: int, num_arms: int, seed: int) -> None:
    inst = heterogeneous_centered(num_agents, num_arms, np.random.default_rng(seed))
    assert inst.shape == (num_agents, num_arms)
    assert np.all((inst.means >= 0.0) & (inst.means <= 1.0))
    assert np.any(inst.local_best_arms != inst.best_arm)
    assert not inst.is_homogeneous


def test_heterogeneous_centered_matches_d15_formula() -> None:
    num_agents, num_arms, h_max = 6, 8, 0.3
    inst = heterogeneous_centered(
        num_agents, num_arms, np.random.default_rng(11), h_max=h_max, require_local_best_differs=False
    )
    rng = np.random.default_rng(11)
    mu = rng.uniform(0.0, 1.0, num_arms)
    u = rng.uniform(-1.0, 1.0, (num_agents, num_arms))
    u = u - u.mean(axis=0)
    h = np.minimum(np.minimum(mu, 1 - mu), h_max)
    expected = mu + h * u / np.abs(u).max(axis=0)
    np.testing.assert_allclose(inst.means, expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(inst.means.mean(axis=0), mu, rtol=0, atol=1e-12)
    np.testing.assert_allclose(inst.global_means, mu, rtol=0, atol=1e-12)
    # each column reaches mu_k +- h_k at the agent with the largest |u|
    np.testing.assert_allclose(np.abs(inst.means - mu).max(axis=0), h, rtol=1e-12, atol=1e-15)


def test_heterogeneous_centered_global_mean_over_many_seeds() -> None:
    for seed in range(20):
        rng = np.random.default_rng(seed)
        inst = heterogeneous_centered(7, 12, rng, h_max=0.5, require_local_best_differs=False)
        replay = np.random.default_rng(seed).uniform(0.0, 1.0, 12)
        np.testing.assert_allclose(inst.global_means, replay, rtol=0, atol=1e-12)
        assert inst.means.min() >= 0.0 and inst.means.max() <= 1.0


def test_heterogeneous_centered_is_deterministic_for_a_seed() -> None:
    a = heterogeneous_centered(10, 20, np.random.default_rng(42))
    b = heterogeneous_centered(10, 20, np.random.default_rng(42))
    c = heterogeneous_centered(10, 20, np.random.default_rng(43))
    np.testing.assert_array_equal(a.means, b.means)
    assert not np.array_equal(a.means, c.means)


def test_heterogeneous_centered_resamples_until_local_best_differs() -> None:
    # With 2 agents, 2 arms and a small h_max the first draws usually agree; the generator must retry.
    for seed in range(10):
        inst = heterogeneous_centered(2, 2, np.random.default_rng(seed), h_max=0.3)
        assert np.any(inst.local_best_arms != inst.best_arm)
    # seed 0: the first draw is rejected, so the result is the second draw of the same stream
    first = heterogeneous_centered(2, 2, np.random.default_rng(0), require_local_best_differs=False)
    assert np.all(first.local_best_arms == first.best_arm)
    rng = np.random.default_rng(0)
    heterogeneous_centered(2, 2, rng, require_local_best_differs=False)
    second = heterogeneous_centered(2, 2, rng, require_local_best_differs=False)
    np.testing.assert_array_equal(heterogeneous_centered(2, 2, np.random.default_rng(0)).means, second.means)


def test_heterogeneous_centered_errors() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="require_local_best_differs"):
        heterogeneous_centered(1, 5, rng)
    with pytest.raises(ValueError, match="require_local_best_differs"):
        heterogeneous_centered(3, 5, rng, h_max=0.0)
    with pytest.raises(ValueError, match="h_max"):
        heterogeneous_centered(3, 5, rng, h_max=-0.1)
    with pytest.raises(ValueError, match="max_tries"):
        heterogeneous_centered(2, 2, rng, h_max=1e-9, max_tries=1)
    single = heterogeneous_centered(1, 5, rng, require_local_best_differs=False)
    assert single.is_homogeneous  # one agent: centring leaves zero perturbation
    with pytest.raises(TypeError, match="rng"):
        heterogeneous_centered(3, 5, 0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------- from_means


def test_from_means_tiles_a_vector() -> None:
    inst = from_means([0.1, 0.9, 0.5], num_agents=3)
    assert inst.shape == (3, 3) and inst.is_homogeneous and inst.best_arm == 1
    with pytest.raises(ValueError, match="num_agents"):
        from_means([0.1, 0.9])
    with pytest.raises(ValueError, match="num_agents"):
        from_means(HAND_MADE, num_agents=3)
    np.testing.assert_array_equal(from_means(HAND_MADE).means, HAND_MADE)


# ------------------------------------------------------------------------------------ make_instance


def test_make_instance_by_name() -> None:
    uniform = make_instance("uniform", 3, 4, np.random.default_rng(0))
    np.testing.assert_array_equal(uniform.means, homogeneous_uniform(3, 4, np.random.default_rng(0)).means)
    het = make_instance("heterogeneous", 5, 10, np.random.default_rng(1), h_max=0.2)
    ref = heterogeneous_centered(5, 10, np.random.default_rng(1), h_max=0.2)
    np.testing.assert_array_equal(het.means, ref.means)


def test_make_instance_from_array_instance_and_callable() -> None:
    assert make_instance(HAND_MADE, 2, 3).best_arm == 1
    assert make_instance([0.3, 0.1, 0.2], 4, 3).shape == (4, 3)
    inst = BanditInstance(HAND_MADE)
    assert make_instance(inst, 2, 3) is inst

    def generator(rng: np.random.Generator, num_agents: int, num_arms: int) -> np.ndarray:
        return rng.random((num_agents, num_arms))

    made = make_instance(generator, 3, 5, np.random.default_rng(9))
    np.testing.assert_array_equal(made.means, np.random.default_rng(9).random((3, 5)))


def test_make_instance_errors() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"num_agents.*M < 1"):
        make_instance("uniform", 0, 3, rng)
    with pytest.raises(ValueError, match=r"num_arms.*K < 2"):
        make_instance("uniform", 2, 1, rng)
    with pytest.raises(TypeError, match="num_agents"):
        make_instance("uniform", 2.5, 3, rng)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"means.*\(3, 3\)"):
        make_instance(np.zeros((3, 3)), 2, 3)
    with pytest.raises(ValueError, match="means"):
        make_instance(np.zeros(4), 2, 3)
    with pytest.raises(ValueError, match="means"):
        make_instance(BanditInstance(HAND_MADE), 3, 3)
    with pytest.raises(ValueError, match=r"means.*finite"):
        make_instance(np.array([[0.1, np.nan, 0.3], [0.1, 0.2, 0.3]]), 2, 3)
    with pytest.raises(ValueError, match="means"):
        make_instance(lambda r, m, k: np.zeros((m + 1, k)), 2, 3, rng)
    with pytest.raises(ValueError, match="uniform.*heterogeneous|heterogeneous.*uniform"):
        make_instance("gaussian", 2, 3, rng)
    with pytest.raises(TypeError, match="h_max"):
        make_instance("uniform", 2, 3, rng, h_max=0.1)
    with pytest.raises(TypeError, match="only accepted"):
        make_instance(HAND_MADE, 2, 3, rng, h_max=0.1)
    with pytest.raises(TypeError, match="rng"):
        make_instance("uniform", 2, 3)
    with pytest.raises(TypeError, match="instance spec"):
        make_instance(object(), 2, 3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "means",
    [[True, False, True], np.array([True, False, True]), np.array([[True, False, False], [False, True, False]])],
)
def test_bool_means_are_refused_by_name(means) -> None:
    # a bool array is not a vector of means (as check_real_array refuses it everywhere else)
    with pytest.raises(TypeError, match=r"^instance must be a number or an array of numbers"):
        make_instance(means, 2, 3)
    with pytest.raises(TypeError, match=r"^means must be a number or an array of numbers"):
        from_means(means, 2)
    with pytest.raises(TypeError, match=r"^means must be a number or an array of numbers"):
        BanditInstance(np.atleast_2d(means))
    with pytest.raises(TypeError, match=r"^instance must be a number or an array of numbers"):
        make_instance(lambda rng, m, k: means, 2, 3, np.random.default_rng(0))
