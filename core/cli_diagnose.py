"""The `tfdoctor diagnose` verb: why a run died, from its crash output alone, or from every
source as one case (a saved check, a saved run, a trace, recent crashes) as the app does."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import stat
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tfdoctor.core import cli_report, jsonio
from tfdoctor.core.terminal import EXIT_OK, Painter
from tfdoctor.core.terminal import clip as _clip
from tfdoctor.core.terminal import fail as _fail

if TYPE_CHECKING:
    from tfdoctor.core.diagnose.combine import RankedCause
    from tfdoctor.core.diagnose.reader import LimitedStream
    from tfdoctor.core.model import Cause, Diagnosis, Evidence

STREAM_LIMIT_BYTES = 256 << 20  # of a FIFO or socket named as a log: it may never end


def add_parser(sub: Any) -> None:
    """The verb's options, on the `tfdoctor` sub-command parser."""
    d = sub.add_parser(
        "diagnose",
        help="explain why a TensorFlow run died, from what it printed",
        description="Read crash output (a TF log, a traceback, a Jupyter server log, dmesg "
        "lines, an nvidia-smi paste; several files are one case; - reads standard input) and "
        "name the likely causes, best first, with the lines that prove them. Exit code: 0 "
        "when it ran, 2 when an input cannot be read.",
    )
    d.add_argument("files", nargs="*", metavar="FILE", help="log files, or - for stdin")
    d.add_argument(
        "--check",
        metavar="REPORT",
        help="a report saved with `tfdoctor check --json`: its findings and facts count too",
    )
    d.add_argument(
        "--run",
        metavar="RESULT",
        help="a result saved with `tfdoctor bench --json`: its causes and peaks count too",
    )
    d.add_argument(
        "--trace",
        metavar="TRACE",
        help="a run's telemetry trace: a leak, retracing, an idle GPU show there",
    )
    d.add_argument(
        "--recent",
        action="store_true",
        help="also read recent crashes: the kernel log's OOM kills and Xid errors, Jupyter's logs",
    )
    d.add_argument(
        "--fixes",
        action="store_true",
        help="also list the fixes to try, with the values measured by --check and --run",
    )
    d.add_argument(
        "--export",
        metavar="SCRIPT",
        help="write the fixes to try as a script (.sh, .ps1 or .py by its name), with the "
        "exact commands for the checked setup",
    )
    d.add_argument("--force", action="store_true", help="replace SCRIPT if it exists")
    d.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    d.add_argument("--no-color", action="store_true", help="no ANSI colours")
    cli_report.add_file_options(
        d, "its logs, check, run and watch are one case with the files given"
    )


