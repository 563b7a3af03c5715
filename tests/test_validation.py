"""The shared validation layer, and one regression test per defect of the malformed-input audit (issue 19)."""

import inspect
from typing import get_args

import gymnasium
import numpy as np
import pettingzoo
import pytest
from pettingzoo import AECEnv

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs import NEIGHBOURS, Message, MessageBatch
from fedbandit_envs.families.mab.core import MABConfig
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.families.procurement.env import (
    INSTANCE_FAMILIES,
    FedProcurementEnv,
    InstanceFamily,
    ProcurementConfig,
)
from fedbandit_envs.instances import INSTANCE_GENERATORS, InstanceName
from fedbandit_envs.registration import GYMNASIUM_ENVS, PARALLEL_ENVS
from fedbandit_envs.rewards import REWARD_MODELS, RewardModelName
from fedbandit_envs.run import run
from fedbandit_envs.validation import (
    DEFAULT_MEMORY_LIMIT,
    MEMORY_LIMIT_VARIABLE,
    MemoryLimitError,
    check_bool,
    check_choice,
    check_int,
    check_int_array,
    check_keywords,
    check_real,
    check_seeds,
    forwards_keywords,
    keyword_checked,
    memory_limit,
)

SMALL = {"num_agents": 4, "num_arms": 3, "horizon": 10}


def gossip_env():
    env = pettingzoo.make("parallel", "fedbandit/GossipMAB-v0", **SMALL)
    env.reset(seed=0)
    return env


def step_with_message(env, message_fields):
    """Step where agent 0 sends one message built from ``message_fields`` (built inside, so errors surface here)."""
    actions = {a: 0 for a in env.agents}
    actions["agent_0"] = {"arm": 0, "messages": [Message(**{"kind": "x", **message_fields})]}
    return env.step(actions)


# ---------------------------------------------------------------------------------------- the checks themselves
@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3), np.int32(3), np.array(3)])
def test_check_int_accepts_python_and_numpy_integers(value):
    number = check_int("n", value, 0)
    assert number == 3 and type(number) is int


@pytest.mark.parametrize("value", [True, False, np.bool_(True), 3.0, np.float64(3.0), "3", None, [3], np.array([3])])
def test_check_int_refuses_bools_floats_strings(value):
    with pytest.raises(TypeError, match=r"^n must be an integer"):
        check_int("n", value)


def test_check_int_bounds_default_to_int64():
    assert check_int("n", 2**63 - 1) == 2**63 - 1
    with pytest.raises(ValueError, match=r"^n must be <= 9223372036854775807, got 1180591620717411303424$"):
        check_int("n", 2**70)
    with pytest.raises(ValueError, match=r"^n must be >= -9223372036854775808"):
        check_int("n", -(2**70))
    with pytest.raises(ValueError, match=r"^n must be >= 1, got 0 \(why\)$"):
        check_int("n", 0, 1, hint=" (why)")


def test_check_real():
    assert check_real("x", 2) == 2.0 and check_real("x", np.float32(0.5)) == 0.5
    assert check_real("x", float("inf"), finite=False) == float("inf")
    for bad in (True, "1", None, [1.0]):
        with pytest.raises(TypeError, match=r"^x must be a real number"):
            check_real("x", bad)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^x must be a finite number"):
            check_real("x", bad)
    with pytest.raises(ValueError, match=r"^x must be > 0.0, got 0.0$"):
        check_real("x", 0, 0.0, exclusive_minimum=True)
    with pytest.raises(ValueError, match=r"^x must be <= 1.0, got 1.5$"):
        check_real("x", 1.5, 0.0, 1.0)


def test_check_bool():
    assert check_bool("flag", np.bool_(True)) is True
    for bad in (1, 0, "yes", None):
        with pytest.raises(TypeError, match=r"^flag must be True or False"):
            check_bool("flag", bad)


