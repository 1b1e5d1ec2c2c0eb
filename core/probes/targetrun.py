"""Run the TF probe in a target interpreter, supervised: timeout, output kept, crash named."""

from __future__ import annotations

import collections
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.core import jsonio
from tfdoctor.core.bench import procgroup
from tfdoctor.core.model import Fact, ProbeResult, ProbeStatus, Target

log = logging.getLogger(__name__)

PROBE_SCRIPT = Path(__file__).parent / "target" / "probe_tf.py"
PROTOCOL = 1
SOURCE = "target-probe"
OUTPUT_LINES_KEPT = 4000
DEFAULT_TIMEOUT_S = 180.0

_VERSION_SNIPPET = (
    "import sys, json; print('TFDOCTOR-PY ' + json.dumps("
    "{'version': list(sys.version_info[:3]), 'executable': sys.executable}))"
)

# Human names of the stages the probe walks through, for progress and crash messages.
STAGE_LABELS = {
    "start": "starting the interpreter",
    "python": "reading Python facts",
    "packages": "listing CUDA packages",
    "import_tf": "importing TensorFlow",
    "build_info": "reading TensorFlow's build info",
    "devices": "asking TensorFlow for GPUs",
    "smoke": "running a matmul and a conv on the GPU",
    "libs": "listing loaded CUDA libraries",
    "done": "done",
}


class TargetError(Exception):
    """The target cannot be probed at all (not a file, not a Python); the message is one line."""


