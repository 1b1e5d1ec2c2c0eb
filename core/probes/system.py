"""System probe: OS, WSL/container, CPU, RAM/swap, memory cgroup limit, OOM evidence, kernel log."""

from __future__ import annotations

import errno
import logging
import os
import platform
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfdoctor.core import experiments
from tfdoctor.core.knowledge import signatures
from tfdoctor.core.model import Fact, FactValue, ProbeResult, ProbeStatus

log = logging.getLogger(__name__)

PROBE = "system"
MIB = 1024 * 1024
KERNEL_LOG_TIMEOUT_S = 2.0
MAX_RECORDS = 50
# cgroup v1 reports "no limit" as PAGE_COUNTER_MAX * PAGE_SIZE (0x7FFFFFFFFFFFF000 on 4 KiB
# pages, a little less on 64 KiB pages). Anything this large is no limit at all.
V1_UNLIMITED_BYTES = 1 << 62
# Reading /dev/kmsg is bounded so that a huge ring buffer cannot stall the probe.
KMSG_MAX_RECORDS = 200_000


# --------------------------------------------------------------------------------------------
# Subprocess helper (also used by core/probes/cudalibs.py)


@dataclass(frozen=True)
class CmdResult:
    """What one short command produced. A command that could not run is a value, not an error."""

    returncode: int | None  # None: it did not run to completion (missing, timed out, refused)
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str = ""  # why it did not run, in one line

    @property
    def ok(self) -> bool:
        return self.returncode == 0


RunFn = Callable[[Sequence[str], float], CmdResult]


