"""Probe a Python environment for TensorFlow; run BY THE TARGET INTERPRETER (stdlib + TF only).

Usage: python probe_tf.py OUTFILE

Writes versioned JSON lines to OUTFILE (never stdout: TensorFlow and site hooks print there),
one record per observation, flushed at once, so a crash or a hang still leaves every stage
reached. Must keep working on old Pythons (3.6+) where tfdoctor is not installed.
"""

import contextlib
import faulthandler
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time

PROTOCOL = 1

RELEVANT_ENV = (
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "CUDA_VISIBLE_DEVICES",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_CPP_MAX_VLOG_LEVEL",
    "XLA_FLAGS",
    "TF_XLA_FLAGS",
    "LD_LIBRARY_PATH",
    "CUDA_DEVICE_ORDER",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_USE_LEGACY_KERAS",
    "CUDA_HOME",
    "CUDA_PATH",
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
)

# Shared-library names worth reporting when mapped into the process.
LIB_RE = re.compile(
    r"/(lib(?:cuda|cudart|cudnn[a-z_]*|cublas(?:Lt)?|cufft|curand|cusolver|cusparse|nccl|nvrtc"
    r"|nvJitLink|nvidia-ml|nvinfer|cupti)\.so[.0-9]*)$"
)

# pip wheels that carry CUDA libraries or tools (not e.g. nvidia-ml-py, the NVML bindings)
CUDA_WHEEL_RE = re.compile(r"^nvidia-(?!ml-py)[a-z0-9_-]+$")

_out = None


def emit(kind, **data):
    rec = {"v": PROTOCOL, "t": round(time.time(), 3), "kind": kind}
    rec.update(data)
    _out.write(json.dumps(rec, default=str) + "\n")
    _out.flush()


def fact(name, value):
    emit("fact", name=name, value=value)


def stage(name):
    emit("stage", stage=name)


def lib_version(path):
    """'libcudnn.so.8.9.7' -> '8.9.7'; the real file behind a symlink carries the full version."""
    real = os.path.basename(os.path.realpath(path))
    m = re.search(r"\.so\.([0-9][0-9.]*)$", real) or re.search(r"\.so\.([0-9][0-9.]*)$", path)
    return m.group(1) if m else None


def probe_python():
    fact("target.python", sys.executable)
    fact("target.python_version", platform.python_version())
    fact("target.python_implementation", platform.python_implementation())
    fact("target.prefix", sys.prefix)
    base = getattr(sys, "base_prefix", sys.prefix)
    fact("target.is_venv", sys.prefix != base)
    fact("target.is_conda", os.path.isdir(os.path.join(sys.prefix, "conda-meta")))
    fact("target.platform", "%s-%s" % (sys.platform, platform.machine()))
    fact("target.env", {k: os.environ[k] for k in RELEVANT_ENV if k in os.environ})


