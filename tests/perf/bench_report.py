"""Benchmark: what keeping and sharing an investigation costs, side by side in one run.

A big investigation: an hour of 10 Hz telemetry (36,000 samples with a GPU and TensorFlow's
numbers) from the benchmark, a 32 MiB crash log (a real TF GPU-OOM log from the corpus
repeated) and a pasted one. Measured, alternating, median of rounds:

1. save (`.tfdoctor`) and open, against writing and reading the same logs and trace as
   plain files (the floor: what any format must at least do), as a ratio;
2. the report (content + HTML with its SVG plot + Markdown), against the analysis it
   presents (which the app has anyway): what sharing adds, as a ratio;
3. the file's size against the raw bytes it holds.

Targets: save + open within 3x the plain files; the report within 0.5x the analysis (the
Export page builds it on the GUI thread: it must stay short beside the analysis, which runs
on a worker); the file at most half the raw size.

Usage: python tests/perf/bench_report.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tfdoctor.core import telemetry  # noqa: E402
from tfdoctor.core.redact import Identity  # noqa: E402
from tfdoctor.core.report import content, investigation, render  # noqa: E402
from tfdoctor.core.session import Session, analyse  # noqa: E402

LOG = REPO / "tests" / "fixtures" / "corpus" / "dev" / "gpu_oom__mozilla-DeepSpeech-606.txt"
SAVE_RATIO, REPORT_RATIO, SIZE_RATIO = 3.0, 0.5, 0.5


def telemetry_hour() -> list[tuple[str, dict[str, object]]]:
    items: list[tuple[str, dict[str, object]]] = []
    gib = 1 << 30
    for i in range(36_000):
        t = round(i * 0.1, 1)
        used = int(2 * gib + (i % 600) * 8 * (1 << 20))
        items.append(
            (
                "sample",
                {
                    "t": t,
                    "ram_used": 6 * gib + i * 1000,
                    "ram_total": 32 * gib,
                    "ram_available": 26 * gib,
                    "swap_used": 0,
                    "swap_total": 0,
                    "rss": {"4242": 3 * gib + i * 500},
                    "gpus": [{"index": 0, "used": used, "total": 24 * gib, "util": 97}],
                },
            )
        )
        if i % 10 == 0:
            items.append(("tf", {"t": t, "GPU:0": {"current": used - gib, "peak": used}}))
    return items


def build(work: Path) -> tuple[Session, int]:
    text = LOG.read_bytes()
    big = work / "train.log"
    with big.open("wb") as fh:
        while fh.tell() < 32 << 20:
            fh.write(text)
    s = Session(door="log")
    s.add_log("pasted text", text[-4000:])
    s.add_log(big.name, path=str(big))
    s.telemetry = telemetry_hour()
    raw = big.stat().st_size + 4000 + len(telemetry.trace_bytes(s.telemetry, {}))
    return s, raw


def plain(s: Session, work: Path) -> None:
    """The floor: the same bytes written and read back as plain files."""
    log = Path(s.logs[1].path or "")
    (work / "plain.log").write_bytes(log.read_bytes())
    (work / "plain.trace").write_bytes(telemetry.trace_bytes(s.telemetry, {}))
    (work / "plain.log").read_bytes()
    telemetry.parse_trace((work / "plain.trace").read_bytes().splitlines(), "plain")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        s, raw = build(work)
        path = work / "big.tfdoctor"
        floor, ours, analysis_s, report_s = [], [], [], []
        analysis = None
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            plain(s, work)
            t1 = time.perf_counter()
            investigation.save(s, path, Identity())
            opened = investigation.load(path)
            t2 = time.perf_counter()
            analysis = analyse(opened.session.inputs())
            t3 = time.perf_counter()
            rep = content.build(opened.session, analysis)
            render.to_html(rep)
            render.to_markdown(rep)
            t4 = time.perf_counter()
            floor.append(t1 - t0)
            ours.append(t2 - t1)
            analysis_s.append(t3 - t2)
            report_s.append(t4 - t3)
        size = path.stat().st_size
    f, o = statistics.median(floor), statistics.median(ours)
    a, r = statistics.median(analysis_s), statistics.median(report_s)
    checks = [
        ("save + open vs plain files", o / f, SAVE_RATIO, f"{o:.2f} s vs {f:.2f} s"),
        ("report vs the analysis", r / a, REPORT_RATIO, f"{r:.2f} s vs {a:.2f} s"),
        ("file size vs raw bytes", size / raw, SIZE_RATIO, f"{size >> 20} MiB of {raw >> 20} MiB"),
    ]
    print(f"bench_report: an hour of 10 Hz telemetry and a {raw >> 20} MiB investigation")
    ok = True
    for name, ratio, target, said in checks:
        good = ratio <= target
        ok = ok and good
        print(f"  {name}: {ratio:.2f}x ({said}); target <= {target}x: {'ok' if good else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
