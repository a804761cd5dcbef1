"""Tests for the normaliser registry of attn_lib.normalizers: the paper's entries, and a normaliser registered in a
test that reaches the comparisons of chapters 5 and 7, the CLI's help and the report's tables with no other edit."""

from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pytest
import torch
from test_beyond import TEXT, TOY_PROFILE

from attn_lib import experiments as B
from attn_lib import experiments as E
from attn_lib import jacobian as jb
from attn_lib import normalizers as nz
from attn_lib import report as R
from attn_lib.book.toy import multihead as mh
from attn_lib.cli import build_parser

#: The normalisers the paper and the book discuss, with their attributes, so that a deletion or a changed attribute is
#: noticed: name -> (family, rows sum to one, in the comparisons, analytic Jacobian, display name). The registry may
#: hold more (a new normaliser needs no edit here), and these keep their relative (display) order.
PAPER = {
    "softmax": ("eq3", True, True, "softmax", "softmax"),
    "general": ("eq3", True, False, "general", "general F/ΣF (Eq. 3)"),
    "sparsemax": ("sparse", True, True, None, "sparsemax"),
    "entmax15": ("sparse", True, True, None, "1.5-entmax"),
    "entmax_alpha": ("sparse", True, False, None, "α-entmax"),
    "ssmax": ("length-aware", True, True, None, "SSMax"),
    "sa_softmax": ("unnormalised", False, True, None, "SA-softmax"),
    "softmax1": ("unnormalised", False, True, None, "softmax1"),
    "sigmoid": ("unnormalised", False, True, None, "sigmoid"),
    "softpick": ("unnormalised", False, True, None, "softpick"),
    "topk": ("top-k", True, False, "softmax", "top-k"),
}


def scaled_softmax(logits, temperature=1.0, dim=-1, mask=None):
    """Softmax of twice the logits: a new normaliser that no module of attn_lib names."""
    return nz.softmax(logits, temperature / 2, dim=dim, mask=mask)


@pytest.fixture
def registered():
    entry = nz.register(nz.Normalizer("scaled_softmax", scaled_softmax, "eq3", True, "2x-softmax"))
    yield entry
    nz.unregister("scaled_softmax")


class TestBuiltIn:
    def test_the_registry_holds_the_papers_normalisers_with_their_attributes(self):
        entries = {n: nz.spec(n) for n in PAPER}
        got = {n: (e.family, e.sums_to_one, e.compared, e.jacobian, e.display) for n, e in entries.items()}
        assert got == PAPER
        assert [n for n in nz.available() if n in PAPER] == list(PAPER)

    @pytest.mark.parametrize(
        "where",
        [
            {},
            {"compared": True},
            {"sums_to_one": True},
            {"sums_to_one": False},
            {"jacobian": "softmax"},
            {"family": "sparse", "compared": True},
        ],
    )
    def test_available_selects_by_the_entries_fields(self, where):
        expect = [n for n in nz.available() if all(getattr(nz.spec(n), k) == v for k, v in where.items())]
        assert nz.available(**where) == expect and expect

    def test_the_selections_of_the_paper_normalisers(self):
        assert [n for n in nz.available(compared=True) if n in PAPER] == [n for n, v in PAPER.items() if v[2]]
        assert {"softmax", "topk"} <= set(nz.available(jacobian="softmax"))
        assert not {"sparsemax", "softmax1"} & set(nz.available(jacobian="softmax"))

    @pytest.mark.parametrize("where", [{"colour": True}, {"fn": nz.softmax}, {"name": "softmax"}])
    def test_available_refuses_an_unknown_field(self, where):
        with pytest.raises(ValueError, match="where must be one of"):
            nz.available(**where)

    def test_each_entry_holds_the_function_get_returns(self):
        for n in nz.available():
            if n not in ("general", "topk"):  # general binds F, topk needs k
                assert nz.get(n) is nz.spec(n).fn and nz.get(n).name == n

    def test_built_ins_cannot_be_removed(self):
        with pytest.raises(ValueError, match="name"):
            nz.unregister("softmax")
        assert "softmax" in nz.available()

    def test_unregister_says_why_it_refuses(self):
        with pytest.raises(ValueError, match="built-in normaliser, which cannot be unregistered"):
            nz.unregister("softmax")
        with pytest.raises(ValueError, match="added by register"):
            nz.unregister("no_such_normaliser")


class TestRegister:
    def test_a_name_is_registered_once(self, registered):
        with pytest.raises(ValueError, match="registered already"):
            nz.register(registered)

    @pytest.mark.parametrize(
        "kw, match",
        [
            (dict(name="not a name"), "name"),
            (dict(fn=3), "fn"),
            (dict(family="other"), "family"),
            (dict(sums_to_one=1), "sums_to_one"),
            (dict(display=""), "display"),
            (dict(jacobian="sparse"), "jacobian"),
        ],
    )
    def test_a_bad_entry_is_refused(self, kw, match):
        args = dict(name="x", fn=scaled_softmax, family="eq3", sums_to_one=True, display="x")
        with pytest.raises(ValueError, match=match):
            nz.Normalizer(**{**args, **kw})

    def test_register_takes_only_an_entry(self):
        with pytest.raises(ValueError, match="entry"):
            nz.register(scaled_softmax)

    def test_unregister_removes_it_everywhere(self):
        nz.register(nz.Normalizer("scaled_softmax", scaled_softmax, "eq3", True, "2x-softmax"))
        nz.unregister("scaled_softmax")
        assert "scaled_softmax" not in nz.available() and "scaled_softmax" not in nz.available(compared=True)
        with pytest.raises(ValueError, match="name"):
            nz.get("scaled_softmax")


