"""The Li-Wang agents' deferred work is exact: shared server bases, deferred replacements, lazy factorisations.

Each representation is compared bit for bit with the straightforward one it replaces (the reference mode,
:mod:`fedbandit_envs.reference`, for the deferred replacements; random workloads in
``tests/test_reference_agents.py``), and the work done per slot is checked to touch only the clients that act.
"""

from __future__ import annotations

import numpy as np
import pytest

from agents.li_wang import (
    _MAX_RUNS,
    RANK_TOL,
    SHARED_RTOL,
    AsyncLinUCB,
    BufferedStats,
    SyncLinUCB,
    _add_rows,
    _add_to_each_row,
    _add_to_rows,
    _norm,
    _pinv_psd,
    log_det,
)
from fedbandit_envs.algorithms import resolve_factory
from fedbandit_envs.channel import ChannelConfig, CostModel
from fedbandit_envs.families.linear.env import LinearConfig, LinearCore
from fedbandit_envs.reference import reference_mode
from fedbandit_envs.run import run, run_pettingzoo
from wrappers.faults import MessageDelays

N, T, D, K = 12, 300, 4, 6
CONFIG = LinearConfig(num_clients=N, num_arms=K, dimension=D, horizon=T)


def drive(population, config: LinearConfig = CONFIG, seed: int = 0, after=None, started=None) -> LinearCore:
    """Play one replica; ``started()`` after the reset, ``after(core, step, inbox, uploads)`` after each report."""
    core = LinearCore(config, ChannelConfig(CostModel(c1=0.0, price_per_message=1.0)), population.make_coordinator())
    core.reset([seed])
    population.reset(core.context)
    if started is not None:
        started()
    while not core.done:
        step = core.current_step()
        population.observe(core.play(population.act(step)))
        phase = core.first_phase()
        while phase is not None:
            uploads = population.send(phase)
            inbox = core.exchange(phase, uploads)
            population.receive(phase, inbox)
            if after is not None:
                after(core, step, inbox, uploads)
            phase = core.next_phase(phase, bool(uploads))
    return core


@pytest.mark.parametrize("trailing", [(), (1,), (1, 1), (3,), (3, 3)])
@pytest.mark.parametrize("index", [[0, 2, 2, 1, 2, 0, 2], [4, 1, 0, 3, 2, 6, 5], [0] * 7])
def test_add_rows_is_np_add_at_bit_for_bit(trailing, index):
    rng = np.random.default_rng(len(trailing) + index[1])
    index = np.array(index)
    target = rng.standard_normal((7, *trailing))
    values = rng.standard_normal((7, *trailing)) * 10.0 ** rng.integers(-8, 9, (7,) + (1,) * len(trailing))
    values[3] = 0.0  # a zero row is skipped
    expected = target.copy()
    np.add.at(expected, index, values)
    _add_rows(target, (index,), values)
    np.testing.assert_array_equal(target, expected)
    counts, got = np.zeros(7, np.int64), np.zeros(7, np.int64)
    np.add.at(counts, index, np.arange(7))
    _add_rows(got, (index,), np.arange(7))
    np.testing.assert_array_equal(got, counts)


@pytest.mark.parametrize("trailing", [(), (2,), (3, 3)])
@pytest.mark.parametrize("runs", [1, 2, _MAX_RUNS - 1, _MAX_RUNS, _MAX_RUNS + 3])
@pytest.mark.parametrize("shared", [False, True])
def test_add_to_rows_is_fancy_index_add_bit_for_bit(trailing, runs, shared):
    """Run by run in place (few runs of consecutive rows) or gathered (many): the same sums as ``target[at] += v``."""
    rng = np.random.default_rng(runs * 7 + len(trailing) + shared)
    target = rng.standard_normal((200, *trailing)) * 10.0 ** rng.integers(-8, 9, (200,) + (1,) * len(trailing))
    starts = np.sort(rng.choice(np.arange(0, 200, 10), runs, replace=False))
    at = np.concatenate([np.arange(start, start + rng.integers(1, 10)) for start in starts])
    row = rng.standard_normal(trailing) * 1e3
    values = np.broadcast_to(row, (len(at), *trailing)) if shared else rng.standard_normal((len(at), *trailing))
    expected = target.copy()
    expected[at] += values
    _add_to_rows(target, at, values)
    assert target.tobytes() == expected.tobytes()  # bit for bit (assert_array_equal takes -0.0 for 0.0)


