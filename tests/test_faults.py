"""Fault wrappers (wrappers.faults): byzantine corruption, drops and delays (dubey-pentland §1.4, §5.1, §6 item 6)."""

from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats

from agents.dubey import ByzantineProofUCB, CooperativeUCB, PrivateMultiAgentUCB
from agents.li_song.hdp import hybrid_topology
from fedbandit_envs import Message
from fedbandit_envs.channel.flooding import TTLFlooding
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.families.procurement.env import FedProcurementEnv
from fedbandit_envs.run import run
from wrappers.dp import LaplaceMessageDP
from wrappers.faults import (
    ATTACK_FIELDS,
    ByzantineAdversary,
    ByzantineAgents,
    FaultInactiveError,
    FaultInactiveWarning,
    MessageDelays,
    MessageDrops,
    Normal,
    PointMass,
    Uniform,
)


def target_bad_arms(field, arm, true_value, rng):
    """An arm-aware Q: push the best arm (0) down to 0 and every other arm up to 10."""
    return np.where(arm == 0, 0.0, 10.0)


def flood_copies(env, gamma, slots, content=None):
    """Drive a sample flood on ``env``'s core; return every copy delivered: (slot, recipient, sender, origin,
    created, reward), plus the flood service and the core."""
    core = env.unwrapped.core
    core.reset([4], hooks=env.message_hooks())
    m = core.config.num_agents
    service = TTLFlooding(gamma, "sample")
    service.reset(1, m)
    rows = []
    arms = np.zeros((1, m), np.int64)
    for t in range(slots):
        own = {"arm": arms, "reward": np.full((1, m), 0.5)} if t >= 1 else None
        feedback = core.step(arms, service.send(t, own))
        for batch in feedback.inbox:
            per_row = batch.payload["origin"].shape[1]
            for r in range(len(batch)):
                for j in range(per_row):
                    rows.append(
                        (
                            t,
                            int(batch.recipient[r]),
                            int(batch.sender[r]),
                            int(batch.payload["origin"][r, j]),
                            int(batch.payload["created"][r, j]),
                            float(batch.payload["reward"][r, j]),
                        )
                    )
        service.receive(t, feedback.inbox)
    return rows, service, core


# ---------------------------------------------------------------------------------------------------- byzantine
def test_the_adversary_corrupts_a_plain_mean_but_not_the_robust_estimator():
    # every agent byzantine, contam_eps = 0.1, Q pushes the best arm down and the others up. Measured final group
    # regret over seeds 0-3 (M = 20 ring, gamma = 2, T = 300): plain mean 109-121 clean vs 1262-1525 attacked;
    # robust (eps_alg = 0.1) 315-464 clean vs 364-444 attacked. If corruption were off, the plain mean would not move.
    env = {"num_agents": 20, "num_arms": 4, "horizon": 300, "topology": "ring", "instance": [0.8, 0.6, 0.4, 0.2]}
    regret = {}
    for contam in (0.0, 0.1):
        wrappers = [lambda e, c=contam: ByzantineAgents(e, contam_eps=c, q=target_bad_arms)]
        for name, make in (
            ("robust", lambda: ByzantineProofUCB(gamma=2, eps_alg=0.1)),
            ("mean", lambda: ByzantineProofUCB(gamma=2, estimator="mean")),
        ):
            results = run(make, env, [0, 1, 2, 3], checkpoints=1, wrappers=wrappers)
            regret[name, contam] = np.array([row["group_regret"] for row in results.curves])
    assert np.all(regret["mean", 0.1] > 5 * regret["mean", 0.0])  # the attack works on a plain mean ...
    assert np.all(regret["robust", 0.1] < 0.5 * regret["mean", 0.1])  # ... the robust estimator resists it
    assert regret["robust", 0.1].mean() < 1.5 * regret["robust", 0.0].mean()


