"""The `tfdoctor` command line: check, envs, capture; no arguments opens the app."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from tfdoctor.core import __version__, cli_diagnose, cli_report
from tfdoctor.core.bench.config import FAULTS, PRESETS
from tfdoctor.core.knowledge.loader import KnowledgeError
from tfdoctor.core.paths import refuse_existing
from tfdoctor.core.redact import mask_secrets, mask_text
from tfdoctor.core.terminal import EXIT_FINDINGS, EXIT_OK, EXIT_UNUSABLE, Painter
from tfdoctor.core.terminal import clip as _clip
from tfdoctor.core.terminal import fail as _fail

if TYPE_CHECKING:
    from tfdoctor.core.bench.supervisor import BenchResult
    from tfdoctor.core.model import Target
    from tfdoctor.core.scan import CheckReport

_COLOURS = {"error": "31;1", "warning": "33;1", "unknown": "35", "info": "36", "ok": "32"}
_ICONS = {"error": "✖", "warning": "▲", "unknown": "?", "info": "i", "ok": "✔"}


class _Parser(argparse.ArgumentParser):
    """Usage mistakes are one line (and exit 2), pointing at --help for the rest."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_UNUSABLE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _finite_float(text: str) -> float:
    """A number option: NaN and infinity are refused (a NaN timeout would never fire)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _pid(text: str) -> int:
    """A process id: a positive whole number."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a process id") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a process id (it must be above 0)")
    return value


