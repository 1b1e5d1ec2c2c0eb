"""Bridges from core's threads to Qt signals: poll core buffers and futures from a GUI QTimer."""

from __future__ import annotations

import logging
import os
import threading

from PySide6.QtCore import QObject, QTimer, Signal

from tfdoctor.core.bench import observe
from tfdoctor.core.bench.batchsearch import SearchOptions
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.supervisor import BenchRun, SupervisorOptions
from tfdoctor.core.model import Target
from tfdoctor.core.probes import envs, nvml, targetrun
from tfdoctor.core.scan import CheckRun
from tfdoctor.core.session import Analysis, Inputs, Session, analyse
from tfdoctor.core.telemetry import Timeline
from tfdoctor.gui.tasks import POLL_MS, Task

log = logging.getLogger(__name__)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _prepare_run(
    target: Target,
    snapshot: str | os.PathLike[str] | None,
    timeout_s: float,
    cancelled: threading.Event,
) -> CheckRun | None:
    """Worker thread: validate the interpreter (a subprocess, up to seconds), then start the run.

    Returns None when the user cancelled while the interpreter was being validated.
    """
    targetrun.python_version(target.python)
    if cancelled.is_set():
        return None
    # target_validated: the probe need not run the interpreter check a second time.
    run = CheckRun(target, timeout_s=timeout_s, snapshot=snapshot, target_validated=True)
    return run.start()


class CheckBridge(QObject):
    """Runs one core CheckRun at a time and re-emits its events as Qt signals on the GUI thread.

    Everything slow (validating the interpreter, the probes) happens in core threads; this
    object only polls `CheckRun.events.since(seq)` and a validation Future from a QTimer.
    """

    sig_check_started = Signal(object)  # Target, once validated and the probes are running
    sig_probe_started = Signal(str)  # probe name (see core.scan.PROBE_LABELS)
    sig_probe_finished = Signal(object)  # ProbeResult
    sig_stage_changed = Signal(str)  # human label of the target probe's stage
    sig_finding_added = Signal(object)  # Finding
    sig_check_finished = Signal(object)  # CheckReport (report.cancelled when cancelled)
    sig_check_cancelled = Signal()  # cancelled before any probe ran: no report
    sig_check_failed = Signal(str)  # one-line reason the check could not run at all

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        timeout_s: float = targetrun.DEFAULT_TIMEOUT_S,
        poll_ms: int = POLL_MS,
    ) -> None:
        super().__init__(parent)
        self.timeout_s = timeout_s
        self._validation = Task(self, name="tfdoctor-validate", poll_ms=poll_ms)
        self._validation.sig_done.connect(self._on_validation_done)
        self._validation.sig_failed.connect(self._on_validation_failed)
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self._on_timer_tick)
        self._cancel_requested = threading.Event()
        self._run: CheckRun | None = None
        self._seq = 0
        self._target: Target | None = None

    # -- public

    @property
    def running(self) -> bool:
        """True from start() until a finished/cancelled/failed signal."""
        return self._validation.busy or self._run is not None

    @property
    def cancelling(self) -> bool:
        return self.running and self._cancel_requested.is_set()

    @property
    def target(self) -> Target | None:
        return self._target

    def start(self, target: Target, snapshot: str | os.PathLike[str] | None = None) -> None:
        """Validate `target` and start a check, both off the GUI thread; returns at once.

        Raises:
            RuntimeError: a check is already running (cancel it and wait for it to end first).
        """
        if self.running:
            raise RuntimeError("a check is already running")
        self._target = target
        self._cancel_requested = threading.Event()
        self._seq = 0
        self._validation.submit(
            _prepare_run, target, snapshot, self.timeout_s, self._cancel_requested
        )

    def cancel(self) -> None:
        """Ask the check to stop; the end is still reported (finished with report.cancelled)."""
        if not self.running:
            return
        self._cancel_requested.set()
        if self._run is not None:
            self._run.cancel()

    def wait(self, timeout_s: float) -> None:
        """Block up to `timeout_s` for a cancelled check to end (at shutdown)."""
        self._validation.wait(timeout_s)
        run = self._run
        if run is not None:
            run.wait(timeout_s)

    # -- polling (GUI thread)

    def _on_validation_done(self, run: CheckRun | None) -> None:
        if run is None:
            self.sig_check_cancelled.emit()
            return
        self._run = run
        if self._cancel_requested.is_set():
            run.cancel()
        self.sig_check_started.emit(run.target)
        if self._run is not None:
            self._timer.start()
            self._drain(self._run)

    def _on_validation_failed(self, exc: Exception) -> None:
        if isinstance(exc, targetrun.TargetError):
            self._end_failed(_one_line(exc))
        elif isinstance(exc, nvml.SnapshotError):
            self._end_failed(f"cannot replay the snapshot: {_one_line(exc)}")
        else:  # OSError, a bug: one line, never a trace
            log.warning("could not start the check", exc_info=exc)
            self._end_failed(f"could not start the check: {_one_line(exc)}")

    def _on_timer_tick(self) -> None:
        if self._run is not None:
            self._drain(self._run)

    def _drain(self, run: CheckRun) -> None:
        for seq, (kind, data) in run.events.since(self._seq):
            self._seq = seq
            if kind == "probe_started":
                self.sig_probe_started.emit(str(data))
            elif kind == "probe_finished":
                self.sig_probe_finished.emit(data)
            elif kind == "stage":
                self.sig_stage_changed.emit(str(data))
            elif kind == "finding":
                self.sig_finding_added.emit(data)
            elif kind == "done":
                self._timer.stop()
                self._run = None
                self.sig_check_finished.emit(data)
                return
            else:
                log.debug("ignoring check event %r", kind)
            if self._run is not run:  # a slot cancelled or restarted us while we emitted
                return

    def _end_failed(self, message: str) -> None:
        self._timer.stop()
        self._run = None
        self.sig_check_failed.emit(message)


