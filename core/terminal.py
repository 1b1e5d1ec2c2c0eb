"""The CLI's output layer: exit codes, colour only on a terminal, one-line failures."""

from __future__ import annotations

import os
import sys
from typing import TextIO

EXIT_OK, EXIT_FINDINGS, EXIT_UNUSABLE = 0, 1, 2


class Painter:
    """ANSI colour only on a terminal, and never when NO_COLOR is set."""

    def __init__(self, stream: TextIO, force: bool | None = None) -> None:
        tty = hasattr(stream, "isatty") and stream.isatty()
        self.on = (tty and "NO_COLOR" not in os.environ) if force is None else force

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on else text


def fail(msg: str) -> int:
    print(f"tfdoctor: {msg}", file=sys.stderr)
    return EXIT_UNUSABLE


def clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"
