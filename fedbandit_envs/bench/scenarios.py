"""Scenarios: a paper experiment (or any benchmark) as data.

A :class:`Scenario` names the environment, the algorithms compared, the parameter sweep, the seeds
and checkpoints, and the :class:`Claim` objects its results must satisfy, at two scales: ``"ci"``
(minutes on a laptop, used by tests) and ``"paper"`` (the published setting). Scenarios are
registered in a catalogue (:func:`register`, :func:`get`, :func:`names`); the modules of
``fedbandit_envs.bench.catalogue`` register the papers' experiments on import.

Sweep keys address where a value goes: ``"env.<kwarg>"`` (environment keyword),
``"alg.<kwarg>"`` (keyword of every algorithm's constructor) or ``"wrapper.<kwarg>"`` (keyword of
every wrapper). Each job of a sweep is one (point, algorithm) pair over all seeds, run by the
scenario's ``runner`` (by default :func:`fedbandit_envs.run.run`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fedbandit_envs.algorithms import check_algorithm_options, is_registered, load_object, resolve_factory
from fedbandit_envs.run import Results
from fedbandit_envs.seeding import resolve_seeds

SCALES = ("ci", "paper")
SWEEP_TARGETS = ("env", "alg", "wrapper")


@dataclass(frozen=True)
class AlgorithmSpec:
    """An algorithm by import path (or a name known to the runner) and constructor keywords.

    The keywords of a registered name are checked when the spec is built, through the algorithm's registered
    config (:func:`~fedbandit_envs.algorithms.check_algorithm_options`); those of a ``"module:Class"`` path when
    a sweep imports it (:meth:`check`). ``shown_as`` is what errors call it when ``path`` is a wrapper that builds
    another class (``fedbandit compare`` names the user's ``module:Class``); it does not identify the algorithm.
    """

    path: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    shown_as: str = field(default="", compare=False)

    @property
    def name(self) -> str:
        """What errors call the algorithm: ``shown_as``, else ``path``."""
        return self.shown_as or self.path

    def __post_init__(self) -> None:
        if is_registered(self.path):
            self.check()

    def check(self, extra: Mapping[str, Any] | None = None) -> None:
        """Check the keywords (``extra`` overriding) through the algorithm's registered config, if it has one."""
        check_algorithm_options(self.path, {**self.kwargs, **(extra or {})})

    def factory(self, extra: Mapping[str, Any] | None = None) -> Callable[[], Any]:
        """A zero-argument factory building a fresh instance (``extra`` keywords override)."""
        target = resolve_factory(self.path)
        kwargs = {**self.kwargs, **(extra or {})}

        def build() -> Any:
            return target(**kwargs)

        build.__name__ = build.__qualname__ = self.name  # errors name the algorithm, not a lambda
        return build


@dataclass(frozen=True)
class WrapperSpec:
    """A wrapper by import path and keywords (e.g. ``wrappers.dp:LaplaceMessageDP``, epsilon=1)."""

    path: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def factory(self, extra: Mapping[str, Any] | None = None) -> Callable[[Any], Any]:
        """A function ``env -> wrapped env``."""
        target = load_object(self.path)
        kwargs = {**self.kwargs, **(extra or {})}
        return lambda env: target(env, **kwargs)


@dataclass(frozen=True)
class ClaimVerdict:
    """The outcome of checking a claim: pass/fail, a sentence of evidence, and the measured numbers."""

    passed: bool
    evidence: str
    values: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PassRate:
    """How often a claim held over disjoint blocks of seeds (measured by ``benchmarks/claim_pass_rates.py``).

    Attributes:
        passed: blocks on which the claim passed.
        blocks: blocks run (disjoint sets of seeds, each as many as the scale uses).
        seeds: the seeds used, e.g. ``"0:80 in blocks of 8"``.
        scale: the scale run (``"ci"`` or ``"paper"``).
    """

    passed: int
    blocks: int
    seeds: str
    scale: str = "ci"

    def __post_init__(self) -> None:
        if not 0 <= self.passed <= self.blocks or self.blocks < 1:
            raise ValueError(f"a pass rate needs 0 <= passed <= blocks, blocks >= 1; got {self.passed}/{self.blocks}")

    def __str__(self) -> str:
        return f"{self.passed}/{self.blocks} blocks ({self.seeds}, {self.scale} scale)"


@dataclass(frozen=True)
class Claim:
    """A qualitative statement about a scenario's results, e.g. "regret decreases in epsilon".

    Attributes:
        name: short identifier.
        description: the statement, in words (as the paper makes it).
        check: a function of the scenario's whole :class:`Results` returning a :class:`ClaimVerdict`.
        pass_rate: how often it held over disjoint blocks of seeds, when measured (:func:`with_pass_rates`).
        band: the acceptance band, in words: the tolerance the check applies (e.g. "each step may rise by up
            to 10% of the previous value"; "exact" for checks without tolerance). Reports show it.
    """

    name: str
    description: str
    check: Callable[[Results], ClaimVerdict]
    pass_rate: PassRate | None = None
    band: str = ""


def with_pass_rates(
    claims: Sequence[Claim], rates: Mapping[str, tuple[int, int]], seeds: str, scale: str = "ci"
) -> tuple[Claim, ...]:
    """``claims`` with their measured pass rates attached: ``rates`` maps a claim name to (passed, blocks)."""
    known = {claim.name for claim in claims}
    unknown = sorted(set(rates) - known)
    if unknown:
        raise ValueError(f"pass rates given for unknown claims {unknown}; the claims are {sorted(known)}")
    return tuple(
        replace(claim, pass_rate=PassRate(*rates[claim.name], seeds, scale)) if claim.name in rates else claim
        for claim in claims
    )


FIGURE_KINDS = ("line", "tradeoff")


@dataclass(frozen=True)
class FigureSpec:
    """A figure of a scenario's report that mirrors a paper figure (drawn by :func:`.plots.plot_figure`).

    Attributes:
        name: file stem of the figure (``figures/<name>.png`` and ``.svg``).
        x: ``"slot"`` (curves over time) or a parameter column (final values against that parameter); with
            ``kind="tradeoff"``, a measured column (e.g. ``"messages"``) whose final value goes on the x axis.
        y: the metric column plotted (e.g. ``"group_regret"``, ``"cost"``, ``"epsilon_max"``).
        hue: columns giving one line per distinct value.
        facet: columns giving one panel per distinct value.
        title: the figure title (e.g. which paper figure it mirrors).
        logx: logarithmic x axis (``True``), linear (``False``) or decided from the data (``None``, see
            :func:`.plots.axis_scale`).
        logy: the same for the y axis.
        band: ``"ci95"`` (95% confidence interval of the mean) or ``"minmax"`` (over seeds).
        kind: ``"line"`` (``y`` against ``x``; a categorical parameter ``x`` gets points with error bars per
            category) or ``"tradeoff"`` (final ``y`` against final ``x``, one point per run configuration, the
            points of a line joined in order of their parameter value).
        series: with ``kind="tradeoff"``, a regular expression matched against the algorithm label: its group
            ``series`` names the line, ``point`` labels the point and ``value`` (a number) orders the points
            along the line (e.g. ``"async gamma=11"`` -> line ``async``, point ``gamma=11``); empty: one line per
            ``hue`` value, points labelled by the other swept parameters.
        names: display names of hue / series values, keyed by ``str(value)``, and of parameter columns in legends and
            point labels, keyed by the column name (e.g. ``{"global_dimension": "d_g"}``).
        xlabel: the x axis label (default: from the column name).
        ylabel: the y axis label (default: from the column name).
        reference: rows matching every ``{column: value}`` are left out of the lines and drawn as one horizontal
            line per hue value at their final mean (e.g. the complete graph as the optimum).
        reference_label: the legend text of the reference lines.
        select: the rows drawn: those matching every ``{column: value}`` of some entry (all rows when empty), e.g.
            the paper's three (algorithm, contamination) combinations out of a full sweep.
    """

    name: str
    x: str = "slot"
    y: str = "group_regret"
    hue: Sequence[str] = ("algorithm",)
    facet: Sequence[str] = ()
    title: str = ""
    logx: bool | None = None
    logy: bool | None = None
    band: str = "ci95"
    kind: str = "line"
    series: str = ""
    names: Mapping[str, str] = field(default_factory=dict)
    xlabel: str = ""
    ylabel: str = ""
    reference: Mapping[str, Any] = field(default_factory=dict)
    reference_label: str = "reference"
    select: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        if self.kind not in FIGURE_KINDS:
            raise ValueError(f"FigureSpec kind must be one of {FIGURE_KINDS}, got {self.kind!r}")
        if self.series and self.kind != "tradeoff":
            raise ValueError(f"FigureSpec {self.name!r}: series patterns apply to kind='tradeoff' only")


@dataclass(frozen=True)
class Scenario:
    """A benchmark experiment as data (see the module docstring).

    Attributes:
        name: unique id, ``"<paper>/<experiment>"``, e.g. ``"li_song/fig4_epsilon"``.
        paper: which paper (or ``"suite"``).
        description: what the experiment shows.
        env_kwargs: environment keywords common to every point.
        algorithms: label -> :class:`AlgorithmSpec`.
        sweep: sweep key (``"env.x"``, ``"alg.x"``, ``"wrapper.x"``) -> values; the cartesian product is swept.
        exclude: points of the product that are not run: a point matching every ``{sweep key: value}`` of
            any entry is left out (e.g. ``{"env.graph": "complete", "alg.gamma": 2}``).
        wrappers: wrappers applied to the env of every job, in order.
        seeds: a number of runs ``n`` (seeds ``0 .. n-1``), explicit seeds (``(100, 101)``, ``range(100, 110)``)
            or their text (``"100:110"``, ``"3,7,9"``; :func:`fedbandit_envs.seeding.parse_seeds`).
        checkpoints: checkpoints per run.
        claims: what the results must show.
        scales: ``{"ci": {...}, "paper": {...}}`` overrides of ``env_kwargs`` keys and of ``seeds`` /
            ``checkpoints`` / ``sweep`` (a dict replacing the sweep).
        runner: ``"module:function"`` called like :func:`fedbandit_envs.run.run` (a runner passes the keywords
            it does not use on to ``run``).
        figures: figures mirroring the paper's (optional; reports always draw regret vs slot, regret
            vs cost and, with privacy, regret vs epsilon).
    """

    name: str
    paper: str
    description: str
    env_kwargs: Mapping[str, Any]
    algorithms: Mapping[str, AlgorithmSpec]
    sweep: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    exclude: Sequence[Mapping[str, Any]] = ()
    wrappers: Sequence[WrapperSpec] = ()
    seeds: int | str | Sequence[int] = 5
    checkpoints: int = 20
    claims: Sequence[Claim] = ()
    scales: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    runner: str = "fedbandit_envs.run:run"
    figures: Sequence[FigureSpec] = ()

    def __post_init__(self) -> None:
        if "/" not in self.name:
            raise ValueError(f"scenario name must look like '<paper>/<experiment>', got {self.name!r}")
        if not self.algorithms:
            raise ValueError(f"scenario {self.name!r} needs at least one algorithm")
        for key in self.sweep:
            target, _, kwarg = key.partition(".")
            if target not in SWEEP_TARGETS or not kwarg:
                raise ValueError(f"sweep key {key!r} must be 'env.<kwarg>', 'alg.<kwarg>' or 'wrapper.<kwarg>'")
            if target == "wrapper" and not self.wrappers:
                raise ValueError(
                    f"sweep key {key!r}: scenario {self.name!r} applies no wrapper, so a wrapper keyword would change "
                    "nothing; sweep 'env.<kwarg>' or 'alg.<kwarg>' keys, or use a scenario with a DP or fault wrapper"
                )
        for entry in self.exclude:
            strangers = sorted(set(entry) - set(self.sweep))
            if not entry or strangers:
                raise ValueError(
                    f"exclude entry {dict(entry)!r} of scenario {self.name!r} must name sweep keys only "
                    f"({sorted(self.sweep)}); unknown: {strangers or 'none given'}"
                )
        unknown = set(self.scales) - set(SCALES)
        if unknown:
            raise ValueError(f"unknown scales {sorted(unknown)}; use {SCALES}")
        self.check_algorithms(registered_only=True)

    def check_algorithms(self, registered_only: bool = False) -> None:
        """Check every algorithm's keywords at every sweep point (its ``alg.*`` values) through its config.

        ``registered_only`` checks the algorithms given by registered name only (a ``"module:Class"`` path is
        not imported). A bad keyword raises a ``TypeError`` / ``ValueError`` naming the algorithm, the scenario,
        the sweep values and the field.
        """
        alg_parts = [sorted(split_point(point)["alg"].items()) for point in self.points()]
        settings = {repr(part): part for part in alg_parts}  # distinct, values may be unhashable
        for label, spec in self.algorithms.items():
            if registered_only and not is_registered(spec.path):
                continue
            for setting in settings.values():
                try:
                    spec.check(dict(setting))
                except (TypeError, ValueError) as error:
                    where = f" with {', '.join(f'alg.{k}={v!r}' for k, v in setting)}" if setting else ""
                    raise type(error)(f"algorithm {label!r} of scenario {self.name!r}{where}: {error}") from error

    def at_scale(self, scale: str) -> Scenario:
        """Return the scenario with the overrides of ``scale`` applied."""
        if scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
        overrides = dict(self.scales.get(scale, {}))
        top = {k: overrides.pop(k) for k in ("seeds", "checkpoints", "sweep") if k in overrides}
        return replace(self, env_kwargs={**self.env_kwargs, **overrides}, **top)

    def seed_list(self) -> tuple[int, ...]:
        """The seeds of the runs, explicit (a count ``n`` gives ``0 .. n-1``)."""
        return resolve_seeds(self.seeds)

    def points(self) -> list[dict[str, Any]]:
        """Every sweep point as ``{sweep key: value}``, less the ``exclude`` ones (one empty point without a sweep)."""
        keys = list(self.sweep)
        product = [dict(zip(keys, values)) for values in itertools.product(*(self.sweep[k] for k in keys))]
        return [
            point
            for point in product
            if not any(all(point[k] == v for k, v in entry.items()) for entry in self.exclude)
        ]


def split_point(point: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Split a sweep point into ``{"env": {...}, "alg": {...}, "wrapper": {...}}`` keyword dicts."""
    parts: dict[str, dict[str, Any]] = {target: {} for target in SWEEP_TARGETS}
    for key, value in point.items():
        target, _, kwarg = key.partition(".")
        parts[target][kwarg] = value
    return parts


_CATALOGUE: dict[str, Scenario] = {}


def register(scenario: Scenario) -> Scenario:
    """Add a scenario to the catalogue (its name must be new)."""
    if scenario.name in _CATALOGUE:
        raise ValueError(f"scenario {scenario.name!r} is already registered")
    _CATALOGUE[scenario.name] = scenario
    return scenario


def paper_registrar(paper: str, prefix: str, **defaults: Any) -> Callable[..., Scenario]:
    """The registration of one paper's scenarios: ``add(name, description, env_kwargs, algorithms, claims)``.

    ``add`` registers a :class:`Scenario` named ``<prefix>/<name>`` of ``paper`` with the ``defaults`` fields
    (e.g. ``runner``, ``seeds``); its own keyword fields override them.
    """

    def add(
        name: str,
        description: str,
        env_kwargs: Mapping[str, Any],
        algorithms: Mapping[str, AlgorithmSpec],
        claims: tuple[Claim, ...],
        **fields: Any,
    ) -> Scenario:
        merged = {**defaults, **fields}
        return register(
            Scenario(f"{prefix}/{name}", paper, description, env_kwargs, algorithms, claims=claims, **merged)
        )

    return add


def _load_catalogue() -> None:
    import importlib
    import pkgutil

    from fedbandit_envs.bench import catalogue

    for module in pkgutil.iter_modules(catalogue.__path__):
        importlib.import_module(f"{catalogue.__name__}.{module.name}")


def names() -> list[str]:
    """Names of every registered scenario, sorted."""
    _load_catalogue()
    return sorted(_CATALOGUE)


def get(name: str) -> Scenario:
    """The scenario called ``name``."""
    _load_catalogue()
    if name not in _CATALOGUE:
        raise ValueError(f"unknown scenario {name!r}; `fedbandit list` shows the catalogue")
    return _CATALOGUE[name]


def run_scenario(scenario: Scenario, scale: str | None = "ci", progress: bool = False) -> Results:
    """Run every (sweep point, algorithm) of ``scenario`` at ``scale`` (None: as given) over its seeds.

    Rows get the sweep values in columns named after the sweep key's keyword (``"alg.epsilon"`` -> ``epsilon``),
    as :mod:`fedbandit_envs.bench.claims` expects. Returns the combined results.
    """
    if scale is not None:
        scenario = scenario.at_scale(scale)
    runner = load_object(scenario.runner)
    seeds = scenario.seed_list()
    results = Results()
    for point in scenario.points():
        parts = split_point(point)
        env = {**scenario.env_kwargs, **parts["env"]}
        wrappers = [spec.factory(parts["wrapper"]) for spec in scenario.wrappers]
        tags = {key.partition(".")[2]: value for key, value in point.items()}
        for label, spec in scenario.algorithms.items():
            part = runner(
                spec.factory(parts["alg"]),
                env,
                seeds,
                checkpoints=scenario.checkpoints,
                progress=progress,
                label=label,
                wrappers=wrappers,
            )
            for row in (*part.curves, *part.agents):
                row.update(tags)
            results.extend(part)
    return results