def test_add_to_rows_adds_every_row_of_a_repeated_index_in_order():
    """A row received twice in one batch gets both additions, as ``np.add.at`` gives them (not the last only)."""
    rng = np.random.default_rng(5)
    for at in ([3, 3], [0, 1, 2, 1], [9, 2, 9, 9, 0], list(range(40)) + [7]):
        at = np.array(at)
        target = rng.standard_normal((12 if at.max() < 12 else 50, 2, 2))
        values = rng.standard_normal((len(at), 2, 2)) * 10.0 ** rng.integers(-8, 9, (len(at), 1, 1))
        expected = target.copy()
        np.add.at(expected, at, values)
        _add_to_rows(target, at, values)
        assert target.tobytes() == expected.tobytes()
    counts = np.zeros(4, np.int64)
    _add_to_rows(counts, np.array([2, 0, 2]), 3)
    np.testing.assert_array_equal(counts, [3, 0, 6, 0])


def test_add_to_rows_takes_unsorted_rows_and_scalars():
    target, expected = np.arange(10.0), np.arange(10.0)
    at = np.array([7, 3, 4, 0])
    expected[at] += np.array([1.5, 2.5, 3.5, 4.5])
    _add_to_rows(target, at, np.array([1.5, 2.5, 3.5, 4.5]))
    np.testing.assert_array_equal(target, expected)
    counts = np.zeros(6, np.int64)
    _add_to_rows(counts, np.array([1, 2, 3]), 2)
    _add_to_rows(counts, np.array([5]), np.array([1]))
    _add_to_rows(counts, np.array([], np.int64), np.zeros(0, np.int64))
    np.testing.assert_array_equal(counts, [0, 2, 2, 2, 0, 1])


@pytest.mark.parametrize("at", [[3, 4, 5, 9], [5, 3, 3, 0], list(range(0, 40, 2))])
def test_add_to_each_row_is_one_add_to_rows_per_target(at):
    """Several targets at the same rows: each gets what :func:`_add_to_rows` alone gives it."""
    rng = np.random.default_rng(len(at))
    at = np.array(at)
    matrices, vectors = rng.standard_normal((40, 3, 3)), rng.standard_normal((40, 3))
    rows, row = rng.standard_normal((len(at), 3, 3)), rng.standard_normal(3)  # one row broadcast to every target row
    expected_m, expected_v = matrices.copy(), vectors.copy()
    _add_to_rows(expected_m, at, rows)
    _add_to_rows(expected_v, at, row)
    _add_to_each_row(at, [(matrices, rows), (vectors, row)])
    np.testing.assert_array_equal(matrices, expected_m)
    np.testing.assert_array_equal(vectors, expected_v)


@pytest.mark.parametrize(("gamma", "registration"), [(1.0, "lazy"), (1.0, "eager"), (1.5, "lazy"), (4.0, "eager")])
def test_shared_server_bases_equal_the_per_client_bases(gamma, registration):
    """The server's snapshots give exactly the bases a per-client copy of every download would hold."""
    population = AsyncLinUCB(gamma=gamma, registration=registration)
    base = np.zeros((N, D, D))
    base_b = np.zeros((N, D))
    aggregate = np.zeros((D, D))
    shared = []

    def after(core, step, inbox, uploads):
        server = population.server
        for batch in uploads:  # upload: the sender's base and the aggregate grow by the payload
            for i, dv, db in zip(batch.sender, batch.payload["dV"], batch.payload["db"]):
                aggregate[:] += dv
                base[i] += dv
                base_b[i] += db
        for batch in inbox:  # download: the recipient's base becomes the aggregate
            np.testing.assert_array_equal(batch.payload["dV"], aggregate - base[batch.recipient])
            base[batch.recipient] = aggregate
            base_b[batch.recipient] = server.b[0]
        np.testing.assert_array_equal(server.v[0], aggregate)
        np.testing.assert_array_equal(server.base_v[0], base)
        np.testing.assert_array_equal(server.base_b[0], base_b)
        np.testing.assert_array_equal(server.base_ld[0], log_det(base, population.config.lam))
        shared.append(len(server._snapshots))

    drive(population, after=after)
    assert max(shared) <= 2 * N + 10  # snapshots are released when no base refers to them any more


