"""Where tfdoctor keeps its files, and how it writes them (whole or not at all)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
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


def writable_target(path: Path) -> Path:
    """The file a write to `path` must replace: a symlink's target (the link is kept).

    Raises:
        OSError: `path` (or its target) exists and is not a regular file: a folder, a device,
            a FIFO or a socket is never replaced by a file.
    """
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    try:
        st = path.stat()
    except FileNotFoundError:
        return path
    if not stat.S_ISREG(st.st_mode):
        what = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise OSError(errno.EINVAL, f"{what}: tfdoctor replaces only regular files", str(path))
    return path


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` so that readers see the old file or the new, never half.

    A symlink is written through (the link stays, its target gets the data); an existing
    file keeps its mode and, where allowed, its owner.

    Raises:
        OSError: the folder is missing or not writable, the disk is full, or `path` is not a
            regular file (see writable_target).
    """
    path = writable_target(Path(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        old = path.stat() if path.exists() else None
        if mode is not None:
            os.chmod(tmp, mode)
        elif old is not None:
            os.chmod(tmp, old.st_mode & 0o7777)
        if old is not None:
            with contextlib.suppress(OSError):  # only root may give a file away
                os.chown(tmp, old.st_uid, old.st_gid)
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


def refuse_existing(path: Path, force: bool, flag: str = "--force") -> str | None:
    """Why an output file named by the user must not be written, or None: it exists and
    `force` was not given, or it is no regular file (never replaced, even with `force`)."""
    try:
        writable_target(path)
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if (path.exists() or path.is_symlink()) and not force:
        return f"{path} exists: tfdoctor does not overwrite it without {flag}"
    folder = path.resolve().parent
    if not folder.is_dir():
        return f"cannot write {path}: folder {folder} does not exist"
    return None


def atomic_write_text(path: Path, text: str) -> None:
    """atomic_write for UTF-8 text."""
    atomic_write(path, text.encode("utf-8"))
