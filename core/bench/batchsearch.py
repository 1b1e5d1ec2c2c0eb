"""Find the largest batch size that trains cleanly, in a supervised worker, with a margin.

Doubling from the start size until a probe fails, then bisection between the last success
and the first failure until they are within the margin. A recoverable ResourceExhaustedError
costs no new process (the worker clears its session and goes on); a fatal end (OOM kill,
segfault, hang, the memory guard) counts as a failure at that size and the next probe gets a
fresh worker. The recommendation keeps the margin below the largest clean size: a size that
just fits in a short probe still fails later in a long run (fragmentation, validation steps,
a longer sequence).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from tfdoctor.core.bench.config import MAX_BATCH, BenchConfig, ConfigError
from tfdoctor.core.bench.explain import explain, hidden_causes
from tfdoctor.core.bench.outcome import BenchResult, Outcome, RunRecord
from tfdoctor.core.bench.watch import Supervisor, SupervisorOptions
from tfdoctor.core.events import Event, EventBuffer
from tfdoctor.core.model import Diagnosis, Target
from tfdoctor.core.probes import targetrun
from tfdoctor.core.telemetry import Timeline

DEFAULT_MAX_BATCH = 8192
DEFAULT_MARGIN = 0.10


@dataclass(frozen=True)
class SearchOptions:
    start: int | None = None  # default: the config's batch size
    max_batch: int = DEFAULT_MAX_BATCH
    margin: float = DEFAULT_MARGIN

    def validate(self, config: BenchConfig) -> SearchOptions:
        start = self.start or config.batch_size
        if not 1 <= start <= MAX_BATCH:
            raise ConfigError(f"the start batch size must be from 1 to {MAX_BATCH}")
        if not start <= self.max_batch <= MAX_BATCH:
            raise ConfigError(
                f"the largest batch to try must be from the start size ({start}) to {MAX_BATCH}"
            )
        if not 0.0 < self.margin < 0.9:
            raise ConfigError("the safety margin must be between 0 and 0.9 (e.g. 0.1 = 10%)")
        return SearchOptions(start, self.max_batch, self.margin)


def probe_budget(start: int, max_batch: int, margin: float) -> int:
    """The most probes the search may take: ceil(log2(max/start)) + ceil(log2(1/margin)) + 2."""
    return math.ceil(math.log2(max(1.0, max_batch / start))) + math.ceil(math.log2(1 / margin)) + 2


# a probe's outcome in a word or two, for the plot's labels and the CLI
PROBE_WORDS = {
    "ok": "trained",
    "oom": "out of memory",
    "host_oom_killed": "RAM OOM kill",
    "killed": "killed",
    "crashed": "crashed",
    "exception": "error",
    "hang": "hung",
    "cancelled": "stopped",
    "guard_stopped": "RAM guard stop",
}


def _probe_status(rr: RunRecord, end: Outcome | None) -> str:
    if rr.status == "completed":
        return "ok"
    if rr.status == "oom":
        return "oom"
    if rr.status in ("hang", "cancelled", "guard_stopped"):
        return rr.status
    if end is not None:
        if end.status == "killed" and end.oom_kill is not None and end.oom_kill.likely:
            return "host_oom_killed"
        return end.status
    return rr.status


def find_max_batch(
    target: Target,
    config: BenchConfig,
    search: SearchOptions | None = None,
    options: SupervisorOptions | None = None,
    *,
    events: EventBuffer[Event] | None = None,
    cancel: threading.Event | None = None,
    timeline: Timeline | None = None,
) -> BenchResult:
    """Search the largest clean batch size. Never raises for what the workers do.

    Raises:
        targetrun.TargetError: the interpreter is not a usable Python.
        ConfigError: a bad config or search option.
    """
    targetrun.python_version(target.python)
    config = config.validate()
    s = (search or SearchOptions()).validate(config)
    assert s.start is not None
    sup = Supervisor(target, config, options, events=events, cancel=cancel, timeline=timeline)
    try:
        return _search(sup, config, s, t0=time.monotonic())
    finally:
        sup.close()


def _search(sup: Supervisor, config: BenchConfig, s: SearchOptions, t0: float) -> BenchResult:
    assert s.start is not None
    probes: list[dict[str, Any]] = []
    failures: list[tuple[RunRecord, Outcome | None, list[str]]] = []
    budget = probe_budget(s.start, s.max_batch, s.margin)
    stopped: Outcome | None = None

    def probe(batch: int) -> bool:
        nonlocal stopped
        sup.emit("status", f"probe {len(probes) + 1} (at most {budget}): batch size {batch}")
        sup.emit("search_probe", {"batch_size": batch, "index": len(probes) + 1})
        sup.timeline.mark(f"batch {batch}", "probe")  # where each probe starts, on the plot
        rr = sup.run(config.with_batch(batch))
        end = None
        output: list[str] = []
        if rr.status not in ("completed", "oom"):
            end = sup.end_worker()  # the worker is dead or was stopped: classify, respawn later
            output = list(sup.last_output)
        status = _probe_status(rr, end)
        done = rr.done or {}
        row = {
            "batch_size": batch,
            "status": status,
            "tf_peak_bytes": done.get("peak") or {},
            "rss_peak_bytes": done.get("rss_peak"),
            "steady_steps_per_s": done.get("steady_steps_per_s"),
            "examples_per_s": done.get("examples_per_s"),
            "duration_s": done.get("duration_s"),
            "detail": (end.detail if end else "")
            or (str((rr.oom or rr.error or {}).get("message") or "").split("\n")[0][:300]),
        }
        probes.append(row)
        sup.timeline.mark(f"batch {batch}: {PROBE_WORDS.get(status, status)}", "probe_end")
        sup.emit("search_result", row)
        if status in ("cancelled",):
            stopped = end
            return False
        if status != "ok":
            failures.append((rr, end, output))
        if status == "error" or (end is not None and end.status == "exception"):
            stopped = end or Outcome(
                "exception", None, None, time.monotonic() - t0, str(row["detail"] or "error")
            )
        return status == "ok"

    largest_ok = 0
    smallest_fail: int | None = None
    batch = s.start
    # 1) doubling (halving when even the start size fails)
    if probe(batch):
        largest_ok = batch
        while stopped is None and batch < s.max_batch:
            batch = min(batch * 2, s.max_batch)
            if probe(batch):
                largest_ok = batch
            else:
                smallest_fail = batch
                break
    elif stopped is None:
        smallest_fail = batch
        while stopped is None and batch > 1:
            batch //= 2
            if probe(batch):
                largest_ok = batch
                break
            smallest_fail = batch
    # 2) bisection until success and failure are within the margin
    while (
        stopped is None
        and smallest_fail is not None
        and largest_ok > 0
        and smallest_fail - largest_ok > max(1, int(s.margin * largest_ok))
        and len(probes) < budget
    ):
        mid = (largest_ok + smallest_fail) // 2
        if probe(mid):
            largest_ok = mid
        else:
            smallest_fail = mid
    final = sup.end_worker() if sup.worker is not None else None
    recommended = max(1, int(largest_ok * (1 - s.margin))) if largest_ok else None
    duration = time.monotonic() - t0
    if stopped is not None:
        outcome = stopped
        outcome.duration_s = duration
    else:
        outcome = Outcome(
            "completed",
            final.exit_code if final else 0,
            None,
            duration,
            (
                f"largest clean batch {largest_ok}"
                + (f", first failure at {smallest_fail}" if smallest_fail else ", no failure")
                + (f"; recommended {recommended}" if recommended else "")
            )
            if largest_ok
            else "even batch size 1 does not train cleanly",
        )
    diagnosis = Diagnosis()
    if failures:  # why the boundary is where it is: the first failure's evidence
        rr, end, output = failures[0]
        evidence_outcome = end or Outcome(
            "oom_recovered" if rr.status == "oom" else rr.status, 0, None, 0.0, ""
        )
        diagnosis = explain(
            evidence_outcome,
            output or list(sup.last_output),
            rr,
            hide=hidden_causes(config),
        )
        diagnosis = sup.within_the_cap(diagnosis)  # a probe killed at the user's cap
    recommendation = {
        "largest_clean_batch": largest_ok or None,
        "first_failing_batch": smallest_fail,
        "recommended_batch": recommended,
        "margin": s.margin,
        "max_batch": s.max_batch,
        "start": s.start,
        "hit_max": smallest_fail is None and largest_ok == s.max_batch,
    }
    result = BenchResult(
        config=config,
        outcome=outcome,
        metrics={
            "probes": len(probes),
            "probe_budget": budget,
            "workers_started": sup.workers_started,
            "duration_s": round(duration, 3),
        },
        diagnosis=diagnosis,
        probes=probes,
        run_dir=sup.run_dir,
        output_tail=list(sup.last_output)[-200:],
        info=sup.info,
        knobs=sup.knobs,
        recommendation=recommendation,
    )
    sup.emit("done", result)
    return result
