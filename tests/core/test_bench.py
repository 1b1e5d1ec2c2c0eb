"""The supervised benchmark, for real: a real Keras fit on the CPU, and a fault matrix where
the worker really dies (SIGSEGV, SIGABRT, exceptions, a real ResourceExhaustedError, a hang,
a stderr flood, an orphaned grandchild, a real kernel OOM kill in a memory cgroup)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tfdoctor.core.bench import memcg
from tfdoctor.core.bench.batchsearch import SearchOptions, find_max_batch, probe_budget
from tfdoctor.core.bench.config import BenchConfig, ConfigError
from tfdoctor.core.bench.supervisor import BenchResult, BenchRun, SupervisorOptions, run_bench
from tfdoctor.core.events import Event, EventBuffer
from tfdoctor.core.probes.targetrun import TargetError, current_target
from tfdoctor.core.telemetry import Timeline

pytestmark = pytest.mark.slow
SMALL = BenchConfig(preset="mlp", batch_size=16, steps=6, device="cpu")
FAST = SupervisorOptions(watchdog_s=120, stall_s=15, guard_mib=0)  # > TF's 10 s OOM retry
WHY_NO_MEMCG = memcg.unavailable()


STATE: list[Path] = []


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path / "state"))
    STATE[:] = [tmp_path / "state"]


def leftovers() -> list[str]:
    """Processes this test's runs left behind: workers and their children run in the run
    folders under this test's state dir (other tests may run workers at the same time)."""
    out = []
    for p in psutil.process_iter(["cmdline", "status", "cwd"]):
        if p.info["status"] == psutil.STATUS_ZOMBIE or not p.info["cwd"]:
            continue
        if STATE and p.info["cwd"].startswith(str(STATE[0])):
            out.append(f"{p.pid}: {' '.join(p.info['cmdline'] or [])[:120]}")
    return out


def bench(config: BenchConfig, options: SupervisorOptions = FAST, **kw: Any) -> BenchResult:
    events: EventBuffer[Event] = EventBuffer(100_000)
    timeline = Timeline()
    res = run_bench(current_target(), config, options, events=events, timeline=timeline, **kw)
    res.events = [e for _, e in events.since(0)]  # type: ignore[attr-defined]
    res.telemetry = [e for _, e in timeline.since(0)]  # type: ignore[attr-defined]
    assert leftovers() == []
    return res


def test_a_real_keras_fit_completes_with_phases_speed_and_memory() -> None:
    res = bench(BenchConfig(preset="cnn", input_shape=(32, 32, 3), batch_size=8, steps=8))
    assert res.outcome.status == "completed", res.outcome.detail + "\n".join(res.output_tail)
    kinds = [k for k, _ in res.events]  # type: ignore[attr-defined]
    phases = [d for k, d in res.events if k == "phase"]  # type: ignore[attr-defined]
    for a, b in zip(
        ["import", "device_init", "build", "compile", "first_step", "steady"],
        ["device_init", "build", "compile", "first_step", "steady", "done"],
        strict=True,
    ):
        assert phases.index(a) < phases.index(b)
    assert "step" in kinds
    telemetry = res.telemetry  # type: ignore[attr-defined]
    samples = [i for k, i in telemetry if k == "sample"]
    assert len(samples) >= 5 and any(i.get("rss") for i in samples)  # the worker's RSS
    assert [i["label"] for k, i in telemetry if k == "marker"][:4] == [
        "import",
        "compile",
        "first step",
        "steady state",
    ]
    assert any(k == "tf" for k, _ in telemetry)  # TF's allocator numbers on the timeline
    m = res.metrics
    assert m["steps_done"] == 8
    assert m["steady_steps_per_s"] > 0 and m["examples_per_s"] > 0
    assert m["tf_peak_bytes"] and all(v > 0 for v in m["tf_peak_bytes"].values())
    assert m["rss_peak_bytes"] > 100 << 20  # TensorFlow is in there
    assert res.info["tf_version"] and res.info["memory_device"]
    # CPU runs use TF's BFC CPU allocator, whose statistics exist on every host (the default
    # CPU allocator of some hosts answers "Allocator stats not available")
    assert SMALL.env()["TF_CPU_ALLOCATOR_USE_BFC"] == "true"
    assert res.info["memory_stats_error"] is None
    assert res.diagnosis.causes == ()  # a healthy CPU run: no blame for start-up notices
    out = res.to_json()
    assert out["schema"] == 1 and out["outcome"]["status"] == "completed"
    json.dumps(out)  # plain data
    assert (res.run_dir / "stderr.log").stat().st_size > 0
    assert (res.run_dir / "events.jsonl").read_text().count('"step"') >= 5


