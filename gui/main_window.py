"""The main window: a step list on the left (the seed of the wizard), the pages on the right."""

from __future__ import annotations

import logging

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core import __version__
from tfdoctor.gui import assets
from tfdoctor.gui.pages.bench_page import BenchPage
from tfdoctor.gui.pages.check_page import CheckPage

log = logging.getLogger(__name__)

LATER = "Coming in a later version"

# (title, tooltip, available now)
STEPS: list[tuple[str, str, bool]] = [
    (
        "Environment checks",
        "Inspect a Python environment: TensorFlow, CUDA libraries, driver, GPUs, memory",
        True,
    ),
    (
        "Reproduce",
        "Run a supervised training benchmark and watch VRAM, TF memory and RAM live",
        True,
    ),
    ("Diagnosis", f"{LATER}: explain a crash from its logs and exit", False),
    ("Fix", f"{LATER}: apply reversible fixes and verify them", False),
    ("Export", f"{LATER}: export a fix script and a shareable report", False),
]


class MainWindow(QMainWindow):
    """The app window. With `autostart`, lists environments and checks this Python at once."""

    def __init__(self, parent: QWidget | None = None, *, autostart: bool = True) -> None:
        super().__init__(parent)
        self.setWindowTitle("tfdoctor — TensorFlow GPU troubleshooter")
        self.setWindowIcon(assets.app_icon())
        self.resize(1100, 750)

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
        for i, (title, tip, enabled) in enumerate(STEPS, 1):
            item = QListWidgetItem(f"{i}.  {title}")
            item.setToolTip(tip)
            if not enabled:
                item.setFlags(Qt.ItemFlag.NoItemFlags)  # shown, greyed, not selectable
            self.steps.addItem(item)
        col.addWidget(self.steps, 1)
        version = QLabel(f"version {__version__}", side)
        version.setObjectName("versionLabel")
        col.addWidget(version)
        row.addWidget(side)

        self.stack = QStackedWidget(central)
        self.check_page = CheckPage(self.stack)
        self.stack.addWidget(self.check_page)
        self.bench_page = BenchPage(self.stack, target_provider=self.check_page.selected_target)
        self.stack.addWidget(self.bench_page)
        row.addWidget(self.stack, 1)
        self.setCentralWidget(central)

        self.steps.setCurrentRow(0)
        self.steps.currentRowChanged.connect(self._on_steps_row_changed)
        self.check_page.sig_status_changed.connect(self._on_page_status_changed)
        self.bench_page.sig_status_changed.connect(self._on_page_status_changed)
        self.statusBar().showMessage("Ready.")

        if autostart:
            # After the window is shown: the check itself runs in core threads.
            QTimer.singleShot(0, self, self._autostart)

    def _autostart(self) -> None:
        self.check_page.refresh_targets()
        self.check_page.start_check()

    def _on_steps_row_changed(self, row: int) -> None:
        if 0 <= row < self.stack.count():
            self.stack.setCurrentIndex(row)
            if self.stack.currentWidget() is self.bench_page:
                self.bench_page.refresh_target()

    def _on_page_status_changed(self, text: str) -> None:
        self.statusBar().showMessage(text)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.check_page.shutdown()
        self.bench_page.shutdown()
        super().closeEvent(event)