def test_gamma_one_download_rows_share_one_snapshot():
    """At gamma = 1 every download of a step is the same increment: one snapshot serves every client."""
    population = AsyncLinUCB(gamma=1.0, registration="eager")
    seen = []

    def after(core, step, inbox, uploads):
        snapshots = population.server._snapshot[0]
        seen.append(len(np.unique(snapshots)))
        for batch in inbox:
            assert (batch.payload["dV"] == batch.payload["dV"][0]).all()

    drive(population, after=after)
    assert max(seen[1:]) == 1  # after the first step: every base is the one snapshot of the aggregate


def recording_factorisations(population, recomputed: list) -> None:
    """Record every (replica, client) pair whose inverse and log-determinant are recomputed."""
    stats = population.stats
    recompute = stats._recompute

    def wrapper(rows, clients):
        recomputed.extend(zip(rows.tolist(), clients.tolist()))
        recompute(rows, clients)

    stats._recompute = wrapper


@pytest.mark.parametrize(
    "population",
    [SyncLinUCB(threshold=0.0), SyncLinUCB(threshold=0.5), AsyncLinUCB(gamma=1.0)],
    ids=["sync_every_slot", "sync_0.5", "async_gamma_1"],
)
def test_only_the_acting_client_is_factorised(population):
    """A synchronisation or a download to every client factorises nothing until a client acts."""
    recomputed, active = [], []

    def after(core, step, inbox, uploads):
        assert set(recomputed) <= {(0, int(step.clients[0, 0]))}
        active.append(len(recomputed))
        recomputed.clear()

    core = drive(population, after=after, started=lambda: recording_factorisations(population, recomputed))
    assert sum(active) > 0 and max(active) == 1
    assert core.channel.ledger.totals()["messages"] > T


@pytest.mark.parametrize("threshold", [0.0, 0.3, 5.0])
def test_deferred_replacements_equal_eager_ones(threshold):
    """The reference mode (every replacement copied and factorised on arrival) changes no decision or bit."""
    lazy = SyncLinUCB(threshold=threshold)
    eager = SyncLinUCB(threshold=threshold)
    synced = []

    def check_copies(core, step, inbox, uploads):
        assert not eager.stats._sources and not eager.stats.stale.any()  # nothing deferred, nothing stale
        for batch in inbox:  # every recipient of a synchronisation holds the aggregate, bit for bit
            v = eager.stats._v[0, batch.recipient]
            np.testing.assert_array_equal(v, np.broadcast_to(eager.server.v[0], (len(batch), D, D)))
            synced.append(len(batch))

    lazy_core = drive(lazy)
    with reference_mode():
        eager_core = drive(eager, after=check_copies)
    assert synced
    np.testing.assert_array_equal(lazy_core.regret, eager_core.regret)
    assert lazy_core.channel.ledger.totals() == eager_core.channel.ledger.totals()
    pairs = np.zeros(N, np.int64), np.arange(N)
    for stats in (lazy.stats, eager.stats):  # the lazy side's pending factorisations done: then every bit agrees
        stats.refresh(*pairs)
        stats.log_ratio(*pairs)
    for name in ("v", "b", "count", "inv", "ld", "dv", "ld_w"):
        np.testing.assert_array_equal(getattr(lazy.stats, name), getattr(eager.stats, name))


def test_upload_of_a_stale_client_defers_its_base_log_determinant():
    """After an upload W = V; with a stale V the copy ld_w = ld waits for the refresh, with the same value."""
    rng = np.random.default_rng(3)
    stats = BufferedStats(1, 2, D, 0.1)
    rows, clients = np.zeros(2, np.int64), np.arange(2)
    for _ in range(3):
        stats.add_point(rows, clients, rng.standard_normal((2, D)), rng.standard_normal(2))
    gram = rng.standard_normal((2, D, D))
    stats.add_stats(rows, clients, gram @ gram.transpose(0, 2, 1), np.ones((2, D)))
    dv, _, dcount = stats.take(rows, clients)
    assert dcount.tolist() == [3, 3] and stats.stale.all() and stats.w_pending.all()
    stats.refresh(rows[:1], clients[:1])
    assert stats.ld_w[0, 0] == stats.ld[0, 0] == log_det(stats.v[0, 0], 0.1)
    assert stats.w_pending[0, 1] and not stats.w_pending[0, 0]
    np.testing.assert_array_equal(stats.log_ratio(rows, clients), 0.0)
    assert not stats.w_pending.any() and not stats.dv.any()


