"""Stream any crash text (a file, stdin, a paste, bytes) as clean numbered chunks of lines.

Real pastes are messy: quote prefixes, ANSI colours, CRLF, progress-bar carriage returns,
backtick fences, JSON-escaped notebook outputs, non-UTF-8 bytes, binary junk, lines megabytes
long. The reader cleans all of that at C speed, a few MiB at a time, so memory stays bounded
however big the log is, and line numbers stay those of the input.
"""

from __future__ import annotations

import bisect
import codecs
import html
import io
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

CHUNK_BYTES = 4 << 20
MAX_LINE_CHARS = 64 << 10  # longer "lines" are binary junk: readers cut them (see engine)

_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_ANSI_BYTES = re.compile(_ANSI.pattern.encode())
# the bullets a rich-text page or a chat puts before a list's lines (markdown's are * and -)
BULLETS = "•◦▪"
# quote prefixes of mail / chat / markdown ("> ", "| "), the Python prompt, a list's bullet,
# fences and the single backticks people wrap log lines in
_PREFIX = re.compile(rf"^[ \t]*(?:(?:>>>|\.\.\.|>|\||[*{BULLETS}-](?=[ \t]+\S))[ \t]?)*`*")
# the first characters of a line `_PREFIX` may take something off
_PREFIX_STARTS = (">", "|", "`", " ", "\t", ".", "*", "-", *BULLETS)
_SUFFIX = re.compile(r"`+[ \t]*$")
# what a log collector writes before each line of the program's output: Colab's runtime log
# viewer, docker compose's service column, an ISO timestamp (docker logs -t, CI runners,
# Kubernetes' container log with its stream), Ray's worker tag, the journal's host and
# process[pid] of a service (journalctl, syslog; the kernel's own lines keep "kernel:",
# which the kernel's signatures read)
_JOURNAL = r"[\w.-]+[ \t]+(?!kernel\b)[\w.@/-]+\[\d+\]:[ \t]"
# a logger's level name (never any word in capitals: "OOM when allocating", "DNN library")
_LEVEL = r"(?:DEBUG|INFO|NOTICE|SUCCESS|WARNING|WARN|ERROR|CRITICAL|TRACE)"
_ORIGIN = re.compile(
    r"(?:[A-Z][a-z]{2} \d{1,2}, \d{4}, \d{1,2}:\d\d:\d\d\s?[AP]M\t\w+\t"
    r"|[\w.-]+[-_]\d+\s+\|[ \t]"
    r"|\d{4}-\d\d-\d\d(?:T\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)[ \t]+"
    # a container's stream, a journal's host and process, a platform's process (Heroku's
    # "app[web.1]: ")
    rf"(?:std(?:out|err)[ \t]+[FP][ \t]+|{_JOURNAL}|[\w.-]+\[[\w.-]+\]:[ \t])?"
    # Python logging's "asctime - name - levelname - "
    r"| \d\d:\d\d:\d\d,\d{3} - [\w.]+ - [A-Z]+ - "
    # loguru's "time | LEVEL | module:function:line - "
    rf"| \d\d:\d\d:\d\d\.\d+ \| {_LEVEL} *+\| [\w.<>-]+:[\w.<>-]+:\d+ - )"
    # absl's prefix of a Python logger's line ("I0912 01:07:02.182041 4745 train.py:62] "; TF's
    # own lines keep theirs, whose source file the signatures read), a bare clock ("10:00:01 ",
    # "[10:00:01] ": Jenkins' timestamper, a script's own), Docker BuildKit's step and second
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+\.py:\d+\] "
    r"|\[?\d\d:\d\d:\d\d(?:[.,]\d+)?\]?(?:[ \t]+|$)"
    r"|#\d+ \d+\.\d+ "
    rf"|[A-Z][a-z]{{2}}[ \t]+\d{{1,2}}[ \t]+\d\d:\d\d:\d\d[ \t]+{_JOURNAL}"
    r"|\((?:[\w.]+[ \t]+)?pid=\d+(?:,[ \t]*ip=[\d.]+)?\)[ \t]+"
    # pm2's process column ("0|app  | "), a Jupyter server's ("[I 10:00:00.123 NotebookApp] ")
    r"|\d+\|[\w.@/-]+\s*\|[ \t]"
    r"|\[[IWEDC] (?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d\.\d+ \w+\][ \t]"
    # a logger's bracketed time, then its pid and level (gunicorn: "[2023-04-18 09:58:48 +0000]
    # [1] [WARNING] "; Flask: "[...] ERROR in app: ")
    r"|\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[ \t]?(?:[+-]\d\d:?\d\d|Z))?\][ \t]+"
    rf"(?:\[\d+\][ \t]+)?(?:\[{_LEVEL}\][ \t]+|{_LEVEL} in [\w.]+:[ \t]+|{_LEVEL}:?[ \t]+)?)"
)
# a JSON string holding one output line, as in .ipynb files: "text...\n",
_JSON_LINE = re.compile(r'(?m)^[ \t]*"((?:[^"\\\n]|\\.)*)",?[ \t]*$')
# a container log collector's record of one output line: Docker's json-file driver
# ({"log":"text...\n","stream":"stderr","time":"..."}), and Kubernetes or cloud loggers that
# name the line "message", "msg" or "textPayload" (other fields, before or after, are dropped)
_JSON_STR = r'"(?:[^"\\\n]|\\.)*"'
_JSON_RECORD = re.compile(
    rf"(?m)^[ \t]*\{{(?:[ \t]*{_JSON_STR}[ \t]*:[ \t]*(?:{_JSON_STR}|[\w.+-]+)[ \t]*,)*?"
    rf'[ \t]*"(?:log|message|msg|textPayload)"[ \t]*:[ \t]*"((?:[^"\\\n]|\\.)*)"'
    r"[^\n]*\}[ \t]*,?[ \t]*$"
)


