"""How a run ended: the status words, the outcome, a run's record and the whole result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.evidence import OomKillEvidence
from tfdoctor.core.model import Cause, Diagnosis

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
OUTPUT_TAIL_LINES = 400  # of the worker's output, kept with a saved result
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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Outcome:
        """An outcome as `to_json` wrote it.

        Raises:
            KeyError, TypeError, ValueError: malformed data.
        """
        status = str(data["status"])
        if status not in STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        code = data.get("exit_code")
        kill = data.get("oom_kill")
        return cls(
            status,
            int(code) if code is not None else None,
            str(data["signal"]) if data.get("signal") else None,
            float(data.get("duration_s") or 0.0),
            str(data.get("detail") or ""),
            dict(data["exception"]) if data.get("exception") else None,
            OomKillEvidence.from_json(kill) if isinstance(kill, Mapping) else None,
            str(data["fault_stack"]) if data.get("fault_stack") else None,
        )


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
        if self.output_tail:
            out["output_tail"] = self.output_tail[-OUTPUT_TAIL_LINES:]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BenchResult:
        """A result as `to_json` (or `tfdoctor bench --json`) wrote it.

        Raises:
            ValueError: not a benchmark result, or a malformed one (one line).
        """
        if not isinstance(data, Mapping) or data.get("schema") != 1 or "outcome" not in data:
            raise ValueError("not a `tfdoctor bench --json` result")
        try:
            run_dir = data.get("run_dir")
            return cls(
                BenchConfig.from_json(dict(data["config"])),
                Outcome.from_json(data["outcome"]),
                dict(data.get("metrics") or {}),
                Diagnosis(tuple(Cause.from_json(c) for c in data.get("causes") or ())),
                [dict(p) for p in data.get("probes") or ()],
                Path(run_dir) if run_dir else None,
                [str(line) for line in data.get("output_tail") or ()],
                dict(data.get("environment") or {}),
                [dict(k) for k in data.get("knobs") or ()],
                dict(data["recommendation"]) if data.get("recommendation") else None,
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            why = f"{type(exc).__name__}: {exc}"
            raise ValueError(f"a malformed benchmark result ({why})") from None


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
