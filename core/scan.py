"""The environment check: run every probe concurrently, turn facts into findings as they arrive."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tfdoctor.core import __version__, checks, jsonio
from tfdoctor.core.events import EventBuffer
from tfdoctor.core.model import (
    Fact,
    Facts,
    Finding,
    ProbeResult,
    ProbeStatus,
    Severity,
    Target,
    sort_findings,
)
from tfdoctor.core.paths import atomic_write_text
from tfdoctor.core.probes import cudalibs, nvml, system, targetrun
from tfdoctor.core.redact import mask_secrets

log = logging.getLogger(__name__)

REPORT_SCHEMA = 1
MACHINE_SNAPSHOT_KEYS = ("system_facts", "cudalibs_facts")

# Probe name -> human label, in the order the GUI shows progress.
PROBE_LABELS = {
    checks.TARGET: "TensorFlow in the target Python",
    checks.NVML: "NVIDIA driver and GPUs",
    checks.SYSTEM: "system memory, kernel log, platform",
    checks.CUDALIBS: "CUDA and cuDNN installs",
}


@dataclass
class CheckReport:
    """The outcome of one environment check."""

    target: Target
    facts: Facts
    findings: list[Finding]
    probes: dict[str, ProbeResult]
    output: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    snapshot: str | None = None
    cancelled: bool = False

    @property
    def worst(self) -> Severity:
        return max((f.severity for f in self.findings), default=Severity.OK)

    @property
    def exit_code(self) -> int:
        """0 when no finding is an error, 1 when one is (the CLI's contract)."""
        return 1 if self.worst >= Severity.ERROR else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": REPORT_SCHEMA,
            "tool": {"name": "tfdoctor", "version": __version__},
            "target": self.target.to_json(),
            "snapshot": self.snapshot,
            "probes": {k: v.to_json() for k, v in sorted(self.probes.items())},
            "facts": self.facts.to_json(),
            "findings": [f.to_json() for f in self.findings],
            "output_tail": self.output[-200:],
            "duration_s": round(self.duration_s, 3),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CheckReport:
        """A report saved by `tfdoctor check --json`.

        Raises:
            ValueError: not a check report of this schema (one-line reason).
        """
        if not isinstance(data, Mapping) or data.get("schema") != REPORT_SCHEMA:
            raise ValueError("not a `tfdoctor check --json` report")
        try:
            return cls(
                target=Target.from_json(data["target"]),
                facts=Facts.from_json(data.get("facts") or {}),
                findings=[Finding.from_json(f) for f in data.get("findings") or ()],
                probes={k: ProbeResult.from_json(v) for k, v in (data.get("probes") or {}).items()},
                output=[str(x) for x in data.get("output_tail") or ()],
                duration_s=float(data.get("duration_s") or 0.0),
                snapshot=data.get("snapshot"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"a malformed check report ({type(exc).__name__}: {exc})") from None


class CheckRun:
    """A full check running in background threads; progress is read from `events`.

    Event kinds (payload): probe_started (name), probe_finished (ProbeResult),
    stage (target probe stage label), finding (Finding), done (CheckReport).
    Core never calls into the GUI: the GUI polls `events.since(seq)` from a QTimer.
    """

    def __init__(
        self,
        target: Target,
        *,
        timeout_s: float = targetrun.DEFAULT_TIMEOUT_S,
        snapshot: str | os.PathLike[str] | None = None,
        target_validated: bool = False,
    ) -> None:
        self.target = target
        self._validated = target_validated
        self.timeout_s = timeout_s
        self.snapshot = None if snapshot is None else Path(snapshot)
        self.events: EventBuffer[tuple[str, Any]] = EventBuffer()
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._facts: list[Fact] = []
        self._results: dict[str, ProbeResult] = {}
        self._output: list[str] = []
        self._ran: set[str] = set()
        self._findings: list[Finding] = []
        self._done = threading.Event()
        self._report: CheckReport | None = None
        self._thread: threading.Thread | None = None
        self._machine: dict[str, Any] | None = None

    # -- public

    def start(self) -> CheckRun:
        """Start in the background and return at once.

        Raises:
            nvml.SnapshotError: `snapshot` is not a readable tfdoctor snapshot.
        """
        if self.snapshot is not None:
            self._machine = load_machine_snapshot(self.snapshot)
        self._thread = threading.Thread(target=self._run, name="tfdoctor-check", daemon=True)
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._cancel.set()

    def wait(self, timeout_s: float | None = None) -> CheckReport | None:
        self._done.wait(timeout_s)
        return self._report

    @property
    def done(self) -> bool:
        return self._done.is_set()

    # -- internals

    def _run(self) -> None:
        t0 = time.monotonic()
        jobs: dict[str, Callable[[], ProbeResult]] = {
            checks.TARGET: self._probe_target,
            checks.NVML: self._probe_nvml,
            checks.SYSTEM: self._probe_system,
            checks.CUDALIBS: self._probe_cudalibs,
        }
        try:
            with ThreadPoolExecutor(max_workers=len(jobs), thread_name_prefix="probe") as pool:
                futures: dict[Future[ProbeResult], str] = {}
                for name, fn in jobs.items():
                    self.events.append(("probe_started", name))
                    fut = pool.submit(self._guarded, name, fn)
                    futures[fut] = name
                    fut.add_done_callback(self._on_probe_done)
        finally:
            with self._lock:
                findings = sort_findings(self._findings)
                report = CheckReport(
                    target=self.target,
                    facts=Facts(self._facts),
                    findings=findings,
                    probes=dict(self._results),
                    output=list(self._output),
                    duration_s=time.monotonic() - t0,
                    snapshot=None if self.snapshot is None else str(self.snapshot),
                    cancelled=self._cancel.is_set(),
                )
            self._report = report
            self.events.append(("done", report))
            self._done.set()

    def _guarded(self, name: str, fn: Callable[[], ProbeResult]) -> ProbeResult:
        t0 = time.monotonic()
        try:
            return fn()
        except Exception as exc:  # a bug in a probe must not take the check down
            log.exception("probe %s failed", name)
            return ProbeResult(
                name, ProbeStatus.ERROR, (), f"internal error: {exc}", time.monotonic() - t0
            )

    def _on_probe_done(self, fut: Future[ProbeResult]) -> None:
        result = fut.result()
        with self._lock:
            self._results[result.probe] = result
            self._facts.extend(result.facts)
            facts = Facts(self._facts)
            ctx = checks.CheckContext(dict(self._results), tuple(self._output))
            new = checks.run_checks(facts, ctx, done=self._results, skip=self._ran)
            self._ran |= {c.id for c in checks.REGISTRY if c.needs <= set(self._results)}
            self._findings.extend(new)
        self.events.append(("probe_finished", result))
        for f in sort_findings(new):
            self.events.append(("finding", f))

    def _probe_target(self) -> ProbeResult:
        def on_stage(stage: str) -> None:
            self.events.append(("stage", targetrun.STAGE_LABELS.get(stage, stage)))

        def on_output(line: str) -> None:
            with self._lock:
                self._output.append(line)

        run = targetrun.run_probe(
            self.target,
            timeout_s=self.timeout_s,
            on_stage=on_stage,
            on_output=on_output,
            cancel=self._cancel,
            validate=not self._validated,
        )
        with self._lock:
            self._output[:] = run.output  # the runner's copy is complete and ordered
        return run.result

    def _probe_nvml(self) -> ProbeResult:
        if self.snapshot is not None:
            return nvml.collect_from_snapshot(self.snapshot)
        return nvml.collect()

    def _probe_system(self) -> ProbeResult:
        recorded = self._recorded("system_facts", checks.SYSTEM)
        if recorded is not None:
            return recorded
        return system.collect(pid=self.target.pid or os.getpid())

    def _probe_cudalibs(self) -> ProbeResult:
        recorded = self._recorded("cudalibs_facts", checks.CUDALIBS)
        if recorded is not None:
            return recorded
        return cudalibs.collect(env=targetrun.target_environment(self.target))

    def _recorded(self, key: str, probe: str) -> ProbeResult | None:
        if self._machine is None or key not in self._machine:
            return None
        name = self.snapshot.name if self.snapshot else "snapshot"
        facts = Facts.from_json(self._machine[key])
        return ProbeResult(
            probe,
            ProbeStatus.OK,
            tuple(Fact(f.name, f.value, f"snapshot:{name} ({f.source})") for f in facts.values()),
            f"replayed from {name}",
        )


# ---------------------------------------------------------------- machine snapshots


def load_machine_snapshot(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a capture file (NVML calls + system and CUDA facts), validating the NVML part.

    Raises:
        nvml.SnapshotError: not JSON, not a tfdoctor snapshot, or an unsupported schema.
    """
    p = Path(path)
    nvml.load_snapshot(p)  # validates format and schema with a one-line error
    data: dict[str, Any] = jsonio.loads(p.read_text(encoding="utf-8"))
    for key in MACHINE_SNAPSHOT_KEYS:
        if key in data and not isinstance(data[key], Mapping):
            raise nvml.SnapshotError(f"{p.name}: '{key}' must be an object of facts")
    return data


def capture_machine(
    path: str | os.PathLike[str], provenance: str = "", *, mask: bool = True
) -> dict[str, Any]:
    """Record this machine's NVML session and its system/CUDA facts into one snapshot file.

    The file replays through `tfdoctor check --snapshot FILE` (NVML through the same code as
    live; system and CUDA facts as recorded). No host or user names are stored; with `mask`,
    secret-looking values are masked (see core.redact).

    Raises:
        OSError: the file cannot be written (missing folder, permissions, disk full).
    """
    result, snap = nvml.record(provenance=provenance)
    data = snap.to_json()
    data["system_facts"] = Facts(system.collect().facts).to_json()
    data["cudalibs_facts"] = Facts(cudalibs.collect().facts).to_json()
    data["captured_by"] = f"tfdoctor {__version__}"
    data["captured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    if mask:
        data = mask_secrets(data)
    atomic_write_text(Path(path), json.dumps(data, indent=1, sort_keys=True) + "\n")
    return {"nvml_status": result.status.value, "path": str(path), "gpus": _gpu_count(result)}


def _gpu_count(result: ProbeResult) -> int:
    for f in result.facts:
        if f.name == "gpu.count" and isinstance(f.value, int):
            return f.value
    return 0
