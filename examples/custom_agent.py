"""Template: write your own agent, exchange messages with neighbours, and benchmark it.

Each agent keeps its own counts and sums, sends them to its neighbours every slot, and plays UCB1 on
everything it knows (its own samples plus its neighbours' latest statistics). Copy this file and
change the two methods.
"""

import os

import numpy as np

from fedbandit_envs import NEIGHBOURS, Message
from fedbandit_envs.protocol import Agent
from fedbandit_envs.run import run

TINY = os.environ.get("FEDBANDIT_EXAMPLE_SCALE") == "tiny"


class NeighbourUCB(Agent):
    """UCB1 on the agent's own samples plus the latest statistics its neighbours sent."""

    def reset(self, agent_id, context, rng):
        """Called at the start of every episode with the public facts and the agent's own rng."""
        self.id = agent_id
        self.counts = np.zeros(context.num_arms)
        self.sums = np.zeros(context.num_arms)
        self.neighbour_stats = {}

    def act(self, observation):
        """Learn from the last pull and the inbox, then choose an arm and the messages to send."""
        if observation["arm"] >= 0:
            self.counts[observation["arm"]] += 1
            self.sums[observation["arm"]] += float(observation["reward"])
        for message in observation["inbox"]:
            self.neighbour_stats[message.sender] = (message.payload["counts"], message.payload["sums"])
        counts = self.counts + sum(c for c, _ in self.neighbour_stats.values())
        sums = self.sums + sum(s for _, s in self.neighbour_stats.values())
        if counts.min() == 0:
            arm = int(np.flatnonzero(counts == 0)[0])
        else:
            arm = int(np.argmax(sums / counts + np.sqrt(2 * np.log(counts.sum()) / counts)))
        share = Message(self.id, NEIGHBOURS, "stats", {"counts": self.counts.copy(), "sums": self.sums.copy()})
        return {"arm": arm, "messages": [share]}


def main() -> None:
    """Benchmark NeighbourUCB against independent UCB1 learners on a ring (an Agent class runs as it is)."""
    env = {"num_agents": 6, "num_arms": 8, "horizon": 100 if TINY else 2000, "topology": "ring", "instance_seed": 0}
    seeds = range(2 if TINY else 5)
    for label, algorithm in (("independent_ucb1", "independent_ucb1"), ("neighbour_ucb", NeighbourUCB)):
        final = [r for r in run(algorithm, env, seeds, checkpoints=1, label=label).curves]
        print(
            f"{label:18s} group regret {np.mean([r['group_regret'] for r in final]):8.1f}"
            f"   messages {final[0]['messages']}   link cost {final[0]['link_cost']}"
        )


if __name__ == "__main__":
    main()
