"""The experiments' parameter dataclasses (attn_lib.experiments.*Params): defaults in one place, checks that name the
parameter, the profiles, the result-cache key content, and the package's import structure."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from attn_lib import experiments as E
from attn_lib.experiments.sensitivity import RawSensitivityParams

HANDLE = SimpleNamespace(max_length=512, n_heads=4, n_kv_heads=2, head_dim=16)
PACKAGE = Path(E.__file__).parent

#: each public function, its parameter class and overrides of some of its fields
PUBLIC = {
    E.distance_vs_length: (E.DistanceVsLengthParams, dict(N=3)),
    E.distance_vs_n: (E.DistanceVsNParams, dict(L=64, n_values=(1, 2))),
    E.critical_n: (E.CriticalNParams, dict(alpha=0.05, forms="e1")),
    E.separability: (E.SeparabilityParams, dict(M=2.0)),
    E.gradient_sensitivity: (E.SensitivityParams, dict(rows=4)),
    E.critical_n_diagnosis: (E.DiagnosisParams, dict(rows=8)),
    E.multihead_coverage: (E.CoverageParams, dict(L=64, N=4)),
}


@pytest.mark.parametrize("fn", list(PUBLIC), ids=lambda f: f.__name__)
def test_public_functions_run_the_dataclass_with_overrides_of_its_fields(fn, monkeypatch):
    cls, overrides = PUBLIC[fn]
    assert list(inspect.signature(fn).parameters) == ["handle", "text", "params", "start", "cache", "overrides"]
    ran = []
    monkeypatch.setattr(cls, "run", lambda self, handle, text, *, start=0, cache=None: ran.append((self, start)))
    fn(HANDLE, "text", **overrides)
    assert ran[-1] == (cls(**overrides), 0)
    base = cls(L=32) if cls is E.CoverageParams else cls()
    fn(HANDLE, "text", base, start=5)
    assert ran[-1][0] is base and ran[-1][1] == 5
    fn(HANDLE, "text", base, **overrides)
    assert ran[-1][0] == dataclasses.replace(base, **overrides) != base
    with pytest.raises(ValueError, match=f"params must be a {cls.__name__}"):
        fn(HANDLE, "text", dict(overrides))
    with pytest.raises(TypeError, match="not_a_field"):
        fn(HANDLE, "text", not_a_field=1)


def test_every_experiment_of_run_all_has_its_parameter_class_in_order():
    assert E.jobs.EXPERIMENTS == (
        "distance_vs_length",
        "distance_vs_n",
        "critical_n",
        "separability",
        "gradient_sensitivity",
        "critical_n_diagnosis",
        "gradient_sensitivity_raw",
        "critical_n_mc_seeds",
    )
    assert all(E.jobs.ALGORITHMS[n].name == n for n in E.jobs.EXPERIMENTS)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: E.DistanceVsLengthParams(N=32, lengths=(32, 64)), r"N must be an integer in \[1, 31\]"),
        (lambda: E.DistanceVsLengthParams(p="L+1"), "p must be one of"),
        (lambda: E.DistanceVsNParams(L=16, n_values=(1, 16)), r"n_values must be integers in \[1, L-1\]"),
        (lambda: E.CriticalNParams(lengths=(2, 8)), "lengths must be integers >= 4"),
        (lambda: E.CriticalNParams(alpha=1.0), r"alpha must be in \(0, 1\)"),
        (lambda: E.CriticalNParams(forms=()), "forms must be a non-empty subset"),
        (lambda: E.SeparabilityParams(M=0), "M must be a finite number > 0"),
        (lambda: E.SensitivityParams(temperatures=()), "temperatures must be a number or a non-empty list"),
        (lambda: E.DiagnosisParams(L=3), "L must be an integer >= 4"),
        (lambda: E.DiagnosisParams(variants={"x": (1.0, 1)}), r"variants\['x'\]\[1\] must be True or False"),
        (lambda: E.CoverageParams(L=16, N=16), r"N must be an integer in \[1, 15\]"),
    ],
)
def test_bad_parameters_are_a_value_error_naming_them(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_checked_values_are_stored_normalised():
    p = E.CriticalNParams(lengths=[64, 32, 64], forms="e1", alpha=0.05)
    assert p.lengths == (32, 64) and p.forms == ("e1",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.alpha = 0.1


def test_for_model_checks_the_context_and_the_heads():
    with pytest.raises(ValueError, match=r"lengths must be an integer in \[2, 512\]"):
        E.CriticalNParams(lengths=(32, 1024)).for_model(HANDLE)
    with pytest.raises(ValueError, match="permutations must be an integer in"):
        E.CoverageParams(L=512, permutations=10**5).for_model(HANDLE)
    p = E.CoverageParams(L=512, permutations=10**5)
    assert E.CoverageParams(L=512, permutations=10**5 // 4).for_model(HANDLE).permutations == 10**5 // 4
    assert p.permutations == 10**5  # checked against the heads only by for_model


def test_profile_params_cut_the_grids_at_the_context_and_read_the_profile():
    prof = E.PROFILES["paper"]
    params = E.jobs.profile_params(HANDLE, prof, seed=3)
    assert list(params) == list(E.jobs.EXPERIMENTS)
    assert params["distance_vs_length"].lengths == (32, 64, 128, 256, 512)
    assert params["distance_vs_n"].L == 512 and params["distance_vs_n"].n_values == (1, 5, 10, 20, 100)
    assert params["critical_n"].mc_samples == prof.critical_n.mc_samples and params["critical_n"].seed == 3
    assert params["gradient_sensitivity"].rows == prof.gradient_sensitivity.rows
    assert params["gradient_sensitivity_raw"].head_dim == HANDLE.head_dim
    assert params["gradient_sensitivity_raw"].temperatures == prof.gradient_sensitivity.temperatures
    assert params["critical_n_diagnosis"].rows == prof.critical_n_diagnosis.rows
    short = E.jobs.profile_params(SimpleNamespace(**{**vars(HANDLE), "max_length": 64}), prof)
    assert short["distance_vs_n"].L == 64 and short["distance_vs_n"].n_values == (1, 5, 10, 20)
    assert short["separability"].n_values == (1, 2, 4, 8, 16, 32) and short["critical_n"].lengths == (32, 64)
    assert short["critical_n"].seed == 0 and short["critical_n_diagnosis"].L == 64


def test_the_profiles_keep_their_grids():
    paper, quick = E.PROFILES["paper"], E.PROFILES["quick"]
    assert paper.lengths == paper.critical_n.lengths == (32, 64, 128, 256, 512, 1024)
    assert quick.lengths == quick.critical_n.lengths == (16, 32, 64, 128)
    assert {paper.distance_vs_n.L, paper.separability.L, paper.gradient_sensitivity.L} == {1024}
    assert {quick.distance_vs_n.L, quick.separability.L, quick.gradient_sensitivity.L} == {128}
    assert (paper.critical_n.stage, paper.critical_n.crit_rows, paper.gradient_sensitivity.rows) == (1023, 128, 128)
    assert (quick.critical_n.stage, quick.critical_n.mc_samples, quick.distance_vs_n.mc_samples) == (127, 16, 16)
    assert len(paper.gradient_sensitivity.temperatures) == 21 and len(quick.gradient_sensitivity.temperatures) == 6


def test_cache_key_content_leaves_out_what_does_not_run():
    key = E.CriticalNParams(forms=("e1", "e2")).key_params()
    assert "mc_samples" not in key and "seed" not in key and "crit_rows" not in key
    assert key["lengths"] == [32, 64, 128, 256, 512, 1024] and key["forms"] == ["e1", "e2"]
    with_mc = E.CriticalNParams(crit_rows=8).key_params()
    assert with_mc["crit_rows"] == 8 and with_mc["mc_samples"] == 8 and with_mc["seed"] == 0
    assert E.SensitivityParams(rows=4).key_params()["rows"] == 4
    assert RawSensitivityParams(head_dim=16).key_params()["head_dim"] == 16


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            yield node


def test_no_module_of_the_package_imports_a_private_name():
    # a private *module* of attn_lib (``_validation``, ``_engine``) is a layer used through its public names
    for path in PACKAGE.glob("*.py"):
        for node in _imports(path):
            if node.module is None:
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            assert not private, f"{path.name} imports {private} from {node.module}"


def test_the_package_modules_import_downward_only():
    deps = {}
    for path in PACKAGE.glob("*.py"):
        if path.stem != "__init__":
            deps[path.stem] = {n.module.split(".")[0] for n in _imports(path) if n.level == 1 and n.module}
            deps[path.stem] |= {a.name for n in _imports(path) if n.level == 1 and not n.module for a in n.names}

    def reaches(a, b, seen=()):
        return any(d == b or (d not in seen and reaches(d, b, (*seen, d))) for d in deps.get(a, ()))

    assert not [m for m in deps if reaches(m, m)]
    assert deps["passes"] <= {"inputs"} and not deps["inputs"]
    # a profile is a set of the experiments' parameters: it imports them, never the other way round
    experiments = ("distance", "critical", "separability", "sensitivity", "diagnosis", "coverage")
    assert deps["profiles"] == {*experiments} - {"coverage"}
    assert not any("profiles" in deps[m] for m in (*experiments, "passes"))


def test_a_window_too_long_for_the_monte_carlo_draws_is_named_with_them():
    """lengths=[10**6] with the default Monte-Carlo draws: the error names the window, not only mc_samples."""
    from attn_lib import experiments as E

    with pytest.raises(ValueError, match=r"mc_samples.*longest window \(1000000\).*window lengths"):
        E.DistanceVsLengthParams(lengths=(10**6,))
