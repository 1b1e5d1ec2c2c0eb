"""One ranked answer from every source (crash logs, checks, a reproduced run, its telemetry),
and the one way a cause is shown as a finding card."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tfdoctor.core.diagnose.engine import CauseInfo
from tfdoctor.core.model import Cause, Evidence, Finding, Severity

# where a cause was seen, in people's words (the order sources are listed in)
SOURCE_LOG = "crash log"
SOURCE_CHECK = "environment check"
SOURCE_RUN = "reproduced run"
SOURCE_TELEMETRY = "telemetry"
SOURCE_WATCH = "watch of your process"
FINDING_CAUSE_PREFIX = "log."  # a check finding that is a diagnosed cause: log.<cause id>


@dataclass(frozen=True)
class RankedCause:
    """A cause with every source that points at it (log, checks, run, telemetry)."""

    cause: Cause
    sources: tuple[str, ...]


def finding_cause(f: Finding, info: Mapping[str, CauseInfo]) -> Cause | None:
    """A check finding that names a cause id (the probe-output diagnosis: log.<cause>)."""
    cid = f.id.removeprefix(FINDING_CAUSE_PREFIX)
    if cid == f.id or cid not in info:
        return None
    c = info[cid]
    conf = f.confidence if f.confidence is not None else 0.5
    return Cause(cid, conf, c.title, c.explanation, f.evidence, c.fixes)


# A cause that, where a source ranks it above these, is why they happened: a leak that used the
# memory up ends in an out-of-memory error. The error's own certainty is then the leak's too.
EXPLAINS = {"memory_leak": ("gpu_oom", "host_oom")}


def _explaining(found: Sequence[tuple[str, Cause]]) -> dict[str, set[str]]:
    """Cause id -> the ids it explains, where some source ranked it above them."""
    seen: dict[str, list[str]] = {}
    for source, c in found:
        seen.setdefault(source, []).append(c.id)
    out: dict[str, set[str]] = {}
    for ids in seen.values():
        for cid, effects in EXPLAINS.items():
            if cid in ids:
                out.setdefault(cid, set()).update(
                    e for e in effects if e not in ids[: ids.index(cid)]
                )
    return out


def combine(found: Iterable[tuple[str, Cause]]) -> list[RankedCause]:
    """(source, cause) pairs merged by id: confidences combine as independent evidence
    (1 - product of misses), evidence is pooled, sources are listed. A cause a source ranked
    above what it explains (`EXPLAINS`) stays above it."""
    found = list(found)
    explaining = _explaining(found)
    merged: dict[str, tuple[float, list[Evidence], list[str], Cause]] = {}
    for source, c in found:
        miss, ev, srcs, first = merged.get(c.id, (1.0, [], [], c))
        if not first.confirmed and c.confirmed:
            first = c  # a source found it: its words, not a look-alike's or a guess's
        miss *= 1.0 - max(0.0, min(1.0, c.confidence))
        quoted_by = {x.text: x.source for x in ev}  # a line two inputs quote is shown once
        for e in c.evidence:
            if e not in ev and quoted_by.get(e.text, e.source) == e.source:
                ev.append(e)
                quoted_by.setdefault(e.text, e.source)
        if source not in srcs:
            srcs.append(source)
        merged[c.id] = (miss, ev, srcs, first)
    ranked = []
    for cid, (miss, ev, srcs, first) in merged.items():
        conf = round(1.0 - miss, 2)
        effects = [1.0 - merged[e][0] for e in explaining.get(cid, ()) if e in merged]
        conf = max([conf, *(round(x, 2) for x in effects)])
        cause = Cause(
            cid,
            conf,
            first.title,
            first.explanation,
            tuple(ev),
            first.fixes,
            first.look_alike,
            first.guess,
        )
        ranked.append(RankedCause(cause, tuple(srcs)))
    ranked.sort(
        key=lambda r: (
            -r.cause.confidence,
            r.cause.id not in explaining,
            -len(r.sources),
            r.cause.id,
        )
    )
    return ranked


def combined_causes(
    info: Mapping[str, CauseInfo],
    *,
    log: Sequence[Cause] = (),
    findings: Sequence[Finding] = (),
    run: Sequence[Cause] = (),
    telemetry: Sequence[Cause] = (),
    watch: Sequence[Cause] = (),
) -> list[RankedCause]:
    """Every source's causes, ranked: the crash logs', the check findings that are causes,
    the reproduced run's and its telemetry's, and a watch of the user's own process."""
    found = [(SOURCE_LOG, c) for c in log]
    found += [(SOURCE_WATCH, c) for c in watch]
    for f in findings:
        c = finding_cause(f, info)
        if c is not None:
            found.append((SOURCE_CHECK, c))
    found += [(SOURCE_RUN, c) for c in run]
    found += [(SOURCE_TELEMETRY, c) for c in telemetry]
    return combine(found)


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


def cause_finding(
    cause: Cause,
    severity: Severity,
    *,
    sources: Sequence[str] = (),
    where: str = "",
    evidence: Sequence[Evidence] | None = None,
    id_prefix: str = "cause.",
    group: str = "cause",
) -> Finding:
    """A cause as a finding card; its confidence travels as data.

    With `sources` (a combined cause): "title — likely (80%)", and where it was seen.
    Without: "title (where, 80% sure)".
    """
    pct = round(cause.confidence * 100)
    if sources:
        title = f"{cause.shown_title} — {confidence_words(cause.confidence)} ({pct}%)"
        explanation = f"{cause.explanation} Seen in: {', '.join(sources)}."
    else:
        title = f"{cause.shown_title} ({where + ', ' if where else ''}{pct}% sure)"
        explanation = cause.explanation
    return Finding(
        f"{id_prefix}{cause.id}",
        severity,
        title,
        explanation,
        tuple(cause.evidence if evidence is None else evidence),
        cause.fixes,
        group,
        confidence=cause.confidence,
    )


def rank_severity(rank: int) -> Severity:
    """The best explanation is shown as an error, the others as warnings."""
    return Severity.ERROR if rank == 0 else Severity.WARNING


def card_severity(cause: Cause, rank: int) -> Severity:
    """How a cause's card is shown at this rank: a look-alike as information, a guess from
    wording as a warning at best, a finding by its rank."""
    if cause.look_alike:
        return Severity.INFO
    return Severity.WARNING if cause.guess else rank_severity(rank)