class Chunk:
    """Cleaned whole lines as UTF-8 bytes; `first_line` is the input line number of the first.

    Scanners run on `raw`: byte searches are several times faster than searches in a str
    (no character offsets to keep), and most of a huge log is never decoded at all. `text`
    decodes on first use (undecodable bytes become U+FFFD, line by line as a whole-chunk
    decode would). `lines` is how many lines the chunk holds.

    Line breaks are counted lazily, each stretch once: the line numbers of the few lines the
    engine reports first, then `lines` counts only what is left after the last of them (a
    whole count up front would be a second pass over every byte of a long log).
    """

    __slots__ = ("_lines", "_numbers", "_offsets", "_text", "first_line", "raw", "source")

    def __init__(self, source: str, first_line: int, raw: bytes, text: str | None = None):
        self.source = source
        self.first_line = first_line
        self.raw = raw
        self._text = text
        self._lines: int | None = None
        # line numbers found so far, by byte offset (ascending)
        self._offsets = [0]
        self._numbers = [first_line]

    @property
    def lines(self) -> int:
        if self._lines is None:
            raw = self.raw
            newlines = self.line_at(len(raw)) - self.first_line
            self._lines = newlines + (1 if raw and not raw.endswith(b"\n") else 0)
        return self._lines

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.raw.decode("utf-8", "replace")
        return self._text

    def line_at(self, offset: int) -> int:
        """The input line number of the line holding byte `offset`."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        base = self._offsets[i]
        if base == offset:
            return self._numbers[i]
        number = self._numbers[i] + self.raw.count(b"\n", base, offset)
        self._offsets.insert(i + 1, offset)
        self._numbers.insert(i + 1, number)
        return number

    def __repr__(self) -> str:
        return f"Chunk({self.source!r}, line {self.first_line}, {len(self.raw)} bytes)"


# Control bytes (binary junk) and colour codes are removed from the few lines that are read
# (clean_line): a pass over every byte of a long log costs more than the whole scan.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")
_CR_TO_SPACE = bytes.maketrans(b"\r", b" ")
# what a forum, a word processor or a web page's layout puts in for ASCII: typographic quotes,
# no-break and other fixed-width spaces, zero-width spaces and a byte-order mark
_TYPOGRAPHY = tuple(
    (c.encode(), p)
    for c, p in (
        ("\u2018", b"'"),
        ("\u2019", b"'"),
        ("\u201c", b'"'),
        ("\u201d", b'"'),
        ("\u00a0", b" "),
        ("\u2007", b" "),
        ("\u2009", b" "),
        ("\u202f", b" "),
        ("\u3000", b" "),
        ("\u200b", b""),
        ("\ufeff", b""),
    )
)
_TYPOGRAPHY_LEADS = (b"\xc2\xa0", b"\xe2\x80", b"\xe3\x80\x80", b"\xef\xbb\xbf")


def clean_bytes(data: bytes) -> bytes:
    """Byte-level cleaning at C speed: CRLF line ends, progress-bar carriage returns."""
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").translate(_CR_TO_SPACE)
    return data


def clean(text: str) -> str:
    """Normalise a block of whole lines (no line is added or removed).

    Each step first checks, at C speed, whether it has anything to do: most of a huge log
    needs none of them, and a regex pass over every line would dominate the run time. Quote
    prefixes and backtick wrappers are left to `clean_line`, applied only to the few lines
    the engine looks at.
    """
    if '\\n"' in text:
        if '{"' in text or '{ "' in text:
            text = _JSON_RECORD.sub(_unescape, text)
        text = _JSON_LINE.sub(_unescape, text)
    return text


# a run of digits longer than any number a log prints (a byte count has 20 at most): junk, cut
# short so that no reading of a number (int() refuses over 4,300 digits, a float overflows past
# 308) stumbles on it
DIGITS_KEPT = 39
_LONG_DIGIT_RUN = re.compile(rf"\d{{{DIGITS_KEPT + 1},}}")


def cap_digits(line: str) -> str:
    """The line with each run of more than DIGITS_KEPT digits cut to that many and "…"."""
    return _LONG_DIGIT_RUN.sub(lambda m: m.group()[:DIGITS_KEPT] + "\u2026", line)


def clean_line(line: str) -> str:
    """One line without control bytes, colour codes, a log collector's prefix, quote prefixes
    or backticks, and no run of digits too long to be a number."""
    if len(line) > DIGITS_KEPT:
        line = cap_digits(line)
    if not line.isprintable():
        line = _CONTROL.sub("", line)
    if "\x1b" in line:
        line = _ANSI.sub("", line).replace("\x1b", "")
    m = _ORIGIN.match(line)
    if m is not None:
        line = line[m.end() :]
    if line[:1] in _PREFIX_STARTS:
        quoted = _PREFIX.sub("", line, count=1)
        if line[:1] in (">", "|") and (m := _ORIGIN.match(quoted)) is not None:
            # a collector's prefix inside a quote: "> (pid=4240) ..."
            quoted = _PREFIX.sub("", quoted[m.end() :], count=1)
        line = quoted
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


# What people drop or pass by mistake: a screenshot of the error, a PDF, an archive, a binary.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"\x7fELF", "a program (ELF)"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
)


def not_text(head: bytes) -> str | None:
    """Why the first bytes of a file are not a text log ("a PNG image", "binary data"), or
    None for text: UTF-8, Latin-1, UTF-16 (with or without BOM) and a few stray control bytes
    pass; a known file signature or many NUL bytes do not."""
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if head[4:12] in (b"ftypheic", b"ftypmif1") or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        return "an image"
    sample = head[:8192]
    if not sample or _utf16(sample) is not None:
        return None
    controls = len(sample) - len(sample.translate(None, _BINARY_BYTES))
    if sample.count(0) > max(2, len(sample) // 100) or controls > max(8, len(sample) // 10):
        return "binary data"
    return None


# control bytes no text log is made of (tab, newlines, form feed and ESC of colours are not)
_BINARY_BYTES = bytes([*range(0, 9), 11, *range(14, 27), *range(28, 32)])


def _utf16(head: bytes) -> str | None:
    """The UTF-16 codec of a log saved that way (Windows PowerShell 5 redirection), or None."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    sample = head[:4096]
    if len(sample) < 16:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    return None


