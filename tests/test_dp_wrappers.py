"""DP message wrappers: exact noise from the senders' dp generators, calibration, accounting, budget guard, runner.

Every expected noise value is recomputed here from ``dp_generator(SeedStreams.from_seed(seed), sender, kind)`` (see
:func:`noise_rng`), the generator the privatizer draws one sender's noise for one message kind from, created lazily
and kept for the episode. The privatizer draws (privatizer.py ``_apply`` / ``_noised``): for each ``Sensitive``
field in declaration order, for each row of the batch in order, one draw of the row's shape from that row's
(replica, sender, kind) generator: ``rng.laplace(0, 1, shape) * scale`` or ``rng.standard_normal(shape) * sigma``
(numpy's ``laplace(0, scale)`` / ``normal(0, sigma)`` give the same bits). So one sender's noise for one kind does not
depend on the other senders or kinds of the slot, nor on how the slot is batched; the rows of one sender and kind
follow the order of that sender's messages. Comparisons use ``rtol <= 1e-12``: a wrong draw or scale is off by O(1).

"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from pettingzoo.utils.env import ParallelEnv
from scipy import stats

from agents.baselines import ucb1_arms
from fedbandit_envs import NEIGHBOURS, SERVER, FederatedMAB, Message, MessageBatch
from fedbandit_envs.channel import batches_from_messages
from fedbandit_envs.channel.privacy import Privatized, Public, Sensitive, declare_message_kinds
from fedbandit_envs.core import Action
from fedbandit_envs.protocol import Coordinator, Population
from fedbandit_envs.run import run
from fedbandit_envs.seeding import SeedStreams
from wrappers.dp import (
    BinaryTreeMechanism,
    GaussianMessageDP,
    LaplaceMessageDP,
    MessageDP,
    MessagePrivatizer,
    NoiseSpec,
    PrivacyBudgetExceeded,
    TreeMessageDP,
    gaussian_sigma_analytic,
    gaussian_sigma_classical,
)
from wrappers.dp.privatizer import dp_generator
from wrappers.faults import MessageDelays, MessageDrops

# the kinds these tests send: public vocabulary, registered before any wrapper resets
declare_message_kinds(
    "a", "b", "epoch_mean", "global", "means", "hello", "own", "pair", "relay", "stat", "stats", "sums", "total"
)
declare_message_kinds("w", "x", "y", "ybar", "yhat")

VALUE = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="value")}
EPOCH = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="value", partition_field="epoch"), "epoch": Public()}


def make_env(num_agents: int = 3, horizon: int = 12, **kwargs) -> FederatedMAB:
    return FederatedMAB(num_agents=num_agents, num_arms=4, horizon=horizon, topology="complete", **kwargs)


def warm(env, slots: int) -> None:
    """Play ``slots`` slots without messages, so every agent has observed ``slots`` rewards (record counts)."""
    for _ in range(slots):
        step(env)


def noise_rng(seed: int, sender: int, kind: str) -> np.random.Generator:
    """A fresh copy of the generator of `sender`'s noise on `kind` messages in the episode of `seed`."""
    return dp_generator(SeedStreams.from_seed(seed), sender, kind)


def step(env, sends: dict[int, list[Message]] | None = None, arm: int = 0):
    """Every live agent pulls ``arm``; agent i sends ``sends[i]``."""
    sends = sends or {}
    return env.step({a: {"arm": arm, "messages": sends.get(i, [])} for i, a in enumerate(env.agents)})


def value_message(sender: int, recipient: int, value: float = 0.5, kind: str = "x") -> Message:
    return Message(sender, recipient, kind, {"v": value}, privacy=VALUE)


def epoch_message(sender: int, recipient: int, epoch: int, kind: str = "epoch_mean") -> Message:
    return Message(sender, recipient, kind, {"v": 0.5, "epoch": epoch}, privacy=EPOCH)


def spent(env) -> np.ndarray:
    return env.privatizer.epsilon_spent()[0]


# ------------------------------------------------------------------------------------------ exact Laplace noise
# (declaration, payload, values after clipping, per-entry Laplace scale at epsilon = 0.5), all computed by hand.
LAPLACE_CASES = {
    # mean of n records in [-1, 3]: sensitivity 4 / n = [2, 1, 0.5]; scale = that / 0.5; -2 -> -1 and 5 -> 3 clipped
    "mean": (
        {"m": Sensitive(bounds=(-1.0, 3.0), aggregate="mean", records_field="n"), "n": Public()},
        {"m": [0.5, -2.0, 5.0], "n": [2, 4, 8]},
        [0.5, -1.0, 3.0],
        [4.0, 2.0, 1.0],
    ),
    # one n for every entry: sensitivity 1 / 4, scale 0.5
    "mean_scalar_records": (
        {"m": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n"), "n": Public()},
        {"m": [0.25, 1.5, -0.5], "n": 4},
        [0.25, 1.0, 0.0],
        [0.5, 0.5, 0.5],
    ),
    # sum of n records in [0, 1]: clipped to [0, n], sensitivity 1, scale 2
    "sum": (
        {"m": Sensitive(bounds=(0.0, 1.0), aggregate="sum", records_field="n"), "n": Public()},
        {"m": [5.0, -1.0, 1.5], "n": [3, 1, 2]},
        [3.0, 0.0, 1.5],
        [2.0, 2.0, 2.0],
    ),
    # a sum without a records field: clipped to the >= 16 rewards observed, [0, 16]; sensitivity 1, scale 2
    "sum_without_records": (
        {"m": Sensitive(bounds=(0.0, 1.0), aggregate="sum")},
        {"m": [5.0, -1.0, 1.5]},
        [5.0, 0.0, 1.5],
        [2.0, 2.0, 2.0],
    ),
    # one record in [0, 0.5]: clipped, sensitivity 0.5, scale 1
    "value": (
        {"m": Sensitive(bounds=(0.0, 0.5), aggregate="value")},
        {"m": [0.7, -1.0, 0.25]},
        [0.5, 0.0, 0.25],
        [1.0, 1.0, 1.0],
    ),
    # one record may change every entry: L1 sensitivity 1/2 + 1/4 + 1/8 = 0.875 on every entry, scale 1.75
    "affects_all": (
        {"m": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n", affects="all"), "n": Public()},
        {"m": [0.5, 0.25, 2.0], "n": [2, 4, 8]},
        [0.5, 0.25, 1.0],
        [1.75, 1.75, 1.75],
    ),
}


WARM = 16


@pytest.mark.parametrize("case", sorted(LAPLACE_CASES))
def test_laplace_noise_equals_the_senders_dp_draws(case):
    declaration, payload, clipped, scale = LAPLACE_CASES[case]
    seed, eps = 7, 0.5
    env = LaplaceMessageDP(make_env(horizon=WARM + 2), epsilon=eps)
    env.reset(seed=seed)
    warm(env, WARM)  # the records the means and sums claim (at most 14 per message) exist
    rng = noise_rng(seed, 0, "stat")
    for slot in range(2):  # agent 0's "stat" generator continues across slots
        obs, _, _, _, infos = step(env, {0: [Message(0, 1, "stat", payload, privacy=declaration)]})
        (received,) = obs["agent_1"]["inbox"]
        expected = np.array(clipped) + rng.laplace(0.0, 1.0, 3) * np.array(scale)
        np.testing.assert_allclose(received.payload["m"], expected, rtol=1e-13, atol=0)
        assert isinstance(received.privacy["m"], Privatized)
        for name in payload.keys() - {"m"}:  # public fields pass unchanged
            np.testing.assert_array_equal(received.payload[name], payload[name])
            assert received.privacy[name] == Public()
        assert infos["agent_0"]["epsilon_spent"] == pytest.approx(eps * (slot + 1), rel=1e-15)
        assert infos["agent_1"]["epsilon_spent"] == 0.0


def test_declared_mean_is_clipped_to_its_bounds_before_noise():
    declaration = {"m": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n"), "n": Public()}
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=3)
    warm(env, 10)
    obs, *_ = step(env, {0: [Message(0, 1, "stat", {"m": 5.0, "n": 10}, privacy=declaration)]})
    # 5.0 -> 1.0, then Laplace of scale (1/10) / 1.0
    expected = 1.0 + noise_rng(3, 0, "stat").laplace(0.0, 1.0, ()) * 0.1
    assert obs["agent_1"]["inbox"][0].payload["m"] == pytest.approx(expected, rel=1e-13)


def test_each_sender_draws_its_fields_in_declaration_order_from_its_own_generator():
    declaration = {
        "a": Sensitive(bounds=(0.0, 1.0), aggregate="value"),
        "b": Sensitive(bounds=(0.0, 2.0), aggregate="value"),
    }
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=11)
    sends = {i: [Message(i, 1, "pair", {"a": [0.1 * i, 0.2], "b": 1.0}, privacy=declaration)] for i in (0, 2)}
    obs, _, _, _, infos = step(env, sends)
    rng0, rng2 = noise_rng(11, 0, "pair"), noise_rng(11, 2, "pair")
    a0, a2 = rng0.laplace(0, 1, 2) * 1.0, rng2.laplace(0, 1, 2) * 1.0  # field "a" first, on each sender's generator
    b0, b2 = rng0.laplace(0, 1, ()) * 2.0, rng2.laplace(0, 1, ()) * 2.0  # then field "b", continuing them
    by_sender = {m.sender: m.payload for m in obs["agent_1"]["inbox"]}
    np.testing.assert_allclose(by_sender[0]["a"], [0.0, 0.2] + a0, rtol=1e-13)
    np.testing.assert_allclose(by_sender[2]["a"], [0.2, 0.2] + a2, rtol=1e-13)
    assert by_sender[0]["b"] == pytest.approx(1.0 + b0, rel=1e-13)
    assert by_sender[2]["b"] == pytest.approx(1.0 + b2, rel=1e-13)
    assert [infos[a]["epsilon_spent"] for a in env.agents] == [2.0, 0.0, 2.0]  # one event per sensitive field


def test_each_replica_draws_from_its_own_dp_generators():
    env = LaplaceMessageDP(make_env(), epsilon=0.5)
    core = env.unwrapped.core
    seeds = [3, 4, 5]
    core.reset(seeds, hooks=env.message_hooks())
    batch = MessageBatch(
        "x", replica=[2, 0, 1], sender=[0, 0, 0], recipient=[1, 1, 1], payload={"v": [0.5, 0.5, 0.5]}, privacy=VALUE
    )
    feedback = core.step(np.zeros((3, 3), np.int64), [batch])
    (received,) = feedback.inbox
    for row, replica in enumerate(received.replica):
        expected = 0.5 + noise_rng(seeds[replica], 0, "x").laplace(0.0, 1.0, ()) * 2.0
        assert received.payload["v"][row] == pytest.approx(expected, rel=1e-13)
    np.testing.assert_array_equal(env.privatizer.epsilon_spent(), [[0.5, 0, 0]] * 3)


def test_a_broadcast_is_noised_once_and_every_copy_carries_the_same_value():
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=5)
    obs, _, _, _, infos = step(env, {0: [value_message(0, NEIGHBOURS)]})
    expected = 0.5 + noise_rng(5, 0, "x").laplace(0.0, 1.0, ())
    assert obs["agent_1"]["inbox"][0].payload["v"] == obs["agent_2"]["inbox"][0].payload["v"]
    assert obs["agent_1"]["inbox"][0].payload["v"] == pytest.approx(expected, rel=1e-13)
    assert infos["agent_0"]["epsilon_spent"] == 1.0


