"""Export fixes as a script to run where the crash happens: POSIX sh, PowerShell, or Python.

The shell scripts are dry runs unless given --apply (undo with --undo): they echo each step,
quote every value, and are idempotent. What the .sh does: give a copy of a Jupyter kernelspec
the variables in its env block (kernel_step.py, run by the kernel's own interpreter), which a
Jupyter started from the desktop or as a service reads too; or keep them in one env file
(~/.tfdoctor/env.sh) that the shell's startup file sources; and run the commands of
environment fixes (a pip install with the exact versions). The .ps1 sets user variables. The
Python variant is the notebook preamble.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tfdoctor.core import __version__
from tfdoctor.core.diagnose.engine import shipped_causes
from tfdoctor.core.fixes import propose
from tfdoctor.core.fixes.apply import (
    CLONE_SUFFIX,
    Plan,
    contradiction,
    needs_value,
    plan,
    preamble_text,
)
from tfdoctor.core.fixes.transaction import FixError
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Facts, Target

FORMATS = ("sh", "ps1", "py")


def fixes_for(
    fix_ids: Iterable[str] = (),
    cause_ids: Iterable[str] = (),
    params: Mapping[str, str] | None = None,
) -> list[str]:
    """The applicable config fixes named directly or by the causes they address. A cause's
    fix that needs a value nobody gave (a memory limit) is left out, and so is one that
    contradicts a fix already chosen.

    Raises:
        FixError: an unknown cause id, or nothing applicable.
    """
    known = catalog.fixes()
    causes = shipped_causes()
    ids = list(fix_ids)
    for cid in cause_ids:
        if cid not in causes:
            raise FixError(f"unknown cause {cid!r}")
        for f in causes[cid].fixes:
            if not (known.get(f) and known[f].applicable) or needs_value(f, params):
                continue
            if f not in ids and contradiction([*ids, f]):
                continue
            ids.append(f)
    ids = list(dict.fromkeys(ids))
    if not ids:
        raise FixError("no applicable config fix for these causes: nothing to export")
    return ids


@dataclass(frozen=True)
class About:
    """What a script's header says beyond its fixes: each parameter's value and where it was
    measured, and what the script leaves to the user (and why)."""

    params: Mapping[str, str] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)
    not_in_script: tuple[str, ...] = ()


def _header(
    p: Plan, cause_ids: Sequence[str], comment: str, about: About | None = None
) -> list[str]:
    """What the script is for, the fixes it applies (with each measured value and where it
    came from), then what it leaves to the user."""
    about = about or About()
    fixes = catalog.fixes()
    lines = [
        f"{comment} tfdoctor {__version__} fix script, written "
        f"{datetime.datetime.now().isoformat(timespec='seconds')}",
        f"{comment} causes: {', '.join(cause_ids) or '-'}",
        f"{comment} this script applies:",
    ]
    for fid in p.fix_ids:
        fx = fixes.get(fid)
        if fx is None:
            lines.append(f"{comment}   {fid}")
            continue
        risk = "; ".join(f"{k}: {v}" for k, v in (("risk", fx.risk), ("undo", fx.undo)) if v)
        lines.append(f"{comment}   {fid}: {fx.title}" + (f" ({risk})" if risk else ""))
        for name, _ in fx.params:
            if name in about.params:
                origin = about.origins.get(name)
                lines.append(
                    f"{comment}     {name}={about.params[name]}"
                    + (f" ({origin})" if origin else "")
                )
    if about.not_in_script:
        lines.append(f"{comment} not in this script (do these yourself):")
        lines += [f"{comment}   {n}" for n in about.not_in_script]
    return lines


# The part of the shell script that does not depend on the fixes. Its targets: a Jupyter
# kernel's copy (--kernel NAME, by default the checked kernel), changed by kernel_step.py under
# the kernel's interpreter, and the shell (--shell, by default when no kernel is known). It
# checks the shell's startup file before the kernel step writes anything, and edits it the way
# the app's own fixes edit files: refuses what is not a regular file or is read-only, writes
# through a symlink (the link stays), keeps the mode, appends one whole line (after a line break
# when the file does not end with one), keeps a copy of the file from before, and --undo gives
# back that copy byte for byte (or, when the file was changed since, deletes only its own line).
# Paths go into the startup file single-quoted: a HOME holding `$(...)` stays a name.
_SH_BODY = r"""set -eu
MODE=dry-run; KERNEL=; SHELLS=; PICKED=
usage() { echo "usage: $0 [--apply|--undo] [--kernel NAME] [--shell]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    dry-run|--apply|--undo) MODE=$1;;
    --kernel) [ $# -ge 2 ] && [ -n "$2" ] || usage; KERNEL=$2; PICKED=1; shift;;
    --shell) SHELLS=1; PICKED=1;;
    *) usage;;
  esac
  shift
