"""Plots and reports: figures written and non-empty; the HTML holds every figure and claim; replication."""

import dataclasses
import re
from dataclasses import replace

import pytest

from fedbandit_envs.bench import scenarios
from fedbandit_envs.bench.claims import monotone, ordering
from fedbandit_envs.bench.decisions import CHECKOUT_DOCS, URL_VARIABLE, anchor, doc_anchors
from fedbandit_envs.bench.report import (
    CLAIMS_LEGEND,
    draw_figures,
    paper_scenarios,
    write_replication_report,
    write_report,
)
from fedbandit_envs.bench.scenarios import (
    AlgorithmSpec,
    Claim,
    FigureSpec,
    PassRate,
    Scenario,
    WrapperSpec,
    get,
    with_pass_rates,
)
from fedbandit_envs.bench.store import load_results
from fedbandit_envs.bench.sweep import run_sweep

pytest.importorskip("matplotlib")
from fedbandit_envs.bench import plots  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

#: A DP scenario: full sharing under the Laplace message wrapper, epsilon swept (baselines declare no
#: sensitive fields, so epsilon spent stays 0; the harness only needs the columns).
DP = Scenario(
    name="testpaper/fig_epsilon",
    paper="testpaper",
    description="full sharing vs independent learners at two privacy levels",
    env_kwargs={"num_agents": 3, "num_arms": 4, "horizon": 80, "instance_seed": 1},
    algorithms={
        "independent_ucb1": AlgorithmSpec("independent_ucb1"),
        "full_sharing_ucb": AlgorithmSpec("full_sharing_ucb"),
    },
    sweep={"wrapper.epsilon": (0.5, 2.0)},
    wrappers=(WrapperSpec("wrappers.dp:LaplaceMessageDP", {"strict": False}),),
    seeds=2,
    checkpoints=4,
    claims=(
        ordering("sharing_helps", "full sharing beats independent learners", ["full_sharing_ucb", "independent_ucb1"]),
        ordering(
            "reversed", "independent learners beat full sharing (false)", ["independent_ucb1", "full_sharing_ucb"]
        ),
        monotone(
            "flat_in_epsilon", "regret decreases in epsilon", "epsilon", "decreasing", algorithm="independent_ucb1"
        ),
    ),
    figures=(FigureSpec("fig2", x="epsilon", title="Fig. 2 (mirror)", logx=True),),
)


@pytest.fixture(scope="module")
def dp_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("dp") / "testpaper" / "fig_epsilon"
    with pytest.warns(UserWarning, match="undeclared"):
        run_sweep(DP, out, backend="inprocess")
    return out


def test_report_html_contains_every_figure_and_claim(dp_sweep, monkeypatch):
    monkeypatch.setitem(scenarios._CATALOGUE, DP.name, DP)
    markdown, page = write_report(dp_sweep)
    figures = sorted(p.stem for p in (dp_sweep / "figures").glob("*.png"))
    assert figures == ["fig2", "regret", "regret_vs_cost", "regret_vs_epsilon"]
    html = page.read_text()
    for name in figures:
        assert f'<figure id="figure-{name}"><svg' in html
        assert (dp_sweep / "figures" / f"{name}.png").read_bytes()[:8] == PNG_MAGIC
        assert (dp_sweep / "figures" / f"{name}.svg").stat().st_size > 5000
        assert f"](figures/{name}.png)" in markdown.read_text()
    assert html.count("<svg") == len(figures)
    assert not re.search(r"<(img|script|link)\b|src=", html)  # self-contained: nothing fetched
    rows = re.findall(r'<tr class="(PASS|FAIL|ERROR)"><td>(\w+)</td>', html)
    assert rows == [("PASS", "sharing_helps"), ("FAIL", "reversed"), (rows[2][0], "flat_in_epsilon")]
    for claim in DP.claims:
        assert claim.description in html and claim.name in markdown.read_text()
    assert "1 of 3 claim(s) pass" in html or "2 of 3 claim(s) pass" in html
    assert "epsilon spent (max)" in html and "Leaderboard" in html and "fedbandit-envs" in html


