"""The wizard's brain, Qt-free: the Session (everything the user did) and the flow decisions.

Steps: start -> checks -> reproduce -> diagnosis -> fix -> export. Which step is open, which
is skipped and why, where Next and Back go, which benchmark settings to suggest, and the
combined ranked causes (crash logs, checks, the run's outcome, its telemetry) are pure
functions of the Session, unit-tested without Qt.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.diagnose.engine import CauseInfo, diagnose, load_causes
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Cause, Diagnosis, Evidence, Facts, Finding, Severity, Target

STEPS = ("start", "checks", "reproduce", "diagnosis", "fix", "export")
STEP_TITLES = {
    "start": "Start",
    "checks": "Environment checks",
    "reproduce": "Reproduce",
    "diagnosis": "Diagnosis",
    "fix": "Fix",
    "export": "Export",
}
DOOR_SETUP, DOOR_LOG = "setup", "log"


@dataclass
class LogInput:
    """A crash log the user gave: pasted text, or a file (read when diagnosed)."""

    name: str
    text: bytes = b""
    path: str | None = None

    def source(self) -> bytes | Path:
        return Path(self.path) if self.path else self.text


@dataclass
class Session:
    """Everything the user has done in the wizard (JSON-able for a later save)."""

    door: str | None = None
    target: Target | None = None
    logs: list[LogInput] = field(default_factory=list)
    check: Any = None  # core.scan.CheckReport
    bench: Any = None  # core.bench.supervisor.BenchResult
    telemetry: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # last run
    bench_options: Any = None  # the SupervisorOptions of that run (its RAM cap...)
    log_diagnosis: Diagnosis | None = None

    def facts(self) -> Facts | None:
        return getattr(self.check, "facts", None)

    def findings(self) -> list[Finding]:
        return list(getattr(self.check, "findings", ()) or ())

    def add_log(self, name: str, text: bytes = b"", path: str | None = None) -> LogInput:
        log = LogInput(name, text, path)
        self.logs.append(log)
        self.log_diagnosis = None
        return log

    def diagnose_logs(self) -> Diagnosis | None:
        """The crash logs as one case, with the machine's facts when the check ran.

        Raises:
            OSError: a log file can no longer be read.
        """
        if not self.logs:
            self.log_diagnosis = None
            return None
        self.log_diagnosis = diagnose(
            *(log.source() for log in self.logs),
            facts=self.facts(),
            names=[log.name for log in self.logs],
        )
        return self.log_diagnosis

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": 1,
            "door": self.door,
            "target": self.target.to_json() if self.target else None,
            "logs": [{"name": lg.name, "path": lg.path, "bytes": len(lg.text)} for lg in self.logs],
            "check": self.check.to_json() if self.check is not None else None,
            "bench": self.bench.to_json() if self.bench is not None else None,
            "log_diagnosis": self.log_diagnosis.to_json() if self.log_diagnosis else None,
        }


# --------------------------------------------------------------------------- step decisions


@dataclass(frozen=True)
class StepState:
    step: str
    enabled: bool
    reason: str = ""  # why it is closed or skipped; a note when open ("will run on the CPU")
    skipped: bool = False  # open, but Next passes over it on this path


def _fact(session: Session, name: str) -> Any:
    facts = session.facts()
    return facts.value(name) if facts is not None else None


def step_states(session: Session) -> dict[str, StepState]:
    s: dict[str, StepState] = {"start": StepState("start", True)}
    log_door = session.door == DOOR_LOG
    if session.target is None:
        s["checks"] = StepState("checks", False, "Pick the Python your notebook uses first.")
    else:
        s["checks"] = StepState(
            "checks",
            True,
            "You brought a crash log: checking the setup is optional (it sharpens the diagnosis)."
            if log_door
            else "",
            skipped=log_door,
        )
    tf_installed = _fact(session, "tf.installed")
    if session.target is None:
        s["reproduce"] = StepState("reproduce", False, "Pick the Python your notebook uses first.")
    elif tf_installed is False:
        s["reproduce"] = StepState(
            "reproduce",
            False,
            "TensorFlow does not import in this Python, so there is nothing to run: the "
            "environment checks say why.",
        )
    else:
        note = ""
        if _fact(session, "tf.gpu_count") == 0:
            note = "TensorFlow sees no GPU in this Python: the run will use the CPU."
        if log_door:
            note = (note + " " if note else "") + "Optional: reproduce the crash under watch."
        s["reproduce"] = StepState("reproduce", True, note, skipped=log_door)
    has_source = bool(session.logs or session.check is not None or session.bench is not None)
    s["diagnosis"] = StepState(
        "diagnosis",
        has_source,
        ""
        if has_source
        else "Nothing to diagnose yet: give a crash log, run the checks, or reproduce the crash.",
    )
    fixes = proposed_fixes(session)
    s["fix"] = StepState(
        "fix", bool(fixes), "" if fixes else "No fix to propose yet: nothing was found wrong."
    )
    s["export"] = StepState("export", True)
    return s


def next_step(session: Session, current: str) -> str | None:
    """Where Next goes: the next open step that is not skipped on this path."""
    states = step_states(session)
    for step in STEPS[STEPS.index(current) + 1 :]:
        st = states[step]
        if st.enabled and not st.skipped:
            return step
    return None


def prev_step(session: Session, current: str) -> str | None:
    """Where Back goes: the previous open step that is not skipped on this path."""
    states = step_states(session)
    for step in reversed(STEPS[: STEPS.index(current)]):
        st = states[step]
        if st.enabled and not st.skipped:
            return step
    return None


# --------------------------------------------------------------------------- suggestions

_SHAPE = re.compile(r"shape\s*\[\s*(\d+)\s*,")
_MODEL_HINTS = (
    ("resnet50", re.compile(r"resnet|conv\d_block\d|res\d[a-z]_branch", re.I)),
    ("transformer", re.compile(r"multi_head_attention|transformer|attention|embedding", re.I)),
    ("cnn", re.compile(r"conv2d|max_pooling2d|conv2d_\d|Conv2DBackprop", re.I)),
    ("mlp", re.compile(r"\bdense(?:_\d+)?\b|MatMul", re.I)),
)


def suggest_config(session: Session) -> tuple[BenchConfig, list[str]]:
    """Benchmark settings close to the user's crash, and why each was chosen."""
    reasons: list[str] = []
    preset, batch, device = "cnn", 32, "gpu"
    text = _log_text(session)
    if text:
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
    if _fact(session, "tf.gpu_count") == 0:
        device = "cpu"
        reasons.append("TensorFlow sees no GPU here: the run uses the CPU")
    growth = str((_fact(session, "target.env") or {}).get("TF_FORCE_GPU_ALLOW_GROWTH", ""))
    cfg = BenchConfig(
        preset=preset, batch_size=batch, device=device, memory_growth=growth.lower() == "true"
    )
    if cfg.memory_growth:
        reasons.append("your environment sets TF_FORCE_GPU_ALLOW_GROWTH=true: memory growth")
    return cfg.validate(), reasons