@pytest.mark.parametrize(
    ("fault", "status", "signal"),
    [
        ("segfault", "crashed", "SIGSEGV"),
        ("abort", "crashed", "SIGABRT"),
        ("exception", "exception", None),
        ("tf_oom", "oom_recovered", None),
    ],
)
def test_fault_matrix(fault: str, status: str, signal: str | None) -> None:
    res = bench(BenchConfig(preset="mlp", batch_size=16, steps=6, device="cpu", fault=fault))
    o = res.outcome
    assert (o.status, o.signal) == (status, signal), o.detail
    if fault == "segfault":
        assert o.fault_stack and "Segmentation fault" in o.fault_stack
        assert "on_train_batch_end" in o.fault_stack  # the Python stack where it died
    if fault == "exception":
        assert o.exception and o.exception["type"] == "RuntimeError"
        assert "injected fault" in o.exception["message"]
    if fault == "tf_oom":
        assert "ResourceExhausted" in o.detail or "OOM" in o.detail
        # TF's CPU allocator ran out: host memory, said by the engine from the real message
        assert res.diagnosis.causes and res.diagnosis.causes[0].id == "host_oom"
    assert res.metrics["steps_done"] >= 2  # it trained before the fault


def test_a_hang_is_stopped_with_its_stack() -> None:
    res = bench(replace_fault("hang"))
    assert res.outcome.status == "hang"
    assert "no progress" in res.outcome.detail
    assert res.outcome.fault_stack and "on_train_batch_end" in res.outcome.fault_stack


def test_a_flood_of_stderr_neither_blocks_nor_fills_memory() -> None:
    res = bench(replace_fault("stderr_flood"))
    assert res.outcome.status == "completed", res.outcome.detail
    log = res.run_dir / "stderr.log"
    assert 32 << 20 <= log.stat().st_size <= (32 << 20) + 4096  # capped file
    assert len(res.output_tail) <= 200


def test_a_grandchild_that_outlives_the_worker_is_killed() -> None:
    res = bench(replace_fault("grandchild"))  # bench() asserts nothing is left
    assert res.outcome.status == "completed", res.outcome.detail


@pytest.mark.skipif(WHY_NO_MEMCG is not None, reason=f"no memory cgroup: {WHY_NO_MEMCG}")
def test_a_real_kernel_oom_kill_under_a_memory_cap_is_host_oom() -> None:
    options = SupervisorOptions(watchdog_s=120, stall_s=30, memory_cap_mib=1200, guard_mib=0)
    res = bench(replace_fault("host_oom"), options)
    o = res.outcome
    assert (o.status, o.signal) == ("killed", "SIGKILL"), o.detail
    assert o.oom_kill is not None and o.oom_kill.proven
    assert o.oom_kill.cgroup_delta == 1
    top = res.diagnosis.causes[0]
    assert top.id == "host_oom" and top.confidence >= 0.9
    # the cap is the experiment's: what the run needed, never "the machine ran out of RAM",
    # and no fix that gives the machine more RAM (raise a container limit, add swap)
    assert top.title == "The run needed more than the 1200 MiB RAM cap you set"
    assert "peaked at" in top.explanation and "file pages" in top.explanation
    assert "machine ran out" not in top.title
    assert "stream_tf_data" in top.fixes
    assert not {"raise_memory_limit", "add_swap"} & set(top.fixes)
    assert "at the RAM cap you set" in o.detail
    # the telemetry carries the cgroup's usage next to RSS: the number the kill is decided on
    cg = [i["cgroup"] for k, i in res.telemetry if k == "sample" and "cgroup" in i]  # type: ignore[attr-defined]
    assert cg and max(c["usage"] for c in cg) <= 1200 << 20
    assert all(c["anon"] + c["file"] <= c["usage"] + (64 << 20) for c in cg)