def test_claim_codes_link_to_the_decisions_docs(dp_sweep, monkeypatch):
    claim = ordering("sharing_helps", "Li-Song: sharing wins (RC-C2, D9)", ["full_sharing_ucb", "independent_ucb1"])
    li_song = dataclasses.replace(DP, paper="li_song", claims=(claim,))
    monkeypatch.delenv(URL_VARIABLE, raising=False)
    markdown, page = write_report(dp_sweep, li_song)
    links = re.findall(r"\[([^]]+)\]\(([^)]+\.md#[^)]+)\)", markdown.read_text())
    assert [code for code, _ in links] == ["RC-C2", "D9"]
    doc = CHECKOUT_DOCS / "li-song.md"
    for code, href in links:  # relative to the report's directory, onto an existing entry
        path, target = href.split("#")
        assert (dp_sweep / path).resolve() == doc.resolve()
        assert target == anchor(code) and target in doc_anchors(doc)
    html = page.read_text()
    assert f'<a href="{links[0][1]}">RC-C2</a>' in html and f'<a href="{links[1][1]}">D9</a>' in html
    monkeypatch.setenv(URL_VARIABLE, "https://example.org/docs/decisions/")
    markdown, _ = write_report(dp_sweep, li_song)
    assert "(RC-C2, D9)" not in markdown.read_text()
    assert "[RC-C2](https://example.org/docs/decisions/li-song.md#rc-c2)" in markdown.read_text()


def test_report_shows_measured_pass_rates(dp_sweep, monkeypatch):
    claims = with_pass_rates(DP.claims, {"sharing_helps": (9, 10)}, "0:20 in blocks of 2")
    assert str(claims[0].pass_rate) == "9/10 blocks (0:20 in blocks of 2, ci scale)" and claims[1].pass_rate is None
    monkeypatch.setitem(scenarios._CATALOGUE, DP.name, replace(DP, claims=claims))
    markdown, _ = write_report(dp_sweep)
    lines = {line.split(" | ")[0].strip("| "): line for line in markdown.read_text().splitlines() if "|" in line}
    assert lines["sharing_helps"].endswith("| 9/10 blocks (0:20 in blocks of 2, ci scale) |")
    assert lines["reversed"].endswith("| not measured |")
    with pytest.raises(ValueError, match=r"unknown claims \['nope'\]"):
        with_pass_rates(DP.claims, {"nope": (1, 1)}, "0:1")
    with pytest.raises(ValueError, match="0 <= passed <= blocks"):
        PassRate(11, 10, "0:20")


@pytest.mark.parametrize(
    ("settings", "changed"),
    [
        ({"overrides": {"horizon": 40}}, "horizon"),
        ({"overrides": {"sweep": {"wrapper.epsilon": [1.0]}}}, "sweep"),
        ({"seeds": 3}, "seed count"),
        ({"overrides": {"horizon": 80}, "seeds": [5, 6]}, None),  # the scenario's own horizon, other seeds
    ],
    ids=["env", "sweep", "seeds", "unchanged"],
)
def test_a_pass_rate_says_it_was_measured_on_the_unchanged_scenario(settings, changed, tmp_path, monkeypatch):
    claims = with_pass_rates(DP.claims, {"sharing_helps": (9, 10)}, "0:20 in blocks of 2")
    monkeypatch.setitem(scenarios._CATALOGUE, DP.name, replace(DP, claims=claims))
    with pytest.warns(UserWarning, match="undeclared"):
        run_sweep(DP.name, tmp_path, backend="inprocess", **settings)
    markdown, _ = write_report(tmp_path)
    lines = {line.split(" | ")[0].strip("| "): line for line in markdown.read_text().splitlines() if "|" in line}
    rate = "9/10 blocks (0:20 in blocks of 2, ci scale)"
    note = f", measured on the unchanged scenario, not with this sweep's {changed}" if changed else ""
    assert lines["sharing_helps"].endswith(f"| {rate}{note} |")


