"""Benchmark: what `tfdoctor watch` costs the training it watches, side by side in one run.

1. Overhead (issue 16 target: steps/s watched >= 0.98 of unwatched): one real Keras fit (an
   MLP on the CPU, with the notebook's first cell, so TensorFlow's own numbers are written
   too) prints its steps/s every second; `tfdoctor watch --pid` at its default rate (4 Hz)
   and at 10 Hz is started and stopped over it in alternating windows, and the median
   steps/s of the watched windows is compared with the unwatched ones around them. One
   process, one machine state: the noise hits both.
2. The sampler's own cost at each rate: the watch process's CPU time (user + system) over a
   window, as a share of one core.

Usage: python tests/perf/bench_watch.py [--rounds 6] [--window 6]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

TARGET_RATIO = 0.98
TRAIN = r"""
import os, sys, time
exec(open(sys.argv[1]).read())  # the notebook's first cell, as a user pastes it
import numpy as np, tensorflow as tf
x = np.random.rand(4096, 256).astype("float32"); y = np.random.rand(4096, 1).astype("float32")
model = tf.keras.Sequential([tf.keras.Input((256,)), tf.keras.layers.Dense(256, "relu"),
                             tf.keras.layers.Dense(256, "relu"), tf.keras.layers.Dense(1)])
model.compile("adam", "mse")
class Rate(tf.keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.n, self.t = 0, time.perf_counter()
    def on_train_batch_end(self, batch, logs=None):
        self.n += 1
        now = time.perf_counter()
        if now - self.t >= 1.0:
            print(f"RATE {self.n / (now - self.t):.3f}", flush=True)
            self.n, self.t = 0, now
model.fit(x, y, batch_size=64, epochs=100000, verbose=0, callbacks=[Rate()])
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--window", type=float, default=6.0, help="seconds per window")
    args = ap.parse_args()
    tfdoctor = str(Path(sys.executable).with_name("tfdoctor"))
    with tempfile.TemporaryDirectory(prefix="tfdoctor-bench-watch-") as tmp:
        env = {**os.environ, "TFDOCTOR_STATE_DIR": tmp, "TF_CPP_MIN_LOG_LEVEL": "3"}
        tf_file = Path(tmp) / "tf.jsonl"
        cell = subprocess.run(
            [tfdoctor, "watch", "--first-cell", "--tf-file", str(tf_file)],
            capture_output=True, text=True, check=True, env=env,
        ).stdout  # fmt: skip
        cell_path = Path(tmp) / "cell.py"
        cell_path.write_text(cell)
        train = subprocess.Popen(
            [sys.executable, "-c", TRAIN, str(cell_path)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )  # fmt: skip
        rates: list[tuple[float, float]] = []

        def read() -> None:
            assert train.stdout is not None
            for line in train.stdout:
                if line.startswith("RATE "):
                    rates.append((time.monotonic(), float(line.split()[1])))

        threading.Thread(target=read, daemon=True).start()
        try:
            deadline = time.monotonic() + 120
            while len(rates) < 4 and time.monotonic() < deadline:  # warmed up
                time.sleep(0.2)
            off: list[float] = []
            on: dict[int, list[float]] = {250: [], 100: []}
            shares: dict[int, list[float]] = {250: [], 100: []}

            def window() -> list[float]:
                start = time.monotonic()
                time.sleep(args.window)
                return [r for t, r in rates if start + 1.0 <= t <= start + args.window]

            for _ in range(args.rounds):
                for interval_ms in (250, 100):
                    off += window()
                    watch = subprocess.Popen(
                        [tfdoctor, "watch", "--pid", str(train.pid), "--interval-ms",
                         str(interval_ms), "--tf-file", str(tf_file)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                    )  # fmt: skip
                    proc = psutil.Process(watch.pid)
                    time.sleep(1.5)  # its start (imports) is not the steady cost
                    c0 = sum(proc.cpu_times()[:2])
                    t0 = time.monotonic()
                    on[interval_ms] += window()
                    used = sum(proc.cpu_times()[:2]) - c0
                    shares[interval_ms].append(used / (time.monotonic() - t0))
                    watch.send_signal(signal.SIGINT)
                    watch.wait(30)
            off += window()
        finally:
            train.kill()
            train.wait()
    base = statistics.median(off)
    print(f"steps/s unwatched: median {base:.2f} ({len(off)} windows of 1 s)")
    ratios = {}
    for interval_ms, rate in ((250, "4 Hz, the default"), (100, "10 Hz")):
        ratios[interval_ms] = statistics.median(on[interval_ms]) / base
        print(
            f"watched at {rate}: median {statistics.median(on[interval_ms]):.2f} steps/s, "
            f"ratio {ratios[interval_ms]:.3f}; the watcher's own CPU "
            f"{statistics.median(shares[interval_ms]):.1%} of one core"
        )
    ratio = ratios[250]
    print(f"target: ratio at the default rate >= {TARGET_RATIO}: {ratio:.3f}")
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
