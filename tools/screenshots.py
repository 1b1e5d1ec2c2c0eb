"""Re-take the README's pictures: the window tour's pages at 1440x900 on a real X server.

The tour (tools/window_tour.py) does real work on this machine: a real crash log, the check of
this Python, a real run killed under a RAM cap, a fix verified by a re-run. Its 1440x900
screenshots are copied to docs/screenshots. Needs Xvfb (`make setup` installs it as root).

Usage: python tools/screenshots.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZE = "1440x900"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfdoctor-shots-") as tmp:
        tour = [sys.executable, str(REPO / "tools" / "window_tour.py"), "--xvfb"]
        code = subprocess.run([*tour, "--sizes", SIZE, "--out", tmp], check=False).returncode
        shots = sorted((Path(tmp) / SIZE).glob("*.png"))
        if not shots:
            print("screenshots: the window tour made no pictures", file=sys.stderr)
            return code or 1
        args.out.mkdir(parents=True, exist_ok=True)
        for shot in shots:
            shutil.copyfile(shot, args.out / shot.name)
            print(args.out / shot.name)
    return code


if __name__ == "__main__":
    sys.exit(main())
