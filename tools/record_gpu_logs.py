"""Record real failure output from GPU frameworks, each failure made on purpose.

Run on a GPU machine (PyTorch, JAX and CuPy installed):

    python3 tools/record_gpu_logs.py OUTDIR [SCENARIO...]
    python3 tools/record_gpu_logs.py OUTDIR --watch SCENARIO...   (tfdoctor watch over each)

Each scenario runs a small program that fails in a known way (the cause is known because the
program was written to have it) and leaves ``OUTDIR/<name>.txt``: a header naming the command,
the environment it changed, the exit status and the cause, then everything the program printed,
unedited. A scenario that needs the card held by someone else starts a holder process first.
These become diagnosis fixtures (tests/fixtures/logs/real_h200_*.txt) once looked at.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HOLDER = r"""
import sys, time, torch
x = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda")
print("holding", flush=True)
time.sleep(120)
"""

TORCH_OOM = r"""
import torch
x = torch.ones(1, device="cuda")
print("cuda ok:", torch.cuda.get_device_name(0), flush=True)
big = torch.empty(int(300 * 2**30), dtype=torch.uint8, device="cuda")
"""

TORCH_ASK_20 = r"""
import torch
x = torch.ones(1, device="cuda")
print("cuda ok:", torch.cuda.get_device_name(0), flush=True)
y = torch.empty(int(20 * 2**30), dtype=torch.uint8, device="cuda")
"""

TORCH_FRAGMENT = r"""
import torch
free, total = torch.cuda.mem_get_info()
print(f"free {free / 2**30:.1f} GiB of {total / 2**30:.1f} GiB", flush=True)
# 6 MiB tensors share 20 MiB segments: keeping one of each three pins every segment
keep, drop = [], []
try:
    while True:
        for i in range(3):
            t = torch.empty(6 * 2**20, dtype=torch.uint8, device="cuda")
            (keep if i == 0 else drop).append(t)
except torch.OutOfMemoryError:
    pass
drop.clear()
print(f"allocated {torch.cuda.memory_allocated() / 2**30:.1f} GiB, "
      f"reserved {torch.cuda.memory_reserved() / 2**30:.1f} GiB", flush=True)
