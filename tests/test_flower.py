"""The Flower adapter: a federation on Flower's simulation engine gives the simulator's run, slot for slot."""

from __future__ import annotations

import os
from functools import partial

import numpy as np
import pytest

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # before flwr is first imported
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
pytest.importorskip("flwr")

from flwr.app import Context, RecordDict  # noqa: E402

from agents.li_song import CDPMAB, hybrid_topology  # noqa: E402
from agents.li_wang import SyncLinUCB  # noqa: E402
from agents.solanki import PFCB, EpsilonSchedule  # noqa: E402
from agents.zhu import FedUCB, GossipUCB  # noqa: E402
from fedbandit_envs.algorithms import make_algorithm  # noqa: E402
from fedbandit_envs.cli import main  # noqa: E402
from fedbandit_envs.families.procurement.env import ProcurementFeedback  # noqa: E402
from fedbandit_envs.flower import AgentShard, FederationSpec, run_flower, run_local  # noqa: E402
from fedbandit_envs.flower.apps import _load, _store  # noqa: E402
from fedbandit_envs.run import run  # noqa: E402
from wrappers import GaussianMessageDP, LaplaceMessageDP, MessageDrops  # noqa: E402


class Recording:
    """A population that records the arms and rewards of every slot (for the slot-for-slot comparison)."""

    def __init__(self, algorithm) -> None:
        self.inner = make_algorithm(algorithm)
        self.arms: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def observe(self, feedback) -> None:
        arms = feedback.units if isinstance(feedback, ProcurementFeedback) else feedback.arms
        self.arms.append(arms[0].copy())
        self.rewards.append(feedback.rewards[0].copy())
        self.inner.observe(feedback)


def simulate(algorithm, env_kwargs: dict, seed: int, wrappers=()):
    """The simulator's PettingZoo path: results at every slot, and the arms and rewards of every slot."""
    made: list[Recording] = []

    def factory() -> Recording:
        made.append(Recording(algorithm))
        return made[-1]

    horizon = env_kwargs["horizon"]
    results = run(
        factory,
        env_kwargs,
        [seed],
        checkpoints=list(range(1, horizon + 1)),
        batched=False,
        label="algorithm",
        wrappers=wrappers,
        reference=None,
    )
    return results, np.array(made[-1].arms), np.array(made[-1].rewards)


def without_wall_time(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "wall_time"} for row in rows]


def assert_same_run(algorithm, env_kwargs: dict, seed: int, wrappers=(), engine=run_local):
    horizon = env_kwargs["horizon"]
    expected, arms, rewards = simulate(algorithm, env_kwargs, seed, wrappers)
    flower = engine(
        FederationSpec(algorithm, env_kwargs, seed, wrappers, label="algorithm"),
        checkpoints=list(range(1, horizon + 1)),
    )
    if isinstance(flower, tuple):
        flower = flower[0]
    np.testing.assert_array_equal(flower.arms, arms)
    np.testing.assert_array_equal(flower.referee_rewards, rewards)
    if env_kwargs.get("env", "mab") == "mab":  # MAB clients draw their own rewards
        np.testing.assert_array_equal(flower.rewards, rewards)
    assert without_wall_time(flower.results.curves) == without_wall_time(expected.curves)
    assert without_wall_time(flower.results.agents) == without_wall_time(expected.agents)
    return flower, expected


def test_full_sharing_ucb_on_the_simulation_engine_matches_the_simulator():
    assert_same_run("full_sharing_ucb", {"num_agents": 3, "num_arms": 4, "horizon": 8}, seed=3, engine=run_flower)


def test_full_sharing_ucb_matches_the_simulator():
    flower, _ = assert_same_run("full_sharing_ucb", {"num_agents": 4, "num_arms": 5, "horizon": 60}, seed=1)
    assert flower.ledger["messages"] > 0


CDP = {"num_agents": 6, "num_arms": 4, "horizon": 400, "instance_seed": 2}


def test_cdp_mab_matches_the_simulator():
    flower, expected = assert_same_run("cdp_mab", {**CDP, "horizon": 300}, seed=4)
    assert expected.curves[-1]["up_messages"] > 0  # a round was aggregated and broadcast


