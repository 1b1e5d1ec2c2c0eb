"""The crash causes (causes.toml): the taxonomy the diagnosis names, each with its fixes."""

from __future__ import annotations

import functools
import os
from collections.abc import Collection
from dataclasses import dataclass

from tfdoctor.core.knowledge import catalog
from tfdoctor.core.knowledge.loader import KNOWLEDGE_DIR, Row, check_refs, read_toml, unique

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
    # causes whose signs look the same in a log (a library not found may be absent or another
    # version): when this cause is named first they follow it as low candidates, in this order
    look_alikes: tuple[str, ...] = ()
    # how a user confirms this cause on the machine (what to run or capture), said when it is
    # offered as a look-alike
    confirm: str = ""


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
            unknown fix id, a reliability outside RELIABILITY_RANGE, or a look-alike that is not
            another cause of the file.
    """
    known = catalog.fixes() if fixes is None else fixes
    top = Row(read_toml(path), str(path), {"cause"})
    out: dict[str, CauseInfo] = {}
    seen: set[str] = set()
    alike: dict[str, str] = {}  # cause id -> where its row is, to check look-alikes at the end
    for i, raw in enumerate(top.tables("cause"), 1):
        row = Row.entry(
            raw,
            f"{path}: [[cause]] #{i}",
            {"id", "title", "explanation", "fixes", "reliability", "look_alikes", "confirm"},
        )
        cid = row.req_str("id")
        unique(row.where, "cause id", cid, seen)
        out[cid] = CauseInfo(
            cid,
            row.req_str("title"),
            row.req_str("explanation"),
            row.refs("fixes", known, "fix ids"),
            row.opt_float("reliability", 1.0, RELIABILITY_RANGE[0], RELIABILITY_RANGE[1]),
            row.str_list("look_alikes", required=False),
            row.opt_str("confirm") or "",
        )
        alike[cid] = row.where
    for cid, where in alike.items():
        check_refs(where, "look_alikes", out[cid].look_alikes, set(out) - {cid}, "other cause ids")
    return out


@functools.cache
def causes() -> dict[str, CauseInfo]:
    """The shipped causes, cross-checked against the shipped fixes (cached)."""
    return load_causes()
