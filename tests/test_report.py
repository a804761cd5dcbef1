"""attn_lib.report: verdicts from synthetic tables, figures labelled with model/text/device, JSON and markdown."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attn_lib import claims
from attn_lib import report as R

META = dict(model="toy-model", text="toy-text", device="cpu")


def _results(linear=True, plateau=True, sep=0.78, ratio=0.06, inv_t=True):
    rows = []
    for L in (32, 64, 128, 256):
        for h in range(4):
            d = 0.01 * L + 0.001 * h if linear else 1.0 + 0.001 * h + 0.3 * math.sin(L)
            rows.append(
                dict(
                    META,
                    L=L,
                    N=5,
                    layer=0,
                    head=h,
                    n_rows=L - 5,
                    d_tilde=d,
                    d_max=3 * d,
                    e1=0.5,
                    e1_plus_gap=0.6,
                    e1_gap=0.1,
                    e2=d * 0.98,
                    mc=0.5,
                    s_norm=0.01,
                    alpha_bar=0.5,
                    dmax_violations=0,
                )
            )
    dl = pd.DataFrame(rows)
    rows = []
    for N in (1, 5, 10, 20, 100):
        for h in range(4):
            d = 10 * (1 - math.exp(-N / 5)) if plateau else float(N)
            rows.append(
                dict(
                    META,
                    L=1024,
                    N=N,
                    layer=0,
                    head=h,
                    n_rows=100,
                    d_tilde=d + h * 1e-3,
                    d_max=2 * d + 1,
                    e1=d / 2,
                    e1_plus_gap=d,
                    e1_gap=0.1,
                    e2=d,
                    mc=d / 2,
                    s_norm=1,
                    alpha_bar=0.5,
                    dmax_violations=0,
                )
            )
    dn = pd.DataFrame(rows)
    summ = pd.DataFrame(
        [
            dict(META, L=L, form=f, n_star=max(1, round(ratio * L)), censored=False, ratio=ratio, n_scanned=5)
            for L in (64, 128, 256)
            for f in ("e1", "e2", "mc")
        ]
    )
    trace = pd.DataFrame(
        [
            dict(
                META,
                L=64,
                N=1,
                form="e1",
                n_rows=63,
                statistic=0.1,
                p_value=0.5,
                n_heads=4,
                mean_d_tilde=1.0,
                mean_form=1.0,
                alpha=0.01,
            )
        ]
    )
    rows = []
    for N in (1, 2, 4, 8, 16, 32, 64):
        for h in range(6):
            f = 1.0 if N == 1 else (sep + 0.005 * h if N >= 16 else 0.9)
            rows.append(
                dict(
                    META, L=1024, N=N, layer=0, head=h, n_rows=10, fraction=f, lower=-0.5, upper=0.95, r=0.1, delta=0.01
                )
            )
    sp = pd.DataFrame(rows)
    rows = []
    for T in np.logspace(-3, 2, 21):
        for e in (1e-3, 0.1, 10.0):
            g = min(0.4 / T, 100.0) if inv_t else 1.0
            g = min(g, min(1 / (2 * T), math.sqrt(2) / e))
            rows.append(
                dict(
                    META,
                    L=1024,
                    T=float(T),
                    eps=e,
                    layer=0,
                    head=0,
                    n_rows=10,
                    g=g,
                    g_row_max=g,
                    bound_corrected=min(1 / (2 * T), math.sqrt(2) / e),
                    bound_paper=min(1 / (4 * T), 2**0.5),
                    rows_violating_corrected=0,
                    rows_above_paper=0,
                )
            )
    gs = pd.DataFrame(rows)
    return {
        "distance_vs_length": dl,
        "distance_vs_n": dn,
        "critical_n": trace,
        "critical_n_summary": summ,
        "separability": sp,
        "gradient_sensitivity": gs,
    }


def _verdict(vt, cid):
    return vt.set_index("id").loc[cid, "verdict"]


#: The rows the synthetic tables decide, by id (the Monte-Carlo critical N has no trace row at N*: no verdict).
DECIDED = (
    "fig2a-dtilde-linear",
    "fig2b-plateau",
    "fig2c-critical-e1",
    "fig3-saturates",
    "fig4-inv-t-mean-scaled",
    "fig4-drop-0.01-to-1",
)


class TestVerdicts:
    @pytest.mark.parametrize("cid", DECIDED)
    def test_positive(self, cid):
        assert _verdict(claims.verdicts(_results()), cid) == "reproduced"

    @pytest.mark.parametrize("cid", DECIDED)
    def test_negative(self, cid):
        vt = claims.verdicts(_results(linear=False, plateau=False, sep=0.5, ratio=0.3, inv_t=False))
        assert _verdict(vt, cid) == "not reproduced"

    def test_guarantees_hold(self):
        vt = claims.verdicts(_results())
        assert _verdict(vt, "cor3-corrected-bound") == "holds" and _verdict(vt, "thm1-bound-holds") == "holds"

    def test_columns(self):
        vt = claims.verdicts(_results())
        assert set(vt.columns) >= {"id", "claim", "paper", "evidence", "measured", "verdict", "cause", "rule"}

    def test_dmax_violation(self):
        res = _results()
        res["distance_vs_length"].loc[0, "dmax_violations"] = 3
        assert _verdict(claims.verdicts(res), "thm1-bound-holds") == "violated"

    def test_missing_data(self):
        res = _results()
        vt = claims.verdicts({"distance_vs_n": res["distance_vs_n"][res["distance_vs_n"].N < 20]})
        assert _verdict(vt, "fig2b-plateau") == "n/a"


def test_write_report_files_and_labels(tmp_path):
    info = R.write_report(_results(), tmp_path, formats=("png", "svg"))
    assert set(info["figures"]) == {*R.FIGURES, "fig_verdicts"}  # no diagnosis table: no diagnosis figure
    assert all(len(paths) == 2 for paths in info["figures"].values())
    for stem in R.FIGURES:
        svg = next(p for p in info["figures"][stem] if p.endswith(".svg"))
        content = Path(svg).read_text()
        for v in META.values():
            assert v in content  # labelled with model, text and device
    data = json.loads((tmp_path / "results.json").read_text())
    assert set(data["results"]) >= {"distance_vs_length", "separability"}
    assert [r["id"] for r in data["verdicts"]] == list(claims.CLAIMS)
    md = (tmp_path / "report.md").read_text()
    assert "| id | the paper's words | this row tests | kind | verdict | measured | cause |" in md and "toy-model" in md
    assert "## Each claim in detail" in md and md.count("<details>") == len(claims.CLAIMS)


def test_write_report_draws_the_diagnosis_when_it_ran(tmp_path):
    from test_critical import _diag

    res = dict(_results(), critical_n_diagnosis=_diag())
    info = R.write_report(res, tmp_path, formats=("png",))
    assert Path(info["figures"]["fig2c_critical_diagnosis"][0]).stat().st_size > 0
    assert "Why the critical N is where it is" in (tmp_path / "report.md").read_text()


def test_label_and_curves():
    assert R.label(META) == "model: toy-model \u00b7 text: toy-text \u00b7 device: cpu"
    cur = R.sensitivity_curves(_results()["gradient_sensitivity"])
    assert set(cur.columns) == {"T", "eps", "g"}


def test_save_figure_writes_the_same_svg_bytes_twice(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attn_lib.report import save_figure

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    save_figure(fig, tmp_path / "a.svg")
    save_figure(fig, tmp_path / "b.svg")
    plt.close(fig)
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()
    assert b"<dc:date>" not in (tmp_path / "a.svg").read_bytes()


def test_save_figure_names_a_non_figure():
    from attn_lib.report import save_figure

    with pytest.raises(ValueError, match="fig must be a matplotlib Figure"):
        save_figure(None, "unused.svg")