def tool_version(path):
    try:
        out = subprocess.run(
            [path, "--version"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=5,
            universal_newlines=True,
        ).stdout
    except Exception:
        return None
    m = re.search(r"release (\d+\.\d+)(?:, V([0-9.]+))?", out)
    if not m:
        return None
    return m.group(2) or m.group(1)


def probe_packages():
    wheels = []
    try:
        from importlib import metadata  # Python 3.8+

        seen = set()
        for dist in metadata.distributions():
            name = (dist.metadata.get("Name") or "").lower()
            if not CUDA_WHEEL_RE.match(name) or name in seen:
                continue
            seen.add(name)
            wheels.append({"name": name, "version": dist.version})
    except Exception as exc:  # an old Python or a broken dist-info: unknown, not fatal
        emit("warning", text="could not list packages: %r" % (exc,))
    # lib dirs of nvidia wheels (site-packages/nvidia/<pkg>/lib): where TF >= 2.14 looks first
    lib_dirs = []
    ptxas = None
    for entry in sys.path:
        root = os.path.join(entry, "nvidia")
        if not os.path.isdir(root):
            continue
        for sub in sorted(os.listdir(root)):
            d = os.path.join(root, sub, "lib")
            if os.path.isdir(d) and d not in lib_dirs:
                lib_dirs.append(d)
            cand = os.path.join(root, sub, "bin", "ptxas")
            if ptxas is None and os.access(cand, os.X_OK):
                ptxas = {"path": cand, "version": tool_version(cand)}
    for w in wheels:
        short = w["name"][len("nvidia-") :].replace("-", "_")
        short = re.sub(r"_cu\d+$", "", short)
        w["lib_dir"] = next((d for d in lib_dirs if os.sep + short + os.sep in d), None)
    fact("target.pip_nvidia", wheels)
    if ptxas:
        fact("target.pip_ptxas", ptxas)
    meta = os.path.join(sys.prefix, "conda-meta")
    if os.path.isdir(meta):
        pkgs = []
        for fn in sorted(os.listdir(meta)):
            if not fn.endswith(".json"):
                continue
            name_ver = fn[: -len(".json")].rsplit("-", 2)
            if len(name_ver) == 3 and re.match(r"^(cudatoolkit|cudnn|cuda-|libcu|nccl|libnv)", fn):
                pkgs.append({"name": name_ver[0], "version": name_ver[1]})
        fact("target.conda_cuda_packages", pkgs)


def probe_tensorflow():
    # Everything TF logs is evidence: ask for INFO lines even if the user silenced them
    # (their own setting was recorded above in target.env).
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    stage("import_tf")
    t0 = time.time()
    try:
        import tensorflow as tf
    except BaseException as exc:  # ImportError, but also a SystemExit from a broken install
        fact("tf.installed", False)
        fact("tf.import_error", "%s: %s" % (type(exc).__name__, exc))
        fact("tf.import_s", round(time.time() - t0, 3))
        return
    fact("tf.installed", True)
    fact("tf.import_s", round(time.time() - t0, 3))
    fact("tf.version", getattr(tf, "__version__", None))
    stage("build_info")
    try:
        info = dict(tf.sysconfig.get_build_info())
        info = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in info.items()}
        fact("tf.build_info", info)
        fact("tf.is_cuda_build", bool(info.get("is_cuda_build", False)))
        if info.get("cuda_version"):
            fact("tf.build_cuda_version", str(info["cuda_version"]))
        if info.get("cudnn_version"):
            fact("tf.build_cudnn_version", str(info["cudnn_version"]))
        if info.get("cuda_compute_capabilities"):
            fact("tf.build_compute_capabilities", list(info["cuda_compute_capabilities"]))
    except Exception as exc:
        emit("warning", text="get_build_info failed: %r" % (exc,))
    try:  # from metadata: importing Keras would add a second to every check
        from importlib import metadata

        fact("tf.keras_version", metadata.version("keras"))
    except Exception:
        pass
    stage("devices")
    try:
        gpus = tf.config.list_physical_devices("GPU")
    except Exception as exc:
        fact("tf.device_error", "%s: %s" % (type(exc).__name__, exc))
        gpus = []
    rows = []
    for g in gpus:
        row = {"name": g.name}
        try:
            details = tf.config.experimental.get_device_details(g)
            row["device_name"] = details.get("device_name")
            cc = details.get("compute_capability")
            if cc:
                row["compute_capability"] = "%d.%d" % tuple(cc)
        except Exception as exc:
            row["error"] = repr(exc)
        rows.append(row)
    fact("tf.gpu_count", len(gpus))
    fact("tf.gpus", rows)
    if gpus:
        smoke_test(tf, gpus)


def smoke_test(tf, gpus):
    stage("smoke")
    # Memory growth so that the probe takes only what it needs: TF's default grabs nearly all
    # free VRAM, which could push another process on this GPU into an OOM.
    for g in gpus:
        with contextlib.suppress(Exception):
            tf.config.experimental.set_memory_growth(g, True)
    t0 = time.time()
    try:
        with tf.device("/GPU:0"):
            a = tf.random.normal([256, 256])
            b = tf.linalg.matmul(a, a)  # loads cuBLAS
            x = tf.random.normal([1, 32, 32, 3])
            k = tf.random.normal([3, 3, 3, 8])
            y = tf.nn.conv2d(x, k, strides=1, padding="SAME")  # loads cuDNN
            float(tf.reduce_sum(b).numpy()) + float(tf.reduce_sum(y).numpy())
        fact("tf.smoke_ok", True)
    except Exception as exc:
        fact("tf.smoke_ok", False)
        fact("tf.smoke_error", "%s: %s" % (type(exc).__name__, str(exc)[:2000]))
    fact("tf.smoke_s", round(time.time() - t0, 3))


def probe_loaded_libs():
    stage("libs")
    libs = []
    seen = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                m = LIB_RE.search(path)
                if m and path not in seen:
                    seen.add(path)
                    libs.append({"name": m.group(1), "path": path, "version": lib_version(path)})
    except OSError:
        return  # not Linux: unknown
    fact("tf.loaded_libs", libs)


def main():
    global _out
    if len(sys.argv) != 2:
        sys.stderr.write("usage: probe_tf.py OUTFILE\n")
        return 2
    _out = open(sys.argv[1], "a")  # noqa: SIM115 - lives as long as the process
    # A native crash leaves a Python stack on stderr; SIGUSR1 dumps all stacks (hang evidence).
    faulthandler.enable(all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    emit("hello", protocol=PROTOCOL, pid=os.getpid())
    stage("python")
    fact("target.probe_pid", os.getpid())
    probe_python()
    stage("packages")
    probe_packages()
    probe_tensorflow()
    probe_loaded_libs()
    stage("done")
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is recorded: skip TensorFlow's interpreter teardown (about a second of atexit
    # handlers and thread joins that tell us nothing).
    for stream in (sys.stdout, sys.stderr, _out):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