def test_messages_of_one_sender_and_kind_draw_in_message_order():
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=5)
    obs, _, _, _, infos = step(env, {0: [value_message(0, 2, 0.25), value_message(0, 1, 0.75)]})
    rng = noise_rng(5, 0, "x")
    first, second = rng.laplace(0.0, 1.0, ()), rng.laplace(0.0, 1.0, ())  # scale 1 / 1.0
    assert obs["agent_2"]["inbox"][0].payload["v"] == pytest.approx(0.25 + first, rel=1e-13)
    assert obs["agent_1"]["inbox"][0].payload["v"] == pytest.approx(0.75 + second, rel=1e-13)
    assert infos["agent_0"]["epsilon_spent"] == 2.0  # two releases of the same record, sequential


# ------------------------------------------------------------------------------------------ exact Gaussian noise
def test_gaussian_classical_noise_is_exact():
    # sigma per unit L2 sensitivity = sqrt(2 ln(1.25 / 1e-5)) / 0.5 = sqrt(2 * 11.73606) / 0.5 = 9.689610525...
    assert gaussian_sigma_classical(1.0, 0.5, 1e-5) == pytest.approx(9.689610525210778, rel=1e-12)
    env = GaussianMessageDP(make_env(), epsilon=0.5, delta=1e-5)
    env.reset(seed=2)
    declaration = {"v": Sensitive(bounds=(0.0, 2.0), aggregate="value")}
    obs, *_ = step(env, {0: [Message(0, 1, "x", {"v": [3.0, 1.0]}, privacy=declaration)]})
    expected = np.array([2.0, 1.0]) + noise_rng(2, 0, "x").standard_normal(2) * (2.0 * 9.689610525210778)
    np.testing.assert_allclose(obs["agent_1"]["inbox"][0].payload["v"], expected, rtol=1e-12)
    accountant = env.privatizer.accountants[0]
    assert accountant.epsilon(0) == 0.5 and accountant.delta(0) == 1e-5


