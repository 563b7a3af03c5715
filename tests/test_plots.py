"""Figures stay legible: checked on the matplotlib objects (legend placement, line styles, scales, categories)."""

import math
import re

import numpy as np
import pytest

from fedbandit_envs.bench.scenarios import FigureSpec, get, names
from fedbandit_envs.run import Results

pytest.importorskip("matplotlib")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from fedbandit_envs.bench import plots  # noqa: E402
from fedbandit_envs.bench.catalogue.li_wang import D_GRID, GAMMA_GRID, async_label, sync_label  # noqa: E402

SLOTS = (100, 200, 300, 400)


def curves(labels, seeds=(0, 1, 2), params=None, value=None):
    """Rows per label x parameter point x seed x slot; ``value(label, point, seed, slot)`` gives the metrics."""
    rows = []
    for label in labels:
        for point in params or [{}]:
            for seed in seeds:
                for slot in SLOTS:
                    metrics = value(label, point, seed, slot)
                    rows.append({"algorithm": label, **point, "seed": seed, "slot": slot, **metrics})
    return Results(curves=rows)


def regret_rows(label, point, seed, slot):
    """Regret growing in slot, a different level per label and seed; cost spanning 4 decades over the labels."""
    code = sum(map(ord, label))
    return {
        "group_regret": (1 + code % 97 / 10) * slot / 100 + seed,
        "cost": 10.0 ** (code % 5) * slot,
        "messages": slot,
    }


@pytest.fixture
def figure_of():
    """Draw a figure, lay it out (so that extents are final) and close it after the test."""
    drawn = []

    def draw(results, spec, runs=()):
        figure = plots.draw_figure(results, spec, runs)
        figure.canvas.draw()
        drawn.append(figure)
        return figure

    yield draw
    for figure in drawn:
        plt.close(figure)


def overlaps(a, b):
    """Whether two display-space boxes share any area."""
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_line_styles_are_distinct_beyond_ten_colours():
    styles = plots.line_styles(80)
    assert len({(s["color"], s["linestyle"]) for s in styles[:40]}) == 40  # lines differ in colour x line style
    assert len({(s["color"], s["marker"]) for s in styles}) == 80  # single points differ in colour x marker
    with pytest.raises(ValueError, match="at most 80 lines"):
        plots.line_styles(81)


@pytest.mark.parametrize(
    ("values", "log", "expected"),
    [
        ([1.0, 50.0], None, ("linear", {})),  # under two decades
        ([1.0, 100.0], None, ("linear", {})),  # exactly two decades: not more than two
        ([1.0, 100.5], None, ("log", {})),
        ([0.0, 2.0, 5000.0], None, ("symlog", {"linthresh": 1.0})),  # zeros stay visible
        ([-1.0, 1000.0], None, ("linear", {})),  # a negative value: never log
        ([1.0, 2.0, math.inf, math.nan], None, ("linear", {})),  # non-finite values ignored
        ([1.0, 2.0], True, ("log", {})),
        ([0.0, 300.0], True, ("symlog", {"linthresh": 100.0})),
        ([-1.0, 3.0], True, ("linear", {})),
        ([1.0, 1e6], False, ("linear", {})),
        ([0.0, 0.0], None, ("linear", {})),
    ],
)
def test_axis_scale_rule(values, log, expected):
    assert plots.axis_scale(values, log) == expected


@pytest.mark.parametrize(
    ("column", "values", "expected"),
    [
        ("instance_seed", [0, 1], True),
        ("seed", [3, 7], True),
        ("client_id", [1, 2, 3], True),
        ("graph", ["erdos_renyi", "complete"], True),
        ("homogeneous", [True, False], True),
        ("epsilon", [0.1, 1.0, math.inf], True),  # inf is no position on a numeric axis
        ("epsilon", [0.1, 1.0], False),
        ("num_agents", [10, 20, 40], False),
    ],
)
def test_categorical_parameters(column, values, expected):
    assert plots.is_categorical(column, values) is expected


