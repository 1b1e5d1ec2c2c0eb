"""GUI test setup: offscreen Qt, the app's own style, and a page ready to run real checks."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before anything imports Qt
# the app's QSettings (window size, last Python) go to a throwaway folder, not the user's
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="tfdoctor-test-config-")

import psutil
import pytest
from PySide6.QtCore import QCoreApplication, QEvent

CHECK_TIMEOUT_MS = 120_000  # a real check imports TensorFlow in a child process
SCREENSHOT_DIR = os.environ.get("TFDOCTOR_SCREENSHOTS", "/tmp")


@pytest.fixture(scope="session", autouse=True)
def _app_style(qapp):  # type: ignore[no-untyped-def]
    """Tests see the app as users do: Fusion style, the app's stylesheet and icon."""
    from tfdoctor.gui.app import setup_application

    setup_application(qapp)
    return qapp


@pytest.fixture(autouse=True)
def _fresh_settings():  # type: ignore[no-untyped-def]
    """Each test starts as a first launch: no window size or Python remembered from another
    test (a target picked in one test must not become the next test's default)."""
    from PySide6.QtCore import QSettings

    QSettings("tfdoctor", "tfdoctor").clear()
    yield
    QSettings("tfdoctor", "tfdoctor").clear()


@pytest.fixture
def page(qtbot):  # type: ignore[no-untyped-def]
    """A CheckPage at the app's default size; any check still running is stopped after."""
    from tfdoctor.gui.pages.check_page import CheckPage

    w = CheckPage()
    # Not qtbot.addWidget: qtbot closes its widgets before fixture teardown, and a check that
    # is still running must be stopped and waited for while the page (and its timer) lives.
    w.resize(890, 750)
    w.show()
    yield w
    if w.bridge.running:
        w.bridge.cancel()
        qtbot.waitUntil(lambda: not w.bridge.running, timeout=CHECK_TIMEOUT_MS)
    w.close()
    w.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def child_processes() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)
