"""Recent-crash search: Jupyter server logs found in the usual places, newest first, their tail
only; the kernel log's OOM kills and Xid errors, or why it cannot be read."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tfdoctor.core.diagnose import recent
from tfdoctor.core.probes import system

RESTART = b"[I 10:11:12 KernelRestarter] AsyncIOLoopKernelRestarter: restarting kernel (1/5)\n"


def test_jupyter_logs_newest_first_old_and_unrelated_ones_left_out(tmp_path: Path) -> None:
    globs = (str(tmp_path / "*.log"), str(tmp_path / "sub" / "*.log"))
    (tmp_path / "sub").mkdir()
    older = tmp_path / "older.log"
    older.write_bytes(b"[I server started]\n" + RESTART)
    newer = tmp_path / "sub" / "newer.log"
    newer.write_bytes(b"Traceback (most recent call last):\n  ...\n")
    stale = tmp_path / "stale.log"
    stale.write_bytes(RESTART)
    quiet = tmp_path / "quiet.log"
    quiet.write_bytes(b"[I 10:00:00 ServerApp] Jupyter Server 2.14 is running\n")
    now = time.time()
    os.utime(older, (now - 3600, now - 3600))
    os.utime(stale, (now - recent.MAX_AGE_S - 60,) * 2)

    found = recent.jupyter_logs(globs)

    assert [f.path for f in found] == [str(newer), str(older)]
    assert found[1].text.endswith(RESTART) and found[1].name == f"Jupyter log {older}"


def test_only_the_tail_of_a_huge_log_is_read(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(recent, "MAX_BYTES", 4096)
    big = tmp_path / "big.log"
    with big.open("wb") as fh:
        fh.write(b"x" * 100_000 + b"\n")
        fh.write(RESTART)
    (found,) = recent.jupyter_logs((str(tmp_path / "*.log"),))
    assert len(found.text) == 4096 and found.text.endswith(RESTART)


def test_the_kernel_log_gives_its_crash_lines_or_says_why_not() -> None:
    log = system.read_kernel_log()
    found, problem = recent.kernel_log_crashes()
    if not log.readable:
        assert found == [] and problem and problem.startswith("kernel log: ")
        return
    assert problem is None
    for f in found:  # every line handed on is a real kernel-log line
        lines = f.text.decode().splitlines()
        assert lines and all(any(ln in k for k in log.lines) for ln in lines)
        assert "OOM kills" in f.name and "Xid errors" in f.name
    all_found, problems = recent.find_recent_crashes()
    assert problems == [] and all_found[: len(found)] == found
