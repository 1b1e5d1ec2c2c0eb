"""The one TOML loader of the knowledge folder: read a file, then typed, located row access.

Every knowledge file (compat.toml, fixes.toml, causes.toml, signatures.toml) is read with
:func:`read_toml` and walked with :class:`Row`, so each rejects unknown keys and names the file
and the row in its error.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Collection
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from tfdoctor.core.knowledge.versions import CC_RE

KNOWLEDGE_DIR = Path(__file__).resolve().parent  # the packaged data files live here
URL_RE = re.compile(r"^https?://\S+$")


class KnowledgeError(ValueError):
    """The knowledge file is unreadable, not valid TOML, or breaks a validation rule."""


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse one knowledge file.

    Raises:
        KnowledgeError: The file cannot be read (a broken install that left out package data,
            a wrong path) or is not valid TOML (a bad edit); the message names the file.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise KnowledgeError(f"cannot read {file}: {exc}") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KnowledgeError(f"{file}: not valid TOML: {exc}") from exc


class Row:
    """Typed, located access to one TOML table; every failure names the row."""

    def __init__(self, data: Any, where: str, allowed: set[str]) -> None:
        if not isinstance(data, dict):
            raise KnowledgeError(f"{where}: expected a table, got {type(data).__name__}")
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise KnowledgeError(f"{where}: unknown field(s) {', '.join(unknown)}")
        self.data: dict[str, Any] = data
        self.where = where

    @classmethod
    def entry(cls, data: Any, where: str, allowed: set[str], key: str = "id") -> Row:
        """One table of an array of tables, its location naming it by ``key`` when readable."""
        name = data.get(key) if isinstance(data, dict) else None
        if isinstance(name, str) and name.strip():
            where = f"{where} ({name})"
        return cls(data, where, allowed)

    def tables(self, key: str) -> list[Any]:
        value = self.data.get(key, [])
        if not isinstance(value, list):
            raise KnowledgeError(f"{self.where}: {key} must be an array of tables ([[{key}]])")
        return value

    def req_str(self, key: str, pattern: re.Pattern[str] | None = None) -> str:
        value = self.opt_str(key, pattern)
        if value is None:
            raise KnowledgeError(f"{self.where}: missing {key}")
        return value

    def opt_str(self, key: str, pattern: re.Pattern[str] | None = None) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise KnowledgeError(f"{self.where}: {key} must be a non-empty string")
        if pattern is not None:
            if not pattern.match(value):
                raise KnowledgeError(f"{self.where}: malformed {key} {value!r}")
            try:
                Version(value)
            except InvalidVersion as exc:  # pragma: no cover - the patterns are stricter
                raise KnowledgeError(f"{self.where}: malformed {key} {value!r}") from exc
        return value

    def req_int(self, key: str) -> int:
        value = self.data.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            raise KnowledgeError(f"{self.where}: {key} must be an integer")
        return value

    def opt_int(self, key: str, default: int = 0) -> int:
        """An optional integer of 0 or more; default when absent."""
        if self.data.get(key) is None:
            return default
        value = self.req_int(key)
        if value < 0:
            raise KnowledgeError(f"{self.where}: {key} must be 0 or more")
        return value

    def req_bool(self, key: str) -> bool:
        value = self.data.get(key)
        if not isinstance(value, bool):
            raise KnowledgeError(f"{self.where}: {key} must be true or false")
        return value

    def opt_bool(self, key: str, default: bool = False) -> bool:
        return default if self.data.get(key) is None else self.req_bool(key)

    def opt_float(self, key: str, default: float, low: float, high: float) -> float:
        """An optional number within [low, high]; default when absent."""
        value = self.data.get(key)
        if value is None:
            return default
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or not low <= value <= high
        ):
            raise KnowledgeError(f"{self.where}: {key} must be a number from {low} to {high}")
        return float(value)

    def text(self, key: str) -> str:
        """An optional free-text field ('' when absent); any string, even an empty one."""
        value = self.data.get(key, "")
        if not isinstance(value, str):
            raise KnowledgeError(f"{self.where}: {key} must be a string")
        return value

    def str_list(self, key: str, required: bool = True) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None and not required:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise KnowledgeError(f"{self.where}: {key} must be a list of strings")
        if len(set(value)) != len(value):
            raise KnowledgeError(f"{self.where}: {key} lists a value twice")
        return tuple(value)

    def int_list(self, key: str) -> tuple[int, ...]:
        value = self.data.get(key)
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise KnowledgeError(f"{self.where}: {key} must be a list of integers")
        return tuple(value)

    def cc_list(self, key: str) -> tuple[str, ...]:
        ccs = self.str_list(key)
        for cc in ccs:
            if not CC_RE.match(cc):
                raise KnowledgeError(f"{self.where}: malformed compute capability {cc!r} in {key}")
        return ccs

    def source(self, key: str = "source") -> str:
        value = self.opt_source(key)
        if value is None:
            raise KnowledgeError(f"{self.where}: missing {key} (every fact needs a source URL)")
        return value

    def opt_source(self, key: str) -> str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not URL_RE.match(value):
            raise KnowledgeError(f"{self.where}: {key} {value!r} is not an http(s) URL")
        return value

    def str_or_list(self, key: str) -> tuple[str, ...]:
        """A string or a list of strings (one or more alternatives); () when absent."""
        value = self.data.get(key)
        if isinstance(value, str):
            return (value,)
        return self.str_list(key, required=False)

    def str_table(self, key: str) -> tuple[tuple[str, str], ...]:
        """A table of name = "text" pairs, in file order; () when absent."""
        value = self.data.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise KnowledgeError(f'{self.where}: {key} must be a table of name = "text"')
        return tuple(value.items())

    def weight_table(self, key: str) -> dict[str, float]:
        """A table of name = number pairs; {} when absent."""
        value = self.data.get(key, {})
        if not isinstance(value, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()
        ):
            raise KnowledgeError(f"{self.where}: {key} must be a table of name = number")
        return {str(k): float(v) for k, v in value.items()}

    def regex(self, key: str, text: str | None = None) -> re.Pattern[str]:
        """Compile the regex in ``key`` (or ``text``, the value found under ``key``)."""
        raw = self.req_str(key) if text is None else text
        try:
            return re.compile(raw)
        except re.error as exc:
            raise KnowledgeError(f"{self.where}: bad pattern in {key} ({exc})") from None

    def refs(
        self, key: str, known: Collection[str], what: str, required: bool = True
    ) -> tuple[str, ...]:
        """A list of ids that must all exist in ``known`` (cross-checked at load time)."""
        ids = self.str_list(key, required)
        check_refs(self.where, key, ids, known, what)
        return ids


def check_refs(
    where: str, key: str, ids: Collection[str], known: Collection[str], what: str
) -> None:
    """Raise when ``ids`` names something ``known`` lacks.

    Raises:
        KnowledgeError: an id that the referenced file does not define (a typo, or an entry
            removed there but still named here).
    """
    unknown = sorted(set(ids) - set(known))
    if unknown:
        raise KnowledgeError(f"{where}: {key} names unknown {what} {', '.join(unknown)}")


def unique(where: str, what: str, value: str, seen: set[str]) -> None:
    """Record ``value`` in ``seen``.

    Raises:
        KnowledgeError: ``value`` was already there (two entries with one id).
    """
    if value in seen:
        raise KnowledgeError(f"{where}: duplicate {what} {value!r}")
    seen.add(value)
