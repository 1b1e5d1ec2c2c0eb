"""The one-folder desktop bundle (packaging/tfdoctor.spec), built once into a temporary folder
and run as a user runs it: from another directory, without the venv, with no TensorFlow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfdoctor.core import __version__

pytest.importorskip("PyInstaller", reason="PyInstaller is not installed (it is in the dev extra)")

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "packaging" / "tfdoctor.spec"
CORPUS_LOG = REPO / "tests" / "fixtures" / "logs" / "real_host_oom_kill.txt"
# what runs only in the target interpreter (design.md §2 rule 2), never in the app
TARGET_ONLY = {"tensorflow", "tensorflow_cpu", "tf_keras", "keras", "tensorboard", "jax", "torch"}
USER_LIBS = "/opt/user-cuda/lib64"  # the user's own LD_LIBRARY_PATH, as a target should see it

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/tfdoctor/tfdoctor, built by PyInstaller from the spec (about 30 s on 2 cores)."""
    root = tmp_path_factory.mktemp("bundle")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--log-level",
            "WARN",
            "--distpath",
            str(root / "dist"),
            "--workpath",
            str(root / "build"),
            str(SPEC),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"PyInstaller failed:\n{proc.stderr[-6000:]}"
    exe = root / "dist" / "tfdoctor" / "tfdoctor"
    assert exe.is_file() and os.access(exe, os.X_OK)
    return exe


def internal(exe: Path) -> Path:
    """The bundle's sys._MEIPASS (PyInstaller 6: _internal/ next to the executable)."""
    return exe.parent / "_internal"