def test_source_corruption_is_consistent_binomial_and_logged():
    env = ByzantineAgents(
        FederatedMAB(num_agents=12, num_arms=2, horizon=40, topology="ring"), contam_eps=0.2, byzantine=[0, 3, 4]
    )
    rows, _, _ = flood_copies(env, 3, 40)
    adversary = env.adversary
    payload = defaultdict(set)
    for _, _, _, origin, created, reward in rows:
        payload[origin, created].add(reward)
    assert all(len(values) == 1 for values in payload.values())  # every copy of an id is identical
    corrupted = {key for key, values in payload.items() if values != {0.5}}
    assert corrupted <= adversary.corrupted_ids()  # hidden flags cover every corrupted record seen
    assert {origin for origin, _ in corrupted} <= {0, 3, 4}  # honest agents' records are never touched
    assert {origin for origin, _ in corrupted} == {0, 3, 4}
    log = adversary.corruptions()
    assert set(log["value"].tolist()) == {10.0} and set(log["true_value"].tolist()) == {0.5}
    assert (log["stage"] == 0).all() and (log["sender"] == log["origin"]).all()
    # 3 byzantine agents x 39 created records; the number corrupted is Binomial(117, 0.2)
    assert adversary.exposed[0] == 117
    assert stats.binomtest(int(adversary.corrupted[0]), 117, 0.2).pvalue > 0.01
    assert adversary.byzantine[0].tolist() == [i in (0, 3, 4) for i in range(12)]


def test_relay_mode_also_corrupts_forwarded_records():
    env = ByzantineAgents(
        FederatedMAB(num_agents=10, num_arms=2, horizon=30, topology="ring"),
        contam_eps=0.3,
        byzantine=[2],
        mode="relay",
        q=Uniform(5.0, 6.0),
    )
    rows, _, _ = flood_copies(env, 3, 30)
    log = env.adversary.corruptions()
    relayed = log["stage"] == 1
    assert relayed.any() and (log["sender"][relayed] == 2).all() and (log["origin"][relayed] != 2).all()
    assert ((log["value"] >= 5.0) & (log["value"] < 6.0)).all()
    # a relay sends one corrupted copy to all its neighbours: copies from one sender of one id agree
    by_sender = defaultdict(set)
    for _, _, sender, origin, created, reward in rows:
        by_sender[sender, origin, created].add(reward)
    assert all(len(values) == 1 for values in by_sender.values())
    # copies of a record relayed through agent 2 differ from copies that avoided it
    corrupted_relays = {(int(o), int(c)) for o, c in zip(log["origin"][relayed], log["created"][relayed])}
    some = next(iter(corrupted_relays))
    seen = {reward for (_, _, _, origin, created, reward) in rows if (origin, created) == some}
    assert len(seen) == 2


def test_corruption_distributions():
    rng = np.random.default_rng(0)
    true = np.zeros(20_000)
    arm = np.zeros(20_000, np.int64)
    assert (PointMass(-3.0)("reward", arm, true, rng) == -3.0).all()
    uniform = Uniform(2.0, 4.0)("reward", arm, true, rng)
    assert uniform.min() >= 2.0 and uniform.max() < 4.0 and abs(uniform.mean() - 3.0) < 0.02
    normal = Normal(1.0, 2.0)("reward", arm, true, rng)
    assert abs(normal.mean() - 1.0) < 0.05 and abs(normal.std() - 2.0) < 0.05  # sd of the mean: 0.014
    with pytest.raises(ValueError, match="low < high"):
        Uniform(1.0, 1.0)
    with pytest.raises(ValueError, match="std must be > 0"):
        Normal(0.0, 0.0)


def test_a_silent_adversary_changes_nothing():
    # contam_eps = 0: the adversary stream is separate, so the run is identical to one without the wrapper
    env = {"num_agents": 10, "num_arms": 3, "horizon": 80, "topology": "ring"}
    make = lambda: ByzantineProofUCB(gamma=2)  # noqa: E731
    plain = run(make, env, [1, 2], checkpoints=8)
    wrapped = run(make, env, [1, 2], checkpoints=8, wrappers=[lambda e: ByzantineAgents(e, contam_eps=0.0)])
    keys = ("group_regret", "messages", "bytes")
    assert [[r[k] for k in keys] for r in plain.curves] == [[r[k] for k in keys] for r in wrapped.curves]


