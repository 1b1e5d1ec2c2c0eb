"""A Qt platform plugin whose system libraries are missing: one line with the packages to
install and exit 2, before Qt can abort the process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tfdoctor.gui import platform_check

TFDOCTOR = str(Path(sys.executable).with_name("tfdoctor"))


def build_plugin(tmp_path: Path, *, needs_missing: bool) -> Path:
    """A real ELF platform plugin at tmp/platforms/libqxcb.so, built with the C compiler; with
    `needs_missing` it links a library that is then deleted, as on a machine without it."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a plugin with")
    (tmp_path / "dep.c").write_text("int tfd_dep(void) { return 1; }\n")
    (tmp_path / "plugin.c").write_text(
        "int tfd_dep(void);\nint tfd_plugin(void) { return tfd_dep(); }\n"
        if needs_missing
        else "int tfd_plugin(void) { return 2; }\n"
    )
    platforms = tmp_path / "plugins" / "platforms"
    platforms.mkdir(parents=True)
    plugin = platforms / "libqxcb.so"
    if needs_missing:
        dep = tmp_path / "libtfdgone-x11.so.3"
        subprocess.run(
            [cc, "-shared", "-fPIC", "-Wl,-soname,libtfdgone-x11.so.3", "-o", str(dep), "dep.c"],
            cwd=tmp_path,
            check=True,
        )
        subprocess.run(
            [cc, "-shared", "-fPIC", "-o", str(plugin), str(tmp_path / "plugin.c"), str(dep)],
            check=True,
        )
        dep.unlink()  # the library the plugin was linked with is gone from this machine
    else:
        subprocess.run(
            [cc, "-shared", "-fPIC", "-o", str(plugin), str(tmp_path / "plugin.c")], check=True
        )
    return plugin


def desktop_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QT_", "WAYLAND"))}
    env.update(DISPLAY=":97", QT_PLUGIN_PATH=str(tmp_path / "plugins"))
    return env


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd on this machine")
def test_a_missing_plugin_library_is_one_line_with_the_apt_command(tmp_path: Path) -> None:
    build_plugin(tmp_path, needs_missing=True)
    p = subprocess.run(
        [TFDOCTOR, "--smoke-test"],
        env=desktop_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "libtfdgone-x11.so.3" in lines[0]
    assert "sudo apt install libtfdgone-x11-3" in lines[0]
    assert "QT_QPA_PLATFORM=offscreen" in lines[0]
    assert "Traceback" not in p.stderr


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd on this machine")
def test_a_plugin_with_all_its_libraries_passes(tmp_path: Path) -> None:
    build_plugin(tmp_path, needs_missing=False)
    env = desktop_env(tmp_path)
    plugin = platform_check.plugin_file("xcb", env)
    assert plugin is not None and plugin.is_relative_to(tmp_path)  # QT_PLUGIN_PATH comes first
    assert platform_check.missing_libraries(plugin) == []
    assert platform_check.missing_plugin_reason(env) is None


def test_the_platform_qt_tries_first() -> None:
    assert platform_check.platform_name({}) == "xcb"
    assert platform_check.platform_name({"QT_QPA_PLATFORM": "offscreen"}) == "offscreen"
    assert platform_check.platform_name({"QT_QPA_PLATFORM": "wayland;xcb"}) == "wayland"
    assert platform_check.platform_name({"QT_QPA_PLATFORM": "xcb:nomitshm"}) == "xcb"
    wayland = {"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}
    assert platform_check.platform_name(wayland) == "wayland"


@pytest.mark.parametrize(
    ("soname", "package"),
    [
        ("libxcb-cursor.so.0", "libxcb-cursor0"),
        ("libxcb-icccm.so.4", "libxcb-icccm4"),
        ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
        ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
        ("libEGL.so.1", "libegl1"),
        ("libdbus-1.so.3", "libdbus-1-3"),
    ],
)
def test_debian_package_names(soname: str, package: str) -> None:
    assert platform_check.debian_package(soname) == package
