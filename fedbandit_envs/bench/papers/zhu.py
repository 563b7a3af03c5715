"""Zhu, Zhu, Liu & Liu, "Federated Bandit: A Gossiping Approach": Fig. 1(a)-(c) and the reported 1/epsilon ratio.

The paper's text gives one number: "when the increase of regret is stable, e.g. t = 6e5", the regret at
epsilon = 1, 2, 5 is in ratio about 1 : 1/2 : 1/5. Everything else is a plot whose settings (N, M, graph, T)
the text does not give (spec §4.1). Regret here is the paper's: agent-averaged, over the main rounds
(without the M warm-up slots), mean over trials (:func:`fedbandit_envs.bench.catalogue.zhu.main_regret`).
"""

from __future__ import annotations

import math

import numpy as np

from fedbandit_envs.bench.catalogue.zhu import epsilon_finals, main_regret
from fedbandit_envs.bench.papers import NOT_REPORTED, Measure, Paper, PaperItem, PaperValue
from fedbandit_envs.bench.tables import number
from fedbandit_envs.run import Results

#: The round at which the paper reads its ratio: "when the increase of regret is stable, e.g. t = 6e5".
PAPER_ROUND = 600_000

#: Measured why the total-regret ratio does not reproduce (catalogue ``zhu.py``, spec RC4/RC5, decision P2).
RATIO_REASON = (
    "At the paper scale (T = 1e6 main rounds, the paper's constants, 100 trials) R(1) : R(2) : R(5) at t = 6e5 is "
    "1 : 0.80 : 0.48, and at T the excess over epsilon = inf, X(eps) = R(eps) - R(inf), gives X(1)/X(2) = 1.38 and "
    "X(1)/X(5) = 2.75 (claim RC5 fails there). The finite-epsilon runs are still in the phase where the DP term of "
    "the bound (eq. (12)) drives exploration: R(T)/R(T/2) = 1.68, 1.51 and 1.27 at epsilon 1, 2 and 5 (2 is "
    "linear; Gossip_UCB 1.17). Their regret is set by how long each stays in that phase, not yet by the 1/epsilon "
    "scale of a logarithmic phase: X(1)/X(5) grows with t (1.30 at t = 1e5, 2.75 at 1e6) towards the 1/epsilon "
    "prediction of 5. Total regret also includes the regret R(inf) of gossip itself, the same at every epsilon. "
    "At the CI scale the DP bonus is scaled by 1e-3 (decision P2) so that the runs leave that phase within T = "
    "2e4: there the excess falls as fast as 1/epsilon or faster (10 blocks of 5 seeds: X(1)/X(2) = 2.16-2.32, "
    "X(1)/X(5) = 7.38-10.52), while R(inf) keeps the total ratios above 1/2 and 1/5 (0.6-0.8 : 0.4-0.6). Neither "
    "reading gives 1 : 1/2 : 1/5 on total regret (decision P2, check RC5)."
)


def total_ratio(epsilon: float) -> Measure:
    """Our R(epsilon) / R(1) of Fed_UCB at t = 6e5 main rounds, or at T if the runs are shorter (means over trials)."""

    def measure(results: Results) -> str:
        curves = main_regret(results, by=("algorithm", "epsilon"))
        ones = curves[("fed_ucb", 1.0)].values()
        t = PAPER_ROUND if all(PAPER_ROUND in c for c in ones) else min(max(c) for c in ones)
        means = {e: float(np.mean([c[t] for c in curves[("fed_ucb", e)].values()])) for e in (1.0, epsilon)}
        return f"{means[epsilon] / means[1.0]:.2f} (t = {t:.0e})".replace("e+0", "e")

    return measure


def excess_ratio(epsilon: float) -> Measure:
    """Our X(1) / X(epsilon) with X(e) = R(e) - R(inf), Fed_UCB at T (means over trials)."""

    def measure(results: Results) -> str:
        finals = {e: float(v.mean()) for e, v in epsilon_finals(results, "fed_ucb").items()}
        return f"{(finals[1.0] - finals[math.inf]) / (finals[epsilon] - finals[math.inf]):.2f}"

    return measure


def finals_by_epsilon(results: Results) -> str:
    """Our R(T) of Fed_UCB at each epsilon (agent-averaged, main rounds, mean over trials)."""
    return "; ".join(f"eps = {e:g}: {number(v.mean())}" for e, v in epsilon_finals(results, "fed_ucb").items())


def final_regret(algorithm: str) -> Measure:
    """Our R(T) of ``algorithm`` (agent-averaged, main rounds, mean over trials)."""

    def measure(results: Results) -> str:
        curves = main_regret(results)[(algorithm,)]
        return number(sum(c[max(c)] for c in curves.values()) / len(curves))

    return measure


