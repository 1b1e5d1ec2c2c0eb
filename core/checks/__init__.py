"""Facts -> findings: the environment checks (pure functions, no I/O), one module per domain.

registry: probe names, the check context, `run_checks`. common: fact readers and evidence the
checks share. The domain modules register their checks on import, in the order below, which
is the order their findings are listed in.
"""

from __future__ import annotations

# isort: off
from tfdoctor.core.checks import tf_install, driver, gpus, vram, env, cudalibs, system  # noqa: F401

# isort: on
from tfdoctor.core.checks.registry import (
    CUDALIBS,
    GROUP_TITLES,
    NVML,
    REGISTRY,
    SYSTEM,
    TARGET,
    Check,
    CheckContext,
    CheckFn,
    check,
    run_checks,
)

__all__ = [
    "CUDALIBS",
    "GROUP_TITLES",
    "NVML",
    "REGISTRY",
    "SYSTEM",
    "TARGET",
    "Check",
    "CheckContext",
    "CheckFn",
    "check",
    "run_checks",
]
