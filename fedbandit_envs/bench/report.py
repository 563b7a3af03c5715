"""Reports: a Markdown file and a self-contained HTML page per scenario, and a replication report.

:func:`write_report` reads a sweep directory (``config.json`` and the results table), draws the figures
(``figures/<name>.png`` and ``.svg``), evaluates the scenario's claims and writes ``report.md`` (figures
linked) and ``report.html`` (figures inlined as SVG: one file to send or archive). Sections: the claims
with their measured evidence, acceptance band and verdict (the spec codes a statement cites linked to their
entries in ``docs/decisions``, see :mod:`fedbandit_envs.bench.decisions`), the final regret / cost / privacy
table (mean ± 95% CI over seeds, units stated), the leaderboard (ties where Holm-corrected Welch tests cannot
separate entries, see :mod:`fedbandit_envs.bench.leaderboard`), the figures, and the configuration with
package versions. Every table is followed by a legend saying what its ± and units mean.

:func:`write_replication_report` does this for every paper scenario found under a root directory
(``<root>/<scenario name>/``) and writes ``replication.md`` / ``replication.html``: one row per
scenario with each claim's verdict, and the scenarios not run yet with the command that runs them.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from fedbandit_envs.bench.decisions import DOCS as DECISION_DOCS
from fedbandit_envs.bench.decisions import anchor, decisions_base, find_codes, linked_codes
from fedbandit_envs.bench.jobs import canonical_json, resolve_scenario, to_json
from fedbandit_envs.bench.leaderboard import leaderboard, leaderboard_legend, leaderboard_table
from fedbandit_envs.bench.papers import KEYS as PAPER_KEYS
from fedbandit_envs.bench.papers import Paper, PaperValue, get_paper, paper_of
from fedbandit_envs.bench.scenarios import Claim, FigureSpec, Scenario, get, names
from fedbandit_envs.bench.store import FIGURES, REPORT, atomic_write, load_config, read_results, table_paths
from fedbandit_envs.bench.tables import (
    Link,
    RichText,
    final_legend,
    final_summary,
    html_cell,
    html_table,
    markdown_table,
    nonfinite_note,
)
from fedbandit_envs.run import Results

VERDICTS = ("PASS", "FAIL", "ERROR")

#: The reason shown for a claim that does not pass and has no measured reason recorded (:class:`.papers.Paper`).
NO_REASON = "no measured reason recorded yet: see the evidence and the decision entry"

#: What the claim tables show (written under them).
CLAIMS_LEGEND = (
    "Evidence quotes final values at the last checkpoint, as means over seeds unless it says otherwise; a "
    "'± x SE' in evidence is a standard error of the mean over seeds, not a 95% interval. "
    "The acceptance band is the tolerance the claim's check applies."
)


@dataclass(frozen=True)
class ClaimOutcome:
    """A claim checked on results: ``status`` is PASS, FAIL or ERROR (the check raised).

    ``pass_rate`` is the claim's measured rate over disjoint seed blocks (``Claim.pass_rate``), "" if unmeasured;
    ``band`` is its acceptance band (``Claim.band``), "" if the claim does not state one.
    """

    name: str
    description: str
    status: str
    evidence: str
    pass_rate: str = ""
    band: str = ""

    @property
    def band_text(self) -> str:
        """The acceptance band as shown in reports ("not stated" when the claim gives none)."""
        return self.band or "not stated"


@dataclass(frozen=True)
class FigureFile:
    """A figure written as PNG and SVG."""

    name: str
    title: str
    png: Path
    svg: Path


#: Settings of ``config.json`` that decide a claim's outcome: a pass rate applies only where they are the scenario's.
MEASURED_SETTINGS = ("env_kwargs", "sweep", "exclude", "wrappers", "checkpoints")


def changed_settings(config: Mapping[str, Any], scenario: Scenario) -> list[str]:
    """What the sweep recorded in ``config`` changed from ``scenario`` at its recorded scale (``--set``, ``--seeds``).

    Names the environment keywords that differ, then the other settings of :data:`MEASURED_SETTINGS` that differ,
    then ``"seed count"`` when the number of seeds is not the scale's (a pass rate is over blocks of that many).
    Empty when nothing that decides a claim's outcome changed (e.g. other seeds of the same count).
    """
    from fedbandit_envs.bench.sweep import sweep_config

    try:
        unchanged = sweep_config(resolve_scenario(scenario, config.get("scale", "ci")), "", None, "", "")
    except ValueError:  # a scale this scenario does not define: nothing to compare with
        return []
    changes = []
    ours, theirs = config.get("env_kwargs", {}), unchanged["env_kwargs"]
    if "env_kwargs" in config:
        keys = sorted(set(ours) | set(theirs))
        changes += [key for key in keys if canonical_json(ours.get(key)) != canonical_json(theirs.get(key))]
    for key in MEASURED_SETTINGS[1:]:
        if key in config and canonical_json(config[key]) != canonical_json(unchanged[key]):
            changes.append(key)
    if "seeds" in config and len(config["seeds"]) != len(unchanged["seeds"]):
        changes.append("seed count")
    return changes


def rate_text(claim: Claim, changes: Sequence[str] = ()) -> str:
    """A claim's measured pass rate as reports show it ("" if unmeasured).

    When the sweep ``changes`` settings of the scenario (:func:`changed_settings`), the rate was measured on the
    unchanged scenario and says so: it is not how often the claim holds with the settings of this sweep.
    """
    if claim.pass_rate is None:
        return ""
    if not changes:
        return str(claim.pass_rate)
    return f"{claim.pass_rate}, measured on the unchanged scenario, not with this sweep's {', '.join(changes)}"


def evaluate_claims(claims: Sequence[Claim], results: Results, changes: Sequence[str] = ()) -> list[ClaimOutcome]:
    """Check every claim on ``results``; a check that raises gives an ERROR outcome naming the exception.

    ``changes``: the settings the sweep changed from the scenario's (:func:`changed_settings`), named beside
    the measured pass rates (:func:`rate_text`).
    """
    outcomes = []
    for claim in claims:
        rate = rate_text(claim, changes)
        try:
            verdict = claim.check(results)
        except Exception as error:  # a broken check must not hide the other claims
            evidence = f"{type(error).__name__}: {error}"
            outcomes.append(ClaimOutcome(claim.name, claim.description, "ERROR", evidence, rate, claim.band))
            continue
        status = "PASS" if verdict.passed else "FAIL"
        outcomes.append(ClaimOutcome(claim.name, claim.description, status, verdict.evidence, rate, claim.band))
    return outcomes


def draw_figures(
    results: Results, directory: str | Path, params: Sequence[str] = (), figures: Sequence[FigureSpec] = ()
) -> list[FigureFile]:
    """Draw the report's figures into ``directory/figures`` (PNG and SVG); returns them in report order.

    Always: regret vs slot (one line per algorithm and value of the last swept parameter, one panel per
    value of the others; parameters swept over a single value are constants and split nothing) and regret vs
    communication cost. With privacy (an ``epsilon`` parameter, or an ``epsilon_max`` column with a value):
    regret vs epsilon. Then the scenario's own ``figures`` (the mirrors of the paper's), or, when it declares
    none, final regret against each varying swept parameter (points with error bars per category for a
    categorical one, such as ``instance_seed``: :func:`~fedbandit_envs.bench.plots.is_categorical`). Every
    figure keeps its legend
    outside the axes and one distinct line style per line (:mod:`fedbandit_envs.bench.plots`).
    """
    from fedbandit_envs.bench import plots

    # A parameter swept over one value is a constant: it neither splits lines nor panels nor gets its own figure.
    varying = [p for p in params if len({str(row.get(p)) for row in results.curves}) > 1]
    folder = Path(directory) / FIGURES
    # Privacy is measured only where some run accounts for it (non-private runs leave epsilon_max empty).
    measured_epsilon = any(plots.is_number(row.get("epsilon_max")) for row in results.curves)
    drawn = []

    def paths(name: str) -> tuple[Path, Path]:
        return folder / f"{name}.png", folder / f"{name}.svg"

    title = "Group pseudo-regret vs slot"
    hue, facet = ("algorithm", *varying[-1:]), varying[:-1]
    plots.plot_figure(results, FigureSpec("regret", hue=hue, facet=facet, title=title), paths("regret"), runs=varying)
    drawn.append(FigureFile("regret", title, *paths("regret")))
    plots.plot_regret_vs_cost(results, paths("regret_vs_cost"), runs=varying)
    drawn.append(FigureFile("regret_vs_cost", "Final regret vs communication cost", *paths("regret_vs_cost")))
    if "epsilon" in params or measured_epsilon:
        plots.plot_regret_vs_epsilon(results, paths("regret_vs_epsilon"), runs=varying)
        drawn.append(FigureFile("regret_vs_epsilon", "Final regret vs privacy", *paths("regret_vs_epsilon")))
    specs = list(figures) or [
        FigureSpec(f"final_vs_{p}", x=p, facet=[q for q in varying if q != p], title=f"Final group regret vs {p}")
        for p in varying
        if p != "epsilon"
    ]
    algorithms = {row["algorithm"] for row in results.curves}
    for spec in specs:
        if len(algorithms) > 1 and not _tells_algorithms_apart(spec):  # e.g. a learner added by compare
            spec = replace(spec, hue=(*spec.hue, "algorithm"))
        plots.plot_figure(results, spec, paths(spec.name), runs=[p for p in params if p != spec.x])
        drawn.append(FigureFile(spec.name, spec.title or spec.name, *paths(spec.name)))
    return drawn


def _tells_algorithms_apart(spec: FigureSpec) -> bool:
    """Whether ``spec`` draws each algorithm apart (by hue, panel, axis, series pattern or a selection naming one).

    A scenario's figure of one algorithm groups its lines by parameters only; with other algorithms in the results
    (``fedbandit compare`` adds the learner) the lines would average them, so the report splits them by algorithm.
    """
    if "algorithm" in (*spec.hue, *spec.facet, spec.x) or spec.series:
        return True
    return bool(spec.select) and all("algorithm" in entry for entry in spec.select)


@dataclass
class Document:
    """A report as blocks, rendered to Markdown (figures linked) or self-contained HTML (figures inlined)."""

    title: str
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def heading(self, text: str) -> None:
        """A section heading."""
        self.blocks.append(("heading", text))

    def subheading(self, text: str) -> None:
        """A heading one level below :meth:`heading`."""
        self.blocks.append(("subheading", text))

    def paragraph(self, text: str | RichText) -> None:
        """A paragraph of text (plain, or with links)."""
        self.blocks.append(("paragraph", text))

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], row_classes: Sequence[str] = ()) -> None:
        """A table (cells are text or :class:`~fedbandit_envs.bench.tables.Link`)."""
        self.blocks.append(("table", (header, rows, row_classes)))

    def figure(self, figure: FigureFile) -> None:
        """A figure (PNG shown, SVG linked in Markdown and inlined in HTML)."""
        self.blocks.append(("figure", figure))

    def image(self, png: Path, title: str) -> None:
        """A PNG image with a caption (linked, never inlined: for reports whose figures sit beside them)."""
        self.blocks.append(("image", (png, title)))

    def code(self, text: str) -> None:
        """A preformatted block (configuration)."""
        self.blocks.append(("code", text))

    def _rendered(self, renderers: Mapping[str, Callable[[Any], str]]) -> list[str]:
        """Each block rendered by the renderer of its kind."""
        return [renderers[kind](value) for kind, value in self.blocks]

    def markdown(self, base: Path) -> str:
        """Markdown; figure paths relative to ``base`` (the report's directory)."""

        def figure(value: FigureFile) -> str:
            png, svg = value.png.relative_to(base).as_posix(), value.svg.relative_to(base).as_posix()
            return f"![{value.title}]({png})\n\n*{value.title}* ([SVG]({svg}))"

        def image(value: tuple[Path, str]) -> str:
            return f"![{value[1]}]({value[0].relative_to(base).as_posix()})\n\n*{value[1]}*"

        blocks = self._rendered(
            {
                "heading": "## {}".format,
                "subheading": "### {}".format,
                "paragraph": str,
                "table": lambda value: markdown_table(value[0], value[1]),
                "figure": figure,
                "image": image,
                "code": "```json\n{}\n```".format,
            }
        )
        return "\n\n".join([f"# {self.title}", *blocks]) + "\n"

    def html(self, base: Path | None = None) -> str:
        """One HTML page: CSS inline, figures as inline SVG; images link their PNG relative to ``base``."""

        def figure(value: FigureFile) -> str:
            return (
                f'<figure id="figure-{html.escape(value.name)}">{_inline_svg(value.svg.read_text())}'
                f"<figcaption>{html.escape(value.title)}</figcaption></figure>"
            )

        def image(value: tuple[Path, str]) -> str:
            if base is None:
                raise ValueError("a document with images needs the base directory its PNG paths are relative to")
            src = html.escape(value[0].relative_to(base).as_posix())
            caption = html.escape(value[1])
            return f'<figure><img src="{src}" alt="{caption}"><figcaption>{caption}</figcaption></figure>'

        blocks = self._rendered(
            {
                "heading": lambda text: f"<h2>{html.escape(text)}</h2>",
                "subheading": lambda text: f"<h3>{html.escape(text)}</h3>",
                "paragraph": lambda text: f"<p>{html_cell(text)}</p>",
                "table": lambda value: html_table(*value),
                "figure": figure,
                "image": image,
                "code": lambda text: f"<pre>{html.escape(text)}</pre>",
            }
        )
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(self.title)}</title>'
            f"<style>{_CSS}</style></head><body>\n"
            + "\n".join([f"<h1>{html.escape(self.title)}</h1>", *blocks])
            + "\n</body></html>\n"
        )

    def write(self, directory: Path, stem: str) -> list[Path]:
        """Write ``<stem>.md`` and ``<stem>.html`` atomically into ``directory``."""
        written = []
        for suffix, text in ((".md", self.markdown(directory)), (".html", self.html(directory))):
            written.append(atomic_write(directory / f"{stem}{suffix}", partial(Path.write_text, data=text)))
        return written


