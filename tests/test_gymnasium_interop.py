"""The Gymnasium views as Gymnasium and stable-baselines3 use them: render modes, time limits, vector envs."""

from __future__ import annotations

import inspect
import warnings

import gymnasium
import numpy as np
import pettingzoo
import pytest
from env_checks import gymnasium_check_env_without_warnings, sb3_check_env_without_warnings

import fedbandit_envs  # noqa: F401  (registers the ids)
from fedbandit_envs.families.linear.views import LinearBanditEnv
from fedbandit_envs.families.mab.views import LocalBanditEnv
from fedbandit_envs.families.procurement.views import SingleAggregatorEnv
from fedbandit_envs.registration import GYMNASIUM_ENVS, PARALLEL_ENVS
from fedbandit_envs.rendering import BACKGROUND, BAR, CHART_HEIGHT, HIGHLIGHT, MARGIN, bar_chart

GYMNASIUM_IDS = list(GYMNASIUM_ENVS)
PARALLEL_IDS = list(PARALLEL_ENVS)


def make(env_id: str, **kwargs) -> gymnasium.Env:
    """``gymnasium.make`` of a small instance of ``env_id``."""
    return gymnasium.make(env_id, **{**GYMNASIUM_ENVS[env_id].test_kwargs, **kwargs})


def entry_class(env_id: str) -> type:
    """The class an id's entry point names (Gymnasium or PettingZoo)."""
    module, name = (GYMNASIUM_ENVS.get(env_id) or PARALLEL_ENVS[env_id]).entry_point.split(":")
    return getattr(__import__(module, fromlist=[name]), name)


# ---------------------------------------------------------------------------------------- the bar chart
def test_bar_chart_pixels():
    image = bar_chart(np.array([0.0, 0.5, 1.0, 2.0]), highlight=2)
    width, gap = 12, 4  # 600 // 4 bars is over the 12-pixel cap
    assert image.dtype == np.uint8
    assert image.shape == (CHART_HEIGHT + 2 * MARGIN, 2 * MARGIN - gap + 4 * (width + gap), 3)
    bottom = MARGIN + CHART_HEIGHT
    for k, (height, colour) in enumerate([(0, BAR), (32, BAR), (64, HIGHLIGHT), (64, BAR)]):
        column = image[:, MARGIN + k * (width + gap) + width // 2]
        np.testing.assert_array_equal(column[bottom - height : bottom], np.tile(colour, (height, 1)))
        np.testing.assert_array_equal(column[: bottom - height], np.tile(BACKGROUND, (bottom - height, 1)))
        np.testing.assert_array_equal(column[bottom:], np.tile(BACKGROUND, (MARGIN, 1)))
    gaps = image[:, MARGIN + width : MARGIN + width + gap]
    assert (gaps == BACKGROUND).all()


def test_bar_chart_many_bars_stay_narrow():
    assert bar_chart(np.ones(1000)).shape[1] == 2 * MARGIN - 1 + 1000 * 4  # 3-pixel bars, 1-pixel gaps
    assert bar_chart(np.ones(100)).shape[1] == 2 * MARGIN - 2 + 100 * 8  # 600 // 100 = 6-pixel bars


@pytest.mark.parametrize(("values", "highlight", "word"), [(np.zeros((2, 2)), None, "1-D"), ([], None, "1-D")])
def test_bar_chart_refuses_bad_values(values, highlight, word):
    with pytest.raises(ValueError, match=word):
        bar_chart(values, highlight)


def test_bar_chart_refuses_bad_highlight():
    with pytest.raises(ValueError, match="highlight"):
        bar_chart(np.ones(3), highlight=3)


# ---------------------------------------------------------------------------------------- render modes
@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_rgb_array_frame_has_a_constant_shape(env_id):
    env = make(env_id, render_mode="rgb_array")
    before = env.unwrapped.render()
    env.reset(seed=0)
    env.action_space.seed(0)  # unseeded, a procurement client bought nothing in 3 steps about once in 40 runs
    frames = [env.render()]
    for _ in range(3):
        env.step(env.action_space.sample())
        frames.append(env.render())
    assert all(f.dtype == np.uint8 and f.ndim == 3 and f.shape == before.shape for f in frames)
    assert (before == BACKGROUND).all(axis=-1).sum() > (frames[-1] == BACKGROUND).all(axis=-1).sum()


def test_local_bandit_bars_are_pull_counts_with_the_last_arm_highlighted():
    env = LocalBanditEnv(num_arms=3, horizon=10, render_mode="rgb_array")
    env.reset(seed=0)
    for arm in (1, 1, 0):
        env.step(arm)
    values, highlight = env.bars()
    np.testing.assert_array_equal(values, [0.5, 1.0, 0.0])
    assert highlight == 0
    np.testing.assert_array_equal(env.render(), bar_chart(values, 0))


def test_linear_bars_are_the_last_slots_expected_rewards_with_the_pulled_arm():
    env = LinearBanditEnv(num_arms=4, dimension=3, horizon=10, render_mode="rgb_array")
    env.reset(seed=3)
    values, highlight = env.bars()
    np.testing.assert_allclose(values, (env.core.means[0, 0] + 1) / 2)
    assert highlight is None
    *_, info = env.step(2)
    values, highlight = env.bars()
    np.testing.assert_allclose(values, (info["expected_rewards"] + 1) / 2)
    assert highlight == 2 and ((values >= 0) & (values <= 1)).all()


def test_procurement_bars_are_units_over_capacity():
    env = SingleAggregatorEnv(num_producers=4, horizon=5, instance_params={"max_capacity": 5}, render_mode="rgb_array")
    env.reset(seed=0)
    np.testing.assert_array_equal(env.bars()[0], np.zeros(4))
    action = np.minimum(np.array([0, 1, 2, 3]), env.action_space.nvec - 1)
    env.step(action)
    values, highlight = env.bars()
    np.testing.assert_allclose(values, action / (env.action_space.nvec - 1))
    assert highlight is None


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_ansi_frame(env_id):
    env = make(env_id, render_mode="ansi")
    assert env.unwrapped.render() == "not started: call reset()"
    env.reset(seed=0)
    env.step(env.action_space.sample())
    text = env.render()
    assert isinstance(text, str) and " 1/60" in text


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS + PARALLEL_IDS)
def test_unsupported_render_mode_warns_and_renders_nothing(env_id):
    entry = GYMNASIUM_ENVS.get(env_id) or PARALLEL_ENVS[env_id]
    with pytest.warns(UserWarning, match=r"render_mode='ansii' .*did you mean 'ansi'.*render\(\) will return None"):
        env = entry_class(env_id)(**{**entry.kwargs, **entry.test_kwargs, "render_mode": "ansii"})
    assert env.render_mode == "ansii"
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert env.render() is None


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS + PARALLEL_IDS)
def test_render_without_a_mode_warns(env_id):
    if env_id in GYMNASIUM_ENVS:
        env = make(env_id).unwrapped
    else:
        env = pettingzoo.make("parallel", env_id, **PARALLEL_ENVS[env_id].test_kwargs)
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="without a render mode"):
        assert env.render() is None


