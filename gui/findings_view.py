"""The findings list: expandable cards, kept sorted worst first as findings stream in."""

from __future__ import annotations

import bisect
import html
import logging
from collections import Counter

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QFontDatabase, QKeyEvent, QKeySequence, QMouseEvent
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from tfdoctor.core.checks import GROUP_TITLES
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Finding, Severity
from tfdoctor.gui.icons import SEVERITY_COLOURS, SEVERITY_TOOLTIPS, SEVERITY_WORDS, severity_pixmap

log = logging.getLogger(__name__)


EVIDENCE_SHOWN = 30  # more lines than this are summarised; the report export keeps them all


def _fix_titles() -> dict[str, tuple[str, str]]:
    try:
        return {fid: (fx.title, fx.summary) for fid, fx in catalog.fixes().items()}
    except Exception:  # a broken catalog must not hide the findings themselves
        log.warning("could not load the fix catalog", exc_info=True)
        return {}


def _break_long_tokens(text: str) -> str:
    """HTML for monospace evidence: escaped, with break opportunities after / _ = , in long words.

    A QLabel only wraps at spaces, so a long path would otherwise widen the whole list.
    """
    out = []
    for word in text.split(" "):
        esc = html.escape(word)
        if len(word) > 40:
            for ch in ("/", "_", "=", ",", ":"):
                esc = esc.replace(ch, ch + "&#8203;")
        out.append(esc)
    return " ".join(out)


def sort_key(f: Finding) -> tuple[int, str, str]:
    """Worst first, then by group and id: the same order as core.model.sort_findings."""
    return (-int(f.severity), f.group, f.id)


class _CardHeader(QWidget):
    """The always-visible row of a card; click, Enter or Space toggles the details."""

    sig_toggle_requested = Signal()
    sig_copy_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        copy = QAction("Copy", self)
        copy.setShortcut(QKeySequence.StandardKey.Copy)
        copy.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        copy.triggered.connect(self.sig_copy_requested)
        self.addAction(copy)

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if event.button() == Qt.MouseButton.LeftButton:
            self.sig_toggle_requested.emit()
            event.accept()
            return
        super().mousePressEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            self.sig_toggle_requested.emit()
            event.accept()
            return
        super().keyPressEvent(event)


