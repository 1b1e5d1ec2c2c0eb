"""However `tfdoctor bench` ends (Ctrl-C, SIGTERM, SIGHUP, kill -9), its TensorFlow worker
ends with it, its memory cgroup goes, and what the worker printed is on disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tfdoctor.core.bench import memcg

pytestmark = pytest.mark.slow
TFDOCTOR = str(Path(sys.executable).with_name("tfdoctor"))


def start_hung_bench(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], psutil.Process]:
    """`tfdoctor bench` whose worker hangs in training; returns the CLI and the worker."""
    env = dict(os.environ, TFDOCTOR_STATE_DIR=str(tmp_path / "state"))
    cli = subprocess.Popen(
        [
            *(TFDOCTOR, "bench", "--device", "cpu", "--preset", "mlp", "--steps", "50"),
            *("--fault", "hang", "--fault-at-step", "2", "--stall", "600", *extra),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    runs = tmp_path / "state" / "runs"
    while time.monotonic() < deadline:
        for child in psutil.Process(cli.pid).children(recursive=True):
            try:
                if any("bench_worker.py" in part for part in child.cmdline()):
                    # wait until the worker trains (its step records reached the run folder)
                    events = list(runs.glob("*/events.jsonl"))
                    if events and b'"step"' in events[0].read_bytes():
                        return cli, child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.2)
    cli.kill()
    raise AssertionError("the worker did not start training")


def gone(proc: psutil.Process, within_s: float = 15.0) -> bool:
    try:
        proc.wait(within_s)
    except psutil.TimeoutExpired:
        return False
    return True


def our_cgroups(pid: int) -> list[Path]:
    try:
        _, base = memcg._hierarchy()
    except memcg.MemcgError:
        return []
    return sorted(base.glob(f"{memcg.PREFIX}{pid}-*"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_an_interrupted_bench_stops_its_worker_and_says_so(tmp_path: Path, sig: int) -> None:
    cli, worker = start_hung_bench(tmp_path)
    cli.send_signal(sig)
    _, err = cli.communicate(timeout=60)
    assert cli.returncode == 130, err
    assert b"interrupted" in err and b"Traceback" not in err
    assert gone(worker)


def test_kill_9_of_tfdoctor_takes_the_worker_with_it(tmp_path: Path) -> None:
    cli, worker = start_hung_bench(tmp_path)
    cli.kill()
    cli.wait(30)
    assert gone(worker)  # the kernel's parent-death signal: nothing of tfdoctor can run
    # the worker's output reached the disk unbuffered, before the kill
    (stderr_log,) = (tmp_path / "state" / "runs").glob("*/stderr.log")
    assert stderr_log.stat().st_size > 0


def test_a_capped_run_leaves_no_cgroup_however_it_ends(tmp_path: Path) -> None:
    if memcg.unavailable() is not None:
        pytest.skip(f"no memory cgroups here: {memcg.unavailable()}")
    cli, worker = start_hung_bench(tmp_path, "--memory-cap-mib", "3000")
    assert our_cgroups(cli.pid)
    cli.send_signal(signal.SIGTERM)
    cli.communicate(timeout=60)
    assert gone(worker) and our_cgroups(cli.pid) == []

    cli, worker = start_hung_bench(tmp_path, "--memory-cap-mib", "3000")
    cli.kill()
    cli.wait(30)
    assert gone(worker)
    left = our_cgroups(cli.pid)
    assert left  # nothing could remove it: its owner was killed outright
    removed = memcg.sweep_stale()  # what the next tfdoctor start does
    assert set(left) <= set(removed) and our_cgroups(cli.pid) == []


APP_DRIVER = """
import sys
from PySide6.QtCore import QTimer
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.gui import app
from tfdoctor.gui.main_window import MainWindow

cap = int(sys.argv[1])
init = MainWindow.__init__


def start_bench(w):
    w.bench_page.ram_cap.setValue(cap)
    cfg = BenchConfig(device="cpu", preset="mlp", steps=50, fault="hang", fault_at_step=2)
    print("started" if w.bench_page.start(cfg) else "not started", flush=True)


def patched(self, *args, **kwargs):  # the real app, with a hung benchmark started in it
    init(self, *args, **kwargs)
    QTimer.singleShot(200, lambda: start_bench(self))


