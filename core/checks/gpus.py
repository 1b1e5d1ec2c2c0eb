"""Checks of the GPUs: seen by TensorFlow, supported compute capability, health."""

from __future__ import annotations

from collections.abc import Iterator

from tfdoctor.core import knowledge
from tfdoctor.core.checks.common import ev, gpu_indexes, line_ev, tf_env, tf_present
from tfdoctor.core.checks.registry import NVML, TARGET, CheckContext, check
from tfdoctor.core.model import Evidence, Facts, Finding, Severity

S = Severity


@check(TARGET, NVML)
def check_gpu_visible(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    """NVML sees GPUs but TensorFlow does not: say why."""
    if not tf_present(facts) or facts.value("tf.is_cuda_build") is not True:
        return
    n_nvml, n_tf = facts.value("gpu.count"), facts.value("tf.gpu_count")
    if not isinstance(n_tf, int):
        return
    if isinstance(n_nvml, int) and n_nvml > 0 and n_tf >= 1:
        if n_tf < n_nvml:
            yield Finding(
                "tf.some_gpus_hidden",
                S.INFO,
                f"TensorFlow sees {n_tf} of the {n_nvml} GPUs",
                "Some GPUs are hidden from TensorFlow (CUDA_VISIBLE_DEVICES) or ignored "
                "(unsupported compute capability, see below).",
                ev(facts, "tf.gpu_count", "gpu.count", "target.env"),
                ("pick_gpu",),
                "gpu",
            )
        else:
            yield Finding(
                "tf.gpu_visible",
                S.OK,
                f"TensorFlow sees {n_tf} GPU{'s' if n_tf > 1 else ''}",
                "tf.config.list_physical_devices('GPU') lists them.",
                ev(facts, "tf.gpus"),
                (),
                "gpu",
            )
        return
    if n_tf > 0:
        return
    # TF sees none. Explain with the strongest reason we can prove.
    cvd = tf_env(facts).get("CUDA_VISIBLE_DEVICES")
    # TF 2.14+ says only "could not find cuda drivers" when its CUDA runtime is not there
    dlopen = (
        ctx.lines("dlopen_failed") + ctx.lines("gpu_libs_missing") + ctx.lines("cudart_not_found")
    )
    cc_ignored = ctx.lines("gpu_cc_ignored")
    cuinit = ctx.lines("cuinit_failed")
    no_driver = ctx.lines("no_cuda_driver")
    base = ev(facts, "tf.gpu_count", "gpu.count", "nvml.status")
    fixes: tuple[str, ...]
    if not n_nvml:
        # No GPU in NVML either: on a machine without NVIDIA hardware this is expected.
        yield Finding(
            "tf.no_gpu",
            S.INFO if facts.value("nvml.status") in ("library_not_found", None) else S.WARNING,
            "TensorFlow will run on the CPU: no GPU is visible",
            "TensorFlow lists no GPU and the NVIDIA driver lists none either. Training runs on "
            "the CPU (slowly). If this machine has an NVIDIA GPU, the driver is missing or not "
            "loaded, or (in a container / WSL2) the GPU is not passed through.",
            (*base, *line_ev(no_driver + ctx.lines("cudart_not_found") + cuinit)),
            ("upgrade_driver", "container_gpu_passthrough", "wsl_gpu_setup"),
            "gpu",
        )
        return
    compat = knowledge.load()
    driver, build_cuda = facts.value("nvidia.driver_version"), facts.value("tf.build_cuda_version")
    driver_old = bool(driver and build_cuda) and (
        compat.driver_supports(str(driver), str(build_cuda)) is False
    )
    tfv = str(facts.value("tf.version") or "")
    too_old = [
        str(facts.value(f"gpu{i}.compute_capability"))
        for i in gpu_indexes(facts)
        if facts.value(f"gpu{i}.compute_capability")
        and compat.cc_support(tfv, str(facts.value(f"gpu{i}.compute_capability"))).verdict.name
        == "UNSUPPORTED"
    ]
    if cvd is not None and (cvd.strip() in ("", "-1") or not _cvd_selects_any(cvd, n_nvml)):
        why, fixes = (
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from this environment.",
            ("unset_cuda_visible_devices",),
        )
    elif driver_old:
        why, fixes = (
            f"The NVIDIA driver {driver} is too old for the CUDA {build_cuda} this TensorFlow "
            "was built with, so CUDA cannot start.",
            ("upgrade_driver", "install_tf_and_cuda"),
        )
    elif too_old and len(too_old) == len(gpu_indexes(facts)):
        why, fixes = (
            f"TensorFlow {tfv} ignores GPUs of compute capability {', '.join(too_old)}: its "
            "wheels carry no code for them.",
            ("supported_gpu_tensorflow",),
        )
    elif dlopen:
        libs = sorted({m.group("lib") for _, _, m in dlopen if "lib" in m.groupdict()})
        why, fixes = (
            "TensorFlow could not load the CUDA libraries it needs"
            + (f" ({', '.join(libs)})" if libs else "")
            + ", so it silently fell back to the CPU.",
            ("install_tf_and_cuda", "install_pip_cuda_libs"),
        )
    elif cc_ignored:
        why, fixes = (
            "TensorFlow ignored the GPU because its compute capability is below this build's "
            "minimum.",
            ("supported_gpu_tensorflow",),
        )
    elif cuinit:
        why, fixes = (
            f"The CUDA driver failed to initialise ({cuinit[0][2].group('detail').strip()}).",
            ("upgrade_driver", "reboot_after_driver_update"),
        )
    else:
        why, fixes = ("TensorFlow did not say why; the probe output is in the evidence.", ())
    yield Finding(
        "tf.gpu_not_visible",
        S.ERROR,
        f"The GPU is present but TensorFlow cannot see it ({n_nvml} in the driver, 0 in TF)",
        why + " Until this is fixed, training runs on the CPU.",
        (*base, *ev(facts, "target.env"), *line_ev(dlopen + cc_ignored + cuinit)),
        fixes,
        "gpu",
    )


def _cvd_selects_any(cvd: str, n: int) -> bool:
    first = cvd.split(",")[0].strip()
    if first.startswith(("GPU-", "MIG-")):
        return True
    return first.isdigit() and int(first) < n


@check(TARGET, NVML)
def check_compute_capability(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    tfv = facts.value("tf.version")
    if not tf_present(facts) or not tfv or facts.value("tf.is_cuda_build") is not True:
        return
    compat = knowledge.load()
    for i in gpu_indexes(facts):
        cc = facts.value(f"gpu{i}.compute_capability")
        if not cc:
            continue
        sup = compat.cc_support(str(tfv), str(cc))
        name = facts.value(f"gpu{i}.name") or f"GPU {i}"
        arch = compat.architecture(str(cc)) or "unknown architecture"
        evidence = (
            *ev(
                facts,
                f"gpu{i}.name",
                f"gpu{i}.compute_capability",
                "tf.version",
                "tf.build_compute_capabilities",
            ),
            *line_ev(ctx.lines("gpu_cc_ignored") + ctx.lines("ptx_jit_warning")),
        )
        verdict = sup.verdict.name
        if verdict == "UNSUPPORTED":
            yield Finding(
                f"gpu{i}.cc_unsupported",
                S.ERROR,
                f"{name} (compute capability {cc}, {arch}) is too old for TensorFlow {tfv}",
                f"TensorFlow {tfv}'s wheels contain GPU code for compute capability "
                f"{sup.min_cc if hasattr(sup, 'min_cc') else 'higher'} and up; it ignores this GPU "
                "and runs on the CPU. Use an older TensorFlow that still supports it (e.g. TF "
                "2.16 for compute capability 5.x) or a newer GPU.",
                evidence,
                ("supported_gpu_tensorflow",),
                "gpu",
            )
        elif verdict == "PTX_JIT":
            problems = getattr(sup, "known_problems", ()) or ()
            yield Finding(
                f"gpu{i}.cc_ptx_jit",
                S.ERROR if problems else S.WARNING,
                f"{name} (compute capability {cc}) has no native kernels in TensorFlow {tfv}",
                "TensorFlow's wheel has no compiled code for this GPU, so the driver must "
                "JIT-compile PTX at start-up (it can take 30 minutes, cache it with "
                "CUDA_CACHE_MAXSIZE)"
                + (
                    "; for this architecture users report failures such as CUDA_ERROR_INVALID_PTX"
                    " with pip TensorFlow (see evidence). Prefer a build with native support "
                    "(a newer TensorFlow or NVIDIA's container)."
                    if problems
                    else "."
                ),
                (*evidence, *(Evidence(str(u), source="known issue") for u in problems)),
                ("supported_gpu_tensorflow",),
                "gpu",
            )
        elif verdict == "NATIVE":
            yield Finding(
                f"gpu{i}.cc_supported",
                S.OK,
                f"{name} (compute capability {cc}, {arch}) is supported by TensorFlow {tfv}",
                "The wheel has native GPU code for this architecture.",
                evidence[:4],
                (),
                "gpu",
            )


@check(NVML)
def check_gpu_health(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    for i in gpu_indexes(facts):
        name = facts.value(f"gpu{i}.name") or f"GPU {i}"
        ecc = facts.value(f"gpu{i}.ecc_uncorrected_volatile")
        pages = facts.value(f"gpu{i}.retired_pages") or {}
        rows = facts.value(f"gpu{i}.remapped_rows") or {}
        pending = any(isinstance(d, dict) and d.get("pending") for d in (pages, rows))
        failed = isinstance(rows, dict) and bool(rows.get("failed"))
        if (isinstance(ecc, int) and ecc > 0) or pending or failed:
            yield Finding(
                f"gpu{i}.ecc_errors",
                S.ERROR,
                f"{name} reports uncorrected memory (ECC) errors",
                "Uncorrectable ECC errors, or retired pages / remapped rows waiting for a GPU "
                "reset, mean the GPU's memory returned bad data: training can crash with "
                "'illegal memory access' or produce NaNs. Reset the GPU or reboot so the repair "
                "takes effect; if errors keep coming (or a remapping failed), the card needs "
                "service.",
                ev(
                    facts,
                    f"gpu{i}.ecc_uncorrected_volatile",
                    f"gpu{i}.retired_pages",
                    f"gpu{i}.remapped_rows",
                ),
                ("check_gpu_hardware",),
                "gpu",
            )
        reasons = facts.value(f"gpu{i}.throttle_reasons") or []
        bad = [
            r for r in reasons if r in ("hw_slowdown", "hw_thermal", "sw_thermal", "hw_power_brake")
        ]
        if bad:
            yield Finding(
                f"gpu{i}.throttling",
                S.WARNING,
                f"{name} is throttling ({', '.join(bad)})",
                "The GPU is slowing itself down because of heat or power. Training is slower "
                "and, at the extreme, the GPU can drop off the bus. Check cooling and power.",
                ev(facts, f"gpu{i}.throttle_reasons", f"gpu{i}.temperature_c", f"gpu{i}.power_w"),
                ("check_gpu_hardware",),
                "gpu",
            )
