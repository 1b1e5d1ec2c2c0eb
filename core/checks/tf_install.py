"""Checks of TensorFlow in the target Python: the probe itself, its log, the install, the build."""

from __future__ import annotations

from collections.abc import Iterator

from tfdoctor.core import knowledge
from tfdoctor.core.checks.common import crash_window, ev, tf_present
from tfdoctor.core.checks.registry import NVML, TARGET, CheckContext, check
from tfdoctor.core.diagnose.combine import FINDING_CAUSE_PREFIX, cause_finding
from tfdoctor.core.diagnose.engine import ExitInfo, diagnose
from tfdoctor.core.model import Evidence, Facts, Finding, ProbeStatus, Severity

S = Severity


@check(TARGET)
def check_target_probe(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    r = ctx.probes.get(TARGET)
    if r is None or r.status in (ProbeStatus.OK, ProbeStatus.SKIPPED):
        return
    exit_info = facts.value("target.probe_exit") or {}
    stage = facts.value("target.probe_stage") or "start"
    tail = tuple(
        Evidence(line.strip(), line=n, source="target probe output")
        for n, line in crash_window(ctx.output)
    )
    evidence = (*ev(facts, "target.probe_exit", "target.probe_stage"), *tail)
    importing = stage == "import_tf"
    if r.status is ProbeStatus.CRASHED and exit_info.get("signal") == "SIGILL":
        yield Finding(
            "tf.crash_illegal_instruction",
            S.ERROR,
            "TensorFlow crashed with 'Illegal instruction' (SIGILL)",
            "The Python process died with SIGILL while "
            + ("importing TensorFlow" if importing else f"at stage '{stage}'")
            + ". This almost always means the CPU lacks an instruction set the TensorFlow build "
            "uses (AVX for the official wheels). Nothing in your code can fix it: you need a "
            "TensorFlow build for this CPU, or a machine/VM that exposes AVX.",
            evidence,
            ("tf_without_avx",),
            "tensorflow",
        )
        return
    if r.status is ProbeStatus.CRASHED:
        sig = exit_info.get("signal") or "a signal"
        yield Finding(
            "tf.crash_on_import" if importing else "tf.crash_in_probe",
            S.ERROR,
            f"Python crashed ({sig}) while {r.message.split(' while ', 1)[-1]}",
            f"The target Python died with {sig}. The last lines it printed are below; where "
            "tfdoctor recognises them, the Diagnosis section says what they mean. Without a "
            "recognised message, a native crash while importing TensorFlow usually means a "
            "broken or mixed install (two TensorFlow or CUDA copies, a wheel built for another "
            "CPU or glibc), and reinstalling TensorFlow in a fresh environment is the cure.",
            evidence,
            ("install_tf_and_cuda", "remove_conflicting_cuda"),
            "tensorflow",
        )
    elif r.status is ProbeStatus.TIMEOUT:
        yield Finding(
            "tf.probe_hang",
            S.ERROR,
            f"The TensorFlow probe hung: {r.message}",
            "The target Python stopped making progress and was stopped. A hang while importing "
            "TensorFlow or initialising the GPU usually means a driver problem (a GPU that fell "
            "off the bus, a stuck nvidia kernel module) or a network file system holding the "
            "environment. The stacks dumped before it was stopped are in the evidence.",
            evidence,
            ("check_gpu_hardware",),
            "tensorflow",
        )
    else:
        yield Finding(
            "tf.probe_failed",
            S.ERROR,
            f"The TensorFlow probe failed: {r.message}",
            "The target Python exited with an error before the check finished. Its last "
            "output lines are below; they usually name the broken package.",
            evidence,
            (),
            "tensorflow",
        )


# Causes that dedicated checks already judge from facts: a healthy probe's log repeating
# them ("Could not find cuda drivers" on a machine without a GPU) adds nothing.
_CHECKED_ELSEWHERE = frozenset(
    {
        "no_gpu_visible",
        "driver_too_old",
        "unsupported_gpu_arch",
        "missing_cuda_libs",
        "cuda_cudnn_version_mismatch",
        "cpu_instructions_unsupported",
        "xla_ptxas_libdevice",
    }
)
LOG_CAUSE_MIN = 0.35  # a failed probe: causes at least this sure are reported
LOG_CAUSE_MIN_HEALTHY = 0.6  # a probe that passed: only a clear signal is worth a warning


@check(TARGET, NVML)
def check_probe_log(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    """The target's own output (TensorFlow's log, a traceback, a crash report) and the smoke
    test's error, through the crash-log diagnosis engine, with the machine's facts."""
    r = ctx.probes.get(TARGET)
    if r is None or r.status is ProbeStatus.SKIPPED:
        return
    import_error = str(facts.value("tf.import_error") or "")
    smoke_error = str(facts.value("tf.smoke_error") or "")
    failed = (
        r.status is not ProbeStatus.OK
        or (facts.value("tf.installed") is False and not import_error.startswith("ModuleNotFound"))
        or facts.value("tf.smoke_ok") is False
    )
    end = facts.value("target.probe_exit") or {}
    exit_info = ExitInfo(returncode=end.get("returncode"), signal=end.get("signal"))
    texts = ["\n".join(ctx.output).encode("utf-8", "replace")]
    names = ["target probe output"]
    for name, text in (
        ("TensorFlow import error", import_error),
        ("smoke test error", smoke_error),
    ):
        if text:
            texts.append(text.encode("utf-8", "replace"))
            names.append(name)
    d = diagnose(*texts, facts=facts, exit_info=exit_info if failed else None, names=names)
    floor = LOG_CAUSE_MIN if failed else LOG_CAUSE_MIN_HEALTHY
    shown = 0
    for cause in d.causes:
        if cause.confidence < floor or (not failed and cause.id in _CHECKED_ELSEWHERE):
            continue
        severity = S.ERROR if failed and shown == 0 else S.WARNING
        where = "why the probe failed" if failed else "in TensorFlow's log"
        yield cause_finding(
            cause, severity, where=where, id_prefix=FINDING_CAUSE_PREFIX, group="diagnosis"
        )
        shown += 1
        if shown == 3:
            return


@check(TARGET)
def check_tf_installed(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if facts.value("tf.installed") is False:
        err = str(facts.value("tf.import_error") or "")
        missing = err.startswith("ModuleNotFoundError") and "tensorflow" in err
        yield Finding(
            "tf.not_installed" if missing else "tf.import_failed",
            S.ERROR,
            "TensorFlow is not installed in this Python"
            if missing
            else "TensorFlow is installed but fails to import",
            (
                f"`import tensorflow` failed in {facts.value('target.python')}: {err}. "
                + (
                    "If your notebook uses this interpreter, it cannot run TensorFlow at all; "
                    "maybe the notebook runs another kernel. Install TensorFlow here, or pick the "
                    "right environment."
                    if missing
                    else "A package TensorFlow needs is missing or has the wrong version; "
                    "reinstall TensorFlow in this environment."
                )
            ),
            ev(facts, "tf.import_error", "target.python", "target.python_version"),
            ("install_tensorflow",),
            "tensorflow",
        )
    elif tf_present(facts):
        yield Finding(
            "tf.installed",
            S.OK,
            f"TensorFlow {facts.value('tf.version')} imports "
            f"(in {facts.value('tf.import_s', 0):.1f} s)",
            f"Python {facts.value('target.python_version')} at {facts.value('target.python')}.",
            ev(facts, "tf.version", "tf.keras_version", "target.python_version", "target.python"),
            (),
            "tensorflow",
        )


@check(TARGET)
def check_python_supported(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    tfv, pyv = facts.value("tf.version"), facts.value("target.python_version")
    if not tf_present(facts) or not tfv or not pyv:
        return
    compat = knowledge.load()
    build = compat.tf_build(str(tfv))
    supported = compat.python_supported(str(tfv), str(pyv))
    if supported is False and build is not None:
        yield Finding(
            "tf.python_unsupported",
            S.WARNING,
            f"Python {pyv} is outside TensorFlow {tfv}'s tested range "
            f"({build.python_min}-{build.python_max})",
            "TensorFlow imported, but this Python version was never tested with this release: "
            "wheels may be unofficial builds and some ops or dependencies may misbehave. Use a "
            f"Python between {build.python_min} and {build.python_max}.",
            ev(facts, "tf.version", "target.python_version"),
            ("supported_python",),
            "tensorflow",
        )


@check(TARGET, NVML)
def check_cuda_build(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if not tf_present(facts) or facts.value("tf.is_cuda_build") is None:
        return
    has_gpu = (facts.value("gpu.count") or 0) > 0
    if facts.value("tf.is_cuda_build") is False:
        yield Finding(
            "tf.cpu_only_build",
            S.ERROR if has_gpu else S.INFO,
            "This TensorFlow is a CPU-only build",
            "tf.sysconfig.get_build_info() says is_cuda_build=False, so TensorFlow will never "
            "use a GPU in this environment"
            + (
                " although this machine has one. Install a GPU build (tensorflow[and-cuda] on "
                "Linux/WSL2; native Windows GPU support ended with TF 2.10)."
                if has_gpu
                else "."
            ),
            ev(facts, "tf.is_cuda_build", "tf.version", "gpu.count"),
            ("install_gpu_tensorflow",) if has_gpu else (),
            "tensorflow",
        )
    else:
        yield Finding(
            "tf.cuda_build",
            S.OK,
            f"TensorFlow is a CUDA build (CUDA {facts.value('tf.build_cuda_version')}, "
            f"cuDNN {facts.value('tf.build_cudnn_version')})",
            "The build can use NVIDIA GPUs when the driver and CUDA libraries are right.",
            ev(
                facts,
                "tf.build_cuda_version",
                "tf.build_cudnn_version",
                "tf.build_compute_capabilities",
            ),
            (),
            "tensorflow",
        )
