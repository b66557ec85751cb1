"""Public API shape: __all__, module layout, doctests, the gpu/proofs packages."""

from __future__ import annotations

import doctest
import functools
import importlib
import inspect

import pytest

import hilbertgeom as hg

MODULES = ["hilbertgeom.metric", "hilbertgeom.rows", "hilbertgeom.ball", "hilbertgeom.head",
           "hilbertgeom.tolerances", "hilbertgeom.exceptions",
           "hilbertgeom.tension", "hilbertgeom.updates", "hilbertgeom.equalize"]


def test_all_lists_exactly_the_public_definitions():
    public = {name for name in dir(hg) if not name.startswith("_") and not inspect.ismodule(getattr(hg, name))}
    assert set(hg.__all__) - {"__version__"} == public
    assert len(hg.__all__) == len(set(hg.__all__))


def _literal_all(path):
    """The value of ``__all__ = [...]`` in a source file, if it is a literal list of strings."""
    import ast

    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        else:
            targets = [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            val = node.value
            if isinstance(val, ast.List) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                 for e in val.elts):
                return [e.value for e in val.elts]
            return None
    return None


def test_all_is_a_literal_list_in_every_package_init():
    """Readers and tools (IDEs, type checkers, the docs) read ``__all__`` without running code."""
    import pathlib

    import hilbertgeom.gpu
    import hilbertgeom.proofs

    for mod in (hg, hilbertgeom.gpu, hilbertgeom.proofs, hg.testing, hg.gradients):
        names = _literal_all(pathlib.Path(mod.__file__))
        assert names is not None, f"{mod.__name__}.__all__ is not a literal list of strings"
        assert names == list(mod.__all__)


def test_top_level_all_is_the_union_of_the_concept_modules():
    """The literal top-level list re-exports each concept module's list, nothing more or less."""
    from hilbertgeom import ball, equalize, head, metric, rows, tension, tolerances, updates

    union = set().union(*(m.__all__ for m in (metric, rows, ball, head, tension, updates, equalize)))
    union |= set(tolerances.__all__) - {"unit_roundoff"}
    assert set(hg.__all__) == union | {"SolverError", "__version__"}


@pytest.mark.parametrize("modname", MODULES)
def test_module_all_is_defined_and_resolvable(modname):
    mod = importlib.import_module(modname)
    for name in mod.__all__:
        assert hasattr(mod, name), f"{modname}.__all__ names a missing {name}"


def _every_module() -> list[str]:
    """Every module of the installed packages: the core (private modules included),
    hilbertgeom.gpu and hilbertgeom.proofs (installed from gpu/ and proofs/)."""
    import pkgutil

    names = []
    for pkg in ("hilbertgeom", "hilbertgeom.gpu", "hilbertgeom.proofs"):
        mod = importlib.import_module(pkg)
        names += [pkg, *(m.name for m in pkgutil.walk_packages(mod.__path__, pkg + "."))]
    return sorted(set(names))


EVERY_MODULE = _every_module()


def test_every_module_is_doctested():
    """The walk finds the packages' modules, the ones with examples among them (so the
    doctest run below cannot pass by finding nothing)."""
    for name in (*MODULES, "hilbertgeom.tension.solver", "hilbertgeom.gpu.check", "hilbertgeom.proofs.metric",
                 "hilbertgeom.testing._steepest", "hilbertgeom.gradients"):
        assert name in EVERY_MODULE


@pytest.mark.parametrize("modname", EVERY_MODULE)
def test_docstring_examples_run(modname):
    mod = importlib.import_module(modname)
    res = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert res.failed == 0


@pytest.mark.parametrize("name", [n for n in hg.__all__ if callable(getattr(hg, n, None))
                                  and inspect.isfunction(getattr(hg, n))])
def test_public_functions_have_numpydoc_sections(name):
    doc = inspect.getdoc(getattr(hg, name)) or ""
    assert "Parameters" in doc or "Examples" in doc, name


def test_arrays_are_positional_only():
    for name in ("row_diameter", "closest_pair", "hilbert_distance", "head_norm", "covering_radius"):
        params = list(inspect.signature(getattr(hg, name)).parameters.values())
        assert params[0].kind is inspect.Parameter.POSITIONAL_ONLY, name
        assert all(p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.KEYWORD_ONLY) for p in params)


