"""Before Qt opens a window: are the system libraries of its platform plugin there?

Qt aborts the whole process ("could not load the Qt platform plugin "xcb" even though it was
found") when the plugin's own libraries are missing, as on a fresh desktop-less Debian where
PySide6's xcb plugin needs libxcb-cursor0, libxcb-icccm4 and libxcb-keysyms1. That abort prints
a wall of Qt text and no way out; this module finds the missing libraries first, with `ldd`,
and says which packages to install.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

LDD_TIMEOUT_S = 10.0
_NOT_FOUND = re.compile(r"^\s*(\S+)\s*=>\s*not found\s*$")
_SONAME = re.compile(r"^(lib[\w+.-]*?)\.so\.(\d+)")


def platform_name(env: Mapping[str, str]) -> str:
    """The platform plugin Qt will try first here ("xcb", "wayland", "offscreen", ...)."""
    forced = env.get("QT_QPA_PLATFORM", "").strip()
    if forced:  # "wayland;xcb" means wayland first; "xcb:option=..." carries options
        return forced.split(";")[0].split(":")[0].strip()
    if env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE", "").lower() == "wayland":
        return "wayland"
    return "xcb"


def plugin_file(platform: str, env: Mapping[str, str]) -> Path | None:
    """Where Qt finds the plugin: the QT_PLUGIN_PATH folders first, then PySide6's own."""
    folders = [Path(p) for p in env.get("QT_PLUGIN_PATH", "").split(os.pathsep) if p]
    try:
        import PySide6  # the package only: nothing of Qt's GUI is loaded by this

        folders.append(Path(PySide6.__file__).resolve().parent / "Qt" / "plugins")
    except ImportError:
        return None
    for folder in folders:
        candidate = folder / "platforms" / f"libq{platform}.so"
        if candidate.is_file():
            return candidate
    return None


def missing_libraries(plugin: Path) -> list[str]:
    """The shared libraries `plugin` needs that the dynamic loader cannot find, by soname.

    An empty list also when this cannot be told (no `ldd`, or it failed): Qt then has the
    last word, as it always had.
    """
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        out = subprocess.run(
            [ldd, str(plugin)],
            capture_output=True,
            text=True,
            timeout=LDD_TIMEOUT_S,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("could not run ldd on %s: %s", plugin, exc)
        return []
    missing: list[str] = []
    for line in out.splitlines():
        m = _NOT_FOUND.match(line)
        if m and m.group(1) not in missing:
            missing.append(m.group(1))
    return missing


def debian_package(soname: str) -> str:
    """The Debian/Ubuntu package that ships a library, by Debian's naming policy:
    libxcb-icccm.so.4 -> libxcb-icccm4, libxkbcommon-x11.so.0 -> libxkbcommon-x11-0."""
    m = _SONAME.match(soname)
    if m is None:
        return soname
    name, version = m.group(1).lower(), m.group(2)
    return f"{name}-{version}" if name[-1].isdigit() else f"{name}{version}"


def missing_plugin_reason(env: Mapping[str, str] | None = None) -> str | None:
    """One line saying why Qt's platform plugin cannot load here and what to install, or None."""
    env = dict(os.environ) if env is None else env
    if not sys.platform.startswith("linux"):
        return None
    platform = platform_name(env)
    plugin = plugin_file(platform, env)
    if plugin is None:
        return None  # an unknown platform name: Qt itself lists the ones it has
    missing = missing_libraries(plugin)
    if not missing:
        return None
    packages = " ".join(dict.fromkeys(debian_package(s) for s in missing))
    return (
        f"the app cannot open a window: Qt's {platform} platform plugin needs system "
        f"libraries that are missing ({', '.join(missing)}). On Debian/Ubuntu install them "
        f"with `sudo apt install {packages}`; or run the app without a screen with "
        "QT_QPA_PLATFORM=offscreen, or use `tfdoctor check` in the terminal."
    )
