"""NVML probe: replay of recorded and constructed snapshots, live absent-driver path, round-trip."""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pynvml
import pytest

from tfdoctor.core.checks.common import held_mib
from tfdoctor.core.factnames import is_known
from tfdoctor.core.model import Facts, ProbeResult, ProbeStatus
from tfdoctor.core.probes import nvml
from tfdoctor.core.probes.jupyter import ProcInfo
from tfdoctor.core.probes.nvml import (
    RecordingNvml,
    ReplayHandle,
    ReplayNvml,
    Snapshot,
    SnapshotError,
    collect,
    collect_from_snapshot,
    load_snapshot,
    record,
    save_snapshot,
)

SNAPSHOTS = Path(__file__).resolve().parents[1] / "fixtures" / "snapshots"
ALL_SNAPSHOTS = sorted(SNAPSHOTS.glob("*.json"))
MIB = 1024 * 1024


def replay(name: str) -> tuple[ProbeResult, Facts]:
    result = collect_from_snapshot(SNAPSHOTS / name)
    return result, Facts(result.facts)


def values(result: ProbeResult) -> dict[str, Any]:
    return {f.name: f.value for f in result.facts}


def snapshot_of(calls: list[dict[str, Any]], **kw: Any) -> Snapshot:
    return Snapshot(nvml_calls=tuple(calls), **kw)


def ok(fn: str, result: Any = None, *args: Any) -> dict[str, Any]:
    return {"fn": fn, "args": list(args), "result": result}


def fails(fn: str, code: int, *args: Any) -> dict[str, Any]:
    return {"fn": fn, "args": list(args), "error": {"value": code}}


H0 = {"_handle": 0}


def one_gpu_calls(**extra: Any) -> list[dict[str, Any]]:
    calls = [
        ok("nvmlInit"),
        ok("nvmlSystemGetDriverVersion", "550.54.14"),
        ok("nvmlSystemGetCudaDriverVersion_v2", 12040),
        ok("nvmlDeviceGetCount", 1),
        ok("nvmlDeviceGetHandleByIndex", H0, 0),
        ok("nvmlDeviceGetName", "NVIDIA GeForce RTX 4090", H0),
        ok("nvmlShutdown"),
    ]
    for fn, (result, args) in extra.items():
        calls.insert(-1, ok(fn, result, H0, *args))
    return calls


# ------------------------------------------------------------------------- every fixture


def test_fixture_folder_has_the_expected_snapshots() -> None:
    names = {p.name for p in ALL_SNAPSHOTS}
    assert {
        "real_no_nvidia_driver.json",
        "rtx3090_forgotten_jupyter_kernel.json",
        "gtx1080_driver470_cuda114.json",
        "rtx5090_blackwell_driver570.json",
        "gtx970_maxwell_cc52.json",
        "driver_library_version_mismatch.json",
        "a100_ecc_errors_row_remap_pending.json",
        "v100_ecc_retired_pages_pending.json",
    } <= names


@pytest.mark.parametrize("path", ALL_SNAPSHOTS, ids=lambda p: p.stem)
def test_every_fixture_replays_with_catalogued_facts_and_honest_provenance(path: Path) -> None:
    snap = load_snapshot(path)
    assert snap.provenance, "every snapshot says how it was made"
    if not path.name.startswith("real_"):
        assert "CONSTRUCTED" in snap.provenance and "NOT RECORDED" in snap.provenance
    result = collect_from_snapshot(snap)
    assert result.probe == "nvml"
    for fact in result.facts:
        assert is_known(fact.name), fact.name
        assert fact.source == f"nvml-snapshot:{path.name}"
    json.dumps([f.value for f in result.facts])  # facts are plain JSON
    assert Facts(result.facts).value("nvml.status") is not None
    assert result.message


# ------------------------------------------------------------------------- situations


