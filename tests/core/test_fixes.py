"""Config fixes applied for real: kernelspecs read by a real ipykernel, conda hooks sourced by
a real shell, hostile values that must not inject, undo to the byte, crash-safe writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfdoctor.core import fixes
from tfdoctor.core.knowledge import catalog

HOSTILE = "a b 'q' \"d\" $(touch PWNED) `touch PWNED2` ; rm -rf x \\ end"


@pytest.fixture
def jupyter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private Jupyter data dir holding one real kernelspec for this Python."""
    data = tmp_path / "jupyter"
    spec_dir = data / "kernels" / "tfd-test"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "TF test kernel",
        "language": "python",
        "env": {"KEEP_ME": "1"},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=1))
    (spec_dir / "logo-32x32.png").write_bytes(b"\x89PNG fake logo")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    monkeypatch.setenv("JUPYTER_PATH", str(data))
    monkeypatch.setenv("TFDOCTOR_STATE_DIR", str(tmp_path / "state"))
    return spec_dir


def kernel_env(kernel_name: str, names: list[str]) -> dict[str, str | None]:
    """Start the kernelspec as Jupyter would and read variables inside the running kernel."""
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name=kernel_name)
    km.start_kernel()
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        code = f"import os, json; print(json.dumps({{k: os.environ.get(k) for k in {names!r}}}))"
        out: list[str] = []
        kc.execute_interactive(
            code,
            timeout=60,
            output_hook=lambda msg: (
                out.append(msg["content"].get("text", "")) if msg["msg_type"] == "stream" else None
            ),
        )
        kc.stop_channels()
        return json.loads("".join(out))
    finally:
        km.shutdown_kernel(now=True)


def test_a_kernelspec_copy_sets_the_variables_in_a_real_kernel(jupyter: Path) -> None:
    original = (jupyter / "kernel.json").read_bytes()
    rec = fixes.apply_to_kernelspec(fixes.plan(["memory_growth", "verbose_tf_logging"]), "tfd-test")
    clone = jupyter.parent / "tfd-test-tfdoctor"
    spec = json.loads((clone / "kernel.json").read_text())
    assert spec["display_name"] == "TF test kernel (tfdoctor)"
    assert spec["env"] == {
        "KEEP_ME": "1",
        "TF_FORCE_GPU_ALLOW_GROWTH": "true",
        "TF_CPP_MIN_LOG_LEVEL": "0",
    }
    assert (clone / "logo-32x32.png").read_bytes() == b"\x89PNG fake logo"
    assert (jupyter / "kernel.json").read_bytes() == original  # the user's kernel untouched
    seen = kernel_env("tfd-test-tfdoctor", ["TF_FORCE_GPU_ALLOW_GROWTH", "KEEP_ME"])
    assert seen == {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "KEEP_ME": "1"}
    # applying again changes nothing; undo removes the copy entirely
    assert fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "tfd-test")["changed"] is False
    assert fixes.undo(rec["id"])["id"] == rec["id"]
    assert not clone.exists()
    with pytest.raises(fixes.FixError, match="nothing to undo"):
        fixes.undo()


def test_in_place_edit_and_undo_to_the_byte(jupyter: Path) -> None:
    path = jupyter / "kernel.json"
    original = path.read_bytes()
    fixes.apply_to_kernelspec(fixes.plan(["pick_gpu"], {"gpu": "1"}), "tfd-test", in_place=True)
    env = json.loads(path.read_text())["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    fixes.apply_to_kernelspec(fixes.plan(["unset_cuda_visible_devices"]), "tfd-test", in_place=True)
    assert "CUDA_VISIBLE_DEVICES" not in json.loads(path.read_text())["env"]
    fixes.undo()
    fixes.undo()
    assert path.read_bytes() == original
    assert [r["undone"] for r in fixes.history()] == [True, True]


def test_undo_never_overwrites_an_edit_made_since_the_apply(jupyter: Path) -> None:
    path = jupyter / "kernel.json"
    original = path.read_bytes()
    rec = fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "tfd-test", in_place=True)
    spec = json.loads(path.read_text())
    spec["display_name"] = "renamed by the user after the fix"
    edited = json.dumps(spec, indent=1).encode()
    path.write_bytes(edited)
    with pytest.raises(fixes.FixError, match="changed after tfdoctor wrote it"):
        fixes.undo()
    assert path.read_bytes() == edited  # the user's edit is untouched
    assert [r["undone"] for r in fixes.history()] == [False]
    done = fixes.undo(force=True)
    assert path.read_bytes() == original
    (copy,) = done["kept_edited"]
    assert Path(copy).read_bytes() == edited and Path(copy).parent == path.parent
    assert rec["id"] in copy and [r["undone"] for r in fixes.history()] == [True]


