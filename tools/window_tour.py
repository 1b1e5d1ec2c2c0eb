"""Drive the real window through every page with real content, at several sizes, audit what a
user would see, and save a screenshot of each page.

The content is real work on this machine: the user's crash log (a real GPU-OOM log from the
corpus), the environment check of this Python, a real training run killed by the kernel's OOM
killer under a RAM cap (the recorded real run where no memory cgroup can be made), the
diagnosis, a fix verified by a real re-run, and the export. The work is done once; then for
each size the window is resized and every page is shown, audited and photographed.

The audit, per size and page:
- the window keeps the size it was given (a page never widens it);
- the page's primary buttons (and Back/Next) are entirely inside the visible window;
- no text is cut: every visible button is at least as wide as its text needs, every label
  that does not wrap shows its whole text;
- no horizontal scroll bar, except on the views of raw logs (they keep long lines whole).

Run it on X to see what the real platform draws; --xvfb starts a private Xvfb server for it
(tests/gui/test_real_window.py does this):

    python tools/window_tour.py --xvfb --out build/window-tour

It writes OUT/<width>x<height>/<nn>-<page>.png and OUT/report.json, and exits 1 when the audit
found a problem (each one is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("XDG_CONFIG_HOME", tempfile.mkdtemp(prefix="tfdoctor-tour-"))
os.environ.setdefault("TFDOCTOR_STATE_DIR", tempfile.mkdtemp(prefix="tfdoctor-tour-"))

REPO = Path(__file__).resolve().parents[1]
CRASH_LOG = REPO / "tests" / "fixtures" / "corpus" / "dev" / "004_gpu_oom.txt"
SIZES = ((1440, 900), (1024, 700), (1920, 1080))
# views of raw text that keep long lines whole: a horizontal scroll bar is right there
HSCROLL_OK = {"logPaste", "logView"}


def parse_size(text: str) -> tuple[int, int]:
    w, _, h = text.lower().partition("x")
    return int(w), int(h)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "build" / "window-tour")
    ap.add_argument("--sizes", default=",".join(f"{w}x{h}" for w, h in SIZES))
    ap.add_argument("--quick", action="store_true", help="no real check, run or verify")
    ap.add_argument("--xvfb", action="store_true", help="run on a private Xvfb server")
    args = ap.parse_args()
    if args.xvfb:
        return on_xvfb([a for a in sys.argv[1:] if a != "--xvfb"])
    sizes = [parse_size(s) for s in args.sizes.split(",") if s]

    from PySide6.QtWidgets import QApplication

    from tfdoctor.gui.app import setup_application

    app = QApplication(sys.argv[:1])
    setup_application(app)
    tour = Tour(app, args.out, quick=args.quick)
    tour.prepare()
    problems = tour.visit(sizes)
    (args.out / "report.json").write_text(json.dumps(tour.report, indent=1) + "\n")
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s); screenshots in {args.out}")
    tour.close()
    return 1 if problems else 0


def on_xvfb(argv: list[str]) -> int:
    """Run this tour on a private Xvfb server (its display number chosen by Xvfb), on Qt's
    real X platform (xcb), and stop the server after. 3 when Xvfb cannot start."""
    import shutil
    import subprocess

    if shutil.which("Xvfb") is None:
        print("window_tour: Xvfb is not installed (apt-get install xvfb)", file=sys.stderr)
        return 3
    read, write = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    try:
        with os.fdopen(read) as fh:
            number = fh.readline().strip()
        if not number:
            print("window_tour: Xvfb did not start", file=sys.stderr)
            return 3
        env = {**os.environ, "DISPLAY": f":{number}", "QT_QPA_PLATFORM": "xcb"}
        return subprocess.run([sys.executable, __file__, *argv], env=env, check=False).returncode
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


class Tour:
    def __init__(self, app: Any, out: Path, *, quick: bool) -> None:
        from tfdoctor.gui.main_window import MainWindow

        self.app, self.out, self.quick = app, out, quick
        out.mkdir(parents=True, exist_ok=True)
        self.w = MainWindow(autostart=False)
        self.w.resize(*SIZES[0])
        self.w.show()
        self.report: dict[str, dict[str, list[str]]] = {}

    # ------------------------------------------------------------------ waiting
    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            time.sleep(0.01)

    def wait(self, cond: Any, limit: float = 300.0) -> bool:
        end = time.monotonic() + limit
        while not cond():
            if time.monotonic() > end:
                return False
            self.spin(0.05)
        return True

    # ------------------------------------------------------------------ the work
    def prepare(self) -> None:
        from tfdoctor.core.bench import memcg
        from tfdoctor.core.bench.config import BenchConfig
        from tfdoctor.core.bench.supervisor import SupervisorOptions

        w = self.w
        log_text = CRASH_LOG.read_text().partition("\n---\n")[2]
        w.start_page.paste.setPlainText(log_text)
        self.spin(0.2)
        w.start_page.commit_paste()
        w.session.door = "setup"
        if not self.quick:
            w.go("checks")
            w.check_page.start_check()
            self.wait(lambda: not w.check_page.running)
        w.go("reproduce")
        bench = w.bench_page
        bench.base_options = SupervisorOptions(sample_every_s=0.1, guard_mib=0, stall_s=30)
        if self.quick or memcg.unavailable() is not None:
            bench.show_demo()
        else:  # the user's run, really OOM-killed under a RAM cap
            bench.set_config(BenchConfig(preset="mlp", batch_size=4096, steps=40, device="cpu"))
            bench.ram_cap.setValue(1100)
            bench.start()
            self.wait(lambda: not bench.running)
        w.go("diagnosis")
        self.wait(lambda: not w.diagnosis_page.busy_now and not w.analysis_bridge.busy, 60)
        w.go("fix")
        self.wait(lambda: not w.analysis_bridge.busy, 60)
        fix = w.fix_page
        if not self.quick and "smaller_batch" in fix.rows and fix._verifiable("smaller_batch"):
            fix.verify("smaller_batch")
            self.wait(lambda: not fix.verifying)
        w.go("export")
        self.spin(0.3)

    # ------------------------------------------------------------------ the audit
    def visit(self, sizes: list[tuple[int, int]]) -> list[str]:
        from tfdoctor.core import flow

        problems: list[str] = []
        for width, height in sizes:
            self.w.resize(width, height)
            self.spin(0.3)
            folder = self.out / f"{width}x{height}"
            folder.mkdir(parents=True, exist_ok=True)
            for n, step in enumerate(flow.STEPS, 1):
                self.w.go(step)
                self.spin(0.35)
                found = self.audit(step, (width, height))
                for _ in range(4):  # on a loaded machine word-wrapped cards settle late
                    if not found:
                        break
                    self.spin(0.5)
                    found = self.audit(step, (width, height))
                self.report.setdefault(f"{width}x{height}", {})[step] = found
                problems += [f"{width}x{height} {step}: {p}" for p in found]
                self.w.grab().save(str(folder / f"{n:02d}-{step}.png"))
        return problems

    def primary_buttons(self, step: str) -> list[Any]:
        w = self.w
        page = {
            "start": [
                w.start_page.setup_door,
                w.start_page.log_door,
                w.start_page.watch_door,
                w.start_page.open_button,
            ],
            "checks": [w.check_page.run_button],
            "reproduce": [w.bench_page.start_button, w.bench_page.stop_button],
            "diagnosis": [w.diagnosis_page.again],
            "fix": [w.fix_page.undo_button],
            "export": [w.export_page.save_button, w.export_page.script_button],
        }[step]
        return [*page, w.back_button, w.next_button]

    def audit(self, step: str, size: tuple[int, int]) -> list[str]:
        from PySide6.QtCore import QPoint, QRect
        from PySide6.QtWidgets import (
            QAbstractButton,
            QAbstractScrollArea,
            QLabel,
            QScrollArea,
        )

        w = self.w
        problems: list[str] = []
        if (w.width(), w.height()) != size:
            problems.append(f"the window is {w.width()}x{w.height()}, not {size[0]}x{size[1]}")
        inside = QRect(QPoint(0, 0), w.size())
        for b in self.primary_buttons(step):
            if not b.isVisible():
                continue
            rect = QRect(b.mapTo(w, QPoint(0, 0)), b.size())
            seen = b.visibleRegion().boundingRect()
            if not inside.contains(rect) or seen.size() != b.size():
                problems.append(f"button {b.text()!r} is not wholly in view ({rect}, seen {seen})")
        page = w.stack.currentWidget()
        roots = [page, w.back_button.parentWidget()]
        for root in roots:
            for child in root.findChildren(QAbstractButton):
                if not child.isVisible() or not child.text():
                    continue
                need = child.sizeHint().width()
                if child.width() < need:
                    problems.append(
                        f"button {child.text()!r} is cut: {child.width()} px of {need} needed"
                    )
            for label in root.findChildren(QLabel):
                if not label.isVisible() or not label.text():
                    continue
                if label.wordWrap():  # wraps: then it must be tall enough for its lines
                    measured = self.wrapped_height(label)
                    if measured is not None and measured[0] > measured[1] + 2:
                        tall, high = measured
                        problems.append(
                            f"label {label.text()[:40]!r} ({label.objectName()}) is cut: "
                            f"{high} px high of {tall}"
                        )
                    continue
                if label.pixmap() is not None and not label.pixmap().isNull():
                    continue
                need = label.sizeHint().width()
                if label.width() < need and label.visibleRegion().boundingRect().width() > 0:
                    problems.append(
                        f"label {label.text()[:40]!r} is cut: {label.width()} px of {need}"
                    )
            for area in root.findChildren(QAbstractScrollArea):
                if not area.isVisible() or area.objectName() in HSCROLL_OK:
                    continue
                bar = area.horizontalScrollBar()
                if bar.isVisible() and bar.maximum() > 0:
                    what = area.objectName() or type(area).__name__
                    inner = area.widget() if isinstance(area, QScrollArea) else None
                    wide = f", content {inner.width()} px" if inner is not None else ""
                    problems.append(
                        f"horizontal scroll bar on {what} ({area.viewport().width()} px{wide})"
                    )
        return problems

    @staticmethod
    def wrapped_height(label: Any) -> tuple[int, int] | None:
        """(the height a word-wrapped plain-text label's text needs, the height it has), in
        its contents rectangle; None for rich text, which only Qt's own label layout measures
        right (a document measured here disagrees with what the label draws)."""
        from PySide6.QtCore import QRect, Qt

        text = label.text()
        if label.textFormat() == Qt.TextFormat.RichText or "<" in text:
            return None
        box = label.contentsRect()
        flags = int(Qt.TextFlag.TextWordWrap.value)
        need = label.fontMetrics().boundingRect(QRect(0, 0, box.width(), 1 << 20), flags, text)
        return need.height(), box.height()

    def close(self) -> None:
        w = self.w
        for page in (w.check_page, w.bench_page):
            page.shutdown()
        w.fix_page.shutdown()
        w.close()


if __name__ == "__main__":
    sys.exit(main())
