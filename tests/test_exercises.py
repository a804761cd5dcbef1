"""attn_lib.book.exercises: each check passes a correct answer (written here independently, with plain loops) and fails
each typical wrong answer with the hint that names the mistake; the indexes read the exercise and question formats.
"""

from __future__ import annotations

import math
import re
import signal
import sys
import textwrap
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

from attn_lib.book import exercises as E
from attn_lib.book.exercises import grading, harness
from attn_lib.book.exercises import multihead as ex_multihead
from attn_lib.book.exercises import vanishing as ex_vanishing


def _fails(check, fn, hint: str) -> None:
    with pytest.raises(AssertionError, match="HINT: ") as info:
        check(fn)
    assert hint in str(info.value), f"expected a hint containing {hint!r}, got {info.value}"


# ---- independent reference answers --------------------------------------------------------------------------
def softmax(l, T=1.0):
    l = np.asarray(l, dtype=np.float64)
    z = (l - l.max(-1, keepdims=True)) / T
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def top(alpha, N):
    return sorted(range(len(alpha)), key=lambda i: (-alpha[i], i))[:N]


def d_tilde(alpha, X, N):
    I = top(alpha, N)
    s = sum(alpha[j] * X[j] for j in I)
    return sum(np.linalg.norm(alpha[i] * X[i] - s) for i in range(len(alpha)) if i not in I)


def d_max(alpha, X, N):
    L, I = len(alpha), top(alpha, N)
    out = [i for i in range(L) if i not in I]
    abar = sum(alpha[j] for j in I)
    d1 = max(np.linalg.norm(X[i] - X[j]) for i in out for j in I)
    return (1 - abar) * d1 + ((L - N) * abar - (1 - abar)) * max(np.linalg.norm(X[j]) for j in I)


def n_s(alpha, X, N):
    I = top(alpha, N)
    s = sum(alpha[j] * X[j] for j in I)
    D = [np.linalg.norm(alpha[i] * X[i] - s) for i in range(len(alpha))]
    rho = min(D[i] for i in range(len(alpha)) if i not in I)
    return sum(1 for i in I if D[i] < rho)


def xi(alpha, N, M, delta):
    I = top(alpha, N)
    out = []
    for i in I:
        rest = [j for j in I if j != i]
        sq = M**2 * sum(alpha[j] ** 2 for j in rest)
        sq += (M**2 - delta**2 / 2) * sum(alpha[j] * alpha[k] for j in rest for k in rest if j != k)
        out.append(math.sqrt(max(sq, 0.0)))
    return np.array(out)


def markov_lower(alpha, N, M, delta, r):
    return 1 - xi(alpha, N, M, delta).sum() / (r * N)


def jac(l, T):
    a = softmax(l, T)
    L = len(a)
    return np.array([[a[i] * ((i == j) - a[j]) / T for j in range(L)] for i in range(L)])


def sparsemax(l):
    out = np.zeros_like(l)
    for b, row in enumerate(np.asarray(l, dtype=np.float64)):
        z = np.sort(row)[::-1]
        k = max(k for k in range(1, len(z) + 1) if 1 + k * z[k - 1] > z[:k].sum())
        tau = (z[:k].sum() - 1) / k
        out[b] = np.maximum(row - tau, 0)
    return out


def heads(p, c):
    H = 1
    while 1 - (1 - p) ** H < c - 1e-12:
        H += 1
    return H


def _first_n(alpha, X, N):
    s = sum(alpha[j] * X[j] for j in range(N))
    return sum(np.linalg.norm(alpha[i] * X[i] - s) for i in range(N, len(alpha)))


def _ns_variant(weighted=True, strict=True, smallest=True, select=top):
    def f(alpha, X, N):
        I = select(alpha, N)
        s = sum(alpha[j] * X[j] for j in I)
        D = [np.linalg.norm((alpha[i] if weighted else 1.0) * X[i] - s) for i in range(len(alpha))]
        outside = [D[i] for i in range(len(alpha)) if i not in I]
        rho = min(outside) if smallest else max(outside)
        return sum(1 for i in I if (D[i] < rho if strict else D[i] <= rho))

    return f


# ---- the typical mistakes: each a wrong answer written here independently, and the hint it must get ------------
def _stable_exp(l, T):
    return np.exp((l - l.max(-1, keepdims=True)) / T)


def _col_max_softmax(l, T):
    e = np.exp((l - l.max(axis=0)) / T)
    return e / e.sum(-1, keepdims=True)


def _whole_sum_softmax(l, T):
    e = _stable_exp(l, T)
    return e / e.sum()


def _lemma1(gap, scale):
    """Lemma 1's pair with the exponent ``gap(a, T)`` and the factor ``scale(L)``."""
    return lambda a, L, T: (math.exp(-gap(a, T)) * scale(L), math.exp(gap(a, T)) * scale(L))


def _smallest(alpha, N):
    return sorted(range(len(alpha)), key=lambda i: (alpha[i], i))[:N]


def _d_tilde_variant(select=top, weighted=True, squared=False, s_over_all=False, sum_of_norms=True, outside=True):
    def f(alpha, X, N):
        I = select(alpha, N)
        s = sum(alpha[j] * X[j] for j in (range(len(alpha)) if s_over_all else I))
        terms = [i for i in range(len(alpha)) if (i not in I) == outside]
        if not sum_of_norms:
            return np.linalg.norm(sum((alpha[i] * X[i] for i in terms), np.zeros(X.shape[1])) - s)
        vals = [np.linalg.norm((alpha[i] if weighted else 1.0) * X[i] - s) for i in terms]
        return sum(v**2 if squared else v for v in vals)

    return f


def _d_max_variant(select=top, count=0, d1_over="outside-inside", d1_largest=True, norm_over_all=False, swap=False):
    def f(alpha, X, N):
        L, I = len(alpha), select(alpha, N)
        out = [i for i in range(L) if i not in I]
        abar = sum(alpha[j] for j in I)
        pairs = (
            [(i, j) for i in out for j in I]
            if d1_over == "outside-inside"
            else [(i, j) for i in range(L) for j in range(L)]
        )
        dists = [np.linalg.norm(X[i] - X[j]) for i, j in pairs]
        d1 = max(dists) if d1_largest else min(dists)
        mx = max(np.linalg.norm(X[j]) for j in (range(L) if norm_over_all else I))
        inside, rest = (1 - abar, abar) if swap else (abar, 1 - abar)
        if d1_over == "only":
            return (1 - abar) * max(np.linalg.norm(X[i] - X[j]) for i in out for j in I)
        return rest * d1 + ((L - N + count) * inside - rest) * mx

    return f