class LimitedStream(io.RawIOBase):
    """A stream that ends after `limit` bytes: a FIFO or a pipe that may never end (a
    `yes | tfdoctor diagnose`, `<(dmesg -w)`) is read only that far. `truncated` says whether
    the limit cut it."""

    def __init__(self, fh: BinaryIO, limit: int) -> None:
        super().__init__()
        self._fh, self._left, self.truncated = fh, limit, False

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            if not self.truncated:
                self.truncated = bool(self._fh.read(1))
            return b""
        want = self._left if size is None or size < 0 else min(size, self._left)
        data = self._fh.read(want)
        self._left -= len(data)
        return data

    def readall(self) -> bytes:
        parts = []
        while chunk := self.read(CHUNK_BYTES):
            parts.append(chunk)
        return b"".join(parts)

    def close(self) -> None:
        self._fh.close()
        super().close()


def _blocks(fh: BinaryIO) -> Iterator[bytes]:
    """The input in blocks of UTF-8 (or undecodable) bytes; UTF-16 input is transcoded."""
    block = fh.read(CHUNK_BYTES)
    codec = _utf16(block) if block else None
    if codec is None:
        while block:
            yield block
            block = fh.read(CHUNK_BYTES)
        return
    decoder = codecs.getincrementaldecoder(codec)(errors="replace")
    while block:
        yield decoder.decode(block).encode("utf-8", "replace")
        block = fh.read(CHUNK_BYTES)
    yield decoder.decode(b"", final=True).encode("utf-8", "replace")


def _iter_binary(fh: BinaryIO, source: str) -> Iterator[Chunk]:
    line_no = 1
    carry = b""
    for block in _blocks(fh):
        if not block:
            continue
        data = carry + block
        if line_no == 1 and len(data) <= UNWRAP_MAX_BYTES:
            carry = data  # a paste: one chunk with its last line, for unwrap to see it whole
            continue
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) < MAX_LINE_CHARS * 4:
                carry = data
                continue
            cut = len(data) - 1  # one enormous line: emit it (capped) and go on
        carry = data[cut + 1 :]
        chunk = _chunk(source, line_no, clean_bytes(data[: cut + 1]))
        yield chunk
        line_no += chunk.lines
    if carry:
        yield _chunk(source, line_no, clean_bytes(carry))


