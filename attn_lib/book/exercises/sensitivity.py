"""The checks of chapter 4, gradient sensitivity (see :mod:`attn_lib.book.exercises`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attn_lib import theory

from . import harness

__all__ = ["check_softmax_jacobian", "check_jacobian_norm_bound", "check_spectral_norm"]


def _cases_softmax_jacobian(seed: Any) -> list[harness.Case]:
    l = 2.0 * harness.rng(seed).standard_normal(6)
    cases = []
    for T in (0.5, 2.0):
        a = theory.softmax_np(l, T)
        a1 = theory.softmax_np(l)
        core = np.diag(a) - np.outer(a, a)
        at_inverse_T = theory.softmax_jacobian_np(l, 1 / T)
        cases.append(
            harness.Case(
                (l.copy(), T),
                core / T,
                {
                    "your Jacobian is missing its 1/T factor": core,
                    "you multiplied by T; the Jacobian of softmax(l / T) carries a factor 1/T": core * T,
                    "alpha must be softmax(l / T), not softmax(l)": (np.diag(a1) - np.outer(a1, a1)) / T,
                    "your Jacobian is missing the -alpha alpha^T term": np.diag(a) / T,
                    "your Jacobian is missing the diag(alpha) term": -np.outer(a, a) / T,
                    "the sign is flipped: J = (diag(alpha) - alpha alpha^T) / T": -core / T,
                },
                f"at T = {T} for logits of shape {l.shape}",
                (l.size, l.size),
                "J[i, j] = d alpha_i / d l_j",
                "your Jacobian does not match (diag(alpha) - alpha alpha^T) / T",
                transforms={
                    "you swapped T and 1/T: alpha = softmax(l / T) and the factor is 1/T, so J = "
                    "(diag(alpha) - alpha alpha^T) / T": at_inverse_T
                },
                # J is symmetric (its transpose is itself) and its sign flip is a listed mistake
                skip=frozenset({"transpose", "sign"}),
            )
        )
    return cases


check_softmax_jacobian = harness.make_check(
    "check_softmax_jacobian",
    _cases_softmax_jacobian,
    summary=r"""Check ``fn(logits, T)``: the Jacobian of ``softmax(logits / T)``, :math:`J=(\mathrm{diag}\,\alpha-\alpha\alpha^\top)/T`.""",
    fn_doc=r"""``fn(logits, T) -> J`` with ``logits (L,)`` float64 and ``T > 0``; ``J`` has shape ``(L, L)`` with
        ``J[i, j] = d alpha_i / d l_j`` (numpy array or torch tensor, on any device).""",
)


def _cases_jacobian_norm_bound(seed: Any) -> list[harness.Case]:
    rng = harness.rng(seed)
    cases = []
    for T in (0.01, 0.3, 1.5, 4.0, *rng.uniform(0.05, 5.0, size=2)):
        T = float(T)
        cases.append(
            harness.Case(
                (T,),
                theory.corollary3_corrected(T)["spectral"],
                {
                    "that is Corollary 3 as stated, min(1/(4T), sqrt 2); the two-way tie l = (0, 0) has ||J||_2 = "
                    "1/(2T), above it": theory.corollary3_paper(T),
                    "1/(4T) bounds each entry |J_ij|, not the spectral norm": 1 / (4 * T),
                    "sqrt(2)/(4T) bounds a row of J, not the spectral norm": math.sqrt(2) / (4 * T),
                    "1/T holds, but it is not the smallest bound: the tie l = (0, 0) attains 1/(2T)": 1 / T,
                    "the bound shrinks as T grows: 1/(2T), not T/2": T / 2,
                },
                f"at T = {T:.6g}",
                (),
                "one number",
                "expected 1/(2T)",
                # twice the answer is 1/T and half of it 1/(4T): both listed, with the hint that names them
                skip=frozenset({"twice", "half"}),
            )
        )
    return cases


check_jacobian_norm_bound = harness.make_check(
    "check_jacobian_norm_bound",
    _cases_jacobian_norm_bound,
    summary="""Check ``fn(T)``: the valid spectral-norm bound ``1/(2T)`` on the softmax Jacobian (attained at a tie).""",
    fn_doc="""``fn(T) -> float`` for a temperature ``T > 0``.""",
)


def _cases_spectral_norm(seed: Any) -> list[harness.Case]:
    import torch  # heavy: only this check needs it, so the others load without it

    rng = harness.rng(seed)
    cases = []
    for l_np, T in ((2.0 * rng.standard_normal(8), 0.7), (np.zeros(2), 0.25)):
        J = theory.softmax_jacobian_np(l_np, T)
        cases.append(
            harness.Case(
                (torch.tensor(l_np, dtype=torch.float64), T),
                np.linalg.norm(J, 2),
                {
                    "you returned the Frobenius norm; the spectral norm is the largest singular value": np.linalg.norm(
                        J
                    ),
                    "you returned the largest entry |J_ij|; the spectral norm is the largest singular value": np.abs(
                        J
                    ).max(),
                    "you returned the largest absolute row sum (ord=1 or inf); the spectral norm is ord=2": np.abs(J)
                    .sum(1)
                    .max(),
                    "the Jacobian is taken at softmax(l / T): include T": np.linalg.norm(
                        theory.softmax_jacobian_np(l_np), 2
                    ),
                },
                f"at T = {T} for logits of shape {l_np.shape}",
                (),
                "one number",
                "your spectral norm does not match the largest singular value of J",
                transforms={
                    "you swapped T and 1/T: the Jacobian is taken at softmax(l / T) and carries a factor 1/T": (
                        np.linalg.norm(theory.softmax_jacobian_np(l_np, 1 / T), 2)
                    )
                },
            )
        )
    return cases


check_spectral_norm = harness.make_check(
    "check_spectral_norm",
    _cases_spectral_norm,
    summary="""Check ``fn(logits, T)``: the spectral norm ``||J||_2`` of the softmax Jacobian at ``logits / T``.""",
    fn_doc="""``fn(logits, T) -> float`` with ``logits`` a float64 torch tensor of shape ``(L,)`` on the CPU and
        ``T > 0``; it may move the tensor to another device (``device="auto"``).""",
)
