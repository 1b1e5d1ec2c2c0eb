"""The Qt binding itself must not corrupt Python: a long-running GUI would abort otherwise."""

from __future__ import annotations

import sys

import pytest
from PySide6 import __version__ as pyside_version
from PySide6.QtWidgets import QLabel


@pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="None is immortal from Python 3.12 on (PEP 683)"
)
def test_void_qt_calls_do_not_drop_references_to_none(qapp) -> None:  # type: ignore[no-untyped-def]
    # PySide6 6.12.0 on CPython 3.11 loses one reference to None on every call of a method
    # returning void (setText, setVisible, QTimer.stop...). None's count is ~10k after the
    # window is built, so the app aborts with "Fatal Python error: none_dealloc" after a few
    # thousand UI updates, or at exit. PySide6 6.11.3 does not have the bug.
    label = QLabel()
    before = sys.getrefcount(None)
    for _ in range(1000):
        label.setText("x")
    lost = before - sys.getrefcount(None)
    assert lost < 100, (
        f"PySide6 {pyside_version} drops a reference to None on each void call ({lost} per "
        "1000): the GUI will abort with none_dealloc; use another PySide6 version "
        "(6.11.3 is fine) or Python 3.12+"
    )
