"""Checks of the host: RAM, swap and cgroup limits, the kernel log, the platform."""

from __future__ import annotations

from collections.abc import Iterator

from tfdoctor.core.checks.common import (
    ev,
    gpu_indexes,
    mib_as_gib,
)
from tfdoctor.core.checks.registry import NVML, SYSTEM, CheckContext, check
from tfdoctor.core.model import Evidence, Facts, Finding, Severity

S = Severity


@check(SYSTEM, NVML)
def check_host_memory(facts: Facts, ctx: CheckContext) -> Iterator[Finding]:
    total = facts.value("mem.total_mib")
    vram = sum(facts.value(f"gpu{i}.memory_total_mib") or 0 for i in gpu_indexes(facts))
    if isinstance(total, (int, float)) and vram and total < vram:
        yield Finding(
            "mem.ram_smaller_than_vram",
            S.WARNING,
            f"RAM ({mib_as_gib(total)}) is smaller than GPU memory ({mib_as_gib(vram)})",
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
            f"This process is capped at {mib_as_gib(limit)} of RAM "
            f"(the machine has {mib_as_gib(total)})",
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
            f"Only {mib_as_gib(avail)} of RAM is available now",
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
    kills = [k for k in facts.value("kernel_log.oom_kills") or [] if isinstance(k, dict)]
    if kills:
        shown = kills[-5:]
        cgroup_kill = any(k.get("kind") == "cgroup" for k in shown)
        yield Finding(
            "system.recent_oom_kills",
            S.WARNING,
            f"The kernel OOM killer killed {len(kills)} process{'es' if len(kills) > 1 else ''} "
            "recently",
            "When memory ran out, the kernel killed these processes. A notebook whose kernel "
            "'died' without an error is usually one of them. "
            + " ".join(_kill_in_words(k) for k in shown),
            tuple(Evidence(str(k.get("line", k)), source="kernel log") for k in shown),
            # a cgroup's own limit can be raised; a global kill needs less RAM used, or more
            ("stream_tf_data", "add_swap", *(("raise_memory_limit",) if cgroup_kill else ())),
            "system",
        )
    own = facts.value("kernel_log.own_oom_kills")
    if isinstance(own, int) and own > 0:
        yield Finding(
            "system.own_oom_kills_left_out",
            S.OK,
            f"{own} OOM kill{'s' if own > 1 else ''} in the kernel log "
            f"{'were' if own > 1 else 'was'} tfdoctor's own capped runs",
            "Reproduce runs under a RAM cap are killed by the kernel when they reach it, on "
            "purpose. Those kills are tfdoctor's experiments, not your problem, and are left "
            "out of these findings.",
            ev(facts, "kernel_log.own_oom_kills"),
            (),
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


def _kill_in_words(kill: dict[str, object]) -> str:
    """One OOM kill record as a sentence: who, how much RAM it held, and what ran out."""
    who = f"{kill.get('process') or 'A process'} (pid {kill.get('pid') or '?'})"
    rss = kill.get("rss_kib")
    held = f" held {mib_as_gib(rss / 1024)} of RAM and" if isinstance(rss, int) and rss else ""
    when = f" at {kill['time']}" if kill.get("time") else ""
    why = {
        "cgroup": f"its memory cgroup{' ' + str(kill['cgroup']) if kill.get('cgroup') else ''} "
        "reached its limit",
        "global": "the whole machine ran out of memory",
        "systemd-oomd": "systemd-oomd judged the memory pressure too high",
    }.get(str(kill.get("kind")), "memory ran out")
    return f"{who}{held} was killed{when}: {why}."


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
