"""Fixes as transactions: whatever kills tfdoctor mid-apply or mid-undo, every file is left
old, or new with an undo that puts it back byte for byte.

How: a lock serializes applies and undos. Before a file is touched, the journal (one file
per transaction in the state folder, written atomically and fsynced) names it, its backup and
the backup's checksum. Each file is staged and renamed into place (`paths.atomic_write`); a
kernel clone is built in a hidden folder and renamed whole. The undo log gets the record
last, then the journal goes. Every fixes command first recovers what a killed one left: an
unfinished apply is rolled back, an unfinished undo is finished; it says which.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from tfdoctor.core import jsonio
from tfdoctor.core.paths import atomic_write, state_dir, writable_target

log = logging.getLogger(__name__)

LOG_NAME = "undo.jsonl"
JOURNAL_DIR = "journal"
LOCK_NAME = "fixes.lock"


class FixError(Exception):
    """A fix cannot be applied or undone; the message is one line for people."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_sha(path: Path) -> str | None:
    """The checksum of a regular file, None when there is none (absent or a folder)."""
    try:
        return sha256(path.read_bytes())
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _fsync_copy(src: Path, dst: Path) -> str:
    """Copy `src` to `dst` durably (metadata too); returns the copy's checksum."""
    data = src.read_bytes()
    with open(dst, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    shutil.copystat(src, dst)
    return sha256(data)


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One apply or undo at a time, across processes (an flock on the state folder's lock)."""
    folder = state_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise FixError(f"cannot use tfdoctor's state folder {folder}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _journal_dir() -> Path:
    return state_dir() / JOURNAL_DIR


def _append_record(rec: Mapping[str, Any]) -> None:
    """Append one line to the undo log durably; a torn last line (a kill mid-write) is ended
    first so that it never swallows this record."""
    path = state_dir() / LOG_NAME
    if path.is_dir():
        raise FixError(f"{path} is a folder, not tfdoctor's undo log: move it away")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a+b") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell():
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":
                    fh.write(b"\n")
            fh.write(json.dumps(rec).encode("utf-8") + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise FixError(f"the undo log {path} could not be written: {exc.strerror}") from None


def read_log() -> list[dict[str, Any]]:
    """The undo log's records (apply records and undo markers); torn or foreign lines are
    skipped with a warning."""
    path = state_dir() / LOG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise FixError(f"cannot read the undo log {path}: {exc.strerror}") from None
    out = []
    bad = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = jsonio.loads(line)
        except ValueError:
            rec = None
        if _is_record(rec):
            out.append(rec)
        else:
            bad.append(n)
    key = (str(path), tuple(bad))
    if bad and key not in _WARNED:  # said once, in one line, however often the log is read
        _WARNED.add(key)
        lines = ", ".join(map(str, bad[:5])) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        what = "line %s is not a record" if len(bad) == 1 else "lines %s are not records"
        log.warning("%s: " + what + " (a torn write?): skipped", path, lines)
    return out


_WARNED: set[tuple[str, tuple[int, ...]]] = set()


def _is_record(rec: Any) -> bool:
    """An apply record (id, time, fixes, changes naming their paths) or an undo record."""
    if not isinstance(rec, dict) or not isinstance(rec.get("time"), str):
        return False
    if "undo_of" in rec:
        return isinstance(rec["undo_of"], (str, int))
    changes = rec.get("changes")
    return (
        isinstance(rec.get("id"), (str, int))
        and isinstance(rec.get("fixes"), list)
        and all(isinstance(f, str) for f in rec["fixes"])
        and isinstance(changes, list)
        and all(isinstance(c, dict) and isinstance(c.get("path"), str) for c in changes)
    )


# --------------------------------------------------------------------------- apply


class Transaction:
    """The files one apply writes, journalled before each change; `commit` records the undo.

    Use as a context manager: leaving it with an exception rolls back what was written.
    """

    def __init__(self, what: str, fix_ids: tuple[str, ...], target: str) -> None:
        self.id = datetime.datetime.now().strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
        self.what, self.fix_ids, self.target = what, fix_ids, target
        self.changes: list[dict[str, Any]] = []
        self.backup_dir = state_dir() / "backups" / self.id
        self.journal = _journal_dir() / f"{self.id}.json"
        self._lock: contextlib.AbstractContextManager[None] | None = None
        self.recovered: list[str] = []

    def __enter__(self) -> Transaction:
        self._lock = _locked()
        self._lock.__enter__()
        self.recovered = _recover_locked()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is not None and self.journal.exists():
                _rollback(self._journal_data())
                with contextlib.suppress(OSError):
                    self.journal.unlink()
        finally:
            if self._lock is not None:
                self._lock.__exit__(exc_type, exc, tb)

    def _journal_data(self) -> dict[str, Any]:
        return {
            "kind": "apply",
            "id": self.id,
            "what": self.what,
            "fixes": list(self.fix_ids),
            "target": self.target,
            "changes": self.changes,
        }

    def _write_journal(self) -> None:
        try:
            self.journal.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.journal, json.dumps(self._journal_data()).encode("utf-8"))
        except OSError as exc:
            raise FixError(f"cannot write the fix journal {self.journal}: {exc.strerror}") from None

    def write(self, path: Path, data: bytes, mode: int | None = None) -> bool:
        """Write if different; False when the file already had exactly this content."""
        try:
            if path.exists() and path.read_bytes() == data:
                return False
        except OSError as exc:
            raise FixError(f"cannot read {path}: {exc.strerror or exc}") from None
        missing = []
        parent = path.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        change: dict[str, Any] = {
            "path": str(path),
            "backup": None,
            "backup_sha256": None,
            "created_dirs": [str(d) for d in reversed(missing)],
            "written_sha256": sha256(data),
        }
        try:
            if path.exists():
                self.backup_dir.mkdir(parents=True, exist_ok=True)
                backup = self.backup_dir / f"{len(self.changes)}-{path.name}"
                change["backup"] = str(backup)
                change["backup_sha256"] = _fsync_copy(path, backup)
            self.changes.append(change)
            self._write_journal()  # named before it is touched
            for d in reversed(missing):
                d.mkdir()
            atomic_write(path, data, mode)
        except OSError as exc:
            raise FixError(f"cannot write {path}: {exc.strerror or exc}") from None
        return True

    def create_tree(self, dest: Path, files: Mapping[str, bytes]) -> None:
        """A new folder with these files, built hidden beside it and renamed into place whole
        (a kernel clone): there is never a half-made folder under its real name."""
        if dest.exists():
            raise FixError(f"{dest} already exists")
        staging = dest.with_name(f".{dest.name}.tfdoctor-{self.id}")
        change: dict[str, Any] = {
            "path": str(dest),
            "tree": {name: sha256(data) for name, data in files.items()},
            "staging": str(staging),
            "created_dirs": [],
        }
        missing = []
        parent = dest.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        change["created_dirs"] = [str(d) for d in reversed(missing)]
        self.changes.append(change)
        self._write_journal()
        try:
            for d in reversed(missing):
                d.mkdir()
            staging.mkdir()
            for name, data in files.items():
                atomic_write(staging / name, data)
            os.rename(staging, dest)
        except OSError as exc:
            raise FixError(f"cannot create {dest}: {exc.strerror or exc}") from None

    def commit(self) -> dict[str, Any] | None:
        """Record the undo (the commit point), then drop the journal."""
        if not self.changes:
            return None
        rec = {
            "id": self.id,
            "time": datetime.datetime.now().isoformat(timespec="seconds"),
            "what": self.what,
            "fixes": list(self.fix_ids),
            "target": self.target,
            "changes": self.changes,
        }
        _append_record(rec)
        with contextlib.suppress(OSError):
            self.journal.unlink()
        return rec


# --------------------------------------------------------------------------- rollback, undo


def _remove_created_dirs(change: Mapping[str, Any]) -> None:
    for d in reversed(change.get("created_dirs") or []):
        with contextlib.suppress(OSError):
            Path(d).rmdir()  # only when empty


def _checked_backup(change: Mapping[str, Any]) -> bytes:
    backup = Path(change["backup"])
    try:
        data = backup.read_bytes()
    except OSError as exc:
        raise FixError(
            f"the backup {backup} cannot be read ({exc.strerror}): not restored"
        ) from None
    want = change.get("backup_sha256")
    if want and sha256(data) != want:
        raise FixError(f"the backup {backup} is damaged (checksum differs): not restored")
    return data


def _restore(change: Mapping[str, Any], *, only_if_ours: bool) -> None:
    """Put one change back. `only_if_ours`: leave a file that holds neither what tfdoctor
    wrote nor the original (a rollback must never destroy someone else's write)."""
    path = Path(change["path"])
    if change.get("tree") is not None:
        staging = change.get("staging")
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
        if path.is_dir():
            ours = all(_file_sha(path / name) == sha for name, sha in change["tree"].items()) and {
                p.name for p in path.iterdir()
            } <= set(change["tree"])
            if ours or not only_if_ours:
                shutil.rmtree(path)
        _remove_created_dirs(change)
        return
    now = _file_sha(path)
    # a temporary file of an interrupted atomic write
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            leftover.unlink()
    if change.get("backup"):
        if now == change.get("backup_sha256"):
            return  # never replaced, or already restored
        if only_if_ours and now != change.get("written_sha256"):
            return
        atomic_write(path, _checked_backup(change))
        return
    if now is None:
        _remove_created_dirs(change)
        return
    if only_if_ours and now != change.get("written_sha256"):
        return
    path.unlink()
    _remove_created_dirs(change)


def _rollback(journal: Mapping[str, Any]) -> None:
    for change in reversed(journal.get("changes") or []):
        _restore(change, only_if_ours=True)


def _recover_locked() -> list[str]:
    """Finish what a killed apply or undo left (the lock is held): one line per transaction."""
    folder = _journal_dir()
    if not folder.is_dir():
        return []
    committed = {str(r.get("id")) for r in read_log() if "id" in r}
    undone = {str(r.get("undo_of")) for r in read_log() if r.get("undo_of")}
    said = []
    for path in sorted(folder.glob("*.json")):
        try:
            journal = jsonio.loads(path.read_text(encoding="utf-8"))
            if not isinstance(journal, dict):
                raise ValueError("not an object")
        except (OSError, ValueError, RecursionError):
            aside = path.with_suffix(".unreadable")
            with contextlib.suppress(OSError):
                path.rename(aside)
            said.append(f"a fix journal could not be read and was set aside: {aside}")
            continue
        tid = str(journal.get("id"))
        if journal.get("kind") == "undo":
            if tid not in undone:
                for change in reversed(journal.get("changes") or []):
                    _restore(change, only_if_ours=False)
                _append_record({"undo_of": tid, "time": _now(), "recovered": True})
            said.append(f"finished undoing {tid}, which was interrupted")
        elif tid in committed:
            said.append(f"{tid} had been applied completely")
        else:
            _rollback(journal)
            said.append(f"rolled back {tid} ({journal.get('what')}), which was interrupted")
        with contextlib.suppress(OSError):
            path.unlink()
    return said


def recover() -> list[str]:
    """Finish or roll back what an interrupted apply or undo left; one line for each."""
    with _locked():
        return _recover_locked()


def _now() -> str:
    return datetime.datetime.now().isoformat(timespec="seconds")


def history() -> list[dict[str, Any]]:
    """The undo log, oldest first (records already undone carry "undone": true)."""
    records = read_log()
    undone = {str(r["undo_of"]) for r in records if r.get("undo_of")}
    out = [r for r in records if "id" in r and not r.get("undo_of")]
    for rec in out:
        rec["undone"] = str(rec["id"]) in undone
    return out


def edited_since_apply(rec: Mapping[str, Any]) -> list[str]:
    """The files of an apply record that changed after tfdoctor wrote them (the user edited
    them, or another tool did): undoing would throw those edits away."""
    edited = []
    for ch in rec.get("changes") or []:
        path = Path(ch["path"])
        if ch.get("tree") is not None:
            if path.is_dir() and any(
                _file_sha(path / name) != sha for name, sha in ch["tree"].items()
            ):
                edited.append(str(path))
            continue
        want = ch.get("written_sha256")
        if not want:
            continue  # recorded before hashes were kept
        try:
            now = _file_sha(path)
        except OSError as exc:
            raise FixError(f"cannot read {path}: {exc.strerror or exc}") from None
        if now != want:
            edited.append(str(path))
    return edited


def undo(record_id: str | None = None, *, force: bool = False) -> dict[str, Any]:
    """Put back what one apply changed (default: the newest not yet undone).

    A file changed since the apply is not overwritten silently: without `force` the undo
    refuses and names it; with `force` the changed version is kept beside it first
    (`NAME.tfdoctor-edited-<id>`) and the record says where. A backup whose checksum differs
    from the one recorded is never restored.

    Raises:
        FixError: nothing to undo, an unknown id, a file edited since the apply (without
            `force`), a damaged backup, or a file that cannot be restored.
    """
    with _locked():
        _recover_locked()
        recs = [r for r in history() if not r["undone"]]
        if not recs:
            raise FixError("nothing to undo")
        rec = (
            recs[-1] if record_id is None else next((r for r in recs if r["id"] == record_id), None)
        )
        if rec is None:
            raise FixError(f"no applied fix with id {record_id!r} (see `tfdoctor fixes history`)")
        edited = edited_since_apply(rec)
        if edited and not force:
            raise FixError(
                f"not undone: {', '.join(edited)} changed after tfdoctor wrote it; undoing "
                f"would lose those edits (`tfdoctor fixes undo {rec['id']} --force` keeps a "
                "copy of the edited file beside it and undoes anyway)"
            )
        for ch in rec["changes"]:  # every backup is checked before anything is written
            if ch.get("backup"):
                _checked_backup(ch)
        kept: list[str] = []
        for path_text in edited:
            path = Path(path_text)
            copy = path.with_name(f"{path.name}.tfdoctor-edited-{rec['id']}")
            try:
                if path.is_dir():
                    shutil.copytree(path, copy)
                elif path.exists():
                    shutil.copy2(path, copy)
                else:
                    continue
            except OSError as exc:
                raise FixError(f"cannot keep a copy of {path}: {exc.strerror or exc}") from None
            kept.append(str(copy))
        journal = _journal_dir() / f"undo-{rec['id']}.json"
        try:
            journal.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(
                journal,
                json.dumps({"kind": "undo", "id": rec["id"], "changes": rec["changes"]}).encode(),
            )
        except OSError as exc:
            raise FixError(f"cannot write the fix journal {journal}: {exc.strerror}") from None
        try:
            for ch in reversed(rec["changes"]):
                _restore(ch, only_if_ours=False)
        except OSError as exc:
            raise FixError(f"cannot restore {ch['path']}: {exc.strerror or exc}") from None
        _append_record({"undo_of": rec["id"], "time": _now()})
        with contextlib.suppress(OSError):
            journal.unlink()
        return {**rec, "kept_edited": kept}


def check_writable(path: Path, force: bool) -> None:
    """Refuse to replace a read-only file unless `force` (the user protected it).

    Raises:
        FixError: the file is read-only and `force` is not given.
    """
    try:
        writable_target(path)  # a folder, device, FIFO or socket: never replaced
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FixError(f"{path}: {exc.strerror or exc}") from None
    if not force and not (st.st_mode & 0o222):
        raise FixError(f"{path} is read-only: not changed (add --force to change it anyway)")
    if not force and not os.access(path, os.W_OK) and os.geteuid() != 0:
        raise FixError(f"{path}: {os.strerror(errno.EACCES)}")
