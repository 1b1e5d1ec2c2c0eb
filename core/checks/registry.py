"""The check registry: probe names, the context checks read, and running the checks."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tfdoctor.core.knowledge import signatures
from tfdoctor.core.model import Facts, Finding, ProbeResult, ProbeStatus, Severity

log = logging.getLogger(__name__)

S = Severity

# Probe names (the scan runs these concurrently; a check runs once all it needs are done).
TARGET, NVML, SYSTEM, CUDALIBS = "target", "nvml", "system", "cudalibs"


@dataclass(frozen=True)
class CheckContext:
    """What checks may read besides facts: each probe's result and the probe's output lines."""

    probes: Mapping[str, ProbeResult] = field(default_factory=dict)
    output: Sequence[str] = ()

    def status(self, probe: str) -> ProbeStatus | None:
        r = self.probes.get(probe)
        return None if r is None else r.status

    def lines(self, *signature_ids: str) -> list[tuple[int, str, re.Match[str]]]:
        """Output lines (1-based number, text, match) that match one of these signatures."""
        sigs = [signatures.signature(sid) for sid in signature_ids]
        out = []
        for i, line in enumerate(self.output, 1):
            for sig in sigs:
                m = sig.pattern.search(line)
                if m:
                    out.append((i, line.strip(), m))
                    break
        return out


CheckFn = Callable[[Facts, CheckContext], Iterable[Finding]]


@dataclass(frozen=True)
class Check:
    id: str
    needs: frozenset[str]
    fn: CheckFn


REGISTRY: list[Check] = []


def check(*needs: str) -> Callable[[CheckFn], CheckFn]:
    """Register a check that runs once the named probes have finished."""

    def deco(fn: CheckFn) -> CheckFn:
        REGISTRY.append(Check(fn.__name__.removeprefix("check_"), frozenset(needs), fn))
        return fn

    return deco


def run_checks(
    facts: Facts, ctx: CheckContext, done: Iterable[str] | None = None, skip: Iterable[str] = ()
) -> list[Finding]:
    """Run every registered check whose probes are all in `done` (default: all of them).

    A check that raises is a bug in us, not in the user's machine: it becomes an UNKNOWN
    finding that says so instead of taking the whole check down.
    """
    done_set = set(ctx.probes) if done is None else set(done)
    skip_set = set(skip)
    out: list[Finding] = []
    for c in REGISTRY:
        if c.id in skip_set or not c.needs <= done_set:
            continue
        try:
            out.extend(c.fn(facts, ctx))
        except Exception as exc:  # one broken check must not hide the others' findings
            log.warning("the %s check failed", c.id, exc_info=True)
            out.append(
                Finding(
                    f"internal.{c.id}",
                    S.UNKNOWN,
                    f"Could not run the '{c.id}' check",
                    f"tfdoctor hit an internal error ({type(exc).__name__}: {exc}). The other "
                    "checks are unaffected; please report this.",
                    group="tfdoctor",
                )
            )
    return out


# Display names of finding groups, for the CLI and the GUI
GROUP_TITLES = {
    "cause": "Cause",
    "diagnosis": "Diagnosis of the probe's output",
    "tensorflow": "TensorFlow",
    "gpu": "GPU and driver",
    "memory": "Memory",
    "cuda": "CUDA libraries",
    "system": "System",
    "tfdoctor": "tfdoctor",
}
