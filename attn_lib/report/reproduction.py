"""The reproduction report's tables (one model, or several side by side), the tally and the verdict figure
(book/06_reproduction_report.md)."""

from __future__ import annotations

import re

import pandas as pd

from ..claims import EVIDENCE, NEAR_EMPTY, tally, verdicts
from ..claims.stats import need_results, require_columns  # noqa: F401  (need_results: for book.tables)
from ..layout import FIGURE_WIDTH_IN, MIN_FONT_PT
from ._common import footer, md_cell, md_text, meta_of, pipe_table


def reproduction_table(results: dict[str, pd.DataFrame], *, thresholds: dict | None = None) -> pd.DataFrame:
    """Every claim on one model's results: :func:`attn_lib.claims.verdicts`."""
    return verdicts(results, thresholds)


def model_column(handle) -> str:
    """A model's (:class:`attn_lib.models.ModelHandle`) column label in :func:`side_by_side`: ``"decoder: <model>"``
    for a causal model, ``"encoder: <model>"`` for a bidirectional one."""
    kind = "decoder" if getattr(handle, "causal", True) else "encoder"
    name = handle.model_id
    if getattr(handle, "is_standin", False):
        name = f"{name} (offline stand-in for {handle.requested})"
    return f"{kind}: {name}"


def short_cause(cause: str) -> str:
    """The first clause of a cause (up to the first ``"; "``): the one-line cause of the summary table."""
    if not cause:
        return ""
    text, depth = str(cause), 0
    for i, ch in enumerate(text):  # the first "; " outside parentheses and backquotes
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and text.startswith("; ", i) and text.count("`", 0, i) % 2 == 0:
            return text[:i]
    return text


def claim_label(row) -> str:
    return f"{row['claim']}" + (f" — {row['reading']}" if row.get("reading") else "")


def kind_label(row) -> str:
    """A row's kind of evidence as the report prints it: ``"informative (near-empty test)"`` for a row with a
    ``weak`` reason (:attr:`attn_lib.claims.Claim.weak`), else the kind."""
    weak = row.get("weak") if hasattr(row, "get") else ""
    return f"{row['evidence']} ({NEAR_EMPTY})" if isinstance(weak, str) and weak else str(row["evidence"])


def _check_tables(tables) -> None:
    if not isinstance(tables, dict) or not tables:
        raise ValueError("tables must be a non-empty dict {model column label: reproduction_table(...)}")


def tally_markdown(tables: dict[str, pd.DataFrame]) -> str:
    """The verdicts of ``tables`` (``{model column label: reproduction_table(...)}``) counted apart by kind of
    evidence: a pipe table, one column per model, each cell a list of counts (``"8 reproduced, 14 not reproduced"``)."""
    _check_tables(tables)
    counted = {m: tally(t) for m, t in tables.items()}
    kinds = list(dict.fromkeys(k for c in counted.values() for k in c.index))
    head = ["kind of evidence", *(m.split(":", 1)[0] for m in tables)]
    rows = []
    for k in kinds:
        cells = [k]
        for c in counted.values():
            row = c.loc[k] if k in c.index else pd.Series(dtype=int)
            cells.append(", ".join(f"{int(n)} {v}" for v, n in row.items() if n) or "0")
        rows.append(cells)
    return pipe_table(head, rows)


def plain_roles(text: str) -> str:
    """MyST roles (``{prf:ref}`x```) written as their plain label, for Markdown read outside the book."""
    return re.sub(r"\{[a-z:]+\}`([^`]+)`", r"\1", str(text))


def _plain(text: str, links: bool) -> str:
    return str(text) if links else plain_roles(text)