def test_a_broken_kernel_json_is_refused_and_left_alone(jupyter: Path) -> None:
    path = jupyter / "kernel.json"
    path.write_text('{"argv": ["python", ')
    with pytest.raises(fixes.FixError, match="not valid JSON"):
        fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "tfd-test", in_place=True)
    assert path.read_text() == '{"argv": ["python", '
    with pytest.raises(fixes.FixError, match="no Jupyter kernelspec named"):
        fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "nope")


def test_a_read_only_kernelspec_folder_is_refused(tmp_path: Path, jupyter: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(ro)], capture_output=True).returncode:
        pytest.skip("cannot mount a file system here (not root)")
    try:
        spec_dir = ro / "kernels" / "ro-kernel"
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({"argv": ["python"], "env": {}}))
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        os.environ["JUPYTER_PATH"] = f"{ro}{os.pathsep}{os.environ['JUPYTER_PATH']}"
        before = (spec_dir / "kernel.json").read_bytes()
        with pytest.raises(fixes.FixError, match="cannot write"):
            fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "ro-kernel", in_place=True)
        assert (spec_dir / "kernel.json").read_bytes() == before
        assert fixes.history() == []
        # the default (a copy in the user's own folder) works for a read-only system kernel
        fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "ro-kernel")
        assert (jupyter.parent / "ro-kernel-tfdoctor" / "kernel.json").exists()
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def bash(script: str, cwd: Path) -> str:
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, capture_output=True, text=True, check=True, timeout=30
    ).stdout


def test_conda_hooks_set_and_restore_in_a_real_shell(tmp_path: Path, jupyter: Path) -> None:
    env = tmp_path / "envs" / "tf"
    (env / "conda-meta").mkdir(parents=True)
    plan = fixes.plan(["memory_growth", "unset_cuda_visible_devices"])
    fixes.apply_to_conda(plan, env)
    act = env / "etc/conda/activate.d/tfdoctor.sh"
    deact = env / "etc/conda/deactivate.d/tfdoctor.sh"
    out = bash(
        f"export CUDA_VISIBLE_DEVICES=-1; unset TF_FORCE_GPU_ALLOW_GROWTH; . '{act}'; "
        'echo "in:${TF_FORCE_GPU_ALLOW_GROWTH}:${CUDA_VISIBLE_DEVICES-unset}"; '
        f". '{deact}'; "
        'echo "out:${TF_FORCE_GPU_ALLOW_GROWTH-unset}:${CUDA_VISIBLE_DEVICES-unset}"',
        tmp_path,
    )
    assert out.split() == ["in:true:unset", "out:unset:-1"]
    fixes.undo()
    assert not act.exists() and not deact.exists()
    assert not (env / "etc").exists()  # the folders it created went too
    with pytest.raises(fixes.FixError, match="not a conda environment"):
        fixes.apply_to_conda(plan, tmp_path)


def test_hostile_values_cannot_inject(tmp_path: Path, jupyter: Path) -> None:
    plan = fixes.Plan(("test",), {"TFD_HOSTILE": HOSTILE})
    env = tmp_path / "envs" / "x"
    (env / "conda-meta").mkdir(parents=True)
    fixes.apply_to_conda(plan, env)
    sh = tmp_path / "fix.sh"
    fixes.apply_to_env_file(plan, sh)
    for script in (env / "etc/conda/activate.d/tfdoctor.sh", sh):
        out = bash(f". '{script}'; printf %s \"$TFD_HOSTILE\"", tmp_path)
        assert out == HOSTILE
    assert not list(tmp_path.glob("PWNED*"))
    fixes.apply_to_kernelspec(plan, "tfd-test")
    assert kernel_env("tfd-test-tfdoctor", ["TFD_HOSTILE"]) == {"TFD_HOSTILE": HOSTILE}
    preamble = fixes.preamble_text(plan)
    ns: dict[str, object] = {}
    exec(compile(preamble, "preamble", "exec"), ns)  # the notebook cell, run for real
    assert os.environ.pop("TFD_HOSTILE") == HOSTILE
    with pytest.raises(fixes.FixError, match="not a plain value"):
        fixes.plan(["pick_gpu"], {"gpu": "0; rm -rf /"})
    with pytest.raises(fixes.FixError, match="True or False"):
        fixes.plan(["xla_toggle"], {"jit": "__import__"})  # no names into Python code


