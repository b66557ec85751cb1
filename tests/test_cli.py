"""The command line: verify (table, JSON, --only, exit codes; the checker can say no), progress,
solver failures, options and keywords, --version, help, --plot errors."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

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


def _console_script() -> list[str]:
    """The installed ``hilbertgeom`` command next to this interpreter, else ``python -m``."""
    exe = Path(sys.executable).with_name("hilbertgeom")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "hilbertgeom.cli"]


def test_console_script_verify_quick_only(tmp_path):
    """The installed command as a user runs it, from another folder (so that a source
    checkout cannot shadow it): exit code, the table on stdout, a progress line per
    row on stderr.  (The full verify runs once, in .ci/run.)"""
    res = subprocess.run([*_console_script(), "verify", "--quick", "--only", "I4,I7", "--progress"],
                         check=False, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 passed, 0 failed" in res.stdout
    assert re.search(r"^I4 .*PASS$", res.stdout, re.MULTILINE) and re.search(r"^I7 .*PASS$", res.stdout, re.MULTILINE)
    progress = [ln for ln in res.stderr.splitlines() if ln.startswith("[")]
    assert [ln.split()[1] for ln in progress] == ["I4", "I7"]
    assert all(re.match(r"^\[\d/2\] I\d +PASS  worst \S+  \(\d+\.\d s\)$", ln) for ln in progress), progress
    assert "Traceback" not in res.stderr


# --------------------------------------------------------------------------- progress
def test_verify_prints_each_row_as_it_finishes(monkeypatch, capsys):
    """Row 2 runs after row 1's progress line is already on stderr (not at the end)."""
    seen_while_running = []

    def first(pf, rng, quick, seed):
        pf.true("a symbolic step", True)
        pf.eq("a comparison", 1.0, 1.0)

    def second(pf, rng, quick, seed):
        seen_while_running.append(capsys.readouterr().err)
        first(pf, rng, quick, seed)

    monkeypatch.setitem(proofs.IDENTITIES, "I0a", Identity("I0a", "one", "test", "numeric", first))
    monkeypatch.setitem(proofs.IDENTITIES, "I0b", Identity("I0b", "two", "test", "numeric", second))
    assert cli.main(["verify", "--only", "I0a,I0b", "--progress"]) == 0
    (before,) = seen_while_running
    assert re.search(r"^\[1/2\] I0a +PASS", before, re.MULTILINE) and "I0b" not in before
    assert re.search(r"^\[2/2\] I0b +PASS", capsys.readouterr().err, re.MULTILINE)


