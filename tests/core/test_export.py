"""Exported fix scripts, run for real in a temp HOME: syntax, dry run, apply, apply again,
undo, and hostile values that must not inject."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfdoctor.core import fixes
from tfdoctor.core.fixes import export

HOSTILE = "a b 'q' \"d\" $(touch PWNED) `touch PWNED2` ;\nTFDOCTOR_ENV_EOF\n rm x \\ end"


def sh(script: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    return subprocess.run(
        ["sh", str(script), *args], env=env, cwd=home, capture_output=True, text=True, timeout=30
    )


def files(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def write(tmp_path: Path, text: str, name: str = "fix.sh") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_shell_script_is_a_dry_run_until_applied_and_undoes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# my bashrc\nalias ll='ls -l'\n")
    text = export.export("sh", ["memory_growth", "verbose_tf_logging"], ["gpu_memory_contention"])
    assert text.startswith("#!/bin/sh") and "causes: gpu_memory_contention" in text
    script = write(tmp_path, text)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    before = files(home)
    dry = sh(script, home)
    assert dry.returncode == 0 and "would write" in dry.stdout and "dry run" in dry.stdout
    assert files(home) == before  # nothing changed
    assert sh(script, home, "--apply").returncode == 0
    rc = (home / ".bashrc").read_text()
    assert rc.startswith("# my bashrc\nalias ll='ls -l'\n") and rc.count("# tfdoctor") == 1
    probe = subprocess.run(
        ["bash", "-c", ". ~/.bashrc; echo $TF_FORCE_GPU_ALLOW_GROWTH:$TF_CPP_MIN_LOG_LEVEL"],
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
    )
    assert probe.stdout.strip() == "true:0"
    after = files(home)
    again = sh(script, home, "--apply")
    assert "already" in again.stdout and files(home) == after  # idempotent
    assert sh(script, home, "--undo").returncode == 0
    assert files(home) == before
    assert sh(script, home, "--bogus").returncode == 2


def test_hostile_values_stay_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    plan = fixes.Plan(("test",), {"TFD_HOSTILE": HOSTILE})
    script = write(tmp_path, export.sh_script(plan, ["x"]))
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert sh(script, home, "--apply").returncode == 0
    out = subprocess.run(
        ["bash", "-c", '. ~/.tfdoctor/env.sh; printf %s "$TFD_HOSTILE"'],
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        cwd=home,
    ).stdout
    assert out == HOSTILE
    assert not list(home.rglob("PWNED*")) and not list(tmp_path.glob("PWNED*"))
    ps1 = export.ps1_script(plan)
    assert "'a b ''q'' \"d\" $(touch PWNED)" in ps1  # single-quoted: PowerShell expands nothing
    py = export.py_script(plan)
    ns: dict[str, object] = {}
    exec(compile(py, "preamble", "exec"), ns)
    assert os.environ.pop("TFD_HOSTILE") == HOSTILE


def test_the_python_export_is_the_notebook_preamble() -> None:
    text = export.export("py", ["memory_limit"], params={"memory_limit_mb": "6000"})
    assert "memory_limit=6000" in text
    compile(text, "preamble", "exec")  # valid Python


def test_cli_export_fix(tmp_path: Path) -> None:
    tfd = str(Path(sys.executable).with_name("tfdoctor"))
    out = tmp_path / "fix.sh"
    p = subprocess.run(
        [tfd, "export-fix", "--causes", "gpu_memory_contention", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert os.access(out, os.X_OK) and "TF_FORCE_GPU_ALLOW_GROWTH" in out.read_text()
    for args in (
        ["--causes", "nope"],
        ["--fixes", "stream_tf_data"],
        [],
        ["--fixes", "memory_growth", "-o", str(tmp_path / "missing" / "x.sh")],
    ):
        bad = subprocess.run([tfd, "export-fix", *args], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2, args
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


@pytest.mark.parametrize("fmt", ["sh", "ps1", "py"])
def test_every_format_names_its_causes_and_fixes(fmt: str) -> None:
    text = export.export(fmt, [], ["gpu_memory_contention"])
    assert "gpu_memory_contention" in text and "memory_growth" in text