def test_byzantine_fields_keep_one_order_in_every_process():
    # corruption draws follow the fields' order: a set's is its strings' hashes' (PYTHONHASHSEED), so it is sorted,
    # and a generator is read once for both the check and the fields kept
    assert ByzantineAdversary(0.1, fields={"sum", "reward", "count"}).fields == ("count", "reward", "sum")
    assert ByzantineAdversary(0.1, fields=(name for name in ("sum", "reward"))).fields == ("sum", "reward")


def test_bad_adversary_input():
    env = FederatedMAB(num_agents=5, num_arms=2, horizon=10, topology="ring")
    with pytest.raises(ValueError, match="contam_eps must lie in"):
        ByzantineAgents(env, contam_eps=1.5)
    with pytest.raises(ValueError, match="contam_eps must lie in"):
        ByzantineAgents(env, contam_eps=-0.1)
    with pytest.raises(ValueError, match=r"byzantine \[7\] are not in the population: agents are 0..4"):
        ByzantineAgents(env, contam_eps=0.1, byzantine=[1, 7])
    with pytest.raises(ValueError, match="must not repeat"):
        ByzantineAgents(env, contam_eps=0.1, byzantine=[1, 1])
    with pytest.raises(ValueError, match="either byzantine"):
        ByzantineAgents(env, contam_eps=0.1, byzantine=[1], fraction=0.5)
    with pytest.raises(ValueError, match="fraction must lie in"):
        ByzantineAgents(env, contam_eps=0.1, fraction=2.0)
    with pytest.raises(ValueError, match="mode must be one of"):
        ByzantineAgents(env, contam_eps=0.1, mode="sink")
    with pytest.raises(TypeError, match="q must be"):
        ByzantineAgents(env, contam_eps=0.1, q=3.0)
    for fields in ("reward", 5, 2.5, None):
        with pytest.raises(TypeError, match=r"fields must be an iterable of names, e\.g\. \('reward',\)"):
            ByzantineAgents(env, contam_eps=0.1, fields=fields)
    with pytest.raises(TypeError, match="fields must be a non-empty sequence"):
        ByzantineAgents(env, contam_eps=0.1, fields=[])
    with pytest.raises(TypeError, match="each of fields must be a non-empty string"):
        ByzantineAgents(env, contam_eps=0.1, fields=["reward", 3])
    with pytest.raises(TypeError, match="wraps a fedbandit environment"):
        ByzantineAgents(object(), contam_eps=0.1)
    bad_q = ByzantineAgents(
        FederatedMAB(num_agents=4, num_arms=2, horizon=5, topology="ring"),
        contam_eps=1.0,
        q=lambda field, arm, true_value, rng: np.zeros(3),
    )
    with pytest.raises(ValueError, match="q returned shape"):
        flood_copies(bad_q, 1, 3)


def test_fraction_picks_a_seeded_set_of_byzantine_agents():
    env = ByzantineAgents(FederatedMAB(num_agents=20, num_arms=2, horizon=5, topology="ring"), 0.1, fraction=0.25)
    env.reset(seed=3)
    first = env.adversary.byzantine[0].copy()
    env.reset(seed=3)
    assert first.sum() == 5 and (env.adversary.byzantine[0] == first).all()
    env.reset(seed=4)
    assert not (env.adversary.byzantine[0] == first).all()


def test_byzantine_draws_do_not_depend_on_the_order_a_sender_lists_its_messages():
    # agent 0 sends the same two point-to-point messages every slot, listed [to 1, to 3] or [to 3, to 1]: each copy
    # gets the same draw either way (the canonical order includes the recipient)
    def received(recipients):
        env = ByzantineAgents(
            FederatedMAB(num_agents=4, num_arms=2, horizon=40, topology="ring"), 0.5, byzantine=[0], q=Uniform(5, 6)
        )
        env.reset(seed=2)
        got = {}
        for t in range(40):
            messages = [Message(0, r, "v", {"reward": [0.5]}) for r in recipients]
            actions = {"agent_0": {"arm": 0, "messages": messages}, "agent_1": 0, "agent_2": 0, "agent_3": 0}
            observations, *_ = env.step(actions)
            for agent in ("agent_1", "agent_3"):
                got[t, agent] = [float(m.payload["reward"][0]) for m in observations[agent]["inbox"]]
        return got

    in_order = received([1, 3])
    assert in_order == received([3, 1])
    assert len({value for values in in_order.values() for value in values}) > 2  # some copies were corrupted