def _xi_variant(beta_full=False, squared=False, sign=1.0, include_i=False, by_position=False):
    def f(alpha, N, M, delta):
        I = top(alpha, N)
        out = []
        for i in I:
            beta = sum(alpha[j] for j in I) - (0.0 if beta_full else alpha[i])
            rest = sum(alpha[j] ** 2 for j in I if include_i or j != i)
            sq = (M**2 - sign * delta**2 / 2) * beta**2 + sign * delta**2 / 2 * rest
            out.append(max(sq, 0.0) if squared else math.sqrt(max(sq, 0.0)))
        out = np.array(out)
        return out[np.argsort(I)] if by_position else out

    return f


def _jac_variant(scale=lambda T: 1 / T, alpha_T=True, diag=True, outer=True, sign=1.0):
    def f(l, T):
        a = softmax(l, T if alpha_T else 1.0)
        L = len(a)
        J = np.array(
            [[(a[i] * (i == j) if diag else 0.0) - (a[i] * a[j] if outer else 0.0) for j in range(L)] for i in range(L)]
        )
        return sign * J * scale(T)

    return f


def _sparsemax_unclipped(l):
    res = np.empty_like(l)
    for b, row in enumerate(l):
        z = np.sort(row)[::-1]
        k = max(k for k in range(1, len(z) + 1) if 1 + k * z[k - 1] > z[:k].sum())
        res[b] = row - (z[:k].sum() - 1) / k
    return res


#: check -> [(the opening words of the hint the check lists, a wrong answer that makes exactly that mistake)]
MISTAKES = {
    "check_stable_softmax": [
        ("your softmax ignores the temperature", lambda l, T: softmax(l)),
        ("you multiplied the logits by T", lambda l, T: softmax(l * T)),
        ("the temperature divides the logits, not the weights", lambda l, T: softmax(l) / T),
        ("you normalised over the wrong axis", lambda l, T: softmax(l.T, T).T),
        ("you subtracted each COLUMN's maximum", _col_max_softmax),
        ("you divided by the sum of the whole array", _whole_sum_softmax),
        ("you returned the exponentials themselves", lambda l, T: np.exp(l / T)),
        ("you subtracted the row maximum but did not normalise", _stable_exp),
    ],
    "check_lemma1_bounds": [
        (
            "you returned (upper, lower)",
            lambda a, L, T: _lemma1(lambda a, T: 2 * a / T, lambda L: 1 / L)(a, L, T)[::-1],
        ),
        ("the exponent misses its factor 2", _lemma1(lambda a, T: a / T, lambda L: 1 / L)),
        ("you multiplied by T", _lemma1(lambda a, T: 2 * a * T, lambda L: 1 / L)),
        ("you forgot the temperature", _lemma1(lambda a, T: 2 * a, lambda L: 1 / L)),
        ("you forgot the 1/L", _lemma1(lambda a, T: 2 * a / T, lambda L: 1.0)),
        ("you multiplied by L", _lemma1(lambda a, T: 2 * a / T, lambda L: L)),
    ],
    "check_distance": [
        ("you summed over the selected tokens", _d_tilde_variant(outside=False)),
        ("you forgot the weights", _d_tilde_variant(weighted=False)),
        (
            "I_N is the set of the N LARGEST weights, not the first N positions",
            _d_tilde_variant(select=lambda a, N: list(range(N))),
        ),
        ("I_N is the set of the N LARGEST weights; you took the N smallest", _d_tilde_variant(select=_smallest)),
        ("d~ is a sum of norms, not the norm of a sum", _d_tilde_variant(sum_of_norms=False)),
        ("d~ sums the norms ||alpha_i x_i - s||, not their squares", _d_tilde_variant(squared=True)),
        ("s sums only over the selected set I_N", _d_tilde_variant(s_over_all=True)),
    ],
    "check_dmax": [
        ("you kept only the d1 term", _d_max_variant(d1_over="only")),
        ("d1 is the largest distance between a token OUTSIDE I_N", _d_max_variant(d1_over="all")),
        ("d1 is the LARGEST distance", _d_max_variant(d1_largest=False)),
        ("the norm term takes the max of ||x_j|| over j in I_N only", _d_max_variant(norm_over_all=True)),
        ("L - N tokens lie outside I_N, not L - N - 1", _d_max_variant(count=-1)),
        ("I_N is the set of the N LARGEST weights; you took the N smallest", _d_max_variant(select=_smallest)),
        ("abar_N is the mass INSIDE I_N", _d_max_variant(swap=True)),
    ],
    "check_distinguishable_count": [
        ("at the radius r = rho_min itself the convention is strict", None),
        ("you forgot the weights", None),
        ("rho_min is the SMALLEST distance", None),
        ("I_N is the set of the N LARGEST weights; you took the N smallest", None),
    ],
    "check_theorem2_xi": [
        ("beta_i = abar_N - alpha_i leaves token i out", _xi_variant(beta_full=True)),
        ("xi_i is a square root", _xi_variant(squared=True)),
        ("the sign of delta^2/2 is wrong", _xi_variant(sign=-1.0)),
        ("the sum runs over j in I_N OTHER than i", _xi_variant(include_i=True)),
        ("xi must be in top-N order", _xi_variant(by_position=True)),
    ],
    "check_markov_lower_bound": [
        ("divide the sum of the xi_i by r N, not by r", lambda a, N, M, d, r: 1 - xi(a, N, M, d).sum() / r),
        ("divide the sum of the xi_i by r N, not by N", lambda a, N, M, d, r: 1 - xi(a, N, M, d).sum() / N),
        ("the bound is 1 - (sum xi_i) / (r N)", lambda a, N, M, d, r: xi(a, N, M, d).sum() / (r * N)),
        ("Markov's inequality divides by r", lambda a, N, M, d, r: 1 - xi(a, N, M, d).sum() * r / N),
    ],
    "check_softmax_jacobian": [
        ("your Jacobian is missing its 1/T factor", _jac_variant(scale=lambda T: 1.0)),
        ("you multiplied by T", _jac_variant(scale=lambda T: T)),
        ("alpha must be softmax(l / T), not softmax(l)", _jac_variant(alpha_T=False)),
        ("your Jacobian is missing the -alpha alpha^T term", _jac_variant(outer=False)),
        ("your Jacobian is missing the diag(alpha) term", _jac_variant(diag=False)),
        ("the sign is flipped", _jac_variant(sign=-1.0)),
    ],
    "check_jacobian_norm_bound": [
        ("that is Corollary 3 as stated", lambda T: min(1 / (4 * T), math.sqrt(2))),
        ("1/(4T) bounds each entry", lambda T: 1 / (4 * T)),
        ("sqrt(2)/(4T) bounds a row of J", lambda T: math.sqrt(2) / (4 * T)),
        ("1/T holds, but it is not the smallest bound", lambda T: 1 / T),
        ("the bound shrinks as T grows", lambda T: T / 2),
    ],
    "check_spectral_norm": [
        ("you returned the Frobenius norm", lambda l, T: np.linalg.norm(jac(l.numpy(), T))),
        ("you returned the largest entry", lambda l, T: np.abs(jac(l.numpy(), T)).max()),
        ("you returned the largest absolute row sum", lambda l, T: np.linalg.norm(jac(l.numpy(), T), 1)),
        ("the Jacobian is taken at softmax(l / T)", lambda l, T: np.linalg.norm(jac(l.numpy(), 1.0), 2)),
    ],
    "check_sparsemax": [
        ("you projected the columns", lambda l: sparsemax(l.T).T),
        ("that is softmax", softmax),
        ("you did not clip", _sparsemax_unclipped),
    ],
    "check_coverage": [
        ("p**H is the probability that EVERY head", lambda p, H: p**H),
        ("(1-p)**H is the probability that NO head", lambda p, H: (1 - p) ** H),
        ("1 - p**H is not it", lambda p, H: 1 - p**H),
        ("H p is the union bound", lambda p, H: H * p),
    ],
    "check_heads_for_coverage": [
        ("you rounded down", lambda p, c: math.floor(math.log(1 - c) / math.log(1 - p))),
        ("H = log(1-c)/log(1-p) must be rounded up", lambda p, c: math.log(1 - c) / math.log(1 - p)),
        ("floor(x) + 1 is one head too many", lambda p, c: math.floor(math.log(1 - c) / math.log(1 - p)) + 1),
    ],
}
MISTAKES["check_distinguishable_count"] = [
    (hint, _ns_variant(**kw))
    for (hint, _), kw in zip(
        MISTAKES["check_distinguishable_count"],
        [{"strict": False}, {"weighted": False}, {"smallest": False}, {"select": _smallest}],
    )
]

