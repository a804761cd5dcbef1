"""What ``reproduce`` writes: ``report.md``, ``results.json`` and the figures, in one folder."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ..claims import verdicts
from ._common import md_cell, meta_of, pipe_table, records
from .critical import diagnosis_markdown, figure_critical_diagnosis
from .figures import save_formats, sens_rows_note, write_figures
from .reproduction import (
    claim_details_markdown,
    claim_label,
    figure_verdicts,
    kind_label,
    model_column,
    plain_roles,
    reproduction_table,
    side_by_side,
    side_by_side_markdown,
    tally_markdown,
)
from .summary import summary_markdown


def results_json(
    results: dict[str, pd.DataFrame], *, meta: dict | None = None, verdict_table: pd.DataFrame | None = None
) -> dict:
    """JSON-able dict: ``meta``, ``verdicts`` and every result table as a list of records."""
    vt = verdicts(results) if verdict_table is None else verdict_table
    tables = {k: records(v) for k, v in results.items() if v is not None}
    return {"meta": meta or {}, "verdicts": records(vt), "results": tables}


def _claims_table(vt: pd.DataFrame) -> str:
    """The claims with the paper's words, verdict, measured value and cause, one row each (``report.md``)."""
    rows = []
    for _, r in vt.iterrows():
        paper = f"{md_cell(r['where'])}: {md_cell(r['paper'])}"
        cells = [md_cell(r["id"]), paper, md_cell(claim_label(r)), kind_label(r), f"**{md_cell(r['verdict'])}**"]
        rows.append([*cells, md_cell(r["measured"]), md_cell(plain_roles(r["cause"]))])
    return pipe_table(["id", "the paper's words", "this row tests", "kind", "verdict", "measured", "cause"], rows)


def markdown_report(
    results: dict[str, pd.DataFrame],
    *,
    meta: dict | None = None,
    verdict_table: pd.DataFrame | None = None,
    figures: dict | None = None,
    compare: dict[str, dict] | None = None,
    label: str = "this run",
) -> str:
    """The report: which model/text/device produced it, a summary in words, the tally, the claim table, the
    critical-N diagnosis and the details of every claim, on the main model (``label``) and on each model of
    ``compare`` (``{label: {"results": ..., "table": reproduction_table(...)}}``), the conventions, the figures."""
    vt = verdicts(results) if verdict_table is None else verdict_table
    tables = {label: vt, **{lab: item["table"] for lab, item in (compare or {}).items()}}
    all_results = {label: results, **{lab: item["results"] for lab, item in (compare or {}).items()}}
    lines = ["# Reproduction report: Limitations of Normalization in Attention (arXiv:2508.17821)", ""]
    lines += _header_lines(meta or {})
    lines += ["", "## Summary: the paper's claims and what this build found", ""]
    lines.append(
        "Grouped by the paper's figures, generated from the claims table below: the paper's words, the verdicts on "
        "each model that ran (counted by kind of evidence, with the rows' ids) and the first clause of the cause of "
        "every row that differs from the paper."
    )
    lines += ["", summary_markdown(tables, links=False), "", "## Claims against measurements", ""]
    lines.append(
        "Verdicts counted apart by kind of evidence, one column per model (a near-empty test is an informative row "
        "that could hardly have failed; it is counted apart from the informative ones):"
    )
    lines += ["", tally_markdown(tables), ""]
    for lab, t in tables.items():
        if len(tables) > 1:
            lines += [f"### {lab}", ""]
        lines += [_claims_table(t), ""]
    for lab, res in all_results.items():
        diag = res.get("critical_n_diagnosis")
        if isinstance(diag, pd.DataFrame) and len(diag):
            lines += [f"The critical-N diagnosis on **{lab}**:", ""] if len(tables) > 1 else []
            lines += [diagnosis_markdown(diag), ""]
    lines += ["## Each claim in detail", "", claim_details_markdown(tables if len(tables) > 1 else vt, links=False)]
    lines += ["", _conventions(results), ""]
    if figures:
        lines += ["## Figures", ""]
        for stem, paths in figures.items():
            png = [p for p in paths if p.endswith(".png")]
            if png:
                lines += [f"![{stem}]({Path(png[0]).name})", ""]
    return "\n".join(lines) + "\n"