class TestANewNormaliserReachesEveryConsumer:
    def test_get_and_the_selections(self, registered):
        x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
        torch.testing.assert_close(nz.get("scaled_softmax")(x), torch.softmax(2 * x, -1))
        assert "scaled_softmax" in nz.available(sums_to_one=True)
        assert nz.available(compared=True)[-1] == "scaled_softmax"
        assert "scaled_softmax" not in nz.available(jacobian="softmax")
        assert list(B.normalizer_settings(2))[-1] == "scaled_softmax"

    def test_the_chapters_remedies(self, registered):
        cmp = mh.compare_remedies([2, 5], 1.0, 1.0, seed=0)
        assert list(cmp.table("max", "bounded random").columns)[-1] == "scaled_softmax"

    def test_the_autograd_jacobian(self, registered):
        x = torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64)
        a = torch.softmax(2 * x, -1)
        expect = 2 * (torch.diag_embed(a) - a.unsqueeze(-1) * a.unsqueeze(-2))
        torch.testing.assert_close(jb.jacobian("scaled_softmax", x), expect)

    def test_compare_normalizers_and_the_report_tables(self, registered, tiny_gpt2):
        df = E.compare_normalizers(tiny_gpt2, TEXT, profile=TOY_PROFILE)
        mine = df[df["normalizer"] == "scaled_softmax"]
        assert set(mine["metric"]) == {"max_alpha", "L_max_alpha", "d_tilde", "e1", "sep_fraction", "g"}
        assert (mine["family"] == "scaled_softmax").all()
        summary = B.limits_summary(df)
        assert list(summary.index)[-1] == "scaled_softmax"
        row = next(ln for ln in R.beyond_limits_markdown(summary).splitlines() if ln.startswith("| scaled_softmax |"))
        assert f"{summary.loc['scaled_softmax', 'max_alpha_slope']:.2f}" in row

    def test_the_cli_help(self, registered):
        sub = next(a for a in build_parser()._actions if a.dest == "command").choices
        assert "2x-softmax" in sub["compare-normalizers"].format_help()
        assert "scaled_softmax" in sub["capture"].format_help()  # the --normalizer help, written when shown

    def test_nothing_is_left_after_unregister(self):
        assert "scaled_softmax" not in nz.available()
        assert (
            "2x-softmax"
            not in next(a for a in build_parser()._actions if a.dest == "command")
            .choices["compare-normalizers"]
            .format_help()
        )


# ------------------------------------------------------------------------------------------------------------------
# no hand-written copy of a list the registry gives
# ------------------------------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]


def _selections() -> dict[str, set[str]]:
    """Every list of names one field of the registry selects (``available(field=value)``), and all of them."""
    out = {"available()": set(nz.available())}
    for field in ("family", "sums_to_one", "compared", "jacobian"):
        for value in {getattr(nz.spec(n), field) for n in nz.available()}:
            out[f"available({field}={value!r})"] = set(nz.available(**{field: value}))
    return {k: v for k, v in out.items() if len(v) >= 2}


def _copies(source: str, where: str) -> list[str]:
    """The list, tuple, set and dict-key literals of ``source`` that spell out a registry selection by hand."""
    names, selections, found = set(nz.available()), _selections(), []
    for node in ast.walk(ast.parse(source)):
        elts = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if not isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)) or not elts or len(elts) < 2:
            continue
        if not all(isinstance(e, ast.Constant) and e.value in names for e in elts):
            continue
        written = {e.value for e in elts}
        found += [f"{where}:{node.lineno}: {sorted(written)} is {k}" for k, v in selections.items() if v == written]
    return found


def _sources() -> list[tuple[str, str]]:
    """(label, Python source): the package (but the registry itself), the tools, the benchmarks and every code cell
    of the chapters (IPython magics dropped)."""
    out = [
        (str(p.relative_to(ROOT)), p.read_text())
        for pattern in ("attn_lib/**/*.py", "tools/*.py", "benchmarks/*.py")
        for p in sorted(ROOT.glob(pattern))
        if p != ROOT / "attn_lib" / "normalizers.py"
    ]
    for md in sorted((ROOT / "book").glob("[0-9]*.md")):
        for i, cell in enumerate(jupytext.read(md).cells):
            if cell.cell_type == "code":
                code = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
                out.append((f"{md.relative_to(ROOT)} cell {i}", code))
    return out


class TestNoHandWrittenList:
    def test_no_source_spells_out_a_list_the_registry_gives(self):
        sources = _sources()
        assert any(label == "attn_lib/cli.py" for label, _ in sources)
        assert sum("book/05_" in label for label, _ in sources) > 10 and any("book/07_" in lb for lb, _ in sources)
        stale = [c for label, src in sources for c in _copies(src, label)]
        assert not stale, "read these from attn_lib.normalizers.available(...) instead:\n" + "\n".join(stale)

    def test_the_scan_finds_a_copied_list(self):
        compared = nz.available(compared=True)
        assert _copies(f"NAMES = {compared!r}", "x")  # chapter 5's list of remedies, written out
        assert _copies("def f(name):\n    return name in ('topk', 'softmax')", "x")  # the analytic Jacobians
        assert _copies(f"COLORS = {{{', '.join(f'{n!r}: 0' for n in compared)}}}", "x")

    def test_the_scan_leaves_claims_about_named_normalisers(self):
        assert not _copies("assert (ratio[['softmax1', 'sa_softmax']] <= 1).all()", "x")
        assert not _copies("SWAPS = [None, 'ssmax', 'entmax15', 'sparsemax']", "x")
        assert not _copies("x = ['softmax', 'not_a_normaliser']", "x")
