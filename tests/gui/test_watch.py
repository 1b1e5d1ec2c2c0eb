"""Watch my notebook, in the window (issue 16): a real process OOM-killed in a real memory
cgroup is watched on the Reproduce page's plot and its verdict shown; a normal end explains
nothing; the dialog picks a process and says why Start is disabled."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from tfdoctor.core.bench import memcg, observe
from tfdoctor.gui.pages.bench_page import BenchPage
from tfdoctor.gui.watch_dialog import WatchDialog

NEEDS_MEMCG = pytest.mark.skipif(memcg.unavailable() is not None, reason="no memory cgroup")
GROW = "import time\nkept = []\nwhile True:\n    kept.append(bytearray(8 << 20)); time.sleep(0.1)"


@pytest.fixture
def page(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path))
    p = BenchPage()
    qtbot.addWidget(p)
    p.resize(1150, 800)
    p.show()
    yield p
    p.shutdown(10)


def watch(qtbot, page: BenchPage, child: subprocess.Popen[bytes], label: str):  # type: ignore[no-untyped-def]
    with qtbot.waitSignal(page.watch_bridge.sig_finished, timeout=60_000) as blocker:
        assert page.start_watch(observe.Watched(child.pid, label, child=child))
        assert page.running and page.stop_button.isEnabled() and not page.start_button.isEnabled()
    return blocker.args[0]


@NEEDS_MEMCG
def test_a_watched_process_killed_by_a_cgroup_oom_gets_its_verdict(qtbot, page) -> None:  # type: ignore[no-untyped-def]
    with memcg.MemoryCgroup(200 << 20) as cg:
        child = subprocess.Popen(cg.wrap([sys.executable, "-c", GROW]))
        qtbot.waitUntil(lambda: cg.path.name in Path(f"/proc/{child.pid}/cgroup").read_text())
        result = watch(qtbot, page, child, "a growing job")
    assert result.ending.signal == "SIGKILL" and result.ending.oom_kill_line
    found = page.causes.findings()
    assert found and found[0].id.endswith("host_oom"), [f.id for f in found]
    assert "a growing job" in page.outcome_label.text() and "SIGKILL" in page.outcome_label.text()
    assert page.plot.series_lengths()["rss"] > 5  # its memory was plotted as it climbed
    assert any("killed by SIGKILL" in m for m in page.plot.marker_labels())
    assert not page.running and page.start_button.isEnabled()
    assert "ram_cap" in page.plot.limits  # its cgroup's limit: the wall it died at
    assert result.trace is not None and result.trace.is_file()  # recorded as it went
    assert str(result.trace) in page.outcome_label.text()


def test_a_watched_process_that_ends_well_explains_nothing(qtbot, page) -> None:  # type: ignore[no-untyped-def]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.8)"])
    result = watch(qtbot, page, child, "a short job")
    assert result.ending.normal and result.causes == []
    assert page.causes.findings() == []
    assert page.causes.placeholder_text() == "Nothing to explain: it ended normally."
    assert page.progress.format() == "ended"


def test_the_dialog_picks_a_process_and_says_why_start_is_disabled(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        dialog = WatchDialog(tmp_path / "tf.jsonl")
        qtbot.addWidget(dialog)
        qtbot.waitUntil(lambda: not dialog._list_task.busy, timeout=10_000)
        dialog.show_kernels([])  # none running here
        assert not dialog.ok_button.isEnabled()
        assert dialog.ok_button.toolTip() == "Pick a running kernel, or give a process's PID"
        assert not (dialog.kernels.item(0).flags() & Qt.ItemFlag.ItemIsEnabled)
        dialog.pid.setValue(child.pid)
        assert dialog.ok_button.isEnabled()
        dialog.ok_button.click()
        watched = dialog.watched()
        assert watched is not None and watched.pid == child.pid
        assert str(tmp_path / "tf.jsonl") in dialog.cell.toPlainText()
    finally:
        child.kill()
        child.wait()


@NEEDS_MEMCG
def test_the_watchs_verdict_is_the_users_crash_on_diagnosis_and_fix(
    qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from tfdoctor.gui.main_window import MainWindow

    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path))
    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    w.show()
    assert w.start_page.watch_door.isVisible()
    w.watch_notebook(open_dialog=False)
    assert w.current_step == "reproduce"
    with memcg.MemoryCgroup(200 << 20) as cg:
        child = subprocess.Popen(cg.wrap([sys.executable, "-c", GROW]))
        qtbot.waitUntil(lambda: cg.path.name in Path(f"/proc/{child.pid}/cgroup").read_text())
        with qtbot.waitSignal(w.bench_page.sig_watch_finished, timeout=60_000):
            assert w.bench_page.start_watch(observe.Watched(child.pid, "my notebook", child=child))
    assert w.session.watch is not None
    w.go("diagnosis")
    page = w.diagnosis_page
    qtbot.waitUntil(lambda: not page.busy_now, timeout=30_000)
    assert page.ranked and page.ranked[0].cause.id == "host_oom"
    assert "watch of your process" in page.ranked[0].sources
    w.go("fix")
    qtbot.waitUntil(lambda: not w.analysis_bridge.busy, timeout=30_000)
    assert w.fix_page.fix_ids, "the watch's verdict proposes fixes"
    w.bench_page.shutdown(10)