class FindingCard(QFrame):
    """One finding: status icon + title; expands to explanation, evidence and fixes."""

    def __init__(
        self,
        finding: Finding,
        fixes: dict[str, tuple[str, str]] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.finding = finding
        sev = finding.severity
        self.setObjectName("findingCard")
        self.setProperty("severity", sev.label)
        # at least as tall as its wrapped text needs at its width (Maximum capped it at a
        # size hint made for another width, and cut the explanation's last line)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)

        self.header = _CardHeader(self)
        self.header.setObjectName("findingHeader")
        self.header.setToolTip("Click to show or hide the details")
        row = QHBoxLayout(self.header)
        row.setContentsMargins(8, 7, 10, 7)
        row.setSpacing(8)
        self.arrow = QToolButton(self.header)
        self.arrow.setObjectName("findingArrow")
        self.arrow.setAutoRaise(True)
        self.arrow.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.arrow.setArrowType(Qt.ArrowType.RightArrow)
        self.arrow.clicked.connect(self.toggle)
        row.addWidget(self.arrow, 0, Qt.AlignmentFlag.AlignTop)
        self.icon = QLabel(self.header)
        self.icon.setPixmap(severity_pixmap(sev, 20))
        self.icon.setToolTip(SEVERITY_TOOLTIPS[sev])
        self.icon.setAccessibleName(SEVERITY_WORDS[sev][0])
        row.addWidget(self.icon, 0, Qt.AlignmentFlag.AlignTop)
        self.title = QLabel(finding.title, self.header)
        self.title.setObjectName("findingTitle")
        self.title.setWordWrap(True)
        self.title.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        row.addWidget(self.title, 1)
        self.tag = QLabel(GROUP_TITLES.get(finding.group, finding.group.title()), self.header)
        self.tag.setObjectName("findingTag")
        self.tag.setToolTip(f"Check id: {finding.id}")
        row.addWidget(self.tag, 0, Qt.AlignmentFlag.AlignTop)
        outer.addWidget(self.header)

        self.body = QWidget(self)
        self.body.setObjectName("findingBody")
        body = QVBoxLayout(self.body)
        body.setContentsMargins(64, 0, 14, 12)
        body.setSpacing(6)
        self.explanation = QLabel(finding.explanation, self.body)
        self.explanation.setObjectName("findingExplanation")
        self.explanation.setWordWrap(True)
        self.explanation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        body.addWidget(self.explanation)

        self.evidence: QLabel | None = None
        if finding.evidence:
            body.addWidget(self._section("Evidence"))
            self.evidence = QLabel(self.body)
            self.evidence.setObjectName("findingEvidence")
            self.evidence.setTextFormat(Qt.TextFormat.RichText)
            self.evidence.setWordWrap(True)
            self.evidence.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
            self.evidence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.evidence.setText(self._evidence_html(finding))
            self.evidence.setToolTip(
                "What tfdoctor saw. Lines numbered 'line N:' are from the output of the "
                "TensorFlow probe run in the target Python."
            )
            body.addWidget(self.evidence)

        self.fixes: QLabel | None = None
        if finding.fixes:
            body.addWidget(self._section("What to do"))
            known = fixes if fixes is not None else _fix_titles()
            self.fixes = QLabel(self.body)
            self.fixes.setObjectName("findingFixes")
            self.fixes.setTextFormat(Qt.TextFormat.RichText)
            self.fixes.setWordWrap(True)
            self.fixes.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.fixes.setText(self._fixes_html(finding, known))
            self.fixes.setToolTip("Fix ids are the names `tfdoctor` uses for each fix.")
            body.addWidget(self.fixes)

        outer.addWidget(self.body)
        self.body.setVisible(False)
        self.header.sig_toggle_requested.connect(self.toggle)
        self.header.sig_copy_requested.connect(self.copy_to_clipboard)

    @staticmethod
    def _section(text: str) -> QLabel:
        label = QLabel(text)
        label.setObjectName("findingSection")
        return label

    @staticmethod
    def _evidence_html(finding: Finding) -> str:
        rows = []
        in_context = any(e.source == "context" for e in finding.evidence)
        for e in finding.evidence[:EVIDENCE_SHOWN]:
            where = f'<span style="color:#777">line {e.line}:</span> ' if e.line else ""
            text = _break_long_tokens(e.text)
            if e.source == "context":  # the lines around a matched one, greyed
                rows.append(f'<span style="color:#8a94a3">{where}{text}</span>')
            elif in_context and e.line:  # the matched line, highlighted among them
                rows.append(f"{where}<b>{text}</b>")
            else:
                rows.append(f"{where}{text}")
        more = len(finding.evidence) - EVIDENCE_SHOWN
        if more > 0:
            rows.append(f'<span style="color:#777">… and {more} more</span>')
        return "<br>".join(rows)

    @staticmethod
    def _fixes_html(finding: Finding, known: dict[str, tuple[str, str]]) -> str:
        rows = []
        for fid in finding.fixes:
            title, summary = known.get(fid, (fid, ""))
            rows.append(
                '<p style="margin:0">→ '
                f"<b>{html.escape(title)}</b> "
                f'<span style="color:#777; font-family:monospace">[{html.escape(fid)}]</span></p>'
            )
            if summary:
                rows.append(
                    f'<p style="margin:0 0 4px 16px; color:#4a5461">{html.escape(summary)}</p>'
                )
        return "".join(rows)

    @property
    def expanded(self) -> bool:
        return not self.body.isHidden()

    def set_expanded(self, on: bool) -> None:
        self.body.setVisible(on)
        self.arrow.setArrowType(Qt.ArrowType.DownArrow if on else Qt.ArrowType.RightArrow)

    def toggle(self) -> None:
        self.set_expanded(not self.expanded)

    def as_text(self) -> str:
        """The whole finding as plain text: for a forum post or a bug report."""
        f = self.finding
        lines = [f"[{f.severity.label}] {f.title}", "", f.explanation]
        if f.evidence:
            lines += ["", "Evidence:"]
            for e in f.evidence:
                where = f"{e.source}:{e.line}: " if e.line else ""
                lines.append(f"  {where}{e.text}")
        if f.fixes:
            known = _fix_titles()
            lines += ["", "What to do:"]
            lines += [f"  - {known.get(fid, (fid, ''))[0]} [{fid}]" for fid in f.fixes]
        return "\n".join(lines) + "\n"

    def copy_to_clipboard(self) -> None:
        QApplication.clipboard().setText(self.as_text())


class FindingsView(QScrollArea):
    """A scrolling column of FindingCards, inserted in sorted position as they arrive (worst
    first), or, with `ranked`, in the order given (best explanation first: the severity is
    shown, not sorted on), under section headings."""

    sig_counts_changed = Signal()

    def __init__(self, parent: QWidget | None = None, *, ranked: bool = False) -> None:
        super().__init__(parent)
        self._ranked = ranked
        self._headings: list[QLabel] = []
        self.setObjectName("findingsView")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self._inner = QWidget()
        self._inner.setObjectName("findingsInner")
        # the scroll area sizes the cards by their height at the view's width (word-wrapped
        # text): without this it used a height from an older width, one line short after the
        # window narrowed
        policy = self._inner.sizePolicy()
        policy.setHeightForWidth(True)
        self._inner.setSizePolicy(policy)
        self._column = QVBoxLayout(self._inner)
        self._column.setContentsMargins(0, 0, 6, 0)
        self._column.setSpacing(6)
        self.placeholder = QLabel("", self._inner)
        self.placeholder.setObjectName("findingsPlaceholder")
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._column.addWidget(self.placeholder)
        self._column.addStretch(1)
        self.setWidget(self._inner)
        self._cards: list[FindingCard] = []
        self._keys: list[tuple[int, str, str, int]] = []
        self._arrivals = 0
        self._header_count = 0  # widgets set above the cards (set_header)
        self._show_passed = False
        self._placeholder_text = "Findings appear here as each check finishes."
        self._fixes: dict[str, tuple[str, str]] | None = None
        self._update_placeholder()

    # -- public

    @property
    def show_passed(self) -> bool:
        return self._show_passed

    def set_show_passed(self, on: bool) -> None:
        self._show_passed = on
        for card in self._cards:
            card.setVisible(self._wanted(card.finding))
        self._update_placeholder()

    def set_placeholder(self, text: str) -> None:
        """What to say when no card is visible (idle, checking, or everything passed)."""
        self._placeholder_text = text
        self._update_placeholder()

    def placeholder_text(self) -> str:
        return self._placeholder_text

    def add_finding(self, finding: Finding) -> FindingCard:
        """Insert a card in worst-first order; errors open expanded."""
        if self._fixes is None:
            self._fixes = _fix_titles()
        # Arrival order breaks exact ties so equal keys never reorder on screen.
        key = (*sort_key(finding), self._arrivals)
        self._arrivals += 1
        pos = len(self._keys) if self._ranked else bisect.bisect(self._keys, key)
        # No parent yet: the layout adopts the card and shows it once it has a place, so it
        # never flashes at (0, 0) over its neighbours before the next layout pass.
        card = FindingCard(finding, self._fixes)
        card.set_expanded(finding.severity >= Severity.ERROR)
        if not self._wanted(finding):
            card.hide()  # explicitly hidden: the layout will not show it
        self._keys.insert(pos, key)
        self._cards.insert(pos, card)
        # the headers, then the placeholder sit first; a ranked view's headings sit between
        # its cards
        self._column.insertWidget(pos + self._header_count + 1 + len(self._headings), card)
        self._update_placeholder()
        self.sig_counts_changed.emit()
        return card

    def set_header(self, widget: QWidget) -> None:
        """Put a widget above the cards that scrolls with them (one scroll area, not two)."""
        widget.setParent(self._inner)
        self._column.insertWidget(self._header_count, widget)
        self._header_count += 1

    def add_heading(self, text: str) -> QLabel:
        """A section heading after the cards so far (a ranked view: cards keep their order)."""
        if not self._ranked:
            raise ValueError("headings need a ranked view: a sorted one moves cards past them")
        label = QLabel(text, self._inner)
        label.setObjectName("findingsHeading")
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)
        self._column.insertWidget(self._column.count() - 1, label)  # before the stretch
        self._headings.append(label)
        return label

    def headings(self) -> list[str]:
        return [h.text() for h in self._headings]

    def clear(self) -> None:
        for w in [*self._cards, *self._headings]:
            self._column.removeWidget(w)
            w.hide()  # at once; deleted when Qt can
            w.deleteLater()
        self._headings.clear()
        self._cards.clear()
        self._keys.clear()
        self._arrivals = 0
        self._update_placeholder()
        self.sig_counts_changed.emit()

    def cards(self) -> list[FindingCard]:
        """All cards in display order (hidden passed ones included)."""
        return list(self._cards)

    def findings(self) -> list[Finding]:
        return [c.finding for c in self._cards]

    def visible_findings(self) -> list[Finding]:
        return [c.finding for c in self._cards if self._wanted(c.finding)]

    def card(self, finding_id: str) -> FindingCard | None:
        return next((c for c in self._cards if c.finding.id == finding_id), None)

    def counts(self) -> Counter[Severity]:
        return Counter(c.finding.severity for c in self._cards)

    # -- internals

    def _wanted(self, f: Finding) -> bool:
        return self._show_passed or f.severity is not Severity.OK

    def _update_placeholder(self) -> None:
        self.placeholder.setText(self._placeholder_text)
        self.placeholder.setVisible(not any(self._wanted(c.finding) for c in self._cards))


def summary_text(counts: Counter[Severity]) -> str:
    """'2 errors, 3 warnings, 8 passed' (worst first; zero counts left out)."""
    parts = []
    for sev in sorted(Severity, reverse=True):
        n = counts.get(sev, 0)
        if n:
            one, many = SEVERITY_WORDS[sev]
            parts.append(f"{n} {one if n == 1 else many}")
    return ", ".join(parts) if parts else "no findings yet"


def summary_html(counts: Counter[Severity]) -> str:
    """The summary line with each count in its severity's colour."""
    parts = []
    for sev in sorted(Severity, reverse=True):
        n = counts.get(sev, 0)
        if n:
            one, many = SEVERITY_WORDS[sev]
            colour = SEVERITY_COLOURS[sev]
            parts.append(
                f'<span style="color:{colour}; font-weight:600">{n} {one if n == 1 else many}'
                "</span>"
            )
    return ", ".join(parts) if parts else "no findings yet"
