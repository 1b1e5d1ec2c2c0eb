"""The investigation file: a real investigation (a real check, a real OOM-killed run verified
with a fix, a fix applied to a real kernelspec, real logs) saved and opened again loses
nothing and keeps secrets out; files of other versions, damaged files and failing disks give
one clear line and never lose the old file."""

from __future__ import annotations

import errno
import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests import investigations as inv
from tests.conftest import FIXTURES
from tfdoctor.core import cli
from tfdoctor.core.report import investigation
from tfdoctor.core.report.investigation import InvestigationError, load, save
from tfdoctor.core.session import Session

REAL_LOG = FIXTURES / "logs" / "real_host_oom_kill.txt"


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _rewrite(path: Path, change: Any) -> None:
    """Rewrite the manifest of a saved file through `change(manifest)`."""
    members = _members(path)
    manifest = json.loads(members[investigation.MANIFEST])
    change(manifest)
    members[investigation.MANIFEST] = json.dumps(manifest).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    path.write_bytes(buf.getvalue())


def _small(tmp_path: Path) -> Path:
    s = Session(door="log")
    s.add_log("pasted text", b"W tensorflow/core/framework/op_kernel.cc:1733] OOM when ...\n")
    s.add_log(REAL_LOG.name, path=str(REAL_LOG))
    return save(s, tmp_path / "small.tfdoctor")


@pytest.mark.slow
def test_a_real_investigation_round_trips(real_investigation: tuple[Any, Path]) -> None:
    session, path = real_investigation
    opened = load(path)
    s = opened.session
    assert opened.notes == [] and opened.path == path
    assert s.door == session.door and s.target == session.target
    assert [lg.name for lg in s.logs] == [lg.name for lg in session.logs]
    # a log file is kept whole, as it was read (the file may be gone when the file is opened)
    assert s.logs[1].text == REAL_LOG.read_bytes() and s.logs[1].path is None
    assert s.check is not None and session.check is not None
    assert s.check.to_json() == session.check.to_json()
    assert s.bench is not None and s.bench.to_json() == session.bench.to_json()
    assert s.bench.output_tail == session.bench.output_tail[-400:]
    assert s.bench_options == session.bench_options
    assert json.loads(json.dumps(s.telemetry)) == json.loads(json.dumps(session.telemetry))
    assert len(s.verifications) == 1
    v, w = s.verifications[0], session.verifications[0]
    assert v.to_saved() == w.to_saved() and v.fixed and v.fix_ids == ["stream_tf_data"]
    assert len(v.after_telemetry) == len(w.after_telemetry) > 10
    assert s.fix_log == session.fix_log and s.fix_log[0]["action"] == "applied"
    # the same evidence gives the same answer
    a, b = s.analysis(), session.analysis()
    assert a is not None and b is not None
    assert [(r.cause.id, r.cause.confidence) for r in a.ranked] == [
        (r.cause.id, r.cause.confidence) for r in b.ranked
    ]
    assert a.ranked[0].cause.id == "host_oom" and a.fix_ids == b.fix_ids
    assert [r.cause.id for r in a.experiments] == [r.cause.id for r in b.experiments]


@pytest.mark.slow
def test_no_secret_reaches_the_file(real_investigation: tuple[Any, Path]) -> None:
    """The user's own record keeps paths and names, never tokens or passwords."""
    _, path = real_investigation
    raw = b"".join(_members(path).values())
    for secret in (*inv.SECRETS.values(), inv.URL_PASSWORD, inv.BEARER, inv.LOG_TOKEN):
        assert secret.encode() not in raw, secret
    assert b"Killed" in raw  # the log itself is there