def test_gaussian_analytic_noise_is_exact_and_satisfies_balle_wang():
    eps, delta = 1.0, 1e-5
    sigma = gaussian_sigma_analytic(1.0, eps, delta)

    def balle_wang_delta(s: float) -> float:  # Balle & Wang 2018 Thm 8 at unit sensitivity
        return stats.norm.cdf(1 / (2 * s) - eps * s) - math.exp(eps) * stats.norm.cdf(-1 / (2 * s) - eps * s)

    assert balle_wang_delta(sigma) == pytest.approx(delta, rel=1e-6)
    assert balle_wang_delta(0.999 * sigma) > delta  # the smallest such sigma
    assert sigma == pytest.approx(3.7306316, rel=1e-7)
    env = GaussianMessageDP(make_env(), epsilon=eps, delta=delta, gaussian_calibration="analytic")
    env.reset(seed=4)
    warm(env, 10)  # two means of 5 records each
    declaration = {"m": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n"), "n": Public()}
    obs, *_ = step(env, {0: [Message(0, 1, "x", {"m": [0.25, 0.75], "n": 5}, privacy=declaration)]})
    expected = np.array([0.25, 0.75]) + noise_rng(4, 0, "x").standard_normal(2) * (0.2 * sigma)
    np.testing.assert_allclose(obs["agent_1"]["inbox"][0].payload["m"], expected, rtol=1e-12)


def test_gaussian_affects_all_uses_the_l2_sensitivity():
    declaration = {"m": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n", affects="all"), "n": Public()}
    env = GaussianMessageDP(make_env(), epsilon=0.5, delta=1e-5)
    env.reset(seed=6)
    warm(env, 2)
    obs, *_ = step(env, {0: [Message(0, 1, "x", {"m": [0.5, 0.5, 0.5], "n": [1, 2, 2]}, privacy=declaration)]})
    l2 = math.sqrt(1.0**2 + 0.5**2 + 0.5**2)  # per-entry sensitivities 1, 1/2, 1/2
    expected = 0.5 + noise_rng(6, 0, "x").standard_normal(3) * (l2 * 9.689610525210778)
    np.testing.assert_allclose(obs["agent_1"]["inbox"][0].payload["m"], expected, rtol=1e-12)


# ------------------------------------------------------------------------------------------ calibration, schedules
@pytest.mark.parametrize(("calibration", "scale", "charge"), [("paper", 0.05, 5.0), ("strict", 2.5, 0.1)])
def test_paper_and_strict_calibration(calibration, scale, charge):
    # li-song-fmab §1.5 flag 1: M = 50, eps = 0.1, n_r = 4. paper: b_r = (1/4) / (50 * 0.1) = 0.05, charged
    # M eps = 5.0 per message. strict: b = (1/4) / 0.1 = 2.5, charged 0.1 (n_agg is ignored).
    declaration = {"m": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="n"), "n": Public()}
    env = LaplaceMessageDP(make_env(), epsilon=0.1, calibration=calibration, n_agg=50)
    env.reset(seed=8)
    warm(env, 4)
    rng = noise_rng(8, 0, "ybar")
    for slot in range(3):
        obs, _, _, _, infos = step(env, {0: [Message(0, 1, "ybar", {"m": 0.5, "n": 4}, privacy=declaration)]})
        expected = 0.5 + rng.laplace(0.0, 1.0, ()) * scale
        assert obs["agent_1"]["inbox"][0].payload["m"] == pytest.approx(expected, rel=1e-12)
        assert infos["agent_0"]["epsilon_spent"] == pytest.approx(charge * (slot + 1), rel=1e-12)


def eps_z(z: int, epsilon: float = 1.0, horizon: float = 1e5) -> float:
    """solanki-pfcb §1.8 (D-10, log2): eps_z = eps / (2 log2 T) + eps / 2^(z+1)."""
    return epsilon / (2 * math.log2(horizon)) + epsilon / 2 ** (z + 1)


def test_epsilon_schedule_charges_the_schedule_sum():
    # solanki-pfcb §4.2 check 2: for eps = 1, sum_{z=1..8} eps_z = 0.738871; check 3: sigma_z / k = 3.107511 / eps_z
    env = GaussianMessageDP(make_env(), epsilon=eps_z, delta=0.01)
    env.reset(seed=9)
    rng = noise_rng(9, 0, "w")
    declaration = {"w": Sensitive(bounds=(0.0, 7.0), aggregate="value")}  # k = 7
    for z in range(1, 9):
        obs, _, _, _, infos = step(env, {0: [Message(0, 1, "w", {"w": 3.0}, privacy=declaration)]})
        expected = 3.0 + rng.standard_normal(()) * 7.0 * math.sqrt(2 * math.log(125)) / eps_z(z)
        assert obs["agent_1"]["inbox"][0].payload["w"] == pytest.approx(expected, rel=1e-12)
    assert infos["agent_0"]["epsilon_spent"] == pytest.approx(sum(eps_z(z) for z in range(1, 9)), rel=1e-14)
    assert infos["agent_0"]["epsilon_spent"] == pytest.approx(0.738871, abs=1e-6)
    assert env.privatizer.accountants[0].delta(0) == pytest.approx(0.08, rel=1e-14)  # 8 delta


def test_release_index_counts_per_sender_and_kind():
    env = LaplaceMessageDP(make_env(), epsilon=lambda z: 0.5**z)  # scale of the z-th release: 1 / 0.5**z = 2**z
    env.reset(seed=10)
    rngs = {(0, "a"): noise_rng(10, 0, "a"), (0, "b"): noise_rng(10, 0, "b"), (2, "a"): noise_rng(10, 2, "a")}
    for slot, (kind, z) in enumerate((("a", 1), ("a", 2), ("b", 1), ("a", 3))):
        obs, *_ = step(env, {0: [value_message(0, 1, kind=kind)], 2: [value_message(2, 1, kind="a")]})
        got = {m.sender: m.payload["v"] for m in obs["agent_1"]["inbox"]}
        # each (sender, kind) generator advances only with that sender's messages of that kind
        assert got[0] == pytest.approx(0.5 + rngs[0, kind].laplace(0.0, 1.0, ()) * 2**z, rel=1e-12)
        assert got[2] == pytest.approx(0.5 + rngs[2, "a"].laplace(0.0, 1.0, ()) * 2 ** (slot + 1), rel=1e-12)
    # agent 0: 0.5 + 0.25 + 0.5 + 0.125; agent 2 sent four "a" messages: 0.5 + 0.25 + 0.125 + 0.0625
    np.testing.assert_allclose(spent(env), [1.375, 0.0, 0.9375], rtol=1e-15)


# ------------------------------------------------------------------------------------------ partition keys
@pytest.mark.parametrize("epochs", [[0, 1, 2], [4, 4, 4], [0, 0, 1]])
def test_partition_field_composes_sequentially(epochs):
    # the env cannot verify which records a sender's value depends on: a partition label changes no charge
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    for epoch in epochs:
        _, _, _, _, infos = step(env, {0: [epoch_message(0, 1, epoch)]})
    assert infos["agent_0"]["epsilon_spent"] == 3.0
    assert env.privatizer.accountants[0].summary(0)["partitions"] == {None: {"epsilon": 3.0, "delta": 0.0, "events": 3}}


# ------------------------------------------------------------------------------------------ declarations
def test_strict_mode_rejects_undeclared_fields_by_name():
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"\['secret'\]"):
        step(env, {0: [Message(0, 1, "x", {"secret": 0.9})]})
    partly = Message(0, 1, "x", {"v": 0.5, "raw_sum": 3.0}, privacy=VALUE)
    with pytest.raises(ValueError, match=r"\['raw_sum'\].*Public\(\), Sensitive\(...\) or Privatized"):
        step(env, {0: [partly]})
    assert env.unwrapped.ledger.sent_messages.sum() == 0 and env.unwrapped.core.slot == 0


def test_non_strict_mode_passes_undeclared_fields_and_warns_once():
    env = LaplaceMessageDP(make_env(), epsilon=1.0, strict=False)
    env.reset(seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            obs, _, _, _, infos = step(env, {0: [Message(0, 1, "x", {"raw": 0.9})]})
            assert obs["agent_1"]["inbox"][0].payload["raw"] == 0.9
    assert [str(w.message) for w in caught] == [
        "DP wrapper (strict=False): field 'raw' of 'x' is undeclared and sent as is"
    ]
    assert infos["agent_0"]["epsilon_spent"] == 0.0


def test_privatized_and_public_fields_pass_unchanged_and_an_episode_declaration_is_charged_once():
    # A Fed_UCB-style agent privatises its input stream itself: accounted once, never noised again.
    declared = Privatized(epsilon=0.3, account_key="input_stream", scope="episode")
    declaration = {"noisy_sum": declared, "count": Public()}
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    for t in range(4):
        sends = {
            0: [
                Message(0, r, "stats", {"noisy_sum": [1.25 * t, -0.5], "count": t}, privacy=declaration) for r in (1, 2)
            ]
        }
        obs, _, _, _, infos = step(env, sends)
        for r in ("agent_1", "agent_2"):
            (message,) = obs[r]["inbox"]
            np.testing.assert_array_equal(message.payload["noisy_sum"], [1.25 * t, -0.5])
            assert message.payload["count"] == t and message.privacy == declaration
        assert infos["agent_0"]["epsilon_spent"] == 0.3
    summary = env.privatizer.accountants[0].summary(0)
    assert summary["num_events"] == 1  # once per (agent, account_key) for an episode declaration
    assert summary["partitions"] == {None: {"epsilon": 0.3, "delta": 0.0, "events": 1}}
    relayed = {"relayed": Privatized()}  # post-processing: no charge
    _, _, _, _, infos = step(env, {1: [Message(1, 2, "relay", {"relayed": 0.7}, privacy=relayed)]})
    assert infos["agent_1"]["epsilon_spent"] == 0.0
    assert env.privatizer.accountants[0].summary(1)["num_events"] == 0


def test_declared_cost_composes_sequentially_with_noised_releases():
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    own = {"s": Privatized(epsilon=0.3, account_key="input_stream")}
    step(env, {0: [Message(0, 1, "own", {"s": 0.1}, privacy=own)]})
    _, _, _, _, infos = step(env, {0: [value_message(0, 1)]})
    assert infos["agent_0"]["epsilon_spent"] == 0.3 + 1.0  # both under the default key: sequential
    _, _, _, _, infos = step(env, {0: [epoch_message(0, 1, 4)]})
    assert infos["agent_0"]["epsilon_spent"] == 0.3 + 1.0 + 1.0  # partitions compose sequentially too


def test_each_episode_account_key_is_charged_once_per_agent():
    declaration = {
        "a": Privatized(epsilon=0.25, account_key="rewards", scope="episode"),
        "b": Privatized(epsilon=0.25, account_key="rewards", scope="episode"),  # same key: charged once
        "c": Privatized(epsilon=0.5, account_key="contexts", scope="episode"),
    }
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    for _ in range(2):
        sends = {i: [Message(i, 1, "own", {"a": 0.1, "b": 0.2, "c": 0.3}, privacy=declaration)] for i in (0, 2)}
        obs, _, _, _, infos = step(env, sends)
        assert [m.payload["c"] for m in obs["agent_1"]["inbox"]] == [0.3, 0.3]  # never noised
        assert [infos[a]["epsilon_spent"] for a in env.agents] == [0.75, 0.0, 0.75]  # 0.25 + 0.5 per sending agent
    assert env.privatizer.accountants[0].summary(2)["num_events"] == 2


# ------------------------------------------------------------------------------------------ budget guard
def test_raise_stops_before_the_message_that_would_exceed():
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=2.0, on_exhausted="raise")
    env.reset(seed=0)
    for _ in range(2):
        obs, *_ = step(env, {0: [value_message(0, 1)]})
        assert len(obs["agent_1"]["inbox"]) == 1
    core, ledger = env.unwrapped.core, env.unwrapped.ledger
    regret, rng_state = core.regret.copy(), env.privatizer.rng(0, 0, "x").bit_generator.state
    with pytest.raises(PrivacyBudgetExceeded) as info:
        step(env, {0: [value_message(0, 1)]})
    assert info.value.agent == 0 and info.value.budget == 2.0
    # the rejected step changed nothing: same slot, no delivery, no charge, no noise drawn, env still live
    assert core.slot == 2 and env.agents == env.possible_agents
    assert ledger.sent_messages[0].tolist() == [2, 0, 0, 0] and ledger.messages[0] == 2
    np.testing.assert_array_equal(spent(env), [2.0, 0.0, 0.0])
    np.testing.assert_array_equal(core.regret, regret)
    assert env.privatizer.rng(0, 0, "x").bit_generator.state == rng_state
    # the episode goes on; the exhausted agent can never send again, the others can
    obs, *_ = step(env, {1: [value_message(1, 2)]})
    assert obs["agent_2"]["inbox"][0].sender == 1 and core.slot == 3
    with pytest.raises(PrivacyBudgetExceeded):
        step(env, {0: [value_message(0, 2)]})
    assert ledger.sent_messages[0].tolist() == [2, 1, 0, 0]