ROOT = Path(__file__).resolve().parents[1]


def _assignment_seeds() -> dict:
    """check -> the seeds its assignment tests use: the public default and each hidden seed."""
    seeds = {name: {E.SEED} for name in grading.CASES}
    for md in (ROOT / "assignments").glob("ch*.md"):
        for check, seed in re.findall(r'feedback\("(check_\w+)", "\w+"(?:, seed=(\d+))?\)', md.read_text()):
            seeds[check].add(int(seed) if seed else E.SEED)
    return {name: sorted(s) for name, s in seeds.items()}


SEEDS = _assignment_seeds()
MISTAKE_CASES = [(check, hint, wrong) for check, rows in MISTAKES.items() for hint, wrong in rows]


def test_every_check_is_used_by_an_assignment_with_a_hidden_seed():
    assert all(len(seeds) >= 2 for seeds in SEEDS.values()), SEEDS


def test_listed_mistakes_are_the_hints_of_the_cases():
    assert E.listed_mistakes("check_lemma1_bounds") == harness.hints(ex_vanishing._cases_lemma1_bounds(E.SEED))
    assert E.listed_mistakes(E.check_coverage)[0].startswith("p**H is the probability")
    for bad in ("check_nothing", print, 3):
        with pytest.raises(ValueError, match="check must be one of"):
            E.listed_mistakes(bad)


def test_every_listed_mistake_has_a_wrong_answer_here():
    """The table above names every mistake the checks list, each once (a new mistake needs its wrong answer)."""
    for check, rows in MISTAKES.items():
        listed = harness.hints(grading.CASES[check](E.SEED))
        named = [next(h for h in listed if h.startswith(prefix)) for prefix, _ in rows]
        assert sorted(named) == sorted(listed), check


@pytest.mark.parametrize("check", list(grading.CASES))
def test_no_two_mistakes_give_the_same_values(check):
    """At the public and the hidden seeds, and at a few others: each listed mistake differs from the right answer on
    some case, and any two mistakes differ on some case where both are judged."""
    for seed in [*SEEDS[check], 0, 1, 2]:
        cases = grading.CASES[check](seed)
        hints = harness.hints(cases)
        for hint in hints:
            assert any(
                c.mistakes.get(hint) is not None and not harness.close(np.asarray(c.mistakes[hint], float), c.expected)
                for c in cases
            ), f"{check} seed {seed}: {hint!r} gives the right answer on every case"
        for i, h1 in enumerate(hints):
            for h2 in hints[i + 1 :]:
                both = [
                    (c.mistakes[h1], c.mistakes[h2])
                    for c in cases
                    if c.mistakes.get(h1) is not None and c.mistakes.get(h2) is not None
                ]
                assert any(not harness.close(np.asarray(a, float), b) for a, b in both), (
                    f"{check} seed {seed}: {h1!r} and {h2!r} give the same values"
                )


@pytest.mark.parametrize(
    ("check", "prefix", "wrong"), MISTAKE_CASES, ids=[f"{c}-{h[:30]}" for c, h, _ in MISTAKE_CASES]
)
def test_each_mistake_gets_its_own_hint_with_the_students_value(check, prefix, wrong):
    listed = harness.hints(grading.CASES[check](E.SEED))
    (hint,) = [h for h in listed if h.startswith(prefix)]
    for seed in SEEDS[check]:
        with pytest.raises(AssertionError) as info:
            getattr(E, check)(wrong, seed=seed)
        message = str(info.value)
        assert message.startswith(f"HINT: {hint}. "), f"seed {seed}: expected the hint {hint!r}, got {message}"
        assert ": yours " in message and ", expected " in message, message