PER_COPY_FAULTS = {"drops": lambda e: MessageDrops(e, 0.0), "delays": lambda e: MessageDelays(e, 0)}


@pytest.mark.parametrize("fault", PER_COPY_FAULTS)
def test_byzantine_agents_refuse_a_fault_that_splits_broadcasts_and_name_the_order_to_use(fault):
    # inside ByzantineAgents, a per-copy fault would have each copy of a record corrupted on a draw of its own (and a
    # delayed record would reach it after its creation slot, never to be corrupted): D13 wants one draw per record
    make = PER_COPY_FAULTS[fault]
    name = type(make(FederatedMAB(num_agents=6, num_arms=2, horizon=30, topology="complete"))).__name__
    refused = rf"ByzantineAgents cannot wrap {name}: .*wrap the other way round \({name}\(ByzantineAgents\(env"
    with pytest.raises(ValueError, match=refused):
        ByzantineAgents(make(FederatedMAB(num_agents=6, num_arms=2, horizon=30, topology="complete")), 0.3)
    if fault == "drops":  # also with another kind in between
        with pytest.raises(ValueError, match=refused):
            ByzantineAgents(LaplaceMessageDP(make(FederatedMAB(num_agents=6, num_arms=2, horizon=30)), 1.0), 0.3)
    # the order named corrupts each record once: every copy of it is identical, and `exposed` counts records
    byzantine = ByzantineAgents(
        FederatedMAB(num_agents=6, num_arms=2, horizon=30, topology="complete"), contam_eps=0.3, byzantine=[0]
    )
    rows, _, _ = flood_copies(make(byzantine), 1, 30)
    values = defaultdict(set)
    for _, _, _, origin, created, reward in rows:
        values[origin, created].add(reward)
    assert all(len(copies) == 1 for copies in values.values())
    assert byzantine.adversary.exposed[0] == 29 and 0 < byzantine.adversary.corrupted[0] < 29


def test_a_fraction_must_select_a_byzantine_agent_and_none_warns_saying_so():
    def env(m=4):
        return FederatedMAB(num_agents=m, num_arms=2, horizon=6, topology="ring")

    with pytest.raises(ValueError, match=r"fraction=0.125 of 4 agents selects round\(0.125 \* 4\) = 0 byzantine"):
        ByzantineAgents(env(), 0.1, fraction=0.125)  # rounds to 0 agents
    assert ByzantineAgents(env(), 0.1, fraction=0.13).hook.fraction == 0.13  # round(0.52) = 1 agent
    # no byzantine agent at all is an explicit choice: accepted, and the warning says why nothing was corrupted
    for none, named in ((dict(fraction=0.0), r"fraction=0\)"), (dict(byzantine=[]), r"byzantine=\[\]\)")):
        with pytest.warns(
            FaultInactiveWarning, match=rf"ByzantineAgents acted on nothing .*no agent is byzantine \({named}"
        ) as caught:
            flood_copies(ByzantineAgents(env(), 0.1, **none), 1, 6)
        assert "fields=" not in str(caught[0].message)
    # byzantine agents that never send a record of their own: the fields were right, the agents were not
    quiet = ByzantineAgents(env(), 0.1, byzantine=[2])
    quiet.reset(seed=0)
    with pytest.warns(FaultInactiveWarning, match=r"'v': \['reward'\]\. Messages carried those fields, but") as caught:
        while quiet.agents:
            message = Message(0, 1, "v", {"reward": [0.5]})
            quiet.step({"agent_0": {"arm": 0, "messages": [message]}, "agent_1": 0, "agent_2": 0, "agent_3": 0})
    assert "Pass fields=" not in str(caught[0].message)