def test_a_budget_raise_leaves_every_accountant_unchanged():
    # agent 2's row comes first in the batch and fits; agent 0's row exceeds: the whole step is rejected
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=1.0, on_exhausted="raise")
    env.reset(seed=0)
    step(env, {0: [value_message(0, 1)]})
    sends = {2: [value_message(2, 1)], 0: [value_message(0, 1)]}
    actions = {a: {"arm": 0, "messages": sends.get(int(a[-1]), [])} for a in ("agent_2", "agent_1", "agent_0")}
    with pytest.raises(PrivacyBudgetExceeded):
        env.step(actions)
    assert env.unwrapped.ledger.sent_messages[0].tolist() == [1, 0, 0, 0]
    np.testing.assert_array_equal(spent(env), [1.0, 0.0, 0.0])
    obs, *_ = step(env, {2: [value_message(2, 1)]})  # agent 2's message was not charged: it still fits
    assert obs["agent_1"]["inbox"][0].sender == 2 and spent(env).tolist() == [1.0, 0.0, 1.0]


def test_a_rejected_records_field_leaves_the_accountant_unchanged():
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    declaration = {"m": Sensitive(aggregate="mean", records_field="n"), "n": Public()}
    with pytest.raises(ValueError, match="records field 'n' must be >= 1"):
        step(env, {2: [Message(2, 1, "x", {"m": 0.5, "n": 0}, privacy=declaration)]})
    assert env.unwrapped.ledger.sent_messages[0].tolist() == [0, 0, 0, 0]
    np.testing.assert_array_equal(spent(env), [0.0, 0.0, 0.0])
    assert env.privatizer.accountants[0].summary(2)["num_events"] == 0


@pytest.mark.parametrize("bad", ["records", "budget"])
def test_a_step_rejected_by_a_later_batch_charges_nothing(bad):
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=1.0, on_exhausted="raise")
    env.reset(seed=0)
    if bad == "records":  # agent 2's "y" mean of 0 records is invalid
        later = Message(2, 1, "y", {"m": 0.5, "n": 0}, privacy={"m": Sensitive(records_field="n"), "n": Public()})
    else:  # agent 2 spends its budget of 1 now; its next "y" would bring it to 2
        step(env, {2: [value_message(2, 1, kind="y")]})
        later = value_message(2, 1, kind="y")
    before = spent(env).tolist()
    # agent 0's "x" fits and comes first: the env batches by kind in order of first appearance, "x" before "y"
    with pytest.raises(ValueError if bad == "records" else PrivacyBudgetExceeded):
        step(env, {0: [value_message(0, 1, kind="x")], 2: [later]})
    assert env.unwrapped.ledger.sent_messages[0, 0] == 0  # holds today: the step was rejected
    assert spent(env).tolist() == before  # fails: agent 0 was charged 1.0 for a message never sent
    assert env.privatizer.rng(0, 0, "x").bit_generator.state == noise_rng(0, 0, "x").bit_generator.state


def test_budget_exceeded_reports_the_refused_total():
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=1.0)
    env.reset(seed=0)
    step(env, {0: [value_message(0, 1)]})
    with pytest.raises(PrivacyBudgetExceeded) as info:
        step(env, {0: [value_message(0, 1)]})
    assert info.value.spent == 2.0


def test_drop_removes_only_the_messages_that_would_exceed():
    # budget 2, eps 1 per message, sequential composition (epoch labels do not matter): each agent's third and later
    # epoch means are dropped; agent 0's public messages still go.
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=2.0, on_exhausted="drop")
    env.reset(seed=0)
    delivered, spent_by_slot = [], []
    for slot, epoch in enumerate([0, 0, 0, 1, 1, 1]):
        hello = Message(0, 2, "hello", {"n": slot}, privacy={"n": Public()})
        obs, _, _, _, infos = step(env, {0: [epoch_message(0, 1, epoch), hello], 1: [epoch_message(1, 2, slot)]})
        delivered.append(len(obs["agent_1"]["inbox"]) == 1)
        assert [m.sender for m in obs["agent_2"]["inbox"] if m.kind == "hello"] == [0]  # public messages go on
        spent_by_slot.append(infos["agent_0"]["epsilon_spent"])
    assert delivered == [True, True, False, False, False, False]
    assert spent_by_slot == [1.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    assert env.unwrapped.ledger.sent_messages[0].tolist() == [6 + 2, 2, 0, 0]  # hello x6 + 2 epoch means; agent 1
    assert spent(env).tolist() == [2.0, 2.0, 0.0]


def test_block_stops_the_agent_for_the_rest_of_the_episode():
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=2.0, on_exhausted="block")
    env.reset(seed=0)
    delivered = []
    for slot in range(6):  # agent 2 is refused at its third message too; it sends one later
        sends = {0: [epoch_message(0, 1, slot)], 2: [epoch_message(2, 1, slot)] if slot != 2 else []}
        obs, *_ = step(env, sends)
        delivered.append([m.sender for m in obs["agent_1"]["inbox"]])
    assert delivered == [[0, 2], [0, 2], [], [], [], []]
    assert env.unwrapped.ledger.sent_messages[0].tolist() == [2, 0, 2, 0]
    assert spent(env).tolist() == [2.0, 0.0, 2.0]
    assert env.privatizer.blocked.tolist() == [[True, False, True]]
    env.reset(seed=0)  # a new episode unblocks
    obs, *_ = step(env, {0: [epoch_message(0, 1, 0)]})
    assert len(obs["agent_1"]["inbox"]) == 1 and not env.privatizer.blocked.any()


def test_block_drops_every_later_message_of_the_sender():
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=1.0, on_exhausted="block")
    env.reset(seed=0)
    step(env, {0: [value_message(0, 1)]})
    hello = Message(0, 1, "hello", {"n": 1}, privacy={"n": Public()})
    obs, *_ = step(env, {0: [value_message(0, 1)]})  # would bring 1 -> 2: dropped, and agent 0 is blocked
    assert obs["agent_1"]["inbox"] == () and env.privatizer.blocked[0].tolist() == [True, False, False]
    relayed = Message(0, 1, "relay", {"r": 0.2}, privacy={"r": Privatized()})
    hello_from_2 = Message(2, 1, "hello", {"n": 1}, privacy={"n": Public()})
    obs, *_ = step(env, {0: [hello, relayed], 2: [hello_from_2]})
    assert [m.sender for m in obs["agent_1"]["inbox"]] == [2]  # nothing of agent 0, of any kind; agent 2 goes
    assert env.unwrapped.ledger.sent_messages[0].tolist() == [1, 0, 1, 0]


