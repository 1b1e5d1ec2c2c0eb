"""The benchmark worker, driven for real through its pipes (real TensorFlow, real crashes)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

WORKER = REPO / "core" / "probes" / "target" / "bench_worker.py"

# small runs: 2 cores
MLP = {"preset": "mlp", "batch_size": 8, "steps": 6}
CNN = {"preset": "cnn", "input_shape": [32, 32, 3], "batch_size": 8, "steps": 6}

Event = dict[str, Any]


class Worker:
    """A worker process, its event pipe read by a thread, its stdout+stderr kept as evidence."""

    def __init__(self, tmp_path: Path, setup: dict[str, Any] | None = None) -> None:
        self.faulthandler_file = tmp_path / "faulthandler.txt"
        self.events: queue.Queue[Event | None] = queue.Queue()
        self.seen: list[Event] = []
        self.output: list[bytes] = []
        ev_r, ev_w = os.pipe()
        ctl_r, ctl_w = os.pipe()
        cmd = [
            sys.executable,
            "-u",
            str(WORKER),
            "--events-fd",
            str(ev_w),
            "--control-fd",
            str(ctl_r),
            "--faulthandler-file",
            str(self.faulthandler_file),
        ]
        if setup is not None:
            cmd += ["--setup", json.dumps(setup)]
        # as the supervisor starts a CPU run: TF's BFC allocator keeps in-use/peak statistics
        env = dict(
            os.environ,
            CUDA_VISIBLE_DEVICES="-1",
            TF_CPP_MIN_LOG_LEVEL="0",
            TF_CPU_ALLOCATOR_USE_BFC="true",
        )
        try:
            self.proc = subprocess.Popen(
                cmd,
                pass_fds=(ev_w, ctl_r),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        finally:
            os.close(ev_w)
            os.close(ctl_r)
        self._control = os.fdopen(ctl_w, "w", encoding="utf-8")
        self._threads = [
            threading.Thread(target=self._read_events, args=(os.fdopen(ev_r, "rb"),), daemon=True),
            threading.Thread(target=self._read_output, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read_events(self, fh: Any) -> None:
        with fh:
            for raw in fh:
                self.events.put(json.loads(raw))
        self.events.put(None)  # end of file

    def _read_output(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def next(self, timeout: float) -> Event | None:
        """The next event (None at end of file); fails the test after `timeout` seconds."""
        try:
            ev = self.events.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no event in {timeout} s; seen {self.seen[-5:]}\n{self.text()[-3000:]}")
        if ev is not None:
            self.seen.append(ev)
        return ev

    def until(self, type_: str, timeout: float = 120) -> list[Event]:
        """Events up to and including the first one of `type_`."""
        deadline = time.monotonic() + timeout
        got: list[Event] = []
        while True:
            ev = self.next(max(0.1, deadline - time.monotonic()))
            if ev is None:
                pytest.fail(f"event pipe closed before {type_!r}; got {got}\n{self.text()[-3000:]}")
            got.append(ev)
            if ev["type"] == type_:
                return got

    def rest(self, timeout: float = 60) -> list[Event]:
        """Every event until the worker closes its event pipe."""
        got: list[Event] = []
        while (ev := self.next(timeout)) is not None:
            got.append(ev)
        return got

    def send(self, obj: Any) -> None:
        self.send_raw(json.dumps(obj))

    def send_raw(self, line: str) -> None:
        self._control.write(line + "\n")
        self._control.flush()

    def run(self, run_id: int, config: dict[str, Any], timeout: float = 180) -> list[Event]:
        """Send a run; its events up to the worker's next "ready"."""
        self.send({"cmd": "run", "id": run_id, "config": config})
        return self.until("ready", timeout)

    def close_control(self) -> None:
        with contextlib.suppress(OSError):
            self._control.close()

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def text(self) -> str:
        return b"".join(self.output).decode("utf-8", "replace")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        self.close_control()
        for t in self._threads:
            t.join(5)


@pytest.fixture
def worker_factory(tmp_path: Path) -> Any:
    started: list[Worker] = []

    def start(setup: dict[str, Any] | None = None) -> Worker:
        w = Worker(tmp_path, setup)
        started.append(w)
        return w

    try:
        yield start
    finally:
        for w in started:
            w.kill()