def test_a_newer_format_says_which_tfdoctor_to_get(tmp_path: Path) -> None:
    path = _small(tmp_path)

    def newer(m: dict[str, Any]) -> None:
        m["version"] = investigation.VERSION + 1
        m["saved_by"]["version"] = "9.2.0"

    _rewrite(path, newer)
    with pytest.raises(InvestigationError) as exc:
        load(path)
    msg = str(exc.value)
    assert "tfdoctor 9.2.0" in msg and "update tfdoctor" in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"", "is empty"),
        (b"\x89PNG\r\n\x1a\n" + bytes(200), "not a tfdoctor investigation"),
        (b"{not json", "broken JSON"),
        (json.dumps({"schema": 1, "probes": {}}).encode(), "check --json"),
        (json.dumps([1, 2]).encode(), "not a tfdoctor investigation"),
    ],
)
def test_what_is_not_an_investigation_says_so(tmp_path: Path, data: bytes, said: str) -> None:
    path = tmp_path / "x.tfdoctor"
    path.write_bytes(data)
    with pytest.raises(InvestigationError, match=said):
        load(path)


def test_a_zip_that_is_no_investigation_and_a_missing_file(tmp_path: Path) -> None:
    other = tmp_path / "other.tfdoctor"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(InvestigationError, match="zip file but not a tfdoctor investigation"):
        load(other)
    with pytest.raises(InvestigationError, match=r"cannot read .*No such file"):
        load(tmp_path / "gone.tfdoctor")