@pytest.mark.parametrize("mode", ["drop", "block"])
def test_the_guard_prices_a_message_with_several_fields_as_a_whole(mode):
    two = {"a": Sensitive(aggregate="value"), "b": Sensitive(aggregate="value")}
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=2.5, on_exhausted=mode)
    env.reset(seed=0)
    step(env, {0: [value_message(0, 1)]})
    obs, *_ = step(env, {0: [Message(0, 1, "pair", {"a": 0.1, "b": 0.2}, privacy=two)]})  # would bring 1 -> 3
    assert obs["agent_1"]["inbox"] == () and spent(env)[0] == 1.0


@pytest.mark.parametrize("mode", ["raise", "drop", "block"])
def test_declared_costs_are_guarded_by_the_budget(mode):
    env = LaplaceMessageDP(make_env(), epsilon=1.0, budget=2.0, on_exhausted=mode)
    env.reset(seed=0)
    own = {"s": Privatized(epsilon=3.0, account_key="input_stream")}  # 3 > budget 2
    if mode == "raise":
        with pytest.raises(PrivacyBudgetExceeded) as info:
            step(env, {0: [Message(0, 1, "own", {"s": 0.1}, privacy=own)]})
        assert info.value.spent == 3.0
    else:
        obs, *_ = step(env, {0: [Message(0, 1, "own", {"s": 0.1}, privacy=own)]})
        assert obs["agent_1"]["inbox"] == ()
    assert spent(env)[0] == 0.0 and env.privatizer.blocked[0, 0] == (mode == "block")
    small = {"s": Privatized(epsilon=1.5, account_key="other")}  # fits unless the agent is blocked
    obs, *_ = step(env, {0: [Message(0, 1, "own", {"s": 0.1}, privacy=small)]})
    assert len(obs["agent_1"]["inbox"]) == (mode != "block") and spent(env)[0] == (0.0 if mode == "block" else 1.5)


# ------------------------------------------------------------------------------------------ seeding
def received_values(seed: int, wrapper=None, slots: int = 6) -> tuple[list, np.ndarray, np.ndarray]:
    env = make_env(instance_seed=1)
    env = wrapper(env) if wrapper else env
    env.reset(seed=seed)
    values, rewards = [], []
    for t in range(slots):
        obs, reward, _, _, infos = step(env, {0: [value_message(0, 1)], 2: [value_message(2, 1)]}, arm=t % 4)
        values.append([m.payload["v"] for m in obs["agent_1"]["inbox"]])
        rewards.append(list(reward.values()))
    regret = np.array([infos[a]["pseudo_regret"] for a in env.possible_agents])
    return values, np.array(rewards), regret


def test_same_seed_same_noise_different_seed_different_noise():
    laplace = lambda env: LaplaceMessageDP(env, epsilon=1.0)  # noqa: E731
    first, _, _ = received_values(21, laplace)
    again, _, _ = received_values(21, laplace)
    other, _, _ = received_values(22, laplace)
    np.testing.assert_array_equal(first, again)
    assert np.all(np.array(first) != np.array(other))
    env = laplace(make_env())  # a second reset with the same seed replays the noise
    for _ in range(2):
        env.reset(seed=21)
        obs, *_ = step(env, {0: [value_message(0, 1)]})
        assert obs["agent_1"]["inbox"][0].payload["v"] == first[0][0]


@pytest.mark.parametrize(
    "wrapper",
    [
        lambda env: LaplaceMessageDP(env, epsilon=1.0),
        lambda env: GaussianMessageDP(env, epsilon=0.5, delta=1e-5),
        lambda env: LaplaceMessageDP(env, epsilon=1.0, budget=2.0, on_exhausted="block"),
    ],
)
def test_a_dp_wrapper_leaves_rewards_and_regret_unchanged(wrapper):
    raw_values, raw_rewards, raw_regret = received_values(5)
    _, rewards, regret = received_values(5, wrapper)
    np.testing.assert_array_equal(rewards, raw_rewards)
    np.testing.assert_array_equal(regret, raw_regret)
    assert np.all(np.array(raw_values) == 0.5)  # without the wrapper the declared values travel as they are


# ------------------------------------------------------------------------------------------ runner
MEANS_DECLARATION = {
    "means": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="counts"),
    "counts": Public(),
}


class AveragingServer(Coordinator):
    """Averages the noisy per-arm means it receives in a slot and broadcasts the average."""

    def reset(self, context, rngs):
        self.num_replicas = context.num_replicas

    def step(self, slot, inbox):
        replies = []
        for batch in inbox:
            if batch.kind != "means":
                continue
            totals = np.zeros((self.num_replicas, batch.payload["means"].shape[1]))
            np.add.at(totals, batch.replica, batch.payload["means"])
            senders = np.bincount(batch.replica, minlength=self.num_replicas)
            replicas = np.flatnonzero(senders)
            replies.append(
                MessageBatch(
                    "global",
                    replica=replicas,
                    sender=np.full(len(replicas), SERVER),
                    recipient=np.full(len(replicas), NEIGHBOURS),
                    payload={"means": totals[replicas] / senders[replicas, None]},
                    privacy={"means": Privatized(description="average of the noised means")},
                )
            )
        return replies


class NoisyMeanSharing(Population):
    """Every agent uploads its per-arm means (declared Sensitive) each slot once it has tried every arm, and plays UCB1
    with the server's average of the noisy means in place of its own means."""

    def make_coordinator(self):
        return AveragingServer()

    def reset(self, context):
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self.counts = np.zeros((b, m, k), np.int64)
        self.sums = np.zeros((b, m, k))
        self.shared = np.full((b, m, k), np.nan)
        self.replica, self.sender = np.repeat(np.arange(b), m), np.tile(np.arange(m), b)

    def act(self, step):
        means = self.sums / np.maximum(self.counts, 1)
        estimate = np.where(np.isnan(self.shared), means, self.shared)
        arms = ucb1_arms(self.counts, estimate * self.counts, self.counts.sum(axis=-1))
        ready = (self.counts.min(axis=-1) > 0).reshape(-1)
        if not ready.any():
            return Action(arms)
        upload = MessageBatch(
            "means",
            replica=self.replica[ready],
            sender=self.sender[ready],
            recipient=np.full(int(ready.sum()), SERVER),
            payload={
                "means": means.reshape(-1, means.shape[-1])[ready],
                "counts": self.counts.reshape(-1, means.shape[-1])[ready],
            },
            privacy=MEANS_DECLARATION,
        )
        return Action(arms, [upload])

    def observe(self, feedback):
        rows, cols = np.indices(feedback.arms.shape)
        self.counts[rows, cols, feedback.arms] += 1
        self.sums[rows, cols, feedback.arms] += feedback.rewards
        for batch in feedback.inbox:
            if batch.kind == "global":
                self.shared[batch.replica, batch.recipient] = batch.payload["means"]


def test_runner_batched_equals_pettingzoo_with_a_dp_wrapper_and_reports_epsilon():
    env = {"num_agents": 3, "num_arms": 3, "horizon": 30, "instance_seed": 2}
    wrappers = [lambda e: LaplaceMessageDP(e, epsilon=0.5, budget=4.0, on_exhausted="block")]
    seeds, slots = [3, 4, 5], list(range(1, 31))
    batched = run(NoisyMeanSharing, env, seeds, checkpoints=slots, batched=True, wrappers=wrappers)
    keys = ("group_regret", "messages", "up_messages", "down_messages", "cost", "epsilon_max", "epsilon_mean")
    table = lambda res: {(r["seed"], r["slot"]): tuple(r[k] for k in keys) for r in res.curves}  # noqa: E731
    per_agent = lambda res: {  # noqa: E731
        (r["seed"], r["slot"], r["agent"]): (r["regret"], r["messages_sent"], r["epsilon_spent"]) for r in res.agents
    }
    for seed in (3, 5):
        single = run(NoisyMeanSharing, env, [seed], checkpoints=slots, batched=False, wrappers=wrappers)
        assert {k: v for k, v in table(batched).items() if k[0] == seed} == table(single)
        assert {k: v for k, v in per_agent(batched).items() if k[0] == seed} == per_agent(single)
    # uploads from slot 3 (every arm tried), 0.5 each, blocked after 8 (budget 4): epsilon after s slots, by hand
    for row in batched.curves:
        expected = 0.5 * min(max(row["slot"] - 3, 0), 8)
        assert row["epsilon_max"] == row["epsilon_mean"] == expected
        assert row["up_messages"] == 3 * min(max(row["slot"] - 3, 0), 8)
    assert all(r["epsilon_spent"] == 0.5 * min(max(r["slot"] - 3, 0), 8) for r in batched.agents)
    assert all(r["delta_max"] == 0.0 for r in batched.curves)  # Laplace releases are pure DP
    gaussian = [lambda e: GaussianMessageDP(e, epsilon=0.5, delta=1e-6)]
    rows = run(NoisyMeanSharing, env, [3], checkpoints=[10], batched=True, wrappers=gaussian).curves
    assert rows[0]["delta_max"] == pytest.approx(7e-6, rel=1e-12)  # uploads in slots 4..10: 7 releases
    plain = run(NoisyMeanSharing, env, seeds, checkpoints=[30], batched=True)
    assert "epsilon_max" not in plain.curves[0] and "epsilon_spent" not in plain.agents[0]
    assert "delta_max" not in plain.curves[0] and "delta_spent" not in plain.agents[0]
    assert plain.curves[0]["up_messages"] == 3 * 27
    # the noise changes decisions (regret 20.0, 57.2, 47.1 with DP against 17.0, 19.3, 20.0 without), so the path
    # equality above covers the noise draws
    noisy = [r["group_regret"] for r in batched.curves if r["slot"] == 30]
    assert all(a != b for a, b in zip(noisy, plain.column("group_regret")))


