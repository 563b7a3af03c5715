"""Private federation: share noisy per-arm means under a DP wrapper, read the privacy spent, hit the budget guard.

Agents on a complete graph play UCB1 on their own samples plus the per-arm means their neighbours broadcast every
few slots. The means are declared ``Sensitive`` (each is the mean of ``counts`` rewards in [0, 1]), so the
``LaplaceMessageDP`` wrapper clips them, adds Laplace noise of scale ``(1 / count) / epsilon`` per arm on the way out
and charges each sender ``epsilon`` per message. The counts are declared ``Public`` and travel as they are.

Noise is drawn from the episode's seeded ``dp`` stream: reproducible, simulation-grade, not for protecting real data.
"""

import os

import numpy as np

from fedbandit_envs import NEIGHBOURS, FederatedMAB, Message
from fedbandit_envs.channel.privacy import Public, Sensitive, declare_message_schema
from fedbandit_envs.protocol import Agent, PerAgentPopulation
from fedbandit_envs.run import run
from wrappers.dp import LaplaceMessageDP, PrivacyBudgetExceeded

TINY = os.environ.get("FEDBANDIT_EXAMPLE_SCALE") == "tiny"
ENV = {"num_agents": 4, "num_arms": 5, "horizon": 60 if TINY else 1000, "topology": "complete", "instance_seed": 0}
SEEDS = range(2 if TINY else 5)

# What the shared fields are: a DP wrapper refuses to send a field that is not declared. The wrapper also checks each
# count against its own count of the sender's observed rewards, and accepts only message kinds that are public by
# construction: registered here, before any episode, with the declaration every "means" message carries (so its
# bounds are fixed before any reward exists).
SHARED = {"means": Sensitive(bounds=(0.0, 1.0), aggregate="mean", records_field="counts"), "counts": Public()}
declare_message_schema("means", SHARED)


class NoisyMeanUCB(Agent):
    """UCB1 on the agent's own samples plus the latest (noisy) per-arm means each neighbour broadcast.

    Hyper-parameters:
        period: slots between two broadcasts of the agent's per-arm means.
    """

    period = 10

    def reset(self, agent_id, context, rng):
        """Start an episode with empty statistics."""
        self.id = agent_id
        self.counts = np.zeros(context.num_arms)
        self.sums = np.zeros(context.num_arms)
        self.heard = {}  # neighbour -> (counts, noisy means)

    def act(self, observation):
        """Learn from the last pull and the inbox; pull an arm; every `period` slots broadcast the per-arm means."""
        if observation["arm"] >= 0:
            self.counts[observation["arm"]] += 1
            self.sums[observation["arm"]] += float(observation["reward"])
        for message in observation["inbox"]:
            self.heard[message.sender] = (message.payload["counts"], message.payload["means"])
        counts = self.counts + sum(c for c, _ in self.heard.values())
        sums = self.sums + sum(c * m for c, m in self.heard.values())
        if counts.min() == 0:
            arm = int(np.argmin(counts))
        else:
            arm = int(np.argmax(sums / counts + np.sqrt(2 * np.log(counts.sum()) / counts)))
        messages = []
        if observation["slot"] % self.period == self.period - 1 and self.counts.min() > 0:
            payload = {"means": self.sums / self.counts, "counts": self.counts.copy()}
            messages.append(Message(self.id, NEIGHBOURS, "means", payload, privacy=SHARED))
        return {"arm": arm, "messages": messages}


def play(env, seed):
    """One episode through the PettingZoo API, one NoisyMeanUCB per agent; returns the last infos."""
    observations, infos = env.reset(seed=seed)
    agent_seeds = env.context.agent_seeds[0].spawn(len(env.agents))  # the episode's own stream for the agents
    agents = {name: NoisyMeanUCB() for name in env.agents}
    for i, agent in enumerate(agents.values()):
        agent.reset(i, env.context, np.random.default_rng(agent_seeds[i]))
    while env.agents:
        actions = {name: agents[name].act(observations[name]) for name in env.agents}
        observations, _, _, _, infos = env.step(actions)
    return infos


# 1. One episode by hand: the wrapper reports each agent's epsilon in infos.
env = LaplaceMessageDP(FederatedMAB(**ENV), epsilon=0.5)
infos = play(env, seed=0)
print("epsilon spent per agent (infos):", {a: round(info["epsilon_spent"], 2) for a, info in infos.items()})

# 2. The runner: epsilon columns in the results, next to regret and messages.
for epsilon in (0.1, 1.0, None):
    wrappers = [] if epsilon is None else [lambda e, eps=epsilon: LaplaceMessageDP(e, epsilon=eps)]
    results = run(lambda: PerAgentPopulation(NoisyMeanUCB), ENV, SEEDS, checkpoints=1, wrappers=wrappers)
    final = results.curves
    label = "no DP           " if epsilon is None else f"eps {epsilon} / message"
    privacy = "" if epsilon is None else f"  epsilon spent (max agent) {final[0]['epsilon_max']:6.1f}"
    print(f"{label}: group regret {np.mean([r['group_regret'] for r in final]):6.1f}{privacy}")

# 3. Budget guard, "block": once a message would exceed the budget, the agent sends nothing more this episode.
env = LaplaceMessageDP(FederatedMAB(**ENV), epsilon=0.5, budget=2.0, on_exhausted="block")
infos = play(env, seed=0)
for agent, info in infos.items():
    print(f"block: {agent} spent {info['epsilon_spent']:.1f} of 2.0, sent {info['messages_sent']} message copies")
print("blocked agents:", env.privatizer.blocked[0].tolist())

# 4. Budget guard, "raise": the step that would exceed the budget raises, and nothing of it is applied.
env = LaplaceMessageDP(FederatedMAB(**ENV), epsilon=0.5, budget=2.0, on_exhausted="raise")
try:
    play(env, seed=0)
except PrivacyBudgetExceeded as error:
    print(f"raise: stopped in slot {env.unwrapped.core.slot}: {error}")
