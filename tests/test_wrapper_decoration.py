"""Wrappers decorate: they hand message hooks to the core per episode and never change the env they wrap.

See :mod:`wrappers.chain`: the wrapped env, run alone, is bit-identical to a never-wrapped one; two wrappers of one
env object are independent; wrappers of different kinds compose in order (the innermost first); a second wrapper of
one kind raises.
"""

from __future__ import annotations

from functools import partial

import pytest

from agents.li_song.runner import run as run_li_song
from fedbandit_envs import FederatedMAB, Message
from fedbandit_envs.algorithms import resolve_factory
from fedbandit_envs.channel.privacy import Sensitive
from fedbandit_envs.env_base import MESSAGE_HOOKS
from fedbandit_envs.families.mab.views import LocalBanditEnv
from fedbandit_envs.run import run
from wrappers import (
    ByzantineAgents,
    GaussianMessageDP,
    HookWrapper,
    LaplaceMessageDP,
    MessageDelays,
    MessageDrops,
    TreeMessageDP,
)
from wrappers.faults import PointMass

LI_SONG = {  # Li and Song's CDP-MAB: the DP wrapper noises the agents' means (and the runner binds its epsilon)
    "num_agents": 6,
    "num_arms": 4,
    "horizon": 600,
    "instance": [0.7, 0.6, 0.55, 0.3],
    "instance_seed": 4,
    "reward_tape": True,
}
RING = {"num_agents": 6, "num_arms": 3, "horizon": 60, "topology": "ring", "instance_seed": 1}
GRAPH = {**RING, "num_agents": 8, "topology": "erdos_renyi", "topology_params": {"p": 0.4}}
LINEAR = {"num_clients": 6, "num_arms": 5, "dimension": 4, "horizon": 60}
PROCUREMENT = {"env": "procurement", "num_agents": 3, "num_producers": 4, "horizon": 100, "instance_seed": 5}
SEEDS = [0, 1]

BYZANTINE_UCB = partial(resolve_factory("dubey_byzantine_ucb"), gamma=2)
PFCB = partial(resolve_factory("solanki_pfcb"), noise="wrapper", t_lo=16)
FCB = partial(resolve_factory("solanki_fcb"), t_lo=16)


def paper_laplace(env):
    """Li and Song's Laplace wrapper (noise for n_agg * epsilon with the 6 agents averaged)."""
    return LaplaceMessageDP(env, epsilon=1.0, calibration="paper", n_agg=6)


#: (runner, algorithm, env_kwargs, wrapper) on every family, DP and faults; each wrapper changes the results.
CASES = {
    "mab_laplace": (run_li_song, "cdp_mab", LI_SONG, paper_laplace),
    "mab_byzantine": (run, BYZANTINE_UCB, RING, lambda env: ByzantineAgents(env, 0.2, fraction=0.5, q=PointMass(3.0))),
    "linear_drops": (run, "async_linucb", LINEAR, lambda env: MessageDrops(env, 0.3)),
    "linear_delays": (run, "async_linucb", LINEAR, lambda env: MessageDelays(env, 1, jitter=1)),
    "procurement_laplace": (run, PFCB, PROCUREMENT, lambda env: LaplaceMessageDP(env, 1.0)),
    "procurement_drops": (
        run,
        FCB,
        {**PROCUREMENT, "num_agents": 4, "topology": "ring"},
        lambda env: MessageDrops(env, 0.3),
    ),
}


def rows(results):
    """Everything the runs recorded at every slot but the wall time (trajectories, ledger, privacy), in run order."""
    curves = [{k: v for k, v in row.items() if k != "wall_time"} for row in results.curves]
    return (
        sorted(curves, key=lambda row: (row["seed"], row["slot"])),
        sorted(results.agents, key=lambda row: (row["seed"], row["slot"], row["agent"])),
    )


def play(algorithm, env_kwargs, batched, wrappers=(), runner=run):
    """Every slot of a run of ``algorithm`` on both seeds."""
    horizon = env_kwargs["horizon"]
    extra = {"reference": None} if runner is run else {}
    return rows(runner(algorithm, env_kwargs, SEEDS, horizon, batched=batched, wrappers=wrappers, **extra))


def wrap_but_play_inner(wrap):
    """A run wrapper that wraps the env and returns the env itself: the run plays the env that was wrapped."""

    def wrapper(env):
        wrap(env)
        return env

    return wrapper


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "pettingzoo"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_wrapped_env_played_alone_is_a_never_wrapped_env(case, batched):
    runner, algorithm, env_kwargs, wrap = CASES[case]
    plain = play(algorithm, env_kwargs, batched, runner=runner)
    assert play(algorithm, env_kwargs, batched, [wrap_but_play_inner(wrap)], runner) == plain
    assert play(algorithm, env_kwargs, batched, [wrap], runner) != plain  # the wrapper does act when it is played


