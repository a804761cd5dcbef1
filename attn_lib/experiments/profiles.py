"""The grids of a reproduction (:class:`Profile`, :data:`PROFILES`) and of the chapter "Beyond softmax"
(:class:`BeyondProfile`, :data:`BEYOND_PROFILES`).

A :class:`Profile` is one parameter instance per experiment of :func:`~attn_lib.experiments.run_all` (each parameter is
a field of its experiment's dataclass, described and checked there); :func:`~attn_lib.experiments.jobs.profile_params`
cuts its grids at a model's context."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import check_choice
from .critical import CriticalNParams
from .diagnosis import DiagnosisParams
from .distance import DistanceVsLengthParams, DistanceVsNParams
from .sensitivity import SensitivityParams
from .separability import SeparabilityParams

__all__ = ["Profile", "PROFILES", "BeyondProfile", "BEYOND_PROFILES"]


@dataclasses.dataclass(frozen=True)
class Profile:
    """The grids of one reproduction (Reading the paper, §Grids): the parameters of each experiment of
    :func:`~attn_lib.experiments.run_all`, in a field named as the experiment; ``gradient_sensitivity_raw`` takes
    ``gradient_sensitivity``'s with the model's head dimension, ``critical_n_mc_seeds`` ``critical_n``'s with
    ``mc_seeds``, the seeds of the Monte-Carlo critical N."""

    name: str
    distance_vs_length: DistanceVsLengthParams
    distance_vs_n: DistanceVsNParams
    critical_n: CriticalNParams
    separability: SeparabilityParams
    gradient_sensitivity: SensitivityParams
    critical_n_diagnosis: DiagnosisParams
    mc_seeds: int = 5

    @property
    def lengths(self) -> tuple[int, ...]:
        """The window lengths ``L`` of the grids (Figs. 2a and 2c)."""
        return self.distance_vs_length.lengths

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _paper() -> Profile:  # every parameter not named here at its dataclass's default
    lengths, L, mc = (32, 64, 128, 256, 512, 1024), 1024, dict(mc_samples=64, mc_rows=32, mc_seeds=5)
    return Profile(
        name="paper",
        distance_vs_length=DistanceVsLengthParams(N=5, lengths=lengths, **mc),
        distance_vs_n=DistanceVsNParams(L=L, n_values=(1, 5, 10, 20, 100), **mc),
        critical_n=CriticalNParams(
            lengths, stage=1023, crit_rows=128, mc_samples=3, mc_stratify=True, mc_short_t=128, mc_short_samples=16
        ),
        separability=SeparabilityParams(L=L, n_values=(1, 2, 4, 8, 16, 32, 64)),
        # Fig. 4's verdicts over 5 draws of the random directions (their spread)
        gradient_sensitivity=SensitivityParams(
            L=L, temperatures=tuple(float(x) for x in np.logspace(-3, 2, 21)), rows=128, direction_seeds=5
        ),
        critical_n_diagnosis=DiagnosisParams(L=L, rows=32),
    )


def _quick() -> Profile:
    lengths, L, mc = (16, 32, 64, 128), 128, dict(mc_samples=16, mc_rows=16, mc_seeds=5)
    return Profile(
        name="quick",
        distance_vs_length=DistanceVsLengthParams(N=5, lengths=lengths, **mc),
        distance_vs_n=DistanceVsNParams(L=L, n_values=(1, 5, 10, 20, 40), **mc),
        critical_n=CriticalNParams(lengths=lengths, stage=127, mc_samples=16),
        separability=SeparabilityParams(L=L, n_values=(1, 2, 4, 8, 16, 32)),
        gradient_sensitivity=SensitivityParams(
            L=L, temperatures=tuple(float(x) for x in np.logspace(-3, 2, 6)), direction_seeds=5
        ),
        critical_n_diagnosis=DiagnosisParams(L=L, rows=32),
    )


#: The reproduction's profiles: ``paper`` (the paper's grids, ``L`` up to 1024) and ``quick`` (``L`` up to 128).
PROFILES: dict[str, Profile] = {"paper": _paper(), "quick": _quick()}


def get_profile(profile) -> Profile:
    """``profile`` if it is a :class:`Profile`, else the :data:`PROFILES` entry it names (``"paper"``, ``"quick"``)."""
    return _named(profile, Profile, PROFILES)


@dataclasses.dataclass(frozen=True)
class BeyondProfile:
    """Grids of the chapter "Beyond softmax": ``lengths``, the row lengths ``L`` of the limits comparison (rows with
    ``t`` in ``(L/2, L]``), ``rows_per_length`` rows sampled per ``L``; ``n_distance``: ``N`` of ``d~`` against ``L``
    (the paper's 5); ``crit_grid``: ``N`` scanned for the critical ``N`` (those ``< L`` at each ``L``; at ``N = L - 1``
    ``d~`` and ``E1`` nearly coincide by construction); ``sep_n``: ``N`` of ``N_s/N`` (at the largest ``L``); the grid
    ``temperatures`` x ``eps_values`` of ``g(T, eps)``; ``k_values``: top-k's ``k`` in the comparison;
    ``swap_length``: the window of :func:`~attn_lib.experiments.live_swap`, ``swap_lengths`` the ``L`` (prefixes) at
    which its loss is reported, ``k_grid`` and ``t_grid`` its top-k and temperature sweeps (the sliders' positions);
    ``ks_alpha``: the KS level."""

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
# the grids of both profiles: d~ at the paper's N = 5, g(T, eps), and the temperature sweep of the live swap
_BEYOND_SHARED = dict(n_distance=5, temperatures=(0.01, 0.1, 1.0, 10.0), eps_values=(1e-3, 1e-1, 10.0))
_BEYOND_SHARED.update(t_grid=(0.25, 0.5, 1.0, 2.0, 4.0))

BEYOND_PROFILES: dict[str, BeyondProfile] = {
    "paper": BeyondProfile(
        name="paper",
        lengths=(32, 64, 128, 256, 512, 1024),
        rows_per_length=8,
        **_BEYOND_SHARED,
        crit_grid=_CRIT,
        sep_n=(1, 2, 4, 8, 16, 32, 64),
        k_values=(4, 16, 64),
        # the live swap (the book's, not the paper's): one pass per setting, 18 settings; a window of 512 keeps
        # chapter 7 within 3 minutes on 2 cores (benchmarks/README.md)
        swap_length=512,
        swap_lengths=(32, 64, 128, 256, 512),
        k_grid=(1, 4, 16, 64, 256, 512),
    ),
    "quick": BeyondProfile(
        name="quick",
        lengths=(16, 32, 64, 128),
        rows_per_length=4,
        **_BEYOND_SHARED,
        crit_grid=tuple(n for n in _CRIT if n < 128),
        sep_n=(1, 2, 4, 8, 16, 32),
        k_values=(4, 16),
        swap_length=128,
        swap_lengths=(16, 32, 64, 128),
        k_grid=(1, 2, 4, 8, 16, 32, 64, 128),
    ),
}


def get_beyond_profile(profile) -> BeyondProfile:
    """``profile`` if it is a :class:`BeyondProfile`, else the entry of :data:`BEYOND_PROFILES` it names."""
    return _named(profile, BeyondProfile, BEYOND_PROFILES)


def _named(profile, cls: type, table: dict):
    """``profile`` if it is a ``cls``, else the entry of ``table`` it names (``ValueError`` naming ``profile``)."""
    if isinstance(profile, cls):
        return profile
    check_choice("profile", profile, list(table))
    return table[profile]