def test_check_choice_suggests_the_closest_option():
    assert check_choice("mode", "ring", ("ring", "path")) == "ring"
    with pytest.raises(ValueError, match=r"^mode must be one of 'ring', 'path', got 'rign' \(did you mean 'ring'\?\)$"):
        check_choice("mode", "rign", ("ring", "path"))
    with pytest.raises(ValueError, match=r"got 'zzz'$"):
        check_choice("mode", "zzz", ("ring", "path"))
    with pytest.raises(TypeError, match=r"^mode must be one of 'ring', 'path', got array"):
        check_choice("mode", np.zeros(2), ("ring", "path"))


def test_check_keywords_and_keyword_checked():
    check_keywords("f", ["alpha"], ["alpha", "beta"])
    with pytest.raises(TypeError, match=r"^f got an unexpected keyword argument 'alpah' \(did you mean 'alpha'\?\)"):
        check_keywords("f", ["alpah"], ["alpha", "beta"])

    @keyword_checked
    class Thing:
        def __init__(self, size: int = 1, *, colour: str = "red") -> None:
            self.size, self.colour = size, colour

    assert Thing(2, colour="blue").colour == "blue"
    with pytest.raises(TypeError, match=r"^Thing got an unexpected keyword argument 'color' \(did you mean 'colour'"):
        Thing(color="blue")


def test_forwards_keywords_shows_the_targets_keywords_and_keyword_checked_reads_them():
    def channel(price: float = 1.0, latency: int = 0) -> None:
        """A target with positional-or-keyword defaults."""

    class Base:
        def _setup(self, source: int, *, inbox: str = "messages", **more: float) -> None:
            self.source, self.inbox, self.more = source, inbox, more

    @keyword_checked
    class Thing(Base):
        @forwards_keywords(channel, Base._setup)
        def __init__(self, size: int = 1, **options: float) -> None:
            self._setup(size, **options)

    parameters = inspect.signature(Thing).parameters.values()
    assert [(p.name, p.kind.name, p.default) for p in parameters] == [
        ("size", "POSITIONAL_OR_KEYWORD", 1),
        ("price", "KEYWORD_ONLY", 1.0),
        ("latency", "KEYWORD_ONLY", 0),
        ("inbox", "KEYWORD_ONLY", "messages"),
    ]
    thing = Thing(2, price=3.0, inbox="batches")
    assert (thing.source, thing.inbox, thing.more) == (2, "batches", {"price": 3.0})
    with pytest.raises(TypeError, match=r"^Thing got an unexpected keyword argument 'latncy' \(did you mean 'latency'"):
        Thing(latncy=1)


def test_check_int_array_is_vectorised_and_strict():
    given = np.array([1, 2], np.int64)
    assert check_int_array("ids", given, 0) is not None
    assert check_int_array("ids", [np.int32(1), 2], 0).dtype == np.int64
    assert check_int_array("ids", [], 0).shape == (0,)
    for bad, error in (([1.5], TypeError), ([True], TypeError), (["1"], TypeError), ([2**70], ValueError)):
        with pytest.raises(error, match="ids"):
            check_int_array("ids", bad, 0)
    with pytest.raises(ValueError, match=r"^ids must be >= 0 for every row, got -1$"):
        check_int_array("ids", np.array([3, -1]), 0)
    with pytest.raises(ValueError, match=r"^ids must be <= 9223372036854775807 for every row"):
        check_int_array("ids", np.array([2**64 - 1], np.uint64), 0)


def test_memory_limit_variable(monkeypatch):
    monkeypatch.delenv(MEMORY_LIMIT_VARIABLE, raising=False)
    assert memory_limit() == DEFAULT_MEMORY_LIMIT
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "0.5")
    assert memory_limit() == 2**29
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "lots")
    with pytest.raises(ValueError, match=MEMORY_LIMIT_VARIABLE):
        memory_limit()


# ---------------------------------------------------------------------------------------- 31 internal errors
def test_huge_arm_is_a_clear_error_not_an_overflow():
    env = gossip_env()
    with pytest.raises(ValueError, match=r"^an arm must be <= 9223372036854775807"):
        env.step({a: 2**70 for a in env.agents})


