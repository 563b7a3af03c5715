"""Property-based fuzzing of every registered id with malformed constructor arguments, actions and messages.

Properties (issue 19):

* a malformed keyword of a registered algorithm raises ``ValueError`` or ``TypeError`` naming it, before
  construction (``make_algorithm`` checks it through the algorithm's config), and direct construction refuses
  the same keywords with the same error; a keyword both accept plays a few slots on a small environment of a
  family the algorithm supports, where the only error allowed is a ``ValueError``/``TypeError`` naming it;

* a malformed constructor argument raises ``ValueError`` or ``TypeError`` (or a documented subclass such as
  ``MemoryLimitError``) whose message names the argument, at construction; a construction that succeeds
  also resets;
* a malformed step raises ``ValueError`` or ``TypeError`` whose message names what is wrong, and afterwards
  the environment behaves exactly as a twin that never saw the bad step (same observations, rewards,
  terminations, truncations and infos, slot after slot).

Examples are bounded (``max_examples`` below, ``deadline=None``) so the module stays well under a minute.
"""

from __future__ import annotations

import inspect
import typing
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import pettingzoo
import pytest
from gymnasium.utils.env_checker import data_equivalence
from hypothesis import given, settings
from hypothesis import strategies as st
from property_settings import reproducible

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs import SERVER, Message
from fedbandit_envs.algorithms import make_algorithm, registered_algorithms
from fedbandit_envs.families.linear import FederatedLinear
from fedbandit_envs.hybrid import hybrid_topology
from fedbandit_envs.registration import GYMNASIUM_ENVS, PARALLEL_ENVS
from fedbandit_envs.run import run
from fedbandit_envs.validation import MemoryLimitError

PARALLEL_IDS = sorted(PARALLEL_ENVS)
GYMNASIUM_IDS = sorted(GYMNASIUM_ENVS)

#: Examples per id and property (10 parallel + 5 Gymnasium ids).
CONSTRUCTOR_EXAMPLES = 30
STEP_EXAMPLES = 20
FUZZ = reproducible(CONSTRUCTOR_EXAMPLES)

#: Values that are wrong for most arguments: wrong types, out-of-range and non-finite numbers, containers.
BAD_VALUES = st.sampled_from(
    [
        2**70,
        -(2**70),
        -1,
        0,
        10**12,
        1.5,
        -0.5,
        float("nan"),
        float("inf"),
        "1",
        "rign",
        "",
        True,
        None,
        np.float64(2.0),
        np.array([1, 2]),
        np.zeros((2, 2)),
        [0],
        {"a": 1},
    ]
)

#: Wrong arms (or unit vectors) of one agent.
BAD_ARMS = st.sampled_from(
    [2**70, -(2**70), -1, 10**9, 1.5, "1", True, None, np.float64(1.0), [0, 1], np.array([0, 1]), {"arm": 0, "x": 1}]
)


def keywords(entry_point: str) -> list[str]:
    """The constructor keywords of an entry point (``coordinator``: an object, not fuzzed)."""
    module, name = entry_point.split(":")
    cls = getattr(__import__(module, fromlist=[name]), name)
    return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "coordinator")]


def core_message(error: BaseException) -> str:
    """The environment's own message (Gymnasium appends "was raised from the environment creator ...")."""
    return str(error).split(" was raised from the environment creator")[0]


def names_the_argument(message: str, name: str, value: Any) -> bool:
    """Whether ``message`` names ``name`` (in code or prose; for an options dict, naming its unknown option)."""
    if name in message or name.replace("_", " ") in message:
        return True
    return name.endswith("_params") and isinstance(value, dict) and all(key in message for key in value)


def build(env_id: str, **kwargs: Any) -> Any:
    """A parallel or Gymnasium environment of ``env_id`` with the id's small test keywords overridden."""
    if env_id in PARALLEL_ENVS:
        return pettingzoo.make("parallel", env_id, **{**PARALLEL_ENVS[env_id].test_kwargs, **kwargs})
    return gymnasium.make(env_id, **{**GYMNASIUM_ENVS[env_id].test_kwargs, **kwargs})


def entry_point(env_id: str) -> str:
    return (PARALLEL_ENVS.get(env_id) or GYMNASIUM_ENVS[env_id]).entry_point