def started(w: Worker) -> list[Event]:
    """The start-up records, up to the first "ready"; checks the common parts."""
    evs = w.until("ready", timeout=180)
    assert evs[0]["type"] == "hello"
    assert evs[0]["pid"] == w.proc.pid
    assert evs[0]["python"] == sys.version.split()[0]
    assert all(e["v"] == 1 and isinstance(e["t"], float) for e in evs)
    assert [e["t"] for e in evs] == sorted(e["t"] for e in evs)
    return evs


def of(evs: list[Event], type_: str) -> list[Event]:
    return [e for e in evs if e["type"] == type_]


def run_done(evs: list[Event]) -> Event:
    (done,) = of(evs, "run_done")
    return done


@pytest.mark.slow
def test_completed_runs_then_exit(worker_factory: Any) -> None:
    w = worker_factory({"device": "cpu", "memory_growth": True, "memory_limit_mb": None})
    evs = started(w)
    assert [e["phase"] for e in of(evs, "phase")] == ["import", "device_init"]
    (info,) = of(evs, "info")
    assert info["tf_version"].startswith("2.")
    assert info["keras_version"]
    assert info["memory_device"] == "CPU:0"
    assert info["gpus"] == []
    assert "/device:CPU:0" in info["logical_devices"]
    assert isinstance(info["build"]["is_cuda_build"], bool)
    (growth,) = of(evs, "knob")  # requested, but there is no GPU here
    assert (growth["name"], growth["applied"], growth["run"]) == ("memory_growth", False, None)
    assert "GPU" in growth["why"]
    dev = info["memory_device"]
    assert info["memory_stats_error"] is None  # the BFC CPU allocator answers on every host

    evs = w.run(1, CNN)
    phases = [e["phase"] for e in of(evs, "phase")]
    assert phases == ["build", "compile", "first_step", "steady", "done"]
    assert all(e["run"] == 1 for e in of(evs, "phase"))
    steps = of(evs, "step")
    assert [s["step"] for s in steps] == [1, 2, 3, 4, 5, 6]  # first 5 and the last
    for s in steps:
        assert s["run"] == 1 and s["epoch"] == 1
        assert s["step_s"] > 0 and s["examples_per_s"] > 0
        assert isinstance(s["loss"], float)
        assert s["rss"] > 0
        assert set(s["mem"][dev]) == {"current", "peak"}
    assert steps[0]["step_s"] > steps[-1]["step_s"]  # the first step traces the function
    done = run_done(evs)
    assert done["status"] == "completed"
    assert done["steps"] == 6
    assert done["duration_s"] > 0
    assert done["first_step_s"] == pytest.approx(steps[0]["step_s"], abs=1e-3)
    assert done["steady_steps_per_s"] > 0
    assert done["examples_per_s"] == pytest.approx(done["steady_steps_per_s"] * 8, rel=1e-3)
    assert done["peak"][dev] > 0
    assert done["rss_peak"] >= max(s["rss"] for s in steps)
    assert evs[-1]["type"] == "ready"
    assert not of(evs, "error") and not of(evs, "oom")

    # a second run in the same worker: streamed data, another batch size, two epochs
    evs = w.run(2, {**MLP, "data": "stream", "batch_size": 4, "steps": 3, "epochs": 2})
    steps = of(evs, "step")
    assert [(s["step"], s["epoch"]) for s in steps] == [
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 2),
        (5, 2),
        (6, 2),
    ]
    done = run_done(evs)
    assert (done["run"], done["status"], done["steps"]) == (2, "completed", 6)
    assert done["examples_per_s"] == pytest.approx(done["steady_steps_per_s"] * 4, rel=1e-3)

    w.send({"cmd": "exit"})
    assert [e["type"] for e in w.rest()] == ["bye"]
    assert w.wait() == 0
    out = w.text()
    assert "loss:" in out  # Keras' own per-epoch line (verbose=2), as in a user's run
    assert "tensorflow" in out.lower()  # TF's C++ log lines went to the captured output


