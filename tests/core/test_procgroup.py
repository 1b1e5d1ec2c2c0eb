"""Real process groups: a child and the grandchild it started are stopped together, whatever
they ignore, and nothing of the group is left afterwards."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tfdoctor.core.bench import procgroup

WAIT_S = 30.0  # for a child to get going on a busy machine (a deadline, not a measurement)


@pytest.fixture(autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    after = {
        p.pid
        for p in psutil.Process().children(recursive=True)
        if p.pid not in before and alive(p.pid)
    }
    assert not after, f"processes left behind: {sorted(after)}"


def members(pgid: int) -> list[int]:
    """Live (not zombie) processes in the group."""
    out = []
    for p in psutil.process_iter(["status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return out


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def read_pid(path: Path) -> int:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit():
            return int(text)
        time.sleep(0.02)
    raise AssertionError(f"the child did not write {path}")


def family(
    tmp_path: Path, *, ignore_term: bool, child_exits: bool = False
) -> subprocess.Popen[bytes]:
    """A shell in its own session that starts a `sleep` grandchild and writes its PID."""
    pid_file = tmp_path / "grandchild.pid"
    script = (
        ("trap '' TERM; " if ignore_term else "")
        + f"sleep 300 & echo $! > {shlex.quote(str(pid_file))}; "
        + ("exit 0" if child_exits else "wait")
    )
    proc = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
    proc.grandchild = read_pid(pid_file)  # type: ignore[attr-defined]
    return proc


def test_stop_group_ends_a_child_and_grandchild_that_ignore_sigterm(tmp_path: Path) -> None:
    proc = family(tmp_path, ignore_term=True)
    grandchild = proc.grandchild  # type: ignore[attr-defined]
    assert os.getpgid(grandchild) == proc.pid  # the grandchild is in the child's group
    assert sorted(members(proc.pid)) == sorted([proc.pid, grandchild])
    procgroup.stop_group(proc, dump_stacks=False, term_wait_s=0.5)
    assert proc.returncode == -signal.SIGKILL  # SIGTERM was ignored: SIGKILL came next
    assert not alive(grandchild)
    assert not procgroup.group_alive(proc.pid)
    assert members(proc.pid) == []


def test_stop_group_lets_a_child_end_on_sigterm_and_still_kills_its_grandchild(
    tmp_path: Path,
) -> None:
    proc = family(tmp_path, ignore_term=False)
    grandchild = proc.grandchild  # type: ignore[attr-defined]
    procgroup.stop_group(proc, dump_stacks=False)
    assert proc.returncode == -signal.SIGTERM
    assert not alive(grandchild)
    assert members(proc.pid) == []


def test_kill_group_kills_a_grandchild_that_outlived_the_child(tmp_path: Path) -> None:
    proc = family(tmp_path, ignore_term=True, child_exits=True)
    grandchild = proc.grandchild  # type: ignore[attr-defined]
    assert proc.wait(timeout=WAIT_S) == 0  # the child is gone, its orphan is not
    assert alive(grandchild) and procgroup.group_alive(proc.pid)
    assert procgroup.kill_group(proc.pid, wait_s=WAIT_S)
    assert not alive(grandchild)
    assert not procgroup.group_alive(proc.pid)
    assert members(proc.pid) == []


def test_stop_group_asks_for_a_stack_dump_before_ending_it(tmp_path: Path) -> None:
    dump = tmp_path / "stacks.txt"
    ready = tmp_path / "ready"
    code = (
        "import faulthandler, pathlib, signal, sys, time\n"
        f"f = open({str(dump)!r}, 'w')\n"
        "faulthandler.register(signal.SIGUSR1, file=f, all_threads=True)\n"
        f"pathlib.Path({str(ready)!r}).write_text(str(1) + '\\n')\n"
        "def waiting_here():\n"
        "    time.sleep(300)\n"
        "waiting_here()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    read_pid(ready)
    procgroup.stop_group(proc, dump_stacks=True)
    assert proc.returncode == -signal.SIGTERM
    assert "waiting_here" in dump.read_text()  # where it was when it was stopped
    assert members(proc.pid) == []


def test_a_group_that_is_gone_is_not_alive_and_kill_group_says_so() -> None:
    proc = subprocess.Popen(["/bin/true"], start_new_session=True)
    proc.wait(timeout=WAIT_S)
    assert not procgroup.group_alive(proc.pid)
    assert procgroup.kill_group(proc.pid)