# ---------------------------------------------------------------------------------------- constructors
@pytest.mark.parametrize("env_id", PARALLEL_IDS + GYMNASIUM_IDS)
@FUZZ
@given(data=st.data())
def test_malformed_constructor_argument_is_refused_by_name(env_id, data):
    names = keywords(entry_point(env_id))
    if env_id in GYMNASIUM_ENVS:  # gymnasium.make reads render_mode itself before the environment is built
        names.remove("render_mode")
    typos = [name[:-1] for name in names if len(name) > 3]
    name = data.draw(st.sampled_from(names + typos), label="keyword")
    value = data.draw(BAD_VALUES, label="value")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = build(env_id, **{name: value})
    except (ValueError, TypeError) as error:
        message = core_message(error)
        assert names_the_argument(message, name, value), f"{name}={value!r} raised {message!r}"
        return
    env.reset(seed=0)  # a configuration accepted at construction is usable: no error is left for reset


# ---------------------------------------------------------------------------------------- numpy integer sizes
@pytest.mark.parametrize("env_id", PARALLEL_IDS + GYMNASIUM_IDS)
@pytest.mark.parametrize("numpy_int", [np.uint8, np.int32, np.int64])
def test_numpy_integer_arguments_build_the_environment_of_python_ints(env_id, numpy_int):
    # the checked Python ints are what the environment keeps: same spaces, same first observation, and a
    # Gymnasium time limit that make accepts
    given = GYMNASIUM_ENVS.get(env_id) or PARALLEL_ENVS[env_id]
    numpy_kwargs = {k: numpy_int(v) if type(v) is int else v for k, v in given.test_kwargs.items()}
    plain, numpy = build(env_id), build(env_id, **numpy_kwargs)
    if env_id in GYMNASIUM_ENVS:
        assert type(numpy.spec.max_episode_steps) is int
        assert numpy.observation_space == plain.observation_space and numpy.action_space == plain.action_space
    else:
        agent = plain.possible_agents[0]
        assert numpy.possible_agents == plain.possible_agents
        assert numpy.observation_space(agent) == plain.observation_space(agent)
        assert numpy.action_space(agent) == plain.action_space(agent)
    assert data_equivalence(numpy.reset(seed=0), plain.reset(seed=0), exact=True)


@pytest.mark.parametrize(
    ("env_id", "kwargs", "check"),
    [
        (
            "fedbandit/FederatedMAB-v0",
            {"num_agents": np.uint8(100)},
            lambda env: env.state_space.shape == (300,) and env.state() in env.state_space,
        ),
        (
            "fedbandit/LinearBandit-v0",
            {"num_arms": np.uint8(20), "dimension": np.uint8(20)},
            lambda env: env.observation_space.shape == (400,) and env.reset(seed=0)[0] in env.observation_space,
        ),
        (
            "fedbandit/SingleAggregator-v0",
            {"horizon": np.uint8(255), "observation": "dict"},
            lambda env: env.observation_space["t"] == gymnasium.spaces.Discrete(256),
        ),
    ],
)
def test_sizes_computed_from_numpy_integers_do_not_overflow(env_id, kwargs, check):
    env = build(env_id, **kwargs)
    env.reset(seed=0)
    assert check(env.unwrapped)


def test_the_memory_check_of_a_numpy_catalogue_size_does_not_wrap_around():
    with pytest.raises(MemoryLimitError, match="catalogue_size"):
        build("fedbandit/ReplayStandIn-v0", catalogue_size=np.int64(2**61))


# ---------------------------------------------------------------------------------------- steps (parallel ids)
def malformed_parallel_action(env: Any, data: st.DataObject) -> tuple[dict, str]:
    """Valid actions of every live agent with one corruption; returns them and a pattern the error must match."""
    agents = list(env.agents)
    actions = {a: env.action_space(a).sample() for a in agents}
    core = env.unwrapped.core
    acting = agents
    if getattr(core, "phase", None) == "act":  # linear: only the active clients' actions are read
        acting = [env.possible_agents[i] for i in core.clients[0].tolist()]
    agent = data.draw(st.sampled_from(acting), label="agent")
    index = env.possible_agents.index(agent)
    kind = data.draw(st.sampled_from(["arm", "missing", "unknown", "message", "not a message"]), label="kind")
    messaging = env.unwrapped.pending_phase is not None
    if kind in ("arm", "missing") and messaging:
        kind = "message"  # a message-only step reads messages only; silent agents may be left out (documented)
    if kind == "missing":
        if isinstance(env.unwrapped, FederatedLinear):
            kind = "unknown"  # the linear environments accept omitted idle clients
        else:
            del actions[agent]
            return actions, "missing"
    if kind == "unknown":
        actions["agent_999"] = actions[agent]
        return actions, "unknown"
    procurement = "aggregator" in agent and not messaging
    if kind == "arm" or procurement:
        arm = data.draw(BAD_ARMS, label="arm")
        if isinstance(arm, dict):
            arm = {**arm, "arm": 0}
        actions[agent] = arm
        return actions, "arm" if not procurement else agent
    if kind == "not a message":
        bad = data.draw(st.sampled_from(["hello", {"sender": index}, 3]))
        actions[agent] = {env.unwrapped.action_key: 0, "messages": [bad]}
        return actions, "Message"
    fields = {
        "sender": data.draw(st.sampled_from([index, index + 1, 2**70, 0.0, -5, True]), label="sender"),
        "recipient": data.draw(st.sampled_from([10**6, -7, 1.5, "1", 2**70, SERVER]), label="recipient"),
        "count": data.draw(st.sampled_from([1, 0, -1, 1.5, 2**70]), label="count"),
        "payload": data.draw(st.sampled_from([{}, {"v": [np.nan]}, {"v": ["a"]}, "payload"]), label="payload"),
    }
    actions[agent] = {env.unwrapped.action_key: 0, "messages": [("message", fields)]}
    return actions, "(?i)sender|recipient|count|payload|message|send"


