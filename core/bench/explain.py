"""Explain a run's end: the diagnosis engine over the worker's output and its exit."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.outcome import Outcome, RunRecord
from tfdoctor.core.diagnose.engine import ExitInfo, diagnose
from tfdoctor.core.model import Diagnosis


def explain(
    outcome: Outcome,
    output: list[str],
    rr: RunRecord | None = None,
    extra: Sequence[tuple[str, str]] = (),
    hide: Collection[str] = (),
) -> Diagnosis:
    """The diagnosis engine over what the worker printed, its exception, its fault stack and
    the kernel's OOM record, with the exit status as evidence."""
    texts: list[bytes] = ["\n".join(output).encode("utf-8", "replace")]
    names = ["worker output"]
    for name, text in extra:
        texts.append(text.encode("utf-8", "replace"))
        names.append(name)
    if rr is not None:
        for name, rec in (("ResourceExhaustedError", rr.oom), ("exception", rr.error)):
            if rec:
                text = f"{rec.get('exc_type')}: {rec.get('message')}\n{rec.get('traceback') or ''}"
                texts.append(text.encode("utf-8", "replace"))
                names.append(name)
    if outcome.fault_stack:
        texts.append(outcome.fault_stack.encode("utf-8", "replace"))
        names.append("faulthandler")
    oom = outcome.oom_kill
    if oom is not None and oom.kernel_line:
        texts.append(oom.kernel_line.encode("utf-8", "replace"))
        names.append("kernel log")
    exit_info = ExitInfo(
        returncode=outcome.exit_code,
        signal=outcome.signal,
        oom_kill_record=bool(oom and oom.proven),
        oom_kill_line=oom.kernel_line if oom else None,
    )
    d = diagnose(*texts, exit_info=exit_info, names=names)
    if hide:
        d = dataclasses.replace(d, causes=tuple(c for c in d.causes if c.id not in hide))
    return d


def hidden_causes(config: BenchConfig) -> frozenset[str]:
    """Causes that describe a choice the user made for this run, not a fault: a run on the
    CPU hides the GPU on purpose (TF then logs that no CUDA device is there)."""
    return frozenset({"no_gpu_visible"}) if config.device == "cpu" else frozenset()
