"""Classify how the worker ended (see STATUSES) and the run's final status."""

from __future__ import annotations

import collections
import signal
import time
from typing import Any

from tfdoctor.core.bench.outcome import Outcome, RunRecord, Stop
from tfdoctor.core.bench.process import WorkerProcess

CRASH_SIGNALS = {"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGSYS", "SIGTRAP"}


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def classify_end(
    wp: WorkerProcess,
    returncode: int | None,
    stopped: Stop | None,
    worker_error: dict[str, Any] | None,
) -> Outcome:
    """How the worker ended: stopped by the supervisor (`stopped`), by a signal, with an error
    (`worker_error`: its start-up error record, if any), or normally."""
    duration = time.monotonic() - wp.started_at
    sig = _signal_name(returncode)
    if stopped is not None:
        stack = wp.fault_stack() if stopped.status == "hang" else None
        return Outcome(stopped.status, returncode, sig, duration, stopped.detail, None, None, stack)
    if sig is not None:
        stack = wp.fault_stack()
        if sig == "SIGKILL":
            ev = wp.oom_evidence()
            if ev.likely:
                how = (
                    "the kernel's OOM killer killed the worker at the RAM cap you set"
                    if wp.cgroup
                    else "the kernel's OOM killer killed the worker (host RAM ran out)"
                )
                if not ev.proven:
                    how += "; proof by timing only: an OOM kill happened as it died"
                return Outcome("killed", returncode, sig, duration, how, None, ev, stack)
            return Outcome(
                "killed",
                returncode,
                sig,
                duration,
                "the worker was killed (SIGKILL) by something other than the OOM killer "
                "as far as the kernel log and counters tell",
                None,
                ev,
                stack,
            )
        if sig in CRASH_SIGNALS:
            return Outcome(
                "crashed", returncode, sig, duration, f"the worker crashed with {sig}",
                None, None, stack,
            )  # fmt: skip
        return Outcome(
            "killed", returncode, sig, duration, f"the worker was stopped by {sig}",
            None, None, stack,
        )  # fmt: skip
    if returncode not in (0, None):
        err = worker_error
        exc = (
            {
                "type": err.get("exc_type"),
                "message": err.get("message"),
                "traceback": err.get("traceback"),
            }
            if err
            else _traceback_from(wp.output)
        )
        where = {"import": " while importing TensorFlow", "device_init": " while setting up"}
        phase = where.get(str(err.get("phase")), "") if err else ""
        detail = f"the worker exited with code {returncode}{phase}" + (
            f": {exc['type']}: {exc['message']}" if exc else ""
        )
        return Outcome("exception", returncode, None, duration, detail, exc)
    return Outcome("completed", returncode, None, duration, "the worker ended normally")


def _traceback_from(lines: collections.deque[str] | list[str]) -> dict[str, Any] | None:
    """The last Python traceback in the output: {type, message, traceback}."""
    tail = list(lines)[-400:]
    start = None
    for i, line in enumerate(tail):
        if line.startswith("Traceback (most recent call last)"):
            start = i
    if start is None:
        return None
    block = tail[start:]
    last = next((ln for ln in reversed(block) if ln and not ln.startswith(" ") and ":" in ln), None)
    if last is None:
        return None
    exc_type, _, message = last.partition(":")
    return {
        "type": exc_type.strip().rsplit(".", 1)[-1],
        "message": message.strip()[:2000],
        "traceback": "\n".join(block)[-20000:],
    }


def final_status(worker_outcome: Outcome, rr: RunRecord) -> Outcome:
    """The run's status from the worker's end and what the run reported."""
    o = worker_outcome
    if o.status != "completed":
        if o.status == "exception" and rr.error:
            o.exception = {
                "type": rr.error.get("exc_type"),
                "message": rr.error.get("message"),
                "traceback": rr.error.get("traceback"),
            }
        return o
    if rr.status == "oom":
        o.status = "oom_recovered"
        msg = str((rr.oom or {}).get("message") or "").splitlines()
        o.detail = "TensorFlow raised ResourceExhaustedError" + (f": {msg[0][:300]}" if msg else "")
    elif rr.status == "error":
        o.status = "exception"
        err = rr.error or {}
        o.exception = {
            "type": err.get("exc_type"),
            "message": err.get("message"),
            "traceback": err.get("traceback"),
        }
        o.detail = f"{err.get('exc_type')}: {str(err.get('message') or '')[:300]}"
    elif rr.status != "completed":
        o.status = "exception"
        o.detail = f"the run ended without a result ({rr.status})"
    else:
        o.detail = "the run finished"
    return o
