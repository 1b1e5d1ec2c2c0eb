"""Real memory cgroups and real kernel OOM kills (root or a delegated cgroup needed)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import FIXTURES
from tfdoctor.core.bench import memcg
from tfdoctor.core.diagnose.engine import ExitInfo, diagnose
from tfdoctor.core.probes import system

WHY_NOT = memcg.unavailable()
needs_memcg = pytest.mark.skipif(WHY_NOT is not None, reason=f"no memory cgroup: {WHY_NOT}")


@needs_memcg
def test_a_process_over_the_cap_is_killed_by_the_kernel_and_counted() -> None:
    with memcg.MemoryCgroup(96 << 20) as cg:
        proc = subprocess.run(
            cg.wrap([sys.executable, "-c", "x = bytearray(400 << 20); print('survived')"]),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == -9, proc.stderr  # SIGKILL, the same PID the shell exec'd
        assert "survived" not in proc.stdout
        assert cg.oom_kills() == 1
        assert (cg.peak_bytes() or 0) <= 96 << 20
        leaf = cg.path
    assert not leaf.exists()  # removed on close
    log = system.read_kernel_log()
    if log.readable:
        kills = [r for r in system.parse_oom_kills(log.lines) if leaf.name in r.get("cgroup", "")]
        assert kills and kills[-1]["kind"] == "cgroup"


@needs_memcg
def test_a_process_under_the_cap_is_untouched() -> None:
    with memcg.MemoryCgroup(256 << 20) as cg:
        proc = subprocess.run(
            cg.wrap([sys.executable, "-c", "x = bytearray(32 << 20); print('ok')"]),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (proc.returncode, proc.stdout.strip(), cg.oom_kills()) == (0, "ok", 0)


def test_a_limit_too_small_for_python_is_refused() -> None:
    with pytest.raises(memcg.MemcgError, match="16 MiB"):
        memcg.MemoryCgroup(1 << 20)


def _maker() -> ModuleType:
    path = FIXTURES / "logs" / "make_host_oom_kill.py"
    spec = importlib.util.spec_from_file_location("make_host_oom_kill", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through it
    spec.loader.exec_module(module)
    return module


def test_recorded_keras_oom_kill_is_host_oom() -> None:
    """Recorded on this kind of machine by make_host_oom_kill.py: a real kill, real output."""
    path = FIXTURES / "logs" / "real_host_oom_kill.txt"
    d = diagnose(path)
    top = d.causes[0]
    assert top.id == "host_oom" and top.confidence >= 0.8
    texts = [e.text for e in top.evidence]
    assert any("Killed" in t and "bash" in t for t in texts)
    assert any("Memory cgroup out of memory: Killed process" in t for t in texts)
    # the CPU-only start-up notices: no blame (a leak, host_oom's look-alike, may follow)
    assert {c.id for c in d.causes if not c.look_alike} <= {"host_oom"}
    # only what the terminal showed (no kernel log at hand): still host_oom, less sure
    terminal = "".join(
        line
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
        if "oom" not in line.lower()
    )
    short = diagnose(terminal.encode())
    assert short.causes[0].id == "host_oom"
    assert short.causes[0].confidence < top.confidence


@pytest.mark.slow
@needs_memcg
def test_live_keras_training_killed_by_the_kernel_is_diagnosed() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed in this interpreter")
    rec = _maker().record(sys.executable)
    assert rec.returncode == 137, rec.terminal[-2000:]  # bash: its child died of SIGKILL
    assert rec.cgroup_oom_kills == 1
    assert "Epoch 1/3" in rec.terminal  # it was training when it died
    exit_info = ExitInfo(
        returncode=137,
        signal="SIGKILL",
        oom_kill_record=bool(rec.kernel_lines),
        oom_kill_line=rec.kernel_lines[-1] if rec.kernel_lines else None,
    )
    d = diagnose(rec.terminal.encode(), "\n".join(rec.kernel_lines).encode(), exit_info=exit_info)
    assert d.causes[0].id == "host_oom"
    assert d.causes[0].confidence >= 0.9
    if rec.kernel_lines:
        assert rec.pid is not None
        assert any(f"process {rec.pid} " in e.text for e in d.causes[0].evidence)


def test_unavailable_says_why_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_mount(*_a: object, **_k: object) -> None:
        return None

    monkeypatch.setattr(memcg, "mount_for", no_mount)
    why = memcg.unavailable()
    assert why is not None and "\n" not in why and "cgroup" in why


@needs_memcg
def test_wrapped_command_keeps_the_pid_and_sits_in_the_cgroup() -> None:
    """The kernel's OOM record names the PID the caller started (the shell execs)."""
    code = "import os; print(os.getpid()); print(open('/proc/self/cgroup').read())"
    with memcg.MemoryCgroup(128 << 20) as cg:
        proc = subprocess.Popen(
            cg.wrap([sys.executable, "-c", code]), stdout=subprocess.PIPE, text=True
        )
        out, _ = proc.communicate(timeout=60)
        pid, _, cgroups = out.partition("\n")
        assert int(pid) == proc.pid
        assert cg.path.name in cgroups


