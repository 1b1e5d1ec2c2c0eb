"""The `tfdoctor` executable: the core CLI, with the desktop app as its no-argument verb."""

from __future__ import annotations

import sys


def open_app(smoke_test: bool, open_file: str | None = None) -> int:
    try:
        from tfdoctor.gui.app import main as gui_main
    except ImportError as exc:  # PySide6 missing or its system libraries (libGL, libEGL) absent
        print(
            f"tfdoctor: cannot open the app ({exc}); `tfdoctor check` works without it",
            file=sys.stderr,
        )
        return 2
    return gui_main(smoke_test=smoke_test, open_file=open_file)


def main() -> int:
    from tfdoctor.core.cli import main as cli_main

    return cli_main(open_app=open_app)


if __name__ == "__main__":
    sys.exit(main())