MainWindow.__init__ = patched
sys.exit(app.main())
"""


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize(
    ("sig", "cap"),
    [(signal.SIGTERM, 0), (signal.SIGINT, 3000), (signal.SIGHUP, 3000), (signal.SIGKILL, 3000)],
    ids=["SIGTERM", "Ctrl-C capped", "SIGHUP capped", "kill -9 capped"],
)
def test_closing_the_app_stops_its_benchmark(tmp_path: Path, sig: int, cap: int) -> None:
    """The desktop app ended while a (hung) benchmark runs in it: the worker and everything
    the app started end with it, and its memory cgroup is removed (after kill -9, by the
    next start's sweep)."""
    if cap and memcg.unavailable() is not None:
        pytest.skip(f"no memory cgroups here: {memcg.unavailable()}")
    env = dict(os.environ, TFDOCTOR_STATE_DIR=str(tmp_path / "state"), QT_QPA_PLATFORM="offscreen")
    gui = subprocess.Popen(
        [sys.executable, "-c", APP_DRIVER, str(cap)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert gui.stdout is not None and gui.stdout.readline() == b"started\n"
    deadline = time.monotonic() + 120
    started: list[psutil.Process] = []
    while time.monotonic() < deadline:  # until the worker trains (its steps reach the disk)
        started = descendants(gui.pid)
        events = list((tmp_path / "state" / "runs").glob("*/events.jsonl"))
        if events and b'"step"' in events[0].read_bytes():
            break
        time.sleep(0.2)
    else:
        gui.kill()
        raise AssertionError("the worker did not start training")
    assert any("bench_worker.py" in " ".join(p.cmdline()) for p in started)
    if cap:
        assert our_cgroups(gui.pid)
    gui.send_signal(sig)
    _, err = gui.communicate(timeout=60)
    assert b"Traceback" not in err, err.decode(errors="replace")[-2000:]
    if sig != signal.SIGKILL:
        assert gui.returncode == 128 + sig, err.decode(errors="replace")[-2000:]
    assert all(gone(p) for p in started), [p for p in started if p.is_running()]
    if sig == signal.SIGKILL:  # nothing of the app could run: the next start sweeps it
        memcg.sweep_stale()
    assert our_cgroups(gui.pid) == []


def _has(events: Path, text: bytes) -> bool:
    try:
        return text in events.read_bytes()
    except OSError:
        return False


def _steps(events: Path) -> bool:
    return _has(events, b'"type": "step"')


# phase -> (bench arguments, when it has reached that phase, given the run folders)
PHASES: dict[str, tuple[tuple[str, ...], Callable[[list[Path]], bool]]] = {
    "start-up": (("--steps", "50"), lambda runs: bool(runs)),
    "training": (
        ("--steps", "100000", "--data", "stream"),
        lambda runs: any(_steps(r / "events.jsonl") for r in runs),
    ),
    "max-batch search": (
        ("--steps", "20", "--find-max-batch", "--max-batch", "100000"),
        lambda runs: any(_has(r / "events.jsonl", b'"run": 2') for r in runs),  # a later probe
    ),
    "verify-fix re-run": (
        ("--steps", "10", "--verify-fix", "memory_growth"),
        lambda runs: len(runs) >= 2 and _steps(sorted(runs)[-1] / "events.jsonl"),
    ),
}


@pytest.mark.parametrize("phase", sorted(PHASES))
@pytest.mark.parametrize(
    ("sig", "cap"), [(signal.SIGINT, 0), (signal.SIGTERM, 3000), (signal.SIGKILL, 3000)],
    ids=["Ctrl-C", "SIGTERM capped", "kill -9 capped"],
)  # fmt: skip
def test_an_interrupt_in_any_phase_leaves_no_process_and_no_cgroup(
    tmp_path: Path, phase: str, sig: int, cap: int
) -> None:
    if cap and memcg.unavailable() is not None:
        pytest.skip(f"no memory cgroups here: {memcg.unavailable()}")
    args, reached = PHASES[phase]
    env = dict(os.environ, TFDOCTOR_STATE_DIR=str(tmp_path / "state"))
    capped = ("--memory-cap-mib", str(cap)) if cap else ()
    cli = subprocess.Popen(
        [TFDOCTOR, "bench", "--device", "cpu", "--preset", "mlp", *args, *capped],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen: set[psutil.Process] = set()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        seen.update(descendants(cli.pid))  # everything it started, as it starts
        runs = [p for p in (tmp_path / "state" / "runs").glob("*") if p.is_dir()]
        if reached(runs) and any("bench_worker.py" in _cmdline(p) for p in seen):
            break
        assert cli.poll() is None, f"the bench ended before reaching {phase}"
        time.sleep(0.05)
    else:
        cli.kill()
        raise AssertionError(f"never reached {phase}")
    seen.update(descendants(cli.pid))
    cli.send_signal(sig)
    _, err = cli.communicate(timeout=90)
    assert b"Traceback" not in err, err.decode(errors="replace")[-2000:]
    if sig != signal.SIGKILL:
        assert cli.returncode == 130, err.decode(errors="replace")[-2000:]
    assert all(gone(p) for p in seen), [p for p in seen if p.is_running()]
    if sig == signal.SIGKILL:
        memcg.sweep_stale()  # what the next start does
    assert our_cgroups(cli.pid) == []


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""