def with_messages_built(actions: dict) -> dict:
    """Build the Message objects described in ``actions`` (construction errors belong to the bad step)."""
    built = {}
    for agent, action in actions.items():
        if isinstance(action, dict) and isinstance(action.get("messages"), list):
            messages = [Message(kind="x", **m[1]) if isinstance(m, tuple) else m for m in action["messages"]]
            action = {**action, "messages": messages}
        built[agent] = action
    return built


def twins(env_id: str, seed: int) -> tuple[Any, Any]:
    """Two environments of ``env_id`` reset with ``seed`` (checked equal): one gets the bad steps, one does not."""
    env, twin = build(env_id), build(env_id)
    assert data_equivalence(env.reset(seed=seed), twin.reset(seed=seed), exact=True)
    return env, twin


def reject_then_compare(env: Any, twin: Any, bad: Callable[[], Any], valid: Any, pattern: str) -> None:
    """``env.step(bad())`` raises ValueError/TypeError matching ``pattern``; then a valid step equals the twin's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((ValueError, TypeError), match=pattern):
            env.step(bad())
        assert data_equivalence(env.step(valid), twin.step(valid), exact=True)


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
@settings(FUZZ, max_examples=STEP_EXAMPLES)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_rejected_parallel_step_changes_nothing(env_id, data, seed):
    env, twin = twins(env_id, seed)
    for i, agent in enumerate(env.possible_agents):
        env.action_space(agent).seed(seed + i)
    for _ in range(data.draw(st.integers(1, 4), label="steps")):
        if not env.agents:
            break
        actions, pattern = malformed_parallel_action(env, data)
        valid = {a: env.action_space(a).sample() for a in env.agents}
        reject_then_compare(env, twin, lambda actions=actions: with_messages_built(actions), valid, pattern)


# ---------------------------------------------------------------------------------------- steps (Gymnasium views)
@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
@settings(FUZZ, max_examples=STEP_EXAMPLES)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_rejected_view_step_changes_nothing(env_id, data, seed):
    env, twin = twins(env_id, seed)
    env.action_space.seed(seed)
    for _ in range(data.draw(st.integers(1, 4), label="steps")):
        bad = data.draw(BAD_ARMS, label="action")
        reject_then_compare(env, twin, lambda bad=bad: bad, env.action_space.sample(), "action|arm|unit|integer")


# ---------------------------------------------------------------------------------------- algorithm keywords
#: The reference agents (other test modules may register algorithms of their own).
ALGORITHMS = {
    name: spec for name, spec in registered_algorithms().items() if spec.factory.__module__.startswith("agents.")
}

#: Examples per registered algorithm.
ALGORITHM_EXAMPLES = 25

#: Slots an accepted configuration plays, on a small environment of a family the algorithm supports.
SLOTS = 6
SMALL_ENVS = {
    "mab": {"env": "mab", "num_agents": 4, "num_arms": 3, "horizon": SLOTS, "topology": "complete"},
    "linear": {"env": "linear", "num_clients": 3, "num_arms": 3, "dimension": 3, "horizon": SLOTS},
    "procurement": {"env": "procurement", "num_agents": 3, "num_producers": 4, "horizon": SLOTS},
}
#: The algorithms that need a particular channel or topology.
SMALL_ENV_OPTIONS = {
    "gossip_ucb": {"topology": "ring", "gossip": "uniform_edge"},
    "fed_ucb": {"topology": "ring", "gossip": "uniform_edge"},
    "cdp_mab": {"topology": "server"},
    "hdp_mab": {"topology": hybrid_topology(4, (2, 2), "complete")},
}

#: Examples per registered algorithm of the run with an accepted keyword.
RUN_EXAMPLES = 10


def small_env(algorithm: str) -> dict[str, Any]:
    """A small environment of the first family ``algorithm`` supports, with the channel or graph it needs."""
    return {**SMALL_ENVS[ALGORITHMS[algorithm].families[0]], **SMALL_ENV_OPTIONS.get(algorithm, {})}


def outcome(build: Callable[[], Any]) -> tuple[type[BaseException] | None, str]:
    """``(None, "")`` if ``build()`` succeeds, else the ValueError/TypeError class and its message."""
    try:
        build()
    except (ValueError, TypeError) as error:
        return type(error), str(error)
    return None, ""


def plays_a_few_slots(algorithm: str, name: str, value: Any) -> None:
    """``algorithm`` built with ``name=value`` plays :data:`SLOTS` slots, or raises a ValueError/TypeError naming it.

    Such an error is a setting only the environment can refute, raised at reset or at the first slot.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run(lambda: make_algorithm(algorithm, **{name: value}), small_env(algorithm), [0], checkpoints=1)
    except (ValueError, TypeError) as error:
        assert names_the_argument(str(error), name, value), f"{name}={value!r} failed in the run: {error!r}"


