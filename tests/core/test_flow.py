"""The wizard's flow decisions and the combined diagnosis, without Qt."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CORPUS, SNAPSHOTS
from tfdoctor.core import flow, telemetry
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.supervisor import SupervisorOptions, run_bench
from tfdoctor.core.model import Fact, Facts, Finding, Severity
from tfdoctor.core.probes import nvml
from tfdoctor.core.probes.targetrun import current_target
from tfdoctor.core.scan import CheckReport


def report(**facts: Any) -> CheckReport:
    fs = Facts([Fact(k.replace("__", "."), v, "test") for k, v in facts.items()])
    return CheckReport(target=current_target(), facts=fs, findings=[], probes={})


def corpus_log(cause: str) -> Path:
    for f in sorted(CORPUS.glob("*.txt")):
        head = f.read_text(errors="replace").partition("\n---\n")[0]
        if f"label: {cause}" in head:
            return f
    raise AssertionError(f"no corpus log labelled {cause}")


def test_a_fresh_session_opens_only_start_and_says_why_the_rest_is_closed() -> None:
    s = flow.Session()
    st = flow.step_states(s)
    assert st["start"].enabled and st["export"].enabled
    for step in ("checks", "reproduce", "diagnosis", "fix"):
        assert not st[step].enabled and st[step].reason, step
    assert flow.next_step(s, "start") == "export"


def test_the_setup_door_walks_every_step_in_order() -> None:
    s = flow.Session(door=flow.DOOR_SETUP, target=current_target())
    assert flow.next_step(s, "start") == "checks"
    assert flow.next_step(s, "checks") == "reproduce"
    s.check = report(tf__installed=True, tf__gpu_count=1)
    assert flow.next_step(s, "reproduce") == "diagnosis"
    assert flow.prev_step(s, "diagnosis") == "reproduce"
    assert flow.prev_step(s, "checks") == "start"


def test_the_log_door_goes_straight_to_the_diagnosis_and_back() -> None:
    s = flow.Session(door=flow.DOOR_LOG, target=current_target())
    s.add_log("oom.txt", corpus_log("gpu_oom").read_bytes())
    st = flow.step_states(s)
    assert st["checks"].skipped and "optional" in st["checks"].reason
    assert st["reproduce"].skipped
    assert flow.next_step(s, "start") == "diagnosis"
    assert flow.prev_step(s, "diagnosis") == "start"
    assert flow.next_step(s, "diagnosis") == "fix"  # the OOM's fixes


def test_reproduce_is_closed_without_tensorflow_and_on_the_cpu_without_a_gpu() -> None:
    s = flow.Session(door=flow.DOOR_SETUP, target=current_target())
    s.check = report(tf__installed=False)
    st = flow.step_states(s)["reproduce"]
    assert not st.enabled and "TensorFlow does not import" in st.reason
    assert flow.next_step(s, "checks") == "diagnosis"  # skipped, with its reason shown
    s.check = report(tf__installed=True, tf__gpu_count=0)
    st = flow.step_states(s)["reproduce"]
    assert st.enabled and "CPU" in st.reason
    cfg, why = flow.suggest_config(s)
    assert cfg.device == "cpu" and any("no GPU" in w for w in why)


def test_suggested_settings_follow_the_users_crash_log() -> None:
    s = flow.Session(door=flow.DOOR_LOG)
    s.add_log(
        "x.txt",
        b"OOM when allocating tensor with shape[256,64,112,112] and type float on GPU:0\n"
        b"[[{{node model/conv2d_3/Conv2D}}]]\n",
    )
    cfg, why = flow.suggest_config(s)
    assert (cfg.preset, cfg.batch_size) == ("cnn", 256)
    assert len(why) == 2
    s2 = flow.Session()
    s2.add_log("t.txt", b"node model/multi_head_attention/softmax ... shape[48,8,512,512]\n")
    assert flow.suggest_config(s2)[0].preset == "transformer"
    assert flow.suggest_config(flow.Session())[0] == BenchConfig()  # nothing known: defaults


def test_causes_from_every_source_are_merged_with_their_sources() -> None:
    s = flow.Session(door=flow.DOOR_LOG, target=current_target())
    s.add_log("host.txt", corpus_log("host_oom").read_bytes())
    s.check = report(tf__installed=True)
    s.check.findings.append(
        Finding(
            "log.host_oom",
            Severity.ERROR,
            "The machine ran out of RAM (why the probe failed, 80% sure)",
            "",
        )
    )
    ranked = flow.combined_causes(s)
    top = ranked[0]
    assert top.cause.id == "host_oom"
    assert top.sources == ("crash log", "environment check")
    alone = flow.Session()
    alone.add_log("host.txt", corpus_log("host_oom").read_bytes())
    solo = flow.combined_causes(alone)[0].cause.confidence
    assert top.cause.confidence > solo  # two independent sources are surer than one
    fixes = [fid for fid, _ in flow.proposed_fixes(s)]
    assert fixes and fixes[0] in top.cause.fixes
    json.dumps(s.to_json(), default=str)


def test_a_big_log_file_is_read_from_disk(tmp_path: Path) -> None:
    big = tmp_path / "server.log"
    big.write_bytes(b"[I 10:00:00 ServerApp] saving\n" * 100_000 + b"Killed\n")
    s = flow.Session(door=flow.DOOR_LOG)
    s.add_log(big.name, path=str(big))
    d = s.diagnose_logs()
    assert d is not None and d.causes[0].id == "host_oom"
    assert d.causes[0].evidence[0].line == 100_001


def _timeline_of(config: BenchConfig) -> list[tuple[str, dict[str, Any]]]:
    tl = telemetry.Timeline()
    res = run_bench(
        current_target(), config, SupervisorOptions(sample_every_s=0.1, guard_mib=0), timeline=tl
    )
    assert res.outcome.status == "completed", res.outcome.detail
    return [item for _, item in tl.since(0)]


@pytest.mark.slow
def test_a_real_leak_and_real_retracing_are_seen_in_the_telemetry_a_clean_run_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path))
    base = BenchConfig(preset="cnn", input_shape=(32, 32, 3), batch_size=16, steps=200)
    leaky = _timeline_of(dataclasses.replace(base, device="cpu", fault="leak", fault_at_step=1))
    causes = flow.telemetry_causes(leaky)
    assert [c.id for c in causes] == ["memory_leak"]
    assert "RSS grew" in causes[0].evidence[0].text and causes[0].confidence >= 0.7
    clean = _timeline_of(dataclasses.replace(base, device="cpu"))
    assert flow.telemetry_causes(clean) == []
    # a real tf.function retrace every 10 steps (a Python number passed where a tensor
    # belongs): slow again and again, not just the first step
    retracing = _timeline_of(
        BenchConfig(
            preset="mlp", batch_size=16, steps=60, device="cpu", fault="retrace", fault_at_step=1
        )
    )
    causes = flow.telemetry_causes(retracing)
    assert [c.id for c in causes] == ["tf_function_retracing"]
    assert "traced again" in causes[0].evidence[0].text


def test_an_idle_gpu_during_training_is_input_bound() -> None:
    """GPU samples through the live sampler from a recorded machine (0% utilisation), on the
    timeline of a training run's steps."""
    api = nvml.ReplayNvml(nvml.load_snapshot(SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json"))
    gpu = nvml.GpuSampler(api)
    assert gpu.open() is None
    rows = gpu.sample()
    gpu.close()
    items: list[tuple[str, dict[str, Any]]] = [("marker", {"t": 1.0, "label": "steady state"})]
    for i in range(30):
        t = 1.0 + i * 0.1
        items.append(("sample", {"t": t, "ram_used": 1, "gpus": rows}))
        items.append(("step", {"t": t, "step": i + 1, "step_s": 0.1}))
    causes = {c.id: c for c in flow.telemetry_causes(items)}
    assert "input_bound" in causes and "0%" in causes["input_bound"].evidence[0].text


def test_confidence_words() -> None:
    assert [flow.confidence_words(c) for c in (0.95, 0.75, 0.5, 0.2)] == [
        "almost certain",
        "likely",
        "plausible",
        "possible",
    ]


def test_evidence_comes_with_the_lines_around_it() -> None:
    s = flow.Session(door=flow.DOOR_LOG)
    lines = [f"step {i}" for i in range(1, 30)]
    lines[19] = "Killed"
    s.add_log("run.txt", ("\n".join(lines) + "\n").encode())
    cause = flow.combined_causes(s)[0].cause
    assert cause.id == "host_oom"
    ev = flow.with_context(s, cause.evidence)
    assert [(e.line, e.source) for e in ev] == [
        (18, "context"),
        (19, "context"),
        (20, "run.txt"),
        (21, "context"),
        (22, "context"),
    ]
    assert ev[0].text == "step 18" and ev[2].text == "Killed"


def test_fix_parameters_come_from_what_was_measured() -> None:
    s = flow.Session(target=current_target())
    s.check = report(
        gpu__count=2,
        gpu0__memory_total_mib=24576,
        gpu0__memory_used_mib=23000,
        gpu1__memory_total_mib=24576,
        gpu1__memory_used_mib=1000,
        tf__is_cuda_build=False,
    )
    params = flow.suggested_params(s)
    assert params["gpu"] == "1" and params["memory_limit_mb"] == str(24576 - 1000 - 512)
    s.check.findings.append(
        Finding("x", Severity.WARNING, "fragmented", "", fixes=("async_allocator", "add_swap"))
    )
    assert [f for f, _ in flow.proposed_fixes(s)] == ["add_swap"]  # CPU build: no async