def test_progress_is_silent_off_a_terminal_and_with_quiet(capsys):
    assert cli.main(["verify", "--quick", "--only", "I4"]) == 0  # capsys' stderr is not a terminal
    assert capsys.readouterr().err == ""
    assert cli.main(["verify", "--quick", "--only", "I4", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as ex:
        cli.main(["verify", "--progress", "--quiet"])
    assert ex.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_bench_progress_bar(capsys):
    assert cli.main(["bench-updates", "--V", "6", "--d", "2", "--progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    steps = [ln.split("] ", 1)[1].rsplit("  ", 1)[0] for ln in err]
    assert steps == ["0/5 starting", "1/5 gaussian", "2/5 rank one", "3/5 low rank (4)",
                     "4/5 cross-entropy (Zipf)", "5/5 simplex worst case"]
    assert err[-1].startswith("bench-updates [" + "#" * 24 + "]")
    assert cli.main(["bench-updates", "--V", "6", "--d", "2", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- solver failures, options
def test_solver_failure_is_one_clean_line(capsys):
    """A miss of --tol within --max-iter: exit 1, one line naming the case and the status,
    with the best certified bracket (lower <= upper), no traceback."""
    code = cli.main(["bench-updates", "--V", "12", "--d", "3", "--max-iter", "1", "--tol", "1e-15"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    (line,) = err.splitlines()
    assert line.startswith("hilbertgeom bench-updates: case 'gaussian': solver failed (status ")
    m = re.search(r"bracket T\(G\) in \[(\S+), (\S+)\], relative gap (\S+) > --tol 1\.0e-15", line)
    lo, hi, gap = map(float, m.groups())
    # as printed: the gap with 3 significant digits ("{:.2e}"), lo and hi with 12 (".12g"), whose
    # rounding the difference hi - lo magnifies by hi / (hi - lo)
    rel = 0.5 * 10.0 ** (1 - 3) + 2 * 0.5 * 10.0 ** (1 - 12) * hi / (hi - lo)
    assert 0 < lo < hi and gap == pytest.approx((hi - lo) / lo, rel=rel, abs=0)
    assert "--max-iter" in line


def test_solver_failure_from_the_console_script(tmp_path):
    res = subprocess.run([*_console_script(), "bench-updates", "V=12", "d=3", "max-iter=1", "tol=1e-15"],
                         check=False, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert res.returncode == 1
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "best certified bracket" in res.stderr


def test_tol_and_max_iter_reach_the_solver(monkeypatch, capsys):
    from hilbertgeom import updates

    got = {}
    real = updates.bench_updates

    def spy(**kw):
        got.update(kw)
        return real(**{**kw, "rules": {"Sign": updates.sign_update}})

    monkeypatch.setattr(updates, "bench_updates", spy)
    assert cli.main(["bench-updates", "--V", "5", "--d", "2", "--tol", "1e-7", "--max-iter", "33"]) == 0
    assert got["tol"] == 1e-7 and got["max_iter"] == 33
    assert "relative gap 1e-07" in capsys.readouterr().out
    for bad in (["--tol", "0"], ["--tol", "nan"], ["--max-iter", "0"], ["--V", "x"]):
        with pytest.raises(SystemExit) as ex:
            cli.main(["bench-updates", *bad])
        assert ex.value.code == 2
    assert cli.main(["bench-updates", "--V", "2"]) == 2
    assert "V must be" in capsys.readouterr().err


def test_version(capsys):
    import importlib.metadata

    with pytest.raises(SystemExit) as ex:
        cli.main(["--version"])
    assert ex.value.code == 0
    assert capsys.readouterr().out.strip() == f"hilbertgeom {importlib.metadata.version('hilbertgeom')}"


def test_help_text_for_every_option():
    """Every option of every command has help text, and --help shows it."""
    parser, subs = cli._parser()
    for name, sub in {"": parser, **subs}.items():
        text = sub.format_help()
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    assert choice.help and choice.dest in text, choice.dest
                continue
            assert action.help and action.help.strip(), (name, action.option_strings)
            assert action.help.split("(")[0].split()[0] in text, (name, action.option_strings)
            for opt in action.option_strings:
                assert opt in text
    assert set(subs) == {"verify", "bench-updates", "separation"}


# --------------------------------------------------------------------------- keywords, separation, --plot
def test_separation_accepts_keywords_and_options(capsys):
    assert cli.main(["separation", "n=4", "d=2", "restarts=3", "--quiet"]) == 0
    a = capsys.readouterr().out
    assert cli.main(["separation", "--n", "4", "--d", "2", "--restarts", "3", "--progress"]) == 0
    out, err = capsys.readouterr()
    assert out == a and "n = 4 points in R^2" in a
    start, done = err.splitlines()  # a sign of life before the search and after it
    assert start == "hilbertgeom separation: n = 4, d = 2, 3 local searches ..."
    assert re.fullmatch(r"hilbertgeom separation: done in \d+\.\d s", done)


def test_separation_bad_arguments_say_what_is_accepted(capsys):
    assert cli.main(["separation", "n=4"]) == 2
    assert "--n 8 --d 2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ex:
        cli.main(["separation", "n=4", "d=2", "k=3"])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert "'k=3'" in err and "--name value (or name=value) for: d, n, plot, restarts, seed" in err
    with pytest.raises(SystemExit):
        cli.main(["separation", "n=four", "d=2"])
    assert "not an integer: 'four'" in capsys.readouterr().err


def test_plot_errors_are_clean_messages_before_the_search(monkeypatch, tmp_path, capsys):
    from hilbertgeom import equalize

    def no_search(*a, **k):
        raise AssertionError("the search must not run when the plot cannot be written")

    monkeypatch.setattr(equalize, "max_min_separation", no_search)
    cases = [
        (str(tmp_path / "missing" / "a.png"), 2, "does not exist"),
        (str(tmp_path), 2, "is a folder"),
        (str(tmp_path / "a.xyz"), 2, "unknown image format 'xyz'"),
        (str(tmp_path / "a.png"), 4, "d = 2 or 3 only"),
    ]
    for path, d, msg in cases:
        assert cli.main(["separation", "--n", "5", "--d", str(d), "--plot", path]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert msg in line, line
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert cli.main(["separation", "--n", "5", "--d", "2", "--plot", str(tmp_path / "a.png")]) == 2
    assert "needs matplotlib" in capsys.readouterr().err


def test_plot_write_failure_is_a_clean_message(monkeypatch, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from hilbertgeom import plots

    def disk_full(points, path, /, *, title=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(plots, "plot_configuration", disk_full)
    assert cli.main(["separation", "--n", "3", "--d", "2", "--plot", str(tmp_path / "a.png")]) == 2
    out, err = capsys.readouterr()
    assert "n = 3 points" in out
    assert err.strip() == f"hilbertgeom separation: cannot write the plot to {str(tmp_path / 'a.png')!r}: " \
                          "[Errno 28] No space left on device"
