"""Display math that fits the book's content column (the chapters show equations through :class:`Math`).

The column is the one of :mod:`attn_lib.layout`; :func:`fit_math` breaks an equation that is estimated wider than
:data:`MATH_WIDTH_EM` into left-aligned lines.
"""

from __future__ import annotations

#: Widest display equation, in em of the math font (MathJax sets display math at about 20 px in the book, and an
#: output cell leaves about 620 px: 30 em; the estimate of :func:`math_width_em` is rough, hence the margin).
MATH_WIDTH_EM = 26.0

#: Separators between the statements of one display line (``a = 1,\quad b = 2``): a line break may replace them.
_SEPARATORS = (r",\qquad", r",\quad", r";\quad", r"\qquad", r",\ ")
#: Where one long statement may be broken, best first: before a relation, then before a top-level + or -.
_RELATIONS = ("=", r"\le", r"\ge", r"\leq", r"\geq", "<", ">", r"\approx", r"\Rightarrow", r"\xrightarrow", r"\in")
_OPERATORS = ("+", "-")
_SPACES = {r"\quad": 1.0, r"\qquad": 2.0, r"\,": 0.17, r"\;": 0.28, r"\:": 0.22, r"\ ": 0.3, r"\!": -0.17}
#: Commands that take no width of their own: delimiter sizes and styles, fonts, accents.
_ZERO = {
    *(r"\left", r"\right", r"\big", r"\Big", r"\bigg", r"\Bigg", r"\displaystyle", r"\textstyle", r"\limits"),
    *(r"\mathrm", r"\mathbf", r"\mathbb", r"\operatorname", r"\mathcal", r"\boldsymbol"),
    *(r"\tilde", r"\bar", r"\hat", r"\overline", r"\vec", r"\dot"),
}
#: Width in em of the commands wider or narrower than the 0.6 em of any other command.
_WIDE = {
    **dict.fromkeys([r"\sum", r"\prod", r"\le", r"\ge", r"\leq", r"\geq", r"\approx", r"\ne", r"\sim"], 1.1),
    **dict.fromkeys([r"\to", r"\Rightarrow", r"\mapsto", r"\lim"], 1.3),
    **dict.fromkeys([r"\infty", r"\times", r"\in"], 1.0),
    **dict.fromkeys([r"\langle", r"\rangle"], 0.4),
    r"\int": 0.7,
    r"\cdot": 0.8,
    r"\|": 0.5,
    r"\log": 1.5,
    r"\max": 1.7,
    r"\min": 1.6,
    r"\exp": 1.6,
    r"\sqrt": 0.9,
}


