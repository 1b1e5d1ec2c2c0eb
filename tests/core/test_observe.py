"""Watching the user's own training (issue 16): a real Jupyter kernel running Keras with the
first cell, killed by a real cgroup OOM; a process that exits normally; the verdict on real
H100 traces; the bounded trace; the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import TRACES
from tfdoctor.core import telemetry
from tfdoctor.core.bench import memcg, observe
from tfdoctor.core.diagnose.engine import diagnose
from tfdoctor.core.diagnose.watch_rules import Ending, preallocated_pool, watched_causes

MIB = 1 << 20
NEEDS_MEMCG = pytest.mark.skipif(memcg.unavailable() is not None, reason="no memory cgroup")

# a Keras fit whose callback keeps every batch's copy of the data (a leak a user writes by
# keeping history): RAM climbs each step until the cgroup's OOM killer ends the kernel
LEAKY_FIT = """
import numpy as np, tensorflow as tf
x = np.random.rand(2048, 256).astype("float32"); y = np.random.rand(2048, 1).astype("float32")
model = tf.keras.Sequential([tf.keras.Input((256,)), tf.keras.layers.Dense(64),
                             tf.keras.layers.Dense(1)])
model.compile("adam", "mse")
kept = []
class Keep(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        kept.append(np.ones((8 << 20,), dtype=np.uint8))  # 8 MiB more every step
model.fit(x, y, batch_size=32, epochs=200, verbose=0, callbacks=[Keep()])
"""


def run_observer(obs: observe.Observer) -> tuple[threading.Thread, list[observe.WatchResult]]:
    out: list[observe.WatchResult] = []
    t = threading.Thread(target=lambda: out.append(obs.start().wait()), daemon=True)
    t.start()
    return t, out


@NEEDS_MEMCG
@pytest.mark.slow
def test_a_real_kernel_killed_by_a_cgroup_oom_is_named_host_oom_with_the_climb(
    tmp_path: Path,
) -> None:
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    cg = memcg.MemoryCgroup(1200 * MIB)
    try:
        pid = km.provisioner.process.pid  # type: ignore[union-attr]
        (cg.path / "cgroup.procs").write_text(str(pid))
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        tf_file = tmp_path / "tf.jsonl"
        reply = kc.execute_interactive(observe.first_cell(tf_file), timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
        watched = observe.resolve(pid=pid)
        assert watched.label.startswith("Jupyter kernel")
        trace = tmp_path / "watch.trace.jsonl"
        obs = observe.Observer(watched, record=trace, interval_s=0.1, tf_file=tf_file)
        thread, out = run_observer(obs)
        kc.execute(LEAKY_FIT)
        thread.join(240)
        assert out, "the watch did not end"
        result = out[0]
        kc.stop_channels()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        cg.close()
    assert result.ending.how == "vanished"
    assert result.ending.oom_kill_line and str(pid) in result.ending.oom_kill_line
    assert result.causes and result.causes[0].id == "host_oom", result.causes
    said = " ".join(e.text for e in result.causes[0].evidence)
    assert "its memory cgroup used" in said and "RSS" in said
    # the trace on disk shows the climb, and TensorFlow's own steps from the first cell
    _, items = telemetry.read_bounded_trace(trace)
    rss = [i["rss"][str(pid)] for k, i in items if k == "sample" and str(pid) in i.get("rss", {})]
    assert len(rss) > 10 and max(rss) - rss[0] > 400 * MIB
    steps = [i for k, i in items if k == "step"]
    assert len(steps) > 5 and all(s["t"] >= 0 for s in steps)
    assert any(k == "marker" and i["label"] == "fit started" for k, i in items)


def test_a_process_that_exits_normally_gets_no_verdict(tmp_path: Path) -> None:
    # long enough to be sampled even when the observer starts slowly on a loaded machine (a
    # one-second job was once gone before the first sample, with two test runs on two cores)
    child = subprocess.Popen(
        [sys.executable, "-c", "x = bytearray(64 << 20); import time; time.sleep(3.0)"]
    )
    watched = observe.Watched(child.pid, "a short job", child=child)
    result = observe.Observer(watched, interval_s=0.05).start().wait()
    assert result.ending.how == "exited" and result.ending.exit_code == 0
    assert result.ending.normal and result.causes == []
    samples = [i for k, i in result.items if k == "sample"]
    rss = [i["rss"][str(child.pid)] for i in samples if str(child.pid) in i.get("rss", {})]
    assert rss and max(rss) > 64 * MIB  # it was really watched


def test_a_watch_stopped_first_says_the_process_still_runs() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        obs = observe.Observer(observe.Watched(child.pid, "sleeper", child=child), interval_s=0.05)
        thread, out = run_observer(obs)
        time.sleep(0.5)
        obs.stop()
        thread.join(30)
        assert out and out[0].ending.how == "running" and out[0].causes == []
        assert child.poll() is None  # watching never touches the process
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    ("trace", "pid", "first"),
    [
        ("real_h100_contention", 589, "gpu_memory_contention"),
        ("real_h100_leak", 598, "memory_leak"),
    ],
)
def test_the_verdict_on_real_h100_traces(trace: str, pid: int, first: str) -> None:
    """Real traces of a lent H100: a trainer killed by a neighbour's growth, and a leak."""
    _, items = telemetry.read_trace(TRACES / f"{trace}.trace.jsonl")
    causes = watched_causes(items, pid, Ending("exited", 1))
    assert causes and causes[0].id == first, [c.id for c in causes]
    said = " ".join(e.text for e in causes[0].evidence)
    if first == "gpu_memory_contention":
        assert "pid 614 grew from 0.0 GiB" in said and "pid 589 held 20.6 GiB" in said
    else:
        assert "grew steadily from 2.0 GiB to 78.5 GiB" in said
    assert watched_causes(items, pid, Ending("exited", 0)) == []  # it ended well: nothing


def test_the_trace_stays_bounded_and_keeps_the_last_stretch(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    w = telemetry.TraceWriter(path, {"interval_s": 0.1}, max_bytes=4096)
    for i in range(2000):
        w.write({"k": "sample", "t": i * 0.1, "ram_used": i})
    w.close()
    rotated = telemetry.rotated_path(path)
    assert path.stat().st_size <= 4096 and rotated.stat().st_size <= 4096
    _, items = telemetry.read_bounded_trace(path)
    values = [i["ram_used"] for _, i in items]
    assert values[-1] == 1999 and values == sorted(values)  # the newest, in order
    assert values[0] > 1000  # older stretches were dropped


def test_cli_watch_a_command_its_json_and_bad_input(tmp_path: Path) -> None:
    tfd = str(Path(sys.executable).with_name("tfdoctor"))
    env_run = {"timeout": 120, "capture_output": True, "text": True}
    p = subprocess.run(
        [tfd, "watch", "--interval-ms", "100", "--", sys.executable, "-c", "print('hi')"],
        **env_run,  # type: ignore[call-overload]
    )
    assert p.returncode == 0, p.stderr
    assert "exited with status 0" in p.stdout and "Nothing to explain" in p.stdout
    p = subprocess.run(
        [tfd, "watch", "--json", "--", sys.executable, "-c", "import sys; sys.exit(3)"],
        **env_run,  # type: ignore[call-overload]
    )
    out = json.loads(p.stdout)
    assert out["ending"]["how"] == "exited" and out["ending"]["exit_code"] == 3
    for args, message in (
        (["--pid", "999999"], "no process 999999"),
        (["--kernel", "nosuchkernel"], "no running Jupyter kernel matches 'nosuchkernel'"),
    ):
        bad = subprocess.run([tfd, "watch", *args], **env_run)  # type: ignore[call-overload]
        assert bad.returncode == 2 and "Traceback" not in bad.stderr
        assert bad.stderr.strip().splitlines() == [f"tfdoctor: {message}"] or message in (
            bad.stderr
        ), bad.stderr
    cell = subprocess.run([tfd, "watch", "--first-cell"], **env_run).stdout  # type: ignore[call-overload]
    compile(cell, "first cell", "exec")  # valid Python
    assert "tfdoctor" not in "".join(
        line for line in cell.splitlines() if line.startswith(("import", "from"))
    )  # stdlib and TensorFlow only: nothing to install in the notebook's Python


def test_tensorflows_own_numbers_from_the_first_cell_reach_the_verdict(tmp_path: Path) -> None:
    """The first cell's records (its exact format: k, wall, pid, device) tailed from its file
    while a real process runs: TF's in-use rising epoch after epoch is a leak, and the OOM it
    reported is named with its message. (TensorFlow's CPU build reports no device memory, so
    the records are written here as the cell writes them on a GPU.)"""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.5); exit(1)"])
    tf_file = tmp_path / "tf.jsonl"
    tf_file.write_text('{"k":"marker","wall":1.0,"pid":1,"label":"an older run"}\n')
    obs = observe.Observer(
        observe.Watched(child.pid, "a notebook", child=child), interval_s=0.05, tf_file=tf_file
    )
    thread, out = run_observer(obs)
    gib = 1 << 30
    with tf_file.open("a") as fh:
        for epoch in range(4):
            used = (2 + epoch) * gib
            for rec in (
                {"k": "tf", "device": {"GPU:0": {"current": used, "peak": used + gib}}},
                {"k": "marker", "label": f"epoch {epoch + 1} done", "category": "phase"},
            ):
                fh.write(json.dumps({**rec, "wall": time.time(), "pid": child.pid}) + "\n")
                fh.flush()
                time.sleep(0.1)
        oom = "OOM: OOM when allocating tensor with shape[512,1024,1024] ... [Op:MatMul]"
        last = {"k": "marker", "label": oom, "category": "oom", "wall": time.time()}
        fh.write(json.dumps({**last, "pid": child.pid}) + "\n")
    thread.join(30)
    result = out[0]
    tf_items = [i for k, i in result.items if k == "tf"]
    assert len(tf_items) == 4 and tf_items[0]["GPU:0"]["current"] == 2 * gib  # as a run's
    assert all(i["t"] >= 0 for k, i in result.items)  # the older run's line was not read
    ids = [c.id for c in result.causes]
    assert ids[:2] == ["gpu_oom", "memory_leak"], ids
    assert "[Op:MatMul]" in result.causes[0].evidence[0].text
    assert "rose from 2.0 GiB to 5.0 GiB over 4 epochs" in result.causes[1].evidence[0].text


def test_the_jupyter_servers_restart_lines_are_found_for_the_kernel(tmp_path: Path) -> None:
    """The server log's own wording (as in the dev corpus's real Jupyter log), for this kernel
    and not another."""
    real = next(
        line
        for line in (TRACES.parent / "corpus" / "dev")
        .glob("*windj007*")
        .__next__()
        .read_text()
        .splitlines()
        if line.startswith("[") and "KernelRestarter" in line
    )
    log = tmp_path / "jupyter.log"
    log.write_text(
        "[I 00:40:01.002 NotebookApp] Kernel started: 9f1c2ab3-1111-2222-3333-444455556666\n"
        "[I 00:41:07.010 NotebookApp] Kernel restarted: 0aa0aa00-9999-8888-7777-666655554444\n"
        f"{real}\n"
        "[I 00:43:11.301 NotebookApp] Kernel restarted: 9f1c2ab3-1111-2222-3333-444455556666\n"
    )
    found = observe.jupyter_restarts("9f1c2ab3-1111-2222-3333-444455556666", (str(log),))
    assert found == [real.strip(), found[-1]] and "9f1c2ab3" in found[-1]


@pytest.mark.parametrize("name", ["real_h100_watch_pid_contention", "real_h100_watch_command_leak"])
def test_the_verdict_tfdoctor_watch_gave_on_a_real_h100_replays_from_its_trace(name: str) -> None:
    """`tfdoctor watch` ran on a lent H100 against the real driver; its recorded trace gives
    the verdict it printed there, through the same rules."""
    said = json.loads((TRACES / f"{name}.verdict.json").read_text())
    _, items = telemetry.read_bounded_trace(TRACES / f"{name}.trace.jsonl")
    e = said["ending"]
    ending = Ending(e["how"], e["exit_code"], e["signal"], e["oom_kill_line"], e["xid_lines"])
    causes = watched_causes(items, said["pid"], ending)
    assert [(c.id, c.confidence) for c in causes] == [
        (c["id"], c["confidence"]) for c in said["causes"]
    ]
    assert [e.text for e in causes[0].evidence] == [
        e["text"] for e in said["causes"][0]["evidence"]
    ]


# A training script of the shape real_h200_jax_leak.txt came from: memory printed each step,
# then the framework's out-of-memory error on stderr, exit 1
LEAK_THEN_OOM = r"""
import sys
for step in range(12):
    print(f"step {step}: bytes_in_use {4 * (step + 1)}.00 GiB", flush=True)
print("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
      "tensor with shape[64,512,512] and type float on /job:localhost/replica:0/task:0/"
      "device:GPU:0 by allocator GPU_0_bfc", file=sys.stderr, flush=True)
sys.exit(1)
"""


def test_a_command_the_watch_starts_is_passed_through_and_its_own_error_explains_it() -> None:
    """On a real H200 a JAX process that leaked until its OOM left the watch with no verdict:
    its VRAM was flat at the 75% JAX takes at start (tests/fixtures/traces/
    real_h200_watch_jax_leak.*). What it printed says why, so the watch reads it."""
    tfd = str(Path(sys.executable).with_name("tfdoctor"))
    p = subprocess.run(
        [tfd, "watch", "--interval-ms", "50", "--", sys.executable, "-c", LEAK_THEN_OOM],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("watching ")  # said before anything the command printed
    printed = [ln for ln in p.stdout.splitlines() if ln.startswith("step ")]
    assert printed == [f"step {i}: bytes_in_use {4 * (i + 1)}.00 GiB" for i in range(12)]
    assert "ResourceExhaustedError: OOM when allocating" in p.stderr  # still where it went
    verdict = p.stdout[p.stdout.index("exited with status 1") :]
    assert "Most likely: Memory grows step after step" in verdict, verdict
    assert "Also: The workload needs more GPU memory than the GPU has" in verdict
    assert "ResourceExhaustedError: OOM when allocating" in verdict  # its evidence, quoted


def test_every_byte_of_a_chatty_command_reaches_the_user_and_it_never_blocks(
    capfd: pytest.CaptureFixture[str],
) -> None:
    # 6 MiB in pieces with carriage returns (a progress bar), more than any pipe buffer
    code = (
        "import sys\n"
        "for i in range(3000):\n"
        "    sys.stdout.write(f'\\r{i:05d} ' + 'x' * 2000); sys.stdout.flush()\n"
        "sys.stderr.write('done\\n')\n"
    )
    child, output = observe.start_command([sys.executable, "-c", code], {"PATH": "/usr/bin"})
    obs = observe.Observer(observe.Watched(child.pid, "chatty", child=child, output=output))
    thread, out = run_observer(obs)
    thread.join(60)
    assert out and out[0].ending.normal and out[0].causes == []
    got = capfd.readouterr()
    assert got.out == "".join(f"\r{i:05d} " + "x" * 2000 for i in range(3000))
    assert got.err.endswith("done\n")


def test_a_process_left_behind_holding_the_output_does_not_hold_the_verdict() -> None:
    # the command starts a helper that inherits its output and outlives it
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen(['sleep', '60'])\n"
        "print(p.pid, flush=True)\n"
        "sys.exit('CUDA out of memory. Tried to allocate 2.00 GiB')\n"
    )
    child, output = observe.start_command([sys.executable, "-c", code], dict(os.environ))
    obs = observe.Observer(observe.Watched(child.pid, "leaves one", child=child, output=output))
    started = time.monotonic()
    thread, out = run_observer(obs)
    thread.join(60)
    try:
        assert out and out[0].ending.exit_code == 1
        assert time.monotonic() - started < 15
        assert out[0].causes and out[0].causes[0].id == "gpu_oom"
    finally:
        for proc in psutil.process_iter(["cmdline"]):
            if proc.info["cmdline"] == ["sleep", "60"]:
                proc.kill()


# `tfdoctor watch --json -- PROGRAM` on a lent H200 (tools/record_gpu_logs.py --watch): the
# trace it recorded and what the program printed replay through the same rules. The first
# cause each gives now, the evidence that says so, and what the watch printed there (before
# the fixes that real run led to, where they differ):
H200_WATCHES = [
    ("jax_leak", "memory_leak", "step 24: bytes_in_use 100.00 GiB", "memory_leak"),
    (
        "torch_other_process",
        "gpu_memory_contention",
        "pid 724 held 125.5 GiB of GPU 0's 140.4 GiB",
        "gpu_memory_contention",
    ),
    (
        "torch_fragmentation",
        "fragmentation",
        "CUDA out of memory. Tried to allocate 8.00 GiB",
        "fragmentation",
    ),
    ("torch_oom", "gpu_oom", "CUDA out of memory. Tried to allocate 300.00 GiB", "gpu_oom"),
    # the kernel log's real Xid 31 for the process, read by the watch there
    (
        "cupy_illegal_address",
        "illegal_memory_access_or_hw",
        "Xid (PCI:0000:00:06): 31, pid=830",
        "illegal_memory_access_or_hw",
    ),
    # another process had filled the card: the first tensor's CUDA context was refused; PyTorch's
    # pointer to the error code's docs read as a second, runtime OOM there
    (
        "torch_card_full_first_tensor",
        "gpu_memory_contention",
        "pid 861 held 139.8 GiB of GPU 0's",
        "gpu_oom",
    ),
]


@pytest.mark.parametrize(("name", "first", "quote", "printed_first"), H200_WATCHES)
def test_watches_of_real_h200_failures_replay_to_their_cause(
    name: str, first: str, quote: str, printed_first: str
) -> None:
    printed = json.loads((TRACES / f"real_h200_watch_{name}.verdict.json").read_text())
    _, items = telemetry.read_bounded_trace(TRACES / f"real_h200_watch_{name}.trace.jsonl")
    e = printed["ending"]
    ending = Ending(e["how"], e["exit_code"], e["signal"], e["oom_kill_line"], e["xid_lines"])
    said = diagnose(TRACES / f"real_h200_watch_{name}.stderr.txt")
    causes = observe.verdict(items, printed["pid"], ending, said)
    assert causes[0].id == first, [(c.id, c.confidence) for c in causes]
    assert printed["causes"][0]["id"] == printed_first  # what it printed there
    assert any(quote in ev.text for ev in causes[0].evidence), causes[0].evidence
    # without its output the watch alone had nothing for the JAX leak: JAX took 75% of the
    # card at its start and held it flat, so VRAM showed nothing (what it printed before)
    if name == "jax_leak":
        before = json.loads((TRACES / "real_h200_watch_jax_leak_before.verdict.json").read_text())
        assert before["causes"] == [] and observe.verdict(items, printed["pid"], ending, None) == []


def test_a_fill_to_the_wall_in_two_seconds_is_not_called_a_leak() -> None:
    # real: the H200 filled with 6 MiB tensors in 2.3 s before its fragmentation OOM; the
    # watch there said "leak" second (0.8); a climb that quick is a start-up taking memory
    printed = json.loads((TRACES / "real_h200_watch_torch_fragmentation.verdict.json").read_text())
    assert [c["id"] for c in printed["causes"]][:2] == ["fragmentation", "memory_leak"]
    _, items = telemetry.read_bounded_trace(
        TRACES / "real_h200_watch_torch_fragmentation.trace.jsonl"
    )
    causes = watched_causes(items, printed["pid"], Ending("exited", 1))
    assert [c.id for c in causes] == ["gpu_oom"]


@pytest.mark.parametrize(
    ("trace", "pid", "pool"),
    [
        ("real_h200_watch_jax_leak", 620, "105.4 GiB of GPU 0's 140.4 GiB (75%) at once"),
        ("real_h200_watch_torch_fragmentation", 778, None),  # grew into the card: no pool
        ("real_h200_watch_torch_oom", 944, None),
        ("real_h100_leak", 598, None),
    ],
)
def test_a_pool_taken_at_start_and_held_flat_is_said_when_nothing_else_is(
    trace: str, pid: int, pool: str | None
) -> None:
    """The real JAX leak's watch had no cause: JAX's pool hid it. The watch then says why the
    VRAM shows nothing and how to watch it again."""
    _, items = telemetry.read_bounded_trace(TRACES / f"{trace}.trace.jsonl")
    said = preallocated_pool(items, pid)
    if pool is None:
        assert said is None
    else:
        assert said is not None and pool in said and "XLA_PYTHON_CLIENT_PREALLOCATE=false" in said