class EnvsBridge(QObject):
    """Lists candidate target interpreters off the GUI thread (conda and Jupyter take seconds)."""

    sig_envs_found = Signal(list)  # list[Target], the current interpreter first
    sig_envs_failed = Signal(str)

    def __init__(self, parent: QObject | None = None, *, poll_ms: int = POLL_MS * 2) -> None:
        super().__init__(parent)
        self._task = Task(self, name="tfdoctor-envs", poll_ms=poll_ms)
        self._task.sig_done.connect(lambda found: self.sig_envs_found.emit(list(found)))
        self._task.sig_failed.connect(self._on_task_failed)

    @property
    def busy(self) -> bool:
        return self._task.busy

    def refresh(self) -> None:
        """Start listing; a refresh while one is under way is folded into it."""
        self._task.submit(envs.find_targets)

    def _on_task_failed(self, exc: Exception) -> None:
        log.warning("could not list Python environments", exc_info=exc)
        self.sig_envs_failed.emit(_one_line(exc))


class AnalysisBridge(QObject):
    """Analyses a session off the GUI thread (its logs can be a week of server output) and
    keeps the result in the session; one analysis at a time, the latest inputs win."""

    sig_analysed = Signal(object)  # core.session.Analysis, now the session's
    sig_failed = Signal(str)  # one line: why the evidence could not be read

    def __init__(
        self, session: Session, parent: QObject | None = None, *, poll_ms: int = POLL_MS
    ) -> None:
        super().__init__(parent)
        self.session = session
        self._task = Task(self, name="tfdoctor-diagnose", poll_ms=poll_ms)
        self._task.sig_done.connect(self._on_task_done)
        self._task.sig_failed.connect(self._on_task_failed)
        self._inputs: Inputs | None = None

    @property
    def busy(self) -> bool:
        return self._task.busy

    def request(self) -> None:
        """Analyse the session unless its analysis is current (or failed for these inputs)."""
        if self._task.busy or self.session.error() is not None:
            return  # a stale answer is re-requested when it arrives
        if self.session.analysis() is not None:
            return
        self._inputs = self.session.inputs()
        self._task.submit(analyse, self._inputs)

    def _on_task_done(self, analysis: Analysis) -> None:
        if not self.session.store(analysis):  # the session changed meanwhile
            self.request()
            return
        self.sig_analysed.emit(analysis)

    def _on_task_failed(self, exc: Exception) -> None:
        if isinstance(exc, OSError):
            msg = f"Cannot read a log: {exc.strerror or exc}"
        else:  # a bug: one line, never a traceback
            log.warning("diagnosis failed", exc_info=exc)
            msg = f"The diagnosis failed: {_one_line(exc)}"
        if self._inputs is not None:
            self.session.store_error(self._inputs, msg)
            if not self.session.is_current(self._inputs):
                self.request()
                return
        self.sig_failed.emit(msg)


