"""Training GPT-2-architecture causal LMs from scratch with any registered normaliser at any temperature (chapter 8).

transformers' ``GPT2LMHeadModel`` on bytes (vocabulary 256) of the shipped text ``botchan``: its first 90% of tokens
train, the last 10% validate. The normaliser replaces softmax through :func:`attn_lib.capture.patched_attention`: every
head computes ``f(l, T)`` on ``l = q.k / sqrt(d)``, so ``T`` is a factor on top of GPT-2's ``1/sqrt(d)``: the paper's
temperature on ``q.k`` is ``T_paper = T * sqrt(d)``, and ``T = 1`` is plain GPT-2.

Learned normaliser parameters (:data:`LEARNABLE`, one per head and layer): SSMax's scale ``s`` (through ``log s``, from
the registry's 0.43) and an offset ``b`` on sigmoid attention's ``-log n`` bias (from 0); ``ssmax(s l, T, s=1)`` is
SSMax with scale ``s``, ``sigmoid(l + b T, T)`` is ``sigma(l/T + b - log n)``.

Recorded per step: the training loss, the gradient norms through each layer's logits ``l`` and weights ``alpha``,
whether the gradient was non-finite (step skipped) or clipped; the validation loss every ``eval_every`` steps. On the
CPU a seed fixes the weights and batches and torch's deterministic algorithms are on: one seed, identical losses.
:func:`trained_limits` measures the paper's limits on every trained model (with its own normaliser) and a reference.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
import time

import numpy as np
import pandas as pd
import torch

from . import capture, jacobian
from . import normalizers as nz
from ._validation import SEED_MAX, check_choice, check_int, check_positive, check_seed
from .cache import make_key
from .models.handle import ModelHandle, byte_tokenizer, resolve_device

__all__ = ["TrainSize", "train", "trained_handle"]

#: Normaliser parameters this module learns (the registry declares none): name -> (parameter, initial value).
LEARNABLE = {"ssmax": ("s", 0.43), "sigmoid": ("b", 0.0)}
#: Fixed parameters a normaliser is trained with: top-k has no default k; alpha-entmax's bisection interval (at most 2
#: wide) is below float32's 1e-7 after 25 halvings (the registry's 60 cost 2.5x the time for the same weights).
DEFAULT_PARAMS = {"topk": {"k": 8}, "entmax_alpha": {"n_iter": 25}}
#: Share of the shipped text's tokens used for training (the rest, the end of the text, validates).
TRAIN_SHARE = 0.9


@dataclasses.dataclass(frozen=True)
class TrainSize:
    """A model size and training budget: ``n_positions`` is the training window; ``eval_batches`` validation batches
    are scored every ``eval_every`` steps; ``clip`` is the gradient-norm clip."""

    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    n_positions: int = 64
    batch: int = 16
    steps: int = 150
    lr: float = 3e-3
    eval_every: int = 25
    eval_batches: int = 4
    clip: float = 1.0

    def __post_init__(self) -> None:
        for f in ("n_layer", "n_head", "n_positions", "batch", "steps", "eval_every", "eval_batches"):
            check_int(f, getattr(self, f), low=1, high=1 << 20)
        check_int("n_embd", self.n_embd, low=self.n_head, high=1 << 16)
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd must be a multiple of n_head={self.n_head} (got {self.n_embd})")
        check_positive("lr", self.lr)
        check_positive("clip", self.clip)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


#: ``"book"``: the chapter's size (CPU); ``"cpu"``: the issue's feasibility size (0.84M parameters); ``"gpu"``: larger.
SIZES = {
    "book": TrainSize(),
    "cpu": TrainSize(n_layer=4, n_head=4, n_embd=128, n_positions=128, batch=16, steps=400, eval_every=50),
    "gpu": TrainSize(n_layer=6, n_head=8, n_embd=256, n_positions=256, batch=32, steps=2000, lr=1e-3, eval_every=100),
}


@dataclasses.dataclass
class TrainRun:
    """What :func:`train` measured: ``history`` (per step ``train_loss``, ``val_loss`` (NaN between evaluations),
    ``nonfinite``, ``clipped``, ``grad_norm``, ``logit_grad_<layer>``, ``weight_grad_<layer>``), ``summary`` (scalars
    and settings) and ``state`` (the trained weights as float32 arrays)."""

    history: pd.DataFrame
    summary: dict
    state: dict


@functools.cache
def _token_ids() -> np.ndarray:
    from .corpus import load_text  # lazy: the tokenizer imports transformers

    return np.asarray(byte_tokenizer().encode(str(load_text("botchan").text), add_special_tokens=False), dtype=np.int64)


def split_tokens() -> tuple[torch.Tensor, torch.Tensor]:
    """(training tokens, validation tokens): the first :data:`TRAIN_SHARE` of the shipped text and the rest."""
    ids = torch.from_numpy(_token_ids())
    cut = int(len(ids) * TRAIN_SHARE)
    return ids[:cut], ids[cut:]


def _windows(ids: torch.Tensor, starts: torch.Tensor, n: int) -> torch.Tensor:
    return torch.stack([ids[s : s + n + 1] for s in starts.tolist()])


def _check(normalizer, temperature, seed, size, params) -> tuple:
    check_choice("normalizer", normalizer, nz.available())
    T = check_positive("temperature", temperature)
    if not 1e-3 <= T <= 1e3:
        raise ValueError(f"temperature must be in [0.001, 1000] (got {temperature!r})")
    seed = check_seed("seed", seed)
    size = _size(size)
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"params must be None or a dict of the normaliser's parameters (got {params!r})")
    params = dict(DEFAULT_PARAMS.get(normalizer, {}), **(params or {}))
    if normalizer in LEARNABLE and params:
        raise ValueError(f"params must be empty for {normalizer!r}: its {LEARNABLE[normalizer][0]} is learned")
    nz.get(normalizer, **params)  # the registry checks the parameters
    return T, seed, size, params


def _size(size) -> TrainSize:
    size = SIZES[check_choice("size", size, list(SIZES))] if isinstance(size, str) else size
    if not isinstance(size, TrainSize):
        raise ValueError(f"size must be one of {list(SIZES)} or a TrainSize (got {size!r})")
    return size


def _build(size: TrainSize, normalizer: str):
    from transformers import GPT2Config, GPT2LMHeadModel  # lazy: heavy

    cfg = GPT2Config(
        vocab_size=256, n_positions=size.n_positions, n_embd=size.n_embd, n_layer=size.n_layer, n_head=size.n_head,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = GPT2LMHeadModel(cfg)
    if normalizer in LEARNABLE:
        start = math.log(LEARNABLE[normalizer][1]) if normalizer == "ssmax" else LEARNABLE[normalizer][1]
        model.attn_lib_norm = torch.nn.Parameter(torch.full((size.n_layer, size.n_head, 1, 1), float(start)))
    return model


def _normaliser(model, name: str, params: dict):
    """The normaliser for the attention interface; with learned parameters, the layers' functions in turn."""
    if name not in LEARNABLE:
        return nz.get(name, **params)
    per_layer = itertools.cycle([_layer_normaliser(model, name, params, i) for i in range(model.config.n_layer)])

    def learned(logits, temperature=1.0, dim=-1, mask=None):
        return next(per_layer)(logits, temperature, dim, mask)

    return learned


