"""The Python picker the Start and Check pages share: the interpreters found, and "Other…"."""

from __future__ import annotations

import os

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QStyle,
    QToolButton,
    QWidget,
)

from tfdoctor.core.model import Target
from tfdoctor.gui import theme

TARGET_ROLE = Qt.ItemDataRole.UserRole + 1
PICKED_LABEL = "Python picked by you"


def target_key(t: Target) -> tuple[str, tuple[tuple[str, str], ...], int | None, str]:
    """Two entries are the same target when these match."""
    return (t.python, t.env, t.pid, t.name)


def target_tooltip(t: Target) -> str:
    lines = [t.python]
    if t.env:
        lines.append("with " + " ".join(f"{k}={v}" for k, v in t.env))
    if t.pid is not None:
        lines.append(f"running kernel, PID {t.pid}")
    return "\n".join(lines)


class TargetPicker(QWidget):
    """A label, the combo box of targets, an optional refresh button, and "Other Python…"."""

    sig_target_changed = Signal(object)  # the selected Target, or None (a prompt is shown)

    def __init__(
        self,
        label: str,
        parent: QWidget | None = None,
        *,
        refresh: bool = False,
        other_tip: str = "Pick a Python interpreter file yourself (e.g. ~/venvs/tf/bin/python)",
    ) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(6)
        self.label = QLabel(label, self)
        self.combo = theme.guard_wheel(QComboBox(self))
        self.combo.setObjectName("targetCombo")
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.combo.setMinimumContentsLength(30)
        self.combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.label.setBuddy(self.combo)
        row.addWidget(self.label)
        row.addWidget(self.combo, 1)
        self.refresh_button: QToolButton | None = None
        if refresh:
            self.refresh_button = QToolButton(self)
            self.refresh_button.setIcon(
                self.style().standardIcon(QStyle.StandardPixmap.SP_BrowserReload)
            )
            self.refresh_button.setToolTip("Look again for Jupyter kernels and conda environments")
            row.addWidget(self.refresh_button)
        self.other_button = QPushButton("Other Python…", self)
        self.other_button.setToolTip(other_tip)
        row.addWidget(self.other_button)
        self.other_button.clicked.connect(self._on_other_button_clicked)
        self.combo.currentIndexChanged.connect(self._on_combo_changed)

    def selected_target(self) -> Target | None:
        data = self.combo.currentData(TARGET_ROLE)
        return data if isinstance(data, Target) else None

    def find_target(self, target: Target) -> int:
        key = target_key(target)
        for i in range(self.combo.count()):
            t = self.combo.itemData(i, TARGET_ROLE)
            if isinstance(t, Target) and target_key(t) == key:
                return i
        return -1

    def add_target(self, target: Target, select: bool = True) -> int:
        """Add a target (or find it there) and optionally select it; its index."""
        idx = self.find_target(target)
        added = idx < 0
        if added:
            idx = self.combo.count()
            self.combo.addItem(f"{target.label} — {target.python}")
            self.combo.setItemData(idx, target, TARGET_ROLE)
            self.combo.setItemData(idx, target_tooltip(target), Qt.ItemDataRole.ToolTipRole)
        if select:
            before = self.combo.currentIndex()
            self.combo.setCurrentIndex(idx)
            if added and before == idx:  # it became current inside addItem, before its data
                self._on_combo_changed(idx)
        return idx

    def reset_targets(self, targets: list[Target]) -> None:
        """List `targets`, keeping the interpreters picked by hand and the selection."""
        selected = self.selected_target()
        picked_by_hand = [
            self.combo.itemData(i, TARGET_ROLE)
            for i in range(self.combo.count())
            if getattr(self.combo.itemData(i, TARGET_ROLE), "kind", "") == "path"
        ]
        self.combo.blockSignals(True)
        try:
            self.combo.clear()
            for t in [*targets, *picked_by_hand]:
                self.add_target(t, select=False)
            idx = self.find_target(selected) if selected is not None else -1
            self.combo.setCurrentIndex(max(idx, 0))
        finally:
            self.combo.blockSignals(False)
        self._on_combo_changed(self.combo.currentIndex())

    def _on_combo_changed(self, _index: int) -> None:
        self.sig_target_changed.emit(self.selected_target())

    def _on_other_button_clicked(self) -> None:
        current = self.selected_target()
        start = os.path.dirname(current.python) if current else os.path.expanduser("~")
        path, _ = QFileDialog.getOpenFileName(
            self, "Pick the Python interpreter your notebook uses", start, "All files (*)"
        )
        if path:
            self.add_target(Target(python=path, label=PICKED_LABEL, kind="path"))