def test_cancel_stops_the_worker_at_once() -> None:
    events: EventBuffer[Event] = EventBuffer()
    cancel = threading.Event()
    out: list[BenchResult] = []
    t = threading.Thread(
        target=lambda: out.append(
            run_bench(current_target(), replace_fault("hang"), FAST, events=events, cancel=cancel)
        )
    )
    t.start()
    seq = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not cancel.is_set():
        for seq, (kind, _) in events.since(seq):  # noqa: B007, B020 - cursor
            if kind == "step":
                cancel.set()
        time.sleep(0.05)
    t.join(60)
    assert out and out[0].outcome.status == "cancelled"
    assert not out[0].diagnosis.causes  # a run the user stopped explains nothing
    assert leftovers() == []


def test_the_memory_guard_stops_a_run_before_the_machine_runs_out() -> None:
    total_mib = psutil.virtual_memory().total >> 20
    res = bench(SMALL, SupervisorOptions(guard_mib=total_mib + 1))  # always "too little left"
    assert res.outcome.status == "guard_stopped"
    assert "guard" in res.outcome.detail


def test_worker_that_cannot_import_tensorflow_is_an_exception(bare_python: str) -> None:
    from tfdoctor.core.model import Target

    res = run_bench(Target(python=bare_python, label="bare"), SMALL, FAST)
    assert res.outcome.status == "exception"
    assert "while importing TensorFlow" in res.outcome.detail
    assert res.outcome.exception and res.outcome.exception["type"] == "ModuleNotFoundError"
    assert "tensorflow" in res.outcome.exception["message"]
    assert leftovers() == []


def test_bad_targets_and_configs_are_one_line_errors(tmp_path: Path) -> None:
    from tfdoctor.core.model import Target

    with pytest.raises(TargetError):
        run_bench(Target(python=str(tmp_path / "nope"), label="x"), SMALL)
    for bad in (
        BenchConfig(preset="vgg"),
        BenchConfig(batch_size=0),
        BenchConfig(input_shape=(3, 3)),
        BenchConfig(memory_growth=True, memory_limit_mb=1024),
    ):
        with pytest.raises(ConfigError) as exc:
            bad.validate()
        assert "\n" not in str(exc.value)


def test_bench_run_in_the_background_reports_progress_then_the_result() -> None:
    """The one way the CLI and the GUI run a benchmark: events while it runs, then the end."""
    run = BenchRun(current_target(), SMALL, FAST).start()
    assert run.wait(300) and run.done
    assert run.error is None and run.bug is None
    assert run.result is not None and run.result.outcome.status == "completed"
    kinds = [kind for _, (kind, _) in run.events.since(0)]
    assert "phase" in kinds and "step" in kinds and kinds[-1] == "done"
    assert any(kind == "sample" for _, (kind, _) in run.timeline.since(0))
    assert leftovers() == []


def test_bench_run_that_cannot_start_is_a_one_line_error(tmp_path: Path) -> None:
    from tfdoctor.core.model import Target

    run = BenchRun(Target(python=str(tmp_path / "nope"), label="x"), SMALL).start()
    assert run.wait(60)
    assert run.result is None and run.bug is None
    assert run.error and "\n" not in run.error and "nope" in run.error


def replace_fault(kind: str) -> BenchConfig:
    from dataclasses import replace

    return replace(SMALL, fault=kind, steps=8 if kind != "hang" else 50)


