"""MkDocs hook: typeset every formula as MathML when the site is built.

``pymdownx.arithmatex`` (generic mode) leaves ``$...$`` as
``<span class="arithmatex">\\(...\\)</span>`` and ``$$...$$`` as
``<div class="arithmatex">\\[...\\]</div>``.  This hook converts each one with
the pure-Python ``latex2mathml`` package into MathML, which browsers lay out
natively (MathML Core: Chromium 109+, Firefox, Safari), so the site shows math
with no JavaScript and no network.

latex2mathml covers the TeX this site uses but has a few gaps; the output is
repaired where the meaning is unambiguous (delimiters after ``\\bigl``/``\\Bigr``,
named negative spaces, bold letters as Unicode math alphanumerics, primes,
limits under ``\\max``/``\\sup``/... in display math, TeX's spacing around
function names and unary signs) and otherwise checked: a formula
whose MathML still holds a TeX command, an ``merror`` or a malformed length is
a conversion failure, and any failure stops the build with the page, the
formula and the reason.  Headings must be plain text (the table of contents
and the search index show them as text); a heading with math also stops the
build.
"""

from __future__ import annotations

import html
import logging
import re
import xml.etree.ElementTree as ET

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

log = logging.getLogger("mkdocs.hooks.mathml")

MATHML_NS = "http://www.w3.org/1998/Math/MathML"
ET.register_namespace("", MATHML_NS)

_ARITHMATEX = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.DOTALL)

# Delimiters that latex2mathml leaves as TeX after \bigl, \Bigr, \left, ...
_DELIMITERS = {
    r"\{": "{", r"\}": "}", r"\lbrace": "{", r"\rbrace": "}",
    r"\|": "\u2016", r"\Vert": "\u2016", r"\lVert": "\u2016", r"\rVert": "\u2016",
    r"\vert": "|", r"\lvert": "|", r"\rvert": "|",
    r"\langle": "\u27e8", r"\rangle": "\u27e9",
    r"\lfloor": "\u230a", r"\rfloor": "\u230b", r"\lceil": "\u2308", r"\rceil": "\u2309",
}
# Named spaces that MathML Core does not know.
_SPACES = {
    "negativethinmathspace": "-0.167em", "negativemediummathspace": "-0.222em",
    "negativethickmathspace": "-0.278em", "thinmathspace": "0.167em",
    "mediummathspace": "0.222em", "thickmathspace": "0.278em",
}
_LENGTH = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)(em|ex|px|pt|%)?$")
# Operators whose scripts go under/over them in display math, as in TeX.
_LIMITS = {"max", "min", "sup", "inf", "lim", "argmax", "argmin",
           "\u2211", "\u220f", "\u22c3", "\u22c2"}
_UNDEROVER = {"msub": "munder", "msup": "mover", "msubsup": "munderover"}


def _bold(text: str, italic: bool) -> str:
    """Map ASCII letters and digits to Unicode mathematical bold (italic)."""
    out = []
    for ch in text:
        if "A" <= ch <= "Z":
            out.append(chr((0x1D468 if italic else 0x1D400) + ord(ch) - ord("A")))
        elif "a" <= ch <= "z":
            out.append(chr((0x1D482 if italic else 0x1D41A) + ord(ch) - ord("a")))
        elif "0" <= ch <= "9":
            out.append(chr(0x1D7CE + ord(ch) - ord("0")))
        else:
            out.append(ch)
    return "".join(out)


def _tag(el: ET.Element) -> str:
    return el.tag.rsplit("}", 1)[-1]


def _new(tag: str, **attrs: str) -> ET.Element:
    return ET.Element(f"{{{MATHML_NS}}}{tag}", attrs)


_SEQUENCES = {"math", "mrow", "mstyle", "mtd", "msqrt", "mpadded", "mphantom", "menclose"}
_SCRIPTED = {"msub", "msup", "msubsup", "munder", "mover", "munderover"}
_OPENING = set("([{\u27e8|\u2016\u230a\u2308")
_SIGNS = {"\u2212", "+", "\u00b1", "-"}
# Operators after which a sign stays binary (TeX: closing delimiters, ordinary).
_ORDINARY_MO = set(")]}\u27e9|\u2016\u230b\u2309\u2026!\u2032\u2033\u2034")
_THIN = "0.167em"