_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}"
    "th{background:#f3f3f3}tr.PASS td{background:#e9f7ec}tr.FAIL td{background:#fdecea}"
    "tr.ERROR td{background:#fff4d6}figure{margin:1.5rem 0}figure svg,figure img{max-width:100%;height:auto}"
    "figcaption{font-style:italic}pre{background:#f6f6f6;padding:1rem;overflow:auto}"
)


def _inline_svg(text: str) -> str:
    """An SVG file's ``<svg>`` element (XML declaration and doctype removed) for inlining in HTML."""
    return re.sub(r"^.*?(?=<svg)", "", text, count=1, flags=re.S)


def claims_scenario(config: Mapping[str, Any], scenario: Scenario | None) -> tuple[Scenario | None, str]:
    """The scenario whose claims and figures apply (given, or registered under the config's name) and a note."""
    if scenario is not None:
        return scenario, ""
    if "scenario" not in config and "algorithms" in config:
        return None, "These results come from `fedbandit run`, not from a scenario's sweep: no claims to check."
    name = config.get("scenario")
    if isinstance(name, str):
        try:
            return get(name), ""
        except ValueError:
            pass
    return None, f"scenario {name!r} is not registered here, so its claims cannot be checked."


def plot_directory(
    directory: str | Path, scenario: Scenario | None = None, allow_incomplete: bool = False
) -> list[FigureFile]:
    """Draw the figures of the sweep in ``directory`` (see :func:`draw_figures`) into ``directory/figures``.

    Incomplete or changed tables are refused unless ``allow_incomplete``
    (:func:`~fedbandit_envs.bench.store.read_results`).
    """
    config = load_config(directory)
    scenario, _ = claims_scenario(config, scenario)
    params = list(config.get("parameters", {}).values())
    results, _ = read_results(directory, allow_incomplete)
    return draw_figures(results, directory, params, scenario.figures if scenario else ())


