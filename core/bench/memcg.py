"""Run a process in its own memory cgroup: a RAM cap that the kernel enforces.

A training run that exhausts host RAM freezes a desktop for minutes before the kernel's OOM
killer picks a victim, and the victim may be the browser. Inside a memory cgroup the same
run is killed as soon as it reaches the cap, the kernel logs why ("Memory cgroup out of
memory: Killed process N"), and the cgroup counts it (`oom_kill`). The benchmark uses this to
reproduce and prove a host OOM safely; the tests use it to get real OOM kills.

Needs write access to a memory cgroup hierarchy (root, or a delegated systemd user slice on
cgroup v2). `unavailable()` says in one line why not, where not.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import shlex
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import psutil

from tfdoctor.core.experiments import CGROUP_PREFIX
from tfdoctor.core.probes.system import mount_for, parse_proc_cgroup

log = logging.getLogger(__name__)

PREFIX = CGROUP_PREFIX  # the kernel log names these: their kills are our own experiments
_counter = itertools.count()


class MemcgError(Exception):
    """A memory cgroup could not be made or used; the message is one line for people."""


def _hierarchy() -> tuple[int, Path]:
    """(cgroup version, directory under which our cgroups go)."""
    v1 = mount_for(Path("/proc"), Path("/sys"), "cgroup", "memory")
    if v1 is not None:
        return 1, v1[0]
    v2 = mount_for(Path("/proc"), Path("/sys"), "cgroup2", None)
    if v2 is not None:
        mount = v2[0]
        # our own cgroup on v2: children of it may use the controllers it delegates
        own = ""
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                if line.startswith("0::"):
                    own = line[3:].strip("/")
        except OSError:
            pass
        base = mount / own if own and (mount / own).is_dir() else mount
        return 2, base
    raise MemcgError("no memory cgroup hierarchy is mounted")


_STALE = re.compile(rf"^{re.escape(PREFIX)}(\d+)-\d+$")


def sweep_stale(base: Path | None = None) -> list[Path]:
    """Remove the memory cgroups a tfdoctor that no longer runs left behind (it was killed
    with kill -9, or the machine lost power mid-run): their processes, orphaned workers, are
    killed first. A cgroup whose owner still runs is left alone. Returns what was removed."""
    if base is None:
        try:
            _, base = _hierarchy()
        except MemcgError:
            return []
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    for path in entries:
        m = _STALE.match(path.name)
        if m is None or not path.is_dir() or psutil.pid_exists(int(m.group(1))):
            continue
        try:
            pids = [int(x) for x in (path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        cg = MemoryCgroup.__new__(MemoryCgroup)
        cg.path = path
        cg.close(wait_s=2.0 if pids else 0.0)
        if not path.exists():
            removed.append(path)
            log.info("removed the stale memory cgroup %s (%d orphaned processes)", path, len(pids))
    return removed


def unavailable() -> str | None:
    """None when memory cgroups can be made here, else the reason in one line."""
    try:
        with MemoryCgroup(64 << 20):
            return None
    except MemcgError as exc:
        return str(exc)


class MemoryCgroup:
    """A fresh memory cgroup with a limit; removed on close (after its processes exit).

    Usage::

        with MemoryCgroup(2 << 30) as cg:
            proc = subprocess.Popen(cg.wrap(["python", "train.py"]))
            proc.wait()
            killed = cg.oom_kills() > 0
    """

    def __init__(self, limit_bytes: int, name: str | None = None) -> None:
        if limit_bytes < 16 << 20:
            raise MemcgError("a memory limit under 16 MiB would kill any Python at start")
        self.limit_bytes = limit_bytes
        self.version, base = _hierarchy()
        sweep_stale(base)  # what a killed tfdoctor left behind
        leaf = name or f"{PREFIX}{os.getpid()}-{next(_counter)}"
        self.path = base / leaf
        try:
            self.path.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            raise MemcgError(
                f"cannot create memory cgroup {self.path}: {exc.strerror or exc}"
            ) from None
        try:
            self._set_limit()
        except OSError as exc:
            self.close()
            raise MemcgError(
                f"cannot set a memory limit in {self.path}: {exc.strerror or exc}"
            ) from None

    def _set_limit(self) -> None:
        limit = str(self.limit_bytes)
        if self.version == 1:
            (self.path / "memory.limit_in_bytes").write_text(limit)
            swap = self.path / "memory.memsw.limit_in_bytes"
            if swap.exists():  # no swapping past the cap: the kill comes at the cap
                swap.write_text(limit)
            return
        if not (self.path / "memory.max").exists():
            raise OSError(0, "the memory controller is not delegated to this cgroup")
        (self.path / "memory.max").write_text(limit)
        swap = self.path / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this cgroup: a shell moves itself in, then execs the command
        (same PID, so the kernel's OOM record names the process the caller started)."""
        procs = shlex.quote(str(self.path / "cgroup.procs"))
        return ["/bin/sh", "-c", f'echo $$ > {procs} && exec "$@"', "tfdoctor-memcg", *argv]

    def oom_kills(self) -> int | None:
        """Processes the kernel OOM-killed in this cgroup so far; None when not readable."""
        return oom_kill_count(self.version, self.path)

    def usage(self) -> dict[str, int] | None:
        """What the cgroup's limit is decided on, now: {usage, anon, file} in bytes (anonymous
        memory and file pages: shared libraries and page cache count against a cap but are
        only partly in a process's RSS); None once the cgroup is gone."""
        v1 = self.version == 1
        try:
            usage = int(
                (self.path / ("memory.usage_in_bytes" if v1 else "memory.current"))
                .read_text()
                .strip()
            )
            stat = dict(
                (k, int(v))
                for k, _, v in (
                    ln.partition(" ") for ln in (self.path / "memory.stat").read_text().splitlines()
                )
                if v.strip().isdigit()
            )
        except (OSError, ValueError):
            return None
        anon = stat.get("total_rss" if v1 else "anon", 0)
        file = stat.get("total_cache" if v1 else "file", 0)
        return {"usage": usage, "anon": anon, "file": file}

    def peak_bytes(self) -> int | None:
        """The most memory the cgroup used (v1 max_usage_in_bytes, v2 memory.peak)."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text().strip())
        except (OSError, ValueError):
            return None

    def close(self, wait_s: float = 5.0) -> None:
        """Remove the cgroup; waits a little for exiting processes to leave it."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # still busy: left for the kernel to hold; harmless and empty later
                time.sleep(0.05)

    def __enter__(self) -> MemoryCgroup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def cgroup_dir_of(pid: int) -> tuple[int, Path] | None:
    """(version, directory) of the memory cgroup a process sits in; None when unknown."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    rows = parse_proc_cgroup(text)
    v1 = next((r for r in rows if "memory" in r[1]), None)
    if v1 is not None:
        mount = mount_for(Path("/proc"), Path("/sys"), "cgroup", "memory")
        version, rel = 1, v1[2]
    else:
        v2 = next((r for r in rows if r[0] == "0" and not r[1]), None)
        if v2 is None:
            return None
        mount = mount_for(Path("/proc"), Path("/sys"), "cgroup2", None)
        version, rel = 2, v2[2]
    if mount is None:
        return None
    base, root = mount
    if root not in ("", "/") and (rel == root or rel.startswith(root + "/")):
        rel = rel[len(root) :]
    path = base / rel.strip("/") if rel.strip("/") else base
    return (version, path) if path.is_dir() else None


def oom_kill_count(version: int, path: Path) -> int | None:
    """The kernel's count of OOM kills in a memory cgroup (None when not readable)."""
    name = "memory.oom_control" if version == 1 else "memory.events"
    try:
        text = (path / name).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None
