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


def test_a_dropped_widget_tree_is_deleted_on_the_gui_thread_only(qtbot) -> None:  # type: ignore[no-untyped-def]
    # A widget tree nobody references but a reference cycle is freed by the cyclic collector.
    # Run from a worker thread (a background task allocating), PySide queues the C++ deletion
    # for the GUI thread's next bytecode, wherever that falls: inside a Qt destructor that calls
    # a Python event filter, it deadlocked the whole window. The app collects on its GUI thread.
    import gc
    import threading
    import weakref

    from PySide6.QtWidgets import QMenu, QWidget

    assert not gc.isenabled()  # the app's set-up (the tests' too) moved collection off threads
    freed_on: list[str] = []

    class Page:
        pass

    page = Page()
    page.me = page  # type: ignore[attr-defined]
    page.widget = QWidget()  # type: ignore[attr-defined]
    QMenu(page.widget)  # type: ignore[attr-defined]
    weakref.finalize(page, lambda: freed_on.append(threading.current_thread().name))
    del page

    kept: list[list[int]] = []

    def busy_worker() -> None:  # allocates far past every generation's threshold
        kept.extend([i] for i in range(200_000))

    worker = threading.Thread(target=busy_worker, name="busy-worker")
    worker.start()
    worker.join()
    qtbot.waitUntil(lambda: bool(freed_on), timeout=10_000)
    assert freed_on == ["MainThread"]