# ---- hints that are not a listed mistake, and what the student's value looks like ----------------------------
def test_hint_shows_the_students_value_next_to_the_expected_one():
    """d~ with the N smallest weights, at the first case (L = 12, N = 3): both numbers, as the check prints them."""
    rng = np.random.default_rng(E.SEED)
    alpha = softmax(1.5 * rng.standard_normal(12))
    X = rng.standard_normal((12, 5))
    wrong = _d_tilde_variant(select=_smallest)
    with pytest.raises(AssertionError) as info:
        E.check_distance(wrong)
    assert "At L = 12, N = 3 " in str(info.value)
    assert f"yours {wrong(alpha, X, 3):.6g}, expected {d_tilde(alpha, X, 3):.6g}." in str(info.value)


def test_array_hint_shows_the_entry_that_differs_most():
    with pytest.raises(AssertionError) as info:
        E.check_softmax_jacobian(_jac_variant(sign=-1.0))
    assert re.search(
        r"At T = 0\.5 for logits of shape \(6,\): entry \[\d, \d\] \(of shape \(6, 6\)\): yours \S+, expected \S+\.$",
        str(info.value),
    )


class TestStableSoftmax:
    def test_reference_passes(self):
        E.check_stable_softmax(softmax)

    def test_torch_answer_passes(self):
        E.check_stable_softmax(lambda l, T: torch.softmax(torch.as_tensor(l) / T, dim=-1))

    def test_naive_exp_overflows(self):
        def naive(l, T):
            e = np.exp(l / T)
            return e / e.sum(-1, keepdims=True)

        _fails(E.check_stable_softmax, naive, "subtract each row's maximum")

    def test_global_maximum_underflows_on_rows_far_apart(self):
        def global_max(l, T):
            e = np.exp((l - l.max()) / T)
            return e / e.sum(-1, keepdims=True)

        _fails(E.check_stable_softmax, global_max, "near +1000, -1000, 0, 500")

    def test_naive_whole_sum_is_told_rows_do_not_sum_to_one(self):
        _fails(E.check_stable_softmax, lambda l, T: np.exp(l / T) / np.exp(l / T).sum(), "do not sum to one")

    def test_returns_none(self):
        _fails(E.check_stable_softmax, lambda l, T: None, "returned None")

    def test_returns_ellipsis(self):
        _fails(E.check_stable_softmax, lambda l, T: ..., "replace the `...` by your code")

    def test_student_error_becomes_a_hint(self):
        def broken(l, T):
            raise NameError("name 'np' is not defined")

        _fails(E.check_stable_softmax, broken, "raised NameError: name 'np' is not defined")

    def test_not_callable_is_a_value_error(self):
        with pytest.raises(ValueError, match="fn must be"):
            E.check_stable_softmax(3)


class TestWhatTheStudentReturns:
    """Complex numbers, strings and objects are hints, never silently converted (issue 21)."""

    def test_complex_numpy_answer_is_rejected(self):
        _fails(E.check_stable_softmax, lambda l, T: softmax(l / T) + 5j, "returned complex numbers")

    def test_complex_with_zero_imaginary_part_is_rejected(self):
        _fails(E.check_stable_softmax, lambda l, T: softmax(l, T) + 0j, "returned complex numbers")

    def test_complex_torch_answer_is_rejected(self):
        _fails(E.check_stable_softmax, lambda l, T: torch.as_tensor(softmax(l, T)) * (1 + 0j), "returned complex")

    def test_complex_python_number_is_rejected(self):
        _fails(E.check_coverage, lambda p, H: complex(1 - (1 - p) ** H, 0), "returned complex numbers")

    def test_list_holding_a_complex_number_is_rejected(self):
        _fails(E.check_lemma1_bounds, lambda a, L, T: [0.1, 1j], "returned complex numbers")

    def test_string_is_rejected(self):
        _fails(E.check_coverage, lambda p, H: str(1 - (1 - p) ** H), "must return numbers")

    def test_object_is_rejected(self):
        _fails(E.check_coverage, lambda p, H: object(), "must return numbers")

    def test_shape_error_names_both_shapes(self):
        _fails(
            E.check_lemma1_bounds, lambda a, L, T: 1 / L, "returned shape () at a = 1.5, L = 10, T = 0.4, expected (2,)"
        )


class TestStudentCodeIsContained:
    """sys.exit, prints, warnings and endless loops of the student's function stay inside the check (issue 21)."""

    def test_sys_exit_becomes_a_hint(self):
        def leaves(l, T):
            sys.exit(3)

        _fails(E.check_stable_softmax, leaves, "called sys.exit(3)")

    def test_bare_exit_becomes_a_hint(self):
        def leaves(l, T):
            raise SystemExit

        _fails(E.check_stable_softmax, leaves, "called sys.exit(None)")

    def test_base_exception_becomes_a_hint(self):
        class Odd(BaseException):
            pass

        def raises(l, T):
            raise Odd("odd")

        _fails(E.check_stable_softmax, raises, "raised Odd: odd")

    def test_printing_and_warnings_are_swallowed(self, capsys):
        def chatty(l, T):
            print("debug", l.shape)
            warnings.warn("careful", stacklevel=1)
            np.exp(np.array([1000.0]))
            return softmax(l, T)

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            E.check_stable_softmax(chatty)
        assert capsys.readouterr() == ("", "")

    @pytest.mark.timeout(120, method="thread")
    def test_endless_loop_stops_at_the_time_limit(self, monkeypatch):
        monkeypatch.setattr(harness, "TIME_LIMIT_S", 0.5)

        def spins(l, T):
            while True:
                pass

        _fails(E.check_stable_softmax, spins, "did not return within 0.5 s at T = 0.5")

    @pytest.mark.timeout(120, method="thread")
    def test_endless_sleep_stops_at_the_time_limit(self, monkeypatch):
        monkeypatch.setattr(harness, "TIME_LIMIT_S", 0.5)
        _fails(E.check_coverage, lambda p, H: time.sleep(10**6), "did not return within 0.5 s")

    @pytest.mark.timeout(120, method="thread")
    def test_endless_loop_stops_outside_the_main_thread(self, monkeypatch):
        """Off the main thread no SIGALRM: the function runs in a worker thread, stopped when its time is up."""
        monkeypatch.setattr(harness, "TIME_LIMIT_S", 0.5)
        stopped = threading.Event()

        def spins(p, H):
            try:
                while True:
                    pass
            finally:
                stopped.set()

        with ThreadPoolExecutor(1) as pool, pytest.raises(AssertionError, match="did not return within 0.5 s"):
            pool.submit(E.check_coverage, spins).result()
        assert stopped.wait(60), "the worker thread still runs the student's loop"

    def test_the_timer_is_disarmed_and_the_handler_restored(self):
        before = signal.getsignal(signal.SIGALRM)
        E.check_coverage(lambda p, H: 1 - (1 - p) ** H)
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
        assert signal.getsignal(signal.SIGALRM) is before

    def test_keyboard_interrupt_is_not_swallowed(self):
        def interrupted(p, H):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            E.check_coverage(interrupted)


