"""Seed streams: independent, stable by name, and reward draws that no algorithm choice can change."""

import numpy as np
import pytest

from fedbandit_envs.core import Action
from fedbandit_envs.families.mab.core import FederatedMABCore, MABConfig
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.protocol import Coordinator, Population
from fedbandit_envs.run import run
from fedbandit_envs.seeding import STREAM_NAMES, SeedStreams, explicit_seeds, parse_seeds, resolve_seeds


def test_streams_are_distinct_and_reproducible():
    streams = SeedStreams.from_seed(42)
    draws = {name: streams.generator(name).random(4) for name in STREAM_NAMES}
    assert len({tuple(d) for d in draws.values()}) == len(STREAM_NAMES)
    again = SeedStreams.from_seed(42)
    for name in STREAM_NAMES:
        assert np.array_equal(again.generator(name).random(4), draws[name])
    assert not np.array_equal(SeedStreams.from_seed(43).generator("rewards").random(4), draws["rewards"])
    agent_draws = [np.random.default_rng(streams.agent_sequence(i)).random() for i in range(3)]
    assert len(set(agent_draws)) == 3


def test_bad_seed_and_stream_name():
    with pytest.raises(TypeError, match="seed"):
        SeedStreams.from_seed(-1)
    with pytest.raises(ValueError, match="unknown random stream"):
        SeedStreams.from_seed(0).generator("nope")


def play(arms_for_slot, reward_tape=False, horizon=40, **channel):
    core = FederatedMABCore(MABConfig(3, 4, horizon, instance=[0.2, 0.4, 0.6, 0.8], reward_tape=reward_tape))
    core.reset([9])
    arms, rewards = [], []
    for t in range(horizon):
        chosen = arms_for_slot(t)
        feedback = core.step(chosen[None, :])
        arms.append(chosen)
        rewards.append(feedback.rewards[0])
    return np.array(arms), np.array(rewards)


def test_reward_draws_do_not_depend_on_the_algorithm():
    # Slot noise is drawn independently of the arms: two different policies see the same noise, so
    # whenever they pull the same arm in the same slot they get the same reward.
    rng = np.random.default_rng(0)
    random_arms = rng.integers(4, size=(40, 3))
    arms_a, rewards_a = play(lambda t: random_arms[t])
    arms_b, rewards_b = play(lambda t: (np.arange(3) + t) % 4)
    same = arms_a == arms_b
    assert same.sum() > 10
    assert np.array_equal(rewards_a[same], rewards_b[same])


def test_reward_tape_gives_the_nth_pull_the_nth_draw():
    # Run A pulls arm 3 every slot; run B pulls arm 3 only on even slots. The n-th pull of arm 3 by
    # each agent gets the same reward in both runs.
    arms_a, rewards_a = play(lambda t: np.full(3, 3), reward_tape=True, horizon=600)
    arms_b, rewards_b = play(lambda t: np.full(3, 3 if t % 2 == 0 else 0), reward_tape=True, horizon=600)
    pulls_b = rewards_b[arms_b[:, 0] == 3]
    assert np.array_equal(rewards_a[: len(pulls_b)], pulls_b)  # crosses a 256-draw block boundary


@pytest.mark.parametrize(
    ("text", "seeds"),
    [("5", 5), ("100:103", (100, 101, 102)), ("3,7,9", (3, 7, 9)), ("7,", (7,)), (" 0:1 ", (0,))],
)
def test_parse_seeds_reads_counts_ranges_and_lists(text, seeds):
    assert parse_seeds(text) == seeds


def test_resolve_seeds_gives_explicit_seeds():
    assert resolve_seeds(3) == (0, 1, 2)
    assert resolve_seeds("100:102") == (100, 101)
    assert resolve_seeds(np.array([4, 2])) == (4, 2) and all(type(s) is int for s in resolve_seeds(np.arange(2)))
    assert resolve_seeds(range(5, 7)) == (5, 6)


@pytest.mark.parametrize(
    ("seeds", "error", "message"),
    [
        ("5:5", ValueError, "empty or negative"),
        ("-3:2", ValueError, "empty or negative"),
        ("a", ValueError, "cannot read seeds 'a'.*half-open range START:STOP"),
        ("1,1", ValueError, "distinct"),
        ("1,-2", ValueError, r"seeds\[1\] must be >= 0, got -2"),
        ("1,,2", ValueError, "an entry of the list is empty"),
        (",1", ValueError, "an entry of the list is empty"),
        (0, ValueError, "positive number of runs"),
        ("-2", ValueError, "positive number of runs"),
        ([], ValueError, "must not be empty"),
        ([1.5], TypeError, r"seeds\[0\] must be an integer"),
        ([True], TypeError, r"seeds\[0\] must be an integer"),
        (True, TypeError, "a count, a text"),
    ],
)
def test_bad_seeds_say_how_to_fix(seeds, error, message):
    with pytest.raises(error, match=message):
        resolve_seeds(seeds)


