"""Render modes of every environment of the suite, and the per-arm bar chart of the Gymnasium views.

The rule, as in Gymnasium (``gymnasium.make`` warns on a mode the environment does not declare and builds it
anyway): an environment accepts ``render_mode=None``, one of its declared ``metadata["render_modes"]``, or any
other name with a warning (see :func:`fedbandit_envs.validation.check_render_mode`). ``render()`` returns a
frame in a declared mode and None otherwise; without a render mode it warns, as Gymnasium's and PettingZoo's
own environments do.

The single-agent views (:class:`RenderedView`) declare ``"ansi"`` (a one-line text summary) and
``"rgb_array"`` (a ``uint8`` image of one bar per arm, drawn with numpy by :func:`bar_chart`), so
stable-baselines3's ``make_vec_env`` (which asks for ``"rgb_array"``) and video recorders work on them.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

__all__ = [
    "BACKGROUND",
    "BAR",
    "CHART_HEIGHT",
    "HIGHLIGHT",
    "MARGIN",
    "VIEW_RENDER_MODES",
    "RenderedView",
    "bar_chart",
    "warn_no_render_mode",
]

#: Render modes of the single-agent views.
VIEW_RENDER_MODES = ("ansi", "rgb_array")

#: Colours of :func:`bar_chart` (RGB).
BACKGROUND = (255, 255, 255)
BAR = (70, 130, 180)
HIGHLIGHT = (255, 140, 0)

#: Height in pixels of a full bar (value 1) and the blank margin around the bars.
CHART_HEIGHT = 64
MARGIN = 4


def bar_chart(values: np.ndarray, highlight: int | None = None) -> np.ndarray:
    """A ``uint8`` RGB image of shape (H, W, 3) with one vertical bar per entry of ``values``.

    Bar k rises ``round(values[k] * 64)`` pixels from the bottom margin (``values`` are clipped to [0, 1]);
    bar ``highlight`` (if not None) is drawn in :data:`HIGHLIGHT`, the others in :data:`BAR`, on a
    :data:`BACKGROUND` canvas. Bars are up to 12 pixels wide with a gap of a third of a bar between them, narrower
    when there are more than 50 of them, so the image stays about 600 pixels wide at most.

    Args:
        values: (K,) bar heights as fractions of the chart height.
        highlight: the index of the bar to highlight, or None.
    """
    heights = np.rint(np.clip(np.asarray(values, np.float64), 0.0, 1.0) * CHART_HEIGHT).astype(np.int64)
    if heights.ndim != 1 or len(heights) == 0:
        raise ValueError(f"values must be a non-empty 1-D array of bar heights, got shape {np.shape(values)}")
    if highlight is not None and not 0 <= highlight < len(heights):
        raise ValueError(f"highlight must be None or a bar index in 0..{len(heights) - 1}, got {highlight}")
    width = int(np.clip(600 // len(heights), 3, 12))
    gap = width // 3
    image = np.empty((CHART_HEIGHT + 2 * MARGIN, MARGIN * 2 - gap + len(heights) * (width + gap), 3), np.uint8)
    image[:] = BACKGROUND
    bottom = MARGIN + CHART_HEIGHT
    for k, height in enumerate(heights.tolist()):
        left = MARGIN + k * (width + gap)
        image[bottom - height : bottom, left : left + width] = HIGHLIGHT if k == highlight else BAR
    return image


def warn_no_render_mode(name: str) -> None:
    """Warn that ``render()`` was called on ``name`` built without a render mode (as Gymnasium's envs do)."""
    gymnasium.logger.warn(
        f"{name}.render() was called without a render mode, so it returns None; build the environment with "
        "render_mode set to one of its metadata['render_modes'] (e.g. render_mode='ansi')"
    )


class RenderedView(gymnasium.Env):
    """A single-agent view rendered as text (``"ansi"``) or a per-arm bar chart (``"rgb_array"``).

    A view sets ``render_mode`` (checked by :func:`~fedbandit_envs.validation.check_render_mode` against
    :data:`VIEW_RENDER_MODES`) and ``_started`` (True after its first reset), and defines :meth:`summary` and
    :meth:`bars`.
    """

    metadata: dict[str, Any] = {"render_modes": list(VIEW_RENDER_MODES), "render_fps": 4}
    _started: bool = False

    def summary(self) -> str:
        """A one-line text summary of the episode (after a reset)."""
        raise NotImplementedError(f"{type(self).__name__} does not define summary()")

    def bars(self) -> tuple[np.ndarray, int | None]:
        """Per-arm bar heights in [0, 1] and the arm to highlight (or None), for :func:`bar_chart`."""
        raise NotImplementedError(f"{type(self).__name__} does not define bars()")

    def render(self) -> str | np.ndarray | None:
        """The frame of ``render_mode``: ``"ansi"`` a text line, ``"rgb_array"`` a bar chart; None otherwise."""
        if self.render_mode is None:
            warn_no_render_mode(type(self).__name__)
        elif self.render_mode == "ansi":
            return self.summary() if self._started else "not started: call reset()"
        elif self.render_mode == "rgb_array":
            return bar_chart(*self.bars())
        return None

    def close(self) -> None:
        """Nothing to release (safe to call more than once)."""