@dataclass
class ScenarioOutcome:
    """A sweep directory read, drawn and checked: what its report and the paper reports are made of.

    Attributes:
        name: the scenario's name (from ``config.json``, else the scenario's, else the directory's).
        directory: the sweep directory.
        results: its results.
        config: its ``config.json``.
        scenario: the scenario whose claims were checked (None when it is not registered here).
        figures: the figures drawn into ``directory/figures``.
        claims: the claim outcomes.
        document: the scenario's report.
        changes: the settings the sweep changed from the scenario's (:func:`changed_settings`; empty without one).
    """

    name: str
    directory: Path
    results: Results
    config: dict[str, Any]
    scenario: Scenario | None
    figures: list[FigureFile]
    claims: list[ClaimOutcome]
    document: Document
    changes: list[str]


def scenario_outcome(
    directory: str | Path,
    scenario: Scenario | None = None,
    allow_incomplete: bool = False,
    budgets: Mapping[str, float | None] | None = None,
) -> ScenarioOutcome:
    """Read, draw and check the sweep in ``directory`` (drawing its figures); see :func:`build_report`."""
    directory = Path(directory)
    results, completeness = read_results(directory, allow_incomplete)
    config = load_config(directory)
    scenario, note = claims_scenario(config, scenario)
    params = list(config.get("parameters", {}).values())
    figures = draw_figures(results, directory, params, scenario.figures if scenario else ())
    changes = changed_settings(config, scenario) if scenario is not None else []
    claims = evaluate_claims(scenario.claims if scenario else (), results, changes)
    name = config.get("scenario") or (scenario.name if scenario else directory.name)
    paper, base = (scenario.paper if scenario else ""), decisions_base(directory)
    doc = Document(f"Report: {name}")
    if completeness:
        doc.paragraph(f"Warning: {completeness}.")
    description = config.get("description") or (scenario.description if scenario is not None else None)
    if description is not None:
        doc.paragraph(linked_codes(description, paper, base))
    versions = ", ".join(f"{k} {v}" for k, v in config.get("versions", {}).items())
    seeds = config.get("seeds", [])
    doc.paragraph(
        f"Scale {config.get('scale', '?')}, {len(seeds)} seed(s), checkpoints {config.get('checkpoints', '?')}, "
        f"table {', '.join(p.name for p in table_paths(directory).values())}" + (f"; {versions}." if versions else ".")
    )
    doc.heading("Claims")
    if claims:
        passed = sum(c.status == "PASS" for c in claims)
        doc.paragraph(f"{passed} of {len(claims)} claim(s) pass.")
        rows = [
            [
                c.name,
                linked_codes(c.description, paper, base),
                c.status,
                c.evidence,
                c.band_text,
                c.pass_rate or "not measured",
            ]
            for c in claims
        ]
        header = ["claim", "statement", "verdict", "evidence", "acceptance band", "pass rate over seed blocks"]
        doc.table(header, rows, [c.status for c in claims])
        doc.paragraph(CLAIMS_LEGEND)
    else:
        doc.paragraph(note or "This scenario states no claims.")
    doc.heading("Final results (mean ± 95% CI over seeds)")
    doc.table(*final_summary(results, params))
    doc.paragraph(" ".join(filter(None, (nonfinite_note(results, params), final_legend(results)))))
    doc.heading("Leaderboard (within each parameter point; ties where the seeds cannot separate entries)")
    max_cost, max_epsilon = (budgets or {}).get("max_cost"), (budgets or {}).get("max_epsilon")
    doc.table(*leaderboard_table(leaderboard(results, params, max_cost=max_cost, max_epsilon=max_epsilon), params))
    doc.paragraph(leaderboard_legend() + _budgets_text(max_cost, max_epsilon))
    doc.heading("Figures")
    for figure in figures:
        doc.figure(figure)
    doc.heading("Configuration")
    doc.code(json.dumps(config, indent=2, default=to_json))
    return ScenarioOutcome(name, directory, results, config, scenario, figures, claims, doc, changes)


