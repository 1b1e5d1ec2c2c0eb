"""Bridges keep slow work off the GUI thread and turn its outcome into signals."""

from __future__ import annotations

import sys
import threading

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog

from tests.conftest import SNAPSHOTS
from tests.gui.conftest import CHECK_TIMEOUT_MS
from tfdoctor.core.model import Target
from tfdoctor.core.probes import targetrun
from tfdoctor.gui.bridges import CheckBridge, EnvsBridge
from tfdoctor.gui.pages.check_page import RUN_TEXT
from tfdoctor.gui.target_picker import TARGET_ROLE


def test_target_validation_runs_off_the_gui_thread(qtbot, monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    threads: list[threading.Thread] = []
    real = targetrun.python_version

    def recording(python: str, timeout_s: float = 20.0):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread())
        return real(python, timeout_s)

    monkeypatch.setattr(targetrun, "python_version", recording)
    bridge = CheckBridge()
    with qtbot.waitSignal(bridge.sig_check_failed, timeout=30_000) as blocker:
        bridge.start(Target(python="/bin/ls", label="ls", kind="path"))
        assert bridge.running
    assert threads and threads[0] is not threading.main_thread()
    assert blocker.args[0].startswith("/bin/ls: is not a Python interpreter")
    assert not bridge.running


def test_cancel_while_validating_starts_nothing(qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    release = threading.Event()
    real = targetrun.python_version

    def slow(python: str, timeout_s: float = 20.0):  # type: ignore[no-untyped-def]
        release.wait(30)  # an interpreter on a slow network drive
        return real(python, timeout_s)

    monkeypatch.setattr(targetrun, "python_version", slow)
    bridge = CheckBridge()
    started: list[object] = []
    bridge.sig_check_started.connect(started.append)
    with qtbot.waitSignal(bridge.sig_check_cancelled, timeout=30_000):
        bridge.start(targetrun.current_target())
        bridge.cancel()
        assert bridge.cancelling
        release.set()
    assert started == [] and not bridge.running


def test_a_second_start_while_running_is_refused(qtbot) -> None:  # type: ignore[no-untyped-def]
    bridge = CheckBridge()
    with qtbot.waitSignal(bridge.sig_check_failed, timeout=30_000):
        bridge.start(Target(python="/nonexistent/python", label="x", kind="path"))
        try:
            bridge.start(targetrun.current_target())
        except RuntimeError:
            pass
        else:
            raise AssertionError("a second start() must raise while one is running")


def test_envs_bridge_lists_this_python_first(qtbot) -> None:  # type: ignore[no-untyped-def]
    bridge = EnvsBridge()
    with qtbot.waitSignal(bridge.sig_envs_found, timeout=CHECK_TIMEOUT_MS) as blocker:
        bridge.refresh()
        assert bridge.busy
    targets = blocker.args[0]
    assert targets and targets[0].python == sys.executable
    assert all(isinstance(t, Target) for t in targets)


def test_picker_fills_from_envs_and_keeps_picked_pythons(
    qtbot, page, monkeypatch, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    picked = tmp_path / "python"
    picked.write_text("")
    monkeypatch.setattr(
        QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: (str(picked), ""))
    )
    qtbot.mouseClick(page.other_button, Qt.MouseButton.LeftButton)
    assert page.selected_target().python == str(picked)
    assert page.run_button.text() == RUN_TEXT

    with qtbot.waitSignal(page.envs_bridge.sig_envs_found, timeout=CHECK_TIMEOUT_MS):
        page.refresh_targets()
    combo = page.target_combo
    first = combo.itemData(0, TARGET_ROLE)
    assert first.python == sys.executable and first.kind == "current"
    for i in range(combo.count()):
        t = combo.itemData(i, TARGET_ROLE)
        assert combo.itemData(i, Qt.ItemDataRole.ToolTipRole).splitlines()[0] == t.python
    # The hand-picked interpreter survives the refresh and stays selected.
    assert page.selected_target().python == str(picked)


def test_recorded_snapshot_replays_through_the_bridge(qtbot) -> None:  # type: ignore[no-untyped-def]
    snap = SNAPSHOTS / "real_no_nvidia_driver.json"
    bridge = CheckBridge()
    with qtbot.waitSignal(bridge.sig_check_finished, timeout=CHECK_TIMEOUT_MS) as blocker:
        bridge.start(targetrun.current_target(), snapshot=snap)
    report = blocker.args[0]
    assert report.snapshot == str(snap)
    assert report.findings


def test_unreadable_snapshot_is_a_one_line_failure(qtbot, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "snap.json"
    bad.write_text("{not json")
    bridge = CheckBridge()
    with qtbot.waitSignal(bridge.sig_check_failed, timeout=30_000) as blocker:
        bridge.start(targetrun.current_target(), snapshot=bad)
    message = blocker.args[0]
    assert message.startswith("cannot replay the snapshot:") and "\n" not in message
    assert "snap.json" in message
