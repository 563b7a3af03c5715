"""Privacy accounting for the federated-bandit agents and the DP wrappers.

An agent's privacy loss is a sequence of *events*, one per noisy release (a Laplace or Gaussian release, a whole
binary-tree mechanism over a stream, or a privatisation an agent declares itself). Each event is recorded under a
*partition key*:

* events of one agent with the **same** key touch the same data and compose **sequentially**;
* events with **different** keys touch disjoint data (e.g. different arms, or different windows of a stream) and
  compose in **parallel**, so the agent's loss is the maximum over its keys;
* the default key ``None`` means "may touch any record": its events compose **sequentially with every** key, so the
  agent's loss is ``loss(None) + max over the other keys``.

The neighbouring relation throughout is *replace one record* (one reward / one procurement entry), the relation of
all four specs (li-song-fmab §1.5, zhu-gossip-ucb §1.4, dubey-pentland §1.3, solanki-pfcb §1.8). Sensitivities are
taken with respect to it, and noise multipliers are noise scale divided by that sensitivity.

Composition methods (per key merged with the default key's events, then the maximum over the agent's keys):

* ``"basic"``: ``sum(eps_j)``, ``sum(delta_j)``.
* ``"advanced"``: the advanced composition theorem (Dwork, Rothblum & Vadhan 2010; Dwork & Roth 2014, Thm 3.20) in
  its heterogeneous form, as written in dubey-pentland §5.2::

      eps' = sqrt(2 ln(1/delta') * sum(eps_j**2)) + sum(eps_j * (exp(eps_j) - 1)),   delta = sum(delta_j) + delta'

  With k events of equal ``eps`` this is the textbook ``sqrt(2 k ln(1/delta')) eps + k eps (e^eps - 1)``. The value is
  reported as is (it can exceed the basic total for a few events); it is ``inf`` once an ``eps_j`` is so large (above
  about 709.78) that ``e^eps_j`` overflows a float.
* ``"rdp"`` / ``"pld"``: numerical accounting with ``dp_accounting`` (``RdpAccountant`` / ``PLDAccountant``). Laplace
  events become ``LaplaceDpEvent(1/eps)``, Gaussian events ``GaussianDpEvent(noise_multiplier)``, a tree event over
  ``L`` levels ``SelfComposedDpEvent(LaplaceDpEvent(L/eps), L)`` (a record sits in at most ``L`` Laplace nodes).
  Identical events are counted and composed with ``SelfComposedDpEvent``. Declared events carry no mechanism, so
  they are added on top by basic composition: ``eps = eps_accountant(target_delta) + sum(declared eps)`` at
  ``delta = target_delta + sum(declared delta)``.

The three views of solanki-pfcb §1.8 map onto keys: ``basic`` = one Gaussian event per message under the key
``producer``; ``basic_strict`` = two events per message (the ``w`` and ``y`` fields) under that key; ``disjoint`` =
one event per message under the key ``(producer, z)``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np

__all__ = [
    "COMPOSITION_METHODS",
    "DeclaredEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "PrivacyAccountant",
    "PrivacyBudgetExceeded",
    "PrivacyEvent",
    "TreeEvent",
]

#: The composition methods understood by :meth:`PrivacyAccountant.epsilon` and :meth:`PrivacyAccountant.delta`.
COMPOSITION_METHODS: tuple[str, ...] = ("basic", "advanced", "rdp", "pld")

#: Relative tolerance of the budget check, so that floating-point rounding of a sum never trips it.
_BUDGET_RTOL = 1e-12

_INSTALL_HINT = "install it with pip install 'fedbandit-envs[dp]'"


def real_number(name: str, value: Any) -> float:
    """``value`` as a float; TypeError for non-real input (bools included), ValueError for NaN."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN")
    return value


def _check_event_epsilon(value: Any) -> float:
    value = real_number("epsilon", value)
    if value <= 0:
        raise ValueError(f"epsilon must be > 0 (math.inf for a release without noise), got {value}")
    return value


def _check_event_delta(value: Any, *, allow_zero: bool) -> float:
    value = real_number("delta", value)
    low_ok = value >= 0 if allow_zero else value > 0
    if not (low_ok and value < 1):
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise ValueError(f"delta must lie in {interval}, got {value}")
    return value


