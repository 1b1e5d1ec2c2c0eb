"""The app installed without its TensorFlow extra: the wizard starts on the Python picker and
says why, and nothing can be checked until the user picks their notebook's Python."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QCoreApplication, QEvent, QSettings

from tfdoctor.core import flow
from tfdoctor.core.model import Target
from tfdoctor.core.probes import targetrun
from tfdoctor.gui.pages import start_page


def test_this_test_environment_has_tensorflow() -> None:
    # the other GUI tests rely on the app's own Python being a usable default target
    assert targetrun.app_has_tensorflow()


@pytest.fixture
def window_without_tf(qtbot, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from tfdoctor.gui.main_window import MainWindow

    # as in a venv made by `pip install tfdoctor` (no [tensorflow] extra)
    monkeypatch.setattr(start_page, "app_has_tensorflow", lambda: False)
    QSettings("tfdoctor", "tfdoctor").remove("target")  # no Python remembered from before
    w = MainWindow(autostart=False)
    w.resize(1024, 700)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.close()
    w.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def test_without_tensorflow_the_picker_comes_first_and_says_why(  # type: ignore[no-untyped-def]
    qtbot, window_without_tf, bare_python: str
) -> None:
    w = window_without_tf
    page = w.start_page
    assert w.current_step == "start"
    assert page.target_note.isVisible()
    assert "has no TensorFlow" in page.target_note.text()
    assert page.target_combo.currentText() == start_page.PICK_PROMPT
    assert w.session.target is None
    states = flow.step_states(w.session)
    assert not states["checks"].enabled
    assert "Pick the Python" in states["checks"].reason
    # the app's own Python is still offered, just not chosen for the user
    labels = [page.target_combo.itemText(i) for i in range(page.target_combo.count())]
    assert any(sys.executable in label for label in labels)

    page.add_target(Target(python=bare_python, label="notebook env", kind="path"))
    assert w.session.target is not None and w.session.target.label == "notebook env"
    assert not page.target_note.isVisible()
    assert flow.step_states(w.session)["checks"].enabled
