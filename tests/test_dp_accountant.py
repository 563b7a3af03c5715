"""Privacy accountant: composition within / across partition keys, numerical accounting, budgets."""

from __future__ import annotations

import math
import sys

import dp_accounting
import numpy as np
import pytest

from fedbandit_envs.privacy.accountant import (
    DeclaredEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyAccountant,
    PrivacyBudgetExceeded,
    TreeEvent,
)
from fedbandit_envs.privacy.mechanisms import BinaryTreeMechanism, IntervalRelease, LaplaceMechanism


def test_basic_composition_with_partitions():
    acc = PrivacyAccountant(3)
    for _ in range(3):
        acc.record(1, LaplaceEvent(0.5), partition="A")
    for _ in range(2):
        acc.record(1, LaplaceEvent(1.0), partition="B")
    # sequential within a key (A: 1.5, B: 2.0), parallel across keys: max(1.5, 2.0) = 2.0
    assert acc.epsilon(1) == 2.0
    assert acc.delta(1) == 0.0
    acc.record(1, LaplaceEvent(0.25))  # the default key (partition=None) may touch any record
    assert acc.epsilon(1, "basic") == 2.25  # so it composes with every key: 0.25 + max(1.5, 2.0)
    acc.record(1, LaplaceEvent(0.5), partition="A")
    assert acc.epsilon(1) == 2.25  # A reaches 2.0 too
    acc.record(1, LaplaceEvent(0.25), partition="A")
    assert acc.epsilon(1) == 2.5  # 0.25 + A's 2.25
    np.testing.assert_array_equal(acc.totals(), [0.0, 2.5, 0.0])
    summary = acc.summary(1)
    assert summary["num_events"] == 8 and summary["num_partitions"] == 3
    assert summary["partitions"]["A"] == {"epsilon": 2.25, "delta": 0.0, "events": 5}
    assert summary["partitions"][None]["epsilon"] == 0.25
    assert summary["remaining_epsilon"] == math.inf


def test_basic_delta_sums_within_key_and_maxes_across_keys():
    acc = PrivacyAccountant(1)
    for _ in range(8):
        acc.record(0, GaussianEvent(0.1, 0.01, 30.0), partition=("producer", 0))
    acc.record(0, GaussianEvent(0.1, 0.01, 30.0), partition=("producer", 1))
    assert acc.epsilon(0) == pytest.approx(0.8)
    assert acc.delta(0) == pytest.approx(0.08)  # solanki-pfcb §4.2 check 4: delta_tot = 8 delta
    assert acc.delta(0, "advanced", delta_prime=1e-6) == pytest.approx(0.08 + 1e-6)


def test_advanced_composition_closed_form():
    acc = PrivacyAccountant(2)
    k, eps, delta_prime = 50, 0.1, 1e-6
    for _ in range(k):
        acc.record(0, LaplaceEvent(eps))
    closed = math.sqrt(2 * k * math.log(1 / delta_prime)) * eps + k * eps * (math.exp(eps) - 1)
    assert closed == pytest.approx(4.2427768, rel=1e-7)  # 3.7169222 + 0.5258546
    assert acc.epsilon(0, "advanced", delta_prime=delta_prime) == pytest.approx(closed, rel=1e-12)
    assert acc.epsilon(1, "advanced", delta_prime=delta_prime) == 0.0


@pytest.mark.parametrize(("dp_eps", "basic", "advanced"), [(0.1, 4.51, 2.97), (1.0, 48.1, 17.5)])
def test_dubey_spot_values(dp_eps, basic, advanced):
    # dubey-pentland §5.2: releases at n = f, 2f, ..., 1000 with eps_j = n_j^(-v/2), v = 1.1, delta' = e^-10
    release = IntervalRelease(dp_eps, np.random.default_rng(0))
    acc = PrivacyAccountant(1)
    for _ in range(1000):
        if release.update(0.5):
            acc.record(0, release.event(), partition="arm 0")
    assert acc.epsilon(0) == pytest.approx(basic, rel=1e-3)  # spec values are rounded to 3 digits
    assert acc.epsilon(0, "advanced", delta_prime=math.exp(-10)) == pytest.approx(advanced, rel=1e-3)


def _direct(method, events):
    accountant = dp_accounting.pld.PLDAccountant() if method == "pld" else dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.ComposedDpEvent(events))
    return accountant


@pytest.mark.parametrize("method", ["pld", "rdp"])
def test_numerical_accounting_matches_dp_accounting(method):
    acc = PrivacyAccountant(2)
    for _ in range(30):
        acc.record(0, LaplaceEvent(0.2), partition="laplace")
    for _ in range(10):
        acc.record(0, GaussianEvent(0.5, 1e-5, 3.0), partition="gaussian")
    for _ in range(5):
        acc.record(1, LaplaceEvent(0.2))
        acc.record(1, GaussianEvent(0.5, 1e-5, 3.0))
    laplace = _direct(method, [dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(5.0), 30)])
    gaussian = _direct(method, [dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(3.0), 10)])
    mixed = _direct(
        method,
        [
            dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(5.0), 5),
            dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(3.0), 5),
        ],
    )
    expected_0 = max(laplace.get_epsilon(1e-6), gaussian.get_epsilon(1e-6))
    assert acc.epsilon(0, method, target_delta=1e-6) == pytest.approx(expected_0, rel=1e-9)
    assert acc.epsilon(1, method, target_delta=1e-6) == pytest.approx(mixed.get_epsilon(1e-6), rel=1e-9)
    expected_delta = max(laplace.get_delta(2.0), gaussian.get_delta(2.0))
    assert acc.delta(0, method, target_epsilon=2.0) == pytest.approx(expected_delta, rel=1e-9)


@pytest.mark.parametrize("method", ["pld", "rdp"])
def test_tree_event_is_levels_laplace_nodes(method):
    tree = BinaryTreeMechanism(1.0, 1000, rng=np.random.default_rng(0))
    acc = PrivacyAccountant(1)
    acc.record(0, tree.event())
    assert tree.event() == TreeEvent(1.0, 10)
    node = dp_accounting.LaplaceDpEvent(10.0)  # eps' = 1/10, noise multiplier 1/eps'
    direct = _direct(method, [dp_accounting.SelfComposedDpEvent(node, 10)])
    assert acc.epsilon(0, method, target_delta=1e-6) == pytest.approx(direct.get_epsilon(1e-6), rel=1e-9)
    assert acc.epsilon(0) == 1.0


@pytest.mark.parametrize("method", ["pld", "rdp"])
def test_numerical_accounting_beats_basic_for_many_small_laplace_events(method):
    acc = PrivacyAccountant(1)
    mech = LaplaceMechanism(1.0, 0.05)
    for _ in range(400):
        acc.record(0, mech.event())
    assert acc.epsilon(0) == pytest.approx(20.0)
    assert acc.epsilon(0, method, target_delta=1e-6) < acc.epsilon(0)
    assert acc.epsilon(0, method, target_delta=1e-6) < acc.epsilon(0, "advanced", delta_prime=1e-6)


def test_declared_events_are_added_by_basic_composition():
    acc = PrivacyAccountant(1)
    for _ in range(4):
        acc.record(0, LaplaceEvent(0.5))
    plain = acc.epsilon(0, "pld", target_delta=1e-6)
    acc.record(0, DeclaredEvent(0.3, 1e-7, description="binary_tree_laplace"))
    assert acc.epsilon(0) == pytest.approx(2.3)
    assert acc.delta(0) == pytest.approx(1e-7)
    assert acc.epsilon(0, "pld", target_delta=1e-6) == pytest.approx(plain + 0.3, rel=1e-12)
    assert acc.delta(0, "pld", target_epsilon=0.2) == 1.0  # below the declared epsilon


def test_infinite_epsilon_events():
    acc = PrivacyAccountant(1)
    acc.record(0, LaplaceEvent(math.inf), partition=0)
    assert acc.epsilon(0) == math.inf
    assert acc.epsilon(0, "pld", target_delta=1e-6) == math.inf
    assert acc.epsilon(0, "rdp", target_delta=1e-6) == math.inf


