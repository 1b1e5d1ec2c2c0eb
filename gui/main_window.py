"""The main window: the wizard. A step list on the left, the pages on the right, Back/Next.

Which step is open, skipped or closed (and why), and where Back/Next go, come from
`core.flow` (Qt-free, unit-tested); this window only shows them. The Session holds what the
user did; the window size and the last Python are remembered (QSettings).
"""

from __future__ import annotations

import copy
import logging
import platform
import sys
from pathlib import Path

import pyqtgraph
import PySide6
from PySide6.QtCore import QSettings, QSize, Qt, QTimer, QUrl
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QDragEnterEvent,
    QDropEvent,
    QKeySequence,
    QShortcut,
)
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QStackedWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core import __version__, flow
from tfdoctor.core.bench.supervisor import BenchResult
from tfdoctor.core.model import Target
from tfdoctor.core.report import investigation
from tfdoctor.core.scan import CheckReport
from tfdoctor.core.session import Session
from tfdoctor.gui import assets, theme
from tfdoctor.gui.bridges import AnalysisBridge
from tfdoctor.gui.pages.bench_page import BenchPage
from tfdoctor.gui.pages.check_page import CheckPage
from tfdoctor.gui.pages.diagnosis_page import DiagnosisPage
from tfdoctor.gui.pages.export_page import ExportPage
from tfdoctor.gui.pages.fix_page import FixPage
from tfdoctor.gui.pages.layout import set_enabled
from tfdoctor.gui.pages.start_page import StartPage
from tfdoctor.gui.tasks import Task

log = logging.getLogger(__name__)
RECENT_FILES = 8


def investigation_url(url: QUrl) -> bool:
    """A dropped local .tfdoctor file."""
    return url.isLocalFile() and url.toLocalFile().endswith(investigation.SUFFIX)


# (title, tooltip) per step, in flow.STEPS order
STEPS: list[tuple[str, str]] = [
    ("Start", "Say what happened and pick the Python your notebook uses"),
    ("Environment checks", "TensorFlow, CUDA libraries, driver, GPUs, memory"),
    ("Reproduce", "Run a supervised training benchmark and watch memory live"),
    ("Diagnosis", "Why it died, from every source, best first"),
    ("Fix", "What to change"),
    ("Export", "Save what this session found"),
]