def _tokens(tex: str) -> list[str]:
    """LaTeX split into commands, single characters and ``{...}`` groups (balanced)."""
    out, i, n = [], 0, len(tex)
    while i < n:
        c = tex[i]
        if c == "\\":
            j = i + 1
            if j < n and tex[j].isalpha():
                while j < n and tex[j].isalpha():
                    j += 1
            else:
                j += 1
            out.append(tex[i:j])
            i = j
        elif c == "{":
            depth, j = 0, i
            while j < n:
                if tex[j] == "\\":
                    j += 2
                    continue
                depth += {"{": 1, "}": -1}.get(tex[j], 0)
                j += 1
                if depth == 0:
                    break
            out.append(tex[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return out


def _group(tok: str) -> str:
    if tok.startswith("{"):
        return tok[1:-1] if tok.endswith("}") and len(tok) > 1 else tok[1:]
    return tok


def math_width_em(tex: str) -> float:
    """A rough estimate of the width of ``tex`` typeset as display math, in em (fractions and matrices count their
    widest row, scripts 70 %, ``\\text`` 0.5 em a character)."""
    toks, w, i = _tokens(tex), 0.0, 0
    while i < len(toks):
        t = toks[i]
        if t in (r"\frac", r"\dfrac", r"\tfrac", r"\binom") and i + 2 < len(toks):
            w += (
                max(math_width_em(_group(toks[i + 1])), math_width_em(_group(toks[i + 2])))
                * (0.75 if t == r"\tfrac" else 1.0)
                + 0.3
            )
            i += 3
            continue
        if t in (r"\text", r"\textrm", r"\mathrm{\,}") and i + 1 < len(toks):
            w += 0.5 * len(_group(toks[i + 1]))
            i += 2
            continue
        if t in (r"\xrightarrow",) and i + 1 < len(toks):
            j, label = i + 1, 1.3
            while j < len(toks) and toks[j].startswith(("[", "{")):
                if toks[j] == "[":
                    k = j
                    while k < len(toks) and toks[k] != "]":
                        k += 1
                    label = max(label, 0.7 * math_width_em("".join(toks[j + 1 : k])) + 0.6)
                    j = k + 1
                else:
                    label = max(label, 0.7 * math_width_em(_group(toks[j])) + 0.6)
                    j += 1
            w += label
            i = j
            continue
        if t == r"\begin" and i + 1 < len(toks):
            env = _group(toks[i + 1])
            depth, j = 1, i + 2
            while j < len(toks):
                if toks[j] == r"\begin":
                    depth += 1
                elif toks[j] == r"\end":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            body = "".join(toks[i + 2 : j])
            rows = [[c for c, _ in _split_top(r, ("&",))] or [""] for r, _ in _split_top(body, ("\\\\",))] or [[""]]
            ncol = max(len(r) for r in rows)
            cols = [max(math_width_em(r[c]) if c < len(r) else 0.0 for r in rows) for c in range(ncol)]
            w += sum(cols) + 0.8 * (ncol - 1) + (0.0 if env in ("aligned", "gathered") else 0.5)
            i = j + 2
            continue
        if t in ("^", "_") and i + 1 < len(toks):
            w += 0.7 * math_width_em(_group(toks[i + 1]))
            i += 2
            continue
        if t.startswith("{"):
            w += math_width_em(_group(t))
        elif t in _SPACES:
            w += _SPACES[t]
        elif t in _ZERO or t in ("&",) or t.isspace():
            pass
        elif t in _WIDE:
            w += _WIDE[t]
        elif t.startswith("\\"):
            w += 0.6
        elif t in "=+-<>":
            w += 1.2
        elif t in ",;":
            w += 0.45
        elif t in "()[]|":
            w += 0.4
        else:
            w += 0.55
        i += 1
    return w


def _split_top(tex: str, seps: tuple[str, ...]) -> list[tuple[str, str]]:
    """``tex`` cut at every top-level occurrence of one of ``seps`` (outside groups, environments and
    ``\\left ... \\right``): ``[(piece, separator_before_it), ...]``."""
    toks = _tokens(tex)
    pieces, cur, before, depth, i = [], [], "", 0, 0
    while i < len(toks):
        t = toks[i]
        if t in (r"\left", r"\begin"):
            depth += 1
        elif t in (r"\right", r"\end"):
            depth -= 1
        if depth == 0 and i > 0 and cur:
            hit = None
            for sep in seps:
                st = _tokens(sep)
                if toks[i : i + len(st)] == st:
                    hit = (sep, len(st))
                    break
            if hit:
                pieces.append(("".join(cur), before))
                before, cur = hit[0], []
                i += hit[1]
                continue
        cur.append(t)
        i += 1
    pieces.append(("".join(cur), before))
    return [(p, b) for p, b in pieces if p.strip() or b]


def _break_statement(stmt: str, width: float) -> list[str]:
    """One statement broken before relations (then before + and -) into lines of at most ``width`` em where it
    can be; continuation lines start with the relation or operator."""
    if math_width_em(stmt) <= width:
        return [stmt]
    for seps in (_RELATIONS, _OPERATORS):
        pieces = _split_top(stmt, seps)
        if len(pieces) < 2:
            continue
        lines: list[str] = []
        for piece, sep in pieces:
            chunk = (sep + " " if sep else "") + piece
            if sep in _OPERATORS:
                chunk = "{}" + chunk
            # a short tail (``\ge 0)``) stays on its line rather than dangle on its own
            short_tail = seps is _RELATIONS and math_width_em(chunk) < 3.5
            if lines and (math_width_em(lines[-1] + chunk) <= width or short_tail):
                lines[-1] += chunk
            else:
                lines.append(chunk)
        if len(lines) > 1:
            return [line for part in lines for line in _break_statement(part, width)] if seps is _RELATIONS else lines
    return [stmt]


def fit_math(tex: str, width_em: float = MATH_WIDTH_EM) -> str:
    """Display math ``tex`` broken into left-aligned lines (``aligned``) when it is estimated wider than
    ``width_em``: first at the separators between statements (``,\\quad``), then before relations, then before a
    top-level ``+`` or ``-``; continuation lines are indented. Math that fits, or that already has line breaks, is
    returned as it is."""
    if not isinstance(tex, str):
        raise ValueError(f"tex must be a string (got {type(tex).__name__})")
    body = tex.strip()
    broken = any(rf"\begin{{{env}}}" in body for env in ("aligned", "gathered", "split", "array", "cases"))
    if math_width_em(body) <= width_em or broken or len(_split_top(body, ("\\\\",))) > 1:
        return tex
    statements = _split_top(body, _SEPARATORS)
    lines: list[str] = []
    for stmt, sep in statements:
        comma = "," if sep.startswith(",") else (";" if sep.startswith(";") else "")
        if lines and comma:
            lines[-1] = (lines[-1][0] + comma, lines[-1][1])
        # a continuation row is indented by \qquad (2 em): break to the narrower width
        for k, part in enumerate(_break_statement(stmt.strip(), width_em - 2.0)):
            lines.append((part, k > 0))
    # statements that fit together share a line again
    packed: list[tuple[str, bool]] = []
    for part, cont in lines:
        if packed and not cont and not packed[-1][1] and math_width_em(packed[-1][0] + r"\quad " + part) <= width_em:
            packed[-1] = (packed[-1][0] + r"\quad " + part, False)
        else:
            packed.append((part, cont))
    if len(packed) < 2:
        return tex
    rows = [("&\\qquad " if cont else "&") + part for part, cont in packed]
    return "\\begin{aligned}" + "\\\\\n".join(rows) + "\\end{aligned}"


try:  # the chapters display math through this class, so every display equation fits the column
    from IPython.display import Math as _IPythonMath
except ImportError:  # pragma: no cover - IPython comes with the book extra
    _IPythonMath = object


class Math(_IPythonMath):
    """:class:`IPython.display.Math` whose LaTeX is first passed through :func:`fit_math` (the chapters import
    this one, so a long SymPy expression is broken into lines instead of running out of the page)."""

    def __init__(self, data=None, url=None, filename=None, metadata=None, *, width_em: float = MATH_WIDTH_EM):
        if isinstance(data, str):
            data = fit_math(data, width_em)
        super().__init__(data=data, url=url, filename=filename, metadata=metadata)
