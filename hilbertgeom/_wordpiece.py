"""The BERT (uncased) WordPiece tokenizer, in plain Python, from a ``vocab.txt``.

Two stages, as in Devlin et al. (2019) and Google's reference ``tokenization.py``:

1. basic tokenization: drop control characters and U+0000/U+FFFD, map whitespace
   to spaces, put spaces around CJK ideographs, split on whitespace, lower-case,
   strip accents (NFD, drop combining marks), split every punctuation character
   off as its own token;
2. WordPiece: greedy longest-match-first segmentation of each word into vocabulary
   pieces, continuation pieces prefixed with ``##``; a word that cannot be
   segmented, or longer than 100 characters, becomes ``[UNK]``.
"""

from __future__ import annotations

import unicodedata

SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # all non-letter/number ASCII is punctuation (e.g. "$", "^", "`"), as in BERT
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokenize(text: str, *, lower: bool = True) -> list[str]:
    """Stage 1: words and punctuation marks (lower-cased and accent-stripped)."""
    chars = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            chars.append(" ")
        elif _is_cjk(cp):
            chars.extend((" ", ch, " "))
        else:
            chars.append(ch)
    out = []
    for word in "".join(chars).split():
        if lower:
            word = word.lower()
            word = "".join(c for c in unicodedata.normalize("NFD", word) if unicodedata.category(c) != "Mn")
        cur: list[str] = []
        for ch in word:
            if _is_punctuation(ch):
                if cur:
                    out.append("".join(cur))
                    cur = []
                out.append(ch)
            else:
                cur.append(ch)
        if cur:
            out.append("".join(cur))
    return out


class WordPiece:
    """A WordPiece tokenizer over a vocabulary (token -> id, in ``vocab.txt`` line order).

    Parameters
    ----------
    vocab : list of str
        The vocabulary, id = position.
    lower : bool
        Lower-case and strip accents (the uncased models).
    """

    def __init__(self, vocab, *, lower: bool = True, max_chars: int = 100):
        self.vocab = list(vocab)
        self.ids = {t: i for i, t in enumerate(self.vocab)}
        self.lower = lower
        self.max_chars = max_chars
        missing = [t for t in SPECIAL if t not in self.ids]
        if missing:
            raise ValueError(f"vocab lacks the special tokens {missing}")

    @classmethod
    def from_text(cls, text: str, **kw) -> WordPiece:
        """From the contents of a ``vocab.txt`` (one token per line)."""
        return cls(text.splitlines(), **kw)

    def wordpiece(self, word: str) -> list[str]:
        """Stage 2 on one word: greedy longest match, ``##`` for continuations."""
        if len(word) > self.max_chars:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.ids:
                    break
                end -= 1
            if end == start:
                return ["[UNK]"]
            pieces.append(sub)
            start = end
        return pieces

    def tokenize(self, text: str) -> list[str]:
        """Both stages: the WordPiece tokens of ``text`` (no special tokens added)."""
        out = []
        for word in basic_tokenize(text, lower=self.lower):
            out.extend(self.wordpiece(word))
        return out

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without ``[CLS]``/``[SEP]``."""
        return [self.ids[t] for t in self.tokenize(text)]