def build_report(
    directory: str | Path,
    scenario: Scenario | None = None,
    allow_incomplete: bool = False,
    budgets: Mapping[str, float | None] | None = None,
) -> tuple[Document, list[ClaimOutcome]]:
    """The report document of a sweep directory and its claim outcomes (figures are drawn as a side effect).

    Incomplete or changed tables are refused unless ``allow_incomplete``; then, and for tables that
    cannot be verified, the report says so at the top (:func:`~fedbandit_envs.bench.store.read_results`).
    ``budgets``: the leaderboard's ``max_cost`` / ``max_epsilon`` (see :func:`write_report`).
    """
    outcome = scenario_outcome(directory, scenario, allow_incomplete, budgets)
    return outcome.document, outcome.claims


def write_report(
    directory: str | Path,
    scenario: Scenario | None = None,
    allow_incomplete: bool = False,
    budgets: Mapping[str, float | None] | None = None,
) -> list[Path]:
    """Write ``report.md``, ``report.html`` and ``figures/`` for the sweep in ``directory``; returns the reports.

    Args:
        directory: a sweep's results directory (the ``--out`` of ``fedbandit sweep``).
        scenario: the scenario whose claims are checked (default: the registered one named in ``config.json``).
        allow_incomplete: report tables that lack runs or changed since written, saying so at the top
            (otherwise such tables raise :class:`~fedbandit_envs.bench.store.IncompleteResults`).
        budgets: ``{"max_cost": ..., "max_epsilon": ...}`` of the leaderboard (``fedbandit compare``'s): entries
            over a budget, or without the measure it bounds, get no rank, and the report states the budgets.
    """
    doc, _ = build_report(directory, scenario, allow_incomplete, budgets)
    return doc.write(Path(directory), REPORT)


