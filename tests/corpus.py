"""The real-log corpus: logs users posted in public threads, each labelled with the cause the
thread established. Two parts, split once by a hash of the source URL before any tuning:
`dev` (tune on it) and `sealed` (only ever scored). See tests/fixtures/corpus/README.md."""

from __future__ import annotations

import functools
import hashlib
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tfdoctor.core.diagnose.engine import diagnose
from tfdoctor.core.diagnose.reader import iter_chunks
from tfdoctor.core.knowledge.words import WordProfile, train
from tfdoctor.core.model import Diagnosis

ROOT = Path(__file__).parent / "fixtures" / "corpus"
PARTS = ("dev", "sealed")
SEALED_SHARE = 0.45  # of the logs collected after the first 26 (those were dev from the start)
# sealed logs a rule was written off: by mistake (a line of their thread, harvested before the
# overlap was found), or knowingly, when reading a new sealed log at intake showed a form a
# whole class of logs takes (Windows' DLL start-up failure in Dutch, `docker ps` showing a
# container's restart loop). The clean sealed score leaves them out (fixtures/corpus/README.md)
TUNED_ON_SEALED = frozenset(
    {
        "missing_cuda_libs__pythonlessons-tf2-yolov3-105.txt",
        "cpu_instructions_unsupported__boy1dr-SpleeterGui-52.txt",
        "cpu_instructions_unsupported__exadel-inc-CompreFace-1026.txt",
    }
)


@dataclass(frozen=True)
class Case:
    name: str
    part: str
    want: str  # the established cause id, or "none"
    log: str
    meta: dict[str, str]


def parse(path: Path, part: str) -> Case:
    head, _, log = path.read_text(encoding="utf-8", errors="replace").partition("\n---\n")
    meta = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    want = meta["expect"] if meta["label"] == "other" else meta["label"]
    return Case(path.name, part, want, log, meta)


def cases(*parts: str) -> list[Case]:
    """The cases of these parts (all parts when none is named), in a stable order."""
    out = []
    for part in parts or PARTS:
        out += [parse(f, part) for f in sorted((ROOT / part).glob("*.txt"))]
    return out


def part_for(source_url: str) -> str:
    """Where a newly collected log goes: decided by its source URL alone, once."""
    digest = hashlib.sha256(source_url.strip().encode()).digest()
    return "sealed" if digest[0] < int(256 * SEALED_SHARE) else "dev"


def as_read(log: str) -> bytes:
    """A log's text as the engine reads it (its cleaned lines)."""
    return b"\n".join(chunk.raw for chunk in iter_chunks(log.encode("utf-8"), "log"))


def word_profile_of(logs: list[Case]) -> WordProfile:
    """The wording profile these logs give (core/knowledge/words.toml is the dev part's)."""
    return train((case.want, as_read(case.log)) for case in logs)


FOLDS = 10  # the dev part's logs are scored with a wording profile of the other folds'


def fold_of(case: Case) -> int:
    return hashlib.sha256(case.name.encode()).digest()[0] % FOLDS


@functools.cache
def _profile_without_fold(fold: int) -> WordProfile:
    return word_profile_of([c for c in cases("dev") if fold_of(c) != fold])


def engine_for(case: Case) -> Callable[[bytes], Diagnosis]:
    """The engine as a log it was not built from meets it. The shipped wording profile is the
    dev part's: a dev log is diagnosed with one counted without its fold (cross-validation),
    so its score is not the profile remembering it; a sealed log with the shipped one."""
    if case.part != "dev":
        return diagnose
    return functools.partial(diagnose, words=_profile_without_fold(fold_of(case)))


@dataclass(frozen=True)
class CutResult:
    """What the engine answers for one log once the lines that proved its cause are gone."""

    name: str
    want: str
    outcome: str  # "first", "top3", "other", "silent", or "nothing left"
    got: tuple[str, ...]