def claim_details_markdown(tables: dict[str, pd.DataFrame] | pd.DataFrame, *, links: bool = True) -> str:
    """A collapsible block per claim (``{dropdown}`` in the book, ``links=True``; ``<details>`` and plain labels in
    ``report.md``): the paper's words, the reading, the rule, what would have failed it, the measured numbers and the
    cause on every model of ``tables`` (one :func:`reproduction_table`, or ``{model column label: table}``)."""
    if isinstance(tables, pd.DataFrame):
        tables = {"": tables}
    first = next(iter(tables.values()))
    require_columns(first, "table", ("id", "claim", "paper", "rule", "fails_if", "section", "measured", "cause"))
    keyed = {m: t.set_index("id") for m, t in tables.items()}
    blocks = []
    for _, r in first.iterrows():
        title = f"{r['id']}: {claim_label(r)}"
        body = [f"- **The paper** ({r['where']}): {r['paper']}"]
        if r["reading"]:
            body.append(f"- **Reading:** {r['reading']}")
        body.append(f"- **Kind of evidence:** {r['evidence']} ({EVIDENCE.get(r['evidence'], '')})")
        if isinstance(r.get("weak"), str) and r["weak"]:
            body.append(f"- **Near-empty test** (counted apart from the informative rows): {r['weak']}")
        if r["basis"]:
            body.append(f"- **Rests on:** {_plain('{prf:ref}`' + r['basis'] + '`', links)}")
        body.append(f"- **Rule:** {r['rule']}")
        if r["fails_if"]:
            body.append(f"- **Fails on (an outcome that would refute the claim):** {r['fails_if']}")
        for m, t in keyed.items():
            if r["id"] not in t.index:
                continue
            x = t.loc[r["id"]]
            who = f" ({m})" if m else ""
            body.append(f"- **Measured{who}:** {md_text(x['measured'])} → **{x['verdict']}**")
            if x["cause"]:
                body.append(f"- **Cause{who}:** {md_text(_plain(x['cause'], links))}")
        ref = f"{{ref}}`Reading the paper <{r['section']}>`" if links else f"Reading the paper, section {r['section']}"
        body.append(f"- **Project decisions:** {ref}")
        text = "\n".join(body)
        if links:
            blocks.append(f":::{{dropdown}} {title}\n{text}\n:::")
        else:
            blocks.append(f"<details><summary>{title}</summary>\n\n{text}\n\n</details>")
    return "\n\n".join(blocks)