done
if [ -z "$PICKED" ]; then KERNEL=$KERNEL_DEFAULT; [ -n "$KERNEL" ] || SHELLS=1; fi
DIR="${TFDOCTOR_DIR:-$HOME/.tfdoctor}"
ENV_FILE="$DIR/env.sh"
RC="${TFDOCTOR_RC:-$HOME/.bashrc}"
BACKUP="$DIR/rc-before-tfdoctor"
say() { printf '%s\n' "$*"; }
die() { printf 'tfdoctor fix script: %s\n' "$*" >&2; exit 1; }
NL='
'
case "$DIR$RC$KERNEL" in *"$NL"*) die "a path or name with a line break in it: not touched";; esac
PY="${TFDOCTOR_PYTHON:-$PY_DEFAULT}"
if [ -z "$PY" ] || ! command -v "$PY" >/dev/null 2>&1; then
  PY=$(command -v python3 || command -v python || true)
fi
sq() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
SOURCE_LINE=". $(sq "$ENV_FILE")  # tfdoctor"
has_line() { [ -f "$RC" ] && grep -qxF -- "$SOURCE_LINE" "$RC"; }
RC_REAL=$RC
if { [ -n "$SHELLS" ] && [ "$MODE" != --undo ]; } || { [ "$MODE" = --undo ] && has_line; }; then
  if [ -e "$RC" ] || [ -L "$RC" ]; then
    [ -f "$RC" ] || die "$RC is not a regular file: not touched"
    if [ -L "$RC" ]; then RC_REAL=$(readlink -f -- "$RC") || die "cannot resolve the link $RC"; fi
    [ -n "$(find "$RC_REAL" -prune -perm -u+w)" ] || die "$RC is read-only: not touched"
  fi
fi
no_final_newline() { [ -s "$1" ] && [ -n "$(tail -c 1 "$1")" ]; }
replace_rc() {  # $1's bytes become the startup file's, in one rename; mode and owner stay
  cp -p "$RC_REAL" "$RC_REAL.tfdoctor.tmp"
  cat "$1" > "$RC_REAL.tfdoctor.tmp"
  mv -f "$RC_REAL.tfdoctor.tmp" "$RC_REAL"
}
kernel_step() {  # the Jupyter kernel's copy, in Python (see the program below)
  [ -n "$PY" ] || die "no Python found to change the Jupyter kernel with: set TFDOCTOR_PYTHON"
  "$PY" - "$@" <<'TFDOCTOR_PY_EOF'
@KERNEL_STEP@
TFDOCTOR_PY_EOF
}
if [ "$MODE" != dry-run ]; then  # what an interrupted run left
  rm -f "$RC_REAL.tfdoctor.tmp" "$ENV_FILE.tmp" "$BACKUP.tmp" "$DIR/rc.tmp"
fi
if [ "$MODE" = --undo ] && [ -d "$DIR/kernels" ]; then
  kernel_step --undo "$DIR" "$SUFFIX" "$SETTINGS"
