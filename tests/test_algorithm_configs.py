"""The typed algorithm configurations (issue 19): one checked frozen dataclass per registered algorithm.

The registry checks the keywords of ``make_algorithm`` and of the scenarios through them; the CLI refuses a
bad algorithm keyword of a sweep before anything is written; the documentation lists every field.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Any, get_args

import gymnasium
import numpy as np
import pettingzoo
import pytest

import fedbandit_envs  # noqa: F401  (registers the ids)
from agents import li_wang, solanki, solanki_config, zhu
from agents.li_song import CDPMAB, DDPMAB
from fedbandit_envs.algorithms import (
    check_algorithm_options,
    config_field_docs,
    make_algorithm,
    options_markdown,
    registered_algorithms,
)
from fedbandit_envs.bench.jobs import resolve_scenario
from fedbandit_envs.bench.scenarios import AlgorithmSpec, Scenario
from fedbandit_envs.bench.sweep import run_sweep
from fedbandit_envs.cli import main
from fedbandit_envs.families.linear import replay
from fedbandit_envs.families.linear.replay import StandInSource
from fedbandit_envs.families.mab.core import MABConfig
from fedbandit_envs.families.mab.env import FederatedMAB
from fedbandit_envs.families.procurement.oracles import ORACLES
from fedbandit_envs.privacy.mechanisms import BinaryTreeMechanism
from fedbandit_envs.run import run
from fedbandit_envs.validation import (
    MEMORY_LIMIT_VARIABLE,
    CheckedConfig,
    MemoryLimitError,
    RealBounds,
    check_real_array,
    option,
)

#: The reference agents (other test modules may register algorithms of their own).
ALGORITHMS = {
    name: spec for name, spec in registered_algorithms().items() if spec.factory.__module__.startswith("agents.")
}
NAMES = sorted(ALGORITHMS)
DOCS = Path(__file__).resolve().parents[1] / "docs"


def typed_keywords(name: str) -> list[str]:
    """The keywords of ``name`` whose annotation is checked (not ``Any``)."""
    spec = ALGORITHMS[name]
    hints = typing.get_type_hints(spec.config)
    return [keyword for keyword in spec.keywords() if hints[keyword] is not Any]


# ---------------------------------------------------------------------------------------- the configs
@pytest.mark.parametrize("name", NAMES)
def test_every_algorithm_has_a_frozen_checked_config_with_documented_fields(name):
    spec = ALGORITHMS[name]
    assert spec.config is not None and issubclass(spec.config, CheckedConfig)
    assert spec.config.__dataclass_params__.frozen
    config = spec.check_options({})
    fields = {entry.name for entry in dataclasses.fields(spec.config)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.epsilon = 1.0
    assert set(spec.keywords()) <= fields
    docs = config_field_docs(spec.config)
    assert all(docs.get(keyword, "").strip() for keyword in spec.keywords()), sorted(set(spec.keywords()) - set(docs))


@pytest.mark.parametrize("name", NAMES)
def test_the_constructor_defaults_are_valid_configs(name):
    spec = ALGORITHMS[name]
    defaults = spec.defaults()
    assert set(defaults) == set(spec.keywords())
    spec.check_options(defaults)
    make_algorithm(name, **defaults)


@pytest.mark.parametrize("name", NAMES)
def test_a_keyword_of_the_wrong_type_is_refused_by_name(name):
    for keyword in typed_keywords(name):
        with pytest.raises(TypeError, match=rf"^{keyword}\b"):
            make_algorithm(name, **{keyword: object()})


@pytest.mark.parametrize("name", [name for name in NAMES if ALGORITHMS[name].keywords()])
def test_an_unknown_keyword_gets_a_did_you_mean(name):
    keyword = ALGORITHMS[name].keywords()[0]
    with pytest.raises(TypeError, match=rf"unexpected keyword argument '{keyword}x' \(did you mean '{keyword}'\?\)"):
        make_algorithm(name, **{f"{keyword}x": 1})


def test_a_baseline_takes_no_keywords():
    with pytest.raises(TypeError, match="random got an unexpected keyword argument 'seed'; it takes no keywords"):
        make_algorithm("random", seed=3)


@pytest.mark.parametrize(
    ("name", "options", "error", "pattern"),
    [
        ("dubey_cooperative_ucb", {"gamma": 1.5}, TypeError, "gamma must be an integer"),
        ("dubey_cooperative_ucb", {"gamma": True}, TypeError, "gamma must be an integer"),
        ("dubey_cooperative_ucb", {"gamma": -1}, ValueError, "gamma must be >= 0"),
        ("dubey_byzantine_ucb", {"eps_alg": 0.5}, ValueError, "eps_alg must be < 0.5"),
        ("dubey_byzantine_ucb", {"estimator": "prasad_shortest"}, ValueError, "mean 'prasad_shortest_interval'"),
        ("dubey_private_ucb", {"strict_dp": 1}, TypeError, "strict_dp must be True or False"),
        ("dubey_dp_ucb_int", {"dp_eps": 0.0}, ValueError, "dp_eps must be > 0"),
        ("fed_ucb", {"epsilon": 0}, ValueError, "epsilon must be > 0"),
        ("fed_ucb", {"clip_for_dp": (1.0, 0.0)}, ValueError, "clip_for_dp must be"),
        ("fed_ucb", {"profile": "paper_litteral"}, ValueError, "did you mean 'paper_literal'"),
        ("gossip_ucb", {"alpha1": float("inf")}, ValueError, "alpha1 must be a finite number"),
        ("cdp_mab", {"rounds": 2.0}, TypeError, "rounds must be an integer"),
        ("cdp_mab", {"delta_schedule_base": 1.0}, ValueError, "delta_schedule_base must be < 1"),
        ("cdp_mab", {"delta_schedule_base": "orcale"}, ValueError, "did you mean 'oracle'"),
        ("hdp_mab", {"first_hop_free": "yes"}, TypeError, "first_hop_free must be True or False"),
        ("async_linucb", {"alpha_mode": "theroy"}, ValueError, "did you mean 'theory'"),
        ("async_linucb_am", {"n_am": 2.5}, TypeError, "n_am must be an integer"),
        ("sync_linucb", {"threshold": "paper"}, ValueError, "threshold must be one of"),
        ("solanki_pfcb", {"t_lo": 200.0}, TypeError, "t_lo must be an integer"),
        ("solanki_pfcb", {"noise": "wrap"}, ValueError, "did you mean 'wrapper'"),
        ("solanki_fcb", {"noise": True}, ValueError, "noise must be one of False"),
        ("solanki_nf", {"explore_rounds": 0}, ValueError, "explore_rounds must be >= 1"),
        ("solanki_nf", {"oracle": "greed"}, ValueError, "did you mean 'greedy'"),
    ],
)
def test_bad_values_are_refused_naming_the_field(name, options, error, pattern):
    with pytest.raises(error, match=pattern):
        make_algorithm(name, **options)


def test_configured_algorithms_apply_their_fixed_values_and_refuse_the_others():
    assert ALGORITHMS["ddp_mab"].check_options({}).noise == "agent"  # DDP-MAB fixes agent noise
    assert "noise" not in ALGORITHMS["ddp_mab"].keywords()
    with pytest.raises(TypeError, match="DDPMAB got an unexpected keyword argument 'noise'"):
        DDPMAB(noise="agent")
    assert make_algorithm("cdp_mab", rounds=3).config == CDPMAB(rounds=3).config
    assert make_algorithm("fed_ucb", epsilon=2).config == zhu.FedUCBConfig(epsilon=2)


def test_the_literal_options_agree_with_the_modules_constants():
    # (Dubey's and Solanki's other option tuples are read from their config's Literal types)
    assert set(get_args(solanki_config.Preset)) == set(solanki.PRESETS)
    assert set(get_args(solanki_config.OracleName)) == set(ORACLES)
    assert get_args(zhu.EpsilonSplit) == BinaryTreeMechanism.SPLITS
    assert set(get_args(zhu.ProfileName)) == set(zhu.PROFILES)
    assert get_args(li_wang.SyncPreset) == li_wang.SYNC_PRESETS


# ---------------------------------------------------------------------------------------- scenarios and the CLI
def test_a_registered_algorithm_spec_is_checked_when_built():
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        AlgorithmSpec("fed_ucb", {"epsilon": -1.0})
    with pytest.raises(TypeError, match="did you mean 'epsilon'"):
        AlgorithmSpec("fed_ucb", {"epsilonn": 1.0})
    assert AlgorithmSpec("fed_ucb", {"epsilon": 2.0}).kwargs == {"epsilon": 2.0}


def test_a_scenario_checks_every_algorithm_at_every_sweep_point():
    algorithms = {"fed": AlgorithmSpec("fed_ucb"), "gossip": AlgorithmSpec("gossip_ucb")}
    with pytest.raises(ValueError, match=r"algorithm 'fed' of scenario 't/x' with alg\.epsilon=0: epsilon must be > 0"):
        Scenario("t/x", "t", "", {}, {"fed": algorithms["fed"]}, sweep={"alg.epsilon": [1, 0]})
    with pytest.raises(
        TypeError, match="algorithm 'gossip' .* gossip_ucb got an unexpected keyword argument 'epsilon'"
    ):
        Scenario("t/x", "t", "", {}, algorithms, sweep={"alg.epsilon": [1]})


def test_a_path_spec_is_checked_before_a_sweep_writes_anything(tmp_path):
    spec = AlgorithmSpec("agents.zhu:FedUCB", {"epsilon": "1"})  # not imported when built
    scenario = Scenario("t/path", "t", "", {"num_agents": 3}, {"fed": spec})
    with pytest.raises(TypeError, match="algorithm 'fed' of scenario 't/path': epsilon must be a real number"):
        run_sweep(scenario, tmp_path / "out", backend="inprocess")
    assert not (tmp_path / "out").exists()


def test_a_sweep_override_of_an_algorithm_keyword_is_checked_at_resolution():
    with pytest.raises(ValueError, match=r"with alg\.epsilon=-1: epsilon must be > 0"):
        resolve_scenario("zhu/sa_epsilon", overrides={"sweep": {"alg.epsilon": [-1]}})


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ('{"alg.epsilon": [1, -2]}', "epsilon must be > 0.0, got -2.0"),
        ('{"alg.epsilon": ["abc"]}', "epsilon must be a real number"),
        ('{"alg.epsilon": [[]]}', "epsilon must be a real number"),
        ('{"alg.epsilonn": [1]}', "(did you mean 'epsilon'?)"),
    ],
)
def test_cli_refuses_a_bad_algorithm_keyword_before_writing(sweep, message, dry_run, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["sweep", "zhu/sa_epsilon", "--out", str(out), "--backend", "inprocess", "--no-progress"]
    code = main([*argv, "--set", f"sweep={sweep}", *(["--dry-run"] if dry_run else [])])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("fedbandit sweep: error: algorithm 'fed_ucb'"), err
    assert message in err
    assert not out.exists()


# ---------------------------------------------------------------------------------------- docs
def test_the_options_page_lists_every_field_of_every_algorithm():
    page = (DOCS / "reference" / "algorithm-options.md").read_text()
    assert "<!-- fedbandit-algorithm-options -->" in page
    markdown = options_markdown()
    for name, spec in ALGORITHMS.items():
        section = markdown.split(f"## `{name}`\n", 1)[1].split("\n## ", 1)[0]
        for keyword in spec.keywords():
            assert f"| `{keyword}` |" in section, (name, keyword)
        assert section.count("\n| `") == len(spec.keywords())


def test_check_algorithm_options_of_an_unregistered_factory_checks_nothing():
    class Mine:
        def __init__(self, anything: int = 0) -> None:
            self.anything = anything

    assert check_algorithm_options(Mine, {"anything": "x"}) is None
    assert make_algorithm(Mine, anything="x").anything == "x"


# ---------------------------------------------------------------------------------------- the smaller leftovers
@pytest.mark.parametrize(
    ("options", "error", "pattern"),
    [
        ({"horizon": 1.5}, TypeError, "horizon must be an integer"),
        ({"horizon": "10"}, TypeError, "horizon must be an integer"),
        ({"num_arms": 2.5}, TypeError, "num_arms must be an integer"),
        ({"dimension": 2.5}, TypeError, "dimension must be an integer"),
        (
            {"num_arms": 30, "catalogue_size": 20},
            ValueError,
            r"num_arms must be <= 20, got 30 \(at most catalogue_size",
        ),
        ({"profile": "lastfn"}, ValueError, "did you mean 'lastfm'"),
        ({"order": "files"}, ValueError, "did you mean 'file'"),
        ({"rho": 1.5}, ValueError, "rho must be <= 1.0"),
        ({"instance_seed": -1}, ValueError, "instance_seed must be >= 0"),
    ],
)
def test_the_stand_in_source_is_a_checked_frozen_dataclass(options, error, pattern):
    with pytest.raises(error, match=pattern):
        StandInSource(**{"num_users": 5, "events_scale": 0.001, **options})


def test_the_stand_in_source_holds_the_values_in_use():
    source = StandInSource("movielens", num_users=4, events_scale=0.001, num_arms=5, dimension=3)
    assert dataclasses.is_dataclass(source) and source.dataset is replay.PROFILES["movielens"]
    assert (source.num_agents, source.num_arms, source.dimension, source.similarity) == (4, 5, 3, 0.95)
    assert (source.profile, source.rho) == ("movielens", None)  # the fields keep what was given
    assert source.horizon == int(source.user_counts.sum())  # the log's length without a horizon
    with pytest.raises(dataclasses.FrozenInstanceError):
        source.rho = 0.5
    assert set(get_args(replay.ProfileName)) == set(replay.PROFILES)
    with pytest.raises(TypeError, match="horizon must be an integer"):
        pettingzoo.make("parallel", "fedbandit/ReplayStandIn-v0", num_users=4, events_scale=0.3, horizon=1.5)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"instance_params": 3}, TypeError),
        ({"reward_params": [("sigma", 1.0)]}, TypeError),
        ({"topology_params": {1: 0.5}}, TypeError),
    ],
)
def test_mab_option_mappings_are_checked_once_by_the_config_with_the_same_errors(options, error):
    with pytest.raises(error) as direct:
        MABConfig(num_agents=3, num_arms=2, horizon=5, **options)
    with pytest.raises(error) as through_env:
        FederatedMAB(num_agents=3, num_arms=2, horizon=5, **options)
    assert str(through_env.value) == str(direct.value)
    if "topology_params" not in options:  # the single-agent views take the instance and reward options
        with pytest.raises(error) as through_view:
            gymnasium.make("fedbandit/LocalBandit-v0", **options)
        assert str(through_view.value).startswith(str(direct.value))


def test_federated_mab_links_to_the_config_instead_of_repeating_its_field_docs():
    doc = FederatedMAB.__doc__
    assert "MABConfig" in doc
    assert "M >= 1" not in doc and "common random numbers" not in doc


def test_single_aggregator_checks_the_peer_keywords_by_name_even_when_alone():
    with pytest.raises(TypeError, match=r"peer_params of peer_algorithm='pfcb': .*did you mean 'epsilon'"):
        gymnasium.make("fedbandit/ProcurementClient-v0", peer_params={"epsilonn": 0.5})
    with pytest.raises(ValueError, match="peer_params of peer_algorithm='fcb': t_lo must be >= 1"):
        gymnasium.make("fedbandit/SingleAggregator-v0", num_agents=1, peer_algorithm="fcb", peer_params={"t_lo": 0})
    env = gymnasium.make("fedbandit/ProcurementClient-v0", peer_params={"epsilon": 0.5, "t_lo": 16})
    assert env.unwrapped.population.epsilon == 0.5


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize(
    ("algorithm", "env", "limit", "pattern"),
    [
        (
            "gossip_ucb",
            {
                "env": "mab",
                "num_agents": 400,
                "num_arms": 10,
                "horizon": 20,
                "topology": "ring",
                "gossip": "uniform_edge",
            },
            "0.01",
            r"GossipUCB \(1 replica\(s\) of 400 agents\) would need about 0.012\d GiB .*received counts",
        ),
        (
            "async_linucb",
            {"env": "linear", "num_clients": 30, "dimension": 200, "horizon": 10},
            "0.01",
            r"AsyncLinUCB \(1 replica\(s\) of 30 agents\) would need about 0.035\d GiB .*client matrices",
        ),
        (
            "dubey_private_ucb",
            {"env": "mab", "num_agents": 80, "num_arms": 50, "horizon": 20, "topology": "complete"},
            "0.01",
            r"PrivateMultiAgentUCB \(1 replica\(s\) of 80 agents\) would need about 0.0154 GiB of memory "
            r"\(flooded copies of one slot, .* 0.0104 GiB, newest record per agent pair .* 0.0048 GiB",
        ),
        (
            "ddp_mab",
            {"env": "mab", "num_agents": 250, "num_arms": 5, "horizon": 20, "topology": "ring"},
            "0.01",
            r"DDPMAB \(1 replica\(s\) of 250 agents\) would need about 0.0297 GiB of memory "
            r"\(GIS request candidates of one hop .* 0.0296 GiB",
        ),
        (
            "solanki_pfcb",
            {"env": "procurement", "num_agents": 150, "num_producers": 30, "horizon": 20},
            "0.022",  # the procurement environment itself needs about 0.0204 GiB here (with its binomial guide table)
            r"PFCB \(1 replica\(s\) of 150 agents\) would need about 0.0257 GiB of memory "
            r"\(received messages and their dense tables .* 0.0251 GiB",
        ),
    ],
)
def test_agents_check_the_memory_of_their_tables_before_reset(algorithm, env, limit, pattern, batched, monkeypatch):
    # e.g. about 12 MB (N^2 M received counts) and 36 MB (4 N d^2 matrices): above a 10 MB limit, before any
    # allocation, on both run paths; the environment's own check passes at that limit
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, limit)
    with pytest.raises(MemoryLimitError, match=pattern):
        run(algorithm, env, [0], checkpoints=1, batched=batched)
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "0.05")
    assert len(run(algorithm, env, [0], checkpoints=1, batched=batched).curves) == 1


def test_cli_points_an_algorithm_keyword_set_directly_to_the_sweep(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["sweep", "zhu/sa_epsilon", "--out", str(out), "--dry-run", "--set", "alg.epsilon=3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert (
        "--set alg.epsilon: an algorithm keyword is set through the sweep, e.g. --set 'sweep={\"alg.epsilon\": [3]}'"
        in err
    )
    assert not out.exists()


# ---------------------------------------------------------------------------------------- the checker itself
@dataclasses.dataclass(frozen=True)
class Example(CheckedConfig):
    """A config with one field of each kind the checker reads.

    Attributes:
        count: an integer >= 1.
        share: a real in [0, 0.5).
        mode: a string option.
        base: a real in (0, 1) or ``"oracle"``.
        noise: a flag or ``"wrapper"``.
        clip: a pair of reals, or None.
        schedule: a callable, or None.
        age: an integer >= 0, or None.
        anything: not checked.
    """

    count: int = option(1, minimum=1)
    share: float = option(0.0, minimum=0.0, maximum=0.5, exclusive_maximum=True)
    mode: typing.Literal["random", "lowest"] = "random"
    base: float | typing.Literal["oracle"] = option(
        "oracle", minimum=0.0, maximum=1.0, exclusive_minimum=True, exclusive_maximum=True
    )
    noise: bool | typing.Literal["wrapper"] = True
    clip: tuple[float, float] | None = None
    schedule: typing.Callable[[int], bool] | None = None
    age: int | None = option(None, minimum=0)
    anything: Any = None


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"count": 1.5}, TypeError, "count must be an integer (Python or numpy int; not bool, float), got 1.5 (float)"),
        ({"count": True}, TypeError, "count must be an integer"),
        ({"count": 0}, ValueError, "count must be >= 1, got 0"),
        ({"share": 0.5}, ValueError, "share must be < 0.5, got 0.5"),
        ({"share": float("nan")}, ValueError, "share must be a finite number, got nan"),
        ({"mode": "rand"}, ValueError, "mode must be one of 'random', 'lowest', got 'rand' (did you mean 'random'?)"),
        ({"mode": 1}, TypeError, "mode must be one of 'random', 'lowest', got 1 (int)"),
        ({"base": "orcale"}, ValueError, "base must be one of 'oracle', got 'orcale' (did you mean 'oracle'?)"),
        ({"base": 1.0}, ValueError, "base must be < 1.0, got 1.0"),
        ({"base": None}, TypeError, "base must be a real number or 'oracle', got None (NoneType)"),
        ({"noise": 1}, TypeError, "noise must be True or False or 'wrapper', got 1 (int)"),
        ({"clip": (0.0,)}, ValueError, "clip must have 2 entries, got 1: (0.0,)"),
        ({"clip": (0.0, "a")}, TypeError, "clip[1] must be a real number"),
        ({"schedule": 3}, TypeError, "schedule must be callable, got 3 (int)"),
        ({"age": -1}, ValueError, "age must be >= 0, got -1"),
    ],
)
def test_checked_config_checks_every_field_by_its_annotation(options, error, message):
    with pytest.raises(error) as raised:
        Example(**options)
    assert str(raised.value).startswith(message)


def test_checked_config_accepts_numpy_numbers_and_leaves_any_alone():
    accepted = Example(count=np.int64(3), share=np.float32(0.25), base=0.5, noise="wrapper", clip=[0, 1], anything=[])
    assert accepted.count == 3 and accepted.anything == []
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'cont' \(did you mean 'count'\?\)"):
        Example.from_options("Example", {"cont": 2})
    assert config_field_docs(Example)["schedule"] == "a callable, or None."


def test_checked_config_keeps_the_checked_python_int_of_an_integer_field():
    # a numpy integer kept as given would overflow its type in sizes computed from it (200 * 2 in uint8 is 144)
    config = Example(count=np.uint8(200), age=np.int32(7))
    assert type(config.count) is int and type(config.age) is int
    assert config.count * 2 == 400


@dataclasses.dataclass(frozen=True)
class LiteralNumbers(CheckedConfig):
    """Literal options that are not strings.

    Attributes:
        exact: fixed to False.
        level: 1 or 2.
    """

    exact: typing.Literal[False] = False
    level: typing.Literal[1, 2] = 1


def test_literal_options_take_numpy_bools_and_integers_as_python_ones():
    assert LiteralNumbers(exact=np.False_, level=np.int64(2)).level == 2
    with pytest.raises(ValueError, match=r"^exact must be one of False, got np.True_"):
        LiteralNumbers(exact=np.True_)
    with pytest.raises(TypeError, match=r"^exact must be one of False, got 0 \(int\)"):
        LiteralNumbers(exact=0)
    with pytest.raises(TypeError, match=r"^level must be one of 1, 2, got True \(bool\)"):
        LiteralNumbers(level=True)
    with pytest.raises(ValueError, match=r"^level must be one of 1, 2, got np.int64\(3\)"):
        LiteralNumbers(level=np.int64(3))


def test_option_takes_the_bounds_of_check_real_and_names_an_unknown_one():
    assert [name for name in inspect.signature(option).parameters][2:] == list(RealBounds.__annotations__)
    with pytest.raises(TypeError, match=r"^option got an unexpected keyword argument 'minimun' \(did you mean 'min"):
        option(1, minimun=1)


def test_real_arrays_are_checked_by_name():
    assert check_real_array("gamma", [1, 2.5]).dtype == np.float64
    for bad in ([True, False], ["a"], {"a": 1}, [[1.0], [1.0, 2.0]]):
        with pytest.raises(TypeError, match="gamma must be a number or an array of numbers"):
            check_real_array("gamma", bad)