def test_rtx3090_forgotten_jupyter_kernel_is_named_with_its_id_and_22_gib() -> None:
    result, facts = replay("rtx3090_forgotten_jupyter_kernel.json")
    assert result.status is ProbeStatus.OK
    assert facts.value("nvml.status") == "ok"
    assert facts.value("nvidia.driver_version") == "535.104.05"
    assert facts.value("nvidia.cuda_driver_version") == "12.2"
    assert facts.value("nvml.version") == "12.535.104.05"
    assert facts.value("gpu.count") == 1
    assert facts.value("gpu0.name") == "NVIDIA GeForce RTX 3090"
    assert facts.value("gpu0.uuid").startswith("GPU-")
    assert facts.value("gpu0.pci_bus_id") == "00000000:01:00.0"
    assert facts.value("gpu0.compute_capability") == "8.6"
    assert facts.value("gpu0.memory_total_mib") == 24576
    assert facts.value("gpu0.memory_free_mib") == 308
    assert facts.value("gpu0.persistence_mode") is False
    assert facts.value("gpu0.throttle_reasons") == ["gpu_idle"]
    # GeForce: no ECC; NOT_SUPPORTED leaves these unknown, never False.
    for name in ("ecc_enabled", "ecc_uncorrected_volatile", "retired_pages", "remapped_rows"):
        assert f"gpu0.{name}" not in facts

    procs = facts.value("gpu0.processes")
    kernel = procs[0]  # largest first
    assert kernel["pid"] == 48213
    assert kernel["is_jupyter_kernel"] is True
    assert kernel["kernel_id"] == "abc123"
    assert kernel["used_mib"] == 22 * 1024
    assert kernel["kind"] == "compute"
    assert kernel["user"] == "ana"
    assert kernel["notebook_server"] == "http://localhost:8888/"
    assert kernel["notebook_path"] == "experiments/resnet50_finetune.ipynb"
    other = procs[1]
    assert other["pid"] == 51877 and other["is_jupyter_kernel"] is False
    assert other["cmdline"] == ["python", "train.py", "--epochs", "30"]
    assert other["kernel_id"] is None and other["notebook_path"] is None
    by_name = {p["name"]: p for p in procs}
    assert by_name["Xorg"]["kind"] == "graphics"
    assert [p["used_mib"] for p in procs] == sorted((p["used_mib"] for p in procs), reverse=True)


def test_gtx1080_old_driver_falls_back_to_older_calls() -> None:
    result, facts = replay("gtx1080_driver470_cuda114.json")
    assert result.status is ProbeStatus.OK
    assert facts.value("nvidia.driver_version") == "470.182.03"
    assert facts.value("nvidia.cuda_driver_version") == "11.4"
    assert facts.value("gpu0.compute_capability") == "6.1"
    assert facts.value("gpu0.memory_total_mib") == 8119
    # R470 lacks the _v3 process calls and the ClocksEventReasons name: the fallbacks answer.
    assert facts.value("gpu0.throttle_reasons") == ["gpu_idle"]
    procs = facts.value("gpu0.processes")
    assert {p["name"] for p in procs} == {"Xorg", "gnome-shell"}
    assert all(p["kind"] == "graphics" for p in procs)


def test_rtx5090_blackwell() -> None:
    result, facts = replay("rtx5090_blackwell_driver570.json")
    assert result.status is ProbeStatus.OK
    assert facts.value("gpu0.name") == "NVIDIA GeForce RTX 5090"
    assert facts.value("gpu0.compute_capability") == "12.0"
    assert facts.value("gpu0.memory_total_mib") == 32607
    assert facts.value("nvidia.driver_version") == "570.124.06"
    assert facts.value("nvidia.cuda_driver_version") == "12.8"
    assert facts.value("gpu0.utilization_pct") == 100
    assert facts.value("gpu0.throttle_reasons") == []  # known: nothing throttles


