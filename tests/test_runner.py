"""The runner: batched replicas equal single PettingZoo runs; tidy tables; per-agent learners."""

import numpy as np
import pytest
from test_bench_compare import EpsGreedy

from fedbandit_envs.algorithms import make_algorithm
from fedbandit_envs.channel import Message, MessageBatch
from fedbandit_envs.core import message_phases
from fedbandit_envs.protocol import Action, Agent, PerAgentPopulation, Population
from fedbandit_envs.run import build_env, checkpoint_slots, run

ENV = {"num_agents": 4, "num_arms": 6, "horizon": 120, "instance_seed": 3}
KEYS = (
    "group_regret",
    "messages",
    "copies",
    "scalars",
    "bytes",
    "links",
    "link_cost",
    "cost",
    "up_messages",
    "down_messages",
)


def by_run_and_slot(results):
    return {(row["seed"], row["slot"]): tuple(row[k] for k in KEYS) for row in results.curves}


CASES = [(a, t) for a in ("random", "round_robin", "independent_ucb1") for t in ("server", "complete")]


@pytest.mark.parametrize(("algorithm", "topology"), [*CASES, ("full_sharing_ucb", "server")])
def test_batched_replica_equals_single_pettingzoo_run(algorithm, topology):
    env = {**ENV, "topology": topology}
    seeds = [11, 12, 13, 14]
    batched = run(algorithm, env, seeds, checkpoints=list(range(1, 121)), batched=True)
    for seed in (11, 13, 14):  # several replicas b, each against its own single run
        single = run(algorithm, env, [seed], checkpoints=list(range(1, 121)), batched=False)
        expected = by_run_and_slot(single)
        got = {key: value for key, value in by_run_and_slot(batched).items() if key[0] == seed}
        assert got == expected
    if algorithm == "full_sharing_ucb":  # messages every slot: M uploads (from slot 1) and M downloads
        final = [r for r in batched.curves if r["slot"] == 120]
        assert all(r["up_messages"] == 4 * 119 and r["down_messages"] == 4 * 120 for r in final)


def test_batched_equals_single_with_heterogeneous_instance_and_drops():
    env = {**ENV, "instance": "heterogeneous", "instance_seed": None, "drop_prob": 0.2}
    batched = run("full_sharing_ucb", env, [5, 6], checkpoints=10, batched=True)
    single = run("full_sharing_ucb", env, [6], checkpoints=10, batched=False)
    got = {k: v for k, v in by_run_and_slot(batched).items() if k[0] == 6}
    assert got == by_run_and_slot(single)
    assert single.curves[-1]["dropped"] > 0


def test_tables_are_tidy_and_saved(tmp_path):
    results = run("independent_ucb1", ENV, [0, 1], checkpoints=4)
    assert len(results.curves) == 2 * 4 and len(results.agents) == 2 * 4 * 4
    assert sorted({r["slot"] for r in results.curves}) == [30, 60, 90, 120]
    per_agent = sum(r["regret"] for r in results.agents if r["seed"] == 0 and r["slot"] == 120)
    group = [r["group_regret"] for r in results.curves if r["seed"] == 0 and r["slot"] == 120][0]
    assert per_agent == pytest.approx(group)
    paths = results.save(tmp_path, "x")
    assert [p.name for p in paths] == ["x.csv", "x_agents.csv"]
    assert paths[0].read_text().count("\n") == 1 + 8


def test_per_agent_learner_runs_on_both_paths():
    make = lambda: PerAgentPopulation(EpsGreedy)  # noqa: E731
    batched = run(make, ENV, [1, 2], checkpoints=3, batched=True)
    single = run(make, ENV, [2], checkpoints=3, batched=False)
    assert {k: v for k, v in by_run_and_slot(batched).items() if k[0] == 2} == by_run_and_slot(single)


