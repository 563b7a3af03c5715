"""A fixed-shape form of every family's multi-agent environment, for generic Farama tools.

The PettingZoo environments of the suite carry messages as variable-length tuples of
:class:`~fedbandit_envs.channel.Message` (the ``MessageSequence`` space), which
``gymnasium.spaces.flatten_space`` cannot flatten; SuperSuit's vector conversion, RLlib's
``ParallelPettingZooEnv`` and stable-baselines3 need fixed shapes. :class:`FixedShapeParallelEnv` wraps an
environment (a :class:`~fedbandit_envs.env_base.ProtocolParallelEnv`, possibly under DP or fault wrappers)
and gives every agent:

* a fixed **action** space, the same for every agent: ``Discrete(K)`` (MAB and linear families: the arm)
  or ``MultiDiscrete`` (procurement: units per producer, up to the largest capacity of any agent; an
  agent's units above its own capacity are capped at it and the capped units reported in
  ``infos[agent]["units_capped"]``);
* a fixed **observation** ``Box`` (float32), the same for every agent: the flat form of a ``Dict`` of
  ``Box`` fields (:attr:`FixedShapeParallelEnv.dict_observation_space`, fields in alphabetical order;
  :meth:`FixedShapeParallelEnv.unflatten` gives the dict back). The fields are the agent's **own sufficient
  statistics**, the **local** facts of the last step, and, when the rule sends messages, the **inbox**:
  ``inbox_<field>`` of shape ``(M, ...)`` whose row ``s`` holds the statistics last received from agent ``s``
  (zeros until one arrives; within the statistics' bounds, or unbounded when the wrapped env has message
  hooks: DP noise or faults may move a payload out of them);
* **messages sent by a declared rule** (``messages=``): ``"broadcast"`` sends the agent's own statistics
  (a payload in :meth:`FixedShapeParallelEnv.message_space`, kind :data:`STATISTICS`) to its agent
  neighbours in every slot (a ``NEIGHBOURS`` message; explicit copies where the topology also has a server;
  with gossip activation, to the announced partner only); ``"none"`` sends
  nothing and drops the inbox fields. Messages go through the wrapped environment's channel, so they
  are costed in its ledger and pass its wrappers' hooks (DP noise, faults) like any other.

One step of the fixed form is one **slot**: the act step and every message-only step that follows it
(see :mod:`fedbandit_envs.env_base`) are played inside :meth:`FixedShapeParallelEnv.step`; rewards are summed
over them and infos merged. ``max_cycles`` truncates the episode after that many steps (the horizon
truncates it too), as PettingZoo's ``max_cycles_test`` expects.

Per family (M agents, K arms, d dimensions, m producers, T slots):

=============  ==================================  ===================================  ===========================
family         own statistics (the message)        local fields                         rule (default)
=============  ==================================  ===================================  ===========================
mab            ``counts`` (K,), ``sums`` (K,)      ``slot``, ``arm`` (one-hot K),       ``"broadcast"``, sent with
               pulls and reward sums per arm       ``reward``, ``partner`` (one-hot M)  the pull: statistics of the
                                                                                        slots before it
linear         ``gram`` (d, d), ``moment`` (d,),   ``slot``, ``active``, ``contexts``   ``"none"``: clients link
               ``pulls``: sums of x x^T, r x, 1    (K, d), ``arm``, ``reward``          only to the server
procurement    ``units`` (m,), ``goods`` (m,):     ``round``, ``procured`` (m,),        ``"broadcast"``, sent in
               units bought and good units         ``successes`` (m,)                   the round's report step
=============  ==================================  ===================================  ===========================
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple, cast

import numpy as np
import pettingzoo
from gymnasium import spaces
from pettingzoo import ParallelEnv

from fedbandit_envs.channel import NEIGHBOURS, Message
from fedbandit_envs.channel.privacy import PrivacySchema, check_schema
from fedbandit_envs.core import EPISODE_OVER
from fedbandit_envs.env_base import ACT
from fedbandit_envs.validation import check_choice, check_int

__all__ = ["MESSAGE_RULES", "STATISTICS", "FixedShapeParallelEnv", "make_fixed_shape"]

#: The message rules of the fixed form.
MessageRule = Literal["broadcast", "none"]
MESSAGE_RULES: tuple[str, ...] = ("broadcast", "none")

#: The ``kind`` of the statistics messages the ``"broadcast"`` rule sends.
STATISTICS = "statistics"

_FLOAT = np.float32


def _box(low: float, high: float, shape: tuple[int, ...]) -> spaces.Box:
    """A float32 Box of ``shape`` between ``low`` and ``high``."""
    return spaces.Box(low, high, shape=shape, dtype=_FLOAT)


def _one_hot(index: int | None, size: int) -> np.ndarray:
    """A float32 vector of ``size`` with a 1 at ``index`` (all zeros for None or a negative index)."""
    vector = np.zeros(size, _FLOAT)
    if index is not None and index >= 0:
        vector[index] = 1.0
    return vector


def _top(raw: spaces.Dict, name: str) -> int:
    """The largest value of the raw ``Discrete`` field ``name`` (a horizon, an arm or an agent index)."""
    field = raw[name]
    if not isinstance(field, spaces.Discrete):
        raise TypeError(f"the raw observation field {name!r} must be a Discrete space, got {field}")
    return int(field.start + field.n) - 1


def _field(raw: spaces.Dict, name: str) -> spaces.Box:
    """The raw ``Box`` field ``name``."""
    field = raw[name]
    if not isinstance(field, spaces.Box):
        raise TypeError(f"the raw observation field {name!r} must be a Box space, got {field}")
    return field


def _scalar(value: Any) -> np.ndarray:
    """A float32 vector of one element."""
    return np.array([value], _FLOAT)


class _Pull(NamedTuple):
    """One agent's act step, as the fixed form adds it to the agent's statistics."""

    #: The action played (an arm, or the units vector as a list).
    played: Any
    #: The act step's reward.
    reward: float
    #: The agent's raw observation before the act step (the linear contexts it chose from).
    before: Mapping[str, Any]
    #: Its raw observation after the act step (the procurement units and good units).
    after: Mapping[str, Any]


class _FamilyForm(ABC):
    """How one family's observations and actions map to the fixed form (built from the raw spaces)."""

    #: Whether the family has agent-agent links, so the ``"broadcast"`` rule can send anything.
    peers: bool = True
    #: Whether the statistics messages go with the pull (act step) rather than in the first message-only step.
    sends_in_act: bool = False

    action_space: spaces.Space
    statistics: dict[str, spaces.Box]
    local: dict[str, spaces.Box]

    @abstractmethod
    def env_action(self, j: int, action: Any, raw: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The wrapped env's act-step action of agent ``j`` (None: leave it out) and extra infos."""

    @abstractmethod
    def update(self, stats: dict[str, np.ndarray], pull: _Pull) -> None:
        """Add an agent's act step to its statistics."""

    @abstractmethod
    def local_values(self, raw: Mapping[str, Any], played: Any, reward: float) -> dict[str, np.ndarray]:
        """The local fields after a slot, from the last raw observation, the act-step action and reward."""


class _MABForm(_FamilyForm):
    """Plain bandits: an arm, per-arm pull counts and reward sums."""

    sends_in_act = True

    def __init__(self, raw: spaces.Dict) -> None:
        self.num_arms = k = _top(raw, "arm") + 1
        t = _top(raw, "slot")
        self.num_agents = _top(raw, "partner") + 1
        reward = _field(raw, "reward")
        low, high = float(reward.low), float(reward.high)
        self.action_space = spaces.Discrete(k)
        self.statistics = {"counts": _box(0, t, (k,)), "sums": _box(t * low, t * high, (k,))}
        self.local = {
            "slot": _box(0, t, (1,)),
            "arm": _box(0, 1, (k,)),
            "reward": _box(low, high, (1,)),
            "partner": _box(0, 1, (self.num_agents,)),
        }

    def env_action(self, j: int, action: Any, raw: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The arm as a Python int."""
        return int(action), {}

    def update(self, stats: dict[str, np.ndarray], pull: _Pull) -> None:
        """One more pull of the arm played."""
        stats["counts"][pull.played] += 1
        stats["sums"][pull.played] += pull.reward

    def local_values(self, raw: Mapping[str, Any], played: Any, reward: float) -> dict[str, np.ndarray]:
        """The next slot, the last arm and reward, the next gossip partner."""
        return {
            "slot": _scalar(raw["slot"]),
            "arm": _one_hot(played, self.num_arms),
            "reward": _scalar(reward),
            "partner": _one_hot(int(raw["partner"]), self.num_agents),
        }


class _LinearForm(_FamilyForm):
    """Linear contextual bandits: only active clients play; ridge-regression sufficient statistics."""

    peers = False

    def __init__(self, raw: spaces.Dict) -> None:
        contexts = _field(raw, "contexts")
        k, d = contexts.shape
        self.num_arms = k
        t = _top(raw, "slot")
        bound = float(np.abs(contexts.high).max())
        reward = _field(raw, "reward")
        low, high = float(reward.low), float(reward.high)
        largest = max(abs(low), abs(high))
        self.action_space = spaces.Discrete(k)
        self.statistics = {
            "gram": _box(-t * bound**2, t * bound**2, (d, d)),
            "moment": _box(-t * bound * largest, t * bound * largest, (d,)),
            "pulls": _box(0, t, (1,)),
        }
        self.local = {
            "slot": _box(0, t, (1,)),
            "active": _box(0, 1, (1,)),
            "contexts": _box(-bound, bound, (k, d)),
            "arm": _box(0, 1, (k,)),
            "reward": _box(low, high, (1,)),
        }

    def env_action(self, j: int, action: Any, raw: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The arm of an active client; None for the others (the env ignores them)."""
        return (int(action) if raw["active"] else None), {}

    def update(self, stats: dict[str, np.ndarray], pull: _Pull) -> None:
        """Add x x^T, r x and one pull for the context x of the arm played."""
        x = np.asarray(pull.before["contexts"][pull.played], np.float64)
        stats["gram"] += np.outer(x, x)
        stats["moment"] += pull.reward * x
        stats["pulls"] += 1

    def local_values(self, raw: Mapping[str, Any], played: Any, reward: float) -> dict[str, np.ndarray]:
        """The next slot's activity and contexts; the arm and reward of the slot played (zeros if inactive)."""
        return {
            "slot": _scalar(raw["slot"]),
            "active": _scalar(raw["active"]),
            "contexts": np.asarray(raw["contexts"], _FLOAT),
            "arm": _one_hot(played, self.num_arms),
            "reward": _scalar(reward),
        }


class _ProcurementForm(_FamilyForm):
    """Procurement: units per producer (capped at the agent's capacities), units and good units bought."""

    def __init__(self, raw: list[spaces.Dict]) -> None:
        nvecs = []
        for space in raw:
            procured = space["procured"]
            if not isinstance(procured, spaces.MultiDiscrete):
                raise TypeError(f"the raw observation field 'procured' must be a MultiDiscrete space, got {procured}")
            nvecs.append(np.asarray(procured.nvec))
        self.capacities = capacities = np.stack(nvecs) - 1
        m = capacities.shape[1]
        t = _top(raw[0], "t")
        most = int(capacities.max())
        self.action_space = spaces.MultiDiscrete(capacities.max(axis=0) + 1)
        self.statistics = {"units": _box(0, t * most, (m,)), "goods": _box(0, t * most, (m,))}
        self.local = {"round": _box(0, t, (1,)), "procured": _box(0, most, (m,)), "successes": _box(0, most, (m,))}

    def env_action(self, j: int, action: Any, raw: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        """The units vector capped at agent ``j``'s capacities; ``units_capped`` counts the units removed."""
        units = np.asarray(action, np.int64)
        capped = np.minimum(units, self.capacities[j])
        return capped, {"units_capped": int((units - capped).sum())}

    def update(self, stats: dict[str, np.ndarray], pull: _Pull) -> None:
        """Add the round's units and good units."""
        stats["units"] += pull.after["procured"]
        stats["goods"] += pull.after["successes"]

    def local_values(self, raw: Mapping[str, Any], played: Any, reward: float) -> dict[str, np.ndarray]:
        """The next round, the last round's units and good units."""
        return {
            "round": _scalar(raw["t"]),
            "procured": np.asarray(raw["procured"], _FLOAT),
            "successes": np.asarray(raw["successes"], _FLOAT),
        }


def _family_form(env: ParallelEnv) -> _FamilyForm:
    """The fixed form of ``env``'s family, recognised from its raw observation spaces."""
    raw = [env.observation_space(a) for a in env.possible_agents]
    keys = set(raw[0].spaces) if isinstance(raw[0], spaces.Dict) else set()
    if "procured" in keys:
        return _ProcurementForm(raw)
    if "contexts" in keys:
        return _LinearForm(raw[0])
    if "partner" in keys:
        return _MABForm(raw[0])
    raise TypeError(
        f"FixedShapeParallelEnv wraps a fedbandit multi-agent environment (MAB, linear or procurement family), "
        f"got {type(env.unwrapped).__name__} with observation fields {sorted(keys)}"
    )


class FixedShapeParallelEnv(ParallelEnv):
    """A fixed-shape PettingZoo ``ParallelEnv`` over a fedbandit environment (see the module docstring).

    Args:
        env: a fedbandit multi-agent environment (any family), possibly wrapped by DP or fault wrappers.
        messages: the message rule, ``"broadcast"`` or ``"none"``; None picks the family's default
            (``"broadcast"`` where agents have agent-agent links: MAB and procurement; ``"none"`` for the
            linear family, whose clients link only to the server). In a topology without agent-agent
            links (the MAB ``"server"`` topology) broadcasting sends nothing and the inbox stays zero.
        max_cycles: end the episode (a truncation) after this many steps; None: at the horizon only.
        flatten: observations as one flat float32 ``Box`` (default) or as the ``Dict`` of ``Box`` fields.
        privacy: the privacy declaration of the statistics messages (field name -> ``Public()``,
            ``Sensitive(...)`` or ``Privatized(...)``, see :mod:`fedbandit_envs.channel.privacy`), which a DP wrapper
            in strict mode needs; e.g. ``{"counts": Public(), "sums": Sensitive(bounds=(0, 1), aggregate="sum")}``
            for the MAB family. None: undeclared (a strict DP wrapper refuses the messages).
    """

    def __init__(
        self,
        env: ParallelEnv,
        *,
        messages: MessageRule | None = None,
        max_cycles: int | None = None,
        flatten: bool = True,
        privacy: PrivacySchema | None = None,
    ) -> None:
        if not isinstance(env, ParallelEnv):
            raise TypeError(f"env must be a PettingZoo ParallelEnv of this suite, got {type(env).__name__}")
        self.env = env
        self.form = form = _family_form(env)
        if messages is None:
            messages = "broadcast" if form.peers else "none"
        self.messages = check_choice("messages", messages, MESSAGE_RULES)
        if self.messages == "broadcast" and not form.peers:
            raise ValueError(
                f"messages='broadcast' needs agent-agent links, and the clients of {type(env.unwrapped).__name__} "
                "link only to the server; pass messages='none'"
            )
        self.max_cycles = None if max_cycles is None else check_int("max_cycles", max_cycles, 1)
        if not isinstance(flatten, bool):
            raise TypeError(f"flatten must be True or False, got {flatten!r}")
        self.flatten = flatten
        zeros = {name: np.zeros(space.shape) for name, space in form.statistics.items()}
        self.privacy = check_schema(privacy, zeros, "FixedShapeParallelEnv")
        self.possible_agents = list(env.possible_agents)
        self.agents: list[str] = []
        self.metadata = {**env.metadata, "name": f"{env.metadata.get('name', 'fedbandit')}-fixed-shape"}
        self._index = {a: j for j, a in enumerate(self.possible_agents)}
        self._message_space = spaces.Dict(dict(form.statistics))
        fields: dict[str, spaces.Space] = {**form.statistics, **form.local}
        if self.messages == "broadcast":
            m = len(self.possible_agents)
            hooked = bool(env.message_hooks())  # DP noise or faults may move a payload out of its bounds
            for name, space in form.statistics.items():
                shape = (m, *space.shape)
                fields[f"inbox_{name}"] = (
                    _box(-np.inf, np.inf, shape)
                    if hooked
                    else spaces.Box(np.broadcast_to(space.low, shape), np.broadcast_to(space.high, shape), dtype=_FLOAT)
                )
        #: The observation as a ``Dict`` of ``Box`` fields (the flat observation is its ``flatten``).
        self.dict_observation_space = spaces.Dict(fields)
        observation = spaces.flatten_space(self.dict_observation_space) if flatten else self.dict_observation_space
        self._observation_space = observation
        self._action_space = form.action_space
        self._stats: list[dict[str, np.ndarray]] = []
        self._inbox: list[dict[str, np.ndarray]] = []
        self._raw: dict[str, Any] = {}
        self._recipients: list[list[int]] = []
        self._gossip = False
        self._cycles = 0

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> spaces.Space:
        """The fixed observation space (one object, the same for every agent)."""
        self._agent_index(agent)
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Space:
        """The fixed action space (one object, the same for every agent)."""
        self._agent_index(agent)
        return self._action_space

    def message_space(self, agent: str) -> spaces.Dict:
        """The payload space of the statistics messages ``agent`` sends under the ``"broadcast"`` rule."""
        self._agent_index(agent)
        return self._message_space

    def unflatten(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        """The fields of a flat observation (see :attr:`dict_observation_space`)."""
        if not self.flatten:
            raise ValueError("observations are already dicts (flatten=False); there is nothing to unflatten")
        return cast(dict[str, np.ndarray], spaces.unflatten(self.dict_observation_space, observation))

    def _agent_index(self, agent: str) -> int:
        if agent not in self._index:
            raise ValueError(f"unknown agent {agent!r}; agents are {self.possible_agents[:3]}...")
        return self._index[agent]

    # ------------------------------------------------------------------ wrapped env
    @property
    def unwrapped(self) -> ParallelEnv:
        """The innermost fedbandit environment."""
        return self.env.unwrapped

    @property
    def render_mode(self) -> str | None:
        """The wrapped environment's render mode."""
        return self.env.render_mode

    @property
    def state_space(self) -> spaces.Space:
        """The wrapped environment's global state space."""
        return self.env.state_space

    def state(self) -> np.ndarray:
        """The wrapped environment's global state."""
        return self.env.state()

    def render(self) -> Any:
        """The wrapped environment's rendering."""
        return self.env.render()

    def close(self) -> None:
        """Close the wrapped environment."""
        self.env.close()

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Start an episode of the wrapped environment (``seed`` and ``options`` are passed on)."""
        raw, infos = self.env.reset(seed=seed, options=options)
        form, m = self.form, len(self.possible_agents)
        self._stats = [{k: np.zeros(s.shape) for k, s in form.statistics.items()} for _ in range(m)]
        self._inbox = [{k: np.zeros((m, *s.shape)) for k, s in form.statistics.items()} for _ in range(m)]
        topology = self.env.unwrapped.context.topologies[0]
        # one NEIGHBOURS broadcast per agent (the channel makes the copies) unless it would reach a server too
        self._recipients = [
            ([NEIGHBOURS] if neighbours.size else []) if not topology.server_links.any() else neighbours.tolist()
            for neighbours in map(topology.neighbours, range(m))
        ]
        self._gossip = self.env.unwrapped.core.channel.config.gossip is not None
        self._raw = dict(raw)
        self._cycles = 0
        self.agents = list(self.possible_agents)
        zero = dict.fromkeys(self.agents, 0.0)
        return self._observations(dict.fromkeys(self.agents), zero), infos

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Play one slot: the act step with every live agent's action, then its message-only steps."""
        if not self.agents:
            raise RuntimeError(EPISODE_OVER)
        played, inner, extra = self._act_actions(actions)
        before = self._raw
        raw, rewards, terminations, truncations, infos = self.env.step(inner)
        act_rewards = {a: float(rewards.get(a, 0.0)) for a in self.agents}
        for agent, action in played.items():
            j = self._index[agent]
            if action is not None:
                self.form.update(self._stats[j], _Pull(action, act_rewards[agent], before[agent], raw[agent]))
        self._receive(raw)
        totals = dict(act_rewards)
        infos = {a: {**infos.get(a, {}), **extra.get(a, {})} for a in self.agents}
        first = True
        while self.env.agents and any(o["phase"] != ACT for o in raw.values()):
            send = self.messages == "broadcast" and first and not self.form.sends_in_act
            raw, rewards, terminations, truncations, more = self.env.step(self._outgoing() if send else {})
            first = False
            self._receive(raw)
            for agent in self.agents:
                totals[agent] += float(rewards.get(agent, 0.0))
                infos[agent].update(more.get(agent, {}))
        self._raw = dict(raw)
        self._cycles += 1
        observations = self._observations(played, act_rewards)
        live = list(self.agents)
        terminations = {a: bool(terminations.get(a, False)) for a in live}
        truncations = {a: bool(truncations.get(a, False)) for a in live}
        if self.max_cycles is not None and self._cycles >= self.max_cycles:
            truncations = dict.fromkeys(live, True)
        if not self.env.agents or all(terminations[a] or truncations[a] for a in live):
            self.agents = []
        return observations, totals, terminations, truncations, infos

    # ------------------------------------------------------------------ translation
    def _act_actions(self, actions: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict]]:
        """Check every live agent's action; the played actions, the wrapped env's act actions and extra infos."""
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict of agent name to action, got {type(actions).__name__}")
        missing = [a for a in self.agents if a not in actions]
        unknown = [a for a in actions if a not in self.agents]
        if missing or unknown:
            raise ValueError(
                f"actions must have one entry per live agent; missing {missing[:5]}, unknown {unknown[:5]}"
            )
        outgoing = self._outgoing() if self.messages == "broadcast" and self.form.sends_in_act else {}
        played: dict[str, Any] = {}
        inner: dict[str, Any] = {}
        extra: dict[str, dict] = {}
        for agent in self.agents:
            action = actions[agent]
            if not self._action_space.contains(action):
                raise ValueError(f"the action of {agent} must be in {self._action_space}, got {action!r}")
            env_action, extra[agent] = self.form.env_action(self._index[agent], action, self._raw[agent])
            played[agent] = None if env_action is None else np.asarray(action).tolist()
            if env_action is None:
                continue
            if agent in outgoing:
                key = self.unwrapped.action_key
                inner[agent] = {key: env_action, **outgoing[agent]}
            else:
                inner[agent] = env_action
        return played, inner, extra

    def _outgoing(self) -> dict[str, dict[str, list[Message]]]:
        """The ``"broadcast"`` rule's messages: each agent's statistics to its neighbours (or gossip partner)."""
        out: dict[str, dict[str, list[Message]]] = {}
        for agent in self.agents:
            j = self._index[agent]
            if self._gossip:
                partner = int(self._raw[agent]["partner"])
                recipients = [partner] if partner >= 0 else []
            else:
                recipients = self._recipients[j]
            if recipients:
                payload = self._stats[j]
                out[agent] = {
                    "messages": [Message(j, r, STATISTICS, payload, privacy=self.privacy) for r in recipients]
                }
        return out

    def _receive(self, raw: Mapping[str, Mapping[str, Any]]) -> None:
        """Keep the latest statistics each agent received from each sender (delivery order: the last one wins)."""
        if self.messages != "broadcast":
            return
        for batch in self.unwrapped.inbox_from(raw):
            if batch.kind != STATISTICS:
                continue
            for row, (sender, recipient) in enumerate(zip(batch.sender.tolist(), batch.recipient.tolist())):
                if sender >= 0:
                    inbox = self._inbox[recipient]
                    for name, values in batch.payload.items():
                        inbox[name][sender] = values[row]

    def _observations(self, played: Mapping[str, Any], rewards: Mapping[str, float]) -> dict[str, Any]:
        """Every live agent's fixed-shape observation after a slot (or at reset)."""
        observations: dict[str, Any] = {}
        for agent in self.agents:
            j = self._index[agent]
            fields = {k: v.astype(_FLOAT) for k, v in self._stats[j].items()}
            fields.update(self.form.local_values(self._raw[agent], played[agent], rewards[agent]))
            if self.messages == "broadcast":
                fields.update({f"inbox_{k}": v.astype(_FLOAT) for k, v in self._inbox[j].items()})
            if self.flatten:
                # gymnasium's flatten of a Dict of Boxes, without its per-field dispatch
                observations[agent] = np.concatenate([fields[k].ravel() for k in self.dict_observation_space])
            else:
                observations[agent] = fields
        return observations


def make_fixed_shape(
    env_id: str,
    *,
    messages: MessageRule | None = None,
    max_cycles: int | None = None,
    flatten: bool = True,
    privacy: PrivacySchema | None = None,
    **env_kwargs: Any,
) -> FixedShapeParallelEnv:
    """The fixed-shape form of a registered multi-agent id: ``pettingzoo.make("parallel", env_id, **env_kwargs)``.

    For the AEC form, pass the result to ``pettingzoo.utils.conversions.parallel_to_aec``.
    """
    env = pettingzoo.make("parallel", env_id, **env_kwargs)
    return FixedShapeParallelEnv(env, messages=messages, max_cycles=max_cycles, flatten=flatten, privacy=privacy)