def test_noise_does_not_depend_on_how_a_slot_is_batched():
    a_from_1 = Message(1, 2, "a", {"v": 0.25}, privacy=VALUE)
    b_from_0, b_from_1 = Message(0, 2, "b", {"v": 0.5}, privacy=VALUE), Message(1, 2, "b", {"v": 0.75}, privacy=VALUE)
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=1)  # PettingZoo: agent 0's "b" comes first, so batch "b" is noised before batch "a"
    obs, *_ = step(env, {0: [b_from_0], 1: [a_from_1, b_from_1]})
    pettingzoo = {(m.sender, m.kind): m.payload["v"] for m in obs["agent_2"]["inbox"]}
    wrapped = LaplaceMessageDP(make_env(), epsilon=1.0)
    core = wrapped.unwrapped.core
    core.reset([1], hooks=wrapped.message_hooks())  # a population that sends its "a" batch first
    batches = batches_from_messages([a_from_1]) + batches_from_messages([b_from_0, b_from_1])
    feedback = core.step(np.zeros((1, 3), np.int64), batches)
    batched = {(int(s), b.kind): b.payload["v"][r] for b in feedback.inbox for r, s in enumerate(b.sender)}
    assert batched.keys() == pettingzoo.keys()
    assert batched == pettingzoo
    for (sender, kind), value in batched.items():  # each from its own (sender, kind) generator, scale 1
        sent = {(1, "a"): 0.25, (0, "b"): 0.5, (1, "b"): 0.75}[sender, kind]
        assert value == pytest.approx(sent + noise_rng(1, sender, kind).laplace(0.0, 1.0, ()), rel=1e-13)


# ------------------------------------------------------------------------------------------ binary tree
def test_tree_releases_noisy_prefix_sums_of_the_running_sum():
    horizon, eps, seed = 12, 2.0, 13
    env = TreeMessageDP(make_env(horizon=horizon), epsilon=eps)
    env.reset(seed=seed)
    declaration = {"s": Sensitive(bounds=(0.0, 1.0), aggregate="sum")}
    increments = np.random.default_rng(0).random((horizon, 2))
    increments[-1] = [3.0, -1.0]  # out of range at the last slot only: clipped to [1, 0] before entering the trees
    clipped = np.clip(increments, 0.0, 1.0)
    scales = {0: 1.0, 2: 0.5}  # agent 2 sends half of the same running sums
    trees = {}
    for i in scales:  # one generator per (sender, kind), shared by the trees of that stream's entries
        rng = noise_rng(seed, i, "sums")
        trees[i] = [BinaryTreeMechanism(eps, horizon, 1.0, rng=rng) for _ in range(2)]
    for t in range(horizon):
        sends = {
            i: [Message(i, 1, "sums", {"s": c * increments[: t + 1].sum(axis=0)}, privacy=declaration)]
            for i, c in scales.items()
        }
        obs, _, _, _, infos = step(env, sends)
        got = {m.sender: m.payload["s"] for m in obs["agent_1"]["inbox"]}
        for i, c in scales.items():  # entries in order: the order of the lazy node draws
            expected = [tree.add(x) for tree, x in zip(trees[i], np.clip(c * increments[t], 0.0, 1.0))]
            np.testing.assert_allclose(got[i], expected, rtol=1e-12)
        # agent 0: the true running sum of the (clipped) records plus the node noises of the current prefix
        truth = clipped[: t + 1].sum(axis=0) + [sum(tree.node_noises().values()) for tree in trees[0]]
        np.testing.assert_allclose(got[0], truth, rtol=1e-12, atol=1e-12)
        # each stream is charged once, at its first release: TreeEvent(eps, levels) under the default key
        assert infos["agent_0"]["epsilon_spent"] == eps and infos["agent_2"]["epsilon_spent"] == eps
    assert trees[0][0].levels == 4 and trees[0][0].scale == 2.0  # bit_length(12) = 4 levels, node scale 1 / (eps/4)
    assert trees[0][0].noise_draws > horizon // 2  # nodes were drawn (the noise is not trivially zero)
    summary = env.privatizer.accountants[0].summary(0)
    assert summary["partitions"] == {None: {"epsilon": eps, "delta": 0.0, "events": 1}}


def test_tree_clips_each_increment_over_the_previous_message():
    env = TreeMessageDP(make_env(horizon=4), epsilon=1.0)
    env.reset(seed=3)
    declaration = {"s": Sensitive(bounds=(0.0, 1.0), aggregate="sum")}
    tree = BinaryTreeMechanism(1.0, 4, 1.0, rng=noise_rng(3, 0, "sums"))
    # running sums 5, 5, 5, 5: increments over the value sent before are 5 - 0 (clipped to 1), then 0, 0, 0; the
    # clipped jump is not carried (carrying it would give records 1, 1, 1, 1)
    for record in (1.0, 0.0, 0.0, 0.0):
        obs, *_ = step(env, {0: [Message(0, 1, "sums", {"s": 5.0}, privacy=declaration)]})
        assert obs["agent_1"]["inbox"][0].payload["s"] == pytest.approx(tree.add(record), rel=1e-12)


def test_tree_affects_all_charges_every_entry():
    env = TreeMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    declaration = {"s": Sensitive(bounds=(0.0, 1.0), aggregate="sum", affects="all")}
    for t in range(3):
        _, _, _, _, infos = step(env, {0: [Message(0, 1, "sums", {"s": [0.5 * t] * 3}, privacy=declaration)]})
    assert infos["agent_0"]["epsilon_spent"] == 3.0  # three entries, each stream once


@pytest.mark.parametrize(
    ("declaration", "payload"),
    [
        ({"m": Sensitive(aggregate="mean", records_field="n"), "n": Public()}, {"m": 0.5, "n": 2}),
        ({"m": Sensitive(bounds=(0.5, 1.0), aggregate="sum")}, {"m": 0.7}),  # 0 outside the increment bounds
        ({"m": Sensitive(bounds=(0.0, 1.0), aggregate="value")}, {"m": 0.7}),
    ],
)
def test_tree_rejects_declarations_that_are_not_running_sums(declaration, payload):
    env = TreeMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    warm(env, 2)  # the mean's records exist: it is refused for its aggregate
    with pytest.raises(ValueError, match="TreeMessageDP releases running sums"):
        step(env, {0: [Message(0, 1, "x", payload, privacy=declaration)]})


