"""Recognise Jupyter kernels among processes and find their notebook server and notebook path."""

from __future__ import annotations

import logging
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tfdoctor.core import jsonio

log = logging.getLogger(__name__)

# A kernel's connection file is named kernel-<id>.json by jupyter_client's MultiKernelManager
# (the one Jupyter Server uses); the id is the kernel id the server's REST API knows.
_KERNEL_FILE_RE = re.compile(r"^kernel-(?P<id>.+)\.json$")
_KERNEL_MODULES = ("ipykernel_launcher", "ipykernel")
_SERVER_NAMES = frozenset(
    {"jupyter-lab", "jupyter-notebook", "jupyter-server", "jupyter_server", "jupyter-nbclassic"}
)
# `python -m <module>` forms of the same servers.
_SERVER_MODULES = frozenset({"jupyterlab", "notebook", "jupyter_server", "nbclassic"})
_SERVER_FILE_PREFIXES = ("jpserver-", "nbserver-")
_LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
_MAX_PARENT_HOPS = 8


@dataclass(frozen=True)
class ProcInfo:
    """What we know about one process; any field may be None when the OS would not tell."""

    pid: int
    name: str | None = None
    username: str | None = None
    cmdline: tuple[str, ...] | None = None
    ppid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "username": self.username,
            "cmdline": None if self.cmdline is None else list(self.cmdline),
            "ppid": self.ppid,
        }

    @classmethod
    def from_json(cls, pid: int, data: Mapping[str, Any]) -> ProcInfo:
        cmd = data.get("cmdline")
        ppid = data.get("ppid")
        return cls(
            pid=pid,
            name=_opt_str(data.get("name")),
            username=_opt_str(data.get("username")),
            cmdline=None if cmd is None else tuple(str(c) for c in cmd),
            ppid=ppid if isinstance(ppid, int) else None,
        )


# pid -> ProcInfo, or None when there is no such process. Live it is psutil; replay injects a
# lookup in a snapshot's process table so the same code names processes without live pids.
ProcessInfoProvider = Callable[[int], "ProcInfo | None"]


def process_info(pid: int) -> ProcInfo | None:
    """Read a process's name, user, command line and parent with psutil.

    Fields the OS refuses (another user's process, hidepid) are None; the pid is kept.

    Args:
        pid: process id.

    Returns:
        The process info, or None when no such process exists (it exited, or it lives in
        another PID namespace, as GPU processes seen from inside a container do).
    """
    try:
        proc = psutil.Process(pid)
        data = proc.as_dict(attrs=["name", "username", "cmdline", "ppid"], ad_value=None)
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    except (psutil.AccessDenied, OSError) as exc:
        log.debug("process %d: %s", pid, exc)
        return ProcInfo(pid=pid)
    return ProcInfo.from_json(pid, data)


@dataclass(frozen=True)
class KernelCommand:
    """A Jupyter kernel recognised from its command line."""

    kernel_id: str | None
    connection_file: str
    python: str | None


def parse_kernel_cmdline(cmdline: Sequence[str] | None) -> KernelCommand | None:
    """Recognise an IPython kernel from its command line.

    Matches ``python -m ipykernel_launcher -f .../kernel-<id>.json`` and the ``ipykernel`` /
    ``-m ipykernel`` / ``--f=...`` variants (VS Code uses the latter).

    Args:
        cmdline: the process's argv.

    Returns:
        The kernel id (from the connection file name; None when the file is not named
        ``kernel-<id>.json``), connection file and interpreter, or None when it is no kernel.
    """
    if not cmdline:
        return None
    args = list(cmdline)
    is_kernel = False
    for i, arg in enumerate(args):
        base = os.path.basename(arg)
        stem = base[:-3] if base.endswith(".py") else base
        if stem in _KERNEL_MODULES or (
            arg == "-m" and i + 1 < len(args) and args[i + 1] in _KERNEL_MODULES
        ):
            is_kernel = True
            break
    if not is_kernel:
        return None
    conn: str | None = None
    for i, arg in enumerate(args):
        if arg in ("-f", "--f", "--connection-file") and i + 1 < len(args):
            conn = args[i + 1]
            break
        for prefix in ("-f=", "--f=", "--connection-file="):
            if arg.startswith(prefix):
                conn = arg[len(prefix) :]
                break
        if conn is not None:
            break
    if conn is None:
        return None
    m = _KERNEL_FILE_RE.match(os.path.basename(conn))
    # argv[0] of a kernel is its interpreter (even when started through a console script).
    return KernelCommand(
        kernel_id=m.group("id") if m else None, connection_file=conn, python=args[0]
    )


