"""`tfdoctor --install-desktop-entry` / `--uninstall-desktop-entry` as a user runs them."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfdoctor.core import desktop

REPO = Path(__file__).resolve().parents[2]
TFDOCTOR = str(Path(sys.executable).parent / "tfdoctor")
METAINFO = REPO / "packaging" / "io.github.tfdoctor.tfdoctor.metainfo.xml"
ICON_SVG = REPO / "resources" / "tfdoctor.svg"
APP_ID = "io.github.tfdoctor.tfdoctor"


def run(
    *args: str, data_home: Path | None, home: Path, exe: str = TFDOCTOR
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    env.pop("XDG_DATA_HOME", None)
    if data_home is not None:
        env["XDG_DATA_HOME"] = str(data_home)
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, env=env)


def installed(data_home: Path) -> tuple[Path, Path]:
    return (
        data_home / "applications" / f"{APP_ID}.desktop",
        data_home / "icons" / "hicolor" / "scalable" / "apps" / "tfdoctor.svg",
    )


def entry(path: Path) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(path, encoding="utf-8")
    return dict(parser["Desktop Entry"])


def all_files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def assert_one_line_error(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def validate_desktop_file(path: Path) -> None:
    tool = shutil.which("desktop-file-validate")
    if tool is None:
        return  # desktop-file-utils is not installed: the other assertions still run
    proc = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # hints (e.g. two main categories) are advice; errors and warnings are not allowed
    assert "error:" not in proc.stdout and "warning:" not in proc.stdout, proc.stdout


def test_install_writes_a_valid_launcher_that_runs_this_tfdoctor(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = run("--install-desktop-entry", data_home=data, home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    desktop_file, icon_file = installed(data)
    assert proc.stdout.splitlines() == [f"installed {icon_file}", f"installed {desktop_file}"]
    assert icon_file.read_bytes() == ICON_SVG.read_bytes()

    keys = entry(desktop_file)
    assert keys["Type"] == "Application"
    assert keys["Name"] == "tfdoctor"
    assert keys["Icon"] == "tfdoctor"
    assert keys["Terminal"] == "false"
    assert keys["StartupWMClass"] == "tfdoctor"
    assert keys["Categories"] == "Development;Utility;"
    assert keys["GenericName"] and keys["Comment"] and keys["Keywords"]
    # the launcher starts the very executable that installed it, by absolute path
    assert keys["Exec"] == TFDOCTOR
    assert os.path.isfile(keys["Exec"]) and os.access(keys["Exec"], os.X_OK)
    assert "@EXEC@" not in desktop_file.read_text()
    validate_desktop_file(desktop_file)


def test_install_defaults_to_local_share_in_home(tmp_path: Path) -> None:
    proc = run("--install-desktop-entry", data_home=None, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for path in installed(tmp_path / ".local" / "share"):
        assert path.is_file()


def test_metainfo_passes_appstream_validation_and_names_the_launcher(tmp_path: Path) -> None:
    tool = shutil.which("appstreamcli")
    if tool is None:
        pytest.skip("appstreamcli (package appstream) is not installed")
    proc = subprocess.run(
        [tool, "validate", "--no-net", str(METAINFO)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # as a distribution installs it: the metainfo's launchable must be the installed launcher
    share = tmp_path / "usr" / "share"
    assert run("--install-desktop-entry", data_home=share, home=tmp_path).returncode == 0
    (share / "metainfo").mkdir()
    shutil.copy(METAINFO, share / "metainfo")
    proc = subprocess.run(
        [tool, "validate-tree", "--no-net", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_install_twice_gives_the_same_files(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = run("--install-desktop-entry", data_home=data, home=tmp_path)
    after_first = all_files(data)
    second = run("--install-desktop-entry", data_home=data, home=tmp_path)
    assert first.returncode == second.returncode == 0
    assert second.stdout == first.stdout
    assert all_files(data) == after_first


def test_uninstall_removes_exactly_what_install_wrote(tmp_path: Path) -> None:
    data = tmp_path / "data"
    desktop_file, icon_file = installed(data)
    neighbours = {
        desktop_file.parent / "org.example.editor.desktop": b"[Desktop Entry]\nName=Editor\n",
        icon_file.parent / "editor.svg": b"<svg/>",
    }
    for path, content in neighbours.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)

    assert run("--install-desktop-entry", data_home=data, home=tmp_path).returncode == 0
    with_launcher = all_files(data)
    proc = run("--uninstall-desktop-entry", data_home=data, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == sorted(
        f"removed {p}" for p in (desktop_file, icon_file)
    )
    assert all_files(data) == {
        p: b for p, b in with_launcher.items() if p not in (desktop_file, icon_file)
    }
    for path, content in neighbours.items():
        assert path.read_bytes() == content

    again = run("--uninstall-desktop-entry", data_home=data, home=tmp_path)
    assert again.returncode == 0
    assert again.stdout.startswith("nothing to remove") and len(again.stdout.splitlines()) == 1


def test_unwritable_data_folder_is_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = run("--install-desktop-entry", data_home=blocker / "share", home=tmp_path)
    assert_one_line_error(proc)
    assert str(blocker) in proc.stderr
    assert blocker.read_text() == "not a folder"


def test_a_launcher_that_cannot_be_written_leaves_no_icon_behind(tmp_path: Path) -> None:
    share = tmp_path / "share"
    share.mkdir()
    (share / "applications").write_text("a file where the launcher folder must go")
    proc = run("--install-desktop-entry", data_home=share, home=tmp_path)
    assert_one_line_error(proc)
    _, icon = installed(share)
    assert not icon.exists()  # the icon written first was taken back
    assert (share / "applications").read_text().startswith("a file")


def test_desktop_entry_flags_take_no_command(tmp_path: Path) -> None:
    proc = run("--install-desktop-entry", "check", data_home=tmp_path, home=tmp_path)
    assert_one_line_error(proc)
    assert not (tmp_path / "applications").exists()


def test_exec_is_quoted_when_the_executable_path_has_a_space(tmp_path: Path) -> None:
    # the same console script, installed in a folder with a space in its name
    exe = tmp_path / "my tools" / "tfdoctor"
    exe.parent.mkdir()
    shutil.copy2(TFDOCTOR, exe)
    data = tmp_path / "data"
    proc = run("--install-desktop-entry", data_home=data, home=tmp_path, exe=str(exe))
    assert proc.returncode == 0, proc.stderr
    desktop_file, _ = installed(data)
    assert entry(desktop_file)["Exec"] == f'"{exe}"'
    validate_desktop_file(desktop_file)


@pytest.mark.skipif(shutil.which("gio") is None, reason="gio (GLib's launcher) is not installed")
def test_desktop_launcher_starts_a_program_whose_path_has_special_characters(
    tmp_path: Path,
) -> None:
    # GLib's own launcher (what GNOME and most menus use) reads the Exec line we write. No "%"
    # here: it is written "%%" as the spec asks, but GLib looks for the program before it
    # undoes that, so no GLib menu can start a program whose path holds a percent sign.
    folder = tmp_path / "a b$c`d\"e\\f'h~i;j(k)"
    folder.mkdir()
    marker = tmp_path / "started-as"
    program = folder / "app"
    program.write_text(f'#!/bin/sh\nprintf "%s" "$0" > "{marker}"\n')
    program.chmod(0o755)
    launcher = tmp_path / "app.desktop"
    launcher.write_text(desktop.render_desktop_entry([str(program)]))
    validate_desktop_file(launcher)

    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.run(
        ["gio", "launch", str(launcher)], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # gio launch returns before the program has run
    assert marker.read_text() == str(program)
