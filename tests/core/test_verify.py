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
    with pytest.raises(FixError, match="nothing to verify"):
        fixed_run(t, cfg, ["add_swap"])
    with pytest.raises(FixError, match="number of MB"):
        fixed_run(t, cfg, ["memory_limit"], {"memory_limit_mb": "lots"})
