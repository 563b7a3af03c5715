"""Exact checks of the Li-Wang reference agents (spec section 4.6, E1-E10) and their bad-input errors.

Unit scale of the spec: N = 20 clients, T = 600 slots, d = 5, K = 10 (every run takes well under a second).
Lemma 3's coverage check (spec section 5) is statistical, in the slow tier.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from agents import li_wang
from agents.li_wang import (
    AsyncLinUCB,
    AsyncLinUCBAM,
    NLinUCB,
    OneLinUCB,
    SyncLinUCB,
    _inv,
    _log_det_ridged,
    am_step,
    communication_bound,
    confidence_radius,
    log_det,
    log_det_bound,
    regret_factor,
    sync_threshold,
    table1_bounds,
)
from fedbandit_envs.algorithms import make_algorithm
from fedbandit_envs.channel import ChannelConfig, CostModel
from fedbandit_envs.core import Phase, Step, message_phases
from fedbandit_envs.families.linear.env import LinearConfig, LinearCore

N, T, D, K = 20, 600, 5, 10
LAM, SIGMA, DELTA = 0.1, 0.1, 0.1
SMALL = {"num_clients": N, "num_arms": K, "dimension": D, "horizon": T}


class CentralLinUCB:
    """A plain LinUCB written independently of the agents: solve and slogdet at every step."""

    def __init__(self, dim: int, alpha: float | None = None) -> None:
        self.v = LAM * np.eye(dim)
        self.b = np.zeros(dim)
        self.dim, self.alpha = dim, alpha

    def scores(self, contexts: np.ndarray) -> np.ndarray:
        theta = np.linalg.solve(self.v, self.b)
        if self.alpha is None:
            ld = np.linalg.slogdet(self.v)[1]
            alpha = SIGMA * np.sqrt(ld - self.dim * np.log(LAM) + 2 * np.log(1 / DELTA)) + np.sqrt(LAM)
        else:
            alpha = self.alpha
        inv = np.linalg.inv(self.v)
        return contexts @ theta + alpha * np.sqrt(np.einsum("kp,pq,kq->k", contexts, inv, contexts))

    def update(self, x: np.ndarray, y: float) -> None:
        self.v += np.outer(x, x)
        self.b += x * y


def assert_same_choice(arm: int, scores: np.ndarray) -> bool:
    """The agent's arm is the reference's argmax, unless the top two scores are a near-tie (< 1e-9).

    Returns whether the arms were compared (near-ties never occurred in these runs).
    """
    top = np.sort(scores)[-2:]
    if top[1] - top[0] <= 1e-9:
        return False
    assert arm == int(np.argmax(scores))
    return True


def play(population, config: LinearConfig, seed: int = 0, before=None, after=None, record_messages=False):
    """Drive the batched core with one replica; ``before(core, step)`` and ``after(core, step, arms, rewards)``."""
    costs = CostModel(c1=0.0, price_per_message=1.0)
    core = LinearCore(config, ChannelConfig(costs, record_messages=record_messages), population.make_coordinator())
    core.reset([seed])
    population.reset(core.context)
    while not core.done:
        step = core.current_step()
        if before is not None:
            before(core, step)
        arms = population.act(step).arms
        feedback = core.pull(arms)
        population.observe(feedback)
        message_phases(core, population)
        if after is not None:
            after(core, step, arms, feedback.rewards)
    return core


def chosen(step: Step, arms: np.ndarray) -> np.ndarray:
    return step.contexts[0, 0, arms[0, 0]]


# ---------------------------------------------------------------------- E1, E2, E3
def test_e1_gamma_one_eager_is_centralised_linucb_with_nt_messages():
    config = LinearConfig(**SMALL)
    reference = CentralLinUCB(D)
    population = OneLinUCB()
    checked, compared = [], []

    def before(core, step):
        i = int(step.clients[0, 0])
        np.testing.assert_allclose(population.stats.v[0, i], reference.v - LAM * np.eye(D), rtol=1e-9, atol=1e-12)
        checked.append(reference.scores(step.contexts[0, 0]))

    def after(core, step, arms, rewards):
        compared.append(assert_same_choice(int(arms[0, 0]), checked[-1]))
        reference.update(chosen(step, arms), float(rewards[0, 0]))

    core = play(population, config, before=before, after=after)
    totals = core.channel.ledger.totals()
    assert totals["messages"] == N * T  # 1 upload + (N - 1) downloads per step
    assert totals["up_messages"] == T and totals["down_messages"] == (N - 1) * T
    assert totals["cost"] == N * T  # one unit per message
    assert sum(compared) == T


def test_e2_gamma_one_lazy_count():
    config = LinearConfig(**SMALL)
    clients = []
    core = play(
        AsyncLinUCB(gamma=1.0), config, after=lambda core, step, arms, rewards: clients.append(int(step.clients[0, 0]))
    )
    expected, seen = 0, set()
    for t, i in enumerate(clients):
        new = i not in seen
        seen.add(i)
        expected += len(seen) + (1 if new and t > 0 else 0)
    assert core.channel.ledger.totals()["messages"] == expected
    assert expected < N * T  # lazy registration saves the downloads to clients not seen yet


def test_e3_gamma_infinite_is_n_independent_linucbs():
    config = LinearConfig(**SMALL)
    references = {i: CentralLinUCB(D) for i in range(N)}
    pending, compared = [], []

    def before(core, step):
        pending.append(references[int(step.clients[0, 0])].scores(step.contexts[0, 0]))

    def after(core, step, arms, rewards):
        compared.append(assert_same_choice(int(arms[0, 0]), pending[-1]))
        references[int(step.clients[0, 0])].update(chosen(step, arms), float(rewards[0, 0]))

    core = play(NLinUCB(), config, before=before, after=after)
    assert core.channel.ledger.totals()["messages"] == 0
    assert sum(compared) == T


# ---------------------------------------------------------------------- E4: Sync
@pytest.mark.parametrize("registration", ["lazy", "eager"])
def test_e4_sync_costs_two_messages_per_registered_client_per_round(registration):
    config = LinearConfig(**SMALL)
    active = []
    core = play(
        SyncLinUCB(threshold=1.0, registration=registration),
        config,
        after=lambda core, step, arms, rewards: active.append(int(step.clients[0, 0])),
        record_messages=True,
    )
    records = core.channel.ledger.records()
    ups = records["slot"][records["kind"] == "sync_upload"]
    downs = records["slot"][records["kind"] == "sync_download"]
    rounds = np.unique(ups)
    assert 0 < len(rounds) < T
    for slot in rounds:  # one round per slot at most: every registered client uploads, then downloads
        registered = N if registration == "eager" else len(set(active[: slot + 1]))
        assert np.count_nonzero(ups == slot) == registered
        assert np.count_nonzero(downs == slot) == registered
    assert core.channel.ledger.totals()["messages"] == 2 * len(ups)


def test_e4_sync_zero_threshold_is_centralised_and_infinite_is_independent():
    config = LinearConfig(**SMALL)
    reference = CentralLinUCB(D)
    pending, compared = [], []

    def before(core, step):
        pending.append(reference.scores(step.contexts[0, 0]))

    def after(core, step, arms, rewards):
        compared.append(assert_same_choice(int(arms[0, 0]), pending[-1]))
        reference.update(chosen(step, arms), float(rewards[0, 0]))

    core = play(SyncLinUCB(threshold=0.0, registration="eager"), config, before=before, after=after)
    assert core.channel.ledger.totals()["messages"] == 2 * N * T
    assert sum(compared) == T
    active = []
    lazy = play(
        SyncLinUCB(threshold=0.0),
        config,
        after=lambda core, step, arms, rewards: active.append(int(step.clients[0, 0])),
    )
    assert lazy.channel.ledger.totals()["messages"] == 2 * sum(len(set(active[: t + 1])) for t in range(T))
    never = play(SyncLinUCB(threshold=np.inf), config)
    independent = play(NLinUCB(), config)
    assert never.channel.ledger.totals()["messages"] == 0
    np.testing.assert_array_equal(never.regret, independent.regret)


# ---------------------------------------------------------------------- E5: the log-det bound
@pytest.mark.parametrize(("gamma", "registration"), [(1.5, "eager"), (3.0, "lazy"), (10.0, "lazy"), (1.2, "lazy")])
def test_e5_communication_is_below_the_log_det_bound(gamma, registration):
    config = LinearConfig(**SMALL)
    gram = np.zeros((D, D))

    def after(core, step, arms, rewards):
        gram[:] += np.outer(chosen(step, arms), chosen(step, arms))

    core = play(AsyncLinUCB(gamma=gamma, registration=registration), config, after=after)
    ledger = core.channel.ledger
    gain = float(log_det(gram, LAM) - D * np.log(LAM))
    assert gain <= log_det_bound(D, T, LAM)
    per_client = ledger.sent_messages[0, :N] + ledger.received_messages[0, :N]
    assert np.all(per_client < gain / np.log(gamma))
    registered = N if registration == "eager" else int(np.count_nonzero(core.arrivals[0]))
    assert 0 < ledger.totals()["messages"] < communication_bound(registered, gain, gamma, gamma)


# ---------------------------------------------------------------------- E6, E7: invariants
@pytest.mark.parametrize("registration", ["lazy", "eager"])
def test_e6_protocol_invariants_after_every_step(registration):
    gamma_u, gamma_d = 1.5, 2.0
    config = LinearConfig(**SMALL)
    population = AsyncLinUCB(gamma_u=gamma_u, gamma_d=gamma_d, registration=registration)
    gram, sums = np.zeros((D, D)), np.zeros(D)
    state = {"uploads": 0, "exempt": set(), "registered": set()}

    def after(core, step, arms, rewards):
        server, stats = population.server, population.stats
        x, y = chosen(step, arms), float(rewards[0, 0])
        gram[:] += np.outer(x, x)
        sums[:] += x * y
        # I4's exemption: clients registered since the last upload event. The next slot's client
        # registers when this slot closes, after this slot's upload (if any).
        uploads = core.channel.ledger.totals()["up_messages"]
        new = set(np.flatnonzero(server.registered[0]).tolist()) - state["registered"]
        state["registered"] |= new
        if uploads > state["uploads"]:
            state["exempt"] = new - {int(step.clients[0, 0])}
        else:
            state["exempt"] |= new
        state["uploads"] = uploads
        registered = np.flatnonzero(server.registered[0])
        np.testing.assert_allclose(stats.v[0] - stats.dv[0], server.base_v[0], atol=1e-10)  # I1
        np.testing.assert_allclose(stats.b[0] - stats.db[0], server.base_b[0], atol=1e-10)
        np.testing.assert_allclose(server.v[0] + stats.dv[0].sum(axis=0), gram, atol=1e-9)  # I2
        np.testing.assert_allclose(server.b[0] + stats.db[0].sum(axis=0), sums, atol=1e-9)
        ratio_u = log_det(stats.v[0, registered], LAM) - log_det(stats.v[0, registered] - stats.dv[0, registered], LAM)
        assert np.all(ratio_u <= np.log(gamma_u) + 1e-9)  # I3
        checked = [j for j in registered if j not in state["exempt"]]
        ratio_d = log_det(server.v[0], LAM) - log_det(server.base_v[0, checked], LAM)
        assert np.all(ratio_d <= np.log(gamma_d) + 1e-9)  # I4

    play(population, config, after=after)
    assert state["uploads"] > 0


def test_e7_lemma1_deterministic_bound_eager():
    gamma = 1.5
    bound = gamma * (1 + (N - 1) * (gamma - 1))
    config = LinearConfig(**SMALL)
    population = AsyncLinUCB(gamma=gamma, registration="eager")
    gram = LAM * np.eye(D)
    ratios = []

    def before(core, step):
        v_i = population.stats.v[0, int(step.clients[0, 0])] + LAM * np.eye(D)
        ratios.append(scipy.linalg.eigh(gram, v_i, eigvals_only=True).max())

    def after(core, step, arms, rewards):
        gram[:] += np.outer(chosen(step, arms), chosen(step, arms))

    play(population, config, before=before, after=after)
    assert 1 - 1e-9 <= min(ratios) and max(ratios) <= bound
    gram[:] = LAM * np.eye(D)
    ratios.clear()
    population = OneLinUCB()
    play(population, config, before=before, after=after)
    np.testing.assert_allclose(ratios, 1.0, atol=1e-9)


# ---------------------------------------------------------------------- E8, E9: alternating minimisation
def test_e8_am_without_local_features_equals_async_linucb():
    config = LinearConfig(**SMALL)  # homogeneous: every d_i = 0
    common = {"gamma": 2.0, "alpha_mode": "constant", "alpha": 0.5}
    async_core = play(AsyncLinUCB(**common), config)
    am_core = play(AsyncLinUCBAM(am_init="given", theta_g_init=np.zeros(D), **common), config)
    np.testing.assert_array_equal(am_core.regret, async_core.regret)
    assert am_core.channel.ledger.totals() == async_core.channel.ledger.totals()


def test_e8_am_without_global_features_is_silent_n_linucb():
    config = LinearConfig(**SMALL, mode="heterogeneous", global_dimension=0)
    common = {"alpha_mode": "constant", "alpha": 0.5}
    am_core = play(AsyncLinUCBAM(gamma=1.0, am_init="given", theta_g_init=np.zeros(0), **common), config)
    independent = play(NLinUCB(**common), config)
    assert am_core.channel.ledger.totals()["messages"] == 0
    np.testing.assert_array_equal(am_core.regret, independent.regret)


def test_e9_am_step_is_a_fixed_point_of_both_normal_equations():
    rng = np.random.default_rng(0)
    d_g, d_l = 3, 2
    theta_g, theta_l = np.array([0.3, -0.2, 0.1]), np.array([0.2, 0.25])
    xs = rng.normal(size=(40, d_g + d_l)) / 3
    ys = xs[:, :d_g] @ theta_g + xs[:, d_g:] @ theta_l + 0.05 * rng.normal(size=40)
    gram_g, b_g = xs[:-1, :d_g].T @ xs[:-1, :d_g], xs[:-1, :d_g].T @ ys[:-1]
    gram_l, b_l = xs[:-1, d_g:].T @ xs[:-1, d_g:], xs[:-1, d_g:].T @ ys[:-1]
    x_g, x_l, y = xs[-1, :d_g], xs[-1, d_g:], float(ys[-1])
    new_g, new_l, y_g, y_l = am_step(gram_g, b_g, gram_l, b_l, x_g, x_l, y, np.zeros(d_g), np.zeros(d_l))
    assert np.linalg.norm(new_g) < 1 and np.linalg.norm(new_l) < 1  # no projection active
    p_g, p_l = gram_g + np.outer(x_g, x_g), gram_l + np.outer(x_l, x_l)
    assert np.linalg.norm(p_l @ new_l - (b_l + x_l * (y - x_g @ new_g))) < 1e-8
    assert np.linalg.norm(p_g @ new_g - (b_g + x_g * (y - x_l @ new_l))) < 1e-8
    assert y_g == pytest.approx(y - x_l @ new_l) and y_l == pytest.approx(y - x_g @ new_g)


def test_e9_warmup_initial_estimate_is_exact_without_noise():
    d_g = 2
    config = LinearConfig(
        num_clients=2, num_arms=K, dimension=D, horizon=60, mode="heterogeneous", global_dimension=d_g, sigma=0.0
    )
    population = AsyncLinUCBAM(gamma=np.inf)  # no downloads: the transition uses the local OLS estimate
    core = play(population, config)
    theta = core.replicas[0].theta
    assert population.ready[0].all()
    np.testing.assert_allclose(population.theta_g[0], theta[:, :d_g], atol=1e-8)


@pytest.mark.slow
@pytest.mark.statistical
def test_lemma3_global_confidence_ellipsoid_covers_theta_g():
    """Lemma 3 (spec section 5): with ``am_init="given"`` (theta_g plus N(0, 0.01^2) noise, D11) the AM clients'
    ridge estimate on the partial rewards satisfies ``||theta_hat_g - theta_g||_{V_i + lam I} <= alpha_g`` at
    >= 1 - delta - 0.02 of the decisions, over 10 seeds (N = 20, T = 600, d_g = 3, d_i = 2, gamma = 2).

    alpha_g = (sigma + 2) sqrt(ld(V_i + lam I) - d_g log lam + 2 log(1/delta)) + sqrt(lam), computed here from the
    client's statistics. Measured: covered at every one of the 6000 decisions (the radius is loose: its
    (sigma + 2) factor is the AM error's sub-Gaussian constant, Lemma 11).
    """
    d_g = 3
    config = LinearConfig(**SMALL, mode="heterogeneous", global_dimension=d_g)
    covered, decisions = 0, 0
    for seed in range(10):
        probe = LinearCore(config, ChannelConfig(CostModel()), None)
        probe.reset([seed])
        theta_g = probe.replicas[0].theta[0, :d_g]
        start = theta_g + 0.01 * np.random.default_rng(1000 + seed).standard_normal((1, N, d_g))
        population = AsyncLinUCBAM(gamma=2.0, am_init="given", theta_g_init=start)

        def before(core, step, population=population, theta_g=theta_g):
            nonlocal covered, decisions
            client = int(step.client_ids()[0, 0])
            v = population.stats.v[0, client] + LAM * np.eye(d_g)
            error = np.linalg.solve(v, population.stats.b[0, client]) - theta_g
            ld = np.linalg.slogdet(v)[1]
            alpha = (SIGMA + 2) * np.sqrt(ld - d_g * np.log(LAM) + 2 * np.log(1 / DELTA)) + np.sqrt(LAM)
            covered += bool(np.sqrt(error @ v @ error) <= alpha)
            decisions += 1

        play(population, config, seed=seed, before=before)
    assert decisions == 10 * T
    print(f"Lemma 3 coverage {covered}/{decisions}")
    assert covered / decisions >= 1 - DELTA - 0.02


# ---------------------------------------------------------------------- E10: formulas
def test_e10_alpha_and_table1_formulas():
    v = np.array([[2.0, 0.5], [0.5, 1.0]])
    ld = np.log(np.linalg.det(v + LAM * np.eye(2)))
    expected = SIGMA * np.sqrt(ld - 2 * np.log(LAM) + 2 * np.log(1 / DELTA)) + np.sqrt(LAM)
    assert confidence_radius(log_det(v, LAM), 2, 0, SIGMA, LAM, DELTA, 1.0, "theory", 0.3) == pytest.approx(expected)
    upper = SIGMA * np.sqrt(2 * np.log(1 + 7 / (2 * LAM)) + 2 * np.log(1 / DELTA)) + np.sqrt(LAM)
    assert confidence_radius(0.0, 2, 7, SIGMA, LAM, DELTA, 1.0, "theory_upper", 0.3) == pytest.approx(upper)
    assert confidence_radius(0.0, 2, 7, SIGMA, LAM, DELTA, 1.0, "constant", 0.3) == 0.3
    for gamma, n in ((1.3, 7), (2.0, 100)):
        assert regret_factor(gamma, n) == pytest.approx(np.sqrt((n - 1) * gamma**2 + (2 - n) * gamma))
    big = 10**8
    assert regret_factor(np.exp(big**-0.5), big) / big**0.25 == pytest.approx(1.0, rel=1e-3)
    assert regret_factor(np.exp(1 / big), big) == pytest.approx(np.sqrt(2), rel=1e-3)
    table = table1_bounds(1000, 25, 30000, 0.1)  # spec E5's numbers for the section 4.1 setting
    assert log_det_bound(25, 30000, 0.1) == pytest.approx(25 * np.log(12001))
    assert table["gamma_exp_n_half"]["comm_bound"] == pytest.approx(7.43e6, rel=5e-3)
    assert table["gamma_exp_1_over_n"]["comm_bound"] == pytest.approx(2.35e8, rel=5e-3)
    assert table["gamma_1"]["comm_bound"] == 3e7
    assert communication_bound(1000, 25 * np.log(12001), 1.1, 1.1) == pytest.approx(
        2.46e6, rel=5e-3
    )  # the spec quotes 3 digits
    assert communication_bound(1000, 25 * np.log(12001), 5.0, 5.0) == pytest.approx(1.46e5, rel=5e-3)
    assert sync_threshold("paper_regret", 20, 5, 600) == pytest.approx(600 / (400 * 5 * np.log(600)))
    assert table["sync_paper_comm"]["D"] == pytest.approx(30000 / (1000**1.5 * 25 * np.log(30000)))


@pytest.mark.parametrize("gufuncs", [True, False])
def test_lapack_gufuncs_give_numpy_linalg_results_and_errors(gufuncs, monkeypatch):
    """The inverse and log-determinant through numpy.linalg's gufuncs equal its functions' bit for bit, errors too.

    Without the gufuncs (a numpy whose private module moved) the functions stand in, with the same results and errors.
    """
    if not gufuncs:
        monkeypatch.setattr(li_wang, "_umath_linalg", None)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 9, 5))
    ridged = np.einsum("bnp,bnq->bpq", x, x) + LAM * np.eye(5)
    assert np.array_equal(_inv(ridged), np.linalg.inv(ridged))
    assert np.array_equal(_inv(ridged[:1]), np.linalg.inv(ridged[:1]))
    factor = np.linalg.cholesky(ridged)
    assert np.array_equal(_log_det_ridged(ridged), 2.0 * np.log(factor.diagonal(0, -2, -1)).sum(-1))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        _inv(np.zeros((1, 3, 3)))
    with pytest.raises(ValueError, match="not positive definite"):
        log_det(-np.eye(3)[None], LAM)
    before = np.geterr()
    with np.errstate(invalid="ignore"):  # the caller's error state holds again afterwards
        _inv(ridged)
        assert np.geterr()["invalid"] == "ignore"
    assert np.geterr() == before


# ---------------------------------------------------------------------- payload options
def test_packed_payload_changes_sizes_not_decisions():
    config = LinearConfig(**SMALL)
    dense = play(AsyncLinUCB(gamma=2.0), config)
    packed = play(AsyncLinUCB(gamma=2.0, pack_symmetric=True), config)
    np.testing.assert_array_equal(dense.regret, packed.regret)
    a, b = dense.channel.ledger.totals(), packed.channel.ledger.totals()
    assert a["messages"] == b["messages"] > 0
    assert a["scalars"] == a["messages"] * (D * D + D) and a["bytes"] == 8 * a["scalars"]
    assert b["scalars"] == b["messages"] * (D * (D + 1) // 2 + D)


def test_theory_upper_counts_travel_with_messages():
    config = LinearConfig(**SMALL)
    population = OneLinUCB(alpha_mode="theory_upper")
    seen = []
    play(population, config, before=lambda core, step: seen.append(population.stats.count[0, step.clients[0, 0]]))
    assert seen == list(range(T))  # at gamma = 1 (eager) every client holds all t observations
    assert population.server.count[0] == T


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name", ["gamma", "gamma_u", "gamma_d"])
def test_an_empty_threshold_sequence_is_refused_at_construction(name):
    # it was accepted and failed only when the run started ("gamma_d has 0 values")
    with pytest.raises(ValueError, match=f"^{name} must be a scalar or one value per client, got an empty"):
        make_algorithm("async_linucb", **{name: []})
    with pytest.raises(ValueError, match=f"^{name} must be a scalar or one value per client, got an empty"):
        AsyncLinUCBAM(**{name: ()})


def test_bad_thresholds_and_parameters():
    with pytest.raises(ValueError, match="gamma must be >= 1"):
        AsyncLinUCB(gamma=0.5)
    with pytest.raises(ValueError, match="gamma_d must be >= 1"):
        AsyncLinUCB(gamma_d=[1.0, 0.9])
    with pytest.raises(ValueError, match="gamma must be >= 1"):
        AsyncLinUCBAM(gamma=float("nan"))
    with pytest.raises(ValueError, match="threshold must be >= 0"):
        SyncLinUCB(threshold=-1.0)
    with pytest.raises(ValueError, match="alpha_mode"):
        AsyncLinUCB(alpha_mode="optimistic")
    with pytest.raises(ValueError, match="theta_g_init"):
        AsyncLinUCBAM(am_init="given")
    with pytest.raises(ValueError, match="one value per client"):
        play(AsyncLinUCB(gamma_u=[2.0, 3.0]), LinearConfig(**SMALL))


def test_dimension_mismatch_non_finite_contexts_and_too_few_arms():
    config = LinearConfig(**SMALL)
    with pytest.raises(ValueError, match="dimension=4"):
        play(AsyncLinUCB(dimension=4), config)
    population = AsyncLinUCB()
    core = LinearCore(config, coordinator=population.make_coordinator())
    step = core.reset([0])
    population.reset(core.context)
    with pytest.raises(ValueError, match="d mismatch"):
        population.act(Step(0, clients=step.clients, contexts=step.contexts[..., :3]))
    bad = step.contexts.copy()
    bad[0, 0, 1, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        population.act(Step(0, clients=step.clients, contexts=bad))
    with pytest.raises(ValueError, match="K >= 2"):
        population.act(Step(0, clients=step.clients, contexts=step.contexts[:, :, :1]))
    with pytest.raises(ValueError, match="num_arms"):
        LinearConfig(**{**SMALL, "num_arms": 1})


# ---------------------------------------------------------------------- perturbed payloads (message hooks)
class AddToUploads:
    """A hook that adds eps * I to every uploaded matrix (a stand-in for a DP perturbation)."""

    def __init__(self, eps: float) -> None:
        self.eps, self.resets = eps, 0

    def reset(self, context, streams) -> None:
        self.resets += 1

    def __call__(self, slot, batches):
        return [
            b.with_payload({**b.payload, "dV": b.payload["dV"] + self.eps * np.eye(D)}, b.privacy)
            if b.kind == "upload"
            else b
            for b in batches
        ]


def test_server_state_stays_exact_under_perturbed_uploads():
    """The server's base representation uses what it received, so V_g - base_j is the true buffer."""
    config = LinearConfig(**SMALL)
    population = AsyncLinUCB(gamma=1.5)
    hook = AddToUploads(1e-3)
    costs = CostModel(c1=0.0, price_per_message=1.0)
    core = LinearCore(config, ChannelConfig(costs, record_messages=True), population.make_coordinator())
    core.reset([0], hooks=[hook])
    population.reset(core.context)
    clean = np.zeros((D, D))
    sent = np.zeros((N, D, D))  # what each client's uploads became on the way (clean + eps * I)
    received = np.zeros((N, D, D))
    while not core.done:
        step = core.current_step()
        population.observe(core.play(population.act(step)))
        phase = core.first_phase()
        uploads = population.send(phase)
        for batch in uploads:
            clean += batch.payload["dV"].sum(axis=0)
            np.add.at(sent, batch.sender, batch.payload["dV"] + 1e-3 * np.eye(D))
        inbox = core.communicate(uploads)
        for batch in inbox:
            np.add.at(received, batch.recipient, batch.payload["dV"])
        population.receive(phase, inbox)
    server = population.server
    ups = core.channel.ledger.totals()["up_messages"]
    assert hook.resets == 1 and ups > 0
    np.testing.assert_allclose(server.v[0], clean + ups * 1e-3 * np.eye(D), atol=1e-9)
    # each base is exactly what the server received from the client plus what it sent the client
    np.testing.assert_allclose(server.base_v[0], sent + received, atol=1e-9)
    # the clients' view differs (I1 breaks under perturbation): their own data entered without the noise
    stats = population.stats
    assert not np.allclose(stats.v[0] - stats.dv[0], server.base_v[0], atol=1e-6)


@pytest.mark.parametrize("algorithm", [AsyncLinUCB, SyncLinUCB, AsyncLinUCBAM])
def test_clients_refuse_steps_and_phases_of_another_family(algorithm):
    population = algorithm()
    core = LinearCore(LinearConfig(**SMALL), ChannelConfig(CostModel()), population.make_coordinator())
    core.reset([0])
    population.reset(core.context)
    with pytest.raises(ValueError, match="linear.family"):  # no contexts, no clients: a MAB step
        population.act(Step(0, partners=np.full((1, 2), -1)))
    with pytest.raises(ValueError, match="no arm contexts"):
        population.act(Step(0, clients=core.current_step().clients))
    with pytest.raises(ValueError, match="names no acting clients"):
        population.act(Step(0, contexts=core.current_step().contexts))
    with pytest.raises(ValueError, match="boundary phase names no reporting client"):
        population.send(Phase(0, "boundary"))