def _layer_normaliser(model, name: str, params: dict, layer: int):
    """The normaliser of ``layer``, with its learned parameter read at each call (so that training updates it)."""
    if name not in LEARNABLE:
        return nz.get(name, **params)

    def f(logits, temperature=1.0, dim=-1, mask=None):
        p = model.attn_lib_norm[layer]
        if name == "ssmax":
            # -inf (invisible) logits are zeroed first: -inf * s would make the gradient of s NaN (0 * -inf)
            return nz.ssmax(logits.masked_fill(~mask, 0.0) * torch.exp(p), temperature, dim, mask, s=1.0)
        return nz.sigmoid(logits + p * temperature, temperature, dim, mask)

    return f


def _hooks(grads: dict):
    """A capture callback that records ``||dloss/dl||`` and ``||dloss/dalpha||`` of each layer into ``grads``."""

    def cb(rec):
        if rec.logits.requires_grad:
            i = rec.layer
            rec.logits.register_hook(lambda g: grads.__setitem__(f"logit_grad_{i}", float(g.norm())))
            rec.weights.register_hook(lambda g: grads.__setitem__(f"weight_grad_{i}", float(g.norm())))

    return cb


def _loss(model, x: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=x[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


def _evaluate(model, val: torch.Tensor, starts: torch.Tensor, size: TrainSize) -> float:
    model.eval()
    with torch.no_grad():
        losses = [float(_loss(model, _windows(val, s, size.n_positions))) for s in starts.split(size.batch)]
    model.train()
    return float(np.mean(losses))


def train(normalizer="softmax", temperature=1.0, *, seed=0, size="book", params=None, device="cpu") -> TrainRun:
    """Train a GPT-2-architecture model from scratch with ``normalizer`` at ``temperature`` (module docstring); ``size``:
    a key of :data:`SIZES` or a :class:`TrainSize`; ``params``: the normaliser's fixed parameters (default
    :data:`DEFAULT_PARAMS`; none where they are learned); ``"cpu"`` is deterministic."""

    T, seed, size, params = _check(normalizer, temperature, seed, size, params)
    dev = resolve_device(device)
    was_det, threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True, warn_only=dev.type != "cpu")
    torch.set_num_threads(1)  # one thread: the same rounding on every machine, and no spinning on a busy one
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        torch.manual_seed(seed)
        model = _build(size, normalizer).to(dev).train()
        tr, va = split_tokens()
        gen = torch.Generator().manual_seed(seed)
        val_starts = torch.randint(0, len(va) - size.n_positions - 1, (size.batch * size.eval_batches,), generator=gen)
        opt = torch.optim.AdamW(model.parameters(), lr=size.lr, weight_decay=0.01)
        norm_fn = _normaliser(model, normalizer, params)
        rows = []
        with capture.patched_attention(model, _hooks(grads := {}), normalizer=norm_fn, temperature=T, keep_qk=False):
            for step in range(1, size.steps + 1):
                starts = torch.randint(0, len(tr) - size.n_positions - 1, (size.batch,), generator=gen)
                rows.append(_step(model, opt, _windows(tr, starts, size.n_positions).to(dev), size, grads, step))
                if step % size.eval_every == 0 or step == size.steps:
                    rows[-1]["val_loss"] = _evaluate(model, va.to(dev), val_starts, size)
    finally:
        torch.use_deterministic_algorithms(was_det)
        torch.set_num_threads(threads)
    times = dict(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)
    hist = pd.DataFrame(rows)
    return TrainRun(hist, _summary(hist, normalizer, T, seed, size, params, times, dev, model), _state(model))


def _step(model, opt, x: torch.Tensor, size: TrainSize, grads: dict, step: int) -> dict:
    grads.clear()
    opt.zero_grad(set_to_none=True)
    loss = _loss(model, x)
    row = dict(step=step, train_loss=float(loss.detach()), val_loss=math.nan)
    if not math.isfinite(row["train_loss"]):
        return dict(row, nonfinite=True, clipped=False, grad_norm=math.nan, **grads)
    loss.backward()
    gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), size.clip))
    finite = math.isfinite(gn)
    if finite:
        opt.step()
    return dict(row, nonfinite=not finite, clipped=finite and gn > size.clip, grad_norm=gn, **grads)


