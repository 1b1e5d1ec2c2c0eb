"""The findings list keeps worst first as findings stream in; errors open; passed ones filter."""

from __future__ import annotations

from collections import Counter

from PySide6.QtCore import Qt

from tfdoctor.core.model import Evidence, Finding, Severity
from tfdoctor.gui.findings_view import FindingsView, summary_text

S = Severity


def finding(fid: str, sev: Severity, group: str = "gpu", **kw) -> Finding:  # type: ignore[no-untyped-def]
    return Finding(fid, sev, f"title of {fid}", f"explanation of {fid}", group=group, **kw)


def test_cards_stay_sorted_worst_first_as_they_arrive(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = FindingsView()
    qtbot.addWidget(view)
    arrivals = [
        finding("a.info", S.INFO),
        finding("b.ok", S.OK),
        finding("c.error", S.ERROR),
        finding("d.warning", S.WARNING),
        finding("e.unknown", S.UNKNOWN),
        finding("f.error", S.ERROR, group="cuda"),
    ]
    for f in arrivals:
        view.add_finding(f)
        shown = [x.severity for x in view.findings()]
        assert shown == sorted(shown, reverse=True)
    assert [f.id for f in view.findings()] == [
        "f.error",  # same severity: group order (cuda < gpu), as core.model.sort_findings
        "c.error",
        "d.warning",
        "e.unknown",
        "a.info",
        "b.ok",
    ]
    assert view.card("c.error").expanded  # type: ignore[union-attr]
    assert not view.card("d.warning").expanded  # type: ignore[union-attr]


def test_passed_checks_hidden_until_asked_for(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = FindingsView()
    qtbot.addWidget(view)
    view.show()
    view.add_finding(finding("ok1", S.OK))
    assert view.card("ok1").isHidden()  # type: ignore[union-attr]
    assert view.placeholder.isVisible()  # nothing to show yet: the placeholder says why
    view.set_show_passed(True)
    assert not view.card("ok1").isHidden()  # type: ignore[union-attr]
    assert view.placeholder.isHidden()
    view.add_finding(finding("ok2", S.OK))
    assert [f.id for f in view.visible_findings()] == ["ok1", "ok2"]


def test_card_shows_explanation_evidence_lines_and_fixes(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = FindingsView()
    qtbot.addWidget(view)
    f = finding(
        "x",
        S.ERROR,
        evidence=(
            Evidence("gpu0.memory_free_mib = 120", fact="gpu0.memory_free_mib"),
            Evidence("W tensorflow/core/bfc_allocator.cc:479] <allocator> ran out", line=42),
        ),
        fixes=("memory_growth", "no_such_fix_id"),
    )
    card = view.add_finding(f)
    assert card.expanded
    assert card.explanation.text() == "explanation of x"
    assert card.explanation.wordWrap()
    ev = card.evidence.text()  # type: ignore[union-attr]
    assert "line 42:" in ev
    assert "&lt;allocator&gt;" in ev  # evidence is escaped, never interpreted as HTML
    assert card.evidence.font().fixedPitch() or "mono" in card.evidence.font().family().lower()  # type: ignore[union-attr]
    fixes = card.fixes.text()  # type: ignore[union-attr]
    assert "[memory_growth]" in fixes and "GPU memory" in fixes  # the catalog's title
    assert "[no_such_fix_id]" in fixes  # an unknown id still shows
    card.toggle()
    assert not card.expanded


def test_summary_names_counts_worst_first() -> None:
    counts = Counter({S.OK: 8, S.ERROR: 2, S.WARNING: 3, S.UNKNOWN: 1, S.INFO: 1})
    assert summary_text(counts) == (
        "2 errors, 3 warnings, 1 could not be checked, 1 note, 8 passed"
    )
    assert summary_text(Counter()) == "no findings yet"


def test_card_header_toggles_from_the_keyboard(qtbot) -> None:  # type: ignore[no-untyped-def]
    view = FindingsView()
    qtbot.addWidget(view)
    view.show()
    card = view.add_finding(finding("w", S.WARNING))
    assert not card.expanded
    card.header.setFocus()
    qtbot.keyClick(card.header, Qt.Key.Key_Space)
    assert card.expanded
    qtbot.keyClick(card.header, Qt.Key.Key_Return)
    assert not card.expanded
    qtbot.mouseClick(card.header, Qt.MouseButton.LeftButton)
    assert card.expanded


def test_a_cards_wrapped_explanation_is_never_cut_at_any_width(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A long explanation (a real cap-kill cause's) at every width from 380 to 520 px: the
    card is as tall as its wrapped text needs (its size policy once capped it at a size hint
    made for another width, and the last line was cut; the window tour found it at 1024x700)."""
    from PySide6.QtCore import QRect

    text = (
        "The run needed more than the 1100 MiB cap you set; it peaked at 1.1 GiB in its memory "
        "cgroup (at the last reading 1.0 GiB of the program's own memory and 72.0 KiB of file "
        "pages: libraries and page cache, which the cap counts too). Its RSS peaked at 1.5 GiB: "
        "RSS counts shared libraries' pages and leaves out page cache, so it is not the number "
        "the cap is decided on. The kernel stopped it at the cap, as the cap asks: this is the "
        "experiment's limit, not your machine running out of RAM. Run it with a higher cap, or "
        "none, to measure what it needs, or make the run need less."
    )
    cut = []
    for width in range(380, 521, 4):
        view = FindingsView()
        qtbot.addWidget(view)
        view.resize(width, 300)
        view.show()
        finding = Finding(
            "x", Severity.ERROR, "The run needed more than the 1100 MiB RAM cap you set", text,
            (Evidence("a kernel log line", line=3, source="kernel log"),), ("stream_tf_data",),
            "memory",
        )  # fmt: skip
        card = view.add_finding(finding)
        qtbot.wait(10)
        label = card.explanation
        box = label.contentsRect()
        need = label.fontMetrics().boundingRect(
            QRect(0, 0, box.width(), 1 << 20), int(Qt.TextFlag.TextWordWrap.value), text
        )
        if need.height() > box.height() + 2:
            cut.append((width, box.height(), need.height()))
        view.close()
    assert cut == []