@pytest.mark.slow
def test_tf_oom_is_reported_and_the_worker_survives(worker_factory: Any) -> None:
    w = worker_factory()
    started(w)
    evs = w.run(7, {**MLP, "fault": {"kind": "tf_oom", "at_step": 3}}, timeout=120)
    (oom,) = of(evs, "oom")
    assert oom["run"] == 7
    assert oom["exc_type"] == "ResourceExhaustedError"
    assert "OOM when allocating" in oom["message"]
    assert oom["phase"] == "steady"
    assert [s["step"] for s in of(evs, "step")] == [1, 2, 3]  # the fault step's record is sent
    done = run_done(evs)
    assert (done["status"], done["steps"]) == ("oom", 3)
    assert not of(evs, "error")
    assert [e["phase"] for e in of(evs, "phase")][-1] == "done"

    evs = w.run(8, MLP)
    assert run_done(evs)["status"] == "completed"


@pytest.mark.slow
def test_python_exception_is_an_error_and_the_worker_survives(worker_factory: Any) -> None:
    w = worker_factory()
    started(w)
    evs = w.run(3, {**MLP, "fault": {"kind": "exception", "at_step": 2}})
    (err,) = of(evs, "error")
    assert err["run"] == 3
    assert err["exc_type"] == "RuntimeError"
    assert err["message"] == "injected fault: a Python exception in the training loop"
    assert "on_train_batch_end" in err["traceback"]
    assert "Traceback" in err["traceback"]
    assert err["phase"] == "steady"
    done = run_done(evs)
    assert (done["status"], done["steps"]) == ("error", 2)

    evs = w.run(4, MLP)
    assert run_done(evs)["status"] == "completed"
    w.close_control()  # end of file on the control pipe: exit
    assert [e["type"] for e in w.rest()] == ["bye"]
    assert w.wait() == 0


@pytest.mark.slow
def test_segfault_kills_the_worker_and_leaves_a_python_stack(worker_factory: Any) -> None:
    w = worker_factory()
    started(w)
    w.send({"cmd": "run", "id": 5, "config": {**CNN, "fault": {"kind": "segfault", "at_step": 2}}})
    evs = w.rest(timeout=120)
    assert [s["step"] for s in of(evs, "step")] == [1, 2]
    assert not of(evs, "run_done")
    assert w.wait() == -signal.SIGSEGV
    dump = w.faulthandler_file.read_text()
    assert "Segmentation fault" in dump
    assert "on_train_batch_end" in dump
    assert "inject_fault" in dump


@pytest.mark.slow
def test_bad_config_and_bad_commands_are_reported(worker_factory: Any) -> None:
    w = worker_factory()
    started(w)
    evs = w.run(1, {"preset": "vgg", "batch_size": 8})
    (err,) = of(evs, "error")
    assert (err["run"], err["exc_type"]) == (1, "ConfigError")
    assert "vgg" in err["message"] and "\n" not in err["message"]
    done = run_done(evs)
    assert (done["status"], done["steps"], done["steady_steps_per_s"]) == ("error", 0, None)

    evs = w.run(2, {**MLP, "batch_size": 0})
    (err,) = of(evs, "error")
    assert err["exc_type"] == "ConfigError" and "batch_size" in err["message"]
    assert run_done(evs)["status"] == "error"

    w.send_raw("this is not json")
    (err,) = w.until("error", timeout=30)
    assert (err["run"], err["exc_type"]) == (None, "ProtocolError")
    w.send({"cmd": "dance"})
    (err,) = w.until("error", timeout=30)
    assert err["exc_type"] == "ProtocolError" and "dance" in err["message"]

    evs = w.run(3, MLP)
    first = run_done(evs)
    assert first["status"] == "completed"
    # the same run again: the first one's weights and optimizer slots were freed (TF keeps the
    # traced train function, and through it the variables, unless the worker drops it)
    second = run_done(w.run(4, MLP))
    assert second["status"] == "completed"
    dev = next(iter(first["peak"]))
    assert second["peak"][dev] < 1.2 * first["peak"][dev]
    w.send({"cmd": "exit"})
    assert [e["type"] for e in w.rest()] == ["bye"]
    assert w.wait() == 0