def test_cdp_mab_capped_with_partial_participation_matches_the_simulator():
    algorithm = partial(CDPMAB, rounds=2, delta_schedule_base=0.5, participation=0.5)
    _, expected = assert_same_run(algorithm, CDP, seed=4)
    last = expected.curves[-1]
    assert last["up_messages"] > 3 and last["down_messages"] > 6  # several rounds of three participants


def test_cdp_mab_under_a_dp_wrapper_spends_the_simulators_privacy():
    algorithm = partial(CDPMAB, rounds=3, delta_schedule_base=0.7, participation=0.5)
    wrappers = [lambda env: LaplaceMessageDP(env, epsilon=1.0, calibration="paper", n_agg=3)]
    env = {**CDP, "horizon": 200}
    flower, expected = assert_same_run(algorithm, env, seed=5, wrappers=wrappers)
    spent = [row["epsilon_spent"] for row in expected.agents if row["slot"] == env["horizon"]]
    np.testing.assert_array_equal(flower.epsilon_spent, spent)
    assert max(spent) == 6.0  # two noised epoch means at N epsilon = 3 each


@pytest.mark.parametrize(
    ("algorithm", "env"),
    [
        ("independent_ucb1", {"num_agents": 4, "num_arms": 4, "horizon": 40}),
        ("random", {"num_agents": 4, "num_arms": 4, "horizon": 20}),
        ("dubey_ucb1", {"num_agents": 5, "num_arms": 4, "horizon": 40, "topology": "ring"}),
    ],
)
def test_agents_without_a_server_match_the_simulator(algorithm, env):
    assert_same_run(algorithm, env, seed=1)


def test_full_sharing_ucb_with_drops_matches_the_simulator():
    env = {"num_agents": 4, "num_arms": 5, "horizon": 80, "drop_prob": 0.3}
    flower, expected = assert_same_run("full_sharing_ucb", env, seed=2)
    assert flower.ledger["dropped"] == expected.curves[-1]["dropped"] > 0


LINEAR = {"env": "linear", "num_clients": 5, "num_arms": 4, "dimension": 3, "horizon": 120}


def test_async_linucb_matches_the_simulator():
    _, expected = assert_same_run("async_linucb", LINEAR, seed=6)
    assert expected.curves[-1]["up_messages"] > 0 and expected.curves[-1]["down_messages"] > 0


def sync_rounds(env: dict, expected) -> int:
    """The Flower rounds of a Sync-LinUCB run with eager registration: set-up, an act round and a round per
    report of every slot, the closing round, and one more round per synchronisation (every client uploads)."""
    syncs, remainder = divmod(expected.curves[-1]["up_messages"], env["num_clients"])
    assert remainder == 0 and syncs > 0
    return 2 + env["horizon"] * (1 + env.get("active_per_slot", 1)) + syncs


def test_sync_linucb_matches_the_simulator():
    _, expected = assert_same_run("sync_linucb", LINEAR, seed=6)
    assert expected.curves[-1]["up_messages"] == expected.curves[-1]["down_messages"] > 0


def test_sync_linucb_synchronises_in_one_uncharged_round_more_on_the_simulation_engine():
    env = {**LINEAR, "horizon": 3}
    algorithm = partial(SyncLinUCB, threshold=0.0, registration="eager")  # every report synchronises
    flower, expected = assert_same_run(algorithm, env, seed=6, engine=run_flower)
    assert flower.rounds == sync_rounds(env, expected) == 2 + 3 * 2 + 3


def test_sync_linucb_with_several_active_clients_and_drops_matches_the_simulator():
    env = {**LINEAR, "active_per_slot": 2, "drop_prob": 0.2, "horizon": 60}
    algorithm = partial(SyncLinUCB, threshold=0.5, registration="eager")
    expected, arms, _ = simulate(algorithm, env, seed=6)
    flower, _ = run_local(
        FederationSpec(algorithm, env, 6, label="algorithm"), checkpoints=list(range(1, env["horizon"] + 1))
    )
    # the PettingZoo path lists a slot's active clients by name, the core in arrival order: same arms per slot
    np.testing.assert_array_equal(np.sort(flower.arms, axis=1), np.sort(arms, axis=1))
    assert without_wall_time(flower.results.curves) == without_wall_time(expected.curves)
    assert without_wall_time(flower.results.agents) == without_wall_time(expected.agents)
    assert expected.curves[-1]["dropped"] > 0
    assert flower.rounds == sync_rounds(env, expected)


