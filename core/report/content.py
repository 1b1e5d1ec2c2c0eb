"""What a report says, built once from a session and its analysis, then rendered as HTML,
Markdown or JSON (`core.report.render`): the three formats never disagree.

It answers what a maintainer asks first in an issue thread (the shape of `tf_env_collect.sh`
and PyTorch's `collect_env`): TF, CUDA, cuDNN and driver versions, the GPU and its compute
capability, the platform, the exact error, and what was tried; then the diagnosis with its
evidence lines, the memory plots and the fix script. Redaction (on by default) runs over the
whole of it, so nothing private reaches any format.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tfdoctor.core import __version__, fixes
from tfdoctor.core.bench.outcome import STATUSES
from tfdoctor.core.diagnose.combine import RankedCause, confidence_words
from tfdoctor.core.fixes import export
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Evidence, Facts, Severity
from tfdoctor.core.redact import Identity, Redactor, secret_values
from tfdoctor.core.report import svgplot
from tfdoctor.core.series import WATCHED, WORKER, format_bytes
from tfdoctor.core.session import Analysis, LogInput, Session

SCHEMA = 1
ERROR_LINES = 8  # the exact error: this many lines at most
EVIDENCE_LINES = 6  # per cause
LOG_TAIL_LINES = 60  # each log's last lines, in a collapsed block
NOT_CHECKED = "not checked"


@dataclass
class Plot:
    id: str
    title: str
    svg: str
    alt: str
    legend: list[tuple[str, str, bool]]


@dataclass
class Report:
    """A report's content: `data` (JSON-able, already redacted when asked), the plots (SVG),
    and what redaction replaced (in words, never the values)."""

    data: dict[str, Any]
    plots: list[Plot] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    redact: bool = True


def build(
    session: Session,
    analysis: Analysis | None,
    *,
    redact: bool = True,
    identity: Identity | None = None,
    source: str | None = None,
) -> Report:
    """The report of a session. `identity`: whose machine the investigation was made on (an
    opened file's); this machine's is always added. `source`: the file's name, if any."""
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "tool": {"name": "tfdoctor", "version": __version__},
        "generated_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "investigation": source,
        "summary": _summary(analysis),
        "environment": _environment(session, analysis),
        "error": _error(session, analysis),
        "causes": _causes(analysis.ranked if analysis else ()),
        "experiments": (
            _causes(analysis.experiments) if analysis is not None and analysis.has_crash else []
        ),
        "findings": _findings(session),
        "runs": _runs(session),
        "tried": _tried(session),
        "fix_script": _fix_script(session, analysis),
        "logs": [_log(lg) for lg in session.logs],
    }
    plots = _plots(session)
    who = Identity.here().merged(identity or Identity())
    facts = session.facts()
    env = facts.value("target.env") if facts is not None else None
    if isinstance(env, dict):
        who = who.merged(Identity(secrets=secret_values(env)))
    redacted: list[str] = []
    if redact:
        r = Redactor(who)
        data = r.data(data)
        for p in plots:
            p.svg, p.alt, p.title = r.text(p.svg), r.text(p.alt), r.text(p.title)
        redacted = r.summary()
    data["redaction"] = {
        "on": redact,
        "replaced": redacted,
        "note": (
            "Home folder, user and host names, and secret values were replaced."
            if redact and redacted
            else "Private details were looked for (home folder, user and host names, secret "
            "values): none was found."
            if redact
            else "Not redacted: this report holds your paths, user and host names and any "
            "secret values it found. Share it with care."
        ),
    }
    data["plots"] = [{"id": p.id, "title": p.title, "description": p.alt} for p in plots]
    return Report(data, plots, redacted, redact)


# --------------------------------------------------------------------------- sections


def _summary(analysis: Analysis | None) -> dict[str, Any]:
    if analysis is None:
        return {"headline": "Not analysed yet", "cause": None, "confidence": None}
    ranked = analysis.ranked
    if not ranked:
        program_error = analysis.log_diagnosis.program_error if analysis.log_diagnosis else None
        said = (
            "The run ended in a Python error of the program, not of the GPU set-up"
            if program_error is not None
            else "No known cause found in what was given"
            if analysis.has_crash
            else "Nothing failed: no cause to name"
        )
        return {"headline": said, "cause": None, "confidence": None}
    top = ranked[0].cause
    words = confidence_words(top.confidence)
    return {
        "headline": f"{top.shown_title} ({words}, {round(top.confidence * 100)}%)",
        "cause": top.id,
        "confidence": top.confidence,
    }


def _fact(facts: Facts | None, name: str) -> Any:
    return facts.value(name) if facts is not None else None


