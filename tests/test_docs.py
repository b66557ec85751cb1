"""The documentation renders with no network: math typeset to MathML at build time.

The site is built once per session (``mkdocs build --strict``, a few seconds).
Checked here:

* ``docs/hooks/mathml.py`` against what latex2mathml gets wrong, and a build
  that must fail on a formula that does not convert and on a heading with math;
* ``docs/hooks/numpydoc_math.py`` (``.. math::`` in docstrings);
* ``docs/scripts/check_site.py`` passes on the built site and fails on each
  planted defect: raw TeX, TeX in a heading of the search index, a table row
  with a formula split by ``|``, an external script, stylesheet or font;
* the built page in Chromium: every formula laid out with a size, fractions
  stacked, superscripts raised, no TeX in the text a reader sees.  Skipped,
  with the reason, where no Chromium is installed.

Needs the ``docs`` extra (``pip install '.[docs]'``); skipped without it.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="docs extra not installed: pip install '.[docs]'")
pytest.importorskip("latex2mathml", reason="docs extra not installed: pip install '.[docs]'")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mathml = _load("hg_docs_mathml", DOCS / "hooks" / "mathml.py")
numpydoc_math = _load("hg_docs_numpydoc_math", DOCS / "hooks" / "numpydoc_math.py")
check_site = _load("hg_docs_check_site", DOCS / "scripts" / "check_site.py")


def _mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
         "-f", str(config), "--site-dir", str(site)],
        cwd=config.parent, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = _mkdocs(ROOT / "mkdocs.yml", out)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-4000:]}"
    return out


# --------------------------------------------------------------------------
# The MathML hook


def _text(xml: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", xml))


@pytest.mark.parametrize(
    "tex, expected",
    [
        # latex2mathml leaves the delimiter after \bigl / \Bigr as TeX.
        (r"\bigl\{ a \bigr\}", "{a}"),
        (r"\Bigl\| x \Bigr\|", "\u2016x\u2016"),
        (r"\bigl\langle a, b\bigr\rangle", "\u27e8a,b\u27e9"),
        # \mathbf as Unicode bold (MathML Core ignores mathvariant="bold").
        (r"\mathbf 1^\top G", "\U0001d7cf\u22a4G"),
        # A Markdown-escaped asterisk.
        (r"\delta^\*(n, d)", "\u03b4*(n,d)"),
    ],
)
def test_mathml_repairs(tex, expected):
    xml = mathml.to_mathml(tex, display=False)
    assert _text(xml) == expected
    assert "\\" not in _text(xml)


def test_mathml_spacing_and_limits():
    # \! is a negative thin space, not the invalid name latex2mathml writes.
    assert 'width="-0.167em"' in mathml.to_mathml(r"a\!b", display=False)
    # Display math puts the limits of \max under it, inline math beside it (as TeX).
    assert "<munder>" in mathml.to_mathml(r"\max_{i<j} x_{ij}", display=True)
    assert "<munder>" not in mathml.to_mathml(r"\max_{i<j} x_{ij}", display=False)
    # A prime is a raised glyph already, not a superscript.
    xml = mathml.to_mathml(r"(d'+1)", display=False)
    assert "<msup>" not in xml and _text(xml) == "(d\u2032+1)"
    # Unary minus after a relation: no binary-operator space.
    unary = r'<mo form="prefix" lspace="0" rspace="0">\u2212</mo>'
    assert len(re.findall(unary, mathml.to_mathml(r"S = -\eta\Phi", display=False))) == 1
    assert len(re.findall(unary, mathml.to_mathml(r"(-a, -b)", display=False))) == 2
    # ... but binary after a closing delimiter or a prime.
    assert not re.findall(unary, mathml.to_mathml(r"(a+b) - c + d' - e", display=False))


def test_mathml_spells_arg_as_an_operator_name():
    # latex2mathml has no \arg; the hook rewrites it, so \arg\min reads "arg min"
    assert _text(mathml.to_mathml(r"\arg\min_x f", display=False)).startswith("argmin")


@pytest.mark.parametrize("tex", ["L = BWB^\top", "12\times 2", "a \x08eta"])
def test_mathml_rejects_control_characters(tex):
    """A backslash eaten by a string literal leaves a tab (or a backspace) in the formula."""
    with pytest.raises(ValueError, match="control characters"):
        mathml.to_mathml(tex, display=False)


@pytest.mark.parametrize("tex", [r"\lefteqn{x} f", r"\foo{x}", r"\frac{1}{"])
def test_mathml_rejects_what_it_cannot_convert(tex):
    with pytest.raises(ValueError, match=r"TeX left|latex2mathml failed"):
        mathml.to_mathml(tex, display=True)


def test_build_fails_on_unconvertible_math_and_math_in_headings(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(
        "# Page\n\nGood $a^2$, bad $\\lefteqn{x} f$.\n\n## On $D(S)$\n\ntext\n")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: t\nmarkdown_extensions:\n  - toc\n  - pymdownx.arithmatex:\n"
        "      generic: true\n"
        f"hooks:\n  - {DOCS / 'hooks' / 'mathml.py'}\n")
    proc = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode != 0
    assert "1 of 3 formulas do not convert to MathML" in proc.stderr  # a^2, D(S) convert
    assert r"index.md: '\\lefteqn{x} f': TeX left in the MathML" in proc.stderr
    assert "index.md: heading 'On \\\\(D(S)\\\\)': write headings in plain text" in proc.stderr


# --------------------------------------------------------------------------
# numpydoc `.. math::`


def test_numpydoc_math_rewrite():
    doc = (
        "Summary.\n\n"
        "    .. math:: \\|S^\\top r\\|_2 \\le D(S)\n"
        "    Sharp.\n\n"
        ".. math::\n\n"
        "    a = b\n"
        "      + c\n\n"
        "    d = e\n\n"
        "After.\n"
    )
    assert numpydoc_math.rewrite(doc) == (
        "Summary.\n\n"
        "    $$\n    \\|S^\\top r\\|_2 \\le D(S)\n    $$\n\n"
        "    Sharp.\n\n"
        "$$\na = b\n  + c\n$$\n\n$$\nd = e\n$$\n\n"
        "After."
    )
    with pytest.raises(ValueError, match="without a formula"):
        numpydoc_math.rewrite("x\n\n.. math::\n\ny\n")


def _formula_near(page: str, anchor: str) -> str:
    """Text of the first formula after ``id="anchor"`` in a built page."""
    start = page.index(f'id="{anchor}"')
    return _text(re.search(r"<math .*?</math>", page[start:], re.DOTALL).group(0))


def test_api_page_docstring_math(site):
    page = (site / "api" / "index.html").read_text()
    # One-line `.. math::` keeps its \| (Markdown escapes turned it into | before).
    assert _formula_near(page, "hilbertgeom.head.backward_bound").startswith("\u2016S\u22a4r\u20162")
    # The module docstring's block holds two equations separated by a blank
    # line (as Sphinx reads it): two display formulas, no TeX left.
    start = page.index('id="hilbertgeom.tension"')
    section = page[start:page.index('id="hilbertgeom.tension.', start)]
    formulas = re.findall(r'<math [^>]*display="block".*?</math>', section, re.DOTALL)
    assert len(formulas) == 2
    assert _text(formulas[0]).replace(" ", "").startswith("minS")
    assert _text(formulas[1]).startswith("T(G)=")
    assert "\\" not in _text(section)


# --------------------------------------------------------------------------
# The site check


def test_site_check_passes(site, capsys):
    assert check_site.main([str(site)]) == 0
    assert re.search(r"\d+ pages, [1-9]\d* formulas \(MathML\)", capsys.readouterr().out)


def _source_formulas(text: str) -> int:
    """``$...$`` and ``$$...$$`` formulas of a Markdown page, outside code."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    count = len(re.findall(r"\$\$.+?\$\$", text, re.DOTALL))
    text = re.sub(r"\$\$.+?\$\$", "", text, flags=re.DOTALL)
    inline = re.findall(r"(?<!\\)\$([^$]+?)\$", text)
    return count + sum("\n\n" not in m for m in inline)


