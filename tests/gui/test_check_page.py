"""The check page against the real current interpreter: real TensorFlow in a real child process."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from PySide6.QtCore import QElapsedTimer, Qt, QTimer

from tests.gui.conftest import CHECK_TIMEOUT_MS, SCREENSHOT_DIR, child_processes
from tfdoctor.core.model import ProbeResult, ProbeStatus, Severity, Target
from tfdoctor.gui.main_window import MainWindow
from tfdoctor.gui.pages.check_page import CANCEL_TEXT, RERUN_TEXT, RUN_TEXT, CheckPage

pytestmark = pytest.mark.slow


def run_to_end(qtbot, page: CheckPage):  # type: ignore[no-untyped-def]
    """Click Run and wait for the report (the button must say Cancel meanwhile)."""
    with qtbot.waitSignal(page.bridge.sig_check_finished, timeout=CHECK_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)
        assert page.run_button.text() == CANCEL_TEXT
    return blocker.args[0]


def settle(qtbot, page: CheckPage) -> None:  # type: ignore[no-untyped-def]
    """Wait until every card that should show is on screen, laid out top to bottom in order."""
    wanted = [c for c in page.findings.cards() if c.finding in page.findings.visible_findings()]

    def laid_out() -> bool:
        ys = [c.y() for c in wanted]
        return all(c.isVisible() for c in wanted) and ys == sorted(set(ys))

    qtbot.waitUntil(laid_out, timeout=5000)


def test_real_check_fills_the_findings_and_offers_rerun(qtbot) -> None:  # type: ignore[no-untyped-def]
    window = MainWindow(autostart=False)
    qtbot.addWidget(window)
    window.resize(1100, 750)
    window.show()
    window.go("checks")  # the wizard opens on its Start page
    page = window.check_page
    assert page.run_button.text() == RUN_TEXT

    report = run_to_end(qtbot, page)

    assert not report.cancelled
    assert page.run_button.text() == RERUN_TEXT
    assert page.run_button.isEnabled()
    assert page.progress.isHidden()
    findings = page.findings.findings()
    assert findings, "the real check produced no findings"
    assert {f.id for f in findings} == {f.id for f in report.findings}
    severities = [f.severity for f in findings]
    assert severities == sorted(severities, reverse=True)  # worst first
    # Every probe ended with a status word on its chip.
    assert all(chip.state != "running" for chip in page.chips.values())
    assert page.chips["target"].state == "ok", page.chips["target"].toolTip()
    summary = page.summary_label.text()
    assert "passed" in summary
    assert "TensorFlow 2." in page.info_label.text()
    settle(qtbot, page)
    window.grab().save(os.path.join(SCREENSHOT_DIR, "tfdoctor_check.png"))

    tf_ok = page.findings.card("tf.installed")
    assert tf_ok is not None and tf_ok.finding.severity is Severity.OK
    assert tf_ok.isHidden()  # passed checks hidden by default
    page.show_passed.setChecked(True)
    assert not tf_ok.isHidden()
    assert "TensorFlow" in tf_ok.title.text() and "imports" in tf_ok.title.text()
    tf_ok.set_expanded(True)
    settle(qtbot, page)
    window.grab().save(os.path.join(SCREENSHOT_DIR, "tfdoctor_check_passed.png"))
    for card in page.findings.cards():
        if card.finding.severity >= Severity.ERROR:
            assert card.expanded


def test_findings_arrive_while_tensorflow_is_still_probing(qtbot, page) -> None:  # type: ignore[no-untyped-def]
    log: list[tuple[str, str, bool, bool]] = []  # (kind, name, target still running, in tree)
    target_done = False

    def on_probe_finished(result: ProbeResult) -> None:
        nonlocal target_done
        if result.probe == "target":
            target_done = True
        log.append(("probe", result.probe, not target_done, False))

    def on_finding_added(f) -> None:  # type: ignore[no-untyped-def]
        # The page's own slot ran first (it connected first): the card must be there now.
        log.append(("finding", f.id, not target_done, page.findings.card(f.id) is not None))

    page.bridge.sig_probe_finished.connect(on_probe_finished)
    page.bridge.sig_finding_added.connect(on_finding_added)
    run_to_end(qtbot, page)

    early = [e for e in log if e[0] == "finding" and e[2]]
    assert early, f"no finding arrived before the TensorFlow probe finished: {log}"
    assert all(e[3] for e in log if e[0] == "finding"), "a finding was not put in the list"
    assert ("probe", "target", False, False) in log


def test_gui_thread_keeps_ticking_during_a_real_check(qtbot, page) -> None:  # type: ignore[no-untyped-def]
    clock = QElapsedTimer()
    gaps_ms: list[int] = []
    last = [0]

    def on_tick() -> None:
        now = clock.elapsed()
        gaps_ms.append(now - last[0])
        last[0] = now

    ticker = QTimer()
    ticker.setInterval(20)
    ticker.timeout.connect(on_tick)
    clock.start()
    ticker.start()
    try:
        run_to_end(qtbot, page)
    finally:
        ticker.stop()
    assert len(gaps_ms) > 10
    # Generous: this guards against blocking work on the GUI thread (a TF import, a
    # subprocess.run, a join), which shows up as gaps of seconds, not against slow machines.
    assert max(gaps_ms) < 500, f"GUI thread stalled: max gap {max(gaps_ms)} ms"


def _not_executable(tmp_path: Path) -> str:
    p = tmp_path / "python3"
    p.write_text("#!/bin/sh\necho not really python\n")
    p.chmod(stat.S_IRUSR | stat.S_IWUSR)
    return str(p)


@pytest.mark.parametrize(
    ("make_path", "expected"),
    [
        (_not_executable, "is not executable"),
        (lambda tmp_path: "/bin/ls", "is not a Python interpreter"),
        (lambda tmp_path: str(tmp_path / "missing" / "python"), "no such file"),
    ],
    ids=["not-executable", "not-a-python", "missing"],
)
def test_bad_target_shows_a_one_line_error_banner(
    qtbot, page, tmp_path, make_path, expected
) -> None:  # type: ignore[no-untyped-def]
    path = make_path(tmp_path)
    page.add_target(Target(python=path, label="picked", kind="path"))
    assert page.selected_target().python == path
    with qtbot.waitSignal(page.bridge.sig_check_failed, timeout=30_000):
        qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)
    assert page.banner.isVisible()
    message = page.banner_message.text()
    assert expected in message and path in message
    assert "\n" not in message and "Traceback" not in message
    assert page.run_button.text() == RUN_TEXT and page.run_button.isEnabled()
    assert page.findings.findings() == []
    if expected == "is not a Python interpreter":
        page.grab().save(os.path.join(SCREENSHOT_DIR, "tfdoctor_bad_target.png"))
    # Picking the real interpreter again and running clears the banner.
    page.target_combo.setCurrentIndex(0)
    qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)
    assert page.banner.isHidden()


def test_cancel_stops_the_probe_process_and_resets_the_button(qtbot, page) -> None:  # type: ignore[no-untyped-def]
    with qtbot.waitSignal(
        page.bridge.sig_stage_changed,
        timeout=CHECK_TIMEOUT_MS,
        check_params_cb=lambda label: "importing" in label.lower(),
    ):
        qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)
    assert child_processes(), "the TensorFlow probe should be running in a child process"
    assert page.chips["target"].state == "running"

    with qtbot.waitSignal(page.bridge.sig_check_finished, timeout=30_000) as blocker:
        qtbot.mouseClick(page.run_button, Qt.MouseButton.LeftButton)  # "Cancel"
        assert page.run_button.text() != CANCEL_TEXT  # "Stopping…" until it has stopped
    report = blocker.args[0]
    assert report.cancelled
    assert report.probes["target"].status is ProbeStatus.SKIPPED
    assert page.run_button.text() in (RUN_TEXT, RERUN_TEXT)
    assert page.run_button.isEnabled()
    assert page.progress.isHidden()
    assert "Stopped" in page.stage_label.text()
    assert child_processes() == []


def test_window_lists_environments_as_soon_as_it_opens(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The wizard opens on its Start page: it looks for Python environments in the
    background at once, and starts no check until the user picks a door."""
    window = MainWindow(autostart=True)
    qtbot.addWidget(window)
    start = window.start_page
    with qtbot.waitSignal(start.envs_bridge.sig_envs_found, timeout=CHECK_TIMEOUT_MS):
        window.show()
    assert start.target_combo.count() >= 1
    assert window.session.target is not None and window.session.target.kind == "current"
    assert not window.check_page.running
    with qtbot.waitSignal(window.check_page.bridge.sig_check_finished, timeout=CHECK_TIMEOUT_MS):
        start.setup_door.click()  # the door starts the check
        assert window.current_step == "checks" and window.check_page.running
