"""Layering rules: core imports without Qt, the app never imports TensorFlow, contracts hold."""

from __future__ import annotations

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