def test_many_algorithms_keep_legend_outside_and_every_line_distinct(figure_of):
    labels = [async_label(g) for g in GAMMA_GRID] + [sync_label(d) for d in D_GRID]
    assert len(labels) == 24
    figure = figure_of(curves(labels, value=regret_rows), FigureSpec("regret", title="24 algorithms"))
    (axes,) = figure.axes
    lines = axes.get_lines()
    assert len(lines) == 24
    assert len({(to_rgba(line.get_color()), line.get_linestyle()) for line in lines}) == 24
    legend = axes.get_legend()
    assert [text.get_text() for text in legend.get_texts()] == labels
    box, axes_box = legend.get_window_extent(), axes.get_window_extent()
    assert box.x0 >= axes_box.x1  # entirely at the right of the axes
    assert not overlaps(box, figure._suptitle.get_window_extent())
    figure_box = figure.bbox
    assert figure_box.x0 <= box.x0 and box.x1 <= figure_box.x1 and figure_box.y0 <= box.y0 and box.y1 <= figure_box.y1
    assert not overlaps(figure._suptitle.get_window_extent(), axes_box)
    assert axes.get_xscale() == "linear"


def test_axes_go_logarithmic_when_the_data_span_decades(figure_of):
    labels = ["a", "b", "c"]
    spread = {"a": 1.0, "b": 30.0, "c": 5000.0}
    results = curves(labels, value=lambda label, point, seed, slot: {"group_regret": spread[label] * slot + seed})
    (axes,) = figure_of(results, FigureSpec("regret")).axes
    assert (axes.get_xscale(), axes.get_yscale()) == ("linear", "log")  # slot stays linear
    (axes,) = figure_of(results, FigureSpec("regret", logy=False)).axes
    assert axes.get_yscale() == "linear"
    close = {"a": 1.0, "b": 3.0, "c": 50.0}
    near = curves(labels, value=lambda label, point, seed, slot: {"group_regret": close[label] * slot + seed})
    assert figure_of(near, FigureSpec("regret")).axes[0].get_yscale() == "linear"


def test_numeric_parameter_on_a_log_axis_when_it_spans_decades(figure_of):
    points = [{"threshold": t} for t in (0.01, 1.0, 100.0)]
    results = curves(["x"], params=points, value=lambda label, point, seed, slot: {"group_regret": seed + slot})
    (axes,) = figure_of(results, FigureSpec("f", x="threshold")).axes
    assert axes.get_xscale() == "log"
    (line,) = axes.get_lines()
    assert list(line.get_xdata()) == [0.01, 1.0, 100.0] and line.get_linestyle() == "-"


def test_instance_seed_is_drawn_as_categories_never_as_a_line(figure_of):
    points = [{"homogeneous": h, "instance_seed": i} for h in (True, False) for i in (0, 1)]
    results = curves(
        ["fcb_sync"],
        params=points,
        value=lambda label, point, seed, slot: {"group_regret": slot * (2 + point["instance_seed"]) + seed},
    )
    spec = FigureSpec("final_vs_instance_seed", x="instance_seed", hue=("algorithm", "homogeneous"))
    (axes,) = figure_of(results, spec, runs=["homogeneous"]).axes
    assert [t.get_text() for t in axes.get_xticklabels()] == ["0", "1"]
    assert list(axes.get_xticks()) == [0, 1]
    drawn = [line for line in axes.get_lines() if line.get_marker() not in ("None", "_")]
    assert len(drawn) == 2  # one point series per hue value (homogeneous True / False)
    for line in drawn:
        assert line.get_linestyle() == "None"  # points with error bars, no line joining the seeds
        assert np.all(np.abs(np.asarray(line.get_xdata()) - np.array([0, 1])) < 0.5)  # dodged within category
    means = sorted(line.get_ydata()[1] for line in drawn)  # seed means at the last slot (400), instance 1
    assert means == pytest.approx([400 * 3 + 1, 400 * 3 + 1])


