"""Classification bandits from scikit-learn's bundled datasets: conversion, splits, oracle, env and runs."""

import sys

import numpy as np
import pytest

from fedbandit_envs.bench.scenarios import AlgorithmSpec
from fedbandit_envs.data import classification
from fedbandit_envs.data.classification import (
    DATASETS,
    block_contexts,
    cluster_split,
    dirichlet_split,
    iid_split,
    least_squares_policy,
    load_dataset,
)
from fedbandit_envs.families.linear.classification import ClassificationBandit, ClassificationSource
from fedbandit_envs.run import run
from fedbandit_envs.seeding import SeedStreams

sklearn_datasets = pytest.importorskip("sklearn.datasets")

SHAPES = {"digits": (1797, 64, 10), "wine": (178, 13, 3), "breast_cancer": (569, 30, 2), "iris": (150, 4, 3)}


def _partition(parts, n):
    joined = np.concatenate(parts)
    np.testing.assert_array_equal(np.sort(joined), np.arange(n))


# ---------------------------------------------------------------------- data
@pytest.mark.parametrize("name", DATASETS)
def test_features_are_standardised_with_bias_in_the_unit_ball(name):
    data = load_dataset(name)
    samples, raw_features, classes = SHAPES[name]
    raw, labels = getattr(sklearn_datasets, f"load_{name}")(return_X_y=True)
    assert data.features.shape == (samples, raw_features + 1) and data.num_classes == classes
    assert data.dimension == classes * (raw_features + 1)
    np.testing.assert_array_equal(data.labels, labels)
    norms = np.linalg.norm(data.features, axis=1)
    assert norms.max() == pytest.approx(1.0, abs=1e-12)
    scale = 1.0 / data.features[0, -1]  # the bias column is 1 / (largest row norm)
    np.testing.assert_array_equal(data.features[:, -1], data.features[0, -1])
    unscaled = data.features[:, :-1] * scale
    constant = raw.std(axis=0) == 0
    np.testing.assert_allclose(unscaled.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(unscaled.std(axis=0)[~constant], 1.0, rtol=1e-12)
    np.testing.assert_array_equal(unscaled[:, constant], 0.0)
    assert not data.features.flags.writeable and not data.labels.flags.writeable


def test_principal_components_are_uncorrelated_in_decreasing_variance_with_fixed_signs():
    full = load_dataset("wine").features
    data = load_dataset("wine", 4)
    assert data.features.shape == (178, 5)
    pcs = data.features[:, :-1]
    covariance = pcs.T @ pcs
    np.testing.assert_allclose(covariance - np.diag(np.diag(covariance)), 0.0, atol=1e-12)
    assert np.all(np.diff(np.diag(covariance)) < 0)
    # the components span the standardised data's top directions: projecting it on them gives the PCs again
    standardised = full[:, :-1] / full[0, -1]
    _, _, vt = np.linalg.svd(standardised, full_matrices=False)
    loadings = vt[:4] * np.sign(vt[np.arange(4), np.argmax(np.abs(vt[:4]), axis=1)])[:, None]
    expected = np.hstack([standardised @ loadings.T, np.ones((178, 1))])
    np.testing.assert_allclose(data.features, expected / np.linalg.norm(expected, axis=1).max(), atol=1e-12)


def test_block_encoding_puts_each_sample_in_its_arms_block():
    features = np.array([[1.0, 2.0], [3.0, 4.0]])
    contexts = block_contexts(features, 3)
    assert contexts.shape == (2, 3, 6)
    np.testing.assert_array_equal(contexts[1], [[3, 4, 0, 0, 0, 0], [0, 0, 3, 4, 0, 0], [0, 0, 0, 0, 3, 4]])
    np.testing.assert_array_equal(contexts[0, 2], [0, 0, 0, 0, 1, 2])


def test_dirichlet_split_counts_follow_the_drawn_proportions_exactly():
    labels = load_dataset("digits").labels
    parts, proportions = dirichlet_split(labels, 7, 0.3, np.random.default_rng(5))
    _partition(parts, len(labels))
    assert proportions.shape == (10, 7)
    np.testing.assert_allclose(proportions.sum(axis=1), 1.0)
    for c in range(10):
        n_c = int(np.sum(labels == c))
        cuts = np.floor(np.cumsum(proportions[c])[:-1] * n_c).astype(int)
        expected = np.diff(np.concatenate([[0], cuts, [n_c]]))
        np.testing.assert_array_equal([np.sum(labels[p] == c) for p in parts], expected)
    again, same = dirichlet_split(labels, 7, 0.3, np.random.default_rng(5))
    np.testing.assert_array_equal(same, proportions)
    for a, b in zip(parts, again):
        np.testing.assert_array_equal(a, b)


def test_small_alpha_skews_the_class_mix():
    labels = load_dataset("digits").labels

    def top_share(alpha, seed):
        parts, _ = dirichlet_split(labels, 10, alpha, np.random.default_rng(seed))
        return np.mean([np.bincount(labels[p], minlength=10).max() / len(p) for p in parts])

    skewed = [top_share(0.1, s) for s in range(5)]
    mixed = [top_share(100.0, s) for s in range(5)]
    # mean top-class share, seeds 0-39: alpha = 100 gives 0.111-0.119 (every class near 1/10), alpha = 0.1 0.515-0.689
    assert max(mixed) < 0.15 and min(skewed) > 0.5


def test_dirichlet_split_refuses_what_it_cannot_do(monkeypatch):
    monkeypatch.setattr(classification, "MAX_DIRICHLET_DRAWS", 3)
    with pytest.raises(ValueError, match="3 Dirichlet.*larger alpha or fewer num_clients"):
        dirichlet_split(np.zeros(10, np.int64), 5, 0.01, np.random.default_rng(0))
    labels = np.array([0, 0, 1, 1])
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_split(labels, 2, 0.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="num_clients"):
        dirichlet_split(labels, 5, 1.0, np.random.default_rng(0))


def test_cluster_and_iid_splits_are_seeded_partitions():
    data = load_dataset("iris")
    clusters = cluster_split(data.features, 4, np.random.default_rng(3))
    _partition(clusters, 150)
    assert [int(c[0]) for c in clusters] == sorted(int(c[0]) for c in clusters)
    for a, b in zip(clusters, cluster_split(data.features, 4, np.random.default_rng(3))):
        np.testing.assert_array_equal(a, b)
    # k-means on iris separates setosa (samples 0-49) from the rest: one cluster holds setosa only
    assert any(set(c.tolist()) <= set(range(50)) for c in clusters)
    equal = iid_split(150, 4, np.random.default_rng(3))
    _partition(equal, 150)
    assert [len(p) for p in equal] == [38, 38, 37, 37]


def test_least_squares_policy_solves_the_ridge_normal_equations():
    data = load_dataset("iris")
    weights = least_squares_policy(data, lam=0.5)
    x, onehot = data.features, np.eye(3)[data.labels]
    np.testing.assert_allclose(x.T @ x @ weights + 0.5 * weights, x.T @ onehot, atol=1e-10)
    np.testing.assert_allclose(least_squares_policy(data, lam=0.0), np.linalg.lstsq(x, onehot, rcond=None)[0])
    accuracy = ClassificationSource("iris").least_squares_accuracy(0.5)
    assert accuracy == np.mean(np.argmax(x @ weights, axis=1) == data.labels)


def test_a_missing_scikit_learn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.cluster", None)
    with pytest.raises(ImportError, match=r"fedbandit-envs\[data\]"):
        cluster_split(np.eye(3), 2, np.random.default_rng(0))


@pytest.mark.parametrize(("valid", "bad"), [(2, 2.0), (1, True), (1, np.bool_(True)), (2, [1, 2])])
def test_num_features_is_checked_before_the_cache(valid, bad):
    load_dataset("iris", valid)  # a cached valid load must not let an equal-comparing value through
    with pytest.raises(TypeError, match="num_features"):
        load_dataset("iris", bad)
    with pytest.raises(TypeError, match="num_features"):
        ClassificationBandit(dataset="iris", num_clients=3, num_features=bad)


def test_an_unhashable_dataset_name_is_refused_by_name():
    with pytest.raises(TypeError, match="dataset must be one of"):
        load_dataset(["iris"])


# ---------------------------------------------------------------------- environment
def test_each_slot_is_a_sample_of_the_active_clients_shard_with_one_for_the_true_class():
    env = ClassificationBandit("iris", num_clients=3, horizon=60, split="dirichlet", alpha=1.0)
    observations, _ = env.reset(seed=4)
    shards = env.core.replicas[0].shards
    data = env.config.data
    regret = 0.0
    rng = np.random.default_rng(0)
    while env.agents:
        active = [a for a in env.agents if observations[a]["active"]]
        (agent,) = active
        contexts = observations[agent]["contexts"]
        client = env.possible_agents.index(agent)
        rows = [r for r in shards[client] if np.array_equal(block_contexts(data.features[r], 3), contexts)]
        assert rows, "the contexts are the block encoding of a sample of the client's shard"
        arm = int(rng.integers(3))
        observations, rewards, _, _, infos = env.step({agent: arm})
        label = int(np.argmax(infos[agent]["expected_rewards"]))
        assert label in {int(data.labels[r]) for r in rows}
        np.testing.assert_array_equal(infos[agent]["expected_rewards"], np.eye(3)[label])
        assert rewards[agent] == float(arm == label)
        regret += 1.0 - rewards[agent]
        assert infos[agent]["instant_regret"] == 1.0 - rewards[agent]
        observations, *_ = env.step({})
    assert env.core.regret[0].sum() == regret


def test_the_stream_is_fixed_by_the_seed_and_the_split_by_the_instance_seed():
    source = ClassificationSource("wine", num_clients=4, horizon=300, instance_seed=2)

    def stream(seed):
        replica = source.replica(SeedStreams.from_seed(seed), SeedStreams.fixed(2))
        return replica, replica.block(0, 256)

    (first, a), (_, b), (third, c) = stream(1), stream(1), stream(9)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.clients, c.clients)
    for x, y in zip(first.shards, third.shards):  # the instance seed fixes the split
        np.testing.assert_array_equal(x, y)
    free = ClassificationSource("wine", num_clients=4, horizon=300)
    split = [free.replica(SeedStreams.from_seed(s), SeedStreams.from_seed(s)).shards[0] for s in (1, 9)]
    assert not np.array_equal(*split)