def _environment(session: Session, analysis: Analysis | None) -> list[dict[str, str]]:
    """Rows (label, value) answering 'which versions, which GPU, which platform'."""
    facts = session.facts()
    rows: list[tuple[str, str]] = [("tfdoctor", __version__)]
    if facts is None:
        target = session.target
        if target is not None:
            rows.append(("Python", f"{target.label} ({target.python})"))
        rows.append(
            (
                "Environment check",
                "not run in this investigation: `tfdoctor check --open FILE --save FILE` adds it",
            )
        )
        # what the log itself says about the machine, each with its line
        log_d = analysis.log_diagnosis if analysis is not None else None
        for what, value, line in log_d.stated if log_d is not None else ():
            rows.append((f"{what} (your log says)", f"{value} — “{line}”"))
        rows += _worker_rows(session)
        return [{"label": k, "value": v} for k, v in rows]

    def f(name: str) -> Any:
        return _fact(facts, name)

    plat = " ".join(str(x) for x in (f("os.distro") or f("os.system"), f("os.kernel")) if x)
    if f("os.is_wsl"):
        plat += f" · WSL {f('os.wsl_version') or ''}".rstrip()
    if f("os.container") not in (None, "none"):
        plat += f" · in a {f('os.container')} container"
    rows.append(("Platform", plat or NOT_CHECKED))
    if f("cpu.model"):
        rows.append(("CPU", f"{f('cpu.model')} ({f('cpu.count_logical') or '?'} logical)"))
    mem = []
    if isinstance(f("mem.total_mib"), (int, float)):
        mem.append(f"RAM {format_bytes(f('mem.total_mib') * 2**20)}")
    if isinstance(f("swap.total_mib"), (int, float)):
        mem.append(f"swap {format_bytes(f('swap.total_mib') * 2**20)}")
    if isinstance(f("cgroup.memory_limit_mib"), (int, float)):
        mem.append(f"memory cgroup limit {format_bytes(f('cgroup.memory_limit_mib') * 2**20)}")
    if mem:
        rows.append(("Memory", ", ".join(mem)))
    py = f("target.python_version")
    kind = "conda" if f("target.is_conda") else "venv" if f("target.is_venv") else ""
    if py or session.target is not None:
        where = session.target.python if session.target is not None else f("target.python")
        rows.append(("Python", f"{py or '?'}{f' ({kind})' if kind else ''} at {where}"))
    if f("tf.installed") is False:
        rows.append(("TensorFlow", f"cannot be imported: {f('tf.import_error') or 'error'}"))
    elif f("tf.version"):
        build = "a CUDA build" if f("tf.is_cuda_build") else "a CPU-only build"
        keras = f" · Keras {f('tf.keras_version')}" if f("tf.keras_version") else ""
        rows.append(("TensorFlow", f"{f('tf.version')} ({build}){keras}"))
        built = []
        if f("tf.build_cuda_version"):
            built.append(f"CUDA {f('tf.build_cuda_version')}")
        if f("tf.build_cudnn_version"):
            built.append(f"cuDNN {f('tf.build_cudnn_version')}")
        ccs = f("tf.build_compute_capabilities")
        if isinstance(ccs, list) and ccs:
            built.append("for " + ", ".join(str(c) for c in ccs))
        if built:
            rows.append(("TensorFlow built with", ", ".join(built)))
    else:
        rows.append(("TensorFlow", NOT_CHECKED))
    libs = f("tf.loaded_libs")
    if isinstance(libs, list) and libs:
        named = [
            f"{lib.get('name')}{' ' + str(lib['version']) if lib.get('version') else ''}"
            for lib in libs
            if isinstance(lib, dict)
        ]
        rows.append(("CUDA libraries loaded", ", ".join(named)))
    driver = f("nvidia.driver_version")
    if driver:
        cuda = f("nvidia.cuda_driver_version")
        rows.append(("NVIDIA driver", f"{driver}" + (f" (supports CUDA {cuda})" if cuda else "")))
    else:
        status = f("nvml.status")
        rows.append(("NVIDIA driver", f"none found ({status})" if status else NOT_CHECKED))
    for i in range(int(f("gpu.count") or 0)):
        name = f(f"gpu{i}.name") or "GPU"
        cc = f(f"gpu{i}.compute_capability")
        total, used = f(f"gpu{i}.memory_total_mib"), f(f"gpu{i}.memory_used_mib")
        said = f"{name}" + (f", compute capability {cc}" if cc else "")
        if isinstance(total, (int, float)):
            said += f", {format_bytes(total * 2**20)}"
            if isinstance(used, (int, float)):
                said += f" ({format_bytes(used * 2**20)} in use when checked)"
        rows.append((f"GPU {i}", said))
    if f("tf.gpu_count") is not None:
        rows.append(("GPUs TensorFlow sees", str(f("tf.gpu_count"))))
    if f("tf.device_error"):
        rows.append(("TensorFlow's GPU error", str(f("tf.device_error"))))
    env = f("target.env")
    if isinstance(env, dict) and env:
        rows.append(("Environment variables", ", ".join(f"{k}={v}" for k, v in env.items())))
    rows += _worker_rows(session)
    return [{"label": k, "value": v} for k, v in rows]


