"""Every bad input a careful tester tried, as one list: each gets a clear one-line error (exit
2) or a finding, never a traceback and never a hang; what was there before is left as it was.

The machine is a scratch one: its own HOME, Jupyter folders (a good kernelspec and broken
ones), tfdoctor state folder, and a folder of hostile files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TFDOCTOR = str(Path(sys.executable).with_name("tfdoctor"))
DEEP = 200_000  # deeper than any JSON parser's recursion limit


def make_files(root: Path) -> dict[str, str]:
    """The hostile files, by name -> path."""
    f = root / "files"
    f.mkdir()
    out = {}

    def put(name: str, data: bytes) -> None:
        (f / name).write_bytes(data)
        out[name] = str(f / name)

    put("nested.json", b"[" * DEEP + b"]" * DEEP)
    put("nested_obj.json", b'{"a":' * DEEP + b"1" + b"}" * DEEP)
    put("notjson.json", b"this is no JSON {")
    put("empty.json", b"")
    put("list.json", b"[1, 2, 3]")
    put("string.json", b'"a string"')
    put("schema99.json", b'{"schema": 99}')
    put("wrongtypes.json", b'{"schema": 1, "facts": [1], "findings": "x", "result": 7}')
    put("binary.log", bytes(range(256)) * 64)
    put("latin1.log", "Résumé: CUDA_ERROR_OUT_OF_MEMORY\n".encode("latin-1"))
    put("nul.log", b"\0" * 4096)
    put("oneline.log", b"x" * (8 << 20))  # 8 MiB without a line break
    put("trace.jsonl", b'{"k": "sample"\n[[[\n{"k": 1e999}\n')
    (f / "dir.json").mkdir()
    out["dir.json"] = str(f / "dir.json")
    os.mkfifo(f / "fifo")
    out["fifo"] = str(f / "fifo")
    out["missing"] = str(f / "missing.json")
    return out


def make_kernels(root: Path) -> Path:
    """A Jupyter folder with one good kernelspec and every kind of broken one."""
    data = root / "jupyter"
    good = {
        "argv": [sys.executable, "-m", "ipykernel"],
        "display_name": "good",
        "language": "python",
    }
    broken: dict[str, bytes | None] = {
        "bad-json": b"{not json",
        "bad-argv": json.dumps({"argv": "python -m ipykernel", "display_name": "x"}).encode(),
        "bad-env": json.dumps({"argv": ["python"], "env": ["A=1"], "display_name": "x"}).encode(),
        "bad-utf8": b'{"argv": ["python"], "display_name": "\xff\xfe"}',
        "deep": b"[" * DEEP + b"]" * DEEP,
        "empty": b"",
        "a-list": b"[]",
        "json-dir": None,  # kernel.json is a folder
    }
    for name, body in broken.items():
        d = data / "kernels" / name
        d.mkdir(parents=True)
        if body is None:
            (d / "kernel.json").mkdir()
        else:
            (d / "kernel.json").write_bytes(body)
    (data / "kernels" / "good").mkdir(parents=True)
    (data / "kernels" / "good" / "kernel.json").write_text(json.dumps(good))
    return data


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], dict[str, str]]:
    root = tmp_path_factory.mktemp("bad-input")
    files = make_files(root)
    data = make_kernels(root)
    state = root / "state"
    state.mkdir()
    bad_log = root / "bad-log-state"
    bad_log.mkdir()
    (bad_log / "undo.jsonl").write_bytes(
        b'{"id": 1, "fixes": \n\xff\xfe garbage\n[[[[\n{"id": "x"}\n'
    )
    dir_state = root / "dir-state"
    (dir_state / "undo.jsonl").mkdir(parents=True)
    file_state = root / "file-state"
    file_state.write_text("a file, not a folder")
    env = {
        **os.environ,
        "HOME": str(root),
        "JUPYTER_PATH": str(data),
        "JUPYTER_DATA_DIR": str(data),
        "TFDOCTOR_STATE_DIR": str(state),
        "DIR_STATE": str(dir_state),
        "BAD_LOG_STATE": str(bad_log),
        "FILE_STATE": str(file_state),
    }
    env.pop("QT_QPA_PLATFORM", None)
    return files, env


BROKEN_KERNELS = ("bad-json", "bad-argv", "bad-env", "bad-utf8", "deep", "empty", "a-list",
                  "json-dir", "nope")  # fmt: skip
F = "{%s}"  # an argument naming one of the hostile files: F % "nested.json"
# (arguments, exit codes that are right, the state folder to use)
CASES: list[tuple[tuple[str, ...], tuple[int, ...], str]] = [
    # deeply nested, malformed, empty, wrong-typed and unreadable JSON wherever JSON is read
    *[
        ((cmd, opt, F % name), (2,), "")
        for cmd, opt in (("diagnose", "--check"), ("diagnose", "--run"), ("check", "--snapshot"))
        for name in (
            "nested.json",
            "nested_obj.json",
            "notjson.json",
            "empty.json",
            "list.json",
            "string.json",
            "schema99.json",
            "wrongtypes.json",
            "dir.json",
            "missing",
        )
    ],
    (("diagnose", "--trace", F % "nested.json"), (0, 2), ""),
    (("diagnose", "--trace", F % "trace.jsonl"), (0, 2), ""),
    (("diagnose", "--trace", F % "dir.json"), (2,), ""),
    # logs that are no text, or no lines
    *[(("diagnose", F % n), (0,), "") for n in ("latin1.log", "oneline.log", "nested.json")],
    # not text at all: refused in one line (a picture or a binary dropped by mistake)
    *[(("diagnose", F % n), (2,), "") for n in ("binary.log", "nul.log")],
    (("diagnose", F % "dir.json"), (2,), ""),
    (("diagnose", F % "missing"), (2,), ""),
    (("diagnose", "/dev/zero"), (2,), ""),
    (("diagnose", "/dev/null"), (2,), ""),
    # the undo log: malformed lines, a folder, an unusable state folder
    (("fixes", "history"), (0,), "BAD_LOG_STATE"),
    (("fixes", "undo"), (2,), "BAD_LOG_STATE"),
    (("fixes", "history"), (0, 2), "DIR_STATE"),
    (("fixes", "undo"), (1, 2), "DIR_STATE"),
    (("fixes", "history"), (0, 2), "FILE_STATE"),
    (("fixes", "apply", "memory_growth", "--kernel", "good"), (2,), "FILE_STATE"),
    # broken kernel.json files, as jupyter_client sees them
    (("envs",), (0,), ""),
    (("envs", "--json"), (0,), ""),
    *[
        (args, (2,), "")
        for k in BROKEN_KERNELS
        for args in (
            ("check", "--kernel", k, "--timeout", "30"),
            ("fixes", "apply", "memory_growth", "--kernel", k),
        )
    ],
    (("bench", "--kernel", "bad-json"), (2,), ""),
    # numbers: NaN, inf, negative, zero, huge, not numbers
    *[
        (("check", "--timeout", v), (2,), "")
        for v in ("nan", "inf", "-inf", "-1", "0", "1e999", "abc", "")
    ],
    *[
        (("bench", opt, v), (2,), "")
        for opt, v in (
            ("--batch-size", "0"),
            ("--batch-size", "-3"),
            ("--batch-size", "nan"),
            ("--batch-size", "99999999999999999999"),
            ("--steps", "0"),
            ("--epochs", "-1"),
            ("--watchdog", "nan"),
            ("--watchdog", "-5"),
            ("--stall", "-inf"),
            ("--margin", "NaN"),
            ("--margin", "2"),
            ("--margin", "-0.5"),
            ("--memory-cap-mb", "-1"),
            ("--memory-cap-mb", "nan"),
            ("--gpu-memory-limit-mb", "-100"),
            ("--guard-mb", "-1"),
            ("--max-batch", "0"),
            ("--grad-accum", "0"),
            ("--input-shape", "x"),
            ("--input-shape", "0x0"),
            ("--input-shape", "-1x3"),
            ("--input-shape", "99999999x99999999x3"),
            ("--input-shape", ""),
            ("--set", "noequals"),
            ("--set", "gpu=$(touch PWNED)"),
            ("--set", "=1"),
            ("--verify-fix", "no_such_fix"),
            ("--preset", "nope"),
            ("--device", "tpu"),
        )
    ],
    *[
        (("monitor", *a), (2,), "")
        for a in (
            ("--duration", "nan"),
            ("--duration", "-1"),
            ("--interval-ms", "0"),
            ("--interval-ms", "-5"),
            ("--interval-ms", "nan"),
            ("--pid", "0"),
            ("--pid", "-1"),
            ("--pid", "abc"),
            ("--pid", str(2**40)),
            ("--record", F % "dir.json"),
            ("--record", "/dev/null"),
            ("--record", F % "missing/x.jsonl"),
        )
    ],
    # processes: PID 1, negative, huge, not a number, this very test
    *[
        (("fixes", "stop-process", p), (1, 2), "")
        for p in ("0", "-1", "-2", "1", str(2**40), "abc", "nan", str(os.getpid()))
    ],
    # output files: folders, devices, missing folders, existing files
    (("export-fix", "--fixes", "memory_growth", "-o", F % "dir.json"), (2,), ""),
    (("export-fix", "--fixes", "memory_growth", "-o", "/dev/null"), (2,), ""),
    (("export-fix", "--fixes", "memory_growth", "-o", F % "fifo"), (2,), ""),
    (("export-fix", "--fixes", "memory_growth", "-o", F % "binary.log"), (2,), ""),
    (("export-fix", "--fixes", "memory_growth", "-o", F % "missing/x.sh"), (2,), ""),
    (("export-fix", "--fixes", "memory_growth", "--set", "memory_limit_mb=nan"), (2,), ""),
    (("export-fix", "--fixes", "nope"), (2,), ""),
    (("export-fix", "--causes", "nope"), (2,), ""),
    (("export-fix", "--fixes", "memory_growth", "--format", "bat"), (2,), ""),
    (("capture", F % "dir.json"), (2,), ""),
    (("capture", F % "binary.log"), (2,), ""),
    (("capture", "/dev/null"), (2,), ""),
    (("diagnose", F % "latin1.log", "--export", F % "dir.json"), (2,), ""),
    (("diagnose", F % "latin1.log", "--export", F % "binary.log"), (2,), ""),
    # env files and conda folders that are no such thing
    (("fixes", "apply", "memory_growth", "--env-file", "/dev/null"), (2,), ""),
    (("fixes", "apply", "memory_growth", "--env-file", F % "dir.json"), (2,), ""),
    (("fixes", "apply", "memory_growth", "--env-file", F % "fifo"), (2,), ""),
    (("fixes", "apply", "memory_growth", "--env-file", F % "binary.log"), (2,), ""),
    (("fixes", "apply", "memory_growth", "--conda", F % "dir.json"), (2,), ""),
    (("fixes", "apply", "memory_growth", "--conda", "/"), (2,), ""),
    (("fixes", "apply", "nope", "--preamble"), (2,), ""),
    (("fixes", "apply", "pick_gpu", "--set", "gpu=0;id", "--preamble"), (2,), ""),
    (("fixes", "apply", "memory_limit", "--set", "memory_limit_mb=1e999", "--preamble"), (2,), ""),
    (("check", "--python", F % "binary.log"), (2,), ""),
    (("check", "--python", F % "dir.json"), (2,), ""),
    (("check", "--python", F % "fifo"), (2,), ""),
]


def expand(args: tuple[str, ...], files: dict[str, str]) -> list[str]:
    out = []
    for a in args:
        if a.startswith("{") and a.endswith("}"):
            name, _, rest = a[1:-1].partition("/")
            a = files[name] + ("/" + rest if rest else "")
        out.append(a)
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("args", "codes", "state"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_a_one_line_error_or_a_finding(
    machine: tuple[dict[str, str], dict[str, str]],
    args: tuple[str, ...],
    codes: tuple[int, ...],
    state: str,
) -> None:
    files, env = machine
    env = {**env, **({"TFDOCTOR_STATE_DIR": env[state]} if state else {})}
    before = {p: Path(p).read_bytes() for p in files.values() if Path(p).is_file()}
    try:
        p = subprocess.run(
            [TFDOCTOR, *expand(args, files)],
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            cwd=env["HOME"],
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: tfdoctor {' '.join(args)}")
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    assert p.returncode in codes, (p.returncode, p.stderr[-2000:])
    if p.returncode == 2:  # one line; a damaged undo log adds one warning line before it
        lines = p.stderr.strip().splitlines()
        assert re.match(r"tfdoctor( [a-z-]+)*: \S", lines[-1]) and len(lines) == 1 + (
            state == "BAD_LOG_STATE"
        )
    assert {p: Path(p).read_bytes() for p in files.values() if Path(p).is_file()} == before
    assert not (Path(env["HOME"]) / "PWNED").exists()


def test_eof_at_the_confirmation_prompt_stops_nothing(
    machine: tuple[dict[str, str], dict[str, str]],
) -> None:
    """stop-process asks on a terminal; Ctrl-D there is a no, not a traceback."""
    import pty

    _, env = machine
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid, fd = pty.fork()
        if pid == 0:  # the child: tfdoctor on the terminal's end
            os.execve(TFDOCTOR, [TFDOCTOR, "fixes", "stop-process", str(victim.pid)], env)
        out = b""
        while b"[y/N]" not in out:
            out += os.read(fd, 4096)
        os.write(fd, b"\x04")  # Ctrl-D: end of input
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert b"not stopped" in out and b"Traceback" not in out
        assert victim.poll() is None  # still running
    finally:
        victim.kill()
        victim.wait()
