"""attn_lib.book.chapter: the settings cell and model loading shared by every chapter."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from attn_lib import experiments
from attn_lib.book import chapter


class TestSettings:
    def test_defaults(self, monkeypatch):
        monkeypatch.delenv("ATTN_LIB_MODEL", raising=False)
        monkeypatch.delenv("ATTN_LIB_PROFILE", raising=False)
        cfg = chapter.settings()
        assert (cfg.model, cfg.profile, cfg.text, cfg.seed, cfg.device) == ("gpt2", "paper", "war-and-peace", 0, "cpu")
        assert cfg.grid is experiments.PROFILES["paper"]

    def test_environment_overrides(self, monkeypatch):
        monkeypatch.setenv("ATTN_LIB_MODEL", "gpt2-medium")
        monkeypatch.setenv("ATTN_LIB_PROFILE", "paper")
        cfg = chapter.settings(seed=3)
        assert (cfg.model, cfg.profile, cfg.seed) == ("gpt2-medium", "paper", 3)
        assert cfg.grid is experiments.PROFILES["paper"]

    def test_empty_variables_mean_the_default(self, monkeypatch):
        monkeypatch.setenv("ATTN_LIB_MODEL", "")
        monkeypatch.setenv("ATTN_LIB_PROFILE", "")
        cfg = chapter.settings(default_profile="paper")
        assert (cfg.model, cfg.profile) == ("gpt2", "paper")

    def test_unknown_profile_names_the_variable(self, monkeypatch):
        monkeypatch.setenv("ATTN_LIB_PROFILE", "huge")
        with pytest.raises(ValueError, match="ATTN_LIB_PROFILE"):
            chapter.settings()

    @pytest.mark.parametrize("seed", [-1, 1.5, "0", True])
    def test_bad_seed(self, seed):
        with pytest.raises(ValueError, match="seed"):
            chapter.settings(seed=seed)

    def test_describe_names_profile_and_lengths(self, monkeypatch):
        monkeypatch.delenv("ATTN_LIB_PROFILE", raising=False)
        text = chapter.settings().describe()
        assert "'paper'" in text and str(list(experiments.PROFILES["paper"].lengths)) in text


class TestLoadInputs:
    def test_rejects_something_else_than_settings(self):
        with pytest.raises(ValueError, match="cfg"):
            chapter.load_inputs({"model": "gpt2"})


class TestShowFigure:
    def test_displays_a_png_and_closes_the_figure(self, monkeypatch):
        shown = []
        monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        chapter.show_figure(fig)
        assert len(shown) == 1 and shown[0].data[:8] == b"\x89PNG\r\n\x1a\n"
        assert not plt.fignum_exists(fig.number)
