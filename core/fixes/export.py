"""Export fixes as a script to run where the crash happens: POSIX sh, PowerShell, or Python.

The shell scripts are dry runs unless given --apply (undo with --undo): they echo each step,
quote every value, and are idempotent. What they do: keep the variables in one env file
(~/.tfdoctor/env.sh, or env.ps1) that the shell's startup file sources, and run the commands
of environment fixes (a pip install with the exact versions) when given. The Python variant
is the notebook preamble.
"""

from __future__ import annotations

import datetime
import os
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from tfdoctor.core import __version__
from tfdoctor.core.diagnose.engine import shipped_causes
from tfdoctor.core.fixes import propose
from tfdoctor.core.fixes.apply import Plan, plan, preamble_text
from tfdoctor.core.fixes.transaction import FixError
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Facts

FORMATS = ("sh", "ps1", "py")


def fixes_for(fix_ids: Iterable[str] = (), cause_ids: Iterable[str] = ()) -> list[str]:
    """The applicable config fixes named directly or by the causes they address.

    Raises:
        FixError: an unknown cause id, or nothing applicable.
    """
    known = catalog.fixes()
    causes = shipped_causes()
    ids = list(fix_ids)
    for cid in cause_ids:
        if cid not in causes:
            raise FixError(f"unknown cause {cid!r}")
        ids += [f for f in causes[cid].fixes if known.get(f) and known[f].applicable]
    ids = list(dict.fromkeys(ids))
    if not ids:
        raise FixError("no applicable config fix for these causes: nothing to export")
    return ids


def _header(p: Plan, cause_ids: Sequence[str], comment: str) -> list[str]:
    fixes = catalog.fixes()
    lines = [
        f"{comment} tfdoctor {__version__} fix script, written "
        f"{datetime.datetime.now().isoformat(timespec='seconds')}",
        f"{comment} causes: {', '.join(cause_ids) or '-'}",
        f"{comment} fixes:",
    ]
    for fid in p.fix_ids:
        fx = fixes.get(fid)
        if fx is None:
            lines.append(f"{comment}   {fid}")
            continue
        lines.append(f"{comment}   {fid}: {fx.title} (risk: {fx.risk or 'n/a'}; undo: {fx.undo})")
    return lines


def sh_script(p: Plan, cause_ids: Sequence[str] = (), commands: Sequence[str] = ()) -> str:
    """A POSIX sh script: dry run by default, --apply to act, --undo to take it back."""
    env_lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(p.env.items())]
    env_lines += [f"unset {k}" for k in p.unset]
    body = "\n".join(env_lines) + "\n"
    eof = "TFDOCTOR_ENV_EOF"
    n = 0
    while eof in body:  # a value can never end the here-document early
        n += 1
        eof = f"TFDOCTOR_ENV_EOF_{n}"
    out = ["#!/bin/sh", *_header(p, cause_ids, "#")]
    if p.preamble:
        out.append("# some fixes are Python code for the notebook: export them with --format py")
    out += [
        "# usage: sh this-script [--apply | --undo]   (without an option: show what it would do)",
        "set -eu",
        'MODE="${1:-dry-run}"',
        'case "$MODE" in dry-run|--apply|--undo) ;; *) echo "usage: $0 [--apply|--undo]" >&2; '
        "exit 2;; esac",
        'DIR="${TFDOCTOR_DIR:-$HOME/.tfdoctor}"',
        'ENV_FILE="$DIR/env.sh"',
        'RC="${TFDOCTOR_RC:-$HOME/.bashrc}"',
        'SOURCE_LINE=". \\"$ENV_FILE\\"  # tfdoctor"',
        "say() { printf '%s\\n' \"$*\"; }",
        f"ENV_BODY=$(cat <<'{eof}'",
        body.rstrip("\n"),
        eof,
        ")",
        'if [ "$MODE" = --undo ]; then',
        '  if [ -f "$ENV_FILE" ]; then say "remove $ENV_FILE"; rm -f "$ENV_FILE"; fi',
        '  if [ -f "$RC" ] && grep -qF "$SOURCE_LINE" "$RC"; then',
        '    say "remove the tfdoctor line from $RC"',
        '    grep -vF "$SOURCE_LINE" "$RC" > "$RC.tfdoctor.tmp" || true',
        '    mv "$RC.tfdoctor.tmp" "$RC"',
        "  fi",
        "  exit 0",
        "fi",
        'if [ -f "$ENV_FILE" ] && [ "$(cat "$ENV_FILE")" = "$ENV_BODY" ]; then',
        '  say "$ENV_FILE already holds these settings"',
        'elif [ "$MODE" = --apply ]; then',
        '  say "write $ENV_FILE"',
        '  mkdir -p "$DIR"',
        '  printf \'%s\\n\' "$ENV_BODY" > "$ENV_FILE.tmp" && mv "$ENV_FILE.tmp" "$ENV_FILE"',
        "else",
        '  say "would write $ENV_FILE:"; printf \'%s\\n\' "$ENV_BODY"',
        "fi",
        'if [ -f "$RC" ] && grep -qF "$SOURCE_LINE" "$RC"; then',
        '  say "$RC already sources it"',
        'elif [ "$MODE" = --apply ]; then',
        '  say "add to $RC: $SOURCE_LINE"; printf \'%s\\n\' "$SOURCE_LINE" >> "$RC"',
        "else",
        '  say "would add to $RC: $SOURCE_LINE"',
        "fi",
    ]
    for cmd in commands:
        q = shlex.quote(cmd)
        out += [
            f'if [ "$MODE" = --apply ]; then say "run: "{q}; {cmd}; else say "would run: "{q}; fi'
        ]
    out.append('[ "$MODE" = --apply ] || say "(dry run: nothing changed; run with --apply)"')
    return "\n".join(out) + "\n"