class BenchBridge(QObject):
    """Runs one supervised benchmark (or batch search) as a core BenchRun; polls its events and
    telemetry from a QTimer and re-emits them on the GUI thread."""

    sig_event = Signal(str, object)  # (kind, data) from core.bench.supervisor events
    sig_output = Signal(list)  # new lines of the worker's output (batched per tick)
    sig_telemetry = Signal(list)  # new timeline items [(kind, item)]
    sig_finished = Signal(object)  # BenchResult
    sig_failed = Signal(str)  # one line: the benchmark could not start

    def __init__(self, parent: QObject | None = None, *, poll_ms: int = POLL_MS) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self._on_timer_tick)
        self._run: BenchRun | None = None
        self.timeline: Timeline = Timeline()
        self._seq = 0
        self._tl_seq = 0

    @property
    def running(self) -> bool:
        return self._run is not None

    def start(
        self,
        target: Target,
        config: BenchConfig,
        options: SupervisorOptions,
        search: SearchOptions | None = None,
    ) -> None:
        """Start in a core thread; returns at once.

        Raises:
            RuntimeError: a run is already going.
        """
        if self.running:
            raise RuntimeError("a benchmark is already running")
        self._run = BenchRun(target, config, options, search).start()
        self.timeline = self._run.timeline
        self._seq = self._tl_seq = 0
        self._timer.start()

    def cancel(self) -> None:
        if self._run is not None:
            self._run.cancel()

    def wait(self, timeout_s: float) -> bool:
        """Block up to `timeout_s` for the run's end (at shutdown); True when none runs."""
        run = self._run
        return run is None or run.wait(timeout_s)

    def _on_timer_tick(self) -> None:
        run = self._run
        if run is None:
            return
        done = run.done  # read first: every event is in the buffer before the run is done
        lines: list[str] = []
        for seq, (kind, data) in run.events.since(self._seq):
            self._seq = seq
            if kind == "output":
                lines.append(str(data))
            elif kind != "done":
                self.sig_event.emit(kind, data)
        if lines:
            self.sig_output.emit(lines)
        items = self.timeline.since(self._tl_seq)
        if items:
            self._tl_seq = items[-1][0]
            self.sig_telemetry.emit([item for _, item in items])
        if done:
            self._run = None
            self._timer.stop()
            if run.bug is not None:
                log.warning("the benchmark failed", exc_info=run.bug)
            if run.error is not None:
                self.sig_failed.emit(run.error)
            elif run.result is not None:
                self.sig_finished.emit(run.result)
            else:
                self.sig_failed.emit("the benchmark ended without a result")


class WatchBridge(QObject):
    """Watches the user's own process (core.bench.observe) in a core thread; polls its
    timeline from a QTimer and re-emits it, and the verdict, on the GUI thread."""

    sig_telemetry = Signal(list)  # new timeline items [(kind, item)]
    sig_finished = Signal(object)  # observe.WatchResult
    sig_failed = Signal(str)  # one line: the watch could not start

    def __init__(self, parent: QObject | None = None, *, poll_ms: int = POLL_MS) -> None:
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setInterval(poll_ms)
        self._timer.timeout.connect(self._on_timer_tick)
        self._observer: observe.Observer | None = None
        self._thread: threading.Thread | None = None
        self._result: list[observe.WatchResult] = []
        self._error: list[BaseException] = []
        self._seq = 0

    @property
    def running(self) -> bool:
        return self._observer is not None

    def start(
        self,
        watched: observe.Watched,
        *,
        tf_file: str | os.PathLike[str] | None = None,
        record: str | os.PathLike[str] | None = None,
    ) -> bool:
        """Start watching (recording to `record`, bounded); False (and sig_failed with why)
        when it cannot."""
        if self.running:
            self.sig_failed.emit("already watching a process")
            return False
        try:
            obs = observe.Observer(
                watched,
                interval_s=0.25,
                gpu_api=nvml.live_api(),
                tf_file=tf_file,
                record=record,
            )
        except (observe.WatchError, OSError) as exc:
            self.sig_failed.emit(str(exc))
            return False
        self._observer, self._seq = obs, 0
        self._result, self._error = [], []

        def run() -> None:
            try:
                self._result.append(obs.start().wait())
            except Exception as exc:  # a bug must not die silently in a thread
                log.warning("the watch failed", exc_info=exc)
                self._error.append(exc)

        self._thread = threading.Thread(target=run, name="tfdoctor-watch", daemon=True)
        self._thread.start()
        self._timer.start()
        return True

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()

    def wait(self, timeout_s: float) -> bool:
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True

    def _on_timer_tick(self) -> None:
        obs = self._observer
        if obs is None:
            return
        done = self._thread is not None and not self._thread.is_alive()
        items = obs.timeline.since(self._seq)
        if items:
            self._seq = items[-1][0]
            self.sig_telemetry.emit([item for _, item in items])
        if done:
            self._observer = None
            self._timer.stop()
            if self._result:
                self.sig_finished.emit(self._result[0])
            else:
                err = self._error[0] if self._error else None
                self.sig_failed.emit(f"the watch failed: {err}" if err else "the watch failed")