def test_gtx970_maxwell() -> None:
    _, facts = replay("gtx970_maxwell_cc52.json")
    assert facts.value("gpu0.compute_capability") == "5.2"
    assert facts.value("gpu0.memory_total_mib") == 4043
    assert not any(p["kind"] == "compute" for p in facts.value("gpu0.processes"))


def test_driver_library_version_mismatch_is_an_error_with_a_plain_message() -> None:
    result, facts = replay("driver_library_version_mismatch.json")
    assert result.status is ProbeStatus.ERROR
    assert facts.value("nvml.status") == "version_mismatch"
    assert "mismatch" in facts.value("nvml.error").lower()
    assert "reboot" in result.message.lower()
    assert not any(name.startswith("gpu") for name in facts)


def test_a100_ecc_errors_and_pending_row_remap() -> None:
    result, facts = replay("a100_ecc_errors_row_remap_pending.json")
    assert result.status is ProbeStatus.OK
    assert facts.value("gpu0.ecc_enabled") is True
    assert facts.value("gpu0.ecc_uncorrected_volatile") == 2
    assert facts.value("gpu0.remapped_rows") == {
        "correctable": 0,
        "uncorrectable": 2,
        "pending": True,
        "failed": False,
    }
    assert "gpu0.retired_pages" not in facts  # A100 replaced page retirement by row remapping
    assert facts.value("gpu0.persistence_mode") is True
    assert facts.value("gpu0.processes") == []  # known: nobody holds VRAM


def test_v100_retired_pages_pending() -> None:
    _, facts = replay("v100_ecc_retired_pages_pending.json")
    assert facts.value("gpu0.retired_pages") == {"single_bit": 2, "double_bit": 1, "pending": True}
    assert facts.value("gpu0.ecc_uncorrected_volatile") == 1


def test_real_recording_of_a_machine_without_nvidia_driver() -> None:
    snap = load_snapshot(SNAPSHOTS / "real_no_nvidia_driver.json")
    assert snap.recorded_at[:2] == "20"  # a real timestamp, not 'constructed'
    result = collect_from_snapshot(snap)
    assert result.status is ProbeStatus.ABSENT
    assert values(result)["nvml.status"] == "library_not_found"


# ------------------------------------------------------------------------- live


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def test_live_collect_does_not_raise() -> None:
    result = collect()
    assert result.probe == "nvml"
    assert all(f.source == "nvml" for f in result.facts)
    if not _nvml_library_present():
        assert result.status is ProbeStatus.ABSENT
        assert values(result)["nvml.status"] == "library_not_found"
        assert "driver" in result.message.lower()


def test_capture_writes_a_snapshot_that_replays_to_the_live_result(tmp_path: Path) -> None:
    dest = tmp_path / "here.json"
    live = nvml.capture(dest)
    assert sorted(os.listdir(tmp_path)) == ["here.json"]  # no temp file left behind
    assert dest.stat().st_mode & 0o777 == 0o644
    snap = load_snapshot(dest)
    assert snap.host["system"]
    replayed = collect_from_snapshot(snap)
    assert replayed.status is live.status
    assert values(replayed) == values(live)


# ------------------------------------------------------------------------- record / replay


@pytest.mark.parametrize("path", ALL_SNAPSHOTS, ids=lambda p: p.stem)
def test_round_trip_record_of_a_replay_gives_the_same_facts(path: Path, tmp_path: Path) -> None:
    original = load_snapshot(path)
    expected = collect_from_snapshot(original)
    result, again = record(ReplayNvml(original), provenance="re-recorded in a test")
    assert values(result) == values(expected)
    out = tmp_path / path.name
    save_snapshot(again, out)
    replayed = collect_from_snapshot(out)
    assert replayed.status is expected.status
    assert values(replayed) == values(expected)
    assert replayed.message == expected.message