def _add_show_secrets(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--show-secrets",
        action="store_true",
        help="include the values of secret-looking variables (TOKEN, KEY, PASSWORD...) and "
        "credentials in URLs, which are masked as *** by default",
    )


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
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
    p.add_argument(
        "--open",
        dest="open_app_file",
        metavar="FILE",
        help="open the app with a saved investigation (.tfdoctor)",
    )
    menu = p.add_mutually_exclusive_group()
    menu.add_argument(
        "--install-desktop-entry",
        action="store_true",
        help="add tfdoctor to your desktop's app menu, for you only (Linux)",
    )
    menu.add_argument(
        "--uninstall-desktop-entry",
        action="store_true",
        help="remove what --install-desktop-entry added",
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
        type=_finite_float,
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
    _add_show_secrets(c)
    cli_report.add_file_options(
        c,
        "shows its check without running one (--python or --kernel checks again; a file "
        "without a check has its Python checked)",
    )

    cli_diagnose.add_parser(sub)
    cli_report.add_parser(sub)

    b = sub.add_parser(
        "bench",
        help="run a controlled Keras training benchmark in a supervised worker",
        description="Train a synthetic Keras workload in the target Python, in a worker process "
        "tfdoctor watches: whatever ends it (GPU or host out of memory, a crash, a hang) is "
        "caught, classified and explained. --find-max-batch searches the largest batch size "
        "that trains cleanly. Exit code: 0 the run completed (or the search finished), 1 it "
        "failed (the outcome says how), 2 the benchmark could not start.",
    )
    who = b.add_mutually_exclusive_group()
    who.add_argument("--python", metavar="PATH", help="the interpreter to benchmark")
    who.add_argument("--kernel", metavar="NAME", help="a Jupyter kernelspec by name")
    b.add_argument("--preset", choices=sorted(PRESETS), default="cnn", help="the workload")
    b.add_argument("--batch-size", type=int, default=32, metavar="N", help="default 32")
    b.add_argument("--steps", type=int, default=20, metavar="N", help="steps per epoch (20)")
    b.add_argument("--epochs", type=int, default=1, metavar="N", help="default 1")
    b.add_argument(
        "--input-shape", metavar="DIMS", help="e.g. 64x64x3 for images, 128 for sequences"
    )
    b.add_argument("--device", choices=["gpu", "cpu"], default="gpu", help="default gpu")
    b.add_argument("--memory-growth", action="store_true", help="allocate GPU memory as needed")
    b.add_argument(
        "--gpu-memory-limit-mb",
        dest="memory_limit_mb",
        type=int,
        metavar="MB",
        help="cap TensorFlow's GPU pool (would this fit on a smaller card?)",
    )
    b.add_argument(
        "--allocator",
        choices=["default", "cuda_malloc_async"],
        default="default",
        help="TF_GPU_ALLOCATOR for the worker",
    )
    b.add_argument("--mixed-precision", action="store_true", help="mixed_float16")
    b.add_argument(
        "--xla", dest="jit_compile", action="store_true", help="compile the model with XLA"
    )
    b.add_argument(
        "--eager", dest="run_eagerly", action="store_true", help="run eagerly (no tf.function)"
    )
    b.add_argument(
        "--data",
        choices=["array", "stream"],
        default="array",
        help="array: the whole dataset in RAM (default); stream: tf.data with prefetch",
    )
    b.add_argument("--grad-accum", type=int, default=1, metavar="N", help="accumulation steps")
    b.add_argument("--find-max-batch", action="store_true", help="search the largest batch size")
    b.add_argument("--max-batch", type=int, default=8192, metavar="N", help="search cap (8192)")
    b.add_argument(
        "--margin",
        type=_finite_float,
        default=0.10,
        metavar="F",
        help="search safety margin (0.10)",
    )
    b.add_argument(
        "--memory-cap-mib",
        "--memory-cap-mb",
        type=int,
        metavar="MIB",
        help="cap the worker's RAM (a memory cgroup where possible): would it die on a "
        "smaller machine?",
    )
    b.add_argument(
        "--guard-mib",
        "--guard-mb",
        type=int,
        metavar="MIB",
        help="stop the worker when the machine has less RAM available than this "
        "(default: 5%% of RAM, 512 MiB to 4 GiB; 0 turns the guard off)",
    )
    b.add_argument(
        "--watchdog",
        type=_finite_float,
        default=300.0,
        metavar="S",
        help="a silent worker is hung after S seconds (start-up, compile; default 300)",
    )
    b.add_argument(
        "--stall",
        type=_finite_float,
        default=60.0,
        metavar="S",
        help="no new step for S seconds while training is a hang (default 60)",
    )
    b.add_argument(
        "--verify-fix",
        nargs="+",
        metavar="FIX",
        help="run twice, without and with these fixes, and compare (e.g. stream_tf_data)",
    )
    b.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="a fix parameter"
    )
    b.add_argument("--fault", choices=sorted(FAULTS), help=argparse.SUPPRESS)
    b.add_argument("--fault-at-step", type=int, default=2, help=argparse.SUPPRESS)
    b.add_argument("--json", action="store_true", help="print the result as JSON")
    b.add_argument("--no-color", action="store_true", help="no ANSI colours")
    cli_report.add_file_options(b, "its Python is run unless --python or --kernel names one")

    wat = sub.add_parser(
        "watch",
        help="watch your own training (a Jupyter kernel, a PID, or a command) and say why it died",
        description="Follow the memory of your own training process (RSS with its children, "
        "every GPU and every process's VRAM on it, RAM, swap, its cgroup limit), print a line "
        "a second, record a bounded trace, and when the process ends say why from what was "
        "seen (its exit status, the kernel log's OOM-kill and Xid lines for it, and what a "
        "command it started printed: passed through unchanged, and read as a crash log). Run "
        "`tfdoctor watch --first-cell` and paste it as the notebook's first cell to add "
        "TensorFlow's own numbers. Ctrl-C stops watching.",
    )
    which = wat.add_mutually_exclusive_group()
    which.add_argument("--pid", type=_pid, metavar="PID", help="a running process")
    which.add_argument(
        "--kernel", metavar="ID", help="a running Jupyter kernel: its id (or prefix) or notebook"
    )
    wat.add_argument("--record", metavar="FILE", help="write the trace to FILE (bounded)")
    wat.add_argument("--force", action="store_true", help="replace FILE if it exists")
    wat.add_argument("--json", action="store_true", help="print the verdict as JSON")
    wat.add_argument(
        "--interval-ms", type=int, default=250, metavar="N", help="sampling interval (250)"
    )
    wat.add_argument(
        "--tf-file",
        metavar="FILE",
        help="where the first cell writes TensorFlow's numbers (default: "
        "~/.tfdoctor/watch/tf.jsonl)",
    )
    wat.add_argument(
        "--first-cell", action="store_true", help="print the notebook's first cell and exit"
    )
    cli_report.add_file_options(wat, "the watch is added to it (with --save)")
    wat.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="start it and watch it"
    )

    mon = sub.add_parser(
        "monitor",
        help="print live RAM, swap, GPU memory and process memory (optionally recorded)",
        description="Sample system RAM and swap, every GPU's memory, utilisation, temperature "
        "and power (through NVML, where there is a driver), and the memory of the processes "
        "you name, and print a compact live line (or CSV rows). Ctrl-C stops. --record writes "
        "a trace the app can replay.",
    )
    mon.add_argument(
        "--pid", type=_pid, action="append", default=[], metavar="PID", help="follow a process"
    )
    mon.add_argument("--record", metavar="FILE", help="also write a trace to FILE")
    mon.add_argument("--force", action="store_true", help="replace FILE if it exists")
    mon.add_argument("--duration", type=_finite_float, metavar="S", help="stop after S seconds")
    mon.add_argument(
        "--interval-ms", type=int, default=1000, metavar="N", help="sampling interval (1000)"
    )
    mon.add_argument("--csv", action="store_true", help="one CSV row per sample")

    fx = sub.add_parser(
        "fixes",
        help="list, apply and undo configuration fixes",
        description="Config fixes go into a Jupyter kernelspec (a copy named '<name> "
        "(tfdoctor)' by default), a conda environment's activate hooks, a shell file to "
        "source, or a notebook preamble. Every change is backed up and can be undone.",
    )
    fsub = fx.add_subparsers(dest="fixes_command", metavar="ACTION", required=True)
    fl = fsub.add_parser("list", help="the fix catalog")
    fl.add_argument("--json", action="store_true", help="print as JSON")
    fa = fsub.add_parser("apply", help="apply config fixes")
    fa.add_argument("fix_ids", nargs="+", metavar="FIX", help="fix ids (see `fixes list`)")
    where = fa.add_mutually_exclusive_group(required=True)
    where.add_argument("--kernel", metavar="NAME", help="a Jupyter kernelspec")
    where.add_argument("--conda", metavar="PREFIX", help="a conda environment's folder")
    where.add_argument("--env-file", metavar="PATH", help="a shell file to source")
    where.add_argument(
        "--preamble", action="store_true", help="print the notebook cell to run first"
    )
    fa.add_argument(
        "--in-place", action="store_true", help="edit the kernelspec itself, not a copy"
    )
    fa.add_argument("--force", action="store_true", help="change a read-only file too")
    fa.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a fix parameter, e.g. memory_limit_mb=6000 or gpu=1",
    )
    fu = fsub.add_parser("undo", help="undo the last apply (or the one with this id)")
    fu.add_argument("record", nargs="?", metavar="ID", help="an id from `fixes history`")
    fu.add_argument(
        "--force",
        action="store_true",
        help="undo even a file you edited since the apply (your version is kept beside it)",
    )
    fsub.add_parser("history", help="what was applied, newest last")
    fk = fsub.add_parser(
        "stop-process", help="stop a process holding GPU memory (a Jupyter kernel cleanly)"
    )
    fk.add_argument("pid", type=_pid, metavar="PID", help="from `tfdoctor check` or nvidia-smi")
    fk.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    fk.add_argument(
        "--other-user",
        action="store_true",
        help="as root, also stop another user's process",
    )
    fs = fsub.add_parser("show", help="one fix in full: what it changes, its risk, its code")
    fs.add_argument("fix_id", metavar="FIX")

    ex = sub.add_parser(
        "export-fix",
        help="write a script that applies fixes where the crash happens",
        description="A shell (sh), PowerShell (ps1) or Python (py, the notebook preamble) "
        "script for the given fixes, or for the config fixes of the given causes. The shell "
        "scripts are dry runs unless run with --apply (-Apply); --undo (-Undo) takes them back.",
    )
    ex.add_argument("--format", choices=["sh", "ps1", "py"], default="sh")
    ex.add_argument("--fixes", nargs="+", default=[], metavar="FIX", help="fix ids")
    ex.add_argument(
        "--causes", nargs="+", default=[], metavar="CAUSE", help="cause ids from a diagnosis"
    )
    ex.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ex.add_argument(
        "--kernel",
        metavar="NAME",
        help="sh: put the settings into a copy of this Jupyter kernel (not ~/.bashrc)",
    )
    ex.add_argument(
        "--python",
        metavar="PATH",
        help="sh: the kernel's interpreter, which changes its kernelspec (default: python3)",
    )
    ex.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    ex.add_argument("--force", action="store_true", help="replace FILE if it exists")

    e = sub.add_parser(
        "envs",
        help="list Python environments to check (kernelspecs, conda envs, running kernels)",
        description="List candidate target interpreters: this one, every Jupyter kernelspec, "
        "conda environments, and the interpreters of running Jupyter kernels.",
    )
    e.add_argument("--json", action="store_true", help="print as JSON")
    _add_show_secrets(e)

    cap = sub.add_parser(
        "capture",
        help="record this machine's NVIDIA/system facts to a snapshot file",
        description="Record the NVML session (driver, GPUs, GPU processes) and the system and "
        "CUDA facts of this machine into a JSON snapshot that `tfdoctor check --snapshot` "
        "replays. Share it in a bug report; no host or user names are stored.",
    )
    cap.add_argument("output", metavar="FILE", help="where to write the snapshot (.json)")
    cap.add_argument("--note", default="", help="how/where it was recorded (stored in the file)")
    cap.add_argument("--force", action="store_true", help="replace FILE if it exists")
    _add_show_secrets(cap)
    return p


