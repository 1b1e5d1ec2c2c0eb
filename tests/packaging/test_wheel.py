"""Installed as a desktop user installs it: `pip wheel .` from a clean copy of the tree, the
wheel into a new venv without TensorFlow, and the app and CLI run from another directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
CORPUS_LOG = REPO / "tests" / "fixtures" / "logs" / "real_host_oom_kill.txt"
# repo folder -> folder inside the wheel (pyproject's package-dir)
PACKAGE_DIRS = {"core": "tfdoctor/core", "gui": "tfdoctor/gui", "resources": "tfdoctor/resources"}

pytestmark = pytest.mark.slow


def tree_files() -> list[str]:
    """The files a clone would have (tracked, plus new ones git does not ignore)."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [f for f in out.splitlines() if (REPO / f).is_file()]


def dependency_closure(names: list[str]) -> list[metadata.Distribution]:
    """The installed distributions `names` need, transitively (extras and markers honoured
    as for a plain install)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = req.name.lower().replace("_", "-")
        if key in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[key] = dist
        todo.extend(dist.requires or [])
    return list(seen.values())


def wheel_requirements(wheel: Path) -> list[str]:
    """The wheel's own Requires-Dist lines (not those of the editable install's metadata)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(name).decode("utf-8")
    lines = text.splitlines()
    return [ln.partition(":")[2].strip() for ln in lines if ln.startswith("Requires-Dist:")]


def link_dependencies(wheel: Path, target: Path) -> None:
    """Make the wheel's runtime dependencies (not its extras: no TensorFlow, no test tools)
    importable in a new venv by linking their installed files: the test downloads nothing."""
    runtime = [r for r in wheel_requirements(wheel) if "extra ==" not in r]
    assert runtime and not any(Requirement(r).name == "tensorflow" for r in runtime)
    target.mkdir(parents=True)
    for dist in dependency_closure(runtime):
        for f in dist.files or []:
            top = f.parts[0]
            src = Path(str(dist.locate_file(top)))
            dst = target / top
            if top.endswith(".pth") or top == ".." or dst.exists() or not src.exists():
                continue
            dst.symlink_to(src)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for rel in tree_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    wheels = tmp / "wheels"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"),
            *("--no-build-isolation", "--wheel-dir", str(wheels), str(src)),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("tfdoctor-*.whl")
    root = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    py = root / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", str(wheel)],
        check=True,
        timeout=300,
    )
    (site_dir,) = root.glob("lib/python*/site-packages")
    deps = tmp / "deps"
    link_dependencies(wheel, deps)
    (site_dir / "tfdoctor_test_deps.pth").write_text(f"{deps}\n")
    return {"wheel": wheel, "python": py, "tfdoctor": root / "bin" / "tfdoctor", "cwd": tmp}


def run(venv: dict[str, Path], *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ.update(env)
    return subprocess.run(
        [str(venv["tfdoctor"]), *args],
        cwd=venv["cwd"],  # not the repository: nothing may come from the source tree
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_wheel_holds_every_resource(venv: dict[str, Path]) -> None:
    names = set(zipfile.ZipFile(venv["wheel"]).namelist())
    expected = []
    for rel in tree_files():
        folder, _, rest = rel.partition("/")
        if folder in PACKAGE_DIRS and "__pycache__" not in rel:
            expected.append(f"{PACKAGE_DIRS[folder]}/{rest}")
    missing = sorted(e for e in expected if e not in names)
    assert not missing, f"not in the wheel: {missing}"
    assert not any(n.startswith(("tests/", "core/", "gui/")) for n in names)  # no bare packages


def test_the_installed_app_runs_from_any_directory(venv: dict[str, Path]) -> None:
    where = subprocess.run(
        [str(venv["python"]), "-c", "import tfdoctor.gui.assets as a; print(a.ICON_FILE)"],
        cwd=venv["cwd"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_file() and Path(where).is_relative_to(venv["python"].parents[1])

    version = run(venv, "--version")
    assert version.returncode == 0
    assert version.stdout.strip() == f"tfdoctor {metadata.version('tfdoctor')}"

    smoke = run(venv, "--smoke-test", QT_QPA_PLATFORM="offscreen")
    assert smoke.returncode == 0, smoke.stderr

    diag = run(venv, "diagnose", str(CORPUS_LOG), "--json")
    assert diag.returncode == 0, diag.stderr
    assert json.loads(diag.stdout)["causes"][0]["id"] == "host_oom"


def test_the_installed_app_checks_another_python(venv: dict[str, Path]) -> None:
    # its own Python has no TensorFlow: it says so, as a finding
    own = run(venv, "check", "--json", "--timeout", "120")
    assert own.returncode == 1, own.stderr
    assert json.loads(own.stdout)["facts"]["tf.installed"]["value"] is False
    # the notebook's Python (this test environment, which has TensorFlow) is checked for real
    other = run(venv, "check", "--python", sys.executable, "--json", "--timeout", "240")
    assert other.returncode in (0, 1), other.stderr
    report = json.loads(other.stdout)
    assert report["facts"]["tf.installed"]["value"] is True
    assert report["facts"]["tf.version"]["value"] == metadata.version("tensorflow")
