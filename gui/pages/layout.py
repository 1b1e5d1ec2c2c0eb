"""The layout every wizard page starts with: margins, a title and a subtitle."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


def page_layout(parent: QWidget, title: str, subtitle: str) -> QVBoxLayout:
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


class Notice(QLabel):
    """A message shown where the user is looking (under the control it is about), not only in
    the status bar: info, warn or error, word-wrapped, hidden while there is nothing to say."""

    KINDS = ("info", "warn", "error")

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("pageNotice")
        self.setWordWrap(True)
        self.setProperty("kind", "info")
        self.hide()

    def say(self, text: str, kind: str = "info") -> None:
        if kind not in self.KINDS:
            raise ValueError(f"notice kind {kind!r}")
        self.setText(text)
        if self.property("kind") != kind:
            self.setProperty("kind", kind)
            self.style().unpolish(self)
            self.style().polish(self)
        self.setVisible(bool(text))

    def clear_notice(self) -> None:
        self.clear()
        self.hide()

    @property
    def kind(self) -> str:
        return str(self.property("kind"))


def set_enabled(button: QWidget, enabled: bool, why_not: str = "") -> None:
    """Enable a control, or disable it with the reason as its tooltip: hovering a disabled
    button says why it is disabled, not what it would do. Its own tooltip returns with it."""
    tip = button.property("enabledTip")
    if tip is None or (button.isEnabled() and button.toolTip() != tip):
        tip = button.toolTip()  # the tooltip it has while enabled (set since, or at build)
        button.setProperty("enabledTip", tip)
    button.setEnabled(enabled)
    button.setProperty("whyDisabled", "" if enabled else why_not)
    button.setToolTip(str(tip) if enabled or not why_not else why_not)
