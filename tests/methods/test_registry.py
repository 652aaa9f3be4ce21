"""The method registry (commbench.methods.registry): register, look up, one unknown-name error with the nearest
name, a name taken twice, the families, Params from a config, the built-ins' metadata without torch, and a user's
method from an entry point (list, and a dist run: the workers load it too) or from COMMBENCH_METHODS (sim)."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commbench.methods import registry
from commbench.methods.catalog import CATALOG, FIELDS
from commbench.methods.registry import MethodLoadError, MethodNameTaken, UnknownMethod

COMMBENCH = Path(sys.executable).with_name("commbench")
RUN = ["run", "--task", "lenet-mnist", "--dataset", "synthetic", "--workers", "2", "--steps", "2"]
MY_BASELINE = '''from commbench.methods.baseline import Baseline
{decorator}
class {cls}(Baseline):
    name, summary = {name!r}, "fp32 all-reduce, registered from outside commbench"
'''


def a_method(name: str):
    from commbench.methods.baseline import Baseline

    return type("Mine", (Baseline,), {"name": name, "summary": "a test's method", "__module__": __name__})


@pytest.fixture
def fresh(monkeypatch):
    """The registry as a new process finds it, not loaded yet (the module's state is restored afterwards)."""
    monkeypatch.setattr(registry, "_classes", {})
    monkeypatch.setattr(registry, "_sources", {})
    monkeypatch.setattr(registry, "_state", "unloaded")
    return registry


def distribution(root: Path, package: str, entries: dict[str, str], classes: dict[str, str]) -> Path:
    """A distribution on disk as importlib.metadata finds it on sys.path: ``package/__init__.py`` (each class a
    Baseline subclass of the given method name) and ``package-0.1.dist-info`` with its entry points."""
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("".join(
        MY_BASELINE.format(decorator="", cls=cls, name=name) for cls, name in classes.items()))
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[commbench.methods]\n" + "".join(
        f"{name} = {package}:{target}\n" for name, target in entries.items()))
    return root


@pytest.fixture
def on_path(monkeypatch, request):
    """Put a folder on sys.path for one test; the packages it names are forgotten afterwards."""
    def put(root: Path, *packages: str) -> None:
        monkeypatch.syspath_prepend(str(root))
        request.addfinalizer(lambda: [sys.modules.pop(p, None) for p in packages])
    return put


def cli_error(capsys, *argv: str) -> str:
    from commbench.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(list(argv))
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# -- register, look up, unknown ---------------------------------------------------------------------------
def test_register_get_names_and_the_read_only_view(request):
    from commbench.methods import METHODS, Method

    cls = registry.register(a_method("test-registered"))
    request.addfinalizer(lambda: registry.unregister("test-registered"))
    assert registry.get("test-registered") is cls and METHODS["test-registered"] is cls
    assert registry.is_registered("test-registered") and "test-registered" in METHODS
    assert registry.names()[:len(CATALOG)] == tuple(CATALOG) and registry.names()[-1] == "test-registered"
    assert registry.register(cls) is cls  # the same class again: nothing happens
    assert registry.source_of("test-registered") == f"{__name__}:Mine"
    assert issubclass(cls, Method) and set(METHODS.values()) >= {cls}
    with pytest.raises(TypeError):
        METHODS["test-registered"] = cls  # a view: registering is register()'s
    assert not registry.is_registered({"a": 1}) and METHODS.get("nope") is None


def test_an_unknown_name_says_the_known_ones_and_the_nearest(capsys):
    with pytest.raises(UnknownMethod) as err:
        registry.get("tergrad")
    known = ", ".join(sorted(registry.names()))
    assert str(err.value) == f"unknown method 'tergrad' (known: {known}; did you mean terngrad?)"
    assert isinstance(err.value, ValueError) and isinstance(err.value, KeyError)  # METHODS[name], Mapping.get
    assert "did you mean" not in str(UnknownMethod("zzzzzz", list(registry.names())))
    # the command line: one line, exit 2
    line = cli_error(capsys, *RUN, "--method", "tergrad", "--out", "unused")
    assert line.startswith("commbench: error: method: unknown method 'tergrad' (known: baseline, bf16, ")
    assert line.endswith("did you mean terngrad?)")


def test_a_name_taken_twice_names_both_classes(request):
    with pytest.raises(MethodNameTaken) as err:
        registry.register(a_method("terngrad"))
    assert str(err.value) == (f"method name 'terngrad' is taken twice: by commbench.methods.terngrad:TernGrad and "
                              f"by {__name__}:Mine")
    from commbench.methods.baseline import Baseline

    inherits = type("NoName", (Baseline,), {"summary": "forgot its name", "__module__": __name__})
    with pytest.raises(MethodNameTaken, match="inherits its name"):
        registry.register(inherits)
    with pytest.raises(MethodLoadError, match="no method name"):
        registry.register(a_method("has space"))
    assert registry.get("terngrad").__module__ == "commbench.methods.terngrad"


# -- families, Params, the catalog ---------------------------------------------------------------------------
def test_families_are_class_attributes_asked_of_the_registry():
    from commbench.analysis.tta import STRONG_BASELINES

    assert registry.members("threshold") == ("wgt", "bgt", "qgt")
    assert registry.members("all-reduce baseline") == ("baseline", "fp16", "bf16")
    assert tuple(STRONG_BASELINES) == ("baseline", "fp16", "bf16") and "fp16" in STRONG_BASELINES
    assert STRONG_BASELINES.index("bf16") == 2 and "powersgd" not in STRONG_BASELINES
    assert registry.family_of("qgt") == "threshold" and registry.family_of("terngrad") is None


