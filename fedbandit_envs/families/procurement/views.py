"""Single-aggregator Gymnasium view of the procurement environment (solanki-pfcb §6), for RL training.

:class:`SingleAggregatorEnv` (``fedbandit/SingleAggregator-v0``) drives a
:class:`~fedbandit_envs.families.procurement.env.ProcurementCore` with one replica. The learner is aggregator 0;
its action is its procurement vector (``MultiDiscrete(k[0] + 1)``) and its reward the realised utility.

* ``num_agents = 1`` is exactly the non-federated setting.
* ``num_agents > 1``: the other aggregators run a reference algorithm (:data:`PEER_ALGORITHMS`, P-FCB by
  default). Aggregator 0 follows that algorithm's communication protocol with its own data (its messages
  are the population's rows for agent 0, built from the units it actually bought), and the last message
  received from each peer appears in the observation (``fedbandit/ProcurementClient-v0``).

Observation (``observation="flat"``, the default, a ``float32`` Box in [-1, 1] that stable-baselines3's
``MlpPolicy`` accepts), for m producers, capacities k and horizon T:

* ``[0, m)``: units procured in the last round / k; ``[m, 2m)``: good units in the last round / k;
* ``[2m, 3m)``: own units so far / (k T); ``[3m, 4m)``: own empirical quality (0 before any unit);
* ``[4m]``: t / T;
* with peers, per peer p (in agent order) and producer: the last received window sums ``w~ / (k T)`` and
  ``y~ / (k T)`` clipped to [-1, 1] (``2 (n - 1) m`` values), then a 0/1 flag per peer (``n - 1`` values).

``observation="dict"`` gives the spec's spaces instead: ``{"procured", "successes": MultiDiscrete(k + 1),
"t": Discrete(T + 1)}`` plus, with peers, ``"inbox"`` (Box [-1, 1] of shape (n - 1, 2, m), normalised as
above) and ``"inbox_mask"`` (MultiBinary(n - 1)).

Info: ``expected_revenue``, ``qc_satisfied``, ``regret`` (of the round), ``cumulative_regret``,
``exact_regret``, ``violations``, ``L``, ``r_star`` of aggregator 0 (hidden from the learner's
observation), and its ``messages_sent`` / ``bytes_sent``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from fedbandit_envs.algorithms import check_algorithm_options, resolve_factory
from fedbandit_envs.core import message_phases, reset_population
from fedbandit_envs.families.procurement.env import (
    InstanceFamily,
    ProcurementConfig,
    ProcurementCore,
    ProcurementInstance,
)
from fedbandit_envs.rendering import VIEW_RENDER_MODES, RenderedView
from fedbandit_envs.validation import check_choice, check_options, check_render_mode, keyword_checked

__all__ = ["PEER_ALGORITHMS", "SingleAggregatorEnv"]

#: The learner's agent index.
LEARNER = 0

OBSERVATION_MODES = ("flat", "dict")


#: Reference algorithms the peers can run: name -> registered procurement algorithm (built with ``peer_params``).
PEER_ALGORITHMS: dict[str, str] = {"pfcb": "solanki_pfcb", "fcb": "solanki_fcb", "non_federated": "solanki_nf"}


@keyword_checked
class SingleAggregatorEnv(RenderedView):
    """Aggregator 0 of the procurement problem as a single-agent Gymnasium environment (see the module docstring).

    Args:
        num_agents, num_producers, horizon, instance, instance_params, alpha, rho, instance_seed: the problem
            (see :class:`~fedbandit_envs.families.procurement.env.ProcurementConfig`; ``num_agents=1`` is the
            non-federated setting).
        peer_algorithm: the peers' algorithm, a key of :data:`PEER_ALGORITHMS` (used when n > 1).
        peer_params: keyword arguments of the peers' algorithm (e.g. ``{"epsilon": 0.5, "t_lo": 16}``), checked
            through its registered config (an unknown keyword gets a "did you mean"), even when alone.
        observation: ``"flat"`` (default) or ``"dict"``.
        render_mode: None, ``"ansi"`` (a text line) or ``"rgb_array"`` (a bar chart of the units bought from each
            producer in the last round over its capacity); see :mod:`fedbandit_envs.rendering`.
    """

    def __init__(
        self,
        num_agents: int = 1,
        num_producers: int = 30,
        horizon: int = 1000,
        instance: ProcurementInstance | InstanceFamily = "uniform",
        instance_params: Mapping[str, Any] | None = None,
        alpha: float | None = None,
        rho: float | None = None,
        instance_seed: int = 0,
        peer_algorithm: str = "pfcb",
        peer_params: Mapping[str, Any] | None = None,
        observation: str = "flat",
        render_mode: str | None = None,
    ) -> None:
        self.render_mode = check_render_mode(render_mode, VIEW_RENDER_MODES)
        check_choice("observation", observation, OBSERVATION_MODES)
        check_choice("peer_algorithm", peer_algorithm, sorted(PEER_ALGORITHMS))  # checked even when alone
        peer = PEER_ALGORITHMS[peer_algorithm]
        peer_options = check_options("peer_params", peer_params)
        try:
            check_algorithm_options(peer, peer_options)
        except (TypeError, ValueError) as error:
            raise type(error)(f"peer_params of peer_algorithm={peer_algorithm!r}: {error}") from error
        self.observation_mode = observation
        config = ProcurementConfig(
            num_agents, num_producers, horizon, instance, instance_params, alpha, rho, instance_seed=instance_seed
        )
        problem = config.problem
        self.core = ProcurementCore(problem, config.horizon)
        n, m = problem.num_agents, problem.num_producers
        self.population = None
        if n > 1:
            self.population = resolve_factory(peer)(**peer_options)  # checked above
        self._capacity = problem.capacities[LEARNER].astype(np.float64)
        self.action_space = spaces.MultiDiscrete(problem.capacities[LEARNER] + 1)
        self.observation_space = self._make_space(n, m, problem.capacities[LEARNER], self.core.horizon)
        self._started = False

    def _make_space(self, n: int, m: int, capacity: np.ndarray, horizon: int) -> spaces.Space:
        if self.observation_mode == "flat":
            size = 4 * m + 1 + (n - 1) * (2 * m + 1)
            low = np.zeros(size, np.float32)
            low[4 * m + 1 : 4 * m + 1 + 2 * (n - 1) * m] = -1.0
            return spaces.Box(low, np.ones(size, np.float32), dtype=np.float32)
        parts: dict[str, spaces.Space] = {
            "procured": spaces.MultiDiscrete(capacity + 1),
            "successes": spaces.MultiDiscrete(capacity + 1),
            "t": spaces.Discrete(horizon + 1),
        }
        if n > 1:
            parts["inbox"] = spaces.Box(-1.0, 1.0, shape=(n - 1, 2, m), dtype=np.float32)
            parts["inbox_mask"] = spaces.MultiBinary(n - 1)
        return spaces.Dict(parts)

    # ------------------------------------------------------------------ API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Start an episode (``options`` is unused); the peers reset from the same seed."""
        super().reset(seed=seed)
        replica_seed = int(seed) if seed is not None else int(self.np_random.integers(2**63 - 1))
        self.core.reset([replica_seed])
        if self.population is not None:
            reset_population(self.population, self.core.context)
        n, m = self.core.instance.num_agents, self.core.instance.num_producers
        self._inbox = np.zeros((max(n - 1, 0), 2, m), np.float32)
        self._inbox_mask = np.zeros(max(n - 1, 0), np.int8)
        self._counts = np.zeros(m, np.int64)
        self._good = np.zeros(m, np.int64)
        self._started = True
        return self._observation(), self._info()

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        """Buy the units ``action``; the peers act and communicate by their algorithm."""
        if not self._started:
            raise RuntimeError("call reset() before step()")
        vector = np.asarray(action)
        m = self.core.instance.num_producers
        if vector.shape != (m,) or vector.dtype.kind not in "iu":
            raise ValueError(f"action must be an integer vector of {m} unit counts, got {action!r}")
        if self.population is None:
            units = vector[None, None, :]
        else:
            units = np.array(self.population.act(self.core.current_step()).arms, np.int64, copy=True)
            units[0, LEARNER] = vector
        feedback = self.core.step(units)
        self._counts += feedback.units[0, LEARNER]
        self._good += feedback.successes[0, LEARNER]
        if self.population is not None:
            self.population.observe(feedback)
            message_phases(self.core, self.population, on_inbox=self._read_inbox)
        reward = float(feedback.rewards[0, LEARNER])
        return self._observation(), reward, False, self.core.done, self._info()

    def _read_inbox(self, inbox: list[Any]) -> None:
        """Keep the window sums each peer sent to aggregator 0 (normalised by k T, clipped to [-1, 1])."""
        scale = self._capacity * self.core.horizon
        for batch in inbox:
            rows = np.flatnonzero((batch.replica == 0) & (batch.recipient == LEARNER))
            payload = batch.payload
            for r in rows:
                if "wy" in payload:
                    w, y = payload["wy"][r][:, 0], payload["wy"][r][:, 1]
                elif {"w", "y"} <= payload.keys():
                    w, y = payload["w"][r], payload["y"][r]
                else:
                    continue
                peer = int(batch.sender[r]) - 1
                self._inbox[peer] = np.clip(np.stack([w, y]) / scale, -1.0, 1.0)
                self._inbox_mask[peer] = 1

    def _observation(self) -> Any:
        last = self.core.last
        procured, successes = last.units[0, LEARNER], last.successes[0, LEARNER]
        if self.observation_mode == "dict":
            obs: dict[str, Any] = {"procured": procured.copy(), "successes": successes.copy(), "t": self.core.slot}
            if len(self._inbox_mask):
                obs["inbox"] = self._inbox.copy()
                obs["inbox_mask"] = self._inbox_mask.copy()
            return obs
        k, horizon = self._capacity, self.core.horizon
        means = np.divide(self._good, self._counts, out=np.zeros(len(k)), where=self._counts > 0)
        parts = [procured / k, successes / k, self._counts / (k * horizon), means, [self.core.slot / horizon]]
        if len(self._inbox_mask):
            parts += [self._inbox.reshape(-1), self._inbox_mask]
        flat = np.concatenate(parts).astype(np.float32)
        box = self.observation_space
        assert isinstance(box, spaces.Box), "the flat observation's space is a Box (see _make_space)"
        return np.clip(flat, box.low, box.high)

    def _info(self) -> dict[str, Any]:
        core, ledger = self.core, self.core.channel.ledger
        return {
            "expected_revenue": float(core.last_revenue[0, LEARNER]),
            "qc_satisfied": bool(core.last_qc[0, LEARNER]),
            "regret": float(core.last_regret[0, LEARNER]),
            "cumulative_regret": float(core.regret[0, LEARNER]),
            "exact_regret": float(core.exact_regret[0, LEARNER]),
            "violations": int(core.violations[0, LEARNER]),
            "L": float(core.penalty[LEARNER]),
            "r_star": float(core.r_star[LEARNER]),
            "messages_sent": int(ledger.sent_messages[0, LEARNER]),
            "bytes_sent": int(ledger.sent_bytes[0, LEARNER]),
        }

    @property
    def horizon(self) -> int:
        """T, the number of rounds of an episode."""
        return self.core.horizon

    def summary(self) -> str:
        """Round, cumulative regret and QC violations (what ``render()`` shows in ``"ansi"`` mode)."""
        info = self._info()
        return (
            f"round {self.core.slot}/{self.core.horizon}  regret {info['cumulative_regret']:.2f}  "
            f"QC violations {info['violations']}"
        )

    def bars(self) -> tuple[np.ndarray, int | None]:
        """Units bought from each producer in the last round over its capacity (zeros before the first round)."""
        if not self._started:
            return np.zeros(len(self._capacity)), None
        return self.core.last.units[0, LEARNER] / self._capacity, None
