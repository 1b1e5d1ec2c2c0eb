"""The `tfdoctor` command line: check, envs, capture; no arguments opens the app."""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from tfdoctor.core import __version__

if TYPE_CHECKING:
    from tfdoctor.core.model import Diagnosis
    from tfdoctor.core.scan import CheckReport

EXIT_OK, EXIT_FINDINGS, EXIT_UNUSABLE = 0, 1, 2

_COLOURS = {"error": "31;1", "warning": "33;1", "unknown": "35", "info": "36", "ok": "32"}
_ICONS = {"error": "✖", "warning": "▲", "unknown": "?", "info": "i", "ok": "✔"}


class Painter:
    """ANSI colour only on a terminal, and never when NO_COLOR is set."""

    def __init__(self, stream: TextIO, force: bool | None = None) -> None:
        tty = hasattr(stream, "isatty") and stream.isatty()
        self.on = (tty and "NO_COLOR" not in os.environ) if force is None else force

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on else text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tfdoctor",
        description="Find out why TensorFlow crashes, hangs or kills your Jupyter kernel. "
        "Without a command, opens the desktop app.",
    )
    p.add_argument("--version", action="version", version=f"tfdoctor {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log what tfdoctor does")
    p.add_argument(
        "--smoke-test",
        action="store_true",
        help="open the app, render its window offscreen, and quit (for packaging checks)",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser(
        "check",
        help="inspect a Python environment's TensorFlow, CUDA, driver, GPUs and memory",
        description="Inspect the TensorFlow environment of a Python interpreter (default: this "
        "one) and report findings worst first. Exit code: 0 no errors, 1 some finding is an "
        "error, 2 the check could not run.",
    )
    who = c.add_mutually_exclusive_group()
    who.add_argument("--python", metavar="PATH", help="the interpreter your notebook/script uses")
    who.add_argument(
        "--kernel",
        metavar="NAME",
        help="a Jupyter kernelspec by name (its interpreter and its env block); "
        "see `tfdoctor envs`",
    )
    c.add_argument("--json", action="store_true", help="print the full report as JSON")
    c.add_argument(
        "--timeout",
        type=float,
        default=180.0,
        metavar="S",
        help="give up on the TensorFlow probe after S seconds (default 180)",
    )
    c.add_argument(
        "--snapshot",
        metavar="FILE",
        help="use a recorded machine snapshot (from `tfdoctor capture`) instead of this "
        "machine's NVIDIA driver, system and CUDA facts",
    )
    c.add_argument("--all", action="store_true", help="also list the checks that passed")
    c.add_argument("--no-color", action="store_true", help="no ANSI colours")

    d = sub.add_parser(
        "diagnose",
        help="explain why a TensorFlow run died, from what it printed",
        description="Read crash output (a TF log, a traceback, a Jupyter server log, dmesg "
        "lines, an nvidia-smi paste; several files are one case; - reads standard input) and "
        "name the likely causes, best first, with the lines that prove them. Exit code: 0 "
        "when it ran, 2 when an input cannot be read.",
    )
    d.add_argument("files", nargs="+", metavar="FILE", help="log files, or - for stdin")
    d.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    d.add_argument("--no-color", action="store_true", help="no ANSI colours")

    e = sub.add_parser(
        "envs",
        help="list Python environments to check (kernelspecs, conda envs, running kernels)",
        description="List candidate target interpreters: this one, every Jupyter kernelspec, "
        "conda environments, and the interpreters of running Jupyter kernels.",
    )
    e.add_argument("--json", action="store_true", help="print as JSON")

    cap = sub.add_parser(
        "capture",
        help="record this machine's NVIDIA/system facts to a snapshot file",
        description="Record the NVML session (driver, GPUs, GPU processes) and the system and "
        "CUDA facts of this machine into a JSON snapshot that `tfdoctor check --snapshot` "
        "replays. Share it in a bug report; no host or user names are stored.",
    )
    cap.add_argument("output", metavar="FILE", help="where to write the snapshot (.json)")
    cap.add_argument("--note", default="", help="how/where it was recorded (stored in the file)")
    return p


OpenApp = Callable[[bool], int]


def main(argv: Sequence[str] | None = None, open_app: OpenApp | None = None) -> int:
    """Run the CLI. `open_app(smoke_test)` opens the desktop app; the GUI layer passes it in
    (`tfdoctor.gui.entry`), so core never imports the GUI.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command is None:
            if open_app is None:
                return _fail("the desktop app is not available here; `tfdoctor check` works")
            return open_app(args.smoke_test)
        if args.command == "check":
            return cmd_check(args)
        if args.command == "diagnose":
            return cmd_diagnose(args)
        if args.command == "envs":
            return cmd_envs(args)
        if args.command == "capture":
            return cmd_capture(args)
    except KeyboardInterrupt:
        print("tfdoctor: interrupted", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command}")
    return EXIT_UNUSABLE


def _fail(msg: str) -> int:
    print(f"tfdoctor: {msg}", file=sys.stderr)
    return EXIT_UNUSABLE


def cmd_check(args: argparse.Namespace) -> int:
    from tfdoctor.core.model import Target
    from tfdoctor.core.probes import nvml
    from tfdoctor.core.probes.targetrun import TargetError, current_target
    from tfdoctor.core.scan import CheckRun, load_machine_snapshot

    if args.timeout <= 0:
        return _fail("--timeout must be a positive number of seconds")
    if args.python:
        target = Target(python=args.python, label=args.python, kind="path")
    elif args.kernel:
        from tfdoctor.core.probes.envs import kernelspec_targets

        specs = {t.name: t for t in kernelspec_targets() if t.name}
        if args.kernel not in specs:
            known = ", ".join(sorted(specs)) or "none installed"
            return _fail(f"no Jupyter kernelspec named {args.kernel!r} (known: {known})")
        target = specs[args.kernel]
    else:
        target = current_target()
    from tfdoctor.core.probes.targetrun import python_version

    try:
        python_version(target.python)
        if args.snapshot:
            load_machine_snapshot(args.snapshot)
    except TargetError as exc:
        return _fail(str(exc))
    except nvml.SnapshotError as exc:
        return _fail(f"--snapshot: {exc}")
    except OSError as exc:
        return _fail(f"--snapshot: {exc.strerror or exc}: {args.snapshot}")

    run = CheckRun(
        target, timeout_s=args.timeout, snapshot=args.snapshot, target_validated=True
    ).start()
    progress = sys.stderr.isatty() and not args.json
    last = 0
    while not run.done:
        run.wait(0.1)
        for last, (kind, data) in run.events.since(last):  # noqa: B007, B020 - cursor
            if progress and kind == "stage":
                print(f"\r\033[K  probing: {data}…", end="", file=sys.stderr, flush=True)
    if progress:
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    report: CheckReport | None = run.wait()
    assert report is not None
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        paint = Painter(sys.stdout, force=False if args.no_color else None)
        sys.stdout.write(render_report(report, paint, show_ok=args.all))
    return report.exit_code


def render_report(report: CheckReport, paint: Painter, show_ok: bool = False) -> str:
    """The terminal view: a header, then findings grouped, worst group first, worst first."""
    from tfdoctor.core.checks import GROUP_TITLES
    from tfdoctor.core.knowledge import catalog

    width = min(shutil.get_terminal_size((100, 20)).columns, 100)
    fixes = catalog.fixes()
    out: list[str] = []
    t = report.target
    tfv = report.facts.value("tf.version")
    out.append(paint("tfdoctor check", "1") + f" — {t.label}")
    out.append(f"  python: {t.python}" + (f"   tensorflow: {tfv}" if tfv else ""))
    if report.snapshot:
        out.append(f"  snapshot: {report.snapshot} (GPU/system facts replayed)")
    probes = "  ".join(f"{k}: {v.status.value}" for k, v in sorted(report.probes.items()))
    out.append(f"  probes: {probes}   ({report.duration_s:.1f} s)")
    out.append("")
    shown = [f for f in report.findings if show_ok or f.severity.label != "ok"]
    hidden_ok = len(report.findings) - len(shown)
    groups: dict[str, list[Any]] = {}
    for f in shown:  # findings are already sorted worst first
        groups.setdefault(f.group, []).append(f)
    for group, items in groups.items():
        out.append(paint(GROUP_TITLES.get(group, group.title()), "1;4"))
        for f in items:
            sev = f.severity.label
            icon = paint(f"{_ICONS[sev]} {sev.upper():7}", _COLOURS[sev])
            out.append(f"  {icon} {f.title}")
            if sev != "ok":
                for line in textwrap.wrap(f.explanation, width - 12):
                    out.append(f"            {line}")
                for e in f.evidence[:3]:
                    where = f"line {e.line}: " if e.line else ""
                    out.append(paint(f"            · {where}{_clip(e.text, width - 16)}", "2"))
                for fid in f.fixes[:3]:
                    title = fixes[fid].title if fid in fixes else fid
                    out.append(f"            → {title} [{fid}]")
        out.append("")
    counts = {s: sum(1 for f in report.findings if f.severity.label == s) for s in _ICONS}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    out.append(f"Summary: {summary or 'no findings'}")
    if hidden_ok:
        out.append(f"({hidden_ok} passed checks hidden; --all shows them)")
    return "\n".join(out) + "\n"


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def cmd_diagnose(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tfdoctor.core.diagnose.engine import diagnose

    inputs: list[Any] = []
    names: list[str] = []
    for name in args.files:
        if name == "-":
            inputs.append(sys.stdin.buffer)
            names.append("stdin")
            continue
        p = Path(name)
        if p.is_dir():
            return _fail(f"{name}: is a directory, not a log file")
        if not os.access(p, os.R_OK):
            reason = "no such file" if not p.exists() else "permission denied"
            return _fail(f"{name}: {reason}")
        inputs.append(p)
        names.append(p.name)
    try:
        result = diagnose(*inputs, names=names)
    except OSError as exc:
        return _fail(f"{getattr(exc, 'filename', None) or 'input'}: {exc.strerror or exc}")
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    paint = Painter(sys.stdout, force=False if args.no_color else None)
    sys.stdout.write(render_diagnosis(result, paint))
    return EXIT_OK


def render_diagnosis(result: Diagnosis, paint: Painter) -> str:
    """The terminal view of a diagnosis: causes best first, their proof, what to do."""
    from tfdoctor.core.knowledge import catalog

    width = min(shutil.get_terminal_size((100, 20)).columns, 100)
    fixes = catalog.fixes()
    out = [
        paint("tfdoctor diagnose", "1")
        + f" — {', '.join(result.sources) or 'input'}: {result.lines_read} lines read"
    ]
    if not result.causes:
        out.append("")
        out.append("No known failure pattern found in this text.")
        if result.noise_lines:
            out.append(
                f"({result.noise_lines} lines are known harmless messages, e.g. TensorRT or "
                "NUMA notices: they are not why a run fails.)"
            )
        out += [
            "What to capture next:",
            "  · the full output of the run, from the start (TF_CPP_MIN_LOG_LEVEL=0),",
            "  · for a dead Jupyter kernel: the terminal/log of the Jupyter server, not the "
            "notebook,",
            "  · `sudo dmesg | tail -50` right after a silent death (OOM kills, Xid errors),",
            "  · `nvidia-smi` while it runs; or run `tfdoctor check` on the environment.",
        ]
        return "\n".join(out) + "\n"
    for rank, c in enumerate(result.causes, 1):
        out.append("")
        colour = "31;1" if rank == 1 else "33"
        out.append(paint(f"{rank}. {c.title}", colour) + f"  [{c.id}, {c.confidence:.0%}]")
        for line in textwrap.wrap(c.explanation, width - 5):
            out.append(f"     {line}")
        for e in c.evidence[:5]:
            where = f"{e.source}:{e.line}" if e.line else e.source
            out.append(paint(f"     · {where}: {_clip(e.text, width - 12 - len(where))}", "2"))
        for fid in c.fixes[:3]:
            out.append(f"     → {fixes[fid].title if fid in fixes else fid} [{fid}]")
    return "\n".join(out) + "\n"


def cmd_envs(args: argparse.Namespace) -> int:
    from tfdoctor.core.probes.envs import find_targets

    targets = find_targets()
    if args.json:
        json.dump({"schema": 1, "targets": [t.to_json() for t in targets]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    for t in targets:
        exists = "" if os.path.exists(t.python) else "   (missing!)"
        print(f"{t.kind:15} {t.label}\n{'':15}   {t.python}{exists}")
    return EXIT_OK


def cmd_capture(args: argparse.Namespace) -> int:
    from tfdoctor.core.scan import capture_machine

    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        return _fail(f"cannot write {args.output}: folder {folder} does not exist")
    try:
        info = capture_machine(args.output, provenance=args.note)
    except OSError as exc:
        return _fail(f"cannot write {args.output}: {exc.strerror or exc}")
    print(
        f"wrote {info['path']} (NVML: {info['nvml_status']}, {info['gpus']} GPU(s)); "
        f"replay it with: tfdoctor check --snapshot {args.output}"
    )
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
