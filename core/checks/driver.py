"""Checks of the NVIDIA driver: whether NVML answers, and whether it is new enough."""

from __future__ import annotations

from collections.abc import Iterator

from tfdoctor.core import knowledge
from tfdoctor.core.checks.common import ev, line_ev, tf_present
from tfdoctor.core.checks.registry import NVML, TARGET, CheckContext, check
from tfdoctor.core.model import Facts, Finding, Severity

S = Severity


_NVML_TEXT: dict[str, tuple[Severity, str, str, tuple[str, ...]]] = {
    "library_not_found": (
        S.INFO,
        "No NVIDIA driver found on this machine",
        "The NVIDIA management library (libnvidia-ml) is not installed, so there is no NVIDIA "
        "driver here: TensorFlow can only use the CPU. On a GPU workstation this means the "
        "driver is not installed; in a container, the GPU was not passed through; under WSL2, "
        "the Windows NVIDIA driver is missing.",
        ("upgrade_driver", "container_gpu_passthrough", "wsl_gpu_setup"),
    ),
    "driver_not_loaded": (
        S.ERROR,
        "The NVIDIA driver is installed but not loaded",
        "libnvidia-ml is present but the nvidia kernel module is not running (a kernel update "
        "without rebuilding the driver, Secure Boot blocking the module, or nouveau in the "
        "way). No program can use the GPU until the module loads.",
        ("reboot_after_driver_update", "upgrade_driver"),
    ),
    "version_mismatch": (
        S.ERROR,
        "NVIDIA driver/library version mismatch",
        "The loaded nvidia kernel module and the user-space driver library are different "
        "versions, the classic state after a driver update without a reboot. CUDA programs, "
        "TensorFlow included, fail to initialise until you reboot (or reload the module).",
        ("reboot_after_driver_update",),
    ),
    "no_permission": (
        S.WARNING,
        "Not allowed to query the NVIDIA driver",
        "NVML refused access (device node permissions). GPU checks could not run; TensorFlow "
        "may fail the same way for this user. Check that the user can open /dev/nvidia*.",
        (),
    ),
    "gpu_lost": (
        S.ERROR,
        "A GPU has fallen off the bus",
        "NVML reports a lost GPU: the driver can no longer talk to it (power, overheating, a "
        "loose card, or a hardware fault). Reboot; if it repeats, check power and cooling.",
        ("check_gpu_hardware",),
    ),
    "timeout": (
        S.ERROR,
        "The NVIDIA driver stopped answering",
        "An NVML call did not return in time. A hung driver usually follows a GPU fault (see "
        "Xid lines in the kernel log); TensorFlow will hang the same way.",
        ("check_gpu_hardware",),
    ),
    "error": (
        S.WARNING,
        "Could not query the NVIDIA driver",
        "NVML failed for a reason it reported (see evidence). GPU facts are unknown.",
        (),
    ),
}


@check(NVML)
def check_nvml(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    status = facts.value("nvml.status")
    if status is None:
        return
    if status == "ok":
        n = facts.value("gpu.count") or 0
        names = ", ".join(str(facts.value(f"gpu{i}.name")) for i in range(n)) or "no GPU"
        yield Finding(
            "nvidia.driver_ok",
            S.OK if n else S.WARNING,
            f"NVIDIA driver {facts.value('nvidia.driver_version')} "
            f"(CUDA up to {facts.value('nvidia.cuda_driver_version')}): {names}",
            "The driver answers and lists the GPUs below."
            if n
            else "The driver answers but lists no GPU.",
            ev(facts, "nvidia.driver_version", "nvidia.cuda_driver_version", "gpu.count"),
            (),
            "gpu",
        )
        return
    sev, title, text, fixes = _NVML_TEXT.get(str(status), _NVML_TEXT["error"])
    yield Finding(
        f"nvidia.{status}",
        sev,
        title,
        text,
        ev(facts, "nvml.status", "nvml.error"),
        fixes,
        "gpu",
    )


@check(TARGET, NVML)
def check_driver_for_build(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if not tf_present(facts) or facts.value("tf.is_cuda_build") is not True:
        return
    build_cuda, driver = facts.value("tf.build_cuda_version"), facts.value("nvidia.driver_version")
    if not build_cuda or not driver:
        return
    compat = knowledge.load()
    req = compat.min_driver_for_cuda(str(build_cuda))
    ok = compat.driver_supports(str(driver), str(build_cuda))
    hits = ctx.lines("driver_insufficient", "driver_compat_unsupported")
    evidence = (
        *ev(facts, "nvidia.driver_version", "nvidia.cuda_driver_version", "tf.build_cuda_version"),
        *line_ev(hits),
    )
    if ok is False or hits:
        need = f" {req.minimum} or newer" if req is not None else " a newer one"
        yield Finding(
            "nvidia.driver_too_old",
            S.ERROR,
            f"Driver {driver} is too old for TensorFlow's CUDA {build_cuda}",
            f"TensorFlow {facts.value('tf.version')} was built with CUDA {build_cuda}, which "
            f"needs an NVIDIA driver{need} (this one supports CUDA up to "
            f"{facts.value('nvidia.cuda_driver_version', '?')}). TensorFlow will fail to "
            "initialise the GPU or fall back to the CPU. Install a newer driver, or a TensorFlow "
            "release built for an older CUDA.",
            evidence,
            ("upgrade_driver", "install_tf_and_cuda"),
            "gpu",
        )
    elif ok is True:
        yield Finding(
            "nvidia.driver_new_enough",
            S.OK,
            f"Driver {driver} supports TensorFlow's CUDA {build_cuda}",
            f"Minimum for CUDA {build_cuda}: {req.minimum if req else 'unknown'}.",
            evidence,
            (),
            "gpu",
        )
