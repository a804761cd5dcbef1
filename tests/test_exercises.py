"""attn_lib.exercises: each check passes a correct answer (written here independently, with plain loops) and fails
each typical wrong answer with the hint that names the mistake; the indexes read the exercise and question formats.
"""

from __future__ import annotations

import math
import re
import textwrap

import numpy as np
import pytest
import torch

from attn_lib import exercises as E


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


# ---- chapter 1 ----------------------------------------------------------------------------------------------
class TestStableSoftmax:
    def test_reference_passes(self):
        E.check_stable_softmax(softmax)

    def test_torch_answer_passes(self):
        E.check_stable_softmax(lambda l, T: torch.softmax(torch.as_tensor(l) / T, dim=-1))

    def test_naive_exp_overflows(self):
        def naive(l, T):
            with np.errstate(all="ignore"):
                e = np.exp(l / T)
                return e / e.sum(-1, keepdims=True)

        _fails(E.check_stable_softmax, naive, "subtract each row's maximum")

    def test_wrong_axis(self):
        _fails(E.check_stable_softmax, lambda l, T: softmax(l.T, T).T, "wrong axis")

    def test_unnormalised(self):
        _fails(E.check_stable_softmax, lambda l, T: np.exp((l - l.max(-1, keepdims=True)) / T), "do not sum to one")

    def test_temperature_ignored(self):
        _fails(E.check_stable_softmax, lambda l, T: softmax(l), "ignores the temperature")

    def test_temperature_multiplied(self):
        _fails(E.check_stable_softmax, lambda l, T: softmax(l * T), "multiplied the logits by T")

    def test_returns_none(self):
        _fails(E.check_stable_softmax, lambda l, T: None, "returned None")

    def test_student_error_becomes_a_hint(self):
        def broken(l, T):
            raise NameError("name 'np' is not defined")

        _fails(E.check_stable_softmax, broken, "raised NameError: name 'np' is not defined")

    def test_not_callable_is_a_value_error(self):
        with pytest.raises(ValueError, match="fn must be"):
            E.check_stable_softmax(3)


class TestLemma1Bounds:
    def test_reference_passes(self):
        E.check_lemma1_bounds(lambda a, L, T: (math.exp(-2 * a / T) / L, math.exp(2 * a / T) / L))

    @pytest.mark.parametrize(
        ("wrong", "hint"),
        [
            (lambda a, L, T: (math.exp(-a / T) / L, math.exp(a / T) / L), "factor 2"),
            (lambda a, L, T: (math.exp(-2 * a * T) / L, math.exp(2 * a * T) / L), "multiplied by T"),
            (lambda a, L, T: (math.exp(-2 * a / T), math.exp(2 * a / T)), "forgot the 1/L"),
            (lambda a, L, T: (math.exp(2 * a / T) / L, math.exp(-2 * a / T) / L), "(upper, lower)"),
            (lambda a, L, T: 1 / L, "a pair (lower, upper)"),
        ],
    )
    def test_wrong_answers(self, wrong, hint):
        _fails(E.check_lemma1_bounds, wrong, hint)


# ---- chapter 2 ----------------------------------------------------------------------------------------------
def _first_n(alpha, X, N):
    s = sum(alpha[j] * X[j] for j in range(N))
    return sum(np.linalg.norm(alpha[i] * X[i] - s) for i in range(N, len(alpha)))


class TestDistance:
    def test_reference_passes(self):
        E.check_distance(d_tilde)

    @pytest.mark.parametrize(
        ("wrong", "hint"),
        [
            (
                lambda a, X, N: sum(
                    np.linalg.norm(a[i] * X[i] - sum(a[j] * X[j] for j in top(a, N))) for i in top(a, N)
                ),
                "NOT in I_N",
            ),
            (
                lambda a, X, N: sum(
                    np.linalg.norm(X[i] - sum(a[j] * X[j] for j in top(a, N)))
                    for i in range(len(a))
                    if i not in top(a, N)
                ),
                "forgot the weights",
            ),
            (_first_n, "N LARGEST weights"),
            (
                lambda a, X, N: np.linalg.norm(
                    sum(a[i] * X[i] for i in range(len(a)) if i not in top(a, N)) - sum(a[j] * X[j] for j in top(a, N))
                ),
                "sum of norms",
            ),
            (
                lambda a, X, N: sum(np.linalg.norm(a[i] * X[i] - a @ X) for i in range(len(a)) if i not in top(a, N)),
                "not over all tokens",
            ),
        ],
    )
    def test_wrong_answers(self, wrong, hint):
        _fails(E.check_distance, wrong, hint)