def _summary(hist, normalizer, T, seed, size, params, times, dev, model) -> dict:
    ev = hist.dropna(subset=["val_loss"])
    learned = {}
    if normalizer in LEARNABLE:
        p = model.attn_lib_norm.detach().double().cpu()
        learned = (torch.exp(p) if normalizer == "ssmax" else p).flatten().tolist()
    return dict(
        normalizer=normalizer, temperature=T, seed=seed, params=params, size=size.as_dict(), device=str(dev),
        n_parameters=int(sum(p.numel() for p in model.parameters())), head_dim=size.n_embd // size.n_head,
        first_loss=float(hist["train_loss"].iloc[0]), final_train_loss=float(hist["train_loss"].iloc[-10:].mean()),
        final_val_loss=float(ev["val_loss"].iloc[-1]) if len(ev) else math.nan,
        nonfinite_share=float(hist["nonfinite"].mean()), clipped_share=float(hist["clipped"].mean()),
        **times, learned=learned,
    )  # fmt: skip


def _settings(run: TrainRun) -> str:
    """What identifies ``run``: its summary without the times, sorted, as a string."""
    return repr(sorted((k, v) for k, v in run.summary.items() if k not in ("wall_s", "cpu_s")))


def _state(model) -> dict:
    return {k: v.detach().cpu().float().numpy().copy() for k, v in model.state_dict().items()}


