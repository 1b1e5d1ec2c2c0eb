"""What the checks share: reading facts, describing processes, making evidence."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tfdoctor.core.model import Evidence, Facts

OTHER_PROCESS_MIN_MIB = 256  # below this, a process (a desktop compositor) is not worth naming
# What NVML's v1 'used' holds on an idle GPU, as a share of its total, when the driver does not
# say (no v2): 480 of 81559 MiB on an H100 (recorded, real_h100_idle.json), about 912 MB on an
# A100 80GB (github.com/Cldfire/nvml-wrapper/issues/57).
DRIVER_RESERVE_FRACTION = 0.015


def ev(facts: Facts, *names: str) -> tuple[Evidence, ...]:
    """Evidence from known facts (unknown ones are left out)."""
    out = []
    for n in names:
        if facts.known(n):
            f = facts[n]
            out.append(Evidence(f"{n} = {_short(f.value)}", fact=n, source=f.source))
    return tuple(out)


def line_ev(hits: Iterable[tuple[int, str, Any]], limit: int = 4) -> tuple[Evidence, ...]:
    return tuple(Evidence(text, line=n, source="target probe output") for n, text, _ in hits)[
        :limit
    ]


def _short(v: Any, limit: int = 160) -> str:
    s = repr(v) if not isinstance(v, str) else v
    return s if len(s) <= limit else s[: limit - 3] + "..."


def gpu_indexes(facts: Facts) -> list[int]:
    n = facts.value("gpu.count")
    return list(range(n)) if isinstance(n, int) else []


def held_mib(facts: Facts, i: int) -> int:
    """VRAM that processes hold on GPU `i`: NVML's 'used' less the driver's own reserve (as
    NVML v2 states it, else estimated from the total); 0 when unknown."""
    used, total = facts.value(f"gpu{i}.memory_used_mib"), facts.value(f"gpu{i}.memory_total_mib")
    if not isinstance(used, int):
        return 0
    reserved = facts.value(f"gpu{i}.memory_reserved_mib")
    if not isinstance(reserved, int):
        reserved = int(total * DRIVER_RESERVE_FRACTION) if isinstance(total, int) else 0
    return max(0, used - reserved)


def mib_as_gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def tf_env(facts: Facts) -> dict[str, str]:
    env = facts.value("target.env")
    return env if isinstance(env, dict) else {}


def other_gpu_processes(facts: Facts, i: int) -> list[dict[str, Any]]:
    """Processes on GPU i other than our own probe, biggest first."""
    probe_pid = facts.value("target.probe_pid")
    procs = facts.value(f"gpu{i}.processes") or []
    out = [p for p in procs if isinstance(p, dict) and p.get("pid") != probe_pid]
    return sorted(out, key=lambda p: -(p.get("used_mib") or 0))


def describe_process(p: Mapping[str, Any]) -> str:
    name = p.get("name") or "unknown process"
    used = p.get("used_mib")
    amount = f"{mib_as_gib(used)}" if isinstance(used, (int, float)) else "an unknown amount"
    who = f", user {p['user']}" if p.get("user") else ""
    if p.get("is_jupyter_kernel"):
        where = p.get("notebook_path") or (
            f"kernel {p['kernel_id']}" if p.get("kernel_id") else "unknown notebook"
        )
        server = f" on {p['notebook_server']}" if p.get("notebook_server") else ""
        return f"Jupyter kernel (pid {p.get('pid')}, {where}{server}{who}) holds {amount}"
    return f"{name} (pid {p.get('pid')}{who}) holds {amount}"


def tf_present(facts: Facts) -> bool:
    return facts.value("tf.installed") is True


def crash_window(output: Sequence[str], before: int = 4, after: int = 6) -> list[tuple[int, str]]:
    """The lines that explain a crash: what was printed just before faulthandler's report and
    the top of the Python stack it dumped; else the last lines. Numbered from 1.
    """
    numbered = [(n, line) for n, line in enumerate(output, 1) if line.strip()]
    for k, (_, line) in enumerate(numbered):
        if line.startswith("Fatal Python error") or "most recent call first" in line:
            return numbered[max(0, k - before) : k + after]
    return numbered[-(before + after) :]
