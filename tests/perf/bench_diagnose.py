"""Benchmark: `diagnose` on huge logs vs merely iterating their lines, side by side.

Targets (issue 3): diagnosing a file takes at most 3x the time of `for line in file: pass`
on a 200 MB log made of real lines; RSS stays under 100 MB for a 1 GB log (streaming); a
50-line paste is diagnosed in well under 50 ms after import.
Usage: python tests/perf/bench_diagnose.py [--mb 200] [--memory-gb 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
CRASH_SOURCES = [FIXTURES / "corpus" / "dev", FIXTURES / "logs"]
BENIGN = REPO / "tests" / "fixtures" / "logs" / "real_keras_training_cpu.txt"
CRASH_FRACTION = 0.01  # a long log is mostly training output; 1 line in 100 is a crash line
RATIO_TARGET, RSS_TARGET_MB, PASTE_TARGET_MS = 3.0, 100, 50


def real_logs(folders: list[Path] = CRASH_SOURCES) -> list[list[str]]:
    """Each real crash log (corpus and fixtures) as a list of its lines."""
    logs = []
    for folder in folders:
        for f in sorted(folder.glob("*.txt")):
            text = f.read_text(encoding="utf-8", errors="replace")
            body = text.partition("\n---\n")[2] or text
            logs.append([line for line in body.splitlines() if line.strip()])
    return logs


def real_lines() -> list[str]:
    return [line for log in real_logs() for line in log]


def make_crash_only_log(path: Path, megabytes: int, seed: int = 11) -> None:
    """The worst case: whole real crash logs back to back, nothing else (every line is a
    crash line; thousands of BFC dumps). Reported, not a target."""
    rng = random.Random(seed)
    crashes = real_logs()
    target = megabytes << 20
    written = 0
    with path.open("w", encoding="utf-8") as fh:
        while written < target:
            block = "\n".join(line for _ in range(20) for line in rng.choice(crashes)) + "\n"
            fh.write(block)
            written += len(block.encode())


def make_log(path: Path, megabytes: int, seed: int = 7) -> float:
    """Real lines until the file reaches the size: recorded training output, with whole real
    crash logs (corpus and fixtures, each kept contiguous as in a real log) making up about
    1% of the lines, at random places. Fixed seed: the same file every run. Returns the share
    of crash lines written."""
    rng = random.Random(seed)
    crashes = real_logs()
    benign = [line for line in BENIGN.read_text(encoding="utf-8").splitlines()[1:] if line.strip()]
    # a crash log in place of a benign line, at a rate that makes its lines CRASH_FRACTION of
    # all lines whatever the fixtures' mean length (which grows as the corpus does)
    mean_len = statistics.fmean(len(log) for log in crashes)
    rate = CRASH_FRACTION / (mean_len * (1 - CRASH_FRACTION) + CRASH_FRACTION)
    target = megabytes << 20
    written = crash_lines = all_lines = 0
    with path.open("w", encoding="utf-8") as fh:
        while written < target:
            lines: list[str] = []
            while len(lines) < 2000:
                if rng.random() < rate:
                    crash = rng.choice(crashes)
                    lines += crash
                    crash_lines += len(crash)
                else:
                    lines.append(rng.choice(benign))
            all_lines += len(lines)
            block = "\n".join(lines) + "\n"
            fh.write(block)
            written += len(block.encode())
    return crash_lines / all_lines


def iterate(path: Path) -> float:
    t0 = time.perf_counter()
    with path.open(encoding="utf-8", errors="replace") as fh:
        for _line in fh:
            pass
    return time.perf_counter() - t0


def run_diagnose(path: Path) -> float:
    from tfdoctor.core.diagnose.engine import diagnose

    t0 = time.perf_counter()
    diagnose(path)
    return time.perf_counter() - t0


MEMORY_CHILD = """
import resource, sys
from pathlib import Path
from tfdoctor.core.diagnose.engine import diagnose
diagnose(b"warm up\\n")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
d = diagnose(Path(sys.argv[1]))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(base // 1024, peak // 1024, d.lines_read, d.causes[0].id if d.causes else "-")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--memory-gb", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="tfdoctor-bench-") as tmp:
        log = Path(tmp) / "big.log"
        share = make_log(log, args.mb)
        run_diagnose(Path(__file__))  # import and compile once, outside the timing
        a, b = [], []
        for _ in range(args.rounds):
            a.append(iterate(log))
            b.append(run_diagnose(log))
        ratio = statistics.median(b) / statistics.median(a)
        ok &= ratio <= RATIO_TARGET
        print(
            f"{args.mb} MB log: iterate lines median {statistics.median(a):.2f} s, "
            f"diagnose median {statistics.median(b):.2f} s ({share:.2%} crash lines)"
        )
        print(f"ratio diagnose/iterate: {ratio:.2f} (target <= {RATIO_TARGET})")

        stress = Path(tmp) / "crashes.log"
        make_crash_only_log(stress, max(1, args.mb // 4))
        a, b = [], []
        for _ in range(args.rounds):
            a.append(iterate(stress))
            b.append(run_diagnose(stress))
        print(
            f"{max(1, args.mb // 4)} MB of crash logs only (worst case, no target): "
            f"ratio {statistics.median(b) / statistics.median(a):.2f}"
        )

        from tfdoctor.core.diagnose.engine import diagnose

        paste = "\n".join(real_lines()[:50]).encode()
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            diagnose(paste)
            times.append((time.perf_counter() - t0) * 1000)
        paste_ms = statistics.median(times)
        ok &= paste_ms < PASTE_TARGET_MS
        print(f"50-line paste: median {paste_ms:.1f} ms (target < {PASTE_TARGET_MS} ms)")

        if args.memory_gb > 0:
            big = Path(tmp) / "huge.log"
            make_log(big, int(args.memory_gb * 1024))
            out = subprocess.run(
                [sys.executable, "-c", MEMORY_CHILD, str(big)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            base_mb, peak_mb = int(out[0]), int(out[1])
            ok &= peak_mb < RSS_TARGET_MB + base_mb
            print(
                f"{args.memory_gb:g} GB log: RSS {base_mb} MB after import, peak {peak_mb} MB "
                f"while diagnosing {int(out[2]):,} lines (growth {peak_mb - base_mb} MB, "
                f"target < {RSS_TARGET_MB} MB); top cause {out[3]}"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
