"""Record real NVML snapshots and telemetry traces on a machine with an NVIDIA GPU.

Run on a GPU machine with tfdoctor importable and PyTorch (and optionally JAX) installed:

    python3 tools/record_gpu.py OUTDIR

It leaves, under OUTDIR:
- ``<name>.snapshot.json``: `tfdoctor capture` snapshots (idle; JAX's grab-all preallocation;
  another process holding most of the card);
- ``<name>.trace.jsonl``: telemetry traces (the Sampler's own format) of a watched process:
  ``contention`` (the watched trainer dies of a CUDA OOM while another process grows on the
  same GPU) and ``leak`` (the watched process grows every step until its OOM);
- ``<name>.nvml.json``: the NVML session the Sampler made during each trace, as a snapshot that
  ReplayNvml answers call by call, so tests replay per-process VRAM through the live code;
- ``<name>.stderr.txt``: what each workload printed (PyTorch's real OOM message);
- ``smi.txt``, ``check.json``: nvidia-smi's view and `tfdoctor check --json` for cross-checks.

Nothing here is used by the tests; the files it writes become fixtures once looked at.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tfdoctor.core import telemetry
from tfdoctor.core.probes import nvml
from tfdoctor.core.probes.jupyter import process_info
from tfdoctor.core.probes.nvml.capture import _host_info

GIB = 1 << 30

# The watched "trainer": holds a model's worth, and each step takes a transient block for
# activations and gives it back to the driver (empty_cache), as a framework's step does.
TRAINER = r"""
import sys, time, torch
keep = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda")
step_gib = float(sys.argv[2])
print("trainer ready", flush=True)
for step in range(int(sys.argv[3])):
    act = torch.empty(int(step_gib * 2**30), dtype=torch.uint8, device="cuda")
    act.fill_(1)
    torch.cuda.synchronize()
    print(f"step {step} ok", flush=True)
    del act
    torch.cuda.empty_cache()
    time.sleep(0.4)
print("trainer done", flush=True)
"""

# The neighbour: grows by a block at a time until the card is full, then keeps asking for
# half-GiB pieces, so whatever the trainer gives back between steps is taken (a greedy
# second job on the same GPU), for `hold` seconds.
GROWER = r"""
import sys, time, torch
block, hold = float(sys.argv[1]), float(sys.argv[2])
held, total, end = [], 0.0, None
while end is None or time.monotonic() < end:
    try:
        held.append(torch.empty(int(block * 2**30), dtype=torch.uint8, device="cuda"))
        total += block
        print(f"neighbour holds {total:.1f} GiB", flush=True)
        time.sleep(0.25 if end is None else 0.05)
    except torch.OutOfMemoryError:
        if end is None:
            print(f"neighbour full at {total:.1f} GiB", flush=True)
            end, block = time.monotonic() + hold, 0.5
        time.sleep(0.05)
"""

# A leak: every step keeps what it made (a history list kept across steps).
LEAKER = r"""
import sys, time, torch
history = []
for step in range(10_000):
    history.append(torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda"))
    print(f"step {step} holds {len(history) * float(sys.argv[1]):.1f} GiB", flush=True)
    time.sleep(0.2)
"""

HOLDER = r"""
import sys, time, torch
x = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda")
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
"""

JAX_DEFAULT = r"""
import sys, time, jax, jax.numpy as jnp
x = jnp.ones((1024, 1024)) @ jnp.ones((1024, 1024))
x.block_until_ready()
print("jax ready", jax.devices(), flush=True)
time.sleep(float(sys.argv[1]))
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def start(code: str, *args: object, out: Path) -> subprocess.Popen[bytes]:
    fh = out.open("ab")
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)], stdout=fh, stderr=subprocess.STDOUT
    )


def wait_line(path: Path, text: str, timeout: float = 90) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.2)
    return False


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def snapshot(out: Path, name: str, note: str) -> None:
    try:
        result = nvml.capture(out / f"{name}.snapshot.json", provenance=note)
        log(f"snapshot {name}: {result.status.value}")
    except Exception as exc:  # noqa: BLE001 - record what failed, go on to the next scenario
        log(f"snapshot {name} FAILED: {type(exc).__name__}: {exc}")


class Recording:
    """A Sampler on a RecordingNvml writing a trace; saves the NVML session on close."""

    def __init__(self, out: Path, name: str, note: str, interval_s: float = 0.25) -> None:
        self.out, self.name, self.note = out, name, note
        self.api = nvml.RecordingNvml(nvml.live_api())
        writer = telemetry.TraceWriter(
            out / f"{name}.trace.jsonl", {"interval_s": interval_s, "note": note}
        )
        self.timeline = telemetry.Timeline(writer=writer)
        self.sampler = telemetry.Sampler(self.timeline, interval_s=interval_s, gpu_api=self.api)
        self.sampler.start()
        if self.sampler.gpu_problem:
            log(f"{name}: no GPU series: {self.sampler.gpu_problem}")
        self.pids: set[int] = set()

    def watch(self, pid: int, label: str) -> None:
        self.sampler.watch(pid)
        self.pids.add(pid)
        self.timeline.mark(f"{label} started (pid {pid})", "phase")

    def close(self) -> None:
        self.sampler.stop()
        self.timeline.close()
        procs = {}
        for pid in self.pids:
            info = process_info(pid)
            if info is not None:
                procs[pid] = info
        snap = nvml.Snapshot(
            nvml_calls=tuple(self.api.calls),
            processes=procs,
            recorded_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
            host=_host_info(),
            provenance=f"recorded live by tools/record_gpu.py: {self.note}",
            name=self.name,
        )
        nvml.save_snapshot(snap, self.out / f"{self.name}.nvml.json")
        log(f"{self.name}: {len(snap.nvml_calls)} NVML calls, {self.sampler.samples} samples")