def test_report_states_bands_intervals_units_and_ties(dp_sweep, monkeypatch):
    unbanded = Claim("no_band", "a claim that states no band", DP.claims[0].check)
    monkeypatch.setitem(scenarios._CATALOGUE, DP.name, replace(DP, claims=(*DP.claims, unbanded)))
    markdown, page = write_report(dp_sweep)
    text = markdown.read_text()
    lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if "|" in line}
    assert "| evidence | acceptance band | pass rate over seed blocks |" in lines["claim"]
    assert lines["sharing_helps"].endswith("| strict: each mean below the next, no tolerance | not measured |")
    assert lines["flat_in_epsilon"].endswith("| no tolerance: no step may rise (equal means pass) | not measured |")
    assert lines["no_band"].endswith("| not stated | not measured |")
    assert CLAIMS_LEGEND in text and "'± x SE' in evidence is a standard error of the mean" in CLAIMS_LEGEND
    assert "| cost (price units): mean ± 95% CI |" in text and "| cost (price units, mean) |" in text
    assert "Mean ± x: x is the half-width of the 95% confidence interval of the mean" in text
    assert text.count("Cost is in price units of the run's CostModel") == 2  # under the final table and leaderboard
    assert "Holm-corrected at family-wise level 0.05" in text
    # two seeds at horizon 80: the tests cannot separate the two algorithms at epsilon 0.5
    assert "| 0.5 | =1 | full_sharing_ucb | 2 |" in text and "| 0.5 | =1 | independent_ucb1 | 2 |" in text
    assert "<th>acceptance band</th>" in page.read_text()


def test_the_report_ranks_under_the_budgets_it_is_given_and_states_them(dp_sweep, monkeypatch):
    """As ``fedbandit compare --max-cost`` prints the leaderboard, so its report ranks it."""
    monkeypatch.setitem(scenarios._CATALOGUE, DP.name, DP)
    text = write_report(dp_sweep, budgets={"max_cost": 1.0, "max_epsilon": None})[0].read_text()
    assert "Budgets: cost at most 1 (mean final values); entries over a budget" in text
    assert "| 0.5 | 1 | independent_ucb1 | 2 |" in text and "| 0.5 | - | full_sharing_ucb | 2 |" in text
    plain = write_report(dp_sweep)[0].read_text()
    assert "Budgets:" not in plain and "| 0.5 | =1 | full_sharing_ucb | 2 |" in plain


def test_a_scenario_figure_grouped_by_parameters_splits_other_algorithms(dp_sweep, monkeypatch, tmp_path):
    """A paper figure of one algorithm, drawn on results with another (compare's learner), does not average them."""
    drawn = {}
    monkeypatch.setattr(plots, "plot_figure", lambda results, spec, *args, **kwargs: drawn.setdefault(spec.name, spec))
    monkeypatch.setattr(plots, "plot_regret_vs_cost", lambda *args, **kwargs: None)
    monkeypatch.setattr(plots, "plot_regret_vs_epsilon", lambda *args, **kwargs: None)
    specs = [
        FigureSpec("by_epsilon", hue=("epsilon",)),
        FigureSpec("by_algorithm", x="epsilon"),
        FigureSpec("one_selected", hue=("epsilon",), select=({"algorithm": "independent_ucb1"},)),
    ]
    draw_figures(load_results(dp_sweep), tmp_path, ["epsilon"], specs)
    assert drawn["by_epsilon"].hue == ("epsilon", "algorithm")
    assert drawn["by_algorithm"].hue == ("algorithm",) and drawn["one_selected"].hue == ("epsilon",)


def test_every_catalogue_claim_states_its_acceptance_band():
    unstated = [(name, claim.name) for name in scenarios.names() for claim in get(name).claims if not claim.band]
    assert unstated == []


def test_figure_axes_of_ledger_columns_state_their_units():
    assert [plots.LABELS[c] for c in ("cost", "link_cost", "messages", "bytes")] == [
        "communication cost (price units)",
        "link cost (price units)",
        "messages (count)",
        "bytes (payload bytes)",
    ]


def test_report_of_an_unregistered_scenario_says_claims_are_unavailable(dp_sweep):
    markdown, _ = write_report(dp_sweep)
    assert "is not registered here, so its claims cannot be checked" in markdown.read_text()


