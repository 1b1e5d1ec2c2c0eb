"""Record a probe's NVML session into a snapshot, and replay a snapshot through the probe."""

from __future__ import annotations

import logging
import os
import platform
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from tfdoctor.core.model import ProbeResult
from tfdoctor.core.probes.jupyter import (
    KernelLocation,
    KernelLookup,
    ProcessInfoProvider,
    ProcInfo,
    process_info,
)
from tfdoctor.core.probes.nvml.binding import load_pynvml
from tfdoctor.core.probes.nvml.facts import DEFAULT_TIMEOUT_S, PROBE, collect, live_kernel_lookup
from tfdoctor.core.probes.nvml.replay import RecordingNvml, ReplayNvml
from tfdoctor.core.probes.nvml.snapshot import Snapshot, load_snapshot, save_snapshot

log = logging.getLogger(__name__)


class _RecordingProcesses:
    """Wraps the process-info provider and kernel lookup, keeping what they answered."""

    def __init__(self, info: ProcessInfoProvider, lookup: KernelLookup | None) -> None:
        self._info = info
        self._lookup = lookup or live_kernel_lookup(self.info)
        self.processes: dict[int, ProcInfo] = {}
        self.jupyter: dict[int, KernelLocation] = {}

    def info(self, pid: int) -> ProcInfo | None:
        found = self._info(pid)
        if found is not None:
            self.processes[pid] = found
        return found

    def lookup(self, pid: int, kernel_id: str | None) -> KernelLocation:
        where = self._lookup(pid, kernel_id)
        if where.notebook_server is not None or where.notebook_path is not None:
            self.jupyter[pid] = where
        return where


def _host_info() -> dict[str, Any]:
    # No hostname or user name: snapshots get shared in bug reports.
    out: dict[str, Any] = {
        "system": platform.system(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
    try:
        out["nvidia_ml_py"] = version("nvidia-ml-py")
    except PackageNotFoundError:
        out["nvidia_ml_py"] = None
    return out


def record(
    nvml: Any = None,
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    process_info_provider: ProcessInfoProvider | None = None,
    kernel_lookup: KernelLookup | None = None,
    provenance: str = "",
) -> tuple[ProbeResult, Snapshot]:
    """Run :func:`collect` while recording every NVML call and process lookup it makes.

    Args:
        nvml: what to record: None for live pynvml, or any object with its interface (a
            :class:`ReplayNvml`, to re-record a snapshot).
        timeout_s: as for :func:`collect`; a call still running is recorded as hung.
        process_info_provider: as for :func:`collect`.
        kernel_lookup: as for :func:`collect`.
        provenance: how this recording was made, stored in the snapshot.

    Returns:
        The probe result and the snapshot that replays to the same facts.

    Raises:
        ImportError: nvidia-ml-py (pynvml) is not installed.
    """
    inner = load_pynvml() if nvml is None else nvml
    replayed = inner.snapshot if isinstance(inner, ReplayNvml) else None
    info = process_info_provider or (replayed.process_info if replayed else process_info)
    if kernel_lookup is None and replayed is not None:
        kernel_lookup = replayed.kernel_lookup
    recorder = RecordingNvml(inner)
    procs = _RecordingProcesses(info, kernel_lookup)
    result = collect(
        recorder,
        timeout_s=timeout_s,
        process_info_provider=procs.info,
        kernel_lookup=procs.lookup,
        source=f"nvml-snapshot:{replayed.name}" if replayed else PROBE,
    )
    snapshot = Snapshot(
        nvml_calls=tuple(recorder.calls),
        processes=dict(procs.processes),
        jupyter=dict(procs.jupyter),
        recorded_at=datetime.now(UTC).isoformat(timespec="seconds"),
        host=_host_info(),
        provenance=provenance or "recorded live by tfdoctor.core.probes.nvml.capture",
    )
    return result, snapshot


def capture(
    path: str | os.PathLike[str],
    *,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    provenance: str = "",
) -> ProbeResult:
    """Probe this machine's GPUs live and save the session as a replayable snapshot.

    Args:
        path: where to write the snapshot JSON (atomically).
        timeout_s: as for :func:`collect`.
        provenance: a note on the machine and why it was recorded, kept in the snapshot.

    Returns:
        The live probe result (also for a machine without NVIDIA driver: that is a snapshot
        worth having too).

    Raises:
        OSError: the snapshot could not be written (missing folder, permissions, disk full).
        ImportError: nvidia-ml-py (pynvml) is not installed.
    """
    result, snapshot = record(
        None,
        timeout_s=timeout_s,
        provenance="recorded live by tfdoctor.core.probes.nvml.capture on the machine described "
        "in 'host'" + (f": {provenance}" if provenance else ""),
    )
    save_snapshot(snapshot, path)
    log.info("NVML snapshot written to %s (%s)", path, result.status.value)
    return result


def collect_from_snapshot(
    snapshot: Snapshot | str | os.PathLike[str], *, timeout_s: float | None = DEFAULT_TIMEOUT_S
) -> ProbeResult:
    """Replay a snapshot through the same code as a live :func:`collect`.

    Args:
        snapshot: a :class:`Snapshot` or the path of a snapshot file.
        timeout_s: as for :func:`collect` (matters for snapshots of a hang).

    Returns:
        The probe result; facts carry the source 'nvml-snapshot:<file name>'.

    Raises:
        SnapshotError: the file is unreadable, not JSON, or not a supported snapshot.
    """
    snap = snapshot if isinstance(snapshot, Snapshot) else load_snapshot(snapshot)
    return collect(ReplayNvml(snap), timeout_s=timeout_s)