def test_two_wrappers_of_one_env_are_independent():
    envs = []

    def two_wrappers_then_the_second(env):
        first = LaplaceMessageDP(env, epsilon=1.0)
        second = LaplaceMessageDP(env, epsilon=2.0)
        envs.append((env, first, second))
        return second

    for batched in (True, False):
        alone = play(PFCB, PROCUREMENT, batched, [lambda env: LaplaceMessageDP(env, epsilon=2.0)])
        assert play(PFCB, PROCUREMENT, batched, [two_wrappers_then_the_second]) == alone
        assert play(PFCB, PROCUREMENT, batched, [lambda env: LaplaceMessageDP(env, epsilon=1.0)]) != alone
        env, first, second = envs[-1]
        assert env.unwrapped.core.message_hooks == (second.privatizer,)  # only the played wrapper's hook


def test_each_reset_hands_the_core_the_hooks_of_the_chain_reset():
    env = FederatedMAB(**RING)
    a, b = LaplaceMessageDP(env, epsilon=1.0), MessageDrops(env, prob=0.5)
    chain = LaplaceMessageDP(MessageDrops(env, prob=0.5), epsilon=1.0)
    core = env.unwrapped.core
    a.reset(seed=0)
    assert core.message_hooks == (a.privatizer,)
    b.reset(seed=0)
    assert core.message_hooks == (b.hook,)
    chain.reset(seed=0)
    assert core.message_hooks == (chain.env.hook, chain.privatizer)  # the innermost first
    assert chain.message_hooks() == [chain.env.hook, chain.privatizer]
    env.reset(seed=0)
    assert core.message_hooks == () and env.message_hooks() == []


def test_stepping_a_wrapper_whose_hook_is_not_on_raises():
    env = FederatedMAB(num_agents=2, num_arms=2, horizon=5, topology="complete")
    a, b = LaplaceMessageDP(env, epsilon=1.0, kinds=["x"]), LaplaceMessageDP(env, epsilon=1.0, kinds=["x"])
    sensitive = {"v": Sensitive((0.0, 1.0), aggregate="value")}
    actions = {"agent_0": {"arm": 0, "messages": [Message(0, 1, "x", {"v": 0.5}, privacy=sensitive)]}, "agent_1": 0}
    a.reset(seed=0)
    b.reset(seed=0)  # a sibling's episode: a's hook is off
    with pytest.raises(RuntimeError, match="not reset through this LaplaceMessageDP"):
        a.step(actions)
    b.reset(seed=0)
    env.reset(seed=0)  # the env alone: no hook is on
    with pytest.raises(RuntimeError, match="not reset through this LaplaceMessageDP"):
        b.step(actions)
    assert env.unwrapped.ledger.sent_messages.sum() == 0  # nothing was sent unnoised
    b.reset(seed=0)
    observations, *_ = b.step(actions)
    assert observations["agent_1"]["inbox"][0].payload["v"] != 0.5 and b.epsilon_spent().tolist() == [1.0, 0.0]


def test_a_second_wrapper_of_one_kind_raises_naming_the_fix():
    def env():
        return FederatedMAB(**RING)

    dp = "a wrapper chain holds one differential privacy wrapper"
    with pytest.raises(
        ValueError, match=f"LaplaceMessageDP cannot wrap .* GaussianMessageDP: {dp}.*use one DP wrapper"
    ):
        LaplaceMessageDP(GaussianMessageDP(env(), epsilon=0.5, delta=1e-5), epsilon=1.0)
    with pytest.raises(ValueError, match=f"already wrapped in LaplaceMessageDP: {dp}"):
        LaplaceMessageDP(LaplaceMessageDP(env(), epsilon=1.0), epsilon=1.0)
    with pytest.raises(ValueError, match=f"TreeMessageDP cannot wrap .* LaplaceMessageDP: {dp}"):
        TreeMessageDP(MessageDrops(LaplaceMessageDP(env(), epsilon=1.0), 0.1), epsilon=1.0)  # through another kind
    with pytest.raises(ValueError, match=r"one message drops wrapper .* prob = 1 - \(1 - p1\) \* \(1 - p2\)"):
        MessageDrops(MessageDrops(env(), 0.1), 0.2)
    with pytest.raises(ValueError, match="one message delays wrapper .* delays added .* stacked jitters do not"):
        MessageDelays(MessageDrops(MessageDelays(env(), 1), 0.1), 2)  # through another kind
    with pytest.raises(ValueError, match="one byzantine agents wrapper .* pass every byzantine agent"):
        ByzantineAgents(ByzantineAgents(env(), 0.1, byzantine=[0]), 0.1, byzantine=[1])