def test_ddp_mab_is_refused_with_the_reason():
    env = {"num_agents": 4, "num_arms": 3, "horizon": 10, "topology": "ring"}
    with pytest.raises(ValueError, match="DDPMAB cannot run as a Flower federation: its GIS hop is decided"):
        run_local(FederationSpec("ddp_mab", env, seed=0))


GOSSIP = {"num_agents": 5, "num_arms": 3, "horizon": 80, "topology": "ring", "gossip": "uniform_edge"}


@pytest.mark.parametrize(
    ("algorithm", "env"),
    [
        ("gossip_ucb", GOSSIP),
        (partial(GossipUCB, count_sync="gossip_edge_only"), {**GOSSIP, "gossip": "node_then_neighbour"}),
        (partial(FedUCB, epsilon=1.0, clip_for_dp=(-3.0, 3.0)), GOSSIP),
        ("gossip_ucb", {**GOSSIP, "drop_prob": 0.3, "latency": 1, "latency_jitter": 1}),
    ],
    ids=["gossip_ucb", "edge_only_node_then_neighbour", "fed_ucb", "gossip_ucb_drops_latency"],
)
def test_gossip_peers_relayed_by_the_server_match_the_simulator(algorithm, env):
    _, expected = assert_same_run(algorithm, env, seed=3)
    assert expected.curves[-1]["peer_messages"] > 0


def test_fed_ucb_under_a_dp_wrapper_spends_the_simulators_privacy():
    wrappers = [lambda env: LaplaceMessageDP(env, epsilon=0.5)]
    flower, expected = assert_same_run(partial(FedUCB, epsilon=2.0), GOSSIP, seed=8, wrappers=wrappers)
    spent = [row["epsilon_spent"] for row in expected.agents if row["slot"] == GOSSIP["horizon"]]
    np.testing.assert_array_equal(flower.epsilon_spent, spent)
    assert spent == [2.0] * GOSSIP["num_agents"]  # the declared epsilon, charged once per agent, no noise added


def test_a_fault_wrapper_is_refused_with_the_reason():
    spec = FederationSpec("full_sharing_ucb", {"num_agents": 3, "horizon": 5}, 0, [lambda e: MessageDrops(e, prob=0.3)])
    with pytest.raises(ValueError, match="a message drops wrapper cannot run on a Flower federation: its hook draws"):
        run_local(spec)


def test_client_state_keeps_the_populations_views_across_rounds():
    shard = AgentShard(FederationSpec("gossip_ucb", GOSSIP, seed=0), agent=1)
    context = Context(run_id=0, node_id=1, node_config={}, state=RecordDict(), run_config={})
    _store(context, "agent", shard)
    population = _load(context, "agent").population
    population._theta_items[1] = np.arange(3.0).view(population._row_item)[0]  # one whole row, as observe writes
    np.testing.assert_array_equal(population.theta[0, 1], np.arange(3.0))
    assert np.shares_memory(population._received_items, population._received)


def test_client_state_rebuilds_any_view_on_its_arrays_memory():
    base = np.arange(12.0).reshape(3, 4)
    reversed_column, rows = base[::-1, 1], base.view(np.dtype((np.void, 32))).reshape(-1)
    frozen = base[1]
    frozen.flags.writeable = False
    context = Context(run_id=0, node_id=1, node_config={}, state=RecordDict(), run_config={})
    _store(context, "agent", {"base": base, "reversed": reversed_column, "rows": rows, "frozen": frozen})
    state = _load(context, "agent")
    state["base"][2, 1] = -1.0
    assert state["reversed"].tolist() == [-1.0, 5.0, 1.0]
    state["rows"][0] = state["rows"][2]
    assert state["base"][0].tolist() == [8.0, -1.0, 10.0, 11.0]
    assert state["frozen"].tolist() == [4.0, 5.0, 6.0, 7.0] and not state["frozen"].flags.writeable


def test_hdp_mab_agent_links_are_relayed_by_the_server_and_charged_as_agent_links():
    env = {
        "num_agents": 6,
        "num_arms": 4,
        "horizon": 260,
        "instance_seed": 2,
        "topology": hybrid_topology(6, [1, 2, 3], "path"),
    }
    _, expected = assert_same_run("hdp_mab", env, seed=1)
    assert expected.curves[-1]["peer_messages"] > 0 and expected.curves[-1]["up_messages"] > 0


