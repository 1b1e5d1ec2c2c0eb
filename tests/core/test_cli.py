"""The `tfdoctor` command as a user runs it: real subprocesses, real exit codes, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BROKEN, FIXTURES, HANG, SEGFAULT, SNAPSHOTS, fake_tf_dir

TFDOCTOR = str(Path(sys.executable).parent / "tfdoctor")


def tfdoctor(*args: str, env: dict[str, str] | None = None, timeout: float = 300):  # type: ignore[no-untyped-def]
    full_env = {**os.environ, **(env or {})}
    full_env.pop("QT_QPA_PLATFORM", None) if "--smoke-test" not in args else None
    return subprocess.run(
        [TFDOCTOR, *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )


def write_kernelspec(
    root: Path, name: str, env: dict[str, str], display_name: str = "a kernel"
) -> None:
    """A kernelspec under root/kernels (point JUPYTER_PATH at root) running this Python."""
    spec = root / "kernels" / name
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    body = {"argv": argv, "display_name": display_name, "language": "python", "env": env}
    (spec / "kernel.json").write_text(json.dumps(body))


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
    write_kernelspec(
        tmp_path,
        "tf-growth",
        {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "CUDA_VISIBLE_DEVICES": "-1"},
        display_name="TF (growth)",
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


# --------------------------------------------------------------------------- diagnose: one case


def _saved_check(tmp_path: Path, findings: list[Any], **facts: Any) -> Path:
    """A report as `tfdoctor check --json` writes it (the same serialiser)."""
    from tfdoctor.core.model import Fact, Facts, Target
    from tfdoctor.core.scan import CheckReport

    fs = Facts([Fact(k, v, "test") for k, v in facts.items()])
    target = Target(python="/home/ana/my env/bin/python", label="ana's env", kind="path")
    report = CheckReport(target=target, facts=fs, findings=findings, probes={})
    path = tmp_path / "check.json"
    path.write_text(json.dumps(report.to_json(), default=str))
    return path


def _corpus_log(tmp_path: Path, label: str) -> Path:
    from tests.conftest import CORPUS

    for f in sorted(CORPUS.glob("*.txt")):
        head, _, body = f.read_text(errors="replace").partition("\n---\n")
        if f"label: {label}" in head:
            out = tmp_path / f"{label}.log"
            out.write_text(body)
            return out
    raise AssertionError(label)


def test_diagnose_combines_a_log_a_saved_check_and_a_saved_run(tmp_path: Path) -> None:
    from tfdoctor.core.bench.config import BenchConfig
    from tfdoctor.core.bench.supervisor import BenchResult, Outcome
    from tfdoctor.core.model import Cause, Diagnosis, Finding, Severity

    log = _corpus_log(tmp_path, "gpu_oom")
    oom = Finding("log.gpu_oom", Severity.ERROR, "OOM", "", confidence=0.6)
    crowded = Finding("gpu.crowded", Severity.WARNING, "the GPU is crowded", "",
                      fixes=("memory_limit", "pick_gpu"))  # fmt: skip
    check = _saved_check(
        tmp_path,
        [oom, crowded],
        **{
            "gpu.count": 2,
            "gpu0.memory_total_mib": 24576,
            "gpu0.memory_used_mib": 23000,
            "gpu1.memory_total_mib": 24576,
            "gpu1.memory_used_mib": 1000,
        },
    )
    result = BenchResult(
        BenchConfig(),
        Outcome("oom", 1, None, 3.0, "ran out of GPU memory"),
        {"tf_peak_bytes": {"GPU:0": 6 << 30, "CPU:0": 1 << 30}},
        Diagnosis((Cause("gpu_oom", 0.7, "t", "e"),)),
        recommendation={"recommended_batch": 48},
    )
    run = tmp_path / "run.json"
    run.write_text(json.dumps(result.to_json(), default=str))
    p = tfdoctor("diagnose", str(log), "--check", str(check), "--run", str(run), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    top = out["causes"][0]
    assert top["id"] == "gpu_oom"
    # the user's crash is ranked from their log and machine; tfdoctor's run stands apart
    assert top["sources"] == ["crash log", "environment check"]
    assert [(e["id"], e["sources"]) for e in out["experiments"]] == [
        ("gpu_oom", ["reproduced run"])
    ]
    # measured: the freest GPU, its free VRAM capped by the run's TF peak + 25%, the search
    limit = str(min(24576 - 1000 - 512, int((6 << 30) * 1.25) >> 20))
    assert out["measured"] == {"gpu": "1", "memory_limit_mb": limit, "batch_size": "48"}
    fixes = {f["id"]: f for f in out["fixes"]}
    assert fixes["memory_limit"]["params"] == {"memory_limit_mb": limit}
    assert fixes["pick_gpu"]["params"] == {"gpu": "1"}
    human = tfdoctor("diagnose", str(log), "--check", str(check), "--run", str(run), "--no-color")
    assert human.returncode == 0
    assert "seen in: crash log, environment check" in human.stdout
    crash, _, runs = human.stdout.partition("What tfdoctor's own runs showed")
    assert "Your crash" in crash and "seen in: reproduced run" in runs
    assert f"measured: memory_limit_mb={limit}" in human.stdout


def test_diagnose_reads_the_telemetry_of_a_recorded_trace(tmp_path: Path) -> None:
    """GPU samples from a recorded machine (0% utilisation) through the live sampler, on the
    timeline of a training run's steps, written as a trace."""
    from tfdoctor.core import telemetry
    from tfdoctor.core.probes import nvml

    api = nvml.ReplayNvml(nvml.load_snapshot(SNAPSHOTS / "rtx3090_forgotten_jupyter_kernel.json"))
    gpu = nvml.GpuSampler(api)
    assert gpu.open() is None
    rows = gpu.sample()
    gpu.close()
    trace = tmp_path / "run.trace"
    writer = telemetry.TraceWriter(trace, {"source": "test"})
    writer.write({"k": "marker", "t": 1.0, "label": "steady state"})
    for i in range(30):
        t = 1.0 + i * 0.1
        writer.write({"k": "sample", "t": t, "ram_used": 1, "gpus": rows})
        writer.write({"k": "step", "t": t, "step": i + 1, "step_s": 0.1})
    writer.close()
    p = tfdoctor("diagnose", "--trace", str(trace), "--json")
    assert p.returncode == 0, p.stderr
    causes = {c["id"]: c for c in json.loads(p.stdout)["causes"]}
    assert causes["input_bound"]["sources"] == ["telemetry"]
    assert "0%" in causes["input_bound"]["evidence"][0]["text"]


