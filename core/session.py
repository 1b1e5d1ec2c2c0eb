"""The session: what the user gave and tfdoctor measured, and its analysis, Qt-free.

The analysis is one data flow, `analyse`: crash logs -> their diagnosis; that and the check's
findings (the user's crash and machine) -> one ranked list of causes (`diagnose.combine`); the
reproduced run's causes and its telemetry's (tfdoctor's own experiments) -> a second list that
never changes the first; the causes that answer the user's question -> the fixes to propose,
with parameters from what was measured (`propose`). `analyse` is a pure function of a
snapshot of the session (`Inputs`) and may be slow (it reads every log), so the GUI runs it
on a worker thread. `Session` holds what the user did and caches the analysis of its current
inputs; it goes stale as soon as an input changes.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfdoctor.core.diagnose.combine import (
    RankedCause,
    card_severity,
    cause_finding,
    combined_causes,
)
from tfdoctor.core.diagnose.engine import diagnose, shipped_causes
from tfdoctor.core.diagnose.reader import iter_lines
from tfdoctor.core.diagnose.telemetry_rules import telemetry_causes
from tfdoctor.core.fixes.propose import measure, proposed_fixes
from tfdoctor.core.model import Cause, Diagnosis, Evidence, Facts, Finding, Target

if TYPE_CHECKING:
    from tfdoctor.core.bench.observe import WatchResult
    from tfdoctor.core.bench.supervisor import BenchResult, SupervisorOptions
    from tfdoctor.core.bench.verify import Verification
    from tfdoctor.core.scan import CheckReport

TelemetryItem = tuple[str, dict[str, Any]]  # (kind, item) as `core.telemetry.Timeline` holds


@dataclass(frozen=True)
class LogInput:
    """A crash log the user gave: pasted text, or a file (read when diagnosed)."""

    name: str
    text: bytes = b""
    path: str | None = None

    def source(self) -> bytes | Path:
        return Path(self.path) if self.path else self.text


@dataclass(frozen=True)
class RunEvidence:
    """What the analysis takes from a reproduced run: its causes and its measurements."""

    causes: tuple[Cause, ...] = ()
    tf_peak_gpu_bytes: int = 0  # TF's peak in-use memory on the busiest GPU
    recommended_batch: int | None = None  # from the max-batch search
    largest_clean_batch: int | None = None  # the search's largest batch that trained

    @classmethod
    def of(cls, result: BenchResult) -> RunEvidence:
        return cls._of(result.diagnosis.causes, result.metrics, result.recommendation)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunEvidence:
        """A result saved by `tfdoctor bench --json`.

        Raises:
            ValueError: not a benchmark result (one-line reason).
        """
        if not isinstance(data, Mapping) or "outcome" not in data or data.get("schema") != 1:
            raise ValueError("not a `tfdoctor bench --json` result")
        try:
            causes = tuple(Cause.from_json(c) for c in data.get("causes") or ())
            return cls._of(causes, data.get("metrics") or {}, data.get("recommendation"))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            why = f"{type(exc).__name__}: {exc}"
            raise ValueError(f"a malformed benchmark result ({why})") from None

    @classmethod
    def _of(
        cls,
        causes: Sequence[Cause],
        metrics: Mapping[str, Any],
        recommendation: Mapping[str, Any] | None,
    ) -> RunEvidence:
        peaks = metrics.get("tf_peak_bytes") or {}
        gpu_peak = max((int(v) for k, v in peaks.items() if k.startswith("GPU")), default=0)
        batch = (recommendation or {}).get("recommended_batch")
        clean = (recommendation or {}).get("largest_clean_batch")
        return cls(
            tuple(causes), gpu_peak, int(batch) if batch else None, int(clean) if clean else None
        )


@dataclass(frozen=True)
class Inputs:
    """A snapshot of what the analysis reads (immutable: safe to hand to a worker thread)."""

    logs: tuple[LogInput, ...] = ()
    facts: Facts | None = None  # the environment check's, when it ran
    findings: tuple[Finding, ...] = ()  # the environment check's
    run: RunEvidence | None = None
    telemetry: tuple[TelemetryItem, ...] = ()  # the run's timeline (or a recorded trace)
    watch: tuple[Cause, ...] = ()  # the verdict of a watch of the user's own process
    key: tuple[object, ...] = field(default=(), compare=False, repr=False)  # see Session


@dataclass(frozen=True)
class Analysis:
    """Everything derived from the inputs, best first.

    The user's crash (their logs, their machine's check) and tfdoctor's own experiments (a
    reproduced run, its telemetry) are ranked apart: a run under a RAM cap the user chose, or
    a batch search that is meant to fail, is never evidence about the crash the user brought.
    The experiments answer on their own only when no crash was given.
    """

    inputs: Inputs
    log_diagnosis: Diagnosis | None
    telemetry_causes: tuple[Cause, ...]
    crash: tuple[RankedCause, ...]  # the crash logs' and the check's causes merged
    experiments: tuple[RankedCause, ...]  # the reproduced run's and its telemetry's
    fixes: tuple[tuple[str, tuple[str, ...]], ...]  # (fix id, what it addresses)
    params: Mapping[str, str]  # fix parameters from measurements (see core.propose)
    findings: tuple[Finding, ...]  # the leading causes as cards, log evidence in context
    experiment_findings: tuple[Finding, ...] = ()  # the experiments' cards, after the crash's
    workload: WorkloadHint | None = None  # benchmark settings the logs suggest
    origins: Mapping[str, str] = field(default_factory=dict)  # param -> where it was measured
    wanting: Mapping[str, str] = field(default_factory=dict)  # fix -> the measurement it needs
    left_out: tuple[tuple[str, str], ...] = ()  # (fix id, why it is not proposed)

    @property
    def has_crash(self) -> bool:
        """Whether the user gave a crash to explain (a log, or a check that diagnosed one)."""
        return bool(self.inputs.logs or self.crash)

    @property
    def ranked(self) -> tuple[RankedCause, ...]:
        """The causes that answer the user's question, best first: their crash's when they
        gave one, else what tfdoctor's experiments showed."""
        return self.crash if self.has_crash else self.experiments

    @property
    def fix_ids(self) -> list[str]:
        return [fid for fid, _ in self.fixes]

    @property
    def cause_ids(self) -> list[str]:
        """The ranked causes found (not the first one's look-alikes, not guesses from wording
        alone), best first."""
        return [r.cause.id for r in self.ranked if r.cause.confirmed]