def trained_handle(run: TrainRun, device="cpu"):
    """The trained model of ``run`` as a :class:`~attn_lib.models.ModelHandle` (byte tokenizer, float32, eval mode),
    with the temperature folded into the queries (``q -> q / T``): the logits the experiments read are the ``l / T``
    the normaliser saw. Its own forward pass uses softmax (the trained model for softmax runs; its ``note`` says so
    otherwise); ``capture_attention(handle, ..., normalizer=...)`` runs the trained normaliser."""

    s = run.summary
    size = TrainSize(**s["size"])
    model = _build(size, s["normalizer"])
    model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in run.state.items()})
    with torch.no_grad():
        for block in model.transformer.h:  # Conv1D: weight (n_embd, 3 n_embd), the query is the first third
            block.attn.c_attn.weight[:, : size.n_embd] /= s["temperature"]
            block.attn.c_attn.bias[: size.n_embd] /= s["temperature"]
    model.to(dev := resolve_device(device))
    digest = hashlib.sha256(_settings(run).encode()).hexdigest()[:12]
    name = f"gpt2-arch-{s['normalizer']}-T{s['temperature']:g}-seed{s['seed']}"
    shown = nz.spec(s["normalizer"]).display
    note = "" if s["normalizer"] == "softmax" else f"trained with {shown}: the handle's own forward pass uses softmax"
    return ModelHandle.from_model(
        model, byte_tokenizer(), requested=name, model_id=name, revision=digest, device=dev, dtype=torch.float32,
        is_standin=False, source=f"trained here on botchan, {s['n_parameters']} parameters", note=note,
    )  # fmt: skip


# -- the sweep of chapter 8 and ``attn-lib train-sweep`` ---------------------------------------------------------------
#: Softmax temperatures of the sweep (a factor on GPT-2's 1/sqrt(d): ``T_paper = T sqrt(d)``, module docstring).
TEMPERATURES = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: Seeds of softmax at every temperature, and of every normaliser at ``T = 1``; ``steps`` replaces the size's own.
PROFILES = {
    "quick": dict(t_seeds=(0, 1, 2, 3, 4), norm_seeds=(0,), steps=100),
    "full": dict(t_seeds=(0, 1, 2, 3, 4), norm_seeds=(0, 1, 2, 3, 4), steps=400),
}


def sweep_settings(profile: str = "quick") -> list[tuple[str, float, int]]:
    """``(normaliser, T, seed)`` of every run of ``profile``, each once (softmax at ``T = 1`` is in both grids)."""
    p = PROFILES[check_choice("profile", profile, list(PROFILES))]
    runs = [("softmax", T, s) for T in TEMPERATURES for s in p["t_seeds"]]
    runs += [(n, 1.0, s) for n in nz.available() for s in p["norm_seeds"]]
    return list(dict.fromkeys(runs))


def _one(args: tuple) -> TrainRun:
    name, T, seed, size, device = args
    return train(name, T, seed=seed, size=size, device=device)