CRASHER = """
import sys
from tfdoctor.core import fixes
i = 0
while True:
    gpu = "0" if i % 2 else "1"
    fixes.apply_to_kernelspec(fixes.plan(["pick_gpu"], {"gpu": gpu}), "tfd-test", in_place=True)
    i += 1
    if i == 3:
        print("running", flush=True)
"""


def test_a_kill_in_the_middle_of_an_apply_leaves_the_old_or_the_new_file(jupyter: Path) -> None:
    path = jupyter / "kernel.json"
    for delay in (0.05, 0.13, 0.31):
        proc = subprocess.Popen([sys.executable, "-c", CRASHER], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "running\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        spec = json.loads(path.read_text())  # whole JSON, never half a file
        assert spec["env"]["CUDA_VISIBLE_DEVICES"] in ("0", "1")
    # the undo log may end in a torn line: it is skipped, the complete records stay usable
    recs = fixes.history()
    assert recs and all(r["fixes"] == ["pick_gpu"] for r in recs)
    fixes.undo()
    assert json.loads(path.read_text())["env"]["CUDA_VISIBLE_DEVICES"] in ("0", "1")


def test_only_config_fixes_apply_and_unknown_ones_are_named() -> None:
    with pytest.raises(fixes.FixError, match="code fix"):
        fixes.plan(["stream_tf_data"])
    with pytest.raises(fixes.FixError, match="unknown fix"):
        fixes.plan(["make_it_work"])
    p = fixes.plan(["memory_limit"], {"memory_limit_mb": "6000"})
    assert "memory_limit=6000" in p.preamble and not p.env
    assert all(f.risk and f.undo for f in catalog.fixes().values() if f.applicable)


def test_cli_apply_history_undo_and_bad_input(tmp_path: Path, jupyter: Path) -> None:
    tfd = str(Path(sys.executable).with_name("tfdoctor"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([tfd, "fixes", *args], capture_output=True, text=True, timeout=60)

    ok = run("apply", "async_allocator", "--kernel", "tfd-test")
    assert ok.returncode == 0 and "undo" in ok.stdout, ok.stderr
    assert "applied" in run("history").stdout
    assert run("undo").returncode == 0
    for args in (
        ["apply", "stream_tf_data", "--kernel", "tfd-test"],
        ["apply", "pick_gpu", "--set", "gpu", "--kernel", "tfd-test"],
        ["apply", "memory_growth", "--conda", str(tmp_path)],
        ["undo"],
    ):
        bad = run(*args)
        assert bad.returncode == 2, args
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_code_fixes_carry_code_that_compiles_and_show_prints_it() -> None:
    known = catalog.fixes()
    code = [f for f in known.values() if f.kind == "code"]
    assert code and all(f.snippet for f in code)
    for f in code:
        compile(f.snippet, f.id, "exec")
    tfd = str(Path(sys.executable).with_name("tfdoctor"))
    out = subprocess.run([tfd, "fixes", "show", "gradient_accumulation"], capture_output=True,
                         text=True, timeout=60).stdout  # fmt: skip
    assert "gradient_accumulation_steps" in out


def test_environment_fixes_are_exact_commands_for_this_setup() -> None:
    from tfdoctor.core.model import Fact, Facts

    facts = Facts(
        [
            Fact("target.python", "/home/ana/my env/bin/python", "t"),
            Fact("tf.version", "2.17.0", "t"),
            Fact("tf.build_cuda_version", "12.3", "t"),
            Fact("nvidia.driver_version", "470.82.01", "t"),
            Fact(
                "target.pip_nvidia",
                [{"name": "nvidia-cudnn-cu11"}, {"name": "nvidia-cublas-cu12"}],
                "t",
            ),
        ]
    )
    assert fixes.commands_for("install_tf_and_cuda", facts) == [
        "'/home/ana/my env/bin/python' -m pip install 'tensorflow[and-cuda]==2.17.0'"
    ]
    (driver,) = fixes.commands_for("upgrade_driver", facts)
    assert ">= 525.60.13" in driver and "470.82.01" in driver
    assert fixes.commands_for("remove_conflicting_cuda", facts) == [
        "'/home/ana/my env/bin/python' -m pip uninstall -y nvidia-cudnn-cu11"
    ]
    assert fixes.commands_for("install_tensorflow") == [
        "python -m pip install 'tensorflow[and-cuda]'"
    ]


def test_stop_process_never_touches_init_itself_its_parents_or_other_users() -> None:
    import psutil

    me = psutil.Process()
    for pid in (1, me.pid, me.ppid()):
        with pytest.raises(fixes.FixError, match=r"init|tfdoctor itself"):
            fixes.stop_process(pid, gpu_pids={pid})
    other = subprocess.Popen(["sleep", "60"], user=65534) if os.geteuid() == 0 else None
    try:
        if other is not None:
            with pytest.raises(fixes.FixError, match="another user"):
                fixes.stop_process(other.pid, gpu_pids={other.pid})
            assert other.poll() is None
            assert "SIGTERM" in fixes.stop_process(other.pid, gpu_pids={other.pid}, other_user=True)
    finally:
        if other is not None:
            other.kill()
            other.wait(5)


def test_stopping_a_real_kernel_and_a_plain_process() -> None:
    """A Jupyter kernel started as Jupyter does is asked to shut down on its own channels;
    any other process gets SIGTERM; both exit."""
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    km.kernel_cmd = None
    km.start_kernel()
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        kc.stop_channels()
        pid = km.provisioner.process.pid  # type: ignore[union-attr]
        msg = fixes.stop_process(pid)
        assert "shut down" in msg and "exited" in msg
        # a zombie leader is reaped only once its last thread is gone (Linux delays it), so
        # the parent may see it alive for a moment after it has exited
        deadline = time.monotonic() + 10
        while km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not km.is_alive()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # not a kernel, and NVML does not show it on a GPU (no GPU here): refused
    with pytest.raises(fixes.FixError, match="not a Jupyter kernel"):
        fixes.stop_process(sleeper.pid)
    assert sleeper.poll() is None
    # the same process as NVML would list it holding GPU memory: stopped with SIGTERM
    msg = fixes.stop_process(sleeper.pid, gpu_pids={sleeper.pid})
    assert "SIGTERM" in msg and "its GPU memory is free" not in msg
    assert sleeper.wait(5) == -signal.SIGTERM
    with pytest.raises(fixes.FixError, match="no process"):
        fixes.stop_process(sleeper.pid + 10_000_000)


def test_a_damaged_undo_log_or_backup_is_said_not_obeyed(jupyter: Path) -> None:
    from tfdoctor.core.paths import state_dir

    path = jupyter / "kernel.json"
    original = path.read_bytes()
    first = fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "tfd-test", in_place=True)
    log = state_dir() / "undo.jsonl"
    with log.open("ab") as fh:  # a torn last line (a kill mid-write) and a nested bomb
        fh.write(b"[" * 100_000 + b"\n" + b'{"id": "torn", "changes": [')
    second = fixes.apply_to_kernelspec(fixes.plan(["pick_gpu"], {"gpu": "0"}), "tfd-test",
                                       in_place=True)  # fmt: skip
    assert [r["id"] for r in fixes.history()] == [first["id"], second["id"]]  # not swallowed
    backup = Path(second["changes"][0]["backup"])
    backup.write_bytes(b"corrupted")
    with pytest.raises(fixes.FixError, match="damaged"):
        fixes.undo()
    assert b"CUDA_VISIBLE_DEVICES" in path.read_bytes()  # nothing was written back
    backup.unlink()
    with pytest.raises(fixes.FixError, match="cannot be read"):
        fixes.undo()
    log.unlink()
    log.mkdir()
    with pytest.raises(fixes.FixError, match="undo log"):
        fixes.history()
    log.rmdir()
    assert original  # the original kernel.json is what the first backup holds


def test_a_read_only_kernel_json_needs_force(jupyter: Path) -> None:
    path = jupyter / "kernel.json"
    path.chmod(0o444)
    before = path.read_bytes()
    with pytest.raises(fixes.FixError, match="read-only"):
        fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "tfd-test", in_place=True)
    assert path.read_bytes() == before
    fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "tfd-test", in_place=True, force=True)
    assert b"TF_FORCE_GPU_ALLOW_GROWTH" in path.read_bytes()
    assert path.stat().st_mode & 0o777 == 0o444  # its mode is kept