def test_params_from_a_config():
    params = registry.params_for("terngrad", {"clip": 0.0, "packing": "2bit"})
    assert params == registry.get("terngrad").Params(clip=0.0, packing="2bit")
    assert registry.params_for("fp16", {}) == registry.get("fp16").Params()
    with pytest.raises(TypeError):
        registry.params_for("wgt", {"clip": 1.0})


def test_the_catalog_holds_each_builtin_class_attributes():
    """One set of values: the catalog (readable without torch) and the classes' attributes agree."""
    for name, entry in CATALOG.items():
        module, _, qualname = entry.source.partition(":")
        cls = getattr(importlib.import_module(module), qualname)
        assert registry.get(name) is cls and cls.name == name
        assert registry.source_of(name) == entry.source
        for field in FIELDS:
            assert getattr(cls, field) == getattr(entry, field), f"{name}.{field}"


def test_the_metadata_reads_without_torch():
    probe = ("import commbench.methods, commbench.methods.catalog as c; "
             "print(c.CATALOG['terngrad'].version, c.CATALOG['wgt'].family)")
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == [str(CATALOG["terngrad"].version), "threshold"]
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    assert "commbench.methods.catalog" in imported and not [m for m in imported if m.split(".")[0] == "torch"]


# -- a user's methods: entry points, COMMBENCH_METHODS ----------------------------------------------------------
def test_an_entry_points_method_is_listed_and_runs_on_dist_workers(tmp_path):
    root = distribution(tmp_path / "site", "mypkg", {"my-baseline": "MyBaseline"}, {"MyBaseline": "my-baseline"})
    env = {**os.environ, "PYTHONPATH": str(root)}
    listed = subprocess.run([str(COMMBENCH), "list", "methods"], capture_output=True, text=True, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "my-baseline" in listed.stdout and "from mypkg:MyBaseline (entry point 'my-baseline'" in listed.stdout
    run = subprocess.run([str(COMMBENCH), *RUN, "--method", "my-baseline", "--backend", "dist", "--quiet", "--out",
                          str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and ": done" in run.stdout, run.stderr[-2000:]


def test_an_entry_point_taking_a_builtin_name_is_bad_input(fresh, tmp_path, on_path, capsys):
    on_path(distribution(tmp_path, "takerpkg", {"terngrad": "Taker"}, {"Taker": "terngrad"}),
            "takerpkg")
    line = cli_error(capsys, "list", "methods")
    assert line == ("commbench: error: method name 'terngrad' is taken twice: by commbench.methods.terngrad:TernGrad "
                    "and by takerpkg:Taker (entry point 'terngrad' = takerpkg:Taker in group commbench.methods of "
                    "takerpkg 0.1)")


def test_an_entry_point_whose_class_has_another_name_is_named(fresh, tmp_path, on_path):
    on_path(distribution(tmp_path, "wrongpkg", {"wrong-name": "Right"}, {"Right": "right-name"}),
            "wrongpkg")
    with pytest.raises(MethodLoadError, match=r"entry point 'wrong-name' = wrongpkg:Right .*named 'right-name'"):
        registry.names()


def test_commbench_methods_modules_register_their_methods(fresh, tmp_path, on_path, monkeypatch, capsys):
    from commbench.cli import main

    (tmp_path / "mymethods.py").write_text("from commbench.methods.registry import register\n" + MY_BASELINE.format(
        decorator="@register", cls="ModuleBaseline", name="module-baseline"))
    on_path(tmp_path, "mymethods")
    monkeypatch.setenv("COMMBENCH_METHODS", " mymethods ,")
    assert main(["list", "methods"]) == 0
    assert "module-baseline" in capsys.readouterr().out
    assert registry.source_of("module-baseline") == "mymethods:ModuleBaseline"
    monkeypatch.setattr(registry, "_state", "unloaded")
    monkeypatch.setenv("COMMBENCH_METHODS", "mymethods,no_such_module_here")
    assert "COMMBENCH_METHODS: cannot import 'no_such_module_here'" in cli_error(capsys, "list", "methods")


def test_a_commbench_methods_module_runs_under_sim(tmp_path):
    (tmp_path / "mymethods.py").write_text("from commbench.methods.registry import register\n" + MY_BASELINE.format(
        decorator="@register", cls="ModuleBaseline", name="module-baseline"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COMMBENCH_METHODS": "mymethods"}
    run = subprocess.run([str(COMMBENCH), *RUN, "--method", "module-baseline", "--backend", "sim", "--quiet",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and ": done" in run.stdout, run.stderr[-2000:]


def test_a_slurm_job_gets_the_commbench_methods_modules(tmp_path, on_path, monkeypatch):
    """The batch script's setup lines carry COMMBENCH_METHODS and the folder its module came from (a job runs in
    the code snapshot, where a relative PYTHONPATH entry finds nothing)."""
    from commbench.launch.slurm import setup_lines
    from commbench.launch.snapshot import CodeSnapshot

    (tmp_path / "slurmmethods.py").write_text("")
    on_path(tmp_path, "slurmmethods")
    monkeypatch.setenv("COMMBENCH_METHODS", "slurmmethods")
    lines = setup_lines(CodeSnapshot(Path("/code"), None, None))
    assert "export COMMBENCH_METHODS=slurmmethods" in lines
    assert f"export PYTHONPATH=/code:{tmp_path}${{PYTHONPATH:+:$PYTHONPATH}}" in lines
