"""Jupyter kernel recognition, notebook-server lookup, and running_kernels() on a real ipykernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from jupyter_client import KernelManager

from tfdoctor.core.probes import jupyter
from tfdoctor.core.probes.jupyter import (
    KernelLocation,
    NotebookServer,
    ProcInfo,
    find_notebook_server,
    is_server_process,
    locate_kernel,
    notebook_sessions,
    parse_kernel_cmdline,
    process_info,
    running_kernels,
)

PY = "/home/u/envs/tf/bin/python"


# ------------------------------------------------------------------------- command lines


@pytest.mark.parametrize(
    ("cmdline", "kernel_id"),
    [
        ([PY, "-m", "ipykernel_launcher", "-f", "/run/jupyter/kernel-abc123.json"], "abc123"),
        ([PY, "-m", "ipykernel", "-f", "/r/kernel-0f1e2d3c-aaaa-bbbb.json"], "0f1e2d3c-aaaa-bbbb"),
        ([PY, "/x/site-packages/ipykernel_launcher.py", "-f", "/r/kernel-k1.json"], "k1"),
        # VS Code's form, and a connection file not named kernel-<id>.json
        ([PY, "-m", "ipykernel_launcher", "--f=/tmp/kernel-v2-4711abc.json"], "v2-4711abc"),
        ([PY, "-m", "ipykernel_launcher", "-f", "/tmp/tmpa1b2c3.json"], None),
    ],
)
def test_kernel_command_lines_are_recognised(cmdline: list[str], kernel_id: str | None) -> None:
    cmd = parse_kernel_cmdline(cmdline)
    assert cmd is not None
    assert cmd.kernel_id == kernel_id
    assert cmd.python == PY
    assert cmd.connection_file.endswith(".json")


@pytest.mark.parametrize(
    "cmdline",
    [
        None,
        [],
        ["python", "train.py"],
        [PY, "-m", "ipykernel", "install", "--user"],  # installs a kernelspec, runs no kernel
        ["/usr/bin/jupyter-lab"],
        ["python", "-f", "kernel-x.json"],
    ],
)
def test_other_command_lines_are_not_kernels(cmdline: list[str] | None) -> None:
    assert parse_kernel_cmdline(cmdline) is None


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (ProcInfo(1, "jupyter-lab", "u", (PY, "/env/bin/jupyter-lab"), 1), True),
        (ProcInfo(1, "python", "u", (PY, "/env/bin/jupyter-notebook"), 1), True),
        (ProcInfo(1, "jupyter-noteboo", "u", None, 1), True),  # 15-char comm, cmdline denied
        (ProcInfo(1, "python", "u", (PY, "-m", "jupyter_server"), 1), True),
        (ProcInfo(1, "python", "u", (PY, "-m", "jupyterlab", "--no-browser"), 1), True),
        (ProcInfo(1, "python", "u", (PY, "train.py"), 1), False),
        (ProcInfo(1, None, None, None, None), False),
    ],
)
def test_server_processes_are_recognised(info: ProcInfo, expected: bool) -> None:
    assert is_server_process(info) is expected


def test_process_info_reads_this_process_and_tolerates_a_dead_pid() -> None:
    me = process_info(os.getpid())
    assert me is not None and me.pid == os.getpid()
    assert me.cmdline and me.ppid == os.getppid()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert process_info(dead.pid) is None


# ------------------------------------------------------------------------- server lookup


def test_find_notebook_server_walks_parents_to_a_runtime_file(tmp_path: Path) -> None:
    table = {
        300: ProcInfo(300, "python", "u", (PY, "-m", "ipykernel_launcher", "-f", "k.json"), 200),
        200: ProcInfo(200, "jupyter-lab", "u", (PY, "/env/bin/jupyter-lab"), 100),
        100: ProcInfo(100, "bash", "u", ("bash",), 1),
    }
    (tmp_path / "jpserver-200.json").write_text(
        json.dumps(
            {"url": "http://localhost:8888/", "token": "tok-XYZ", "pid": 200, "root_dir": "/w"}
        )
    )
    server = find_notebook_server(300, info=table.get, dirs=[tmp_path])
    assert server is not None
    assert server.url == "http://localhost:8888/" and server.pid == 200 and server.root_dir == "/w"
    assert server.token == "tok-XYZ" and "tok-XYZ" not in repr(server)  # kept out of logs
    # No server ancestor (a kernel started by VS Code or by hand): unknown, not an error.
    table[200] = ProcInfo(200, "code", "u", ("/usr/share/code/code",), 100)
    assert find_notebook_server(300, info=table.get, dirs=[tmp_path]) is None
    assert locate_kernel(300, "k", info=table.get, dirs=[tmp_path]) == KernelLocation()


def test_notebook_sessions_never_sends_the_token_off_the_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("must not connect")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    remote = NotebookServer(pid=1, url="http://example.com:8888/", info_file="x", token="secret")
    assert notebook_sessions(remote) == {}


# ------------------------------------------------------------------------- real kernels


@pytest.fixture()
def real_kernel(tmp_path: Path) -> Iterator[tuple[KernelManager, str]]:
    """A real ipykernel, started like Jupyter Server starts one (kernel-<id>.json)."""
    kernel_id = str(uuid.uuid4())
    km = KernelManager(connection_file=str(tmp_path / f"kernel-{kernel_id}.json"))
    km.start_kernel()
    try:
        yield km, kernel_id
    finally:
        km.shutdown_kernel(now=True)


def test_running_kernels_finds_a_real_ipykernel(
    real_kernel: tuple[KernelManager, str], tmp_path: Path
) -> None:
    km, kernel_id = real_kernel
    found = [k for k in running_kernels(dirs=[tmp_path]) if k["kernel_id"] == kernel_id]
    assert len(found) == 1
    entry = found[0]
    assert entry["python"] == sys.executable
    assert entry["connection_file"] == os.path.realpath(km.connection_file)
    assert psutil.Process(entry["pid"]).ppid() == os.getpid()
    assert entry["username"] == psutil.Process().username()
    # Started by this test, not by a notebook server: server and notebook are unknown.
    assert entry["notebook_server"] is None and entry["notebook_path"] is None


# A stand-in notebook server: a real process named `jupyter-server` that writes its runtime
# file like Jupyter Server does, answers GET /api/sessions (token checked) and starts a real
# ipykernel as its child. Jupyter Server itself is not installed in the test environment.
_STAND_IN_SERVER = """\
#!{python}
import json, os, signal, sys, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from jupyter_client import KernelManager

