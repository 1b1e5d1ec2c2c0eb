"""Shared fixtures: real interpreters and real crashing 'TensorFlow' packages for the probe."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
SNAPSHOTS = FIXTURES / "snapshots"
TRACES = FIXTURES / "traces"  # real telemetry traces and NVML sessions (README there)
# real logs users posted, each with its provenance header (copied from the dev corpus)
CORPUS = FIXTURES / "corpus" / "dev"


@pytest.fixture(scope="session")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real Python interpreter (a fresh venv without pip) that has no TensorFlow."""
    root = tmp_path_factory.mktemp("bare-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return str(root / "bin" / "python")


def fake_tf_dir(tmp_path: Path, body: str) -> Path:
    """A folder holding a `tensorflow` package whose import runs `body` (for real crashes)."""
    pkg = tmp_path / "fake_tf" / "tensorflow"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    return pkg.parent


# Real crashes, not simulated ones: a NULL read, a real ud2 instruction, abort(3), a hang.
SEGFAULT = """
import ctypes, sys
sys.stderr.write("I tensorflow/core/platform/cpu_feature_guard.cc:182] loading\\n")
ctypes.string_at(0)
"""
ILLEGAL_INSTRUCTION = """
import ctypes, mmap
buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(b"\\x0f\\x0b")  # ud2: the CPU raises #UD -> SIGILL, as on a CPU without AVX
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
ctypes.CFUNCTYPE(None)(addr)()
"""
ABORT = """
import os, sys
sys.stderr.write("F tensorflow/core/framework/op.cc:123] Check failed: fatal\\n")
sys.stderr.flush()
os.abort()
"""
HANG = """
import threading
threading.Event().wait()
"""
BROKEN = """
raise ImportError("libcudart.so.11.0: cannot open shared object file: No such file or directory")
"""


@pytest.fixture(scope="session")
def cpu_only_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real interpreter whose TensorFlow is the official CPU-only build (tensorflow-cpu).

    `make setup` unpacks the wheel (about 270 MB, the venv's TensorFlow version) into
    .venv/opt/tensorflow-cpu; its dependencies come from this test environment through a .pth
    file. Tests download nothing while they run.
    """
    import site

    libs = Path(sys.prefix) / "opt" / "tensorflow-cpu"
    if not (libs / ".complete").exists():
        pytest.skip(f"no tensorflow-cpu build at {libs}: `make setup` puts it there")
    root = tmp_path_factory.mktemp("tf-cpu-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    (site_dir,) = root.glob("lib/python*/site-packages")
    ours = [p for p in site.getsitepackages() if p.endswith("site-packages")]
    (site_dir / "tfdoctor_test_deps.pth").write_text("\n".join([str(libs), *ours]) + "\n")
    return str(root / "bin" / "python")


@pytest.fixture(scope="session")
def real_investigation(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    """(the session, its saved .tfdoctor file) of a real investigation, secrets planted (see
    tests/investigations.py; about two minutes, once per test session)."""
    from tests import investigations as inv
    from tfdoctor.core.redact import Identity
    from tfdoctor.core.report import investigation

    if inv.WHY_NO_MEMCG is not None:
        pytest.skip(f"no memory cgroup for the OOM-killed run: {inv.WHY_NO_MEMCG}")
    work = tmp_path_factory.mktemp("investigation")
    saved_state = os.environ.get("TFDOCTOR_STATE_DIR")
    try:
        with inv.planted_environment():
            session = inv.make_session(work)
            path = investigation.save(
                session,
                work / "real.tfdoctor",
                identity=inv.IDENTITY.merged(Identity.here()),
            )
    finally:
        if saved_state is None:
            os.environ.pop("TFDOCTOR_STATE_DIR", None)
        else:
            os.environ["TFDOCTOR_STATE_DIR"] = saved_state
    return session, path
