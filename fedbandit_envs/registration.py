"""Every environment id of the suite, registered with PettingZoo and Gymnasium on import."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium
import pettingzoo
from gymnasium.envs.registration import WrapperSpec
from gymnasium.wrappers import TimeLimit
from pettingzoo import AECEnv
from pettingzoo.utils.conversions import parallel_to_aec


@dataclass(frozen=True)
class EnvEntry:
    """One registered id.

    Attributes:
        entry_point: ``"module:Class"`` of the environment.
        kwargs: default keyword arguments of the id.
        description: one line for listings and the README table.
        test_kwargs: keywords that make a small, fast instance (used by the conformance tests; must
            include ``horizon`` so an episode ends quickly).
        max_episode_steps: a Gymnasium view's default horizon, registered as the id's ``max_episode_steps``.
    """

    entry_point: str
    kwargs: dict[str, Any]
    description: str
    test_kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None


_SMALL_MAB = {"num_agents": 4, "num_arms": 3, "horizon": 60}
_SMALL_PROCUREMENT = {"num_agents": 3, "num_producers": 4, "horizon": 60, "instance_params": {"max_capacity": 5}}

#: Multi-agent ids (``pettingzoo.make("parallel", id, **kwargs)``; ``"aec"`` gives the AEC form).
PARALLEL_ENVS: dict[str, EnvEntry] = {
    "fedbandit/FederatedMAB-v0": EnvEntry(
        "fedbandit_envs.families.mab.env:FederatedMAB",
        {},
        "M agents, K Bernoulli arms, homogeneous U[0,1] means, server topology",
        _SMALL_MAB,
    ),
    "fedbandit/FederatedMABHeterogeneous-v0": EnvEntry(
        "fedbandit_envs.families.mab.env:FederatedMAB",
        {"instance": "heterogeneous"},
        "per-agent means around exact global means (Li-Song D15), server topology",
        _SMALL_MAB,
    ),
    "fedbandit/GossipMAB-v0": EnvEntry(
        "fedbandit_envs.families.mab.env:FederatedMAB",
        {"topology": "ring", "gossip": "uniform_edge", "instance": "heterogeneous"},
        "ring of agents, one uniformly random gossip edge announced per slot",
        _SMALL_MAB,
    ),
    "fedbandit/Procurement-v0": EnvEntry(
        "fedbandit_envs.families.procurement.env:FedProcurementEnv",
        {},
        "Solanki et al.: n aggregators buy units from m producers (family U, alpha 0.4), complete graph",
        _SMALL_PROCUREMENT,
    ),
    "fedbandit/ProcurementNormal-v0": EnvEntry(
        "fedbandit_envs.families.procurement.env:FedProcurementEnv",
        {"instance": "normal"},
        "procurement with qualities and costs N(alpha, 0.2) clipped to [0, 1] (family N)",
        _SMALL_PROCUREMENT,
    ),
    "fedbandit/ProcurementStress-v0": EnvEntry(
        "fedbandit_envs.families.procurement.env:FedProcurementEnv",
        {"instance": "stress"},
        "procurement family U at alpha 0.7, where the quality constraint binds",
        _SMALL_PROCUREMENT,
    ),
    "fedbandit/FederatedLinear-v0": EnvEntry(
        "fedbandit_envs.families.linear.env:FederatedLinear",
        {},
        "Li-Wang: N=1000 clients, one active per slot (uniform arrivals), K=25 contexts in the unit ball of R^25",
        {"num_clients": 4, "num_arms": 3, "dimension": 3, "horizon": 40},
    ),
    "fedbandit/FederatedLinearZipf-v0": EnvEntry(
        "fedbandit_envs.families.linear.env:FederatedLinear",
        {"arrival": "zipf"},
        "Li-Wang's non-uniform arrivals: client i active with probability proportional to 1/i (spec D16)",
        {"num_clients": 4, "num_arms": 3, "dimension": 3, "horizon": 40},
    ),
    "fedbandit/FederatedLinearHeterogeneous-v0": EnvEntry(
        "fedbandit_envs.families.linear.env:FederatedLinear",
        {"mode": "heterogeneous", "global_dimension": 12},
        "Li-Wang heterogeneous clients: shared theta_g (d_g=12) plus a private theta_i (d_i=13) per client",
        {"num_clients": 4, "num_arms": 3, "dimension": 3, "horizon": 40, "global_dimension": 1},
    ),
    "fedbandit/ReplayStandIn-v0": EnvEntry(
        "fedbandit_envs.families.linear.replay:ReplayStandIn",
        {},
        "Li-Wang real-data stand-in (LastFM shape): users replay logged pools of 25 items, reward 1 for the positive",
        {"num_users": 4, "events_scale": 0.3, "catalogue_size": 40, "dimension": 3, "num_arms": 3, "horizon": 40},
    ),
    "fedbandit/ClassificationBandit-v0": EnvEntry(
        "fedbandit_envs.families.linear.classification:ClassificationBandit",
        {},
        "scikit-learn's digits as a bandit (Bietti et al.): 10 clients (Dirichlet 0.5 class mixes), arms = classes",
        {"dataset": "iris", "num_clients": 3, "horizon": 40},
    ),
}

#: Single-agent Gymnasium ids (``gymnasium.make(id, **kwargs)``). Each registers its default horizon as
#: ``max_episode_steps``; ``gymnasium.make`` moves that time limit to the ``horizon`` it is given
#: (see :func:`time_limit_at_horizon`).
GYMNASIUM_ENVS: dict[str, EnvEntry] = {
    "fedbandit/LocalBandit-v0": EnvEntry(
        "fedbandit_envs.families.mab.views:LocalBanditEnv",
        {},
        "one agent's local K-armed bandit: Discrete(K) action, flat Box observation",
        {"num_arms": 3, "horizon": 60},
        max_episode_steps=200,
    ),
    "fedbandit/FederatedClient-v0": EnvEntry(
        "fedbandit_envs.families.mab.views:FederatedClientEnv",
        {},
        "client 0 of a federation whose other clients and server run a reference algorithm",
        {"num_agents": 4, "num_arms": 3, "horizon": 60},
        max_episode_steps=200,
    ),
    "fedbandit/LinearBandit-v0": EnvEntry(
        "fedbandit_envs.families.linear.views:LinearBanditEnv",
        {},
        "one client's linear contextual bandit: flat Box of the K x d contexts, Discrete(K) action",
        {"num_arms": 3, "dimension": 2, "horizon": 60},
        max_episode_steps=200,
    ),
    "fedbandit/SingleAggregator-v0": EnvEntry(
        "fedbandit_envs.families.procurement.views:SingleAggregatorEnv",
        {},
        "one procurement aggregator alone (the non-federated setting): MultiDiscrete(k + 1) action",
        {"num_producers": 4, "horizon": 60, "instance_params": {"max_capacity": 5}},
        max_episode_steps=1000,
    ),
    "fedbandit/ProcurementClient-v0": EnvEntry(
        "fedbandit_envs.families.procurement.views:SingleAggregatorEnv",
        {"num_agents": 4},
        "aggregator 0 of a procurement federation whose peers run P-FCB; their messages in the observation",
        {**_SMALL_PROCUREMENT, "peer_params": {"t_lo": 16, "t_hi": 64}},
        max_episode_steps=1000,
    ),
}


class ParallelEntryPoint:
    """Builds the parallel environment of an id, named by the id.

    A variant id (``fedbandit/GossipMAB-v0``) is its class with other defaults; its ``metadata["name"]``, which
    tools such as SuperSuit and RLlib show, is the id rather than the class's name.
    """

    def __init__(self, env_id: str, entry_point: str) -> None:
        self.env_id = env_id
        self.entry_point = entry_point

    def __call__(self, **kwargs: Any) -> Any:
        """The environment ``entry_point(**kwargs)``, its metadata naming the id."""
        module, name = self.entry_point.split(":")
        env = getattr(importlib.import_module(module), name)(**kwargs)
        env.metadata = {**env.metadata, "name": self.env_id}
        return env


class AECEntryPoint(ParallelEntryPoint):
    """Builds the AEC form of a parallel id: PettingZoo's ``parallel_to_aec`` over the parallel environment.

    Registered for every id of :data:`PARALLEL_ENVS`, so ``pettingzoo.make("aec", id, **kwargs)`` works. The AEC
    form plays the same slots agent by agent; environment methods outside the PettingZoo API (``exchange``,
    ``communicate``) are on ``env.unwrapped``.
    """

    def __call__(self, **kwargs: Any) -> AECEnv:
        """The AEC environment of ``entry_point(**kwargs)``."""
        return parallel_to_aec(super().__call__(**kwargs))


@runtime_checkable
class _EpisodeLength(Protocol):
    """A view that knows its episode length (every view of the families does)."""

    @property
    def horizon(self) -> int:
        """T, the number of steps of an episode."""
        ...


def time_limit_at_horizon(env: gymnasium.Env, default: int) -> gymnasium.Env:
    """The view ``env`` made by ``gymnasium.make`` with its time limit moved to the view's horizon.

    Registered as the additional wrapper of every Gymnasium id, so it runs inside ``gymnasium.make`` on the
    ``TimeLimit`` wrapper that ``make`` applied. A limit equal to the registered ``max_episode_steps`` (``default``,
    the default horizon) becomes a limit at the view's ``horizon``, so ``gymnasium.make(id, horizon=1000)`` runs
    1000-step episodes and ``env.spec.max_episode_steps`` is the episode length. A limit given to ``make`` as
    ``max_episode_steps`` below the horizon, or none (``max_episode_steps=-1``), is kept; one above the horizon, which
    no episode could reach, becomes the horizon (so the spec states the episode length); one given with the default's
    value cannot be told from it and moves too.
    """
    if not (isinstance(env, TimeLimit) and env.spec is not None and env.spec.max_episode_steps is not None):
        return env
    view = env.unwrapped
    if not isinstance(view, _EpisodeLength):
        raise TypeError(f"{type(view).__name__} has no horizon; only the views of the families are registered")
    limit, horizon = env.spec.max_episode_steps, view.horizon
    if limit == horizon or (limit != default and limit < horizon):
        return env
    return TimeLimit(env.env, horizon)


def register_all() -> None:
    """Register every id (idempotent): parallel and AEC forms with PettingZoo, views with Gymnasium."""
    for env_id, entry in PARALLEL_ENVS.items():
        if env_id not in pettingzoo.parallel_registry:
            pettingzoo.register("parallel", env_id, ParallelEntryPoint(env_id, entry.entry_point), kwargs=entry.kwargs)
        if env_id not in pettingzoo.aec_registry:
            pettingzoo.register("aec", env_id, AECEntryPoint(env_id, entry.entry_point), kwargs=entry.kwargs)
    for env_id, entry in GYMNASIUM_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(
                env_id,
                entry_point=entry.entry_point,
                kwargs=entry.kwargs,
                max_episode_steps=entry.max_episode_steps,
                additional_wrappers=(
                    WrapperSpec(
                        "time_limit_at_horizon",
                        f"{__name__}:time_limit_at_horizon",
                        {"default": entry.max_episode_steps},
                    ),
                ),
            )


def pprint_registry() -> None:
    """Print every id of the suite with its description."""
    print("PettingZoo (pettingzoo.make('parallel', id, **kwargs); 'aec' for the AEC form):")
    for env_id, entry in PARALLEL_ENVS.items():
        print(f"  {env_id:42s} {entry.description}")
    print("Gymnasium (gymnasium.make(id, **kwargs)):")
    for env_id, entry in GYMNASIUM_ENVS.items():
        print(f"  {env_id:42s} {entry.description}")