def test_tree_rejects_two_releases_of_one_stream_in_a_slot():
    env = TreeMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    declaration = {"s": Sensitive(bounds=(0.0, 1.0), aggregate="sum")}
    with pytest.raises(ValueError, match="twice in one slot; send it once, to NEIGHBOURS"):
        step(env, {0: [Message(0, r, "sums", {"s": 0.5}, privacy=declaration) for r in (1, 2)]})
    assert spent(env).tolist() == [0.0, 0.0, 0.0] and env.unwrapped.core.slot == 0
    # the same release to NEIGHBOURS: one tree record (0.5), charged once, every copy carries the same value
    obs, _, _, _, infos = step(env, {0: [Message(0, NEIGHBOURS, "sums", {"s": 0.5}, privacy=declaration)]})
    tree = BinaryTreeMechanism(1.0, 12, 1.0, rng=noise_rng(0, 0, "sums"))
    expected = tree.add(0.5)
    assert obs["agent_1"]["inbox"][0].payload["s"] == obs["agent_2"]["inbox"][0].payload["s"]
    assert obs["agent_1"]["inbox"][0].payload["s"] == pytest.approx(expected, rel=1e-12)
    assert infos["agent_0"]["epsilon_spent"] == 1.0


def test_tree_refuses_a_stream_that_changes_its_entries_or_has_none_before_charging_anything():
    declaration = {"s": Sensitive(bounds=(0.0, 1.0), aggregate="sum")}
    env = TreeMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    sums = lambda sender, n: [Message(sender, NEIGHBOURS, "sums", {"s": np.zeros(n)}, privacy=declaration)]  # noqa: E731
    step(env, {0: sums(0, 3)})
    with pytest.raises(ValueError, match="has 2 entries, but its stream opened with 3"):
        step(env, {0: sums(0, 2), 1: sums(1, 3)})  # agent 1's first release is refused with the slot
    assert spent(env).tolist() == [1.0, 0.0, 0.0] and env.unwrapped.core.slot == 1
    with pytest.raises(ValueError, match="has no entries"):
        step(env, {2: sums(2, 0)})
    assert spent(env).tolist() == [1.0, 0.0, 0.0] and env.unwrapped.core.slot == 1
    step(env, {0: sums(0, 3), 1: sums(1, 3)})
    assert spent(env).tolist() == [1.0, 1.0, 0.0]


@pytest.mark.parametrize(
    "fault", [lambda e: MessageDrops(e, 0.0), lambda e: MessageDelays(e, 0)], ids=["drops", "delays"]
)
def test_tree_refuses_to_wrap_a_fault_that_splits_broadcasts_and_takes_it_outside(fault):
    refused = r"TreeMessageDP cannot wrap Message(Drops|Delays): (it splits|a copy it holds)"
    with pytest.raises(ValueError, match=refused):
        TreeMessageDP(fault(make_env()), epsilon=1.0)
    env = fault(TreeMessageDP(make_env(), epsilon=1.0))  # noised once, then the copies are lost or delayed
    env.reset(seed=0)
    declaration = {"s": Sensitive(bounds=(0.0, 1.0), aggregate="sum")}
    obs, *_ = step(env, {0: [Message(0, NEIGHBOURS, "sums", {"s": 0.5}, privacy=declaration)]})
    assert obs["agent_1"]["inbox"][0].payload["s"] == obs["agent_2"]["inbox"][0].payload["s"]
    assert spent(env).tolist() == [1.0, 0.0, 0.0]


def test_laplace_inside_a_per_copy_fault_releases_and_charges_every_copy():
    """As documented: the fault splits a broadcast first, so each surviving copy is a release of its own."""
    declaration = {"v": Sensitive(bounds=(0.0, 1.0), aggregate="value")}
    charged = {}
    for name, env in {
        "inside": LaplaceMessageDP(MessageDrops(make_env(), 0.0), epsilon=1.0),
        "outside": MessageDrops(LaplaceMessageDP(make_env(), epsilon=1.0), 0.0),
    }.items():
        env.reset(seed=0)
        obs, *_ = step(env, {0: [Message(0, NEIGHBOURS, "x", {"v": 0.5}, privacy=declaration)]})
        values = [obs[a]["inbox"][0].payload["v"] for a in ("agent_1", "agent_2")]
        charged[name] = (spent(env)[0], values[0] == values[1])
    assert charged == {"inside": (2.0, False), "outside": (1.0, True)}


@pytest.mark.parametrize(
    ("bounds", "error", "match"),
    [
        ((0.0, 1.0, 2.0), TypeError, "must be a pair"),
        ("01", TypeError, "must be a pair"),
        (("0", "1"), TypeError, r"bounds\[0\] must be a real number"),
        ((-1e308, 1e308), ValueError, "finite width"),
        ((1.0, 0.0), ValueError, "low < high"),
        ((0.0, math.inf), ValueError, "finite"),
    ],
)
def test_sensitive_bounds_are_a_pair_of_finite_numbers_with_a_finite_width(bounds, error, match):
    with pytest.raises(error, match=match):
        Sensitive(bounds=bounds, aggregate="value")
    assert Sensitive(bounds=[0, 2], aggregate="value").bounds == (0.0, 2.0)  # a list is fine: kept as floats


def test_tree_rejects_a_release_in_the_step_and_again_in_the_boundary_hop_after_it():
    """The boundary hop after slot t carries slot t's number: a stream already released in step t cannot go again."""
    env = TreeMessageDP(make_env(boundary_hops=True), epsilon=1.0)
    env.reset(seed=0)
    declaration = {"s": Sensitive(bounds=(0.0, 1.0), aggregate="sum")}
    release = [Message(0, 1, "sums", {"s": 0.5}, privacy=declaration)]
    step(env, {0: release})
    with pytest.raises(ValueError, match="twice in one slot"):
        env.step({"agent_0": {"messages": release}})
    assert spent(env).tolist() == [1.0, 0.0, 0.0]
    # a stream not yet released in the slot may go in its boundary hop, and again in the next slot's step
    other = [Message(2, 1, "sums", {"s": 0.5}, privacy=declaration)]
    obs, *_ = env.step({"agent_2": {"messages": other}})
    assert len(obs["agent_1"]["inbox"]) == 1 and spent(env).tolist() == [1.0, 0.0, 1.0]
    env.step({})  # the boundary ends
    obs, *_ = step(env, {0: release, 2: other})
    assert len(obs["agent_1"]["inbox"]) == 2


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("epsilon", [0.0, -1.0, math.nan, math.inf])
def test_bad_epsilon(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        LaplaceMessageDP(make_env(), epsilon=epsilon)
    with pytest.raises(ValueError, match="epsilon"):
        TreeMessageDP(make_env(), epsilon=epsilon)


@pytest.mark.parametrize("epsilon", ["1", True, np.True_, [1.0], None])
def test_an_epsilon_that_is_not_a_number_is_a_type_error(epsilon):
    with pytest.raises(TypeError, match="epsilon must be a real number"):
        LaplaceMessageDP(make_env(), epsilon=epsilon)


@pytest.mark.parametrize("epsilon", [np.int64(2), np.float32(2.0), 2])
def test_a_numpy_epsilon_is_charged_as_its_value(epsilon):
    """An epsilon from a numpy grid (np.arange, np.float32) is a number like any other."""
    spent = []
    for value in (epsilon, 2.0):
        env = LaplaceMessageDP(make_env(), epsilon=value)
        env.reset(seed=0)
        step(env, {0: [value_message(0, 1)]})
        spent.append(env.epsilon_spent())
    assert np.array_equal(spent[0], spent[1]) and spent[1].sum() > 0


def test_bad_epsilon_from_a_schedule_is_rejected_when_used():
    env = LaplaceMessageDP(make_env(), epsilon=lambda z: 1.0 if z == 1 else 0.0)
    env.reset(seed=0)
    step(env, {0: [value_message(0, 1)]})
    with pytest.raises(ValueError, match="epsilon must be a number > 0"):
        step(env, {0: [value_message(0, 1)]})


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, math.nan])
def test_bad_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        GaussianMessageDP(make_env(), epsilon=0.5, delta=delta)


def test_bad_wrapper_options():
    with pytest.raises(ValueError, match="calibration"):
        LaplaceMessageDP(make_env(), epsilon=1.0, calibration="loose")
    with pytest.raises(ValueError, match="on_exhausted"):
        LaplaceMessageDP(make_env(), epsilon=1.0, on_exhausted="ignore")
    with pytest.raises(ValueError, match="gaussian_calibration"):
        GaussianMessageDP(make_env(), epsilon=0.5, delta=1e-5, gaussian_calibration="exact")
    with pytest.raises(ValueError, match="budget"):
        LaplaceMessageDP(make_env(), epsilon=1.0, budget=0.0)
    with pytest.raises(ValueError, match="n_agg"):
        LaplaceMessageDP(make_env(), epsilon=1.0, n_agg=0)


