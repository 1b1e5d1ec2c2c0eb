"""Benchmark: supervision overhead and the batch-size search's cost, side by side in one run.

1. Overhead (issue 4 target: supervised steps/s >= 95% of the plain run): the same Keras fit
   (MLP on the CPU, same batch, same steps, same data) run by a plain script and by
   `run_bench`, alternating, several rounds; both measure steady steps/s the same way (batch
   ends after the first, timed by perf_counter in a one-line callback).
2. Batch search (target: at most ceil(log2(max/start)) + ceil(log2(1/margin)) + 2 probes and
   one worker start unless a fatal crash forced a respawn): the probe count against its
   budget, workers started, and the total time against one plain TensorFlow import plus the
   probes' own training time. Under a memory cap (a memory cgroup) when the machine allows
   it, so that a real OOM kill is part of the search; without a cap otherwise.

Usage: python tests/perf/bench_supervisor.py [--rounds 5] [--steps 400]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PLAIN = r"""
import json, sys, time
import numpy as np
import tensorflow as tf
keras = tf.keras
steps, batch = int(sys.argv[1]), int(sys.argv[2])
x = np.random.rand(steps * batch, 784).astype("float32")
y = np.random.randint(0, 10, size=(steps * batch,)).astype("int32")
model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                          keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)])
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
ends = []
class Clock(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        ends.append(time.perf_counter())
model.fit(x, y, batch_size=batch, epochs=1, verbose=2, callbacks=[Clock()])
print("RESULT " + json.dumps({"steady_steps_per_s": (len(ends) - 1) / (ends[-1] - ends[0])}))
"""

RATIO_TARGET = 0.95


def plain_run(steps: int, batch: int) -> float:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    p = subprocess.run(
        [sys.executable, "-c", PLAIN, str(steps), str(batch)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=True,
    )
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("RESULT "))
    return float(json.loads(line[len("RESULT ") :])["steady_steps_per_s"])


def supervised_run(steps: int, batch: int) -> float:
    from tfdoctor.core.bench.config import BenchConfig
    from tfdoctor.core.bench.supervisor import SupervisorOptions, run_bench
    from tfdoctor.core.probes.targetrun import current_target

    cfg = BenchConfig(preset="mlp", batch_size=batch, steps=steps, device="cpu")
    res = run_bench(current_target(), cfg, SupervisorOptions(guard_mib=0))
    assert res.outcome.status == "completed", res.outcome.detail
    return float(res.metrics["steady_steps_per_s"])


def import_time() -> float:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "import tensorflow"], env=env, check=True, capture_output=True
    )
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    os.environ.setdefault("TFDOCTOR_STATE_DIR", tempfile.mkdtemp(prefix="tfdoctor-bench-"))
    ok = True

    plain, sup = [], []
    for _ in range(args.rounds):
        plain.append(plain_run(args.steps, args.batch))
        sup.append(supervised_run(args.steps, args.batch))
    ratio = statistics.median(sup) / statistics.median(plain)
    ok &= ratio >= RATIO_TARGET
    print(
        f"overhead: plain {statistics.median(plain):.1f} steps/s, supervised "
        f"{statistics.median(sup):.1f} steps/s (medians of {args.rounds}, MLP batch "
        f"{args.batch}, {args.steps} steps): ratio {ratio:.3f} (target >= {RATIO_TARGET})"
    )

    from tfdoctor.core.bench import memcg
    from tfdoctor.core.bench.batchsearch import SearchOptions, find_max_batch, probe_budget
    from tfdoctor.core.bench.config import BenchConfig
    from tfdoctor.core.bench.supervisor import SupervisorOptions
    from tfdoctor.core.probes.targetrun import current_target

    capped = memcg.unavailable() is None
    cfg = BenchConfig(preset="mlp", batch_size=256, steps=40, device="cpu")
    search = SearchOptions(start=256, max_batch=16384, margin=0.10)
    opts = SupervisorOptions(memory_cap_mib=1100 if capped else None, guard_mib=0, stall_s=30)
    t_import = import_time()
    t0 = time.perf_counter()
    res = find_max_batch(current_target(), cfg, search, opts)
    total = time.perf_counter() - t0
    budget = probe_budget(256, 16384, 0.10)
    own = sum(float(p.get("duration_s") or 0.0) for p in res.probes)
    fatal = sum(p["status"] not in ("ok", "oom") for p in res.probes[:-1])
    ok &= len(res.probes) <= budget and res.metrics["workers_started"] == 1 + fatal
    r = res.recommendation or {}
    print(
        f"batch search ({'memory cap 1100 MiB' if capped else 'no memory cap available'}): "
        f"{len(res.probes)} probes (budget {budget}), {res.metrics['workers_started']} worker "
        f"starts ({fatal} forced by fatal crashes); largest clean {r.get('largest_clean_batch')}"
        f", first failing {r.get('first_failing_batch')}, recommended "
        f"{r.get('recommended_batch')}"
    )
    print(
        f"batch search time: {total:.1f} s vs one TF import {t_import:.1f} s + the probes' own "
        f"training {own:.1f} s = {t_import + own:.1f} s (ratio {total / (t_import + own):.2f}; "
        f"each respawn costs another import)"
    )
    print("  " + ", ".join(f"{p['batch_size']}:{p['status']}" for p in res.probes))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
