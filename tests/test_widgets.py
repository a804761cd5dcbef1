"""Tests for attn_lib.book.widgets: pre-rendered sliders and figure provenance labels."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from conftest import figure_provenance

from attn_lib import provenance as prov
from attn_lib.book import widgets as aw

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _render(value):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, float(value)])
    ax.set_title(f"v={value}")
    return prov.label_figure(fig, model="none", text="synthetic", device="cpu")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ---------------------------------------------------------------- provenance / label_figure


def test_provenance_text():
    s = prov.provenance(model="gpt2", text="War and Peace", device="cpu", seed=3)
    assert s == "model: gpt2 \u00b7 text: War and Peace \u00b7 device: cpu \u00b7 seed: 3"
    assert "seed" not in prov.provenance(model="none", text="synthetic", device="cpu")


@pytest.mark.parametrize("field", ["model", "text", "device"])
@pytest.mark.parametrize("bad", ["", "   ", None, 3])
def test_provenance_rejects_missing_fields(field, bad):
    kwargs = {"model": "m", "text": "t", "device": "d", field: bad}
    with pytest.raises(ValueError, match=field):
        prov.provenance(**kwargs)


@pytest.mark.parametrize("seed", [1.5, "0", True])
def test_provenance_rejects_bad_seed(seed):
    with pytest.raises(ValueError, match="seed"):
        prov.provenance(model="m", text="t", device="d", seed=seed)


def test_label_figure_adds_one_footer_and_replaces_it():
    fig, _ = plt.subplots()
    assert figure_provenance(fig) is None
    out = prov.label_figure(fig, model="gpt2", text="t", device="cpu")
    assert out is fig
    assert figure_provenance(fig) == "model: gpt2 \u00b7 text: t \u00b7 device: cpu"
    prov.label_figure(fig, model="gpt2", text="t", device="cuda:0")
    footers = [t for t in fig.texts if t.get_gid() == prov.PROVENANCE_GID]
    assert len(footers) == 1 and footers[0].get_text().endswith("device: cuda:0")


def test_label_figure_footer_is_inside_the_saved_png():
    """With a tight bounding box the PNG grows to include the footer below the axes."""
    fig, _ = plt.subplots(figsize=(3, 2))
    bare = prov.figure_to_png(fig)
    prov.label_figure(fig, model="none", text="synthetic", device="cpu")
    labelled = prov.figure_to_png(fig)
    h_bare = int.from_bytes(bare[20:24], "big")
    h_labelled = int.from_bytes(labelled[20:24], "big")
    assert h_labelled > h_bare


def test_label_figure_rejects_bad_input():
    with pytest.raises(ValueError, match="fig"):
        prov.label_figure("not a figure", model="m", text="t", device="d")
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="fontsize"):
        prov.label_figure(fig, model="m", text="t", device="d", fontsize=0)
    with pytest.raises(TypeError):
        prov.label_figure(fig, model="m", text="t")  # device is required


# ---------------------------------------------------------------- figure_to_png


def test_figure_to_png_returns_png_bytes():
    fig, _ = plt.subplots()
    png = prov.figure_to_png(fig, dpi=50)
    assert png.startswith(PNG_MAGIC)
    with pytest.raises(ValueError, match="dpi"):
        prov.figure_to_png(fig, dpi=-1)
    with pytest.raises(ValueError, match="fig"):
        prov.figure_to_png(None)


# ---------------------------------------------------------------- precomputed_slider


def test_precomputed_slider_structure_and_link():
    values = [0.5, 1.0, 2.0, 4.0]
    w = aw.precomputed_slider(values, _render, description="T", value=2.0, dpi=40)
    assert isinstance(w, widgets.VBox) and isinstance(w, aw.PrecomputedSlider)
    assert isinstance(w.slider, widgets.SelectionSlider)
    assert isinstance(w.stack, widgets.Stack)
    assert w.children == (w.slider, w.stack)
    assert w.labels == ["0.5", "1", "2", "4"]
    assert list(w.slider.options) == [("0.5", 0), ("1", 1), ("2", 2), ("4", 3)]
    assert w.slider.index == 2 and w.stack.selected_index == 2
    assert len(w.images) == 4
    assert all(isinstance(im, widgets.Image) and bytes(im.value).startswith(PNG_MAGIC) for im in w.images)
    # one distinct image per value
    assert len({bytes(im.value) for im in w.images}) == 4
    # the browser-side link: slider.index -> stack.selected_index
    assert w.link.source == (w.slider, "index")
    assert w.link.target == (w.stack, "selected_index")
    assert type(w.link).__name__ == "Link"


def test_precomputed_slider_select_moves_both():
    w = aw.precomputed_slider([1, 2, 3], _render, description="k", fmt="{:d}", dpi=30)
    assert w.slider.index == 0
    w.select(3)
    assert w.slider.index == 2 and w.stack.selected_index == 2
    with pytest.raises(ValueError, match="value"):
        w.select(7)


def test_precomputed_slider_closes_figures():
    before = len(plt.get_fignums())
    aw.precomputed_slider([1, 2], _render, description="x", dpi=30)
    assert len(plt.get_fignums()) == before
    aw.precomputed_slider([1, 2], _render, description="x", dpi=30, close=False)
    assert len(plt.get_fignums()) == before + 2


def test_precomputed_slider_accepts_numpy_and_callable_fmt():
    w = aw.precomputed_slider(np.array([0.1, 1.0]), _render, description="T", fmt=lambda v: f"T={v:.1f}", dpi=30)
    assert w.labels == ["T=0.1", "T=1.0"]
    w = aw.precomputed_slider(range(2), _render, description="n", fmt="{}", dpi=30, width="300px")
    assert w.images[0].layout.width == "300px"


def test_precomputed_slider_embeds_as_widget_state():
    """The widget state (what the static HTML uses) holds the slider, the stack, the images and the link."""
    w = aw.precomputed_slider([1, 2], _render, description="x", dpi=30)
    state = widgets.Widget.get_manager_state(drop_defaults=True, widgets=None)["state"]
    models = {mid: s["model_name"] for mid, s in state.items()}
    assert models[w.slider.model_id] == "SelectionSliderModel"
    assert models[w.stack.model_id] == "StackModel"
    assert models[w.link.model_id] == "LinkModel"
    assert all(models[im.model_id] == "ImageModel" for im in w.images)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"values": []}, "at least one"),
        ({"values": None}, "values"),
        ({"values": "abc"}, "values"),
        ({"values": 5}, "values"),
        ({"values": ["a", "b"]}, "fmt"),
        ({"values": [1, 1.0]}, "distinct"),
        ({"values": [1.01, 1.02], "fmt": "{:.1f}"}, "distinct"),
        ({"render": "not callable"}, "render"),
        ({"render": lambda v: "not a figure"}, "render"),
        ({"value": 99}, "value"),
        ({"description": 5}, "description"),
        ({"dpi": 0}, "dpi"),
        ({"dpi": True}, "dpi"),
        ({"fmt": 3}, "fmt"),
        ({"fmt": lambda v: 3}, "fmt"),
        ({"width": 300}, "width"),
        ({"live": "not callable"}, "live"),
    ],
)
def test_precomputed_slider_rejects_bad_input(kwargs, match):
    args = {"values": [1, 2], "render": _render, "description": "x", "dpi": 30}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        aw.precomputed_slider(**args)


def test_render_failure_does_not_leak_figures():
    def bad(v):
        plt.subplots()
        raise RuntimeError("boom")

    before = len(plt.get_fignums())
    with pytest.raises(RuntimeError, match="boom"):
        aw.precomputed_slider([1], bad, description="x")
    plt.close("all")
    assert len(plt.get_fignums()) <= before


# ---------------------------------------------------------------- live recomputation in a kernel


def test_live_slider_recomputes_the_position_it_moves_to():
    calls = []

    def live(v):
        calls.append(v)
        return _render(10 * v)  # a different figure than the pre-rendered one

    w = aw.precomputed_slider([1, 2, 3], _render, description="k", fmt="{:d}", dpi=30, live=live)
    assert w.children == (w.slider, w.status, w.stack) and w.status.value == ""
    assert calls == []  # building the slider (and so the static page) computes nothing live
    before = [bytes(im.value) for im in w.images]
    assert w.slider.continuous_update is False  # one computation per release of the handle
    w.select(3)  # what a reader's move does in a kernel: a Python-side change of slider.index
    assert calls == [3] and w.stack.selected_index == 2
    after = [bytes(im.value) for im in w.images]
    assert after[2] != before[2] and after[2].startswith(PNG_MAGIC) and after[:2] == before[:2]
    assert "computed live" in w.status.value and set(w.live_seconds) == {2}
    w.slider.index = 0  # a move from the front end: the live callback does not touch the stack (the link does)
    assert calls == [3, 1] and w.stack.selected_index == 2
    assert len(plt.get_fignums()) == 0  # every live figure is closed after rendering


def test_live_slider_failure_is_shown_and_keeps_the_built_figure():
    def live(v):
        raise RuntimeError("no model here")

    w = aw.precomputed_slider([1, 2], _render, description="k", fmt="{:d}", dpi=30, live=live)
    before = bytes(w.images[1].value)
    w.select(2)
    assert "failed (RuntimeError: no model here); showing the figure from the build" in w.status.value
    assert bytes(w.images[1].value) == before and w.stack.selected_index == 1 and w.live_seconds == {}
    w2 = aw.precomputed_slider([1, 2], _render, description="k", fmt="{:d}", dpi=30, live=lambda v: "no figure")
    w2.select(2)
    assert "must return a matplotlib Figure" in w2.status.value


def test_slider_without_live_has_no_status_line():
    w = aw.precomputed_slider([1, 2], _render, description="k", fmt="{:d}", dpi=30)
    assert w.status is None and w.live is None
    w.select(2)
    assert w.live_seconds == {}


def test_live_slider_failure_after_a_success_says_which_figure_is_shown():
    state = {"fail": False}

    def live(v):
        if state["fail"]:
            raise RuntimeError("gone")
        return _render(5 * v)

    w = aw.precomputed_slider([1, 2], _render, description="k", fmt="{:d}", dpi=30, live=live)
    w.select(2)
    computed = bytes(w.images[1].value)
    w.select(1)
    state["fail"] = True
    w.select(2)
    assert "showing the last figure computed live for it" in w.status.value
    assert bytes(w.images[1].value) == computed
