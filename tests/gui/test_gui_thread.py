"""Nothing slow runs on the GUI thread: dropping a log and taking the log door reads the log
once, on a worker thread, while the window's step list stays answerable at once."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QCoreApplication, QEvent

from tests.gui.test_wizard import corpus_body, drop_file
from tfdoctor.core import session as session_mod
from tfdoctor.core.diagnose import engine, telemetry_rules
from tfdoctor.gui.main_window import MainWindow


@pytest.fixture
def threads_of_slow_work(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[bool]]:
    """Wrap the slow entry points: each call records whether it ran on the GUI thread."""
    engine.shipped_causes()  # the knowledge is parsed once per process, not per diagnosis
    calls: dict[str, list[bool]] = {"diagnose": [], "telemetry": [], "parse": [], "read": []}

    def recorder(name: str, fn: Any) -> Any:
        def wrapped(*args: Any, **kw: Any) -> Any:
            calls[name].append(threading.current_thread() is threading.main_thread())
            return fn(*args, **kw)

        return wrapped

    monkeypatch.setattr(session_mod, "diagnose", recorder("diagnose", session_mod.diagnose))
    monkeypatch.setattr(
        session_mod, "telemetry_causes", recorder("telemetry", telemetry_rules.telemetry_causes)
    )
    monkeypatch.setattr(engine, "load_causes", recorder("parse", engine.load_causes))
    monkeypatch.setattr(session_mod, "_log_text", recorder("read", session_mod._log_text))
    return calls


@pytest.fixture
def window(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path / "state"))
    w = MainWindow(autostart=False)
    w.show()
    yield w
    w.close()
    w.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def test_a_dropped_log_is_diagnosed_once_off_the_gui_thread(  # type: ignore[no-untyped-def]
    qtbot, window, tmp_path: Path, threads_of_slow_work
) -> None:
    w = window
    log, label = corpus_body("host_oom", tmp_path)
    drop_file(w.start_page, log)
    assert True not in threads_of_slow_work["diagnose"]  # the drop only asked for it
    assert w.analysis_bridge.busy or w.session.analysis() is not None
    w.start_page.log_door.click()
    assert w.current_step == "diagnosis"
    qtbot.waitUntil(lambda: not w.diagnosis_page.busy_now, timeout=30_000)
    assert w.diagnosis_page.ranked[0].cause.id == label
    assert w.next_button.isEnabled() and "Fix" in w.next_button.text()
    w.next()
    assert w.current_step == "fix" and w.fix_page.fix_ids
    w.back()
    w.update_steps()
    # one drop, one read of the log, never on the GUI thread; causes.toml not re-parsed
    assert threads_of_slow_work["diagnose"] == [False]
    assert threads_of_slow_work["parse"] == []
    # the settings the log suggests for a reproduction were read with it, off the GUI thread
    w.go("reproduce")
    assert threads_of_slow_work["read"] and True not in threads_of_slow_work["read"]
    w.go("diagnosis")
    # "Diagnose again" reads the log again, off the GUI thread as well
    w.diagnosis_page.diagnose_again()
    assert w.diagnosis_page.busy_now
    qtbot.waitUntil(lambda: not w.diagnosis_page.busy_now, timeout=30_000)
    assert threads_of_slow_work["diagnose"] == [False, False]


def test_a_runs_telemetry_is_scanned_off_the_gui_thread(  # type: ignore[no-untyped-def]
    qtbot, window, threads_of_slow_work
) -> None:
    w = window
    items: list[tuple[str, dict[str, Any]]] = [("marker", {"t": 0.0, "label": "steady state"})]
    items += [("step", {"t": 0.1 * i, "step": i, "step_s": 0.1}) for i in range(1, 50)]
    w.session.telemetry = items
    w.update_steps()
    assert True not in threads_of_slow_work["telemetry"]
    qtbot.waitUntil(lambda: w.session.analysis() is not None, timeout=30_000)
    assert threads_of_slow_work["telemetry"] == [False]