def test_samples_are_uniform_within_a_shard():
    source = ClassificationSource("iris", num_clients=2, split="iid")
    replica = source.replica(SeedStreams.from_seed(0), SeedStreams.from_seed(0))
    draws = 75_000
    rows = replica.samples(np.zeros(draws, np.int64))
    counts = np.bincount(rows, minlength=150)[replica.shards[0]]
    assert counts.sum() == draws and np.all(np.bincount(rows, minlength=150)[replica.shards[1]] == 0)
    expected = draws / len(replica.shards[0])  # 1000 per sample; binomial sd about 31.4
    assert np.abs(counts - expected).max() < 5 * np.sqrt(expected)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dataset": "digit"}, ValueError, "did you mean 'digits'"),
        ({"dataset": "iris", "split": "cluster"}, ValueError, "split"),
        ({"dataset": "iris", "alpha": 0.0}, ValueError, "alpha"),
        ({"dataset": "iris", "num_clients": 151}, ValueError, "num_clients"),
        ({"dataset": "iris", "num_features": 5}, ValueError, "num_features"),
        ({"dataset": "iris", "horizon": 0}, ValueError, "horizon"),
        ({"dataset": "iris", "active_per_slot": 11}, ValueError, "active_per_slot"),
        ({"dataset": "iris", "instance_seed": -1}, ValueError, "instance_seed"),
        ({"dataset": "iris", "num_client": 3}, TypeError, "did you mean 'num_clients'"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        ClassificationBandit(**kwargs)


# ---------------------------------------------------------------------- the Li-Wang algorithms through run
LI_WANG = {
    "async": AlgorithmSpec("agents.li_wang:AsyncLinUCB", {"gamma": 5.0}),
    "async_am": AlgorithmSpec("agents.li_wang:AsyncLinUCBAM", {"gamma": 5.0, "feature_map": "duplicate"}),
    "sync": AlgorithmSpec("agents.li_wang:SyncLinUCB", {"threshold": 1.0}),
}


def by_run(curves):
    """Rows ordered by seed, then slot (the two paths may list runs in another order)."""
    return sorted(curves, key=lambda row: (row["seed"], row["slot"]))


@pytest.mark.parametrize("name", sorted(LI_WANG))
def test_every_li_wang_algorithm_runs_on_both_paths_and_regret_counts_mistakes(name):
    env = {"env": "classification", "dataset": "iris", "num_clients": 4, "horizon": 120}
    factory = LI_WANG[name].factory()
    batched = by_run(run(factory, env, seeds=[0, 1], checkpoints=2, batched=True).curves)
    pettingzoo = by_run(run(factory, env, seeds=[0, 1], checkpoints=2, batched=False).curves)
    assert len(batched) == 4
    for row, other in zip(batched, pettingzoo):
        for column in ("slot", "seed", "group_regret", "messages", "reward", "random_reward"):
            assert row[column] == other[column], column
        assert row["group_regret"] == row["slot"] - row["reward"]
        assert row["normalised_reward"] == row["reward"] / (row["random_reward"] + 1.0)
