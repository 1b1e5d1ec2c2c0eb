"""Telemetry: the sampler against real processes and psutil, NVML through recorded snapshots,
traces recorded, torn by a crash, and replayed."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SNAPSHOTS, TRACES
from tfdoctor.core import telemetry as T
from tfdoctor.core.probes import nvml

FORGOTTEN = SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json"
GROWER = """
import sys, time
blocks = []
for i in range(6):
    blocks.append(bytearray(40 << 20))  # touched: really resident
    print(i, flush=True)
    time.sleep(0.25)
time.sleep(30)
"""


def samples(tl: T.Timeline) -> list[dict[str, Any]]:
    return [item for _, (kind, item) in tl.since(0) if kind == "sample"]


def wait_for(cond: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_host_series_follow_a_real_process_and_its_children() -> None:
    # the watched process is a shell whose child does the allocating: RSS includes children
    proc = subprocess.Popen(
        ["/bin/sh", "-c", '"$0" -c "$1"; true', sys.executable, GROWER],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    tl = T.Timeline()
    sampler = T.Sampler(tl, interval_s=0.05, pids=[proc.pid]).start()
    try:
        assert proc.stdout is not None
        for _ in range(6):
            proc.stdout.readline()
        time.sleep(1.2)  # the children list refreshes once a second
        wait_for(lambda: samples(tl) and (samples(tl)[-1].get("rss") or {}))
        last = samples(tl)[-1]
        assert last["rss"][str(proc.pid)] >= 240 << 20
        assert 0 < last["ram_used"] <= last["ram_total"]
        assert "gpus" not in last  # no NVML given: GPU series absent, not zero
        first_rss = next(s["rss"][str(proc.pid)] for s in samples(tl) if s.get("rss"))
        assert first_rss < last["rss"][str(proc.pid)]  # it climbed while we watched
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the shell and the python it started
        proc.wait()
    n = len(samples(tl))
    wait_for(lambda: len(samples(tl)) > n + 3)
    assert "rss" not in samples(tl)[-1]  # an exited process leaves the series
    sampler.stop()
    ts = [s["t"] for s in samples(tl)]
    assert ts == sorted(ts)


def test_missing_nvml_on_this_machine_is_normal() -> None:
    tl = T.Timeline()
    sampler = T.Sampler(tl, interval_s=0.05, gpu_api=nvml.live_api()).start()
    wait_for(lambda: len(samples(tl)) >= 3)
    sampler.stop()
    if sampler.gpu_problem is None:
        pytest.skip("this machine has a working NVML")
    assert sampler.gpu_problem
    assert all("gpus" not in s for s in samples(tl))


def test_gpu_series_from_a_recorded_machine() -> None:
    api = nvml.ReplayNvml(nvml.load_snapshot(FORGOTTEN))
    tl = T.Timeline()
    sampler = T.Sampler(tl, interval_s=0.05, gpu_api=api).start()
    wait_for(lambda: any("gpus" in s for s in samples(tl)))
    sampler.stop()
    gpu = next(s["gpus"] for s in samples(tl) if "gpus" in s)[0]
    assert gpu["total"] == 25769803776 and gpu["used"] > 0.9 * gpu["total"]
    assert {p["pid"] for p in gpu["procs"]} >= {48213}  # the forgotten notebook kernel
    assert max(p["used"] for p in gpu["procs"]) == 23622320128
    assert gpu["temp_c"] == 46 and gpu["power_w"] == 36.2


def test_a_hung_nvml_call_marks_the_sampler_stalled_and_host_series_go_on(
    tmp_path: Path,
) -> None:
    data = json.loads(FORGOTTEN.read_text())
    calls = data["nvml_calls"]
    mem = next(c for c in calls if c["fn"] == "nvmlDeviceGetMemoryInfo")
    hung = copy.deepcopy(mem)
    hung.pop("result", None)
    hung["hung"] = True
    calls.insert(calls.index(mem) + 1, hung)  # 1st call (open) answers, the next one hangs
    path = tmp_path / "hung.json"
    path.write_text(json.dumps(data))
    api = nvml.ReplayNvml(nvml.load_snapshot(path))
    tl = T.Timeline()
    sampler = T.Sampler(tl, interval_s=0.05, gpu_api=api).start()
    try:
        wait_for(lambda: sampler.stalled)
        n = len(samples(tl))
        wait_for(lambda: len(samples(tl)) > n + 5)  # host sampling never stopped
        markers = [i["label"] for _, (k, i) in tl.since(0) if k == "marker"]
        assert any("NVML stalled" in m for m in markers)
        assert samples(tl)[-1]["nvml"] == "stalled"
    finally:
        api.release()
        sampler.stop()


def test_trace_round_trip_and_a_trace_torn_by_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "run.trace"
    tl = T.Timeline(writer=T.TraceWriter(path, {"note": "test"}))
    sampler = T.Sampler(tl, interval_s=0.02).start()
    tl.mark("phase: import", "phase")
    tl.add_tf({"CPU:0": {"current": 5 << 20, "peak": 9 << 20}})
    wait_for(lambda: len(samples(tl)) >= 10)
    tl.mark("crash: SIGSEGV", "crash")
    sampler.stop()
    tl.close()
    header, items = T.read_trace(path)
    assert header["format"] == T.TRACE_FORMAT and header["note"] == "test"
    assert items == [item for _, item in tl.since(0)]
    # a crash mid-write: the file ends inside a line
    raw = path.read_bytes()
    torn = tmp_path / "torn.trace"
    torn.write_bytes(raw[: len(raw) - 7])
    _, torn_items = T.read_trace(torn)
    assert torn_items == items[:-1]
    replayed = T.Timeline()
    T.replay(torn, replayed)
    assert [i for _, i in replayed.since(0)] == items[:-1]


def test_a_trace_is_readable_while_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "live.trace"
    tl = T.Timeline(writer=T.TraceWriter(path, {}))
    sampler = T.Sampler(tl, interval_s=0.05).start()
    try:
        time.sleep(1.5)  # at least one sync (every second)
        _, items = T.read_trace(path)
        assert len([1 for k, _ in items if k == "sample"]) >= 5
    finally:
        sampler.stop()
        tl.close()


def test_paced_replay_keeps_order_and_can_stop(tmp_path: Path) -> None:
    path = tmp_path / "r.trace"
    w = T.TraceWriter(path, {})
    for i in range(50):
        w.write({"k": "sample", "t": i * 0.1, "ram_used": i, "ram_total": 100})
    w.close()
    tl = T.Timeline()
    T.replay(path, tl, speed=50.0)
    assert [i["ram_used"] for _, (_, i) in tl.since(0)] == list(range(50))
    stop = threading.Event()
    stop.set()
    tl2 = T.Timeline()
    T.replay(path, tl2, speed=1.0, stop=stop)
    assert tl2.since(0) == []


@pytest.mark.parametrize("content", [b"", b"not json\n", b'{"format": "other"}\n'])
def test_not_a_trace_is_a_one_line_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.trace"
    path.write_bytes(content)
    with pytest.raises(T.TraceError) as exc:
        T.read_trace(path)
    assert "\n" not in str(exc.value)


def test_bad_interval_is_refused() -> None:
    with pytest.raises(ValueError):
        T.Sampler(T.Timeline(), interval_s=0)


TFDOCTOR = str(Path(sys.executable).with_name("tfdoctor"))


def test_monitor_csv_and_record(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "x = bytearray(64 << 20); print('ready', flush=True); input()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    trace = tmp_path / "m.trace"
    try:
        # its 64 MiB are there before the first sample (on a loaded machine the interpreter
        # can take longer to start than the monitor takes to sample it)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        p = subprocess.run(
            [TFDOCTOR, "monitor", "--csv", "--duration", "1.5", "--interval-ms", "100",
             "--pid", str(child.pid), "--record", str(trace)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        child.kill()
        child.wait()
    assert p.returncode == 0, p.stderr
    rows = [r.split(",") for r in p.stdout.strip().splitlines()]
    assert rows[0][:4] == ["t", "ram_used", "ram_total", "swap_used"]
    assert rows[0][-1] == f"pid{child.pid}_rss"
    assert len(rows) >= 8
    assert all(int(r[-1]) >= 64 << 20 for r in rows[1:])  # the child's RSS, every sample
    header, items = T.read_trace(trace)
    assert header["pids"] == [child.pid]
    assert len([1 for k, _ in items if k == "sample"]) == len(rows) - 1


def test_monitor_lines_and_bad_arguments() -> None:
    p = subprocess.run(
        [TFDOCTOR, "monitor", "--duration", "1.2", "--interval-ms", "500"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0
    assert "RAM" in p.stdout and "GiB" in p.stdout
    for args in (["--pid", "999999999"], ["--interval-ms", "1"], ["--duration", "0"]):
        bad = subprocess.run([TFDOCTOR, "monitor", *args], capture_output=True, text=True,
                             timeout=60)  # fmt: skip
        assert bad.returncode == 2, args
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


# --------------------------------------------------------------------------------------------
# Real H100 sessions (tests/fixtures/traces/README.md)

GIB = 1 << 30


def test_a_real_h100_nvml_session_replays_per_process_vram_through_the_sampler() -> None:
    """The Sampler, on the NVML calls a real driver answered while a process leaked VRAM,
    shows that process's VRAM climbing to the wall, then gone once it died."""
    snap = nvml.load_snapshot(TRACES / "real_h100_leak.nvml.json")
    timeline = T.Timeline()
    sampler = T.Sampler(timeline, interval_s=0.005, gpu_api=nvml.ReplayNvml(snap)).start()
    deadline = time.monotonic() + 20
    while sampler.samples < 120 and time.monotonic() < deadline:
        time.sleep(0.05)
    sampler.stop()
    assert sampler.gpu_problem is None
    rows = [
        g
        for _, (kind, item) in timeline.since(0)
        if kind == "sample"
        for g in item.get("gpus") or []
    ]
    assert rows and all(g["total"] == 85520809984 for g in rows)
    leaker = [p["used"] for g in rows for p in g["procs"] if p["pid"] == 598]
    assert max(leaker) > 70 * GIB and leaker == sorted(leaker)  # only ever grows
    assert len(set(leaker)) > 20
    assert rows[-1]["procs"] == [] and rows[-1]["used"] < GIB  # died: its VRAM is back


def test_a_real_h100_contention_trace_reads_back_with_both_processes() -> None:
    header, items = T.read_trace(TRACES / "real_h100_contention.trace.jsonl")
    assert header["interval_s"] == 0.25
    markers = [i["label"] for k, i in items if k == "marker"]
    assert markers[-1] == "trainer exited 1"
    samples = [i for k, i in items if k == "sample"]
    pids = {p["pid"] for i in samples for g in i.get("gpus") or [] for p in g["procs"]}
    assert pids == {589, 614}
    oom = (TRACES / "real_h100_contention.trainer.txt").read_text()
    assert "CUDA out of memory. Tried to allocate 6.00 GiB" in oom
    assert "Process 614 has 56.51 GiB memory in use" in oom
