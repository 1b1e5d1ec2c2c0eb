"""GPU facts from NVML, live or recorded and replayed; only `binding` here imports pynvml.

binding: pynvml itself, its error classes, NVML's values. snapshot: the snapshot file.
replay: pynvml-like objects that replay or record. facts: the probe (`collect`). stuck: probe
threads stuck in NVML. capture: record and replay entry points. sampler: live telemetry.
"""

from __future__ import annotations

from tfdoctor.core.probes.nvml.binding import (
    THROTTLE_REASON_BITS,
    decode_throttle_reasons,
    live_api,
)
from tfdoctor.core.probes.nvml.capture import capture, collect_from_snapshot, record
from tfdoctor.core.probes.nvml.facts import DEFAULT_TIMEOUT_S, PROBE, collect
from tfdoctor.core.probes.nvml.replay import RecordingNvml, ReplayHandle, ReplayNvml, ReplayStruct
from tfdoctor.core.probes.nvml.sampler import GpuSampler
from tfdoctor.core.probes.nvml.snapshot import (
    KIND,
    SCHEMA,
    Snapshot,
    SnapshotError,
    load_snapshot,
    save_snapshot,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "KIND",
    "PROBE",
    "SCHEMA",
    "THROTTLE_REASON_BITS",
    "GpuSampler",
    "RecordingNvml",
    "ReplayHandle",
    "ReplayNvml",
    "ReplayStruct",
    "Snapshot",
    "SnapshotError",
    "capture",
    "collect",
    "collect_from_snapshot",
    "decode_throttle_reasons",
    "live_api",
    "load_snapshot",
    "record",
    "save_snapshot",
]
