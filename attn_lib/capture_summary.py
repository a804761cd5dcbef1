"""A per-layer summary of attention over consecutive windows of a text: the work behind ``attn-lib capture``.

:func:`load_inputs` loads the text, then the model (a bad text fails before a model's first load, which may convert
the offline stand-in). :func:`prepare_capture` checks the windows against the text and returns a
:class:`CaptureJob`; :meth:`CaptureJob.run` runs one forward pass per window through
:func:`attn_lib.capture.capture_attention` and reduces every layer to :func:`layer_summary`'s four numbers, through
the result cache (:mod:`attn_lib.cache`). The command line only parses its flags, calls these and prints.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable

import torch
from tqdm.auto import tqdm

# modules, not names: a test (or a caller) that replaces models.load_model or corpus.load_text is seen here
from . import cache, capture, corpus, models
from .capture import LayerAttention
from .corpus import Text
from .models import ModelHandle

__all__: list[str] = []  # internal helpers of the command line (attn_lib.cli)

#: Version of the summary's definition, part of every cache key (change it when :func:`layer_summary` changes).
METRIC = "layer_summary/v1"


def layer_summary(rec: LayerAttention) -> dict:
    """Per-layer summary of one layer's :class:`~attn_lib.capture.LayerAttention` (``rec.weights``: ``(batch, heads,
    L, L)``) over heads and query rows 2..L, a dict: ``layer``; ``max_weight``: largest weight; ``mean_row_max``: mean
    over rows of the row's largest weight; ``entropy``: mean row entropy in nats (0 log 0 = 0); ``first_token_mass``:
    mean weight on the first token.
    """
    w = rec.weights.detach()
    if w.shape[-2] > 1:
        w = w[..., 1:, :]  # drop query row 1 (it sees only itself)
    return {
        "layer": int(rec.layer),
        "max_weight": float(w.max()),
        "mean_row_max": float(w.amax(-1).double().mean()),
        "entropy": float(torch.special.entr(w).sum(-1).double().mean()),  # entr(x) = -x log x, entr(0) = 0
        "first_token_mass": float(w[..., 0].double().mean()),
    }


def load_inputs(model: str, text: str, **options) -> tuple[ModelHandle, Text, float]:
    """``(handle, text, seconds the model took to load)``: :func:`attn_lib.corpus.load_text` of ``text``, then
    :func:`attn_lib.models.load_model` of ``model`` with ``options`` (``device``, ``dtype``, ``offline_fallback``,
    ``quiet``: no progress bar of transformers' on stderr); a bad ``text`` fails before the model loads."""
    loaded = corpus.load_text(text)
    t0 = time.perf_counter()
    handle = models.load_model(model, **options)
    return handle, loaded, time.perf_counter() - t0


@dataclasses.dataclass
class CaptureJob:
    """One capture run to do: the model, the text, its token windows and the settings that key the result cache."""

    handle: ModelHandle
    text: Text
    #: ``(windows, length)`` token ids, one row per forward pass.
    ids: torch.Tensor
    #: length, windows, start, normalizer (its name), temperature, layers and the summary's version.
    params: dict
    #: What :func:`~attn_lib.capture.capture_attention` receives as ``normalizer`` (a name, a callable or None).
    normalizer: str | Callable | None = None

    def run(self, *, use_cache: bool = True, progress: bool = True) -> dict:
        """The per-layer summary over every window, from the result cache when it holds it (``use_cache=False``
        recomputes and stores nothing), with a progress bar on stderr (layers x windows) when stderr is a terminal
        and ``progress`` is True.

        Returns ``rows``: one dict per reported layer, in layer order (``layer``, ``max_weight`` the largest over the
        windows; ``mean_row_max``, ``entropy``, ``first_token_mass`` the means over the windows); ``seconds``: the
        capture's wall time when it was computed; ``cache``: ``"hit"``, ``"disabled"`` or another status of
        :class:`~attn_lib.cache.ResultCache` (``last_status``).
        """
        results = cache.ResultCache(enabled=use_cache)
        key = cache.make_key("cli-capture", handle=self.handle, text=self.text, **self.params)
        result = results.get_or_compute(key, lambda: self._compute(progress))
        return {**result, "cache": results.last_status}

    def document(self, result: dict) -> dict:
        """The JSON document of a run: the model's summary, the text, the parameters, the rows and the seconds."""
        rows = {k: v for k, v in result.items() if k != "cache"}
        text = {"name": self.text.name, "sha256": self.text.sha256, "source": self.text.source}
        return {"model": self.handle.summary(), "text": text, "params": self.params, **rows}

    def _compute(self, progress: bool) -> dict:
        layers, windows = self.params["layers"], self.params["windows"]
        per_layer: dict[int, list[dict]] = {}
        bar = tqdm(
            total=(len(layers) if layers else self.handle.n_layers) * windows,
            desc="capture (layers)",
            unit="layer",
            file=sys.stderr,
            disable=None if progress else True,  # None: shown on a terminal only
        )
        t = time.perf_counter()

        def on_layer(rec: LayerAttention) -> None:
            per_layer.setdefault(rec.layer, []).append(layer_summary(rec))
            bar.update(1)

        with bar:
            for w in range(windows):
                capture.capture_attention(
                    self.handle,
                    self.ids[w : w + 1],
                    on_layer,
                    normalizer=self.normalizer,
                    temperature=self.params["temperature"],
                    layers=layers,
                )
        seconds = time.perf_counter() - t
        return {"rows": [_over_windows(layer, per_layer[layer]) for layer in sorted(per_layer)], "seconds": seconds}


def _over_windows(layer: int, recs: list[dict]) -> dict:
    """One layer's :func:`layer_summary` over the windows: the largest maximum, the mean of the other three."""
    means = {k: sum(r[k] for r in recs) / len(recs) for k in ("mean_row_max", "entropy", "first_token_mass")}
    return {"layer": layer, "max_weight": max(r["max_weight"] for r in recs), **means}


def prepare_capture(
    handle: ModelHandle,
    text: Text,
    *,
    length: int,
    windows: int = 1,
    start: int = 0,
    normalizer: str | Callable | None = None,
    normalizer_name: str | None = None,
    temperature: float = 1.0,
    layers: list[int] | None = None,
) -> CaptureJob:
    """Cut ``windows`` consecutive windows of ``length`` tokens from ``start`` of ``text`` for one capture run.

    ``length`` must not exceed ``handle.max_length`` (checked by :func:`~attn_lib.capture.capture_attention`) and
    ``text`` must hold ``start + windows * length`` tokens (checked by :func:`attn_lib.corpus.token_windows`);
    ``length`` and ``windows`` are >= 1, ``start`` >= 0. ``normalizer``, ``temperature`` and ``layers`` are
    :func:`~attn_lib.capture.capture_attention`'s (None: the model's own softmax, every layer); ``normalizer_name``
    keys the cache and the JSON document (default: ``normalizer`` when it is a string).
    """
    if normalizer_name is None and isinstance(normalizer, str):
        normalizer_name = normalizer
    ids = corpus.token_windows(handle.tokenizer, text, length, n_windows=windows, start=start)
    params = {
        "length": length,
        "windows": windows,
        "start": start,
        "normalizer": normalizer_name,
        "temperature": temperature,
        "layers": layers,
        "metric": METRIC,
    }
    return CaptureJob(handle=handle, text=text, ids=ids, params=params, normalizer=normalizer)
