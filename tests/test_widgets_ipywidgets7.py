"""attn_lib.book.widgets on ipywidgets 7 (Google Colab's 7.7.1), which has no ``ipywidgets.Stack``.

Here ``Stack`` is hidden for the duration of a test, so the slider takes its ipywidgets 7 path (:class:`Stack7` and a
kernel-side link). tools/colab_env.py renders a slider under a real ipywidgets 7.7.1 (``make test-colab``).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import pytest

from attn_lib import provenance as prov
from attn_lib.book import widgets as aw


def _render(value):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, float(value)])
    return prov.label_figure(fig, model="none", text="synthetic", device="cpu")


@pytest.fixture
def no_stack(monkeypatch):
    monkeypatch.delattr(widgets, "Stack")
    yield
    plt.close("all")


def _shown(w) -> list[int]:
    return [i for i, im in enumerate(w.images) if im.layout.display != "none"]


def test_without_stack_the_slider_uses_stack7_and_a_kernel_link(no_stack):
    w = aw.precomputed_slider([0.5, 1.0, 2.0], _render, description="T", value=1.0, dpi=30)
    assert isinstance(w.stack, aw.Stack7) and w.children == (w.slider, w.stack)
    assert w.stack.selected_index == 1 and _shown(w) == [1]
    assert type(w.link).__name__ == "link"  # traitlets' link (ipywidgets.link), not the browser-side jslink
    w.slider.index = 2  # a move from the front end: the kernel link moves the stack, which shows only that image
    assert w.stack.selected_index == 2 and _shown(w) == [2]
    w.select(0.5)
    assert w.stack.selected_index == 0 and _shown(w) == [0]


def test_stack7_live_slider_shows_the_figure_computed_for_the_new_position(no_stack):
    calls = []

    def live(value):
        calls.append(value)
        return _render(value * 10)

    w = aw.precomputed_slider([1, 2, 3], _render, description="x", live=live, dpi=30)
    before = bytes(w.images[2].value)
    w.slider.index = 2
    assert calls == [3] and _shown(w) == [2] and bytes(w.images[2].value) != before
    assert "computed live" in w.status.value


def test_stack7_embeds_as_plain_boxes(no_stack):
    """ipywidgets 7's front end knows Box and Image models, so Stack7's state is a Box of Images."""
    w = aw.precomputed_slider([1, 2], _render, description="x", dpi=30)
    state = widgets.Widget.get_manager_state(drop_defaults=True, widgets=None)["state"]
    models = {mid: s["model_name"] for mid, s in state.items()}
    assert models[w.stack.model_id] == "BoxModel"
    assert all(models[im.model_id] == "ImageModel" for im in w.images)


def test_with_stack_the_browser_link_is_kept():
    w = aw.precomputed_slider([1, 2], _render, description="x", dpi=30)
    assert isinstance(w.stack, widgets.Stack) and type(w.link).__name__ == "Link"
    plt.close("all")