@pytest.mark.parametrize(("field", "maximum"), [("recipient", 2**63 - 1), ("count", 2**24), ("sender", 2**63 - 1)])
def test_huge_message_field_is_a_clear_error_not_an_overflow(field, maximum):
    fields = {"sender": 0, "recipient": 1, field: 2**70}
    with pytest.raises(ValueError, match=rf"^Message\.{field} must be <= {maximum}"):
        step_with_message(gossip_env(), fields)


def test_string_cost_of_a_client_view_names_c1():
    with pytest.raises(TypeError, match=r"^c1 must be a real number, got '1' \(str\)"):
        gymnasium.make(
            "fedbandit/FederatedClient-v0", **GYMNASIUM_ENVS["fedbandit/FederatedClient-v0"].test_kwargs, c1="1"
        )


@pytest.mark.parametrize("env_id", ["fedbandit/SingleAggregator-v0", "fedbandit/ProcurementClient-v0"])
def test_array_instance_of_a_procurement_view_names_instance(env_id):
    with pytest.raises(TypeError, match=r"^instance must be a family name \(normal, stress, uniform\)"):
        gymnasium.make(env_id, **{**GYMNASIUM_ENVS[env_id].test_kwargs, "instance": np.zeros(3)})


# ---------------------------------------------------------------------------------------- 23 silent acceptances
@pytest.mark.parametrize("recipient", [1.5, "1", True, np.float64(1.0)])
def test_non_integer_recipient_is_refused(recipient):
    env = gossip_env()
    with pytest.raises(TypeError, match=r"^Message\.recipient must be an integer"):
        step_with_message(env, {"sender": 0, "recipient": recipient})
    assert env.core.slot == 0 and env.ledger.totals()["messages"] == 0


@pytest.mark.parametrize("sender", [0.0, False])
def test_non_integer_sender_is_refused(sender):
    with pytest.raises(TypeError, match=r"^Message\.sender must be an integer"):
        step_with_message(gossip_env(), {"sender": sender, "recipient": 1})


@pytest.mark.parametrize("count", [1.5, "2", True])
def test_non_integer_count_is_refused(count):
    with pytest.raises(TypeError, match=r"^Message\.count must be an integer"):
        Message(0, 1, "x", count=count)


@pytest.mark.parametrize(
    ("field", "values", "error"),
    [
        ("recipient", [1.5, 1.0], TypeError),
        ("sender", [True, False], TypeError),
        ("count", [1.5, 2.0], TypeError),
        ("recipient", [2**70, 1], ValueError),
    ],
)
def test_non_integer_batch_headers_are_refused(field, values, error):
    headers = {"replica": [0, 0], "sender": [0, 1], "recipient": [1, 0]}
    headers[field] = values
    with pytest.raises(error, match=rf"MessageBatch\.{field}"):
        MessageBatch("x", payload={}, **headers)


def test_numpy_integer_message_fields_are_delivered_as_ints():
    env = gossip_env()
    neighbour = int(env.topology.neighbours(0)[0])
    observations, *_ = step_with_message(env, {"sender": np.int64(0), "recipient": np.int32(neighbour)})
    (delivered,) = observations[f"agent_{neighbour}"]["inbox"]
    assert type(delivered.sender) is int and delivered.sender == 0 and delivered.recipient == neighbour


@pytest.mark.parametrize(
    ("field", "value"), [("horizon", 1.5), ("horizon", "10"), ("num_arms", 2.5), ("dimension", 2.5)]
)
def test_replay_stand_in_sizes_must_be_integers(field, value):
    kwargs = {**PARALLEL_ENVS["fedbandit/ReplayStandIn-v0"].test_kwargs, field: value}
    with pytest.raises(TypeError, match=rf"^{field} must be an integer"):
        pettingzoo.make("parallel", "fedbandit/ReplayStandIn-v0", **kwargs)