def contention(out: Path) -> None:
    """The watched trainer dies of OOM when a neighbour grows on the same GPU."""
    err = out / "contention.stderr.txt"
    rec = Recording(
        out,
        "contention",
        "watched trainer (20 GiB + 6 GiB per step) vs a neighbour "
        "growing 2 GiB at a time until the card is full, then taking what is freed",
    )
    trainer = start(TRAINER, 20, 6, 200, out=err)
    rec.watch(trainer.pid, "trainer")
    wait_line(err, "trainer ready")
    time.sleep(3)
    grower_err = out / "contention_neighbour.stderr.txt"
    grower = start(GROWER, 2, 30, out=grower_err)
    rec.watch(grower.pid, "neighbour")
    wait_line(grower_err, "neighbour holds", 60)
    deadline = time.monotonic() + 90
    snapped = False
    while time.monotonic() < deadline and trainer.poll() is None:
        if not snapped and "full" in grower_err.read_text():
            snapshot(
                out,
                "h100_contention",
                "a trainer holding 20-26 GiB and a neighbour "
                "growing on the same H100 (tools/record_gpu.py contention)",
            )
            snapped = True
        time.sleep(0.25)
    rec.timeline.mark(f"trainer exited {trainer.poll()}", "crash")
    time.sleep(2)
    stop(trainer, grower)
    rec.close()


def leak(out: Path) -> None:
    err = out / "leak.stderr.txt"
    rec = Recording(out, "leak", "watched process keeps 1.5 GiB more every 0.2 s until OOM")
    proc = start(LEAKER, 1.5, out=err)
    rec.watch(proc.pid, "leaker")
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(120)
    rec.timeline.mark(f"leaker exited {proc.poll()}", "crash")
    time.sleep(1.5)
    stop(proc)
    rec.close()


def held(out: Path) -> None:
    """Snapshots: JAX's default preallocation, and a torch process holding most of the card."""
    err = out / "jax.stderr.txt"
    jaxp = start(JAX_DEFAULT, 60, out=err)
    if wait_line(err, "jax ready", 120):
        snapshot(
            out,
            "h100_jax_prealloc",
            "an idle JAX process holding its default "
            "preallocation (75% of VRAM) on an H100 (tools/record_gpu.py held)",
        )
    else:
        log("jax did not start: " + err.read_text(errors="replace")[-2000:])
    stop(jaxp)
    err = out / "holder.stderr.txt"
    holder = start(HOLDER, 70, 60, out=err)
    if wait_line(err, "holding", 60):
        snapshot(
            out,
            "h100_other_process_70gib",
            "a PyTorch process holding 70 GiB of an H100 (tools/record_gpu.py held)",
        )
    stop(holder)


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    which = sys.argv[2:] or ["info", "held", "contention", "leak"]
    if "info" in which:
        for args, name in (
            (["nvidia-smi"], "smi.txt"),
            (["nvidia-smi", "-q"], "smi_q.txt"),
        ):
            try:
                r = subprocess.run(args, capture_output=True, text=True, timeout=60)
                (out / name).write_text(r.stdout + r.stderr)
            except (OSError, subprocess.TimeoutExpired) as exc:
                (out / name).write_text(f"{type(exc).__name__}: {exc}\n")
        snapshot(out, "idle", "an idle GPU (tools/record_gpu.py info)")
        r = subprocess.run(
            [sys.executable, "-m", "tfdoctor.gui.entry", "check", "--json"],
            capture_output=True,
            text=True,
            timeout=150,
        )
        (out / "check.json").write_text(r.stdout)
        probe = [
            "/proc/self/mountinfo",
            "/proc/1/cgroup",
            "/proc/1/comm",
            "/.dockerenv",
            "/run/.containerenv",
            "/sys/class/dmi/id/sys_vendor",
            "/proc/cpuinfo",
        ]
        with (out / "runtime.txt").open("w") as fh:  # how to tell a container from a VM
            for path in probe:
                fh.write(f"== {path}\n")
                try:
                    fh.write(Path(path).read_text(errors="replace")[:4000] + "\n")
                except OSError as exc:
                    fh.write(f"{type(exc).__name__}: {exc}\n")
            try:
                env1 = Path("/proc/1/environ").read_bytes().split(b"\0")
                names = " ".join(e.split(b"=")[0].decode() for e in env1 if e)
            except OSError as exc:
                names = f"{type(exc).__name__}: {exc}"
            fh.write(f"== /proc/1/environ names\n{names}\n")
        log(f"check rc={r.returncode}")
    for name, fn in (("held", held), ("contention", contention), ("leak", leak)):
        if name in which:
            log(f"scenario {name}")
            try:
                fn(out)
            except Exception as exc:  # noqa: BLE001 - one scenario's failure is its record
                log(f"scenario {name} FAILED: {type(exc).__name__}: {exc}")
    (out / "done.json").write_text(
        json.dumps({"env": {k: v for k, v in os.environ.items() if k.startswith("CUDA")}})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