def test_inputs_that_would_fail_mid_episode_are_refused_up_front_or_named():
    with pytest.raises(ValueError, match="finite width"):
        Uniform(-1e308, 1e308)  # high - low overflows
    with pytest.raises(ValueError, match="std must leave mean"):
        Normal(0.0, 1e308)  # draws overflow to inf
    assert Uniform(-1e300, 1e300).high == 1e300 and Normal(0.0, 1e300).std == 1e300  # large but finite draws
    for bad in (np.nan, np.inf):  # a callable q: checked as it returns
        q = lambda field, arm, true_value, rng, bad=bad: np.full(true_value.shape, bad)  # noqa: E731
        env = ByzantineAgents(FederatedMAB(num_agents=5, num_arms=2, horizon=10, topology="ring"), 1.0, q=q)
        with pytest.raises(ValueError, match=r"q of ByzantineAgents returned a non-finite value .*'reward'"):
            flood_copies(env, 1, 10)
    ring = FederatedMAB(num_agents=5, num_arms=2, horizon=10, topology="ring")
    huge = ByzantineAgents(ring, 1.0, q=PointMass(1e300), fields=["arm"])
    with pytest.raises(ValueError, match="q returned .* for the field 'arm', beyond the range of its dtype int64"):
        flood_copies(huge, 1, 10)


@pytest.mark.parametrize("argument", ["delay", "jitter"])
def test_delays_refuse_values_the_simulation_cannot_count_and_deliver_nothing_beyond_the_horizon(argument):
    def delays(value):
        arguments = {"delay": 1, argument: value}
        return MessageDelays(FederatedMAB(num_agents=4, num_arms=2, horizon=8, topology="ring"), **arguments)

    for huge in (2**62, 2**63, 10**30):
        with pytest.raises(ValueError, match=rf"{argument} must be an int in \[0, 2\*\*62\)"):
            delays(huge)
    rows, _, core = flood_copies(delays(2**62 - 1), 1, 8)  # legitimate: (almost surely) beyond the horizon
    assert rows == [] and core.channel.ledger.messages[0] == 0


# ---------------------------------------------------------------------------------------------------- drops, delays
def test_drops_lose_copies_at_the_requested_rate_and_only_where_asked():
    env = MessageDrops(FederatedMAB(num_agents=10, num_arms=2, horizon=60, topology="complete"), 0.3, senders=[0, 1])
    rows, service, core = flood_copies(env, 1, 60)
    lost = env.hook.dropped[0]
    # senders 0 and 1 each broadcast 59 records to 9 neighbours: 1062 copies exposed, Binomial(1062, 0.3) lost
    assert stats.binomtest(int(lost), 1062, 0.3).pvalue > 0.01
    received = np.bincount([sender for _, _, sender, *_ in rows], minlength=10)
    assert received[2:].tolist() == [59 * 9] * 8 and received[0] + received[1] == 1062 - lost
    assert core.channel.ledger.messages[0] == 10 * 59 * 9 - lost  # a lost copy is never transmitted
    with pytest.raises(ValueError, match="prob must lie in"):
        MessageDrops(FederatedMAB(num_agents=3, num_arms=2, horizon=5), 1.2)
    with pytest.raises(ValueError, match="not in the population"):
        MessageDrops(FederatedMAB(num_agents=3, num_arms=2, horizon=5), 0.1, senders=[3])


