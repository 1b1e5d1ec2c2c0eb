"""The NVML snapshot file: a recorded NVML session, its format, reading and writing."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.core import jsonio
from tfdoctor.core.paths import atomic_write
from tfdoctor.core.probes.jupyter import KernelLocation, ProcInfo

SCHEMA = 1
KIND = "tfdoctor-nvml-snapshot"


class SnapshotError(ValueError):
    """A file is not a usable tfdoctor NVML snapshot; the message says why, in one line."""


@dataclass(frozen=True)
class Snapshot:
    """A recorded NVML session plus what replay needs to name the processes it saw.

    ``nvml_calls`` entries are ``{"fn", "args", "result"}`` or ``{"fn", "args", "error":
    {"class", "value", "message"}}``; an entry still marked ``"hung": true`` was in flight when
    the recording stopped and blocks on replay (a stall reproduced).
    """

    nvml_calls: tuple[dict[str, Any], ...]
    processes: Mapping[int, ProcInfo] = field(default_factory=dict)
    jupyter: Mapping[int, KernelLocation] = field(default_factory=dict)
    recorded_at: str = ""
    host: Mapping[str, Any] = field(default_factory=dict)
    provenance: str = ""
    name: str = "memory"

    def process_info(self, pid: int) -> ProcInfo | None:
        """Process info as recorded (a :data:`ProcessInfoProvider` for replay)."""
        return self.processes.get(pid)

    def kernel_lookup(self, pid: int, kernel_id: str | None) -> KernelLocation:
        """A kernel's notebook server and path as recorded; unknown when not recorded."""
        return self.jupyter.get(pid, KernelLocation())

    def to_json(self) -> dict[str, Any]:
        """The snapshot file's content."""
        return {
            "schema": SCHEMA,
            "kind": KIND,
            "recorded_at": self.recorded_at,
            "host": dict(self.host),
            "provenance": self.provenance,
            "nvml_calls": [dict(c) for c in self.nvml_calls],
            "processes": {str(pid): p.to_json() for pid, p in sorted(self.processes.items())},
            "jupyter": {
                str(pid): {"notebook_server": k.notebook_server, "notebook_path": k.notebook_path}
                for pid, k in sorted(self.jupyter.items())
            },
        }

    @classmethod
    def from_json(cls, data: Any, name: str = "memory") -> Snapshot:
        """Build a snapshot from parsed JSON.

        Raises:
            SnapshotError: the data is not a tfdoctor NVML snapshot of a schema we read.
        """
        if not isinstance(data, dict):
            raise SnapshotError(
                f"{name}: not a tfdoctor NVML snapshot (top level is not an object)"
            )
        if data.get("kind") != KIND:
            raise SnapshotError(
                f"{name}: not a tfdoctor NVML snapshot (kind is {data.get('kind')!r}, "
                f"expected {KIND!r})"
            )
        if data.get("schema") != SCHEMA:
            raise SnapshotError(
                f"{name}: snapshot schema {data.get('schema')!r} is not supported "
                f"(this tfdoctor reads schema {SCHEMA})"
            )
        calls = data.get("nvml_calls")
        if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("fn"), str) and isinstance(c.get("args"), list)
            for c in calls
        ):
            raise SnapshotError(f"{name}: 'nvml_calls' must be a list of {{fn, args, ...}} objects")
        try:
            processes = {
                int(pid): ProcInfo.from_json(int(pid), info)
                for pid, info in (data.get("processes") or {}).items()
            }
            jupyter = {
                int(pid): KernelLocation(
                    notebook_server=loc.get("notebook_server"),
                    notebook_path=loc.get("notebook_path"),
                )
                for pid, loc in (data.get("jupyter") or {}).items()
            }
        except (AttributeError, TypeError, ValueError) as exc:
            raise SnapshotError(
                f"{name}: malformed 'processes' or 'jupyter' table ({exc})"
            ) from exc
        host = data.get("host")
        return cls(
            nvml_calls=tuple(calls),
            processes=processes,
            jupyter=jupyter,
            recorded_at=str(data.get("recorded_at", "")),
            host=host if isinstance(host, dict) else {},
            provenance=str(data.get("provenance", "")),
            name=name,
        )


def load_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot file written by :func:`capture` (or built by hand in that format).

    Args:
        path: the JSON file.

    Returns:
        The snapshot, named after the file.

    Raises:
        SnapshotError: the file cannot be read, is not JSON, is not an NVML snapshot
            (wrong ``kind``) or has a schema this version does not read.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise SnapshotError(f"{p.name}: cannot read the snapshot ({why})") from exc
    try:
        data = jsonio.loads(text)
    except json.JSONDecodeError as exc:
        raise SnapshotError(
            f"{p.name}: not a JSON file ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc
    except ValueError as exc:
        raise SnapshotError(f"{p.name}: not a JSON file ({exc})") from exc
    return Snapshot.from_json(data, name=p.name)


def _dumps_snapshot(data: Mapping[str, Any]) -> str:
    """JSON with one NVML call / process per line: diffable and readable by hand."""

    def one(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    lines = ["{"]
    keys = list(data)
    for n, key in enumerate(keys):
        value = data[key]
        end = "," if n < len(keys) - 1 else ""
        if isinstance(value, list) and value:
            lines.append(f" {one(key)}: [")
            lines += [
                f"  {one(v)}" + ("," if j < len(value) - 1 else "") for j, v in enumerate(value)
            ]
            lines.append(f" ]{end}")
        elif isinstance(value, dict) and value and key != "host":
            lines.append(f" {one(key)}: {{")
            items = list(value.items())
            lines += [
                f"  {one(k)}: {one(v)}" + ("," if j < len(items) - 1 else "")
                for j, (k, v) in enumerate(items)
            ]
            lines.append(f" }}{end}")
        else:
            lines.append(f" {one(key)}: {one(value)}{end}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def save_snapshot(snapshot: Snapshot, path: str | os.PathLike[str]) -> None:
    """Write a snapshot atomically: a temp file beside it, fsync, then rename over.

    Args:
        snapshot: what to write.
        path: destination; its folder must exist.

    Raises:
        OSError: the folder is missing or not writable, or the disk is full. The destination
            is left as it was.
    """
    dest = Path(path)
    text = _dumps_snapshot(snapshot.to_json())
    try:
        mode = dest.stat().st_mode & 0o777  # keep the mode of the file we replace
    except OSError:
        mode = 0o644  # mkstemp's 0600 would hide a snapshot meant for sharing
    atomic_write(dest, text.encode("utf-8"), mode)