@pytest.mark.parametrize(
    "mine", ["# mine\nexport A=1\n", "export A=1", ""], ids=["nl", "no nl", "empty"]
)
def test_an_existing_env_file_keeps_its_lines_and_gets_one_block(
    tmp_path: Path, jupyter: Path, mine: str
) -> None:
    target = tmp_path / "tf.env"
    target.write_text(mine)
    fixes.apply_to_env_file(fixes.plan(["pick_gpu"], {"gpu": "1"}), target)
    first = target.read_text()
    assert first.startswith(mine) and first.count(fixes.ENV_BLOCK_BEGIN) == 1
    assert bash(f". '{target}'; printf %s \"$A:$CUDA_VISIBLE_DEVICES\"", tmp_path) == (
        "1:1" if mine else ":1"
    )
    again = fixes.apply_to_env_file(fixes.plan(["pick_gpu"], {"gpu": "1"}), target)
    assert again["changed"] is False and target.read_text() == first  # idempotent
    fixes.apply_to_env_file(fixes.plan(["pick_gpu"], {"gpu": "0"}), target)  # replaced, not added
    text = target.read_text()
    assert text.count(fixes.ENV_BLOCK_BEGIN) == 1 and "CUDA_VISIBLE_DEVICES=0" in text
    fixes.undo()
    fixes.undo()
    assert target.read_text() == mine  # byte for byte