def _killed_in(cg: memcg.MemoryCgroup) -> int:
    proc = subprocess.Popen(cg.wrap([sys.executable, "-c", "x = bytearray(400 << 20)"]))
    assert proc.wait(timeout=60) == -9
    return proc.pid


@needs_memcg
def test_tfdoctors_own_kills_are_kept_out_of_the_machines_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three real kernel OOM kills: a capped tfdoctor worker (cgroup tfdoctor-*), a worker of
    ours in another cgroup whose PID a run folder recorded, and the user's own job. Only the
    user's reaches the environment check and "Find recent crashes"."""
    from tfdoctor.core import experiments
    from tfdoctor.core.checks import CheckContext, run_checks
    from tfdoctor.core.diagnose import recent
    from tfdoctor.core.model import Facts

    if not system.read_kernel_log().readable:
        pytest.skip("the kernel log is not readable here")
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path))
    with memcg.MemoryCgroup(96 << 20) as cg:
        ours = _killed_in(cg)
    with memcg.MemoryCgroup(96 << 20, name=f"bench-elsewhere-{ours}") as cg:
        recorded = _killed_in(cg)
    run = tmp_path / "runs" / "20261124-000000-1-0"
    run.mkdir(parents=True)
    experiments.record_worker(run, recorded, None, 96)
    with memcg.MemoryCgroup(96 << 20, name=f"user-job-{ours}") as cg:
        theirs = _killed_in(cg)

    probe = system.collect()
    facts = Facts(probe.facts)
    kills = facts.value("kernel_log.oom_kills")
    pids = {k["pid"] for k in kills}
    assert theirs in pids and not pids & {ours, recorded}
    assert facts.value("kernel_log.own_oom_kills") >= 2
    found = {f.id: f for f in run_checks(facts, CheckContext({"system": probe}), done=["system"])}
    machine = found["system.recent_oom_kills"]
    # a kill line names its process as "Killed process N (" or "pid=N,": a bare substring of
    # the PID would also match a timestamp, an RSS figure or the user's cgroup name above
    named = re.compile(rf"(?:[Pp]rocess |pid=)(?:{ours}|{recorded})(?!\d)")
    assert not any(named.search(e.text) for e in machine.evidence)
    # in words: how much RAM it held, and that its cgroup's limit (not the machine) was hit
    assert f"(pid {theirs}) held" in machine.explanation
    assert "reached its limit" in machine.explanation
    assert "raise_memory_limit" in machine.fixes
    assert found["system.own_oom_kills_left_out"].severity.label == "ok"
    crashes, problem = recent.kernel_log_crashes()
    assert problem is None
    text = b"".join(c.text for c in crashes).decode()
    assert f"Killed process {theirs} " in text
    assert f"Killed process {ours} " not in text and f"Killed process {recorded} " not in text
    assert "tfdoctor's own capped runs left out" in crashes[0].name
