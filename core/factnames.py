"""The catalogue of fact names: every fact a probe emits is named here once, with its meaning."""

from __future__ import annotations

import re

# name pattern -> meaning. `{i}` is a GPU index (NVML order); units are in the names.
CATALOGUE: dict[str, str] = {
    # --- target interpreter (core/probes/target/probe_tf.py, run by the target Python) ---
    "target.python": "interpreter path that was probed",
    "target.python_version": "target Python version, e.g. '3.11.7'",
    "target.python_implementation": "CPython, PyPy, ...",
    "target.prefix": "sys.prefix of the target",
    "target.is_venv": "the target runs inside a virtualenv (sys.prefix != sys.base_prefix)",
    "target.is_conda": "sys.prefix holds a conda-meta folder",
    "target.platform": "sys.platform / machine of the target",
    "target.env": "relevant environment variables as the target sees them (unset ones absent)",
    "target.pip_nvidia": "pip-installed nvidia-* wheels: list of {name, version, lib_dir}",
    "target.conda_cuda_packages": "conda packages with CUDA libraries in the target prefix",
    "target.pip_ptxas": "ptxas shipped by the nvidia-cuda-nvcc wheel: {path, version}",
    "target.cgroup_memory_limit_mib": "memory cgroup limit seen by the target (None: unlimited)",
    "target.probe_pid": "PID of the probe process (so its own VRAM is not blamed on others)",
    "target.probe_stage": "last stage the target probe reached",
    "target.probe_exit": "how the target probe ended: {returncode, signal, timed_out}",
    "tf.installed": "TensorFlow can be imported in the target",
    "tf.import_error": "the exception raised by `import tensorflow`",
    "tf.version": "tf.__version__",
    "tf.import_s": "seconds `import tensorflow` took",
    "tf.build_info": "tf.sysconfig.get_build_info() as a dict",
    "tf.is_cuda_build": "TF was built with CUDA",
    "tf.build_cuda_version": "CUDA version TF was built against, e.g. '12.5.1'",
    "tf.build_cudnn_version": "cuDNN version (major) TF was built against, e.g. '9'",
    "tf.build_compute_capabilities": "sm_XY / compute_XY list from the build",
    "tf.keras_version": "keras.__version__ as imported by TF",
    "tf.gpu_count": "physical GPUs TensorFlow lists",
    "tf.gpus": "TF's GPUs: list of {name, device_name, compute_capability}",
    "tf.device_error": "exception raised while listing or initialising GPUs",
    "tf.smoke_ok": "a matmul and a conv ran on GPU:0",
    "tf.smoke_error": "the error the GPU smoke test raised",
    "tf.smoke_s": "seconds the GPU smoke test took",
    "tf.loaded_libs": "CUDA/cuDNN/cuBLAS libraries mapped into the target: {name, path, version}",
    # --- NVML (core/probes/nvml/facts.py) ---
    "nvml.status": "ok | library_not_found | driver_not_loaded | version_mismatch | "
    "no_permission | gpu_lost | timeout | error",
    "nvml.error": "the NVML error text when nvml.status is not ok",
    "nvidia.driver_version": "NVIDIA kernel driver version, e.g. '535.104.05'",
    "nvidia.cuda_driver_version": "highest CUDA version the driver supports, e.g. '12.2'",
    "nvml.version": "NVML library version",
    "gpu.count": "GPUs NVML sees",
    "gpu{i}.name": "GPU product name",
    "gpu{i}.uuid": "GPU UUID",
    "gpu{i}.pci_bus_id": "PCI bus id",
    "gpu{i}.compute_capability": "compute capability 'major.minor'",
    "gpu{i}.memory_total_mib": "VRAM total",
    "gpu{i}.memory_used_mib": "VRAM in use (all processes)",
    "gpu{i}.memory_free_mib": "VRAM free",
    "gpu{i}.memory_reserved_mib": "VRAM the driver keeps for itself (NVML v2; in 'used')",
    "gpu{i}.persistence_mode": "persistence mode on",
    "gpu{i}.ecc_enabled": "ECC currently enabled",
    "gpu{i}.ecc_uncorrected_volatile": "uncorrected ECC errors since the driver loaded",
    "gpu{i}.retired_pages": "retired pages {single_bit, double_bit, pending}",
    "gpu{i}.remapped_rows": "rows remapped {correctable, uncorrectable, pending, failed} (Ampere+)",
    "gpu{i}.temperature_c": "GPU temperature",
    "gpu{i}.power_w": "power draw",
    "gpu{i}.utilization_pct": "GPU utilisation",
    "gpu{i}.throttle_reasons": "active clock throttle reasons (names)",
    "gpu{i}.processes": "processes holding VRAM: {pid, used_mib, kind, name, user, cmdline, "
    "is_jupyter_kernel, kernel_id, notebook_server, notebook_path}",
    # --- system (core/probes/system.py) ---
    "os.system": "platform.system()",
    "os.kernel": "kernel release",
    "os.distro": "PRETTY_NAME from /etc/os-release",
    "os.is_wsl": "running under WSL (any version)",
    "os.wsl_version": "1 or 2",
    "os.container": "docker | podman | kubernetes | lxc | container (unknown kind) | none",
    "cpu.model": "CPU model name",
    "cpu.count_logical": "logical CPUs",
    "cpu.has_avx": "CPU advertises AVX",
    "cpu.has_avx2": "CPU advertises AVX2",
    "cpu.has_avx512f": "CPU advertises AVX-512F",
    "mem.total_mib": "system RAM",
    "mem.available_mib": "RAM available now",
    "swap.total_mib": "swap size",
    "swap.used_mib": "swap in use",
    "cgroup.version": "1 or 2",
    "cgroup.memory_limit_mib": "memory cgroup limit of the probed process (None: unlimited)",
    "cgroup.path": "memory cgroup path",
    "vmstat.oom_kill": "kernel OOM kills since boot (/proc/vmstat oom_kill)",
    "oomd.active": "systemd-oomd is running",
    "kernel_log.readable": "the kernel log could be read",
    "kernel_log.source": "how the kernel log was read",
    "kernel_log.oom_kills": (
        "recent OOM kill records of the user's processes: {pid, process, line, kind, rss_kib?}"
    ),
    "kernel_log.own_oom_kills": "how many recent OOM kills were tfdoctor's own capped workers",
    "kernel_log.xid_errors": "recent NVIDIA Xid records: {xid, pci, pid, line}",
    # --- CUDA installs (core/probes/cudalibs.py) ---
    "cuda.ldconfig_libs": "CUDA-family libs in the ldconfig cache: {name, path, version}",
    "cuda.ld_library_path": "LD_LIBRARY_PATH entries",
    "cuda.ld_library_path_libs": "CUDA-family libs in LD_LIBRARY_PATH dirs: {name, path, version}",
    "cuda.extra_libs": "CUDA-family libs in caller-given lib dirs (pip nvidia-* wheels)",
    "cuda.toolkits": "CUDA toolkits under /usr/local and /opt: {path, version}",
    "cuda.nvcc": "nvcc on PATH or in a toolkit: {path, version}",
    "cuda.ptxas": "ptxas found: list of {path, version}",
    "cuda.libdevice": "libdevice.10.bc files found",
    "cuda.runtime_majors": "distinct libcudart majors reachable",
    "cuda.cudnn_majors": "distinct libcudnn majors reachable",
}

_PATTERNS = [
    re.compile("^" + re.escape(p).replace(re.escape("{i}"), r"\d+") + "$") for p in CATALOGUE
]


def is_known(name: str) -> bool:
    """True when `name` matches a catalogued fact name (GPU indexes expanded)."""
    return any(p.match(name) for p in _PATTERNS)


def gpu(i: int, suffix: str) -> str:
    """Name of a per-GPU fact: gpu(0, 'memory_total_mib') -> 'gpu0.memory_total_mib'."""
    name = f"gpu{i}.{suffix}"
    if not is_known(name):
        raise KeyError(f"unknown GPU fact {name!r}")
    return name