@dataclass(frozen=True)
class NotebookServer:
    """A running Jupyter server, from its ``jpserver-<pid>.json`` runtime file."""

    pid: int
    url: str
    info_file: str
    root_dir: str | None = None
    token: str = field(default="", repr=False)


@dataclass(frozen=True)
class KernelLocation:
    """Where a kernel lives: its notebook server's URL and the notebook it runs, when known."""

    notebook_server: str | None = None
    notebook_path: str | None = None


# (kernel pid, kernel id) -> location. Live it is locate_kernel; replay injects a table lookup.
KernelLookup = Callable[[int, "str | None"], KernelLocation]


def runtime_dirs() -> list[Path]:
    """Jupyter's runtime directories for this user (empty when jupyter_core is missing)."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir
    except ImportError:
        return []
    try:
        return [Path(jupyter_runtime_dir())]
    except Exception as exc:  # a broken JUPYTER_* env var must not break a scan
        log.debug("jupyter runtime dir unavailable: %s", exc, exc_info=True)
        return []


def is_server_process(info: ProcInfo) -> bool:
    """True when the process is a Jupyter Lab / Notebook / Server process."""
    names = set()
    if info.name:
        names.add(info.name)
    cmd = info.cmdline or ()
    for arg in cmd[:2]:
        names.add(os.path.basename(arg))
    if names & _SERVER_NAMES:
        return True
    # psutil names are the kernel's 15-character comm; "jupyter-notebook" arrives truncated.
    if info.name and len(info.name) == 15 and any(n.startswith(info.name) for n in _SERVER_NAMES):
        return True
    return any(arg == "-m" and cmd[i + 1] in _SERVER_MODULES for i, arg in enumerate(cmd[:-1]))


def _read_server_file(path: Path) -> NotebookServer | None:
    try:
        data = jsonio.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.debug("unreadable jupyter server file %s: %s", path, exc)
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    pid = data.get("pid")
    root = data.get("root_dir") or data.get("notebook_dir")
    return NotebookServer(
        pid=pid if isinstance(pid, int) else -1,
        url=data["url"],
        info_file=str(path),
        root_dir=root if isinstance(root, str) else None,
        token=str(data.get("token") or ""),
    )


def server_for_pid(server_pid: int, dirs: Iterable[Path] | None = None) -> NotebookServer | None:
    """Find the runtime file a Jupyter server with this pid wrote, and read it.

    Args:
        server_pid: pid of the jupyter-lab / jupyter-notebook / jupyter-server process.
        dirs: runtime directories to look in; Jupyter's own when None.

    Returns:
        The server's URL, root dir and token, or None when no readable file matches (the
        server belongs to another user, or runs with a custom runtime dir).
    """
    for d in runtime_dirs() if dirs is None else dirs:
        for prefix in _SERVER_FILE_PREFIXES:
            server = _read_server_file(Path(d) / f"{prefix}{server_pid}.json")
            if server is not None:
                return server
    return None


def find_notebook_server(
    pid: int,
    *,
    info: ProcessInfoProvider = process_info,
    dirs: Iterable[Path] | None = None,
) -> NotebookServer | None:
    """Walk up a kernel's parent processes to its Jupyter server and read the server's file.

    Args:
        pid: the kernel's pid.
        info: process-info provider (psutil live).
        dirs: runtime directories to look in; Jupyter's own when None.

    Returns:
        The server, or None when no ancestor is a Jupyter server with a readable runtime file
        (a kernel started by VS Code or by hand has none).
    """
    seen: set[int] = set()
    current = info(pid)
    for _ in range(_MAX_PARENT_HOPS):
        if current is None or current.ppid is None or current.ppid in seen or current.ppid <= 1:
            return None
        seen.add(current.ppid)
        parent = info(current.ppid)
        if parent is not None and is_server_process(parent):
            return server_for_pid(parent.pid, dirs)
        current = parent
    return None


def _is_local_url(url: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and (parts.hostname or "") in _LOCAL_HOSTS


def notebook_sessions(server: NotebookServer, *, timeout_s: float = 1.0) -> dict[str, str]:
    """Ask a local Jupyter server which notebook each of its kernels runs.

    Only servers on 127.0.0.1 / localhost are asked: the token must not leave the machine.

    Args:
        server: a server from :func:`server_for_pid`.
        timeout_s: how long to wait for the answer.

    Returns:
        kernel id -> notebook path (relative to the server's root). Empty when the server is
        not local, does not answer in time, refuses the token, or answers something else.
    """
    if not _is_local_url(server.url):
        log.debug("not asking non-local jupyter server %s", server.url)
        return {}
    url = server.url if server.url.endswith("/") else server.url + "/"
    req = urllib.request.Request(url + "api/sessions")
    if server.token:
        req.add_header("Authorization", f"token {server.token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            data = jsonio.loads(resp.read(4 * 1024 * 1024).decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.debug("jupyter server %s did not list sessions: %s", server.url, exc)
        return {}
    out: dict[str, str] = {}
    if not isinstance(data, list):
        return out
    for sess in data:
        if not isinstance(sess, dict):
            continue
        kernel = sess.get("kernel")
        notebook = sess.get("notebook")
        path = sess.get("path")
        if not isinstance(path, str) and isinstance(notebook, dict):
            path = notebook.get("path")
        if isinstance(kernel, dict) and isinstance(kernel.get("id"), str) and isinstance(path, str):
            out[kernel["id"]] = path
    return out


def locate_kernel(
    pid: int,
    kernel_id: str | None,
    *,
    info: ProcessInfoProvider = process_info,
    dirs: Iterable[Path] | None = None,
    timeout_s: float = 1.0,
) -> KernelLocation:
    """Find a kernel's notebook server and, through the server's API, its notebook.

    Args:
        pid: the kernel's pid.
        kernel_id: its id (from the connection file name), used to pick its session.
        info: process-info provider.
        dirs: Jupyter runtime directories; Jupyter's own when None.
        timeout_s: timeout of the one REST call.

    Returns:
        The location; fields are None where they could not be found. Never raises for a
        missing server, a dead port or a refused token.
    """
    server = find_notebook_server(pid, info=info, dirs=dirs)
    if server is None:
        return KernelLocation()
    path = notebook_sessions(server, timeout_s=timeout_s).get(kernel_id) if kernel_id else None
    return KernelLocation(notebook_server=server.url, notebook_path=path)


def running_kernels(
    *, dirs: Iterable[Path] | None = None, lookup_servers: bool = True, timeout_s: float = 1.0
) -> list[dict[str, Any]]:
    """List the IPython kernels running on this machine.

    Args:
        dirs: Jupyter runtime directories to find servers in; Jupyter's own when None.
        lookup_servers: also find each kernel's server and notebook (one local HTTP call
            per server).
        timeout_s: timeout of each REST call.

    Returns:
        One dict per kernel, ordered by pid: ``pid``, ``kernel_id``, ``python`` (cmdline[0]),
        ``connection_file``, ``username``, ``notebook_server`` and ``notebook_path`` (None
        when unknown).
    """
    dir_list = None if dirs is None else list(dirs)
    sessions_cache: dict[str, dict[str, str]] = {}
    out: list[dict[str, Any]] = []
    for proc in psutil.process_iter(["pid", "cmdline", "username"]):
        try:
            cmdline = proc.info.get("cmdline")
        except (psutil.Error, OSError):
            continue
        cmd = parse_kernel_cmdline(cmdline)
        if cmd is None:
            continue
        entry: dict[str, Any] = {
            "pid": proc.pid,
            "kernel_id": cmd.kernel_id,
            "python": cmd.python,
            "connection_file": cmd.connection_file,
            "username": proc.info.get("username"),
            "notebook_server": None,
            "notebook_path": None,
        }
        if lookup_servers:
            server = find_notebook_server(proc.pid, dirs=dir_list)
            if server is not None:
                entry["notebook_server"] = server.url
                if server.url not in sessions_cache:
                    sessions_cache[server.url] = notebook_sessions(server, timeout_s=timeout_s)
                if cmd.kernel_id:
                    entry["notebook_path"] = sessions_cache[server.url].get(cmd.kernel_id)
        out.append(entry)
    out.sort(key=lambda e: int(e["pid"]))
    return out


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)