def _is_prime(el: ET.Element) -> bool:
    if _tag(el) == "mrow" and len(el) == 1:
        el = el[0]
    return _tag(el) in ("mi", "mo") and len(el) == 0 and bool(el.text) \
        and set(el.text.strip()) <= set("\u2032\u2033\u2034")


def _base(el: ET.Element) -> ET.Element:
    while _tag(el) in _SCRIPTED and len(el):
        el = el[0]
    return el


def _space(seq: ET.Element) -> None:
    """TeX's spacing, which latex2mathml does not write, in one row.

    Function names (``\\log``, ``\\tanh``, ``\\operatorname{sign}``, ``\\max``)
    get a thin space on each side, none before an opening delimiter (TeX's
    ``mathop``); a sign at the start or after a relation, a binary operator,
    punctuation or an opening delimiter is unary (no space); a bare ``|`` is a delimiter, not a relation, and does not
    stretch.
    """
    children = list(seq)
    out: list[ET.Element] = []
    for i, child in enumerate(children):
        base = _base(child)
        name = (base.text or "").strip()
        if _tag(base) in ("mi", "mo") and len(name) > 1 and name.isalpha():
            if _tag(base) == "mo" and name not in _LIMITS:
                base.tag = f"{{{MATHML_NS}}}mi"  # \operatorname{var}: a name, not an operator
            if _tag(base) == "mo":
                base.set("lspace", "0")
                base.set("rspace", "0")
            if out and _tag(out[-1]) not in ("mo", "mspace"):
                out.append(_new("mspace", width=_THIN))
            out.append(child)
            nxt = children[i + 1] if i + 1 < len(children) else None
            if nxt is not None and not (_tag(nxt) == "mo" and (nxt.text or "").strip() in _OPENING):
                out.append(_new("mspace", width=_THIN))
            continue
        atoms = [el for el in out if _tag(el) != "mspace"]  # TeX's glue is no atom
        if _tag(child) == "mo" and name in _SIGNS and (
                not atoms or (_tag(atoms[-1]) == "mo"
                              and (atoms[-1].text or "").strip() not in _ORDINARY_MO)):
            child.set("form", "prefix")
            child.set("lspace", "0")
            child.set("rspace", "0")
        if _tag(child) == "mo" and name in ("|", "\u2016") and child.get("stretchy") is None:
            child.set("stretchy", "false")  # \lvert, \rvert: as tall as the text
            child.set("lspace", "0")
            child.set("rspace", "0")
        out.append(child)
    if len(out) != len(children):
        seq[:] = out