fi
if [ "$MODE" = --undo ]; then
  KEEP_BACKUP=
  if has_line; then
    { if [ -f "$BACKUP" ]; then cat "$BACKUP"; no_final_newline "$BACKUP" && echo; fi
      say "$SOURCE_LINE"; } > "$DIR/rc.tmp"
    if [ -f "$BACKUP" ] && cmp -s "$DIR/rc.tmp" "$RC"; then
      if [ -f "$BACKUP.absent" ]; then say "remove $RC (tfdoctor made it)"; rm -f "$RC"
      else say "restore $RC as it was before tfdoctor"; replace_rc "$BACKUP"; fi
    else
      say "remove the tfdoctor line from $RC (it changed since; the copy from before: $BACKUP)"
      grep -vxF -- "$SOURCE_LINE" "$RC" > "$DIR/rc.tmp" || [ $? -eq 1 ]
      replace_rc "$DIR/rc.tmp"
      KEEP_BACKUP=1
    fi
    rm -f "$DIR/rc.tmp"
  fi
  if [ -f "$ENV_FILE" ]; then say "remove $ENV_FILE"; rm -f "$ENV_FILE"; fi
  [ -n "$KEEP_BACKUP" ] || rm -f "$BACKUP" "$BACKUP.absent"
  rmdir "$DIR" 2>/dev/null || true
  exit 0
fi
if [ -n "$KERNEL" ]; then
  kernel_step "$MODE" "$DIR" "$SUFFIX" "$SETTINGS" "$KERNEL"
fi
if [ -n "$SHELLS" ]; then
  if [ -f "$ENV_FILE" ] && [ "$(cat "$ENV_FILE")" = "$ENV_BODY" ]; then
    say "$ENV_FILE already holds these settings"
  elif [ "$MODE" = --apply ]; then
    say "write $ENV_FILE"
    mkdir -p "$DIR"
    say "$ENV_BODY" > "$ENV_FILE.tmp"
    mv -f "$ENV_FILE.tmp" "$ENV_FILE"
  else
    say "would write $ENV_FILE:"; say "$ENV_BODY"
  fi
  if has_line; then
    say "$RC already sources it"
  elif [ "$MODE" = --apply ]; then
    say "add to $RC: $SOURCE_LINE (its copy from before: $BACKUP)"
    mkdir -p "$DIR"
    if [ -f "$RC" ]; then cp "$RC" "$BACKUP.tmp"; rm -f "$BACKUP.absent"
    else : > "$BACKUP.absent"; : > "$BACKUP.tmp"; fi
    mv -f "$BACKUP.tmp" "$BACKUP"
    SEP=; if no_final_newline "$RC"; then SEP=$NL; fi
    printf '%s%s\n' "$SEP" "$SOURCE_LINE" >> "$RC"
  else
    say "would add to $RC: $SOURCE_LINE"
  fi
