"""The hypothesis settings every property test of the suite uses: the same examples on every run and machine."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def reproducible(max_examples: int) -> settings:
    """Settings that draw the same ``max_examples`` examples on every run (derandomized, no example database).

    No deadline (a slow machine must not fail a correct property), and the health checks that only say a
    strategy is slow or draws much data are off: the workloads are large on purpose.
    """
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
