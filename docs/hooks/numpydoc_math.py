"""Griffe extension: numpydoc ``.. math::`` directives become display math.

mkdocstrings renders docstrings as Markdown, where an RST ``.. math::``
directive would be a paragraph (Markdown escapes eat ``\\|`` and ``\\{``) or a
code block.  Before the docstring is parsed, this extension rewrites both
forms into ``$$ ... $$`` blocks, which ``pymdownx.arithmatex`` keeps verbatim
and ``docs/hooks/mathml.py`` then typesets as MathML::

    .. math:: \\|S^\\top r\\|_2 \\le D(S)          $$
                                       ->     \\|S^\\top r\\|_2 \\le D(S)
                                              $$

    .. math::                                 $$
                                       ->     T(G) = \\max ...
        T(G) = \\max ...                       $$

Loaded by the mkdocstrings Python handler (``extensions`` in mkdocs.yml).
"""

from __future__ import annotations

import re
import textwrap

import griffe

# `.. math::` at some indent, then either the formula on the same line or a
# blank line and a block indented deeper than the directive.
_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*(?P<inline>\S.*)?$")


def rewrite(text: str) -> str:
    """Return ``text`` with every ``.. math::`` directive as ``$$`` blocks.

    As in Sphinx, blank lines inside the directive separate equations: each
    becomes its own block.

    Raises
    ------
    ValueError
        If a directive has neither an inline formula nor an indented body.
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i])
        if m is None:
            out.append(lines[i])
            i += 1
            continue
        indent = m.group("indent")
        body: list[str] = []
        if m.group("inline"):
            body.append(m.group("inline").strip())
            i += 1
        else:
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            depth = len(indent)
            while i < len(lines) and (
                not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > depth
            ):
                body.append(lines[i])
                i += 1
            body = textwrap.dedent("\n".join(body)).strip().splitlines()
            if not body:
                raise ValueError(f".. math:: directive without a formula: {lines[i - 1]!r}")
        # A display block is its own paragraph; as in Sphinx, blank lines
        # separate equations.
        if out and out[-1].strip():
            out.append("")
        for k, equation in enumerate("\n".join(body).split("\n\n")):
            if k:
                out.append("")
            lines_ = [line for line in equation.splitlines() if line.strip()]
            out.extend([indent + "$$", *(indent + b for b in lines_), indent + "$$"])
        if i < len(lines) and lines[i].strip():
            out.append("")
    return "\n".join(out)


class NumpydocMath(griffe.Extension):
    """Rewrite ``.. math::`` in every docstring before it is parsed."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        doc = obj.docstring
        if doc is not None and ".. math::" in doc.value:
            doc.value = rewrite(doc.value)
