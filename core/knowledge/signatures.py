"""Log signatures (signatures.toml): the one set of known log lines, for every reader.

The crash diagnosis scans logs with them, the environment checks read the target probe's
output with them, and the system probe parses kernel-log records with the named ``parts`` of
a signature, so each message is described once.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from tfdoctor.core.knowledge import causes as causes_mod
from tfdoctor.core.knowledge.loader import (
    KNOWLEDGE_DIR,
    KnowledgeError,
    Row,
    check_refs,
    read_toml,
    unique,
)

SIGNATURES_FILE = KNOWLEDGE_DIR / "signatures.toml"
_FIELDS = {
    "id", "anchor", "pattern", "parts", "causes", "noise", "role", "examples", "counterexamples",
    "says", "echo_of", "keep",
}  # fmt: skip
# "{group}", "{group|kib}" (a number of KiB said in MiB/GiB), "{group|bytes}", or
# "{group|cudnn}" (cuDNN's numeric version 5103 said as 5.1.3)
SAYS_FIELD = re.compile(r"\{(?P<group>[A-Za-z_]\w*)(?:\|(?P<unit>kib|bytes|cudnn))?\}")


@dataclass(frozen=True)
class Signature:
    """One known log message.

    ``pattern`` matches a line when any of the signature's ``parts`` (named regexes other
    code reads records with) or its own pattern text does.
    """

    id: str
    anchors: tuple[str, ...]
    pattern: re.Pattern[str]
    causes: Mapping[str, float]
    noise: bool = False
    role: str | None = None
    examples: tuple[str, ...] = ()
    counterexamples: tuple[str, ...] = ()
    parts: Mapping[str, re.Pattern[str]] = field(default_factory=dict)
    # sentences that say the numbers the line holds, best first: the first whose groups all
    # matched is added to the explanation of the signature's causes
    says: tuple[str, ...] = ()
    # the messages this line follows (TF's hint after an out-of-memory error, the advice after
    # a cuDNN mismatch): it counts only when none of them is in the log, i.e. when the paste
    # lost the message itself, which says more
    echo_of: tuple[str, ...] = ()
    # a series' readings kept (0: the engine's default): once that many are in, later lines
    # cannot change the trend and are not looked at
    keep: int = 0


FRAGMENT_REF = re.compile(r"\{\{(\w+)\}\}")


def _expand(text: str, fragments: dict[str, str], where: str) -> str:
    """A pattern with each ``{{name}}`` replaced by the file's ``[fragment]`` of that name."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in fragments:
            raise KnowledgeError(f"{where}: no fragment {m.group(1)!r}")
        return fragments[m.group(1)]

    return FRAGMENT_REF.sub(one, text)


def load_signatures(
    path: str | os.PathLike[str] = SIGNATURES_FILE, causes: Collection[str] | None = None
) -> tuple[Signature, ...]:
    """Signatures, compiled and validated against their own examples.

    Args:
        path: signatures.toml, or a file of the same layout.
        causes: The cause ids signatures may name (default: the shipped causes).

    Raises:
        KnowledgeError: bad TOML or regex, an unknown field, a duplicate id, an unknown cause
            id, an example that does not match (or a counterexample that does), or an anchor
            missing from a matching example (the prefilter would never find it).
    """
    known = causes_mod.causes() if causes is None else causes
    top = Row(read_toml(path), str(path), {"signature", "fragment", "echo_group"})
    fragments = dict(top.str_table("fragment"))
    groups = _echo_groups(top)
    out: list[Signature] = []
    seen: set[str] = set()
    for i, raw in enumerate(top.tables("signature"), 1):
        row = Row.entry(raw, f"{path}: [[signature]] #{i}", _FIELDS)
        sid = row.req_str("id")
        where = row.where
        unique(where, "signature id", sid, seen)
        anchors = row.str_or_list("anchor")
        if not anchors:
            raise KnowledgeError(f"{where}: no anchor")
        parts = {
            name: row.regex(f"parts.{name}", _expand(text, fragments, where))
            for name, text in row.str_table("parts")
        }
        text = row.opt_str("pattern")
        text = None if text is None else _expand(text, fragments, where)
        if text is None and not parts:
            raise KnowledgeError(f"{where}: no pattern")
        alternatives = [p.pattern for p in parts.values()] + ([text] if text else [])
        if len(alternatives) == 1:
            pattern = row.regex("pattern", alternatives[0])
        else:
            pattern = row.regex("pattern", "|".join(f"(?:{a})" for a in alternatives))
        weights = row.weight_table("causes")
        check_refs(where, "causes", weights, known, "cause ids")
        examples = row.str_list("examples", required=False)
        counter = row.str_list("counterexamples", required=False)
        if not examples:
            raise KnowledgeError(f"{where}: needs at least one example")
        for ex in examples:
            if not pattern.search(ex):
                raise KnowledgeError(f"{where}: does not match its example {ex!r}")
            if not any(a in ex + "\n" for a in anchors):  # a line, as the engine sees it
                raise KnowledgeError(f"{where}: no anchor in example {ex!r}")
        for ex in counter:
            if pattern.search(ex):
                raise KnowledgeError(f"{where}: matches its counterexample {ex!r}")
        says = row.str_list("says", required=False)
        for sentence in says:
            for m in SAYS_FIELD.finditer(sentence):
                if m.group("group") not in pattern.groupindex:
                    raise KnowledgeError(f"{where}: says {{{m.group('group')}}}: no such group")
        echo_of = tuple(
            sid
            for name in row.str_list("echo_of", required=False)
            for sid in groups.get(name, (name,))
        )
        if echo_of and not weights:
            raise KnowledgeError(f"{where}: echo_of without causes: it could never count")
        out.append(
            Signature(
                sid,
                anchors,
                pattern,
                weights,
                row.opt_bool("noise"),
                row.opt_str("role"),
                examples,
                counter,
                parts,
                says,
                echo_of,
                row.opt_int("keep"),
            )
        )
    for name, ids in groups.items():
        check_refs(f"{path}: [echo_group] {name}", "it", ids, seen, "signature ids")
    for sig in out:
        check_refs(f"{path}: signature {sig.id!r}", "echo_of", sig.echo_of, seen, "signature ids")
    return tuple(out)


def _echo_groups(top: Row) -> dict[str, tuple[str, ...]]:
    """``[echo_group]``: name = [signature ids], the messages several echoes follow, written
    once; an ``echo_of`` entry may name a group."""
    raw = top.data.get("echo_group", {})
    if not isinstance(raw, dict):
        raise KnowledgeError(f"{top.where}: echo_group must be a table of name = [ids]")
    where = f"{top.where}: [echo_group]"
    return {name: Row({name: ids}, where, {name}).str_list(name) for name, ids in raw.items()}


@functools.cache
def signatures() -> tuple[Signature, ...]:
    """The shipped signatures, cross-checked against the shipped causes (cached)."""
    return load_signatures()


@functools.cache
def _by_id() -> dict[str, Signature]:
    return {s.id: s for s in signatures()}


def signature(sid: str) -> Signature:
    """One shipped signature by id.

    Raises:
        KnowledgeError: no signature has that id (a caller names one that was renamed or
            removed in signatures.toml).
    """
    try:
        return _by_id()[sid]
    except KeyError:
        raise KnowledgeError(f"{SIGNATURES_FILE}: no signature {sid!r}") from None