def run_command(argv: Sequence[str], timeout_s: float) -> CmdResult:
    """Run a short command with a hard timeout and capture its text output.

    Never raises: a missing program, a permission problem or a timeout come back as a
    :class:`CmdResult` with ``returncode=None`` and ``error`` set.

    Args:
        argv: the program and its arguments.
        timeout_s: seconds before the command is killed.

    Returns:
        The exit code and decoded stdout/stderr (undecodable bytes replaced).

    Raises:
        Nothing: a missing program, no permission or a hang are reported in the result.
    """
    try:
        proc = subprocess.run(
            list(argv),
            capture_output=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return CmdResult(None, timed_out=True, error=f"{argv[0]} did not finish in {timeout_s} s")
    except OSError as exc:  # not found, not executable, exec format error
        return CmdResult(None, error=f"{argv[0]}: {exc.strerror or exc}")
    return CmdResult(
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def _read_text(path: Path, limit: int = 4 * MIB) -> str | None:
    """The file's text, or None when it is missing or unreadable (never raises)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


# --------------------------------------------------------------------------------------------
# Pure parsers


def parse_os_release(text: str) -> dict[str, str]:
    """Parse os-release(5) text into a dict, unquoting values."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key.strip()] = value
    return out


def detect_wsl(proc_version: str | None, osrelease: str | None) -> tuple[bool, int | None]:
    """Tell WSL from /proc/version and /proc/sys/kernel/osrelease text.

    WSL1 kernels read like ``4.4.0-19041-Microsoft``; WSL2 kernels like
    ``5.15.133.1-microsoft-standard-WSL2``.

    Returns:
        (is_wsl, 1 or 2, or None when not WSL).
    """
    text = " ".join(t for t in (proc_version, osrelease) if t)
    if "microsoft" not in text.lower():
        return False, None
    if "WSL2" in text or "-microsoft-standard" in text.lower():
        return True, 2
    return True, 1


def parse_cpuinfo(text: str) -> tuple[str | None, set[str], int]:
    """Return (model name, flags of the first CPU, number of `processor` entries)."""
    model: str | None = None
    flags: set[str] = set()
    count = 0
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "processor":
            count += 1
        elif key in ("model name", "Model", "cpu model") and model is None:
            model = value.strip() or None
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return model, flags, count


def parse_meminfo(text: str) -> dict[str, int]:
    """Parse /proc/meminfo into field -> kB."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        if sep and parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0])
    return out


def parse_proc_cgroup(text: str) -> list[tuple[str, list[str], str]]:
    """Parse /proc/<pid>/cgroup into (hierarchy id, controllers, path) rows."""
    rows: list[tuple[str, list[str], str]] = []
    for line in text.splitlines():
        parts = line.strip().split(":", 2)
        if len(parts) != 3:
            continue
        hid, controllers, path = parts
        rows.append((hid, [c for c in controllers.split(",") if c], path))
    return rows


_ISO_PREFIX = re.compile(
    r"^\[?(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:[+-]\d{2}:?\d{2}|Z)?)"
)
_MEMCG = "CONSTRAINT_MEMCG"
# The kernel-log records (OOM kills, Xid errors) are the named parts of the diagnosis
# signatures kernel_oom_kill and xid (knowledge/signatures.toml): one description of each line.


def _line_time(line: str) -> str | None:
    m = _ISO_PREFIX.match(line)
    return m.group(1) if m else None


def parse_oom_kills(lines: Iterable[str], limit: int = MAX_RECORDS) -> list[dict[str, Any]]:
    """Find OOM kills in kernel-log (or journal) lines.

    Understands the kernel's ``Out of memory: Killed process 1234 (python3) total-vm:...``,
    ``Memory cgroup out of memory: Killed process ...``, the bare ``Killed process ...`` of old
    kernels, the ``oom-kill:constraint=...,task_memcg=...,task=python3,pid=1234,uid=0`` summary
    (merged with its ``Killed process`` line), and systemd-oomd's
    ``Killed /user.slice/... due to memory pressure for ...``.

    Args:
        lines: log lines in order, oldest first; any prefix (timestamps, host) is allowed.
        limit: keep only the most recent records.

    Returns:
        Records, most recent last: ``{pid, process, line, kind, cgroup?, time?, rss_kib?}``
        (rss_kib: the process's anonymous memory when killed) where kind is
        ``global`` (whole machine out of memory), ``cgroup`` (a memory cgroup limit was hit),
        ``systemd-oomd`` (killed by the userspace OOM daemon) or ``kernel`` (not stated).
    """
    parts = signatures.signature("kernel_oom_kill").parts
    records: list[dict[str, Any]] = []
    open_by_pid: dict[int, dict[str, Any]] = {}  # oom-kill summaries awaiting their Killed line
    announced_kind: str | None = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        if "oom-kill:" in line:
            m = parts["summary"].search(line)
            if m:
                fields: dict[str, str] = {}
                for item in m.group("fields").split(","):
                    key, _, value = item.partition("=")
                    fields[key] = value
                pid_text = fields.get("pid", "")
                rec: dict[str, Any] = {
                    "pid": int(pid_text) if pid_text.isdigit() else None,
                    "process": fields.get("task") or None,
                    "line": line,
                    "kind": "cgroup"
                    if fields.get("constraint") == "CONSTRAINT_MEMCG"
                    else "global",
                }
                cgroup = fields.get("task_memcg") or fields.get("oom_memcg")
                if cgroup:
                    rec["cgroup"] = cgroup
                t = _line_time(line)
                if t:
                    rec["time"] = t
                records.append(rec)
                if rec["pid"] is not None:
                    open_by_pid[rec["pid"]] = rec
                continue
        if "Kill process " in line:
            a = parts["announce"].search(line)  # old kernels name the victim first
            if a:
                announced_kind = "cgroup" if a.group("memcg").startswith("Memory") else "global"
                continue
        if "Killed process " in line:
            m2 = parts["killed"].search(line)
            if m2:
                pid = int(m2.group("pid"))
                prefix = m2.group("prefix") or ""
                if prefix.startswith("Memory cgroup"):
                    kind = "cgroup"
                elif prefix.startswith("Out of memory"):
                    kind = "global"
                else:
                    kind = announced_kind or "kernel"
                announced_kind = None
                pending = open_by_pid.pop(pid, None)
                rss = m2.group("rss_kb")
                if pending is not None:
                    # The summary line came first; the Killed line is the one people recognise.
                    pending["line"] = line
                    pending["process"] = m2.group("name")
                    if pending["kind"] != "cgroup":
                        pending["kind"] = kind
                    if rss:
                        pending["rss_kib"] = int(rss)
                    continue
                rec = {"pid": pid, "process": m2.group("name"), "line": line, "kind": kind}
                if rss:
                    rec["rss_kib"] = int(rss)
                t = _line_time(line)
                if t:
                    rec["time"] = t
                records.append(rec)
                continue
        if "due to memory pressure" in line:
            m3 = parts["oomd"].search(line)
            if m3:
                cg = m3.group("cgroup")
                rec = {
                    "pid": None,
                    "process": cg.rstrip("/").rsplit("/", 1)[-1] or None,
                    "line": line,
                    "kind": "systemd-oomd",
                    "cgroup": cg,
                }
                t = _line_time(line)
                if t:
                    rec["time"] = t
                records.append(rec)
    return records[-limit:] if limit > 0 else records


def parse_xid_errors(lines: Iterable[str], limit: int = MAX_RECORDS) -> list[dict[str, Any]]:
    """Find NVIDIA Xid records in kernel-log lines.

    Understands ``NVRM: Xid (PCI:0000:01:00): 79, pid=1234, name=python3, GPU has fallen off the
    bus.``, the ``pid='<unknown>', name=<unknown>`` form, and older lines without pid/name.

    Args:
        lines: log lines in order, oldest first.
        limit: keep only the most recent records (Xid 13 storms print hundreds of lines).

    Returns:
        Records, most recent last: ``{xid, pci, pid, line, process?, time?}``; pid is None when
        the driver did not say.
    """
    record = signatures.signature("xid").parts["record"]
    records: list[dict[str, Any]] = []
    for raw in lines:
        if "Xid" not in raw:
            continue
        m = record.search(raw)
        if not m:
            continue
        line = raw.rstrip("\r\n")
        pid_text = m.group("pid") or ""
        rec: dict[str, Any] = {
            "xid": int(m.group("xid")),
            "pci": m.group("pci").lower(),
            "pid": int(pid_text) if pid_text.isdigit() else None,
            "line": line,
        }
        name = (m.group("name") or "").strip()
        if name and name != "<unknown>":
            rec["process"] = name
        t = _line_time(line)
        if t:
            rec["time"] = t
        records.append(rec)
    return records[-limit:] if limit > 0 else records


# --------------------------------------------------------------------------------------------
# Memory cgroup


@dataclass(frozen=True)
class CgroupMemory:
    """Where a process sits in the memory cgroup tree and the tightest limit above it."""

    version: int | None  # 1 or 2; None when /proc/<pid>/cgroup could not be read
    path: str | None  # memory cgroup path as /proc/<pid>/cgroup names it
    limit_mib: int | None  # tightest limit on the way to the root; None = unlimited or unknown
    limit_known: bool  # True when at least one limit file was read
    limit_file: str | None = None  # the file that holds the binding limit


def mount_for(
    proc_root: Path, sys_root: Path, fstype: str, option: str | None
) -> tuple[Path, str] | None:
    """(mount point rebased onto sys_root, cgroup root of the mount) from our mountinfo."""
    text = _read_text(proc_root / "self" / "mountinfo")
    if text is None:
        return None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 3 or rf[0] != fstype:
            continue
        if option is not None and option not in rf[2].split(","):
            continue
        root, mount_point = lf[3], lf[4]
        if mount_point.startswith("/sys/"):
            return sys_root / mount_point[len("/sys/") :], root
        if sys_root == Path("/sys"):
            return Path(mount_point), root
    return None


def _walk_limits(
    mount_dir: Path,
    mount_root: str,
    cg_path: str,
    filename: str,
    parse: Callable[[str], int | None],
) -> tuple[bool, int | None, str | None]:
    """Read `filename` from the cgroup dir up to the mount root; keep the smallest limit."""
    rel = cg_path
    if mount_root not in ("", "/") and (rel == mount_root or rel.startswith(mount_root + "/")):
        rel = rel[len(mount_root) :]
    leaf = mount_dir / rel.strip("/") if rel.strip("/") else mount_dir
    if not leaf.is_dir():
        # The path is from another cgroup namespace view (a container without cgroupns):
        # the mount root is then the process's own cgroup, the best we can read.
        log.debug("cgroup dir %s not found; reading the mount root %s", leaf, mount_dir)
        leaf = mount_dir
    known = False
    best: int | None = None
    best_file: str | None = None
    d = leaf
    while True:
        text = _read_text(d / filename)
        if text is not None:
            if not known:
                best_file = str(d / filename)  # where "unlimited" was read, until a limit shows
            known = True
            value = parse(text.strip())
            if value is not None and (best is None or value < best):
                best, best_file = value, str(d / filename)
        if d == mount_dir or mount_dir not in d.parents:
            break
        d = d.parent
    return known, best, best_file


def _parse_v1_limit(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= V1_UNLIMITED_BYTES or value < 0 else value


def _parse_v2_limit(text: str) -> int | None:
    if text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def cgroup_memory(
    pid: int | None = None,
    *,
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
) -> CgroupMemory:
    """Find the memory cgroup of a process and the tightest memory limit above it.

    Supports cgroup v2 (``memory.max``, ``max`` = unlimited) and v1 (the ``memory`` controller's
    ``memory.limit_in_bytes``, the huge sentinel = unlimited), walking up to the root because a
    parent's limit binds its children. Never raises; unreadable files leave ``limit_known``
    False.

    Args:
        pid: the process; default this one.
        proc_root: where /proc is (tests point it at a fake tree).
        sys_root: where /sys is.

    Returns:
        The cgroup version, path and limit in MiB (None = unlimited, or unknown when
        ``limit_known`` is False).

    Raises:
        Nothing: a vanished process, a missing /sys/fs/cgroup or unreadable limit files
        (another mount namespace, no permission) come back as unknown fields.
    """
    text = _read_text(proc_root / str(pid if pid is not None else "self") / "cgroup")
    if text is None:
        return CgroupMemory(None, None, None, False)
    rows = parse_proc_cgroup(text)
    v1 = next((r for r in rows if "memory" in r[1]), None)
    if v1 is not None:
        cg_path = v1[2]
        mount = mount_for(proc_root, sys_root, "cgroup", "memory") or (
            sys_root / "fs" / "cgroup" / "memory",
            "/",
        )
        known, limit, where = _walk_limits(
            mount[0], mount[1], cg_path, "memory.limit_in_bytes", _parse_v1_limit
        )
        return CgroupMemory(1, cg_path, None if limit is None else limit // MIB, known, where)
    v2 = next((r for r in rows if r[0] == "0" and not r[1]), None)
    if v2 is None:
        return CgroupMemory(None, None, None, False)
    cg_path = v2[2]
    mount = mount_for(proc_root, sys_root, "cgroup2", None) or (sys_root / "fs" / "cgroup", "/")
    known, limit, where = _walk_limits(mount[0], mount[1], cg_path, "memory.max", _parse_v2_limit)
    if not known and (mount[0] / "cgroup.controllers").is_file():
        # No memory.max anywhere on the way up: the memory controller is not enabled for this
        # subtree (or only the root, which never has memory.max), so nothing limits it.
        controllers = _read_text(mount[0] / "cgroup.controllers") or ""
        known = True
        log.debug("no memory.max above %s (root controllers: %s)", cg_path, controllers.strip())
    return CgroupMemory(2, cg_path, None if limit is None else limit // MIB, known, where)


def cgroup_memory_limit_mib(
    pid: int | None = None,
    *,
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
) -> int | None:
    """The tightest memory cgroup limit of a process in MiB, None when unlimited or unknown.

    Use :func:`cgroup_memory` to tell "unlimited" from "could not read".

    Args:
        pid: the process; default this one.
        proc_root: where /proc is.
        sys_root: where /sys is.

    Returns:
        The limit in MiB (rounded down), or None.

    Raises:
        Nothing: see :func:`cgroup_memory`.
    """
    return cgroup_memory(pid, proc_root=proc_root, sys_root=sys_root).limit_mib


# --------------------------------------------------------------------------------------------
# Kernel log


@dataclass(frozen=True)
class KernelLog:
    """The kernel log as read, or why it could not be read."""

    readable: bool
    source: str | None  # dmesg | journalctl | /dev/kmsg
    lines: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def _read_kmsg(path: Path) -> tuple[list[str] | None, str]:
    """Records of /dev/kmsg without blocking: (message lines or None, problem)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except PermissionError as exc:
        return None, f"{path}: {exc.strerror}"
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    out: list[str] = []
    try:
        buf = b""
        for _ in range(KMSG_MAX_RECORDS):
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break  # end of the ring buffer
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # records were overwritten while we read: skip ahead
                if exc.errno in (errno.EPERM, errno.EACCES):
                    return None, f"{path}: {exc.strerror}"
                break
            if not chunk:
                break  # a plain file (tests) ends here
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for rec in complete:
                text = rec.decode("utf-8", "replace")
                if not text or text.startswith(" "):
                    continue  # continuation lines carry key=value dictionaries
                _, _, message = text.partition(";")
                out.append(message)
        if buf and not buf.startswith(b" "):
            out.append(buf.decode("utf-8", "replace").partition(";")[2])
    finally:
        os.close(fd)
    return out, ""


def _why(res: CmdResult) -> str:
    """One line saying why a command failed."""
    if res.error:
        return res.error
    err = res.stderr.strip().splitlines()
    return err[-1] if err else f"exit status {res.returncode}"


def read_kernel_log(
    run: RunFn = run_command,
    kmsg_path: Path = Path("/dev/kmsg"),
    timeout_s: float = KERNEL_LOG_TIMEOUT_S,
) -> KernelLog:
    """Read the kernel log: dmesg, then journalctl -k, then /dev/kmsg.

    Never raises; a refusal (``dmesg_restrict``, not root) comes back with ``readable=False``
    and the reasons in ``problems``.

    Args:
        run: runs a command (injectable for tests).
        kmsg_path: the kmsg device.
        timeout_s: per-command timeout.

    Returns:
        The lines and which source gave them.

    Raises:
        Nothing: ``kernel.dmesg_restrict=1`` without root, no journal, or no /dev/kmsg access
        give ``readable=False`` with the reasons.
    """
    problems: list[str] = []
    res = run(["dmesg", "--time-format", "iso"], timeout_s)
    if not res.ok and res.returncode is not None and "Operation not permitted" not in res.stderr:
        # busybox and old util-linux have no --time-format
        res = run(["dmesg"], timeout_s)
    if res.ok:
        return KernelLog(True, "dmesg", tuple(res.stdout.splitlines()))
    problems.append("dmesg: " + _why(res))

    res = run(["journalctl", "-k", "-b", "--no-pager", "-n", "5000", "-o", "short-iso"], timeout_s)
    if res.ok:
        lines = [ln for ln in res.stdout.splitlines() if ln.strip() and not ln.startswith("-- ")]
        if lines:
            return KernelLog(True, "journalctl", tuple(lines), tuple(problems))
        problems.append("journalctl: no kernel messages visible")
    else:
        problems.append("journalctl: " + _why(res))

    kmsg, problem = _read_kmsg(kmsg_path)
    if kmsg is not None:
        return KernelLog(True, str(kmsg_path), tuple(kmsg), tuple(problems))
    problems.append(problem)
    return KernelLog(False, None, (), tuple(problems))


# --------------------------------------------------------------------------------------------
# The probe


# File systems a container engine does not give a container as its root when mounted whole
# from a block device (overlay, a bind-mounted folder, or /dev/mapper/docker-* is what it gives).
_DISK_ROOT_FS = frozenset({"ext2", "ext3", "ext4", "xfs"})


def _root_is_a_whole_disk(proc_root: Path) -> bool:
    """Whether / is a whole disk's file system (`/dev/vda` as ext4), not a container's root.

    A VM booted from an image built as a container keeps `/.dockerenv` (seen on a Firecracker
    H100 machine: `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,...`), so that file alone
    does not make a container. Unknown (no mountinfo) counts as no.
    """
    text = _read_text(proc_root / "self" / "mountinfo") or ""
    found = False
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 2 or fields[4] != "/":
            continue
        fstype, source = rest[0], rest[1]
        # the last mount on / is the one in effect; its root must be the disk's own root
        found = (
            fields[3] == "/"
            and fstype in _DISK_ROOT_FS
            and source.startswith("/dev/")
            and not source.startswith("/dev/mapper/docker")
        )
    return found


def detect_container(
    *,
    root: Path = Path("/"),
    proc_root: Path = Path("/proc"),
    env: Mapping[str, str] | None = None,
) -> str:
    """Name the container runtime we run in: docker, podman, kubernetes, lxc, container or none."""
    environ = os.environ if env is None else env
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if (root / "run" / ".containerenv").exists():
        return "podman"
    init_cgroup = _read_text(proc_root / "1" / "cgroup") or ""
    if "kubepods" in init_cgroup:
        return "kubernetes"
    if "docker" in init_cgroup:
        return "docker"
    if (root / ".dockerenv").exists() and not _root_is_a_whole_disk(proc_root):
        return "docker"
    init_env = _read_text(proc_root / "1" / "environ") or ""
    for item in init_env.split("\0"):
        if item.startswith("container="):
            kind = item.partition("=")[2]
            if kind in ("lxc", "docker", "podman"):
                return kind
            return "container" if kind else "none"
    if "/lxc/" in init_cgroup or "lxc.payload" in init_cgroup:
        return "lxc"
    return "none"


def _oomd_active(proc_root: Path, root: Path) -> bool | None:
    if (root / "run" / "systemd" / "units" / "invocation:systemd-oomd.service").exists():
        return True
    try:
        entries = list(proc_root.iterdir())
    except OSError:
        return None
    for entry in entries:
        if entry.name.isdigit() and (_read_text(entry / "comm") or "").strip() == "systemd-oomd":
            return True
    return False


def collect(
    pid: int | None = None,
    *,
    proc_root: Path = Path("/proc"),
    sys_root: Path = Path("/sys"),
    etc_root: Path = Path("/etc"),
    root: Path = Path("/"),
    env: Mapping[str, str] | None = None,
    run: RunFn = run_command,
    kmsg_path: Path = Path("/dev/kmsg"),
    kernel_log: bool = True,
) -> ProbeResult:
    """Collect system facts: OS, WSL/container, CPU, memory, cgroup limit, OOM evidence.

    Never raises for absent things: what cannot be read is left out (unknown).

    Args:
        pid: the process whose memory cgroup to report; default this one.
        proc_root: where /proc is (tests point these roots at fake trees).
        sys_root: where /sys is.
        etc_root: where /etc is (os-release).
        root: the filesystem root (/.dockerenv, /run/.containerenv, /run/systemd).
        env: environment to judge (kubernetes); default os.environ.
        run: runs a command with a timeout (dmesg, journalctl).
        kmsg_path: the kmsg device, last resort for the kernel log.
        kernel_log: read the kernel log at all.

    Returns:
        A ProbeResult named ``system``; status OK, with the message naming what could not be
        read.

    Raises:
        Nothing: an unexpected failure in one section (odd /proc contents) is logged and named
        in the message, and that section's facts are left unknown.
    """
    t0 = time.monotonic()
    facts: list[Fact] = []
    notes: list[str] = []

    def add(name: str, value: FactValue, source: str) -> None:
        facts.append(Fact(name, value, source))

    def section(label: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as exc:  # one broken section must not cost the others
            log.warning("system probe: %s failed", label, exc_info=True)
            notes.append(f"{label}: {exc}")

    def os_facts() -> None:
        add("os.system", platform.system(), "platform")
        release = _read_text(proc_root / "sys" / "kernel" / "osrelease")
        add("os.kernel", release.strip() if release else platform.release(), "kernel")
        osr = _read_text(etc_root / "os-release")
        if osr is None:
            osr = _read_text(root / "usr" / "lib" / "os-release")
        if osr is not None:
            pretty = parse_os_release(osr).get("PRETTY_NAME")
            if pretty:
                add("os.distro", pretty, "os-release")
        version = _read_text(proc_root / "version")
        if version is not None or release is not None:
            is_wsl, wsl_version = detect_wsl(version, release)
            add("os.is_wsl", is_wsl, "/proc/version")
            if is_wsl:
                add("os.wsl_version", wsl_version, "/proc/version")
        add("os.container", detect_container(root=root, proc_root=proc_root, env=env), "runtime")

    def cpu_facts() -> None:
        text = _read_text(proc_root / "cpuinfo")
        count = 0
        if text is not None:
            model, flags, count = parse_cpuinfo(text)
            if model:
                add("cpu.model", model, "/proc/cpuinfo")
            if flags:
                add("cpu.has_avx", "avx" in flags, "/proc/cpuinfo")
                add("cpu.has_avx2", "avx2" in flags, "/proc/cpuinfo")
                add("cpu.has_avx512f", "avx512f" in flags, "/proc/cpuinfo")
        if count:
            add("cpu.count_logical", count, "/proc/cpuinfo")
        elif os.cpu_count():
            add("cpu.count_logical", os.cpu_count(), "os.cpu_count")

    def mem_facts() -> None:
        text = _read_text(proc_root / "meminfo")
        mi = parse_meminfo(text) if text else {}
        if "MemTotal" in mi:
            add("mem.total_mib", mi["MemTotal"] // 1024, "/proc/meminfo")
            if "MemAvailable" in mi:
                add("mem.available_mib", mi["MemAvailable"] // 1024, "/proc/meminfo")
            if "SwapTotal" in mi:
                add("swap.total_mib", mi["SwapTotal"] // 1024, "/proc/meminfo")
                if "SwapFree" in mi:
                    used = mi["SwapTotal"] - mi["SwapFree"]
                    add("swap.used_mib", used // 1024, "/proc/meminfo")
            return
        import psutil  # off Linux /proc/meminfo does not exist; psutil knows the platform

        vm, sw = psutil.virtual_memory(), psutil.swap_memory()
        add("mem.total_mib", vm.total // MIB, "psutil")
        add("mem.available_mib", vm.available // MIB, "psutil")
        add("swap.total_mib", sw.total // MIB, "psutil")
        add("swap.used_mib", sw.used // MIB, "psutil")

    def cgroup_facts() -> None:
        cg = cgroup_memory(pid, proc_root=proc_root, sys_root=sys_root)
        if cg.version is None:
            return
        add("cgroup.version", cg.version, "/proc/<pid>/cgroup")
        add("cgroup.path", cg.path, "/proc/<pid>/cgroup")
        if cg.limit_known:
            add("cgroup.memory_limit_mib", cg.limit_mib, cg.limit_file or "cgroup")
        else:
            notes.append("memory cgroup limit could not be read")

    def oom_facts() -> None:
        text = _read_text(proc_root / "vmstat")
        for line in (text or "").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                add("vmstat.oom_kill", int(value), "/proc/vmstat")
        active = _oomd_active(proc_root, root)
        if active is not None:
            add("oomd.active", active, "processes")

    def kernel_facts() -> None:
        klog = read_kernel_log(run=run, kmsg_path=kmsg_path)
        add("kernel_log.readable", klog.readable, "kernel log")
        if not klog.readable:
            notes.append("kernel log not readable (" + "; ".join(klog.problems) + ")")
            return
        source = klog.source or "?"
        add("kernel_log.source", source, source)
        # tfdoctor's own capped workers (cgroups tfdoctor-*, PIDs in its run records) are
        # kept apart: their kills are experiments, not the user's problem
        theirs, own = experiments.users_kills(parse_oom_kills(klog.lines, limit=0))
        add("kernel_log.oom_kills", theirs[-MAX_RECORDS:], source)
        add("kernel_log.own_oom_kills", own, source)
        add("kernel_log.xid_errors", parse_xid_errors(klog.lines), source)

    section("os", os_facts)
    section("cpu", cpu_facts)
    section("memory", mem_facts)
    section("cgroup", cgroup_facts)
    section("oom", oom_facts)
    if kernel_log:
        section("kernel log", kernel_facts)

    return ProbeResult(
        probe=PROBE,
        status=ProbeStatus.OK,
        facts=tuple(facts),
        message="; ".join(notes),
        duration_s=time.monotonic() - t0,
    )