def _budgets_text(max_cost: float | None, max_epsilon: float | None) -> str:
    """The sentence naming the leaderboard's budgets ("" without any)."""
    given = [(name, value) for name, value in (("cost", max_cost), ("epsilon", max_epsilon)) if value is not None]
    if not given:
        return ""
    named = ", ".join(f"{name} at most {value:g}" for name, value in given)
    return f" Budgets: {named} (mean final values); entries over a budget, or without its measure, are not ranked."


def paper_scenarios(papers: Sequence[str] | None = None) -> list[str]:
    """Names of the registered scenarios that reproduce a paper (every scenario whose paper is not ``"suite"``).

    ``papers``: only those of these papers (the prefixes of scenario names, :data:`.papers.KEYS`; None: all).
    """
    unknown = sorted(set(papers or ()) - set(PAPER_KEYS))
    if unknown:
        raise ValueError(f"unknown papers {unknown}; choose from {list(PAPER_KEYS)} (none: all)")
    chosen = [name for name in names() if get(name).paper != "suite"]
    return chosen if not papers else [name for name in chosen if paper_of(name) in papers]


#: A claim whose measured pass rate over seed blocks is below this share is listed as not reproducing reliably.
UNRELIABLE_BELOW = 0.9

#: Resolution of the figures copied into paper reports (kept small enough to commit).
PAPER_REPORT_DPI = 100