def side_by_side(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The claims on several models at once, matched by claim id, from ``tables`` (``{model_column(handle):
    reproduction_table(...)}``, at least one): ``id, claim, reading, evidence, weak`` (why a row is a near-empty test, or ""), one verdict column per model,
    ``agree`` (whether every model that measured the claim gave the same verdict), ``cause`` (the one-line cause of the
    first model that has one, labelled with its kind of model) and ``section``."""
    _check_tables(tables)
    for lab, t in tables.items():
        require_columns(t, f"tables[{lab!r}]", ("id", "claim", "reading", "evidence", "verdict", "cause", "section"))
    labels = list(tables)
    keyed = {lab: t.set_index("id") for lab, t in tables.items()}
    order = list(dict.fromkeys(i for t in tables.values() for i in t["id"]))
    rows = []
    for cid in order:
        first = next(keyed[m].loc[cid] for m in labels if cid in keyed[m].index)
        row = {"id": cid, "claim": first["claim"], "reading": first["reading"], "evidence": first["evidence"]}
        row["weak"] = first["weak"] if isinstance(first.get("weak"), str) else ""
        causes = []
        for m in labels:
            t = keyed[m]
            row[m] = t.loc[cid, "verdict"] if cid in t.index else "n/a"
            c = short_cause(t.loc[cid, "cause"]) if cid in t.index else ""
            if c:
                causes.append(f"{m.split(':', 1)[0]}: {c}" if len(labels) > 1 else c)
        row["agree"] = len({row[m] for m in labels if row[m] != "n/a"}) <= 1
        # one line: the first model's cause (the others' are in the details), else the first model that has one
        row["cause"] = causes[0] + (" (other models: see the details)" if len(causes) > 1 else "") if causes else ""
        row["section"] = first["section"]
        rows.append(row)
    cols = ["id", "claim", "reading", "evidence", "weak", *labels, "agree", "cause", "section"]
    return pd.DataFrame(rows, columns=cols)


def side_by_side_markdown(table: pd.DataFrame, *, links: bool = True) -> str:
    """:func:`side_by_side`'s ``table`` as a pipe table: claim, kind, one verdict per model, one-line causes.
    ``links``: MyST roles stay (the book), else plain labels (``report.md``)."""
    require_columns(table, "table", ("id", "claim", "reading", "evidence", "agree", "cause", "section"))
    fixed = ("id", "claim", "reading", "evidence", "weak", "agree", "cause", "section")
    models = [c for c in table.columns if c not in fixed]
    head = ["id", "claim", "kind", *(m.split(":", 1)[0] for m in models)]
    head += ["agree"] if len(models) > 1 else []
    head.append("cause (first model; details below)")
    rows = []
    for _, r in table.iterrows():
        cells = [md_cell(r["id"]), md_cell(claim_label(r)), kind_label(r), *(f"**{r[m]}**" for m in models)]
        cells += (["yes" if r["agree"] else "**no**"] if len(models) > 1 else []) + [md_cell(_plain(r["cause"], links))]
        rows.append(cells)
    return pipe_table(head, rows)


#: Colours of the verdicts in :func:`figure_verdicts`, grouped by kind of evidence.
VERDICT_COLOURS = {
    "reproduced": "#2ca02c",
    "not reproduced": "#d62728",
    "no verdict": "#bbbbbb",
    "agrees (forced)": "#a6d8a6",
    "differs (forced)": "#f2a8a8",
    "holds": "#1f77b4",
    "violated": "#000000",
    "finding": "#9467bd",
    "refuted": "#ff7f0e",
    "n/a": "#ffffff",
}


def figure_verdicts(tables: dict[str, pd.DataFrame], results: dict | None = None):
    """The verdicts of ``tables`` (``{model column label: reproduction_table(...)}``, as for :func:`side_by_side`) at
    a glance, a matplotlib Figure: one row per claim, one column per model, coloured by verdict, grouped by kind of
    evidence (informative tests first). The footer names the models, and the text and device of ``results`` (the
    result tables the verdicts were drawn from) where given."""
    from matplotlib.figure import Figure  # matplotlib: imported only when a figure is drawn
    from matplotlib.patches import Patch, Rectangle  # matplotlib: imported only when a figure is drawn

    sbs = side_by_side(tables)
    models = list(tables)
    sbs = sbs.assign(_k=sbs["evidence"].map({k: i for i, k in enumerate(EVIDENCE)})).sort_values("_k", kind="stable")
    n = len(sbs)

    fig = Figure(figsize=(FIGURE_WIDTH_IN, 0.26 * n + 1.8))
    ax = fig.subplots()
    for i, (_, r) in enumerate(sbs.iterrows()):
        for j, m in enumerate(models):
            colour = VERDICT_COLOURS.get(r[m], "#ffffff")
            ax.add_patch(Rectangle((j, n - 1 - i), 1, 1, facecolor=colour, edgecolor="white", lw=1.5))
            ax.text(j + 0.5, n - 0.5 - i, r[m], ha="center", va="center", fontsize=MIN_FONT_PT)
    ax.set(xlim=(0, len(models)), ylim=(0, n))
    ax.set_xticks([j + 0.5 for j in range(len(models))], [m.split(":", 1)[0] for m in models], fontsize=8)
    ax.xaxis.tick_top()
    ticks = [f"{r['id']} ({kind_label(r)})" for _, r in sbs.iterrows()]
    ax.set_yticks([n - 0.5 - i for i in range(n)], ticks, fontsize=MIN_FONT_PT)
    ax.tick_params(length=0)
    ax.spines[:].set_visible(False)
    used = [v for v in VERDICT_COLOURS if any((sbs[m] == v).any() for m in models)]
    ax.legend(
        handles=[Patch(facecolor=VERDICT_COLOURS[v], edgecolor="0.6", label=v) for v in used],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.01),
        ncol=min(3, len(used)),
        fontsize=MIN_FONT_PT,
        frameon=False,
    )
    if results is not None and not isinstance(results, dict):
        raise ValueError(f"results must be a dict of result tables or None (got {type(results).__name__})")
    run = next((meta_of(t) for t in (results or {}).values() if isinstance(t, pd.DataFrame) and len(t)), {})
    footer(
        fig, " | ".join([*models, *(f"{k}: {run[k]}" for k in ("text", "device") if k in run)]), ha="left", va="bottom"
    )
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig
