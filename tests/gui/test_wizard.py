"""The whole wizard, offscreen: the setup path with a real check and a real CPU run, the log
path with a real log from the dev corpus dropped on the Start page, Back/Next and the reasons
for skipped steps, copy to clipboard, and the remembered window and Python."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication, QEvent, QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QApplication, QPushButton

from tests.conftest import CORPUS
from tests.gui.conftest import CHECK_TIMEOUT_MS, SCREENSHOT_DIR, child_processes
from tfdoctor.core import flow
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.supervisor import SupervisorOptions
from tfdoctor.core.model import Target
from tfdoctor.gui.main_window import MainWindow

pytestmark = pytest.mark.slow
RUN_TIMEOUT_MS = 240_000


@pytest.fixture
def window(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path / "state"))
    w = MainWindow(autostart=False)
    w.bench_page.base_options = SupervisorOptions(sample_every_s=0.1, guard_mib=0, stall_s=30)
    w.resize(1280, 860)
    w.show()
    yield w
    for page in (w.check_page, w.bench_page):
        page.shutdown()
    qtbot.waitUntil(lambda: not w.check_page.running and not w.bench_page.running, timeout=60_000)
    w.close()
    w.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def corpus_body(label: str, tmp_path: Path) -> tuple[Path, str]:
    """A real dev-corpus log without its label header, as the user's file."""
    for f in sorted(CORPUS.glob("*.txt")):
        head, _, body = f.read_text(errors="replace").partition("\n---\n")
        if f"label: {label}" in head:
            out = tmp_path / f"{f.stem}.log"
            out.write_text(body)
            return out, label
    raise AssertionError(label)


def drop_file(widget, path: Path) -> None:  # type: ignore[no-untyped-def]
    md = QMimeData()
    md.setUrls([QUrl.fromLocalFile(str(path))])
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    enter = QDropEvent(pos, Qt.DropAction.CopyAction, md, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)  # fmt: skip
    widget.dropEvent(enter)


