"""`hilbertgeom verify`: table, JSON, --only, exit codes; the checker can say no."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from hilbertgeom import cli, proofs
from hilbertgeom.proofs._core import Identity


def test_verify_quick_passes_and_prints_every_identity(capsys):
    code = cli.main(["verify", "--quick"])
    out = capsys.readouterr().out
    assert code == 0
    for k in range(1, 22):
        assert f"\nI{k} " in out
    assert "21 passed, 0 failed" in out  # one row per identity: proof and numeric check


def test_verify_json_and_only(capsys):
    assert cli.main(["verify", "--quick", "--json", "--only", "I4,I7"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["identity"] for r in data["rows"]] == ["I4", "I7"]
    assert all(r["source"] and r["steps"] and not r["failed"] for r in data["rows"])
    assert data["passed"] is True
    assert all(r["trials"] > 0 and r["worst"] <= r["tol"] for r in data["rows"])


def test_verify_unknown_id_is_an_error(capsys):
    assert cli.main(["verify", "--only", "I99"]) == 2
    assert "unknown identity" in capsys.readouterr().err


def test_seed_changes_instances_but_not_verdicts():
    a = proofs.run(seed=1, quick=True, only=["I1"])[0]
    b = proofs.run(seed=2, quick=True, only=["I1"])[0]
    assert a.passed and b.passed and a.worst != b.worst


def test_a_false_identity_fails_and_exits_nonzero(monkeypatch, capsys):
    """The checker must be able to say no: TV <= tanh(H/8) (wrong constant) is false."""
    from hilbertgeom import metric

    def wrong_bound(pf, rng, quick, seed):
        pf.true("a symbolic step", True)
        for h in (0.5, 1.0, 4.0):
            p, q = metric.tv_extremal_pair(h)
            pf.le(f"h={h}", metric.total_variation(p, q), float(np.tanh(h / 8.0)))

    fake = Identity("I4x", "TV <= tanh(H/8) (deliberately false)", "test", "numeric", wrong_bound)
    monkeypatch.setitem(proofs.IDENTITIES, "I4x", fake)
    code = cli.main(["verify", "--quick", "--only", "I4x"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL I4x" in out and "0 passed, 1 failed" in out


def test_a_crashing_check_is_reported_as_failure(monkeypatch):
    def boom(pf, rng, quick, seed):
        raise RuntimeError("solver exploded")

    monkeypatch.setitem(proofs.IDENTITIES, "I0", Identity("I0", "crash", "test", "numeric", boom))
    rows = proofs.run(only=["I0"])
    assert not rows[0].passed and "solver exploded" in rows[0].detail


@pytest.mark.slow
def test_console_script_runs_the_full_verify_under_a_minute(tmp_path):
    """The installed package, as a user runs it (full, not --quick); from another
    folder, so that a source checkout in the working directory cannot shadow it."""
    res = subprocess.run([sys.executable, "-m", "hilbertgeom.cli", "verify"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "21 passed, 0 failed" in res.stdout