def test_delays_hold_copies_back_by_the_requested_slots():
    env = MessageDelays(FederatedMAB(num_agents=6, num_arms=2, horizon=30, topology="ring"), delay=2, jitter=1)
    rows, _, _ = flood_copies(env, 1, 30)
    ages = np.array([slot - created for slot, _, _, _, created, _ in rows])
    assert set(ages.tolist()) == {2, 3}  # one hop: age 0 + delay 2 + jitter in {0, 1}
    assert abs((ages == 3).mean() - 0.5) < 0.1  # about 300 copies; sd of the fraction 0.03
    untouched = MessageDelays(FederatedMAB(num_agents=6, num_arms=2, horizon=10, topology="ring"), 3, kinds=["x"])
    with pytest.warns(FaultInactiveWarning, match=r"MessageDelays acted on nothing .* kinds \['x'\]"):
        rows, _, _ = flood_copies(untouched, 1, 10)
    assert {slot - created for slot, _, _, _, created, _ in rows} == {0}
    with pytest.raises(ValueError, match="delay must be an int >= 0"):
        MessageDelays(FederatedMAB(num_agents=3, num_arms=2, horizon=5), -1)


def test_delays_deliver_procurement_copies_due_in_a_silent_report_round():
    """Every report round is routed under a hook, so a copy due in a round where nobody sends still arrives."""
    env = MessageDelays(FedProcurementEnv(num_agents=2, num_producers=3, horizon=5), delay=2)
    env.reset(seed=0)
    arrived = []
    for t in range(5):
        env.step({a: np.zeros(3, np.int64) for a in env.agents})  # the round's act step
        sends = {"aggregator_0": {"messages": [Message(0, 1, "note", {"v": [float(t)]})]}} if t == 0 else {}
        observations, *_ = env.step(sends)  # its report step: silent from round 1 on
        arrived += [(t, m.payload["v"].tolist()) for m in observations.get("aggregator_1", {}).get("inbox", [])]
    assert arrived == [(2, [0.0])]
    assert env.unwrapped.ledger.totals()["copies"] == 1


@pytest.mark.parametrize(
    "wrap",
    [lambda e: MessageDrops(e, 0.25), lambda e: MessageDelays(e, delay=1, jitter=1)],
    ids=["drops", "delays"],
)
def test_fault_hooks_give_identical_batched_and_pettingzoo_runs(wrap):
    env = {"num_agents": 8, "num_arms": 3, "horizon": 50, "topology": "erdos_renyi", "topology_params": {"p": 0.4}}
    make = lambda: PrivateMultiAgentUCB(gamma=2, dp_eps=0.5, max_age=5)  # noqa: E731
    keys = ("group_regret", "messages", "bytes", "links")
    batched = run(make, env, [2, 3], checkpoints=50, batched=True, wrappers=[wrap])
    single = run(make, env, [3], checkpoints=50, batched=False, wrappers=[wrap])
    rows = lambda r: [[row[k] for k in keys] for row in r.curves if row["seed"] == 3]  # noqa: E731
    assert rows(batched) == rows(single)


# ---------------------------------------------------------------------------------------------------- inactive faults
COOPERATIVE = {"num_agents": 10, "num_arms": 3, "horizon": 120, "topology": "ring", "instance": [0.8, 0.5, 0.2]}


def target_bad_arm_means(field, arm, true_value, rng):
    """Q on per-arm mean vectors: the best arm's (0) mean to 0, every other arm's to 10."""
    return np.broadcast_to(np.where(np.arange(true_value.shape[-1]) == 0, 0.0, 10.0), true_value.shape)


def cooperative_regret(wrappers=()) -> np.ndarray:
    results = run(lambda: CooperativeUCB(gamma=2), COOPERATIVE, [0, 1], checkpoints=1, wrappers=wrappers)
    return np.array([row["group_regret"] for row in results.curves])


def test_byzantine_default_fields_on_cooperative_ucb_warn_instead_of_looking_immune():
    # issue 15 defect 8: CooperativeUCB floods rel_mean, the default fields=("reward",) corrupt nothing, and the
    # non-robust baseline looked immune. Now the episode ends with a warning that names what was sent.
    clean = cooperative_regret()
    default = [lambda e: ByzantineAgents(e, contam_eps=0.3)]
    with pytest.warns(FaultInactiveWarning, match=r"ByzantineAgents acted on nothing.*\['reward'\].*'rel_mean'"):
        assert (cooperative_regret(default) == clean).all()
    # attacking the field the algorithm sends works, and does not warn
    fields = ATTACK_FIELDS["dubey_cooperative_ucb"]["dubey_exact"]
    attack = [lambda e: ByzantineAgents(e, contam_eps=0.3, fields=fields, q=target_bad_arm_means)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FaultInactiveWarning)
        attacked = cooperative_regret(attack)
    assert (attacked > 2 * clean).all()  # measured (seeds 0, 1): clean 57.9 / 81.0, attacked 350.1 / 357.6


