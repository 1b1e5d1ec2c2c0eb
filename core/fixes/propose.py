"""Causes and findings -> the fixes to propose, with parameters from what was measured.

Every number in a proposed fix comes from a measurement: the GPU with the most free memory
and a memory limit from its free VRAM (the check), capped by the benchmark's TF peak, and the
batch size from the max-batch search. No measurement, no number: the fix keeps its default.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tfdoctor.core.diagnose.combine import RankedCause
from tfdoctor.core.fixes import apply as fixes
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Facts, Finding, Severity

CUDA_CONTEXT_MIB = 512  # left free for the CUDA context and cuDNN workspaces
PEAK_HEADROOM = 1.25  # a memory limit from a measured TF peak keeps 25% headroom
MIN_LIMIT_MIB = 256  # a smaller limit than this is no useful proposal


def fix_unsupported(fid: str, facts: Facts | None) -> bool:
    """A fix this TensorFlow build cannot use (the async allocator needs CUDA 11.2+)."""
    if facts is None:
        return False
    cuda = str(facts.value("tf.build_cuda_version") or "")
    cuda_build = facts.value("tf.is_cuda_build")
    return catalog.fix_unsupported(fid, cuda_build=cuda_build, build_cuda=cuda) is not None


def proposed_fixes(
    causes: Iterable[RankedCause], findings: Iterable[Finding], facts: Facts | None
) -> list[tuple[str, list[str]]]:
    """(fix id, the causes or findings it addresses), most important first; fixes this
    TensorFlow build cannot use are left out."""
    order: dict[str, list[str]] = {}
    for rc in causes:
        for fid in rc.cause.fixes:
            order.setdefault(fid, []).append(rc.cause.title)
    for f in sorted(findings, key=lambda f: -int(f.severity)):
        if f.severity >= Severity.WARNING:
            for fid in f.fixes:
                order.setdefault(fid, []).append(f.title)
    return [(f, why) for f, why in order.items() if not fix_unsupported(f, facts)]


def measured_params(
    facts: Facts | None, tf_peak_gpu_bytes: int = 0, recommended_batch: int | None = None
) -> dict[str, str]:
    """Fix parameters from what was measured: a GPU memory limit from the free VRAM and the
    benchmark's TF peak (with 25% headroom), the batch size from the max-batch search, the
    GPU with the most free memory."""
    out: dict[str, str] = {}
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
        limit = free[best] - CUDA_CONTEXT_MIB
        if tf_peak_gpu_bytes:
            limit = min(limit, int(tf_peak_gpu_bytes * PEAK_HEADROOM) >> 20)
        if limit >= MIN_LIMIT_MIB:
            out["memory_limit_mb"] = str(limit)
    if recommended_batch:
        out["batch_size"] = str(recommended_batch)
    return out


def fix_params(fid: str, measured: Mapping[str, str]) -> dict[str, str]:
    """The measured values among the parameters this fix takes."""
    known = dict(catalog.fixes()[fid].params)
    return {k: v for k, v in measured.items() if k in known}


def plan_fix(fid: str, measured: Mapping[str, str]) -> fixes.Plan:
    """The fix with the values measured in this session (memory limit, GPU, batch).

    Raises:
        KeyError: an unknown fix id.
        FixError: a malformed parameter value.
    """
    return fixes.plan([fid], fix_params(fid, measured))


def gpu_holders(facts: Facts | None) -> list[dict[str, Any]]:
    """The processes the check saw holding GPU memory (what `stop_gpu_process` can stop)."""
    if facts is None:
        return []
    out: list[dict[str, Any]] = []
    n = facts.value("gpu.count")
    for i in range(n if isinstance(n, int) else 0):
        for proc in facts.value(f"gpu{i}.processes") or []:
            if isinstance(proc, dict) and isinstance(proc.get("pid"), int):
                out.append(proc)
    return out


def config_fix_ids(proposed: Sequence[str]) -> list[str]:
    """The proposed fixes that are one-click config fixes (what a fix script carries)."""
    known = catalog.fixes()
    return [f for f in proposed if known.get(f) and known[f].applicable]


def env_commands(proposed: Sequence[str], facts: Facts | None, python: str | None) -> list[str]:
    """The exact commands of the proposed environment fixes (no comment lines)."""
    known = catalog.fixes()
    return [
        c
        for f in proposed
        if known.get(f) and known[f].kind == "env"
        for c in fixes.commands_for(f, facts, python)
        if not c.startswith("#")
    ]
