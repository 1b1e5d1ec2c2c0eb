"""Every knowledge file of a folder, loaded together and cross-checked (ids, fields, examples)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tfdoctor.core.knowledge.catalog import Fix, load_fixes
from tfdoctor.core.knowledge.causes import CauseInfo, load_causes
from tfdoctor.core.knowledge.compat import Compat
from tfdoctor.core.knowledge.compat_load import COMPAT_FILE, load_from
from tfdoctor.core.knowledge.loader import KNOWLEDGE_DIR
from tfdoctor.core.knowledge.signatures import Signature, load_signatures


@dataclass(frozen=True)
class KnowledgeBase:
    """The knowledge files of one folder, each validated and every id it names resolved."""

    compat: Compat
    fixes: dict[str, Fix]
    causes: dict[str, CauseInfo]
    signatures: tuple[Signature, ...]


def load_all(folder: str | os.PathLike[str] = KNOWLEDGE_DIR) -> KnowledgeBase:
    """Load compat.toml, fixes.toml, causes.toml and signatures.toml from one folder.

    A cause's fixes are checked against that folder's fixes.toml, a signature's causes against
    its causes.toml, so an edited copy is judged as a whole.

    Raises:
        KnowledgeError: a file is missing or malformed, has an unknown field or a duplicate
            id, or names an id (fix, cause, benchmark knob) that does not exist.
    """
    root = Path(folder)
    fixes = load_fixes(root / "fixes.toml")
    causes = load_causes(root / "causes.toml", fixes=fixes)
    signatures = load_signatures(root / "signatures.toml", causes=causes)
    return KnowledgeBase(load_from(root / COMPAT_FILE), fixes, causes, signatures)
