"""The DP wrappers' floating-point-safe mode (``secure=True``, fedbandit_envs/privacy/secure.py): OpenDP's samplers.

OpenDP cannot be seeded, so these tests are the only unseeded ones of the DP suite: every statistical check compares a
distribution with a test at level 1e-6 (false-failure probability 1e-6 per check), on 5_000 draws, which detects a
scale off by 15 % (the Kolmogorov-Smirnov distance is then about 0.045, the critical distance 0.038).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from scipy import stats

from fedbandit_envs import FederatedMAB, Message
from fedbandit_envs.channel.privacy import Sensitive, declare_message_kinds
from fedbandit_envs.privacy.mechanisms import _TreeParameters
from fedbandit_envs.privacy.secure import measurement
from wrappers.dp import (
    GaussianMessageDP,
    LaplaceMessageDP,
    NoiseSpec,
    SecureTreeSums,
    TreeMessageDP,
    gaussian_sigma_analytic,
    laplace_scale,
)

ENTRIES = 5_000
LEVEL = 1e-6
declare_message_kinds("x")  # the kind sent_once sends (public by construction)


def sent_once(wrapper, payload: np.ndarray, declaration: Sensitive, seed: int = 0) -> tuple[np.ndarray, float]:
    """What agent 1 receives when agent 0 sends ``payload`` once under ``wrapper``, and agent 0's epsilon spent."""
    env = wrapper(FederatedMAB(num_agents=2, num_arms=2, horizon=4, topology="complete"))
    env.reset(seed=seed)
    message = Message(0, 1, "x", {"v": payload}, privacy={"v": declaration})
    obs, _, _, _, infos = env.step({"agent_0": {"arm": 0, "messages": [message]}, "agent_1": {"arm": 0}})
    return obs["agent_1"]["inbox"][0].payload["v"], infos["agent_0"]["epsilon_spent"]


# ------------------------------------------------------------------------------------------ OpenDP's own accounting
@pytest.mark.parametrize("sensitivity, epsilon", [(1.0, 1.0), (0.1, 0.5), (2.0, 3.0)])
def test_opendp_privacy_maps_agree_with_the_charged_calibration(sensitivity, epsilon):
    scale = laplace_scale(sensitivity, epsilon)
    assert measurement("laplace", scale).map(sensitivity) == pytest.approx(epsilon, rel=1e-12)
    sigma = gaussian_sigma_analytic(sensitivity, epsilon, 1e-5)
    rho = sensitivity**2 / (2 * sigma**2)  # the continuous Gaussian's zCDP, which the discrete one keeps
    assert measurement("gaussian", sigma).map(sensitivity) == pytest.approx(rho, rel=1e-12)


# ------------------------------------------------------------------------------------------ message wrappers
def test_secure_laplace_has_the_calibrated_scale_and_charge_and_is_not_seeded():
    values = np.full(ENTRIES, 0.25)
    declaration = Sensitive(bounds=(0.0, 1.0), aggregate="value")
    secure = lambda env: LaplaceMessageDP(env, epsilon=0.5, secure=True)  # noqa: E731
    got, charged = sent_once(secure, values, declaration)
    _, charged_default = sent_once(lambda env: LaplaceMessageDP(env, epsilon=0.5), values, declaration)
    assert charged == charged_default == 0.5
    assert stats.kstest(got - 0.25, stats.laplace(scale=2.0).cdf).pvalue > LEVEL  # scale 1 / 0.5
    again, _ = sent_once(secure, values, declaration)
    assert not np.array_equal(got, again)  # same seed, fresh noise: secure runs are not reproducible


