"""Load and validate the fix catalog and the probe log signals (TOML data in this folder)."""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
FIX_KINDS = frozenset({"config", "code", "env", "action"})


class CatalogError(Exception):
    """A knowledge file is malformed; the message names the file and the row."""


@dataclass(frozen=True)
class Fix:
    id: str
    kind: str
    title: str
    summary: str


@dataclass(frozen=True)
class LogSignal:
    id: str
    pattern: re.Pattern[str]
    examples: tuple[str, ...]


def load_toml(path: Path) -> dict[str, Any]:
    """Parse a knowledge TOML file.

    Raises:
        CatalogError: unreadable file or bad TOML (the message names the file).
    """
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogError(f"{path.name}: {exc}") from None


def load_fixes(path: Path = HERE / "fixes.toml") -> dict[str, Fix]:
    """The fix catalog by id.

    Raises:
        CatalogError: unreadable TOML, a duplicate id, an unknown kind or a missing field.
    """
    out: dict[str, Fix] = {}
    for i, row in enumerate(load_toml(path).get("fix", [])):
        try:
            fix = Fix(str(row["id"]), str(row["kind"]), str(row["title"]), str(row["summary"]))
        except KeyError as exc:
            raise CatalogError(f"{path.name}: fix #{i + 1} lacks {exc}") from None
        if fix.kind not in FIX_KINDS:
            raise CatalogError(f"{path.name}: fix {fix.id!r} has unknown kind {fix.kind!r}")
        if fix.id in out:
            raise CatalogError(f"{path.name}: duplicate fix id {fix.id!r}")
        out[fix.id] = fix
    return out


def load_signals(path: Path = HERE / "log_signals.toml") -> tuple[LogSignal, ...]:
    """The probe-output signals, compiled, each checked against its own examples.

    Raises:
        CatalogError: unreadable TOML, a duplicate id, a bad regex, or an example that its
            pattern does not match.
    """
    out: list[LogSignal] = []
    seen: set[str] = set()
    for i, row in enumerate(load_toml(path).get("signal", [])):
        sid = str(row.get("id", f"#{i + 1}"))
        try:
            pattern = re.compile(str(row["pattern"]))
        except KeyError:
            raise CatalogError(f"{path.name}: signal {sid} has no pattern") from None
        except re.error as exc:
            raise CatalogError(f"{path.name}: signal {sid}: bad pattern ({exc})") from None
        examples = tuple(str(e) for e in row.get("examples", []))
        if not examples:
            raise CatalogError(f"{path.name}: signal {sid} has no examples")
        for ex in examples:
            if not pattern.search(ex):
                raise CatalogError(f"{path.name}: signal {sid} does not match its example {ex!r}")
        if sid in seen:
            raise CatalogError(f"{path.name}: duplicate signal id {sid!r}")
        seen.add(sid)
        out.append(LogSignal(sid, pattern, examples))
    return tuple(out)


@functools.cache
def fixes() -> dict[str, Fix]:
    """The shipped fix catalog (cached)."""
    return load_fixes()


@functools.cache
def signals() -> tuple[LogSignal, ...]:
    """The shipped probe-output signals (cached)."""
    return load_signals()
