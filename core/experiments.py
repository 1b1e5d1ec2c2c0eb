"""tfdoctor's own experiments as the machine's records show them: the workers it started (their
PIDs, kept in each run folder) and the memory cgroups it made (named tfdoctor-*). Their OOM
kills are tfdoctor's doing, never evidence of the user's problem."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfdoctor.core.paths import atomic_write_text, state_dir

log = logging.getLogger(__name__)

CGROUP_PREFIX = "tfdoctor-"  # every memory cgroup tfdoctor makes is named so
WORKER_RECORD = "worker.json"  # in a run folder: the worker's pid, cgroup and cap
RECORDS_READ = 200  # run folders are pruned to a few dozen; never read an unbounded folder


def runs_root() -> Path:
    """Where run folders go (under tfdoctor's state folder)."""
    return state_dir() / "runs"


def record_worker(run_dir: Path, pid: int, cgroup: str | None, cap_mib: int | None) -> None:
    """Note in the run folder which process tfdoctor started, in which cgroup, under which cap
    (best effort: a run whose record cannot be written still runs)."""
    data = {"pid": pid, "cgroup": cgroup, "cap_mib": cap_mib, "started": time.time()}
    try:
        atomic_write_text(run_dir / WORKER_RECORD, json.dumps(data) + "\n")
    except OSError as exc:
        log.warning("cannot record the worker in %s: %s", run_dir, exc)


def own_worker_pids(root: Path | None = None) -> frozenset[int]:
    """The PIDs of the workers tfdoctor started whose run folders are still kept."""
    root = root or runs_root()
    pids: set[int] = set()
    try:
        folders = sorted(root.iterdir())[-RECORDS_READ:]
    except OSError:
        return frozenset()
    for folder in folders:
        try:
            data = json.loads((folder / WORKER_RECORD).read_text())
        except (OSError, ValueError):
            continue
        pid = data.get("pid") if isinstance(data, dict) else None
        if isinstance(pid, int) and pid > 0:
            pids.add(pid)
    return frozenset(pids)


def is_own_cgroup(path: str | None) -> bool:
    """A cgroup path (as the kernel log names it) that tfdoctor made, or one inside it."""
    return bool(path) and any(
        part.startswith(CGROUP_PREFIX) for part in str(path).strip("/").split("/")
    )


def is_own_kill(record: Mapping[str, Any], own_pids: frozenset[int]) -> bool:
    """A kernel-log OOM record (see probes.system.parse_oom_kills) of tfdoctor's own worker:
    by its cgroup's name, else by a PID tfdoctor recorded."""
    if is_own_cgroup(record.get("cgroup")):
        return True
    pid = record.get("pid")
    return isinstance(pid, int) and pid in own_pids


def users_kills(
    kills: Sequence[Mapping[str, Any]], root: Path | None = None
) -> tuple[list[Mapping[str, Any]], int]:
    """Kernel-log OOM records split: the user's (in order), and how many were tfdoctor's."""
    own = own_worker_pids(root)
    theirs = [k for k in kills if not is_own_kill(k, own)]
    return theirs, len(kills) - len(theirs)
