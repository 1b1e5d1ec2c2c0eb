"""A run's numbers: steps, speed, TF's peak memory, the worker's RSS peak."""

from __future__ import annotations

import statistics
from typing import Any

from tfdoctor.core.bench.outcome import RunRecord

# Said where TF's in-use/peak would be when the allocator keeps no statistics.
TF_MEMORY_NOT_REPORTED = "not reported by this TensorFlow build"


def run_metrics(rr: RunRecord, peaks: dict[str, int]) -> dict[str, Any]:
    done = rr.done or {}
    steps = rr.steps
    step_times = [float(s["step_s"]) for s in steps[1:] if s.get("step_s")]
    peak_dev: dict[str, int] = dict(done.get("peak") or {})
    for s in steps:
        for dev, m in (s.get("mem") or {}).items():
            if isinstance(m, dict) and isinstance(m.get("peak"), int):
                peak_dev[dev] = max(peak_dev.get(dev, 0), m["peak"])
    rss_peak = max(
        [int(done.get("rss_peak") or 0), peaks.get("rss", 0)]
        + [int(s.get("rss") or 0) for s in steps]
    )
    return {
        "steps_done": int(done.get("steps") or (steps[-1]["step"] if steps else 0)),
        "duration_s": done.get("duration_s"),
        "first_step_s": done.get("first_step_s"),
        "steady_steps_per_s": done.get("steady_steps_per_s"),
        "examples_per_s": done.get("examples_per_s"),
        "median_step_s": round(statistics.median(step_times), 6) if step_times else None,
        "tf_peak_bytes": peak_dev,
        "rss_peak_bytes": rss_peak or None,
        "ram_used_peak_bytes": peaks.get("ram_used"),
    }
