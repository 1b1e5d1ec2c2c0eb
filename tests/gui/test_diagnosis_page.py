"""The Diagnosis page shows the causes best first (by confidence, whatever their severity)
and keeps tfdoctor's own runs in a section after the user's crash."""

from __future__ import annotations

from tests.conftest import CORPUS, FIXTURES
from tfdoctor.core.diagnose.engine import diagnose
from tfdoctor.core.session import Inputs, RunEvidence, Session, analyse
from tfdoctor.gui.findings_view import sort_key
from tfdoctor.gui.pages.diagnosis_page import DiagnosisPage


def _page(qtbot, session: Session) -> DiagnosisPage:  # type: ignore[no-untyped-def]
    page = DiagnosisPage(session)
    qtbot.addWidget(page)
    page.resize(1024, 700)
    page.show()
    page.refresh()
    qtbot.waitUntil(lambda: not page.busy_now, timeout=30_000)
    return page


def test_causes_are_shown_best_first(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A real fragmentation log with three causes: the cards follow the confidence, not
    severity then name (which would put a 38% card before a 24% one... or after)."""
    s = Session(door="log")
    s.add_log("frag.log", (CORPUS / "008_fragmentation.txt").read_bytes())
    page = _page(qtbot, s)
    shown = [c.finding.confidence for c in page.causes.cards()]
    assert len(shown) >= 3 and shown == sorted(shown, reverse=True)
    assert [c.finding.id for c in page.causes.cards()] == [
        f"cause.{rc.cause.id}" for rc in page.ranked
    ]
    by_severity = [f.confidence for f in sorted(page.causes.findings(), key=sort_key)]
    assert by_severity != shown  # the old order would have mixed them up
    assert page.causes.cards()[0].expanded and page.causes.headings() == []


def test_the_users_crash_leads_and_tfdoctors_runs_follow_apart(qtbot) -> None:  # type: ignore[no-untyped-def]
    killed = (FIXTURES / "logs" / "real_host_oom_kill.txt").read_bytes()
    s = Session(door="log")
    s.add_log("oom.log", (CORPUS / "004_gpu_oom.txt").read_bytes())
    run = RunEvidence(diagnose(killed).causes)
    a = analyse(Inputs(tuple(s.logs), run=run))  # the analysis the bridge hands over
    page = DiagnosisPage(s)
    qtbot.addWidget(page)
    page.show()
    page.bridge.sig_analysed.emit(a)
    heads = page.causes.headings()
    assert heads[0] == "Your crash" and "tfdoctor's own runs" in heads[1]
    ids = [c.finding.id for c in page.causes.cards()]
    assert ids[0] == "cause.gpu_oom" and "cause.host_oom" in ids
    assert ids.index("cause.host_oom") >= len(a.findings)  # below the heading, never above
    assert f"Most likely: <b>{a.ranked[0].cause.title}</b>" in page.summary.text()
    assert page.experiments[0].cause.id == "host_oom"


def test_a_plain_python_error_is_named_not_a_gpu_cause(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A real run here that ended in Keras's ValueError after the no-driver notices: the page
    says the program failed (with the line), not "no known failure pattern"."""
    s = Session(door="log")
    s.add_log("run.log", (FIXTURES / "logs" / "real_user_error_tf221.txt").read_bytes())
    page = _page(qtbot, s)
    text = page.summary.text()
    assert page.ranked == [] and page.causes.cards() == []
    assert "Python error of the program itself" in text and "ValueError" in text
    assert "No known failure pattern" not in text


def test_a_paste_only_guessed_at_says_so_and_proposes_no_fix(qtbot) -> None:  # type: ignore[no-untyped-def]
    """A node line from an error whose message the paste left out: nothing reads it, so the
    shipped wording profile guesses. The page says it is a guess, and no fix is proposed."""
    node = (
        '[[Node: MatMul = MatMul[T=DT_FLOAT, transpose_a=false, transpose_b=false, _device="/'
        'job:localhost/replica:0/task:0/gpu:0"](dense/kernel/read, input_1)]]\n'
    )
    s = Session(door="log")
    s.add_log("paste.log", node.encode())
    page = _page(qtbot, s)
    assert page.ranked and all(rc.cause.guess for rc in page.ranked)
    assert page.summary.text().startswith("Only a guess, from the log's wording: <b>")
    titles = [c.finding.title for c in page.causes.cards()]
    assert all(t.startswith("Guess: ") for t in titles)
    assert analyse(Inputs(tuple(s.logs))).fix_ids == []
