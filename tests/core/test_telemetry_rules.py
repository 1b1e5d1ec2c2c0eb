"""Causes only a run's timeline shows (a leak, retracing, an input-bound GPU), from real runs
and recorded machines, without Qt."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SNAPSHOTS
from tfdoctor.core import telemetry
from tfdoctor.core.bench.batchsearch import SearchOptions, find_max_batch
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.supervisor import SupervisorOptions, run_bench
from tfdoctor.core.diagnose.telemetry_rules import telemetry_causes
from tfdoctor.core.probes import nvml
from tfdoctor.core.probes.targetrun import current_target


def _only_cause(items: list[tuple[str, dict[str, Any]]], cause_id: str, words: str) -> None:
    """The timeline shows this one cause, and its evidence says so in these words."""
    causes = telemetry_causes(items)
    assert [c.id for c in causes] == [cause_id]
    assert words in causes[0].evidence[0].text


def _timeline_of(config: BenchConfig, every_s: float = 0.1) -> list[tuple[str, dict[str, Any]]]:
    tl = telemetry.Timeline()
    options = SupervisorOptions(sample_every_s=every_s, guard_mib=0)
    res = run_bench(current_target(), config, options, timeline=tl)
    assert res.outcome.status == "completed", res.outcome.detail
    return [item for _, item in tl.since(0)]


@pytest.mark.slow
def test_a_real_leak_and_real_retracing_are_seen_in_the_telemetry_a_clean_run_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path))
    base = BenchConfig(preset="cnn", input_shape=(32, 32, 3), batch_size=16, steps=200)
    leaky = _timeline_of(dataclasses.replace(base, device="cpu", fault="leak", fault_at_step=1))
    causes = telemetry_causes(leaky)
    assert [c.id for c in causes] == ["memory_leak"]
    assert "RSS grew" in causes[0].evidence[0].text and causes[0].confidence >= 0.7
    clean = _timeline_of(dataclasses.replace(base, device="cpu"))
    assert telemetry_causes(clean) == []
    # a real tf.function retrace every 10 steps (a Python number passed where a tensor
    # belongs): slow again and again, not just the first step
    retracing = _timeline_of(
        BenchConfig(
            preset="mlp", batch_size=16, steps=60, device="cpu", fault="retrace", fault_at_step=1
        )
    )
    _only_cause(retracing, "tf_function_retracing", "traced again")


@pytest.mark.slow
def test_a_leak_in_a_run_too_short_for_the_sampler_is_seen_in_its_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real leaking run of about 1.5 s at the app's sampling interval (0.25 s) has fewer
    samples than a leak needs; the RSS its step records carry (one per 0.1 s) decides it."""
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path))
    config = BenchConfig(preset="cnn", input_shape=(32, 32, 3), batch_size=16, steps=200,
                         device="cpu", fault="leak", fault_at_step=1)  # fmt: skip
    items = _timeline_of(config, every_s=0.25)  # the app's interval
    steps = [i for k, i in items if k == "step"]
    assert steps and all(isinstance(s.get("rss"), int) for s in steps)
    _only_cause(items, "memory_leak", "RSS grew")


@pytest.mark.slow
def test_a_batch_search_is_neither_a_leak_nor_retracing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real search of the largest batch runs the workload again and again, each run with
    more memory and its own first trace: judged as one run, its memory "grew" and its step 1
    was "traced again" every run. Each run is judged alone."""
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path))
    config = BenchConfig(preset="cnn", input_shape=(32, 32, 3), batch_size=32, steps=40,
                         device="cpu")  # fmt: skip
    tl = telemetry.Timeline()
    find_max_batch(
        current_target(),
        config,
        SearchOptions(None, 512),
        SupervisorOptions(sample_every_s=0.25, guard_mib=0),
        timeline=tl,
    )
    items = [item for _, item in tl.since(0)]
    runs = [i for k, i in items if k == "marker" and i.get("label") == "steady state"]
    assert len(runs) >= 4  # batch 32, 64, 128, 256 (and 512)
    assert telemetry_causes(items) == []


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
    causes = {c.id: c for c in telemetry_causes(items)}
    assert "input_bound" in causes and "0%" in causes["input_bound"].evidence[0].text


def test_the_idle_gpu_between_a_batch_searchs_runs_is_not_input_bound() -> None:
    """Runs that keep the recorded GPU busy while their steps run, with the GPU idle between
    them (the next run compiling): judged run by run, none of them waited for input."""
    api = nvml.ReplayNvml(nvml.load_snapshot(SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json"))
    gpu = nvml.GpuSampler(api)
    assert gpu.open() is None
    idle = gpu.sample()
    gpu.close()
    busy = [{**row, "util": 97} for row in idle]
    items: list[tuple[str, dict[str, Any]]] = []
    t = 0.0
    for _run in range(3):
        items.append(("marker", {"t": t, "label": "compile"}))
        for _ in range(40):  # compiling: the GPU idles
            t += 0.1
            items.append(("sample", {"t": t, "ram_used": 1, "gpus": idle}))
        items.append(("marker", {"t": t, "label": "steady state"}))
        for n in range(12):
            t += 0.1
            items.append(("sample", {"t": t, "ram_used": 1, "gpus": busy}))
            items.append(("step", {"t": t, "step": n + 1, "step_s": 0.1}))
    assert "input_bound" not in [c.id for c in telemetry_causes(items)]