fi
"""


def _sh_commands_only(p: Plan, cause_ids: Sequence[str], about: About | None = None) -> str:
    """A script with no variables to keep: it runs the commands with --apply, nothing more."""
    out = ["#!/bin/sh", *_header(p, cause_ids, "#", about)]
    out += [
        "# usage: sh this-script [--apply]   (without an option: show what it would do)",
        "set -eu",
        'MODE="${1:-dry-run}"',
        'case "$MODE" in dry-run|--apply) ;; *) echo "usage: $0 [--apply]" >&2; exit 2;; esac',
        "say() { printf '%s\\n' \"$*\"; }",
    ]
    return "\n".join(out) + "\n"


def _kernel_step_program() -> str:
    """The kernel step's Python program (stdlib only), as the script's here-document holds it."""
    text = (Path(__file__).with_name("kernel_step.py")).read_text(encoding="utf-8")
    assert "TFDOCTOR_PY_EOF" not in text.splitlines()
    return text.rstrip("\n")


def _where_settings_go(names: str, kernel: str | None) -> list[str]:
    if kernel:
        return [
            f"# where the settings go ({names}):",
            f"#   into a copy of the Jupyter kernel {kernel!r}, named {kernel + CLONE_SUFFIX!r}:",
            "#   pick '... (tfdoctor)' in Jupyter's kernel menu. A Jupyter started from a",
            "#   shell, the desktop or a service reads them there. --kernel NAME picks another;",
            "#   --shell puts them into ~/.tfdoctor/env.sh instead, which ~/.bashrc sources",
            "#   (for scripts run from a shell; give --kernel NAME --shell for both).",
        ]
    return [
        f"# where the settings go ({names}):",
        "#   into ~/.tfdoctor/env.sh, which ~/.bashrc sources: shells and a Jupyter started",
        "#   from one read it. A Jupyter started from the desktop or as a service does not:",
        "#   --kernel NAME puts them into a copy of that Jupyter kernel instead",
        "#   (`jupyter kernelspec list` names them; give --kernel NAME --shell for both).",
    ]


def sh_script(
    p: Plan,
    cause_ids: Sequence[str] = (),
    commands: Sequence[str] = (),
    about: About | None = None,
    kernel: str | None = None,
    python: str | None = None,
) -> str:
    """A POSIX sh script: dry run by default, --apply to act, --undo to take it back. The
    settings go into a copy of the Jupyter kernel `kernel` (with the kernel's interpreter
    `python`, where tfdoctor need not be installed) or, without one, into the shell's
    startup; --kernel NAME and --shell choose when it runs."""
    if not (p.env or p.unset):
        return _commands(_sh_commands_only(p, cause_ids, about), commands)
    env_lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(p.env.items())]
    env_lines += [f"unset {k}" for k in p.unset]
    body = "\n".join(env_lines)
    eof = "TFDOCTOR_ENV_EOF"
    n = 0
    while eof in body:  # a value can never end the here-document early
        n += 1
        eof = f"TFDOCTOR_ENV_EOF_{n}"
    settings = json.dumps({"env": dict(sorted(p.env.items())), "unset": list(p.unset)})
    out = ["#!/bin/sh", *_header(p, cause_ids, "#", about)]
    out += _where_settings_go(", ".join([*sorted(p.env), *p.unset]), kernel)
    if p.preamble:
        out.append("# some fixes are Python code for the notebook: export them with --format py")
    out += [
        "# usage: sh this-script [--apply | --undo] [--kernel NAME] [--shell]",
        "#   (without --apply or --undo it shows what it would do and changes nothing)",
        f"KERNEL_DEFAULT={shlex.quote(kernel or '')}",
        f"PY_DEFAULT={shlex.quote(python or '')}",
        f"SUFFIX={shlex.quote(CLONE_SUFFIX)}",
        f"SETTINGS={shlex.quote(settings)}",
        f"ENV_BODY=$(cat <<'{eof}'",
        body,
        eof,
        ")",
        _SH_BODY.replace("@KERNEL_STEP@", _kernel_step_program()).rstrip("\n"),
    ]
    return _commands("\n".join(out) + "\n", commands)


def _commands(script: str, commands: Sequence[str]) -> str:
    """The script, then the commands (each a whole shell command built with quoted values)
    run with --apply, and the dry run's last word."""
    out = []
    for cmd in commands:
        q = shlex.quote(cmd)
        out += [
            f'if [ "$MODE" = --apply ]; then say "run: "{q}; {cmd}; else say "would run: "{q}; fi'
        ]
    out.append('[ "$MODE" = --apply ] || say "(dry run: nothing changed; run with --apply)"')
    return script + "\n".join(out) + "\n"


# PowerShell ends a single-quoted string at any of these, not only at '
_PS_QUOTES = re.compile("(['\u2018\u2019\u201a\u201b])")


def _ps_quote(value: str) -> str:
    """A PowerShell single-quoted literal: nothing inside is expanded; every quote character
    PowerShell knows (' and the typographic ones) doubles."""
    return "'" + _PS_QUOTES.sub(r"\1\1", value) + "'"


def ps1_script(p: Plan, cause_ids: Sequence[str] = (), about: About | None = None) -> str:
    """A PowerShell script: dry run by default; -Apply sets user variables; -Undo removes."""
    out = [*_header(p, cause_ids, "#", about), "param([switch]$Apply, [switch]$Undo)"]
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


