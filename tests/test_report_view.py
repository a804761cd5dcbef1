"""attn_lib.report's views of the claim table: one-line causes, the rules table, the verdict figure, ids by
experiment, and the symbolic crossing of chapter 6."""

from __future__ import annotations

import pandas as pd
import pytest
import sympy as sp

from attn_lib import claims
from attn_lib import report as R
from attn_lib.book import symbolic, tables


class TestShortCause:
    def test_first_clause_outside_parentheses(self):
        assert R.short_cause("a (b; c) d; e") == "a (b; c) d"

    def test_a_role_with_a_semicolon_after_it_stays_whole(self):
        text = "E1 ≤ q ({prf:ref}`prop-random-bounded`; mean 1), while x; T=4"
        assert R.short_cause(text) == "E1 ≤ q ({prf:ref}`prop-random-bounded`; mean 1), while x"

    def test_empty_and_single_clause(self):
        assert R.short_cause("") == ""
        assert R.short_cause("only one") == "only one"


class TestRulesMarkdown:
    def test_a_pipe_in_a_rule_is_escaped(self):
        md = tables.rules_markdown(pd.DataFrame({"id": ["x"], "rule": ["|b − 1| ≤ 0.2"]}))
        assert md.splitlines()[-1] == "| x | \\|b − 1\\| ≤ 0.2 |"

    def test_needs_the_columns(self):
        with pytest.raises(ValueError, match="rule"):
            tables.rules_markdown(pd.DataFrame({"id": ["x"]}))


class TestIdsFor:
    def test_separability_claims_only(self):
        ids = claims.ids_for("separability")
        assert ids and all(claims.CLAIMS[i].needs == ("separability",) for i in ids)
        assert "fig3-saturates" in ids and "fig2c-critical-e1" not in ids

    def test_a_claim_that_needs_nothing_is_left_out(self):
        assert "multihead-rule-arithmetic" not in claims.ids_for(*{n for c in claims.CLAIMS.values() for n in c.needs})

    def test_unknown_experiment_gives_nothing(self):
        assert claims.ids_for("no-such-experiment") == []


class TestFigureVerdicts:
    def test_one_cell_per_claim_and_model(self):
        table = claims.verdicts({})
        fig = R.figure_verdicts({"decoder: a": table, "encoder: b": table})
        ax = fig.axes[0]
        assert len(ax.patches) == 2 * len(table)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["decoder", "encoder"]

    def test_the_footer_names_the_models_text_and_device(self):
        table = claims.verdicts({})
        run = pd.DataFrame({"model": ["a"], "text": ["botchan"], "device": ["cpu"]})
        fig = R.figure_verdicts({"decoder: a": table}, {"distance_vs_length": run})
        words = " ".join(t.get_text() for t in fig.texts).replace("\n", " ")
        assert all(w in words for w in ("decoder: a", "text: botchan", "device: cpu"))
        with pytest.raises(ValueError, match="results must be a dict"):
            R.figure_verdicts({"decoder: a": table}, [run])


class TestE1Crossing:
    def test_the_crossing_is_rho_times_t_minus_one(self):
        ec = symbolic.e1_crossing_symbolic()
        t, rho = sp.Symbol("t", positive=True), sp.Symbol("rho", positive=True)
        assert sp.simplify(ec["crossing"] - rho * (t - 1)) == 0
        assert ec["check"] == 0
        assert any(sp.simplify(s - t) == 0 for s in ec["solutions"])  # the trivial root N = t


class TestCorollary3Computed:
    def test_signs_and_gershgorin_are_computed(self):
        c3 = symbolic.corollary3_bounds_symbolic(3)
        signs = [v for k, v in c3.items() if k.endswith(("_positive", "_negative"))]
        assert len(signs) == 3 and all(signs) and c3["gershgorin_check"] == 0
        assert c3["max_alpha_one_minus_alpha"] == sp.Rational(1, 4)
        T = sp.Symbol("T", positive=True)
        assert sp.simplify(c3["spectral_bound"].rhs - 1 / (2 * T)) == 0


class TestReproductionMarkdownDetail:
    def test_detail_names_its_choices(self):
        table = claims.verdicts({})
        with pytest.raises(ValueError, match="detail"):
            tables.reproduction_markdown(table, detail="everything")

    def test_measured_detail_shows_the_measured_column(self):
        table = claims.verdicts({}, ids=["fig2a-dtilde-linear"])
        md = tables.reproduction_markdown(table, detail="measured")
        assert md.splitlines()[0].endswith("| measured |") and "not run: needs" in md
