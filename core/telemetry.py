"""Live telemetry: VRAM, TF's in-use memory, the worker's RSS, system RAM and swap on one
time axis, with markers (phases, out-of-memory errors, the crash, the guard stop).

`Timeline` is the bounded, thread-safe store the GUI plot and the CLI read with
`since(seq)`; `Sampler` fills it from a daemon thread (psutil for the host, NVML through
`nvml.GpuSampler` on its own thread so that a hung GPU cannot freeze sampling); `TraceWriter`
appends every item to a JSON-lines trace that survives a crash of anything (flushed and
synced every second, readable while written); `read_trace` and `replay` play a trace back
through the same Timeline API, a truncated last line included.

Sample (kind "sample"): {t, ram_used, ram_total, ram_available, swap_used, swap_total,
rss: {pid: bytes (with its children)}, gpus: [{index, used, total, util, temp_c, power_w,
throttle, procs: [{pid, used}]}] (absent without NVML), nvml: "stalled" while a call hangs}.
TF memory (kind "tf"): {t, device: {current, peak}}. Step (kind "step"): {t, step, step_s,
examples_per_s, rss (the worker's own, when it says)}. Marker (kind "marker"): {t, label,
category}. Limit (kind "limit"): {t, key, label, value} (a memory cap the run is under, in
bytes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

import psutil

from tfdoctor.core import jsonio
from tfdoctor.core.events import EventBuffer
from tfdoctor.core.probes import nvml

log = logging.getLogger(__name__)

TRACE_FORMAT = "tfdoctor-trace"
TRACE_VERSION = 1
DEFAULT_INTERVAL_S = 0.1
HISTORY_ITEMS = 80_000  # an hour at 10 Hz with markers and TF points to spare
CHILDREN_REFRESH_S = 1.0
STALL_INTERVALS = 5  # an NVML call this many intervals late marks the sampler stalled


class TraceError(ValueError):
    """A file is not a tfdoctor trace; the message is one line."""


class TraceWriter:
    """Append-only JSON lines, flushed and fsynced at least every second."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: dict[str, Any],
        *,
        max_bytes: int | None = None,
    ) -> None:
        """`max_bytes`: keep the trace bounded: past it, the file becomes `PATH.1` (the one
        before is dropped) and a new one starts, so the last stretch always survives."""
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._header = {"format": TRACE_FORMAT, "version": TRACE_VERSION, **header}
        self._fh: TextIO | None = self.path.open("w", encoding="utf-8")
        self._lock = threading.Lock()
        self._last_sync = 0.0
        self._written = 0
        self.write(self._header, force=True)

    def _rotate(self) -> None:
        assert self._fh is not None
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self.path, rotated_path(self.path))
        self._fh = self.path.open("w", encoding="utf-8")
        header = json.dumps(self._header, separators=(",", ":")) + "\n"
        self._fh.write(header)
        self._written = len(header)

    def write(self, item: dict[str, Any], force: bool = False) -> None:
        with self._lock:
            if self._fh is None:
                return
            try:
                line = json.dumps(item, separators=(",", ":")) + "\n"
                if self.max_bytes is not None and self._written + len(line) > self.max_bytes:
                    self._rotate()
                self._fh.write(line)
                self._written += len(line)
                now = time.monotonic()
                if force or now - self._last_sync >= 1.0:
                    self._fh.flush()
                    os.fsync(self._fh.fileno())
                    self._last_sync = now
            except (OSError, ValueError) as exc:
                log.warning("trace %s: writing stopped: %s", self.path, exc)
                self._close()

    def _close(self) -> None:
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()
            self._fh = None

    def close(self) -> None:
        with self._lock:
            self._close()


