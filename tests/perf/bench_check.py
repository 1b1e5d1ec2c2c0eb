"""Benchmark: `tfdoctor check` wall time vs a bare `python -c "import tensorflow"`, side by side.

The target is ratio <= 1.2: everything but the TensorFlow import runs concurrently with it.
Runs alternate (A, B, A, B, ...) so machine noise hits both alike; reports medians and the
ratio of medians. Usage: python tests/perf/bench_check.py [--rounds N] [--python PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_RATIO = 1.2


def timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t0
    if proc.returncode not in (0, 1):  # 1 = the check found an error: still a full run
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", default=sys.executable, help="target interpreter")
    args = ap.parse_args()
    tfdoctor = shutil.which("tfdoctor", path=str(Path(sys.executable).parent)) or "tfdoctor"
    bare = [args.python, "-c", "import tensorflow"]
    check = [tfdoctor, "check", "--json", "--python", args.python]
    os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    timed(bare)  # warm the page cache for both
    timed(check)
    a, b = [], []
    for _ in range(args.rounds):
        a.append(timed(bare))
        b.append(timed(check))
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = mb / ma
    print(f"import tensorflow : median {ma:.2f} s  runs {[round(x, 2) for x in a]}")
    print(f"tfdoctor check    : median {mb:.2f} s  runs {[round(x, 2) for x in b]}")
    verdict = "OK" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(f"ratio check/import: {ratio:.2f} (target <= {TARGET_RATIO}) {verdict}")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