# Hard-wrapped pastes: a console (Windows' cmd is 80 columns) or a mail client cut every long
# line at one width. The cut halves are joined back (the continuation lines become empty, so
# line numbers stay those of the input). Only small inputs are pastes.
UNWRAP_MAX_BYTES = 512 << 10
_WRAP_WIDTHS = range(60, 256)
CONSOLE_WIDTHS = (80, 120)
# a line that starts a record of its own: never a wrapped line's continuation
_RECORD_START = re.compile(
    rb"^(?:\d{4}-\d\d-\d\d|\[|[IWEF]\d{4}|[IWEF] |\+|\||Traceback|  File |\w*Error:|>>>"
    rb"|[A-Z]\w*(?:Error|Exception)(?:[`'\"]|\s*$)"  # a traceback's last line, the bare class
    rb"|Epoch \d|\d+/\d+ +(?:\[|\xe2\x94\x81))"  # Keras' epoch header and progress bar (━)
)
_FIRST_TOKEN = re.compile(rb"^\s*\S+")
_DIGITS = re.compile(rb"\d+")
_SPACES = re.compile(rb"[ \t]+")


def _shape(line: bytes) -> bytes:
    """A line with its numbers and its column padding left out: rows of one table (a step
    count of 990 then of 1000, padded to one width) have one shape."""
    return _SPACES.sub(b" ", _DIGITS.sub(b"0", line))


_GAP = re.compile(rb"\S(?: {2,}|\t+)(?=\S)")


def _table_rows(line: bytes, after: bytes) -> bool:
    """Two rows of one table printed in columns (free's, top's, ps's), whose rows a terminal
    pads to one width: each has three column gaps or more. Wrapped text has hardly any."""
    return len(_GAP.findall(line)) >= 3 and len(_GAP.findall(after)) >= 3


def _same_kind(line: bytes, after: bytes) -> bool:
    """Two rows of one numbered table (memory_profiler's line numbers, a step count), or one
    message printed twice ("Dumping heap profile to ..."): the next line starts as this one
    does, numbers aside. A cut line's tail starts anywhere in a word, seldom with the very word
    its line began with."""
    a, b = _FIRST_TOKEN.match(line), _FIRST_TOKEN.match(after)
    if a is None or b is None or _shape(a.group()) != _shape(b.group()):
        return False
    return _DIGITS.search(a.group()) is not None or len(a.group().strip()) >= 4


def _columns(lines: list[bytes]) -> list[int]:
    """Each line's length in characters, as a terminal or a mail program wraps: a path's
    non-ASCII hyphen or a line of CJK prose is longer in bytes. (Chunks come from
    `clean_bytes`: no carriage return is left to count.)"""
    return [len(ln) if ln.isascii() else len(ln.decode("utf-8", "replace")) for ln in lines]


def unwrap(raw: bytes) -> bytes:
    """Join the lines of a paste hard-wrapped at one width; anything else comes back as it is.

    Wrapped means: at least two lines are exactly as long as the longest line, each followed by
    a line that does not start a record of its own; and they differ (numbers aside), or each is
    followed by a shorter tail.
    """
    if len(raw) > UNWRAP_MAX_BYTES or b"\n" not in raw:
        return raw
    lines = raw.split(b"\n")
    # what a terminal shows: colour codes take no column (a coloured log's every line is 9
    # bytes longer, and its first characters are the code, not the record's start)
    shown = [_ANSI_BYTES.sub(b"", ln) for ln in lines] if b"\x1b" in raw else lines
    sizes = _columns(shown)
    width = max(sizes)
    if width not in _WRAP_WIDTHS:
        return raw
    # (a notebook's JSON source ends each output line in a written-out break, "...\\n",: a
    # whole line, however long)
    cut = [
        i
        for i in range(len(lines) - 1)
        if sizes[i] == width
        and shown[i + 1].strip()
        and not shown[i].endswith((b"|", b"+", b"-", b"=", b'\\n",', b'\\n"'))
        and not _RECORD_START.match(shown[i + 1])
        and not _same_kind(shown[i], shown[i + 1])
        and not _table_rows(shown[i], shown[i + 1])
    ]
    if cut:
        # a wording seen on a line of its own (first, or after a line short of the width):
        # the script printed it again after a line that happened to be as long, not a wrapped
        # tail ("memory: 1.2 GB" after each Keras checkpoint line, one of them 80 columns)
        alone = {
            _shape(shown[j].strip())
            for j in range(len(lines))
            if shown[j].strip() and (j == 0 or sizes[j - 1] < width)
        }
        cut = [i for i in cut if _shape(shown[i + 1].strip()) not in alone]
    # the same line over and over at the longest length is a repeated message, not a wrap,
    # unless each is followed by a shorter tail
    tails_short = all(sizes[i + 1] < width for i in cut)
    # one cut line is enough at a console's own width (cmd's 80 columns, Terminal's 120)
    if len(cut) < (1 if width in CONSOLE_WIDTHS else 2) or (
        len({_shape(shown[i]) for i in cut}) < 2 and not tails_short and len(cut) > 1
    ):
        return raw
    head = joined = -1
    for i in cut:
        if i != joined:  # not the continuation just joined: a new wrapped record starts here
            head = i
        lines[head] += lines[i + 1]
        lines[i + 1] = b""
        joined = i + 1
    return b"\n".join(lines)