@pytest.mark.parametrize("dim", [1, 2, 12, 13, 25])
def test_pinv_full_rank_shortcut_and_norm_equal_the_plain_formulas(dim):
    """``_pinv_psd`` without the masks at full rank, and ``_norm``, give the plain formulas' bits (any rank)."""
    rng = np.random.default_rng(dim)
    full = 0
    for _ in range(60):
        points = rng.standard_normal((int(rng.integers(1, 2 * dim + 2)), dim)) * rng.lognormal(size=dim)
        points *= rng.random() > 0.1  # sometimes no data: rank 0
        matrix = points.T @ points
        values, vectors = np.linalg.eigh(matrix)
        keep = values > RANK_TOL * max(1.0, values[-1])
        full += bool(keep.all())
        expected = (vectors[:, keep] / values[keep]) @ vectors[:, keep].T
        np.testing.assert_array_equal(_pinv_psd(matrix), expected)
        vector = points[0] * 1e3
        assert _norm(vector) == float(np.linalg.norm(vector))
    assert 0 < full < 60  # both ranks were drawn


@pytest.mark.parametrize("algorithm", ["async_linucb", "async_linucb_am"])
def test_delayed_downloads_agree_on_both_paths(algorithm):
    """With latency jitter a client can receive two downloads in one step; the PettingZoo path hands them over in
    one batch naming the client twice, and both must be added (the gathered add kept only the last, so this path
    ended at another regret than the batched one: 5.212 against 4.875 for async_linucb)."""
    factory = resolve_factory(algorithm)
    env = {"num_arms": 5, "dimension": 4, "num_clients": 8, "horizon": 300, "latency_jitter": 3}
    batched = run(lambda: factory(gamma=1.0), env, [0, 1], checkpoints=3)
    pettingzoo = run_pettingzoo(lambda: factory(gamma=1.0), env, [0, 1], checkpoints=3)

    def by_run(rows):
        return sorted(rows, key=lambda row: (row["seed"], row["slot"]))

    for got, expected in zip(by_run(pettingzoo.curves), by_run(batched.curves), strict=True):
        assert (got["seed"], got["slot"], got["messages"]) == (expected["seed"], expected["slot"], expected["messages"])
        assert got["group_regret"] == expected["group_regret"]


def test_sync_linucb_under_latency_jitter_names_the_cause():
    """A delayed replacement leaves ``V - dV`` indefinite; the error says that, not only "perturbed payloads"."""
    env = {"num_arms": 4, "dimension": 3, "num_clients": 6, "horizon": 200, "latency_jitter": 2}
    with pytest.raises(ValueError, match="Sync-LinUCB assumes instant synchronisation: run it on a channel without"):
        run(resolve_factory("sync_linucb"), env, [0], checkpoints=1)


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "pettingzoo"])
def test_sync_linucb_under_message_delays_names_the_wrapper(batched):
    """MessageDelays delays a synchronisation as the channel's latency does; the error names both."""
    env = {"num_clients": 6, "horizon": 60}
    delays = [lambda e: MessageDelays(e, 1)]
    with pytest.raises(
        ValueError, match=r"instant synchronisation: .*without latency or latency_jitter.*MessageDelays"
    ):
        run(resolve_factory("sync_linucb"), env, [1], checkpoints=1, batched=batched, wrappers=delays)


def play_stats(stats: BufferedStats, seed: int, steps: int = 300) -> None:
    """A random workload of shared and per-row downloads, own observations, uploads and replacements."""
    rng = np.random.default_rng(seed)
    replicas, clients = stats.stale.shape
    for _ in range(steps):
        r, op = int(rng.integers(replicas)), int(rng.integers(6))
        if op <= 1:  # one download row to several clients of a replica (a broadcast), or one row per client
            to = np.sort(rng.choice(clients, size=int(rng.integers(2, clients + 1)), replace=False))
            gram = rng.standard_normal((len(to) if op else 1, D, D))
            v, b = gram @ gram.transpose(0, 2, 1), rng.standard_normal((len(gram), D))
            count = rng.integers(0, 3, len(gram))
            shape = (len(to),)
            rows = np.full(len(to), r)
            stats.add_stats(rows, to, *(np.broadcast_to(f, shape + f.shape[1:]) for f in (v, b, count)))
        elif op <= 3:  # an own observation, then the upload check
            pair = np.array([r]), rng.integers(clients, size=1)
            stats.add_point(*pair, rng.standard_normal((1, D)), rng.standard_normal(1))
            stats.log_ratio(*pair)
        elif op == 4:  # an upload
            stats.take(np.array([r]), rng.integers(clients, size=1))
        else:  # a synchronisation of some clients: upload, then a replacement of their statistics
            to = np.sort(rng.choice(clients, size=2, replace=False))
            stats.take(np.full(2, r), to)
            gram = rng.standard_normal((2, D, D))
            stats.set_stats(np.full(2, r), to, gram @ gram.transpose(0, 2, 1), rng.standard_normal((2, D)), 5)


