"""Run the training benchmark in a supervised worker; survive and explain whatever kills it.

The worker (`core/probes/target/bench_worker.py`) runs in the target interpreter, in its own
process group, optionally in a memory cgroup. It speaks JSON lines on a dedicated pipe; its
stdout and stderr (TensorFlow's log, tracebacks) are kept as evidence: the last lines in
memory, the first STDERR_FILE_CAP bytes in the run folder. faulthandler writes native crash
stacks to a file there too.

The supervisor never hangs and never leaves a process behind: a watchdog turns "no progress"
into a stack dump then SIGTERM then SIGKILL of the whole group, a memory guard stops the
worker before the desktop runs out of RAM, and at the end the group is killed whatever
happened. Every end is classified (see STATUSES) and goes through the diagnosis engine with
the exit status and the kernel's OOM records as evidence.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import datetime
import json
import logging
import os
import queue
import resource
import select
import shutil
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tfdoctor.core.bench import memcg, procgroup
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.diagnose.engine import ExitInfo, diagnose
from tfdoctor.core.events import EventBuffer
from tfdoctor.core.model import Diagnosis, Target
from tfdoctor.core.paths import state_dir
from tfdoctor.core.probes import system, targetrun
from tfdoctor.core.telemetry import Sampler, Timeline

log = logging.getLogger(__name__)

WORKER_SCRIPT = Path(__file__).resolve().parents[1] / "probes" / "target" / "bench_worker.py"
PROTOCOL = 1
STATUSES = {
    "completed": "the run finished",
    "exception": "a Python exception stopped the run",
    "oom_recovered": "TensorFlow ran out of memory and raised ResourceExhaustedError (caught)",
    "killed": "the worker was killed by a signal",
    "crashed": "the worker crashed (a native fault)",
    "hang": "the worker stopped making progress and was stopped",
    "cancelled": "you stopped the run",
    "guard_stopped": "tfdoctor stopped the run before the machine ran out of RAM",
}
MARKED_PHASES = {
    "import": "import",
    "compile": "compile",
    "first_step": "first step",
    "steady": "steady state",
}
OUTCOME_MARKERS = {
    "killed": "killed",
    "crashed": "crash",
    "hang": "hang",
    "guard_stopped": "guard stop",
    "exception": "exception",
}
CRASH_SIGNALS = {"SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE", "SIGSYS", "SIGTRAP"}
OUTPUT_LINES_KEPT = 4000
OUTPUT_LINE_CHARS = 4000
STDERR_FILE_CAP = 32 << 20
EVENTS_FILE_CAP = 16 << 20
STEPS_KEPT = 20_000
RUNS_KEPT = 20
SAMPLE_EVERY_S = 0.5


def runs_root() -> Path:
    """Where run folders go (under tfdoctor's state folder)."""
    return state_dir() / "runs"


def default_guard_mb() -> int:
    """Stop the worker when less than this much RAM is available: 5% of RAM, at least 512
    MiB, at most 4 GiB (the desktop, a browser and the app keep working)."""
    total_mb = psutil.virtual_memory().total >> 20
    return int(min(4096, max(512, total_mb * 0.05)))


@dataclass(frozen=True)
class SupervisorOptions:
    """How the worker is watched.

    watchdog_s: longest silence allowed while importing, building, compiling or in the first
        step (XLA compiles and CUDA start-ups can take minutes).
    stall_s: longest wait for the next step once training runs (or 20 times the slowest
        step so far, whichever is longer, capped at watchdog_s).
    memory_cap_mb: cap the worker's RAM (memory cgroup, else RLIMIT_AS); None = no cap.
    guard_mb: stop the worker when the machine's available RAM drops below this; 0 = off;
        None = default_guard_mb().
    """

    watchdog_s: float = 300.0
    stall_s: float = 60.0
    memory_cap_mb: int | None = None
    guard_mb: int | None = None
    sample_every_s: float = SAMPLE_EVERY_S  # telemetry interval (the GUI uses 0.1)
    gpu_api: Any = None  # a pynvml-like object for GPU series (nvml.live_api()); None: host only


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


@dataclass
class Outcome:
    status: str  # one of STATUSES
    exit_code: int | None
    signal: str | None
    duration_s: float
    detail: str  # one line for people
    exception: dict[str, Any] | None = None  # {type, message, traceback}
    oom_kill: OomKillEvidence | None = None
    fault_stack: str | None = None  # faulthandler's report (crash or hang)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "duration_s": round(self.duration_s, 3),
            "detail": self.detail,
            "exception": self.exception,
            "oom_kill": self.oom_kill.to_json() if self.oom_kill else None,
            "fault_stack": self.fault_stack,
        }


