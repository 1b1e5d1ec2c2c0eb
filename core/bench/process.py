"""The worker process: its own process group and RAM cap, its pipes, its output kept as evidence."""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import queue
import resource
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tfdoctor.core import experiments, jsonio
from tfdoctor.core.bench import evidence, memcg, procgroup
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.evidence import OomKillEvidence
from tfdoctor.core.model import Target
from tfdoctor.core.probes import targetrun

log = logging.getLogger(__name__)

WORKER_SCRIPT = Path(__file__).resolve().parents[1] / "probes" / "target" / "bench_worker.py"
PROTOCOL = 1
OUTPUT_LINES_KEPT = 4000
OUTPUT_LINE_CHARS = 4000
STDERR_FILE_CAP = 32 << 20
EVENTS_FILE_CAP = 16 << 20


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
        memory_cap_mib: int | None = None,
        on_output: Callable[[str], None] | None = None,
    ) -> None:
        self.target = target
        self.config = config
        self.run_dir = run_dir
        self.memory_cap_mib = memory_cap_mib
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
        self.cg_peak_bytes: int | None = None  # the capped cgroup's highest usage
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
            "--parent-pid",
            str(os.getpid()),
        ]
        preexec: Callable[[], None] | None = None
        if self.memory_cap_mib:
            try:
                self.cgroup = memcg.MemoryCgroup(self.memory_cap_mib << 20)
                argv = self.cgroup.wrap(argv)
                self.cap_note = (
                    f"memory cgroup {self.cgroup.path} capped at {self.memory_cap_mib} MiB"
                )
            except memcg.MemcgError as exc:
                cap = self.memory_cap_mib << 20
                self.cap_note = (
                    f"address-space limit (RLIMIT_AS) of {self.memory_cap_mib} MiB; "
                    f"a memory cgroup was not possible: {exc}"
                )

                def preexec() -> None:
                    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

        env = targetrun.target_environment(self.target)
        env.update(self.config.env())
        env["TMPDIR"] = str(self.run_dir)  # TensorFlow's and XLA's temporary files stay private
        self.vmstat_at_start = evidence.vmstat_oom_kills()
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
        # its OOM kill, if it comes, is ours: the machine's findings must not count it
        cgroup = str(self.cgroup.path) if self.cgroup is not None else None
        experiments.record_worker(self.run_dir, self.proc.pid, cgroup, self.memory_cap_mib)
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

    def join_io(self, timeout_s: float) -> None:
        """Wait (up to `timeout_s`) until the I/O thread has read what the worker wrote."""
        if self._io is not None:
            self._io.join(timeout=timeout_s)

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
            self.cg_peak_bytes = self.cgroup.peak_bytes()
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
            # unbuffered: what the worker printed is on disk even if tfdoctor is killed
            return (self.run_dir / name).open("ab", buffering=0)
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
                rec = jsonio.loads(raw)
            except ValueError:
                log.debug("ignoring a malformed worker record: %r", raw[:200])
                continue
            if isinstance(rec, dict) and rec.get("v") == PROTOCOL:
                self.records.put(rec)

    # -- after the end
    def oom_evidence(self) -> OomKillEvidence:
        return evidence.collect(
            self.pid,
            self.vmstat_at_start,
            self.memcg_at_start,
            self.cg_kills_at_start,
            self.cg_kills_at_end,
        )

    def fault_stack(self) -> str | None:
        try:
            text = self.fault_file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return text[-20000:] if text.strip() else None