def test_diagnose_recent_reads_the_jupyter_logs_it_finds(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".jupyter").mkdir(parents=True)
    (home / ".jupyter" / "server.log").write_text(
        "[I 10:00:00.000 ServerApp] Kernel started: 1b2c\nKilled\n"
        "[I 10:00:09.000 ServerApp] KernelRestarter: restarting kernel (1/5)\n"
    )
    p = tfdoctor("diagnose", "--recent", "--json", env={"HOME": str(home)})
    assert p.returncode == 0, p.stderr
    causes = {c["id"]: c for c in json.loads(p.stdout)["causes"]}
    assert any(
        e["source"].startswith("Jupyter log") and e["text"] == "Killed"
        for e in causes["host_oom"]["evidence"]
    )


def test_diagnose_exports_the_fixes_with_the_commands_for_the_checked_setup(
    tmp_path: Path,
) -> None:
    from tfdoctor.core.model import Finding, Severity

    no_gpu = Finding("tf.no_gpu_build", Severity.ERROR, "a CPU-only TensorFlow", "",
                     fixes=("install_tf_and_cuda", "memory_growth"))  # fmt: skip
    check = _saved_check(tmp_path, [no_gpu], **{"tf.version": "2.17.0"})
    script = tmp_path / "fix.sh"
    p = tfdoctor("diagnose", "--check", str(check), "--export", str(script))
    assert p.returncode == 0, p.stderr
    text = script.read_text()
    assert "TF_FORCE_GPU_ALLOW_GROWTH" in text
    assert "'/home/ana/my env/bin/python' -m pip install 'tensorflow[and-cuda]==2.17.0'" in text
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    assert os.access(script, os.X_OK)
    ps1 = tmp_path / "fix.ps1"
    assert tfdoctor("diagnose", "--check", str(check), "--export", str(ps1)).returncode == 0
    assert "TF_FORCE_GPU_ALLOW_GROWTH" in ps1.read_text()


