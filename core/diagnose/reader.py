"""Stream any crash text (a file, stdin, a paste, bytes) as clean numbered chunks of lines.

Real pastes are messy: quote prefixes, ANSI colours, CRLF, progress-bar carriage returns,
backtick fences, JSON-escaped notebook outputs, non-UTF-8 bytes, binary junk, lines megabytes
long. The reader cleans all of that at C speed, a few MiB at a time, so memory stays bounded
however big the log is, and line numbers stay those of the input.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

CHUNK_BYTES = 4 << 20
MAX_LINE_CHARS = 64 << 10  # longer "lines" are binary junk: readers cut them (see engine)

_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
# quote prefixes of mail / chat / markdown ("> ", "| "), the Python prompt, fences and the
# single backticks people wrap log lines in
_PREFIX = re.compile(r"^[ \t]*(?:(?:>>>|\.\.\.|>|\|)[ \t]?)*`*")
_SUFFIX = re.compile(r"`+[ \t]*$")
# a JSON string holding one output line, as in .ipynb files: "text...\n",
_JSON_LINE = re.compile(r'(?m)^[ \t]*"((?:[^"\\\n]|\\.)*)",?[ \t]*$')


@dataclass(frozen=True)
class Chunk:
    """Cleaned whole lines; `first_line` is the input line number of its first line.

    `raw` is the same text as UTF-8 bytes: byte-level scanners run several times faster on it
    than on `text` (no character offsets to keep).
    """

    source: str
    first_line: int
    text: str
    raw: bytes = b""


# ESC stays: colour codes are removed from the few lines that are read (clean_line), which
# is far cheaper than a regex pass over every colourful progress bar of a long log.
_CONTROL_BYTES = bytes(c for c in range(32) if c not in (9, 10, 13, 27)) + b"\x7f"
_CR_TO_SPACE = bytes.maketrans(b"\r", b" ")


def clean_bytes(data: bytes) -> bytes:
    """Byte-level cleaning at C speed: control characters and carriage returns."""
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").translate(_CR_TO_SPACE)
    return data.translate(None, _CONTROL_BYTES)


def clean(text: str) -> str:
    """Normalise a block of whole lines (no line is added or removed).

    Each step first checks, at C speed, whether it has anything to do: most of a huge log
    needs none of them, and a regex pass over every line would dominate the run time. Quote
    prefixes and backtick wrappers are left to `clean_line`, applied only to the few lines
    the engine looks at.
    """
    if '\\n"' in text:
        text = _JSON_LINE.sub(_unescape, text)
    return text


def clean_line(line: str) -> str:
    """One line without colour codes, quote prefixes ("> ", "| ", ">>> ") or backticks."""
    if "\x1b" in line:
        line = _ANSI.sub("", line).replace("\x1b", "")
    if line[:1] in (">", "|", "`", " ", "\t", "."):
        line = _PREFIX.sub("", line, count=1)
    if line.endswith(("`", "` ", "`\t")):
        line = _SUFFIX.sub("", line, count=1)
    return line


def _unescape(m: re.Match[str]) -> str:
    try:
        s = json.loads('"' + m.group(1) + '"')
    except ValueError:
        return m.group(0)
    return str(s).replace("\n", " ").rstrip()


def iter_chunks(
    src: str | bytes | Path | BinaryIO | Iterable[str], source: str = "input"
) -> Iterator[Chunk]:
    """Yield cleaned chunks of the input, in order, never holding more than a few MiB.

    Accepts text, bytes, a path, a binary file object (stdin.buffer), or an iterable of lines.

    Raises:
        OSError: a path that cannot be opened or read (missing, a directory, no permission).
    """
    if isinstance(src, Path):
        with src.open("rb") as fh:
            yield from _iter_binary(fh, source)
        return
    if isinstance(src, bytes):
        yield from _iter_binary(io.BytesIO(src), source)
        return
    if isinstance(src, str):
        yield from _iter_binary(io.BytesIO(src.encode("utf-8", "surrogatepass")), source)
        return
    if hasattr(src, "read"):
        yield from _iter_binary(src, source)  # type: ignore[arg-type]
        return
    lines = [line if line.endswith("\n") else line + "\n" for line in src]
    yield from _iter_binary(io.BytesIO("".join(lines).encode("utf-8", "replace")), source)


def _iter_binary(fh: BinaryIO, source: str) -> Iterator[Chunk]:
    line_no = 1
    carry = b""
    while True:
        block = fh.read(CHUNK_BYTES)
        if not block:
            break
        data = carry + block
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) < MAX_LINE_CHARS * 4:
                carry = data
                continue
            cut = len(data) - 1  # one enormous line: emit it (capped) and go on
        carry = data[cut + 1 :]
        chunk = _chunk(source, line_no, clean_bytes(data[: cut + 1]))
        yield chunk
        line_no += chunk.raw.count(b"\n")
    if carry:
        yield _chunk(source, line_no, clean_bytes(carry))


def _chunk(source: str, line_no: int, raw: bytes) -> Chunk:
    try:
        text, valid = raw.decode("utf-8"), True
    except UnicodeDecodeError:
        text, valid = raw.decode("utf-8", "replace"), False
    if not valid or b'\\n"' in raw:
        # JSON-escaped lines to unescape, or bytes that were not UTF-8: keep raw and text
        # the same characters (checked on bytes first: a search in a wide str is slower)
        text = clean(text)
        raw = text.encode("utf-8")
    return Chunk(source, line_no, text, raw)


def iter_lines(
    src: str | bytes | Path | BinaryIO | Iterable[str], source: str = "input"
) -> Iterator[tuple[int, str]]:
    """(line number, cleaned text) for every input line; convenient for small inputs."""
    for chunk in iter_chunks(src, source):
        lines = chunk.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for i, line in enumerate(lines):
            yield chunk.first_line + i, clean_line(line)
