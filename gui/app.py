"""Start the desktop app (`tfdoctor` with no command), or render it once and quit (--smoke-test)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator

from PySide6.QtCore import QCoreApplication, QEvent, QSocketNotifier, QTimer
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from tfdoctor.gui import assets, collector, platform_check, theme
from tfdoctor.gui.main_window import MainWindow

log = logging.getLogger(__name__)

WINDOW_SIZE = (1100, 750)
SMOKE_RENDER_DELAY_MS = 150  # let the first layout pass and paint happen
SMOKE_WATCHDOG_MS = 10_000  # a smoke test that cannot render must still end


def setup_application(app: QApplication) -> None:
    """Name, icon, style: everything the window needs from the application object."""
    app.setApplicationName("tfdoctor")
    app.setApplicationDisplayName("tfdoctor")
    app.setDesktopFileName("io.github.tfdoctor.tfdoctor")
    app.setWindowIcon(assets.app_icon())
    app.setStyle("Fusion")  # the same look on every desktop; the stylesheet is tuned for it
    theme.apply_colour_scheme(app)
    hints = app.styleHints()
    if hasattr(hints, "colorSchemeChanged"):  # "system": light/dark follows the desktop, live
        hints.colorSchemeChanged.connect(lambda _scheme: theme.follow_desktop(app))
    collector.install(app)  # before any worker thread starts: Qt objects die on this thread


def render_check(window: MainWindow) -> bool:
    """Grab the window into a temporary PNG and read it back: True when a real image came out."""
    pixmap = window.grab()
    if pixmap.isNull() or pixmap.width() < 100 or pixmap.height() < 100:
        log.error("smoke test: the window rendered to an empty image")
        return False
    fd, path = tempfile.mkstemp(prefix="tfdoctor-smoke-", suffix=".png")
    os.close(fd)
    try:
        if not pixmap.save(path, "PNG"):
            log.error("smoke test: could not write %s", path)
            return False
        image = QImage(path)
        ok = not image.isNull() and image.width() == pixmap.width()
        log.info("smoke test: rendered %dx%d to %s", image.width(), image.height(), path)
        return ok
    finally:
        os.unlink(path)


def no_display_reason(env: dict[str, str] | None = None) -> str | None:
    """Why Qt could not open a window here (Qt would abort the process), or None."""
    env = dict(os.environ) if env is None else env
    if not sys.platform.startswith("linux") or env.get("QT_QPA_PLATFORM"):
        return None
    if env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    return (
        "no display found (DISPLAY and WAYLAND_DISPLAY are unset). Run `tfdoctor check` for "
        "the terminal version, or set QT_QPA_PLATFORM=offscreen to run the app without a screen."
    )


@contextlib.contextmanager
def _close_on_signals(window: MainWindow) -> Iterator[list[int]]:
    """Ctrl-C, SIGTERM and SIGHUP close the window as its close button does: a running
    benchmark, check or verification is stopped and its cgroup removed before the exit.

    Python runs a signal handler only when the interpreter gets control, which the Qt event
    loop does not give it: the signal's byte on a wakeup socket wakes a QSocketNotifier.
    Yields the signals received (the first decides the exit code).
    """
    received: list[int] = []
    rsock, wsock = socket.socketpair()
    rsock.setblocking(False)
    wsock.setblocking(False)
    notifier = QSocketNotifier(rsock.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(lambda *_: rsock.recv(512))  # the handler runs after this

    def handler(signum: int, _frame: object) -> None:
        received.append(signum)
        QTimer.singleShot(0, window.close)

    sigs = [s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if hasattr(signal, s.name)]
    try:
        old_fd = signal.set_wakeup_fd(wsock.fileno())
        old = {sig: signal.signal(sig, handler) for sig in sigs}
    except ValueError:  # not the main thread (an embedding host): leave signals alone
        notifier.setEnabled(False)
        rsock.close()
        wsock.close()
        yield received
        return
    try:
        yield received
    finally:
        for sig, prev in old.items():
            signal.signal(sig, prev)
        signal.set_wakeup_fd(old_fd)
        notifier.setEnabled(False)
        rsock.close()
        wsock.close()


def main(smoke_test: bool = False, open_file: str | None = None) -> int:
    """Open the main window (with a saved investigation, if given) and run the event loop;
    returns the process exit code."""
    reason = no_display_reason() or platform_check.missing_plugin_reason()
    if reason is not None:
        print(f"tfdoctor: {reason}", file=sys.stderr)
        return 2
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    setup_application(app)
    window = MainWindow(autostart=not smoke_test)
    window.resize(*WINDOW_SIZE)
    window.show()
    if open_file:
        QTimer.singleShot(0, window, lambda: window.open_investigation(open_file))
    if smoke_test:

        def finish() -> None:
            # every page of the wizard must render (nothing is started: autostart is off)
            ok = True
            for step in window.pages:
                window.go(step)
                QCoreApplication.processEvents()
                ok = render_check(window) and ok
            window.go("start")
            app.exit(0 if ok else 1)

        # Both timers are owned by the window, so they die with it.
        QTimer.singleShot(SMOKE_RENDER_DELAY_MS, window, finish)
        QTimer.singleShot(SMOKE_WATCHDOG_MS, window, lambda: app.exit(3))
    with _close_on_signals(window) as received:
        code = app.exec()
    window.close()
    if received:  # ended by a signal: say so in the exit code, as a shell would
        code = 128 + received[0]
    # Delete the window (and the timers it owns) now, not at some later event loop: main()
    # also runs inside test processes whose QApplication outlives this call.
    window.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return int(code)
