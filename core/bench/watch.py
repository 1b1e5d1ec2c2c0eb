"""Watch the worker: start-up, runs, the watchdog, the memory guard, cancel and the end."""

from __future__ import annotations

import contextlib
import queue
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tfdoctor.core.bench.classify import classify_end
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.explain import under_the_cap
from tfdoctor.core.bench.outcome import OUTCOME_MARKERS, Outcome, RunRecord, Stop
from tfdoctor.core.bench.process import WorkerProcess
from tfdoctor.core.bench.rundir import make_run_dir
from tfdoctor.core.events import Event, EventBuffer
from tfdoctor.core.knowledge import load as load_compat
from tfdoctor.core.model import Diagnosis, Target
from tfdoctor.core.telemetry import Sampler, Timeline

# The worker's phases, in order, as people read them (the CLI's progress line, the GUI's label)
PHASE_LABELS = {
    "start": "starting Python",
    "import": "importing TensorFlow",
    "device_init": "setting up devices",
    "build": "building the model and data",
    "compile": "compiling",
    "first_step": "first step (tracing)",
    "steady": "training",
    "done": "finishing",
}
# The phases marked on the telemetry timeline, and their markers' labels
MARKED_PHASES = {
    "import": "import",
    "compile": "compile",
    "first_step": "first step",
    "steady": "steady state",
}
STEPS_KEPT = 20_000
SAMPLE_EVERY_S = 0.5


def phase_label(phase: str) -> str:
    """A phase as people read it ("importing TensorFlow"); an unknown one as it is."""
    return PHASE_LABELS.get(phase, phase)


def default_guard_mib() -> int:
    """Stop the worker when less than this much RAM is available: 5% of RAM, at least 512
    MiB, at most 4 GiB (the desktop, a browser and the app keep working)."""
    total_mib = psutil.virtual_memory().total >> 20
    return int(min(4096, max(512, total_mib * 0.05)))


@dataclass(frozen=True)
class SupervisorOptions:
    """How the worker is watched.

    watchdog_s: longest silence allowed while importing, building, compiling or in the first
        step (XLA compiles and CUDA start-ups can take minutes).
    stall_s: longest wait for the next step once training runs (or 20 times the slowest
        step so far, whichever is longer, capped at watchdog_s).
    memory_cap_mib: cap the worker's RAM (memory cgroup, else RLIMIT_AS); None = no cap.
    guard_mib: stop the worker when the machine's available RAM drops below this; 0 = off;
        None = default_guard_mib().
    """

    watchdog_s: float = 300.0
    stall_s: float = 60.0
    memory_cap_mib: int | None = None
    guard_mib: int | None = None
    sample_every_s: float = SAMPLE_EVERY_S  # telemetry interval (the GUI uses 0.1)
    gpu_api: Any = None  # a pynvml-like object for GPU series (nvml.live_api()); None: host only


