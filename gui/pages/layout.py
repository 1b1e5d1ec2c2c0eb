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
