"""Checks of the target's environment variables: TensorFlow's GPU memory settings."""

from __future__ import annotations

from collections.abc import Iterator

from tfdoctor.core import knowledge
from tfdoctor.core.checks.common import (
    OTHER_PROCESS_MIN_MIB,
    ev,
    gpu_indexes,
    held_mib,
    other_gpu_processes,
    tf_env,
    tf_present,
)
from tfdoctor.core.checks.registry import NVML, TARGET, CheckContext, check
from tfdoctor.core.model import Facts, Finding, Severity

S = Severity


@check(TARGET, NVML)
def check_allocator_env(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if not tf_present(facts):
        return
    env = tf_env(facts)
    growth = env.get("TF_FORCE_GPU_ALLOW_GROWTH")
    allocator = env.get("TF_GPU_ALLOCATOR")
    evidence = ev(facts, "target.env")
    compat = knowledge.load()
    if growth is not None and not compat.env_value_known("TF_FORCE_GPU_ALLOW_GROWTH", growth):
        yield Finding(
            "env.growth_value_ignored",
            S.WARNING,
            f"TF_FORCE_GPU_ALLOW_GROWTH={growth!r} is ignored by TensorFlow",
            "TensorFlow accepts exactly 'true' or 'false' (lower case) and ignores anything "
            "else, so the default grab-all allocation is still in effect. Set it to 'true'.",
            evidence,
            ("memory_growth",),
            "memory",
        )
    growth_on = growth == "true" or allocator == "cuda_malloc_async"
    shared = any(
        other_gpu_processes(facts, i) or held_mib(facts, i) > OTHER_PROCESS_MIN_MIB
        for i in gpu_indexes(facts)
    )
    if not growth_on and facts.value("tf.gpu_count", 0) and shared:
        yield Finding(
            "env.grab_all_with_other_users",
            S.WARNING,
            "TensorFlow will grab nearly all free GPU memory while others use the GPU",
            "By default TensorFlow reserves almost all free VRAM when it starts. With another "
            "process on the GPU (another notebook, a second training run), whichever starts "
            "second fails with OOM or CUDNN_STATUS_INTERNAL_ERROR / failed to create cuBLAS "
            "handle. Enable memory growth (TF_FORCE_GPU_ALLOW_GROWTH=true) or the async "
            "allocator.",
            evidence,
            ("memory_growth", "async_allocator"),
            "memory",
        )
    elif growth_on:
        what = (
            "TF_GPU_ALLOCATOR=cuda_malloc_async"
            if allocator == "cuda_malloc_async"
            else "TF_FORCE_GPU_ALLOW_GROWTH=true"
        )
        yield Finding(
            "env.growth_enabled",
            S.OK,
            f"{what} is set: TensorFlow takes GPU memory as it needs it",
            "Memory is not reserved up front, so several processes can share the GPU.",
            evidence,
            (),
            "memory",
        )
    elif facts.value("tf.gpu_count", 0):
        yield Finding(
            "env.growth_default",
            S.INFO,
            "TensorFlow will reserve nearly all free GPU memory at start (the default)",
            "Fine when TensorFlow is alone on the GPU; nvidia-smi will show it full even for a "
            "small model. Set TF_FORCE_GPU_ALLOW_GROWTH=true to share the GPU.",
            evidence,
            ("memory_growth",),
            "memory",
        )
    if allocator and not compat.env_value_known("TF_GPU_ALLOCATOR", allocator):
        yield Finding(
            "env.allocator_unknown",
            S.WARNING,
            f"TF_GPU_ALLOCATOR={allocator!r} is not an allocator TensorFlow knows",
            "Known values: cuda_malloc_async (recommended), or unset for the default BFC "
            "allocator. TensorFlow ignores unknown values.",
            evidence,
            ("async_allocator",),
            "memory",
        )