def test_gpu_and_proofs_import_without_cuda_and_core_does_not_import_them():
    import re
    import subprocess
    import sys

    import hilbertgeom.gpu
    import hilbertgeom.proofs  # noqa: F401

    core_src = "".join(inspect.getsource(importlib.import_module(m)) for m in [*MODULES, "hilbertgeom"])
    imports = "\n".join(re.findall(r"^\s*(?:from|import)\s+\S+.*$", core_src, flags=re.M))
    assert "gpu" not in imports and "cupy" not in imports
    assert "matplotlib" not in imports and "plots" not in imports  # optional; only the CLI imports them
    # and at run time: a fresh interpreter that imports the core loads none of them
    code = ("import sys, hilbertgeom; print(sorted(m for m in ('cupy', 'hilbertgeom.gpu', 'hilbertgeom.proofs', "
            "'hilbertgeom.plots', 'matplotlib', 'hypothesis', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


# --------------------------------------------------------------------------- every parameter documented
# The modules whose public functions and methods are checked: every parameter documented,
# every parameter and the return annotated.  A function or class is public when a public
# module (no part of its name starting with ``_``) lists it in ``__all__``; it is checked
# in the module that defines it (``fn.__module__``), which may be private (the result
# types of hilbertgeom.tension._results, the gpu functions of hilbertgeom.gpu._backend).
DOCUMENTED_MODULES = ["hilbertgeom.metric", "hilbertgeom.rows", "hilbertgeom.head", "hilbertgeom.ball",
                      "hilbertgeom.tolerances", "hilbertgeom.exceptions",
                      "hilbertgeom.tension._results", "hilbertgeom.tension.bounds", "hilbertgeom.tension.solver",
                      "hilbertgeom.tension.bracket",
                      "hilbertgeom.updates", "hilbertgeom.equalize", "hilbertgeom.gradients",
                      "hilbertgeom.testing._cases", "hilbertgeom.testing._steepest", "hilbertgeom.testing.plugin",
                      "hilbertgeom.testing.strategies", "hilbertgeom.cli", "hilbertgeom.plots",
                      "hilbertgeom.gpu", "hilbertgeom.gpu._backend",
                      "hilbertgeom.proofs", "hilbertgeom.proofs._core"]

# Public modules with public functions that this check does not cover yet, and why.
NOT_CHECKED: dict[str, str] = {}


def documented_parameters(doc: str) -> set[str]:
    """Names listed in the numpydoc ``Parameters`` (and ``Other Parameters``) sections.

    A section is a title line at the left margin underlined with dashes; an entry is
    a line at the left margin, ``name : type`` or ``name1, name2 : type`` (``*args``
    and ``**kwargs`` counted without their stars)."""
    import re

    lines = (doc or "").splitlines()
    names: set[str] = set()
    inside = False
    for k, line in enumerate(lines):
        if re.fullmatch(r"-{3,}", line.strip()):
            continue
        following = lines[k + 1].strip() if k + 1 < len(lines) else ""
        if line.strip() and not line[0].isspace() and re.fullmatch(r"-{3,}", following):
            inside = line.strip() in ("Parameters", "Other Parameters")
            continue
        if inside and line and not line[0].isspace():
            for name in line.split(" : ")[0].split(","):
                names.add(name.strip().lstrip("*"))
    return names


def _members(pkg, name, obj):
    """``(qualified name, function, docstring holding its parameters)`` for a public
    function, or for every method written in a public class (``__init__`` is
    documented in its class's docstring, as numpydoc asks; generated constructors of
    dataclasses and named tuples are not checked here)."""
    if inspect.isfunction(obj):
        yield f"{pkg}.{name}", obj, inspect.getdoc(obj)
    elif inspect.isclass(obj) and obj.__module__.startswith("hilbertgeom"):
        for attr, member in vars(obj).items():
            fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            if not inspect.isfunction(fn) or (attr.startswith("_") and attr != "__init__"):
                continue
            if attr == "__init__":
                if fn.__code__.co_filename == "<string>":  # made by dataclass / NamedTuple
                    continue
                yield f"{pkg}.{name}.__init__", fn, inspect.getdoc(obj)
            else:
                yield f"{pkg}.{name}.{attr}", fn, inspect.getdoc(fn)


@functools.cache
def public_modules() -> tuple[str, ...]:
    """Every public module of the installed packages, packages included."""
    import pkgutil

    names = []
    for pkg in ("hilbertgeom", "hilbertgeom.gpu", "hilbertgeom.proofs"):
        names.append(pkg)
        names += [m.name for m in pkgutil.walk_packages(importlib.import_module(pkg).__path__, pkg + ".")
                  if not any(part.startswith("_") for part in m.name.split("."))]
    return tuple(sorted(set(names)))


def public_callables():
    """``(qualified name, function, docstring holding its parameters)`` for every public
    function and method (named in the ``__all__`` of a public module)."""
    seen = set()
    for modname in public_modules():
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            for qual, fn, doc in _members(modname, name, getattr(mod, name)):
                if fn not in seen:
                    seen.add(fn)
                    yield qual, fn, doc


def _checked(modname):
    found = [(q, fn, doc) for q, fn, doc in public_callables() if fn.__module__ == modname]
    assert found, f"no public function found in {modname}"
    return found


def _undocumented(fn, doc):
    have = documented_parameters(doc)
    return [p for p in inspect.signature(fn).parameters if p not in ("self", "cls") and p not in have]


def _unannotated(fn):
    """Parameters without an annotation, and ``"return"`` if the return is not annotated."""
    sig = inspect.signature(fn)
    missing = [p for p, v in sig.parameters.items()
               if p not in ("self", "cls") and v.annotation is inspect.Parameter.empty]
    return missing + (["return"] if sig.return_annotation is inspect.Signature.empty else [])


def test_parameter_scan_sees_a_missing_parameter():
    def f(S, /, *, norm=2, tile=None, **kwargs):
        """Doc.

        Parameters
        ----------
        S : (V, d) array_like
            Rows.
        norm, tile : int
            Choices; ``kwargs : x`` mentioned in prose does not count.
        **kwargs
            Passed on.

        Returns
        -------
        radius : float
        """

    assert _undocumented(f, inspect.getdoc(f)) == []
    f.__doc__ = f.__doc__.replace("norm, tile", "norm")
    assert _undocumented(f, inspect.getdoc(f)) == ["tile"]
    assert documented_parameters("Returns\n-------\nx : float\n") == set()


def test_annotation_scan_sees_a_missing_annotation():
    def f(S: object, /, *, norm: int = 2, **kwargs: object) -> float:
        return 0.0

    def g(self, S: object, tile=None):
        return None

    assert _unannotated(f) == []
    assert _unannotated(g) == ["tile", "return"]


@pytest.mark.parametrize("modname", DOCUMENTED_MODULES)
def test_every_parameter_is_documented(modname):
    missing = {q: miss for q, fn, doc in _checked(modname) if (miss := _undocumented(fn, doc))}
    assert missing == {}


@pytest.mark.parametrize("modname", DOCUMENTED_MODULES)
def test_every_public_signature_is_annotated(modname):
    missing = {q: miss for q, fn, doc in _checked(modname) if (miss := _unannotated(fn))}
    assert missing == {}


def test_every_module_with_public_functions_is_checked():
    """A module that defines a public function or method is in DOCUMENTED_MODULES, or
    in NOT_CHECKED with the reason."""
    defining = {fn.__module__ for _, fn, _ in public_callables()}
    assert defining - set(DOCUMENTED_MODULES) - set(NOT_CHECKED) == set()
    assert set(NOT_CHECKED) <= defining and set(NOT_CHECKED).isdisjoint(DOCUMENTED_MODULES)


def test_every_subpackage_is_installed():
    """A non-editable install ships only the packages listed in pyproject.toml:
    every folder of the core with an __init__.py must be there."""
    import pathlib
    import tomllib

    root = pathlib.Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"hilbertgeom." + ".".join(p.parent.relative_to(root / "hilbertgeom").parts)
             for p in (root / "hilbertgeom").rglob("__init__.py") if p.parent != root / "hilbertgeom"}
    assert found and found <= listed, sorted(found - listed)