class PrivacyBudgetExceeded(RuntimeError):
    """Raised by :meth:`PrivacyAccountant.charge` when an event would push an agent past its budget.

    Attributes:
        agent: index of the agent whose budget would be exceeded.
        spent: the agent's basic-composition epsilon *after* the refused event.
        budget: the agent's epsilon budget (``None`` when only delta is bounded).
        spent_delta: the agent's basic-composition delta after the refused event.
        budget_delta: the agent's delta budget (``None`` when delta is not enforced).
    """

    def __init__(
        self,
        agent: int,
        spent: float,
        budget: float | None,
        spent_delta: float = 0.0,
        budget_delta: float | None = None,
    ):
        self.agent = agent
        self.spent = spent
        self.budget = budget
        self.spent_delta = spent_delta
        self.budget_delta = budget_delta
        shown = "none" if budget is None else f"{budget:.6g}"
        super().__init__(
            f"agent {agent}: privacy budget exceeded: the event would bring (epsilon, delta) to "
            f"({spent:.6g}, {spent_delta:.6g}) against a budget of ({shown}, {budget_delta}); "
            "stop releasing for this agent, or raise budget_epsilon / budget_delta"
        )


class _PureEvent:
    """An event of a pure-DP mechanism (Laplace noise, alone or in a tree): its delta is 0."""

    @property
    def delta(self) -> float:
        """A pure-DP release: always 0."""
        return 0.0


@dataclass(frozen=True)
class LaplaceEvent(_PureEvent):
    """One release of a Laplace mechanism: pure ``epsilon``-DP (``epsilon`` = sensitivity / scale).

    Attributes:
        epsilon: privacy parameter of the release (``math.inf`` for a release without noise).
    """

    epsilon: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_event_epsilon(self.epsilon))


@dataclass(frozen=True)
class GaussianEvent:
    """One release of a Gaussian mechanism calibrated to ``(epsilon, delta)``.

    Attributes:
        epsilon: the epsilon the noise was calibrated for (used by basic / advanced composition).
        delta: the delta the noise was calibrated for, in (0, 1).
        noise_multiplier: sigma divided by the L2 sensitivity (used by RDP / PLD accounting).
    """

    epsilon: float
    delta: float
    noise_multiplier: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_event_epsilon(self.epsilon))
        object.__setattr__(self, "delta", _check_event_delta(self.delta, allow_zero=False))
        multiplier = real_number("noise_multiplier", self.noise_multiplier)
        if not (multiplier > 0 and math.isfinite(multiplier)):
            raise ValueError(f"noise_multiplier (sigma / l2_sensitivity) must be finite and > 0, got {multiplier}")
        object.__setattr__(self, "noise_multiplier", multiplier)


@dataclass(frozen=True)
class TreeEvent(_PureEvent):
    """A whole binary-tree (continual-release) mechanism over one stream: pure ``epsilon``-DP for the stream.

    Attributes:
        epsilon: the guarantee over the whole stream, ``levels * eps_prime`` (``math.inf`` without noise).
        levels: number of tree levels ``L``; each record lies in at most ``L`` Laplace-noised nodes.
    """

    epsilon: float
    levels: int

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_event_epsilon(self.epsilon))
        if isinstance(self.levels, bool) or not isinstance(self.levels, Integral) or self.levels < 1:
            raise ValueError(f"levels must be an int >= 1, got {self.levels!r}")
        object.__setattr__(self, "levels", int(self.levels))


@dataclass(frozen=True)
class DeclaredEvent:
    """A privatisation an agent performs itself and declares (e.g. Fed_UCB's ``privacy_report()``).

    Attributes:
        epsilon: the declared epsilon.
        delta: the declared delta, in [0, 1).
        description: free text naming the mechanism (kept for reports; part of the event's identity).
    """

    epsilon: float
    delta: float = 0.0
    description: str = field(default="")

    def __post_init__(self):
        object.__setattr__(self, "epsilon", _check_event_epsilon(self.epsilon))
        object.__setattr__(self, "delta", _check_event_delta(self.delta, allow_zero=True))
        if not isinstance(self.description, str):
            raise TypeError(f"description must be a str, got {type(self.description).__name__}")


PrivacyEvent = LaplaceEvent | GaussianEvent | TreeEvent | DeclaredEvent
_EVENT_TYPES = (LaplaceEvent, GaussianEvent, TreeEvent, DeclaredEvent)


