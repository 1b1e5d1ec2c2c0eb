"""The real-log corpus: logs users posted in public threads, each labelled with the cause the
thread established. Two parts, split once by a hash of the source URL before any tuning:
`dev` (tune on it) and `sealed` (only ever scored). See tests/fixtures/corpus/README.md."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parent / "fixtures" / "corpus"
PARTS = ("dev", "sealed")
SEALED_SHARE = 0.45  # of the logs collected after the first 26 (those were dev from the start)


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
