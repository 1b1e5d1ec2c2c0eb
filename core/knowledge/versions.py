"""Tolerant version and compute-capability parsing shared by the knowledge modules."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

CC_RE = re.compile(r"^(\d{1,2})\.(\d{1,2})$")
MAJOR_MINOR_RE = re.compile(r"^\d+\.\d+$")
RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+$")
CUDA_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")
DRIVER_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")


def parse_release(text: str) -> tuple[int, ...] | None:
    """The release tuple of a version (``'12.5.1'`` -> (12, 5, 1)); None if unreadable."""
    try:
        return Version(text.strip()).release
    except InvalidVersion:
        return None


def series_of(text: str) -> tuple[int, int] | None:
    """The (major, minor) of a version; None if unreadable or without a minor."""
    release = parse_release(text)
    if release is None or len(release) < 2:
        return None
    return release[0], release[1]


def parse_cc(cc: str) -> tuple[int, int] | None:
    """A compute capability ``'X.Y'`` as (X, Y); None if malformed."""
    match = CC_RE.match(cc)
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def cc_order(cc: str) -> tuple[int, int]:
    """Sort key of a validated compute capability (ValueError if malformed)."""
    key = parse_cc(cc)
    if key is None:
        raise ValueError(f"not a compute capability: {cc!r}")
    return key


def platform_column(platform: str) -> str:
    """The driver-table column (``'linux'`` / ``'windows'``) of a platform (WSL: Windows)."""
    if platform == "linux":
        return "linux"
    if platform in ("windows", "wsl"):
        return "windows"
    raise ValueError(f"platform must be 'linux', 'windows' or 'wsl', not {platform!r}")