@dataclass
class BenchResult:
    config: BenchConfig
    outcome: Outcome
    metrics: dict[str, Any]
    diagnosis: Diagnosis
    probes: list[dict[str, Any]] = field(default_factory=list)  # batch search only
    run_dir: Path | None = None
    output_tail: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    knobs: list[dict[str, Any]] = field(default_factory=list)
    recommendation: dict[str, Any] | None = None  # batch search only

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": 1,
            "config": self.config.to_json(),
            "outcome": self.outcome.to_json(),
            "metrics": self.metrics,
            "probes": self.probes,
            "causes": [c.to_json() for c in self.diagnosis.causes],
            "environment": self.info,
            "knobs": self.knobs,
            "run_dir": str(self.run_dir) if self.run_dir else None,
        }
        if self.recommendation is not None:
            out["recommendation"] = self.recommendation
        return out


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _vmstat_oom_kills() -> int | None:
    try:
        for line in Path("/proc/vmstat").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _make_run_dir(root: Path | None = None) -> Path | None:
    """A fresh folder for one run's files; old runs beyond RUNS_KEPT are removed."""
    root = root or runs_root()
    try:
        root.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        for n in range(1000):
            d = root / f"{stamp}-{os.getpid()}-{n}"
            try:
                d.mkdir()
                break
            except FileExistsError:
                continue
        else:
            return None
        old = sorted(p for p in root.iterdir() if p.is_dir())
        for p in old[:-RUNS_KEPT]:
            shutil.rmtree(p, ignore_errors=True)
        return d
    except OSError as exc:
        log.warning("cannot keep run files under %s: %s", root, exc)
        return None


