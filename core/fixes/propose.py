"""Causes and findings -> the fixes to propose, with parameters from what was measured.

Every number in a proposed fix comes from a measurement, and says which: the GPU with the
most free memory and a memory limit from its free VRAM (the check), capped by the benchmark's
TF peak, the batch size from the max-batch search. No measurement, no number: the fix says
which measurement would give it (and no script carries it) instead of inventing a value.
Fixes that contradict each other are never both proposed, and a fix that would change nothing
in this setup (XLA off where XLA never ran) or make it worse (a GPU memory limit under the pool
the log ran out in) is left out with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from tfdoctor.core.diagnose.bfc import format_size
from tfdoctor.core.diagnose.combine import RankedCause
from tfdoctor.core.fixes import apply as fixes
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Diagnosis, Facts, Finding, Severity

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


# what a fix's missing parameter asks the user to measure
NEEDS = {
    "memory_limit_mb": "run the environment check with the GPU as it is when you train, or a "
    "reproduced run, so the limit comes from the free memory or the run's peak",
    "batch_size": "run the batch search on the Reproduce step: it finds the largest batch "
    "that trains",
    "gpu": "run the environment check: it sees each GPU's free memory",
    "cuda_dir": "run the environment check: it finds the folder that holds ptxas and "
    "libdevice (or install them with pip install nvidia-cuda-nvcc-cu12)",
}
# XLA's auto-clustering turned on by the environment (TF_XLA_FLAGS)
_AUTO_JIT_ON = ("--tf_xla_auto_jit=1", "--tf_xla_auto_jit=2", "--tf_xla_auto_jit=fusible")


@dataclass(frozen=True)
class Measured:
    """The fixes' parameter values from measurements, each with where it came from."""

    values: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # name -> "from the check: ..."
    pool_bytes: int | None = None  # the GPU pool the user's log ran out in
    xla_in_use: str | None = None  # where XLA was seen running, None when it never was


@dataclass(frozen=True)
class Proposals:
    """The fixes to propose, most important first, and those left out, with why."""

    fixes: list[tuple[str, list[str]]]  # (fix id, the causes or findings it addresses)
    wanting: dict[str, str] = field(default_factory=dict)  # fix id -> the measurement it needs
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (fix id, why)


def proposed_fixes(
    causes: Iterable[RankedCause],
    findings: Iterable[Finding],
    facts: Facts | None,
    measured: Measured | None = None,
) -> Proposals:
    """The fixes for these causes and findings, most important first: fixes this TensorFlow
    build cannot use, that would change nothing or make the crash come sooner are left out;
    of two that contradict each other only one stays; a fix whose parameter nothing measured
    says which measurement would give it."""
    m = measured or Measured()
    order: dict[str, list[str]] = {}
    for rc in causes:
        if not rc.cause.confirmed:
            continue  # not found, only possible (a look-alike, a guess from wording): its card
            # lists its fixes, none is proposed
        for fid in rc.cause.fixes:
            order.setdefault(fid, []).append(rc.cause.title)
    for f in sorted(findings, key=lambda f: -int(f.severity)):
        if f.severity >= Severity.WARNING:
            for fid in f.fixes:
                order.setdefault(fid, []).append(f.title)
    known = catalog.fixes()
    left_out: list[tuple[str, str]] = []

    def drop(fid: str, why: str) -> None:
        if order.pop(fid, None) is not None:
            left_out.append((fid, why))

    for fid in list(order):
        if fix_unsupported(fid, facts):
            drop(fid, "this TensorFlow build cannot use it")
    if "xla_toggle" in order and m.xla_in_use is None:
        drop("xla_toggle", "XLA never ran here: it is off already (TensorFlow's default)")
    limit = m.values.get("memory_limit_mb")
    if "memory_limit" in order and limit and m.pool_bytes and int(limit) << 20 < m.pool_bytes:
        pool = format_size(m.pool_bytes)
        drop("memory_limit", f"a {limit} MiB limit is under the {pool} pool your log ran out "
             "in: the same crash would come sooner")  # fmt: skip
    if "memory_limit" in order and "memory_growth" in order:  # TF ignores growth under a limit
        if limit:
            drop("memory_growth", "the measured memory limit replaces it (TF ignores memory "
                 "growth on a GPU with a limit)")  # fmt: skip
        else:
            drop("memory_limit", "memory growth instead: TF ignores growth under a limit, "
                 f"and nothing measured the limit ({NEEDS['memory_limit_mb']})")  # fmt: skip
    wanting = {}
    for fid in order:
        fx = known.get(fid)
        missing = [
            k for k, default in (fx.params if fx else ()) if not default and k not in m.values
        ]
        if missing:
            wanting[fid] = NEEDS.get(missing[0], f"a value for {missing[0]}")
    return Proposals([(f, why) for f, why in order.items()], wanting, left_out)