def cmd_diagnose(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tfdoctor.core.diagnose.engine import diagnose
    from tfdoctor.core.diagnose.reader import LimitedStream, not_text

    combined = bool(
        args.check
        or args.run
        or args.trace
        or args.recent
        or args.fixes
        or args.export
        or args.open
        or args.save
    )
    if not args.files and not combined:
        return _fail(
            "name a log file (- reads stdin), or --check, --run, --trace, --recent or --open"
        )
    inputs: list[Any] = []
    names: list[str] = []
    streams: list[tuple[str, LimitedStream]] = []
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
        mode = p.stat().st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            return _fail(f"{name}: is a device, not a log file")
        if not stat.S_ISREG(mode):  # a FIFO or a socket, which may never end: read so far
            try:
                stream = LimitedStream(p.open("rb"), STREAM_LIMIT_BYTES)
            except OSError as exc:
                return _fail(f"{name}: {exc.strerror or exc}")
            streams.append((name, stream))
            inputs.append(stream)
        else:
            try:
                with p.open("rb") as fh:
                    why = not_text(fh.read(8192))
            except OSError as exc:
                return _fail(f"{name}: {exc.strerror or exc}")
            if why:
                return _fail(f"{name}: is {why}, not a text log: copy the error text instead")
            inputs.append(p)
        names.append(p.name)
    if combined:
        code = _diagnose_case(args, inputs, names)
    else:
        try:
            result = diagnose(*inputs, names=names)
        except OSError as exc:
            return _fail(f"{getattr(exc, 'filename', None) or 'input'}: {exc.strerror or exc}")
        code = _show(args, result)
    for name, stream in streams:
        if stream.truncated:
            mib = STREAM_LIMIT_BYTES >> 20
            print(f"tfdoctor: {name} does not end: read its first {mib} MiB", file=sys.stderr)
    return code


def _show(args: argparse.Namespace, result: Diagnosis) -> int:
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    from tfdoctor.core.diagnose.combine import RankedCause
    from tfdoctor.core.fixes import propose

    # the fixes the log itself rules out (XLA off where XLA never ran) are not shown
    left_out = propose.proposed_fixes(
        [RankedCause(c, ()) for c in result.causes], (), None, propose.measure(None, log=result)
    ).left_out
    paint = Painter(sys.stdout, force=False if args.no_color else None)
    sys.stdout.write(render_diagnosis(result, paint, not_here={f for f, _ in left_out}))
    return EXIT_OK


def render_diagnosis(
    result: Diagnosis, paint: Painter, header: bool = True, not_here: set[str] | None = None
) -> str:
    """The terminal view of a diagnosis: causes best first, their proof, what to do."""
    from tfdoctor.core.knowledge import catalog

    width = min(shutil.get_terminal_size((100, 20)).columns, 100)
    fixes = catalog.fixes()
    out = []
    if header:
        out.append(
            paint("tfdoctor diagnose", "1")
            + f" — {', '.join(result.sources) or 'input'}: {result.lines_read} lines read"
        )
    if not result.causes and result.program_error is not None:
        out += ["", *program_error_lines(result.program_error)]
        return "\n".join(out) + "\n"
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
        if out:
            out.append("")
        shown = [f for f in c.fixes if f not in (not_here or ())]
        out += _render_cause(rank, dataclasses.replace(c, fixes=tuple(shown)), paint, width, fixes)
    return "\n".join(out) + "\n"


def _render_cause(
    rank: int, c: Cause, paint: Painter, width: int, fixes: dict[str, Any], seen_in: str = ""
) -> list[str]:
    if c.look_alike:  # the first cause's lines, fixes only once confirmed: how to tell
        from tfdoctor.core.diagnose.engine import shipped_causes

        info = shipped_causes().get(c.id)
        tell = f"To tell: {info.confirm}" if info is not None and info.confirm else c.explanation
        out = [paint(f"{rank}. {c.shown_title}", "2") + f"  [{c.id}, {c.confidence:.0%}]"]
        return out + [f"     {line}" for line in textwrap.wrap(tell, width - 5)]
    colour = "31;1" if rank == 1 else "33"
    out = [paint(f"{rank}. {c.shown_title}", colour) + f"  [{c.id}, {c.confidence:.0%}]"]
    if seen_in:
        out.append(f"     seen in: {seen_in}")
    for line in textwrap.wrap(c.explanation, width - 5):
        out.append(f"     {line}")
    for e in c.evidence[:5]:
        where = f"{e.source}:{e.line}" if e.line else e.source
        out.append(paint(f"     · {where}: {_clip(e.text, width - 12 - len(where))}", "2"))
    for fid in c.fixes[:3]:
        out.append(f"     → {fixes[fid].title if fid in fixes else fid} [{fid}]")
    return out


def _load_saved(option: str, path: str, read: Callable[[Any], Any]) -> Any:
    """A file named by an option, read by `read`; or the one-line reason it cannot be."""
    try:
        with open(path, "rb") as fh:
            return read(jsonio.loads(fh.read()))
    except OSError as exc:
        return f"{option} {path}: {exc.strerror or exc}"
    except ValueError as exc:  # not JSON, or not what the option takes
        return f"{option} {path}: {' '.join(str(exc).split())}"


def _diagnose_case(args: argparse.Namespace, inputs: list[Any], names: list[str]) -> int:
    """Every source as one case, as the app combines them: crash logs, a saved check, a saved
    run, a trace, recent crashes; then the fixes to try, with the values measured."""
    from pathlib import Path

    from tfdoctor.core import fixes, telemetry
    from tfdoctor.core.bench.outcome import BenchResult
    from tfdoctor.core.diagnose import recent
    from tfdoctor.core.fixes import export, propose
    from tfdoctor.core.paths import atomic_write_text
    from tfdoctor.core.scan import CheckReport
    from tfdoctor.core.session import Inputs, LogInput, RunEvidence, Session, analyse

    session = cli_report.opened_session(args)
    if isinstance(session, str):
        return _fail(session)
    session = session if session is not None else Session()
    logs = list(session.logs) + [
        LogInput(name, text=src.read())
        if not isinstance(src, Path)
        else LogInput(name, path=str(src))
        for src, name in zip(inputs, names, strict=True)
    ]
    check = _load_saved("--check", args.check, CheckReport.from_json) if args.check else None
    run = _load_saved("--run", args.run, RunEvidence.from_json) if args.run else None
    for loaded in (check, run):
        if isinstance(loaded, str):
            return _fail(loaded)
    if check is None:
        check = session.check
    else:
        session.check = check
        session.target = check.target
    if run is None and session.bench is not None:
        run = RunEvidence.of(session.bench)
    elif args.run and args.save:  # the whole result, for the file (its evidence is enough here)
        whole = _load_saved("--run", args.run, BenchResult.from_json)
        if not isinstance(whole, str):
            session.bench = whole
    items: list[tuple[str, dict[str, Any]]] = []
    if args.trace:
        try:
            items = telemetry.read_trace(args.trace)[1]
        except OSError as exc:
            return _fail(f"--trace {args.trace}: {exc.strerror or exc}")
        except telemetry.TraceError as exc:
            return _fail(str(exc))
    if args.recent:
        found, problems = recent.find_recent_crashes()
        logs += [LogInput(f.name, f.text if f.path is None else b"", f.path) for f in found]
        for line in [*problems, *([] if found else ["no recent crash found"])]:
            print(f"tfdoctor: {line}", file=sys.stderr)
    if items:
        session.telemetry = items
    items = items or list(session.telemetry)
    session.logs = logs
    facts = check.facts if check is not None else None
    findings = tuple(check.findings) if check is not None else ()
    watch = tuple(session.watch.causes) if session.watch is not None else ()
    try:
        a = analyse(Inputs(tuple(logs), facts, findings, run, tuple(items), watch))
    except OSError as exc:
        return _fail(f"{getattr(exc, 'filename', None) or 'input'}: {exc.strerror or exc}")
    failed = cli_report.save_session(args, session)
    if failed is not None:
        return failed
    python = check.target.python if check is not None else None
    proposals = [
        {
            "id": fid,
            "for": list(why),
            "params": propose.fix_params(fid, a.params),
            "origins": {k: a.origins[k] for k in propose.fix_params(fid, a.params)},
            "needs": a.wanting.get(fid),
            "commands": fixes.commands_for(fid, facts, python),
        }
        for fid, why in a.fixes
    ]
    if args.export:
        from tfdoctor.core.paths import refuse_existing

        refused = refuse_existing(Path(args.export), args.force)
        if refused:
            return _fail(refused)
        fmt = export.format_of(args.export)
        causes = a.cause_ids
        try:
            kernel = export.target_kernel(check.target if check is not None else None)
            text = export.proposal_script(
                fmt, a.fix_ids, causes, facts, python, a.params, a.origins, a.wanting, kernel
            )
            new_file = not Path(args.export).exists()
            atomic_write_text(Path(args.export), text)
            if fmt == "sh" and new_file:  # a replaced file keeps the mode it had
                Path(args.export).chmod(0o755)
        except fixes.FixError as exc:
            return _fail(f"no script: {exc}")
        except OSError as exc:
            return _fail(f"cannot write {args.export}: {exc.strerror or exc}")
        print(f"tfdoctor: wrote {args.export} (without options it is a dry run)", file=sys.stderr)
    if args.json:
        out = {
            "schema": 1,
            "causes": [{**r.cause.to_json(), "sources": list(r.sources)} for r in a.ranked],
            # tfdoctor's own runs, apart from the user's crash (never evidence about it)
            "experiments": [
                {**r.cause.to_json(), "sources": list(r.sources)}
                for r in (a.experiments if a.has_crash else ())
            ],
            "fixes": proposals,
            "measured": dict(a.params),
            "left_out": [{"id": fid, "why": why} for fid, why in a.left_out],
            "log_diagnosis": a.log_diagnosis.to_json() if a.log_diagnosis else None,
        }
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    paint = Painter(sys.stdout, force=False if args.no_color else None)
    experiments = a.experiments if a.has_crash else ()
    program_error = a.log_diagnosis.program_error if a.log_diagnosis is not None else None
    sys.stdout.write(
        render_case(a.ranked, proposals, paint, experiments, a.left_out, program_error)
    )
    return EXIT_OK


def program_error_lines(err: Evidence) -> list[str]:
    """What to say when a run ended in the program's own Python error, not the GPU set-up."""
    where = f"{err.source}:{err.line}" if err.line else err.source
    return [
        "The run ended in a Python error of the program itself, not in the GPU set-up:",
        f"  {where}: {err.text}",
        "Fix that error in the code or the data first. The CUDA notices before it only say "
        "that TensorFlow runs on the CPU here; run `tfdoctor check` if the GPU should be used.",
    ]


def render_case(
    ranked: Sequence[RankedCause],
    proposals: list[dict[str, Any]],
    paint: Painter,
    experiments: Sequence[RankedCause] = (),
    left_out: Sequence[tuple[str, str]] = (),
    program_error: Evidence | None = None,
) -> str:
    """The terminal view of a combined diagnosis: causes best first with where each was
    seen, then what tfdoctor's own runs showed (apart: never evidence about the crash), then
    the fixes to try with the values measured and the exact commands."""
    from tfdoctor.core.knowledge import catalog

    width = min(shutil.get_terminal_size((100, 20)).columns, 100)
    fixes = catalog.fixes()
    out = [paint("tfdoctor diagnose", "1") + " — every source as one case"]
    if not ranked and program_error is not None:
        out += ["", *program_error_lines(program_error)]
    elif not ranked:
        out += ["", "No known failure pattern in what was given."]
    not_here = {fid for fid, _ in left_out}

    def cause(c: Cause) -> Cause:  # with the fixes that apply here
        return dataclasses.replace(c, fixes=tuple(f for f in c.fixes if f not in not_here))

    if experiments:
        out += ["", paint("Your crash", "1;4")]
    for rank, rc in enumerate(ranked, 1):
        out.append("")
        out += _render_cause(rank, cause(rc.cause), paint, width, fixes, ", ".join(rc.sources))
    if experiments:
        out += [
            "",
            paint("What tfdoctor's own runs showed", "1;4")
            + paint(" (not counted as evidence about your crash)", "2"),
        ]
    for rank, rc in enumerate(experiments, 1):
        out.append("")
        out += _render_cause(rank, cause(rc.cause), paint, width, fixes, ", ".join(rc.sources))
    if proposals:
        out += ["", paint("Fixes to try, most important first", "1;4")]
    for p in proposals:
        fx = fixes.get(p["id"])
        out.append(f"  → {fx.title if fx else p['id']} [{p['id']}]")
        out.append(
            paint(f"      for: {_clip('; '.join(dict.fromkeys(p['for'])), width - 12)}", "2")
        )
        for k, v in p["params"].items():
            origin = p.get("origins", {}).get(k)
            out.append(f"      measured: {k}={v}" + (f" ({origin})" if origin else ""))
        if p.get("needs"):
            out.append(paint(f"      needs a measurement: {_clip(p['needs'], width - 28)}", "33"))
        for cmd in p["commands"]:
            out.append(f"      {cmd if cmd.startswith('#') else '$ ' + cmd}")
    if left_out:
        out += ["", paint("Not proposed", "1;4")]
    for fid, why in left_out:
        fx = fixes.get(fid)
        out.append(paint(f"  × {fx.title if fx else fid} [{fid}]: {why}", "2"))
    return "\n".join(out) + "\n"
