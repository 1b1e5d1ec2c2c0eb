"""The 'Environment checks' page: pick a Python, run the check, read findings as they arrive."""

from __future__ import annotations

import logging

from PySide6.QtCore import QElapsedTimer, Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core.model import Finding, ProbeResult, ProbeStatus, Severity, Target
from tfdoctor.core.probes.targetrun import app_is_bundle, current_target
from tfdoctor.core.scan import PROBE_LABELS, CheckReport
from tfdoctor.gui.bridges import CheckBridge, EnvsBridge
from tfdoctor.gui.findings_view import FindingsView, summary_html, summary_text
from tfdoctor.gui.icons import severity_pixmap
from tfdoctor.gui.pages.layout import page_layout, set_enabled
from tfdoctor.gui.target_picker import TargetPicker, target_key, target_tooltip

log = logging.getLogger(__name__)

# ProbeStatus -> (word shown on the chip, chip colour state for the stylesheet)
PROBE_STATUS_WORDS: dict[ProbeStatus, tuple[str, str]] = {
    ProbeStatus.OK: ("done", "ok"),
    ProbeStatus.ABSENT: ("not found", "absent"),
    ProbeStatus.DENIED: ("no permission", "warn"),
    ProbeStatus.ERROR: ("failed", "bad"),
    ProbeStatus.TIMEOUT: ("timed out", "bad"),
    ProbeStatus.CRASHED: ("crashed", "bad"),
    ProbeStatus.SKIPPED: ("stopped", "idle"),
}

RUN_TEXT, RERUN_TEXT, CANCEL_TEXT, STOPPING_TEXT = "Run check", "Re-run", "Cancel", "Stopping…"

WHICH_PYTHON_HINT = (
    "Pick the interpreter your notebook or script really runs. In a notebook cell, "
    "<code>import sys; print(sys.executable)</code> prints its path."
)


def _restyle(w: QWidget) -> None:
    """Re-apply the stylesheet after a dynamic property used in a selector changed."""
    w.style().unpolish(w)
    w.style().polish(w)