class WorkerProcess:
    """One worker process: start it, talk to it, read its records and output, end it.

    Records arrive on `records` (a queue filled by an I/O thread); output lines go to the
    ring buffer `output`, to the run folder's stderr.log, and to `on_output`.
    """

    def __init__(
        self,
        target: Target,
        config: BenchConfig,
        *,
        run_dir: Path,
        memory_cap_mb: int | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> None:
        self.target = target
        self.config = config
        self.run_dir = run_dir
        self.memory_cap_mb = memory_cap_mb
        self.on_output = on_output
        self.records: queue.Queue[dict[str, Any]] = queue.Queue()
        self.output: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES_KEPT)
        self.output_bytes = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.cgroup: memcg.MemoryCgroup | None = None
        self.cap_note: str | None = None
        self.started_at = 0.0
        self._ctl: int | None = None
        self._io: threading.Thread | None = None
        self._stop_io = threading.Event()
        self.fault_file = run_dir / "faulthandler.txt"
        self.memcg_at_start: tuple[int, Path] | None = None
        self.cg_kills_at_start: int | None = None
        self.cg_kills_at_end: int | None = None
        self.vmstat_at_start: int | None = None

    # -- life cycle
    def start(self) -> None:
        """Raises targetrun.TargetError when the interpreter cannot be started."""
        ev_r, ev_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        argv = [
            self.target.python,
            "-u",
            str(WORKER_SCRIPT),
            "--events-fd",
            str(ev_w),
            "--control-fd",
            str(ctl_r),
            "--faulthandler-file",
            str(self.fault_file),
            "--setup",
            json.dumps(self.config.setup()),
        ]
        preexec: Callable[[], None] | None = None
        if self.memory_cap_mb:
            try:
                self.cgroup = memcg.MemoryCgroup(self.memory_cap_mb << 20)
                argv = self.cgroup.wrap(argv)
                self.cap_note = (
                    f"memory cgroup {self.cgroup.path} capped at {self.memory_cap_mb} MiB"
                )
            except memcg.MemcgError as exc:
                cap = self.memory_cap_mb << 20
                self.cap_note = (
                    f"address-space limit (RLIMIT_AS) of {self.memory_cap_mb} MiB; "
                    f"a memory cgroup was not possible: {exc}"
                )

                def preexec() -> None:
                    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        env = targetrun.target_environment(self.target)
        env.update(self.config.env())
        self.vmstat_at_start = _vmstat_oom_kills()
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.run_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(ev_w, ctl_r),
                start_new_session=True,
                preexec_fn=preexec,  # only for the RLIMIT_AS fallback
            )
        except OSError as exc:
            for fd in (ev_r, ev_w, ctl_r, ctl_w):
                os.close(fd)
            if self.cgroup is not None:
                self.cgroup.close()
            raise targetrun.TargetError(
                f"{self.target.python}: cannot be run ({exc.strerror or exc})"
            ) from None
        os.close(ev_w)
        os.close(ctl_r)
        self._ctl = ctl_w
        self.started_at = time.monotonic()
        assert self.proc.stdout is not None
        self._io = threading.Thread(
            target=self._pump,
            args=(self.proc.stdout.fileno(), ev_r),
            name="bench-worker-io",
            daemon=True,
        )
        self._io.start()
        # the worker's memory cgroup, to read its OOM counter at the end
        self.memcg_at_start = (
            (self.cgroup.version, self.cgroup.path)
            if self.cgroup is not None
            else memcg.cgroup_dir_of(self.proc.pid)
        )
        if self.memcg_at_start is not None:
            self.cg_kills_at_start = memcg.oom_kill_count(*self.memcg_at_start)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, cmd: dict[str, Any]) -> bool:
        """Write one command; False when the worker is gone (its pipe is closed)."""
        if self._ctl is None:
            return False
        try:
            os.write(self._ctl, (json.dumps(cmd) + "\n").encode())
            return True
        except (BrokenPipeError, OSError):
            return False

    def stop(self, *, dump_stacks: bool) -> None:
        """Stack dump (when asked), SIGTERM, SIGKILL: the whole group."""
        if self.proc is not None:
            procgroup.stop_group(self.proc, dump_stacks=dump_stacks)

    def finish(self, grace_s: float = 5.0) -> int | None:
        """Wait for the worker to exit (it was told to, or died), kill what is left of its
        group, drain its output, close everything. Returns the exit code."""
        if self.proc is None:
            return None
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            procgroup.stop_group(self.proc, dump_stacks=False)
        procgroup.kill_group(self.proc.pid)
        if self.memcg_at_start is not None:  # read before our cgroup is removed
            self.cg_kills_at_end = memcg.oom_kill_count(*self.memcg_at_start)
        if self.cgroup is not None:
            self._kill_cgroup()
        if self._ctl is not None:
            with contextlib.suppress(OSError):
                os.close(self._ctl)
            self._ctl = None
        # the pipes are at EOF once every writer is dead; a writer outside the group (it
        # called setsid) cannot hold us: the I/O thread stops when told
        if self._io is not None:
            self._io.join(timeout=2.0)
            if self._io.is_alive():
                self._stop_io.set()
                self._io.join(timeout=2.0)
        if self.cgroup is not None:
            self.cgroup.close()
        return self.proc.returncode

    def _kill_cgroup(self) -> None:
        assert self.cgroup is not None
        try:
            pids = (self.cgroup.path / "cgroup.procs").read_text().split()
        except OSError:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                os.kill(int(pid), signal.SIGKILL)

    # -- I/O thread
    def _pump(self, out_fd: int, ev_fd: int) -> None:
        files: dict[int, bytearray] = {out_fd: bytearray(), ev_fd: bytearray()}
        open_fds = {out_fd, ev_fd}
        stderr_log = self._open("stderr.log")
        events_log = self._open("events.jsonl")
        written = {"stderr": 0, "events": 0}
        try:
            while open_fds and not self._stop_io.is_set():
                try:
                    ready, _, _ = select.select(list(open_fds), [], [], 0.2)
                except (OSError, ValueError):
                    break
                for fd in ready:
                    try:
                        data = os.read(fd, 1 << 16)
                    except OSError:
                        data = b""
                    if not data:
                        open_fds.discard(fd)
                        continue
                    buf = files[fd]
                    buf += data
                    if fd == out_fd:
                        self.output_bytes += len(data)
                        if stderr_log is not None and written["stderr"] < STDERR_FILE_CAP:
                            stderr_log.write(data[: STDERR_FILE_CAP - written["stderr"]])
                            written["stderr"] += len(data)
                            if written["stderr"] >= STDERR_FILE_CAP:
                                stderr_log.write(b"\n[tfdoctor: output file cap reached]\n")
                    cut = buf.rfind(b"\n")
                    if cut < 0:
                        if len(buf) > OUTPUT_LINE_CHARS * 4:  # one enormous line
                            cut = len(buf) - 1
                        else:
                            continue
                    lines = bytes(buf[: cut + 1]).split(b"\n")[:-1]
                    del buf[: cut + 1]
                    if fd == out_fd:
                        self._take_output(lines)
                    else:
                        self._take_records(lines, events_log, written)
            for fd, buf in files.items():  # a last line without newline
                if buf:
                    if fd == out_fd:
                        self._take_output([bytes(buf)])
                    else:
                        self._take_records([bytes(buf)], events_log, written)
        finally:
            for f in (stderr_log, events_log):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()
            for fd in (out_fd, ev_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _open(self, name: str) -> Any:
        try:
            return (self.run_dir / name).open("ab")
        except OSError:
            return None

    def _take_output(self, lines: list[bytes]) -> None:
        for raw in lines:
            line = raw[:OUTPUT_LINE_CHARS].decode("utf-8", "replace").rstrip("\r")
            self.output.append(line)
            if self.on_output is not None:
                self.on_output(line)

    def _take_records(self, lines: list[bytes], sink: Any, written: dict[str, int]) -> None:
        for raw in lines:
            if sink is not None and written["events"] < EVENTS_FILE_CAP:
                sink.write(raw + b"\n")
                written["events"] += len(raw) + 1
            try:
                rec = json.loads(raw)
            except ValueError:
                log.debug("ignoring a malformed worker record: %r", raw[:200])
                continue
            if isinstance(rec, dict) and rec.get("v") == PROTOCOL:
                self.records.put(rec)

    # -- after the end
    def oom_evidence(self) -> OomKillEvidence:
        ev = OomKillEvidence()
        after = _vmstat_oom_kills()
        if after is not None and self.vmstat_at_start is not None:
            ev.vmstat_delta = after - self.vmstat_at_start
        if self.memcg_at_start is not None:
            ev.cgroup = str(self.memcg_at_start[1])
            now = self.cg_kills_at_end
            if now is not None and self.cg_kills_at_start is not None:
                ev.cgroup_delta = now - self.cg_kills_at_start
        klog = system.read_kernel_log(timeout_s=5.0)
        ev.kernel_log_readable = klog.readable
        if klog.readable and self.pid is not None:
            for rec in reversed(system.parse_oom_kills(klog.lines)):
                if rec.get("pid") == self.pid:
                    ev.kernel_line = str(rec.get("line"))
                    break
        return ev

    def fault_stack(self) -> str | None:
        try:
            text = self.fault_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return text[-20000:] if text.strip() else None


class Stop(Exception):
    """The supervisor ended the worker: hang, cancel or memory guard."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass
class RunRecord:
    """What one run command produced in a live worker."""

    status: str  # completed | oom | error | died | hang | cancelled | guard_stopped
    done: dict[str, Any] | None = None
    oom: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    detail: str = ""


class Supervisor:
    """Drives one worker at a time: start-up, runs, watchdog, guard, cancel, the end.

    Events (kind, payload) go to `events` for the GUI and the CLI's progress line:
    status (one line), phase (name), info, knob, step, oom, error, output (a line of the
    worker's output), worker_started (pid), worker_ended (Outcome). Telemetry (samples, TF
    memory, steps, markers) goes to `timeline`.
    """

    def __init__(
        self,
        target: Target,
        config: BenchConfig,
        options: SupervisorOptions | None = None,
        *,
        events: EventBuffer[tuple[str, Any]] | None = None,
        cancel: threading.Event | None = None,
        run_dir: Path | None = None,
        timeline: Timeline | None = None,
    ) -> None:
        self.target = target
        self.config = config.validate()
        self.options = options or SupervisorOptions()
        self.events: EventBuffer[tuple[str, Any]] = events or EventBuffer(50_000)
        self.cancel_event = cancel or threading.Event()
        self.run_dir = run_dir or _make_run_dir() or Path(os.environ.get("TMPDIR", "/tmp"))
        guard = self.options.guard_mb
        self.guard_mb = default_guard_mb() if guard is None else guard
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
        self.peaks: dict[str, int] = {}  # rss (worker + children), ram_used: highest seen
        self._seen_sample: dict[str, Any] | None = None
        self.phase = "start"
        self._next_run = 0
        self._stopped: Stop | None = None
        self.last_output: list[str] = []  # the last worker's output lines, once it ended
        self.worker_error: dict[str, Any] | None = None  # an error outside any run

    # -- events
    def emit(self, kind: str, data: Any = None) -> None:
        self.events.append((kind, data))

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
            memory_cap_mb=self.options.memory_cap_mb,
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
        self.phase = "start"
        self.emit("worker_started", wp.pid)
        if wp.cap_note:
            self.emit("status", f"worker RAM cap: {wp.cap_note}")
        if self.options.memory_cap_mb:
            self.timeline.add(
                "limit",
                {
                    "t": self.timeline.now(),
                    "key": "ram_cap",
                    "label": "worker RAM cap",
                    "value": self.options.memory_cap_mb << 20,
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
        self._drain(wp)
        self.last_output = list(wp.output)
        outcome = self._classify(wp, returncode)
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
                if wp._io is not None:
                    wp._io.join(timeout=1.0)
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
        for key, value in (("rss", rss), ("ram_used", sample.get("ram_used"))):
            if isinstance(value, int):
                self.peaks[key] = max(self.peaks.get(key, 0), value)
        available = sample.get("ram_available")
        if self.guard_mb and isinstance(available, int) and available < self.guard_mb << 20:
            self._stop(
                wp,
                "guard_stopped",
                f"stopped with {available >> 20} MiB of RAM left (guard: {self.guard_mb} "
                "MiB): the run was about to exhaust the machine's memory",
                dump=False,
            )

    def close(self) -> None:
        """Stop the telemetry (the worker is ended by end_worker)."""
        if self._sampling:
            self.sampler.stop()
            self._sampling = False

    # -- classification
    def _classify(self, wp: WorkerProcess, returncode: int | None) -> Outcome:
        duration = time.monotonic() - wp.started_at
        sig = _signal_name(returncode)
        stopped = self._stopped
        if stopped is not None:
            stack = wp.fault_stack() if stopped.status == "hang" else None
            return Outcome(
                stopped.status, returncode, sig, duration, stopped.detail, None, None, stack
            )
        if sig is not None:
            stack = wp.fault_stack()
            if sig == "SIGKILL":
                ev = wp.oom_evidence()
                if ev.likely:
                    how = (
                        "the kernel's OOM killer killed the worker (host RAM"
                        + (" under the memory cap" if wp.cgroup else "")
                        + " ran out)"
                    )
                    if not ev.proven:
                        how += "; proof by timing only: an OOM kill happened as it died"
                    return Outcome("killed", returncode, sig, duration, how, None, ev, stack)
                return Outcome(
                    "killed",
                    returncode,
                    sig,
                    duration,
                    "the worker was killed (SIGKILL) by something other than the OOM killer "
                    "as far as the kernel log and counters tell",
                    None,
                    ev,
                    stack,
                )
            if sig in CRASH_SIGNALS:
                return Outcome(
                    "crashed", returncode, sig, duration, f"the worker crashed with {sig}",
                    None, None, stack,
                )  # fmt: skip
            return Outcome(
                "killed", returncode, sig, duration, f"the worker was stopped by {sig}",
                None, None, stack,
            )  # fmt: skip
        if returncode not in (0, None):
            err = self.worker_error
            exc = (
                {
                    "type": err.get("exc_type"),
                    "message": err.get("message"),
                    "traceback": err.get("traceback"),
                }
                if err
                else _traceback_from(wp.output)
            )
            where = {"import": " while importing TensorFlow", "device_init": " while setting up"}
            phase = where.get(str(err.get("phase")), "") if err else ""
            detail = f"the worker exited with code {returncode}{phase}" + (
                f": {exc['type']}: {exc['message']}" if exc else ""
            )
            return Outcome("exception", returncode, None, duration, detail, exc)
        return Outcome("completed", returncode, None, duration, "the worker ended normally")


def _allocator_unsupported(config: BenchConfig, info: dict[str, Any]) -> str | None:
    """Why TF_GPU_ALLOCATOR=cuda_malloc_async cannot work in this TF, or None."""
    if config.allocator != "cuda_malloc_async":
        return None
    build = info.get("build") or {}
    if not build.get("is_cuda_build"):
        return "this TensorFlow build has no CUDA: the GPU allocator setting does nothing"
    cuda = str(build.get("cuda_version") or "")
    try:
        major, minor = (int(x) for x in cuda.split(".")[:2])
    except ValueError:
        return None
    if (major, minor) < (11, 2):
        return (
            f"cuda_malloc_async needs CUDA 11.2 or newer; this TensorFlow was built with "
            f"CUDA {cuda}, so TensorFlow keeps its BFC allocator"
        )
    return None


class _Died(Exception):
    """The worker process is gone (internal)."""


def _traceback_from(lines: collections.deque[str] | list[str]) -> dict[str, Any] | None:
    """The last Python traceback in the output: {type, message, traceback}."""
    tail = list(lines)[-400:]
    start = None
    for i, line in enumerate(tail):
        if line.startswith("Traceback (most recent call last)"):
            start = i
    if start is None:
        return None
    block = tail[start:]
    last = next((ln for ln in reversed(block) if ln and not ln.startswith(" ") and ":" in ln), None)
    if last is None:
        return None
    exc_type, _, message = last.partition(":")
    return {
        "type": exc_type.strip().rsplit(".", 1)[-1],
        "message": message.strip()[:2000],
        "traceback": "\n".join(block)[-20000:],
    }


# Said where TF's in-use/peak would be when the allocator keeps no statistics.
TF_MEMORY_NOT_REPORTED = "not reported by this TensorFlow build"


def _run_metrics(rr: RunRecord, sup: Supervisor) -> dict[str, Any]:
    done = rr.done or {}
    steps = rr.steps
    step_times = [float(s["step_s"]) for s in steps[1:] if s.get("step_s")]
    peak_dev: dict[str, int] = dict(done.get("peak") or {})
    for s in steps:
        for dev, m in (s.get("mem") or {}).items():
            if isinstance(m, dict) and isinstance(m.get("peak"), int):
                peak_dev[dev] = max(peak_dev.get(dev, 0), m["peak"])
    rss_peak = max(
        [int(done.get("rss_peak") or 0), sup.peaks.get("rss", 0)]
        + [int(s.get("rss") or 0) for s in steps]
    )
    return {
        "steps_done": int(done.get("steps") or (steps[-1]["step"] if steps else 0)),
        "duration_s": done.get("duration_s"),
        "first_step_s": done.get("first_step_s"),
        "steady_steps_per_s": done.get("steady_steps_per_s"),
        "examples_per_s": done.get("examples_per_s"),
        "median_step_s": round(statistics.median(step_times), 6) if step_times else None,
        "tf_peak_bytes": peak_dev,
        "rss_peak_bytes": rss_peak or None,
        "ram_used_peak_bytes": sup.peaks.get("ram_used"),
    }


def explain(
    outcome: Outcome,
    output: list[str],
    rr: RunRecord | None = None,
    extra: Sequence[tuple[str, str]] = (),
    hide: Collection[str] = (),
) -> Diagnosis:
    """The diagnosis engine over what the worker printed, its exception, its fault stack and
    the kernel's OOM record, with the exit status as evidence."""
    texts: list[bytes] = ["\n".join(output).encode("utf-8", "replace")]
    names = ["worker output"]
    for name, text in extra:
        texts.append(text.encode("utf-8", "replace"))
        names.append(name)
    if rr is not None:
        for name, rec in (("ResourceExhaustedError", rr.oom), ("exception", rr.error)):
            if rec:
                text = f"{rec.get('exc_type')}: {rec.get('message')}\n{rec.get('traceback') or ''}"
                texts.append(text.encode("utf-8", "replace"))
                names.append(name)
    if outcome.fault_stack:
        texts.append(outcome.fault_stack.encode("utf-8", "replace"))
        names.append("faulthandler")
    oom = outcome.oom_kill
    if oom is not None and oom.kernel_line:
        texts.append(oom.kernel_line.encode("utf-8", "replace"))
        names.append("kernel log")
    exit_info = ExitInfo(
        returncode=outcome.exit_code,
        signal=outcome.signal,
        oom_kill_record=bool(oom and oom.proven),
        oom_kill_line=oom.kernel_line if oom else None,
    )
    d = diagnose(*texts, exit_info=exit_info, names=names)
    if hide:
        d = dataclasses.replace(d, causes=tuple(c for c in d.causes if c.id not in hide))
    return d


def hidden_causes(config: BenchConfig) -> frozenset[str]:
    """Causes that describe a choice the user made for this run, not a fault: a run on the
    CPU hides the GPU on purpose (TF then logs that no CUDA device is there)."""
    return frozenset({"no_gpu_visible"}) if config.device == "cpu" else frozenset()


def _final_status(worker_outcome: Outcome, rr: RunRecord) -> Outcome:
    """The run's status from the worker's end and what the run reported."""
    o = worker_outcome
    if o.status != "completed":
        if o.status == "exception" and rr.error:
            o.exception = {
                "type": rr.error.get("exc_type"),
                "message": rr.error.get("message"),
                "traceback": rr.error.get("traceback"),
            }
        return o
    if rr.status == "oom":
        o.status = "oom_recovered"
        msg = str((rr.oom or {}).get("message") or "").splitlines()
        o.detail = "TensorFlow raised ResourceExhaustedError" + (f": {msg[0][:300]}" if msg else "")
    elif rr.status == "error":
        o.status = "exception"
        err = rr.error or {}
        o.exception = {
            "type": err.get("exc_type"),
            "message": err.get("message"),
            "traceback": err.get("traceback"),
        }
        o.detail = f"{err.get('exc_type')}: {str(err.get('message') or '')[:300]}"
    elif rr.status != "completed":
        o.status = "exception"
        o.detail = f"the run ended without a result ({rr.status})"
    else:
        o.detail = "the run finished"
    return o


def run_bench(
    target: Target,
    config: BenchConfig,
    options: SupervisorOptions | None = None,
    *,
    events: EventBuffer[tuple[str, Any]] | None = None,
    cancel: threading.Event | None = None,
    timeline: Timeline | None = None,
) -> BenchResult:
    """One supervised benchmark run, start to end. Never raises for what the worker does.

    Raises:
        targetrun.TargetError: the interpreter is not a usable Python.
        ConfigError: a bad config value.
    """
    targetrun.python_version(target.python)
    sup = Supervisor(target, config, options, events=events, cancel=cancel, timeline=timeline)
    sup.emit("status", f"starting {config.describe()}")
    try:
        rr = sup.run(config)
        outcome = sup.end_worker()
    finally:
        sup.close()
    assert outcome is not None
    outcome = _final_status(outcome, rr)
    result = _result(sup, config, outcome, rr)
    sup.emit("done", result)
    return result


def _result(sup: Supervisor, config: BenchConfig, outcome: Outcome, rr: RunRecord) -> BenchResult:
    output = list(sup.last_output)
    # a run that completed has nothing to explain (start-up notices are not failures)
    diagnosis = (
        Diagnosis()
        if outcome.status == "completed"
        else explain(outcome, output, rr, hide=hidden_causes(config))
    )
    return BenchResult(
        config=config,
        outcome=outcome,
        metrics=_run_metrics(rr, sup),
        diagnosis=diagnosis,
        run_dir=sup.run_dir,
        output_tail=output[-200:],
        info=sup.info,
        knobs=sup.knobs,
    )
