"""Figure layout for the book's content column (standard library only).

The built book's content column is 752 px wide in a 1280 px window (measured by ``tests/test_browser.py``), so a figure
at most :data:`FIGURE_WIDTH_IN` inches wide rendered at :data:`FIGURE_DPI` is shown at its natural size, and its
smallest text of :data:`MIN_FONT_PT` points is ``MIN_FONT_PT * FIGURE_DPI / 72`` ≈ 9.7 px: at most two panels per row.
"""

from __future__ import annotations

import textwrap

#: Declared width of every book figure, in inches (660 px at FIGURE_DPI; an output image is shown at most 672 px wide).
FIGURE_WIDTH_IN = 6.6
#: Resolution the book renders figures at (dots per inch); 1 pt of text is FIGURE_DPI / 72 px on screen.
FIGURE_DPI = 100.0
#: The smallest font size used in a book figure (legends, provenance footer), in points.
MIN_FONT_PT = 7.0
#: PNG text keys :func:`attn_lib.provenance.figure_to_png` writes, read back by the browser test.
PNG_KEY_MIN_FONT = "attn_lib:min_font_pt"
PNG_KEY_DPI = "attn_lib:dpi"
PNG_KEY_WIDTH = "attn_lib:width_in"


def wrap_text(text: str, width_in: float, fontsize: float) -> str:
    """``text`` broken into lines that fit ``width_in`` inches at ``fontsize`` points (an average glyph is taken
    as 0.55 em wide, which DejaVu Sans does not exceed on mixed text)."""
    chars = max(10, int(width_in * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.fill(part, chars) for part in text.split("\n"))


def smallest_font_pt(fig) -> float | None:
    """The smallest font size, in points, of the visible text of a Matplotlib figure (laid out here first), or ``None``."""
    from matplotlib.text import Text  # matplotlib: only when a figure is measured (the core stays light)

    fig.draw_without_rendering()
    sizes = [
        float(t.get_fontsize())
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible())
    ]
    return min(sizes) if sizes else None