big = torch.empty(int(8 * 2**30), dtype=torch.uint8, device="cuda")
"""

TORCH_NO_GPU = r"""
import torch
print("torch", torch.__version__, "cuda available:", torch.cuda.is_available(), flush=True)
x = torch.ones(1, device="cuda")
"""

JAX_OOM = r"""
import jax, jax.numpy as jnp
print("devices:", jax.devices(), flush=True)
x = jnp.zeros((200 * 2**30 // 4,), jnp.float32)
x.block_until_ready()
"""

JAX_START = r"""
import jax, jax.numpy as jnp
print("devices:", jax.devices(), flush=True)
x = jnp.ones((4096, 4096)) @ jnp.ones((4096, 4096))
x.block_until_ready()
print("matmul ok", flush=True)
y = jnp.zeros((5 * 2**30 // 4,), jnp.float32)
y.block_until_ready()
print("5 GiB ok", flush=True)
"""

JAX_LEAK = r"""
import jax, jax.numpy as jnp
dev = jax.devices()[0]
history = []
for step in range(10_000):
    history.append(jnp.ones((4 * 2**30 // 4,), jnp.float32) * step)
    history[-1].block_until_ready()
    used = dev.memory_stats()["bytes_in_use"]
    print(f"step {step}: bytes_in_use {used / 2**30:.2f} GiB", flush=True)
"""

CUPY_OOM = r"""
import cupy as cp
print("cupy", cp.__version__, cp.cuda.runtime.getDeviceProperties(0)["name"], flush=True)
x = cp.empty(300 * 2**30, dtype=cp.uint8)
"""

PTXAS_GONE = r"""
import jax, jax.numpy as jnp
print("devices:", jax.devices(), flush=True)
f = jax.jit(lambda a: jnp.tanh(a) @ a.T + 1)
print(f(jnp.ones((512, 512))).block_until_ready()[0, 0], flush=True)
"""

# fills the card: 1 GiB pieces until refused, then 16 MiB pieces until refused, then gives
# back argv[1] GiB (a held value below 0 in SCENARIOS: -1 leaves nothing, -1.5 leaves 0.5 GiB)
FILLER = r"""
import sys, time, torch
held = []
for size in (2**30, 2**24):
    while True:
        try:
            held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            break
for _ in range(int(float(sys.argv[1]) * 64)):
    held.pop()
torch.cuda.empty_cache()
print("holding", flush=True)
time.sleep(120)
"""

TORCH_FIRST_TENSOR = r"""
import torch
print("torch", torch.__version__, flush=True)
x = torch.ones(1, device="cuda")
print("cuda ok", flush=True)
"""

CUPY_ILLEGAL_ADDRESS = r"""
import cupy as cp
src = 'extern "C" __global__ void bad(float* p) { p[threadIdx.x + (1ull << 40)] = 1.0f; }'
bad = cp.RawKernel(src, "bad")
print("launching", flush=True)
bad((1,), (32,), (cp.zeros(1, dtype=cp.float32),))
cp.cuda.runtime.deviceSynchronize()
print("no fault?", flush=True)
"""

# a kernel built for sm_75 machine code only (no PTX to compile for a newer GPU)
OLD_ARCH_ONLY = r"""
import os, shutil, subprocess, sys, tempfile
src = '''
#include <cstdio>
__global__ void k(int* p) { p[0] = 42; }
int main() {
    int* d; cudaMalloc(&d, 4);
    k<<<1, 1>>>(d);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "kernel launch failed: %s (%s)\\n", cudaGetErrorString(e),
                cudaGetErrorName(e));
        return 1;
    }
    e = cudaDeviceSynchronize();
    printf("sync: %s\\n", cudaGetErrorString(e));
    return e != cudaSuccess;
}
'''
d = tempfile.mkdtemp()
open(os.path.join(d, "k.cu"), "w").write(src)
nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
b = subprocess.run([nvcc, "-gencode", "arch=compute_75,code=sm_75", "-o", os.path.join(d, "k"),
                    os.path.join(d, "k.cu")], capture_output=True, text=True)
print("nvcc:", b.returncode, b.stdout + b.stderr, flush=True)
r = subprocess.run([os.path.join(d, "k")], capture_output=True, text=True)
print(r.stdout, end="", flush=True)
print(r.stderr, end="", file=sys.stderr, flush=True)
sys.exit(r.returncode)
"""

# a convolution (cuDNN) and a matrix product (cuBLAS): each library makes its handle and
# workspace on first use, from what the card has left
JAX_CONV = r"""
import jax, jax.numpy as jnp
print("devices:", jax.devices(), flush=True)
x = jnp.ones((8, 64, 56, 56), jnp.float32)
w = jnp.ones((64, 64, 3, 3), jnp.float32)
y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME")
print(y.block_until_ready().shape, flush=True)
"""

JAX_MATMUL = r"""
import jax, jax.numpy as jnp
print("devices:", jax.devices(), flush=True)
a = jnp.ones((2048, 2048), jnp.float32)
print((a @ a).block_until_ready()[0, 0], flush=True)
"""

JAX_FRAGMENTATION = r"""
import jax, jax.numpy as jnp
dev = jax.devices()[0]
print("devices:", jax.devices(), flush=True)
limit = dev.memory_stats()["bytes_limit"]
n = limit // 2**30 - 1  # leave less than 2 GiB at the pool's end
arrs = []
for _ in range(n):
    a = jnp.ones((2**28,), jnp.float32)
    a.block_until_ready()
    arrs.append(a)
for a in arrs[::2]:
    a.delete()
stats = dev.memory_stats()
print(f"pool {limit / 2**30:.2f} GiB; {len(arrs[::2])} GiB freed in 1 GiB pieces; "
      f"in use {stats['bytes_in_use'] / 2**30:.2f} GiB", flush=True)
big = jnp.ones((2**31,), jnp.float32)  # 8 GiB in one piece (the pool's end keeps 2.85)
big.block_until_ready()
print("8 GiB in one piece: ok", flush=True)
"""

JAX_HUGE_INTERMEDIATE = r"""
import jax, jax.numpy as jnp
print("devices:", jax.devices(), flush=True)
f = jax.jit(lambda x: jnp.sum(jnp.exp(x[:, None] * x[None, :])))
print(f(jnp.ones((1_000_000,), jnp.float32)).block_until_ready(), flush=True)
"""

# name -> (code, environment changes, GiB held by another process first, cause)
SCENARIOS: dict[str, tuple[str, dict[str, str], float, str]] = {
    "torch_oom": (TORCH_OOM, {}, 0, "gpu_oom: asked for 300 GiB on a 141 GiB card"),
    "torch_other_process": (
        TORCH_ASK_20,
        {},
        125,
        "gpu_memory_contention: another process holds 125 GiB; this one asks for 20",
    ),
    "torch_fragmentation": (
        TORCH_FRAGMENT,
        {},
        0,
        "fragmentation: segments pinned by one live 6 MiB tensor each; then 8 GiB in one piece",
    ),
    "torch_no_gpu": (
        TORCH_NO_GPU,
        {"CUDA_VISIBLE_DEVICES": ""},
        0,
        "no_gpu_visible: CUDA_VISIBLE_DEVICES is empty",
    ),
    "jax_oom": (JAX_OOM, {}, 0, "gpu_oom: asked for 200 GiB on a 141 GiB card"),
    "jax_other_process": (
        JAX_START,
        {},
        125,
        "gpu_memory_contention: another process holds 125 GiB before JAX preallocates 75%",
    ),
    "jax_leak": (JAX_LEAK, {}, 0, "memory_leak: every step keeps a new 4 GiB array"),
    "jax_no_gpu": (
        JAX_START,
        {"CUDA_VISIBLE_DEVICES": ""},
        0,
        "no_gpu_visible: CUDA_VISIBLE_DEVICES is empty",
    ),
    "jax_no_gpu_cuda_asked": (
        JAX_START,
        {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cuda"},
        0,
        "no_gpu_visible: CUDA_VISIBLE_DEVICES is empty and JAX_PLATFORMS=cuda",
    ),
    "cupy_oom": (CUPY_OOM, {}, 0, "gpu_oom: asked for 300 GiB on a 141 GiB card"),
    "torch_card_full_first_tensor": (
        TORCH_FIRST_TENSOR,
        {},
        -1,
        "gpu_memory_contention: another process filled the card before this one's first tensor",
    ),
    "jax_conv_card_full_half_gib_left": (
        JAX_CONV,
        {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        -1.5,
        "gpu_memory_contention: another process holds all but 0.5 GiB; JAX runs a convolution",
    ),
    "jax_conv_card_full_one_gib_left": (
        JAX_CONV,
        {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        -2,
        "gpu_memory_contention: another process holds all but 1 GiB; JAX runs a convolution",
    ),
    "jax_matmul_card_full_half_gib_left": (
        JAX_MATMUL,
        {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        -1.5,
        "gpu_memory_contention: another process holds all but 0.5 GiB; JAX multiplies matrices",
    ),
    "jax_fragmentation": (
        JAX_FRAGMENTATION,
        {"TF_CPP_MIN_LOG_LEVEL": "0"},
        0,
        "fragmentation: JAX's pool filled with 1 GiB arrays, every other one freed, then 8 GiB "
        "asked for in one piece (the BFC allocator's summary printed: TF_CPP_MIN_LOG_LEVEL=0)",
    ),
    "jax_oom_summary": (
        JAX_OOM,
        {"TF_CPP_MIN_LOG_LEVEL": "0"},
        0,
        "gpu_oom: asked for 200 GiB, with the BFC allocator's summary printed",
    ),
    "cupy_illegal_address": (
        CUPY_ILLEGAL_ADDRESS,
        {},
        0,
        "illegal_memory_access_or_hw: a kernel writes 4 TiB past its buffer",
    ),
    "old_arch_only": (
        OLD_ARCH_ONLY,
        {},
        0,
        "unsupported_gpu_arch: a kernel built for sm_75 machine code only, run on sm_90",
    ),
    "jax_huge_intermediate": (
        JAX_HUGE_INTERMEDIATE,
        {},
        0,
        "gpu_oom: a jitted function whose 10^6 x 10^6 intermediate needs 4 TB",
    ),
    "jax_ptxas_gone": (
        PTXAS_GONE,
        {"PATH": "/usr/bin:/bin", "XLA_FLAGS": "--xla_gpu_cuda_data_dir=/nonexistent"},
        0,
        "xla_ptxas_libdevice (if it fails): no CUDA dir for XLA and no nvcc on PATH",
    ),
}


def start_holder(name: str, held: float) -> subprocess.Popen[str] | None:
    """Another process on the card first: holding `held` GiB, or (below 0) filling it and
    giving back -held - 1 GiB. None when the scenario needs none."""
    if not held:
        return None
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FILLER if held < 0 else HOLDER,
            str(-held - 1 if held < 0 else held),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = holder.stdout.readline() if holder.stdout else ""
    if "holding" not in line:
        print(f"{name}: holder did not start: {line}", flush=True)
    return holder


def run(out: Path, name: str) -> None:
    code, env_changes, held, cause = SCENARIOS[name]
    holder = start_holder(name, held)
    env = {**os.environ, **env_changes}
    start = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        text, rc = r.stdout + r.stderr, str(r.returncode)
    except subprocess.TimeoutExpired as exc:
        # what came before the timeout arrives as bytes even with text=True
        parts = (exc.stdout, exc.stderr)
        text = "".join(
            x.decode("utf-8", "replace") if isinstance(x, bytes) else (x or "") for x in parts
        )
        rc = "timeout"
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()
    header = [
        f"# scenario: {name}",
        f"# cause (made on purpose): {cause}",
        f"# environment changed: {env_changes or 'nothing'}",
        "# another process held: "
        + (
            "nothing"
            if not held
            else f"the whole card but {-held - 1} GiB"
            if held < 0
            else f"{held} GiB"
        ),
        f"# exit status: {rc}, after {time.monotonic() - start:.1f} s",
        "# program:",
        *("#   " + line for line in code.strip().splitlines()),
        "# output (stdout, then stderr):",
    ]
    (out / f"{name}.txt").write_text("\n".join(header) + "\n" + text)
    print(f"{name}: exit {rc}, {len(text)} chars", flush=True)


def watch(out: Path, name: str) -> None:
    """`tfdoctor watch --json --record` over one scenario's program: the verdict it prints
    (``watch_<name>.verdict.json``), its trace, and what the program printed."""
    code, env_changes, held, _cause = SCENARIOS[name]
    holder = start_holder(name, held)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "tfdoctor.gui.entry", "watch", "--json", "--record",
             str(out / f"watch_{name}.trace.jsonl"), "--", sys.executable, "-c", code],
            env={**os.environ, **env_changes},
            capture_output=True,
            text=True,
            timeout=120,
        )  # fmt: skip
        (out / f"watch_{name}.verdict.json").write_text(r.stdout)
        (out / f"watch_{name}.stderr.txt").write_text(r.stderr)
        print(f"watch {name}: exit {r.returncode}", flush=True)
    finally:
        if holder is not None:
            holder.kill()
            holder.wait()


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n in sys.argv[2:] if n != "--watch"] or list(SCENARIOS)
    for name in names:
        try:
            (watch if "--watch" in sys.argv else run)(out, name)
        except Exception as exc:  # noqa: BLE001 - one scenario's failure is its record
            print(f"{name} FAILED: {type(exc).__name__}: {exc}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
