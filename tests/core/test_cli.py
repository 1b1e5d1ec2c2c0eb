"""The `tfdoctor` command as a user runs it: real subprocesses, real exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BROKEN, HANG, SEGFAULT, SNAPSHOTS, fake_tf_dir

TFDOCTOR = str(Path(sys.executable).parent / "tfdoctor")


def tfdoctor(*args: str, env: dict[str, str] | None = None, timeout: float = 300):  # type: ignore[no-untyped-def]
    full_env = {**os.environ, **(env or {})}
    full_env.pop("QT_QPA_PLATFORM", None) if "--smoke-test" not in args else None
    return subprocess.run(
        [TFDOCTOR, *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )


def assert_no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout


def test_version_and_help_on_every_subcommand() -> None:
    v = tfdoctor("--version")
    assert v.returncode == 0 and v.stdout.startswith("tfdoctor ")
    for sub in ([], ["check"], ["envs"], ["capture"]):
        h = tfdoctor(*sub, "--help")
        assert h.returncode == 0, sub
        assert "usage: tfdoctor" in h.stdout


@pytest.mark.parametrize(
    ("python", "message"),
    [
        ("/no/such/python", "no such file"),
        ("/bin/ls", "not a Python interpreter"),
        ("/tmp", "is a directory"),
    ],
)
def test_bad_python_is_a_one_line_error_with_exit_2(python: str, message: str) -> None:
    p = tfdoctor("check", "--python", python)
    assert p.returncode == 2
    assert_no_traceback(p)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_check_json_on_this_real_machine() -> None:
    p = tfdoctor("check", "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["schema"] == 1
    assert report["target"]["python"]
    assert report["facts"]["tf.installed"]["value"] is True
    assert report["facts"]["tf.version"]["source"] == "target-probe"
    ids = {f["id"]: f for f in report["findings"]}
    # no GPU, no NVIDIA driver here: said usefully, not as an error
    assert ids["nvidia.library_not_found"]["severity"] == "info"
    assert ids["tf.no_gpu"]["severity"] == "info"
    assert ids["tf.installed"]["severity"] == "ok"
    for f in report["findings"]:
        assert set(f) >= {"id", "severity", "title", "explanation", "evidence", "fixes"}
    severities = [f["severity"] for f in report["findings"]]
    order = ["error", "warning", "unknown", "info", "ok"]
    assert severities == sorted(severities, key=order.index)  # worst first


def test_check_human_output_is_grouped_worst_first() -> None:
    p = tfdoctor("check", "--snapshot", str(SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json"))
    assert p.returncode == 1  # the TF here cannot use the replayed GPU: an error
    out = p.stdout
    assert "\033[" not in out  # not a TTY: no colour
    assert "Jupyter kernel (pid 48213" in out
    assert out.index("ERROR") < out.index("WARNING") < out.index("INFO")
    assert "Summary:" in out and "--all" in out


def test_python_without_tensorflow_exits_1_with_a_finding(bare_python: str) -> None:
    p = tfdoctor("check", "--python", bare_python, "--json")
    assert p.returncode == 1
    ids = {f["id"]: f for f in json.loads(p.stdout)["findings"]}
    assert ids["tf.not_installed"]["severity"] == "error"
    assert "install_tensorflow" in ids["tf.not_installed"]["fixes"]


def test_tensorflow_segfaulting_on_import_is_a_finding(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(fake_tf_dir(tmp_path, SEGFAULT))}
    p = tfdoctor("check", "--json", env=env)
    assert p.returncode == 1
    assert_no_traceback(p)
    report = json.loads(p.stdout)
    crash = {f["id"]: f for f in report["findings"]}["tf.crash_on_import"]
    assert "SIGSEGV" in crash["title"]
    assert any("cpu_feature_guard" in e["text"] for e in crash["evidence"])
    assert report["probes"]["target"]["status"] == "crashed"


def test_tensorflow_hanging_on_import_is_stopped(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(fake_tf_dir(tmp_path, HANG))}
    p = tfdoctor("check", "--json", "--timeout", "3", env=env)
    assert p.returncode == 1
    ids = {f["id"] for f in json.loads(p.stdout)["findings"]}
    assert "tf.probe_hang" in ids


def test_bad_snapshot_and_bad_timeout(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    for args in (
        ["--snapshot", str(junk)],
        ["--snapshot", str(tmp_path / "missing.json")],
        ["--timeout", "0"],
    ):
        p = tfdoctor("check", *args)
        assert p.returncode == 2, args
        assert_no_traceback(p)
        assert len(p.stderr.strip().splitlines()) == 1


def test_capture_writes_a_snapshot_that_replays(tmp_path: Path) -> None:
    out = tmp_path / "machine.json"
    p = tfdoctor("capture", str(out), "--note", "test machine")
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    assert data["kind"] == "tfdoctor-nvml-snapshot"
    assert data["system_facts"]["mem.total_mib"]["value"] > 0
    assert "cuda.toolkits" in data["cudalibs_facts"]
    r = tfdoctor("check", "--json", "--snapshot", str(out))
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)["facts"]
    assert facts["mem.total_mib"]["source"].startswith("snapshot:machine.json")
    assert facts["nvml.status"]["value"] == "library_not_found"
    bad = tfdoctor("capture", str(tmp_path / "no" / "dir" / "x.json"))
    assert bad.returncode == 2 and "does not exist" in bad.stderr


def test_envs_lists_this_interpreter_and_kernelspecs() -> None:
    p = tfdoctor("envs", "--json")
    assert p.returncode == 0, p.stderr
    targets = json.loads(p.stdout)["targets"]
    assert targets[0]["kind"] == "current"
    assert any(t["kind"] == "kernelspec" for t in targets)  # ipykernel's own spec
    human = tfdoctor("envs")
    assert "this app's Python" in human.stdout


def test_check_a_kernelspec_by_name_uses_its_env_block(tmp_path: Path) -> None:
    spec = tmp_path / "kernels" / "tf-growth"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "TF (growth)",
                "language": "python",
                "env": {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "CUDA_VISIBLE_DEVICES": "-1"},
            }
        )
    )
    env = {"JUPYTER_PATH": str(tmp_path)}
    p = tfdoctor("check", "--kernel", "tf-growth", "--json", env=env)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["target"]["name"] == "tf-growth"
    seen_env = report["facts"]["target.env"]["value"]
    assert seen_env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert seen_env["CUDA_VISIBLE_DEVICES"] == "-1"
    missing = tfdoctor("check", "--kernel", "nope", env=env)
    assert missing.returncode == 2 and "tf-growth" in missing.stderr


def test_real_cpu_only_tensorflow_build(cpu_only_python: str) -> None:
    """The official tensorflow-cpu wheel: said plainly, an error only where a GPU exists."""
    here = tfdoctor("check", "--python", cpu_only_python, "--json")
    assert here.returncode == 0, here.stderr
    report = json.loads(here.stdout)
    assert report["facts"]["tf.is_cuda_build"]["value"] is False
    cpu = {f["id"]: f for f in report["findings"]}["tf.cpu_only_build"]
    assert cpu["severity"] == "info"
    gpu_box = SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json"
    there = tfdoctor("check", "--python", cpu_only_python, "--json", "--snapshot", str(gpu_box))
    assert there.returncode == 1
    cpu = {f["id"]: f for f in json.loads(there.stdout)["findings"]}["tf.cpu_only_build"]
    assert cpu["severity"] == "error" and "install_gpu_tensorflow" in cpu["fixes"]


ILLEGAL_ADDRESS_ABORT = """
import os, sys
sys.stderr.write("2024-05-02 10:11:12.123400: E tensorflow/stream_executor/cuda/cuda_event.cc:29] "
                 "Error polling for event status: failed to query event: "
                 "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\\n")
