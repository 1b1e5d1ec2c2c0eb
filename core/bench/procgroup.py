"""Stop a supervised child and everything it started: no orphan survives tfdoctor's runs.

Children run with `start_new_session=True`, so the child and its descendants (a data-loader
process, a `sleep` a user's script forked) share one process group named by the child's PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time


def group_alive(pgid: int) -> bool:
    """Whether any process is left in the group (zombies of our own children count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: int, wait_s: float = 2.0) -> bool:
    """SIGKILL every process in the group; True when none is left within `wait_s`.

    Members that are not our children are reaped by init; we wait until they are gone.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def stop_group(
    proc: subprocess.Popen[bytes], *, dump_stacks: bool, term_wait_s: float = 3.0
) -> None:
    """Stack dump (SIGUSR1: evidence of where it hung), SIGTERM, then SIGKILL the whole group.

    The child's own exit is awaited; the group is SIGKILLed at the end whatever happened,
    so descendants that ignored SIGTERM or outlived the child go too.
    """
    pgid = proc.pid  # a session leader's group id is its pid
    steps: list[tuple[int, float]] = []
    if dump_stacks and hasattr(signal, "SIGUSR1"):
        steps.append((signal.SIGUSR1, 1.0))
    steps.append((signal.SIGTERM, term_wait_s))
    for sig, wait_s in steps:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
            if sig != getattr(signal, "SIGUSR1", None):
                break
        except subprocess.TimeoutExpired:
            continue
    kill_group(pgid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