def _header_lines(meta: dict) -> list[str]:
    lines = [f"- **Model:** {meta.get('model_description', meta.get('model', '?'))}"]
    if meta.get("is_standin"):
        lines.append(
            "- **Note:** this is the offline stand-in, *not* GPT-2; the paper's numbers are for GPT-2 "
            "small, so verdicts describe this model only."
        )
    for k in ("text", "device", "profile"):
        if k in meta:
            lines.append(f"- **{k.capitalize()}:** {meta[k]}")
    if meta.get("attention") == "bidirectional":
        lines.append(
            "- **Attention:** bidirectional (an encoder): every query row sees all L tokens of its window, each row's "
            "formulas use the full length L, and every L of a grid has its own forward pass."
        )
    if meta.get("grid_cut"):
        lines.append(f"- **Grid:** {meta['grid_cut']}")
    if "timings_s" in meta:
        lines.append("- **Time:** " + ", ".join(f"{k} {v:.1f} s" for k, v in meta["timings_s"].items()))
    return lines


def _conventions(results: dict) -> str:
    text = (
        "Conventions (Reading the paper, §Decisions for the experiments): x_i = per-head value vectors; causal rows "
        "use L_t = t visible tokens and rows with t < N+1 are skipped; model's own logits (T=1 for Figs. 2–3); E1 "
        "with p = N/(t−1); KS at α = 0.01; separability on unit-normalised values, r ↑ ρ_min."
    )
    if note := sens_rows_note(results.get("gradient_sensitivity")):
        text += f" Gradient sensitivity (Fig. 4) on a row set R{note} (§The sensitivity metric (project decision)), "
        text += "one seeded direction per row."
    return text