@pytest.mark.parametrize("eps", [710.0, 1e6, 1e200])
def test_huge_epsilon_events_saturate_the_advanced_bound(eps):
    # exp(eps) overflows a float above eps ~ 709.78: the drift term is then infinite, basic composition stays exact
    acc = PrivacyAccountant(1)
    acc.record(0, LaplaceEvent(eps))
    acc.record(0, TreeEvent(eps, levels=3), partition=1)
    acc.record(0, GaussianEvent(eps, 1e-6, noise_multiplier=1.0), partition=2)
    assert acc.epsilon(0) == 2 * eps
    assert acc.delta(0) == 1e-6
    assert acc.epsilon(0, "advanced", delta_prime=1e-6) == math.inf
    assert acc.delta(0, "advanced", delta_prime=1e-6) == pytest.approx(2e-6)
    assert acc.epsilon(0, "rdp", target_delta=1e-6) >= 2 * eps
    assert acc.delta(0, "rdp", target_epsilon=1.0) == 1.0


def test_advanced_composition_just_below_the_overflow_is_unchanged():
    acc = PrivacyAccountant(1)
    acc.record(0, LaplaceEvent(700.0))
    expected = math.sqrt(2 * math.log(1e6) * 700.0**2) + 700.0 * math.expm1(700.0)
    assert acc.epsilon(0, "advanced", delta_prime=1e-6) == expected


def test_charge_raises_exactly_when_the_budget_would_be_exceeded():
    acc = PrivacyAccountant(2, budget_epsilon=1.0)
    event = LaplaceEvent(0.25)
    for _ in range(4):
        assert not acc.would_exceed(0, event, "arm 0")
        acc.charge(0, event, "arm 0")
    assert acc.epsilon(0) == 1.0 and acc.remaining(0) == 0.0
    assert acc.would_exceed(0, event, "arm 0")
    with pytest.raises(PrivacyBudgetExceeded) as info:
        acc.charge(0, event, "arm 0")
    assert (info.value.agent, info.value.spent, info.value.budget) == (0, 1.25, 1.0)
    assert acc.epsilon(0) == 1.0 and acc.summary(0)["num_events"] == 4  # nothing recorded
    # another key is disjoint data: it has its own 1.0 under parallel composition
    assert not acc.would_exceed(0, LaplaceEvent(1.0), "arm 1")
    acc.charge(0, LaplaceEvent(1.0), "arm 1")
    assert acc.would_exceed(0, LaplaceEvent(1e-9), "arm 1")
    assert not acc.would_exceed(1, LaplaceEvent(1.0))
    # floating-point sums at the budget fit
    acc_tenths = PrivacyAccountant(1, budget_epsilon=1.0)
    for _ in range(10):
        acc_tenths.charge(0, LaplaceEvent(0.1))
    assert acc_tenths.would_exceed(0, LaplaceEvent(1e-6))


def test_budget_delta():
    gaussian = GaussianEvent(0.1, 0.01, 31.0)
    assert not PrivacyAccountant(1, budget_epsilon=1.0).would_exceed(0, gaussian)  # delta not enforced by default
    assert PrivacyAccountant(1, budget_epsilon=1.0, budget_delta=0.0).would_exceed(0, gaussian)  # pure-DP budget
    acc = PrivacyAccountant(1, budget_epsilon=10.0, budget_delta=0.03)
    for _ in range(3):
        acc.charge(0, gaussian)
    with pytest.raises(PrivacyBudgetExceeded, match="budget"):
        acc.charge(0, gaussian)
    assert not PrivacyAccountant(1).would_exceed(0, LaplaceEvent(100.0))  # no budget


