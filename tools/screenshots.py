"""Write a screenshot of every wizard page, as a user sees it after real work on this machine.

Runs the real thing offscreen: the environment check of this Python, a short CPU training run
under watch, the diagnosis of a real recorded crash (the kernel OOM kill fixture) plus that
run, then the Fix and Export pages.

Usage: python tools/screenshots.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("XDG_CONFIG_HOME", tempfile.mkdtemp(prefix="tfdoctor-shots-"))
os.environ.setdefault("TFDOCTOR_STATE_DIR", tempfile.mkdtemp(prefix="tfdoctor-shots-"))

REPO = Path(__file__).resolve().parents[1]
CRASH_LOG = REPO / "tests" / "fixtures" / "logs" / "real_host_oom_kill.txt"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = ap.parse_args()
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from tfdoctor.core.bench.config import BenchConfig
    from tfdoctor.core.bench.supervisor import SupervisorOptions
    from tfdoctor.gui.app import setup_application
    from tfdoctor.gui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    setup_application(app)
    w = MainWindow(autostart=False)
    w.resize(1280, 820)
    w.show()
    args.out.mkdir(parents=True, exist_ok=True)

    def spin(seconds: float) -> None:
        loop = QEventLoop()
        QTimer.singleShot(int(seconds * 1000), loop.quit)
        loop.exec()

    def wait(cond, limit: float = 300.0) -> None:  # type: ignore[no-untyped-def]
        t0 = time.monotonic()
        while not cond() and time.monotonic() - t0 < limit:
            spin(0.1)

    def shot(name: str) -> None:
        spin(0.4)
        path = args.out / f"{name}.png"
        w.grab().save(str(path))
        print(path)

    w.start_page.paste.setPlainText(CRASH_LOG.read_text().partition("\n")[2][-1500:])
    shot("01-start")
    w.autorun = True
    w.start_page.commit_paste()
    w.session.door = "setup"
    w.go("checks")
    wait(lambda: not w.check_page.running)
    shot("02-checks")
    w.go("reproduce")
    w.bench_page.base_options = SupervisorOptions(sample_every_s=0.1, guard_mib=0)
    w.bench_page.start(BenchConfig(preset="cnn", input_shape=(64, 64, 3), steps=80, device="cpu"))
    wait(lambda: not w.bench_page.running)
    shot("03-reproduce")
    w.go("diagnosis")
    wait(lambda: not w.diagnosis_page.busy_now)
    shot("04-diagnosis")
    w.go("fix")
    shot("05-fix")
    w.go("export")
    shot("06-export")
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