OpenApp = Callable[[bool, str | None], int]  # (smoke test, an investigation to open)


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
    if args.install_desktop_entry or args.uninstall_desktop_entry:
        if args.command is not None or args.smoke_test:
            flag = "--install" if args.install_desktop_entry else "--uninstall"
            parser.error(f"{flag}-desktop-entry is used on its own, without a command")
        return cmd_desktop_entry(install=args.install_desktop_entry)
    if args.command is not None:
        _interrupt_on_termination()
    try:
        if args.command is None:
            if open_app is None:
                return _fail("the desktop app is not available here; `tfdoctor check` works")
            return open_app(args.smoke_test, args.open_app_file)
        if args.command == "check":
            return cmd_check(args)
        if args.command == "diagnose":
            return cli_diagnose.cmd_diagnose(args)
        if args.command == "report":
            return cli_report.cmd_report(args)
        if args.command == "envs":
            return cmd_envs(args)
        if args.command == "bench":
            return cmd_bench(args)
        if args.command == "monitor":
            return cmd_monitor(args)
        if args.command == "watch":
            return cmd_watch(args)
        if args.command == "fixes":
            return cmd_fixes(args)
        if args.command == "export-fix":
            return cmd_export_fix(args)
        if args.command == "capture":
            return cmd_capture(args)
    except KeyboardInterrupt:
        print("tfdoctor: interrupted", file=sys.stderr)
        return 130
    except KnowledgeError as e:  # a broken install: its data files, not the user's input
        return _fail(f"{e} (tfdoctor's own data files are damaged: reinstall tfdoctor)")
    parser.error(f"unknown command {args.command}")
    return EXIT_UNUSABLE


def _interrupt_on_termination() -> None:
    """SIGTERM and SIGHUP (a closed terminal, `kill`) end a command like Ctrl-C does, so that
    its clean-up runs: the worker's process group stopped, its memory cgroup removed."""
    import signal

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, interrupt)
        except (ValueError, OSError):  # not the main thread (an embedding program)
            return


def _set_params(items: Sequence[str]) -> dict[str, str] | str:
    """--set NAME=VALUE options as a dict, or the one-line reason one is malformed."""
    params: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            return f"--set {item!r}: expected NAME=VALUE"
        params[key] = value
    return params


def _target(args: argparse.Namespace) -> Target | str:
    """The interpreter named by --python / --kernel (default: this one), or why not."""
    from tfdoctor.core.model import Target
    from tfdoctor.core.probes.targetrun import app_is_bundle, current_target

    if args.python:
        return Target(python=args.python, label=args.python, kind="path")
    if args.kernel:
        from tfdoctor.core.probes.envs import kernelspec_targets, read_kernelspecs

        specs = {t.name: t for t in kernelspec_targets() if t.name}
        broken = read_kernelspecs()[1]
        if args.kernel in broken:
            return f"kernelspec {args.kernel!r} is broken: {broken[args.kernel]}"
        if args.kernel not in specs:
            known = ", ".join(sorted(specs)) or "none installed"
            return f"no Jupyter kernelspec named {args.kernel!r} (known: {known})"
        return specs[args.kernel]
    if app_is_bundle():
        return (
            "this tfdoctor is a bundle without a Python of its own: name the Python your "
            "notebook uses with --python PATH or --kernel NAME (see `tfdoctor envs`)"
        )
    return current_target()