def test_tradeoff_mirror_one_line_per_protocol_in_threshold_order(figure_of):
    labels = [async_label(g) for g in GAMMA_GRID] + [sync_label(d) for d in D_GRID]
    order = {label: i for i, label in enumerate(labels)}

    def rows(label, point, seed, slot):
        rank = order[label] % 13
        messages = 0.0 if label == async_label(math.inf) else 10.0 ** (6 - rank / 3) * slot / 400
        return {"group_regret": (50 + 10 * rank) * slot / 400 + seed, "messages": messages}

    spec = get("li_wang/fig2a_uniform").figures[0]
    assert spec.kind == "tradeoff" and spec.x == "messages"
    figure = figure_of(curves(labels, value=rows), spec)
    (axes,) = figure.axes
    legend = axes.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["Async-LinUCB", "Sync-LinUCB"]
    assert axes.get_xscale() == "symlog"  # log C_T; gamma = inf's C_T = 0 stays visible at the axis start
    ticks = [tick for tick in axes.get_xticks() if axes.get_xlim()[0] <= tick <= axes.get_xlim()[1]]
    # 0, then the decades from the linear threshold (100: the smallest positive C_T is 10^(6 - 11/3) = 215) on
    assert ticks[:2] == [0, 100] and all(math.log10(t).is_integer() for t in ticks[1:])
    joined = [line for line in axes.get_lines() if line.get_linestyle() != "None" and len(line.get_xdata()) > 1]
    assert [len(line.get_xdata()) for line in joined] == [13, 11]
    for line in joined:  # threshold order: cost falls along each protocol's line
        assert np.all(np.diff(np.asarray(line.get_xdata(), dtype=float)) <= 0)
    texts = [t.get_text() for t in axes.texts]
    assert texts[:3] == ["1", "1.01", "1.03"] and "inf" in texts and "1000" in texts
    assert axes.get_xlabel() == "communication cost $C_T$ (messages)"


@pytest.mark.parametrize(
    ("column", "values", "joined"), [("global_dimension", [16, 4, 8], True), ("instance_seed", [1, 0, 2], False)]
)
def test_tradeoff_joins_points_only_along_a_quantity(figure_of, column, values, joined):
    def rows(label, point, seed, slot):
        return {
            "group_regret": 100.0 / (1 + point[column]) + slot / 100 + seed,
            "messages": 50.0 * point[column] + slot,
        }

    results = curves(["async_am gamma=5"], params=[{column: v} for v in values], value=rows)
    spec = FigureSpec("f", x="messages", kind="tradeoff")
    (axes,) = figure_of(results, spec, runs=[column]).axes
    (line,) = [line for line in axes.get_lines() if line.get_marker() == "o"]  # not the error bar caps
    assert (line.get_linestyle() != "None") is joined
    expected = sorted(values) if joined else values
    assert list(line.get_xdata()) == pytest.approx([50.0 * v + 400 for v in expected])
    assert [t.get_text() for t in axes.texts] == [f"{column}={v}" for v in expected]


def test_reference_rows_become_horizontal_lines(figure_of):
    points = [{"graph": "erdos_renyi", "gamma": g} for g in (1, 2, 3)] + [{"graph": "complete", "gamma": 1}]
    level = {"erdos_renyi": 100.0, "complete": 10.0}

    def rows(label, point, seed, slot):
        return {"group_regret": level[point["graph"]] / point["gamma"] * slot / 400 + seed}

    spec = get("dubey/fig1c_gamma").figures[0]
    results = curves(["private_ucb_eps1", "byzantine_ucb"], params=points, value=rows)
    (axes,) = figure_of(results, spec, runs=["graph"]).axes
    horizontal = [line for line in axes.get_lines() if len(set(line.get_ydata())) == 1 and len(line.get_ydata()) == 2]
    assert [line.get_ydata()[0] for line in horizontal] == pytest.approx([11.0, 11.0])  # 10 + mean seed (1)
    curves_drawn = [line for line in axes.get_lines() if line not in horizontal]
    assert [list(line.get_xdata()) for line in curves_drawn] == [[1, 2, 3], [1, 2, 3]]
    assert list(curves_drawn[0].get_ydata()) == pytest.approx([101.0, 51.0, 100 / 3 + 1])
    labels = [t.get_text() for t in axes.get_legend().get_texts()]
    assert "Private MA-UCB (ε = 1): complete graph (optimal)" in labels


def test_select_draws_the_paper_combinations_only(figure_of):
    points = [{"contam_eps": c} for c in (1e-3, 0.0)]
    labels = ["byzantine_ucb", "byzantine_ucb_eps0", "ucb1"]
    results = curves(labels, params=points, value=lambda label, point, seed, slot: {"group_regret": slot + seed})
    (axes,) = figure_of(results, get("dubey/fig1b_byzantine").figures[0], runs=["contam_eps"]).axes
    assert len(axes.get_lines()) == 3
    assert [t.get_text() for t in axes.get_legend().get_texts()] == [
        "Byzantine-proof MA-UCB (ε = 10⁻³, contaminated)",
        "Byzantine-proof MA-UCB (ε = 0, clean)",
        "UCB1 (individual, contaminated)",
    ]
    spec = FigureSpec("f", select=({"algorithm": "nobody"},))
    with pytest.raises(ValueError, match="no result rows match its selection"):
        plots.draw_figure(results, spec)