def right_coverage(p, H):
    return 1 - (1 - p) ** H


def wrong_coverage(p, H):
    return p**H


not_a_function = 3


class TestFeedback:
    """What the assignments' tests call: the hint printed, never raised (no traceback in Otter's output)."""

    def test_prints_nothing_for_a_right_answer(self, capsys):
        E.feedback("check_coverage", "right_coverage")
        assert capsys.readouterr().out == ""

    def test_prints_the_hint_for_a_wrong_answer(self, capsys):
        E.feedback(E.check_coverage, "wrong_coverage")
        out = capsys.readouterr().out
        assert out.startswith("HINT: p**H is the probability that EVERY head") and out.count("\n") == 1

    def test_takes_the_function_itself(self, capsys):
        E.feedback("check_coverage", wrong_coverage, seed=7)
        assert capsys.readouterr().out.startswith("HINT: p**H")

    def test_undefined_name(self, capsys):
        E.feedback("check_coverage", "coverage_never_defined")
        assert capsys.readouterr().out.startswith("HINT: coverage_never_defined is not defined")

    def test_name_that_is_not_a_function(self, capsys):
        E.feedback("check_coverage", "not_a_function")
        assert capsys.readouterr().out.startswith("HINT: not_a_function must be a function, but it is a int")

    def test_namespace(self, capsys):
        E.feedback("check_coverage", "cov", namespace={"cov": wrong_coverage})
        assert capsys.readouterr().out.startswith("HINT: p**H")

    def test_unknown_check_is_a_value_error(self):
        with pytest.raises(ValueError, match="check must be one of"):
            E.feedback("check_nothing", "right_coverage")
        with pytest.raises(ValueError, match="check must be one of"):
            E.feedback(print, "right_coverage")

    def test_bad_name_is_a_value_error(self):
        with pytest.raises(ValueError, match="name must be"):
            E.feedback("check_coverage", 3)

    def _kernel(self, monkeypatch, shell):
        import IPython
        import IPython.display

        shown = []
        monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
        monkeypatch.setattr(IPython.display, "publish_display_data", lambda data, **kw: shown.append(data))
        return shown

    def test_in_a_kernel_the_hint_is_also_shown_first_as_its_own_output(self, monkeypatch, capsys):
        """Otter's report under grader.check ends with what the test printed; the hint published as a display output
        comes above it (tests/test_assignments.py checks this in a real kernel)."""
        shown = self._kernel(monkeypatch, type("Shell", (), {"kernel": object()})())
        E.feedback("check_coverage", "wrong_coverage")
        printed = capsys.readouterr().out
        assert shown == [{"text/plain": printed.rstrip("\n")}] and printed.startswith("HINT: p**H")
        E.feedback("check_coverage", "right_coverage")
        assert len(shown) == 1 and capsys.readouterr().out == ""

    def test_outside_a_kernel_the_hint_is_only_printed(self, monkeypatch, capsys):
        for shell in (None, type("TerminalShell", (), {})()):
            shown = self._kernel(monkeypatch, shell)
            E.feedback("check_coverage", "wrong_coverage")
            assert shown == [] and capsys.readouterr().out.startswith("HINT: p**H")


class TestOtherHints:
    """Hints that come from a property of the answer, not from a listed mistake."""

    def test_xi_of_the_wrong_length(self):
        _fails(E.check_theorem2_xi, lambda *args: xi(*args)[:-1], "one xi_i per selected token")

    def test_jacobian_of_the_wrong_shape(self):
        _fails(E.check_softmax_jacobian, lambda l, T: jac(l, T)[:, :-1], "J[i, j] = d alpha_i / d l_j")

    def test_autograd_jacobian_on_torch_passes(self):
        E.check_softmax_jacobian(
            lambda l, T: torch.autograd.functional.jacobian(lambda x: torch.softmax(x / T, -1), torch.as_tensor(l))
        )

    def test_sparsemax_with_a_wrong_threshold(self):
        _fails(E.check_sparsemax, lambda l: np.maximum(l - l.max(-1, keepdims=True) + 0.5, 0), "do not sum to one")

    def test_sparsemax_negative_but_not_the_unclipped_answer(self):
        _fails(E.check_sparsemax, lambda l: _sparsemax_unclipped(l) * 1.01, "negative weights")

    def test_distance_at_n_equal_l(self):
        _fails(
            E.check_distance, lambda a, X, N: d_tilde(a, X, N) if N < len(a) else 1.0, "with N = L nothing is left out"
        )

    def test_two_mistakes_at_once_get_the_generic_hint_with_the_values(self):
        _fails(
            E.check_coverage,
            lambda p, H: 2 * p**H,
            "expected 1 - (1-p)^H. At p = 0.8, H = 3: yours 1.024, expected 0.992.",
        )

    def test_answer_right_on_the_public_cases_only_fails_at_a_hidden_seed(self):
        public = {case.args: case.expected for case in ex_multihead._cases_coverage(E.SEED)}
        E.check_coverage(lambda p, H: public.get((p, H), 0.5))
        with pytest.raises(AssertionError, match="HINT: "):
            E.check_coverage(lambda p, H: public.get((p, H), 0.5), seed=SEEDS["check_coverage"][0])


# ---- exercise_index -----------------------------------------------------------------------------------------
FIXTURE = textwrap.dedent(
    """\
    # Chapter

    ## Exercises

    ```{exercise} The logit gap (derivation · easy)
    :label: ex-01-logit-gap
    Practises {prf:ref}`lem-vanishing` and {prf:ref}`Corollary 1 <cor-softmax-vanishing>`.
    Show that ...
    ```
    ```{solution-start} ex-01-logit-gap
    :label: sol-01-logit-gap
    :class: dropdown
    ```
    Text with {prf:ref}`thm-distance`, which is not part of the exercise.
    ```{solution-end}
    ```

    ````{exercise} Measure a head (measurement · hard)
    :label: ex-01-measure-head
    Practises {prf:ref}`lem-vanishing` twice: {prf:ref}`lem-vanishing`.
    ```python
    x = 1
    ```
    ````
    """
)