class MainWindow(QMainWindow):
    """The app window. With `autostart`, lists the Python environments at once."""

    def __init__(self, parent: QWidget | None = None, *, autostart: bool = True) -> None:
        super().__init__(parent)
        self.setWindowTitle("tfdoctor — TensorFlow GPU troubleshooter")
        self.setWindowIcon(assets.app_icon())
        self.resize(1180, 780)
        # the analysis of the session runs off the GUI thread, through the bridge
        self.session = Session(background=True)
        self.analysis_bridge = AnalysisBridge(self.session, self)
        self.settings = QSettings("tfdoctor", "tfdoctor")
        self.autorun = autostart  # visiting the checks step starts a check
        self._diagnosis_said: str | None = None  # the status bar's diagnosis summary, if shown

        central = QWidget(self)
        row = QHBoxLayout(central)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)

        side = QFrame(central)
        side.setObjectName("sidebar")
        side.setFixedWidth(210)
        col = QVBoxLayout(side)
        col.setContentsMargins(12, 16, 12, 12)
        col.setSpacing(10)
        brand = QHBoxLayout()
        brand.setSpacing(8)
        logo = QLabel(side)
        logo.setPixmap(assets.app_icon().pixmap(QSize(32, 32)))
        name = QLabel("tfdoctor", side)
        name.setObjectName("brandName")
        brand.addWidget(logo)
        brand.addWidget(name, 1)
        col.addLayout(brand)

        self.steps = QListWidget(side)
        self.steps.setObjectName("stepList")
        self.steps.setFrameShape(QFrame.Shape.NoFrame)
        self.steps.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        for i, (title, tip) in enumerate(STEPS, 1):
            item = QListWidgetItem(f"{i}.  {title}")
            item.setToolTip(tip)
            self.steps.addItem(item)
        col.addWidget(self.steps, 1)
        foot = QHBoxLayout()
        version = QLabel(f"version {__version__}", side)
        version.setObjectName("versionLabel")
        self.about_button = QToolButton(side)
        self.about_button.setText("About")
        self.about_button.setAutoRaise(True)
        self.about_button.setToolTip("Versions and where tfdoctor keeps its files (F1)")
        foot.addWidget(version, 1)
        foot.addWidget(self.about_button)
        col.addLayout(foot)
        row.addWidget(side)

        right = QWidget(central)
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        rv.setSpacing(0)
        self.stack = QStackedWidget(right)
        self.start_page = StartPage(self.session, self.stack)
        self.check_page = CheckPage(self.stack)
        self.bench_page = BenchPage(
            self.stack,
            target_provider=lambda: self.session.target,
            gpu_count_provider=self._tf_gpu_count,
        )
        self.diagnosis_page = DiagnosisPage(self.session, self.stack, bridge=self.analysis_bridge)
        self.fix_page = FixPage(self.session, self.stack)
        self.export_page = ExportPage(self.session, self.stack)
        self.pages = {
            "start": self.start_page,
            "checks": self.check_page,
            "reproduce": self.bench_page,
            "diagnosis": self.diagnosis_page,
            "fix": self.fix_page,
            "export": self.export_page,
        }
        for step in flow.STEPS:
            self.stack.addWidget(self.pages[step])
        rv.addWidget(self.stack, 1)

        nav = QFrame(right)
        nav.setObjectName("navBar")
        nl = QHBoxLayout(nav)
        nl.setContentsMargins(22, 8, 22, 10)
        self.step_note = QLabel(nav)
        self.step_note.setObjectName("infoLabel")
        self.step_note.setWordWrap(True)
        self.back_button = QPushButton("◀ Back", nav)
        self.back_button.setToolTip("The previous step (Alt+Left)")
        self.next_button = QPushButton("Next ▶", nav)
        self.next_button.setObjectName("runButton")
        self.next_button.setToolTip("The next step (Alt+Right)")
        nl.addWidget(self.step_note, 1)
        nl.addWidget(self.back_button)
        nl.addWidget(self.next_button)
        rv.addWidget(nav)
        row.addWidget(right, 1)
        self.setCentralWidget(central)
        self.investigation_path: Path | None = None  # the .tfdoctor file open or saved
        self._open_task = Task(self, name="tfdoctor-open", poll_ms=50)
        self._save_task = Task(self, name="tfdoctor-save", poll_ms=50)
        self._saving_to: Path | None = None
        self.setAcceptDrops(True)
        self._build_menu()

        self._connect()
        self._restore_settings()
        self.go("start")
        self.statusBar().showMessage("Ready.")
        if autostart:
            QTimer.singleShot(0, self, self.start_page.refresh_targets)

    def _build_menu(self) -> None:
        """File: open and save the investigation, recent files, the report. View > Theme:
        the desktop's look (the default), light or dark, kept across runs."""
        file_menu = self.menuBar().addMenu("&File")
        for text, keys, slot in (
            ("&Open investigation…", "Ctrl+O", self._on_open_clicked),
            ("&Save investigation", "Ctrl+S", self.save_investigation),
            ("Save investigation &as…", "Ctrl+Shift+S", self.save_investigation_as),
        ):
            action = QAction(text, self)
            action.setShortcut(QKeySequence(keys))
            action.triggered.connect(lambda _=False, f=slot: f())
            file_menu.addAction(action)
        self.recent_menu = file_menu.addMenu("Open &recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent_menu)
        file_menu.addSeparator()
        add_log = QAction("Add a crash &log…", self)
        add_log.setShortcut(QKeySequence("Ctrl+L"))
        add_log.triggered.connect(self._open_logs)
        file_menu.addAction(add_log)
        report = QAction("Share a &report…", self)
        report.setShortcut(QKeySequence("Ctrl+E"))
        report.triggered.connect(lambda: self.go("export"))
        file_menu.addAction(report)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        self._fill_recent_menu()

        view = self.menuBar().addMenu("&View")
        menu = view.addMenu("&Theme")
        group = QActionGroup(self)
        group.setExclusive(True)
        self.theme_actions: dict[str, QAction] = {}
        for name, text in (("system", "&System"), ("light", "&Light"), ("dark", "&Dark")):
            action = QAction(text, self, checkable=True)
            action.setToolTip(
                "Follow the desktop's light or dark look" if name == "system" else f"Always {name}"
            )
            action.triggered.connect(lambda _=False, n=name: self.set_theme(n))
            group.addAction(action)
            menu.addAction(action)
            self.theme_actions[name] = action
        self.theme_actions["system"].setChecked(True)

    def set_theme(self, name: str) -> None:
        """Light, dark or the desktop's look, now and on the next start."""
        app = QApplication.instance()
        if isinstance(app, QApplication):
            theme.set_theme(app, name)
            name = theme.chosen(app)
        self.theme_actions[name].setChecked(True)
        self.settings.setValue("view/theme", name)

    # ------------------------------------------------------------------ wiring
    def _connect(self) -> None:
        self.steps.currentRowChanged.connect(self._on_steps_row_changed)
        self.back_button.clicked.connect(self.back)
        self.next_button.clicked.connect(self.next)
        self.about_button.clicked.connect(self.show_about)
        for page in (self.start_page, self.check_page, self.bench_page, self.export_page):
            page.sig_status_changed.connect(self._on_page_status_changed)
        self.fix_page.sig_status_changed.connect(self._on_page_status_changed)
        self.diagnosis_page.sig_status_changed.connect(self._on_diagnosis_status)
        self.start_page.sig_door_chosen.connect(self._on_door_chosen)
        self.start_page.sig_watch_chosen.connect(self.watch_notebook)
        self.start_page.sig_target_changed.connect(self._on_target_changed)
        self.start_page.sig_logs_changed.connect(self._on_logs_changed)
        self.start_page.sig_paste_changed.connect(lambda _filled: self.update_steps())
        self.check_page.bridge.sig_check_finished.connect(self._on_check_finished)
        self.bench_page.bridge.sig_finished.connect(self._on_bench_finished)
        self.bench_page.sig_watch_finished.connect(self._on_watch_finished)
        self.analysis_bridge.sig_analysed.connect(self._on_analysis_done)
        self.analysis_bridge.sig_failed.connect(lambda _msg: self.update_steps())
        self.diagnosis_page.sig_show_moment.connect(self._show_moment)
        self.export_page.sig_save_requested.connect(self.save_investigation)
        self.start_page.sig_investigation_dropped.connect(self.open_investigation)
        self.fix_page.sig_tried.connect(self._on_fix_tried)
        self._open_task.sig_done.connect(self._on_investigation_opened)
        self._open_task.sig_failed.connect(self._on_investigation_failed)
        self._save_task.sig_done.connect(self._on_saved)
        self._save_task.sig_failed.connect(self._on_save_failed)
        for keys, slot in (
            ("Alt+Left", self.back),
            ("Alt+Right", self.next),
            ("F5", self._rerun),
            ("F1", self.show_about),
        ):
            QShortcut(QKeySequence(keys), self, slot)
        if self.session.target is not None:  # picked while the start page was built
            self._on_target_changed(self.session.target)

    # ------------------------------------------------------------------ navigation
    def _tf_gpu_count(self) -> int | None:
        facts = self.session.facts()
        n = facts.value("tf.gpu_count") if facts is not None else None
        return n if isinstance(n, int) else None

    @property
    def current_step(self) -> str:
        return flow.STEPS[self.stack.currentIndex()]

    def go(self, step: str) -> None:
        """Show a step (even a closed one shows its page with the reason in the note)."""
        i = flow.STEPS.index(step)
        if self.steps.currentRow() != i:
            self.steps.blockSignals(True)
            self.steps.setCurrentRow(i)
            self.steps.blockSignals(False)
        self.stack.setCurrentIndex(i)
        if step == "reproduce":
            self.bench_page.refresh_target()
            if not self.bench_page.running and self.bench_page.last_result is None:
                cfg, why = flow.suggest_config(self.session)
                self.bench_page.set_config(cfg)
                if why:
                    self.statusBar().showMessage("Suggested settings: " + "; ".join(why))
        elif step == "diagnosis":
            self.diagnosis_page.refresh()
        elif step == "fix":
            self.fix_page.refresh()
        elif step == "export":
            self.export_page.refresh()
        elif (
            step == "checks"
            and self.autorun
            and self.session.check is None
            and not self.check_page.running
        ):
            self.check_page.start_check()
        self.update_steps()

    def next(self) -> None:
        if self.current_step == "start" and self.session.door is None:
            door = flow.DOOR_LOG if self.start_page.has_log_text() else flow.DOOR_SETUP
            self.start_page.choose(door)
            return
        if self.current_step == "start":
            self.start_page.commit_paste()
        step = flow.next_step(self.session, self.current_step)
        if step is not None:
            self.go(step)

    def back(self) -> None:
        step = flow.prev_step(self.session, self.current_step)
        if step is not None:
            self.go(step)

    def update_steps(self) -> None:
        """Enable/disable the step list and Back/Next from the flow's decisions (quick: the
        session's analysis is asked for off the GUI thread when it is stale)."""
        if self.session.analysis() is None:
            self.analysis_bridge.request()
        states = flow.step_states(self.session)
        for i, step in enumerate(flow.STEPS):
            item = self.steps.item(i)
            st = states[step]
            flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
            item.setFlags(flags if st.enabled else Qt.ItemFlag.NoItemFlags)
            tip = STEPS[i][1]
            item.setToolTip(tip + (f"\n{st.reason}" if st.reason else ""))
        here = states[self.current_step]
        self.step_note.setText(here.reason)
        set_enabled(
            self.back_button,
            flow.prev_step(self.session, self.current_step) is not None,
            "This is the first step",
        )
        nxt = flow.next_step(self.session, self.current_step)
        later = flow.STEPS[flow.STEPS.index(self.current_step) + 1 :]
        blocked = next((states[s].reason for s in later if not states[s].skipped), "")
        set_enabled(
            self.next_button,
            nxt is not None or self.current_step == "start",
            blocked or "This is the last step",
        )
        if self.current_step == "start" and self.session.door is None:
            log_first = self.start_page.has_log_text()
            self.next_button.setText("Read my log ▶" if log_first else "Check my setup ▶")
        else:
            self.next_button.setText(f"Next: {flow.STEP_TITLES[nxt]} ▶" if nxt else "Next ▶")

    # ------------------------------------------------------------------ slots
    def _on_steps_row_changed(self, row: int) -> None:
        if 0 <= row < len(flow.STEPS):
            self.go(flow.STEPS[row])

    def watch_notebook(self, open_dialog: bool = True) -> None:
        """The third door: the Reproduce page's plot follows the user's own process."""
        self.go("reproduce")
        if open_dialog:
            self.bench_page.open_watch_dialog()

    def _on_door_chosen(self, door: str) -> None:
        step = flow.next_step(self.session, "start")
        if step is not None:
            self.go(step)

    def _on_target_changed(self, target: Target) -> None:
        self.check_page.add_target(target, select=True)
        if self.session.check is not None and self.session.check.target != target:
            self.session.check = None  # a check of another Python says nothing about this one
        self.update_steps()

    def _on_check_finished(self, report: CheckReport) -> None:
        if not report.cancelled:
            self.session.check = report
        self.update_steps()

    def _on_fix_tried(self) -> None:
        self.update_steps()

    def _on_bench_finished(self, result: BenchResult) -> None:
        self.session.bench = result
        self.session.bench_options = self.bench_page.last_options
        self.session.telemetry = [item for _, item in self.bench_page.bridge.timeline.since(0)]
        self.update_steps()

    def _on_watch_finished(self, result: object) -> None:
        self.session.watch = result  # type: ignore[assignment]  # an observe.WatchResult
        self.update_steps()

    def _on_analysis_done(self, _analysis: object) -> None:
        if self.current_step == "fix":
            self.fix_page.refresh()
        elif self.current_step == "export":
            self.export_page.refresh()
        self.update_steps()

    def _show_moment(self, start: float, end: float) -> None:
        self.go("reproduce")
        self.bench_page.plot.show_moment(start, end)

    def _on_page_status_changed(self, text: str) -> None:
        self._diagnosis_said = None
        self.statusBar().showMessage(text)

    def _on_diagnosis_status(self, text: str) -> None:
        self.statusBar().showMessage(text)
        self._diagnosis_said = text

    def _on_logs_changed(self) -> None:
        # what the diagnosis said was about the logs before this change: not any more
        if self._diagnosis_said and self.statusBar().currentMessage() == self._diagnosis_said:
            self.statusBar().clearMessage()
        self._diagnosis_said = None
        self.update_steps()

    def _open_logs(self) -> None:
        self.go("start")
        self.start_page.open_logs()

    def _rerun(self) -> None:
        if self.current_step == "checks":
            self.check_page.start_check()
        elif self.current_step == "diagnosis":
            self.diagnosis_page.diagnose_again()

    def show_about(self) -> None:
        from tfdoctor.core.bench.supervisor import runs_root

        QMessageBox.about(
            self,
            "About tfdoctor",
            f"<b>tfdoctor {__version__}</b> — why TensorFlow crashed, and what to do.<br><br>"
            f"Python {platform.python_version()} · PySide6 {PySide6.__version__} · "
            f"Qt {PySide6.QtCore.qVersion()} · pyqtgraph {pyqtgraph.__version__}<br>"
            f"{platform.system()} {platform.release()} ({platform.machine()})<br><br>"
            f"Run files: {runs_root()}<br>Settings: {self.settings.fileName()}<br>"
            f"App interpreter: {sys.executable}",
        )

    # ------------------------------------------------------------------ investigation file
    def _busy_reason(self) -> str:
        if self.check_page.running:
            return "An environment check is running: stop it first"
        if self.bench_page.running:
            return "A run is in progress: stop it first"
        if self.fix_page.verifying:
            return "A fix is being verified: wait for it or stop it first"
        return ""

    def open_investigation(self, path: str | Path) -> bool:
        """Read a .tfdoctor file (off the GUI thread) and show it on every page."""
        busy = self._busy_reason()
        if busy:
            self._say_here(busy, "warn")
            return False
        if not self._open_task.submit(investigation.load, str(path)):
            return False
        self.statusBar().showMessage(f"Opening {path}…")
        return True

    def _on_investigation_failed(self, exc: Exception) -> None:
        msg = str(exc) if isinstance(exc, investigation.InvestigationError) else repr(exc)
        self._say_here(f"Cannot open: {msg}", "error")

    def _say_here(self, text: str, kind: str = "info") -> None:
        """Where the user is looking: the open page's notice when it has one, and the bar."""
        notice = getattr(self.pages[self.current_step], "notice", None)
        if self.current_step == "start":
            notice = self.start_page.log_notice
        if notice is not None:
            notice.say(text, kind)
        self.statusBar().showMessage(text)

    def _on_investigation_opened(self, opened: investigation.Opened) -> None:
        if self._busy_reason():  # a run started while the file was read: keep the run
            self._say_here(self._busy_reason(), "warn")
            return
        s, new = self.session, opened.session
        s.door, s.target, s.logs, s.check = new.door, new.target, list(new.logs), new.check
        s.bench, s.telemetry, s.bench_options = new.bench, list(new.telemetry), new.bench_options
        s.watch, s.fix_log, s.verifications = new.watch, list(new.fix_log), list(new.verifications)
        s.forget()
        self.investigation_path = opened.path
        self.export_page.identity = opened.identity
        self.export_page.source = opened.path.name if opened.path else None
        self.start_page.show_session()
        if s.check is not None:
            self.check_page.show_report(s.check)
        else:
            self.check_page.show_nothing()
        self.bench_page.show_saved(s.bench, s.telemetry, s.watch)
        self.fix_page.reset()
        if opened.path is not None:
            self._remember(opened.path)
        self._update_title()
        step = "diagnosis" if (s.logs or s.bench or s.watch or s.check) else "start"
        self.go(step)
        said = f"Opened {opened.path.name if opened.path else 'the investigation'}"
        if opened.saved_at:
            said += f" (saved {opened.saved_at[:16].replace('T', ' ')})"
        if opened.notes:
            said += ". " + "; ".join(opened.notes)
        self.statusBar().showMessage(said)

    def save_investigation(self) -> bool:
        """Save to the file it came from (or was last saved to); else ask where."""
        if self.investigation_path is None:
            return self.save_investigation_as()
        return self.save_investigation_to(self.investigation_path)

    def save_investigation_as(self) -> bool:
        start = str(self.investigation_path or Path.home() / "investigation.tfdoctor")
        path, _ = QFileDialog.getSaveFileName(
            self, "Save the investigation", start, "tfdoctor investigations (*.tfdoctor)"
        )
        if not path:
            return False
        if not path.endswith(investigation.SUFFIX):
            path += investigation.SUFFIX
        return self.save_investigation_to(Path(path))

    def save_investigation_to(self, path: Path) -> bool:
        """Write the investigation off the GUI thread (a big log takes a second or two);
        False when a save is still running. The file is in place once `saving` is False."""
        self.start_page.commit_paste()
        snapshot = copy.copy(self.session)  # the lists copied: the pages may change them
        snapshot.logs, snapshot.telemetry = list(snapshot.logs), list(snapshot.telemetry)
        snapshot.fix_log = list(snapshot.fix_log)
        snapshot.verifications = list(snapshot.verifications)
        if not self._save_task.submit(investigation.save, snapshot, path):
            self._say_here("Still saving: wait for it", "warn")
            return False
        self._saving_to = path
        self.statusBar().showMessage(f"Saving the investigation to {path}…")
        return True

    @property
    def saving(self) -> bool:
        return self._save_task.busy

    def _on_saved(self, path: object) -> None:
        assert isinstance(path, Path)
        self.investigation_path = path
        self.export_page.source = path.name
        self._remember(path)
        self._update_title()
        self._say_here(f"Saved the investigation to {path}")

    def _on_save_failed(self, exc: Exception) -> None:
        where = self._saving_to
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        self._say_here(f"Cannot save {where}: {why}", "error")

    def _update_title(self) -> None:
        base = "tfdoctor — TensorFlow GPU troubleshooter"
        p = self.investigation_path
        self.setWindowTitle(f"{p.name} — {base}" if p is not None else base)

    def recent_files(self) -> list[str]:
        value = self.settings.value("files/recent") or []
        items = [value] if isinstance(value, str) else list(value)
        return [str(v) for v in items if v][:RECENT_FILES]

    def _remember(self, path: Path) -> None:
        p = str(path.resolve())
        files = [p] + [f for f in self.recent_files() if f != p]
        self.settings.setValue("files/recent", files[:RECENT_FILES])

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        files = self.recent_files()
        for f in files:
            action = self.recent_menu.addAction(Path(f).name)
            action.setToolTip(f)
            action.setStatusTip(f)
            action.triggered.connect(lambda _=False, p=f: self.open_investigation(p))
        self.recent_menu.setEnabled(bool(files))

    def _on_open_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Open an investigation",
            str(Path.home()),
            "tfdoctor investigations (*.tfdoctor);;Saved sessions (*.json);;All files (*)",
        )
        if path:
            self.open_investigation(path)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(investigation_url(u) for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        for url in event.mimeData().urls():
            if investigation_url(url):
                event.acceptProposedAction()
                self.open_investigation(url.toLocalFile())
                return

    # ------------------------------------------------------------------ settings
    def _restore_settings(self) -> None:
        geometry = self.settings.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)  # position and state on a real desktop
        size = self.settings.value("window/size")
        if isinstance(size, QSize) and size.isValid():
            self.resize(size)
        chosen = self.settings.value("view/theme")
        if chosen in theme.THEMES and chosen != "system":
            self.set_theme(str(chosen))
        python = self.settings.value("target/python")
        if isinstance(python, str) and python:
            label = str(self.settings.value("target/label") or python)
            t = Target(python=python, label=label, kind="path")
            self.start_page.add_target(t, select=True)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/size", self.size())
        if self.session.target is not None:
            self.settings.setValue("target/python", self.session.target.python)
            self.settings.setValue("target/label", self.session.target.label)
        self.hide()  # gone at once; what runs is stopped below
        self._save_task.wait(60)  # a save under way finishes: the file is the user's work
        self.check_page.shutdown()
        self.bench_page.shutdown()
        self.fix_page.shutdown()
        super().closeEvent(event)
