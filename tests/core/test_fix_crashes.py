"""A SIGKILL at every file-changing system call of `fixes apply` and `fixes undo`, for each
target kind: afterwards every file is old, or new with an undo that restores it byte for
byte, and the next apply works. strace injects the kill (`-e inject=...:signal=SIGKILL`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed"),
]
TFDOCTOR = str(Path(sys.executable).with_name("tfdoctor"))
SYSCALLS = ("write", "rename", "mkdir", "unlink", "rmdir", "fsync")
MAX_POINTS = 200  # per system call: far more than one apply makes


class Machine:
    """A scratch HOME with a kernelspec, a conda env and an env file, as a user has them."""

    def __init__(self, root: Path) -> None:
        if root.exists():
            shutil.rmtree(root)
        self.root = root
        self.kernels = root / "share" / "jupyter" / "kernels"
        spec = self.kernels / "k"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(
            json.dumps({"argv": ["python", "-m", "ipykernel"], "display_name": "K", "env": {}})
        )
        (spec / "logo-64x64.png").write_bytes(b"\x89PNG fake logo")
        self.conda = root / "envs" / "tf"
        (self.conda / "conda-meta").mkdir(parents=True)
        self.env_file = root / "tf.env"
        self.env_file.write_text("# mine\nexport A=1\n")
        self.env = {
            **os.environ,
            "HOME": str(root),
            "JUPYTER_PATH": str(root / "share" / "jupyter"),
            "JUPYTER_DATA_DIR": str(root / "data" / "jupyter"),
            "TFDOCTOR_STATE_DIR": str(root / "state"),
        }

    def files(self) -> dict[str, bytes]:
        """Every file the fixes may touch (tfdoctor's own state folder aside)."""
        out = {}
        for base in (self.kernels, self.conda, self.root / "data", self.env_file):
            items = [base] if base.is_file() else sorted(base.rglob("*")) if base.exists() else []
            for p in items:
                if p.is_file():
                    out[str(p.relative_to(self.root))] = p.read_bytes()
        return out

    def run(self, *args: str, inject: str | None = None) -> tuple[int, bool]:
        """(exit code, killed by the injected SIGKILL)."""
        cmd = [TFDOCTOR, *args]
        log = self.root / "strace.log"
        if inject:
            cmd = ["strace", "-qq", "-o", str(log), "-e", f"trace={inject.split(':')[0]}",
                   "-e", f"inject={inject}", *cmd]  # fmt: skip
        p = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in p.stderr, p.stderr
        killed = bool(inject) and "killed by SIGKILL" in log.read_text(errors="replace")
        return p.returncode, killed


TARGETS: dict[str, Callable[[Machine], list[str]]] = {
    "kernel clone": lambda m: ["--kernel", "k"],
    "kernel in place": lambda m: ["--kernel", "k", "--in-place"],
    "conda": lambda m: ["--conda", str(m.conda)],
    "env file": lambda m: ["--env-file", str(m.env_file)],
}


def check_consistent(m: Machine, original: dict[str, bytes]) -> str:
    """After a kill and the recovery the next command does: old, or new and undoable."""
    code, _ = m.run("fixes", "history")
    assert code == 0
    now = m.files()
    if now == original:
        return "old"
    # new: the undo log has it, and undo puts back every byte
    code, _ = m.run("fixes", "undo")
    assert code == 0, "a changed file without an undo record"
    assert m.files() == original, "undo did not restore every byte"
    return "new"


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_kill_at_every_write_of_apply_leaves_old_or_undoable(tmp_path: Path, target: str) -> None:
    tried = {"old": 0, "new": 0}
    for syscall in SYSCALLS:
        for n in range(1, MAX_POINTS):
            m = Machine(tmp_path / "m")
            original = m.files()
            args = ["fixes", "apply", "memory_growth", *TARGETS[target](m)]
            code, killed = m.run(*args, inject=f"{syscall}:signal=SIGKILL:when={n}")
            if not killed:  # past the last such call: the apply ran to its end
                assert code == 0
                break
            tried[check_consistent(m, original)] += 1
            code, _ = m.run(*args)  # the next apply works
            assert code == 0 and m.files() != original
            assert m.run("fixes", "undo")[0] == 0 and m.files() == original
    print(f"crash points of apply ({target}): {tried}")
    assert tried["old"] + tried["new"] >= 5, tried  # the matrix really killed something


def test_a_kill_at_every_write_of_undo_finishes_the_undo(tmp_path: Path) -> None:
    tried = 0
    for syscall in SYSCALLS:
        for n in range(1, MAX_POINTS):
            m = Machine(tmp_path / "m")
            original = m.files()
            assert m.run("fixes", "apply", "memory_growth", "--kernel", "k", "--in-place")[0] == 0
            code, killed = m.run("fixes", "undo", inject=f"{syscall}:signal=SIGKILL:when={n}")
            if not killed:
                assert code == 0 and m.files() == original
                break
            tried += 1
            assert m.run("fixes", "history")[0] == 0  # recovery finishes a started undo
            if m.files() != original:  # killed before the undo began: the apply stands whole
                assert m.run("fixes", "undo")[0] == 0
            assert m.files() == original
            assert m.run("fixes", "undo")[0] != 0  # nothing left to undo
    print(f"crash points of undo: {tried}")
    assert tried >= 3


SCRIPT_SYSCALLS = ("write", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir")


class Home:
    """A scratch HOME with a .bashrc, and the exported fix script that edits it."""

    def __init__(self, root: Path, rc: bytes) -> None:
        from tfdoctor.core.fixes import export

        if root.exists():
            shutil.rmtree(root)
        self.home = root / "home"
        self.home.mkdir(parents=True)
        self.rc = self.home / ".bashrc"
        self.rc.write_bytes(rc)
        self.script = root / "fix.sh"
        self.script.write_text(export.export("sh", ["memory_growth"]))
        self.log = root / "strace.log"

    def files(self) -> dict[str, bytes]:
        return {
            str(p.relative_to(self.home)): p.read_bytes()
            for p in self.home.rglob("*")
            if p.is_file()
        }

    def run(self, mode: str, inject: str | None = None) -> tuple[int, bool]:
        cmd = ["sh", str(self.script), mode]
        if inject:  # -f: cp, mv, cat and the rest are killed at their own calls too
            cmd = ["strace", "-f", "-qq", "-o", str(self.log), "-e",
                   f"trace={inject.split(':')[0]}", "-e", f"inject={inject}", *cmd]  # fmt: skip
        env = {"HOME": str(self.home), "PATH": os.environ["PATH"]}
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        killed = bool(inject) and "killed by SIGKILL" in self.log.read_text(errors="replace")
        return p.returncode, killed


@pytest.mark.parametrize("rc", [b"export A=1", b"export A=1\n"], ids=["no final newline", "nl"])
def test_a_kill_at_every_write_of_the_exported_script(tmp_path: Path, rc: bytes) -> None:
    """apply and undo of the exported .sh: after a kill the .bashrc is the old one or the old
    one plus one whole line, the next run finishes the job, and undo gives back every byte."""
    clean = Home(tmp_path / "h", rc)
    assert clean.run("--apply")[0] == 0
    new = clean.rc.read_bytes()
    tried = {"apply": 0, "undo": 0}
    for mode in ("--apply", "--undo"):
        for syscall in SCRIPT_SYSCALLS:
            for n in range(1, MAX_POINTS):
                h = Home(tmp_path / "h", rc)
                if mode == "--undo":
                    assert h.run("--apply")[0] == 0
                code, killed = h.run(mode, inject=f"{syscall}:signal=SIGKILL:when={n}")
                if not killed:
                    assert code == 0
                    break
                tried[mode[2:]] += 1
                assert h.rc.read_bytes() in (rc, new), f"{mode} {syscall} #{n}: a torn .bashrc"
                assert h.run(mode)[0] == 0  # the next run finishes what was started
                assert h.rc.read_bytes() == (new if mode == "--apply" else rc)
                assert h.run("--undo")[0] == 0
                assert h.files() == {".bashrc": rc}, f"{mode} {syscall} #{n}: left behind"
    print(f"crash points of the exported script: {tried}")
    assert tried["apply"] >= 5 and tried["undo"] >= 5, tried
