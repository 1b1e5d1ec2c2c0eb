"""However `tfdoctor bench` ends (Ctrl-C, SIGTERM, SIGHUP, kill -9), its TensorFlow worker
ends with it, its memory cgroup goes, and what the worker printed is on disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
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
