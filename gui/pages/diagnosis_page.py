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
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core import fixes, flow
from tfdoctor.core.bench import verify as verify_mod
from tfdoctor.core.bench.supervisor import SupervisorOptions
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Finding, Severity
from tfdoctor.core.paths import atomic_write_text
from tfdoctor.gui.findings_view import FindingsView
from tfdoctor.gui.telemetry_plot import ComparisonPlot, format_bytes

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
    sig_show_moment = Signal(float, float)  # a telemetry cause's stretch of the run, seconds

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
        self.moments = QHBoxLayout()
        root.addLayout(self.moments)
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
        while self.moments.count():
            item = self.moments.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        for rc in self.ranked:
            at = next((e.at for e in rc.cause.evidence if e.at is not None), None)
            if at is not None:
                b = QPushButton(f"Show “{rc.cause.title}” on the plot", self)
                b.setToolTip(f"The run's memory from {at[0]:.0f} s to {at[1]:.0f} s")
                b.clicked.connect(lambda _=False, a=at: self.sig_show_moment.emit(a[0], a[1]))
                self.moments.addWidget(b)
        self.moments.addStretch(1)
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


class FixRow(QFrame):
    """One proposed fix: what it changes and why, with its one-click actions."""

    def __init__(self, fix: catalog.Fix, reasons: list[str], parent: QWidget) -> None:
        super().__init__(parent)
        self.fix = fix
        self.setObjectName("findingCard")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 12, 8)
        lay.setSpacing(3)
        head = f"<b>{html.escape(fix.title)}</b> "
        head += f'<span style="color:#7a8491">[{html.escape(fix.id)}]</span>'
        title = QLabel(head, self)
        title.setTextFormat(Qt.TextFormat.RichText)
        title.setWordWrap(True)
        lay.addWidget(title)
        text = html.escape(fix.summary)
        if fix.risk:
            text += f"<br><i>Risk:</i> {html.escape(fix.risk)}"
        if fix.undo:
            text += f"<br><i>Undo:</i> {html.escape(fix.undo)}"
        body = QLabel(text, self)
        body.setTextFormat(Qt.TextFormat.RichText)
        body.setWordWrap(True)
        body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(body)
        why = QLabel("For: " + html.escape("; ".join(dict.fromkeys(reasons))), self)
        why.setTextFormat(Qt.TextFormat.RichText)
        why.setObjectName("infoLabel")
        why.setWordWrap(True)
        lay.addWidget(why)
        self.buttons = QHBoxLayout()
        self.buttons.addStretch(1)
        lay.addLayout(self.buttons)
        self.result = QLabel(self)
        self.result.setWordWrap(True)
        self.result.setTextFormat(Qt.TextFormat.RichText)
        self.result.hide()
        lay.addWidget(self.result)
        self.comparison: ComparisonPlot | None = None

    def add_button(self, text: str, tip: str, slot: Any, enabled: bool = True) -> QPushButton:
        b = QPushButton(text, self)
        b.setToolTip(tip)
        b.setEnabled(enabled)
        b.clicked.connect(slot)
        self.buttons.addWidget(b)
        return b

    def show_result(self, text: str) -> None:
        self.result.setText(text)
        self.result.show()