def _drift(eps: float) -> float:
    """The advanced-composition drift ``eps * (exp(eps) - 1)`` of one event, ``math.inf`` once ``exp`` overflows.

    ``math.expm1`` raises OverflowError above ``eps`` ~ 709.78 instead of returning inf; the bound is infinite there.
    """
    try:
        return eps * math.expm1(eps)
    except OverflowError:
        return math.inf


class _KeyState:
    """Running sums of the events of one (agent, partition key)."""

    __slots__ = ("eps_sum", "delta_sum", "eps_sq_sum", "eps_drift_sum", "n_events", "counts")

    def __init__(self):
        self.eps_sum = 0.0
        self.delta_sum = 0.0
        self.eps_sq_sum = 0.0
        self.eps_drift_sum = 0.0  # sum of eps_j * (exp(eps_j) - 1)
        self.n_events = 0
        self.counts: dict[PrivacyEvent, int] = {}

    def add(self, event: PrivacyEvent) -> None:
        eps = event.epsilon
        self.eps_sum += eps
        self.delta_sum += event.delta
        self.eps_sq_sum += eps * eps
        self.eps_drift_sum += _drift(eps)
        self.n_events += 1
        self.counts[event] = self.counts.get(event, 0) + 1

    def merged(self, other: _KeyState) -> _KeyState:
        """A new state holding the events of both states (sequential composition)."""
        out = _KeyState()
        for name in ("eps_sum", "delta_sum", "eps_sq_sum", "eps_drift_sum", "n_events"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        out.counts = dict(self.counts)
        for event, count in other.counts.items():
            out.counts[event] = out.counts.get(event, 0) + count
        return out

    def advanced_epsilon(self, delta_prime: float) -> float:
        return math.sqrt(2.0 * math.log(1.0 / delta_prime) * self.eps_sq_sum) + self.eps_drift_sum


def _import_dp_accounting():
    try:
        import dp_accounting
    except ImportError as exc:  # pragma: no cover - exercised through monkeypatching in the tests
        raise ImportError(f"the 'rdp' and 'pld' methods need the dp-accounting package; {_INSTALL_HINT}") from exc
    return dp_accounting


def _to_dp_event(dp_accounting, event: PrivacyEvent):
    """The dp_accounting event of a Laplace, Gaussian or tree event (None for a declared event)."""
    if isinstance(event, DeclaredEvent):
        return None
    if math.isinf(event.epsilon):
        return dp_accounting.NonPrivateDpEvent()
    if isinstance(event, LaplaceEvent):
        return dp_accounting.LaplaceDpEvent(noise_multiplier=1.0 / event.epsilon)
    if isinstance(event, GaussianEvent):
        return dp_accounting.GaussianDpEvent(noise_multiplier=event.noise_multiplier)
    node = dp_accounting.LaplaceDpEvent(noise_multiplier=event.levels / event.epsilon)
    return dp_accounting.SelfComposedDpEvent(node, event.levels)


class PrivacyAccountant:
    """Per-agent privacy ledger with sequential composition within a partition key and parallel across keys.

    Recording is O(1): each (agent, key) keeps running sums for basic and advanced composition and a count of
    identical events for RDP / PLD, so hundreds of agents with thousands of events each are cheap.

    Args:
        num_agents: number of agents, indexed ``0 .. num_agents - 1``.
        budget_epsilon: per-agent epsilon budget enforced by :meth:`charge` / :meth:`would_exceed` with basic
            composition; ``None`` for no budget.
        budget_delta: per-agent delta budget, in [0, 1], checked whether or not ``budget_epsilon`` is set; ``None``
            (default) enforces epsilon only, as the specs ask (solanki-pfcb §6). With ``0.0`` (a pure-DP budget) any
            event with delta > 0, e.g. a Gaussian release, exceeds the budget.
        pld_discretization: value discretisation interval of ``dp_accounting``'s ``PLDAccountant``.
    """

    def __init__(
        self,
        num_agents: int,
        budget_epsilon: float | None = None,
        budget_delta: float | None = None,
        *,
        pld_discretization: float = 1e-4,
    ):
        if isinstance(num_agents, bool) or not isinstance(num_agents, Integral) or num_agents < 1:
            raise ValueError(f"num_agents must be an int >= 1, got {num_agents!r}")
        if budget_epsilon is not None:
            budget_epsilon = real_number("budget_epsilon", budget_epsilon)
            if budget_epsilon < 0:
                raise ValueError(f"budget_epsilon must be >= 0 or None (no budget), got {budget_epsilon}")
        if budget_delta is not None:
            budget_delta = real_number("budget_delta", budget_delta)
            if not 0 <= budget_delta <= 1:
                raise ValueError(f"budget_delta must lie in [0, 1] or be None (not enforced), got {budget_delta}")
        pld_discretization = real_number("pld_discretization", pld_discretization)
        if not (0 < pld_discretization < 1):
            raise ValueError(f"pld_discretization must lie in (0, 1), e.g. 1e-4; got {pld_discretization}")
        self._num_agents: int = int(num_agents)
        self._budget_epsilon: float | None = budget_epsilon
        self._budget_delta: float | None = budget_delta
        self._pld_discretization: float = pld_discretization
        self._keys: list[dict[Hashable, _KeyState]] = [{} for _ in range(self._num_agents)]
        self._basic_eps: np.ndarray = np.zeros(self._num_agents)
        self._basic_delta: np.ndarray = np.zeros(self._num_agents)
        # basic totals = default key + the largest other key, kept incrementally
        self._max_key_eps: np.ndarray = np.zeros(self._num_agents)
        self._max_key_delta: np.ndarray = np.zeros(self._num_agents)

    @property
    def num_agents(self) -> int:
        """Number of agents."""
        return self._num_agents

    @property
    def budget_epsilon(self) -> float | None:
        """Per-agent epsilon budget (``None``: no budget)."""
        return self._budget_epsilon

    @property
    def budget_delta(self) -> float | None:
        """Per-agent delta budget (``None``: delta not enforced)."""
        return self._budget_delta

    # ------------------------------------------------------------------ recording
    def _check_agent(self, agent: Any) -> int:
        if isinstance(agent, bool) or not isinstance(agent, Integral):
            raise TypeError(f"agent must be an int index, got {type(agent).__name__} {agent!r}")
        index = int(agent)
        if not 0 <= index < self._num_agents:
            raise ValueError(f"agent must lie in [0, {self._num_agents - 1}], got {agent}")
        return index

    @staticmethod
    def _check_event(event: Any) -> PrivacyEvent:
        if not isinstance(event, _EVENT_TYPES):
            names = ", ".join(t.__name__ for t in _EVENT_TYPES)
            raise TypeError(f"event must be one of {names}; got {type(event).__name__}")
        return event

    @staticmethod
    def _check_partition(partition: Any) -> Hashable:
        try:
            hash(partition)
        except TypeError as exc:
            raise TypeError(f"partition must be hashable (e.g. an arm index or a tuple), got {partition!r}") from exc
        return partition

    def record(self, agent: int, event: PrivacyEvent, partition: Hashable = None) -> None:
        """Record ``event`` for ``agent`` under the partition key ``partition`` (``None`` is the default key)."""
        agent = self._check_agent(agent)
        event = self._check_event(event)
        partition = self._check_partition(partition)
        state = self._keys[agent].get(partition)
        if state is None:
            state = self._keys[agent][partition] = _KeyState()
        state.add(event)
        if partition is not None:
            self._max_key_eps[agent] = max(self._max_key_eps[agent], state.eps_sum)
            self._max_key_delta[agent] = max(self._max_key_delta[agent], state.delta_sum)
        default = self._keys[agent].get(None)
        self._basic_eps[agent] = (default.eps_sum if default else 0.0) + self._max_key_eps[agent]
        self._basic_delta[agent] = (default.delta_sum if default else 0.0) + self._max_key_delta[agent]

    def would_exceed(self, agent: int, event: PrivacyEvent, partition: Hashable = None) -> bool:
        """Whether recording ``event`` would push the agent's basic (epsilon, delta) past the budget.

        Always ``False`` without a budget. A total equal to the budget (up to a relative 1e-12 for rounding) fits.
        """
        return self.would_exceed_all(agent, [(event, partition)])

    def would_exceed_all(self, agent: int, releases: Sequence[tuple[PrivacyEvent, Hashable]]) -> bool:
        """Whether recording every ``(event, partition)`` of ``releases`` together would exceed the budget.

        Each budget that is set is checked (a delta budget also without an epsilon budget).
        """
        if self._budget_epsilon is None and self._budget_delta is None:
            return False
        eps, delta = self.projected(agent, releases)
        if self._budget_epsilon is not None and eps > self._budget_epsilon * (1 + _BUDGET_RTOL):
            return True
        return self._budget_delta is not None and delta > self._budget_delta * (1 + _BUDGET_RTOL)

    def projected(self, agent: int, releases: Sequence[tuple[PrivacyEvent, Hashable]]) -> tuple[float, float]:
        """The agent's basic (epsilon, delta) if every ``(event, partition)`` of ``releases`` were recorded."""
        agent = self._check_agent(agent)
        added: dict[Hashable, list[float]] = {}
        for event, partition in releases:
            event, partition = self._check_event(event), self._check_partition(partition)
            key = added.setdefault(partition, [0.0, 0.0])
            key[0] += event.epsilon
            key[1] += event.delta
        default_eps, default_delta = added.pop(None, (0.0, 0.0))
        key_eps, key_delta = self._max_key_eps[agent], self._max_key_delta[agent]
        for partition, (new_eps, new_delta) in added.items():
            state = self._keys[agent].get(partition)
            key_eps = max(key_eps, new_eps + (state.eps_sum if state else 0.0))
            key_delta = max(key_delta, new_delta + (state.delta_sum if state else 0.0))
        default = self._keys[agent].get(None)
        eps = default_eps + (default.eps_sum if default else 0.0) + key_eps
        delta = default_delta + (default.delta_sum if default else 0.0) + key_delta
        return eps, delta

    def charge(self, agent: int, event: PrivacyEvent, partition: Hashable = None) -> None:
        """Record ``event`` if it fits the budget; otherwise raise :class:`PrivacyBudgetExceeded` and record nothing."""
        if self.would_exceed(agent, event, partition):
            eps, delta = self.projected(agent, [(event, partition)])
            raise PrivacyBudgetExceeded(int(agent), eps, self._budget_epsilon, delta, self._budget_delta)
        self.record(agent, event, partition)

    # ------------------------------------------------------------------ reporting
    @staticmethod
    def _check_method(method: Any) -> str:
        if method not in COMPOSITION_METHODS:
            raise ValueError(f"method must be one of {COMPOSITION_METHODS}, got {method!r}")
        return method

    @staticmethod
    def _check_probability(name: str, value: Any, method: str) -> float:
        if value is None:
            raise ValueError(f"method={method!r} needs {name}, a probability in (0, 1) such as 1e-6")
        value = real_number(name, value)
        if not 0 < value < 1:
            raise ValueError(f"{name} must lie in (0, 1), got {value}")
        return value

    def epsilon(
        self,
        agent: int,
        method: str = "basic",
        *,
        delta_prime: float | None = None,
        target_delta: float | None = None,
    ) -> float:
        """The agent's epsilon under ``method`` (max over its partition keys; 0.0 before any event).

        Args:
            agent: agent index.
            method: ``"basic"``, ``"advanced"`` (needs ``delta_prime``), ``"rdp"`` or ``"pld"`` (need
                ``target_delta``); see the module docstring for the formulas.
            delta_prime: slack of the advanced composition theorem, in (0, 1).
            target_delta: delta at which RDP / PLD report epsilon, in (0, 1).
        """
        agent = self._check_agent(agent)
        method = self._check_method(method)
        states = self._composed_states(agent)
        if method == "basic":
            return float(self._basic_eps[agent])
        if method == "advanced":
            delta_prime = self._check_probability("delta_prime", delta_prime, method)
            return max((s.advanced_epsilon(delta_prime) for s in states), default=0.0)
        target_delta = self._check_probability("target_delta", target_delta, method)
        dp_accounting = _import_dp_accounting()
        return max((self._numeric_epsilon(dp_accounting, s, method, target_delta) for s in states), default=0.0)

    def delta(
        self,
        agent: int,
        method: str = "basic",
        *,
        delta_prime: float | None = None,
        target_epsilon: float | None = None,
    ) -> float:
        """The agent's delta under ``method`` (max over its partition keys; 0.0 before any event).

        Args:
            agent: agent index.
            method: ``"basic"`` (sum of deltas), ``"advanced"`` (sum of deltas + ``delta_prime``), ``"rdp"`` or
                ``"pld"`` (delta at ``target_epsilon``, plus declared deltas).
            delta_prime: slack of the advanced composition theorem, in (0, 1).
            target_epsilon: epsilon > 0 at which RDP / PLD report delta.
        """
        agent = self._check_agent(agent)
        method = self._check_method(method)
        states = self._composed_states(agent)
        if method == "basic":
            return float(self._basic_delta[agent])
        if method == "advanced":
            delta_prime = self._check_probability("delta_prime", delta_prime, method)
            return max((s.delta_sum + delta_prime for s in states), default=0.0)
        if target_epsilon is None:
            raise ValueError(f"method={method!r} needs target_epsilon, a finite epsilon > 0")
        target_epsilon = real_number("target_epsilon", target_epsilon)
        if not (target_epsilon > 0 and math.isfinite(target_epsilon)):
            raise ValueError(f"target_epsilon must be finite and > 0, got {target_epsilon}")
        dp_accounting = _import_dp_accounting()
        return max((self._numeric_delta(dp_accounting, s, method, target_epsilon) for s in states), default=0.0)

    def _composed_states(self, agent: int) -> list[_KeyState]:
        """One state per partition key with the default key's events merged in (just the default key if alone)."""
        keys = self._keys[agent]
        default = keys.get(None)
        others = [state for key, state in keys.items() if key is not None]
        if not others:
            return [default] if default else []
        return [state.merged(default) if default else state for state in others]

    def _numeric_accountant(self, dp_accounting, state: _KeyState, method: str):
        """The dp_accounting accountant of one key's mechanism events, plus the declared (eps, delta) totals."""
        if method == "rdp":
            accountant = dp_accounting.rdp.RdpAccountant()
        else:
            accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=self._pld_discretization)
        declared_eps = declared_delta = 0.0
        for event, count in state.counts.items():
            dp_event = _to_dp_event(dp_accounting, event)
            if dp_event is None:
                declared_eps += count * event.epsilon
                declared_delta += count * event.delta
            else:
                accountant.compose(dp_accounting.SelfComposedDpEvent(dp_event, count) if count > 1 else dp_event)
        return accountant, declared_eps, declared_delta

    def _numeric_epsilon(self, dp_accounting, state: _KeyState, method: str, target_delta: float) -> float:
        accountant, declared_eps, _ = self._numeric_accountant(dp_accounting, state, method)
        return float(accountant.get_epsilon(target_delta)) + declared_eps

    def _numeric_delta(self, dp_accounting, state: _KeyState, method: str, target_epsilon: float) -> float:
        accountant, declared_eps, declared_delta = self._numeric_accountant(dp_accounting, state, method)
        remaining = target_epsilon - declared_eps
        if remaining <= 0:
            return 1.0
        return min(1.0, float(accountant.get_delta(remaining)) + declared_delta)

    def totals(self) -> np.ndarray:
        """Per-agent basic-composition epsilon, shape ``(num_agents,)`` (a copy)."""
        return self._basic_eps.copy()

    def delta_totals(self) -> np.ndarray:
        """Per-agent basic-composition delta, shape ``(num_agents,)`` (a copy)."""
        return self._basic_delta.copy()

    def remaining(self, agent: int) -> float:
        """Epsilon left in the agent's budget under basic composition (``math.inf`` without a budget)."""
        agent = self._check_agent(agent)
        if self._budget_epsilon is None:
            return math.inf
        return max(0.0, self._budget_epsilon - float(self._basic_eps[agent]))

    def summary(self, agent: int) -> dict[str, Any]:
        """A plain-dict report of the agent: basic totals, budget, and per-partition sums and event counts."""
        agent = self._check_agent(agent)
        keys = self._keys[agent]
        return {
            "agent": agent,
            "num_events": sum(s.n_events for s in keys.values()),
            "num_partitions": len(keys),
            "epsilon_basic": float(self._basic_eps[agent]),
            "delta_basic": float(self._basic_delta[agent]),
            "budget_epsilon": self._budget_epsilon,
            "budget_delta": self._budget_delta,
            "remaining_epsilon": self.remaining(agent),
            "partitions": {
                key: {"epsilon": s.eps_sum, "delta": s.delta_sum, "events": s.n_events} for key, s in keys.items()
            },
        }