def growth_ratio(results: Results) -> str:
    """Our mean over trials of R(T)/R(T/2) of Fed_UCB at epsilon = inf (2 is linear)."""
    curves = main_regret(results, by=("algorithm", "epsilon"))[("fed_ucb", math.inf)]
    ratios = [c[max(c)] / c[max(c) // 2] for c in curves.values()]
    return f"{sum(ratios) / len(ratios):.2f}"


#: Why S-B does not resolve the epsilon effect (its ratios in the report's table).
RING_REASON = (
    "On S-B (a ring of 10 agents, M = 10, lambda_2 = 0.98) the epsilon effect is even less resolved. At the paper "
    "scale (T = 1e6 main rounds, 100 trials) R(1) : R(2) : R(5) at t = 6e5 is 1 : 0.96 : 0.85, and at T X(1)/X(2) "
    "= 1.08 and X(1)/X(5) = 1.33: the finite-epsilon runs are still almost linear at 1e6 (R(T)/R(T/2) = 1.94, 1.89 "
    "and 1.76; 2 is linear) and even Gossip_UCB is at 1.41, so on this slowly mixing graph no run has reached a "
    "logarithmic phase where a 1/epsilon scaling could show. At the CI scale (T = 2e4, DP bonus scaled by 1e-3) "
    "R(inf) is most of R(1) at every epsilon and the excess ratios also fall well short of 2 and 5. The catalogue "
    "checks only RC6 (epsilon = inf lowest) on S-B; it passes at both scales."
)


def _epsilon_values(reason: str) -> tuple[PaperValue, ...]:
    text = "text on Fig. 1(a)/(b), at t = 6e5: 1 : 1/2 : 1/5"
    return (
        PaperValue(
            "R(2) / R(1), total regret at t = 6e5 (T if shorter)", f"approx. 0.5 ({text})", total_ratio(2.0), reason
        ),
        PaperValue(
            "R(5) / R(1), total regret at t = 6e5 (T if shorter)", f"approx. 0.2 ({text})", total_ratio(5.0), reason
        ),
        PaperValue(
            "X(1) / X(2), excess regret over epsilon = inf",
            "2 if regret scales like 1/eps (not stated)",
            excess_ratio(2.0),
        ),
        PaperValue(
            "X(1) / X(5), excess regret over epsilon = inf",
            "5 if regret scales like 1/eps (not stated)",
            excess_ratio(5.0),
        ),
        PaperValue("R(T) per agent at each epsilon", NOT_REPORTED, finals_by_epsilon),
    )


PAPER = Paper(
    key="zhu",
    citation=(
        'Zhaowei Zhu, Jingxuan Zhu, Ji Liu and Yang Liu. "Federated Bandit: A Gossiping Approach". SIGMETRICS '
        "2021 (Proceedings of the ACM on Measurement and Analysis of Computing Systems); arXiv:2010.12763."
    ),
    notes=(
        "The paper plots Fed_UCB only (epsilon = 1, 2, 5 and inf, 100 trials, min-max bands) and does not give N, "
        "M, the graph or T of Fig. 1(a)/(b); our settings S-A (N = 3, M = 5, K3) and S-B (ring of 10, M = 10) are the "
        "spec's choices (§4.2). Fig. 1(c) used the UCI diabetes data, which is not shipped: we run its synthetic "
        "stand-in. The CI scale runs T = 2e4 main rounds with the DP bonus scaled by 1e-3 (decision P2, labelled).",
    ),
    items=(
        PaperItem(
            "Fig. 1(a)",
            "zhu/sa_epsilon",
            "Fed_UCB regret per agent against t at epsilon = 1, 2, 5, inf (synthetic, Gaussian noise).",
            _epsilon_values(RATIO_REASON),
        ),
        PaperItem(
            "Fig. 1(a), collaboration",
            "zhu/sa_collaboration",
            "Not a figure of the paper: the text argues that local learning without gossip is biased; we add local "
            "UCB1 as the baseline (RC3).",
            (
                PaperValue("Gossip_UCB R(T) per agent", NOT_REPORTED, final_regret("gossip_ucb")),
                PaperValue("local UCB1 R(T) per agent", NOT_REPORTED, final_regret("local_ucb1")),
            ),
        ),
        PaperItem(
            "Fig. 1(b)",
            "zhu/sb_epsilon",
            "Fed_UCB regret per agent against t at epsilon = 1, 2, 5, inf in a second synthetic setting.",
            _epsilon_values(RING_REASON),
        ),
        PaperItem(
            "Fig. 1(c)",
            "zhu/diabetes_standin",
            "Fed_UCB on the UCI diabetes data (N = 3 hospitals, M = 5 drug classes): regret is sublinear.",
            (
                PaperValue("R(T)/R(T/2) at epsilon = inf (2 is linear)", NOT_REPORTED, growth_ratio),
                PaperValue("R(T) per agent at each epsilon", NOT_REPORTED, finals_by_epsilon),
            ),
        ),
    ),
    reasons={"zhu/sa_epsilon:inverse_epsilon": RATIO_REASON},
)
