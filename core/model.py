"""Frozen value types shared by the CLI, the GUI and every probe: facts, findings, probe results."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

# A fact value is plain JSON data so that snapshots and reports round-trip without loss.
FactValue = None | bool | int | float | str | list[Any] | dict[str, Any]


class Severity(enum.IntEnum):
    """How bad a finding is; the integer order is the display order (worst first = highest)."""

    OK = 0
    INFO = 1
    UNKNOWN = 2
    WARNING = 3
    ERROR = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


class ProbeStatus(enum.StrEnum):
    """How a probe ended. Absent hardware is a status, never an exception."""

    OK = "ok"
    ABSENT = "absent"  # the thing probed is not there (no NVML library, no driver)
    DENIED = "denied"  # no permission (kernel log, NVML)
    ERROR = "error"  # the probe failed for a reason it reports in `message`
    TIMEOUT = "timeout"  # the probe did not finish in time (a hang is evidence too)
    CRASHED = "crashed"  # the probed process died by a signal
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Fact:
    """One named observation with where it came from.

    Names are dotted lowercase with units in the name (``gpu0.memory_total_mib``).
    A fact that could not be observed is simply absent from :class:`Facts`: unknown, not false.
    """

    name: str
    value: FactValue
    source: str

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}


class Facts(Mapping[str, Fact]):
    """An immutable name -> Fact mapping with typed accessors that return None for unknown."""

    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        self._facts: dict[str, Fact] = {}
        for f in facts:
            self._facts[f.name] = f

    def __getitem__(self, name: str) -> Fact:
        return self._facts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._facts)

    def __len__(self) -> int:
        return len(self._facts)

    def value(self, name: str, default: Any = None) -> Any:
        f = self._facts.get(name)
        return default if f is None else f.value

    def known(self, name: str) -> bool:
        f = self._facts.get(name)
        return f is not None and f.value is not None

    def with_prefix(self, prefix: str) -> dict[str, Fact]:
        return {k: v for k, v in self._facts.items() if k.startswith(prefix)}

    def to_json(self) -> dict[str, Any]:
        return {k: self._facts[k].to_json() for k in sorted(self._facts)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Facts:
        return cls(Fact(k, v.get("value"), str(v.get("source", ""))) for k, v in data.items())


@dataclass(frozen=True)
class Evidence:
    """One piece of proof: a fact value, or a line of text (with its 1-based line number)."""

    text: str
    fact: str | None = None
    line: int | None = None
    source: str = ""
    at: tuple[float, float] | None = None  # a moment of a run's telemetry: (start, end) s

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text}
        if self.at is not None:
            out["at"] = list(self.at)
        if self.fact is not None:
            out["fact"] = self.fact
        if self.line is not None:
            out["line"] = self.line
        if self.source:
            out["source"] = self.source
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Evidence:
        at = data.get("at")
        return cls(
            str(data.get("text", "")),
            data.get("fact"),
            data.get("line"),
            str(data.get("source", "")),
            (float(at[0]), float(at[1])) if at else None,
        )


@dataclass(frozen=True)
class Finding:
    """A check's verdict: what happened, why it matters, what to do, and the evidence."""

    id: str
    severity: Severity
    title: str
    explanation: str
    evidence: tuple[Evidence, ...] = ()
    fixes: tuple[str, ...] = ()
    group: str = "general"
    confidence: float | None = None  # a finding that is a diagnosed cause: how sure (0..1)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "severity": self.severity.label,
            "title": self.title,
            "explanation": self.explanation,
            "evidence": [e.to_json() for e in self.evidence],
            "fixes": list(self.fixes),
            "group": self.group,
        }
        if self.confidence is not None:
            out["confidence"] = self.confidence
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        conf = data.get("confidence")
        return cls(
            str(data["id"]),
            Severity.parse(str(data["severity"])),
            str(data.get("title", "")),
            str(data.get("explanation", "")),
            tuple(Evidence.from_json(e) for e in data.get("evidence") or ()),
            tuple(str(f) for f in data.get("fixes") or ()),
            str(data.get("group", "general")),
            float(conf) if conf is not None else None,
        )


@dataclass(frozen=True)
class ProbeResult:
    """What one probe returned: its status, a human message, and its facts."""

    probe: str
    status: ProbeStatus
    facts: tuple[Fact, ...] = ()
    message: str = ""
    duration_s: float = 0.0
    stderr_tail: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "status": self.status.value,
            "message": self.message,
            "duration_s": round(self.duration_s, 3),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeResult:
        return cls(
            str(data["probe"]),
            ProbeStatus(data["status"]),
            message=str(data.get("message", "")),
            duration_s=float(data.get("duration_s") or 0.0),
        )


