"""Checks turn facts into findings: real target facts here, GPU facts from replayed snapshots."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SNAPSHOTS
from tfdoctor.core import checks, factnames
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Fact, Facts, Finding, ProbeResult, ProbeStatus, Severity
from tfdoctor.core.probes import nvml, system, targetrun


def tf_facts(**over: Any) -> list[Fact]:
    """Target facts as a TF 2.17 CUDA build would report them (values from its wheel)."""
    base: dict[str, Any] = {
        "target.python": "/home/ana/venv/bin/python",
        "target.python_version": "3.11.7",
        "target.env": {},
        "target.pip_nvidia": [],
        "tf.installed": True,
        "tf.version": "2.17.0",
        "tf.import_s": 4.2,
        "tf.is_cuda_build": True,
        "tf.build_cuda_version": "12.3",
        "tf.build_cudnn_version": "8",
        "tf.build_compute_capabilities": ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"],
        "tf.gpu_count": 1,
        "tf.gpus": [{"name": "/physical_device:GPU:0", "compute_capability": "8.6"}],
        "tf.loaded_libs": [],
    }
    base.update(over)
    return [Fact(k, v, "target-probe") for k, v in base.items() if v is not None]


def run(
    facts: Iterable[Fact], snapshot: str | None = None, output: Iterable[str] = ()
) -> dict[str, Finding]:
    all_facts = list(facts)
    probes = {
        "target": ProbeResult("target", ProbeStatus.OK),
        "system": ProbeResult("system", ProbeStatus.OK),
        "cudalibs": ProbeResult("cudalibs", ProbeStatus.OK),
    }
    if snapshot:
        r = nvml.collect_from_snapshot(SNAPSHOTS / snapshot)
        all_facts += r.facts
        probes["nvml"] = r
    else:
        probes["nvml"] = ProbeResult("nvml", ProbeStatus.ABSENT)
    found = checks.run_checks(Facts(all_facts), checks.CheckContext(probes, tuple(output)))
    return {f.id: f for f in found}


def test_every_fix_id_named_by_a_check_is_in_the_catalog() -> None:
    catalog_ids = set(catalog.fixes())
    for snap in sorted(SNAPSHOTS.glob("*.json")):
        for f in run(tf_facts(), snap.name).values():
            assert set(f.fixes) <= catalog_ids, (f.id, f.fixes)


def test_forgotten_jupyter_kernel_is_named_with_its_notebook() -> None:
    found = run(tf_facts(), "rtx3090_forgotten_jupyter_kernel.json")
    held = found["gpu0.vram_held_by_others"]
    assert held.severity is Severity.WARNING
    assert "Jupyter kernel" in held.title
    assert "22.0 GiB" in held.explanation and "pid 48213" in held.explanation
    assert "stop_gpu_process" in held.fixes
    assert found["gpu0.low_free_vram"].severity is Severity.WARNING
    # TF's default grab-all with another process on the GPU is the classic contention setup
    assert found["env.grab_all_with_other_users"].severity is Severity.WARNING
    assert "memory_growth" in found["env.grab_all_with_other_users"].fixes


def test_memory_growth_set_clears_the_grab_all_warning() -> None:
    facts = tf_facts(**{"target.env": {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}})
    found = run(facts, "rtx3090_forgotten_jupyter_kernel.json")
    assert "env.grab_all_with_other_users" not in found
    assert found["env.growth_enabled"].severity is Severity.OK


def test_growth_value_tf_ignores_is_flagged() -> None:
    facts = tf_facts(**{"target.env": {"TF_FORCE_GPU_ALLOW_GROWTH": "True"}})
    found = run(facts, "rtx3090_forgotten_jupyter_kernel.json")
    assert found["env.growth_value_ignored"].severity is Severity.WARNING


def test_old_driver_for_the_tf_build() -> None:
    found = run(tf_facts(**{"tf.gpu_count": 0}), "gtx1080_driver470_cuda114.json")
    old = found["nvidia.driver_too_old"]
    assert old.severity is Severity.ERROR
    assert "470.182.03" in old.title and "525.60.13" in old.explanation
    gone = found["tf.gpu_not_visible"]
    assert "too old" in gone.explanation


def test_maxwell_gpu_unsupported_by_tf_217() -> None:
    found = run(tf_facts(**{"tf.gpu_count": 0, "tf.gpus": []}), "gtx970_maxwell_cc52.json")
    assert found["gpu0.cc_unsupported"].severity is Severity.ERROR
    assert "5.2" in found["gpu0.cc_unsupported"].title
    assert "compute capability 5.2" in found["tf.gpu_not_visible"].explanation


def test_maxwell_gpu_fine_on_tf_216() -> None:
    facts = tf_facts(**{"tf.version": "2.16.1", "tf.gpus": []})
    found = run(facts, "gtx970_maxwell_cc52.json")
    assert found["gpu0.cc_supported"].severity is Severity.OK


def test_blackwell_runs_only_through_ptx_jit_with_known_problems() -> None:
    found = run(tf_facts(**{"tf.version": "2.20.0"}), "rtx5090_blackwell_driver570.json")
    jit = found["gpu0.cc_ptx_jit"]
    assert jit.severity is Severity.ERROR
    assert any("github.com/tensorflow/tensorflow/issues" in e.text for e in jit.evidence)


def test_driver_library_mismatch_says_reboot() -> None:
    found = run(tf_facts(**{"tf.gpu_count": 0}), "driver_library_version_mismatch.json")
    f = found["nvidia.version_mismatch"]
    assert f.severity is Severity.ERROR and "reboot_after_driver_update" in f.fixes


@pytest.mark.parametrize(
    "snapshot", ["v100_ecc_retired_pages_pending.json", "a100_ecc_errors_row_remap_pending.json"]
)
def test_ecc_errors_and_pending_repairs(snapshot: str) -> None:
    found = run(tf_facts(), snapshot)
    assert found["gpu0.ecc_errors"].severity is Severity.ERROR


def test_no_driver_on_this_real_machine_is_informational() -> None:
    found = run(tf_facts(**{"tf.gpu_count": 0}), "real_no_nvidia_driver.json")
    assert found["nvidia.library_not_found"].severity is Severity.INFO
    assert found["tf.no_gpu"].severity is Severity.INFO


def test_cuda_visible_devices_hiding_the_gpu() -> None:
    facts = tf_facts(**{"tf.gpu_count": 0, "target.env": {"CUDA_VISIBLE_DEVICES": "-1"}})
    found = run(facts, "rtx3090_forgotten_jupyter_kernel.json")
    f = found["tf.gpu_not_visible"]
    assert "CUDA_VISIBLE_DEVICES='-1'" in f.explanation
    assert f.fixes == ("unset_cuda_visible_devices",)


def test_missing_libraries_from_tf_log_lines() -> None:
    out = [
        "2022-03-01 12:00:00.000000: W tensorflow/stream_executor/platform/default/"
        "dso_loader.cc:64] Could not load dynamic library 'libcudnn.so.8'; dlerror: "
        "libcudnn.so.8: cannot open",
        "W tensorflow/core/common_runtime/gpu/gpu_device.cc:1850] Cannot dlopen some GPU "
        "libraries. Please make sure the missing libraries mentioned above are installed",
    ]
    facts = tf_facts(**{"tf.gpu_count": 0, "tf.version": "2.15.0"})
    found = run(facts, "rtx3090_forgotten_jupyter_kernel.json", out)
    f = found["tf.gpu_not_visible"]
    assert "libcudnn.so.8" in f.explanation
    assert [e.line for e in f.evidence if e.line] == [1, 2]


def test_tf_214_no_cuda_drivers_notice_on_a_gpu_machine_means_its_cuda_is_missing() -> None:
    """TF 2.14+ prints only "could not find cuda drivers" when libcudart will not load."""
    out = [
        "2024-03-01 12:00:00.000000: I external/local_tsl/tsl/cuda/cudart_stub.cc:31] Could "
        "not find cuda drivers on your machine, GPU will not be used.",
    ]
    facts = tf_facts(**{"tf.gpu_count": 0, "tf.version": "2.16.1"})
    found = run(facts, "rtx3090_forgotten_jupyter_kernel.json", out)
    f = found["tf.gpu_not_visible"]
    assert "could not load the CUDA libraries" in f.explanation
    assert "install_tf_and_cuda" in f.fixes
    assert [e.line for e in f.evidence if e.line] == [1]


def test_cpu_only_build_on_a_gpu_machine_is_an_error() -> None:
    facts = tf_facts(**{"tf.is_cuda_build": False, "tf.gpu_count": 0})
    found = run(facts, "rtx3090_forgotten_jupyter_kernel.json")
    assert found["tf.cpu_only_build"].severity is Severity.ERROR
    # ... and only informational where there is no GPU at all
    assert run(facts)["tf.cpu_only_build"].severity is Severity.INFO


def test_loaded_cudnn_major_differs_from_build() -> None:
    libs = [{"name": "libcudnn.so.8", "path": "/opt/conda/lib/libcudnn.so.8", "version": "8.6.0"}]
    found = run(tf_facts(**{"tf.build_cudnn_version": "9", "tf.loaded_libs": libs}))
    f = found["cuda.loaded_cudnn_mismatch"]
    assert f.severity is Severity.ERROR and "/opt/conda/lib/libcudnn.so.8" in f.explanation


def test_two_cudnn_majors_reachable() -> None:
    facts = [
        *tf_facts(**{"target.pip_nvidia": [{"name": "nvidia-cudnn-cu12", "version": "9.3.0.75"}]}),
        Fact("cuda.cudnn_majors", ["8"], "cudalibs"),
        Fact("cuda.runtime_majors", ["12"], "cudalibs"),
    ]
    found = run(facts)
    assert "8, 9" in found["cuda.multiple_cudnn_versions"].title
    assert "cuda.multiple_runtime_versions" not in found


def test_python_outside_tested_range() -> None:
    found = run(tf_facts(**{"tf.version": "2.15.0", "target.python_version": "3.12.1"}))
    assert found["tf.python_unsupported"].severity is Severity.WARNING


def test_sigill_on_import_means_no_avx() -> None:
    probes = {"target": ProbeResult("target", ProbeStatus.CRASHED, (), "killed by SIGILL")}
    facts = Facts(
        [
            Fact("target.probe_exit", {"returncode": -4, "signal": "SIGILL"}, "t"),
            Fact("target.probe_stage", "import_tf", "t"),
        ]
    )
    found = {f.id: f for f in checks.run_checks(facts, checks.CheckContext(probes, ("x",)))}
    assert "tf_without_avx" in found["tf.crash_illegal_instruction"].fixes


def test_kernel_log_oom_kills_and_xids_from_real_format_lines() -> None:
    lines = [
        "[12345.678901] Out of memory: Killed process 4321 (python3) total-vm:48123456kB, "
        "anon-rss:23456789kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:50000kB "
        "oom_score_adj:0",
        "[23456.000001] NVRM: Xid (PCI:0000:01:00): 79, pid=4321, name=python3, GPU has fallen "
        "off the bus.",
    ]
    facts = Facts(
        [
            Fact("kernel_log.readable", True, "dmesg"),
            Fact("kernel_log.oom_kills", system.parse_oom_kills(lines), "dmesg"),
            Fact("kernel_log.xid_errors", system.parse_xid_errors(lines), "dmesg"),
        ]
    )
    ctx = checks.CheckContext({"system": ProbeResult("system", ProbeStatus.OK)})
    found = {f.id: f for f in checks.run_checks(facts, ctx)}
    assert "python3" in found["system.recent_oom_kills"].evidence[0].text
    assert found["system.xid_errors"].severity is Severity.ERROR  # Xid 79


def test_cgroup_cap_below_ram() -> None:
    facts = Facts(
        [
            Fact("mem.total_mib", 65536, "meminfo"),
            Fact("cgroup.memory_limit_mib", 16384, "cgroup"),
            Fact("swap.total_mib", 0, "meminfo"),
        ]
    )
    ctx = checks.CheckContext(
        {
            "system": ProbeResult("system", ProbeStatus.OK),
            "nvml": ProbeResult("nvml", ProbeStatus.ABSENT),
        }
    )
    found = {f.id: f for f in checks.run_checks(facts, ctx)}
    assert "16.0 GiB" in found["mem.cgroup_limit"].title
    assert found["mem.no_swap"].severity is Severity.INFO


def test_a_check_that_crashes_becomes_an_unknown_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(facts: Facts, ctx: checks.CheckContext) -> list[Finding]:
        raise KeyError("boom")

    monkeypatch.setattr(checks.registry, "REGISTRY", [checks.Check("broken", frozenset(), broken)])
    (f,) = checks.run_checks(Facts(), checks.CheckContext())
    assert f.severity is Severity.UNKNOWN and "internal error" in f.explanation


def test_every_fact_the_real_target_probe_emits_is_catalogued(tmp_path: Path) -> None:
    from tests.conftest import fake_tf_dir

    t = targetrun.current_target()
    t = type(t)(python=t.python, label="x", env=(("PYTHONPATH", str(fake_tf_dir(tmp_path, ""))),))
    r = targetrun.run_probe(t, timeout_s=60)
    assert r.result.facts
    for f in r.result.facts:
        assert factnames.is_known(f.name), f.name


def test_smoke_test_cudnn_failure_with_a_forgotten_kernel_is_contention() -> None:
    """The probe ran, but the GPU smoke test failed: its error and TF's log go through the
    diagnosis engine with the NVML facts, which show another process holding the VRAM."""
    facts = tf_facts(
        **{
            "tf.smoke_ok": False,
            "tf.smoke_error": "UnknownError: Failed to get convolution algorithm. This is "
            "probably because cuDNN failed to initialize",
        }
    )
    out = [
        "2024-03-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_dnn.cc:362] "
        "Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
    ]
    found = run(facts, "rtx3090_forgotten_jupyter_kernel.json", out)
    f = found["log.gpu_memory_contention"]
    assert f.severity is Severity.ERROR
    assert any(e.line == 1 and "CUDNN_STATUS_INTERNAL_ERROR" in e.text for e in f.evidence)
    assert f.fixes


def test_a_healthy_probe_log_repeating_the_no_driver_notice_adds_nothing() -> None:
    real = (
        Path(__file__).parents[1] / "fixtures" / "logs" / "real_no_driver_tf221.txt"
    ).read_text()
    found = run(tf_facts(**{"tf.gpu_count": 0}), output=real.splitlines())
    assert not [k for k in found if k.startswith("log.")]


# Real snapshots of a lent H100 (driver 580.159.04), recorded by tools/record_gpu.py.
H100 = {"tf.gpus": [{"name": "/physical_device:GPU:0", "compute_capability": "9.0"}]}


@pytest.mark.parametrize(
    "snapshot", ["real_h100_idle.json", "real_h100_idle_recorded_without_v2.json"]
)
def test_real_idle_h100_is_not_taken_for_a_shared_gpu(snapshot: str) -> None:
    # NVML's v1 'used' is 480 MiB on this idle card: the driver's reserve, which NVML v2 names
    # (nvidia-smi: 0 MiB); a recording without the v2 call falls back on the estimate
    found = run(tf_facts(**H100), snapshot)
    assert "env.grab_all_with_other_users" not in found
    assert "gpu0.vram_held_by_others" not in found
    assert found["gpu0.free_vram"].title == "79.2 GiB of 79.6 GiB free on NVIDIA H100 80GB HBM3"
    assert found["gpu0.cc_supported"].severity is Severity.OK


def test_real_idle_h200_reads_as_one_free_hopper_card() -> None:
    # a lent H200 (driver 580.159.04, 2026-11-29; tools/record_gpu.py info): NVML's v1 'used'
    # is 615 MiB there with nothing running (nvidia-smi: 0 MiB), the driver's reserve again
    found = run(tf_facts(**H100), "real_h200_idle.json")
    assert "gpu0.vram_held_by_others" not in found
    assert "env.grab_all_with_other_users" not in found
    assert found["gpu0.free_vram"].title.endswith("GiB of 140.4 GiB free on NVIDIA H200")
    assert found["gpu0.cc_supported"].severity is Severity.OK


def test_real_jax_preallocation_is_named_as_held_vram() -> None:
    found = run(tf_facts(**H100), "real_h100_jax_prealloc.json")
    held = found["gpu0.vram_held_by_others"]
    assert held.title == "Other processes hold 60.0 GiB of NVIDIA H100 80GB HBM3's memory"
    assert "python3 (pid 539" in held.explanation
    assert found["env.grab_all_with_other_users"].severity is Severity.WARNING


def test_real_contention_names_both_processes_and_the_little_left() -> None:
    found = run(tf_facts(**H100), "real_h100_contention.json")
    held = found["gpu0.vram_held_by_others"].explanation
    assert "pid 614, user root) holds 58.5 GiB" in held and "pid 589" in held
    assert found["gpu0.low_free_vram"].title.startswith("Only 0.1 GiB of 79.6 GiB")
