"""Check a built documentation site for what ``mkdocs build --strict`` lets through.

Usage::

    python docs/scripts/check_site.py SITE_DIR [--docs DOCS_DIR]

Fails (exit status 1, one line per defect) on

* raw TeX in the built HTML outside code: ``\\(``, ``\\)``, ``\\[``, ``\\]``,
  ``$`` or a TeX command such as ``\\frac`` in the text a reader sees (math
  must have been typeset to MathML by ``docs/hooks/mathml.py``); TeX in a
  title of the search index (the table of contents and search show headings
  as plain text);
* broken Markdown tables in the sources (``DOCS_DIR``, by default the folder
  above this script): a row whose cell count differs from its header's, or a
  cell with an odd number of ``$`` (a bare ``|`` inside a formula split it);
* a script, stylesheet, font or other embedded resource loaded from an
  external ``http(s)://`` or ``//`` URL (HTML ``src``/``href`` of ``script``,
  ``link``, ``img``, ``iframe``, ...; ``url()`` and ``@import`` in CSS): the
  site must work offline.

On success it prints how many pages, formulas and tables it checked.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

# Elements whose text is not prose: code, scripts, and typeset MathML.
_SKIP = {"code", "pre", "script", "style", "math", "kbd", "samp", "textarea"}
_TEX = re.compile(r"\\[()\[\]]|\$|\\[A-Za-z]+")
_EXTERNAL = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
# Elements that embed a resource (as opposed to <a href>, a link for the reader).
_EMBED = {"script": "src", "img": "src", "iframe": "src", "embed": "src", "source": "src",
          "audio": "src", "video": "src", "track": "src", "object": "data", "link": "href"}
_LINK_RELS_OK = {"canonical", "alternate", "author", "license", "help", "next", "prev"}
_CSS_URL = re.compile(r"""url\(\s*(['"]?)(.*?)\1\s*\)|@import\s+(['"])(.*?)\3""",
                      re.IGNORECASE | re.DOTALL)
_CSS_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def _snippet(text: str, start: int, width: int = 40) -> str:
    return " ".join(text[max(0, start - width):start + width].split())


def css_externals(css: str) -> list[str]:
    """External URLs fetched by a stylesheet (``url()``, ``@import``)."""
    css = _CSS_COMMENT.sub("", css)
    urls = [m.group(2) or m.group(4) for m in _CSS_URL.finditer(css)]
    return [u for u in urls if u and _EXTERNAL.match(u)]


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip: dict[str, int] = {}
        self.tex: list[tuple[int, str]] = []
        self.external: list[tuple[int, str]] = []
        self.formulas = 0

    def handle_starttag(self, tag, attrs):
        self._resource(tag, dict(attrs))
        if tag == "math":
            self.formulas += 1
        if tag in _SKIP:
            self.skip[tag] = self.skip.get(tag, 0) + 1

    def handle_startendtag(self, tag, attrs):
        self._resource(tag, dict(attrs))

    def handle_endtag(self, tag):
        if self.skip.get(tag):
            self.skip[tag] -= 1

    def _resource(self, tag, attrs):
        line = self.getpos()[0]
        attr = _EMBED.get(tag)
        url = attrs.get(attr) if attr else None
        if tag == "link" and set((attrs.get("rel") or "").lower().split()) & _LINK_RELS_OK:
            url = None
        if url and _EXTERNAL.match(url):
            self.external.append((line, f"<{tag} {attr}={url!r}>"))
        for url in css_externals(attrs.get("style") or ""):
            self.external.append((line, f"style attribute loads {url!r}"))

    def handle_data(self, data):
        if self.skip.get("style"):
            for url in css_externals(data):
                self.external.append((self.getpos()[0], f"<style> loads {url!r}"))
        if any(self.skip.values()):
            return
        for m in _TEX.finditer(data):
            self.tex.append((self.getpos()[0], f"raw TeX {m.group(0)!r} in {_snippet(data, m.start())!r}"))


def check_html(site: Path) -> tuple[list[str], int, int]:
    """Raw TeX and external resources in every page; (defects, pages, formulas)."""
    defects: list[str] = []
    pages = formulas = 0
    for path in sorted(site.rglob("*.html")):
        parser = _PageParser()
        parser.feed(path.read_text(encoding="utf-8"))
        parser.close()
        pages += 1
        formulas += parser.formulas
        rel = path.relative_to(site)
        defects += [f"{rel}:{line}: {what}" for line, what in parser.tex + parser.external]
    for path in sorted(site.rglob("*.css")):
        rel = path.relative_to(site)
        defects += [f"{rel}: stylesheet loads {url!r}"
                    for url in css_externals(path.read_text(encoding="utf-8"))]
    return defects, pages, formulas


def check_search_index(site: Path) -> list[str]:
    """TeX in the titles (headings) of the search index, or its delimiters anywhere."""
    path = site / "search" / "search_index.json"
    if not path.exists():
        return []
    defects = []
    for doc in json.loads(path.read_text(encoding="utf-8"))["docs"]:
        m = _TEX.search(doc.get("title", ""))
        if m:
            defects.append(f"search index: heading {doc['title']!r} ({doc['location']}) "
                           f"holds TeX {m.group(0)!r}")
        m = re.search(r"\\[()\[\]]", doc.get("text", ""))
        if m:
            defects.append(f"search index: text of {doc['location']} holds TeX delimiter "
                           f"{m.group(0)!r}: {_snippet(doc['text'], m.start())!r}")
    return defects


_DELIM_ROW = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def split_row(line: str) -> list[str]:
    """Cells of a Markdown table row, split as Python-Markdown's ``tables`` does.

    A ``|`` splits unless it is escaped (``\\|``) or inside a code span; a
    ``|`` inside ``$...$`` does split (that is the defect this looks for).
    """
    line = line.strip()
    line = line.removeprefix("|")
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells, cell, i, tick = [], [], 0, 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line):
            cell.append(line[i:i + 2])
            i += 2
            continue
        if ch == "`":
            run = len(line[i:]) - len(line[i:].lstrip("`"))
            if tick == 0:
                tick = run if line.find("`" * run, i + run) >= 0 else 0
            elif run == tick:
                tick = 0
            cell.append("`" * run)
            i += run
            continue
        if ch == "|" and tick == 0:
            cells.append("".join(cell))
            cell = []
        else:
            cell.append(ch)
        i += 1
    cells.append("".join(cell))
    return cells


def _dollars(cell: str) -> int:
    cell = re.sub(r"(`+).*?\1", "", cell)  # code spans
    return len(re.findall(r"(?<!\\)\$", cell))


def check_tables(docs: Path) -> tuple[list[str], int]:
    """Broken tables in the Markdown sources; (defects, tables)."""
    defects: list[str] = []
    tables = 0
    for path in sorted(docs.rglob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        rel = path.relative_to(docs)
        fenced = False
        i = 0
        while i < len(lines):
            if _FENCE.match(lines[i]):
                fenced = not fenced
            if fenced or "|" not in lines[i] or i + 1 >= len(lines) \
                    or not _DELIM_ROW.match(lines[i + 1]) or "|" not in lines[i + 1]:
                i += 1
                continue
            tables += 1
            ncols = len(split_row(lines[i]))
            j = i
            while j < len(lines) and lines[j].strip() and "|" in lines[j]:
                if j != i + 1:
                    cells = split_row(lines[j])
                    if len(cells) != ncols:
                        defects.append(f"{rel}:{j + 1}: table row has {len(cells)} cells, "
                                       f"its header {ncols}")
                    for cell in cells:
                        if _dollars(cell) % 2:
                            defects.append(f"{rel}:{j + 1}: a '|' split a formula: cell "
                                           f"{cell.strip()!r} (write \\lvert x \\rvert)")
                j += 1
            i = j
    return defects, tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site (mkdocs --site-dir)")
    parser.add_argument("--docs", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the Markdown sources (default: the docs folder of this script)")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        parser.error(f"site {str(args.site)!r} has no index.html; build it first")
    if not args.docs.is_dir():
        parser.error(f"docs {str(args.docs)!r} is not a folder")
    html_defects, pages, formulas = check_html(args.site)
    table_defects, tables = check_tables(args.docs)
    defects = html_defects + check_search_index(args.site) + table_defects
    for line in defects:
        print(line)
    if defects:
        print(f"check_site: {len(defects)} defects", file=sys.stderr)
        return 1
    print(f"check_site: {pages} pages, {formulas} formulas (MathML), {tables} tables: "
          "no raw TeX, no broken table, no external script, stylesheet or font")
    return 0


if __name__ == "__main__":
    sys.exit(main())
