"""Federated contextual bandits from real classification data (scikit-learn's bundled datasets).

The supervised-to-bandit conversion of Bietti, Agarwal and Langford ("A contextual bandit bake-off", JMLR 2021) on
the datasets of :mod:`fedbandit_envs.data.classification`, played by the linear family's clients:

* **Clients** hold disjoint shards of the dataset, split heterogeneously and seeded (``split``: ``"dirichlet"``
  class mixes with concentration ``alpha``, ``"clusters"`` of the features, or ``"iid"``); the split is drawn
  from the ``instance`` stream, so ``instance_seed`` fixes it across resets.
* **Each slot** the arrival process (:class:`~fedbandit_envs.families.linear.env.ArrivalProcess`, from the
  ``arrivals`` stream) picks the active client; it draws one sample of its shard uniformly with replacement (the
  ``contexts`` stream). The K arms are the K classes and arm k's context is the sample's q features in block k of
  R^{Kq} (:func:`~fedbandit_envs.data.classification.block_contexts`): d = K q, disjoint per-arm linear models.
* **Reward** 1 for the sample's true class, 0 otherwise; no noise.
* **Regret** is measured against the true label (the bake-off's convention: the label oracle earns 1 every
  round), so the pseudo-regret of a slot is ``1 - reward`` and R_T is the number of mistakes, the cumulative
  0/1 loss the bake-off reports. This comparator is exact and needs no model; the best *linear* policy is not
  computable exactly (maximising a linear classifier's accuracy is NP-hard in general), so the accuracy of the
  whole-data least-squares fit (:meth:`ClassificationSource.least_squares_accuracy`) is given as a reference.
* **Baseline**: a uniform-random policy plays the same stream (the ``rewards`` stream), so results carry
  ``random_reward`` and ``normalised_reward = reward / (random_reward + 1)``, the axis of Li and Wang's Fig. 3.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from typing_extensions import Unpack

from fedbandit_envs.data.classification import (
    SPLITS,
    ClassificationData,
    block_contexts,
    least_squares_policy,
    load_dataset,
    split_clients,
)
from fedbandit_envs.families.linear.env import (
    Arrival,
    ArrivalProcess,
    FederatedLinear,
    LinearEnvKeywords,
    ReplicaStream,
    StreamBlock,
    StreamSource,
    linear_channel,
)
from fedbandit_envs.seeding import SeedStreams
from fedbandit_envs.validation import (
    check_choice,
    check_int,
    check_memory,
    check_options,
    check_real,
    forwards_keywords,
    keyword_checked,
)

__all__ = ["ClassificationBandit", "ClassificationReplica", "ClassificationSource"]


class ClassificationSource(StreamSource):
    """A dataset split among clients, streamed as a contextual bandit (see the module docstring).

    Args:
        dataset: ``"digits"``, ``"wine"``, ``"breast_cancer"`` or ``"iris"``.
        num_clients: N >= 1 (at most the number of samples).
        horizon: T slots (default: the number of samples, one pass in expectation).
        num_features: p principal components kept (None: every standardised raw feature); q = p + 1 with the bias.
        split: ``"dirichlet"``, ``"clusters"`` or ``"iid"``.
        alpha: the Dirichlet concentration of ``split="dirichlet"`` (> 0; small values give skewed class mixes).
        arrival, arrival_params, active_per_slot: the arrival process (see
            :class:`~fedbandit_envs.families.linear.env.ArrivalProcess`).
        instance_seed: fix the split across resets (otherwise drawn from each reset's seed).
    """

    reward_bounds = (0.0, 1.0)
    context_bound = 1.0
    has_baseline = True

    def __init__(
        self,
        dataset: str = "digits",
        num_clients: int = 10,
        horizon: int | None = None,
        num_features: int | None = None,
        split: str = "dirichlet",
        alpha: float = 0.5,
        arrival: Arrival = "uniform",
        arrival_params: Mapping[str, Any] | None = None,
        active_per_slot: int = 1,
        instance_seed: int | None = None,
    ) -> None:
        self.data: ClassificationData = load_dataset(dataset, num_features)
        samples = self.data.num_samples
        n = check_int(
            "num_clients", num_clients, 1, samples, hint=f" (each client needs a sample; {dataset} has {samples})"
        )
        self.num_agents = n
        self.num_arms = self.data.num_classes
        self.dimension = self.data.dimension
        self.global_dimension = self.dimension
        self.local_dimensions = (0,) * n
        self.horizon = self.data.num_samples if horizon is None else check_int("horizon", horizon, 1)
        self.active_per_slot = check_int("active_per_slot", active_per_slot, 1)
        self.split = check_choice("split", split, SPLITS)
        self.alpha = check_real("alpha", alpha, 0.0, exclusive_minimum=True)
        self.arrivals = ArrivalProcess(
            arrival, n, self.active_per_slot, check_options("arrival_params", arrival_params)
        ).check_covers(self.horizon)
        if instance_seed is not None:
            check_int("instance_seed", instance_seed, 0)
        self.instance_seed = instance_seed
        check_memory(
            f"ClassificationSource(dataset={dataset!r}, num_clients={n}, num_features={num_features})",
            self.memory_parts(),
        )

    def least_squares_accuracy(self, lam: float = 1.0) -> float:
        """Accuracy on the whole dataset of the per-class ridge least-squares policy fitted on it (a reference)."""
        scores = self.data.features @ least_squares_policy(self.data, lam)
        return float(np.mean(np.argmax(scores, axis=1) == self.data.labels))

    def replica(self, streams: SeedStreams, instance_streams: SeedStreams) -> ClassificationReplica:
        """One episode: the split (from ``instance_streams``) and the pre-drawn stream."""
        return ClassificationReplica(self, streams, instance_streams)


class ClassificationReplica(ReplicaStream):
    """One replica: the clients' shards, then arrivals, sampled rows and the random policy's arms in blocks.

    Attributes:
        shards: each client's sample indices (sorted).
    """

    def __init__(self, source: ClassificationSource, streams: SeedStreams, instance_streams: SeedStreams) -> None:
        self.source = source
        data = source.data
        self.shards = split_clients(
            data, source.num_agents, source.split, source.alpha, instance_streams.generator("instance")
        )
        self._sizes = np.array([len(s) for s in self.shards], np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(self._sizes)[:-1]])
        self._flat = np.concatenate(self.shards)
        self._arrival_rng = streams.generator("arrivals")
        self._probabilities = source.arrivals.probabilities(self._arrival_rng)
        self._sample_rng = streams.generator("contexts")
        self._random_rng = streams.generator("rewards")

    def samples(self, clients: np.ndarray) -> np.ndarray:
        """Dataset rows for ``clients`` (any shape), uniform in each client's shard (the ``contexts`` stream)."""
        picks = np.floor(self._sample_rng.random(clients.shape) * self._sizes[clients]).astype(np.int64)
        return self._flat[self._offsets[clients] + picks]

    def block(self, start: int, length: int) -> StreamBlock:
        """Arrivals, block-encoded contexts, one-hot true classes, zero noise and the random policy's reward."""
        source, data = self.source, self.source.data
        clients, order = source.arrivals.draw(self._arrival_rng, self._probabilities, start, length)
        rows = self.samples(clients)
        labels = data.labels[rows]
        means = (np.arange(source.num_arms) == labels[..., None]).astype(np.float64)
        random_arms = self._random_rng.integers(source.num_arms, size=clients.shape)
        baseline = (random_arms == labels).astype(np.float64)
        contexts = block_contexts(data.features[rows], source.num_arms)
        return StreamBlock(clients, order, contexts, means, np.zeros(clients.shape), baseline)


@keyword_checked
class ClassificationBandit(FederatedLinear):
    """A real classification dataset as a federated contextual bandit (PettingZoo ``ParallelEnv``).

    The API is that of :class:`~fedbandit_envs.families.linear.env.FederatedLinear` (act and report steps); rewards
    are 0/1, ``infos`` of the active clients give ``expected_rewards`` (the one-hot true class) and the
    pseudo-regret (``1 - reward``, see the module docstring); :attr:`theta` is None.

    Args:
        c1, price_per_message, price_per_byte, free_server_downlink, latency, latency_jitter, drop_prob,
            record_messages, coordinator, inbox, render_mode: as in :class:`FederatedLinear` (one unit per message).
        dataset, num_clients, horizon, num_features, split, alpha, arrival, arrival_params, active_per_slot,
            instance_seed: the problem (see :class:`ClassificationSource`).
    """

    metadata = {"name": "fedbandit/ClassificationBandit-v0", "render_modes": ["ansi"], "is_parallelizable": True}

    @forwards_keywords(linear_channel, FederatedLinear._setup)
    def __init__(
        self,
        dataset: str = "digits",
        num_clients: int = 10,
        horizon: int | None = None,
        *,
        num_features: int | None = None,
        split: str = "dirichlet",
        alpha: float = 0.5,
        arrival: Arrival = "uniform",
        arrival_params: Mapping[str, Any] | None = None,
        active_per_slot: int = 1,
        instance_seed: int | None = None,
        **options: Unpack[LinearEnvKeywords],
    ) -> None:
        source = ClassificationSource(
            dataset,
            num_clients,
            horizon,
            num_features,
            split,
            alpha,
            arrival,
            arrival_params,
            active_per_slot,
            instance_seed,
        )
        self._setup(source, **options)
