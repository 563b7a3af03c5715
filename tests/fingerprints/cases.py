"""The fingerprinted cases: every reference algorithm on every family it runs on, with and without wrappers.

REGENERATING THE FIXTURE REWRITES THE CONTRACT THAT REFACTORS KEEP RESULTS.
Regenerate ``tests/fingerprints/fingerprints.json`` only when an issue explicitly changes results
(an algorithm's arms, regret, ledger or privacy spent), never to make a failing refactor pass, and say
in the commit message which issue changed which cases and why::

    python -m tests.fingerprints.cases --write      # from the repository root

Without ``--write`` the command recomputes every case and prints the differences from the fixture
(``--case NAME`` restricts either mode to some cases; with ``--write`` the others are kept as stored).

Coverage (3 seeds each, small scales): the registered MAB algorithms on homogeneous,
heterogeneous and gossip MABs over server, complete, ring, Erdos-Renyi and hybrid topologies, both
link-accounting modes, prices, latency and channel drops; the Solanki names on procurement (uniform,
normal, stress instances); every registered linear algorithm on the linear family
(uniform and Zipf arrivals, heterogeneous, the replay stand-in); the DP wrappers (Laplace strict and
paper calibration, with a budget, Gaussian, tree) and the fault wrappers (byzantine source and relay,
drops, delays); the algorithms that privatise themselves (Fed_UCB, P-FCB, Dubey's private UCB and
DP-UCB-INT, Li-Song's agent noise) at their own settings.

Not covered: the Solanki names on the MAB family (they are procurement populations: the MAB runner
cannot host them), the linear names outside the linear family, ``replay_log`` (it reads real data
files), the Gymnasium single-agent views and the ``fedbandit`` command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .record import FIXTURE, Call, Case, differences, dump_fixture, fingerprint, load_fixture

# ---------------------------------------------------------------------------------------------------- environments
MAB = {"num_agents": 4, "num_arms": 5, "horizon": 200, "instance_seed": 1}
HETEROGENEOUS = {**MAB, "instance": "heterogeneous"}
GOSSIP = {  # Zhu et al.: one uniformly random edge of a ring per slot, Gaussian heterogeneous rewards
    "num_agents": 4,
    "num_arms": 3,
    "horizon": 200,
    "topology": "ring",
    "gossip": "uniform_edge",
    "reward_model": "gaussian",
    "instance": "heterogeneous",
    "instance_seed": 1,
}
RING = {"num_agents": 6, "num_arms": 3, "horizon": 150, "topology": "ring", "instance_seed": 1}
GRAPH = {**RING, "num_agents": 8, "topology": "erdos_renyi", "topology_params": {"p": 0.4}}  # a graph per seed
LI_SONG = {  # close arms: two or three elimination rounds in 3000 slots
    "num_agents": 6,
    "num_arms": 4,
    "horizon": 3000,
    "instance": [0.7, 0.6, 0.55, 0.3],
    "instance_seed": 4,
    "reward_tape": True,
}
LINEAR = {"num_clients": 6, "num_arms": 5, "dimension": 4, "horizon": 120}
LINEAR_HETEROGENEOUS = {
    **LINEAR,
    "mode": "heterogeneous",
    "global_dimension": 2,
    "local_dimensions": [2, 1, 2, 0, 2, 1],
}
REPLAY = {"env": "replay", "profile": "lastfm", "num_users": 20, "events_scale": 0.4, "catalogue_size": 200}
PROCUREMENT = {"num_agents": 3, "num_producers": 4, "horizon": 140, "instance_seed": 5}


def hybrid(num_agents: int, sizes: tuple[int, ...], graph: str) -> Call:
    """Li and Song's hybrid topology (components linked to the server through their sinks)."""
    return Call("agents.li_song:hybrid_topology", (num_agents, sizes, graph))


def paper_laplace(n_agg: int) -> tuple[str, dict]:
    """Li and Song's Laplace wrapper: noise for ``n_agg * epsilon``, charged as such."""
    return ("laplace", {"epsilon": 1.0, "calibration": "paper", "n_agg": n_agg})


