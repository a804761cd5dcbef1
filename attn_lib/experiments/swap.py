"""The live swap (chapter 7, "Beyond softmax"): a normaliser replaces softmax in every head of every layer at
inference, with no retraining (:func:`live_swap`; one setting at a time, for the sliders:
:mod:`attn_lib.book.swap_view`). One forward pass per setting on **held-out** text (tokens from
:data:`HELD_OUT_START` on, which no other experiment reads) gives the next-token loss and perplexity at every ``L`` of
a grid (nested prefixes of one window), and the attention row of one chosen head with its ``d~``."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import torch

from .. import capture
from .. import normalizers as nz
from .._validation import check_int
from .inputs import require_causal, table_meta, text_window
from .normalizers import normalizer_settings
from .passes import cached, check_cache
from .profiles import BeyondProfile, get_beyond_profile
from .weights import row_metrics

__all__ = ["SwapResult", "live_swap"]

#: First token of the held-out text of :func:`live_swap` (the other experiments read the first windows of the text).
HELD_OUT_START = 32768


@dataclasses.dataclass
class SwapResult:
    """What :func:`live_swap` measured. ``losses``: one row per (setting, ``L``): ``model, text, device, setting,
    normalizer, k, T, L, loss, perplexity, n_predictions`` (mean next-token cross-entropy in nats over the first
    ``L - 1`` predictions of the window). ``rows``: one row per setting: ``setting, normalizer, k, T, layer, head, row,
    attention`` (the row's weights, a float64 array of length ``row + 1``), ``d_tilde`` (of that row at ``N``), ``N``,
    ``loss`` (at the full window)."""

    losses: pd.DataFrame
    rows: pd.DataFrame


def swap_settings(prof: BeyondProfile) -> list[dict]:
    out = [dict(setting="softmax (model)", normalizer=None, params={}, k=None, T=1.0)]
    settings = [(lab, n, p) for lab, (n, p) in normalizer_settings(prof.k_values).items() if lab != "softmax"]
    settings += [(f"top-{k}", "topk", {"k": k}) for k in prof.k_grid if k not in prof.k_values]
    out += [dict(setting=lab, normalizer=n, params=p, k=p.get("k"), T=1.0) for lab, n, p in settings]
    out += [dict(setting=f"softmax T={T:g}", normalizer="softmax", params={}, k=None, T=float(T)) for T in prof.t_grid]
    return out


def swap_args(handle, profile, layer, head, start, N) -> tuple:
    """Validated ``(profile, window length, layer, head, start, N)`` of :func:`live_swap` and :func:`swap_setting`."""
    prof = get_beyond_profile(profile)
    require_causal(handle, "live_swap")
    Lw = check_int("swap_length", prof.swap_length, low=2, high=int(handle.max_length))
    layer = handle.n_layers // 2 if layer is None else check_int("layer", layer, low=0, high=handle.n_layers - 1)
    head = check_int("head", head, low=0, high=handle.n_heads - 1)
    start = check_int("start", start, low=0)
    N = check_int("N", N, low=1, high=Lw - 2)
    return prof, Lw, layer, head, start, N


def swap_pass(handle, ids, s: dict, meta: dict, *, layer: int, head: int, N: int, swap_lengths) -> tuple:
    """One forward pass of :func:`live_swap` with the setting ``s``: (loss rows per ``L``, the recorded row)."""
    Lw = ids.shape[-1]
    kept = {}

    def cb(la):
        kept["w"] = la.weights[0, head, Lw - 1].to(torch.float64).cpu()
        kept["v"] = la.values[0, head].to(torch.float64).cpu()

    norm = None if s["normalizer"] is None else nz.get(s["normalizer"], **s["params"])
    out = capture.capture_attention(handle, ids, cb, normalizer=norm, temperature=s["T"], layers=layer, keep_qk=False)
    logp = torch.log_softmax(out.logits[0, :-1].to(torch.float64), dim=-1)
    nll = -logp.gather(-1, ids[0, 1:].to(logp.device).view(-1, 1)).view(-1).cpu()
    base = dict(meta, setting=s["setting"], normalizer=s["normalizer"] or "softmax", k=s["k"], T=s["T"])
    losses = []
    for L in swap_lengths:
        if L > Lw:
            continue
        loss = float(nll[: L - 1].mean())
        losses.append(dict(base, L=int(L), loss=loss, perplexity=math.exp(loss), n_predictions=L - 1))
    w = kept["w"]
    m = row_metrics(w.view(1, 1, -1), kept["v"].unsqueeze(0), torch.ones(1, 1, Lw, dtype=torch.bool), [N])
    rec = dict(base, layer=layer, head=head, row=Lw - 1, attention=w.numpy(), N=N)
    rec.update(d_tilde=float(m["d_tilde"][0, 0, 0]), loss=float(nll.mean()))
    return losses, rec


def _same_pass(s: dict, window: int) -> tuple:
    """What a setting's forward pass computes: top-k with ``k`` at least the window is softmax to the last bit, so it
    shares the pass of softmax at its temperature (tested by
    ``tests/test_topk.py::test_topk_with_k_at_least_the_row_is_softmax_bit_for_bit_on_long_causal_rows``)."""
    if s["normalizer"] == "topk" and s["params"]["k"] >= window:
        return ("softmax", (), s["T"])
    return (s["normalizer"], tuple(sorted(s["params"].items())), s["T"])


def _relabel(rows, s: dict):
    """``rows`` (a pass's loss rows or its recorded row) under the labels of setting ``s``."""
    labels = dict(setting=s["setting"], normalizer=s["normalizer"] or "softmax", k=s["k"], T=s["T"])
    if isinstance(rows, dict):
        return dict(rows, **labels, attention=rows["attention"].copy())  # its own array, not the other row's
    return [dict(r, **labels) for r in rows]


def live_swap(
    handle,
    text,
    *,
    profile="quick",
    layer: int | None = None,
    head: int = 0,
    start: int = HELD_OUT_START,
    N: int = 5,
    cache=None,
) -> SwapResult:
    """Every normaliser, top-k over a ``k`` grid and softmax over a ``T`` grid, swapped into every head at inference:
    one forward pass per setting over ``profile.swap_length`` tokens of ``text`` from token ``start``; no weight of the
    model changes. ``"softmax (model)"`` is the model's own attention; a top-k with ``k`` at least the window reuses the
    pass of softmax at ``T = 1`` (bit for bit the same) when the ``T`` grid has it. ``profile``: ``"paper"``,
    ``"quick"`` or a :class:`BeyondProfile`; the row recorded is the last row of ``head`` in ``layer`` (default: the
    middle layer), with its ``d~`` at ``N``; ``cache``: a :class:`attn_lib.cache.ResultCache`. Returns a
    :class:`SwapResult`."""

    prof, Lw, layer, head, start, N = swap_args(handle, profile, layer, head, start, N)
    cache = check_cache(cache)
    settings = swap_settings(prof)

    def compute():
        meta = table_meta(handle, text)
        ids = text_window(handle, text, Lw, start)
        losses, recs, done = [], [], {}
        for s in settings:
            same = _same_pass(s, Lw)
            if same in done:  # the weights of a pass already made, in every head of every layer: relabel its rows
                lo, rec = (_relabel(r, s) for r in done[same])
            else:
                lo, rec = swap_pass(handle, ids, s, meta, layer=layer, head=head, N=N, swap_lengths=prof.swap_lengths)
                done[same] = (lo, rec)
            losses.extend(lo)
            recs.append(rec)
        return SwapResult(pd.DataFrame(losses), pd.DataFrame(recs))

    key = dict(start=start, layer=layer, head=head, N=N, profile=prof.as_dict(), settings=[dict(s) for s in settings])
    return cached(cache, compute, "live_swap", handle, text, **key)