def measure(
    facts: Facts | None,
    tf_peak_gpu_bytes: int = 0,
    recommended_batch: int | None = None,
    log: Diagnosis | None = None,
    largest_clean_batch: int | None = None,
) -> Measured:
    """Fix parameters from what was measured, each with its origin: a GPU memory limit from
    the free VRAM (the check) and the benchmark's TF peak (with 25% headroom), the batch size
    from the max-batch search, the GPU with the most free memory; and what the user's log
    states (the pool that ran out, whether XLA ran)."""
    values: dict[str, str] = {}
    origins: dict[str, str] = {}
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
        values["gpu"] = str(best)
        origins["gpu"] = (
            f"from the check: GPU {best} has the most free memory ({free[best]} MiB)"
            if len(free) > 1
            else "from the check: the only GPU"
        )
        limit = free[best] - CUDA_CONTEXT_MIB
        why = (
            f"from the check: {free[best]} MiB free on GPU {best}, less {CUDA_CONTEXT_MIB} MiB "
            "for the CUDA context"
        )
        peak_limit = int(tf_peak_gpu_bytes * PEAK_HEADROOM) >> 20
        if tf_peak_gpu_bytes and peak_limit < limit:
            limit = peak_limit
            why = (
                f"from the reproduced run: TensorFlow's peak was "
                f"{format_size(tf_peak_gpu_bytes)}, plus 25% headroom"
            )
        if limit >= MIN_LIMIT_MIB:
            values["memory_limit_mb"] = str(limit)
            origins["memory_limit_mb"] = why
    if recommended_batch:
        values["batch_size"] = str(recommended_batch)
        origins["batch_size"] = "from the batch search" + (
            f": {largest_clean_batch} was the largest batch that trained, less a safety margin"
            if largest_clean_batch and largest_clean_batch != recommended_batch
            else ": the largest batch that trained"
        )
    found = cuda_data_dir(facts)
    if found is not None:
        values["cuda_dir"], origins["cuda_dir"] = found
    pool = log.measure("gpu_pool_bytes") if log is not None else None
    xla = log.measure("xla_in_use") if log is not None else None
    xla_where = f"from your log: {xla.says} (line {xla.line})" if xla is not None else None
    if xla_where is None and facts is not None:
        env = facts.value("target.env")
        flags = str(env.get("TF_XLA_FLAGS", "")) if isinstance(env, dict) else ""
        if any(on in flags for on in _AUTO_JIT_ON):
            xla_where = f"from the check: TF_XLA_FLAGS={flags}"
    return Measured(values, origins, pool.value if pool is not None else None, xla_where)


def cuda_data_dir(facts: Facts | None) -> tuple[str, str] | None:
    """The folder to give XLA (--xla_gpu_cuda_data_dir), and where the check saw it: one that
    holds both bin/ptxas and nvvm/libdevice (a toolkit), else the nvidia-cuda-nvcc wheel's
    folder in the target environment (it ships both), else a toolkit with libdevice alone
    (XLA then leaves PTX to the driver)."""
    if facts is None:
        return None
    ptxas_roots = [
        str(PurePath(e["path"]).parent.parent)
        for e in facts.value("cuda.ptxas") or []
        if isinstance(e, dict) and isinstance(e.get("path"), str)
    ]
    libdevice_roots = [
        str(PurePath(p).parents[2])
        for p in facts.value("cuda.libdevice") or []
        if isinstance(p, str) and len(PurePath(p).parents) > 2
    ]
    for root in libdevice_roots:
        if root in ptxas_roots:
            return root, f"from the check: {root} holds ptxas and libdevice"
    pip = facts.value("target.pip_ptxas")
    if isinstance(pip, dict) and isinstance(pip.get("path"), str):
        root = str(PurePath(pip["path"]).parent.parent)
        return root, f"from the check: the nvidia-cuda-nvcc wheel's ptxas and libdevice, {root}"
    if libdevice_roots:
        root = libdevice_roots[0]
        return root, f"from the check: {root} holds libdevice (ptxas not found there)"
    return None


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