class TestDmax:
    def test_reference_passes(self):
        E.check_dmax(d_max)

    def test_only_the_d1_term(self):
        def wrong(a, X, N):
            I = top(a, N)
            out = [i for i in range(len(a)) if i not in I]
            return (1 - sum(a[j] for j in I)) * max(np.linalg.norm(X[i] - X[j]) for i in out for j in I)

        _fails(E.check_dmax, wrong, "kept only the d1 term")

    def test_d1_over_all_pairs(self):
        def wrong(a, X, N):
            L, I = len(a), top(a, N)
            abar = sum(a[j] for j in I)
            d1 = max(np.linalg.norm(X[i] - X[j]) for i in range(L) for j in range(L))
            return (1 - abar) * d1 + ((L - N) * abar - (1 - abar)) * max(np.linalg.norm(X[j]) for j in I)

        _fails(E.check_dmax, wrong, "OUTSIDE I_N")

    def test_norm_over_all_tokens(self):
        def wrong(a, X, N):
            L, I = len(a), top(a, N)
            out = [i for i in range(L) if i not in I]
            abar = sum(a[j] for j in I)
            d1 = max(np.linalg.norm(X[i] - X[j]) for i in out for j in I)
            return (1 - abar) * d1 + ((L - N) * abar - (1 - abar)) * np.linalg.norm(X, axis=1).max()

        _fails(E.check_dmax, wrong, "over j in I_N only")


# ---- chapter 3 ----------------------------------------------------------------------------------------------
def _ns_variant(weighted=True, strict=True, smallest=True):
    def f(alpha, X, N):
        I = top(alpha, N)
        s = sum(alpha[j] * X[j] for j in I)
        D = [np.linalg.norm((alpha[i] if weighted else 1.0) * X[i] - s) for i in range(len(alpha))]
        outside = [D[i] for i in range(len(alpha)) if i not in I]
        rho = min(outside) if smallest else max(outside)
        return sum(1 for i in I if (D[i] < rho if strict else D[i] <= rho))

    return f


class TestDistinguishableCount:
    def test_reference_passes(self):
        E.check_distinguishable_count(n_s)

    @pytest.mark.parametrize(
        ("kwargs", "hint"),
        [
            ({"strict": False}, "strict"),
            ({"weighted": False}, "forgot the weights"),
            ({"smallest": False}, "SMALLEST distance"),
        ],
    )
    def test_wrong_answers(self, kwargs, hint):
        _fails(E.check_distinguishable_count, _ns_variant(**kwargs), hint)


class TestTheorem2Xi:
    def test_reference_passes(self):
        E.check_theorem2_xi(xi)

    def test_beta_keeps_token_i(self):
        def wrong(alpha, N, M, delta):
            aI = alpha[top(alpha, N)]
            q = (aI**2).sum() - aI**2
            return np.sqrt(np.clip((M**2 - delta**2 / 2) * aI.sum() ** 2 + delta**2 / 2 * q, 0, None))

        _fails(E.check_theorem2_xi, wrong, "leaves token i out")

    def test_squared(self):
        _fails(E.check_theorem2_xi, lambda *args: xi(*args) ** 2, "xi_i^2")

    def test_wrong_order(self):
        def by_position(alpha, N, M, delta):
            return xi(alpha, N, M, delta)[np.argsort(top(alpha, N))]

        _fails(E.check_theorem2_xi, by_position, "top-N order")

    def test_wrong_length(self):
        _fails(E.check_theorem2_xi, lambda *args: xi(*args)[:-1], "one xi_i per selected token")


class TestMarkovLowerBound:
    def test_reference_passes(self):
        E.check_markov_lower_bound(markov_lower)

    def test_missing_n(self):
        _fails(E.check_markov_lower_bound, lambda a, N, M, d, r: 1 - xi(a, N, M, d).sum() / r, "by r N")

    def test_missing_one_minus(self):
        _fails(E.check_markov_lower_bound, lambda a, N, M, d, r: xi(a, N, M, d).sum() / (r * N), "'1 -'")


