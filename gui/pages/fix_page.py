"""The wizard's Fix page: the fixes the diagnosis and the findings propose, most important
first, each with its one-click actions (apply to a kernel copy or a conda env, copy the
preamble or the code, stop a GPU process, verify with a re-run, undo). What to propose and
with which measured values is core's (`core.propose`); this page shows it and acts."""

from __future__ import annotations

import html
import logging
import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core import fixes
from tfdoctor.core.bench import verify as verify_mod
from tfdoctor.core.bench.supervisor import SupervisorOptions
from tfdoctor.core.fixes import propose
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.series import format_bytes
from tfdoctor.core.session import Session
from tfdoctor.gui.pages.layout import Notice, page_layout, set_enabled
from tfdoctor.gui.tasks import Task
from tfdoctor.gui.telemetry_plot import ComparisonPlot, legend_html

log = logging.getLogger(__name__)


class FixRow(QFrame):
    """One proposed fix: what it changes and why, with its one-click actions."""

    def __init__(
        self,
        fix: catalog.Fix,
        reasons: list[str],
        parent: QWidget,
        values: list[tuple[str, str, str]] | None = None,
        needs: str | None = None,
    ) -> None:
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
        # every number says where it was measured; a missing one says how to measure it
        said = [
            f"<b>{html.escape(k)} = {html.escape(v)}</b>" + (f" — {html.escape(o)}" if o else "")
            for k, v, o in values or []
        ]
        if needs:
            said.append(f"<b>Needs a measurement:</b> {html.escape(needs)}")
        self.values = QLabel("<br>".join(said), self)
        self.values.setObjectName("fixValues")
        self.values.setTextFormat(Qt.TextFormat.RichText)
        self.values.setWordWrap(True)
        self.values.setVisible(bool(said))
        lay.addWidget(self.values)
        self.buttons = QHBoxLayout()
        self.buttons.addStretch(1)
        lay.addLayout(self.buttons)
        self.result = QLabel(self)
        self.result.setWordWrap(True)
        self.result.setTextFormat(Qt.TextFormat.RichText)
        self.result.hide()
        lay.addWidget(self.result)
        self.next_buttons = QHBoxLayout()  # after "not fixed": what to try next
        lay.addLayout(self.next_buttons)
        self.comparison: ComparisonPlot | None = None
        self.comparison_legend: QLabel | None = None

    def add_button(
        self, text: str, tip: str, slot: Any, enabled: bool = True, why_not: str = ""
    ) -> QPushButton:
        b = QPushButton(text, self)
        b.setToolTip(tip)
        set_enabled(b, enabled, why_not)
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
    sig_tried = Signal()  # a fix was applied, undone or verified (the session holds it)

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fixPage")
        self.session = session
        self.fix_ids: list[str] = []
        self.rows: dict[str, FixRow] = {}
        self._shown_for: object = None  # the analysis the rows were made for
        self._params: dict[str, str] = {}  # measured values for the fixes' parameters
        root = page_layout(
            self,
            "Fix",
            "What to change, for the causes and findings above, most important first. "
            "Settings go into a copy of your Jupyter kernel (or paste the preamble as the "
            "notebook's first cell); every change can be undone. Verify re-runs the benchmark "
            "with the fix and shows before and after.",
        )
        top = QHBoxLayout()
        self.note = QLabel(self, wordWrap=True)
        self.note.setObjectName("infoLabel")
        self.note.setTextFormat(Qt.TextFormat.RichText)
        top.addWidget(self.note, 1)
        self.undo_button = QPushButton("Undo the last change", self)
        self.undo_button.setToolTip("Put back the files the last applied fix changed")
        top.addWidget(self.undo_button)
        root.addLayout(top)
        self.notice = Notice(self)
        root.addWidget(self.notice)
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        inner = QWidget(scroll)
        policy = inner.sizePolicy()  # rows are sized by their height at the view's width
        policy.setHeightForWidth(True)
        inner.setSizePolicy(policy)
        self.column = QVBoxLayout(inner)
        self.column.setContentsMargins(0, 0, 6, 0)
        self.column.setSpacing(6)
        self.column.addStretch(1)
        scroll.setWidget(inner)
        root.addWidget(scroll, 1)
        self.undo_button.clicked.connect(self.undo_last)
        self._verify_task = Task(self, name="tfdoctor-verify", poll_ms=100)
        self._verify_task.sig_done.connect(self._on_verify_done)
        self._verify_task.sig_failed.connect(self._on_verify_failed)
        self._verifying: str | None = None  # the row of the fix being verified
        self._verifying_fids: tuple[str, ...] = ()  # the fixes of that run
        # each verification's fixes -> whether the run survived (for the run they were for)
        self.tried: dict[tuple[str, ...], bool] = {}
        self._tried_for: object = None
        self._verify_cancel = threading.Event()
        self._stop_task = Task(self, name="tfdoctor-stop-process", poll_ms=100)
        self._stop_task.sig_done.connect(self._on_stop_done)
        self._stop_task.sig_failed.connect(self._on_stop_done)

    @property
    def verifying(self) -> bool:
        return self._verifying is not None

    def refresh(self) -> None:
        analysis = self.session.analysis()
        if analysis is not None and analysis is self._shown_for:
            self._update_undo()  # the same evidence: keep the rows, their results and plots
            return
        self._shown_for = analysis
        for row in self.rows.values():  # gone from the page now, deleted when Qt can
            self.column.removeWidget(row)
            row.hide()
            row.deleteLater()
        self.rows.clear()
        known = catalog.fixes()
        if analysis is None:  # the window has it made off the GUI thread and refreshes us
            self.fix_ids, self._params = [], {}
            self.note.setText("Reading the evidence: the fixes follow from it.")
            return
        left = [
            f"{html.escape(known[f].title if f in known else f)}: {html.escape(why)}"
            for f, why in analysis.left_out
        ]
        self.note.setText("<b>Not proposed</b><br>" + "<br>".join(left) if left else "")
        proposed = [(fid, list(why)) for fid, why in analysis.fixes]
        self._params = dict(analysis.params)
        self.fix_ids = [fid for fid, _ in proposed]
        target = self.session.target
        kernel = target.name if target is not None and target.kind == "kernelspec" else None
        for fid, reasons in proposed:
            fx = known.get(fid)
            if fx is None:
                continue
            taken = propose.fix_params(fid, self._params)
            values = [(k, v, analysis.origins.get(k, "")) for k, v in taken.items()]
            needs = analysis.wanting.get(fid)
            row = FixRow(fx, reasons, self, values, needs)
            if fx.applicable and needs is None:
                row.add_button(
                    "Apply to the kernel",
                    f"Make a copy of kernel {kernel!r} with these settings, named “… (tfdoctor)”"
                    if kernel
                    else "Pick a Jupyter kernel on the Start page",
                    lambda _=False, f=fid: self.apply_to_kernel(f),
                    enabled=bool(kernel) and bool(fx.env or fx.unset),
                    why_not=self._why_not_apply(
                        fx,
                        "Pick a Jupyter kernel on the Start page: the settings go into a copy of it"
                        if not kernel
                        else "",
                    ),
                )
                if target is not None and target.kind == "conda":
                    row.add_button(
                        "Apply to the conda env",
                        "Activation hooks that set (and on deactivate restore) the variables",
                        lambda _=False, f=fid: self.apply_to_conda(f),
                        enabled=bool(fx.env or fx.unset),
                        why_not=self._why_not_apply(fx, ""),
                    )
                row.add_button(
                    "Copy notebook preamble",
                    "A cell to run first in the notebook (before TensorFlow is imported)",
                    lambda _=False, f=fid: self.copy_preamble(f),
                )
            if fid == "stop_gpu_process":
                for proc in propose.gpu_holders(self.session.facts()):
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
        self._show_tried()
        self._update_undo()

    @staticmethod
    def _why_not_apply(fx: catalog.Fix, missing: str) -> str:
        if not (fx.env or fx.unset):
            return "This fix changes code, not a setting: use Copy code or the preamble"
        return missing

    def _update_undo(self) -> None:
        set_enabled(
            self.undo_button,
            any(not r.get("undone") for r in fixes.history()),
            "Nothing to undo: no change tfdoctor made is still in place",
        )

    def _say(self, text: str, kind: str = "info") -> None:
        """Say it above the fixes, where the user is looking, and in the status bar."""
        self.notice.say(text, kind)
        self.sig_status_changed.emit(text)

    def _verifiable(self, fid: str) -> bool:
        return self._verifiable_all([fid])

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
        self._update_undo()
        self.session.note_fix("applied", rec)
        self.sig_tried.emit()
        self.sig_status_changed.emit(f"Applied {fid} to a copy of kernel {target.name}")

    def copy_preamble(self, fid: str) -> None:
        text = fixes.preamble_text(self._plan(fid))
        QApplication.clipboard().setText(text)
        self.rows[fid].show_result("Copied: paste it as the notebook's first cell.")
        self.sig_status_changed.emit("The notebook preamble is on the clipboard")

    def _plan(self, fid: str) -> fixes.Plan:
        return propose.plan_fix(fid, self._params)

    def _fix_values(self, *fids: str) -> dict[str, str]:
        """The measured values these fixes take (a verify run uses them, never a default)."""
        return {k: v for f in fids for k, v in propose.fix_params(f, self._params).items()}

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
        self.session.note_fix("applied", rec or {"fixes": [fid], "target": str(prefix)})
        self.sig_tried.emit()
        self.rows[fid].show_result(
            f"Applied to the conda environment {html.escape(str(prefix))}: "
            "deactivate and activate it again."
        )
        self._update_undo()

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
        # stopping waits for the process to end (up to 20 s): never on the GUI thread
        if not self._stop_task.submit(fixes.stop_process, int(proc["pid"])):
            self._say("Still stopping the last process: wait for it", "warn")
            return
        row = self.rows.get("stop_gpu_process")
        if row is not None:
            row.show_result(f"Stopping pid {html.escape(str(proc.get('pid')))}…")
        self.sig_status_changed.emit(f"Stopping pid {proc.get('pid')}…")

    def _on_stop_done(self, result: object) -> None:
        msg = str(result)  # what NVML shows afterwards, or why it was not stopped
        row = self.rows.get("stop_gpu_process")
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
            self._say(str(exc), "error")
            self._update_undo()
            return
        self._say(f"Undone: {', '.join(rec['fixes'])} on {rec['target']}: it is as it was.")
        self.session.note_fix("undone", rec)
        self.sig_tried.emit()
        for fid in rec["fixes"]:  # the row no longer says "Applied"
            row = self.rows.get(fid)
            if row is not None:
                row.show_result(f"Undone: {html.escape(str(rec['target']))} is as it was.")
        self._update_undo()

    def verify(self, fid: str, together: tuple[str, ...] = ()) -> None:
        """Re-run the benchmark with the fix (or the fixes `together`), shown in fid's row."""
        bench, target = self.session.bench, self.session.target
        if self._verifying is not None or bench is None or target is None:
            return
        if self._tried_for is not bench:  # a new run: earlier verdicts were about another
            self.tried, self._tried_for = {}, bench
        fids = together or (fid,)
        values = self._fix_values(*fids)
        before = (bench, list(self.session.telemetry))
        options = self.session.bench_options or SupervisorOptions(sample_every_s=0.1)
        self._verify_cancel = threading.Event()
        self._verify_task.submit(
            verify_mod.verify, target, bench.config, list(fids), values, options,
            before=before,
            cancel=self._verify_cancel,
        )  # fmt: skip
        self._verifying, self._verifying_fids = fid, fids
        self._clear_next(fid)
        what = "the fix" if len(fids) == 1 else " + ".join(fids)
        self.rows[fid].show_result(f"Running the benchmark with {html.escape(what)}…")

    def shutdown(self, wait_s: float = 15.0) -> None:
        """Before the app exits: stop a verification run (its worker is killed and its memory
        cgroup removed) and let a stop-process finish; waits up to `wait_s`."""
        self._verify_cancel.set()
        self._verify_task.wait(wait_s)
        self._stop_task.wait(wait_s)

    def _on_verify_failed(self, exc: Exception) -> None:
        fid, self._verifying = self._verifying, None
        if fid is None:
            return
        log.warning("verify failed", exc_info=exc)  # one line, never a traceback
        self.rows[fid].show_result(f"Could not verify: {html.escape(str(exc))}")

    def _on_verify_done(self, v: verify_mod.Verification) -> None:
        fid, self._verifying = self._verifying, None
        if fid is None:
            return
        fids = self._verifying_fids or (fid,)
        if v.before_result is self.session.bench:  # about the run the session holds
            self.session.verifications.append(v)
            self.sig_tried.emit()
        verdict = self._show_verification(fid, fids, v)
        summary = verify_mod.what_worked(self.tried)
        self.sig_status_changed.emit(verdict + (f" ({summary})" if len(self.tried) > 1 else ""))

    def _show_verification(
        self, fid: str, fids: tuple[str, ...], v: verify_mod.Verification, offer: bool = True
    ) -> str:
        """A verification's before/after table and comparison plot in fid's row; the
        verdict in one line."""
        self.last_verification = v
        cells = [
            f"<tr><td>{label}</td><td>{before}</td><td>{after}</td></tr>"
            for label, before, after in v.table(format_bytes, missing="–")
        ]
        verdict = v.verdict[:1].upper() + v.verdict[1:] + "."
        if len(fids) > 1:
            verdict = f"{' + '.join(fids)}: {verdict}"
        self.tried[fids] = bool(v.after["survived"])
        summary = verify_mod.what_worked(self.tried)
        row = self.rows[fid]
        row.show_result(
            f"<b>{html.escape(verdict)}</b><table cellpadding='3'><tr><th></th><th>before</th>"
            f"<th>after</th></tr>{''.join(cells)}</table>"
            + "".join(f"<br>{html.escape(n)}" for n in v.notes)
            + (f"<br>So far: {html.escape(summary)}." if len(self.tried) > 1 else "")
        )
        if row.comparison is not None:
            row.comparison.hide()
            row.comparison.deleteLater()
        if row.comparison_legend is not None:
            row.comparison_legend.hide()
            row.comparison_legend.deleteLater()
        row.comparison = ComparisonPlot(v.before_telemetry, v.after_telemetry, row)
        # the legend is a row above the plot: it never covers the curves
        row.comparison_legend = QLabel(legend_html(row.comparison.legend_entries), row)
        row.comparison_legend.setTextFormat(Qt.TextFormat.RichText)
        row.comparison_legend.setWordWrap(True)
        layout = row.layout()
        if layout is not None:
            layout.addWidget(row.comparison_legend)
            layout.addWidget(row.comparison)
        if offer and not v.after["survived"]:
            self._offer_next(fid)
        return verdict

    def reset(self) -> None:
        """Forget the rows and their results: the session was replaced (a file was opened);
        the next refresh shows its fixes with what was tried on them."""
        self._shown_for = None
        self.tried, self._tried_for = {}, self.session.bench
        self.notice.clear_notice()

    def _show_tried(self) -> None:
        """What the session says was tried: each fix's last apply or undo, each verification
        (in its row), as when it was done."""
        last: dict[str, dict[str, Any]] = {}
        for entry in self.session.fix_log:
            for f in entry.get("fixes") or ():
                last[str(f)] = entry
        elsewhere = []
        known = catalog.fixes()
        for f, entry in last.items():
            row = self.rows.get(f)
            what = "Applied to" if entry.get("action") == "applied" else "Undone on"
            when = f" ({entry['at']})" if entry.get("at") else ""
            said = f"{what} {html.escape(str(entry.get('target')))}{when}."
            if row is not None:
                row.show_result(said)
            else:  # a fix tried for evidence that is not here now: still part of the story
                title = known[f].title if f in known else f
                elsewhere.append(f"{html.escape(title)}: {said}")
        if elsewhere:
            before = self.note.text()
            tried = "<b>Tried earlier</b><br>" + "<br>".join(elsewhere)
            self.note.setText(f"{before}<br>{tried}" if before else tried)
        if self.session.verifications:
            self.tried, self._tried_for = {}, self.session.bench
        for v in self.session.verifications:
            fids = tuple(v.fix_ids)
            if fids and fids[-1] in self.rows:
                self._show_verification(fids[-1], fids, v, offer=False)

    def next_steps(self) -> list[tuple[str, ...]]:
        """What to verify after a fix that did not fix the run (see verify.next_to_try)."""
        return verify_mod.next_to_try(
            self.fix_ids, self.tried, lambda fids: self._verifiable_all(fids)
        )

    def _offer_next(self, fid: str) -> None:
        """Buttons under a 'not fixed' result: the next fix, and it with the ones tried."""
        row = self.rows[fid]
        known = catalog.fixes()
        steps = self.next_steps()
        if not steps:
            row.show_result(row.result.text() + "<br>No other proposed fix can be shown by a "
                            "run: see the fixes' notes above.")  # fmt: skip
            return
        for fids in steps:
            if len(fids) == 1:
                text = f"Try the next fix: {known[fids[0]].title}"
            else:
                text = "Try them together: " + " + ".join(fids)
            target_row = fids[-1]
            b = QPushButton(text, row)
            b.setObjectName("nextFix")
            b.setToolTip("Run the same benchmark with " + " + ".join(fids))
            b.clicked.connect(lambda _=False, r=target_row, f=fids: self.verify(r, f))
            row.next_buttons.addWidget(b)

    def _clear_next(self, fid: str) -> None:
        for row in self.rows.values():
            while row.next_buttons.count():
                item = row.next_buttons.takeAt(0)
                w = item.widget() if item is not None else None
                if w is not None:
                    w.hide()
                    w.deleteLater()

    def _verifiable_all(self, fids: list[str]) -> bool:
        bench, target = self.session.bench, self.session.target
        if bench is None or target is None or any(f not in self.fix_ids for f in fids):
            return False
        values = self._fix_values(*fids)
        try:
            verify_mod.fixed_run(target, bench.config, fids, values)
        except fixes.FixError:
            return False
        return True