def run(
    exe: Path, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """The bundle run as a user runs it: a plain PATH (no venv), HOME in `cwd`."""
    home = cwd / "home"
    home.mkdir(exist_ok=True)
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    return subprocess.run(
        [str(exe), *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_version(bundle: Path, tmp_path: Path) -> None:
    proc = run(bundle, "--version", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"tfdoctor {__version__}"


def test_smoke_test_renders_the_app_with_its_bundled_icon_and_stylesheet(
    bundle: Path, tmp_path: Path
) -> None:
    proc = run(bundle, "-v", "--smoke-test", cwd=tmp_path, env={"QT_QPA_PLATFORM": "offscreen"})
    assert proc.returncode == 0, proc.stderr
    assert "smoke test: rendered" in proc.stderr
    # gui.assets logs these when resources/ is missing or the SVG plugin did not come along
    assert "could not render" not in proc.stderr
    assert "no stylesheet" not in proc.stderr


def test_diagnose_names_the_cause_from_any_directory(bundle: Path, tmp_path: Path) -> None:
    proc = run(bundle, "diagnose", "--json", str(CORPUS_LOG), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    diagnosis = json.loads(proc.stdout)
    top = diagnosis["causes"][0]
    assert top["id"] == "host_oom"
    assert top["evidence"] and all(e["source"] == CORPUS_LOG.name for e in top["evidence"])


def test_target_scripts_run_from_the_bundle_with_the_users_environment(
    bundle: Path, tmp_path: Path, bare_python: str
) -> None:
    """The probe and the benchmark worker are files in the bundle that ANOTHER interpreter
    runs, and that interpreter gets the user's environment: LD_LIBRARY_PATH as the user set
    it, and no variable that points into the bundle (its libraries, its Qt plugins)."""
    env_file = tmp_path / "target-env.txt"
    python = tmp_path / "python"  # the bare Python, recording the environment it is given
    python.write_text(f'#!/bin/sh\nenv > "{env_file}"\nexec "{bare_python}" "$@"\n')
    python.chmod(0o755)
    proc = run(
        bundle,
        "check",
        "--python",
        str(python),
        "--json",
        cwd=tmp_path,
        env={"LD_LIBRARY_PATH": USER_LIBS},
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: findings (this Python has no TF)
    facts = json.loads(proc.stdout)["facts"]
    assert facts["target.probe_stage"]["value"] == "done"
    assert facts["tf.installed"]["value"] is False
    assert facts["target.env"]["value"].get("LD_LIBRARY_PATH") == USER_LIBS
    assert facts["cuda.ld_library_path"]["value"] == [USER_LIBS]
    # _PYI_* only tell a PyInstaller executable that its parent was one
    leaked = [
        line
        for line in env_file.read_text().splitlines()
        if str(bundle.parent) in line and not line.startswith("_PYI_")
    ]
    assert not leaked, f"the target was given the bundle's paths: {leaked}"

    proc = run(bundle, "bench", "--python", bare_python, "--device", "cpu", "--json", cwd=tmp_path)
    outcome = json.loads(proc.stdout)["outcome"]
    assert outcome["status"] == "exception", outcome
    assert outcome["exception"]["type"] == "ModuleNotFoundError"
    worker = internal(bundle) / "tfdoctor" / "core" / "probes" / "target" / "bench_worker.py"
    assert str(worker) in outcome["exception"]["traceback"]


def test_bundle_holds_every_data_file(bundle: Path) -> None:
    """Data next to its module, as in the source tree: tfdoctor/core/knowledge/..."""
    expected = {}
    for folder, dest in (
        ("core/knowledge", "tfdoctor/core/knowledge"),
        ("resources", "tfdoctor/resources"),
    ):
        for f in (REPO / folder).rglob("*"):
            if f.is_file() and f.suffix not in {".py", ".pyc"}:
                expected[f"{dest}/{f.relative_to(REPO / folder)}"] = f
    for f in (REPO / "core" / "probes" / "target").glob("*.py"):
        expected[f"tfdoctor/core/probes/target/{f.name}"] = f
    # the kernel step an exported .sh carries is read as a file
    expected["tfdoctor/core/fixes/kernel_step.py"] = REPO / "core" / "fixes" / "kernel_step.py"
    missing = sorted(rel for rel in expected if not (internal(bundle) / rel).is_file())
    assert not missing, f"not in the bundle: {missing}"
    stale = sorted(
        rel
        for rel, src in expected.items()
        if (internal(bundle) / rel).read_bytes() != src.read_bytes()
    )
    assert not stale, f"differ from the source tree: {stale}"


def test_desktop_entry_starts_the_bundle(bundle: Path, tmp_path: Path) -> None:
    data_home = tmp_path / "share"
    proc = run(
        bundle, "--install-desktop-entry", cwd=tmp_path, env={"XDG_DATA_HOME": str(data_home)}
    )
    assert proc.returncode == 0, proc.stderr
    (entry,) = (data_home / "applications").glob("*.desktop")
    assert f"Exec={bundle}\n" in entry.read_text(encoding="utf-8")


def test_no_tensorflow_in_the_bundle(bundle: Path) -> None:
    from PyInstaller.archive.readers import CArchiveReader

    files = [p.relative_to(bundle.parent) for p in bundle.parent.rglob("*")]
    shipped = [
        str(p)
        for p in files
        if any(part.split(".")[0] in TARGET_ONLY or "tensorflow" in part for part in p.parts)
    ]
    assert not shipped, f"in the bundle's folder: {shipped[:20]}"
    pyz = CArchiveReader(str(bundle)).open_embedded_archive("PYZ.pyz")
    modules = [name for name in pyz.toc if name.split(".")[0] in TARGET_ONLY]
    assert not modules, f"frozen into the bundle: {modules[:20]}"
    assert "tfdoctor.core.cli" in pyz.toc  # the archive read is the app's own


def test_check_without_a_python_asks_for_one(bundle: Path, tmp_path: Path) -> None:
    # the bundle's executable is no Python: `check` alone must say what to pass, not crash
    p = run(bundle, "check", cwd=tmp_path)
    assert p.returncode == 2
    assert "--python" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    envs = run(bundle, "envs", "--json", cwd=tmp_path)
    assert envs.returncode == 0, envs.stderr
    assert str(bundle) not in envs.stdout  # not offered as "this app's Python"
    assert "Native kernel" not in envs.stderr