# Pastes cut at no one width: a reporter or a forum re-flowed the text, a narrow window wrapped
# it with an indent. A line cut mid-sentence goes on in the next one, which starts no record of
# its own. Joined only for a second reading of a paste the first reading found nothing sure in
# (engine.diagnose), and only where the joined line says what neither half said: a guess at
# where a line went on, never trusted over the paste as it is.
CUT_LINE_MIN_CHARS = 30  # a line shorter than this ended where its writer ended it
CUT_LINE_MAX_CHARS = 300  # a line longer than this was never re-flowed (and joins stay small)
CUT_LINES_JOINED = 8  # a message cut into at most this many more lines
_SENTENCE_END = (".", "!", "?", "'", '"')


def _indent(raw: bytes) -> int:
    return len(raw) - len(raw.lstrip(b" \t"))


def _cut_here(line: str, raw: bytes, after: bytes, after_clean: str) -> bool:
    """Whether `line` (cleaned; `raw` as it came) may have been cut and `after` (raw, and
    cleaned) go on with it: indented as much or more (a line further left starts anew)."""
    text = line.rstrip()
    if not CUT_LINE_MIN_CHARS <= len(text) <= CUT_LINE_MAX_CHARS or text.endswith(_SENTENCE_END):
        return False
    if len(after_clean) > CUT_LINE_MAX_CHARS:
        return False
    if _indent(after) < _indent(raw):
        return False
    if text.lstrip().startswith("File "):  # a traceback frame: its code line follows
        return False
    tail = after_clean.strip().encode("utf-8", "replace")
    return bool(tail) and not (
        _RECORD_START.match(tail)
        or _RECORD_START.match(after)
        or _same_kind(text.encode("utf-8", "replace"), after)
        or len(_GAP.findall(after)) >= 3  # a table's row (re-flowed text has no column gaps)
    )


def rejoin_cut_lines(raw: bytes, completes: Callable[[str, str, str], bool]) -> bytes:
    """The paste with each line cut mid-message joined with the lines it goes on in (cleaned,
    one space between; or nothing between, for a line cut mid-word at a fixed column), where
    `completes(line, rest, joined)` says the joined line holds a message that neither the line
    nor the rest held alone; the continuation lines become empty, so line numbers stay the
    input's. The input itself when nothing was joined, or when it is too big to be a paste."""
    if len(raw) > UNWRAP_MAX_BYTES or b"\n" not in raw:
        return raw
    lines = raw.split(b"\n")
    cleaned = [clean_line(line.decode("utf-8", "replace")) for line in lines]
    # cut at a fixed column instead (a mail program, a page's <pre> of set width): a line as
    # long as the longest goes on mid-word, the halves joined with nothing between
    sizes = _columns(lines)
    width = max(sizes)
    joined = False
    i = 0
    while i < len(lines) - 1:
        head, rest, last = cleaned[i].rstrip(), "", i
        tight_head, tight = cleaned[i], ""
        tight_on, tail = True, b""
        for k in range(i + 1, min(i + 1 + CUT_LINES_JOINED, len(lines))):
            if not _cut_here(cleaned[k - 1], lines[k - 1], lines[k], cleaned[k]):
                break
            rest = f"{rest} {cleaned[k].strip()}".lstrip()
            if completes(head, rest, f"{head} {rest}"):
                last, tail = k, b" " + rest.encode()
                break
            tight_on = tight_on and sizes[k - 1] == width
            if not tight_on:
                continue
            tight += (" " if lines[k][:1].isspace() else "") + cleaned[k]
            if completes(tight_head, tight, tight_head + tight):
                last, tail = k, tight.encode()
                break
        if last > i:
            lines[i] = (lines[i].rstrip() if tail[:1] == b" " else lines[i]) + tail
            for k in range(i + 1, last + 1):
                lines[k] = b""
            joined = True
        i = last + 1
    return b"\n".join(lines) if joined else raw


