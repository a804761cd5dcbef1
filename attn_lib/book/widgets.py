"""Book helpers: sliders that work in a live kernel *and* in the static HTML book.

A slider in the static book has no kernel to call back into, so :func:`precomputed_slider` renders the figure for
every slider value up front (PNG images in an :class:`ipywidgets.Stack`) and links the slider's ``index`` to the
stack's ``selected_index`` with :func:`ipywidgets.jslink`. The link lives in the browser: when the book is built,
nbclient stores the widget state in the notebook metadata, myst-nb embeds it in the page, and the vendored
``@jupyter-widgets/html-manager`` switches images client-side. In a live kernel (Jupyter, Colab) the same
widget behaves identically, and with ``live=`` it also computes the figure of each position the reader moves to
(e.g. one forward pass of the model at that setting) and shows it in place of the pre-rendered one.

Every figure says what produced it: :func:`attn_lib.provenance.label_figure` adds a footer ``model · text · device``
(for synthetic data, name the generator and its seed as the text).

Example::

    from attn_lib.book.widgets import precomputed_slider
    from attn_lib.provenance import label_figure

    def render(T):
        fig, ax = plt.subplots()
        ...
        return label_figure(fig, model="none", text="synthetic logits (seed 0)", device="cpu")

    precomputed_slider([0.5, 1, 2], render, description="T")

Works with ipywidgets 7.7 (Google Colab's) and 8.x. ipywidgets 7 has no ``Stack``: there the images sit in a
:class:`Stack7` (a ``Box`` that shows only its selected child) and the slider drives it through a kernel-side
:func:`ipywidgets.link`, which needs the live kernel that Colab has; the static book is built with ipywidgets 8.

Only matplotlib and ipywidgets are imported here (see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import html
import numbers
import time
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as widgets
import matplotlib.pyplot as plt
import traitlets
from matplotlib.figure import Figure

from ..provenance import figure_to_png

__all__ = ["PrecomputedSlider", "Stack7", "precomputed_slider"]


class Stack7(widgets.Box):
    """ipywidgets 7's stand-in for ``ipywidgets.Stack``: a ``Box`` that shows only ``children[selected_index]``.

    The others get ``layout.display = "none"``. ``selected_index`` lives in the kernel only (ipywidgets 7's front
    end has no stack model), so a slider drives it through :func:`ipywidgets.link`, not ``jslink``.
    """

    selected_index = traitlets.Int(None, allow_none=True)

    def __init__(self, children: Sequence[widgets.Widget] = (), selected_index: int | None = None, **kwargs: Any):
        super().__init__(children=list(children), **kwargs)
        self.observe(self._show_selected, names=["selected_index", "children"])
        self.selected_index = selected_index
        self._show_selected()

    def _show_selected(self, change: dict | None = None) -> None:
        for i, child in enumerate(self.children):
            child.layout.display = None if i == self.selected_index else "none"


def _stack(children: list[widgets.Widget], selected_index: int) -> widgets.Box:
    """``ipywidgets.Stack`` where it exists (ipywidgets 8), else :class:`Stack7`."""
    if hasattr(widgets, "Stack"):
        return widgets.Stack(children=children, selected_index=selected_index)
    return Stack7(children, selected_index=selected_index)


def _png(fig: Any, call: str, *, dpi: float, close: bool = True) -> bytes:
    """The PNG of ``fig``, which ``call`` returned and which must be a Figure; closed afterwards if ``close``."""
    if not isinstance(fig, Figure):
        raise ValueError(f"{call} must return a matplotlib Figure (got {type(fig).__name__})")
    try:
        return figure_to_png(fig, dpi=dpi)
    finally:
        if close:
            plt.close(fig)


def _format_label(fmt: str | Callable[[Any], str], value: Any) -> str:
    try:
        label = fmt(value) if callable(fmt) else fmt.format(value)
    except (TypeError, ValueError, IndexError, KeyError) as exc:
        raise ValueError(f"fmt {fmt!r} cannot format the slider value {value!r}: {exc}") from None
    if not isinstance(label, str):
        raise ValueError(f"fmt must produce a string label (got {label!r} for value {value!r})")
    return label


class PrecomputedSlider(widgets.VBox):
    """A :class:`~ipywidgets.SelectionSlider` over ``values`` above a :class:`~ipywidgets.Stack` of PNG images.

    Built by :func:`precomputed_slider`. Attributes: ``slider``, ``stack``, ``images`` (one
    :class:`~ipywidgets.Image` per value), ``values``, ``labels``, ``link`` (the browser-side link from
    ``slider.index`` to ``stack.selected_index``), ``live`` (the live renderer or ``None``), ``status`` (an
    :class:`~ipywidgets.HTML` line under the slider when ``live`` is given) and ``live_seconds`` (slider index ->
    seconds the last live computation took).
    """

    def __init__(
        self,
        slider: widgets.SelectionSlider,
        stack: widgets.Box,
        values: list,
        labels: list[str],
        *,
        live: Callable[[Any], Figure] | None = None,
        dpi: float = 100.0,
        **kwargs: Any,
    ) -> None:
        self.status = widgets.HTML(value="") if live is not None else None
        children = [slider, stack] if live is None else [slider, self.status, stack]
        super().__init__(children=children, **kwargs)
        self.slider = slider
        self.stack = stack
        self.images = list(stack.children)
        self.values = values
        self.labels = labels
        self.live = live
        self.dpi = dpi
        self.live_seconds: dict[int, float] = {}
        if isinstance(stack, Stack7):  # ipywidgets 7: the link runs in the kernel (Colab has one)
            self.link = widgets.link((slider, "index"), (stack, "selected_index"))
        else:  # ipywidgets 8: the link runs in the browser, so the static book's slider works too
            self.link = widgets.jslink((slider, "index"), (stack, "selected_index"))
        if live is not None:
            # fires only in a kernel (a Python-side change); the static page has only the jslink. One computation per
            # release of the handle, not per position passed while dragging.
            slider.continuous_update = False
            slider.observe(self._compute_live, names="index")
        self.add_class("attn-lib-precomputed-slider")

    def select(self, value: Any) -> None:
        """Move the slider (and so the displayed figure) to ``value``; with ``live``, this computes it now."""
        if value not in self.values:
            raise ValueError(f"value must be one of {self.values} (got {value!r})")
        self.slider.index = self.values.index(value)
        # jslink only acts in a browser; keep the Python-side stack in step for kernels without a front end.
        self.stack.selected_index = self.slider.index

    def _compute_live(self, change: dict) -> None:
        i = change["new"]
        label = self.labels[i]
        self.status.value = f"computing {html.escape(label)} in the kernel&hellip;"
        t0 = time.perf_counter()
        try:
            png = _png(self.live(self.values[i]), f"live({self.values[i]!r})", dpi=self.dpi)
        except Exception as exc:  # a callback's exception would vanish into the widget log: show it instead
            shown = "the last figure computed live for it" if i in self.live_seconds else "the figure from the build"
            self.status.value = (
                f"live computation of {html.escape(label)} failed ({type(exc).__name__}: {html.escape(str(exc))}); "
                f"showing {shown}"
            )
            return
        # only the image changes here: the stack follows the slider through the link (setting it from Python too
        # would send an old index back to a slider the reader has moved on meanwhile)
        self.images[i].value = png
        self.live_seconds[i] = time.perf_counter() - t0
        self.status.value = f"{html.escape(label)}: computed live in the kernel ({self.live_seconds[i]:.1f} s)"


def _slider_values(values: Any) -> list:
    """The slider positions as a non-empty list (numpy arrays, ranges and generators are accepted)."""
    if isinstance(values, (str, bytes)):
        raise ValueError(f"values must be a sequence of slider values, not a string (got {values!r})")
    if not isinstance(values, Sequence):
        try:
            values = list(values)  # numpy arrays, ranges, generators
        except TypeError:
            raise ValueError(f"values must be a sequence of slider values (got {type(values).__name__})") from None
    values = list(values)
    if not values:
        raise ValueError("values must contain at least one slider value (got an empty sequence)")
    return values


def _check_slider_args(render: Any, description: Any, fmt: Any, dpi: Any, live: Any, width: Any) -> None:
    """Raise ``ValueError`` on a bad argument of :func:`precomputed_slider` (other than ``values`` and ``value``)."""
    if not callable(render):
        raise ValueError(f"render must be a callable value -> matplotlib Figure (got {render!r})")
    if not isinstance(description, str):
        raise ValueError(f"description must be a string (got {description!r})")
    if not (isinstance(fmt, str) or callable(fmt)):
        raise ValueError(f"fmt must be a format string or a callable (got {fmt!r})")
    if isinstance(dpi, bool) or not isinstance(dpi, numbers.Real) or not dpi > 0:
        raise ValueError(f"dpi must be a number > 0 (got {dpi!r})")
    if live is not None and not callable(live):
        raise ValueError(f"live must be a callable value -> matplotlib Figure, or None (got {live!r})")
    if width is not None and not isinstance(width, str):
        raise ValueError(f"width must be a CSS length string such as '600px' or None (got {width!r})")


def _slider_labels(values: list, fmt: str | Callable[[Any], str]) -> list[str]:
    """The label of each slider position (they must be distinct)."""
    labels = [_format_label(fmt, v) for v in values]
    if len(set(labels)) != len(labels):
        dupes = sorted({lab for lab in labels if labels.count(lab) > 1})
        raise ValueError(f"values must have distinct labels (duplicates: {dupes}); pass distinct values or a finer fmt")
    return labels


def _initial_index(values: list, labels: list[str], value: Any) -> int:
    """The position of ``value`` among ``values`` (the first one when ``value`` is None)."""
    if value is None:
        return 0
    matches = [i for i, v in enumerate(values) if v == value]
    if not matches:
        raise ValueError(f"value must be one of the slider values {labels} (got {value!r})")
    return matches[0]


def _render_images(
    values: list, render: Callable[[Any], Figure], *, dpi: float, width: str | None, close: bool
) -> list[widgets.Image]:
    """One PNG image widget per slider position, from ``render(value)``."""
    images = []
    for v in values:
        png = _png(render(v), f"render({v!r})", dpi=dpi, close=close)
        layout = widgets.Layout(width=width, height="auto") if width else widgets.Layout(max_width="100%")
        images.append(widgets.Image(value=png, format="png", layout=layout))
    return images


def precomputed_slider(
    values: Sequence[Any],
    render: Callable[[Any], Figure],
    *,
    description: str,
    value: Any = None,
    fmt: str | Callable[[Any], str] = "{:g}",
    dpi: float = 100.0,
    width: str | None = None,
    close: bool = True,
    live: Callable[[Any], Figure] | None = None,
) -> PrecomputedSlider:
    """Build a slider whose figure for each value is rendered now, so it works without a kernel.

    :param values: the slider positions, in display order (at least one; labels must be distinct).
    :param render: ``render(value)`` returns a matplotlib :class:`~matplotlib.figure.Figure` for that value.
    :param description: the slider's label, e.g. ``"T"``.
    :param value: the initially selected value (default: the first).
    :param fmt: a ``str.format`` pattern or a callable turning a value into its slider label.
    :param dpi: resolution of the pre-rendered PNGs.
    :param width: CSS width of the image (e.g. ``"600px"``); default: natural size, at most the page width.
    :param close: close each figure after rendering it (so the notebook does not also show it inline).
    :param live: optional ``live(value)`` returning a Figure computed now. In a kernel, each move of the slider calls
        it and replaces that position's image (a status line says so and how long it took); the static page keeps
        the images rendered here. ``None``: the slider only switches between the pre-rendered images.
    :raises ValueError: on empty or duplicate values, a non-callable ``render``, a ``render`` that does not
        return a Figure, a ``value`` not in ``values``, a non-callable ``live``, or a bad ``description``/``dpi``.
    """
    values = _slider_values(values)
    _check_slider_args(render, description, fmt, dpi, live, width)
    labels = _slider_labels(values, fmt)
    index = _initial_index(values, labels, value)
    images = _render_images(values, render, dpi=dpi, width=width, close=close)
    slider = widgets.SelectionSlider(
        options=list(zip(labels, range(len(values)))),
        index=index,
        description=description,
        continuous_update=True,
        readout=True,
        style={"description_width": "initial"},
    )
    stack = _stack(images, index)
    return PrecomputedSlider(slider, stack, values, labels, live=live, dpi=dpi)