def test_every_damage_is_one_clear_line_never_a_crash(tmp_path: Path) -> None:
    """Cut short anywhere, or a byte changed anywhere: it opens (what could be read, with
    notes) or says why not; nothing else is raised."""
    good = _small(tmp_path).read_bytes()
    outcomes = {"opened": 0, "refused": 0}
    for n in range(0, len(good), max(1, len(good) // 60)):
        for data in (good[:n], good[:n] + bytes([good[n] ^ 0x5A]) + good[n + 1 :]):
            try:
                investigation.from_bytes(data, "damaged.tfdoctor")
                outcomes["opened"] += 1
            except InvestigationError as exc:
                assert "\n" not in str(exc)
                outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and outcomes["opened"] > 0


def test_a_damaged_part_is_left_out_with_a_note(tmp_path: Path) -> None:
    path = _small(tmp_path)

    def break_check(m: dict[str, Any]) -> None:
        m["session"]["check"] = {"schema": 1, "target": "nobody"}  # not a report
        m["session"]["bench"] = {"schema": 1, "outcome": {"status": "exploded"}}

    _rewrite(path, break_check)
    opened = load(path)
    assert opened.session.check is None and opened.session.bench is None
    assert len(opened.session.logs) == 2  # the rest is there
    assert any("environment check could not be read" in n for n in opened.notes)
    assert any("benchmark run could not be read" in n for n in opened.notes)


def test_a_session_saved_as_json_by_an_earlier_version_opens(tmp_path: Path) -> None:
    """The Export page used to save the session as JSON (names of logs, no text)."""
    old = {
        "schema": 1,
        "door": "log",
        "target": {"python": "/usr/bin/python3", "label": "system", "kind": "path"},
        "logs": [
            {"name": REAL_LOG.name, "path": str(REAL_LOG), "bytes": 10},
            {"name": "gone.log", "path": str(tmp_path / "gone.log"), "bytes": 5},
        ],
        "check": None,
        "bench": None,
        "watch": None,
        "log_diagnosis": None,
    }
    path = tmp_path / "tfdoctor-session.json"
    path.write_text(json.dumps(old))
    opened = load(path)
    s = opened.session
    assert s.door == "log" and s.target is not None and s.target.python == "/usr/bin/python3"
    assert [lg.name for lg in s.logs] == [REAL_LOG.name]  # read again from where it was
    assert any("older session file" in n for n in opened.notes)
    assert any("gone.log" in n and "left out" in n for n in opened.notes)
    a = s.analysis()
    assert a is not None and a.ranked[0].cause.id == "host_oom"


def test_a_failing_disk_leaves_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _small(tmp_path)
    before = path.read_bytes()
    s = Session(door="log")
    s.add_log("other", b"Killed\n")

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        save(s, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.tfdoctor"]  # no temp left


def test_a_log_that_vanished_before_saving_is_noted(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("Killed\n")
    s = Session(door="log")
    s.add_log(log.name, path=str(log))
    log.unlink()
    opened = investigation.from_bytes(investigation.to_bytes(s, investigation.Identity()))
    assert opened.session.logs == []
    assert any("train.log was not saved" in n for n in opened.notes)


# --------------------------------------------------------------------------- CLI


def test_cli_diagnose_saves_and_opens_and_report_writes_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv_path = tmp_path / "case.tfdoctor"
    assert cli.main(["diagnose", str(REAL_LOG), "--save", str(inv_path), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["causes"][0]["id"] == "host_oom"
    # opened on its own (the log file could be gone): the same answer
    assert cli.main(["diagnose", "--open", str(inv_path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in again["causes"]] == [c["id"] for c in first["causes"]]
    for fmt, marker in (("html", "<!DOCTYPE html>"), ("md", "### tfdoctor report"), ("json", "{")):
        out = tmp_path / f"r.{fmt}"
        assert cli.main(["report", str(inv_path), "--format", fmt, "-o", str(out)]) == 0
        text = out.read_text()
        assert text.startswith(marker) and "out of RAM" in text
        assert "redacted" in capsys.readouterr().err
    # an existing output is not replaced without --force; a bad file is one line
    assert cli.main(["report", str(inv_path), "-o", str(tmp_path / "r.md")]) == 2
    assert "exists" in capsys.readouterr().err
    bad = tmp_path / "bad.tfdoctor"
    bad.write_bytes(b"\x00\x01garbage")
    assert cli.main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a tfdoctor investigation" in err


def test_cli_check_open_shows_the_saved_check_without_running_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfdoctor.core.model import Facts, Finding, Severity, Target
    from tfdoctor.core.scan import CheckReport, CheckRun

    target = Target(python="/opt/env/bin/python", label="env", kind="path")
    finding = Finding("tf.none", Severity.ERROR, "TensorFlow sees no GPU", "Because.")
    s = Session(door="setup", target=target)
    s.check = CheckReport(target, Facts(), [finding], {})
    path = save(s, tmp_path / "c.tfdoctor")

    def no_run(*_a: Any, **_k: Any) -> None:
        raise AssertionError("a new check ran")

    monkeypatch.setattr(CheckRun, "start", no_run)
    assert cli.main(["check", "--open", str(path), "--no-color"]) == 1  # it has an error
    out = capsys.readouterr().out
    assert "TensorFlow sees no GPU" in out and "/opt/env/bin/python" in out


def test_a_watch_recorded_on_a_real_h100_is_kept_and_reported(tmp_path: Path) -> None:
    """The watch of a trainer killed by a neighbour on a real H100: its verdict and its
    trace come back, and the report shows the GPU plot and the contention."""
    from tests.conftest import TRACES
    from tfdoctor.core import telemetry
    from tfdoctor.core.bench.observe import WatchResult
    from tfdoctor.core.report import content, render

    verdict = json.loads((TRACES / "real_h100_watch_pid_contention.verdict.json").read_text())
    _, items = telemetry.read_trace(TRACES / "real_h100_watch_pid_contention.trace.jsonl")
    s = Session(door="watch")
    s.watch = WatchResult.from_json(verdict, items)
    opened = load(save(s, tmp_path / "w.tfdoctor"))
    w = opened.session.watch
    assert w is not None and w.to_json() == s.watch.to_json() and len(w.items) == len(items)
    a = opened.session.analysis()
    assert a is not None and a.ranked[0].cause.id == "gpu_memory_contention"
    rep = content.build(opened.session, a)
    assert [p.id for p in rep.plots] == ["watch"] and "GPU 0 used" in rep.plots[0].alt
    # the user's process, named as such (not tfdoctor's benchmark worker)
    assert "Watched process RSS" in rep.plots[0].alt and "Worker" not in rep.plots[0].alt
    html_text = render.to_html(rep)
    assert "Watch of python3 (pid 490)" in html_text and "disappeared" in html_text


def test_the_app_verb_takes_a_file_to_open(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[tuple[bool, str | None]] = []
    code = cli.main(["--open", "case.tfdoctor"], open_app=lambda s, f: opened.append((s, f)) or 0)
    assert code == 0 and opened == [(False, "case.tfdoctor")]
