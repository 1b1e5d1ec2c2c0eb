"""Investigation files on the command line: `tfdoctor report FILE`, and `--open FILE` /
`--save FILE` on the verbs that find things (check, diagnose, bench, watch)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfdoctor.core.terminal import EXIT_OK
from tfdoctor.core.terminal import fail as _fail

if TYPE_CHECKING:
    from tfdoctor.core.report.investigation import Opened
    from tfdoctor.core.session import Session


def add_file_options(parser: argparse.ArgumentParser, opens: str) -> None:
    """--open and --save on a verb; `opens` says what the verb takes from an opened file."""
    parser.add_argument(
        "--open",
        metavar="FILE",
        help=f"start from a saved investigation (.tfdoctor): {opens}",
    )
    parser.add_argument(
        "--save",
        metavar="FILE",
        help="save the investigation (what --open gave, and what this command found) to "
        "FILE (.tfdoctor); --open X --save X adds to it",
    )


def add_parser(sub: Any) -> None:
    r = sub.add_parser(
        "report",
        help="make a shareable report (HTML, Markdown or JSON) from a saved investigation",
        description="Write a report of a saved investigation (.tfdoctor): the versions and GPU "
        "a maintainer asks for first, the exact error, the causes with their evidence lines, "
        "what was tried, the memory plots (HTML) and the fix script. Home folder, user and "
        "host names and secrets are replaced unless --no-redact.",
    )
    r.add_argument("file", metavar="FILE", help="a .tfdoctor investigation")
    r.add_argument(
        "--format",
        choices=("html", "md", "json"),
        default=None,
        help="html (self-contained, with plots), md (for a GitHub issue) or json; "
        "default: from --output's suffix, else md",
    )
    r.add_argument("-o", "--output", metavar="OUT", help="write to OUT instead of stdout")
    r.add_argument("--force", action="store_true", help="replace OUT if it exists")
    r.add_argument(
        "--no-redact",
        action="store_true",
        help="keep the home folder, user and host names and secret values (private)",
    )


def open_investigation(path: str) -> Opened | str:
    """The investigation in `path`, or the one-line reason it cannot be opened. Notes about
    what was left out go to stderr."""
    from tfdoctor.core.report.investigation import InvestigationError, load

    try:
        opened = load(path)
    except InvestigationError as exc:
        return str(exc)
    for note in opened.notes:
        print(f"tfdoctor: {path}: {note}", file=sys.stderr)
    return opened


def opened_session(args: argparse.Namespace) -> Session | str | None:
    """The session of --open (None without it), or why it cannot be opened."""
    if not getattr(args, "open", None):
        return None
    opened = open_investigation(args.open)
    return opened if isinstance(opened, str) else opened.session


def save_session(args: argparse.Namespace, session: Session) -> int | None:
    """Write --save (when given); None when done, else the exit code of a one-line failure."""
    path = getattr(args, "save", None)
    if not path:
        return None
    from tfdoctor.core.report.investigation import save

    try:
        save(session, path)
    except OSError as exc:
        return _fail(f"--save {path}: {exc.strerror or exc}")
    print(f"tfdoctor: saved the investigation to {path}", file=sys.stderr)
    return None


def cmd_report(args: argparse.Namespace) -> int:
    from tfdoctor.core.paths import atomic_write_text, refuse_existing
    from tfdoctor.core.report import content, render

    fmt = args.format
    if fmt is None:
        suffix = Path(args.output).suffix.lower() if args.output else ""
        fmt = {".html": "html", ".htm": "html", ".json": "json"}.get(suffix, "md")
    opened = open_investigation(args.file)
    if isinstance(opened, str):
        return _fail(opened)
    session = opened.session
    try:
        analysis = session.analysis()
    except OSError as exc:
        return _fail(f"{getattr(exc, 'filename', None) or 'a log'}: {exc.strerror or exc}")
    report = content.build(
        session,
        analysis,
        redact=not args.no_redact,
        identity=opened.identity,
        source=Path(args.file).name,
    )
    text = render.render(report, fmt)
    if not args.output:
        sys.stdout.write(text)
        return EXIT_OK
    refused = refuse_existing(Path(args.output), args.force)
    if refused:
        return _fail(refused)
    try:
        atomic_write_text(Path(args.output), text)
    except OSError as exc:
        return _fail(f"cannot write {args.output}: {exc.strerror or exc}")
    said = "; ".join(report.redacted) or "nothing private found"
    how = "redacted: " + said if report.redact else "NOT redacted"
    print(f"tfdoctor: wrote {args.output} ({fmt}, {how})", file=sys.stderr)
    return EXIT_OK