def test_plots_are_written_and_non_empty(dp_sweep, tmp_path):
    results = load_results(dp_sweep)
    written = [
        plots.plot_regret(results, tmp_path / "regret.png"),
        *plots.plot_regret_vs_cost(results, [tmp_path / "cost.png", tmp_path / "cost.svg"], runs=["epsilon"]),
        *plots.plot_regret_vs_epsilon(results, tmp_path / "epsilon.svg", runs=["epsilon"]),
        *plots.plot_figure(results, FigureSpec("f", facet=["epsilon"], band="minmax"), tmp_path / "f.png"),
    ]
    for path in written:
        data = path.read_bytes()
        assert len(data) > 5000 and (data[:8] == PNG_MAGIC or b"<svg" in data[:2000])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cost.png", "cost.svg", "epsilon.svg", "f.png", "regret.png"]


def test_regret_vs_measured_epsilon_and_bad_plot_input(dp_sweep, tmp_path):
    results = load_results(dp_sweep)
    for row in results.curves:
        del row["epsilon"]  # no privacy setting column: the measured epsilon_max goes on the x axis
    assert plots.plot_regret_vs_epsilon(results, tmp_path / "measured.png")[0].stat().st_size > 5000
    for row in results.curves:
        del row["epsilon_max"]
    with pytest.raises(ValueError, match="run the scenario with a DP wrapper"):
        plots.plot_regret_vs_epsilon(results, tmp_path / "none.png")
    with pytest.raises(ValueError, match=r"\.png, \.svg or \.pdf"):
        plots.plot_regret(results, tmp_path / "regret.jpg")
    with pytest.raises(ValueError, match="no column"):
        plots.plot_figure(results, FigureSpec("x", y="nope"), tmp_path / "x.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["measured.png"]


def test_replication_report_covers_every_paper_scenario(dp_sweep, monkeypatch):
    monkeypatch.setitem(scenarios._CATALOGUE, DP.name, DP)
    missing = Scenario("testpaper/not_run", "testpaper", "never swept", {}, {"r": AlgorithmSpec("random")})
    monkeypatch.setitem(scenarios._CATALOGUE, missing.name, missing)
    assert {DP.name, missing.name} <= set(paper_scenarios()) and "suite/baselines" not in paper_scenarios()
    root = dp_sweep.parent.parent
    markdown, page = write_replication_report(root, [DP.name, missing.name])
    html = page.read_text()
    assert "1 of 2 scenario(s) run" in html
    assert '<a href="testpaper/fig_epsilon/report.html">report</a>' in html
    assert "fedbandit sweep testpaper/not_run --out" in markdown.read_text()
    assert "| evidence | acceptance band | report |" in markdown.read_text() and CLAIMS_LEGEND in markdown.read_text()
    assert all(claim.name in html for claim in DP.claims)
    assert (dp_sweep / "report.html").exists()


def test_suite_baselines_claim_holds_at_reduced_scale(tmp_path):
    # ci scale, horizon 400, 3 seeds: final group regret measured as full sharing 493 (std 35 over seeds),
    # independent UCB1 983 (std 16), random 1758 (std 22): each gap is more than 13 standard deviations.
    run_sweep("suite/baselines", tmp_path, overrides={"horizon": 400}, backend="inprocess")
    markdown, _ = write_report(tmp_path)
    assert "| sharing_helps |" in markdown.read_text() and "| PASS |" in markdown.read_text()
    assert get("suite/baselines").claims[0].check(load_results(tmp_path)).passed


def test_cli_replicate_sweeps_paper_scenarios_then_reports(tmp_path, monkeypatch, capsys):
    from fedbandit_envs.bench import report
    from fedbandit_envs.cli import main

    assert main(["replicate", "--root", str(tmp_path / "dry"), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert all(f"scenario {name}:" in printed for name in paper_scenarios())
    assert not (tmp_path / "dry").exists()
    monkeypatch.setitem(scenarios._CATALOGUE, DP.name, DP)
    monkeypatch.setattr(report, "paper_scenarios", lambda papers=None: [DP.name])
    assert main(["replicate", "--root", str(tmp_path), "--backend", "inprocess", "--no-progress"]) == 0
    assert "fedbandit: warning: DP wrapper (strict=False): field 'arm'" in capsys.readouterr().err  # one line each
    assert "1 of 1 scenario(s) run" in (tmp_path / "replication.md").read_text()
    assert (tmp_path / "testpaper" / "fig_epsilon" / "report.html").exists()
