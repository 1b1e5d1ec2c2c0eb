"""Apply and verify, for real: a run the kernel OOM-kills under a memory cap, and the same run
with the streaming-data fix, side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfdoctor.core.bench import memcg
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.supervisor import SupervisorOptions
from tfdoctor.core.bench.verify import fixed_run, verify
from tfdoctor.core.fixes import FixError
from tfdoctor.core.probes.targetrun import current_target

WHY_NO_MEMCG = memcg.unavailable()


@pytest.mark.slow
@pytest.mark.skipif(WHY_NO_MEMCG is not None, reason=f"no memory cgroup: {WHY_NO_MEMCG}")
def test_streaming_data_fixes_a_host_oom_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path))
    config = BenchConfig(preset="mlp", batch_size=4096, steps=40, device="cpu")
    options = SupervisorOptions(memory_cap_mib=1100, guard_mib=0, stall_s=60)
    v = verify(current_target(), config, ["stream_tf_data"], options=options)
    assert v.before["status"] == "killed" and "host_oom" in v.before["causes"]
    assert v.after["status"] == "completed"
    assert v.fixed
    assert v.after["peak_rss_bytes"] < v.before["peak_rss_bytes"]
    assert any(k == "sample" for k, _ in v.before_telemetry)
    assert any(k == "sample" for k, _ in v.after_telemetry)
    json.dumps(v.to_json())


def test_fixes_become_knobs_and_worker_variables() -> None:
    t = current_target()
    cfg = BenchConfig(batch_size=64)
    t2, c2, notes = fixed_run(
        t, cfg, ["memory_growth", "mixed_precision", "smaller_batch", "verbose_tf_logging"],
        {"batch_size": "24"},
    )  # fmt: skip
    assert (c2.memory_growth, c2.mixed_precision, c2.batch_size) == (True, True, 24)
    assert dict(t2.env)["TF_CPP_MIN_LOG_LEVEL"] == "0"
    assert notes == []
    _, _, notes = fixed_run(t, cfg, ["memory_limit", "add_swap"], {"memory_limit_mb": "3000"})
    assert any("add_swap" in n for n in notes)
    _, halved, notes = fixed_run(t, cfg, ["smaller_batch"])  # nothing measured a size
    assert halved.batch_size == 32 and notes == [
        "smaller_batch: batch size 64 → 32, half the run's, as a test "
        "(no batch search measured the largest that fits)"
    ]
    with pytest.raises(FixError, match="nothing to verify"):
        fixed_run(t, cfg, ["add_swap"])
    with pytest.raises(FixError, match="number of MiB"):
        fixed_run(t, cfg, ["memory_limit"], {"memory_limit_mb": "lots"})


def test_the_comparison_table_and_verdict_are_the_same_for_every_view() -> None:
    from tfdoctor.core.bench.verify import Verification

    died = {"status": "killed", "survived": False, "peak_rss_bytes": 3 << 30, "steps_per_s": 4.5}
    lived = {"status": "completed", "survived": True, "peak_rss_bytes": 0, "steps_per_s": None}
    v = Verification(["stream_tf_data"], died, lived, [], None, None, [], [])  # type: ignore[arg-type]
    rows = {label: (before, after) for label, before, after in v.table(lambda n: f"{n >> 30}G")}
    assert list(rows) == [
        "outcome", "peak VRAM", "peak TF memory", "peak worker RSS", "peak RAM used", "steps/s"
    ]  # fmt: skip
    assert rows["outcome"] == ("killed", "completed")
    assert rows["peak worker RSS"] == ("3G", "-")  # no measurement is no number
    assert rows["steps/s"] == ("4.50", "-")
    assert v.table(str, missing="–")[1] == ("peak VRAM", "–", "–")
    assert v.verdict == "fixed: the run died before and survives with the fix"
    v.before = dict(lived)
    assert v.verdict == "the run survives with the fix"
    v.after = dict(died)
    assert v.verdict == "not fixed: the run still fails with the fix"
