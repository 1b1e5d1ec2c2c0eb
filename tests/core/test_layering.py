"""Layering rules: core imports without Qt, the app never imports TensorFlow, contracts hold."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

BLOCKED_IMPORT = textwrap.dedent(
    """
    import importlib, pkgutil, sys

    class Block:
        BLOCKED = ("PySide6", "shiboken6", "pyqtgraph", "tensorflow", "keras")
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in self.BLOCKED:
                raise ImportError(f"blocked in this test: {name}")
            return None

    sys.meta_path.insert(0, Block())
    import tfdoctor.core as core
    names = [m.name for m in pkgutil.walk_packages(core.__path__, "tfdoctor.core.")]
    for name in names:
        importlib.import_module(name)
    print(len(names), "modules")
    """
)


def test_every_core_module_imports_with_qt_and_tensorflow_blocked() -> None:
    p = subprocess.run(
        [sys.executable, "-c", BLOCKED_IMPORT], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert int(p.stdout.split()[0]) >= 10


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    p = subprocess.run([str(lint)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "broken" not in p.stdout.replace("0 broken", "")


# Paths that climb out of the repository: the sibling shared/ folder of the development
# checkout, or any folder above the repo root. A clone from the project's public home has
# neither, so no test, benchmark or tool may read them.
OUTSIDE_REPO = re.compile(r"REPO\.parent|parents\[(?:[3-9])\]|\.\./shared|[\"']shared[\"']\s*/")


def test_nothing_in_the_repo_reads_outside_it() -> None:
    offenders = []
    for folder in ("core", "gui", "tests", "tools", "packaging", "resources"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if OUTSIDE_REPO.search(line) and "test_layering.py" not in path.name:
                    offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    for name in ("Makefile", ".ci/run"):
        text = (REPO / name).read_text(encoding="utf-8")
        if "../" in text:
            offenders.append(f"{name}: refers to a path outside the repository")
    assert not offenders, "\n".join(offenders)
    # the real-log corpus and the facts the knowledge tests compare against travel with the repo
    corpus = list((REPO / "tests" / "fixtures" / "corpus" / "dev").glob("*.txt"))
    assert len(corpus) >= 20
    assert all(f.read_text(encoding="utf-8").startswith("label:") for f in corpus)
    assert (REPO / "tests" / "fixtures" / "facts" / "compat_facts.json").is_file()
