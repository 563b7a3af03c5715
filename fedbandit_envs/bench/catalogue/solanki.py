"""Scenarios of Solanki et al. (solanki-pfcb §4): Figs. 2-5 (EXP1-EXP3) and the stress family.

Fig. 2: FCB, homogeneous vs heterogeneous; EXP1 / Fig. 3: regret of NF, FCB, P-FCB; EXP2 / Fig. 4: FRR
against epsilon; EXP3 / Fig. 5: per-agent regret against n; stress: constraint violations.

Every scenario runs with :func:`fedbandit_envs.run.run`, whose rows carry ``frr`` and
``nf_group_regret`` (the non-federated baseline on the same instance and seeds) and the violation
columns. Instances are swept with ``env.instance_seed`` (the spec's protocol: instances x seeds). The
``"ci"`` scale is the spec's reduced config (T = 2e4, 2 instances x 3 seeds; EXP3-U: 12 instances x 1 seed,
see :data:`EXP3_CI`); ``"paper"`` is §4.1 (T = 1e5, 5 instances x 20 seeds). Claims use the means at the
last checkpoint, pooled over instances and seeds; FRR claims use the ratio of the pooled means
``sum R_A / sum R_NF``. The paper's soft numbers are reported in the verdicts' values, not checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from fedbandit_envs.bench.claims import final_means, final_rows
from fedbandit_envs.bench.scenarios import (
    AlgorithmSpec,
    Claim,
    ClaimVerdict,
    FigureSpec,
    Scenario,
    paper_registrar,
    with_pass_rates,
)
from fedbandit_envs.run import Results

RUNNER = "fedbandit_envs.run:run"

#: §4.1: m = 30, alpha = 0.4 (the family default), n = 10, T = 1e5 at paper scale.
COMMON: dict[str, Any] = {"num_agents": 10, "num_producers": 30, "horizon": 100_000}
CI = {"horizon": 20_000, "seeds": 3, "checkpoints": 10}
PAPER = {"horizon": 100_000, "seeds": 20, "checkpoints": 20}
INSTANCES = {"ci": [0, 1], "paper": [0, 1, 2, 3, 4]}
FAMILIES: dict[str, dict[str, Any]] = {
    "uniform": {"instance": "uniform"},
    "normal": {"instance": "normal", "instance_params": {"std": 0.2}},
}

#: The paper's EXP1 ratios (§4.1): regret of NF and P-FCB(1) relative to FCB, and P-FCB(1)'s FRR.
PAPER_EXP1 = {
    "uniform": {"nf_over_fcb": 3.33, "pfcb_over_fcb": 2.36, "frr_pfcb": 0.71},
    "normal": {"nf_over_fcb": 4.94, "pfcb_over_fcb": 3.35, "frr_pfcb": 0.68},
}


# ---------------------------------------------------------------------- claim helpers
def pooled_frr(results: Results, by: Sequence[str] = ("algorithm",)) -> dict[tuple, float]:
    """``sum R_A / sum R_NF`` at each run's last checkpoint, grouped by the ``by`` columns."""
    regret = final_means(results, "group_regret", by)
    reference = final_means(results, "nf_group_regret", by)
    return {key: regret[key] / reference[key] for key in regret}


def _scales(
    sweep: dict[str, list[Any]] | None = None,
    paper_sweep: dict[str, list[Any]] | None = None,
    ci_instances: Sequence[int] = INSTANCES["ci"],
    ci_seeds: int = CI["seeds"],
) -> dict:
    """The ci and paper overrides, with the instance sweep of each scale added to ``sweep``.

    ``ci_instances`` / ``ci_seeds`` replace the reduced config's 2 instances x 3 seeds for a scenario whose
    claim needs more instances at the ci horizon (EXP3-U); the paper scale is always §4.1's.
    """
    ci_sweep = {**(sweep or {}), "env.instance_seed": list(ci_instances)}
    full_sweep = {**(paper_sweep or sweep or {}), "env.instance_seed": INSTANCES["paper"]}
    return {"ci": {**CI, "seeds": ci_seeds, "sweep": ci_sweep}, "paper": {**PAPER, "sweep": full_sweep}}


