"""Severity colours and icons, drawn with QPainter so they look the same on every platform."""

from __future__ import annotations

import functools

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QIcon, QPainter, QPainterPath, QPen, QPixmap, QPolygonF

from tfdoctor.core.model import Severity

# Colour-blind-safe enough: each severity also has its own shape and glyph.
SEVERITY_COLOURS: dict[Severity, str] = {
    Severity.ERROR: "#c62828",
    Severity.WARNING: "#e08a00",
    Severity.UNKNOWN: "#7e57c2",
    Severity.INFO: "#1e6fd9",
    Severity.OK: "#2e7d32",
}

# Plain words for the summary line and tooltips (singular, plural).
SEVERITY_WORDS: dict[Severity, tuple[str, str]] = {
    Severity.ERROR: ("error", "errors"),
    Severity.WARNING: ("warning", "warnings"),
    Severity.UNKNOWN: ("could not be checked", "could not be checked"),
    Severity.INFO: ("note", "notes"),
    Severity.OK: ("passed", "passed"),
}

SEVERITY_TOOLTIPS: dict[Severity, str] = {
    Severity.ERROR: "Error: this will break TensorFlow on the GPU; fix it first.",
    Severity.WARNING: "Warning: likely to cause crashes, slowdowns or out-of-memory errors.",
    Severity.UNKNOWN: "Could not check: tfdoctor could not find out (missing tool, no permission).",
    Severity.INFO: "Note: worth knowing, nothing to fix.",
    Severity.OK: "Passed: this check found nothing wrong.",
}


def severity_colour(sev: Severity) -> QColor:
    return QColor(SEVERITY_COLOURS[sev])


def severity_pixmap(sev: Severity, size: int = 20, dpr: float = 2.0) -> QPixmap:
    """A coloured badge: red circle ✕, amber triangle !, purple circle ?, blue circle i, green ✓."""
    px = QPixmap(int(size * dpr), int(size * dpr))
    px.setDevicePixelRatio(dpr)
    px.fill(Qt.GlobalColor.transparent)
    p = QPainter(px)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    colour = severity_colour(sev)
    s = float(size)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(colour)
    if sev is Severity.WARNING:
        tri = QPolygonF(
            [QPointF(s / 2, s * 0.06), QPointF(s * 0.97, s * 0.92), QPointF(s * 0.03, s * 0.92)]
        )
        p.drawPolygon(tri)
    else:
        p.drawEllipse(QRectF(s * 0.04, s * 0.04, s * 0.92, s * 0.92))

    pen = QPen(QColor("white"), s * 0.13)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    if sev is Severity.ERROR:
        a, b = s * 0.33, s * 0.67
        p.drawLine(QPointF(a, a), QPointF(b, b))
        p.drawLine(QPointF(a, b), QPointF(b, a))
    elif sev is Severity.OK:
        path = QPainterPath(QPointF(s * 0.28, s * 0.52))
        path.lineTo(QPointF(s * 0.44, s * 0.68))
        path.lineTo(QPointF(s * 0.73, s * 0.35))
        p.drawPath(path)
    elif sev is Severity.WARNING:
        p.drawLine(QPointF(s / 2, s * 0.38), QPointF(s / 2, s * 0.62))
        p.drawPoint(QPointF(s / 2, s * 0.79))
    elif sev is Severity.INFO:
        p.drawPoint(QPointF(s / 2, s * 0.3))
        p.drawLine(QPointF(s / 2, s * 0.47), QPointF(s / 2, s * 0.72))
    else:  # UNKNOWN: a question mark; a font glyph reads better than a drawn curve here
        font = QFont()
        font.setBold(True)
        font.setPixelSize(int(s * 0.72))
        p.setFont(font)
        p.setPen(QColor("white"))
        p.drawText(QRectF(0, 0, s, s), Qt.AlignmentFlag.AlignCenter, "?")
    p.end()
    return px


@functools.cache
def severity_icon(sev: Severity) -> QIcon:
    icon = QIcon()
    for size in (16, 20, 24, 32):
        icon.addPixmap(severity_pixmap(sev, size, dpr=1.0))
    return icon
