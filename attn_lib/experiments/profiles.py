"""The grids of a reproduction (:class:`Profile`, :data:`PROFILES`) and of the chapter "Beyond softmax"
(:class:`BeyondProfile`, :data:`BEYOND_PROFILES`).

A profile holds only numbers; each experiment's parameter class reads the ones it needs in its ``from_profile``
(e.g. :meth:`attn_lib.experiments.critical.CriticalN.from_profile`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import check_choice

__all__ = ["Profile", "PROFILES", "get_profile", "BeyondProfile", "BEYOND_PROFILES", "get_beyond_profile"]


@dataclasses.dataclass(frozen=True)
class Profile:
    """Grids of one reproduction (Reading the paper, §Grids). ``mc_rows``: rows per ``L`` for the Monte-Carlo
    estimate (a fixed stride ``max(1, L // mc_rows)``); ``crit_fraction``: the critical-N scan runs over
    ``N = 1..min(L - 1, floor(crit_fraction L))`` (``1.0``: up to ``L - 1``, never censored by a scan limit);
    ``crit_rows``: rows per ``L`` of the critical-N scan, every ``max(1, L // crit_rows)``-th row ending at the last
    (``0`` = every row); ``scan_stage``: ``N`` range of the first critical-N stage, scanned during the forward pass
    (a later stage, needed only if some ``(L, form)`` has no critical ``N`` by then, rebuilds every layer from stored
    logits; ``paper`` scans the whole range ``1..1023`` in the pass);
    ``sens_rows``: the row set ``R`` of Algorithm 5 (Reading the paper, §The sensitivity metric): every
    ``max(1, L // sens_rows)``-th row, ending at the last row (``0`` = every row); ``crit_mc_samples``: random
    subsets per row ``K`` of the Monte-Carlo expectation in the critical-N scan (form ``"mc"``, every ``N`` at once;
    fewer than ``mc_samples`` because the scan costs ``O(K t^2)`` per row, Reading the paper, §The critical N);
    ``crit_mc_stratify``: those subsets stratified on each row's largest weight (``K`` pairs of orders);
    ``crit_mc_short_samples``: ``K`` instead for the rows with at most ``crit_mc_short_t`` visible tokens
    (``0``: none);
    ``diag_rows``: rows of the critical-N diagnosis at the fixed length (:func:`critical_n_diagnosis`)."""

    name: str
    lengths: tuple[int, ...]
    n_alg1: int
    length_fixed: int
    n_alg2: tuple[int, ...]
    n_alg4: tuple[int, ...]
    temperatures: tuple[float, ...]
    eps_values: tuple[float, ...]
    ks_alpha: float = 0.01
    crit_fraction: float = 0.25
    mc_samples: int = 64
    mc_rows: int = 32
    scan_stage: int = 64
    sens_rows: int = 0
    crit_rows: int = 0
    crit_mc_samples: int = 8
    crit_mc_stratify: bool = False
    crit_mc_short_t: int = 0
    crit_mc_short_samples: int = 0
    diag_rows: int = 32

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


PROFILES: dict[str, Profile] = {
    "paper": Profile(
        name="paper",
        lengths=(32, 64, 128, 256, 512, 1024),
        n_alg1=5,
        length_fixed=1024,
        n_alg2=(1, 5, 10, 20, 100),
        n_alg4=(1, 2, 4, 8, 16, 32, 64),
        temperatures=tuple(float(x) for x in np.logspace(-3, 2, 21)),
        eps_values=(1e-3, 1e-1, 10.0),
        ks_alpha=0.01,
        crit_fraction=1.0,
        mc_samples=64,
        mc_rows=32,
        scan_stage=1023,
        sens_rows=128,
        crit_rows=128,
        crit_mc_samples=3,
        crit_mc_stratify=True,
        crit_mc_short_t=128,
        crit_mc_short_samples=16,
    ),
    "quick": Profile(
        name="quick",
        lengths=(16, 32, 64, 128),
        n_alg1=5,
        length_fixed=128,
        n_alg2=(1, 5, 10, 20, 40),
        n_alg4=(1, 2, 4, 8, 16, 32),
        temperatures=tuple(float(x) for x in np.logspace(-3, 2, 6)),
        eps_values=(1e-3, 1e-1, 10.0),
        ks_alpha=0.01,
        crit_fraction=1.0,
        mc_samples=16,
        mc_rows=16,
        scan_stage=127,
        crit_mc_samples=16,
    ),
}


def get_profile(profile) -> Profile:
    """``profile`` itself if it is a :class:`Profile`, else the entry of :data:`PROFILES` it names.

    Parameters
    ----------
    profile : Profile or {"paper", "quick"}

    Returns
    -------
    Profile
    """
    return _named(profile, Profile, PROFILES)


@dataclasses.dataclass(frozen=True)
class BeyondProfile:
    """Grids of the chapter "Beyond softmax".

    Attributes
    ----------
    lengths : tuple of int
        Row lengths ``L`` of the limits comparison (rows with ``t`` in ``(L/2, L]``).
    rows_per_length : int
        Rows sampled per ``L``.
    n_distance : int
        ``N`` of the distance ``d~`` against ``L`` (the paper's ``N = 5``).
    crit_grid : tuple of int
        ``N`` values scanned for the critical ``N`` (those ``< L`` at each ``L``). Not ``N = L - 1``: there ``d~`` and
        ``E1`` nearly coincide by construction (``p = 1``, one token left out), so a KS pass would say little.
    sep_n : tuple of int
        ``N`` values of ``N_s/N`` (at the largest ``L``).
    temperatures, eps_values : tuple of float
        Grid of ``g(T, eps)``.
    k_values : tuple of int
        The ``k`` of top-k in the comparison.
    swap_length : int
        Window of :func:`live_swap`.
    swap_lengths : tuple of int
        ``L`` at which the swap's loss is reported (prefixes of the window).
    k_grid, t_grid : tuple
        The top-k and temperature sweeps of :func:`live_swap` (the sliders' positions).
    ks_alpha : float
        Level of the KS test.
    """

    name: str
    lengths: tuple[int, ...]
    rows_per_length: int
    n_distance: int
    crit_grid: tuple[int, ...]
    sep_n: tuple[int, ...]
    temperatures: tuple[float, ...]
    eps_values: tuple[float, ...]
    k_values: tuple[int, ...]
    swap_length: int
    swap_lengths: tuple[int, ...]
    k_grid: tuple[int, ...]
    t_grid: tuple[float, ...]
    ks_alpha: float = 0.01

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


_CRIT = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768)

BEYOND_PROFILES: dict[str, BeyondProfile] = {
    "paper": BeyondProfile(
        name="paper",
        lengths=(32, 64, 128, 256, 512, 1024),
        rows_per_length=8,
        n_distance=5,
        crit_grid=_CRIT,
        sep_n=(1, 2, 4, 8, 16, 32, 64),
        temperatures=(0.01, 0.1, 1.0, 10.0),
        eps_values=(1e-3, 1e-1, 10.0),
        k_values=(4, 16, 64),
        swap_length=1024,
        swap_lengths=(32, 64, 128, 256, 512, 1024),
        k_grid=(1, 4, 16, 64, 256, 1024),
        t_grid=(0.25, 0.5, 1.0, 2.0, 4.0),
    ),
    "quick": BeyondProfile(
        name="quick",
        lengths=(16, 32, 64, 128),
        rows_per_length=4,
        n_distance=5,
        crit_grid=tuple(n for n in _CRIT if n < 128),
        sep_n=(1, 2, 4, 8, 16, 32),
        temperatures=(0.01, 0.1, 1.0, 10.0),
        eps_values=(1e-3, 1e-1, 10.0),
        k_values=(4, 16),
        swap_length=128,
        swap_lengths=(16, 32, 64, 128),
        k_grid=(1, 2, 4, 8, 16, 32, 64, 128),
        t_grid=(0.25, 0.5, 1.0, 2.0, 4.0),
    ),
}


def get_beyond_profile(profile) -> BeyondProfile:
    """``profile`` itself if it is a :class:`BeyondProfile`, else the entry of :data:`BEYOND_PROFILES` it names.

    Parameters
    ----------
    profile : BeyondProfile or {"paper", "quick"}

    Returns
    -------
    BeyondProfile
    """
    return _named(profile, BeyondProfile, BEYOND_PROFILES)


def _named(profile, cls: type, table: dict):
    """``profile`` if it is a ``cls``, else the entry of ``table`` it names (``ValueError`` naming ``profile``)."""
    if isinstance(profile, cls):
        return profile
    check_choice("profile", profile, list(table))
    return table[profile]