def test_explicit_seeds_refuses_a_bare_count():
    with pytest.raises(TypeError, match="pass seeds=range\\(n\\)"):
        explicit_seeds(5)
    with pytest.raises(TypeError, match="sequence of seeds"):
        explicit_seeds("0:5")


def test_fixed_streams_are_none_without_a_seed_and_the_seed_s_streams_with_one():
    assert SeedStreams.fixed(None) is None
    fixed = SeedStreams.fixed(7)
    assert np.array_equal(
        fixed.generator("instance").random(4), SeedStreams.from_seed(7).generator("instance").random(4)
    )


#: The streams handed to learner code (populations and agents, hosted coordinators).
LEARNER_STREAMS = ("agents", "coordinator")


class _SeedReader(Population):
    """A learner that collects every seed it can read off what it is given (its streams and its coordinator's)."""

    families = ("mab",)
    seen: list[int] = []

    def reset(self, context):
        self.arms = np.zeros((context.num_replicas, context.num_agents), np.int64)
        for sequence in context.agent_seeds:
            _SeedReader.seen.append(sequence.entropy)
        for rng in context.agent_rngs():
            _SeedReader.seen.append(rng.bit_generator.seed_seq.entropy)

    def act(self, step):
        return Action(self.arms.copy())

    def observe(self, feedback):
        pass

    def make_coordinator(self):
        return _CoordinatorSeedReader()


class _CoordinatorSeedReader(Coordinator):
    def reset(self, context, rngs):
        _SeedReader.seen += [rng.bit_generator.seed_seq.entropy for rng in rngs]

    def step(self, slot, batches):
        return []


@pytest.mark.parametrize("seed", [0, 3, 2**40 + 1])
def test_learner_streams_do_not_reveal_the_run_seed(seed):
    # A learner that read the run's seed off its own stream could rebuild the hidden instance, the reward noise and
    # the DP noise of every other stream: the streams it is handed are derived one way.
    streams = SeedStreams.from_seed(seed)
    for name in LEARNER_STREAMS:
        learner = streams.sequence(name)
        assert learner.entropy != seed and learner.spawn_key == ()
        assert np.array_equal(np.random.default_rng(learner).random(3), streams.generator(name).random(3))
    _SeedReader.seen = []
    run(_SeedReader, {"num_agents": 3, "num_arms": 4, "horizon": 5}, [seed, seed + 1], checkpoints=1)
    assert _SeedReader.seen and not {seed, seed + 1} & set(_SeedReader.seen)


def test_learner_streams_are_reproducible_and_differ_by_seed_and_name():
    first = {name: SeedStreams.from_seed(5).generator(name).random(2) for name in LEARNER_STREAMS}
    for name in LEARNER_STREAMS:
        assert np.array_equal(SeedStreams.from_seed(5).generator(name).random(2), first[name])
        assert not np.array_equal(SeedStreams.from_seed(6).generator(name).random(2), first[name])
    assert not np.array_equal(*first.values())
    entropy = SeedStreams.from_seed(np.random.SeedSequence([1, 2, 3])).sequence("agents").entropy
    assert entropy == SeedStreams.from_seed(np.random.SeedSequence([1, 2, 3])).sequence("agents").entropy


@pytest.mark.parametrize(
    ("seed", "error"),
    [
        (2.5, TypeError),
        (True, TypeError),
        (np.float64(7.0), TypeError),
        ("3", TypeError),
        (-1, ValueError),
        (2**63, ValueError),
    ],
)
def test_an_episode_seed_must_be_a_non_negative_integer(seed, error):
    env = FederatedMAB(num_agents=2, num_arms=3, horizon=5)
    with pytest.raises(error, match="seed must be"):
        env.reset(seed=seed)
    env.reset(seed=np.int64(3))
    plain = FederatedMAB(num_agents=2, num_arms=3, horizon=5)
    plain.reset(seed=3)
    assert np.array_equal(env.instance.means, plain.instance.means)