@pytest.mark.parametrize("seed", range(6))
def test_shared_downloads_equal_row_by_row_adds_within_the_stated_tolerance(seed):
    """A download shared by many clients goes to a running sum: within SHARED_RTOL of row-by-row adds (reference mode).

    The counts are exact; V, b and the log-determinants differ only by rounding (relative to the largest sum).
    """
    fast, plain = BufferedStats(2, 7, D, 0.1), BufferedStats(2, 7, D, 0.1)
    play_stats(fast, seed)
    assert fast._num_joined > 0  # the shared sums were in use
    with reference_mode():
        play_stats(plain, seed)
    scale = np.abs(plain.v).max()
    np.testing.assert_array_equal(fast.count, plain.count)
    np.testing.assert_allclose(fast.v, plain.v, rtol=0, atol=SHARED_RTOL * scale)
    np.testing.assert_allclose(fast.b, plain.b, rtol=0, atol=SHARED_RTOL * np.abs(plain.b).max())
    pairs = np.repeat(np.arange(2), 7), np.tile(np.arange(7), 2)
    fast.refresh(*pairs)
    np.testing.assert_allclose(fast.ld, plain.ld, rtol=0, atol=SHARED_RTOL * scale)


@pytest.mark.parametrize(("gamma", "registration", "seed"), [(1.0, "eager", 0), (1.0, "lazy", 1), (1.5, "lazy", 2)])
def test_shared_downloads_keep_every_decision_of_row_by_row_adds(gamma, registration, seed):
    """Async-LinUCB with shared downloads makes the reference mode's decisions: same regret, same ledger, close sums."""
    fast = AsyncLinUCB(gamma=gamma, registration=registration, alpha_mode="theory_upper")  # counts travel too
    plain = AsyncLinUCB(gamma=gamma, registration=registration, alpha_mode="theory_upper")
    joined = []
    fast_core = drive(fast, seed=seed, after=lambda *_: joined.append(fast.stats._num_joined))
    with reference_mode():
        plain_core = drive(plain, seed=seed)
    assert max(joined) > 1
    np.testing.assert_array_equal(fast_core.regret, plain_core.regret)
    assert fast_core.channel.ledger.totals() == plain_core.channel.ledger.totals()
    np.testing.assert_array_equal(fast.stats.count, plain.stats.count)
    scale = np.abs(plain.stats.v).max()
    np.testing.assert_allclose(fast.stats.v, plain.stats.v, rtol=0, atol=SHARED_RTOL * scale)


def test_replicas_of_a_batch_share_downloads_as_single_runs_do():
    """One download batch per replica: replica b of a batched run holds the bits of the single run of seed b."""
    seeds = [3, 4, 5]
    batched = AsyncLinUCB(gamma=1.0)
    core = LinearCore(CONFIG, ChannelConfig(CostModel(c1=0.0, price_per_message=1.0)), batched.make_coordinator())
    core.reset(seeds)
    batched.reset(core.context)
    while not core.done:
        batched.observe(core.play(batched.act(core.current_step())))
        phase = core.first_phase()
        while phase is not None:
            uploads = batched.send(phase)
            batched.receive(phase, core.exchange(phase, uploads))
            phase = core.next_phase(phase, bool(uploads))
    for b, seed in enumerate(seeds):
        single = AsyncLinUCB(gamma=1.0)
        drive(single, seed=seed)
        for name in ("v", "b", "count", "dv"):
            np.testing.assert_array_equal(getattr(batched.stats, name)[b], getattr(single.stats, name)[0])
