"""How a run ended: the status words, the outcome, a run's record and the whole result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.evidence import OomKillEvidence
from tfdoctor.core.model import Diagnosis

# Every way a run ends (Outcome.status): what it means for people, and the label of its
# marker on the telemetry timeline (None: no marker). The one list of status words.
STATUS_WORDS: dict[str, tuple[str, str | None]] = {
    "completed": ("the run finished", None),
    "exception": ("a Python exception stopped the run", "exception"),
    "oom_recovered": (
        "TensorFlow ran out of memory and raised ResourceExhaustedError (caught)",
        None,
    ),
    "killed": ("the worker was killed by a signal", "killed"),
    "crashed": ("the worker crashed (a native fault)", "crash"),
    "hang": ("the worker stopped making progress and was stopped", "hang"),
    "cancelled": ("you stopped the run", None),
    "guard_stopped": (
        "tfdoctor stopped the run before the machine ran out of RAM",
        "guard stop",
    ),
}
STATUSES = {status: meaning for status, (meaning, _) in STATUS_WORDS.items()}
OUTCOME_MARKERS = {status: mark for status, (_, mark) in STATUS_WORDS.items() if mark}


@dataclass
class Outcome:
    status: str  # one of STATUSES
    exit_code: int | None
    signal: str | None
    duration_s: float
    detail: str  # one line for people
    exception: dict[str, Any] | None = None  # {type, message, traceback}
    oom_kill: OomKillEvidence | None = None
    fault_stack: str | None = None  # faulthandler's report (crash or hang)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "duration_s": round(self.duration_s, 3),
            "detail": self.detail,
            "exception": self.exception,
            "oom_kill": self.oom_kill.to_json() if self.oom_kill else None,
            "fault_stack": self.fault_stack,
        }


@dataclass
class BenchResult:
    config: BenchConfig
    outcome: Outcome
    metrics: dict[str, Any]
    diagnosis: Diagnosis
    probes: list[dict[str, Any]] = field(default_factory=list)  # batch search only
    run_dir: Path | None = None
    output_tail: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    knobs: list[dict[str, Any]] = field(default_factory=list)
    recommendation: dict[str, Any] | None = None  # batch search only

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": 1,
            "config": self.config.to_json(),
            "outcome": self.outcome.to_json(),
            "metrics": self.metrics,
            "probes": self.probes,
            "causes": [c.to_json() for c in self.diagnosis.causes],
            "environment": self.info,
            "knobs": self.knobs,
            "run_dir": str(self.run_dir) if self.run_dir else None,
        }
        if self.recommendation is not None:
            out["recommendation"] = self.recommendation
        return out


class Stop(Exception):
    """The supervisor ended the worker: hang, cancel or memory guard."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class RunRecord:
    """What one run command produced in a live worker."""

    # the worker's run_done status (completed | oom | error), died, or the status of the
    # supervisor's Stop (hang | cancelled | guard_stopped, as in STATUSES)
    status: str
    done: dict[str, Any] | None = None
    oom: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    detail: str = ""