def exp1_claims(family: str) -> tuple[Claim, ...]:
    """§4.2 checks 13-14: FCB < P-FCB(1) < NF; P-FCB(0.3) >= P-FCB(1) (5% tolerance); FRR ordering."""

    def ordering(results: Results) -> ClaimVerdict:
        means = {key[0]: value for key, value in final_means(results, "mean_regret").items()}
        ok = means["fcb"] < means["pfcb_eps1"] < means["non_federated"]
        ok = ok and means["pfcb_eps0.3"] >= 0.95 * means["pfcb_eps1"]
        measured = {
            "nf_over_fcb": means["non_federated"] / means["fcb"],
            "pfcb_over_fcb": means["pfcb_eps1"] / means["fcb"],
        }
        text = ", ".join(f"{k} {v:.4g}" for k, v in means.items())
        return ClaimVerdict(bool(ok), f"mean regret per agent at T: {text}", {**means, **measured})

    def frr(results: Results) -> ClaimVerdict:
        ratios = {key[0]: value for key, value in pooled_frr(results).items()}
        ok = ratios["pfcb_eps1"] < 1 and ratios["fcb"] < ratios["pfcb_eps1"]
        paper = PAPER_EXP1[family]
        return ClaimVerdict(
            bool(ok),
            f"FRR(P-FCB eps=1) = {ratios['pfcb_eps1']:.3f} < 1 and FRR(FCB) = {ratios['fcb']:.3f} below it "
            f"(paper, soft: {paper['frr_pfcb']})",
            {**{f"frr_{k}": v for k, v in ratios.items()}, **{f"paper_{k}": v for k, v in paper.items()}},
        )

    def significant(results: Results) -> ClaimVerdict:
        finals: dict[str, dict[tuple, float]] = {}
        for row in final_rows(results.curves, ("algorithm", "instance_seed", "seed")):
            finals.setdefault(row["algorithm"], {})[(row["instance_seed"], row["seed"])] = float(row["mean_regret"])
        p_values = {}
        for low, high in (("fcb", "pfcb_eps1"), ("pfcb_eps1", "non_federated")):
            pairs = sorted(set(finals[low]) & set(finals[high]))
            a, b = np.array([finals[low][k] for k in pairs]), np.array([finals[high][k] for k in pairs])
            p_values[f"{low}<{high}"] = (
                float(stats.ttest_rel(a, b, alternative="less").pvalue) if len(pairs) > 1 else float("nan")
            )
        ok = all(p < 0.05 for p in p_values.values())
        text = "; ".join(f"{pair}: one-sided paired p = {p:.3g}" for pair, p in p_values.items())
        return ClaimVerdict(ok, f"over (instance, seed) pairs: {text}", p_values)

    return (
        Claim(
            "ordering",
            "FCB < P-FCB(eps=1) < Non-federated, and P-FCB(eps=0.3) >= P-FCB(eps=1) (check 13).",
            ordering,
            band="strict order of the means, no tolerance; P-FCB(eps=0.3) may be up to 5% below P-FCB(eps=1)",
        ),
        Claim(
            "ordering_significant",
            "Check 13 (full config): FCB < P-FCB(eps=1) < Non-federated, each at the 5% level (one-sided paired "
            "t-tests over instances x seeds).",
            significant,
            band="each one-sided paired t-test over (instance, seed) pairs at p < 0.05",
        ),
        Claim(
            "frr",
            "FRR of P-FCB(eps=1) is below 1 and above FRR of FCB (check 14).",
            frr,
            band="strict: FRR(FCB) < FRR(P-FCB eps=1) < 1 on the pooled ratios, no tolerance (the paper's values are "
            "quoted, not checked)",
        ),
    )


def _falling_trend(
    grouped: Mapping[tuple[Any, ...], float],
    passes: Callable[[list[float], float], bool],
    label: str,
    point_text: Callable[[Any, float], str],
) -> ClaimVerdict:
    """The verdict on a series keyed ``(algorithm, point)``: ``passes(values by point, Spearman rho)``."""
    series = {key[1]: value for key, value in grouped.items()}
    points = sorted(series)
    values = [series[p] for p in points]
    rho = float(stats.spearmanr(points, values).statistic)
    text = ", ".join(point_text(p, v) for p, v in zip(points, values))
    return ClaimVerdict(
        bool(passes(values, rho)), f"{label}: {text}; Spearman {rho:.2f}", dict(zip(map(str, points), values))
    )