# ---------------------------------------------------------------------------------------- sizes, names, seeds, AEC
def test_enormous_population_is_refused_before_any_allocation():
    with pytest.raises(MemoryLimitError, match=r"would need about .* GiB of memory \(agent-graph matrices") as error:
        pettingzoo.make("parallel", "fedbandit/FederatedMAB-v0", num_agents=10**12, num_arms=3, horizon=10)
    assert MEMORY_LIMIT_VARIABLE in str(error.value) and isinstance(error.value, ValueError)


def test_memory_limit_can_be_raised(monkeypatch):
    config = {"num_agents": 200, "num_arms": 3, "horizon": 5, "topology": "complete"}
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "0.001")  # about 1 MB: 201^2 x 174 B does not fit
    with pytest.raises(MemoryLimitError, match="above the limit of 0.001 GiB"):
        MABConfig(**config)
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "1")
    assert MABConfig(**config).num_agents == 200


def test_replicas_count_in_the_memory_estimate(monkeypatch):
    env = FederatedMAB(num_agents=50, num_arms=3, horizon=5)
    parts = env.config.memory_parts(1)
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, str(1.5 * sum(parts.values()) / 2**30))
    env.core.reset([0])
    with pytest.raises(MemoryLimitError, match="^2 replicas of 50 agents"):
        env.core.reset([0, 1])


def test_mistyped_topology_fails_at_make_with_a_suggestion():
    with pytest.raises(ValueError, match=r"^topology must be one of .*got 'rign' \(did you mean 'ring'\?\)$"):
        pettingzoo.make("parallel", "fedbandit/FederatedMAB-v0", topology="rign")


def test_bad_topology_parameters_fail_at_construction():
    with pytest.raises(TypeError, match=r"did you mean 'degree'"):
        FederatedMAB(num_agents=6, topology="regular", topology_params={"degre": 2})
    with pytest.raises(TypeError, match=r"^topology 'star' got an unexpected keyword argument 'center'"):  # once
        FederatedMAB(num_agents=6, topology="star", topology_params={"center": 2})
    with pytest.raises(ValueError, match=r"num_agents \* degree must be even"):
        FederatedMAB(num_agents=5, topology="regular", topology_params={"degree": 3})
    with pytest.raises(ValueError, match=r"^topology 'ring': num_agents must be >= 3, got 2 \(a ring needs 3 agents"):
        FederatedMAB(num_agents=2, topology="ring")


def test_bad_instance_fails_at_construction():
    with pytest.raises(TypeError, match=r"did you mean 'h_max'"):
        FederatedMAB(num_agents=3, instance="heterogeneous", instance_params={"hmax": 0.1})
    with pytest.raises(ValueError, match=r"did you mean 'uniform'"):
        FederatedMAB(num_agents=3, instance="unifrom")
    with pytest.raises(ValueError, match=r"instance means have shape \(4,\)"):
        FederatedMAB(num_agents=3, num_arms=3, instance=np.zeros(4))


GOSSIP_GRAPH = r"^gossip activation needs a connected agent graph with at least one edge"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"instance": [0.1, 1.5, 0.3]}, r"^means must lie in \[0.0, 1.0\] for the bernoulli reward model, found 1.5"),
        ({"instance": [-0.2, 0.5, 0.3], "reward_model": "beta"}, r"^means must lie in .* beta reward model, found -0"),
        ({"gossip": "uniform_edge"}, GOSSIP_GRAPH),  # the default "server" topology has no agent-agent edge
        ({"num_agents": 1, "topology": "complete", "gossip": "uniform_edge"}, GOSSIP_GRAPH),
        ({"topology": np.zeros((3, 3), bool), "gossip": "node_then_neighbour"}, GOSSIP_GRAPH),
    ],
)
def test_what_reset_would_refuse_fails_at_construction(kwargs, message):
    # fixed means outside the reward model's support and gossip on a fixed graph without edges: the message reset
    # gives, at construction
    with pytest.raises(ValueError, match=message):
        FederatedMAB(**{"num_agents": 3, "num_arms": 3, **kwargs})