runtime, token = sys.argv[1], "s3cret-token"
kid = str(uuid.uuid4())
km = KernelManager(connection_file=os.path.join(runtime, "kernel-%s.json" % kid))
km.start_kernel()

class Sessions(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/api/sessions" or self.headers.get("Authorization") != "token " + token:
            self.send_response(403)
            self.end_headers()
            return
        body = json.dumps([{{"id": "s1", "path": "work/train.ipynb", "type": "notebook",
                            "kernel": {{"id": kid, "name": "python3"}}}}]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

srv = ThreadingHTTPServer(("127.0.0.1", 0), Sessions)
port = srv.server_address[1]
info = {{"url": "http://127.0.0.1:%d/" % port, "token": token, "pid": os.getpid(),
        "port": port, "root_dir": runtime}}
with open(os.path.join(runtime, "jpserver-%d.json" % os.getpid()), "w") as f:
    json.dump(info, f)

def stop(*_):
    km.shutdown_kernel(now=True)
    os._exit(0)

signal.signal(signal.SIGTERM, stop)
with open(os.path.join(runtime, "ready.tmp"), "w") as f:
    json.dump({{"kernel_id": kid, "kernel_pid": km.provisioner.process.pid}}, f)
os.replace(os.path.join(runtime, "ready.tmp"), os.path.join(runtime, "ready.json"))
srv.serve_forever()
"""


def test_kernel_under_a_notebook_server_is_mapped_to_its_notebook(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    script = tmp_path / "jupyter-server"
    script.write_text(_STAND_IN_SERVER.format(python=sys.executable))
    script.chmod(0o755)
    log_path = tmp_path / "server.log"
    with log_path.open("wb") as log:  # a file, not a pipe nobody drains
        server = subprocess.Popen([str(script), str(runtime)], stderr=log)
    ready = runtime / "ready.json"
    kernel_pid = None
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert server.poll() is None, log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, "stand-in server did not start a kernel"
            time.sleep(0.05)
        started = json.loads(ready.read_text())
        kernel_pid = started["kernel_pid"]
        assert psutil.Process(server.pid).name() == "jupyter-server"

        found = [k for k in running_kernels(dirs=[runtime]) if k["pid"] == kernel_pid]
        assert len(found) == 1
        entry = found[0]
        assert entry["kernel_id"] == started["kernel_id"]
        assert entry["python"] == sys.executable
        assert entry["notebook_server"].startswith("http://127.0.0.1:")
        assert entry["notebook_path"] == "work/train.ipynb"

        where = locate_kernel(kernel_pid, started["kernel_id"], dirs=[runtime])
        assert where.notebook_path == "work/train.ipynb"

        info = jupyter.server_for_pid(server.pid, [runtime])
        assert info is not None
        wrong_token = NotebookServer(info.pid, info.url, info.info_file, token="wrong")
        assert notebook_sessions(wrong_token) == {}  # refused: unknown, not an exception
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if kernel_pid is not None and psutil.pid_exists(kernel_pid):
            try:
                proc = psutil.Process(kernel_pid)
                if parse_kernel_cmdline(proc.cmdline()) is not None:
                    proc.kill()
            except psutil.Error:
                pass
