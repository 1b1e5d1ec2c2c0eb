"""Whether the kernel's OOM killer ended the worker: its counters and the kernel log."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfdoctor.core.probes import system


@dataclass
class OomKillEvidence:
    """What says the kernel's OOM killer (not someone else) sent the SIGKILL."""

    vmstat_delta: int | None = None  # /proc/vmstat oom_kill during the run
    cgroup_delta: int | None = None  # the worker's memory cgroup's oom_kill counter
    cgroup: str | None = None
    kernel_line: str | None = None  # a kernel-log record naming the worker's PID
    kernel_log_readable: bool | None = None

    @property
    def proven(self) -> bool:
        return bool(self.kernel_line) or bool(self.cgroup_delta)

    @property
    def likely(self) -> bool:
        return self.proven or bool(self.vmstat_delta)

    def to_json(self) -> dict[str, Any]:
        return {
            "vmstat_oom_kill_delta": self.vmstat_delta,
            "cgroup_oom_kill_delta": self.cgroup_delta,
            "cgroup": self.cgroup,
            "kernel_line": self.kernel_line,
            "kernel_log_readable": self.kernel_log_readable,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OomKillEvidence:
        def num(key: str) -> int | None:
            v = data.get(key)
            return int(v) if isinstance(v, (int, float)) else None

        readable = data.get("kernel_log_readable")
        return cls(
            num("vmstat_oom_kill_delta"),
            num("cgroup_oom_kill_delta"),
            _str_or_none(data.get("cgroup")),
            _str_or_none(data.get("kernel_line")),
            bool(readable) if readable is not None else None,
        )


def _str_or_none(value: Any) -> str | None:
    return str(value) if value is not None else None


def vmstat_oom_kills() -> int | None:
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def collect(
    pid: int | None,
    vmstat_at_start: int | None,
    memcg_at_start: tuple[int, Path] | None,
    cg_kills_at_start: int | None,
    cg_kills_at_end: int | None,
) -> OomKillEvidence:
    """What the counters and the kernel log say about an OOM kill of `pid` since its start."""
    ev = OomKillEvidence()
    after = vmstat_oom_kills()
    if after is not None and vmstat_at_start is not None:
        ev.vmstat_delta = after - vmstat_at_start
    if memcg_at_start is not None:
        ev.cgroup = str(memcg_at_start[1])
        now = cg_kills_at_end
        if now is not None and cg_kills_at_start is not None:
            ev.cgroup_delta = now - cg_kills_at_start
    klog = system.read_kernel_log(timeout_s=5.0)
    ev.kernel_log_readable = klog.readable
    if klog.readable and pid is not None:
        for rec in reversed(system.parse_oom_kills(klog.lines)):
            if rec.get("pid") == pid:
                ev.kernel_line = str(rec.get("line"))
                break
    return ev