@dataclass
class TargetRun:
    """Everything one probe run produced, including evidence for a crash."""

    result: ProbeResult
    stage: str
    returncode: int | None
    signal_name: str | None
    timed_out: bool
    output: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def python_version(python: str, timeout_s: float = 20.0) -> tuple[int, int, int]:
    """Check that `python` is a Python interpreter and return its version.

    Raises:
        TargetError: the path is missing, not executable, a directory, not a Python (another
            program), a Python too old for TensorFlow 2, or it hung.
    """
    p = Path(python)
    if not p.exists():
        raise TargetError(f"{python}: no such file")
    if p.is_dir():
        raise TargetError(f"{python}: is a directory, not a Python interpreter")
    if not os.access(p, os.X_OK):
        raise TargetError(f"{python}: is not executable")
    # -I: isolated, so a broken site-packages cannot make a real Python look like a non-Python.
    try:
        proc = subprocess.run(
            [python, "-I", "-c", _VERSION_SNIPPET],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        raise TargetError(f"{python}: did not answer within {timeout_s:.0f} s") from None
    except OSError as exc:
        raise TargetError(f"{python}: cannot be run ({exc.strerror or exc})") from None
    for line in proc.stdout.splitlines():
        if line.startswith("TFDOCTOR-PY "):
            try:
                major, minor, micro = jsonio.loads(line[len("TFDOCTOR-PY ") :])["version"]
            except (ValueError, KeyError, TypeError):
                break
            if (major, minor) < (3, 6):
                raise TargetError(
                    f"{python}: is Python {major}.{minor}, too old for TensorFlow 2 (needs 3.6+)"
                )
            return int(major), int(minor), int(micro)
    raise TargetError(f"{python}: is not a Python interpreter (exit code {proc.returncode})")


def target_environment(target: Target, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the target's notebook would see: ours, plus a kernelspec's env block."""
    env = dict(os.environ if base is None else base)
    # Our own interpreter's settings must not leak into another interpreter.
    for key in ("PYTHONHOME", "PYTHONEXECUTABLE", "__PYVENV_LAUNCHER__"):
        env.pop(key, None)
    env.update(dict(target.env))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"
    return env


def run_probe(
    target: Target,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_stage: Callable[[str], None] | None = None,
    on_output: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    validate: bool = True,
) -> TargetRun:
    """Run the TF probe script in the target interpreter and collect its facts.

    The child runs in its own process group with a watchdog. A signal death, a hang or a
    non-zero exit is a result (status CRASHED / TIMEOUT / ERROR), never an exception.

    Raises:
        TargetError: the target is not a usable Python interpreter (see python_version);
            `validate=False` skips that check when the caller has just made it.
    """
    if validate:
        python_version(target.python)
    t0 = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="tfdoctor-probe-"))
    out_path = workdir / "probe.jsonl"
    out_path.touch()
    output: collections.deque[str] = collections.deque(maxlen=OUTPUT_LINES_KEPT)
    try:
        proc = subprocess.Popen(
            [target.python, "-u", str(PROBE_SCRIPT), str(out_path)],
            cwd=workdir,  # so a stray tensorflow.py in the user's cwd cannot shadow the real one
            env=target_environment(target),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise TargetError(f"{target.python}: cannot be run ({exc.strerror or exc})") from None

    reader = threading.Thread(
        target=_pump_output, args=(proc, output, on_output), daemon=True, name="probe-output"
    )
    reader.start()
    records: list[dict[str, Any]] = []
    tail = _RecordTail(out_path)
    stage = "start"
    timed_out = False
    cancelled = False
    deadline = t0 + timeout_s
    try:
        while True:
            for rec in tail.read():
                records.append(rec)
                if rec.get("kind") == "stage":
                    stage = str(rec.get("stage"))
                    if on_stage is not None:
                        on_stage(stage)
            if proc.poll() is not None:
                break
            if cancel is not None and cancel.is_set():
                cancelled = True
                procgroup.stop_group(proc, dump_stacks=False)
                break
            if time.monotonic() > deadline:
                timed_out = True
                procgroup.stop_group(proc, dump_stacks=True)
                break
            time.sleep(0.05)
        proc.wait()
        procgroup.kill_group(proc.pid)  # anything the probe left behind
        reader.join(timeout=5)
        records.extend(tail.read())
        for rec in records[-3:]:
            if rec.get("kind") == "stage":
                stage = str(rec.get("stage"))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    duration = time.monotonic() - t0
    return _make_run(
        target, records, list(output), proc.returncode, stage, timed_out, cancelled, duration
    )


def _make_run(
    target: Target,
    records: list[dict[str, Any]],
    output: list[str],
    returncode: int | None,
    stage: str,
    timed_out: bool,
    cancelled: bool,
    duration: float,
) -> TargetRun:
    facts: list[Fact] = []
    warnings: list[str] = []
    for rec in records:
        if rec.get("v") != PROTOCOL:
            continue
        if rec.get("kind") == "fact":
            facts.append(Fact(str(rec["name"]), rec.get("value"), SOURCE))
        elif rec.get("kind") == "warning":
            warnings.append(str(rec.get("text")))
    sig_name: str | None = None
    if returncode is not None and returncode < 0:
        try:
            sig_name = signal.Signals(-returncode).name
        except ValueError:
            sig_name = f"signal {-returncode}"
    facts.append(Fact("target.probe_stage", stage, SOURCE))
    facts.append(
        Fact(
            "target.probe_exit",
            {"returncode": returncode, "signal": sig_name, "timed_out": timed_out},
            SOURCE,
        )
    )
    where = STAGE_LABELS.get(stage, stage)
    if cancelled:
        status, msg = ProbeStatus.SKIPPED, "cancelled"
    elif timed_out:
        status, msg = ProbeStatus.TIMEOUT, f"no answer after {duration:.0f} s while {where}"
    elif sig_name is not None:
        status, msg = ProbeStatus.CRASHED, f"killed by {sig_name} while {where}"
    elif returncode != 0 or stage != "done":
        status, msg = ProbeStatus.ERROR, f"exited with code {returncode} while {where}"
    else:
        status, msg = ProbeStatus.OK, f"probed {target.python}"
    result = ProbeResult(
        "target",
        status,
        tuple(facts),
        msg,
        duration,
        tuple(output[-200:]),
    )
    return TargetRun(result, stage, returncode, sig_name, timed_out, output, warnings)


class _RecordTail:
    """Reads complete JSON lines appended to a file since the last call (torn lines wait)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._pos = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with self._path.open("rb") as fh:
                fh.seek(self._pos)
                chunk = fh.read()
        except OSError:
            return []
        self._pos += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        out = []
        for raw in lines:
            try:
                rec = jsonio.loads(raw)
            except ValueError:
                log.debug("ignoring a malformed probe record: %r", raw[:200])
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out


def _pump_output(
    proc: subprocess.Popen[bytes],
    sink: collections.deque[str],
    on_output: Callable[[str], None] | None,
) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        sink.append(line)
        if on_output is not None:
            on_output(line)


def current_target() -> Target:
    """This app's own interpreter (the default target)."""
    return Target(python=sys.executable, label="this app's Python", kind="current")


def app_is_bundle() -> bool:
    """Whether this app runs from a frozen bundle (PyInstaller): its executable is then no
    Python interpreter, so it cannot be a target."""
    return bool(getattr(sys, "frozen", False))


def app_has_tensorflow() -> bool:
    """Whether this app's own interpreter has a TensorFlow package (found, never imported:
    TensorFlow runs only in target interpreters). The app installs it only as the
    `tfdoctor[tensorflow]` extra, so without it the notebook's own Python must be picked."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):  # a broken install: as good as none for a default
        return False
