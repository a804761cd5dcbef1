"""Training GPT-2-architecture causal LMs from scratch with any registered normaliser at any temperature (chapter 8).

The model is transformers' ``GPT2LMHeadModel`` on a byte-level vocabulary of 256 (:func:`attn_lib.models.handle.
byte_tokenizer`), trained on the shipped text (``botchan``) with a fixed split: the first 90% of its tokens train, the
last 10% validate. The normaliser enters through the live swap's attention interface (:func:`attn_lib.capture.
patched_attention`): every head of every layer computes ``f(l, T)`` on ``l = q.k / sqrt(d)`` (GPT-2's own scaling), so
the temperature ``T`` here is a factor **on top of** the usual ``1/sqrt(d)``: in the paper's notation (logits ``q.k``,
softmax at temperature ``T_paper``) ``T_paper = T * sqrt(d)``, and ``T = 1`` is plain GPT-2.

Learnable parameters of the normalisers: the registry declares none, so this module declares them
(:data:`LEARNABLE`): SSMax's scale ``s`` (one per head and layer, as in the SSMax paper; kept positive through
``log s``, started at the registry's default 0.43) and an offset ``b`` added to sigmoid attention's ``-log n`` bias (one
per head and layer, started at 0). Both reach the registered function unchanged: ``ssmax(s l, T, s=1)`` is SSMax with
scale ``s``, ``sigmoid(l + b T, T)`` is ``sigma(l/T + b - log n)``.

Recorded per step: the training loss, the norm of the gradient of the loss through the attention logits ``l`` and
through the weights ``alpha`` of each layer (hooks on the tensors of the attention function), whether the gradient was
non-finite (the step is then skipped) or clipped; the validation loss every ``eval_every`` steps; the wall time.
Deterministic on the CPU: a seed fixes the initial weights and the batches, and the run uses torch's deterministic
algorithms, so two runs with one seed give identical losses (``tests/test_training.py``).

:func:`trained_limits` measures the paper's limits (``N_s/N``, the critical-N diagnosis, ``g(T, eps)``) on the trained
softmax heads and on a pretrained reference, at the trained models' window (``tests/test_training_limits.py``).
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

from . import capture
from . import normalizers as nz
from ._validation import check_choice, check_int, check_positive, check_seed
from .cache import make_key
from .models.handle import ModelHandle, byte_tokenizer, resolve_device

__all__ = ["TrainSize", "train", "trained_handle"]

#: Normaliser parameters this module learns (the registry declares none): name -> (parameter, initial value).
LEARNABLE = {"ssmax": ("s", 0.43), "sigmoid": ("b", 0.0)}
#: Parameters a normaliser is trained with ("its defaults"): top-k has no default k; alpha-entmax's bisection stops
#: after 25 halvings (its interval, at most 1/(alpha-1) = 2 wide at alpha = 1.5, is then below 1e-7: float32's
#: resolution; the registry's 60 cost 2.5x the time for no change of a float32 weight).
DEFAULT_PARAMS = {"topk": {"k": 8}, "entmax_alpha": {"n_iter": 25}}
#: Share of the shipped text's tokens used for training (the rest, the end of the text, validates).
TRAIN_SHARE = 0.9


@dataclasses.dataclass(frozen=True)
class TrainSize:
    """A model size and training budget. ``n_positions`` is the training window; ``eval_batches`` fixed validation
    batches of ``batch`` windows each are scored every ``eval_every`` steps; ``clip`` is the gradient-norm clip."""

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
    """What :func:`train` measured: ``history`` (one row per step: ``step, train_loss, val_loss`` (NaN between
    evaluations), ``nonfinite, clipped, grad_norm`` and per layer ``i`` ``logit_grad_i``, ``weight_grad_i``),
    ``summary`` (a dict of scalars and settings) and ``state`` (the trained weights as float32 arrays, by name)."""

    history: pd.DataFrame
    summary: dict
    state: dict


@functools.cache
def _token_ids() -> np.ndarray:
    # lazy: the corpus module reads files and the tokenizer imports transformers; importing attn_lib stays light
    from .corpus import load_text

    text = load_text("botchan")
    return np.asarray(byte_tokenizer().encode(str(text.text), add_special_tokens=False), dtype=np.int64)


def split_tokens() -> tuple[torch.Tensor, torch.Tensor]:
    """(training tokens, validation tokens) of the shipped text: its first :data:`TRAIN_SHARE` and the rest."""
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
    """``size`` (a key of :data:`SIZES` or a :class:`TrainSize`) as a :class:`TrainSize`; ``ValueError`` otherwise."""
    size = SIZES[check_choice("size", size, list(SIZES))] if isinstance(size, str) else size
    if not isinstance(size, TrainSize):
        raise ValueError(f"size must be one of {list(SIZES)} or a TrainSize (got {size!r})")
    return size


def _build(size: TrainSize, normalizer: str):
    # lazy: transformers is a heavy import; importing attn_lib stays light
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=256, n_positions=size.n_positions, n_embd=size.n_embd, n_layer=size.n_layer, n_head=size.n_head,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = GPT2LMHeadModel(cfg)
    if normalizer in LEARNABLE:
        init = LEARNABLE[normalizer][1]
        start = math.log(init) if normalizer == "ssmax" else init
        model.attn_lib_norm = torch.nn.Parameter(torch.full((size.n_layer, size.n_head, 1, 1), float(start)))
    return model


def _normaliser(model, name: str, params: dict):
    """The callable handed to the attention interface: the registered function, with the learned parameters of
    ``model`` (one call per layer per forward pass, in layer order: the layers' functions in turn)."""
    if name not in LEARNABLE:
        return nz.get(name, **params)
    per_layer = itertools.cycle([_layer_normaliser(model, name, params, i) for i in range(model.config.n_layer)])

    def learned(logits, temperature=1.0, dim=-1, mask=None):
        return next(per_layer)(logits, temperature, dim, mask)

    return learned


def _layer_normaliser(model, name: str, params: dict, layer: int):
    """The normaliser of ``layer`` of ``model``: the registered function, with that layer's learned parameter (read
    at each call, so that training updates it)."""
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
    """Train a GPT-2-architecture model from scratch with ``normalizer`` at ``temperature`` (module docstring).

    ``size``: a key of :data:`SIZES` or a :class:`TrainSize`; ``params``: the normaliser's fixed parameters (default
    :data:`DEFAULT_PARAMS`; none for a normaliser with learned ones); ``device``: ``"cpu"`` (deterministic) or any
    device :func:`attn_lib.models.resolve_device` accepts. Returns a :class:`TrainRun`; :func:`trained_handle` makes it
    a :class:`~attn_lib.models.ModelHandle`.
    """

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
    """The trained model of ``run`` as a :class:`~attn_lib.models.ModelHandle` (byte tokenizer, float32, eval mode).

    The temperature is folded into the query projection (``q -> q / T``), so the logits every experiment reads are
    the scaled logits ``l / T`` that the normaliser saw, and for softmax the handle's own forward pass *is* the trained
    model. For another normaliser the handle's forward pass uses softmax on those logits (the paper's limits are about
    softmax); the handle's ``note`` says so, and ``capture_attention(handle, ..., normalizer=...)`` runs the trained
    map (SSMax and sigmoid with their learned parameters: ``run.summary["learned"]``).
    """

    s = run.summary
    size = TrainSize(**s["size"])
    model = _build(size, s["normalizer"])
    model.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in run.state.items()})
    with torch.no_grad():
        for block in model.transformer.h:  # Conv1D: weight (n_embd, 3 n_embd), the query is the first third
            block.attn.c_attn.weight[:, : size.n_embd] /= s["temperature"]
            block.attn.c_attn.bias[: size.n_embd] /= s["temperature"]
    dev = resolve_device(device)
    model.to(dev)
    digest = hashlib.sha256(_settings(run).encode()).hexdigest()[:12]
    name = f"gpt2-arch-{s['normalizer']}-T{s['temperature']:g}-seed{s['seed']}"
    shown = nz.spec(s["normalizer"]).display
    note = "" if s["normalizer"] == "softmax" else f"trained with {shown}: the handle's own forward pass uses softmax"
    return ModelHandle.from_model(
        model, byte_tokenizer(), requested=name, model_id=name, revision=digest, device=dev, dtype=torch.float32,
        is_standin=False, source=f"trained here on botchan, {s['n_parameters']} parameters", note=note,
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------
# the sweep of chapter 8 and ``attn-lib train-sweep``
# ----------------------------------------------------------------------------------------------------------------
#: Softmax temperatures of the sweep (a factor on GPT-2's 1/sqrt(d): ``T_paper = T sqrt(d)``, module docstring).
TEMPERATURES = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: ``quick`` (chapter 8, the CPU): softmax at every temperature with 5 seeds, every other normaliser at ``T = 1`` with
#: one; ``full``: every normaliser with 5 seeds and 4x the steps. ``steps`` replaces the size's own.
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
    """Every run of :func:`sweep_settings` (``size``: default ``"gpu"`` on a GPU, else ``"book"``, with the profile's
    steps), each cached in ``cache`` (an :class:`attn_lib.cache.ResultCache` or None); ``workers`` processes train the
    missing runs in parallel (one thread each, so the results are those of one process). Returns
    ``{(normaliser, T, seed): TrainRun}``."""

    dev = resolve_device(device)
    size = _size(("gpu" if dev.type == "cuda" else "book") if size is None else size)
    size = dataclasses.replace(size, steps=PROFILES[check_choice("profile", profile, list(PROFILES))]["steps"])
    size = dataclasses.replace(size, eval_every=max(1, size.steps // 4))
    workers = check_int("workers", workers, low=1, high=64)
    settings = sweep_settings(profile)
    keys = {s: make_key("train", name=s[0], T=s[1], seed=s[2], size=size.as_dict(), device=dev.type) for s in settings}
    out = {s: cache.get(keys[s]) for s in settings} if cache is not None else dict.fromkeys(settings)
    todo = [s for s in settings if out[s] is None]
    # lazy: tqdm is needed by the sweep only
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(settings), initial=len(settings) - len(todo), desc="training", unit="run", disable=not progress
    )
    jobs = [(*s, size, str(dev)) for s in todo]
    if workers > 1 and len(todo) > 1 and dev.type == "cpu":
        # lazy: process pools only for a parallel sweep
        import concurrent.futures as cf
        import multiprocessing as mp

        with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as ex:
            done = ex.map(_one, jobs)
            for s, run in zip(todo, done, strict=True):
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
    """The sweep's tables: ``train_runs`` (one row per run: its summary, the median over steps of the logit and
    weight gradient norms averaged over layers, and ``gain``, the median over steps and layers of
    ``||dL/dl|| / ||dL/dalpha||``) and ``train_curves`` (one row per run and step)."""
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


# ----------------------------------------------------------------------------------------------------------------
# the paper's limits on the trained heads (chapter 8, "The paper's limits on the trained heads")
# ----------------------------------------------------------------------------------------------------------------
#: The window of the limits: the book size's training window (a trained model has no positions beyond it).
LIMITS_WINDOW = 64
#: The temperatures (on the model's own logits) at which the table reports ``g(T, eps)`` of Fig. 4.
LIMITS_T = (0.01, 1.0)
#: The offline stand-in whose limits are the reference row (the name :func:`attn_lib.models.load_model` takes).
LIMITS_REFERENCE = "smollm2"


def limits_profile(window: int = LIMITS_WINDOW):
    """The grids of :func:`trained_limits`: the ``quick`` reproduction profile with every window ``window`` tokens,
    ``N_s/N`` at the paper's ``N`` below ``window`` (no extra temperatures), ``g(T, eps)`` at the quick profile's six
    temperatures and the smallest ``eps`` only (``1e-3``, five direction draws), the critical-N diagnosis on the model
    as it is (no counterfactual layers)."""
    # lazy: the experiments package loads the metrics and the accelerated kernels; the training sweep needs neither
    from .experiments import PROFILES, DiagnosisParams, SeparabilityParams

    L = check_int("window", window, low=8, high=1 << 16)
    q, paper = PROFILES["quick"], PROFILES["paper"]
    return dataclasses.replace(
        q,
        name=f"trained-limits-L{L}",
        distance_vs_length=dataclasses.replace(q.distance_vs_length, lengths=(L,)),
        distance_vs_n=dataclasses.replace(q.distance_vs_n, L=L, n_values=(1, 5)),
        critical_n=dataclasses.replace(q.critical_n, lengths=(L,), stage=L - 1),
        separability=SeparabilityParams(L=L, n_values=tuple(n for n in paper.separability.n_values if n < L),
                                        temperatures=()),
        gradient_sensitivity=dataclasses.replace(q.gradient_sensitivity, L=L,
                                                 eps_values=(min(q.gradient_sensitivity.eps_values),)),
        critical_n_diagnosis=DiagnosisParams(L=L, rows=32, variants={"model": (1.0, False)}),
    )  # fmt: skip


def held_out_text():
    """The validation part of the shipped text (the bytes after :data:`TRAIN_SHARE`), as a
    :class:`~attn_lib.corpus.Text`: the trained models never saw it."""
    # lazy: the corpus module reads files; importing attn_lib stays light
    from .corpus import Text, load_text

    raw = str(load_text("botchan").text).encode("utf-8")
    held = raw[int(len(raw) * TRAIN_SHARE) :].decode("utf-8", errors="ignore")
    return Text.from_string(held, name="botchan (last 10%, held out)", source="attn_lib.training.held_out_text")


def limits_row(handle, text, profile) -> dict:
    """The paper's limits on every head of ``handle`` at the window of ``profile`` (:func:`limits_profile`), from the
    window's first token: ``ns_<N>`` the median over (layer, head) of the row-mean ``N_s/N`` (Algorithm 4) at each
    ``N``; ``rho`` the median over (layer, head) of ``||s_N||/||z||`` (each head's median over rows) at
    ``rho_N``, the ``N`` nearest ``0.06 L`` (the critical-N diagnosis); ``g_T<T>`` Fig. 4's ``g(T, eps)`` at the
    smallest ``eps`` (the row mean, max over (layer, head)) at each ``T`` of :data:`LIMITS_T`, median over the direction
    draws (``g_T<T>_lo``, ``_hi``: their range) and ``g_slope``, its log-log slope over ``T <= 0.1``."""
    # lazy: the experiments package loads the metrics and the accelerated kernels; the training sweep needs neither
    from .experiments import run_all

    names = ["separability", "critical_n_diagnosis", "gradient_sensitivity"]
    res = run_all(handle, text, profile, experiments=names, threads=1)
    sep, diag, sens = (res[n] for n in names)
    L = int(sep["L"].iloc[0])
    row = dict(model=str(sep["model"].iloc[0]), L=L)
    row.update({f"ns_{int(n)}": float(v) for n, v in sep.groupby("N")["fraction"].median().items()})
    ns = np.sort(diag["N"].unique())
    n06 = int(ns[np.argmin(np.abs(ns / L - 0.06))])
    row.update(rho_N=n06, rho=float(diag.loc[diag["N"] == n06, "rho_median"].median()))
    e0 = sens["eps"].min()
    curve = sens[sens["eps"] == e0].groupby(["draw", "T"])["g"].max().unstack("draw")  # (T, draw)
    for T in LIMITS_T:
        at = curve.loc[np.isclose(curve.index, T)].iloc[0]
        row.update({f"g_T{T:g}": float(at.median()), f"g_T{T:g}_lo": float(at.min()), f"g_T{T:g}_hi": float(at.max())})
    low = curve[curve.index <= 0.1 * (1 + 1e-9)].median(axis=1)
    row["g_slope"] = float(np.polyfit(np.log10(low.index), np.log10(low.clip(lower=1e-300)), 1)[0])
    row["eps"] = float(e0)
    return row


def trained_limits(runs: dict, *, text=None, window: int = LIMITS_WINDOW, reference=LIMITS_REFERENCE, cache=None):
    """The paper's limits (:func:`limits_row`) on the heads of every **softmax** run of ``runs`` (``{(normaliser, T,
    seed): TrainRun}``, :func:`run_sweep`), and on the pretrained ``reference`` model (default the offline stand-in;
    ``None``: no reference row; or a :class:`~attn_lib.models.ModelHandle`), all on the same window of ``window`` tokens of ``text`` (default
    :func:`held_out_text`).

    Only softmax runs are measured: for another normaliser :func:`trained_handle`'s forward pass uses softmax on its
    logits, so every layer after the first would read hidden states the trained model never produced, and the weights
    measured would not be the ones it trained with. Each row is cached in ``cache`` (keyed by the run's summary, the
    text, the grids and the library's code). Returns a DataFrame, one row per softmax run (``kind = "trained"``,
    sorted by ``T``, seed) and then the reference (``kind = "reference"``, ``temperature`` and ``seed`` NaN).
    """

    sm, window = _checked_runs(runs, lambda k: k[0] == "softmax", "softmax run", "normalisers", 0, window, 8)
    sm.sort(key=lambda k: (k[1], k[2]))
    if reference is not None and not isinstance(reference, (str, ModelHandle)):
        raise ValueError(
            f"reference must be None, a model name for attn_lib.models.load_model or a ModelHandle (got {reference!r})"
        )
    text = held_out_text() if text is None else text
    profile = limits_profile(window)
    base = dict(text_sha256=getattr(text, "sha256", str(text)), profile=repr(profile))
    rows = []
    for k in sm:
        key = make_key("train-limits", summary=_settings(runs[k]), **base)
        r = _cached(cache, key, lambda k=k: limits_row(trained_handle(runs[k]), text, profile))
        rows.append(dict(kind="trained", normalizer="softmax", temperature=k[1], seed=k[2], **r))
    if reference is not None:
        named = reference if isinstance(reference, str) else reference.cache_key()
        key = make_key("train-limits-reference", model=repr(named), **base)
        r = _cached(cache, key, lambda: _reference_row(reference, text, profile))
        rows.append(dict(kind="reference", normalizer="softmax", temperature=math.nan, seed=math.nan, **r))
    return pd.DataFrame(rows)


def _checked_runs(runs, keep, what: str, field: str, i: int, window, low: int) -> tuple[list, int]:
    """The keys of ``runs`` (``{(normaliser, T, seed): TrainRun}``) that ``keep`` selects and the checked ``window``
    (``>= low``, at most every selected run's training window); ``ValueError`` naming ``runs`` or ``window``."""
    if not isinstance(runs, dict) or not all(isinstance(r, TrainRun) for r in runs.values()):
        raise ValueError("runs must be a dict {(normaliser, T, seed): TrainRun} (attn_lib.training.run_sweep)")
    keys = [k for k in runs if keep(k)]
    if not keys:
        raise ValueError(f"runs must hold at least one {what} (got the {field} {sorted({k[i] for k in runs})})")
    window = check_int("window", window, low=low, high=1 << 16)
    short = [k for k in keys if runs[k].summary["size"]["n_positions"] < window]
    if short:
        raise ValueError(f"window must be at most every run's training window (n_positions); {short[0]} has "
                         f"{runs[short[0]].summary['size']['n_positions']} < {window}")  # fmt: skip
    return keys, window


def _cached(cache, key: dict, compute):
    return compute() if cache is None else cache.get_or_compute(key, compute)


def _reference_row(name, text, profile) -> dict:
    # lazy: loading a pretrained model imports transformers and reads its weights
    from .models import load_model

    handle = load_model(name, device="cpu", quiet=True) if isinstance(name, str) else name
    return limits_row(handle, text, profile)


# ---- each normaliser on its own trained weights (chapter 7's limits) ------------------------------------------------
def own_limits_profile(window: int = LIMITS_WINDOW):
    """The grids of :func:`own_limits`: chapter 7's ``quick`` profile (:data:`attn_lib.experiments.BEYOND_PROFILES`)
    cut to ``window`` tokens (row lengths ``L`` of 8, 16, 32, ... up to ``window``, at most 16 rows each), ``g`` at the smallest
    ``eps`` only, no top-k."""
    # lazy: the experiments package loads the metrics and the accelerated kernels; the training sweep needs neither
    from .experiments import BEYOND_PROFILES

    L = check_int("window", window, low=16, high=1 << 16)
    q = BEYOND_PROFILES["quick"]
    lengths = tuple(n for n in (8, 16, 32, 64, 128, 256, 512, 1024) if n < L) + (L,)
    return dataclasses.replace(
        q, name=f"trained-own-L{L}", lengths=lengths, rows_per_length=16, crit_grid=tuple(n for n in q.crit_grid if n < L),
        sep_n=tuple(n for n in q.sep_n if n < L), eps_values=(min(q.eps_values),), k_values=(),
    )  # fmt: skip


def own_limits_table(run: TrainRun, text, profile, seed: int = 0) -> pd.DataFrame:
    """:func:`attn_lib.experiments.compare_normalizers`' table for the model of ``run`` with its OWN normaliser: one
    forward pass in which every layer runs the trained normaliser (with its learned parameters), and that layer's
    logits are normalised by it again to measure its weights (``profile``: :func:`own_limits_profile`)."""
    # lazy: the experiments package loads the metrics and the accelerated kernels; the training sweep needs neither
    from types import SimpleNamespace

    from .experiments import passes
    from .experiments.inputs import table_meta
    from .experiments.normalizers import CompareAnalysis

    name, params = run.summary["normalizer"], run.summary["params"]
    handle = trained_handle(run)
    model = handle.model

    class Own(CompareAnalysis):
        def normaliser(self, name, params, layer):
            return _layer_normaliser(model, name, params, layer)

    a = Own(table_meta(handle, text), profile, {name: (name, params)}, seed)
    only_layer = SimpleNamespace(layer=lambda sh: a.layer(sh.la))
    passes.run_pass(handle, text, [only_layer], max(profile.lengths), 0, normalizer=_normaliser(model, name, params))
    return a.finish()


def own_limits(runs: dict, *, text=None, window: int = LIMITS_WINDOW, seed: int = 0, cache=None) -> pd.DataFrame:
    """Chapter 7's limits (:func:`attn_lib.experiments.limits_summary`) of every run of ``runs`` trained at ``T = 1``
    (``{(normaliser, T, seed): TrainRun}``, :func:`run_sweep`), each on its own normaliser's weights in its own
    forward pass (:func:`own_limits_table`), on the first ``window`` tokens of ``text`` (default
    :func:`held_out_text`). Each run's table is cached in ``cache``. Returns one row per run: ``normalizer``,
    ``seed``, ``model``, ``L`` (the window), ``n_heads``, ``ks_p_min`` (the smallest p-value the critical N's KS test
    can reach over that many heads; at or above ``ks_alpha`` the critical N is 1 by construction) and the columns of
    ``limits_summary`` (``max_alpha_slope``, ``d_tilde``, ``n_star``, ``sep_fraction``,
    ``g_low_T``, ``g_T1``, ...), in the registry's order, then by seed."""
    from scipy.stats import ks_2samp  # scipy.stats takes a while to import

    from .experiments import limits_summary  # lazy, as above

    keys, window = _checked_runs(runs, lambda k: k[1] == 1.0, "run at T = 1", "temperatures", 1, window, 16)
    seed = check_seed("seed", seed)
    order = {n: i for i, n in enumerate(nz.available())}
    keys.sort(key=lambda k: (order.get(k[0], len(order)), k[2]))
    text = held_out_text() if text is None else text
    profile = own_limits_profile(window)
    rows = []
    for k in keys:
        key = make_key("train-own-limits", summary=_settings(runs[k]), text_sha256=getattr(text, "sha256", str(text)),
                       profile=repr(profile), seed=seed)  # fmt: skip
        table = _cached(cache, key, lambda k=k: own_limits_table(runs[k], text, profile, seed))
        summary = limits_summary(table, profile.ks_alpha).reset_index(drop=True).iloc[0].to_dict()
        n_heads = len(table[["layer", "head"]].drop_duplicates())
        # the smallest p-value a two-sample KS test over n_heads values can give (two samples that do not overlap)
        p_min = float(ks_2samp(np.arange(n_heads), np.arange(n_heads) + n_heads).pvalue)
        rows.append(dict(normalizer=k[0], seed=k[2], model=str(table["model"].iloc[0]), L=window, n_heads=n_heads,
                         ks_p_min=p_min, ks_alpha=profile.ks_alpha, **summary))  # fmt: skip
    return pd.DataFrame(rows)
