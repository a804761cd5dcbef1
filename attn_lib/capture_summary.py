"""A per-layer summary of attention over consecutive windows of a text, through the result cache: the work behind
``attn-lib capture`` (:func:`load_inputs`, :func:`prepare_capture`, :meth:`CaptureJob.run`)."""

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
    """One layer's summary over heads and query rows 2..L: ``layer``; ``max_weight``, the largest weight;
    ``mean_row_max``, the mean of the rows' largest weights; ``entropy``, the mean row entropy in nats (0 log 0 = 0);
    ``first_token_mass``, the mean weight on the first token."""
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
    """``(handle, text, seconds the model took to load)``; the text first: a bad one fails before the model loads."""
    loaded = corpus.load_text(text)
    t0 = time.perf_counter()
    return models.load_model(model, **options), loaded, time.perf_counter() - t0


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
        """``rows`` (per reported layer, in layer order: :func:`layer_summary`, ``max_weight`` the largest over the
        windows, the others their means), ``seconds`` (the capture's wall time when it was computed, also on a cache hit) and ``cache`` (the ResultCache's
        ``last_status``); a progress bar on a terminal's stderr when ``progress``."""
        results = cache.ResultCache(enabled=use_cache)
        key = cache.make_key("cli-capture", handle=self.handle, text=self.text, **self.params)
        return {**results.get_or_compute(key, lambda: self._compute(progress)), "cache": results.last_status}

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
    """``windows`` consecutive windows of ``length`` tokens from token ``start`` of ``text`` (which must hold them;
    ``length`` at most ``handle.max_length``) for one capture run. ``normalizer``, ``temperature`` and ``layers`` are
    :func:`~attn_lib.capture.capture_attention`'s; ``normalizer_name`` keys the cache and the JSON document (default:
    ``normalizer`` when it is a string)."""
    if normalizer_name is None and isinstance(normalizer, str):
        normalizer_name = normalizer
    ids = corpus.token_windows(handle.tokenizer, text, length, n_windows=windows, start=start)
    params = dict(
        length=length,
        windows=windows,
        start=start,
        normalizer=normalizer_name,
        temperature=temperature,
        layers=layers,
        metric=METRIC,
    )
    return CaptureJob(handle=handle, text=text, ids=ids, params=params, normalizer=normalizer)