def frr_non_increasing(parameter: str) -> Claim:
    """§4.2 check 15: FRR(eps) is non-increasing: Spearman <= -0.8, no step up > 0.05, FRR at the largest eps < 1."""

    def passes(values: list[float], rho: float) -> bool:
        worst_step = max(b - a for a, b in zip(values, values[1:]))
        return rho <= -0.8 and worst_step <= 0.05 and values[-1] < 1

    def check(results: Results) -> ClaimVerdict:
        frr = pooled_frr(results, ("algorithm", parameter))
        return _falling_trend(frr, passes, f"FRR by {parameter}", lambda p, v: f"{p}: {v:.3f}")

    return Claim(
        "frr_non_increasing",
        "FRR of P-FCB does not increase with epsilon (Fig. 4, check 15).",
        check,
        band="Spearman rho <= -0.8; each step may rise by up to 0.05 FRR; FRR at the largest epsilon < 1",
    )


def regret_falls_with_n() -> Claim:
    """§4.2 check 16: per-agent regret at T falls with n: Spearman <= -0.8 and R(largest n) < R(smallest n)."""

    def passes(values: list[float], rho: float) -> bool:
        return rho <= -0.8 and values[-1] < values[0]

    def check(results: Results) -> ClaimVerdict:
        means = final_means(results, "mean_regret", ("algorithm", "num_agents"))
        return _falling_trend(means, passes, "regret per agent", lambda p, v: f"n={p}: {v:.4g}")

    return Claim(
        "regret_falls_with_n",
        "Per-agent regret of P-FCB falls as the number of agents grows (Fig. 5, check 16).",
        check,
        band="Spearman rho of the means <= -0.8 and R(largest n) < R(smallest n); single steps may rise",
    )


def federation_helps_both_settings() -> Claim:
    """§4.2 check 17: FRR(T) < 1 for the homogeneous and the heterogeneous setting (their gap is reported)."""

    def check(results: Results) -> ClaimVerdict:
        ratios = {key[1]: value for key, value in pooled_frr(results, ("algorithm", "homogeneous")).items()}
        ok = all(v < 1 for v in ratios.values()) and len(ratios) == 2
        gap = abs(ratios.get(True, np.nan) - ratios.get(False, np.nan))
        return ClaimVerdict(
            bool(ok),
            f"FRR(T): homogeneous {ratios.get(True, np.nan):.3f}, heterogeneous {ratios.get(False, np.nan):.3f} "
            f"(gap {gap:.3f}; soft target <= 0.15)",
            {"homogeneous": ratios.get(True), "heterogeneous": ratios.get(False), "gap": gap},
        )

    description = "FCB lowers regret in both the homogeneous and heterogeneous settings (check 17)."
    band = "FRR(T) < 1 in both settings, no tolerance (the gap is reported against its soft target, not checked)"
    return Claim("federation_helps", description, check, band=band)


def few_violations(algorithms: Sequence[str], threshold: float = 0.01) -> Claim:
    """§4.2 check 18: after exploration, at most 1% of (agent, round) pairs break QC, for each of ``algorithms``.

    The other algorithms' rates are reported in the verdict's values.
    """

    def check(results: Results) -> ClaimVerdict:
        rates = {key[0]: value for key, value in final_means(results, "violation_rate_after_explore").items()}
        ok = all(rates[a] <= threshold for a in algorithms)
        text = ", ".join(f"{k} {v:.4%}" for k, v in rates.items())
        return ClaimVerdict(bool(ok), f"QC violation rate after exploration: {text}", rates)

    description = f"At most {threshold:.0%} QC violations after exploration (default preset, check 18)."
    band = f"mean violation rate <= {threshold:.0%} for each checked algorithm, no further tolerance"
    return Claim("few_violations", description, check, band=band)


_register = paper_registrar("solanki", "solanki", runner=RUNNER, seeds=PAPER["seeds"], checkpoints=PAPER["checkpoints"])


