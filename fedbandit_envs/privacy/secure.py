"""Floating-point-safe noise for the DP wrappers' ``secure=True`` mode, drawn with OpenDP (the ``secure`` extra).

Textbook Laplace and Gaussian sampling on floats (``numpy``'s ``laplace`` and ``normal``, the default mode) leaks the
noised value through the low-order bits of its output (Mironov, CCS 2012). The secure mode releases every value through
OpenDP's measurements instead: ``make_laplace`` and ``make_gaussian`` sample discrete Laplace or discrete Gaussian noise
exactly on a grid of spacing ``2**k`` (OpenDP's default ``k``) from the operating system's cryptographically secure
generator, add it to the value in exact arithmetic and round the exact result to a float once (Canonne, Kamath and
Steinke 2020). The output is a post-processing of an exact discrete mechanism, so no floating-point artefact reveals
the input, and OpenDP's privacy map covers the construction.

Calibration is unchanged: the secure mode uses the scale (Laplace ``b``) or standard deviation (Gaussian ``sigma``)
the default mode computes, and the privatizer charges the same accountant events. Laplace: OpenDP's own privacy map
gives ``sensitivity / b``, the charged epsilon. Gaussian: the discrete Gaussian of the same ``sigma`` satisfies the same
``rho = sensitivity**2 / (2 sigma**2)`` zero-concentrated DP as the continuous one (OpenDP's map), and its
``(epsilon, delta)`` curve is that of the continuous Gaussian up to terms of the order of the grid spacing relative to
``sigma`` (Canonne, Kamath and Steinke 2020, Section 3); the privacy audit (tests/test_privacy_audit.py) checks it.

**Not reproducible.** OpenDP cannot be seeded, so secure runs differ from run to run (regret included) and from the
default mode's; compare them by distribution, not trajectory. Each call crosses into OpenDP's native library, which
costs tens of microseconds per value (``benchmarks/dp_overhead.py`` measures it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from fedbandit_envs.privacy.mechanisms import _TreeParameters

INSTALL = 'pip install "fedbandit-envs[secure]"  (or: pip install opendp)'


def require_opendp() -> Any:
    """Import ``opendp.prelude`` with its ``contrib`` features on, or raise an ImportError naming the install."""
    try:
        import opendp.prelude as dp
    except ImportError as error:
        raise ImportError(
            f"secure=True draws its noise with OpenDP, which is not installed; install it with {INSTALL}"
        ) from error
    dp.enable_features("contrib")
    return dp


@lru_cache(maxsize=4096)
def measurement(mechanism: str, scale: float) -> Any:
    """OpenDP's measurement adding ``mechanism`` noise of ``scale`` to a vector of floats (cached per scale).

    ``"laplace"``: ``make_laplace`` (L1 input metric, pure DP); ``"gaussian"``: ``make_gaussian`` (L2 input metric,
    zero-concentrated DP), ``scale`` being the standard deviation.
    """
    dp = require_opendp()
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    if mechanism == "laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale)
    if mechanism == "gaussian":
        return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale)
    raise ValueError(f"mechanism must be 'laplace' or 'gaussian', got {mechanism!r}")


def secure_release(mechanism: str, values: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """``values`` released through OpenDP with per-entry noise ``scale`` (one library call per distinct scale)."""
    values = np.asarray(values, np.float64)
    scales = np.broadcast_to(np.asarray(scale, np.float64), values.shape).reshape(-1)
    flat = values.reshape(-1)
    out = np.empty(len(flat))
    for value in np.unique(scales):
        entries = scales == value
        out[entries] = measurement(mechanism, float(value))(flat[entries].tolist())
    return out.reshape(values.shape)


class SecureTreeSums:
    """Binary-tree continual release of ``entries`` running sums, every tree node released through OpenDP.

    The tree mechanism of Chan, Shi and Song (2011) in its textbook form: when the dyadic block of a node is complete
    (at counts that are multiples of ``2**level``), its sum is released once through :func:`secure_release` (Laplace,
    scale ``parameters.scale``); the release at count ``n`` is the sum of the released nodes of ``n``'s dyadic
    decomposition (one per set bit), a post-processing of secure releases. Every node is noised
    (``noise_on_empty=True``); a record lies in one node per level, so the stream is
    ``parameters.epsilon_guaranteed``-DP as in :class:`~fedbandit_envs.privacy.mechanisms.BinaryTreeMechanism`.

    Args:
        entries: number of independent sums (one tree each).
        parameters: the validated epsilon, stream length, sensitivity and split.
    """

    def __init__(self, entries: int, parameters: _TreeParameters) -> None:
        self.parameters = parameters
        self.count = 0
        self._open = np.zeros((parameters.levels, entries))
        self._released = np.zeros((parameters.levels, entries))

    def add(self, records: np.ndarray) -> np.ndarray:
        """Append one record per entry; returns the private running sums ``(entries,)``."""
        if self.count >= self.parameters.stream_length:
            raise ValueError(f"stream_length={self.parameters.stream_length} exceeded")
        self.count += 1
        self._open += np.asarray(records, np.float64)
        for level in range(self.parameters.levels):
            if self.count % (1 << level):
                break  # blocks close bottom-up: none at this level, none above
            self._released[level] = secure_release("laplace", self._open[level], self.parameters.scale)
            self._open[level] = 0.0
        prefix = [level for level in range(self.parameters.levels) if self.count >> level & 1]
        return self._released[prefix].sum(axis=0)
