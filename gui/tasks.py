"""One-shot blocking core work off the GUI thread: a one-worker pool, polled by a GUI QTimer."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

log = logging.getLogger(__name__)

POLL_MS = 50


class Task(QObject):
    """Runs one call at a time in a worker thread; its end is reported on the GUI thread.

    The future is polled from a QTimer (no Qt object crosses a thread); `busy` is False again
    before `sig_done` / `sig_failed` fire, so their slots may submit the next call.
    """

    sig_done = Signal(object)  # what the call returned
    sig_failed = Signal(object)  # the exception it raised

    def __init__(
        self, parent: QObject | None = None, *, name: str = "tfdoctor-task", poll_ms: int = POLL_MS
    ) -> None:
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self._on_timer_tick)
        self._pending: Future[Any] | None = None
        pool = self._pool  # not self: the wrapper may be half gone when `destroyed` fires
        self.destroyed.connect(lambda *_: pool.shutdown(wait=False, cancel_futures=True))

    @property
    def busy(self) -> bool:
        return self._pending is not None

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bool:
        """Start `fn(*args, **kwargs)` in the worker; False (nothing started) while busy."""
        if self._pending is not None:
            return False
        self._pending = self._pool.submit(fn, *args, **kwargs)
        self._timer.start()
        return True

    def wait(self, timeout_s: float) -> bool:
        """Block up to `timeout_s` for the running call (at shutdown); True when none runs."""
        fut = self._pending
        if fut is None:
            return True
        try:
            fut.result(timeout=timeout_s)
        except TimeoutError:
            return False
        except Exception:  # noqa: BLE001 - its end is all that matters here
            pass
        return True

    def _on_timer_tick(self) -> None:
        fut = self._pending
        if fut is None or not fut.done():
            return
        self._pending = None
        self._timer.stop()
        try:
            result = fut.result()
        except Exception as exc:  # handed to the owner, which says it in one line
            log.debug("background task failed", exc_info=True)
            self.sig_failed.emit(exc)
            return
        self.sig_done.emit(result)
