"""Benchmark: GUI responsiveness, plot cost and sampler overhead (issue 5 targets).

1. Event-loop latency during a real benchmark run (CPU TensorFlow worker, telemetry at 10 Hz,
   the Reproduce page plotting live): a QTimer probe fires every 10 ms and records how late
   each tick is. Target: 99th percentile under 50 ms.
2. Plot cost with an hour of history: six curves holding 36,000 points each (10 Hz x 3600
   s), then one new point per curve per frame, as during a run. Target: under 16 ms per
   frame (setData on every curve plus the repaint), median and 95th percentile reported.
3. Sampler overhead: a sampler at 10 Hz (and at 50 Hz, reported) following one process,
   alone in a child process for 30 s; its CPU time over wall time. Target: under 2% of one
   core at 10 Hz.

Usage: QT_QPA_PLATFORM=offscreen python tests/perf/bench_gui.py [--sampler-seconds 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

LATENCY_P99_MS, FRAME_MS, SAMPLER_PCT = 50.0, 16.0, 2.0

SAMPLER_CHILD = """
import os, sys, time
from tfdoctor.core import telemetry
interval, seconds = float(sys.argv[1]), float(sys.argv[2])
tl = telemetry.Timeline()
s = telemetry.Sampler(tl, interval_s=interval, pids=[os.getppid()]).start()
t0, c0 = time.monotonic(), time.process_time()
time.sleep(seconds)
c1, t1 = time.process_time(), time.monotonic()
s.stop()
print(100.0 * (c1 - c0) / (t1 - t0), s.samples / (t1 - t0))
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency_during_a_run() -> tuple[float, float, int, str]:
    from PySide6.QtCore import QElapsedTimer, QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from tfdoctor.core.bench.config import BenchConfig
    from tfdoctor.core.bench.supervisor import SupervisorOptions
    from tfdoctor.gui.app import setup_application
    from tfdoctor.gui.pages.bench_page import BenchPage

    app = QApplication.instance() or QApplication(sys.argv)
    setup_application(app)
    page = BenchPage(options=SupervisorOptions(sample_every_s=0.1, guard_mib=0))
    page.resize(1200, 800)
    page.show()
    lateness: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    last = [clock.elapsed()]

    def tick() -> None:
        now = clock.elapsed()
        lateness.append(max(0.0, now - last[0] - 10.0))
        last[0] = now

    probe = QTimer()
    probe.setInterval(10)
    probe.timeout.connect(tick)
    page.start(BenchConfig(preset="cnn", input_shape=(64, 64, 3), steps=150, device="cpu"))
    probe.start()
    loop = QEventLoop()
    page.bridge.sig_finished.connect(loop.quit)
    page.bridge.sig_failed.connect(loop.quit)
    QTimer.singleShot(300_000, loop.quit)
    loop.exec()
    probe.stop()
    status = page.last_result.outcome.status if page.last_result else "no result"
    return percentile(lateness, 0.99), statistics.median(lateness), len(lateness), status


def plot_frame_cost() -> tuple[float, float]:
    from PySide6.QtWidgets import QApplication

    from tfdoctor.gui.telemetry_plot import TelemetryPlot

    app = QApplication.instance() or QApplication(sys.argv)
    plot = TelemetryPlot()
    plot.resize(1000, 600)
    plot.show()
    n = 36_000
    items = []
    for i in range(n):
        t = i * 0.1
        items.append(
            (
                "sample",
                {
                    "t": t,
                    "ram_used": 8e9 + 1e6 * (i % 500),
                    "ram_total": 24e9,
                    "swap_used": 1e8,
                    "swap_total": 4e9,
                    "rss": {"1": 3e9 + 1e5 * i},
                    "gpus": [{"index": 0, "used": 20e9 + 1e5 * (i % 900), "total": 24e9}],
                },
            )
        )
        items.append(("tf", {"t": t, "GPU:0": {"current": 15e9 + i, "peak": 18e9}}))
    plot.consume(items)
    plot.redraw()
    app.processEvents()
    costs = []
    for k in range(200):
        t = (n + k) * 0.1
        plot.consume([("sample", {**items[-2][1], "t": t}), ("tf", {**items[-1][1], "t": t})])
        t0 = time.perf_counter()
        plot.redraw()
        plot.memory.viewport().repaint()
        costs.append((time.perf_counter() - t0) * 1000)
    assert len(plot.curves) == 6, sorted(plot.curves)
    return statistics.median(costs), percentile(costs, 0.95)


def sampler_overhead(seconds: float, interval: float) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", SAMPLER_CHILD, str(interval), str(seconds)],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    ).stdout.split()
    return float(out[0]), float(out[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sampler-seconds", type=float, default=30.0)
    args = ap.parse_args()
    os.environ.setdefault("TFDOCTOR_STATE_DIR", tempfile.mkdtemp(prefix="tfdoctor-bench-"))
    ok = True
    p99, p50, ticks, status = latency_during_a_run()
    ok &= p99 < LATENCY_P99_MS and status == "completed"
    print(
        f"event loop during a real run ({status}, telemetry at 10 Hz): QTimer lateness p99 "
        f"{p99:.1f} ms, median {p50:.1f} ms over {ticks} ticks (target p99 < {LATENCY_P99_MS})"
    )
    med, p95 = plot_frame_cost()
    ok &= med < FRAME_MS
    print(
        f"plot frame with 1 h of history (6 curves x 36,000 points): median {med:.1f} ms, "
        f"p95 {p95:.1f} ms (target < {FRAME_MS} ms)"
    )
    pct10, rate10 = sampler_overhead(args.sampler_seconds, 0.1)
    pct50, rate50 = sampler_overhead(min(args.sampler_seconds, 10.0), 0.02)
    ok &= pct10 < SAMPLER_PCT
    print(
        f"sampler: {pct10:.2f}% of one core at 10 Hz ({rate10:.1f} samples/s over "
        f"{args.sampler_seconds:.0f} s; target < {SAMPLER_PCT}%); {pct50:.2f}% at 50 Hz "
        f"({rate50:.1f} samples/s)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
