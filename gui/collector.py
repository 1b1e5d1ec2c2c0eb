"""Python's cyclic garbage collector runs on the GUI thread only, from a timer.

Left automatic, a collection runs in whichever thread happens to allocate past the threshold:
a background task or the NVML sampler then finalizes the Python wrappers of widgets nobody
references any more. PySide cannot delete a widget off its thread, so it queues the C++
deletion for the GUI thread, which runs it at its next Python bytecode, wherever that is:
inside a Qt destructor that is dispatching an event to a Python event filter, the queued
destructor waits on a Qt mutex the outer destructor holds, and the window freezes for good
(seen: ~QObject -> QBasicMutex::lockInternal under the wheel guard's eventFilter).
Collected here, from the event loop, a dropped widget tree is deleted where Qt expects it.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QCoreApplication, QObject, QTimer

INTERVAL_MS = 1000
_PROPERTY = "tfdoctorGuiCollector"


class GuiThreadCollector(QObject):
    """Turns automatic collection off and collects each generation on a timer, as often as
    the interpreter's own thresholds would have."""

    def __init__(self, parent: QObject, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self.threshold = gc.get_threshold()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.check)
        self._timer.start()

    def check(self) -> int:
        """Collect the generations whose counts passed their thresholds; objects freed."""
        g0, g1, g2 = gc.get_count()
        t0, t1, t2 = self.threshold
        if g0 <= t0:
            return 0
        generation = 2 if (g1 > t1 and g2 > t2) else 1 if g1 > t1 else 0
        return gc.collect(generation)


def install(app: QCoreApplication) -> None:
    """Once per application: collection moves to the GUI thread for the app's lifetime."""
    if app.property(_PROPERTY):
        return
    GuiThreadCollector(app)
    app.setProperty(_PROPERTY, True)
