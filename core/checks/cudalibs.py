"""Checks of the CUDA libraries: what TensorFlow loaded, what else is reachable, XLA."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tfdoctor.core.checks.common import ev, line_ev, tf_present
from tfdoctor.core.checks.registry import CUDALIBS, TARGET, CheckContext, check
from tfdoctor.core.model import Facts, Finding, Severity

S = Severity


def _major(v: Any) -> str | None:
    m = re.match(r"(\d+)", str(v or ""))
    return m.group(1) if m else None


@check(TARGET)
def check_loaded_libs(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    """The cuDNN/CUDA actually mapped into TF vs what the build expects."""
    libs = facts.value("tf.loaded_libs") or []
    evidence_lines = line_ev(ctx.lines("cudnn_version_mismatch"))
    for kind, build_fact, prefix in (
        ("cuDNN", "tf.build_cudnn_version", "libcudnn.so"),
        ("CUDA runtime", "tf.build_cuda_version", "libcudart.so"),
    ):
        want = _major(facts.value(build_fact))
        loaded = [lib for lib in libs if str(lib.get("name", "")).startswith(prefix)]
        wrong = [lib for lib in loaded if want and _major(lib.get("version")) not in (want, None)]
        got = wrong[0].get("version") if wrong else "?"
        where = wrong[0].get("path") if wrong else "see the log lines"
        if wrong or (kind == "cuDNN" and evidence_lines):
            yield Finding(
                f"cuda.loaded_{prefix.split('.')[0][3:]}_mismatch",
                S.ERROR,
                f"TensorFlow loaded {kind} {got} but was built for {facts.value(build_fact)}",
                f"The {kind} library TensorFlow actually loaded ({where})"
                " is a different major version than the one it was built with. Expect "
                "'DNN library is not found', 'Loaded runtime CuDNN library ... but source was "
                "compiled with', or crashes. Usually an older copy earlier in LD_LIBRARY_PATH "
                "or a conda cudnn package shadows the right one.",
                (*ev(facts, build_fact, "tf.loaded_libs"), *evidence_lines),
                ("remove_conflicting_cuda", "install_tf_and_cuda"),
                "cuda",
            )


@check(TARGET, CUDALIBS)
def check_multiple_cuda(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    for label, fact, pip_key in (
        ("CUDA runtime", "cuda.runtime_majors", "nvidia-cuda-runtime"),
        ("cuDNN", "cuda.cudnn_majors", "nvidia-cudnn"),
    ):
        majors = {str(m) for m in facts.value(fact) or []}
        for w in facts.value("target.pip_nvidia") or []:
            if str(w.get("name", "")).startswith(pip_key):
                m = _major(w.get("version"))
                if m:
                    majors.add(m)
        wanted = facts.value(
            "tf.build_cudnn_version" if "cudnn" in fact else "tf.build_cuda_version"
        )
        if len(majors) > 1:
            yield Finding(
                f"cuda.multiple_{'cudnn' if 'cudnn' in fact else 'runtime'}_versions",
                S.WARNING,
                f"Several {label} versions are reachable ({', '.join(sorted(majors))})",
                f"More than one {label} major version is installed where TensorFlow can find "
                "it (system libraries, LD_LIBRARY_PATH, CUDA toolkits, pip wheels). Which one "
                "loads depends on search order, a common cause of version-mismatch errors. "
                f"TensorFlow {facts.value('tf.version', '')} wants {label} "
                f"{wanted or '?'}.",
                ev(facts, fact, "cuda.ld_library_path", "cuda.toolkits", "target.pip_nvidia"),
                ("remove_conflicting_cuda",),
                "cuda",
            )


@check(TARGET, CUDALIBS)
def check_xla_tools(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if not tf_present(facts) or facts.value("tf.is_cuda_build") is not True:
        return
    if not facts.value("tf.gpu_count") and not (facts.value("gpu.count") or 0):
        return  # XLA GPU tooling only matters with a GPU
    ptxas = list(facts.value("cuda.ptxas") or [])
    if facts.value("target.pip_ptxas"):
        ptxas.append(facts.value("target.pip_ptxas"))
    libdevice = facts.value("cuda.libdevice") or []
    pip_nvcc = any(
        str(w.get("name", "")).startswith("nvidia-cuda-nvcc")
        for w in facts.value("target.pip_nvidia") or []
    )
    hits = ctx.lines("libdevice_missing") + ctx.lines("ptxas_problem")
    evidence = (*ev(facts, "cuda.ptxas", "target.pip_ptxas", "cuda.libdevice"), *line_ev(hits))
    if not ptxas or not (libdevice or pip_nvcc) or hits:
        missing = [
            w
            for w, ok in (("ptxas", bool(ptxas)), ("libdevice", bool(libdevice or pip_nvcc)))
            if not ok
        ]
        yield Finding(
            "cuda.xla_tools_missing",
            S.WARNING,
            f"XLA cannot find {' and '.join(missing) or 'its CUDA tools'}",
            "XLA (jit_compile=True, and some Keras 3 paths) compiles GPU code at run time with "
            "ptxas and libdevice. Without them it fails with 'libdevice not found' or "
            "'Couldn't invoke ptxas'. Install nvidia-cuda-nvcc-cu12 in this environment or "
            "point XLA_FLAGS=--xla_gpu_cuda_data_dir at a CUDA toolkit.",
            evidence,
            ("set_xla_cuda_data_dir", "xla_toggle"),
            "cuda",
        )
    else:
        yield Finding(
            "cuda.xla_tools_found",
            S.OK,
            "ptxas and libdevice are reachable for XLA",
            "XLA can compile GPU code at run time.",
            evidence,
            (),
            "cuda",
        )
