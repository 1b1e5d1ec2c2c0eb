"""The wizard's Export page: save the investigation (.tfdoctor), write a shareable report
(HTML, Markdown for a GitHub issue, or JSON) previewed here as it will read, redacted by
default, or the proposed fixes as a script (`core.export` writes it)."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QByteArray, QUrl, Signal
from PySide6.QtGui import QFontDatabase, QImage, QPainter, QResizeEvent, QTextDocument
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QStackedWidget,
    QTextBrowser,
    QWidget,
)

from tfdoctor.core import fixes
from tfdoctor.core.fixes import export
from tfdoctor.core.paths import atomic_write_text
from tfdoctor.core.redact import Identity
from tfdoctor.core.report import content, render, svgplot
from tfdoctor.core.session import Session
from tfdoctor.gui import theme
from tfdoctor.gui.pages.layout import Notice, page_layout, set_enabled

# (format, what the chooser says, the save dialog's filter)
REPORT_FORMATS = (
    ("html", "HTML report (with plots)", "HTML (*.html)"),
    ("md", "Markdown for a GitHub issue", "Markdown (*.md)"),
    ("json", "JSON", "JSON (*.json)"),
)


class ExportPage(QWidget):
    """Save the investigation, share a report of it, or take the fixes as a script."""

    sig_status_changed = Signal(str)
    sig_save_requested = Signal()  # File > Save: the window owns the investigation's file

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("exportPage")
        self.session = session
        self.identity = Identity()  # whose machine an opened investigation was made on
        self.source: str | None = None  # the investigation file's name, once saved or opened
        self._report: content.Report | None = None
        self._shown_for: object = None
        root = page_layout(
            self,
            "Export",
            "Save this investigation to reopen it later, share a report of it (a GitHub "
            "issue, a colleague, IT), or take the proposed fixes as a script to run where "
            "the crash happens: a shell or PowerShell script (a dry run until --apply) or the "
            "notebook's first cell (.py).",
        )
        self.save_button = QPushButton("Save investigation…", self)
        self.save_button.setObjectName("runButton")
        self.save_button.setToolTip(
            "One .tfdoctor file with the logs, the check, the runs and their telemetry, and "
            "what was tried (Ctrl+S)"
        )
        self.script_button = QPushButton("Export fix script…", self)
        self.script_button.setToolTip(self.SCRIPT_TIP)
        row = QHBoxLayout()
        row.addWidget(self.save_button)
        row.addWidget(self.script_button)
        row.addStretch(1)
        root.addLayout(row)
        self.notice = Notice(self)
        root.addWidget(self.notice)

        rep = QHBoxLayout()
        self.format_box = theme.guard_wheel(QComboBox(self))
        for fmt, label, _ in REPORT_FORMATS:
            self.format_box.addItem(label, fmt)
        self.format_box.setToolTip("What the report is for; the preview below shows it")
        self.redact_box = QCheckBox("Leave out private details", self)
        self.redact_box.setChecked(True)
        self.redact_box.setToolTip(
            "Replace the home folder (~), user and host names, secret variables' values and "
            "tokens or passwords inside the logs"
        )
        self.report_button = QPushButton("Save report…", self)
        self.report_button.setToolTip("Write the report shown below to a file")
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setToolTip("Copy the report's text (paste Markdown into a GitHub issue)")
        rep.addWidget(QLabel("Report:", self))
        rep.addWidget(self.format_box)
        rep.addWidget(self.redact_box)
        rep.addStretch(1)
        rep.addWidget(self.copy_button)
        rep.addWidget(self.report_button)
        root.addLayout(rep)
        self.redaction_label = QLabel(self)
        self.redaction_label.setObjectName("infoLabel")
        self.redaction_label.setWordWrap(True)
        root.addWidget(self.redaction_label)
        self.preview = QStackedWidget(self)
        self.html_view = QTextBrowser(self.preview)
        self.html_view.setObjectName("reportPreview")
        self.html_view.setOpenLinks(False)
        self.text_view = QPlainTextEdit(self.preview)
        self.text_view.setObjectName("reportText")
        self.text_view.setReadOnly(True)
        self.text_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.preview.addWidget(self.html_view)
        self.preview.addWidget(self.text_view)
        root.addWidget(self.preview, 1)
        self.save_button.clicked.connect(self.sig_save_requested)
        self.script_button.clicked.connect(self._on_script_clicked)
        self.report_button.clicked.connect(self._on_report_clicked)
        self.copy_button.clicked.connect(self._on_copy_clicked)
        self.format_box.currentIndexChanged.connect(lambda _i: self.show_preview())
        self.redact_box.toggled.connect(lambda _on: self.show_preview(rebuild=True))

    SCRIPT_TIP = (
        "A shell (.sh), PowerShell (.ps1) or Python (.py, the notebook preamble) script "
        "with the proposed settings: dry run by default, --apply to act, --undo"
    )

    def refresh(self) -> None:
        """Enable the script button only when there is a script (say why not on it), and
        show the report of what the session holds now."""
        try:
            self.script_text("sh")
        except fixes.FixError as exc:
            set_enabled(self.script_button, False, f"No fix script yet: {exc}")
        else:
            set_enabled(self.script_button, True)
        self.show_preview(rebuild=self.session.analysis() is not self._shown_for)

    @property
    def report_format(self) -> str:
        return str(self.format_box.currentData())

    def report(self) -> content.Report | None:
        """The report of the session now (None while its analysis is still running)."""
        analysis = self.session.analysis()
        if analysis is None:
            return None
        if self._report is None or analysis is not self._shown_for:
            self._report = content.build(
                self.session,
                analysis,
                redact=self.redact_box.isChecked(),
                identity=self.identity,
                source=self.source,
            )
            self._shown_for = analysis
        return self._report

    def report_text(self, fmt: str | None = None) -> str | None:
        rep = self.report()
        return render.render(rep, fmt or self.report_format) if rep is not None else None

    def show_preview(self, rebuild: bool = False) -> None:
        """The report as it will read: HTML drawn with its plots, Markdown and JSON as text."""
        if rebuild:
            self._report = None
        rep = self.report()
        for b in (self.report_button, self.copy_button):
            set_enabled(b, rep is not None, "The diagnosis is still running")
        if rep is None:
            self.redaction_label.setText("Reading the evidence: the report follows.")
            self.text_view.setPlainText("")
            self.html_view.setHtml("")
            return
        if rep.redact:
            said = "; ".join(rep.redacted) or "nothing private was found"
            self.redaction_label.setText(f"Private details left out: {html.escape(said)}.")
        else:
            self.redaction_label.setText(
                "<b style='color:#c62828'>Not redacted:</b> this report holds your paths, user "
                "and host names and any secret values it found."
            )
        fmt = self.report_format
        text = render.render(rep, fmt)
        if fmt == "html":
            self._show_html(rep, text)
            self.preview.setCurrentWidget(self.html_view)
        else:
            self.text_view.setPlainText(text)
            self.preview.setCurrentWidget(self.text_view)

    def _show_html(self, rep: content.Report, text: str) -> None:
        """Qt's rich text reads no data: SVG: each plot is drawn once and handed to the
        document under a short name."""
        doc = self.html_view.document()
        # the plots fit the view's width (no sideways scrolling), at most their own size
        width = max(320, min(svgplot.WIDTH, self.html_view.viewport().width() - 110))
        height = round(svgplot.HEIGHT * width / svgplot.WIDTH)
        text = text.replace(
            f'width="{svgplot.WIDTH}" height="{svgplot.HEIGHT}"',
            f'width="{width}" height="{height}"',
        )
        for plot in rep.plots:
            name = f"tfdoctor-plot:{plot.id}"
            text = text.replace(render.image_uri(plot.svg), name)
            doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), _draw(plot.svg))
        bar = self.html_view.verticalScrollBar()
        at = bar.value()
        self.html_view.setHtml(text)
        bar.setValue(at)  # a re-layout keeps the reader's place

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if self.report_format == "html" and self._report is not None:
            self.show_preview()

    def save_report(self, path: str, fmt: str | None = None) -> bool:
        text = self.report_text(fmt or _format_of(path) or self.report_format)
        if text is None:
            self._say("The diagnosis is still running: save the report when it is done", "warn")
            return False
        try:
            atomic_write_text(Path(path), text)
        except OSError as exc:
            self._say(f"Cannot save {path}: {exc.strerror or exc}", "error")
            return False
        how = "with private details left out" if self.redact_box.isChecked() else "NOT redacted"
        self._say(f"Wrote the report to {path} ({how})")
        return True

    def _on_report_clicked(self) -> None:
        fmt = self.report_format
        suffix = render.SUFFIXES[fmt]
        wanted = next(f for k, _, f in REPORT_FORMATS if k == fmt)
        path, _ = QFileDialog.getSaveFileName(
            self, "Save the report", f"tfdoctor-report{suffix}", wanted
        )
        if path:
            self.save_report(path, fmt)

    def _on_copy_clicked(self) -> None:
        text = self.report_text()
        if text is not None:
            QApplication.clipboard().setText(text)
            self._say("The report is on the clipboard")

    def _say(self, text: str, kind: str = "info") -> None:
        self.notice.say(text, kind)
        self.sig_status_changed.emit(text)

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
            analysis.cause_ids,
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


def _format_of(path: str) -> str | None:
    suffix = Path(path).suffix.lower()
    return {".html": "html", ".htm": "html", ".md": "md", ".json": "json"}.get(suffix)


def _draw(svg: str) -> QImage:
    """An SVG picture drawn at its own size on white."""
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    size = renderer.defaultSize()
    image = QImage(size, QImage.Format.Format_ARGB32)
    image.fill(0xFFFFFFFF)
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    return image
