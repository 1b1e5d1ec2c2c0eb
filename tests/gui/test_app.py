"""The app starts, renders and quits (--smoke-test); the window shows the wizard's steps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import Qt

from tfdoctor.gui import app, assets
from tfdoctor.gui.main_window import STEPS, MainWindow


def test_smoke_test_in_process_returns_0(qapp) -> None:  # type: ignore[no-untyped-def]
    assert app.main(smoke_test=True) == 0
    assert qapp.applicationName() == "tfdoctor"
    assert not qapp.windowIcon().isNull()


def test_smoke_test_command_exits_0() -> None:
    script = Path(sys.executable).with_name("tfdoctor")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "tfdoctor.core.cli"]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [*cmd, "--smoke-test"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


def test_app_icon_renders_from_resources(qapp) -> None:  # type: ignore[no-untyped-def]
    assert assets.ICON_FILE.is_file()
    assert not assets.app_icon().pixmap(64, 64).isNull()
    assert assets.stylesheet()  # the shipped stylesheet is found


def test_window_shows_the_wizard_steps_with_what_is_open(qtbot) -> None:  # type: ignore[no-untyped-def]
    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    assert w.steps.count() == len(STEPS) == 6
    titles = [w.steps.item(i).text() for i in range(w.steps.count())]
    assert [t.split(".", 1)[1].strip() for t in titles] == [
        "Start",
        "Environment checks",
        "Reproduce",
        "Diagnosis",
        "Fix",
        "Export",
    ]
    assert w.current_step == "start" and w.stack.currentWidget() is w.start_page
    enabled = [bool(w.steps.item(i).flags() & Qt.ItemFlag.ItemIsEnabled) for i in range(6)]
    # this Python is picked: checks and reproduce open; nothing to diagnose, fix or export yet
    assert enabled == [True, True, True, False, False, False]
    assert "Nothing to diagnose yet" in w.steps.item(3).toolTip()
    assert "Nothing to export yet" in w.steps.item(5).toolTip()
    assert not w.back_button.isEnabled() and w.next_button.isEnabled()
    assert w.back_button.toolTip() == "This is the first step"  # why, not what it would do
    assert not w.check_page.running  # autostart=False starts nothing
    w.go("reproduce")
    assert w.stack.currentWidget() is w.bench_page
    assert w.session.target.python in w.bench_page.target_label.text()
    assert not w.bench_page.running


def test_smoke_test_leaves_no_window_behind(qapp) -> None:  # type: ignore[no-untyped-def]
    before = {id(w) for w in qapp.topLevelWidgets()}
    assert app.main(smoke_test=True) == 0
    left = [w for w in qapp.topLevelWidgets() if id(w) not in before]
    assert not [w for w in left if isinstance(w, MainWindow)]


def test_no_display_is_a_one_line_error_not_a_qt_abort() -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")
    }
    exe = str(Path(sys.executable).parent / "tfdoctor")
    p = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2
    assert p.stderr.strip().startswith("tfdoctor: no display found")
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_a_dark_desktop_gets_the_dark_look_and_back(qapp) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtGui import QPalette

    from tfdoctor.gui.theme import apply_colour_scheme

    try:
        apply_colour_scheme(qapp, dark=True)
        assert qapp.palette().color(QPalette.ColorRole.Window).lightness() < 80
        assert "style-dark" in assets.DARK_STYLE_FILE.name and "#1f252d" in qapp.styleSheet()
    finally:
        apply_colour_scheme(qapp, dark=False)
    assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 180
    assert "#1f252d" not in qapp.styleSheet()


def test_the_view_menu_switches_the_theme_and_keeps_it(qtbot, qapp, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtCore import QSettings
    from PySide6.QtGui import QPalette

    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path / "state"))
    QSettings.setPath(QSettings.Format.NativeFormat, QSettings.Scope.UserScope, str(tmp_path))
    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    menu = next(a for a in w.menuBar().actions() if a.text() == "&View")
    assert menu is not None and set(w.theme_actions) == {"system", "light", "dark"}
    try:
        w.theme_actions["dark"].trigger()
        assert qapp.palette().color(QPalette.ColorRole.Window).lightness() < 80
        assert w.settings.value("view/theme") == "dark"
        again = MainWindow(autostart=False)  # the next start keeps the choice
        qtbot.addWidget(again)
        assert again.theme_actions["dark"].isChecked()
        again.theme_actions["light"].trigger()
        assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 180
    finally:
        w.set_theme("system")
    assert w.settings.value("view/theme") == "system" and w.theme_actions["system"].isChecked()


def test_scrolling_past_a_form_field_never_changes_its_value(qtbot, qapp) -> None:  # type: ignore[no-untyped-def]
    """The mouse wheel over an unfocused spin box or combo box scrolls the form; once the
    field has the focus (clicked, or reached with Tab), the wheel changes it."""
    from PySide6.QtCore import QPoint, QPointF
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    w.resize(1024, 700)
    w.show()
    w.go("reproduce")
    page = w.bench_page

    def wheel(widget) -> None:  # type: ignore[no-untyped-def]
        pos = QPointF(widget.width() / 2, widget.height() / 2)
        event = QWheelEvent(
            pos, QPointF(widget.mapToGlobal(pos.toPoint())), QPoint(0, 0), QPoint(0, -120),
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase,
            False,
        )  # fmt: skip
        QApplication.sendEvent(widget, event)

    page.batch.setValue(256)
    allocator = page.allocator.currentIndex()
    page.start_button.setFocus()
    wheel(page.batch)
    wheel(page.allocator)
    assert page.batch.value() == 256 and page.allocator.currentIndex() == allocator
    page.batch.setFocus()
    qtbot.waitUntil(page.batch.hasFocus, timeout=2000)
    wheel(page.batch)
    assert page.batch.value() == 255


def test_every_form_field_in_the_window_and_its_dialogs_is_wheel_guarded(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The guard sits on each spin box and combo box, so a field added without it is caught
    here: in the main window and in the dialogs it opens."""
    from PySide6.QtWidgets import QAbstractSpinBox, QComboBox

    from tfdoctor.gui.theme import WHEEL_GUARDED
    from tfdoctor.gui.watch_dialog import WatchDialog

    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    dialog = WatchDialog(w.bench_page.watch_tf_file, w)
    qtbot.addWidget(dialog)
    fields = [
        f
        for root in (w, dialog)
        for kind in (QAbstractSpinBox, QComboBox)
        for f in root.findChildren(kind)
    ]
    assert len(fields) >= 9  # 4 spin boxes, 5 combo boxes at least
    unguarded = [
        f.objectName() or type(f).__name__ for f in fields if not f.property(WHEEL_GUARDED)
    ]
    assert unguarded == []


def test_at_1024_by_700_the_window_keeps_its_width_and_start_stays_in_view(qtbot) -> None:  # type: ignore[no-untyped-def]
    """Every page, with a crash log and a recorded run in it, fits 1024 px: the window never
    widens itself, and the Reproduce page's Start and Stop are inside the window."""
    from PySide6.QtCore import QPoint, QRect

    from tests.conftest import CORPUS

    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    w.resize(1024, 700)
    w.show()
    w.session.add_log("oom.log", (CORPUS / "004_gpu_oom.txt").read_bytes())
    w.bench_page.show_demo()
    for step in w.pages:
        w.go(step)
        qtbot.wait(20)
        assert (w.width(), w.height()) == (1024, 700), step
    w.go("reproduce")
    inside = QRect(QPoint(0, 0), w.size())
    for button in (w.bench_page.start_button, w.bench_page.stop_button):
        top_left = button.mapTo(w, QPoint(0, 0))
        assert inside.contains(QRect(top_left, button.size())), button.text()