def _log_text(session: Session, limit: int = 4 << 20) -> str:
    parts = []
    for lg in session.logs:
        if lg.text:
            parts.append(lg.text[:limit].decode("utf-8", "replace"))
        elif lg.path:
            try:
                with open(lg.path, "rb") as fh:
                    parts.append(fh.read(limit).decode("utf-8", "replace"))
            except OSError:
                continue
    return "\n".join(parts)


# --------------------------------------------------------------------------- telemetry causes

LEAK_MIN_GROWTH = 64 << 20  # bytes over the steady state
LEAK_MIN_FRACTION = 0.15  # of the starting level
LEAK_MIN_R2 = 0.8
TRACING_FACTOR = 10.0  # the first step this many times a normal step
RETRACE_MIN_S = 0.1  # a later step slower than this (and the factor) was traced again
INPUT_BOUND_UTIL = 30  # % GPU utilisation while steps run


def _fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(slope, r squared) of a least-squares line."""
    n = len(xs)
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
    info = causes or load_causes()
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

    # a leak: the worker's memory (RSS, or TF's in-use) climbs along the steady state
    if steady_at is not None:
        end_t = steps[-1]["t"] if steps else None
        series: dict[str, list[tuple[float, float]]] = {"RSS": [], "TF in use": []}
        for k, i in items:
            t = i.get("t")
            if not isinstance(t, (int, float)) or t < steady_at or (end_t and t > end_t):
                continue
            if k == "sample" and i.get("rss"):
                series["RSS"].append((t, float(sum(i["rss"].values()))))
            elif k == "tf":
                cur = sum(int(v.get("current") or 0) for v in i.values() if isinstance(v, dict))
                series["TF in use"].append((t, float(cur)))
        for name, pts in series.items():
            if len(pts) < 10:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            slope, r2 = _fit(xs, ys)
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
            floor = max(TRACING_FACTOR * base, RETRACE_MIN_S)  # machine hiccups are shorter
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


# --------------------------------------------------------------------------- the answer


@dataclass(frozen=True)
class RankedCause:
    """A cause with every source that points at it (log, checks, run, telemetry)."""

    cause: Cause
    sources: tuple[str, ...]


def _finding_cause(f: Finding, info: dict[str, CauseInfo]) -> Cause | None:
    """A check finding that names a cause id (the probe-output diagnosis: log.<cause>)."""
    if f.id.startswith("log.") and f.id[4:] in info:
        cid = f.id[4:]
        m = re.search(r"(\d+)% sure", f.title)
        conf = int(m.group(1)) / 100 if m else 0.5
        c = info[cid]
        return Cause(cid, conf, c.title, c.explanation, f.evidence, c.fixes)
    return None


def combined_causes(session: Session) -> list[RankedCause]:
    """Every source's causes merged by id: confidences combine as independent evidence
    (1 - product of misses), evidence is pooled, sources are listed."""
    info = load_causes()
    found: list[tuple[str, Cause]] = []
    if session.logs:
        d = session.log_diagnosis or session.diagnose_logs()
        if d is not None:
            found += [("crash log", c) for c in d.causes]
    for f in session.findings():
        c = _finding_cause(f, info)
        if c is not None:
            found.append(("environment check", c))
    bench = session.bench
    if bench is not None:
        found += [("reproduced run", c) for c in bench.diagnosis.causes]
    if session.telemetry:
        found += [("telemetry", c) for c in telemetry_causes(session.telemetry, info)]
    merged: dict[str, tuple[float, list[Evidence], list[str], Cause]] = {}
    for source, c in found:
        miss, ev, srcs, first = merged.get(c.id, (1.0, [], [], c))
        miss *= 1.0 - max(0.0, min(1.0, c.confidence))
        ev.extend(e for e in c.evidence if e not in ev)
        if source not in srcs:
            srcs.append(source)
        merged[c.id] = (miss, ev, srcs, first)
    ranked = []
    for cid, (miss, ev, srcs, first) in merged.items():
        conf = round(1.0 - miss, 2)
        cause = Cause(cid, conf, first.title, first.explanation, tuple(ev), first.fixes)
        ranked.append(RankedCause(cause, tuple(srcs)))
    ranked.sort(key=lambda r: (-r.cause.confidence, -len(r.sources), r.cause.id))
    return ranked


def suggested_params(session: Session) -> dict[str, str]:
    """Fix parameters from what was measured: a GPU memory limit from the free VRAM and the
    benchmark's TF peak (with 25% headroom), the batch size from the max-batch search, the
    GPU with the most free memory."""
    out: dict[str, str] = {}
    facts = session.facts()
    free: dict[int, int] = {}
    if facts is not None:
        n = facts.value("gpu.count")
        for i in range(n if isinstance(n, int) else 0):
            total, used = (
                facts.value(f"gpu{i}.memory_total_mib"),
                facts.value(f"gpu{i}.memory_used_mib"),
            )
            if isinstance(total, int) and isinstance(used, int):
                free[i] = total - used
    if free:
        best = max(free, key=lambda i: free[i])
        out["gpu"] = str(best)
        limit = free[best] - 512  # leave room for the CUDA context and cuDNN workspaces
        bench = session.bench
        peaks = (bench.metrics.get("tf_peak_bytes") or {}) if bench is not None else {}
        gpu_peak = max((v for k, v in peaks.items() if k.startswith("GPU")), default=0)
        if gpu_peak:
            limit = min(limit, int(gpu_peak * 1.25) >> 20)
        if limit >= 256:
            out["memory_limit_mb"] = str(limit)
    rec = getattr(session.bench, "recommendation", None) if session.bench is not None else None
    if rec and rec.get("recommended_batch"):
        out["batch_size"] = str(rec["recommended_batch"])
    return out


def _fix_unsupported(fid: str, session: Session) -> bool:
    """A fix this TensorFlow build cannot use (the async allocator needs CUDA 11.2+)."""
    if session.check is None:
        return False
    cuda = str(_fact(session, "tf.build_cuda_version") or "")
    cuda_build = _fact(session, "tf.is_cuda_build")
    return catalog.fix_unsupported(fid, cuda_build=cuda_build, build_cuda=cuda) is not None


def proposed_fixes(session: Session) -> list[tuple[str, list[str]]]:
    """(fix id, the causes or findings it addresses), most important first; fixes this
    TensorFlow build cannot use are left out."""
    order: dict[str, list[str]] = {}
    if session.logs or session.bench is not None or session.telemetry:
        for rc in combined_causes(session):
            for fid in rc.cause.fixes:
                order.setdefault(fid, []).append(rc.cause.title)
    for f in sorted(session.findings(), key=lambda f: -int(f.severity)):
        if f.severity >= Severity.WARNING:
            for fid in f.fixes:
                order.setdefault(fid, []).append(f.title)
    return [(f, why) for f, why in order.items() if not _fix_unsupported(f, session)]


def confidence_words(conf: float) -> str:
    """How sure, in words: "almost certain" (>= 0.9) ... "possible"."""
    if math.isnan(conf):
        return "unknown"
    return (
        "almost certain"
        if conf >= 0.9
        else "likely"
        if conf >= 0.7
        else "plausible"
        if conf >= 0.45
        else "possible"
    )


CONTEXT_RADIUS = 2
CONTEXT_MAX_FILE = 64 << 20  # files larger than this show their evidence lines alone


def with_context(session: Session, evidence: Sequence[Evidence]) -> tuple[Evidence, ...]:
    """Evidence lines from the user's logs with the lines around them (source "context"),
    in log order; gaps between windows are marked with "…". Other evidence is kept as is."""
    logs = {lg.name: lg for lg in session.logs}
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
    if log.path:
        try:
            if Path(log.path).stat().st_size > CONTEXT_MAX_FILE:
                return {}
            data = Path(log.path).read_bytes()
        except OSError:
            return {}
    else:
        data = log.text
    out = {}
    top = max(numbers)
    for n, raw in enumerate(data.split(b"\n"), 1):
        if n > top:
            break
        if n in numbers:
            out[n] = raw.decode("utf-8", "replace").rstrip("\r")[:500]
    return out