sys.stderr.write("2024-05-02 10:11:12.123456: F tensorflow/core/common_runtime/gpu/"
                 "gpu_event_mgr.cc:208] Unexpected Event status: 1\\n")
sys.stderr.flush()
os.abort()
"""


def test_check_explains_a_crashing_probe_with_the_diagnosis_engine(tmp_path: Path) -> None:
    """A real abort(3) after TF's illegal-address lines: the crash finding says SIGABRT, and
    the probe's output through the engine names the GPU fault with its line numbers."""
    env = {"PYTHONPATH": str(fake_tf_dir(tmp_path, ILLEGAL_ADDRESS_ABORT))}
    p = tfdoctor("check", "--json", env=env)
    assert p.returncode == 1
    assert_no_traceback(p)
    found = {f["id"]: f for f in json.loads(p.stdout)["findings"]}
    assert "SIGABRT" in found["tf.crash_on_import"]["title"]
    why = found["log.illegal_memory_access_or_hw"]
    assert why["severity"] == "error"
    assert {e["line"] for e in why["evidence"]} >= {1, 2}


def test_check_explains_an_import_error_naming_a_cuda_library(tmp_path: Path) -> None:
    """TF that cannot import for want of libcudart.so.11.0: missing, or the wrong CUDA major
    installed (the engine cannot tell without the build's facts); either way, the library."""
    env = {"PYTHONPATH": str(fake_tf_dir(tmp_path, BROKEN))}
    p = tfdoctor("check", "--json", env=env)
    assert p.returncode == 1
    logs = [f for f in json.loads(p.stdout)["findings"] if f["id"].startswith("log.")]
    assert logs[0]["severity"] == "error"
    assert {f["id"] for f in logs} >= {"log.missing_cuda_libs", "log.cuda_cudnn_version_mismatch"}
    assert all(any("libcudart.so.11.0" in e["text"] for e in f["evidence"]) for f in logs)