def test_secure_gaussian_has_the_calibrated_sigma_and_charge():
    values = np.full(ENTRIES, 0.75)
    declaration = Sensitive(bounds=(0.0, 1.0), aggregate="value")
    kwargs = {"epsilon": 0.5, "delta": 1e-5, "gaussian_calibration": "analytic"}
    got, charged = sent_once(lambda env: GaussianMessageDP(env, **kwargs, secure=True), values, declaration)
    _, charged_default = sent_once(lambda env: GaussianMessageDP(env, **kwargs), values, declaration)
    assert charged == charged_default == 0.5
    sigma = gaussian_sigma_analytic(1.0, 0.5, 1e-5)
    assert stats.kstest(got - 0.75, stats.norm(scale=sigma).cdf).pvalue > LEVEL


def test_secure_values_are_clipped_before_release():
    got, _ = sent_once(
        lambda env: LaplaceMessageDP(env, epsilon=1.0, secure=True),
        np.full(ENTRIES, 7.0),
        Sensitive(bounds=(0.0, 1.0), aggregate="value"),
    )
    assert stats.kstest(got - 1.0, stats.laplace(scale=1.0).cdf).pvalue > LEVEL  # 7 clipped to 1, then noised


def test_secure_tree_wrapper_charges_the_stream_once_and_noises_each_entry_at_the_node_scale():
    declaration = Sensitive(bounds=(0.0, 1.0), aggregate="sum")
    secure = lambda env: TreeMessageDP(env, epsilon=2.0, secure=True)  # noqa: E731
    got, charged = sent_once(secure, np.full(ENTRIES, 0.5), declaration)
    _, charged_default = sent_once(lambda env: TreeMessageDP(env, epsilon=2.0), np.full(ENTRIES, 0.5), declaration)
    assert charged == charged_default == 2.0
    # horizon 4: 3 levels, node scale 1 / (2 / 3); the first release is one level-0 node
    assert stats.kstest(got - 0.5, stats.laplace(scale=1.5).cdf).pvalue > LEVEL


# ------------------------------------------------------------------------------------------ the secure tree
def test_secure_tree_reuses_each_node_and_sums_the_prefix_nodes():
    parameters = _TreeParameters(1.0, 8, 1.0, "levels", False, None)  # 4 levels: node scale 4
    tree = SecureTreeSums(ENTRIES, parameters)
    releases = [tree.add(np.ones(ENTRIES)) for _ in range(8)]
    node = stats.laplace(scale=4.0).cdf
    # count 2 and 4 and 8: one node each (blocks [1, 2], [1, 4], [1, 8])
    for count in (2, 4, 8):
        assert stats.kstest(releases[count - 1] - count, node).pvalue > LEVEL
    # count 3 reuses node [1, 2] and adds node [3, 3]: the difference is exactly node [3, 3] minus its record
    assert stats.kstest(releases[2] - releases[1] - 1.0, node).pvalue > LEVEL
    # count 7 = [1, 4] + [5, 6] + [7, 7]: three independent nodes, variance 3 x 2 x 16 = 96 (one node missing: 64).
    # The sum of 3 Laplace draws has excess kurtosis 1, so the sample variance has sd sqrt(3 / 5000) = 2.4 % of it;
    # 12 % is 4.9 sd
    assert np.var(releases[6] - 7) == pytest.approx(96.0, rel=0.12)
    with pytest.raises(ValueError, match="stream_length=8 exceeded"):
        tree.add(np.ones(ENTRIES))


# ------------------------------------------------------------------------------------------ errors
def test_secure_needs_opendp_and_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "opendp", None)
    monkeypatch.setitem(sys.modules, "opendp.prelude", None)
    with pytest.raises(ImportError, match=r"pip install \"fedbandit-envs\[secure\]\""):
        NoiseSpec("laplace", secure=True)
    with pytest.raises(ImportError, match="OpenDP"):
        LaplaceMessageDP(FederatedMAB(num_agents=2, num_arms=2, horizon=4), epsilon=1.0, secure=True)


def test_secure_must_be_a_bool():
    with pytest.raises(TypeError, match="secure must be True or False"):
        NoiseSpec("laplace", secure="yes")