def to_mathml(tex: str, *, display: bool) -> str:
    """Convert one formula (without delimiters) to a checked ``<math>`` element.

    Raises
    ------
    ValueError
        Naming what is wrong, if the formula does not convert to MathML
        free of TeX.
    """
    # A control character (a tab, a form feed, a backspace) in a formula is a
    # backslash escape that a string literal ate: `\top` written as a tab and
    # `op`, `\ne` as a newline and `e` (caught for a tab and the like; newlines
    # are legitimate in display math, so that one needs reading)
    bad = sorted({hex(ord(c)) for c in tex if ord(c) < 32 and c not in "\n\r"})
    if bad:
        raise ValueError(f"control characters {bad} in a formula (an eaten backslash?): {tex!r}")
    # `\*` is how the pages escape a literal asterisk from Markdown; inside
    # arithmatex it reaches us unchanged and means `*`.
    source = tex.replace(r"\*", "*")
    # latex2mathml has no \arg (TeX's upright function name, as in \arg\min):
    # spell it as the operator name it is
    source = re.sub(r"\\arg(?![A-Za-z])", r"\\operatorname{arg}", source)
    try:
        xml = convert(source, display="block" if display else "inline")
        root = ET.fromstring(xml)
    except Exception as exc:  # latex2mathml raises many exception types
        raise ValueError(f"latex2mathml failed: {type(exc).__name__}: {exc}") from exc

    for el in root.iter():
        tag = _tag(el)
        if el.text and el.text.strip() in _DELIMITERS:
            el.text = _DELIMITERS[el.text.strip()]
        if tag == "mspace" and el.get("width") in _SPACES:
            el.set("width", _SPACES[el.get("width")])
        variant = el.get("mathvariant")
        if variant in ("bold", "bold-italic") and el.text:
            el.text = _bold(el.text, italic=variant == "bold-italic")
            el.set("mathvariant", "normal")
        if tag == "msup" and len(el) == 2 and _is_prime(el[1]):
            # d' : Unicode primes are already raised; as a superscript they
            # would be raised twice.
            prime = _new("mo", lspace="0", rspace="0")
            prime.text = "".join(el[1].itertext()).strip()
            el.tag = f"{{{MATHML_NS}}}mrow"
            el[1] = prime
        if display and tag in _UNDEROVER and len(el) and _tag(el[0]) == "mo" \
                and (el[0].text or "").strip() in _LIMITS:
            el.tag = f"{{{MATHML_NS}}}{_UNDEROVER[tag]}"

    for el in list(root.iter()):
        if _tag(el) in _SEQUENCES:
            _space(el)

    for el in root.iter():
        tag = _tag(el)
        if tag == "merror":
            raise ValueError("latex2mathml produced <merror>")
        for text in (el.text, el.tail):
            if text and "\\" in text:
                raise ValueError(f"TeX left in the MathML: {text.strip()!r}")
        for attr in ("width", "height", "depth", "lspace", "rspace", "minsize", "maxsize"):
            if el.get(attr) is not None and not _LENGTH.match(el.get(attr)):
                raise ValueError(f"invalid MathML length {attr}={el.get(attr)!r}")
    return ET.tostring(root, encoding="unicode")


def _strip_delimiters(tex: str) -> tuple[str, bool]:
    tex = tex.strip()
    for left, right, display in ((r"\(", r"\)", False), (r"\[", r"\]", True), ("$$", "$$", True)):
        if tex.startswith(left) and tex.endswith(right) and len(tex) >= len(left) + len(right):
            return tex[len(left):-len(right)], display
    return tex, True  # \begin{env} ... \end{env} blocks come without delimiters


_stats: dict = {"formulas": 0, "pages": 0, "failed": 0, "errors": []}


def on_pre_build(config, **kwargs):
    _stats.update(formulas=0, pages=0, failed=0, errors=[])


def on_page_content(html_text, page, config, files):
    where = page.file.src_uri

    def replace(m: re.Match) -> str:
        tex, display = _strip_delimiters(html.unescape(m.group(2)))
        display = display or m.group(1) == "div"
        try:
            mathml = to_mathml(tex, display=display)
        except ValueError as exc:
            _stats["failed"] += 1
            _stats["errors"].append(f"  {where}: {' '.join(tex.split())!r}: {exc}")
            return m.group(0)
        _stats["formulas"] += 1
        return f'<div class="math-display">{mathml}</div>' if display else mathml

    html_text, count = _ARITHMATEX.subn(replace, html_text)
    _stats["pages"] += count > 0

    def headings(items):
        for item in items:
            yield item
            yield from headings(item.children)

    for item in headings(page.toc):
        if re.search(r"\\[(\[]|\$|\\[A-Za-z]+", item.title):
            _stats["errors"].append(
                f"  {where}: heading {item.title!r}: write headings in plain text "
                "(the table of contents and the search index show them as text)")
    return html_text


def on_post_build(config, **kwargs):
    """Fail the build on any formula that did not convert, listing all of them."""
    if _stats["errors"]:
        raise PluginError(
            f"{_stats['failed']} of {_stats['failed'] + _stats['formulas']} formulas do not "
            "convert to MathML, or headings hold math:\n" + "\n".join(_stats["errors"]))
    log.info("mathml: %d formulas typeset as MathML on %d pages, 0 failed",
             _stats["formulas"], _stats["pages"])
