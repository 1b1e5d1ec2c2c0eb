"""The wizard's Start page: pick the Python, then one of two doors — check and reproduce, or
"I have a crash log" (paste it, drop a file anywhere on the page, open one, or let tfdoctor
find recent crashes in the kernel log and Jupyter's logs)."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core import flow
from tfdoctor.core.diagnose import recent
from tfdoctor.core.diagnose.reader import not_text
from tfdoctor.core.model import Target
from tfdoctor.core.probes.targetrun import (
    app_has_tensorflow,
    app_is_bundle,
    current_target,
)
from tfdoctor.core.report.investigation import SUFFIX
from tfdoctor.core.session import Session
from tfdoctor.gui.bridges import EnvsBridge
from tfdoctor.gui.pages.layout import Notice, page_layout, set_enabled
from tfdoctor.gui.target_picker import TargetPicker
from tfdoctor.gui.tasks import Task

log = logging.getLogger(__name__)

PASTE_NAME = "pasted text"
PICK_PROMPT = "— pick the Python your notebook uses —"
NO_TF_NOTE = (
    "tfdoctor's own Python has no TensorFlow (the app does not need it: it checks and runs "
    "the TensorFlow of your notebook's Python). Pick that Python below: a Jupyter kernel, a "
    "conda environment, or <b>Other Python…</b>. In the notebook, "
    "<code>import sys; print(sys.executable)</code> shows which one it is."
)


class StartPage(QWidget):
    """Where the user says what happened and which Python it happened in."""

    sig_door_chosen = Signal(str)  # flow.DOOR_SETUP | flow.DOOR_LOG
    sig_target_changed = Signal(object)  # Target
    sig_logs_changed = Signal()
    sig_status_changed = Signal(str)
    sig_paste_changed = Signal(bool)  # whether the paste box holds text
    sig_watch_chosen = Signal()  # the third door: watch the user's own notebook
    sig_investigation_dropped = Signal(str)  # a .tfdoctor file dropped here: open it

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("startPage")
        self.session = session
        self.setAcceptDrops(True)
        self.envs_bridge = EnvsBridge(self)
        self._recent = Task(self, name="tfdoctor-recent", poll_ms=100)
        self._recent.sig_done.connect(self._on_recent_done)
        self._recent.sig_failed.connect(self._on_recent_failed)
        self._build()
        self.envs_bridge.sig_envs_found.connect(self._on_envs_found)
        self.envs_bridge.sig_envs_failed.connect(
            lambda msg: self._status(f"Could not list environments: {msg}")
        )
        if app_has_tensorflow():
            self.add_target(current_target(), select=True)
        else:  # the picker comes first: the app's own Python has nothing to check
            self.target_combo.addItem(PICK_PROMPT)
            if not app_is_bundle():  # a bundle's executable is no Python
                self.add_target(current_target(), select=False)
            self.target_note.show()
            self.target_combo.setFocus()

    # ------------------------------------------------------------------ construction
    def _build(self) -> None:
        root = page_layout(
            self,
            "What happened?",
            "Your Jupyter kernel died, a script ended with “Killed”, or TensorFlow printed a "
            "wall of errors. tfdoctor finds out why, step by step.",
        )

        self.picker = TargetPicker(
            "&Python your notebook uses:", self, other_tip="Pick an interpreter file yourself"
        )
        self.target_combo = self.picker.combo
        self.target_combo.setToolTip(
            "Jupyter kernels, conda environments and running kernels found on this machine. "
            "In a notebook, import sys; print(sys.executable) shows the one it uses."
        )
        self.other_button = self.picker.other_button
        root.addWidget(self.picker)
        self.target_note = QLabel(NO_TF_NOTE, self)
        self.target_note.setObjectName("targetNote")
        self.target_note.setWordWrap(True)
        self.target_note.setTextFormat(Qt.TextFormat.RichText)
        self.target_note.hide()
        root.addWidget(self.target_note)

        doors = QHBoxLayout()
        doors.setSpacing(14)
        self.setup_door = self._door(
            "Check my setup and reproduce the crash",
            "TensorFlow, CUDA, the driver, GPUs and memory,\nthen a training run under watch.",
        )
        self.log_door = self._door(
            "I have a crash log",
            "Paste it, drop a file on this page, or let\ntfdoctor find recent crashes.",
        )
        doors.addWidget(self.setup_door)
        doors.addWidget(self.log_door)
        root.addLayout(doors)
        self.watch_door = QPushButton(
            "Watch my notebook — follow your own training's memory live; when it dies, "
            "tfdoctor says why",
            self,
        )
        self.watch_door.setObjectName("doorButton")
        self.watch_door.setToolTip(
            "Pick a running Jupyter kernel (or any process) and watch its RAM and GPU memory; "
            "optional first cell for TensorFlow's own numbers"
        )
        self.watch_door.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        root.addWidget(self.watch_door)

        logs = QFrame(self)
        logs.setObjectName("progressBox")
        lv = QVBoxLayout(logs)
        head = QHBoxLayout()
        head.addWidget(
            QLabel("<b>Crash log</b> — paste here, or drop files anywhere on this page", logs), 1
        )
        self.open_button = QPushButton("Open log file…", logs)
        self.open_button.setToolTip("A TF log, a Jupyter server log, dmesg output… (Ctrl+L)")
        self.find_button = QPushButton("Find recent crashes", logs)
        self.find_button.setToolTip(
            "Read the kernel log for OOM kills and GPU (Xid) errors, and the Jupyter server "
            "logs that can be found"
        )
        self.clear_button = QPushButton("Clear", logs)
        head.addWidget(self.open_button)
        head.addWidget(self.find_button)
        head.addWidget(self.clear_button)
        lv.addLayout(head)
        self.log_notice = Notice(logs)
        lv.addWidget(self.log_notice)
        self.paste = QPlainTextEdit(logs)
        self.paste.setObjectName("logPaste")
        self.paste.setPlaceholderText(
            "Paste the output here: the last lines before the kernel died, a traceback, "
            "`dmesg | tail`, an nvidia-smi table…"
        )
        self.paste.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        lv.addWidget(self.paste, 1)
        self.files = QListWidget(logs)
        self.files.setObjectName("logFiles")
        self.files.setMaximumHeight(80)
        self.files.setToolTip("The logs tfdoctor will read as one case")
        self.files.hide()
        lv.addWidget(self.files)
        root.addWidget(logs, 1)

        self.setup_door.clicked.connect(lambda: self.choose(flow.DOOR_SETUP))
        self.log_door.clicked.connect(lambda: self.choose(flow.DOOR_LOG))
        self.watch_door.clicked.connect(self.sig_watch_chosen)
        self.open_button.clicked.connect(self.open_logs)
        self.find_button.clicked.connect(self.find_recent)
        self.clear_button.clicked.connect(self.clear_logs)
        self._paste_filled = False
        self.paste.textChanged.connect(self._on_paste_changed)
        self.picker.sig_target_changed.connect(self._on_picker_target_changed)

    def _door(self, title: str, text: str) -> QPushButton:
        b = QPushButton(f"{title}\n{text}", self)
        b.setObjectName("doorButton")
        b.setMinimumHeight(84)
        b.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        b.setToolTip(text)
        return b

    # ------------------------------------------------------------------ targets
    def add_target(self, target: Target, select: bool = True) -> None:
        self.picker.add_target(target, select)

    def refresh_targets(self) -> None:
        self.envs_bridge.refresh()

    def _on_envs_found(self, targets: list[Target]) -> None:
        for t in targets:
            self.add_target(t, select=False)
        self._status(f"Found {len(targets)} Python environments.")

    def _on_picker_target_changed(self, t: Target | None) -> None:
        if t is not None:
            self.target_note.hide()
            self.session.target = t
            self.sig_target_changed.emit(t)

    # ------------------------------------------------------------------ logs
    def choose(self, door: str) -> None:
        self.commit_paste()
        if door == flow.DOOR_LOG and not self.session.logs:
            self._notice(
                "There is no log yet: paste the crash output here, drop or open a log file, "
                "or press Find recent crashes.",
                "warn",
            )
            self.paste.setFocus()
            return
        self.log_notice.clear_notice()
        self.session.door = door
        self.sig_door_chosen.emit(door)

    def commit_paste(self) -> None:
        """Put the pasted text into the session (replacing an earlier paste)."""
        text = self.paste.toPlainText().strip()
        self.session.logs = [lg for lg in self.session.logs if lg.name != PASTE_NAME]
        if text:
            self.session.add_log(PASTE_NAME, text.encode("utf-8", "surrogatepass"))
        self._show_files()

    def has_log_text(self) -> bool:
        """Whether there is a log to read: logs added, or text in the paste box."""
        return bool(self.session.logs or self.paste.toPlainText().strip())

    def _on_paste_changed(self) -> None:
        filled = bool(self.paste.toPlainText().strip())
        if filled != self._paste_filled:  # only when it flips: not on every keystroke
            self._paste_filled = filled
            self.sig_paste_changed.emit(filled)

    def add_log_file(self, path: str) -> bool:
        p = Path(path)
        if not p.is_file():
            self._notice(f"Not a file: {path}", "error")
            return False
        try:
            with p.open("rb") as fh:
                why = not_text(fh.read(8192))
        except OSError as exc:
            self._notice(f"Cannot read {path}: {exc.strerror or exc}", "error")
            return False
        if why:
            self._notice(
                f"{p.name} is {why}, not a text log. Copy the error text (or save the output "
                "to a .txt file) and add that instead.",
                "error",
            )
            return False
        self.session.add_log(p.name, path=str(p))
        self._show_files()
        return True

    def open_logs(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(
            self, "Open crash logs", str(Path.home()), "Logs (*.log *.txt *.out);;All files (*)"
        )
        for path in paths:
            self.add_log_file(path)

    def clear_logs(self) -> None:
        self.paste.clear()
        self.session.logs.clear()
        self.log_notice.clear_notice()
        self._show_files()

    def find_recent(self) -> None:
        if not self._recent.submit(recent.find_recent_crashes):
            return
        set_enabled(self.find_button, False, "Looking for recent crashes…")
        self._status("Looking for recent crashes in the kernel log and Jupyter logs…")

    def _on_recent_failed(self, exc: Exception) -> None:
        set_enabled(self.find_button, True)
        log.warning("finding recent crashes failed", exc_info=exc)  # never a traceback at the user
        self._notice(f"Could not look for crashes: {exc}", "error")

    def _on_recent_done(self, result: tuple[list[recent.Found], list[str]]) -> None:
        set_enabled(self.find_button, True)
        found, problems = result
        for f in found:
            self.session.add_log(f.name, f.text if f.path is None else b"", f.path)
        self._show_files()
        what = (
            f"Found {len(found)} source(s) of crash evidence."
            if found
            else "No recent crash found."
        )
        self._notice(" ".join([what, *problems]), "info" if found else "warn")

    def _show_files(self) -> None:
        self.files.clear()
        self.files.setVisible(bool(self.session.logs))
        for lg in self.session.logs:
            self.files.addItem(
                lg.name + (f" — {lg.path}" if lg.path and lg.path not in lg.name else "")
            )
        self.sig_logs_changed.emit()

    # drag and drop anywhere on the page
    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls() or event.mimeData().hasText():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        md = event.mimeData()
        added = 0
        if md.hasUrls():
            for url in md.urls():
                path = url.toLocalFile() if url.isLocalFile() else ""
                if path.endswith(SUFFIX):  # a saved investigation, not a log
                    event.acceptProposedAction()
                    self.sig_investigation_dropped.emit(path)
                    return
                if path and self.add_log_file(path):
                    added += 1
        elif md.hasText():
            self.paste.appendPlainText(md.text())
            self.commit_paste()
            added = 1
        if added:
            event.acceptProposedAction()
            self._notice(f"Added {added} log(s). Press “Read my log” to read them.")

    def show_session(self) -> None:
        """Show what the session holds (an investigation was opened): its Python, its pasted
        text in the paste box, its other logs in the list."""
        if self.session.target is not None:
            self.picker.blockSignals(True)  # the window sets what depends on the target
            self.add_target(self.session.target, select=True)
            self.picker.blockSignals(False)
            self.target_note.hide()
        pasted = next((lg for lg in self.session.logs if lg.name == PASTE_NAME), None)
        self.paste.setPlainText(pasted.text.decode("utf-8", "replace") if pasted else "")
        self.log_notice.clear_notice()
        self._show_files()

    def _status(self, text: str) -> None:
        self.sig_status_changed.emit(text)

    def _notice(self, text: str, kind: str = "info") -> None:
        """Say it under the crash log box, where the user is looking, and in the status bar."""
        self.log_notice.say(text, kind)
        self._status(text)
