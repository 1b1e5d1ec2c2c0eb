"""The real window on a real X server (Xvfb, Qt's xcb platform), at 1440x900, 1024x700 and
1920x1080: every page with real content (a real crash log, a real check, a real run killed
under a RAM cap, a fix verified by a real re-run), audited by tools/window_tour.py for what a
user would see (the window keeps its size, primary buttons wholly in view, no text cut, no
horizontal scroll bar), with a screenshot of every page in a folder people can open.

The folder is build/window-tour (or $TFDOCTOR_WINDOW_TOUR): open it after `make test`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOUR = REPO / "tools" / "window_tour.py"
OUT = Path(os.environ.get("TFDOCTOR_WINDOW_TOUR", REPO / "build" / "window-tour"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("Xvfb") is None,
        reason="Xvfb is not installed (make setup installs it as root: apt-get install xvfb)",
    ),
]


def test_every_page_at_three_real_sizes_on_a_real_x_server(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "TFDOCTOR_STATE_DIR": str(tmp_path / "state"),
    }
    shutil.rmtree(OUT, ignore_errors=True)
    p = subprocess.run(
        [sys.executable, str(TOUR), "--xvfb", "--out", str(OUT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert (OUT / "report.json").is_file(), p.stdout[-3000:] + p.stderr[-3000:]
    report = json.loads((OUT / "report.json").read_text())
    assert set(report) == {"1440x900", "1024x700", "1920x1080"}, p.stdout + p.stderr[-3000:]
    for size, pages in report.items():
        assert list(pages) == ["start", "checks", "reproduce", "diagnosis", "fix", "export"]
        for page in pages:
            shot = OUT / size / f"{list(pages).index(page) + 1:02d}-{page}.png"
            assert shot.stat().st_size > 10_000, shot  # a real picture, not an empty one
    problems = [f"{size} {page}: {p}" for size, pages in report.items()
                for page, found in pages.items() for p in found]  # fmt: skip
    assert problems == [], "\n".join(problems)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