def _ps_quote(value: str) -> str:
    """A PowerShell single-quoted literal: nothing inside is expanded; ' doubles."""
    return "'" + value.replace("'", "''") + "'"


def ps1_script(p: Plan, cause_ids: Sequence[str] = ()) -> str:
    """A PowerShell script: dry run by default; -Apply sets user variables; -Undo removes."""
    out = [*_header(p, cause_ids, "#"), "param([switch]$Apply, [switch]$Undo)"]
    if p.preamble:
        out.insert(-1, "# some fixes are Python code for the notebook: export them with -format py")
    for k, v in sorted(p.env.items()):
        out += [
            "if ($Undo) { Write-Output " + _ps_quote(f"remove {k}")
            + f"; [Environment]::SetEnvironmentVariable({_ps_quote(k)}, $null, 'User') }}",
            "elseif ($Apply) { Write-Output " + _ps_quote(f"set {k}")
            + f"; [Environment]::SetEnvironmentVariable({_ps_quote(k)}, {_ps_quote(v)}, 'User') }}",
            "else { Write-Output " + _ps_quote(f"would set {k} = {v}") + " }",
        ]  # fmt: skip
    for k in p.unset:
        clear = f"[Environment]::SetEnvironmentVariable({_ps_quote(k)}, $null, 'User')"
        out.append(
            f"if ($Apply) {{ {clear} }} else {{ Write-Output {_ps_quote(f'would remove {k}')} }}"
        )
    out.append("if (-not ($Apply -or $Undo)) { Write-Output '(dry run: nothing changed)' }")
    return "\r\n".join(out) + "\r\n"


def py_script(p: Plan, cause_ids: Sequence[str] = ()) -> str:
    """The notebook preamble (also importable as a module before TensorFlow)."""
    return "\n".join(_header(p, cause_ids, "#")) + "\n" + preamble_text(p)


def export(
    fmt: str,
    fix_ids: Iterable[str] = (),
    cause_ids: Sequence[str] = (),
    params: dict[str, str] | None = None,
    commands: Sequence[str] = (),
) -> str:
    """The script text.

    Raises:
        FixError: an unknown format, fix or cause, or nothing applicable.
    """
    if fmt not in FORMATS:
        raise FixError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    p = plan(fixes_for(fix_ids, cause_ids), params)
    if fmt == "sh":
        return sh_script(p, cause_ids, commands)
    if fmt == "ps1":
        return ps1_script(p, cause_ids)
    return py_script(p, cause_ids)


def format_of(path: str | os.PathLike[str]) -> str:
    """The script format a file name asks for: .ps1, .py, else sh."""
    return {".ps1": "ps1", ".py": "py"}.get(Path(path).suffix.lower(), "sh")


def proposal_script(
    fmt: str,
    proposed: Sequence[str],
    cause_ids: Sequence[str],
    facts: Facts | None = None,
    python: str | None = None,
) -> str:
    """The script for a diagnosis's proposed fixes: its config fixes, and the exact commands
    of its environment fixes for this setup (a pinned pip install...).

    Raises:
        FixError: an unknown format, or nothing applicable.
    """
    ids = propose.config_fix_ids(proposed)
    causes = list(cause_ids) if ids else []
    commands = propose.env_commands(proposed, facts, python)
    return export(fmt, ids, causes, commands=commands)