def without_key_lines(case: Case, diagnose: Callable[[bytes], Diagnosis]) -> CutResult | None:
    """The log with the evidence lines of its (right) first cause taken out, diagnosed again.

    Real pastes lose exactly those lines: the stored thread cut the paste, a console wrapped
    the message away, the user copied the traceback but not the log above it. What is left
    (the hint after an OOM, an abort after the import, the advice under a cuDNN mismatch) still
    shows the cause to an expert. None for a log the engine does not get right first, or a
    harmless one.
    """
    first = diagnose(case.log.encode()).causes[:1]
    if case.want == "none" or not first or first[0].id != case.want:
        return None
    gone = {e.line for e in first[0].evidence}
    kept = [ln for i, ln in enumerate(case.log.splitlines(), 1) if i not in gone]
    if not "".join(kept).strip():
        return CutResult(case.name, case.want, "nothing left", ())
    got = tuple(c.id for c in diagnose("\n".join(kept).encode()).causes)
    if not got:
        outcome = "silent"
    elif got[0] == case.want:
        outcome = "first"
    else:
        outcome = "top3" if case.want in got[:3] else "other"
    return CutResult(case.name, case.want, outcome, got)


REFLOW_WIDTHS = (47, 71, 58, 64, 52)  # one width per line in turn: no common width to find


def reflowed(log: str, indent: str = "", widths: tuple[int, ...] = REFLOW_WIDTHS) -> str:
    """The log as a reporter or a forum re-flows it: each line re-wrapped at word breaks, at
    widths that change from line to line, its continuation lines indented by `indent`."""
    out = []
    for i, line in enumerate(log.split("\n")):
        parts = textwrap.wrap(
            line, widths[i % len(widths)], break_long_words=False, break_on_hyphens=False
        ) or [line]
        out += [parts[0], *(indent + p for p in parts[1:])]
    return "\n".join(out)


def hard_wrapped(log: str, width: int) -> str:
    """The log as a mail program or a page's fixed-width block keeps it: every line longer
    than `width` cut at that column, mid-word as it falls."""
    out = []
    for line in log.split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


def container_logged(log: str) -> str:
    """The log as a container's logging driver stores it (Docker's json-file, which
    `docker logs` exports and cluster log collectors pass on): each line a JSON record."""
    return "".join(
        json.dumps(
            {"log": line + "\n", "stream": "stderr", "time": f"2021-03-04T05:06:{i % 60:02}Z"}
        )
        + "\n"
        for i, line in enumerate(log.split("\n"))
    )


def coloured(log: str) -> str:
    """The log as a terminal's output saved with its colour codes (a CI log, `script`, a
    notebook's coloured stream): each line in a colour, reset at its end."""
    return "\n".join(f"\x1b[31m{line}\x1b[0m" for line in log.split("\n"))


def notebook_json(log: str) -> str:
    """The log as an .ipynb keeps a cell's output: each line a JSON string ending in a
    written-out line break, a comma after it."""
    return "\n".join(json.dumps(line + "\n") + "," for line in log.split("\n"))


VIEWER_WRAP = 70


def viewer_wrapped(log: str, width: int = VIEWER_WRAP) -> str:
    """The log as a page's log viewer gives it back (Colab's runtime logs): each line whole,
    but the space where the viewer wrapped it, at about `width` columns, doubled."""
    out = []
    for line in log.split("\n"):
        words, col, pieces = line.split(" "), 0, []
        for i, word in enumerate(words):
            if i:
                wrap = col + 1 + len(word) > width
                pieces.append("  " if wrap else " ")
                col = len(word) if wrap else col + 1 + len(word)
            else:
                col = len(word)
            pieces.append(word)
        out.append("".join(pieces))
    return "\n".join(out)


def last_line_cut(log: str, share: float = 0.7) -> str:
    """The log as a stored thread keeps it when its excerpt ends inside the last line: that
    line cut after `share` of its characters."""
    lines = log.rstrip().split("\n")
    return "\n".join([*lines[:-1], lines[-1][: int(len(lines[-1]) * share)]])