@dataclass(frozen=True)
class Target:
    """A Python interpreter to inspect, and where we found it."""

    python: str
    label: str
    kind: str = "current"  # current | kernelspec | conda | running-kernel | venv | path
    env: tuple[tuple[str, str], ...] = ()  # extra environment (a kernelspec's env block)
    pid: int | None = None  # a running kernel's PID, when the target is one
    name: str = ""  # a kernelspec's name, a conda env's name

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"python": self.python, "label": self.label, "kind": self.kind}
        if self.env:
            out["env"] = dict(self.env)
        if self.pid is not None:
            out["pid"] = self.pid
        if self.name:
            out["name"] = self.name
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Target:
        return cls(
            str(data["python"]),
            str(data.get("label") or data["python"]),
            str(data.get("kind", "path")),
            tuple((str(k), str(v)) for k, v in (data.get("env") or {}).items()),
            data.get("pid"),
            str(data.get("name", "")),
        )


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Worst first; ties keep a stable order by group then id."""
    return sorted(findings, key=lambda f: (-int(f.severity), f.group, f.id))


@dataclass(frozen=True)
class Cause:
    """One explanation of a crash: an id from the fixed taxonomy, how sure, and the proof."""

    id: str
    confidence: float
    title: str
    explanation: str
    evidence: tuple[Evidence, ...] = ()
    fixes: tuple[str, ...] = ()
    # not a finding: a cause whose signs look like those of the cause named first, offered
    # after it with how to tell them apart (its fixes stay off the proposals)
    look_alike: bool = False
    # not a finding either: a cause guessed from a paste's wording alone, no line of which any
    # rule read (its fixes stay off the proposals until something confirms it)
    guess: bool = False

    @property
    def shown_title(self) -> str:
        """The title as every view shows it: a look-alike or a guess says it is one."""
        if self.look_alike:
            return f"Look-alike: {self.title}"
        return f"Guess: {self.title}" if self.guess else self.title

    @property
    def confirmed(self) -> bool:
        """Found by what the evidence says, not only offered beside it (a look-alike) or
        guessed from wording: its fixes may be proposed."""
        return not (self.look_alike or self.guess)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "confidence": self.confidence,
            "title": self.title,
            "explanation": self.explanation,
            "evidence": [e.to_json() for e in self.evidence],
            "fixes": list(self.fixes),
            "look_alike": self.look_alike,
            "guess": self.guess,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cause:
        return cls(
            str(data["id"]),
            float(data.get("confidence") or 0.0),
            str(data.get("title", "")),
            str(data.get("explanation", "")),
            tuple(Evidence.from_json(e) for e in data.get("evidence") or ()),
            tuple(str(f) for f in data.get("fixes") or ()),
            bool(data.get("look_alike", False)),
            bool(data.get("guess", False)),
        )


@dataclass(frozen=True)
class Measure:
    """A number a log states, in words, with its line: what a fix's parameter may be sized
    from ("from your log: TF's GPU pool was 21.8 GiB").

    Names: gpu_pool_bytes (the pool of the allocator that ran out), gpu_request_bytes (the
    allocation that failed), xla_in_use (1: XLA compiled the model)."""

    name: str
    value: int
    says: str
    source: str = ""
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "says": self.says,
                "source": self.source, "line": self.line}  # fmt: skip


@dataclass(frozen=True)
class Diagnosis:
    """Ranked causes (best first), the numbers the log states, and what was read."""

    causes: tuple[Cause, ...] = ()
    lines_read: int = 0
    noise_lines: int = 0
    sources: tuple[str, ...] = ()
    measures: tuple[Measure, ...] = ()
    # what the log states about the machine, in words: (what, value, the line that says it)
    stated: tuple[tuple[str, str, str], ...] = ()
    # the plain Python error of the program (a ValueError...) that ended a run whose GPU lines
    # are only start-up notices: why it failed, though no GPU cause is to blame
    program_error: Evidence | None = None

    def measure(self, name: str) -> Measure | None:
        return next((m for m in self.measures if m.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "causes": [c.to_json() for c in self.causes],
            "lines_read": self.lines_read,
            "noise_lines": self.noise_lines,
            "sources": list(self.sources),
            "measures": [m.to_json() for m in self.measures],
            "stated": [{"what": w, "value": v, "line": ln} for w, v, ln in self.stated],
            "program_error": self.program_error.to_json() if self.program_error else None,
        }