def test_every_source_formula_is_typeset(site):
    # Counted from the Markdown independently of arithmatex and the hook: a
    # page built from Markdown alone has exactly as many <math> elements as
    # its source has formulas; one with ::: (docstrings) at least as many.
    checked = 0
    for source in sorted(DOCS.rglob("*.md")):
        rel = source.relative_to(DOCS).with_suffix("")
        built = site / (rel.parent if rel.name == "index" else rel) / "index.html"
        text = source.read_text()
        expected, got = _source_formulas(text), built.read_text().count("<math ")
        if re.search(r"^:::", text, re.MULTILINE):
            assert got >= expected, rel
        else:
            assert got == expected, rel
        checked += expected
    assert checked > 100


_PLANTS = {
    "raw inline TeX": ("</article>", r"<p>An LM head \(U \in \mathbb{R}^{V\times d}\)</p></article>"),
    "dollar math": ("</article>", "<p>The diameter $D(S)$.</p></article>"),
    "bare TeX command": ("</article>", r"<p>hence \frac12 of it</p></article>"),
    "CDN script": ("</body>", '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"></script></body>'),
    "web-font stylesheet": ("</head>", '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto"></head>'),
    "protocol-relative script": ("</body>", '<script src="//example.org/x.js"></script></body>'),
    "font in inline style": ("</head>", "<style>@font-face{font-family:X;src:url(https://fonts.gstatic.com/x.woff2)}</style></head>"),
}


@pytest.fixture
def one_page_site(site, tmp_path):
    """A copy of the built site's formula-heavy page and the assets it links."""
    out = tmp_path / "site"
    for part in ("index.html", "theory/geometry/index.html", "assets", "stylesheets", "search"):
        src, dst = site / part, out / part
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    return out


def test_site_check_controls(one_page_site):
    page = one_page_site / "theory" / "geometry" / "index.html"
    text = page.read_text()
    # Not defects: TeX in code, links for the reader to external sites.
    page.write_text(text.replace("</article>", r"<p><code>\frac{a}{b} $x$</code> "
                                 '<a href="https://arxiv.org/abs/2608.22253">paper</a></p></article>'))
    assert check_site.check_html(one_page_site)[0] == []