def test_many_agents_and_events():
    acc = PrivacyAccountant(200)
    for agent in range(200):
        for i in range(200):
            acc.record(agent, LaplaceEvent(0.01 * (1 + agent % 3)), partition=i % 4)
    totals = acc.totals()
    assert totals.shape == (200,)
    np.testing.assert_allclose(totals[:3], [0.5, 1.0, 1.5])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda acc: LaplaceEvent(0.0), ValueError, "epsilon"),
        (lambda acc: LaplaceEvent(-1.0), ValueError, "epsilon"),
        (lambda acc: LaplaceEvent(math.nan), ValueError, "epsilon"),
        (lambda acc: GaussianEvent(0.5, 0.0, 1.0), ValueError, "delta"),
        (lambda acc: GaussianEvent(0.5, 1.0, 1.0), ValueError, "delta"),
        (lambda acc: GaussianEvent(0.5, 1e-5, 0.0), ValueError, "noise_multiplier"),
        (lambda acc: DeclaredEvent(0.5, 1.5), ValueError, "delta"),
        (lambda acc: TreeEvent(1.0, 0), ValueError, "levels"),
        (lambda acc: acc.epsilon(0, "zcdp"), ValueError, "method"),
        (lambda acc: acc.delta(0, "moments"), ValueError, "method"),
        (lambda acc: acc.epsilon(3), ValueError, "agent"),
        (lambda acc: acc.record(-1, LaplaceEvent(1.0)), ValueError, "agent"),
        (lambda acc: acc.record(1.0, LaplaceEvent(1.0)), TypeError, "agent"),
        (lambda acc: acc.record(0, 0.5), TypeError, "event"),
        (lambda acc: acc.record(0, LaplaceEvent(1.0), partition=[1]), TypeError, "partition"),
        (lambda acc: acc.epsilon(0, "advanced"), ValueError, "delta_prime"),
        (lambda acc: acc.epsilon(0, "advanced", delta_prime=1.0), ValueError, "delta_prime"),
        (lambda acc: acc.epsilon(0, "pld"), ValueError, "target_delta"),
        (lambda acc: acc.epsilon(0, "rdp", target_delta=0.0), ValueError, "target_delta"),
        (lambda acc: acc.delta(0, "pld"), ValueError, "target_epsilon"),
        (lambda acc: acc.delta(0, "rdp", target_epsilon=-1.0), ValueError, "target_epsilon"),
        (lambda acc: PrivacyAccountant(0), ValueError, "num_agents"),
        (lambda acc: PrivacyAccountant(2, budget_epsilon=-1.0), ValueError, "budget_epsilon"),
        (lambda acc: PrivacyAccountant(2, budget_epsilon=1.0, budget_delta=2.0), ValueError, "budget_delta"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call(PrivacyAccountant(3))


def test_missing_dp_accounting_gives_install_hint(monkeypatch):
    acc = PrivacyAccountant(1)
    acc.record(0, LaplaceEvent(1.0))
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(ImportError, match=r"fedbandit-envs\[dp\]"):
        acc.epsilon(0, "pld", target_delta=1e-6)
    assert acc.epsilon(0) == 1.0  # basic accounting needs no extra package


def test_default_key_composes_with_every_partition_in_every_method():
    # Releases on all records (key None) plus one per epoch: sequential with each epoch, parallel across epochs.
    acc = PrivacyAccountant(1, budget_epsilon=2.0)
    acc.record(0, LaplaceEvent(1.0))
    acc.record(0, LaplaceEvent(0.5), partition=("epoch", 1))
    acc.record(0, LaplaceEvent(0.5), partition=("epoch", 2))
    assert acc.epsilon(0) == 1.5
    assert acc.projected(0, [(LaplaceEvent(0.5), ("epoch", 1)), (LaplaceEvent(0.25), None)]) == (2.25, 0.0)
    assert acc.would_exceed(0, LaplaceEvent(0.75), None) and not acc.would_exceed(0, LaplaceEvent(0.5), ("epoch", 2))
    # advanced composition of {1.0, 0.5} (the merged key) at delta' = 1e-6, by hand
    expected = math.sqrt(2 * math.log(1e6) * (1.0 + 0.25)) + 1.0 * math.expm1(1.0) + 0.5 * math.expm1(0.5)
    assert acc.epsilon(0, "advanced", delta_prime=1e-6) == pytest.approx(expected, rel=1e-12)


def test_a_delta_budget_is_enforced_without_an_epsilon_budget():
    accountant = PrivacyAccountant(1, budget_delta=1e-5)
    event = GaussianEvent(0.5, 1e-5, 4.0)
    accountant.charge(0, event)
    assert accountant.would_exceed(0, event)
    with pytest.raises(PrivacyBudgetExceeded, match=r"budget of \(none, 1e-05\)"):
        accountant.charge(0, event)
    assert accountant.delta_totals().tolist() == [1e-5]