#: Measured pass rates of the claims at the CI scale over 10 disjoint seed blocks (``benchmarks/claim_pass_rates.py``;
#: block b is seeds 3b .. 3b + 2 on the scale's instances; block 0 is the seeds the tests use): per scenario, the
#: (passed, blocks) of each claim measured and the seeds covered (EXP3 uniform: one seed per block, on its 12
#: instances). Every scenario was measured again after P-FCB's own seed stream changed (one-way, 2026-11-28,
#: evening): EXP2 uniform's claim failed on block 9; every other claim held on every block.
PASS_RATES: dict[str, tuple[dict[str, tuple[int, int]], str]] = {
    "exp1_uniform": ({"ordering": (10, 10), "ordering_significant": (10, 10), "frr": (10, 10)}, "0:30 in blocks of 3"),
    "exp1_normal": ({"ordering": (10, 10), "ordering_significant": (10, 10), "frr": (10, 10)}, "0:30 in blocks of 3"),
    "exp2_uniform": ({"frr_non_increasing": (9, 10)}, "0:30 in blocks of 3"),
    "exp2_normal": ({"frr_non_increasing": (10, 10)}, "0:30 in blocks of 3"),
    "fig2_uniform": ({"federation_helps": (10, 10)}, "0:30 in blocks of 3"),
    "fig2_normal": ({"federation_helps": (10, 10)}, "0:30 in blocks of 3"),
    "stress": ({"few_violations": (10, 10)}, "0:30 in blocks of 3"),
    "exp3_normal": ({"regret_falls_with_n": (10, 10)}, "0:30 in blocks of 3"),
    "exp3_uniform": ({"regret_falls_with_n": (10, 10)}, "0:10 in blocks of 1"),
}


def solanki_scenario(
    name: str,
    *args: Any,
    sweep: dict[str, list[Any]] | None = None,
    figures: Sequence[FigureSpec] = (),
    **scales: Any,
) -> Scenario:
    """Register ``solanki/<name>`` (``args``: description, env_kwargs, algorithms, claims) at §4.1's seeds.

    The claims carry their measured :data:`PASS_RATES`. It sweeps ``sweep`` and each scale's instances and draws
    ``figures`` (the paper's, mirrored); ``scales``: the keywords of :func:`_scales` after the sweep.
    """
    *fields, claims = args
    rates, seeds = PASS_RATES.get(name, ({}, ""))
    claims = with_pass_rates(claims, rates, seeds)
    return _register(name, *fields, claims, sweep=sweep or {}, scales=_scales(sweep, **scales), figures=figures)


# ---------------------------------------------------------------------- the paper's figures, mirrored
#: Sub-figure and caption of each instance family: (a) U[0, 1], (b) N(alpha, 0.2) (Fig. 2(b): N(alpha, 0.1)).
PANELS = {"uniform": ("a", "c, q ~ U[0, 1]"), "normal": ("b", "c, q ~ N(0.4, 0.2)")}
#: The paper's legend names.
NAMES = {
    "non_federated": "Non-federated",
    "fcb": "FCB",
    "pfcb_eps1": "P-FCB (ε = 1)",
    "pfcb_eps0.3": "P-FCB (ε = 0.3)",
    "pfcb": "P-FCB",
    "True": "Homogeneous",
    "False": "Heterogeneous",
}
AVERAGE_REGRET = "average regret per agent"
ROUNDS = "rounds t"


def paper_figure(
    number: int, family: str, caption: str, name: str = "", setting: str = "n = 10, m = 30", **axes: Any
) -> FigureSpec:
    """Fig. ``number`` (a)/(b) of the paper for ``family``: mean over instances and seeds, 95% CI band.

    ``setting``: the fixed sizes the caption states; ``axes``: the :class:`~fedbandit_envs.bench.scenarios.FigureSpec`
    fields (x, y, hue, labels); linear axes as in the paper.
    """
    panel, distribution = PANELS[family]
    if family == "normal" and number == 2:
        distribution = "c, q ~ N(0.4, 0.1)"
    title = f"Fig. {number}({panel}): {caption} ({distribution}; {setting})"
    return FigureSpec(name or f"fig{number}", title=title, names=NAMES, logx=False, logy=False, **axes)


