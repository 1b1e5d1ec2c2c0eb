"""Writes that respect what is there: whole or not at all, through symlinks, modes and owners
kept, and never onto a folder, a device or a FIFO."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfdoctor.core.paths import atomic_write, refuse_existing


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "bashrc"
    real.parent.mkdir()
    real.write_text("export A=1\n")
    real.chmod(0o640)
    link = tmp_path / ".bashrc"
    link.symlink_to(real)
    atomic_write(link, b"export A=1\nexport B=2\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "export A=1\nexport B=2\n"
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in real.parent.iterdir()) == ["bashrc"]  # no temp file left


def test_owner_is_kept_when_root_rewrites_a_users_file(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root writes another user's file")
    f = tmp_path / "kernel.json"
    f.write_text("{}")
    os.chown(f, 1234, 5678)
    atomic_write(f, b'{"env": {}}')
    st = f.stat()
    assert (st.st_uid, st.st_gid) == (1234, 5678)


@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
def test_only_regular_files_are_replaced(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        target = tmp_path / "pipe"
        os.mkfifo(target)
    elif kind == "folder":
        target = tmp_path / "dir"
        target.mkdir()
    else:
        target = Path("/dev/null")
    with pytest.raises(OSError, match="tfdoctor replaces only regular files"):
        atomic_write(target, b"data")
    reason = refuse_existing(target, force=True)
    assert reason is not None and str(target) in reason
    assert target.exists() and not target.is_file()


def test_refuse_existing_asks_for_force(tmp_path: Path) -> None:
    f = tmp_path / "trace.jsonl"
    assert refuse_existing(f, force=False) is None
    f.write_text("x")
    assert "without --force" in (refuse_existing(f, force=False) or "")
    assert refuse_existing(f, force=True) is None
    missing = tmp_path / "nope" / "out.json"
    assert "does not exist" in (refuse_existing(missing, force=False) or "")
