"""Where tfdoctor keeps its files, and how it writes them (whole or not at all)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def state_dir() -> Path:
    """tfdoctor's state folder: $TFDOCTOR_STATE_DIR, else $XDG_STATE_HOME/tfdoctor
    (~/.local/state/tfdoctor): run folders, fix backups, the undo log."""
    env = os.environ.get("TFDOCTOR_STATE_DIR")
    if env:
        return Path(env)
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "tfdoctor"


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` so that readers see the old file or the new, never half.

    Raises:
        OSError: the folder is missing or not writable, the disk is full.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        with contextlib.suppress(OSError):  # the rename itself, durably
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """atomic_write for UTF-8 text."""
    atomic_write(path, text.encode("utf-8"))
