"""The HTML report of a real investigation, opened in a real browser (headless Chromium from
Debian, which `make setup` installs when run as root): its plots decode as images at their
size, nothing is fetched, every section is there, nothing overflows the page's width, and a
log's own markup stays text. A screenshot is left in build/report-render/ to look at."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tfdoctor.core.report import content, render
from tfdoctor.core.report.investigation import load
from tfdoctor.core.session import Session

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium (as root, `make setup` installs Debian's)"
)
WIDTH = 1000
# what the page says about itself once loaded; the report itself has no script (and its
# Content-Security-Policy forbids one): the test's copy drops the policy to run this
PROBE = """<script>
window.addEventListener("load", () => {
  const out = {
    images: [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]),
    fetched: performance.getEntriesByType("resource").map(e => e.name)
      .filter(n => !n.startsWith("data:")),
    sections: [...document.querySelectorAll("h2")].map(h => h.textContent),
    scripts: document.scripts.length,
    scroll_width: document.documentElement.scrollWidth,
    headline: document.getElementById("headline").innerText,
  };
  const pre = document.createElement("pre");
  pre.id = "tfdoctor-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def _chromium(*args: str, cwd: Path) -> str:
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # as root
            "--disable-gpu",
            "--hide-scrollbars",
            f"--window-size={WIDTH},2400",
            "--virtual-time-budget=5000",
            f"--user-data-dir={cwd / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _probe(html_text: str, work: Path) -> dict[str, Any]:
    page = work / "probe.html"
    without_csp = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html_text)
    page.write_text(without_csp.replace("</body>", PROBE + "</body>"))
    dom = _chromium("--dump-dom", page.as_uri(), cwd=work)
    found = re.search(r'<pre id="tfdoctor-probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return dict(json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")))


@pytest.mark.slow
def test_the_report_renders_in_a_real_browser(
    real_investigation: tuple[Any, Path], tmp_path: Path
) -> None:
    _, path = real_investigation
    opened = load(path)
    rep = content.build(opened.session, opened.session.analysis(), identity=opened.identity)
    html_text = render.to_html(rep)
    seen = _probe(html_text, tmp_path)
    assert seen["images"] == [[True, 820, 300], [True, 820, 300]]  # both plots decoded
    assert seen["fetched"] == []
    assert seen["sections"][:4] == ["Environment", "The error", "Diagnosis", "What was tried"]
    assert "out of RAM" in seen["headline"]
    assert seen["scripts"] == 1  # the probe's own
    assert seen["scroll_width"] <= WIDTH  # long log lines wrap: no sideways scrolling
    # the report as a user opens it (its policy on) rendered to a picture to look at
    out = REPO / "build" / "report-render"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.html").write_text(html_text)
    shot = out / "report.png"
    shot.unlink(missing_ok=True)
    _chromium(f"--screenshot={shot}", (out / "report.html").as_uri(), cwd=tmp_path)
    assert shot.stat().st_size > 50_000  # a page with a table and two plots, not a blank


def test_a_logs_markup_stays_text_in_a_browser(tmp_path: Path) -> None:
    s = Session(door="log")
    s.add_log("pasted text", b'<script>alert(1)</script><img src="http://x.invalid/a.png">\n')
    seen = _probe(render.to_html(content.build(s, s.analysis())), tmp_path)
    assert seen["scripts"] == 1 and seen["images"] == [] and seen["fetched"] == []