@pytest.mark.parametrize("mode", [1, True, ["ansi"]])
def test_a_render_mode_that_is_not_a_string_is_a_type_error(mode):
    with pytest.raises(TypeError, match="render_mode must be None or a string"):
        LocalBanditEnv(render_mode=mode)
    with pytest.raises(TypeError, match="render_mode must be None or a string"):
        pettingzoo.make("parallel", PARALLEL_IDS[0], render_mode=mode)


def test_gymnasium_make_warns_once_per_layer_on_an_unsupported_mode():
    with pytest.warns(UserWarning) as record:
        env = make(GYMNASIUM_IDS[0], render_mode="depth_array")
    messages = [str(w.message) for w in record]
    assert any("not in the possible render_modes" in m for m in messages)  # gymnasium.make's own warning
    assert any("render() will return None" in m for m in messages)  # the environment's
    env.reset(seed=0)
    assert env.unwrapped.render() is None


# ---------------------------------------------------------------------------------------- checkers
@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_gymnasium_check_env_in_every_render_mode_without_warnings(env_id):
    # check_env re-makes the id in each declared render mode and checks its frames
    gymnasium_check_env_without_warnings(make(env_id, render_mode="rgb_array"))


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_sb3_check_env_without_warnings(env_id):
    sb3_check_env_without_warnings(make(env_id, render_mode="rgb_array"))


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_a_one_step_horizon_is_a_legitimate_view_that_only_gymnasiums_heuristic_refuses(env_id):
    # docs/environments.md: horizon=1 plays one pull per episode and passes SB3's checker; Gymnasium's check_env
    # asserts an episode is not truncated after one step, so the views are checked there from horizon=2
    env = make(env_id, horizon=1)
    assert env.spec.max_episode_steps == 1
    for seed in (0, 1):
        env.reset(seed=seed)
        *_, terminated, truncated, _ = env.step(env.action_space.sample())
        assert (terminated, truncated) == (False, True)
    sb3_check_env_without_warnings(env)
    with pytest.raises(AssertionError, match="Environment truncates after 1 step"):
        gymnasium_check_env_without_warnings(env)
    gymnasium_check_env_without_warnings(make(env_id, horizon=2))


# ---------------------------------------------------------------------------------------- time limits
@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_max_episode_steps_is_the_default_horizon(env_id):
    default = inspect.signature(entry_class(env_id).__init__).parameters["horizon"].default
    assert gymnasium.spec(env_id).max_episode_steps == GYMNASIUM_ENVS[env_id].kwargs.get("horizon", default)