# A paste copied out of a web page's HTML source keeps its entities: &#39;libcudart.so&#39;
_ENTITY = re.compile(rb"&(?:#\d{2,4}|#x[0-9a-fA-F]{2,4}|quot|apos|lt|gt|amp|nbsp);")
_ENTITY_HINTS = (
    b"&#39;",
    b"&quot;",
    b"&gt;",
    b"&lt;",
    b"&amp;",
    b"&#x27;",
    b"&#34;",
    b"&#60;",
    b"&#62;",
)


def unescape_html(raw: bytes) -> bytes:
    """The text of a paste whose quotes and brackets came as HTML entities; line breaks stay
    where they are (an encoded line break becomes a space)."""
    if len(raw) > UNWRAP_MAX_BYTES or not any(h in raw for h in _ENTITY_HINTS):
        return raw

    def one(m: re.Match[bytes]) -> bytes:
        text = html.unescape(m.group(0).decode("ascii"))
        return b" " if text in ("\n", "\r") else text.encode("utf-8")

    return _ENTITY.sub(one, raw)


# A paste copied with its HTML markup (a web page's source, an issue written in HTML): a line
# break where its line ended (one already followed by a line break only goes away), and the
# <pre>/<code> tags around it, which no program prints
_HTML_BREAK = re.compile(rb"(?i)<br[ \t]*+/?>(\r?\n)?|</?(?:pre|code)>")


def plain_html(raw: bytes) -> bytes:
    """The paste without its HTML line breaks (<br>, <br/>: the line breaks they stand for)
    and <pre>/<code> tags."""
    if len(raw) > UNWRAP_MAX_BYTES or b"<" not in raw or _HTML_BREAK.search(raw) is None:
        return raw
    return _HTML_BREAK.sub(
        lambda m: m.group(1) or (b"\n" if m.group(0)[1:3].lower() == b"br" else b""), raw
    )


ESCAPED_LINES_MIN = 3  # "\n" written out this often in one line: a printed repr or JSON string
_ESCAPED_BREAK = re.compile(rb"(?<!\\)\\n")
# a backslash a repr or JSON would not write alone: a Windows path (C:\Users\...\nvcc)
_OTHER_ESCAPE = re.compile(rb"(?<!\\)\\[^\\nrt'\"xu0/]")


def _escaped(line: bytes) -> bool:
    return (
        len(_ESCAPED_BREAK.findall(line)) >= ESCAPED_LINES_MIN
        and _OTHER_ESCAPE.search(line) is None
    )


def split_escaped(raw: bytes) -> bytes:
    """A paste of output printed as a Python bytes/str repr or a JSON string (b'...\\n...'), its
    line breaks written out: each written-out break becomes a real one. A paste only; a line
    with one escape (a notebook's JSON, a format string) or with a Windows path stays as it is."""
    if len(raw) > UNWRAP_MAX_BYTES or b"\\n" not in raw:
        return raw
    lines = raw.split(b"\n")
    if not any(_escaped(line) for line in lines):
        return raw
    return b"\n".join(
        _ESCAPE.sub(_unescape_one, line) if _escaped(line) else line for line in lines
    )


_ESCAPE = re.compile(rb"\\(?:r\\n|[nrt'\"\\])")
_UNESCAPED = {b"\\n": b"\n", b"\\r\\n": b"\n", b"\\r": b" ", b"\\t": b"\t"}


def _unescape_one(m: re.Match[bytes]) -> bytes:
    return _UNESCAPED.get(m.group(0), m.group(0)[1:])


def plain_typography(raw: bytes) -> bytes:
    """A paste whose quotes and spaces a forum, an editor or a web page made typographic (curly
    quotes, no-break spaces, zero-width spaces): TensorFlow printed ASCII."""
    if len(raw) > UNWRAP_MAX_BYTES or not any(lead in raw for lead in _TYPOGRAPHY_LEADS):
        return raw
    for fancy, plain in _TYPOGRAPHY:
        raw = raw.replace(fancy, plain)
    return raw


# a backslash a Markdown or rich-text editor put before punctuation it would otherwise format:
# cuda\_dnn.cc, CUDNN\_STATUS\_INTERNAL\_ERROR, \[\[{{node conv2d}}\]\]
_MARKDOWN_ESCAPE = re.compile(rb"\\([_*\[\]#<>`|~])")
MARKDOWN_ESCAPES_MIN = 2
_MARKDOWN_NAME_ESCAPE = re.compile(rb"(?<=[A-Za-z0-9])\\_(?=[A-Za-z0-9])")


def plain_markdown(raw: bytes) -> bytes:
    """A paste whose underscores, asterisks and brackets an editor escaped for Markdown: the
    characters TensorFlow printed. Only when the paste has several such escapes, or one
    escaped underscore inside a name; a Windows path's lone backslash before an underscore
    loses nothing a diagnosis reads."""
    if len(raw) > UNWRAP_MAX_BYTES or b"\\" not in raw:
        return raw
    if len(_MARKDOWN_ESCAPE.findall(raw, 0, 1 << 16)) < MARKDOWN_ESCAPES_MIN:
        # one escape is enough inside a name: cudart64\_100.dll, CUDNN\_STATUS
        return _MARKDOWN_NAME_ESCAPE.sub(b"_", raw)
    return _MARKDOWN_ESCAPE.sub(rb"\1", raw)