# ---------------------------------------------------------------------- scenarios
PFCB = "solanki_pfcb"
EPSILONS = [0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
NUM_AGENTS = [10, 15, 20, 25, 30, 35, 40]
#: EXP3's ci twin per family (T = 2e4). Family U: per-agent regret is spread widely over agents (a few
#: agents with a producer of |rho q - c| ~ 0.002 and large capacity keep ~2000-4000 regret whatever n), so
#: R(n) over nested agent sets depends mostly on which agents the instance adds; 2 instances x 3 seeds
#: gave Spearman -0.43 (instances 0-5 x 3 seeds: -0.54). 12 instances x 1 seed average that out
#: (measured Spearman -1.0 / -0.96 / -0.89 with seed 0 / 1 / 2 on instances 0-11, -0.96 / -0.93 with seed 0
#: on instances 12-23 / 24-35; see the EXP3 comment in tests/test_solanki_statistical.py). Family N keeps the
#: reduced config.
EXP3_CI: dict[str, dict[str, Any]] = {"uniform": {"ci_instances": range(12), "ci_seeds": 1}}

for family, family_kwargs in FAMILIES.items():
    solanki_scenario(
        f"fig2_{family}",
        f"Fig. 2: FRR of FCB (Alg. 1, sharing every round), homogeneous vs heterogeneous, {family}.",
        {**COMMON, **family_kwargs, **({"instance_params": {"std": 0.1}} if family == "normal" else {})},
        {"fcb_sync": AlgorithmSpec("solanki_fcb_sync")},
        (federation_helps_both_settings(),),
        sweep={"env.homogeneous": [True, False]},
        figures=(
            paper_figure(2, family, "FRR across rounds", y="frr", hue=("homogeneous",), xlabel=ROUNDS, ylabel="FRR"),
        ),
    )
    solanki_scenario(
        f"exp1_{family}",
        f"EXP1 / Fig. 3: regret per agent of NF, FCB, P-FCB (eps 1 and 0.3), family {family}.",
        {**COMMON, **family_kwargs},
        {
            "non_federated": AlgorithmSpec("solanki_nf"),
            "fcb": AlgorithmSpec("solanki_fcb"),
            "pfcb_eps1": AlgorithmSpec(PFCB, {"epsilon": 1.0}),
            "pfcb_eps0.3": AlgorithmSpec(PFCB, {"epsilon": 0.3}),
        },
        exp1_claims(family),
        figures=(
            paper_figure(3, family, "EXP1, regret vs rounds", y="mean_regret", xlabel=ROUNDS, ylabel=AVERAGE_REGRET),
        ),
    )
    solanki_scenario(
        f"exp2_{family}",
        f"EXP2 / Fig. 4: FRR of P-FCB against epsilon (D-23 grid 0.2..1.0), family {family}.",
        {**COMMON, **family_kwargs},
        {"pfcb": AlgorithmSpec(PFCB)},
        (frr_non_increasing("epsilon"),),
        sweep={"alg.epsilon": EPSILONS},
        figures=(
            paper_figure(
                4,
                family,
                "EXP2, P-FCB: FRR vs ε",
                x="epsilon",
                y="frr",
                xlabel="privacy budget ε",
                ylabel="FRR",
            ),
        ),
    )
    solanki_scenario(
        f"exp3_{family}",
        f"EXP3 / Fig. 5: per-agent regret of P-FCB (eps 1) against n, nested agents (D-23), {family}.",
        {**COMMON, **family_kwargs, "agent_pool": max(NUM_AGENTS)},
        {"pfcb": AlgorithmSpec(PFCB, {"epsilon": 1.0})},
        (regret_falls_with_n(),),
        sweep={"env.num_agents": NUM_AGENTS},
        figures=(
            paper_figure(
                5,
                family,
                "EXP3, P-FCB: regret vs n",
                setting="ε = 1, m = 30",
                x="num_agents",
                y="mean_regret",
                xlabel="# of agents n",
                ylabel=AVERAGE_REGRET,
            ),
        ),
        **EXP3_CI.get(family, {}),
    )

solanki_scenario(
    "stress",
    "Stress family (U at alpha 0.7, the constraint binds): violations and regret; the paper-literal "
    "preset (UCB in the constraint, gamma 0) is reported, not checked.",
    {**COMMON, "instance": "stress"},
    {
        "non_federated": AlgorithmSpec("solanki_nf"),
        "fcb": AlgorithmSpec("solanki_fcb"),
        "pfcb_eps1": AlgorithmSpec(PFCB, {"epsilon": 1.0}),
        "pfcb_paper_literal": AlgorithmSpec(PFCB, {"epsilon": 1.0, "preset": "paper_literal"}),
    },
    (few_violations(["non_federated", "fcb", "pfcb_eps1"]),),
)