# ---------------------------------------------------------------------------------------------------- cases
CASES: tuple[Case, ...] = (
    # baselines on the plain MAB
    Case("random_server", "mab", "random", MAB),
    Case("round_robin_complete", "mab", "round_robin", {**MAB, "topology": "complete"}),
    Case("independent_ucb1_beta_rewards", "mab", "independent_ucb1", {**MAB, "reward_model": "beta"}),
    Case("independent_ucb1_heterogeneous", "mab", "independent_ucb1", HETEROGENEOUS, check_pettingzoo=True),
    Case("full_sharing_ucb_server", "mab", "full_sharing_ucb", MAB),
    Case(
        "full_sharing_ucb_latency_drops",
        "mab",
        "full_sharing_ucb",
        {**HETEROGENEOUS, "latency": 1, "latency_jitter": 1, "drop_prob": 0.2},
        check_pettingzoo=True,
    ),
    Case(
        "full_sharing_ucb_prices_graph_edges",
        "mab",
        "full_sharing_ucb",
        {
            **MAB,
            "c1": 2.5,
            "link_accounting": "graph_edges",
            "free_server_downlink": False,
            "price_per_message": 0.5,
            "price_per_byte": 0.01,
        },
    ),
    Case("full_sharing_ucb_delays", "mab", "full_sharing_ucb", MAB, wrappers=(("delays", {"delay": 1, "jitter": 1}),)),
    # Zhu et al.: Gossip_UCB and Fed_UCB (which privatises its input stream and declares it to DP wrappers)
    Case("gossip_ucb_ring", "mab", "gossip_ucb", GOSSIP, check_pettingzoo=True),
    Case(
        "gossip_ucb_complete_node_then_neighbour",
        "mab",
        "gossip_ucb",
        {**MAB, "topology": "complete", "gossip": "node_then_neighbour"},
    ),
    Case("fed_ucb_default", "mab", "fed_ucb", GOSSIP),
    Case(
        "fed_ucb_laplace",
        "mab",
        "fed_ucb",
        GOSSIP,
        params={"epsilon": 1.0, "dp_bonus_scale": 1e-3, "clip_for_dp": (-1.0, 2.0)},
        wrappers=(("laplace", {"epsilon": 1.0}),),
        check_pettingzoo=True,
    ),
    Case(
        "fed_ucb_gaussian",
        "mab",
        "fed_ucb",
        GOSSIP,
        params={"epsilon": 0.5, "dp_bonus_scale": 1e-3},
        wrappers=(("gaussian", {"epsilon": 0.5, "delta": 1e-5}),),
    ),
    Case(
        "fed_ucb_tree",
        "mab",
        "fed_ucb",
        GOSSIP,
        params={"dp_bonus_scale": 1e-3},
        wrappers=(("tree", {"epsilon": 1.0}),),
    ),
    # Dubey and Pentland: private, cooperative and byzantine-proof UCB over graphs, individual baselines
    Case("dubey_private_ucb_ring", "mab", "dubey_private_ucb", RING),
    Case(
        "dubey_private_ucb_complete",
        "mab",
        "dubey_private_ucb",
        {**RING, "topology": "complete"},
        params={"gamma": 1, "dp_eps": 0.5},
        check_pettingzoo=True,
    ),
    Case(
        "dubey_private_ucb_literal_count_laplace",
        "mab",
        "dubey_private_ucb",
        GRAPH,
        params={"gamma": 2, "count_field": "current", "strict_dp": True},
        wrappers=(("laplace", {"epsilon": 1.0}),),
    ),
    Case(
        "dubey_private_ucb_delays",
        "mab",
        "dubey_private_ucb",
        RING,
        params={"gamma": 2},
        wrappers=(("delays", {"delay": 1, "jitter": 1}),),
    ),
    Case("dubey_cooperative_ucb_graph", "mab", "dubey_cooperative_ucb", GRAPH, params={"gamma": 3}),
    Case(
        "dubey_byzantine_ucb_relay",
        "mab",
        "dubey_byzantine_ucb",
        GRAPH,
        params={"gamma": 2, "eps_alg": 0.1},
        wrappers=(
            (
                "byzantine",
                {"contam_eps": 0.2, "fraction": 0.5, "mode": "relay", "q": Call("wrappers.faults:PointMass", (3.0,))},
            ),
        ),
        check_pettingzoo=True,
    ),
    Case(
        "dubey_byzantine_ucb_source",
        "mab",
        "dubey_byzantine_ucb",
        RING,
        params={"gamma": 2},
        wrappers=(("byzantine", {"contam_eps": 0.1, "byzantine": [0, 3]}),),
    ),
    Case(
        "dubey_byzantine_ucb_drops",
        "mab",
        "dubey_byzantine_ucb",
        GRAPH,
        params={"gamma": 2, "bonus_form": "literal"},
        wrappers=(("drops", {"prob": 0.2}),),
        check_pettingzoo=True,
    ),
    Case("dubey_ucb1_complete", "mab", "dubey_ucb1", {**RING, "topology": "complete"}),
    Case("dubey_dp_ucb_int", "mab", "dubey_dp_ucb_int", RING, params={"dp_eps": 0.5}, check_pettingzoo=True),
    Case("dubey_dp_ucb_int_frozen", "mab", "dubey_dp_ucb_int", RING, params={"dp_eps": 0.25, "frozen_index": True}),
    # Li and Song: CDP, DDP and HDP through their runner (which binds the agents to the DP wrapper), and CDP plain
    Case("cdp_mab_plain_runner", "mab", "cdp_mab", LI_SONG),
    Case("cdp_mab_laplace", "li_song", "cdp_mab", LI_SONG, wrappers=(paper_laplace(6),), check_pettingzoo=True),
    Case(
        "cdp_mab_agent_noise_partial",
        "li_song",
        "cdp_mab",
        {**LI_SONG, "c1": 25.0},
        params={"participation": 0.5, "noise": "agent"},
        wrappers=(paper_laplace(3),),
    ),
    Case(
        "ddp_mab_ring_graph_edges",
        "li_song",
        "ddp_mab",
        {**LI_SONG, "topology": "ring", "link_accounting": "graph_edges"},
        wrappers=(paper_laplace(6),),
    ),
    Case("ddp_mab_ring_plain", "li_song", "ddp_mab", {**LI_SONG, "topology": "ring", "c2": 2.0}),
    Case(
        "hdp_mab_hybrid_path",
        "li_song",
        "hdp_mab",
        {**LI_SONG, "topology": hybrid(6, (1, 2, 3), "path"), "c1": 50.0},
        wrappers=(paper_laplace(6),),
        check_pettingzoo=True,
    ),
    Case(
        "hdp_mab_hybrid_star_graph_edges",
        "li_song",
        "hdp_mab",
        {**LI_SONG, "topology": hybrid(6, (3, 3), "star"), "c1": 50.0, "link_accounting": "graph_edges"},
        wrappers=(paper_laplace(6),),
    ),
    Case(
        "hdp_mab_hybrid_agent_noise",
        "li_song",
        "hdp_mab",
        {**LI_SONG, "topology": hybrid(6, (2, 4), "complete")},
        params={"noise": "agent"},
        wrappers=(paper_laplace(6),),
    ),
    # Li and Wang: asynchronous federated linear bandits
    Case("async_linucb_uniform", "linear", "async_linucb", LINEAR, check_pettingzoo=True),
    Case(
        "async_linucb_zipf_multi_active",
        "linear",
        "async_linucb",
        {**LINEAR, "arrival": "zipf", "active_per_slot": 2},
        params={"gamma": 1.5},
    ),
    Case(
        "async_linucb_drops_prices",
        "linear",
        "async_linucb",
        {**LINEAR, "c1": 1.0, "price_per_byte": 0.01, "drop_prob": 0.1},
        wrappers=(("drops", {"prob": 0.2}),),
    ),
    Case("async_linucb_replay", "linear", "async_linucb", {**REPLAY, "horizon": 150}, check_pettingzoo=True),
    Case("async_linucb_am_heterogeneous", "linear", "async_linucb_am", LINEAR_HETEROGENEOUS, check_pettingzoo=True),
    Case(
        "async_linucb_am_ridge",
        "linear",
        "async_linucb_am",
        LINEAR_HETEROGENEOUS,
        params={"am_init": "ridge", "alpha_mode": "theory_upper"},
    ),
    Case("sync_linucb_uniform", "linear", "sync_linucb", LINEAR, check_pettingzoo=True),
    Case(
        "sync_linucb_heterogeneous_multi_active",
        "linear",
        "sync_linucb",
        {**LINEAR_HETEROGENEOUS, "active_per_slot": 2},
    ),
    Case("one_linucb_uniform", "linear", "one_linucb", LINEAR),
    Case("one_linucb_replay_delicious", "linear", "one_linucb", {**REPLAY, "profile": "delicious", "horizon": 150}),
    Case("n_linucb_zipf", "linear", "n_linucb", {**LINEAR, "arrival": "zipf"}),
    # Solanki et al.: federated procurement (the FRR column runs the non-federated baseline on the same seeds)
    Case("solanki_nf_uniform", "procurement", "solanki_nf", PROCUREMENT, check_pettingzoo=True),
    Case("solanki_fcb_sync_normal", "procurement", "solanki_fcb_sync", {**PROCUREMENT, "instance": "normal"}),
    Case(  # the MILP oracle for the agents and for the env's regret, on a homogeneous instance
        "solanki_fcb_sync_exact_oracle_homogeneous",
        "procurement",
        "solanki_fcb_sync",
        {**PROCUREMENT, "horizon": 80, "homogeneous": True, "oracle": "exact"},
        params={"oracle": "exact"},
    ),
    Case(
        "solanki_fcb_stress", "procurement", "solanki_fcb", {**PROCUREMENT, "instance": "stress"}, params={"t_lo": 16}
    ),
    Case(
        "solanki_fcb_ring_drops",
        "procurement",
        "solanki_fcb",
        {**PROCUREMENT, "num_agents": 4, "topology": "ring", "link_accounting": "graph_edges", "drop_prob": 0.2},
        params={"t_lo": 16},
        wrappers=(("drops", {"prob": 0.1}),),
    ),
    Case("solanki_pfcb_default", "procurement", "solanki_pfcb", {**PROCUREMENT, "horizon": 300}),
    Case(
        "solanki_pfcb_agent_noise",
        "procurement",
        "solanki_pfcb",
        PROCUREMENT,
        params={"t_lo": 16, "epsilon": 0.5},
        check_pettingzoo=True,
    ),
    Case(
        "solanki_pfcb_gaussian_wrapper",
        "procurement",
        "solanki_pfcb",
        PROCUREMENT,
        params={"noise": "wrapper", "t_lo": 16},
        wrappers=(("gaussian", {"epsilon": Call("agents.solanki:EpsilonSchedule", (1.0, 140)), "delta": 0.01}),),
        check_pettingzoo=True,
    ),
    Case(
        "solanki_pfcb_laplace_wrapper",
        "procurement",
        "solanki_pfcb",
        {**PROCUREMENT, "instance": "normal"},
        params={"noise": "wrapper", "t_lo": 16},
        wrappers=(("laplace", {"epsilon": 1.0}),),
    ),
    Case(  # one epsilon per message, budget 2.5: the third and later releases are blocked
        "solanki_pfcb_laplace_budget_block",
        "procurement",
        "solanki_pfcb",
        PROCUREMENT,
        params={"noise": "wrapper", "t_lo": 16},
        wrappers=(("laplace", {"epsilon": 1.0, "budget": 2.5, "on_exhausted": "block"}),),
    ),
)