def write_replication_report(
    root: str | Path,
    scenarios: Sequence[str] | None = None,
    allow_incomplete: bool = False,
    papers_dir: str | Path | None = None,
) -> list[Path]:
    """Write the per-scenario, per-paper and combined replication reports for the paper scenarios under ``root``.

    Writes ``<root>/<scenario>/report.*`` for every scenario run, one report per paper among the chosen
    scenarios' papers (:func:`write_paper_report`, into ``papers_dir``) and ``<root>/replication.md`` /
    ``.html``: one row per scenario with each claim's verdict, links to the paper reports, and the scenarios
    not run yet with the command that runs them.

    Args:
        root: directory holding one results directory per scenario, ``<root>/<scenario name>/``.
        scenarios: the scenarios to include (default: :func:`paper_scenarios`).
        allow_incomplete: as in :func:`write_report`, for every scenario.
        papers_dir: where the paper reports go (default ``<root>/replication``).
    """
    root = Path(root)
    chosen = list(scenarios) if scenarios is not None else paper_scenarios()
    papers_dir = Path(papers_dir) if papers_dir is not None else root / "replication"
    doc = Document("Replication report")
    rows, classes, missing = [], [], []
    outcomes: dict[str, ScenarioOutcome] = {}
    totals = {status: 0 for status in VERDICTS}
    for name in chosen:
        directory = root / name
        if "curves" not in table_paths(directory):
            missing.append([name, get(name).paper, f"fedbandit sweep {name} --out {directory}"])
            continue
        outcome = outcomes[name] = scenario_outcome(directory, allow_incomplete=allow_incomplete)
        outcome.document.write(directory, "report")
        scale = outcome.config.get("scale", "?")
        scenario_rows = [[name, scale, c.name, c.status, c.evidence, c.band_text] for c in outcome.claims] or [
            [name, scale, "-", "-", "", ""]
        ]
        for i, row in enumerate(scenario_rows):
            row.append(Link("report", f"{name}/report.html") if i == 0 else "")
        rows += scenario_rows
        classes += [c.status for c in outcome.claims] or [""]
        for claim in outcome.claims:
            totals[claim.status] += 1
    written = []
    links: list[str | Link] = ["Per-paper reports: "]
    for key in dict.fromkeys(paper_of(name) for name in chosen if paper_of(name) in PAPER_KEYS):
        paper_files = write_paper_report(get_paper(key), outcomes, papers_dir, root)
        written += paper_files
        href = Path(os.path.relpath(paper_files[1], root)).as_posix()  # the HTML, as the scenario links
        links += [", " if len(links) > 1 else "", Link(key, href)]
    doc.paragraph(
        f"{len(chosen) - len(missing)} of {len(chosen)} scenario(s) run; claims: "
        + ", ".join(f"{totals[s]} {s}" for s in VERDICTS)
        + "."
    )
    if len(links) > 1:
        doc.paragraph(RichText((*links, ".")))
    doc.heading("Claims per scenario")
    doc.table(["scenario", "scale", "claim", "verdict", "evidence", "acceptance band", "report"], rows, classes)
    doc.paragraph(CLAIMS_LEGEND)
    if missing:
        doc.heading("Not run yet")
        doc.table(["scenario", "paper", "command"], missing)
    if not chosen:
        doc.paragraph("No paper scenarios are registered yet (`fedbandit list` shows the catalogue).")
    root.mkdir(parents=True, exist_ok=True)
    return [*written, *doc.write(root, "replication")]


