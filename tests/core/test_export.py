"""Exported fix scripts, run for real in a temp HOME: syntax, dry run, apply, apply again,
undo, and hostile values that must not inject."""

from __future__ import annotations

import os
import shutil
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
    assert "KERNEL_DEFAULT=''" in out.read_text()  # no kernel named: the shell's startup
    p = subprocess.run(
        [tfd, "export-fix", "--fixes", "memory_growth", "--kernel", "tf", "--python", "/x/py"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        p.returncode == 0 and "KERNEL_DEFAULT=tf\n" in p.stdout and "PY_DEFAULT=/x/py" in p.stdout
    )
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


SHELLS = [s for s in ("sh", "bash", "dash", "zsh") if shutil.which(s)]


def applied(tmp_path: Path, rc: bytes | None, shell: str = "sh") -> tuple[Path, Path, Path]:
    """(home, .bashrc, script) after `--apply` of the memory-growth script on `rc`."""
    home = tmp_path / "home"
    home.mkdir()
    bashrc = home / ".bashrc"
    if rc is not None:
        bashrc.write_bytes(rc)
    script = write(tmp_path, export.export("sh", ["memory_growth"]))
    run = subprocess.run(
        [shell, str(script), "--apply"],
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    return home, bashrc, script


def sourced(home: Path, shell: str = "bash") -> str:
    """TF_FORCE_GPU_ALLOW_GROWTH in a new shell that reads the startup file."""
    return subprocess.run(
        [shell, "-c", '. "$HOME/.bashrc" && printf %s "$TF_FORCE_GPU_ALLOW_GROWTH"'],
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    "rc",
    [b"alias ll='ls -l'", b"alias ll='ls -l'\n", b"", b"a\r\nb\r\n", None],
    ids=["no final newline", "newline", "empty", "crlf", "absent"],
)
def test_the_startup_file_edit_is_newline_safe_and_undone_to_the_byte(
    tmp_path: Path, rc: bytes | None, shell: str
) -> None:
    home, bashrc, script = applied(tmp_path, rc, shell)
    text = bashrc.read_bytes()
    if rc:  # the user's lines are all still there, whole, and ours is a line of its own
        assert text.startswith(rc.rstrip(b"\n") + b"\n")
    assert (
        text.splitlines().count(b". '" + str(home).encode() + b"/.tfdoctor/env.sh'  # tfdoctor")
        == 1
    )
    assert sourced(home) == "true"
    assert sh(script, home, "--apply").returncode == 0 and bashrc.read_bytes() == text  # idempotent
    undo = sh(script, home, "--undo")
    assert undo.returncode == 0, undo.stderr
    if rc is None:
        assert not bashrc.exists()
    else:
        assert bashrc.read_bytes() == rc
    assert not (home / ".tfdoctor" / "env.sh").exists()
    assert not (home / ".tfdoctor").exists()  # nothing left behind


def test_undo_after_the_user_edited_deletes_only_its_own_line(tmp_path: Path) -> None:
    home, bashrc, script = applied(tmp_path, b"export A=1")
    ours = next(ln for ln in bashrc.read_text().splitlines() if ln.endswith("# tfdoctor"))
    mine = f"# my note: {ours} was added by tfdoctor"  # our line inside one of the user's
    with bashrc.open("a") as f:
        f.write(f"{mine}\nexport B=2\n")
    undo = sh(script, home, "--undo")
    assert undo.returncode == 0 and "changed since" in undo.stdout
    assert bashrc.read_text() == f"export A=1\n{mine}\nexport B=2\n"
    assert (home / ".tfdoctor" / "rc-before-tfdoctor").read_bytes() == b"export A=1"


def test_a_symlinked_startup_file_stays_a_link_and_keeps_its_mode(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "bashrc"
    real.write_bytes(b"export A=1\n")
    real.chmod(0o600)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").symlink_to(real)
    script = write(tmp_path, export.export("sh", ["memory_growth"]))
    assert sh(script, home, "--apply").returncode == 0
    assert (home / ".bashrc").is_symlink() and b"# tfdoctor" in real.read_bytes()
    with real.open("a") as f:  # changed since: the undo rewrites it without our line
        f.write("export B=2\n")
    assert sh(script, home, "--undo").returncode == 0
    assert (home / ".bashrc").is_symlink() and real.read_bytes() == b"export A=1\nexport B=2\n"
    assert real.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("kind", ["directory", "fifo", "dangling link", "read-only"])
def test_a_startup_file_that_is_no_writable_regular_file_is_refused(
    tmp_path: Path, kind: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    rc = home / ".bashrc"
    if kind == "directory":
        rc.mkdir()
    elif kind == "fifo":
        os.mkfifo(rc)
    elif kind == "dangling link":
        rc.symlink_to(tmp_path / "nowhere")
    else:
        rc.write_text("export A=1\n")
        rc.chmod(0o444)  # the script reads the mode bits: root is refused too
    script = write(tmp_path, export.export("sh", ["memory_growth"]))
    run = sh(script, home, "--apply")
    assert run.returncode == 1 and "not touched" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (home / ".tfdoctor").exists()
    if kind == "read-only":
        assert rc.read_text() == "export A=1\n"