def test_an_agent_class_runs_as_a_per_agent_population_and_anything_else_must_be_a_population():
    wrapped = run(lambda: PerAgentPopulation(EpsGreedy), ENV, [1, 2], checkpoints=3)
    assert by_run_and_slot(run(EpsGreedy, ENV, [1, 2], checkpoints=3)) == by_run_and_slot(wrapped)
    assert by_run_and_slot(run("test_bench_compare:EpsGreedy", ENV, [1, 2], checkpoints=3)) == by_run_and_slot(wrapped)
    for learner, name in [("os:getcwd", "os:getcwd"), (dict, "dict")]:
        with pytest.raises(
            TypeError, match=rf"{name} does not implement the protocol: no method\(s\) \['reset', 'act'"
        ):
            run(learner, ENV, [0])


def test_bad_runner_input():
    with pytest.raises(ValueError, match="unknown algorithm"):
        make_algorithm("nope")
    with pytest.raises(ValueError, match="checkpoints"):
        checkpoint_slots(10, [0, 5])
    with pytest.raises(ValueError, match="coordinator"):
        run("random", {**ENV, "coordinator": None}, [0])
    with pytest.raises(ValueError, match="seeds"):
        run("random", ENV, [])
    with pytest.raises(TypeError, match=r"pass seeds=range\(n\) for n runs"):
        run("random", ENV, 3)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"algorithm": "agents.baselines:Nope"}, ValueError, "module 'agents.baselines' has no attribute 'Nope'"),
        ({"algorithm": "no_such_module:X"}, ValueError, "there is no module 'no_such_module'"),
        ({"algorithm": "agents.no_such_module:X"}, ValueError, "there is no module 'agents.no_such_module'"),
        ({"env_kwargs": [("num_agents", 2)]}, TypeError, "env_kwargs must be a mapping"),
        ({"batched": "no"}, TypeError, "batched must be True or False"),
        ({"batched": 1}, TypeError, "batched must be True or False"),
        ({"label": ["a"]}, TypeError, "label must be a string"),
        ({"wrappers": lambda env: env}, TypeError, "wrappers must be a sequence of functions"),
        ({"wrappers": [lambda env: None]}, TypeError, r"wrappers\[0\] .* returned NoneType, not an environment"),
    ],
)
def test_run_arguments_are_checked_and_named(arguments, error, message):
    arguments = {"algorithm": "random", "env_kwargs": ENV, "seeds": [0], **arguments}
    with pytest.raises(error, match=message):
        run(arguments.pop("algorithm"), arguments.pop("env_kwargs"), arguments.pop("seeds"), **arguments)


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(("algorithm", "name"), [("full_sharing_ucb", "FullSharingUCB"), ("cdp_mab", "CDP-MAB")])
def test_server_algorithms_refuse_a_topology_without_server_links_at_reset(algorithm, name, batched):
    """Before, FullSharingUCB on an agent graph failed at its first upload with a routing error."""
    env = {**ENV, "topology": "complete"}
    with pytest.raises(ValueError, match=rf"^{name} needs every agent linked to the server, got topology 'complete'"):
        run(algorithm, env, [0], checkpoints=1, batched=batched)


def test_a_numpy_checkpoint_count_is_a_count():
    assert checkpoint_slots(10, np.int64(5)).tolist() == checkpoint_slots(10, 5).tolist() == [2, 4, 6, 8, 10]
    assert checkpoint_slots(10, range(2, 11, 4)).tolist() == [2, 6, 10]
    assert checkpoint_slots(10, 10**15).tolist() == list(range(1, 11))  # every slot, without 1e15 points


@pytest.mark.parametrize("checkpoints", [5.0, True, "5", [3.5], [True], None])
def test_a_checkpoint_count_or_slot_that_is_not_an_integer_is_refused(checkpoints):
    """Before, 5.0 and "5" recorded one checkpoint at slot 5 and True one at T, silently."""
    with pytest.raises(TypeError, match="checkpoints"):
        checkpoint_slots(10, checkpoints)