# what a runner writes before every line of a job's output: a bracketed stream, pod or rank
# ("[stderr] ", "[pod/trainer-0/trainer] ", mpirun's "[1,0]<stderr>:"), srun's "0: ",
# pytest's "E       ", a container's "algo-1-3x2kf  | "; and a list's bullet on every line, as a
# rich-text page or chat copies a log
_RUNNER_TAG = re.compile(
    rb"(?:\[[^\]\n]{1,40}\](?:<std(?:out|err)>)?:?[ \t]*|\d{1,4}:[ \t]+|[A-Z] {3,}"
    rb"|[\w.-]{1,40} +\| |(?:" + b"|".join(re.escape(b.encode()) for b in BULLETS) + rb")[ \t]+)"
)
SHARED_PREFIX_LINES = 3


def strip_shared_prefix(raw: bytes) -> bytes:
    """A paste whose every line starts with one runner's tag: the lines without it."""
    if len(raw) > UNWRAP_MAX_BYTES or b"\n" not in raw:
        return raw
    lines = raw.split(b"\n")
    filled = [line for line in lines if line.strip()]
    if len(filled) < SHARED_PREFIX_LINES:
        return raw
    first, last = min(filled), max(filled)  # their common prefix is every line's
    if first == last or _ORIGIN.match(first.decode("utf-8", "replace")) is not None:
        return raw  # one line over and over; a collector's prefix clean_line takes off
    n = 0
    while n < len(first) and n < len(last) and first[n] == last[n]:
        n += 1
    m = _RUNNER_TAG.match(first[:n])
    if m is None:
        return raw
    tag = m.group()
    return b"\n".join(line[len(tag) :] if line.startswith(tag) else line for line in lines)


# a line number in an editor's, a code viewer's or cat -n's gutter: the number, then a tab, a
# bar or colon, or one or two spaces (the line's own indentation stays)
_GUTTER = re.compile(rb"[ \t]*(\d{1,6})(?:\t| ?[|:] ?| {1,2})")
GUTTER_MIN_LINES = 3
GUTTER_SHARE = 0.9  # of the non-empty lines: numbered, each one more than the line before


