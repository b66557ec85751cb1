"""MkDocs hook: render numpydoc ``.. math::`` blocks of docstrings with MathJax.

mkdocstrings renders docstrings as Markdown, where an RST ``.. math::``
directive becomes a paragraph followed by a code block.  This hook turns both
forms (block and one-line) into the ``arithmatex`` elements that the MathJax
configuration in ``docs/javascripts/mathjax.js`` typesets.
"""

import re

_BLOCK = re.compile(
    r"<p>\.\. math::</p>\s*<div class=\"highlight\"><pre><span></span><code>(.*?)</code></pre></div>",
    re.S,
)
_INLINE = re.compile(r"<p>\.\. math:: (.*?)</p>", re.S)


def on_page_content(html, page, config, files):
    html = _BLOCK.sub(lambda m: f'<div class="arithmatex">\\[{m.group(1)}\\]</div>', html)
    return _INLINE.sub(lambda m: f'<div class="arithmatex">\\[{m.group(1)}\\]</div>', html)