def _worker_rows(session: Session) -> list[tuple[str, str]]:
    """What the benchmark worker itself reported (its TF and devices), when it ran."""
    info = session.bench.info if session.bench is not None else {}
    if not info:
        return []
    said = ", ".join(
        f"{k} {v}" for k, v in info.items() if isinstance(v, (str, int, float)) and v != ""
    )
    return [("Benchmark worker", said[:400])] if said else []


def _evidence(items: Sequence[Evidence], limit: int) -> list[dict[str, Any]]:
    out = []
    for e in items[:limit]:
        row: dict[str, Any] = {"text": e.text}
        if e.source:
            row["source"] = e.source
        if e.line is not None:
            row["line"] = e.line
        if e.fact:
            row["fact"] = e.fact
        out.append(row)
    return out


def _error(session: Session, analysis: Analysis | None) -> dict[str, Any]:
    """The exact error: the crash's own lines, else how the watched process or the run
    ended, with where they come from."""
    if analysis is not None and analysis.log_diagnosis is not None:
        # the leading cause's own lines, in the log's order: what the crash printed
        top = analysis.log_diagnosis.causes[:1]
        picked = sorted(
            {(e.source, e.line): e for c in top for e in c.evidence if e.line is not None}.values(),
            key=lambda e: (e.source, e.line or 0),
        )
        if picked:
            return {"from": "your log", "lines": _evidence(picked, ERROR_LINES)}
        err = analysis.log_diagnosis.program_error
        if err is not None and not analysis.ranked:
            return {
                "from": "your log",
                "lines": _evidence([err], ERROR_LINES),
                "note": "a Python error of the program itself, not of the GPU set-up",
            }
    w = session.watch
    if w is not None and not w.ending.normal:
        said = [w.ending.words()]
        if w.ending.oom_kill_line:
            said.append(w.ending.oom_kill_line)
        said += w.ending.xid_lines[:3] + w.ending.restart_lines[-2:]
        return {"from": f"the watch of {w.watched.label}", "lines": [{"text": t} for t in said]}
    b = session.bench
    if b is not None and b.outcome.status not in ("completed", "cancelled"):
        o = b.outcome
        ended = [f"{STATUSES.get(o.status, o.status)}: {o.detail}"]
        if o.exception:
            ended.append(f"{o.exception.get('type')}: {o.exception.get('message')}".strip())
        if o.oom_kill is not None and o.oom_kill.kernel_line:
            ended.append(o.oom_kill.kernel_line)
        return {"from": "the benchmark run", "lines": [{"text": t} for t in ended if t]}
    if session.logs:
        return {"from": "your log", "lines": [], "note": "no line of the log names an error"}
    return {"from": None, "lines": [], "note": "no crash was given or reproduced"}


def _causes(ranked: Sequence[RankedCause]) -> list[dict[str, Any]]:
    known = catalog.fixes()
    return [
        {
            "rank": i + 1,
            "id": rc.cause.id,
            # a look-alike quotes the first cause's lines: marked, and its lines not repeated
            "title": rc.cause.shown_title,
            "look_alike": rc.cause.look_alike,
            "guess": rc.cause.guess,
            "confidence": rc.cause.confidence,
            "confidence_words": confidence_words(rc.cause.confidence),
            "seen_in": list(rc.sources),
            "explanation": rc.cause.explanation,
            "evidence": [] if rc.cause.look_alike else _evidence(rc.cause.evidence, EVIDENCE_LINES),
            "fixes": [
                {"id": fid, "title": known[fid].title if fid in known else fid}
                for fid in rc.cause.fixes
            ],
        }
        for i, rc in enumerate(ranked)
    ]


def _findings(session: Session) -> list[dict[str, Any]]:
    if session.check is None:
        return []
    return [
        {
            "severity": f.severity.label,
            "title": f.title,
            "explanation": f.explanation,
            "evidence": _evidence(f.evidence, 3),
        }
        for f in session.check.findings
        if f.severity >= Severity.WARNING
    ]