@pytest.mark.parametrize("batched", [True, False])
def test_any_sequence_of_seeds_runs_those_seeds(batched):
    listed = run("independent_ucb1", ENV, [7, 8], 3, batched=batched)
    for seeds in (range(7, 9), np.array([7, 8]), (7, 8)):
        again = run("independent_ucb1", ENV, seeds, 3, batched=batched)
        assert by_run_and_slot(again) == by_run_and_slot(listed)
        assert all(type(row["seed"]) is int for row in again.curves)
    assert {row["seed"] for row in listed.curves} == {7, 8}


def test_saving_rows_with_different_columns_takes_their_union(tmp_path):
    from wrappers.dp import LaplaceMessageDP

    results = run("independent_ucb1", ENV, [0], checkpoints=1)
    results.extend(run("independent_ucb1", ENV, [0], checkpoints=1, wrappers=[lambda e: LaplaceMessageDP(e, 1.0)]))
    header, first, second = (tmp_path / "r.csv").read_text().splitlines() if results.save(tmp_path, "r") else []
    assert header.split(",")[-1] == "delta_mean" and "epsilon_max" in header
    assert first.count(",") == second.count(",") == header.count(",")


class EchoAtBoundary(Population):
    """Agent 0 tells agent 1 its last reward at every boundary; agent 1 pulls arm 1 once it has heard 1.0."""

    supports_batching = True
    boundary_hops = True

    def __init__(self, endless: bool = False) -> None:
        self.endless = endless

    def reset(self, context):
        self.heard = np.zeros(context.num_replicas)
        self.last = np.zeros(context.num_replicas)
        self.sent = 0

    def act(self, step):
        arms = np.zeros((len(self.heard), 2), np.int64)
        arms[:, 1] = self.heard > 0.5
        return Action(arms)

    def observe(self, feedback):
        self.last = feedback.rewards[:, 0].copy()
        self.sent = 0

    def send(self, phase):
        if self.sent and not self.endless:
            return []
        self.sent += 1
        b = len(self.last)
        return [MessageBatch("echo", np.arange(b), np.zeros(b, int), np.ones(b, int), {"reward": self.last})]

    def receive(self, phase, inbox):
        for batch in inbox:
            self.heard[batch.replica] = batch.payload["reward"]


def test_boundary_hops_use_the_last_reward_on_both_paths():
    env = {"num_agents": 2, "num_arms": 2, "horizon": 40, "topology": "complete", "instance": [0.3, 0.7]}
    population = EchoAtBoundary()
    core = build_env(EchoAtBoundary, population, env)[0].unwrapped.core
    core.reset([5])
    population.reset(core.context)
    arms, rewards = [], []
    for _ in range(40):
        feedback = core.play(population.act(core.current_step()))
        population.observe(feedback)
        message_phases(core, population)
        arms.append(feedback.arms[0, 1])
        rewards.append(feedback.rewards[0, 0])
    assert arms[1:] == rewards[:-1] and 0 < sum(rewards) < 40  # agent 1 acts on agent 0's reward of the slot before
    columns = ("seed", "slot", "group_regret", "messages", "links", "cost")
    paths = [run(EchoAtBoundary, env, [3, 4, 5], checkpoints=40, batched=b).curves for b in (True, False)]
    batched, single = (sorted(tuple(row[c] for c in columns) for row in rows) for rows in paths)
    assert batched == single
    assert [row[3] for row in batched if row[1] == 40] == [39, 39, 39]  # one echo per boundary, none after the last


def test_a_boundary_that_never_ends_is_an_error():
    env = {"num_agents": 2, "num_arms": 2, "horizon": 5, "topology": "complete"}
    with pytest.raises(RuntimeError, match="boundary"):
        run(lambda: EchoAtBoundary(endless=True), env, [0], checkpoints=1)