def cmd_check(args: argparse.Namespace) -> int:
    from tfdoctor.core.probes import nvml
    from tfdoctor.core.probes.targetrun import TargetError
    from tfdoctor.core.scan import CheckRun, load_machine_snapshot

    if args.timeout <= 0:
        return _fail("--timeout must be a positive number of seconds")
    session = cli_report.opened_session(args)
    if isinstance(session, str):
        return _fail(session)
    named = bool(args.python or args.kernel)
    if session is not None and session.check is not None and not named:
        return _show_check(args, session.check, session)  # the saved check, not a new one
    if session is not None and session.target is not None and not named:
        target: Target | str = session.target
    else:
        target = _target(args)
    if isinstance(target, str):
        return _fail(target)
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
    return _show_check(args, report, session)


def _show_check(args: argparse.Namespace, report: CheckReport, session: Any) -> int:
    """Print a check (as JSON or for the terminal); with --save, keep it in the file."""
    if args.save:
        from tfdoctor.core.session import Session

        session = session if session is not None else Session()
        session.target, session.check = report.target, report
        failed = cli_report.save_session(args, session)
        if failed is not None:
            return failed
    if args.json:
        data = report.to_json()
        json.dump(
            data if args.show_secrets else mask_secrets(data), sys.stdout, indent=2, default=str
        )
        sys.stdout.write("\n")
    else:
        paint = Painter(sys.stdout, force=False if args.no_color else None)
        text = render_report(report, paint, show_ok=args.all)
        sys.stdout.write(text if args.show_secrets else mask_text(text))
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


