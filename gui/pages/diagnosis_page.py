"""The wizard's Diagnosis page: the causes of the user's crash (their logs, their machine's
check), best first, then what tfdoctor's own runs showed in a section of their own; each
with how sure, where it comes from, its evidence and its fixes. The analysis is core's
(`core.session`); it runs off the GUI thread through `AnalysisBridge`, and this page only
shows it."""

from __future__ import annotations

import html

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from tfdoctor.core.diagnose.combine import RankedCause, confidence_words
from tfdoctor.core.model import Evidence
from tfdoctor.core.session import Analysis, Session
from tfdoctor.gui.bridges import AnalysisBridge
from tfdoctor.gui.findings_view import FindingsView
from tfdoctor.gui.pages.layout import page_layout, set_enabled


class DiagnosisPage(QWidget):
    sig_status_changed = Signal(str)
    sig_show_moment = Signal(float, float)  # a telemetry cause's stretch of the run, seconds

    def __init__(
        self,
        session: Session,
        parent: QWidget | None = None,
        *,
        bridge: AnalysisBridge | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("diagnosisPage")
        self.session = session
        self.bridge = bridge or AnalysisBridge(session, self)
        self.ranked: list[RankedCause] = []  # the answer: the crash's causes, best first
        self.experiments: list[RankedCause] = []  # tfdoctor's runs, when a crash leads
        root = page_layout(
            self,
            "Diagnosis",
            "Why it died, best explanation first, from your crash log and your machine's "
            "check; what tfdoctor's own runs showed follows in its own section. Click a "
            "cause for its evidence and what to do.",
        )
        head = QHBoxLayout()
        self.summary = QLabel(self)
        self.summary.setObjectName("summaryLabel")
        self.summary.setWordWrap(True)
        self.busy = QProgressBar(self)
        self.busy.setRange(0, 0)
        self.busy.setMaximumWidth(140)
        self.busy.setMaximumHeight(10)
        self.busy.hide()
        self.again = QPushButton("Diagnose again", self)
        self.again.setToolTip("Read every source again (after adding a log or a new run)")
        head.addWidget(self.summary, 1)
        head.addWidget(self.busy)
        head.addWidget(self.again)
        root.addLayout(head)
        self.causes = FindingsView(self, ranked=True)
        self.causes.set_placeholder("The causes appear here.")
        root.addWidget(self.causes, 1)
        self.moments = QHBoxLayout()
        root.addLayout(self.moments)
        self.again.clicked.connect(self.diagnose_again)
        self.bridge.sig_analysed.connect(self._on_bridge_analysed)
        self.bridge.sig_failed.connect(self._on_bridge_failed)

    @property
    def busy_now(self) -> bool:
        return self.bridge.busy

    def refresh(self) -> None:
        """Show the session's analysis; when it is stale, have it made off the GUI thread (a
        log can be a week of server output)."""
        analysis = self.session.analysis()
        if analysis is not None:
            self._show(analysis)
            return
        error = self.session.error()
        if error is not None:
            self._on_bridge_failed(error)
            return
        self.busy.show()
        set_enabled(self.again, False, "The diagnosis is running")
        n = len(self.session.logs)
        self.summary.setText(f"Reading {n} log{'s' if n != 1 else ''} and the other sources…")
        self.bridge.request()

    def diagnose_again(self) -> None:
        self.session.forget()
        self.refresh()

    def _on_bridge_failed(self, message: str) -> None:
        self.busy.hide()
        set_enabled(self.again, True)
        self.summary.setText(message)

    def _on_bridge_analysed(self, analysis: Analysis) -> None:
        self._show(analysis)

    def _show(self, analysis: Analysis) -> None:
        self.busy.hide()
        set_enabled(self.again, True)
        self.ranked = list(analysis.ranked)
        self.experiments = list(analysis.experiments) if analysis.has_crash else []
        self.causes.clear()
        if analysis.experiment_findings and analysis.findings:
            self.causes.add_heading("Your crash")
        for f in analysis.findings:
            self.causes.add_finding(f)
        if analysis.experiment_findings:
            self.causes.add_heading(
                "What tfdoctor's own runs showed <span style='font-weight:normal'>(the "
                "reproduced run and its memory; not counted as evidence about your crash)"
                "</span>"
            )
            for f in analysis.experiment_findings:
                self.causes.add_finding(f)
        while self.moments.count():
            item = self.moments.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.hide()  # at once; deleted when Qt can
                widget.deleteLater()
        for rc in [*self.ranked, *self.experiments]:
            at = next((e.at for e in rc.cause.evidence if e.at is not None), None)
            if at is not None:
                b = QPushButton(f"Show “{rc.cause.title}” on the plot", self)
                b.setToolTip(f"The run's memory from {at[0]:.0f} s to {at[1]:.0f} s")
                b.clicked.connect(lambda _=False, a=at: self.sig_show_moment.emit(a[0], a[1]))
                self.moments.addWidget(b)
        self.moments.addStretch(1)
        if self.ranked:
            top = self.ranked[0].cause
            lead = "Only a guess, from the log's wording" if top.guess else "Most likely"
            self.summary.setText(
                f"{lead}: <b>{top.title}</b> ({confidence_words(top.confidence)}, "
                f"{round(top.confidence * 100)}%)."
            )
            if self.causes.cards():
                self.causes.cards()[0].set_expanded(True)
        elif (err := self._program_error(analysis)) is not None:
            where = f"line {err.line}: " if err.line else ""
            self.summary.setText(
                "The run ended in a Python error of the program itself, not in the GPU set-up: "
                f"<b>{html.escape((where + err.text[:200]).rstrip('.'))}</b>. Fix that error in "
                "the code or the data first; the CUDA notices before it only say that "
                "TensorFlow runs on the CPU."
            )
            self.causes.set_placeholder("No GPU or memory cause to blame.")
        elif self.experiments:
            self.summary.setText(
                "No known failure pattern in your crash log. tfdoctor's own runs are below: "
                "they show what the reproduced workload did, not why your run died."
            )
        else:
            self.summary.setText(
                "No known failure pattern in what you gave. Capture the full output of the run "
                "(TF_CPP_MIN_LOG_LEVEL=0), the Jupyter server's terminal, or `dmesg` right "
                "after the crash — or reproduce it on the Reproduce step."
            )
            self.causes.set_placeholder("Nothing recognised.")
        self._status(self.summary.text().replace("<b>", "").replace("</b>", ""))

    @staticmethod
    def _program_error(analysis: Analysis) -> Evidence | None:
        diagnosis = analysis.log_diagnosis
        return diagnosis.program_error if diagnosis is not None else None

    def _status(self, text: str) -> None:
        self.sig_status_changed.emit(text)