# --------------------------------------------------------------------------- workload hints

_SHAPE = re.compile(r"shape\s*\[\s*(\d+)\s*,")
_MODEL_HINTS = (
    ("resnet50", re.compile(r"resnet|conv\d_block\d|res\d[a-z]_branch", re.I)),
    ("transformer", re.compile(r"multi_head_attention|transformer|attention|embedding", re.I)),
    ("cnn", re.compile(r"conv2d|max_pooling2d|conv2d_\d|Conv2DBackprop", re.I)),
    ("mlp", re.compile(r"\bdense(?:_\d+)?\b|MatMul", re.I)),
)


@dataclass(frozen=True)
class WorkloadHint:
    """Benchmark settings the user's logs suggest (a model family, the batch that failed)."""

    preset: str | None = None
    batch: int | None = None
    reasons: tuple[str, ...] = ()


def workload_hint(logs: Sequence[LogInput]) -> WorkloadHint | None:
    """What the logs say about the workload: layer names and the failed tensor's batch."""
    text = _log_text(logs)
    if not text:
        return None
    preset = batch = None
    reasons = []
    for name, pattern in _MODEL_HINTS:
        if pattern.search(text):
            preset = name
            reasons.append(f"the log names {name}-like layers: preset {name}")
            break
    m = _SHAPE.search(text)
    if m and 1 <= int(m.group(1)) <= 1 << 16:
        batch = int(m.group(1))
        reasons.append(
            f"the tensor that did not fit has a leading dimension {batch}: batch {batch}"
        )
    return WorkloadHint(preset, batch, tuple(reasons))


def _log_text(logs: Sequence[LogInput], limit: int = 4 << 20) -> str:
    parts = []
    for lg in logs:
        if lg.text:
            parts.append(lg.text[:limit].decode("utf-8", "replace"))
        elif lg.path:
            try:
                with open(lg.path, "rb") as fh:
                    parts.append(fh.read(limit).decode("utf-8", "replace"))
            except OSError:
                continue
    return "\n".join(parts)