def test_diagnose_bad_sources_are_one_line_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"schema": 1}')
    notjson = tmp_path / "x.trace"
    notjson.write_text("hello\n")
    for args in (
        [],
        ["--check", str(tmp_path / "missing.json")],
        ["--check", str(junk)],
        ["--run", str(junk)],
        ["--trace", str(notjson)],
    ):
        p = tfdoctor("diagnose", *args)
        assert p.returncode == 2, args
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert_no_traceback(p)


def test_damaged_data_files_are_a_one_line_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken install (signatures.toml cut short): `diagnose` names the file's problem in
    one line and says to reinstall, exit 2."""
    from tfdoctor.core import cli
    from tfdoctor.core.diagnose import engine
    from tfdoctor.core.knowledge.signatures import SIGNATURES_FILE, load_signatures

    broken = tmp_path / "signatures.toml"
    text = SIGNATURES_FILE.read_text(encoding="utf-8")
    cut = text.index('pattern = "', len(text) // 2) + 20  # a download cut inside a pattern
    broken.write_text(text[:cut], encoding="utf-8")

    def damaged() -> None:
        load_signatures(broken)  # the real loader's refusal

    # the engine loads the shipped knowledge once per process (cached): where it loads it
    monkeypatch.setattr(engine, "default_diagnoser_parts", damaged)
    log = tmp_path / "crash.log"
    log.write_text("Killed\n")
    assert cli.main(["diagnose", str(log)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "signatures.toml" in err[0] and "reinstall" in err[0], err


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--timeout", "nan"),
        ("check", "--timeout", "inf"),
        ("bench", "--watchdog", "nan"),
        ("bench", "--stall", "-inf"),
        ("bench", "--margin", "NaN"),
        ("monitor", "--duration", "nan"),
        ("monitor", "--pid", "0"),
        ("monitor", "--pid", "abc"),
        ("fixes", "stop-process", "0"),
        ("diagnose", "/dev/zero"),
        ("diagnose", "/dev/null"),
    ],
)
def test_numbers_that_never_end_a_wait_and_devices_are_one_line_errors(args: tuple[str]) -> None:
    p = tfdoctor(*args, timeout=60)  # each of these hung or raised before
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == ""
    assert_no_traceback(p)


def test_a_fifo_is_read_to_its_end_or_to_a_limit(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    log = (FIXTURES / "logs" / "real_host_oom_kill.txt").read_bytes()
    writer = subprocess.Popen(["sh", "-c", f"cat > {fifo}"], stdin=subprocess.PIPE)
    assert writer.stdin is not None
    writer.stdin.write(log)
    writer.stdin.close()
    p = tfdoctor("diagnose", str(fifo), "--json", timeout=60)
    writer.wait(10)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["causes"][0]["id"] == "host_oom" and p.stderr == ""
    # a writer that never stops: read up to the limit, said in one line, and then done
    endless = subprocess.Popen(["sh", "-c", f"yes 'I tensorflow/core notice' > {fifo}"])
    try:
        p = tfdoctor("diagnose", str(fifo), timeout=120)
    finally:
        endless.kill()
        endless.wait(10)
    assert p.returncode == 0
    assert p.stderr.strip().endswith("does not end: read its first 256 MiB")


def test_output_files_are_never_overwritten_without_force(tmp_path: Path) -> None:
    script = tmp_path / "fix.sh"
    script.write_text("# the user's own script\n")
    script.chmod(0o600)
    export = ("export-fix", "--fixes", "memory_growth", "--format", "sh", "-o", str(script))
    p = tfdoctor(*export)
    assert p.returncode == 2 and "--force" in p.stderr and len(p.stderr.splitlines()) == 1
    assert script.read_text() == "# the user's own script\n"
    p = tfdoctor(*export, "--force")
    assert p.returncode == 0, p.stderr
    assert "TF_FORCE_GPU_ALLOW_GROWTH" in script.read_text()
    assert script.stat().st_mode & 0o777 == 0o600  # its mode is kept, not made 0755
    fresh = tmp_path / "new.sh"
    assert tfdoctor(*export[:-1], str(fresh)).returncode == 0
    assert fresh.stat().st_mode & 0o777 == 0o755
    for args in (
        ("capture", str(script)),
        ("monitor", "--duration", "0.3", "--record", str(script)),
    ):
        p = tfdoctor(*args)
        assert p.returncode == 2 and "exists" in p.stderr, (args, p.stderr)
        assert "TF_FORCE_GPU_ALLOW_GROWTH" in script.read_text()
    # a device is never replaced by a file, even with --force
    p = tfdoctor("capture", "/dev/null", "--force")
    assert p.returncode == 2 and "not a regular file" in p.stderr
    assert Path("/dev/null").is_char_device()


SECRET = "hf_plantedSecret0123456789"
PROXY_PASSWORD = "pr0xyPassw0rd"


def test_planted_secrets_reach_no_output_unless_asked(tmp_path: Path) -> None:
    write_kernelspec(
        tmp_path,
        "with-secrets",
        {
            "HF_TOKEN": SECRET,
            "HTTPS_PROXY": f"http://alice:{PROXY_PASSWORD}@proxy.example:3128",
            "CUDA_VISIBLE_DEVICES": "-1",
        },
    )
    env = {
        "JUPYTER_PATH": str(tmp_path),
        "WANDB_API_KEY": SECRET,
        "HTTP_PROXY": f"http://alice:{PROXY_PASSWORD}@proxy.example:3128",
    }
    snapshot = tmp_path / "snap.json"
    outputs = {
        "check --json": tfdoctor("check", "--kernel", "with-secrets", "--json", env=env),
        "check": tfdoctor("check", "--kernel", "with-secrets", "--all", env=env),
        "envs --json": tfdoctor("envs", "--json", env=env),
        "capture": tfdoctor("capture", str(snapshot), env=env),
        "bench --json": tfdoctor(
            *("bench", "--kernel", "with-secrets", "--device", "cpu", "--preset", "mlp"),
            *("--steps", "3", "--json"),
            env={**env, "TFDOCTOR_STATE_DIR": str(tmp_path / "state")},
        ),
    }
    for what, p in outputs.items():
        assert p.returncode in (0, 1), (what, p.stderr)
        text = p.stdout + p.stderr + (snapshot.read_text() if what == "capture" else "")
        assert SECRET not in text and PROXY_PASSWORD not in text, what
    # nor what the run keeps on disk (its output, events, stacks)
    kept = [f for f in (tmp_path / "state").rglob("*") if f.is_file()]
    assert kept
    for f in kept:
        data = f.read_bytes()
        assert SECRET.encode() not in data and PROXY_PASSWORD.encode() not in data, f
    report = json.loads(outputs["check --json"].stdout)
    assert report["facts"]["target.env"]["value"]["CUDA_VISIBLE_DEVICES"] == "-1"
    kernel_env = dict(report["target"]["env"])  # the kernelspec's env block, as the target got it
    assert kernel_env["HF_TOKEN"] == "***" and kernel_env["CUDA_VISIBLE_DEVICES"] == "-1"
    assert kernel_env["HTTPS_PROXY"] == "http://alice:***@proxy.example:3128"
    shown = tfdoctor("envs", "--json", "--show-secrets", env=env)
    assert SECRET in shown.stdout  # the user can still ask for the values


def test_diagnose_refuses_a_picture_in_one_line(tmp_path: Path) -> None:
    png = tmp_path / "error.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    p = tfdoctor("diagnose", str(png))
    assert p.returncode == 2
    assert_no_traceback(p)
    assert p.stderr.strip().splitlines() == [
        f"tfdoctor: {png}: is a PNG image, not a text log: copy the error text instead"
    ]