def literal_options(hint: Any) -> list[Any]:
    """The options of every ``Literal`` inside an annotation (``X | Literal["a"] | None`` gives ``["a"]``)."""
    if typing.get_origin(hint) is typing.Literal:
        return list(typing.get_args(hint))
    return [option for member in typing.get_args(hint) for option in literal_options(member)]


def plausible_values(spec: Any, name: str) -> list[Any]:
    """Values keyword ``name`` may well accept: its default, nearby numbers, the other flag and its options."""
    default = spec.defaults().get(name)
    values = [default]
    if isinstance(default, bool):
        values.append(not default)
    elif isinstance(default, int):
        values += [default + 1, default * 2, 0, 1]
    elif isinstance(default, float):
        values += [default * 0.5, default * 2, 0.0, 1.0]
    elif default is None:
        values += [0.5, 1, 2]
    if spec.config is not None:
        values += literal_options(typing.get_type_hints(spec.config).get(name))
    return values


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
@settings(FUZZ, max_examples=ALGORITHM_EXAMPLES)
@given(data=st.data())
def test_malformed_algorithm_keyword_is_refused_by_name(algorithm, data):
    # the registry refuses a malformed keyword by name before construction, and direct construction refuses
    # exactly the same keywords (one validation path); what both accept plays a few slots
    spec = ALGORITHMS[algorithm]
    names = list(spec.keywords())
    typos = [name[:-1] for name in names if len(name) > 3]
    name = data.draw(st.sampled_from(names + typos + ["bogus"]), label="keyword")
    value = data.draw(BAD_VALUES, label="value")
    registry = outcome(lambda: make_algorithm(algorithm, **{name: value}))
    direct = outcome(lambda: spec.factory(**{name: value}))
    assert registry[0] is direct[0], f"{name}={value!r}: make_algorithm gave {registry}, the constructor {direct}"
    if registry[0] is not None:
        assert names_the_argument(registry[1], name, value), f"{name}={value!r} raised {registry[1]!r}"
        assert names_the_argument(direct[1], name, value), f"{name}={value!r} raised {direct[1]!r}"
        if name in names:  # a bad value: the same check, the same message (an unknown keyword names its owner)
            assert registry[1] == direct[1]
    else:
        plays_a_few_slots(algorithm, name, value)


@pytest.mark.parametrize("algorithm", sorted(name for name, spec in ALGORITHMS.items() if spec.keywords()))
@settings(FUZZ, max_examples=RUN_EXAMPLES)
@given(data=st.data())
def test_accepted_algorithm_keyword_plays_a_few_slots(algorithm, data):
    # plausible values (defaults, nearby numbers, options): the paths agree, and what they accept plays a few
    # slots on a small environment of a family the algorithm supports
    spec = ALGORITHMS[algorithm]
    name = data.draw(st.sampled_from(spec.keywords()), label="keyword")
    value = data.draw(st.sampled_from(plausible_values(spec, name)), label="value")
    registry = outcome(lambda: make_algorithm(algorithm, **{name: value}))
    assert registry == outcome(lambda: spec.factory(**{name: value})), f"{name}={value!r}"
    if registry[0] is not None:
        assert names_the_argument(registry[1], name, value), f"{name}={value!r} raised {registry[1]!r}"
        return
    plays_a_few_slots(algorithm, name, value)
