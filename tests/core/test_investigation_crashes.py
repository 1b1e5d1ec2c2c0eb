"""A SIGKILL at every file-changing system call while `tfdoctor diagnose --open F --save F`
replaces an investigation: afterwards F is the old investigation or the new one, whole, and
opens; never half of one. strace injects the kill (`-e inject=...:signal=SIGKILL`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tfdoctor.core.report.investigation import load, save
from tfdoctor.core.session import Session

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed"),
]
TFDOCTOR = str(Path(sys.executable).with_name("tfdoctor"))
SYSCALLS = ("write", "fsync", "rename")
MAX_POINTS = 80


def test_a_kill_at_every_write_of_a_save_leaves_the_old_or_the_new_file(tmp_path: Path) -> None:
    old = Session(door="log")
    old.add_log("first.log", b"Epoch 1/10\nKilled\n")
    inv = tmp_path / "case.tfdoctor"
    save(old, inv)
    original = inv.read_bytes()
    log = FIXTURES / "logs" / "real_cpu_bfc_oom.txt"
    env = {**os.environ, "TFDOCTOR_STATE_DIR": str(tmp_path / "state")}
    trace = tmp_path / "strace.log"
    seen_new = seen_old_killed = 0
    for syscall in SYSCALLS:
        for n in range(1, MAX_POINTS + 1):
            inv.write_bytes(original)
            verb = ["diagnose", str(log), "--open", str(inv), "--save", str(inv)]
            cmd = ["strace", "-qq", "-o", str(trace), "-e", f"trace={syscall}",
                   "-e", f"inject={syscall}:signal=SIGKILL:when={n}", TFDOCTOR, *verb]  # fmt: skip
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            assert "Traceback" not in p.stderr, p.stderr
            killed = "killed by SIGKILL" in trace.read_text(errors="replace")
            names = [lg.name for lg in load(inv).session.logs]  # whole: it opens
            if inv.read_bytes() == original:
                assert names == ["first.log"]
                seen_old_killed += killed
            else:
                assert names == ["first.log", log.name], (syscall, n)
                seen_new += 1
            if not killed:  # past the last call of this kind: the save finished
                assert p.returncode == 0 and names == ["first.log", log.name]
                break
        else:
            pytest.fail(f"more than {MAX_POINTS} {syscall} calls")
    # killed before the rename (the old file) and after it (the new one), for each kind
    assert seen_old_killed >= len(SYSCALLS) and seen_new >= len(SYSCALLS)
