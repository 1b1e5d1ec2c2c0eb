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
    # this Python is picked: checks and reproduce open; nothing to diagnose or fix yet
    assert enabled == [True, True, True, False, False, True]
    assert "Nothing to diagnose yet" in w.steps.item(3).toolTip()
    assert not w.back_button.isEnabled() and w.next_button.isEnabled()
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

    from tfdoctor.gui.app import apply_colour_scheme

    try:
        apply_colour_scheme(qapp, dark=True)
        assert qapp.palette().color(QPalette.ColorRole.Window).lightness() < 80
        assert "style-dark" in assets.DARK_STYLE_FILE.name and "#1f252d" in qapp.styleSheet()
    finally:
        apply_colour_scheme(qapp, dark=False)
    assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 180
    assert "#1f252d" not in qapp.styleSheet()