class Supervisor:
    """Drives one worker at a time: start-up, runs, watchdog, guard, cancel, the end.

    Events (`Event(kind, data)`) go to `events` for the GUI and the CLI's progress line:
    status (one line), phase (name), info, knob, step, oom, error, output (a line of the
    worker's output), worker_started (pid), worker_ended (Outcome); run_bench and the batch
    search add done (BenchResult), search_probe and search_result. Telemetry (samples, TF
    memory, steps, markers) goes to `timeline`.
    """

    def __init__(
        self,
        target: Target,
        config: BenchConfig,
        options: SupervisorOptions | None = None,
        *,
        events: EventBuffer[Event] | None = None,
        cancel: threading.Event | None = None,
        run_dir: Path | None = None,
        timeline: Timeline | None = None,
    ) -> None:
        self.target = target
        self.config = config.validate()
        self.options = options or SupervisorOptions()
        self.events: EventBuffer[Event] = events or EventBuffer(50_000)
        self.cancel_event = cancel or threading.Event()
        # without a usable state folder: a fresh private folder (0700), never a fixed /tmp name
        self.run_dir = run_dir or make_run_dir() or Path(tempfile.mkdtemp(prefix="tfdoctor-run-"))
        guard = self.options.guard_mib
        self.guard_mib = default_guard_mib() if guard is None else guard
        self.worker: WorkerProcess | None = None
        self.workers_started = 0
        self.info: dict[str, Any] = {}
        self.knobs: list[dict[str, Any]] = []
        # telemetry: the worker's RSS, system RAM and swap (and GPUs with an NVML api), plus
        # markers, TF memory and steps from the worker's records
        self.timeline = timeline or Timeline()
        self.sampler = Sampler(
            self.timeline, interval_s=self.options.sample_every_s, gpu_api=self.options.gpu_api
        )
        self._sampling = False
        self.peaks: dict[str, int] = {}  # rss (worker + children), ram_used, cgroup: highest
        self.last_cgroup: dict[str, int] | None = None  # the capped cgroup's newest reading
        self._seen_sample: dict[str, Any] | None = None
        self.phase = "start"
        self._next_run = 0
        self._stopped: Stop | None = None
        self.last_output: list[str] = []  # the last worker's output lines, once it ended
        self.worker_error: dict[str, Any] | None = None  # an error outside any run

    # -- events
    def emit(self, kind: str, data: Any = None) -> None:
        self.events.append(Event(kind, data))

    # -- worker life
    def spawn(self) -> WorkerProcess:
        """Start a worker and wait until it is ready (TF imported, devices set up).

        Raises:
            targetrun.TargetError: the interpreter cannot be started.
            Stop: hang, cancel or guard during start-up (the worker is then ended).
        """
        wp = WorkerProcess(
            self.target,
            self.config,
            run_dir=self.run_dir,
            memory_cap_mib=self.options.memory_cap_mib,
            on_output=lambda line: self.emit("output", line),
        )
        wp.start()
        self.worker = wp
        self.workers_started += 1
        if not self._sampling:
            self.sampler.start()
            self._sampling = True
        if wp.pid is not None:
            self.sampler.watch(wp.pid)
        # under a cap, what the kernel decides on: the cgroup's usage (RSS leaves out page
        # cache and counts shared-library pages the cgroup may not)
        self.sampler.watch_cgroup(wp.cgroup.usage if wp.cgroup is not None else None)
        self.phase = "start"
        self.emit("worker_started", wp.pid)
        if wp.cap_note:
            self.emit("status", f"worker RAM cap: {wp.cap_note}")
        if self.options.memory_cap_mib:
            self.timeline.add(
                "limit",
                {
                    "t": self.timeline.now(),
                    "key": "ram_cap",
                    "label": "worker RAM cap",
                    "value": self.options.memory_cap_mib << 20,
                },
            )
        for rec in self._records(wp, until="ready"):
            if rec["type"] == "ready":
                break
        return wp

    def run(self, config: BenchConfig) -> RunRecord:
        """One run command in the live worker (spawned first when needed)."""
        wp = self.worker if self.worker and self.worker.alive() else None
        if wp is None:
            try:
                wp = self.spawn()
            except Stop as stop:
                return RunRecord(stop.status, detail=stop.detail)
            except _Died:
                return RunRecord("died", detail="the worker died while starting")
        self._next_run += 1
        run_id = self._next_run
        if not wp.send({"cmd": "run", "id": run_id, "config": config.run_config()}):
            return RunRecord("died", detail="the worker was gone before the run started")
        rec_out = RunRecord("died")
        try:
            for rec in self._records(wp, until="run_done"):
                kind = rec["type"]
                if kind == "step":
                    if len(rec_out.steps) < STEPS_KEPT:
                        rec_out.steps.append(rec)
                elif kind == "oom":
                    rec_out.oom = rec
                elif kind == "error":
                    rec_out.error = rec
                elif kind == "run_done" and rec.get("run") == run_id:
                    rec_out.done = rec
                    rec_out.status = str(rec.get("status"))
                    # the worker reports "ready" right after; read it so the next run starts
                    for more in self._records(wp, until="ready"):
                        if more["type"] == "ready":
                            break
                    break
        except Stop as stop:
            rec_out.status, rec_out.detail = stop.status, stop.detail
        except _Died:
            rec_out.status = "died"
        return rec_out

    def end_worker(self) -> Outcome | None:
        """Tell the worker to exit and classify how it ended (None when there is none)."""
        wp = self.worker
        if wp is None:
            return None
        if wp.alive() and self._stopped is None:
            wp.send({"cmd": "exit"})
            with contextlib.suppress(Stop, _Died):
                for rec in self._records(wp, until="bye", limit_s=15.0):
                    if rec["type"] == "bye":
                        break
        returncode = wp.finish()
        if wp.cg_peak_bytes:  # the cgroup's own peak (memory.peak), read before its removal
            self.peaks["cgroup"] = max(self.peaks.get("cgroup", 0), wp.cg_peak_bytes)
        self.sampler.watch_cgroup(None)
        self._drain(wp)
        self.last_output = list(wp.output)
        outcome = classify_end(wp, returncode, self._stopped, self.worker_error)
        if wp.pid is not None:
            self.sampler.unwatch(wp.pid)
        label = OUTCOME_MARKERS.get(outcome.status)
        if label:
            self.timeline.mark(
                label + (f" ({outcome.signal})" if outcome.signal else ""),
                "guard" if outcome.status == "guard_stopped" else "crash",
            )
        self.worker = None
        self._stopped = None
        self.worker_error = None
        self.emit("worker_ended", outcome)
        return outcome

    # -- the watch loop
    def _records(
        self, wp: WorkerProcess, *, until: str, limit_s: float | None = None
    ) -> Iterator[dict[str, Any]]:
        """Yield the worker's records, watching it, until the caller stops iterating.

        Raises:
            Stop: hang, cancel, or guard (the worker has been ended).
            _Died: the worker exited and its last records are read.
        """
        opts = self.options
        last_life = time.monotonic()
        slowest_step = 0.0
        started = time.monotonic()
        while True:
            try:
                rec = wp.records.get(timeout=0.1)
            except queue.Empty:
                rec = None
            now = time.monotonic()
            if rec is not None:
                last_life = now
                self._handle(rec)
                if rec["type"] == "step":
                    slowest_step = max(slowest_step, float(rec.get("step_s") or 0.0))
                yield rec
                continue
            if not wp.alive():
                # read what it wrote before dying
                wp.join_io(timeout_s=1.0)
                while True:
                    try:
                        rec = wp.records.get_nowait()
                    except queue.Empty:
                        break
                    self._handle(rec)
                    yield rec
                raise _Died
            if self.cancel_event.is_set():
                self._stop(wp, "cancelled", "stopped at your request", dump=False)
            self._check_memory(wp)
            if limit_s is not None and now - started > limit_s:
                self._stop(wp, "hang", f"no answer within {limit_s:.0f} s", dump=True)
            if self.phase == "steady":
                allowed = min(opts.watchdog_s, max(opts.stall_s, 20 * slowest_step))
            else:
                allowed = opts.watchdog_s
            if now - last_life > allowed:
                where = self.phase.replace("_", " ")
                self._stop(
                    wp, "hang", f"no progress for {now - last_life:.0f} s (phase: {where})", True
                )

    def _stop(self, wp: WorkerProcess, status: str, detail: str, dump: bool) -> None:
        self.emit("status", detail)
        wp.stop(dump_stacks=dump)
        self._stopped = Stop(status, detail)
        raise self._stopped

    def _drain(self, wp: WorkerProcess) -> None:
        while True:
            try:
                self._handle(wp.records.get_nowait())
            except queue.Empty:
                return

    def _handle(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        if kind == "phase":
            self.phase = str(rec.get("phase"))
            self.emit("phase", self.phase)
            if self.phase in MARKED_PHASES:
                self.timeline.mark(MARKED_PHASES[self.phase], "phase")
        elif kind == "info":
            self.info = {k: v for k, v in rec.items() if k not in ("v", "t", "type")}
            self.emit("info", self.info)
            why = _allocator_unsupported(self.config, rec)
            if why:
                note = {"name": "allocator", "applied": False, "why": why}
                if note not in self.knobs:
                    self.knobs.append(note)
                    self.emit("knob", note)
            if self.config.device == "gpu" and not rec.get("gpus"):
                note = {
                    "name": "device",
                    "applied": False,
                    "why": "TensorFlow sees no GPU, so the run used the CPU "
                    "(`tfdoctor check` says why)",
                }
                if note not in self.knobs:
                    self.knobs.append(note)
                    self.emit("knob", note)
        elif kind == "knob":
            self.knobs.append({k: rec.get(k) for k in ("name", "applied", "why")})
            self.emit("knob", rec)
        elif kind in ("step", "oom", "error", "run_done"):
            if kind == "step":
                t = self.timeline.now()
                if rec.get("mem"):
                    self.timeline.add_tf(rec["mem"], t)
                self.timeline.add(
                    "step",
                    {
                        "t": t,
                        "step": rec.get("step"),
                        "step_s": rec.get("step_s"),
                        "examples_per_s": rec.get("examples_per_s"),
                        "rss": rec.get("rss"),
                    },
                )
            elif kind == "oom":
                self.timeline.mark("ResourceExhaustedError (out of memory)", "oom")
            if kind == "error" and rec.get("run") is None:
                self.worker_error = rec  # start-up (import, devices) or protocol
            self.emit(kind, rec)

    def _check_memory(self, wp: WorkerProcess) -> None:
        """Peaks from the newest telemetry sample, and the guard: stop the worker before the
        machine runs out of RAM."""
        sample = self.timeline.latest
        if sample is None or sample is self._seen_sample:
            return
        self._seen_sample = sample
        rss = (sample.get("rss") or {}).get(str(wp.pid))
        cgroup = sample.get("cgroup") or {}
        for key, value in (
            ("rss", rss),
            ("ram_used", sample.get("ram_used")),
            ("cgroup", cgroup.get("usage")),
        ):
            if isinstance(value, int):
                self.peaks[key] = max(self.peaks.get(key, 0), value)
        if cgroup.get("usage"):
            self.last_cgroup = dict(cgroup)
        available = sample.get("ram_available")
        if self.guard_mib and isinstance(available, int) and available < self.guard_mib << 20:
            self._stop(
                wp,
                "guard_stopped",
                f"stopped with {available >> 20} MiB of RAM left (guard: {self.guard_mib} "
                "MiB): the run was about to exhaust the machine's memory",
                dump=False,
            )

    def within_the_cap(self, d: Diagnosis) -> Diagnosis:
        """A diagnosis of a run killed at the user's RAM cap, told as what the run needed (only
        where the cap was a memory cgroup: its peak was read)."""
        peak = self.peaks.get("cgroup")
        if not peak:
            return d
        cap = self.options.memory_cap_mib
        return under_the_cap(d, cap, peak, self.last_cgroup, self.peaks.get("rss"))

    def close(self) -> None:
        """Stop the telemetry (the worker is ended by end_worker)."""
        if self._sampling:
            self.sampler.stop()
            self._sampling = False


def _allocator_unsupported(config: BenchConfig, info: dict[str, Any]) -> str | None:
    """Why TF_GPU_ALLOCATOR=cuda_malloc_async cannot work in this TF, or None."""
    build = info.get("build") or {}
    cuda = str(build.get("cuda_version") or "")
    cuda_build = bool(build.get("is_cuda_build"))
    return load_compat().allocator_unsupported(
        config.allocator, cuda_build=cuda_build, build_cuda=cuda
    )


class _Died(Exception):
    """The worker process is gone (internal)."""
