"""Classification datasets bundled with scikit-learn, converted to contextual bandits (Bietti et al., JMLR 2021).

The supervised-to-bandit conversion of "A contextual bandit bake-off" (Bietti, Agarwal and Langford): each round a
sample ``(x, y)`` arrives, the K actions are the K classes, and the reward is 1 for the true class ``y`` and 0
otherwise. This module holds the data side; the environment is
:class:`~fedbandit_envs.families.linear.classification.ClassificationBandit`.

* **Datasets** (:data:`DATASETS`): scikit-learn's bundled ``digits`` (1797 samples, 64 features, 10 classes),
  ``wine`` (178, 13, 3), ``breast_cancer`` (569, 30, 2) and ``iris`` (150, 4, 3). They ship inside the
  scikit-learn package (``sklearn.datasets.load_*``); nothing is downloaded. scikit-learn is the ``data`` extra
  (``pip install 'fedbandit-envs[data]'``) and is imported only when a dataset is loaded.
* **Features** (:func:`load_dataset`): every raw feature is standardised over the whole dataset (zero mean, unit
  variance; a constant feature stays 0); with ``num_features = p`` the standardised data is projected on its
  first p principal components (an SVD, each component's sign fixed so that its largest-magnitude loading is
  positive); a constant 1 (the bias) is appended, and every row is divided by the largest row norm, so the
  q = p + 1 (or raw + 1) coordinates of every sample lie in the unit ball.
* **Contexts** (:func:`block_contexts`): disjoint per-arm features. Arm k's context is the sample's q features in
  block k of a vector of dimension d = K q, zeros elsewhere, so one linear parameter of R^{Kq} is K independent
  per-class linear models (the bake-off's per-action regressors).
* **Client splits** (:data:`SPLITS`, :func:`split_clients`), all seeded: ``"dirichlet"`` (the class mix of each
  client: each class's samples are divided among the clients in proportions drawn from Dirichlet(alpha), small
  alpha giving skewed mixes), ``"clusters"`` (k-means on the features, one cluster per client) and ``"iid"``
  (a random permutation cut in equal parts).
* **Linear reference** (:func:`least_squares_policy`): the per-class ridge least-squares fit on the whole data in
  the same features, the linear model class the learners use; its accuracy is a reference, not the regret's
  comparator (the environment measures regret against the true label, see its docstring).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from fedbandit_envs.validation import check_choice, check_int, check_real

__all__ = [
    "DATASETS",
    "SPLITS",
    "ClassificationData",
    "block_contexts",
    "cluster_split",
    "dirichlet_split",
    "iid_split",
    "least_squares_policy",
    "load_dataset",
    "split_clients",
]

#: The bundled datasets (``sklearn.datasets.load_<name>``).
DATASETS: tuple[str, ...] = ("digits", "wine", "breast_cancer", "iris")

#: Ways to divide the samples among clients.
SPLITS: tuple[str, ...] = ("dirichlet", "clusters", "iid")

#: Draws of Dirichlet proportions tried before a split that leaves a client without samples is refused.
MAX_DIRICHLET_DRAWS = 1000


def _sklearn(module: str) -> Any:
    """Import ``sklearn.<module>``, or raise an ImportError naming the ``data`` extra."""
    try:
        return importlib.import_module(f"sklearn.{module}")
    except ImportError as error:
        raise ImportError(
            "the classification datasets need scikit-learn: pip install 'fedbandit-envs[data]'"
        ) from error


@dataclass(frozen=True)
class ClassificationData:
    """A dataset in the features the learners see (read-only arrays).

    Attributes:
        name: the :data:`DATASETS` name.
        features: (n, q) float64 rows of norm at most 1: standardised (or principal-component) features, then the
            bias 1, all divided by the largest row norm.
        labels: (n,) int64 class of every sample, in 0..K-1.
        num_classes: K.
    """

    name: str
    features: np.ndarray
    labels: np.ndarray
    num_classes: int

    @property
    def num_samples(self) -> int:
        """n, the number of samples."""
        return len(self.labels)

    @property
    def dimension(self) -> int:
        """The width d = K q of a block-encoded context."""
        return self.num_classes * self.features.shape[1]


def _principal_components(standardised: np.ndarray, count: int) -> np.ndarray:
    """The projection of ``standardised`` on its first ``count`` principal components (signs fixed)."""
    _, _, vt = np.linalg.svd(standardised, full_matrices=False)
    components = vt[:count]
    signs = np.sign(components[np.arange(count), np.argmax(np.abs(components), axis=1)])
    return standardised @ (components * signs[:, None]).T


@lru_cache(maxsize=len(DATASETS))
def _standardised(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The raw features of a checked dataset name, standardised, and its labels (cached, read-only)."""
    raw, labels = getattr(_sklearn("datasets"), f"load_{name}")(return_X_y=True)
    raw = np.asarray(raw, np.float64)
    scale = raw.std(axis=0)
    standardised = (raw - raw.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    labels = np.asarray(labels, np.int64)
    standardised.flags.writeable = False
    labels.flags.writeable = False
    return standardised, labels


@lru_cache(maxsize=16)
def _load_checked(name: str, count: int | None) -> ClassificationData:
    """:func:`load_dataset` for a checked name and a checked Python int (or None) count; cached."""
    standardised, labels = _standardised(name)
    if count is not None:
        standardised = _principal_components(standardised, count)
    with_bias = np.hstack([standardised, np.ones((len(labels), 1))])
    features = with_bias / np.linalg.norm(with_bias, axis=1).max()
    features.flags.writeable = False
    return ClassificationData(name, features, labels, int(labels.max()) + 1)


def load_dataset(name: str, num_features: int | None = None) -> ClassificationData:
    """Load a bundled dataset in the learners' features (see the module docstring); cached, read-only.

    The arguments are checked before the cache is consulted, so a value that merely compares equal to a valid
    one (``2.0``, ``True``) is refused like any other.

    Args:
        name: one of :data:`DATASETS`.
        num_features: p, the number of principal components kept (1 .. the raw feature count), or None to keep
            every standardised raw feature.
    """
    name = check_choice("dataset", name, DATASETS)
    count: int | None = None
    if num_features is not None:
        raw_count = _standardised(name)[0].shape[1]
        count = check_int("num_features", num_features, 1, raw_count, hint=f" ({name} has {raw_count} features)")
    return _load_checked(name, count)


def block_contexts(features: np.ndarray, num_classes: int) -> np.ndarray:
    """Block encoding: (..., q) sample features to (..., K, K q) contexts, arm k's block holding the features."""
    q = features.shape[-1]
    contexts = np.zeros((*features.shape[:-1], num_classes, num_classes * q))
    for k in range(num_classes):
        contexts[..., k, k * q : (k + 1) * q] = features
    return contexts


def _check_clients(num_clients: int, num_samples: int) -> int:
    return check_int("num_clients", num_clients, 1, num_samples, hint=f" (the dataset has {num_samples} samples)")


def dirichlet_split(
    labels: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator
) -> tuple[list[np.ndarray], np.ndarray]:
    """Divide the samples among clients by class mix; returns each client's sample indices and the proportions.

    For every class c in turn (0..K-1), its samples are shuffled and proportions ``p_c ~ Dirichlet(alpha 1_N)``
    drawn; client i receives the shuffled samples from ``floor(n_c P_{i-1})`` to ``floor(n_c P_i)`` with P the
    cumulative sums of ``p_c`` (so counts follow ``p_c`` up to rounding). If a client receives no sample at all,
    every class is drawn again (up to :data:`MAX_DIRICHLET_DRAWS` times). The proportions are returned as a
    (K, N) array; each client's indices are sorted.
    """
    labels = np.asarray(labels)
    n = _check_clients(num_clients, len(labels))
    alpha = check_real("alpha", alpha, 0.0, exclusive_minimum=True)
    classes = int(labels.max()) + 1
    for _ in range(MAX_DIRICHLET_DRAWS):
        parts: list[list[np.ndarray]] = [[] for _ in range(n)]
        proportions = np.empty((classes, n))
        for c in range(classes):
            members = rng.permutation(np.flatnonzero(labels == c))
            proportions[c] = rng.dirichlet(np.full(n, alpha))
            cuts = np.floor(np.cumsum(proportions[c])[:-1] * len(members)).astype(np.int64)
            for i, piece in enumerate(np.split(members, cuts)):
                parts[i].append(piece)
        clients = [np.sort(np.concatenate(p)) for p in parts]
        if min(len(c) for c in clients) > 0:
            return clients, proportions
    raise ValueError(
        f"{MAX_DIRICHLET_DRAWS} Dirichlet(alpha={alpha}) draws all left a client without samples; "
        "use a larger alpha or fewer num_clients"
    )


def cluster_split(features: np.ndarray, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Divide the samples among clients by feature clusters: k-means with N clusters, cluster i to client i.

    scikit-learn's ``KMeans`` (Lloyd, k-means++ initialisation, ``n_init=10``) seeded from ``rng``; clusters are
    numbered by their smallest sample index, so the numbering does not depend on the labels k-means gives.
    """
    n = _check_clients(num_clients, len(features))
    if len(np.unique(features, axis=0)) < n:
        raise ValueError(f"num_clients={n} exceeds the number of distinct samples; use fewer clients")
    seed = int(rng.integers(2**31 - 1))
    kmeans = _sklearn("cluster").KMeans(n_clusters=n, n_init=10, random_state=seed)
    assigned = kmeans.fit_predict(np.asarray(features))
    members = [np.flatnonzero(assigned == c) for c in range(n)]
    return sorted(members, key=lambda m: int(m[0]))


def iid_split(num_samples: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A random permutation of the samples cut into N parts of equal size (``numpy.array_split``), each sorted."""
    n = _check_clients(num_clients, num_samples)
    return [np.sort(part) for part in np.array_split(rng.permutation(num_samples), n)]


def split_clients(
    data: ClassificationData, num_clients: int, split: str, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Each client's sample indices under ``split`` (:data:`SPLITS`; ``alpha`` is used by ``"dirichlet"`` only)."""
    check_choice("split", split, SPLITS)
    if split == "dirichlet":
        return dirichlet_split(data.labels, num_clients, alpha, rng)[0]
    if split == "clusters":
        return cluster_split(data.features, num_clients, rng)
    return iid_split(data.num_samples, num_clients, rng)


def least_squares_policy(data: ClassificationData, lam: float = 1.0) -> np.ndarray:
    """The (q, K) per-class ridge least-squares fit on the whole data; its policy picks ``argmax(x @ W)``.

    Column k solves ``(X^T X + lam I) w_k = X^T 1{y = k}`` with X the (n, q) features, which is the block-encoded
    ridge regression of the 0/1 rewards had every arm been observed on every sample.
    """
    lam = check_real("lam", lam, 0.0)
    x = data.features
    targets = (data.labels[:, None] == np.arange(data.num_classes)).astype(np.float64)
    return np.linalg.solve(x.T @ x + lam * np.eye(x.shape[1]), x.T @ targets)