def analyse(inputs: Inputs) -> Analysis:
    """The analysis of a snapshot: slow with big logs (run it off the GUI thread).

    Raises:
        OSError: a log file can no longer be read.
    """
    info = shipped_causes()
    log_d = None
    if inputs.logs:
        log_d = diagnose(
            *(lg.source() for lg in inputs.logs),
            facts=inputs.facts,
            names=[lg.name for lg in inputs.logs],
        )
    run = inputs.run
    tele = tuple(telemetry_causes(inputs.telemetry, info)) if inputs.telemetry else ()
    crash = combined_causes(
        info,
        log=log_d.causes if log_d is not None else (),
        findings=inputs.findings,
        watch=inputs.watch,
    )
    experiments = combined_causes(info, run=run.causes if run is not None else (), telemetry=tele)
    has_crash = bool(inputs.logs or inputs.watch or crash)
    ranked = crash if has_crash else experiments
    measured = measure(
        inputs.facts,
        run.tf_peak_gpu_bytes if run is not None else 0,
        run.recommended_batch if run is not None else None,
        log_d,
        run.largest_clean_batch if run is not None else None,
    )
    # the check's own cause findings count through their fixes unless another source came
    with_causes = bool(inputs.logs or run is not None or inputs.telemetry or inputs.watch)
    proposals = proposed_fixes(
        ranked if with_causes else (), inputs.findings, inputs.facts, measured
    )

    not_here = {fid for fid, _ in proposals.left_out}

    def cards(causes: Sequence[RankedCause], first: int) -> tuple[Finding, ...]:
        return tuple(
            dataclasses.replace(
                cause_finding(
                    rc.cause,
                    card_severity(rc.cause, first + i),
                    sources=rc.sources,
                    evidence=with_context(inputs.logs, rc.cause.evidence),
                ),
                fixes=tuple(f for f in rc.cause.fixes if f not in not_here),
            )
            for i, rc in enumerate(causes)
        )

    return Analysis(
        inputs,
        log_d,
        tele,
        tuple(crash),
        tuple(experiments),
        tuple((fid, tuple(why)) for fid, why in proposals.fixes),
        measured.values,
        cards(ranked, 0),
        cards(experiments, 1) if has_crash else (),  # never the answer's colour
        workload_hint(inputs.logs),
        measured.origins,
        proposals.wanting,
        tuple(proposals.left_out),
    )


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Keys match: the same objects (identity), the same counts and the same log list."""
    return len(a) == len(b) and all(
        x is y or (type(x) in (int, tuple) and x == y) for x, y in zip(a, b, strict=True)
    )


@dataclass(eq=False)
class Session:
    """Everything the user has done in the wizard (JSON-able for a later save), and the
    cached analysis of it."""

    door: str | None = None
    target: Target | None = None
    logs: list[LogInput] = field(default_factory=list)
    check: CheckReport | None = None
    bench: BenchResult | None = None
    telemetry: list[TelemetryItem] = field(default_factory=list)  # the last run's
    bench_options: SupervisorOptions | None = None  # the options of that run (its RAM cap...)
    watch: WatchResult | None = None  # a watch of the user's own process, when it ended
    # what the user tried: fixes applied and undone (oldest first), and the verify runs
    fix_log: list[dict[str, Any]] = field(default_factory=list)
    verifications: list[Verification] = field(default_factory=list)
    # The GUI's session: `analysis()` never reads logs or telemetry itself; a worker thread
    # runs `analyse(session.inputs())` and hands the result to `store`.
    background: bool = False
    _analysis: Analysis | None = field(default=None, init=False, repr=False)
    _error: tuple[tuple[object, ...], str] | None = field(default=None, init=False, repr=False)
    _generation: int = field(default=0, init=False, repr=False)

    def facts(self) -> Facts | None:
        return self.check.facts if self.check is not None else None

    def findings(self) -> list[Finding]:
        return list(self.check.findings) if self.check is not None else []

    def add_log(self, name: str, text: bytes = b"", path: str | None = None) -> LogInput:
        log = LogInput(name, text, path)
        self.logs.append(log)
        return log

    def _key(self) -> tuple[object, ...]:
        # identities, not values: a new check report or run is new evidence
        n_findings = len(self.check.findings) if self.check is not None else 0
        return (
            self._generation,
            tuple(self.logs),
            self.check,
            n_findings,
            self.bench,
            self.telemetry,
            len(self.telemetry),
            self.watch,
        )

    def inputs(self) -> Inputs:
        """A snapshot of what the analysis reads now."""
        return Inputs(
            tuple(self.logs),
            self.facts(),
            tuple(self.findings()),
            RunEvidence.of(self.bench) if self.bench is not None else None,
            tuple(self.telemetry),
            watch=tuple(self.watch.causes) if self.watch is not None else (),
            key=self._key(),
        )

    def analysis(self) -> Analysis | None:
        """The analysis of what the session holds now, computed once per change.

        A `background` session computes it here only when that is quick (no logs to read,
        no telemetry to scan); otherwise it returns None until `store` gets it.

        Raises:
            OSError: a log file can no longer be read.
        """
        a = self._analysis
        if a is not None and _same(a.inputs.key, self._key()):
            return a
        if self.background and (self.logs or self.telemetry):
            return None
        a = analyse(self.inputs())
        self._analysis = a
        return a

    def is_current(self, inputs: Inputs) -> bool:
        """True while the session still holds what `inputs` was taken from."""
        return _same(inputs.key, self._key())

    def store(self, analysis: Analysis) -> bool:
        """Keep an analysis made elsewhere; False (dropped) when the session changed since."""
        if not self.is_current(analysis.inputs):
            return False
        self._analysis, self._error = analysis, None
        return True

    def store_error(self, inputs: Inputs, message: str) -> None:
        """Why the analysis of these inputs failed (kept while they are current)."""
        if self.is_current(inputs):
            self._error = (inputs.key, message)

    def error(self) -> str | None:
        """Why the analysis of the current inputs failed, if it did."""
        if self._error is not None and _same(self._error[0], self._key()):
            return self._error[1]
        return None

    def note_fix(self, action: str, record: Mapping[str, Any]) -> None:
        """Remember a fix applied or undone (a transaction record of `core.fixes`)."""
        self.fix_log.append(
            {
                "action": action,
                "id": record.get("id"),
                "fixes": list(record.get("fixes") or ()),
                "target": str(record.get("target") or ""),
                "changed": record.get("changed", True),
                "at": datetime.datetime.now().isoformat(timespec="seconds"),
            }
        )

    def forget(self) -> None:
        """Analyse again from scratch (the log files may have grown since)."""
        self._generation += 1

    def to_json(self) -> dict[str, Any]:
        a = self._analysis
        fresh = a is not None and self.is_current(a.inputs)
        log_diagnosis = a.log_diagnosis if a is not None and fresh else None
        return {
            "schema": 1,
            "door": self.door,
            "target": self.target.to_json() if self.target else None,
            "logs": [{"name": lg.name, "path": lg.path, "bytes": len(lg.text)} for lg in self.logs],
            "check": self.check.to_json() if self.check is not None else None,
            "bench": self.bench.to_json() if self.bench is not None else None,
            "watch": self.watch.to_json() if self.watch is not None else None,
            "log_diagnosis": log_diagnosis.to_json() if log_diagnosis else None,
        }


# --------------------------------------------------------------------------- evidence in context

CONTEXT_RADIUS = 2
CONTEXT_MAX_FILE = 64 << 20  # files larger than this show their evidence lines alone


def with_context(
    user_logs: Sequence[LogInput], evidence: Sequence[Evidence]
) -> tuple[Evidence, ...]:
    """Evidence lines from the user's logs with the lines around them (source "context"),
    in log order; gaps between windows are marked with "…". Other evidence is kept as is."""
    logs = {lg.name: lg for lg in user_logs}
    wanted: dict[str, set[int]] = {}
    for e in evidence:
        if e.line and e.source in logs:
            wanted.setdefault(e.source, set()).add(e.line)
    if not wanted:
        return tuple(evidence)
    texts: dict[str, dict[int, str]] = {}
    for name, lines in wanted.items():
        span = {n for ln in lines for n in range(ln - CONTEXT_RADIUS, ln + CONTEXT_RADIUS + 1)}
        texts[name] = _read_lines(logs[name], span)
    out: list[Evidence] = []
    for name in wanted:
        got = texts[name]
        last = None
        for n in sorted(got):
            if last is not None and n != last + 1:
                out.append(Evidence("…", source="context"))
            match = next((e for e in evidence if e.source == name and e.line == n), None)
            out.append(match or Evidence(got[n], line=n, source="context"))
            last = n
    out += [e for e in evidence if not (e.line and e.source in wanted)]
    return tuple(out)


def _read_lines(log: LogInput, numbers: set[int]) -> dict[int, str]:
    """The lines of these numbers as the engine read them (iter_lines: a JSON record's line,
    without a collector's tag, a quote or a bullet), so they read as the evidence does."""
    src: Path | bytes
    if log.path:
        try:
            if Path(log.path).stat().st_size > CONTEXT_MAX_FILE:
                return {}
        except OSError:
            return {}
        src = Path(log.path)
    else:
        src = log.text
    out = {}
    top = max(numbers)
    try:
        for n, text in iter_lines(src, log.name):
            if n > top:
                break
            if n in numbers:
                out[n] = text[:500]
    except OSError:
        return {}
    return out
