"""Figure provenance: the footer ``model · text · device`` that says what produced every figure (:func:`label_figure`;
the tests read it back by :data:`PROVENANCE_GID`), and the PNG each figure is shown as (:func:`figure_to_png`)."""

from __future__ import annotations

import io
from typing import Any

from matplotlib.figure import Figure

from ._validation import check_int, check_positive
from .layout import FIGURE_DPI, PNG_KEY_DPI, PNG_KEY_MIN_FONT, PNG_KEY_WIDTH, smallest_font_pt, wrap_text

__all__ = ["label_figure", "figure_to_png"]

#: gid given to the footer text that :func:`label_figure` adds (lets tests and other helpers find it).
PROVENANCE_GID = "attn_lib-provenance"
#: Most pixels :func:`figure_to_png` renders (5 * 10^7, 200 MB of RGBA): a larger ``dpi`` is a ValueError.
MAX_PIXELS = 5 * 10**7


def _check_label(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string saying what produced the figure (got {value!r})")
    return value.strip()


def _check_figure(fig: Any, name: str, size: Any) -> float:
    """``size`` (the footer's font size or the resolution) checked as a number > 0, after ``fig`` as a Figure."""
    if not isinstance(fig, Figure):
        raise ValueError(f"fig must be a matplotlib Figure (got {type(fig).__name__})")
    return check_positive(name, size)


def provenance(*, model: str, text: str, device: str, seed: int | None = None) -> str:
    """The label ``"model: … · text: … · device: …"`` (``model`` ``"none"`` for maths-only figures; ``text`` the input
    text or the synthetic generator; ``seed`` when the data are random)."""
    parts = [f"{k}: {_check_label(k, v)}" for k, v in (("model", model), ("text", text), ("device", device))]
    if seed is not None:
        parts.append(f"seed: {check_int('seed', seed)}")
    return " \u00b7 ".join(parts)


def label_figure(
    fig: Figure, *, model: str, text: str, device: str, seed: int | None = None, fontsize: float = 7.0
) -> Figure:
    """Add (or replace) the :func:`provenance` footer just below ``fig``'s bottom edge (``bbox_inches="tight"`` keeps
    it in the saved image); returns ``fig``."""
    fontsize = _check_figure(fig, "fontsize", fontsize)
    # broken into lines that fit the figure, so the footer never widens the saved image
    label = wrap_text(provenance(model=model, text=text, device=device, seed=seed), 0.97 * fig.get_figwidth(), fontsize)
    for old in [t for t in fig.texts if t.get_gid() == PROVENANCE_GID]:
        old.remove()
    # below everything already drawn (tick labels can reach below the figure's edge)
    try:
        renderer = fig.canvas.get_renderer()
    except AttributeError:  # canvases without their own renderer
        renderer = fig._get_renderer()
    bottom = fig.get_tightbbox(renderer).y0 / fig.get_figheight()
    fig.text(
        0.99, min(bottom, 0.0) - 0.01, label, ha="right", va="top", fontsize=fontsize, color="0.35", gid=PROVENANCE_GID
    )
    return fig


def figure_to_png(fig: Figure, *, dpi: float = FIGURE_DPI) -> bytes:
    """``fig`` as PNG bytes (tight bounding box: the footer is kept), with the resolution, width in inches and smallest
    font size in points as text chunks (keys in :mod:`attn_lib.layout`); ``ValueError`` above :data:`MAX_PIXELS`."""
    dpi = _check_figure(fig, "dpi", dpi)
    w, h = fig.get_size_inches()
    if dpi > (top := (MAX_PIXELS / (w * h)) ** 0.5):  # the tight box may add a footer: a margin, not an exact count
        raise ValueError(
            f"dpi={dpi:g} renders this {w:g} x {h:g} in figure as over {MAX_PIXELS:,} pixels; dpi must be <= {top:.0f}"
        )
    metadata = {PNG_KEY_DPI: f"{float(dpi):g}", PNG_KEY_WIDTH: f"{fig.get_figwidth():.3f}"}
    if (smallest := smallest_font_pt(fig)) is not None:
        metadata[PNG_KEY_MIN_FONT] = f"{smallest:g}"
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight", metadata=metadata)
    return buf.getvalue()
