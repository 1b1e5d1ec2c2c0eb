"""Every id the knowledge files and the code name exists: fixes, causes, signatures, knobs.

The data files are cross-checked when they load (a wrong id in a copy is refused with a clear
message); the ids the code names (a check's fixes, a rule's causes, the signatures a check or a
rule reads) are found by reading the code, so a typo fails here, not when a machine happens to
trigger that finding.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tfdoctor.core import knowledge
from tfdoctor.core.bench import verify
from tfdoctor.core.knowledge import KnowledgeError, catalog, load_all
from tfdoctor.core.knowledge.loader import KNOWLEDGE_DIR

ROOT = Path(__file__).resolve().parents[2]
CODE = sorted([*ROOT.glob("core/**/*.py"), *ROOT.glob("gui/**/*.py")])


# ------------------------------------------------------------------ the data files


def test_everything_loads_and_every_id_resolves() -> None:
    kb = load_all()
    assert len(kb.fixes) >= 30 and len(kb.causes) >= 15 and len(kb.signatures) >= 40
    for cause in kb.causes.values():
        assert cause.fixes and set(cause.fixes) <= set(kb.fixes), cause.id
        # offered as a look-alike, a cause says how to confirm it
        assert cause.confirm.endswith("."), cause.id
    for sig in kb.signatures:
        assert set(sig.causes) <= set(kb.causes), sig.id
    for fix in kb.fixes.values():
        assert fix.bench is None or fix.bench in catalog.BENCH_KNOBS, fix.id


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return folder


def _edit(folder: Path, name: str, old: str, new: str) -> None:
    path = folder / name
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        (
            "causes.toml",
            'fixes = ["smaller_batch", "mixed_precision", "xla_toggle"]',
            'fixes = ["smaller_batch", "mixed_precission", "xla_toggle"]',
            r"causes\.toml: \[\[cause\]\] #1 \(gpu_oom\): fixes names unknown fix ids "
            r"mixed_precission",
        ),
        (
            "signatures.toml",
            "causes = { cpu_instructions_unsupported = 6.0 }",
            "causes = { cpu_instruction_unsupported = 6.0 }",
            r"signatures\.toml: \[\[signature\]\] #\d+ \(avx_missing\): causes names unknown "
            r"cause ids "
            r"cpu_instruction_unsupported",
        ),
        (
            "fixes.toml",
            'bench = "allocator"',
            'bench = "allocater"',
            r"fixes\.toml: \[\[fix\]\] #3 \(async_allocator\): unknown bench knob 'allocater'",
        ),
        (
            "fixes.toml",
            'id = "memory_limit"\n',
            'id = "memory_growth"\n',
            r"fixes\.toml: \[\[fix\]\] #2 \(memory_growth\): duplicate fix id 'memory_growth'",
        ),
        (
            "causes.toml",
            'id = "fragmentation"\n',
            'id = "fragmentation"\nseverity = "high"\n',
            r"causes\.toml: \[\[cause\]\] #3 \(fragmentation\): unknown field\(s\) severity",
        ),
        (
            "causes.toml",
            'id = "fragmentation"\n',
            'id = "fragmentation"\nreliability = 3\n',
            r"causes\.toml: \[\[cause\]\] #3 \(fragmentation\): reliability must be a number "
            r"from 0\.5 to 1\.5",
        ),
        (
            "causes.toml",
            'look_alikes = ["gpu_oom", "gpu_memory_contention"]',
            'look_alikes = ["gpu_oom", "gpu_memory_contension"]',
            r"causes\.toml: \[\[cause\]\] #3 \(fragmentation\): look_alikes names unknown other "
            r"cause ids gpu_memory_contension",
        ),
        (
            "causes.toml",
            'look_alikes = ["gpu_oom", "gpu_memory_contention"]',
            'look_alikes = ["gpu_oom", "fragmentation"]',
            r"causes\.toml: \[\[cause\]\] #3 \(fragmentation\): look_alikes names unknown other "
            r"cause ids fragmentation",
        ),
        (
            "fixes.toml",
            'id = "pick_gpu"\n',
            'id = "pick_gpu"\nenvv = { A = "1" }\n',
            r"fixes\.toml: \[\[fix\]\] #7 \(pick_gpu\): unknown field\(s\) envv",
        ),
        (
            "signatures.toml",
            'id = "xid"\n',
            'id = "xid"\nweight = 2\n',
            r"signatures\.toml: \[\[signature\]\] #\d+ \(xid\): unknown field\(s\) weight",
        ),
        (
            "compat.toml",
            'cuda_since = { cuda_malloc_async = "11.2" }',
            'cuda_since = { cuda_malloc_asinc = "11.2" }',
            r"compat\.toml: \[\[env_var\]\] #2: cuda_since names unknown value 'cuda_malloc_asinc'",
        ),
    ],
)
def test_a_wrong_id_or_field_in_a_copy_is_refused(
    tmp_path: Path, name: str, old: str, new: str, message: str
) -> None:
    folder = _copy(tmp_path)
    load_all(folder)  # the untouched copy is fine
    _edit(folder, name, old, new)
    with pytest.raises(KnowledgeError, match=message):
        load_all(folder)


def test_a_missing_file_is_a_knowledge_error(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "causes.toml").unlink()
    with pytest.raises(KnowledgeError, match=r"cannot read .*causes\.toml"):
        load_all(folder)


def test_every_bench_knob_changes_the_benchmark() -> None:
    assert set(verify.KNOBS) == catalog.BENCH_KNOBS
    named = {f.bench for f in catalog.fixes().values()} - {None}
    assert named == catalog.BENCH_KNOBS  # no knob left that no fix uses


# ------------------------------------------------------------------ rules written once


@pytest.mark.parametrize(
    ("cuda_build", "cuda", "problem"),
    [
        (False, "12.3", "no CUDA"),
        (None, "", None),  # unknown: not judged
        (True, "11.0", "needs CUDA 11.2 or newer"),
        (True, "11.2", None),
        (True, "12.3", None),
        (True, "twelve", None),
    ],
)
def test_the_async_allocator_needs_cuda_11_2(
    cuda_build: bool | None, cuda: str, problem: str | None
) -> None:
    compat = knowledge.load()
    got = compat.allocator_unsupported("cuda_malloc_async", cuda_build=cuda_build, build_cuda=cuda)
    assert (got is None) == (problem is None)
    assert problem is None or problem in str(got)
    fix = catalog.fix_unsupported("async_allocator", cuda_build=cuda_build, build_cuda=cuda)
    assert fix == got  # the fix suggestions and the benchmark ask the same question
    assert compat.allocator_unsupported("default", cuda_build=False, build_cuda=cuda) is None
    assert catalog.fix_unsupported("memory_growth", cuda_build=False, build_cuda=cuda) is None


def test_known_env_values_come_from_the_table() -> None:
    compat = knowledge.load()
    for value in ("true", "false"):
        assert compat.env_value_known("TF_FORCE_GPU_ALLOW_GROWTH", value)
    for value in ("True", "1", ""):
        assert not compat.env_value_known("TF_FORCE_GPU_ALLOW_GROWTH", value)
    for value in ("cuda_malloc_async", "cuda_malloc", "memory_guard", "bfc"):
        assert compat.env_value_known("TF_GPU_ALLOCATOR", value)
    assert not compat.env_value_known("TF_GPU_ALLOCATOR", "cuda_malloc_asinc")
    assert compat.env_value_known("NOT_A_TF_VARIABLE", "x") is None


# ------------------------------------------------------------------ the ids the code names


@dataclass
class Refs:
    """Ids found in code, each with where it was found."""

    fixes: dict[str, list[str]] = field(default_factory=dict)
    causes: dict[str, list[str]] = field(default_factory=dict)
    signatures: dict[str, list[str]] = field(default_factory=dict)


class _Scanner:
    """Finds the string ids in the places the code names ids, resolving simple names.

    Fix ids: a Finding's or a Cause's `fixes`, and comparisons with `fid` / `fix_id`.
    Cause ids: the first argument of a local function whose first parameter is `cause` or
    `cid` (the rules' `add` / `note` / `cause`), `scores[...]`, and `cause.id in ...`.
    Signature ids: `<x>.lines(...)` (the checks), `hits.get(...)` and `... in hits`.
    """

    def __init__(self, tree: ast.Module, where: str, refs: Refs) -> None:
        self.tree, self.where, self.refs = tree, where, refs
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self.cause_funcs = {
            f.name
            for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            and [a.arg for a in f.args.args if a.arg != "self"][:1] in (["cause"], ["cid"])
        }

    def add(self, kind: dict[str, list[str]], node: ast.expr) -> None:
        for value in self.strings(node):
            kind.setdefault(value, []).append(f"{self.where}:{node.lineno}")

    # ---- resolving an expression to the string constants it can be
    def strings(self, node: ast.AST, depth: int = 0) -> Iterator[str]:
        if depth > 6:
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for elt in node.elts:
                yield from self.strings(elt, depth + 1)
        elif isinstance(node, ast.Starred):
            yield from self.strings(node.value, depth + 1)
        elif isinstance(node, ast.IfExp):
            yield from self.strings(node.body, depth + 1)
            yield from self.strings(node.orelse, depth + 1)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            yield from self.strings(node.left, depth + 1)
            yield from self.strings(node.right, depth + 1)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("tuple", "frozenset", "set", "list") and node.args:
                yield from self.strings(node.args[0], depth + 1)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
        ):
            for bound in self.bindings(node.func.value):  # a lookup table: its values
                if isinstance(bound, ast.Dict):
                    for v in bound.values:
                        yield from self.strings(v, depth + 1)
        elif isinstance(node, ast.Name):
            for bound in self.bindings(node):
                yield from self.strings(bound, depth + 1)

    def bindings(self, name: ast.AST) -> Iterator[ast.AST]:
        """What a name is bound to in its function (or the module): assignments, loops."""
        if not isinstance(name, ast.Name):
            return
        scope: ast.AST = name
        while scope in self.parents and not isinstance(scope, ast.FunctionDef):
            scope = self.parents[scope]
        module_level = [n for n in self.tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))]
        local = list(ast.walk(scope)) if scope is not self.tree else []
        for node in local + module_level:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    yield from _bind(target, node.value, name.id)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                yield from _bind(node.target, node.value, name.id)
            elif isinstance(node, (ast.For, ast.comprehension)):
                if isinstance(node.iter, (ast.Tuple, ast.List)):
                    for elt in node.iter.elts:
                        yield from _bind(node.target, elt, name.id)
                elif isinstance(node.target, ast.Name) and node.target.id == name.id:
                    yield node.iter  # a loop over a named tuple of ids

    # ---- the places ids are named
    def scan(self) -> None:
        refs = self.refs
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                func = node.func
                fname = func.id if isinstance(func, ast.Name) else None
                attr = func.attr if isinstance(func, ast.Attribute) else None
                if fname in ("Finding", "Cause"):
                    if len(node.args) > 5:
                        self.add(refs.fixes, node.args[5])
                    for kw in node.keywords:
                        if kw.arg == "fixes":
                            self.add(refs.fixes, kw.value)
                elif fname in self.cause_funcs and node.args:
                    self.add(refs.causes, node.args[0])
                elif attr == "lines" and _named(func.value, "ctx"):
                    for arg in node.args:
                        self.add(refs.signatures, arg)
                elif attr == "get" and _named(func.value, "hits") and node.args:
                    self.add(refs.signatures, node.args[0])
            elif isinstance(node, ast.Subscript) and _named(node.value, "scores"):
                self.add(refs.causes, node.slice)
            elif isinstance(node, ast.Compare) and len(node.ops) == 1:
                left, right = node.left, node.comparators[0]
                if isinstance(node.ops[0], (ast.In, ast.NotIn)):
                    if _named(right, "hits"):
                        self.add(refs.signatures, left)
                    elif _named(right, "scores"):
                        self.add(refs.causes, left)
                    elif isinstance(left, ast.Attribute) and _named(left.value, "cause"):
                        self.add(refs.causes, right)
                if _named(left, "fid") or _named(left, "fix_id"):
                    self.add(refs.fixes, right)


def _named(node: ast.AST, name: str) -> bool:
    """`name` or `<anything>.name`."""
    return (isinstance(node, ast.Name) and node.id == name) or (
        isinstance(node, ast.Attribute) and node.attr == name
    )


def _bind(target: ast.AST, value: ast.AST, name: str) -> Iterator[ast.AST]:
    if isinstance(target, ast.Name) and target.id == name:
        yield value
    elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        for t, v in zip(target.elts, value.elts, strict=False):
            yield from _bind(t, v, name)


def scan(paths: list[Path]) -> Refs:
    refs = Refs()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        _Scanner(tree, str(where), refs).scan()
    return refs


def test_the_scanner_finds_a_wrong_id(tmp_path: Path) -> None:
    code = tmp_path / "rules.py"
    code.write_text(
        "def check(ctx):\n"
        "    hits = ctx.lines('gpu_cc_ignored', 'ptx_jit')\n"
        "    why, fixes = ('x', ('upgrade_driver', 'memory_growht'))\n"
        "    return Finding('a', S.OK, 't', 'e', (), fixes, 'gpu')\n"
        "def add(cause, weight): ...\n"
        "def rules(hits, scores):\n"
        "    def note(cause, text): ...\n"
        "    for other, w in (('gpu_oom', -1.0), ('gpu_om', 1.0)):\n"
        "        add(other, w)\n"
        "    note('host_om', 'x')\n"
        "    if hits.get('bfc_om') or 'killd' in hits or scores['no_gpu']:\n"
        "        pass\n",
        encoding="utf-8",
    )
    refs = scan([code])
    assert set(refs.fixes) == {"upgrade_driver", "memory_growht"}
    assert set(refs.signatures) == {"gpu_cc_ignored", "ptx_jit", "bfc_om", "killd"}
    assert {"gpu_om", "host_om", "no_gpu"} <= set(refs.causes)


def test_every_id_the_code_names_exists() -> None:
    refs = scan(CODE)
    kb = load_all()
    # the scan must keep finding the code's ids (a restructure that hides them fails here)
    assert len(refs.fixes) >= 20 and len(refs.causes) >= 10 and len(refs.signatures) >= 20
    unknown = {
        "fix": {k: v for k, v in refs.fixes.items() if k not in kb.fixes},
        "cause": {k: v for k, v in refs.causes.items() if k not in kb.causes},
        "signature": {
            k: v for k, v in refs.signatures.items() if k not in {s.id for s in kb.signatures}
        },
    }
    assert unknown == {"fix": {}, "cause": {}, "signature": {}}