def strip_gutter(raw: bytes) -> bytes:
    """A paste copied with its line numbers (cat -n, an editor's or a web viewer's gutter): the
    lines without them. Only when nearly every line is numbered, one more than the last."""
    if len(raw) > UNWRAP_MAX_BYTES or raw[:1] not in b" \t0123456789":
        return raw
    lines = raw.split(b"\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    if len(filled) < GUTTER_MIN_LINES:
        return raw
    found = {i: m for i in filled if (m := _GUTTER.match(lines[i])) is not None}
    if len(found) < GUTTER_SHARE * len(filled):
        return raw
    numbers = [int(found[i].group(1)) for i in filled if i in found]
    steps = sum(b == a + 1 for a, b in itertools.pairwise(numbers))
    if steps < GUTTER_SHARE * (len(numbers) - 1):
        return raw
    for i, m in found.items():
        lines[i] = lines[i][m.end() :]
    return b"\n".join(lines)


# An issue template's field names in bold ("- **TensorFlow version (use command below)**: 1.4",
# "**CUDA/cuDNN version** : 10.1"): the label as the plain templates wrote it; a list item's
# bold label with its answer after it and no colon ("- **CUDA Compute Capability Version** 2.1",
# faceswap's template) takes one
_BOLD_LABEL = re.compile(rb"\*\*([^*\n]{1,80}?)\*\*(?=[ \t]*:)")
_BOLD_ITEM_LABEL = re.compile(
    rb"(?m)^([ \t]*+[-*+][ \t]++)\*\*([^*:\n]{1,80})\*\*[ \t]++(?=[^\s:])"
)


def plain_bold_labels(raw: bytes) -> bytes:
    """A paste whose template labels are in Markdown bold: the labels without the asterisks."""
    if len(raw) > UNWRAP_MAX_BYTES or b"**" not in raw:
        return raw
    return _BOLD_ITEM_LABEL.sub(rb"\1\2: ", _BOLD_LABEL.sub(rb"\1", raw))


# a template's answer in Markdown inline code ("- CUDA/cuDNN version: `11.0 / v8.0.1`", as
# TensorFlow's old issue template invited): the answer without its backticks, so the lines
# that read "Field: value" read it (a label has no backtick; the code span ends on its line)
_CODE_ANSWER = re.compile(
    rb"(?m)^([ \t>]*+(?:[-*+][ \t]++)?[^\n:`]{1,80}:[ \t]*+)`([^`\n]{1,160})`"
)


def plain_code_answers(raw: bytes) -> bytes:
    """A paste whose template answers are in inline code: the answers without the backticks."""
    if len(raw) > UNWRAP_MAX_BYTES or b":" not in raw or b"`" not in raw:
        return raw
    return _CODE_ANSWER.sub(rb"\1\2", raw)


# GitHub's issue forms (TensorFlow's since 2022) print each field as a heading and its answer
# on a line of its own after a blank line: "### TensorFlow version", "", "2.18.0". Joined as
# the older templates wrote them ("TensorFlow version: 2.18.0"), the lines that read those read
# these; the answer's own line is left empty, so line numbers stay those of the input.
_FORM_HEADING = re.compile(
    rb"^#{2,4}[ \t]+(?P<label>(?i:tensorflow|tf|os|cuda|gpu|python|keras|operating|platform)"
    rb"\b[^\n#]{0,60}?)[ \t]*$"
)
FORM_ANSWER_MAX = 160  # an answer, not a paragraph
FORM_GAP_LINES = 2  # blank lines a form puts between a heading and its answer


def join_form_fields(raw: bytes) -> bytes:
    """Each issue-form heading that names a version, a platform or a GPU, with its one-line
    answer after it."""
    if len(raw) > UNWRAP_MAX_BYTES or b"#" not in raw:
        return raw
    lines = raw.split(b"\n")
    joined = False
    for i, line in enumerate(lines):
        m = _FORM_HEADING.match(line) if line.startswith(b"#") else None
        if m is None:
            continue
        for j in range(i + 1, min(i + 2 + FORM_GAP_LINES, len(lines))):
            answer = lines[j].strip()
            if not answer:
                continue
            if len(answer) <= FORM_ANSWER_MAX and not answer.startswith((b"#", b"```")):
                lines[i] = m.group("label") + b": " + answer
                lines[j] = b""
                joined = True
            break
    return b"\n".join(lines) if joined else raw


# a page that wrapped long lines and gave each wrap back as two spaces (Colab's runtime-log
# viewer: "Cannot dlopen  some GPU libraries"): between two words, where TensorFlow writes
# one, a second space is what the paste added, on every line it wrapped. Only a paste that
# shows it between two lower-case words (which no log the corpus holds does), and not in the
# lines of a table (nvidia-smi's).
_WRAP_SPACES = re.compile(rb"[a-z,]  [a-z]")
_DOUBLE_SPACE = re.compile(rb"(?<=\S)  (?=\S)")


def single_spaces(raw: bytes) -> bytes:
    """A paste whose words are now and then two spaces apart: one space between them."""
    if len(raw) > UNWRAP_MAX_BYTES or _WRAP_SPACES.search(raw) is None:
        return raw
    lines = raw.split(b"\n")
    for i, line in enumerate(lines):
        if not line.lstrip().startswith((b"|", b"+")):
            lines[i] = _DOUBLE_SPACE.sub(b" ", line)
    return b"\n".join(lines)


# what a paste went through on its way, undone in this order (each returns it unchanged when
# it has nothing to do); a paste is one chunk, never the tail of a big log
_PASTE_REPAIRS = (
    strip_gutter,
    strip_shared_prefix,
    split_escaped,
    plain_typography,
    plain_markdown,
    plain_bold_labels,
    plain_code_answers,
    join_form_fields,
    plain_html,
    unescape_html,
    single_spaces,
    unwrap,
)


BACKSLASHES_WALKED = 512  # past this many, one C search for the escaped line end is cheaper


def _json_escaped(raw: bytes) -> bool:
    """Whether the chunk holds a JSON-escaped line end (\\n"). A search for the three bytes
    steps through the whole chunk (2.4 ms per 4 MiB, a third of the time Python takes to iterate
    its lines); the backslash they start with is rare in a log and memchr finds it at once, so
    the few backslashes there are are checked one by one."""
    i, walked = raw.find(b"\\"), 0
    while i >= 0:
        if raw[i + 1 : i + 3] == b'n"':
            return True
        walked += 1
        if walked > BACKSLASHES_WALKED:
            return raw.find(b'\\n"', i) >= 0
        i = raw.find(b"\\", i + 1)
    return False


def _chunk(source: str, line_no: int, raw: bytes) -> Chunk:
    if line_no == 1:
        for repair in _PASTE_REPAIRS:
            raw = repair(raw)
    if _json_escaped(raw):
        # JSON-escaped output lines (a notebook, a Jupyter JSON log): unescape them, and keep
        # raw and text the same characters
        text = clean(raw.decode("utf-8", "replace"))
        return Chunk(source, line_no, text.encode("utf-8", "replace"), text)
    return Chunk(source, line_no, raw)


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