class FixPage(QWidget):
    """The proposed fixes, most important first, each with its one-click actions: apply to
    the kernel (as a copy), copy the notebook preamble, verify with a re-run, undo."""

    sig_status_changed = Signal(str)

    def __init__(self, session: flow.Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fixPage")
        self.session = session
        self.fix_ids: list[str] = []
        self.rows: dict[str, FixRow] = {}
        root = _page(
            self,
            "Fix",
            "What to change, for the causes and findings above, most important first. "
            "Settings go into a copy of your Jupyter kernel (or paste the preamble as the "
            "notebook's first cell); every change can be undone. Verify re-runs the benchmark "
            "with the fix and shows before and after.",
        )
        top = QHBoxLayout()
        self.undo_button = QPushButton("Undo the last change", self)
        self.undo_button.setToolTip("Put back the files the last applied fix changed")
        top.addStretch(1)
        top.addWidget(self.undo_button)
        root.addLayout(top)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        inner = QWidget(scroll)
        self.column = QVBoxLayout(inner)
        self.column.setContentsMargins(0, 0, 6, 0)
        self.column.setSpacing(6)
        self.column.addStretch(1)
        scroll.setWidget(inner)
        root.addWidget(scroll, 1)
        self.undo_button.clicked.connect(self.undo_last)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfdoctor-verify")
        pool = self._pool
        self.destroyed.connect(lambda *_: pool.shutdown(wait=False, cancel_futures=True))
        self._verifying: tuple[str, Future[Any]] | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(100)
        self._timer.timeout.connect(self._on_timer)

    @property
    def verifying(self) -> bool:
        return self._verifying is not None

    def refresh(self) -> None:
        for row in self.rows.values():
            row.deleteLater()
        self.rows.clear()
        known = catalog.fixes()
        proposed = flow.proposed_fixes(self.session)
        self.fix_ids = [fid for fid, _ in proposed]
        target = self.session.target
        kernel = target.name if target is not None and target.kind == "kernelspec" else None
        for fid, reasons in proposed:
            fx = known.get(fid)
            if fx is None:
                continue
            row = FixRow(fx, reasons, self)
            if fx.applicable:
                row.add_button(
                    "Apply to the kernel",
                    f"Make a copy of kernel {kernel!r} with these settings, named “… (tfdoctor)”"
                    if kernel
                    else "Pick a Jupyter kernel on the Start page",
                    lambda _=False, f=fid: self.apply_to_kernel(f),
                    enabled=bool(kernel) and bool(fx.env or fx.unset),
                )
                if target is not None and target.kind == "conda":
                    row.add_button(
                        "Apply to the conda env",
                        "Activation hooks that set (and on deactivate restore) the variables",
                        lambda _=False, f=fid: self.apply_to_conda(f),
                        enabled=bool(fx.env or fx.unset),
                    )
                row.add_button(
                    "Copy notebook preamble",
                    "A cell to run first in the notebook (before TensorFlow is imported)",
                    lambda _=False, f=fid: self.copy_preamble(f),
                )
            if fid == "stop_gpu_process":
                for proc in self._gpu_holders():
                    row.add_button(
                        f"Stop pid {proc.get('pid')}",
                        f"{proc.get('name') or 'process'}"
                        + (f", {proc.get('notebook_path')}" if proc.get("notebook_path") else "")
                        + (f": holds {proc.get('used_mib')} MiB of GPU memory"),
                        lambda _=False, pr=proc: self.stop_process(pr),
                    )
            if fx.kind == "env":
                python = target.python if target is not None else None
                cmds = fixes.commands_for(fid, self.session.facts(), python)
                if cmds:
                    joined = "\n".join(cmds)
                    row.show_result("<pre>" + html.escape("\n".join(cmds)) + "</pre>")
                    row.add_button(
                        "Copy command",
                        "The exact command for this environment",
                        lambda _=False, c=joined: QApplication.clipboard().setText(c),
                    )
            if fx.snippet:
                row.add_button(
                    "Copy code",
                    "The code change, to paste into your training script",
                    lambda _=False, f=fid: self.copy_snippet(f),
                )
            if self._verifiable(fid):
                row.add_button(
                    "Verify with a run",
                    "Run the same benchmark with this fix and compare with the last run",
                    lambda _=False, f=fid: self.verify(f),
                )
            self.rows[fid] = row
            self.column.insertWidget(self.column.count() - 1, row)
        self.undo_button.setEnabled(any(not r.get("undone") for r in fixes.history()))

    def _verifiable(self, fid: str) -> bool:
        bench = self.session.bench
        if bench is None or self.session.target is None:
            return False
        try:
            verify_mod.fixed_run(self.session.target, bench.config, [fid])
        except fixes.FixError:
            return False
        return True

    def apply_to_kernel(self, fid: str) -> None:
        target = self.session.target
        if target is None or not target.name:
            return
        try:
            rec = fixes.apply_to_kernelspec(self._plan(fid), target.name)
        except fixes.FixError as exc:
            self.rows[fid].show_result(
                f'<span style="color:#c62828">{html.escape(str(exc))}</span>'
            )
            return
        msg = (
            f"Applied: start the kernel “{html.escape(rec['target'])}” in Jupyter."
            if rec.get("changed") is not False
            else "Already applied to the kernel copy."
        )
        self.rows[fid].show_result(msg)
        self.undo_button.setEnabled(True)
        self.sig_status_changed.emit(f"Applied {fid} to a copy of kernel {target.name}")

    def copy_preamble(self, fid: str) -> None:
        text = fixes.preamble_text(self._plan(fid))
        QApplication.clipboard().setText(text)
        self.rows[fid].show_result("Copied: paste it as the notebook's first cell.")
        self.sig_status_changed.emit("The notebook preamble is on the clipboard")

    def _plan(self, fid: str) -> fixes.Plan:
        """The fix with the values measured in this session (memory limit, GPU, batch)."""
        known = dict(catalog.fixes()[fid].params)
        params = {k: v for k, v in flow.suggested_params(self.session).items() if k in known}
        return fixes.plan([fid], params)

    def apply_to_conda(self, fid: str) -> None:
        target = self.session.target
        if target is None:
            return
        prefix = Path(target.python).resolve().parent.parent
        try:
            rec = fixes.apply_to_conda(self._plan(fid), prefix)
        except fixes.FixError as exc:
            self.rows[fid].show_result(html.escape(str(exc)))
            return
        self.rows[fid].show_result(
            f"Applied to the conda environment {html.escape(str(prefix))}: "
            "deactivate and activate it again."
        )
        self.undo_button.setEnabled(rec.get("changed") is not False)

    def _gpu_holders(self) -> list[dict[str, Any]]:
        facts = self.session.facts()
        if facts is None:
            return []
        out: list[dict[str, Any]] = []
        n = facts.value("gpu.count")
        for i in range(n if isinstance(n, int) else 0):
            for proc in facts.value(f"gpu{i}.processes") or []:
                if isinstance(proc, dict) and isinstance(proc.get("pid"), int):
                    out.append(proc)
        return out

    def stop_process(self, proc: dict[str, Any]) -> None:
        what = proc.get("notebook_path") or proc.get("name") or "this process"
        answer = QMessageBox.question(
            self,
            "Stop the process?",
            f"Stop pid {proc.get('pid')} ({what})? It holds {proc.get('used_mib')} MiB of GPU "
            "memory. Unsaved work in it is lost.",
        )
        if answer != QMessageBox.StandardButton.Yes:
            return
        row = self.rows.get("stop_gpu_process")
        try:
            msg = fixes.stop_process(int(proc["pid"]))
        except fixes.FixError as exc:
            msg = str(exc)
        if row is not None:
            row.show_result(html.escape(msg))
        self.sig_status_changed.emit(msg)

    def copy_snippet(self, fid: str) -> None:
        QApplication.clipboard().setText(catalog.fixes()[fid].snippet + "\n")
        self.rows[fid].show_result("Copied: paste it into your training code.")
        self.sig_status_changed.emit("The code change is on the clipboard")

    def undo_last(self) -> None:
        try:
            rec = fixes.undo()
        except fixes.FixError as exc:
            self.sig_status_changed.emit(str(exc))
            self.undo_button.setEnabled(False)
            return
        self.sig_status_changed.emit(f"Undone: {', '.join(rec['fixes'])} on {rec['target']}")
        self.undo_button.setEnabled(any(not r.get("undone") for r in fixes.history()))

    def verify(self, fid: str) -> None:
        bench, target = self.session.bench, self.session.target
        if self._verifying is not None or bench is None or target is None:
            return
        before = (bench, list(self.session.telemetry))
        options = self.session.bench_options or SupervisorOptions(sample_every_s=0.1)
        fut = self._pool.submit(
            verify_mod.verify, target, bench.config, [fid], None, options, before=before
        )
        self._verifying = (fid, fut)
        self.rows[fid].show_result("Running the benchmark with the fix…")
        self._timer.start()

    def _on_timer(self) -> None:
        if self._verifying is None or not self._verifying[1].done():
            return
        fid, fut = self._verifying
        self._verifying = None
        self._timer.stop()
        try:
            v = fut.result()
        except Exception as exc:  # one line, never a traceback
            log.warning("verify failed", exc_info=True)
            self.rows[fid].show_result(f"Could not verify: {html.escape(str(exc))}")
            return
        self.last_verification = v
        cells = [
            f"<tr><td>{label}</td><td>{before}</td><td>{after}</td></tr>"
            for label, before, after in v.table(format_bytes, missing="–")
        ]
        verdict = v.verdict[:1].upper() + v.verdict[1:] + "."
        row = self.rows[fid]
        row.show_result(
            f"<b>{verdict}</b><table cellpadding='3'><tr><th></th><th>before</th>"
            f"<th>after</th></tr>{''.join(cells)}</table>"
        )
        row.comparison = ComparisonPlot(v.before_telemetry, v.after_telemetry, row)
        row.layout().addWidget(row.comparison)
        self.sig_status_changed.emit(verdict)


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
        self.script_button = QPushButton("Export fix script…", self)
        self.script_button.setToolTip(
            "A shell (.sh), PowerShell (.ps1) or Python (.py, the notebook preamble) script "
            "with the proposed settings: dry run by default, --apply to act, --undo"
        )
        row = QHBoxLayout()
        row.addWidget(self.save_button)
        row.addWidget(self.script_button)
        row.addStretch(1)
        root.addLayout(row)
        root.addStretch(1)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.script_button.clicked.connect(self._on_script_clicked)

    def save(self, path: str) -> bool:
        try:
            text = json.dumps(self.session.to_json(), indent=2, default=str)

            atomic_write_text(Path(path), text + "\n")
        except OSError as exc:
            self.sig_status_changed.emit(f"Cannot save {path}: {exc.strerror or exc}")
            return False
        self.sig_status_changed.emit(f"Saved the session to {path}")
        return True

    def export_script(self, path: str) -> bool:
        """The proposed config fixes as a script; the format follows the file's suffix."""
        from tfdoctor.core import export

        fmt = {".ps1": "ps1", ".py": "py"}.get(Path(path).suffix.lower(), "sh")
        known = catalog.fixes()
        ids = [
            f for f, _ in flow.proposed_fixes(self.session) if known.get(f) and known[f].applicable
        ]
        causes = [r.cause.id for r in flow.combined_causes(self.session)] if ids else []
        python = self.session.target.python if self.session.target else None
        commands = [
            c
            for f, _ in flow.proposed_fixes(self.session)
            if known.get(f) and known[f].kind == "env"
            for c in fixes.commands_for(f, self.session.facts(), python)
            if not c.startswith("#")
        ]
        try:
            text = export.export(fmt, ids, causes, commands=commands)
            atomic_write_text(Path(path), text)
        except fixes.FixError as exc:
            self.sig_status_changed.emit(f"No script: {exc}")
            return False
        except OSError as exc:
            self.sig_status_changed.emit(f"Cannot save {path}: {exc.strerror or exc}")
            return False
        self.sig_status_changed.emit(f"Wrote {path} (run it without options for a dry run)")
        return True

    def _on_script_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self,
            "Export a fix script",
            "tfdoctor-fix.sh",
            "Shell (*.sh);;PowerShell (*.ps1);;Notebook preamble (*.py)",
        )
        if path:
            self.export_script(path)

    def _on_save_clicked(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save the session", "tfdoctor-session.json", "JSON (*.json)"
        )
        if path:
            self.save(path)