def _peaks(metrics: dict[str, Any]) -> dict[str, str]:
    out = {}
    tf = metrics.get("tf_peak_bytes") or {}
    for dev, value in tf.items():
        out[f"TF peak on {dev}"] = format_bytes(float(value))
    if metrics.get("rss_peak_bytes"):
        out["worker RSS peak"] = format_bytes(float(metrics["rss_peak_bytes"]))
    if metrics.get("steady_steps_per_s"):
        out["steps/s"] = f"{float(metrics['steady_steps_per_s']):.1f}"
    return out


def _runs(session: Session) -> list[dict[str, Any]]:
    runs = []
    b = session.bench
    if b is not None:
        o = b.outcome
        run: dict[str, Any] = {
            "kind": "benchmark",
            "plot": "run" if session.telemetry else None,
            "config": b.config.describe(),
            "outcome": o.status,
            "outcome_words": STATUSES.get(o.status, o.status),
            "detail": o.detail,
            "duration_s": round(o.duration_s, 1),
            "numbers": _peaks(b.metrics),
            "causes": [c.id for c in b.diagnosis.causes],
        }
        if b.recommendation:
            run["recommendation"] = {
                k: v
                for k, v in b.recommendation.items()
                if isinstance(v, (int, float, str)) or v is None
            }
        cap = session.bench_options.memory_cap_mib if session.bench_options else None
        if cap:
            run["memory_cap"] = format_bytes(cap * 2**20)
        runs.append(run)
    w = session.watch
    if w is not None:
        runs.append(
            {
                "kind": "watch",
                "plot": "watch" if w.items else None,
                "watched": w.watched.label,
                "notebook": w.watched.notebook,
                "outcome": w.ending.how,
                "outcome_words": w.ending.words(),
                "duration_s": round(w.duration_s, 1),
                "causes": [c.id for c in w.causes],
            }
        )
    return runs


def _tried(session: Session) -> dict[str, Any]:
    known = catalog.fixes()

    def title(fid: str) -> str:
        return known[fid].title if fid in known else fid

    actions = [
        {
            "action": e.get("action"),
            "fixes": [title(str(f)) for f in e.get("fixes") or ()],
            "target": e.get("target"),
            "at": e.get("at"),
        }
        for e in session.fix_log
    ]
    verified = []
    for i, v in enumerate(session.verifications):
        verified.append(
            {
                "fixes": [title(f) for f in v.fix_ids],
                "verdict": v.verdict,
                "fixed": v.fixed,
                "table": [
                    {"measure": label, "before": before, "after": after}
                    for label, before, after in v.table(format_bytes, missing="–")
                ],
                "notes": list(v.notes),
                "plot": f"verify-{i}" if v.after_telemetry else None,
            }
        )
    return {"actions": actions, "verifications": verified}


def _fix_script(session: Session, analysis: Analysis | None) -> dict[str, Any]:
    if analysis is None:
        return {"text": None, "why_not": "not analysed yet"}
    try:
        text = export.proposal_script(
            "sh",
            analysis.fix_ids,
            analysis.cause_ids,
            session.facts(),
            session.target.python if session.target else None,
            analysis.params,
            analysis.origins,
            analysis.wanting,
            export.target_kernel(session.target),
        )
    except fixes.FixError as exc:
        return {"text": None, "why_not": str(exc)}
    return {"text": text, "why_not": None}


def _log(lg: LogInput) -> dict[str, Any]:
    data = lg.text
    if not data and lg.path:
        try:
            with open(lg.path, "rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - (256 << 10)))
                data = fh.read()
        except OSError as exc:
            return {"name": lg.name, "tail": [], "note": f"unreadable: {exc.strerror or exc}"}
    text = data.decode("utf-8", "replace")
    lines = text.splitlines()
    return {"name": lg.name, "bytes": len(data), "tail": lines[-LOG_TAIL_LINES:]}


def _plots(session: Session) -> list[Plot]:
    plots = []
    options = session.bench_options
    cap = options.memory_cap_mib * 2**20 if options and options.memory_cap_mib else None

    def add(pid: str, title: str, items: list[tuple[str, dict[str, Any]]]) -> None:
        watched = pid == "watch"
        pic = svgplot.picture(
            items, None if watched else cap, process=WATCHED if watched else WORKER
        )
        if not pic.empty:
            shown = svgplot.svg(pic, title)
            plots.append(Plot(pid, title, shown, pic.alt(title), svgplot.legend(pic)))

    if session.bench is not None and session.telemetry:
        what = session.bench.config.describe()
        add("run", f"Memory during the benchmark ({what})", session.telemetry)
    if session.watch is not None and session.watch.items:
        add("watch", f"Memory of {session.watch.watched.label}", session.watch.items)
    for i, v in enumerate(session.verifications):
        if v.after_telemetry:
            add(f"verify-{i}", f"Memory with {' + '.join(v.fix_ids)}", v.after_telemetry)
    return plots
