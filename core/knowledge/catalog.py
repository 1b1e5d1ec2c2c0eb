"""The fix catalog (fixes.toml): every fix a finding or a cause may name, validated at load."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

from tfdoctor.core.knowledge.compat_load import load as load_compat
from tfdoctor.core.knowledge.loader import KNOWLEDGE_DIR, KnowledgeError, Row, read_toml, unique

FIXES_FILE = KNOWLEDGE_DIR / "fixes.toml"
FIX_KINDS = frozenset({"config", "code", "env", "action"})
# The benchmark settings a fix can change, so that a re-run shows its effect (bench/verify.py
# turns each into a BenchConfig change; a fix names one as `bench`).
BENCH_KNOBS = frozenset(
    {"memory_growth", "memory_limit_mb", "allocator", "mixed_precision", "jit_compile", "data",
     "batch_size"}
)  # fmt: skip
_FIELDS = {
    "id", "kind", "title", "summary", "risk", "undo", "env", "unset", "preamble", "params",
    "snippet", "bench",
}  # fmt: skip


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
    bench: str | None = None  # the benchmark knob (BENCH_KNOBS) a re-run verifies it with

    @property
    def applicable(self) -> bool:
        """Whether tfdoctor can apply it (to a kernelspec, conda env, env file, preamble)."""
        return bool(self.env or self.unset or self.preamble)


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PARAM_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def load_fixes(path: str | os.PathLike[str] = FIXES_FILE) -> dict[str, Fix]:
    """The fix catalog by id.

    Raises:
        KnowledgeError: unreadable TOML, an unknown field, a duplicate id, an unknown kind or
            benchmark knob, a missing field, a bad variable name, an undeclared parameter, or
            a snippet that is not Python.
    """
    top = Row(read_toml(path), str(path), {"fix"})
    out: dict[str, Fix] = {}
    seen: set[str] = set()
    for i, raw in enumerate(top.tables("fix"), 1):
        row = Row.entry(raw, f"{path}: [[fix]] #{i}", _FIELDS)
        fid = row.req_str("id")
        fix = Fix(
            fid,
            row.req_str("kind"),
            row.req_str("title"),
            row.req_str("summary"),
            risk=row.text("risk"),
            undo=row.text("undo"),
            env=row.str_table("env"),
            unset=row.str_list("unset", required=False),
            preamble=row.text("preamble").strip("\n"),
            params=row.str_table("params"),
            snippet=row.text("snippet").strip("\n"),
            bench=row.opt_str("bench"),
        )
        where = row.where
        names = [k for k, _ in fix.env] + list(fix.unset)
        bad = [n for n in names if not _ENV_NAME.match(n)]
        if bad:
            raise KnowledgeError(f"{where}: bad variable name {bad[0]!r}")
        declared = {k for k, _ in fix.params}
        used = {m for text in [v for _, v in fix.env] + [fix.preamble]
                for m in _PARAM_REF.findall(text)}  # fmt: skip
        if used - declared:
            missing = ", ".join(sorted(used - declared))
            raise KnowledgeError(f"{where}: uses undeclared params: {missing}")
        if fix.snippet:
            try:
                compile(fix.snippet, f"{fix.id} snippet", "exec")
            except SyntaxError as exc:
                raise KnowledgeError(f"{where}: snippet: {exc.msg}") from None
        if fix.applicable and fix.kind != "config":
            raise KnowledgeError(f"{where}: changes settings but is {fix.kind}")
        if fix.kind not in FIX_KINDS:
            raise KnowledgeError(f"{where}: unknown kind {fix.kind!r}")
        if fix.bench is not None and fix.bench not in BENCH_KNOBS:
            known = ", ".join(sorted(BENCH_KNOBS))
            raise KnowledgeError(f"{where}: unknown bench knob {fix.bench!r} (known: {known})")
        unique(where, "fix id", fix.id, seen)
        out[fix.id] = fix
    return out


@functools.cache
def fixes() -> dict[str, Fix]:
    """The shipped fix catalog (cached)."""
    return load_fixes()


def fix_unsupported(fix_id: str, *, cuda_build: bool | None, build_cuda: str | None) -> str | None:
    """Say why a TensorFlow build cannot use a fix, e.g. the async allocator on CUDA < 11.2.

    Args:
        fix_id: A fix of the shipped catalog.
        cuda_build: Whether TF is a CUDA build (None: unknown).
        build_cuda: The CUDA version TF was built with.

    Returns:
        The reason in plain language, or None when the fix can work (or we cannot tell).
    """
    fix = fixes().get(fix_id)
    allocator = dict(fix.env).get("TF_GPU_ALLOCATOR") if fix is not None else None
    if allocator is None:
        return None
    return load_compat().allocator_unsupported(
        allocator, cuda_build=cuda_build, build_cuda=build_cuda
    )
