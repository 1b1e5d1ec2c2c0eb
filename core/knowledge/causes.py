"""The crash causes (causes.toml): the taxonomy the diagnosis names, each with its fixes."""

from __future__ import annotations

import functools
import os
from collections.abc import Collection
from dataclasses import dataclass

from tfdoctor.core.knowledge import catalog
from tfdoctor.core.knowledge.loader import KNOWLEDGE_DIR, Row, read_toml, unique

CAUSES_FILE = KNOWLEDGE_DIR / "causes.toml"


@dataclass(frozen=True)
class CauseInfo:
    id: str
    title: str
    explanation: str
    fixes: tuple[str, ...]
    # how often the dev corpus found this cause right when named first, against the
    # confidence it stated (1.0: as stated); the engine scales what it states by it
    reliability: float = 1.0


RELIABILITY_RANGE = (0.5, 1.5)  # a factor outside this would say the engine is badly off


def load_causes(
    path: str | os.PathLike[str] = CAUSES_FILE, fixes: Collection[str] | None = None
) -> dict[str, CauseInfo]:
    """The cause catalogue by id.

    Args:
        path: causes.toml, or a file of the same layout.
        fixes: The fix ids causes may name (default: the shipped fix catalog).

    Raises:
        KnowledgeError: bad TOML, an unknown field, a duplicate id, a missing field, an
            unknown fix id, or a reliability outside RELIABILITY_RANGE.
    """
    known = catalog.fixes() if fixes is None else fixes
    top = Row(read_toml(path), str(path), {"cause"})
    out: dict[str, CauseInfo] = {}
    seen: set[str] = set()
    for i, raw in enumerate(top.tables("cause"), 1):
        row = Row.entry(
            raw, f"{path}: [[cause]] #{i}", {"id", "title", "explanation", "fixes", "reliability"}
        )
        cid = row.req_str("id")
        unique(row.where, "cause id", cid, seen)
        out[cid] = CauseInfo(
            cid,
            row.req_str("title"),
            row.req_str("explanation"),
            row.refs("fixes", known, "fix ids"),
            row.opt_float("reliability", 1.0, RELIABILITY_RANGE[0], RELIABILITY_RANGE[1]),
        )
    return out


@functools.cache
def causes() -> dict[str, CauseInfo]:
    """The shipped causes, cross-checked against the shipped fixes (cached)."""
    return load_causes()