def test_bad_figure_specs_are_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        FigureSpec("f", kind="scatter")
    with pytest.raises(ValueError, match="series patterns apply to kind='tradeoff' only"):
        FigureSpec("f", series="(?P<series>.*)")
    spec = FigureSpec("f", x="messages", kind="tradeoff", series=r"(?P<series>async) .*")
    results = curves(["async g=1", "sync D=1"], value=regret_rows)
    with pytest.raises(ValueError, match=r"does not match the algorithm label\(s\) \['sync D=1'\]"):
        plots.draw_figure(results, spec)


#: Every paper figure that a catalogue scenario reproduces -> the scenario declaring its mirror.
MIRRORS = {
    "li_wang/fig2a_uniform": "fig2a",
    "li_wang/fig2b_zipf": "fig2b",
    "li_wang/fig2c_global_dimension": "fig2c",
    "li_wang/fig3_lastfm": "fig3",
    "li_wang/fig3_delicious": "fig3",
    "li_wang/fig3_movielens": "fig3",
    "zhu/sa_epsilon": "rc9_regret",
    "zhu/sb_epsilon": "rc9_regret",
    "zhu/diabetes_standin": "rc9_regret",
    "dubey/fig1a_private": "fig1a",
    "dubey/fig1b_byzantine": "fig1b",
    "dubey/fig1c_gamma": "fig1c",
    **{f"solanki/fig2_{f}": "fig2" for f in ("uniform", "normal")},
    **{f"solanki/exp1_{f}": "fig3" for f in ("uniform", "normal")},
    **{f"solanki/exp2_{f}": "fig4" for f in ("uniform", "normal")},
    **{f"solanki/exp3_{f}": "fig5" for f in ("uniform", "normal")},
}


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_paper_figures_have_mirrors(name):
    figures = {spec.name: spec for spec in get(name).figures}
    assert MIRRORS[name] in figures
    assert re.match(r"Fig\. \d", figures[MIRRORS[name]].title)


@pytest.mark.parametrize("name", [n for n in names() if get(n).figures])
def test_declared_figures_use_the_scenario_columns(name):
    """Every column a declared figure reads is a swept parameter, the algorithm, or a measured metric."""
    scenario = get(name)
    swept = {key.partition(".")[2] for key in scenario.sweep}
    for scale in scenario.scales.values():
        swept |= {key.partition(".")[2] for key in scale.get("sweep", {})}
    for spec in scenario.figures:
        selected = {column for entry in spec.select for column in entry}
        assert set(spec.hue) | set(spec.facet) | set(spec.reference) | selected <= swept | {"algorithm"}, spec.name
        assert {entry["algorithm"] for entry in spec.select if "algorithm" in entry} <= set(scenario.algorithms)
        if spec.kind == "line" and spec.x != "slot":
            assert spec.x in swept, spec.name
        if spec.series:
            pattern = re.compile(spec.series)
            assert all(pattern.fullmatch(label) for label in scenario.algorithms), spec.name


def test_report_figures_ignore_parameters_swept_over_one_value(tmp_path):
    from fedbandit_envs.bench.report import draw_figures

    points = [{"threshold": t, "scale": 0.5, "epsilon_max": math.nan} for t in (0.01, 1.0, 100.0)]
    results = curves(["a", "b"], params=points, value=regret_rows)
    drawn = draw_figures(results, tmp_path, ["threshold", "scale"])
    # No regret-vs-epsilon figure either: no run measured epsilon.
    assert [figure.name for figure in drawn] == ["regret", "regret_vs_cost", "final_vs_threshold"]
    assert all(figure.png.stat().st_size > 5000 for figure in drawn)


def test_objects_recorded_by_their_repr_are_named_in_legends(figure_of):
    points = [{"topology": f"Topology(name='{name}', num_agents=100, num_edges=95)"} for name in ("case1", "case2")]
    results = curves(["hdp_mab"], params=points, value=lambda label, point, seed, slot: {"group_regret": slot})
    (axes,) = figure_of(results, FigureSpec("f", hue=("topology",))).axes
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["topology=case1", "topology=case2"]
