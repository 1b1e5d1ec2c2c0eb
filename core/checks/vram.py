"""Checks of GPU memory: who holds it, and how much is free."""

from __future__ import annotations

from collections.abc import Iterator

from tfdoctor.core.checks.common import (
    OTHER_PROCESS_MIN_MIB,
    describe_process,
    ev,
    gpu_indexes,
    mib_as_gib,
    other_gpu_processes,
)
from tfdoctor.core.checks.registry import NVML, CheckContext, check
from tfdoctor.core.model import Evidence, Facts, Finding, Severity

S = Severity

LOW_FREE_VRAM_MIB = 1024
LOW_FREE_VRAM_FRACTION = 0.10


@check(NVML)
def check_vram_holders(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    for i in gpu_indexes(facts):
        total = facts.value(f"gpu{i}.memory_total_mib")
        others = [
            p
            for p in other_gpu_processes(facts, i)
            if (p.get("used_mib") or 0) >= OTHER_PROCESS_MIN_MIB or p.get("is_jupyter_kernel")
        ]
        if not others:
            continue
        held = sum(p.get("used_mib") or 0 for p in others)
        big = isinstance(total, (int, float)) and total > 0 and held > 0.5 * total
        kernels = [p for p in others if p.get("is_jupyter_kernel")]
        name = facts.value(f"gpu{i}.name") or f"GPU {i}"
        lines = "; ".join(describe_process(p) for p in others[:5])
        yield Finding(
            f"gpu{i}.vram_held_by_others",
            S.WARNING if big or kernels else S.INFO,
            f"Other processes hold {mib_as_gib(held)} of {name}'s memory"
            + (
                f" ({len(kernels)} Jupyter kernel{'s' if len(kernels) > 1 else ''})"
                if kernels
                else ""
            ),
            f"{lines}. Memory held by another process is not available to your training: a "
            "forgotten notebook kernel keeps its VRAM until it is shut down (TensorFlow never "
            "gives memory back while the kernel lives). Shut down kernels you no longer use.",
            tuple(
                Evidence(describe_process(p), fact=f"gpu{i}.processes", source="nvml")
                for p in others[:8]
            ),
            ("stop_gpu_process", "memory_growth"),
            "memory",
        )


@check(NVML)
def check_free_vram(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    for i in gpu_indexes(facts):
        total, free = (
            facts.value(f"gpu{i}.memory_total_mib"),
            facts.value(f"gpu{i}.memory_free_mib"),
        )
        if not isinstance(total, (int, float)) or not isinstance(free, (int, float)) or total <= 0:
            continue
        name = facts.value(f"gpu{i}.name") or f"GPU {i}"
        if free < LOW_FREE_VRAM_MIB or free < LOW_FREE_VRAM_FRACTION * total:
            yield Finding(
                f"gpu{i}.low_free_vram",
                S.WARNING,
                f"Only {mib_as_gib(free)} of {mib_as_gib(total)} is free on {name}",
                "A new TensorFlow process will hit 'OOM when allocating tensor' or fail to "
                "create cuDNN/cuBLAS handles with this little free memory. Free it first (see "
                "the processes holding it) or cap what TensorFlow takes.",
                ev(
                    facts,
                    f"gpu{i}.memory_free_mib",
                    f"gpu{i}.memory_total_mib",
                    f"gpu{i}.memory_used_mib",
                ),
                ("stop_gpu_process", "memory_limit"),
                "memory",
            )
        else:
            yield Finding(
                f"gpu{i}.free_vram",
                S.OK,
                f"{mib_as_gib(free)} of {mib_as_gib(total)} free on {name}",
                "Enough free GPU memory for a new process to start.",
                ev(facts, f"gpu{i}.memory_free_mib", f"gpu{i}.memory_total_mib"),
                (),
                "memory",
            )
