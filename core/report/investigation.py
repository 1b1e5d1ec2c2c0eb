"""The investigation file (`.tfdoctor`): one file with everything an investigation found.

A zip archive: `investigation.json` (the format and its version, who saved it, and the
session: target, check, runs, watch, fixes tried), the logs as they were read (`logs/N.log`)
and each run's telemetry as a trace (`telemetry/*.jsonl`, the format `tfdoctor monitor
--record` writes). Written atomically: a crash mid-save leaves the old file whole.

The user's own record: paths, user and host names stay (a report leaves them out); secret
variables' values and credentials never go in. Opening never crashes: a file of a newer
format says which tfdoctor to get, an older one is read as far as it goes, and a damaged part
is left out with a note.
"""

from __future__ import annotations

import datetime
import io
import json
import logging
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tfdoctor.core import __version__, telemetry
from tfdoctor.core.bench.observe import WatchResult
from tfdoctor.core.bench.outcome import BenchResult
from tfdoctor.core.bench.verify import Verification
from tfdoctor.core.bench.watch import SupervisorOptions
from tfdoctor.core.model import Target
from tfdoctor.core.paths import atomic_write
from tfdoctor.core.redact import Identity, Redactor
from tfdoctor.core.scan import CheckReport
from tfdoctor.core.session import LogInput, Session, TelemetryItem

log = logging.getLogger(__name__)

FORMAT = "tfdoctor-investigation"
VERSION = 1  # the newest this tfdoctor writes and reads; raise it with a reader for the old
SUFFIX = ".tfdoctor"
MANIFEST = "investigation.json"
MAX_LOG_BYTES = 32 << 20  # of one log, kept whole up to this; past it, its last 32 MiB
MAX_UNPACKED_BYTES = 2 << 30  # a file that unpacks to more is refused (a zip bomb)

T = TypeVar("T")
# what reading a damaged zip member can raise (a bad CRC, a cut deflate stream, a bad header)
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    OverflowError,
)


class InvestigationError(ValueError):
    """A file cannot be opened as an investigation; the message is one line for people."""


@dataclass
class Opened:
    """An investigation read back: the session, and what to tell the user about it."""

    session: Session
    path: Path | None
    saved_by: str  # the tfdoctor version that saved it
    saved_at: str
    identity: Identity  # whose machine it was saved on (for redacting reports)
    notes: list[str] = field(default_factory=list)  # parts left out, older formats


def save(session: Session, path: str | Path, identity: Identity | None = None) -> Path:
    """Write the session to `path` (a `.tfdoctor` file), atomically.

    Raises:
        OSError: the folder is missing or not writable, or the disk is full.
    """
    path = Path(path)
    atomic_write(path, to_bytes(session, identity or Identity.here()))
    return path