def write_report(
    results: dict[str, pd.DataFrame],
    out: str | Path,
    *,
    handle=None,
    text=None,
    profile=None,
    timings: dict | None = None,
    formats: Sequence[str] = ("png", "svg"),
    on_figure=None,
    compare: dict[str, dict] | None = None,
) -> dict:
    """Write figures, ``results.json`` and ``report.md`` into ``out``; returns their paths and the verdicts.
    ``compare``: further models that ran, ``{model_column(handle): {"handle": handle, "results": run_all(...)}}``; the
    report then gets a side-by-side table (also returned as ``"side_by_side"``), the figures a second panel (the first
    of them) and ``results.json`` their tables and verdicts under ``"compare"``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta = _report_meta(results, handle, text, profile, timings)
    vt = verdicts(results)
    compare = compare or {}
    if compare and handle is None:
        raise ValueError("write_report(compare=...) needs handle (the column label of the main model)")
    tables = {model_column(handle) if handle is not None else "this run": vt}
    tables.update({lab: reproduction_table(item["results"]) for lab, item in compare.items()})
    sbs = side_by_side(tables) if compare else None
    first_other = next(iter(compare.values()), {}).get("results") if compare else None
    figs = write_figures(results, out, formats, on_figure=on_figure, other=first_other)
    figs.update(_write_report_figures(results, out, formats, tables))
    data = {**results_json(results, meta=meta, verdict_table=vt), "figures": figs}
    if sbs is not None:
        data["compare"] = {
            lab: {
                "model_summary": item["handle"].summary(),
                "verdicts": records(tables[lab]),
                "results": {k: records(v) for k, v in item["results"].items() if v is not None},
            }
            for lab, item in compare.items()
        }
        data["side_by_side"] = records(sbs)
    jp = out / "results.json"
    jp.write_text(json.dumps(data, indent=1, default=str))
    main_label = next(iter(tables))
    compared = {lab: {"results": item["results"], "table": tables[lab]} for lab, item in compare.items()}
    md = markdown_report(results, meta=meta, verdict_table=vt, figures=figs, compare=compared, label=main_label)
    if sbs is not None:
        md += _side_by_side_section(tables, sbs)
    mp = out / "report.md"
    mp.write_text(md)
    out_info = {"out": str(out), "json": str(jp), "report": str(mp), "figures": figs, "verdicts": vt}
    if sbs is not None:
        out_info["side_by_side"] = sbs
    return out_info


def _report_meta(results, handle, text, profile, timings) -> dict[str, Any]:
    meta: dict[str, Any] = meta_of(next((v for v in results.values() if v is not None and len(v)), None))
    if handle is not None:
        meta.update(_handle_meta(handle))
    if text is not None:
        meta.update(text=getattr(text, "name", str(text)), text_sha256=getattr(text, "sha256", None))
    if profile is not None:
        meta.update(_profile_meta(profile, handle))
    if timings:
        meta["timings_s"] = {k: float(v) for k, v in timings.items()}
    return meta


def _handle_meta(handle) -> dict[str, Any]:
    meta: dict[str, Any] = dict(
        model=handle.model_id,
        model_description=handle.describe(),
        is_standin=bool(handle.is_standin),
        device=str(handle.device),
    )
    with contextlib.suppress(Exception):
        meta["model_summary"] = handle.summary()
    meta["attention"] = "causal" if getattr(handle, "causal", True) else "bidirectional"
    return meta


def _profile_meta(profile, handle) -> dict[str, Any]:
    """The profile's name and grids, and a note when the model's context cuts its ``L`` grid."""
    meta: dict[str, Any] = {"profile": getattr(profile, "name", str(profile))}
    if hasattr(profile, "as_dict"):
        meta["profile_grids"] = profile.as_dict()
    cap = int(getattr(handle, "max_length", 0) or 0)
    lengths = list(getattr(profile, "lengths", ()))
    if cap and lengths and max(lengths) > cap:
        kept = [L for L in lengths if L <= cap]
        meta["grid_cut"] = (
            f"the profile's L grid is cut at the model's {cap} positions: L = {', '.join(map(str, kept))} "
            f"(the paper goes to {max(lengths)}); Figs. 2b, 3 and 4 use L = {min(cap, profile.distance_vs_n.L)}."
        )
    return meta


def _side_by_side_section(tables: dict, sbs: pd.DataFrame) -> str:
    return (
        "\n## Side by side: the claims on every model that ran\n\n"
        "One verdict column per model ("
        + "; ".join(f"{lab.split(':', 1)[0]}: {lab.split(':', 1)[-1].strip()}" for lab in tables)
        + "); *agree* says whether every model that measured the claim gave the same verdict. A "
        "bidirectional encoder lets every query row see all L tokens (the setting of Theorems 1 and 2); it also "
        "differs from the decoder in size, depth, head dimension and training, so a verdict that differs "
        "between the two is not by itself a measurement of the causal mask. The encoder's grids are cut at "
        "its 512 positions. The figures above show the first compared model as a second panel.\n\n"
        + side_by_side_markdown(sbs, links=False)
        + "\n"
    )


def _write_report_figures(results, out: Path, formats, tables: dict) -> dict[str, list[str]]:
    """The report's own figures: the critical-N diagnosis (when it ran) and the verdicts at a glance."""
    made = {}
    diag = results.get("critical_n_diagnosis")
    if isinstance(diag, pd.DataFrame) and len(diag):
        made["fig2c_critical_diagnosis"] = figure_critical_diagnosis(diag)
    made["fig_verdicts"] = figure_verdicts(tables, results)
    return {stem: save_formats(fig, out, stem, formats) for stem, fig in made.items()}
