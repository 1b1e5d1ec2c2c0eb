"""The 'Reproduce' page: run the supervised training benchmark and watch memory climb live.

The form holds the benchmark's presets and knobs (core.bench.config); Start runs it through
BenchBridge (core threads); the plot shows VRAM, TF in use/peak, the worker's RSS, system RAM
and swap with phase/OOM/crash markers; the worker's output goes to a collapsible log pane;
the outcome and the ranked causes appear when it ends. "Open trace…" replays a recorded
trace into the same plot, "Demo" a bundled real one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import html
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QElapsedTimer, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core import telemetry
from tfdoctor.core.bench import observe
from tfdoctor.core.bench.batchsearch import SearchOptions
from tfdoctor.core.bench.config import DATA_MODES, PRESETS, BenchConfig, ConfigError
from tfdoctor.core.bench.supervisor import (
    STATUSES,
    TF_MEMORY_NOT_REPORTED,
    BenchResult,
    SupervisorOptions,
    phase_label,
)
from tfdoctor.core.diagnose.combine import cause_finding, rank_severity
from tfdoctor.core.diagnose.watch_rules import preallocated_pool
from tfdoctor.core.model import Finding, Severity, Target
from tfdoctor.core.paths import state_dir
from tfdoctor.core.probes import nvml
from tfdoctor.core.probes.targetrun import current_target
from tfdoctor.core.series import WATCHED, WORKER, format_bytes
from tfdoctor.gui import assets, theme
from tfdoctor.gui.bridges import BenchBridge, WatchBridge
from tfdoctor.gui.findings_view import FindingsView
from tfdoctor.gui.pages.layout import Notice, set_enabled
from tfdoctor.gui.telemetry_plot import TelemetryPlot

log = logging.getLogger(__name__)

DEMO_TRACE = assets.RESOURCES / "traces" / "cpu_oom_kill.trace"
LOG_LINES_KEPT = 5000
# the form column: wide enough for its longest label and a spin box, never the window
FORM_WIDTH = 330


def phase_words(phase: str) -> str:
    """A worker phase as the phase label shows it: "Importing TensorFlow"."""
    label = phase_label(phase)
    return label[:1].upper() + label[1:]


LAST_MINUTES_S = 180.0  # a long watch's verdict shows the plot's last three minutes


def _largest_clean(result: BenchResult) -> int | None:
    r = result.recommendation or {}
    return r.get("largest_clean_batch") if result.probes else None


def outcome_headline(result: BenchResult) -> str:
    """What the run's chip says: a search's result ("largest clean batch 96"), not the status
    of its last process; a stopped run is "stopped"."""
    o = result.outcome
    if result.probes and o.status == "completed":
        best = _largest_clean(result)
        return f"largest clean batch {best}" if best else "no batch size trained"
    return "stopped" if o.status == "cancelled" else o.status


def causes_as_findings(result: BenchResult) -> list[Finding]:
    """The ranked causes, shown with the findings cards: the best one as an error. For a
    batch search they say why the first failing batch failed, which is the search's answer,
    not an error of the search."""
    causes = result.diagnosis.causes
    if not result.probes:
        return [cause_finding(c, rank_severity(i)) for i, c in enumerate(causes)]
    failed = (result.recommendation or {}).get("first_failing_batch")
    out = []
    for i, c in enumerate(causes):
        f = cause_finding(c, Severity.WARNING if i == 0 else Severity.INFO)
        if failed:
            f = dataclasses.replace(f, title=f"Why batch {failed} failed: {f.title}")
        out.append(f)
    return out


class BenchPage(QWidget):
    """Presets and knobs, Start/Stop, progress, the live plot, the log, the outcome."""

    sig_status_changed = Signal(str)
    sig_watch_finished = Signal(object)  # observe.WatchResult: the user's own crash, explained

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        target_provider: Callable[[], Target | None] | None = None,
        gpu_count_provider: Callable[[], int | None] | None = None,
        bridge: BenchBridge | None = None,
        options: SupervisorOptions | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("benchPage")
        self.target_provider = target_provider or current_target
        # how many GPUs TensorFlow sees in the target (from the checks), None when unknown
        self.gpu_count_provider = gpu_count_provider or (lambda: None)
        self.bridge = bridge or BenchBridge(self)
        self.watch_bridge = WatchBridge(self)
        self.last_watch: observe.WatchResult | None = None
        self.base_options = options or SupervisorOptions(
            sample_every_s=0.1, gpu_api=nvml.live_api()
        )
        self.last_result: BenchResult | None = None
        self.last_options: SupervisorOptions | None = None
        self._total_steps = 0
        self._elapsed = QElapsedTimer()
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._update_phase_label)
        self._phase = ""
        self._step = ""
        self._build()
        self._connect()
        self._set_running(False)

    # ------------------------------------------------------------------ construction
    def _build(self) -> None:
        root = QVBoxLayout(self)
        root.setContentsMargins(22, 18, 22, 12)
        root.setSpacing(8)
        title = QLabel("Reproduce: a supervised training run", self)
        title.setObjectName("pageTitle")
        root.addWidget(title)
        sub = QLabel(
            "Trains a synthetic Keras model in the chosen Python, in a worker process tfdoctor "
            "watches. Whatever ends it (GPU or RAM exhausted, a crash, a hang), the app "
            "survives, plots memory up to that moment and says why.",
            self,
        )
        sub.setObjectName("pageSubtitle")
        sub.setWordWrap(True)
        root.addWidget(sub)

        top = QHBoxLayout()
        self.target_label = QLabel(self)
        self.target_label.setObjectName("infoLabel")
        self.open_trace_button = QPushButton("Open trace…", self)
        self.open_trace_button.setToolTip(
            "Replay a trace recorded by `tfdoctor monitor --record` or by an earlier run"
        )
        self.watch_button = QPushButton("Watch my notebook…", self)
        self.watch_button.setToolTip(
            "Follow your own notebook's (or any process's) memory live, and when it dies, say "
            "why from what was seen"
        )
        self.demo_button = QPushButton("Demo", self)
        self.demo_button.setToolTip(
            "Show a real recorded run: a Keras job killed by the kernel's OOM killer"
        )
        set_enabled(self.demo_button, DEMO_TRACE.is_file(), self._demo_why_not())
        top.addWidget(self.target_label, 1)
        top.addWidget(self.watch_button)
        top.addWidget(self.open_trace_button)
        top.addWidget(self.demo_button)
        root.addLayout(top)

        body = QHBoxLayout()
        body.setSpacing(12)
        body.addWidget(self._build_left(), 0)
        right = QSplitter(Qt.Orientation.Vertical, self)
        right.setChildrenCollapsible(False)

        upper = QWidget(right)
        uv = QVBoxLayout(upper)
        uv.setContentsMargins(0, 0, 0, 0)
        uv.setSpacing(6)
        prow = QHBoxLayout()
        self.phase_label = QLabel(upper)
        self.phase_label.setObjectName("stageLabel")
        self.progress = QProgressBar(upper)
        self.progress.setTextVisible(True)
        self.progress.setMaximumWidth(260)
        self.progress.hide()  # shown while a run goes and with its outcome
        prow.addWidget(self.phase_label, 1)
        prow.addWidget(self.progress)
        uv.addLayout(prow)
        self.plot = TelemetryPlot(upper)
        uv.addWidget(self.plot, 1)
        right.addWidget(upper)

        lower = QWidget(right)
        lv = QVBoxLayout(lower)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.setSpacing(4)
        self.outcome_label = QLabel()
        self.outcome_label.setObjectName("summaryLabel")
        self.outcome_label.setTextFormat(Qt.TextFormat.RichText)
        self.outcome_label.setWordWrap(True)
        self.outcome_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.causes = FindingsView(lower)
        # the outcome scrolls with the causes under it: at 700 px high a long outcome is
        # scrolled to, never cut off, and there is one scroll area, not two
        self.causes.set_header(self.outcome_label)
        self.causes.set_placeholder("When a run ends, why it ended appears here.")
        self.causes.setMinimumHeight(140)  # the cause is the point: never squeezed to a line
        lv.addWidget(self.causes, 1)
        self.log_toggle = QToolButton(lower)
        self.log_toggle.setText("▸ Worker output")
        self.log_toggle.setCheckable(True)
        self.log_toggle.setAutoRaise(True)
        self.log_toggle.setToolTip("What the worker printed: TensorFlow's log, tracebacks")
        lv.addWidget(self.log_toggle)
        self.log_view = QPlainTextEdit(lower)
        self.log_view.setObjectName("logView")
        self.log_view.setReadOnly(True)
        self.log_view.setMaximumBlockCount(LOG_LINES_KEPT)
        self.log_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log_view.hide()
        lv.addWidget(self.log_view, 1)
        right.addWidget(lower)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        body.addWidget(right, 1)
        root.addLayout(body, 1)

    def _build_form(self) -> QWidget:
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        box = QWidget(scroll)
        col = QVBoxLayout(box)
        col.setContentsMargins(0, 0, 6, 0)

        work = QGroupBox("Workload", box)
        f = QFormLayout(work)
        self.preset = theme.guard_wheel(QComboBox(work))
        for name, text in PRESETS.items():
            self.preset.addItem(name, name)
            self.preset.setItemData(self.preset.count() - 1, text, Qt.ItemDataRole.ToolTipRole)
        self.batch = self._spin(work, 1, 1 << 20, 32, "examples per step")
        self.steps = self._spin(work, 1, 1_000_000, 50, "steps per epoch")
        self.epochs = self._spin(work, 1, 10_000, 1, "epochs")
        self.data = theme.guard_wheel(QComboBox(work))
        for name, text in DATA_MODES.items():
            self.data.addItem({"array": "in-RAM array", "stream": "tf.data stream"}[name], name)
            self.data.setItemData(self.data.count() - 1, text, Qt.ItemDataRole.ToolTipRole)
        self.device = theme.guard_wheel(QComboBox(work))
        self.device.addItem("GPU", "gpu")
        self.device.addItem("CPU only", "cpu")
        self.preset.setToolTip("The model to train (synthetic data, no downloads)")
        self.data.setToolTip(
            "In-RAM array: the whole dataset in memory at once (how many notebooks load data); "
            "tf.data stream: batches made on the fly with prefetch"
        )
        self.device.setToolTip("Train on the GPU (when TensorFlow sees one) or only the CPU")
        f.addRow("Preset", self.preset)
        f.addRow("Batch size", self.batch)
        f.addRow("Steps", self.steps)
        f.addRow("Epochs", self.epochs)
        f.addRow("Data", self.data)
        f.addRow("Device", self.device)
        col.addWidget(work)

        knobs = QGroupBox("Knobs", box)
        k = QFormLayout(knobs)
        self.memory_growth = QCheckBox("Memory growth", knobs)
        self.memory_growth.setToolTip("Allocate GPU memory as needed instead of all at start")
        self.gpu_limit = self._spin(knobs, 0, 1 << 22, 0, "0 = no limit")
        self.gpu_limit.setSuffix(" MiB")
        self.gpu_limit.setSpecialValueText("no limit")
        self.gpu_limit.setToolTip("Cap TensorFlow's GPU pool: would this fit on a smaller card?")
        self.allocator = theme.guard_wheel(QComboBox(knobs))
        self.allocator.addItem("BFC (default)", "default")
        self.allocator.addItem("cuda_malloc_async", "cuda_malloc_async")
        self.allocator.setToolTip(
            "TF_GPU_ALLOCATOR: cuda_malloc_async fragments less and returns memory to the driver"
        )
        self.mixed = QCheckBox("Mixed precision (float16)", knobs)
        self.mixed.setToolTip("About half the activation memory; faster on compute capability 7+")
        self.xla = QCheckBox("XLA (jit_compile)", knobs)
        self.xla.setToolTip("Compile the model with XLA: less memory and faster, or ptxas trouble")
        self.eager = QCheckBox("Run eagerly", knobs)
        self.eager.setToolTip("No tf.function: slow, but shows whether tracing is the problem")
        self.accum = self._spin(knobs, 1, 1024, 1, "gradient accumulation steps")
        k.addRow(self.memory_growth)
        k.addRow("GPU memory limit", self.gpu_limit)
        k.addRow("Allocator", self.allocator)
        k.addRow(self.mixed)
        k.addRow(self.xla)
        k.addRow(self.eager)
        k.addRow("Grad. accumulation", self.accum)
        col.addWidget(knobs)

        safety = QGroupBox("Safety and search", box)
        s = QFormLayout(safety)
        self.ram_cap = self._spin(safety, 0, 1 << 22, 0, "0 = no cap")
        self.ram_cap.setSuffix(" MiB")
        self.ram_cap.setSpecialValueText("no cap")
        self.ram_cap.setToolTip(
            "Cap the worker's RAM (a memory cgroup where possible): would it die on a smaller "
            "machine? The desktop is protected either way: tfdoctor stops a run before RAM "
            "runs out."
        )
        self.find_max = QCheckBox("Find the largest batch size", safety)
        self.find_max.setToolTip(
            "Grow the batch until it fails, then bisect: the largest batch that trains cleanly, "
            "and a recommendation with a 10% margin"
        )
        self.max_batch = self._spin(safety, 1, 1 << 20, 8192, "largest batch to try")
        s.addRow("Worker RAM cap", self.ram_cap)
        s.addRow(self.find_max)
        s.addRow("Search up to", self.max_batch)
        col.addWidget(safety)

        col.addStretch(1)
        scroll.setWidget(box)
        return scroll

    def _build_left(self) -> QWidget:
        """The form (it scrolls), then Start and Stop and a start error, always in view."""
        left = QWidget(self)
        left.setFixedWidth(FORM_WIDTH)
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.setSpacing(6)
        lv.addWidget(self._build_form(), 1)
        buttons = QHBoxLayout()
        self.start_button = QPushButton("Start", left)
        self.start_button.setToolTip("Run the benchmark in a supervised worker process")
        self.start_button.setObjectName("runButton")
        self.stop_button = QPushButton("Stop", left)
        self.stop_button.setToolTip("Stop the run: the worker and everything it started")
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        lv.addLayout(buttons)
        self.device_notice = Notice(left)  # before the run: a GPU run on a GPU-less Python
        lv.addWidget(self.device_notice)
        self.error_label = QLabel(left)
        self.error_label.setObjectName("errorMessage")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        lv.addWidget(self.error_label)
        return left

    @staticmethod
    def _spin(parent: QWidget, lo: int, hi: int, value: int, tip: str) -> QSpinBox:
        w = theme.guard_wheel(QSpinBox(parent))
        w.setRange(lo, hi)
        w.setValue(value)
        w.setToolTip(tip)
        w.setGroupSeparatorShown(True)
        return w

    def _connect(self) -> None:
        self.start_button.clicked.connect(self.start)
        self.stop_button.clicked.connect(self.stop)
        self.open_trace_button.clicked.connect(self._on_open_trace_clicked)
        self.demo_button.clicked.connect(self.show_demo)
        self.watch_button.clicked.connect(self.open_watch_dialog)
        wb = self.watch_bridge
        wb.sig_telemetry.connect(self.plot.consume)
        wb.sig_finished.connect(self._on_watch_finished)
        wb.sig_failed.connect(self._on_watch_failed)
        self.log_toggle.toggled.connect(self._on_log_toggled)
        self.find_max.toggled.connect(self.max_batch.setEnabled)
        self.max_batch.setEnabled(False)
        self.device.currentIndexChanged.connect(lambda _i: self._check_device())
        b = self.bridge
        b.sig_event.connect(self._on_bridge_event)
        b.sig_output.connect(self._on_bridge_output)
        b.sig_telemetry.connect(self.plot.consume)
        b.sig_finished.connect(self._on_bridge_finished)
        b.sig_failed.connect(self._on_bridge_failed)

    # ------------------------------------------------------------------ public API
    @property
    def running(self) -> bool:
        """A benchmark runs, or a process is being watched."""
        return self.bridge.running or self.watch_bridge.running

    def config(self) -> BenchConfig:
        """The form as a config (raises ConfigError on a bad combination)."""
        return BenchConfig.from_form(
            {
                "preset": str(self.preset.currentData()),
                "batch_size": self.batch.value(),
                "steps": self.steps.value(),
                "epochs": self.epochs.value(),
                "data": str(self.data.currentData()),
                "device": str(self.device.currentData()),
                "memory_growth": self.memory_growth.isChecked(),
                "memory_limit_mb": self.gpu_limit.value(),
                "allocator": str(self.allocator.currentData()),
                "mixed_precision": self.mixed.isChecked(),
                "jit_compile": self.xla.isChecked(),
                "run_eagerly": self.eager.isChecked(),
                "grad_accum": self.accum.value(),
            }
        )

    def set_config(self, config: BenchConfig) -> None:
        self.preset.setCurrentIndex(max(0, self.preset.findData(config.preset)))
        self.batch.setValue(config.batch_size)
        self.steps.setValue(config.steps)
        self.epochs.setValue(config.epochs)
        self.data.setCurrentIndex(max(0, self.data.findData(config.data)))
        self.device.setCurrentIndex(max(0, self.device.findData(config.device)))
        self.memory_growth.setChecked(config.memory_growth)
        self.gpu_limit.setValue(config.memory_limit_mb or 0)
        self.allocator.setCurrentIndex(max(0, self.allocator.findData(config.allocator)))
        self.mixed.setChecked(config.mixed_precision)
        self.xla.setChecked(config.jit_compile)
        self.eager.setChecked(config.run_eagerly)
        self.accum.setValue(config.grad_accum)

    def start(self, config: BenchConfig | None = None) -> bool:
        """Start a run (the form's config unless one is given); False when it cannot."""
        if self.running:
            return False
        self.error_label.hide()
        target = self.target_provider()
        if target is None:
            self._error("Pick a Python on the Environment checks page first.")
            return False
        try:
            cfg = config.validate() if isinstance(config, BenchConfig) else self.config()
            search = (
                SearchOptions(None, self.max_batch.value()).validate(cfg)
                if self.find_max.isChecked()
                else None
            )
        except ConfigError as exc:
            self._error(str(exc))
            return False
        options = dataclasses.replace(
            self.base_options, memory_cap_mib=self.ram_cap.value() or None
        )
        self.last_options = options
        self.refresh_target()
        self.plot.clear()
        self.log_view.clear()
        self.causes.clear()
        self.causes.set_placeholder("When the run ends, why it ended appears here.")
        self.outcome_label.setText("")
        self.last_result = None
        self._total_steps = cfg.steps * cfg.epochs
        self.progress.show()
        self.progress.setRange(0, 0)
        self.progress.setFormat("")
        self.progress.setMinimumWidth(0)
        self._phase, self._step = phase_words("start"), ""
        self._elapsed.start()
        self._clock.start()
        self._update_phase_label()
        self.bridge.start(target, cfg, options, search)
        self._set_running(True)
        self._status(f"Running {cfg.describe()} in {target.label}…")
        return True

    def stop(self) -> None:
        if self.watch_bridge.running:
            self.watch_bridge.stop()
            set_enabled(self.stop_button, False, "Stopping the watch…")
            return
        if self.running:
            self.bridge.cancel()
            set_enabled(self.stop_button, False, "Stopping the run…")
            self._phase = "Stopping"
            self._update_phase_label()

    def refresh_target(self) -> None:
        t = self.target_provider()
        self.target_label.setText(
            f"Python: <b>{t.label}</b> — {t.python}" if t else "Python: none selected"
        )
        self._check_device()

    def _check_device(self) -> None:
        """Warn before the run, next to Start, when it asks for a GPU TensorFlow does not see."""
        if self.device.currentData() == "gpu" and self.gpu_count_provider() == 0:
            self.device_notice.say(
                "TensorFlow sees no GPU in this Python: a GPU run would use the CPU. Pick "
                "Device = CPU only, or see the environment checks for why.",
                "warn",
            )
        else:
            self.device_notice.clear_notice()

    def replay_trace(self, path: str | Path) -> bool:
        """Show a recorded trace in the plot (at once); False with a message when unreadable."""
        if self.running:
            return False
        timeline = telemetry.Timeline()
        try:
            header = telemetry.replay(path, timeline)
        except (telemetry.TraceError, OSError) as exc:
            self._error(f"Cannot open the trace: {getattr(exc, 'strerror', None) or exc}")
            return False
        self.plot.clear(process=WATCHED if header.get("watch") else WORKER)
        self.progress.hide()
        self._phase, self._step = "", ""
        self._update_phase_label(with_time=False)
        self.plot.consume([item for _, item in timeline.since(0)])
        self.plot.redraw()
        note = header.get("note") or ""
        self.outcome_label.setText(
            f"<b>Trace</b> {Path(path).name}" + (f" — {note}" if note else "")
        )
        self.causes.clear()
        self.causes.set_placeholder("A trace holds telemetry only; run a benchmark for causes.")
        self._status(f"Showing trace {path}")
        return True

    def show_saved(
        self,
        result: BenchResult | None,
        items: list[tuple[str, dict[str, Any]]],
        watch: observe.WatchResult | None = None,
    ) -> None:
        """Show a saved run with its telemetry, or a saved watch (an investigation was
        opened): the plot, the outcome, its causes and the worker's output."""
        if self.running:
            return
        self.error_label.hide()
        self.plot.clear(process=WATCHED if result is None and watch is not None else WORKER)
        self.log_view.clear()
        self.causes.clear()
        self.outcome_label.setText("")
        self.progress.hide()
        self.last_result, self.last_watch = None, None
        if result is not None:
            self.set_config(result.config)
            self.plot.consume(items)
            self.plot.redraw()
            if result.output_tail:
                self.log_view.appendPlainText("\n".join(result.output_tail))
            self._on_bridge_finished(result)
        elif watch is not None:
            self.plot.consume(watch.items)
            self.plot.redraw()
            self._on_watch_finished(watch)
        else:
            self.causes.set_placeholder("No run yet: start one above.")
            self._phase, self._step = "", ""
            self._update_phase_label(with_time=False)

    def show_demo(self) -> None:
        self.replay_trace(DEMO_TRACE)

    # ------------------------------------------------------------------ watch
    def open_watch_dialog(self) -> None:
        from tfdoctor.gui.watch_dialog import WatchDialog

        dialog = WatchDialog(self.watch_tf_file, self)
        if dialog.exec() and dialog.watched() is not None:
            self.start_watch(dialog.watched())  # type: ignore[arg-type]

    @property
    def watch_tf_file(self) -> Path:
        return state_dir() / "watch" / "tf.jsonl"

    def start_watch(self, watched: observe.Watched, tf_file: Path | None = None) -> bool:
        """Watch the user's own process on this page's plot; its verdict comes at its end."""
        if self.running:
            self._error("A run is in progress: stop it first")
            return False
        tf = tf_file or self.watch_tf_file
        with contextlib.suppress(OSError):
            tf.parent.mkdir(parents=True, exist_ok=True)
        self.error_label.hide()
        self.plot.clear(process=WATCHED)
        self.causes.clear()
        self.causes.set_placeholder("When the watched process ends, why it ended appears here.")
        self.outcome_label.setText(f"Watching <b>{html.escape(watched.label)}</b>…")
        # the trace goes to disk as it is taken: whatever happens, the last minutes survive
        stamp = time.strftime("%Y%m%d-%H%M%S")
        record = tf.parent / f"{stamp}-pid{watched.pid}.trace.jsonl"
        if not self.watch_bridge.start(watched, tf_file=tf, record=record):
            return False
        self.last_watch = None
        self._phase, self._step = f"Watching {watched.label}", ""
        self._elapsed.start()
        self._clock.start()
        self._update_phase_label()
        self.progress.hide()
        self._set_running(True)
        self._status(f"Watching {watched.label}")
        return True

    def _on_watch_failed(self, message: str) -> None:
        self._clock.stop()
        self._set_running(False)
        self.outcome_label.setText("")
        self._error(message)

    def _on_watch_finished(self, result: observe.WatchResult) -> None:
        self.last_watch = result
        self._clock.stop()
        self._set_running(False)
        e = result.ending
        colour = "#6b7582" if e.normal else "#c62828"
        said = f"<b style='color:{colour}'>{html.escape(result.watched.label)}</b>: "
        said += f"{html.escape(e.words())} after {result.duration_s:.0f} s."
        for line in e.restart_lines[-1:]:
            said += f"<br>Jupyter: {html.escape(line)}"
        if result.trace is not None:
            said += f"<br><span style='color:#6b7582'>Trace: {html.escape(str(result.trace))}"
            said += "</span>"
        self.outcome_label.setText(said)
        samples = [i for k, i in result.items if k == "sample"]
        if samples and samples[-1]["t"] > LAST_MINUTES_S:  # its last minutes, where it died
            end = float(samples[-1]["t"])
            self.plot.memory.setXRange(end - LAST_MINUTES_S, end, padding=0.02)
        self.causes.clear()
        for i, cause in enumerate(result.causes):
            self.causes.add_finding(cause_finding(cause, rank_severity(i)))
        if not result.causes:
            self.causes.set_placeholder(
                "Nothing to explain: it ended normally."
                if e.normal and e.how != "running"
                else "You stopped watching: it still runs."
                if e.how == "running"
                else "No cause found in what the watch saw: run it again with the first cell "
                "(Watch my notebook… shows it) for TensorFlow's own numbers."
                + (
                    f" {pool}"
                    if (pool := preallocated_pool(result.items, result.watched.pid))
                    else ""
                )
            )
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        chip = "still running" if e.how == "running" else ("ended" if e.normal else e.words())
        self.progress.setFormat(chip)
        self.progress.setMinimumWidth(
            min(260, self.progress.fontMetrics().horizontalAdvance(chip) + 40)
        )
        self.progress.show()
        self._phase, self._step = "Finished watching", ""
        self._update_phase_label(with_time=False)
        top = result.causes[0].title if result.causes else e.words()
        self._status(f"{result.watched.label}: {top}")
        self.sig_watch_finished.emit(result)

    def shutdown(self, wait_s: float = 15.0) -> None:
        """Stop a run when the window closes: the worker and its children are killed and its
        memory cgroup removed before the app exits (waits up to `wait_s`)."""
        if self.watch_bridge.running:
            self.watch_bridge.stop()
            self.watch_bridge.wait(wait_s)
        if self.running:
            self.bridge.cancel()
            self.bridge.wait(wait_s)

    # ------------------------------------------------------------------ slots
    def _on_bridge_event(self, kind: str, data: Any) -> None:
        if kind == "phase":
            self._phase = phase_words(str(data))
            if data == "first_step" and self._total_steps:
                self.progress.setRange(0, self._total_steps)
                self.progress.setValue(0)
                self.progress.setFormat("step %v of %m")
            self._update_phase_label()
        elif kind == "step" and isinstance(data, dict):
            step = int(data.get("step") or 0)
            if self.progress.maximum() > 0:
                self.progress.setValue(min(step, self.progress.maximum()))
        elif kind == "status":
            self._status(str(data))
        elif kind == "search_probe" and isinstance(data, dict):
            self._step = f" — batch size {data.get('batch_size')} (probe {data.get('index')})"
            self._update_phase_label()
        elif kind == "oom" and isinstance(data, dict):
            self._status("TensorFlow ran out of memory (ResourceExhaustedError)")

    def _on_bridge_output(self, lines: list[str]) -> None:
        self.log_view.appendPlainText("\n".join(lines))

    def _on_bridge_finished(self, result: BenchResult) -> None:
        self.last_result = result
        self._clock.stop()
        self._set_running(False)
        o = result.outcome
        headline = outcome_headline(result)
        colour = {"completed": "#2e7d32", "cancelled": "#6b7582"}.get(o.status, "#c62828")
        if result.probes and o.status == "completed" and not _largest_clean(result):
            colour = "#c62828"  # a search where no batch size trained
        what = STATUSES.get(o.status, o.status)
        m = result.metrics
        if _largest_clean(result):
            r = result.recommendation or {}
            first = r.get("first_failing_batch")
            bits = [
                f"<b style='color:{colour}'>{html.escape(headline)}</b> "
                f"({len(result.probes)} probes, {o.duration_s:.1f} s): "
                + (f"batch {first} failed; " if first else "no batch size failed; ")
                + f"recommended <b>{r['recommended_batch']}</b>, with a safety margin."
            ]
        else:
            bits = [
                f"<b style='color:{colour}'>{html.escape(headline)}</b> after "
                f"{o.duration_s:.1f} s: {o.detail.rstrip('.')}."
            ]
        if not _largest_clean(result) and m.get("steady_steps_per_s"):
            peak = ", ".join(
                f"{d} {format_bytes(v)}" for d, v in (m.get("tf_peak_bytes") or {}).items()
            )
            bits.append(
                f"{m['steady_steps_per_s']:.1f} steps/s; TF peak {peak or TF_MEMORY_NOT_REPORTED}; "
                f"worker RSS "
                f"peak {format_bytes(m.get('rss_peak_bytes') or 0)}."
            )
        self.outcome_label.setText(" ".join(bits))
        self.outcome_label.setToolTip(what)
        self.causes.clear()
        found = [] if o.status == "cancelled" else causes_as_findings(result)
        for f in found:
            self.causes.add_finding(f)
        if not found:
            self.causes.set_placeholder(
                "You stopped the run: there is nothing to explain. Start it again to "
                "reproduce the crash."
                if o.status == "cancelled"
                else "Nothing to explain: the run completed."
                if o.status == "completed"
                else "No known failure pattern in the worker's output; see the output below."
            )
        tail = []
        if o.exception and o.exception.get("traceback"):
            tail += ["", "--- the exception ---", str(o.exception["traceback"]).rstrip()]
        if o.fault_stack:
            tail += ["", "--- faulthandler: the Python stacks when it died ---", o.fault_stack]
        if o.oom_kill is not None and o.oom_kill.kernel_line:
            tail += ["", "--- kernel log ---", o.oom_kill.kernel_line]
        if tail:
            self.log_view.appendPlainText("\n".join(tail))
        self.log_view.horizontalScrollBar().setValue(0)
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.progress.setFormat(headline)
        fm = self.progress.fontMetrics()  # the chip is as wide as what it says
        self.progress.setMinimumWidth(min(260, fm.horizontalAdvance(headline) + 40))
        self._phase, self._step = "Finished", ""
        self._update_phase_label(with_time=False)
        self._status(f"Benchmark {o.status}: {o.detail}")
        # the output opens by itself for a stack to read (a crash, a hang, an exception) or
        # when no cause explains the end; a kill's cause card carries its kernel line, and
        # the plot needs the room
        stack = o.status in ("crashed", "hang", "exception")
        if o.status not in ("completed", "cancelled") and (stack or not found):
            self.log_toggle.setChecked(True)

    def _on_bridge_failed(self, message: str) -> None:
        self._clock.stop()
        self._set_running(False)
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self._phase, self._step = "Could not start", ""
        self._update_phase_label(with_time=False)
        self._error(message)

    def _on_open_trace_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a telemetry trace", "", "tfdoctor traces (*.trace *.jsonl);;All files (*)"
        )
        if path:
            self.replay_trace(path)

    def _on_log_toggled(self, on: bool) -> None:
        self.log_view.setVisible(on)
        self.log_toggle.setText(("▾" if on else "▸") + " Worker output")

    # ------------------------------------------------------------------ helpers
    def _set_running(self, running: bool) -> None:
        busy = "A run is in progress: stop it first"
        set_enabled(self.start_button, not running, busy)
        set_enabled(self.stop_button, running, "No run in progress")
        set_enabled(self.open_trace_button, not running, busy)
        set_enabled(self.watch_button, not running, busy)
        set_enabled(self.demo_button, not running and DEMO_TRACE.is_file(), self._demo_why_not())

    def _demo_why_not(self) -> str:
        if not DEMO_TRACE.is_file():
            return f"The recorded run is missing from this install ({DEMO_TRACE.name})"
        return "A run is in progress: stop it first"

    def _update_phase_label(self, with_time: bool = True) -> None:
        secs = self._elapsed.elapsed() // 1000 if with_time and self._elapsed.isValid() else None
        clock = f" ({secs} s)" if secs is not None and self.running else ""
        self.phase_label.setText(f"{self._phase}{self._step}{clock}")

    def _error(self, message: str) -> None:
        self.error_label.setText(message)
        self.error_label.show()
        self._status(message)

    def _status(self, text: str) -> None:
        self.sig_status_changed.emit(text)
