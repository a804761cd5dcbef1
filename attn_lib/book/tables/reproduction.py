"""The reproduction report's own tables (chapter 6, and each chapter's verdicts): the run's setting against the
paper's, the paper's Table 1 next to this run's times, the compact verdict table and the rules."""

from __future__ import annotations

import pandas as pd

from attn_lib._validation import check_choice
from attn_lib.claims.stats import require_columns
from attn_lib.report._common import md_cell, pipe_table
from attn_lib.report.reproduction import claim_label, need_results, plain_roles, short_cause

__all__ = ["PAPER_TABLE1", "setting_differences", "runtime_table", "reproduction_markdown", "rules_markdown"]

#: The paper's Table 1: each algorithm's run time on an Apple M1 Pro (10-core CPU, 16 GB; PyTorch on the CPU,
#: Joblib for parallelism), in seconds, with the figure it makes.
PAPER_TABLE1 = {
    "distance_vs_length": ("Algorithm 1", "Fig. 2a", 24 * 60),
    "distance_vs_n": ("Algorithm 2", "Fig. 2b", 37 * 60),
    "critical_n": ("Algorithm 3", "Fig. 2c", 17 * 3600 + 4 * 60),
    "separability": ("Algorithm 4", "Fig. 3", 7 * 60),
    "gradient_sensitivity": ("Algorithm 5", "Fig. 4", 60),
}


def setting_differences(
    model: str, text: str, *, n_heads: int | None = None, n_kv_heads: int | None = None
) -> list[str]:
    """What separates a run from the paper's setting (GPT-2 small on *War and Peace*), as short phrases.

    Parameters
    ----------
    model, text : str
        The ``model`` and ``text`` labels of the results (e.g. ``"SmolLM2-135M-Instruct (offline stand-in for
        gpt2)"`` and ``"botchan"``).
    n_heads, n_kv_heads : int, optional
        Query and key/value heads per layer, when known.

    Returns
    -------
    list of str
        Empty when the run is GPT-2 small on *War and Peace*.
    """
    out = []
    m, t = str(model).lower(), str(text).lower()
    if "smollm2" in m:
        out.append(
            "model: SmolLM2-135M-Instruct stand-in, not GPT-2 (30 layers, RoPE positions, Q4_1-quantised "
            "weights dequantised to float32"
            + (
                f", grouped-query attention: {n_heads} query heads share {n_kv_heads} key/value heads"
                if n_heads and n_kv_heads and n_kv_heads < n_heads
                else ""
            )
            + ")"
        )
    elif "all-minilm-l6-v2" in m:
        out.append(
            "model: all-MiniLM-L6-v2, a bidirectional BERT encoder, not GPT-2 (6 layers x 12 heads, head dimension "
            "32, every query row sees all L tokens, at most 512 positions, so L is cut at 512)"
        )
    elif not m.startswith("gpt2") or m.startswith(("gpt2-medium", "gpt2-large", "gpt2-xl")):
        out.append(f"model: {model}, not GPT-2 small")
    if "war" not in t:
        out.append(f"text: {text}, not War and Peace")
    return out


def runtime_table(results: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The paper's Table 1 next to the time each algorithm took here.

    The times come from ``attrs["timing"]`` of each experiment's table (kept with it in the result cache):
    ``analysis_s``, the algorithm's own work, and ``shared_pass_s``, the one forward pass (with attention capture)
    that all experiments of the run shared.

    Parameters
    ----------
    results : dict
        :func:`attn_lib.experiments.run_all`'s results.

    Returns
    -------
    DataFrame (one row per algorithm with data, index ``algorithm``)
        ``figure``, ``paper (s)``, ``here: analysis (s)``, ``here: shared forward pass (s)``, ``speed-up``
        (paper time over analysis plus shared pass), ``device``, ``computed at``.
    """
    need_results(results)
    rows = []
    for name, (alg, fig, paper_s) in PAPER_TABLE1.items():
        df = results.get(name)
        timing = getattr(df, "attrs", {}).get("timing") if df is not None else None
        if not timing:
            continue
        here = float(timing["analysis_s"])
        shared = float(timing["shared_pass_s"])
        rows.append(
            {
                "algorithm": alg,
                "figure": fig,
                "paper (s)": float(paper_s),
                "here: analysis (s)": here,
                "here: shared forward pass (s)": shared,
                "speed-up": paper_s / max(here + shared, 1e-9),
                "device": f"{timing['device']}, {timing.get('threads', '?')} threads",
                "computed at": timing["computed_at"],
            }
        )
    columns = [
        "algorithm",
        "figure",
        "paper (s)",
        "here: analysis (s)",
        "here: shared forward pass (s)",
        "speed-up",
        "device",
        "computed at",
    ]
    return pd.DataFrame(rows, columns=columns).set_index("algorithm")


def reproduction_markdown(table: pd.DataFrame, *, links: bool = True, detail: str = "cause") -> str:
    """The compact summary of one model's claims: claim, kind of evidence, verdict, and a one-line cause (or the
    measured value).

    Parameters
    ----------
    table : DataFrame
        :func:`~attn_lib.report.reproduction_table` (or :func:`attn_lib.claims.verdicts`).
    links : bool
        ``True``: MyST roles stay (the book); ``False``: they are written as plain labels (``report.md``).
    detail : {"cause", "measured"}
        The last column: the first clause of the cause (the reproduction report) or the measured value (a chapter's
        own verdicts).

    Returns
    -------
    str
        A pipe table; ``|`` inside a cell is escaped.
    """

    detail = check_choice("detail", detail, ["cause", "measured"])
    require_columns(table, "table", ("id", "claim", "reading", "evidence", "verdict", "cause", "measured"))
    head = "cause (one line; details below)" if detail == "cause" else "measured"
    rows = []
    for _, r in table.iterrows():
        text = short_cause(r["cause"]) if detail == "cause" else r["measured"]
        rows.append(
            [
                md_cell(claim_label(r)),
                r["evidence"],
                f"**{r['verdict']}**",
                md_cell(str(text) if links else plain_roles(text)),
            ]
        )
    return pipe_table(["claim", "kind", "verdict", head], rows)


def rules_markdown(table: pd.DataFrame) -> str:
    """The rule of every claim as a two-column pipe table (``id``, ``rule``), ``|`` inside a rule escaped.

    Parameters
    ----------
    table : DataFrame
        :func:`~attn_lib.report.reproduction_table`.

    Returns
    -------
    str
    """
    require_columns(table, "table", ("id", "rule"))
    return pipe_table(["id", "rule"], [[r["id"], md_cell(r["rule"])] for _, r in table.iterrows()])
