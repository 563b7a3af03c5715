"""Per-paper replication reports: every paper scenario has an entry with the paper's numbers (or "not reported"),
every claim links to an existing decision entry, and the writer puts the paper's numbers in the paper column."""

import re

import pytest

from fedbandit_envs.bench import scenarios
from fedbandit_envs.bench.claims import final_means
from fedbandit_envs.bench.decisions import CHECKOUT_DOCS, DOCS, doc_anchors
from fedbandit_envs.bench.papers import (
    KEYS,
    NOT_REPORTED,
    Paper,
    PaperItem,
    PaperValue,
    final_by,
    final_mean,
    final_ratio,
    get_paper,
    paper_of,
)
from fedbandit_envs.bench.report import (
    NO_REASON,
    PAPER_REPORT_DPI,
    ClaimOutcome,
    decision_entry,
    paper_scenarios,
    scenario_outcome,
    write_paper_report,
)
from fedbandit_envs.bench.scenarios import get
from fedbandit_envs.bench.store import load_results
from fedbandit_envs.bench.sweep import run_sweep
from fedbandit_envs.bench.tables import Link, number

PAPERS = [get_paper(key) for key in KEYS]


def test_every_paper_scenario_is_an_item_of_its_paper():
    covered = [item.scenario for paper in PAPERS for item in paper.items]
    assert set(covered) == set(paper_scenarios())
    for paper in PAPERS:
        assert paper.citation and all(paper_of(item.scenario) == paper.key for item in paper.items)
        assert paper_scenarios([paper.key]) == sorted(paper.scenarios)


def test_every_value_gives_the_papers_number_or_says_it_is_not_reported():
    for paper in PAPERS:
        for item in paper.items:
            for value in item.values:
                assert NOT_REPORTED in value.paper or re.search(r"\d", value.paper), (item.label, value.quantity)


def test_reasons_and_codes_name_registered_claims():
    for paper in PAPERS:
        for key in (*paper.reasons, *paper.codes):
            name, _, claim = key.partition(":")
            assert paper_of(name) == paper.key and claim in {c.name for c in get(name).claims}, key


def test_every_paper_claim_links_to_an_existing_decision_entry():
    for paper in PAPERS:
        for name in paper.scenarios:
            scenario = get(name)
            anchors = doc_anchors(CHECKOUT_DOCS / DOCS[scenario.paper])
            for claim in scenario.claims:
                outcome = ClaimOutcome(claim.name, claim.description, "PASS", "")
                entry = decision_entry(outcome, scenario, paper, "../decisions")
                assert isinstance(entry, Link), (name, claim.name)
                assert entry.href.startswith(f"../decisions/{DOCS[scenario.paper]}#")
                assert entry.href.partition("#")[2] in anchors, (name, claim.name, entry.href)


def test_values_by_label_sort_numbers_by_value():
    from fedbandit_envs.bench.papers import _sorted

    labels = {"async gamma=101": 0.0, "async gamma=inf": 0.0, "async gamma=5": 0.0, "async gamma=1.01": 0.0}
    assert _sorted(labels) == ["async gamma=1.01", "async gamma=5", "async gamma=101", "async gamma=inf"]
    assert _sorted({10: 0.0, 2: 0.0, 4.5: 0.0}) == [2, 4.5, 10]


def test_unknown_papers_are_refused():
    with pytest.raises(ValueError, match=r"unknown papers \['nope'\]; choose from"):
        paper_scenarios(["zhu", "nope"])
    with pytest.raises(ValueError, match="unknown paper 'nope'"):
        get_paper("nope")
    with pytest.raises(ValueError, match="at least one PaperValue"):
        PaperItem("Fig. 1", "zhu/sa_epsilon", "nothing", ())


pytest.importorskip("matplotlib")
PIL = pytest.importorskip("PIL.Image")

#: A small scenario of a made-up paper (ordering claims: one true, one false).
TOY = scenarios.Scenario(
    name="toypaper/fig1",
    paper="toypaper",
    description="full sharing vs independent learners",
    env_kwargs={"num_agents": 3, "num_arms": 4, "horizon": 60, "instance_seed": 1},
    algorithms={
        "independent_ucb1": scenarios.AlgorithmSpec("independent_ucb1"),
        "full_sharing_ucb": scenarios.AlgorithmSpec("full_sharing_ucb"),
    },
    seeds=2,
    checkpoints=3,
    claims=(
        scenarios.Claim(
            "reversed",
            "independent learners beat full sharing (false)",
            lambda results: scenarios.ClaimVerdict(False, "measured the other way"),
        ),
        scenarios.Claim(
            "unexplained", "a claim without a recorded reason", lambda r: scenarios.ClaimVerdict(False, "no")
        ),
        scenarios.Claim(
            "holds",
            "a true statement",
            lambda r: scenarios.ClaimVerdict(True, "yes"),
            pass_rate=scenarios.PassRate(7, 10, "0:100 in blocks of 10"),
        ),
        scenarios.Claim(
            "reliable", "always true", lambda r: scenarios.ClaimVerdict(True, "yes"), scenarios.PassRate(9, 10, "x")
        ),
    ),
    scales={"paper": {"seeds": 100}},
)

SHARING, ALONE = {"algorithm": "full_sharing_ucb"}, {"algorithm": "independent_ucb1"}