@pytest.mark.parametrize(
    ("env_id", "typo", "suggestion"),
    [
        ("fedbandit/FederatedMAB-v0", "num_agent", "num_agents"),
        ("fedbandit/Procurement-v0", "num_producer", "num_producers"),
        ("fedbandit/FederatedLinear-v0", "dimensions", "dimension"),
        ("fedbandit/ReplayStandIn-v0", "events_scal", "events_scale"),
    ],
)
def test_wrong_keyword_gets_did_you_mean(env_id, typo, suggestion):
    with pytest.raises(TypeError, match=rf"unexpected keyword argument '{typo}' \(did you mean '{suggestion}'\?\)"):
        pettingzoo.make("parallel", env_id, **{typo: 3})


def test_wrong_keyword_of_a_view_gets_did_you_mean():
    with pytest.raises(TypeError, match=r"'num_arm' \(did you mean 'num_arms'\?\)"):
        gymnasium.make("fedbandit/LocalBandit-v0", num_arm=3)


def test_run_with_an_int_for_seeds_says_how_to_pass_seeds():
    with pytest.raises(TypeError, match=r"^seeds must be a sequence of seeds .* pass seeds=range\(n\)"):
        run("full_sharing_ucb", SMALL, seeds=3)
    with pytest.raises(TypeError, match=r"^seeds\[1\] must be an integer"):
        check_seeds([0, 1.5])
    with pytest.raises(ValueError, match=r"^seeds must not be empty"):
        check_seeds([])


@pytest.mark.parametrize(
    "env_id", ["fedbandit/GossipMAB-v0", "fedbandit/Procurement-v0", "fedbandit/FederatedLinear-v0"]
)
def test_aec_form_plays_the_same_slots_as_the_parallel_form(env_id):
    kwargs = PARALLEL_ENVS[env_id].test_kwargs
    aec = pettingzoo.make("aec", env_id, **kwargs)
    parallel = pettingzoo.make("parallel", env_id, **kwargs)
    assert isinstance(aec, AECEnv)
    aec.reset(seed=5)
    parallel.reset(seed=5)
    for i, agent in enumerate(parallel.possible_agents):
        parallel.action_space(agent).seed(i)
    for _ in range(3):
        actions = {a: parallel.action_space(a).sample() for a in parallel.agents}
        _, rewards, *_ = parallel.step(actions)
        for agent in list(aec.agents):
            aec.step(actions[agent])
        assert {a: aec.rewards[a] for a in rewards} == rewards


def test_a_rejected_message_does_not_reach_the_ledger():
    env = gossip_env()
    with pytest.raises(ValueError, match="not linked"):
        step_with_message(env, {"sender": 0, "recipient": 2})  # ring of 4: agent 0 is linked to 1 and 3
    assert env.core.slot == 0 and env.ledger.totals()["messages"] == 0
    observations, *_ = step_with_message(env, {"sender": 0, "recipient": NEIGHBOURS})
    assert env.ledger.totals()["messages"] == 2
    assert [m.sender for m in observations["agent_1"]["inbox"]] == [0]


def test_literal_option_types_list_exactly_the_accepted_names():
    assert set(get_args(RewardModelName)) == set(REWARD_MODELS)
    assert set(get_args(InstanceName)) == set(INSTANCE_GENERATORS)
    assert set(get_args(InstanceFamily)) == set(INSTANCE_FAMILIES)


def test_procurement_config_is_the_environments_problem():
    config = ProcurementConfig(3, 4, 20, instance_params={"max_capacity": 5}, instance_seed=7)
    env = FedProcurementEnv(3, 4, 20, instance_params={"max_capacity": 5}, instance_seed=7)
    assert env.config == config and np.array_equal(env.problem.costs, config.problem.costs)
    with pytest.raises(TypeError, match=r"^horizon must be an integer"):
        ProcurementConfig(horizon=2.5)
    with pytest.raises(ValueError, match=r"did you mean 'normal'"):
        ProcurementConfig(instance="normall")
