"""Per-slot cost of the DP wrappers (seeded and secure) and of the fault wrappers, against the unwrapped run.

Workload: ``SumSharingUCB`` below, M agents on a complete graph, K arms. Every slot each agent broadcasts its per-arm
running reward sums (declared ``Sensitive(aggregate="sum", bounds=(0, 1))``, one K-vector per agent) and counts
(``Public``), and plays UCB1 on its own plus its neighbours' latest sums. No reference algorithm of the suite sends a
per-slot running sum (which :class:`TreeMessageDP` needs), so this small protocol is the one workload every wrapper
accepts; M x K = 100 values are noised per slot at the default size.

Rows: ``none`` (unwrapped), ``laplace`` / ``gaussian`` / ``tree`` (seeded numpy noise), the same three with
``secure=True`` (OpenDP, the ``secure`` extra), and ``byzantine`` (ByzantineAgents on the ``sums`` field,
contam_eps = 0.1) and ``drops`` (MessageDrops, prob = 0.1), and ``laplace over drops`` / ``laplace over byzantine``
(the DP wrapper outside the fault, whose hook is then checkpointed every slot). Each repeat runs every row once,
in an interleaved order, through ``fedbandit_envs.run.run`` (the batched path, B replicas) and records wall seconds
per slot; ratios are to the unwrapped row of the same repeat. The table gives the median over repeats and the load
average before and after. Measures only; asserts nothing.

    python benchmarks/dp_overhead.py                # M=10, K=10, T=400, B=1, 5 repeats
    python benchmarks/dp_overhead.py --replicas 20 --horizon 200 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from agents.baselines import ucb1_arms
from fedbandit_envs import NEIGHBOURS, MessageBatch
from fedbandit_envs.channel.privacy import Public, Sensitive, declare_message_kinds
from fedbandit_envs.core import Action, AgentContext, Feedback, Step
from fedbandit_envs.protocol import Population
from fedbandit_envs.run import run
from wrappers.dp import GaussianMessageDP, LaplaceMessageDP, TreeMessageDP
from wrappers.faults import ByzantineAgents, MessageDrops

SHARED = {"sums": Sensitive(bounds=(0.0, 1.0), aggregate="sum"), "counts": Public()}
declare_message_kinds("sums")  # public vocabulary under a DP wrapper
EPSILON, DELTA = 1.0, 1e-5


class SumSharingUCB(Population):
    """UCB1 on the agent's own per-arm statistics plus the running sums and counts its neighbours broadcast."""

    def reset(self, context: AgentContext) -> None:
        b, m, k = context.num_replicas, context.num_agents, context.num_arms
        self.counts, self.sums = np.zeros((b, m, k)), np.zeros((b, m, k))
        self.heard_counts, self.heard_sums = np.zeros((b, m, m, k)), np.zeros((b, m, m, k))
        self.replica, self.sender = np.repeat(np.arange(b), m), np.tile(np.arange(m), b)

    def act(self, step: Step) -> Action:
        slot = step.slot
        counts = self.counts + self.heard_counts.sum(axis=2)
        arms = ucb1_arms(counts, self.sums + self.heard_sums.sum(axis=2), counts.sum(axis=-1))
        if slot == 0:
            return Action(arms, [])
        b, m, k = self.sums.shape
        payload = {"sums": self.sums.reshape(b * m, k).copy(), "counts": self.counts.reshape(b * m, k).copy()}
        recipients = np.full(b * m, NEIGHBOURS)
        return Action(arms, [MessageBatch("sums", self.replica, self.sender, recipients, payload, privacy=SHARED)])

    def observe(self, feedback: Feedback) -> None:
        b, m = feedback.arms.shape
        rows, cols = np.arange(b)[:, None], np.arange(m)[None, :]
        self.counts[rows, cols, feedback.arms] += 1
        self.sums[rows, cols, feedback.arms] += feedback.rewards
        for batch in feedback.inbox:
            self.heard_sums[batch.replica, batch.recipient, batch.sender] = batch.payload["sums"]
            self.heard_counts[batch.replica, batch.recipient, batch.sender] = batch.payload["counts"]


ROWS = {
    "none": None,
    "laplace": lambda env: LaplaceMessageDP(env, EPSILON),
    "gaussian": lambda env: GaussianMessageDP(env, EPSILON, DELTA, "analytic"),
    "tree": lambda env: TreeMessageDP(env, EPSILON),
    "laplace secure": lambda env: LaplaceMessageDP(env, EPSILON, secure=True),
    "gaussian secure": lambda env: GaussianMessageDP(env, EPSILON, DELTA, "analytic", secure=True),
    "tree secure": lambda env: TreeMessageDP(env, EPSILON, secure=True),
    "byzantine": lambda env: ByzantineAgents(env, 0.1, fields=("sums",)),
    "drops": lambda env: MessageDrops(env, 0.1),
    # DP outside a fault: the fault hook is checkpointed every slot, so that a slot the DP wrapper refuses is undone
    "laplace over drops": lambda env: LaplaceMessageDP(MessageDrops(env, 0.1), EPSILON),
    "laplace over byzantine": lambda env: LaplaceMessageDP(ByzantineAgents(env, 0.1, fields=("sums",)), EPSILON),
}


def seconds_per_slot(row: str, env: dict, replicas: int) -> float:
    wrappers = [] if ROWS[row] is None else [ROWS[row]]
    start = time.perf_counter()
    run(SumSharingUCB, env, list(range(replicas)), checkpoints=1, batched=True, wrappers=wrappers)
    return (time.perf_counter() - start) / env["horizon"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--arms", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=400)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    env = {"num_agents": args.agents, "num_arms": args.arms, "horizon": args.horizon, "topology": "complete"}
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {row: [] for row in ROWS}
    ratios: dict[str, list[float]] = {row: [] for row in ROWS}
    for repeat in range(args.repeats):
        order = list(ROWS)[repeat % len(ROWS) :] + list(ROWS)[: repeat % len(ROWS)]  # rotate: no row always first
        measured = {row: seconds_per_slot(row, env, args.replicas) for row in order}
        for row, seconds in measured.items():
            times[row].append(seconds)
            ratios[row].append(seconds / measured["none"])
    load_after = os.getloadavg()[0]
    print(
        f"M={args.agents} K={args.arms} T={args.horizon} B={args.replicas}, {args.repeats} repeats, "
        f"load average {load_before:.1f} before / {load_after:.1f} after"
    )
    width = max(map(len, ROWS))
    print(f"{'row':<{width}} {'us/slot (median)':>17} {'min':>10} {'max':>10} {'x none (median)':>16}")
    for row in ROWS:
        us = [t * 1e6 for t in times[row]]
        print(
            f"{row:<{width}} {statistics.median(us):>17,.0f} {min(us):>10,.0f} {max(us):>10,.0f} "
            f"{statistics.median(ratios[row]):>16.2f}"
        )


if __name__ == "__main__":
    main()
