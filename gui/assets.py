"""Files in resources/ (icon, stylesheet), with drawn fallbacks when the folder is not shipped."""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPen, QPixmap

log = logging.getLogger(__name__)

# gui/ and resources/ are siblings in the source tree (and in an editable install).
RESOURCES = Path(__file__).resolve().parent.parent / "resources"
ICON_FILE = RESOURCES / "tfdoctor.svg"
STYLE_FILE = RESOURCES / "style.qss"
DARK_STYLE_FILE = RESOURCES / "style-dark.qss"


def app_icon() -> QIcon:
    """The app icon from resources/tfdoctor.svg, or the same picture drawn here."""
    if ICON_FILE.is_file():
        icon = QIcon(str(ICON_FILE))
        if not icon.isNull() and not icon.pixmap(64, 64).isNull():
            return icon
        log.info("could not render %s (no SVG image plugin?); drawing the icon", ICON_FILE)
    return QIcon(_drawn_icon(256))


def _drawn_icon(size: int) -> QPixmap:
    px = QPixmap(size, size)
    px.fill(Qt.GlobalColor.transparent)
    k = size / 64.0
    p = QPainter(px)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor("#1d3557"))
    p.drawRoundedRect(QRectF(2 * k, 2 * k, 60 * k, 60 * k), 13 * k, 13 * k)
    p.setBrush(QColor("#264b73"))
    p.setPen(QPen(QColor("#8ecae6"), 2.5 * k))
    p.drawRoundedRect(QRectF(14 * k, 15 * k, 36 * k, 34 * k), 5 * k, 5 * k)
    pen = QPen(QColor("#ff8c42"), 4.5 * k)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    pen.setJoinStyle(Qt.PenJoinStyle.RoundJoin)
    p.setPen(pen)
    pts = [(6, 33), (19, 33), (24, 24), (30, 42), (36, 19), (41, 33), (58, 33)]
    p.drawPolyline([QPointF(x * k, y * k) for x, y in pts])
    p.end()
    return px


def stylesheet(dark: bool = False) -> str:
    """The app stylesheet (with the dark overrides for a dark desktop), or '' (the plain
    Fusion look) when the file is missing."""
    try:
        text = STYLE_FILE.read_text(encoding="utf-8")
    except OSError:
        log.info("no stylesheet at %s; using the default look", STYLE_FILE)
        return ""
    if dark:
        try:
            text += "\n" + DARK_STYLE_FILE.read_text(encoding="utf-8")
        except OSError:
            log.info("no dark stylesheet at %s", DARK_STYLE_FILE)
    return text