def _measured(value: PaperValue, results: Results) -> str:
    """Our value of a paper quantity, or why it could not be measured."""
    try:
        return value.ours(results)
    except Exception as error:  # one broken measurement must not hide the others
        return f"not measured ({type(error).__name__}: {error})"


def _copy_figure(figure: FigureFile, folder: Path) -> Path:
    """``figure``'s PNG copied into ``folder`` at :data:`PAPER_REPORT_DPI` (downscaled if finer), 256 colours."""
    from PIL import Image

    target = folder / figure.png.name
    folder.mkdir(parents=True, exist_ok=True)
    with Image.open(figure.png) as image:
        dpi = float(image.info.get("dpi", (PAPER_REPORT_DPI,))[0])
        scale = min(1.0, PAPER_REPORT_DPI / dpi)
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        small = image.convert("RGB").resize(size, Image.Resampling.LANCZOS) if scale < 1 else image.convert("RGB")
    # a 256-colour palette: a third of the size of the full-colour file, indistinguishable for line plots
    small = small.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)

    def save(path: Path) -> None:
        small.save(path, format="PNG", optimize=True, dpi=(PAPER_REPORT_DPI, PAPER_REPORT_DPI))

    return atomic_write(target, save)


def decision_entry(claim: ClaimOutcome, scenario: Scenario, paper: Paper, base: str | None) -> str | Link:
    """A link to the decision entry of ``claim``: the first spec code its statement cites, else ``paper.codes``."""
    key = f"{scenario.name}:{claim.name}"
    codes = [code for _, code in find_codes(claim.description)] or ([paper.codes[key]] if key in paper.codes else [])
    if not codes:
        return "none cited"
    if base is None or scenario.paper not in DECISION_DOCS:
        return codes[0]
    return Link(codes[0], f"{base}/{DECISION_DOCS[scenario.paper]}#{anchor(codes[0])}")


def _trials(outcome: ScenarioOutcome) -> tuple[int, int]:
    """Trials (seeds) run, and trials of the scenario's paper scale."""
    ours = len(outcome.config.get("seeds", []))
    scenario = outcome.scenario
    return ours, (len(scenario.at_scale("paper").seed_list()) if scenario is not None else 0)


