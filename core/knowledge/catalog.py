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
    """A fix. Config fixes say what they change: `env` (variables to set; values may name
    `params` as {name}), `unset` (variables to remove), `preamble` (Python to run before
    TensorFlow touches the GPU, for settings no variable can make)."""

    id: str
    kind: str
    title: str
    summary: str
    risk: str = ""
    undo: str = ""
    env: tuple[tuple[str, str], ...] = ()
    unset: tuple[str, ...] = ()
    preamble: str = ""
    params: tuple[tuple[str, str], ...] = ()  # name -> default value
    snippet: str = ""  # code fixes: the code to paste

    @property
    def applicable(self) -> bool:
        """Whether tfdoctor can apply it (to a kernelspec, conda env, env file, preamble)."""
        return bool(self.env or self.unset or self.preamble)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PARAM_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


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
            env = row.get("env", {})
            params = row.get("params", {})
            if not isinstance(env, dict) or not isinstance(params, dict):
                raise CatalogError(f"{path.name}: fix #{i + 1}: env and params must be tables")
            fix = Fix(
                str(row["id"]),
                str(row["kind"]),
                str(row["title"]),
                str(row["summary"]),
                risk=str(row.get("risk", "")),
                undo=str(row.get("undo", "")),
                env=tuple((str(k), str(v)) for k, v in env.items()),
                unset=tuple(str(v) for v in row.get("unset", [])),
                preamble=str(row.get("preamble", "")).strip("\n"),
                params=tuple((str(k), str(v)) for k, v in params.items()),
                snippet=str(row.get("snippet", "")).strip("\n"),
            )
        except KeyError as exc:
            raise CatalogError(f"{path.name}: fix #{i + 1} lacks {exc}") from None
        names = [k for k, _ in fix.env] + list(fix.unset)
        bad = [n for n in names if not _ENV_NAME.match(n)]
        if bad:
            raise CatalogError(f"{path.name}: fix {fix.id!r}: bad variable name {bad[0]!r}")
        declared = {k for k, _ in fix.params}
        used = {m for text in [v for _, v in fix.env] + [fix.preamble]
                for m in _PARAM_REF.findall(text)}  # fmt: skip
        if used - declared:
            missing = ", ".join(sorted(used - declared))
            raise CatalogError(f"{path.name}: fix {fix.id!r} uses undeclared params: {missing}")
        if fix.snippet:
            try:
                compile(fix.snippet, f"{fix.id} snippet", "exec")
            except SyntaxError as exc:
                raise CatalogError(f"{path.name}: fix {fix.id!r}: snippet: {exc.msg}") from None
        if fix.applicable and fix.kind != "config":
            raise CatalogError(f"{path.name}: fix {fix.id!r} changes settings but is {fix.kind}")
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