class BadLearner(Population):
    """Returns what ``act`` / ``send`` are given to return, to check the run loop's protocol errors."""

    boundary_hops = True

    def __init__(self, action=None, sent=None):
        self.action, self.sent = action, sent

    def reset(self, context):
        self.shape = (context.num_replicas, context.num_agents)

    def act(self, step):
        return self.action if self.action is not None else Action(np.zeros(self.shape, np.int64))

    def observe(self, feedback):
        pass

    def send(self, phase):
        return self.sent if self.sent is not None else []


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(
    ("learner", "pattern"),
    [
        (lambda: BadLearner(action=[0, 1, 2]), r"BadLearner.act\(\) must return fedbandit_envs.core.Action"),
        (lambda: BadLearner(sent="hello"), r"BadLearner.send\(\) must return a list of MessageBatch .* boundary phase"),
        (lambda: BadLearner(sent=[None]), r"BadLearner.send\(\) must return a list of MessageBatch"),
    ],
)
def test_a_learner_that_breaks_the_protocol_gets_an_error_naming_the_method(learner, pattern, batched):
    with pytest.raises(TypeError, match=pattern):
        run(learner, ENV, [0], checkpoints=1, batched=batched)


class TalkToFirstNeighbour(Agent):
    """Messages its first neighbour in the first slot, read off the topology of its context."""

    def reset(self, agent_id, context, rng):
        assert context.num_replicas == 1
        self.agent_id = agent_id
        neighbours = context.topologies[0].neighbours(agent_id)
        self.neighbour = int(neighbours[0]) if len(neighbours) else None

    def act(self, observation):
        if self.neighbour is None or observation["slot"] > 0:
            return 0
        return {"arm": 0, "messages": [Message(self.agent_id, self.neighbour, "hi", {"x": 1.0})]}


def test_each_agent_of_a_per_agent_population_sees_its_own_replica_s_context():
    # Each seed draws its own random graph; an agent of replica b must see replica b's, as on the PettingZoo path.
    env = {"num_agents": 6, "num_arms": 2, "horizon": 3, "topology": "erdos_renyi", "topology_params": {"p": 0.4}}
    batched = run(TalkToFirstNeighbour, env, [0, 1, 2, 3], checkpoints=1, batched=True, reference=None)
    one_by_one = run(TalkToFirstNeighbour, env, [0, 1, 2, 3], checkpoints=1, batched=False, reference=None)
    assert [row["messages"] for row in batched.curves] == [row["messages"] for row in one_by_one.curves]
    assert all(row["messages"] > 0 for row in batched.curves)


class CrossedKinds(Population):
    """Every slot agent 1 sends kind "a" to agent 0 (listed first), and agent 0 sends kind "b" to agent 1."""

    families = ("mab",)

    def reset(self, context):
        self.replicas = context.num_replicas

    def act(self, step):
        replica, zeros, ones = np.arange(self.replicas), np.zeros(self.replicas, int), np.ones(self.replicas, int)
        first = MessageBatch("a", replica, ones, zeros, {"x": np.zeros((self.replicas, 1))})
        second = MessageBatch("b", replica, zeros, ones, {"y": np.zeros((self.replicas, 1))})
        return Action(np.zeros((self.replicas, 2), np.int64), [first, second])

    def observe(self, feedback):
        pass


def test_a_shared_link_is_charged_to_the_same_agent_on_both_paths():
    """Both ends of a link send on it every slot: the lower agent pays, on the batched and the PettingZoo path."""
    env = {"num_agents": 2, "num_arms": 2, "horizon": 10, "topology": "complete", "price_per_message": 0.25}
    rows = [
        [
            (row["agent"], row["messages_sent"], row["cost"])
            for row in run(CrossedKinds, env, [0], checkpoints=1, batched=b).agents
        ]
        for b in (True, False)
    ]
    assert rows[0] == rows[1] == [(0, 10, 10 * 1.25), (1, 10, 10 * 0.25)]
