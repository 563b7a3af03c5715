"""Differential privacy: mechanisms, the privacy accountant, and wrappers that noise outgoing messages."""

from fedbandit_envs.privacy.accountant import (
    DeclaredEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyAccountant,
    PrivacyBudgetExceeded,
    TreeEvent,
)
from fedbandit_envs.privacy.mechanisms import (
    BinaryTreeMechanism,
    GaussianMechanism,
    IntervalRelease,
    LaplaceMechanism,
    gaussian_delta,
    gaussian_noise,
    gaussian_sigma_analytic,
    gaussian_sigma_classical,
    laplace_noise,
    laplace_scale,
)
from fedbandit_envs.privacy.secure import SecureTreeSums, secure_release
from wrappers.dp.privatizer import MessagePrivatizer, NoiseSpec
from wrappers.dp.tree import TreePrivatizer
from wrappers.dp.wrappers import GaussianMessageDP, LaplaceMessageDP, MessageDP, TreeMessageDP

__all__ = [
    "BinaryTreeMechanism",
    "DeclaredEvent",
    "GaussianEvent",
    "GaussianMechanism",
    "GaussianMessageDP",
    "IntervalRelease",
    "LaplaceEvent",
    "LaplaceMechanism",
    "LaplaceMessageDP",
    "MessageDP",
    "MessagePrivatizer",
    "NoiseSpec",
    "PrivacyAccountant",
    "PrivacyBudgetExceeded",
    "SecureTreeSums",
    "TreeEvent",
    "TreeMessageDP",
    "TreePrivatizer",
    "gaussian_delta",
    "gaussian_noise",
    "gaussian_sigma_analytic",
    "gaussian_sigma_classical",
    "laplace_noise",
    "laplace_scale",
    "secure_release",
]