def test_inactive_fault_can_raise_or_be_ignored():
    env = ByzantineAgents(
        FederatedMAB(num_agents=4, num_arms=2, horizon=6, topology="ring"), 0.1, fields=["nope"], on_inactive="raise"
    )
    with pytest.raises(FaultInactiveError, match=r"fields \['nope'\].*'sample': \['arm', 'created'"):
        flood_copies(env, 1, 6)
    quiet = MessageDrops(
        FederatedMAB(num_agents=4, num_arms=2, horizon=6, topology="ring"), 0.5, kinds=["x"], on_inactive="ignore"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", FaultInactiveWarning)
        flood_copies(quiet, 1, 6)
    assert quiet.hook.exposed.tolist() == [0] and quiet.hook.dropped.tolist() == [0]
    with pytest.raises(ValueError, match="on_inactive must be one of"):
        MessageDrops(FederatedMAB(num_agents=4, num_arms=2, horizon=6), 0.5, on_inactive="sometimes")


def test_a_fault_on_an_algorithm_that_sends_nothing_warns():
    with pytest.warns(FaultInactiveWarning, match=r"MessageDrops acted on nothing.*none \(no message was sent\)"):
        run("independent_ucb1", COOPERATIVE, [0], checkpoints=1, wrappers=[lambda e: MessageDrops(e, 0.5)])


def test_drops_of_a_sender_that_never_sends_warn_and_active_ones_do_not():
    env = MessageDrops(FederatedMAB(num_agents=6, num_arms=2, horizon=8, topology="ring"), 0.5, senders=[3])
    core = env.unwrapped.core
    core.reset([0], hooks=env.message_hooks())
    arms = np.zeros((1, 6), np.int64)
    with pytest.warns(FaultInactiveWarning, match=r"senders \[3\]"):
        for _ in range(8):
            core.step(arms)
    active = MessageDrops(FederatedMAB(num_agents=6, num_arms=2, horizon=8, topology="ring"), 0.0, senders=[3])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FaultInactiveWarning)
        flood_copies(active, 1, 8)
    assert active.hook.exposed[0] == 7 * 2 and active.hook.dropped[0] == 0  # 7 records to 2 ring neighbours


ATTACK_ENVS = {
    "full_sharing_ucb": {"topology": "server", "horizon": 5},
    "cdp_mab": {"topology": "server", "horizon": 300},
    "ddp_mab": {"topology": "complete", "horizon": 300},
    "hdp_mab": {"topology": hybrid_topology(6, [3, 3]), "horizon": 300},
    "gossip_ucb": {"topology": "complete", "horizon": 20, "gossip": "uniform_edge"},
    "fed_ucb": {"topology": "complete", "horizon": 20, "gossip": "uniform_edge"},
    "dubey_private_ucb": {"topology": "complete", "horizon": 20},
    "dubey_cooperative_ucb": {"topology": "complete", "horizon": 10},
    "dubey_byzantine_ucb": {"topology": "complete", "horizon": 10},
}


@pytest.mark.parametrize(
    "name, kind, field",
    [(name, kind, field) for name in ATTACK_ENVS for kind, fields in ATTACK_FIELDS[name].items() for field in fields],
)
def test_attack_fields_table_names_fields_the_algorithm_sends(name, kind, field):
    # contam_eps = 0 changes nothing; on_inactive="raise" fails unless byzantine agents sent `field` in `kind`
    wrap = lambda e: ByzantineAgents(e, 0.0, fields=[field], kinds=[kind], on_inactive="raise")  # noqa: E731
    run(name, {"num_agents": 6, "num_arms": 3, **ATTACK_ENVS[name]}, [0], checkpoints=1, wrappers=[wrap])
