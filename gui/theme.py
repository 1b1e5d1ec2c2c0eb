"""The look: light, dark or the desktop's (View > Theme), and form fields that keep their
values while the user scrolls past them."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication, QWidget

from tfdoctor.gui import assets

THEMES = ("system", "light", "dark")


def is_dark(app: QApplication) -> bool:
    """Whether the desktop asks for a dark look (Qt 6.5+ colour scheme hint)."""
    hints = app.styleHints()
    scheme = getattr(hints, "colorScheme", None)
    return scheme is not None and scheme() == Qt.ColorScheme.Dark


def chosen(app: QApplication) -> str:
    """The theme the user picked: system (the default), light or dark."""
    value = app.property("tfdoctorTheme")
    return value if value in THEMES else "system"


def set_theme(app: QApplication, name: str) -> None:
    """Light, dark, or the desktop's look from now on (an unknown name means the desktop's)."""
    name = name if name in THEMES else "system"
    app.setProperty("tfdoctorTheme", name)
    apply_colour_scheme(app, None if name == "system" else name == "dark")


def follow_desktop(app: QApplication) -> None:
    """The desktop switched light/dark: follow it unless the user picked a theme."""
    if chosen(app) == "system":
        apply_colour_scheme(app)


def apply_colour_scheme(app: QApplication, dark: bool | None = None) -> None:
    """Fusion's palette and the stylesheet for a light or a dark desktop; plots follow."""
    dark = is_dark(app) if dark is None else dark
    app.setPalette(_dark_palette() if dark else app.style().standardPalette())
    app.setStyleSheet(assets.stylesheet(dark=dark))
    app.setProperty("tfdoctorDark", dark)
    import pyqtgraph as pg

    pg.setConfigOptions(
        background="#1e242b" if dark else "w", foreground="#d5dce4" if dark else "#444"
    )


def _dark_palette() -> QPalette:
    p = QPalette()
    base, window, text = QColor("#1e242b"), QColor("#262d36"), QColor("#e6ebf1")
    for role, colour in (
        (QPalette.ColorRole.Window, window),
        (QPalette.ColorRole.WindowText, text),
        (QPalette.ColorRole.Base, base),
        (QPalette.ColorRole.AlternateBase, window),
        (QPalette.ColorRole.Text, text),
        (QPalette.ColorRole.Button, QColor("#2f3742")),
        (QPalette.ColorRole.ButtonText, text),
        (QPalette.ColorRole.ToolTipBase, QColor("#2f3742")),
        (QPalette.ColorRole.ToolTipText, text),
        (QPalette.ColorRole.Highlight, QColor("#2f6fc4")),
        (QPalette.ColorRole.HighlightedText, QColor("#ffffff")),
        (QPalette.ColorRole.PlaceholderText, QColor("#8a94a3")),
    ):
        p.setColor(role, colour)
    grey = QColor("#6e7885")
    for role in (
        QPalette.ColorRole.Text,
        QPalette.ColorRole.ButtonText,
        QPalette.ColorRole.WindowText,
    ):
        p.setColor(QPalette.ColorGroup.Disabled, role, grey)
    return p


class _WheelGuard(QObject):
    """A spin box or a combo box takes the mouse wheel only when it has the focus: scrolling
    a form past it scrolls the form and never changes a value. The ignored event goes on to
    the parent (the scroll area), as Qt passes on any wheel event nobody accepted."""

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Wheel and isinstance(obj, QWidget) and not obj.hasFocus():
            event.ignore()
            return True
        return False


W = TypeVar("W", bound=QWidget)
WHEEL_GUARDED = "tfdoctorWheelGuard"  # a property on every guarded field


def guard_wheel(widget: W) -> W:
    """Install the wheel guard on this spin box or combo box only (an application-wide
    filter would run Python for every event of every object); returns the field."""
    widget.installEventFilter(_WheelGuard(widget))
    widget.setProperty(WHEEL_GUARDED, True)
    return widget