class TestExerciseIndex:
    def _book(self, tmp_path, text=FIXTURE, name="01_topic.md"):
        (tmp_path / name).write_text(text, encoding="utf-8")
        (tmp_path / "intro.md").write_text("```{exercise} Not a chapter (derivation · easy)\n```\n")
        return tmp_path

    def test_reads_each_exercise(self, tmp_path):
        rows = E.exercise_index(self._book(tmp_path))
        assert [r["label"] for r in rows] == ["ex-01-logit-gap", "ex-01-measure-head"]
        assert rows[0] == {
            "chapter": "01_topic",
            "label": "ex-01-logit-gap",
            "title": "The logit gap",
            "kind": "derivation",
            "difficulty": "easy",
            "results": ["lem-vanishing", "cor-softmax-vanishing"],
        }

    def test_results_are_deduplicated_and_exclude_the_solution(self, tmp_path):
        rows = E.exercise_index(self._book(tmp_path))
        assert rows[1]["results"] == ["lem-vanishing"]
        assert all("thm-distance" not in r["results"] for r in rows)

    @pytest.mark.parametrize(
        ("old", "new", "match"),
        [
            ("(derivation · easy)", "(derivation, easy)", "must end in"),
            ("(derivation · easy)", "(proof · easy)", "kind must be one of"),
            ("(derivation · easy)", "(derivation · trivial)", "difficulty must be one of"),
            (":label: ex-01-logit-gap\n", "", "needs a ':label: ex-NN-slug'"),
            (":label: ex-01-logit-gap", ":label: ex-02-logit-gap", "chapter number 01"),
        ],
    )
    def test_format_errors_name_file_and_exercise(self, tmp_path, old, new, match):
        with pytest.raises(ValueError, match=match) as info:
            E.exercise_index(self._book(tmp_path, FIXTURE.replace(old, new, 1)))
        assert "01_topic.md" in str(info.value)

    def test_missing_folder(self, tmp_path):
        with pytest.raises(ValueError, match="book_dir must be an existing folder"):
            E.exercise_index(tmp_path / "nope")

    def test_chapter_that_is_not_utf8(self, tmp_path):
        (tmp_path / "01_topic.md").write_bytes(FIXTURE.encode("utf-8") + "caf\u00e9".encode("latin-1"))
        with pytest.raises(ValueError, match=r"book_dir: 01_topic.md is not UTF-8 text \(byte 0xe9 at offset \d+\)"):
            E.exercise_index(tmp_path)


ASSIGNMENT = textwrap.dedent(
    """\
    ```{raw-cell}
    # BEGIN QUESTION
    name: q1
    points: 2
    ```

    **Question 1.** Do it.

    **Practises:** Lemma 1 (`lem-vanishing`), Corollary 1 (`cor-softmax-vanishing`).

    ```{raw-cell}
    # END QUESTION
    ```
    """
)


class TestAssignmentIndex:
    def test_reads_each_question(self, tmp_path):
        (tmp_path / "ch01_x.md").write_text(ASSIGNMENT)
        assert E.assignment_index(tmp_path) == [
            {
                "assignment": "ch01_x",
                "question": "q1",
                "points": 2,
                "results": ["lem-vanishing", "cor-softmax-vanishing"],
                "checks": [],
            }
        ]

    def test_reads_the_checks_each_question_calls(self, tmp_path):
        tests = '```{code-cell}\nfrom attn_lib.book.exercises import feedback\nfeedback("check_coverage", "coverage")\n```\n'
        tests += "```{code-cell}\n# HIDDEN\nfeedback('check_coverage', 'coverage', seed=3)\nfeedback(\"check_sparsemax\", \"s\")\n```\n"
        (tmp_path / "ch01_x.md").write_text(
            ASSIGNMENT.replace("```{raw-cell}\n# END QUESTION", tests + "```{raw-cell}\n# END QUESTION")
        )
        assert E.assignment_index(tmp_path)[0]["checks"] == ["check_coverage", "check_sparsemax"]

    def test_every_question_of_the_assignments_calls_one_check(self):
        rows = E.assignment_index(ROOT / "assignments")
        assert rows and all(len(r["checks"]) == 1 for r in rows), rows
        assert sorted(c for r in rows for c in r["checks"]) == sorted(grading.CASES)

    def test_question_without_practises_line(self, tmp_path):
        (tmp_path / "ch01_x.md").write_text(ASSIGNMENT.replace("**Practises:**", "Practises"))
        with pytest.raises(ValueError, match="ch01_x.md, question q1: needs a"):
            E.assignment_index(tmp_path)

    def test_missing_folder(self, tmp_path):
        with pytest.raises(ValueError, match="assignments_dir must be an existing folder"):
            E.assignment_index(tmp_path / "nope")

    def test_assignment_that_is_not_utf8(self, tmp_path):
        (tmp_path / "ch01_x.md").write_bytes(b"\xff" + ASSIGNMENT.encode())
        with pytest.raises(ValueError, match=r"assignments_dir: ch01_x.md is not UTF-8 text \(byte 0xff at offset 0\)"):
            E.assignment_index(tmp_path)


# ---- every check: other seeds (the hidden tests), bad seeds -------------------------------------------------
REFERENCES = [
    (E.check_stable_softmax, softmax, lambda l, T: softmax(l)),
    (
        E.check_lemma1_bounds,
        lambda a, L, T: (math.exp(-2 * a / T) / L, math.exp(2 * a / T) / L),
        lambda a, L, T: (0, 1),
    ),
    (E.check_distance, d_tilde, _first_n),
    (E.check_dmax, d_max, lambda a, X, N: d_max(a, X, N) * 1.01),
    (E.check_distinguishable_count, n_s, _ns_variant(strict=False)),
    (E.check_theorem2_xi, xi, lambda *args: xi(*args) ** 2),
    (E.check_markov_lower_bound, markov_lower, lambda a, N, M, d, r: 1 - xi(a, N, M, d).sum() / r),
    (E.check_softmax_jacobian, jac, lambda l, T: jac(l, T) * T),
    (E.check_jacobian_norm_bound, lambda T: 1 / (2 * T), lambda T: 1 / (4 * T)),
    (E.check_spectral_norm, lambda l, T: np.linalg.norm(jac(l.numpy(), T), 2), lambda l, T: 0.5 / T),
    (E.check_sparsemax, sparsemax, softmax),
    (E.check_coverage, lambda p, H: 1 - (1 - p) ** H, lambda p, H: H * p),
    (E.check_heads_for_coverage, heads, lambda p, c: heads(p, c) + 1),
]
IDS = [c.__name__ for c, _, _ in REFERENCES]