def test_recording_nvml_logs_calls_with_handles_as_indexes() -> None:
    snap = load_snapshot(SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json")
    rec = RecordingNvml(ReplayNvml(snap))
    collect(rec, process_info_provider=snap.process_info, kernel_lookup=snap.kernel_lookup)
    calls = rec.calls
    assert calls[0] == {"fn": "nvmlInit", "args": [], "result": None}
    names = [c for c in calls if c["fn"] == "nvmlDeviceGetName"]
    assert names == [
        {"fn": "nvmlDeviceGetName", "args": [{"_handle": 0}], "result": "NVIDIA GeForce RTX 3090"}
    ]
    mem = next(c for c in calls if c["fn"] == "nvmlDeviceGetMemoryInfo")
    assert mem["result"]["_struct"]["total"] == 24576 * MIB
    ecc = next(c for c in calls if c["fn"] == "nvmlDeviceGetEccMode")
    assert ecc["error"]["class"] == "NVMLError_NotSupported" and ecc["error"]["value"] == 3
    assert calls[-1]["fn"] == "nvmlShutdown"
    assert not any("hung" in c for c in calls)


class _DriverLike:
    """pynvml's shape, with the real ctypes handle types; nvmlDeviceGetIndex given anything
    but a device handle is what crashed libnvidia-ml 580.159 (a segfault on an H100)."""

    c_nvmlDevice_t = pynvml.c_nvmlDevice_t
    NVMLError = pynvml.NVMLError
    nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError

    def __init__(self) -> None:
        self.device = pynvml.c_nvmlDevice_t()
        self.events = pynvml.c_nvmlEventSet_t()
        self.asked: list[Any] = []

    def nvmlInit(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        return self.device

    def nvmlDeviceGetName(self, h: Any) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlEventSetCreate(self) -> Any:
        return self.events

    def nvmlDeviceRegisterEvents(self, h: Any, kind: int, es: Any) -> None:
        return None

    def nvmlDeviceGetIndex(self, h: Any) -> int:
        self.asked.append(h)
        if not isinstance(h, pynvml.c_nvmlDevice_t):
            raise RuntimeError("segfault in libnvidia-ml: not a device handle")
        return 0


def test_recording_a_sampler_never_asks_the_driver_to_index_an_event_set() -> None:
    """The Sampler registers Xid events; recording it must not pass the event set to
    nvmlDeviceGetIndex (it did, and the real driver segfaulted the recorder)."""
    driver = _DriverLike()
    rec = RecordingNvml(driver)
    sampler = nvml.GpuSampler(rec)
    assert sampler.open() is None
    assert sampler.names == ["NVIDIA H100 80GB HBM3"]
    assert not any(isinstance(h, pynvml.c_nvmlEventSet_t) for h in driver.asked)
    register = next(c for c in rec.calls if c["fn"] == "nvmlDeviceRegisterEvents")
    assert register["args"][0] == {"_handle": 0}
    # and the session replays: the same calls find the same recorded answers
    replayed = nvml.GpuSampler(ReplayNvml(snapshot_of(rec.calls)))
    assert replayed.open() is None and replayed.names == ["NVIDIA H100 80GB HBM3"]


def test_replay_raises_the_real_pynvml_error_classes() -> None:
    snap = load_snapshot(SNAPSHOTS / "driver_library_version_mismatch.json")
    with pytest.raises(pynvml.NVMLError_LibRmVersionMismatch):
        ReplayNvml(snap).nvmlInit()
    # A call the snapshot never saw is NOT_SUPPORTED, so old snapshots keep working.
    with pytest.raises(pynvml.NVMLError_NotSupported):
        ReplayNvml(snap).nvmlDeviceGetBoardId(ReplayHandle(0))
    # Constants come from the real module.
    assert ReplayNvml(snap).NVML_TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU


def test_an_older_snapshot_missing_calls_still_replays() -> None:
    snap = load_snapshot(SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json")
    dropped = {"nvmlDeviceGetTemperature", "nvmlDeviceGetCurrentClocksEventReasons"}
    older = Snapshot(
        nvml_calls=tuple(c for c in snap.nvml_calls if c["fn"] not in dropped),
        processes=snap.processes,
        jupyter=snap.jupyter,
        name="older.json",
    )
    result = collect_from_snapshot(older)
    assert result.status is ProbeStatus.OK
    got = values(result)
    assert "gpu0.temperature_c" not in got and "gpu0.throttle_reasons" not in got
    assert got["gpu0.name"] == "NVIDIA GeForce RTX 3090"


def test_replay_without_recorded_jupyter_lookup_leaves_notebook_unknown() -> None:
    snap = load_snapshot(SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json")
    bare = Snapshot(nvml_calls=snap.nvml_calls, processes=snap.processes, name="bare.json")
    kernel = values(collect_from_snapshot(bare))["gpu0.processes"][0]
    assert kernel["is_jupyter_kernel"] is True and kernel["kernel_id"] == "abc123"
    assert kernel["notebook_server"] is None and kernel["notebook_path"] is None


def test_vanished_process_and_unknown_memory_keep_pid() -> None:
    procs = [{"_struct": {"pid": 4242, "usedGpuMemory": None}}]
    calls = one_gpu_calls(nvmlDeviceGetComputeRunningProcesses_v3=(procs, ()))
    result = collect_from_snapshot(snapshot_of(calls))
    (entry,) = values(result)["gpu0.processes"]
    assert entry["pid"] == 4242 and entry["used_mib"] is None
    assert entry["name"] is None and entry["cmdline"] is None
    assert entry["is_jupyter_kernel"] is False


def test_same_process_in_compute_and_graphics_lists_is_one_entry() -> None:
    p = [{"_struct": {"pid": 77, "usedGpuMemory": 512 * MIB}}]
    calls = one_gpu_calls(
        nvmlDeviceGetComputeRunningProcesses_v3=(p, ()),
        nvmlDeviceGetGraphicsRunningProcesses_v3=(p, ()),
    )
    snap = snapshot_of(calls, processes={77: ProcInfo(77, "blender", "u", ("blender",), 1)})
    (entry,) = values(collect_from_snapshot(snap))["gpu0.processes"]
    assert entry["kind"] == "compute+graphics" and entry["used_mib"] == 512


@pytest.mark.parametrize(
    ("code", "status", "nvml_status"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, ProbeStatus.ABSENT, "library_not_found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, ProbeStatus.ABSENT, "driver_not_loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, ProbeStatus.ERROR, "version_mismatch"),
        (pynvml.NVML_ERROR_NO_PERMISSION, ProbeStatus.DENIED, "no_permission"),
        (pynvml.NVML_ERROR_GPU_IS_LOST, ProbeStatus.ERROR, "gpu_lost"),
        (pynvml.NVML_ERROR_UNKNOWN, ProbeStatus.ERROR, "error"),
    ],
)
def test_init_failures_map_to_statuses_and_skip_shutdown(
    code: int, status: ProbeStatus, nvml_status: str
) -> None:
    snap = snapshot_of([fails("nvmlInit", code), ok("nvmlShutdown")])
    rec = RecordingNvml(ReplayNvml(snap))
    result = collect(rec)
    assert result.status is status
    assert values(result)["nvml.status"] == nvml_status
    assert values(result)["nvml.error"]
    assert result.message and "\n" not in result.message
    assert [c["fn"] for c in rec.calls] == ["nvmlInit"]  # no shutdown without init


def test_per_field_no_permission_and_not_supported_leave_facts_unknown() -> None:
    calls = one_gpu_calls()
    calls.insert(-1, fails("nvmlDeviceGetPowerUsage", pynvml.NVML_ERROR_NO_PERMISSION, H0))
    calls.insert(-1, fails("nvmlDeviceGetUUID", pynvml.NVML_ERROR_NOT_SUPPORTED, H0))
    rec = RecordingNvml(ReplayNvml(snapshot_of(calls)))
    result = collect(rec, process_info_provider=lambda pid: None)
    got = values(result)
    assert result.status is ProbeStatus.OK and got["nvml.status"] == "ok"
    assert got["gpu0.name"] == "NVIDIA GeForce RTX 4090"
    assert "gpu0.power_w" not in got and "gpu0.uuid" not in got
    assert rec.calls[-1]["fn"] == "nvmlShutdown"  # shutdown after a successful init


def test_gpu_lost_while_querying_keeps_what_was_read() -> None:
    calls = [
        ok("nvmlInit"),
        ok("nvmlSystemGetDriverVersion", "535.104.05"),
        ok("nvmlDeviceGetCount", 2),
        ok("nvmlDeviceGetHandleByIndex", H0, 0),
        ok("nvmlDeviceGetName", "NVIDIA GeForce RTX 3090", H0),
        fails("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_GPU_IS_LOST, 1),
        ok("nvmlShutdown"),
    ]
    result = collect_from_snapshot(snapshot_of(calls))
    got = values(result)
    assert result.status is ProbeStatus.ERROR and got["nvml.status"] == "gpu_lost"
    assert "GPU 1" in got["nvml.error"]
    assert got["gpu0.name"] == "NVIDIA GeForce RTX 3090" and got["gpu.count"] == 2


def test_decode_throttle_reasons() -> None:
    assert nvml.decode_throttle_reasons(0) == []
    assert nvml.decode_throttle_reasons(0x4 | 0x40) == ["sw_power_cap", "hw_thermal"]
    assert nvml.decode_throttle_reasons(pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown) == [
        "hw_power_brake"
    ]
    assert nvml.decode_throttle_reasons(0x8 | 0x800) == ["hw_slowdown", "bit_0x800"]
    every = pynvml.nvmlClocksThrottleReasonAll
    assert len(nvml.decode_throttle_reasons(every)) == len(nvml.THROTTLE_REASON_BITS)


# ------------------------------------------------------------------------- stall guard


def _hanging_snapshot() -> Snapshot:
    calls = one_gpu_calls()
    for c in calls:
        if c["fn"] == "nvmlDeviceGetName":
            c.pop("result")
            c["hung"] = True
    return snapshot_of(calls, name="hang.json")


def test_timeout_when_an_nvml_call_blocks() -> None:
    entered = threading.Event()

    class BlockingReplay(ReplayNvml):
        def _call(self, fn: str, *args: Any, **kwargs: Any) -> Any:
            if fn == "nvmlDeviceGetName":
                entered.set()
            return super()._call(fn, *args, **kwargs)

    replayer = BlockingReplay(_hanging_snapshot())
    try:
        result = collect(replayer, timeout_s=0.3)
        assert entered.is_set()
        assert result.status is ProbeStatus.TIMEOUT
        got = values(result)
        assert got["nvml.status"] == "timeout"
        assert "nvmlDeviceGetName on GPU 0" in got["nvml.error"]
        assert got["nvidia.driver_version"] == "550.54.14"  # read before the stall: kept
        assert "fallen off the bus" in result.message
        # While that call stays stuck, probing again reports the stall at once.
        again = collect(replayer, timeout_s=0.3)
        assert again.status is ProbeStatus.TIMEOUT
        assert "still waiting for nvmlDeviceGetName" in values(again)["nvml.error"]
    finally:
        replayer.release()
    # Once the call returns, probing works again (the hung call now fails: name unknown).
    deadline = time.monotonic() + 5
    while (result := collect(replayer, timeout_s=0.5)).status is ProbeStatus.TIMEOUT:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert result.status is ProbeStatus.OK and "gpu0.name" not in values(result)


def test_a_recorded_hang_is_written_and_replays_as_a_timeout(tmp_path: Path) -> None:
    inner = ReplayNvml(_hanging_snapshot())
    try:
        result, snap = record(inner, timeout_s=0.3)
        assert result.status is ProbeStatus.TIMEOUT
        hung = [c for c in snap.nvml_calls if c.get("hung")]
        assert [c["fn"] for c in hung] == ["nvmlDeviceGetName"]
        save_snapshot(snap, tmp_path / "hang.json")
    finally:
        inner.release()
    again = ReplayNvml(load_snapshot(tmp_path / "hang.json"))
    try:
        assert collect(again, timeout_s=0.3).status is ProbeStatus.TIMEOUT
    finally:
        again.release()


# ------------------------------------------------------------------------- snapshot files


def test_snapshot_error_on_garbage_wrong_kind_wrong_schema_and_missing(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00\x01 this is not { json")
    wrong_kind = tmp_path / "kind.json"
    wrong_kind.write_text(json.dumps({"schema": 1, "kind": "telemetry-trace", "nvml_calls": []}))
    wrong_schema = tmp_path / "schema.json"
    wrong_schema.write_text(json.dumps({"schema": 99, "kind": nvml.KIND, "nvml_calls": []}))
    bad_calls = tmp_path / "calls.json"
    bad_calls.write_text(json.dumps({"schema": 1, "kind": nvml.KIND, "nvml_calls": [1, 2]}))
    cases = {
        garbage: "not a JSON file",
        wrong_kind: "telemetry-trace",
        wrong_schema: "schema 99",
        bad_calls: "nvml_calls",
        tmp_path / "missing.json": "cannot read",
    }
    for path, words in cases.items():
        with pytest.raises(SnapshotError) as info:
            load_snapshot(path)
        text = str(info.value)
        assert words in text and path.name in text and "\n" not in text
        with pytest.raises(SnapshotError):
            collect_from_snapshot(path)


def test_save_snapshot_replaces_atomically_and_keeps_mode(tmp_path: Path) -> None:
    snap = load_snapshot(SNAPSHOTS / "gtx970_maxwell_cc52.json")
    dest = tmp_path / "s.json"
    dest.write_text("old")
    dest.chmod(0o600)
    save_snapshot(snap, dest)
    assert dest.stat().st_mode & 0o777 == 0o600
    assert sorted(os.listdir(tmp_path)) == ["s.json"]
    assert load_snapshot(dest).to_json() == snap.to_json()
    with pytest.raises(OSError):
        save_snapshot(snap, tmp_path / "no-such-dir" / "s.json")


def test_the_drivers_own_reserve_is_read_from_nvml_v2() -> None:
    """v1 'used' holds the driver's reserve; v2 states it, and an idle GPU is then not shared.
    The numbers are the real H100's (v2 'used' excludes the reserve: 0 idle, 10.5 GiB with a
    10 GiB tensor, seen there)."""
    mem = {"_struct": {"total": 85520809984, "free": 85017493504, "used": 503316480}}
    mem2 = {"_struct": {**mem["_struct"], "version": 2, "reserved": 503316480, "used": 0}}
    calls = one_gpu_calls()
    calls.insert(-1, ok("nvmlDeviceGetMemoryInfo", mem, H0))
    calls.insert(-1, ok("nvmlDeviceGetMemoryInfo", mem2, H0, pynvml.nvmlMemory_v2))
    got = values(collect_from_snapshot(snapshot_of(calls)))
    assert got["gpu0.memory_used_mib"] == 480 and got["gpu0.memory_reserved_mib"] == 480
    facts = Facts(collect_from_snapshot(snapshot_of(calls)).facts)
    assert held_mib(facts, 0) == 0
    # without v2 (older drivers, older snapshots) the reserve is estimated from the total
    older = collect_from_snapshot(snapshot_of(calls[:-2] + calls[-1:]))
    assert "gpu0.memory_reserved_mib" not in values(older)
    assert values(older)["gpu0.memory_used_mib"] == 480
    assert held_mib(Facts(older.facts), 0) == 0
