"""Facts a log states about its machine, judged against the compatibility tables.

A log often says which TensorFlow it ran (a pip line, a docker tag), on which platform (Windows
paths, a WSL kernel), with which GPU (its compute capability) and which driver (nvidia-smi's
header). None of these is a symptom alone; together with ``core/knowledge/compat.toml`` they
decide causes no single line names: TF 2.11+ on native Windows has no GPU, a GPU below the
build's minimum compute capability is ignored, a driver below the build's CUDA floor is too old.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from tfdoctor.core.knowledge.compat_load import load as load_compat
from tfdoctor.core.knowledge.compat_types import CcVerdict
from tfdoctor.core.knowledge.loader import KnowledgeError
from tfdoctor.core.knowledge.versions import parse_cc

Line = tuple[str, int, str]


@dataclass(frozen=True)
class Stated:
    """What the log states about the machine (None: not stated)."""

    tf_version: str | None
    tf_line: Line | None
    windows: Line | None  # native Windows (WSL overrides)
    cc: str | None
    cc_line: Line | None
    driver: str | None
    driver_line: Line | None
    no_gpu_symptom: Line | None


def read_stated(found: Mapping[str, tuple[Sequence[Line], Sequence[Mapping[str, str]]]]) -> Stated:
    """Collect the stated facts from the hits of the fact signatures (by signature id)."""

    def hits(sid: str) -> list[tuple[Line, Mapping[str, str]]]:
        lines, groups = found.get(sid, ((), ()))
        return list(zip(lines, groups, strict=False))

    tf = [(ln, g["tfv"]) for ln, g in hits("tf_version_stated") if g.get("tfv")]
    windows = hits("windows_platform")
    wsl = hits("wsl_platform")
    ccs: list[tuple[Line, str]] = []
    for ln, g in hits("cc_stated"):
        cc = g.get("cc") or (f"{g['major']}.{g['minor']}" if g.get("major") else None)
        if cc and parse_cc(cc) is not None:
            ccs.append((ln, cc))
    drivers = [(ln, g["driver"]) for ln, g in hits("nvsmi_versions") if g.get("driver")]
    drivers += [
        (ln, g["version"])
        for ln, g in hits("driver_reported_versions")
        if g.get("which") == "kernel" and g.get("version")
    ]
    driver = drivers[0] if drivers else None
    symptom = hits("gpu_list_empty")
    return Stated(
        tf_version=tf[-1][1] if tf else None,
        tf_line=tf[-1][0] if tf else None,
        windows=windows[0][0] if windows and not wsl else None,
        cc=ccs[0][1] if ccs else None,
        cc_line=ccs[0][0] if ccs else None,
        driver=driver[1] if driver else None,
        driver_line=driver[0] if driver else None,
        no_gpu_symptom=symptom[0][0] if symptom else None,
    )


def _older(a: str, b: str) -> bool | None:
    try:
        return Version(a) < Version(b)
    except InvalidVersion:
        return None


def fact_rules(
    stated: Stated,
    add: Callable[[str, float, list[Line]], None],
    note: Callable[[str, str], None],
    *,
    gpu_symptom: bool,
) -> None:
    """Add the causes the stated facts imply (``gpu_symptom``: the log shows no GPU in use)."""
    try:
        compat = load_compat()
    except KnowledgeError:
        return  # a broken install: the signatures still work without the tables
    tf = stated.tf_version
    if tf is None:
        return
    tf_line = [stated.tf_line] if stated.tf_line else []

    # TF 2.11+ on native Windows is a CPU-only build.
    if stated.windows is not None and compat.windows_native_gpu(tf) is False:
        symptom = gpu_symptom or stated.no_gpu_symptom is not None
        lines = [*tf_line, stated.windows]
        if stated.no_gpu_symptom is not None:
            lines.append(stated.no_gpu_symptom)
        add("no_gpu_visible", 4.0 if symptom else 2.5, lines)
        last = compat.windows_native_last_tf or "2.10"
        note(
            "no_gpu_visible",
            f"This is TensorFlow {tf} on native Windows: {last} was the last release with GPU "
            f"support there, so it runs on the CPU only. Use WSL2, or TensorFlow {last}.",
        )

    # A GPU below the build's minimum compute capability is ignored.
    if stated.cc is not None:
        verdict = compat.cc_support(tf, stated.cc)
        if verdict.verdict is CcVerdict.UNSUPPORTED:
            where = [stated.cc_line] if stated.cc_line else []
            add("unsupported_gpu_arch", 4.0, tf_line + where)
            note("unsupported_gpu_arch", verdict.explanation)

    # A driver below what the build's CUDA needs.
    if stated.driver is not None:
        req = compat.min_driver_for_tf(tf, "windows" if stated.windows is not None else "linux")
        if req is not None and _older(stated.driver, req.minimum):
            where = [stated.driver_line] if stated.driver_line else []
            add("driver_too_old", 4.0, tf_line + where)
            note(
                "driver_too_old",
                f"The NVIDIA driver is {stated.driver}; TensorFlow {tf} is built for CUDA "
                f"{req.cuda_version}, which needs driver {req.minimum} or newer.",
            )