@pytest.mark.parametrize(("check", "right", "wrong"), REFERENCES, ids=IDS)
class TestEveryCheck:
    def test_right_answer_passes_at_every_assignment_seed_and_others(self, check, right, wrong):
        for seed in (*SEEDS[check.__name__], 0, 1, 2):
            check(right, seed=seed)

    def test_wrong_answer_fails_at_another_seed(self, check, right, wrong):
        with pytest.raises(AssertionError, match="HINT: "):
            check(wrong, seed=1)

    def test_bad_seed_is_a_value_error(self, check, right, wrong):
        with pytest.raises(ValueError, match="seed"):
            check(right, seed=-1)


def test_every_public_check_is_tested():
    names = {n for n in E.__all__ if n.startswith("check_")}
    assert names == set(IDS)


def test_coverage_joins_exercises_and_questions(tmp_path):
    book, assignments = tmp_path / "book", tmp_path / "assignments"
    book.mkdir()
    assignments.mkdir()
    (book / "01_topic.md").write_text(FIXTURE)
    (assignments / "ch01_x.md").write_text(ASSIGNMENT)
    assert E.coverage(book, assignments) == [
        {"result": "lem-vanishing", "exercises": ["ex-01-logit-gap", "ex-01-measure-head"], "questions": ["ch01_x q1"]},
        {"result": "cor-softmax-vanishing", "exercises": ["ex-01-logit-gap"], "questions": ["ch01_x q1"]},
    ]


