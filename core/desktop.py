"""Linux desktop integration: the app's menu launcher and icon, installed for the current user."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tfdoctor.core.paths import atomic_write

log = logging.getLogger(__name__)

# The reverse-DNS id AppStream expects (packaging/io.github.tfdoctor.tfdoctor.metainfo.xml
# names this file as its launchable). The app must pass APP_ID to setDesktopFileName: on
# Wayland that is how the desktop matches its window to this launcher (and its icon).
APP_ID = "io.github.tfdoctor.tfdoctor"
DESKTOP_FILE_NAME = f"{APP_ID}.desktop"
ICON_NAME = "tfdoctor"

# resources/ installs as the package tfdoctor.resources, a sibling of tfdoctor.core both in the
# source tree (editable install) and in a wheel.
RESOURCES = Path(__file__).resolve().parent.parent / "resources"
TEMPLATE_FILE = RESOURCES / "tfdoctor.desktop"
ICON_FILE = RESOURCES / "tfdoctor.svg"
EXEC_PLACEHOLDER = "@EXEC@"

_WRITTEN_BY = (
    "# Written by `tfdoctor --install-desktop-entry`; "
    "`tfdoctor --uninstall-desktop-entry` removes it.\n"
)
# Desktop Entry spec, "The Exec key": an argument holding one of these must be quoted.
_RESERVED = frozenset(" \t\n\"'\\><~|&;$*?#()`")
_HELPER_TIMEOUT_S = 30.0


class DesktopError(Exception):
    """The launcher could not be installed or removed; the message is one plain line."""


def default_data_home() -> Path:
    """The user's data folder: $XDG_DATA_HOME, else ~/.local/share.

    A relative $XDG_DATA_HOME is invalid per the XDG Base Directory spec and is ignored.
    """
    env = os.environ.get("XDG_DATA_HOME", "")
    return Path(env) if os.path.isabs(env) else Path.home() / ".local" / "share"


def installed_files(data_home: Path | None = None) -> tuple[Path, Path]:
    """Where the launcher and the icon go: (the .desktop file, the hicolor SVG icon).

    Args:
        data_home: the XDG data folder; default `default_data_home()`.
    """
    base = default_data_home() if data_home is None else data_home
    return (
        base / "applications" / DESKTOP_FILE_NAME,
        base / "icons" / "hicolor" / "scalable" / "apps" / f"{ICON_NAME}.svg",
    )


def launch_command() -> list[str]:
    """The command that opens the app: the running `tfdoctor` executable, as an absolute path.

    A bundled app (PyInstaller) is its own executable; otherwise the `tfdoctor` this process
    was started as, else the one on PATH, else this interpreter running the GUI entry module.
    Symlinks are kept, not followed: /usr/local/bin/tfdoctor outlives an upgrade, the
    versioned folder it points into may not; and a virtualenv's python is a symlink.
    """
    if getattr(sys, "frozen", False):
        return [os.path.abspath(sys.executable)]
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 and Path(argv0).name == "tfdoctor":
        exe = os.path.abspath(argv0)
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return [exe]
    found = shutil.which("tfdoctor")
    if found:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "tfdoctor.gui.entry"]


def quote_exec_arg(arg: str) -> str:
    """One argument of an Exec key, quoted as the Desktop Entry spec asks (before the
    general string escapes, which `exec_value` applies to the whole line)."""
    arg = arg.replace("%", "%%")  # a literal percent sign, not a field code
    if arg and not _RESERVED.intersection(arg):
        return arg
    return '"' + re.sub(r'(["`$\\])', r"\\\1", arg) + '"'


def exec_value(argv: Sequence[str]) -> str:
    """The value of the Exec key that runs `argv`, quoted and escaped per the Desktop Entry
    spec: a literal backslash in a quoted argument ends up as four backslashes in the file."""
    line = " ".join(quote_exec_arg(a) for a in argv)
    for raw, escaped in (("\\", "\\\\"), ("\n", "\\n"), ("\t", "\\t"), ("\r", "\\r")):
        line = line.replace(raw, escaped)
    return line


def render_desktop_entry(argv: Sequence[str]) -> str:
    """The .desktop file that starts `argv`, from the template resources/tfdoctor.desktop.

    Raises:
        DesktopError: the template is missing from this installation or has no Exec line.
    """
    template = _read_resource(TEMPLATE_FILE).decode("utf-8")
    body = template[template.find("[Desktop Entry]") :] if "[Desktop Entry]" in template else ""
    line = f"Exec={EXEC_PLACEHOLDER}\n"
    if line not in body:
        raise DesktopError(f"the launcher template {TEMPLATE_FILE} is damaged (no Exec line)")
    return _WRITTEN_BY + body.replace(line, f"Exec={exec_value(argv)}\n")


def install_desktop_entry(
    data_home: Path | None = None, command: Sequence[str] | None = None
) -> list[Path]:
    """Put tfdoctor in the desktop's app menu for the current user: the .desktop file and
    the icon (in the hicolor theme). Installing again rewrites the same two files.

    Args:
        data_home: the XDG data folder; default `$XDG_DATA_HOME` or ~/.local/share.
        command: what the launcher runs; default `launch_command()`.

    Returns:
        The files written: the icon, then the .desktop file.

    Raises:
        DesktopError: not a Linux/BSD desktop, the data folder is not writable (or a file
            stands where a folder must go), the disk is full, or the installation lacks
            resources/tfdoctor.desktop or resources/tfdoctor.svg.
    """
    _require_xdg_platform()
    desktop_file, icon_file = installed_files(data_home)
    entry = render_desktop_entry(list(command) if command is not None else launch_command())
    icon = _read_resource(ICON_FILE)
    # the icon first: a launcher never points at an icon that is not there yet; an icon this
    # call added is taken back when the launcher cannot be written (nothing left behind)
    icon_was_there = icon_file.exists()
    try:
        for path, data in ((icon_file, icon), (desktop_file, entry.encode("utf-8"))):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                msg = f"cannot create the folder {path.parent}: {_reason(exc)}"
                raise DesktopError(msg) from exc
            try:
                atomic_write(path, data, mode=0o644)
            except OSError as exc:
                raise DesktopError(f"cannot write {path}: {_reason(exc)}") from exc
    except DesktopError:
        if not icon_was_there:
            with contextlib.suppress(OSError):  # never written, or its folder is no folder
                icon_file.unlink()
        raise
    _refresh_caches(desktop_file.parent, icon_file.parents[2])
    return [icon_file, desktop_file]


def uninstall_desktop_entry(data_home: Path | None = None) -> list[Path]:
    """Remove what `install_desktop_entry` wrote (the .desktop file and the icon), and nothing
    else: other files and the folders stay.

    Args:
        data_home: the XDG data folder; default `$XDG_DATA_HOME` or ~/.local/share.

    Returns:
        The files removed; empty when none was installed.

    Raises:
        DesktopError: a file is there but cannot be removed (its folder is read-only).
    """
    desktop_file, icon_file = installed_files(data_home)
    removed: list[Path] = []
    for path in (desktop_file, icon_file):
        if path.is_dir() or not (path.exists() or path.is_symlink()):
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise DesktopError(f"cannot remove {path}: {_reason(exc)}") from exc
        removed.append(path)
    if removed:
        _refresh_caches(desktop_file.parent, icon_file.parents[2])
    return removed


def _require_xdg_platform() -> None:
    if sys.platform in ("darwin", "win32", "cygwin"):
        raise DesktopError(
            "a desktop entry is for Linux desktops; on this system start the app with `tfdoctor`"
        )


def _read_resource(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DesktopError(
            f"this tfdoctor installation is incomplete: cannot read {path} ({_reason(exc)})"
        ) from exc


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _refresh_caches(applications: Path, icon_theme: Path) -> None:
    """Refresh the desktop's caches of these folders where a cache and its tool exist.

    A missing cache is not created: menus read the folders directly, and a cache file that
    tfdoctor created would outlive the uninstall. A failure only delays the menu's update.
    """
    for tool, folder, cache in (
        ("update-desktop-database", applications, "mimeinfo.cache"),
        ("gtk-update-icon-cache", icon_theme, "icon-theme.cache"),
    ):
        exe = shutil.which(tool)
        if exe is None or not (folder / cache).is_file():
            continue
        try:
            subprocess.run(
                [exe, "-q", str(folder)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=_HELPER_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.info("%s %s failed (%s); the menu picks the change up later", tool, folder, exc)