@pytest.mark.parametrize(
    "options",
    [{"n_agg": 2.7}, {"n_agg": "3"}, {"budget": "1"}, {"budget_delta": "0.1"}, {"delta": "0.1"}, {"secure": 1}],
)
def test_a_wrapper_option_of_the_wrong_type_is_a_type_error(options):
    """Before, n_agg=2.7 was taken as 2 and '3' as 3, silently; string budgets failed inside a comparison."""
    with pytest.raises(TypeError, match=next(iter(options))):
        GaussianMessageDP(make_env(), epsilon=0.5, **{"delta": 1e-3, **options})


def test_numpy_wrapper_options_are_numbers():
    env = GaussianMessageDP(make_env(), epsilon=0.5, delta=np.float32(1e-3), n_agg=np.int64(2), budget=np.int64(9))
    assert env.privatizer.n_agg == 2 and env.privatizer.budget == 9


def test_bad_declarations_and_payloads():
    with pytest.raises(ValueError, match="bounds=\\(low, high\\) or an explicit sensitivity_field"):
        Sensitive(bounds=None)
    with pytest.raises(ValueError, match="needs records_field"):
        Sensitive(aggregate="mean")
    with pytest.raises(ValueError, match="low < high"):
        Sensitive(bounds=(1.0, 0.0), aggregate="value")
    with pytest.raises(ValueError, match="must be Public"):  # a records field must itself be public
        Message(
            0,
            1,
            "x",
            {"m": 0.5, "n": 3},
            privacy={"m": Sensitive(records_field="n"), "n": Sensitive(aggregate="value")},
        )
    with pytest.raises(ValueError, match="NaN or inf"):
        Message(0, 1, "x", {"v": math.nan}, privacy=VALUE)
    with pytest.raises(ValueError, match="NaN or inf"):
        MessageBatch("x", replica=[0], sender=[0], recipient=[1], payload={"v": [math.nan]}, privacy=VALUE)
    env = LaplaceMessageDP(make_env(), epsilon=1.0)
    env.reset(seed=0)
    declaration = {"m": Sensitive(aggregate="mean", records_field="n"), "n": Public()}
    with pytest.raises(ValueError, match="records field 'n' must be >= 1"):
        step(env, {0: [Message(0, 1, "x", {"m": 0.5, "n": 0}, privacy=declaration)]})


class NotFedbandit(ParallelEnv):
    possible_agents = ["a"]
    metadata: dict = {}


def test_wrapping_something_that_is_not_a_fedbandit_env():
    with pytest.raises(TypeError, match="wraps a fedbandit environment"):
        LaplaceMessageDP(NotFedbandit(), epsilon=1.0)


def test_wrapping_a_plain_object_raises_type_error():
    with pytest.raises(TypeError, match="wraps a fedbandit environment"):
        LaplaceMessageDP(object(), epsilon=1.0)


def test_wrapping_an_env_that_was_already_reset_asks_for_reset():
    env = make_env()
    env.reset(seed=0)
    wrapped = LaplaceMessageDP(env, epsilon=1.0)
    with pytest.raises(RuntimeError, match=r"not reset through this LaplaceMessageDP.*call reset\(\) on the wrapper"):
        step(wrapped, {0: [value_message(0, 1)]})
    assert env.unwrapped.core.slot == 0 and env.unwrapped.ledger.sent_messages.sum() == 0  # nothing went unnoised
    wrapped.reset(seed=4)
    obs, *_ = step(wrapped, {0: [value_message(0, 1)]})
    assert obs["agent_1"]["inbox"][0].payload["v"] == pytest.approx(0.5 + noise_rng(4, 0, "x").laplace(), rel=1e-13)


def test_gaussian_classical_with_large_epsilon_is_rejected_at_construction():
    for epsilon in (1.5, 1.0):
        with pytest.raises(ValueError, match="epsilon must be < 1 for the classical Gaussian bound"):
            GaussianMessageDP(make_env(), epsilon=epsilon, delta=1e-5)
    with pytest.raises(ValueError, match="epsilon must be < 1 for the classical Gaussian bound"):
        GaussianMessageDP(make_env(), epsilon=0.5, delta=1e-5, calibration="paper", n_agg=2)  # noise for 2 * 0.5 = 1
    GaussianMessageDP(make_env(), epsilon=0.45, delta=1e-5, calibration="paper", n_agg=2)  # 0.9 < 1: accepted
    GaussianMessageDP(make_env(), epsilon=1.5, delta=1e-5, gaussian_calibration="analytic")  # any epsilon


def test_noise_spec_validates_its_fields():
    with pytest.raises(ValueError, match="mechanism must be one of \\('laplace', 'gaussian'\\), got 'lapalce'"):
        NoiseSpec("lapalce")
    with pytest.raises(ValueError, match="gaussian_calibration must be one of"):
        NoiseSpec("gaussian", 1e-5, "exact")
    for delta in (0.0, 1.0):  # the default delta 0 is only for Laplace
        with pytest.raises(ValueError, match="delta must be in \\(0, 1\\) for the Gaussian mechanism"):
            NoiseSpec("gaussian", delta)
    assert NoiseSpec("laplace").delta == 0.0


def test_message_dp_base_class_takes_any_privatizer():
    privatizer = MessagePrivatizer(NoiseSpec("laplace"), epsilon=0.25)
    env = MessageDP(make_env(), privatizer)
    env.reset(seed=1)
    obs, *_ = step(env, {0: [value_message(0, 1)]})
    assert obs["agent_1"]["inbox"][0].payload["v"] == pytest.approx(
        0.5 + noise_rng(1, 0, "x").laplace(0, 1, ()) * 4.0, rel=1e-13
    )
    np.testing.assert_array_equal(env.epsilon_spent(), [0.25, 0.0, 0.0])


def test_delta_spent_is_reported_in_infos_and_runner_tables():
    # Gaussian releases of delta = 1e-5 each: after 3 messages an agent has spent 3e-5 (basic composition).
    env = GaussianMessageDP(make_env(), epsilon=0.5, delta=1e-5)
    env.reset(seed=0)
    for _ in range(3):
        *_, infos = step(env, {0: [value_message(0, 1)]})
    assert infos["agent_0"]["delta_spent"] == pytest.approx(3e-5, rel=1e-12)
    assert infos["agent_0"]["epsilon_spent"] == pytest.approx(1.5, rel=1e-12)
    assert infos["agent_1"]["delta_spent"] == 0.0


def test_classical_gaussian_accepts_large_epsilon_only_when_allowed():
    with pytest.raises(ValueError, match="epsilon"):
        GaussianMessageDP(make_env(), epsilon=1.5, delta=1e-5)
    env = GaussianMessageDP(make_env(), epsilon=1.5, delta=1e-5, allow_large_epsilon=True)
    assert env.privatizer.noise.scale(np.float64(2.0), 1.5) == pytest.approx(
        2.0 * math.sqrt(2 * math.log(1.25e5)) / 1.5
    )


@pytest.mark.parametrize(
    "wrap",
    [
        lambda env, **kw: LaplaceMessageDP(env, 0.5, **kw),
        lambda env, **kw: GaussianMessageDP(env, 0.5, 1e-3, **kw),
        lambda env, **kw: TreeMessageDP(env, 0.5, **kw),
    ],
)
def test_wrappers_hand_their_keywords_to_the_privatizer(wrap):
    options = {"budget": 4.0, "on_exhausted": "block", "strict": False, "budget_delta": 0.5, "kinds": ("k",)}
    privatizer = wrap(make_env(), **options).privatizer
    assert (privatizer.budget, privatizer.on_exhausted, privatizer.strict) == (4.0, "block", False)
    assert (privatizer.budget_delta, privatizer.kinds) == (0.5, frozenset({"k"}))
    with pytest.raises(TypeError, match="budgt"):
        wrap(make_env(), budgt=1.0)


def test_laplace_and_gaussian_wrappers_take_the_paper_calibration():
    laplace = LaplaceMessageDP(make_env(), 0.5, calibration="paper", n_agg=3).privatizer
    gaussian = GaussianMessageDP(make_env(), 0.2, 1e-3, calibration="paper", n_agg=3).privatizer
    assert (laplace.calibration, laplace.n_agg) == (gaussian.calibration, gaussian.n_agg) == ("paper", 3)
