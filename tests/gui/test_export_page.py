"""The Export page: no save dialog when there is nothing to export, the right advice after
each format, and the script carries exactly the fixes it lists (real log from the corpus)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from tests.conftest import CORPUS
from tfdoctor.core.session import Session
from tfdoctor.gui.pages.export_page import ExportPage


def _page(qtbot, session: Session) -> tuple[ExportPage, list[str]]:  # type: ignore[no-untyped-def]
    page = ExportPage(session)
    qtbot.addWidget(page)
    said: list[str] = []
    page.sig_status_changed.connect(said.append)
    return page, said


def test_nothing_to_export_says_so_without_a_save_dialog(qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    asked: list[object] = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: asked.append(a) or ("", ""))
    page, said = _page(qtbot, Session())
    page.script_button.click()
    assert asked == [] and said and said[-1].startswith("No fix script:")


def test_the_status_after_each_format(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = Session(door="log")
    s.add_log("oom.log", (CORPUS / "gpu_oom__mozilla-DeepSpeech-606.txt").read_bytes())
    page, said = _page(qtbot, s)
    assert page.export_script(str(tmp_path / "fix.py"))
    assert "notebook's first cell" in said[-1] and "--apply" not in said[-1]
    assert page.export_script(str(tmp_path / "fix.sh"))
    assert "--apply" in said[-1]
    text = (tmp_path / "fix.sh").read_text()
    assert "where the settings go" in text and "--kernel NAME" in text
    assert "memory_limit" not in text.split("# not in this script")[0]


def test_the_subtitle_does_not_promise_what_is_there(qtbot) -> None:  # type: ignore[no-untyped-def]
    from PySide6.QtWidgets import QLabel

    page, _ = _page(qtbot, Session())
    texts = " ".join(lb.text() for lb in page.findChildren(QLabel))
    assert "later version" not in texts and "fixes as a script" in texts


def test_a_kernel_targets_script_gives_that_kernel_its_settings(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Checking a Jupyter kernel: the .sh's settings go into a copy of that kernelspec (which a
    Jupyter started from the desktop reads), with the kernel's own interpreter, not ~/.bashrc."""
    from tfdoctor.core.model import Target

    s = Session(door="log")
    s.target = Target(
        python="/opt/conda/envs/tf/bin/python", label="TF", kind="kernelspec", name="tf"
    )
    s.add_log("oom.log", (CORPUS / "gpu_oom__mozilla-DeepSpeech-606.txt").read_bytes())
    page, _ = _page(qtbot, s)
    assert page.export_script(str(tmp_path / "fix.sh"))
    text = (tmp_path / "fix.sh").read_text()
    assert "KERNEL_DEFAULT=tf\n" in text and "PY_DEFAULT=/opt/conda/envs/tf/bin/python\n" in text
    assert "into a copy of the Jupyter kernel 'tf', named 'tf-tfdoctor'" in text