def to_bytes(session: Session, identity: Identity) -> bytes:
    """The investigation file's bytes. Log files are read now (unreadable: noted in it)."""
    secrets = Redactor(Identity(secrets=_secrets_of(session, identity)))
    members: dict[str, bytes] = {}
    logs = []
    for i, lg in enumerate(session.logs):
        entry: dict[str, Any] = {"name": lg.name, "origin": lg.path}
        data, truncated, problem = _log_bytes(lg)
        if problem:
            entry["unreadable"] = problem
        else:
            member = f"logs/{i}.log"
            members[member] = _mask_bytes(secrets, data)
            entry.update(member=member, bytes=len(data), truncated=truncated)
        logs.append(entry)

    def trace(name: str, items: list[TelemetryItem], what: str) -> str | None:
        if not items:
            return None
        member = f"telemetry/{name}.jsonl"
        members[member] = _mask_bytes(secrets, telemetry.trace_bytes(items, {"note": what}))
        return member

    state: dict[str, Any] = {
        "door": session.door,
        "target": session.target.to_json() if session.target else None,
        "logs": logs,
        "check": session.check.to_json() if session.check is not None else None,
        "bench": session.bench.to_json() if session.bench is not None else None,
        "bench_options": _options_json(session.bench_options),
        "telemetry": trace("run", session.telemetry, "the benchmark run"),
        "watch": None,
        "fix_log": list(session.fix_log),
        "verifications": [],
    }
    if session.watch is not None:
        state["watch"] = {
            **session.watch.to_json(),
            "telemetry": trace("watch", session.watch.items, "the watch"),
        }
    for i, v in enumerate(session.verifications):
        state["verifications"].append(
            {
                **v.to_saved(),
                "before_telemetry": trace(f"verify-{i}-before", v.before_telemetry, "before"),
                "after_telemetry": trace(f"verify-{i}-after", v.after_telemetry, "with the fix"),
            }
        )
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "saved_by": {"name": "tfdoctor", "version": __version__},
        "saved_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        # whose machine: a report made elsewhere still leaves these out
        "identity": Identity(identity.homes, identity.users, identity.hosts).to_json(),
        "session": secrets.data(state),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr(MANIFEST, json.dumps(manifest, indent=1, default=str))
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def load(path: str | Path) -> Opened:
    """Open an investigation file (or a session saved as JSON by an earlier tfdoctor).

    Raises:
        InvestigationError: not an investigation, a newer format, or damaged (one line).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvestigationError(f"cannot read {path}: {exc.strerror or exc}") from None
    opened = from_bytes(data, path.name)
    opened.path = path
    return opened


def from_bytes(data: bytes, name: str = "the file") -> Opened:
    """An investigation from its bytes. Raises InvestigationError like `load`."""
    if not data:
        raise InvestigationError(f"{name} is empty: not a tfdoctor investigation")
    if data[:1] in (b"{", b"[") or data[:3] == b"\xef\xbb\xbf":
        return _from_session_json(data, name)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except _ZIP_ERRORS:
        raise InvestigationError(
            f"{name} is not a tfdoctor investigation (not a .tfdoctor file, or cut short)"
        ) from None
    with zf:
        if sum(i.file_size for i in zf.infolist()) > MAX_UNPACKED_BYTES:
            raise InvestigationError(f"{name} unpacks to more than 2 GiB: not opened")
        try:
            manifest = json.loads(zf.read(MANIFEST))
        except KeyError:
            raise InvestigationError(
                f"{name} is a zip file but not a tfdoctor investigation"
            ) from None
        except _ZIP_ERRORS as exc:  # ValueError covers broken JSON too
            raise InvestigationError(f"{name} is damaged ({type(exc).__name__})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise InvestigationError(f"{name} is a zip file but not a tfdoctor investigation")
        _check_version(manifest, name)
        notes: list[str] = []
        state = manifest.get("session")
        if not isinstance(state, dict):
            raise InvestigationError(f"{name} is damaged: it holds no session")

        def member(path: Any) -> bytes | None:
            if not isinstance(path, str):
                return None
            try:
                return zf.read(path)
            except (KeyError, *_ZIP_ERRORS) as exc:
                notes.append(f"{path} could not be read ({type(exc).__name__}): left out")
                return None

        session = _session(state, member, notes)
    saved_by = manifest.get("saved_by") or {}
    return Opened(
        session,
        None,
        str(saved_by.get("version") or "?") if isinstance(saved_by, dict) else "?",
        str(manifest.get("saved_at") or ""),
        Identity.from_json(manifest.get("identity")),
        notes,
    )


# --------------------------------------------------------------------------- reading


def _check_version(manifest: dict[str, Any], name: str) -> None:
    version = manifest.get("version")
    saved_by = manifest.get("saved_by")
    by = saved_by.get("version") if isinstance(saved_by, dict) else None
    who = f"tfdoctor {by}" if by else "another tfdoctor"
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvestigationError(f"{name} is damaged: its format version is {version!r}")
    if version > VERSION:
        raise InvestigationError(
            f"{name} was saved by {who} in investigation format {version}; this tfdoctor "
            f"({__version__}) reads formats up to {VERSION}: update tfdoctor to open it"
        )
    if version < 1:
        raise InvestigationError(
            f"{name} is in investigation format {version}, older than any this tfdoctor reads"
        )


def _part(notes: list[str], what: str, read: Callable[[], T]) -> T | None:
    """One part of the session, or None with a note when it is damaged."""
    try:
        return read()
    except (KeyError, TypeError, ValueError, AttributeError, telemetry.TraceError) as exc:
        notes.append(f"{what} could not be read ({_one_line(exc)}): left out")
        return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:160] if text else type(exc).__name__


def _trace(member: Callable[[Any], bytes | None], path: Any) -> list[TelemetryItem]:
    data = member(path)
    if data is None:
        return []
    return telemetry.parse_trace(data.splitlines(), str(path))[1]


def _session(
    state: dict[str, Any], member: Callable[[Any], bytes | None], notes: list[str]
) -> Session:
    s = Session()
    door = state.get("door")
    s.door = door if isinstance(door, str) else None
    if state.get("target"):
        s.target = _part(notes, "the target Python", lambda: Target.from_json(state["target"]))
    for entry in state.get("logs") or ():
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name") or "log")
        data = member(entry.get("member"))
        if data is not None:
            s.logs.append(LogInput(name, data))
        elif entry.get("unreadable"):
            notes.append(f"log {name} was not saved: {entry['unreadable']}")
        else:
            _reread(s, name, entry.get("path") or entry.get("origin"), notes)
    if state.get("check"):
        s.check = _part(notes, "the environment check", lambda: _check(state["check"]))
    if state.get("bench"):
        s.bench = _part(notes, "the benchmark run", lambda: BenchResult.from_json(state["bench"]))
        s.bench_options = _part(notes, "the run's options", lambda: _options(state))
        if s.bench is not None:
            run_items = _part(
                notes, "the run's telemetry", lambda: _trace(member, state.get("telemetry"))
            )
            s.telemetry = run_items or []
    watch = state.get("watch")
    if isinstance(watch, dict):
        items = _part(
            notes, "the watch's telemetry", lambda: _trace(member, watch.get("telemetry"))
        )
        s.watch = _part(notes, "the watch", lambda: WatchResult.from_json(watch, items or []))
    s.fix_log = [dict(e) for e in state.get("fix_log") or () if isinstance(e, dict)]
    for i, v in enumerate(state.get("verifications") or ()):
        if not isinstance(v, dict):
            continue
        found = _part(notes, f"verification {i + 1}", _verification_reader(v, member))
        if found is not None:
            s.verifications.append(found)
    return s


def _verification_reader(
    data: dict[str, Any], member: Callable[[Any], bytes | None]
) -> Callable[[], Verification]:
    def read() -> Verification:
        before = _trace(member, data.get("before_telemetry"))
        return Verification.from_saved(data, before, _trace(member, data.get("after_telemetry")))

    return read


def _check(data: dict[str, Any]) -> CheckReport:
    return CheckReport.from_json(data)


def _reread(s: Session, name: str, path: Any, notes: list[str]) -> None:
    """A log the file names but does not hold (an older format): read it again if it is
    still where it was."""
    if isinstance(path, str) and Path(path).is_file():
        s.logs.append(LogInput(name, path=path))
        notes.append(f"log {name} was read again from {path} (the file holds only its name)")
    else:
        notes.append(f"log {name} is not in the file and no longer at {path}: left out")


def _from_session_json(data: bytes, name: str) -> Opened:
    """A session saved as JSON by the Export page before investigation files existed."""
    try:
        state = json.loads(data.decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError):
        raise InvestigationError(f"{name} is not a tfdoctor investigation (broken JSON)") from None
    if not isinstance(state, dict) or state.get("schema") != 1 or "door" not in state:
        what = "a `check --json` report" if isinstance(state, dict) and "probes" in state else ""
        raise InvestigationError(
            f"{name} is {what or 'JSON'}, not a tfdoctor investigation"
            + (": open it on the Start page or with `tfdoctor diagnose`" if what else "")
        )
    notes = ["an older session file (JSON): its logs and telemetry were not saved in it"]
    s = _session({k: v for k, v in state.items() if k != "logs"}, lambda _p: None, notes)
    for entry in state.get("logs") or ():
        if isinstance(entry, dict):
            _reread(s, str(entry.get("name") or "log"), entry.get("path"), notes)
    return Opened(s, None, "an earlier tfdoctor", "", Identity(), notes)


# --------------------------------------------------------------------------- writing


def _secrets_of(session: Session, identity: Identity) -> tuple[str, ...]:
    """Secret values to keep out of the file: this machine's and the target's."""
    from tfdoctor.core.redact import secret_values

    found = set(identity.secrets)
    facts = session.facts()
    env = facts.value("target.env") if facts is not None else None
    if isinstance(env, dict):
        found.update(secret_values(env))
    return tuple(sorted(found))


def _mask_bytes(redactor: Redactor, data: bytes) -> bytes:
    text = data.decode("utf-8", "surrogateescape")
    return redactor.text(text).encode("utf-8", "surrogateescape")


def _log_bytes(lg: LogInput) -> tuple[bytes, bool, str | None]:
    """(bytes, truncated, why unreadable) of a log: its text, or its file read now."""
    if not lg.path:
        data = lg.text
    else:
        try:
            with open(lg.path, "rb") as fh:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - MAX_LOG_BYTES))
                data = fh.read(MAX_LOG_BYTES)
        except OSError as exc:
            return b"", False, f"cannot read {lg.path}: {exc.strerror or exc}"
        return data, size > MAX_LOG_BYTES, None
    if len(data) > MAX_LOG_BYTES:
        return data[-MAX_LOG_BYTES:], True, None
    return data, False, None


def _options_json(options: SupervisorOptions | None) -> dict[str, Any] | None:
    if options is None:
        return None
    return {
        "watchdog_s": options.watchdog_s,
        "stall_s": options.stall_s,
        "memory_cap_mib": options.memory_cap_mib,
        "guard_mib": options.guard_mib,
        "sample_every_s": options.sample_every_s,
    }


def _options(state: dict[str, Any]) -> SupervisorOptions | None:
    data = state.get("bench_options")
    if not isinstance(data, dict):
        return None
    cap, guard = data.get("memory_cap_mib"), data.get("guard_mib")
    return SupervisorOptions(
        watchdog_s=float(data.get("watchdog_s") or 300.0),
        stall_s=float(data.get("stall_s") or 60.0),
        memory_cap_mib=int(cap) if cap is not None else None,
        guard_mib=int(guard) if guard is not None else None,
        sample_every_s=float(data.get("sample_every_s") or 0.1),
    )