def test_the_log_door_with_a_dropped_real_log(qtbot, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log, label = corpus_body("host_oom", tmp_path)
    drop_file(window.start_page, log)
    assert [lg.name for lg in window.session.logs] == [log.name]
    window.start_page.log_door.click()
    assert window.current_step == "diagnosis"  # checks and reproduce skipped on this path
    qtbot.waitUntil(lambda: not window.diagnosis_page.busy_now, timeout=30_000)
    ranked = window.diagnosis_page.ranked
    assert ranked and ranked[0].cause.id == label
    card = window.diagnosis_page.causes.cards()[0]
    assert card.expanded and label not in card.finding.title  # people's words, not ids
    assert window.next_button.isEnabled() and "Fix" in window.next_button.text()
    card.copy_to_clipboard()
    text = QApplication.clipboard().text()
    assert card.finding.title in text and "Evidence:" in text
    window.back()
    assert window.current_step == "start"
    # the skipped steps stay reachable and say why they were skipped
    item = window.steps.item(flow.STEPS.index("checks"))
    assert item.flags() & Qt.ItemFlag.ItemIsEnabled and "optional" in item.toolTip()
    window.next()
    window.next()
    assert window.current_step == "fix"
    assert window.fix_page.fix_ids and window.fix_page.fix_ids[0] in ranked[0].cause.fixes
    window.grab().save(os.path.join(SCREENSHOT_DIR, "tfdoctor-wizard-fix.png"))


def test_the_setup_door_with_a_real_check_and_a_real_run(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    window.autorun = True
    with qtbot.waitSignal(window.check_page.bridge.sig_check_finished, timeout=CHECK_TIMEOUT_MS):
        window.start_page.setup_door.click()
        assert window.current_step == "checks"
    assert window.session.check is not None
    window.next()
    assert window.current_step == "reproduce"
    bench = window.bench_page
    assert bench.device.currentData() == "cpu"  # suggested: TF sees no GPU here
    assert "CPU" in window.step_note.text()
    bench.steps.setValue(20)
    bench.preset.setCurrentIndex(bench.preset.findData("mlp"))
    with qtbot.waitSignal(bench.bridge.sig_finished, timeout=RUN_TIMEOUT_MS):
        bench.start_button.click()
    assert window.session.bench is not None and window.session.telemetry
    assert window.session.bench.outcome.status == "completed"
    window.next()
    assert window.current_step == "diagnosis"
    qtbot.waitUntil(lambda: not window.diagnosis_page.busy_now, timeout=30_000)
    # a healthy run on a healthy setup: nothing is blamed for the start-up notices
    assert all(r.cause.confidence < 0.5 for r in window.diagnosis_page.ranked)
    assert window.diagnosis_page.summary.text()
    while window.next_button.isEnabled() and window.current_step != "export":
        window.next()
    assert window.current_step == "export"
    out = Path(SCREENSHOT_DIR) / "tfdoctor-session-test.tfdoctor"
    assert window.save_investigation_to(out)
    qtbot.waitUntil(lambda: not window.saving and window.investigation_path == out)
    from tfdoctor.core.report.investigation import load

    saved = load(out).session
    assert saved.bench is not None and saved.bench.outcome.status == "completed"
    assert len(saved.telemetry) == len(window.session.telemetry)
    assert child_processes() == []


def test_a_python_without_tensorflow_closes_reproduce_with_the_reason(
    qtbot, window, bare_python: str
) -> None:  # type: ignore[no-untyped-def]
    window.autorun = True
    window.start_page.add_target(Target(python=bare_python, label="bare venv", kind="path"))
    assert window.session.target.python == bare_python
    with qtbot.waitSignal(window.check_page.bridge.sig_check_finished, timeout=CHECK_TIMEOUT_MS):
        window.start_page.setup_door.click()
    item = window.steps.item(flow.STEPS.index("reproduce"))
    assert not item.flags() & Qt.ItemFlag.ItemIsEnabled
    assert "TensorFlow does not import" in item.toolTip()
    window.next()
    assert window.current_step == "diagnosis"  # reproduce skipped
    window.back()
    assert window.current_step == "checks"


def test_the_window_remembers_its_size_and_the_python(qtbot, bare_python: str) -> None:  # type: ignore[no-untyped-def]
    w = MainWindow(autostart=False)
    w.show()
    w.resize(1234, 777)
    w.start_page.add_target(Target(python=bare_python, label="bare venv", kind="path"))
    w.close()
    again = MainWindow(autostart=False)
    qtbot.addWidget(again)
    again.show()
    assert again.session.target is not None and again.session.target.python == bare_python
    assert again.size().width() == 1234


def test_keyboard_back_and_next(qtbot, window, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log, _ = corpus_body("gpu_oom", tmp_path)
    window.start_page.add_log_file(str(log))
    window.start_page.log_door.click()
    qtbot.waitUntil(lambda: not window.diagnosis_page.busy_now, timeout=30_000)
    qtbot.keyClick(window, Qt.Key.Key_Left, Qt.KeyboardModifier.AltModifier)
    assert window.current_step == "start"
    qtbot.keyClick(window, Qt.Key.Key_Right, Qt.KeyboardModifier.AltModifier)
    assert window.current_step == "diagnosis"


def test_one_click_fixes_on_the_fix_page(qtbot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A kernelspec target: apply a fix to a copy of the kernel, copy the preamble, undo."""
    import json
    import sys

    data = tmp_path / "jupyter"
    spec_dir = data / "kernels" / "tf"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "TF",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    monkeypatch.setenv("JUPYTER_PATH", str(data))
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path / "state"))
    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    w.show()
    w.start_page.add_target(Target(python=sys.executable, label="TF", kind="kernelspec", name="tf"))
    log, _ = corpus_body("gpu_memory_contention", tmp_path)
    w.start_page.add_log_file(str(log))
    w.start_page.log_door.click()
    qtbot.waitUntil(lambda: not w.diagnosis_page.busy_now, timeout=30_000)
    w.go("fix")
    row = w.fix_page.rows["memory_growth"]
    apply_button = next(b for b in row.findChildren(QPushButton) if "kernel" in b.text())
    assert apply_button.isEnabled()
    apply_button.click()
    clone = data / "kernels" / "tf-tfdoctor" / "kernel.json"
    assert json.loads(clone.read_text())["env"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert "Applied" in row.result.text()
    copy = next(b for b in row.findChildren(QPushButton) if "preamble" in b.text())
    copy.click()
    assert "set_memory_growth" in QApplication.clipboard().text()
    w.fix_page.undo_button.click()
    assert not clone.exists()
    # said where the user looks: the row no longer claims "Applied", the page says it is undone
    assert "Applied" not in row.result.text() and "Undone" in row.result.text()
    assert w.fix_page.notice.isVisible() and "Undone: memory_growth" in w.fix_page.notice.text()
    assert not w.fix_page.undo_button.isEnabled()
    assert w.fix_page.undo_button.toolTip().startswith("Nothing to undo")
    script = tmp_path / "fix.sh"
    assert w.export_page.export_script(str(script))
    assert "TF_FORCE_GPU_ALLOW_GROWTH" in script.read_text()
    assert "gpu_memory_contention" in script.read_text()


NEEDS_MEMCG = pytest.mark.skipif(
    __import__("tfdoctor.core.bench.memcg", fromlist=["x"]).unavailable() is not None,
    reason="no memory cgroup here",
)


def _capped_run_killed(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    """A real run on the Reproduce page that the kernel OOM-kills under a 1100 MiB RAM cap."""
    bench = window.bench_page
    window.go("reproduce")
    bench.set_config(BenchConfig(preset="mlp", batch_size=4096, steps=40, device="cpu"))
    bench.ram_cap.setValue(1100)
    with qtbot.waitSignal(bench.bridge.sig_finished, timeout=RUN_TIMEOUT_MS):
        bench.start_button.click()
    assert window.session.bench.outcome.status == "killed"


@NEEDS_MEMCG
def test_apply_and_verify_shows_before_and_after(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    """A real run the kernel OOM-kills under a RAM cap; Verify re-runs it with streaming data
    and shows the table and both runs' curves on one plot."""
    _capped_run_killed(qtbot, window)
    window.go("fix")
    fix_page = window.fix_page
    # the run's telemetry is scanned off the GUI thread; the page fills when it is done
    qtbot.waitUntil(lambda: not window.analysis_bridge.busy, timeout=30_000)
    row = fix_page.rows["stream_tf_data"]
    verify_button = next(b for b in row.findChildren(QPushButton) if "Verify" in b.text())
    verify_button.click()
    qtbot.waitUntil(lambda: not fix_page.verifying, timeout=RUN_TIMEOUT_MS)
    assert "Fixed" in row.result.text()
    assert row.comparison is not None
    names = set(row.comparison.curves)
    assert {"Worker RSS (before)", "Worker RSS (after)"} <= names
    # its legend is a row above the plot, not a box over the curves
    assert row.comparison.getPlotItem().legend is None
    assert row.comparison_legend is not None and "Worker&nbsp;RSS&nbsp;(before)" in (
        row.comparison_legend.text()
    )
    # leaving the page and coming back keeps the result (the rows were rebuilt, and lost it)
    window.go("export")
    window.go("fix")
    assert fix_page.rows["stream_tf_data"] is row and "Fixed" in row.result.text()
    window.grab().save(os.path.join(SCREENSHOT_DIR, "tfdoctor-verify.png"))
    # the user's GPU-OOM log arrives: it leads; the capped run's kill stays tfdoctor's own
    window.session.add_log("oom.log", (CORPUS / "004_gpu_oom.txt").read_bytes())
    window.go("diagnosis")
    page = window.diagnosis_page
    qtbot.waitUntil(lambda: not page.busy_now, timeout=30_000)
    assert page.ranked[0].cause.id == "gpu_oom"
    assert "host_oom" in [rc.cause.id for rc in page.experiments]
    assert "host_oom" not in [rc.cause.id for rc in page.ranked]
    assert page.causes.headings()[0] == "Your crash"
    window.grab().save(os.path.join(SCREENSHOT_DIR, "tfdoctor-diagnosis-apart.png"))


@NEEDS_MEMCG
def test_after_not_fixed_the_next_fix_is_offered_and_what_worked_is_said(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    """The user's GPU-OOM log proposes mixed precision and a smaller batch; their run, under a
    RAM cap, is killed. Mixed precision really does not save it: the row says "Not fixed" and
    offers the next fix and the pair. The next fix (half the batch, said as a test, since no
    search measured a size) really does, and the page says which worked and which did not."""
    _capped_run_killed(qtbot, window)
    window.session.add_log("oom.log", (CORPUS / "004_gpu_oom.txt").read_bytes())
    window.go("fix")
    fix_page = window.fix_page
    qtbot.waitUntil(lambda: not window.analysis_bridge.busy, timeout=30_000)
    assert fix_page.fix_ids == ["smaller_batch", "mixed_precision"]
    said: list[str] = []
    fix_page.sig_status_changed.connect(said.append)
    row = fix_page.rows["mixed_precision"]
    next(b for b in row.findChildren(QPushButton) if "Verify" in b.text()).click()
    qtbot.waitUntil(lambda: not fix_page.verifying, timeout=RUN_TIMEOUT_MS)
    assert "Not fixed" in row.result.text()
    offered = [row.next_buttons.itemAt(i).widget() for i in range(row.next_buttons.count())]
    assert [b.text() for b in offered] == [
        "Try the next fix: Use a smaller batch size",
        "Try them together: mixed_precision + smaller_batch",
    ]
    offered[0].click()
    qtbot.waitUntil(lambda: not fix_page.verifying, timeout=RUN_TIMEOUT_MS)
    result = fix_page.rows["smaller_batch"].result.text()
    assert "Fixed" in result and "batch size 4096 → 2048, half the run" in result
    assert "So far: smaller_batch worked; mixed_precision did not." in result
    assert said[-1].endswith("(smaller_batch worked; mixed_precision did not)")
    assert row.next_buttons.count() == 0  # the offer went with the run that answered it
    window.grab().save(os.path.join(SCREENSHOT_DIR, "tfdoctor-verify-next.png"))


def test_a_leak_seen_in_the_telemetry_is_shown_on_the_plot(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    """A real run whose memory grows every step (the worker's leak fault): the diagnosis
    names the leak from the telemetry alone and jumps to that stretch of the plot."""
    bench = window.bench_page
    window.go("reproduce")
    cfg = BenchConfig(preset="cnn", input_shape=(32, 32, 3), batch_size=16, steps=200,
                      device="cpu", fault="leak", fault_at_step=1)  # fmt: skip
    with qtbot.waitSignal(bench.bridge.sig_finished, timeout=RUN_TIMEOUT_MS):
        assert bench.start(cfg)
    window.go("diagnosis")
    page = window.diagnosis_page
    qtbot.waitUntil(lambda: not page.busy_now, timeout=30_000)
    leak = next(r for r in page.ranked if r.cause.id == "memory_leak")
    assert leak.sources == ("telemetry",)
    button = next(b for b in page.findChildren(QPushButton) if "on the plot" in b.text())
    button.click()
    assert window.current_step == "reproduce"
    region = bench.plot.moment
    assert region is not None
    start, end = region.getRegion()
    assert end > start and (start, end) == next(e.at for e in leak.cause.evidence if e.at)


def test_stopping_a_kernel_never_freezes_the_window(qtbot, window, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Stopping a process waits for it to end (a Jupyter kernel is asked to shut down first):
    that wait is off the GUI thread; the result appears when it is over."""
    import time

    from jupyter_client import KernelManager
    from PySide6.QtWidgets import QMessageBox

    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        # a kernel stuck in C code that ignores SIGTERM: it cannot answer, so stopping it
        # takes the shutdown request's wait, then SIGTERM's, then SIGKILL (seconds)
        kc.execute(
            "import signal, ctypes; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "ctypes.CDLL(None).sleep(120)"
        )
        time.sleep(1.0)
        kc.stop_channels()
        pid = km.provisioner.process.pid  # type: ignore[union-attr]
        monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
        messages: list[str] = []
        window.fix_page.sig_status_changed.connect(messages.append)
        started = time.monotonic()
        window.fix_page.stop_process({"pid": pid, "name": "python", "used_mib": 1000})
        assert time.monotonic() - started < 0.5  # the click returns at once
        assert messages and "Stopping" in messages[-1]
        ticks: list[float] = []
        timer_id = window.startTimer(50)
        monkeypatch.setattr(window, "timerEvent", lambda _e: ticks.append(time.monotonic()))
        qtbot.waitUntil(lambda: "SIGKILL" in messages[-1], timeout=60_000)
        window.killTimer(timer_id)
        # SIGKILL is sent; the kernel is gone as soon as the kernel delivers it
        qtbot.waitUntil(lambda: not km.is_alive(), timeout=5000)
        assert len(ticks) >= 20  # the event loop ran on (every 50 ms) while it waited
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
