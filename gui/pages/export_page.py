"""The wizard's Export page: save the session as JSON, or the proposed fixes as a script
(`core.export` writes it)."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QPushButton, QWidget

from tfdoctor.core import fixes
from tfdoctor.core.fixes import export
from tfdoctor.core.paths import atomic_write_text
from tfdoctor.core.session import Session
from tfdoctor.gui.pages.layout import Notice, page_layout, set_enabled


class ExportPage(QWidget):
    """Save what the session found (a shareable report comes with the report issue)."""

    sig_status_changed = Signal(str)

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("exportPage")
        self.session = session
        root = page_layout(
            self,
            "Export",
            "Save everything this session found as JSON (the target, the check, the run, the "
            "logs' diagnosis), or the proposed fixes as a script to run where the crash "
            "happens: a shell or PowerShell script (a dry run until --apply) or the "
            "notebook's first cell (.py).",
        )
        self.save_button = QPushButton("Save session as JSON…", self)
        self.script_button = QPushButton("Export fix script…", self)
        self.script_button.setToolTip(self.SCRIPT_TIP)
        row = QHBoxLayout()
        row.addWidget(self.save_button)
        row.addWidget(self.script_button)
        row.addStretch(1)
        root.addLayout(row)
        self.notice = Notice(self)
        root.addWidget(self.notice)
        root.addStretch(1)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.script_button.clicked.connect(self._on_script_clicked)

    SCRIPT_TIP = (
        "A shell (.sh), PowerShell (.ps1) or Python (.py, the notebook preamble) script "
        "with the proposed settings: dry run by default, --apply to act, --undo"
    )

    def refresh(self) -> None:
        """Enable the script button only when there is a script, and say why not on it."""
        try:
            self.script_text("sh")
        except fixes.FixError as exc:
            set_enabled(self.script_button, False, f"No fix script yet: {exc}")
        else:
            set_enabled(self.script_button, True)

    def _say(self, text: str, kind: str = "info") -> None:
        self.notice.say(text, kind)
        self.sig_status_changed.emit(text)

    def save(self, path: str) -> bool:
        try:
            text = json.dumps(self.session.to_json(), indent=2, default=str)

            atomic_write_text(Path(path), text + "\n")
        except OSError as exc:
            self._say(f"Cannot save {path}: {exc.strerror or exc}", "error")
            return False
        self._say(f"Saved the session to {path}")
        return True

    def export_script(self, path: str) -> bool:
        """The proposed config fixes as a script; the format follows the file's suffix."""
        fmt = export.format_of(path)
        try:
            text = self.script_text(fmt)
            atomic_write_text(Path(path), text)
        except fixes.FixError as exc:
            self._say(f"No script: {exc}", "warn")
            return False
        except OSError as exc:
            self._say(f"Cannot save {path}: {exc.strerror or exc}", "error")
            return False
        how = {
            "py": "paste it as the notebook's first cell, or import it before TensorFlow",
            "ps1": "run it without options for a dry run, then with -Apply",
        }.get(fmt, "run it without options for a dry run, then with --apply")
        self._say(f"Wrote {path}: {how}")
        return True

    def script_text(self, fmt: str) -> str:
        """The fix script for the session's proposed fixes, in `fmt`.

        Raises:
            FixError: nothing to export (why, in one line).
        """
        analysis = self.session.analysis()
        if analysis is None:
            raise fixes.FixError("the diagnosis is still running: export when it is done")
        python = self.session.target.python if self.session.target else None
        return export.proposal_script(
            fmt,
            analysis.fix_ids,
            [r.cause.id for r in analysis.ranked],
            self.session.facts(),
            python,
            analysis.params,
            analysis.origins,
            analysis.wanting,
            export.target_kernel(self.session.target),
        )

    def _on_script_clicked(self) -> None:
        try:  # nothing to export: say so, never open a save dialog for it
            self.script_text("sh")
        except fixes.FixError as first:
            try:
                self.script_text("py")
            except fixes.FixError:
                self._say(f"No fix script: {first}", "warn")
                return
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
