"""Find recent crash evidence on this machine for the user: the kernel log's OOM kills and Xid
errors, and the Jupyter server logs that can be found.

Jupyter writes its server log to the terminal that started it; where it was redirected to a
file, or JupyterHub/systemd keeps one, these are the usual places. Nothing is read past
MAX_BYTES per file (the tail is what matters).
"""

from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass
from pathlib import Path

from tfdoctor.core import experiments
from tfdoctor.core.probes import system

MAX_BYTES = 8 << 20
MAX_AGE_S = 14 * 24 * 3600
JUPYTER_LOG_GLOBS = (
    "~/.jupyter/*.log",
    "~/.local/share/jupyter/*.log",
    "~/.local/share/jupyter/runtime/*.log",
    "~/jupyter*.log",
    "~/nohup.out",
    "/var/log/jupyterhub*.log",
    "/var/log/jupyter*/*.log",
    "/tmp/jupyter*.log",
)


@dataclass(frozen=True)
class Found:
    name: str  # what it is, for people
    text: bytes  # the lines (kernel records) or the file's tail
    path: str | None = None


def kernel_log_crashes() -> tuple[list[Found], str | None]:
    """The kernel log's OOM-kill and Xid lines, or why the log could not be read (or that it
    held only tfdoctor's own kills). tfdoctor's capped workers are left out."""
    log = system.read_kernel_log()
    if not log.readable:
        why = "; ".join(log.problems) or "the kernel log is not readable here"
        return [], f"kernel log: {why}"
    all_ooms = system.parse_oom_kills(log.lines, limit=0)
    # tfdoctor's own capped workers were killed on purpose: not a crash of the user's
    theirs, left_out = experiments.users_kills(all_ooms)
    ooms = theirs[-system.MAX_RECORDS :]
    xids = system.parse_xid_errors(log.lines)
    lines = [str(r.get("line")) for r in ooms] + [str(r.get("line")) for r in xids]
    if not lines:
        mine = f"kernel log: only OOM kills of tfdoctor's own capped runs ({left_out}), left out"
        return [], mine if left_out else None
    name = f"kernel log ({len(ooms)} OOM kills, {len(xids)} Xid errors)"
    if left_out:
        name += f"; {left_out} kills of tfdoctor's own capped runs left out"
    return [Found(name, ("\n".join(lines) + "\n").encode())], None


def jupyter_logs(globs: tuple[str, ...] = JUPYTER_LOG_GLOBS) -> list[Found]:
    """Recently modified Jupyter server logs, newest first (their last MAX_BYTES)."""
    out = []
    now = time.time()
    seen: set[str] = set()
    for pattern in globs:
        for name in glob.glob(os.path.expanduser(pattern)):
            path = Path(name)
            try:
                st = path.stat()
            except OSError:
                continue
            if not path.is_file() or now - st.st_mtime > MAX_AGE_S or str(path) in seen:
                continue
            seen.add(str(path))
            try:
                with path.open("rb") as fh:
                    fh.seek(max(0, st.st_size - MAX_BYTES))
                    data = fh.read(MAX_BYTES)
            except OSError:
                continue
            if b"Kernel" in data or b"kernel" in data or b"Traceback" in data:
                out.append((st.st_mtime, Found(f"Jupyter log {path}", data, str(path))))
    return [f for _, f in sorted(out, key=lambda x: -x[0])]


def find_recent_crashes() -> tuple[list[Found], list[str]]:
    """Everything found, and one line per place that could not be read."""
    found, problem = kernel_log_crashes()
    problems = [problem] if problem else []
    return found + jupyter_logs(), problems