@pytest.mark.skipif(WHY_NO_MEMCG is not None, reason=f"no memory cgroup: {WHY_NO_MEMCG}")
def test_batch_search_under_a_memory_cap_finds_the_boundary_and_respawns() -> None:
    """The MLP's whole dataset lives in RAM (data=array): the batch size decides how much,
    and the memory cap kills the worker at some size; the search must survive that, respawn,
    and bisect to a boundary within the margin."""
    config = BenchConfig(preset="mlp", batch_size=256, steps=40, device="cpu")
    options = SupervisorOptions(watchdog_s=120, stall_s=30, memory_cap_mib=1100, guard_mib=0)
    search = SearchOptions(start=256, max_batch=16384, margin=0.10)
    res = find_max_batch(current_target(), config, search, options)
    assert leftovers() == []
    r = res.recommendation
    assert r is not None and res.outcome.status == "completed", res.outcome.detail
    statuses = [p["status"] for p in res.probes]
    assert "host_oom_killed" in statuses, res.probes
    assert res.metrics["workers_started"] >= 2  # respawned after the kill
    # one worker, plus one per fatal failure that another probe followed
    assert res.metrics["workers_started"] == 1 + sum(s not in ("ok", "oom") for s in statuses[:-1])
    assert r["largest_clean_batch"] < r["first_failing_batch"]
    assert r["first_failing_batch"] - r["largest_clean_batch"] <= max(
        1, int(0.1 * r["largest_clean_batch"])
    )
    assert r["recommended_batch"] == int(r["largest_clean_batch"] * 0.9)
    assert len(res.probes) <= probe_budget(256, 16384, 0.10)
    assert res.diagnosis.causes and res.diagnosis.causes[0].id == "host_oom"
    assert "1100 MiB RAM cap you set" in res.diagnosis.causes[0].title
    assert "raise_memory_limit" not in res.diagnosis.causes[0].fixes
    # the user's GPU-OOM log with this search: the batch fix carries the searched size and
    # says where it came from; the search's kill at the cap is not the crash's cause
    from tests.core.test_flow import corpus_log
    from tfdoctor.core.session import Inputs, LogInput, RunEvidence, analyse

    log = corpus_log("gpu_oom")
    a = analyse(Inputs((LogInput(log.name, log.read_bytes()),), run=RunEvidence.of(res)))
    assert a.ranked[0].cause.id == "gpu_oom" and "host_oom" not in [c.cause.id for c in a.ranked]
    assert a.params["batch_size"] == str(r["recommended_batch"])
    assert f"{r['largest_clean_batch']} was the largest batch" in a.origins["batch_size"]
    assert "smaller_batch" in a.fix_ids and "smaller_batch" not in a.wanting