TOY_PAPER = Paper(
    key="toypaper",
    citation="A. Author. A toy paper. Nowhere, 2099.",
    items=(
        PaperItem(
            "Fig. 1",
            TOY.name,
            "regret of two learners",
            (
                PaperValue(
                    "ratio sharing / alone",
                    "2.36 (section 6.2 text)",
                    final_ratio("group_regret", SHARING, ALONE),
                    "measured because of X",
                ),
                PaperValue("regret of full sharing", NOT_REPORTED, final_mean("group_regret", **SHARING)),
                PaperValue("regret by algorithm", NOT_REPORTED, final_by("group_regret", "algorithm")),
                PaperValue("a missing algorithm", "1.0 (Table 9)", final_mean("group_regret", algorithm="nope")),
            ),
        ),
        PaperItem(
            "Fig. 2", "toypaper/not_run", "never swept", (PaperValue("x", NOT_REPORTED, final_ratio("a", {}, {})),)
        ),
    ),
    reasons={
        f"{TOY.name}:reversed": "the measured reason of the reversal",
        f"{TOY.name}:holds": "the measured reason it holds rarely",
    },
)


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    run_sweep(TOY, root / TOY.name, backend="inprocess")
    outcome = scenario_outcome(root / TOY.name, TOY)
    paths = write_paper_report(TOY_PAPER, {TOY.name: outcome}, root / "replication", root)
    return root, outcome, paths


def test_paper_numbers_sit_in_the_paper_column_beside_ours(toy_report):
    root, _, (markdown, _) = toy_report
    text = markdown.read_text()
    means = final_means(load_results(root / TOY.name), "group_regret")
    sharing, alone = means[("full_sharing_ucb",)], means[("independent_ucb1",)]
    assert "| quantity | paper | ours (ci scale, 2 trials) |" in text
    assert f"| ratio sharing / alone | 2.36 (section 6.2 text) | {sharing / alone:.2f} |" in text
    assert f"| regret of full sharing | {NOT_REPORTED} | {number(sharing)} |" in text
    by_algorithm = f"full_sharing_ucb: {number(sharing)}; independent_ucb1: {number(alone)}"
    assert f"| regret by algorithm | {NOT_REPORTED} | {by_algorithm} |" in text
    assert (
        "| a missing algorithm | 1.0 (Table 9) | not measured (ValueError: no runs with {'algorithm': 'nope'}" in text
    )


def test_paper_report_states_scale_trials_claims_and_reasons(toy_report):
    root, outcome, (markdown, page) = toy_report
    text = markdown.read_text()
    assert text.startswith("# Replication report: toypaper\n\nPaper: A. Author. A toy paper. Nowhere, 2099.")
    assert "**CI scale; paper scale pending.**" in text
    assert "**1 of 2 scenario(s) not run yet** (toypaper/not_run)" in text
    assert f"| {TOY.name} | ci | 2 | 100 | fewer trials than the paper (2 of 100) |" in text
    assert (
        f"| toypaper/not_run | not run | - | - | fedbandit sweep toypaper/not_run --out {root / 'toypaper/not_run'} |"
        in text
    )
    row = "| reversed | independent learners beat full sharing (false) | FAIL | measured the other way | none cited |"
    assert f"{row} not measured |" in text
    assert (
        "| holds | a true statement | PASS | yes | none cited | 7/10 blocks (0:100 in blocks of 10, ci scale) |" in text
    )
    failures = text.partition("## What does not reproduce, and why")[2]
    assert (
        "| Fig. 1 | claim reversed (FAIL) | measured the other way | the measured reason of the reversal |" in failures
    )
    assert f"| Fig. 1 | claim unexplained (FAIL) | no | {NO_REASON} |" in failures
    assert "| Fig. 1 | ratio sharing / alone | paper 2.36 (section 6.2 text); ours " in failures
    assert "| Fig. 1 | claim holds (PASS here, 7/10 blocks) | yes | the measured reason it holds rarely |" in failures
    assert "reliable" not in failures
    html = page.read_text()
    for figure in outcome.figures:
        copy = f"figures/toypaper_fig1/{figure.png.name}"
        assert f"]({copy})" in text and f'<img src="{copy}"' in html


def test_paper_report_figures_are_small_copies(toy_report):
    root, outcome, _ = toy_report
    for figure in outcome.figures:
        with (
            PIL.open(figure.png) as original,
            PIL.open(root / "replication/figures/toypaper_fig1" / figure.png.name) as copy,
        ):
            scale = PAPER_REPORT_DPI / original.info["dpi"][0]
            assert copy.mode == "P" and round(copy.info["dpi"][0]) == PAPER_REPORT_DPI
            assert copy.size == (round(original.width * scale), round(original.height * scale))


def test_cli_replicate_takes_paper_names(tmp_path, capsys):
    from fedbandit_envs.cli import main

    assert main(["replicate", "zhu", "--root", str(tmp_path), "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert sorted(re.findall(r"^scenario (\S+):", printed, re.M)) == paper_scenarios(["zhu"])
    assert main(["replicate", "nope", "--root", str(tmp_path), "--dry-run"]) == 2
    assert "fedbandit replicate: error: unknown papers ['nope']" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--report-dir", str(tmp_path)]) == 2
    assert "add --replication" in capsys.readouterr().err


def test_combined_report_writes_and_links_the_paper_reports(toy_report, monkeypatch):
    from fedbandit_envs.bench import report

    root, _, _ = toy_report
    monkeypatch.setitem(scenarios._CATALOGUE, TOY.name, TOY)
    monkeypatch.setattr(report, "PAPER_KEYS", ("toypaper",))
    monkeypatch.setattr(report, "get_paper", {"toypaper": TOY_PAPER}.__getitem__)
    written = report.write_replication_report(root, [TOY.name], papers_dir=root / "papers")
    assert written[:2] == [root / "papers/toypaper.md", root / "papers/toypaper.html"]
    assert "Per-paper reports: [toypaper](papers/toypaper.html)." in (root / "replication.md").read_text()
