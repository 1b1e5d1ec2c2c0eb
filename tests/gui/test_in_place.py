"""Messages where the user is looking, not only in the status bar, and controls that say why
they are disabled (issue 15): an empty log, a picture dropped as a log, a pasted log and the
main button, a stale diagnosis after Clear, nothing to export."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QPushButton

from tests.conftest import CORPUS
from tfdoctor.core import flow
from tfdoctor.gui.main_window import MainWindow


def make_window(qtbot) -> MainWindow:  # type: ignore[no-untyped-def]
    w = MainWindow(autostart=False)
    qtbot.addWidget(w)
    w.resize(1024, 700)
    w.show()
    return w


def test_the_log_door_with_no_log_says_so_under_the_log_box(qtbot) -> None:  # type: ignore[no-untyped-def]
    w = make_window(qtbot)
    notice = w.start_page.log_notice
    assert not notice.isVisible()
    w.start_page.log_door.click()
    assert notice.isVisible() and notice.kind == "warn"
    assert notice.text().startswith("There is no log yet")
    assert w.session.door is None  # it did not go on to an empty diagnosis
    w.start_page.clear_button.click()
    assert not notice.isVisible()


def test_a_picture_dropped_as_a_log_is_refused_in_one_line(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    w = make_window(qtbot)
    png = tmp_path / "screenshot of the error.png"
    image = QImage(300, 120, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    assert image.save(str(png))
    assert not w.start_page.add_log_file(str(png))
    notice = w.start_page.log_notice
    assert notice.kind == "error" and "\n" not in notice.text()
    assert notice.text().startswith("screenshot of the error.png is a PNG image, not a text log")
    assert w.session.logs == []
    # a Windows log saved as UTF-16 is text: taken
    utf16 = tmp_path / "powershell.log"
    utf16.write_text("2024-01-02 W tensorflow: OOM when allocating tensor\n", encoding="utf-16")
    assert w.start_page.add_log_file(str(utf16))
    assert [lg.name for lg in w.session.logs] == ["powershell.log"]


def test_after_a_paste_the_main_button_reads_the_log(qtbot) -> None:  # type: ignore[no-untyped-def]
    w = make_window(qtbot)
    assert w.next_button.text() == "Check my setup ▶"
    w.start_page.paste.setPlainText((CORPUS / "004_gpu_oom.txt").read_text())
    assert w.next_button.text() == "Read my log ▶"
    w.next_button.click()
    assert w.session.door == flow.DOOR_LOG
    assert w.current_step == "diagnosis"


def test_clear_removes_a_stale_most_likely_from_the_status_bar(qtbot) -> None:  # type: ignore[no-untyped-def]
    w = make_window(qtbot)
    w.session.add_log("oom.log", (CORPUS / "004_gpu_oom.txt").read_bytes())
    w.start_page.log_door.click()
    qtbot.waitUntil(lambda: not w.diagnosis_page.busy_now, timeout=30_000)
    assert w.statusBar().currentMessage().startswith("Most likely")
    w.go("start")
    w.start_page.clear_button.click()
    assert w.statusBar().currentMessage() == ""


def test_export_opens_only_with_something_to_export_and_says_why_not(qtbot) -> None:  # type: ignore[no-untyped-def]
    w = make_window(qtbot)
    export_item = w.steps.item(flow.STEPS.index("export"))
    assert "Nothing to export yet" in export_item.toolTip()
    # a log that blames nothing: the page opens, but there is no fix script to write
    none_log = next(
        f for f in sorted(CORPUS.glob("*.txt")) if "label: none" in f.read_text(errors="replace")
    )
    w.session.add_log(none_log.name, none_log.read_bytes())
    w.start_page.log_door.click()
    qtbot.waitUntil(lambda: w.session.analysis() is not None, timeout=30_000)
    w.go("export")
    button = w.export_page.script_button
    assert isinstance(button, QPushButton) and not button.isEnabled()
    assert button.toolTip().startswith("No fix script yet:")
    assert w.export_page.save_button.isEnabled()


def test_a_gpu_run_on_a_python_without_a_gpu_is_warned_of_before_start(qtbot) -> None:  # type: ignore[no-untyped-def]
    from tfdoctor.gui.pages.bench_page import BenchPage

    seen: dict[str, int | None] = {"gpus": None}
    page = BenchPage(gpu_count_provider=lambda: seen["gpus"])
    qtbot.addWidget(page)
    page.show()
    page.device.setCurrentIndex(page.device.findData("gpu"))
    assert not page.device_notice.isVisible()  # not checked yet: nothing to warn of
    seen["gpus"] = 0  # the check found no GPU in this Python
    page.refresh_target()
    assert page.device_notice.isVisible() and page.device_notice.kind == "warn"
    assert page.device_notice.text().startswith("TensorFlow sees no GPU in this Python")
    page.device.setCurrentIndex(page.device.findData("cpu"))
    assert not page.device_notice.isVisible()
    page.device.setCurrentIndex(page.device.findData("gpu"))
    assert page.device_notice.isVisible()
    seen["gpus"] = 1
    page.refresh_target()
    assert not page.device_notice.isVisible()