def test_dubey_flooding_over_a_ring_matches_the_simulator():
    _, expected = assert_same_run(
        "dubey_cooperative_ucb", {"num_agents": 5, "num_arms": 4, "horizon": 60, "topology": "ring"}, seed=1
    )
    assert expected.curves[-1]["peer_messages"] > 0


@pytest.mark.parametrize("algorithm", ["one_linucb", "n_linucb"])
def test_the_li_wang_baselines_match_the_simulator(algorithm):
    assert_same_run(algorithm, {**LINEAR, "horizon": 60}, seed=6)


def test_async_linucb_am_matches_the_simulator():
    env = {**LINEAR, "mode": "heterogeneous", "global_dimension": 2, "local_dimensions": 1}
    _, expected = assert_same_run("async_linucb_am", env, seed=6)
    assert expected.curves[-1]["up_messages"] > 0


def test_cli_runs_a_federation_and_writes_the_tables(tmp_path, capsys):
    args = ["flower", "full_sharing_ucb", "--set", "num_agents=3", "--set", "horizon=20", "--seed", "3"]
    code = main([*args, "--engine", "local", "--checkpoints", "4", "--out", str(tmp_path)])
    assert code == 0
    expected = run("full_sharing_ucb", {"num_agents": 3, "horizon": 20}, [3], checkpoints=4, reference=None)
    assert f"group regret {expected.curves[-1]['group_regret']:.1f}" in capsys.readouterr().out
    header, *rows = (tmp_path / "results.csv").read_text().splitlines()
    assert header.startswith("algorithm,seed,slot,group_regret") and len(rows) == 4
    assert (tmp_path / "tables.json").exists()  # written as a sweep writes its tables: a report can verify them


def test_cli_names_the_reason_a_federation_cannot_run(capsys):
    assert main(["flower", "ddp_mab", "--set", "num_agents=3", "--set", "horizon=5", "--engine", "local"]) == 2
    assert "DDPMAB cannot run as a Flower federation" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"seed": -1}, ValueError, "seed"),
        ({"env_kwargs": [("num_agents", 3)]}, TypeError, "env_kwargs must be a dict"),
        ({"wrappers": ["dp"]}, TypeError, "wrappers must be functions env -> wrapped env"),
    ],
)
def test_a_bad_federation_spec_names_the_argument(kwargs, error, match):
    arguments = {"algorithm": "full_sharing_ucb", "env_kwargs": {"num_agents": 3}, "seed": 0, **kwargs}
    with pytest.raises(error, match=match):
        FederationSpec(**arguments)


def test_a_client_index_beyond_the_agents_is_refused():
    with pytest.raises(ValueError, match="partition-id\\) must be below the number of agents 3, got 3"):
        AgentShard(FederationSpec("full_sharing_ucb", {"num_agents": 3, "horizon": 5}, seed=0), agent=3)


PROCUREMENT = {"env": "procurement", "num_agents": 4, "num_producers": 5, "horizon": 40, "instance_seed": 5}


@pytest.mark.parametrize(
    ("algorithm", "cost"),
    [
        ("solanki_nf", 0.0),
        ("solanki_fcb_sync", 6.0 * PROCUREMENT["horizon"]),
        (partial(PFCB, noise=False, t_lo=4), None),
    ],
    ids=["non_federated", "fcb_sync", "fcb"],
)
def test_procurement_peers_relayed_by_the_server_match_the_simulator(algorithm, cost):
    _, expected = assert_same_run(algorithm, PROCUREMENT, seed=2)
    last = expected.curves[-1]
    assert (last["peer_messages"] > 0) == (algorithm != "solanki_nf")
    if cost is not None:  # FCB-sync broadcasts every round: c2 = 1 for each of the 6 agent links used
        assert last["cost"] == cost


@pytest.mark.slow
def test_fcb_sync_on_the_simulation_engine_matches_the_simulator():
    _, expected = assert_same_run("solanki_fcb_sync", {**PROCUREMENT, "horizon": 4}, seed=2, engine=run_flower)
    assert expected.curves[-1]["peer_messages"] > 0