class Timeline:
    """The telemetry of one session: items in time order, bounded, read with since(seq)."""

    def __init__(self, maxlen: int = HISTORY_ITEMS, writer: TraceWriter | None = None) -> None:
        self.buffer: EventBuffer[tuple[str, dict[str, Any]]] = EventBuffer(maxlen)
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.writer = writer
        self.latest: dict[str, Any] | None = None  # the newest sample

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def add(self, kind: str, item: dict[str, Any]) -> int:
        if kind == "sample":
            self.latest = item
        if self.writer is not None:
            self.writer.write({"k": kind, **item})
        return self.buffer.append((kind, item))

    def mark(self, label: str, category: str = "note", t: float | None = None) -> int:
        when = self.now() if t is None else t
        return self.add("marker", {"t": when, "label": label, "category": category})

    def add_tf(self, mem: dict[str, Any], t: float | None = None) -> int:
        """TF allocator current/peak per device, from the worker's step records."""
        return self.add("tf", {"t": self.now() if t is None else t, **mem})

    def since(self, seq: int) -> list[tuple[int, tuple[str, dict[str, Any]]]]:
        return self.buffer.since(seq)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class _Watched:
    """A process whose RSS (with its children's) is sampled; psutil objects are cached and
    the children list refreshed once a second (a /proc scan each tick costs too much CPU)."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.children: list[psutil.Process] = []
        self.refreshed = 0.0

    def rss(self, now: float) -> int | None:
        try:
            total = int(self.proc.memory_info().rss)
        except psutil.Error:
            return None
        if now - self.refreshed >= CHILDREN_REFRESH_S:
            self.refreshed = now
            with contextlib.suppress(psutil.Error):
                self.children = self.proc.children(recursive=True)
        for c in self.children:
            with contextlib.suppress(psutil.Error):
                total += c.memory_info().rss
        return total


class Sampler:
    """Samples the host (and the GPUs through NVML) into a Timeline from a daemon thread.

    `gpu_api`: a pynvml-like object (`nvml.live_api()`, a ReplayNvml) or None for host-only
    sampling; without NVML the GPU series are absent, never zero.
    """

    def __init__(
        self,
        timeline: Timeline,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        gpu_api: Any = None,
        pids: Iterable[int] = (),
    ) -> None:
        if not 0.005 <= interval_s <= 60:
            raise ValueError("the sampling interval must be from 5 ms to 60 s")
        self.timeline = timeline
        self.interval_s = interval_s
        self.gpu_api = gpu_api
        self._watched: dict[int, _Watched] = {}
        # a memory cgroup to read with each sample: what a RAM cap is decided on
        self._cgroup: Callable[[], dict[str, int] | None] | None = None
        self._lock = threading.Lock()
        for pid in pids:
            self.watch(pid)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gpu_requests: queue.Queue[float | None] = queue.Queue()
        self._gpu_results: queue.Queue[tuple[float, list[dict[str, Any]], list[Any]]] = (
            queue.Queue()
        )
        self._gpu_thread: threading.Thread | None = None
        self._gpu_pending_since: float | None = None
        self.gpu_problem: str | None = None  # why there are no GPU series
        self.stalled = False
        self.samples = 0

    # -- what to follow
    def watch(self, pid: int) -> None:
        with self._lock:
            if pid not in self._watched:
                try:
                    self._watched[pid] = _Watched(pid)
                except psutil.Error:
                    log.debug("cannot watch pid %s", pid)

    def unwatch(self, pid: int) -> None:
        with self._lock:
            self._watched.pop(pid, None)

    def watch_cgroup(self, read: Callable[[], dict[str, int] | None] | None) -> None:
        """Read a memory cgroup with each sample (`read` gives {usage, anon, file} in bytes, or
        None once it is gone); None stops."""
        with self._lock:
            self._cgroup = read

    # -- life cycle
    def start(self) -> Sampler:
        if self.gpu_api is not None:
            ready = threading.Event()
            self._gpu_thread = threading.Thread(
                target=self._gpu_loop, args=(ready,), name="tfdoctor-nvml", daemon=True
            )
            self._gpu_thread.start()
            ready.wait(5.0)
        else:
            self.gpu_problem = "no NVML"
        self._thread = threading.Thread(target=self._loop, name="tfdoctor-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._gpu_requests.put(None)
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    # -- threads
    def _loop(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:  # a sampler must never die of one bad reading
                log.debug("sampler tick failed", exc_info=True)
            next_tick += self.interval_s
            delay = next_tick - time.monotonic()
            if delay < 0:  # fell behind (a busy machine): skip, do not burst
                next_tick = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def _gpu_loop(self, ready: threading.Event) -> None:
        sampler = nvml.GpuSampler(self.gpu_api)
        problem = sampler.open()
        if problem is not None or not sampler.handles:
            self.gpu_problem = problem or "NVML sees no GPU"
            ready.set()
            return
        ready.set()
        try:
            while True:
                asked = self._gpu_requests.get()
                if asked is None:
                    return
                rows = sampler.sample()
                self._gpu_results.put((asked, rows, sampler.xid_events()))
        finally:
            sampler.close()

    def _tick(self) -> None:
        t = self.timeline.now()
        now = time.monotonic()
        gpus = self._gpu_rows(now)
        vm = psutil.virtual_memory()
        sw = psutil.swap_memory()
        sample: dict[str, Any] = {
            "t": t,
            "ram_used": vm.total - vm.available,
            "ram_total": vm.total,
            "ram_available": vm.available,
            "swap_used": sw.used,
            "swap_total": sw.total,
        }
        with self._lock:
            watched = list(self._watched.items())
            cgroup = self._cgroup
        if cgroup is not None:
            usage = cgroup()
            if usage:
                sample["cgroup"] = usage
        rss = {}
        for pid, w in watched:
            value = w.rss(now)
            if value is None:
                self.unwatch(pid)  # it exited
            else:
                rss[str(pid)] = value
        if rss:
            sample["rss"] = rss
        if gpus is not None:
            sample["gpus"] = gpus
        if self.stalled:
            sample["nvml"] = "stalled"
        self.samples += 1
        self.timeline.add("sample", sample)

    def _gpu_rows(self, now: float) -> list[dict[str, Any]] | None:
        if self._gpu_thread is None or not self._gpu_thread.is_alive():
            return None
        rows = None
        while True:  # the newest answer; older ones are stale
            try:
                _asked, got, xids = self._gpu_results.get_nowait()
            except queue.Empty:
                break
            self._gpu_pending_since = None
            rows = got
            for x in xids:
                self.timeline.mark(f"Xid {x.get('xid')} on GPU {x.get('gpu')}", "xid")
            if self.stalled:
                self.stalled = False
                self.timeline.mark("NVML answers again", "stall")
        if self._gpu_pending_since is None:
            self._gpu_pending_since = now
            self._gpu_requests.put(now)
        elif now - self._gpu_pending_since > STALL_INTERVALS * self.interval_s and not self.stalled:
            self.stalled = True
            self.timeline.mark(
                f"NVML stalled: no answer for {now - self._gpu_pending_since:.1f} s", "stall"
            )
        return rows


def read_trace(
    path: str | os.PathLike[str],
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """(header, [(kind, item)]) of a trace; a torn last line (a crash mid-write) is dropped.

    Raises:
        TraceError: not a tfdoctor trace (one-line reason).
        OSError: the file cannot be read.
    """
    with Path(path).open("rb") as fh:
        return parse_trace(fh, str(path))


def parse_trace(
    lines: Iterable[bytes], name: str
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """A trace's lines (bytes) read like `read_trace`; `name` is what messages call it.

    Raises:
        TraceError: not a tfdoctor trace (one-line reason).
    """
    items: list[tuple[str, dict[str, Any]]] = []
    header: dict[str, Any] | None = None
    for n, raw in enumerate(lines, 1):
        try:
            rec = jsonio.loads(raw)
        except ValueError:
            if n == 1:
                raise TraceError(f"{name}: not a tfdoctor trace (line 1 is not JSON)") from None
            log.debug("trace %s: skipping a broken line %d", name, n)
            continue
        if header is None:
            if not isinstance(rec, dict) or rec.get("format") != TRACE_FORMAT:
                raise TraceError(f"{name}: not a tfdoctor trace (no trace header)")
            if rec.get("version") != TRACE_VERSION:
                raise TraceError(f"{name}: trace version {rec.get('version')} is not supported")
            header = rec
            continue
        if isinstance(rec, dict) and isinstance(rec.get("k"), str):
            kind = rec.pop("k")
            if isinstance(rec.get("t"), (int, float)):
                items.append((kind, rec))
    if header is None:
        raise TraceError(f"{name}: empty file, not a tfdoctor trace")
    return header, items


def trace_bytes(items: Iterable[tuple[str, dict[str, Any]]], header: dict[str, Any]) -> bytes:
    """Items as a whole trace file (the format TraceWriter writes and read_trace reads)."""
    head = {"format": TRACE_FORMAT, "version": TRACE_VERSION, **header}
    out = [json.dumps(head, separators=(",", ":"))]
    out += [json.dumps({"k": kind, **item}, separators=(",", ":")) for kind, item in items]
    return ("\n".join(out) + "\n").encode("utf-8")


def rotated_path(path: str | os.PathLike[str]) -> Path:
    """Where a bounded trace keeps the stretch before its current file."""
    p = Path(path)
    return p.with_name(p.name + ".1")


def read_bounded_trace(
    path: str | os.PathLike[str],
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """A bounded trace whole: `PATH.1` (when it rotated), then `PATH`. Raises like read_trace."""
    header, items = read_trace(path)
    older = rotated_path(path)
    if older.is_file():
        try:
            _, before = read_trace(older)
        except TraceError:
            before = []
        items = before + items
    return header, items


def replay(
    path: str | os.PathLike[str],
    timeline: Timeline,
    *,
    speed: float | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    """Feed a trace into `timeline`: at once (speed None), or paced at `speed` times real
    time. Returns the header. Raises like read_trace."""
    header, items = read_trace(path)
    start = time.monotonic()
    for kind, item in items:
        if stop is not None and stop.is_set():
            break
        if speed:
            due = start + float(item["t"]) / speed
            delay = due - time.monotonic()
            if delay > 0:
                if stop is not None:
                    if stop.wait(delay):
                        break
                else:
                    time.sleep(delay)
        timeline.add(kind, item)
    return header