def test_every_assignment_question_names_a_result_of_the_book():
    """The labels in the assignments' **Practises:** lines exist in the chapters (so the instructor page links work)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    labels = set()
    for md in (root / "book").glob("*.md"):
        labels |= set(re.findall(r"^:label:\s*(\S+)", md.read_text(encoding="utf-8"), re.M))
    rows = E.assignment_index(root / "assignments")
    assert rows
    missing = {r for q in rows for r in q["results"] if r not in labels}
    assert not missing, f"labels named by the assignments but absent from the book: {missing}"


# ---- the transformations of the right answer: tried after the listed mistakes, before the generic hint ---------
def _d_tilde_wrong_axis(alpha, X, N):
    """d~ with each norm taken over the tokens (axis=0) and the norms of the coordinates summed."""
    I = top(alpha, N)
    s = sum(alpha[j] * X[j] for j in I)
    rows = np.array([alpha[i] * X[i] - s for i in range(len(alpha)) if i not in I]).reshape(-1, X.shape[1])
    return np.linalg.norm(rows, axis=0).sum()


def _d_max_wrong_axis(which):
    """d_max with the norms of the max term (``"norm"``) or of d1 (``"d1"``) taken over the tokens."""

    def f(alpha, X, N):
        L, I = len(alpha), top(alpha, N)
        out = [i for i in range(L) if i not in I]
        abar = sum(alpha[j] for j in I)
        if which == "d1":  # ||x_i - x_j|| over the selected tokens j, for each i and coordinate
            d1 = max(np.linalg.norm(np.array([X[i] - X[j] for j in I]), axis=0).max() for i in out)
        else:
            d1 = max(np.linalg.norm(X[i] - X[j]) for i in out for j in I)
        mx = np.linalg.norm(X[I], axis=0).max() if which == "norm" else max(np.linalg.norm(X[j]) for j in I)
        return (1 - abar) * d1 + ((L - N) * abar - (1 - abar)) * mx

    return f


RIGHT = {check.__name__: right for check, right, _ in REFERENCES}
#: check -> the generic transformations (harness.TRANSFORMS) it offers: every one that fits its answers' shape, less
#: those that give the right answer or a listed mistake's values (the Jacobian is symmetric and its sign flip is
#: listed; the norm bound's 1/T and 1/(4T) are listed; Lemma 1's swapped pair is the listed (upper, lower))
GENERIC = {name: ("twice", "half", "sign") for name in RIGHT}
GENERIC["check_theorem2_xi"] = ("twice", "half", "sign", "reversed")
GENERIC["check_softmax_jacobian"] = ("twice", "half")
GENERIC["check_jacobian_norm_bound"] = ("sign",)
#: how each generic transformation turns the right answer into the wrong one, written here independently
SLIPS = {
    "twice": lambda v: 2 * np.asarray(v, dtype=float),
    "half": lambda v: np.asarray(v, dtype=float) / 2,
    "sign": lambda v: -np.asarray(v, dtype=float),
    "reversed": lambda v: np.asarray(v, dtype=float)[::-1],
}
#: check -> [(the opening words of a case's own transformation's hint, a wrong answer that makes that slip)]
OWN = {
    "check_distance": [("a norm along the wrong axis: ||alpha_i x_i - s||", _d_tilde_wrong_axis)],
    "check_dmax": [
        ("a norm along the wrong axis: ||x_j||", _d_max_wrong_axis("norm")),
        ("a norm along the wrong axis: d1", _d_max_wrong_axis("d1")),
    ],
    "check_softmax_jacobian": [("you swapped T and 1/T", lambda l, T: jac(l, 1 / T))],
    "check_spectral_norm": [
        ("you swapped T and 1/T", lambda l, T: np.linalg.norm(jac(l.numpy(), 1 / T), 2)),
    ],
}


def _slipped(right, slip):
    return lambda *args: slip(right(*args))


TRANSFORM_CASES = [
    (check, harness.TRANSFORMS[name].hint, _slipped(RIGHT[check], SLIPS[name]))
    for check, names in GENERIC.items()
    for name in names
] + [(check, prefix, wrong) for check, rows in OWN.items() for prefix, wrong in rows]


def test_each_check_offers_the_transformations_listed_here():
    for check in grading.CASES:
        for seed in SEEDS[check]:
            offered = [h for h, _ in harness.transformations(grading.CASES[check](seed))]
            own = [prefix for prefix, _ in OWN.get(check, [])]
            assert len(offered) == len(own) + len(GENERIC[check]), (check, seed, offered)
            assert all(h.startswith(p) for h, p in zip(offered, own)), (check, seed, offered)
            assert offered[len(own) :] == [harness.TRANSFORMS[n].hint for n in GENERIC[check]], (check, seed)


@pytest.mark.parametrize("check", list(grading.CASES))
def test_no_transformation_gives_the_values_of_the_answer_a_mistake_or_another_one(check):
    """At the public and the hidden seeds, and at a few others: each transformation a check offers differs from the
    right answer on some case, from each listed mistake and from each other transformation on some case where both
    are judged (else its hint could never be the one that names the slip)."""

    def differ(a, b):
        both = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
        return any(not harness.close(np.asarray(x, float), y) for x, y in both)

    for seed in [*SEEDS[check], 0, 1, 2]:
        cases = grading.CASES[check](seed)
        listed = [(h, [c.mistakes.get(h) for c in cases]) for h in harness.hints(cases)]
        offered = harness.transformations(cases)
        for i, (hint, values) in enumerate(offered):
            assert differ(values, [c.expected for c in cases]), f"{check} seed {seed}: {hint!r} is the right answer"
            for other, other_values in listed + offered[:i]:
                assert differ(values, other_values), f"{check} seed {seed}: {hint!r} gives the values of {other!r}"


@pytest.mark.parametrize("check", list(grading.CASES))
def test_each_skipped_transformation_gives_the_answer_or_a_listed_mistake(check):
    """A case skips a generic transformation only where it would never be the hint: on every case it fits it gives
    the right answer or the values of one listed mistake (so skipping it hides no slip)."""
    for seed in SEEDS[check]:
        cases = grading.CASES[check](seed)
        for name in set().union(*(c.skip for c in cases)):
            t = harness.TRANSFORMS[name]
            values = [t.apply(np.asarray(c.expected, float)) if t.fits(tuple(c.shape)) else None for c in cases]
            rows = [[c.expected for c in cases]] + [[c.mistakes.get(h) for c in cases] for h in harness.hints(cases)]
            assert any(
                all(harness.close(v, r) for v, r in zip(values, row) if v is not None and r is not None) for row in rows
            ), f"{check} seed {seed}: {name} is skipped but names a slip of its own"


@pytest.mark.parametrize(
    ("check", "hint", "wrong"), TRANSFORM_CASES, ids=[f"{c}-{h[:30]}" for c, h, _ in TRANSFORM_CASES]
)
def test_each_transformation_gets_its_own_hint_with_the_students_value(check, hint, wrong):
    for seed in SEEDS[check]:
        with pytest.raises(AssertionError) as info:
            getattr(E, check)(wrong, seed=seed)
        message = str(info.value)
        assert message.startswith(f"HINT: {hint}"), f"seed {seed}: expected the hint {hint!r}, got {message}"
        assert ": yours " in message and ", expected " in message, message


def test_a_flipped_exponent_sign_in_lemma1_is_named_with_the_swapped_pair():
    """exp(+2a/T)/L and exp(-2a/T)/L are the pair swapped: one hint names both readings."""
    flipped = _lemma1(lambda a, T: -2 * a / T, lambda L: 1 / L)
    _fails(E.check_lemma1_bounds, flipped, "either the two are swapped or the exponent's sign is flipped")


def _synthetic(expected, **kw):
    shape = np.shape(expected)
    return harness.Case((), np.asarray(expected, float), {}, "at x", shape, "it", "does not match", **kw)


@pytest.mark.parametrize(
    ("name", "expected", "got"),
    [
        ("transpose", [[1.0, 2.0], [3.0, 4.0]], [[1.0, 3.0], [2.0, 4.0]]),
        ("swapped", [1.0, 2.0], [2.0, 1.0]),
        ("reversed", [3.0, 2.0, 1.0], [1.0, 2.0, 3.0]),
        ("twice", [[1.0, 2.0], [3.0, 4.0]], [[2.0, 4.0], [6.0, 8.0]]),
    ],
)
def test_generic_transformations_on_a_case_of_their_shape(name, expected, got):
    """Every entry of harness.TRANSFORMS, the ones no check offers today (transpose, swapped) included."""
    with pytest.raises(AssertionError, match=re.escape(f"HINT: {harness.TRANSFORMS[name].hint}. At x: yours")):
        harness.run(lambda: got, [_synthetic(expected)])


def test_a_skipped_or_unfitting_transformation_is_not_offered():
    square = [[1.0, 2.0], [2.0, 5.0]]
    names = {h for h, _ in harness.transformations([_synthetic(square)])}
    assert harness.TRANSFORMS["transpose"].hint in names and harness.TRANSFORMS["swapped"].hint not in names
    names = {h for h, _ in harness.transformations([_synthetic(square, skip=frozenset({"transpose"}))])}
    assert harness.TRANSFORMS["transpose"].hint not in names
    with pytest.raises(AssertionError, match="HINT: does not match"):  # a symmetric matrix: its transpose is right
        harness.run(lambda: [[1.0, 2.0], [2.0, 6.0]], [_synthetic(square, skip=frozenset({"transpose"}))])


def test_a_skip_naming_no_transformation_is_a_value_error():
    with pytest.raises(ValueError, match=r"skip must name transformations of TRANSFORMS .*\['transposed'\]"):
        harness.transformations([_synthetic([1.0, 2.0], skip=frozenset({"transposed"}))])


def test_a_listed_mistake_comes_before_a_transformation_and_a_case_own_one_before_a_generic():
    own = {"a slip of this case": np.array([2.0, 4.0])}
    case = _synthetic([1.0, 2.0], transforms=own)
    with pytest.raises(AssertionError, match="HINT: a slip of this case"):
        harness.run(lambda: [2.0, 4.0], [case])
    listed = case._replace(mistakes={"a listed mistake": np.array([2.0, 4.0])})
    with pytest.raises(AssertionError, match="HINT: a listed mistake"):
        harness.run(lambda: [2.0, 4.0], [listed])


@pytest.mark.parametrize("offset", [4e-7, -1e-9])
def test_a_count_must_be_a_whole_number_not_one_within_the_tolerance(offset):
    """check_heads_for_coverage's answer is a number of heads: H + 4e-7 (inside the float tolerance) is wrong."""
    from attn_lib import theory

    with pytest.raises(AssertionError, match="HINT"):
        E.check_heads_for_coverage(lambda p, c: theory.heads_for_coverage(p, c) + offset)
    E.check_heads_for_coverage(lambda p, c: float(theory.heads_for_coverage(p, c)))  # 3.0 is 3
