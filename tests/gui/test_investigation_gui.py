"""Investigations in the app: a saved real investigation opened (File > Open, drag and drop,
Open recent, `tfdoctor --open`) restores every page; Save writes it back whole; the Export
page previews the report, redacted by default; a bad or newer file is one clear line where
the user looks, never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QApplication, QFileDialog

from tests import investigations as inv
from tfdoctor.core.report import investigation
from tfdoctor.gui.main_window import MainWindow


@pytest.fixture
def window(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MainWindow:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path / "state"))
    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    w.settings.remove("files/recent")
    w.resize(1440, 900)
    w.show()
    return w


def _opened(qtbot, w: MainWindow, path: Path) -> None:  # type: ignore[no-untyped-def]
    assert w.open_investigation(path)
    qtbot.waitUntil(lambda: w.investigation_path == path, timeout=20_000)
    qtbot.waitUntil(lambda: w.session.analysis() is not None, timeout=30_000)


@pytest.mark.slow
def test_every_page_is_restored_from_a_saved_investigation(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, real_investigation: tuple[Any, Path]
) -> None:
    session, path = real_investigation
    w = window
    _opened(qtbot, w, path)
    assert path.name in w.windowTitle()
    # Start: the Python, the pasted text (secrets were never saved), the log files
    assert w.start_page.picker.selected_target() == session.target
    pasted = w.start_page.paste.toPlainText()
    assert "Killed" in pasted and inv.SECRETS["HF_TOKEN"] not in pasted
    files = [w.start_page.files.item(i).text() for i in range(w.start_page.files.count())]
    assert files == ["pasted text", "real_host_oom_kill.txt"]
    # Environment checks: the saved check, not a new one
    w.go("checks")
    assert not w.check_page.running
    assert w.check_page.last_report is w.session.check
    assert len(w.check_page.findings.findings()) == len(session.check.findings)
    assert "TensorFlow" in w.check_page.info_label.text()
    # Reproduce: the run's outcome, its causes and its plot
    w.go("reproduce")
    assert "killed" in w.bench_page.outcome_label.text()
    assert w.bench_page.last_result is w.session.bench
    assert w.bench_page.causes.findings()
    assert sum(w.bench_page.plot.series_lengths().values()) > 10
    # Diagnosis: the user's crash first
    w.go("diagnosis")
    qtbot.waitUntil(lambda: bool(w.diagnosis_page.causes.findings()), timeout=20_000)
    assert w.diagnosis_page.causes.findings()[0].id == "cause.host_oom"
    # Fix: the verification as it was, and the fix applied earlier
    w.go("fix")
    row = w.fix_page.rows["stream_tf_data"]
    assert "Fixed" in row.result.text() and row.comparison is not None
    assert "Tried earlier" in w.fix_page.note.text() and "tfd-inv" in w.fix_page.note.text()
    # Export: the report of it, redacted
    w.go("export")
    page = w.export_page
    assert page.report_button.isEnabled()
    assert "home folder" in page.redaction_label.text()
    shown = page.html_view.toPlainText()
    assert "out of RAM" in shown and inv.HOME not in shown and inv.HOST not in shown
    page.format_box.setCurrentIndex(page.format_box.findData("md"))
    md = page.text_view.toPlainText()
    assert md.startswith("### tfdoctor report") and inv.USER not in md
    page.redact_box.setChecked(False)  # the switch puts them back, and says so
    assert inv.HOST in page.text_view.toPlainText()
    assert "Not redacted" in page.redaction_label.text()


@pytest.mark.slow
def test_save_as_then_save_keeps_everything(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, real_investigation: tuple[Any, Path], tmp_path: Path, monkeypatch
) -> None:
    _, path = real_investigation
    w = window
    _opened(qtbot, w, path)
    target = tmp_path / "copy"  # the suffix is added
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    assert w.save_investigation_as()
    saved = tmp_path / "copy.tfdoctor"
    qtbot.waitUntil(lambda: w.investigation_path == saved, timeout=20_000)
    assert saved.name in w.windowTitle()
    again = investigation.load(saved).session
    a, b = again.analysis(), investigation.load(path).session.analysis()
    assert a is not None and b is not None
    assert [r.cause.id for r in a.ranked] == [r.cause.id for r in b.ranked]
    assert len(again.verifications) == 1 and again.fix_log and again.check is not None
    assert w.recent_files()[0] == str(saved.resolve())
    # Save (Ctrl+S) writes to the same file, no dialog
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: pytest.fail("asked"))
    before = saved.stat().st_mtime_ns
    w.export_page.save_button.click()
    qtbot.waitUntil(lambda: "Saved the investigation" in w.statusBar().currentMessage())
    assert saved.stat().st_mtime_ns > before


def _small_file(tmp_path: Path) -> Path:
    from tests.conftest import FIXTURES
    from tfdoctor.core.session import Session

    s = Session(door="log")
    log = FIXTURES / "logs" / "real_host_oom_kill.txt"
    s.add_log(log.name, log.read_bytes())
    return investigation.save(s, tmp_path / "small.tfdoctor")


def test_a_dropped_investigation_opens_and_is_remembered(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    from tfdoctor.core.model import Facts, Finding, Severity, Target
    from tfdoctor.core.scan import CheckReport

    path = _small_file(tmp_path)
    w = window
    # an earlier check on screen: the opened file has none, so it must not stay shown
    t = Target(python="/opt/old/bin/python", label="old", kind="path")
    old = CheckReport(t, Facts(), [Finding("x", Severity.ERROR, "Old finding", "Old.")], {})
    w.session.check = old
    w.check_page.show_report(old)
    assert w.check_page.findings.findings()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    # dropped on the Start page (which takes logs): opened as an investigation, not a log
    drop = QDropEvent(
        QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )  # fmt: skip
    w.start_page.dropEvent(drop)
    qtbot.waitUntil(lambda: w.investigation_path == path, timeout=20_000)
    assert [lg.name for lg in w.session.logs] == ["real_host_oom_kill.txt"]
    assert w.check_page.last_report is None and not w.check_page.findings.findings()
    assert w.current_step == "diagnosis"
    # Open recent lists it; choosing it opens it again
    w._fill_recent_menu()
    actions = w.recent_menu.actions()
    assert [a.text() for a in actions] == ["small.tfdoctor"]
    w.session.logs.clear()
    actions[0].trigger()
    qtbot.waitUntil(lambda: len(w.session.logs) == 1, timeout=20_000)


def test_a_bad_or_newer_file_is_one_line_where_the_user_looks(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    w = window
    bad = tmp_path / "bad.tfdoctor"
    bad.write_bytes(b"\x00garbage")
    w.open_investigation(bad)
    qtbot.waitUntil(lambda: w.start_page.log_notice.isVisible(), timeout=20_000)
    said = w.start_page.log_notice.text()
    assert said.startswith("Cannot open:") and "not a tfdoctor investigation" in said
    assert w.investigation_path is None
    newer = _small_file(tmp_path)
    data = newer.read_bytes()
    import io
    import zipfile

    members = {}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members[investigation.MANIFEST])
    manifest["version"] = investigation.VERSION + 1
    members[investigation.MANIFEST] = json.dumps(manifest).encode()
    with zipfile.ZipFile(newer, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    w.open_investigation(newer)
    qtbot.waitUntil(lambda: "update tfdoctor" in w.start_page.log_notice.text(), timeout=20_000)
    assert w.investigation_path is None and w.session.logs == []


def test_the_export_preview_waits_for_the_analysis_and_copies_markdown(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    w = window
    _opened(qtbot, w, _small_file(tmp_path))
    w.go("export")
    page = w.export_page
    page.format_box.setCurrentIndex(page.format_box.findData("md"))
    page.copy_button.click()
    assert QApplication.clipboard().text().startswith("### tfdoctor report")
    out = tmp_path / "r.html"
    assert page.save_report(str(out))
    assert out.read_text().startswith("<!DOCTYPE html>")  # the format follows the suffix


def test_a_saved_watch_comes_back_on_the_reproduce_page(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    """A watch recorded on a real H100 (a trainer killed by its neighbour's growth)."""
    from tests.conftest import TRACES
    from tfdoctor.core import telemetry
    from tfdoctor.core.bench.observe import WatchResult
    from tfdoctor.core.session import Session

    verdict = json.loads((TRACES / "real_h100_watch_pid_contention.verdict.json").read_text())
    _, items = telemetry.read_trace(TRACES / "real_h100_watch_pid_contention.trace.jsonl")
    s = Session(door="watch")
    s.watch = WatchResult.from_json(verdict, items)
    w = window
    _opened(qtbot, w, investigation.save(s, tmp_path / "watch.tfdoctor"))
    w.go("reproduce")
    assert "python3 (pid 490)" in w.bench_page.outcome_label.text()
    assert w.bench_page.causes.findings()[0].id == "cause.gpu_memory_contention"
    assert any(n.startswith("gpu") for n in w.bench_page.plot.series_lengths())
    w.go("diagnosis")
    qtbot.waitUntil(lambda: bool(w.diagnosis_page.causes.findings()), timeout=20_000)
    assert w.diagnosis_page.causes.findings()[0].id == "cause.gpu_memory_contention"


def test_a_watch_with_nothing_seen_behind_a_pool_says_why(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, tmp_path: Path
) -> None:
    """A real H200 watch of a JAX leak, as the watch gave it before it read the command's
    output: no cause. The page says that JAX's pool hid the VRAM and how to watch again."""
    from tests.conftest import TRACES
    from tfdoctor.core import telemetry
    from tfdoctor.core.bench.observe import WatchResult
    from tfdoctor.core.session import Session

    verdict = json.loads((TRACES / "real_h200_watch_jax_leak.verdict.json").read_text())
    _, items = telemetry.read_bounded_trace(TRACES / "real_h200_watch_jax_leak.trace.jsonl")
    s = Session(door="watch")
    s.watch = WatchResult.from_json({**verdict, "causes": []}, items)
    w = window
    _opened(qtbot, w, investigation.save(s, tmp_path / "watch.tfdoctor"))
    w.go("reproduce")
    said = w.bench_page.causes.placeholder_text()
    assert said.startswith("No cause found in what the watch saw")
    assert "105.4 GiB of GPU 0's 140.4 GiB (75%)" in said
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in said
    # the user's own process, not tfdoctor's worker
    legend = w.bench_page.plot.legend_names()
    assert "Watched process VRAM" in legend and not [n for n in legend if "Worker" in n]