def run_sweep(profile="quick", *, device="cpu", size=None, cache=None, workers=1, progress=False) -> dict:
    """``{(normaliser, T, seed): TrainRun}`` of :func:`sweep_settings`, each cached in ``cache``; ``size``: default
    ``"gpu"`` on a GPU, else ``"book"``, with the profile's steps; ``workers`` processes train the missing runs in
    parallel (one thread each: the results are those of one process)."""

    dev = resolve_device(device)
    size = _size(("gpu" if dev.type == "cuda" else "book") if size is None else size)
    size = dataclasses.replace(size, steps=PROFILES[check_choice("profile", profile, list(PROFILES))]["steps"])
    size = dataclasses.replace(size, eval_every=max(1, size.steps // 4))
    workers = check_int("workers", workers, low=1, high=64)
    settings = sweep_settings(profile)
    keys = {s: make_key("train", name=s[0], T=s[1], seed=s[2], size=size.as_dict(), device=dev.type) for s in settings}
    out = {s: cache.get(keys[s]) for s in settings} if cache is not None else dict.fromkeys(settings)
    todo = [s for s in settings if out[s] is None]
    from tqdm.auto import tqdm  # lazy: the sweep only

    bar = tqdm(
        total=len(settings), initial=len(settings) - len(todo), desc="training", unit="run", disable=not progress
    )
    jobs = [(*s, size, str(dev)) for s in todo]
    if workers > 1 and len(todo) > 1 and dev.type == "cpu":
        import concurrent.futures as cf  # lazy: a parallel sweep only
        import multiprocessing as mp

        with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
            for s, run in zip(todo, ex.map(_one, jobs), strict=True):
                out[s] = run
                bar.update()
    else:
        for s, job in zip(todo, jobs, strict=True):
            out[s] = _one(job)
            bar.update()
    bar.close()
    if cache is not None:
        for s in todo:
            out[s] = cache.get_or_compute(keys[s], lambda s=s: out[s])
    return out


def sweep_tables(runs: dict) -> dict:
    """``train_runs`` (per run: its summary, the medians over steps of the layers' mean logit and weight gradient
    norms, and ``gain``, the median of ``||dL/dl|| / ||dL/dalpha||``) and ``train_curves`` (per run and step)."""
    rows, curves = [], []
    for (name, T, seed), run in runs.items():
        h = run.history
        lg = h.filter(like="logit_grad_").to_numpy(dtype=float)
        wg = h.filter(like="weight_grad_").to_numpy(dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = lg / wg
        s = {k: v for k, v in run.summary.items() if k not in ("size", "params", "learned")}
        rows.append(dict(
            s, n_layer=run.summary["size"]["n_layer"], steps=len(h), logit_grad=float(np.nanmedian(lg.mean(1))),
            weight_grad=float(np.nanmedian(wg.mean(1))), gain=float(np.nanmedian(gain)),
            gain_max=float(np.nanmax(gain)), learned=str(run.summary["learned"] or ""),
        ))  # fmt: skip
        c = h[["step", "train_loss", "val_loss"]].assign(normalizer=name, temperature=T, seed=seed)
        curves.append(c.assign(logit_grad=lg.mean(1), weight_grad=wg.mean(1), gain=np.nanmax(gain, axis=1)))
    return {"train_runs": pd.DataFrame(rows), "train_curves": pd.concat(curves, ignore_index=True)}


# -- the paper's limits on the trained heads (chapter 8, "The paper's limits on the trained heads") --------------------
#: The window of the limits: the book size's training window.
LIMITS_WINDOW = 64
#: The temperatures (on the model's own logits) at which the table reports ``g(T, eps)`` of Fig. 4.
LIMITS_T = (0.01, 1.0)
#: The offline stand-in whose limits are the reference row (the name :func:`attn_lib.models.load_model` takes).
LIMITS_REFERENCE = "smollm2"


def limits_profile(window: int = LIMITS_WINDOW) -> dict:
    """The grids of :func:`limits_row` at ``L = window >= 16`` tokens, from the reproduction's profiles: Algorithm 4
    at the paper's ``N`` with ``1 < N < L`` (``N_s/N = 1`` at ``N = 1``); the critical-N diagnosis's rows at ``rho_N``,
    its grid's ``N`` nearest ``0.06 L``; ``g(T, eps)`` at the ``quick`` profile's temperatures, smallest ``eps`` and
    direction draws; the row lengths ``8, 16, ..., L`` of ``b``; chapter 7's level of the critical N's KS test."""
    from .experiments import BEYOND_PROFILES, PROFILES, SeparabilityParams  # lazy: metrics and kernels

    L = check_int("window", window, low=16, high=1 << 16)
    q, paper = PROFILES["quick"], PROFILES["paper"]
    sens, diag = q.gradient_sensitivity, q.critical_n_diagnosis
    ns = sorted({max(1, min(L - 1, round(f * L))) for f in diag.fractions})
    return dict(
        L=L, separability=SeparabilityParams(L=L, n_values=tuple(n for n in paper.separability.n_values if 1 < n < L),
                                             temperatures=()),
        rho_rows=diag.rows, rho_N=min(ns, key=lambda n: abs(n / L - 0.06)), temperatures=sens.temperatures,
        eps=min(sens.eps_values), draws=sens.direction_seeds, seed=sens.seed,
        b_lengths=tuple(1 << i for i in range(3, L.bit_length()) if 1 << i < L) + (L,),
        ks_alpha=BEYOND_PROFILES["quick"].ks_alpha,
    )  # fmt: skip


def held_out_text():
    """The validation part of the shipped text (after :data:`TRAIN_SHARE`), which no trained model saw."""
    from .corpus import Text, load_text  # lazy: reads files

    raw = str(load_text("botchan").text).encode("utf-8")
    held = raw[int(len(raw) * TRAIN_SHARE) :].decode("utf-8", errors="ignore")
    return Text.from_string(held, name="botchan (last 10%, held out)", source="attn_lib.training.held_out_text")


class _LimitsAnalysis:
    """:func:`limits_row` on each layer of one pass: the weights of the layer's own normaliser on its logits, measured
    as the reproduction does (Algorithm 4's analysis, the diagnosis's crossing metrics, Algorithm 5's directions)."""

    def __init__(self, profile: dict, meta: dict, normaliser, softmax: bool):
        from .experiments.separability import SeparabilityAnalysis  # lazy, as in limits_profile

        self.p, self.meta, self.normaliser, self.softmax = profile, meta, normaliser, softmax
        self.sep = SeparabilityAnalysis(profile["separability"], meta)
        self.rho, self.g, self.top = [], [], []

    def layer(self, sh) -> None:
        from . import metrics as M  # lazy, as in limits_profile
        from .experiments.passes import SharedLayer, layer_mask, sens_row_indices
        from .experiments.sensitivity import DRAW_STRIDE

        la, p, L = sh.la, self.p, self.p["L"]
        f = self.normaliser(la.layer)
        x = la.logits[0, :, :L, :L].to(torch.float64)
        vis = torch.broadcast_to(layer_mask(la)[..., :L, :L], x.shape) & (x != -math.inf)
        if self.softmax:  # the reproduction's softmax, bit for bit (Algorithm 4 orders even underflowing weights)
            w = torch.softmax(x.masked_fill(~vis, -math.inf), dim=-1)
        else:
            w = torch.where(vis, f(x, 1.0, dim=-1, mask=vis), 0.0)
        V = la.values[0, :, :L].to(torch.float64)
        own = SharedLayer(la)  # Algorithm 4's analysis, on this normaliser's weights
        own.get("ld", lambda: M.LayerData(w, V, mask=vis))
        self.sep.layer(own)
        rows = torch.as_tensor(sens_row_indices(L, p["rho_rows"]))
        rows = rows[rows >= 2]  # t >= 3 visible tokens, as in the diagnosis
        cr = M.crossing_metrics(w[:, rows], V, [p["rho_N"]], mask=vis[:, rows])
        rho = torch.where(cr.valid[..., 0], cr.s_norm[..., 0] / cr.z_norm.clamp(min=1e-300), math.nan)
        self.rho.append(rho.nanmedian(-1).values)
        valid = vis.sum(-1) >= 2
        for k in range(p["draws"]):  # the directions of Algorithm 5's draw k
            seed = (p["seed"] + la.layer + DRAW_STRIDE * k) % (SEED_MAX + 1)
            v = jacobian.random_directions(x.shape, vis.cpu(), seed=seed)
            if self.softmax:  # Algorithm 5's softmax change, without the cancellation of a difference of weights
                g = M.sensitivity_rows(x, p["temperatures"], [p["eps"]], mask=vis, direction=v)[0]
            else:
                g = jacobian.sensitivity_grid(x, p["temperatures"], [p["eps"]], normalizer=f, mask=vis, direction=v)
            self.g.append((k, torch.where(valid, g[:, 0], 0.0).sum(-1) / valid.sum(-1).clamp(min=1)))  # (T, H)
        t = torch.arange(1, L + 1)
        top = w.amax(-1)  # (H, L): the largest weight of each row
        self.top.append(torch.stack([top[:, (t > n // 2) & (t <= n)].mean(-1) for n in p["b_lengths"]], -1))

    def finish(self) -> dict:
        from scipy.stats import ks_2samp  # scipy.stats takes a while to import

        p, L, n = self.p, self.p["L"], sum(len(r) for r in self.rho)
        sep = self.sep.finish()
        # the smallest p-value a two-sample KS test over the n heads can give (two samples that do not overlap)
        p_min = float(ks_2samp(np.arange(n), np.arange(n) + n).pvalue)
        row = dict(model=self.meta["model"], L=L, n_heads=n, ks_p_min=p_min, ks_alpha=p["ks_alpha"])
        mx = torch.cat(self.top).double().mean(0).numpy()
        row["b"] = float(np.polyfit(np.log(p["b_lengths"]), np.log(mx), 1)[0])
        row.update({f"ns_{int(n)}": float(v) for n, v in sep.groupby("N")["fraction"].median().items()})
        row.update(rho_N=p["rho_N"], rho=float(np.nanmedian(torch.cat(self.rho).numpy())))
        curve = pd.DataFrame({k: torch.stack([g.amax(-1) for d, g in self.g if d == k]).amax(0).numpy()
                              for k in range(p["draws"])}, index=list(p["temperatures"]))  # (T, draw)  # fmt: skip
        for T in LIMITS_T:
            at = curve.loc[np.isclose(curve.index, T)].iloc[0]
            row.update(
                {f"g_T{T:g}": float(at.median()), f"g_T{T:g}_lo": float(at.min()), f"g_T{T:g}_hi": float(at.max())}
            )
        low = curve[curve.index <= 0.1 * (1 + 1e-9)].median(axis=1)
        row["g_slope"] = float(np.polyfit(np.log10(low.index), np.log10(low.clip(lower=1e-300)), 1)[0])
        return dict(row, eps=float(p["eps"]))


def limits_row(handle, text, profile, normalizer: str = "softmax", params=None) -> dict:
    """The paper's limits on every head of ``handle`` with ``normalizer`` (``params``: its fixed parameters; learned
    ones are read from a trained model), on the first ``L`` tokens of ``text`` (``profile``: :func:`limits_profile`).
    One forward pass in which every layer runs that normaliser and its logits are normalised again to measure ``alpha``:
    ``b``, the log-log slope against ``n`` of the mean ``max_j alpha_tj`` over rows ``t`` in ``(n/2, n]`` (``-1`` is
    Lemma 1's vanishing); ``ns_<N>``, the median over (layer, head) of the row-mean ``N_s/N`` (Algorithm 4); ``rho``,
    the median over (layer, head) of each head's median ``||s_N||/||z||`` at ``rho_N`` (the critical-N diagnosis);
    ``g_T<T>``, Fig. 4's ``g(T, eps)`` at the smallest ``eps`` (row mean, max over (layer, head)) at each ``T`` of
    :data:`LIMITS_T`, median over the direction draws (``_lo``, ``_hi``: their range), and ``g_slope``, its log-log
    slope over ``T <= 0.1``; ``n_heads``, the heads measured, and ``ks_p_min``, the smallest p-value a KS test over
    them can give (chapter 7's critical N is 1 by construction where it is not below ``ks_alpha``, that test's level)."""
    from .experiments import passes  # lazy, as in limits_profile
    from .experiments.inputs import table_meta
    from .metrics._engine import torch_threads

    params = params or {}
    model = handle.model
    sm = normalizer == "softmax" and not params
    a = _LimitsAnalysis(
        profile, table_meta(handle, text), lambda i: _layer_normaliser(model, normalizer, params, i), sm
    )
    live = {} if sm else {"normalizer": _normaliser(model, normalizer, params)}
    with torch_threads(1):  # as run_all(threads=1): a short window, and no spinning threads on a busy machine
        passes.run_pass(handle, text, [a], profile["L"], 0, **live)
    return a.finish()


def trained_limits(runs: dict, *, text=None, window: int = LIMITS_WINDOW, reference=LIMITS_REFERENCE, cache=None):
    """:func:`limits_row` of every run of :func:`run_sweep` with its own normaliser and temperature (folded into its
    queries by :func:`trained_handle`), then of the ``reference`` model with softmax (a name, a ModelHandle or None),
    on ``window`` tokens (``>= 16``, at most every run's training window) of ``text`` (default :func:`held_out_text`):
    a DataFrame, one row per run (``kind = "trained"``, by the registry's order, ``T`` and seed), then the reference
    (``kind = "reference"``, ``temperature`` and ``seed`` NaN); each row cached in ``cache``."""
    if not isinstance(runs, dict) or not runs or not all(isinstance(r, TrainRun) for r in runs.values()):
        raise ValueError(
            "runs must be a non-empty dict {(normaliser, T, seed): TrainRun} (attn_lib.training.run_sweep)"
        )
    window = check_int("window", window, low=16, high=1 << 16)
    if short := [k for k in runs if runs[k].summary["size"]["n_positions"] < window]:
        raise ValueError(f"window must be at most every run's training window (n_positions); {short[0]} has "
                         f"{runs[short[0]].summary['size']['n_positions']} < {window}")  # fmt: skip
    keys = list(runs)
    order = {n: i for i, n in enumerate(nz.available())}
    keys.sort(key=lambda k: (order.get(k[0], len(order)), k[1], k[2]))
    if reference is not None and not isinstance(reference, (str, ModelHandle)):
        raise ValueError(
            f"reference must be None, a model name for attn_lib.models.load_model or a ModelHandle (got {reference!r})"
        )
    text = held_out_text() if text is None else text
    profile = limits_profile(window)
    base = dict(text_sha256=getattr(text, "sha256", str(text)), profile=repr(profile))
    rows = []
    for k in keys:
        s = runs[k].summary
        key = make_key("train-limits", summary=_settings(runs[k]), **base)
        r = _cached(cache, key, lambda s=s, k=k: limits_row(trained_handle(runs[k]), text, profile,
                                                            s["normalizer"], s["params"]))  # fmt: skip
        rows.append(dict(kind="trained", normalizer=k[0], temperature=k[1], seed=k[2], **r))
    if reference is not None:
        named = reference if isinstance(reference, str) else reference.cache_key()
        key = make_key("train-limits-reference", model=repr(named), **base)
        r = _cached(cache, key, lambda: _reference_row(reference, text, profile))
        rows.append(dict(kind="reference", normalizer="softmax", temperature=math.nan, seed=math.nan, **r))
    return pd.DataFrame(rows)


def _cached(cache, key: dict, compute):
    return compute() if cache is None else cache.get_or_compute(key, compute)


def _reference_row(name, text, profile) -> dict:
    from .models import load_model  # lazy: transformers

    return limits_row(load_model(name, device="cpu", quiet=True) if isinstance(name, str) else name, text, profile)
