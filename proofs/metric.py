r"""Identities I1, I2, I4: the Hilbert metric, the softmax isometry, the TV bound.

**I1.** With $a_i = \log(p_i/q_i)$: $a_i - a_j = \log(p_i/p_j) - \log(q_i/q_j)$, so
$H = \max_i a_i - \min_i a_i$ is the largest change of a pairwise log-odds; and
$a_i(\alpha p, \beta q) = a_i(p, q) + \log(\alpha/\beta)$ (projective invariance).

**I2.** For $p = \operatorname{softmax} z$, $q = \operatorname{softmax} z'$:
$a_i - a_j = (z_i - z'_i) - (z_j - z'_j)$, hence $H(p, q) = \operatorname{var}(z - z')$.

**I4.** With $b = t^2 a$: $(t-1)^2 a - (t^2 a - 1)(1 - a) = (ta - 1)^2 \ge 0$, i.e.
$\frac{(b-1)(1-a)}{b-a} \le \frac{t-1}{t+1}$; and $\frac{e^{d/2}-1}{e^{d/2}+1} = \tanh(d/4)$.
The witness $p = (1, t)/(1+t)$, $q = (t, 1)/(1+t)$ has $H = \log t^2$ and
$\mathrm{TV} = (t-1)/(t+1)$ exactly.

Source: arXiv 2608.22253 (v2), section on the metric; Birkhoff (1957) for I5.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from ._base import ProofResult, Steps

__all__ = ["check_i1", "check_i2", "check_i4"]


def check_i1(*, seed: int = 0, quick: bool = False) -> ProofResult:
    p = sp.symbols("p1:4", positive=True)
    q = sp.symbols("q1:4", positive=True)
    al, be = sp.symbols("alpha beta", positive=True)
    st = Steps()
    a = [sp.log(p[i] / q[i]) for i in range(3)]
    for i in range(3):
        for j in range(3):
            st.zero(f"a_{i}-a_{j} = log-odds change", sp.expand_log(a[i] - a[j] - (sp.log(p[i] / p[j]) - sp.log(q[i] / q[j])), force=True))
    a2 = [sp.log(al * p[i] / (be * q[i])) for i in range(3)]
    for i in range(3):
        st.zero(f"projective shift a_{i}", sp.expand_log(a2[i] - a[i] - sp.log(al / be), force=True))
    # numeric: the library's H against the log-odds maximum
    from hilbertgeom import hilbert_distance

    rng = np.random.default_rng(seed)
    for _ in range(20 if quick else 200):
        n = int(rng.integers(2, 8))
        pv, qv = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n))
        lo = np.log(pv)[:, None] - np.log(pv)[None, :] - (np.log(qv)[:, None] - np.log(qv)[None, :])
        h = hilbert_distance(pv, qv)
        st.residual(h - np.abs(lo).max(), 1.0 + h)
    return st.result("I1", "H(p,q) = max_i a_i - min_i a_i = max log-odds change; projective",
                     "arXiv 2608.22253; Hilbert (1895)")


def check_i2(*, seed: int = 0, quick: bool = False) -> ProofResult:
    z = sp.symbols("z1:4", real=True)
    w = sp.symbols("w1:4", real=True)
    Z = sum(sp.exp(x) for x in z)
    W = sum(sp.exp(x) for x in w)
    st = Steps()
    a = [sp.log((sp.exp(z[i]) / Z) / (sp.exp(w[i]) / W)) for i in range(3)]
    for i in range(3):
        for j in range(3):
            expr = sp.expand_log(a[i] - a[j], force=True) - ((z[i] - w[i]) - (z[j] - w[j]))
            st.zero(f"softmax log-ratio difference ({i},{j})", sp.simplify(expr))
    return st.result("I2", "H(softmax z, softmax z') = var(z - z')", "arXiv 2608.22253")


def check_i4(*, seed: int = 0, quick: bool = False, constant: int = 4) -> ProofResult:
    """``constant`` is the 4 of tanh(H/4); any other value makes the check fail."""
    a, t, d = sp.symbols("a t d", positive=True)
    st = Steps()
    st.zero("(t-1)^2 a - (t^2 a - 1)(1 - a) = (ta - 1)^2", (t - 1) ** 2 * a - (t**2 * a - 1) * (1 - a) - (t * a - 1) ** 2)
    st.zero(f"(e^(d/2)-1)/(e^(d/2)+1) = tanh(d/{constant})",
            ((sp.exp(d / 2) - 1) / (sp.exp(d / 2) + 1) - sp.tanh(d / constant)).rewrite(sp.exp))
    p = (1 / (1 + t), t / (1 + t))
    q = (t / (1 + t), 1 / (1 + t))
    # TV = (|p_1 - q_1| + |p_2 - q_2|)/2 with p_1 - q_1 = -(p_2 - q_2) and, for t > 1, p_2 - q_2 > 0
    st.zero("p_1 - q_1 = -(p_2 - q_2)", (p[0] - q[0]) + (p[1] - q[1]))
    st.zero("witness TV = p_2 - q_2 = (t-1)/(t+1)", sp.simplify(p[1] - q[1] - (t - 1) / (t + 1)))
    st.zero("witness H = log t^2", sp.expand_log(sp.log(p[1] / q[1]) - sp.log(p[0] / q[0]) - sp.log(t**2), force=True))
    from hilbertgeom import hilbert_distance, total_variation, tv_extremal_pair

    rng = np.random.default_rng(seed)
    for _ in range(20 if quick else 100):
        pv, qv = rng.dirichlet(np.full(5, 0.5)), rng.dirichlet(np.full(5, 0.5))
        h = hilbert_distance(pv, qv)
        st.residual(max(total_variation(pv, qv) - np.tanh(h / constant), 0.0))
    for h in (1e-6, 0.5, 2.0, 10.0, 100.0):
        pv, qv = tv_extremal_pair(h)
        st.residual(total_variation(pv, qv) - np.tanh(h / constant))
    return st.result("I4", f"TV(p,q) <= tanh(H/{constant}), sharp on the two-point witness",
                     "arXiv 2608.22253; the (ta-1)^2 reduction")