@pytest.mark.parametrize("plant", sorted(_PLANTS))
def test_site_check_fails_on_planted_defect(one_page_site, plant):
    page = one_page_site / "theory" / "geometry" / "index.html"
    old, new = _PLANTS[plant]
    text = page.read_text()
    assert old in text
    page.write_text(text.replace(old, new, 1))
    defects, _, _ = check_site.check_html(one_page_site)
    assert len(defects) >= 1 and all(d.startswith("theory/geometry/index.html:") for d in defects)


def test_site_check_fails_on_external_font_in_css(one_page_site):
    css = one_page_site / "stylesheets" / "math.css"
    css.write_text(css.read_text() + "\n@import url('https://fonts.googleapis.com/css2?family=STIX+Two+Math');\n")
    defects, _, _ = check_site.check_html(one_page_site)
    assert defects == [("stylesheets/math.css: stylesheet loads "
                        "'https://fonts.googleapis.com/css2?family=STIX+Two+Math'")]
    assert check_site.main([str(one_page_site)]) == 1


def test_site_check_fails_on_tex_heading_in_search_index(one_page_site):
    index = one_page_site / "search" / "search_index.json"
    data = json.loads(index.read_text())
    data["docs"].append({"location": "x/", "title": r"I7. \(D\) is a seminorm", "text": ""})
    index.write_text(json.dumps(data))
    assert check_site.check_search_index(one_page_site) == [
        r"search index: heading 'I7. \\(D\\) is a seminorm' (x/) holds TeX '\\('"]


def test_table_check(tmp_path):
    source = (DOCS / "theory" / "tension.md").read_text()
    (tmp_path / "t.md").write_text(source)
    assert check_site.check_tables(tmp_path)[0] == []
    # The defect the I18 table had: a bare | inside math splits the row.
    broken = source.replace(r"\lvert g_{ik}\rvert", "|g_{ik}|", 1)
    assert broken != source
    (tmp_path / "t.md").write_text(broken)
    defects = check_site.check_tables(tmp_path)[0]
    assert any("table row has 6 cells, its header 4" in d for d in defects), defects
    assert any("a '|' split a formula" in d for d in defects), defects
    # Escaped pipes and pipes in code spans do not split.
    assert check_site.split_row(r"| `a|b` | $\|x\|$ | c \| d |") == [" `a|b` ", r" $\|x\|$ ", r" c \| d "]


# --------------------------------------------------------------------------
# What a reader sees, in a real browser

_MEASURE = r"""
<script>
(function () {
  const box = (e) => e.getBoundingClientRect();
  const maths = [...document.querySelectorAll("math")];
  const sized = maths.filter((m) => box(m).width > 0 && box(m).height > 0).length;
  const fracs = [...document.querySelectorAll("mfrac")].filter((f) => f.children.length === 2);
  const stacked = fracs.filter((f) => box(f.children[0]).bottom <= box(f.children[1]).top + 0.5).length;
  const sups = [...document.querySelectorAll("msup")].filter((s) => s.children.length === 2);
  const raised = sups.filter((s) => box(s.children[1]).bottom < box(s.children[0]).bottom - 1).length;
  let prose = "";
  const walk = document.createTreeWalker(document.querySelector("article"), NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    if (!walk.currentNode.parentElement.closest("code, pre, script, style")) prose += walk.currentNode.data;
  }
  const tex = prose.match(/\\[()\[\]]|\\[A-Za-z]+|\$/g) || [];
  const pre = document.createElement("pre");
  pre.id = "hg-measure";
  pre.textContent = JSON.stringify({math: maths.length, sized, fracs: fracs.length, stacked,
                                    sups: sups.length, raised, tex: tex.slice(0, 5)});
  document.body.appendChild(pre);
})();
</script>
"""


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def test_browser_lays_out_formulas(site):
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed: apt-get install chromium (the layout check "
                    "needs a browser that renders MathML)")
    page = site / "theory" / "geometry" / "index.html"
    text = page.read_text()
    probe = page.with_name("measure.html")
    probe.write_text(text.replace("</body>", _MEASURE + "</body>"))
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--window-size=1280,2000",
             "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120, check=False,
        )
    m = re.search(r'<pre id="hg-measure">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert m, f"no measurement in the DOM Chromium dumped:\n{proc.stderr[-2000:]}"
    got = json.loads(html.unescape(m.group(1)))
    # Counted independently from the HTML file.
    assert got["math"] == text.count("<math ") > 100
    assert got["sized"] == got["math"], got        # every formula occupies space
    assert got["fracs"] == len(re.findall(r"<mfrac[ >]", text)) >= 5, got
    assert got["stacked"] == got["fracs"], got    # numerator over denominator
    assert got["sups"] == len(re.findall(r"<msup[ >]", text)) >= 10, got
    assert got["raised"] == got["sups"], got      # exponents raised
    assert got["tex"] == [], got                   # no TeX in the text a reader sees
