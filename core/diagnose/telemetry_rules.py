"""Causes only a run's timeline shows: a memory leak, tf.function retracing, an input-bound GPU.

Pure rules over telemetry items (`core.telemetry` kinds: sample, tf, step, marker), from a
live run or a recorded trace.
"""

from __future__ import annotations

import math
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


def _leak(
    items: list[tuple[str, dict[str, Any]]], steady_at: float, steps: list[dict[str, Any]]
) -> tuple[float, list[str], tuple[float, float]] | None:
    """(confidence, evidence, moment) of memory that climbs along one run's steady state."""
    end_t = steps[-1]["t"] if steps else None
    found = memory_series(items, since_t=steady_at, until_t=end_t)
    at_steps = [(float(st["t"]), float(st["rss"])) for st in steps
                if isinstance(st.get("rss"), (int, float))]  # fmt: skip
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
            text = (
                f"{name} grew {growth / 2**20:.0f} MiB over {xs[-1] - xs[0]:.0f} s "
                f"of training ({slope / 2**20:.1f} MiB/s, steady: R² {r2:.2f})"
            )
            return conf, [text], (xs[0], xs[-1])
    return None


def _retracing(steps: list[dict[str, Any]]) -> tuple[float, list[str], tuple[float, float]] | None:
    """(confidence, evidence, moment) of one run's later steps as slow as its first (traced)
    one."""
    if len(steps) < 5:
        return None
    first = float(steps[0]["step_s"])
    later = sorted(float(st["step_s"]) for st in steps[1:])
    base = later[len(later) // 10]
    if base <= 0 or first < TRACING_FACTOR * base:
        return None
    # a retrace costs about what the first trace did; a loaded machine's hiccups are
    # shorter than that (and than RETRACE_MIN_S)
    floor = max(TRACING_FACTOR * base, RETRACE_MIN_S, RETRACE_OF_FIRST * first)
    slow = [st for st in steps[1:] if float(st["step_s"]) >= floor]
    if len(slow) < 3:
        return None
    text = (
        f"first step {first:.2f} s vs {base * 1000:.0f} ms for a normal "
        f"step; {len(slow)} later steps as slow again (steps "
        + ", ".join(str(st.get("step")) for st in slow[:5])
        + "): the function was traced again"
    )
    return min(0.75, 0.35 + 0.05 * len(slow)), [text], (float(steps[0]["t"]), float(steps[-1]["t"]))


# the markers that begin a run (a batch search runs the workload again and again, each run
# with its own tracing and its own memory)
RUN_START_MARKERS = frozenset({"import", "compile", "first step", "steady state"})


def _runs(
    items: list[tuple[str, dict[str, Any]]], steps: list[dict[str, Any]]
) -> list[tuple[float, list[dict[str, Any]]]]:
    """Each run's steady state: when it began, and the steps recorded in it (to the marker
    that begins the next run)."""
    marks = sorted(
        (float(i["t"]), str(i.get("label")))
        for k, i in items
        if k == "marker" and isinstance(i.get("t"), (int, float))
    )
    runs = []
    for n, (t, label) in enumerate(marks):
        if label != "steady state":
            continue
        end = next((u for u, lab in marks[n + 1 :] if lab in RUN_START_MARKERS), math.inf)
        runs.append((t, [st for st in steps if t <= st["t"] < end]))
    return runs


def _by_step_number(steps: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Steps split where the step number starts again: one list per run, from its first
    (traced) step, which is recorded before the run's steady-state marker (`_runs` starts
    there)."""
    out: list[list[dict[str, Any]]] = []
    last = None
    for st in steps:
        n = st.get("step")
        if not out or (isinstance(n, int) and isinstance(last, int) and n <= last):
            out.append([])
        out[-1].append(st)
        last = n
    return out


def telemetry_causes(
    items: Iterable[tuple[str, dict[str, Any]]], causes: dict[str, CauseInfo] | None = None
) -> list[Cause]:
    """Causes only the timeline shows: a leak, tracing/retracing, an input-bound GPU. Each
    run of the timeline is judged alone (a batch search's growing batches are not a leak,
    nor each run's own first trace a retrace, nor the idle GPU between its runs input-bound
    training)."""
    info = causes or shipped_causes()
    items = list(items)
    steps = [i for k, i in items if k == "step" and isinstance(i.get("step_s"), (int, float))]
    out: list[Cause] = []

    def cause(
        cid: str, confidence: float, evidence: list[str], at: tuple[float, float] | None = None
    ) -> Cause:
        c = info[cid]
        ev = tuple(Evidence(text, source="telemetry", at=at) for text in evidence)
        return Cause(cid, round(confidence, 2), c.title, c.explanation, ev, c.fixes)

    # a leak: the worker's memory (RSS, or TF's in-use) climbs along a run's steady state;
    # the RSS each step record carries is read more often than the sampler's, and decides a
    # short run the samples are too few for
    runs = _runs(items, steps)
    for run_at, run_steps in runs:
        leak = _leak(items, run_at, run_steps)
        if leak is not None:
            out.append(cause("memory_leak", *leak))
            break
    # tracing: a first step far slower than a normal step; retracing: later steps that slow
    # down as much again. Step records are rate-limited but slow steps are always reported,
    # so the baseline is a low percentile of the recorded times, not their median.
    for run_steps in _by_step_number(steps):
        retrace = _retracing(run_steps)
        if retrace is not None:
            out.append(cause("tf_function_retracing", *retrace))
            break
    # input-bound: GPU utilisation low while a run's steps run (its longest steady state:
    # between a batch search's runs the GPU idles while the next one compiles)
    best: tuple[list[float], float, float] | None = None
    for run_at, run_steps in runs:
        if not run_steps:
            continue
        end_t = float(run_steps[-1]["t"])
        utils = [
            float(g["util"])
            for k, i in items
            if k == "sample" and run_at <= i.get("t", -math.inf) <= end_t
            for g in i.get("gpus") or []
            if isinstance(g.get("util"), (int, float))
        ]
        if best is None or len(utils) > len(best[0]):
            best = (utils, float(run_at), end_t)
    if best is not None and len(best[0]) >= 10:
        utils, start_t, end_t = best
        mean_util = sum(utils) / len(utils)
        if mean_util < INPUT_BOUND_UTIL:
            out.append(
                cause(
                    "input_bound",
                    min(0.8, 0.4 + (INPUT_BOUND_UTIL - mean_util) / 60),
                    [f"GPU utilisation averaged {mean_util:.0f}% while training"],
                    (start_t, end_t),
                )
            )
    return out