#: The cases by name.
BY_NAME = {case.name: case for case in CASES}

ABOUT = (
    "Fingerprints of every reference algorithm (tests/fingerprints/cases.py). Refactors keep them bit for bit. "
    "Regenerate (python -m tests.fingerprints.cases --write) only when an issue explicitly changes results, "
    "and say so in the commit."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Check the fixture against fresh runs (default) or rewrite it (``--write``)."""
    parser = argparse.ArgumentParser(description="Check or regenerate tests/fingerprints/fingerprints.json.")
    parser.add_argument("--write", action="store_true", help="rewrite the fixture (only when results must change)")
    parser.add_argument("--case", action="append", choices=sorted(BY_NAME), help="only this case (repeatable)")
    args = parser.parse_args(argv)
    chosen = [BY_NAME[name] for name in args.case] if args.case else list(CASES)
    stored = load_fixture() if FIXTURE.exists() else {}
    fresh = {case.name: fingerprint(case) for case in chosen}
    if args.write:
        kept = {name: value for name, value in stored.items() if args.case and name in BY_NAME}
        dump_fixture({**kept, **fresh}, ABOUT)
        print(f"wrote {len(fresh)} case(s) to {FIXTURE}")
        return 0
    changed = 0
    for name, value in fresh.items():
        lines = [str(d) for d in differences(stored[name], value)] if name in stored else ["not in the fixture"]
        if lines:
            changed += 1
            print(f"{name}: {len(lines)} difference(s)", *lines[:20], sep="\n  ")
    print(f"{changed} of {len(fresh)} case(s) differ from {FIXTURE}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
