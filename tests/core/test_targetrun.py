"""The target probe runs in a real interpreter; crashes, hangs and non-Pythons are results."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import psutil
import pytest

from tests.conftest import ABORT, BROKEN, HANG, ILLEGAL_INSTRUCTION, SEGFAULT, fake_tf_dir
from tfdoctor.core.model import ProbeStatus, Target
from tfdoctor.core.probes import targetrun
from tfdoctor.core.probes.targetrun import TargetError, run_probe


def facts_of(run: targetrun.TargetRun) -> dict[str, object]:
    return {f.name: f.value for f in run.result.facts}


@pytest.fixture(scope="session")
def real_run() -> targetrun.TargetRun:
    """One real probe of this app's interpreter (real TensorFlow, CPU machine)."""
    return run_probe(targetrun.current_target(), timeout_s=300)


def test_real_tensorflow_probe_reports_the_build_and_no_gpu(real_run: targetrun.TargetRun) -> None:
    facts = facts_of(real_run)
    assert real_run.result.status is ProbeStatus.OK, real_run.result.message
    assert facts["tf.installed"] is True
    assert str(facts["tf.version"]).startswith("2.")
    assert isinstance(facts["tf.build_info"], dict)
    assert facts["tf.is_cuda_build"] in (True, False)
    assert facts["tf.gpu_count"] == 0  # this machine has no GPU
    assert facts["target.probe_stage"] == "done"
    assert float(facts["tf.import_s"]) > 0  # type: ignore[arg-type]
    # TF's own C++ log lines are kept as evidence (TF_CPP_MIN_LOG_LEVEL forced to 0)
    assert any("cuda" in line.lower() for line in real_run.output)


def test_user_env_is_recorded_before_the_probe_changes_it(tmp_path: Path) -> None:
    t = Target(
        python=targetrun.current_target().python,
        label="t",
        env=(("TF_CPP_MIN_LOG_LEVEL", "3"), ("PYTHONPATH", str(fake_tf_dir(tmp_path, "")))),
    )
    facts = facts_of(run_probe(t, timeout_s=60))
    env = facts["target.env"]
    assert isinstance(env, dict) and env["TF_CPP_MIN_LOG_LEVEL"] == "3"


def test_python_without_tensorflow(bare_python: str) -> None:
    run = run_probe(Target(python=bare_python, label="bare"), timeout_s=60)
    facts = facts_of(run)
    assert run.result.status is ProbeStatus.OK
    assert facts["tf.installed"] is False
    assert "ModuleNotFoundError" in str(facts["tf.import_error"])
    assert facts["target.is_venv"] is True


@pytest.mark.parametrize(
    ("body", "signal_name"),
    [(SEGFAULT, "SIGSEGV"), (ILLEGAL_INSTRUCTION, "SIGILL"), (ABORT, "SIGABRT")],
)
def test_native_crash_while_importing_tf_is_a_result(
    tmp_path: Path, body: str, signal_name: str
) -> None:
    t = Target(
        python=targetrun.current_target().python,
        label="crashy",
        env=(("PYTHONPATH", str(fake_tf_dir(tmp_path, body))),),
    )
    run = run_probe(t, timeout_s=60)
    assert run.result.status is ProbeStatus.CRASHED
    assert run.signal_name == signal_name
    assert run.stage == "import_tf"
    assert "importing TensorFlow" in run.result.message
    if signal_name == "SIGSEGV":
        # faulthandler's Python stack of the crash is in the captured output
        assert any("Segmentation fault" in line for line in run.output)
        assert any("cpu_feature_guard" in line for line in run.output)


def test_hang_is_stopped_with_a_stack_dump_and_no_orphans(tmp_path: Path) -> None:
    t = Target(
        python=targetrun.current_target().python,
        label="hangs",
        env=(("PYTHONPATH", str(fake_tf_dir(tmp_path, HANG))),),
    )
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    run = run_probe(t, timeout_s=3)
    assert run.result.status is ProbeStatus.TIMEOUT
    assert run.timed_out and run.stage == "import_tf"
    assert any("Thread" in line or "File" in line for line in run.output)  # stacks dumped
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before


def test_broken_tensorflow_import(tmp_path: Path) -> None:
    t = Target(
        python=targetrun.current_target().python,
        label="broken",
        env=(("PYTHONPATH", str(fake_tf_dir(tmp_path, BROKEN))),),
    )
    facts = facts_of(run_probe(t, timeout_s=60))
    assert facts["tf.installed"] is False
    assert "libcudart.so.11.0" in str(facts["tf.import_error"])


def test_not_a_python(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="not a Python interpreter"):
        targetrun.python_version("/bin/ls")
    with pytest.raises(TargetError, match="no such file"):
        targetrun.python_version(str(tmp_path / "nope"))
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho hello\n")
    with pytest.raises(TargetError, match="not executable"):
        targetrun.python_version(str(script))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(TargetError, match="not a Python interpreter"):
        targetrun.python_version(str(script))
    with pytest.raises(TargetError, match="is a directory"):
        targetrun.python_version(str(tmp_path))


def test_cancel_stops_the_probe(tmp_path: Path) -> None:
    import threading

    cancel = threading.Event()
    t = Target(
        python=targetrun.current_target().python,
        label="hangs",
        env=(("PYTHONPATH", str(fake_tf_dir(tmp_path, HANG))),),
    )

    def on_stage(stage: str) -> None:
        if stage == "import_tf":
            cancel.set()

    run = run_probe(t, timeout_s=60, on_stage=on_stage, cancel=cancel)
    assert run.result.status is ProbeStatus.SKIPPED
    assert not any(
        p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        for p in psutil.Process(os.getpid()).children(recursive=True)
    )
