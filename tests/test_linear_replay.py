"""Replay environments: the real-file loaders (on small generated files), the stand-in's shape, shuffling."""

import numpy as np
import pytest

from fedbandit_envs.families.linear.env import LinearCore
from fedbandit_envs.families.linear.replay import (
    PROFILES,
    ReplayLog,
    ReplayLogEnv,
    ReplayLogSource,
    ReplayStandIn,
    StandInSource,
    load_events,
    load_features,
    replay_order,
    write_events,
    write_features,
)
from fedbandit_envs.run import run
from fedbandit_envs.seeding import SeedStreams


@pytest.fixture
def log_files(tmp_path):
    """A small log in the authors' format: 3 users (ids 7, 3, 12), 6 items, pools of 3, positive first."""
    rng = np.random.default_rng(0)
    items = [101, 102, 103, 104, 105, 106]
    features = rng.normal(size=(6, 4))
    users = [7, 3, 7, 12, 3, 7, 12, 7]
    times = [5, 1, 2, 9, 3, 8, 4, 1]
    pools = np.array([rng.choice(items, 3, replace=False) for _ in users])
    return (
        write_events(tmp_path / "processed_events_shuffled.dat", users, times, pools),
        write_features(tmp_path / "Arm_FeatureVectors_2.dat", items, features),
        (users, times, pools, items, features),
    )


def test_loaders_read_the_written_format(log_files):
    events, features_path, (users, times, pools, items, features) = log_files
    assert events.read_text().splitlines()[0] == "userid\ttimestamp\tarm_pool"
    assert events.read_text().splitlines()[1].startswith(f"{users[0]}\t{times[0]}\t[")
    ids, loaded = load_features(features_path)
    np.testing.assert_array_equal(ids, items)
    np.testing.assert_allclose(loaded, features)
    loaded_users, loaded_times, loaded_pools = load_events(events)
    np.testing.assert_array_equal(loaded_users, users)
    np.testing.assert_array_equal(loaded_times, times)
    np.testing.assert_array_equal(loaded_pools, pools)


def test_log_replay_follows_each_users_time_order(log_files):
    events, features_path, (users, times, pools, items, features) = log_files
    env = ReplayLogEnv(events, features_path)
    log = env.core.config.log
    assert env.core.config.num_agents == 3 and env.core.config.horizon == 8
    core = env.core
    core.reset([4])
    replica = core.replicas[0]
    user_ids = sorted(set(users))
    emitted = {u: [] for u in range(3)}
    for event in replica.events:
        emitted[int(log.users[event])].append(int(event))
    for index, user in enumerate(user_ids):  # user ids are mapped to their sorted rank
        mine = [e for e in range(8) if users[e] == user]
        assert emitted[index] == sorted(mine, key=lambda e: times[e])
    positive_items = [items.index(p) for p in pools[replica.events, 0]]
    np.testing.assert_array_equal(replica.pools[np.arange(8), replica.positive], positive_items)
    rewards = []
    while not core.done:
        rewards.append(core.pull([[int(replica.positive[core.slot])]]).rewards[0, 0])
        core.communicate()
    assert rewards == [1.0] * 8 and core.regret.sum() == 0.0


def test_bad_files(tmp_path, log_files):
    events, features_path, (users, times, pools, items, features) = log_files
    write_features(tmp_path / "few.dat", items[:3], features[:3])
    with pytest.raises(ValueError, match="no row"):
        ReplayLogEnv(events, tmp_path / "few.dat")
    (tmp_path / "bad.dat").write_text("userid\ttimestamp\tarm_pool\n1\tx\t[1, 2]\n")
    with pytest.raises(ValueError, match="event file"):
        load_events(tmp_path / "bad.dat")
    (tmp_path / "empty.dat").write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_features(tmp_path / "empty.dat")
    with pytest.raises(ValueError, match="horizon"):
        ReplayLogEnv(events, features_path, horizon=9)
    with pytest.raises(ValueError, match="order"):
        ReplayLogEnv(events, features_path, order="time")


def test_replay_order_picks_a_random_user_with_events_left():
    counts = np.array([1, 50, 3])
    users = replay_order(np.random.default_rng(0), counts)
    np.testing.assert_array_equal(np.bincount(users), counts)
    # a uniform user (not event) choice: the light users finish early on average
    positions = [np.mean(np.flatnonzero(replay_order(np.random.default_rng(s), counts) == 0)) for s in range(200)]
    assert np.mean(positions) < 3.5  # measured 2.09 (uniform over live users); an event-uniform shuffle gives ~ 26.5


def test_pools_are_shuffled_and_the_random_policy_gets_one_in_k():
    env = ReplayStandIn("lastfm", num_users=60, events_scale=0.5, catalogue_size=500)
    core = env.core
    core.reset([1])
    replica = core.replicas[0]
    horizon = core.config.horizon
    counts = np.bincount(replica.positive, minlength=25)
    assert counts.min() > 0 and counts.max() < 4 * horizon / 25  # not always first (D29)
    baseline = sum(replica.block(s, min(256, horizon - s)).baseline.sum() for s in range(0, horizon, 256))
    assert baseline == pytest.approx(horizon / 25, rel=0.25)  # Binomial(T, 1/25), T ~ 1500: sd ~ 13%


@pytest.mark.parametrize(("profile", "tolerance"), [("lastfm", 0.01), ("delicious", 0.0), ("movielens", 0.05)])
def test_stand_in_shapes(profile, tolerance):
    source = StandInSource(profile)
    shape = PROFILES[profile]
    assert source.num_agents == shape.num_users and source.num_arms == 25 and source.dimension == 25
    assert source.horizon == pytest.approx(shape.total_events, rel=tolerance)
    if profile == "delicious":
        counts = source.user_counts
        light = np.sort(counts)[:-20]
        assert light.max() < 100 and len(counts) == 1867  # 1847 Table 2 users plus 20 heavy users


def test_stand_in_log_and_instance_seed():
    source = StandInSource("movielens", events_scale=0.01, catalogue_size=300, instance_seed=5)
    first, second = source.make_log(SeedStreams.from_seed(5)), source.make_log(SeedStreams.from_seed(5))
    np.testing.assert_array_equal(first.pools, second.pools)
    assert isinstance(first, ReplayLog)
    np.testing.assert_allclose(np.linalg.norm(first.features, axis=1), 1.0)
    assert all(len(set(row)) == 25 for row in first.pools[:200].tolist())
    core = LinearCore(source)
    core.reset([0, 1])  # the instance is fixed: both replicas replay the same log in different orders
    assert core.replicas[0].log.pools.shape == core.replicas[1].log.pools.shape
    assert not np.array_equal(core.replicas[0].events, core.replicas[1].events)


def test_replay_results_carry_normalised_reward():
    env = {"env": "replay", "profile": "lastfm", "num_users": 20, "events_scale": 0.4, "catalogue_size": 200}
    results = run("n_linucb", env, [0, 1], checkpoints=2)
    for row in results.curves:
        assert row["normalised_reward"] == pytest.approx(row["reward"] / (row["random_reward"] + 1))
        assert row["group_regret"] == pytest.approx(row["slot"] - row["reward"])
    source = ReplayLogSource(StandInSource("lastfm", num_users=5, events_scale=0.2).make_log(SeedStreams.from_seed(0)))
    assert source.has_baseline and source.reward_bounds == (0.0, 1.0)
