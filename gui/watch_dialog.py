"""The "Watch my notebook" dialog: pick a running Jupyter kernel (with its notebook, where the
server says) or any process, and copy the notebook's first cell for TensorFlow's own numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core.bench import observe
from tfdoctor.core.probes import jupyter
from tfdoctor.gui import theme
from tfdoctor.gui.pages.layout import Notice, set_enabled
from tfdoctor.gui.tasks import Task


def kernel_text(k: dict[str, Any]) -> str:
    where = k.get("notebook_path") or "notebook unknown"
    return f"{where} — kernel {str(k.get('kernel_id'))[:8]}, pid {k.get('pid')}"


class WatchDialog(QDialog):
    """Which process to watch. `watched()` after exec() gives it (None when cancelled)."""

    def __init__(self, tf_file: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Watch my notebook")
        self.resize(720, 560)
        self.tf_file = tf_file
        lay = QVBoxLayout(self)
        intro = QLabel(
            "tfdoctor follows the memory of your own training (its RAM, its GPU memory, the "
            "machine's) and, when it dies, says why. Pick the notebook's kernel, or any process.",
            self,
        )
        intro.setWordWrap(True)
        lay.addWidget(intro)
        lay.addWidget(QLabel("<b>Running Jupyter kernels</b>", self))
        self.kernels = QListWidget(self)
        self.kernels.setObjectName("watchKernels")
        lay.addWidget(self.kernels, 1)
        row = QHBoxLayout()
        row.addWidget(QLabel("Or a process by PID:", self))
        self.pid = theme.guard_wheel(QSpinBox(self))
        self.pid.setRange(0, 2**22)
        self.pid.setSpecialValueText("—")
        row.addWidget(self.pid)
        row.addStretch(1)
        lay.addLayout(row)
        cell_note = QLabel(
            "<b>First cell</b> (optional): run it first in the notebook for TensorFlow's "
            "own memory, step times and retracing; it needs nothing but TensorFlow.",
            self,
        )
        cell_note.setWordWrap(True)
        lay.addWidget(cell_note)
        self.cell = QPlainTextEdit(observe.first_cell(tf_file), self)
        self.cell.setObjectName("logView")  # raw code: long lines keep their shape
        self.cell.setReadOnly(True)
        self.cell.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.cell.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        lay.addWidget(self.cell, 2)
        self.copy_button = QPushButton("Copy the first cell", self)
        self.copy_button.clicked.connect(self.copy_cell)
        lay.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.notice = Notice(self)
        lay.addWidget(self.notice)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Start watching")
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        lay.addWidget(self.buttons)
        self.kernels.currentRowChanged.connect(lambda _r: self._update())
        self.pid.valueChanged.connect(lambda _v: self._update())
        self._watched: observe.Watched | None = None
        self._list_task = Task(self, name="tfdoctor-list-kernels", poll_ms=100)
        self._list_task.sig_done.connect(self.show_kernels)
        self._list_task.sig_failed.connect(
            lambda exc: self.notice.say(f"Could not list the kernels: {exc}", "warn")
        )
        self.kernels.addItem("Looking for running kernels…")
        self.kernels.item(0).setFlags(Qt.ItemFlag.NoItemFlags)
        self._list_task.submit(jupyter.running_kernels)
        self._update()

    def show_kernels(self, kernels: list[dict[str, Any]]) -> None:
        self.kernels.clear()
        for k in kernels:
            item = QListWidgetItem(kernel_text(k))
            item.setData(Qt.ItemDataRole.UserRole, int(k["pid"]))
            self.kernels.addItem(item)
        if not kernels:
            item = QListWidgetItem("No Jupyter kernel is running: give a PID below.")
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            self.kernels.addItem(item)
        elif self.kernels.currentRow() < 0:
            self.kernels.setCurrentRow(0)
        self._update()

    def chosen_pid(self) -> int | None:
        if self.pid.value():
            return int(self.pid.value())
        item = self.kernels.currentItem()
        pid = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return int(pid) if isinstance(pid, int) else None

    def _update(self) -> None:
        set_enabled(
            self.ok_button,
            self.chosen_pid() is not None,
            "Pick a running kernel, or give a process's PID",
        )

    def copy_cell(self) -> None:
        QApplication.clipboard().setText(self.cell.toPlainText())
        self.notice.say("Copied: paste it as the notebook's first cell and run it.")

    def _accept(self) -> None:
        pid = self.chosen_pid()
        if pid is None:
            return
        try:
            self._watched = observe.resolve(pid=pid)
        except observe.WatchError as exc:
            self.notice.say(str(exc), "error")
            return
        self.accept()

    def watched(self) -> observe.Watched | None:
        return self._watched