def write_paper_report(
    paper: Paper, outcomes: Mapping[str, ScenarioOutcome], out: str | Path, root: str | Path = "results"
) -> list[Path]:
    """Write ``<out>/<paper key>.md`` and ``.html``: the paper's figures and tables beside ours, claim by claim.

    At the top: the citation, the scale and trials of every scenario (saying where they are fewer than the
    paper's). Then per :class:`~fedbandit_envs.bench.papers.PaperItem`: our figures (copied into
    ``<out>/figures/<scenario>/``), a table with the paper's reported numbers in a column next to ours, and the
    scenario's claims with verdict, evidence, a link to the decision entry and the measured pass rate. Last, every
    value and claim that does not reproduce (fails here, or passes on fewer than :data:`UNRELIABLE_BELOW` of its
    seed blocks) with its measured reason. Scenarios without results (``outcomes`` lacks them) are listed
    with the command that runs them (``root`` is where it writes).
    """
    out = Path(out)
    base = decisions_base(out)
    doc = Document(f"Replication report: {paper.key}")
    doc.paragraph(f"Paper: {paper.citation}")
    for note in paper.notes:
        doc.paragraph(note)
    scales = {outcomes[name].config.get("scale", "?") for name in paper.scenarios if name in outcomes}
    not_run = [name for name in paper.scenarios if name not in outcomes]
    if not_run:
        doc.paragraph(
            f"**{len(not_run)} of {len(paper.scenarios)} scenario(s) not run yet** ({', '.join(not_run)}): their "
            "figures and claims are missing below; the table gives the command that runs each."
        )
    if scales == {"ci"}:
        doc.paragraph(
            "**CI scale; paper scale pending.** Every scenario below ran at the CI scale (shorter horizons, "
            "smaller populations and fewer trials than the paper); the paper-scale runs are still to do."
        )
    rows = []
    for name in paper.scenarios:
        if name not in outcomes:
            rows.append([name, "not run", "-", "-", f"fedbandit sweep {name} --out {Path(root) / name}"])
            continue
        ours, theirs = _trials(outcomes[name])
        note = f"fewer trials than the paper ({ours} of {theirs})" if ours < theirs else "as many trials as the paper"
        rows.append([name, outcomes[name].config.get("scale", "?"), str(ours), str(theirs), note])
    doc.heading("Scale and trials")
    doc.table(["scenario", "scale", "trials run", "trials at paper scale", "note"], rows)
    doc.paragraph("Trials at paper scale are the paper's number of runs as the scenario's paper scale encodes it.")
    failures: list[list[Any]] = []
    shown_claims: set[str] = set()
    for item in paper.items:
        doc.heading(f"{item.label} ({item.scenario})")
        doc.paragraph(f"The paper: {item.shows}")
        outcome = outcomes.get(item.scenario)
        if outcome is None:
            doc.paragraph(f"Not run yet: `fedbandit sweep {item.scenario} --out {Path(root) / item.scenario}`.")
            continue
        ours, _ = _trials(outcome)
        scale = outcome.config.get("scale", "?")
        value_rows = []
        for value in item.values:
            measured = _measured(value, outcome.results)
            value_rows.append([value.quantity, value.paper, measured])
            if value.reason:
                failures.append([item.label, value.quantity, f"paper {value.paper}; ours {measured}", value.reason])
        doc.subheading("Reported numbers: the paper beside ours")
        doc.table(["quantity", "paper", f"ours ({scale} scale, {ours} trials)"], value_rows)
        doc.subheading("Our figures")
        for figure in outcome.figures:
            doc.image(_copy_figure(figure, out / "figures" / item.scenario.replace("/", "_")), figure.title)
        if outcome.scenario is None or item.scenario in shown_claims:
            continue
        shown_claims.add(item.scenario)
        doc.subheading("Claims")
        claim_rows = []
        rates = {claim.name: claim.pass_rate for claim in outcome.scenario.claims}
        measured_here = not outcome.changes
        for claim in outcome.claims:
            entry = decision_entry(claim, outcome.scenario, paper, base)
            statement = linked_codes(claim.description, outcome.scenario.paper, base)
            rate = rates.get(claim.name)
            claim_rows.append(
                [claim.name, statement, claim.status, claim.evidence, entry, claim.pass_rate or "not measured"]
            )
            unreliable = measured_here and rate is not None and rate.passed < UNRELIABLE_BELOW * rate.blocks
            if claim.status != "PASS" or unreliable:
                reason = paper.reasons.get(f"{item.scenario}:{claim.name}", NO_REASON)
                verdict = (
                    f"{claim.status} here, {rate.passed}/{rate.blocks} blocks" if rate and unreliable else claim.status
                )
                failures.append([item.label, f"claim {claim.name} ({verdict})", claim.evidence, reason])
        doc.table(
            ["claim", "statement", "verdict", "evidence", "decision entry", "pass rate over seed blocks"],
            claim_rows,
            [c.status for c in outcome.claims],
        )
        doc.paragraph(CLAIMS_LEGEND)
    doc.heading("What does not reproduce, and why")
    if failures:
        doc.table(["figure", "claim or quantity", "measured", "measured reason"], failures)
    else:
        doc.paragraph("Every claim checked here passes, and no reported number is known to differ.")
    out.mkdir(parents=True, exist_ok=True)
    return doc.write(out, paper.key)
