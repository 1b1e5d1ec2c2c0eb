"""Watch the user's own training process (a Jupyter kernel, any PID, or a command it starts)
and, when it dies, say why from what was seen.

An `Observer` samples the process (its RSS with its children's), the machine (RAM, swap, its
memory cgroup), every GPU and every process's VRAM on it, into a `Timeline` that is also
written to a bounded, crash-safe trace. It tails the JSON lines the notebook's first cell
writes (`first_cell`: TensorFlow's memory in use and peak, step times, tracing counts, an OOM's
message). When the process ends it reads how: the exit status of a child; for another
process, its disappearance and the kernel log's OOM-kill and Xid lines for its PID. The
verdict is `diagnose.watch_rules.watched_causes` over the trace and that ending; for a command
the watch started, its output (`Output`: passed on as it comes, and read by the log engine)
is one more source when it failed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import psutil

from tfdoctor.core import telemetry
from tfdoctor.core.bench import evidence, memcg
from tfdoctor.core.diagnose import recent
from tfdoctor.core.diagnose.combine import SOURCE_LOG, SOURCE_WATCH, combine
from tfdoctor.core.diagnose.engine import Diagnoser, ExitInfo, new_diagnoser
from tfdoctor.core.diagnose.reader import iter_chunks
from tfdoctor.core.diagnose.watch_rules import Ending, watched_causes
from tfdoctor.core.model import Cause, Diagnosis
from tfdoctor.core.probes import jupyter, system

log = logging.getLogger(__name__)

TRACE_MAX_BYTES = 64 << 20  # a trace file's bound; the stretch before it is kept as FILE.1
CELL_SOURCE = Path(__file__).resolve().parents[1] / "probes" / "target" / "watch_cell.py"
CELL_PLACEHOLDER = "__TFDOCTOR_WATCH_FILE__"


class WatchError(ValueError):
    """What to watch cannot be watched; the message is one line for people."""


def first_cell(tf_file: str | os.PathLike[str]) -> str:
    """The notebook's first cell (TensorFlow and the standard library only), writing to
    `tf_file`, for the user to copy."""
    return CELL_SOURCE.read_text(encoding="utf-8").replace(CELL_PLACEHOLDER, str(tf_file))


class _Pieces:
    """What one output pipe gave, as a file the log reader reads: a piece at a time, and the
    end of the file either at the pipe's end or once the verdict is due (a process the command
    left behind may hold the pipe open for as long as it lives)."""

    def __init__(self, pieces: queue.Queue[bytes | None], due: threading.Event) -> None:
        self.pieces, self.due = pieces, due

    def read(self, _n: int = -1) -> bytes:
        while True:
            try:
                piece = self.pieces.get(timeout=0.1)
            except queue.Empty:
                if self.due.is_set():
                    return b""
                continue
            return piece if piece is not None else b""


class Output:
    """What a command the watch started prints: passed through unchanged as it comes (a
    progress bar's carriage returns too), and read by the log engine (streaming: a long run's
    output is never held), so the verdict can quote its error. Each pipe is read to its end
    whatever happens, so the command never blocks on a full pipe."""

    PIECE = 64 << 10
    QUEUED = 256  # pieces waiting for the log engine (16 MiB): a faster writer waits for it

    def __init__(self, pipes: Mapping[str, tuple[int, BinaryIO | None]]) -> None:
        self._diagnoser: Diagnoser = new_diagnoser()
        self._lock = threading.Lock()
        self._due = threading.Event()  # the verdict is due: read no more
        self._failed = threading.Event()  # the log engine failed: only pass the output on
        self._readers: list[threading.Thread] = []
        for label, (fd, dest) in pipes.items():
            pieces: queue.Queue[bytes | None] = queue.Queue(self.QUEUED)
            for target, args in ((self._pump, (fd, dest, pieces)), (self._read, (label, pieces))):
                t = threading.Thread(target=target, args=args, name=f"watch-{label}", daemon=True)
                t.start()
                if target == self._read:
                    self._readers.append(t)

    def _pump(self, fd: int, dest: BinaryIO | None, pieces: queue.Queue[bytes | None]) -> None:
        try:
            while data := os.read(fd, self.PIECE):
                if dest is not None:
                    try:
                        dest.write(data)
                        dest.flush()
                    except (OSError, ValueError):
                        dest = None  # the terminal went away: the command still runs
                self._queue(pieces, data)
        except OSError:
            pass
        finally:
            self._queue(pieces, None)
            with contextlib.suppress(OSError):
                os.close(fd)

    def _queue(self, pieces: queue.Queue[bytes | None], data: bytes | None) -> None:
        while not self._due.is_set() and not self._failed.is_set():
            with contextlib.suppress(queue.Full):
                pieces.put(data, timeout=0.1)
                return

    def _read(self, label: str, pieces: queue.Queue[bytes | None]) -> None:
        try:
            for chunk in iter_chunks(_Pieces(pieces, self._due), label):  # type: ignore[arg-type]
                with self._lock:
                    self._diagnoser.feed(chunk)
        except Exception:  # the reading failed: the output still goes through
            log.exception("reading the watched command's %s", label)
            self._failed.set()

    def diagnosis(self, exit_info: ExitInfo | None, wait_s: float = 2.0) -> Diagnosis:
        """The log engine's reading of what was printed: all of it once the pipes close, or,
        after `wait_s`, what came until then."""
        end = time.monotonic() + wait_s
        for t in self._readers:
            t.join(max(0.0, end - time.monotonic()))
        self._due.set()
        for t in self._readers:
            t.join(5.0)
        with self._lock:
            return self._diagnoser.result(exit_info=exit_info)


def start_command(
    command: list[str],
    env: Mapping[str, str],
    *,
    json_mode: bool = False,
    announce: Callable[[], None] | None = None,
) -> tuple[subprocess.Popen[bytes], Output]:
    """Start a command to watch, its output passed through (with `json_mode`, its standard
    output goes to standard error: standard output is the verdict's) and read. `announce` is
    called once it started and before any of its output is passed on.

    Raises:
        OSError: it cannot be started.
    """
    child = subprocess.Popen(command, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    out_fd, err_fd = os.dup(child.stdout.fileno()), os.dup(child.stderr.fileno())
    child.stdout.close()
    child.stderr.close()
    if announce is not None:
        announce()
    err = getattr(sys.stderr, "buffer", None)
    out = err if json_mode else getattr(sys.stdout, "buffer", None)
    return child, Output({"stdout": (out_fd, out), "stderr": (err_fd, err)})


@dataclass
class Watched:
    """The process to watch, and what is known of it."""

    pid: int
    label: str
    kernel_id: str | None = None
    notebook: str | None = None
    child: subprocess.Popen[bytes] | None = None
    output: Output | None = None  # what a command the watch started prints


def resolve(pid: int | None = None, kernel: str | None = None) -> Watched:
    """The process a `--pid` or `--kernel` (an id, its prefix, or a notebook path) names.

    Raises:
        WatchError: no such process or kernel, or several kernels match.
    """
    if pid is not None:
        try:
            proc = psutil.Process(pid)
            name = proc.name()
        except psutil.NoSuchProcess:
            raise WatchError(f"no process {pid}") from None
        except psutil.AccessDenied:
            name = "process"
        for k in jupyter.running_kernels(lookup_servers=False):
            if k["pid"] == pid:
                return Watched(pid, f"Jupyter kernel {k['kernel_id']}", k["kernel_id"])
        return Watched(pid, f"{name} (pid {pid})")
    if not kernel:
        raise WatchError("name a process (--pid) or a Jupyter kernel (--kernel)")
    kernels = jupyter.running_kernels()
    found = [
        k
        for k in kernels
        if (k.get("kernel_id") or "").startswith(kernel)
        or (k.get("notebook_path") or "") == kernel
        or Path(k.get("notebook_path") or "/").name == kernel
    ]
    if not found:
        running = ", ".join(str(k.get("kernel_id"))[:8] for k in kernels) or "none"
        raise WatchError(f"no running Jupyter kernel matches {kernel!r} (running: {running})")
    if len(found) > 1:
        raise WatchError(f"{len(found)} kernels match {kernel!r}: give more of the id")
    k = found[0]
    where = k.get("notebook_path")
    label = f"Jupyter kernel {str(k['kernel_id'])[:8]}" + (f" ({where})" if where else "")
    return Watched(int(k["pid"]), label, k["kernel_id"], where)


RESTART_WORDS = ("restart", "died", "dead")


def jupyter_restarts(
    kernel_id: str, globs: tuple[str, ...] = recent.JUPYTER_LOG_GLOBS
) -> list[str]:
    """The Jupyter server log's lines about this kernel dying or restarting, last three
    ("KernelRestarter: restarting kernel (1/5), keep random ports", "Kernel restarted: ID")."""
    short = kernel_id[:8]
    found: list[str] = []
    for log_file in recent.jupyter_logs(globs):
        for raw in log_file.text.decode("utf-8", "replace").splitlines():
            low = raw.lower()
            if any(w in low for w in RESTART_WORDS) and (short in raw or "KernelRestarter" in raw):
                found.append(raw.strip()[:300])
    return found[-3:]


@dataclass
class WatchResult:
    watched: Watched
    ending: Ending
    causes: list[Cause]
    duration_s: float
    trace: Path | None = None
    items: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.watched.pid,
            "label": self.watched.label,
            "kernel_id": self.watched.kernel_id,
            "notebook": self.watched.notebook,
            "ending": self.ending.to_json(),
            "duration_s": round(self.duration_s, 2),
            "trace": str(self.trace) if self.trace else None,
            "causes": [c.to_json() for c in self.causes],
        }

    @classmethod
    def from_json(
        cls, data: Mapping[str, Any], items: list[tuple[str, dict[str, Any]]] | None = None
    ) -> WatchResult:
        """A watch's result as `to_json` wrote it, with its telemetry `items` (kept apart).

        Raises:
            KeyError, TypeError, ValueError: malformed data.
        """
        trace = data.get("trace")
        watched = Watched(
            int(data["pid"]),
            str(data.get("label") or f"pid {data['pid']}"),
            str(data["kernel_id"]) if data.get("kernel_id") else None,
            str(data["notebook"]) if data.get("notebook") else None,
        )
        return cls(
            watched,
            Ending.from_json(data["ending"]),
            [Cause.from_json(c) for c in data.get("causes") or ()],
            float(data.get("duration_s") or 0.0),
            Path(trace) if trace else None,
            list(items or ()),
        )


def _cgroup_reader(pid: int) -> Any:
    """A reader of `pid`'s memory cgroup: {usage, limit, anon, file} in bytes (None once it
    is gone); None when the process has no memory limit of its own (the machine's RAM is
    then the wall)."""
    found = memcg.cgroup_dir_of(pid)
    if found is None:
        return None
    version, base = found
    v1 = version == 1
    limit_text = _read(base / ("memory.limit_in_bytes" if v1 else "memory.max"))
    if limit_text is None or not limit_text.isdigit():
        return None  # "max": no limit
    limit = int(limit_text)
    if limit >= psutil.virtual_memory().total:
        return None  # v1 writes "no limit" as a huge number
    anon_key, file_key = ("total_rss", "total_cache") if v1 else ("anon", "file")

    def read() -> dict[str, int] | None:
        usage = _read(base / ("memory.usage_in_bytes" if v1 else "memory.current"))
        if usage is None or not usage.isdigit():
            return None
        stat: dict[str, int] = {}
        for row in (_read(base / "memory.stat") or "").splitlines():
            key, _, value = row.partition(" ")
            if key in (anon_key, file_key) and value.isdigit():
                stat["anon" if key == anon_key else "file"] = int(value)
        return {"usage": int(usage), "limit": limit, **stat}

    return read


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def verdict(
    items: list[tuple[str, dict[str, Any]]], pid: int, ending: Ending, said: Diagnosis | None
) -> list[Cause]:
    """The watch's causes from what it saw (`watched_causes`), and, for a command it started
    that failed, from what the command printed (`said`, the log engine's reading), combined."""
    causes = watched_causes(items, pid, ending)
    if said is None or ending.normal or ending.how == "running" or not said.causes:
        return causes
    found = [(SOURCE_WATCH, c) for c in causes] + [(SOURCE_LOG, c) for c in said.causes]
    return [r.cause for r in combine(found)]


class Observer:
    """Watches one process until it ends (or `stop()`), then gives the verdict."""

    def __init__(
        self,
        watched: Watched,
        *,
        record: str | os.PathLike[str] | None = None,
        interval_s: float = 0.25,
        gpu_api: Any = None,
        tf_file: str | os.PathLike[str] | None = None,
        max_trace_bytes: int = TRACE_MAX_BYTES,
    ) -> None:
        self.watched = watched
        try:
            self._proc = psutil.Process(watched.pid)
            self._created = self._proc.create_time()
        except psutil.NoSuchProcess:
            raise WatchError(f"no process {watched.pid}") from None
        self.record = Path(record) if record is not None else None
        writer = None
        if self.record is not None:
            header = {"interval_s": interval_s, "pids": [watched.pid], "watch": watched.label}
            writer = telemetry.TraceWriter(self.record, header, max_bytes=max_trace_bytes)
        self.timeline = telemetry.Timeline(writer=writer)
        self.sampler = telemetry.Sampler(
            self.timeline, interval_s=interval_s, gpu_api=gpu_api, pids=[watched.pid]
        )
        reader = _cgroup_reader(watched.pid)
        self._cgroup_limit: int | None = None
        if reader is not None:
            self.sampler.watch_cgroup(reader)
            first = reader()
            self._cgroup_limit = first.get("limit") if first else None
        self.tf_file = Path(tf_file) if tf_file is not None else None
        self._tf_pos = 0  # what the first cell wrote before this watch is not read
        if self.tf_file is not None:
            with contextlib.suppress(OSError):
                self._tf_pos = self.tf_file.stat().st_size
        self._vmstat0 = evidence.vmstat_oom_kills()
        self._stop = threading.Event()
        self._started = time.monotonic()

    # -- life cycle
    def start(self) -> Observer:
        self.timeline.mark(f"watching {self.watched.label}", "phase")
        if self._cgroup_limit:  # the wall the kernel's OOM killer enforces for it
            item = {"t": self.timeline.now(), "key": "ram_cap", "label": "its cgroup limit"}
            self.timeline.add("limit", {**item, "value": self._cgroup_limit})
        self.sampler.start()
        return self

    def stop(self) -> None:
        """Stop watching (from another thread, or Ctrl-C): the verdict says it still ran."""
        self._stop.set()

    def alive(self) -> bool:
        if self.watched.child is not None:
            return self.watched.child.poll() is None
        try:
            return bool(self._proc.is_running() and self._proc.status() != psutil.STATUS_ZOMBIE)
        except psutil.NoSuchProcess:
            return False

    def poll_tf(self) -> int:
        """Take what the first cell wrote since the last look into the timeline."""
        if self.tf_file is None:
            return 0
        try:
            with self.tf_file.open("rb") as fh:
                fh.seek(self._tf_pos)
                data = fh.read()
        except OSError:
            return 0
        end = data.rfind(b"\n")
        if end < 0:
            return 0
        self._tf_pos += end + 1
        n = 0
        for raw in data[: end + 1].splitlines():
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(rec, dict) or rec.get("pid") not in (None, self.watched.pid):
                continue
            kind = rec.pop("k", None)
            wall = rec.pop("wall", None)
            rec.pop("pid", None)
            if kind not in ("tf", "step", "marker") or not isinstance(wall, (int, float)):
                continue
            rec["t"] = round(wall - self.timeline.wall0, 3)
            if kind == "tf" and isinstance(rec.get("device"), dict):
                rec.update(rec.pop("device"))  # {t, "GPU:0": {current, peak}}, as a run's
            self.timeline.add(kind, rec)
            n += 1
        return n

    def wait(self, on_tick: Any = None, tick_s: float = 1.0) -> WatchResult:
        """Watch until the process ends or `stop()`; `on_tick(latest sample)` each tick."""
        last = 0.0
        while not self._stop.is_set() and self.alive():
            self.poll_tf()
            now = time.monotonic()
            if on_tick is not None and now - last >= tick_s:
                last = now
                on_tick(self.timeline.latest)
            self._stop.wait(min(0.2, tick_s))
        still = self.alive()
        time.sleep(0.3)  # the last samples around the end
        self.poll_tf()
        self.sampler.stop()
        ending = Ending("running") if still else self._ending()
        if not still:
            self.timeline.mark(f"{self.watched.label}: {ending.words()}", "crash")
        self.timeline.close()
        items = [item for _, item in self.timeline.since(0)]
        said = None
        if self.watched.output is not None and not still:
            said = self.watched.output.diagnosis(
                ExitInfo(
                    ending.exit_code,
                    ending.signal,
                    oom_kill_record=ending.oom_kill_line is not None,
                    oom_kill_line=ending.oom_kill_line,
                )
            )
        causes = verdict(items, self.watched.pid, ending, said)
        return WatchResult(
            self.watched, ending, causes, time.monotonic() - self._started, self.record, items
        )

    def _ending(self) -> Ending:
        child = self.watched.child
        if child is not None:
            code = child.wait()
            sig = None
            if code < 0:
                with contextlib.suppress(ValueError):
                    sig = signal.Signals(-code).name
            ending = Ending("exited", code, sig)
        else:
            ending = Ending("vanished")
        ev = evidence.collect(self.watched.pid, self._vmstat0, None, None, None)
        ending.oom_kill_line = ev.kernel_line
        if ev.kernel_line and ending.signal is None:
            ending.signal = "SIGKILL"
        if self.watched.kernel_id:
            ending.restart_lines = jupyter_restarts(self.watched.kernel_id)
        klog = system.read_kernel_log(timeout_s=5.0)
        if klog.readable:
            ending.xid_lines = [
                str(r.get("line"))
                for r in system.parse_xid_errors(klog.lines)
                if r.get("pid") == self.watched.pid
            ]
        return ending
