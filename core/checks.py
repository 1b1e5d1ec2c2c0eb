"""Facts -> findings: the environment checks (pure functions, no I/O)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from tfdoctor.core import knowledge
from tfdoctor.core.diagnose.combine import FINDING_CAUSE_PREFIX, cause_finding
from tfdoctor.core.diagnose.engine import ExitInfo, diagnose
from tfdoctor.core.knowledge import catalog
from tfdoctor.core.model import Evidence, Facts, Finding, ProbeResult, ProbeStatus, Severity

S = Severity

# Probe names (the scan runs these concurrently; a check runs once all it needs are done).
TARGET, NVML, SYSTEM, CUDALIBS = "target", "nvml", "system", "cudalibs"

LOW_FREE_VRAM_MIB = 1024
LOW_FREE_VRAM_FRACTION = 0.10
OTHER_PROCESS_MIN_MIB = 256  # below this, a process (a desktop compositor) is not worth naming
GROWTH_VALUES = {"true", "false"}  # TF compares these case-sensitively (gpu_bfc_allocator.cc)


@dataclass(frozen=True)
class CheckContext:
    """What checks may read besides facts: each probe's result and the probe's output lines."""

    probes: Mapping[str, ProbeResult] = field(default_factory=dict)
    output: Sequence[str] = ()

    def status(self, probe: str) -> ProbeStatus | None:
        r = self.probes.get(probe)
        return None if r is None else r.status

    def lines(self, signal_id: str) -> list[tuple[int, str, re.Match[str]]]:
        """Output lines (1-based number, text, match) that match a known log signal."""
        sig = next(s for s in catalog.signals() if s.id == signal_id)
        out = []
        for i, line in enumerate(self.output, 1):
            m = sig.pattern.search(line)
            if m:
                out.append((i, line.strip(), m))
        return out


CheckFn = Callable[[Facts, CheckContext], Iterable[Finding]]


@dataclass(frozen=True)
class Check:
    id: str
    needs: frozenset[str]
    fn: CheckFn


REGISTRY: list[Check] = []


def check(*needs: str) -> Callable[[CheckFn], CheckFn]:
    """Register a check that runs once the named probes have finished."""

    def deco(fn: CheckFn) -> CheckFn:
        REGISTRY.append(Check(fn.__name__.removeprefix("check_"), frozenset(needs), fn))
        return fn

    return deco


def run_checks(
    facts: Facts, ctx: CheckContext, done: Iterable[str] | None = None, skip: Iterable[str] = ()
) -> list[Finding]:
    """Run every registered check whose probes are all in `done` (default: all of them).

    A check that raises is a bug in us, not in the user's machine: it becomes an UNKNOWN
    finding that says so instead of taking the whole check down.
    """
    done_set = set(ctx.probes) if done is None else set(done)
    skip_set = set(skip)
    out: list[Finding] = []
    for c in REGISTRY:
        if c.id in skip_set or not c.needs <= done_set:
            continue
        try:
            out.extend(c.fn(facts, ctx))
        except Exception as exc:
            out.append(
                Finding(
                    f"internal.{c.id}",
                    S.UNKNOWN,
                    f"Could not run the '{c.id}' check",
                    f"tfdoctor hit an internal error ({type(exc).__name__}: {exc}). The other "
                    "checks are unaffected; please report this.",
                    group="tfdoctor",
                )
            )
    return out


# ---------------------------------------------------------------- helpers


def ev(facts: Facts, *names: str) -> tuple[Evidence, ...]:
    """Evidence from known facts (unknown ones are left out)."""
    out = []
    for n in names:
        if facts.known(n):
            f = facts[n]
            out.append(Evidence(f"{n} = {_short(f.value)}", fact=n, source=f.source))
    return tuple(out)


def line_ev(hits: Iterable[tuple[int, str, Any]], limit: int = 4) -> tuple[Evidence, ...]:
    return tuple(Evidence(text, line=n, source="target probe output") for n, text, _ in hits)[
        :limit
    ]


def _short(v: Any, limit: int = 160) -> str:
    s = repr(v) if not isinstance(v, str) else v
    return s if len(s) <= limit else s[: limit - 3] + "..."


def ver(text: Any) -> Version | None:
    if text is None:
        return None
    try:
        return Version(str(text))
    except InvalidVersion:
        m = re.match(r"\d+(\.\d+)*", str(text))
        return Version(m.group(0)) if m else None


def gpu_indexes(facts: Facts) -> list[int]:
    n = facts.value("gpu.count")
    return list(range(n)) if isinstance(n, int) else []


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def tf_env(facts: Facts) -> dict[str, str]:
    env = facts.value("target.env")
    return env if isinstance(env, dict) else {}


def other_gpu_processes(facts: Facts, i: int) -> list[dict[str, Any]]:
    """Processes on GPU i other than our own probe, biggest first."""
    probe_pid = facts.value("target.probe_pid")
    procs = facts.value(f"gpu{i}.processes") or []
    out = [p for p in procs if isinstance(p, dict) and p.get("pid") != probe_pid]
    return sorted(out, key=lambda p: -(p.get("used_mib") or 0))


def describe_process(p: Mapping[str, Any]) -> str:
    name = p.get("name") or "unknown process"
    used = p.get("used_mib")
    amount = f"{gib(used)}" if isinstance(used, (int, float)) else "an unknown amount"
    who = f", user {p['user']}" if p.get("user") else ""
    if p.get("is_jupyter_kernel"):
        where = p.get("notebook_path") or (
            f"kernel {p['kernel_id']}" if p.get("kernel_id") else "unknown notebook"
        )
        server = f" on {p['notebook_server']}" if p.get("notebook_server") else ""
        return f"Jupyter kernel (pid {p.get('pid')}, {where}{server}{who}) holds {amount}"
    return f"{name} (pid {p.get('pid')}{who}) holds {amount}"


def tf_present(facts: Facts) -> bool:
    return facts.value("tf.installed") is True


def crash_window(output: Sequence[str], before: int = 4, after: int = 6) -> list[tuple[int, str]]:
    """The lines that explain a crash: what was printed just before faulthandler's report and
    the top of the Python stack it dumped; else the last lines. Numbered from 1.
    """
    numbered = [(n, line) for n, line in enumerate(output, 1) if line.strip()]
    for k, (_, line) in enumerate(numbered):
        if line.startswith("Fatal Python error") or "most recent call first" in line:
            return numbered[max(0, k - before) : k + after]
    return numbered[-(before + after) :]


# ---------------------------------------------------------------- target interpreter / TF


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


# Display names of finding groups, for the CLI and the GUI
GROUP_TITLES = {
    "cause": "Cause",
    "diagnosis": "Diagnosis of the probe's output",
    "tensorflow": "TensorFlow",
    "gpu": "GPU and driver",
    "memory": "Memory",
    "cuda": "CUDA libraries",
    "system": "System",
    "tfdoctor": "tfdoctor",
}

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


# ---------------------------------------------------------------- NVIDIA driver / NVML


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
    hits = ctx.lines("driver_insufficient")
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
    dlopen = ctx.lines("dlopen_failed") + ctx.lines("gpu_libs_missing")
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
            (*base, *line_ev(no_driver + cuinit)),
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
            *line_ev(ctx.lines("gpu_cc_ignored") + ctx.lines("ptx_jit")),
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


# ---------------------------------------------------------------- VRAM


@check(NVML)
def check_vram_holders(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    for i in gpu_indexes(facts):
        total = facts.value(f"gpu{i}.memory_total_mib")
        others = [
            p
            for p in other_gpu_processes(facts, i)
            if (p.get("used_mib") or 0) >= OTHER_PROCESS_MIN_MIB or p.get("is_jupyter_kernel")
        ]
        if not others:
            continue
        held = sum(p.get("used_mib") or 0 for p in others)
        big = isinstance(total, (int, float)) and total > 0 and held > 0.5 * total
        kernels = [p for p in others if p.get("is_jupyter_kernel")]
        name = facts.value(f"gpu{i}.name") or f"GPU {i}"
        lines = "; ".join(describe_process(p) for p in others[:5])
        yield Finding(
            f"gpu{i}.vram_held_by_others",
            S.WARNING if big or kernels else S.INFO,
            f"Other processes hold {gib(held)} of {name}'s memory"
            + (
                f" ({len(kernels)} Jupyter kernel{'s' if len(kernels) > 1 else ''})"
                if kernels
                else ""
            ),
            f"{lines}. Memory held by another process is not available to your training: a "
            "forgotten notebook kernel keeps its VRAM until it is shut down (TensorFlow never "
            "gives memory back while the kernel lives). Shut down kernels you no longer use.",
            tuple(
                Evidence(describe_process(p), fact=f"gpu{i}.processes", source="nvml")
                for p in others[:8]
            ),
            ("stop_gpu_process", "memory_growth"),
            "memory",
        )


@check(NVML)
def check_free_vram(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    for i in gpu_indexes(facts):
        total, free = (
            facts.value(f"gpu{i}.memory_total_mib"),
            facts.value(f"gpu{i}.memory_free_mib"),
        )
        if not isinstance(total, (int, float)) or not isinstance(free, (int, float)) or total <= 0:
            continue
        name = facts.value(f"gpu{i}.name") or f"GPU {i}"
        if free < LOW_FREE_VRAM_MIB or free < LOW_FREE_VRAM_FRACTION * total:
            yield Finding(
                f"gpu{i}.low_free_vram",
                S.WARNING,
                f"Only {gib(free)} of {gib(total)} is free on {name}",
                "A new TensorFlow process will hit 'OOM when allocating tensor' or fail to "
                "create cuDNN/cuBLAS handles with this little free memory. Free it first (see "
                "the processes holding it) or cap what TensorFlow takes.",
                ev(
                    facts,
                    f"gpu{i}.memory_free_mib",
                    f"gpu{i}.memory_total_mib",
                    f"gpu{i}.memory_used_mib",
                ),
                ("stop_gpu_process", "memory_limit"),
                "memory",
            )
        else:
            yield Finding(
                f"gpu{i}.free_vram",
                S.OK,
                f"{gib(free)} of {gib(total)} free on {name}",
                "Enough free GPU memory for a new process to start.",
                ev(facts, f"gpu{i}.memory_free_mib", f"gpu{i}.memory_total_mib"),
                (),
                "memory",
            )


@check(TARGET, NVML)
def check_allocator_env(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if not tf_present(facts):
        return
    env = tf_env(facts)
    growth = env.get("TF_FORCE_GPU_ALLOW_GROWTH")
    allocator = env.get("TF_GPU_ALLOCATOR")
    evidence = ev(facts, "target.env")
    if growth is not None and growth not in GROWTH_VALUES:
        yield Finding(
            "env.growth_value_ignored",
            S.WARNING,
            f"TF_FORCE_GPU_ALLOW_GROWTH={growth!r} is ignored by TensorFlow",
            "TensorFlow accepts exactly 'true' or 'false' (lower case) and ignores anything "
            "else, so the default grab-all allocation is still in effect. Set it to 'true'.",
            evidence,
            ("memory_growth",),
            "memory",
        )
    growth_on = growth == "true" or allocator == "cuda_malloc_async"
    shared = any(
        other_gpu_processes(facts, i)
        or (facts.value(f"gpu{i}.memory_used_mib") or 0) > OTHER_PROCESS_MIN_MIB
        for i in gpu_indexes(facts)
    )
    if not growth_on and facts.value("tf.gpu_count", 0) and shared:
        yield Finding(
            "env.grab_all_with_other_users",
            S.WARNING,
            "TensorFlow will grab nearly all free GPU memory while others use the GPU",
            "By default TensorFlow reserves almost all free VRAM when it starts. With another "
            "process on the GPU (another notebook, a second training run), whichever starts "
            "second fails with OOM or CUDNN_STATUS_INTERNAL_ERROR / failed to create cuBLAS "
            "handle. Enable memory growth (TF_FORCE_GPU_ALLOW_GROWTH=true) or the async "
            "allocator.",
            evidence,
            ("memory_growth", "async_allocator"),
            "memory",
        )
    elif growth_on:
        what = (
            "TF_GPU_ALLOCATOR=cuda_malloc_async"
            if allocator == "cuda_malloc_async"
            else "TF_FORCE_GPU_ALLOW_GROWTH=true"
        )
        yield Finding(
            "env.growth_enabled",
            S.OK,
            f"{what} is set: TensorFlow takes GPU memory as it needs it",
            "Memory is not reserved up front, so several processes can share the GPU.",
            evidence,
            (),
            "memory",
        )
    elif facts.value("tf.gpu_count", 0):
        yield Finding(
            "env.growth_default",
            S.INFO,
            "TensorFlow will reserve nearly all free GPU memory at start (the default)",
            "Fine when TensorFlow is alone on the GPU; nvidia-smi will show it full even for a "
            "small model. Set TF_FORCE_GPU_ALLOW_GROWTH=true to share the GPU.",
            evidence,
            ("memory_growth",),
            "memory",
        )
    if allocator and allocator not in ("cuda_malloc_async", "cuda_malloc", "memory_guard", "bfc"):
        yield Finding(
            "env.allocator_unknown",
            S.WARNING,
            f"TF_GPU_ALLOCATOR={allocator!r} is not an allocator TensorFlow knows",
            "Known values: cuda_malloc_async (recommended), or unset for the default BFC "
            "allocator. TensorFlow ignores unknown values.",
            evidence,
            ("async_allocator",),
            "memory",
        )


# ---------------------------------------------------------------- CUDA libraries


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
    hits = ctx.lines("libdevice_missing") + ctx.lines("ptxas_missing")
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


# ---------------------------------------------------------------- host memory / system


@check(SYSTEM, NVML)
def check_host_memory(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    total = facts.value("mem.total_mib")
    vram = sum(facts.value(f"gpu{i}.memory_total_mib") or 0 for i in gpu_indexes(facts))
    if isinstance(total, (int, float)) and vram and total < vram:
        yield Finding(
            "mem.ram_smaller_than_vram",
            S.WARNING,
            f"RAM ({gib(total)}) is smaller than GPU memory ({gib(vram)})",
            "Data pipelines, model checkpoints and TensorFlow's pinned host buffers live in RAM. "
            "With less RAM than VRAM, loading a dataset that fits the GPU can kill the process "
            "(the kernel OOM killer: 'Killed', or a dead Jupyter kernel). Stream data with "
            "tf.data instead of loading it all.",
            ev(facts, "mem.total_mib", *(f"gpu{i}.memory_total_mib" for i in gpu_indexes(facts))),
            ("stream_tf_data", "add_swap"),
            "memory",
        )
    swap = facts.value("swap.total_mib")
    if swap == 0:
        yield Finding(
            "mem.no_swap",
            S.INFO,
            "No swap configured",
            "When RAM runs out, the kernel kills the biggest process at once (often your "
            "notebook kernel: 'kernel died') instead of slowing down. Swap gives headroom.",
            ev(facts, "swap.total_mib", "mem.total_mib"),
            ("add_swap",),
            "memory",
        )
    limit = facts.value("cgroup.memory_limit_mib")
    if isinstance(limit, (int, float)) and isinstance(total, (int, float)) and limit < total:
        yield Finding(
            "mem.cgroup_limit",
            S.WARNING,
            f"This process is capped at {gib(limit)} of RAM (the machine has {gib(total)})",
            "A memory cgroup (a container limit, a systemd slice, a Kubernetes limit, a "
            "JupyterHub spawner) caps memory below the machine's RAM. Exceeding it kills the "
            "process silently even when the machine has free memory.",
            ev(facts, "cgroup.memory_limit_mib", "cgroup.path", "mem.total_mib"),
            ("raise_memory_limit", "stream_tf_data"),
            "memory",
        )
    avail = facts.value("mem.available_mib")
    if (
        isinstance(avail, (int, float))
        and isinstance(total, (int, float))
        and total > 0
        and avail < 0.1 * total
    ):
        yield Finding(
            "mem.low_available",
            S.WARNING,
            f"Only {gib(avail)} of RAM is available now",
            "Other programs already use most of the RAM; a training run that loads data "
            "into memory is likely to be OOM-killed.",
            ev(facts, "mem.available_mib", "mem.total_mib"),
            ("stream_tf_data",),
            "memory",
        )


@check(SYSTEM)
def check_kernel_log(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if facts.value("kernel_log.readable") is False:
        yield Finding(
            "system.kernel_log_unreadable",
            S.UNKNOWN,
            "Could not read the kernel log",
            "Past OOM kills and GPU (Xid) errors are recorded there; without read access "
            "(dmesg restricted for non-root users) tfdoctor cannot check them. Run "
            "`sudo dmesg | grep -iE 'killed process|xid'` yourself.",
            ev(facts, "kernel_log.readable"),
            (),
            "system",
        )
        return
    kills = facts.value("kernel_log.oom_kills") or []
    if kills:
        yield Finding(
            "system.recent_oom_kills",
            S.WARNING,
            f"The kernel OOM killer killed {len(kills)} process{'es' if len(kills) > 1 else ''} "
            "recently",
            "When RAM ran out, the kernel killed these processes. A notebook whose kernel "
            "'died' without an error is usually one of them.",
            tuple(Evidence(str(k.get("line", k)), source="kernel log") for k in kills[-5:]),
            ("stream_tf_data", "add_swap"),
            "system",
        )
    xids = facts.value("kernel_log.xid_errors") or []
    if xids:
        codes = sorted({str(x.get("xid")) for x in xids})
        yield Finding(
            "system.xid_errors",
            S.ERROR
            if any(c in ("48", "63", "64", "74", "79", "92", "94", "95") for c in codes)
            else S.WARNING,
            f"The NVIDIA driver logged Xid errors ({', '.join(codes)})",
            "Xid lines are the driver reporting a GPU fault: 13/31/43 are usually a program's "
            "bad memory access, 79 'fallen off the bus' and 48/63/64/74/92/94/95 point at "
            "hardware, power or ECC problems.",
            tuple(Evidence(str(x.get("line", x)), source="kernel log") for x in xids[-5:]),
            ("check_gpu_hardware",),
            "system",
        )


@check(SYSTEM)
def check_oomd(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if facts.value("oomd.active") is True:
        yield Finding(
            "system.oomd_active",
            S.INFO,
            "systemd-oomd is active",
            "systemd-oomd kills whole sessions or scopes under memory pressure, earlier than "
            "the kernel would; a training run that grows RAM can vanish with only a journal "
            "line ('Killed ... due to memory pressure').",
            ev(facts, "oomd.active"),
            ("stream_tf_data",),
            "system",
        )


@check(SYSTEM)
def check_platform(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    if facts.value("os.is_wsl") is True:
        wsl = facts.value("os.wsl_version")
        yield Finding(
            "system.wsl",
            S.WARNING if wsl == 1 else S.INFO,
            f"Running under WSL{wsl or ''}",
            "WSL1 has no GPU support; use WSL2."
            if wsl == 1
            else "Under WSL2 the GPU comes from the Windows NVIDIA driver (>= 528.33); do not "
            "install a Linux NVIDIA driver inside WSL. WSL2's RAM is capped by .wslconfig "
            "(half the host's by default).",
            ev(facts, "os.is_wsl", "os.wsl_version", "os.kernel"),
            ("wsl_gpu_setup",),
            "system",
        )
    container = facts.value("os.container")
    if container and container != "none":
        yield Finding(
            "system.container",
            S.INFO,
            f"Running inside a container ({container})",
            "The GPU must be passed in (docker --gpus all / NVIDIA Container Toolkit) and the "
            "container's memory limit, not the host's RAM, decides when processes are killed.",
            ev(facts, "os.container", "cgroup.memory_limit_mib"),
            ("container_gpu_passthrough",),
            "system",
        )
    if facts.value("cpu.has_avx") is False:
        yield Finding(
            "system.cpu_no_avx",
            S.ERROR,
            "This CPU has no AVX instructions",
            "Official TensorFlow wheels since 1.6 require AVX and crash with 'Illegal "
            "instruction' on import without it. Virtual machines sometimes hide AVX from the "
            "guest.",
            ev(facts, "cpu.model", "cpu.has_avx"),
            ("tf_without_avx",),
            "system",
        )


def check_ids() -> list[str]:
    """Ids of the registered checks (for tests and --help)."""
    return [c.id for c in REGISTRY]


def all_fix_ids(findings: Iterable[Finding]) -> set[str]:
    return {f for finding in findings for f in finding.fixes}
