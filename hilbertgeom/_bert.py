"""The BERT encoder forward pass in NumPy (inference: no dropout).

Devlin et al. (2019), as laid out in the Hugging Face ``BertModel`` checkpoints:

* embeddings: ``word[ids] + position[0..n) + token_type[0]``, then LayerNorm;
* per layer (post-LayerNorm): ``x = LN(x + W_o attn(x) + b_o)`` with multi-head
  scaled dot-product self-attention (keys of padded positions masked out), then
  ``x = LN(x + W_2 gelu(W_1 x + b_1) + b_2)``, GELU in its exact erf form
  ``gelu(t) = t (1 + erf(t / sqrt 2)) / 2``.

Weights are NumPy arrays named as in the checkpoint (``encoder.layer.3.attention
.self.query.weight`` is ``(out, in)``: ``y = x W^T + b``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf


def _layer_norm(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + eps) * w + b


def _gelu(x):
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0).astype(x.dtype)))


def _linear(x, W, b):
    # one 2-D GEMM (stacked matmul does not reach BLAS as one call)
    y = x.reshape(-1, x.shape[-1]) @ W.T
    y += b
    return y.reshape(*x.shape[:-1], W.shape[0])


class BertEncoder:
    """A BERT encoder from a name -> array dict and the model's ``config.json`` dict.

    Parameters
    ----------
    tensors : dict
        Checkpoint tensors (``embeddings.*``, ``encoder.layer.<i>.*``).
    config : dict
        ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``layer_norm_eps``,
        ``hidden_act`` (must be ``"gelu"``).
    dtype : numpy dtype
        Working precision (float32 by default; float64 for reference runs).
    """

    def __init__(self, tensors: dict, config: dict, *, dtype=np.float32):
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"only the erf GELU is implemented; config has hidden_act={config['hidden_act']!r}")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are implemented")
        self.dtype = np.dtype(dtype)
        self.hidden = int(config["hidden_size"])
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        if self.hidden % self.heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        self.t = {k: np.ascontiguousarray(v, dtype=self.dtype) for k, v in tensors.items()
                  if k.startswith(("embeddings.", "encoder."))}
        self.max_len = self.t["embeddings.position_embeddings.weight"].shape[0]

    @property
    def word_embeddings(self) -> np.ndarray:
        """The ``(vocab, hidden)`` word-embedding table ``E`` (the tied head)."""
        return self.t["embeddings.word_embeddings.weight"]

    def __call__(self, ids, mask=None) -> np.ndarray:
        """Final hidden states ``(batch, n, hidden)`` of token ids ``(batch, n)``.

        ``mask`` (``(batch, n)``, 1 for real tokens, 0 for padding) defaults to all ones.
        """
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 2:
            raise ValueError(f"ids must be 2-D (batch, n); got shape {ids.shape}")
        B, n = ids.shape
        if n > self.max_len:
            raise ValueError(f"sequences of {n} tokens exceed the model's {self.max_len} positions")
        mask = np.ones((B, n), dtype=bool) if mask is None else np.asarray(mask).astype(bool)
        t, dt = self.t, self.dtype
        x = (t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][:n]
             + t["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], self.eps)
        h, dh = self.heads, self.hidden // self.heads
        # additive key mask: a large negative number (not -inf: a fully padded row stays finite)
        key_bias = np.where(mask, 0.0, np.finfo(dt).min / 2).astype(dt)[:, None, None, :]
        scale = dt.type(1.0 / np.sqrt(dh))
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def split(y):
                return np.ascontiguousarray(y.reshape(B, n, h, dh).transpose(0, 2, 1, 3))

            q = split(_linear(x, t[p + "attention.self.query.weight"], t[p + "attention.self.query.bias"]))
            k = split(_linear(x, t[p + "attention.self.key.weight"], t[p + "attention.self.key.bias"]))
            v = split(_linear(x, t[p + "attention.self.value.weight"], t[p + "attention.self.value.bias"]))
            s = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))
            s *= scale
            s += key_bias
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(B, n, self.hidden)
            a = _linear(ctx, t[p + "attention.output.dense.weight"], t[p + "attention.output.dense.bias"])
            x = _layer_norm(x + a, t[p + "attention.output.LayerNorm.weight"],
                            t[p + "attention.output.LayerNorm.bias"], self.eps)
            f = _gelu(_linear(x, t[p + "intermediate.dense.weight"], t[p + "intermediate.dense.bias"]))
            f = _linear(f, t[p + "output.dense.weight"], t[p + "output.dense.bias"])
            x = _layer_norm(x + f, t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"], self.eps)
        return x
