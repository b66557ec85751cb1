"""Every comparison tolerance in the tests comes from ``hilbertgeom.tolerances``.

A literal tolerance (``rel=1e-9``, ``atol=1e-12``) says nothing about where the
number comes from, and a failing check is too easily "fixed" by loosening it.
The tests take their tolerances from the policy instead: ``tolerance(kind, dtype,
d=...)``, the named accuracies (``SDP_RTOL``, ``EQUALIZER_RTOL``),
the ``tol`` a solve was asked for, or an expression in the unit roundoff with its
derivation next to it (``tests/helpers.py``: ``U64``, ``kernel_rtol``, ``gamma``).

This test scans ``tests/*.py`` and fails naming ``file:line`` for

* a keyword ``rtol=``, ``atol=``, ``rel=`` or ``abs=`` whose value is a numeric
  literal or an expression of literals only (``1e-9``, ``16 * 2.0**-53``); ``0``
  is allowed (no relative or no absolute part);
* ``pytest.approx`` without an explicit ``abs=`` (pytest then adds a hidden absolute
  ``1e-12``, and without ``rel=`` a hidden relative ``1e-6``);
* ``np.allclose`` / ``np.isclose`` without explicit ``rtol=`` and ``atol=``, and
  ``np.testing.assert_allclose`` without an explicit ``rtol=`` (their defaults
  ``1e-5``, ``1e-8`` and ``1e-7`` are literal tolerances too).

A line that holds such a keyword on purpose (an invalid ``rtol`` passed to check
its error message) says so with a comment ``# not a tolerance: <why>``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
MARK = "# not a tolerance:"

# keyword argument style (no space before "="), a value made of digits, ".", "e",
# operators and parentheses only, ending the argument
LITERAL_KW = re.compile(r"(?<![\w.])(?P<kw>rtol|atol|rel|abs)=(?P<value>[-+*/(). \d_eE]+?)\s*(?=[,)]|$)")


def _is_zero(value: str) -> bool:
    try:
        return float(eval(value, {"__builtins__": {}}, {})) == 0.0  # digits and operators only (the regex)
    except (SyntaxError, TypeError, ArithmeticError):  # not a plain number: report it
        return False


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def violations(text: str, name: str) -> list[str]:
    """``name:line: what`` for each literal or implicit tolerance in the source ``text``."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines, 1):
        if MARK in line:
            continue
        code = line.split("#", 1)[0]
        for m in LITERAL_KW.finditer(code):
            if not _is_zero(m.group("value")):
                out.append(f"{name}:{i}: literal tolerance {m.group('kw')}={m.group('value').strip()}")
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call) or MARK in lines[node.lineno - 1]:
            continue
        fn, kws = _call_name(node), {k.arg for k in node.keywords}
        if None in kws:  # **kwargs: cannot tell
            continue
        if fn == "approx" and "abs" not in kws:
            out.append(f"{name}:{node.lineno}: approx() without abs= (pytest's hidden abs=1e-12"
                       f"{'' if 'rel' in kws else ' and rel=1e-6'})")
        elif fn in ("allclose", "isclose") and not {"rtol", "atol"} <= kws:
            out.append(f"{name}:{node.lineno}: {fn}() without rtol= and atol= (NumPy's defaults 1e-5, 1e-8)")
        elif fn == "assert_allclose" and "rtol" not in kws:
            out.append(f"{name}:{node.lineno}: assert_allclose() without rtol= (NumPy's default 1e-7)")
    return sorted(set(out), key=lambda s: int(s.split(":")[1]))


def test_no_literal_tolerances_in_the_tests():
    found = []
    for path in sorted(TESTS.glob("*.py")):
        found += violations(path.read_text(), f"tests/{path.name}")
    assert not found, ("comparison tolerances must come from hilbertgeom.tolerances (see this module's "
                       "docstring):\n" + "\n".join(found))


# the scanner itself, on planted sources (built by concatenation, so that this file holds none)
EQ = "="


@pytest.mark.parametrize("src, hit", [
    ("assert x == pytest.approx(y, rel" + EQ + "1e-9, abs" + EQ + "0)\n", "rel=1e-9"),
    ("np.testing.assert_allclose(a, b, rtol" + EQ + "0, atol" + EQ + "16 * 2.0**-53)\n", "atol=16 * 2.0**-53"),
    ("f(x, atol" + EQ + "1e-12)\n", "atol=1e-12"),
    ("assert x == pytest.approx(y, rel" + EQ + "r)\n", "approx() without abs="),
    ("assert x == pytest.approx(y)\n", "hidden abs=1e-12 and rel=1e-6"),
    ("assert np.allclose(a, b)\n", "allclose() without rtol="),
    ("np.testing.assert_allclose(a, b, atol" + EQ + "t)\n", "assert_allclose() without rtol="),
])
def test_the_scanner_finds_planted_literals(src, hit):
    (v,) = violations(src, "planted.py")
    assert v.startswith("planted.py:1: ") and hit in v


@pytest.mark.parametrize("src", [
    "assert x == pytest.approx(y, rel" + EQ + "tol + kernel_rtol(n), abs" + EQ + "0)\n",
    "np.testing.assert_allclose(a, b, rtol" + EQ + "0, atol" + EQ + "16 * U64)\n",
    "assert x == pytest.approx(y, rel" + EQ + "0.5 * 10.0 ** (1 - printed), abs" + EQ + "0)\n",
    "assert np.allclose(a, b, rtol" + EQ + "0, atol" + EQ + "EXACT.atol)\n",
    "rtol = 1e-5  # an input of the assertion under test, not a comparison tolerance\n",
    "f(tol" + EQ + "1e-10, tol_gap_abs" + EQ + "1e-10)  # solver options\n",
    "dict(rtol" + EQ + "-1e-3)  " + MARK + " bad input\n",
])
def test_the_scanner_accepts_policy_tolerances_and_inputs(src):
    assert violations(src, "ok.py") == []