def test_default_episode_ends_at_the_time_limit_and_the_horizon_together():
    env = gymnasium.make("fedbandit/LocalBandit-v0")
    env.reset(seed=0)
    steps, truncated = 0, False
    while not truncated:
        *_, truncated, _ = env.step(0)
        steps += 1
    assert steps == env.spec.max_episode_steps == env.unwrapped.horizon == 200


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
@pytest.mark.parametrize("offset", [-1, 1])
def test_the_time_limit_follows_the_horizon(env_id, offset):
    horizon = gymnasium.spec(env_id).max_episode_steps + offset
    assert make(env_id, horizon=horizon).spec.max_episode_steps == horizon


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_a_time_limit_given_to_make_is_kept(env_id):
    assert make(env_id, horizon=50, max_episode_steps=30).spec.max_episode_steps == 30
    assert make(env_id, horizon=5000, max_episode_steps=-1).spec.max_episode_steps is None


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_a_time_limit_beyond_the_horizon_becomes_the_horizon(env_id):
    """No episode can pass the horizon, so the spec states the episode length rather than an unreachable limit."""
    env = make(env_id, max_episode_steps=gymnasium.spec(env_id).max_episode_steps + 300)
    assert env.spec.max_episode_steps == env.unwrapped.horizon
    assert make(env_id, horizon=50, max_episode_steps=80).spec.max_episode_steps == 50


def test_a_longer_horizon_runs_to_its_end_and_a_given_limit_ends_earlier():
    env = gymnasium.make("fedbandit/LocalBandit-v0", num_arms=2, horizon=230)
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(230)] == [False] * 229 + [True]
    env = gymnasium.make("fedbandit/LocalBandit-v0", num_arms=2, horizon=230, max_episode_steps=7)
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(7)] == [False] * 6 + [True] and env.unwrapped.core.slot == 7


# ---------------------------------------------------------------------------------------- vector envs
@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_gymnasium_make_vec(env_id, mode):
    vec = gymnasium.make_vec(env_id, num_envs=2, vectorization_mode=mode, **GYMNASIUM_ENVS[env_id].test_kwargs)
    observations, _ = vec.reset(seed=5)
    for i in range(2):  # sub-environment i is seeded with seed + i
        single, _ = make(env_id).reset(seed=5 + i)
        np.testing.assert_array_equal(observations[i], single)
    for _ in range(3):
        observations, rewards, terminated, truncated, _ = vec.step(vec.action_space.sample())
    assert observations.shape == (2, *vec.single_observation_space.shape) and rewards.shape == (2,)
    assert not terminated.any() and not truncated.any()
    horizon = GYMNASIUM_ENVS[env_id].test_kwargs["horizon"]
    assert [spec.max_episode_steps for spec in vec.get_attr("spec")] == [horizon, horizon]
    vec.close()


@pytest.mark.parametrize("env_id", GYMNASIUM_IDS)
def test_sb3_make_vec_env(env_id):
    env_util = pytest.importorskip("stable_baselines3.common.env_util")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vec = env_util.make_vec_env(env_id, n_envs=2, seed=0, env_kwargs=GYMNASIUM_ENVS[env_id].test_kwargs)
        assert vec.render_mode == "rgb_array"  # what make_vec_env asks for
        observations = vec.reset()
        for _ in range(3):
            observations, rewards, dones, _ = vec.step(np.array([vec.action_space.sample() for _ in range(2)]))
        images = vec.get_images()
    assert observations.shape == (2, *vec.observation_space.shape) and rewards.shape == (2,) and not dones.any()
    assert len(images) == 2 and all(image.dtype == np.uint8 and image.ndim == 3 for image in images)
    vec.close()


#: Each family's own figures in the summary, from its core.
FAMILY_FIGURES = {
    "mab": lambda core: [],
    "linear": lambda core: [f"phase {core.phase}"],
    "procurement": lambda core: [f"QC violations {int(core.violations[0].sum())}"],
}


@pytest.mark.parametrize("env_id", PARALLEL_IDS)
def test_ansi_summary_reads_the_same_in_every_family(env_id):
    """The clock, the summed regret, the family's own figures, then the ledger's messages and cost."""
    entry = PARALLEL_ENVS[env_id]
    env = entry_class(env_id)(**{**entry.kwargs, **entry.test_kwargs, "render_mode": "ansi"})
    env.reset(seed=0)
    env.step({agent: env.action_space(agent).sample() for agent in env.agents})
    core, totals = env.core, env.ledger.totals()
    expected = [
        f"{env.summary_clock} {core.slot}/{core.horizon}",
        f"{env.summary_regret} {core.regret[0].sum():.2f}",
        *FAMILY_FIGURES[type(core).__module__.split(".")[2]](core),
        f"messages {totals['messages']}",
        f"cost {totals['cost']:.2f}",
    ]
    assert env.render().split("  ") == expected