def test_pfcb_with_its_own_noise_reports_the_simulators_privacy():
    env = {**PROCUREMENT, "drop_prob": 0.2}
    flower, expected = assert_same_run(partial(PFCB, t_lo=4), env, seed=3)
    spent = [row["epsilon_spent"] for row in expected.agents if row["slot"] == env["horizon"]]
    np.testing.assert_array_equal(flower.epsilon_spent, spent)
    assert min(spent) > 0 and expected.curves[-1]["dropped"] > 0 and expected.curves[-1]["peer_messages"] > 0


def test_pfcb_under_a_gaussian_wrapper_spends_the_simulators_privacy():
    wrappers = [lambda e: GaussianMessageDP(e, epsilon=EpsilonSchedule(1.0, PROCUREMENT["horizon"]), delta=0.01)]
    flower, expected = assert_same_run(partial(PFCB, noise="wrapper", t_lo=4), PROCUREMENT, seed=4, wrappers=wrappers)
    spent = [row["epsilon_spent"] for row in expected.agents if row["slot"] == PROCUREMENT["horizon"]]
    np.testing.assert_array_equal(flower.epsilon_spent, spent)
    assert min(spent) > 0


#: One small run of every algorithm the adapter supports, on Flower's simulation engine (the tests above run
#: the same apps over the in-process grid). About a second per Flower round on a loaded 2-core machine, so
#: these are in the slow tier; horizons are the shortest at which each algorithm sends messages.
ENGINE_CASES = {
    "cdp_mab_laplace": (
        partial(CDPMAB, rounds=3, delta_schedule_base=0.7, participation=0.5),
        {**CDP, "horizon": 200},
        [lambda env: LaplaceMessageDP(env, epsilon=1.0, calibration="paper", n_agg=3)],
    ),
    "async_linucb": ("async_linucb", {**LINEAR, "horizon": 20}, ()),
    "async_linucb_am": (
        "async_linucb_am",
        {**LINEAR, "mode": "heterogeneous", "global_dimension": 2, "local_dimensions": 1, "horizon": 60},
        (),
    ),
    "one_linucb": ("one_linucb", {**LINEAR, "horizon": 10}, ()),
    "n_linucb": ("n_linucb", {**LINEAR, "horizon": 10}, ()),
    "hdp_mab": (
        "hdp_mab",
        {
            "num_agents": 6,
            "num_arms": 4,
            "horizon": 260,
            "instance_seed": 2,
            "topology": hybrid_topology(6, [1, 2, 3], "path"),
        },
        (),
    ),
    "dubey_cooperative_ucb": (
        "dubey_cooperative_ucb",
        {"num_agents": 4, "num_arms": 3, "horizon": 8, "topology": "ring"},
        (),
    ),
    "dubey_ucb1": ("dubey_ucb1", {"num_agents": 4, "num_arms": 3, "horizon": 8, "topology": "ring"}, ()),
    "independent_ucb1": ("independent_ucb1", {"num_agents": 3, "num_arms": 3, "horizon": 6}, ()),
    "random": ("random", {"num_agents": 3, "num_arms": 3, "horizon": 4}, ()),
    "gossip_ucb_drops": ("gossip_ucb", {**GOSSIP, "num_agents": 4, "horizon": 10, "drop_prob": 0.3}, ()),
    "fed_ucb_laplace": (
        partial(FedUCB, epsilon=2.0),
        {**GOSSIP, "num_agents": 4, "horizon": 10},
        [lambda env: LaplaceMessageDP(env, epsilon=0.5)],
    ),
    "solanki_nf": ("solanki_nf", {**PROCUREMENT, "horizon": 6}, ()),
    "fcb": (partial(PFCB, noise=False, t_lo=4), {**PROCUREMENT, "horizon": 10}, ()),
    "pfcb": (partial(PFCB, t_lo=4), {**PROCUREMENT, "horizon": 10}, ()),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(ENGINE_CASES))
def test_every_supported_algorithm_on_the_simulation_engine_matches_the_simulator(case):
    algorithm, env, wrappers = ENGINE_CASES[case]
    flower, expected = assert_same_run(algorithm, env, seed=3, wrappers=wrappers, engine=run_flower)
    if wrappers or case == "pfcb":  # privatized on the clients (P-FCB with its own noise)
        spent = [row["epsilon_spent"] for row in expected.agents if row["slot"] == env["horizon"]]
        np.testing.assert_array_equal(flower.epsilon_spent, spent)
        assert max(spent) > 0