def test_a_wrapper_of_something_else_still_raises_the_type_error():
    view = LocalBanditEnv(num_arms=2, horizon=5)  # has a core, but is not a fedbandit multi-agent env
    for make in (lambda e: LaplaceMessageDP(e, 1.0), lambda e: MessageDrops(e, 0.1)):
        with pytest.raises(TypeError, match="wraps a fedbandit environment"):
            make(view)


def test_fault_wrappers_compose_inner_first():
    """Drops of every copy inside delays leave nothing to delay; outside, they lose the delayed copies.

    (ByzantineAgents refuses to wrap either: it corrupts once per record, before the copies are split.)
    """
    found = []

    def keep(env):
        found.append(env)
        return env

    def drops(env):
        return MessageDrops(env, prob=1.0)

    def delays(env):
        return MessageDelays(env, delay=1, on_inactive="ignore")

    for batched in (True, False):
        inner_drops = play(BYZANTINE_UCB, RING, batched, [drops, delays, keep])
        drops_first = found[-1]  # the last run's env (one per seed on the PettingZoo path)
        outer_drops = play(BYZANTINE_UCB, RING, batched, [delays, drops, keep])
        delays_first = found[-1]
        assert inner_drops == outer_drops  # every copy is lost either way: the same trajectories and ledger
        assert [row["messages"] for row in inner_drops[0]] == [0] * len(inner_drops[0])
        assert drops_first.env.hook.dropped.sum() > 0 and drops_first.hook.exposed.sum() == 0
        assert delays_first.env.hook.exposed.sum() > 0 and delays_first.hook.dropped.sum() > 0


def test_dp_and_faults_compose_inner_first_on_both_paths():
    """DP outside drops charges only the releases that survive them; DP inside drops charges every release.

    Li and Song's agents release on a fixed round schedule, so DP inside drops is charged what DP alone is.
    """

    def drops(env):
        return MessageDrops(env, prob=0.3)

    def spent(agents):
        return sum(row["epsilon_spent"] for row in agents)

    charged = {}
    for name, order in (("dp_outside", [drops, paper_laplace]), ("dp_inside", [paper_laplace, drops])):
        curves, agents = play("cdp_mab", LI_SONG, True, order, run_li_song)
        assert (curves, agents) == play("cdp_mab", LI_SONG, False, order, run_li_song)
        charged[name] = spent(agents)
    assert charged["dp_inside"] == spent(play("cdp_mab", LI_SONG, True, [paper_laplace], run_li_song)[1])
    assert 0 < charged["dp_outside"] < charged["dp_inside"]


def test_reset_options_must_carry_the_chains_hooks():
    env = FederatedMAB(**RING)
    wrapped = LaplaceMessageDP(env, epsilon=1.0)
    with pytest.raises(ValueError, match=r"options\['message_hooks'\] must begin with the hooks of this wrapper chain"):
        wrapped.reset(seed=0, options={MESSAGE_HOOKS: []})
    wrapped.reset(seed=0, options={MESSAGE_HOOKS: [wrapped.privatizer]})  # what an outer wrapper hands down
    assert env.unwrapped.core.message_hooks == (wrapped.privatizer,)
    with pytest.raises(TypeError, match=r"hooks must be message hooks \(callable, with reset"):
        env.reset(seed=0, options={MESSAGE_HOOKS: [object()]})
    with pytest.raises(TypeError, match=r"hooks must be a list of message hooks"):
        env.unwrapped.core.reset([0], hooks=wrapped.privatizer)
    with pytest.raises(TypeError, match="options must be a dict or None"):
        env.reset(seed=0, options=[wrapped.privatizer])


class Tag:
    """A user's message hook: appends its digit to the payload field ``"path"`` of every batch (path * 10 + digit)."""

    def __init__(self, digit):
        self.digit = digit

    def reset(self, context, streams):
        """Nothing to start."""

    def __call__(self, slot, batches):
        """The batches with the digit appended (a payload cannot change in place: a hook returns new batches)."""
        tagged = [{**batch.payload, "path": batch.payload["path"] * 10 + self.digit} for batch in batches]
        return [batch.with_payload(payload, batch.privacy) for batch, payload in zip(batches, tagged)]


def test_a_users_hook_wrappers_have_no_kind_and_compose_in_order():
    env = FederatedMAB(num_agents=2, num_arms=2, horizon=3, topology="complete")
    chain = HookWrapper(HookWrapper(env, Tag(1)), Tag(2))
    chain.reset(seed=0)
    message = Message(0, 1, "x", {"path": 0.0})
    observations, *_ = chain.step({"agent_0": {"arm": 0, "messages": [message]}, "agent_1": 0})
    assert observations["agent_1"]["inbox"][0].payload["path"] == 12.0  # the inner hook first
    with pytest.raises(TypeError, match=r"hooks must be message hooks \(callable, with reset"):
        HookWrapper(env, object())
