"""The documentation's code runs: every ```python block of docs/**/*.md and README.md.

Each page is one test: its blocks run in order in one namespace, as a reader
would paste them, in a temporary working directory with matplotlib on its
non-interactive backend.  A block made of ``>>>`` lines runs as a doctest
(its printed output is checked).

A block that cannot run as written is marked in the Markdown by an HTML
comment on the line before its fence, with the reason (it does not render)::

    <!-- no-run: S, G and lr are the reader's update, gradient and learning rate -->

A marker without a reason is an error.  Blocks that need what a machine may
lack -- the MiniLM wheel (``hilbertgeom.gradients.real_head_gradient``),
matplotlib, torch, or CuPy with a CUDA device -- make the rest of their page
skip, with the reason, where it is missing.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[^\n]*$")
NO_RUN = re.compile(r"^\s*<!--\s*no-run\b(?P<why>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    """A fenced ```python block: its first code line (1-based), its code, its no-run reason."""

    line: int
    code: str
    no_run: str | None


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, dedented (blocks may sit in lists or
    admonitions), each with the reason of a ``<!-- no-run: ... -->`` marker right
    before its fence (``ValueError`` for a marker without a reason)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    k = 0
    while k < len(lines):
        m = FENCE.match(lines[k])
        if not m:
            k += 1
            continue
        start, lang, indent = k, m.group("lang"), m.group("indent")
        k += 1
        body = []
        while k < len(lines) and not (lines[k].strip() == "```" and lines[k].startswith(indent)):
            body.append(lines[k])
            k += 1
        k += 1  # the closing fence
        if lang != "python":
            continue
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = NO_RUN.match(prev)
        why = None
        if mark:
            why = mark.group("why").strip().lstrip(":").strip()
            if not why:
                raise ValueError(f"line {start}: a no-run marker must say why: <!-- no-run: reason -->")
        blocks.append(Block(start + 2, textwrap.dedent("\n".join(body)), why))
    return blocks


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def missing_requirement(code: str) -> str | None:
    """Why this block cannot run on this machine, or ``None``."""
    if "real_head_gradient(" in code:
        from hilbertgeom.gradients import minilm_available

        ok, where = minilm_available()
        if not ok:
            return f"needs the MiniLM wheel ({where})"
    for module in ("matplotlib", "torch", "cupy"):
        if re.search(rf"^\s*(import|from)\s+{module}\b|^\s*import\s+.*\b{module}\b", code, flags=re.M):
            if not _installed(module):
                return f"needs {module}, which is not installed"
    if re.search(r"\bcupy\b", code):
        import hilbertgeom.gpu as hgg

        if not hgg.cuda_available():
            return f"needs a CUDA device ({hgg.cuda_unavailable_reason()})"
    return None


def run_page(path: Path, root: Path = ROOT) -> list[str]:
    """Run the page's blocks in order; return the notes of blocks not run (no-run marks)."""
    name = path.relative_to(root).as_posix()
    ns: dict = {"__name__": f"docs_example_{path.stem}"}
    skipped = []
    for b in python_blocks(path.read_text()):
        where = f"{name}:{b.line}"
        if b.no_run is not None:
            skipped.append(f"{where}: {b.no_run}")
            continue
        why = missing_requirement(b.code)
        if why:
            pytest.skip(f"{where} and the rest of the page: {why}")
        if b.code.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(b.code, ns, where, name, b.line - 1)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
            runner.run(test, clear_globs=False)
            assert runner.failures == 0, f"{where}: the doctest block fails (see the output above)"
        else:
            exec(compile(b.code, where, "exec"), ns)  # the documentation's own code
    return skipped


PAGES_WITH_CODE = [p for p in PAGES if python_blocks(p.read_text())]


@pytest.mark.parametrize("path", PAGES_WITH_CODE, ids=[p.relative_to(ROOT).as_posix() for p in PAGES_WITH_CODE])
def test_code_blocks_run(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    run_page(path)


def test_every_page_with_code_is_found():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES_WITH_CODE}
    assert {"README.md", "docs/quickstart.md"} <= names


def test_block_extraction_and_markers():
    text = textwrap.dedent("""\
        Intro.

        ```python
        x = 1
        ```

        <!-- no-run: illustrative -->
        ```python
        undefined_name
        ```

        ```bash
        echo no
        ```

        1. In a list:

            ```python
            y = x + 1
            ```
        """)
    blocks = python_blocks(text)
    assert [(b.line, b.code.strip(), b.no_run) for b in blocks] == [
        (4, "x = 1", None), (9, "undefined_name", "illustrative"), (19, "y = x + 1", None)]
    with pytest.raises(ValueError, match="must say why"):
        python_blocks("<!-- no-run -->\n```python\nx\n```\n")


def test_a_failing_block_fails_its_page(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nx = 1\n```\n\n```python\nassert x == 2, 'planted'\n```\n")
    with pytest.raises(AssertionError, match="planted"):
        run_page(page, tmp_path)
    page.write_text("```python\n>>> 1 + 1\n3\n```\n")
    with pytest.raises(AssertionError, match="doctest block fails"):
        run_page(page, tmp_path)
    page.write_text("<!-- no-run: shown only -->\n```python\nundefined_name\n```\n")
    assert run_page(page, tmp_path) == ["page.md:3: shown only"]