def py_script(p: Plan, cause_ids: Sequence[str] = (), about: About | None = None) -> str:
    """The notebook preamble (also importable as a module before TensorFlow)."""
    return "\n".join(_header(p, cause_ids, "#", about)) + "\n" + preamble_text(p)


def export(
    fmt: str,
    fix_ids: Iterable[str] = (),
    cause_ids: Sequence[str] = (),
    params: dict[str, str] | None = None,
    commands: Sequence[str] = (),
    *,
    expand_causes: bool = True,
    about: About | None = None,
    kernel: str | None = None,
    python: str | None = None,
) -> str:
    """The script text: `fix_ids`, and with `expand_causes` the applicable fixes of
    `cause_ids` too (else the causes are only named in the header). A .sh puts the settings
    into a copy of the Jupyter kernel `kernel` (changed with its interpreter `python`).

    Raises:
        FixError: an unknown format, fix or cause, or nothing applicable.
    """
    if fmt not in FORMATS:
        raise FixError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    ids = fixes_for(fix_ids, cause_ids if expand_causes else (), params)
    p = plan(ids, params)
    about = about or About(dict(params or {}))
    if fmt == "sh":
        return sh_script(p, cause_ids, commands, about, kernel, python)
    if fmt == "ps1":
        return ps1_script(p, cause_ids, about)
    return py_script(p, cause_ids, about)


def target_kernel(target: Target | None) -> str | None:
    """The Jupyter kernel a .sh should give its settings to: the target's, when it is one."""
    if target is None or target.kind != "kernelspec":
        return None
    return target.name or None


def format_of(path: str | os.PathLike[str]) -> str:
    """The script format a file name asks for: .ps1, .py, else sh."""
    return {".ps1": "ps1", ".py": "py"}.get(Path(path).suffix.lower(), "sh")


def proposal_script(
    fmt: str,
    proposed: Sequence[str],
    cause_ids: Sequence[str],
    facts: Facts | None = None,
    python: str | None = None,
    params: Mapping[str, str] | None = None,
    origins: Mapping[str, str] | None = None,
    wanting: Mapping[str, str] | None = None,
    kernel: str | None = None,
) -> str:
    """The script for a diagnosis's proposed fixes: exactly its config fixes that have every
    value measured (`params`, each named with its origin), and the exact commands of its
    environment fixes for this setup (a pinned pip install...). A .sh puts the settings into
    a copy of the Jupyter kernel `kernel` when the target is one. The header lists what the
    script leaves to the user: a fix still waiting for a measurement, advice and actions.

    Raises:
        FixError: an unknown format, or nothing applicable.
    """
    known = catalog.fixes()
    wanting = wanting or {}
    values = dict(params or {})
    ids = [f for f in propose.config_fix_ids(proposed) if f not in wanting]
    commands = propose.env_commands(proposed, facts, python)
    with_commands = {f for f in proposed if known.get(f) and known[f].kind == "env"}
    left = []
    for fid in proposed:
        if fid in ids or (fid in with_commands and commands):
            continue
        fx = known.get(fid)
        title = fx.title if fx else fid
        taken = [f"{k}={values[k]}" for k, _ in (fx.params if fx else ()) if k in values]
        why = (
            f"needs a measurement: {wanting[fid]}"
            if fid in wanting
            else ", ".join(taken)
            if taken
            else (fx.summary if fx else "")
        )
        left.append(f"{fid}: {title}" + (f" — {why}" if why else ""))
    about = About(values, dict(origins or {}), tuple(left))
    if not ids and commands:
        if fmt != "sh":
            raise FixError(
                "these fixes are commands to run (an install, a driver): export them as .sh"
            )
        env_ids = tuple(f for f in proposed if f in with_commands)
        return sh_script(Plan(env_ids, {}), list(cause_ids), commands, about)
    if not ids:
        raise FixError("none of the proposed fixes is a setting a script can apply")
    given = {k: v for f in ids for k, _ in known[f].params if (v := values.get(k))}
    return export(
        fmt,
        ids,
        list(cause_ids),
        given,
        commands,
        expand_causes=False,
        about=about,
        kernel=kernel,
        python=python,
    )