# ---- chapter 4 ----------------------------------------------------------------------------------------------
class TestSoftmaxJacobian:
    def test_reference_passes(self):
        E.check_softmax_jacobian(jac)

    def test_autograd_on_torch_passes(self):
        E.check_softmax_jacobian(
            lambda l, T: torch.autograd.functional.jacobian(lambda x: torch.softmax(x / T, -1), torch.as_tensor(l))
        )

    @pytest.mark.parametrize(
        ("wrong", "hint"),
        [
            (lambda l, T: jac(l, T) * T, "missing its 1/T factor"),
            (lambda l, T: jac(l, T) * T * T, "multiplied by T"),
            (lambda l, T: (np.diag(softmax(l)) - np.outer(softmax(l), softmax(l))) / T, "not softmax(l)"),
            (lambda l, T: np.diag(softmax(l, T)) / T, "missing the -alpha alpha^T term"),
            (lambda l, T: -np.outer(softmax(l, T), softmax(l, T)) / T, "missing the diag(alpha) term"),
            (lambda l, T: -jac(l, T), "sign is flipped"),
            (lambda l, T: jac(l, T)[:, :-1], "J[i, j] = d alpha_i / d l_j"),
        ],
    )
    def test_wrong_answers(self, wrong, hint):
        _fails(E.check_softmax_jacobian, wrong, hint)


class TestJacobianNormBound:
    def test_reference_passes(self):
        E.check_jacobian_norm_bound(lambda T: 1 / (2 * T))

    @pytest.mark.parametrize(
        ("wrong", "hint"),
        [
            (lambda T: min(1 / (4 * T), math.sqrt(2)), "Corollary 3 as stated"),
            (lambda T: 1 / (4 * T) + 0 * T, "bounds each entry"),
            (lambda T: T / 2, "shrinks as T grows"),
        ],
    )
    def test_wrong_answers(self, wrong, hint):
        _fails(E.check_jacobian_norm_bound, wrong, hint)


class TestSpectralNorm:
    def test_reference_passes(self):
        E.check_spectral_norm(lambda l, T: np.linalg.norm(jac(l.numpy(), T), 2))

    def test_frobenius(self):
        _fails(E.check_spectral_norm, lambda l, T: np.linalg.norm(jac(l.numpy(), T)), "Frobenius")

    def test_largest_entry(self):
        _fails(E.check_spectral_norm, lambda l, T: np.abs(jac(l.numpy(), T)).max(), "largest entry")


# ---- chapter 5 ----------------------------------------------------------------------------------------------
class TestSparsemax:
    def test_reference_passes(self):
        E.check_sparsemax(sparsemax)

    def test_unclipped(self):
        def wrong(l):
            res = np.empty_like(l)
            for b, row in enumerate(l):
                z = np.sort(row)[::-1]
                k = max(k for k in range(1, len(z) + 1) if 1 + k * z[k - 1] > z[:k].sum())
                res[b] = row - (z[:k].sum() - 1) / k
            return res

        _fails(E.check_sparsemax, wrong, "negative weights")

    def test_wrong_threshold(self):
        def wrong(l):
            return np.maximum(l - l.max(-1, keepdims=True) + 0.5, 0)

        _fails(E.check_sparsemax, wrong, "rows of your sparsemax do not sum to one")

    def test_softmax_instead(self):
        _fails(E.check_sparsemax, softmax, "that is softmax")

    def test_columns(self):
        _fails(E.check_sparsemax, lambda l: sparsemax(l.T).T, "ROW")


class TestCoverage:
    def test_reference_passes(self):
        E.check_coverage(lambda p, H: 1 - (1 - p) ** H)

    @pytest.mark.parametrize(
        ("wrong", "hint"),
        [
            (lambda p, H: p**H, "EVERY head"),
            (lambda p, H: (1 - p) ** H, "NO head"),
            (lambda p, H: 1 - p**H, "1 - p**H"),
            (lambda p, H: H * p, "union bound"),
        ],
    )
    def test_wrong_answers(self, wrong, hint):
        _fails(E.check_coverage, wrong, hint)


class TestHeadsForCoverage:
    def test_reference_passes(self):
        E.check_heads_for_coverage(heads)

    def test_rounded_down(self):
        _fails(E.check_heads_for_coverage, lambda p, c: math.floor(math.log(1 - c) / math.log(1 - p)), "rounded down")

    def test_not_rounded(self):
        _fails(E.check_heads_for_coverage, lambda p, c: math.log(1 - c) / math.log(1 - p), "rounded up")


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
            }
        ]

    def test_question_without_practises_line(self, tmp_path):
        (tmp_path / "ch01_x.md").write_text(ASSIGNMENT.replace("**Practises:**", "Practises"))
        with pytest.raises(ValueError, match="ch01_x.md, question q1: needs a"):
            E.assignment_index(tmp_path)

    def test_missing_folder(self, tmp_path):
        with pytest.raises(ValueError, match="assignments_dir must be an existing folder"):
            E.assignment_index(tmp_path / "nope")


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
    def test_right_answer_passes_at_other_seeds(self, check, right, wrong):
        for seed in (0, 1, 2):
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
