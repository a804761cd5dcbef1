"""Chapter 5's normalisers swapped into the model: summary, table, findings and figure."""

from __future__ import annotations

import pandas as pd

from attn_lib._validation import check_probability
from attn_lib.layout import FIGURE_WIDTH_IN, wrap_text
from attn_lib.report._common import meta_of

__all__ = ["normaliser_swap_summary", "normaliser_swap_markdown", "normaliser_swap_findings", "figure_normaliser_swap"]

# ---- chapter 5 (multi-head coverage and remedies): the normaliser swapped inside a live model ------------------
_SWAP_COLUMNS = ("entropy", "max", "support")


def _check_swap_layers(layers: pd.DataFrame) -> None:
    missing = [c for c in ("normaliser", "layer", *_SWAP_COLUMNS) if c not in getattr(layers, "columns", ())]
    if not isinstance(layers, pd.DataFrame) or missing or not len(layers):
        raise ValueError(
            "layers must be the non-empty per-layer DataFrame of attn_lib.book.toy.normaliser_swap "
            f"(missing columns: {missing})"
        )


def normaliser_swap_summary(layers: pd.DataFrame, loss: dict[str, float]) -> pd.DataFrame:
    """Means over layers of the per-layer statistics of :func:`attn_lib.book.toy.normaliser_swap`, with the loss.

    Parameters
    ----------
    layers : DataFrame
        ``SwapResult.layers``: one row per (normaliser, layer) with ``entropy``, ``max``, ``support``.
    loss : dict
        ``SwapResult.loss``: next-token loss (nats) per normaliser.

    Returns
    -------
    DataFrame
        Index ``normaliser`` (in run order); columns ``entropy``, ``max``, ``support``, ``next-token loss``.
    """
    _check_swap_layers(layers)
    overall = layers.groupby("normaliser", sort=False)[list(_SWAP_COLUMNS)].mean()
    overall["next-token loss"] = pd.Series(loss, dtype=float)
    return overall


def normaliser_swap_markdown(layers: pd.DataFrame, loss: dict[str, float]) -> str:
    """One Markdown paragraph with the computed means (entropy, largest weight) and losses, naming model and text.

    Parameters
    ----------
    layers, loss
        As :func:`normaliser_swap_summary`.

    Returns
    -------
    str
    """
    overall = normaliser_swap_summary(layers, loss)
    meta = meta_of(layers)
    return (
        f"**Computed ({meta.get('model', '?')}; {meta.get('text', '?')}).** Mean over layers, heads and rows. "
        "Entropy: "
        + ", ".join(f"{k} {v:.2f}" for k, v in overall["entropy"].items())
        + ". Largest weight: "
        + ", ".join(f"{k} {v:.2f}" for k, v in overall["max"].items())
        + ". Next-token loss (nats): "
        + ", ".join(f"{k} {v:.2f}" for k, v in loss.items())
        + "."
    )


def normaliser_swap_findings(layers: pd.DataFrame, loss: dict[str, float], uniform_max: float) -> str:
    """The sentences of chapter 5 about the swap, computed: how concentrated the model's own weights are, how much
    smaller the swapped normalisers' supports are, and whether every swap raises the loss.

    Parameters
    ----------
    layers, loss
        As :func:`normaliser_swap_summary`; the first normaliser in run order is the model's own (the baseline),
        and ``loss`` must have an entry for every normaliser of ``layers``.
    uniform_max : float in (0, 1]
        The mean over the same rows of the largest weight of a uniform row, ``mean(1 / n)`` with ``n`` the number
        of visible tokens.

    Returns
    -------
    str
        Markdown: the ratio of the baseline's mean largest weight to ``uniform_max``, each swapped normaliser's
        mean support as a fraction of the baseline's, and whether the loss rises under every swap.
    """

    uniform_max = check_probability("uniform_max", uniform_max, open_low=True)
    overall = normaliser_swap_summary(layers, loss)
    if overall["next-token loss"].isna().any():
        raise ValueError(f"loss must name every normaliser of layers: {list(overall.index)} (got {list(loss)})")
    own, others = overall.index[0], overall.iloc[1:]
    if not len(others):
        raise ValueError("layers must hold the model's own normaliser and at least one swapped normaliser")
    top, support, base_loss = overall.loc[own, "max"], overall.loc[own, "support"], overall.loc[own, "next-token loss"]
    rises = others["next-token loss"] > base_loss
    loss_text = (
        "rises under every swapped normaliser"
        if rises.all()
        else "does not rise under " + ", ".join(str(n) for n in others.index[~rises.to_numpy()])
    )
    return (
        f"Under {own} the mean largest weight of a row is {top:.2f}, {top / uniform_max:.1f} times that of a uniform "
        f"row ({uniform_max:.3f}). Mean support as a fraction of {own}'s ({support:.3g} tokens): "
        + ", ".join(f"{n} {v / support:.1%}" for n, v in others["support"].items())
        + f". The next-token loss ({base_loss:.2f} nats under {own}) {loss_text}."
    )


def figure_normaliser_swap(layers: pd.DataFrame):
    """Per-layer mean entropy, largest weight and support, one line per normaliser.

    Parameters
    ----------
    layers : DataFrame
        ``SwapResult.layers`` (with the provenance columns ``model``, ``text``, ``device``).

    Returns
    -------
    matplotlib Figure (outside pyplot), with the provenance footer of :func:`attn_lib.provenance.label_figure`.
    """
    from matplotlib.figure import Figure  # matplotlib: imported only when a figure is drawn

    from attn_lib.provenance import label_figure  # provenance imports matplotlib: only when a figure is drawn

    _check_swap_layers(layers)
    meta = meta_of(layers)
    fig = Figure(figsize=(FIGURE_WIDTH_IN, 6.4))
    grid = fig.add_gridspec(2, 2)  # three panels; the fourth place holds the legend
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, 0])]
    for name, df in layers.groupby("normaliser", sort=False):
        for ax, col in zip(axes, _SWAP_COLUMNS):
            ax.plot(df["layer"], df[col], "o-", ms=3, label=name)
    axes[0].set_ylabel("mean entropy (nats)")
    axes[1].set_ylabel("mean largest weight")
    axes[2].set_ylabel("mean tokens with positive weight")
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("layer")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center", bbox_to_anchor=(0.76, 0.27), fontsize=9, title="normaliser")
    model_id = str(layers["model_id"].iloc[0]) if "model_id" in layers else meta.get("model", "?")
    title = f"Normaliser swapped inside {model_id}: {meta.get('text', '?')}"
    fig.suptitle(wrap_text(title, FIGURE_WIDTH_IN, 10), fontsize=10)
    fig.tight_layout()
    return label_figure(fig, model=meta.get("model", "?"), text=meta.get("text", "?"), device=meta.get("device", "?"))
