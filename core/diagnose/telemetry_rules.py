"""Causes only a run's timeline shows: a memory leak, tf.function retracing, an input-bound GPU.

Pure rules over telemetry items (`core.telemetry` kinds: sample, tf, step, marker), from a
live run or a recorded trace.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tfdoctor.core.diagnose.engine import CauseInfo, shipped_causes
from tfdoctor.core.model import Cause, Evidence
from tfdoctor.core.series import TF_IN_USE, WORKER_RSS, memory_series

LEAK_MIN_GROWTH = 64 << 20  # bytes over the steady state
LEAK_MIN_FRACTION = 0.15  # of the starting level
LEAK_MIN_R2 = 0.8
LEAK_MIN_READINGS = 10  # of one series along the steady state
TRACING_FACTOR = 10.0  # the first step this many times a normal step
RETRACE_MIN_S = 0.1  # a later step slower than this (and the factor) was traced again
RETRACE_OF_FIRST = 0.25  # a later step at least this part of the first step's time
INPUT_BOUND_UTIL = 30  # % GPU utilisation while steps run


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(slope, r squared) of a least-squares line; (0, 0) for fewer than 3 points or a flat
    series."""
    n = len(xs)
    if n < 3:
        return 0.0, 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    if sxx == 0 or syy == 0:
        return 0.0, 0.0
    return sxy / sxx, (sxy * sxy) / (sxx * syy)


def telemetry_causes(
    items: Iterable[tuple[str, dict[str, Any]]], causes: dict[str, CauseInfo] | None = None
) -> list[Cause]:
    """Causes only the timeline shows: a leak, tracing/retracing, an input-bound GPU."""
    info = causes or shipped_causes()
    items = list(items)
    steady_at = next(
        (i["t"] for k, i in items if k == "marker" and i.get("label") == "steady state"), None
    )
    steps = [i for k, i in items if k == "step" and isinstance(i.get("step_s"), (int, float))]
    out: list[Cause] = []

    def cause(
        cid: str, confidence: float, evidence: list[str], at: tuple[float, float] | None = None
    ) -> Cause:
        c = info[cid]
        ev = tuple(Evidence(text, source="telemetry", at=at) for text in evidence)
        return Cause(cid, round(confidence, 2), c.title, c.explanation, ev, c.fixes)

    # a leak: the worker's memory (RSS, or TF's in-use) climbs along the steady state; the
    # RSS each step record carries is read more often than the sampler's, and decides a
    # short run the samples are too few for
    if steady_at is not None:
        end_t = steps[-1]["t"] if steps else None
        found = memory_series(items, since_t=steady_at, until_t=end_t)
        at_steps = [
            (float(s["t"]), float(s["rss"]))
            for s in steps
            if s["t"] >= steady_at and isinstance(s.get("rss"), (int, float))
        ]
        step_rss = ([x for x, _ in at_steps], [y for _, y in at_steps])
        for name, (xs, ys) in (
            ("RSS", found.get(WORKER_RSS, ([], []))),
            ("TF in use", found.get(TF_IN_USE, ([], []))),
            ("RSS", step_rss),
        ):
            if len(xs) < LEAK_MIN_READINGS:
                continue
            slope, r2 = fit_line(xs, ys)
            growth = ys[-1] - ys[0]
            if (
                r2 >= LEAK_MIN_R2
                and slope > 0
                and growth >= max(LEAK_MIN_GROWTH, LEAK_MIN_FRACTION * max(ys[0], 1.0))
            ):
                conf = min(0.9, 0.5 + 0.4 * r2 * min(1.0, growth / (4 * LEAK_MIN_GROWTH)))
                out.append(
                    cause(
                        "memory_leak",
                        conf,
                        [
                            f"{name} grew {growth / 2**20:.0f} MiB over {xs[-1] - xs[0]:.0f} s "
                            f"of training ({slope / 2**20:.1f} MiB/s, steady: R² {r2:.2f})"
                        ],
                        (xs[0], xs[-1]),
                    )
                )
                break
    # tracing: a first step far slower than a normal step; retracing: later steps that slow
    # down as much again. Step records are rate-limited but slow steps are always reported,
    # so the baseline is a low percentile of the recorded times, not their median.
    if len(steps) >= 5:
        first = float(steps[0]["step_s"])
        later = sorted(float(s["step_s"]) for s in steps[1:])
        base = later[len(later) // 10]
        if base > 0 and first >= TRACING_FACTOR * base:
            # a retrace costs about what the first trace did; a loaded machine's hiccups are
            # shorter than that (and than RETRACE_MIN_S)
            floor = max(TRACING_FACTOR * base, RETRACE_MIN_S, RETRACE_OF_FIRST * first)
            slow = [s for s in steps[1:] if float(s["step_s"]) >= floor]
            if len(slow) >= 3:
                out.append(
                    cause(
                        "tf_function_retracing",
                        min(0.75, 0.35 + 0.05 * len(slow)),
                        [
                            f"first step {first:.2f} s vs {base * 1000:.0f} ms for a normal "
                            f"step; {len(slow)} later steps as slow again (steps "
                            + ", ".join(str(s.get("step")) for s in slow[:5])
                            + "): the function was traced again"
                        ],
                        (float(steps[0]["t"]), float(steps[-1]["t"])),
                    )
                )
    # input-bound: GPU utilisation low while the steps run
    utils = [
        g["util"]
        for k, i in items
        if k == "sample" and steady_at is not None and i.get("t", 0) >= steady_at
        for g in i.get("gpus") or []
        if isinstance(g.get("util"), (int, float))
    ]
    if len(utils) >= 10 and steps:
        mean_util = sum(utils) / len(utils)
        if mean_util < INPUT_BOUND_UTIL:
            out.append(
                cause(
                    "input_bound",
                    min(0.8, 0.4 + (INPUT_BOUND_UTIL - mean_util) / 60),
                    [f"GPU utilisation averaged {mean_util:.0f}% while training"],
                    (float(steady_at or 0.0), float(steps[-1]["t"])),
                )
            )
    return out
