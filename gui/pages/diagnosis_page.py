"""The wizard's Diagnosis, Fix and Export pages.

Diagnosis: the ranked causes from every source the user gave (crash logs, the environment
check, the reproduced run and its telemetry), each with how sure, where it comes from, its
evidence and its fixes. Fix: the fixes those causes and findings propose (one-click fixes come
with the fixes issue). Export: save the session (the report issue fills the rest).
"""

from __future__ import annotations

import html
import json
import logging
from concurrent.futures import Future, ThreadPoolExecutor

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core import flow
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Finding, Severity
from tfdoctor.core.scan import atomic_write_text
from tfdoctor.gui.findings_view import FindingsView

log = logging.getLogger(__name__)


def ranked_as_findings(
    ranked: list[flow.RankedCause], session: flow.Session | None = None
) -> list[Finding]:
    out = []
    for i, rc in enumerate(ranked):
        c = rc.cause
        evidence = flow.with_context(session, c.evidence) if session else c.evidence
        pct = round(c.confidence * 100)
        out.append(
            Finding(
                f"cause.{c.id}",
                Severity.ERROR if i == 0 else Severity.WARNING,
                f"{c.title} — {flow.confidence_words(c.confidence)} ({pct}%)",
                f"{c.explanation} Seen in: {', '.join(rc.sources)}.",
                evidence,
                c.fixes,
                "cause",
            )
        )
    return out


def _page(parent: QWidget, title: str, subtitle: str) -> QVBoxLayout:
    root = QVBoxLayout(parent)
    root.setContentsMargins(22, 18, 22, 12)
    root.setSpacing(10)
    t = QLabel(title, parent)
    t.setObjectName("pageTitle")
    s = QLabel(subtitle, parent)
    s.setObjectName("pageSubtitle")
    s.setWordWrap(True)
    root.addWidget(t)
    root.addWidget(s)
    return root


class DiagnosisPage(QWidget):
    sig_status_changed = Signal(str)
    sig_diagnosed = Signal(list)  # list[RankedCause]

    def __init__(self, session: flow.Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("diagnosisPage")
        self.session = session
        self.ranked: list[flow.RankedCause] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfdoctor-diagnose")
        pool = self._pool
        self.destroyed.connect(lambda *_: pool.shutdown(wait=False, cancel_futures=True))
        self._pending: Future[list[flow.RankedCause]] | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(50)
        self._timer.timeout.connect(self._on_timer)
        root = _page(
            self,
            "Diagnosis",
            "Why it died, best explanation first: every source you gave counts (the crash "
            "log, the environment check, the reproduced run and its memory over time). "
            "Click a cause for its evidence and what to do.",
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
        self.causes = FindingsView(self)
        self.causes.set_placeholder("The causes appear here.")
        root.addWidget(self.causes, 1)
        self.again.clicked.connect(self.refresh)

    @property
    def busy_now(self) -> bool:
        return self._pending is not None

    def refresh(self) -> None:
        """Diagnose every source off the GUI thread (a log can be a week of server output)."""
        if self._pending is not None:
            return
        self.session.log_diagnosis = None
        self.busy.show()
        self.again.setEnabled(False)
        n = len(self.session.logs)
        self.summary.setText(f"Reading {n} log{'s' if n != 1 else ''} and the other sources…")
        self._pending = self._pool.submit(flow.combined_causes, self.session)
        self._timer.start()

    def _on_timer(self) -> None:
        fut = self._pending
        if fut is None or not fut.done():
            return
        self._pending = None
        self._timer.stop()
        self.busy.hide()
        self.again.setEnabled(True)
        try:
            self.ranked = fut.result()
        except OSError as exc:
            self.summary.setText(f"Cannot read a log: {exc.strerror or exc}")
            return
        except Exception as exc:  # a bug: one line, never a traceback
            log.warning("diagnosis failed", exc_info=True)
            self.summary.setText(f"The diagnosis failed: {exc}")
            return
        self.causes.clear()
        for f in ranked_as_findings(self.ranked, self.session):
            self.causes.add_finding(f)
        if self.ranked:
            top = self.ranked[0].cause
            self.summary.setText(
                f"Most likely: <b>{top.title}</b> ({flow.confidence_words(top.confidence)}, "
                f"{round(top.confidence * 100)}%)."
            )
            if self.causes.cards():
                self.causes.cards()[0].set_expanded(True)
        else:
            self.summary.setText(
                "No known failure pattern in what you gave. Capture the full output of the run "
                "(TF_CPP_MIN_LOG_LEVEL=0), the Jupyter server's terminal, or `dmesg` right "
                "after the crash — or reproduce it on the Reproduce step."
            )
            self.causes.set_placeholder("Nothing recognised.")
        self._status(self.summary.text().replace("<b>", "").replace("</b>", ""))
        self.sig_diagnosed.emit(self.ranked)

    def _status(self, text: str) -> None:
        self.sig_status_changed.emit(text)


class FixPage(QWidget):
    """The proposed fixes, most important first (one-click application comes later)."""

    def __init__(self, session: flow.Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fixPage")
        self.session = session
        self.fix_ids: list[str] = []
        root = _page(
            self,
            "Fix",
            "What to change, for the causes and findings above, most important first. Each "
            "fix has an id tfdoctor uses everywhere; applying them with one click comes in a "
            "later version.",
        )
        self.view = QTextBrowser(self)
        self.view.setObjectName("fixList")
        self.view.setOpenLinks(False)
        root.addWidget(self.view, 1)

    def refresh(self) -> None:
        fixes = catalog.fixes()
        proposed = flow.proposed_fixes(self.session)
        self.fix_ids = [fid for fid, _ in proposed]
        blocks = []
        for n, (fid, reasons) in enumerate(proposed, 1):
            fx = fixes.get(fid)
            title = html.escape(fx.title if fx else fid)
            summary = html.escape(fx.summary if fx else "")
            why = html.escape("; ".join(dict.fromkeys(reasons)))
            blocks.append(
                f'<p style="margin:10px 0 2px 0"><b>{n}. {title}</b> '
                f'<span style="color:#7a8491; font-family:monospace">'
                f"[{html.escape(fid)}]</span></p>"
                f'<p style="margin:0 0 2px 18px">{summary}</p>'
                f'<p style="margin:0 0 6px 18px; color:#6b7582">For: {why}</p>'
            )
        self.view.setHtml("".join(blocks) or "<p>No fix to propose: nothing was found wrong.</p>")


class ExportPage(QWidget):
    """Save what the session found (a shareable report comes with the report issue)."""

    sig_status_changed = Signal(str)

    def __init__(self, session: flow.Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("exportPage")
        self.session = session
        root = _page(
            self,
            "Export",
            "Save everything this session found as JSON: the target, the check, the run, the "
            "logs' diagnosis. A readable report and a fix script come in a later version.",
        )
        self.save_button = QPushButton("Save session as JSON…", self)
        row = QHBoxLayout()
        row.addWidget(self.save_button)
        row.addStretch(1)
        root.addLayout(row)
        root.addStretch(1)
        self.save_button.clicked.connect(self._on_save_clicked)

    def save(self, path: str) -> bool:
        try:
            text = json.dumps(self.session.to_json(), indent=2, default=str)
            from pathlib import Path

            atomic_write_text(Path(path), text + "\n")
        except OSError as exc:
            self.sig_status_changed.emit(f"Cannot save {path}: {exc.strerror or exc}")
            return False
        self.sig_status_changed.emit(f"Saved the session to {path}")
        return True

    def _on_save_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save the session", "tfdoctor-session.json", "JSON (*.json)"
        )
        if path:
            self.save(path)