def test_cli_bench_json_and_bad_flags() -> None:
    tfd = str(Path(sys.executable).with_name("tfdoctor"))
    p = subprocess.run(
        [tfd, "bench", "--device", "cpu", "--preset", "mlp", "--steps", "4", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["schema"] == 1 and out["outcome"]["status"] == "completed"
    assert set(out) >= {"config", "outcome", "metrics", "probes", "causes"}
    for args in (["--batch-size", "0"], ["--preset", "vgg"], ["--input-shape", "axb"]):
        bad = subprocess.run([tfd, "bench", *args], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2
        assert len(bad.stderr.strip().splitlines()) == 1
        assert "Traceback" not in bad.stderr


def test_memory_cap_without_cgroups_falls_back_to_an_address_space_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where no memory cgroup can be made (no root, no delegation), the cap is RLIMIT_AS:
    allocations past it fail inside the worker (MemoryError) instead of an OOM kill."""

    def refuse(*_a: object, **_k: object) -> None:
        raise memcg.MemcgError("no memory cgroup here (test)")

    monkeypatch.setattr(memcg, "MemoryCgroup", refuse)
    options = SupervisorOptions(watchdog_s=120, stall_s=30, memory_cap_mib=6000, guard_mib=0)
    events: EventBuffer[Event] = EventBuffer()
    res = run_bench(current_target(), replace_fault("host_oom"), options, events=events)
    notes = [str(data) for _, (kind, data) in events.since(0) if kind == "status"]
    assert any("RLIMIT_AS" in n for n in notes), notes
    o = res.outcome
    assert o.status in ("exception", "crashed"), o.detail  # MemoryError, or abort in C++
    assert res.diagnosis.causes and res.diagnosis.causes[0].id == "host_oom"
    assert leftovers() == []


def test_batch_search_over_recoverable_ooms_keeps_one_worker() -> None:
    """TensorFlow's CPU allocator capped at 256 MiB (TF_CPU_BFC_MEM_LIMIT_IN_MB, the same BFC
    allocator and ResourceExhaustedError as a GPU's): each too-big batch raises a real,
    recoverable OOM; the worker clears its session and serves the next probe."""
    from tfdoctor.core.model import Target

    target = Target(
        python=sys.executable,
        label="capped CPU allocator",
        env=(
            ("TF_CPU_ALLOCATOR_USE_BFC", "1"),
            ("TF_CPU_BFC_MEM_LIMIT_IN_MB", "256"),
            ("TF_ENABLE_ONEDNN_OPTS", "0"),  # oneDNN kernels segfault after such an OOM
        ),
    )
    config = BenchConfig(
        preset="cnn", input_shape=(64, 64, 3), batch_size=16, steps=3, device="cpu"
    )
    res = find_max_batch(target, config, SearchOptions(start=16, max_batch=4096, margin=0.1), FAST)
    assert leftovers() == []
    statuses = [p["status"] for p in res.probes]
    assert "oom" in statuses and set(statuses) <= {"ok", "oom"}, res.probes
    assert res.metrics["workers_started"] == 1
    r = res.recommendation
    assert r is not None and 16 < r["largest_clean_batch"] < r["first_failing_batch"] < 4096
    assert res.diagnosis.causes[0].id == "host_oom"  # the CPU allocator: host memory
    assert len(res.probes) <= probe_budget(16, 4096, 0.1)


def test_the_async_allocator_on_a_build_without_cuda_is_flagged() -> None:
    from tfdoctor.core.bench.watch import _allocator_unsupported

    cfg = BenchConfig(allocator="cuda_malloc_async")
    assert "no CUDA" in str(_allocator_unsupported(cfg, {"build": {"is_cuda_build": False}}))
    old = {"build": {"is_cuda_build": True, "cuda_version": "11.0"}}
    assert "11.2" in str(_allocator_unsupported(cfg, old))
    new = {"build": {"is_cuda_build": True, "cuda_version": "12.3"}}
    assert _allocator_unsupported(cfg, new) is None
    assert _allocator_unsupported(BenchConfig(), old) is None


def test_the_worker_and_the_config_agree_on_presets_shapes_faults_and_defaults() -> None:
    """The worker runs without tfdoctor installed, so it keeps its own copies of these
    tables: a preset, fault or default added on one side only would break runs silently."""
    import importlib.util

    from tfdoctor.core.bench import config as cfg_mod
    from tfdoctor.core.bench.supervisor import WORKER_SCRIPT

    spec = importlib.util.spec_from_file_location("bench_worker_tables", WORKER_SCRIPT)
    assert spec and spec.loader
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)  # TensorFlow is imported only when a run starts
    assert set(worker.PRESETS) == set(cfg_mod.PRESETS)
    assert {k: tuple(v) for k, v in worker.DEFAULT_SHAPE.items()} == cfg_mod.DEFAULT_SHAPES
    assert set(worker.FAULTS) == set(cfg_mod.FAULTS)
    default = BenchConfig().run_config()
    for key, value in default.items():
        assert worker.CONFIG_DEFAULTS[key] == value, key