class ProbeChip(QLabel):
    """A rounded label: which evidence source, and how far it got (waiting, checking…, done)."""

    def __init__(self, name: str, label: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.label = label[:1].upper() + label[1:]
        self.state = "idle"
        self.setObjectName("probeChip")
        self.setTextFormat(Qt.TextFormat.RichText)
        self.set_state("idle", "not started", "This part of the check has not run yet.")

    def set_state(self, state: str, word: str, tooltip: str) -> None:
        self.state = state
        self.word = word
        self.setText(f"{self.label}: <b>{word}</b>")
        self.setToolTip(tooltip)
        self.setProperty("state", state)
        _restyle(self)


class CheckPage(QWidget):
    """Runs core's environment check through CheckBridge and shows its progress and findings."""

    sig_status_changed = Signal(str)  # a line for the window's status bar

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        bridge: CheckBridge | None = None,
        envs_bridge: EnvsBridge | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("checkPage")
        self.bridge = bridge or CheckBridge(self)
        self.envs_bridge = envs_bridge or EnvsBridge(self)
        self.last_report: CheckReport | None = None
        self._last_target: Target | None = None
        self._stage = ""
        self._elapsed = QElapsedTimer()
        self._clock = QTimer(self)
        self._clock.setInterval(1000)
        self._clock.timeout.connect(self._on_clock_timeout)
        self._build()
        self._connect()
        if not app_is_bundle():  # a bundle's executable is no Python: the user picks one
            self.add_target(current_target(), select=True)
        self._stage = "Press “Run check” to start. It takes about 10-60 seconds."
        self._update_stage_label(with_time=False)
        self._set_idle_ui()

    # ------------------------------------------------------------------ construction

    def _build(self) -> None:
        root = page_layout(
            self,
            "Environment check",
            "Looks at the Python your notebook uses: its TensorFlow build, the CUDA and cuDNN "
            "libraries it loads, the NVIDIA driver, your GPUs and who else uses their memory, "
            "and system RAM. Read-only: nothing is changed.",
        )

        # -- target picker
        pick = QHBoxLayout()
        pick.setSpacing(6)
        self.picker = TargetPicker("&Python to check:", self, refresh=True)
        self.target_combo = self.picker.combo
        assert self.picker.refresh_button is not None
        self.refresh_button = self.picker.refresh_button
        self.other_button = self.picker.other_button
        self.run_button = QPushButton(RUN_TEXT, self)
        self.run_button.setObjectName("runButton")
        self.run_button.setDefault(True)
        pick.addWidget(self.picker, 1)
        pick.addSpacing(8)
        pick.addWidget(self.run_button)
        root.addLayout(pick)

        # -- error banner (the check could not run at all)
        self.banner = QFrame(self)
        self.banner.setObjectName("errorBanner")
        b = QHBoxLayout(self.banner)
        b.setContentsMargins(12, 10, 8, 10)
        b.setSpacing(10)
        icon = QLabel(self.banner)
        icon.setPixmap(severity_pixmap(Severity.ERROR, 22))
        b.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        texts = QVBoxLayout()
        texts.setSpacing(2)
        self.banner_title = QLabel("Could not check this Python", self.banner)
        self.banner_title.setObjectName("errorTitle")
        self.banner_message = QLabel(self.banner)
        self.banner_message.setObjectName("errorMessage")
        self.banner_message.setWordWrap(True)
        self.banner_message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner_hint = QLabel(WHICH_PYTHON_HINT, self.banner)
        self.banner_hint.setObjectName("errorHint")
        self.banner_hint.setWordWrap(True)
        texts.addWidget(self.banner_title)
        texts.addWidget(self.banner_message)
        texts.addWidget(self.banner_hint)
        b.addLayout(texts, 1)
        close = QToolButton(self.banner)
        close.setObjectName("bannerClose")
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Hide this message")
        close.clicked.connect(self.banner.hide)
        b.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.banner.hide()
        root.addWidget(self.banner)

        # -- progress: a busy bar, the current stage, one chip per evidence source
        self.progress_box = QFrame(self)
        self.progress_box.setObjectName("progressBox")
        pv = QVBoxLayout(self.progress_box)
        pv.setContentsMargins(12, 10, 12, 10)
        pv.setSpacing(8)
        prow = QHBoxLayout()
        prow.setSpacing(10)
        self.stage_label = QLabel(self.progress_box)
        self.stage_label.setObjectName("stageLabel")
        self.stage_label.setWordWrap(True)
        self.progress = QProgressBar(self.progress_box)
        self.progress.setRange(0, 0)  # busy: the probes do not know how far they are
        self.progress.setTextVisible(False)
        self.progress.setFixedWidth(160)
        self.progress.setMaximumHeight(10)
        self.progress.setToolTip(
            "The check is running. Importing TensorFlow alone often takes 10-60 s."
        )
        prow.addWidget(self.stage_label, 1)
        prow.addWidget(self.progress, 0, Qt.AlignmentFlag.AlignVCenter)
        pv.addLayout(prow)
        grid = QGridLayout()
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(6)
        self.chips: dict[str, ProbeChip] = {}
        for i, (name, label) in enumerate(PROBE_LABELS.items()):
            chip = ProbeChip(name, label, self.progress_box)
            self.chips[name] = chip
            grid.addWidget(chip, i // 2, i % 2)
        pv.addLayout(grid)
        root.addWidget(self.progress_box)

        # -- findings
        head = QHBoxLayout()
        head.setSpacing(12)
        self.summary_label = QLabel(self)
        self.summary_label.setObjectName("summaryLabel")
        self.summary_label.setTextFormat(Qt.TextFormat.RichText)
        self.info_label = QLabel(self)
        self.info_label.setObjectName("infoLabel")
        self.show_passed = QCheckBox("Show passed checks", self)
        self.show_passed.setToolTip("Also list the checks that found nothing wrong")
        head.addWidget(self.summary_label)
        head.addWidget(self.info_label, 1)
        head.addWidget(self.show_passed)
        root.addLayout(head)

        self.findings = FindingsView(self)
        root.addWidget(self.findings, 1)

    def _connect(self) -> None:
        self.run_button.clicked.connect(self._on_run_button_clicked)
        self.refresh_button.clicked.connect(self.refresh_targets)
        self.picker.sig_target_changed.connect(self._on_picker_target_changed)
        self.show_passed.toggled.connect(self._on_show_passed_toggled)
        self.findings.sig_counts_changed.connect(self._update_summary)

        br = self.bridge
        br.sig_probe_started.connect(self._on_bridge_probe_started)
        br.sig_probe_finished.connect(self._on_bridge_probe_finished)
        br.sig_stage_changed.connect(self._on_bridge_stage_changed)
        br.sig_finding_added.connect(self._on_bridge_finding_added)
        br.sig_check_finished.connect(self._on_bridge_check_finished)
        br.sig_check_cancelled.connect(self._on_bridge_check_cancelled)
        br.sig_check_failed.connect(self._on_bridge_check_failed)

        self.envs_bridge.sig_envs_found.connect(self._on_envs_found)
        self.envs_bridge.sig_envs_failed.connect(self._on_envs_failed)

    # ------------------------------------------------------------------ public API

    @property
    def running(self) -> bool:
        return self.bridge.running

    def refresh_targets(self) -> None:
        """List kernelspecs, conda envs and running kernels in the background."""
        set_enabled(
            self.refresh_button, False, "Looking for Jupyter kernels and conda environments…"
        )
        self._status("Looking for Jupyter kernels and conda environments…")
        self.envs_bridge.refresh()

    def selected_target(self) -> Target | None:
        return self.picker.selected_target()

    def add_target(self, target: Target, select: bool = True) -> int:
        """Add a target to the picker (or find it there) and optionally select it."""
        return self.picker.add_target(target, select)

    def start_check(self) -> None:
        """Check the selected Python; the work runs in core threads, this returns at once."""
        target = self.selected_target()
        if target is None or self.bridge.running:
            return
        self.banner.hide()
        self.last_report = None
        self.findings.clear()
        self.findings.set_placeholder("Findings appear here as each part of the check finishes.")
        for chip in self.chips.values():
            chip.set_state("idle", "waiting", "Waiting to start.")
        self._last_target = target
        self._elapsed.start()
        self._stage = "Starting the check"
        self.bridge.start(target)
        self._set_running_ui()
        self._status(f"Checking {target.label} ({target.python})…")

    def show_nothing(self) -> None:
        """No check in the investigation that was opened: nothing from before stays shown."""
        if self.bridge.running:
            return
        self.banner.hide()
        self.last_report = None
        self._last_target = None
        self.findings.clear()
        self.findings.set_placeholder("No check in this investigation yet: run one above.")
        for chip in self.chips.values():
            chip.set_state("idle", "not run", "No check ran yet.")
        self.info_label.setText("")
        self._stage = ""
        self._update_stage_label(with_time=False)
        self._update_run_button_text()

    def show_report(self, report: CheckReport) -> None:
        """Show a saved check (an investigation was opened) as if it had just run."""
        if self.bridge.running:
            return
        self.banner.hide()
        self.picker.blockSignals(True)
        self.add_target(report.target, select=True)
        self.picker.blockSignals(False)
        self._last_target = report.target
        self.findings.clear()
        for chip in self.chips.values():
            chip.set_state("idle", "not run", "This part did not run in the saved check.")
        for result in report.probes.values():
            self._on_bridge_probe_finished(result)
        self._on_bridge_check_finished(report)
        self._update_run_button_text()

    def cancel_check(self) -> None:
        if not self.bridge.running:
            return
        self.bridge.cancel()
        self.run_button.setText(STOPPING_TEXT)
        set_enabled(self.run_button, False, "Stopping the check: the probe process is ending")
        self._stage = "Stopping the check"
        self._update_stage_label()
        self._status("Stopping the check…")

    def shutdown(self) -> None:
        """Stop any running check (its child process is killed by core) before the app exits."""
        self.bridge.cancel()
        self.bridge.wait(10.0)
        self._clock.stop()

    # ------------------------------------------------------------------ UI states

    def _set_running_ui(self) -> None:
        self.run_button.setText(CANCEL_TEXT)
        set_enabled(self.run_button, True)
        self.run_button.setToolTip("Stop the check (the TensorFlow probe process is stopped)")
        self.progress.show()
        self.progress_box.show()
        self._clock.start()
        self._update_stage_label()
        self._update_summary()

    def _set_idle_ui(self) -> None:
        self._clock.stop()
        self.progress.hide()
        set_enabled(self.run_button, True)
        self._update_run_button_text()
        self._update_summary()

    def _update_run_button_text(self) -> None:
        if self.bridge.running:
            return
        target = self.selected_target()
        same = (
            self._last_target is not None
            and target is not None
            and target_key(target) == target_key(self._last_target)
        )
        self.run_button.setText(RERUN_TEXT if same else RUN_TEXT)
        self.run_button.setToolTip(
            "Check the selected Python again" if same else "Check the selected Python"
        )

    def _update_stage_label(self, with_time: bool = True) -> None:
        text = self._stage
        if with_time and self.bridge.running and self._elapsed.isValid():
            text = f"{text}…  <span style='color:#777'>({self._elapsed.elapsed() // 1000} s)</span>"
        self.stage_label.setText(text)

    def _update_summary(self) -> None:
        counts = self.findings.counts()
        if self.bridge.running:
            so_far = summary_html(counts) if counts else "no findings yet"
            self.summary_label.setText(f"Checking… {so_far}")
            self.summary_label.setToolTip(summary_text(counts))
        elif self.last_report is not None or counts:
            self.summary_label.setText(summary_html(counts))
            self.summary_label.setToolTip(summary_text(counts))
        else:
            self.summary_label.setText("")

    def _status(self, text: str) -> None:
        self.sig_status_changed.emit(text)

    # ------------------------------------------------------------------ slots: widgets

    def _on_run_button_clicked(self) -> None:
        if self.bridge.running:
            self.cancel_check()
        else:
            self.start_check()

    def _on_picker_target_changed(self, t: Target | None) -> None:
        self.target_combo.setToolTip(target_tooltip(t) if t else "")
        self._update_run_button_text()

    def _on_show_passed_toggled(self, on: bool) -> None:
        self.findings.set_show_passed(on)

    def _on_clock_timeout(self) -> None:
        self._update_stage_label()

    # ------------------------------------------------------------------ slots: bridges

    def _on_bridge_probe_started(self, name: str) -> None:
        chip = self.chips.get(name)
        if chip is not None:
            chip.set_state("running", "checking…", "Running now.")

    def _on_bridge_probe_finished(self, result: ProbeResult) -> None:
        chip = self.chips.get(result.probe)
        if chip is None:
            return
        word, state = PROBE_STATUS_WORDS.get(result.status, (result.status.value, "warn"))
        tip = result.message or word
        chip.set_state(state, word, f"{tip}\n(took {result.duration_s:.1f} s)")
        if self.bridge.running and result.probe == "target":
            self._stage = "Finishing up"
            self._update_stage_label()

    def _on_bridge_stage_changed(self, label: str) -> None:
        self._stage = label[:1].upper() + label[1:]
        self._update_stage_label()

    def _on_bridge_finding_added(self, finding: Finding) -> None:
        self.findings.add_finding(finding)

    def _on_bridge_check_finished(self, report: CheckReport) -> None:
        self.last_report = report
        self._reconcile(report)
        if report.cancelled:
            self._stage = (
                f"Stopped after {report.duration_s:.0f} s. The findings below are incomplete."
            )
            self._status("Check stopped.")
        else:
            self._stage = f"Check finished in {report.duration_s:.1f} s."
            self._status(f"Check finished: {summary_text(self.findings.counts())}.")
        self._update_stage_label(with_time=False)
        self.info_label.setText(self._report_info(report))
        self._set_idle_ui()
        self.findings.set_placeholder(self._empty_text(report))

    def _on_bridge_check_cancelled(self) -> None:
        self._stage = "Stopped before the check began."
        self._update_stage_label(with_time=False)
        for chip in self.chips.values():
            chip.set_state("idle", "not started", "The check was stopped before this ran.")
        self.findings.set_placeholder("No check ran.")
        self._set_idle_ui()
        self._status("Check stopped.")

    def _on_bridge_check_failed(self, message: str) -> None:
        self.banner_message.setText(message)
        self.banner_message.setToolTip(message)
        self.banner.show()
        self._last_target = None  # nothing ran: the button offers "Run check", not "Re-run"
        self._stage = "The check could not start (see above)."
        self._update_stage_label(with_time=False)
        for chip in self.chips.values():
            chip.set_state("idle", "not started", "The check could not start.")
        self.findings.set_placeholder("No check ran.")
        self.info_label.setText("")
        self._set_idle_ui()
        self._status(f"Could not check: {message}")

    def _on_envs_found(self, targets: list[Target]) -> None:
        set_enabled(self.refresh_button, True)
        self.picker.reset_targets(targets)
        n = len(targets)
        self._status(f"Found {n} Python environment{'s' if n != 1 else ''} to check.")

    def _on_envs_failed(self, message: str) -> None:
        set_enabled(self.refresh_button, True)
        self._status(f"Could not list Python environments: {message}")

    # ------------------------------------------------------------------ helpers

    def _reconcile(self, report: CheckReport) -> None:
        """Rebuild from the report if events were missed (the event buffer is bounded)."""
        if len(report.findings) == len(self.findings.findings()):
            return
        log.info("rebuilding the findings list from the report (missed events)")
        self.findings.clear()
        for f in report.findings:
            self.findings.add_finding(f)

    @staticmethod
    def _report_info(report: CheckReport) -> str:
        parts = []
        pyv = report.facts.value("target.python_version")
        tfv = report.facts.value("tf.version")
        if pyv:
            parts.append(f"Python {pyv}")
        if tfv:
            parts.append(f"TensorFlow {tfv}")
        return "  ·  ".join(parts)

    def _empty_text(self, report: CheckReport) -> str:
        passed = self.findings.counts().get(Severity.OK, 0)
        if report.cancelled and not report.findings:
            return "The check was stopped before any part of it finished."
        if passed:
            return (
                f"No problems found: {passed} check{'s' if passed != 1 else ''} passed. "
                "Tick “Show passed checks” to see them."
            )
        return "No findings."

    def closeEvent(self, event: QCloseEvent) -> None:
        self.shutdown()
        super().closeEvent(event)
