"""Explain a run's end: the diagnosis engine over the worker's output and its exit."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.outcome import Outcome, RunRecord
from tfdoctor.core.diagnose.bfc import format_size
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
    d = diagnose(*texts, exit_info=exit_info, names=names, guess_from_words=False)
    if hide:
        d = dataclasses.replace(d, causes=tuple(c for c in d.causes if c.id not in hide))
    return d


def hidden_causes(config: BenchConfig) -> frozenset[str]:
    """Causes that describe a choice the user made for this run, not a fault: a run on the
    CPU hides the GPU on purpose (TF then logs that no CUDA device is there)."""
    return frozenset({"no_gpu_visible"}) if config.device == "cpu" else frozenset()


# fixes that give the machine (or its container) more RAM: beside the point for a cap the user
# set on one experiment
MACHINE_RAM_FIXES = frozenset({"raise_memory_limit", "add_swap"})


def under_the_cap(
    d: Diagnosis,
    cap_mib: int | None,
    peak_bytes: int | None,
    split: Mapping[str, int] | None,
    rss_peak_bytes: int | None,
) -> Diagnosis:
    """A run the kernel killed at the RAM cap the user set for it: the cap is the experiment's
    setting, not the machine running out of RAM. Say what the run needed (the cgroup's peak,
    its split into the program's own memory and file pages, and why RSS differs); the fixes
    that give the machine more RAM do not apply, those that make the run need less do."""
    host = next((c for c in d.causes if c.id == "host_oom"), None)
    if not cap_mib or host is None:
        return d
    said = f"; it peaked at {format_size(peak_bytes)} in its memory cgroup" if peak_bytes else ""
    if split and split.get("usage"):
        said += (
            f" (at the last reading {format_size(split.get('anon', 0))} of the program's own "
            f"memory and {format_size(split.get('file', 0))} of file pages: libraries and "
            "page cache, which the cap counts too)"
        )
    if rss_peak_bytes:
        said += (
            f". Its RSS peaked at {format_size(rss_peak_bytes)}: RSS counts shared libraries' "
            "pages and leaves out page cache, so it is not the number the cap is decided on"
        )
    capped = dataclasses.replace(
        host,
        title=f"The run needed more than the {cap_mib} MiB RAM cap you set",
        explanation=(
            f"The run needed more than the {cap_mib} MiB cap you set{said}. The kernel stopped "
            "it at the cap, as the cap asks: this is the experiment's limit, not your machine "
            "running out of RAM. Run it with a higher cap, or none, to measure what it needs, "
            "or make the run need less."
        ),
        # what makes the run need less RAM stays; what gives the machine more does not apply
        fixes=tuple(f for f in host.fixes if f not in MACHINE_RAM_FIXES),
    )
    return dataclasses.replace(d, causes=tuple(capped if c is host else c for c in d.causes))