def cmd_bench(args: argparse.Namespace) -> int:
    from tfdoctor.core.bench.batchsearch import SearchOptions
    from tfdoctor.core.bench.config import BenchConfig, ConfigError
    from tfdoctor.core.bench.supervisor import BenchRun, SupervisorOptions

    if args.input_shape is not None and not args.input_shape.strip():
        return _fail("--input-shape: give the dimensions, e.g. 64x64x3 (or leave it out)")
    if args.set and not args.verify_fix:
        return _fail("--set gives a fix parameter: use it with --verify-fix FIX")
    session = cli_report.opened_session(args)
    if isinstance(session, str):
        return _fail(session)
    if session is not None and session.target is not None and not (args.python or args.kernel):
        target: Target | str = session.target
    else:
        target = _target(args)
    if isinstance(target, str):
        return _fail(target)
    try:
        config = BenchConfig.from_form(vars(args))
        search = SearchOptions(None, args.max_batch, args.margin).validate(config)
    except ConfigError as exc:
        return _fail(str(exc))
    for name, value in (("--watchdog", args.watchdog), ("--stall", args.stall)):
        if value <= 0:
            return _fail(f"{name} must be a positive number of seconds")
    if args.memory_cap_mib is not None and args.memory_cap_mib < 64:
        return _fail("--memory-cap-mib must be at least 64 (Python and TensorFlow need more)")
    if args.guard_mib is not None and args.guard_mib < 0:
        return _fail("--guard-mib must be 0 (off) or a positive number of MiB")
    options = SupervisorOptions(
        watchdog_s=args.watchdog,
        stall_s=args.stall,
        memory_cap_mib=args.memory_cap_mib,
        guard_mib=args.guard_mib,
    )
    progress = _BenchProgress(sys.stderr, enabled=sys.stderr.isatty() and not args.json)

    params = _set_params(args.set)
    if isinstance(params, str):
        return _fail(params)
    if args.verify_fix:
        from tfdoctor.core.bench.verify import fixed_run
        from tfdoctor.core.fixes import FixError

        try:
            fixed_run(target, config, args.verify_fix, params)
        except FixError as exc:
            return _fail(str(exc))
        return _verify_fix(args, target, config, options, params)

    run = BenchRun(target, config, options, search if args.find_max_batch else None).start()
    seq = 0
    try:
        while not run.done:
            run.wait(0.1)
            for seq, (kind, data) in run.events.since(seq):  # noqa: B007, B020 - cursor
                progress.update(kind, data, config)
    except KeyboardInterrupt:
        # Ctrl-C, SIGTERM or SIGHUP: stop the worker's group and remove its cgroup before
        # leaving (a second interrupt still leaves at once; the worker dies with us anyway)
        progress.clear()
        run.cancel()
        run.wait(30)
        raise
    progress.clear()
    if run.error is not None:
        return _fail(run.error)
    res = run.result
    assert res is not None
    if args.save:
        from tfdoctor.core.session import Session

        session = session if session is not None else Session()
        session.target, session.bench, session.bench_options = target, res, options
        session.telemetry = [item for _, item in run.timeline.since(0)]
        failed = cli_report.save_session(args, session)
        if failed is not None:
            return failed
    if args.json:
        json.dump(res.to_json(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        paint = Painter(sys.stdout, force=False if args.no_color else None)
        sys.stdout.write(render_bench(res, paint))
    return EXIT_OK if res.outcome.status == "completed" else EXIT_FINDINGS


def _verify_fix(
    args: argparse.Namespace,
    target: Target,
    config: Any,
    options: Any,
    params: dict[str, str],
) -> int:
    import threading

    from tfdoctor.core.bench.verify import Verification, verify

    if sys.stderr.isatty() and not args.json:
        print("  running without the fix, then with it…", file=sys.stderr)
    cancel, done = threading.Event(), threading.Event()
    box: dict[str, Verification | BaseException] = {}

    def work() -> None:
        try:
            box["v"] = verify(target, config, args.verify_fix, params, options, cancel=cancel)
        except Exception as exc:  # noqa: BLE001 - said in one line below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=work, name="tfdoctor-verify", daemon=True).start()
    try:
        # an Event, not Thread.join: on Python 3.11 a join interrupted by Ctrl-C marks the
        # thread as ended, and the next join would not wait for the clean-up
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        # as a plain run: stop the worker's group and remove its cgroup before leaving
        cancel.set()
        done.wait(30)
        raise
    error = box.get("error")
    if error is not None:
        return _fail(" ".join(str(error).split()) or type(error).__name__)
    v = box["v"]
    assert isinstance(v, Verification)
    if args.json:
        json.dump(v.to_json(), sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
        return EXIT_OK if v.after["survived"] else EXIT_FINDINGS
    print(f"tfdoctor bench — verify {', '.join(args.verify_fix)}")
    print(f"  {'':18}{'before':>22}{'after':>22}")
    for label, before, after in v.table(_size):
        print(f"  {label:18}{before:>22}{after:>22}")
    for note in v.notes:
        print(f"  note: {note}")
    print(f"  {v.verdict}")
    return EXIT_OK if v.after["survived"] else EXIT_FINDINGS


class _BenchProgress:
    """One self-rewriting line on a terminal: phase, step k/N, speed, memory."""

    def __init__(self, stream: TextIO, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.phase = "start"
        self.step = ""
        self.extra = ""

    def update(self, kind: str, data: Any, config: Any) -> None:
        from tfdoctor.core.bench.supervisor import phase_label

        if kind == "phase":
            self.phase = str(data)
            self.step = ""
        elif kind == "step" and isinstance(data, dict):
            total = config.steps * config.epochs
            eps = data.get("examples_per_s")
            self.step = f" {data.get('step')}/{total}" + (f", {eps:,.0f} ex/s" if eps else "")
        elif kind == "search_probe" and isinstance(data, dict):
            self.extra = f"[batch {data.get('batch_size')}] "
        elif kind == "status" and not self.enabled:
            return
        if self.enabled:
            line = f"  {self.extra}{phase_label(self.phase)}{self.step}…"
            print(f"\r\033[K{line[:110]}", end="", file=self.stream, flush=True)

    def clear(self) -> None:
        if self.enabled:
            print("\r\033[K", end="", file=self.stream, flush=True)


def _size(n: Any) -> str:
    """A byte count for people: "512 MiB", "1.25 GiB"."""
    if not isinstance(n, (int, float)):
        return "?"
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def render_bench(res: BenchResult, paint: Painter) -> str:
    """The terminal view of a benchmark or a batch search."""
    from tfdoctor.core.bench.supervisor import TF_MEMORY_NOT_REPORTED

    o = res.outcome
    ok = o.status == "completed"
    out = [
        paint("tfdoctor bench", "1") + f" — {res.config.describe()}",
        f"  outcome: {paint(o.status, '32;1' if ok else '31;1')} after {o.duration_s:.1f} s — "
        + o.detail,
    ]
    if o.signal or o.exit_code not in (0, None):
        out.append(f"  exit: code {o.exit_code}" + (f", signal {o.signal}" if o.signal else ""))
    env = res.info
    if env:
        gpus = ", ".join(g.get("name", "?") for g in env.get("gpus") or []) or "none"
        out.append(
            f"  TensorFlow {env.get('tf_version')} (Keras {env.get('keras_version')}); "
            f"GPUs: {gpus}; memory measured on {env.get('memory_device')}"
        )
    for k in res.knobs:
        if not k.get("applied"):
            out.append(paint(f"  note: {k.get('name')} not applied: {k.get('why')}", "33"))
    m = res.metrics
    if res.recommendation is not None:
        r = res.recommendation
        out.append("")
        out.append(
            f"  probes: {m.get('probes')} (budget {m.get('probe_budget')}), workers started: "
            f"{m.get('workers_started')}, {m.get('duration_s')} s"
        )
        for p in res.probes:
            peak = ", ".join(f"{d} {_size(v)}" for d, v in (p.get("tf_peak_bytes") or {}).items())
            speed = p.get("examples_per_s")
            out.append(
                f"    batch {p['batch_size']:>6}: {p['status']:<16}"
                + (f" peak {peak}" if peak else "")
                + (f", RSS {_size(p.get('rss_peak_bytes'))}" if p.get("rss_peak_bytes") else "")
                + (f", {speed:,.0f} ex/s" if speed else "")
            )
        if r.get("largest_clean_batch"):
            out.append(
                paint(
                    f"  largest clean batch: {r['largest_clean_batch']}; recommended: "
                    f"{r['recommended_batch']} (margin {r['margin']:.0%})",
                    "1",
                )
                + (" — reached --max-batch without a failure" if r.get("hit_max") else "")
            )
    elif m:
        speed = m.get("steady_steps_per_s")
        peak = ", ".join(f"{d} {_size(v)}" for d, v in (m.get("tf_peak_bytes") or {}).items())
        out.append(
            f"  steps: {m.get('steps_done')}"
            + (
                f", {speed:.2f} steps/s ({m.get('examples_per_s'):,.0f} examples/s)"
                if speed
                else ""
            )
            + (f", first step {m['first_step_s']:.1f} s" if m.get("first_step_s") else "")
        )
        out.append(
            "  memory: "
            + f"TF peak {peak or TF_MEMORY_NOT_REPORTED}; "
            + f"worker RSS peak {_size(m.get('rss_peak_bytes'))}"
        )
    if o.exception:
        out.append(f"  exception: {o.exception.get('type')}: {o.exception.get('message')}")
    if o.fault_stack:
        first = [ln for ln in o.fault_stack.splitlines() if ln.strip()][:6]
        out.append("  stack (faulthandler):")
        out += [paint(f"    {ln[:100]}", "2") for ln in first]
    if res.diagnosis.causes:
        out.append("")
        out.append(cli_diagnose.render_diagnosis(res.diagnosis, paint, header=False).rstrip("\n"))
    elif o.status not in ("completed", "cancelled"):
        out.append(
            "  diagnosis: no known failure pattern in what the worker printed; its full output "
            "and stacks are in the files below"
        )
    if res.run_dir:
        out.append("")
        out.append(paint(f"  files: {res.run_dir}", "2"))
    return "\n".join(out) + "\n"


def _in_gib(n: Any) -> str:
    """A byte count in GiB (one decimal, no unit)."""
    return f"{n / (1 << 30):.1f}" if isinstance(n, (int, float)) else "-"


def monitor_line(sample: dict[str, Any]) -> str:
    """One compact line: RAM, swap, each GPU, each followed process."""
    parts = [
        f"{sample['t']:7.1f}s",
        f"RAM {_in_gib(sample.get('ram_used'))}/{_in_gib(sample.get('ram_total'))} GiB",
        f"swap {_in_gib(sample.get('swap_used'))} GiB",
    ]
    for g in sample.get("gpus") or []:
        extra = "".join(
            f" {v}{unit}"
            for v, unit in ((g.get("util"), "%"), (g.get("temp_c"), "°C"), (g.get("power_w"), "W"))
            if v is not None
        )
        parts.append(
            f"GPU{g['index']} {_in_gib(g.get('used'))}/{_in_gib(g.get('total'))} GiB{extra}"
        )
    if sample.get("nvml") == "stalled":
        parts.append("NVML STALLED")
    for pid, rss in (sample.get("rss") or {}).items():
        vram = sum(
            p.get("used", 0)
            for g in sample.get("gpus") or []
            for p in g.get("procs") or []
            if str(p.get("pid")) == pid
        )
        parts.append(f"pid {pid} RSS {_size(rss)}" + (f" VRAM {_size(vram)}" if vram else ""))
    return " | ".join(parts)


CSV_COLUMNS = ("t", "ram_used", "ram_total", "swap_used")


def cmd_watch(args: argparse.Namespace) -> int:

    from tfdoctor.core.bench import observe
    from tfdoctor.core.diagnose.watch_rules import preallocated_pool
    from tfdoctor.core.paths import state_dir
    from tfdoctor.core.probes import nvml

    tf_file = Path(args.tf_file) if args.tf_file else state_dir() / "watch" / "tf.jsonl"
    if args.first_cell:
        print(observe.first_cell(tf_file), end="")
        return EXIT_OK
    if not 5 <= args.interval_ms <= 60_000:
        return _fail("--interval-ms must be from 5 to 60000")
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else list(args.cmd)
    if command and (args.pid is not None or args.kernel):
        return _fail("watch a running process (--pid, --kernel) or start one (-- COMMAND)")
    session = cli_report.opened_session(args)
    if isinstance(session, str):
        return _fail(session)
    if args.record:
        refused = refuse_existing(Path(args.record), args.force)
        if refused:
            return _fail(refused)
    try:
        tf_file.parent.mkdir(parents=True, exist_ok=True)
        if command:
            env = {**os.environ, "TFDOCTOR_WATCH_FILE": str(tf_file)}
            label = " ".join(" ".join(command).split())  # one line, whatever -c holds
            try:
                # with --json, stdout is the verdict alone: the command's output goes to stderr
                child, output = observe.start_command(
                    command,
                    env,
                    json_mode=args.json,
                    announce=None
                    if args.json
                    else lambda: print(f"watching {label[:80]}; Ctrl-C stops", flush=True),
                )
            except OSError as exc:
                return _fail(f"cannot start {command[0]}: {exc.strerror or exc}")
            watched = observe.Watched(child.pid, label[:80], child=child, output=output)
        else:
            watched = observe.resolve(args.pid, args.kernel)
        observer = observe.Observer(
            watched,
            record=args.record,
            interval_s=args.interval_ms / 1000,
            gpu_api=nvml.live_api(),
            tf_file=tf_file,
        )
    except observe.WatchError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{getattr(exc, 'filename', None) or 'watch'}: {exc.strerror or exc}")
    tty = sys.stdout.isatty() and not args.json
    if not args.json and not command:  # a command it started was announced as it started
        print(f"watching {watched.label}; Ctrl-C stops", flush=True)

    def tick(sample: dict[str, Any] | None) -> None:
        if sample is not None and not args.json:
            line = monitor_line(sample)[:200]
            print(f"\r\033[K{line}" if tty else line, end="" if tty else "\n", flush=True)

    observer.start()
    try:
        result = observer.wait(on_tick=tick)
    except KeyboardInterrupt:
        observer.stop()
        result = observer.wait()
    if tty:
        print()
    if args.save:
        from tfdoctor.core.session import Session

        session = session if session is not None else Session()
        session.watch = result
        failed = cli_report.save_session(args, session)
        if failed is not None:
            return failed
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
        return EXIT_OK
    print(f"{watched.label}: {result.ending.words()} after {result.duration_s:.0f} s")
    for line in result.ending.restart_lines[:2]:
        print(f"  Jupyter: {line}")
    if result.ending.normal:
        print("Nothing to explain: it ended normally." if result.ending.how != "running"
              else "Stopped watching: it is still running.")  # fmt: skip
    elif not result.causes:
        print("No cause found in what the watch saw. Run it again under watch with the first "
              "cell (tfdoctor watch --first-cell) for TensorFlow's own numbers.")  # fmt: skip
        pool = preallocated_pool(result.items, watched.pid)
        if pool:
            print(pool)
    for i, cause in enumerate(result.causes):
        print(f"{'Most likely' if i == 0 else 'Also'}: {cause.title} ({cause.confidence:.0%})")
        for ev in cause.evidence[:3]:
            print(f"    {ev.text}")
    if result.trace is not None:
        print(f"trace: {result.trace} (open it on the Reproduce page, or tfdoctor diagnose "
              f"--trace)")  # fmt: skip
    return EXIT_OK


def cmd_monitor(args: argparse.Namespace) -> int:
    import time as _time

    from tfdoctor.core import telemetry
    from tfdoctor.core.probes import nvml

    if not 5 <= args.interval_ms <= 60_000:
        return _fail("--interval-ms must be from 5 to 60000")
    if args.duration is not None and args.duration <= 0:
        return _fail("--duration must be a positive number of seconds")
    for pid in args.pid:
        if not os.path.exists(f"/proc/{pid}"):
            return _fail(f"--pid {pid}: no such process")
    writer = None
    if args.record:
        refused = refuse_existing(Path(args.record), args.force)
        if refused:
            return _fail(refused)
        try:
            writer = telemetry.TraceWriter(
                args.record, {"interval_s": args.interval_ms / 1000, "pids": args.pid}
            )
        except OSError as exc:
            return _fail(f"--record: cannot write {args.record}: {exc.strerror or exc}")
    timeline = telemetry.Timeline(writer=writer)
    sampler = telemetry.Sampler(
        timeline, interval_s=args.interval_ms / 1000, gpu_api=nvml.live_api(), pids=args.pid
    ).start()
    tty = sys.stdout.isatty() and not args.csv
    if sampler.gpu_problem and not args.csv:
        print(f"tfdoctor monitor: no GPU series ({sampler.gpu_problem})", file=sys.stderr)
    state = {"seq": 0, "header": False}

    def show() -> None:
        for seq, (kind, item) in timeline.since(state["seq"]):
            state["seq"] = seq
            if kind == "marker":
                print(f"\n[{item['t']:.1f}s] {item['label']}" if tty else item["label"])
            if kind != "sample":
                continue
            if args.csv:
                gpus = item.get("gpus") or []
                if not state["header"]:
                    cols = [*CSV_COLUMNS, *(f"gpu{g['index']}_used" for g in gpus)]
                    cols += [f"pid{p}_rss" for p in args.pid]
                    print(",".join(cols))
                    state["header"] = True
                row = [str(item.get(c, "")) for c in CSV_COLUMNS]
                row += [str(g.get("used", "")) for g in gpus]
                row += [str((item.get("rss") or {}).get(str(p), "")) for p in args.pid]
                print(",".join(row), flush=True)
            elif tty:
                print(f"\r\033[K{monitor_line(item)[:200]}", end="", flush=True)
            else:
                print(monitor_line(item), flush=True)

    deadline = None if args.duration is None else _time.monotonic() + args.duration
    try:
        while deadline is None or _time.monotonic() < deadline:
            _time.sleep(min(0.2, args.interval_ms / 1000))
            show()
    except KeyboardInterrupt:
        pass
    finally:
        sampler.stop()
        timeline.close()
        show()  # what arrived after the last look: the printout matches the recorded trace
        if tty:
            print()
    return EXIT_OK


def cmd_fixes(args: argparse.Namespace) -> int:
    from tfdoctor.core import fixes
    from tfdoctor.core.knowledge import catalog

    if args.fixes_command in ("apply", "undo", "history"):
        try:  # what an interrupted apply or undo left, finished or rolled back first
            for line in fixes.recover():
                print(f"tfdoctor: {line}", file=sys.stderr)
        except fixes.FixError as exc:
            return _fail(str(exc))
    if args.fixes_command == "list":
        known = catalog.fixes()
        if args.json:
            rows = [
                {
                    "id": f.id,
                    "kind": f.kind,
                    "title": f.title,
                    "summary": f.summary,
                    "risk": f.risk,
                    "undo": f.undo,
                    "applicable": f.applicable,
                    "env": dict(f.env),
                    "unset": list(f.unset),
                    "params": dict(f.params),
                    "snippet": f.snippet,
                }
                for f in known.values()
            ]
            json.dump({"schema": 1, "fixes": rows}, sys.stdout, indent=2)
            sys.stdout.write("\n")
            return EXIT_OK
        for f in known.values():
            mark = "apply" if f.applicable else f.kind
            print(f"{f.id:28} [{mark:6}] {f.title}")
        return EXIT_OK
    if args.fixes_command == "stop-process":
        if not args.yes:
            if not sys.stdin.isatty():
                return _fail("stopping a process needs confirmation: add --yes")
            try:
                answer = input(f"Stop process {args.pid}? Unsaved work in it is lost. [y/N] ")
            except EOFError:
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                print("not stopped")
                return EXIT_OK
        try:
            print(fixes.stop_process(args.pid, other_user=args.other_user))
        except fixes.FixError as exc:
            return _fail(str(exc))
        return EXIT_OK
    if args.fixes_command == "show":
        shown = catalog.fixes().get(args.fix_id)
        if shown is None:
            return _fail(f"unknown fix {args.fix_id!r} (see `tfdoctor fixes list`)")
        print(f"{shown.title} [{shown.id}, {shown.kind}]\n{shown.summary}")
        for label, text in (("risk", shown.risk), ("undo", shown.undo)):
            if text:
                print(f"{label}: {text}")
        for k, v in shown.env:
            print(f"sets {k}={v}")
        for k in shown.unset:
            print(f"unsets {k}")
        if shown.preamble or shown.snippet:
            print("\n" + (shown.preamble or shown.snippet))
        return EXIT_OK
    try:
        if args.fixes_command == "history":
            for rec in fixes.history():
                state = "undone" if rec.get("undone") else "applied"
                print(f"{rec['id']}  {rec['time']}  {state:7}  {','.join(rec['fixes'])} -> "
                      f"{rec.get('what', '?')} {rec.get('target', '?')}")  # fmt: skip
            return EXIT_OK
        if args.fixes_command == "undo":
            rec = fixes.undo(args.record, force=args.force)
            print(f"undone {rec['id']}: {', '.join(rec['fixes'])} on {rec['target']}")
            for copy in rec.get("kept_edited") or []:
                print(f"  your edited version is kept as {copy}")
            return EXIT_OK
        params = _set_params(args.set)
        if isinstance(params, str):
            return _fail(params)
        plan = fixes.plan(args.fix_ids, params)
        if args.preamble:
            sys.stdout.write(fixes.preamble_text(plan))
            return EXIT_OK
        if args.kernel:
            rec = fixes.apply_to_kernelspec(
                plan, args.kernel, in_place=args.in_place, force=args.force
            )
        elif args.conda:
            rec = fixes.apply_to_conda(plan, args.conda, force=args.force)
        else:
            rec = fixes.apply_to_env_file(plan, args.env_file, force=args.force)
    except fixes.FixError as exc:
        return _fail(str(exc))
    if rec.get("changed") is False:
        print(f"already applied: {rec['target']} has these settings")
    else:
        print(f"applied {', '.join(plan.fix_ids)} to {rec['target']} (undo: tfdoctor fixes "
              f"undo {rec['id']})")  # fmt: skip
        if plan.preamble:
            print("also paste this as the notebook's first cell (tfdoctor fixes apply ... "
                  "--preamble prints it):")  # fmt: skip
            sys.stdout.write(plan.preamble)
    return EXIT_OK


def cmd_export_fix(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tfdoctor.core.fixes import FixError, export
    from tfdoctor.core.paths import atomic_write_text

    params = _set_params(args.set)
    if isinstance(params, str):
        return _fail(params)
    if not args.fixes and not args.causes:
        return _fail("name --fixes or --causes (see `tfdoctor fixes list`)")
    try:
        text = export.export(
            args.format, args.fixes, args.causes, params, kernel=args.kernel, python=args.python
        )
    except FixError as exc:
        return _fail(str(exc))
    if not args.output:
        sys.stdout.write(text)
        return EXIT_OK
    out = Path(args.output)
    refused = refuse_existing(out, args.force)
    if refused:
        return _fail(refused)
    new_file = not out.exists()
    try:
        atomic_write_text(out, text)
        if args.format == "sh" and new_file:  # a replaced file keeps the mode it had
            out.chmod(0o755)
    except OSError as exc:
        return _fail(f"cannot write {out}: {exc.strerror or exc}")
    print(f"wrote {out}")
    return EXIT_OK


def cmd_desktop_entry(install: bool) -> int:
    """--install-desktop-entry / --uninstall-desktop-entry: one line per file."""
    from tfdoctor.core import desktop

    try:
        if install:
            for path in desktop.install_desktop_entry():
                print(f"installed {path}")
            return EXIT_OK
        removed = desktop.uninstall_desktop_entry()
    except desktop.DesktopError as exc:
        return _fail(str(exc))
    for path in removed:
        print(f"removed {path}")
    if not removed:
        where = desktop.installed_files()[0].parent
        print(f"nothing to remove: no tfdoctor launcher is installed in {where}")
    return EXIT_OK


def cmd_envs(args: argparse.Namespace) -> int:
    from tfdoctor.core.probes.envs import find_targets, read_kernelspecs

    targets = find_targets()
    broken = read_kernelspecs()[1]
    if args.json:
        data = {
            "schema": 1,
            "targets": [t.to_json() for t in targets],
            "broken_kernelspecs": [{"name": n, "problem": why} for n, why in broken.items()],
        }
        json.dump(data if args.show_secrets else mask_secrets(data), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    for t in targets:
        exists = "" if os.path.exists(t.python) else "   (missing!)"
        print(f"{t.kind:15} {t.label}\n{'':15}   {t.python}{exists}")
    for name, why in broken.items():
        print(
            f"{'broken':15} Jupyter kernelspec {name!r}: Jupyter cannot start it\n{'':15}   {why}"
        )
    return EXIT_OK


def cmd_capture(args: argparse.Namespace) -> int:
    from tfdoctor.core.scan import capture_machine

    refused = refuse_existing(Path(args.output), args.force)
    if refused:
        return _fail(refused)
    try:
        info = capture_machine(args.output, provenance=args.note, mask=not args.show_secrets)
    except OSError as exc:
        return _fail(f"cannot write {args.output}: {exc.strerror or exc}")
    print(
        f"wrote {info['path']} (NVML: {info['nvml_status']}, {info['gpus']} GPU(s)); "
        f"replay it with: tfdoctor check --snapshot {args.output}"
    )
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