def test_a_process_that_ignores_sigterm_is_killed_after_the_wait() -> None:
    """The user agreed to stop it: what ignores SIGTERM (stuck in C code, a trapped signal)
    gets SIGKILL after the wait, and the message says so."""
    stubborn = subprocess.Popen(
        [sys.executable, "-c",
         "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "print('ready', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    msg = fixes.stop_process(stubborn.pid, wait_s=1.0, gpu_pids={stubborn.pid})
    assert "SIGTERM" in msg and "SIGKILL" in msg and "exited" in msg
    assert stubborn.wait(5) == -signal.SIGKILL


@pytest.mark.parametrize("target", ["kernel in place", "kernel clone", "conda", "env file"])
def test_fixes_applied_one_after_another_or_at_once_all_stay(
    tmp_path: Path, jupyter: Path, target: str
) -> None:
    """A second fix keeps the first one's settings, and ten applies started at the same
    moment (the lock serializes them; each reads the file under it) lose none."""
    conda = tmp_path / "envs" / "tf"
    (conda / "conda-meta").mkdir(parents=True)
    env_file = tmp_path / "tf.env"
    args = {
        "kernel in place": ["--kernel", "tfd-test", "--in-place"],
        "kernel clone": ["--kernel", "tfd-test"],
        "conda": ["--conda", str(conda)],
        "env file": ["--env-file", str(env_file)],
    }[target]
    names = [f"TFD_V{i}" for i in range(10)]

    def apply(i: int) -> subprocess.Popen[str]:
        code = (  # a one-variable fix of its own: plan() needs a catalog fix, so go below it
            "from tfdoctor.core import fixes\nfrom tfdoctor.core.fixes import apply as a\n"
            f"p = fixes.Plan(('fix{i}',), {{'{names[i]}': '{i}'}})\n"
            f"args = {args!r}\n"
            "if args[0] == '--kernel': a.apply_to_kernelspec(p, args[1], in_place=len(args) > 2)\n"
            "elif args[0] == '--conda': a.apply_to_conda(p, args[1])\n"
            "else: a.apply_to_env_file(p, args[1])\n"
        )
        return subprocess.Popen([sys.executable, "-c", code], text=True, stderr=subprocess.PIPE)

    procs = [apply(i) for i in range(10)]  # at the same moment
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    if target.startswith("kernel"):
        name = "tfd-test" if target == "kernel in place" else "tfd-test-tfdoctor"
        spec = json.loads((jupyter.parent / name / "kernel.json").read_text())
        got = {k: v for k, v in spec["env"].items() if k.startswith("TFD_V")}
    else:
        script = conda / "etc/conda/activate.d/tfdoctor.sh" if target == "conda" else env_file
        out = bash(
            f". '{script}'; " + "; ".join(f'printf "%s=%s\\n" {n} "${n}"' for n in names), tmp_path
        )
        got = dict(line.split("=", 1) for line in out.splitlines() if not line.endswith("="))
    assert got == {n: str(i) for i, n in enumerate(names)}, f"lost: {set(names) - set(got)}"
    assert len(fixes.history()) == 10
    for _ in range(10):
        fixes.undo()
    assert fixes.history() and all(r["undone"] for r in fixes.history())
